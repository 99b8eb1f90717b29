//! Phase marks on the real cluster: a job marks its phases and the report gives each its own
//! CPU time; marks from anyone but the job's own processes are refused.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use slurmwatch_tests::*;

const WAIT: Duration = Duration::from_secs(600);

/// The job's report as JSON, after its epilog (as the cluster runs it).
fn report_json(job: &Job) -> Value {
    report_after_epilog(job.id, &["--no-log"])
}

/// The file's `(kind, detail)` events.
fn events(job: u32) -> Vec<(String, String)> {
    let reader = slurmwatch_core::store::Reader::open(&spool_file(job)).expect("the job's file");
    reader
        .events()
        .expect("its events")
        .into_iter()
        .map(|e| (e.kind, e.detail))
        .collect()
}

/// Python marking its own phases without a process (one datagram each), each burning a known
/// amount of its own CPU time, and ending the last one itself; the first mark (before Python
/// starts) goes through `slurmwatch mark`, so no process start falls inside a measured phase.
fn burn_script() -> String {
    format!(
        r#"{} mark "start"
python3 - <<'EOF'
import os, socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setblocking(False)
def mark(label):
    s.sendto(label.encode(), os.environ["SLURMWATCH_MARK"])
    time.sleep(0.5)  # the recorder's reading lands before the burn starts
def burn(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass
time.sleep(1)
for label, seconds in (("one", 1.0), ("two", 2.0), ("four", 4.0)):
    mark(label)
    burn(seconds)
mark("done")
EOF
sleep 2"#,
        slurmwatch_bin().display()
    )
}

/// Three phases burn 1, 2 and 4 core-seconds: the report's per-phase CPU is within 2 % of
/// each, from readings the recorder took at the marks' instants.
#[cluster_test(Phase::Cgroup)]
fn marked_phases_get_their_own_cpu_time() {
    let _p = shared_plugstack();
    let script = burn_script();
    let job = Submit::new("marks", &script)
        .arg("--slurmwatch=1")
        .arg("-c")
        .arg("1")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let r = report_json(&job);
    let phases = r["phases"].as_array().expect("phases[]");
    let labels: Vec<&str> = phases.iter().filter_map(|p| p["label"].as_str()).collect();
    assert_eq!(
        labels,
        [
            "(before the first mark)",
            "start",
            "one",
            "two",
            "four",
            "done"
        ],
        "{r:#}"
    );
    for (p, burnt) in phases[2..5].iter().zip([1.0, 2.0, 4.0]) {
        let cpu = p["cpu_seconds"].as_f64().expect("cpu_seconds");
        assert!(
            (cpu - burnt).abs() <= 0.02 * burnt,
            "phase {} burnt {burnt} core-s, recorded {cpu}: {p:#}",
            p["label"]
        );
        assert_eq!(p["exact"], true, "{p:#}");
        // Wall time: the burn plus the mark's pause, on a core of its own.
        let secs = p["seconds"].as_f64().unwrap();
        assert!(secs >= burnt, "{p:#}");
    }
    let text = stdout(
        &Command::new(slurmwatch_bin())
            .args(["report", &job.id.to_string(), "--no-log"])
            .output()
            .unwrap(),
    );
    assert!(text.contains("PHASES (as the job marked them)"), "{text}");
    assert!(text.contains("four"), "{text}");
}

/// Another user cannot reach the job's mark socket at all (it is the job's user's, 0600);
/// the job's own user from outside the job, and root, reach it and are refused by the
/// recorder (uid and cgroup are checked per datagram), which answers them so. Only the job's own mark is stored,
/// and the refusals are noted in the file.
#[cluster_test(Phase::Cgroup)]
fn marks_from_outside_the_job_are_refused() {
    let _p = shared_plugstack();
    let script = format!(
        "echo \"socket=$SLURMWATCH_MARK\"\n{} mark inside\nsleep 15",
        slurmwatch_bin().display()
    );
    let job = Submit::new("marks-hostile", &script)
        .arg("--slurmwatch=1")
        .user(USER1)
        .submit();
    let socket = loop {
        let out = job.output();
        if let Some(s) = out.lines().find_map(|l| l.strip_prefix("socket=")) {
            break s.to_string();
        }
        assert!(job.sacct().iter().all(|l| l.state != "COMPLETED"), "{out}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(!socket.is_empty(), "the step names its mark socket");
    let mark_as = |user: Option<&str>, label: &str| {
        let bin = slurmwatch_bin().display().to_string();
        let mut c = match user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args([
                    "-u",
                    u,
                    "--",
                    "env",
                    &format!("SLURMWATCH_MARK={socket}"),
                    &bin,
                ]);
                c
            }
            None => {
                let mut c = Command::new(&bin);
                c.env("SLURMWATCH_MARK", &socket);
                c
            }
        };
        c.args(["mark", label])
            .output()
            .expect("run slurmwatch mark")
    };
    // Another user: the kernel refuses the connection (the socket is USER1's, mode 0600).
    let o = mark_as(Some(USER2), "neighbour");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("Permission denied"), "{}", stderr(&o));
    // The job's user from outside the job, and root: sent, then refused by the recorder,
    // which says so to the sender.
    for (user, label) in [(Some(USER1), "outside"), (None, "root")] {
        let o = mark_as(user, label);
        assert_eq!(o.status.code(), Some(1), "{label}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("refused this mark: not sent by the job's own processes"),
            "{label}: {}",
            stderr(&o)
        );
    }
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let r = report_json(&job);
    let labels: Vec<&str> = r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["label"].as_str())
        .collect();
    assert_eq!(labels, ["(before the first mark)", "inside"], "{r:#}");
    let ev = events(job.id);
    let refused: Vec<&String> = ev
        .iter()
        .filter(|(k, _)| k == "marks")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(
        refused,
        [&"marks refused: 2 not sent by the job's own processes".to_string()],
        "{ev:?}"
    );
    assert!(
        !std::path::Path::new(&socket).exists(),
        "the socket is removed at the step's end"
    );
}
