//! The job-log scanner on captured logs (core/tests/fixtures/joblog/): PyTorch CUDA OOM,
//! NCCL watchdog timeouts and system errors, Python/Lmod/Tcl missing modules, the `module`
//! command missing, bash's "command not found", chained tracebacks, and a clean log.

use serde_json::json;
use slurmwatch_core::analysis::joblog::{scan, Scan};
use slurmwatch_core::analysis::Finding;

fn fixture(name: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/joblog")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn codes(s: &Scan) -> Vec<&'static str> {
    s.findings().iter().map(|f| f.code).collect()
}

fn find(s: &Scan, code: &str) -> Finding {
    s.findings()
        .into_iter()
        .find(|f| f.code == code)
        .unwrap_or_else(|| panic!("no {code}"))
}

#[test]
fn pytorch_cuda_oom_and_its_traceback() {
    let s = scan(&fixture("pytorch_cuda_oom.err"));
    assert_eq!(codes(&s), vec!["cuda_oom", "traceback"]);
    let f = find(&s, "cuda_oom");
    assert_eq!(f.facts["tried_to_allocate"], "2.00 GiB");
    assert_eq!(f.facts["count"], 1);
    assert!(f.sentence.contains("2.00 GiB"), "{}", f.sentence);
    let t = find(&s, "traceback");
    assert_eq!(t.facts["exception"], "torch.OutOfMemoryError");
    assert_eq!(t.facts["line"], 2264);
    assert_eq!(t.facts["function"], "embedding");
    let lines = t.facts["lines"].as_array().unwrap();
    // Header, "… N more", two frames (File + source, no ^^^ markers), the exception.
    assert_eq!(lines.len(), 7, "{lines:#?}");
    assert!(lines[1].as_str().unwrap().contains("2 more frame"));
    assert!(lines.iter().all(|l| !l.as_str().unwrap().contains("^^^")));
    // Quoted lines are bounded.
    assert!(lines.last().unwrap().as_str().unwrap().chars().count() <= 241);
}

#[test]
fn nccl_watchdog_timeout() {
    let s = scan(&fixture("nccl_watchdog.err"));
    assert_eq!(codes(&s), vec!["nccl_error"]);
    let f = find(&s, "nccl_error");
    assert_eq!(f.facts["op_type"], "ALLREDUCE");
    assert_eq!(f.facts["timeout_ms"], 600000);
    assert!(f.facts["watchdog_timeouts"].as_u64().unwrap() >= 2);
    assert!(
        f.sentence.contains("ALLREDUCE") && f.sentence.contains("600 s"),
        "{}",
        f.sentence
    );
}

#[test]
fn nccl_system_error_with_warn_line() {
    let s = scan(&fixture("nccl_system_error.err"));
    assert_eq!(codes(&s), vec!["nccl_error", "traceback"]);
    let f = find(&s, "nccl_error");
    assert_eq!(f.facts["watchdog_timeouts"], 0);
    assert!(f.facts["errors"].as_u64().unwrap() >= 3); // WARN, DistBackendError, ncclSystemError
    assert!(
        f.sentence.contains("NCCL WARN socketStartConnect"),
        "{}",
        f.sentence
    );
    let t = find(&s, "traceback");
    assert_eq!(t.facts["exception"], "torch.distributed.DistBackendError");
    assert_eq!(
        t.facts["file"],
        "/scratch/carol/venv/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py"
    );
}

#[test]
fn python_module_not_found_last_of_chained_tracebacks() {
    let s = scan(&fixture("python_module_not_found.err"));
    assert_eq!(codes(&s), vec!["module_not_found", "traceback"]);
    let m = find(&s, "module_not_found");
    assert_eq!(m.facts["modules"], json!(["torch"]));
    assert_eq!(m.facts["python_modules"], json!(["torch"]));
    assert!(m.sentence.contains("`torch`"));
    let t = find(&s, "traceback");
    assert_eq!(t.facts["exception"], "ModuleNotFoundError");
    assert_eq!(t.facts["message"], "No module named 'torch'");
    assert_eq!(t.facts["file"], "/home/dave/proj/train.py");
    assert_eq!(t.facts["line"], 5);
    assert_eq!(t.facts["function"], "<module>");
}

#[test]
fn lmod_unknown_module_and_a_missing_command() {
    let s = scan(&fixture("lmod_unknown.out"));
    assert_eq!(codes(&s), vec!["module_not_found", "command_not_found"]);
    let m = find(&s, "module_not_found");
    assert_eq!(m.facts["environment_modules"], json!(["cuda/99.1"]));
    assert_eq!(m.facts["module_command_missing"], false);
    let c = find(&s, "command_not_found");
    assert_eq!(c.facts["commands"], json!(["nvcc"]));
}

#[test]
fn module_command_missing_is_not_a_missing_program() {
    let s = scan(&fixture("module_command_missing.out"));
    assert_eq!(codes(&s), vec!["module_not_found", "command_not_found"]);
    let m = find(&s, "module_not_found");
    assert_eq!(m.facts["module_command_missing"], true);
    assert!(m.sentence.contains("`module` command does not exist"));
    assert_eq!(
        find(&s, "command_not_found").facts["commands"],
        json!(["gmx_mpi"])
    );
}

#[test]
fn tcl_environment_modules() {
    let s = scan(&fixture("tcl_modules.out"));
    assert_eq!(codes(&s), vec!["module_not_found"]);
    assert_eq!(
        find(&s, "module_not_found").facts["environment_modules"],
        json!(["openmpi/9.9", "intel/2031"])
    );
}

#[test]
fn a_clean_log_says_nothing() {
    let s = scan(&fixture("clean.out"));
    assert_eq!(codes(&s), Vec::<&str>::new(), "{s:#?}");
}

#[test]
fn stdout_and_stderr_merge() {
    let mut s = scan(&fixture("lmod_unknown.out"));
    s.merge(scan(&fixture("python_module_not_found.err")));
    let m = find(&s, "module_not_found");
    assert_eq!(m.facts["modules"], json!(["torch", "cuda/99.1"]));
    assert_eq!(
        find(&s, "traceback").facts["exception"],
        "ModuleNotFoundError"
    );
}

#[test]
fn a_truncated_traceback_is_not_reported() {
    // The tail was cut inside a traceback: no exception line, so no traceback finding.
    let s =
        scan("Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n    f()\n");
    assert!(s.traceback.is_none());
}

#[test]
fn rank_prefixed_traceback() {
    let text = "[rank1]: Traceback (most recent call last):\n[rank1]:   File \"/w/t.py\", line 9, in <module>\n[rank1]:     x = y\n[rank1]: NameError: name 'y' is not defined\n";
    let s = scan(text);
    let t = s.traceback.expect("a traceback");
    assert_eq!(t.exception, "NameError");
    assert_eq!(t.line, Some(9));
}
