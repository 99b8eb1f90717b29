//! Who may touch a job's live file: root writes it, the job's user may only read it.
//!
//! The file and SQLite's `-wal`/`-shm` beside it stay owned by root with mode 0600, so the job's
//! user can neither truncate what root has memory-mapped (a SIGBUS in slurmstepd) nor rewrite
//! the schema root's SQLite parses (docs/design.md §7). The user's read access is one POSIX ACL entry
//! (`user:<uid>:r--`), set on the open descriptor, never by path. SQLite creates `-wal`/`-shm`
//! itself (owned by the database file's owner, with its mode bits), so the writer grants those
//! too once they exist (see `Writer`). A reader without write access to `-shm` is SQLite's
//! read-only WAL case (since 3.22): it maps the `-shm` read-only and retries on contention.
//!
//! Hand-written rather than through `posix-acl`/`exacl`: those go by path (or need libacl in
//! every slurmstepd); the kernel's xattr format is five fixed entries, written once here.

use std::fs::File;
use std::os::fd::AsRawFd;

const XATTR: &std::ffi::CStr = c"system.posix_acl_access";
const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const UNDEFINED_ID: u32 = u32::MAX;
const READ: u16 = 4;
const WRITE: u16 = 2;

/// The ACL `user::rw-, user:<uid>:r--, group::---, mask::r--, other::---` in the kernel's
/// xattr layout (little-endian header and entries, sorted by tag as the kernel requires).
pub fn read_grant_acl(uid: u32) -> Vec<u8> {
    let mut out = VERSION.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (USER_OBJ, READ | WRITE, UNDEFINED_ID),
        (USER, READ, uid),
        (GROUP_OBJ, 0, UNDEFINED_ID),
        (MASK, READ, UNDEFINED_ID),
        (OTHER, 0, UNDEFINED_ID),
    ] {
        out.extend_from_slice(&tag.to_le_bytes());
        out.extend_from_slice(&perm.to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
    }
    out
}

/// Lets `uid` read `file` (and nobody else but its owner); `uid` 0 needs no grant. An error
/// (e.g. a filesystem without ACLs) leaves the file owner-only: nothing is ever widened.
pub fn grant_read(file: &File, uid: u32) -> std::io::Result<()> {
    if uid == 0 {
        return Ok(());
    }
    let acl = read_grant_acl(uid);
    // SAFETY: a valid descriptor, a NUL-terminated name and a buffer of the given length.
    let rc = unsafe {
        libc::fsetxattr(
            file.as_raw_fd(),
            XATTR.as_ptr(),
            acl.as_ptr().cast(),
            acl.len(),
            0,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether `file` already carries exactly the grant for `uid`.
pub fn has_read_grant(file: &File, uid: u32) -> bool {
    let want = read_grant_acl(uid);
    let mut buf = vec![0u8; want.len() + 64];
    // SAFETY: as in `grant_read`; the kernel writes at most `buf.len()` bytes.
    let n = unsafe {
        libc::fgetxattr(
            file.as_raw_fd(),
            XATTR.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    n >= 0 && buf[..n as usize] == want[..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acl_is_five_sorted_entries() {
        let acl = read_grant_acl(1234);
        assert_eq!(acl.len(), 4 + 5 * 8);
        assert_eq!(&acl[..4], &[2, 0, 0, 0]);
        // user:1234:r-- is the second entry.
        assert_eq!(&acl[12..20], &[2, 0, 4, 0, 0xd2, 0x04, 0, 0]);
        let tags: Vec<u16> = acl[4..]
            .chunks(8)
            .map(|e| u16::from_le_bytes([e[0], e[1]]))
            .collect();
        assert!(tags.windows(2).all(|w| w[0] < w[1]), "{tags:?}");
    }

    #[test]
    fn a_grant_reads_back_and_masks_the_group_bits() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = File::create(dir.path().join("f")).unwrap();
        f.set_permissions(std::fs::Permissions::from_mode(0o600))
            .unwrap();
        grant_read(&f, 4321).expect("this machine's /tmp supports ACLs");
        assert!(has_read_grant(&f, 4321));
        assert!(!has_read_grant(&f, 4322));
        // The kernel shows the mask as the group bits: read, never write.
        let mode = f.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }
}
