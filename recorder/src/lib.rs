//! The recorder: the only slurmwatch library code that runs as root inside slurmstepd. The
//! SPANK plugin (`plugin/`, a `cdylib` in every job step) and the epilog (`epilog/`, run by
//! slurmd when the job ends) link this crate and no other part of slurmwatch. It reads the
//! job's cgroup, /proc and the cards Slurm gave the job, writes the per-job SQLite file into
//! the root-only spool, and summarises that file at the end (docs/design.md §6, §7).
//! `slurmwatch-core`, the CLI's library, builds on it and re-exports each module at its old
//! path (`slurmwatch_core::store`, `slurmwatch_core::analysis::summary`, …).
//!
//! Its dependencies are short because each one runs as root on every node: `libc` for the
//! few syscalls root makes itself (`openat` without following links, per-thread fsuid,
//! `getpwuid_r`), `rusqlite` with SQLite built in (one version and one hardening on every
//! node, whatever the node ships), `serde`/`serde_json` for the summary the file stores,
//! `nvml-wrapper` for the cards (libnvidia-ml opened only for a job that has one), `glob`
//! for the plugstack `include` lines slurmstepd follows, `tempfile` for root's private copy
//! of a user-writable file, `thiserror` for the errors. No network, compression, hashing or
//! Slurm command: sacct, the report, the node's HTTP endpoint, history and the fleet live in
//! core, and a crate they need never reaches a job step.

pub mod analysis;
pub mod as_user;
pub mod collect;
pub mod error;
pub mod model;
pub mod options;
pub mod private_dir;
pub mod recording;
pub mod sample;
pub mod site;
pub mod slurm;
pub mod spool;
pub mod store;
pub mod sys;
