//! `slurmwatch metrics`: the node's running jobs as Prometheus metrics — printed once, written
//! for node_exporter's textfile collector, or served over HTTP. The work is in
//! `slurmwatch_core::export`; this is argument handling.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use clap::Args;
use slurmwatch_core::analysis::admin_comment::Incarnation;
use slurmwatch_core::export::live::{self, FileState, GatherOptions};
use slurmwatch_core::export::{http, prometheus, textfile};
use slurmwatch_core::report::node_summary::{self, Spooled};
use slurmwatch_core::site::Site;
use slurmwatch_core::slurm::{conf, munge};

#[derive(Args)]
#[command(after_help = "Examples:
  slurmwatch metrics                                    # print once (text exposition format)
  slurmwatch metrics --textfile /var/lib/prometheus/node-exporter/slurmwatch.prom
  slurmwatch metrics --listen 127.0.0.1:9944            # serve GET /metrics to root here
  slurmwatch metrics --listen 0.0.0.0:9944 --jobstats --metrics-allow 10.0.0.5
                        # IPv4 and IPv6; Prometheus at 10.0.0.5 reads, with jobstats' series

Who reads what: GET /metrics lists every running job on the node with its user, so it is
served to root's own connections on this node and to the peers --metrics-allow and
--metrics-user name (nothing else: Slurm's PrivateData=jobs holds). A job's summary
(GET /jobs/<id>/summary) is served only to the controller: a request with a munge
credential of root or slurm.conf's SlurmUser over that job. See docs/admin.md.")]
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
    /// Serve `GET /metrics` on this address (e.g. 0.0.0.0:9944: IPv4 and IPv6 both), one
    /// scrape per request.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<SocketAddr>,
    /// Also serve `GET /metrics` to peers in this network or at this address (a Prometheus
    /// server; repeat or separate with commas). A network holding this node's own addresses
    /// opens the metrics to every user on the node.
    #[arg(long, value_name = "NET", value_delimiter = ',', value_parser = http::parse_net, requires = "listen")]
    pub metrics_allow: Vec<http::IpNet>,
    /// Also serve `GET /metrics` to this local user's connections (e.g. a Prometheus agent
    /// on the node; repeat or separate with commas).
    #[arg(long, value_name = "USER", value_delimiter = ',', requires = "listen")]
    pub metrics_user: Vec<String>,
}

/// The spool this node's files are in: `--spool`, else the site's, with `%n` filled by
/// `--node` or this node's name (`slurmwatch_core::site`).
fn node_spool(args: &MetricsArgs, site: &Site) -> Result<PathBuf> {
    if let Some(s) = &args.spool {
        return Ok(s.clone());
    }
    let site_spool = site.spool_template();
    let node = args
        .node
        .clone()
        .unwrap_or_else(|| site.node.clone().unwrap_or_default());
    slurmwatch_core::options::spool_for_node(site_spool, &node).with_context(|| {
        format!(
            "the spool {} names the node (%n) and {node:?} is not a node name: pass --node or --spool",
            site_spool.display()
        )
    })
}

pub fn run(args: MetricsArgs) -> Result<i32> {
    let site = Site::here();
    let spool = node_spool(&args, site)?;
    let render_opts = prometheus::RenderOptions {
        cluster: args.cluster.clone().or_else(|| site.cluster.clone()),
        jobstats: args.jobstats,
    };
    let max_interval = site.plugin.max_interval_seconds;
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
        let mut metrics_uids = Vec::new();
        for name in &args.metrics_user {
            match slurmwatch_core::sys::user_uid(name) {
                Some(u) => metrics_uids.push(u),
                None => bail!("--metrics-user {name:?}: no such user on this node.\nhint: name the local user the scraper runs as (getent passwd)"),
            }
        }
        let slurm_user =
            conf::value_in(&conf::path(), "SlurmUser").unwrap_or_else(|| "root".into());
        let Some(slurm_uid) = slurmwatch_core::sys::user_uid(&slurm_user) else {
            bail!("slurm.conf's SlurmUser {slurm_user:?} is no user on this node.\nhint: a job's summary is served only to the controller's credential of SlurmUser or root; check {}", conf::path().display());
        };
        let listeners = http::listen(addr).with_context(|| format!("cannot listen on {addr}"))?;
        eprintln!("slurmwatch metrics: serving GET /metrics and /jobs/<id>/summary on {addr}");
        let node = Node {
            spool: summary_spool,
            scrape: Mutex::new(Box::new(scrape)),
            controller_uids: vec![0, slurm_uid],
        };
        http::serve(
            listeners,
            Arc::new(node),
            Arc::new(http::Access {
                metrics_nets: args.metrics_allow.clone(),
                metrics_uids,
            }),
            http::Limits::default(),
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
struct Node {
    spool: PathBuf,
    /// One scrape at a time: it keeps what it learned of each file between scrapes.
    scrape: Mutex<Box<dyn FnMut() -> String + Send>>,
    /// Whose credential may ask for a summary: root and slurm.conf's SlurmUser.
    controller_uids: Vec<u32>,
}

impl http::Routes for Node {
    fn metrics(&self) -> String {
        (self.scrape.lock().unwrap_or_else(|e| e.into_inner()))()
    }

    fn authorize(&self, ask: &http::SummaryAsk, credential: &str) -> Result<(), String> {
        let want = munge::request_payload(ask.job_id, ask.uid, ask.start_unix, &ask.nonce);
        let trusted = munge::Trusted {
            uids: &self.controller_uids,
            who: "root or SlurmUser: a job's summary is served only to the controller",
        };
        munge::check("unmunge", Some(credential), &want, trusted, munge::TIMEOUT)
            .map_err(|e| e.to_string())
    }

    fn job_summary(&self, ask: &http::SummaryAsk) -> http::Reply {
        let job_id = ask.job_id;
        let run = Incarnation {
            uid: ask.uid,
            start_unix: ask.start_unix,
        };
        match node_summary::from_spool(&self.spool, job_id, run) {
            Ok(Spooled::Recorded(n)) => {
                let body = match serde_json::to_string(&n) {
                    Ok(json) => json,
                    Err(e) => return http::Reply::Unavailable(e.to_string()),
                };
                // Signed, so the controller can tell this root-run endpoint from a user's
                // listener on the same port (slurm::munge).
                let payload =
                    munge::summary_payload(job_id, &n.meta.node, &ask.nonce, body.as_bytes());
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
            Ok(Spooled::NotRecorded) => http::Reply::NotFound(format!(
                "job {job_id} was not recorded on this node ({})",
                self.spool.display()
            )),
            Ok(Spooled::Earlier(why)) => {
                http::Reply::NotFound(format!("job {job_id} was not recorded on this node: {why}"))
            }
            Err(e) => {
                eprintln!("slurmwatch metrics: job {job_id}: {e}");
                http::Reply::Unavailable(e)
            }
        }
    }
}
