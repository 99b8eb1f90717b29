//! slurmwatch's library: collect → store → model → analysis → render.
//! The CLI is a thin shell over this crate. Collect, store, model and the epilog's summary
//! are `slurmwatch-recorder`, the part the plugin and the epilog link alone (it runs as root
//! inside the job's step, docs/design.md §6); this crate re-exports its modules at their old
//! paths and adds what reads the recordings: Slurm's commands, the report, history, the
//! fleet, the queue and the node's endpoint.

pub mod analysis;
pub mod export;
pub(crate) mod fasthash;
pub mod fleet;
pub mod history;
pub mod jobs;
pub mod locate;
pub mod mailq;
pub mod queue;
pub mod render;
pub mod report;
pub mod slurm;
pub mod snapshot;
pub mod snapshot_merge;
pub mod stats;
pub mod units;

// The recorder's modules, at the paths they had before it was split out.
pub use slurmwatch_recorder::{
    as_user, collect, error, model, options, private_dir, recording, sample, site, spool, store,
    sys,
};
