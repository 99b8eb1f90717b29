//! History and sizing (issue 7) on generated sacct histories served by a fake `sacct`, and
//! hostlists against what `scontrol` (Slurm 22.05.8) printed, captured in
//! fixtures/slurm/hostlist.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use slurmwatch_core::history::{self, Analysis, Verdict};
use slurmwatch_core::slurm::sacct::{self, Query, Window};
use slurmwatch_core::slurm::{hostlist, units};

use history::fixture::{self as gen, Job, T0};

/// A fake `sacct` in a tempdir that prints `text` (split by [`sacct::DELIMITER`]) with the
/// delimiter it is asked for (and logs its arguments).
fn fake_sacct(text: &str) -> (tempfile::TempDir, PathBuf) {
    fake_sacct_split(text, sacct::DELIMITER)
}

/// [`fake_sacct`] of a `text` split by `delimiter`.
fn fake_sacct_split(text: &str, delimiter: &str) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let answer = d.path().join("history.txt");
    std::fs::write(&answer, text).unwrap();
    let p = d.path().join("sacct");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\necho \"$*\" >> {0}/args.log\n{1}",
            d.path().display(),
            gen::replay(&answer, delimiter)
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    (d, p)
}

fn window(days: i64) -> Window {
    Window {
        since_unix: T0 - 3600,
        until_unix: T0 + days * 86400,
        users: vec!["alice".into()],
        ..Window::default()
    }
}

/// Through the fake sacct, as the CLI does it.
fn analyse(jobs: &[Job]) -> Analysis {
    let (_d, p) = fake_sacct(&gen::text(jobs, T0, 1000));
    let q = Query {
        program: p,
        timeout: Duration::from_secs(10),
        ..Query::default()
    };
    let b = q.window(&window(1)).unwrap();
    assert_eq!(b.skipped_lines, 0);
    let (runs, unfinished) = history::runs_from(&b.records);
    assert_eq!(unfinished, 0);
    history::analyse(runs)
}

fn advice<'a>(a: &'a Analysis, workload: &str, flag: &str) -> &'a history::Advice {
    a.workloads
        .iter()
        .find(|w| w.name == workload)
        .unwrap_or_else(|| panic!("no workload {workload}"))
        .advice
        .iter()
        .find(|x| x.flag == flag)
        .unwrap_or_else(|| panic!("no {flag} advice"))
}

#[test]
fn seven_minute_margin_raises_time_with_p95_and_longest() {
    let jobs: Vec<Job> = (0..10)
        .map(|i| Job {
            elapsed: 3000 + i * 20, // 50:00 … 53:00 of a 60-min limit
            ..Job::new(&format!("s{}e{}", i % 3 + 1, 20 + i))
        })
        .collect();
    let a = analyse(&jobs);
    let w = &a.workloads[0];
    assert_eq!(w.name, "s#e#");
    assert_eq!(w.runs, 10);
    assert_eq!(w.names_covered, 10);
    let t = advice(&a, "s#e#", "--time");
    assert_eq!(t.verdict, Verdict::Raise, "{t:?}");
    assert!(t.evidence.contains("p95 53 min 00 s"), "{}", t.evidence);
    assert!(t.evidence.contains("longest 53 min 00 s"), "{}", t.evidence);
    assert_eq!(t.current.as_deref(), Some("01:00:00"));
    assert_eq!(t.suggestion.as_deref(), Some("01:10:00"));
    assert_eq!(t.sbatch.as_deref(), Some("#SBATCH --time=01:10:00"));
    // A 4-s job under a 10-min limit is not "too tight" for want of a 10-min margin.
    let quick: Vec<Job> = (0..5)
        .map(|i| Job {
            elapsed: 4,
            limit_min: 10,
            ..Job::new(&format!("quick{i}"))
        })
        .collect();
    let a = analyse(&quick);
    let t = advice(&a, "quick#", "--time");
    assert_eq!(t.verdict, Verdict::Ok, "{t:?}");
    assert_eq!(t.suggestion.as_deref(), Some("00:10:00"));
}

#[test]
fn timeout_heavy_workload_never_gets_a_lower_time() {
    // A 4-h limit; two runs finished in 20 min, eight hit the limit still computing.
    let mut jobs: Vec<Job> = (0..2)
        .map(|i| Job {
            elapsed: 1200,
            limit_min: 240,
            ..Job::new(&format!("sim{i}"))
        })
        .collect();
    jobs.extend((0..8).map(|i| Job {
        state: "TIMEOUT".into(),
        exit: "0:15".into(),
        elapsed: 240 * 60 + 30,
        limit_min: 240,
        cpu_s: 4.0 * 240.0 * 60.0 * 0.9,
        ..Job::new(&format!("sim{}", i + 2))
    }));
    let a = analyse(&jobs);
    let t = advice(&a, "sim#", "--time");
    assert_ne!(t.verdict, Verdict::Lower);
    assert_eq!(t.verdict, Verdict::Raise, "{t:?}");
    assert_eq!(
        t.suggestion.as_deref(),
        Some("08:00:00"),
        "the 4-h limit × 2"
    );
    let secs = units::parse_duration(t.suggestion.as_deref().unwrap()).unwrap();
    assert!(secs >= 240.0 * 60.0 * 2.0, "{t:?}");
    // All hung, with a generous limit and short completed runs: still never lower.
    let mut jobs: Vec<Job> = (0..5)
        .map(|i| Job {
            elapsed: 600,
            limit_min: 600,
            ..Job::new(&format!("h{i}"))
        })
        .collect();
    jobs.extend((0..5).map(|i| Job {
        state: "TIMEOUT".into(),
        elapsed: 600 * 60,
        limit_min: 600,
        cpu_s: 0.5,
        ..Job::new(&format!("h{}", i + 5))
    }));
    let a = analyse(&jobs);
    let t = advice(&a, "h#", "--time");
    assert_ne!(t.verdict, Verdict::Lower, "{t:?}");
    assert!(units::parse_duration(t.suggestion.as_deref().unwrap()).unwrap() >= 600.0 * 60.0);
}

#[test]
fn hung_workload_is_blocked_not_slow() {
    // 115 runs, 99 of them TIMEOUT at 1 h having used about half a CPU-second.
    let mut jobs = Vec::new();
    for i in 0..115 {
        let mut j = Job::new(&format!("fetch_{i}"));
        if i % 7 != 0 || i >= 112 {
            j.state = "TIMEOUT".into();
            j.elapsed = 3630;
            j.cpu_s = [0.52, 0.56, 0.61][i % 3];
        } else {
            j.elapsed = 300;
            j.cpu_s = 250.0;
        }
        jobs.push(j);
    }
    let died = jobs.iter().filter(|j| j.state == "TIMEOUT").count();
    assert_eq!(died, 99);
    let a = analyse(&jobs);
    let t = advice(&a, "fetch_#", "--time");
    assert!(t.basis.contains("blocked, not slow"), "{t:?}");
    assert!(t.evidence.contains("99 hung"), "{t:?}");
    assert_ne!(t.verdict, Verdict::Lower);
    // More time is not suggested on the hung runs' account: the completed runs fit.
    assert_eq!(t.verdict, Verdict::Ok, "{t:?}");
    let p = a
        .patterns
        .iter()
        .find(|p| p.code == "repeated_failure")
        .expect("repeated failure");
    assert_eq!(
        p.sentence,
        "fetch_#: submitted 115 times, died 99 times: TIMEOUT on a median of 0.56 CPU-seconds — a hang, not slowness."
    );
}

#[test]
fn oom_series_with_walked_mem_is_detected() {
    let mut jobs = Vec::new();
    for (i, (mem_gb, state)) in [
        (4, "OUT_OF_MEMORY"),
        (6, "OUT_OF_MEMORY"),
        (8, "OUT_OF_MEMORY"),
        (6, "COMPLETED"),
        (6, "COMPLETED"),
    ]
    .iter()
    .enumerate()
    {
        jobs.push(Job {
            mem_mb: mem_gb * 1024,
            state: state.to_string(),
            exit: if *state == "COMPLETED" {
                "0:0"
            } else {
                "0:125"
            }
            .into(),
            maxrss_mb: 3000,
            ..Job::new(&format!("assemble-{i}"))
        });
    }
    let a = analyse(&jobs);
    let p = a
        .patterns
        .iter()
        .find(|p| p.code == "memory_hand_searched")
        .expect("hand search found");
    assert_eq!(p.facts["oom_kills"], 3);
    assert_eq!(p.facts["failed_value_later_succeeded"], true);
    assert!(
        p.sentence.contains("4G (OOM) → 6G (OOM) → 8G (OOM) → 6G"),
        "{}",
        p.sentence
    );
    assert!(
        p.sentence.contains("memory was not the variable"),
        "{}",
        p.sentence
    );
    // The OOM kills outrank the 3000 MiB MaxRSS: never below what sufficed.
    let m = advice(&a, "assemble-#", "--mem");
    assert!(m.basis.starts_with("OOM kills first"), "{m:?}");
    assert!(m.basis.contains("MaxRSS"), "{m:?}");
    let s = units::parse_size(m.suggestion.as_deref().unwrap(), 1 << 20).unwrap();
    assert!(s >= 6 << 30, "{m:?}");
}

#[test]
fn node_that_eats_jobs_is_flagged_and_the_other_is_not() {
    let mut jobs = Vec::new();
    let mut add = |node: &str, runs: usize, failed: usize| {
        for i in 0..runs {
            let mut j = Job::new(&format!("md{i}"));
            j.node = node.into();
            if i < failed {
                j.state = "FAILED".into();
                j.exit = "1:0".into();
            }
            jobs.push(j);
        }
    };
    add("cn03", 36, 19);
    // 12 failures in 218 runs elsewhere; cn05 is a little worse than the rest (4 of 20).
    add("cn05", 20, 4);
    for (n, f) in [
        ("cn01", 2),
        ("cn02", 2),
        ("cn04", 1),
        ("cn06", 1),
        ("cn07", 1),
        ("cn08", 1),
    ] {
        add(n, 33, f);
    }
    assert_eq!(jobs.len(), 36 + 218);
    let a = analyse(&jobs);
    let flagged: Vec<&str> = a
        .patterns
        .iter()
        .filter(|p| p.code == "node_eats_jobs")
        .map(|p| p.facts["node"].as_str().unwrap())
        .collect();
    assert_eq!(flagged, ["cn03"]);
    assert_eq!(a.exclude.as_deref(), Some("cn03"));
    let p = a
        .patterns
        .iter()
        .find(|p| p.code == "node_eats_jobs")
        .unwrap();
    assert_eq!(p.facts["failed"], 19);
    assert_eq!(p.facts["runs"], 36);
    assert_eq!(p.facts["rest_failed"], 12);
    assert_eq!(p.facts["rest_runs"], 218);
    assert_eq!(p.facts["correction"], "bonferroni");
    assert!(p.sentence.contains("--exclude=cn03"), "{}", p.sentence);
}

#[test]
fn fewer_than_three_runs_is_not_enough_evidence() {
    let jobs = vec![Job::new("tiny1"), Job::new("tiny2")];
    let a = analyse(&jobs);
    for x in &a.workloads[0].advice {
        assert_eq!(x.verdict, Verdict::Unknown, "{x:?}");
        assert!(x.evidence.contains("fewer than 3"), "{x:?}");
        assert!(x.sbatch.is_none());
    }
}

#[test]
fn cost_ranks_gpu_hours_above_core_hours_and_folds_the_rest() {
    let mut jobs: Vec<Job> = (0..3)
        .map(|i| Job {
            cpus: 64,
            elapsed: 3600,
            ..Job::new(&format!("cpu{i}"))
        })
        .collect();
    jobs.extend((0..3).map(|i| Job {
        cpus: 8,
        gpus: 4,
        elapsed: 3600,
        ..Job::new(&format!("gpu{i}"))
    }));
    jobs.push(Job::new("small"));
    let a = analyse(&jobs);
    // 3 × (8 + 4 × 32) = 408 against 3 × 64 = 192.
    assert_eq!(a.workloads[0].name, "gpu#");
    assert_eq!(a.workloads[1].name, "cpu#");
    let f = a.fold(2);
    assert_eq!((f.workloads, f.runs), (1, 1));
    assert!(a.workloads[0].advice.iter().any(|x| x.flag == "--gres"));
}

/// A job name holding the unit separator (and a newline) is one field, whatever it holds:
/// each call's delimiter is its own (`\x1f`, 16 random hex digits, `\x1f`); a line that
/// is no record is skipped.
#[test]
fn window_is_chunked_a_unit_separator_stays_in_its_name_and_garbage_is_skipped() {
    let d0 = "\u{1f}00ff00ff00ff00ff\u{1f}";
    let mut text = gen::text(&[Job::new("a1"), Job::new("a2")], T0, 1).replace('\u{1f}', d0);
    let row = [
        "77",
        "77",
        "bad\u{1f}na\nme",
        "alice",
        "1001",
        "batch",
        "COMPLETED",
        "0:0",
        "x",
        "x",
        "x",
        "1",
        "1",
        "1",
        "1",
        "1M",
        "",
        "cn01",
        "00:01",
        "",
    ];
    assert_eq!(row.len(), gen::HEADER.len());
    text.push_str(&(row.join(d0) + "\n"));
    text.push_str("garbage\n");
    let (d, p) = fake_sacct_split(&text, d0);
    let q = Query {
        program: p,
        timeout: Duration::from_secs(10),
        ..Query::default()
    };
    let b = q.window(&window(20)).unwrap();
    let calls = std::fs::read_to_string(d.path().join("args.log")).unwrap();
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 3, "21 days in 7-day chunks: {calls:?}");
    assert!(calls
        .iter()
        .all(|c| c.contains("-S ") && c.contains("-E ") && c.contains("-u alice")));
    // Each chunk listed the same jobs: kept once.
    let names: Vec<&str> = b.records.iter().map(|r| r.job.job_name.as_str()).collect();
    assert_eq!(names, ["a1", "a2", "bad\u{1f}na\nme"]);
    assert_eq!(
        b.skipped_lines, 3,
        "the garbage line of each of three answers"
    );
    // Bad input to the query is refused before sacct runs.
    let bad = Window {
        users: vec!["a;b".into()],
        ..window(1)
    };
    assert!(q.window(&bad).is_err());
    let empty = Window {
        until_unix: T0 - 7200,
        ..window(1)
    };
    assert!(q.window(&empty).is_err());
}

#[test]
fn hanging_sacct_bounds_the_whole_window() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("sacct");
    std::fs::write(&p, "#!/bin/sh\nsleep 30\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    let q = Query {
        program: p,
        timeout: Duration::from_millis(500),
        ..Query::default()
    };
    let t = Instant::now();
    assert!(matches!(
        q.window(&window(30)),
        Err(sacct::SacctError::TimedOut(_))
    ));
    assert!(t.elapsed() < Duration::from_secs(5));
}

/// A fake `sacct` answering each chunk of a window with its own text, picked by `-S`.
fn chunked_sacct(answers: &[(String, String)]) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let mut script = String::from(
        "#!/bin/sh\nfor a in \"$@\"; do [ \"$prev\" = -S ] && s=$a; prev=$a; done\ncase $s in\n",
    );
    for (i, (since, text)) in answers.iter().enumerate() {
        let answer = d.path().join(format!("{i}.txt"));
        std::fs::write(&answer, text).unwrap();
        let replay = gen::replay(&answer, sacct::DELIMITER).replace('\n', "\n    ");
        script += &format!("  {since})\n    {replay};;\n");
    }
    script += "  *) echo \"sacct: no answer for $s\" >&2; exit 1 ;;\nesac\n";
    let p = d.path().join("sacct");
    std::fs::write(&p, script).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    (d, p)
}

/// The [`gen::HEADER`] text of `rows`, each row edited by `edit(id, column, value)`.
fn answer(rows: &[Vec<String>], edit: impl Fn(&str, &str, &mut String)) -> String {
    let mut s = gen::HEADER.join("\u{1f}") + "\n";
    for r in rows {
        let mut r: Vec<String> = r[..gen::HEADER.len()].to_vec();
        let id = r[0].split('.').next().unwrap().to_string();
        for (c, v) in gen::HEADER.iter().zip(r.iter_mut()) {
            edit(&id, c, v);
        }
        s += &(r.join("\u{1f}") + "\n");
    }
    s
}

/// A job listed by both chunks is kept once, as the later chunk lists it; one still running
/// in the first chunk and finished in the second is a run; one running in both is counted
/// unfinished — streamed, exactly as the whole-answer query and analysis say.
#[test]
fn a_streamed_window_keeps_each_job_once_as_last_listed() {
    let jobs: Vec<Job> = (0..4).map(|i| Job::new(&format!("w{i}"))).collect();
    let rows = gen::rows(&jobs, T0, 500);
    let running = |id: &str, c: &str, v: &mut String, which: &[&str]| {
        if which.contains(&id) {
            match c {
                "State" => *v = "RUNNING".into(),
                "End" => *v = "Unknown".into(),
                _ => {}
            }
        }
    };
    let first = answer(&rows, |id, c, v| running(id, c, v, &["501", "503"]));
    let second = answer(&rows[..], |id, c, v| {
        running(id, c, v, &["503"]);
        if id == "500" && c == "ElapsedRaw" && !v.is_empty() {
            *v = "999".into(); // the later listing of job 500 is the one kept
        }
    });
    let w = Window {
        since_unix: T0 - 3600,
        until_unix: T0 - 3600 + 14 * 86400,
        users: vec!["alice".into()],
        ..Window::default()
    };
    let (_d, p) = chunked_sacct(&[
        (sacct::sacct_time(w.since_unix), first),
        (sacct::sacct_time(w.since_unix + 7 * 86400), second),
    ]);
    let q = Query {
        program: p,
        timeout: Duration::from_secs(10),
        ..Query::default()
    };
    let mut runs = history::Runs::new(None);
    let (mut listings, mut jobs) = (0, 0);
    let tally = q
        .window_each(&w, sacct::Kept::Ids, &mut |r| {
            listings += 1;
            jobs += usize::from(runs.add_record(r));
        })
        .unwrap();
    assert_eq!(tally, sacct::Tally::default());
    assert_eq!((runs.len(), runs.unfinished()), (3, 1));
    // Both chunks list all four jobs: the progress line counts each job once.
    assert_eq!((listings, jobs), (8, 4));
    let streamed = runs.finish();
    let elapsed: Vec<f64> = streamed
        .runs
        .iter()
        .filter_map(|r| r.elapsed_seconds())
        .collect();
    assert_eq!(
        elapsed,
        [999.0, 600.0, 600.0],
        "sacct's order, 500 as last listed"
    );
    // The same as holding the whole answer.
    let b = q.window(&w).unwrap();
    let (held, unfinished) = history::runs_from(&b.records);
    assert_eq!((held.len(), unfinished), (3, 1));
    let held = history::analyse(held);
    let json =
        |a: &Analysis| serde_json::to_string(&(&a.workloads, &a.patterns, &a.exclude)).unwrap();
    assert_eq!(json(&streamed), json(&held));
}

/// Generated 10,000-job history: parse + analyse (after sacct returned).
#[test]
fn ten_thousand_jobs_are_analysed_quickly() {
    let text = gen::ten_thousand();
    let t = Instant::now();
    let b = sacct::parse_many(&text, sacct::DELIMITER);
    let (runs, _) = history::runs_from(&b.records);
    let a = history::analyse(runs);
    let el = t.elapsed();
    assert_eq!(b.records.len(), 10_000);
    assert!(!a.workloads.is_empty());
    eprintln!("10,000 jobs: parse + analyse {el:?}");
    // Debug builds are ~10× slower than release; the release figure is the bench's.
    assert!(el < Duration::from_secs(10), "{el:?}");
}

// --- hostlists, against scontrol's own output -------------------------------------------

fn hl_fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/slurm/hostlist")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn hostnames_match_scontrol() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/slurm/hostlist");
    let mut checked = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if !name.starts_with("hostnames_") {
            continue;
        }
        let text = hl_fixture(&name);
        let mut lines = text.lines();
        let input = lines.next().unwrap();
        let want: Vec<&str> = lines.collect();
        let got = hostlist::expand(input);
        if want.iter().any(|l| l.contains("Invalid")) {
            // Refused by Slurm 22.05: the suffix form is ours to accept (newer tools print
            // it); a step (`node[1-7:2]`) and a backwards range stay errors, as in scontrol.
            match input {
                "node[0001-0010]-int" => assert_eq!(got.unwrap()[9], "node0010-int"),
                _ => assert!(got.is_err(), "{input}: {got:?}"),
            }
        } else {
            assert_eq!(got.unwrap(), want, "{input}");
        }
        checked += 1;
    }
    assert!(
        checked >= 15,
        "three- and four-bracket captures included: {checked}"
    );
    let big = hostlist::expand("unit[0-31]rack[0-41]").unwrap();
    assert_eq!(big.len(), 32 * 42);
}

#[test]
fn hostlist_compression_matches_scontrol() {
    let text = hl_fixture("hostlist.tsv");
    let mut n = 0;
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let (input, want) = l.split_once('\t').unwrap();
        let names: Vec<&str> = input.split(',').collect();
        assert_eq!(hostlist::compress(&names), want, "{input}");
        n += 1;
    }
    assert!(n >= 10);
    // Round trip of a big list.
    let big = hostlist::expand("unit[0-31]rack[0-41]").unwrap();
    assert_eq!(hostlist::expand(&hostlist::compress(&big)).unwrap(), big);
}

// --- multi-task steps: sized on the sum over their tasks (issue 17) ------------------------

/// Three runs of the captured `srun -n 4` job (each task ~300 MiB under `--mem=2G`; the
/// real sacct record with its job id renumbered): `--mem` is sized on the four tasks
/// together (TRESUsageInTot), never on one task's MaxRSS.
#[test]
fn multitask_runs_are_sized_on_their_tasks_together() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sacct/multitask_4x300m.txt"),
    )
    .unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let body: Vec<&str> = lines.collect();
    let mut all = vec![header.to_string()];
    for id in ["639", "1639", "2639"] {
        for l in &body {
            all.push(l.replacen("639", id, 2));
        }
    }
    let b = sacct::parse_many(&all.join("\n"), sacct::DELIMITER);
    assert_eq!(b.records.len(), 3);
    let (runs, _) = history::runs_from(&b.records);
    let a = history::analyse(runs);
    let m = advice(&a, "mt#", "--mem");
    let f = m.figures.expect("figures");
    let tasks_sum = 1240004.0 * 1024.0;
    assert_eq!(f.used, tasks_sum, "{m:?}");
    assert!(f.need as f64 >= tasks_sum * 1.2, "{m:?}");
    assert!(
        m.basis.starts_with("sacct: sum of 4 tasks' peaks"),
        "{}",
        m.basis
    );
}
