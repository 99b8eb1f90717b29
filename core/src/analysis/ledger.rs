//! Where the allocation went, exactly: differences of the kernel's cumulative counters between
//! the recording's first and last rows (a step's start and end rows are read at its start and
//! end, so a 3-second job and a stall between two periodic rows are counted whole, whatever
//! the interval). Pure: built from the merged summary's figures.
//!
//! - CPU: the cgroup's `usage_usec` against cores allocated × the time between those rows.
//! - Stalls: PSI's `total=` ([`super::stalls`]); "not available" on cgroup v1 and in /proc
//!   mode, never a 0.
//! - GPUs: each card's limiter, no-work and GPM time ([`super::gpu_ledger`]), summed.
//!
//! One owner for every view: the report ([`of_summary`] of its merged summary), the live
//! view's `--once --json` and dashboard ([`of_nodes`] of each node's summary so far).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::merge::{self, NodePart};
pub use super::stalls::{stalls_unavailable, StallSeconds, STALLS};
use super::summary::{CardTime, GpuSummary, Summary};
use crate::model::sum_known;
use crate::sample::Source;

/// The whole allocation's ledger, as the report shows it (figures over every recorded node).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// The recording's first and last rows (over every node): the span the figures cover.
    /// A live view's ledger is the job's so far, to `to_unix_ms`.
    pub from_unix_ms: Option<i64>,
    pub to_unix_ms: Option<i64>,
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub from_unix_ms: Option<i64>,
    pub to_unix_ms: Option<i64>,
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
        from_unix_ms,
        to_unix_ms,
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
        from_unix_ms,
        to_unix_ms,
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

/// The ledger of a job's summary (merged over its `nodes` recorded nodes, see
/// [`merge::summaries`]). `sources`: how each node was measured (a node without per-job PSI
/// says why the stalls are unknown); `cores_allocated`: the job's, as the caller knows it.
pub fn of_summary(
    m: &Summary,
    nodes: usize,
    sources: &[Source],
    cores_allocated: Option<f64>,
) -> Ledger {
    let wall = m
        .first_t_unix_ms
        .zip(m.last_t_unix_ms)
        .map(|(a, b)| (b - a) as f64 / 1000.0);
    let source = sources
        .iter()
        .find(|s| stalls_unavailable(Some(**s)).is_some())
        .or(sources.first())
        .copied();
    build(&Inputs {
        from_unix_ms: m.first_t_unix_ms,
        to_unix_ms: m.last_t_unix_ms,
        wall_seconds: wall,
        cores_allocated,
        cpu_seconds: m.cpu_usage_seconds_total,
        stalls: m.stall_seconds.unwrap_or_default(),
        nodes,
        source,
        gpus: &m.gpus,
    })
}

/// One node's recording as the ledger reads it: its summary (the epilog's when it wrote one,
/// else computed from the rows and cards stored so far), the file's node, its cores and how
/// it was measured. A live snapshot carries it, across an `srun` hop too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeFigures {
    pub node: String,
    pub cores_allocated: Option<u32>,
    pub source: Source,
    pub summary: Summary,
}

impl NodeFigures {
    /// A node's file as the ledger reads it as of its job series `job` (oldest first):
    /// [`super::summary::for_ledger`] with the file's `meta`.
    pub fn read(
        reader: &crate::store::Reader,
        meta: &crate::store::JobMeta,
        job: &[crate::model::SampleRow],
    ) -> crate::error::Result<NodeFigures> {
        Ok(NodeFigures {
            node: meta.node.clone(),
            cores_allocated: meta.cores_allocated,
            source: meta.source,
            summary: super::summary::for_ledger(reader, job)?,
        })
    }
}

/// The job's ledger over its nodes' recordings: merged as the report merges them
/// ([`merge::summaries`]), then [`of_summary`]. The cores are the merged summary's, else (one
/// node) its file's, as the report takes them without sacct.
pub fn of_nodes(nodes: &[&NodeFigures]) -> Ledger {
    let parts: Vec<NodePart> = nodes
        .iter()
        .map(|n| NodePart {
            node: &n.node,
            cores_allocated: n.cores_allocated,
            summary: &n.summary,
        })
        .collect();
    let m = merge::summaries(&parts);
    let cores = match nodes {
        [one] => m.cores_allocated.or(one.cores_allocated),
        _ => m.cores_allocated,
    };
    let sources: Vec<Source> = nodes.iter().map(|n| n.source).collect();
    of_summary(&m, nodes.len(), &sources, cores.map(f64::from))
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
            ..Inputs::default()
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
