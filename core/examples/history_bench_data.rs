//! The sacct answers of `scripts/bench-history.sh`: `N` jobs of the bench's mix
//! (`history::fixture::mixed_jobs`) spread over a 30-day window, as sacct prints them for
//! slurmwatch's own field list, one file per chunk of the window query
//! (`DIR/chunk-<-S value>.txt`, split by the unit separator), so a fake `sacct` can answer
//! each call with a file.
//!
//! `history_bench_data N DIR [SUMMARIES]` writes the chunk files and `DIR/window` (`since
//! until`, Unix seconds, for `-S @since -E @until`). With `SUMMARIES` (a file of `JS1:`
//! AdminComments, one per line: core/tests/fixtures/slurm/admin_comments_js1_real.txt, real
//! ones from the test cluster's slurmdbd), every job carries one of them, cycled, as a site
//! whose controller stores every job's summary; each re-encoded with the job's own id in it
//! (as the epilog writes it), so that no two jobs' strings are alike, as at a real site: a
//! reader that remembered a string it had decoded would gain nothing here that it would not
//! gain there. `history_bench_data replay FILE DELIMITER` prints a
//! chunk file split by `DELIMITER` instead, as sacct prints it when asked `--delimiter=` (the
//! reader asks a fresh random one per call): the fake's part, at memory speed, so serving
//! the answer costs next to nothing beside what is measured. A job is in every chunk it ran during, as sacct lists
//! it, so jobs running across a chunk boundary are listed twice (the query keeps one).
//! Run it under the same `TZ` as the slurmwatch that reads the files.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use slurmwatch_core::analysis::admin_comment::{self, JobSummaryRecord};
use slurmwatch_core::history::fixture::{self, T0};
use slurmwatch_core::slurm::sacct::{self, sacct_time, WINDOW_CHUNK_SECONDS};

const DAYS: i64 = 30;
/// The longest run of the mix (a TIMEOUT at 180 min, 30 s over): every job ends in the window.
const LONGEST_SECONDS: i64 = 3 * 3600 + 30;

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    if let ("replay", Some(file), Some(d)) = (
        std::env::args().nth(1).unwrap_or_default().as_str(),
        std::env::args().nth(2),
        std::env::args().nth(3),
    ) {
        return replay(&file, d.as_bytes());
    }
    let (Some(n), Some(dir)) = (args.next().and_then(|n| n.parse::<u64>().ok()), args.next())
    else {
        eprintln!("usage: history_bench_data N DIR");
        std::process::exit(2);
    };
    let summaries: Vec<JobSummaryRecord> = match args.next() {
        Some(f) => std::fs::read_to_string(f)?
            .lines()
            .filter(|l| l.starts_with("JS1:"))
            .map(|l| admin_comment::decode(l).expect("a real summary decodes"))
            .collect(),
        None => Vec::new(),
    };
    let admin_comment = sacct::FIELDS
        .iter()
        .position(|f| *f == "AdminComment")
        .expect("AdminComment is asked");
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir)?;
    let (since, until) = (T0, T0 + DAYS * 86400);
    // The chunks exactly as `Query::window_each` cuts the window.
    let mut chunks: Vec<(i64, i64, BufWriter<File>)> = Vec::new();
    let mut from = since;
    while from < until {
        let to = (from + WINDOW_CHUNK_SECONDS).min(until);
        let path = dir.join(format!("chunk-{}.txt", sacct_time(from)));
        let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
        writeln!(w, "{}", sacct::FIELDS.join("\u{1f}"))?;
        chunks.push((from, to, w));
        from = to;
    }
    // slurmwatch's columns, taken by name from the generator's; blank where it has none.
    let wide = fixture::wide();
    let columns: Vec<Option<usize>> = sacct::FIELDS
        .iter()
        .map(|f| wide.iter().position(|w| w == f))
        .collect();
    let span = (until - since - 60 - LONGEST_SECONDS) as u64;
    let mut line = String::new();
    for (i, job) in fixture::mixed_jobs(n).enumerate() {
        let start = since + 60 + (i as u64 * span / n.max(1)) as i64;
        let end = start + job.elapsed as i64;
        let rows = fixture::job_rows(&job, i as u64 + 1, start - 5, start);
        let comment = (!summaries.is_empty()).then(|| {
            let mut rec = summaries[i % summaries.len()].clone();
            rec.job_id = (i + 1).to_string();
            for n in &mut rec.nodes {
                n.meta.job_id = i as u64 + 1;
            }
            admin_comment::encode(&rec).expect("a real summary fits")
        });
        for (from, to, w) in chunks.iter_mut() {
            if start >= *to || end < *from {
                continue;
            }
            for (row, r) in rows.iter().enumerate() {
                line.clear();
                for (k, c) in columns.iter().enumerate() {
                    if k > 0 {
                        line.push('\u{1f}');
                    }
                    match (&comment, c) {
                        (Some(s), _) if k == admin_comment && row == 0 => line.push_str(s),
                        (_, Some(c)) => line.push_str(&r[*c]),
                        (_, None) => {}
                    }
                }
                line.push('\n');
                w.write_all(line.as_bytes())?;
            }
        }
    }
    for (_, _, mut w) in chunks {
        w.flush()?;
    }
    std::fs::write(dir.join("window"), format!("{since} {until}\n"))?;
    Ok(())
}

/// `file` to stdout with every unit separator replaced by `delimiter`.
fn replay(file: &str, delimiter: &[u8]) -> std::io::Result<()> {
    use std::io::Read;
    let mut f = File::open(file)?;
    let out = std::io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        let mut from = 0;
        for at in memchr::memchr_iter(0x1f, &buf[..n]) {
            out.write_all(&buf[from..at])?;
            out.write_all(delimiter)?;
            from = at + 1;
        }
        out.write_all(&buf[from..n])?;
    }
    out.flush()
}
