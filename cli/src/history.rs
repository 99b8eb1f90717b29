//! `slurmwatch history` and `slurmwatch sizing`: finished jobs over a window, rolled up into
//! workloads (job names with digit runs collapsed), ranked by cost, with `#SBATCH` advice and
//! the patterns across runs.
//!
//! Exit codes: 0 printed; 1 no finished job in the window (said in one sentence); 2 bad usage
//! or sacct missing, failing or not answering in time.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use serde_json::{json, Value};
use slurmwatch_core::history::{self, Analysis, Workload, GPU_HOUR_IN_CORE_HOURS, SCHEMA};
use slurmwatch_core::render::terminal;
use slurmwatch_core::slurm::sacct::{self, Kept, Window};

use crate::progress::Progress;

#[derive(clap::Args, Clone)]
pub struct WindowArgs {
    /// Start of the window: 2026-11-01, 2026-11-01T08:00, now-7d, 12h (ago), @UNIX.
    #[arg(short = 'S', long, value_name = "TIME", default_value = "now-7d")]
    pub since: String,
    /// End of the window (same forms).
    #[arg(short = 'E', long, value_name = "TIME", default_value = "now")]
    pub until: String,
    /// Only these users (comma-separated; default: you).
    #[arg(short = 'u', long, value_name = "USERS", value_delimiter = ',')]
    pub users: Vec<String>,
    /// Every user's jobs (administrators; sacct decides what you may see).
    #[arg(long, conflicts_with = "users")]
    pub all_users: bool,
    /// Only this partition.
    #[arg(short = 'p', long, value_name = "PARTITION")]
    pub partition: Option<String>,
    /// Workloads shown; the rest are totalled, not dropped.
    #[arg(long, value_name = "N", default_value_t = history::DEFAULT_TOP)]
    pub top: usize,
    /// Where the plugin writes per-job files (their working-set peaks size --mem); default:
    /// the site's plugstack.conf `spool=` (`%n`: each job's nodes). The site's `archive=` is
    /// always searched.
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// Also look for recorded files here (an archive directory; repeatable).
    #[arg(long, value_name = "DIR")]
    pub archive: Vec<PathBuf>,
    /// Print JSON (schema in docs/guide.md, History and sizing).
    #[arg(long)]
    pub json: bool,
    /// Seconds the whole sacct query may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 60)]
    pub sacct_timeout: u64,
}

#[derive(clap::Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub window: WindowArgs,
}

#[derive(clap::Args)]
pub struct SizingArgs {
    #[command(flatten)]
    pub window: WindowArgs,
    /// Only the workload with this collapsed name (`train-#`) or one of its job names.
    #[arg(long, value_name = "NAME")]
    pub workload: Option<String>,
}

/// `now`, `now-7d`, `7d` (ago), `12h`, `30m`, `2026-11-01`, `2026-11-01T08:00[:SS]`, `@UNIX`.
pub fn parse_when(s: &str, now: i64) -> Option<i64> {
    let s = s.trim();
    if s == "now" {
        return Some(now);
    }
    if let Some(u) = s.strip_prefix('@') {
        return u.parse().ok();
    }
    let ago = s.strip_prefix("now-").unwrap_or(s);
    let unit_len = ago
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_alphabetic())
        .count();
    if unit_len > 0 && ago.len() > unit_len {
        let (n, unit) = ago.split_at(ago.len() - unit_len);
        if let Ok(n) = n.parse::<i64>() {
            let mult = match unit {
                "s" | "sec" | "seconds" => 1,
                "m" | "min" | "minutes" => 60,
                "h" | "hours" => 3600,
                "d" | "days" => 86400,
                "w" | "weeks" => 7 * 86400,
                _ => return None,
            };
            return now.checked_sub(n.checked_mul(mult)?);
        }
    }
    let full = match s.len() {
        10 => format!("{s}T00:00:00"),
        16 => format!("{s}:00"),
        _ => s.to_string(),
    };
    sacct::parse_time(&full)
}

/// Query, build runs, attach recordings, analyse. `Ok(None)`: no finished job.
fn load(w: &WindowArgs) -> anyhow::Result<(Analysis, Value)> {
    let now = slurmwatch_core::sys::now_unix_s();
    let Some(since) = parse_when(&w.since, now) else {
        bail!(
            "cannot read --since {:?}.\nhint: use 2026-11-01, 2026-11-01T08:00, now-7d or 12h",
            w.since
        );
    };
    let Some(until) = parse_when(&w.until, now) else {
        bail!(
            "cannot read --until {:?}.\nhint: use 2026-11-01, 2026-11-01T08:00, now or @UNIX",
            w.until
        );
    };
    if until <= since {
        bail!("the window is empty: --until must be later than --since.");
    }
    let q = sacct::Query {
        timeout: Duration::from_secs(w.sacct_timeout.max(1)),
        ..sacct::Query::default()
    };
    let dirs = slurmwatch_core::locate::site_places(w.spool.as_deref(), &w.archive);
    // Streamed: each job becomes a run as sacct prints it; sacct's text is never held.
    let mut runs = history::Runs::new(Some(&dirs));
    let progress = Progress::start("sacct", "jobs");
    let tally = q
        .window_each_prepared(
            &Window {
                since_unix: since,
                until_unix: until,
                users: w.users.clone(),
                all_users: w.all_users,
                partition: w.partition.clone(),
            },
            Kept::Ids,
            // Each job's summary decoded on a thread of its own (~10 µs a job).
            Some(&history::Run::prepare),
            &mut |r, prepared| {
                // A job two chunks list is one job.
                if runs.add_prepared(r, prepared.flatten()) {
                    progress.add(1);
                }
            },
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    drop(progress);
    let meta = json!({
        "since_unix": since,
        "until_unix": until,
        "users": w.users,
        "all_users": w.all_users,
        "partition": w.partition,
        "jobs": runs.len(),
        "jobs_unfinished": runs.unfinished(),
        "recorded_files": runs.recorded_files(),
        "slurmdbd_summaries": runs.slurmdbd_summaries(),
        "sacct_skipped_lines": tally.skipped_lines,
        "gpu_hour_in_core_hours": GPU_HOUR_IN_CORE_HOURS,
    });
    Ok((runs.finish(), meta))
}

fn r2(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 100.0).round() / 100.0 + 0.0) // + 0.0: no -0 in JSON
    } else {
        Value::Null
    }
}

fn workload_json(w: &Workload, with_advice: bool) -> Value {
    let mut v = json!({
        "name": w.name,
        "user": w.user,
        "names_covered": w.names_covered,
        "example_names": w.example_names,
        "runs": w.runs,
        "completed": w.completed,
        "failed": w.failed,
        "cancelled": w.cancelled,
        "timeouts": w.timeouts,
        "hung": w.hung,
        "out_of_memory": w.out_of_memory,
        "recorded_runs": w.recorded_runs,
        "core_hours": r2(w.core_hours),
        "gpu_hours": r2(w.gpu_hours),
        "cost_core_hours": r2(w.cost_core_hours),
        "wasted_gpu_hours": r2(w.wasted_gpu_hours),
        "states": w.states,
    });
    if with_advice {
        v["advice"] = serde_json::to_value(&w.advice).unwrap_or(Value::Null);
    }
    v
}

fn fold_json(a: &Analysis, top: usize) -> Value {
    let f = a.fold(top);
    json!({
        "workloads": f.workloads, "runs": f.runs, "failed": f.failed,
        "core_hours": r2(f.core_hours), "gpu_hours": r2(f.gpu_hours),
        "cost_core_hours": r2(f.cost_core_hours), "wasted_gpu_hours": r2(f.wasted_gpu_hours),
    })
}

/// The workload and its user, as printed: both are user text ([`terminal::field`]).
fn who(w: &Workload) -> String {
    let name = terminal::field(&w.name);
    match &w.user {
        Some(u) => format!("{name} ({})", terminal::field(u)),
        None => name.into_owned(),
    }
}

/// The `history --json` / `sizing --json` document (keys in this order).
#[derive(serde::Serialize)]
struct Document<'a> {
    schema: u32,
    window: Value,
    workloads: Vec<Value>,
    below_fold: Value,
    /// Borrowed, not copied into a `Value`: over a site's month they are most of the output.
    patterns: &'a [history::Pattern],
    exclude: Option<String>,
}

fn print_document(a: &Analysis, window: Value, top: usize, advice: bool) -> anyhow::Result<i32> {
    let d = Document {
        schema: SCHEMA,
        window,
        workloads: a
            .workloads
            .iter()
            .take(top)
            .map(|x| workload_json(x, advice))
            .collect(),
        below_fold: fold_json(a, top),
        patterns: &a.patterns,
        exclude: a.exclude.as_ref().map(|e| format!("--exclude={e}")),
    };
    crate::output::print_json(&d).map_err(anyhow::Error::msg)?;
    Ok(0)
}

fn print(out: &str) -> anyhow::Result<i32> {
    crate::output::print(out).map_err(anyhow::Error::msg)?;
    Ok(0)
}

/// A rendered table or advice for a terminal: job names reach it inside sentences too (the
/// patterns), so the whole text goes through [`terminal::text`].
fn print_text(out: &str) -> anyhow::Result<i32> {
    print(&terminal::text(out))
}

fn nothing(meta: &Value, json_out: bool) -> anyhow::Result<i32> {
    if json_out {
        let v = json!({"schema": SCHEMA, "window": meta, "workloads": [], "patterns": []});
        print(&format!("{}\n", serde_json::to_string_pretty(&v)?))?;
    } else {
        eprintln!(
            "slurmwatch: no finished job in the window ({} unfinished).\nhint: widen it with -S (e.g. -S now-30d), or name users with -u",
            meta["jobs_unfinished"]
        );
    }
    Ok(1)
}

pub fn run_history(args: HistoryArgs) -> anyhow::Result<i32> {
    let w = &args.window;
    let (a, meta) = load(w)?;
    if a.workloads.is_empty() {
        return nothing(&meta, w.json);
    }
    let top = w.top;
    if w.json {
        return print_document(&a, meta, top, false);
    }
    let mut s = format!(
        "{} finished jobs in {} workloads ({} recorded files); cost = core-hours + {GPU_HOUR_IN_CORE_HOURS:.0} × GPU-hours\n\n",
        meta["jobs"], a.workloads.len(), meta["recorded_files"]
    );
    s += &format!(
        "{:<28} {:>6} {:>6} {:>6} {:>10} {:>9} {:>10} {:>10}\n",
        "WORKLOAD", "NAMES", "RUNS", "FAILED", "CORE-H", "GPU-H", "WASTED-GPU", "COST"
    );
    for x in a.workloads.iter().take(top) {
        s += &format!(
            "{:<28} {:>6} {:>6} {:>6} {:>10.1} {:>9.1} {:>10.1} {:>10.1}\n",
            who(x),
            x.names_covered,
            x.runs,
            x.failed,
            x.core_hours,
            x.gpu_hours,
            x.wasted_gpu_hours,
            x.cost_core_hours
        );
    }
    let f = a.fold(top);
    if f.workloads > 0 {
        s += &format!(
            "… and {} more workloads below the fold: {} runs, {} failed, {:.1} core-h, {:.1} GPU-h (--top N shows more)\n",
            f.workloads, f.runs, f.failed, f.core_hours, f.gpu_hours
        );
    }
    if !a.patterns.is_empty() {
        s += "\nPatterns:\n";
        for p in &a.patterns {
            s += &format!("  - {}\n", p.sentence);
        }
    }
    if let Some(e) = &a.exclude {
        s += &format!("\n#SBATCH --exclude={e}\n");
    }
    print_text(&s)
}

pub fn run_sizing(args: SizingArgs) -> anyhow::Result<i32> {
    let w = &args.window;
    let (mut a, meta) = load(w)?;
    if let Some(name) = &args.workload {
        let key = history::workload_name(name);
        a.workloads.retain(|x| x.name == *name || x.name == key);
    }
    if a.workloads.is_empty() {
        return nothing(&meta, w.json);
    }
    let top = w.top;
    if w.json {
        return print_document(&a, meta, top, true);
    }
    let mut s = String::new();
    for x in a.workloads.iter().take(top) {
        s += &format!(
            "{} — {} runs ({} names, {} completed, {} failed, {} recorded)\n",
            who(x),
            x.runs,
            x.names_covered,
            x.completed,
            x.failed,
            x.recorded_runs
        );
        for ad in &x.advice {
            s += &format!(
                "  {:<16} {:<20} {}\n",
                ad.flag,
                ad.verdict.word(),
                ad.sbatch.clone().unwrap_or_else(|| format!(
                    "(now {})",
                    ad.current.clone().unwrap_or_else(|| "unknown".into())
                ))
            );
            s += &format!("  {:<16} {} [{}]\n", "", ad.evidence, ad.basis);
        }
        s.push('\n');
    }
    let f = a.fold(top);
    if f.workloads > 0 {
        s += &format!(
            "… and {} more workloads below the fold ({} runs); --top N or --workload NAME shows them\n",
            f.workloads, f.runs
        );
    }
    for p in &a.patterns {
        s += &format!("- {}\n", p.sentence);
    }
    if let Some(e) = &a.exclude {
        s += &format!("#SBATCH --exclude={e}\n");
    }
    print_text(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_forms() {
        let now = 1_000_000;
        assert_eq!(parse_when("now", now), Some(now));
        assert_eq!(parse_when("now-7d", now), Some(now - 7 * 86400));
        assert_eq!(parse_when("12h", now), Some(now - 12 * 3600));
        assert_eq!(parse_when("@42", now), Some(42));
        assert!(parse_when("2026-11-01", now).is_some());
        assert!(parse_when("2026-11-01T08:00", now).is_some());
        assert_eq!(parse_when("yesterday-ish", now), None);
        assert_eq!(parse_when("99999999999999999d", now), None);
    }
}
