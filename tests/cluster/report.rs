//! `slurmwatch report` and the epilog on real jobs: an OOM kill after a steady phase, a
//! page-cache-heavy job, a TIMEOUT, a cancelled job; bad input never touches the file.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use slurmwatch_tests::*;

// Generous: other suites share the 2-core test cluster, so jobs may queue for minutes.
const WAIT: Duration = Duration::from_secs(600);
const MIB: f64 = 1024.0 * 1024.0;

/// Runs the epilog as Slurm would (root, SLURM_JOB_ID), then `report JOB --json`.
fn report_json(job: &Job) -> Value {
    report_after_epilog(job.id, &[])
}

fn finding<'a>(r: &'a Value, code: &str) -> Option<&'a Value> {
    r["findings"].as_array()?.iter().find(|f| f["code"] == code)
}

fn sbatch_value(r: &Value, flag: &str) -> Option<String> {
    r["sbatch"]
        .as_array()?
        .iter()
        .find(|s| s["flag"] == flag)
        .and_then(|s| s["value"].as_str().map(String::from))
}

/// `512M`, `3G` → bytes.
fn mem_value(v: &str) -> f64 {
    let (n, u) = v.split_at(v.len() - 1);
    n.parse::<f64>().unwrap() * if u == "G" { 1024.0 * MIB } else { MIB }
}

/// `[D-]HH:MM:SS` → seconds.
fn time_value(v: &str) -> f64 {
    sacct_duration_seconds(v).unwrap()
}

/// --mem=300M; ~100 MiB steady for 6 s, then a 500 MiB allocation: the report names the
/// kill, its time, and the working set before and at the kill.
// Without task/cgroup nothing enforces --mem (no memory cgroup): no OOM kill to report.
#[cluster_test(Phase::Cgroup)]
fn report_oom_after_steady_phase() {
    let _p = shared_plugstack();
    let script = r#"
python3 - <<'PY'
import time
MiB = 1024 * 1024
a = bytearray(100 * MiB)
for i in range(0, len(a), 4096): a[i] = 1
time.sleep(6)
b = bytearray(500 * MiB)
for i in range(0, len(b), 4096): b[i] = 1
time.sleep(2)
PY
"#;
    let job = Submit::new("rep-oom", script)
        .arg("--slurmwatch=1")
        .arg("--mem=300M")
        .user(USER1)
        .submit();
    let line = job.wait(WAIT);
    assert_eq!(line.state, "OUT_OF_MEMORY", "{}", job.output());
    let r = report_json(&job);
    assert_eq!(r["source"], "recorded_file");
    assert_eq!(r["summary_stored"], true, "the epilog wrote its summary");
    assert_eq!(r["state"], "OUT_OF_MEMORY");
    assert!(r["memory"]["oom_kills"].as_u64().unwrap() >= 1);
    let f = finding(&r, "oom_killed").expect("an oom_killed finding");
    let t = f["facts"]["t_unix_ms"]
        .as_i64()
        .expect("the kill has a time");
    let start = r["job"]["start_unix"].as_i64().unwrap() * 1000;
    let end = r["job"]["end_unix"].as_i64().unwrap() * 1000;
    assert!(
        t >= start + 5000 && t <= end + 2000,
        "kill at {t}, job {start}..{end}"
    );
    let before = f["facts"]["working_set_before_bytes"].as_f64().unwrap() / MIB;
    assert!(
        (95.0..180.0).contains(&before),
        "working set before the kill {before:.1} MiB"
    );
    // At the kill: the sampled working set, or — when the climb beat the 1-s reads — the
    // kernel's peak, reached the 300 MiB limit.
    let at = f["facts"]["working_set_at_kill_bytes"]
        .as_f64()
        .unwrap_or(0.0)
        / MIB;
    let peak = f["facts"]["usage_peak_bytes"].as_f64().unwrap_or(0.0) / MIB;
    assert!(
        at.max(peak) >= 280.0,
        "at the kill: ws {at:.1} MiB, kernel peak {peak:.1} MiB"
    );
    let sentence = f["sentence"].as_str().unwrap();
    assert!(
        sentence.contains("OOM-killed at ") && sentence.contains("steady at"),
        "{sentence}"
    );
    // The advice asks for more than the limit that killed it.
    assert!(mem_value(&sbatch_value(&r, "--mem").unwrap()) > 300.0 * MIB);
}

/// 800 MiB written and read back (page cache) with a small working set: the --mem advice
/// follows the working set, not the kernel's lifetime peak.
// /proc mode has no page-cache figure
#[cluster_test(Phase::Cgroup)]
fn report_mem_advice_follows_working_set_not_cache() {
    let _p = shared_plugstack();
    let script = "dd if=/dev/zero of=big bs=1M count=800 status=none\ncat big > /dev/null\nsleep 3\nrm -f big";
    let job = Submit::new("rep-cache", script)
        .arg("--slurmwatch=1")
        .arg("--mem=2G")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let r = report_json(&job);
    let ws = r["memory"]["peak_working_set_bytes"].as_f64().unwrap();
    let life = r["memory"]["lifetime_peak_bytes"].as_f64().unwrap();
    assert!(life > 700.0 * MIB, "lifetime peak {:.0} MiB", life / MIB);
    let mem = mem_value(&sbatch_value(&r, "--mem").expect("a --mem line"));
    assert!(mem >= ws, "advice {mem} below the working set {ws}");
    // The advice is the working-set rule's, and the lifetime peak's would have been more. How
    // much of the cache counts as working set is the kernel's LRU and its timing: pages
    // written and then read back are promoted to active_file when they reached the LRU before
    // the read (slower under load), and usage − inactive_file keeps those. Quiet: 24 MiB of an
    // 826 MiB peak; a loaded CI run: 421 MiB of 826. So no fixed fraction of the peak is
    // asserted, only that the advice is the working set's and below the peak's.
    let rule = |b: f64| {
        let headroom = 1.0 + slurmwatch_core::analysis::MEM_HEADROOM_PERCENT / 100.0;
        slurmwatch_core::units::mem_flag_bytes((b * headroom) as u64) as f64
    };
    assert!(
        mem == rule(ws) && rule(ws) < rule(life),
        "advice {:.0} MiB: the working set's rule gives {:.0} MiB, the page cache's {:.0} \
         (working set {:.0} MiB, lifetime peak {:.0} MiB)",
        mem / MIB,
        rule(ws) / MIB,
        rule(life) / MIB,
        ws / MIB,
        life / MIB
    );
    assert!(finding(&r, "memory_cache_inflated").is_some());
    assert!(finding(&r, "oom_killed").is_none());
}

/// --time=1 and a job that sleeps: TIMEOUT, seen as hung; the time advice never shrinks.
#[cluster_test]
fn report_timeout_never_shortens_time() {
    let _p = shared_plugstack();
    let job = Submit::new("rep-timeout", "sleep 300")
        .arg("--slurmwatch=5")
        .arg("--time=1")
        .arg("--mem=100M")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "TIMEOUT");
    let r = report_json(&job);
    assert_eq!(r["state"], "TIMEOUT");
    let t = time_value(&sbatch_value(&r, "--time").expect("a --time line"));
    assert!(t >= 60.0, "advice {t} s shorter than the 60 s limit");
    assert!(finding(&r, "timeout_hung").is_some(), "{:#}", r["findings"]);
}

/// Cancelled by root while the owner's job ran.
#[cluster_test]
fn report_cancelled_by_someone_else() {
    let _p = shared_plugstack();
    let job = Submit::new("rep-cancel", "sleep 300")
        .arg("--slurmwatch=1")
        .arg("--mem=100M")
        .user(USER1)
        .submit();
    job.wait_running(WAIT);
    std::thread::sleep(Duration::from_secs(3));
    assert!(run("scancel", &[&job.id.to_string()]).status.success());
    assert_eq!(job.wait(WAIT).state, "CANCELLED");
    let r = report_json(&job);
    let f = finding(&r, "cancelled_by_other").expect("cancelled_by_other");
    assert_eq!(f["facts"]["cancelled_by_uid"], 0);
    assert!(r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["step"] == "batch"));
}

/// (arguments, environment, words the one-sentence error must contain).
type Case<'a> = (Vec<String>, Vec<(&'a str, String)>, &'a str);

fn sha(p: &std::path::Path) -> Vec<u8> {
    std::fs::read(p).unwrap()
}

/// Truncated, corrupt, newer-schema files, an unknown job, sacct missing or hanging: one
/// sentence, exit 2, and the file untouched. The epilog refuses a symlink and exits 0.
#[cluster_test]
fn report_bad_input_is_one_sentence_and_exit_2() {
    let _p = shared_plugstack();
    let job = Submit::new("rep-bad", "sleep 2")
        .arg("--slurmwatch=1")
        .arg("--mem=100M")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED");
    let good = spool_file(job.id);
    let dir = job_dir("rep-bad-files");
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.join("truncated.sqlite");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let corrupt = dir.join("corrupt.sqlite");
    let mut c = bytes.clone();
    for b in c.iter_mut().skip(4096).take(4096) {
        *b = 0xAB;
    }
    std::fs::write(&corrupt, &c).unwrap();
    let newer = dir.join("newer.sqlite");
    std::fs::write(&newer, &bytes).unwrap();
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    let id = job.id.to_string();
    let fake_hang = dir.join("sacct-hang");
    std::fs::write(&fake_hang, "#!/bin/sh\nsleep 60\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake_hang, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cases: Vec<Case> = vec![
        (
            vec![id.clone(), "--file".into(), truncated.display().to_string()],
            vec![],
            "truncated",
        ),
        (
            vec![id.clone(), "--file".into(), corrupt.display().to_string()],
            vec![],
            "damaged",
        ),
        (
            vec![id.clone(), "--file".into(), newer.display().to_string()],
            vec![],
            "newer slurmwatch",
        ),
        (vec!["999999".into()], vec![], "knows no job"),
        (
            vec![id.clone()],
            vec![("SLURMWATCH_SACCT", "/nonexistent/sacct".into())],
            "not installed",
        ),
        (
            vec![id.clone(), "--sacct-timeout".into(), "1".into()],
            vec![("SLURMWATCH_SACCT", fake_hang.display().to_string())],
            "did not answer",
        ),
    ];
    for (args, env, want) in cases {
        let before: Vec<Vec<u8>> = [&truncated, &corrupt, &newer, &good]
            .iter()
            .map(|p| sha(p))
            .collect();
        let mut cmd = Command::new(slurmwatch_bin());
        cmd.arg("report").args(&args);
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let t = std::time::Instant::now();
        let o = cmd.output().unwrap();
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{args:?} took {:?}",
            t.elapsed()
        );
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
            "{err}"
        );
        assert!(err.lines().count() <= 3, "one sentence and a hint: {err}");
        let after: Vec<Vec<u8>> = [&truncated, &corrupt, &newer, &good]
            .iter()
            .map(|p| sha(p))
            .collect();
        assert!(before == after, "{args:?} changed a file");
    }
    // The epilog: a symlink in the spool is refused, the exit status is still 0.
    let link = std::path::Path::new(SPOOL).join("4000000001.sqlite");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&good, &link).unwrap();
    let before = sha(&good);
    let e = Command::new(epilog_bin())
        .arg("4000000001")
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&link);
    assert_eq!(e.status.code(), Some(0));
    assert!(
        stderr(&e).contains("is a symbolic link: not opened"),
        "{}",
        stderr(&e)
    );
    assert_eq!(before, sha(&good), "nothing written through the symlink");
    // No recording: sacct alone, said plainly.
    let plain = Submit::new("rep-plain", "true")
        .arg("--mem=100M")
        .user(USER1)
        .submit();
    plain.wait(WAIT);
    let o = Command::new(slurmwatch_bin())
        .args(["report", &plain.id.to_string()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("#SBATCH --slurmwatch"),
        "{}",
        stdout(&o)
    );
}

/// `report JOB --json` without the epilog step (the plugin's job_epilog already ran it).
fn report_json_only(job: &Job) -> Value {
    let o = Command::new(slurmwatch_bin())
        .args(["report", &job.id.to_string(), "--json"])
        .output()
        .expect("run slurmwatch report");
    assert_eq!(o.status.code(), Some(0), "report failed: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(&o)))
}

/// A job prints a Python traceback ending in `ModuleNotFoundError: No module named 'torch'`
/// to a separate stderr file (`--error=err-%j.txt`, relative to the work dir) and exits 1;
/// another runs a command that does not exist (exit 127). The report finds both logs where
/// Slurm put them and names `module_not_found` (torch), `traceback` and `command_not_found`
/// (with the command). Another user is refused the owner's log.
#[cluster_test]
fn report_reads_the_jobs_own_log() {
    let _p = shared_plugstack();
    let script = r#"
echo "loading data"
cat >&2 <<'PY'
Traceback (most recent call last):
  File "/home/swuser1/proj/train.py", line 3, in <module>
    import torch
ModuleNotFoundError: No module named 'torch'
PY
exit 1
"#;
    let py = Submit::new("rep-log-py", script)
        .arg("--slurmwatch=1")
        .arg("--mem=100M")
        .arg("--error=err-%j.txt")
        .user(USER1)
        .submit();
    let missing = Submit::new(
        "rep-log-127",
        "echo starting\nslurmwatch_no_such_cmd --epochs 3\n",
    )
    .arg("--slurmwatch=1")
    .arg("--mem=100M")
    .user(USER1)
    .submit();
    assert_eq!(py.wait(WAIT).state, "FAILED", "{}", py.output());
    let r = report_json_only(&py);
    let log = &r["log"];
    let files = log["files"].as_array().expect("log.files");
    let err_path = py.dir.join(format!("err-{}.txt", py.id));
    let err = files
        .iter()
        .find(|f| f["stream"] == "stderr")
        .unwrap_or_else(|| panic!("no stderr file: {log:#}"));
    assert_eq!(err["path"], err_path.display().to_string(), "{log:#}");
    assert!(
        err["error"].is_null(),
        "{log:#}\njob: {:#}\nsacct UID: {}",
        r["job"],
        r["sacct"]["job"]["UID"]
    );
    assert!(
        matches!(err["found_by"].as_str(), Some("scontrol" | "submit_line")),
        "{log:#}"
    );
    let out = files.iter().find(|f| f["stream"] == "stdout").unwrap();
    assert_eq!(out["path"], py.dir.join("out.txt").display().to_string());
    let m = finding(&r, "module_not_found").unwrap_or_else(|| panic!("{:#}", r["findings"]));
    assert_eq!(m["facts"]["modules"], serde_json::json!(["torch"]));
    assert_eq!(m["facts"]["source"], "log");
    assert!(m["sentence"].as_str().unwrap().contains("torch"));
    let t = finding(&r, "traceback").expect("traceback");
    assert_eq!(t["facts"]["exception"], "ModuleNotFoundError");
    assert_eq!(t["facts"]["line"], 3);
    let codes: Vec<&str> = log["codes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c.as_str())
        .collect();
    assert_eq!(codes, vec!["module_not_found", "traceback"]);
    // The text report has the section, with the traceback's lines.
    let o = Command::new(slurmwatch_bin())
        .args(["report", &py.id.to_string()])
        .output()
        .unwrap();
    let text = stdout(&o);
    assert!(
        text.contains("FROM THE JOB'S LOG") && text.contains("| ModuleNotFoundError"),
        "{text}"
    );
    // Another user may not read the owner's log through the report (given a readable copy
    // of the recording, since the spool file itself is the owner's only).
    let copy = job_dir("rep-log-other").join("copy.sqlite");
    std::fs::copy(spool_file(py.id), &copy).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = Command::new("runuser")
        .args(["-u", USER2, "--"])
        .arg(slurmwatch_bin())
        .args(["report", &py.id.to_string(), "--json", "--file"])
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    {
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert!(finding(&v, "module_not_found").is_none(), "{:#}", v["log"]);
        assert!(
            v["log"]["files"]
                .as_array()
                .unwrap()
                .iter()
                .all(|f| f["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("only its owner"))),
            "{:#}",
            v["log"]
        );
    }

    let line = missing.wait(WAIT);
    assert_eq!(line.exit_code, "127:0", "{}", missing.output());
    let r = report_json_only(&missing);
    let c = finding(&r, "command_not_found").unwrap_or_else(|| panic!("{:#}", r["findings"]));
    assert_eq!(c["facts"]["exit_code"], 127);
    assert_eq!(
        c["facts"]["commands"],
        serde_json::json!(["slurmwatch_no_such_cmd"]),
        "{c:#}"
    );
    assert!(c["sentence"]
        .as_str()
        .unwrap()
        .contains("`slurmwatch_no_such_cmd`"));
    // One finding, not the exit code's and the log's side by side.
    let n = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "command_not_found")
        .count();
    assert_eq!(n, 1);
    assert_eq!(
        r["log"]["files"][0]["stream"], "stdout+stderr",
        "{:#}",
        r["log"]
    );
}

/// The first of `chromium`, `chromium-browser`, `google-chrome` on PATH (or `$CHROMIUM`).
fn chromium() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(p.into());
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// The HTML report of a real recorded job, rendered by headless Chromium: the screenshot is
/// not blank and shows the charts' coloured series, the console has no errors, and the DOM
/// holds every chart series. Skips (with a message) only when no Chromium is installed
/// (`scripts/deps.sh` installs it).
#[cluster_test]
fn report_html_renders_in_headless_chromium() {
    let _p = shared_plugstack();
    // scripts/deps.sh installs chromium: its absence is a set-up fault, not a skip.
    let Some(chrome) = chromium() else {
        panic!("no chromium on PATH (scripts/deps.sh installs it; or set CHROMIUM)");
    };
    // Two memory phases and some CPU, so every series has something to draw.
    let script = r#"
python3 - <<'PY'
import time
MiB = 1024 * 1024
a = bytearray(40 * MiB)
for i in range(0, len(a), 4096): a[i] = 1
t = time.time()
while time.time() - t < 3: pass
b = bytearray(60 * MiB)
for i in range(0, len(b), 4096): b[i] = 1
time.sleep(3)
PY
"#;
    let job = Submit::new("rep-html", script)
        .arg("--slurmwatch=1")
        .arg("--mem=300M")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let dir = job_dir("rep-html-render");
    let html = dir.join("report.html");
    let o = Command::new(slurmwatch_bin())
        .args(["report", &job.id.to_string(), "--html"])
        .arg(&html)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let png_path = dir.join("shot.png");
    let url = format!("file://{}", html.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
    ];
    let shot = Command::new("timeout")
        .arg("120")
        .arg(&chrome)
        .args(common)
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(["--enable-logging=stderr", "--v=0", "--window-size=1200,900"])
        .arg(format!("--screenshot={}", png_path.display()))
        .arg(&url)
        .output()
        .expect("run chromium");
    let log = stderr(&shot);
    assert!(shot.status.success(), "chromium failed: {log}");
    // The page has no script: any console line (an error, a blocked load) is a fault.
    let console: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect();
    assert!(console.is_empty(), "console messages: {console:#?}");

    let decoder = png::Decoder::new(std::fs::File::open(&png_path).expect("a screenshot"));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a frame");
    assert_eq!((info.width, info.height), (1200, 900));
    let channels = info.color_type.samples();
    assert!(channels >= 3, "{:?}", info.color_type);
    let px = &buf[..info.buffer_size()];
    let mut colours = std::collections::HashSet::new();
    let (mut non_white, mut coloured) = (0usize, 0usize);
    for p in px.chunks_exact(channels) {
        let (r, g, b) = (p[0] as i32, p[1] as i32, p[2] as i32);
        colours.insert((r, g, b));
        if r.min(g).min(b) < 240 {
            non_white += 1;
        }
        // A series line: clearly not grey.
        if (r - g).abs().max((g - b).abs()).max((r - b).abs()) > 60 {
            coloured += 1;
        }
    }
    let total = (info.width * info.height) as usize;
    assert!(colours.len() > 16, "{} colours: blank page", colours.len());
    assert!(
        non_white * 100 > total,
        "{non_white} of {total} pixels drawn"
    );
    assert!(
        coloured > 300,
        "{coloured} coloured pixels: no chart series drawn"
    );

    let dom = Command::new("timeout")
        .arg("120")
        .arg(&chrome)
        .args(common)
        .arg(format!(
            "--user-data-dir={}",
            dir.join("profile2").display()
        ))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .expect("run chromium --dump-dom");
    let dom = stdout(&dom);
    for id in [
        "series-working-set",
        "series-cache",
        "series-limit",
        "series-cores",
        "series-allocated",
        "step-batch",
    ] {
        assert!(
            dom.contains(&format!("id=\"{id}\"")),
            "no {id} in the rendered DOM"
        );
    }
    assert!(dom.contains("<polyline"), "no series drawn");
}

/// The report's sacct runs with the TCP shim preloaded (core/src/slurm/quickack.rs; it takes
/// the delayed-acknowledgement stalls out of slurmdbd requests), found next to the CLI, and
/// answers exactly what it answers without it: the same report, field for field.
#[cluster_test]
fn report_sacct_runs_with_the_tcp_shim_and_answers_the_same() {
    let _p = shared_plugstack();
    let job = Submit::new("quickack", "echo shim; sleep 1")
        .arg("--slurmwatch=1")
        .submit();
    let line = job.wait(WAIT);
    assert_eq!(line.state, "COMPLETED");
    let dir = job_dir("quickack");
    let log = dir.join("preload");
    let sacct = dir.join("sacct");
    let real = stdout(&run("sh", &["-c", "command -v sacct"]));
    std::fs::write(
        &sacct,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$LD_PRELOAD\" >> {}\nexec {} \"$@\"\n",
            log.display(),
            real.trim()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sacct, std::fs::Permissions::from_mode(0o755)).unwrap();
    let report = |quickack: &str| -> Value {
        let o = Command::new(slurmwatch_bin())
            .args(["report", &job.id.to_string(), "--json", "--no-log"])
            .env("SLURMWATCH_SACCT", &sacct)
            .env("SLURMWATCH_QUICKACK", quickack)
            .env_remove("LD_PRELOAD")
            .output()
            .expect("run slurmwatch report");
        assert_eq!(o.status.code(), Some(0), "report failed: {}", stderr(&o));
        serde_json::from_str(&stdout(&o)).unwrap()
    };
    let with = report("1");
    let without = report("0");
    assert_eq!(with, without, "the shim changed sacct's answer");
    // Next to the CLI (the host's build), or in its ../lib/slurmwatch (an install's layout:
    // the VM tier's guests).
    let bin = slurmwatch_bin();
    let dir = bin.parent().unwrap();
    let shim = [
        dir.join("libslurmwatch_quickack.so"),
        dir.join("../lib/slurmwatch/libslurmwatch_quickack.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("the shim beside the CLI");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!("{}\n\n", shim.display()),
        "one sacct call each: the first with the shim, the second (SLURMWATCH_QUICKACK=0) without"
    );
}

/// The ledger: CPU allocated, used and idle from the job's own counters; on cgroup v1 (the
/// host) the stalls said to be unknowable (v1 keeps no PSI), never a 0; on v2 (the VM tier's
/// guests) every stall a number (cgroup_v2.rs checks their values against the kernel's).
#[cluster_test(Phase::Cgroup)]
fn report_ledger_counts_core_time_and_stalls_where_the_kernel_keeps_them() {
    let _p = shared_plugstack();
    let script = "python3 -c \"import time\nt = time.time()\nwhile time.time() - t < 4: pass\"";
    let job = Submit::new("rep-ledger", script)
        .arg("--slurmwatch=1")
        .arg("-c")
        .arg("2")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let r = report_json(&job);
    let l = &r["ledger"];
    let num = |k: &str| {
        l[k].as_f64()
            .unwrap_or_else(|| panic!("ledger.{k} is not a number: {l:#}"))
    };
    assert_eq!(num("cores_allocated"), 2.0, "{l:#}");
    // Exactly the figures it is made of: the summary's CPU total and span.
    assert_eq!(
        num("core_seconds_used"),
        r["cpu"]["usage_seconds_total"].as_f64().unwrap()
    );
    let wall = num("wall_seconds");
    assert!((4.0..30.0).contains(&wall), "{l:#}");
    assert!(
        (num("core_seconds_allocated") - 2.0 * wall).abs() < 1e-6,
        "{l:#}"
    );
    let used = num("core_seconds_used");
    // A core burnt for 4 s; the machine's other work may take some of it.
    assert!(used > 1.0, "{l:#}");
    assert!((num("core_seconds_idle") - (2.0 * wall - used).max(0.0)).abs() < 1e-6);
    let v2 = cgroup_v2();
    for (k, v) in l["stall_seconds"].as_object().unwrap() {
        if v2 {
            assert!(v.as_f64().is_some_and(|s| s >= 0.0), "stall {k}: {v}");
        } else {
            assert!(
                v.is_null(),
                "stall {k} on cgroup v1 must be unknown, not {v}"
            );
        }
    }
    let why = l["stalls_unavailable"].as_str();
    if v2 {
        assert_eq!(why, None, "{l:#}");
    } else {
        assert!(why.unwrap_or_default().contains("cgroup v1"), "{l:#}");
    }
    let o = Command::new(slurmwatch_bin())
        .args(["report", &job.id.to_string(), "--no-log"])
        .output()
        .expect("run slurmwatch report");
    let text = stdout(&o);
    assert!(
        text.contains("WHERE THE ALLOCATION WENT")
            && text.contains("stalls: not available: cgroup v1 keeps no pressure stall") != v2,
        "{text}"
    );
}
