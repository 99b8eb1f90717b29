//! The `#SBATCH` lines one job's measurements support, one flag per function.

use super::{
    is, Facts, SbatchLine, Thresholds, MEM_HEADROOM_PERCENT, OOM_MEM_FACTOR, TIMEOUT_TIME_FACTOR,
    TIME_MARGIN_PERCENT, TIME_MIN_MARGIN_SECONDS,
};
use crate::units::{bytes, duration, mem_flag, time_flag, time_limit_flag};

/// The `#SBATCH` lines this job's measurements support, each with its reason.
pub fn sbatch(f: &Facts, t: &Thresholds) -> Vec<SbatchLine> {
    let mut out = Vec::new();
    mem_line(f, &mut out);
    cpus_per_task_line(f, &mut out);
    time_line(f, t, &mut out);
    gres_line(f, &mut out);
    out
}

/// `--mem`: after an OOM kill, the old limit × the OOM factor (or the working-set peak with
/// headroom, if larger); else the recorded working-set peak with headroom.
fn mem_line(f: &Facts, out: &mut Vec<SbatchLine>) {
    let oom = is(&f.state, "OUT_OF_MEMORY") || f.oom_kills.unwrap_or(0) > 0;
    if oom {
        if let Some(limit) = f.memory_limit_bytes {
            let want = (limit as f64 * OOM_MEM_FACTOR) as u64;
            let want = want.max(f.peak_working_set_bytes.map_or(0, |w| {
                (w as f64 * (1.0 + MEM_HEADROOM_PERCENT / 100.0)) as u64
            }));
            out.push(SbatchLine {
                flag: "--mem",
                value: mem_flag(want),
                reason: format!(
                    "OOM-killed at the {} limit: it needs more, how much more was not measured; the old limit × {OOM_MEM_FACTOR} is a start.",
                    bytes(limit)
                ),
            });
        }
    } else if let (true, Some(ws)) = (f.recorded, f.peak_working_set_bytes) {
        let want = (ws as f64 * (1.0 + MEM_HEADROOM_PERCENT / 100.0)) as u64;
        let mut reason = format!(
            "working-set peak {} + {MEM_HEADROOM_PERCENT:.0} % headroom",
            bytes(ws)
        );
        if let Some(l) = f.lifetime_peak_bytes.filter(|&l| l > ws + (64 << 20)) {
            reason += &format!(
                " (the kernel's {} includes reclaimable page cache, which needs no --mem)",
                bytes(l)
            );
        }
        out.push(SbatchLine {
            flag: "--mem",
            value: mem_flag(want),
            reason,
        });
    }
}

/// `--cpus-per-task`: the most cores busy at once per task (on the busiest node of a
/// multi-node job), never more than were allocated.
fn cpus_per_task_line(f: &Facts, out: &mut Vec<SbatchLine>) {
    // On a multi-node job the job's peak is a sum over nodes: the busiest node's peak, per
    // task there, is what one task needed.
    let per_node = f.busiest_node.as_ref();
    let cores = match per_node {
        Some(b) => Some((
            b.peak_effective_cores,
            b.cores_allocated,
            b.tasks.unwrap_or(1).max(1),
        )),
        None => f.peak_effective_cores.map(|p| (p, f.cores_allocated, 1)),
    };
    if let (true, Some((peak, alloc, tasks))) = (f.recorded, cores) {
        let n = (peak / f64::from(tasks) - 0.05).ceil().max(1.0) as u64;
        let alloc = alloc.map(|c| c as u64);
        if alloc.is_none_or(|a| n * u64::from(tasks) <= a) {
            let place = match per_node {
                Some(b) if tasks > 1 => {
                    format!(" on {} (the busiest node, {tasks} tasks there)", b.node)
                }
                Some(b) => format!(" on {} (the busiest node)", b.node),
                None => String::new(),
            };
            out.push(SbatchLine {
                flag: "--cpus-per-task",
                value: n.to_string(),
                reason: format!(
                    "at most {peak:.2} cores were busy at once{place}{}",
                    alloc
                        .map(|a| format!(" of {a} allocated"))
                        .unwrap_or_default()
                ),
            });
        }
    }
}

/// `--time`: after a TIMEOUT, the limit kept (idle at the end) or × the timeout factor (still
/// working); after a completed run, its elapsed time plus margin, or the limit it kept within.
/// A limit kept is printed as it is, not rounded as new advice is.
fn time_line(f: &Facts, t: &Thresholds, out: &mut Vec<SbatchLine>) {
    if let Some(el) = f.elapsed_seconds {
        if is(&f.state, "TIMEOUT") {
            let lim = f.timelimit_seconds.unwrap_or(el);
            let hung = matches!(f.last_stretch, Some((s, c)) if s > 0.0 && c < t.idle_max_cpu_seconds * s.min(t.idle_min_seconds) / t.idle_min_seconds);
            if hung {
                // Keeping the limit prints it as it is; without one, the elapsed time rounded.
                let value = f
                    .timelimit_seconds
                    .map_or_else(|| time_flag(el), time_limit_flag);
                out.push(SbatchLine {
                    flag: "--time",
                    value,
                    reason: format!("stopped at its {} limit while idle: keep the limit and find what it waited on", duration(lim)),
                });
            } else {
                out.push(SbatchLine {
                    flag: "--time",
                    value: time_flag(lim * TIMEOUT_TIME_FACTOR),
                    reason: format!(
                        "stopped at its {} limit still working; the time it needs is unknown, so never less than that (here × {TIMEOUT_TIME_FACTOR})",
                        duration(lim)
                    ),
                });
            }
        } else if is(&f.state, "COMPLETED") {
            let margin = (el * TIME_MARGIN_PERCENT / 100.0).max(TIME_MIN_MARGIN_SECONDS);
            match f.timelimit_seconds {
                // The limit was enough and is no longer than the advice: keep it.
                Some(lim) if lim <= el + margin => out.push(SbatchLine {
                    flag: "--time",
                    value: time_limit_flag(lim),
                    reason: format!(
                        "ran {} within its {} limit: keep it",
                        duration(el),
                        duration(lim)
                    ),
                }),
                _ => out.push(SbatchLine {
                    flag: "--time",
                    value: time_flag(el + margin),
                    reason: format!("ran {} + {} margin", duration(el), duration(margin)),
                }),
            }
        }
    }
}

/// `--gres`: as many cards as were used (mean utilization of 5 % or more), at least one.
fn gres_line(f: &Facts, out: &mut Vec<SbatchLine>) {
    let used_gpus = f
        .gpus
        .iter()
        .filter(|g| g.mean_utilization_percent.is_some_and(|u| u >= 5.0))
        .count();
    if !f.gpus.is_empty() && used_gpus < f.gpus.len() {
        out.push(SbatchLine {
            flag: "--gres",
            value: format!("gpu:{}", used_gpus.max(1)),
            reason: format!("{used_gpus} of {} cards were used", f.gpus.len()),
        });
    }
}
