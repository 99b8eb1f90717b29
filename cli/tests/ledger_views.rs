//! Where the allocation went, in every view of the same rows: `--once --json` carries the
//! report's `ledger` key for key and value for value (one owner of the arithmetic,
//! `analysis::ledger`), before and after the epilog stores its summary; a cgroup v1
//! recording has no stall figure (null with why, never 0); the HTML report opens with it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use slurmwatch_core::analysis::summary::summarise_job_file;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::{
    Gpm, GpmUnavailable, GpuCard, GpuError, GpuLedger, GpuSample, IdleTime, Source,
};
use slurmwatch_core::store::{JobMeta, Writer};

const T0: i64 = 1_700_000_000_000;
const JOB_ID: u32 = 777;
const ROWS: u64 = 24;

fn meta(source: Source) -> JobMeta {
    JobMeta {
        job_id: JOB_ID.into(),
        user: "alice".into(),
        uid: 1000,
        node: "node1".into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 5,
        source,
        cores_allocated: Some(4),
        memory_allocated_bytes: Some(8 << 30),
        started_unix_ms: T0,
        incarnation: Some("boot:1".into()),
    }
}

/// Row `i`: 1.5 cores busy; on cgroup v2 the PSI totals climb (memory 20 % of the time,
/// some task; 5 % all tasks; I/O 2 %; CPU 0.4 %).
fn row(i: u64, v2: bool) -> SampleRow {
    let mut r = SampleRow::empty(T0 + i as i64 * 5_000, Series::Job, SampleKind::Periodic);
    let u = &mut r.usage;
    u.cpu_usage_usec = Some(1_000_000 + i * 7_500_000);
    u.memory_working_set_bytes = Some(2 << 30);
    u.memory_limit_bytes = Some(8 << 30);
    if v2 {
        let p = &mut u.pressure;
        p.memory_some_total_usec = Some(500 + i * 1_000_000);
        p.memory_full_total_usec = Some(i * 250_000);
        p.io_some_total_usec = Some(i * 100_000);
        p.io_full_total_usec = Some(i * 33_333);
        p.cpu_some_total_usec = Some(i * 20_000);
        p.cpu_full_total_usec = Some(0);
    }
    r.cores_allocated = Some(4);
    r
}

fn card(i: u32, name: &str) -> GpuCard {
    GpuCard {
        uuid: format!("GPU-{i}"),
        cuda_index: Some(i),
        nvml_index: i,
        pci_bus_id: None,
        name: Some(name.into()),
        memory_total_bytes: Some(80 << 30),
        sm_clock_max_mhz: Some(1_980),
        power_limit_watts: Some(700.0),
        nvlink_links: None,
    }
}

/// Reading `i` of card `c`: card 0 (Hopper) is held by the power brake 1.2 s a reading and
/// has GPM; card 1 has no GPM on this card, heat holds it 0.3 s a reading and it runs no
/// kernel 4 s of each 5.
fn reading(c: u32, i: u64) -> GpuSample {
    let mut s = GpuSample::all_failed(GpuError::NotSupported);
    s.utilization_percent = Ok(if c == 0 { 90 } else { 10 });
    s.energy_millijoules = Ok(i * 1_500_000);
    s.ledger = GpuLedger::all_failed(GpuError::NotSupported);
    s.ledger.violation_ns[0] = Ok(if c == 0 { i * 1_200_000_000 } else { 0 });
    s.ledger.violation_ns[1] = Ok(if c == 1 { i * 300_000_000 } else { 0 });
    s.ledger.idle = Ok(IdleTime {
        no_work_us: if c == 0 { 250_000 } else { 4_000_000 },
        covered_us: 5_000_000,
    });
    s.ledger.gpm = match (c, i) {
        (1, _) => Err(GpmUnavailable::NotThisCard),
        (_, 0) => Err(GpmUnavailable::FirstSample),
        _ => Ok(Gpm {
            sm_active_percent: Some(60.0 + (i % 3) as f64),
            sm_occupancy_percent: Some(30.0),
            tensor_active_percent: Some(45.5),
            dram_bw_util_percent: Some(71.25),
        }),
    };
    s
}

/// A running job's recording (no end row, no summary) in `dir`, as the plugin writes it.
fn recording(dir: &Path, source: Source) -> PathBuf {
    let path = dir.join(format!("{JOB_ID}.sqlite"));
    let v2 = source == Source::CgroupV2;
    let mut w = Writer::create(&path, &meta(source)).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    let cards = if v2 {
        vec![
            card(0, "NVIDIA H100 80GB HBM3"),
            card(1, "NVIDIA A100-SXM4-80GB"),
        ]
    } else {
        Vec::new()
    };
    let ids = w.register_gpus("batch", T0, &cards, &[]).unwrap();
    for i in 0..ROWS {
        w.push(row(i, v2));
        for (c, (id, _)) in ids.iter().enumerate() {
            w.push_gpu(T0 + i as i64 * 5_000, *id, reading(c as u32, i));
        }
        w.flush().unwrap();
    }
    w.close().unwrap();
    path
}

fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .args(args)
        .env("TZ", "UTC")
        .env("NO_COLOR", "1")
        .env("SLURMWATCH_SITE_FILE", "")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn report_json(path: &Path) -> Value {
    let p = path.to_str().unwrap();
    let id = JOB_ID.to_string();
    let args = [
        "report",
        &id,
        "--file",
        p,
        "--no-sacct",
        "--no-log",
        "--json",
    ];
    serde_json::from_str(&run(&args)).unwrap()
}

fn once_json(path: &Path) -> Value {
    serde_json::from_str(&run(&[
        "--file",
        path.to_str().unwrap(),
        "--once",
        "--json",
    ]))
    .unwrap()
}

#[test]
fn once_json_carries_the_reports_ledger_for_the_same_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), Source::CgroupV2);
    let (report, once) = (report_json(&path), once_json(&path));
    assert_eq!(report["summary_stored"], false);
    let l = &once["ledger"];
    assert_eq!(
        *l, report["ledger"],
        "--once --json and report --json differ"
    );
    assert_eq!(once["ledger_covers"], "so_far", "a running job's is so far");
    // The figures are the rows' own: 23 intervals of 5 s, 4 cores, 1.5 busy.
    assert_eq!(l["to_unix_ms"], T0 + 115_000);
    assert_eq!(l["core_seconds_allocated"], 460.0);
    assert_eq!(l["core_seconds_used"], 173.5);
    let share = &l["stall_share_of_wall"];
    assert_eq!(share["memory_some"], 0.2);
    assert_eq!(share["memory_full"], 0.05);
    assert_eq!(l["stalls_unavailable"], Value::Null);
    // Per card: the power brake on the Hopper card, heat and no work on the other; GPM on
    // the Hopper card only, the other says why.
    assert_eq!(l["gpu_held_seconds"]["power"], 27.6);
    assert_eq!(l["gpus"][1]["held_seconds"]["thermal"], 6.9);
    assert_eq!(l["gpus"][1]["no_work_seconds"], 92.0);
    assert_eq!(l["gpus"][0]["gpm"]["tensor_active_percent"], 45.5);
    assert_eq!(l["gpus"][1]["gpm"], Value::Null);
    assert_eq!(
        l["gpus"][1]["gpm_unavailable"],
        "not available on this card"
    );

    // The epilog's stored summary: both read it, still the same.
    summarise_job_file(dir.path(), JOB_ID).unwrap();
    let (report, once) = (report_json(&path), once_json(&path));
    assert_eq!(report["summary_stored"], true);
    assert_eq!(once["ledger"], report["ledger"]);
    assert_eq!(
        once["ledger"], *l,
        "the stored summary gives the same ledger"
    );
}

#[test]
fn a_cgroup_v1_recording_has_no_stall_figure_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), Source::CgroupV1);
    let (report, once) = (report_json(&path), once_json(&path));
    let l = &once["ledger"];
    assert_eq!(*l, report["ledger"]);
    for (k, v) in l["stall_seconds"].as_object().unwrap() {
        assert_eq!(*v, Value::Null, "{k}: unknown is null, never 0");
    }
    let why = l["stalls_unavailable"].as_str().unwrap();
    assert!(why.contains("cgroup v1"), "{why}");
    // No card recorded: no GPU figure at all, not a zero.
    assert_eq!(l["gpu_seconds"], Value::Null);
    assert_eq!(l["gpus"], Value::Array(Vec::new()));
}

#[test]
fn the_html_report_opens_with_the_ledger_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), Source::CgroupV2);
    let html = dir.path().join("r.html");
    let id = JOB_ID.to_string();
    run(&[
        "report",
        &id,
        "--file",
        path.to_str().unwrap(),
        "--no-sacct",
        "--no-log",
        "--html",
        html.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&html).unwrap();
    let ledger = html
        .find("WHERE THE ALLOCATION WENT")
        .expect("the ledger section");
    assert!(ledger < html.find("<figure>").unwrap(), "before the charts");
    assert_eq!(html.matches("WHERE THE ALLOCATION WENT").count(), 1);
    assert!(html.contains("20.0% on memory (some task, all tasks 5.0%)"));
    assert!(html.contains("with no work resident"));
    assert!(!html.contains("<script"));
}
