//! `slurmwatch generate man DIR` / `slurmwatch generate completions SHELL`: man pages and
//! shell completions generated from the CLI definition itself, so they never drift from it.
//! `slurmwatch-plugin(8)` documents the plugstack arguments from `options::plugstack_args`,
//! whose defaults are the parser's own constants.

use clap::{Arg, Command};
use slurmwatch_core::options::plugstack_args;
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
    for a in plugstack_args() {
        cmd = cmd.arg(
            Arg::new(a.key)
                .long(a.key)
                .value_name(a.value)
                .help(format!("{} (default: {})", a.meaning, a.default)),
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
        let documented: Vec<&str> = plugstack_args().iter().map(|a| a.key).collect();
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
        for a in plugstack_args() {
            assert!(text.contains(a.key), "{} missing from the page", a.key);
        }
    }
}
