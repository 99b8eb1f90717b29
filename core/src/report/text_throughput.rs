//! The report's THROUGHPUT section: how fast the job's own work went (its log's progress
//! lines placed in time) and each slowdown beside what held the cards meanwhile.

use std::fmt::Write;

use super::text_ledger::LIMITER_WORDS;
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

fn tool_name(t: Tool) -> &'static str {
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
    let from = match t.stream {
        "stdout" | "stderr" => t.stream,
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
        usual.map_or(String::new(), |u| format!("; usually {u:.2} {}", t.unit))
    );
    if t.slowdowns.is_empty() {
        let _ = writeln!(
            o,
            "  no slowdown: it never fell below 60 % of its usual rate for 3 s or more"
        );
    }
    for s in &t.slowdowns {
        let d = &s.slowdown;
        let held: Vec<String> = s
            .held
            .iter()
            .map(|h| {
                format!(
                    "{} was held {} ({:.1} s)",
                    h.card,
                    limiter_words(h.limiter),
                    h.seconds
                )
            })
            .collect();
        let why = if held.is_empty() {
            String::new()
        } else {
            format!(" while {}", held.join(", "))
        };
        let _ = writeln!(
            o,
            "  throughput fell from {:.2} to {:.2} {} at {} for {}{why}: about {} lost",
            d.usual_per_second,
            d.during_per_second,
            t.unit,
            clock(d.from_unix_ms),
            duration((d.to_unix_ms - d.from_unix_ms) as f64 / 1e3),
            duration(d.seconds_lost),
        );
    }
}
