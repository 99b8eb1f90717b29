//! `slurmwatch history` / `sizing` on real runs: three numbered runs of one workload
//! (`hist<tag>-train-1`, `-2`, `-3`, recorded with `--slurmwatch`) are grouped into one workload
//! and sized, `--mem` from the recorded working-set peak.

use std::process::Command;
use std::time::Duration;

use slurmwatch_tests::*;

const WAIT: Duration = Duration::from_secs(600);
const MIB: f64 = 1024.0 * 1024.0;

#[cluster_test]
fn numbered_runs_are_one_workload_sized_from_recorded_peaks() {
    let _p = shared_plugstack();
    // Job ids may repeat after a cluster wipe: the window starts now, not at an id.
    let since = format!("@{}", now() - 5);
    // A steady ~120 MiB working set for 4 s, some CPU.
    let script = r#"
python3 - <<'PY'
import time
a = bytearray(120 * 1024 * 1024)
for i in range(0, len(a), 4096): a[i] = 1
t = time.time()
while time.time() - t < 4: pass
PY
"#;
    // Digits collapse, so a per-run tag of letters keeps an earlier attempt's runs apart.
    let tag: String = std::process::id()
        .to_string()
        .bytes()
        .map(|d| (b'a' + (d - b'0')) as char)
        .collect();
    let workload = format!("hist{tag}-train-#");
    let names: Vec<String> = (1..=3).map(|i| format!("hist{tag}-train-{i}")).collect();
    let jobs: Vec<Job> = names
        .iter()
        .map(|n| {
            Submit::new(n, script)
                .arg("--slurmwatch=1")
                .arg("--mem=400M")
                .arg("--time=10")
                .user(USER1)
                .submit()
        })
        .collect();
    for j in &jobs {
        let l = j.wait(WAIT);
        assert_eq!(l.state, "COMPLETED", "{}", j.output());
        // The epilog (as Slurm runs it) writes the summary the sizing reads.
        let _ = Command::new(epilog_bin())
            .env("SLURM_JOB_ID", j.id.to_string())
            .output();
    }
    let until = format!("@{}", now() + 5);
    let h = cli_json(&["history", "-S", &since, "-E", &until, "-u", USER1, "--json"]);
    let w = h["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == workload.as_str())
        .unwrap_or_else(|| panic!("no {workload} workload: {h:#}"));
    assert_eq!(w["runs"], 3, "{w:#}");
    assert_eq!(w["names_covered"], 3);
    assert_eq!(w["completed"], 3);
    assert_eq!(w["recorded_runs"], 3, "each run has its file: {w:#}");

    let s = sizing_json(&since, &until, USER1, &workload);
    let ws = s["workloads"].as_array().unwrap();
    assert_eq!(ws.len(), 1, "{s:#}");
    let w = &ws[0];
    assert_eq!(w["name"], workload.as_str());
    assert_eq!(w["runs"], 3);
    let adv = |flag: &str| {
        w["advice"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["flag"] == flag)
            .unwrap_or_else(|| panic!("no {flag}: {w:#}"))
            .clone()
    };
    let mem = adv("--mem");
    assert!(
        mem["basis"]
            .as_str()
            .unwrap()
            .starts_with("recorded working-set peak (3 recorded runs"),
        "{mem:#}"
    );
    assert_ne!(mem["verdict"], "unknown", "{mem:#}");
    assert_eq!(mem["current"], "400M", "{mem:#}");
    // 120 MiB + interpreter, + 20 %: well under the 400 MiB asked.
    let sugg = mem["suggestion"].as_str().unwrap();
    let v: f64 = sugg[..sugg.len() - 1].parse().unwrap();
    let bytes = v * if sugg.ends_with('G') {
        1024.0 * MIB
    } else {
        MIB
    };
    assert!((120.0 * MIB..=400.0 * MIB).contains(&bytes), "{mem:#}");
    let time = adv("--time");
    assert_ne!(time["verdict"], "unknown", "{time:#}");
    assert_eq!(time["current"], "00:10:00");
    assert!(time["basis"].as_str().unwrap().contains("elapsed"));
    let cpus = adv("--cpus-per-task");
    assert!(
        cpus["basis"]
            .as_str()
            .unwrap()
            .starts_with("recorded peak cores"),
        "{cpus:#}"
    );
}
