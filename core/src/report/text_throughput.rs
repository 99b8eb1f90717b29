//! The report's THROUGHPUT section: how fast the job's own work went (its log's progress
//! lines placed in time) and each slowdown beside what held the cards meanwhile.

use std::fmt::Write;

use super::text_ledger::LIMITER_WORDS;
use super::throughput::{SlowdownSeen, Throughput};
use super::Report;
use crate::analysis::progress::Tool;
use crate::units::{clock, duration};

/// What a limiter did to a card, in the ledger's words ("by heat"); the chart's slowdown
/// titles say it the same way.
pub fn limiter_words(name: &str) -> &str {
    LIMITER_WORDS
        .iter()
        .find(|(k, _)| *k == name)
        .map_or(name, |(_, w)| {
            w.trim_start_matches("held below its clocks ")
        })
}

/// The tool as its users name it.
pub fn tool_name(t: Tool) -> &'static str {
    match t {
        Tool::Tqdm => "tqdm",
        Tool::Gromacs => "GROMACS",
        Tool::Lammps => "LAMMPS",
        Tool::Keras => "Keras",
        Tool::HfTrainer => "Hugging Face Trainer",
        Tool::Pattern => "pattern-file",
    }
}

/// Nothing without a throughput.
pub fn section(o: &mut String, r: &Report) {
    let Some(t) = &r.throughput else { return };
    let from = match t.stream.as_ref() {
        "stdout" | "stderr" => t.stream.as_ref(),
        "stdout+stderr" => "output",
        _ => "log",
    };
    let _ = writeln!(o, "\nTHROUGHPUT (the job's own progress, from its {from})");
    let usual = t.slowdowns.first().map(|s| s.slowdown.usual_per_second);
    let _ = writeln!(
        o,
        "  {} rates from {} progress lines, placed in time by the output file's size at each recorded row (within ±{:.1} s){}",
        t.points.len(),
        tool_name(t.tool),
        t.placed_within_seconds,
        usual.map_or(String::new(), |u| format!("; usually {}", rate(u, t)))
    );
    if t.slowdowns.is_empty() {
        let _ = writeln!(
            o,
            "  no slowdown: it never fell below 60 % of its usual rate for 3 s or more"
        );
    }
    for s in &t.slowdowns {
        let _ = writeln!(o, "  {}", slowdown_words(t, s));
    }
}

/// A rate in the throughput's unit (`9.87 it/s`).
pub fn rate(per_second: f64, t: &Throughput) -> String {
    format!("{per_second:.2} {}", t.unit)
}

/// What held each card over a slowdown, one phrase each (`cuda:0 {verb} by heat (18.0 s)`),
/// for the report's line and the chart's band.
pub fn held_words(held: &[crate::analysis::throughput::CardHold], verb: &str) -> Vec<String> {
    held.iter()
        .map(|h| {
            format!(
                "{} {verb} {} ({:.1} s)",
                h.card,
                limiter_words(&h.limiter),
                h.seconds
            )
        })
        .collect()
}

/// One slowdown and what held the cards meanwhile (`throughput fell from 8.00 to 2.00 it/s
/// at 10:00:20 for 20 s while cuda:0 was held by heat (18.0 s): about 15 s lost`).
pub fn slowdown_words(t: &Throughput, s: &SlowdownSeen) -> String {
    let d = &s.slowdown;
    let held = held_words(&s.held, "was held");
    let why = if held.is_empty() {
        String::new()
    } else {
        format!(" while {}", held.join(", "))
    };
    format!(
        "throughput fell from {:.2} to {} at {} for {}{why}: about {} lost",
        d.usual_per_second,
        rate(d.during_per_second, t),
        clock(d.from_unix_ms),
        duration((d.to_unix_ms - d.from_unix_ms) as f64 / 1e3),
        duration(d.seconds_lost),
    )
}
