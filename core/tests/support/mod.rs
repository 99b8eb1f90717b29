//! A small real recording for the hostile-file tests: written by the real [`Writer`] as the
//! plugin writes (steps, job and step rows, events, one GPU card), then attacked on a copy.

#![allow(dead_code)] // each test binary uses part of it

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use slurmwatch_core::analysis::summary::summarise_job_file;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::{GpuCard, GpuProcesses, GpuSample, NvlinkCounters, Source};
use slurmwatch_core::store::{JobMeta, Reader, Writer};

pub const T0: i64 = 1_700_000_000_000;
pub const JOB_ID: u32 = 777;

/// What every call on a hostile file must stay within: the epilog's bound, with room for a
/// loaded test machine.
pub const BOUND: Duration = Duration::from_secs(12);

fn meta() -> JobMeta {
    job_meta(JOB_ID.into(), 1000)
}

/// A job's meta as the plugin writes it: `job_id`, its user `uid`, one node.
pub fn job_meta(job_id: u64, uid: u32) -> JobMeta {
    JobMeta {
        job_id,
        user: "alice".into(),
        uid,
        node: "node1".into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(4),
        memory_allocated_bytes: Some(8 << 30),
        started_unix_ms: T0,
        incarnation: Some("boot:1".into()),
    }
}

fn row(i: u64, series: Series) -> SampleRow {
    let mut r = SampleRow::empty(T0 + i as i64 * 5_000, series, SampleKind::Periodic);
    let u = &mut r.usage;
    u.cpu_usage_usec = Some(i * 3_000_000 + i % 7);
    u.cpu_user_usec = Some(i * 2_700_000);
    u.cpu_system_usec = Some(i * 300_000 + i % 7);
    u.memory_usage_bytes = Some((3 << 30) + (i % 11) * 4096);
    u.memory_cache_bytes = Some(1 << 30);
    u.memory_working_set_bytes = Some((2 << 30) + (i % 11) * 4096);
    u.memory_lifetime_peak_bytes = Some(4 << 30);
    u.memory_limit_bytes = Some(8 << 30);
    u.memory_oom_kills = Some(u64::from(i > 30));
    u.io_read_bytes = Some(i * 1_000_000);
    u.io_write_bytes = Some(i * 1000);
    u.processes = Some(3 + i % 2);
    u.threads = Some(9);
    u.pressure.cpu_some_avg10 = Some((i % 10) as f64 / 100.0);
    r.cores_allocated = Some(4);
    r.memory_working_set_max_bytes = Some((2 << 30) + 12 * 4096);
    r.effective_cores_max = Some(0.5 + (i % 3) as f64);
    r.sampler_cpu_usec = Some(i * 50);
    r.sampler_bytes_written = Some(i * 60);
    r
}

fn gpu_sample(i: u64) -> GpuSample {
    GpuSample {
        utilization_percent: Ok((i * 37 % 101) as u32),
        memory_utilization_percent: Ok(3),
        memory_used_bytes: Ok((10 << 30) + i * (1 << 20)),
        power_draw_milliwatts: Ok(200_000 + i as u32),
        power_limit_milliwatts: Ok(300_000),
        temperature_celsius: Ok(50),
        sm_clock_mhz: Ok(1_400),
        throttle_reasons: Ok(0),
        energy_millijoules: Ok(i * 1_000_000),
        processes: Ok(GpuProcesses {
            job_processes: 1,
            job_memory_bytes: 9 << 30,
            other_processes: 0,
            other_memory_bytes: 0,
        }),
        ecc_uncorrected: Ok(0),
        nvlink: Ok(NvlinkCounters {
            tx_kib: i,
            rx_kib: i,
        }),
        pcie_tx_kib_per_s: Ok(0),
        pcie_rx_kib_per_s: Ok(0),
        ledger: slurmwatch_core::sample::GpuLedger::all_failed(
            slurmwatch_core::sample::GpuError::NotSupported,
        ),
        xid_errors: Ok(if i == 5 { vec![79] } else { vec![] }),
    }
}

/// Writes a recording of `rows` intervals to `<dir>/<JOB_ID>.sqlite`: batch with a
/// concurrent step 0 for a while (both series stored), one card, an OOM event. Small on
/// purpose: the mutation run opens thousands of copies.
pub fn recording(dir: &Path, rows: u64) -> PathBuf {
    let path = dir.join(format!("{JOB_ID}.sqlite"));
    let mut w = Writer::create(&path, &meta()).unwrap();
    w.begin_step("extern", T0 - 10, None).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    w.begin_step("0", T0 + 5_000, Some(4)).unwrap();
    let card = GpuCard {
        uuid: "GPU-0".into(),
        cuda_index: Some(0),
        nvml_index: 0,
        pci_bus_id: Some("0000:01:00.0".into()),
        name: Some("Fake".into()),
        memory_total_bytes: Some(40 << 30),
        sm_clock_max_mhz: Some(1_980),
        power_limit_watts: Some(300.0),
        nvlink_links: Some(0),
    };
    let ids = w.register_gpus("batch", T0, &[card], &[]).unwrap();
    for i in 0..rows {
        w.push(row(i, Series::Job));
        if i % 2 == 0 {
            w.push(row(i, Series::step("batch")));
            w.push(row(i, Series::step("0")));
        }
        w.push_gpu(T0 + i as i64 * 5_000, ids[0].0, gpu_sample(i));
        if i % 6 == 5 {
            w.flush().unwrap();
        }
    }
    w.event(
        T0 + 31 * 5_000,
        Some("batch"),
        "oom_kill",
        "1 process killed",
    )
    .unwrap();
    w.end_step("0", T0 + rows as i64 * 5_000, Some(0)).unwrap();
    w.end_step("batch", T0 + rows as i64 * 5_000, Some(0))
        .unwrap();
    w.close().unwrap();
    path
}

/// Everything a reader of the file does, through the public API: open, every read, and the
/// summary. `Err` carries the first refusal's message.
pub fn read_everything(path: &Path) -> Result<(), String> {
    let r = Reader::open(path).map_err(|e| e.to_string())?;
    let e = |e: slurmwatch_core::error::Error| e.to_string();
    r.meta().map_err(e)?;
    let steps = r.steps().map_err(e)?;
    r.events().map_err(e)?;
    for s in r.series().map_err(e)? {
        r.samples(&s).map_err(e)?;
    }
    for g in r.gpus().map_err(e)? {
        r.gpu_samples(g.id).map_err(e)?;
        r.gpu_last(g.id, 2).map_err(e)?;
        r.gpu_xids(g.id, 10).map_err(e)?;
    }
    r.gpu_links().map_err(e)?;
    slurmwatch_core::store::summary::read(&r).map_err(e)?;
    slurmwatch_core::analysis::summary::from_reader(&r).map_err(e)?;
    drop(steps);
    Ok(())
}

/// Runs `f` on its own thread and fails the test if it has not returned within [`BOUND`]
/// (a hang must fail the test, not stall it).
pub fn within<T: Send + 'static>(
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> (T, Duration) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let t = Instant::now();
        let r = f();
        let _ = tx.send((r, t.elapsed()));
    });
    match rx.recv_timeout(BOUND) {
        Ok(r) => r,
        Err(_) => panic!("{what}: still running after {BOUND:?}"),
    }
}

/// The three ways root meets a file: every read, a later step's writer, the epilog's
/// summariser — in that order, each within [`BOUND`]. Err: the message it refused with.
pub fn every_opener(path: &Path) -> [Result<(), String>; 3] {
    let p = path.to_path_buf();
    let (read, _) = within("reading", move || read_everything(&p));
    let p = path.to_path_buf();
    let (write, _) = within("a later writer", move || {
        let mut w = Writer::open_existing(&p).map_err(|e| e.to_string())?;
        w.push(row(1000, Series::step("1")));
        w.flush().map_err(|e| e.to_string())
    });
    let p = path.to_path_buf();
    let (summary, _) = within("the summariser", move || summarise(&p));
    [read, write, summary]
}

/// The epilog's call for the job file at `path` (`<spool>/<job id>.sqlite`).
pub fn summarise(path: &Path) -> Result<(), String> {
    let job: u32 = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("<job id>.sqlite");
    summarise_job_file(path.parent().unwrap(), job)
        .map(|_| ())
        .map_err(|e| e.to_string())
}
