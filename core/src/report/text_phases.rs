//! The report's PHASES section: the job's own marks (`slurmwatch mark`) as a table, one
//! line per phase, with how exact its figures are.

use std::fmt::Write;

use super::Report;
use crate::units::{bytes, duration};

/// A phase's label is cut to this many characters where it is shown (the table's column,
/// the chart's mark); labels are the user's and may be up to 200 bytes.
pub const LABEL_CHARS: usize = 24;

fn or_na<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "n/a".into())
}

/// Nothing when the job marked no phase.
pub fn section(o: &mut String, r: &Report) {
    if r.phases.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nPHASES (as the job marked them)");
    let unit = r.throughput.as_ref().map(|t| t.unit.as_ref());
    let rate_head = unit.map_or(String::new(), |u| format!(" {:>14}", format!("rate ({u})")));
    let _ = writeln!(
        o,
        "  {:<24} {:>10} {:>10} {:>10} {:>10} {:>10}{rate_head}",
        "phase", "time", "CPU", "GPU time", "energy", "peak mem"
    );
    for p in &r.phases {
        let label: String = p.label.chars().take(LABEL_CHARS).collect();
        let _ = writeln!(
            o,
            "  {label:<24} {:>10} {:>10} {:>10} {:>10} {:>10}",
            duration(p.seconds),
            or_na(p.cpu_seconds, |s| format!("{s:.2} s")),
            or_na(p.gpu_seconds, |s| format!("{:.2} h", s / 3600.0)),
            or_na(p.gpu_energy_joules, |j| format!("{:.1} kJ", j / 1e3)),
            or_na(p.peak_working_set_bytes, bytes),
        );
        if unit.is_some() {
            o.pop(); // the line's newline: the rate goes on it
            let _ = writeln!(
                o,
                " {:>14}",
                or_na(p.rate_per_second, |v| format!("{v:.2}"))
            );
        }
    }
    let how = if r.phases.iter().all(|p| p.exact) {
        "each boundary is a reading the recorder took at the instant of the mark"
    } else {
        "some boundaries had no reading of their own and are interpolated between the rows around them"
    };
    let _ = writeln!(
        o,
        "  CPU is the cgroup's own counter and energy the cards' (NVML), read at both ends; GPU time is cards × duration; {how}."
    );
}
