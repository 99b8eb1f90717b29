//! House rules the compiler does not check: no import cycles in any crate
//! (scripts/import-graph.py judges each edge at the level where its two ends part), and no
//! dependency a crate declares but never uses (scripts/unused-deps.py).

use std::process::Command;

#[test]
fn no_import_cycles_in_any_crate() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/import-graph.py"))
        .output()
        .expect("python3 runs scripts/import-graph.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "import cycles:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The script saw the crates (a wrong root would find no modules and pass vacuously).
    assert!(
        text.contains("core: ") && text.contains("plugin: "),
        "{text}"
    );
    assert!(!text.contains("core: 0 modules"), "{text}");
}

#[test]
fn the_check_finds_a_planted_cycle() {
    let d = tempfile::tempdir().unwrap();
    let src = d.path().join("src");
    std::fs::create_dir_all(src.join("store")).unwrap();
    std::fs::write(src.join("lib.rs"), "pub mod store;\n").unwrap();
    std::fs::write(src.join("store/mod.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("store/a.rs"), "use super::b::B;\npub struct A;\n").unwrap();
    std::fs::write(
        src.join("store/b.rs"),
        "pub struct B(crate::store::a::A);\n",
    )
    .unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/import-graph.py"))
        .arg(&src)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("cycle: store::a <-> store::b"), "{text}");
}

#[test]
fn no_crate_declares_a_dependency_it_does_not_use() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/unused-deps.py"))
        .output()
        .expect("python3 runs scripts/unused-deps.py");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "unused dependencies:\n{text}");
    assert!(text.contains("6 crates checked, 0 unused"), "{text}");
}

/// A cluster test returns early only through the harness's `runs_in` gate, named after
/// itself (scripts/check-phases.sh then fails a test that was skipped in every phase).
#[test]
fn cluster_tests_return_early_only_through_the_phase_gate() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/cluster");
    let mut gates = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut current_fn = "";
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if let Some(rest) = t.strip_prefix("fn ") {
                current_fn = rest.split('(').next().unwrap_or("");
            }
            if t.starts_with("return") && !t.starts_with("return ") {
                // The gate as rustfmt writes it: `if !runs_in("name", Phase) {` on one line,
                // or with the arguments on the lines below.
                let from = (0..i)
                    .rev()
                    .take(4)
                    .find(|&j| lines[j].contains("if !runs_in("));
                let gate = from.map(|j| lines[j..i].join(" ")).unwrap_or_default();
                assert!(
                    gate.contains("if !runs_in(") && gate.contains('"'),
                    "{}:{}: an early return outside the phase gate: {t}",
                    path.display(),
                    i + 1
                );
                let named = gate.split('"').nth(1).unwrap_or("");
                assert_eq!(named, current_fn, "{}:{}", path.display(), i + 1);
                gates += 1;
            }
        }
    }
    assert!(
        gates >= 10,
        "the check saw {gates} phase gates: is it reading tests/cluster?"
    );
}

/// Every `docs/design.md §N` the code and scripts cite is a section of docs/design.md, and
/// every "principle N" one of its principles: the references resolve inside the repository.
#[test]
fn design_references_resolve() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let design = std::fs::read_to_string(format!("{root}/docs/design.md")).unwrap();
    let sections: Vec<String> = design
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .filter_map(|h| h.split('.').next().map(str::to_string))
        .collect();
    let principles = design
        .split("## 2. Principles")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap()
        .lines()
        .filter(|l| {
            l.split_once(". **")
                .is_some_and(|(n, _)| n.trim().parse::<u32>().is_ok())
        })
        .count();
    let out = Command::new("git")
        .args([
            "-C",
            root,
            "grep",
            "-hoE",
            r"docs/design\.md §[0-9]+(\.[0-9]+)?|principle [0-9]+",
        ])
        .output()
        .unwrap();
    let refs = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut seen = 0;
    for r in refs.lines() {
        seen += 1;
        if let Some(n) = r.strip_prefix("principle ") {
            let n: usize = n.parse().unwrap();
            assert!(
                (1..=principles).contains(&n),
                "{r}: docs/design.md has {principles} principles"
            );
        } else {
            let s = r.rsplit('§').next().unwrap();
            let (sec, sub) = s.split_once('.').unwrap_or((s, ""));
            assert!(
                sections.iter().any(|x| x == sec),
                "{r}: no section {sec} in docs/design.md"
            );
            if sec == "2" && !sub.is_empty() {
                let n: usize = sub.parse().unwrap();
                assert!((1..=principles).contains(&n), "{r}: no principle {n}");
            }
        }
    }
    assert!(
        seen >= 10,
        "only {seen} references found: is git grep reading the repository?"
    );
}
