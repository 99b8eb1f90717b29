//! cgroup v2 reader: one job or step directory of the unified hierarchy. All the files
//! used are hierarchical (they include descendants) except `cgroup.procs`/`cgroup.threads`,
//! which are counted recursively. Each unreadable file leaves its fields `None`.

use std::path::{Path, PathBuf};

use super::location::under_mount;
use super::needs_cache_figure;
use super::parse::{keyed, lines_value, KeptFile};
use super::tree::{KeptTree, TreeFile};
use crate::sample::{Pressure, UsageReading};

/// Depth below the job directory where members live (`job/step_0/user/task_0` is 3).
const MEMBER_DEPTH: u32 = 5;

/// v2 cgroup.procs/cgroup.threads list only the directory's own members; Slurm keeps them in
/// leaves (`step_N/slurm`, `step_N/user/task_M`), so the subtree is summed, without
/// `step_N/slurm`: that is slurmstepd itself (1 process, 10–16 threads), not the job. Both
/// restart their listing at offset 0, so they are re-read through kept descriptors.
const MEMBERS: [TreeFile; 2] = [
    TreeFile {
        name: c"cgroup.procs",
        value: lines_value,
        open_each_reading: false,
    },
    TreeFile {
        name: c"cgroup.threads",
        value: lines_value,
        open_each_reading: false,
    },
];

/// Reads one v2 group. Convenience wrapper over [`V2Reader`]; the sampler keeps a reader.
pub fn read_v2(mount_root: &Path, rel: &Path) -> UsageReading {
    V2Reader::new(mount_root, rel).read()
}

/// One v2 group's file paths, computed once, plus a reusable read buffer.
#[derive(Debug)]
pub struct V2Reader {
    dir: PathBuf,
    /// Processes and threads, summed over the subtree (see `MEMBERS`).
    members: KeptTree<2>,
    current: KeptFile,
    peak: KeptFile,
    max: KeptFile,
    /// `user/memory.max`: Slurm puts a step's limit there (`step_<s>/memory.max` is `max`).
    user_max: KeptFile,
    stat: KeptFile,
    events: KeptFile,
    cpu_stat: KeptFile,
    io_stat: KeptFile,
    cpu_pressure: KeptFile,
    memory_pressure: KeptFile,
    io_pressure: KeptFile,
    /// slurmstepd's own cgroups below this directory (`step_<s>/slurm`), with the last CPU
    /// each gave: Slurm keeps slurmstepd (and so the sampler) inside the job's cgroup on v2,
    /// but its CPU is not the job's work (sacct's TotalCPU leaves it out; on v1 it is outside
    /// the job's cgroup). A step whose directory is gone keeps its last figure: its usage
    /// stays in the parent's `cpu.stat`.
    stepd: Vec<(KeptFile, [u64; 3])>,
    /// The CPU figures last given (usage, user, system µs): never less. slurmstepd's files
    /// are read a moment apart from the job's, and while the job idles the sampler's own CPU
    /// in between could make the difference dip (seen on Slurm 26.05: no rate between two
    /// readings of an idle job).
    cpu_floor: [u64; 3],
    buf: String,
}

impl V2Reader {
    /// `mount_root` is normally `/sys/fs/cgroup`; `rel` as printed in `/proc/<pid>/cgroup`.
    pub fn new(mount_root: &Path, rel: &Path) -> V2Reader {
        let dir = under_mount(mount_root, rel);
        V2Reader {
            current: KeptFile::new(dir.join("memory.current")),
            peak: KeptFile::new(dir.join("memory.peak")),
            max: KeptFile::new(dir.join("memory.max")),
            user_max: KeptFile::new(dir.join("user/memory.max")),
            stat: KeptFile::new(dir.join("memory.stat")),
            events: KeptFile::new(dir.join("memory.events")),
            cpu_stat: KeptFile::new(dir.join("cpu.stat")),
            io_stat: KeptFile::new(dir.join("io.stat")),
            cpu_pressure: KeptFile::new(dir.join("cpu.pressure")),
            memory_pressure: KeptFile::new(dir.join("memory.pressure")),
            io_pressure: KeptFile::new(dir.join("io.pressure")),
            stepd: Vec::new(),
            cpu_floor: [0; 3],
            members: KeptTree::new(dir.clone(), MEMBERS, MEMBER_DEPTH, Some(b"slurm")),
            dir,
            buf: String::new(),
        }
    }

    /// The directory this reader reads.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Looks for slurmstepd cgroups not seen yet: `slurm` in a step directory, `step_*/slurm`
    /// in a job directory.
    fn find_stepds(&mut self) {
        let mut found: Vec<PathBuf> = Vec::new();
        let is_step = |n: &std::ffi::OsStr| n.to_str().is_some_and(|n| n.starts_with("step_"));
        if self.dir.file_name().is_some_and(is_step) {
            found.push(self.dir.join("slurm/cpu.stat"));
        } else if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                if is_step(&e.file_name()) {
                    found.push(e.path().join("slurm/cpu.stat"));
                }
            }
        }
        for p in found {
            if p.exists() && !self.stepd.iter().any(|(f, _)| f.path() == p) {
                self.stepd.push((KeptFile::new(p), [0; 3]));
            }
        }
    }

    /// slurmstepd's CPU (usage, user, system µs) below this directory, summed.
    fn stepd_cpu(&mut self) -> [u64; 3] {
        let mut sum = [0u64; 3];
        for (f, last) in &mut self.stepd {
            if let Some(t) = f.read(&mut self.buf) {
                for (i, k) in ["usage_usec", "user_usec", "system_usec"]
                    .iter()
                    .enumerate()
                {
                    if let Some(v) = keyed(t, k) {
                        last[i] = last[i].max(v);
                    }
                }
            }
            for i in 0..3 {
                sum[i] = sum[i].saturating_add(last[i]);
            }
        }
        sum
    }

    /// Only what the sampler needs between stored rows (the running maxima of working set
    /// and cores): three files instead of eleven plus a directory walk, and two when the
    /// usage is at most `working_set_seen` (see [`needs_cache_figure`]).
    pub fn read_fast(&mut self, working_set_seen: Option<u64>) -> UsageReading {
        let mut r = UsageReading::default();
        let buf = &mut self.buf;
        r.memory_usage_bytes = self.current.read_u64(buf);
        let stat = if needs_cache_figure(r.memory_usage_bytes, working_set_seen) {
            self.stat.read(buf)
        } else {
            None
        };
        if let Some(stat) = stat {
            r.memory_cache_bytes = keyed(stat, "active_file")
                .zip(keyed(stat, "inactive_file"))
                .map(|(a, i)| a.saturating_add(i));
        }
        r.memory_working_set_bytes = r
            .memory_usage_bytes
            .zip(r.memory_cache_bytes)
            .map(|(u, c)| u.saturating_sub(c));
        // slurmstepd's first, then the job's: the difference errs up by the moment between.
        let stepd = self.stepd_cpu();
        let buf = &mut self.buf;
        r.cpu_usage_usec = self.cpu_stat.read(buf).and_then(|c| keyed(c, "usage_usec"));
        r.cpu_usage_usec = self.net_cpu(0, r.cpu_usage_usec, stepd[0]);
        r
    }

    /// `total` less slurmstepd's `stepd`, never below the figure given before.
    fn net_cpu(&mut self, i: usize, total: Option<u64>, stepd: u64) -> Option<u64> {
        let v = total?.saturating_sub(stepd).max(self.cpu_floor[i]);
        self.cpu_floor[i] = v;
        Some(v)
    }

    pub fn read(&mut self) -> UsageReading {
        let mut r = UsageReading::default();
        let buf = &mut self.buf;

        r.memory_usage_bytes = self.current.read_u64(buf);
        // memory.peak exists from Linux 5.19; before that: unknown.
        r.memory_lifetime_peak_bytes = self.peak.read_u64(buf);
        // The literal `max` (no limit) fails to parse and becomes None, as intended.
        r.memory_limit_bytes = self.max.read_u64(buf);
        if r.memory_limit_bytes.is_none() {
            // A step directory: its limit is on `user` (the job's is on the job directory).
            r.memory_limit_bytes = self.user_max.read_u64(buf);
        }
        if let Some(stat) = self.stat.read(buf) {
            r.memory_cache_bytes = keyed(stat, "active_file")
                .zip(keyed(stat, "inactive_file"))
                .map(|(a, i)| a.saturating_add(i));
            r.memory_major_faults = keyed(stat, "pgmajfault");
        }
        r.memory_working_set_bytes = r
            .memory_usage_bytes
            .zip(r.memory_cache_bytes)
            .map(|(u, c)| u.saturating_sub(c));
        // memory.events is hierarchical (memory.events.local is not): `max` counts hits of
        // the limit, `oom_kill` the processes the OOM killer took.
        if let Some(ev) = self.events.read(buf) {
            r.memory_oom_kills = keyed(ev, "oom_kill");
            r.memory_limit_hits = keyed(ev, "max");
        }

        self.find_stepds();
        let stepd = self.stepd_cpu();
        let buf = &mut self.buf;
        if let Some(cpu) = self.cpu_stat.read(buf) {
            r.cpu_usage_usec = keyed(cpu, "usage_usec");
            r.cpu_user_usec = keyed(cpu, "user_usec");
            r.cpu_system_usec = keyed(cpu, "system_usec");
        }
        r.cpu_usage_usec = self.net_cpu(0, r.cpu_usage_usec, stepd[0]);
        r.cpu_user_usec = self.net_cpu(1, r.cpu_user_usec, stepd[1]);
        r.cpu_system_usec = self.net_cpu(2, r.cpu_system_usec, stepd[2]);
        let buf = &mut self.buf;

        // io.stat is absent when the io controller is not enabled for the subtree (None),
        // and empty before the first IO (a readable zero).
        if let Some((rd, wr)) = self.io_stat.read(buf).and_then(parse_io_stat) {
            r.io_read_bytes = Some(rd);
            r.io_write_bytes = Some(wr);
        }

        // PSI files fail to read (EOPNOTSUPP) when the kernel runs with psi=0.
        let mut p = Pressure::default();
        if let Some(t) = self.cpu_pressure.read(buf) {
            p.cpu_some_avg10 = pressure_avg10(t, "some");
            p.cpu_some_total_usec = pressure_total_usec(t, "some");
            p.cpu_full_total_usec = pressure_total_usec(t, "full");
        }
        if let Some(t) = self.memory_pressure.read(buf) {
            p.memory_some_avg10 = pressure_avg10(t, "some");
            p.memory_full_avg10 = pressure_avg10(t, "full");
            p.memory_some_total_usec = pressure_total_usec(t, "some");
            p.memory_full_total_usec = pressure_total_usec(t, "full");
        }
        if let Some(t) = self.io_pressure.read(buf) {
            p.io_some_avg10 = pressure_avg10(t, "some");
            p.io_full_avg10 = pressure_avg10(t, "full");
            p.io_some_total_usec = pressure_total_usec(t, "some");
            p.io_full_total_usec = pressure_total_usec(t, "full");
        }
        r.pressure = p;

        [r.processes, r.threads] = self.members.read(buf);
        r
    }
}

/// Sums `rbytes`/`wbytes` over the devices of `io.stat`
/// (`259:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0`). A line without both keys or
/// with an unparsable value makes the whole figure `None`: a partial sum would be a lie.
pub(crate) fn parse_io_stat(text: &str) -> Option<(u64, u64)> {
    let (mut rd, mut wr) = (0u64, 0u64);
    for line in text.lines() {
        let mut fields = line.split_ascii_whitespace();
        let Some(_dev) = fields.next() else { continue };
        let (mut r, mut w) = (None, None);
        for kv in fields {
            let (k, v) = kv.split_once('=')?;
            match k {
                "rbytes" => r = Some(v.parse::<u64>().ok()?),
                "wbytes" => w = Some(v.parse::<u64>().ok()?),
                _ => {}
            }
        }
        rd = rd.saturating_add(r?);
        wr = wr.saturating_add(w?);
    }
    Some((rd, wr))
}

/// The `avg10` percentage of the `some` or `full` line of a PSI file
/// (`some avg10=1.50 avg60=0.20 avg300=0.05 total=123456`).
pub(crate) fn pressure_avg10(text: &str, kind: &str) -> Option<f64> {
    let v: f64 = pressure_field(text, kind, "avg10=")?.parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// The `total=` counter (µs stalled since the cgroup was made) of the `some` or `full` line.
pub(crate) fn pressure_total_usec(text: &str, kind: &str) -> Option<u64> {
    pressure_field(text, kind, "total=")?.parse().ok()
}

/// The text after `key` on the line that starts with `kind`
/// (`some avg10=0.00 avg60=0.00 avg300=0.00 total=12345`).
fn pressure_field<'t>(text: &'t str, kind: &str, key: &str) -> Option<&'t str> {
    text.lines()
        .find(|l| l.split_ascii_whitespace().next() == Some(kind))?
        .split_ascii_whitespace()
        .find_map(|kv| kv.strip_prefix(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_stat_sums_devices() {
        let t = "259:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n\
                 8:0 rbytes=1048576 wbytes=2097152 rios=10 wios=20 dbytes=0 dios=0\n";
        assert_eq!(parse_io_stat(t), Some((1052672, 2097152)));
        assert_eq!(parse_io_stat(""), Some((0, 0)));
        assert_eq!(parse_io_stat("8:0 rbytes=x wbytes=0\n"), None);
        assert_eq!(parse_io_stat("8:0 rios=1\n"), None);
    }

    #[test]
    fn pressure_lines() {
        let t = "some avg10=1.50 avg60=0.20 avg300=0.05 total=123456\n\
                 full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(pressure_avg10(t, "some"), Some(1.5));
        assert_eq!(pressure_avg10(t, "full"), Some(0.0));
        assert_eq!(pressure_avg10("some avg60=1\n", "some"), None);
        assert_eq!(pressure_avg10("some avg10=NaN\n", "some"), None);
        assert_eq!(pressure_avg10("", "full"), None);
    }

    /// Captured from a Slurm 24.11 job's cgroup (kernel 6.12,
    /// ../shared/captures/cgroup-v2/trixie-slurm-24.11).
    #[test]
    fn pressure_totals_from_a_real_job() {
        let cpu = "some avg10=0.08 avg60=2.65 avg300=1.31 total=5136553\n\
                   full avg10=0.07 avg60=2.37 avg300=1.17 total=4507191\n";
        assert_eq!(pressure_total_usec(cpu, "some"), Some(5_136_553));
        assert_eq!(pressure_total_usec(cpu, "full"), Some(4_507_191));
        // A kernel before 5.13 prints no `full` line for cpu: unreadable, not 0.
        assert_eq!(
            pressure_total_usec(&cpu[..cpu.find("full").unwrap()], "full"),
            None
        );
        assert_eq!(
            pressure_total_usec("some avg10=0.00 total=-1\n", "some"),
            None
        );
        assert_eq!(
            pressure_total_usec("some avg10=0.00 total=\n", "some"),
            None
        );
    }
}
