//! GPU bookkeeping costs: one reading of a card through the real collector against the
//! fake NVML (tests/fake-nvml), the store's cost per card row, and the size of a 7-day
//! file with 8 cards.
//!
//! ```sh
//! cargo build --release -p fake-nvml          # the fake library the bench loads
//! cargo bench -p slurmwatch-core --bench gpu -- --quick
//! ```
//!
//! `FAKE_NVML_LIB` names another build of the fake. The fake re-checks its state file's
//! mtime on every call, so the read figure is an upper bound on slurmwatch's own cost.

use std::path::PathBuf;
use std::time::Instant;

use criterion::{Criterion, Throughput};
use slurmwatch_core::collect::gpu::{wanted_cards, GpuCollector, GpuEnv};
use slurmwatch_core::sample::{
    Gpm, GpmUnavailable, GpuError, GpuLedger, GpuProcesses, GpuSample, IdleTime, NvlinkCounters,
    Source,
};
use slurmwatch_core::store::{JobMeta, Reader, Writer, MAX_FILE_BYTES};

const T0: i64 = 1_700_000_000_000;
const SAMPLES_7_DAYS: u64 = 7 * 24 * 3600 / 5; // 120,960
const CARDS: usize = 8;
const GIB: u64 = 1 << 30;

fn fake_lib() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("FAKE_NVML_LIB") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    [
        deps.join("../libfake_nvml.so"),
        deps.join("libfake_nvml.so"),
        deps.join("../../debug/libfake_nvml.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

fn meta() -> JobMeta {
    JobMeta {
        job_id: 4242,
        user: "alice".into(),
        uid: 1000,
        node: "node1".into(),
        cluster: None,
        plugin_version: "0.1.0".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(64),
        memory_allocated_bytes: Some(512 << 30),
        started_unix_ms: T0,
        incarnation: None,
    }
}

/// An 8-card NVLink node as the fake serves it.
fn fake_state(dir: &std::path::Path) -> PathBuf {
    let cards: Vec<serde_json::Value> = (0..CARDS as u64)
        .map(|i| {
            serde_json::json!({
                "uuid": format!("GPU-{i:08x}-aaaa-bbbb-cccc-0123456789ab"),
                "name": "NVIDIA H100 80GB HBM3",
                "pci_bus_id": format!("00000000:{:02X}:00.0", 0x18 + i),
                "nvswitch": true, "numa": i / 4, "switch": i / 2,
                "memory_total": 80 * GIB, "memory_used": 61 * GIB,
                "utilization_gpu": 93, "utilization_memory": 48,
                "power_usage_mw": 655_000, "power_limit_mw": 700_000, "temperature": 64,
                "sm_clock": 1755, "sm_clock_max": 1980, "throttle_reasons": 4,
                "energy_mj": 9_876_543_210u64, "ecc_uncorrected_volatile": 0,
                "processes": [ { "pid": 1, "used_memory": 60 * GIB } ],
                "nvlinks": (0..18).map(|l| serde_json::json!({
                    "active": true, "remote_pci_bus_id": format!("00000000:{:02X}:00.0", 0xA0 + l),
                    "tx_kib": 1_000_000 * (l + 1), "rx_kib": 900_000 * (l + 1) })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let p = dir.join("state.json");
    std::fs::write(
        &p,
        serde_json::to_vec(&serde_json::json!({ "devices": cards })).unwrap(),
    )
    .unwrap();
    p
}

/// A busy card's readings over time (deterministic), as the collector would return them:
/// every gauge jumps at random within its range at every reading (the worst case for the
/// file's per-card differences).
fn sample(i: u64, card: u64) -> GpuSample {
    let w = (i * 7919 + card * 104_729) % 97;
    GpuSample {
        utilization_percent: Ok(60 + (w % 40) as u32),
        memory_utilization_percent: Ok(20 + (w % 30) as u32),
        memory_used_bytes: Ok(61 * GIB + w * (2 << 20)),
        power_draw_milliwatts: Ok(500_000 + (w as u32) * 2_000),
        power_limit_milliwatts: Ok(700_000),
        temperature_celsius: Ok(55 + (w % 20) as u32),
        sm_clock_mhz: Ok(1_600 + (w as u32) * 4),
        throttle_reasons: Ok(if w.is_multiple_of(3) { 4 } else { 0 }),
        energy_millijoules: Ok(9_876_543_210 + i * 3_000_000),
        processes: Ok(GpuProcesses {
            job_processes: 1,
            job_memory_bytes: 60 * GIB + w * (2 << 20),
            other_processes: 0,
            other_memory_bytes: 0,
        }),
        ecc_uncorrected: Ok(0),
        nvlink: Ok(NvlinkCounters {
            tx_kib: i * 50_000_000 + w,
            rx_kib: i * 45_000_000 + w,
        }),
        pcie_tx_kib_per_s: Ok(150_000 + (w as u32) * 9_000),
        pcie_rx_kib_per_s: Ok(900_000 + (w as u32) * 21_000),
        ledger: ledger(i, w),
        xid_errors: Ok(if i == 50_000 && card == 3 {
            vec![79]
        } else {
            Vec::new()
        }),
    }
}

/// An H100's ledger counters at reading `i`: the clocks below their application and base
/// clocks most of the time, power capping for a share of it, a kernel always resident but for
/// short gaps, GPM figures moving around their level.
fn ledger(i: u64, w: u64) -> GpuLedger {
    let ns = |ms_per_reading: u64, base: u64| Ok(base + i * ms_per_reading * 1_000_000 + w * 997);
    let mut violation_ns = [Ok(0); 8];
    violation_ns[0] = ns(360, 81_000_000_000);
    violation_ns[6] = ns(4_900, 2_500_000_000_000);
    violation_ns[7] = ns(4_100, 1_900_000_000_000);
    GpuLedger {
        violation_ns,
        idle: Ok(IdleTime {
            no_work_us: if w < 10 { 166_667 } else { 0 },
            covered_us: 5_000_000 + w % 3 * 1_000,
        }),
        gpm: Ok(Gpm {
            sm_active_percent: Some(80.0 + (w % 17) as f64 * 0.37),
            sm_occupancy_percent: Some(40.0 + (w % 13) as f64 * 0.51),
            tensor_active_percent: Some(55.0 + (w % 11) as f64 * 0.73),
            dram_bw_util_percent: Some(30.0 + (w % 7) as f64 * 1.13),
        }),
    }
}

/// A steady training run as a real card reports it: busy 100 %, memory allocated once,
/// power near the limit within a few watts, temperature drifting by a degree, clocks
/// pinned, PCIe traffic around a level.
fn steady(i: u64, card: u64) -> GpuSample {
    let w = (i * 7919 + card * 104_729) % 97;
    GpuSample {
        utilization_percent: Ok(if w < 3 { 96 } else { 100 }),
        memory_utilization_percent: Ok(38 + (w % 5) as u32),
        memory_used_bytes: Ok(61 * GIB),
        power_draw_milliwatts: Ok(688_000 + (w % 13) as u32 * 1_000),
        temperature_celsius: Ok(70 + ((i / 700 + card) % 3) as u32),
        sm_clock_mhz: Ok(if w < 5 { 1_740 } else { 1_755 }),
        throttle_reasons: Ok(4),
        energy_millijoules: Ok(9_876_543_210 + i * 3_450_000 + w * 1000),
        processes: Ok(GpuProcesses {
            job_processes: 1,
            job_memory_bytes: 60 * GIB,
            other_processes: 0,
            other_memory_bytes: 0,
        }),
        pcie_tx_kib_per_s: Ok(1_000_000 + (w % 7) as u32 * 50_000),
        pcie_rx_kib_per_s: Ok(2_000_000 + (w % 11) as u32 * 40_000),
        ..sample(i, card)
    }
}

fn seven_days(nvlink: bool, readings: fn(u64, u64) -> GpuSample, what: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    let cards: Vec<_> = (0..CARDS as u32)
        .map(|i| slurmwatch_core::sample::GpuCard {
            uuid: format!("GPU-{i:08x}"),
            cuda_index: Some(i),
            nvml_index: i,
            pci_bus_id: None,
            name: None,
            memory_total_bytes: Some(80 * GIB),
            sm_clock_max_mhz: Some(1980),
            power_limit_watts: Some(700.0),
            nvlink_links: Some(18),
        })
        .collect();
    let ids = w.register_gpus("batch", T0, &cards, &[]).unwrap();
    let t = Instant::now();
    for i in 0..SAMPLES_7_DAYS {
        for (c, (id, _)) in ids.iter().enumerate() {
            let mut s = readings(i, c as u64);
            if !nvlink {
                s.nvlink = Err(GpuError::NotSupported);
            }
            w.push_gpu(T0 + i as i64 * 5000, *id, s);
        }
        if i % 12 == 11 {
            w.flush().unwrap();
        }
    }
    w.close().unwrap();
    let wall = t.elapsed().as_secs_f64();
    let size = std::fs::metadata(&path).unwrap().len();
    let rows = SAMPLES_7_DAYS * CARDS as u64;
    // Readers refuse a file over MAX_FILE_BYTES (the live file's cap stops it earlier).
    let t = Instant::now();
    let back = if size <= MAX_FILE_BYTES {
        let r = Reader::open(&path).unwrap();
        let n = r.gpu_samples(ids[0].0).unwrap().len();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        format!("one card's week read back ({n} rows) in {ms:.0} ms")
    } else {
        "over the readers' limit: not read back".to_string()
    };
    println!(
        "7-day file, {CARDS} cards at 5 s ({what}, {}): {size} bytes = {:.1} MB, {:.1} bytes per card row; \
         writing {:.1} µs per card row; {back}",
        if nvlink { "NVLink counters" } else { "no NVLink" },
        size as f64 / 1e6,
        size as f64 / rows as f64,
        wall * 1e6 / rows as f64,
    );
}

/// [`sample`] on a card before Hopper: no GPM.
fn ampere(i: u64, card: u64) -> GpuSample {
    let mut s = sample(i, card);
    s.ledger.gpm = Err(GpmUnavailable::NotThisCard);
    s
}

fn main() {
    seven_days(true, sample, "every gauge random");
    seven_days(false, sample, "every gauge random");
    seven_days(true, ampere, "every gauge random, no GPM (before Hopper)");
    seven_days(true, steady, "steady training run");
    seven_days(false, steady, "steady training run");
    let mut c = Criterion::default().sample_size(30).configure_from_args();
    let Some(lib) = fake_lib() else {
        println!("no libfake_nvml.so: run `cargo build --release -p fake-nvml` first (or set FAKE_NVML_LIB)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("FAKE_NVML_STATE", fake_state(dir.path()));
    let env = GpuEnv {
        cuda_visible_devices: Some("0,1,2,3,4,5,6,7".into()),
        ..GpuEnv::default()
    };
    let mut col = GpuCollector::open(&lib, &wanted_cards(&env)).expect("fake NVML opens");
    let mut g = c.benchmark_group("gpu");
    g.throughput(Throughput::Elements(CARDS as u64));
    // Every process on a card is checked against the job as the worker does (a /proc
    // lookup per new pid, remembered while the pid stays on the cards).
    let mut memo = slurmwatch_core::collect::gpu::pids::JobPids::default();
    g.bench_function("read 8 cards (fake NVML, 18 NVLink links each)", |b| {
        b.iter(|| {
            let s = col.read(&mut |pid| memo.owns(std::path::Path::new("/proc"), 4242, &[], pid));
            memo.end_reading();
            s
        })
    });
    let wdir = tempfile::tempdir().unwrap();
    let mut w = Writer::create(&wdir.path().join("job.db"), &meta()).unwrap();
    let ids = w.register_gpus("batch", T0, &col.cards(), &[]).unwrap();
    let mut i = 0u64;
    g.bench_function("store 8 cards (push; flush every 12 samples)", |b| {
        b.iter(|| {
            for (c, (id, _)) in ids.iter().enumerate() {
                w.push_gpu(T0 + i as i64 * 5000, *id, sample(i, c as u64));
            }
            i += 1;
            if i.is_multiple_of(12) {
                w.flush().unwrap();
            }
        })
    });
    g.finish();
    // Per-call costs of one reading of one card.
    col.set_timing(true);
    let mut calls: std::collections::BTreeMap<&str, (u128, u32)> = Default::default();
    for _ in 0..200 {
        col.read(&mut |_| true);
        for (name, d) in col.take_timings() {
            let e = calls.entry(name).or_default();
            e.0 += d.as_nanos();
            e.1 += 1;
        }
    }
    for (name, (ns, n)) in calls {
        println!(
            "  {name:<28} {:>7.2} µs per call (fake)",
            ns as f64 / f64::from(n) / 1e3
        );
    }
    c.final_summary();
}
