//! Writing into a directory that only its owner can change (the archive copy).
//!
//! The archive lives on a filesystem other users can reach, so every step is relative to a
//! directory descriptor whose owner and mode were checked with `fstat`, never a path looked up
//! again: the directory is walked component by component from the site's fixed prefix with
//! `openat(O_DIRECTORY|O_NOFOLLOW|O_NONBLOCK)` (a symlink, a FIFO or a plain file in the way is
//! refused, nothing blocks), missing components are made with mode 0700, and each component
//! below the prefix must be owned by the job's user (or root) and writable by nobody else —
//! otherwise another user could have made it, or could swap what is inside. The copy is
//! created with `O_EXCL|O_NOFOLLOW` under a temporary name in that directory, written, synced
//! and `renameat`ed to its final name.
//!
//! The caller runs this with the job user's filesystem identity (see [`crate::as_user`]),
//! so the kernel checks exactly what the user could do.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn c_name(name: &str) -> Result<CString, String> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(format!("{name:?} is not one plain file name"));
    }
    CString::new(name).map_err(|_| format!("{name:?} is not one plain file name"))
}

fn open_dir_at(parent: Option<&OwnedFd>, name: &CString) -> std::io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
    let at = parent.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: a valid directory descriptor (or AT_FDCWD) and a NUL-terminated name.
    let fd = unsafe { libc::openat(at, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: openat returned a fresh descriptor that we now own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstat(fd: &OwnedFd) -> std::io::Result<libc::stat> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid descriptor and out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// Opens `<prefix>/<components…>` for writing as `owner_uid`, creating missing components
/// (mode 0700). `prefix` is the site's fixed part (it may contain symlinks the admin made);
/// every component below it must be a real directory owned by `owner_uid` or root and not
/// writable by group or others. The error names the directory and says why.
pub fn open_private_dir(
    prefix: &Path,
    components: &[String],
    owner_uid: u32,
) -> Result<OwnedFd, String> {
    let p = CString::new(prefix.as_os_str().as_bytes())
        .map_err(|_| format!("{} is not a path", prefix.display()))?;
    let mut dir = open_dir_at(None, &p)
        .map_err(|e| format!("cannot open the archive base {}: {e}", prefix.display()))?;
    let mut shown = prefix.to_path_buf();
    if components.is_empty() {
        check_private(&dir, &shown, owner_uid)?;
    }
    for c in components {
        let name = c_name(c)?;
        shown.push(c);
        let next = match open_dir_at(Some(&dir), &name) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                // SAFETY: a valid directory descriptor and a NUL-terminated name.
                let rc = unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), 0o700) };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EEXIST) {
                        return Err(format!("cannot create {}: {e}", shown.display()));
                    }
                }
                open_dir_at(Some(&dir), &name)
            }
            r => r,
        }
        .map_err(|e| match e.raw_os_error() {
            // O_NOFOLLOW|O_DIRECTORY on a symlink fails with ENOTDIR on Linux, ELOOP elsewhere.
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => format!(
                "{} is a symlink or not a directory: refused",
                shown.display()
            ),
            _ => format!("cannot open {}: {e}", shown.display()),
        })?;
        check_private(&next, &shown, owner_uid)?;
        dir = next;
    }
    Ok(dir)
}

fn check_private(dir: &OwnedFd, shown: &Path, owner_uid: u32) -> Result<(), String> {
    let st = fstat(dir).map_err(|e| format!("cannot stat {}: {e}", shown.display()))?;
    if st.st_uid != owner_uid && st.st_uid != 0 {
        return Err(format!(
            "{} belongs to uid {}, not the job's user (uid {owner_uid}): refused (another user may have made it)",
            shown.display(),
            st.st_uid
        ));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(format!(
            "{} is writable by group or others (mode {:o}): refused",
            shown.display(),
            st.st_mode & 0o7777
        ));
    }
    Ok(())
}

/// Writes the whole of `src` to `<dir>/<name>` through `<dir>/.<name>.tmp.<pid>` (created
/// `O_EXCL|O_NOFOLLOW|O_NONBLOCK`, mode 0600), synced, then renamed over any older copy.
pub fn install_file_at(dir: &OwnedFd, name: &str, src: &mut File) -> Result<(), String> {
    let final_name = c_name(name)?;
    let tmp_name = c_name(&format!(".{name}.tmp.{}", std::process::id()))?;
    let flags = libc::O_WRONLY
        | libc::O_CREAT
        | libc::O_EXCL
        | libc::O_NOFOLLOW
        | libc::O_NONBLOCK
        | libc::O_CLOEXEC;
    let create = || {
        // SAFETY: a valid directory descriptor and a NUL-terminated name.
        let fd = unsafe { libc::openat(dir.as_raw_fd(), tmp_name.as_ptr(), flags, 0o600) };
        if fd < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            // SAFETY: a fresh descriptor that we now own.
            Ok(unsafe { File::from_raw_fd(fd) })
        }
    };
    let unlink_tmp = || {
        // SAFETY: as above.
        unsafe { libc::unlinkat(dir.as_raw_fd(), tmp_name.as_ptr(), 0) };
    };
    let mut out = match create() {
        // Our own leftover (same pid, inside a directory only the user can write).
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
            unlink_tmp();
            create()
        }
        r => r,
    }
    .map_err(|e| format!("cannot create the temporary copy {name}: {e}"))?;
    let written = (|| -> std::io::Result<()> {
        src.seek(SeekFrom::Start(0))?;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = src.read(&mut buf)?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])?;
        }
        out.sync_all()?;
        // SAFETY: valid directory descriptors and NUL-terminated names.
        let rc = unsafe {
            libc::renameat(
                dir.as_raw_fd(),
                tmp_name.as_ptr(),
                dir.as_raw_fd(),
                final_name.as_ptr(),
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a valid descriptor.
        unsafe { libc::fsync(dir.as_raw_fd()) };
        Ok(())
    })();
    written.map_err(|e| {
        unlink_tmp();
        format!("cannot write the copy {name}: {e}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn me() -> u32 {
        // SAFETY: no preconditions.
        unsafe { libc::geteuid() }
    }

    fn src(text: &str) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f
    }

    #[test]
    fn creates_private_components_and_installs_the_copy() {
        let base = tempfile::tempdir().unwrap();
        let dir = open_private_dir(base.path(), &["alice".into(), "42".into()], me()).unwrap();
        install_file_at(&dir, "42.n1.sqlite", &mut src("hello")).unwrap();
        let made = base.path().join("alice/42");
        assert_eq!(
            std::fs::metadata(&made).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert_eq!(
            std::fs::read_to_string(made.join("42.n1.sqlite")).unwrap(),
            "hello"
        );
        // A second copy replaces the first; no temporary is left.
        install_file_at(&dir, "42.n1.sqlite", &mut src("again")).unwrap();
        let names: Vec<_> = std::fs::read_dir(&made).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn refuses_a_component_others_can_write_or_a_symlink_or_a_fifo() {
        let base = tempfile::tempdir().unwrap();
        let squat = base.path().join("victim");
        std::fs::create_dir(&squat).unwrap();
        std::fs::set_permissions(&squat, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = open_private_dir(base.path(), &["victim".into()], me()).unwrap_err();
        assert!(e.contains("writable by group or others"), "{e}");

        std::os::unix::fs::symlink(&squat, base.path().join("link")).unwrap();
        let e = open_private_dir(base.path(), &["link".into()], me()).unwrap_err();
        assert!(e.contains("is a symlink or not a directory"), "{e}");

        let fifo = CString::new(base.path().join("fifo").as_os_str().as_bytes()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o666) }, 0);
        let t = std::time::Instant::now();
        let e = open_private_dir(base.path(), &["fifo".into()], me()).unwrap_err();
        assert!(e.contains("is a symlink or not a directory"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn refuses_a_component_owned_by_someone_else() {
        let base = tempfile::tempdir().unwrap();
        let d = base.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        // As root (CI), hand it to a third uid; otherwise it is ours and we ask for another.
        let owner = if me() == 0 {
            std::os::unix::fs::chown(&d, Some(4242), None).unwrap();
            4242
        } else {
            me()
        };
        let e = open_private_dir(base.path(), &["d".into()], 4243).unwrap_err();
        assert!(e.contains(&format!("belongs to uid {owner}")), "{e}");
    }

    #[test]
    fn names_must_be_plain() {
        let base = tempfile::tempdir().unwrap();
        let dir = open_private_dir(base.path(), &[], me());
        // tempdir is 0700 and ours.
        let dir = dir.unwrap();
        for bad in ["", ".", "..", "a/b"] {
            assert!(
                install_file_at(&dir, bad, &mut src("x")).is_err(),
                "{bad:?}"
            );
        }
    }
}
