//! The analysis on Slurm output captured from the test cluster (`core/tests/fixtures/slurm/`)
//! and on small made-up clusters for the cases one node cannot show.

use super::*;
use crate::slurm::scontrol::{parse_job, parse_nodes, parse_partitions};
use crate::slurm::squeue::parse_start;

const JOBS: &str = include_str!("../../tests/fixtures/slurm/scontrol_job_pending.txt");
const PARTS: &str = include_str!("../../tests/fixtures/slurm/scontrol_partitions.txt");
const NODES: &str = include_str!("../../tests/fixtures/slurm/scontrol_nodes.txt");
const QUEUE: &str = include_str!("../../tests/fixtures/slurm/squeue_start.txt");

fn inputs(job_id: u32) -> Inputs {
    let job = JOBS
        .lines()
        .filter_map(parse_job)
        .find(|j| j.job_id == job_id)
        .expect("job in fixture");
    Inputs {
        groups: vec![job.group.clone()],
        job,
        partitions: parse_partitions(PARTS),
        nodes: parse_nodes(NODES),
        queue: parse_start(QUEUE),
        history: Default::default(),
    }
}

fn part<'a>(a: &'a Analysis, name: &str) -> &'a Verdict {
    a.verdicts.iter().find(|v| v.name == name).expect(name)
}

#[test]
fn over_the_time_limit_of_short_fits_debug_now() {
    let a = analyse(&inputs(237));
    assert_eq!(a.reason, "PartitionTimeLimit");
    assert!(a.explanation.contains("MaxTime"), "{}", a.explanation);
    let short = part(&a, "short");
    assert!(short.current && short.accessible && !short.fits_now && !short.fits_when_empty);
    assert_eq!(short.obstacle, Some(Obstacle::TimeLimit));
    assert!(
        short
            .obstacle_detail
            .as_deref()
            .unwrap()
            .contains("the job asks 20:00, the partition allows at most 10:00"),
        "{short:?}"
    );
    let debug = part(&a, "debug");
    assert!(debug.fits_now && debug.accessible);
    assert_eq!(
        debug.command.as_deref(),
        Some("scontrol update JobId=237 Partition=debug")
    );
    let restricted = part(&a, "restricted");
    assert!(!restricted.accessible && restricted.command.is_none());
    assert_eq!(restricted.obstacle, Some(Obstacle::NotAccessible));
    assert!(a.move_would_help);
    assert!(a.advice.contains("Partition=debug"), "{}", a.advice);
    // Free now: CPUTot − CPUAlloc, RealMemory − AllocMem, Gres − GresUsed.
    assert_eq!(debug.free.cpus, Some(1));
    assert_eq!(debug.free.memory_bytes, Some((20489 - 3072) << 20));
    assert_eq!(debug.free.gpus, Some(4));
    assert_eq!(a.queue_position, Some(1));
}

#[test]
fn a_held_job_is_not_advised_to_move() {
    let a = analyse(&inputs(236));
    assert_eq!(a.waiting, reasons::Waiting::Hold);
    assert!(!a.move_would_help);
    assert!(a.verdicts.iter().all(|v| v.command.is_none()));
    assert!(a.advice.contains("cannot help"), "{}", a.advice);
    assert!(a.explanation.contains("scontrol release 236"));
    assert_eq!(a.queue_position, None);
    assert!(a.queue_reason.as_deref().unwrap().contains("held"));
    assert_eq!(a.request.gpus_per_node, 2);
    assert_eq!(a.request.cpus_per_node, 2);
    // The node has one CPU free: debug would be busy now even without the hold.
    assert_eq!(part(&a, "debug").obstacle, Some(Obstacle::Processors));
}

#[test]
fn a_dependency_is_not_advised_to_move() {
    let a = analyse(&inputs(239));
    assert_eq!(a.waiting, reasons::Waiting::Dependency);
    assert!(!a.move_would_help);
    assert!(a.verdicts.iter().all(|v| v.command.is_none()));
    assert!(a.expected_start.is_none());
    assert!(a
        .expected_start_reason
        .as_deref()
        .unwrap()
        .contains("dependency"));
}

#[test]
fn more_memory_than_any_node_never_fits_anywhere() {
    let a = analyse(&inputs(238));
    assert_eq!(a.reason, "BadConstraints");
    assert!(!a.move_would_help);
    for v in a.verdicts.iter().filter(|v| v.accessible) {
        assert!(!v.fits_when_empty && !v.fits_now, "{v:?}");
    }
    // short's time limit comes first there (the job has none); debug names the memory.
    assert_eq!(part(&a, "short").obstacle, Some(Obstacle::TimeLimit));
    let d = part(&a, "debug");
    assert_eq!(d.obstacle, Some(Obstacle::Memory));
    let detail = d.obstacle_detail.as_deref().unwrap();
    assert!(
        detail.contains("never fits") && detail.contains("100 GiB"),
        "{detail}"
    );
    assert!(detail.contains("the largest has 20.0 GiB"), "{detail}");
    assert!(a.advice.contains("never run"), "{}", a.advice);
}

#[test]
fn the_research_account_may_use_restricted() {
    let mut i = inputs(237);
    i.job.account = "research".into();
    let a = analyse(&i);
    let r = part(&a, "restricted");
    assert!(r.accessible && r.fits_when_empty);
    // Still too long for short; debug and restricted both fit.
    assert_eq!(
        r.command.as_deref(),
        Some("scontrol update JobId=237 Partition=restricted")
    );
    // DenyAccounts, AllowQos, AllowGroups and RootOnly each close a partition.
    for extra in [
        "DenyAccounts=research",
        "AllowQos=high",
        "DenyQos=normal",
        "AllowGroups=wheel",
        "RootOnly=YES",
    ] {
        let mut i = inputs(237);
        i.partitions = parse_partitions(&format!(
            "PartitionName=x {extra} State=UP MaxTime=UNLIMITED TotalNodes=1"
        ));
        i.job.account = "research".into();
        for n in &mut i.nodes {
            n.partitions.push("x".into());
        }
        let a = analyse(&i);
        assert!(!a.verdicts[0].accessible, "{extra}");
        assert!(a.verdicts[0].access_reason.is_some(), "{extra}");
    }
}

fn job(line: &str) -> crate::slurm::scontrol::JobDetails {
    parse_job(line).unwrap()
}

/// Two partitions of two nodes each, one full, one with a drained node and a GPU node.
fn cluster() -> (Vec<PartitionInfo>, Vec<NodeInfo>) {
    let parts = parse_partitions(
        "PartitionName=cpu State=UP MaxTime=2-00:00:00 TotalNodes=2\n\
         PartitionName=gpu State=UP MaxTime=1-00:00:00 TotalNodes=2\n\
         PartitionName=old State=DOWN MaxTime=UNLIMITED TotalNodes=1\n",
    );
    let nodes = parse_nodes(
        "NodeName=c1 CPUAlloc=16 CPUTot=16 RealMemory=64000 AllocMem=64000 State=ALLOCATED Partitions=cpu,old Gres=(null)\n\
         NodeName=c2 CPUAlloc=8 CPUTot=16 RealMemory=64000 AllocMem=60000 State=MIXED Partitions=cpu Gres=(null)\n\
         NodeName=g1 CPUAlloc=0 CPUTot=32 RealMemory=256000 AllocMem=0 State=IDLE+DRAIN Partitions=gpu Gres=gpu:a100:4 GresUsed=gpu:a100:0\n\
         NodeName=g2 CPUAlloc=4 CPUTot=32 RealMemory=256000 AllocMem=16000 State=MIXED Partitions=gpu Gres=gpu:a100:4 GresUsed=gpu:a100:3(IDX:0-2)\n",
    );
    (parts, nodes)
}

#[test]
fn the_specific_obstacle_is_named() {
    let (partitions, nodes) = cluster();
    let mk = |j: &str| Inputs {
        job: job(j),
        partitions: partitions.clone(),
        nodes: nodes.clone(),
        queue: vec![],
        groups: vec!["g".into()],
        history: Default::default(),
    };
    // 8 CPUs, 8 GB: cpu's mixed node has 8 CPUs but only ~3.9 GiB free → memory; gpu fits.
    let a = analyse(&mk("JobId=1 UserId=u(5) GroupId=g(5) Account=a QOS=normal JobState=PENDING Reason=Resources Partition=cpu TimeLimit=01:00:00 NumNodes=1 NumCPUs=8 MinMemoryNode=8G"));
    assert_eq!(part(&a, "cpu").obstacle, Some(Obstacle::Memory));
    assert!(part(&a, "cpu")
        .obstacle_detail
        .as_deref()
        .unwrap()
        .starts_with("busy now"));
    assert!(part(&a, "cpu").fits_when_empty);
    assert!(part(&a, "gpu").fits_now);
    assert_eq!(part(&a, "old").obstacle, Some(Obstacle::PartitionDown));
    assert!(a.move_would_help);
    // Free memory counts idle and mixed nodes only, from AllocMem; drained nodes give none.
    assert_eq!(part(&a, "cpu").free.memory_bytes, Some(4000 << 20));
    assert_eq!(part(&a, "gpu").free.gpus, Some(1));
    // 2 GPUs: only one is free on the only GPU node up → gpus.
    let a = analyse(&mk("JobId=2 UserId=u(5) GroupId=g(5) Account=a QOS=normal JobState=PENDING Reason=Resources Partition=gpu TimeLimit=01:00:00 NumNodes=1 NumCPUs=1 MinMemoryNode=1G TresPerNode=gres:gpu:2"));
    assert_eq!(part(&a, "gpu").obstacle, Some(Obstacle::Gpus));
    assert_eq!(part(&a, "cpu").obstacle, Some(Obstacle::Gpus));
    assert!(!part(&a, "cpu").fits_when_empty);
    assert!(!a.move_would_help);
    // Three nodes: no partition has them.
    let a = analyse(&mk("JobId=3 UserId=u(5) GroupId=g(5) Account=a QOS=normal JobState=PENDING Reason=PartitionNodeLimit Partition=cpu TimeLimit=01:00:00 NumNodes=3 NumCPUs=3"));
    assert_eq!(part(&a, "cpu").obstacle, Some(Obstacle::Nodes));
    // 12 CPUs: the mixed node has 8 free → processors.
    let a = analyse(&mk("JobId=4 UserId=u(5) GroupId=g(5) Account=a QOS=normal JobState=PENDING Reason=Priority Partition=cpu TimeLimit=3-00:00:00 NumNodes=1 NumCPUs=12 MinMemoryCPU=100M"));
    assert_eq!(part(&a, "cpu").obstacle, Some(Obstacle::TimeLimit));
    assert_eq!(part(&a, "gpu").obstacle, Some(Obstacle::TimeLimit));
    let a = analyse(&mk("JobId=5 UserId=u(5) GroupId=g(5) Account=a QOS=normal JobState=PENDING Reason=Priority Partition=cpu TimeLimit=1:00:00 NumNodes=1 NumCPUs=12 MinMemoryCPU=100M"));
    assert_eq!(part(&a, "cpu").obstacle, Some(Obstacle::Processors));
    assert_eq!(a.request.memory_per_node_bytes, Some(1200 << 20));
    // A QOS limit: the same free room, but moving cannot help.
    let a = analyse(&mk("JobId=6 UserId=u(5) GroupId=g(5) Account=a QOS=normal JobState=PENDING Reason=QOSMaxCpuPerUserLimit Partition=cpu TimeLimit=01:00:00 NumNodes=1 NumCPUs=1"));
    assert!(part(&a, "gpu").fits_now);
    assert!(!a.move_would_help);
    assert!(a.verdicts.iter().all(|v| v.command.is_none()));
}

#[test]
fn queue_position_counts_higher_priority_in_the_same_partition() {
    let (partitions, nodes) = cluster();
    let q = parse_start(
        "10\x1f10\x1fPENDING\x1fcpu\x1f500\x1fN/A\x1fPriority\x1fa\n\
         11\x1f11\x1fPENDING\x1fcpu\x1f900\x1f2026-12-01T10:00:00\x1fResources\x1fb\n\
         12\x1f12\x1fPENDING\x1fgpu\x1f999\x1fN/A\x1fPriority\x1fc\n\
         9\x1f9\x1fPENDING\x1fcpu,gpu\x1f500\x1fN/A\x1fPriority\x1fd\n\
         13\x1f13\x1fPENDING\x1fcpu\x1f100\x1fN/A\x1fPriority\x1fe\n",
    );
    let a = analyse(&Inputs {
        job: job("JobId=10 UserId=u(5) GroupId=g(5) Account=a QOS=normal JobState=PENDING Reason=Priority Partition=cpu TimeLimit=01:00:00 NumNodes=1 NumCPUs=1 Priority=500"),
        partitions,
        nodes,
        queue: q,
        groups: vec![],
        history: Default::default(),
    });
    // Ahead: 11 (900) and 9 (same priority, earlier id); not 12 (other partition) or 13.
    assert_eq!(a.queue_position, Some(3));
    assert_eq!(a.queue_length, Some(4));
}

#[test]
fn the_json_is_strict_and_has_the_documented_keys() {
    let a = analyse(&inputs(237));
    let v = render::to_value(&a, 4, 0.0123);
    let text = serde_json::to_string(&v).unwrap();
    let back: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(back["schema"], 1);
    assert_eq!(back["state"], "pending");
    let p = &back["pending"];
    for k in [
        "reason",
        "explanation",
        "expected_start",
        "queue_position",
        "move_would_help",
        "partitions",
    ] {
        assert!(p.get(k).is_some(), "{k} missing: {text}");
    }
    assert!(p["expected_start"].is_null());
    assert!(p["expected_start_reason"].is_string());
    assert_eq!(p["move_would_help"], true);
    for part in p["partitions"].as_array().unwrap() {
        for k in ["name", "accessible", "fits_now", "obstacle", "command"] {
            assert!(part.get(k).is_some(), "{k} missing in {part}");
        }
    }
    assert_eq!(p["partitions"][1]["obstacle"], "time_limit");
    assert_eq!(back["queried"]["slurm_commands"], 4);
    let lines = render::lines(&a).join("\n");
    assert!(lines.contains("Partition=debug"), "{lines}");
    assert!(lines.contains("Why:"), "{lines}");
}

#[test]
fn an_empty_answer_does_not_panic() {
    let a = analyse(&Inputs::default());
    assert!(a.verdicts.is_empty());
    assert!(!a.move_would_help);
    let _ = render::to_value(&a, 4, f64::NAN);
    let _ = render::lines(&a);
}
