//! `slurmwatch generate man DIR` / `slurmwatch generate completions SHELL`: man pages and
//! shell completions generated from the CLI definition itself, so they never drift from it.
//! `slurmwatch-plugin(8)` documents the plugstack arguments from the table below, which a
//! test holds to the parser's list of keys.

use clap::{Arg, Command};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    pub what: What,
}

#[derive(clap::Subcommand)]
pub enum What {
    /// Write slurmwatch.1, one page per subcommand and slurmwatch-plugin.8 into DIR.
    Man { dir: PathBuf },
    /// Print the completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
}

/// The plugstack arguments: key, value, default, meaning.
pub const PLUGSTACK_ARGS: &[(&str, &str, &str, &str)] = &[
    ("default", "on|off", "off", "on records every job at `interval`; off records only jobs that pass --slurmwatch"),
    ("interval", "SECONDS", "5", "interval for a bare --slurmwatch and for default=on (1..86400)"),
    ("min_interval", "SECONDS", "1", "smallest interval a user may ask for"),
    ("max_interval", "SECONDS", "3600", "largest interval a user may ask for"),
    ("spool", "DIR", "/var/spool/slurmwatch", "node-local, root-owned directory for the live per-job files; never a network filesystem"),
    ("archive", "TEMPLATE", "(none)", "directory for a consistent copy at each step's end and every 5 minutes, written with the job user's credentials; placeholders %u user, %U uid, %j job id, %n node, %% percent; every directory below the fixed prefix must be the job user's (or root's) and not group/other-writable, else the copy is refused"),
    ("nvml", "PATH", "libnvidia-ml.so.1", "the NVML library to load for GPU readings (site-chosen; never taken from the job's environment)"),
    ("max_file_mb", "N", "32", "a job's live file (database + WAL) stops growing at N MiB per node (1..48); one event says so, the job runs on"),
    ("retain_days", "N", "30", "spool files older than N days are removed at job ends on the node (0: never)"),
];

fn plugin_page() -> Command {
    let mut cmd = Command::new("slurmwatch-plugin")
        .about("slurmwatch's SPANK plugin: records each job's own CPU, memory and GPUs from inside slurmstepd")
        .long_about(
            "Enable it with one line in plugstack.conf (or a file in plugstack.conf.d):\n\n\
             optional /usr/local/lib/slurmwatch/slurmwatch.so default=off spool=/var/spool/slurmwatch\n\n\
             Users ask for a recording with #SBATCH --slurmwatch[=SECONDS]. Arguments are key=value; \
             an unknown key or a bad value disables recording with one line in the slurmd log, and jobs \
             still run. The plugin never fails a job.",
        )
        .disable_help_flag(true)
        .disable_version_flag(true);
    for (key, value, default, meaning) in PLUGSTACK_ARGS {
        cmd = cmd.arg(
            Arg::new(*key)
                .long(*key)
                .value_name(*value)
                .help(format!("{meaning} (default: {default})")),
        );
    }
    cmd
}

fn write_page(dir: &Path, name: &str, section: &str, cmd: Command) -> anyhow::Result<()> {
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .section(section)
        .render(&mut out)?;
    let path = dir.join(format!("{name}.{section}"));
    std::fs::write(&path, out).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

pub fn run(args: GenerateArgs, cli: Command) -> anyhow::Result<i32> {
    match args.what {
        What::Man { dir } => {
            std::fs::create_dir_all(&dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
            write_page(&dir, "slurmwatch", "1", cli.clone())?;
            for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
                let name = format!("slurmwatch-{}", sub.get_name());
                // clap names are `&'static str` without its "string" feature; this runs once.
                let static_name: &'static str = Box::leak(name.clone().into_boxed_str());
                write_page(&dir, &name, "1", sub.clone().name(static_name))?;
            }
            write_page(&dir, "slurmwatch-plugin", "8", plugin_page())?;
        }
        What::Completions { shell } => {
            let mut cli = cli;
            clap_complete::generate(shell, &mut cli, "slurmwatch", &mut std::io::stdout());
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plugstack_key_is_documented_and_nothing_else() {
        let documented: Vec<&str> = PLUGSTACK_ARGS.iter().map(|a| a.0).collect();
        assert_eq!(documented, slurmwatch_core::options::PLUGSTACK_KEYS);
    }

    #[test]
    fn plugin_page_renders_every_key() {
        let mut out = Vec::new();
        clap_mangen::Man::new(plugin_page())
            .section("8")
            .render(&mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        for (key, ..) in PLUGSTACK_ARGS {
            assert!(text.contains(key), "{key} missing from the page");
        }
    }
}
