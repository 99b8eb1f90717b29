//! The merged report of a multi-node job from per-node recordings: totals add up, memory
//! stays per node, and the findings that only exist between nodes (a node that recorded
//! nothing, a straggler, memory imbalance) name the node.

use std::path::PathBuf;

use slurmwatch_core::analysis::Summary;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::report::{self, chart, nodes, NodeRecording};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{JobMeta, StepInfo};

const T0: i64 = 1_800_000_000_000;
const MIB: u64 = 1 << 20;

/// A node's recording: `secs` one-second rows burning `cores` with a working set of
/// `ws_mib`, from T0.
fn node(name: &str, cores: f64, ws_mib: u64, secs: i64, batch: bool) -> NodeRecording {
    let rows: Vec<SampleRow> = (0..=secs)
        .map(|i| {
            let mut r = SampleRow::empty(T0 + i * 1000, Series::Job, SampleKind::Periodic);
            r.usage.cpu_usage_usec = Some((cores * 1e6 * i as f64) as u64);
            r.usage.memory_working_set_bytes = Some(ws_mib * MIB * (i as u64).min(5) / 5);
            r.usage.memory_limit_bytes = Some(1024 * MIB);
            r.usage.memory_oom_kills = Some(0);
            r.cores_allocated = Some(2);
            r
        })
        .collect();
    let steps = vec![StepInfo {
        step: if batch { "batch".into() } else { "0".into() },
        started_unix_ms: Some(T0),
        ended_unix_ms: Some(T0 + secs * 1000),
        tasks: Some(1),
        exit_status: Some(0),
    }];
    let summary = Summary::compute(&rows, &steps, &[], &[], Vec::new());
    NodeRecording {
        path: PathBuf::from(format!("/spool/{name}/77.sqlite")),
        origin: Default::default(),
        meta: JobMeta {
            job_id: 77,
            user: "alice".into(),
            uid: 1000,
            node: name.into(),
            cluster: None,
            plugin_version: "test".into(),
            interval_seconds: 1,
            source: Source::CgroupV1,
            cores_allocated: Some(2),
            memory_allocated_bytes: Some(1024 * MIB),
            started_unix_ms: T0,
            incarnation: None,
        },
        steps,
        events: Vec::new(),
        job_rows: rows,
        summary,
        summary_stored: false,
        step_figures: Default::default(),
        phases: Vec::new(),
        progress: Default::default(),
    }
}

fn codes(r: &report::Report) -> Vec<&'static str> {
    r.findings.iter().map(|f| f.code).collect()
}

#[test]
fn two_nodes_merge_and_name_the_heavy_node() {
    // sw2 holds three times sw1's memory; both burn 2 cores.
    let recs = vec![
        node("sw2", 2.0, 450, 20, false),
        node("sw1", 2.0, 150, 20, true),
    ];
    let r = report::build("77", &recs, None, None, None);
    assert_eq!(r.nodes.len(), 2);
    assert_eq!(
        r.cpu.usage_seconds_total,
        Some(80.0),
        "2 nodes × 2 cores × 20 s"
    );
    assert_eq!(r.cpu.cores_allocated, Some(4.0));
    assert_eq!(
        r.cpu.peak_effective_cores,
        Some(4.0),
        "the two nodes at once"
    );
    assert_eq!(
        r.memory.peak_working_set_bytes,
        Some(450 * MIB),
        "per node, not summed"
    );
    assert_eq!(r.memory.peak_working_set_node.as_deref(), Some("sw2"));
    let f = r
        .findings
        .iter()
        .find(|f| f.code == "memory_imbalance")
        .expect("imbalance");
    assert_eq!(f.facts["peak_node"], "sw2");
    assert_eq!(f.facts["low_node"], "sw1");
    assert!((f.facts["ratio"].as_f64().unwrap() - 3.0).abs() < 0.01);
    assert!(f.sentence.contains("sw2"), "{}", f.sentence);
    assert!(!codes(&r).contains(&"straggler_node"), "{:?}", codes(&r));
    // The batch node's file is the primary one; the job's node list names both.
    assert_eq!(r.file.as_deref(), Some("/spool/sw1/77.sqlite"));
    assert_eq!(r.job.node_list.as_deref(), Some("sw[1-2]"));
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["nodes"][0]["node"], "sw1");
    assert_eq!(json["nodes"][0]["peak_working_set_bytes"], 150 * MIB);
    assert_eq!(json["nodes"][1]["peak_working_set_bytes"], 450 * MIB);
    // One chart line per node.
    let svg = chart::svg(&r);
    assert!(svg.contains("id=\"node-sw1-working-set\""));
    assert!(svg.contains("id=\"node-sw2-cores\""));
    assert!(
        !svg.contains("id=\"series-working-set\""),
        "no job line mixing nodes"
    );
    // `--cpus-per-task` from one node (2 cores busy, one task there), not the job's sum of 4.
    let cpt = r
        .sbatch
        .iter()
        .find(|l| l.flag == "--cpus-per-task")
        .unwrap();
    assert_eq!(cpt.value, "2", "{cpt:?}");
    assert!(cpt.reason.contains("the busiest node"), "{cpt:?}");
    let text = report::text::render(&r, false);
    assert!(text.contains("NODES (2 in the allocation)"), "{text}");
    assert!(text.contains("on sw2"), "{text}");
    assert!(text.contains("recordings of 2 of 2 nodes"), "{text}");
}

#[test]
fn the_idle_node_is_a_straggler() {
    let recs = vec![
        node("n1", 2.0, 100, 30, true),
        node("n2", 0.02, 100, 30, false),
        node("n3", 1.9, 100, 30, false),
    ];
    let lines = nodes::lines(&recs, &[]);
    let found = nodes::findings(&lines, &nodes::Grid::of(&recs));
    let s: Vec<_> = found
        .iter()
        .filter(|f| f.code == "straggler_node")
        .collect();
    assert_eq!(s.len(), 1, "{found:?}");
    assert_eq!(s[0].facts["node"], "n2");
    assert!(
        !found.iter().any(|f| f.code == "memory_imbalance"),
        "even memory"
    );
}

#[test]
fn a_node_without_a_file_is_listed_and_said_never_averaged() {
    let recs = vec![
        node("a1", 1.0, 100, 10, true),
        node("a2", 1.0, 100, 10, false),
    ];
    let expected: Vec<String> = ["a1", "a2", "a3"].map(String::from).to_vec();
    let lines = nodes::lines(&recs, &expected);
    assert_eq!(lines.len(), 3);
    assert!(!lines[2].recorded);
    assert_eq!(lines[2].cpu_seconds, None, "unknown, not 0");
    let found = nodes::findings(&lines, &nodes::Grid::of(&recs));
    let f = found
        .iter()
        .find(|f| f.code == "node_not_recorded")
        .expect("said");
    assert_eq!(f.facts["nodes"][0], "a3");
    assert!(
        f.sentence.contains("2 of the job's 3 nodes"),
        "{}",
        f.sentence
    );
}

#[test]
fn one_node_is_the_single_node_report() {
    let recs = vec![node("solo", 1.5, 200, 10, true)];
    let r = report::build("77", &recs, None, None, None);
    assert_eq!(r.nodes.len(), 1);
    assert_eq!(r.nodes[0].node, "solo");
    assert_eq!(r.cpu.usage_seconds_total, Some(15.0));
    assert!(r.node_points.is_empty());
    assert!(chart::svg(&r).contains("id=\"series-working-set\""));
    assert!(!codes(&r).iter().any(|c| c.contains("node")));
}

/// A node whose CPU counter was unreadable makes the job's total unknown: never the other
/// nodes' sum presented as the job's.
#[test]
fn an_unreadable_node_figure_makes_the_total_unknown_not_partial() {
    let mut b = node("b2", 1.0, 100, 10, false);
    b.summary.cpu_usage_seconds_total = None;
    let recs = vec![node("b1", 1.0, 100, 10, true), b];
    let r = report::build("77", &recs, None, None, None);
    assert_eq!(r.cpu.usage_seconds_total, None);
    assert_eq!(r.nodes[0].cpu_seconds, Some(10.0), "b1's own figure stays");
    assert_eq!(r.nodes[1].cpu_seconds, None);
}

/// A counter that had already run before the first reading (the job's cgroup existed before
/// the step began) does not inflate the average: it is the CPU since the first reading over
/// the recorded span, on each node, so it never exceeds the peak of a steady job.
#[test]
fn the_average_counts_cpu_since_the_first_reading() {
    let mut a = node("n1", 1.5, 100, 60, true);
    let mut b = node("n2", 0.5, 100, 60, false);
    for (rec, already_usec) in [(&mut a, 90_000_000u64), (&mut b, 30_000_000)] {
        for r in &mut rec.job_rows {
            r.usage.cpu_usage_usec = r.usage.cpu_usage_usec.map(|c| c + already_usec);
        }
        rec.summary = Summary::compute(&rec.job_rows, &rec.steps, &[], &[], Vec::new());
    }
    let r = report::build("77", &[a, b], None, None, None);
    let avg = r.cpu.average_effective_cores.unwrap();
    assert!((avg - 2.0).abs() < 1e-9, "average {avg}, want 1.5 + 0.5");
    // The lifetime total still includes what ran before the first reading.
    assert_eq!(r.cpu.usage_seconds_total, Some(90.0 + 30.0 + 120.0));
}
