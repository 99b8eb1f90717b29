//! `slurmwatch report` on a committed recording, end to end through the binary: the text
//! report, its JSON document and the SVG charts are snapshots; any change to them fails here
//! until reviewed (`cargo insta review`). TZ is pinned: the report prints local times.

use std::process::Command;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../core/tests/fixtures/store/v1.sqlite"
);

fn report(extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
        .args([
            "report",
            "12345",
            "--file",
            FIXTURE,
            "--no-sacct",
            "--no-log",
        ])
        .args(extra)
        .env("TZ", "UTC")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The fixture's path depends on the checkout: the snapshot names it from the repo root.
    String::from_utf8(out.stdout)
        .unwrap()
        .replace(FIXTURE, "core/tests/fixtures/store/v1.sqlite")
}

#[test]
fn text_report() {
    insta::assert_snapshot!(report(&[]));
}

#[test]
fn json_report() {
    let text = report(&["--json"]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    insta::assert_snapshot!(serde_json::to_string_pretty(&v).unwrap());
}

#[test]
fn svg_charts() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("r.svg");
    report(&["--svg", svg.to_str().unwrap()]);
    insta::assert_snapshot!(std::fs::read_to_string(&svg).unwrap());
}
