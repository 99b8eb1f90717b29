//! One reading of a job (or one step) at one instant: raw cumulative counters only.
//!
//! Every field is an `Option`: `None` means "could not be read" (file missing, controller
//! absent, parse error) and is stored as SQL NULL, shown as `n/a`, never as zero.
//! Rates and percentages are derived later (see `model`) from two samples and their `dt`.

use serde::{Deserialize, Serialize};
use std::fmt;

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

/// Pressure stall information (cgroup v2 `*.pressure`): the `some`/`full` lines' 10 s
/// averages (percent) and their `total=` counters: the cumulative time, µs, in which some
/// (or all) of the group's runnable tasks waited for the resource. The totals are exact
/// between any two readings; the averages are the kernel's decaying estimate. `None`:
/// unreadable (no PSI on cgroup v1, or a kernel booted with `psi=0`), never 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pressure {
    pub cpu_some_avg10: Option<f64>,
    pub memory_some_avg10: Option<f64>,
    pub memory_full_avg10: Option<f64>,
    pub io_some_avg10: Option<f64>,
    pub io_full_avg10: Option<f64>,
    pub cpu_some_total_usec: Option<u64>,
    /// Kernels before 5.13 print no `full` line for cpu.
    pub cpu_full_total_usec: Option<u64>,
    pub memory_some_total_usec: Option<u64>,
    pub memory_full_total_usec: Option<u64>,
    pub io_some_total_usec: Option<u64>,
    pub io_full_total_usec: Option<u64>,
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

/// Why an NVML reading could not be taken: the NVML return code's name (`nvmlReturn_t`),
/// folded into 15 values so a whole sample's errors pack into one integer column (4 bits per
/// reading; see `store::schema`). A reading that failed is never stored as 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[repr(u8)]
pub enum GpuError {
    NotSupported = 1,
    NoPermission = 2,
    GpuIsLost = 3,
    Unknown = 4,
    Timeout = 5,
    NoData = 6,
    InvalidArgument = 7,
    Uninitialized = 8,
    /// The driver's NVML lacks the function (older driver): `NVML_ERROR_FUNCTION_NOT_FOUND`.
    FunctionNotFound = 9,
    InsufficientSize = 10,
    DriverNotLoaded = 11,
    ResetRequired = 12,
    NotFound = 13,
    InUse = 14,
    /// Any other return code (see the slurmd log for the number).
    Other = 15,
}

impl GpuError {
    pub const ALL: [GpuError; 15] = [
        GpuError::NotSupported,
        GpuError::NoPermission,
        GpuError::GpuIsLost,
        GpuError::Unknown,
        GpuError::Timeout,
        GpuError::NoData,
        GpuError::InvalidArgument,
        GpuError::Uninitialized,
        GpuError::FunctionNotFound,
        GpuError::InsufficientSize,
        GpuError::DriverNotLoaded,
        GpuError::ResetRequired,
        GpuError::NotFound,
        GpuError::InUse,
        GpuError::Other,
    ];

    /// NVML's name without the `NVML_ERROR_` prefix, e.g. `NOT_SUPPORTED`.
    pub fn name(self) -> &'static str {
        match self {
            GpuError::NotSupported => "NOT_SUPPORTED",
            GpuError::NoPermission => "NO_PERMISSION",
            GpuError::GpuIsLost => "GPU_IS_LOST",
            GpuError::Unknown => "UNKNOWN",
            GpuError::Timeout => "TIMEOUT",
            GpuError::NoData => "NO_DATA",
            GpuError::InvalidArgument => "INVALID_ARGUMENT",
            GpuError::Uninitialized => "UNINITIALIZED",
            GpuError::FunctionNotFound => "FUNCTION_NOT_FOUND",
            GpuError::InsufficientSize => "INSUFFICIENT_SIZE",
            GpuError::DriverNotLoaded => "DRIVER_NOT_LOADED",
            GpuError::ResetRequired => "RESET_REQUIRED",
            GpuError::NotFound => "NOT_FOUND",
            GpuError::InUse => "IN_USE",
            GpuError::Other => "OTHER",
        }
    }

    pub fn from_name(s: &str) -> Option<GpuError> {
        GpuError::ALL.into_iter().find(|e| e.name() == s)
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    pub fn from_code(c: u8) -> Option<GpuError> {
        GpuError::ALL.into_iter().find(|e| e.code() == c)
    }

    /// From an `nvmlReturn_t` value (nvml.h); `None` for `NVML_SUCCESS`.
    pub fn from_nvml_return(rc: u32) -> Option<GpuError> {
        Some(match rc {
            0 => return None,
            1 => GpuError::Uninitialized,
            2 => GpuError::InvalidArgument,
            3 => GpuError::NotSupported,
            4 => GpuError::NoPermission,
            6 => GpuError::NotFound,
            7 => GpuError::InsufficientSize,
            9 => GpuError::DriverNotLoaded,
            10 => GpuError::Timeout,
            13 => GpuError::FunctionNotFound,
            15 => GpuError::GpuIsLost,
            16 => GpuError::ResetRequired,
            19 => GpuError::InUse,
            21 => GpuError::NoData,
            999 => GpuError::Unknown,
            _ => GpuError::Other,
        })
    }
}

impl fmt::Display for GpuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One GPU reading: the value, or the NVML error that prevented it.
pub type GpuReading<T> = std::result::Result<T, GpuError>;

/// A card the job holds, fixed for the job (the `gpus` table). Keyed by UUID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuCard {
    /// NVML's UUID, e.g. `GPU-5f1c…`: the key (indices differ between numberings).
    pub uuid: String,
    /// The position in the job's `CUDA_VISIBLE_DEVICES`: the card is `cuda:<this>` to the
    /// user's code. `None` when the job's environment names no order (NVML order then).
    pub cuda_index: Option<u32>,
    /// NVML's (and nvidia-smi's) index on the node.
    pub nvml_index: u32,
    /// `domain:bus:device.function`, e.g. `00000000:3B:00.0`.
    pub pci_bus_id: Option<String>,
    pub name: Option<String>,
    pub memory_total_bytes: Option<u64>,
    /// The card's rated maximum SM clock.
    pub sm_clock_max_mhz: Option<u32>,
    /// The enforced power limit when recording started (each sample carries the current one).
    pub power_limit_watts: Option<f64>,
    /// NVLink links that are up (0 on a PCIe-only card; `None` when NVML cannot say).
    pub nvlink_links: Option<u32>,
}

impl GpuCard {
    /// How the user's code addresses the card: `cuda:N`, else `nvml:N`.
    pub fn label(&self) -> String {
        match self.cuda_index {
            Some(i) => format!("cuda:{i}"),
            None => format!("nvml:{}", self.nvml_index),
        }
    }
}

/// GPU memory of the processes on a card, split into the job's and everyone else's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuProcesses {
    /// The job's compute processes on the card and their memory.
    pub job_processes: u32,
    pub job_memory_bytes: u64,
    /// Processes that are not the job's (a neighbour sharing the card): never credited.
    pub other_processes: u32,
    pub other_memory_bytes: u64,
}

/// Cumulative NVLink data counters summed over every active link, KiB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvlinkCounters {
    pub tx_kib: u64,
    pub rx_kib: u64,
}

/// How two of the job's cards are wired (`nvmlDeviceGetTopologyCommonAncestor`, or NVLink).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuLink {
    pub a_uuid: String,
    pub b_uuid: String,
    /// `nvlink` (with `nvlink_links` direct links), or the PCIe common ancestor:
    /// `internal`, `single` (one switch), `multiple` (switches), `hostbridge`, `node`
    /// (NUMA node, across host bridges), `system` (across CPU sockets).
    pub level: String,
    pub nvlink_links: u32,
}

/// One reading of one card. Every field carries the value or the NVML error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// Busy percentage over NVML's last sample period (kernel running on the card).
    pub utilization_percent: GpuReading<u32>,
    /// Memory-controller busy percentage.
    pub memory_utilization_percent: GpuReading<u32>,
    /// Card memory in use by anyone (all processes plus the driver's reserve).
    pub memory_used_bytes: GpuReading<u64>,
    pub power_draw_milliwatts: GpuReading<u32>,
    pub power_limit_milliwatts: GpuReading<u32>,
    pub temperature_celsius: GpuReading<u32>,
    pub sm_clock_mhz: GpuReading<u32>,
    /// `nvmlClocksThrottleReasons` bit mask (see `collect::gpu::derive::throttle_names`).
    pub throttle_reasons: GpuReading<u64>,
    /// Cumulative energy since the driver loaded, millijoules.
    pub energy_millijoules: GpuReading<u64>,
    pub processes: GpuReading<GpuProcesses>,
    /// Volatile (since last driver load) uncorrected ECC errors.
    pub ecc_uncorrected: GpuReading<u64>,
    pub nvlink: GpuReading<NvlinkCounters>,
    /// PCIe throughput card → host and host → card, in KB/s (1 KB = 1024 bytes) as NVML
    /// measures it over its own 20 ms window (`nvmlDeviceGetPcieThroughput`): a snapshot, not
    /// an average over the sample interval.
    pub pcie_tx_kib_per_s: GpuReading<u32>,
    pub pcie_rx_kib_per_s: GpuReading<u32>,
    /// Critical Xid errors NVML delivered since the previous reading, oldest first (their
    /// Xid codes; empty: none). `Err` when the card's Xid events cannot be watched.
    pub xid_errors: GpuReading<Vec<u64>>,
    /// The exact ledger's counters (`collect::gpu::ledger`).
    pub ledger: GpuLedger,
}

/// Clock limiters in [`GpuLedger::violation_ns`] order (`collect::gpu::ledger::LIMITERS`).
pub const GPU_LIMITERS: usize = 8;

/// The limiters' names, in [`GpuLedger::violation_ns`] order.
pub const GPU_LIMITER_NAMES: [&str; GPU_LIMITERS] = [
    "power",
    "thermal",
    "sync_boost",
    "board_limit",
    "low_utilization",
    "reliability",
    "total_app_clocks",
    "total_base_clocks",
];

/// One card's counters for an exact ledger of its time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuLedger {
    /// Per limiter: NVML's cumulative violation time, ns since the driver loaded; the NVML
    /// error where the card does not report that limiter (never 0).
    pub violation_ns: [GpuReading<u64>; GPU_LIMITERS],
    /// Time with no kernel running since the card's previous reading (not cumulative).
    pub idle: GpuReading<IdleTime>,
    /// GPM over the interval since the card's previous reading.
    pub gpm: Result<Gpm, GpmUnavailable>,
}

impl GpuLedger {
    /// Every counter unread for the same reason (a lost card, a timed-out read, a MIG slice).
    pub fn all_failed(e: GpuError) -> GpuLedger {
        GpuLedger {
            violation_ns: [Err(e); GPU_LIMITERS],
            idle: Err(e),
            gpm: Err(GpmUnavailable::Error(e)),
        }
    }
}

/// Idle time over one interval between reads (see `collect::gpu::ledger::idle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct IdleTime {
    /// µs of sample periods whose utilization was 0.
    pub no_work_us: u64,
    /// µs of sample periods read (idle or not): the part of the interval accounted for.
    pub covered_us: u64,
}

/// GPM percentages over one interval; each `None` when NVML could not compute it.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Gpm {
    /// `NVML_GPM_METRIC_SM_UTIL`: share of time SMs had a warp assigned, averaged over SMs.
    pub sm_active_percent: Option<f64>,
    /// `NVML_GPM_METRIC_SM_OCCUPANCY`: resident warps over the SMs' maximum.
    pub sm_occupancy_percent: Option<f64>,
    /// `NVML_GPM_METRIC_ANY_TENSOR_UTIL`: share of time any tensor pipe was busy.
    pub tensor_active_percent: Option<f64>,
    /// `NVML_GPM_METRIC_DRAM_BW_UTIL`: share of the peak DRAM bandwidth used.
    pub dram_bw_util_percent: Option<f64>,
}

/// Why a reading has no GPM figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum GpmUnavailable {
    /// The card (pre-Hopper) or its driver has no GPM.
    NotThisCard,
    /// The first read of a card: GPM needs a sample at each end of an interval.
    FirstSample,
    /// NVML's error for this read.
    Error(GpuError),
}

impl fmt::Display for GpmUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpmUnavailable::NotThisCard => write!(f, "not available on this card"),
            GpmUnavailable::FirstSample => write!(f, "needs a second reading"),
            GpmUnavailable::Error(e) => write!(f, "{e}"),
        }
    }
}

impl GpuSample {
    /// Every reading failed with the same error (a lost card, a timed-out read).
    pub fn all_failed(e: GpuError) -> GpuSample {
        GpuSample {
            utilization_percent: Err(e),
            memory_utilization_percent: Err(e),
            memory_used_bytes: Err(e),
            power_draw_milliwatts: Err(e),
            power_limit_milliwatts: Err(e),
            temperature_celsius: Err(e),
            sm_clock_mhz: Err(e),
            throttle_reasons: Err(e),
            energy_millijoules: Err(e),
            processes: Err(e),
            ecc_uncorrected: Err(e),
            nvlink: Err(e),
            pcie_tx_kib_per_s: Err(e),
            pcie_rx_kib_per_s: Err(e),
            xid_errors: Err(e),
            ledger: GpuLedger::all_failed(e),
        }
    }
}
