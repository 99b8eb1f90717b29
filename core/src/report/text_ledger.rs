//! The report's opening section: where the allocation went ([`crate::analysis::ledger`]), each
//! line saying how it was measured. Its lines ([`cpu_line`], [`stall_line`], [`gpu_line`])
//! are the live dashboard's too, and the HTML report opens with the section.

use std::fmt::Write;

use super::Report;
use crate::analysis::ledger::{Ledger, STALLS};

/// Resource time (`what`: core, GPU) in the unit a reader compares at a glance: hours from
/// one hour up, else seconds.
fn resource_time(seconds: f64, what: &str) -> String {
    if seconds >= 3600.0 {
        format!("{:.2} {what}-hours", seconds / 3600.0)
    } else {
        format!("{seconds:.1} {what}-seconds")
    }
}

fn core_time(seconds: f64) -> String {
    resource_time(seconds, "core")
}

fn gpu_time(seconds: f64) -> String {
    resource_time(seconds, "GPU")
}

/// A share as a percentage, `<0.1%` for a small one that is not 0.
pub fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p > 0.0 && p < 0.1 {
        "<0.1%".into()
    } else {
        format!("{p:.1}%")
    }
}

/// The CPU line: the core time allocated and how much of it was idle; `None` without both.
pub fn cpu_line(l: &Ledger) -> Option<String> {
    let (a, u) = l.core_seconds_allocated.zip(l.core_seconds_used)?;
    Some(format!(
        "of {}, {} idle",
        core_time(a),
        core_time((a - u).max(0.0))
    ))
}

/// Each resource's `some` share of the wall time, with `full` beside it when known:
/// `12.0% on memory (some task, all tasks 3.0%)`; `None` when no share is known.
pub fn stall_shares(l: &Ledger) -> Option<String> {
    let share = l.stall_share_of_wall.to_array();
    let mut parts = Vec::new();
    for (k, (resource, kind)) in STALLS.iter().enumerate() {
        if *kind != "some" {
            continue;
        }
        let Some(some) = share[k] else { continue };
        let full = share[k + 1].map_or(String::new(), |f| format!(", all tasks {}", percent(f)));
        parts.push(format!(
            "{} on {resource} ({}{full})",
            percent(some),
            "some task"
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The stall line: `stalled: ` and [`stall_shares`].
pub fn stall_line(l: &Ledger) -> Option<String> {
    stall_shares(l).map(|s| format!("stalled: {s}"))
}

/// What each limiter means to a reader; the clock totals (any reason) are in the JSON only.
pub const LIMITER_WORDS: [(&str, &str); 6] = [
    ("power", "held below its clocks by the power brake"),
    ("thermal", "by heat"),
    ("board_limit", "by the board's limit"),
    ("reliability", "by reliability limits"),
    ("sync_boost", "by sync boost"),
    ("low_utilization", "by low utilization"),
];

/// The GPU line: the cards' time, none of it with work, and each limiter's share.
pub fn gpu_line(l: &Ledger) -> Option<String> {
    let total = l.gpu_seconds?;
    let mut parts = vec![format!(
        "of {} ({} card{})",
        gpu_time(total),
        l.gpus.len(),
        if l.gpus.len() == 1 { "" } else { "s" }
    )];
    if let Some(idle) = l.gpu_no_work_seconds {
        parts.push(format!("{} with no work resident", gpu_time(idle)));
    }
    for (name, words) in LIMITER_WORDS {
        if let Some(s) = l.gpu_held_seconds.get(name).filter(|s| **s > 0.0) {
            parts.push(format!("{} {words}", gpu_time(*s)));
        }
    }
    Some(parts.join(", "))
}

/// WHERE THE ALLOCATION WENT; nothing when there is no recording.
pub fn section(o: &mut String, r: &Report) {
    let Some(l) = &r.ledger else { return };
    let _ = writeln!(
        o,
        "\nWHERE THE ALLOCATION WENT (exact: the kernel's cumulative counters, first to last reading)"
    );
    match (cpu_line(l), l.core_seconds_used) {
        (Some(line), Some(u)) => {
            let _ = writeln!(
                o,
                "  {line} (used {}: the job cgroup's CPU time against {} × {})",
                core_time(u),
                l.cores_allocated.map_or("n/a cores".into(), |c| {
                    format!("{c:.0} core{}", if c == 1.0 { "" } else { "s" })
                }),
                l.wall_seconds.map_or("n/a".into(), crate::units::duration)
            );
        }
        _ => {
            let _ = writeln!(o, "  CPU: n/a (no CPU total or allocation recorded)");
        }
    }
    match (&l.stalls_unavailable, stall_line(l)) {
        (None, Some(line)) => {
            let _ = writeln!(o, "  {line}");
            let _ = writeln!(
                o,
                "    (share of the wall time in which the job's tasks waited: cgroup v2 \
                 cpu/memory/io.pressure totals)"
            );
        }
        (Some(why), _) => {
            let _ = writeln!(o, "  stalls: {why}");
        }
        (None, None) => {}
    }
    if let Some(line) = gpu_line(l) {
        let _ = writeln!(o, "  {line}");
        let _ = writeln!(
            o,
            "    (NVML's violation counters and utilization samples, each card's first to last reading)"
        );
        for c in &l.gpus {
            if let Some(g) = &c.time.gpm {
                let pct = |v: Option<f64>| v.map_or("n/a".into(), |p| format!("{p:.0}%"));
                let _ = writeln!(
                    o,
                    "  {}: SM active {}, tensor active {}, DRAM bandwidth {} (GPM means)",
                    crate::render::terminal::field(&c.label),
                    pct(g.sm_active_percent),
                    pct(g.tensor_active_percent),
                    pct(g.dram_bw_util_percent)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::ledger::{build, Inputs, StallSeconds};
    use crate::sample::Source;

    #[test]
    fn the_gpu_line_sums_the_cards_and_names_the_limiters_that_held_them() {
        use crate::analysis::summary::{CardTime, GpuSummary};
        let card = |label: &str, idle: f64, power: f64| GpuSummary {
            label: label.into(),
            ledger: Some(CardTime {
                span_seconds: 3600.0,
                held_seconds: [("power".to_string(), power), ("thermal".to_string(), 0.0)]
                    .into_iter()
                    .collect(),
                no_work_seconds: Some(idle),
                ..CardTime::default()
            }),
            ..GpuSummary::default()
        };
        let gpus = [card("cuda:0", 1800.0, 900.0), card("cuda:1", 0.0, 0.0)];
        let l = build(&Inputs {
            gpus: &gpus,
            ..Inputs::default()
        });
        assert_eq!(
            gpu_line(&l).unwrap(),
            "of 2.00 GPU-hours (2 cards), 1800.0 GPU-seconds with no work resident, \
             900.0 GPU-seconds held below its clocks by the power brake"
        );
        // A card without a ledger (an older file) adds nothing, not a zero.
        let old = [GpuSummary::default()];
        let none = build(&Inputs {
            gpus: &old,
            ..Inputs::default()
        });
        assert!(gpu_line(&none).is_none());
    }

    #[test]
    fn stall_shares_read_as_percent_of_the_wall_time() {
        let stalls = StallSeconds {
            memory_some: Some(12.0),
            memory_full: Some(3.0),
            cpu_some: Some(0.05),
            ..StallSeconds::default()
        };
        let l = build(&Inputs {
            wall_seconds: Some(100.0),
            cores_allocated: Some(4.0),
            cpu_seconds: Some(100.0),
            stalls,
            nodes: 1,
            source: Some(Source::CgroupV2),
            gpus: &[],
            ..Inputs::default()
        });
        assert_eq!(
            stall_line(&l).unwrap(),
            "stalled: <0.1% on cpu (some task); 12.0% on memory (some task, all tasks 3.0%)"
        );
    }
}
