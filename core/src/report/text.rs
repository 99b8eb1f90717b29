//! The terminal report: sections in a fixed order, `n/a` for unknown, sparklines. Every
//! value a user chose (the job's name, paths, node and user names) goes through
//! [`terminal::field`], and the whole text through [`terminal::text`]: the report is read on
//! terminals and mailed (contrib/slurmwatch-mail.sh).

use std::fmt::Write;

use super::Report;
use crate::render::terminal::{self, field};
use crate::units::{bytes, clock, duration};

const SPARK_WIDTH: usize = 60;

/// Eight-level sparkline of `values` (bucket maxima), scaled to `max`; unknown is a space.
pub fn sparkline(values: &[Option<f64>], max: f64) -> String {
    if values.is_empty() || max <= 0.0 || !max.is_finite() {
        return String::new();
    }
    let n = SPARK_WIDTH.min(values.len());
    (0..n)
        .map(|i| {
            let a = i * values.len() / n;
            let b = ((i + 1) * values.len() / n).max(a + 1);
            let v = values[a..b]
                .iter()
                .flatten()
                .copied()
                .filter(|v| v.is_finite())
                .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
            crate::render::spark::mark(v, max, &crate::render::spark::BARS)
        })
        .collect()
}

fn na<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "n/a".into())
}

/// The whole report as text, section by section, safe to print. `colour`: nothing is graded
/// by colour here (facts only).
pub fn render(r: &Report, _colour: bool) -> String {
    render_with(r, true)
}

/// The report's text without its opening ledger section (the HTML report shows that first,
/// above the charts: [`ledger_text`]).
pub fn render_without_ledger(r: &Report) -> String {
    render_with(r, false)
}

/// The ledger section alone, safe to print; empty without a recording.
pub fn ledger_text(r: &Report) -> String {
    let mut o = String::new();
    super::text_ledger::section(&mut o, r);
    timeline(&mut o, r);
    terminal::text(o.trim_start_matches('\n')).into_owned()
}

fn render_with(r: &Report, ledger: bool) -> String {
    let mut o = String::new();
    header(&mut o, r);
    if ledger {
        super::text_ledger::section(&mut o, r);
        timeline(&mut o, r);
    }
    outcome_section(&mut o, r);
    time_section(&mut o, r);
    cpu_section(&mut o, r);
    memory_section(&mut o, r);
    if r.nodes.len() > 1 {
        nodes_section(&mut o, r);
    }
    efficiency_section(&mut o, r);
    gpus_section(&mut o, r);
    steps_section(&mut o, r);
    findings_section(&mut o, r);
    log_section(&mut o, r);
    next_time_section(&mut o, r);
    footer(&mut o, r);
    terminal::text(&o).into_owned()
}

/// Beside the ledger: the phases the job marked and how fast its own work went.
fn timeline(o: &mut String, r: &Report) {
    super::text_phases::section(o, r);
    super::text_throughput::section(o, r);
}

/// The job, its user and nodes, and where the figures come from.
fn header(o: &mut String, r: &Report) {
    let name = r.job.name.as_deref().unwrap_or("");
    let _ = writeln!(
        o,
        "Job {}{}  user {}  node(s) {}",
        r.job_id,
        if name.is_empty() {
            String::new()
        } else {
            format!(" ({})", field(name))
        },
        field(r.job.user.as_deref().unwrap_or("n/a")),
        field(r.job.node_list.as_deref().unwrap_or("n/a"))
    );
    let _ = writeln!(
        o,
        "Source: {}",
        match (&r.file, r.source) {
            (Some(_), _) if r.nodes.len() > 1 => format!(
                "recordings of {} of {} nodes (files under NODES)",
                r.nodes.iter().filter(|n| n.recorded).count(),
                r.nodes.len()
            ),
            (Some(f), _) => format!(
                "recording {}{}",
                field(f),
                if r.summary_stored == Some(true) {
                    " (epilog summary)"
                } else {
                    ""
                }
            ),
            (None, "slurmdbd_summary") => format!(
                "the job's summary in slurmdbd (AdminComment{}; no file, so no charts)",
                if r.nodes.len() > 1 {
                    format!(
                        ", {} of {} nodes recorded",
                        r.nodes.iter().filter(|n| n.recorded).count(),
                        r.nodes.len()
                    )
                } else {
                    String::new()
                }
            ),
            (None, _) => "sacct only (no recording)".into(),
        }
    );
}

/// OUTCOME: the state, exit code and signal, and who cancelled.
fn outcome_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nOUTCOME");
    let state = r.state.as_deref().unwrap_or("n/a (sacct not available)");
    let _ = writeln!(
        o,
        "  {state}, exit code {}, signal {}",
        na(r.exit_code, |c| c.to_string()),
        na(r.exit_signal, |c| c.to_string())
    );
    if let Some(uid) = r.job.cancelled_by_uid {
        let _ = writeln!(o, "  cancelled by uid {uid}");
    }
}

/// TIME: elapsed against the limit, the timestamps and queue wait, the TRES asked and given.
fn time_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nTIME");
    let _ = writeln!(
        o,
        "  elapsed {} of a {} limit{}",
        na(r.elapsed_seconds, duration),
        na(r.job.timelimit_seconds, |s| duration(s as f64)),
        match (r.elapsed_seconds, r.job.timelimit_seconds) {
            (Some(e), Some(l)) if l > 0 => format!(" ({:.0} %)", e * 100.0 / l as f64),
            _ => String::new(),
        }
    );
    let _ = writeln!(
        o,
        "  submitted {}, started {}, ended {}; queue wait {}",
        na(r.job.submit_unix, |t| clock(t * 1000)),
        na(r.job.start_unix, |t| clock(t * 1000)),
        na(r.job.end_unix, |t| clock(t * 1000)),
        na(r.job.queue_wait_seconds, |s| duration(s as f64))
    );
    if let (Some(req), Some(alloc)) = (&r.tres.requested, &r.tres.allocated) {
        let tres = |t: &crate::slurm::sacct::Tres| {
            format!(
                "cpu={} mem={} nodes={} gpus={}",
                na(t.cpus, |v| v.to_string()),
                na(t.memory_bytes, bytes),
                na(t.nodes, |v| v.to_string()),
                na(t.gpus, |v| v.to_string())
            )
        };
        let _ = writeln!(o, "  requested {}", tres(req));
        let _ = writeln!(o, "  allocated {}", tres(alloc));
        if r.tres.req_mem_whole_node {
            let _ = writeln!(o, "  (--mem=0: all of each node's memory)");
        }
    }
}

/// CPU: seconds, cores allocated, average and peak, and a sparkline of cores in use.
fn cpu_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nCPU");
    let _ = writeln!(
        o,
        "  {} CPU-s (user {}, system {}); {} cores allocated; average {} cores, peak {}{}",
        na(r.cpu.usage_seconds_total, |v| format!("{v:.1}")),
        na(r.cpu.user_seconds, |v| format!("{v:.1}")),
        na(r.cpu.system_seconds, |v| format!("{v:.1}")),
        na(r.cpu.cores_allocated, |v| format!("{v:.0}")),
        na(r.cpu.average_effective_cores, |v| format!("{v:.2}")),
        na(r.cpu.peak_effective_cores, |v| format!("{v:.2}")),
        r.cpu
            .peak_effective_cores_at_unix_ms
            .map(|t| format!(" at {}", clock(t)))
            .unwrap_or_default()
    );
    if !r.points.is_empty() {
        let cores: Vec<Option<f64>> = r.points.iter().map(|p| p.cores).collect();
        let max = r
            .cpu
            .cores_allocated
            .or(r.cpu.peak_effective_cores)
            .unwrap_or(1.0);
        let _ = writeln!(
            o,
            "  cores  {}  (full height = {max:.0})",
            sparkline(&cores, max)
        );
    }
}

/// MEMORY: peaks, limit, OOM kills (each with its levels), and a working-set sparkline.
fn memory_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nMEMORY");
    let _ = writeln!(
        o,
        "  working set peak {}{}{}; lifetime peak incl. page cache {}; limit {}",
        na(r.memory.peak_working_set_bytes, bytes),
        r.memory
            .peak_working_set_at_unix_ms
            .map(|t| format!(" at {}", clock(t)))
            .unwrap_or_default(),
        match (&r.memory.peak_working_set_node, r.nodes.len() > 1) {
            (Some(n), true) => format!(" on {}", field(n)),
            _ => String::new(),
        },
        na(r.memory.lifetime_peak_bytes, bytes),
        na(r.memory.limit_bytes, bytes)
    );
    let _ = writeln!(
        o,
        "  OOM kills {}; sacct MaxRSS {}{}",
        na(r.memory.oom_kills, |v| v.to_string()),
        na(r.memory.sacct_max_rss_bytes, bytes),
        match (
            r.memory.sacct_memory_per_node_bytes,
            &r.memory.sacct_memory_basis
        ) {
            (Some(b), Some(basis)) if Some(b) != r.memory.sacct_max_rss_bytes => {
                format!("; sacct per node {} ({basis})", bytes(b))
            }
            _ => String::new(),
        }
    );
    for e in &r.memory.oom_events {
        let _ = writeln!(
            o,
            "  OOM kill at {}: working set {} before, {} at the kill (largest reading), kernel peak {}",
            clock(e.t_unix_ms),
            na(e.working_set_before_bytes, bytes),
            na(e.working_set_at_kill_bytes, bytes),
            na(e.usage_peak_bytes, bytes)
        );
    }
    if !r.points.is_empty() {
        let ws: Vec<Option<f64>> = r
            .points
            .iter()
            .map(|p| p.working_set_bytes.map(|v| v as f64))
            .collect();
        let max = r
            .memory
            .limit_bytes
            .or(r.memory.peak_working_set_bytes)
            .unwrap_or(1) as f64;
        let _ = writeln!(
            o,
            "  ws     {}  (full height = {})",
            sparkline(&ws, max),
            bytes(max as u64)
        );
    }
}

/// GPUS: each card's figures and Xid events, or why there are none.
fn gpus_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nGPUS");
    if r.gpus.is_empty() {
        let _ = writeln!(
            o,
            "  {}",
            match r.tres.gpus_allocated {
                Some(n) if n > 0 => format!("{n} allocated; no GPU readings recorded"),
                _ => "none".into(),
            }
        );
    }
    for g in &r.gpus {
        let _ = writeln!(
            o,
            "  {}{}  util {} %, memory peak {}, power peak {}, throttled {} min, idle {} min",
            g.node
                .as_deref()
                .map_or(String::new(), |n| format!("{} ", field(n))),
            field(&g.label),
            na(g.mean_utilization_percent, |v| format!("{v:.0}")),
            na(g.peak_memory_used_bytes, bytes),
            na(g.peak_power_watts, |v| format!("{v:.0} W")),
            na(g.minutes_throttled, |v| format!("{v:.0}")),
            na(g.minutes_idle, |v| format!("{v:.0}"))
        );
        for e in &g.xid_events {
            let _ = writeln!(
                o,
                "    Xid {} at {}{}",
                e.xid,
                clock(e.t_unix_ms),
                e.meaning
                    .as_deref()
                    .map_or(String::new(), |m| format!(": {m}"))
            );
        }
    }
}

/// STEPS: one line per step, sacct's and the recording's.
fn steps_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nSTEPS");
    if r.steps.is_empty() {
        let _ = writeln!(o, "  none known");
    }
    for s in &r.steps {
        let _ = writeln!(
            o,
            "  {:<8} {:<14} exit {}:{}  elapsed {:>10}  CPU {:>8}  MaxRSS {:>10}{}",
            s.step,
            s.state.as_deref().unwrap_or("n/a"),
            na(s.exit_code, |v| v.to_string()),
            na(s.exit_signal, |v| v.to_string()),
            na(s.elapsed_seconds, |v| duration(v as f64)),
            na(s.total_cpu_seconds, |v| format!("{v:.1} s")),
            na(s.max_rss_bytes, bytes),
            if s.recorded { "  (recorded)" } else { "" }
        );
    }
}

/// FINDINGS: the job's own (the log's are said under FROM THE JOB'S LOG).
fn findings_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nFINDINGS");
    // The log's findings are said in their own section below.
    let from_log = |code: &str| r.log.as_ref().is_some_and(|l| l.codes.contains(&code));
    let own: Vec<_> = r.findings.iter().filter(|f| !from_log(f.code)).collect();
    if own.is_empty() {
        let _ = writeln!(o, "  nothing to point out");
    }
    for f in own {
        finding(o, f);
    }
}

/// FROM THE JOB'S LOG: the files read and what they explain (with `--log`).
fn log_section(o: &mut String, r: &Report) {
    if let Some(log) = &r.log {
        let _ = writeln!(o, "\nFROM THE JOB'S LOG");
        for f in &log.files {
            let what = match (&f.error, f.bytes_read) {
                (Some(e), _) => format!("not read: {e}"),
                (None, Some(n)) if f.truncated => {
                    format!("last {} of {} read", bytes(n), na(f.size_bytes, bytes))
                }
                (None, Some(n)) => format!("{} read", bytes(n)),
                (None, None) => String::new(),
            };
            let via = match f.found_by {
                "scontrol" => "as scontrol says",
                "submit_line" => "from sbatch's command line",
                "slurm_default" => "Slurm's default name",
                _ => "given with --log",
            };
            let _ = writeln!(o, "  {} {} ({via}; {what})", f.stream, field(&f.path));
        }
        if log.files.iter().any(|f| f.error.is_none()) && log.codes.is_empty() {
            let _ = writeln!(
                o,
                "  nothing that explains a failure (CUDA OOM, NCCL, missing modules or commands, tracebacks)"
            );
        }
        for code in &log.codes {
            if let Some(f) = r.findings.iter().find(|f| f.code == *code) {
                finding(o, f);
            }
        }
        for l in &r.log_excerpt {
            let _ = writeln!(o, "    | {l}");
        }
        if let Some(n) = &log.note {
            let _ = writeln!(o, "  {n}");
        }
    }
}

/// NEXT TIME: the `#SBATCH` lines sized from what was measured.
fn next_time_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nNEXT TIME");
    if r.sbatch.is_empty() {
        let _ = writeln!(o, "  no measurements to size from");
    }
    for s in &r.sbatch {
        let _ = writeln!(o, "  {:<32} # {}", s.line(), s.reason);
    }
}

/// slurmwatch's own cost, the notes, and sacct's error when it could not answer.
fn footer(o: &mut String, r: &Report) {
    if r.sampler.cpu_seconds.is_some() || r.sampler.bytes_written.is_some() {
        let _ = writeln!(
            o,
            "\nslurmwatch's own cost (charged to the job): {} CPU-s, {} written",
            na(r.sampler.cpu_seconds, |v| format!("{v:.2}")),
            na(r.sampler.bytes_written, bytes)
        );
    }
    for n in &r.notes {
        let _ = writeln!(o, "\nNote: {n}");
    }
    if let Some(e) = &r.sacct_error {
        let _ = writeln!(o, "\nNote: without sacct — {e}");
    }
}

/// A multi-node job: each node's own figures side by side, and one sparkline per node.
fn nodes_section(o: &mut String, r: &Report) {
    let _ = writeln!(o, "\nNODES ({} in the allocation)", r.nodes.len());
    let _ = writeln!(
        o,
        "  {:<12} {:>10} {:>9} {:>9} {:>12} {:>10}  file",
        "node", "CPU-s", "avg cores", "peak", "ws peak", "OOM kills"
    );
    for n in &r.nodes {
        if !n.recorded {
            let _ = writeln!(o, "  {:<12} recorded nothing", field(&n.node));
            continue;
        }
        let _ = writeln!(
            o,
            "  {:<12} {:>10} {:>9} {:>9} {:>12} {:>10}  {}",
            field(&n.node),
            na(n.cpu_seconds, |v| format!("{v:.1}")),
            na(n.average_effective_cores, |v| format!("{v:.2}")),
            na(n.peak_effective_cores, |v| format!("{v:.2}")),
            na(n.peak_working_set_bytes, bytes),
            na(n.oom_kills, |v| v.to_string()),
            field(n.file.as_deref().unwrap_or(""))
        );
    }
    let cores_max = r
        .nodes
        .iter()
        .filter_map(|n| n.cores_allocated.or(n.peak_effective_cores))
        .fold(1.0, f64::max);
    let ws_max = r
        .nodes
        .iter()
        .filter_map(|n| n.memory_limit_bytes.or(n.peak_working_set_bytes))
        .max()
        .unwrap_or(1) as f64;
    for (node, pts) in &r.node_points {
        let cores: Vec<Option<f64>> = pts.iter().map(|p| p.cores).collect();
        let ws: Vec<Option<f64>> = pts
            .iter()
            .map(|p| p.working_set_bytes.map(|v| v as f64))
            .collect();
        let _ = writeln!(
            o,
            "  {:<12} cores {}",
            field(node),
            sparkline(&cores, cores_max)
        );
        let _ = writeln!(o, "  {:<12} ws    {}", "", sparkline(&ws, ws_max));
    }
}

/// EFFICIENCY: each figure with its basis, or `n/a` with the reason.
fn efficiency_section(o: &mut String, r: &Report) {
    let e = &r.efficiency;
    let _ = writeln!(o, "\nEFFICIENCY");
    let _ = writeln!(o, "  CPU     {}", e.cpu.describe());
    let _ = writeln!(o, "  memory  {}", e.memory.describe());
    if let Some(m) = &e.memory_max_rss {
        let _ = writeln!(o, "          {}", m.describe());
    }
    let _ = writeln!(o, "  time    {}", e.time.describe());
    if !e.gpus.is_empty() {
        let _ = writeln!(o, "  GPU     utilization {}", e.gpu_utilization.describe());
        let _ = writeln!(o, "          memory {}", e.gpu_memory.describe());
        for g in &e.gpus {
            let _ = writeln!(
                o,
                "    {}{}  utilization {}, memory {}",
                g.node
                    .as_deref()
                    .map_or(String::new(), |n| format!("{} ", field(n))),
                field(&g.label),
                na(g.utilization.percent, |v| format!("{v:.0} %")),
                na(g.memory.percent, |v| format!("{v:.0} %"))
            );
        }
    }
}

/// One finding's line, and under it the site's note for its code (the site file), if any.
fn finding(o: &mut String, f: &crate::analysis::Finding) {
    let _ = writeln!(o, "  [{}] {}", f.code, f.sentence);
    if let Some(n) = &f.site_note {
        if let Some(t) = &n.text {
            let _ = writeln!(o, "      site note: {t}");
        }
        if let Some(u) = &n.url {
            let _ = writeln!(o, "      see {u}");
        }
    }
}
