//! A job's recordings for `report` and `jobs`: its files, where `crate::locate` says they are,
//! each read whole and kept only when it records this job; else its summary in slurmdbd (the
//! AdminComment), as recordings without rows.

use super::NodeRecording;
use crate::analysis::admin_comment::{self, DecodeError};
use crate::locate::{Locator, Wanted};
use crate::render::terminal;
use crate::slurm::{hostlist, sacct};

/// The job's recordings from its files, and a note for each file found but not used.
#[derive(Default)]
pub struct Found {
    pub recordings: Vec<NodeRecording>,
    /// One sentence each, ready for the terminal (a path or error escaped).
    pub notes: Vec<String>,
}

/// The job's files (`raw_id`: the job's own id, which names them), one per node: the first
/// found per node (the live spool before a copy) that records this job. An unreadable file
/// among several is skipped and said; when it is the only one, the error, rather than pretend
/// nothing was recorded.
pub fn from_files(
    locator: &mut Locator,
    raw_id: u32,
    acct: Option<&sacct::JobAccounting>,
) -> crate::error::Result<Found> {
    let nodes: Vec<String> = acct
        .and_then(|a| a.job.node_list.as_deref())
        .and_then(|l| hostlist::expand(l).ok())
        .unwrap_or_default();
    // A report may not know the job's nodes (no sacct): every node's file of the job counts.
    let paths = locator.files(&Wanted {
        job_id: raw_id,
        nodes: &nodes,
        user: acct.and_then(|a| a.job.user.as_deref()),
        uid: acct.and_then(|a| a.job.uid),
        other_nodes: true,
    });
    let mut out = Found::default();
    for p in &paths {
        match NodeRecording::load(p) {
            Ok(r) if r.meta.job_id == u64::from(raw_id) => {
                if !out.recordings.iter().any(|o| o.meta.node == r.meta.node) {
                    out.recordings.push(r);
                }
            }
            Ok(_) => out.notes.push(format!(
                "{} records another job; not used",
                terminal::field(&p.display().to_string())
            )),
            Err(e) if paths.len() > 1 => out
                .notes
                .push(format!("{}; not used", terminal::text(&e.to_string()))),
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}

/// The summary the controller stored in the job's AdminComment, as recordings (one per
/// node; none when there is no summary), and a note when it is damaged or lacks nodes.
pub fn from_admin_comment(
    acct: Option<&sacct::JobAccounting>,
) -> (Vec<NodeRecording>, Option<String>) {
    let Some(c) = acct.and_then(|a| a.job.admin_comment.as_deref()) else {
        return (Vec::new(), None);
    };
    match admin_comment::decode(c) {
        Ok(summary) => {
            let partial = (!summary.unanswered_nodes.is_empty()).then(|| {
                format!(
                    "The summary stored when the job ended has no figures from {} (no answer from its endpoint then): the job's totals here are its other nodes' only; the site's `slurmwatch ctld-backfill` fills them in.",
                    terminal::field(&summary.unanswered_nodes.join(", "))
                )
            });
            (
                summary
                    .nodes
                    .into_iter()
                    .map(|n| n.into_recording())
                    .collect(),
                partial,
            )
        }
        Err(e @ DecodeError::Damaged(_)) => (Vec::new(), Some(format!("{e}."))),
        Err(_) => (Vec::new(), None),
    }
}
