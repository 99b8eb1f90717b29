//! One summary for a multi-node job from its nodes' own: the report's merged figures
//! (`report::nodes::merge_summaries`, which adds the peak of the nodes' summed cores from
//! their rows) and the live view's ledger so far ([`super::ledger::of_nodes`]) both come
//! from here, so the two add the nodes up the same way.

use super::stalls::StallSeconds;
use super::Summary;
use crate::model::sum_all;

/// One node's part: its summary, its node name and the cores its file says were allocated
/// (the fallback for a summary without them).
#[derive(Debug, Clone, Copy)]
pub struct NodePart<'a> {
    pub node: &'a str,
    pub cores_allocated: Option<u32>,
    pub summary: &'a Summary,
}

/// Totals add up (CPU seconds, cores, kills, sampler overhead; unknown when any node's is);
/// the memory peak is the largest node's (with its time), because `--mem` is per node; a
/// stall total is known only where every node has it; cards keep their node. One node's
/// summary is returned as it is. The peak of the summed cores needs the rows: not set here.
pub fn summaries(parts: &[NodePart]) -> Summary {
    if let [one] = parts {
        return one.summary.clone();
    }
    let ss: Vec<&Summary> = parts.iter().map(|p| p.summary).collect();
    let mut m = Summary {
        summary_version: ss.iter().map(|s| s.summary_version).max().unwrap_or(0),
        job_rows: ss.iter().map(|s| s.job_rows).sum(),
        first_t_unix_ms: ss.iter().filter_map(|s| s.first_t_unix_ms).min(),
        last_t_unix_ms: ss.iter().filter_map(|s| s.last_t_unix_ms).max(),
        cpu_usage_seconds_total: sum_all(ss.iter().map(|s| s.cpu_usage_seconds_total)),
        cpu_user_seconds: sum_all(ss.iter().map(|s| s.cpu_user_seconds)),
        cpu_system_seconds: sum_all(ss.iter().map(|s| s.cpu_system_seconds)),
        cores_allocated: parts
            .iter()
            .map(|p| p.summary.cores_allocated.or(p.cores_allocated))
            .try_fold(0u32, |acc, c| c.map(|c| acc + c)),
        memory_limit_bytes: ss.iter().filter_map(|s| s.memory_limit_bytes).max(),
        oom_kills: sum_all(ss.iter().map(|s| s.oom_kills)),
        memory_major_faults: sum_all(ss.iter().map(|s| s.memory_major_faults)),
        io_read_bytes: sum_all(ss.iter().map(|s| s.io_read_bytes)),
        io_write_bytes: sum_all(ss.iter().map(|s| s.io_write_bytes)),
        sampler_cpu_usec: sum_all(ss.iter().map(|s| s.sampler_cpu_usec)),
        sampler_bytes_written: sum_all(ss.iter().map(|s| s.sampler_bytes_written)),
        stall_seconds: StallSeconds::over_nodes(ss.iter().map(|s| s.stall_seconds.as_ref()))
            .filter(|s| s.any()),
        ..Summary::default()
    };
    if let Some(best) = ss
        .iter()
        .filter(|s| s.peak_working_set_bytes.is_some())
        .max_by_key(|s| s.peak_working_set_bytes)
    {
        m.peak_working_set_bytes = best.peak_working_set_bytes;
        m.peak_working_set_t_unix_ms = best.peak_working_set_t_unix_ms;
    }
    if let Some(best) = ss
        .iter()
        .filter(|s| s.lifetime_peak_bytes.is_some())
        .max_by_key(|s| s.lifetime_peak_bytes)
    {
        m.lifetime_peak_bytes = best.lifetime_peak_bytes;
        m.lifetime_peak_t_unix_ms = best.lifetime_peak_t_unix_ms;
    }
    for p in parts {
        m.oom_events.extend(p.summary.oom_events.iter().cloned());
        m.limit_hit_events
            .extend(p.summary.limit_hit_events.iter().cloned());
        m.gpus.extend(p.summary.gpus.iter().cloned().map(|mut g| {
            g.node = Some(p.node.to_string());
            g
        }));
    }
    m.oom_events.sort_by_key(|e| e.t_unix_ms);
    m.limit_hit_events.sort_by_key(|e| e.t_unix_ms);
    m
}
