//! Progress lines in a job's log: how far the job's own work got and how fast, as its tools
//! print it, each reading with the byte offset where it ends so that the report can place it in
//! wall-clock time (issue 39's throughput series). Pure functions over text, no I/O.
//!
//! Every built-in parser was written from real captured output (tests/fixtures/joblog/progress,
//! the tool and its version in each file's name):
//!
//! - [tqdm](tqdm)'s bar, which PyTorch Lightning and Hugging Face's Trainer print too: a count,
//!   its total and description (`Epoch 3`), a rate in `it/s` (its `s/it` turned over).
//! - [GROMACS](gromacs) `mdrun -v`: the step of each `step N, …` line, the run's total steps,
//!   and the final `Performance:` in `ns/day` with the run's wall seconds.
//! - [LAMMPS](lammps): the `Step` column of the thermo table, and each run's `Performance:`
//!   (`ns/day` or `tau/day`, `timesteps/s`) with its `Loop time` seconds.
//! - [Keras](keras) 3 and 2 `fit`/`evaluate` bars (`63/63 ━━━━ 1s 5ms/step`, `[====] - 1s
//!   5ms/step`, `verbose=2`'s `300/300 - 1s - 3ms/step`): the batch count under its `Epoch N/M`,
//!   a rate in `steps/s` (its `ms/step` turned over), the epoch's seconds once it ends.
//! - [Hugging Face's Trainer](hf) dict lines that carry rates (`train_samples_per_second`,
//!   `eval_steps_per_second`, …, with `train_runtime` as seconds); its loss lines carry none, and
//!   its progress is its tqdm bar. PyTorch Lightning's own lines are left to the tqdm bar.
//!
//! A site or a user adds tools with a pattern file ([patterns]: one regular expression a line).
//!
//! tqdm, GROMACS and Keras redraw with `\r`, so one `\n` line can hold many readings: a reading
//! is a segment ended by either. Terminal escapes and backspaces (Keras 3 writes both even to a
//! file) are dropped before parsing; offsets stay those of the original text. Bounded whatever
//! the log: at most [`MAX_PARSED_BYTES`] are read, segments over [`MAX_LINE_BYTES`] are skipped,
//! and at most [`MAX_READINGS`] are kept, evenly thinned.

mod gromacs;
mod hf;
mod keras;
mod lammps;
pub mod patterns;
mod tqdm;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

pub use patterns::{parse_patterns, PatternError, PatternProblem, Patterns};

/// The most bytes of a log parsed: those past it (cut back to the last line end before it)
/// are not read.
pub const MAX_PARSED_BYTES: usize = 64 << 20;
/// The most readings kept: past it every other one is dropped (the stride doubled), so the
/// series still spans the whole log; the last reading is always kept.
pub const MAX_READINGS: usize = 50_000;
/// A segment (between two `\r`/`\n`) longer than this is no progress line: skipped unparsed.
pub const MAX_LINE_BYTES: usize = 4096;

/// The tool a reading came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    Tqdm,
    Gromacs,
    Lammps,
    Keras,
    /// Hugging Face's Trainer (its dict lines; its bar is [`Tool::Tqdm`]).
    HfTrainer,
    /// A line of the pattern file.
    Pattern,
}

/// How far the work got.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Count {
    pub done: u64,
    /// `None` where the tool does not say (a tqdm bar without a total, LAMMPS's steps).
    pub total: Option<u64>,
}

/// A rate as the tool printed it, turned over where it printed time per unit, so that higher
/// is always faster: tqdm's `s/it` becomes `it/s`, Keras's `ms/step` becomes `steps/s`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rate {
    pub value: f64,
    /// `it/s`, `ns/day`, `tau/day`, `timesteps/s`, `steps/s`, `samples/s`, or a pattern's unit.
    pub unit: Cow<'static, str>,
}

impl Rate {
    /// `None` for a value that is no rate (negative, NaN, infinite).
    fn new(value: f64, unit: impl Into<Cow<'static, str>>) -> Option<Rate> {
        (value.is_finite() && value >= 0.0).then(|| Rate {
            value,
            unit: unit.into(),
        })
    }
}

/// One progress reading: where in the text it ended, which tool said it, and what it said.
/// It holds a count, at least one rate, or both.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reading {
    /// Byte offset in the text just past the reading's last byte, its `\r`/`\n` not counted:
    /// tqdm and GROMACS write the `\r` that ends a bar only with the next one (and Keras its
    /// backspaces), so the reading was in the file once the file held `end` bytes. Text written
    /// after a reading on its line (a logger's line after a tqdm bar) counts with it.
    pub end: usize,
    pub tool: Tool,
    /// What the reading is of, as printed: tqdm's description (`Epoch 3`), Keras's `Epoch 2/3`,
    /// Hugging Face's `train` or `eval`.
    pub label: Option<String>,
    pub count: Option<Count>,
    /// Every rate the line printed (LAMMPS prints two or three), in the tool's order.
    pub rates: Vec<Rate>,
    /// Seconds the tool says it has been running (tqdm's bar, a Keras epoch, an MD run).
    pub elapsed_seconds: Option<f64>,
}

impl Reading {
    fn new(tool: Tool) -> Reading {
        Reading {
            end: 0,
            tool,
            label: None,
            count: None,
            rates: Vec::new(),
            elapsed_seconds: None,
        }
    }

    fn is_empty(&self) -> bool {
        self.count.is_none() && self.rates.is_empty()
    }
}

/// Every progress reading of `text` by the built-in parsers, in order.
pub fn readings(text: &str) -> Vec<Reading> {
    readings_with(text, &Patterns::default())
}

/// Every progress reading of `text`, the pattern file's lines tried first (a site's pattern
/// can claim a line a built-in parser would read otherwise).
pub fn readings_with(text: &str, patterns: &Patterns) -> Vec<Reading> {
    bounded(text, patterns, MAX_PARSED_BYTES, MAX_READINGS)
}

fn bounded(text: &str, patterns: &Patterns, max_bytes: usize, max_readings: usize) -> Vec<Reading> {
    let text = head(text, max_bytes);
    let mut tools = Tools::new(patterns);
    let mut kept = Kept::new(max_readings);
    for (segment, end) in segments(text) {
        if segment.len() > MAX_LINE_BYTES {
            continue;
        }
        if let Some(mut r) = tools.read(&clean(segment)) {
            // Keras rubs out its bar with backspaces written with the next one, not with it.
            r.end = end - segment.bytes().rev().take_while(|b| *b == 8).count();
            kept.push(r);
        }
    }
    kept.finish()
}

/// The parsers, and what the stateful ones remember between lines.
struct Tools<'p> {
    patterns: &'p Patterns,
    gromacs: gromacs::Gromacs,
    lammps: lammps::Lammps,
    keras: keras::Keras,
}

impl<'p> Tools<'p> {
    fn new(patterns: &'p Patterns) -> Tools<'p> {
        Tools {
            patterns,
            gromacs: Default::default(),
            lammps: Default::default(),
            keras: Default::default(),
        }
    }

    /// The first parser's reading of `line`. The stateful parsers see every line, also one
    /// another parser reads: their banners, headers and epochs are context, not readings.
    fn read(&mut self, line: &str) -> Option<Reading> {
        let g = self.gromacs.line(line);
        let l = self.lammps.line(line);
        let k = self.keras.line(line);
        let r = self.patterns.read(line);
        r.or_else(|| tqdm::parse(line))
            .or(k)
            .or(g)
            .or(l)
            .or_else(|| hf::parse(line))
            .filter(|r| !r.is_empty())
    }
}

/// The readings kept: past `max`, every other one is dropped and the stride doubled.
struct Kept {
    max: usize,
    stride: usize,
    seen: usize,
    readings: Vec<Reading>,
    /// The latest reading off the stride, kept at the end if it is the last.
    skipped: Option<Reading>,
}

impl Kept {
    fn new(max: usize) -> Kept {
        Kept {
            max: max.max(2),
            stride: 1,
            seen: 0,
            readings: Vec::new(),
            skipped: None,
        }
    }

    fn push(&mut self, r: Reading) {
        let i = self.seen;
        self.seen += 1;
        if self.readings.len() >= self.max && i.is_multiple_of(self.stride) {
            let mut k = 0;
            self.readings.retain(|_| {
                k += 1;
                k % 2 == 1
            });
            self.stride *= 2;
        }
        if i.is_multiple_of(self.stride) {
            self.readings.push(r);
            self.skipped = None;
        } else {
            self.skipped = Some(r);
        }
    }

    fn finish(mut self) -> Vec<Reading> {
        if let Some(r) = self.skipped {
            // The last reading is often the run's final figures (GROMACS's ns/day).
            if self.readings.len() >= self.max {
                self.readings.pop();
            }
            self.readings.push(r);
        }
        self.readings
    }
}

/// `text` up to `max` bytes, cut back to its last line end (never inside a character).
fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    match memchr::memrchr2(b'\n', b'\r', &text.as_bytes()[..max]) {
        Some(i) => &text[..i + 1],
        None => "",
    }
}

/// Each segment of `text` between `\r`/`\n`, with the offset of its end (its terminator's).
fn segments(text: &str) -> impl Iterator<Item = (&str, usize)> {
    let ends = memchr::memchr2_iter(b'\n', b'\r', text.as_bytes()).chain([text.len()]);
    let mut start = 0;
    ends.map(move |end| {
        let s = &text[start..end];
        start = end + 1;
        (s, end)
    })
}

/// `line` without terminal escapes (`ESC [ … final`) and backspaces: Keras 3 colours its bar
/// and rubs it out with backspaces, even in a file.
fn clean(line: &str) -> Cow<'_, str> {
    if !line.contains(['\u{1b}', '\u{8}']) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\u{8}' => {}
            '\u{1b}' => {
                if chars.next() == Some('[') {
                    chars.by_ref().find(|d| ('@'..='~').contains(d));
                }
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A number as the tools print it (`1e-06`, `285.264`), finite.
fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// `MM:SS` or `H:MM:SS` as seconds.
fn clock_seconds(s: &str) -> Option<u64> {
    s.trim()
        .split(':')
        .try_fold(0u64, |acc, p| Some(acc * 60 + p.parse::<u64>().ok()?))
}

#[cfg(test)]
mod tests;
