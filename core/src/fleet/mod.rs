//! Across jobs, per card and per node: which cards keep slowing jobs down (`slurmwatch cards`).
//!
//! The analysis ([`cards`]) reads a list of per-job entries ([`CardJob`]: a job's cards on one
//! node, as its epilog summary describes them) and does no I/O. Where the entries come from is
//! a [`JobSource`]: the summaries kept in slurmdbd ([`summaries`], from sacct's AdminComment)
//! and the recorded files in the spools and archives ([`files`], for jobs without one);
//! [`gather`] merges sources, the first to name a job on a node wins.

pub mod cards;
pub mod files;
pub mod history;
pub mod render;
pub mod summaries;

use crate::analysis::summary::GpuSummary;

/// One job's cards on one node, whatever it was read from.
#[derive(Debug, Clone, PartialEq)]
pub struct CardJob {
    /// Slurm's raw numeric job id.
    pub job_id: String,
    pub user: Option<String>,
    /// Slurm's node name.
    pub node: String,
    pub start_unix_ms: Option<i64>,
    pub end_unix_ms: Option<i64>,
    /// The job's per-card summaries on this node (keyed by `uuid`).
    pub gpus: Vec<GpuSummary>,
    /// Where it was read: a file's path, or the name of another source.
    pub source: String,
}

impl CardJob {
    /// The time the job is placed at: its start, else its end.
    pub fn t_unix_ms(&self) -> Option<i64> {
        self.start_unix_ms.or(self.end_unix_ms)
    }

    /// Whether the job ran (at least partly) within the window. A job with no time at all
    /// cannot be placed, so it is not in any window.
    pub fn in_window(&self, w: &Window) -> bool {
        let start = self.start_unix_ms.or(self.end_unix_ms);
        let end = self.end_unix_ms.or(self.start_unix_ms);
        matches!((start, end), (Some(s), Some(e)) if s <= w.until_unix_ms && e >= w.since_unix_ms)
    }
}

/// The time window the view covers, Unix ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub since_unix_ms: i64,
    pub until_unix_ms: i64,
}

/// What a source found: the entries, how many records it read, and what it could not read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gathered {
    pub jobs: Vec<CardJob>,
    /// Records looked at (files opened, summaries parsed).
    pub read: usize,
    /// One line per record that could not be read (the first [`MAX_SKIPPED_NOTES`]).
    pub skipped: Vec<String>,
    /// How many could not be read in all.
    pub skipped_count: usize,
    /// Sentences on what was found but not counted, and why (files their owners could have
    /// edited that Slurm does not confirm, directories a template level left out).
    pub left_out: Vec<String>,
    /// How many files were left out as [`reject`](Self::reject)ed.
    pub rejected_count: usize,
}

/// Most skip notes kept (a spool of unreadable files must not flood the output).
pub const MAX_SKIPPED_NOTES: usize = 5;

impl Gathered {
    pub fn skip(&mut self, note: String) {
        self.skipped_count += 1;
        if self.skipped.len() < MAX_SKIPPED_NOTES {
            self.skipped.push(note);
        }
    }

    /// A file read but not counted: the first [`MAX_SKIPPED_NOTES`] are said one by one,
    /// the rest by number ([`finish_rejects`](Self::finish_rejects)).
    pub fn reject(&mut self, path: &std::path::Path, why: &str) {
        self.rejected_count += 1;
        if self.rejected_count <= MAX_SKIPPED_NOTES {
            self.left_out
                .push(format!("{} not counted: {why}", path.display()));
        }
    }

    /// The sentence for the rejected files not said one by one.
    fn finish_rejects(&mut self) {
        if self.rejected_count > MAX_SKIPPED_NOTES {
            self.left_out.push(format!(
                "{} more job files not counted for the same kinds of reasons",
                self.rejected_count - MAX_SKIPPED_NOTES
            ));
        }
    }
}

/// A place per-job card summaries come from.
pub trait JobSource {
    /// The GPU jobs that ran (at least partly) within `w`. Jobs without cards may be left out.
    fn gather(&self, w: &Window) -> Gathered;
}

/// Every source's jobs, one entry per (job, node): the first source to name it wins, so list
/// the most complete source first.
pub fn gather(sources: &[&dyn JobSource], w: &Window) -> Gathered {
    let mut out = Gathered::default();
    let mut seen = std::collections::HashSet::new();
    for s in sources {
        let g = s.gather(w);
        out.read += g.read;
        out.skipped_count += g.skipped_count;
        let mut g = g;
        g.finish_rejects();
        out.rejected_count += g.rejected_count;
        out.left_out.extend(g.left_out);
        for n in g.skipped {
            if out.skipped.len() < MAX_SKIPPED_NOTES {
                out.skipped.push(n);
            }
        }
        for j in g.jobs {
            if seen.insert((j.job_id.clone(), j.node.clone())) {
                out.jobs.push(j);
            }
        }
    }
    out
}

/// The site's sources, most complete first: the summaries in slurmdbd (unless `sacct_timeout`
/// is `None`: files only), then the files in the site's spool (`spool=`, or `spool`) and
/// archive, and `extra` directories; gathered over `w`.
pub fn gather_site(
    spool: Option<&std::path::Path>,
    extra: &[std::path::PathBuf],
    sacct_timeout: Option<std::time::Duration>,
    w: &Window,
) -> Gathered {
    let mut files = files::Files::site(spool, extra);
    files.slurm = sacct_timeout.map(|timeout| crate::slurm::sacct::Query {
        timeout,
        ..crate::slurm::sacct::Query::default()
    });
    match sacct_timeout {
        None => gather(&[&files], w),
        Some(timeout) => {
            let summaries = summaries::Summaries {
                query: crate::slurm::sacct::Query {
                    timeout,
                    ..crate::slurm::sacct::Query::default()
                },
                users: Vec::new(),
            };
            gather(&[&summaries, &files], w)
        }
    }
}
