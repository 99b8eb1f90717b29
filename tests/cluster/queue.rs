//! Queued jobs on the real cluster (issue 8): why a job waits, when it should start, where
//! it could run now. The cluster has `debug` (default, no MaxTime), `short` (MaxTime 10 min)
//! and `restricted` (AllowAccounts=research; swuser1 has that account, swuser2 not), one
//! node with 2 CPUs, ~20 GB and 4 (fake) GPUs.
//!
//! These tests take one lock among themselves: one of them fills the node, which would
//! change what "fits now" means for the others.

use serde_json::Value;
use slurmwatch_tests::*;
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static NODE: Mutex<()> = Mutex::new(());

const WAIT: Duration = Duration::from_secs(90);

fn node_lock() -> std::sync::MutexGuard<'static, ()> {
    NODE.lock().unwrap_or_else(|e| e.into_inner())
}

fn cancel(jobs: &[&Job]) {
    for j in jobs {
        let _ = run("scancel", &[&j.id.to_string()]);
    }
}

fn slurmwatch_as(user: &str, args: &[&str]) -> Output {
    Command::new("runuser")
        .arg("-u")
        .arg(user)
        .arg("--")
        .arg(slurmwatch_bin())
        .args(args)
        .output()
        .expect("run slurmwatch")
}

/// `slurmwatch --once --json JOB` as `user`: exit 1, strict JSON, the sentence on stderr.
fn answer(user: &str, job: &Job) -> Value {
    let o = slurmwatch_as(user, &[&job.id.to_string(), "--once", "--json"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(err.contains("is pending"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let text = stdout(&o);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    assert_eq!(v["schema"], 1, "{text}");
    assert_eq!(v["state"], "pending", "{text}");
    assert_eq!(v["job_id"], job.id.to_string());
    v
}

/// Asks until `ok` holds (the scheduler sets reasons and estimates on its own cycle).
/// Waits (bounded) until no job is queued or running: jobs of tests that finished may still
/// be completing when the exclusive lock is taken.
fn wait_for_idle_node() {
    let end = Instant::now() + Duration::from_secs(120);
    while !stdout(&run("squeue", &["-h", "-o", "%i"]))
        .trim()
        .is_empty()
        && Instant::now() < end
    {
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn answer_until(user: &str, job: &Job, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let end = Instant::now() + WAIT;
    loop {
        let v = answer(user, job);
        if ok(&v) {
            return v;
        }
        assert!(Instant::now() < end, "never {what}: {v:#}");
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn partition<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["pending"]["partitions"]
        .as_array()
        .expect("partitions")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no partition {name}: {v:#}"))
}

fn command_for(job: &Job, name: &str) -> String {
    format!("scontrol update JobId={} Partition={name}", job.id)
}

#[cluster_test]
fn over_short_time_limit_points_to_debug_and_restricted_only_for_research() {
    // Exclusive, on an idle node: these answers depend on what else is queued or running.
    let _p = exclusive_cluster();
    wait_for_idle_node();
    let _n = node_lock();
    // swuser2 (account general): short's MaxTime is 10 min, the job asks 20.
    let j2 = Submit::new("queue-short", "true")
        .arg("-p")
        .arg("short")
        .arg("--time=20")
        .arg("--mem=100M")
        .user(USER2)
        .submit();
    let v = answer_until(USER2, &j2, "PartitionTimeLimit with debug free", |v| {
        v["pending"]["reason"] == "PartitionTimeLimit" && partition(v, "debug")["fits_now"] == true
    });
    let p = &v["pending"];
    assert!(
        p["explanation"].as_str().unwrap().contains("MaxTime"),
        "{v:#}"
    );
    let short = partition(&v, "short");
    assert_eq!(short["obstacle"], "time_limit", "{v:#}");
    assert_eq!(short["fits_now"], false);
    assert_eq!(short["current"], true);
    let debug = partition(&v, "debug");
    assert_eq!(debug["command"], command_for(&j2, "debug"), "{v:#}");
    assert_eq!(p["move_would_help"], true);
    let restricted = partition(&v, "restricted");
    assert_eq!(restricted["accessible"], false, "{v:#}");
    assert_eq!(restricted["obstacle"], "not_accessible");
    assert!(restricted["command"].is_null());
    // Free figures come from the node (2 CPUs, ~20 GB, 4 GPUs at most).
    assert!(debug["free"]["cpus"].as_u64().unwrap() <= 2);
    assert!(debug["free"]["gpus"].as_u64().unwrap() <= 4);
    assert!(debug["free"]["memory_bytes"].as_u64().unwrap() < 21 << 30);

    // swuser1 with the research account: restricted is offered.
    let j1 = Submit::new("queue-short-research", "true")
        .arg("-p")
        .arg("short")
        .arg("--time=20")
        .arg("--mem=100M")
        .arg("--account=research")
        .user(USER1)
        .submit();
    let v = answer_until(USER1, &j1, "PartitionTimeLimit with restricted free", |v| {
        v["pending"]["reason"] == "PartitionTimeLimit"
            && partition(v, "restricted")["fits_now"] == true
    });
    let restricted = partition(&v, "restricted");
    assert_eq!(restricted["accessible"], true, "{v:#}");
    assert_eq!(
        restricted["command"],
        command_for(&j1, "restricted"),
        "{v:#}"
    );
    // Four per refresh, and the history lookup's one sacct call (each answer here is the
    // first of its invocation).
    assert_eq!(v["queried"]["slurm_commands"], 5);
    cancel(&[&j1, &j2]);
}

#[cluster_test]
fn more_memory_than_the_node_has_never_fits_anywhere() {
    // Exclusive, on an idle node: these answers depend on what else is queued or running.
    let _p = exclusive_cluster();
    wait_for_idle_node();
    let _n = node_lock();
    // sbatch refuses 100G outright; a held job is accepted, and released it pends
    // with BadConstraints.
    let j = Submit::new("queue-big", "true")
        .arg("--hold")
        .arg("--mem=100G")
        .user(USER1)
        .submit();
    let o = run("scontrol", &["release", &j.id.to_string()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = answer_until(USER1, &j, "a reason after release", |v| {
        !matches!(
            v["pending"]["reason"].as_str(),
            Some("JobHeldUser" | "None")
        )
    });
    let p = &v["pending"];
    assert_eq!(p["move_would_help"], false, "{v:#}");
    for part in p["partitions"].as_array().unwrap() {
        assert_eq!(part["fits_now"], false, "{v:#}");
        assert!(part["command"].is_null(), "{v:#}");
        if part["accessible"] == true {
            assert_eq!(part["fits_when_empty"], false, "{v:#}");
        }
    }
    let debug = partition(&v, "debug");
    assert_eq!(debug["obstacle"], "memory", "{v:#}");
    assert!(
        debug["obstacle_detail"]
            .as_str()
            .unwrap()
            .contains("never fits"),
        "{v:#}"
    );
    assert!(p["advice"].as_str().unwrap().contains("never run"), "{v:#}");
    cancel(&[&j]);
}

#[cluster_test]
fn behind_a_job_that_fills_the_node_waits_for_resources_with_an_expected_start() {
    // Exclusive: other tests' jobs would queue behind the filler (and time out), and their
    // presence changes this job's pending reason (seen in CI: Priority, not Resources).
    let _p = exclusive_cluster();
    wait_for_idle_node();
    let _n = node_lock();
    let filler = Submit::new("queue-filler", "sleep 120")
        .arg("-c")
        .arg("2")
        .arg("--mem=1G")
        .arg("--time=3")
        .user(USER1)
        .submit();
    filler.wait_running(WAIT);
    let j = Submit::new("queue-behind", "true")
        .arg("-c")
        .arg("1")
        .arg("--mem=100M")
        .arg("--time=2")
        .user(USER1)
        .submit();
    let t = Instant::now();
    let v = answer_until(USER1, &j, "Resources with an expected start", |v| {
        v["pending"]["reason"] == "Resources" && v["pending"]["expected_start"].is_string()
    });
    let waited = t.elapsed();
    let p = &v["pending"];
    assert_eq!(p["queue_position"], 1, "{v:#}");
    assert_eq!(p["queue_partition"], "debug");
    let debug = partition(&v, "debug");
    assert_eq!(debug["current"], true);
    assert_eq!(debug["fits_now"], false, "{v:#}");
    assert_eq!(debug["fits_when_empty"], true, "{v:#}");
    assert!(
        matches!(debug["obstacle"].as_str(), Some("processors" | "nodes")),
        "{v:#}"
    );
    // Every partition shares the one full node: nowhere to move.
    assert_eq!(p["move_would_help"], false, "{v:#}");
    assert!(v["queried"]["seconds"].as_f64().unwrap() < 5.0, "{v:#}");
    eprintln!(
        "queue answer: {} Slurm commands in {} s (the scheduler's estimate appeared after {:.1} s)",
        v["queried"]["slurm_commands"],
        v["queried"]["seconds"],
        waited.as_secs_f64()
    );
    cancel(&[&j, &filler]);
}

#[cluster_test]
fn held_and_dependent_jobs_are_not_advised_to_move() {
    // Exclusive, on an idle node: these answers depend on what else is queued or running.
    let _p = exclusive_cluster();
    wait_for_idle_node();
    let _n = node_lock();
    let held = Submit::new("queue-held", "true")
        .arg("--hold")
        .arg("--mem=100M")
        .user(USER2)
        .submit();
    let dep_arg = format!("--dependency=afterok:{}", held.id);
    let dep = Submit::new("queue-dep", "true")
        .arg(dep_arg.as_str())
        .arg("--mem=100M")
        .user(USER2)
        .submit();
    for (job, reason) in [(&held, "JobHeldUser"), (&dep, "Dependency")] {
        let v = answer_until(USER2, job, reason, |v| v["pending"]["reason"] == reason);
        let p = &v["pending"];
        assert_eq!(p["move_would_help"], false, "{v:#}");
        assert!(
            p["advice"].as_str().unwrap().contains("cannot help"),
            "{v:#}"
        );
        for part in p["partitions"].as_array().unwrap() {
            assert!(part["command"].is_null(), "{v:#}");
        }
        assert!(p["expected_start"].is_null(), "{v:#}");
    }
    // The job picker gives the reason in words. USER2 (not USER1, whom other tests use at the
    // same time) so these two are the user's only jobs and no other is picked (seen in CI).
    let o = slurmwatch_as(USER2, &[]);
    let err = stderr(&o);
    assert!(err.contains("held by its owner"), "{err}");
    assert!(err.contains("waiting for another job"), "{err}");
    cancel(&[&dep, &held]);
}

#[cluster_test]
fn the_dashboard_shows_a_pending_job_and_quits_on_q() {
    // Exclusive, on an idle node: these answers depend on what else is queued or running.
    let _p = exclusive_cluster();
    wait_for_idle_node();
    let _n = node_lock();
    let held = Submit::new("queue-tmux", "true")
        .arg("--hold")
        .arg("--mem=100M")
        .user(USER1)
        .submit();
    let t = Tmux::start(
        &format!("sw-queue-{}", held.id),
        &format!(
            "runuser -u {USER1} -- {} {}",
            slurmwatch_bin().display(),
            held.id
        ),
        120,
        30,
        &held.dir.join("rc"),
    );
    let screen = t.wait_for(
        &["PENDING", "Why:", "Where:"],
        Duration::from_secs(20),
        "the pending view",
    );
    assert!(screen.contains("JobHeldUser"), "{screen}");
    assert!(screen.contains("cannot help"), "{screen}");
    assert_eq!(t.quit(), "0", "exit code after q");
    cancel(&[&held]);
}

/// Joined with history: three recorded runs of a workload used a few MiB; the next run asks
/// 4 GiB while a job holds all but ~1 GiB of the node, so it waits. The answer says that
/// with what its runs used it would fit now on debug, with the command — and the command,
/// run by the job's owner, lets it start.
#[cluster_test]
fn history_says_a_smaller_request_fits_now_and_the_command_works() {
    let _p = exclusive_cluster();
    wait_for_idle_node();
    let _n = node_lock();
    // Workloads collapse digit runs: the tag is letters, so earlier runs of this test are
    // another workload.
    let tag: String = std::process::id()
        .to_string()
        .bytes()
        .map(|b| char::from(b'a' + (b - b'0')))
        .collect();
    for i in 1..=3 {
        let name = format!("hint{tag}-run{i}");
        let r = Submit::new(&name, "sleep 2")
            .arg("--slurmwatch=1")
            .arg("--mem=4G")
            .user(USER2)
            .submit();
        assert_eq!(r.wait(WAIT).state, "COMPLETED", "{}", r.output());
    }
    let real_mb: u64 = stdout(&run("scontrol", &["show", "node", "-o"]))
        .split_whitespace()
        .find_map(|f| f.strip_prefix("RealMemory=")?.parse().ok())
        .expect("RealMemory");
    let filler_mem = format!("--mem={}M", real_mb - 1024);
    let filler = Submit::new("queue-hint-filler", "sleep 120")
        .arg("-c")
        .arg("1")
        .arg(&filler_mem)
        .arg("--time=3")
        .user(USER1)
        .submit();
    // Cancelled however the test ends: a leftover filler would hold the node for 2 minutes.
    let _cancel_filler = CancelOnDrop(filler.id);
    filler.wait_running(WAIT);
    let name = format!("hint{tag}-run4");
    let j = Submit::new(&name, "true")
        .arg("-c")
        .arg("1")
        .arg("--mem=4G")
        .arg("--time=2")
        .user(USER2)
        .submit();
    let _cancel_job = CancelOnDrop(j.id);
    let v = answer_until(USER2, &j, "a memory hint", |v| {
        v["pending"]["reason"] == "Resources"
            && v["pending"]["history_hints"]
                .as_array()
                .is_some_and(|h| h.iter().any(|x| x["resource"] == "memory"))
    });
    let hint = v["pending"]["history_hints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["resource"] == "memory")
        .unwrap()
        .clone();
    assert_eq!(hint["runs"], 3, "{hint:#}");
    assert_eq!(hint["requested"], 4u64 << 30, "{hint:#}");
    // Ground truth: the runs were `sleep 2` — a few MiB each, far under 1 GiB.
    let used = hint["history_used"].as_u64().unwrap();
    assert!(used > 0 && used < 64 << 20, "{hint:#}");
    let suggested = hint["suggested"].as_u64().unwrap();
    assert!(suggested >= used && suggested < 1 << 30, "{hint:#}");
    assert!(
        hint["basis"].as_str().unwrap().contains("recorded"),
        "{hint:#}"
    );
    // debug and short (MaxTime 10 min, the job asks 2) share the node; swuser2 may not use
    // restricted.
    assert_eq!(
        hint["fits_now_in"],
        serde_json::json!(["debug", "short"]),
        "{hint:#}"
    );
    let cmd = hint["command"].as_str().unwrap().to_string();
    assert!(
        cmd.starts_with(&format!("scontrol update JobId={} MinMemoryNode=", j.id)),
        "{cmd}"
    );
    assert!(
        hint["sentence"].as_str().unwrap().contains("would fit now"),
        "{hint:#}"
    );
    // The owner runs the command: the job starts beside the filler.
    let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    let o = Command::new("runuser")
        .args(["-u", USER2, "--", "scontrol"])
        .args(&args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{cmd}: {}", stderr(&o));
    let line = j.wait(WAIT);
    assert_eq!(line.state, "COMPLETED", "{}", j.output());
}
