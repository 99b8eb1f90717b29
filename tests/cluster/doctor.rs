//! `slurmwatch doctor` on the real cluster: ready when set up; each fault named.

use slurmwatch_tests::*;
use std::os::unix::fs::PermissionsExt;

fn doctor() -> (i32, String) {
    let o = std::process::Command::new(slurmwatch_bin())
        .arg("doctor")
        .output()
        .expect("run slurmwatch doctor");
    (o.status.code().unwrap_or(-1), stdout(&o) + &stderr(&o))
}

fn fail_line(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with("FAIL") && l.split_whitespace().nth(1) == Some(name))
        .map(String::from)
}

#[cluster_test]
fn doctor_passes_on_the_test_cluster_and_names_each_fault() {
    {
        let _p = shared_plugstack();
        let (code, text) = doctor();
        assert_eq!(code, 0, "doctor failed on a set-up node:\n{text}");
        let release = slurm_release();
        assert!(
            text.contains(&format!("plugin built for Slurm {release}")),
            "{text}"
        );
    }
    {
        // One guard for the three faults (each take of the lock waits for the other thread).
        // A bad plugstack argument.
        let o = PlugstackOverride::new(&format!("spool={SPOOL} defualt=on"));
        let (code, text) = doctor();
        assert_eq!(code, 1, "{text}");
        let line = fail_line(&text, "plugstack").unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains("defualt"), "{line}");

        // The archive base missing.
        o.set(&format!("spool={SPOOL} archive=/nonexistent-archive/%u"));
        let (code, text) = doctor();
        assert_eq!(code, 1, "{text}");
        let line = fail_line(&text, "archive").unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains("/nonexistent-archive"), "{line}");

        // A world-writable spool (restored at once; the lock keeps other tests' jobs out).
        o.set(&format!("spool={SPOOL}"));
        std::fs::set_permissions(SPOOL, std::fs::Permissions::from_mode(0o777)).unwrap();
        let (code, text) = doctor();
        std::fs::set_permissions(SPOOL, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(code, 1, "{text}");
        let line = fail_line(&text, "spool").unwrap_or_else(|| panic!("{text}"));
        assert!(
            line.contains("0777") && line.contains("chmod 0755"),
            "{line}"
        );
    }
}

/// A plugin built for another release is one slurmstepd would refuse: doctor names it. The
/// VM tier's guests have the host's 22.05 build beside their own release's package (the
/// share's `slurmwatch-22.05.so`, scripts/vm/test.sh).
#[cluster_test(Phase::Guest)]
fn doctor_names_a_plugin_built_for_another_slurm_as_refused() {
    let _p = shared_plugstack();
    let other = "/share/slurmwatch-22.05.so";
    let conf = job_dir("doctor-other").join("plugstack.conf");
    std::fs::write(&conf, format!("optional {other} spool={SPOOL}\n")).unwrap();
    let o = std::process::Command::new(slurmwatch_bin())
        .args(["doctor", "--json", "--plugstack"])
        .arg(&conf)
        .output()
        .expect("run slurmwatch doctor");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("doctor --json: {e}: {}", stdout(&o)));
    let check = v["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == "plugin_version"))
        .unwrap_or_else(|| panic!("no plugin_version check: {v}"));
    let finding = check["finding"].as_str().unwrap_or_default();
    assert_eq!(check["verdict"], "fail", "{check}");
    assert!(
        finding.contains("22.05") && finding.contains("will refuse"),
        "{finding}"
    );
}

/// Issue 36, part 3: `doctor --endpoints` on the controller asks every node sinfo lists, as
/// the EpilogSlurmctld does: each node's line says whether its endpoint answers the
/// controller's credential, and the exit code whether all did.
#[cluster_test(Phase::Cgroup)]
fn doctor_endpoints_names_each_node_and_whether_it_answers() {
    let _p = shared_plugstack();
    use crate::slurmdbd::{Server, PORT_HELD, SUMMARY_PORT};
    let url = format!("http://127.0.0.1:{SUMMARY_PORT}/jobs/{{job}}/summary");
    let doctor_endpoints = || {
        let o = std::process::Command::new(slurmwatch_bin())
            .args(["doctor", "--endpoints", "--url", &url])
            .output()
            .expect("run slurmwatch doctor --endpoints");
        (o.status.code().unwrap_or(-1), stdout(&o) + &stderr(&o))
    };
    let nodes: Vec<String> = {
        let mut n: Vec<String> = stdout(&run("sinfo", &["-h", "-N", "-o", "%N"]))
            .split_whitespace()
            .map(String::from)
            .collect();
        n.sort();
        n.dedup();
        n
    };
    assert!(!nodes.is_empty());
    let held = PORT_HELD.lock().unwrap_or_else(|e| e.into_inner());
    // No endpoint: every node named as giving no answer.
    let (code, text) = doctor_endpoints();
    assert_eq!(code, 1, "{text}");
    for n in &nodes {
        assert!(
            text.lines()
                .any(|l| l.starts_with("FAIL  endpoint")
                    && l.contains(&format!("{n} gives no answer"))),
            "{n}: {text}"
        );
    }
    // Up: every node answers the controller.
    let _server = Server::start_held("127.0.0.1", held);
    let (code, text) = doctor_endpoints();
    assert_eq!(code, 0, "{text}");
    for n in &nodes {
        assert!(
            text.lines().any(|l| l.starts_with("ok    endpoint")
                && l.contains(&format!("{n} answers the controller"))),
            "{n}: {text}"
        );
    }
    assert!(
        text.contains("every node's endpoint answers the controller"),
        "{text}"
    );
}
