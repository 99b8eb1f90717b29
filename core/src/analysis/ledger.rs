//! Where the allocation went, exactly: differences of the kernel's cumulative counters between
//! the recording's first and last rows (a step's start and end rows are read at its start and
//! end, so a 3-second job and a stall between two periodic rows are counted whole, whatever
//! the interval). Pure: built from the merged summary's figures.
//!
//! - CPU: the cgroup's `usage_usec` against cores allocated × the time between those rows.
//! - Stalls: PSI's `total=` ([`super::stalls`]); "not available" on cgroup v1 and in /proc
//!   mode, never a 0.
//! - GPUs: each card's limiter, no-work and GPM time ([`super::gpu_ledger`]), summed.

use std::collections::BTreeMap;

use serde::Serialize;

pub use super::stalls::{stalls_unavailable, StallSeconds, STALLS};
use super::summary::{CardTime, GpuSummary};
use crate::model::sum_known;
use crate::sample::Source;

/// The whole allocation's ledger, as the report shows it (figures over every recorded node).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Ledger {
    /// Between the recording's first and last rows.
    pub wall_seconds: Option<f64>,
    pub cores_allocated: Option<f64>,
    pub core_seconds_allocated: Option<f64>,
    /// The cgroups' CPU time (`cpu.stat usage_usec`, or cpuacct on v1).
    pub core_seconds_used: Option<f64>,
    /// Allocated and not used (never below 0).
    pub core_seconds_idle: Option<f64>,
    /// Summed over the recorded nodes.
    pub stall_seconds: StallSeconds,
    /// Each stall total as a share of the wall time (of every recorded node's wall time).
    pub stall_share_of_wall: StallSeconds,
    /// Why the stalls are unknown, when they are.
    pub stalls_unavailable: Option<String>,
    /// The cards' time summed over the cards that recorded a ledger: their spans, the time
    /// with no work resident, and each limiter's time (`sample::GPU_LIMITER_NAMES`).
    pub gpu_seconds: Option<f64>,
    pub gpu_no_work_seconds: Option<f64>,
    pub gpu_held_seconds: BTreeMap<String, f64>,
    /// Each card's own ledger.
    pub gpus: Vec<CardLine>,
    /// How each figure was measured.
    pub basis: Vec<String>,
}

/// One card's line of the ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardLine {
    pub label: String,
    pub node: Option<String>,
    #[serde(flatten)]
    pub time: CardTime,
}

/// The cards' lines, and their sums (`None`/empty where no card had the figure).
fn card_lines(
    gpus: &[GpuSummary],
) -> (
    Vec<CardLine>,
    Option<f64>,
    Option<f64>,
    BTreeMap<String, f64>,
) {
    let lines: Vec<CardLine> = gpus
        .iter()
        .filter_map(|g| {
            Some(CardLine {
                label: g.label.clone(),
                node: g.node.clone(),
                time: g.ledger.clone()?,
            })
        })
        .collect();
    let span = sum_known(lines.iter().map(|c| Some(c.time.span_seconds)));
    let no_work = sum_known(lines.iter().map(|c| c.time.no_work_seconds));
    let mut held = BTreeMap::new();
    for c in &lines {
        for (k, v) in &c.time.held_seconds {
            *held.entry(k.clone()).or_insert(0.0) += v;
        }
    }
    (lines, span, no_work, held)
}

/// What the ledger is built from: the merged figures over `nodes` recorded nodes, each for
/// `wall_seconds`.
#[derive(Debug, Clone, Default)]
pub struct Inputs<'a> {
    pub wall_seconds: Option<f64>,
    pub cores_allocated: Option<f64>,
    pub cpu_seconds: Option<f64>,
    pub stalls: StallSeconds,
    pub nodes: usize,
    pub source: Option<Source>,
    pub gpus: &'a [GpuSummary],
}

pub fn build(i: &Inputs) -> Ledger {
    let Inputs {
        wall_seconds,
        cores_allocated,
        cpu_seconds,
        stalls,
        nodes,
        source,
        gpus,
    } = *i;
    let allocated = wall_seconds.zip(cores_allocated).map(|(w, c)| w * c);
    let share = |v: Option<f64>| {
        let wall = wall_seconds.filter(|w| *w > 0.0)? * nodes.max(1) as f64;
        v.map(|s| s / wall)
    };
    let stall_share_of_wall = StallSeconds::from_array(stalls.to_array().map(share));
    let stalls_unavailable = stalls_unavailable(source).map(str::to_string).or_else(|| {
        (!stalls.any()).then(|| {
            "not recorded: the kernel gave no pressure totals on at least one of the \
                 job's nodes (cgroup v1, or booted with psi=0), or an older slurmwatch \
                 recorded the job"
                .to_string()
        })
    });
    let mut basis = vec![
        "CPU: the job cgroup's cumulative CPU time between the first and last reading, \
         against cores allocated × that time"
            .to_string(),
    ];
    if stalls.any() {
        basis.push(
            "stalls: the kernel's pressure stall totals (cgroup v2 cpu/memory/io.pressure \
             total=), between the first and last reading; some = at least one task waited, \
             full = all did"
                .to_string(),
        );
    }
    let (cards, gpu_seconds, gpu_no_work_seconds, gpu_held_seconds) = card_lines(gpus);
    if !cards.is_empty() {
        basis.push(
            "GPUs: NVML's cumulative violation time per limiter (nvmlDeviceGetViolationStatus) \
             and time with no kernel running (its utilization samples), between each card's \
             first and last reading; GPM on Hopper and newer"
                .to_string(),
        );
    }
    Ledger {
        wall_seconds,
        cores_allocated,
        core_seconds_allocated: allocated,
        core_seconds_used: cpu_seconds,
        core_seconds_idle: allocated.zip(cpu_seconds).map(|(a, u)| (a - u).max(0.0)),
        stall_seconds: stalls,
        stall_share_of_wall,
        stalls_unavailable,
        gpu_seconds,
        gpu_no_work_seconds,
        gpu_held_seconds,
        gpus: cards,
        basis,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_divides_stalls_by_every_nodes_wall_time() {
        let stalls = StallSeconds {
            memory_some: Some(30.0),
            ..StallSeconds::default()
        };
        let l = build(&Inputs {
            wall_seconds: Some(100.0),
            cores_allocated: Some(8.0),
            cpu_seconds: Some(200.0),
            stalls,
            nodes: 2,
            source: Some(Source::CgroupV2),
            gpus: &[],
        });
        assert_eq!(l.core_seconds_allocated, Some(800.0));
        assert_eq!(l.core_seconds_idle, Some(600.0));
        assert_eq!(l.stall_share_of_wall.memory_some, Some(0.15));
        assert_eq!(l.stall_share_of_wall.cpu_some, None);
        assert!(l.stalls_unavailable.is_none());
        let v1 = build(&Inputs {
            wall_seconds: Some(100.0),
            cores_allocated: Some(8.0),
            cpu_seconds: Some(900.0),
            nodes: 1,
            source: Some(Source::CgroupV1),
            ..Inputs::default()
        });
        assert_eq!(v1.core_seconds_idle, Some(0.0), "never below 0");
        assert!(v1.stalls_unavailable.unwrap().contains("cgroup v1"));
    }
}
