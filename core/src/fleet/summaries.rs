//! The summaries kept in slurmdbd as a [`JobSource`]: one `sacct` window query (chunked and
//! bounded as for `history`), and for each job whose `AdminComment` is ours
//! (`analysis::admin_comment`), one entry per recorded node, exactly as the node's file would
//! give it ([`super::files::read_job`]: the recording's start, its last reading, the cards'
//! summaries). No file is opened, so it answers on a login node, for every user sacct shows.

use super::{CardJob, Gathered, JobSource, Window};
use crate::analysis::admin_comment::{self, NodeSummary};
use crate::slurm::sacct;

/// Whose jobs: as `sacct -a` (everyone sacct lets this user see) unless users are named.
#[derive(Debug, Clone, Default)]
pub struct Summaries {
    pub query: sacct::Query,
    pub users: Vec<String>,
}

/// A node's summary as a [`CardJob`]; `None` when it saw no card.
pub fn card_job(n: NodeSummary, source: &str) -> Option<CardJob> {
    if n.summary.gpus.is_empty() {
        return None;
    }
    Some(CardJob {
        job_id: n.meta.job_id.to_string(),
        user: Some(n.meta.user),
        node: n.meta.node,
        start_unix_ms: Some(n.meta.started_unix_ms),
        end_unix_ms: n.summary.last_t_unix_ms,
        gpus: n.summary.gpus,
        source: source.to_string(),
    })
}

impl JobSource for Summaries {
    fn gather(&self, w: &Window) -> Gathered {
        let mut out = Gathered::default();
        let window = sacct::Window {
            since_unix: w.since_unix_ms.div_euclid(1000),
            until_unix: w.until_unix_ms.div_euclid(1000) + 1,
            users: self.users.clone(),
            all_users: self.users.is_empty(),
            partition: None,
        };
        let batch = match self.query.window(&window) {
            Ok(b) => b,
            Err(e) => {
                out.skip(format!("slurmdbd summaries: {e}"));
                return out;
            }
        };
        for r in &batch.records {
            let Some(c) = r.job.admin_comment.as_deref() else {
                continue;
            };
            if !admin_comment::is_ours(c) {
                continue;
            }
            out.read += 1;
            match admin_comment::decode(c) {
                Ok(summary) => {
                    for n in summary.nodes {
                        if let Some(j) = card_job(n, "slurmdbd:AdminComment") {
                            if j.in_window(w) {
                                out.jobs.push(j);
                            }
                        }
                    }
                }
                Err(e) => out.skip(format!("job {}: {e}", r.job.job_id)),
            }
        }
        out
    }
}
