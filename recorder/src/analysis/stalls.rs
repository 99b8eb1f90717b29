//! PSI's stall totals of a job: how much its tasks waited for CPU, memory and I/O between the
//! recording's first and last rows (cgroup v2 `*.pressure` `total=`, kept to the ms). On
//! cgroup v1 and in /proc mode there is no per-job PSI: said, never a 0.

use serde::{Deserialize, Serialize};

use crate::model::SampleRow;
use crate::sample::{Pressure, Source};

/// Seconds in which the job's tasks waited, per resource and kind, between the recording's
/// first and last readable totals. `None`: not readable (never 0 for unknown).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StallSeconds {
    pub cpu_some: Option<f64>,
    pub cpu_full: Option<f64>,
    pub memory_some: Option<f64>,
    pub memory_full: Option<f64>,
    pub io_some: Option<f64>,
    pub io_full: Option<f64>,
}

/// The six totals in [`StallSeconds`]' order, with their names.
pub const STALLS: [(&str, &str); 6] = [
    ("cpu", "some"),
    ("cpu", "full"),
    ("memory", "some"),
    ("memory", "full"),
    ("io", "some"),
    ("io", "full"),
];

/// A reading's six stall totals (µs), in [`STALLS`]' order.
pub fn totals(p: &Pressure) -> [Option<u64>; 6] {
    [
        p.cpu_some_total_usec,
        p.cpu_full_total_usec,
        p.memory_some_total_usec,
        p.memory_full_total_usec,
        p.io_some_total_usec,
        p.io_full_total_usec,
    ]
}

impl StallSeconds {
    /// From the job series (oldest first).
    pub fn from_rows(job: &[SampleRow]) -> StallSeconds {
        let mut out = [None; 6];
        for (k, slot) in out.iter_mut().enumerate() {
            *slot = increase(job.iter().map(|r| totals(&r.usage.pressure)[k]))
                .map(|us| us as f64 / 1e6);
        }
        StallSeconds::from_array(out)
    }

    pub fn to_array(self) -> [Option<f64>; 6] {
        [
            self.cpu_some,
            self.cpu_full,
            self.memory_some,
            self.memory_full,
            self.io_some,
            self.io_full,
        ]
    }

    pub fn from_array(a: [Option<f64>; 6]) -> StallSeconds {
        StallSeconds {
            cpu_some: a[0],
            cpu_full: a[1],
            memory_some: a[2],
            memory_full: a[3],
            io_some: a[4],
            io_full: a[5],
        }
    }

    /// Any total readable at all.
    pub fn any(&self) -> bool {
        self.to_array().iter().any(Option::is_some)
    }

    /// The job's totals over its nodes (`None` for a job with no node). A total is known
    /// only where every node has it: a sum over the nodes that had it (a cgroup v1 node
    /// beside v2 ones) would read low against every node's wall time, so it is unknown.
    pub fn over_nodes<'a>(
        nodes: impl Iterator<Item = Option<&'a StallSeconds>> + Clone,
    ) -> Option<StallSeconds> {
        nodes.clone().next()?;
        Some(StallSeconds::from_array(std::array::from_fn(|k| {
            crate::model::sum_all(nodes.clone().map(|s| s.and_then(|s| s.to_array()[k])))
        })))
    }
}

/// How much a cumulative counter climbed over a series of readings: the sum of its rises
/// between readable values. A drop means a new counter (a re-created cgroup): it counts from
/// 0 again, and what the old one had is kept. `None` with fewer than one readable value.
pub fn increase(values: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    let mut last: Option<u64> = None;
    let mut total: Option<u64> = None;
    for v in values.flatten() {
        let rise = match last {
            Some(l) if v >= l => v - l,
            Some(_) => v,
            None => 0,
        };
        total = Some(total.unwrap_or(0) + rise);
        last = Some(v);
    }
    total
}

/// Why a job's stalls cannot be told, from how it was recorded; `None` when they can be
/// (cgroup v2), or when the totals are simply unreadable there (then said by the caller).
pub fn stalls_unavailable(source: Option<Source>) -> Option<&'static str> {
    match source? {
        Source::CgroupV2 => None,
        Source::CgroupV1 => Some("not available: cgroup v1 keeps no pressure stall information"),
        Source::Proc => {
            Some("not available: without a job cgroup (proctrack/linuxproc) there is no per-job pressure stall information")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SampleKind, Series};

    /// Two v2 nodes sum; a v1 node beside them (no totals) makes the job's total unknown,
    /// not the v2 nodes' alone (which the ledger would divide by three nodes' wall time).
    #[test]
    fn a_job_total_needs_every_node() {
        let v2 = StallSeconds {
            memory_some: Some(3.0),
            cpu_some: Some(1.0),
            ..StallSeconds::default()
        };
        let v2b = StallSeconds {
            memory_some: Some(4.0),
            ..StallSeconds::default()
        };
        let both = StallSeconds::over_nodes([Some(&v2), Some(&v2b)].into_iter()).unwrap();
        assert_eq!(both.memory_some, Some(7.0));
        assert_eq!(both.cpu_some, None, "one node had no cpu total");
        let mixed = StallSeconds::over_nodes([Some(&v2), None, Some(&v2b)].into_iter()).unwrap();
        assert!(!mixed.any(), "{mixed:?}");
        assert_eq!(StallSeconds::over_nodes(std::iter::empty()), None);
    }

    fn row(t: i64, mem_some: Option<u64>) -> SampleRow {
        let mut r = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
        r.usage.pressure.memory_some_total_usec = mem_some;
        r.usage.pressure.cpu_some_total_usec = Some(t as u64 * 10);
        r
    }

    #[test]
    fn a_counter_increase_skips_holes_and_survives_a_new_counter() {
        let v = [None, Some(100), None, Some(250), Some(40), Some(90)];
        // 150 from the first counter, then a new one: its 40 and 50 more.
        assert_eq!(increase(v.into_iter()), Some(240));
        assert_eq!(increase([None, None].into_iter()), None);
        assert_eq!(increase([Some(7)].into_iter()), Some(0));
    }

    #[test]
    fn stalls_from_rows_are_the_totals_difference() {
        let rows = [
            row(0, Some(1_000)),
            row(1_000, None),
            row(2_000, Some(501_000)),
        ];
        let s = StallSeconds::from_rows(&rows);
        assert_eq!(s.memory_some, Some(0.5));
        assert_eq!(s.cpu_some, Some(0.02));
        assert_eq!(s.io_full, None, "unreadable is not 0");
    }
}
