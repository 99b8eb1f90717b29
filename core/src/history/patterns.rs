//! Patterns only a history shows (docs/design.md §8, "Across runs"): the same workload failing
//! again and again, `--mem` hand-searched across OOM kills, and nodes that eat jobs.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::stats::{median, wilson};
use super::{Brief, Outcome, Workload};
use crate::render::terminal::field;
use crate::units::{bytes, clock, mem_flag};

/// `repeated_failure`: at least this many runs…
pub const REPEATED_FAILURE_MIN_RUNS: usize = 5;
/// …and at least this share of them failed (slurmpast's default).
pub const REPEATED_FAILURE_PERCENT: f64 = 50.0;
/// `node_eats_jobs`: the family-wise error rate over every (workload, node) comparison,
/// split by Bonferroni (each interval at `1 − NODE_ALPHA / m`).
pub const NODE_ALPHA: f64 = 0.05;
/// A node is compared only with at least this many runs of the workload on it…
pub const NODE_MIN_RUNS: usize = 5;
/// …and at least this many on the rest of the fleet.
pub const NODE_MIN_REST_RUNS: usize = 10;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pattern {
    /// `repeated_failure`, `memory_hand_searched`, `node_eats_jobs`.
    pub code: &'static str,
    pub workload: String,
    pub user: Option<String>,
    pub facts: Map<String, Value>,
    pub sentence: String,
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn r3(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 1000.0).round() / 1000.0 + 0.0) // + 0.0: no -0 in JSON
    } else {
        Value::Null
    }
}

/// All patterns, and the nodes the node pattern flags (sorted, deduplicated).
pub fn find(workloads: &[Workload], runs: &[Brief]) -> (Vec<Pattern>, Vec<String>) {
    let mut out = Vec::new();
    for w in workloads {
        let rs: Vec<&Brief> = w.run_indices.iter().map(|&i| &runs[i]).collect();
        if let Some(p) = repeated_failure(w, &rs) {
            out.push(p);
        }
        if let Some(p) = hand_searched(w, &rs) {
            out.push(p);
        }
    }
    let (nodes, flagged) = node_rates(workloads, runs);
    out.extend(nodes);
    (out, flagged)
}

fn repeated_failure(w: &Workload, rs: &[&Brief]) -> Option<Pattern> {
    let failed: Vec<&&Brief> = rs.iter().filter(|r| r.outcome.is_failure()).collect();
    if rs.len() < REPEATED_FAILURE_MIN_RUNS
        || (failed.len() as f64) * 100.0 < REPEATED_FAILURE_PERCENT * rs.len() as f64
    {
        return None;
    }
    let mut by_state: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &failed {
        *by_state.entry(&r.state).or_default() += 1;
    }
    let (state, count) = by_state
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(s, c)| (s.to_string(), *c))?;
    let of_state: Vec<&&&Brief> = failed.iter().filter(|r| *r.state == *state).collect();
    let cpu: Vec<f64> = of_state.iter().filter_map(|r| r.cpu_seconds()).collect();
    let med = median(&cpu);
    let hung = of_state.iter().filter(|r| r.hung()).count();
    let why = match state.as_str() {
        "TIMEOUT" if hung * 2 > of_state.len() => " — a hang, not slowness".to_string(),
        "TIMEOUT" => " — still computing at the limit: it needs more time".to_string(),
        "OUT_OF_MEMORY" => " — it needs more memory than it asks for".to_string(),
        "FAILED" => {
            let mut codes: BTreeMap<i32, usize> = BTreeMap::new();
            for r in &of_state {
                if let Some(c) = r.exit_code() {
                    *codes.entry(c).or_default() += 1;
                }
            }
            codes
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(c, _)| format!(" — mostly exit code {c}"))
                .unwrap_or_default()
        }
        _ => String::new(),
    };
    let sentence = format!(
        "{}: submitted {} times, died {} times: {state}{} on a median of {} CPU-seconds{why}.",
        field(&w.name),
        rs.len(),
        failed.len(),
        if count < failed.len() {
            format!(" ({count} of them)")
        } else {
            String::new()
        },
        med.map(|m| format!("{m:.2}"))
            .unwrap_or_else(|| "n/a".into()),
    );
    Some(Pattern {
        code: "repeated_failure",
        workload: w.name.clone(),
        user: w.user.clone(),
        facts: obj(json!({
            "runs": rs.len(),
            "failed": failed.len(),
            "main_state": state,
            "main_state_runs": count,
            "median_cpu_seconds": med.map(r3),
            "hung": hung,
        })),
        sentence,
    })
}

/// `--mem` walked across OOM kills; flagged strongly when a value that was OOM-killed later
/// completed (memory was then not what decided the outcome).
fn hand_searched(w: &Workload, rs: &[&Brief]) -> Option<Pattern> {
    let with_mem: Vec<&&Brief> = rs
        .iter()
        .filter(|r| r.mem_request_bytes().is_some() && !r.mem_whole_node)
        .collect();
    let ooms = with_mem.iter().filter(|r| r.oom()).count();
    let distinct: BTreeSet<u64> = with_mem
        .iter()
        .filter_map(|r| r.mem_request_bytes())
        .collect();
    if ooms < 2 || distinct.len() < 2 {
        return None;
    }
    // The series of values, consecutive repeats collapsed; OOM-killed ones marked.
    let mut series: Vec<(u64, bool)> = Vec::new();
    for r in &with_mem {
        let m = r.mem_request_bytes().unwrap_or(0);
        match series.last_mut() {
            Some((v, killed)) if *v == m => *killed |= r.oom(),
            _ => series.push((m, r.oom())),
        }
    }
    // A value (or a smaller one) that was OOM-killed, later completing.
    let mut proof: Option<(u64, i64, u64, i64)> = None;
    for (i, a) in with_mem.iter().enumerate() {
        if !a.oom() {
            continue;
        }
        let am = a.mem_request_bytes().unwrap_or(0);
        if let Some(b) = with_mem[i + 1..].iter().find(|b| {
            b.outcome == Outcome::Completed
                && !b.oom()
                && b.mem_request_bytes().unwrap_or(u64::MAX) <= am
        }) {
            proof = Some((am, a.t(), b.mem_request_bytes().unwrap_or(0), b.t()));
            break;
        }
    }
    let walk: Vec<String> = series
        .iter()
        .map(|(m, k)| format!("{}{}", mem_flag(*m), if *k { " (OOM)" } else { "" }))
        .collect();
    let mut sentence = format!(
        "{}: --mem hand-searched across {ooms} OOM kills: {}",
        field(&w.name),
        walk.join(" → ")
    );
    if let Some((failed, tf, ok, tok)) = proof {
        sentence += &format!(
            "; {} was OOM-killed ({}) yet {} completed later ({}): memory was not the variable — look at the input, the code path or the node",
            bytes(failed),
            clock(tf * 1000),
            bytes(ok),
            clock(tok * 1000)
        );
    }
    sentence.push('.');
    Some(Pattern {
        code: "memory_hand_searched",
        workload: w.name.clone(),
        user: w.user.clone(),
        facts: obj(json!({
            "oom_kills": ooms,
            "mem_values_bytes": series.iter().map(|(m, _)| *m).collect::<Vec<_>>(),
            "oom_killed": series.iter().map(|(_, k)| *k).collect::<Vec<_>>(),
            "failed_value_later_succeeded": proof.is_some(),
            "failed_bytes": proof.map(|p| p.0),
            "succeeded_bytes": proof.map(|p| p.2),
        })),
        sentence,
    })
}

/// Per node, within each workload: its failure-or-hang rate against the rest of the fleet.
/// A node is flagged when its Wilson interval lies wholly above the rest's, both at the
/// Bonferroni-corrected level over every comparison made.
fn node_rates(workloads: &[Workload], runs: &[Brief]) -> (Vec<Pattern>, Vec<String>) {
    struct Test<'a> {
        w: &'a Workload,
        node: String,
        k: u64,
        n: u64,
        rk: u64,
        rn: u64,
    }
    let mut tests = Vec::new();
    for w in workloads {
        let mut per: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        let (mut tk, mut tn) = (0u64, 0u64);
        for &i in &w.run_indices {
            let r = &runs[i];
            if r.outcome == Outcome::Cancelled || r.node_names.is_empty() {
                continue;
            }
            let bad = r.outcome.is_failure() || r.hung();
            // A run on several nodes counts on each of them.
            let uniq: BTreeSet<&str> = r.node_names.iter().map(|n| &**n).collect();
            for n in uniq {
                let e = per.entry(n).or_default();
                e.1 += 1;
                tn += 1;
                if bad {
                    e.0 += 1;
                    tk += 1;
                }
            }
        }
        for (node, (k, n)) in per {
            let (rk, rn) = (tk - k, tn - n);
            if n as usize >= NODE_MIN_RUNS && rn as usize >= NODE_MIN_REST_RUNS {
                tests.push(Test {
                    w,
                    node: node.to_string(),
                    k,
                    n,
                    rk,
                    rn,
                });
            }
        }
    }
    let m = tests.len().max(1);
    let alpha = NODE_ALPHA / m as f64;
    let mut out = Vec::new();
    let mut flagged = BTreeSet::new();
    for t in &tests {
        let (lo, hi) = wilson(t.k, t.n, alpha);
        let (rlo, rhi) = wilson(t.rk, t.rn, alpha);
        if lo <= rhi {
            continue;
        }
        let (lo95, hi95) = wilson(t.k, t.n, NODE_ALPHA);
        let (rlo95, rhi95) = wilson(t.rk, t.rn, NODE_ALPHA);
        let pct = |a: u64, b: u64| a as f64 * 100.0 / b.max(1) as f64;
        flagged.insert(t.node.clone());
        out.push(Pattern {
            code: "node_eats_jobs",
            workload: t.w.name.clone(),
            user: t.w.user.clone(),
            facts: obj(json!({
                "node": t.node,
                "failed": t.k, "runs": t.n,
                "rest_failed": t.rk, "rest_runs": t.rn,
                "wilson95": [r3(lo95), r3(hi95)],
                "rest_wilson95": [r3(rlo95), r3(rhi95)],
                "corrected_level": r3(1.0 - alpha),
                "corrected": [r3(lo), r3(hi)],
                "rest_corrected": [r3(rlo), r3(rhi)],
                "comparisons": m,
                "correction": "bonferroni",
            })),
            sentence: format!(
                "{}: {} of {} runs on {} failed or hung ({:.0} %, 95 % Wilson {:.0}–{:.0} %) against {} of {} on the other nodes ({:.0} %, {:.0}–{:.0} %); the gap holds at the Bonferroni-corrected level over {m} node comparisons. Avoid it with --exclude={}.",
                field(&t.w.name), t.k, t.n, t.node, pct(t.k, t.n), lo95 * 100.0, hi95 * 100.0,
                t.rk, t.rn, pct(t.rk, t.rn), rlo95 * 100.0, rhi95 * 100.0, t.node
            ),
        });
    }
    (out, flagged.into_iter().collect())
}
