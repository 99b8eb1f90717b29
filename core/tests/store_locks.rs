//! A writer's SQLite locks survive the writer's own housekeeping.
//!
//! POSIX record locks belong to the process: closing *any* descriptor of a file drops every
//! lock the process holds on it. SQLite's WAL mode depends on two of them — a read lock on
//! the `-shm`'s dead-man-switch byte (without it the next connection to arrive believes it is
//! the first, truncates the `-shm` under the writer's mapping and rebuilds it: the writer
//! dies of SIGBUS in `walIndexAppend`, seen on the test cluster as a batch slurmstepd killed
//! 2 s into a recorded job that a root `--once` was reading) and the shared lock on the
//! database (without it another step's writer closing believes it is the last one,
//! checkpoints and deletes the `-wal` under the live writer). So nothing in the writer's
//! process — the reader grant on the sidecars, the archive snapshot — may open and close a
//! descriptor of the file or its sidecars while the writer's connection is open.
//!
//! The locks are checked from a forked child (a process never sees its own locks with
//! `F_GETLK`).

mod support;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::UsageReading;
use slurmwatch_core::store::{JobMeta, Writer};

const T0: i64 = 1_700_000_000_000;
/// SQLite's unix VFS: the `-shm` dead-man-switch byte (`UNIX_SHM_DMS`) and the database's
/// shared-lock range (`SHARED_FIRST`, `SHARED_SIZE`).
const SHM_DMS: i64 = 128;
const SHARED_FIRST: i64 = 0x4000_0000 + 2;
const SHARED_SIZE: i64 = 510;
/// Someone reads the live file (the job's user, through the ACL grant).
const READER_UID: u32 = 4242;

fn meta() -> JobMeta {
    support::job_meta(77, READER_UID)
}

fn row(i: i64) -> SampleRow {
    let mut r = SampleRow::empty(T0 + i * 1000, Series::Job, SampleKind::Periodic);
    r.usage = UsageReading {
        cpu_usage_usec: Some(i as u64 * 1_000_000),
        memory_usage_bytes: Some(1 << 20),
        ..UsageReading::default()
    };
    r
}

/// Whether another process holds a read lock on `len` bytes at `start` of `path`: a forked
/// child asks with `F_GETLK` (only async-signal-safe calls between fork and `_exit`).
fn locked_by_another_process(path: &Path, start: i64, len: i64) -> bool {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: the child only calls open, fcntl and _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork");
    if pid == 0 {
        unsafe {
            let fd = libc::open(c.as_ptr(), libc::O_RDONLY);
            if fd < 0 {
                libc::_exit(3);
            }
            let mut fl: libc::flock = std::mem::zeroed();
            fl.l_type = libc::F_WRLCK as i16;
            fl.l_whence = libc::SEEK_SET as i16;
            fl.l_start = start;
            fl.l_len = len;
            if libc::fcntl(fd, libc::F_GETLK, &mut fl) != 0 {
                libc::_exit(4);
            }
            libc::_exit(if fl.l_type == libc::F_RDLCK as i16 {
                0
            } else {
                1
            });
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child status {status}");
    match libc::WEXITSTATUS(status) {
        0 => true,
        1 => false,
        n => panic!(
            "the child could not ask (exit {n}) about {}",
            path.display()
        ),
    }
}

fn assert_writer_locks_held(db: &Path, when: &str) {
    let shm = db.with_extension("sqlite-shm");
    assert!(
        locked_by_another_process(&shm, SHM_DMS, 1),
        "{when}: the writer's lock on the -shm's dead-man-switch byte is gone"
    );
    assert!(
        locked_by_another_process(db, SHARED_FIRST, SHARED_SIZE),
        "{when}: the writer's shared lock on the database is gone"
    );
}

#[test]
fn the_reader_grant_and_the_archive_snapshot_keep_the_writers_locks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("77.sqlite");
    let mut w = Writer::create_readable_by(&db, &meta(), READER_UID).unwrap();
    assert!(
        matches!(w.reader_grant(), Some(Ok(()))),
        "this machine's /tmp supports ACLs: {:?}",
        w.reader_grant()
    );
    for i in 0..3 {
        w.push(row(i));
        w.flush().unwrap();
    }
    // By now the -wal and -shm exist and carry the reader's grant.
    assert_writer_locks_held(&db, "after the flushes that grant the sidecars");

    // What the plugin does every 5 minutes and at the step's end, in the writer's process.
    let copy = w.snapshot(dir.path(), 77).unwrap();
    drop(copy);
    assert_writer_locks_held(&db, "after an archive snapshot");

    w.push(row(3));
    w.flush().unwrap();
    assert_writer_locks_held(&db, "after the next flush");
    w.close().unwrap();
}

#[test]
fn a_later_steps_writer_keeps_its_locks_too() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("77.sqlite");
    let mut first = Writer::create_readable_by(&db, &meta(), READER_UID).unwrap();
    first.push(row(0));
    first.flush().unwrap();
    drop(first);
    // A later step of the job opens the file and grants the reader the (new) sidecars.
    let mut w = Writer::open_existing(&db).unwrap();
    w.grant_reader(READER_UID);
    w.push(row(1));
    w.flush().unwrap();
    w.push(row(2));
    w.flush().unwrap();
    assert_writer_locks_held(&db, "a reopened writer after its flushes");
}

/// The control: a writer nobody else reads holds both locks (so the checks above can tell).
#[test]
fn a_plain_writer_holds_both_locks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("77.sqlite");
    let mut w = Writer::create(&db, &meta()).unwrap();
    w.push(row(0));
    w.flush().unwrap();
    assert_writer_locks_held(&db, "a plain writer");
}
