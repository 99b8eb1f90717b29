//! The names of slurmwatch's files, written once: every module that builds or recognises a
//! job file's name (the plugin, the epilog, the archive, `report`, `history`, the live view,
//! the spool sweep) goes through here.
//!
//! - `<job>.sqlite`: the job's live file in a node's spool;
//! - `<job>.<node>.sqlite`: the archive copy (one per node, so every node can archive to one
//!   directory);
//! - `<job>.stale-<unix ms>.sqlite`: an earlier job's file with the same id, moved aside;
//! - `.<job>.archive-<pid>.sqlite`: the root-side snapshot an archive copy is made from;
//! - `.<job>.sqlite.tmp.<pid>-<n>`: a live file being created, before it has its name;
//! - `<job>.alloc`: the job's allocation on the node, written by the prolog;
//! - `<job>.<step>.mark`: a running step's socket for the job's phase marks
//!   (`recording::marks`), removed by that step's recorder at its end;
//! - SQLite's sidecars of any of them: `-wal`, `-shm`, `-journal` appended to the name.
//!
//! `<job>` is a job's own id as `slurm::job_id` spells it (digits, no leading zero, at most
//! `u32::MAX`); a name with any other spelling is no job's.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use crate::slurm::job_id::JobId;

/// SQLite's sidecar files of a database, as suffixes of its name.
pub const SIDECARS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// `<job>.sqlite`: the job's live file on its node.
pub fn live_name(job_id: impl Display) -> String {
    format!("{job_id}.sqlite")
}

/// The job of a live file's name (`42.sqlite` → 42); `None` for any other name.
pub fn job_of_live_name(name: &str) -> Option<u32> {
    JobId::own(name.strip_suffix(".sqlite")?)
}

/// The job of a job file's name: a live file (`42.sqlite`), an archive copy
/// (`42.sw1.sqlite`) or a stale one (`42.stale-<t>.sqlite`); `None` for a hidden scratch
/// copy, a temporary, a sidecar or anything else.
pub fn job_of_file_name(name: &str) -> Option<u32> {
    let stem = name.strip_suffix(".sqlite")?;
    if stem.contains(".tmp") {
        return None;
    }
    JobId::own(stem.split('.').next()?)
}

/// `<job>.<node>.sqlite`: a node's archive copy.
pub fn archive_name(job_id: impl Display, node: &str) -> String {
    format!("{job_id}.{node}.sqlite")
}

/// The node of an archive copy's name for this job (`42.sw1.sqlite` → `sw1`); `None` for
/// other names. The caller decides which node names it trusts.
pub fn node_of_archive_name(name: &str, job_id: u32) -> Option<&str> {
    name.strip_prefix(&job_id.to_string())?
        .strip_prefix('.')?
        .strip_suffix(".sqlite")
}

/// Where a live file in the way is moved aside: `<job>.stale-<t>.sqlite` beside it.
pub fn stale_path(live: &Path, t_unix_ms: i64) -> PathBuf {
    live.with_extension(format!("stale-{t_unix_ms}.sqlite"))
}

/// `.<job>.archive-<pid>.sqlite`: the scratch snapshot an archive copy is made from.
pub fn snapshot_scratch_name(job_id: impl Display, pid: u32) -> String {
    format!(".{job_id}.archive-{pid}.sqlite")
}

/// `.<name>.tmp.<pid>-<n>` beside `live`: where a writer builds the job's file before it
/// is renamed into place (`n` tells threads of one process apart).
pub fn creating_path(live: &Path) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = live.file_name().unwrap_or_default().to_string_lossy();
    live.with_file_name(format!(".{name}.tmp.{}-{n}", std::process::id()))
}

/// `<job>.alloc`: what slurmd allocated to the job on this node (written by the prolog).
pub fn alloc_name(job_id: impl Display) -> String {
    format!("{job_id}.alloc")
}

/// `<job>.<step>.mark`: the socket a recorded step takes its job's phase marks on.
pub fn mark_socket_name(job_id: impl Display, step: &str) -> String {
    format!("{job_id}.{step}.mark")
}

/// A sidecar of the database at `path` (`suffix` one of [`SIDECARS`]).
pub fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// The write-ahead log of the database at `path`.
pub fn wal(path: &Path) -> PathBuf {
    sidecar(path, "-wal")
}

/// Whether `name` is one of the plugin's own spool files: a live file or its sidecars, a
/// stale one, a snapshot scratch file, an allocation note, or a temporary of any of these
/// (`….tmp.<anything>`). The spool sweep removes only these.
pub fn is_spool_file_name(name: &str) -> bool {
    let name = name.strip_prefix('.').unwrap_or(name);
    let name = match name.find(".tmp.") {
        Some(i) => &name[..i],
        None => name,
    };
    let Some((job, rest)) = name.split_once('.') else {
        return false;
    };
    if JobId::own(job).is_none() {
        return false;
    }
    let rest = SIDECARS
        .iter()
        .find_map(|s| rest.strip_suffix(s))
        .unwrap_or(rest);
    match rest {
        "sqlite" | "alloc" => true,
        r => r
            .strip_prefix("stale-")
            .and_then(|r| r.strip_suffix(".sqlite"))
            .or_else(|| r.strip_prefix("archive-").and_then(|r| r.split('.').next()))
            .is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spool_names_are_recognised_strictly() {
        for ok in [
            "12.sqlite",
            "12.sqlite-wal",
            "12.sqlite-shm",
            "12.sqlite-journal",
            "12.alloc",
            ".12.alloc.tmp.999",
            "12.stale-1764000000000.sqlite",
            "12.stale-1764000000000.sqlite-wal",
            ".12.archive-77.sqlite",
        ] {
            assert!(is_spool_file_name(ok), "{ok}");
        }
        for bad in [
            "sw1",
            "notes.txt",
            "12",
            "x12.sqlite",
            "12.sqlite.bak",
            "12.stale-.sqlite",
            "..",
            "12.node.sqlite",
            "012.sqlite",
            "0.sqlite",
            "4294967296.sqlite",
            "12345678901.sqlite-wal",
            "١٢.sqlite",
            // A step's mark socket: its recorder removes it; the sweep removes files only.
            "12.batch.mark",
        ] {
            assert!(!is_spool_file_name(bad), "{bad}");
        }
    }

    #[test]
    fn job_files_are_named_by_the_jobs_own_id() {
        assert_eq!(job_of_live_name(&live_name(42)), Some(42));
        assert_eq!(job_of_live_name("4294967295.sqlite"), Some(u32::MAX));
        for no in [
            "42.sw1.sqlite",
            "42.sqlite-wal",
            "042.sqlite",
            "4294967296.sqlite",
            "9999999999.sqlite",
            ".sqlite",
            "42_1.sqlite",
            "42.alloc",
        ] {
            assert_eq!(job_of_live_name(no), None, "{no}");
        }
        for (name, job) in [
            ("42.sqlite", 42),
            ("42.sw1.sqlite", 42),
            ("42.stale-1700000000000.sqlite", 42),
        ] {
            assert_eq!(job_of_file_name(name), Some(job), "{name}");
        }
        for no in [
            ".42.archive-7.sqlite",
            "42.sqlite-wal",
            "42.alloc",
            "x.sqlite",
            "42.sqlite.tmp.1",
            "42.tmp.3.sqlite",
            ".sqlite",
            "042.sw1.sqlite",
            "12345678901.sw1.sqlite",
        ] {
            assert_eq!(job_of_file_name(no), None, "{no}");
        }
    }

    #[test]
    fn every_name_the_plugin_writes_is_recognised_by_the_sweep() {
        let live = Path::new("/s/12.sqlite");
        let names = [
            live_name(12),
            alloc_name(12),
            snapshot_scratch_name(12, 77),
            stale_path(live, 1_764_000_000_000)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
            creating_path(live)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned(),
        ];
        assert!(names[4].starts_with(".12.sqlite.tmp."), "{}", names[4]);
        assert_ne!(
            creating_path(live),
            creating_path(live),
            "one name per creator"
        );
        assert_eq!(wal(live), Path::new("/s/12.sqlite-wal"));
        assert_eq!(names[3], "12.stale-1764000000000.sqlite");
        assert_eq!(names[2], ".12.archive-77.sqlite");
        for n in &names {
            assert!(is_spool_file_name(n), "{n}");
            for s in SIDECARS {
                assert!(is_spool_file_name(&format!("{n}{s}")), "{n}{s}");
            }
        }
        // An archive copy's name is not a spool file: the sweep never removes one.
        assert!(!is_spool_file_name(&archive_name(12, "node")));
    }

    #[test]
    fn archive_names_round_trip_to_their_node() {
        assert_eq!(archive_name(42, "sw1"), "42.sw1.sqlite");
        assert_eq!(node_of_archive_name("42.sw1.sqlite", 42), Some("sw1"));
        assert_eq!(node_of_archive_name("420.sw1.sqlite", 42), None);
        assert_eq!(node_of_archive_name("42.sw1.sqlite.tmp", 42), None);
        assert_eq!(node_of_archive_name(&live_name(42), 42), None);
    }
}
