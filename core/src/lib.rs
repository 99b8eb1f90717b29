//! slurmwatch's library: collect → store → model → analysis → render.
//! The plugin, the epilog and the CLI are thin shells over this crate.

pub mod collect;
pub mod error;
pub mod model;
pub mod options;
pub mod sample;
pub mod slurm;
pub mod store;
