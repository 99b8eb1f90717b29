//! Findings and `#SBATCH` advice from one job's measurements. Pure functions, no I/O.
//!
//! A finding is a fact with its evidence, never a grade: each has a stable `code`, the
//! figures it rests on (`facts`) and one sentence. Thresholds are the anchors' own defaults
//! (slurmpast, jobstats, seff; docs/design.md §8), one named constant each, handed to the rules
//! as a [`Thresholds`] value that a site file may change (docs/reference/site.md). Low use that is right
//! (a short job, a single-core job, a small working set under a small request) is not flagged.

pub mod admin_comment;
pub mod efficiency;
pub mod joblog;
pub mod ledger;
pub mod merge;
pub mod phases;
pub mod progress;
mod sbatch_lines;
pub mod step_figures;
pub mod thresholds;
pub mod throughput;
// The epilog's summary and its parts are the recorder's (the plugin links them alone).
pub use slurmwatch_recorder::analysis::{gpu_ledger, stalls, summary};

use serde::Serialize;
use serde_json::{json, Map, Value};

pub use gpu_ledger::{card_ledger, CardLedger};
pub use sbatch_lines::sbatch;
pub use summary::{GpuSummary, OomEvent, Summary};
pub use thresholds::Thresholds;

/// `walltime_slack`: a completed job that used less than this share of its time limit.
pub const WALLTIME_SLACK_PERCENT: f64 = 50.0;
/// `walltime_margin`: a completed job that ended within this many seconds of its limit (and
/// used at least [`WALLTIME_SLACK_PERCENT`] of it).
pub const WALLTIME_MARGIN_SECONDS: f64 = 300.0;
/// `walltime_slack` is not said for limits this short: little to gain from backfill.
pub const WALLTIME_SLACK_MIN_LIMIT_SECONDS: f64 = 1800.0;
/// `memory_overrequested`: working-set peak below this share of the limit…
pub const MEMORY_UNDERUSED_PERCENT: f64 = 35.0;
/// …and at least this much never used.
pub const MEMORY_UNDERUSED_MIN_UNUSED_BYTES: u64 = 32 << 30;
/// `memory_cache_inflated`: the kernel's lifetime peak exceeds the working-set peak by this
/// factor and by at least [`CACHE_INFLATED_MIN_BYTES`].
pub const CACHE_INFLATED_FACTOR: f64 = 1.5;
pub const CACHE_INFLATED_MIN_BYTES: u64 = 256 << 20;
/// `heavy_paging`: major page faults.
pub const MAJOR_FAULTS_HEAVY: u64 = 1000;
/// `cpu_underused`: effective cores below this share of the allocation…
pub const CPU_UNDERUSED_PERCENT: f64 = 15.0;
/// …on a run at least this long…
pub const CPU_UNDERUSED_MIN_RUN_SECONDS: f64 = 120.0;
/// …with more than this many cores.
pub const CPU_UNDERUSED_MIN_CORES: f64 = 1.0;
/// `serial_on_many_cores`: peak cores in use at most this on ≥ 2 allocated cores.
pub const SERIAL_PEAK_CORES: f64 = 1.1;
/// `system_time_high`: system time at least this share of CPU time…
pub const SYSTEM_TIME_PERCENT: f64 = 30.0;
/// …with at least this much CPU time.
pub const SYSTEM_TIME_MIN_CPU_SECONDS: f64 = 60.0;
/// `idle_allocation` / `timeout_hung`: a stretch this long…
pub const IDLE_MIN_SECONDS: f64 = 300.0;
/// …with less CPU than this (scaled down for a shorter recorded stretch).
pub const IDLE_MAX_CPU_SECONDS: f64 = 10.0;
/// `--mem` advice: working-set peak plus this headroom.
pub const MEM_HEADROOM_PERCENT: f64 = 20.0;
/// `--mem` after an OOM kill: at least the old limit times this (the real need is unknown).
pub const OOM_MEM_FACTOR: f64 = 1.5;
/// A throttled card is a finding from this many minutes, or from this fraction of the run.
pub const GPU_THROTTLED_MIN_MINUTES: f64 = 1.0;
pub const GPU_THROTTLED_MIN_FRACTION: f64 = 0.25;
/// `gpu_idle`: a card idle for at least this many minutes.
pub const GPU_IDLE_MIN_MINUTES: f64 = 1.0;
/// `--time` advice: elapsed plus this margin…
pub const TIME_MARGIN_PERCENT: f64 = 25.0;
/// …and never less than this many seconds of margin.
pub const TIME_MIN_MARGIN_SECONDS: f64 = 600.0;
/// `--time` after a TIMEOUT that was still computing: the old limit times this.
pub const TIMEOUT_TIME_FACTOR: f64 = 2.0;

/// Exit code of a shell that could not find the command.
pub const EXIT_COMMAND_NOT_FOUND: i32 = 127;

/// Every code a report's `findings[]` can carry, in docs/reference/findings.md's order (a test
/// holds the two together): a site file's `[notes.CODE]` must name one of these.
pub const CODES: &[&str] = &[
    "oom_killed",
    "timeout_hung",
    "timeout_computing",
    "timeout",
    "cancelled_by_other",
    "cancelled",
    "node_fail",
    "boot_fail",
    "preempted",
    "deadline",
    "command_not_found",
    "failed_exit_code",
    "killed_by_signal",
    "sacct_record_open",
    "walltime_slack",
    "walltime_margin",
    "memory_overrequested",
    "memory_cache_inflated",
    "maxrss_above_limit",
    "heavy_paging",
    "serial_on_many_cores",
    "cpu_underused",
    "idle_allocation",
    "system_time_high",
    "gpu_throttled",
    "gpu_idle",
    "gpu_xid",
    "gpu_card_history",
    "node_not_recorded",
    "straggler_node",
    "memory_imbalance",
    "throughput_slowdown",
    "throughput_fell_while_busy",
    "cuda_oom",
    "nccl_error",
    "module_not_found",
    "traceback",
];

/// Everything the findings look at; each figure `None` when unknown.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub recorded: bool,
    /// sacct's state name (`COMPLETED`, `OUT_OF_MEMORY`, ...).
    pub state: Option<String>,
    pub exit_code: Option<i32>,
    pub exit_signal: Option<i32>,
    pub owner_uid: Option<u32>,
    pub cancelled_by_uid: Option<u32>,
    pub elapsed_seconds: Option<f64>,
    pub timelimit_seconds: Option<f64>,
    pub cores_allocated: Option<f64>,
    pub cpu_seconds: Option<f64>,
    pub cpu_system_seconds: Option<f64>,
    pub peak_effective_cores: Option<f64>,
    /// The memory limit the job ran under on a node (cgroup limit, else allocation per node).
    pub memory_limit_bytes: Option<u64>,
    pub peak_working_set_bytes: Option<u64>,
    pub peak_working_set_t_unix_ms: Option<i64>,
    pub lifetime_peak_bytes: Option<u64>,
    /// sacct's largest step MaxRSS.
    pub max_rss_bytes: Option<u64>,
    pub oom_kills: Option<u64>,
    pub oom_events: Vec<OomEvent>,
    pub major_faults: Option<u64>,
    /// (seconds, CPU seconds) over the last recorded stretch (up to [`IDLE_MIN_SECONDS`]).
    pub last_stretch: Option<(f64, f64)>,
    /// sacct still says RUNNING with no end, but the recording has ended.
    pub sacct_record_open: bool,
    pub gpus: Vec<GpuSummary>,
    /// A multi-node job: its busiest node (`--cpus-per-task` is per task, on one node).
    pub busiest_node: Option<NodeCores>,
}

/// One node's cores: the most busy at once, the allocation there, and the most tasks a step
/// ran there.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeCores {
    pub node: String,
    pub peak_effective_cores: f64,
    pub cores_allocated: Option<f64>,
    pub tasks: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub code: &'static str,
    pub facts: Map<String, Value>,
    pub sentence: String,
    /// The site's note for this code (the CLI's site file); absent without one, so a site
    /// without notes gets today's JSON unchanged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site_note: Option<SiteNote>,
}

/// A site's sentence and link for one finding code, said under the finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteNote {
    pub text: Option<String>,
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SbatchLine {
    /// `--mem`, `--cpus-per-task`, `--time`, `--gres`.
    pub flag: &'static str,
    pub value: String,
    pub reason: String,
}

impl SbatchLine {
    pub fn line(&self) -> String {
        format!("#SBATCH {}={}", self.flag, self.value)
    }
}

fn facts(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn finite(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 1000.0).round() / 1000.0)
    } else {
        Value::Null
    }
}

fn is(state: &Option<String>, s: &str) -> bool {
    state.as_deref() == Some(s)
}

/// One rule per finding (or per family of findings that share their test), in the order
/// the report lists them: outcome first, then time, memory, CPU, GPUs.
type Rule = fn(&Facts, &Thresholds, &mut Vec<Finding>);

const RULES: &[Rule] = &[
    oom_killed,
    timeout_hung,
    cancelled_by_other,
    ended_by_slurm,
    failed_exit_code,
    killed_by_signal,
    sacct_record_open,
    walltime_slack,
    memory_overrequested,
    memory_cache_inflated,
    maxrss_above_limit,
    heavy_paging,
    cpu_use,
    system_time_high,
    gpu_cards,
];

/// The facts worth saying about this job, outcome first, under the site's thresholds.
pub fn findings(f: &Facts, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in RULES {
        rule(f, t, &mut out);
    }
    out
}

fn push(out: &mut Vec<Finding>, code: &'static str, facts_v: Value, sentence: String) {
    out.push(Finding {
        code,
        facts: facts(facts_v),
        sentence,
        site_note: None,
    })
}

fn oom_killed(f: &Facts, _: &Thresholds, out: &mut Vec<Finding>) {
    use crate::units::{bytes, clock, duration};
    let oom_state = is(&f.state, "OUT_OF_MEMORY");
    if oom_state || f.oom_kills.unwrap_or(0) > 0 {
        let e = f.oom_events.first();
        let limit = e.and_then(|e| e.limit_bytes).or(f.memory_limit_bytes);
        let mut s = match e {
            Some(e) => format!("OOM-killed at {}", clock(e.t_unix_ms)),
            None => "OOM-killed (the recording has no time for the kill)".to_string(),
        };
        let at = e.and_then(|e| e.working_set_at_kill_bytes);
        let usage_peak = e.and_then(|e| e.usage_peak_bytes);
        match (at, limit) {
            // The sampled working set reached the limit: say so.
            (Some(at), Some(l)) if at as f64 >= l as f64 * 0.9 => {
                s += &format!("; working set {} against a {} limit", bytes(at), bytes(l))
            }
            // The climb was faster than the 1-s reads: the kernel's peak is the witness.
            (_, Some(l)) if usage_peak.is_some_and(|p| p as f64 >= l as f64 * 0.98) => {
                s += &format!(
                    "; memory reached its {} limit (kernel peak {}) between two readings",
                    bytes(l),
                    bytes(usage_peak.unwrap_or(0))
                )
            }
            (Some(at), Some(l)) => {
                s += &format!("; working set {} against a {} limit", bytes(at), bytes(l))
            }
            (Some(at), None) => s += &format!("; working set {}", bytes(at)),
            _ => {}
        }
        if let (Some(b), Some(st)) = (
            e.and_then(|e| e.working_set_before_bytes),
            e.and_then(|e| e.steady_seconds),
        ) {
            s += &format!("; it had been steady at {} for {}", bytes(b), duration(st));
        }
        if let Some(rss) = f.max_rss_bytes {
            s += &format!(
                " (sacct's MaxRSS {} is a floor: the sampler missed the last climb)",
                bytes(rss)
            );
        }
        s.push('.');
        push(
            out,
            "oom_killed",
            json!({
                "kills": f.oom_kills.unwrap_or(1).max(1),
                "t_unix_ms": e.map(|e| e.t_unix_ms),
                "working_set_before_bytes": e.and_then(|e| e.working_set_before_bytes),
                "working_set_at_kill_bytes": e.and_then(|e| e.working_set_at_kill_bytes),
                "usage_peak_bytes": e.and_then(|e| e.usage_peak_bytes),
                "steady_seconds": e.and_then(|e| e.steady_seconds).map(finite),
                "limit_bytes": limit,
                "sacct_max_rss_bytes": f.max_rss_bytes,
            }),
            s,
        );
    }
}

fn timeout_hung(f: &Facts, t: &Thresholds, out: &mut Vec<Finding>) {
    use crate::units::duration;
    if is(&f.state, "TIMEOUT") {
        let limit = f.timelimit_seconds;
        match f.last_stretch {
            Some((secs, cpu)) if secs > 0.0 && cpu < t.idle_max_cpu_seconds * secs.min(t.idle_min_seconds) / t.idle_min_seconds => push(out,
                "timeout_hung",
                json!({"limit_seconds": limit, "last_seconds": finite(secs), "last_cpu_seconds": finite(cpu)}),
                format!(
                    "Stopped at its time limit{} while doing almost nothing: {:.1} CPU-s in its last {} — it looks hung or waiting; more time would not help.",
                    limit.map(|l| format!(" ({})", duration(l))).unwrap_or_default(),
                    cpu,
                    duration(secs)
                ),
            ),
            Some((secs, cpu)) => push(out,
                "timeout_computing",
                json!({"limit_seconds": limit, "last_seconds": finite(secs), "last_cpu_seconds": finite(cpu)}),
                format!(
                    "Stopped at its time limit{} while still computing ({:.0} CPU-s in its last {}).",
                    limit.map(|l| format!(" ({})", duration(l))).unwrap_or_default(),
                    cpu,
                    duration(secs)
                ),
            ),
            None => push(out,
                "timeout",
                json!({"limit_seconds": limit}),
                format!(
                    "Stopped at its time limit{}.",
                    limit.map(|l| format!(" ({})", duration(l))).unwrap_or_default()
                ),
            ),
        }
    }
}

fn cancelled_by_other(f: &Facts, _: &Thresholds, out: &mut Vec<Finding>) {
    if is(&f.state, "CANCELLED") {
        match (f.cancelled_by_uid, f.owner_uid) {
            (Some(by), Some(owner)) if by != owner => push(
                out,
                "cancelled_by_other",
                json!({"cancelled_by_uid": by, "owner_uid": owner}),
                format!(
                    "Cancelled by uid {by}, not by its owner (uid {owner}){}.",
                    if by == 0 {
                        " — an administrator or Slurm itself"
                    } else {
                        ""
                    }
                ),
            ),
            (by, _) => push(
                out,
                "cancelled",
                json!({"cancelled_by_uid": by}),
                "Cancelled by its owner.".to_string(),
            ),
        }
    }
}

/// `node_fail`, `boot_fail`, `preempted`, `deadline`: Slurm ended the job.
fn ended_by_slurm(f: &Facts, _: &Thresholds, out: &mut Vec<Finding>) {
    for (state, code, what) in [
        ("NODE_FAIL", "node_fail", "Ended because its node failed."),
        (
            "BOOT_FAIL",
            "boot_fail",
            "Never ran: its node failed to boot.",
        ),
        (
            "PREEMPTED",
            "preempted",
            "Preempted by a higher-priority job.",
        ),
        ("DEADLINE", "deadline", "Ended at its deadline."),
    ] {
        if is(&f.state, state) {
            push(out, code, json!({"state": state}), what.to_string());
        }
    }
}

/// `command_not_found` (exit 127), else `failed_exit_code`.
fn failed_exit_code(f: &Facts, _: &Thresholds, out: &mut Vec<Finding>) {
    if f.exit_code == Some(EXIT_COMMAND_NOT_FOUND) {
        push(out,
            "command_not_found",
            json!({"exit_code": EXIT_COMMAND_NOT_FOUND}),
            "Exit code 127: the shell could not find a command (a typo, a module not loaded, or a missing PATH entry).".into(),
        );
    } else if is(&f.state, "FAILED") {
        if let Some(c) = f.exit_code.filter(|&c| c != 0) {
            push(
                out,
                "failed_exit_code",
                json!({"exit_code": c}),
                format!("The job script exited with code {c}."),
            );
        }
    }
}

fn killed_by_signal(f: &Facts, _: &Thresholds, out: &mut Vec<Finding>) {
    let oom_state = is(&f.state, "OUT_OF_MEMORY");
    if let Some(sig) = f.exit_signal.filter(|&s| s != 0) {
        let explained = oom_state
            || f.state.as_deref().is_some_and(|s| {
                matches!(
                    s,
                    "CANCELLED" | "TIMEOUT" | "PREEMPTED" | "NODE_FAIL" | "DEADLINE"
                )
            });
        if !explained {
            push(
                out,
                "killed_by_signal",
                json!({"signal": sig}),
                format!("Killed by signal {sig}, outside a cancel, timeout or OOM kill."),
            );
        }
    }
}

fn sacct_record_open(f: &Facts, _: &Thresholds, out: &mut Vec<Finding>) {
    if f.sacct_record_open {
        push(out,
            "sacct_record_open",
            json!({"state": f.state}),
            "sacct still lists the job as running with no end time, but its recording has ended: the accounting record is stale (a lost end record), so sacct's elapsed time keeps growing.".into(),
        );
    }
}

fn walltime_slack(f: &Facts, t: &Thresholds, out: &mut Vec<Finding>) {
    use crate::units::duration;
    let completed = is(&f.state, "COMPLETED");
    if let (true, Some(el), Some(lim)) = (completed, f.elapsed_seconds, f.timelimit_seconds) {
        if lim > t.walltime_slack_min_limit_seconds && el * 100.0 / lim < t.walltime_slack_percent {
            push(out,
                "walltime_slack",
                json!({"elapsed_seconds": finite(el), "limit_seconds": finite(lim), "percent_used": finite(el * 100.0 / lim)}),
                format!(
                    "Used {} of its {} time limit ({:.0} %); a shorter limit can start sooner (backfill).",
                    duration(el), duration(lim), el * 100.0 / lim
                ),
            );
        } else if lim - el < t.walltime_margin_seconds
            && el * 100.0 / lim >= t.walltime_slack_percent
        {
            // Within 5 min of a short limit is not "near it" when most of the limit was
            // left (a 5-s job under a 5-min limit was said to be at its margin).
            push(
                out,
                "walltime_margin",
                json!({"elapsed_seconds": finite(el), "limit_seconds": finite(lim)}),
                format!(
                    "Finished {} before its time limit: a slower node or input would have hit it.",
                    duration((lim - el).max(0.0))
                ),
            );
        }
    }
}

// Memory.
fn memory_overrequested(f: &Facts, t: &Thresholds, out: &mut Vec<Finding>) {
    use crate::units::bytes;
    if let (Some(ws), Some(limit)) = (f.peak_working_set_bytes, f.memory_limit_bytes) {
        let unused = limit.saturating_sub(ws);
        if limit > 0
            && (ws as f64) * 100.0 / (limit as f64) < t.memory_underused_percent
            && unused >= t.memory_underused_min_unused_bytes
        {
            let mut s = format!(
                "Asked for {}, working set peaked at {}",
                bytes(limit),
                bytes(ws)
            );
            if let Some(l) = f.lifetime_peak_bytes.filter(|&l| l > ws) {
                s += &format!(" (page cache raised the kernel's figure to {})", bytes(l));
            }
            s.push('.');
            push(
                out,
                "memory_overrequested",
                json!({"limit_bytes": limit, "peak_working_set_bytes": ws, "lifetime_peak_bytes": f.lifetime_peak_bytes}),
                s,
            );
        }
    }
}

fn memory_cache_inflated(f: &Facts, t: &Thresholds, out: &mut Vec<Finding>) {
    use crate::units::bytes;
    if let (Some(ws), Some(l)) = (f.peak_working_set_bytes, f.lifetime_peak_bytes) {
        if l as f64 >= ws as f64 * t.cache_inflated_factor && l - ws >= t.cache_inflated_min_bytes {
            push(out,
                "memory_cache_inflated",
                json!({"peak_working_set_bytes": ws, "lifetime_peak_bytes": l}),
                format!(
                    "The kernel's peak of {} includes page cache; the working set — what --mem must cover — peaked at {}.",
                    bytes(l),
                    bytes(ws)
                ),
            );
        }
    }
}

fn maxrss_above_limit(f: &Facts, _: &Thresholds, out: &mut Vec<Finding>) {
    use crate::units::bytes;
    let oom_state = is(&f.state, "OUT_OF_MEMORY");
    if let (Some(rss), Some(limit)) = (f.max_rss_bytes, f.memory_limit_bytes) {
        if rss > limit && f.oom_kills.unwrap_or(0) == 0 && !oom_state {
            push(out,
                "maxrss_above_limit",
                json!({"sacct_max_rss_bytes": rss, "limit_bytes": limit}),
                format!(
                    "sacct's MaxRSS ({}) is above the {} limit without an OOM kill: a sampling artefact (shared pages counted per task).",
                    bytes(rss),
                    bytes(limit)
                ),
            );
        }
    }
}

fn heavy_paging(f: &Facts, t: &Thresholds, out: &mut Vec<Finding>) {
    if let Some(mf) = f.major_faults.filter(|&m| m >= t.major_faults_heavy) {
        push(out,
            "heavy_paging",
            json!({"major_faults": mf}),
            format!("{mf} major page faults: the job read pages back from disk (memory pressure or mmapped files)."),
        );
    }
}

// CPU.
/// `idle_allocation`, `serial_on_many_cores`, `cpu_underused`.
fn cpu_use(f: &Facts, t: &Thresholds, out: &mut Vec<Finding>) {
    use crate::units::duration;
    if let (Some(cores), Some(el), Some(cpu)) =
        (f.cores_allocated, f.elapsed_seconds, f.cpu_seconds)
    {
        let avg = if el > 0.0 { cpu / el } else { 0.0 };
        let peak = f.peak_effective_cores;
        if cores > t.cpu_underused_min_cores && el >= t.cpu_underused_min_run_seconds {
            if peak.is_some_and(|p| p <= t.serial_peak_cores) && cores >= 2.0 {
                push(out,
                    "serial_on_many_cores",
                    json!({"cores_allocated": finite(cores), "peak_effective_cores": peak.map(finite), "average_effective_cores": finite(avg)}),
                    format!(
                        "Never used more than {:.2} cores of the {cores:.0} allocated: serial code (efficiency about 1/{cores:.0}).",
                        peak.unwrap_or(0.0)
                    ),
                );
            } else if avg * 100.0 / cores < t.cpu_underused_percent {
                push(
                    out,
                    "cpu_underused",
                    json!({"cores_allocated": finite(cores), "average_effective_cores": finite(avg), "peak_effective_cores": peak.map(finite)}),
                    format!(
                        "Used {avg:.2} cores on average of the {cores:.0} allocated ({:.0} %){}.",
                        avg * 100.0 / cores,
                        peak.map(|p| format!(", {p:.2} at most"))
                            .unwrap_or_default()
                    ),
                );
            }
        }
        if el > t.idle_min_seconds && cpu < t.idle_max_cpu_seconds && !is(&f.state, "TIMEOUT") {
            push(
                out,
                "idle_allocation",
                json!({"elapsed_seconds": finite(el), "cpu_seconds": finite(cpu)}),
                format!(
                    "Held its allocation for {} using {cpu:.1} CPU-s in all.",
                    duration(el)
                ),
            );
        }
    }
}

fn system_time_high(f: &Facts, t: &Thresholds, out: &mut Vec<Finding>) {
    if let (Some(sys), Some(cpu)) = (f.cpu_system_seconds, f.cpu_seconds) {
        if cpu >= t.system_time_min_cpu_seconds && sys * 100.0 / cpu >= t.system_time_percent {
            push(out,
                "system_time_high",
                json!({"system_seconds": finite(sys), "cpu_seconds": finite(cpu)}),
                format!(
                    "{:.0} % of its CPU time was spent in the kernel (I/O, many small files, or memory allocation).",
                    sys * 100.0 / cpu
                ),
            );
        }
    }
}

/// Per card: `gpu_throttled`, `gpu_idle`, `gpu_xid`.
fn gpu_cards(f: &Facts, t: &Thresholds, out: &mut Vec<Finding>) {
    use crate::units::clock;
    let run_minutes = f.elapsed_seconds.map(|s| s / 60.0);
    for g in &f.gpus {
        // A multi-node job's cards are named with their node: `sw2 cuda:0`.
        let card = match &g.node {
            Some(n) => format!("{n} {}", g.label),
            None => g.label.clone(),
        };
        let notable = |m: f64| {
            m >= t.gpu_throttled_min_minutes
                || run_minutes
                    .is_some_and(|r| r > 0.0 && m >= r * t.gpu_throttled_min_run_percent / 100.0)
        };
        if let Some(m) = g.minutes_throttled.filter(|&m| m > 0.0 && notable(m)) {
            push(
                out,
                "gpu_throttled",
                json!({"card": g.label, "node": g.node, "minutes": finite(m), "reasons": g.throttle_reasons}),
                format!(
                    "{} was held back for {} ({}).",
                    card,
                    if m >= 1.0 {
                        format!("{m:.0} min")
                    } else {
                        format!("{:.0} s", m * 60.0)
                    },
                    if g.throttle_reasons.is_empty() {
                        "reason not reported".into()
                    } else {
                        g.throttle_reasons.join(", ")
                    }
                ),
            );
        }
        if let Some(m) = g.minutes_idle.filter(|&m| m >= t.gpu_idle_min_minutes) {
            push(
                out,
                "gpu_idle",
                json!({"card": g.label, "node": g.node, "minutes": finite(m), "peak_memory_used_bytes": g.peak_memory_used_bytes}),
                format!("{card} was idle for {m:.0} min."),
            );
        }
        if let Some(last) = g.xid_events.last() {
            let hardware = g
                .xid_events
                .iter()
                .any(|e| crate::collect::gpu::xid::is_hardware(e.xid));
            let codes: Vec<u64> = g.xid_events.iter().map(|e| e.xid).collect();
            push(out,
                "gpu_xid",
                json!({"card": g.label, "node": g.node, "xids": codes, "uuid": g.uuid,
                       "last_unix_ms": last.t_unix_ms, "hardware": hardware}),
                format!(
                    "{card} reported Xid {} at {}{}{}",
                    last.xid,
                    clock(last.t_unix_ms),
                    last.meaning
                        .as_deref()
                        .map_or(String::new(), |m| format!(": {m}")),
                    match (codes.len(), hardware) {
                        (1, true) => ". That is the card, not the job: tell your admins (its UUID is in the facts).".to_string(),
                        (1, false) => ".".to_string(),
                        (n, true) => format!(" ({n} events). Some are card faults, not the job's: tell your admins (its UUID is in the facts)."),
                        (n, false) => format!(" ({n} events)."),
                    }
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn codes(f: &Facts) -> Vec<&'static str> {
        let out: Vec<_> = findings(f, &Thresholds::default())
            .iter()
            .map(|x| x.code)
            .collect();
        for c in &out {
            assert!(CODES.contains(c), "{c} is missing from CODES");
        }
        out
    }

    /// CODES and the reference's table name the same codes, in the same order.
    #[test]
    fn codes_match_the_reference() {
        let doc = include_str!("../../../docs/reference/findings.md");
        let mut in_doc = Vec::new();
        for line in doc.lines().filter(|l| l.starts_with("| `")) {
            let first = line.split('|').nth(1).unwrap_or("");
            in_doc.extend(first.split('`').skip(1).step_by(2));
        }
        assert_eq!(in_doc, CODES);
    }

    #[test]
    fn right_sized_job_is_not_flagged() {
        let f = Facts {
            recorded: true,
            state: Some("COMPLETED".into()),
            exit_code: Some(0),
            exit_signal: Some(0),
            elapsed_seconds: Some(3000.0),
            timelimit_seconds: Some(3600.0),
            cores_allocated: Some(1.0),
            cpu_seconds: Some(2900.0),
            peak_effective_cores: Some(1.0),
            memory_limit_bytes: Some(4 * GIB),
            peak_working_set_bytes: Some(GIB / 2), // low but under a small request: fine
            lifetime_peak_bytes: Some(GIB / 2),
            ..Facts::default()
        };
        assert!(
            codes(&f).is_empty(),
            "{:?}",
            findings(&f, &Thresholds::default())
        );
    }

    #[test]
    fn overrequested_memory_and_cache() {
        let f = Facts {
            recorded: true,
            state: Some("COMPLETED".into()),
            memory_limit_bytes: Some(48 * GIB),
            peak_working_set_bytes: Some(10 * GIB),
            lifetime_peak_bytes: Some(17 * GIB),
            ..Facts::default()
        };
        let fs = findings(&f, &Thresholds::default());
        let m = fs
            .iter()
            .find(|x| x.code == "memory_overrequested")
            .unwrap();
        assert_eq!(m.sentence, "Asked for 48.0 GiB, working set peaked at 10.0 GiB (page cache raised the kernel's figure to 17.0 GiB).");
        assert!(codes(&f).contains(&"memory_cache_inflated"));
        let s = sbatch(&f, &Thresholds::default());
        assert_eq!(s[0].flag, "--mem");
        assert_eq!(s[0].value, "12G"); // 10 GiB × 1.2, not the 17 GiB lifetime peak
    }

    #[test]
    fn timeout_never_shrinks_time() {
        let mut f = Facts {
            recorded: true,
            state: Some("TIMEOUT".into()),
            elapsed_seconds: Some(3605.0),
            timelimit_seconds: Some(3600.0),
            last_stretch: Some((300.0, 290.0)),
            ..Facts::default()
        };
        let t = sbatch(&f, &Thresholds::default())
            .into_iter()
            .find(|s| s.flag == "--time")
            .unwrap();
        assert_eq!(t.value, "02:00:00");
        assert_eq!(codes(&f), vec!["timeout_computing"]);
        f.last_stretch = Some((300.0, 0.5));
        let t = sbatch(&f, &Thresholds::default())
            .into_iter()
            .find(|s| s.flag == "--time")
            .unwrap();
        assert_eq!(t.value, "01:00:00"); // the same limit: never below it
        assert_eq!(codes(&f), vec!["timeout_hung"]);
    }

    #[test]
    fn kept_limit_is_the_limit() {
        // A completed run within its limit: the advice keeps the limit, so the line must
        // print that limit, not the 5-minute rounding of it.
        let mut f = Facts {
            recorded: true,
            state: Some("COMPLETED".into()),
            elapsed_seconds: Some(53.0),
            timelimit_seconds: Some(60.0),
            ..Facts::default()
        };
        let time = |f: &Facts| {
            sbatch(f, &Thresholds::default())
                .into_iter()
                .find(|s| s.flag == "--time")
                .unwrap()
        };
        let t = time(&f);
        assert_eq!(t.reason, "ran 53 s within its 1 min 00 s limit: keep it");
        assert_eq!(t.value, "00:01:00");
        // Stopped at its limit while idle: "keep the limit" is the limit too.
        f.state = Some("TIMEOUT".into());
        f.elapsed_seconds = Some(62.0);
        f.last_stretch = Some((60.0, 0.1));
        let t = time(&f);
        assert!(t
            .reason
            .starts_with("stopped at its 1 min 00 s limit while idle"));
        assert_eq!(t.value, "00:01:00");
        // A limit of days and minutes keeps its exact form.
        f.timelimit_seconds = Some(90_000.0 + 420.0);
        f.elapsed_seconds = Some(90_420.0);
        assert_eq!(time(&f).value, "1-01:07:00");
    }

    #[test]
    fn cpu_thresholds() {
        let base = Facts {
            recorded: true,
            state: Some("COMPLETED".into()),
            elapsed_seconds: Some(600.0),
            cores_allocated: Some(8.0),
            ..Facts::default()
        };
        let serial = Facts {
            cpu_seconds: Some(590.0),
            peak_effective_cores: Some(1.0),
            ..base.clone()
        };
        assert_eq!(codes(&serial), vec!["serial_on_many_cores"]);
        let under = Facts {
            cpu_seconds: Some(600.0),
            peak_effective_cores: Some(4.0),
            ..base.clone()
        };
        assert_eq!(codes(&under), vec!["cpu_underused"]);
        let short = Facts {
            elapsed_seconds: Some(60.0),
            cpu_seconds: Some(5.0),
            peak_effective_cores: Some(1.0),
            ..base
        };
        assert!(codes(&short).is_empty());
    }

    #[test]
    fn cancelled_and_exit_127() {
        let f = Facts {
            state: Some("CANCELLED".into()),
            cancelled_by_uid: Some(0),
            owner_uid: Some(1001),
            exit_signal: Some(15),
            ..Facts::default()
        };
        assert_eq!(codes(&f), vec!["cancelled_by_other"]);
        let f = Facts {
            state: Some("FAILED".into()),
            exit_code: Some(127),
            ..Facts::default()
        };
        assert_eq!(codes(&f), vec!["command_not_found"]);
    }

    /// Near the limit means near it: a 5-s job under a 5-min limit is not at its margin (seen
    /// in the demo), a 280-s one is.
    #[test]
    fn walltime_margin_only_near_the_limit() {
        let at = |el: f64| Facts {
            state: Some("COMPLETED".into()),
            elapsed_seconds: Some(el),
            timelimit_seconds: Some(300.0),
            ..Facts::default()
        };
        assert!(!codes(&at(5.0)).contains(&"walltime_margin"));
        assert!(codes(&at(280.0)).contains(&"walltime_margin"));
    }

    #[test]
    fn findings_json_is_strict() {
        let f = Facts {
            state: Some("TIMEOUT".into()),
            last_stretch: Some((f64::NAN, 0.0)),
            ..Facts::default()
        };
        for x in findings(&f, &Thresholds::default()) {
            let s = serde_json::to_string(&x).unwrap();
            assert!(!s.contains("NaN"), "{s}");
        }
    }

    /// One case per code of [`RULES`]: facts that say it, and the nearest facts that do not
    /// (a threshold just missed, or the neighbouring code's state).
    #[test]
    fn each_code_is_said_and_not_said() {
        let st = |s: &str| Some(s.to_string());
        let done = |el: f64, lim: f64| Facts {
            state: st("COMPLETED"),
            elapsed_seconds: Some(el),
            timelimit_seconds: Some(lim),
            ..Facts::default()
        };
        let mem = |ws: u64, limit: u64, lifetime: Option<u64>| Facts {
            peak_working_set_bytes: Some(ws),
            memory_limit_bytes: Some(limit),
            lifetime_peak_bytes: lifetime,
            ..Facts::default()
        };
        let cpu = |cores: f64, cpu: f64, peak: f64| Facts {
            state: st("COMPLETED"),
            elapsed_seconds: Some(600.0),
            cores_allocated: Some(cores),
            cpu_seconds: Some(cpu),
            peak_effective_cores: Some(peak),
            ..Facts::default()
        };
        let timeout = |stretch: Option<(f64, f64)>| Facts {
            state: st("TIMEOUT"),
            timelimit_seconds: Some(3600.0),
            last_stretch: stretch,
            ..Facts::default()
        };
        let cancelled = |by: u32| Facts {
            state: st("CANCELLED"),
            cancelled_by_uid: Some(by),
            owner_uid: Some(1001),
            ..Facts::default()
        };
        let failed = |code: i32, signal: i32| Facts {
            state: st("FAILED"),
            exit_code: Some(code),
            exit_signal: Some(signal),
            ..Facts::default()
        };
        let state = |s: &str| Facts {
            state: st(s),
            ..Facts::default()
        };
        let card = |throttled: f64, idle: f64, xids: Vec<summary::XidEvent>| Facts {
            elapsed_seconds: Some(3600.0),
            gpus: vec![GpuSummary {
                label: "cuda:0".into(),
                minutes_throttled: Some(throttled),
                minutes_idle: Some(idle),
                xid_events: xids,
                ..GpuSummary::default()
            }],
            ..Facts::default()
        };
        let sys = |system: f64| Facts {
            cpu_seconds: Some(100.0),
            cpu_system_seconds: Some(system),
            ..Facts::default()
        };
        let cases: Vec<(&str, Facts, Facts)> = vec![
            (
                "oom_killed",
                state("OUT_OF_MEMORY"),
                Facts {
                    oom_kills: Some(0),
                    ..state("COMPLETED")
                },
            ),
            (
                "timeout_hung",
                timeout(Some((300.0, 0.5))),
                timeout(Some((300.0, 290.0))),
            ),
            (
                "timeout_computing",
                timeout(Some((300.0, 290.0))),
                timeout(Some((300.0, 0.5))),
            ),
            ("timeout", timeout(None), timeout(Some((300.0, 290.0)))),
            ("cancelled_by_other", cancelled(0), cancelled(1001)),
            ("cancelled", cancelled(1001), cancelled(0)),
            ("node_fail", state("NODE_FAIL"), state("FAILED")),
            ("boot_fail", state("BOOT_FAIL"), state("NODE_FAIL")),
            ("preempted", state("PREEMPTED"), state("CANCELLED")),
            ("deadline", state("DEADLINE"), state("TIMEOUT")),
            ("command_not_found", failed(127, 0), failed(1, 0)),
            ("failed_exit_code", failed(1, 0), failed(127, 0)),
            (
                "killed_by_signal",
                failed(0, 9),
                Facts {
                    exit_signal: Some(15),
                    ..cancelled(1001)
                },
            ),
            (
                "sacct_record_open",
                Facts {
                    sacct_record_open: true,
                    ..state("RUNNING")
                },
                state("RUNNING"),
            ),
            ("walltime_slack", done(600.0, 3600.0), done(600.0, 1800.0)),
            (
                "walltime_margin",
                done(3500.0, 3600.0),
                done(3200.0, 3600.0),
            ),
            (
                "memory_overrequested",
                mem(10 * GIB, 48 * GIB, None),
                mem(10 * GIB, 40 * GIB, None),
            ),
            (
                "memory_cache_inflated",
                mem(10 * GIB, 48 * GIB, Some(15 * GIB)),
                mem(10 * GIB, 48 * GIB, Some(14 * GIB)),
            ),
            (
                "maxrss_above_limit",
                Facts {
                    max_rss_bytes: Some(5 * GIB),
                    ..mem(GIB, 4 * GIB, None)
                },
                Facts {
                    max_rss_bytes: Some(5 * GIB),
                    oom_kills: Some(1),
                    ..mem(GIB, 4 * GIB, None)
                },
            ),
            (
                "heavy_paging",
                Facts {
                    major_faults: Some(1000),
                    ..Facts::default()
                },
                Facts {
                    major_faults: Some(999),
                    ..Facts::default()
                },
            ),
            (
                "serial_on_many_cores",
                cpu(8.0, 590.0, 1.0),
                cpu(8.0, 590.0, 1.2),
            ),
            ("cpu_underused", cpu(8.0, 600.0, 4.0), cpu(8.0, 800.0, 4.0)),
            ("idle_allocation", cpu(1.0, 5.0, 0.1), cpu(1.0, 15.0, 0.1)),
            ("system_time_high", sys(30.0), sys(29.0)),
            (
                "gpu_throttled",
                card(2.0, 0.0, vec![]),
                card(0.5, 0.0, vec![]),
            ),
            ("gpu_idle", card(0.0, 1.0, vec![]), card(0.0, 0.9, vec![])),
            (
                "gpu_xid",
                card(0.0, 0.0, vec![summary::XidEvent::new(1, 79)]),
                card(0.0, 0.0, vec![]),
            ),
        ];
        let mut covered: Vec<&str> = Vec::new();
        for (code, yes, no) in &cases {
            assert!(
                codes(yes).contains(code),
                "{code} not said: {:?}",
                codes(yes)
            );
            assert!(!codes(no).contains(code), "{code} said: {:?}", codes(no));
            covered.push(code);
        }
        // Every code the rules can say has its case (the log's, the nodes' and the card
        // history's codes are said elsewhere and tested there).
        let elsewhere = [
            "gpu_card_history",
            "node_not_recorded",
            "straggler_node",
            "memory_imbalance",
            "throughput_slowdown",
            "throughput_fell_while_busy",
            "cuda_oom",
            "nccl_error",
            "module_not_found",
            "traceback",
        ];
        let mut want: Vec<&str> = CODES
            .iter()
            .copied()
            .filter(|c| !elsewhere.contains(c))
            .collect();
        want.sort();
        covered.sort();
        assert_eq!(covered, want);
    }

    /// A site's threshold moves the line: the near miss above is said once the threshold
    /// is lowered past it.
    #[test]
    fn thresholds_move_the_line() {
        let f = Facts {
            major_faults: Some(999),
            ..Facts::default()
        };
        let t = Thresholds {
            major_faults_heavy: 999,
            ..Thresholds::default()
        };
        assert!(findings(&f, &Thresholds::default()).is_empty());
        assert_eq!(findings(&f, &t)[0].code, "heavy_paging");
        let slack = Facts {
            state: Some("COMPLETED".into()),
            elapsed_seconds: Some(600.0),
            timelimit_seconds: Some(1800.0),
            ..Facts::default()
        };
        let t = Thresholds {
            walltime_slack_min_limit_seconds: 900.0,
            ..Thresholds::default()
        };
        assert!(!findings(&slack, &Thresholds::default())
            .iter()
            .any(|x| x.code == "walltime_slack"));
        assert!(findings(&slack, &t)
            .iter()
            .any(|x| x.code == "walltime_slack"));
    }
}
