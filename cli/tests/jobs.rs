//! `slurmwatch jobs` end to end over sacct output captured on the test cluster (Slurm
//! 22.05.8: core/tests/fixtures/sacct), served by a fake `sacct` that logs its arguments.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const U: char = '\u{1f}';
/// Captures that share one header (one `sacct -j a,b,c` answer is their lines under it).
const CAPTURES: &[&str] = &[
    "completed",
    "array_task",
    "oom",
    "failed_127",
    "timeout",
    "cancelled",
];

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../core/tests/fixtures/sacct")
        .join(format!("{name}.txt"));
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One answer: the shared header, then every capture's lines (`edit` may rewrite them).
fn answer(edit: impl Fn(String) -> String) -> String {
    answer_of(CAPTURES, edit)
}

fn answer_of(captures: &[&str], edit: impl Fn(String) -> String) -> String {
    let first = fixture(CAPTURES[0]);
    let header = first.lines().next().unwrap().to_string();
    let mut out = header.clone() + "\n";
    for c in captures {
        let t = fixture(c);
        assert_eq!(t.lines().next().unwrap(), header, "{c}: another header");
        for l in t.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            out += &edit(l.to_string());
            out.push('\n');
        }
    }
    out
}

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new(text: &str) -> Fake {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("answer"), text).unwrap();
        let script = format!(
            "#!/bin/sh\necho \"$@\" >> {log}\n{replay}",
            log = dir.path().join("calls").display(),
            replay = slurmwatch_core::history::fixture::replay(
                &dir.path().join("answer"),
                slurmwatch_core::slurm::sacct::DELIMITER
            )
        );
        let p = dir.path().join("sacct");
        std::fs::write(&p, script).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("spool")).unwrap();
        Fake { dir }
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn run(&self, args: &[&str]) -> Output {
        let spool: PathBuf = self.dir.path().join("spool");
        Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
            .args(args)
            .arg("--spool")
            .arg(&spool)
            .env("SLURMWATCH_SACCT", self.dir.path().join("sacct"))
            .output()
            .unwrap()
    }
}

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The captures' job lines as sacct printed them: (JobID, State).
fn truth() -> Vec<(String, String)> {
    let a = answer(|l| l);
    let mut lines = a.lines();
    let h: Vec<&str> = lines.next().unwrap().split(U).collect();
    let col = |n: &str| h.iter().position(|x| *x == n).unwrap();
    lines
        .map(|l| l.split(U).collect::<Vec<_>>())
        .filter(|v| !v[col("JobID")].contains('.'))
        .map(|v| {
            (
                v[col("JobID")].to_string(),
                v[col("State")].split(' ').next().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn one_query_one_row_per_job_with_the_reports_figures() {
    let fake = Fake::new(&answer(|l| l));
    let ids: Vec<String> = truth().into_iter().map(|(j, _)| j).collect();
    let mut args = vec!["jobs", "--json"];
    args.extend(ids.iter().map(String::as_str));
    let v: serde_json::Value = serde_json::from_str(&stdout(&fake.run(&args))).unwrap();
    // One sacct call for the whole set, every id in one -j.
    let calls = fake.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(
        calls[0].contains(&format!("-j {}", ids.join(","))),
        "{}",
        calls[0]
    );
    let jobs = v["jobs"].as_array().unwrap();
    let got: Vec<(String, String)> = jobs
        .iter()
        .map(|j| {
            (
                j["job_id"].as_str().unwrap().into(),
                j["state"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(got, truth());
    // Each row's efficiencies are the job's report's, as is (the report asked alone).
    for (j, capture) in jobs.iter().zip(CAPTURES) {
        let id = j["job_id"].as_str().unwrap();
        assert_eq!(j["basis"], "sacct");
        let one = Fake::new(&answer_of(&[capture], |l| l));
        let rep: serde_json::Value =
            serde_json::from_str(&stdout(&one.run(&["report", "--json", "--no-log", id]))).unwrap();
        assert_eq!(j["efficiency"], rep["efficiency"], "job {id}");
    }
    // A job with steps has a CPU figure; sacct's timeout job ran its whole limit.
    let timeout = jobs.iter().find(|j| j["state"] == "TIMEOUT").unwrap();
    assert!(
        timeout["efficiency"]["time_efficiency_percent"]
            .as_f64()
            .unwrap()
            > 100.0
    );
}

#[test]
fn text_table_array_summary_and_output_files() {
    let fake = Fake::new(&answer(|l| l));
    let d = tempfile::tempdir().unwrap();
    for n in ["slurm-94.out", "slurm-103_1.out", "notes.txt"] {
        std::fs::write(d.path().join(n), "").unwrap();
    }
    let out = stdout(&fake.run(&["jobs", d.path().to_str().unwrap()]));
    assert!(
        fake.calls()[0].contains("-j 103_1,94"),
        "{:?}",
        fake.calls()
    );
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["JobID", "State", "Elapsed", "TimeEff", "CPUEff", "MemEff", "GPUEff", "GPUMem", "Basis"]
    );
    // The fake answers every capture: each is a row, no GPU figure is made up.
    assert_eq!(out.lines().count(), 1 + truth().len(), "{out}");
    assert!(
        out.lines()
            .skip(1)
            .all(|l| l.contains("---") && l.ends_with("sacct")),
        "{out}"
    );
    let summarised = stdout(&fake.run(&[
        "jobs",
        "--array-summary",
        "--parsable",
        "--format",
        "JobID,State",
        "103",
    ]));
    assert!(
        summarised.lines().any(|l| l == "103_[1]|COMPLETED"),
        "{summarised}"
    );
    assert!(
        !summarised.lines().any(|l| l.starts_with("103_1|")),
        "{summarised}"
    );
}

#[test]
fn csv_escapes_a_formula_job_name() {
    let fake = Fake::new(&answer(|l| {
        l.replacen(&format!("{U}completed{U}"), &format!("{U}=cmd(){U}"), 1)
    }));
    let out = stdout(&fake.run(&["jobs", "--csv", "--format", "JobID,JobName,CPUEff", "94"]));
    let row = out
        .lines()
        .find(|l| l.starts_with("94,"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(row.starts_with("94,'=cmd(),"), "{row}");
    let cpu: f64 = row.rsplit(',').next().unwrap().parse().unwrap();
    assert!(cpu > 0.0 && cpu <= 100.0, "{row}");
}

#[test]
fn bad_input_is_one_sentence_and_exit_2() {
    let fake = Fake::new(&answer(|l| l));
    for (args, says) in [
        (&["jobs", "--format", "JobID,Bogus", "94"][..], "\"Bogus\""),
        (&["jobs", "7_[9-1]"][..], "backwards"),
        (
            &["jobs", "/nonexistent/slurm-x.out"][..],
            "neither a job id",
        ),
    ] {
        let o = fake.run(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 2, "a sentence and a hint: {err}");
    }
    assert!(fake.calls().is_empty(), "bad input never reaches sacct");
}
