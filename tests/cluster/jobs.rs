//! `slurmwatch jobs` (issue 17) on a real array of 10 tasks: by the array's id and by the
//! directory of the tasks' output files, 10 rows whose states and CPU and time efficiencies
//! match sacct's own figures (ground truth: each task's steps' TotalCPU, ElapsedRaw, NCPUS
//! and TimelimitRaw, asked separately).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use slurmwatch_tests::*;

const WAIT: Duration = Duration::from_secs(600);

/// sacct's lines for the array: (JobID, State, ElapsedRaw, TotalCPU, NCPUS, TimelimitRaw).
fn sacct_lines(array: u32) -> Vec<Vec<String>> {
    let o = run(
        "sacct",
        &[
            "-n",
            "-P",
            "--delimiter=\u{1f}",
            "-j",
            &array.to_string(),
            "-o",
            "JobID,State,ElapsedRaw,TotalCPU,NCPUS,TimelimitRaw",
        ],
    );
    stdout(&o)
        .lines()
        .map(|l| l.split('\u{1f}').map(str::to_string).collect::<Vec<_>>())
        .filter(|f| f.len() == 6)
        .collect()
}

fn wait_array(array: u32, tasks: usize) -> Vec<Vec<String>> {
    let end = Instant::now() + WAIT;
    loop {
        let q = run("squeue", &["-h", "-j", &array.to_string(), "-o", "%T"]);
        let queued = q.status.success() && !stdout(&q).trim().is_empty();
        let lines = sacct_lines(array);
        let done = lines
            .iter()
            .filter(|f| !f[0].contains('.'))
            .filter(|f| !matches!(f[1].as_str(), "PENDING" | "RUNNING" | "COMPLETING"))
            .count();
        if !queued && done == tasks {
            return lines;
        }
        assert!(Instant::now() < end, "array {array} did not finish");
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn jobs_json(args: &[&str]) -> Value {
    let o = Command::new(slurmwatch_bin())
        .arg("jobs")
        .arg("--json")
        .args(args)
        .output()
        .expect("run slurmwatch");
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[cluster_test]
fn jobs_of_an_array_and_of_its_output_files() {
    let _g = shared_plugstack();
    // Task 3 fails; the others burn about 2 s of CPU on their one core.
    let job = Submit::new(
        "jobsarray",
        "if [ \"$SLURM_ARRAY_TASK_ID\" = 3 ]; then exit 1; fi\ntimeout 2 sh -c 'while :; do :; done'\nsleep 1",
    )
    .arg("--array=1-10")
    .arg("-c1")
    .arg("--mem=100M")
    .arg("-t5")
    .arg("--output=slurm-%A_%a.out")
    .submit();
    let lines = wait_array(job.id, 10);
    let by_id = jobs_json(&[&job.id.to_string()]);
    let by_dir = jobs_json(&[job.dir.to_str().unwrap()]);
    for v in [&by_id, &by_dir] {
        let rows = v["jobs"].as_array().unwrap();
        assert_eq!(rows.len(), 10, "{v:#}");
        for r in rows {
            let id = r["job_id"].as_str().unwrap();
            let line = lines
                .iter()
                .find(|f| f[0] == id)
                .unwrap_or_else(|| panic!("{id}"));
            assert_eq!(r["state"], line[1].split(' ').next().unwrap(), "{id}");
            let cpu: f64 = lines
                .iter()
                .filter(|f| f[0].starts_with(&format!("{id}.")))
                .filter_map(|f| sacct_duration_seconds(&f[3]))
                .sum();
            let elapsed: f64 = line[2].parse().unwrap();
            let ncpus: f64 = line[4].parse().unwrap();
            let limit_s: f64 = line[5].parse::<f64>().unwrap() * 60.0;
            let e = &r["efficiency"];
            if elapsed == 0.0 {
                // Nothing to divide by: unknown, never 0.
                assert!(e["cpu_efficiency_percent"].is_null(), "{id}: {e:#}");
                continue;
            }
            // A recorded task's CPU is its cgroup's, a little above sacct's sampled TotalCPU.
            let want_cpu = cpu * 100.0 / (elapsed * ncpus);
            let got_cpu = e["cpu_efficiency_percent"].as_f64().unwrap();
            assert!(
                (got_cpu - want_cpu).abs() < 3.0,
                "{id}: cpu {got_cpu} vs sacct {want_cpu}"
            );
            let got_t = e["time_efficiency_percent"].as_f64().unwrap();
            let want_t = elapsed * 100.0 / limit_s;
            assert!(
                (got_t - want_t).abs() < 1.0,
                "{id}: time {got_t} vs {want_t}"
            );
            if r["state"] == "COMPLETED" {
                assert!(got_cpu > 20.0, "{id}: the 2-s burn shows: {got_cpu}");
            }
        }
        let failed: Vec<&str> = rows
            .iter()
            .filter(|r| r["state"] == "FAILED")
            .map(|r| r["job_id"].as_str().unwrap())
            .collect();
        assert_eq!(failed, [format!("{}_3", job.id)], "{v:#}");
    }
    // The summary row counts the states.
    let s = jobs_json(&["--array-summary", &job.id.to_string()]);
    assert_eq!(s["arrays"][0]["tasks"], 10);
    assert_eq!(s["arrays"][0]["states"]["FAILED"], 1);
    assert_eq!(s["arrays"][0]["states"]["COMPLETED"], 9);
}
