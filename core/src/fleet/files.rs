//! The recorded files as a [`JobSource`]: every job file in the spool and the archives
//! (`<job>.sqlite`, `<job>.<node>.sqlite`, a moved-aside `<job>.stale-<t>.sqlite`), read
//! through their epilog summary (computed when the epilog has not run yet); where they are is
//! `locate::scan`'s to say. A file someone else could have written counts only for what its
//! own name, its owner and Slurm's record confirm.

use std::path::{Path, PathBuf};

use super::{CardJob, Gathered, JobSource, Window};
use crate::analysis::summary::{self, Summary};
use crate::locate::scan::{expand_dirs, is_job_file};
use crate::store::{self, Reader};

/// Where the files are.
#[derive(Debug, Clone, Default)]
pub struct Files {
    /// Spools and archive directories, each a plain directory or a `%` template.
    pub dirs: Vec<String>,
    /// How a file someone else could have written (not root's, not the caller's) is checked
    /// against Slurm's record of its job; `None`: such files are left out, and said.
    pub slurm: Option<crate::slurm::sacct::Query>,
}

impl Files {
    pub fn new(dirs: impl IntoIterator<Item = String>) -> Files {
        Files {
            dirs: dirs.into_iter().collect(),
            slurm: None,
        }
    }
}

impl Files {
    /// The site's spool (`spool=` in plugstack.conf, or `spool` when given) and archive
    /// (`archive=`), then `extra` directories.
    pub fn site(spool: Option<&Path>, extra: &[PathBuf]) -> Files {
        let dirs = crate::locate::site_places(spool, extra)
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        Files { dirs, slurm: None }
    }
}

/// Who could have written a job file: root's (the spool), the caller's own, or another
/// user's (an archive copy: its owner can edit every figure in it).
fn written_by_others(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no failure mode.
    let me = unsafe { libc::geteuid() };
    let roots = m.uid() == 0 && m.mode() & 0o022 == 0;
    !(roots || (me != 0 && m.uid() == me))
}

/// A job read from a file another user could have written, kept until Slurm confirms it.
struct Unconfirmed {
    job: CardJob,
    owner: u32,
}

/// Whether a file another user could have written may count: its owner, its name and its
/// own `meta` must agree (the owner is the job's user, the name is the job's archive name
/// on its node). Slurm's record is asked next ([`confirmed_by_slurm`]). `Err`: why not.
fn agrees_with_itself(path: &Path, u: &Unconfirmed) -> std::result::Result<(), String> {
    let j = &u.job;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name != store::paths::archive_name(&j.job_id, &j.node) {
        return Err(format!(
            "its name is not {}, the archive name of the job and node it records",
            store::paths::archive_name(&j.job_id, &j.node)
        ));
    }
    let owner_name = crate::sys::user_name(u.owner);
    if owner_name.is_none() || owner_name != j.user {
        return Err(format!(
            "it is owned by uid {} ({}), not by the user it records ({})",
            u.owner,
            owner_name.as_deref().unwrap_or("no such user"),
            j.user.as_deref().unwrap_or("none")
        ));
    }
    Ok(())
}

/// The jobs whose user and nodes Slurm's accounting confirms, asked in chunks; the rest
/// with why.
fn confirmed_by_slurm(
    q: &crate::slurm::sacct::Query,
    pending: Vec<(PathBuf, CardJob)>,
) -> (Vec<CardJob>, Vec<(PathBuf, String)>) {
    let (mut ok, mut not) = (Vec::new(), Vec::new());
    for chunk in pending.chunks(500) {
        let mut ids: Vec<String> = chunk.iter().map(|(_, j)| j.job_id.clone()).collect();
        ids.sort();
        ids.dedup();
        let batch = match q.jobs(&ids) {
            Ok(b) => b,
            Err(e) => {
                for (p, _) in chunk {
                    not.push((p.clone(), format!("sacct could not confirm its job ({e})")));
                }
                continue;
            }
        };
        for (p, j) in chunk {
            let own = crate::slurm::job_id::JobId::own(&j.job_id);
            let acct = batch
                .records
                .iter()
                .find(|r| own.is_some() && r.raw_id() == own);
            let Some(acct) = acct else {
                not.push((p.clone(), format!("Slurm has no job {}", j.job_id)));
                continue;
            };
            if acct.job.user.is_none() || acct.job.user != j.user {
                not.push((
                    p.clone(),
                    format!(
                        "Slurm says job {} is {}'s, not {}'s",
                        j.job_id,
                        acct.job.user.as_deref().unwrap_or("nobody"),
                        j.user.as_deref().unwrap_or("nobody")
                    ),
                ));
                continue;
            }
            let nodes = acct
                .job
                .node_list
                .as_deref()
                .and_then(|l| crate::slurm::hostlist::expand(l).ok())
                .unwrap_or_default();
            if !nodes.contains(&j.node) {
                not.push((
                    p.clone(),
                    format!("Slurm says job {} did not run on {}", j.job_id, j.node),
                ));
                continue;
            }
            ok.push(j.clone());
        }
    }
    (ok, not)
}

impl JobSource for Files {
    fn gather(&self, w: &Window) -> Gathered {
        let mut out = Gathered::default();
        let mut seen = std::collections::HashSet::new();
        let mut pending: Vec<(PathBuf, CardJob)> = Vec::new();
        let since =
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(w.since_unix_ms.max(0) as u64);
        for t in &self.dirs {
            let expanded = expand_dirs(t);
            out.left_out.extend(expanded.notes);
            for dir in expanded.dirs {
                let Ok(rd) = std::fs::read_dir(&dir) else {
                    continue;
                };
                let mut names: Vec<String> = rd
                    .flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| is_job_file(n))
                    .collect();
                names.sort();
                for name in names {
                    let path = dir.join(&name);
                    // Written last before the window: nothing of it is in the window. Only
                    // plain files (never a link or a FIFO).
                    let md = match std::fs::symlink_metadata(&path) {
                        Ok(m) if m.is_file() => {
                            if m.modified().is_ok_and(|t| t < since) {
                                continue;
                            }
                            m
                        }
                        _ => continue,
                    };
                    out.read += 1;
                    match read_job(&path) {
                        Ok(Some(j)) if written_by_others(&md) => {
                            use std::os::unix::fs::MetadataExt;
                            let u = Unconfirmed {
                                job: j,
                                owner: md.uid(),
                            };
                            match agrees_with_itself(&path, &u) {
                                Ok(()) if u.job.in_window(w) => pending.push((path, u.job)),
                                Ok(()) => {}
                                Err(why) => out.reject(&path, &why),
                            }
                        }
                        Ok(Some(j)) => {
                            if j.in_window(w)
                                && seen.insert((j.job_id.clone(), j.node.clone(), j.start_unix_ms))
                            {
                                out.jobs.push(j);
                            }
                        }
                        Ok(None) => {}
                        Err(e) => out.skip(format!("{}: {e}", path.display())),
                    }
                }
            }
        }
        // Files their owners could have edited count only for what Slurm confirms.
        let (ok, not) = match &self.slurm {
            Some(q) if !pending.is_empty() => confirmed_by_slurm(q, pending),
            _ => {
                let n = pending.len();
                if n > 0 {
                    out.left_out.push(format!(
                        "{n} job file{} in users' directories {} left out: their owners could have edited them, and without sacct nothing confirms whose jobs they record",
                        if n == 1 { "" } else { "s" },
                        if n == 1 { "was" } else { "were" }
                    ));
                }
                (Vec::new(), Vec::new())
            }
        };
        for (p, why) in not {
            out.reject(&p, &why);
        }
        for j in ok {
            if seen.insert((j.job_id.clone(), j.node.clone(), j.start_unix_ms)) {
                out.jobs.push(j);
            }
        }
        out
    }
}

/// One file as an entry; `None` for a job that held no card.
pub fn read_job(path: &Path) -> crate::error::Result<Option<CardJob>> {
    let reader = Reader::open(path)?;
    let meta = reader.meta()?;
    // Most jobs hold no card: answered from the small `gpus` table, no summary read.
    if reader.gpus()?.is_empty() {
        return Ok(None);
    }
    let s = match store::summary::read(&reader)?
        .as_deref()
        .and_then(Summary::from_pairs)
    {
        Some(s) => s,
        None => summary::from_reader(&reader)?,
    };
    Ok(Some(CardJob {
        job_id: meta.job_id.to_string(),
        user: Some(meta.user.clone()),
        node: meta.node.clone(),
        start_unix_ms: Some(meta.started_unix_ms),
        end_unix_ms: s.last_t_unix_ms,
        gpus: s.gpus,
        source: path.display().to_string(),
    }))
}
