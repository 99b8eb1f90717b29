//! `slurmwatch metrics` end to end over a spool the store's writer made: printed once,
//! written as a textfile, and served over HTTP (GET /metrics answered, anything else 404).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{JobMeta, Writer};
use slurmwatch_core::sys::now_unix_ms;

const BIN: &str = env!("CARGO_BIN_EXE_slurmwatch");

/// A fresh directory of this test's own, mode 0755 (removed at the end of the test).
fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("slurmwatch-metrics-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// Job 7 running in `spool`, its latest reading 2 s old: 12.5 CPU-s, a 1 GiB working set.
fn spool_with_a_running_job(spool: &Path) {
    let t0 = now_unix_ms() - 12_000;
    let meta = JobMeta {
        job_id: 7,
        user: "bob".into(),
        uid: 1001,
        node: "cn01".into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(2),
        memory_allocated_bytes: Some(4 << 30),
        started_unix_ms: t0,
        incarnation: None,
    };
    let mut w = Writer::create(&spool.join("7.sqlite"), &meta).unwrap();
    w.begin_step("batch", t0, Some(1)).unwrap();
    for i in 0..3u64 {
        let mut r = SampleRow::empty(t0 + i as i64 * 5_000, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some(i * 6_250_000);
        r.usage.memory_working_set_bytes = Some(1 << 30);
        w.push(r);
    }
    w.flush().unwrap();
    w.close().unwrap();
}

const CPU: &str = r#"slurmwatch_cpu_seconds_total{cluster="c1",node="cn01",jobid="7",step="",user="bob"} 12.500000"#;

#[test]
fn printed_once_and_written_as_a_textfile() {
    let spool = dir("spool-once");
    spool_with_a_running_job(&spool);
    let o = Command::new(BIN)
        .args(["metrics", "--cluster", "c1", "--jobstats", "--spool"])
        .arg(&spool)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.lines().any(|l| l == CPU), "{text}");
    assert!(text
        .contains(r#"cgroup_memory_rss_bytes{cluster="c1",jobid="7",step="",task=""} 1073741824"#));

    let out = dir("textfile");
    let prom = out.join("slurmwatch.prom");
    let o = Command::new(BIN)
        .args(["metrics", "--cluster", "c1", "--spool"])
        .arg(&spool)
        .arg("--textfile")
        .arg(&prom)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let written = std::fs::read_to_string(&prom).unwrap();
    assert!(written.lines().any(|l| l == CPU), "{written}");
    // Not a *.prom name: refused, exit 2, nothing written.
    let o = Command::new(BIN)
        .args(["metrics", "--spool"])
        .arg(&spool)
        .arg("--textfile")
        .arg(out.join("x.txt"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(!out.join("x.txt").exists());
    let _ = std::fs::remove_dir_all(&spool);
    let _ = std::fs::remove_dir_all(&out);
}

fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

fn own_uid() -> String {
    let o = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

#[test]
fn served_on_get_metrics_only() {
    let spool = dir("spool-listen");
    spool_with_a_running_job(&spool);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(BIN)
        .args(["metrics", "--cluster", "c1", "--spool"])
        .arg(&spool)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        // The test's own user reads /metrics (root's connections always may; others only
        // when listed).
        .arg("--metrics-user")
        .arg(own_uid())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    let ok = loop {
        if let Some(r) = get(port, "/metrics") {
            break r;
        }
        assert!(Instant::now() < end, "the server never answered");
        std::thread::sleep(Duration::from_millis(50));
    };
    let other = get(port, "/").unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&spool);
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains("Content-Type: text/plain; version=0.0.4"),
        "{ok}"
    );
    assert!(ok.lines().any(|l| l == CPU), "{ok}");
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
}
