//! A reader that arrives while the plugin is creating a job's file never meets a half-made
//! one: the file appears at its name only with its schema and meta in place.
//!
//! Seen on the test cluster: `slurmwatch JOB --once --json` on a 2-node job, polled as the
//! second node's step started, found that node's file before its schema was committed, took
//! it for "not slurmwatch's" and read the node through an `srun` hop instead.

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use slurmwatch_core::store::{JobMeta, Reader, Writer};

fn meta(job_id: u64) -> JobMeta {
    support::job_meta(job_id, 4242)
}

fn path(dir: &Path, job: u64) -> PathBuf {
    dir.join(format!("job{job}.sqlite"))
}

/// One thread creates 60 files one after another; another opens each as soon as its name
/// exists. Every open that finds the name must read the job's meta.
#[test]
fn a_reader_racing_the_create_reads_a_whole_file_or_none() {
    const FILES: u64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_path_buf();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (dir, done) = (dir_path.clone(), done.clone());
        std::thread::spawn(move || {
            let mut seen = 0u64;
            let mut failures = Vec::new();
            let mut job = 1;
            // Until every file was met, or the writer is done and the next name never came.
            while job <= FILES && (!done.load(Ordering::SeqCst) || path(&dir, job).exists()) {
                let p = path(&dir, job);
                if !p.exists() {
                    std::hint::spin_loop();
                    continue;
                }
                match Reader::open(&p).and_then(|r| r.meta()) {
                    Ok(m) => assert_eq!(m.job_id, job),
                    Err(e) => failures.push(format!("job {job}: {e}")),
                }
                seen += 1;
                job += 1;
            }
            (seen, failures)
        })
    };
    let mut writers = Vec::new();
    for job in 1..=FILES {
        writers.push(Writer::create(&path(&dir_path, job), &meta(job)).unwrap());
    }
    done.store(true, Ordering::SeqCst);
    let (seen, failures) = reader.join().unwrap();
    assert!(
        failures.is_empty(),
        "{} of {seen} opens failed: {failures:#?}",
        failures.len()
    );
    // The race was run, not skipped: the reader met most files right as they appeared.
    assert!(
        seen >= FILES / 2,
        "the reader met only {seen} of {FILES} files"
    );
    drop(writers);
}

/// Two steps of one job creating the same file at once: exactly one creates it, the other
/// is told it exists (and then joins it with `open_existing`), and no temporary name is
/// left behind.
#[test]
fn two_creators_of_one_file_one_wins_and_nothing_is_left_beside_it() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path(), 9);
        let results: Vec<bool> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..2)
                .map(|_| s.spawn(|| Writer::create(&p, &meta(9)).map(drop).is_ok()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(
            results.iter().filter(|ok| **ok).count(),
            1,
            "round {round}: {results:?}"
        );
        assert_eq!(Reader::open(&p).unwrap().meta().unwrap().job_id, 9);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with("-wal") && !n.ends_with("-shm"))
            .collect();
        assert_eq!(names, ["job9.sqlite"], "round {round}");
        // The loser's existing file is joined.
        Writer::open_existing(&p).unwrap();
    }
}

/// Steps of one job start and end at the same moment (two `srun &` in a batch script), each
/// with its own writer on the job's file. Every `begin_step`/`end_step` must wait its turn
/// for the write lock, never fail: a deferred transaction that read the schema first and then
/// tried to write after another writer committed got "database is locked" at once (SQLite
/// does not wait on a stale read snapshot) — seen on the test cluster as a step that recorded
/// nothing.
#[test]
fn concurrent_steps_begin_and_end_without_a_locked_database() {
    let dir = tempfile::tempdir().unwrap();
    let p = path(dir.path(), 5);
    drop(Writer::create(&p, &meta(5)).unwrap());
    const WRITERS: usize = 4;
    const ROUNDS: i64 = 40;
    let barrier = std::sync::Barrier::new(WRITERS);
    let failures: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (p, barrier) = (&p, &barrier);
                s.spawn(move || {
                    let mut writer = Writer::open_existing(p).unwrap();
                    let mut failed = Vec::new();
                    for round in 0..ROUNDS {
                        let step = format!("{}", round * WRITERS as i64 + w as i64);
                        barrier.wait();
                        if let Err(e) = writer.begin_step(&step, 1_700_000_000_000 + round, Some(1))
                        {
                            failed.push(format!("begin {step}: {e}"));
                        }
                        barrier.wait();
                        if let Err(e) = writer.end_step(&step, 1_700_000_000_500 + round, Some(0)) {
                            failed.push(format!("end {step}: {e}"));
                        }
                    }
                    failed
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert!(
        failures.is_empty(),
        "{} failed: {failures:#?}",
        failures.len()
    );
    let steps = Writer::open_existing(&p).unwrap().steps().unwrap();
    assert_eq!(steps.len(), WRITERS * ROUNDS as usize);
    assert!(steps
        .iter()
        .all(|s| s.ended_unix_ms.is_some() && s.exit_status == Some(0)));
}
