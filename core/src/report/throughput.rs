//! The report's `throughput`: the job's own progress lines (`analysis::progress`) read from
//! its log, placed in time by the output sizes the recorder noted (`analysis::throughput`),
//! and each slowdown set beside what the job's cards' exact ledger says held them back over
//! the same stretch ("busy is not useful work").

use crate::analysis::progress::{self, Reading, Tool};
use crate::analysis::throughput::{self, Count, RatePoint, SizeAt, Slowdown};
pub use crate::analysis::throughput::{CardHold, SlowdownSeen, Throughput};
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
        let mut p = ProgressInputs::load_sizes(reader)?;
        if marked || !p.is_empty() {
            p.load_cards(reader)?;
        }
        Ok(p)
    }

    /// The noted sizes and the interval alone (cheap: the live view asks whether they grew
    /// before reading every card's rows).
    pub fn load_sizes(reader: &crate::store::Reader) -> crate::error::Result<ProgressInputs> {
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
        Ok(ProgressInputs {
            stdout: sizes(1)?,
            stderr: sizes(2)?,
            cards: Vec::new(),
            interval_ms: i64::from(reader.meta()?.interval_seconds.max(1)) * 1000,
        })
    }

    /// The cards' rows, to set a slowdown beside.
    pub fn load_cards(&mut self, reader: &crate::store::Reader) -> crate::error::Result<()> {
        self.cards.clear();
        for g in reader.gpus()? {
            self.cards.push(CardRows {
                label: g.card.label(),
                rows: reader.gpu_samples(g.id)?,
            });
        }
        Ok(())
    }
}

/// The throughput from the job's log files (`(stream, path, found by)`, as the report
/// located them), read as their owner up to [`progress::MAX_PARSED_BYTES`] from their end:
/// the first file whose progress lines the noted sizes place.
///
/// `read_at_ms`: a running job's log (the live view), read at this time. The recorder notes
/// only the knots of the file's growth, so a steady writer's newest lines lie past the last
/// note until its pace changes or it ends; the size this read found is then one more
/// observation of the file (a reading like a row's), and `placed_within_seconds` grows to
/// half the gap since the last note.
pub fn from_files(
    files: &[(&'static str, std::path::PathBuf, &'static str)],
    owner: Option<u32>,
    inputs: &ProgressInputs,
    (patterns, read_at_ms): (&progress::Patterns, Option<i64>),
) -> Option<Throughput> {
    files.iter().find_map(|(stream, path, _)| {
        // stderr has sizes of its own only when it is another file than stdout.
        let noted = match *stream {
            "stderr" if !inputs.stderr.is_empty() => &inputs.stderr,
            "stderr" => return None,
            _ => &inputs.stdout,
        };
        let tail = super::joblog::read_tail(path, owner, progress::MAX_PARSED_BYTES as u64).ok()?;
        let offset = tail.size.saturating_sub(tail.read);
        let log = (tail.text.as_str(), offset);
        let last = noted.last().copied();
        // Nothing new to place when the size stands still; a smaller one is a truncation.
        let read = read_at_ms
            .zip(last)
            .filter(|(at, l)| *at > l.t_unix_ms && tail.size != l.bytes);
        let sizes: Vec<SizeAt> = match read {
            Some((at, _)) => [
                noted.as_slice(),
                &[SizeAt {
                    t_unix_ms: at,
                    bytes: tail.size,
                }],
            ]
            .concat(),
            None => noted.clone(),
        };
        let mut t = from_log_with(
            stream,
            log,
            (&sizes, inputs.interval_ms),
            &inputs.cards,
            patterns,
        )?;
        if let Some((at, l)) = read.filter(|(_, l)| tail.size > l.bytes) {
            let gap = (at - l.t_unix_ms) as f64 / 2e3;
            t.placed_within_seconds = t.placed_within_seconds.max(gap);
        }
        Some(t)
    })
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
        stream: stream.into(),
        tool,
        unit: unit_of(tool).into(),
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
                    limiter: name.into(),
                    seconds: secs,
                });
            }
        }
    }
    out
}

/// A slowdown is a finding when it cost at least this much wall time.
pub const SLOWDOWN_FINDING_MIN_SECONDS: f64 = 10.0;
/// `throughput_fell_while_busy`: the rate fell by at least this share from one marked phase
/// to the next…
pub const PHASE_FALL_SHARE: f64 = 0.2;
/// …while the cards were at least this busy in the later phase.
pub const BUSY_PERCENT: f64 = 90.0;

/// Each phase's own rate: the time-weighted mean of the points inside it.
pub fn rate_per_phase(t: &Throughput, phases: &mut [crate::analysis::phases::Phase]) {
    for p in phases {
        let inside: Vec<&RatePoint> = t
            .points
            .iter()
            .filter(|r| r.from_unix_ms >= p.started_unix_ms && r.to_unix_ms <= p.ended_unix_ms)
            .collect();
        let secs: f64 = inside
            .iter()
            .map(|r| (r.to_unix_ms - r.from_unix_ms) as f64)
            .sum();
        let work: f64 = inside
            .iter()
            .map(|r| r.per_second * (r.to_unix_ms - r.from_unix_ms) as f64)
            .sum();
        p.rate_per_second = (secs > 0.0).then(|| work / secs);
    }
}

/// `throughput_slowdown` for each slowdown that cost at least
/// [`SLOWDOWN_FINDING_MIN_SECONDS`], and `throughput_fell_while_busy` where the rate fell by
/// [`PHASE_FALL_SHARE`] from one marked phase to the next while the cards stayed busy.
pub fn findings(
    t: &Throughput,
    phases: &[crate::analysis::phases::Phase],
) -> Vec<crate::analysis::Finding> {
    use serde_json::json;
    let mut out = Vec::new();
    for s in t
        .slowdowns
        .iter()
        .filter(|s| s.slowdown.seconds_lost >= SLOWDOWN_FINDING_MIN_SECONDS)
    {
        let d = &s.slowdown;
        let held: Vec<String> = s
            .held
            .iter()
            .map(|h| {
                format!(
                    "{} was held by {} for {:.1} s",
                    h.card,
                    h.limiter.replace('_', " "),
                    h.seconds
                )
            })
            .collect();
        let why = if held.is_empty() {
            String::new()
        } else {
            format!(" while {}", held.join(", "))
        };
        let facts = json!({
            "from_unix_ms": d.from_unix_ms, "to_unix_ms": d.to_unix_ms,
            "usual_per_second": d.usual_per_second, "during_per_second": d.during_per_second,
            "unit": t.unit, "seconds_lost": d.seconds_lost, "held": s.held,
            "placed_within_seconds": t.placed_within_seconds,
        });
        out.push(finding(
            "throughput_slowdown",
            facts,
            format!(
                "The job's own rate fell from {:.2} to {:.2} {} for {:.0} s (from its log, placed within ±{:.2} s){why}: about {:.0} s lost.",
                d.usual_per_second,
                d.during_per_second,
                t.unit,
                (d.to_unix_ms - d.from_unix_ms) as f64 / 1e3,
                t.placed_within_seconds,
                d.seconds_lost
            ),
        ));
    }
    for w in phases.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let (Some(ra), Some(rb), Some(busy)) =
            (a.rate_per_second, b.rate_per_second, b.gpu_busy_percent)
        else {
            continue;
        };
        if ra <= 0.0 || rb > (1.0 - PHASE_FALL_SHARE) * ra || busy < BUSY_PERCENT {
            continue;
        }
        let fell = 1.0 - rb / ra;
        out.push(finding(
            "throughput_fell_while_busy",
            json!({ "from_phase": a.label, "to_phase": b.label, "from_per_second": ra,
                    "to_per_second": rb, "unit": t.unit, "gpu_busy_percent": busy }),
            format!(
                "The job's own rate fell {:.0} % from phase \"{}\" ({ra:.2} {u}) to \"{}\" ({rb:.2} {u}) while its cards stayed {busy:.0} % busy: busy is not useful work (a kernel was running, not necessarily the work's).",
                fell * 100.0,
                a.label,
                b.label,
                u = t.unit
            ),
        ));
    }
    out
}

fn finding(
    code: &'static str,
    facts: serde_json::Value,
    sentence: String,
) -> crate::analysis::Finding {
    crate::analysis::Finding {
        code,
        facts: facts.as_object().cloned().unwrap_or_default(),
        sentence,
        site_note: None,
    }
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
        assert_eq!((t.tool, t.unit.as_ref()), (Tool::Tqdm, "it/s"));
        assert_eq!(t.slowdowns.len(), 1, "{:?}", t.slowdowns);
        let s = &t.slowdowns[0].slowdown;
        assert!(((s.from_unix_ms - t0) - 20_000).abs() <= 2000, "{s:?}");
        assert!(((s.to_unix_ms - t0) - 40_000).abs() <= 2000, "{s:?}");
        assert!((s.seconds_lost - 15.0).abs() <= 1.5, "{s:?}");
        assert!((t.placed_within_seconds - 0.75).abs() < 1e-9);
    }

    /// A steady bar is noted at its start only (the recorder notes knots): the report's read
    /// places nothing past the last note, the live view's read places the rest by the size
    /// it found, and says the placement is as loose as half the gap since that note.
    #[test]
    fn a_live_read_places_a_steady_writers_lines_past_the_last_note() {
        let t0 = 1_700_000_000_000i64;
        let (mut text, mut sizes) = (String::new(), Vec::new());
        for tenth in 0..=300i64 {
            text.push_str(&format!(
                "\r{tenth}/1000 [00:{:02}<01:00, 10.00it/s]",
                tenth / 10
            ));
            if tenth == 0 || tenth == 10 {
                sizes.push(SizeAt {
                    t_unix_ms: t0 + tenth * 100,
                    bytes: text.len() as u64,
                });
            }
        }
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("out");
        std::fs::write(&path, &text).unwrap();
        // SAFETY: no failure mode.
        let me = unsafe { libc::geteuid() };
        let inputs = ProgressInputs {
            stdout: sizes,
            interval_ms: 1000,
            ..Default::default()
        };
        let files = [("stdout+stderr", path, "scontrol")];
        let patterns = progress::Patterns::default();
        let noted = from_files(&files, Some(me), &inputs, (&patterns, None));
        assert!(noted.is_none_or(|t| t.points.len() <= 1));
        let live = from_files(&files, Some(me), &inputs, (&patterns, Some(t0 + 30_000)))
            .expect("a throughput");
        assert!(live.points.len() >= 25, "{:?}", live.points);
        let usual = throughput::usual_rate(&live.points).unwrap();
        assert!((usual - 10.0).abs() < 0.5, "{usual}");
        assert!((live.placed_within_seconds - 14.5).abs() < 1e-9);
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

    /// Two marked phases: the rate falls 25 % while the cards stay 100 % busy (a finding),
    /// and a fall of 10 % (none); the slowdown costing 15 s is a finding of its own.
    #[test]
    fn a_rate_that_falls_between_busy_phases_is_said() {
        use crate::analysis::phases::Phase;
        let points: Vec<RatePoint> = (0..60)
            .map(|i| RatePoint {
                from_unix_ms: i * 1000,
                to_unix_ms: (i + 1) * 1000,
                per_second: match i {
                    0..20 => 4.0,
                    20..40 => 3.0,
                    _ => 2.8,
                },
            })
            .collect();
        let t = Throughput {
            stream: "stderr".into(),
            tool: Tool::Tqdm,
            unit: "it/s".into(),
            points,
            slowdowns: Vec::new(),
            placed_within_seconds: 0.75,
        };
        let phase = |label: &str, from: i64, to: i64| Phase {
            label: label.into(),
            started_unix_ms: from,
            ended_unix_ms: to,
            seconds: (to - from) as f64 / 1e3,
            cpu_seconds: None,
            gpu_seconds: None,
            gpu_energy_joules: None,
            peak_working_set_bytes: None,
            exact: true,
            gpu_busy_percent: Some(100.0),
            rate_per_second: None,
        };
        let mut phases = vec![
            phase("epoch 1", 0, 20_000),
            phase("epoch 2", 20_000, 40_000),
            phase("epoch 3", 40_000, 60_000),
        ];
        rate_per_phase(&t, &mut phases);
        assert_eq!(phases[1].rate_per_second, Some(3.0));
        let f = findings(&t, &phases);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "throughput_fell_while_busy");
        assert!(
            f[0].sentence.contains("fell 25 % from phase \"epoch 1\""),
            "{}",
            f[0].sentence
        );
        assert!(f[0].sentence.contains("busy is not useful work"));
        // Not busy: no finding.
        phases[1].gpu_busy_percent = Some(40.0);
        assert!(findings(&t, &phases).is_empty());
    }
}
