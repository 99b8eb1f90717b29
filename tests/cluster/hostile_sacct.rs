//! Forged jobs through sacct's text (issue 37, attack 6), performed on the real cluster:
//! swuser2 puts a whole sacct record of slurmwatch's field list — job 4000000001 of
//! swuser1, COMPLETED on node n1, named `forged` — between two newlines into one job's
//! `--comment` (Slurm copies it into SubmitLine) and into another job's name (Slurm keeps a
//! newline in `-J`). `history --all-users`, `jobs ID` and `report ID`, run by root, must show
//! swuser2's two jobs as they are, names kept byte for byte, and no forged job, user or node.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use slurmwatch_core::slurm::sacct::{sacct_time, FIELDS};
use slurmwatch_tests::*;

const WAIT: Duration = Duration::from_secs(300);
const FORGED_ID: &str = "4000000001";
const FORGED_NODE: &str = "n1";

/// `x<tag>⏎<record>⏎y`: the record is every field the reader asks, in its order, joined by
/// the unit separator, with times inside the window the test reads.
fn forged_text(uid1: &str) -> String {
    let (start, end) = (sacct_time(now() - 60), sacct_time(now() - 30));
    let value = |f: &str| -> String {
        match f {
            "JobID" | "JobIDRaw" => FORGED_ID.into(),
            "JobName" => "forged".into(),
            "User" | "Group" => USER1.into(),
            "UID" => uid1.into(),
            "Partition" => "debug".into(),
            "State" => "COMPLETED".into(),
            "ExitCode" => "0:0".into(),
            "Submit" | "Eligible" | "Start" => start.clone(),
            "End" => end.clone(),
            "Elapsed" => "00:00:30".into(),
            "ElapsedRaw" => "30".into(),
            "TimelimitRaw" => "60".into(),
            "NNodes" | "NCPUS" | "AllocCPUS" => "1".into(),
            "AllocTRES" => "cpu=1,mem=1G,node=1".into(),
            "NodeList" => FORGED_NODE.into(),
            _ => String::new(),
        }
    };
    let record: Vec<String> = FIELDS.iter().map(|f| value(f)).collect();
    format!("x{}\n{}\ny", tag(), record.join("\u{1f}"))
}

/// Every string anywhere in `v`.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

fn no_forged_value(v: &Value, what: &str) {
    let mut all = Vec::new();
    strings(v, &mut all);
    for s in [FORGED_ID, FORGED_NODE, "forged"] {
        assert!(!all.iter().any(|x| x == s), "{what} shows {s:?}: {v:#}");
    }
}

fn cli_text(args: &[&str]) -> String {
    let o = Command::new(slurmwatch_bin()).args(args).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

#[cluster_test]
fn a_record_forged_in_a_comment_or_a_job_name_shows_no_job() {
    let _p = shared_plugstack();
    let since = format!("@{}", now() - 5);
    let uid1 = stdout(&run("id", &["-u", USER1])).trim().to_string();
    let uid2 = stdout(&run("id", &["-u", USER2])).trim().to_string();
    let text = forged_text(&uid1);
    let comment = format!("--comment={text}");
    let name = format!("--job-name={text}");
    let comment_job = format!("hostile-comment-{}", tag());
    let by_comment = Submit::new(&comment_job, "true")
        .arg(&comment)
        .user(USER2)
        .submit();
    let by_name = Submit::new("hostile-name", "true")
        .arg(&name)
        .user(USER2)
        .submit();
    for j in [&by_comment, &by_name] {
        assert_eq!(j.wait(WAIT).state, "COMPLETED", "{}", j.output());
    }
    let until = format!("@{}", now() + 5);

    // The attack is real: Slurm kept the newlines and unit separators where the reader sees
    // them.
    let asked = |id: u32, field: &str| {
        stdout(&run(
            "sacct",
            &["-j", &id.to_string(), "-X", "-n", "-P", "-o", field],
        ))
    };
    assert!(
        asked(by_comment.id, "SubmitLine").contains(&text),
        "SubmitLine: {:?}",
        asked(by_comment.id, "SubmitLine")
    );
    assert!(asked(by_name.id, "JobName").contains(&text));

    for job in [&by_comment, &by_name] {
        let id = job.id.to_string();
        // jobs ID: one row, the job itself.
        let j = cli_json(&["jobs", &id, "--json"]);
        let rows = j["jobs"].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{j:#}");
        assert_eq!(rows[0]["job_id"], id.as_str(), "{j:#}");
        assert_eq!(rows[0]["user"], USER2, "{j:#}");
        no_forged_value(&j, "jobs --json");
        let t = cli_text(&["jobs", &id]);
        assert!(!t.contains(FORGED_ID), "jobs {id}: {t}");

        // report ID: the job, its user, its node.
        let r = cli_json(&["report", &id, "--json"]);
        assert_eq!(r["job_id"], id.as_str(), "{r:#}");
        assert_eq!(r["job"]["user"], USER2, "{r:#}");
        assert_eq!(r["job"]["uid"].to_string(), uid2, "{r:#}");
        let nodes = r["job"]["node_list"].as_str().unwrap_or_default();
        assert!(!nodes.is_empty() && nodes != FORGED_NODE, "{r:#}");
        no_forged_value(&r, "report --json");
        let t = cli_text(&["report", &id]);
        assert!(t.starts_with(&format!("Job {id} ")), "report {id}: {t}");
        assert!(t.contains(&format!("user {USER2}")), "report {id}: {t}");
        assert!(!t.contains(&format!("user {USER1}")), "report {id}: {t}");
    }

    // history --all-users: swuser2's two runs, no workload `forged`, nothing skipped.
    let h = cli_json(&[
        "history",
        "--all-users",
        "-S",
        &since,
        "-E",
        &until,
        "--json",
    ]);
    assert_eq!(h["window"]["sacct_skipped_lines"], 0, "{h:#}");
    // Each of this test's jobs is its own workload of one run (the tag is letters, which
    // workload names keep).
    let workloads = h["workloads"].as_array().unwrap();
    for prefix in [comment_job.clone(), format!("x{}\n", tag())] {
        let w: Vec<&Value> = workloads
            .iter()
            .filter(|w| w["name"].as_str().unwrap_or_default().starts_with(&prefix))
            .collect();
        assert_eq!(w.len(), 1, "{prefix:?}: {h:#}");
        assert_eq!(
            (&w[0]["user"], &w[0]["runs"]),
            (&Value::from(USER2), &Value::from(1))
        );
    }
    no_forged_value(&h, "history --json");
    let t = cli_text(&["history", "--all-users", "-S", &since, "-E", &until]);
    assert!(!t.lines().any(|l| l.starts_with("forged ")), "history: {t}");

    // The name is kept byte for byte (escaping it for a terminal is the printer's work).
    let r = cli_json(&["report", &by_name.id.to_string(), "--json"]);
    assert_eq!(r["job"]["name"], text.as_str(), "{r:#}");
    let j = cli_json(&["jobs", &by_name.id.to_string(), "--json"]);
    assert_eq!(j["jobs"][0]["job_name"], text.as_str(), "{j:#}");
}
