//! A drop-in for a jobstats site (issue 38): a recorded GPU job's AdminComment is jobstats'
//! `JS1:` string, stored by the cluster's EpilogSlurmctld (contrib/slurmctld-epilog.sh →
//! `slurmwatch ctld-epilog` → `slurmwatch-dbd-comment`) with its case intact on Slurm 22.05,
//! decodes with Python's base64 + gzip + json exactly as jobstats' docs show into jobstats'
//! keys holding the recorded figures, and reportseff (PyPI, scripts/reportseff.sh) shows the
//! CPU, memory and GPU efficiency `slurmwatch report` shows — with the file and from the
//! AdminComment alone.

use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{json, Value};
use slurmwatch_tests::*;

const WAIT: Duration = Duration::from_secs(300);

/// Card `i` of the fake node; with `job_pid`, the job's shell holds 20 GiB of its 80 GiB
/// beside a neighbour's 30 GiB (never the job's).
fn card(i: u32, job_pid: Option<u32>) -> Value {
    let mut procs = vec![json!({ "pid": 1, "used_memory": 30u64 << 30 })];
    if let Some(p) = job_pid {
        procs.push(json!({ "pid": p, "used_memory": 20u64 << 30 }));
    }
    let mut c = fake_a100(i);
    c["processes"] = json!(procs);
    c
}

/// The AdminComment decoded as jobstats' docs show it (`base64 -d | gzip -d`, in Python).
pub(crate) fn python_decode(comment: &str) -> Value {
    let mut child = Command::new("python3")
        .args([
            "-c",
            "import base64, gzip, json, sys\n\
             s = sys.stdin.read().strip()\n\
             print(json.dumps(json.loads(gzip.decompress(base64.b64decode(s[4:])))))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), comment.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "python3: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

/// reportseff's CPUEff, MemEff, GPUEff, GPUMem for the job (percent), read from sacct and
/// the job's AdminComment by reportseff itself.
fn reportseff(job: u32) -> [f64; 4] {
    let o = Command::new(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/reportseff.sh"),
    )
    .args([
        "--no-color",
        "--parsable",
        "--format",
        "JobID,CPUEff,MemEff,GPUEff,GPUMem",
        &job.to_string(),
    ])
    .output()
    .expect("run scripts/reportseff.sh");
    let out = stdout(&o);
    assert!(o.status.success(), "reportseff: {}\n{out}", stderr(&o));
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("{job}|")))
        .unwrap_or_else(|| panic!("no line for job {job}:\n{out}"));
    let cells: Vec<&str> = line.split('|').collect();
    let pct = |s: &str| {
        s.trim()
            .trim_end_matches('%')
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("reportseff printed {s:?} for a figure:\n{out}"))
    };
    [pct(cells[1]), pct(cells[2]), pct(cells[3]), pct(cells[4])]
}

/// Equal as reportseff prints it: its one decimal moves a figure by up to 0.05, and the
/// JSON's CPU seconds, kept to three decimals, by up to 0.0005 s over the job's 8 s core
/// (0.006 points). CI saw both at once: 8.12351 core-s stored as 8.124, so 101.544 % became
/// 101.55 %, printed 101.6: 0.056 apart.
fn same_to_a_tenth(what: &str, reportseff: f64, ours: f64) {
    const DISPLAY: f64 = 0.05;
    const STORED_SECONDS: f64 = 100.0 * 0.0005 / 8.0;
    assert!(
        (reportseff - ours).abs() <= DISPLAY + STORED_SECONDS + 1e-9,
        "{what}: reportseff {reportseff}, slurmwatch report {ours}"
    );
}

// The fake cards are GRES of the single-node cluster only.
#[cluster_test(Phase::ExactlyNodes(1))]
fn jobstats_admin_comment_reads_in_python_and_reportseff_as_in_report() {
    let _p = PlugstackOverride::new(&format!(
        "spool=/var/spool/slurmwatch nvml={FAKE_NVML_INSTALLED}"
    ));
    assert!(
        cluster_has_gpu_gres(),
        "the single-node cluster has no GPU GRES"
    );
    install_fake_nvml();
    let _server = crate::slurmdbd::Server::start();
    set_fake_nvml_state(&json!({ "devices": (0..4).map(|i| card(i, None)).collect::<Vec<_>>() }));
    let script = "echo $$ > pid\npython3 -c \"import time; a = bytearray(200 << 20)\n\
                  for i in range(0, len(a), 4096): a[i] = 1\n\
                  t = time.time()\nwhile time.time() - t < 8: pass\"";
    let job = Submit::new("jobstats-gpu", script)
        .arg("--slurmwatch=1")
        .arg("--gres=gpu:2")
        .arg("--mem=1G")
        .arg("-t")
        .arg("5")
        .user(USER1)
        .submit();
    let pid = job.wait_for_number("pid", WAIT);
    set_fake_nvml_state(
        &json!({ "devices": (0..4).map(|i| card(i, Some(pid))).collect::<Vec<_>>() }),
    );
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());

    let comment = crate::slurmdbd::admin_comment(&job);
    // Exactly as written: 22.05's sacctmgr would have lowercased it.
    assert!(comment.starts_with("JS1:H4sI"), "job {}: {comment}", job.id);
    assert!(
        slurmwatch_core::analysis::admin_comment::is_ours(&comment),
        "{comment}"
    );
    let with_file = cli_json(&["report", &job.id.to_string(), "--json", "--no-log"]);
    assert_eq!(with_file["source"], "recorded_file");

    // jobstats' keys, holding the recorded figures.
    let d = python_decode(&comment);
    eprintln!("job {}: jobstats' keys: {}", job.id, {
        let mut d = d.clone();
        d.as_object_mut().unwrap().remove("slurmwatch");
        d
    });
    assert_eq!(d["gpus"], 2, "{d:#}");
    // Numbers compared as numbers (the report writes some integers as floats).
    let num = |v: &Value| {
        v.as_f64()
            .unwrap_or_else(|| panic!("not a number: {v} in {d:#}"))
    };
    assert_eq!(num(&d["total_time"]), num(&with_file["elapsed_seconds"]));
    let nodes = d["nodes"].as_object().unwrap();
    assert_eq!(nodes.len(), 1, "{d:#}");
    let n = nodes.values().next().unwrap();
    let file = |a: &str, b: &str| num(&with_file[a][b]);
    assert_eq!(num(&n["cpus"]), file("cpu", "cores_allocated"));
    assert_eq!(num(&n["total_memory"]), file("memory", "limit_bytes"));
    assert_eq!(
        num(&n["used_memory"]),
        file("memory", "peak_working_set_bytes")
    );
    assert!(num(&n["used_memory"]) > 200.0 * 1048576.0, "{n:#}");
    let cpu_s = file("cpu", "usage_seconds_total");
    // The job burns a core for 8 s; the machine's other work may take some of it.
    assert!(cpu_s > 1.0, "{cpu_s}");
    assert_eq!(num(&n["total_time"]), (cpu_s * 1000.0).round() / 1000.0);
    let cards = with_file["gpus"].as_array().unwrap();
    assert_eq!(cards.len(), 2, "{cards:#?}");
    for g in cards {
        let idx = g["nvml_index"].as_u64().unwrap().to_string();
        let at = |k: &str| num(&n[k][&idx]);
        assert_eq!(at("gpu_total_memory"), num(&g["memory_total_bytes"]));
        // The job's own 20 GiB, not the card's 51 (a neighbour's 30 beside it).
        assert_eq!(at("gpu_used_memory"), (20u64 << 30) as f64);
        assert_eq!(at("gpu_used_memory"), num(&g["peak_job_memory_bytes"]));
        assert_eq!(at("gpu_utilization"), num(&g["mean_utilization_percent"]));
    }

    // reportseff's efficiencies, from the AdminComment, equal the report's.
    let e = &with_file["efficiency"];
    let ours = |k: &str| {
        e[k].as_f64()
            .unwrap_or_else(|| panic!("report has no {k}: {e:#}"))
    };
    let [cpu, mem, gpu, gmem] = reportseff(job.id);
    eprintln!(
        "job {}: reportseff CPU {cpu} MEM {mem} GPU {gpu} GPUMEM {gmem}; report {} {} {} {}",
        job.id,
        ours("cpu_efficiency_percent"),
        ours("memory_efficiency_percent"),
        ours("gpu_utilization_percent"),
        ours("gpu_memory_efficiency_percent")
    );
    same_to_a_tenth("CPU", cpu, ours("cpu_efficiency_percent"));
    same_to_a_tenth("memory", mem, ours("memory_efficiency_percent"));
    same_to_a_tenth("GPU", gpu, ours("gpu_utilization_percent"));
    same_to_a_tenth("GPU memory", gmem, ours("gpu_memory_efficiency_percent"));
    assert_eq!(gmem, 25.0);

    // The file gone, the report reads the same figures from the AdminComment.
    let away = std::env::temp_dir().join(format!("slurmwatch-js-{}", std::process::id()));
    let _gone = crate::slurmdbd::FilesAway::new(&[job.id], &away);
    let from_comment = cli_json(&["report", &job.id.to_string(), "--json", "--no-log"]);
    assert_eq!(
        from_comment["source"], "slurmdbd_summary",
        "{:#}",
        from_comment["notes"]
    );
    for k in [
        "cpu_efficiency_percent",
        "memory_efficiency_percent",
        "gpu_utilization_percent",
        "gpu_memory_efficiency_percent",
    ] {
        assert_eq!(from_comment["efficiency"][k], e[k], "{k}");
    }
    assert_eq!(from_comment["gpus"], with_file["gpus"]);
}
