//! `slurmwatch`: a thin shell over `slurmwatch-core`. Each subcommand lives in its own module
//! and returns the process exit code (docs/reference/exit-codes.md): 0 ok; 1 nothing live to
//! show (pending, ended, not found) with the reason printed; 2 bad usage or an environment
//! that cannot answer; 128+N on signal.

mod cards;
mod ctld_backfill;
mod ctld_epilog;
mod doctor;
mod generate;
mod history;
mod jobs;
mod mail_hold;
mod mark;
mod metrics;
mod output;
mod progress;
mod report;
mod site;
mod watch;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "slurmwatch",
    version,
    about = "See what your Slurm job is doing: its own CPU, memory and GPUs, live and after the fact.",
    args_conflicts_with_subcommands = true,
    after_help = watch::EXAMPLES
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    watch: watch::WatchArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Post-mortem of a finished (or running) job: its recording joined with sacct.
    Report(report::ReportArgs),
    /// One line per job for many jobs (ids, arrays, output files, a user's window): state,
    /// elapsed and the time, CPU, memory and GPU efficiencies, with each row's basis.
    Jobs(jobs::JobsArgs),
    /// Finished jobs over a window, rolled up into workloads and ranked by cost, with the
    /// patterns across runs (repeated failure, memory hand-searched, nodes that eat jobs).
    History(history::HistoryArgs),
    /// `#SBATCH` advice per workload (--time, --mem, --cpus-per-task, --gres) from measured
    /// peaks over a window of finished jobs.
    Sizing(history::SizingArgs),
    /// GPU cards and nodes that keep slowing jobs down, across the recorded jobs of a window
    /// (default four weeks): held back per card by UUID and per node, the cards named with
    /// their counts, an `#SBATCH --exclude=` line and the facts a drain needs.
    Cards(cards::CardsArgs),
    /// Inside a recorded job: mark that a new phase begins now ("epoch 3"); the report
    /// gives each phase its time, CPU, GPU time, energy and peak memory.
    Mark(mark::MarkArgs),
    /// Check this node's set-up (plugstack line, plugin version, spool, archive, cgroups,
    /// NVML, sacct); exit 0 only when it is ready to record jobs.
    Doctor(doctor::DoctorArgs),
    /// The node's running jobs as Prometheus metrics: printed, written for node_exporter's
    /// textfile collector (--textfile), or served on GET /metrics (--listen).
    Metrics(metrics::MetricsArgs),
    /// For EpilogSlurmctld (slurmctld host): collect the finished job's summary from its
    /// nodes and store it as its AdminComment in slurmdbd.
    CtldEpilog(ctld_epilog::CtldEpilogArgs),
    /// On the slurmctld host: store the summaries missing for a window of finished jobs (a
    /// node's endpoint was down when they ended).
    CtldBackfill(ctld_backfill::CtldBackfillArgs),
    /// For the MailProg wrapper: hold the end-of-job mail until the job's summary is stored.
    #[command(hide = true)]
    MailHold(mail_hold::MailHoldArgs),
    /// Write man pages or print shell completions (for packagers).
    #[command(hide = true)]
    Generate(generate::GenerateArgs),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Report(args)) => report::run(args),
        Some(Command::Jobs(args)) => jobs::run(args),
        Some(Command::Doctor(args)) => doctor::run(args),
        Some(Command::Cards(args)) => cards::run(args),
        Some(Command::Mark(args)) => mark::run(args),
        Some(Command::Metrics(args)) => metrics::run(args),
        Some(Command::CtldEpilog(args)) => ctld_epilog::run(args),
        Some(Command::CtldBackfill(args)) => ctld_backfill::run(args),
        Some(Command::MailHold(args)) => mail_hold::run(args),
        Some(Command::History(args)) => history::run_history(args),
        Some(Command::Sizing(args)) => history::run_sizing(args),
        Some(Command::Generate(args)) => {
            generate::run(args, <Cli as clap::CommandFactory>::command())
        }
        None => watch::run(cli.watch),
    };
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            // One sentence and a hint; never a backtrace. It may quote a path or a name a
            // user chose: no control character reaches the terminal.
            eprintln!(
                "slurmwatch: {}",
                slurmwatch_core::render::terminal::text(&format!("{e:#}"))
            );
            2
        }
    };
    std::process::exit(code);
}

/// docs/reference/commands.md is the CLI's own `--help`, section by section: every visible
/// subcommand has its section, and each section's table is exactly its flags (short and
/// long form, value name, help text and default) in clap's order. A flag added, renamed,
/// reworded or removed without the page fails here, with the rows the page should have.
#[cfg(test)]
mod reference {
    use clap::CommandFactory;

    fn flag_row(a: &clap::Arg) -> Option<String> {
        let long = a.get_long()?;
        if a.is_hide_set() || matches!(long, "help" | "version") {
            return None;
        }
        let mut flag = a.get_short().map(|s| format!("-{s}, ")).unwrap_or_default();
        flag.push_str(&format!("--{long}"));
        if a.get_action().takes_values() {
            let value = a
                .get_value_names()
                .map(|v| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|| a.get_id().as_str().to_uppercase());
            flag.push_str(&format!(" {value}"));
        }
        let mut help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
        let defaults: Vec<String> = a
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() {
            help.push_str(&format!(" [default: {}]", defaults.join(", ")));
        }
        Some(format!("| `{flag}` | {} |", help.replace('|', "\\|")))
    }

    /// The page's sections: the subcommand each heading names (`""`: the live view,
    /// `slurmwatch [JOB]`) and its table rows.
    fn sections(page: &str) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for line in page.lines() {
            if let Some(heading) = line.strip_prefix("## ") {
                let usage = heading.split('`').nth(1).unwrap_or("");
                let word = usage.split_whitespace().nth(1).unwrap_or("");
                let name = if word.starts_with(|c: char| c.is_ascii_lowercase()) {
                    word
                } else {
                    ""
                };
                out.push((name.to_string(), Vec::new()));
            } else if line.starts_with("| `") {
                if let Some((_, rows)) = out.last_mut() {
                    rows.push(line.to_string());
                }
            }
        }
        out
    }

    #[test]
    fn docs_reference_names_every_flag() {
        let page = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/reference/commands.md"
        ))
        .unwrap();
        let documented = sections(&page);
        let cli = super::Cli::command();
        let mut commands = vec![(String::new(), cli.clone())];
        commands.extend(
            cli.get_subcommands()
                .filter(|c| !c.is_hide_set())
                .map(|c| (c.get_name().to_string(), c.clone())),
        );
        for (name, cmd) in &commands {
            let want: Vec<String> = cmd.get_arguments().filter_map(flag_row).collect();
            let Some((_, rows)) = documented.iter().find(|(n, _)| n == name) else {
                panic!(
                    "docs/reference/commands.md has no section for `slurmwatch {name}`; its rows:\n{}",
                    want.join("\n")
                );
            };
            assert_eq!(
                rows,
                &want,
                "docs/reference/commands.md, `slurmwatch {name}`: the table should be\n{}",
                want.join("\n")
            );
        }
        for (name, _) in &documented {
            assert!(
                commands.iter().any(|(n, _)| n == name),
                "docs/reference/commands.md documents `slurmwatch {name}`, which is not a command"
            );
        }
        // The walk saw the CLI (a broken parse would compare nothing with nothing).
        assert_eq!(documented.len(), 11, "{documented:?}");
        // Only `mark` takes no flag (its one argument is the label).
        assert!(documented
            .iter()
            .all(|(n, rows)| !rows.is_empty() || n == "mark"));
    }
}
