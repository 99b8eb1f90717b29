//! House rules the compiler does not check: no import cycles in any crate
//! (scripts/import-graph.py judges each edge at the level where its two ends part), no
//! dependency a crate declares but never uses (scripts/unused-deps.py), and no function
//! longer than [`LONGEST_FUNCTION_LINES`] (scripts/long-functions.py).

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
        text.contains("recorder: ") && text.contains("core: ") && text.contains("plugin: "),
        "{text}"
    );
    assert!(!text.contains("core: 0 modules"), "{text}");
    assert!(!text.contains("recorder: 0 modules"), "{text}");
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
    assert!(text.contains("10 crates checked, 0 unused"), "{text}");
}

/// The longest a function in the recorder, core, cli, plugin or epilog may be, in lines from
/// `fn` to its closing brace (tests left out): the longest now (`slurm::command::run_inner`).
/// Lower it as functions are split; never raise it.
const LONGEST_FUNCTION_LINES: usize = 95;

fn long_functions(args: &[&str]) -> (Option<i32>, String) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = Command::new("python3")
        .arg(format!("{root}/scripts/long-functions.py"))
        .args(args)
        .output()
        .expect("python3 runs scripts/long-functions.py");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.code(),
        text + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn no_function_is_longer_than_the_house_limit() {
    let (code, text) = long_functions(&["--max", &LONGEST_FUNCTION_LINES.to_string()]);
    assert_eq!(code, Some(0), "functions over the limit:\n{text}");
    // The scan saw the workspace (a wrong root would check nothing and pass).
    let checked: usize = text
        .split(" functions checked")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(checked >= 1000, "{text}");
}

#[test]
fn the_length_check_finds_a_planted_long_function() {
    let d = tempfile::tempdir().unwrap();
    // Braces in strings, raw strings, chars and comments are not code: `short` stays 6
    // lines and `long` is found at its real length.
    let mut src = String::from(
        "fn short() -> char {\n    let _ = \"}}}\";\n    let _ = r#\"{\"#;\n    // }\n    '}'\n}\n",
    );
    src += "pub fn long<'a>(x: &'a str) -> &'a str {\n";
    src += &"    let _ = '{';\n".repeat(127);
    src += "    x\n}\n";
    std::fs::write(d.path().join("lib.rs"), src).unwrap();
    let dir = d.path().to_str().unwrap();
    let (code, text) = long_functions(&["--max", "129", dir]);
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("  130  long "), "{text}");
    assert!(!text.contains("short"), "{text}");
    let (code, text) = long_functions(&["--top", "2", dir]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("    6  short "), "{text}");
}

/// A cluster test is a `#[cluster_test]` (tests/harness-macros: `#[test]`, `#[ignore]`, and
/// the phase gate named after the function), never a bare `#[test]`, and returns early only
/// through that gate — none of its own (scripts/check-phases.sh then fails a test that was
/// skipped in every phase).
#[test]
fn cluster_tests_return_early_only_through_the_phase_gate() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/cluster");
    let (mut tests, mut gated) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, line) in text.lines().enumerate() {
            let t = line.trim_start();
            let at = || format!("{}:{}", path.display(), i + 1);
            assert!(
                !t.starts_with("#[test]") && !t.starts_with("#[ignore"),
                "{}: a cluster test is a #[cluster_test]: {t}",
                at()
            );
            let bare_return = t.starts_with("return") && !t.starts_with("return ");
            assert!(
                !bare_return,
                "{}: an early return outside the phase gate: {t}",
                at()
            );
            assert!(
                !t.contains("runs_in("),
                "{}: the gate is #[cluster_test(PHASE)]",
                at()
            );
            if t.starts_with("#[cluster_test") {
                tests += 1;
                gated += usize::from(t.starts_with("#[cluster_test("));
            }
        }
    }
    assert!(
        tests >= 70 && gated >= 10,
        "the check saw {tests} cluster tests, {gated} gated: is it reading tests/cluster?"
    );
}

/// What a cluster test holds while its jobs run: the plugstack lock, shared, exclusive or
/// with its own plugstack line (tests/harness/lib.rs). A test without one could have its
/// jobs started under another test's line. A test that submits no job says so.
const PLUGSTACK_GUARDS: &[&str] = &[
    "shared_plugstack()",
    "exclusive_cluster()",
    "PlugstackOverride::",
    "multinode_plugstack(",
    "// submits no job",
];

/// The `#[cluster_test]` functions in `text` whose bodies hold none of [`PLUGSTACK_GUARDS`].
fn unguarded_cluster_tests(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cluster_test") {
        rest = &rest[at..];
        let name_at = rest.find("fn ").map_or(rest.len(), |i| i + 3);
        let name: String = rest[name_at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let Some(open) = rest.find('{') else { break };
        let (mut depth, mut end) = (0usize, rest.len());
        for (i, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let body = &rest[open..end];
        if !PLUGSTACK_GUARDS.iter().any(|g| body.contains(g)) {
            out.push(name);
        }
        rest = &rest[end..];
    }
    out
}

#[test]
fn every_cluster_test_holds_the_plugstack_lock() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/cluster");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for name in unguarded_cluster_tests(&text) {
            missing.push(format!("{}: {name}", path.display()));
        }
    }
    assert!(
        missing.is_empty(),
        "cluster tests without a plugstack guard:\n{}",
        missing.join("\n")
    );
    // The scan finds a planted one, and passes a guarded one.
    let planted = "#[cluster_test]\nfn a() {\n    let _p = shared_plugstack();\n    if x { y(); }\n}\n\
                   #[cluster_test(Phase::Cgroup)]\nfn b() {\n    let j = Submit::new(\"b\", \"true\").submit();\n    { j.wait(W); }\n}\n";
    assert_eq!(unguarded_cluster_tests(planted), ["b"]);
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
