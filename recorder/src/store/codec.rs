//! `SampleRow` ↔ the packed integer columns, and the delta chains of schema 1 ([`Chain`])
//! and schema 2 ([`State2`]) (see `schema`).

use super::schema::{Enc, Scale, ENC, NVALUES, VALUE_COLUMNS};
use crate::model::{SampleKind, SampleRow, Series};
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

fn ms(v: Option<u64>) -> Option<i64> {
    v.map(|us| (us / 1000 + u64::from(us % 1000 >= 500)) as i64)
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
        ms(p.cpu_some_total_usec),
        ms(p.cpu_full_total_usec),
        ms(p.memory_some_total_usec),
        ms(p.memory_full_total_usec),
        ms(p.io_some_total_usec),
        ms(p.io_full_total_usec),
    ];
    debug_assert!(VALUE_COLUMNS[22].2 == Scale::Milli && VALUE_COLUMNS[3].2 == Scale::Kib);
    v
}

fn to_u64(v: Option<i64>, scale: Scale) -> Option<u64> {
    let v = u64::try_from(v?).ok()?;
    Some(match scale {
        Scale::Kib => v.saturating_mul(1024),
        Scale::UsecAsMs => v.saturating_mul(1000),
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
                cpu_some_total_usec: u(25),
                cpu_full_total_usec: u(26),
                memory_some_total_usec: u(27),
                memory_full_total_usec: u(28),
                io_some_total_usec: u(29),
                io_full_total_usec: u(30),
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

/// Schema 2: the state of one series after its stored rows (see `schema::Enc`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct State2 {
    /// `t_ms` of the previous row (ms since `meta.started_unix_ms`; 0 before the first).
    t_ms: i64,
    /// The previous row's time step (`t_ms` is a `Delta2` column).
    dt_ms: i64,
    /// Last non-NULL value of each `Delta`, `Delta2` and `Rare` column (0 before the first).
    last: [i64; NVALUES],
    /// The difference between the last two non-NULL values of each `Delta2` column.
    last_d: [i64; NVALUES],
    /// Whether each `Rare` column was readable in the previous row.
    readable: [bool; NVALUES],
    /// Whether the series has a row: its first row always gets a `samples_rare` row.
    started: bool,
}

/// One row as schema 2 stores it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Packed2 {
    /// `samples_packed.t_ms`: the change of the time step (`Delta2`).
    pub t_ms: i64,
    /// `Delta`/`Delta2`/`Resid` columns for `samples_packed`, `Rare` ones for `samples_rare`.
    pub values: Values,
    /// Whether the row needs its `samples_rare` row.
    pub rare: bool,
}

/// The base a `Resid` column is stored against, if its operands are readable.
fn resid_base(e: Enc, v: &Values) -> Option<i64> {
    match e {
        Enc::Resid { plus, minus } => {
            let p = v[plus]?;
            match minus {
                Some(m) => Some(p.wrapping_sub(v[m]?)),
                None => Some(p),
            }
        }
        _ => None,
    }
}

/// Sums over a series' stored rows that give its [`State2`]: for `t_ms` and each `Delta2`
/// column the sum of the stored column (the last step) and the sum of its running sum (the
/// last value); for each `Delta` and `Rare` column the sum of the stored column.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sums2 {
    pub rows: i64,
    pub t1: i64,
    pub t2: i64,
    pub first: Values,
    pub second: Values,
}

impl State2 {
    pub(crate) fn new() -> State2 {
        State2 {
            t_ms: 0,
            dt_ms: 0,
            last: [0; NVALUES],
            last_d: [0; NVALUES],
            readable: [false; NVALUES],
            started: false,
        }
    }

    /// The state after the rows summed up in `s`; `last_rare` = the latest `samples_rare`
    /// row's columns.
    pub(crate) fn seeded(s: &Sums2, last_rare: Option<&Values>) -> State2 {
        let mut st = State2::new();
        st.dt_ms = s.t1;
        st.t_ms = s.t2;
        st.started = s.rows > 0;
        for i in 0..NVALUES {
            if ENC[i] == Enc::Delta2 {
                st.last_d[i] = s.first[i].unwrap_or(0);
                st.last[i] = s.second[i].unwrap_or(0);
            } else {
                st.last[i] = s.first[i].unwrap_or(0);
            }
            st.readable[i] = last_rare.is_some_and(|r| r[i].is_some());
        }
        st
    }

    /// The time of the latest row (ms since `meta.started_unix_ms`).
    pub(crate) fn t_ms(&self) -> i64 {
        self.t_ms
    }

    /// A row's time and absolute values → what is stored; advances the state.
    pub(crate) fn encode(&mut self, t_ms: i64, kind: i64, abs: &Values) -> Packed2 {
        let dt = t_ms.wrapping_sub(self.t_ms);
        let t_stored = dt.wrapping_sub(self.dt_ms);
        self.t_ms = t_ms;
        self.dt_ms = dt;
        let mut rare = kind != 0 || !self.started;
        self.started = true;
        let mut out = [None; NVALUES];
        for i in 0..NVALUES {
            match ENC[i] {
                Enc::Delta | Enc::Rare => {
                    if let Some(a) = abs[i] {
                        out[i] = Some(a - self.last[i]); // both in [0, i64::MAX]
                        self.last[i] = a;
                    }
                    if ENC[i] == Enc::Rare {
                        rare |=
                            out[i].is_some_and(|d| d != 0) || abs[i].is_some() != self.readable[i];
                        self.readable[i] = abs[i].is_some();
                    }
                }
                Enc::Delta2 => {
                    if let Some(a) = abs[i] {
                        let d = a - self.last[i];
                        out[i] = Some(d.wrapping_sub(self.last_d[i]));
                        self.last_d[i] = d;
                        self.last[i] = a;
                    }
                }
                e @ Enc::Resid { .. } => {
                    out[i] = abs[i].map(|a| resid_base(e, abs).map_or(a, |b| a.wrapping_sub(b)));
                }
            }
        }
        Packed2 {
            t_ms: t_stored,
            values: out,
            rare,
        }
    }

    /// A stored row → (t_ms, absolute values); advances the state. Without a
    /// `samples_rare` row (`rare` false) its columns keep their previous state.
    pub(crate) fn decode(&mut self, t_stored: i64, stored: &Values, rare: bool) -> (i64, Values) {
        self.dt_ms = self.dt_ms.wrapping_add(t_stored);
        self.t_ms = self.t_ms.wrapping_add(self.dt_ms);
        self.started = true;
        let mut out = [None; NVALUES];
        for i in 0..NVALUES {
            match ENC[i] {
                Enc::Delta => {
                    if let Some(d) = stored[i] {
                        self.last[i] = self.last[i].wrapping_add(d);
                        out[i] = Some(self.last[i]);
                    }
                }
                Enc::Delta2 => {
                    if let Some(x) = stored[i] {
                        self.last_d[i] = self.last_d[i].wrapping_add(x);
                        self.last[i] = self.last[i].wrapping_add(self.last_d[i]);
                        out[i] = Some(self.last[i]);
                    }
                }
                Enc::Rare if rare => {
                    if let Some(d) = stored[i] {
                        self.last[i] = self.last[i].wrapping_add(d);
                    }
                    self.readable[i] = stored[i].is_some();
                    out[i] = stored[i].map(|_| self.last[i]);
                }
                Enc::Rare => out[i] = self.readable[i].then_some(self.last[i]),
                Enc::Resid { .. } => {}
            }
        }
        // In column order: a residual's operands come before it (ws before its maximum).
        for i in 0..NVALUES {
            if let e @ Enc::Resid { .. } = ENC[i] {
                out[i] = stored[i].map(|r| resid_base(e, &out).map_or(r, |b| r.wrapping_add(b)));
            }
        }
        (self.t_ms, out)
    }

    /// Undoes [`decode`](Self::decode) of the latest row: the state before it, except which
    /// `Rare` columns are readable (the caller sets those with [`set_readable`]).
    pub(crate) fn undo(&mut self, t_stored: i64, stored: &Values, rare: bool) {
        self.t_ms = self.t_ms.wrapping_sub(self.dt_ms);
        self.dt_ms = self.dt_ms.wrapping_sub(t_stored);
        for i in 0..NVALUES {
            match (ENC[i], stored[i]) {
                (Enc::Delta, Some(d)) => self.last[i] = self.last[i].wrapping_sub(d),
                (Enc::Rare, Some(d)) if rare => self.last[i] = self.last[i].wrapping_sub(d),
                (Enc::Delta2, Some(x)) => {
                    self.last[i] = self.last[i].wrapping_sub(self.last_d[i]);
                    self.last_d[i] = self.last_d[i].wrapping_sub(x);
                }
                _ => {}
            }
        }
    }

    /// Which `Rare` columns are readable, from the latest `samples_rare` row (`None`: none).
    pub(crate) fn set_readable(&mut self, last_rare: Option<&Values>) {
        for i in 0..NVALUES {
            self.readable[i] = last_rare.is_some_and(|r| r[i].is_some());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn residual_operands_come_first() {
        for (i, e) in ENC.iter().enumerate() {
            if let Enc::Resid { plus, minus } = *e {
                assert!(plus < i && minus.is_none_or(|m| m < i));
            }
        }
    }

    #[test]
    fn state2_round_trips() {
        let rows: Vec<Values> = vec![
            [Some(5); NVALUES],
            [None; NVALUES],
            [Some(7); NVALUES],
            {
                let mut v = [Some(i64::MAX); NVALUES];
                v[0] = Some(0);
                v[7] = None;
                v
            },
            [Some(0); NVALUES],
            [Some(0); NVALUES],
        ];
        let mut w = State2::new();
        let mut r = State2::new();
        for (n, abs) in rows.iter().enumerate() {
            let p = w.encode(n as i64 * 5000, 0, abs);
            assert_eq!(r.decode(p.t_ms, &p.values, p.rare), (n as i64 * 5000, *abs));
        }
    }
}
