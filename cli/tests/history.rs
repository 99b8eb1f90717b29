//! `slurmwatch history` / `sizing` end to end, with a fake `sacct` first on PATH serving a
//! generated history (sacct's columns are found by name, so a short header is enough).

use std::path::Path;
use std::process::Command;

const U: char = '\u{1f}';

fn history_text() -> String {
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
        "MaxRSS",
    ];
    let mut s = header.join(&U.to_string());
    s.push('\n');
    for i in 0..10 {
        let id = 500 + i;
        let el = 3000 + i * 20; // up to 53 min of a 60-min limit
        let start = format!("2026-11-02T{:02}:00:00", 8 + i);
        let end = format!("2026-11-02T{:02}:55:00", 8 + i);
        let node = if i % 2 == 0 { "cn01" } else { "cn02" };
        let row = [
            id.to_string(),
            id.to_string(),
            format!("s{}e{}", i, 20 + i),
            "alice".into(),
            "COMPLETED".into(),
            "0:0".into(),
            start.clone(),
            end.clone(),
            el.to_string(),
            "60".into(),
            "4".into(),
            "4G".into(),
            node.into(),
            "50:00".into(),
            String::new(),
        ];
        s += &row.join(&U.to_string());
        s.push('\n');
        let step = [
            format!("{id}.batch"),
            format!("{id}.batch"),
            "batch".into(),
            String::new(),
            "COMPLETED".into(),
            "0:0".into(),
            start,
            end,
            el.to_string(),
            String::new(),
            "4".into(),
            String::new(),
            node.into(),
            "50:00".into(),
            "1500M".into(),
        ];
        s += &step.join(&U.to_string());
        s.push('\n');
    }
    s
}

/// A fresh directory (no tempfile dependency in this crate's dev-dependencies).
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("slurmwatch-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A fake sacct's script printing `answer` (split by the unit separator) as sacct would with
/// the delimiter it is asked for.
fn replay(answer: &Path) -> String {
    slurmwatch_core::history::fixture::replay(answer, slurmwatch_core::slurm::sacct::DELIMITER)
}

fn fake_path(dir: &Path, script: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("sacct");
    std::fs::write(&p, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn slurmwatch(path: &str, spool: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .args(args)
        .args(["--spool", spool.to_str().unwrap()])
        .env("PATH", path)
        .env_remove("SLURMWATCH_SACCT")
        .output()
        .unwrap()
}

#[test]
fn sizing_json_and_text_through_sacct_on_path() {
    let d = TempDir::new("sizing");
    std::fs::write(d.path().join("h.txt"), history_text()).unwrap();
    let path = fake_path(d.path(), &replay(&d.path().join("h.txt")));
    let win = ["-S", "2026-11-01", "-E", "2026-11-03"];
    let mut args = vec!["sizing", "--json"];
    args.extend(win);
    let o = slurmwatch(&path, d.path(), &args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], 1);
    let w = &v["workloads"][0];
    assert_eq!(w["name"], "s#e#");
    assert_eq!(w["runs"], 10);
    let t = w["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["flag"] == "--time")
        .unwrap();
    assert_eq!(t["verdict"], "raise");
    assert_eq!(t["current"], "01:00:00");
    assert_eq!(t["suggestion"], "01:10:00");
    let m = w["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["flag"] == "--mem")
        .unwrap();
    assert!(
        m["basis"].as_str().unwrap().starts_with("sacct MaxRSS"),
        "{m}"
    );
    for a in w["advice"].as_array().unwrap() {
        for k in ["flag", "verdict", "current", "suggestion", "basis"] {
            assert!(a.get(k).is_some(), "{k} missing in {a}");
        }
    }
    // Text: one line per flag with a ready #SBATCH line.
    let mut args = vec!["sizing"];
    args.extend(win);
    let o = slurmwatch(&path, d.path(), &args);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("#SBATCH --time=01:10:00"), "{text}");
    // History: the workload with its runs.
    let mut args = vec!["history", "--json"];
    args.extend(win);
    let o = slurmwatch(&path, d.path(), &args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["workloads"][0]["names_covered"], 10);
    assert_eq!(v["below_fold"]["workloads"], 0);
}

#[test]
fn exit_codes() {
    let d = TempDir::new("exit");
    // No finished job: 1, one sentence.
    let path = fake_path(d.path(), "printf 'JobID\\037State\\n'");
    let o = slurmwatch(&path, d.path(), &["history"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no finished job"));
    // sacct failing: 2.
    let path = fake_path(
        d.path(),
        "echo 'sacct: error: slurmdbd: connection refused' >&2; exit 1",
    );
    let o = slurmwatch(&path, d.path(), &["sizing"]);
    assert_eq!(o.status.code(), Some(2));
    // Bad time: 2, no panic.
    let o = slurmwatch(&path, d.path(), &["history", "-S", "last tuesday"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("panicked"));
}

/// A slow sacct (2 s before its answer): progress shows on a terminal after 1.5 s, and never
/// on a pipe. The terminal is `script`'s pseudo-terminal (util-linux); without `script` the
/// terminal half is not checked.
#[test]
fn progress_only_on_a_terminal() {
    let d = TempDir::new("progress");
    std::fs::write(d.path().join("h.txt"), history_text()).unwrap();
    let path = fake_path(
        d.path(),
        &format!("sleep 2\n{}", replay(&d.path().join("h.txt"))),
    );
    let win = ["history", "-S", "2026-11-01", "-E", "2026-11-03"];
    // A pipe: the answer, and not a carriage return on stderr.
    let o = slurmwatch(&path, d.path(), &win);
    assert_eq!(o.status.code(), Some(0));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains('\r') && !err.contains("sacct"), "{err:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("s#e#"));
    // A terminal.
    let cmd = format!(
        "{} {} --spool {}",
        env!("CARGO_BIN_EXE_slurmwatch"),
        win.join(" "),
        d.path().display()
    );
    let Ok(o) = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .env("PATH", &path)
        .env_remove("SLURMWATCH_SACCT")
        .output()
    else {
        eprintln!("no script(1): the terminal half is not checked");
        return;
    };
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("waiting for sacct, 2 s") || out.contains("waiting for sacct, 1 s"),
        "{out:?}"
    );
    assert!(out.contains("\r\x1b[2K"), "the line is cleared: {out:?}");
    assert!(out.contains("s#e#"), "{out:?}");
}
