//! The ledger's columns of `gpu_samples` (schema 3) through the writer and back: violation
//! totals to the ms, the no-work time added up per card exactly, GPM in hundredths of a
//! percent, and every unreadable counter NULL with its reason, never 0. A schema-2 file
//! keeps schema 2's columns when a later writer appends GPU rows to it.

use std::path::Path;

use slurmwatch_core::analysis::card_ledger;
use slurmwatch_core::sample::{
    Gpm, GpmUnavailable, GpuCard, GpuError, GpuLedger, GpuSample, IdleTime, Source,
};
use slurmwatch_core::store::{JobMeta, Reader, Writer};

const T0: i64 = 1_000_000;

fn meta() -> JobMeta {
    JobMeta {
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
        started_unix_ms: T0,
        incarnation: None,
    }
}

fn card() -> GpuCard {
    GpuCard {
        uuid: "GPU-0".into(),
        cuda_index: Some(0),
        nvml_index: 0,
        pci_bus_id: None,
        name: Some("NVIDIA H100 80GB HBM3".into()),
        memory_total_bytes: None,
        sm_clock_max_mhz: None,
        power_limit_watts: None,
        nvlink_links: None,
    }
}

/// Reading `i`: power violation climbing 1.5 s a reading (unreadable at 2), the rest
/// unsupported; 1.4 ms idle a reading (so rounding each interval would drift); GPM from
/// the second reading on, a timeout at 3.
fn reading(i: u64) -> GpuSample {
    let mut s = GpuSample::all_failed(GpuError::NotSupported);
    s.energy_millijoules = Ok(5_000_000 + i * 2_000_000);
    s.ledger = GpuLedger::all_failed(GpuError::NotSupported);
    s.ledger.violation_ns[0] = match i {
        2 => Err(GpuError::NoPermission),
        _ => Ok(7_000_000_000 + i * 1_500_000_000),
    };
    s.ledger.violation_ns[6] = Ok(0);
    s.ledger.idle = Ok(IdleTime {
        no_work_us: 1_400,
        covered_us: 5_000_000,
    });
    s.ledger.gpm = match i {
        0 => Err(GpmUnavailable::FirstSample),
        3 => Err(GpmUnavailable::Error(GpuError::Timeout)),
        _ => Ok(Gpm {
            sm_active_percent: Some(12.34 * i as f64),
            sm_occupancy_percent: None,
            tensor_active_percent: Some(0.0),
            dram_bw_util_percent: Some(99.99),
        }),
    };
    s
}

fn write(w: &mut Writer, n: u64) -> i64 {
    let ids = w.register_gpus("batch", T0, &[card()], &[]).unwrap();
    for i in 0..n {
        w.push_gpu(T0 + 5000 * i as i64, ids[0].0, reading(i));
        w.flush().unwrap();
    }
    ids[0].0
}

#[test]
fn ledger_columns_round_trip_and_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let mut w = Writer::create(&path, &meta()).unwrap();
    let id = write(&mut w, 6);
    w.close().unwrap();
    let rows = Reader::open(&path).unwrap().gpu_samples(id).unwrap();
    assert_eq!(rows.len(), 6);
    for (i, r) in rows.iter().enumerate() {
        let want = reading(i as u64).ledger;
        let l = &r.sample.ledger;
        assert_eq!(l.violation_ns, want.violation_ns, "row {i}");
        assert_eq!(l.gpm, want.gpm, "row {i}");
        // Running totals of 1.4 ms a row, rounded once: 1, 3 (2.8), 4, 6 (5.6), 7, 8 (8.4).
        let total = [1, 3, 4, 6, 7, 8][i];
        assert_eq!(r.totals.no_work_ms, Some(total));
        assert_eq!(r.totals.no_work_covered_ms, Some(5_000 * (i as u64 + 1)));
        assert_eq!(
            r.totals.violation_ms[1], None,
            "unsupported is None, never 0"
        );
        assert_eq!(r.totals.violation_ms[6], Some(0), "0 stays 0");
    }
    assert_eq!(rows[2].totals.violation_ms[0], None);
    assert_eq!(rows[3].totals.violation_ms[0], Some(11_500));
    // The reading's interval is the difference of the stored totals.
    assert_eq!(
        rows[1].sample.ledger.idle,
        Ok(IdleTime {
            no_work_us: 2_000,
            covered_us: 5_000_000
        })
    );
    // The window function over the same rows: exact differences at the ends.
    let l = card_ledger(&rows, T0 + 5000, T0 + 25_000).unwrap();
    assert_eq!(l.limiter_seconds[0], Some(6.0));
    assert_eq!(l.no_work_seconds, Some(0.005));
    assert_eq!(l.energy_joules, Some(8_000.0));

    let c = rusqlite::Connection::open(&path).unwrap();
    type Cells = (
        Option<f64>,
        Option<String>,
        Option<f64>,
        Option<f64>,
        Option<String>,
        Option<f64>,
        Option<String>,
    );
    let view: Vec<Cells> = c
        .prepare(
            "SELECT violation_power_seconds, violation_power_error, violation_thermal_seconds,
                    no_work_seconds, no_work_error, gpm_sm_active_percent, gpm_error
             FROM gpu_readings ORDER BY t_unix_ms",
        )
        .unwrap()
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
            ))
        })
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(view[0].0, Some(7.0));
    assert_eq!(
        (view[2].0, view[2].1.as_deref()),
        (None, Some("NO_PERMISSION"))
    );
    assert_eq!((view[1].2, view[1].4.as_deref()), (None, None));
    assert_eq!(view[5].3, Some(0.008));
    assert_eq!(view[0].6.as_deref(), Some("FIRST_READING"));
    assert_eq!((view[1].5, view[1].6.as_deref()), (Some(12.34), None));
    assert_eq!((view[3].5, view[3].6.as_deref()), (None, Some("TIMEOUT")));
    let thermal: Option<String> = c
        .query_row(
            "SELECT violation_thermal_error FROM gpu_readings LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(thermal.as_deref(), Some("NOT_SUPPORTED"));
}

/// GPM on a pre-Hopper card: "not available on this card", in the reading and the view.
#[test]
fn gpm_not_available_reads_back_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let mut w = Writer::create(&path, &meta()).unwrap();
    let ids = w.register_gpus("batch", T0, &[card()], &[]).unwrap();
    for i in 0..3 {
        let mut s = reading(i);
        s.ledger.gpm = Err(GpmUnavailable::NotThisCard);
        w.push_gpu(T0 + 5000 * i as i64, ids[0].0, s);
    }
    w.close().unwrap();
    let rows = Reader::open(&path).unwrap().gpu_samples(ids[0].0).unwrap();
    assert!(rows
        .iter()
        .all(|r| r.sample.ledger.gpm == Err(GpmUnavailable::NotThisCard)));
    let c = rusqlite::Connection::open(&path).unwrap();
    let e: String = c
        .query_row("SELECT gpm_error FROM gpu_readings LIMIT 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(e, "NOT_AVAILABLE_ON_THIS_CARD");
}

/// A schema-2 file (tests/fixtures/store/v2.sqlite) a later step's writer appends GPU rows
/// to: it keeps schema 2's `gpu_samples` columns, and its rows read back exactly, the
/// ledger unreadable (the file has no column for it).
#[test]
fn a_schema_2_file_keeps_its_gpu_columns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.sqlite");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store/v2.sqlite");
    std::fs::copy(&src, &path).unwrap();
    let mut w = Writer::open_existing(&path).unwrap();
    let id = write(&mut w, 4);
    w.close().unwrap();
    let r = Reader::open(&path).unwrap();
    let rows = r.gpu_samples(id).unwrap();
    assert_eq!(rows.len(), 4);
    for (i, row) in rows.iter().enumerate() {
        let mut want = reading(i as u64);
        want.ledger = GpuLedger::all_failed(GpuError::NotSupported);
        assert_eq!(row.sample, want);
        assert_eq!(row.totals, Default::default());
    }
    let c = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let cols: i64 = c
        .query_row(
            "SELECT count(*) FROM pragma_table_info('gpu_samples')",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!((version, cols), (2, 2 + 19 + 1));
    let energy: Vec<f64> = c
        .prepare("SELECT energy_joules FROM gpu_readings")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    assert_eq!(energy, [5_000.0, 7_000.0, 9_000.0, 11_000.0]);
}

/// Reading `i` with jittery counters: a limiter's share of the interval changing, gaps of
/// unreadable rows, covered time above and below the interval.
fn jittery(i: u64) -> GpuSample {
    let mut s = reading(i);
    let mut total = 0;
    for k in 0..=i {
        total += (k * 7919) % 5_000;
    }
    s.ledger.violation_ns[0] = match i % 5 {
        3 => Err(GpuError::Timeout),
        _ => Ok(total * 1_000_000 + i * 499_999),
    };
    s.ledger.violation_ns[7] = Ok(i * i * 1_000_000);
    s.ledger.idle = match i % 7 {
        4 => Err(GpuError::Unknown),
        _ => Ok(IdleTime {
            no_work_us: (i % 3) * 1_000_700,
            covered_us: 5_000_000 + (i % 4) * 166_667 - 250_000,
        }),
    };
    s
}

/// The view, a reopened writer's rows and the last rows read alone all decode the packed
/// ledger (second differences, uncovered time) to the same totals as a full read.
#[test]
fn the_view_a_reopened_writer_and_the_last_rows_agree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.sqlite");
    let mut w = Writer::create(&path, &meta()).unwrap();
    let id = w.register_gpus("batch", T0, &[card()], &[]).unwrap()[0].0;
    for i in 0..30u64 {
        if i == 17 {
            w.close().unwrap();
            w = Writer::open_existing(&path).unwrap();
            w.register_gpus("batch", T0, &[card()], &[]).unwrap();
        }
        w.push_gpu(T0 + 5000 * i as i64, id, jittery(i));
        w.flush().unwrap();
    }
    w.close().unwrap();
    let r = Reader::open(&path).unwrap();
    let rows = r.gpu_samples(id).unwrap();
    assert_eq!(rows.len(), 30);
    for (i, row) in rows.iter().enumerate() {
        let want = jittery(i as u64).ledger.violation_ns;
        let ms = |x: &Result<u64, GpuError>| x.as_ref().ok().map(|ns| (ns + 500_000) / 1_000_000);
        assert_eq!(row.totals.violation_ms[0], ms(&want[0]), "row {i}");
        assert_eq!(row.totals.violation_ms[7], ms(&want[7]), "row {i}");
    }
    assert_eq!(r.gpu_last(id, 4).unwrap(), rows[26..]);
    let c = rusqlite::Connection::open(&path).unwrap();
    let view: Vec<[Option<f64>; 4]> = c
        .prepare(
            "SELECT violation_power_seconds, violation_total_base_clocks_seconds,
                    no_work_seconds, no_work_covered_seconds FROM gpu_readings",
        )
        .unwrap()
        .query_map([], |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?]))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    for (row, v) in rows.iter().zip(&view) {
        let t = &row.totals;
        let want = [
            t.violation_ms[0],
            t.violation_ms[7],
            t.no_work_ms,
            t.no_work_covered_ms,
        ]
        .map(|x| x.map(|ms| ms as f64 / 1000.0));
        assert_eq!(*v, want);
    }
}
