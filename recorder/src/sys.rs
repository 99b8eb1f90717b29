//! The few facts slurmwatch takes from the C library, each asked in one place: local time
//! (`localtime_r`, which honours `TZ` and the zone files exactly as Slurm's own commands do,
//! so our times match sacct's), the calling thread's CPU time (`RUSAGE_THREAD`: the
//! sampler's own cost, and the benchmark floor beside it), a user's name and group (`getpwuid_r`: NSS,
//! so LDAP/SSSD users resolve as they do for Slurm), and the terminal's `NO_COLOR` convention. Kept as thin `libc`
//! wrappers rather than a crate: `libc` is already linked, and a time-zone crate would read
//! the zone database its own way. And the wall clock as Unix time ([`now_unix_ms`]): read in
//! one place, with one answer for a clock set before 1970.

use std::ffi::CStr;

/// A local wall-clock time, as `localtime_r` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalTime {
    pub year: i32,
    /// 1–12.
    pub month: u32,
    /// 1–31.
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl LocalTime {
    /// `YYYY-MM-DD`.
    pub fn date(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }

    /// `YYYY-MM-DD<sep>HH:MM:SS` (`' '` for people, `'T'` for Slurm's `-S/-E`).
    pub fn date_time(&self, sep: char) -> String {
        format!(
            "{}{sep}{:02}:{:02}:{:02}",
            self.date(),
            self.hour,
            self.minute,
            self.second
        )
    }
}

/// Now, in Unix milliseconds: every reader of the wall clock in slurmwatch (the plugin's rows
/// and steps, the live view, the exporter, the mail queue, the report) asks here.
///
/// A clock set before 1970 reads as the negative count it is (saturating at `i64::MIN`):
/// times taken from it stay ordered and their differences right, and no made-up instant
/// (0, or `i64::MAX`) stands in for it; a name built from it (`store::paths::stale_path`)
/// is then not one the spool sweep removes.
pub fn now_unix_ms() -> i64 {
    unix_ms(std::time::SystemTime::now())
}

/// Now, in whole Unix seconds (rounded down): [`now_unix_ms`] / 1000.
pub fn now_unix_s() -> i64 {
    now_unix_ms().div_euclid(1000)
}

/// `t` in Unix milliseconds, negative before 1970 (see [`now_unix_ms`]).
fn unix_ms(t: std::time::SystemTime) -> i64 {
    let ms = |d: std::time::Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => ms(d),
        Err(e) => -ms(e.duration()),
    }
}

/// The local time of a Unix time in seconds; `None` when the C library cannot represent it.
pub fn local_time(t_unix_s: i64) -> Option<LocalTime> {
    let secs = libc::time_t::try_from(t_unix_s).ok()?;
    // SAFETY: localtime_r writes only into `tm`, which we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    if unsafe { libc::localtime_r(&secs, &mut tm) }.is_null() {
        return None;
    }
    Some(LocalTime {
        year: tm.tm_year + 1900,
        month: (tm.tm_mon + 1) as u32,
        day: tm.tm_mday as u32,
        hour: tm.tm_hour as u32,
        minute: tm.tm_min as u32,
        second: tm.tm_sec as u32,
    })
}

/// The name of the user with this uid, from the system's databases (never from a job's
/// environment); `None` when there is no such user.
pub fn user_name(uid: u32) -> Option<String> {
    passwd(uid).map(|(name, _)| name)
}

/// The primary group of the user with this uid, from the system's databases; `None` when
/// there is no such user.
pub fn user_gid(uid: u32) -> Option<u32> {
    passwd(uid).map(|(_, gid)| gid)
}

/// `getpwuid_r`: the user's name and primary gid.
fn passwd(uid: u32) -> Option<(String, u32)> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: all pointers are valid for the call; `buf` outlives the use of `pw`'s strings.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe { libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr(), buf.len(), &mut out) };
    if rc != 0 || out.is_null() || pw.pw_name.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r filled pw_name with a NUL-terminated string inside `buf`.
    let name = unsafe { CStr::from_ptr(pw.pw_name) }
        .to_string_lossy()
        .into_owned();
    Some((name, pw.pw_gid))
}

/// The uid of the user `name` (a name, or a number as Slurm's settings allow), from the
/// system's databases; `None` when there is no such user.
pub fn user_uid(name: &str) -> Option<u32> {
    if let Ok(uid) = name.parse::<u32>() {
        return Some(uid);
    }
    let name = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: as in `user_name`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut out,
        )
    };
    (rc == 0 && !out.is_null()).then_some(pw.pw_uid)
}

/// The name of the user running this process.
pub fn current_user_name() -> Option<String> {
    // SAFETY: getuid cannot fail.
    user_name(unsafe { libc::getuid() })
}

/// This machine's host name up to the first dot; `None` when the C library cannot say.
/// (Slurm's node name can differ: prefer `SLURMD_NODENAME` where slurmd provides it.)
pub fn short_host_name() -> Option<String> {
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: buf is writable for its length; we NUL-terminate it ourselves.
    if unsafe { libc::gethostname(buf.as_mut_ptr(), buf.len()) } != 0 {
        return None;
    }
    buf[255] = 0;
    // SAFETY: NUL-terminated above.
    let name = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy();
    name.split('.')
        .next()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
}

/// Whether colour may be used: not when `NO_COLOR` is set to anything but the empty string
/// (<https://no-color.org>).
pub fn colour_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The calling thread's cumulative CPU time (user + system), µs: `RUSAGE_THREAD`. `None`
/// when it cannot be read.
pub fn thread_cpu_usec() -> Option<u64> {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: ru is a valid out-pointer.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return None;
    }
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Some(us(ru.ru_utime) + us(ru.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_ms_is_signed_around_1970() {
        use std::time::{Duration, UNIX_EPOCH};
        assert_eq!(unix_ms(UNIX_EPOCH), 0);
        assert_eq!(
            unix_ms(UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)),
            1_700_000_000_123
        );
        assert_eq!(unix_ms(UNIX_EPOCH - Duration::from_millis(1_500)), -1_500);
        assert!(now_unix_ms() > 1_700_000_000_000);
        assert!((now_unix_ms() - now_unix_s() * 1000).abs() < 2000);
        assert_eq!(
            (-1_500_i64).div_euclid(1000),
            -2,
            "seconds round down before 1970 too"
        );
    }

    #[test]
    fn local_time_agrees_with_date() {
        let t = 1_764_499_505;
        let out = std::process::Command::new("date")
            .args(["-d", &format!("@{t}"), "+%F %T"])
            .output()
            .unwrap();
        let want = String::from_utf8(out.stdout).unwrap();
        let got = local_time(t).unwrap();
        assert_eq!(got.date_time(' '), want.trim());
        assert_eq!(got.date_time('T'), want.trim().replace(' ', "T"));
        assert_eq!(local_time(i64::MAX), None);
    }

    #[test]
    fn the_short_host_name_is_hostname_s() {
        let out = std::process::Command::new("hostname")
            .arg("-s")
            .output()
            .unwrap();
        let want = String::from_utf8(out.stdout).unwrap();
        assert_eq!(short_host_name().as_deref(), Some(want.trim()));
    }

    #[test]
    fn root_has_a_name_and_an_unused_uid_has_none() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert_eq!(user_name(4_000_000_000), None);
    }
}
