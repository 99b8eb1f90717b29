//! Crafted job files, as a hostile user would leave them for root (the epilog, a later
//! step's writer, `report --file`) or for another user's CLI: each is refused with one clear
//! sentence, within the bound, by every opener; nothing in the file runs.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use slurmwatch_core::store::{Reader, MAX_FILE_BYTES};
use support::{every_opener, recording, JOB_ID};

/// A fresh real recording, then `attack` run on it with a plain (unhardened) connection.
fn crafted(attack: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), 40);
    let c = Connection::open(&path).unwrap();
    c.execute_batch(attack).unwrap();
    drop(c);
    (dir, path)
}

/// Every opener refuses `path` and each message contains `want`.
fn refused_by_all(path: &Path, want: &str) {
    for (who, r) in ["reader", "writer", "summariser"]
        .iter()
        .zip(every_opener(path))
    {
        match r {
            Ok(()) => panic!("the {who} accepted {}", path.display()),
            Err(m) => assert!(m.contains(want), "the {who} said {m:?}, wanted {want:?}"),
        }
    }
}

/// A never-ending recursive CTE, as a view or inside a trigger.
const FOREVER: &str =
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT n FROM r";

#[test]
fn the_untouched_recording_is_read_by_every_opener() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), 40);
    for r in every_opener(&path) {
        r.unwrap();
    }
}

#[test]
fn meta_as_a_never_ending_view_is_refused_unrun() {
    let (_d, path) = crafted(&format!(
        "DROP TABLE meta;
         CREATE VIEW meta AS SELECT 'started_unix_ms' AS key, n AS value FROM ({FOREVER});"
    ));
    // The attack is real: an unhardened reader spins in it (stopped here after 1 s).
    let c = Connection::open(&path).unwrap();
    let t = Instant::now();
    c.progress_handler(1000, Some(move || t.elapsed() > Duration::from_secs(1)));
    let r: rusqlite::Result<i64> = c.query_row("SELECT count(*) FROM meta", [], |r| r.get(0));
    assert!(
        r.is_err() && t.elapsed() >= Duration::from_secs(1),
        "{r:?} after {:?}",
        t.elapsed()
    );
    drop(c);
    refused_by_all(&path, "has an unexpected schema");
    refused_by_all(&path, "`meta`");
}

#[test]
fn meta_as_a_plain_view_is_refused() {
    let (_d, path) = crafted(
        "ALTER TABLE meta RENAME TO m2;
         CREATE VIEW meta AS SELECT key, value FROM m2;",
    );
    refused_by_all(&path, "has an unexpected schema");
    let (_d, path) = crafted("DROP TABLE meta; CREATE VIEW meta AS SELECT 1 AS key, 2 AS value;");
    refused_by_all(&path, "view `meta` where slurmwatch has a table");
}

#[test]
fn a_trigger_on_samples_packed_is_refused() {
    let (_d, path) = crafted(&format!(
        "CREATE TRIGGER hang AFTER INSERT ON samples_packed BEGIN SELECT count(*) FROM ({FOREVER}); END;"
    ));
    refused_by_all(&path, "has an unexpected schema");
    let (_d, path) = crafted(
        "CREATE TRIGGER wipe AFTER INSERT ON samples_packed BEGIN DELETE FROM events; END;",
    );
    refused_by_all(&path, "trigger `wipe`, not slurmwatch's");
}

#[test]
fn an_extra_table_or_index_is_refused() {
    let (_d, path) = crafted("CREATE TABLE extra (x);");
    refused_by_all(&path, "table `extra`, not slurmwatch's");
    let (_d, path) = crafted("CREATE INDEX by_series ON samples_packed(series);");
    refused_by_all(&path, "index `by_series`, not slurmwatch's");
}

#[test]
fn a_changed_definition_of_our_own_view_is_refused() {
    let (_d, path) = crafted(&format!(
        "PRAGMA writable_schema = ON;
         UPDATE sqlite_master SET sql = 'CREATE VIEW samples AS {FOREVER}' WHERE name = 'samples';"
    ));
    refused_by_all(&path, "has an unexpected schema");
    let (_d, path) = crafted(
        "PRAGMA writable_schema = ON;
         UPDATE sqlite_master SET sql = replace(sql, 'value TEXT NOT NULL', 'value TEXT')
         WHERE name = 'meta';",
    );
    refused_by_all(
        &path,
        "table `meta` is not defined as slurmwatch defines it",
    );
}

#[test]
fn huge_and_deep_expressions_in_a_view_are_refused() {
    let deep = format!("{}1{}", "(1 + ".repeat(900), ")".repeat(900));
    let (_d, path) = crafted(&format!("CREATE VIEW deep AS SELECT {deep} AS x;"));
    refused_by_all(&path, "has an unexpected schema");
    let huge = "x".repeat(200_000);
    let (_d, path) = crafted(&format!("CREATE VIEW huge AS SELECT '{huge}' AS x;"));
    refused_by_all(&path, "has an unexpected schema");
}

#[test]
fn a_newer_user_version_is_refused() {
    let newer = slurmwatch_core::store::SCHEMA_VERSION + 1;
    let (_d, path) = crafted(&format!("PRAGMA user_version = {newer};"));
    refused_by_all(
        &path,
        &format!("written by a newer slurmwatch (schema {newer})"),
    );
}

#[test]
fn garbage_and_a_truncated_copy_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), 40);
    let bytes = std::fs::read(&path).unwrap();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let noise: Vec<u8> = (0..bytes.len())
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&path, &noise).unwrap();
    refused_by_all(&path, "not an SQLite database");
    // The SQLite header kept, everything after it garbage.
    let mut g = bytes.clone();
    g[100..].copy_from_slice(&noise[100..]);
    std::fs::write(&path, &g).unwrap();
    for r in every_opener(&path) {
        assert!(r.is_err());
    }
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    refused_by_all(&path, "the file is truncated");
}

#[test]
fn a_fifo_at_the_path_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{JOB_ID}.sqlite"));
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    refused_by_all(&path, "not a regular file");
}

#[test]
fn a_symlink_at_the_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("elsewhere");
    std::fs::create_dir(&real).unwrap();
    let target = recording(&real, 40);
    let path = dir.path().join(format!("{JOB_ID}.sqlite"));
    std::os::unix::fs::symlink(&target, &path).unwrap();
    refused_by_all(&path, "is a symbolic link");
    assert!(Reader::open(&target).is_ok(), "the file itself is fine");
}

#[test]
fn a_file_over_the_size_cap_is_refused_before_sqlite_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), 40);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(MAX_FILE_BYTES + 4096).unwrap(); // sparse: costs no disk
    drop(f);
    refused_by_all(&path, "over the 64 MiB a job's file may have");
}

/// The deadline itself: a statement running past it is interrupted with one sentence.
#[test]
fn a_statement_past_the_deadline_is_interrupted_with_a_clear_error() {
    use slurmwatch_core::analysis::summary::summarise_job_file_until;
    use slurmwatch_core::model::Series;
    use slurmwatch_core::store::Deadline;
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), 40);
    let past = Deadline::after(Duration::ZERO);
    let e = Reader::open_until(&path, past).err().expect("interrupted");
    assert!(
        e.to_string().ends_with("took longer than 0 s: not read"),
        "{e}"
    );
    // Every later call of a reader shares its deadline.
    let r = Reader::open_until(&path, Deadline::after(Duration::from_millis(300))).unwrap();
    assert!(r.samples(&Series::Job).is_ok());
    std::thread::sleep(Duration::from_millis(400));
    let e = r.samples(&Series::Job).unwrap_err().to_string();
    assert!(e.ends_with("took longer than 0.3 s: not read"), "{e}");
    let e = summarise_job_file_until(dir.path(), JOB_ID, past)
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("took longer than 0 s: not read"), "{e}");
}

/// A trigger planted while the writer has the file open (a user rewriting a file they can
/// write, during the job) never runs: the next write sees the schema changed and refuses.
#[test]
fn a_trigger_planted_under_an_open_writer_never_runs() {
    use slurmwatch_core::model::{SampleKind, SampleRow, Series};
    use slurmwatch_core::store::Writer;
    let dir = tempfile::tempdir().unwrap();
    let path = recording(dir.path(), 12);
    let mut w = Writer::open_existing(&path).unwrap();
    let c = Connection::open(&path).unwrap();
    c.execute_batch(
        "CREATE TABLE fired (n); CREATE TRIGGER t AFTER INSERT ON samples_packed
         BEGIN INSERT INTO fired VALUES (1); END;",
    )
    .unwrap();
    w.push(SampleRow::empty(
        support::T0 + 99_000,
        Series::Job,
        SampleKind::Periodic,
    ));
    let e = w.flush().unwrap_err().to_string();
    assert!(e.contains("has an unexpected schema"), "{e}");
    let fired: i64 = c
        .query_row("SELECT count(*) FROM fired", [], |r| r.get(0))
        .unwrap();
    assert_eq!(fired, 0);
    let e = w
        .event(support::T0, None, "x", "y")
        .unwrap_err()
        .to_string();
    assert!(e.contains("has an unexpected schema"), "{e}");
}

/// Found by the mutation run (MUTATION_SEED=20261201, case 1575): a huge per-row Xid count
/// overflowed the reader's sum of them (a panic). Now: read, or refused with a sentence.
#[test]
fn a_huge_xid_count_does_not_overflow_the_reader() {
    let (_d, path) =
        crafted("UPDATE gpu_samples SET xid_events = 9223372036854775807 WHERE rowid = 3;");
    for r in every_opener(&path) {
        if let Err(m) = r {
            assert!(m.contains("integer overflow"), "{m}");
        }
    }
}
