//! The report's `throughput`: the job's own progress lines (`analysis::progress`) read from
//! its log, placed in time by the output sizes the recorder noted (`analysis::throughput`),
//! and each slowdown set beside what the job's cards' exact ledger says held them back over
//! the same stretch ("busy is not useful work").

use serde::Serialize;

use crate::analysis::progress::{self, Reading, Tool};
use crate::analysis::throughput::{self, Count, RatePoint, SizeAt, Slowdown};
use crate::analysis::{card_ledger, CardLedger};
use crate::recording::output::TOLERANCE_MS;
use crate::sample::GPU_LIMITER_NAMES;
use crate::store::GpuRow;

/// A limiter is named beside a slowdown when it held a card for at least this share of it.
pub const HELD_SHARE: f64 = 0.25;

/// One card's rows, with the label the job's code knows it by (`cuda:0`).
#[derive(Debug, Clone, Default)]
pub struct CardRows {
    pub label: String,
    pub rows: Vec<GpuRow>,
}

/// What a node's file gives for placing the log's progress: the output sizes the recorder
/// noted (fd 1, fd 2) and the cards' rows to set a slowdown beside.
#[derive(Debug, Clone, Default)]
pub struct ProgressInputs {
    pub stdout: Vec<SizeAt>,
    pub stderr: Vec<SizeAt>,
    pub cards: Vec<CardRows>,
    /// The recording's interval: sizes are read beside its rows.
    pub interval_ms: i64,
}

impl ProgressInputs {
    pub fn is_empty(&self) -> bool {
        self.stdout.is_empty() && self.stderr.is_empty()
    }

    /// Reads them from a node's file (the cards only where there are sizes or `marked`:
    /// the phases need them too).
    pub fn load(
        reader: &crate::store::Reader,
        marked: bool,
    ) -> crate::error::Result<ProgressInputs> {
        let sizes = |fd| -> crate::error::Result<Vec<SizeAt>> {
            Ok(reader
                .output_sizes(fd)?
                .into_iter()
                .map(|s| SizeAt {
                    t_unix_ms: s.t_unix_ms,
                    bytes: s.bytes,
                })
                .collect())
        };
        let mut p = ProgressInputs {
            stdout: sizes(1)?,
            stderr: sizes(2)?,
            cards: Vec::new(),
            interval_ms: i64::from(reader.meta()?.interval_seconds.max(1)) * 1000,
        };
        if marked || !p.is_empty() {
            for g in reader.gpus()? {
                p.cards.push(CardRows {
                    label: g.card.label(),
                    rows: reader.gpu_samples(g.id)?,
                });
            }
        }
        Ok(p)
    }
}

/// The throughput from the job's log files (`(stream, path, found by)`, as the report
/// located them), read as their owner up to [`progress::MAX_PARSED_BYTES`] from their end:
/// the first file whose progress lines the noted sizes place.
pub fn from_files(
    files: &[(&'static str, std::path::PathBuf, &'static str)],
    owner: Option<u32>,
    inputs: &ProgressInputs,
    patterns: &progress::Patterns,
) -> Option<Throughput> {
    files.iter().find_map(|(stream, path, _)| {
        // stderr has sizes of its own only when it is another file than stdout.
        let sizes = match *stream {
            "stderr" if !inputs.stderr.is_empty() => &inputs.stderr,
            "stderr" => return None,
            _ => &inputs.stdout,
        };
        let tail = super::joblog::read_tail(path, owner, progress::MAX_PARSED_BYTES as u64).ok()?;
        let offset = tail.size.saturating_sub(tail.read);
        let log = (tail.text.as_str(), offset);
        from_log_with(
            stream,
            log,
            (sizes, inputs.interval_ms),
            &inputs.cards,
            patterns,
        )
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct Throughput {
    /// `stdout`, `stderr`: the file the progress lines came from.
    pub stream: &'static str,
    pub tool: Tool,
    /// The unit of the rates: the bar's count per second (`it/s`, `steps/s`…).
    pub unit: &'static str,
    pub points: Vec<RatePoint>,
    pub slowdowns: Vec<SlowdownSeen>,
    /// How exactly a reading is placed, s: half the recording's interval and the tolerance of
    /// the recorder's notes (`recording::output`).
    pub placed_within_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SlowdownSeen {
    #[serde(flatten)]
    pub slowdown: Slowdown,
    /// What held the job's cards over the same stretch, from their exact counters.
    pub held: Vec<CardHold>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CardHold {
    pub card: String,
    pub limiter: &'static str,
    pub seconds: f64,
}

/// The rate unit of a tool's count.
fn unit_of(tool: Tool) -> &'static str {
    match tool {
        Tool::Tqdm | Tool::Pattern => "it/s",
        Tool::Keras | Tool::Gromacs | Tool::HfTrainer => "steps/s",
        Tool::Lammps => "timesteps/s",
    }
}

/// The counts of the log's most frequent counting tool, bars told apart: a new bar when the
/// label or total changes or the count goes back. `offset`: where `text` starts in the file.
fn counts(readings: &[Reading], offset: u64) -> Option<(Tool, Vec<Count>)> {
    let counting: Vec<&Reading> = readings.iter().filter(|r| r.count.is_some()).collect();
    let tool = [
        Tool::Tqdm,
        Tool::Keras,
        Tool::Gromacs,
        Tool::Lammps,
        Tool::Pattern,
    ]
    .into_iter()
    .max_by_key(|t| counting.iter().filter(|r| r.tool == *t).count())?;
    let mut bar = 0u32;
    let mut last: Option<(&Option<String>, Option<u64>, u64)> = None;
    let mut out = Vec::new();
    for r in counting.into_iter().filter(|r| r.tool == tool) {
        let c = r.count.as_ref()?;
        if let Some((label, total, done)) = last {
            if label != &r.label || total != c.total || c.done < done {
                bar += 1;
            }
        }
        last = Some((&r.label, c.total, c.done));
        out.push(Count {
            end_offset: offset + r.end as u64,
            bar,
            done: c.done as f64,
        });
    }
    (!out.is_empty()).then_some((tool, out))
}

/// The throughput of a log's `text` (the file's bytes from `offset`), placed by `sizes` of a
/// recording read every second; `None` when it holds no progress count or no size was noted.
pub fn from_log(
    stream: &'static str,
    text: (&str, u64),
    sizes: &[SizeAt],
    cards: &[CardRows],
) -> Option<Throughput> {
    from_log_with(
        stream,
        text,
        (sizes, 1000),
        cards,
        &progress::Patterns::default(),
    )
}

/// [`from_log`] with a pattern file's lines tried first.
/// `interval_ms`: the recording's, beside whose rows the sizes were read (the rates' bins).
pub fn from_log_with(
    stream: &'static str,
    (text, offset): (&str, u64),
    (sizes, interval_ms): (&[SizeAt], i64),
    cards: &[CardRows],
    patterns: &progress::Patterns,
) -> Option<Throughput> {
    let sizes = throughput::since_last_truncation(sizes);
    if sizes.len() < 2 {
        return None;
    }
    let (tool, counts) = counts(&progress::readings_with(text, patterns), offset)?;
    let points = throughput::series(&counts, sizes, interval_ms.max(1000));
    let slowdowns = throughput::slowdowns(&points)
        .into_iter()
        .map(|s| SlowdownSeen {
            held: held(cards, &s),
            slowdown: s,
        })
        .collect();
    Some(Throughput {
        stream,
        tool,
        unit: unit_of(tool),
        points,
        slowdowns,
        placed_within_seconds: placed_within_seconds(interval_ms),
    })
}

/// How exactly a reading is placed when sizes are read every `interval_ms`: half an
/// interval, and the tolerance the recorder kept its notes within.
fn placed_within_seconds(interval_ms: i64) -> f64 {
    (interval_ms as f64 / 2.0 + TOLERANCE_MS as f64) / 1e3
}

/// Each card's limiters that held it for at least [`HELD_SHARE`] of the slowdown.
fn held(cards: &[CardRows], s: &Slowdown) -> Vec<CardHold> {
    let span = (s.to_unix_ms - s.from_unix_ms) as f64 / 1e3;
    let mut out = Vec::new();
    for c in cards {
        let Some(l): Option<CardLedger> = card_ledger(&c.rows, s.from_unix_ms, s.to_unix_ms) else {
            continue;
        };
        for (k, secs) in l.limiter_seconds.iter().enumerate() {
            let name = GPU_LIMITER_NAMES[k];
            if name.starts_with("total_") {
                continue; // any reason at all: the named limiters say which
            }
            if let Some(secs) = secs.filter(|v| *v >= HELD_SHARE * span) {
                out.push(CardHold {
                    card: c.label.clone(),
                    limiter: name,
                    seconds: secs,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tqdm-style log at 8 it/s with a 20-s stretch at 2 it/s, redrawn every 0.1 s, and
    /// 1-s rows noting the file's size: the slowdown comes out with its loss.
    #[test]
    fn a_tqdm_log_gives_its_series_and_slowdown() {
        let t0 = 1_700_000_000_000i64;
        let (mut text, mut sizes, mut done) = (String::new(), Vec::new(), 0.0f64);
        for tenth in 0..600i64 {
            let slow = (200..400).contains(&tenth);
            done += if slow { 0.2 } else { 0.8 };
            let secs = tenth / 10;
            text.push_str(&format!(
                "\r{}/1000 [00:{:02}<00:30,  8.00it/s]",
                done.floor(),
                secs.min(59)
            ));
            if tenth % 10 == 0 {
                sizes.push(SizeAt {
                    t_unix_ms: t0 + tenth * 100,
                    bytes: text.len() as u64,
                });
            }
        }
        let t = from_log("stderr", (&text, 0), &sizes, &[]).expect("a throughput");
        assert_eq!((t.tool, t.unit), (Tool::Tqdm, "it/s"));
        assert_eq!(t.slowdowns.len(), 1, "{:?}", t.slowdowns);
        let s = &t.slowdowns[0].slowdown;
        assert!(((s.from_unix_ms - t0) - 20_000).abs() <= 2000, "{s:?}");
        assert!(((s.to_unix_ms - t0) - 40_000).abs() <= 2000, "{s:?}");
        assert!((s.seconds_lost - 15.0).abs() <= 1.5, "{s:?}");
        assert!((t.placed_within_seconds - 0.75).abs() < 1e-9);
    }

    #[test]
    fn no_sizes_or_no_counts_no_throughput() {
        let sizes = [
            SizeAt {
                t_unix_ms: 0,
                bytes: 10,
            },
            SizeAt {
                t_unix_ms: 1000,
                bytes: 20,
            },
        ];
        assert!(from_log("stdout", ("hello\nworld\n", 0), &sizes, &[]).is_none());
        assert!(from_log(
            "stdout",
            ("\r1/10 [00:01<00:09,  1.00it/s]", 0),
            &sizes[..1],
            &[]
        )
        .is_none());
    }
}
