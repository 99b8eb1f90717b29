//! Small, checked readers and parsers shared by the cgroup and /proc collectors.
//! Nothing here panics on malformed input: a value that does not parse is `None`.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Upper bound on one pseudo-file read. cgroup and /proc files are small; a bound keeps a
/// pathological file (a huge `cgroup.procs`) from growing the sampler's heap without limit.
const MAX_READ: u64 = 4 << 20;

/// Reads `path` into `buf` (cleared first) and returns the text. Reuses the buffer's
/// allocation so the periodic sampler does not allocate per file.
pub(crate) fn read_into<'b>(buf: &'b mut String, path: &Path) -> io::Result<&'b str> {
    buf.clear();
    File::open(path)?.take(MAX_READ).read_to_string(buf)?;
    Ok(buf.as_str())
}

/// Like [`read_into`], but any failure is `None` (the caller reports the field unreadable).
pub(crate) fn read_opt<'b>(buf: &'b mut String, path: &Path) -> Option<&'b str> {
    read_into(buf, path).ok()
}

/// A kernel file kept open between readings and re-read from offset 0 (`pread`): the
/// sampler reads the same dozen files every few seconds, and opening them by their long
/// paths cost more than reading them. Never returns a stale value:
/// - a removed cgroup's open files fail with ENODEV: unreadable, and the next reading
///   reopens by path (which fails while the directory is gone);
/// - a read of 0 bytes (a cgroup file is never empty while it exists, except io.stat before
///   the first IO) is re-checked at once through a fresh open;
/// - on a filesystem other than cgroupfs/sysfs (test fixtures), an unlinked or replaced file
///   stays readable through its descriptor, so st_nlink == 0 also means reopen.
#[derive(Debug)]
pub(crate) struct KeptFile {
    path: PathBuf,
    open: Option<(File, bool)>,
}

/// cgroup v1, cgroup2 and sysfs: kernfs filesystems, whose removed files fail reads.
const KERNFS_MAGICS: [i64; 3] = [0x0027_e0eb, 0x6367_7270, 0x6265_6572];

impl KeptFile {
    pub(crate) fn new(path: PathBuf) -> KeptFile {
        KeptFile { path, open: None }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's text in `buf`, or `None` when it cannot be read now.
    pub(crate) fn read<'b>(&mut self, buf: &'b mut String) -> Option<&'b str> {
        if let Some((file, check_links)) = &self.open {
            let ok = matches!(read_from_start(file, buf, !*check_links), Ok(n) if n > 0)
                && (!*check_links || file.metadata().is_ok_and(|m| m.nlink() > 0));
            if ok {
                return Some(buf.as_str());
            }
            self.open = None;
        }
        let file = File::open(&self.path).ok()?;
        let kernfs = on_kernfs(&file);
        read_from_start(&file, buf, kernfs).ok()?;
        self.open = Some((file, !kernfs));
        Some(buf.as_str())
    }

    pub(crate) fn read_u64(&mut self, buf: &mut String) -> Option<u64> {
        self.read(buf).and_then(parse_u64)
    }
}

fn on_kernfs(file: &File) -> bool {
    // SAFETY: plain-data struct; an open descriptor and a valid out-pointer.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) };
    rc == 0 && KERNFS_MAGICS.contains(&(st.f_type as i64))
}

/// Reads all of `file` from offset 0 into `buf` (cleared first, capacity reused), bounded by
/// [`MAX_READ`]; the byte count. Text that is not UTF-8 is an error, as with `read_to_string`.
/// `short_read_is_whole`: a kernfs file's text is generated whole at each read from offset 0
/// (seq_file), so a read that returns less than asked has returned all of it, and the read
/// that would return 0 is saved (half the sampler's fast-read syscalls).
fn read_from_start(file: &File, buf: &mut String, short_read_is_whole: bool) -> io::Result<usize> {
    let mut v = std::mem::take(buf).into_bytes();
    v.clear();
    let res = loop {
        let start = v.len();
        if start as u64 >= MAX_READ {
            break Ok(());
        }
        if v.capacity() - start < 1024 {
            v.reserve(4096);
        }
        v.resize(v.capacity().min(MAX_READ as usize), 0);
        match file.read_at(&mut v[start..], start as u64) {
            Ok(0) => {
                v.truncate(start);
                break Ok(());
            }
            Ok(n) => {
                let asked = v.len() - start;
                v.truncate(start + n);
                if short_read_is_whole && n < asked {
                    break Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => v.truncate(start),
            Err(e) => {
                v.truncate(start);
                break Err(e);
            }
        }
    };
    let n = v.len();
    match String::from_utf8(v) {
        Ok(s) => *buf = s,
        Err(e) => {
            let mut b = e.into_bytes();
            b.clear();
            *buf = String::from_utf8(b).unwrap_or_default();
            return Err(io::Error::new(io::ErrorKind::InvalidData, "not UTF-8"));
        }
    }
    res.map(|()| n)
}

/// A single-number file (`memory.current`, `cpuacct.usage`): trimmed text as `u64`.
pub(crate) fn parse_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Looks up `key` in a flat-keyed file (`memory.stat`, `cpu.stat`, `memory.events`,
/// `cpuacct.stat`, `memory.oom_control`): lines of `key value`. Exact key match.
pub(crate) fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut it = line.split_ascii_whitespace();
        if it.next()? != key {
            return None;
        }
        it.next()?.parse().ok()
    })
}

/// Counts non-empty lines (members listed in `cgroup.procs`, `tasks`, `cgroup.threads`).
pub(crate) fn count_lines(text: &str) -> u64 {
    text.lines().filter(|l| !l.trim().is_empty()).count() as u64
}

/// `sysconf(_SC_CLK_TCK)`: the unit of `cpuacct.stat` and of /proc/<pid>/stat times
/// (USER_HZ, 100 on Linux). Falls back to 100 if sysconf refuses.
pub(crate) fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

/// `sysconf(_SC_PAGESIZE)`: the unit of the `rss` field of /proc/<pid>/stat.
pub(crate) fn page_size() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

/// Clock ticks to microseconds without overflow.
pub(crate) fn ticks_to_usec(ticks: u64, ticks_per_sec: u64) -> u64 {
    let us = u128::from(ticks) * 1_000_000 / u128::from(ticks_per_sec.max(1));
    u64::try_from(us).unwrap_or(u64::MAX)
}

/// How a per-directory file becomes a number in [`walk_tree`].
pub(crate) type TreeValue = fn(&str) -> Option<u64>;

/// Lines of a membership file (`cgroup.procs`, `tasks`, `cgroup.threads`).
pub(crate) fn lines_value(text: &str) -> Option<u64> {
    Some(count_lines(text))
}

/// Sums each `(file, value)` over `dir` and its subdirectories down to `max_depth`, in ONE
/// walk. cgroup membership files list only their own directory's members and Slurm puts
/// tasks in child directories, hence the walk. Everything is opened relative to the open
/// directory (`openat`), never by its full path: the path lookups were most of the cost. A
/// slot is `None` when a directory that still exists cannot give it (a partial sum would be
/// a lie); a task directory removed while we walk is skipped.
pub(crate) fn walk_tree<const N: usize>(
    buf: &mut String,
    dir: &Path,
    files: &[(&CStr, TreeValue); N],
    max_depth: u32,
) -> [Option<u64>; N] {
    walk_tree_skipping(buf, dir, files, max_depth, None)
}

/// [`walk_tree`], leaving out every subdirectory named `skip` (at any depth): on cgroup v2
/// Slurm keeps slurmstepd itself in `step_<s>/slurm`, which is not the job's work.
pub(crate) fn walk_tree_skipping<const N: usize>(
    buf: &mut String,
    dir: &Path,
    files: &[(&CStr, TreeValue); N],
    max_depth: u32,
    skip: Option<&[u8]>,
) -> [Option<u64>; N] {
    let Ok(c) = CString::new(dir.as_os_str().as_bytes()) else {
        return [None; N];
    };
    // An unopenable root (gone, not a directory, refused) gives nothing, as before.
    let Ok(fd) = open_at(libc::AT_FDCWD, &c, libc::O_DIRECTORY) else {
        return [None; N];
    };
    let mut acc = [Some(0u64); N];
    let mut path = dir.to_path_buf();
    if !walk_into(buf, fd, &mut path, files, max_depth, skip, &mut acc) {
        return [None; N];
    }
    acc
}

fn open_at(dir: RawFd, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a valid C string; the descriptor returned is ours to own.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC | flags) };
    if fd < 0 {
        Err(io::Error::last_os_error())
    } else {
        // SAFETY: a fresh descriptor nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// Adds the directory `fd` (at `path`)'s values into `acc`; false when it is gone.
fn walk_into<const N: usize>(
    buf: &mut String,
    fd: OwnedFd,
    path: &mut PathBuf,
    files: &[(&CStr, TreeValue); N],
    max_depth: u32,
    skip: Option<&[u8]>,
    acc: &mut [Option<u64>; N],
) -> bool {
    let mut any = false;
    for (slot, (file, value)) in acc.iter_mut().zip(files.iter()) {
        let v = open_at(fd.as_raw_fd(), file, 0)
            .ok()
            .and_then(|f| {
                buf.clear();
                File::from(f)
                    .take(MAX_READ)
                    .read_to_string(buf)
                    .ok()
                    .map(|_| buf.as_str())
            })
            .and_then(value);
        any |= v.is_some();
        *slot = slot.zip(v).map(|(a, b)| a.saturating_add(b));
    }
    if !any && !path.exists() {
        return false;
    }
    if max_depth == 0 {
        return true;
    }
    // getdents64 on the descriptor itself: fdopendir/readdir cost three more syscalls per
    // directory (fstat, two fcntl).
    let dfd = fd.as_raw_fd();
    let mut ents = DirentBuf([0; 4096]);
    loop {
        // SAFETY: the buffer is ours and its length is passed.
        let n =
            unsafe { libc::syscall(libc::SYS_getdents64, dfd, ents.0.as_mut_ptr(), ents.0.len()) };
        if n == 0 {
            break;
        }
        if n < 0 {
            match io::Error::last_os_error().raw_os_error() {
                // The directory removed while listed (as std's read_dir).
                Some(libc::ENOENT) => break,
                _ => {
                    *acc = [None; N];
                    return true;
                }
            }
        }
        let mut pos = 0;
        while pos + 19 < n as usize {
            // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name (NUL-ended).
            let e = &ents.0[pos..n as usize];
            let reclen = u16::from_ne_bytes([e[16], e[17]]) as usize;
            let d_type = e[18];
            pos += reclen.max(1);
            let Ok(name) = CStr::from_bytes_until_nul(&e[19..reclen.min(e.len())]) else {
                continue;
            };
            if matches!(name.to_bytes(), b"." | b"..") || skip == Some(name.to_bytes()) {
                continue;
            }
            let is_dir = match d_type {
                libc::DT_DIR => true,
                libc::DT_UNKNOWN => is_dir_at(dfd, name),
                _ => false,
            };
            if !is_dir {
                continue;
            }
            path.push(std::ffi::OsStr::from_bytes(name.to_bytes()));
            match open_at(dfd, name, libc::O_DIRECTORY) {
                Ok(sub_fd) => {
                    let mut sub = [Some(0u64); N];
                    if walk_into(buf, sub_fd, path, files, max_depth - 1, skip, &mut sub) {
                        for (a, b) in acc.iter_mut().zip(sub) {
                            *a = a.zip(b).map(|(x, y)| x.saturating_add(y));
                        }
                    }
                    // A subdirectory gone mid-walk (a task ended) is skipped.
                }
                Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) => {}
                // It exists but cannot be read: its members are unknown.
                Err(_) => *acc = [None; N],
            }
            path.pop();
        }
    }
    true
}

/// getdents64's buffer, aligned for its 8-byte fields.
#[repr(align(8))]
struct DirentBuf([u8; 4096]);

fn is_dir_at(dir: RawFd, name: &CStr) -> bool {
    // SAFETY: plain-data struct; a valid C string and out-pointer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    rc == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kernel files read through a kept descriptor (one pread when the text fits, the
    /// buffer grown when it does not) give exactly what a fresh read gives.
    #[test]
    fn kept_kernfs_files_read_whole() {
        let stat = [
            "/sys/fs/cgroup/memory/memory.stat",
            "/sys/fs/cgroup/memory.stat",
        ]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("the root cgroup's memory.stat (v1 or v2)");
        for path in ["/sys/devices/system/cpu/possible", stat] {
            let mut kept = KeptFile::new(PathBuf::from(path));
            let mut buf = String::new();
            for _ in 0..3 {
                let got = kept.read(&mut buf).map(str::to_string);
                let fresh = std::fs::read_to_string(path).unwrap();
                let got = got.unwrap();
                assert!(
                    got.len() > 1 && on_kernfs(&File::open(path).unwrap()),
                    "{path}"
                );
                // memory.stat moves between the two reads: the same keys, in order.
                let keys = |t: &str| -> Vec<String> {
                    t.lines()
                        .map(|l| l.split(' ').next().unwrap_or("").to_string())
                        .collect()
                };
                assert_eq!(keys(&got), keys(&fresh), "{path}");
            }
        }
    }

    #[test]
    fn keyed_matches_whole_key_only() {
        let t = "total_cache 5\ncache 7\ntotal_pgmajfault 3\nbad x\n";
        assert_eq!(keyed(t, "cache"), Some(7));
        assert_eq!(keyed(t, "total_cache"), Some(5));
        assert_eq!(keyed(t, "bad"), None);
        assert_eq!(keyed(t, "missing"), None);
        assert_eq!(keyed("", "cache"), None);
    }

    #[test]
    fn numbers_and_ticks() {
        assert_eq!(parse_u64(" 42\n"), Some(42));
        assert_eq!(parse_u64("max\n"), None);
        assert_eq!(parse_u64("-1"), None);
        assert_eq!(ticks_to_usec(150, 100), 1_500_000);
        assert_eq!(ticks_to_usec(u64::MAX, 1), u64::MAX);
        assert_eq!(count_lines("1\n2\n\n3\n"), 3);
        assert!(clock_ticks_per_sec() > 0);
        assert!(page_size() >= 4096);
    }
}
