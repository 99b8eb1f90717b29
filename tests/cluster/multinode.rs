//! Several nodes on one machine (`NODES=2 scripts/cluster.sh up`, the last phase of
//! scripts/test.sh): every node of a job records its own file, named by Slurm's node name
//! (all nodes share one host name here), and archives it to the same job location.

use slurmwatch_core::store::{Reader, SampleKind, Series};
use slurmwatch_tests::*;
use std::path::Path;
use std::time::Duration;

fn cluster_nodes() -> usize {
    std::fs::read_to_string("/run/slurm/nodes")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1)
}

#[test]
#[ignore = "needs the test cluster: scripts/test.sh"]
fn every_node_records_its_own_file_named_by_slurm() {
    if cluster_nodes() < 2 {
        eprintln!("single-node cluster: this test runs in scripts/test.sh's multi-node phase");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let base = "/tmp/slurmwatch-it/archive-multinode";
    std::fs::create_dir_all(base).unwrap();
    std::fs::set_permissions(base, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let _o = PlugstackOverride::new(&format!("spool={SPOOL}/%n archive={base}/%u"));
    let script = "srun -N2 -n2 bash -c 'end=$((SECONDS+3)); while ((SECONDS<end)); do :; done; echo $SLURMD_NODENAME'";
    let job = Submit::new("multinode", script)
        .arg("--slurmwatch=1")
        .arg("--nodes=2")
        .arg("--ntasks-per-node=1")
        .arg("--mem=200M")
        .submit();
    let line = job.wait(Duration::from_secs(180));
    assert_eq!(line.state, "COMPLETED", "{}", job.output());
    let mut names: Vec<String> = job.output().lines().map(str::to_string).collect();
    names.sort();
    assert_eq!(names, ["sw1", "sw2"], "the tasks ran on {names:?}");
    for node in ["sw1", "sw2"] {
        let file = Path::new(SPOOL)
            .join(node)
            .join(format!("{}.sqlite", job.id));
        let r = Reader::open(&file).unwrap_or_else(|e| panic!("{node}: no file: {e}"));
        assert_eq!(
            r.meta().unwrap().node,
            node,
            "{} names the wrong node",
            file.display()
        );
        let rows = r.samples(&Series::step("0")).unwrap();
        assert!(
            rows.iter().any(|r| r.kind == SampleKind::End),
            "{node}: step 0 has no end row"
        );
        let cpu = rows
            .iter()
            .filter_map(|r| r.usage.cpu_usage_usec)
            .max()
            .unwrap_or(0);
        assert!(cpu > 1_000_000, "{node}: step 0 burnt {cpu} µs");
        let copy = Path::new(base)
            .join("root")
            .join(format!("{}.{node}.sqlite", job.id));
        assert!(
            Reader::open(&copy).is_ok(),
            "no archive copy {}",
            copy.display()
        );
    }
    // The batch step ran on the first node only: only its file has the job series.
    let first = Reader::open(
        &Path::new(SPOOL)
            .join("sw1")
            .join(format!("{}.sqlite", job.id)),
    )
    .unwrap();
    assert!(!first.samples(&Series::Job).unwrap().is_empty());
}
