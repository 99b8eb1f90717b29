//! The mutation run: a thousand or more corrupted copies of a real recording (byte flips,
//! truncations, page swaps and zeroed pages, schema text and root-page edits through
//! `writable_schema`, hostile cell values), each opened, read in full and summarised through
//! the public API. None may panic, and none may run past the bound; a failure names the
//! seed and case, which reproduce it (`MUTATION_SEED=… MUTATION_CASES=…`).
//!
//! `MUTATION_CASES` (default 1000: ~10 s of a debug build, most of it SQLite parsing the
//! 40 KB schema on each of the 3–4 connections a case opens) sets the count for a longer run.

mod support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use support::{read_everything, recording, summarise, BOUND};

/// xorshift64: a seeded, reproducible stream (no dependency needed for this).
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

const PAGE: usize = 4096;

/// Where the last caught panic happened (set by the test's panic hook).
static WHERE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Byte-level damage to the file image.
fn damage_bytes(rng: &mut Rng, b: &mut Vec<u8>) -> String {
    let pages = b.len() / PAGE;
    match rng.below(4) {
        0 => {
            let n = 1 + rng.below(16);
            for _ in 0..n {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            format!("{n} bit flips")
        }
        1 => {
            let at = if rng.below(2) == 0 {
                rng.below(pages) * PAGE
            } else {
                rng.below(b.len())
            };
            b.truncate(at);
            format!("truncated at {at}")
        }
        2 => {
            let (x, y) = (rng.below(pages), rng.below(pages));
            for i in 0..PAGE {
                b.swap(x * PAGE + i, y * PAGE + i);
            }
            format!("pages {x} and {y} swapped")
        }
        _ => {
            let x = 1 + rng.below(pages - 1); // keep the header page
            b[x * PAGE..(x + 1) * PAGE].fill(if rng.below(2) == 0 { 0 } else { 0xFF });
            format!("page {x} blanked")
        }
    }
}

const SNIPPETS: &[&str] = &[
    " UNION ALL SELECT 1",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT n FROM r",
    "(((((((((((((((((((((1)))))))))))))))))))))",
    ", extra INTEGER",
    " WHERE 1",
    "--",
    "'",
    ")",
    "",
];

const VALUES: &[&str] = &[
    "NULL",
    "9223372036854775807",
    "-9223372036854775808",
    "-1",
    "0",
    "1e308",
    "-1e308",
    "'text'",
    "x'00ff'",
    "'9223372036854775807'",
    "'-9223372036854775808'",
    "'not a number'",
    "4294967296",
];

/// SQL-level damage through a plain connection: schema text, root pages, cell values.
fn damage_sql(rng: &mut Rng, path: &Path) -> String {
    let c = Connection::open(path).unwrap();
    c.execute_batch("PRAGMA synchronous = OFF;").unwrap();
    let names: Vec<(String, Option<String>)> = c
        .prepare("SELECT name, sql FROM sqlite_master")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<rusqlite::Result<_>>()
        .unwrap();
    let (name, sql) = rng.pick(&names).clone();
    let what = match rng.below(4) {
        0 => {
            let sql = sql.unwrap_or_default();
            let at = rng.below(sql.len() + 1);
            let at = (0..=at)
                .rev()
                .find(|&i| sql.is_char_boundary(i))
                .unwrap_or(0);
            let cut = (at + rng.below(40)).min(sql.len());
            let cut = (cut..=sql.len())
                .find(|&i| sql.is_char_boundary(i))
                .unwrap();
            let new = format!("{}{}{}", &sql[..at], rng.pick(SNIPPETS), &sql[cut..]);
            c.execute_batch("PRAGMA writable_schema = ON;").unwrap();
            let _ = c.execute(
                "UPDATE sqlite_master SET sql = ?1 WHERE name = ?2",
                [&new, &name],
            );
            format!("schema text of {name} edited at {at}")
        }
        1 => {
            let root = rng.below(12) as i64;
            c.execute_batch("PRAGMA writable_schema = ON;").unwrap();
            let _ = c.execute(
                "UPDATE sqlite_master SET rootpage = ?1 WHERE name = ?2",
                rusqlite::params![root, name],
            );
            format!("root page of {name} set to {root}")
        }
        _ => {
            let tables: Vec<&str> = vec![
                "meta",
                "steps",
                "samples_packed",
                "samples_rare",
                "events",
                "gpus",
                "gpu_samples",
                "gpu_rare",
                "gpu_xid",
            ];
            let t = *rng.pick(&tables);
            let cols: Vec<String> = c
                .prepare(&format!("SELECT name FROM pragma_table_info('{t}')"))
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            let col = rng.pick(&cols).clone();
            let v = *rng.pick(VALUES);
            let n: i64 = c
                .query_row(&format!("SELECT count(*) FROM {t}"), [], |r| r.get(0))
                .unwrap();
            let rowid = 1 + rng.below(n.max(1) as usize) as i64;
            let sql = if rng.below(8) == 0 {
                format!("DELETE FROM {t} WHERE rowid = {rowid}")
            } else {
                format!("UPDATE {t} SET {col} = {v} WHERE rowid = {rowid}")
            };
            let _ = c.execute_batch(&sql);
            sql
        }
    };
    what
}

/// One case; `Err` describes a panic or a call past the bound. `Ok`: how long it took and
/// whether the reader accepted the file.
fn run_case(seed: u64, case: u64, base: &[u8], dir: &Path) -> Result<(Duration, bool), String> {
    let mut rng = Rng::new(seed ^ case.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let path = dir.join(format!("{}.sqlite", support::JOB_ID));
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    let what = if rng.below(3) == 0 {
        std::fs::write(&path, base).unwrap();
        damage_sql(&mut rng, &path)
    } else {
        let mut b = base.to_vec();
        let w = damage_bytes(&mut rng, &mut b);
        std::fs::write(&path, &b).unwrap();
        w
    };
    let t = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let read = read_everything(&path).is_ok();
        let _ = summarise(&path);
        read
    }));
    let took = t.elapsed();
    match outcome {
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let at = WHERE.lock().unwrap().take().unwrap_or_default();
            Err(format!("case {case} ({what}): panicked at {at}: {msg}"))
        }
        Ok(_) if took > BOUND => Err(format!("case {case} ({what}): took {took:?}")),
        Ok(read) => Ok((took, read)),
    }
}

#[test]
fn corrupted_recordings_never_panic_or_hang() {
    let env = |k: &str, d: u64| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let seed = env("MUTATION_SEED", 0x5EED_0014);
    let cases = env("MUTATION_CASES", 1000);
    let src = tempfile::tempdir().unwrap();
    let base = std::fs::read(recording(src.path(), 24)).unwrap();
    // Cases are written and summarised (fsync) thousands of times: tmpfs where there is one.
    let dir = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    // Panics are caught and reported below with where they happened; keep the default
    // report quiet.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        *WHERE.lock().unwrap() = info.location().map(|l| l.to_string());
    }));
    let t = Instant::now();
    let mut failures = Vec::new();
    let (mut slowest, mut accepted) = (Duration::ZERO, 0);
    for case in 0..cases {
        match run_case(seed, case, &base, dir.path()) {
            Ok((d, read)) => {
                slowest = slowest.max(d);
                accepted += u32::from(read);
            }
            Err(f) => failures.push(f),
        }
    }
    std::panic::set_hook(hook);
    eprintln!(
        "{cases} cases of a {}-byte recording in {:?} ({accepted} read in full despite the \
         damage), slowest {slowest:?}",
        base.len(),
        t.elapsed()
    );
    assert!(
        failures.is_empty(),
        "MUTATION_SEED={seed}: {} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
