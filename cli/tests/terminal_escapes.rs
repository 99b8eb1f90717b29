//! Attack (issue 37, 9): a job named `ESC]0;pwned BEL ESC[2J` (and paths with control bytes)
//! retitled and cleared the terminal of whoever read its `report` or `history`, and of whoever
//! read the mailed report. Through the binary, with a fake sacct serving such names: the text
//! of `report`, `history` and `sizing` holds no control character but its own line breaks,
//! and the hostile values are shown with `?` in place of each control character.

use std::path::Path;
use std::process::{Command, Output};

use slurmwatch_core::history::fixture::replay;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../core/tests/fixtures/store/v1.sqlite"
);
/// OSC 0 (set the window title) ended by BEL, then CSI 2 J (clear the screen).
const HOSTILE: &str = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
/// The same as the terminal gets it now.
const SHOWN: &str = "?]0;pwned??[2J";
const U: char = '\u{1f}';

fn exe(p: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every control character in `text` other than a line break, with its offset.
fn controls(text: &str) -> Vec<(usize, char)> {
    text.char_indices()
        .filter(|&(_, c)| c.is_control() && c != '\n')
        .collect()
}

fn assert_clean(what: &str, o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout.clone()).unwrap();
    assert_eq!(
        controls(&text),
        [],
        "{what} printed control bytes:\n{text:?}"
    );
    text
}

/// sacct's answer as the fake prints it: the header, then `rows`.
fn sacct_text(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut s = header.join(&U.to_string());
    s.push('\n');
    for r in rows {
        s += &r.join(&U.to_string());
        s.push('\n');
    }
    s
}

#[test]
fn report_text_shows_a_hostile_name_and_paths_without_their_control_bytes() {
    let d = tempfile::tempdir().unwrap();
    // The job's file, copied to a directory whose name holds the escape, a CR and a newline.
    let dir = d.path().join(format!("arch{HOSTILE}\r\nx"));
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("12345.sqlite");
    std::fs::copy(FIXTURE, &file).unwrap();
    // The job's log, under a hostile name too, with escapes inside.
    let log = dir.join(format!("out{HOSTILE}.txt"));
    std::fs::write(
        &log,
        format!("step 1\n{HOSTILE}Traceback (most recent call last):\nRuntimeError: CUDA out of memory{HOSTILE}\n"),
    )
    .unwrap();
    let header = [
        "JobID",
        "JobIDRaw",
        "JobName",
        "User",
        "UID",
        "State",
        "ExitCode",
        "Start",
        "End",
        "ElapsedRaw",
        "NodeList",
        "WorkDir",
    ];
    let row: Vec<String> = [
        "12345",
        "12345",
        // No newline here: how sacct's lines are split is the sacct reader's matter (issue
        // 37, 6); a carriage return would still overwrite the line on a terminal.
        &format!("{HOSTILE}\r  [forged] all good\u{9b}2J"),
        "alice",
        "1000",
        "FAILED",
        "1:0",
        "2026-12-01T10:00:00",
        "2026-12-01T10:05:00",
        "300",
        "vm",
        &format!("/home/alice/{HOSTILE}"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    std::fs::write(d.path().join("sacct.txt"), sacct_text(&header, &[row])).unwrap();
    let sacct = d.path().join("sacct");
    exe(&sacct, &replay(&d.path().join("sacct.txt"), "\u{1f}"));
    let o = Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .arg("report")
        .arg("12345")
        .arg("--file")
        .arg(&file)
        .arg("--log")
        .arg(&log)
        .env("SLURMWATCH_SACCT", &sacct)
        .env("SLURMWATCH_SITE_FILE", "")
        .env("TZ", "UTC")
        .output()
        .unwrap();
    let text = assert_clean("report", &o);
    // The name, shown with `?` for each control character (the C1 CSI too).
    assert!(
        text.starts_with(&format!(
            "Job 12345 ({SHOWN}?  [forged] all good?2J)  user "
        )),
        "{text}"
    );
    // The path's CR and newline too: no line of its own.
    assert!(
        text.contains(&format!("arch{SHOWN}??x/12345.sqlite")),
        "{text}"
    );
    assert!(!text.contains("\nx/12345.sqlite"), "{text}");
    assert!(text.contains(&format!("out{SHOWN}.txt")), "{text}");
    // JSON keeps the name exactly: it is data for programs, escaped by JSON's own rules.
    let o = Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .args(["report", "12345", "--no-log", "--json", "--file"])
        .arg(&file)
        .env("SLURMWATCH_SACCT", &sacct)
        .env("SLURMWATCH_SITE_FILE", "")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    let json = String::from_utf8(o.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["job"]["name"].as_str(),
        Some(format!("{HOSTILE}\r  [forged] all good\u{9b}2J").as_str()),
        "{json}"
    );
}

/// Six failed runs of a job with a hostile name: the workload's row and the repeated-failure
/// pattern (a sentence that names the workload) in `history`, and `sizing`'s text.
#[test]
fn history_and_sizing_text_show_a_hostile_name_without_its_control_bytes() {
    let d = tempfile::tempdir().unwrap();
    let header = [
        "JobID",
        "JobIDRaw",
        "JobName",
        "User",
        "State",
        "ExitCode",
        "Start",
        "End",
        "ElapsedRaw",
        "TimelimitRaw",
        "NCPUS",
        "ReqMem",
        "NodeList",
        "TotalCPU",
    ];
    // A carriage return (the line's start, overwritten) and a C1 CSI (U+009B), no newline:
    // how sacct's lines are split is the sacct reader's matter (issue 37, 6).
    let name = format!("{HOSTILE}\r  - forged\u{9b}2J");
    let rows: Vec<Vec<String>> = (0..6)
        .map(|i| {
            [
                format!("{}", 700 + i),
                format!("{}", 700 + i),
                name.clone(),
                format!("alice{HOSTILE}"),
                "FAILED".into(),
                "1:0".into(),
                format!("2026-11-02T{:02}:00:00", 8 + i),
                format!("2026-11-02T{:02}:10:00", 8 + i),
                "600".into(),
                "60".into(),
                "4".into(),
                "4G".into(),
                "cn01".into(),
                "00:00:05".into(),
            ]
            .to_vec()
        })
        .collect();
    std::fs::write(d.path().join("h.txt"), sacct_text(&header, &rows)).unwrap();
    let sacct = d.path().join("sacct");
    exe(&sacct, &replay(&d.path().join("h.txt"), "\u{1f}"));
    let run = |cmd: &str| {
        Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
            .args([cmd, "-S", "2026-11-01", "-E", "2026-11-03", "--spool"])
            .arg(d.path())
            .env("SLURMWATCH_SACCT", &sacct)
            .env("TZ", "UTC")
            .output()
            .unwrap()
    };
    // The workload's name has its digit runs collapsed (`0` → `#`).
    let workload = "?]#;pwned??[#J?  - forged?#J";
    let history = assert_clean("history", &run("history"));
    assert!(
        history.contains(&format!("\n{workload} (alice{SHOWN}) ")),
        "{history}"
    );
    assert!(
        history.contains(&format!(
            "\n  - {workload}: submitted 6 times, died 6 times"
        )),
        "{history}"
    );
    assert!(!history.contains('\r'), "{history}");
    let sizing = assert_clean("sizing", &run("sizing"));
    assert!(
        sizing.starts_with(&format!("{workload} (alice{SHOWN}) — 6 runs")),
        "{sizing}"
    );
}
