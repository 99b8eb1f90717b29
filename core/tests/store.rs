//! The per-job file: round trips, refusals, and the reader's promise not to touch the file.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::{Pressure, Source, UsageReading};
use slurmwatch_core::store::{archive, JobMeta, Reader, Writer};

const T0: i64 = 1_700_000_000_000;

fn meta() -> JobMeta {
    JobMeta {
        job_id: 12345,
        user: "alice".into(),
        uid: 1000,
        node: "node1".into(),
        cluster: Some("c'lus".into()),
        plugin_version: "0.1.0".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(8),
        memory_allocated_bytes: Some(32 << 30),
        started_unix_ms: T0,
        incarnation: Some("boot:1".into()),
    }
}

/// A plausible reading `i` intervals in (memory in whole pages, PSI averages with two
/// decimals and totals in whole ms, as the file keeps them).
fn row(i: u64, series: Series, kind: SampleKind) -> SampleRow {
    SampleRow {
        t_unix_ms: T0 + i as i64 * 5_000 + (i % 3) as i64,
        series,
        kind,
        usage: UsageReading {
            cpu_usage_usec: Some(i * 29_000_000 + i % 7),
            cpu_user_usec: Some(i * 26_000_000),
            cpu_system_usec: Some(i * 3_000_000),
            memory_usage_bytes: Some((5 << 30) + (i % 50) * 4096),
            memory_cache_bytes: Some((1 << 30) + (i % 5) * 4096),
            memory_working_set_bytes: Some((4 << 30) + (i % 45) * 4096),
            memory_lifetime_peak_bytes: Some(6 << 30),
            memory_limit_bytes: Some(32 << 30),
            memory_oom_kills: Some(0),
            memory_limit_hits: Some(0),
            memory_major_faults: Some(i / 10),
            io_read_bytes: Some(i * 1_234_567),
            io_write_bytes: Some(i * 7_654),
            processes: Some(3),
            threads: Some(12 + i % 2),
            pressure: Pressure {
                cpu_some_avg10: Some((i % 400) as f64 / 100.0),
                memory_some_avg10: Some(0.0),
                memory_full_avg10: Some(0.0),
                io_some_avg10: Some(0.31),
                io_full_avg10: None,
                cpu_some_total_usec: Some(i * 61_000 + (i % 5) * 1000),
                cpu_full_total_usec: Some(i * 50_000),
                memory_some_total_usec: Some(i / 10 * 7_000),
                memory_full_total_usec: Some(0),
                io_some_total_usec: Some(i * 2_000),
                io_full_total_usec: None,
            },
        },
        cores_allocated: Some(8),
        memory_working_set_max_bytes: Some((4 << 30) + 100 * 4096),
        effective_cores_max: Some(5.875),
        sampler_cpu_usec: Some(i * 80),
        sampler_bytes_written: Some(i * 70),
    }
}

fn all_zero(t: i64) -> SampleRow {
    let z = Some(0);
    SampleRow {
        t_unix_ms: t,
        series: Series::Job,
        kind: SampleKind::Periodic,
        usage: UsageReading {
            cpu_usage_usec: z,
            cpu_user_usec: z,
            cpu_system_usec: z,
            memory_usage_bytes: z,
            memory_cache_bytes: z,
            memory_working_set_bytes: z,
            memory_lifetime_peak_bytes: z,
            memory_limit_bytes: z,
            memory_oom_kills: z,
            memory_limit_hits: z,
            memory_major_faults: z,
            io_read_bytes: z,
            io_write_bytes: z,
            processes: z,
            threads: z,
            pressure: Pressure {
                cpu_some_avg10: Some(0.0),
                memory_some_avg10: Some(0.0),
                memory_full_avg10: Some(0.0),
                io_some_avg10: Some(0.0),
                io_full_avg10: Some(0.0),
                cpu_some_total_usec: z,
                cpu_full_total_usec: z,
                memory_some_total_usec: z,
                memory_full_total_usec: z,
                io_some_total_usec: z,
                io_full_total_usec: z,
            },
        },
        cores_allocated: Some(0),
        memory_working_set_max_bytes: z,
        effective_cores_max: Some(0.0),
        sampler_cpu_usec: z,
        sampler_bytes_written: z,
    }
}

fn err_text<T>(r: slurmwatch_core::error::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn round_trip_is_exact_and_none_is_not_zero() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    let mut rows: Vec<SampleRow> = (0..40)
        .map(|i| row(i, Series::Job, SampleKind::Periodic))
        .collect();
    rows[0].kind = SampleKind::Start;
    rows[5] = all_zero(rows[5].t_unix_ms);
    rows[6] = SampleRow::empty(rows[6].t_unix_ms, Series::Job, SampleKind::Periodic);
    rows[7].usage.cpu_usage_usec = None; // a hole in a cumulative counter
    rows[8].usage.memory_working_set_bytes = Some(0);
    rows[39].kind = SampleKind::End;
    for (i, r) in rows.iter().enumerate() {
        w.push(r.clone());
        if i % 12 == 11 {
            w.flush().unwrap();
        }
    }
    w.event(T0 + 1, Some("batch"), "oom_kill", "1 process killed")
        .unwrap();
    w.close().unwrap();

    let r = Reader::open(&path).unwrap();
    assert_eq!(r.meta().unwrap(), meta());
    assert_eq!(r.samples(&Series::Job).unwrap(), rows);
    let ev = r.events().unwrap();
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].kind.as_str(), ev[0].step.as_deref()),
        ("oom_kill", Some("batch"))
    );

    // The `samples` view decodes the packed table for sqlite3/pandas users.
    let c = rusqlite::Connection::open(&path).unwrap();
    type ViewRow = (i64, String, Option<i64>, Option<i64>, Option<f64>);
    let got: Vec<ViewRow> = c
        .prepare("SELECT t_unix_ms, kind, cpu_usage_usec, memory_working_set_bytes, pressure_cpu_some_avg10_percent FROM samples WHERE series = 'job'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got.len(), rows.len());
    for (g, w) in got.iter().zip(&rows) {
        assert_eq!(g.0, w.t_unix_ms);
        assert_eq!(g.2, w.usage.cpu_usage_usec.map(|v| v as i64));
        assert_eq!(g.3, w.usage.memory_working_set_bytes.map(|v| v as i64));
        assert_eq!(g.4, w.usage.pressure.cpu_some_avg10);
    }
    assert_eq!(got[0].1, "start");
    assert_eq!(got[6].2, None);
    assert_eq!(got[5].2, Some(0));
}

/// Every step in one pass (`step_samples`), each checked against `samples` step by step.
fn every_step_as_samples_gives_it(r: &Reader, job: &[SampleRow]) -> Vec<(String, Vec<SampleRow>)> {
    let all = r.step_samples(job, |_| true).unwrap();
    for (step, rows) in &all {
        assert_eq!(
            rows,
            &r.samples(&Series::step(step)).unwrap(),
            "step {step}"
        );
    }
    all
}

#[test]
fn single_step_rows_are_filled_from_the_job_and_concurrent_steps_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    let batch = || Series::step("batch");
    w.begin_step("extern", T0, None).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    let mut expect_batch = Vec::new();
    for i in 0..30 {
        let kind = match i {
            0 => SampleKind::Start,
            _ => SampleKind::Periodic,
        };
        w.push(row(i, Series::Job, kind));
        let mut b = row(i, batch(), kind);
        b.usage.processes = Some(2); // differs from the job: only stored rows can show it
        if i == 0 || (11..20).contains(&i) {
            expect_batch.push(b.clone());
        } else {
            let mut j = row(i, batch(), kind);
            j.series = batch();
            expect_batch.push(j);
        }
        w.push(b);
        if (11..20).contains(&i) {
            w.push(row(i, Series::step("0"), SampleKind::Periodic));
        }
        if i == 10 {
            w.flush().unwrap();
            w.begin_step("0", T0 + 10 * 5_000 + 3, Some(4)).unwrap();
        }
        if i == 19 {
            w.flush().unwrap();
            w.end_step("0", T0 + 19 * 5_000 + 500, Some(0)).unwrap();
        }
    }
    let mut end = row(30, batch(), SampleKind::End);
    end.usage.processes = Some(1);
    w.push(end.clone());
    expect_batch.push(end);
    w.end_step("batch", T0 + 30 * 5_000 + 10, Some(0)).unwrap();
    w.close().unwrap();

    let r = Reader::open(&path).unwrap();
    let got = r.samples(&batch()).unwrap();
    assert_eq!(got.len(), expect_batch.len());
    for (g, e) in got.iter().zip(&expect_batch) {
        assert_eq!(g, e, "at t = {}", g.t_unix_ms - T0);
    }
    let zero = r.samples(&Series::step("0")).unwrap();
    assert_eq!(
        zero.len(),
        9,
        "step 0's own rows: never filled while batch ran"
    );
    let steps = r.steps().unwrap();
    assert_eq!(
        steps.iter().map(|s| s.step.as_str()).collect::<Vec<_>>(),
        ["extern", "batch", "0"]
    );
    assert_eq!(steps[2].exit_status, Some(0));
    assert_eq!(steps[2].tasks, Some(4));
    assert!(r.samples(&Series::step("nope")).unwrap().is_empty());
    // Every step at once, from the job series decoded once: the same rows, step by step.
    let job = r.samples(&Series::Job).unwrap();
    let all = every_step_as_samples_gives_it(&r, &job);
    assert_eq!(
        all.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
        ["extern", "batch", "0"]
    );
    assert_eq!(all[1].1, got);
    // Job rows out of time order (a clock stepped back) are all looked at, not a span.
    let mut shuffled = job.clone();
    shuffled.reverse();
    let mut batch_from_shuffled = r
        .step_samples(&shuffled, |_| true)
        .unwrap()
        .swap_remove(1)
        .1;
    batch_from_shuffled.sort_by_key(|r| r.t_unix_ms);
    assert_eq!(batch_from_shuffled, got);
    let c = rusqlite::Connection::open(&path).unwrap();
    let stored: i64 = c
        .query_row(
            "SELECT count(*) FROM samples_packed WHERE series != 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        stored,
        1 + 9 + 1 + 9,
        "batch: start, 9 rows while step 0 ran, end; step 0: 9"
    );
}

/// The live view follows a file as it grows (`Reader::follow` decodes only the rows stored
/// since its last call): at every flush, and after the writer closed the file, each followed
/// series holds exactly what `samples` gives then, a step's rows filled from the job's.
#[test]
fn a_followed_series_gives_what_samples_gives_as_the_file_grows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    w.begin_step("extern", T0, None).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    let r = Reader::open(&path).unwrap();
    let series = [
        Series::Job,
        Series::step("batch"),
        Series::step("0"),
        Series::step("nope"),
    ];
    let mut following: Vec<_> = series.iter().map(|s| r.following(s)).collect();
    let check = |r: &Reader, following: &mut [slurmwatch_core::store::Following], at: &str| {
        for f in following.iter_mut() {
            let s = f.series().clone();
            let got = r.follow(f).unwrap().to_vec();
            assert_eq!(got, r.samples(&s).unwrap(), "{s:?} {at}");
        }
    };
    check(&r, &mut following, "before any row");
    let mut flushes = 0;
    for i in 0..40 {
        let kind = if i == 0 {
            SampleKind::Start
        } else {
            SampleKind::Periodic
        };
        w.push(row(i, Series::Job, kind));
        let mut b = row(i, Series::step("batch"), kind);
        b.usage.processes = Some(2);
        w.push(b);
        if (11..20).contains(&i) {
            w.push(row(i, Series::step("0"), SampleKind::Periodic));
        }
        if i % 7 == 6 || i == 10 || i == 19 {
            w.flush().unwrap();
            flushes += 1;
            check(&r, &mut following, &format!("after row {i}"));
        }
        if i == 10 {
            w.begin_step("0", T0 + 10 * 5_000 + 3, Some(4)).unwrap();
        }
        if i == 19 {
            w.end_step("0", T0 + 19 * 5_000 + 500, Some(0)).unwrap();
        }
    }
    w.push(row(40, Series::step("batch"), SampleKind::End));
    w.end_step("batch", T0 + 40 * 5_000 + 10, Some(0)).unwrap();
    w.close().unwrap();
    check(&r, &mut following, "after close");
    assert!(flushes >= 7);
    let job = r.follow(&mut following[0]).unwrap();
    assert_eq!(job.len(), 40, "every job row, each once");
    assert_eq!(r.follow(&mut following[2]).unwrap().len(), 9);
    assert!(r.follow(&mut following[3]).unwrap().is_empty());
    // A reader opened afresh agrees with the one that followed the whole way.
    let fresh = Reader::open(&path).unwrap();
    for f in following.iter_mut() {
        let s = f.series().clone();
        assert_eq!(r.follow(f).unwrap(), fresh.samples(&s).unwrap(), "{s:?}");
    }
}

/// Every node's file gets a job series: the batch step writes it on its node; on the other
/// nodes of the job (and in an `salloc` job) the earliest step still running does, and a
/// step starting beside it does not take over.
#[test]
fn job_series_writer_is_elected_per_node() {
    let dir = tempfile::tempdir().unwrap();
    // A node of a multi-node batch job that is not the batch host: steps 0 and 1 overlap.
    let path = dir.path().join("other-node.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    w.begin_step("extern", T0, None).unwrap();
    assert!(!w.claims_job_series("extern").unwrap(), "extern never");
    w.begin_step("0", T0 + 1_000, Some(1)).unwrap();
    assert!(
        w.claims_job_series("0").unwrap(),
        "the first step here writes it"
    );
    w.begin_step("1", T0 + 2_000, Some(1)).unwrap();
    assert!(!w.claims_job_series("1").unwrap(), "0 is still running");
    w.end_step("0", T0 + 3_000, Some(0)).unwrap();
    w.begin_step("2", T0 + 4_000, Some(1)).unwrap();
    assert!(
        !w.claims_job_series("2").unwrap(),
        "1 started earlier and runs on"
    );
    w.end_step("1", T0 + 5_000, Some(0)).unwrap();
    w.end_step("2", T0 + 5_000, Some(0)).unwrap();
    w.begin_step("3", T0 + 6_000, Some(1)).unwrap();
    assert!(w.claims_job_series("3").unwrap(), "nothing else runs");
    // The batch host: batch always, a later step never while batch runs.
    let path = dir.path().join("batch-node.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    w.begin_step("0", T0, Some(1)).unwrap();
    assert!(w.claims_job_series("batch").unwrap());
    assert!(!w.claims_job_series("0").unwrap(), "batch writes it");
    // Two steps started in the same millisecond: exactly one (by name) writes it.
    let path = dir.path().join("tie.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    w.begin_step("4", T0, Some(1)).unwrap();
    w.begin_step("5", T0, Some(1)).unwrap();
    assert!(w.claims_job_series("4").unwrap());
    assert!(!w.claims_job_series("5").unwrap());
}

/// A later step of the same job finds the file after a moment with no step running (its
/// incarnation key then differs); a reused job id does not pass for it.
#[test]
fn a_later_step_continues_the_job_and_a_reused_id_does_not() {
    use slurmwatch_core::store::{continues_the_job, StepInfo, CONTINUATION_WINDOW_MS};
    let step = |name: &str, a: i64, b: Option<i64>| StepInfo {
        step: name.into(),
        started_unix_ms: Some(a),
        ended_unix_ms: b,
        tasks: Some(1),
        exit_status: None,
    };
    let now = T0 + 10_000;
    let salloc = [step("0", T0, Some(T0 + 9_000))];
    assert!(
        continues_the_job("1", &salloc, now),
        "the next srun of an salloc job"
    );
    assert!(
        !continues_the_job("0", &salloc, now),
        "a step 0 again: another job"
    );
    assert!(
        !continues_the_job("batch", &salloc, now),
        "batch is always first"
    );
    let running = [step("0", T0, None)];
    assert!(
        !continues_the_job("1", &running, now),
        "0 still runs: the key would match"
    );
    let long_ago = [step("0", T0, Some(T0 + 9_000))];
    assert!(!continues_the_job(
        "1",
        &long_ago,
        T0 + 9_000 + CONTINUATION_WINDOW_MS + 1
    ));
    assert!(!continues_the_job("1", &[], now), "nothing to continue");
}

#[test]
fn reopened_writer_continues_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let rows: Vec<SampleRow> = (0..20)
        .map(|i| row(i, Series::Job, SampleKind::Periodic))
        .collect();
    let mut w = Writer::create(&path, &meta()).unwrap();
    for r in &rows[..10] {
        w.push(r.clone());
    }
    drop(w); // Drop flushes
    let mut w = Writer::open_existing(&path).unwrap();
    for r in &rows[10..] {
        w.push(r.clone());
    }
    w.flush().unwrap();
    // A live reader sees the rows while the writer is still open (WAL).
    assert_eq!(
        Reader::open(&path).unwrap().samples(&Series::Job).unwrap(),
        rows
    );
    w.close().unwrap();
}

#[test]
fn create_refuses_a_symlink_and_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, b"precious").unwrap();
    let link = dir.path().join("job.db");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let e = err_text(Writer::create(&link, &meta()));
    assert!(e.contains("cannot create"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    let e = err_text(Writer::create(&target, &meta()));
    assert!(e.contains("exists"), "{e}");
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");

    // open_existing refuses a symlink to a real job file too.
    let real = dir.path().join("real.db");
    Writer::create(&real, &meta()).unwrap().close().unwrap();
    let link2 = dir.path().join("link2.db");
    std::os::unix::fs::symlink(&real, &link2).unwrap();
    assert!(Writer::open_existing(&link2).is_err());
}

#[test]
fn created_file_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let w = Writer::create(&path, &meta()).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    w.close().unwrap();
}

#[test]
fn newer_schema_is_refused_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    Writer::create(&path, &meta()).unwrap().close().unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("PRAGMA user_version = 7")
        .unwrap();
    let e = err_text(Reader::open(&path));
    assert!(
        e.contains(
            "written by a newer slurmwatch (schema 7); this one reads up to 4 — upgrade slurmwatch"
        ),
        "{e}"
    );
    assert!(err_text(Writer::open_existing(&path)).contains("newer slurmwatch"));
}

#[test]
fn garbage_truncated_and_foreign_files_are_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    let bytes: Vec<u8> = (0..1000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&junk, &bytes).unwrap();
    assert!(err_text(Reader::open(&junk)).contains("not an SQLite database"));

    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    assert!(err_text(Reader::open(&empty)).contains("empty file"));

    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    for i in 0..2000 {
        w.push(row(i, Series::Job, SampleKind::Periodic));
    }
    w.close().unwrap();
    let full = std::fs::read(&path).unwrap();
    let half = dir.path().join("half.db");
    std::fs::write(&half, &full[..full.len() / 2]).unwrap();
    let e = err_text(Reader::open(&half));
    assert!(e.contains("truncated"), "{e}");
    let cut = dir.path().join("cut.db");
    std::fs::write(&cut, &full[..full.len() - 100]).unwrap();
    assert!(err_text(Reader::open(&cut)).contains("truncated"));

    let foreign = dir.path().join("foreign.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    assert!(err_text(Reader::open(&foreign)).contains("not a slurmwatch file"));
    assert!(err_text(Writer::open_existing(&foreign)).contains("not a slurmwatch file"));
}

fn snapshot(p: &Path) -> (Vec<u8>, std::time::SystemTime) {
    (
        std::fs::read(p).unwrap(),
        std::fs::metadata(p).unwrap().modified().unwrap(),
    )
}

#[test]
fn reading_never_modifies_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    for i in 0..100 {
        w.push(row(i, Series::Job, SampleKind::Periodic));
    }
    w.close().unwrap();
    let before = snapshot(&path);
    assert_eq!(
        before.0[18], 1,
        "a closed file is in rollback mode: self-contained"
    );
    std::thread::sleep(std::time::Duration::from_millis(20));
    {
        let r = Reader::open(&path).unwrap();
        r.meta().unwrap();
        r.steps().unwrap();
        r.events().unwrap();
        assert_eq!(r.samples(&Series::Job).unwrap().len(), 100);
        r.samples(&Series::step("batch")).unwrap();
    }
    assert_eq!(snapshot(&path), before);
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["job.db"], "no -wal/-shm/-journal left behind");
}

#[test]
fn a_finished_file_reads_from_a_read_only_directory() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("ro");
    std::fs::create_dir(&sub).unwrap();
    let path = sub.join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    w.push(row(1, Series::Job, SampleKind::Periodic));
    w.close().unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o500)).unwrap();
    let n = Reader::open(&path).map(|r| r.samples(&Series::Job).unwrap().len());
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(n.unwrap(), 1);
}

#[test]
fn archive_copy_is_consistent_private_and_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let rows: Vec<SampleRow> = (0..50)
        .map(|i| row(i, Series::Job, SampleKind::Periodic))
        .collect();
    let mut w = Writer::create(&path, &meta()).unwrap();
    for r in &rows {
        w.push(r.clone());
    }
    w.flush().unwrap();
    let dest_dir = dir.path().join("archive");
    std::fs::create_dir(&dest_dir).unwrap();
    std::fs::write(dest_dir.join("12345.db"), b"old").unwrap();
    // Copy while the writer still has the file open.
    let out = archive::copy_consistent(&path, &dest_dir, "12345.db").unwrap();
    assert_eq!(out, dest_dir.join("12345.db"));
    assert_eq!(
        Reader::open(&out).unwrap().samples(&Series::Job).unwrap(),
        rows
    );
    let names: Vec<_> = std::fs::read_dir(&dest_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["12345.db"]);
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(archive::copy_consistent(&path, &dest_dir, "../x.db").is_err());

    let backup = dir.path().join("backup.db");
    w.backup_to(&backup).unwrap();
    assert_eq!(
        Reader::open(&backup)
            .unwrap()
            .samples(&Series::Job)
            .unwrap(),
        rows
    );
    w.close().unwrap();
}

/// The rows of `tests/fixtures/store/v1.sqlite`, a schema-1 file written by the schema-1
/// writer (commit 5cb7864) from exactly these rows: job series (start … end, with holes,
/// an all-zero row, an empty row and a limit that is unreadable for a while) and step 0's
/// series while the batch step ran beside it.
fn v1_fixture_rows() -> Vec<SampleRow> {
    without_totals(fixture_rows())
}

/// `rows` as a file of schema 1 or 2 keeps them: without PSI totals (they read back
/// unreadable).
fn without_totals(mut rows: Vec<SampleRow>) -> Vec<SampleRow> {
    for r in &mut rows {
        let p = &mut r.usage.pressure;
        *p = Pressure {
            cpu_some_avg10: p.cpu_some_avg10,
            memory_some_avg10: p.memory_some_avg10,
            memory_full_avg10: p.memory_full_avg10,
            io_some_avg10: p.io_some_avg10,
            io_full_avg10: p.io_full_avg10,
            ..Pressure::default()
        };
    }
    rows
}

/// The rows both fixtures were written from (with PSI totals, which they do not keep).
fn fixture_rows() -> Vec<SampleRow> {
    let mut rows: Vec<SampleRow> = (0..30)
        .map(|i| row(i, Series::Job, SampleKind::Periodic))
        .collect();
    rows[0].kind = SampleKind::Start;
    rows[4] = all_zero(rows[4].t_unix_ms);
    rows[5] = SampleRow::empty(rows[5].t_unix_ms, Series::Job, SampleKind::Periodic);
    rows[7].usage.cpu_usage_usec = None;
    for r in &mut rows[10..14] {
        r.usage.memory_limit_bytes = None;
        r.usage.processes = Some(7);
    }
    rows[20].usage.memory_oom_kills = Some(1);
    rows[29].kind = SampleKind::End;
    let mut step: Vec<SampleRow> = (3..13)
        .map(|i| row(i * 2, Series::step("0"), SampleKind::Periodic))
        .collect();
    step[0].kind = SampleKind::Start;
    step[9].kind = SampleKind::End;
    step[4].usage.memory_working_set_bytes = None;
    rows.extend(step);
    rows
}

fn v1_fixture_copy(dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store/v1.sqlite");
    let path = dir.join("v1.sqlite");
    std::fs::copy(&src, &path).unwrap();
    path
}

/// Files written before schema 2 still read exactly: rows, steps and the file's own view.
#[test]
fn schema_1_file_reads_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_fixture_copy(dir.path());
    let want = v1_fixture_rows();
    let (job, step): (Vec<SampleRow>, Vec<SampleRow>) =
        want.into_iter().partition(|r| r.series == Series::Job);
    let r = Reader::open(&path).unwrap();
    assert_eq!(r.meta().unwrap(), meta());
    assert_eq!(r.samples(&Series::Job).unwrap(), job);
    assert_eq!(r.samples(&Series::step("0")).unwrap(), step);
    let all = r.step_samples(&job, |_| true).unwrap();
    assert_eq!(
        all.iter().find(|(s, _)| s == "0").map(|(_, r)| r),
        Some(&step)
    );
    let steps = r.steps().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[2].ended_unix_ms, Some(T0 + 120_000));
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 1);
    type ViewRow = (i64, String, Option<i64>, Option<i64>, Option<i64>);
    let got: Vec<ViewRow> = c
        .prepare("SELECT t_unix_ms, kind, cpu_usage_usec, memory_limit_bytes, memory_working_set_bytes FROM samples WHERE series = '0'")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(got.len(), step.len());
    for (g, w) in got.iter().zip(&step) {
        assert_eq!(g.0, w.t_unix_ms);
        assert_eq!(g.2, w.usage.cpu_usage_usec.map(|v| v as i64));
        assert_eq!(g.3, w.usage.memory_limit_bytes.map(|v| v as i64));
        assert_eq!(g.4, w.usage.memory_working_set_bytes.map(|v| v as i64));
    }
    assert_eq!((got[0].1.as_str(), got[9].1.as_str()), ("start", "end"));
    for (name, rows) in [("job", &job), ("0", &step)] {
        let got = view_rows(&path, name);
        assert_eq!(got.len(), rows.len(), "{name}");
        for (g, w) in got.iter().zip(rows) {
            assert_eq!((g.0, &g.2), (w.t_unix_ms, &view_values(w)), "{name}");
        }
    }
}

/// A later step reopening a schema-1 file keeps writing schema 1 into it: its own series and
/// the continued job series both read back exactly.
#[test]
fn writer_appends_schema_1_to_a_schema_1_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = v1_fixture_copy(dir.path());
    let mut want = v1_fixture_rows();
    let mut w = Writer::open_existing(&path).unwrap();
    w.begin_step("1", T0 + 150_000, Some(2)).unwrap();
    let more_job: Vec<SampleRow> = (30..40)
        .map(|i| row(i, Series::Job, SampleKind::Periodic))
        .collect();
    let mut more_step: Vec<SampleRow> = (30..40)
        .map(|i| row(i, Series::step("1"), SampleKind::Periodic))
        .collect();
    more_step[0].kind = SampleKind::Start;
    more_step[0].usage.memory_limit_bytes = None;
    for (a, b) in more_job.iter().zip(&more_step) {
        w.push(a.clone());
        w.push(b.clone());
    }
    w.close().unwrap();
    let more_step = without_totals(more_step);
    want.extend(without_totals(more_job));
    let r = Reader::open(&path).unwrap();
    let job: Vec<SampleRow> = want
        .iter()
        .filter(|r| r.series == Series::Job)
        .cloned()
        .collect();
    assert_eq!(r.samples(&Series::Job).unwrap(), job);
    // The batch step has ended: step 1 is alone, so only its start row is stored and its
    // periodic rows are the job's.
    let mut step1 = vec![more_step[0].clone()];
    step1.extend(job[job.len() - 9..].iter().map(|r| SampleRow {
        series: Series::step("1"),
        ..r.clone()
    }));
    assert_eq!(r.samples(&Series::step("1")).unwrap(), step1);
    // In one pass (schema 1's query): every step as `samples` gives it, step 1 filled.
    let all = every_step_as_samples_gives_it(&r, &job);
    assert_eq!(all.len(), 4);
    assert_eq!(all[3].1, step1);
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 1, "a schema-1 file stays schema 1");
    let n: i64 = c
        .query_row(
            "SELECT count(*) FROM samples WHERE series = '1' AND memory_limit_bytes IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(n, 1);
}

/// `tests/fixtures/store/v2.sqlite`: a schema-2 file written by the schema-2 writer
/// (commit c74c24a) from [`v1_fixture_rows`], with steps `batch` (T0 … T0+145 s) and `0`
/// (T0+30 s … T0+120 s). It reads exactly under schema 3, its PSI totals unreadable.
#[test]
fn schema_2_file_reads_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.sqlite");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store/v2.sqlite");
    std::fs::copy(&src, &path).unwrap();
    let (job, step): (Vec<SampleRow>, Vec<SampleRow>) = v1_fixture_rows()
        .into_iter()
        .partition(|r| r.series == Series::Job);
    let r = Reader::open(&path).unwrap();
    assert_eq!(r.meta().unwrap(), meta());
    assert_eq!(r.samples(&Series::Job).unwrap(), job);
    assert_eq!(r.samples(&Series::step("0")).unwrap(), step);
    assert_eq!(r.last_stored(&Series::Job).unwrap().as_ref(), job.last());
    for (name, rows) in [("job", &job), ("0", &step)] {
        let got = view_rows(&path, name);
        assert_eq!(got.len(), rows.len(), "{name}");
        for (g, w) in got.iter().zip(rows) {
            assert_eq!((g.0, &g.2), (w.t_unix_ms, &view_values(w)), "{name}");
        }
    }

    // A later step's writer keeps the file at schema 2: what it adds reads back exactly,
    // without the totals the file has no column for.
    let mut w = Writer::open_existing(&path).unwrap();
    let more: Vec<SampleRow> = (30..40)
        .map(|i| row(i, Series::Job, SampleKind::Periodic))
        .collect();
    assert!(more[3].usage.pressure.cpu_some_total_usec.is_some());
    for r in &more {
        w.push(r.clone());
    }
    w.close().unwrap();
    let mut want = job.clone();
    want.extend(without_totals(more));
    assert_eq!(
        Reader::open(&path).unwrap().samples(&Series::Job).unwrap(),
        want
    );
    let c = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 2, "a schema-2 file stays schema 2");
}

/// Every value of a row as the `samples` view shows it, in the view's column order.
fn view_values(r: &SampleRow) -> Vec<Option<f64>> {
    let u = &r.usage;
    let p = &u.pressure;
    let f = |v: Option<u64>| v.map(|v| v as f64);
    vec![
        f(u.cpu_usage_usec),
        f(u.cpu_user_usec),
        f(u.cpu_system_usec),
        f(u.memory_usage_bytes),
        f(u.memory_cache_bytes),
        f(u.memory_working_set_bytes),
        f(u.memory_lifetime_peak_bytes),
        f(u.memory_limit_bytes),
        f(u.memory_oom_kills),
        f(u.memory_limit_hits),
        f(u.memory_major_faults),
        f(u.io_read_bytes),
        f(u.io_write_bytes),
        f(u.processes),
        f(u.threads),
        p.cpu_some_avg10,
        p.memory_some_avg10,
        p.memory_full_avg10,
        p.io_some_avg10,
        p.io_full_avg10,
        r.cores_allocated.map(f64::from),
        f(r.memory_working_set_max_bytes),
        r.effective_cores_max,
        f(r.sampler_cpu_usec),
        f(r.sampler_bytes_written),
        f(p.cpu_some_total_usec),
        f(p.cpu_full_total_usec),
        f(p.memory_some_total_usec),
        f(p.memory_full_total_usec),
        f(p.io_some_total_usec),
        f(p.io_full_total_usec),
    ]
}

const VIEW_VALUE_COLUMNS: &str = "cpu_usage_usec, cpu_user_usec, cpu_system_usec, \
    memory_usage_bytes, memory_cache_bytes, memory_working_set_bytes, \
    memory_lifetime_peak_bytes, memory_limit_bytes, memory_oom_kills, memory_limit_hits, \
    memory_major_faults, io_read_bytes, io_write_bytes, processes, threads, \
    pressure_cpu_some_avg10_percent, pressure_memory_some_avg10_percent, \
    pressure_memory_full_avg10_percent, pressure_io_some_avg10_percent, \
    pressure_io_full_avg10_percent, cores_allocated, memory_working_set_max_bytes, \
    effective_cores_max, sampler_cpu_usec, sampler_bytes_written";

/// Schema 3's PSI totals, after [`VIEW_VALUE_COLUMNS`] in the view.
const VIEW_TOTAL_COLUMNS: &str = "pressure_cpu_some_total_usec, pressure_cpu_full_total_usec,     pressure_memory_some_total_usec, pressure_memory_full_total_usec,     pressure_io_some_total_usec, pressure_io_full_total_usec";

/// The view's rows of `series`, values in [`view_values`]' order; a file of schema 1 or 2
/// has no PSI totals, so they are `None` there.
fn view_rows(path: &Path, series: &str) -> Vec<(i64, String, Vec<Option<f64>>)> {
    let c = rusqlite::Connection::open(path).unwrap();
    let version: i64 = c
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    let (cols, n) = if version >= 3 {
        (format!("{VIEW_VALUE_COLUMNS}, {VIEW_TOTAL_COLUMNS}"), 31)
    } else {
        (VIEW_VALUE_COLUMNS.to_string(), 25)
    };
    let sql = format!("SELECT t_unix_ms, kind, {cols} FROM samples WHERE series = ?1");
    let mut stmt = c.prepare(&sql).unwrap();
    let rows = stmt
        .query_map([series], |r| {
            let mut vals = (0..n)
                .map(|i| r.get::<_, Option<f64>>(i + 2))
                .collect::<Result<Vec<_>, _>>()?;
            vals.resize(31, None);
            Ok((r.get(0)?, r.get(1)?, vals))
        })
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    rows
}

/// Rows where every kind of value comes and goes: the operands of a stored difference
/// unreadable (system CPU without usage, working set without cache), rarely changing
/// values unreadable for a while, across a reopened writer.
fn patchy_rows(series: Series, n: u64, t_step: u64) -> Vec<SampleRow> {
    let mut rows: Vec<SampleRow> = (0..n)
        .map(|i| {
            let mut r = row(i * t_step, series.clone(), SampleKind::Periodic);
            let u = &mut r.usage;
            if i % 7 == 3 {
                u.cpu_usage_usec = None;
            }
            if i % 11 == 4 {
                u.cpu_user_usec = None;
            }
            if i % 13 == 5 {
                u.memory_cache_bytes = None;
            }
            if i % 17 == 6 {
                u.memory_working_set_bytes = None;
            }
            if (25..35).contains(&i) {
                u.memory_limit_bytes = None;
                u.processes = Some(i);
            }
            if i % 9 == 2 {
                u.threads = None;
                u.pressure.memory_some_avg10 = Some((i % 4) as f64 / 100.0);
            }
            if i % 10 == 0 {
                u.memory_major_faults = Some(i * 3);
                r.memory_working_set_max_bytes = Some(i * 4096);
            }
            r
        })
        .collect();
    rows[0].kind = SampleKind::Start;
    rows[12] = all_zero(rows[12].t_unix_ms);
    rows[12].series = series.clone();
    rows[13] = SampleRow::empty(rows[13].t_unix_ms, series, SampleKind::Periodic);
    let last = rows.len() - 1;
    rows[last].kind = SampleKind::End;
    rows
}

#[test]
fn every_column_reads_back_through_the_reader_and_the_view() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let job = patchy_rows(Series::Job, 60, 1);
    let step = patchy_rows(Series::step("0"), 20, 2);
    let mut w = Writer::create(&path, &meta()).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    w.begin_step("0", T0, Some(4)).unwrap();
    let mut s = step.iter();
    for (i, r) in job.iter().enumerate() {
        if i == 30 {
            drop(w); // reopened mid-way: the chains, times and unreadable states continue
            w = Writer::open_existing(&path).unwrap();
        }
        w.push(r.clone());
        if i % 2 == 0 {
            if let Some(r) = s.next() {
                w.push(r.clone());
            }
        }
        if i % 5 == 4 {
            w.flush().unwrap();
        }
    }
    w.end_step("0", step.last().unwrap().t_unix_ms, Some(0))
        .unwrap();
    w.close().unwrap();

    let r = Reader::open(&path).unwrap();
    assert_eq!(r.samples(&Series::Job).unwrap(), job);
    assert_eq!(r.samples(&Series::step("0")).unwrap(), step);
    for (name, rows) in [("job", &job), ("0", &step)] {
        let got = view_rows(&path, name);
        assert_eq!(got.len(), rows.len(), "{name}");
        for (g, w) in got.iter().zip(rows) {
            assert_eq!(g.0, w.t_unix_ms, "{name}");
            let kind = match w.kind {
                SampleKind::Start => "start",
                SampleKind::Periodic => "periodic",
                SampleKind::End => "end",
            };
            assert_eq!(g.1, kind, "{name} at {}", w.t_unix_ms);
            assert_eq!(g.2, view_values(w), "{name} at {}", w.t_unix_ms);
        }
    }
}

/// `samples_rare` refers to `samples_packed` rowids: a user's plain `VACUUM` (which may
/// renumber a table without an INTEGER PRIMARY KEY) must leave the file reading the same.
#[test]
fn a_vacuumed_file_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let job = patchy_rows(Series::Job, 40, 1);
    let mut w = Writer::create(&path, &meta()).unwrap();
    for r in &job {
        w.push(r.clone());
    }
    w.close().unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch("VACUUM")
        .unwrap();
    assert_eq!(
        Reader::open(&path).unwrap().samples(&Series::Job).unwrap(),
        job
    );
    let got = view_rows(&path, "job");
    assert_eq!(got.len(), job.len());
    for (g, w) in got.iter().zip(&job) {
        assert_eq!((g.0, &g.2), (w.t_unix_ms, &view_values(w)));
    }
}

/// A capped file stops growing: the flush that finds the cap reached drops its rows and
/// notes one event; rows before it read back unchanged.
#[test]
fn a_capped_file_stops_growing_with_one_event() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    let cap = w.file_bytes() + 64 * 1024;
    w.set_cap(cap).unwrap();
    let mut i = 0;
    while !w.capped() {
        for _ in 0..50 {
            w.push(row(i, Series::Job, SampleKind::Periodic));
            i += 1;
        }
        w.flush().unwrap();
        assert!(i < 100_000, "never capped at {cap} B: {} B", w.file_bytes());
    }
    let at_cap = w.file_bytes();
    for _ in 0..2000 {
        w.push(row(i, Series::Job, SampleKind::Periodic));
        i += 1;
    }
    w.flush().unwrap();
    assert_eq!(w.file_bytes(), at_cap, "rows were stored past the cap");
    w.close().unwrap();
    let r = Reader::open(&path).unwrap();
    let events: Vec<_> = r
        .events()
        .unwrap()
        .into_iter()
        .filter(|e| e.detail.starts_with("recording stopped"))
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    let stored = r.samples(&Series::Job).unwrap();
    assert!(!stored.is_empty() && (stored.len() as u64) < i);
    assert_eq!(stored[0], row(0, Series::Job, SampleKind::Periodic));
}

/// Schema 4's output sizes read back as written, per file descriptor; a schema-2 file (no
/// table for them) takes none and reads none.
#[test]
fn output_sizes_read_back_and_older_files_keep_none() {
    use slurmwatch_core::store::OutputSize;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("job.db");
    let mut w = Writer::create(&path, &meta()).unwrap();
    let size = |t, fd, bytes| OutputSize {
        t_unix_ms: t,
        fd,
        bytes,
    };
    let written = [
        size(1000, 1, 10),
        size(1000, 2, 3),
        size(2000, 1, 90),
        size(3000, 1, 1 << 40),
    ];
    for s in written {
        w.push_output_size(s);
    }
    w.flush().unwrap();
    w.close().unwrap();
    let r = Reader::open(&path).unwrap();
    assert_eq!(
        r.output_sizes(1).unwrap(),
        [written[0], written[2], written[3]]
    );
    assert_eq!(r.output_sizes(2).unwrap(), [written[1]]);

    let v2 = dir.path().join("v2.sqlite");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/store/v2.sqlite");
    std::fs::copy(&src, &v2).unwrap();
    let mut w = Writer::open_existing(&v2).unwrap();
    w.push_output_size(size(5000, 1, 7));
    w.flush().unwrap();
    w.close().unwrap();
    assert_eq!(Reader::open(&v2).unwrap().output_sizes(1).unwrap(), []);
}
