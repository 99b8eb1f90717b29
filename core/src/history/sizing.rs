//! `#SBATCH` sizing from a workload's runs: `--time`, `--mem`, `--cpus-per-task`, `--gres`.
//!
//! Rules that keep it honest (issue 7): a TIMEOUT never sizes walltime down (its elapsed is
//! the limit, not the need); a hung run (near-zero CPU until the limit) is not evidence for
//! more time — it is blocked, not slow; an OOM kill outranks any sampled peak; fewer than
//! [`MIN_RUNS`] usable runs is "not enough evidence"; memory comes from the recorded
//! working-set peak where a file exists, else from sacct: the sum over a step's tasks
//! (`TRESUsageInTot`) where it has several, `MaxRSS` (one task's) otherwise — a sampled floor.
//! Margins reuse the per-job constants of `analysis`.

use serde::Serialize;

use super::stats::percentile;
use super::{Brief, MemoryBasis, Outcome};
use crate::analysis::{
    CPU_UNDERUSED_PERCENT, MEMORY_UNDERUSED_PERCENT, MEM_HEADROOM_PERCENT, OOM_MEM_FACTOR,
    TIMEOUT_TIME_FACTOR, TIME_MARGIN_PERCENT, TIME_MIN_MARGIN_SECONDS, WALLTIME_MARGIN_SECONDS,
    WALLTIME_SLACK_MIN_LIMIT_SECONDS, WALLTIME_SLACK_PERCENT,
};
use crate::units::{bytes, duration, mem_flag, mem_flag_bytes, time_flag, time_flag_seconds};

/// Fewer usable runs than this: "not enough evidence".
pub const MIN_RUNS: usize = 3;
/// The share of runs the time advice must cover.
pub const TIME_PERCENTILE: f64 = 95.0;
/// `--mem` is called too large only when the peak is under
/// [`MEMORY_UNDERUSED_PERCENT`] of it *and* at least this much is never used. Lower than the
/// per-job 32 GiB: here the peak is the largest of several runs, not one run's.
pub const MEM_LOWER_MIN_UNUSED_BYTES: u64 = 2 << 30;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Raise,
    Lower,
    Ok,
    Unknown,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Raise => "raise",
            Verdict::Lower => "lower",
            Verdict::Ok => "about right",
            Verdict::Unknown => "not enough evidence",
        }
    }
}

/// One flag's advice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Advice {
    /// `--time`, `--mem`, `--cpus-per-task`, `--gres`.
    pub flag: &'static str,
    pub verdict: Verdict,
    /// What the latest run asked for, as a flag value.
    pub current: Option<String>,
    pub suggestion: Option<String>,
    /// `#SBATCH --time=01:10:00`, when there is a suggestion.
    pub sbatch: Option<String>,
    /// Which evidence: `elapsed of completed runs`, `recorded working-set peak`, `sacct MaxRSS`…
    pub basis: String,
    /// The figures, in one sentence.
    pub evidence: String,
    pub usable_runs: usize,
    /// The numbers behind the advice, where the evidence sufficed (not in JSON: `evidence`
    /// and `suggestion` say the same in words).
    #[serde(skip)]
    pub figures: Option<Figures>,
}

/// An advice's numbers, in the flag's unit: seconds (`--time`), bytes per node (`--mem`),
/// CPUs per node (`--cpus-per-task`), GPUs (`--gres`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figures {
    /// The most the usable runs used: longest completed run, largest memory peak, most
    /// cores busy, most cards used.
    pub used: f64,
    /// The smallest request the evidence supports (margins and rounding included, never
    /// below `used`), whatever the latest run asked.
    pub need: u64,
}

fn advice(
    flag: &'static str,
    verdict: Verdict,
    current: Option<String>,
    suggestion: Option<String>,
    basis: impl Into<String>,
    evidence: String,
    usable_runs: usize,
) -> Advice {
    Advice {
        sbatch: suggestion.as_ref().map(|s| format!("#SBATCH {flag}={s}")),
        flag,
        verdict,
        current,
        suggestion,
        basis: basis.into(),
        evidence,
        usable_runs,
        figures: None,
    }
}

fn with_figures(a: Advice, used: f64, need: u64) -> Advice {
    Advice {
        figures: Some(Figures { used, need }),
        ..a
    }
}

/// The advice for one workload's runs (oldest first).
pub fn advise(runs: &[&Brief]) -> Vec<Advice> {
    let mut out = vec![time(runs), memory(runs), cpus(runs)];
    if let Some(g) = gpus(runs) {
        out.push(g);
    }
    out
}

/// The request as typed (`400M`, `4G`): the current value is never rounded.
fn exact_mem(b: u64) -> String {
    const MIB: u64 = 1 << 20;
    if b.is_multiple_of(1 << 30) && b > 0 {
        format!("{}G", b >> 30)
    } else {
        format!("{}M", b.div_ceil(MIB))
    }
}

/// `D-HH:MM:SS` / `HH:MM:SS`, unrounded.
fn exact_time(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    let (d, h, m, x) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{x:02}")
    } else {
        format!("{h:02}:{m:02}:{x:02}")
    }
}

fn latest<T>(runs: &[&Brief], f: impl Fn(&Brief) -> Option<T>) -> Option<T> {
    runs.iter().rev().find_map(|r| f(r))
}

fn time(runs: &[&Brief]) -> Advice {
    let current = latest(runs, |r| r.timelimit_seconds());
    let cur_s = current.map(exact_time);
    let done: Vec<f64> = runs
        .iter()
        .filter(|r| r.outcome == Outcome::Completed)
        .filter_map(|r| r.elapsed_seconds())
        .collect();
    let computing: Vec<&&Brief> = runs
        .iter()
        .filter(|r| r.outcome == Outcome::Timeout && !r.hung())
        .collect();
    let hung: Vec<&&Brief> = runs.iter().filter(|r| r.hung()).collect();
    let usable = done.len() + computing.len();
    let basis = "elapsed of completed runs; TIMEOUTs as a floor";
    let evidence_s = time_evidence(&done, computing.len(), &hung);
    if usable < MIN_RUNS {
        // A hung workload still gets its diagnosis, and never a shorter limit.
        let basis = if hung.is_empty() {
            basis.to_string()
        } else {
            "blocked, not slow: hung runs are not evidence for more time".to_string()
        };
        return advice(
            "--time",
            Verdict::Unknown,
            cur_s.clone(),
            None,
            basis,
            format!("{evidence_s} (fewer than {MIN_RUNS} usable runs)"),
            usable,
        );
    }
    let any_timeout = !computing.is_empty() || !hung.is_empty();
    let mut need = 0.0f64;
    // Too tight: p95 plus the proportional margin passes the limit, or the longest run came
    // within WALLTIME_MARGIN_SECONDS of it. (The 10-min floor on the margin sizes a raise;
    // it alone never calls a short job's limit too tight.)
    let mut tight = false;
    if !done.is_empty() {
        let p = percentile(&done, TIME_PERCENTILE).unwrap_or(0.0);
        let longest = done.iter().copied().fold(0.0, f64::max);
        let margin = (p * TIME_MARGIN_PERCENT / 100.0).max(TIME_MIN_MARGIN_SECONDS);
        need = (p + margin).max(longest);
        if let Some(c) = current {
            tight = p * (1.0 + TIME_MARGIN_PERCENT / 100.0) > c
                || c - longest < WALLTIME_MARGIN_SECONDS;
        }
    }
    if !computing.is_empty() {
        // Their need is unknown and above the limit they had: never below limit × factor.
        let lim = computing
            .iter()
            .filter_map(|r| r.timelimit_seconds().or(r.elapsed_seconds()))
            .fold(0.0, f64::max);
        need = need.max(lim * TIMEOUT_TIME_FACTOR);
    }
    if any_timeout {
        // A TIMEOUT never sizes walltime down.
        need = need.max(current.unwrap_or(0.0));
    }
    let sugg = time_flag(need);
    let verdict = time_verdict(current, need, tight || !computing.is_empty(), any_timeout);
    let suggestion = match verdict {
        Verdict::Ok => cur_s.clone().or(Some(sugg)),
        _ => Some(sugg),
    };
    let basis = if hung.is_empty() {
        basis.to_string()
    } else {
        format!("{basis}; blocked, not slow: hung runs are not evidence for more time")
    };
    let longest = done.iter().copied().fold(0.0, f64::max);
    with_figures(
        advice(
            "--time", verdict, cur_s, suggestion, basis, evidence_s, usable,
        ),
        longest,
        time_flag_seconds(need),
    )
}

/// The time evidence line: completed runs' p95 and longest elapsed, runs that hit the limit
/// still computing (`computing`), and hung ones with their median CPU seconds.
fn time_evidence(done_s: &[f64], computing: usize, hung: &[&&Brief]) -> String {
    let mut evidence = Vec::new();
    if !done_s.is_empty() {
        let p = percentile(done_s, TIME_PERCENTILE).unwrap_or(0.0);
        let longest = done_s.iter().copied().fold(0.0, f64::max);
        evidence.push(format!(
            "{} completed runs: p95 {}, longest {}",
            done_s.len(),
            duration(p),
            duration(longest)
        ));
    }
    if computing > 0 {
        evidence.push(format!("{computing} hit the limit still computing"));
    }
    if !hung.is_empty() {
        let cpu: Vec<f64> = hung.iter().filter_map(|r| r.cpu_seconds()).collect();
        evidence.push(format!(
            "{} hung until the limit (median {:.2} CPU-s): blocked, not slow — more time would not help",
            hung.len(),
            super::stats::median(&cpu).unwrap_or(0.0)
        ));
    }
    if evidence.is_empty() {
        "no run completed or hit the limit computing".to_string()
    } else {
        evidence.join("; ")
    }
}

/// Raise when the need passes the limit and the runs show it (`short`: a limit too tight for
/// the completed runs, or a run that hit it computing); lower only a long limit with no
/// TIMEOUT, when the need is well under it; all in seconds.
fn time_verdict(current_s: Option<f64>, need_s: f64, short: bool, any_timeout: bool) -> Verdict {
    match current_s {
        None => Verdict::Ok,
        Some(c) if need_s > c && short => Verdict::Raise,
        Some(c)
            if !any_timeout
                && c > WALLTIME_SLACK_MIN_LIMIT_SECONDS
                && need_s < c * WALLTIME_SLACK_PERCENT / 100.0 =>
        {
            Verdict::Lower
        }
        Some(_) => Verdict::Ok,
    }
}

fn memory(runs: &[&Brief]) -> Advice {
    let current = latest(runs, |r| r.mem_request_bytes());
    let whole = runs.last().is_some_and(|r| r.mem_whole_node);
    let cur_s = if whole {
        Some("0".to_string())
    } else {
        current.map(exact_mem)
    };
    let ooms: Vec<&&Brief> = runs.iter().filter(|r| r.oom()).collect();
    // Peaks of runs that were not killed for memory (a killed run's peak is the limit).
    let peaks: Vec<(u64, MemoryBasis)> = runs
        .iter()
        .filter(|r| !r.oom() && r.outcome != Outcome::Cancelled)
        .filter_map(|r| r.memory_peak())
        .collect();
    let basis = memory_basis(&peaks);
    let usable = peaks.len() + ooms.len();
    let peak = peaks.iter().map(|(p, _)| *p).max();
    let oom_max = ooms.iter().filter_map(|r| r.mem_request_bytes()).max();
    let evidence = memory_evidence(peak, peaks.len(), ooms.len(), oom_max);
    // No advice, with the reason in the evidence line.
    let unknown = |cur_s, basis, evidence| {
        advice(
            "--mem",
            Verdict::Unknown,
            cur_s,
            None,
            basis,
            evidence,
            usable,
        )
    };
    if usable < MIN_RUNS {
        return unknown(
            cur_s,
            basis,
            format!("{evidence} (fewer than {MIN_RUNS} usable runs)"),
        );
    }
    let mut need = peak
        .map(|p| (p as f64 * (1.0 + MEM_HEADROOM_PERCENT / 100.0)) as u64)
        .unwrap_or(0);
    let mut basis = basis;
    if let Some(om) = oom_max {
        need = need.max(oom_floor_bytes(runs, om));
        basis = format!("OOM kills first, then {basis}");
    }
    if need == 0 {
        return unknown(cur_s, basis, evidence);
    }
    let sugg = mem_flag(need);
    let verdict = memory_verdict(current, need, whole, peak, oom_max);
    let suggestion = match verdict {
        Verdict::Ok => cur_s.clone().or(Some(sugg)),
        _ => Some(sugg),
    };
    with_figures(
        advice("--mem", verdict, cur_s, suggestion, basis, evidence, usable),
        peak.or(oom_max).unwrap_or(0) as f64,
        mem_flag_bytes(need),
    )
}

/// How the memory peaks were measured: the recorded working set where a file exists, else
/// sacct's MaxRSS, a sampled floor (named by how sacct was read for the largest of them).
fn memory_basis(peaks: &[(u64, MemoryBasis)]) -> String {
    let recorded = peaks
        .iter()
        .filter(|(_, b)| *b == MemoryBasis::WorkingSet)
        .count();
    // The sacct figure of the run with the largest sacct peak names how sacct was read
    // ("sum of 4 tasks' peaks" vs "largest task").
    let sacct_basis = peaks
        .iter()
        .filter_map(|(p, b)| match b {
            MemoryBasis::Sacct(s) => Some((*p, *s)),
            MemoryBasis::WorkingSet => None,
        })
        .max_by_key(|(p, _)| *p)
        .map(|(_, s)| s.describe());
    match (recorded, peaks.len(), sacct_basis) {
        (0, _, Some(sb)) => format!("{sb}; sampled by jobacct_gather every JobAcctGatherFrequency, so a floor that misses short spikes"),
        (0, _, None) => "sacct MaxRSS: sampled by jobacct_gather every JobAcctGatherFrequency, so a floor that misses short spikes (jobacct_gather/cgroup counts page cache, jobacct_gather/linux sums per-task RSS)".to_string(),
        (r, n, _) if r == n => format!("recorded working-set peak ({r} recorded runs)"),
        (r, n, sb) => format!(
            "recorded working-set peak ({r} of {n} runs; for the rest {}, a sampled floor)",
            sb.unwrap_or_else(|| "sacct MaxRSS".into())
        ),
    }
}

/// The memory evidence line: the largest peak (bytes) over `runs` runs, and the OOM kills
/// with the largest limit one was killed at.
fn memory_evidence(peak: Option<u64>, runs: usize, ooms: usize, oom_max: Option<u64>) -> String {
    let mut ev = Vec::new();
    if let Some(p) = peak {
        ev.push(format!("largest peak {} over {} runs", bytes(p), runs));
    }
    if ooms > 0 {
        ev.push(format!(
            "{} OOM kills{}",
            ooms,
            oom_max
                .map(|m| format!(", at up to {}", bytes(m)))
                .unwrap_or_default()
        ));
    }
    if ev.is_empty() {
        "no memory figure in any run".to_string()
    } else {
        ev.join("; ")
    }
}

/// The least memory (bytes) a workload killed for memory at up to `oom_max_bytes` needs: an
/// OOM kill outranks a sampled peak, so the smallest limit that later sufficed, else the
/// largest that failed × the OOM factor.
fn oom_floor_bytes(runs: &[&Brief], oom_max_bytes: u64) -> u64 {
    let sufficed = runs
        .iter()
        .filter(|r| r.outcome == Outcome::Completed && !r.oom())
        .filter_map(|r| r.mem_request_bytes())
        .filter(|&m| m > oom_max_bytes)
        .min();
    sufficed.unwrap_or((oom_max_bytes as f64 * OOM_MEM_FACTOR) as u64)
}

/// Raise when the need passes the request (never for a whole-node `--mem=0`); lower only
/// with no OOM kill and a peak well under the request; all in bytes.
fn memory_verdict(
    current: Option<u64>,
    need: u64,
    whole: bool,
    peak: Option<u64>,
    oom_max: Option<u64>,
) -> Verdict {
    match current {
        None => Verdict::Ok,
        Some(c) if need > c && !whole => Verdict::Raise,
        Some(c)
            if oom_max.is_none()
                && peak.is_some_and(|p| {
                    (p as f64) < c as f64 * MEMORY_UNDERUSED_PERCENT / 100.0
                        && c.saturating_sub(p) >= MEM_LOWER_MIN_UNUSED_BYTES
                }) =>
        {
            Verdict::Lower
        }
        Some(_) => Verdict::Ok,
    }
}

fn cpus(runs: &[&Brief]) -> Advice {
    let current = latest(runs, |r| r.cpus_per_node());
    let cur_s = current.map(|c| c.to_string());
    // Recorded peak cores where a file exists, else sacct's average (TotalCPU / elapsed):
    // the average is a floor on the peak, so it can lower a request but never raise one.
    let mut recorded = 0;
    let figures: Vec<f64> = runs
        .iter()
        .filter(|r| r.outcome == Outcome::Completed && !r.hung())
        .filter_map(|r| {
            if let Some(p) = r.recorded.as_ref().and_then(|x| x.peak_effective_cores) {
                recorded += 1;
                return Some(p);
            }
            let el = r.elapsed_seconds().filter(|&e| e > 0.0)?;
            Some(r.cpu_seconds()? / el / r.nodes.max(1) as f64)
        })
        .collect();
    let usable = figures.len();
    let basis = match recorded {
        0 => "average cores in use (sacct TotalCPU / elapsed): a floor on the peak".to_string(),
        r if r == usable => format!("recorded peak cores in use ({r} recorded runs)"),
        r => format!("recorded peak cores ({r} of {usable} runs; sacct's average for the rest)"),
    };
    let most = figures.iter().copied().fold(0.0, f64::max);
    let evidence = format!(
        "at most {most:.2} cores busy over {usable} completed runs{}",
        cur_s
            .as_ref()
            .map(|c| format!(" of {c} allocated"))
            .unwrap_or_default()
    );
    if usable < MIN_RUNS {
        return advice(
            "--cpus-per-task",
            Verdict::Unknown,
            cur_s,
            None,
            basis,
            format!("{evidence} (fewer than {MIN_RUNS} usable runs)"),
            usable,
        );
    }
    let need = ((most - 0.05).ceil().max(1.0)) as u64;
    let verdict = match current {
        None => Verdict::Ok,
        Some(c) if recorded == usable && need > c => Verdict::Raise,
        Some(c)
            if c > 1
                && need < c
                && (recorded == usable || most * 100.0 / (c as f64) < CPU_UNDERUSED_PERCENT) =>
        {
            Verdict::Lower
        }
        Some(_) => Verdict::Ok,
    };
    let suggestion = match verdict {
        Verdict::Ok => cur_s.clone(),
        _ => Some(need.to_string()),
    };
    with_figures(
        advice(
            "--cpus-per-task",
            verdict,
            cur_s,
            suggestion,
            basis,
            evidence,
            usable,
        ),
        most,
        need,
    )
}

fn gpus(runs: &[&Brief]) -> Option<Advice> {
    let current = latest(runs, |r| (r.gpus > 0).then_some(r.gpus))?;
    let cur_s = Some(format!("gpu:{current}"));
    let with_cards: Vec<&Brief> = runs
        .iter()
        .copied()
        .filter(|r| r.outcome == Outcome::Completed)
        .filter(|r| r.recorded.as_ref().is_some_and(|x| x.gpus_seen > 0))
        .collect();
    let basis = "recorded GPU utilization (a card is used at a mean ≥ 5 %)";
    if with_cards.len() < MIN_RUNS {
        return Some(advice(
            "--gres",
            Verdict::Unknown,
            cur_s,
            None,
            basis,
            format!(
                "{} runs with a GPU recording (sacct does not measure GPU use: record with --slurmwatch)",
                with_cards.len()
            ),
            with_cards.len(),
        ));
    }
    let used = with_cards
        .iter()
        .filter_map(|r| r.recorded.as_ref().map(|x| x.gpus_used))
        .max()
        .unwrap_or(0)
        .max(1) as u64;
    let verdict = if used < current {
        Verdict::Lower
    } else {
        Verdict::Ok
    };
    Some(with_figures(
        advice(
            "--gres",
            verdict,
            cur_s,
            Some(format!("gpu:{}", used.min(current))),
            basis,
            format!(
                "at most {used} of {current} cards used over {} recorded runs",
                with_cards.len()
            ),
            with_cards.len(),
        ),
        used as f64,
        used,
    ))
}
