//! The report's opening section: where the allocation went ([`crate::analysis::ledger`]), each
//! line saying how it was measured.

use std::fmt::Write;

use super::Report;
use crate::analysis::ledger::{Ledger, STALLS};

/// Core time in the unit a reader compares at a glance: core-hours from one hour up.
fn core_time(seconds: f64) -> String {
    if seconds >= 3600.0 {
        format!("{:.2} core-hours", seconds / 3600.0)
    } else {
        format!("{seconds:.1} core-seconds")
    }
}

fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p > 0.0 && p < 0.1 {
        "<0.1%".into()
    } else {
        format!("{p:.1}%")
    }
}

/// The stall line: each resource's `some` share, with `full` beside it when known.
fn stall_line(l: &Ledger) -> Option<String> {
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
    (!parts.is_empty()).then(|| format!("stalled: {}", parts.join("; ")))
}

/// WHERE THE ALLOCATION WENT; nothing when there is no recording.
pub fn section(o: &mut String, r: &Report) {
    let Some(l) = &r.ledger else { return };
    let _ = writeln!(
        o,
        "\nWHERE THE ALLOCATION WENT (exact: the kernel's cumulative counters, first to last reading)"
    );
    match (l.core_seconds_allocated, l.core_seconds_used) {
        (Some(a), Some(u)) => {
            let _ = writeln!(
                o,
                "  of {}, {} idle (used {}: the job cgroup's CPU time against {} cores × {})",
                core_time(a),
                core_time((a - u).max(0.0)),
                core_time(u),
                l.cores_allocated
                    .map_or("n/a".into(), |c| format!("{c:.0}")),
                crate::units::duration(l.wall_seconds.unwrap_or(0.0))
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::ledger::{build, StallSeconds};
    use crate::sample::Source;

    #[test]
    fn stall_shares_read_as_percent_of_the_wall_time() {
        let stalls = StallSeconds {
            memory_some: Some(12.0),
            memory_full: Some(3.0),
            cpu_some: Some(0.05),
            ..StallSeconds::default()
        };
        let l = build(
            Some(100.0),
            Some(4.0),
            Some(100.0),
            stalls,
            1,
            Some(Source::CgroupV2),
        );
        assert_eq!(
            stall_line(&l).unwrap(),
            "stalled: <0.1% on cpu (some task); 12.0% on memory (some task, all tasks 3.0%)"
        );
    }
}
