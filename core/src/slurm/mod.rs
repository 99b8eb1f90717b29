//! Slurm's commands (`squeue`, `scontrol`, `sacct`, `sstat`) run with a bounded time, a pinned time
//! format and locale, and their output parsed from captured fixtures.

pub mod command;
pub mod conf;
pub mod hostlist;
pub mod job_id;
pub mod munge;
pub mod plugstack;
pub mod quickack;
pub mod release;
pub mod sacct;
pub mod scontrol;
pub mod squeue;
pub mod sstat;
pub mod units;
