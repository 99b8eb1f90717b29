//! `slurmwatch metrics`: the node's running jobs as Prometheus metrics — printed once, written
//! for node_exporter's textfile collector, or served over HTTP. The work is in
//! `slurmwatch_core::export`; this is argument handling.

use std::collections::HashSet;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use slurmwatch_core::export::live::{self, FileState, GatherOptions};
use slurmwatch_core::export::{http, prometheus, textfile};
use slurmwatch_core::report::slurmdbd;
use slurmwatch_core::slurm::{conf, munge};

#[derive(Args)]
#[command(after_help = "Examples:
  slurmwatch metrics                                    # print once (text exposition format)
  slurmwatch metrics --textfile /var/lib/prometheus/node-exporter/slurmwatch.prom
  slurmwatch metrics --listen 127.0.0.1:9944            # serve GET /metrics
  slurmwatch metrics --listen 0.0.0.0:9944 --jobstats   # also the series jobstats queries")]
pub struct MetricsArgs {
    /// The node's spool (default: plugstack.conf's `spool=`, else /var/spool/slurmwatch).
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// The node name for a spool with `%n` (default: this host's short name).
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// The `cluster` label (default: slurm.conf's ClusterName).
    #[arg(long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// Also publish the series Princeton's jobstats queries (cgroup_* and nvidia_gpu_*).
    #[arg(long)]
    pub jobstats: bool,
    /// Write the metrics atomically to this file (node_exporter's textfile collector) instead
    /// of printing them.
    #[arg(long, value_name = "PATH", conflicts_with = "listen")]
    pub textfile: Option<PathBuf>,
    /// Serve `GET /metrics` on this address (e.g. 127.0.0.1:9944), one scrape per request.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
}

pub fn run(args: MetricsArgs) -> Result<i32> {
    let config = slurmwatch_core::slurm::plugstack::site_config();
    let spool = match args.spool.clone() {
        Some(s) => s,
        None => {
            let node = args
                .node
                .clone()
                .unwrap_or_else(|| slurmwatch_core::sys::short_host_name().unwrap_or_default());
            slurmwatch_core::options::spool_for_node(&config.spool_dir, &node).with_context(
                || {
                    format!(
                        "the spool {} names the node (%n) and {node:?} is not a node name: pass --node or --spool",
                        config.spool_dir.display()
                    )
                },
            )?
        }
    };
    let render_opts = prometheus::RenderOptions {
        cluster: args
            .cluster
            .clone()
            .or_else(|| conf::value_in(&conf::path(), "ClusterName")),
        jobstats: args.jobstats,
    };
    let max_interval = config.max_interval_seconds;
    // Each failing file is named on stderr once per process, not at every scrape.
    let mut reported: HashSet<(PathBuf, String)> = HashSet::new();
    // Ended and unreadable files are not reopened until they change (see `Verdicts`).
    let mut verdicts = live::Verdicts::default();
    let summary_spool = spool.clone();
    let mut scrape = move || {
        let s = live::gather_with(
            &spool,
            &GatherOptions::standard(max_interval),
            &mut verdicts,
        );
        if let Some(e) = &s.spool_error {
            if reported.insert((spool.clone(), e.clone())) {
                eprintln!("slurmwatch metrics: {e}");
            }
        }
        for f in &s.files {
            if let FileState::Error(e) = &f.state {
                if reported.insert((f.path.clone(), e.clone())) {
                    eprintln!("slurmwatch metrics: skipped: {e}");
                }
            }
        }
        prometheus::render(&s, &render_opts)
    };
    if let Some(addr) = args.listen {
        let listener =
            TcpListener::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
        eprintln!("slurmwatch metrics: serving GET /metrics and /jobs/<id>/summary on {addr}");
        http::serve(
            &listener,
            &mut Node {
                spool: summary_spool,
                scrape,
            },
        );
    }
    if let Some(path) = &args.textfile {
        if path.extension().and_then(|e| e.to_str()) != Some("prom") {
            bail!(
                "{}: node_exporter's textfile collector reads only *.prom files",
                path.display()
            );
        }
    }
    let text = scrape();
    if let Some(path) = &args.textfile {
        textfile::write_atomically(path, &text).map_err(anyhow::Error::msg)?;
        return Ok(0);
    }
    crate::output::print(&text).map_err(anyhow::Error::msg)?;
    Ok(0)
}

/// The node's two routes: its running jobs' metrics, and a job's summary for the controller.
struct Node<F: FnMut() -> String> {
    spool: PathBuf,
    scrape: F,
}

impl<F: FnMut() -> String> http::Routes for Node<F> {
    fn metrics(&mut self) -> String {
        (self.scrape)()
    }

    fn job_summary(&mut self, job_id: u32, nonce: &str) -> http::Reply {
        match slurmdbd::from_spool(&self.spool, job_id) {
            Ok(Some(n)) => {
                let body = match serde_json::to_string(&n) {
                    Ok(json) => json,
                    Err(e) => return http::Reply::Unavailable(e.to_string()),
                };
                // Signed, so the controller can tell this root-run endpoint from a user's
                // listener on the same port (slurm::munge).
                let payload = munge::summary_payload(job_id, &n.meta.node, nonce, body.as_bytes());
                match munge::sign("munge", &payload, munge::TIMEOUT) {
                    Ok(c) => http::Reply::Json {
                        body,
                        credential: Some(c),
                    },
                    Err(e) => {
                        eprintln!("slurmwatch metrics: job {job_id}: {e}");
                        http::Reply::Unavailable(e)
                    }
                }
            }
            Ok(None) => http::Reply::NotFound(format!(
                "job {job_id} was not recorded on this node ({})",
                self.spool.display()
            )),
            Err(e) => {
                eprintln!("slurmwatch metrics: job {job_id}: {e}");
                http::Reply::Unavailable(e)
            }
        }
    }
}
