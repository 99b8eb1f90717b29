//! The recorded files as a [`JobSource`]: every job file in the spool and the archives
//! (`<job>.sqlite`, `<job>.<node>.sqlite`, a moved-aside `<job>.stale-<t>.sqlite`), read
//! through their epilog summary (computed when the epilog has not run yet). A `%` template
//! (`spool=/var/spool/slurmwatch/%n`, `archive=/archive/%u`) is walked one directory level per
//! templated component, entering only plain names; nothing is followed outside them.

use std::path::{Path, PathBuf};

use super::{CardJob, Gathered, JobSource, Window};
use crate::analysis::summary::{self, Summary};
use crate::options::is_plain_name;
use crate::store::{self, Reader};

/// Most directories a template may expand to (a runaway archive tree is cut, and said).
pub const MAX_DIRS: usize = 100_000;

/// Where the files are.
#[derive(Debug, Clone, Default)]
pub struct Files {
    /// Spools and archive directories, each a plain directory or a `%` template.
    pub dirs: Vec<String>,
}

impl Files {
    pub fn new(dirs: impl IntoIterator<Item = String>) -> Files {
        Files {
            dirs: dirs.into_iter().collect(),
        }
    }
}

impl Files {
    /// The site's spool (`spool=` in plugstack.conf, or `spool` when given) and archive
    /// (`archive=`), then `extra` directories.
    pub fn site(spool: Option<&Path>, extra: &[PathBuf]) -> Files {
        let site = crate::slurm::plugstack::site_config();
        let spool = spool.map(Path::to_path_buf).unwrap_or(site.spool_dir);
        let mut dirs = vec![spool.display().to_string()];
        dirs.extend(site.archive_template);
        dirs.extend(extra.iter().map(|d| d.display().to_string()));
        dirs.dedup();
        Files { dirs }
    }
}

/// The directories a template names that exist: its fixed leading components, then every
/// plain-named subdirectory for each component holding a `%` (at most [`MAX_DIRS`]).
pub fn expand_dirs(template: &str) -> Vec<PathBuf> {
    if !template.contains('%') {
        return vec![PathBuf::from(template)];
    }
    let mut level: Vec<PathBuf> = vec![PathBuf::from(if template.starts_with('/') {
        "/"
    } else {
        "."
    })];
    for c in template.split('/').filter(|c| !c.is_empty()) {
        if !c.contains('%') {
            level.iter_mut().for_each(|d| d.push(c));
            continue;
        }
        let mut next = Vec::new();
        for d in &level {
            let Ok(rd) = std::fs::read_dir(d) else {
                continue;
            };
            for e in rd.flatten() {
                let Ok(name) = e.file_name().into_string() else {
                    continue;
                };
                // Directories only, never through a link.
                if is_plain_name(&name) && e.file_type().is_ok_and(|t| t.is_dir()) {
                    next.push(d.join(name));
                }
            }
        }
        next.sort();
        next.truncate(MAX_DIRS);
        level = next;
    }
    level
}

/// Whether `name` is a job file: `<digits>.sqlite` or `<digits>.<something>.sqlite`, not a
/// hidden scratch copy or a temporary.
pub fn is_job_file(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".sqlite") else {
        return false;
    };
    let id = stem.split('.').next().unwrap_or("");
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && !stem.contains(".tmp")
}

impl JobSource for Files {
    fn gather(&self, w: &Window) -> Gathered {
        let mut out = Gathered::default();
        let mut seen = std::collections::HashSet::new();
        let since =
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(w.since_unix_ms.max(0) as u64);
        for t in &self.dirs {
            for dir in expand_dirs(t) {
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
                    match std::fs::symlink_metadata(&path) {
                        Ok(m) if m.is_file() => {
                            if m.modified().is_ok_and(|t| t < since) {
                                continue;
                            }
                        }
                        _ => continue,
                    }
                    out.read += 1;
                    match read_job(&path) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_file_names() {
        for ok in [
            "42.sqlite",
            "42.sw1.sqlite",
            "42.stale-1700000000000.sqlite",
        ] {
            assert!(is_job_file(ok), "{ok}");
        }
        for no in [
            ".42.archive-7.sqlite",
            "42.sqlite-wal",
            "42.alloc",
            "x.sqlite",
            "42.sqlite.tmp.1",
            "42.tmp.3.sqlite",
            ".sqlite",
        ] {
            assert!(!is_job_file(no), "{no}");
        }
    }

    #[test]
    fn templates_expand_to_the_directories_that_exist() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for p in ["arch/alice/x", "arch/bob", "arch/.hidden"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        std::fs::write(root.join("arch/file"), b"").unwrap();
        std::os::unix::fs::symlink(root.join("arch/bob"), root.join("arch/link")).unwrap();
        let t = format!("{}/arch/%u", root.display());
        assert_eq!(
            expand_dirs(&t),
            [root.join("arch/alice"), root.join("arch/bob")]
        );
        let plain = format!("{}/arch", root.display());
        assert_eq!(expand_dirs(&plain), [root.join("arch")]);
        assert!(expand_dirs(&format!("{}/none/%n", root.display())).is_empty());
    }
}
