//! `nvmlDeviceGetSamples` for `NVML_GPU_UTILIZATION_SAMPLES`: the driver's ring buffer of
//! utilization samples, each the percent of its sample period (ending at its timestamp, in
//! µs since the Unix epoch) during which a kernel ran.
//!
//! A card scripts its ring in one of two ways:
//! - `"utilization_samples": [[timestamp_us, percent], …]`: the ring itself, as listed;
//! - `"utilization_timeline": { "points": [[unix_ms, percent], …], "period_us": 166667,
//!   "capacity": 120 }`: from each point on, the card runs at that percent; the ring holds a
//!   sample at every multiple of `period_us` after the first point up to now (the newest
//!   `capacity` of them), each the time-weighted mean over its period, rounded down. A
//!   running job's window ("idle from T for 20 s") is then one write.
//!
//! Neither: NOT_SUPPORTED (as on a MIG slice). Other sample types: NOT_SUPPORTED.

use super::*;

/// `nvmlSamplingType_t`: `NVML_GPU_UTILIZATION_SAMPLES`; `NVML_SAMPLINGTYPE_COUNT` is 7.
pub const GPU_UTILIZATION_SAMPLES: c_uint = 1;
const SAMPLING_TYPE_COUNT: c_uint = 7;
/// `NVML_VALUE_TYPE_UNSIGNED_INT`: what NVML gives utilization samples in.
pub const VALUE_TYPE_UNSIGNED_INT: c_uint = 1;
const NOT_FOUND: u32 = 6;

/// `nvmlValue_t`: an 8-byte union.
#[repr(C)]
#[derive(Clone, Copy)]
pub union SampleValue {
    pub d_val: f64,
    pub ui_val: c_uint,
    pub ull_val: c_ulonglong,
}

/// `nvmlSample_t`: 16 bytes.
#[repr(C)]
pub struct Sample {
    pub time_stamp: c_ulonglong,
    pub sample_value: SampleValue,
}
const _: () = assert!(std::mem::size_of::<Sample>() == 16);

/// One timeline point: from `.0` (µs) on, the card runs at `.1` percent.
fn points(t: &Value) -> Option<Vec<(u64, u64)>> {
    let mut p = Vec::new();
    for x in t.get("points")?.as_array()? {
        p.push((
            x.get(0)?.as_u64()?.saturating_mul(1000),
            x.get(1)?.as_u64()?,
        ));
    }
    p.sort_by_key(|x| x.0);
    Some(p)
}

/// The time-weighted mean percent over `(from, to]`, counting only the timeline's span.
fn mean(p: &[(u64, u64)], from: u64, to: u64) -> u32 {
    let (mut weighted, mut span) = (0u128, 0u128);
    for (i, &(start, pct)) in p.iter().enumerate() {
        let end = p.get(i + 1).map_or(to, |n| n.0.min(to));
        let (a, b) = (start.max(from), end);
        if b > a {
            weighted += u128::from(b - a) * u128::from(pct);
            span += u128::from(b - a);
        }
    }
    if span == 0 {
        return 0;
    }
    (weighted / span) as u32
}

/// The ring generated from a timeline at `now_us`, oldest first.
fn generated(t: &Value, now_us: u64) -> Option<Vec<(u64, u32)>> {
    let p = points(t)?;
    let period = u64_of(t, "period_us").unwrap_or(166_667).max(1);
    let capacity = u64_of(t, "capacity").unwrap_or(120);
    let first = p.first()?.0;
    let newest = now_us / period;
    let oldest = (first / period + 1).max(newest.saturating_sub(capacity) + 1);
    Some(
        (oldest..=newest)
            .map(|k| (k * period, mean(&p, k * period - period, k * period)))
            .collect(),
    )
}

/// The card's ring at `now_us`, oldest first; None when it scripts none.
pub(crate) fn ring(d: &Value, now_us: u64) -> Option<Vec<(u64, u32)>> {
    if let Some(list) = d.get("utilization_samples") {
        let mut r = Vec::new();
        for x in list.as_array()? {
            r.push((
                x.get(0)?.as_u64()?,
                u32::try_from(x.get(1)?.as_u64()?).ok()?,
            ));
        }
        r.sort_by_key(|x| x.0);
        return Some(r);
    }
    generated(d.get("utilization_timeline")?, now_us)
}

/// NVML's protocol: `samples` NULL asks for the count of samples newer than `last_seen`
/// (µs; 0: all); otherwise up to `*count` of them are written, oldest first, and `*count`
/// says how many. None newer: NOT_FOUND. Scripted errors: `samples`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetSamples(
    dev: *mut c_void,
    kind: c_uint,
    last_seen: c_ulonglong,
    val_type: *mut c_uint,
    count: *mut c_uint,
    samples: *mut Sample,
) -> u32 {
    call(dev, "samples", |d, _| {
        if kind >= SAMPLING_TYPE_COUNT || count.is_null() || val_type.is_null() {
            return INVALID_ARGUMENT;
        }
        if kind != GPU_UTILIZATION_SAMPLES {
            return NOT_SUPPORTED;
        }
        let Some(ring) = ring(d, now_us()) else {
            return NOT_SUPPORTED;
        };
        let newer: Vec<_> = ring.into_iter().filter(|s| s.0 > last_seen).collect();
        if newer.is_empty() {
            return NOT_FOUND;
        }
        *val_type = VALUE_TYPE_UNSIGNED_INT;
        if samples.is_null() {
            *count = newer.len() as c_uint;
            return SUCCESS;
        }
        if *count == 0 {
            return INVALID_ARGUMENT;
        }
        let n = newer.len().min(*count as usize);
        for (i, &(ts, v)) in newer.iter().take(n).enumerate() {
            let mut value = SampleValue { ull_val: 0 };
            value.ui_val = v;
            *samples.add(i) = Sample {
                time_stamp: ts,
                sample_value: value,
            };
        }
        *count = n as c_uint;
        SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timeline_ring_is_aligned_capped_and_averaged() {
        // 97 % from 10.000 s, idle from 10.250 s; period 100 ms; now 11.000 s.
        let d = json!({ "utilization_timeline": {
            "points": [[10_000, 97], [10_250, 0]], "period_us": 100_000, "capacity": 5 } });
        let r = ring(&d, 11_000_000).unwrap();
        let ts: Vec<u64> = r.iter().map(|s| s.0).collect();
        assert_eq!(
            ts,
            [10_600_000, 10_700_000, 10_800_000, 10_900_000, 11_000_000]
        );
        assert!(r.iter().all(|s| s.1 == 0));
        let r = ring(&d, 10_300_000).unwrap();
        // (10.2, 10.3]: half at 97, half at 0.
        assert_eq!(r, [(10_100_000, 97), (10_200_000, 97), (10_300_000, 48)]);
    }

    #[test]
    fn listed_ring_is_sorted_and_none_is_unsupported() {
        let d = json!({ "utilization_samples": [[20, 0], [10, 55]] });
        assert_eq!(ring(&d, 0).unwrap(), [(10, 55), (20, 0)]);
        assert_eq!(ring(&json!({}), 0), None);
        assert_eq!(ring(&json!({ "utilization_samples": [[1, -3]] }), 0), None);
    }
}
