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
//! - [`http`]: the small bounded HTTP server behind `--listen`.

pub mod http;
pub mod live;
pub mod prometheus;
pub mod textfile;

/// `ClusterName=` from the text of a `slurm.conf` (the `cluster` label when the recording
/// does not name one). Keys are case-insensitive in slurm.conf; `#` starts a comment.
pub fn cluster_name_from_slurm_conf(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.split('#').next().unwrap_or("").trim();
        let (k, v) = l.split_once('=')?;
        (k.trim().eq_ignore_ascii_case("ClusterName") && !v.trim().is_empty())
            .then(|| v.trim().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_name_is_read_from_slurm_conf() {
        let conf = "# ClusterName=commented\nSlurmctldHost=a\nclustername = tiger # main\n";
        assert_eq!(cluster_name_from_slurm_conf(conf).as_deref(), Some("tiger"));
        assert_eq!(cluster_name_from_slurm_conf("ClusterName=\n"), None);
        assert_eq!(cluster_name_from_slurm_conf(""), None);
    }
}
