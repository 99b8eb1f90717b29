//! `slurmwatch --file F --log OUT` end to end over a file the store's writer made: every
//! stored job row is one line, once, in time order (also when there are more rows than one
//! look writes), and `--append` does not write an earlier run's rows again.

use std::path::Path;
use std::process::Command;

use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{JobMeta, Reader, Writer};

const T0: i64 = 1_790_000_000_000;
/// More than one look writes (600), so the log catches up in steps.
const ROWS: i64 = 1_300;

/// A finished job recorded every second: `ROWS` rows, the last an end row.
fn finished_job(path: &Path) {
    let meta = JobMeta {
        job_id: 4242,
        user: "alice".into(),
        uid: 1000,
        node: "cn01".into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 1,
        source: Source::CgroupV2,
        cores_allocated: Some(2),
        memory_allocated_bytes: Some(1 << 30),
        started_unix_ms: T0,
        incarnation: None,
    };
    let mut w = Writer::create(path, &meta).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    for i in 0..ROWS {
        let kind = match i {
            0 => SampleKind::Start,
            i if i == ROWS - 1 => SampleKind::End,
            _ => SampleKind::Periodic,
        };
        let mut r = SampleRow::empty(T0 + i * 1000, Series::Job, kind);
        r.usage.cpu_usage_usec = Some(i as u64 * 1_500_000);
        r.usage.memory_working_set_bytes = Some(100 << 20);
        w.push(r);
        if i % 50 == 0 {
            w.flush().unwrap();
        }
    }
    w.flush().unwrap();
    w.close().unwrap();
}

/// Runs `slurmwatch --file file --log out [extra]` with no Slurm on PATH.
fn log(file: &Path, out: &Path, extra: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .arg("--file")
        .arg(file)
        .arg("--log")
        .arg(out)
        .args(extra)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn every_stored_row_is_one_line_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("4242.sqlite");
    finished_job(&file);
    let stored: Vec<i64> = Reader::open(&file)
        .unwrap()
        .samples(&Series::Job)
        .unwrap()
        .iter()
        .map(|r| r.t_unix_ms)
        .collect();
    assert_eq!(stored.len() as i64, ROWS);

    let out = dir.path().join("run.jsonl");
    log(&file, &out, &[]);
    let times = |text: &str| -> Vec<i64> {
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["reading_unix_ms"].as_i64().unwrap()
            })
            .collect()
    };
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(times(&text), stored, "one line per stored row, in order");
    let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["state"], "ended");
    assert_eq!(last["cpu"]["effective_cores"], 1.5);

    log(&file, &out, &["--append"]);
    let again = std::fs::read_to_string(&out).unwrap();
    assert_eq!(times(&again), stored, "--append writes no row twice");

    let csv = dir.path().join("run.csv");
    log(&file, &csv, &[]);
    log(&file, &csv, &["--append"]);
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert!(lines.next().unwrap().starts_with("reading_unix_ms,"));
    let got: Vec<i64> = lines
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert_eq!(got, stored);
}
