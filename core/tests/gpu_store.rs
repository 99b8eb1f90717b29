//! GPU rows through the writer and back: the reader's full and tail reads and the
//! `gpu_readings` view give back exactly what was stored (None stays None with its error,
//! 0 stays 0), across NULL gaps in the per-card delta chains.

use slurmwatch_core::sample::{GpuCard, GpuError, GpuProcesses, GpuSample, NvlinkCounters, Source};
use slurmwatch_core::store::{JobMeta, Reader, Writer};

const GIB: u64 = 1 << 30;

fn sample(i: u64) -> GpuSample {
    GpuSample {
        utilization_percent: Ok((i * 37 % 101) as u32),
        memory_utilization_percent: Ok(0),
        memory_used_bytes: Ok(61 * GIB + i * (2 << 20)),
        power_draw_milliwatts: Ok(500_000 + i as u32 * 7),
        power_limit_milliwatts: Ok(700_000),
        temperature_celsius: Ok(55),
        sm_clock_mhz: Ok(1_600),
        throttle_reasons: Ok(if i.is_multiple_of(2) { 4 } else { 0 }),
        energy_millijoules: Ok(i64::MAX as u64 - 100 + i),
        processes: Ok(GpuProcesses {
            job_processes: 1,
            job_memory_bytes: 60 * GIB,
            other_processes: 0,
            other_memory_bytes: 0,
        }),
        ecc_uncorrected: Ok(0),
        nvlink: Ok(NvlinkCounters {
            tx_kib: i * 50_000_000,
            rx_kib: 0,
        }),
        pcie_tx_kib_per_s: Ok(0),
        pcie_rx_kib_per_s: Ok(u32::MAX),
        ledger: slurmwatch_core::sample::GpuLedger::all_failed(GpuError::NotSupported),
        xid_errors: Ok(if i == 3 { vec![79, 0, 119] } else { vec![] }),
    }
}

/// None stays None (with its error), 0 stays 0, across NULL gaps in every chain, for
/// the full read, the tail read and the view.
#[test]
fn gpu_rows_round_trip_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let meta = JobMeta {
        job_id: 1,
        user: "u".into(),
        uid: 1000,
        node: "n".into(),
        cluster: None,
        plugin_version: "t".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: None,
        memory_allocated_bytes: None,
        started_unix_ms: 1_000_000,
        incarnation: None,
    };
    let mut w = Writer::create(&path, &meta).unwrap();
    let card = |i: u32| GpuCard {
        uuid: format!("GPU-{i}"),
        cuda_index: Some(i),
        nvml_index: i,
        pci_bus_id: None,
        name: None,
        memory_total_bytes: Some(80 * GIB),
        sm_clock_max_mhz: Some(1980),
        power_limit_watts: Some(700.0),
        nvlink_links: Some(0),
    };
    let ids = w
        .register_gpus("batch", 1_000_000, &[card(0), card(1)], &[])
        .unwrap();
    let mut want: Vec<Vec<(i64, GpuSample)>> = vec![vec![], vec![]];
    for i in 0..8u64 {
        for (c, (id, _)) in ids.iter().enumerate() {
            let mut s = sample(i + c as u64);
            match (i, c) {
                (2, 0) => s = GpuSample::all_failed(GpuError::GpuIsLost),
                (4, 0) => {
                    s.power_draw_milliwatts = Err(GpuError::NotSupported);
                    s.processes = Err(GpuError::NoPermission);
                    s.xid_errors = Err(GpuError::Unknown);
                }
                (5, 1) => s.energy_millijoules = Ok(0),
                _ => {}
            }
            // A clock that stepped back keeps its time.
            let t = 1_000_000 + 5000 * i as i64 - if i == 6 { 12_000 } else { 0 };
            w.push_gpu(t, *id, s.clone());
            want[c].push((t, s));
        }
        if i % 3 == 2 {
            w.flush().unwrap();
        }
    }
    w.close().unwrap();
    let r = Reader::open(&path).unwrap();
    for (c, (id, _)) in ids.iter().enumerate() {
        let got: Vec<(i64, GpuSample)> = r
            .gpu_samples(*id)
            .unwrap()
            .into_iter()
            .map(|row| (row.t_unix_ms, row.sample))
            .collect();
        assert_eq!(got, want[c]);
        for n in [1u32, 3, 8, 20] {
            let tail: Vec<(i64, GpuSample)> = r
                .gpu_last(*id, n)
                .unwrap()
                .into_iter()
                .map(|row| (row.t_unix_ms, row.sample))
                .collect();
            let k = want[c].len().saturating_sub(n as usize);
            assert_eq!(tail, want[c][k..], "last {n}");
        }
    }
    // The view in plain units, row for row.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let mut q = conn
        .prepare(
            "SELECT t_unix_ms, power_draw_watts, power_draw_error, energy_joules,
                    memory_used_bytes, job_memory_bytes, nvlink_tx_bytes,
                    pcie_tx_bytes_per_second, pcie_rx_bytes_per_second, xid_events,
                    xid_codes, xid_error
             FROM gpu_readings WHERE gpu = 'cuda:0'",
        )
        .unwrap();
    type Cells = (
        i64,
        Option<f64>,
        Option<String>,
        Option<f64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<String>,
        Option<String>,
    );
    let view: Vec<Cells> = q
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
                r.get(10)?,
                r.get(11)?,
            ))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(view.len(), 8);
    for ((t, s), v) in want[0].iter().zip(&view) {
        assert_eq!(v.0, *t);
        assert_eq!(
            v.1,
            s.power_draw_milliwatts
                .as_ref()
                .ok()
                .map(|m| f64::from(*m) / 1000.0)
        );
        assert_eq!(
            v.2.as_deref(),
            s.power_draw_milliwatts.as_ref().err().map(|e| e.name())
        );
        let clamp = |v: u64| v.min(i64::MAX as u64) as f64 / 1000.0;
        assert_eq!(v.3, s.energy_millijoules.as_ref().ok().map(|e| clamp(*e)));
        let b = |x: u64| Some(x as i64);
        assert_eq!(v.4, s.memory_used_bytes.as_ref().ok().and_then(|m| b(*m)));
        assert_eq!(
            v.5,
            s.processes
                .as_ref()
                .ok()
                .and_then(|p| b(p.job_memory_bytes))
        );
        assert_eq!(v.6, s.nvlink.as_ref().ok().and_then(|n| b(n.tx_kib * 1024)));
        assert_eq!(v.7, s.pcie_tx_kib_per_s.as_ref().ok().map(|_| 0));
        let x = s.xid_errors.as_ref().ok();
        assert_eq!(v.9, x.map(|x| x.len() as i64));
        let codes = x
            .filter(|x| !x.is_empty())
            .map(|x| x.iter().map(u64::to_string).collect::<Vec<_>>().join(","));
        assert_eq!(v.10, codes);
        assert_eq!(
            v.11.as_deref(),
            s.xid_errors.as_ref().err().map(|e| e.name())
        );
    }
}
