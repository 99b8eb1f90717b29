//! Slurm's commands (`squeue`, `scontrol`, `sacct`, `sstat`) run with a bounded time, a pinned time
//! format and locale, and their output parsed from captured fixtures.

pub mod command;
pub mod hostlist;
pub mod munge;
pub mod quickack;
pub mod release;
pub mod sacct;
pub mod scontrol;
pub mod squeue;
pub mod sstat;
pub mod units;

// Job ids and the plugstack line are the recorder's (the epilog reads them too).
pub use slurmwatch_recorder::slurm::{conf, job_id, plugstack};
