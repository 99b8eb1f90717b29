//! The live view's ledger of a multi-node job is the report's: each node's snapshot carries
//! its recording as the ledger reads it (`NodeFigures`), and the merge of the nodes'
//! snapshots adds them up as the report adds up its recordings. A node read without its
//! recording makes the job's ledger unknown, with why, never a partial sum.

use std::path::{Path, PathBuf};

use slurmwatch_core::analysis::ledger::NodeFigures;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::report::{self, NodeRecording};
use slurmwatch_core::sample::Source;
use slurmwatch_core::snapshot::{self, JobFacts, Snapshot, SnapshotSource};
use slurmwatch_core::snapshot_merge;
use slurmwatch_core::store::{JobMeta, Reader, Writer};

const T0: i64 = 1_700_000_000_000;

/// `node`'s file: `rows` 5-s rows from `start_s`, `cores` busy of 8, memory stalls `mem`
/// of each second.
fn file(dir: &Path, node: &str, start_s: i64, rows: i64, cores: f64, mem: f64) -> PathBuf {
    let path = dir.join(format!("88.{node}.sqlite"));
    let meta = JobMeta {
        job_id: 88,
        user: "alice".into(),
        uid: 1000,
        node: node.into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(8),
        memory_allocated_bytes: None,
        started_unix_ms: T0,
        incarnation: None,
    };
    let mut w = Writer::create(&path, &meta).unwrap();
    w.begin_step(if start_s == 0 { "batch" } else { "0" }, T0, Some(1))
        .unwrap();
    for i in 0..rows {
        let t = T0 + (start_s + i * 5) * 1000;
        let mut r = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some((i as f64 * 5.0 * cores * 1e6) as u64);
        r.usage.pressure.memory_some_total_usec = Some((i as f64 * 5.0 * mem * 1e6) as u64);
        r.usage.pressure.cpu_some_total_usec = Some(i as u64 * 1000);
        r.cores_allocated = Some(8);
        w.push(r);
    }
    w.close().unwrap();
    path
}

/// One node's live snapshot of its file, as the dashboard's feed builds it.
fn live(path: &Path) -> Snapshot {
    let reader = Reader::open(path).unwrap();
    let meta = reader.meta().unwrap();
    let rows = reader.samples(&Series::Job).unwrap();
    let facts = JobFacts::default();
    let mut s = snapshot::from_rows(SnapshotSource::PluginFile, Some(&meta), &facts, &rows, true);
    let figures = NodeFigures::read(&reader, &meta, &rows).map_err(|e| e.to_string());
    snapshot::set_ledger(&mut s, figures);
    s
}

#[test]
fn the_merged_live_ledger_is_the_reports() {
    let dir = tempfile::tempdir().unwrap();
    let a = file(dir.path(), "sw1", 0, 25, 6.0, 0.25);
    let b = file(dir.path(), "sw2", 10, 21, 2.0, 0.05);
    let recs = vec![
        NodeRecording::load(&a).unwrap(),
        NodeRecording::load(&b).unwrap(),
    ];
    let report = report::build("88", &recs, None, None, None);
    let per_node = vec![
        ("sw1".to_string(), Ok(live(&a))),
        ("sw2".to_string(), Ok(live(&b))),
    ];
    let merged = snapshot_merge::merge(&per_node).unwrap();
    let l = merged.ledger.value.expect("a ledger over both nodes");
    assert_eq!(Some(&l), report.ledger.as_ref());
    // Both nodes' figures: 16 cores over the job's span, 120 s.
    assert_eq!(
        (l.from_unix_ms, l.to_unix_ms),
        (Some(T0), Some(T0 + 120_000))
    );
    assert_eq!(l.core_seconds_allocated, Some(16.0 * 120.0));
    assert_eq!(l.core_seconds_used, Some(6.0 * 120.0 + 2.0 * 100.0));
    assert_eq!(l.stall_seconds.memory_some, Some(30.0 + 5.0));
    // The selected node's own snapshot keeps its own ledger.
    let one = live(&b).ledger.value.unwrap();
    assert_eq!(one.core_seconds_used, Some(200.0));
}

#[test]
fn a_node_read_without_its_recording_leaves_the_ledger_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let a = file(dir.path(), "sw1", 0, 5, 1.0, 0.0);
    let mut direct = live(&a);
    snapshot::set_ledger(&mut direct, Err("direct readings began late".into()));
    let per_node = vec![
        ("sw1".to_string(), Ok(live(&a))),
        ("sw2".to_string(), Ok(direct)),
    ];
    let m = snapshot_merge::merge(&per_node).unwrap();
    assert_eq!(m.ledger.value, None);
    assert_eq!(
        m.ledger.reason.as_deref(),
        Some("sw2: direct readings began late")
    );
    // A node with no reading at all: the ledger covers the read nodes and says so.
    let per_node = vec![
        ("sw1".to_string(), Ok(live(&a))),
        ("sw3".to_string(), Err("no file for sw3".to_string())),
    ];
    let l = snapshot_merge::merge(&per_node)
        .unwrap()
        .ledger
        .value
        .unwrap();
    assert!(
        l.basis.last().unwrap().contains("1 of 2 nodes") && l.basis.last().unwrap().contains("sw3"),
        "{:?}",
        l.basis
    );
}
