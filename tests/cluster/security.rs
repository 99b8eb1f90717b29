//! The trust boundary on the real cluster (docs/design.md §7, docs/admin.md "Threat model"): each
//! test performs an attack as a hostile job owner or a second account would, and checks that
//! the victim job's exit code, output and runtime are unchanged, the node is back to idle
//! (never drained) and root did nothing it was steered into.

use slurmwatch_tests::*;
use std::path::Path;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(300);
/// The epilog's stated bound (the plugin's and `slurmwatch-epilog`'s).
use slurmwatch_core::analysis::summary::EPILOG_BOUND;

/// The node takes work again: idle (or mixed/allocated by another test's job), never
/// drained, draining or down.
fn assert_node_in_service() {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let state = stdout(&run("sinfo", &["-h", "-N", "-o", "%T"]));
        let bad = state
            .lines()
            .any(|s| s.contains("drain") || s.contains("down") || s.contains("fail"));
        assert!(!bad, "the node left service: {state}");
        if !state.lines().any(|s| s.contains("completing")) {
            break;
        }
        assert!(Instant::now() < end, "the node stayed COMPLETING: {state}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The slurmd log's lines since `offset` that name job `id` (the job epilog's lines carry no
/// step tag).
fn job_log_lines(offset: u64, id: u32) -> Vec<String> {
    let bytes = std::fs::read(SLURMD_LOG).unwrap_or_default();
    let from = (offset as usize).min(bytes.len());
    String::from_utf8_lossy(&bytes[from..])
        .lines()
        .filter(|l| l.contains(&format!("job {id}")) || l.contains(&format!("[{id}.")))
        .map(String::from)
        .collect()
}

fn uid_of(user: &str) -> u32 {
    stdout(&run("id", &["-u", user])).trim().parse().unwrap()
}

fn as_user(user: &str, args: &[&str]) -> std::process::Output {
    let mut a = vec!["-u", user, "--"];
    a.extend_from_slice(args);
    run("runuser", &a)
}

/// From inside the job, as its owner: truncate, append to, rewrite and remove every spool
/// file of the job while root's sampler has them open and mapped. Every write is refused,
/// slurmstepd lives on to take the last reading, and the owner can still read the live file
/// (the SQLite read-only WAL case) through `slurmwatch --once --json`.
#[cluster_test]
fn a_job_cannot_write_its_spool_files_and_its_step_survives_trying() {
    let _p = shared_plugstack();
    let cli = slurmwatch_bin();
    let script = format!(
        r#"sleep 3
f={SPOOL}/$SLURM_JOB_ID.sqlite
for x in "" -wal -shm; do
  truncate -s 0 "$f$x" 2>/dev/null && echo "TRUNCATED$x"
  {{ echo junk >> "$f$x"; }} 2>/dev/null && echo "APPENDED$x"
  rm -f "$f$x" 2>/dev/null; [ -e "$f$x" ] || echo "REMOVED$x"
done
sqlite3 "$f" "drop view samples" 2>/dev/null && echo REWROTE
mv "$f" "$f.x" 2>/dev/null && echo MOVED
{cli} $SLURM_JOB_ID --once --json > live.json 2> live.err; echo "live rc=$?"
sleep 2
echo done
exit 3"#,
        cli = cli.display()
    );
    let t0 = Instant::now();
    let job = Submit::new("hostile-writes", &script)
        .arg("--slurmwatch=1")
        .user(USER1)
        .submit();
    let line = job.wait(WAIT);
    let took = t0.elapsed();
    assert_eq!(
        (line.state.as_str(), line.exit_code.as_str()),
        ("FAILED", "3:0"),
        "{}",
        job.output()
    );
    let out = job.output();
    assert_eq!(
        out, "live rc=0\ndone\n",
        "a write went through or the live view failed"
    );
    let live: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(job.dir.join("live.json")).unwrap())
            .unwrap_or_else(|e| {
                panic!(
                    "live JSON: {e}: {:?}",
                    std::fs::read_to_string(job.dir.join("live.err"))
                )
            });
    assert_eq!(
        live["job_id"].as_str(),
        Some(job.id.to_string().as_str()),
        "{live}"
    );
    // slurmstepd survived: the sampler took its last reading and stopped normally.
    let lines = job.plugin_lines();
    assert!(
        lines.iter().any(|l| l.contains("step batch: done,")),
        "the step's sampler did not finish: {lines:#?}"
    );
    let r = slurmwatch_core::store::Reader::open(&spool_file(job.id)).unwrap();
    let steps = r.steps().unwrap();
    assert!(
        steps
            .iter()
            .any(|s| s.step == "batch" && s.ended_unix_ms.is_some()),
        "{steps:?}"
    );
    assert!(took < Duration::from_secs(60), "the job took {took:?}");
    assert_node_in_service();
}

/// Root reads a live file while its writer appends — `slurmwatch --once --json` run by root,
/// and an in-process reader opened and closed as fast as it goes (what Prometheus's scrapes of
/// `metrics --listen` and an admin's live view do) — while the job starts `srun` steps, each a
/// second writer on the same file from another slurmstepd. Found on this cluster: the writer's
/// process closed its own descriptors of the `-shm` after the reader grant, which dropped
/// SQLite's lock there; the next root reader then took itself for the first, truncated the
/// `-shm` under the writer's mapping, and the batch slurmstepd died of SIGBUS (job lost, killed
/// at its time limit). Now the job runs to its own exit code, every second has its row, and
/// the samplers end normally.
#[cluster_test]
fn root_readers_of_a_live_file_never_kill_its_writer() {
    let _p = shared_plugstack();
    let script = "sleep 2\nfor i in 1 2 3 4; do srun -n1 sleep 1; sleep 1; done\necho done\nexit 5";
    // -t 2: a writer killed under the readers leaves the job running to its limit.
    let job = Submit::new("root-readers", script)
        .arg("--slurmwatch=1")
        .arg("-t")
        .arg("2")
        .user(USER1)
        .submit();
    job.wait_running(WAIT);
    let file = spool_file(job.id);
    let t0 = Instant::now();
    let (mut opens, mut clis) = (0u32, 0u32);
    while t0.elapsed() < Duration::from_secs(14) {
        if exists(&file) {
            if let Ok(r) = slurmwatch_core::store::Reader::open(&file) {
                let _ = r.steps();
                opens += 1;
            }
        }
        if opens % 20 == 0 {
            let _ = std::process::Command::new(slurmwatch_bin())
                .args([&job.id.to_string(), "--once", "--json"])
                .output();
            clis += 1;
        }
    }
    eprintln!("{opens} in-process opens, {clis} live views as root");
    assert!(opens > 200, "the reader hardly ran: {opens} opens");
    let line = job.wait(WAIT);
    assert_eq!(
        (line.state.as_str(), line.exit_code.as_str()),
        ("FAILED", "5:0"),
        "{}",
        job.output()
    );
    assert_eq!(job.output(), "done\n");
    let lines = job.plugin_lines();
    for step in ["batch", "0", "3"] {
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&format!("step {step}: done,"))),
            "step {step}'s sampler did not finish: {lines:#?}"
        );
    }
    let r = slurmwatch_core::store::Reader::open(&file).unwrap();
    let rows = r.samples(&slurmwatch_core::model::Series::Job).unwrap();
    let span_s = (rows.last().unwrap().t_unix_ms - rows[0].t_unix_ms) as f64 / 1000.0;
    let gaps: Vec<i64> = rows
        .windows(2)
        .map(|w| w[1].t_unix_ms - w[0].t_unix_ms)
        .collect();
    eprintln!(
        "{} job rows over {span_s:.1} s, widest gap {:?} ms",
        rows.len(),
        gaps.iter().max()
    );
    assert!(span_s >= 9.0, "the job series stops early: {span_s} s");
    assert!(
        gaps.iter().all(|&g| g <= 2_500),
        "a second without its row (the writer stalled): {gaps:?}"
    );
    assert_node_in_service();
}

/// A crafted file in the job's place (as an older slurmwatch's user-owned file could have
/// been rewritten): a view over a never-ending recursive CTE, a trigger on the samples table,
/// an extra table. A later step's writer, `job_epilog`, `slurmwatch-epilog` and `slurmwatch
/// report --file` as root each refuse it within their bound and say why; the job runs
/// normally and the node stays in service.
#[cluster_test]
fn crafted_files_are_refused_within_the_bound() {
    let _p = shared_plugstack();
    // A real recording to derive the crafted files from.
    let seed = Submit::new("crafted-seed", "sleep 2")
        .arg("--slurmwatch=1")
        .submit();
    assert_eq!(seed.wait(WAIT).state, "COMPLETED");
    let crafts: [(&str, &str); 3] = [
        (
            "recursive-view",
            "DROP TABLE meta; CREATE VIEW meta AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT 'job_id' AS key, x AS value FROM c;",
        ),
        (
            "trigger",
            "CREATE TRIGGER spin AFTER INSERT ON samples_packed BEGIN SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c); END;",
        ),
        ("extra-table", "CREATE TABLE planted(x); INSERT INTO planted VALUES (1);"),
    ];
    for (name, sql) in crafts {
        // Held, so the crafted file is in place before the job's first step starts.
        let (o, dir) = Submit::new(name, "echo ran; sleep 1; exit 4")
            .arg("--slurmwatch=1")
            .arg("--hold")
            .user(USER1)
            .sbatch();
        assert!(o.status.success(), "{}", stderr(&o));
        let id: u32 = stdout(&o).trim().parse().unwrap();
        let target = spool_file(id);
        std::fs::copy(spool_file(seed.id), &target).unwrap();
        let _ = std::fs::remove_file(format!("{}-wal", target.display()));
        let c = run("sqlite3", &[&target.display().to_string(), sql]);
        assert!(c.status.success(), "{name}: {}", stderr(&c));
        let t0 = Instant::now();
        let job = Job::release(id, dir);
        let line = job.wait(WAIT);
        assert_eq!(
            (line.state.as_str(), line.exit_code.as_str()),
            ("FAILED", "4:0"),
            "{name}"
        );
        assert_eq!(job.output(), "ran\n", "{name}");
        assert_node_in_service();
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{name}: {:?}",
            t0.elapsed()
        );
        let lines = job_log_lines(job.log_offset, id);
        assert!(
            lines
                .iter()
                .any(|l| l.contains("unexpected schema") || l.contains("not opened")),
            "{name}: no refusal logged: {lines:#?}"
        );
        // The epilog binary and the CLI as root, on the same file.
        let spool = target.parent().unwrap().display().to_string();
        let t = Instant::now();
        let e = run(
            &epilog_bin().display().to_string(),
            &["--spool", &spool, &id.to_string()],
        );
        assert!(e.status.success(), "{name}: the epilog must exit 0");
        assert!(
            t.elapsed() < EPILOG_BOUND + Duration::from_secs(2),
            "{name}: {:?}",
            t.elapsed()
        );
        assert!(!stderr(&e).is_empty(), "{name}: the epilog said nothing");
        let t = Instant::now();
        let r = run(
            &slurmwatch_bin().display().to_string(),
            &[
                "report",
                &id.to_string(),
                "--file",
                &target.display().to_string(),
                "--no-sacct",
                "--json",
            ],
        );
        assert_eq!(r.status.code(), Some(2), "{name}: {}", stderr(&r));
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "{name}: {:?}",
            t.elapsed()
        );
        let msg = stderr(&r);
        assert!(
            msg.contains("unexpected schema") && !msg.contains("panicked"),
            "{name}: {msg}"
        );
    }
}

/// A second account squats the victim's archive directory in a shared 1777 base before the
/// victim's first job: a directory of its own (mode 777), a symlink to its own directory,
/// or a FIFO. Each is refused with a log line naming the directory; nothing of the victim's
/// reaches the attacker; the job and the epilog are not held up.
#[cluster_test]
fn a_squatted_archive_directory_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let base = "/tmp/slurmwatch-it/archive-squat";
    let _ = std::fs::remove_dir_all(base);
    std::fs::create_dir_all(base).unwrap();
    std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let _o = PlugstackOverride::new(&format!("spool={SPOOL} archive={base}/%u"));
    let victim_dir = Path::new(base).join(USER1);
    let loot = Path::new(base).join("loot");
    for how in ["dir-777", "symlink", "fifo"] {
        let _ = std::fs::remove_file(&victim_dir);
        let _ = std::fs::remove_dir_all(&victim_dir);
        let _ = std::fs::remove_dir_all(&loot);
        let v = victim_dir.display().to_string();
        let made = match how {
            "dir-777" => {
                as_user(USER2, &["mkdir", &v]).status.success()
                    && as_user(USER2, &["chmod", "777", &v]).status.success()
            }
            "symlink" => {
                as_user(USER2, &["mkdir", "-m", "777", &loot.display().to_string()])
                    .status
                    .success()
                    && as_user(USER2, &["ln", "-s", &loot.display().to_string(), &v])
                        .status
                        .success()
            }
            _ => as_user(USER2, &["mkfifo", "-m", "666", &v])
                .status
                .success(),
        };
        assert!(made, "{how}: the attacker's setup failed");
        let t0 = Instant::now();
        let job = Submit::new("squat", "echo victim; sleep 1")
            .arg("--slurmwatch=1")
            .user(USER1)
            .submit();
        let line = job.wait(WAIT);
        assert_eq!(
            (line.state.as_str(), line.exit_code.as_str()),
            ("COMPLETED", "0:0"),
            "{how}"
        );
        assert_eq!(job.output(), "victim\n", "{how}");
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{how}: {:?}",
            t0.elapsed()
        );
        assert_node_in_service();
        // The summary is in the live file (the epilog went on after the refused copy).
        let lines = job_log_lines(job.log_offset, job.id);
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&v) && l.contains("refused")),
            "{how}: no refusal naming {v}: {lines:#?}"
        );
        // Nothing of the victim's in the squatted place.
        for place in [&victim_dir, &loot] {
            if place.is_dir() {
                let names: Vec<_> = std::fs::read_dir(place)
                    .unwrap()
                    .flatten()
                    .map(|e| e.file_name())
                    .collect();
                assert!(
                    names.is_empty(),
                    "{how}: the victim's copy landed in {}: {names:?}",
                    place.display()
                );
            }
        }
    }
    // Without a squatter the victim's own private directory gets the copy.
    let _ = std::fs::remove_file(&victim_dir);
    let _ = std::fs::remove_dir_all(&victim_dir);
    let job = Submit::new("squat-free", "sleep 1")
        .arg("--slurmwatch=1")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED");
    let node = stdout(&run("hostname", &["-s"])).trim().to_string();
    let copy = victim_dir.join(format!("{}.{node}.sqlite", job.id));
    let end = Instant::now() + Duration::from_secs(30);
    while !copy.exists() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200));
    }
    use std::os::unix::fs::MetadataExt;
    let md = std::fs::metadata(&copy).expect("the archive copy");
    assert_eq!((md.uid(), md.mode() & 0o777), (uid_of(USER1), 0o600));
    let dmd = std::fs::metadata(&victim_dir).unwrap();
    assert_eq!((dmd.uid(), dmd.mode() & 0o777), (uid_of(USER1), 0o700));
    assert!(!as_user(USER2, &["cat", &copy.display().to_string()])
        .status
        .success());
}

/// Files older than `retain_days` are removed at a job's end on the node; others stay.
#[cluster_test]
fn expired_spool_files_are_removed() {
    let _o = PlugstackOverride::new(&format!("spool={SPOOL} retain_days=30"));
    let old = [
        "999001.sqlite",
        "999001.sqlite-wal",
        "999002.alloc",
        "999003.stale-1.sqlite",
    ];
    for n in old {
        let p = Path::new(SPOOL).join(n);
        std::fs::write(&p, b"old").unwrap();
        assert!(
            run("touch", &["-d", "40 days ago", &p.display().to_string()])
                .status
                .success()
        );
    }
    let young = Path::new(SPOOL).join("999004.sqlite");
    std::fs::write(&young, b"young").unwrap();
    assert!(run(
        "touch",
        &["-d", "20 days ago", &young.display().to_string()]
    )
    .status
    .success());
    let keep = Path::new(SPOOL).join("site-notes.txt");
    std::fs::write(&keep, b"not ours").unwrap();
    assert!(run(
        "touch",
        &["-d", "400 days ago", &keep.display().to_string()]
    )
    .status
    .success());
    let job = Submit::new("retention", "true")
        .arg("--slurmwatch=1")
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED");
    let end = Instant::now() + Duration::from_secs(30);
    while old.iter().any(|n| exists(&Path::new(SPOOL).join(n))) && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(200));
    }
    for n in old {
        assert!(!exists(&Path::new(SPOOL).join(n)), "{n} was not removed");
    }
    assert!(
        exists(&young) && exists(&keep),
        "a file that is not expired or not ours was removed"
    );
    std::fs::remove_file(young).unwrap();
    std::fs::remove_file(keep).unwrap();
}

/// A job cannot grow the spool: its own file stops at the cap (a test build lowers it with
/// SLURMWATCH_TEST_MAX_FILE_BYTES), with an event saying so, and the job runs on unharmed.
#[cluster_test]
fn the_file_stops_growing_at_its_cap() {
    let _p = shared_plugstack();
    // Many short steps: each adds step rows, samples and events (~400 B; an empty file's
    // 23 pages hold the first few dozen steps).
    let script = "for i in $(seq 1 120); do srun -Q -n1 true; done; echo steps done";
    let free = Submit::new("cap-free", script)
        .arg("--slurmwatch=1")
        .submit();
    assert_eq!(free.wait(WAIT).state, "COMPLETED");
    let free_bytes = std::fs::metadata(spool_file(free.id)).unwrap().len();
    let small = Submit::new("cap-small", "sleep 1")
        .arg("--slurmwatch=1")
        .submit();
    assert_eq!(small.wait(WAIT).state, "COMPLETED");
    let small_bytes = std::fs::metadata(spool_file(small.id)).unwrap().len();
    assert!(
        free_bytes > small_bytes + 8192,
        "30 steps grew the file only to {free_bytes} B (a 1-s job: {small_bytes} B)"
    );
    let cap = (free_bytes + small_bytes) / 2;
    let cap_s = cap.to_string();
    let job = Submit::new("cap", script)
        .arg("--slurmwatch=1")
        .env("SLURMWATCH_TEST_MAX_FILE_BYTES", &cap_s)
        .submit();
    let line = job.wait(WAIT);
    assert_eq!(
        (line.state.as_str(), line.exit_code.as_str()),
        ("COMPLETED", "0:0")
    );
    assert_eq!(job.output(), "steps done\n");
    let bytes = std::fs::metadata(spool_file(job.id)).unwrap().len();
    // A flush may land past the cap before it is checked, and the end events take a page.
    assert!(
        bytes < free_bytes,
        "capped file {bytes} B, uncapped {free_bytes} B, cap {cap} B"
    );
    assert!(
        bytes <= cap + 16 * 4096,
        "capped file {bytes} B over cap {cap} B"
    );
    let r = slurmwatch_core::store::Reader::open(&spool_file(job.id)).unwrap();
    let events = r.events().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.detail.contains("recording stopped: the file reached")),
        "{events:#?}"
    );
    assert_node_in_service();
}
