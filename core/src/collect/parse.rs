//! Small, checked readers and parsers shared by the cgroup and /proc collectors.
//! Nothing here panics on malformed input: a value that does not parse is `None`.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

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

/// A single-number file (`memory.current`, `cpuacct.usage`): trimmed text as `u64`.
pub(crate) fn parse_u64(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// Reads a single-number file.
pub(crate) fn read_u64(buf: &mut String, path: &Path) -> Option<u64> {
    read_opt(buf, path).and_then(parse_u64)
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
/// walk (the walk — a readdir of ~40 control files per cgroup directory — costs far more
/// than the reads). cgroup membership files list only their own directory's members and
/// Slurm puts tasks in child directories, hence the walk. A slot is `None` when a directory
/// that still exists cannot give it (a partial sum would be a lie); a task directory removed
/// while we walk is skipped.
pub(crate) fn walk_tree<const N: usize>(
    buf: &mut String,
    dir: &Path,
    files: &[(&str, TreeValue); N],
    max_depth: u32,
) -> [Option<u64>; N] {
    let mut acc = [Some(0u64); N];
    if !walk_into(buf, dir, files, max_depth, &mut acc) {
        return [None; N];
    }
    acc
}

/// Adds `dir`'s values into `acc`; false when `dir` itself is unreadable.
fn walk_into<const N: usize>(
    buf: &mut String,
    dir: &Path,
    files: &[(&str, TreeValue); N],
    max_depth: u32,
    acc: &mut [Option<u64>; N],
) -> bool {
    let mut any = false;
    for (slot, (file, value)) in acc.iter_mut().zip(files.iter()) {
        let v = read_opt(buf, &dir.join(file)).and_then(value);
        any |= v.is_some();
        *slot = slot.zip(v).map(|(a, b)| a.saturating_add(b));
    }
    if !any && !dir.exists() {
        return false;
    }
    if max_depth == 0 {
        return true;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        *acc = [None; N];
        return true;
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(_) => {
                *acc = [None; N];
                return true;
            }
        };
        if !entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            continue;
        }
        let mut sub = [Some(0u64); N];
        if walk_into(buf, &entry.path(), files, max_depth - 1, &mut sub) {
            for (a, b) in acc.iter_mut().zip(sub) {
                *a = a.zip(b).map(|(x, y)| x.saturating_add(y));
            }
        }
        // A subdirectory gone mid-walk (a task ended) is skipped.
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

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
