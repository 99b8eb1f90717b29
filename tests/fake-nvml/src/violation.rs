//! `nvmlDeviceGetViolationStatus`: the cumulative time a limiter held the card's clocks down.
//!
//! Per limiter key (see [`POLICIES`]), a card may script:
//! - `"violations_ns": { "power": 123 }`: the counter's base, in ns;
//! - `"violation_windows": { "power": [[start_ms, end_ms], [start_ms, null]] }`: windows in
//!   Unix ms during which the counter grows in real time (`null`: still open). The counter is
//!   the base plus the part of each window already past, so "power capping for 20 s from T"
//!   is one write (`[[T, T + 20000]]`), not a rewrite every second.
//!
//! A limiter named in neither is NOT_SUPPORTED, as NVML says for a limiter the card lacks.

use super::*;

/// `nvmlPerfPolicyType_t` values (nvml.h) and the state file's key for each.
pub const POLICIES: [(c_uint, &str); 8] = [
    (0, "power"),              // NVML_PERF_POLICY_POWER
    (1, "thermal"),            // NVML_PERF_POLICY_THERMAL
    (2, "sync_boost"),         // NVML_PERF_POLICY_SYNC_BOOST
    (3, "board_limit"),        // NVML_PERF_POLICY_BOARD_LIMIT
    (4, "low_utilization"),    // NVML_PERF_POLICY_LOW_UTILIZATION
    (5, "reliability"),        // NVML_PERF_POLICY_RELIABILITY
    (10, "total_app_clocks"),  // NVML_PERF_POLICY_TOTAL_APP_CLOCKS
    (11, "total_base_clocks"), // NVML_PERF_POLICY_TOTAL_BASE_CLOCKS
];

/// `nvmlViolationTime_t`: 16 bytes.
#[repr(C)]
pub struct ViolationTime {
    /// CPU timestamp of the reading, µs since the Unix epoch.
    pub reference_time: c_ulonglong,
    /// Cumulative violation time, ns.
    pub violation_time: c_ulonglong,
}
const _: () = assert!(std::mem::size_of::<ViolationTime>() == 16);

/// The ns a window list adds by `now_ms`: each window's elapsed part.
fn windows_ns(windows: &[Value], now_ms: u64) -> Option<u64> {
    let mut ns = 0u64;
    for w in windows {
        let start = w.get(0).and_then(Value::as_u64)?;
        let end = match w.get(1) {
            None | Some(Value::Null) => now_ms,
            Some(e) => e.as_u64()?.min(now_ms),
        };
        ns = ns.saturating_add(end.saturating_sub(start).saturating_mul(1_000_000));
    }
    Some(ns)
}

/// The limiter's counter at `now_ms`, or None when the card does not script it (or
/// scripts it malformed).
pub(crate) fn counter_ns(d: &Value, key: &str, now_ms: u64) -> Option<u64> {
    let base = d.get("violations_ns").and_then(|v| v.get(key));
    let windows = d.get("violation_windows").and_then(|v| v.get(key));
    if base.is_none() && windows.is_none() {
        return None;
    }
    let base = match base {
        Some(b) => b.as_u64()?,
        None => 0,
    };
    let grown = match windows {
        Some(w) => windows_ns(w.as_array()?, now_ms)?,
        None => 0,
    };
    Some(base.saturating_add(grown))
}

/// The clock-event reasons the card's open `throttle_windows` add at `now_ms`: each
/// `[start_ms, end_ms, mask]` (end `null`: still open) ORs its mask while it is open.
pub(crate) fn reasons_now(d: &Value, now_ms: u64) -> u64 {
    let Some(windows) = d.get("throttle_windows").and_then(Value::as_array) else {
        return 0;
    };
    windows
        .iter()
        .filter_map(|w| {
            let start = w.get(0)?.as_u64()?;
            let end = w.get(1).and_then(Value::as_u64).unwrap_or(u64::MAX);
            let mask = w.get(2)?.as_u64()?;
            (start..end).contains(&now_ms).then_some(mask)
        })
        .fold(0, |a, m| a | m)
}

/// Scripted errors: `violation`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetViolationStatus(
    dev: *mut c_void,
    policy: c_uint,
    out: *mut ViolationTime,
) -> u32 {
    call(dev, "violation", |d, _| {
        let Some(&(_, key)) = POLICIES.iter().find(|(p, _)| *p == policy) else {
            return INVALID_ARGUMENT;
        };
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        let now_us = now_us();
        match counter_ns(d, key, now_us / 1000) {
            Some(ns) => {
                *out = ViolationTime {
                    reference_time: now_us,
                    violation_time: ns,
                };
                SUCCESS
            }
            None => NOT_SUPPORTED,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_throttle_window_adds_its_reasons_only_while_open() {
        // HW slowdown (0x8) with its thermal cause (0x40) from 1 s to 3 s.
        let d = json!({ "throttle_windows": [[1000, 3000, 0x48], [5000, null, 0x4]] });
        assert_eq!(reasons_now(&d, 999), 0);
        assert_eq!(reasons_now(&d, 1000), 0x48);
        assert_eq!(reasons_now(&d, 2999), 0x48);
        assert_eq!(reasons_now(&d, 3000), 0);
        assert_eq!(reasons_now(&d, 9000), 0x4);
        assert_eq!(reasons_now(&json!({}), 2000), 0);
    }

    #[test]
    fn base_plus_elapsed_part_of_each_window() {
        let d = json!({
            "violations_ns": { "power": 5, "thermal": 0 },
            "violation_windows": { "power": [[1000, 3000], [9000, null]], "sync_boost": [[0, 10]] },
        });
        assert_eq!(
            counter_ns(&d, "power", 10_000),
            Some(5 + 2_000_000_000 + 1_000_000_000)
        );
        // Before a window opens it adds nothing; during it, only what has passed.
        assert_eq!(counter_ns(&d, "power", 500), Some(5));
        assert_eq!(counter_ns(&d, "power", 2000), Some(5 + 1_000_000_000));
        assert_eq!(counter_ns(&d, "thermal", 10_000), Some(0));
        assert_eq!(counter_ns(&d, "sync_boost", 10_000), Some(10_000_000));
        assert_eq!(counter_ns(&d, "reliability", 10_000), None);
    }

    #[test]
    fn malformed_script_is_unsupported_not_zero() {
        let d = json!({ "violations_ns": { "power": -1 }, "violation_windows": { "thermal": [["x"]] } });
        assert_eq!(counter_ns(&d, "power", 1), None);
        assert_eq!(counter_ns(&d, "thermal", 1), None);
    }
}
