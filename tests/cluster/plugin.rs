//! The plugin on the real cluster: option handling, logging, symbols, fault isolation.

use slurmwatch_tests::*;
use std::time::Duration;

// Generous: other tests' jobs may hold the 2-core node for a minute or more.
const WAIT: Duration = Duration::from_secs(300);
const NEEDS: &str = "needs the test cluster: scripts/test.sh";

#[cluster_test]
fn help_of_sbatch_srun_salloc_lists_the_option() {
    let _p = shared_plugstack();
    let _ = NEEDS;
    for tool in ["sbatch", "srun", "salloc"] {
        let o = run(tool, &["--help"]);
        let text = stdout(&o) + &stderr(&o);
        // Slurm's SPANK help printer writes `--name=ARGINFO`; ARGINFO is `[SECONDS]`.
        assert!(
            text.contains("--slurmwatch=[SECONDS]"),
            "{tool} --help does not list the option:\n{text}"
        );
        assert!(
            text.contains("optional; default 5"),
            "{tool}: usage text missing"
        );
    }
}

#[cluster_test]
fn a_job_that_asks_is_recorded_and_completes() {
    let _p = shared_plugstack();
    let job = Submit::new("asks", "echo hello from the job; sleep 1")
        .arg("--slurmwatch=5")
        .submit();
    let line = job.wait(WAIT);
    assert_eq!(
        (line.state.as_str(), line.exit_code.as_str()),
        ("COMPLETED", "0:0")
    );
    assert_eq!(job.output(), "hello from the job\n");
    let lines = job.plugin_lines();
    assert!(
        lines.iter().any(|l| l.contains(&format!(
            "slurmwatch: job {} step batch: recording every 5 s",
            job.id
        ))),
        "no step line in the slurmd log: {lines:#?}"
    );
}

#[cluster_test]
fn a_job_given_the_bare_option_uses_the_default_interval() {
    let _p = shared_plugstack();
    let job = Submit::new("bare", "true").arg("--slurmwatch").submit();
    let line = job.wait(WAIT);
    assert_eq!(line.state, "COMPLETED");
    assert!(
        job.plugin_lines()
            .iter()
            .any(|l| l.contains("recording every 5 s")),
        "{:#?}",
        job.plugin_lines()
    );
}

#[cluster_test]
fn a_job_that_does_not_ask_has_no_plugin_activity() {
    let _p = shared_plugstack();
    let job = Submit::new("quiet", "echo plain").submit();
    let line = job.wait(WAIT);
    assert_eq!(
        (line.state.as_str(), line.exit_code.as_str()),
        ("COMPLETED", "0:0")
    );
    assert!(
        !job.log_lines().is_empty(),
        "the job's steps left no log lines at all"
    );
    assert_eq!(job.plugin_lines(), Vec::<String>::new());
    assert!(!exists(
        &std::path::Path::new(SPOOL).join(job.id.to_string())
    ));
}

#[cluster_test]
fn hostile_option_values_are_refused_at_submission() {
    let _p = shared_plugstack();
    for bad in ["abc", "0", "-5", "1e9", "5s", "99999999999"] {
        let flag = format!("--slurmwatch={bad}");
        let (o, _) = Submit::new("hostile", "true").arg(&flag).sbatch();
        let err = stderr(&o);
        assert!(!o.status.success(), "{flag} was accepted: {}", stdout(&o));
        assert!(stdout(&o).trim().is_empty(), "{flag} printed a job id");
        assert!(
            err.contains("slurmwatch: --slurmwatch=")
                && err.contains("whole number of seconds from 1 to 3600"),
            "{flag}: unclear message: {err}"
        );
    }
}

#[cluster_test]
fn srun_refuses_hostile_values_too() {
    let _p = shared_plugstack();
    let o = run("srun", &["--slurmwatch=abc", "true"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("slurmwatch: --slurmwatch=\"abc\""),
        "{}",
        stderr(&o)
    );
}

#[cluster_test]
fn the_plugin_exports_only_the_spank_symbols() {
    let _p = shared_plugstack();
    let o = run("nm", &["-D", "--defined-only", PLUGIN_SO]);
    assert!(o.status.success(), "{}", stderr(&o));
    let names: Vec<String> = stdout(&o)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2).map(String::from))
        .collect();
    for required in [
        "plugin_name",
        "plugin_type",
        "plugin_version",
        "slurm_spank_init",
    ] {
        assert!(
            names.iter().any(|n| n == required),
            "{required} missing: {names:?}"
        );
    }
    let stray: Vec<&String> = names
        .iter()
        .filter(|n| !(n.starts_with("plugin_") || n.starts_with("slurm_spank_")))
        .collect();
    assert!(stray.is_empty(), "unexpected exported symbols: {stray:?}");
}

/// A panic inside any callback (test builds inject one on request) must leave the job
/// COMPLETED with exit 0 and its output free of panic text.
#[cluster_test]
fn a_panic_in_a_callback_never_harms_the_job() {
    let _p = shared_plugstack();
    for callback in ["init_post_opt", "task_post_fork", "task_exit", "exit"] {
        let job = Submit::new("panic", "echo still fine; exit 0")
            .arg("--slurmwatch=1")
            .env("SLURMWATCH_TEST_PANIC", callback)
            .env("RUST_BACKTRACE", "1")
            .submit();
        let line = job.wait(WAIT);
        assert_eq!(
            (line.state.as_str(), line.exit_code.as_str()),
            ("COMPLETED", "0:0"),
            "panic in {callback}"
        );
        assert_eq!(
            job.output(),
            "still fine\n",
            "panic in {callback} leaked into the output"
        );
        let logged = job.plugin_lines().iter().any(|l| {
            l.contains("internal error (panic")
                && l.contains(&format!("injected test panic in {callback}"))
        });
        assert!(
            logged,
            "panic in {callback} not logged: {:#?}",
            job.plugin_lines()
        );
    }
}

/// A job's own exit code passes through untouched.
#[cluster_test]
fn a_failing_job_keeps_its_exit_code() {
    let _p = shared_plugstack();
    let job = Submit::new("fails", "echo out; exit 3")
        .arg("--slurmwatch=1")
        .submit();
    let line = job.wait(WAIT);
    assert_eq!(
        (line.state.as_str(), line.exit_code.as_str()),
        ("FAILED", "3:0"),
        "{}",
        job.diagnostics()
    );
    assert_eq!(job.output(), "out\n", "{}", job.diagnostics());
}
