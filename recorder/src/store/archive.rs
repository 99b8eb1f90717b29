//! Consistent copies of a job's file into a place the user owns (the archive).
//!
//! Two halves, so that nothing the user can write is ever opened by root or by name:
//! [`snapshot`] (root, inside the root-only spool) writes a consistent, self-contained copy
//! with `VACUUM INTO`, checks that it reads back, and returns it as an open, already unlinked
//! file; the caller then streams that descriptor into the user's directory with the user's
//! filesystem identity through `private_dir` (descriptor-relative create, write, rename).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::fault::db_err;
use super::fault::sql_err;
use super::harden;
use super::reader::Reader;
use crate::error::{Error, Result};
use rusqlite::{Connection, OpenFlags};

/// A consistent copy of `src` (even while a writer appends), made in `scratch_dir` — a
/// directory only root can write (the spool) — as `.<job>.archive-<pid>.sqlite`, verified,
/// opened read-only and unlinked: the returned descriptor is the only way to it.
///
/// Opens `src` by name: never call it from a process that has a [`Writer`](super::Writer) open
/// on `src` (closing that descriptor would drop the writer's SQLite locks: see
/// `core/tests/store_locks.rs`) — the writer's process uses [`Writer::snapshot`](super::Writer::snapshot).
pub fn snapshot(src: &Path, scratch_dir: &Path, job_id: u32) -> Result<File> {
    let reader = Reader::open(src)?;
    snapshot_of(reader.conn(), src, scratch_dir, job_id)
}

/// [`snapshot`] of the database `conn` has open (`src` is its path, for messages).
pub(crate) fn snapshot_of(
    conn: &rusqlite::Connection,
    src: &Path,
    scratch_dir: &Path,
    job_id: u32,
) -> Result<File> {
    let tmp = scratch_dir.join(super::paths::snapshot_scratch_name(
        job_id,
        std::process::id(),
    ));
    let _ = std::fs::remove_file(&tmp);
    // Created first with O_EXCL|O_NOFOLLOW: SQLite then fills the inode we made.
    drop(
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| Error::Store(format!("cannot create {}: {e}", tmp.display())))?,
    );
    let made = (|| {
        vacuum_into(conn, src, &tmp)?;
        Reader::open(&tmp)?; // the copy must read back before it replaces anything
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&tmp)
            .map_err(|e| sql_err(&tmp, e))
    })();
    let _ = std::fs::remove_file(&tmp);
    made
}

/// [`snapshot`] then install as `<dest_dir>/<final_name>` with this process's identity;
/// `dest_dir` must be private to its owner (see `private_dir`). Returns the final path.
pub fn copy_consistent(src: &Path, dest_dir: &Path, final_name: &str) -> Result<PathBuf> {
    let scratch = src.parent().unwrap_or(Path::new("."));
    let job_id = std::process::id();
    let mut copy = snapshot(src, scratch, job_id)?;
    // SAFETY: no preconditions.
    let me = unsafe { libc::geteuid() };
    let dir = crate::private_dir::open_private_dir(dest_dir, &[], me).map_err(Error::Store)?;
    crate::private_dir::install_file_at(&dir, final_name, &mut copy).map_err(Error::Store)?;
    Ok(dest_dir.join(final_name))
}

/// `VACUUM INTO dest` from `conn`, then the copy switched to a rollback journal.
pub(crate) fn vacuum_into(conn: &Connection, src: &Path, dest: &Path) -> Result<()> {
    let d = dest
        .to_str()
        .ok_or_else(|| sql_err(dest, "path is not UTF-8"))?;
    harden::with_attach(conn, || conn.execute("VACUUM INTO ?1", [d]))
        .map_err(|e| sql_err(src, format!("cannot copy to {}: {e}", dest.display())))?;
    // VACUUM INTO keeps the WAL flag in the header; a copy must stand alone.
    let out = Connection::open_with_flags(
        dest,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )
    .map_err(|e| db_err(dest, e))?;
    out.query_row("PRAGMA journal_mode = DELETE", [], |_| Ok(()))
        .map_err(|e| db_err(dest, e))?;
    out.close().map_err(|(_, e)| db_err(dest, e))
}
