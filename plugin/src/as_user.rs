//! Runs file operations on the calling thread with the job user's filesystem credentials.
//!
//! The archive copy lands in a place the user can write (a shared filesystem), so root must
//! not write there: a symlink or hardlink the user planted would redirect root's write. The
//! sampler thread therefore switches its own fsuid/fsgid and supplementary groups with raw
//! syscalls, which act on the calling thread only (glibc's wrappers would switch every thread
//! of slurmstepd). Changing fsuid from 0 clears the thread's filesystem capabilities
//! (CAP_DAC_OVERRIDE and friends), so the kernel checks exactly what the user could do.

/// The user's supplementary groups, from the system's databases.
fn groups_of(uid: u32, gid: u32) -> Vec<libc::gid_t> {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid pointers for the call.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() {
        return vec![gid];
    }
    let mut n: libc::c_int = 64;
    let mut groups = vec![0 as libc::gid_t; n as usize];
    // SAFETY: pw_name is valid (inside buf); groups has room for n entries.
    let r = unsafe { libc::getgrouplist(pw.pw_name, gid, groups.as_mut_ptr(), &mut n) };
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

/// Runs `f` with the user's filesystem identity on this thread, then restores root's.
/// Refuses to run `f` if the switch cannot be verified.
pub fn with_user_fs<T>(uid: u32, gid: u32, f: impl FnOnce() -> T) -> Result<T, String> {
    if uid == 0 {
        return Ok(f()); // a root job: root's own credentials are the user's
    }
    let mut saved = vec![0 as libc::gid_t; 256];
    // SAFETY: saved has room for 256 entries.
    let n = unsafe { libc::getgroups(saved.len() as libc::c_int, saved.as_mut_ptr()) };
    if n < 0 {
        return Err("cannot read the current groups".into());
    }
    saved.truncate(n as usize);
    let restore = |saved: &[libc::gid_t]| {
        raw_setfsuid(0);
        raw_setfsgid(0);
        raw_setgroups(saved);
    };
    if !raw_setgroups(&groups_of(uid, gid)) {
        return Err("cannot switch to the user's groups".into());
    }
    raw_setfsgid(gid);
    raw_setfsuid(uid);
    // setfsuid reports failure only through the next call's return value: verify.
    let (now_uid, now_gid) = (raw_setfsuid(u32::MAX), raw_setfsgid(u32::MAX));
    if now_uid != uid || now_gid != gid {
        restore(&saved);
        return Err(format!(
            "cannot switch to uid {uid}/gid {gid} for the archive copy"
        ));
    }
    let result = f();
    restore(&saved);
    Ok(result)
}
