//! The report's throughput end to end, without a cluster: a recorded file with the output
//! sizes the plugin notes and a phase mark, and the job's log given with `--log`, in the
//! JSON, the text and the pictures; and a bad pattern file refused with one sentence.

use std::process::Command;

use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{JobMeta, OutputSize, Writer};

const T0: i64 = 1_780_000_000_000;

fn me() -> u32 {
    // SAFETY: no failure modes.
    unsafe { libc::geteuid() }
}

/// Job 4242's file: 60 one-second rows, the log's size at each, and a mark "train" at 30 s;
/// the log: a tqdm bar redrawn every 0.1 s at 10 it/s, at a quarter of that from 20 s to 40 s.
fn recorded(dir: &std::path::Path) -> std::path::PathBuf {
    let meta = JobMeta {
        job_id: 4242,
        user: "me".into(),
        uid: me(),
        node: "n1".into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 1,
        source: Source::CgroupV2,
        cores_allocated: Some(1),
        memory_allocated_bytes: None,
        started_unix_ms: T0,
        incarnation: None,
    };
    let spool = dir.join("spool");
    std::fs::create_dir(&spool).unwrap();
    let mut w = Writer::create(&spool.join("4242.sqlite"), &meta).unwrap();
    let (mut log, mut done) = (String::new(), 0.0f64);
    for tenth in 0..=600i64 {
        if tenth > 0 {
            done += if (200..400).contains(&tenth) {
                0.25
            } else {
                1.0
            };
            let e = tenth / 10;
            log.push_str(&format!(
                "\r{}/1000 [00:{e:02}<00:30, 10.00it/s]",
                done.floor()
            ));
        }
        if tenth % 10 == 0 {
            let t = T0 + tenth * 100;
            let kind = if tenth == 0 {
                SampleKind::Start
            } else {
                SampleKind::Periodic
            };
            let mut row = SampleRow::empty(t, Series::Job, kind);
            row.usage.cpu_usage_usec = Some(tenth as u64 * 1000);
            w.push(row);
            w.push_output_size(OutputSize {
                t_unix_ms: t,
                fd: 1,
                bytes: log.len() as u64,
            });
        }
    }
    w.flush().unwrap();
    w.event(T0 + 30_000, Some("batch"), "mark", "train")
        .unwrap();
    w.close().unwrap();
    let path = dir.join("slurm-4242.out");
    std::fs::write(&path, log).unwrap();
    spool
}

fn report(dir: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let spool = match dir.join("spool") {
        s if s.exists() => s,
        _ => recorded(dir),
    };
    Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .args(["report", "4242", "--no-sacct", "--spool"])
        .arg(&spool)
        .arg("--log")
        .arg(dir.join("slurm-4242.out"))
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn the_logs_slowdown_is_placed_by_the_noted_sizes() {
    let d = tempfile::tempdir().unwrap();
    let out = report(d.path(), &["--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &r["throughput"];
    assert_eq!(t["tool"], "tqdm", "{t:#}");
    let s = &t["slowdowns"][0];
    let from = s["from_unix_ms"].as_i64().unwrap();
    let to = s["to_unix_ms"].as_i64().unwrap();
    assert!((from - (T0 + 20_000)).abs() <= 2000, "{s:#}");
    assert!((to - (T0 + 40_000)).abs() <= 2000, "{s:#}");
    let lost = s["seconds_lost"].as_f64().unwrap();
    assert!((lost - 15.0).abs() <= 1.5, "{s:#}");
    let f = r["findings"].as_array().unwrap();
    assert!(
        f.iter().any(|f| f["code"] == "throughput_slowdown"),
        "a 15-s loss is a finding: {f:#?}"
    );
    let text = report(d.path(), &[]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("THROUGHPUT (the job's own progress, from its log)"),
        "{text}"
    );
    assert!(text.contains("throughput fell from 10.00 to"), "{text}");
}

#[test]
fn a_bad_pattern_file_is_one_sentence_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let patterns = d.path().join("p.txt");
    std::fs::write(&patterns, "# ours\n^step (?P<done>\\d+\n").unwrap();
    let out = report(
        d.path(),
        &["--progress-patterns", patterns.to_str().unwrap()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("line 2") && err.contains("hint"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

/// `--svg` and `--html` draw what the text says: the mark's line, the rate series and the
/// slowdown's band, on the throughput panel.
#[test]
fn the_pictures_draw_the_phase_and_the_throughput() {
    let d = tempfile::tempdir().unwrap();
    let (svg_path, html_path) = (d.path().join("r.svg"), d.path().join("r.html"));
    let out = report(
        d.path(),
        &[
            "--svg",
            svg_path.to_str().unwrap(),
            "--html",
            html_path.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed");
    let by_id = |id: &str| doc.descendants().find(|n| n.attribute("id") == Some(id));
    for id in [
        "panel-throughput",
        "series-throughput",
        "throughput-usual",
        "slowdown-0",
        "phase-1",
    ] {
        assert!(by_id(id).is_some(), "no {id}");
    }
    let phase = by_id("phase-1").unwrap();
    assert_eq!(
        phase
            .children()
            .find(|c| c.has_tag_name("text"))
            .unwrap()
            .text(),
        Some("train")
    );
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains(&svg), "the HTML holds the same SVG");
    assert!(html.contains("PHASES (as the job marked them)"));
}
