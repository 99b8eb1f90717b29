//! `slurmwatch [JOB]` on the real cluster: `--once --json` against a running job checked
//! against the job's own cgroup counters, the dashboard driven in tmux, and bad input.

use serde_json::Value;
use slurmwatch_tests::*;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

// Generous: other tests' jobs may hold the 2-core node for a minute or more.
const WAIT: Duration = Duration::from_secs(300);

/// A job that burns two cores for 6 s, then holds 300 MiB and idles: once it idles its CPU
/// counter and working set stand still, so "the same moment" is any moment after that.
const BURN_THEN_HOLD: &str = r#"
burn() { local end=$((SECONDS + $1)); while ((SECONDS < end)); do :; done; }
burn 6 & burn 6 &
wait
python3 -c "
import time
a = bytearray(300 * 1024 * 1024)
for i in range(0, len(a), 4096): a[i] = 1
open('holding', 'w').write('1')
time.sleep(90)
"
"#;

/// What the test expects of `--once --json` (its own structs, not the library's).
#[derive(Debug)]
struct Doc {
    schema: u64,
    job_id: String,
    source: String,
    state: String,
    usage_seconds_total: f64,
    cores_allocated: u64,
    effective_cores: Option<f64>,
    working_set_bytes: f64,
    limit_bytes: f64,
    peak_working_set_bytes: Option<f64>,
    guard: String,
}

fn parse_doc(text: &str) -> Doc {
    let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    let num = |p: &str| v.pointer(p).and_then(Value::as_f64);
    let s = |p: &str| {
        v.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("{p} missing: {text}"))
            .to_string()
    };
    Doc {
        schema: v["schema"].as_u64().expect("schema"),
        job_id: s("/job_id"),
        source: s("/source"),
        state: s("/state"),
        usage_seconds_total: num("/cpu/usage_seconds_total").expect("cpu seconds"),
        cores_allocated: v
            .pointer("/cpu/cores_allocated")
            .and_then(Value::as_u64)
            .expect("cores"),
        effective_cores: num("/cpu/effective_cores"),
        working_set_bytes: num("/memory/working_set_bytes").expect("working set"),
        limit_bytes: num("/memory/limit_bytes").expect("limit"),
        peak_working_set_bytes: num("/memory/peak_working_set_bytes"),
        guard: s("/memory/guard"),
    }
}

fn slurmwatch(args: &[&str]) -> Output {
    Command::new(slurmwatch_bin())
        .args(args)
        .output()
        .expect("run slurmwatch")
}

fn slurmwatch_as(user: &str, args: &[&str]) -> Output {
    slurmwatch_as_env(user, &[], args)
}

/// As `user`, with `env` set (through env(1): runuser keeps only part of the environment).
fn slurmwatch_as_env(user: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new("runuser")
        .args(["-u", user, "--", "env"])
        .args(env.iter().map(|(k, v)| format!("{k}={v}")))
        .arg(slurmwatch_bin())
        .args(args)
        .output()
        .expect("run slurmwatch")
}

fn cgroup_cpu_seconds(job: u32) -> f64 {
    JobCgroup::of(job).cpu_seconds()
}

fn cgroup_working_set(job: u32) -> f64 {
    JobCgroup::of(job).working_set_bytes()
}

/// Submits BURN_THEN_HOLD and waits until it holds its memory (and the plugin, when asked,
/// has stored two rows since).
fn holding_job(name: &str, record: bool) -> Job {
    let mut s = Submit::new(name, BURN_THEN_HOLD)
        .arg("--cpus-per-task=2")
        .arg("--mem=1G")
        .arg("--time=5")
        .user(USER1);
    if record {
        s = s.arg("--slurmwatch=1");
    }
    let job = s.submit();
    job.wait_running(WAIT);
    let end = Instant::now() + WAIT;
    while !job.dir.join("holding").exists() {
        assert!(
            Instant::now() < end,
            "job {} never reached its hold",
            job.id
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The last two stored rows must both be after the hold began: rows come every 1 s and
    // are committed at most 1 s late, so 2.5 s could still straddle the page-touching loop
    // (seen once: 0.55 cores). 4 s cannot.
    std::thread::sleep(Duration::from_millis(4000));
    job
}

fn cancel(job: &Job) {
    let _ = run("scancel", &[&job.id.to_string()]);
}

fn check_against_cgroup(job: &Job, source: &str) {
    check_against_cgroup_env(job, source, &[]);
}

fn check_against_cgroup_env(job: &Job, source: &str, env: &[(&str, &str)]) {
    let id = job.id.to_string();
    let before = cgroup_cpu_seconds(job.id);
    let o = slurmwatch_as_env(USER1, env, &[&id, "--once", "--json"]);
    let after = cgroup_cpu_seconds(job.id);
    let ws_truth = cgroup_working_set(job.id);
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(&o));
    let d = parse_doc(&stdout(&o));
    assert_eq!(d.schema, 1);
    assert_eq!(d.job_id, id);
    assert_eq!(d.source, source);
    assert_eq!(d.state, "running");
    assert_eq!(d.cores_allocated, 2);
    assert_eq!(d.limit_bytes, (1u64 << 30) as f64);
    assert_eq!(d.guard, "ok");
    let truth = (before + after) / 2.0;
    // Two burners for 6 s: about 12 CPU-s on an idle node, less on a busy one.
    assert!(
        truth > 1.0,
        "the job burnt too little CPU to compare: {truth}"
    );
    assert!(
        (d.usage_seconds_total - truth).abs() / truth <= 0.02,
        "CPU {:.3} s vs cgroup {:.3}..{:.3} s",
        d.usage_seconds_total,
        before,
        after
    );
    assert!(
        (d.working_set_bytes - ws_truth).abs() / ws_truth <= 0.05,
        "working set {} vs cgroup {}",
        d.working_set_bytes,
        ws_truth
    );
    // Idle now: far below the two cores it burnt, but a rate, not null.
    let cores = d.effective_cores.expect("a rate from two readings");
    assert!((0.0..0.5).contains(&cores), "idle job at {cores} cores");
    assert!(d.peak_working_set_bytes.unwrap_or(0.0) >= d.working_set_bytes * 0.95);
}

// the cgroup counters are the reference here
#[cluster_test(Phase::Cgroup)]
fn once_json_matches_the_cgroup_when_the_plugin_records() {
    let _p = shared_plugstack();
    let job = holding_job("cli-json", true);
    assert!(spool_file(job.id).exists(), "the plugin wrote no file");
    check_against_cgroup(&job, "plugin_file");
    // The recorded peak covers the whole job: the burn's two cores are in it.
    let o = slurmwatch_as(USER1, &[&job.id.to_string(), "--once", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let peak = v["cpu"]["peak_effective_cores"].as_f64().unwrap();
    // The peak of 1-s rates is at least the burn's average (its CPU over its ~6 s; on a busy
    // machine that is well below 2) and at most the 2 allocated cores.
    let burn_average = cgroup_cpu_seconds(job.id) / 6.5;
    assert!(
        peak >= burn_average * 0.9 && peak <= 2.1,
        "peak effective cores {peak} vs burn average {burn_average:.2}"
    );
    assert_eq!(v["peaks_cover"], "whole_job");
    cancel(&job);
}

#[cluster_test(Phase::Cgroup)]
fn once_json_reads_directly_when_the_plugin_is_not_recording() {
    let _p = shared_plugstack();
    let job = holding_job("cli-direct", false);
    assert!(!spool_file(job.id).exists());
    check_against_cgroup(&job, "direct");
    cancel(&job);
}

#[cluster_test(Phase::Cgroup)]
fn once_json_through_the_srun_hop_matches_the_cgroup() {
    let _p = shared_plugstack();
    // Not recorded, and the hop forced although the node is this machine: the inner run
    // reads the cgroup directly on the node, inside the job, and marks its answer.
    let job = holding_job("cli-hop", false);
    let t = Instant::now();
    check_against_cgroup_env(&job, "srun_hop", &[("SLURMWATCH_SOURCE", "srun_hop")]);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(30), "the hop took {took:?}");
    eprintln!("srun hop --once --json: {took:?}");
    // The hop ran as a step of the job named slurmwatch, and is gone.
    let steps = stdout(&run(
        "squeue",
        &["-h", "-s", "-j", &job.id.to_string(), "-o", "%j"],
    ));
    assert!(
        !steps.contains("slurmwatch"),
        "hop step still running: {steps}"
    );
    cancel(&job);
}

#[cluster_test(Phase::Cgroup)]
fn sstat_summary_is_labelled_lifetime_totals_and_plausible() {
    let _p = shared_plugstack();
    let job = holding_job("cli-sstat", false);
    let id = job.id.to_string();
    let env = [("SLURMWATCH_SOURCE", "sstat")];
    let cpu_truth = cgroup_cpu_seconds(job.id);
    let ws_truth = cgroup_working_set(job.id);
    let o = slurmwatch_as_env(USER1, &env, &[&id, "--once", "--json"]);
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(&o));
    let text = stdout(&o);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["source"], "sstat_summary", "{text}");
    assert_eq!(v["job_id"], id.as_str());
    assert_eq!(v["state"], "running");
    assert_eq!(v["peaks_cover"], "running_steps");
    assert!(v["sstat_note"].as_str().unwrap().contains("not live"));
    // No live figure: each null with its reason.
    for (key, why) in [
        (
            "/cpu/effective_cores",
            "sstat gives lifetime totals, not a rate",
        ),
        (
            "/cpu/peak_effective_cores",
            "sstat gives lifetime totals, not a rate",
        ),
        (
            "/memory/working_set_bytes",
            "sstat has no page-cache-free figure",
        ),
        (
            "/memory/peak_working_set_bytes",
            "sstat has no page-cache-free figure",
        ),
    ] {
        assert_eq!(v.pointer(key), Some(&Value::Null), "{key}: {text}");
        assert_eq!(
            v.pointer(&format!("{key}_reason")).and_then(Value::as_str),
            Some(why),
            "{key}: {text}"
        );
    }
    assert_eq!(v["memory"]["guard"], Value::Null);
    assert_eq!(v["cpu"]["cores_allocated"], 2);
    assert_eq!(v["memory"]["limit_bytes"], 1u64 << 30);
    // sstat's own figures, under their own keys, plausible against the cgroup.
    let rss = v["memory"]["sstat_max_rss_bytes"]
        .as_f64()
        .unwrap_or_else(|| panic!("no MaxRSS: {text}"));
    assert!(
        rss >= ws_truth * 0.5 && rss <= (1u64 << 30) as f64,
        "MaxRSS {rss} vs cgroup working set {ws_truth}"
    );
    let cpu = v["cpu"]["sstat_cpu_seconds_total"]
        .as_f64()
        .unwrap_or_else(|| panic!("no CPU total: {text}"));
    assert!(
        cpu >= cpu_truth * 0.5 && cpu <= cpu_truth * 1.05 + 0.5,
        "sstat CPU {cpu} s vs cgroup {cpu_truth} s"
    );
    let steps: Vec<&str> = v["sstat_steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["step_id"].as_str())
        .collect();
    assert!(steps.contains(&format!("{id}.batch").as_str()), "{steps:?}");
    eprintln!("sstat: MaxRSS {rss} B (cgroup working set {ws_truth} B), CPU {cpu} s (cgroup {cpu_truth} s)");
    // CSV: the live columns empty, sstat's at the end.
    let o = slurmwatch_as_env(USER1, &env, &[&id, "--once"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = stdout(&o);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(lines[0].ends_with(",sstat_cpu_seconds_total,sstat_max_rss_bytes,sstat_max_rss_node"));
    assert!(lines[1].contains(",sstat_summary,running,,2,,,,"), "{csv}");
    assert!(stderr(&o).contains("not live readings"), "{}", stderr(&o));
    // A source that does not exist is bad usage.
    let o = slurmwatch_as_env(USER1, &[("SLURMWATCH_SOURCE", "bogus")], &[&id, "--once"]);
    expect(&o, 2, "names no source");
    cancel(&job);
}

#[cluster_test]
fn once_csv_is_a_header_and_one_row() {
    let _p = shared_plugstack();
    let job = Submit::new("=cmd|' /C calc'!A0", "sleep 60")
        .arg("--slurmwatch=1")
        .user(USER1)
        .submit();
    job.wait_running(WAIT);
    std::thread::sleep(Duration::from_secs(3));
    let o = slurmwatch_as(USER1, &[&job.id.to_string(), "--once"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("reading_unix_ms,job_id,job_name,source"));
    assert!(
        lines[1].contains(",'=cmd|' /C calc'!A0,plugin_file,running,"),
        "{text}"
    );
    cancel(&job);
}

/// `--log` on a job recorded every second writes one line per stored job row: the same
/// times as the file's rows, in order, none twice and none missing (issue 39: the 24.11
/// guest got 7 lines in 12 s, the rows committed between two looks lost).
#[cluster_test]
fn log_writes_one_line_per_stored_row() {
    let _p = shared_plugstack();
    let job = Submit::new("cli-log", "burn() { local end=$((SECONDS + $1)); while ((SECONDS < end)); do :; done; }\nburn 4\nsleep 8\n")
        .arg("--slurmwatch=1")
        .user(USER1)
        .submit();
    job.wait_running(WAIT);
    // The plugin's file, not direct readings (the watch reads the cgroup when there is no file
    // yet); its first rows are written from the start whenever the log begins.
    let end = Instant::now() + WAIT;
    while !spool_file(job.id).exists() {
        assert!(Instant::now() < end, "job {} wrote no file", job.id);
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    let out = job.dir.join("run.jsonl");
    let id = job.id.to_string();
    let out_s = out.to_string_lossy();
    // Runs until the job ends (its end row or Slurm's word).
    let o = slurmwatch_as(USER1, &[&id, "--log", &out_s]);
    assert!(o.status.success(), "exit {:?}: {}", o.status, stderr(&o));
    let line = job.wait(WAIT);
    assert_eq!(line.state, "COMPLETED", "{}", job.output());
    let stored: Vec<i64> = recorded(job.id, &slurmwatch_core::model::Series::Job)
        .iter()
        .map(|r| r.t_unix_ms)
        .collect();
    let text = std::fs::read_to_string(&out).expect("the log");
    let logged: Vec<i64> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("a JSON line");
            v["reading_unix_ms"].as_i64().expect("a reading time")
        })
        .collect();
    assert!(
        stored.len() >= 10,
        "a 12 s job at 1 s: {} rows",
        stored.len()
    );
    assert_eq!(logged, stored, "one line per stored row, in order, once");
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(last["state"], "ended", "{last}");
    assert_eq!(last["source"], "plugin_file", "{last}");
}

fn expect(o: &Output, code: i32, words: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert!(err.contains(words), "expected {words:?} in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(stdout(o).is_empty(), "stdout on failure: {}", stdout(o));
}

#[cluster_test]
fn bad_input_gets_one_sentence_and_the_documented_code() {
    let _p = shared_plugstack();
    // Unknown job.
    expect(
        &slurmwatch(&["999999", "--once"]),
        1,
        "Slurm knows no job 999999",
    );
    // Not a job id at all.
    expect(&slurmwatch(&["12x", "--once"]), 2, "is not a job id");
    // Another user's job.
    let theirs = Submit::new("cli-theirs", "sleep 60").user(USER1).submit();
    theirs.wait_running(WAIT);
    expect(
        &slurmwatch_as(USER2, &[&theirs.id.to_string(), "--once", "--json"]),
        1,
        "belongs to swuser1",
    );
    cancel(&theirs);
    // An ended job.
    let done = Submit::new("cli-ended", "true").user(USER1).submit();
    done.wait(WAIT);
    expect(
        &slurmwatch_as(USER1, &[&done.id.to_string(), "--once"]),
        1,
        "has ended",
    );
    // A pending job (CSV: nothing on stdout; --json prints the queue answer, tests/cluster/queue.rs).
    let later = Submit::new("cli-pending", "true")
        .arg("--begin=now+3600")
        .user(USER1)
        .submit();
    expect(
        &slurmwatch_as(USER1, &[&later.id.to_string(), "--once"]),
        1,
        "is pending",
    );
    cancel(&later);
    // A corrupt file.
    let dir = job_dir("cli-corrupt");
    let bad = dir.join("bad.sqlite");
    std::fs::write(&bad, b"SQLite format 3\0 but nothing else").unwrap();
    expect(
        &slurmwatch(&["--file", bad.to_str().unwrap(), "--once"]),
        2,
        "not an SQLite database",
    );
    // No Slurm on PATH.
    let o = Command::new(slurmwatch_bin())
        .args(["12345", "--once"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    expect(&o, 2, "squeue is not on PATH");
}

#[cluster_test]
fn dashboard_in_tmux_shows_the_job_and_quits_on_q() {
    let _p = shared_plugstack();
    let job = Submit::new("cli-tmux", "sleep 90")
        .arg("--slurmwatch=1")
        .user(USER1)
        .submit();
    job.wait_running(WAIT);
    std::thread::sleep(Duration::from_secs(2));
    let t = Tmux::start(
        &format!("sw-cli-{}", job.id),
        &format!(
            "runuser -u {USER1} -- {} {}",
            slurmwatch_bin().display(),
            job.id
        ),
        100,
        30,
        &job.dir.join("rc"),
    );
    let want = format!("job {}", job.id);
    let screen = t.wait_for(
        &[&want, "working set", "cores in use"],
        Duration::from_secs(15),
        "the dashboard",
    );
    assert!(screen.contains("CPU") && screen.contains("MEM"), "{screen}");
    assert!(screen.contains("recorded by the plugin"), "{screen}");
    assert_eq!(t.quit(), "0", "exit code after q");
    cancel(&job);
}

/// A job prints a tqdm bar whose count follows the wall clock at exactly 10 it/s, redrawn
/// every 0.1 s. While it runs, `--once --json` as its user finds the log where Slurm says it
/// goes, places the bar by the sizes the recorder noted, and gives a usual (median) rate
/// within 10 % of 10 it/s, from tqdm; the dashboard shows its rate line.
#[cluster_test(Phase::Cgroup)]
fn once_json_gives_the_running_jobs_throughput_from_its_log() {
    let _p = shared_plugstack();
    let script = r#"python3 - <<'PY'
import sys, time
start = time.time()
while time.time() - start < 90:
    e = time.time() - start
    sys.stderr.write("\rtrain: %d/100000 [%02d:%02d<00:00, 10.00it/s]" % (int(e * 10), e // 60, e % 60))
    sys.stderr.flush()
    time.sleep(0.1)
PY"#;
    let job = Submit::new("cli-throughput", script)
        .arg("--slurmwatch=1")
        .arg("--time=5")
        .user(USER1)
        .submit();
    job.wait_running(WAIT);
    let id = job.id.to_string();
    let end = Instant::now() + WAIT;
    let t = loop {
        // Long enough for a dozen rates of 1-s rows.
        std::thread::sleep(Duration::from_secs(15));
        let o = slurmwatch_as(USER1, &[&id, "--once", "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let t = v["throughput"].clone();
        let points = t["points"].as_array().map_or(0, Vec::len);
        if points >= 10 || Instant::now() > end {
            break t;
        }
    };
    assert_eq!(
        (t["tool"].as_str(), t["unit"].as_str()),
        (Some("tqdm"), Some("it/s")),
        "{t:#}"
    );
    let mut rates: Vec<f64> = t["points"]
        .as_array()
        .expect("points[]")
        .iter()
        .filter_map(|p| p["per_second"].as_f64())
        .collect();
    assert!(rates.len() >= 10, "{t:#}");
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    eprintln!(
        "throughput: median {median:.3} it/s of {} rates (true 10 it/s)",
        rates.len()
    );
    assert!((median - 10.0).abs() <= 1.0, "median {median} it/s: {t:#}");
    // The dashboard says it under WHERE IT WENT.
    let tmux = Tmux::start(
        &format!("sw-rate-{}", job.id),
        &format!("runuser -u {USER1} -- {} {id}", slurmwatch_bin().display()),
        120,
        44,
        &job.dir.join("rc"),
    );
    let screen = tmux.wait_for(
        &["rate    tqdm", "it/s · usually", "(from its stdout+stderr)"],
        Duration::from_secs(20),
        "the dashboard's throughput line",
    );
    assert!(!screen.contains("slowed  "), "a steady bar: {screen}");
    assert_eq!(tmux.quit(), "0", "exit code after q");
    cancel(&job);
}
