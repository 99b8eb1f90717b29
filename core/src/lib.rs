//! slurmwatch's library: collect → store → model → analysis → render.
//! The plugin, the epilog and the CLI are thin shells over this crate.

pub mod analysis;
pub mod as_user;
pub mod collect;
pub mod error;
pub mod export;
pub(crate) mod fasthash;
pub mod fleet;
pub mod history;
pub mod jobs;
pub mod locate;
pub mod mailq;
pub mod model;
pub mod options;
pub mod private_dir;
pub mod queue;
pub mod recording;
pub mod render;
pub mod report;
pub mod sample;
pub mod site;
pub mod slurm;
pub mod snapshot;
pub mod snapshot_merge;
pub mod spool;
pub mod store;
pub mod sys;
pub mod units;
