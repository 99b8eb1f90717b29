//! History reads every node's file of a multi-node run: the memory peak it sizes `--mem`
//! from is the largest node's (what `--mem` applies to), never the sum over nodes; CPU
//! seconds add up.

use std::path::Path;

use slurmwatch_core::history::{attach_recordings, Outcome, Run};
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{JobMeta, Writer};

const T0: i64 = 1_800_000_000_000;
const MIB: u64 = 1 << 20;

fn write_node(dir: &Path, node: &str, ws_mib: u64, cpu_s: u64) {
    write_node_named(dir, "501.sqlite", node, ws_mib, cpu_s);
}

fn write_node_named(dir: &Path, name: &str, node: &str, ws_mib: u64, cpu_s: u64) {
    std::fs::create_dir_all(dir).unwrap();
    let meta = JobMeta {
        job_id: 501,
        user: "alice".into(),
        uid: 1000,
        node: node.into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 5,
        source: Source::CgroupV1,
        cores_allocated: Some(2),
        memory_allocated_bytes: Some(1024 * MIB),
        started_unix_ms: T0,
        incarnation: None,
    };
    let mut w = Writer::create(&dir.join(name), &meta).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    for i in 0..3u64 {
        let mut r = SampleRow::empty(T0 + i as i64 * 5000, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some(i * cpu_s * 1_000_000 / 2);
        r.usage.memory_working_set_bytes = Some(ws_mib * MIB);
        w.push(r);
    }
    w.close().unwrap();
}

fn run(nodes: &[&str]) -> Run {
    Run {
        job_id: "501".into(),
        raw_id: Some(501),
        name: "train-1".into(),
        user: Some("alice".into()),
        partition: Some("debug".into()),
        state: "COMPLETED".into(),
        outcome: Outcome::Completed,
        exit_code: Some(0),
        submit_unix: Some(T0 / 1000 - 5),
        start_unix: Some(T0 / 1000),
        end_unix: Some(T0 / 1000 + 10),
        elapsed_seconds: Some(10.0),
        timelimit_seconds: Some(3600.0),
        cpus_per_node: Some(2),
        cpus_total: Some(2 * nodes.len() as u64),
        nodes: nodes.len() as u64,
        gpus: 0,
        node_names: nodes.iter().map(|n| n.to_string()).collect(),
        mem_request_bytes: Some(1024 * MIB),
        mem_whole_node: false,
        cpu_seconds: None,
        max_rss_bytes: None,
        sacct_memory: None,
        recorded: None,
    }
}

#[test]
fn a_multi_node_run_is_sized_on_its_largest_node() {
    let d = tempfile::tempdir().unwrap();
    write_node(&d.path().join("n1"), "n1", 100, 8);
    write_node(&d.path().join("n2"), "n2", 300, 6);
    let mut runs = vec![run(&["n1", "n2"])];
    let spool = d.path().join("%n");
    assert_eq!(attach_recordings(&mut runs, &[spool]), 1);
    let r = runs[0].recorded.as_ref().expect("recorded");
    assert_eq!(r.nodes_recorded, 2);
    assert_eq!(
        r.peak_working_set_bytes,
        Some(300 * MIB),
        "per node, not 400 MiB"
    );
    assert_eq!(r.cpu_seconds, Some(14.0));
}

#[test]
fn only_the_runs_own_nodes_are_merged() {
    let d = tempfile::tempdir().unwrap();
    write_node(&d.path().join("n1"), "n1", 100, 8);
    // The run names only n1: n2's file is not this run's allocation and is not looked at.
    write_node(&d.path().join("n2"), "n2", 300, 6);
    let mut runs = vec![run(&["n1"])];
    assert_eq!(attach_recordings(&mut runs, &[d.path().join("%n")]), 1);
    let r = runs[0].recorded.as_ref().unwrap();
    assert_eq!(r.nodes_recorded, 1);
    assert_eq!(r.peak_working_set_bytes, Some(100 * MIB));
}

/// The site's `archive=` template (`%u`, `%j`, `%n`) is expanded per run, as the plugin wrote
/// it: a login host with no spool sizes from the archive. A directory under the template that
/// is not the run user's own (writable by others: a squat in a shared base) is not read.
#[test]
fn the_archive_template_is_expanded_per_run_and_a_squat_is_not_read() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    // The test runs as some user: its own name stands for the job's user.
    let me = slurmwatch_core::sys::current_user_name().unwrap();
    let job_dir = d.path().join(&me).join("501");
    write_node_named(&job_dir, "501.n1.sqlite", "n1", 100, 8);
    write_node_named(&job_dir, "501.n2.sqlite", "n2", 300, 6);
    for p in [d.path().join(&me), job_dir.clone()] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let template = d.path().join("%u/%j");
    let mut runs = vec![run(&["n1", "n2"])];
    runs[0].user = Some(me.clone());
    assert_eq!(
        attach_recordings(&mut runs, std::slice::from_ref(&template)),
        1
    );
    let r = runs[0]
        .recorded
        .as_ref()
        .expect("recorded from the archive");
    assert_eq!(r.nodes_recorded, 2);
    assert_eq!(r.peak_working_set_bytes, Some(300 * MIB));
    // Another user's name in the run: its directory does not exist, nothing is read.
    let mut runs = vec![run(&["n1", "n2"])];
    runs[0].user = Some("nobody".into());
    assert_eq!(
        attach_recordings(&mut runs, std::slice::from_ref(&template)),
        0
    );
    // The user's directory writable by others (a squat): refused.
    std::fs::set_permissions(d.path().join(&me), std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut runs = vec![run(&["n1", "n2"])];
    runs[0].user = Some(me);
    assert_eq!(attach_recordings(&mut runs, &[template]), 0);
    assert!(runs[0].recorded.is_none());
}
