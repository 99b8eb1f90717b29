//! What `slurmwatch cards` costs over a site's month of summaries from slurmdbd: decoding
//! each job's `SW1:` AdminComment (`analysis::admin_comment::decode`) and the cross-job analysis
//! (`fleet::cards::analyse`). Generated fleet: `CARDS_NODES` nodes (default 250) of 4 cards,
//! `CARDS_JOBS` recorded GPU jobs (default 100,000, one node each); one card in 100 is held
//! back in 60 % of its jobs, every other card in 2 %. Prints the time of each stage and how
//! many cards were named (which must be the bad ones).
//!
//! `cargo run --release -p slurmwatch-core --example cards_cost`

use std::time::Instant;

use slurmwatch_core::analysis::admin_comment::{decode, encode, JobSummaryRecord, NodeSummary};
use slurmwatch_core::analysis::summary::{GpuSummary, Summary, SUMMARY_VERSION};
use slurmwatch_core::fleet::{cards, summaries::card_job};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::JobMeta;

fn env(k: &str, d: usize) -> usize {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

/// A small deterministic generator (no rand dependency for an example).
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn card(node: usize, i: u32, held_back: bool) -> GpuSummary {
    GpuSummary {
        label: format!("cuda:{i}"),
        uuid: Some(format!("GPU-{node:05}-{i}")),
        nvml_index: Some(i),
        name: Some("NVIDIA A100-SXM4-80GB".into()),
        sm_clock_max_mhz: Some(1785),
        minutes_throttled: Some(if held_back { 12.0 } else { 0.0 }),
        throttle_reasons: if held_back {
            vec!["hw_slowdown".into()]
        } else {
            Vec::new()
        },
        throttled_readings: Some(if held_back { 144 } else { 0 }),
        throttled_sm_clock_mhz: held_back.then_some(385.0),
        throttled_power_watts: held_back.then_some(163.0),
        throttled_power_limit_watts: held_back.then_some(400.0),
        mean_utilization_percent: Some(80.0),
        ..GpuSummary::default()
    }
}

fn main() {
    let nodes = env("CARDS_NODES", 250);
    let jobs = env("CARDS_JOBS", 100_000);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let t = Instant::now();
    let comments: Vec<String> = (0..jobs)
        .map(|j| {
            let node = (next(&mut rng) % nodes as u64) as usize;
            let gpus = (0..4)
                .map(|i| {
                    let bad = (node * 4 + i as usize) % 100 == 7;
                    let p = if bad { 60 } else { 2 };
                    card(node, i, next(&mut rng) % 100 < p)
                })
                .collect();
            let t0 = 1_790_000_000_000 + j as i64 * 20_000;
            encode(&JobSummaryRecord {
                job_id: j.to_string(),
                nodes: vec![NodeSummary {
                    meta: JobMeta {
                        job_id: j as u64,
                        user: format!("u{}", j % 300),
                        uid: 1000 + (j % 300) as u32,
                        node: format!("gpu{node:04}"),
                        cluster: Some("c".into()),
                        plugin_version: "0.1.0".into(),
                        interval_seconds: 5,
                        source: Source::CgroupV2,
                        cores_allocated: Some(16),
                        memory_allocated_bytes: Some(64 << 30),
                        started_unix_ms: t0,
                        incarnation: None,
                    },
                    steps: Vec::new(),
                    events: Vec::new(),
                    step_figures: Default::default(),
                    summary: Summary {
                        summary_version: SUMMARY_VERSION,
                        last_t_unix_ms: Some(t0 + 3_600_000),
                        gpus,
                        ..Summary::default()
                    },
                }],
                elapsed_seconds: None,
                unanswered_nodes: Vec::new(),
            })
            .unwrap()
        })
        .collect();
    let bytes: usize = comments.iter().map(String::len).sum();
    eprintln!(
        "generated {jobs} AdminComments ({:.0} bytes each) in {:.1} s",
        bytes as f64 / jobs as f64,
        t.elapsed().as_secs_f64()
    );
    let t = Instant::now();
    let card_jobs: Vec<_> = comments
        .iter()
        .flat_map(|c| decode(c).unwrap().nodes)
        .filter_map(|n| card_job(n, "slurmdbd"))
        .collect();
    let decode_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let a = cards::analyse(&card_jobs);
    let analyse_s = t.elapsed().as_secs_f64();
    let named: Vec<_> = a.named_cards().collect();
    let bad = (0..nodes * 4).filter(|k| k % 100 == 7).count();
    println!(
        "{jobs} GPU jobs on {nodes} nodes × 4 cards: decode {:.2} s ({:.1} µs a job), analyse {:.3} s; named {} cards (the {bad} bad ones: {})",
        decode_s,
        decode_s * 1e6 / jobs as f64,
        analyse_s,
        named.len(),
        named.iter().all(|c| {
            let n: usize = c.uuid[4..9].parse().unwrap();
            let i: usize = c.uuid[10..].parse().unwrap();
            (n * 4 + i) % 100 == 7
        })
    );
}
