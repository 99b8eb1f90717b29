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

/// Most directories one templated level may hold under one directory (a runaway archive
/// tree is cut, and said).
pub const MAX_DIRS: usize = 100_000;

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
        let dirs = crate::site::Site::here()
            .record_dirs(spool, extra)
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        Files { dirs, slurm: None }
    }
}

/// The directories a template names, and a sentence for each thing left out.
#[derive(Debug, Default, PartialEq)]
pub struct Expanded {
    pub dirs: Vec<PathBuf>,
    pub notes: Vec<String>,
}

/// Whether a directory `name` owned by `owner` can be what the templated component `c` names:
/// where `c` holds `%u`/`%U`, only the owner's own name or uid fits (the plugin makes these
/// directories as the user), so names another user chose in a shared base are not entered.
/// Root's are always entered.
fn fits_owner(
    c: &str,
    name: &str,
    owner: u32,
    names: &mut std::collections::HashMap<u32, Option<String>>,
) -> bool {
    if owner == 0 || !(c.contains("%u") || c.contains("%U")) {
        return true;
    }
    let Some(user) = names
        .entry(owner)
        .or_insert_with(|| crate::sys::user_name(owner))
        .clone()
    else {
        return false;
    };
    let mut pat = String::new();
    let mut chars = c.chars();
    while let Some(ch) = chars.next() {
        match (ch, ch == '%') {
            (_, false) => pat.push_str(&glob::Pattern::escape(&ch.to_string())),
            _ => match chars.next() {
                Some('u') => pat.push_str(&glob::Pattern::escape(&user)),
                Some('U') => pat.push_str(&owner.to_string()),
                Some('%') => pat.push_str(&glob::Pattern::escape("%")),
                _ => pat.push('*'),
            },
        }
    }
    glob::Pattern::new(&pat).is_ok_and(|p| p.matches(name))
}

/// The directories a template names that exist: its fixed leading components, then every
/// plain-named subdirectory for each component holding a `%` ([`fits_owner`]; at most
/// [`MAX_DIRS`] under any one directory, and a note says so when more were there).
pub fn expand_dirs(template: &str) -> Expanded {
    use std::os::unix::fs::MetadataExt;
    if !template.contains('%') {
        return Expanded {
            dirs: vec![PathBuf::from(template)],
            notes: Vec::new(),
        };
    }
    let mut out = Expanded::default();
    let mut level: Vec<PathBuf> = vec![PathBuf::from(if template.starts_with('/') {
        "/"
    } else {
        "."
    })];
    let mut names = std::collections::HashMap::new();
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
            let (mut here, mut squats) = (Vec::new(), 0usize);
            for e in rd.flatten() {
                let Ok(name) = e.file_name().into_string() else {
                    continue;
                };
                // Directories only, never through a link.
                if !is_plain_name(&name) || !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                match e.metadata() {
                    Ok(m) if fits_owner(c, &name, m.uid(), &mut names) => here.push(d.join(name)),
                    _ => squats += 1,
                }
            }
            if squats > 0 {
                out.notes.push(format!(
                    "{}: {squats} directories not named for their owner were not read (only a user's own directory counts for `{c}`)",
                    d.display()
                ));
            }
            here.sort();
            if here.len() > MAX_DIRS {
                out.notes.push(format!(
                    "{}: {} directories, only the first {MAX_DIRS} were read",
                    d.display(),
                    here.len()
                ));
                here.truncate(MAX_DIRS);
            }
            next.extend(here);
        }
        level = next;
    }
    out.dirs = level;
    out
}

/// Whether `name` is a job file: `<job>.sqlite` or `<job>.<something>.sqlite`, not a hidden
/// scratch copy or a temporary (`store::paths::job_of_file_name`).
pub fn is_job_file(name: &str) -> bool {
    store::paths::job_of_file_name(name).is_some()
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
            let rec = batch
                .records
                .iter()
                .find(|r| own.is_some() && r.raw_id() == own);
            let Some(rec) = rec else {
                not.push((p.clone(), format!("Slurm has no job {}", j.job_id)));
                continue;
            };
            if rec.job.user.is_none() || rec.job.user != j.user {
                not.push((
                    p.clone(),
                    format!(
                        "Slurm says job {} is {}'s, not {}'s",
                        j.job_id,
                        rec.job.user.as_deref().unwrap_or("nobody"),
                        j.user.as_deref().unwrap_or("nobody")
                    ),
                ));
                continue;
            }
            let nodes = rec
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
            expand_dirs(&t).dirs,
            [root.join("arch/alice"), root.join("arch/bob")]
        );
        let plain = format!("{}/arch", root.display());
        assert_eq!(expand_dirs(&plain).dirs, [root.join("arch")]);
        assert!(expand_dirs(&format!("{}/none/%n", root.display()))
            .dirs
            .is_empty());
    }
}
