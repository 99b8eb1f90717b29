//! Pure verdicts on one card's reading: what the card is doing for the job, and whether a
//! clock slowdown is healthy (working at its power limit) or a fault. No I/O here.

use crate::sample::{GpuProcesses, GpuReading, GpuSample};
use serde::{Deserialize, Serialize};

/// Below this busy percentage a card is idle (jobstats' and DCGM's threshold).
pub const IDLE_BELOW_PERCENT: u32 = 5;
/// An idle card "holds memory" from this much of the job's memory on it.
pub const HOLDING_MEMORY_BYTES: u64 = 1 << 30;
/// A hardware slowdown while drawing less than this share of the power limit is a fault:
/// a healthy card slows down because it *reached* a limit, not at a fraction of it.
pub const BROKEN_BELOW_POWER_SHARE: f64 = 0.5;
/// Drawing at least this share of the limit counts as "at the power limit".
pub const AT_LIMIT_POWER_SHARE: f64 = 0.9;

/// `nvmlClocksThrottleReasons` bits (nvml.h) and their names.
pub const THROTTLE_BITS: &[(u64, &str)] = &[
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "power_cap"),
    (0x8, "hardware_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "thermal_software"),
    (0x40, "thermal_hardware"),
    (0x80, "power_brake"),
    (0x100, "display_clock_setting"),
];
pub const THROTTLE_GPU_IDLE: u64 = 0x1;
pub const THROTTLE_SW_POWER_CAP: u64 = 0x4;
pub const THROTTLE_HW_SLOWDOWN: u64 = 0x8;
pub const THROTTLE_SW_THERMAL: u64 = 0x20;
pub const THROTTLE_HW_THERMAL: u64 = 0x40;
pub const THROTTLE_HW_POWER_BRAKE: u64 = 0x80;

/// The names of the raised bits, in nvml.h order; unknown bits as `0x…`.
pub fn throttle_names(mask: u64) -> Vec<String> {
    let mut out: Vec<String> = THROTTLE_BITS
        .iter()
        .filter(|(b, _)| mask & b != 0)
        .map(|(_, n)| (*n).to_string())
        .collect();
    let known: u64 = THROTTLE_BITS.iter().map(|(b, _)| b).sum();
    if mask & !known != 0 {
        out.push(format!("{:#x}", mask & !known));
    }
    out
}

/// What a card is doing for the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardState {
    Active,
    Idle,
    /// Busy below 5 % while the job holds memory on it: allocated, not used.
    IdleHoldingMemory,
    /// Most of the processes' memory on the card belongs to other users: the card-wide
    /// utilisation is not the job's.
    SharedNotOurs,
    /// Utilisation unreadable (e.g. a MIG slice): no verdict.
    Unknown,
}

impl CardState {
    pub fn as_str(self) -> &'static str {
        match self {
            CardState::Active => "active",
            CardState::Idle => "idle",
            CardState::IdleHoldingMemory => "idle_holding_memory",
            CardState::SharedNotOurs => "shared_not_ours",
            CardState::Unknown => "unknown",
        }
    }
}

/// The card's state from one reading.
pub fn card_state(s: &GpuSample) -> CardState {
    if let Ok(p) = &s.processes {
        if shared_not_ours(p) {
            return CardState::SharedNotOurs;
        }
    }
    let Ok(util) = s.utilization_percent else {
        return CardState::Unknown;
    };
    if util >= IDLE_BELOW_PERCENT {
        return CardState::Active;
    }
    // The job's own memory where NVML lists processes; else the card's used memory.
    let holding = match (&s.processes, &s.memory_used_bytes) {
        (Ok(p), _) => p.job_memory_bytes >= HOLDING_MEMORY_BYTES,
        (Err(_), Ok(used)) => *used >= HOLDING_MEMORY_BYTES,
        _ => false,
    };
    if holding {
        CardState::IdleHoldingMemory
    } else {
        CardState::Idle
    }
}

/// Others' processes hold more memory than the job's and at least half of the total.
pub fn shared_not_ours(p: &GpuProcesses) -> bool {
    p.other_processes > 0
        && p.other_memory_bytes > p.job_memory_bytes
        && p.other_memory_bytes * 2 >= p.other_memory_bytes + p.job_memory_bytes
}

/// Why the clocks are held back, as a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleState {
    /// Nothing holds the clocks back (or only "idle").
    None,
    /// Working at its power limit: healthy, the card is doing all it may.
    AtPowerLimit,
    /// Too hot (software or hardware thermal slowdown).
    Thermal,
    /// Hardware slowdown or power brake while drawing near its limit (power supply or
    /// power-brake signal under load): worth a look, not yet a fault.
    HardwareSlowdownUnderLoad,
    /// Hardware slowdown or power brake while drawing a fraction of its limit: the card is
    /// held back by a fault (the field record: 385 of 1785 MHz at 163 of 400 W, 52 °C).
    HardwareSlowdownBroken,
    /// Held by a clock setting (applications clocks, sync boost, display).
    ClockSetting,
    /// The reasons are unreadable.
    Unknown,
}

impl ThrottleState {
    pub fn as_str(self) -> &'static str {
        match self {
            ThrottleState::None => "none",
            ThrottleState::AtPowerLimit => "at_power_limit",
            ThrottleState::Thermal => "thermal",
            ThrottleState::HardwareSlowdownUnderLoad => "hardware_slowdown_under_load",
            ThrottleState::HardwareSlowdownBroken => "hardware_slowdown_broken",
            ThrottleState::ClockSetting => "clock_setting",
            ThrottleState::Unknown => "unknown",
        }
    }

    /// Whether this state means the card is faulty (not merely busy or hot).
    pub fn is_fault(self) -> bool {
        self == ThrottleState::HardwareSlowdownBroken
    }
}

fn share(draw: &GpuReading<u32>, limit: &GpuReading<u32>) -> Option<f64> {
    match (draw, limit) {
        (Ok(d), Ok(l)) if *l > 0 => Some(f64::from(*d) / f64::from(*l)),
        _ => None,
    }
}

/// The throttle verdict from one reading. A hardware slowdown with the power draw
/// unreadable is `HardwareSlowdownUnderLoad` (no evidence of a fault without the figure).
pub fn throttle_state(s: &GpuSample) -> ThrottleState {
    let Ok(mask) = s.throttle_reasons else {
        return ThrottleState::Unknown;
    };
    let power_share = share(&s.power_draw_milliwatts, &s.power_limit_milliwatts);
    if mask & (THROTTLE_HW_SLOWDOWN | THROTTLE_HW_POWER_BRAKE) != 0 {
        return match power_share {
            Some(p) if p < BROKEN_BELOW_POWER_SHARE => ThrottleState::HardwareSlowdownBroken,
            _ => ThrottleState::HardwareSlowdownUnderLoad,
        };
    }
    if mask & (THROTTLE_SW_THERMAL | THROTTLE_HW_THERMAL) != 0 {
        return ThrottleState::Thermal;
    }
    if mask & THROTTLE_SW_POWER_CAP != 0 || power_share.is_some_and(|p| p >= AT_LIMIT_POWER_SHARE) {
        return ThrottleState::AtPowerLimit;
    }
    if mask & !THROTTLE_GPU_IDLE != 0 {
        return ThrottleState::ClockSetting;
    }
    ThrottleState::None
}

/// The SM clock as a share of the card's rated maximum.
pub fn clock_share(s: &GpuSample, sm_clock_max_mhz: Option<u32>) -> Option<f64> {
    match (s.sm_clock_mhz, sm_clock_max_mhz) {
        (Ok(c), Some(m)) if m > 0 => Some(f64::from(c) / f64::from(m)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::GpuError;

    fn sample() -> GpuSample {
        GpuSample {
            utilization_percent: Ok(97),
            memory_utilization_percent: Ok(40),
            memory_used_bytes: Ok(30 << 30),
            power_draw_milliwatts: Ok(398_000),
            power_limit_milliwatts: Ok(400_000),
            temperature_celsius: Ok(71),
            sm_clock_mhz: Ok(1410),
            throttle_reasons: Ok(THROTTLE_SW_POWER_CAP),
            energy_millijoules: Ok(1),
            processes: Ok(GpuProcesses {
                job_processes: 1,
                job_memory_bytes: 29 << 30,
                other_processes: 0,
                other_memory_bytes: 0,
            }),
            ecc_uncorrected: Ok(0),
            nvlink: Err(GpuError::NotSupported),
            pcie_tx_kib_per_s: Ok(1_200_000),
            pcie_rx_kib_per_s: Ok(300_000),
            ledger: crate::sample::GpuLedger::all_failed(GpuError::NotSupported),
            xid_errors: Ok(Vec::new()),
        }
    }

    #[test]
    fn busy_card_at_power_limit_is_healthy() {
        let s = sample();
        assert_eq!(card_state(&s), CardState::Active);
        assert_eq!(throttle_state(&s), ThrottleState::AtPowerLimit);
        assert!(!throttle_state(&s).is_fault());
    }

    #[test]
    fn the_field_record_is_a_broken_card() {
        let mut s = sample();
        s.sm_clock_mhz = Ok(385);
        s.power_draw_milliwatts = Ok(163_000);
        s.temperature_celsius = Ok(52);
        s.throttle_reasons = Ok(THROTTLE_HW_SLOWDOWN);
        assert_eq!(throttle_state(&s), ThrottleState::HardwareSlowdownBroken);
        assert!(throttle_state(&s).is_fault());
        let share = clock_share(&s, Some(1785)).unwrap();
        assert!((share - 0.2157).abs() < 0.001);
        assert_eq!(
            throttle_names(0x8 | 0x4),
            vec!["power_cap", "hardware_slowdown"]
        );
        assert_eq!(throttle_names(0x1000), vec!["0x1000"]);
    }

    #[test]
    fn idle_holding_memory_and_shared() {
        let mut s = sample();
        s.utilization_percent = Ok(0);
        s.throttle_reasons = Ok(THROTTLE_GPU_IDLE);
        s.power_draw_milliwatts = Ok(60_000);
        assert_eq!(card_state(&s), CardState::IdleHoldingMemory);
        assert_eq!(throttle_state(&s), ThrottleState::None);
        s.processes = Ok(GpuProcesses::default());
        assert_eq!(card_state(&s), CardState::Idle);
        s.utilization_percent = Ok(90);
        s.processes = Ok(GpuProcesses {
            job_processes: 1,
            job_memory_bytes: 1 << 30,
            other_processes: 1,
            other_memory_bytes: 60 << 30,
        });
        assert_eq!(card_state(&s), CardState::SharedNotOurs);
        s.utilization_percent = Err(GpuError::NotSupported);
        s.processes = Err(GpuError::NotSupported);
        assert_eq!(card_state(&s), CardState::Unknown);
    }
}
