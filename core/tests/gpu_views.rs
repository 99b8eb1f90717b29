//! The views that read the GPU tables: the live snapshot's `gpus[]` and the summary's (and
//! so the report's) per-card figures, findings and `--gres` advice. A file is written through
//! the store's writer with two cards: one held back by a faulty hardware slowdown for a
//! scripted span (the field record: SM 385 of 1785 MHz at 163 of 400 W, 52 °C), one idle
//! while the job holds 40 GB on it.

use slurmwatch_core::analysis::summary;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::render::json;
use slurmwatch_core::report::{self, NodeRecording};
use slurmwatch_core::sample::{GpuCard, GpuError, GpuProcesses, GpuSample, Source};
use slurmwatch_core::snapshot::{self, GpuState, JobFacts, SnapshotSource};
use slurmwatch_core::store::{JobMeta, Reader, Writer};

const GIB: u64 = 1 << 30;
const T0: i64 = 1_700_000_000_000;
/// One reading every 10 s for 20 minutes.
const STEP_MS: i64 = 10_000;
const READINGS: i64 = 121;
/// Card 0 is held back from reading 30 to reading 90 inclusive: 60 intervals, 10 minutes.
const SLOW: std::ops::RangeInclusive<i64> = 30..=90;

fn busy(i: i64) -> GpuSample {
    let slow = SLOW.contains(&i);
    GpuSample {
        utilization_percent: Ok(90),
        memory_utilization_percent: Ok(40),
        memory_used_bytes: Ok(30 * GIB),
        power_draw_milliwatts: Ok(if slow { 163_000 } else { 398_000 }),
        power_limit_milliwatts: Ok(400_000),
        temperature_celsius: Ok(if slow { 52 } else { 71 }),
        sm_clock_mhz: Ok(if slow { 385 } else { 1410 }),
        // Hardware slowdown in the span; at its power cap (healthy) outside it.
        throttle_reasons: Ok(if slow { 0x8 } else { 0x4 }),
        energy_millijoules: Ok(5_000_000_000 + i as u64 * 3_000_000),
        processes: Ok(GpuProcesses {
            job_processes: 1,
            job_memory_bytes: 29 * GIB,
            other_processes: 0,
            other_memory_bytes: 0,
        }),
        ecc_uncorrected: Ok(0),
        nvlink: Err(GpuError::NotSupported),
        pcie_tx_kib_per_s: Ok(0),
        pcie_rx_kib_per_s: Ok(0),
        // The busy card falls off the bus once, at reading 95.
        ledger: slurmwatch_core::sample::GpuLedger::all_failed(GpuError::NotSupported),
        xid_errors: Ok(if i == XID_AT { vec![79] } else { Vec::new() }),
    }
}

const XID_AT: i64 = 95;

fn idle(_i: i64) -> GpuSample {
    GpuSample {
        utilization_percent: Ok(0),
        memory_utilization_percent: Ok(0),
        memory_used_bytes: Ok(41 * GIB),
        power_draw_milliwatts: Ok(60_000),
        power_limit_milliwatts: Ok(400_000),
        temperature_celsius: Ok(33),
        sm_clock_mhz: Ok(210),
        throttle_reasons: Ok(0x1),
        energy_millijoules: Err(GpuError::NotSupported),
        processes: Ok(GpuProcesses {
            job_processes: 1,
            job_memory_bytes: 40 * GIB,
            other_processes: 0,
            other_memory_bytes: 0,
        }),
        ecc_uncorrected: Ok(0),
        nvlink: Err(GpuError::NotSupported),
        pcie_tx_kib_per_s: Ok(0),
        pcie_rx_kib_per_s: Ok(0),
        ledger: slurmwatch_core::sample::GpuLedger::all_failed(GpuError::NotSupported),
        xid_errors: Ok(Vec::new()),
    }
}

fn card(i: u32) -> GpuCard {
    GpuCard {
        uuid: format!("GPU-0000000{i}"),
        cuda_index: Some(i),
        nvml_index: i + 2,
        pci_bus_id: None,
        name: Some("NVIDIA A100-SXM4-80GB".into()),
        memory_total_bytes: Some(80 * GIB),
        sm_clock_max_mhz: Some(1785),
        power_limit_watts: Some(400.0),
        nvlink_links: Some(0),
    }
}

/// Writes the file; the last reading of card 0 has an unreadable power draw.
fn write(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("42.sqlite");
    let meta = JobMeta {
        job_id: 42,
        user: "u".into(),
        uid: 1000,
        node: "n1".into(),
        cluster: None,
        plugin_version: "t".into(),
        interval_seconds: 10,
        source: Source::CgroupV2,
        cores_allocated: Some(4),
        memory_allocated_bytes: Some(64 * GIB),
        started_unix_ms: T0,
        incarnation: None,
    };
    let mut w = Writer::create(&path, &meta).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    let ids = w
        .register_gpus("batch", T0, &[card(0), card(1)], &[])
        .unwrap();
    for i in 0..READINGS {
        let t = T0 + i * STEP_MS;
        let mut r = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some(i as u64 * 10_000_000);
        r.usage.memory_working_set_bytes = Some(8 * GIB);
        r.usage.memory_limit_bytes = Some(64 * GIB);
        r.cores_allocated = Some(4);
        w.push(r);
        let mut b = busy(i);
        if i == READINGS - 1 {
            b.power_draw_milliwatts = Err(GpuError::NotSupported);
        }
        w.push_gpu(t, ids[0].0, b);
        w.push_gpu(t, ids[1].0, idle(i));
        if i % 10 == 9 {
            w.flush().unwrap();
        }
    }
    w.close().unwrap();
    path
}

#[test]
fn summary_and_report_read_the_cards() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path());
    let reader = Reader::open(&path).unwrap();
    let s = summary::from_reader(&reader).unwrap();
    assert_eq!(s.gpus.len(), 2);

    let slow = &s.gpus[0];
    assert_eq!(slow.label, "cuda:0");
    assert_eq!(slow.uuid.as_deref(), Some("GPU-00000000"));
    assert_eq!(slow.name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
    assert_eq!(slow.peak_memory_used_bytes, Some(30 * GIB));
    assert_eq!(slow.peak_power_watts, Some(398.0));
    assert_eq!(slow.peak_temperature_celsius, Some(71.0));
    assert_eq!(slow.mean_utilization_percent, Some(90.0));
    // 120 intervals of 3 kJ.
    assert_eq!(slow.energy_joules, Some(360_000.0));
    let span_min = (SLOW.end() - SLOW.start()) as f64 * STEP_MS as f64 / 60_000.0;
    let m = slow.minutes_throttled.unwrap();
    assert!((m - span_min).abs() < 0.01, "{m} vs {span_min}");
    assert_eq!(slow.throttle_reasons, vec!["hardware_slowdown"]);
    assert_eq!(slow.minutes_idle, Some(0.0));

    let held = &s.gpus[1];
    assert_eq!(held.label, "cuda:1");
    assert_eq!(held.mean_utilization_percent, Some(0.0));
    assert_eq!(held.peak_memory_used_bytes, Some(41 * GIB));
    // No readable energy counter: unknown, never 0.
    assert_eq!(held.energy_joules, None);
    assert_eq!(held.minutes_throttled, Some(0.0));
    assert!(held.throttle_reasons.is_empty());
    let idle_min = (READINGS - 1) as f64 * STEP_MS as f64 / 60_000.0;
    assert!((held.minutes_idle.unwrap() - idle_min).abs() < 0.01);

    // The summary survives the epilog's key/value round trip.
    let back = summary::Summary::from_pairs(&s.to_pairs()).unwrap();
    assert_eq!(back.gpus, s.gpus);

    // The report: findings with their minutes, and `--gres` advice (1 of 2 cards used).
    let rec = NodeRecording::load(&path).unwrap();
    let rep = report::build("42", std::slice::from_ref(&rec), None, None, None);
    assert_eq!(rep.gpus.len(), 2);
    let find = |code: &str| {
        rep.findings
            .iter()
            .find(|f| f.code == code)
            .unwrap_or_else(|| panic!("no {code} in {:?}", rep.findings))
    };
    let t = find("gpu_throttled");
    assert_eq!(t.facts["card"], "cuda:0");
    assert!((t.facts["minutes"].as_f64().unwrap() - span_min).abs() < 0.01);
    assert_eq!(t.facts["reasons"][0], "hardware_slowdown");
    assert!(t.sentence.contains("10 min"), "{}", t.sentence);
    let i = find("gpu_idle");
    assert_eq!(i.facts["card"], "cuda:1");
    assert!((i.facts["minutes"].as_f64().unwrap() - idle_min).abs() < 0.01);
    assert!(
        !rep.findings
            .iter()
            .any(|f| f.code == "gpu_idle" && f.facts["card"] == "cuda:0"),
        "the busy card is not idle"
    );
    let gres = rep.sbatch.iter().find(|l| l.flag == "--gres").unwrap();
    assert_eq!(gres.value, "gpu:1");
    let x = find("gpu_xid");
    assert_eq!(x.facts["card"], "cuda:0");
    assert_eq!(x.facts["xids"], serde_json::json!([79]));
    assert_eq!(x.facts["hardware"], true);
    assert!(x.sentence.contains("fallen off the bus"), "{}", x.sentence);
    assert!(x.sentence.contains("tell your admins"), "{}", x.sentence);
    assert_eq!(rep.gpus[0].xid_events.len(), 1);
    assert!(rep.gpus[1].xid_events.is_empty(), "the idle card had none");
}

#[test]
fn live_snapshot_lists_the_cards() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path());
    let reader = Reader::open(&path).unwrap();
    let meta = reader.meta().unwrap();
    let rows = reader.samples(&Series::Job).unwrap();
    let mut s = snapshot::from_rows(
        SnapshotSource::PluginFile,
        Some(&meta),
        &JobFacts::default(),
        &rows,
        true,
    );
    s.gpus = snapshot::gpus_from_reader(&reader, meta.interval_seconds);
    assert_eq!(s.gpus.len(), 2);
    assert_eq!(s.gpus[0].state, Some(GpuState::Active));
    assert_eq!(s.gpus[1].state, Some(GpuState::IdleHoldingMemory));
    let h = &s.gpus[1].utilization_history;
    assert_eq!(h.len(), snapshot::HISTORY_SLOTS);
    assert!(h.iter().rev().take(100).all(|u| *u == Some(0.0)));

    let v = json::to_value(&s);
    let g = v["gpus"].as_array().unwrap();
    assert_eq!(g.len(), 2);
    let (g0, g1) = (&g[0], &g[1]);
    assert_eq!(g0["cuda_index"], 0);
    assert_eq!(g0["nvml_index"], 2);
    assert_eq!(g0["uuid"], "GPU-00000000");
    assert_eq!(g0["name"], "NVIDIA A100-SXM4-80GB");
    assert_eq!(g0["state"], "active");
    assert_eq!(g0["utilization_percent"], 90.0);
    assert_eq!(g0["memory_used_bytes"], 30 * GIB);
    assert_eq!(g0["memory_total_bytes"], 80 * GIB);
    // The unreadable draw: null with the NVML error as its reason, never 0.
    assert!(g0["power_watts"].is_null());
    assert_eq!(g0["power_watts_reason"], "NOT_SUPPORTED");
    assert_eq!(g0["power_limit_watts"], 400.0);
    assert_eq!(g0["temperature_celsius"], 71.0);
    assert_eq!(g0["sm_clock_mhz"], 1410);
    assert_eq!(g0["sm_clock_max_mhz"], 1785);
    assert_eq!(g0["throttle_reasons"][0], "power_cap");
    assert_eq!(g0["xid_events"][0]["xid"], 79);
    assert_eq!(
        g0["xid_events"][0]["t_unix_ms"],
        T0 + XID_AT * STEP_MS,
        "stamped with the reading that saw it"
    );
    assert_eq!(g[1]["xid_events"], serde_json::json!([]));
    assert_eq!(g1["state"], "idle_holding_memory");
    assert_eq!(g1["utilization_percent"], 0.0);
    // Only "gpu_idle" raised: the card rests, nothing holds it back.
    assert_eq!(g1["throttle_reasons"], serde_json::json!([]));
}

/// The recorded file as the cross-job view's source: one entry with the job's cards, in the
/// window it ran in and in no other; its held-back card keeps the clock and power it ran at.
#[test]
fn the_file_is_a_card_job_for_the_cross_job_view() {
    use slurmwatch_core::fleet::{self, files::Files, JobSource, Window};
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    std::fs::write(dir.path().join("43.sqlite"), b"not a database").unwrap();
    let files = Files::new([dir.path().display().to_string()]);
    let during = Window {
        since_unix_ms: T0 - 1000,
        until_unix_ms: T0 + 1000,
    };
    let g = files.gather(&during);
    assert_eq!((g.read, g.skipped_count), (2, 1), "{:?}", g.skipped);
    assert!(g.skipped[0].contains("43.sqlite"), "{:?}", g.skipped);
    let [j] = &g.jobs[..] else {
        panic!("{:?}", g.jobs)
    };
    assert_eq!((j.job_id.as_str(), j.node.as_str()), ("42", "n1"));
    assert_eq!(j.end_unix_ms, Some(T0 + (READINGS - 1) * STEP_MS));
    let slow = &j.gpus[0];
    assert_eq!(slow.throttled_sm_clock_mhz, Some(385.0));
    assert_eq!(slow.throttled_power_watts, Some(163.0));
    assert_eq!(slow.throttled_power_limit_watts, Some(400.0));
    assert_eq!(slow.throttled_readings, Some(61));
    let a = fleet::cards::analyse(&g.jobs);
    let c = a.cards.iter().find(|c| c.uuid == "GPU-00000000").unwrap();
    assert_eq!((c.held_back, c.jobs, c.held_back_by_xid), (1, 1, 1));
    assert_eq!(c.figures.hardware_xids, [79]);
    let after = Window {
        since_unix_ms: T0 + 3_600_000,
        until_unix_ms: T0 + 7_200_000,
    };
    assert!(files.gather(&after).jobs.is_empty());
}
