//! `slurmwatch doctor`: checks this node's set-up, one line per check with what to do.
//! Exit 0 only when the node is ready to record jobs.

mod checks;
mod endpoints;

use checks::{Check, Verdict};
use slurmwatch_core::slurm::{command, conf, plugstack};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args)]
pub struct DoctorArgs {
    /// Print the checks as JSON.
    #[arg(long)]
    pub json: bool,
    /// plugstack.conf to read (default: PlugStackConfig from slurm.conf, else
    /// /etc/slurm/plugstack.conf).
    #[arg(long, value_name = "FILE")]
    pub plugstack: Option<PathBuf>,
    /// On the slurmctld host (as SlurmUser or root): check that every node's summary
    /// endpoint answers the controller (the site file's [summary] url, else --url), instead
    /// of this node's set-up.
    #[arg(long)]
    pub endpoints: bool,
    /// With --endpoints: the nodes to ask (a Slurm host list; default: every node sinfo lists).
    #[arg(long, value_name = "NODES", requires = "endpoints")]
    pub nodes: Option<String>,
    /// With --endpoints: the summary URL ({node} and {job} filled in).
    #[arg(long, requires = "endpoints")]
    pub url: Option<String>,
}

/// `--endpoints`: one check per node of the cluster (or `--nodes`).
fn endpoint_checks(args: &DoctorArgs) -> anyhow::Result<Vec<Check>> {
    let (url, _) = crate::site::summary_endpoint(args.url.clone(), None)?;
    let list = match &args.nodes {
        Some(l) => l.clone(),
        None => {
            let f = command::run("sinfo", &["-h", "-N", "-o", "%N"], Duration::from_secs(20))
                .map_err(|e| anyhow::anyhow!("cannot list the nodes: {e}.\nhint: give --nodes"))?;
            if !f.success {
                anyhow::bail!(
                    "cannot list the nodes: sinfo failed: {}.\nhint: give --nodes",
                    f.reason()
                );
            }
            let mut nodes: Vec<&str> = f.stdout.split_whitespace().collect();
            nodes.sort_unstable();
            nodes.dedup();
            nodes.join(",")
        }
    };
    let nodes = slurmwatch_core::slurm::hostlist::expand(&list)
        .map_err(|e| anyhow::anyhow!("cannot read the node list {list:?}: {e}"))?;
    Ok(endpoints::check_endpoints(
        &url,
        &nodes,
        &Default::default(),
    ))
}

fn plugin_version(path: &Path) -> Option<u32> {
    checks::plugin_version_from_elf(&std::fs::read(path).ok()?)
}

fn slurmd_version() -> Option<String> {
    let out = command::run("slurmd", &["-V"], Duration::from_secs(5)).ok()?;
    out.stdout
        .split_whitespace()
        .nth(1)
        .map(str::to_string)
        .filter(|_| out.success)
}

fn check_nvml() -> Check {
    // SAFETY: dlopen of the driver's library by its well-known name; closed right away.
    let present = unsafe {
        let h = libc::dlopen(
            c"libnvidia-ml.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_LOCAL,
        );
        let ok = !h.is_null();
        if ok {
            libc::dlclose(h);
        }
        ok
    };
    Check {
        name: "nvml",
        verdict: if present { Verdict::Ok } else { Verdict::Note },
        finding: if present {
            "libnvidia-ml.so.1 loads: GPU readings are on for jobs that hold cards".into()
        } else {
            "no libnvidia-ml.so.1: no GPU readings on this node".into()
        },
        fix: String::new(),
    }
}

fn check_sacct() -> Check {
    sacct_check(
        match command::run(
            "sacct",
            &["-n", "-X", "-S", "now-1minutes", "-o", "JobID"],
            Duration::from_secs(10),
        ) {
            Ok(f) if f.success => Ok(()),
            Ok(f) => Err((format!("sacct failed: {}", f.reason()), true)),
            Err(e) => Err((e.to_string(), false)),
        },
    )
}

/// Accounting is not needed to record: a node whose sacct fails (no slurmdbd, a cluster
/// without accounting) still records every job, and `report` reads the file alone. So a
/// failing sacct is a note, never a reason to call the node not ready (seen on Slurm 24.11:
/// "NOT ready" for a missing slurmdbd while recording worked). `Err((why, ran))`: `ran` is
/// false when sacct could not be started at all.
fn sacct_check(r: Result<(), (String, bool)>) -> Check {
    match r {
        Ok(()) => Check {
            name: "sacct",
            verdict: Verdict::Ok,
            finding: "sacct answers (reports can join accounting)".into(),
            fix: String::new(),
        },
        Err((why, ran)) => Check {
            name: "sacct",
            verdict: Verdict::Note,
            finding: format!(
                "{why}: jobs are still recorded, but reports cannot join accounting (sacct's state, exit code, TotalCPU)"
            ),
            fix: if ran {
                "for reports with accounting: check slurmdbd and AccountingStorageType".into()
            } else {
                "for reports with accounting: install the Slurm client and check slurmdbd".into()
            },
        },
    }
}

pub fn run(args: DoctorArgs) -> anyhow::Result<i32> {
    if args.endpoints {
        let checks = endpoint_checks(&args)?;
        return print_checks(
            &checks,
            args.json,
            "every node's endpoint answers the controller",
            "NOT every node's endpoint answers: fix the FAIL lines above",
        );
    }
    let conf = args
        .plugstack
        .unwrap_or_else(|| plugstack::plugstack_path(&conf::path()));
    let (plug, config, line) = checks::check_plugstack(&conf);
    let mut checks = vec![plug];
    if let Some(line) = &line {
        checks.push(checks::check_plugin_version(
            plugin_version(&line.plugin),
            slurmd_version().as_deref(),
        ));
    }
    let config = config.unwrap_or_default();
    let node = slurmwatch_core::site::Site::here().node.as_deref();
    checks.push(checks::check_spool(&spool_to_check(
        &config.spool_dir,
        node,
    )));
    checks.push(checks::check_archive(config.archive_template.as_deref()));
    checks.push(checks::check_cgroup(Path::new("/sys/fs/cgroup")));
    checks.push(check_nvml());
    checks.push(check_sacct());
    print_checks(
        &checks,
        args.json,
        "this node is ready to record jobs",
        "this node is NOT ready: fix the FAIL lines above",
    )
}

/// The spool directory this node's plugin writes: the site's template with `%n` filled with
/// this node's name. The plugin makes that directory itself at the node's first recorded job
/// (root's, 0755), under the site's base; until it exists, the directory it will be made in
/// is what must be there and root's. (The template itself, `%n` and all, is no directory.)
fn spool_to_check(template: &Path, node: Option<&str>) -> PathBuf {
    let Some(here) = slurmwatch_core::options::spool_for_node(template, node.unwrap_or("")) else {
        return template.to_path_buf();
    };
    if here == template || std::fs::symlink_metadata(&here).is_ok() {
        return here;
    }
    here.parent().map(Path::to_path_buf).unwrap_or(here)
}

/// The checks as lines (or JSON) and the last line's verdict; exit 0 only when none failed.
fn print_checks(
    checks: &[Check],
    json: bool,
    ready_line: &str,
    not_ready_line: &str,
) -> anyhow::Result<i32> {
    let ready = checks::ready(checks);
    if json {
        let v = serde_json::json!({ "schema": 1, "ready": ready, "checks": checks });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for c in checks {
            let word = match c.verdict {
                Verdict::Ok => "ok  ",
                Verdict::Note => "note",
                Verdict::Fail => "FAIL",
            };
            if c.fix.is_empty() {
                println!("{word}  {:<15} {}", c.name, c.finding);
            } else {
                println!("{word}  {:<15} {} — fix: {}", c.name, c.finding, c.fix);
            }
        }
        println!("{}", if ready { ready_line } else { not_ready_line });
    }
    Ok(if ready { 0 } else { 1 })
}

#[cfg(test)]
mod sacct_tests {
    use super::*;

    #[test]
    fn a_node_spool_template_is_checked_where_this_node_writes() {
        let d = tempfile::tempdir().unwrap();
        let template = d.path().join("spool/%n");
        // Before the node's first job: the base the plugin makes `c1` in.
        assert_eq!(
            spool_to_check(&template, Some("c1")),
            d.path().join("spool")
        );
        std::fs::create_dir_all(d.path().join("spool/c1")).unwrap();
        assert_eq!(
            spool_to_check(&template, Some("c1")),
            d.path().join("spool/c1")
        );
        // No `%n`: the directory itself; no usable node name: the template, which fails.
        assert_eq!(spool_to_check(d.path(), Some("c1")), d.path());
        assert_eq!(spool_to_check(&template, None), template);
    }

    #[test]
    fn a_failing_sacct_is_a_note_not_a_fail() {
        let c = sacct_check(Err((
            "sacct failed: Slurm accounting storage is disabled".into(),
            true,
        )));
        assert!(matches!(c.verdict, Verdict::Note));
        assert!(c.finding.contains("still recorded"), "{}", c.finding);
        assert!(
            checks::ready(&[c]),
            "a node without accounting is ready to record"
        );
        let c = sacct_check(Err(("sacct: not found".into(), false)));
        assert!(matches!(c.verdict, Verdict::Note));
        assert!(c.fix.contains("install the Slurm client"));
        assert!(matches!(sacct_check(Ok(())).verdict, Verdict::Ok));
    }
}
