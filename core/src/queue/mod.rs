//! Queued jobs: why a job waits, when it should start, and where it could run right now.
//!
//! [`gather`] asks Slurm a bounded number of questions (the job, every partition, every
//! node, the pending queue: four commands whatever the cluster's size); [`analyse`] is a
//! pure function of the answers, so every verdict is fixture-tested; [`render`] turns the
//! result into strict JSON and the screen's lines.

pub mod gather;
pub mod history_hint;
pub mod reasons;
pub mod render;

use crate::slurm::scontrol::{JobDetails, NodeInfo, PartitionInfo};
use crate::slurm::squeue::{PendingEntry, TimeLimit};
use history_hint::{History, HistoryHint};
use reasons::Waiting;

/// Version of the queued-job JSON (`schema` key).
pub const QUEUE_SCHEMA: u32 = 1;

/// Everything [`analyse`] reads.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub job: JobDetails,
    pub partitions: Vec<PartitionInfo>,
    pub nodes: Vec<NodeInfo>,
    pub queue: Vec<PendingEntry>,
    /// The job user's groups (names), for `AllowGroups`.
    pub groups: Vec<String>,
    /// The user's finished runs, for [`history_hint`]; gathered once, not every refresh.
    pub history: History,
}

/// What the job asks for, per node where Slurm allocates per node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub nodes: u32,
    pub cpus: u32,
    pub cpus_per_node: u32,
    /// `None`: the job asked no memory (it then gets the partition's default).
    pub memory_per_node_bytes: Option<u64>,
    pub gpus_per_node: u32,
    pub time_limit: TimeLimit,
}

impl Request {
    fn of(j: &JobDetails) -> Request {
        let nodes = j.num_nodes.unwrap_or(1).max(1);
        let cpus = j.num_cpus.unwrap_or(1).max(1);
        let cpus_per_node = cpus.div_ceil(nodes).max(j.min_cpus_per_node.unwrap_or(1));
        let memory_per_node_bytes = j.memory_per_node_bytes.or_else(|| {
            j.memory_per_cpu_bytes
                .map(|m| m.saturating_mul(u64::from(cpus_per_node)))
        });
        let gpus_per_node = j
            .gpus_per_node
            .or_else(|| j.gpus_per_job.map(|g| g.div_ceil(nodes)))
            .unwrap_or(0);
        Request {
            nodes,
            cpus,
            cpus_per_node,
            memory_per_node_bytes,
            gpus_per_node,
            time_limit: j.time_limit,
        }
    }
}

/// Why a partition cannot take the job now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Obstacle {
    NotAccessible,
    PartitionDown,
    TimeLimit,
    Nodes,
    Processors,
    Memory,
    Gpus,
    /// Each resource is free somewhere, but no node has all of them at once.
    Combination,
}

impl Obstacle {
    pub fn as_str(self) -> &'static str {
        match self {
            Obstacle::NotAccessible => "not_accessible",
            Obstacle::PartitionDown => "partition_down",
            Obstacle::TimeLimit => "time_limit",
            Obstacle::Nodes => "nodes",
            Obstacle::Processors => "processors",
            Obstacle::Memory => "memory",
            Obstacle::Gpus => "gpus",
            Obstacle::Combination => "resources",
        }
    }
}

/// Free right now in a partition's idle and mixed nodes; `None` where Slurm did not say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Free {
    pub nodes_with_room: u32,
    pub cpus: Option<u64>,
    pub memory_bytes: Option<u64>,
    pub gpus: Option<u64>,
}

/// One partition's verdict for the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub name: String,
    /// The job is queued in it.
    pub current: bool,
    pub accessible: bool,
    /// Why not, when not accessible.
    pub access_reason: Option<String>,
    pub state: String,
    pub max_time: TimeLimit,
    pub fits_now: bool,
    /// Whether it would fit were the partition empty: `false` means never, as it is.
    pub fits_when_empty: bool,
    pub obstacle: Option<Obstacle>,
    /// The obstacle in a sentence, with the figures.
    pub obstacle_detail: Option<String>,
    pub free: Free,
    /// `scontrol update JobId=… Partition=…`, for a partition it may move to and fits now.
    pub command: Option<String>,
}

/// The answer for one pending job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    pub job_id: u32,
    pub job_name: String,
    pub user: String,
    pub account: String,
    pub qos: String,
    pub partitions: Vec<String>,
    pub reason: String,
    pub reason_raw: String,
    pub waiting: Waiting,
    pub explanation: String,
    pub short: String,
    pub expected_start: Option<String>,
    pub expected_start_reason: Option<String>,
    /// 1 = next in its partition; `None` with a reason when it has no place (held, 0).
    pub queue_position: Option<u32>,
    pub queue_length: Option<u32>,
    pub queue_reason: Option<String>,
    pub move_would_help: bool,
    /// The conclusion in a sentence.
    pub advice: String,
    pub request: Request,
    pub verdicts: Vec<Verdict>,
    /// Where the workload's past runs say the job asks too much (issue 8).
    pub history_hints: Vec<HistoryHint>,
    /// Why there is no hint, when that is worth saying (sacct failed, too few runs).
    pub history_note: Option<String>,
    /// Every hint's figure lowered at once, when that opens a partition no single one does.
    pub history_combined: Option<history_hint::CombinedHint>,
}

/// Which partitions the job may use, and why not.
fn access(p: &PartitionInfo, j: &JobDetails, groups: &[String]) -> Result<(), String> {
    let root = j.uid == Some(0);
    if p.root_only && !root {
        return Err("only root may submit to it (RootOnly)".into());
    }
    if !p.allow_accounts.permits(&j.account) || p.deny_accounts.iter().any(|a| a == &j.account) {
        return Err(format!("account {} may not use it", j.account));
    }
    if !p.allow_qos.permits(&j.qos) || p.deny_qos.iter().any(|q| q == &j.qos) {
        return Err(format!("QOS {} may not use it", j.qos));
    }
    // Slurm lets root past AllowGroups.
    if !root && !groups.iter().any(|g| p.allow_groups.permits(g)) {
        return Err(format!("{} is in none of its AllowGroups", j.user));
    }
    Ok(())
}

/// A time limit in Slurm's notation ([`crate::units::slurm_duration`]).
pub fn limit_text(t: TimeLimit) -> String {
    match t {
        TimeLimit::Seconds(s) => crate::units::slurm_duration(s),
        TimeLimit::Unlimited => "no limit".into(),
        TimeLimit::Unknown => "unknown".into(),
    }
}

fn free_in(nodes: &[&NodeInfo]) -> Free {
    let room: Vec<&&NodeInfo> = nodes.iter().filter(|n| n.has_room()).collect();
    let sum = |f: &dyn Fn(&NodeInfo) -> Option<u64>| -> Option<u64> {
        room.iter().map(|n| f(n)).sum::<Option<u64>>()
    };
    Free {
        nodes_with_room: room.len() as u32,
        cpus: sum(&|n| n.free_cpus().map(u64::from)),
        memory_bytes: sum(&|n| n.free_memory_bytes()),
        gpus: sum(&|n| n.free_gpus().map(u64::from)),
    }
}

/// The resource checks on one node: CPUs, memory, GPUs, each `true` when it suffices.
/// Unknown figures count as sufficient, so a gap in Slurm's answer never invents an
/// obstacle.
fn node_checks(n: &NodeInfo, r: &Request, now: bool) -> [bool; 3] {
    let (cpus, mem, gpus) = if now {
        if !n.has_room() {
            return [false; 3];
        }
        (n.free_cpus(), n.free_memory_bytes(), n.free_gpus())
    } else {
        (n.cpus, n.memory_bytes, n.gpus)
    };
    [
        cpus.is_none_or(|c| c >= r.cpus_per_node),
        match (mem, r.memory_per_node_bytes) {
            (Some(m), Some(want)) => m >= want,
            _ => true,
        },
        gpus.is_none_or(|g| g >= r.gpus_per_node),
    ]
}

/// Checks the nodes; `None` when enough fit, else the obstacle and its sentence.
fn capacity(nodes: &[&NodeInfo], r: &Request, now: bool) -> Option<(Obstacle, String)> {
    let checks: Vec<[bool; 3]> = nodes.iter().map(|n| node_checks(n, r, now)).collect();
    let need = r.nodes as usize;
    if checks.iter().filter(|c| c.iter().all(|&x| x)).count() >= need {
        return None;
    }
    let pool: Vec<&&NodeInfo> = nodes.iter().filter(|n| !now || n.has_room()).collect();
    if pool.len() < need {
        let msg = if now {
            format!(
                "{} of its {} nodes have anything free; the job needs {need}",
                pool.len(),
                nodes.len()
            )
        } else {
            format!("it has {} nodes; the job needs {need}", nodes.len())
        };
        return Some((Obstacle::Nodes, msg));
    }
    let (free, most) = if now {
        ("free ", "most free")
    } else {
        ("", "largest")
    };
    for (i, obstacle) in [Obstacle::Processors, Obstacle::Memory, Obstacle::Gpus]
        .into_iter()
        .enumerate()
    {
        if checks.iter().filter(|c| c[i]).count() >= need {
            continue;
        }
        let msg = match obstacle {
            Obstacle::Processors => {
                let best = pool
                    .iter()
                    .filter_map(|n| if now { n.free_cpus() } else { n.cpus })
                    .max()
                    .unwrap_or(0);
                format!(
                    "no node has {} {free}CPUs (the {most} has {best})",
                    r.cpus_per_node
                )
            }
            Obstacle::Memory => {
                let best = pool
                    .iter()
                    .filter_map(|n| {
                        if now {
                            n.free_memory_bytes()
                        } else {
                            n.memory_bytes
                        }
                    })
                    .max()
                    .unwrap_or(0);
                format!(
                    "no node has {} of {free}memory (the {most} has {})",
                    crate::units::bytes(r.memory_per_node_bytes.unwrap_or(0)),
                    crate::units::bytes(best)
                )
            }
            _ => {
                let best = pool
                    .iter()
                    .filter_map(|n| if now { n.free_gpus() } else { n.gpus })
                    .max()
                    .unwrap_or(0);
                format!(
                    "no node has {} {free}GPUs (the {most} has {best})",
                    r.gpus_per_node
                )
            }
        };
        return Some((obstacle, msg));
    }
    Some((
        Obstacle::Combination,
        "CPUs, memory and GPUs are each free somewhere, but no node has all the job needs at once"
            .into(),
    ))
}

fn verdict(p: &PartitionInfo, inp: &Inputs, r: &Request, advise: bool) -> Verdict {
    let j = &inp.job;
    let nodes: Vec<&NodeInfo> = inp
        .nodes
        .iter()
        .filter(|n| n.partitions.iter().any(|x| x == &p.name))
        .collect();
    let current = j.partitions.iter().any(|x| x == &p.name);
    let acc = access(p, j, &inp.groups);
    let mut v = Verdict {
        name: p.name.clone(),
        current,
        accessible: acc.is_ok(),
        access_reason: acc.as_ref().err().cloned(),
        state: p.state.clone(),
        max_time: p.max_time,
        fits_now: false,
        fits_when_empty: true,
        obstacle: None,
        obstacle_detail: None,
        free: free_in(&nodes),
        command: None,
    };
    let set = |v: &mut Verdict, o: Obstacle, d: String| {
        if v.obstacle.is_none() {
            v.obstacle = Some(o);
            v.obstacle_detail = Some(d);
        }
    };
    if let Err(why) = &acc {
        set(
            &mut v,
            Obstacle::NotAccessible,
            format!("not accessible: {why}"),
        );
    }
    if p.state != "UP" {
        set(
            &mut v,
            Obstacle::PartitionDown,
            format!(
                "the partition is {} and starts no jobs",
                p.state.to_lowercase()
            ),
        );
    }
    for (o, d) in limit_breaches(p, r) {
        v.fits_when_empty = false;
        set(&mut v, o, d);
    }
    if let Some((o, d)) = capacity(&nodes, r, false) {
        v.fits_when_empty = false;
        set(&mut v, o, format!("never fits: {d}"));
    }
    if v.obstacle.is_none() {
        if let Some((o, d)) = capacity(&nodes, r, true) {
            set(&mut v, o, format!("busy now: {d}"));
        }
    }
    v.fits_now = v.obstacle.is_none();
    if v.fits_now && !current && advise {
        v.command = Some(format!(
            "scontrol update JobId={} Partition={}",
            j.job_id, p.name
        ));
    }
    v
}

/// The partition's own limits the request breaks, in the order they are reported: each
/// means the job never fits there, however empty the partition.
fn limit_breaches(p: &PartitionInfo, r: &Request) -> Vec<(Obstacle, String)> {
    [
        time_limit_breach(p, r),
        node_count_breach(p, r),
        cpus_per_node_breach(p, r),
        memory_per_node_breach(p, r),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The job's time limit above the partition's `MaxTime` (an unknown limit breaks nothing).
fn time_limit_breach(p: &PartitionInfo, r: &Request) -> Option<(Obstacle, String)> {
    let too_long = match (r.time_limit, p.max_time) {
        (_, TimeLimit::Unlimited | TimeLimit::Unknown) => false,
        (TimeLimit::Seconds(s), TimeLimit::Seconds(m)) => s > m,
        (TimeLimit::Unlimited, TimeLimit::Seconds(_)) => true,
        (TimeLimit::Unknown, _) => false,
    };
    too_long.then(|| {
        (
            Obstacle::TimeLimit,
            format!(
                "time limit: the job asks {}, the partition allows at most {}",
                limit_text(r.time_limit),
                limit_text(p.max_time)
            ),
        )
    })
}

/// The job's node count outside the partition's `MinNodes..MaxNodes`.
fn node_count_breach(p: &PartitionInfo, r: &Request) -> Option<(Obstacle, String)> {
    let node_limit =
        p.max_nodes.is_some_and(|m| r.nodes > m) || p.min_nodes.is_some_and(|m| r.nodes < m);
    node_limit.then(|| {
        (
            Obstacle::Nodes,
            format!(
                "the job asks {} nodes; the partition allows {}..{}",
                r.nodes,
                p.min_nodes.unwrap_or(0),
                p.max_nodes.map_or("unlimited".into(), |m| m.to_string())
            ),
        )
    })
}

/// The job's CPUs per node above the partition's `MaxCPUsPerNode`.
fn cpus_per_node_breach(p: &PartitionInfo, r: &Request) -> Option<(Obstacle, String)> {
    p.max_cpus_per_node
        .is_some_and(|m| r.cpus_per_node > m)
        .then(|| {
            (
                Obstacle::Processors,
                format!(
                    "the job asks {} CPUs per node; the partition allows {}",
                    r.cpus_per_node,
                    p.max_cpus_per_node.unwrap_or(0)
                ),
            )
        })
}

/// The job's memory per node (bytes) above the partition's `MaxMemPerNode`.
fn memory_per_node_breach(p: &PartitionInfo, r: &Request) -> Option<(Obstacle, String)> {
    let (m, want) = (p.max_memory_per_node_bytes?, r.memory_per_node_bytes?);
    (want > m).then(|| {
        (
            Obstacle::Memory,
            format!(
                "the job asks {} per node; the partition allows {}",
                crate::units::bytes(want),
                crate::units::bytes(m)
            ),
        )
    })
}

/// The job's place in its first partition's queue: jobs there with a higher priority, or
/// the same priority and an earlier id, go first.
fn queue_place(inp: &Inputs) -> (Option<u32>, Option<u32>, Option<String>) {
    let j = &inp.job;
    let Some(part) = j.partitions.first() else {
        return (None, None, Some("the job names no partition".into()));
    };
    let same: Vec<&PendingEntry> = inp
        .queue
        .iter()
        .filter(|e| e.partitions.iter().any(|p| p == part))
        .collect();
    let mine = same
        .iter()
        .find(|e| e.job_id == j.job_id)
        .and_then(|e| e.priority)
        .or(j.priority);
    let length = same.len().max(1) as u32;
    match mine {
        None => (None, Some(length), Some("Slurm gave no priority".into())),
        Some(0) => (
            None,
            Some(length),
            Some("priority 0: held jobs have no place in the queue".into()),
        ),
        Some(p) => {
            let ahead = same
                .iter()
                .filter(|e| e.job_id != j.job_id)
                .filter(|e| {
                    e.priority
                        .is_some_and(|q| q > p || (q == p && e.job_id < j.job_id))
                })
                .count() as u32;
            (Some(ahead + 1), Some(length), None)
        }
    }
}

/// Why there is no expected start time: the scheduler has not estimated one yet, or the job
/// waits for something a start time does not measure.
fn no_estimate_reason(advise: bool, waiting: Waiting) -> String {
    if advise {
        "the scheduler has not estimated one yet; the backfill scheduler does, each cycle, for jobs with a time limit".to_string()
    } else {
        format!(
            "no estimate while it waits for its {}",
            match waiting {
                Waiting::Dependency => "dependency",
                Waiting::Hold => "release",
                Waiting::BeginTime => "begin time",
                Waiting::Limit => "limit",
                _ => "reason to clear",
            }
        )
    }
}

/// The one sentence of advice: why moving cannot help, the move that would, or why it waits
/// where it is (`advise`: the job waits for room, so a move could help).
fn advice_sentence(advise: bool, waiting: Waiting, verdicts: &[Verdict]) -> String {
    let movers: Vec<&Verdict> = verdicts.iter().filter(|v| v.command.is_some()).collect();
    let accessible: Vec<&Verdict> = verdicts.iter().filter(|v| v.accessible).collect();
    if !advise {
        format!(
            "Moving it to another partition cannot help: it waits for {}, not for room.",
            match waiting {
                Waiting::Dependency => "another job (its dependency)",
                Waiting::Hold => "its hold to be released",
                Waiting::BeginTime => "its begin time",
                Waiting::Limit =>
                    "a limit of its account or QOS, which goes with it to any partition",
                _ => "something other than free nodes",
            }
        )
    } else if let Some(m) = movers.first() {
        format!(
            "It could start now in partition {}: {}",
            m.name,
            m.command.as_deref().unwrap_or_default()
        )
    } else if !accessible.is_empty() && accessible.iter().all(|v| !v.fits_when_empty) {
        let why = accessible
            .iter()
            .find(|v| v.current)
            .or(accessible.first())
            .and_then(|v| v.obstacle_detail.clone())
            .unwrap_or_default();
        format!(
            "It can never run as it is, in any partition it may use ({}): ask for less, or cancel it.",
            why.trim_start_matches("never fits: ")
        )
    } else if verdicts.iter().any(|v| v.current && v.fits_now) {
        "There is room for it in its own partition now; it should start at the next scheduling cycle (jobs ahead of it permitting).".to_string()
    } else {
        "No other partition it may use has room for it right now; it starts when resources are freed.".to_string()
    }
}

/// The whole answer from Slurm's answers.
pub fn analyse(inp: &Inputs) -> Analysis {
    let j = &inp.job;
    let ex = reasons::explain(&j.reason);
    let r = Request::of(j);
    let advise = ex.waiting.movable();
    let verdicts: Vec<Verdict> = inp
        .partitions
        .iter()
        .map(|p| verdict(p, inp, &r, advise))
        .collect();
    let expected_start = inp
        .queue
        .iter()
        .find(|e| e.job_id == j.job_id)
        .and_then(|e| e.expected_start.clone())
        .or_else(|| j.start_time.clone());
    let expected_start_reason = expected_start
        .is_none()
        .then(|| no_estimate_reason(advise, ex.waiting));
    let (queue_position, queue_length, queue_reason) = queue_place(inp);
    let (history_hints, history_note) = history_hint::hints(inp, &r, ex.waiting);
    let history_combined = history_hint::combined(inp, &r, &history_hints);
    let move_would_help = advise && verdicts.iter().any(|v| v.command.is_some());
    let advice = advice_sentence(advise, ex.waiting, &verdicts);
    Analysis {
        job_id: j.job_id,
        job_name: j.name.clone(),
        user: j.user.clone(),
        account: j.account.clone(),
        qos: j.qos.clone(),
        partitions: j.partitions.clone(),
        reason: j.reason.clone(),
        reason_raw: j.reason_raw.clone(),
        waiting: ex.waiting,
        explanation: ex
            .sentence
            .replace("JobId=ID", &format!("JobId={}", j.job_id))
            .replace("release ID", &format!("release {}", j.job_id)),
        short: ex.short,
        expected_start,
        expected_start_reason,
        queue_position,
        queue_length,
        queue_reason,
        move_would_help,
        advice,
        request: r,
        verdicts,
        history_hints,
        history_note,
        history_combined,
    }
}

#[cfg(test)]
mod tests;
