//! The live picture of a multi-node job: each node's own snapshot (from its own file) and
//! the job-level figures over all of them. Totals add up (CPU seconds, cores in use, cores
//! allocated, working set, limit); peaks stay per node (what `--mem` applies to); a node
//! without a recent reading is counted as not reporting and left out of the sums, never
//! averaged in as 0, and a sum any reporting node cannot give is unknown, not partial. The
//! ledger adds up every node's recording so far as the report does (`analysis::ledger`).

use crate::analysis::ledger::{self, Ledger};
use crate::model::{sum_all as sum, MemoryGuard};
use crate::slurm::hostlist;
use crate::snapshot::{
    CpuSnapshot, History, JobState, MemorySnapshot, NodeSnapshot, Reading, Snapshot,
};

/// A node is reporting when its latest reading is at most this many intervals older than
/// the newest reading of any node.
pub const REPORTING_INTERVALS: i64 = 2;

fn missing_cpu(why: &str) -> CpuSnapshot {
    CpuSnapshot {
        usage_seconds_total: Reading::missing(why),
        cores_allocated: Reading::missing(why),
        effective_cores: Reading::missing(why),
        peak_effective_cores: Reading::missing(why),
    }
}

fn missing_memory(why: &str) -> MemorySnapshot {
    MemorySnapshot {
        working_set_bytes: Reading::missing(why),
        cache_bytes: Reading::missing(why),
        limit_bytes: Reading::missing(why),
        percent_of_limit: Reading::missing(why),
        peak_working_set_bytes: Reading::missing(why),
        lifetime_peak_bytes: Reading::missing(why),
        guard: None,
    }
}

fn guard_rank(g: Option<MemoryGuard>) -> u8 {
    match g {
        None => 0,
        Some(MemoryGuard::Ok) => 1,
        Some(MemoryGuard::Amber) => 2,
        Some(MemoryGuard::Red) => 3,
    }
}

/// Merges the nodes' snapshots (`Err(reason)`: no reading from that node) into the job's.
/// Returns `None` when no node has a snapshot. A single node's snapshot is returned as it
/// is, with its one `nodes[]` entry.
pub fn merge(per_node: &[(String, Result<Snapshot, String>)]) -> Option<Snapshot> {
    let ok: Vec<(&String, &Snapshot)> = per_node
        .iter()
        .filter_map(|(n, s)| s.as_ref().ok().map(|s| (n, s)))
        .collect();
    let (_, first) = ok.first()?;
    let newest = ok.iter().filter_map(|(_, s)| s.reading_unix_ms).max();
    let nodes: Vec<NodeSnapshot> = per_node
        .iter()
        .map(|(node, s)| node_entry(node, s, newest))
        .collect();
    let mut m = (*first).clone();
    m.nodes_reporting = Some(nodes.iter().filter(|n| n.reporting).count() as u32);
    if per_node.len() == 1 {
        m.nodes = nodes;
        return Some(m);
    }
    let names: Vec<&str> = per_node.iter().map(|(n, _)| n.as_str()).collect();
    m.node = Some(hostlist::compress(&names));
    m.reading_unix_ms = newest;
    if ok.iter().any(|(_, s)| s.state == JobState::Running) {
        m.state = JobState::Running;
    }
    let live: Vec<&Snapshot> = ok.iter().map(|(_, s)| *s).collect();
    // The batch script's output is noted on its node alone, which need not be the first.
    m.throughput = live.iter().find_map(|s| s.throughput.clone());
    let reporting: Vec<&Snapshot> = per_node
        .iter()
        .zip(&nodes)
        .filter(|(_, n)| n.reporting)
        .filter_map(|((_, s), _)| s.as_ref().ok())
        .collect();
    let silent: Vec<&str> = nodes
        .iter()
        .filter(|n| !n.reporting)
        .map(|n| n.node.as_str())
        .collect();
    m.cpu = merged_cpu(&live, &reporting, &silent);
    m.memory = merged_memory(&live, &reporting);
    m.gpus = ok
        .iter()
        .flat_map(|(n, s)| {
            s.gpus.iter().cloned().map(|mut g| {
                g.node = Some((*n).clone());
                g
            })
        })
        .collect();
    m.history = sum_histories(live.iter().map(|s| &s.history));
    m.nodes = nodes;
    m.ledger = merged_ledger(per_node);
    m.ledger_input = None;
    Some(m)
}

/// The job's ledger over the nodes whose recording was read (as the report's covers the
/// recorded nodes, the basis names the others); unknown when a node was read otherwise
/// (directly, or through sstat), whose counters from the job's start are not at hand.
fn merged_ledger(per_node: &[(String, Result<Snapshot, String>)]) -> Reading<Ledger> {
    let mut inputs = Vec::new();
    let mut unread = Vec::new();
    for (node, s) in per_node {
        match s {
            Ok(s) => match &s.ledger_input {
                Some(i) => inputs.push(i),
                None => {
                    let why = s.ledger.reason.as_deref().unwrap_or("no recording read");
                    return Reading::missing(format!("{node}: {why}"));
                }
            },
            Err(_) => unread.push(node.as_str()),
        }
    }
    let mut l = ledger::of_nodes(&inputs);
    if !unread.is_empty() {
        l.basis.push(format!(
            "over the {} of {} nodes whose recording was read (not {})",
            inputs.len(),
            per_node.len(),
            unread.join(", ")
        ));
    }
    Reading::ok(l)
}

/// One node's `nodes[]` entry: reporting when its latest reading is at most
/// `REPORTING_INTERVALS` of its intervals older than `newest` (any node's newest reading).
fn node_entry(node: &str, s: &Result<Snapshot, String>, newest: Option<i64>) -> NodeSnapshot {
    let fresh_ms = |s: &Snapshot| {
        i64::from(s.interval_seconds.unwrap_or(5).max(1)) * 1000 * REPORTING_INTERVALS
    };
    match s {
        Ok(s) => {
            let reporting = match (s.reading_unix_ms, newest) {
                (Some(t), Some(n)) => n - t <= fresh_ms(s),
                _ => false,
            };
            NodeSnapshot {
                node: node.to_string(),
                reporting,
                reason: (!reporting).then(|| match s.reading_unix_ms {
                    None => "no reading yet".to_string(),
                    Some(_) => "no reading in the last two intervals".to_string(),
                }),
                reading_unix_ms: s.reading_unix_ms,
                source: Some(s.source),
                cpu: s.cpu.clone(),
                memory: s.memory.clone(),
                gpus: s.gpus.len(),
            }
        }
        Err(why) => NodeSnapshot {
            node: node.to_string(),
            reporting: false,
            reason: Some(why.clone()),
            reading_unix_ms: None,
            source: None,
            cpu: missing_cpu(why),
            memory: missing_memory(why),
            gpus: 0,
        },
    }
}

/// The job's CPU over its nodes: the CPU total needs every node (`silent`: those not
/// reporting), the rate sums the reporting ones, peaks stay per node.
fn merged_cpu(live: &[&Snapshot], reporting: &[&Snapshot], silent: &[&str]) -> CpuSnapshot {
    let cpu_total = sum(live.iter().map(|s| s.cpu.usage_seconds_total.value()));
    let usage_seconds_total = match cpu_total {
        Some(v) if silent.is_empty() => Reading::ok(v),
        Some(_) | None => Reading::missing(format!(
            "the job total needs every node: {} not reporting (see nodes[])",
            silent.join(", ")
        )),
    };
    CpuSnapshot {
        usage_seconds_total,
        cores_allocated: Reading::from_option(
            sum(live.iter().map(|s| s.cpu.cores_allocated.value())),
            || "not known on every node".into(),
        ),
        effective_cores: Reading::from_option(
            sum(reporting.iter().map(|s| s.cpu.effective_cores.value())),
            || "a reporting node has no rate yet".into(),
        ),
        peak_effective_cores: Reading::missing(
            "peaks are per node in a multi-node job: see nodes[]",
        ),
    }
}

/// The job's memory over its nodes: the reporting nodes' sums, the largest node's peaks,
/// and the guard of the node closest to its limit.
fn merged_memory(live: &[&Snapshot], reporting: &[&Snapshot]) -> MemorySnapshot {
    let ws = sum(reporting.iter().map(|s| s.memory.working_set_bytes.value()));
    let limit = sum(reporting.iter().map(|s| s.memory.limit_bytes.value()));
    MemorySnapshot {
        working_set_bytes: Reading::from_option(ws, || {
            "a reporting node has no reading of it".into()
        }),
        cache_bytes: Reading::from_option(
            sum(reporting.iter().map(|s| s.memory.cache_bytes.value())),
            || "unreadable on a reporting node".into(),
        ),
        limit_bytes: Reading::from_option(limit, || "a reporting node has no limit known".into()),
        percent_of_limit: Reading::from_option(
            ws.zip(limit.filter(|l| *l > 0))
                .map(|(w, l)| w as f64 * 100.0 / l as f64),
            || "needs both the working set and a limit".into(),
        ),
        // What `--mem` applies to: the largest node's.
        peak_working_set_bytes: Reading::from_option(
            live.iter()
                .filter_map(|s| s.memory.peak_working_set_bytes.value())
                .max(),
            || "no working set recorded".into(),
        ),
        lifetime_peak_bytes: Reading::from_option(
            live.iter()
                .filter_map(|s| s.memory.lifetime_peak_bytes.value())
                .max(),
            || "not recorded".into(),
        ),
        // The node closest to its limit decides: an OOM kill happens per node.
        guard: reporting
            .iter()
            .map(|s| s.memory.guard)
            .max_by_key(|g| guard_rank(*g))
            .flatten(),
    }
}

/// Slot by slot (each history ends at its node's latest reading): the sum, or a gap where
/// a node has none.
fn sum_histories<'a>(hs: impl Iterator<Item = &'a History>) -> History {
    let hs: Vec<&History> = hs.collect();
    let Some(first) = hs.first() else {
        return History::default();
    };
    let n = hs
        .iter()
        .map(|h| h.effective_cores.len())
        .max()
        .unwrap_or(0);
    let at = |v: &Vec<Option<f64>>, i: usize| {
        let off = n - v.len();
        i.checked_sub(off).and_then(|j| v[j])
    };
    let at_u = |v: &Vec<Option<u64>>, i: usize| {
        let off = n.saturating_sub(v.len());
        i.checked_sub(off).and_then(|j| v.get(j).copied().flatten())
    };
    History {
        slot_seconds: first.slot_seconds,
        effective_cores: (0..n)
            .map(|i| sum(hs.iter().map(|h| at(&h.effective_cores, i))))
            .collect(),
        working_set_bytes: (0..n)
            .map(|i| sum(hs.iter().map(|h| at_u(&h.working_set_bytes, i))))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SampleKind, SampleRow, Series};
    use crate::snapshot::{from_rows, JobFacts, SnapshotSource};

    const GIB: u64 = 1 << 30;

    /// A node's snapshot: `cores` busy over the last 5 s, `ws` working set of a 4 GiB limit,
    /// newest reading at `t_end_ms`.
    fn node(name: &str, cores: f64, ws: u64, t_end_ms: i64) -> Snapshot {
        let rows: Vec<SampleRow> = (0..2)
            .map(|i| {
                let mut r = SampleRow::empty(
                    t_end_ms - 5000 + i * 5000,
                    Series::Job,
                    SampleKind::Periodic,
                );
                r.usage.cpu_usage_usec = Some((100e6 + cores * 5e6 * i as f64) as u64);
                r.usage.memory_working_set_bytes = Some(ws);
                r.usage.memory_cache_bytes = Some(0);
                r.usage.memory_limit_bytes = Some(4 * GIB);
                r.cores_allocated = Some(4);
                r
            })
            .collect();
        let facts = JobFacts {
            job_id: "9".into(),
            node: Some(name.into()),
            ..JobFacts::default()
        };
        let mut s = from_rows(SnapshotSource::PluginFile, None, &facts, &rows, true);
        s.interval_seconds = Some(5);
        s
    }

    #[test]
    fn sums_what_adds_up_and_keeps_peaks_per_node() {
        let t = 1_800_000_000_000;
        let per_node = vec![
            ("a1".to_string(), Ok(node("a1", 2.0, GIB, t))),
            (
                "a2".to_string(),
                Ok(node("a2", 3.0, 3 * GIB + GIB / 2, t - 1000)),
            ),
        ];
        let m = merge(&per_node).unwrap();
        assert_eq!(m.nodes.len(), 2);
        assert_eq!(m.nodes_reporting, Some(2));
        assert_eq!(m.node.as_deref(), Some("a[1-2]"));
        assert_eq!(m.cpu.effective_cores.value(), Some(5.0));
        assert_eq!(m.cpu.cores_allocated.value(), Some(8));
        assert_eq!(m.cpu.usage_seconds_total.value(), Some(200.0 + 25.0));
        assert_eq!(m.memory.working_set_bytes.value(), Some(4 * GIB + GIB / 2));
        assert_eq!(m.memory.limit_bytes.value(), Some(8 * GIB));
        assert_eq!(
            m.memory.peak_working_set_bytes.value(),
            Some(3 * GIB + GIB / 2),
            "the largest node's peak, not a sum"
        );
        // a2 is at 87.5 % of its own limit: amber, though the job as a whole is at 56 %.
        assert_eq!(m.memory.guard, Some(MemoryGuard::Amber));
        assert!(m.cpu.peak_effective_cores.value().is_none());
        assert_eq!(m.nodes[1].cpu.effective_cores.value(), Some(3.0));
    }

    #[test]
    fn a_silent_or_stale_node_is_not_summed_and_is_said() {
        let t = 1_800_000_000_000;
        let per_node = vec![
            ("b1".to_string(), Ok(node("b1", 2.0, GIB, t))),
            ("b2".to_string(), Ok(node("b2", 2.0, GIB, t - 60_000))),
            (
                "b3".to_string(),
                Err("no file for b3 reachable from this machine".to_string()),
            ),
        ];
        let m = merge(&per_node).unwrap();
        assert_eq!(m.nodes_reporting, Some(1));
        assert!(!m.nodes[1].reporting);
        assert_eq!(
            m.nodes[1].reason.as_deref(),
            Some("no reading in the last two intervals")
        );
        assert!(!m.nodes[2].reporting);
        assert!(m.nodes[2].cpu.usage_seconds_total.value().is_none());
        assert_eq!(m.cpu.effective_cores.value(), Some(2.0), "b1 only");
        assert_eq!(m.memory.working_set_bytes.value(), Some(GIB));
        let why = m.cpu.usage_seconds_total.reason.clone().unwrap();
        assert!(why.contains("b2, b3 not reporting"), "{why}");
    }

    #[test]
    fn a_reporting_node_without_a_working_set_makes_the_sum_unknown() {
        let t = 1_800_000_000_000;
        let mut b = node("e2", 1.0, GIB, t);
        b.memory.working_set_bytes = Reading::missing("unreadable in the latest reading");
        let per_node = vec![
            ("e1".to_string(), Ok(node("e1", 1.0, GIB, t))),
            ("e2".to_string(), Ok(b)),
        ];
        let m = merge(&per_node).unwrap();
        assert_eq!(m.nodes_reporting, Some(2));
        assert!(
            m.memory.working_set_bytes.value().is_none(),
            "not e1's alone"
        );
        assert_eq!(m.cpu.effective_cores.value(), Some(2.0));
    }

    #[test]
    fn one_node_is_its_own_snapshot_with_one_entry() {
        let t = 1_800_000_000_000;
        let one = node("c1", 1.0, GIB, t);
        let m = merge(&[("c1".to_string(), Ok(one.clone()))]).unwrap();
        assert_eq!(m.nodes.len(), 1);
        assert_eq!(m.cpu, one.cpu);
        assert_eq!(m.memory, one.memory);
        assert!(merge(&[("d".to_string(), Err("x".to_string()))]).is_none());
    }
}
