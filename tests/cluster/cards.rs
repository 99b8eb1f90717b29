//! `slurmwatch cards` on the real cluster: six recorded GPU jobs on the fake 4-card node, card 2
//! held back by a hardware slowdown (SM 385 of 1785 MHz, 163 of 400 W) in four of them and
//! healthy in two; card 1 at its power limit throughout, cards 0 and 3 healthy. The cross-job
//! view names card 2 alone, by UUID and node, with 4 of 6; the fifth job's report says the
//! card was held back in the other jobs too.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use slurmwatch_core::store::Reader;
use slurmwatch_tests::*;

const WAIT: Duration = Duration::from_secs(300);

/// The node's four cards for one job: card 2 held back or healthy, card 1 at its power cap.
fn devices(card2_slow: bool) -> Value {
    let cards: Vec<Value> = (0..4)
        .map(|i| {
            let mut c = fake_a100(i);
            if i != 1 {
                // Healthy and not at the limit: nothing holds the clocks back.
                c["power_usage_mw"] = json!(250_000);
                c["throttle_reasons"] = json!(0);
            }
            if i == 2 && card2_slow {
                c["sm_clock"] = json!(385);
                c["power_usage_mw"] = json!(163_000);
                c["temperature"] = json!(52);
                c["throttle_reasons"] = json!(8); // nvmlClocksThrottleReasonHwSlowdown
            }
            c
        })
        .collect();
    json!({ "devices": cards })
}

/// Waits until every card of the job's file has at least `n` readings.
fn wait_for_card_rows(job: u32, n: usize) {
    let end = Instant::now() + Duration::from_secs(90);
    let enough = || {
        Reader::open(&spool_file(job)).ok().and_then(|r| {
            let gpus = r.gpus().ok()?;
            Some(
                gpus.len() == 4
                    && gpus
                        .iter()
                        .all(|g| r.gpu_samples(g.id).is_ok_and(|rows| rows.len() >= n)),
            )
        }) == Some(true)
    };
    while !enough() {
        assert!(
            Instant::now() < end,
            "job {job}: its four cards never had {n} readings"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn cli(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(slurmwatch_bin())
        .args(args)
        .output()
        .expect("run slurmwatch");
    (o.status.code(), stdout(&o), stderr(&o))
}

#[cluster_test]
fn a_card_held_back_in_4_of_6_jobs_is_named_across_jobs() {
    // The override's lock first: the fake cards' state is one file every GPU test writes.
    let _p = PlugstackOverride::new(&format!(
        "spool=/var/spool/slurmwatch nvml={FAKE_NVML_INSTALLED}"
    ));
    install_fake_nvml();
    // Each job's summary reaches slurmdbd (AdminComment), for the files-away half below.
    let _server = crate::slurmdbd::Server::start();
    let since = now() - 2;
    // The fifth job is held back: its report hears of the three before it (and the two healthy).
    let pattern = [true, false, true, true, true, false];
    // Each job holds all four cards; it ends when the test has seen its cards' readings.
    let script = "for i in $(seq 1 900); do [ -e done ] && break; sleep 0.1; done";
    let mut ids = Vec::new();
    for slow in pattern {
        set_fake_nvml_state(&devices(slow));
        let mut submit = Submit::new("cards", script)
            .arg("--slurmwatch=1")
            .arg("--time=5");
        submit = if cluster_has_gpu_gres() {
            submit.arg("--gres=gpu:4")
        } else {
            submit.env("CUDA_VISIBLE_DEVICES", "0,1,2,3")
        };
        let job = submit.submit();
        let _cancel = CancelOnDrop(job.id);
        wait_for_card_rows(job.id, 3);
        std::fs::write(job.dir.join("done"), b"").unwrap();
        assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
        // The epilog (as Slurm runs it) writes the summary the view reads.
        let _ = Command::new(epilog_bin())
            .env("SLURM_JOB_ID", job.id.to_string())
            .output();
        ids.push(job.id);
    }
    let node = Reader::open(&spool_file(ids[0]))
        .unwrap()
        .meta()
        .unwrap()
        .node;
    let card2 = fake_a100(2)["uuid"].as_str().unwrap().to_string();
    let (s, e) = (format!("@{since}"), format!("@{}", now() + 2));

    let (code, out, err) = cli(&["cards", "-S", &s, "-E", &e, "--json"]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|x| panic!("{x}: {out}"));
    assert_eq!(v["window"]["gpu_jobs"], 6, "{v:#}");
    assert_eq!(v["named_cards"], json!([card2]), "{v:#}");
    let c = &v["cards"][0];
    assert_eq!(c["uuid"], card2.as_str());
    assert_eq!(c["node"], node.as_str());
    assert_eq!(
        (c["held_back_jobs"].as_u64(), c["jobs"].as_u64()),
        (Some(4), Some(6)),
        "{c:#}"
    );
    assert_eq!(c["held_back_sm_clock_mhz"], 385.0, "{c:#}");
    assert_eq!(c["sm_clock_max_mhz"], 1785, "{c:#}");
    assert_eq!(c["held_back_power_watts"], 163.0, "{c:#}");
    assert_eq!(c["held_back_power_limit_watts"], 400.0, "{c:#}");
    for other in &v["cards"].as_array().unwrap()[1..] {
        assert_eq!(
            other["held_back_jobs"], 0,
            "power-limited or healthy: {other:#}"
        );
        assert_eq!(other["named"], false);
    }
    assert_eq!(v["exclude"], format!("--exclude={node}"));

    let (code, text, err) = cli(&["cards", "-S", &s, "-E", &e]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        text.contains(&format!("{card2} on {node}, nvml 2"))
            && text.contains("held back in 4 of 6 jobs"),
        "{text}"
    );
    assert!(
        text.contains(&format!("#SBATCH --exclude={node}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("scontrol update NodeName={node} State=DRAIN")),
        "{text}"
    );
    assert_eq!(text.matches("◀ named").count(), 1, "{text}");

    // The fifth job's report: the card, not the code. Earlier runs' jobs on the same fake card
    // may be within its four weeks too, so at least this test's own.
    let (code, out, err) = cli(&["report", &ids[4].to_string(), "--json", "--no-log"]);
    assert_eq!(code, Some(0), "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    let f = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "gpu_card_history")
        .unwrap_or_else(|| panic!("no gpu_card_history: {:#}", r["findings"]));
    assert_eq!(f["facts"]["uuid"], card2.as_str(), "{f:#}");
    assert!(
        f["facts"]["other_jobs_held_back"].as_u64() >= Some(3),
        "{f:#}"
    );
    assert!(f["facts"]["other_jobs"].as_u64() >= Some(5), "{f:#}");
    let sentence = f["sentence"].as_str().unwrap();
    assert!(
        sentence.contains(&format!(
            "this card ({card2}, {node}) was also held back in"
        )),
        "{sentence}"
    );
    // A healthy job's report has no such line.
    let (_, out, _) = cli(&["report", &ids[1].to_string(), "--json", "--no-log"]);
    assert!(!out.contains("gpu_card_history"), "{out}");

    // The same answers from the summaries in slurmdbd alone, every file moved away.
    let jobs: Vec<Job> = ids
        .iter()
        .map(|&id| Job {
            id,
            dir: std::env::temp_dir(),
            log_offset: 0,
        })
        .collect();
    for j in &jobs {
        let c = crate::slurmdbd::admin_comment(j);
        assert!(
            c.starts_with("JS1:") && slurmwatch_core::analysis::admin_comment::is_ours(&c),
            "job {}: {c}",
            j.id
        );
    }
    {
        let away = std::env::temp_dir().join(format!("slurmwatch-cards-{}", std::process::id()));
        let _gone = crate::slurmdbd::FilesAway::new(&ids, &away);
        let (code, out2, err) = cli(&["cards", "-S", &s, "-E", &e, "--json"]);
        assert_eq!(code, Some(0), "{err}");
        let v2: Value = serde_json::from_str(&out2).unwrap();
        assert_eq!(v2["named_cards"], v["named_cards"], "{v2:#}");
        assert_eq!(v2["cards"], v["cards"], "summaries only vs files");
        assert_eq!(v2["exclude"], v["exclude"]);
        assert_eq!(v2["window"]["gpu_jobs"], 6, "{v2:#}");
        let (code, out, err) = cli(&["report", &ids[4].to_string(), "--json", "--no-log"]);
        assert_eq!(code, Some(0), "{err}");
        let r: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(r["source"], "slurmdbd_summary");
        let f2 = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "gpu_card_history")
            .unwrap_or_else(|| panic!("no gpu_card_history from summaries: {:#}", r["findings"]));
        assert_eq!(f2["facts"]["uuid"], card2.as_str(), "{f2:#}");
        assert!(
            f2["facts"]["other_jobs_held_back"].as_u64() >= Some(3),
            "{f2:#}"
        );
    }

    // No recorded GPU job in the window: one sentence, exit 1.
    let later = (format!("@{}", now() + 3600), format!("@{}", now() + 7200));
    let (code, out, err) = cli(&["cards", "-S", &later.0, "-E", &later.1]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        out.is_empty() && err.starts_with("slurmwatch: no recorded GPU job between"),
        "{err}"
    );
    assert!(Path::new(&spool_file(ids[0])).exists());
}
