//! Runs file operations on the calling thread with a user's filesystem credentials: the one
//! place root switches identity (the plugin's archive copy, the CLI reading a job's log).
//!
//! Root must not write, or open, what a user names or can change: the archive copy lands in
//! a place the user can write (a symlink or hardlink the user planted would redirect root's
//! write), and a job's log path is the user's choice (it can name a device or lead through a
//! symlink the user swapped in). So the thread doing it switches its own fsuid/fsgid and
//! supplementary groups with raw syscalls, which act on the calling thread only (glibc's
//! wrappers would switch every thread of the process: slurmstepd's too). Changing fsuid from 0
//! clears the thread's filesystem capabilities (CAP_DAC_OVERRIDE and friends), so the kernel
//! checks exactly what the user could do.

/// The user's supplementary groups, from the system's databases.
fn groups_of(uid: u32, gid: u32) -> Vec<libc::gid_t> {
    let Some(name) = crate::sys::user_name(uid).and_then(|n| std::ffi::CString::new(n).ok()) else {
        return vec![gid];
    };
    let mut n: libc::c_int = 64;
    let mut groups = vec![0 as libc::gid_t; n as usize];
    // SAFETY: name is NUL-terminated; groups has room for n entries.
    let r = unsafe { libc::getgrouplist(name.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
    if r < 0 {
        return vec![gid];
    }
    groups.truncate(n.max(0) as usize);
    groups
}

fn raw_setgroups(groups: &[libc::gid_t]) -> bool {
    // SAFETY: the pointer and length describe a live slice.
    unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) == 0 }
}

fn raw_setfsuid(uid: u32) -> u32 {
    // SAFETY: setfsuid takes a uid and returns the previous fsuid.
    unsafe { libc::syscall(libc::SYS_setfsuid, uid) as u32 }
}

fn raw_setfsgid(gid: u32) -> u32 {
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_setfsgid, gid) as u32 }
}

/// Root's filesystem identity, put back when dropped — on every way out of `with_user_fs`,
/// a panic in the closure included — and checked: the drop reports whether it took.
struct Restore {
    saved_groups: Vec<libc::gid_t>,
}

impl Restore {
    fn restore(&self) -> bool {
        raw_setfsuid(0);
        raw_setfsgid(0);
        let groups_ok = raw_setgroups(&self.saved_groups);
        groups_ok && raw_setfsuid(u32::MAX) == 0 && raw_setfsgid(u32::MAX) == 0
    }
}

impl Drop for Restore {
    fn drop(&mut self) {
        if !self.restore() {
            // Nothing sane is left to do on this thread but refuse to go on as the user.
            RESTORE_FAILED.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Set if root's identity could not be put back on some thread (then never cleared): callers
/// stop using `with_user_fs` and say so.
static RESTORE_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Runs `f` with the user's filesystem identity on this thread, then restores root's (also
/// when `f` panics). Refuses to run `f` if the switch cannot be verified. Callers run it on a
/// thread of its own (see `archive`), so even a failed restore stays on that thread.
pub fn with_user_fs<T>(uid: u32, gid: u32, f: impl FnOnce() -> T) -> Result<T, String> {
    if uid == 0 {
        return Ok(f()); // a root job: root's own credentials are the user's
    }
    if RESTORE_FAILED.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(
            "root's identity could not be restored earlier in this process: not switching again"
                .into(),
        );
    }
    let mut saved = vec![0 as libc::gid_t; 256];
    // SAFETY: saved has room for 256 entries.
    let n = unsafe { libc::getgroups(saved.len() as libc::c_int, saved.as_mut_ptr()) };
    if n < 0 {
        return Err("cannot read the current groups".into());
    }
    saved.truncate(n as usize);
    let guard = Restore {
        saved_groups: saved,
    };
    if !raw_setgroups(&groups_of(uid, gid)) {
        return Err("cannot switch to the user's groups".into());
    }
    raw_setfsgid(gid);
    raw_setfsuid(uid);
    // setfsuid reports failure only through the next call's return value: verify.
    let (now_uid, now_gid) = (raw_setfsuid(u32::MAX), raw_setfsgid(u32::MAX));
    if now_uid != uid || now_gid != gid {
        return Err(format!("cannot switch to uid {uid}/gid {gid}"));
    }
    let result = f();
    let restored = guard.restore();
    std::mem::forget(guard);
    if !restored {
        RESTORE_FAILED.store(true, std::sync::atomic::Ordering::SeqCst);
        return Err("could not restore root's filesystem identity".into());
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fsuid() -> u32 {
        raw_setfsuid(u32::MAX)
    }

    /// Needs root (the test command runs the fast tier as root; as another user the switch is
    /// refused, which is what the second assertion checks then).
    #[test]
    fn identity_is_restored_after_a_panic_in_the_closure() {
        let as_root = unsafe { libc::geteuid() } == 0;
        let t = std::thread::spawn(move || {
            let r = std::panic::catch_unwind(|| {
                with_user_fs(65534, 65534, || {
                    assert_eq!(fsuid(), 65534);
                    panic!("boom");
                })
            });
            (r.is_err(), fsuid())
        });
        let (panicked, after) = t.join().unwrap();
        if as_root {
            assert!(panicked);
            assert_eq!(after, 0, "fsuid left at the user's after a panic");
        } else {
            assert!(
                !panicked,
                "a non-root switch must be refused before the closure runs"
            );
        }
    }
}
