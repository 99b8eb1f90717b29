//! Root's readers of user-owned job files (issue 37, attack 5), performed: `report --file` and
//! `cards` run by root over a file that its owner swaps for a FIFO, or whose `-shm` the owner
//! truncates in a loop. Root must never block in an open nor die of SIGBUS. Needs root (the
//! test command runs the fast tier as root); as another user the files cannot be handed to a
//! second uid, and the tests say so and fail.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{chown, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{JobMeta, Writer};

const JOB: u64 = 777;
/// The file's owner: not root, not the caller.
const USER: u32 = 4242;
/// One run of the CLI may take this long on a loaded machine; a run past it is a hang.
const BOUND: Duration = Duration::from_secs(10);

fn require_root() {
    // SAFETY: no failure mode.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "these tests perform an attack on root's readers: run them as root"
    );
}

/// A user's directory holding a real recording `<JOB>.sqlite`, both owned by [`USER`].
fn users_recording() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("user");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.join(format!("{JOB}.sqlite"));
    let t0 = 1_700_000_000_000;
    let meta = JobMeta {
        job_id: JOB,
        user: "mallory".into(),
        uid: USER,
        node: "node1".into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(1),
        memory_allocated_bytes: Some(1 << 30),
        started_unix_ms: t0,
        incarnation: None,
    };
    let mut w = Writer::create(&path, &meta).unwrap();
    w.begin_step("batch", t0, Some(1)).unwrap();
    for i in 0..50 {
        let mut r = SampleRow::empty(t0 + i * 5_000, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some(i as u64 * 1_000_000);
        r.usage.memory_working_set_bytes = Some(100 << 20);
        w.push(r);
    }
    w.end_step("batch", t0 + 250_000, Some(0)).unwrap();
    w.close().unwrap();
    chown(&dir, Some(USER), Some(USER)).unwrap();
    chown(&path, Some(USER), Some(USER)).unwrap();
    (base, dir, path)
}

fn slurmwatch() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_slurmwatch"));
    c.env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

#[derive(Default, Debug)]
struct Tally {
    ok: usize,
    refused: usize,
    hung: usize,
    sigbus: usize,
}

/// Runs `cmd` `n` times, each killed if it passes [`BOUND`].
fn runs(n: usize, mut cmd: impl FnMut() -> Command) -> Tally {
    let mut t = Tally::default();
    for _ in 0..n {
        let mut child = cmd().spawn().unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if start.elapsed() > BOUND {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        match status {
            None => t.hung += 1,
            Some(s) if s.signal() == Some(libc::SIGBUS) => t.sigbus += 1,
            Some(s) if s.success() || s.code() == Some(1) => t.ok += 1,
            Some(_) => t.refused += 1,
        }
    }
    t
}

/// The owner's loop: exchanges `a` and `b` (a FIFO) atomically, over and over, until stopped.
fn swapping(a: &Path, b: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let a = CString::new(a.as_os_str().as_bytes()).unwrap();
    let b = CString::new(b.as_os_str().as_bytes()).unwrap();
    std::thread::spawn(move || {
        let mut n = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // SAFETY: NUL-terminated paths.
            let rc = unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    a.as_ptr(),
                    libc::AT_FDCWD,
                    b.as_ptr(),
                    libc::RENAME_EXCHANGE,
                )
            };
            assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
            n += 1;
        }
        n
    })
}

fn fifo(p: &Path) {
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    chown(p, Some(USER), Some(USER)).unwrap();
}

/// Unblocks any reader stuck opening the FIFO (a failed run's leftover).
fn release(p: &Path) {
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p);
}

#[test]
fn a_fifo_swapped_in_never_hangs_roots_report_or_cards() {
    require_root();
    let (_base, dir, path) = users_recording();
    let swap = dir.join("swap");
    fifo(&swap);
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = swapping(&path, &swap, Arc::clone(&stop));
    let report = runs(200, || {
        let mut c = slurmwatch();
        c.args(["report", &JOB.to_string(), "--no-sacct", "--file"])
            .arg(&path);
        c
    });
    let cards = runs(200, || {
        let mut c = slurmwatch();
        c.args(["cards", "--no-sacct", "-S", "@0", "--spool"])
            .arg(&dir);
        c
    });
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().unwrap();
    release(&path);
    release(&swap);
    eprintln!("{swaps} swaps; report {report:?}; cards {cards:?}");
    assert_eq!(
        report.hung + cards.hung,
        0,
        "root hung on a FIFO: report {report:?}, cards {cards:?}"
    );
    assert_eq!(report.sigbus + cards.sigbus, 0);
    // The attack ran while root read the real file too (not every run met the FIFO first).
    assert!(
        report.ok > 0 && cards.ok > 0,
        "report {report:?}, cards {cards:?}"
    );
}

#[test]
fn a_shm_truncated_in_a_loop_never_kills_roots_report_or_cards() {
    require_root();
    let (_base, dir, path) = users_recording();
    // The owner keeps the file in WAL mode with a transaction in its -wal (a connection of
    // theirs, held open), so a reader needs the -shm…
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder
        .execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
             UPDATE meta SET value = value WHERE key = 'started_unix_ms';",
        )
        .unwrap();
    let (wal, shm) = (
        dir.join(format!("{JOB}.sqlite-wal")),
        dir.join(format!("{JOB}.sqlite-shm")),
    );
    for p in [&path, &wal, &shm] {
        chown(p, Some(USER), Some(USER)).unwrap();
    }
    // …and truncates that -shm in a loop.
    let stop = Arc::new(AtomicBool::new(false));
    let truncator = {
        let (stop, shm) = (Arc::clone(&stop), shm.clone());
        std::thread::spawn(move || {
            let f = std::fs::OpenOptions::new().write(true).open(&shm).unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                f.set_len(0).unwrap();
                n += 1;
            }
            n
        })
    };
    let report = runs(100, || {
        let mut c = slurmwatch();
        c.args(["report", &JOB.to_string(), "--no-sacct", "--file"])
            .arg(&path);
        c
    });
    let cards = runs(30, || {
        let mut c = slurmwatch();
        c.args(["cards", "--no-sacct", "-S", "@0", "--spool"])
            .arg(&dir);
        c
    });
    stop.store(true, Ordering::Relaxed);
    let truncations = truncator.join().unwrap();
    // Never closed: closing would touch the truncated -shm (SIGBUS in this test's process).
    std::mem::forget(holder);
    eprintln!("{truncations} truncations; report {report:?}; cards {cards:?}");
    assert_eq!(
        report.sigbus + cards.sigbus,
        0,
        "root died of SIGBUS: report {report:?}, cards {cards:?}"
    );
    assert_eq!(report.hung + cards.hung, 0);
    // Every run read the file (its rows, the -wal's included) and reported.
    assert_eq!(
        (report.ok, cards.ok),
        (100, 30),
        "report {report:?}, cards {cards:?}"
    );
}
