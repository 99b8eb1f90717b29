//! Every subcommand's answer goes through one writer (cli/src/output.rs): a full disk is an
//! error with exit 2 and a sentence, never a silent exit 0; a closed pipe is a clean end.

use std::process::{Command, Stdio};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../core/tests/fixtures/store/v1.sqlite"
);

fn to_dev_full(args: &[&str]) -> (Option<i32>, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .args(args)
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_full_disk_is_exit_2_with_a_sentence_for_report_and_the_live_view() {
    for args in [
        &[
            "report",
            "12345",
            "--file",
            FIXTURE,
            "--json",
            "--no-log",
            "--no-sacct",
        ][..],
        &[
            "report",
            "12345",
            "--file",
            FIXTURE,
            "--no-log",
            "--no-sacct",
        ][..],
        &["--file", FIXTURE, "--once", "--json"][..],
    ] {
        let (code, err) = to_dev_full(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.contains("cannot write the output: No space left on device"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_closed_pipe_is_a_clean_end() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .args([
            "report",
            "12345",
            "--file",
            FIXTURE,
            "--json",
            "--no-log",
            "--no-sacct",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader went away before the first byte
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
