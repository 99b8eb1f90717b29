//! The TCP shim (`quickack/`, `libslurmwatch_quickack.so`) loaded into the Slurm clients
//! slurmwatch runs: with it a slurmdbd request costs milliseconds instead of ~90 ms of
//! delayed-acknowledgement stalls (the shim's module doc says why; docs/admin.md has the
//! figures). Its absence costs only that time: the clients run as they are.
//!
//! Where it is looked for, next to the running executable: the build directory
//! (`target/release/`), then `../lib/slurmwatch/` and `../lib64/slurmwatch/` (the .deb and
//! .rpm layouts). A file anyone but root or this user could write is not loaded.
//! `SLURMWATCH_QUICKACK=0` turns it off (benchmarks compare with and without).

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The shim's file name, as cargo builds it and the packages install it.
pub const FILE_NAME: &str = "libslurmwatch_quickack.so";

/// The variable that turns the shim off when `0`.
pub const SWITCH_VARIABLE: &str = "SLURMWATCH_QUICKACK";

/// Adds the shim to `cmd`'s `LD_PRELOAD` (before any the caller's environment holds), when it
/// is installed and not turned off.
pub fn preload_into(cmd: &mut Command) {
    if std::env::var_os(SWITCH_VARIABLE).is_some_and(|v| v == "0") {
        return;
    }
    if let Some(shim) = installed() {
        cmd.env(
            "LD_PRELOAD",
            preload_value(shim, std::env::var_os("LD_PRELOAD")),
        );
    }
}

/// `LD_PRELOAD` with the shim first; ld.so takes a list separated by spaces or colons.
fn preload_value(shim: &Path, existing: Option<OsString>) -> OsString {
    let mut v = shim.as_os_str().to_os_string();
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        v.push(" ");
        v.push(e);
    }
    v
}

/// The shim next to this executable, found once per process.
fn installed() -> Option<&'static Path> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let exe = std::env::current_exe().ok()?;
            let dir = exe.parent()?;
            candidates(dir).into_iter().find(|p| loadable(p))
        })
        .as_deref()
}

fn candidates(exe_dir: &Path) -> Vec<PathBuf> {
    vec![
        exe_dir.join(FILE_NAME),
        exe_dir.join("../lib/slurmwatch").join(FILE_NAME),
        exe_dir.join("../lib64/slurmwatch").join(FILE_NAME),
    ]
}

/// A regular file owned by root or this user that no one else can write: root may run the
/// CLI too, and must not load a library another account could have replaced.
fn loadable(path: &Path) -> bool {
    let Ok(m) = std::fs::metadata(path) else {
        return false;
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    m.is_file() && m.mode() & 0o022 == 0 && (m.uid() == 0 || m.uid() == me)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_shim_goes_first_and_keeps_what_the_user_preloads() {
        let shim = Path::new("/usr/lib/slurmwatch/libslurmwatch_quickack.so");
        assert_eq!(preload_value(shim, None), shim.as_os_str());
        assert_eq!(preload_value(shim, Some("".into())), shim.as_os_str());
        assert_eq!(
            preload_value(shim, Some("/opt/x.so".into())),
            "/usr/lib/slurmwatch/libslurmwatch_quickack.so /opt/x.so"
        );
    }

    #[test]
    fn a_shim_others_can_write_is_not_loaded() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(FILE_NAME);
        std::fs::write(&p, b"\x7fELF").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(loadable(&p));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o775)).unwrap();
        assert!(!loadable(&p), "group-writable");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o757)).unwrap();
        assert!(!loadable(&p), "world-writable");
        assert!(!loadable(d.path()), "a directory");
        assert!(!loadable(&d.path().join("absent.so")));
    }

    #[test]
    fn looked_for_in_the_build_directory_then_the_packages_lib_directories() {
        let c = candidates(Path::new("/usr/bin"));
        assert_eq!(c[0], Path::new("/usr/bin/libslurmwatch_quickack.so"));
        assert_eq!(
            c[1],
            Path::new("/usr/bin/../lib/slurmwatch/libslurmwatch_quickack.so")
        );
        assert_eq!(
            c[2],
            Path::new("/usr/bin/../lib64/slurmwatch/libslurmwatch_quickack.so")
        );
    }
}
