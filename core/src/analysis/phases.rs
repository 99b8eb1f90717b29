//! The job's phases, as it marked them (`slurmwatch mark`, see `recording::marks`): each
//! phase's duration, CPU time, GPU time, GPU energy and peak working set. Pure: the report
//! hands it the file's `mark` events, one series' rows and the cards' rows.
//!
//! The recorder stores a row of the counters at the instant of each mark, so a phase's CPU
//! and energy are differences of two exact readings; where a boundary has no row of its own
//! (a mark from another step than the series read) the value is interpolated between the two
//! rows around it and the phase says `exact: false`.

use serde::{Deserialize, Serialize};

use crate::model::SampleRow;
use crate::store::{Event, GpuRow};

/// The `events.kind` of a mark.
pub const MARK_EVENT: &str = "mark";

/// One mark: when, which step took it, and its label.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mark {
    pub t_unix_ms: i64,
    pub step: Option<String>,
    pub label: String,
}

/// The marks among a file's events, in time order.
pub fn marks(events: &[Event]) -> Vec<Mark> {
    let mut m: Vec<Mark> = events
        .iter()
        .filter(|e| e.kind == MARK_EVENT)
        .map(|e| Mark {
            t_unix_ms: e.t_unix_ms,
            step: e.step.clone(),
            label: e.detail.clone(),
        })
        .collect();
    m.sort_by_key(|m| m.t_unix_ms);
    m
}

/// One phase: from its mark (or the recording's start) to the next mark (or its end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// The mark's label; the stretch before the first mark is `(before the first mark)`.
    pub label: String,
    pub started_unix_ms: i64,
    pub ended_unix_ms: i64,
    pub seconds: f64,
    /// CPU time of the series read (the job, or the marking step), seconds.
    pub cpu_seconds: Option<f64>,
    /// Cards recorded × the phase's duration, seconds.
    pub gpu_seconds: Option<f64>,
    /// Energy the cards drew during the phase, joules (every card's counter read at both
    /// ends; unknown if any one was not).
    pub gpu_energy_joules: Option<f64>,
    /// Largest working set seen during the phase (the fast reads' maxima included).
    pub peak_working_set_bytes: Option<u64>,
    /// Both ends are readings taken at the boundary; `false`: interpolated.
    pub exact: bool,
    /// The cards' mean utilization over the phase's rows (NVML's "busy": a kernel ran).
    #[serde(default)]
    pub gpu_busy_percent: Option<f64>,
    /// The job's own rate over the phase, from its log (`report::throughput`), in the
    /// throughput's unit; set once the log is read.
    #[serde(default)]
    pub rate_per_second: Option<f64>,
}

/// Label of the stretch before the first mark.
pub const BEFORE_FIRST_MARK: &str = "(before the first mark)";

/// The phases that begin at a mark, with their index in `phases`: all but the stretch before
/// the first mark (the first phase, when [`phases`] labelled it [`BEFORE_FIRST_MARK`]).
pub fn marked(phases: &[Phase]) -> impl Iterator<Item = (usize, &Phase)> {
    phases
        .iter()
        .enumerate()
        .filter(|(i, p)| *i > 0 || p.label != BEFORE_FIRST_MARK)
}

/// The phases `marks` cut the recording `rows` (one series, in time order) into. `cards`:
/// each recorded card's rows. Empty when there is no mark or no row.
pub fn phases(marks: &[Mark], rows: &[SampleRow], cards: &[&[GpuRow]]) -> Vec<Phase> {
    let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
        return Vec::new();
    };
    let inside: Vec<&Mark> = marks
        .iter()
        .filter(|m| m.t_unix_ms >= first.t_unix_ms && m.t_unix_ms <= last.t_unix_ms)
        .collect();
    if inside.is_empty() {
        return Vec::new();
    }
    let mut bounds: Vec<(i64, &str)> = Vec::new();
    if inside[0].t_unix_ms > first.t_unix_ms {
        bounds.push((first.t_unix_ms, BEFORE_FIRST_MARK));
    }
    bounds.extend(inside.iter().map(|m| (m.t_unix_ms, m.label.as_str())));
    let end = last.t_unix_ms;
    let mut out = Vec::new();
    for (i, &(start, label)) in bounds.iter().enumerate() {
        let stop = bounds.get(i + 1).map_or(end, |b| b.0);
        out.push(phase(label, (start, stop), rows, cards));
    }
    out
}

fn phase(label: &str, (start, stop): (i64, i64), rows: &[SampleRow], cards: &[&[GpuRow]]) -> Phase {
    let cpu = |t| at(rows, t, |r| r.usage.cpu_usage_usec);
    let (cpu_a, cpu_b) = (cpu(start), cpu(stop));
    let cpu_seconds = cpu_a
        .zip(cpu_b)
        .map(|((a, _), (b, _))| (b - a).max(0.0) / 1e6);
    let energy = |t| -> Option<(f64, bool)> {
        cards.iter().try_fold((0.0, true), |(sum, exact), card| {
            let (v, e) = at_gpu(card, t)?;
            Some((sum + v, exact && e))
        })
    };
    let gpu_energy_joules = (!cards.is_empty())
        .then(|| energy(start).zip(energy(stop)))
        .flatten()
        .map(|((a, _), (b, _))| (b - a).max(0.0) / 1e3);
    let seconds = (stop - start) as f64 / 1e3;
    let peak = rows
        .iter()
        .filter(|r| r.t_unix_ms > start && r.t_unix_ms <= stop)
        .filter_map(|r| {
            let now = r.usage.memory_working_set_bytes;
            match (r.memory_working_set_max_bytes, now) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            }
        })
        .max();
    let exact = [cpu_a, cpu_b].iter().all(|v| v.is_none_or(|(_, e)| e));
    Phase {
        label: label.to_string(),
        started_unix_ms: start,
        ended_unix_ms: stop,
        seconds,
        cpu_seconds,
        gpu_seconds: (!cards.is_empty()).then_some(cards.len() as f64 * seconds),
        gpu_energy_joules,
        peak_working_set_bytes: peak,
        exact,
        gpu_busy_percent: busy_percent(cards, (start, stop)),
        rate_per_second: None,
    }
}

/// The mean of every card's readable utilization over rows in `(start, stop]`.
fn busy_percent(cards: &[&[GpuRow]], (start, stop): (i64, i64)) -> Option<f64> {
    let readings: Vec<f64> = cards
        .iter()
        .flat_map(|c| c.iter())
        .filter(|r| r.t_unix_ms > start && r.t_unix_ms <= stop)
        .filter_map(|r| {
            r.sample
                .utilization_percent
                .as_ref()
                .ok()
                .map(|u| f64::from(*u))
        })
        .collect();
    (!readings.is_empty()).then(|| readings.iter().sum::<f64>() / readings.len() as f64)
}

/// A cumulative value at `t`: the row taken then (exact), else interpolated between the
/// readable rows around it. `None` outside the rows or where the value is unreadable.
fn at(
    rows: &[SampleRow],
    t: i64,
    value: impl Fn(&SampleRow) -> Option<u64>,
) -> Option<(f64, bool)> {
    let points: Vec<(i64, u64)> = rows
        .iter()
        .filter_map(|r| Some((r.t_unix_ms, value(r)?)))
        .collect();
    interpolate(&points, t)
}

fn at_gpu(rows: &[GpuRow], t: i64) -> Option<(f64, bool)> {
    let points: Vec<(i64, u64)> = rows
        .iter()
        .filter_map(|r| Some((r.t_unix_ms, *r.sample.energy_millijoules.as_ref().ok()?)))
        .collect();
    interpolate(&points, t)
}

fn interpolate(points: &[(i64, u64)], t: i64) -> Option<(f64, bool)> {
    let i = points.partition_point(|p| p.0 < t);
    let after = points.get(i)?;
    if after.0 == t {
        return Some((after.1 as f64, true));
    }
    let before = points.get(i.checked_sub(1)?)?;
    let share = (t - before.0) as f64 / (after.0 - before.0) as f64;
    Some((
        before.1 as f64 + share * (after.1 as f64 - before.1 as f64),
        false,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SampleKind, Series};

    fn row(t: i64, cpu_usec: u64, ws: u64) -> SampleRow {
        let mut r = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some(cpu_usec);
        r.usage.memory_working_set_bytes = Some(ws);
        r
    }

    fn mark(t: i64, label: &str) -> Mark {
        Mark {
            t_unix_ms: t,
            step: Some("batch".into()),
            label: label.into(),
        }
    }

    #[test]
    fn marks_come_from_the_mark_events_in_time_order() {
        let e = |t, kind: &str, detail: &str| Event {
            t_unix_ms: t,
            step: Some("batch".into()),
            kind: kind.into(),
            detail: detail.into(),
        };
        let events = [
            e(30, "mark", "b"),
            e(10, "step_start", ""),
            e(20, "mark", "a"),
        ];
        let m = marks(&events);
        assert_eq!(
            m.iter().map(|m| m.label.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
    }

    #[test]
    fn each_phase_is_the_difference_of_the_readings_at_its_marks() {
        // Rows every second; marks at 2 s and 5 s with their own rows; 1 core busy in the
        // second phase, 2 in the third.
        let rows = vec![
            row(0, 0, 100),
            row(1000, 10_000, 100),
            row(2000, 20_000, 150),
            row(3000, 1_020_000, 900),
            row(4000, 2_020_000, 100),
            row(5000, 3_020_000, 100),
            row(6000, 5_020_000, 400),
            row(7000, 7_020_000, 100),
        ];
        let p = phases(&[mark(2000, "load"), mark(5000, "train")], &rows, &[]);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].label, BEFORE_FIRST_MARK);
        assert_eq!((p[0].seconds, p[0].cpu_seconds), (2.0, Some(0.02)));
        assert_eq!((p[1].label.as_str(), p[1].cpu_seconds), ("load", Some(3.0)));
        assert_eq!(p[1].peak_working_set_bytes, Some(900));
        assert_eq!((p[2].seconds, p[2].cpu_seconds), (2.0, Some(4.0)));
        assert!(p.iter().all(|p| p.exact && p.gpu_seconds.is_none()));
    }

    #[test]
    fn a_boundary_without_its_own_row_is_interpolated_and_said() {
        let rows = vec![
            row(0, 0, 1),
            row(2000, 2_000_000, 1),
            row(4000, 4_000_000, 1),
        ];
        let p = phases(&[mark(0, "all"), mark(1000, "half")], &rows, &[]);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].cpu_seconds, Some(1.0));
        assert!(!p[0].exact && !p[1].exact);
    }

    #[test]
    fn no_mark_no_phase_and_marks_outside_the_rows_are_ignored() {
        let rows = vec![row(1000, 0, 1), row(2000, 1, 1)];
        assert!(phases(&[], &rows, &[]).is_empty());
        assert!(phases(&[mark(5000, "late")], &rows, &[]).is_empty());
        assert!(phases(&[mark(1500, "x")], &[], &[]).is_empty());
    }

    #[test]
    fn energy_is_summed_over_cards_and_unknown_if_one_card_was_not_read() {
        use crate::sample::{GpuError, GpuSample};
        let g = |t, mj: Option<u64>| {
            let mut s = GpuSample::all_failed(GpuError::NotSupported);
            s.energy_millijoules = mj.ok_or(GpuError::NotSupported);
            GpuRow {
                t_unix_ms: t,
                gpu: 1,
                sample: s,
                totals: Default::default(),
            }
        };
        let rows = vec![row(0, 0, 1), row(1000, 0, 1), row(3000, 0, 1)];
        let a = vec![g(0, Some(0)), g(1000, Some(5_000)), g(3000, Some(65_000))];
        let b = vec![g(0, Some(0)), g(1000, Some(1_000)), g(3000, Some(21_000))];
        let p = phases(&[mark(1000, "x")], &rows, &[&a, &b]);
        assert_eq!(p[1].gpu_energy_joules, Some(80.0));
        assert_eq!(p[1].gpu_seconds, Some(4.0));
        let blind = vec![g(0, None), g(1000, None), g(3000, None)];
        let p = phases(&[mark(1000, "x")], &rows, &[&a, &blind]);
        assert_eq!(p[1].gpu_energy_joules, None);
    }
}
