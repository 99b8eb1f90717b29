//! `slurmwatch cards`: which GPU cards and nodes keep slowing jobs down, across the recorded
//! jobs of a window (core's `fleet`: the analysis and its rendering; this is the shell).
//!
//! Exit codes: 0 printed; 1 no recorded GPU job in the window (said in one sentence); 2 bad
//! usage.

use std::path::PathBuf;

use anyhow::bail;
use slurmwatch_core::fleet::{self, cards, render, Window};

use crate::history::parse_when;

#[derive(clap::Args)]
pub struct CardsArgs {
    /// Start of the window: 2026-11-01, 2026-11-01T08:00, now-28d, 12h (ago), @UNIX.
    #[arg(short = 'S', long, value_name = "TIME", default_value = "now-28d")]
    pub since: String,
    /// End of the window (same forms).
    #[arg(short = 'E', long, value_name = "TIME", default_value = "now")]
    pub until: String,
    /// Where the plugin writes per-job files (`%n`: the node name); default: the site's
    /// plugstack.conf `spool=`, else /var/spool/slurmwatch.
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// Also read recorded files here (an archive directory, or a `%u`/`%n` template;
    /// repeatable). The site's plugstack.conf `archive=` is always read. A file its owner
    /// could have edited counts only when sacct confirms its job's user and node.
    #[arg(long, value_name = "DIR", action = clap::ArgAction::Append)]
    pub archive: Vec<PathBuf>,
    /// Print JSON (keys in docs/reference/json.md).
    #[arg(long)]
    pub json: bool,
    /// Read only the files (not the summaries slurmdbd keeps in each job's AdminComment);
    /// files in users' directories are then left out, and said.
    #[arg(long)]
    pub no_sacct: bool,
    /// Seconds sacct may take (slurmdbd down makes it hang).
    #[arg(long, default_value_t = 120)]
    pub sacct_timeout: u64,
}

/// The window `-S/-E` name, in Unix ms.
pub fn window(since: &str, until: &str) -> anyhow::Result<Window> {
    let now = slurmwatch_core::sys::now_unix_s();
    let Some(s) = parse_when(since, now) else {
        bail!("cannot read --since {since:?}.\nhint: use 2026-11-01, 2026-11-01T08:00, now-28d or 12h");
    };
    let Some(u) = parse_when(until, now) else {
        bail!(
            "cannot read --until {until:?}.\nhint: use 2026-11-01, 2026-11-01T08:00, now or @UNIX"
        );
    };
    if u <= s {
        bail!("the window is empty: --until must be later than --since.");
    }
    Ok(Window {
        since_unix_ms: s.saturating_mul(1000),
        until_unix_ms: u.saturating_mul(1000),
    })
}

pub fn run(args: CardsArgs) -> anyhow::Result<i32> {
    let w = window(&args.since, &args.until)?;
    // The summaries in slurmdbd first (no file opened for a job that has one), then files.
    let g = fleet::gather_site(
        args.spool.as_deref(),
        &args.archive,
        (!args.no_sacct).then(|| std::time::Duration::from_secs(args.sacct_timeout.max(1))),
        &w,
    );
    let a = cards::analyse(&g.jobs);
    if a.gpu_jobs == 0 {
        if args.json {
            let v = render::json(&w, &g, &a);
            crate::output::print(&format!("{}\n", serde_json::to_string_pretty(&v)?))
                .map_err(anyhow::Error::msg)?;
        } else {
            eprintln!("slurmwatch: {}", render::nothing(&w, &g));
        }
        return Ok(1);
    }
    let out = if args.json {
        format!(
            "{}\n",
            serde_json::to_string_pretty(&render::json(&w, &g, &a))?
        )
    } else {
        render::text(&w, &g, &a)
    };
    crate::output::print(&out).map_err(anyhow::Error::msg)?;
    Ok(0)
}
