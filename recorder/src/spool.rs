//! The node's spool: the names of what the plugin keeps there, the job's allocation as slurmd
//! gave it to the prolog, and the removal of expired files.
//!
//! The spool is root-owned and writable by root only (docs/design.md §7): a job's user can read
//! their own live file through a grant (`store::access`) and write nothing here. Every file is
//! still opened `O_NOFOLLOW|O_NONBLOCK` and checked with `fstat` before it is trusted.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::store::paths;

/// The job's allocation on this node as slurmd knew it when the job started here: read from
/// the prolog's environment, which slurmd builds from the job's credential (the job cannot
/// change it). `gpus`: Slurm's GRES indices of the job's cards (`SLURM_JOB_GPUS`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allocation {
    pub gpus: Vec<u32>,
}

const ALLOC_MAX_BYTES: u64 = 4096;

impl Allocation {
    /// From the prolog's `SLURM_JOB_GPUS` (`"0,2"`; unset or empty: no card). A malformed
    /// list is `None`: nothing is trusted from it.
    pub fn from_job_gpus(value: Option<&str>) -> Option<Allocation> {
        let v = value.unwrap_or("").trim();
        if v.is_empty() {
            return Some(Allocation::default());
        }
        let gpus: Option<Vec<u32>> = v
            .split(',')
            .map(|s| {
                (!s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| s.parse().ok())
                    .flatten()
            })
            .collect();
        gpus.map(|gpus| Allocation { gpus })
    }

    fn to_text(&self) -> String {
        let list: Vec<String> = self.gpus.iter().map(u32::to_string).collect();
        format!("gpus={}\n", list.join(","))
    }

    fn parse(text: &str) -> Option<Allocation> {
        let mut gpus = None;
        for line in text.lines() {
            let (k, v) = line.split_once('=')?;
            match k {
                "gpus" => gpus = Some(Allocation::from_job_gpus(Some(v))?.gpus),
                _ => return None,
            }
        }
        Some(Allocation { gpus: gpus? })
    }
}

/// Writes the allocation file (root, in the root-owned spool): a temporary name, then a
/// rename over any earlier one.
pub fn write_allocation(spool: &Path, job_id: u32, a: &Allocation) -> std::io::Result<()> {
    let tmp = spool.join(format!(
        ".{}.tmp.{}",
        paths::alloc_name(job_id),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&tmp)?;
    f.write_all(a.to_text().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, spool.join(paths::alloc_name(job_id))).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// Reads the allocation the prolog wrote. `Err` says why it cannot be trusted or read (no
/// file: no prolog ran for this job on this node); the caller then records no card.
pub fn read_allocation(spool: &Path, job_id: u32) -> Result<Allocation, String> {
    let path = spool.join(paths::alloc_name(job_id));
    let f = open_root_file(&path)?;
    let mut text = String::new();
    f.take(ALLOC_MAX_BYTES)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Allocation::parse(&text).ok_or_else(|| format!("{} is not an allocation file", path.display()))
}

/// Opens a small file that only this process's user (root) can have written.
fn open_root_file(path: &Path) -> Result<File, String> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let md = f
        .metadata()
        .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    if !md.is_file() || md.uid() != euid || md.mode() & 0o022 != 0 || md.len() > ALLOC_MAX_BYTES {
        return Err(format!(
            "{} is not a file only root writes: refused",
            path.display()
        ));
    }
    Ok(f)
}

/// What one sweep of the spool did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Swept {
    pub removed: Vec<PathBuf>,
    /// Entries left for the next sweep (the time or count bound was reached).
    pub unfinished: bool,
}

/// The most directory entries one sweep looks at: a sweep runs at every job end, so a large
/// backlog is worked off over several.
const SWEEP_MAX_ENTRIES: usize = 20_000;

/// Removes the plugin's files last modified more than `retain` ago (never a directory, a
/// link, or a name that is not the plugin's), within `budget`. Running jobs' files are
/// written at every interval, so they are never that old.
pub fn remove_expired(spool: &Path, now: SystemTime, retain: Duration, budget: Duration) -> Swept {
    let started = Instant::now();
    let mut out = Swept::default();
    let Ok(entries) = std::fs::read_dir(spool) else {
        return out;
    };
    for (n, entry) in entries.enumerate() {
        if n >= SWEEP_MAX_ENTRIES || started.elapsed() > budget {
            out.unfinished = true;
            break;
        }
        let Ok(entry) = entry else { continue };
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !paths::is_spool_file_name(name) {
            continue;
        }
        let path = entry.path();
        let Ok(md) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let old = md
            .modified()
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age > retain);
        if md.file_type().is_file() && old && std::fs::remove_file(&path).is_ok() {
            out.removed.push(path);
        }
    }
    out
}

/// The spool for this node (`%n` expanded), created if missing. It lives under the site's
/// root-owned spool, so only root can have made it; anything but a real directory is refused.
pub fn node_spool(config: &crate::options::PluginConfig, node: &str) -> Result<PathBuf, String> {
    let dir = crate::options::spool_for_node(&config.spool_dir, node)
        .ok_or("the spool template cannot be expanded for this node")?;
    if dir != config.spool_dir {
        use std::os::unix::fs::DirBuilderExt;
        match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
        }
        let md = std::fs::symlink_metadata(&dir).map_err(|e| e.to_string())?;
        if !md.is_dir() {
            return Err(format!("{} is not a directory", dir.display()));
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_spool_is_made_once_and_a_planted_symlink_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let config = crate::options::PluginConfig {
            spool_dir: d.path().join("%n"),
            ..Default::default()
        };
        let made = node_spool(&config, "sw1").unwrap();
        assert_eq!(made, d.path().join("sw1"));
        assert!(made.is_dir());
        assert_eq!(
            node_spool(&config, "sw1").unwrap(),
            made,
            "a second step finds it"
        );
        std::os::unix::fs::symlink("/tmp", d.path().join("sw2")).unwrap();
        let err = node_spool(&config, "sw2").unwrap_err();
        assert!(err.contains("is not a directory"), "{err}");
        assert!(
            node_spool(&config, "../x").is_err(),
            "a node name is a plain name"
        );
        let plain = crate::options::PluginConfig {
            spool_dir: d.path().to_path_buf(),
            ..Default::default()
        };
        assert_eq!(node_spool(&plain, "sw3").unwrap(), d.path());
    }

    #[test]
    fn allocation_round_trips_and_refuses_junk() {
        let a = Allocation::from_job_gpus(Some("0,2")).unwrap();
        assert_eq!(a.gpus, vec![0, 2]);
        assert_eq!(Allocation::parse(&a.to_text()), Some(a));
        assert_eq!(
            Allocation::from_job_gpus(None).unwrap().gpus,
            Vec::<u32>::new()
        );
        for bad in ["0,,1", "a", "0;1", "-1", "999999"] {
            assert_eq!(Allocation::from_job_gpus(Some(bad)), None, "{bad}");
        }
        assert_eq!(Allocation::parse("gpus=0\nextra=1\n"), None);
        assert_eq!(Allocation::parse(""), None);
    }

    #[test]
    fn the_allocation_file_is_written_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let a = Allocation { gpus: vec![1, 3] };
        write_allocation(d.path(), 7, &a).unwrap();
        assert_eq!(read_allocation(d.path(), 7).unwrap(), a);
        // A later write replaces it; a missing one is an error, not an empty allocation.
        write_allocation(d.path(), 7, &Allocation::default()).unwrap();
        assert_eq!(
            read_allocation(d.path(), 7).unwrap().gpus,
            Vec::<u32>::new()
        );
        assert!(read_allocation(d.path(), 8).is_err());
        // A symlink in its place is refused (O_NOFOLLOW).
        std::os::unix::fs::symlink(d.path().join("7.alloc"), d.path().join("9.alloc")).unwrap();
        assert!(read_allocation(d.path(), 9).is_err());
    }

    #[test]
    fn expired_files_are_removed_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        for name in ["1.sqlite", "1.sqlite-wal", "2.sqlite", "notes.txt"] {
            std::fs::write(d.path().join(name), b"x").unwrap();
        }
        std::fs::create_dir(d.path().join("3.sqlite")).unwrap();
        let day = Duration::from_secs(86_400);
        // Nothing is a day old yet.
        let now = SystemTime::now();
        assert!(remove_expired(d.path(), now, day, Duration::from_secs(5))
            .removed
            .is_empty());
        // Two days later everything of ours is expired; the directory and notes stay.
        let later = now + 2 * day;
        let mut removed: Vec<String> = remove_expired(d.path(), later, day, Duration::from_secs(5))
            .removed
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        removed.sort();
        assert_eq!(removed, ["1.sqlite", "1.sqlite-wal", "2.sqlite"]);
        assert!(d.path().join("notes.txt").exists() && d.path().join("3.sqlite").is_dir());
    }
}
