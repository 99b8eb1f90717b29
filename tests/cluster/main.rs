//! The real-cluster tier, one test binary: real jobs on the local Slurm that
//! `scripts/test.sh` starts, with the real plugin loaded through plugstack.conf. Every test is
//! `#[ignore]`d so plain `cargo test` stays fast; `scripts/test.sh` runs them with `--ignored`.

mod cards;
mod cgroup_v2;
mod cli;
mod doctor;
mod efficiency;
mod gpu;
mod harness;
mod history;
mod hostile_endpoint;
mod hostile_mail;
mod hostile_readers;
mod hostile_sacct;
mod jobs;
mod jobstats;
mod mail;
mod marks;
mod multinode;
mod package;
mod plugin;
mod prometheus;
mod queue;
mod recorder;
mod report;
mod security;
mod site;
mod slurmdbd;
