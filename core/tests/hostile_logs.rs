//! Root reading a job's log (issue 37, attack 4), performed: the path is the user's choice
//! (`--output`, the work dir), so it can name a FIFO or a device, directly or through a
//! directory swapped for a symlink. Root must not open it: a FIFO's writer, blocked until
//! someone opens the other end, shows from outside whether root did. Needs root (the test
//! command runs the fast tier as root).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{chown, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slurmwatch_core::report::joblog::gather;

/// The job's owner: not root.
const USER: u32 = 65534;

fn require_root() {
    // SAFETY: no failure mode.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this attack is on root's reader: run as root"
    );
}

/// A directory of the user's holding a FIFO `name`, and a writer blocked opening it: the
/// flag turns true once anyone opens the FIFO for reading.
fn fifo_with_writer(dir: &Path, name: &str) -> (PathBuf, Arc<AtomicBool>) {
    let p = dir.join(name);
    let c = CString::new(p.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    chown(&p, Some(USER), Some(USER)).unwrap();
    let opened = Arc::new(AtomicBool::new(false));
    let (flag, p2) = (Arc::clone(&opened), p.clone());
    std::thread::spawn(move || {
        // Blocks until a reader opens the other end.
        if std::fs::OpenOptions::new().write(true).open(&p2).is_ok() {
            flag.store(true, Ordering::SeqCst);
        }
    });
    std::thread::sleep(Duration::from_millis(100)); // the writer is in its open
    (p, opened)
}

/// Lets a writer still blocked go (the test's own cleanup).
fn release(p: &Path) {
    let _ = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(p);
}

fn users_dir() -> (tempfile::TempDir, PathBuf) {
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let d = base.path().join("work");
    std::fs::create_dir(&d).unwrap();
    chown(&d, Some(USER), Some(USER)).unwrap();
    (base, d)
}

/// Root's `gather` over `path`: returns within the bound and names why it did not read it.
fn roots_gather(path: &Path) -> String {
    let t = Instant::now();
    let files = [("stdout+stderr", path.to_path_buf(), "scontrol")];
    let (info, _) = gather(&files, Some(USER));
    assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
    info.files[0].error.clone().expect("not read")
}

#[test]
fn root_never_opens_a_fifo_named_as_the_jobs_output() {
    require_root();
    let (_b, wd) = users_dir();
    let (fifo, opened) = fifo_with_writer(&wd, "slurm-5.out");
    let e = roots_gather(&fifo);
    std::thread::sleep(Duration::from_millis(200));
    let was_opened = opened.load(Ordering::SeqCst);
    release(&fifo);
    assert!(
        !was_opened,
        "root opened the FIFO the job named (its writer unblocked); said {e:?}"
    );
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn root_never_opens_through_a_work_dir_swapped_for_a_symlink() {
    require_root();
    let (_b, wd) = users_dir();
    // What the job's work dir now leads to: a place of the user's choosing (here a FIFO
    // named like the device, so the open shows) …
    let elsewhere = wd.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    chown(&elsewhere, Some(USER), Some(USER)).unwrap();
    let (fifo, opened) = fifo_with_writer(&elsewhere, "ptmx");
    let run = wd.join("run");
    std::os::unix::fs::symlink(&elsewhere, &run).unwrap();
    let e = roots_gather(&run.join("ptmx"));
    std::thread::sleep(Duration::from_millis(200));
    let was_opened = opened.load(Ordering::SeqCst);
    release(&fifo);
    assert!(
        !was_opened,
        "root opened the FIFO through the swapped directory; said {e:?}"
    );
    assert!(e.contains("not a regular file"), "{e}");
    // … and `/dev` itself: the device is refused by its type, never opened.
    let dev = wd.join("dev");
    std::os::unix::fs::symlink("/dev", &dev).unwrap();
    let e = roots_gather(&dev.join("ptmx"));
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn root_reads_the_users_own_log_as_the_user() {
    require_root();
    let (_b, wd) = users_dir();
    let log = wd.join("slurm-5.out");
    std::fs::write(
        &log,
        "hello\nslurmstepd: error: Detected 1 oom_kill event\n",
    )
    .unwrap();
    chown(&log, Some(USER), Some(USER)).unwrap();
    let files = [("stdout+stderr", log.clone(), "scontrol")];
    let (info, scan) = gather(&files, Some(USER));
    assert_eq!(info.files[0].error, None);
    assert_eq!(
        info.files[0].bytes_read,
        Some(std::fs::metadata(&log).unwrap().len())
    );
    drop(scan);
    // A file of root's (not the job user's) in the user's directory: refused.
    let roots = wd.join("roots.out");
    std::fs::write(&roots, "secret").unwrap();
    let e = roots_gather(&roots);
    assert!(e.contains("not by the job's user"), "{e}");
}
