//! `slurmwatch`: a thin shell over `slurmwatch-core`. Each subcommand lives in its own module
//! and returns the process exit code (docs/reference/exit-codes.md): 0 ok; 1 nothing live to
//! show (pending, ended, not found) with the reason printed; 2 bad usage or an environment
//! that cannot answer; 128+N on signal.

mod cards;
mod ctld_epilog;
mod doctor;
mod generate;
mod history;
mod jobs;
mod metrics;
mod output;
mod progress;
mod report;
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
    /// Check this node's set-up (plugstack line, plugin version, spool, archive, cgroups,
    /// NVML, sacct); exit 0 only when it is ready to record jobs.
    Doctor(doctor::DoctorArgs),
    /// The node's running jobs as Prometheus metrics: printed, written for node_exporter's
    /// textfile collector (--textfile), or served on GET /metrics (--listen).
    Metrics(metrics::MetricsArgs),
    /// For EpilogSlurmctld (slurmctld host): collect the finished job's summary from its
    /// nodes and store it as its AdminComment in slurmdbd.
    CtldEpilog(ctld_epilog::CtldEpilogArgs),
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
        Some(Command::Metrics(args)) => metrics::run(args),
        Some(Command::CtldEpilog(args)) => ctld_epilog::run(args),
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
            // One sentence and a hint; never a backtrace.
            eprintln!("slurmwatch: {e:#}");
            2
        }
    };
    std::process::exit(code);
}
