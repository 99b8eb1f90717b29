//! The site file through the binary (docs/reference/site.md), on the committed recording: a
//! threshold it sets changes the finding; a note's text and URL appear under the finding in
//! the text and in the JSON; a broken file is one sentence naming its line, exit 2; no file,
//! an empty file and a file that sets every key to its default give today's report exactly.

use std::process::{Command, Output};

use slurmwatch_core::analysis::thresholds::KEYS;
use slurmwatch_core::analysis::Thresholds;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../core/tests/fixtures/store/v1.sqlite"
);

/// `report` on the fixture under the site file `site` (None: `SLURMWATCH_SITE_FILE=""`).
fn report(site: Option<&str>, json: bool) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site.toml");
    let env = match site {
        Some(text) => {
            std::fs::write(&path, text).unwrap();
            path.to_str().unwrap().to_string()
        }
        None => String::new(),
    };
    let mut c = Command::new(env!("CARGO_BIN_EXE_slurmwatch"));
    c.args([
        "report",
        "12345",
        "--file",
        FIXTURE,
        "--no-sacct",
        "--no-log",
    ])
    .env("TZ", "UTC")
    .env("SLURMWATCH_SITE_FILE", env);
    if json {
        c.arg("--json");
    }
    c.output().unwrap()
}

fn ok(o: Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn codes(json: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

/// The fixture's job peaked at 4.00 GiB of a 32.0 GiB limit: 28 GiB never used, under the
/// default 32 GiB floor of `memory_overrequested` — not said. A site floor of 16 GiB says it.
#[test]
fn a_threshold_changes_the_finding() {
    let before = codes(&ok(report(None, true)));
    assert!(
        !before.contains(&"memory_overrequested".to_string()),
        "{before:?}"
    );
    let site = "[thresholds]\nmemory_overrequested_min_unused_gib = 16\n";
    let after = codes(&ok(report(Some(site), true)));
    assert!(
        after.contains(&"memory_overrequested".to_string()),
        "{after:?}"
    );
    let text = ok(report(Some(site), false));
    assert!(
        text.contains("[memory_overrequested] Asked for 32.0 GiB, working set peaked at 4.00 GiB"),
        "{text}"
    );
    // Raising the share below which it is said does not bring it back alone: both must hold.
    let only_percent = "[thresholds]\nmemory_overrequested_percent = 90\n";
    assert_eq!(codes(&ok(report(Some(only_percent), true))), before);
}

#[test]
fn a_note_is_under_its_finding_in_text_and_json() {
    let site = "[notes.oom_killed]\ntext = \"Ask for more memory with --mem; the help desk can help size it.\"\nurl = \"https://hpc.example.org/memory#oom\"\n\n[notes.gpu_idle]\nurl = \"https://hpc.example.org/gpu\"\n";
    let text = ok(report(Some(site), false));
    let at = text
        .find("[oom_killed] OOM-killed at")
        .expect("the finding");
    let under: Vec<&str> = text[at..].lines().skip(1).take(2).collect();
    assert_eq!(
        under,
        [
            "      site note: Ask for more memory with --mem; the help desk can help size it.",
            "      see https://hpc.example.org/memory#oom"
        ]
    );
    assert!(
        !text.contains("hpc.example.org/gpu"),
        "no gpu_idle finding, no note"
    );
    let v: serde_json::Value = serde_json::from_str(&ok(report(Some(site), true))).unwrap();
    let f = &v["findings"][0];
    assert_eq!(f["code"], "oom_killed");
    assert_eq!(f["site_note"]["url"], "https://hpc.example.org/memory#oom");
    assert_eq!(
        f["site_note"]["text"],
        "Ask for more memory with --mem; the help desk can help size it."
    );
}

#[test]
fn a_broken_file_is_one_sentence_naming_its_line_and_exit_2() {
    for (text, line, words) in [
        (
            "[thresholds]\nmemory_overrequested_percent = 35\n\nmemory_percent = 3\n",
            4,
            "unknown key `memory_percent` in [thresholds]",
        ),
        (
            "[thresholds]\ncpu_underused_percent = \"high\"\n",
            2,
            "must be a number, not a string",
        ),
        (
            "# site notes\n[notes.gpu_unused]\ntext = \"x\"\n",
            2,
            "`gpu_unused` in [notes.gpu_unused] is not a finding code",
        ),
        (
            "[notes.gpu_idle]\ntext = \"x\"\nurl = \"https://a.example\n",
            3,
            "",
        ),
    ] {
        let o = report(Some(text), false);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{text:?}: {err}");
        assert!(
            o.stdout.is_empty(),
            "no report printed under a broken site file"
        );
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "one sentence and a hint: {err}");
        assert!(lines[0].starts_with("slurmwatch: the site file "), "{err}");
        assert!(
            lines[0].contains(&format!("site.toml line {line}: ")),
            "{text:?}: {err}"
        );
        assert!(lines[0].contains(words), "{text:?}: {err}");
        assert!(lines[1].starts_with("hint: "), "{err}");
    }
}

/// A site file that restates every default, or says nothing, changes nothing.
#[test]
fn no_file_empty_file_and_defaults_give_todays_report() {
    let d = Thresholds::default();
    let mut all = String::from("[thresholds]\n");
    for k in KEYS {
        all += &format!("{} = {:?}\n", k.name, (k.get)(&d));
    }
    for json in [false, true] {
        let none = ok(report(None, json));
        assert_eq!(ok(report(Some("# nothing yet\n"), json)), none);
        assert_eq!(ok(report(Some(&all), json)), none, "{all}");
    }
}

/// docs/reference/site.md's table has every key with its default, and nothing else.
#[test]
fn every_key_is_documented_with_its_default() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/reference/site.md"
    ))
    .unwrap();
    let d = Thresholds::default();
    // The [thresholds] section's table (the [summary] one follows it).
    let rows: Vec<(String, f64)> = doc
        .lines()
        .skip_while(|l| *l != "## `[thresholds]`")
        .take_while(|l| *l == "## `[thresholds]`" || !l.starts_with("## "))
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (
                cells[1].trim_matches('`').to_string(),
                cells[2].parse().unwrap(),
            )
        })
        .collect();
    let want: Vec<(String, f64)> = KEYS
        .iter()
        .map(|k| (k.name.to_string(), (k.get)(&d)))
        .collect();
    assert_eq!(rows, want);
}

/// contrib/site.toml, every setting uncommented, is a valid site file naming every key, and
/// (its values the defaults, its notes for codes this job does not have) changes nothing.
#[test]
fn the_contrib_example_parses_and_restates_the_defaults() {
    let example =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../contrib/site.toml"))
            .unwrap();
    let live: String = example
        .lines()
        .map(|l| match l.strip_prefix('#') {
            Some(rest) if !rest.starts_with(' ') && !rest.is_empty() => rest,
            _ => l,
        })
        .map(|l| format!("{l}\n"))
        .collect();
    for k in KEYS {
        assert!(
            live.contains(&format!("\n{} = ", k.name)),
            "{} missing",
            k.name
        );
    }
    assert!(live.contains("\n[notes.gpu_idle]\n"));
    assert_eq!(ok(report(Some(&live), true)), ok(report(None, true)));
}
