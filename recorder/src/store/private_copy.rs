//! Root reading a file another user can write: a copy of the checked bytes, never the file.
//!
//! SQLite opens a database by name and maps its `-shm` (a WAL file's shared index). Where the
//! file or its directory is another user's, that user can swap a FIFO in between our checks
//! and SQLite's open (root blocks in `open`), or create and truncate the `-shm` under root's
//! map (SIGBUS kills root's process). So a root process copies what it checked — the database
//! through the descriptor [`harden::open_file`](super::harden::open_file) vetted, its `-wal`
//! through one opened `O_NOFOLLOW|O_NONBLOCK` and `fstat`ed — into a fresh directory only root
//! can enter, each at most [`MAX_FILE_BYTES`], and SQLite opens the copy: every committed row
//! (the `-wal`'s too) is read, and the `-shm` SQLite maps is root's own.
//!
//! A user's own CLI reads as before: the kernel already confines what it can do to the user.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::fault::sql_err;
use super::paths;
use super::schema::MAX_FILE_BYTES;
use crate::error::{Error, Result};

/// The copy: its directory (removed when dropped), the database in it and that file open.
pub(crate) struct PrivateCopy {
    _dir: tempfile::TempDir,
    pub db: PathBuf,
    pub file: File,
}

/// Whether this process must not let SQLite open `path` itself: it runs as root and someone
/// else could write the file (`checked`, already opened) or plant files beside it.
pub(crate) fn needed(path: &Path, checked: &File) -> bool {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        return false;
    }
    let roots_only = |md: &std::fs::Metadata| md.uid() == 0 && md.mode() & 0o022 == 0;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let file_ok = checked.metadata().is_ok_and(|m| roots_only(&m));
    let dir_ok = std::fs::metadata(dir).is_ok_and(|m| roots_only(&m));
    !(file_ok && dir_ok)
}

/// Copies at most [`MAX_FILE_BYTES`] of `src` (from its start) to a new file `name` in `dir`.
fn copy_bounded(path: &Path, what: &str, mut src: &File, dir: &Path, name: &str) -> Result<File> {
    let mut out = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dir.join(name))
        .map_err(|e| {
            Error::Store(format!(
                "cannot make a private copy of {}: {e}",
                path.display()
            ))
        })?;
    src.seek(SeekFrom::Start(0)).map_err(|e| sql_err(path, e))?;
    let n = std::io::copy(&mut src.take(MAX_FILE_BYTES + 1), &mut out)
        .map_err(|e| sql_err(path, format!("cannot copy {what}: {e}")))?;
    if n > MAX_FILE_BYTES {
        return Err(sql_err(
            path,
            format!(
                "{what} grew past the {} MiB a job's file may have: not read",
                MAX_FILE_BYTES >> 20
            ),
        ));
    }
    out.flush().map_err(|e| sql_err(path, e))?;
    Ok(out)
}

/// Copies the database (through `checked`) and its `-wal`, if there is one, into a new
/// directory only root can enter.
pub(crate) fn make(path: &Path, checked: &File) -> Result<PrivateCopy> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("slurmwatch-read.")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .map_err(|e| {
            Error::Store(format!(
                "cannot make a private directory for reading {}: {e}",
                path.display()
            ))
        })?;
    let db = dir.path().join("job.sqlite");
    let file = copy_bounded(path, "the file", checked, dir.path(), "job.sqlite")?;
    let wal_path = paths::wal(path);
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&wal_path)
    {
        Ok(wal) => {
            if !wal.metadata().is_ok_and(|m| m.is_file()) {
                return Err(sql_err(path, "its -wal is not a regular file: not read"));
            }
            copy_bounded(path, "its -wal", &wal, dir.path(), "job.sqlite-wal")?;
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
        Err(e) => {
            return Err(sql_err(
                path,
                format!("its -wal cannot be opened safely ({e}): not read"),
            ))
        }
    }
    Ok(PrivateCopy {
        _dir: dir,
        db,
        file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn open_checked(p: &Path) -> File {
        std::fs::OpenOptions::new().read(true).open(p).unwrap()
    }

    #[test]
    fn copies_the_checked_bytes_and_the_wal_into_a_directory_only_root_enters() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("7.n1.sqlite");
        std::fs::write(&db, b"database bytes").unwrap();
        std::fs::write(paths::wal(&db), b"wal bytes").unwrap();
        let f = open_checked(&db);
        let c = make(&db, &f).unwrap();
        let dir = c.db.parent().unwrap();
        assert_eq!(
            std::fs::metadata(dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(std::fs::read(&c.db).unwrap(), b"database bytes");
        assert_eq!(std::fs::read(paths::wal(&c.db)).unwrap(), b"wal bytes");
        let gone = dir.to_path_buf();
        drop(c);
        assert!(!gone.exists(), "the copy outlived its reader");
    }

    #[test]
    fn a_fifo_as_the_wal_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("7.n1.sqlite");
        std::fs::write(&db, b"database bytes").unwrap();
        let wal =
            std::ffi::CString::new(paths::wal(&db).into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(wal.as_ptr(), 0o600) }, 0);
        let e = make(&db, &open_checked(&db)).err().unwrap().to_string();
        assert!(e.contains("-wal is not a regular file"), "{e}");
    }

    #[test]
    fn only_root_reading_someone_elses_file_copies() {
        let d = tempfile::tempdir().unwrap();
        let db = d.path().join("7.n1.sqlite");
        std::fs::write(&db, b"x").unwrap();
        // SAFETY: no failure mode.
        let root = unsafe { libc::geteuid() } == 0;
        // A root-owned file in a root-owned directory that only root writes: read in place.
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!needed(&db, &open_checked(&db)));
        if root {
            std::os::unix::fs::chown(&db, Some(65534), None).unwrap();
            assert!(needed(&db, &open_checked(&db)), "a user's file");
            std::os::unix::fs::chown(&db, Some(0), None).unwrap();
            std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
            assert!(
                needed(&db, &open_checked(&db)),
                "root's file where users can add a -shm"
            );
        }
    }
}
