//! Small, checked readers and parsers shared by the cgroup and /proc collectors.
//! Nothing here panics on malformed input: a value that does not parse is `None`.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
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

pub(crate) fn on_kernfs(file: &impl AsRawFd) -> bool {
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
pub(crate) fn read_from_start(
    file: &File,
    buf: &mut String,
    short_read_is_whole: bool,
) -> io::Result<usize> {
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

/// Lines of a membership file (`cgroup.procs`, `tasks`, `cgroup.threads`).
pub(crate) fn lines_value(text: &str) -> Option<u64> {
    Some(count_lines(text))
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
