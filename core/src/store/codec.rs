//! `SampleRow` ↔ the packed integer columns, and the delta chain (see `schema`).

use super::schema::{Scale, NVALUES, VALUE_COLUMNS};
use super::{SampleKind, SampleRow, Series};
use crate::sample::{Pressure, UsageReading};

pub(crate) type Values = [Option<i64>; NVALUES];

/// Every stored quantity is non-negative; clamping into [0, i64::MAX] keeps deltas and the
/// view's running SUM free of overflow.
fn from_u64(v: Option<u64>) -> Option<i64> {
    v.map(|v| v.min(i64::MAX as u64) as i64)
}

fn kib(v: Option<u64>) -> Option<i64> {
    v.map(|b| (b / 1024 + u64::from(b % 1024 >= 512)) as i64)
}

fn fixed(v: Option<f64>, per_unit: f64) -> Option<i64> {
    // A NaN or infinity is not a reading.
    v.filter(|x| x.is_finite())
        .map(|x| (x * per_unit).round().clamp(0.0, i64::MAX as f64) as i64)
}

pub(crate) fn encode(r: &SampleRow) -> Values {
    let u = &r.usage;
    let p = &u.pressure;
    let v = [
        from_u64(u.cpu_usage_usec),
        from_u64(u.cpu_user_usec),
        from_u64(u.cpu_system_usec),
        kib(u.memory_usage_bytes),
        kib(u.memory_cache_bytes),
        kib(u.memory_working_set_bytes),
        kib(u.memory_lifetime_peak_bytes),
        kib(u.memory_limit_bytes),
        from_u64(u.memory_oom_kills),
        from_u64(u.memory_limit_hits),
        from_u64(u.memory_major_faults),
        from_u64(u.io_read_bytes),
        from_u64(u.io_write_bytes),
        from_u64(u.processes),
        from_u64(u.threads),
        fixed(p.cpu_some_avg10, 100.0),
        fixed(p.memory_some_avg10, 100.0),
        fixed(p.memory_full_avg10, 100.0),
        fixed(p.io_some_avg10, 100.0),
        fixed(p.io_full_avg10, 100.0),
        r.cores_allocated.map(i64::from),
        kib(r.memory_working_set_max_bytes),
        fixed(r.effective_cores_max, 1000.0),
        from_u64(r.sampler_cpu_usec),
        from_u64(r.sampler_bytes_written),
    ];
    debug_assert!(VALUE_COLUMNS[22].2 == Scale::Milli && VALUE_COLUMNS[3].2 == Scale::Kib);
    v
}

fn to_u64(v: Option<i64>, scale: Scale) -> Option<u64> {
    let v = u64::try_from(v?).ok()?;
    Some(match scale {
        Scale::Kib => v.saturating_mul(1024),
        _ => v,
    })
}

fn to_f64(v: Option<i64>, scale: Scale) -> Option<f64> {
    let v = v? as f64;
    Some(match scale {
        Scale::Centi => v / 100.0,
        Scale::Milli => v / 1000.0,
        _ => v,
    })
}

pub(crate) fn decode(t_unix_ms: i64, series: Series, kind: SampleKind, v: &Values) -> SampleRow {
    let s = |i: usize| VALUE_COLUMNS[i].2;
    let u = |i: usize| to_u64(v[i], s(i));
    let f = |i: usize| to_f64(v[i], s(i));
    SampleRow {
        t_unix_ms,
        series,
        kind,
        usage: UsageReading {
            cpu_usage_usec: u(0),
            cpu_user_usec: u(1),
            cpu_system_usec: u(2),
            memory_usage_bytes: u(3),
            memory_cache_bytes: u(4),
            memory_working_set_bytes: u(5),
            memory_lifetime_peak_bytes: u(6),
            memory_limit_bytes: u(7),
            memory_oom_kills: u(8),
            memory_limit_hits: u(9),
            memory_major_faults: u(10),
            io_read_bytes: u(11),
            io_write_bytes: u(12),
            processes: u(13),
            threads: u(14),
            pressure: Pressure {
                cpu_some_avg10: f(15),
                memory_some_avg10: f(16),
                memory_full_avg10: f(17),
                io_some_avg10: f(18),
                io_full_avg10: f(19),
            },
        },
        cores_allocated: v[20].and_then(|c| u32::try_from(c).ok()),
        memory_working_set_max_bytes: u(21),
        effective_cores_max: f(22),
        sampler_cpu_usec: u(23),
        sampler_bytes_written: u(24),
    }
}

/// The last non-NULL absolute value of each column of one series (0 before the first).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Chain([i64; NVALUES]);

impl Chain {
    /// Absolute values → stored differences; advances the chain.
    pub(crate) fn delta(&mut self, abs: &Values) -> Values {
        let mut out = [None; NVALUES];
        for i in 0..NVALUES {
            if let Some(a) = abs[i] {
                out[i] = Some(a - self.0[i]); // both in [0, i64::MAX]: cannot overflow
                self.0[i] = a;
            }
        }
        out
    }

    /// Stored differences → absolute values; advances the chain.
    pub(crate) fn undelta(&mut self, stored: &Values) -> Values {
        let mut out = [None; NVALUES];
        for i in 0..NVALUES {
            if let Some(d) = stored[i] {
                self.0[i] = self.0[i].wrapping_add(d);
                out[i] = Some(self.0[i]);
            }
        }
        out
    }

    pub(crate) fn from_sums(sums: Values) -> Chain {
        Chain(sums.map(|s| s.unwrap_or(0)))
    }
}
