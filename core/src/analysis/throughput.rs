//! How fast the job's own work went, in wall-clock time: progress readings from its log
//! (`analysis::progress`) placed in time by the size its output file had at each recorded
//! row, turned into a throughput series, and the stretches where it fell.
//!
//! Placement: log lines carry no time of their own, but the recorder notes the output
//! file's size at every stored row (by `stat` only). A reading ending at byte `o` was written
//! after the last row that saw the file shorter than `o` and by the first row that saw it at
//! least that long: that interval bounds its time exactly, and within it the time is
//! interpolated by bytes (a bar redraws at a steady pace). Each placed reading keeps its
//! bounds, so every figure derived from it can say how exact it is.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::progress::Tool;

/// The output file's size at a recorded row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeAt {
    pub t_unix_ms: i64,
    pub bytes: u64,
}

/// When a byte of the log was written: between `earliest` and `latest` (both rows' times;
/// `earliest` unknown before the first row), `estimate` interpolated by bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Placed {
    pub estimate_unix_ms: i64,
    pub earliest_unix_ms: Option<i64>,
    pub latest_unix_ms: i64,
}

/// The sizes a file had, from its last truncation on (a size that drops means it was
/// truncated or replaced: offsets before that refer to another content).
pub fn since_last_truncation(sizes: &[SizeAt]) -> &[SizeAt] {
    let cut = sizes
        .windows(2)
        .rposition(|w| w[1].bytes < w[0].bytes)
        .map_or(0, |i| i + 1);
    &sizes[cut..]
}

/// When the byte just before `end_offset` was written; `None` if no row saw it.
pub fn place(sizes: &[SizeAt], end_offset: u64) -> Option<Placed> {
    let i = sizes.partition_point(|s| s.bytes < end_offset);
    let after = sizes.get(i)?;
    let Some(before) = i.checked_sub(1).map(|j| sizes[j]) else {
        return Some(Placed {
            estimate_unix_ms: after.t_unix_ms,
            earliest_unix_ms: None,
            latest_unix_ms: after.t_unix_ms,
        });
    };
    let share = (end_offset - before.bytes) as f64 / (after.bytes - before.bytes) as f64;
    let span = (after.t_unix_ms - before.t_unix_ms) as f64;
    Some(Placed {
        estimate_unix_ms: before.t_unix_ms + (share * span).round() as i64,
        earliest_unix_ms: Some(before.t_unix_ms),
        latest_unix_ms: after.t_unix_ms,
    })
}

/// One progress count at a place in the log: `bar` tells bars apart (a new bar, or a
/// count that went back, starts another), `done` is the bar's count.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Count {
    pub end_offset: u64,
    pub bar: u32,
    pub done: f64,
}

/// The work's rate over one stretch of wall time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatePoint {
    pub from_unix_ms: i64,
    pub to_unix_ms: i64,
    /// Units of the bar (iterations, steps…) per second.
    pub per_second: f64,
}

/// The throughput series: the counts placed in time, then the rate between the last counts
/// of consecutive `bin_ms` bins of the same bar (a bin wide enough that placement's error, at
/// most one row interval, is a small part of it).
pub fn series(counts: &[Count], sizes: &[SizeAt], bin_ms: i64) -> Vec<RatePoint> {
    let sizes = since_last_truncation(sizes);
    let bin_ms = bin_ms.max(1);
    // The last count of each (bar, bin), in log order.
    let mut ends: Vec<(u32, i64, i64, f64)> = Vec::new();
    for c in counts {
        let Some(p) = place(sizes, c.end_offset) else {
            continue;
        };
        let bin = p.estimate_unix_ms.div_euclid(bin_ms);
        match ends.last_mut() {
            Some(last) if last.0 == c.bar && last.1 == bin => {
                (last.2, last.3) = (p.estimate_unix_ms, c.done)
            }
            _ => ends.push((c.bar, bin, p.estimate_unix_ms, c.done)),
        }
    }
    ends.windows(2)
        .filter(|w| w[0].0 == w[1].0 && w[1].2 > w[0].2 && w[1].3 >= w[0].3)
        .map(|w| RatePoint {
            from_unix_ms: w[0].2,
            to_unix_ms: w[1].2,
            per_second: (w[1].3 - w[0].3) / ((w[1].2 - w[0].2) as f64 / 1e3),
        })
        .collect()
}

/// A stretch where the work went markedly slower than its usual pace.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slowdown {
    pub from_unix_ms: i64,
    pub to_unix_ms: i64,
    /// The usual rate (the median over the series) and the rate during the stretch.
    pub usual_per_second: f64,
    pub during_per_second: f64,
    /// Wall seconds lost: the stretch's duration less the time its work would have taken at
    /// the usual rate.
    pub seconds_lost: f64,
}

/// A rate below this share of the usual one is a slowdown.
pub const SLOW_SHARE: f64 = 0.6;
/// A slowdown lasts at least this long (shorter dips are a bar's jitter).
pub const SLOW_MIN_MS: i64 = 3000;

/// The usual rate: the median over the series (what a slowdown is measured against).
pub fn usual_rate(points: &[RatePoint]) -> Option<f64> {
    let rates: Vec<f64> = points.iter().map(|p| p.per_second).collect();
    crate::stats::median(&rates)
}

/// The stretches of `points` (in time order) below [`SLOW_SHARE`] of the median rate for at
/// least [`SLOW_MIN_MS`].
pub fn slowdowns(points: &[RatePoint]) -> Vec<Slowdown> {
    let Some(usual) = usual_rate(points) else {
        return Vec::new();
    };
    if usual <= 0.0 {
        return Vec::new();
    }
    let slow = |p: &RatePoint| p.per_second < SLOW_SHARE * usual;
    let mut out = Vec::new();
    let mut i = 0;
    while i < points.len() {
        if !slow(&points[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < points.len() && slow(&points[i]) {
            i += 1;
        }
        let run = &points[start..i];
        let (from, to) = (run[0].from_unix_ms, run[run.len() - 1].to_unix_ms);
        if to - from < SLOW_MIN_MS {
            continue;
        }
        let secs = |p: &RatePoint| (p.to_unix_ms - p.from_unix_ms) as f64 / 1e3;
        let wall: f64 = run.iter().map(secs).sum();
        let work: f64 = run.iter().map(|p| p.per_second * secs(p)).sum();
        out.push(Slowdown {
            from_unix_ms: from,
            to_unix_ms: to,
            usual_per_second: usual,
            during_per_second: work / wall,
            seconds_lost: (wall - work / usual).max(0.0),
        });
    }
    out
}

/// How fast the job's own work went: its log's progress placed in time, each slowdown
/// beside what held its cards (the report's `throughput`, and the live view's so far).
/// Owned text throughout: a hop's snapshot carries it as JSON and reads it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    /// `stdout`, `stderr`: the file the progress lines came from.
    pub stream: Cow<'static, str>,
    pub tool: Tool,
    /// The unit of the rates: the bar's count per second (`it/s`, `steps/s`…).
    pub unit: Cow<'static, str>,
    pub points: Vec<RatePoint>,
    pub slowdowns: Vec<SlowdownSeen>,
    /// How exactly a reading is placed, s: half the recording's interval and the tolerance of
    /// the recorder's notes (`recording::output`).
    pub placed_within_seconds: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlowdownSeen {
    #[serde(flatten)]
    pub slowdown: Slowdown,
    /// What held the job's cards over the same stretch, from their exact counters.
    pub held: Vec<CardHold>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardHold {
    pub card: String,
    pub limiter: Cow<'static, str>,
    pub seconds: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(pairs: &[(i64, u64)]) -> Vec<SizeAt> {
        pairs
            .iter()
            .map(|&(t, b)| SizeAt {
                t_unix_ms: t,
                bytes: b,
            })
            .collect()
    }

    #[test]
    fn a_byte_is_placed_between_the_rows_that_saw_the_file_short_and_long_enough() {
        let s = sizes(&[(1000, 100), (2000, 300), (3000, 300), (4000, 700)]);
        let p = place(&s, 200).unwrap();
        assert_eq!(
            (p.earliest_unix_ms, p.estimate_unix_ms, p.latest_unix_ms),
            (Some(1000), 1500, 2000)
        );
        // Exactly the size a row saw: written by that row.
        assert_eq!(place(&s, 300).unwrap().latest_unix_ms, 2000);
        // Between rows 3000 and 4000: the file did not grow from 2000 to 3000.
        let p = place(&s, 500).unwrap();
        assert_eq!((p.earliest_unix_ms, p.estimate_unix_ms), (Some(3000), 3500));
        // Before the first row: only its latest time is known.
        let p = place(&s, 50).unwrap();
        assert_eq!((p.earliest_unix_ms, p.latest_unix_ms), (None, 1000));
        // Past the last row: written after it, not placed.
        assert_eq!(place(&s, 701), None);
    }

    #[test]
    fn a_truncated_file_counts_from_its_truncation() {
        let s = sizes(&[(1000, 500), (2000, 900), (3000, 10), (4000, 400)]);
        let kept = since_last_truncation(&s);
        assert_eq!(kept[0].t_unix_ms, 3000);
    }

    /// A bar at 10 it/s that runs at a quarter of that from 20 s to 40 s, redrawn ten times
    /// a second, with 1-s rows noting the file's size: the slowdown is found within the
    /// placement's error, and the time lost (15 s) within 10 %.
    #[test]
    fn a_scripted_slowdown_is_placed_and_its_loss_estimated() {
        let t0 = 1_000_000i64;
        let mut counts = Vec::new();
        let mut size_at_ms = Vec::new();
        let (mut done, mut bytes) = (0.0f64, 0u64);
        for tenth in 0..600i64 {
            let t = t0 + tenth * 100;
            let slow = (200..400).contains(&tenth);
            done += if slow { 0.25 } else { 1.0 };
            bytes += 80; // one redraw of the bar
            counts.push(Count {
                end_offset: bytes,
                bar: 0,
                done: done.floor(),
            });
            size_at_ms.push((t, bytes));
        }
        let rows: Vec<SizeAt> = size_at_ms
            .iter()
            .filter(|(t, _)| (t - t0) % 1000 == 0)
            .map(|&(t, b)| SizeAt {
                t_unix_ms: t,
                bytes: b,
            })
            .collect();
        let points = series(&counts, &rows, 1000);
        let found = slowdowns(&points);
        assert_eq!(found.len(), 1, "{found:?}");
        let s = found[0];
        assert!(((s.from_unix_ms - t0) - 20_000).abs() <= 2000, "{s:?}");
        assert!(((s.to_unix_ms - t0) - 40_000).abs() <= 2000, "{s:?}");
        assert!((s.usual_per_second - 10.0).abs() < 1.0, "{s:?}");
        assert!((s.seconds_lost - 15.0).abs() <= 1.5, "{s:?}");
    }

    #[test]
    fn a_steady_bar_has_no_slowdown_and_a_count_going_back_is_another_bar() {
        let rows = sizes(&[(0, 0), (1000, 100), (2000, 200), (3000, 300), (4000, 400)]);
        let counts: Vec<Count> = (1..=40)
            .map(|i| Count {
                end_offset: i * 10,
                bar: u32::from(i > 20),
                done: (if i > 20 { i - 20 } else { i }) as f64,
            })
            .collect();
        let points = series(&counts, &rows, 1000);
        assert!(
            points.iter().all(|p| (p.per_second - 10.0).abs() < 1e-9),
            "{points:?}"
        );
        assert!(slowdowns(&points).is_empty());
    }
}
