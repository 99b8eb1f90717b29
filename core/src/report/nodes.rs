//! A multi-node job: one file per node (each node's slurmstepd records its own), merged into
//! one picture. Job totals add up (CPU seconds, cores, energy); memory stays per node (what
//! `--mem` applies to); findings that exist only between nodes: a node that recorded
//! nothing, a straggler, memory imbalance.

use serde::Serialize;
use serde_json::json;

use crate::analysis::merge::NodePart;
use crate::analysis::{Finding, Summary};
use crate::model::SampleRow;
use crate::model::{effective_cores, sum_all};
use crate::units::bytes;

use super::NodeRecording;

/// A straggler uses less than this share of the other nodes' median cores…
pub const STRAGGLER_SHARE: f64 = 0.5;
/// …for at least this share of the time all nodes were recording ("most of the run").
pub const STRAGGLER_TIME_SHARE: f64 = 0.6;
/// The others must be busy for a comparison to mean anything (cores).
pub const STRAGGLER_MIN_BUSY_CORES: f64 = 0.5;
/// Memory imbalance: the largest node peak is at least this many times the smallest…
pub const IMBALANCE_RATIO: f64 = 2.0;
/// …and at least this much larger (small jobs' noise is not an imbalance).
pub const IMBALANCE_MIN_BYTES: u64 = 256 << 20;
/// Buckets of the common time grid the nodes are compared on.
const GRID_BUCKETS: usize = 240;

/// One node of the job, as `nodes[]` in the report and the live JSON.
#[derive(Debug, Clone, Serialize, Default, PartialEq)]
pub struct NodeLine {
    /// Slurm's node name (not the host name).
    pub node: String,
    /// Whether a file from this node was found and read.
    pub recorded: bool,
    pub file: Option<String>,
    pub cpu_seconds: Option<f64>,
    pub cores_allocated: Option<f64>,
    pub average_effective_cores: Option<f64>,
    pub peak_effective_cores: Option<f64>,
    pub peak_working_set_bytes: Option<u64>,
    pub peak_working_set_at_unix_ms: Option<i64>,
    pub memory_limit_bytes: Option<u64>,
    pub oom_kills: Option<u64>,
    pub gpus: usize,
    pub gpu_energy_joules: Option<f64>,
}

impl NodeLine {
    pub fn from_recording(r: &NodeRecording) -> NodeLine {
        let s = &r.summary;
        let span_s = match (s.first_t_unix_ms, s.last_t_unix_ms) {
            (Some(a), Some(b)) if b > a => Some((b - a) as f64 / 1000.0),
            _ => None,
        };
        NodeLine {
            node: r.meta.node.clone(),
            recorded: true,
            file: Some(r.path.display().to_string()),
            cpu_seconds: s.cpu_usage_seconds_total,
            cores_allocated: s.cores_allocated.or(r.meta.cores_allocated).map(f64::from),
            average_effective_cores: s.cpu_usage_seconds_total.zip(span_s).map(|(c, t)| c / t),
            peak_effective_cores: s.peak_effective_cores,
            peak_working_set_bytes: s.peak_working_set_bytes,
            peak_working_set_at_unix_ms: s.peak_working_set_t_unix_ms,
            memory_limit_bytes: s.memory_limit_bytes.or(r.meta.memory_allocated_bytes),
            oom_kills: s.oom_kills,
            gpus: s.gpus.len(),
            gpu_energy_joules: sum_all(s.gpus.iter().map(|g| g.energy_joules)),
        }
    }

    /// A node of the allocation with no file: every figure unknown, never 0.
    pub fn silent(node: &str) -> NodeLine {
        NodeLine {
            node: node.to_string(),
            ..NodeLine::default()
        }
    }
}

/// The per-node lines: every node of the allocation in `expected` order (a node without a
/// file is listed as not recorded), then any recorded node `expected` did not name, by name.
pub fn lines(recs: &[NodeRecording], expected: &[String]) -> Vec<NodeLine> {
    let mut out: Vec<NodeLine> = expected
        .iter()
        .map(|n| match recs.iter().find(|r| &r.meta.node == n) {
            Some(r) => NodeLine::from_recording(r),
            None => NodeLine::silent(n),
        })
        .collect();
    let mut extra: Vec<NodeLine> = recs
        .iter()
        .filter(|r| !expected.contains(&r.meta.node))
        .map(NodeLine::from_recording)
        .collect();
    extra.sort_by(|a, b| a.node.cmp(&b.node));
    out.extend(extra);
    out
}

/// One summary for the whole job from the nodes' own ([`crate::analysis::merge`]), with the
/// peak of the cores in use summed over the nodes on a common time grid.
pub fn merge_summaries(recs: &[NodeRecording]) -> Summary {
    let parts: Vec<NodePart> = recs
        .iter()
        .map(|r| NodePart {
            node: &r.meta.node,
            cores_allocated: r.meta.cores_allocated,
            summary: &r.summary,
        })
        .collect();
    let mut m = crate::analysis::merge::summaries(&parts);
    if recs.len() > 1 {
        let grid = Grid::of(recs);
        (m.peak_effective_cores, m.peak_effective_cores_t_unix_ms) =
            grid.peak_total_cores().unzip();
    }
    m
}

/// The nodes' job series on one time grid (bucket maxima), for the straggler test, the peak
/// of the job's total cores, and one chart line per node.
pub struct Grid {
    pub t0_unix_ms: i64,
    pub bucket_ms: i64,
    /// Per node (in the recordings' order): name, cores per bucket.
    pub cores: Vec<(String, Vec<Option<f64>>)>,
}

impl Grid {
    pub fn of(recs: &[NodeRecording]) -> Grid {
        let t0 = recs
            .iter()
            .filter_map(|r| r.job_rows.first().map(|x| x.t_unix_ms))
            .min()
            .unwrap_or(0);
        let t1 = recs
            .iter()
            .filter_map(|r| r.job_rows.last().map(|x| x.t_unix_ms))
            .max()
            .unwrap_or(t0);
        let bucket_ms = ((t1 - t0) / GRID_BUCKETS as i64).max(1000);
        let n = ((t1 - t0) / bucket_ms) as usize + 1;
        let cores = recs
            .iter()
            .map(|r| {
                (
                    r.meta.node.clone(),
                    bucket_cores(&r.job_rows, t0, bucket_ms, n),
                )
            })
            .collect();
        Grid {
            t0_unix_ms: t0,
            bucket_ms,
            cores,
        }
    }

    /// The largest sum of the nodes' cores in one bucket where every node has a reading.
    pub fn peak_total_cores(&self) -> Option<(f64, i64)> {
        let n = self.cores.first()?.1.len();
        (0..n)
            .filter_map(|i| {
                let v: Option<Vec<f64>> = self.cores.iter().map(|(_, c)| c[i]).collect();
                Some((
                    v?.iter().sum::<f64>(),
                    self.t0_unix_ms + i as i64 * self.bucket_ms,
                ))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))
    }
}

/// Effective cores between consecutive rows, placed in the bucket of the later row (max).
fn bucket_cores(rows: &[SampleRow], t0: i64, bucket_ms: i64, n: usize) -> Vec<Option<f64>> {
    let mut out = vec![None; n];
    for w in rows.windows(2) {
        let Some(c) = effective_cores(&w[0], &w[1]) else {
            continue;
        };
        let i = (((w[1].t_unix_ms - t0) / bucket_ms) as usize).min(n - 1);
        out[i] = Some(out[i].map_or(c, |o: f64| o.max(c)));
    }
    out
}

/// Findings that exist only between nodes. `lines` are every node of the allocation.
pub fn findings(lines: &[NodeLine], grid: &Grid) -> Vec<Finding> {
    let mut out = Vec::new();
    if lines.len() < 2 {
        return out;
    }
    let silent: Vec<&str> = lines
        .iter()
        .filter(|l| !l.recorded)
        .map(|l| l.node.as_str())
        .collect();
    if !silent.is_empty() {
        out.push(Finding {
            code: "node_not_recorded",
            facts: obj(json!({ "nodes": silent, "recorded": lines.len() - silent.len(), "allocated": lines.len() })),
            sentence: format!(
                "{} recorded nothing: the figures cover {} of the job's {} nodes (nothing is averaged in for {})",
                silent.join(", "),
                lines.len() - silent.len(),
                lines.len(),
                if silent.len() == 1 { "it" } else { "them" }
            ),
            site_note: None,
        });
    }
    let peaks: Vec<(&str, u64)> = lines
        .iter()
        .filter_map(|l| Some((l.node.as_str(), l.peak_working_set_bytes?)))
        .collect();
    if let (Some(hi), Some(lo)) = (
        peaks.iter().max_by_key(|p| p.1),
        peaks.iter().min_by_key(|p| p.1),
    ) {
        let ratio = hi.1 as f64 / lo.1.max(1) as f64;
        if peaks.len() >= 2 && ratio >= IMBALANCE_RATIO && hi.1 - lo.1 >= IMBALANCE_MIN_BYTES {
            out.push(Finding {
                code: "memory_imbalance",
                facts: obj(json!({
                    "peak_node": hi.0, "peak_working_set_bytes": hi.1,
                    "low_node": lo.0, "low_working_set_bytes": lo.1, "ratio": ratio,
                })),
                sentence: format!(
                    "memory is uneven between nodes: {} peaked at {}, {:.1}× the {} of {}; --mem applies to every node, so it must fit {} (or spread the data more evenly)",
                    hi.0, bytes(hi.1), ratio, bytes(lo.1), lo.0, hi.0
                ),
                site_note: None,
            });
        }
    }
    out.extend(stragglers(grid));
    out
}

/// A node whose cores stay well below the other nodes' median for most of the time all of
/// them were recording.
fn stragglers(grid: &Grid) -> Vec<Finding> {
    let mut out = Vec::new();
    if grid.cores.len() < 2 {
        return out;
    }
    let n = grid.cores[0].1.len();
    for (k, (node, mine)) in grid.cores.iter().enumerate() {
        let (mut compared, mut behind) = (0usize, 0usize);
        let (mut my_sum, mut their_sum) = (0.0, 0.0);
        for i in 0..n {
            let Some(me) = mine[i] else { continue };
            let mut others: Vec<f64> = grid
                .cores
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != k)
                .filter_map(|(_, (_, c))| c[i])
                .collect();
            if others.len() + 1 < grid.cores.len() {
                continue; // not every node has a reading here
            }
            others.sort_by(f64::total_cmp);
            let median = others[others.len() / 2];
            if median < STRAGGLER_MIN_BUSY_CORES {
                continue;
            }
            compared += 1;
            my_sum += me;
            their_sum += median;
            if me < STRAGGLER_SHARE * median {
                behind += 1;
            }
        }
        if compared >= 3 && behind as f64 >= STRAGGLER_TIME_SHARE * compared as f64 {
            let share = behind as f64 / compared as f64;
            out.push(Finding {
                code: "straggler_node",
                facts: obj(json!({
                    "node": node,
                    "average_effective_cores": my_sum / compared as f64,
                    "others_average_effective_cores": their_sum / compared as f64,
                    "share_of_time_behind": share,
                })),
                sentence: format!(
                    "{node} is a straggler: it used {:.1} cores on average while the other nodes used {:.1}, and lagged for {:.0}% of the time they were busy — uneven work, a rank waiting on I/O or a slow node",
                    my_sum / compared as f64,
                    their_sum / compared as f64,
                    share * 100.0
                ),
                site_note: None,
            });
        }
    }
    out
}

fn obj(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
    match v {
        serde_json::Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}
