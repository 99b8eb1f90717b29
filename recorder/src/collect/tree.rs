//! A cgroup subtree's per-directory files (members, OOM kills) summed over the subtree, with
//! the directories and files kept open between readings.
//!
//! cgroup membership files list only their own directory's members and Slurm puts tasks in
//! child directories, hence a walk. Walking afresh at every stored row (open each directory,
//! list it, open each file, close them all) was about half the sampler's CPU inside a real
//! job (perf on the sampler thread of a Slurm 22.05 cgroup v1 job: openat, getdents64 and
//! close). So the walk is done once and then only redone when the tree may have changed:
//! - a kept directory's link count changed: on kernfs (and ext4, tmpfs) a directory's
//!   `st_nlink` is 2 + its subdirectories, so a step or task directory created or removed
//!   below it shows at the cost of one `fstat`;
//! - a kept file fails to read (a removed cgroup's open files fail with ENODEV), or a file
//!   read fresh cannot be opened in its kept directory (ENOENT once it is removed) — a
//!   directory removed while a sibling was created leaves the count equal but is seen here;
//! - off kernfs (test fixtures) a removed directory or file keeps its descriptor readable,
//!   so a link count of 0 also means walk again.
//!
//! Never a stale value: whatever doubt there is, the reading walks again, and a reading
//! that walks is exactly the old `walk_tree`'s.
//!
//! Descriptors are slurmstepd's, and one it cannot open could cost the job its I/O: a tree
//! keeps at most [`MAX_KEPT_DIRS`] directories, and its descriptors (directories and kept
//! files) stay under 1/16 of the process's open-file limit; a larger tree is walked afresh
//! every reading, as before, holding descriptors only while it walks.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::parse::{on_kernfs, read_from_start};

/// How a per-directory file becomes a number.
pub(crate) type TreeValue = fn(&str) -> Option<u64>;

/// One file read in every directory of the subtree.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TreeFile {
    pub name: &'static CStr,
    pub value: TreeValue,
    /// Opened afresh (relative to the kept directory) at every reading instead of re-read
    /// through a kept descriptor. cgroup v1's `cgroup.procs` and `tasks` need it: the kernel
    /// keeps the pid list it built for an open file and serves it again to a read from
    /// offset 0 until the list is destroyed, one second after the last read
    /// (`cgroup_pidlist_start`, `CGROUP_PIDLIST_DESTROY_DELAY`) — a descriptor read every
    /// second would see the first list forever. v2's restart their walk at offset 0.
    pub open_each_reading: bool,
}

/// The most directories kept open per tree (slurmstepd's descriptors are not ours to
/// spend): `job/step_N/task_M` on v1 is 1 + steps + tasks.
pub(crate) const MAX_KEPT_DIRS: usize = 32;

/// The descriptors a tree may keep: 1/16 of the soft open-file limit (64 under the common
/// 1024), never more than [`MAX_KEPT_DIRS`] directories' worth.
fn descriptor_budget(soft_limit: usize, per_dir: usize) -> usize {
    (soft_limit / 16).min(MAX_KEPT_DIRS * per_dir)
}

/// This process's soft open-file limit (0 when unknown: nothing is kept).
fn open_file_limit() -> usize {
    // SAFETY: plain-data struct and a valid out-pointer.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
    } else {
        0
    }
}

/// A subtree read by [`read`](Self::read).
#[derive(Debug)]
pub(crate) struct KeptTree<const N: usize> {
    root: PathBuf,
    files: [TreeFile; N],
    max_depth: u32,
    /// Subdirectories with this name are left out, at any depth (v2: `step_N/slurm`, which
    /// holds slurmstepd itself, not the job's work).
    skip: Option<&'static [u8]>,
    /// Empty: the next reading walks.
    dirs: Vec<KeptDir<N>>,
    /// Not kernfs (told from the root at each walk; a cgroup tree is one filesystem):
    /// removed files and directories stay readable, so their link counts are checked.
    check_links: bool,
}

#[derive(Debug)]
struct KeptDir<const N: usize> {
    fd: OwnedFd,
    /// `st_nlink` when it was listed.
    links: u64,
    /// The kept descriptor of each file (`None`: opened at each reading, or absent).
    files: [Option<File>; N],
    /// Whether each file existed when the directory was walked.
    present: [bool; N],
}

impl<const N: usize> KeptTree<N> {
    pub(crate) fn new(
        root: PathBuf,
        files: [TreeFile; N],
        max_depth: u32,
        skip: Option<&'static [u8]>,
    ) -> KeptTree<N> {
        KeptTree {
            root,
            files,
            max_depth,
            skip,
            dirs: Vec::new(),
            check_links: false,
        }
    }

    /// Each file's sum over the subtree. A slot is `None` when a directory that still exists
    /// cannot give it (a partial sum would be a lie); all are `None` when the root is gone.
    pub(crate) fn read(&mut self, buf: &mut String) -> [Option<u64>; N] {
        if !self.dirs.is_empty() {
            if let Some(sums) = self.read_kept(buf) {
                return sums;
            }
            self.dirs.clear();
        }
        self.walk(buf)
    }

    /// The sums through the kept descriptors, or `None` when the tree may have changed.
    fn read_kept(&self, buf: &mut String) -> Option<[Option<u64>; N]> {
        let mut acc = [Some(0u64); N];
        for d in &self.dirs {
            let links = fd_links(d.fd.as_raw_fd())?;
            if links != d.links || links == 0 {
                return None;
            }
            for (i, f) in self.files.iter().enumerate() {
                if !d.present[i] {
                    acc[i] = None;
                    continue;
                }
                let v = match &d.files[i] {
                    Some(file) => {
                        read_from_start(file, buf, !self.check_links).ok()?;
                        if self.check_links && fd_links(file.as_raw_fd())? == 0 {
                            return None;
                        }
                        (f.value)(buf)
                    }
                    None => {
                        let file = File::from(open_at(d.fd.as_raw_fd(), f.name, 0).ok()?);
                        read_from_start(&file, buf, !self.check_links).ok()?;
                        (f.value)(buf)
                    }
                };
                acc[i] = acc[i].zip(v).map(|(a, b)| a.saturating_add(b));
            }
        }
        Some(acc)
    }

    /// Walks the subtree afresh, keeping what it opened when the tree is small enough and
    /// the walk was whole.
    fn walk(&mut self, buf: &mut String) -> [Option<u64>; N] {
        let Ok(c) = CString::new(self.root.as_os_str().as_bytes()) else {
            return [None; N];
        };
        // An unopenable root (gone, not a directory, refused) gives nothing.
        let Ok(fd) = open_at(libc::AT_FDCWD, &c, libc::O_DIRECTORY) else {
            return [None; N];
        };
        self.check_links = !on_kernfs(&fd);
        let mut acc = [Some(0u64); N];
        let mut kept = Vec::new();
        let per_dir = 1 + self.files.iter().filter(|f| !f.open_each_reading).count();
        let mut walk = Walk {
            max_kept_dirs: descriptor_budget(open_file_limit(), per_dir) / per_dir,
            buf,
            files: &self.files,
            skip: self.skip,
            check_links: self.check_links,
            kept: Some(&mut kept),
        };
        let mut path = self.root.clone();
        if !walk.dir(fd, &mut path, self.max_depth, &mut acc) {
            return [None; N];
        }
        // Kept only after a whole walk: an unreadable directory or one gone mid-walk is
        // looked at again next time.
        let whole = walk.kept.is_some() && acc.iter().all(Option::is_some);
        if whole && !kept.is_empty() {
            self.dirs = kept;
        }
        acc
    }
}

struct Walk<'a, const N: usize> {
    buf: &'a mut String,
    files: &'a [TreeFile; N],
    skip: Option<&'static [u8]>,
    check_links: bool,
    /// `None` once the tree is too large to keep (or a directory was gone mid-walk).
    kept: Option<&'a mut Vec<KeptDir<N>>>,
    max_kept_dirs: usize,
}

impl<const N: usize> Walk<'_, N> {
    /// Adds the directory `fd` (at `path`)'s values into `acc`; false when it is gone.
    fn dir(
        &mut self,
        fd: OwnedFd,
        path: &mut PathBuf,
        depth: u32,
        acc: &mut [Option<u64>; N],
    ) -> bool {
        // Before listing: a subdirectory made after this is seen as a changed count.
        let links = fd_links(fd.as_raw_fd());
        let mut any = false;
        let mut files: [Option<File>; N] = std::array::from_fn(|_| None);
        let mut present = [false; N];
        for (i, f) in self.files.iter().enumerate() {
            let opened = open_at(fd.as_raw_fd(), f.name, 0).ok().map(File::from);
            present[i] = opened.is_some();
            let v = opened.and_then(|file| {
                if !f.open_each_reading && self.kept.is_some() {
                    let read = read_from_start(&file, self.buf, !self.check_links).is_ok();
                    files[i] = Some(file);
                    read.then(|| (f.value)(self.buf)).flatten()
                } else {
                    read_from_start(&file, self.buf, !self.check_links)
                        .ok()
                        .and_then(|_| (f.value)(self.buf))
                }
            });
            any |= v.is_some();
            acc[i] = acc[i].zip(v).map(|(a, b)| a.saturating_add(b));
        }
        if !any && !path.exists() {
            return false;
        }
        if depth > 0 && !self.subdirs(fd.as_raw_fd(), path, depth, acc) {
            return true;
        }
        match (&mut self.kept, links) {
            (Some(kept), Some(links)) if kept.len() < self.max_kept_dirs => kept.push(KeptDir {
                fd,
                links,
                files,
                present,
            }),
            _ => self.kept = None,
        }
        true
    }

    /// Walks the subdirectories of `dfd`; false when the listing failed (its sums are then
    /// unknown).
    fn subdirs(
        &mut self,
        dfd: RawFd,
        path: &mut PathBuf,
        depth: u32,
        acc: &mut [Option<u64>; N],
    ) -> bool {
        // getdents64 on the descriptor itself: fdopendir/readdir cost three more syscalls per
        // directory (fstat, two fcntl).
        let mut ents = DirentBuf([0; 4096]);
        loop {
            // SAFETY: the buffer is ours and its length is passed.
            let n = unsafe {
                libc::syscall(libc::SYS_getdents64, dfd, ents.0.as_mut_ptr(), ents.0.len())
            };
            if n == 0 {
                return true;
            }
            if n < 0 {
                // The directory removed while listed (as std's read_dir): nothing below it.
                if io::Error::last_os_error().raw_os_error() == Some(libc::ENOENT) {
                    self.kept = None;
                    return true;
                }
                *acc = [None; N];
                self.kept = None;
                return false;
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
                if matches!(name.to_bytes(), b"." | b"..") || self.skip == Some(name.to_bytes()) {
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
                        if self.dir(sub_fd, path, depth - 1, &mut sub) {
                            for (a, b) in acc.iter_mut().zip(sub) {
                                *a = a.zip(b).map(|(x, y)| x.saturating_add(y));
                            }
                        } else {
                            // Gone mid-walk (a task ended): skipped, and not kept.
                            self.kept = None;
                        }
                    }
                    Err(e)
                        if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ENOTDIR)) =>
                    {
                        self.kept = None;
                    }
                    // It exists but cannot be read: its members are unknown.
                    Err(_) => *acc = [None; N],
                }
                path.pop();
            }
        }
    }
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

/// `st_nlink` of an open descriptor.
fn fd_links(fd: RawFd) -> Option<u64> {
    // SAFETY: plain-data struct; an open descriptor and a valid out-pointer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_nlink)
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
    use super::super::parse::{lines_value as lines, parse_u64 as number};
    use super::*;
    use std::fs;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    fn links_of(path: &Path) -> u64 {
        fs::metadata(path).map(|m| m.nlink()).unwrap_or(0)
    }

    const FILES: [TreeFile; 2] = [
        TreeFile {
            name: c"cgroup.procs",
            value: lines,
            open_each_reading: false,
        },
        TreeFile {
            name: c"count",
            value: number,
            open_each_reading: true,
        },
    ];

    fn put(dir: &Path, procs: &str, count: u64) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("cgroup.procs"), procs).unwrap();
        fs::write(dir.join("count"), format!("{count}\n")).unwrap();
    }

    /// Walks the tree the slow way: what every reading must equal.
    fn truth(dir: &Path, skip: &str) -> [Option<u64>; 2] {
        let mut acc = [0, 0];
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            acc[0] += lines(&fs::read_to_string(d.join("cgroup.procs")).unwrap()).unwrap();
            acc[1] += number(&fs::read_to_string(d.join("count")).unwrap()).unwrap();
            for e in fs::read_dir(&d).unwrap().flatten() {
                if e.path().is_dir() && e.file_name() != skip {
                    stack.push(e.path());
                }
            }
        }
        acc.map(Some)
    }

    /// Every change a job's tree goes through between two readings — a task directory
    /// added, one removed, one removed while a sibling is added (the count unchanged), a
    /// member file rewritten, a file replaced by a new one, a whole step gone — is seen at
    /// the next reading, exactly as a fresh walk sees it.
    #[test]
    fn kept_tree_sees_every_change_a_fresh_walk_sees() {
        let root = tempfile::tempdir().unwrap();
        let job = root.path().join("job_7");
        put(&job, "", 1);
        put(&job.join("step_0"), "10\n", 2);
        put(&job.join("step_0/slurm"), "99\n98\n", 100);
        put(&job.join("step_0/task_0"), "11\n12\n", 3);
        let mut tree = KeptTree::new(job.clone(), FILES, 4, Some(b"slurm"));
        let mut buf = String::new();
        let check = |tree: &mut KeptTree<2>, buf: &mut String, what: &str| {
            assert_eq!(tree.read(buf), truth(&job, "slurm"), "{what}");
        };
        check(&mut tree, &mut buf, "first walk");
        assert_eq!(tree.dirs.len(), 3, "job, step_0, task_0 kept (not slurm)");
        check(&mut tree, &mut buf, "through kept descriptors");
        fs::write(job.join("step_0/task_0/cgroup.procs"), "11\n12\n13\n").unwrap();
        fs::write(job.join("step_0/task_0/count"), "5\n").unwrap();
        check(&mut tree, &mut buf, "files rewritten in place");
        put(&job.join("step_0/task_1"), "21\n", 4);
        check(&mut tree, &mut buf, "a task directory added");
        assert_eq!(tree.dirs.len(), 4);
        fs::remove_dir_all(job.join("step_0/task_0")).unwrap();
        put(&job.join("step_0/task_2"), "31\n32\n33\n34\n", 6);
        assert_eq!(
            links_of(&job.join("step_0")),
            5,
            "count unchanged: 2 + slurm, task_1, task_2"
        );
        check(&mut tree, &mut buf, "a task removed as a sibling was added");
        let fresh = job.join("step_0/task_2/cgroup.procs.new");
        fs::write(&fresh, "31\n").unwrap();
        fs::rename(&fresh, job.join("step_0/task_2/cgroup.procs")).unwrap();
        check(&mut tree, &mut buf, "a file replaced by another");
        fs::remove_dir_all(job.join("step_0")).unwrap();
        check(&mut tree, &mut buf, "the step gone");
        fs::remove_dir_all(&job).unwrap();
        assert_eq!(tree.read(&mut buf), [None, None], "the job gone");
        assert!(tree.dirs.is_empty());
    }

    /// A file missing from one directory makes its slot unknown, kept or walked.
    #[test]
    fn a_directory_without_the_file_leaves_the_sum_unknown() {
        let root = tempfile::tempdir().unwrap();
        let job = root.path().join("job_8");
        put(&job, "1\n", 1);
        fs::create_dir_all(job.join("step_0")).unwrap();
        fs::write(job.join("step_0/cgroup.procs"), "2\n").unwrap();
        let mut tree = KeptTree::new(job.clone(), FILES, 4, None);
        let mut buf = String::new();
        for _ in 0..2 {
            assert_eq!(tree.read(&mut buf), [Some(2), None]);
        }
    }

    /// Past MAX_KEPT_DIRS nothing is kept (slurmstepd's descriptors), and every reading is
    /// still right.
    #[test]
    fn a_large_tree_is_walked_every_reading_and_keeps_no_descriptor() {
        let root = tempfile::tempdir().unwrap();
        let job = root.path().join("job_9");
        put(&job, "", 0);
        for t in 0..MAX_KEPT_DIRS {
            put(&job.join(format!("task_{t}")), "1\n", 1);
        }
        let mut tree = KeptTree::new(job.clone(), FILES, 4, None);
        let mut buf = String::new();
        let n = MAX_KEPT_DIRS as u64;
        assert_eq!(tree.read(&mut buf), [Some(n), Some(n)]);
        assert!(tree.dirs.is_empty());
        fs::remove_dir_all(job.join("task_0")).unwrap();
        assert_eq!(tree.read(&mut buf), [Some(n - 1), Some(n - 1)]);
        assert_eq!(tree.dirs.len(), MAX_KEPT_DIRS, "small enough again: kept");
    }

    /// slurmstepd's descriptors: 1/16 of its limit at most (a limit of 1024 leaves 64, i.e.
    /// 32 v1 directories with their kept file, 21 on v2), never past MAX_KEPT_DIRS, none when
    /// the limit is unknown.
    #[test]
    fn kept_descriptors_stay_a_small_share_of_the_open_file_limit() {
        assert_eq!(descriptor_budget(1024, 2) / 2, 32);
        assert_eq!(descriptor_budget(1024, 3) / 3, 21);
        assert_eq!(descriptor_budget(256, 2) / 2, 8);
        assert_eq!(descriptor_budget(1 << 20, 3) / 3, MAX_KEPT_DIRS);
        assert_eq!(descriptor_budget(0, 2), 0);
    }

    /// On kernfs a directory's link count is 2 + its subdirectories: what the kept tree
    /// watches (the root cgroup has children on any systemd or Slurm host).
    #[test]
    fn kernfs_directory_links_count_subdirectories() {
        let root = ["/sys/fs/cgroup/memory", "/sys/fs/cgroup"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.join("cgroup.procs").exists())
            .expect("a cgroup mount");
        let subdirs = fs::read_dir(root)
            .unwrap()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .count() as u64;
        assert_eq!(links_of(root), 2 + subdirs);
    }
}
