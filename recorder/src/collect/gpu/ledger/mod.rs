//! Per-card readings for an exact ledger of a job's GPU time, from NVML's cumulative
//! counters rather than point samples:
//!
//! - the time each clock limiter held the card down ([`LIMITERS`], NVML's violation
//!   counters, ns since the driver loaded);
//! - the time with no kernel running, from NVML's utilization-samples ring ([`idle`]);
//! - GPM figures on Hopper and newer ([`gpm`]).
//!
//! [`read_ledger`] reads one card; a [`LedgerCursor`] per card carries what the next read
//! continues from. Counters stay raw and cumulative: differences and shares are the
//! model's job. An unreadable counter is NVML's error, never 0.

pub mod gpm;
pub mod idle;

use nvml_wrapper::enum_wrappers::device::PerformancePolicy;
use nvml_wrapper::{Device, Nvml};

pub use gpm::{Gpm, GpmUnavailable};
pub use idle::IdleTime;

const _: () = assert!(LIMITERS.len() == crate::sample::GPU_LIMITERS);

/// One clock limiter: our name, NVML's `nvmlPerfPolicyType_t` name, and its policy.
#[derive(Debug, Clone, Copy)]
pub struct Limiter {
    pub name: &'static str,
    pub nvml: &'static str,
    pub policy: PerformancePolicy,
}

/// The limiters, in the order of [`GpuLedgerReading::violation_ns`].
pub const LIMITERS: [Limiter; 8] = [
    limiter("power", "NVML_PERF_POLICY_POWER", PerformancePolicy::Power),
    limiter(
        "thermal",
        "NVML_PERF_POLICY_THERMAL",
        PerformancePolicy::Thermal,
    ),
    limiter(
        "sync_boost",
        "NVML_PERF_POLICY_SYNC_BOOST",
        PerformancePolicy::SyncBoost,
    ),
    limiter(
        "board_limit",
        "NVML_PERF_POLICY_BOARD_LIMIT",
        PerformancePolicy::BoardLimit,
    ),
    limiter(
        "low_utilization",
        "NVML_PERF_POLICY_LOW_UTILIZATION",
        PerformancePolicy::LowUtilization,
    ),
    limiter(
        "reliability",
        "NVML_PERF_POLICY_RELIABILITY",
        PerformancePolicy::Reliability,
    ),
    limiter(
        "total_app_clocks",
        "NVML_PERF_POLICY_TOTAL_APP_CLOCKS",
        PerformancePolicy::TotalAppClocks,
    ),
    limiter(
        "total_base_clocks",
        "NVML_PERF_POLICY_TOTAL_BASE_CLOCKS",
        PerformancePolicy::TotalBaseClocks,
    ),
];

const fn limiter(name: &'static str, nvml: &'static str, policy: PerformancePolicy) -> Limiter {
    Limiter { name, nvml, policy }
}

/// The limiters' names, in order.
pub fn limiter_names() -> [&'static str; 8] {
    LIMITERS.map(|l| l.name)
}

/// One card's ledger counters at one instant (the sample's own type: it is stored as is).
pub type GpuLedgerReading = crate::sample::GpuLedger;

/// What one card's next read continues from. Holds an NVML GPM sample between reads:
/// call [`LedgerCursor::release`] before the `Nvml` it came from shuts down.
#[derive(Debug)]
pub struct LedgerCursor {
    idle: idle::IdleCursor,
    gpm: gpm::GpmCursor,
}

impl LedgerCursor {
    /// A cursor whose first read counts idle time from `since_unix_us` (the job's start:
    /// the ring also holds samples from before it, which are not the job's).
    pub fn new(since_unix_us: u64) -> LedgerCursor {
        LedgerCursor {
            idle: idle::IdleCursor::new(since_unix_us),
            gpm: gpm::GpmCursor::default(),
        }
    }

    /// A cursor counting from now.
    pub fn starting_now() -> LedgerCursor {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        LedgerCursor::new(now)
    }

    /// Frees the GPM sample kept between reads (NVML's memory, not Rust's).
    pub fn release(&mut self, nvml: &Nvml) {
        self.gpm.release(nvml);
    }
}

/// Reads one card's ledger counters and advances its cursor. Give it a whole card: a MIG
/// slice has no utilization samples, and the card's limiters and GPM are shared by every
/// slice's job.
pub fn read_ledger(dev: &Device, cursor: &mut LedgerCursor) -> GpuLedgerReading {
    GpuLedgerReading {
        violation_ns: LIMITERS.map(|l| {
            dev.violation_status(l.policy)
                .map(|v| v.violation_time)
                .map_err(|e| super::gpu_error(&e))
        }),
        idle: cursor.idle.read(dev),
        gpm: cursor.gpm.read(dev),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_samples_limiter_names_are_these() {
        assert_eq!(super::limiter_names(), crate::sample::GPU_LIMITER_NAMES);
    }
}
