//! Efficiencies (issue 17) on real jobs: recorded and sacct-only runs of the same work
//! against sacct's own TotalCPU and elapsed and the allocation asked for (`-c`, `--mem`,
//! `-t`); a 4-task step's memory from sacct against the cgroup peak of a recorded run, and
//! sizing over several such runs; a GPU job against the fake cards' scripted state; a
//! multi-node job (in the multi-node phase).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use slurmwatch_tests::*;

const WAIT: Duration = Duration::from_secs(600);
const MIB: f64 = 1024.0 * 1024.0;
const GIB: f64 = 1024.0 * MIB;

/// The epilog as Slurm runs it (for a recorded job), then `report JOB --json --no-log`.
fn report(job: &Job, recorded: bool) -> Value {
    if recorded {
        let e = Command::new(epilog_bin())
            .env("SLURM_JOB_ID", job.id.to_string())
            .output()
            .expect("run the epilog");
        assert!(e.status.success(), "{}", stderr(&e));
    }
    let r = cli_json(&["report", &job.id.to_string(), "--json", "--no-log"]);
    assert_eq!(
        r["source"],
        if recorded {
            "recorded_file"
        } else {
            "sacct_only"
        },
        "{:#}",
        r["notes"]
    );
    r
}

/// Ground truth from sacct itself: the steps' TotalCPU summed, the job's elapsed seconds
/// and its CPUs.
struct Truth {
    cpu_seconds: f64,
    elapsed_seconds: f64,
    ncpus: f64,
}

fn truth(job: &Job) -> Truth {
    let lines = job.sacct();
    let id = job.id.to_string();
    let cpu_seconds = lines
        .iter()
        .filter(|l| l.job_id.starts_with(&format!("{id}.")))
        .filter_map(|l| sacct_duration_seconds(&l.total_cpu))
        .sum();
    let elapsed_seconds = lines
        .iter()
        .find(|l| l.job_id == id)
        .unwrap()
        .elapsed_seconds as f64;
    let o = run("sacct", &["-X", "-n", "-P", "-o", "NCPUS", "-j", &id]);
    let ncpus = stdout(&o).trim().parse().unwrap();
    Truth {
        cpu_seconds,
        elapsed_seconds,
        ncpus,
    }
}

fn pct(v: &Value, key: &str) -> f64 {
    v["efficiency"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is null: {:#}", v["efficiency"]))
}

fn basis(v: &Value, key: &str) -> String {
    v["efficiency"][key].as_str().unwrap_or("").to_string()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-9)
}

/// `1240M`, `1.5G` → bytes.
fn mem_value(v: &str) -> f64 {
    let (n, u) = v.split_at(v.len() - 1);
    n.parse::<f64>().unwrap()
        * match u {
            "T" => 1024.0 * GIB,
            "G" => GIB,
            "M" => MIB,
            "K" => 1024.0,
            _ => panic!("{v}"),
        }
}

/// Two cores busy for ~6 s under `-c 2 --mem=1G -t 5`, once recorded and once without
/// `--slurmwatch`: CPU, memory and time efficiency against sacct's TotalCPU and elapsed
/// and the allocation; the live view's JSON has them while the recorded job runs.
#[cluster_test]
fn effic_cpu_job_recorded_and_sacct_only() {
    let _p = shared_plugstack();
    let script =
        "for i in 1 2; do ( end=$((SECONDS+6)); while ((SECONDS<end)); do :; done ) & done; wait";
    let submit = |name: &'static str, rec: bool| {
        let mut s = Submit::new(name, script)
            .arg("-c")
            .arg("2")
            .arg("--mem=1G")
            .arg("-t")
            .arg("5")
            .user(USER1);
        if rec {
            s = s.arg("--slurmwatch=1");
        }
        s.submit()
    };
    let rec = submit("effic-cpu-rec", true);
    let plain = submit("effic-cpu-sacct", false);
    rec.wait_running(WAIT);
    // The live view: CPU so far ÷ (elapsed × 2 cores), with its basis.
    let end = Instant::now() + Duration::from_secs(20);
    let live = loop {
        std::thread::sleep(Duration::from_secs(2));
        let o = Command::new(slurmwatch_bin())
            .args([&rec.id.to_string(), "--once", "--json"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_default();
        if v["efficiency"]["cpu_efficiency_percent"].is_number() || Instant::now() > end {
            break v;
        }
    };
    let live_cpu = pct(&live, "cpu_efficiency_percent");
    eprintln!(
        "live CPU efficiency {live_cpu:.1} %: {:#}",
        live["efficiency"]
    );
    // Busy loops on a shared 2-core machine may get far less than their two cores while
    // another test runs (15 % seen): the live figure is only bounded here; the exact one is
    // checked against sacct's TotalCPU after the job.
    assert!(
        (1.0..=130.0).contains(&live_cpu),
        "{:#}",
        live["efficiency"]
    );
    assert!(basis(&live, "cpu_efficiency_basis").contains("2 cores allocated"));
    assert!(live["efficiency"]["time_efficiency_percent"].is_number());

    for (job, recorded) in [(&rec, true), (&plain, false)] {
        let line = job.wait(WAIT);
        assert_eq!(line.state, "COMPLETED", "{}", job.output());
        let t = truth(job);
        assert_eq!(t.ncpus, 2.0);
        let r = report(job, recorded);
        let want_cpu = t.cpu_seconds * 100.0 / (t.elapsed_seconds * 2.0);
        let cpu = pct(&r, "cpu_efficiency_percent");
        let time = pct(&r, "time_efficiency_percent");
        let mem = pct(&r, "memory_efficiency_percent");
        eprintln!(
            "job {} ({}): CPU {cpu:.2} % (sacct: {want_cpu:.2} %), time {time:.2} %, memory {mem:.3} %: {:#}",
            job.id,
            if recorded { "recorded" } else { "sacct only" },
            r["efficiency"]
        );
        // Other tests' jobs (and builds) share the machine's 2 real cores: the job burns
        // what it gets (2.6 CPU-s of 12 seen under load); the figures below are checked
        // against sacct's, whatever they are.
        assert!(
            t.cpu_seconds > 0.5,
            "two busy loops for 6 s: {} CPU-s",
            t.cpu_seconds
        );
        if recorded {
            // The cgroup's CPU time against sacct's TotalCPU (slurmstepd and the sampler
            // are in the cgroup, not in TotalCPU).
            assert!(close(cpu, want_cpu, 0.10), "{cpu} vs {want_cpu}");
            assert!(basis(&r, "cpu_efficiency_basis").contains("recording"));
            let ws = r["memory"]["peak_working_set_bytes"].as_f64().unwrap();
            if cluster_mode() == "cgroup" {
                assert!(close(mem, ws * 100.0 / GIB, 1e-4), "{mem} vs {ws}");
                assert!(basis(&r, "memory_efficiency_basis").contains("working-set peak"));
            }
        } else {
            assert!(close(cpu, want_cpu, 1e-4), "{cpu} vs {want_cpu}");
            assert!(basis(&r, "cpu_efficiency_basis").contains("sacct TotalCPU"));
            let m = r["memory"]["sacct_memory_per_node_bytes"].as_f64().unwrap();
            assert!(close(mem, m * 100.0 / GIB, 1e-4), "{mem} vs {m}");
            assert!(
                basis(&r, "memory_efficiency_basis").contains("sacct MaxRSS: one task"),
                "{}",
                basis(&r, "memory_efficiency_basis")
            );
            assert!(r["efficiency"]["memory_max_rss_efficiency_percent"].is_number());
        }
        // -t 5: 300 s.
        assert!(
            close(time, t.elapsed_seconds * 100.0 / 300.0, 1e-4),
            "{time}"
        );
        assert!(r["efficiency"]["gpu_utilization_percent"].is_null());
        assert_eq!(
            r["efficiency"]["gpu_utilization_percent_reason"],
            "the job has no GPUs"
        );
    }
}

const FOUR_TASKS: &str = r#"
cat > mt.py <<'PY'
import time
MiB = 1 << 20
a = bytearray(300 * MiB)
for i in range(0, len(a), 4096): a[i] = 1
time.sleep(6)
PY
srun -n 4 -O python3 mt.py
"#;

/// `srun -n 4` tasks each holding ~300 MiB under `--mem=2G`: sacct's memory (the four
/// tasks' peaks summed) is within 10 % of the cgroup's real peak of a recorded run of the
/// same job, never one task's MaxRSS; `sizing` over three such runs never advises below it.
#[cluster_test]
fn effic_four_tasks_sacct_sum_matches_cgroup_peak_and_sizing() {
    let _p = shared_plugstack();
    let since = format!("@{}", now() - 5);
    let tag = tag();
    let submit = |name: &str, rec: bool| {
        let mut s = Submit::new(name, FOUR_TASKS)
            .arg("-n")
            .arg("4")
            .arg("-O")
            .arg("--mem=2G")
            .arg("-t")
            .arg("5")
            .user(USER1);
        if rec {
            s = s.arg("--slurmwatch=1");
        }
        s.submit()
    };
    let rec_name = format!("effmt{tag}-rec");
    let rec = submit(&rec_name, true);
    let names: Vec<String> = (1..=3).map(|i| format!("effmt{tag}-run-{i}")).collect();
    let runs: Vec<Job> = names.iter().map(|n| submit(n, false)).collect();

    assert_eq!(rec.wait(WAIT).state, "COMPLETED", "{}", rec.output());
    let r = report(&rec, true);
    let step0 = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "0")
        .unwrap_or_else(|| panic!("no step 0: {:#}", r["steps"]))
        .clone();
    let cgroup_peak = step0["peak_working_set_bytes"]
        .as_f64()
        .unwrap_or_else(|| panic!("step 0 has no recorded peak: {step0:#}"));
    let rec_sum = r["memory"]["sacct_memory_per_node_bytes"].as_f64().unwrap();
    eprintln!(
        "recorded job {}: cgroup step-0 peak {:.1} MiB, its sacct tasks' sum {:.1} MiB ({:+.1} %)",
        rec.id,
        cgroup_peak / MIB,
        rec_sum / MIB,
        (rec_sum - cgroup_peak) * 100.0 / cgroup_peak
    );
    assert!(cgroup_peak > 4.0 * 290.0 * MIB, "{cgroup_peak}");

    let mut largest: f64 = 0.0;
    for j in &runs {
        assert_eq!(j.wait(WAIT).state, "COMPLETED", "{}", j.output());
        let v = report(j, false);
        let sum = v["memory"]["sacct_memory_per_node_bytes"].as_f64().unwrap();
        let rss = v["memory"]["sacct_max_rss_bytes"].as_f64().unwrap();
        let diff = (sum - cgroup_peak) * 100.0 / cgroup_peak;
        eprintln!(
            "sacct-only job {}: sum of 4 tasks {:.1} MiB vs cgroup peak {:.1} MiB ({diff:+.1} %); MaxRSS {:.1} MiB; memory efficiency {:.1} % (MaxRSS ÷ request {:.1} %)",
            j.id,
            sum / MIB,
            cgroup_peak / MIB,
            rss / MIB,
            pct(&v, "memory_efficiency_percent"),
            pct(&v, "memory_max_rss_efficiency_percent"),
        );
        assert!(diff.abs() < 10.0, "{diff:.1} %");
        assert_eq!(
            v["memory"]["sacct_memory_basis"],
            "sacct: sum of 4 tasks' peaks (TRESUsageInTot)"
        );
        assert!(
            basis(&v, "memory_efficiency_basis").contains("sum of 4 tasks' peaks"),
            "{:#}",
            v["efficiency"]
        );
        assert!(close(
            pct(&v, "memory_efficiency_percent"),
            sum * 100.0 / (2.0 * GIB),
            1e-4
        ));
        assert!(close(
            pct(&v, "memory_max_rss_efficiency_percent"),
            rss * 100.0 / (2.0 * GIB),
            1e-4
        ));
        largest = largest.max(sum);
    }

    let until = format!("@{}", now() + 5);
    let workload = format!("effmt{tag}-run-#");
    let s = sizing_json(&since, &until, USER1, &workload);
    let w = &s["workloads"][0];
    assert_eq!(w["runs"], 3, "{s:#}");
    let mem = w["advice"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["flag"] == "--mem")
        .unwrap()
        .clone();
    eprintln!("sizing --mem: {mem:#}");
    assert!(
        mem["basis"]
            .as_str()
            .unwrap()
            .starts_with("sacct: sum of 4 tasks' peaks"),
        "{mem:#}"
    );
    let sugg = mem_value(mem["suggestion"].as_str().expect("a suggestion"));
    assert!(sugg >= largest, "{sugg} below the tasks' sum {largest}");
    assert!(
        sugg >= cgroup_peak,
        "{sugg} below the cgroup peak {cgroup_peak}"
    );
}

fn card(i: u32, job_pid: Option<u32>) -> Value {
    let mut procs = vec![json!({ "pid": 1, "used_memory": 30u64 << 30 })];
    if let Some(p) = job_pid {
        procs.push(json!({ "pid": p, "used_memory": 20u64 << 30 }));
    }
    let mut c = fake_a100(i);
    c["processes"] = json!(procs);
    c
}

/// Two cards from the fake NVML, each `utilization_gpu` 90 + its NVML index, the job's
/// shell holding 20 GiB of each 80 GiB card beside a neighbour's 30 GiB: per-card and
/// overall GPU utilization and GPU-memory efficiency (the job's 20 GiB, not the card's 51).
// The fake cards are GRES of the single-node cluster only.
#[cluster_test(Phase::ExactlyNodes(1))]
fn effic_gpu_job_against_the_fake_cards() {
    let _p = PlugstackOverride::new(&format!(
        "spool=/var/spool/slurmwatch nvml={FAKE_NVML_INSTALLED}"
    ));
    assert!(
        cluster_has_gpu_gres(),
        "the single-node cluster has no GPU GRES"
    );
    install_fake_nvml();
    set_fake_nvml_state(&json!({ "devices": (0..4).map(|i| card(i, None)).collect::<Vec<_>>() }));
    let job = Submit::new("effic-gpu", "echo $$ > pid\nsleep 8")
        .arg("--slurmwatch=1")
        .arg("--gres=gpu:2")
        .arg("-t")
        .arg("5")
        .submit();
    let pid = job.wait_for_number("pid", WAIT);
    set_fake_nvml_state(
        &json!({ "devices": (0..4).map(|i| card(i, Some(pid))).collect::<Vec<_>>() }),
    );
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let reader = slurmwatch_core::store::Reader::open(&spool_file(job.id)).unwrap();
    let nvml: Vec<(String, u32)> = reader
        .gpus()
        .unwrap()
        .iter()
        .map(|g| (g.card.label(), g.card.nvml_index))
        .collect();
    assert_eq!(nvml.len(), 2, "{nvml:?}");
    let r = report(&job, true);
    let e = &r["efficiency"];
    eprintln!("GPU job {}: {e:#}", job.id);
    let mut want_mean = 0.0;
    for (label, idx) in &nvml {
        let g = e["gpus"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["label"] == label.as_str())
            .unwrap_or_else(|| panic!("no {label}: {e:#}"));
        assert_eq!(g["utilization_percent"], f64::from(90 + idx), "{g:#}");
        assert_eq!(g["memory_efficiency_percent"], 25.0, "{g:#}");
        want_mean += f64::from(90 + idx) / 2.0;
    }
    assert_eq!(e["gpu_utilization_percent"], want_mean, "{e:#}");
    assert_eq!(e["gpu_memory_efficiency_percent"], 25.0, "{e:#}");
    assert!(e["gpu_memory_efficiency_basis"]
        .as_str()
        .unwrap()
        .contains("the job's processes"));
}

/// Two nodes, two tasks each burning CPU and holding ~300 MiB, recorded and sacct-only:
/// CPU and time efficiency against sacct; memory per node from the recordings' largest
/// node, and from sacct bounded by the busiest node (never below what a node used).
#[cluster_test(Phase::Nodes(2))]
fn effic_multinode_job() {
    let _o = PlugstackOverride::new(&format!("spool={SPOOL}/%n"));
    let script = r#"
cat > mt.py <<'PY'
import time
MiB = 1 << 20
a = bytearray(300 * MiB)
for i in range(0, len(a), 4096): a[i] = 1
t = time.time()
while time.time() - t < 4: pass
time.sleep(2)
PY
srun -n 4 python3 mt.py
"#;
    let submit = |name: &'static str, rec: bool| {
        let mut s = Submit::new(name, script)
            .arg("--nodes=2")
            .arg("--ntasks-per-node=2")
            .arg("--mem=1G")
            .arg("-t")
            .arg("5");
        if rec {
            s = s.arg("--slurmwatch=1");
        }
        s.submit()
    };
    let rec = submit("effic-mn-rec", true);
    let plain = submit("effic-mn-sacct", false);
    let mut per_node_peak = None;
    for (job, recorded) in [(&rec, true), (&plain, false)] {
        assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
        let t = truth(job);
        // Each node's file, found through the site's plugstack line (`spool=…/%n`).
        let r = report(job, recorded);
        let cpu = pct(&r, "cpu_efficiency_percent");
        let want = t.cpu_seconds * 100.0 / (t.elapsed_seconds * t.ncpus);
        let mem = pct(&r, "memory_efficiency_percent");
        eprintln!(
            "multi-node job {} ({}): CPU {cpu:.2} % (sacct {want:.2} %, {} CPUs), memory {mem:.1} % ({}), time {:.2} %",
            job.id,
            if recorded { "recorded" } else { "sacct only" },
            t.ncpus,
            basis(&r, "memory_efficiency_basis"),
            pct(&r, "time_efficiency_percent")
        );
        assert!(close(
            pct(&r, "time_efficiency_percent"),
            t.elapsed_seconds * 100.0 / 300.0,
            1e-4
        ));
        if recorded {
            assert!(close(cpu, want, 0.15), "{cpu} vs {want}");
            let peak = r["memory"]["peak_working_set_bytes"].as_f64().unwrap();
            assert!(
                peak > 2.0 * 290.0 * MIB,
                "two tasks on the busiest node: {peak}"
            );
            assert!(close(mem, peak * 100.0 / GIB, 1e-4), "{mem} vs {peak}");
            per_node_peak = Some(peak);
        } else {
            assert!(close(cpu, want, 1e-4), "{cpu} vs {want}");
            assert!(
                basis(&r, "memory_efficiency_basis").contains("2 tasks per node"),
                "{}",
                basis(&r, "memory_efficiency_basis")
            );
            let m = r["memory"]["sacct_memory_per_node_bytes"].as_f64().unwrap();
            let peak = per_node_peak.unwrap();
            assert!(
                m >= peak * 0.95,
                "sacct per node {m} below the recorded {peak}"
            );
        }
    }
}
