//! Feeding what the node's spool holds to other monitoring systems (`slurmwatch metrics`).
//!
//! A site that already runs Prometheus (and perhaps Princeton's jobstats on top of it) wants
//! the per-job figures slurmwatch records without running a second sampler on every node:
//! the plugin already reads each job's cgroup and cards, so the exporter only reads the
//! latest row of each running job's file. Split by job:
//!
//! - [`live`]: which files in the spool belong to running jobs, and their latest readings
//!   (hardened opens, a deadline per file and per scrape; never writes);
//! - [`prometheus`]: those readings as Prometheus text exposition (native `slurmwatch_*`
//!   series, and optionally the names jobstats queries);
//! - [`textfile`]: the atomic write for node_exporter's textfile collector;
//! - [`http`]: the small bounded HTTP server behind `--listen` (metrics, and each finished
//!   job's summary for the controller);
//! - [`admin_comment_store`]: the controller's side, from `EpilogSlurmctld`: the nodes'
//!   summaries of a job collected and stored as its AdminComment.

pub mod admin_comment_store;
pub mod http;
pub mod live;
pub mod prometheus;
pub mod textfile;
