//! cgroup v1 reader: the memory, cpuacct (and, where a site made them, blkio and pids)
//! directories of one job or step. Each file that cannot be read or parsed leaves its
//! fields `None`; nothing here panics.

use std::path::{Path, PathBuf};

use super::location::under_mount;
use super::needs_cache_figure;
use super::parse::{clock_ticks_per_sec, keyed, lines_value, ticks_to_usec, KeptFile};
use super::tree::{KeptTree, TreeFile};
use crate::sample::UsageReading;

/// `memory.limit_in_bytes` of an unlimited group is `PAGE_COUNTER_MAX` rounded to pages
/// (9223372036854771712 on x86-64); anything this large means "no limit".
const UNLIMITED_FLOOR: u64 = 1 << 62;

/// How deep below the job directory tasks can sit (`job/step/task_N` is 2).
const MEMBER_DEPTH: u32 = 4;

/// What each directory of the group's subtree adds: members (`cgroup.procs`, `tasks` list
/// only their own directory; Slurm puts tasks in task_N children) and OOM kills. v1 counts
/// a kill only in the memcg whose limit was hit — Slurm sets the same limit on the step, so
/// a job's kills show up in `step_*`, not in `job_*` (seen on the test cluster) — hence the
/// sum. `oom_kill N` exists since Linux 4.13 (older kernels: unknown, not zero). The member
/// lists are opened at each reading (see `TreeFile::open_each_reading`).
const MEMBERS: [TreeFile; 3] = [
    TreeFile {
        name: c"cgroup.procs",
        value: lines_value,
        open_each_reading: true,
    },
    TreeFile {
        name: c"tasks",
        value: lines_value,
        open_each_reading: true,
    },
    TreeFile {
        name: c"memory.oom_control",
        value: oom_kill_value,
        open_each_reading: false,
    },
];

/// Reads one v1 group. Convenience wrapper over [`V1Reader`]; the sampler keeps a reader.
pub fn read_v1(
    mount_root: &Path,
    memory_rel: &Path,
    cpuacct_rel: &Path,
    blkio_rel: Option<&Path>,
    pids_rel: Option<&Path>,
) -> UsageReading {
    V1Reader::new(mount_root, memory_rel, cpuacct_rel, blkio_rel, pids_rel).read()
}

/// One v1 group's file paths, computed once, plus a reusable read buffer.
#[derive(Debug)]
pub struct V1Reader {
    memory_dir: PathBuf,
    /// Members and OOM kills, summed over the subtree (see `MEMBERS`).
    members: KeptTree<3>,
    usage: KeptFile,
    max_usage: KeptFile,
    limit: KeptFile,
    stat: KeptFile,
    failcnt: KeptFile,
    cpuacct_usage: KeptFile,
    cpuacct_stat: KeptFile,
    blkio_bytes: Option<KeptFile>,
    pids_current: Option<KeptFile>,
    ticks_per_sec: u64,
    buf: String,
}

impl V1Reader {
    /// `mount_root` is normally `/sys/fs/cgroup`; the `*_rel` paths are as printed in
    /// `/proc/<pid>/cgroup`. Co-mounted hierarchies (`cpu,cpuacct`) are reached through the
    /// usual `cpuacct` symlink, or the joined directory name when there is no symlink.
    pub fn new(
        mount_root: &Path,
        memory_rel: &Path,
        cpuacct_rel: &Path,
        blkio_rel: Option<&Path>,
        pids_rel: Option<&Path>,
    ) -> V1Reader {
        let memory_dir = under_mount(&controller_mount(mount_root, "memory"), memory_rel);
        let cpu_dir = under_mount(&controller_mount(mount_root, "cpuacct"), cpuacct_rel);
        V1Reader {
            usage: KeptFile::new(memory_dir.join("memory.usage_in_bytes")),
            max_usage: KeptFile::new(memory_dir.join("memory.max_usage_in_bytes")),
            limit: KeptFile::new(memory_dir.join("memory.limit_in_bytes")),
            stat: KeptFile::new(memory_dir.join("memory.stat")),
            failcnt: KeptFile::new(memory_dir.join("memory.failcnt")),
            members: KeptTree::new(memory_dir.clone(), MEMBERS, MEMBER_DEPTH, None),
            memory_dir,
            cpuacct_usage: KeptFile::new(cpu_dir.join("cpuacct.usage")),
            cpuacct_stat: KeptFile::new(cpu_dir.join("cpuacct.stat")),
            blkio_bytes: blkio_rel.map(|rel| {
                KeptFile::new(
                    under_mount(&controller_mount(mount_root, "blkio"), rel)
                        .join("blkio.throttle.io_service_bytes_recursive"),
                )
            }),
            pids_current: pids_rel.map(|rel| {
                KeptFile::new(
                    under_mount(&controller_mount(mount_root, "pids"), rel).join("pids.current"),
                )
            }),
            ticks_per_sec: clock_ticks_per_sec(),
            buf: String::new(),
        }
    }

    /// The memory directory this reader reads (for logs and tests).
    pub fn memory_dir(&self) -> &Path {
        &self.memory_dir
    }

    /// Only what the sampler needs between stored rows (the running maxima of working set
    /// and cores): three files instead of a dozen plus directory walks, and two when the
    /// usage is at most `working_set_seen` (see [`needs_cache_figure`]).
    pub fn read_fast(&mut self, working_set_seen: Option<u64>) -> UsageReading {
        let mut r = UsageReading::default();
        let buf = &mut self.buf;
        r.memory_usage_bytes = self.usage.read_u64(buf);
        let stat = if needs_cache_figure(r.memory_usage_bytes, working_set_seen) {
            self.stat.read(buf)
        } else {
            None
        };
        if let Some(stat) = stat {
            r.memory_cache_bytes = keyed(stat, "total_active_file")
                .zip(keyed(stat, "total_inactive_file"))
                .map(|(a, i)| a.saturating_add(i));
        }
        r.memory_working_set_bytes = r
            .memory_usage_bytes
            .zip(r.memory_cache_bytes)
            .map(|(u, c)| u.saturating_sub(c));
        r.cpu_usage_usec = self.cpuacct_usage.read_u64(buf).map(|ns| ns / 1000);
        r
    }

    pub fn read(&mut self) -> UsageReading {
        let mut r = UsageReading::default();
        let buf = &mut self.buf;

        // Memory. `usage_in_bytes` of a directory includes its children (use_hierarchy is
        // always on in current kernels); memory.stat's own counters do not, so only its
        // hierarchical `total_*` keys are used.
        r.memory_usage_bytes = self.usage.read_u64(buf);
        r.memory_lifetime_peak_bytes = self.max_usage.read_u64(buf);
        r.memory_limit_bytes = self.limit.read_u64(buf).filter(|&v| v < UNLIMITED_FLOOR);
        if let Some(stat) = self.stat.read(buf) {
            r.memory_cache_bytes = keyed(stat, "total_active_file")
                .zip(keyed(stat, "total_inactive_file"))
                .map(|(a, i)| a.saturating_add(i));
            r.memory_major_faults = keyed(stat, "total_pgmajfault");
        }
        r.memory_working_set_bytes = r
            .memory_usage_bytes
            .zip(r.memory_cache_bytes)
            .map(|(u, c)| u.saturating_sub(c));
        r.memory_limit_hits = self.failcnt.read_u64(buf);
        // CPU. cpuacct.usage is nanoseconds; cpuacct.stat is USER_HZ ticks.
        r.cpu_usage_usec = self.cpuacct_usage.read_u64(buf).map(|ns| ns / 1000);
        if let Some(stat) = self.cpuacct_stat.read(buf) {
            let tps = self.ticks_per_sec;
            r.cpu_user_usec = keyed(stat, "user").map(|t| ticks_to_usec(t, tps));
            r.cpu_system_usec = keyed(stat, "system").map(|t| ticks_to_usec(t, tps));
        }

        // IO (only when the site has blkio groups for jobs; Slurm itself makes none).
        if let Some(file) = &mut self.blkio_bytes {
            if let Some((rd, wr)) = file.read(buf).and_then(parse_blkio_bytes) {
                r.io_read_bytes = Some(rd);
                r.io_write_bytes = Some(wr);
            }
        }

        // Members and OOM kills over the subtree (see `MEMBERS`).
        let [procs, tasks, ooms] = self.members.read(buf);
        r.processes = procs;
        r.memory_oom_kills = ooms;
        // pids.current, where a pids group exists, is hierarchical and counts tasks (threads).
        r.threads = self
            .pids_current
            .as_mut()
            .and_then(|p| p.read_u64(buf))
            .or(tasks);
        r
    }
}

fn oom_kill_value(text: &str) -> Option<u64> {
    keyed(text, "oom_kill")
}

/// The directory of one v1 controller under the mount root: `<root>/<name>`, or the
/// co-mounted directory whose comma-separated name contains it (`cpu,cpuacct`) when there
/// is no per-controller symlink. Runs once per reader, not per sample.
fn controller_mount(mount_root: &Path, name: &str) -> PathBuf {
    let direct = mount_root.join(name);
    if direct.exists() {
        return direct;
    }
    std::fs::read_dir(mount_root)
        .ok()
        .and_then(|entries| {
            entries.flatten().map(|e| e.file_name()).find(|n| {
                n.to_str()
                    .is_some_and(|s| s.contains(',') && s.split(',').any(|c| c == name))
            })
        })
        .map(|n| mount_root.join(n))
        .unwrap_or(direct)
}

/// Sums `Read` and `Write` over devices in `blkio.throttle.io_service_bytes_recursive`
/// (lines `8:0 Read 1234`, a final `Total N`). A file with only `Total 0` (no IO yet) is a
/// readable zero; a line that does not parse makes the whole figure `None`.
pub(crate) fn parse_blkio_bytes(text: &str) -> Option<(u64, u64)> {
    let (mut rd, mut wr) = (0u64, 0u64);
    for line in text.lines() {
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        match f.as_slice() {
            [] => {}
            ["Total", n] => {
                n.parse::<u64>().ok()?;
            }
            [dev, op, n] if dev.contains(':') => {
                let n: u64 = n.parse().ok()?;
                match *op {
                    "Read" => rd = rd.saturating_add(n),
                    "Write" => wr = wr.saturating_add(n),
                    _ => {}
                }
            }
            _ => return None,
        }
    }
    Some((rd, wr))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blkio_sums_devices() {
        let t = "8:16 Read 4096\n8:16 Write 8192\n8:16 Sync 12288\n8:16 Total 12288\n\
                 8:0 Read 1000\n8:0 Write 0\nTotal 13288\n";
        assert_eq!(parse_blkio_bytes(t), Some((5096, 8192)));
        assert_eq!(parse_blkio_bytes("Total 0\n"), Some((0, 0)));
        assert_eq!(parse_blkio_bytes(""), Some((0, 0)));
        assert_eq!(parse_blkio_bytes("8:0 Read x\n"), None);
        assert_eq!(parse_blkio_bytes("garbage line here now\n"), None);
    }
}
