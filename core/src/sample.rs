//! One reading of a job (or one step) at one instant: raw cumulative counters only.
//!
//! Every field is an `Option`: `None` means "could not be read" (file missing, controller
//! absent, parse error) and is stored as SQL NULL, shown as `n/a`, never as zero.
//! Rates and percentages are derived later (see `model`) from two samples and their `dt`.

use serde::{Deserialize, Serialize};

/// How the job's usage was measured; stored with every sample so a reader knows what a
/// figure means (a /proc sum has no page cache and no kernel high-water mark).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    CgroupV1,
    CgroupV2,
    /// No job cgroup (`proctrack/linuxproc`): the sum over the step's processes in /proc.
    Proc,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::CgroupV1 => "cgroup_v1",
            Source::CgroupV2 => "cgroup_v2",
            Source::Proc => "proc",
        }
    }

    pub fn parse(s: &str) -> Option<Source> {
        match s {
            "cgroup_v1" => Some(Source::CgroupV1),
            "cgroup_v2" => Some(Source::CgroupV2),
            "proc" => Some(Source::Proc),
            _ => None,
        }
    }
}

/// Pressure-stall averages (cgroup v2 `*.pressure`, the `some`/`full` avg10 lines), percent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pressure {
    pub cpu_some_avg10: Option<f64>,
    pub memory_some_avg10: Option<f64>,
    pub memory_full_avg10: Option<f64>,
    pub io_some_avg10: Option<f64>,
    pub io_full_avg10: Option<f64>,
}

/// What one read of a cgroup (or of a process tree) yields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageReading {
    /// Cumulative CPU time of everything in the group, microseconds. Only climbs.
    pub cpu_usage_usec: Option<u64>,
    pub cpu_user_usec: Option<u64>,
    pub cpu_system_usec: Option<u64>,
    /// Kernel's memory charge: anonymous + page cache (+ kernel memory on v2).
    pub memory_usage_bytes: Option<u64>,
    /// Page cache that the kernel can reclaim: active_file + inactive_file.
    pub memory_cache_bytes: Option<u64>,
    /// usage − cache: what `--mem` must be sized against.
    pub memory_working_set_bytes: Option<u64>,
    /// The kernel's lifetime high-water mark of `usage` (includes page cache).
    pub memory_lifetime_peak_bytes: Option<u64>,
    /// The cgroup's limit; `None` when unlimited or unreadable (callers fall back to the
    /// Slurm allocation).
    pub memory_limit_bytes: Option<u64>,
    /// OOM kills in the group (v2 `memory.events oom_kill`, v1 `memory.oom_control oom_kill`).
    pub memory_oom_kills: Option<u64>,
    /// Times the limit was hit (v1 `memory.failcnt`, v2 `memory.events max`).
    pub memory_limit_hits: Option<u64>,
    /// Major page faults (`memory.stat` pgmajfault / total_pgmajfault, or /proc majflt).
    pub memory_major_faults: Option<u64>,
    pub io_read_bytes: Option<u64>,
    pub io_write_bytes: Option<u64>,
    /// Processes (thread-group leaders) and threads in the group.
    pub processes: Option<u64>,
    pub threads: Option<u64>,
    pub pressure: Pressure,
}
