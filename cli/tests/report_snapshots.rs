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
        // No site file, whatever this machine has in /etc: the snapshots are the defaults.
        .env("SLURMWATCH_SITE_FILE", "")
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

/// docs/reference/json.md's report table and the report's JSON agree: every documented key
/// is in the output, and every key the output carries (top level and one level into each
/// object) is documented — in the key column, or as a field the row's meaning lists
/// (`{a, b}` or a backticked name; `<x>` in a name stands for any word).
#[test]
fn every_report_key_is_documented_and_every_documented_key_is_output() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/reference/json.md"
    ))
    .unwrap();
    let section = doc
        .split("## The report: JSON")
        .nth(1)
        .expect("docs/reference/json.md has the report's section");
    let section = section.split("\n## ").next().unwrap();
    let ticked = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .flat_map(|t| {
                t.trim_matches(|c| c == '{' || c == '}')
                    .split(',')
                    .map(|s| s.trim().trim_end_matches("[]").to_string())
                    .collect::<Vec<_>>()
            })
            .filter(|t| !t.is_empty())
            .collect()
    };
    let mut documented = Vec::new(); // key-column paths
    let mut fields: Vec<(String, String)> = Vec::new(); // (row path, a field its meaning names)
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.split(" | ").collect();
        let paths = ticked(cells[0].trim_start_matches("| "));
        let named = ticked(cells.get(1).copied().unwrap_or(""));
        for p in &paths {
            for n in &named {
                fields.push((p.clone(), n.clone()));
            }
        }
        documented.extend(paths);
    }
    let matches = |pattern: &str, key: &str| -> bool {
        match pattern.split_once('<') {
            None => pattern == key,
            Some((pre, rest)) => {
                let post = rest.split_once('>').map_or("", |(_, p)| p);
                key.len() > pre.len() + post.len() && key.starts_with(pre) && key.ends_with(post)
            }
        }
    };
    let v: serde_json::Value = serde_json::from_str(&report(&["--json"])).unwrap();
    let mut output = Vec::new();
    for (k, val) in v.as_object().unwrap() {
        output.push(k.clone());
        if let Some(o) = val.as_object() {
            output.extend(o.keys().map(|s| format!("{k}.{s}")));
        }
    }
    for key in &output {
        let (parent, leaf) = key.rsplit_once('.').unwrap_or(("", key));
        let ok = documented.contains(key)
            || documented.iter().any(|d| d.starts_with(&format!("{key}.")))
            || fields.iter().any(|(p, f)| p == parent && matches(f, leaf));
        assert!(
            ok,
            "the report's JSON carries `{key}`, which docs/reference/json.md does not list"
        );
    }
    for key in &documented {
        // A child of an object that is null here (`log` without --log, `sacct` without sacct).
        let parent_null = key
            .split_once('.')
            .is_some_and(|(p, _)| v.get(p).is_some_and(|x| x.is_null()));
        assert!(
            output.contains(key) || parent_null,
            "docs/reference/json.md lists `{key}`, which the report's JSON does not carry"
        );
    }
}
