//! `scontrol`: the job's processes on this node (`listpids`, which answers only on the node),
//! and the one-line records of `show job|partition|node -o` that the queued-job answers use.

use super::command::{self, CommandError};
use super::job_id::JobId;
use super::squeue::TimeLimit;
use super::units::{parse_memory_mib, parse_whole_seconds};

/// One line of `scontrol listpids`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPid {
    pub pid: u32,
    /// The job's own id (`job_id::JobId::own`).
    pub job_id: u32,
    /// `batch`, `extern`, `0`, ...
    pub step: String,
}

/// Parses `scontrol listpids` output: a header, then `PID JOBID STEPID LOCALID GLOBALID`.
/// Slurm lists `-1` for a step whose pid it does not know: those are skipped.
pub fn parse_listpids(text: &str) -> Vec<JobPid> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let pid: i64 = f.next()?.parse().ok()?; // `-1` fails the u32 conversion below
            let job_id = JobId::own(f.next()?)?;
            let step = f.next()?.to_string();
            let pid = u32::try_from(pid).ok().filter(|&p| p > 0)?;
            Some(JobPid { pid, job_id, step })
        })
        .collect()
}

/// A pid of the job on this node to locate its cgroup from, preferring a user step over
/// the extern step's idle `sleep`. `Ok(None)`: the job has no processes on this node.
pub fn task_pid(job_id: u32) -> Result<Option<u32>, CommandError> {
    let f = command::run(
        "scontrol",
        &["listpids", &job_id.to_string()],
        command::DEFAULT_TIMEOUT,
    )?;
    let pids = parse_listpids(&f.stdout);
    let pick = pids
        .iter()
        .find(|p| p.job_id == job_id && p.step != "extern")
        .or_else(|| pids.iter().find(|p| p.job_id == job_id));
    Ok(pick.map(|p| p.pid))
}

/// `scontrol show job -o JOB`'s output, or `None` when the controller did not answer (the
/// job's record, for its log's location: `report::joblog::from_scontrol`).
pub fn show_job_record(job: &str, timeout: std::time::Duration) -> Option<String> {
    command::run("scontrol", &["show", "job", "-o", job], timeout)
        .ok()
        .filter(|f| f.success)
        .map(|f| f.stdout)
}

/// One `scontrol show … -o` record as `(key, value)` pairs in the order printed.
///
/// Values may hold spaces (`OS=Linux 6.1 #1 SMP`, a job name): a word starts a new pair only
/// when it looks like `Key=`, otherwise it continues the previous value. A job name runs up
/// to `UserId=`, so a name that itself holds ` Key=value` cannot forge a later field.
pub fn parse_record(line: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for word in line.split(' ') {
        let key = word.split_once('=').map(|(k, _)| k).filter(|k| {
            k.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '/'))
        });
        let in_name = out.last().is_some_and(|(k, _)| k == "JobName");
        match key {
            Some(k) if !in_name || k == "UserId" => {
                let v = &word[k.len() + 1..];
                out.push((k.to_string(), v.to_string()));
            }
            _ => {
                if let Some((_, v)) = out.last_mut() {
                    if !word.is_empty() || in_name {
                        v.push(' ');
                        v.push_str(word);
                    }
                }
            }
        }
    }
    for (_, v) in &mut out {
        let t = v.trim_end().len();
        v.truncate(t);
    }
    out
}

/// A field's value: the first occurrence, or `None` when absent or one of Slurm's "nothing"
/// words (`(null)`, `N/A`, `None`, `Unknown`, empty).
fn field<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !matches!(*v, "" | "(null)" | "N/A" | "None" | "Unknown" | "n/a"))
}

/// The last occurrence: for the fields Slurm prints after the user's paths (`TresPerNode`
/// follows `WorkDir=`/`StdOut=`), so a path holding ` Key=` cannot stand in for them.
fn field_last<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !matches!(*v, "" | "(null)" | "N/A" | "None" | "Unknown" | "n/a"))
}

fn num<T: std::str::FromStr>(fields: &[(String, String)], key: &str) -> Option<T> {
    field(fields, key)?.parse().ok()
}

/// `swuser1(1001)` → (`swuser1`, 1001).
fn name_and_id(s: Option<&str>) -> (String, Option<u32>) {
    let Some(s) = s else {
        return (String::new(), None);
    };
    match s.split_once('(') {
        Some((n, rest)) => (n.to_string(), rest.trim_end_matches(')').parse().ok()),
        None => (s.to_string(), None),
    }
}

fn time_limit(s: Option<&str>) -> TimeLimit {
    match s {
        Some("UNLIMITED" | "INFINITE") => TimeLimit::Unlimited,
        Some(s) => parse_whole_seconds(s).map_or(TimeLimit::Unknown, TimeLimit::Seconds),
        None => TimeLimit::Unknown,
    }
}

/// The GPU count in a GRES or TRES-per string: `gpu:4`, `gpu:a100:2(S:0-1)`,
/// `gres:gpu:2`, `gres/gpu:a100=4`, `gpu:a100:1,gpu:v100:1` (summed); `Some(0)` when the
/// string names no GPU, `None` when a GPU item's count does not parse.
pub fn gpu_count(s: &str) -> Option<u32> {
    let mut total = 0u32;
    let mut depth = 0i32;
    let mut items = Vec::new();
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        if depth == 0 && c != ')' {
            cur.push(c);
        }
    }
    items.push(cur);
    for item in items {
        let item = item
            .trim()
            .trim_start_matches("gres:")
            .trim_start_matches("gres/");
        let parts: Vec<&str> = item.split([':', '=']).collect();
        if parts.first() != Some(&"gpu") {
            continue;
        }
        let n: u32 = match parts.as_slice() {
            [_] => 1, // `gpu` alone means one
            [.., last] => last.parse().ok()?,
            [] => continue,
        };
        total = total.checked_add(n)?;
    }
    Some(total)
}

/// What `scontrol show job -o` says about a job, as the queued-job answers need it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobDetails {
    /// The job's own id (`job_id::JobId::own`).
    pub job_id: u32,
    pub name: String,
    pub user: String,
    pub uid: Option<u32>,
    pub group: String,
    pub gid: Option<u32>,
    pub account: String,
    pub qos: String,
    pub state: String,
    /// The reason code (`Resources`, `ReqNodeNotAvail`, …) without Slurm's detail.
    pub reason: String,
    /// Slurm's reason as printed, detail included (`ReqNodeNotAvail,_UnavailableNodes:vm`).
    pub reason_raw: String,
    pub dependency: Option<String>,
    pub priority: Option<u64>,
    /// The partition(s) it was submitted to (`debug`, or `debug,short`).
    pub partitions: Vec<String>,
    pub time_limit: TimeLimit,
    /// The scheduler's expected start for a pending job, when it has one.
    pub start_time: Option<String>,
    pub num_nodes: Option<u32>,
    pub num_cpus: Option<u32>,
    pub min_cpus_per_node: Option<u32>,
    /// `MinMemoryNode` (per node) or, for `--mem-per-cpu`, `MinMemoryCPU` (per CPU).
    pub memory_per_node_bytes: Option<u64>,
    pub memory_per_cpu_bytes: Option<u64>,
    /// GPUs asked per node (`TresPerNode=gres:gpu:N`), else across the job (`TresPerJob`).
    pub gpus_per_node: Option<u32>,
    pub gpus_per_job: Option<u32>,
    pub req_nodes: Option<String>,
    pub features: Option<String>,
}

impl JobDetails {
    pub fn is_pending(&self) -> bool {
        self.state == "PENDING"
    }
}

/// Parses one `scontrol show job -o` line; `None` without a job id.
pub fn parse_job(line: &str) -> Option<JobDetails> {
    let r = parse_record(line);
    let job_id = JobId::own(field(&r, "JobId")?)?;
    let (user, uid) = name_and_id(field(&r, "UserId"));
    let (group, gid) = name_and_id(field(&r, "GroupId"));
    let reason_raw = field(&r, "Reason").unwrap_or("None").to_string();
    let reason = reason_code(&reason_raw);
    let nodes = field(&r, "NumNodes").map(|n| n.split('-').next().unwrap_or(n).to_string());
    Some(JobDetails {
        job_id,
        name: r
            .iter()
            .find(|(k, _)| k == "JobName")
            .map(|(_, v)| v.clone())
            .unwrap_or_default(),
        user,
        uid,
        group,
        gid,
        account: field(&r, "Account").unwrap_or("").to_string(),
        qos: field(&r, "QOS").unwrap_or("").to_string(),
        state: field(&r, "JobState").unwrap_or("").to_string(),
        reason,
        reason_raw,
        dependency: field(&r, "Dependency").map(str::to_string),
        priority: num(&r, "Priority"),
        partitions: field(&r, "Partition")
            .map(|p| p.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        time_limit: time_limit(field(&r, "TimeLimit")),
        start_time: field(&r, "StartTime").map(str::to_string),
        num_nodes: nodes.and_then(|n| n.parse().ok()),
        num_cpus: num(&r, "NumCPUs"),
        min_cpus_per_node: num(&r, "MinCPUsNode"),
        memory_per_node_bytes: field(&r, "MinMemoryNode").and_then(parse_memory_mib),
        memory_per_cpu_bytes: field(&r, "MinMemoryCPU").and_then(parse_memory_mib),
        gpus_per_node: field_last(&r, "TresPerNode").and_then(gpu_count),
        gpus_per_job: field_last(&r, "TresPerJob").and_then(gpu_count),
        req_nodes: field(&r, "ReqNodeList").map(str::to_string),
        features: field(&r, "Features").map(str::to_string),
    })
}

/// The code at the front of a reason as squeue or scontrol prints it:
/// `ReqNodeNotAvail, UnavailableNodes:vm` → `ReqNodeNotAvail`.
pub fn reason_code(raw: &str) -> String {
    let code = raw
        .trim()
        .split([',', ' '])
        .next()
        .unwrap_or("")
        .trim_start_matches('(')
        .trim_end_matches(')');
    if code.is_empty() {
        "None".to_string()
    } else {
        code.to_string()
    }
}

/// Who may use a partition, for one of its `Allow*` lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allowed {
    All,
    Only(Vec<String>),
}

impl Allowed {
    fn parse(s: Option<&str>) -> Allowed {
        match s {
            None | Some("ALL") => Allowed::All,
            Some(list) => Allowed::Only(list.split(',').map(str::to_string).collect()),
        }
    }

    pub fn permits(&self, name: &str) -> bool {
        match self {
            Allowed::All => true,
            Allowed::Only(l) => l.iter().any(|x| x == name),
        }
    }
}

/// One partition from `scontrol show partition -o`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub name: String,
    /// `UP`, `DOWN`, `DRAIN`, `INACTIVE`.
    pub state: String,
    pub default: bool,
    pub allow_groups: Allowed,
    pub allow_accounts: Allowed,
    pub deny_accounts: Vec<String>,
    pub allow_qos: Allowed,
    pub deny_qos: Vec<String>,
    pub root_only: bool,
    pub max_time: TimeLimit,
    /// `None`: unlimited.
    pub max_nodes: Option<u32>,
    pub min_nodes: Option<u32>,
    pub total_nodes: Option<u32>,
    pub max_cpus_per_node: Option<u32>,
    pub max_memory_per_node_bytes: Option<u64>,
}

/// Parses `scontrol show partition -o` output, one partition a line.
pub fn parse_partitions(text: &str) -> Vec<PartitionInfo> {
    text.lines()
        .filter_map(|l| {
            let r = parse_record(l);
            let name = field(&r, "PartitionName")?.to_string();
            let list = |k: &str| -> Vec<String> {
                field(&r, k)
                    .map(|v| v.split(',').map(str::to_string).collect())
                    .unwrap_or_default()
            };
            let limit = |k: &str| -> Option<u32> {
                field(&r, k)
                    .filter(|v| *v != "UNLIMITED")
                    .and_then(|v| v.parse().ok())
            };
            Some(PartitionInfo {
                name,
                state: field(&r, "State").unwrap_or("UNKNOWN").to_string(),
                default: field(&r, "Default") == Some("YES"),
                allow_groups: Allowed::parse(field(&r, "AllowGroups")),
                allow_accounts: Allowed::parse(field(&r, "AllowAccounts")),
                deny_accounts: list("DenyAccounts"),
                allow_qos: Allowed::parse(field(&r, "AllowQos")),
                deny_qos: list("DenyQos"),
                root_only: field(&r, "RootOnly") == Some("YES"),
                max_time: time_limit(field(&r, "MaxTime")),
                max_nodes: limit("MaxNodes"),
                min_nodes: limit("MinNodes"),
                total_nodes: limit("TotalNodes"),
                max_cpus_per_node: limit("MaxCPUsPerNode"),
                max_memory_per_node_bytes: field(&r, "MaxMemPerNode")
                    .filter(|v| *v != "UNLIMITED")
                    .and_then(parse_memory_mib),
            })
        })
        .collect()
}

/// One node from `scontrol -d show node -o` (`-d` adds `GresUsed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    pub name: String,
    /// `IDLE`, `MIXED+DRAIN`, `DOWN*`, …
    pub state: String,
    pub partitions: Vec<String>,
    /// Usable CPUs (`CPUEfctv`: total less specialised cores; `CPUTot` where older Slurm
    /// lacks it).
    pub cpus: Option<u32>,
    pub cpus_allocated: Option<u32>,
    /// `RealMemory`: what jobs may be given, not the machine's total.
    pub memory_bytes: Option<u64>,
    pub memory_allocated_bytes: Option<u64>,
    pub gpus: Option<u32>,
    /// `None` when Slurm did not say (no `-d`, or a string we could not read).
    pub gpus_used: Option<u32>,
}

impl NodeInfo {
    /// Up and taking jobs: not down, drained, failing, in maintenance, reserved, powered
    /// down or not responding (`*`).
    pub fn is_up(&self) -> bool {
        let s = self.state.to_ascii_uppercase();
        if s.contains('*') {
            return false;
        }
        let mut words = s.split('+');
        let base = words.next().unwrap_or("");
        let base_ok = matches!(
            base,
            "IDLE" | "MIXED" | "ALLOCATED" | "ALLOC" | "COMPLETING"
        );
        base_ok
            && !words.any(|f| {
                f.starts_with("DRAIN")
                    || f.starts_with("FAIL")
                    || f.starts_with("POWER")
                    || f.starts_with("REBOOT")
                    || matches!(f, "MAINT" | "RESERVED" | "NOT_RESPONDING" | "INVALID")
            })
    }

    /// Idle or mixed: the nodes that have anything free right now.
    pub fn has_room(&self) -> bool {
        let base = self.state.split('+').next().unwrap_or("");
        self.is_up() && matches!(base.to_ascii_uppercase().as_str(), "IDLE" | "MIXED")
    }

    pub fn free_cpus(&self) -> Option<u32> {
        Some(self.cpus?.saturating_sub(self.cpus_allocated?))
    }

    pub fn free_memory_bytes(&self) -> Option<u64> {
        Some(
            self.memory_bytes?
                .saturating_sub(self.memory_allocated_bytes?),
        )
    }

    pub fn free_gpus(&self) -> Option<u32> {
        match self.gpus? {
            0 => Some(0),
            n => Some(n.saturating_sub(self.gpus_used?)),
        }
    }
}

/// Parses `scontrol -d show node -o` output, one node a line.
pub fn parse_nodes(text: &str) -> Vec<NodeInfo> {
    let mib = |v: Option<&str>| {
        v.and_then(|v| v.parse::<u64>().ok())
            .and_then(|m| m.checked_mul(1 << 20))
    };
    text.lines()
        .filter_map(|l| {
            let r = parse_record(l);
            let name = field(&r, "NodeName")?.to_string();
            let gres = field(&r, "Gres");
            Some(NodeInfo {
                name,
                state: field(&r, "State").unwrap_or("UNKNOWN").to_string(),
                partitions: field(&r, "Partitions")
                    .map(|p| p.split(',').map(str::to_string).collect())
                    .unwrap_or_default(),
                cpus: num(&r, "CPUEfctv").or_else(|| num(&r, "CPUTot")),
                cpus_allocated: num(&r, "CPUAlloc"),
                memory_bytes: mib(field(&r, "RealMemory")),
                memory_allocated_bytes: mib(field(&r, "AllocMem")),
                gpus: match gres {
                    None => Some(0),
                    Some(g) => gpu_count(g),
                },
                gpus_used: field(&r, "GresUsed").and_then(gpu_count),
            })
        })
        .collect()
}

/// Runs `scontrol ARGS` with the standard timeout; its stdout when it succeeded.
fn scontrol(args: &[&str]) -> Result<String, ShowError> {
    let f = command::run("scontrol", args, command::DEFAULT_TIMEOUT)?;
    if !f.success {
        return Err(ShowError::Failed(f.reason()));
    }
    Ok(f.stdout)
}

/// Why a `scontrol show` gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShowError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("scontrol failed: {0}")]
    Failed(String),
}

/// `scontrol show job -o ID`: the job's details (one Slurm command).
pub fn show_job(job_id: u32) -> Result<Option<JobDetails>, ShowError> {
    let out = scontrol(&["show", "job", "-o", &job_id.to_string()])?;
    Ok(out
        .lines()
        .filter_map(parse_job)
        .find(|j| j.job_id == job_id))
}

/// `scontrol show partition -o`: every partition (one Slurm command).
pub fn show_partitions() -> Result<Vec<PartitionInfo>, ShowError> {
    Ok(parse_partitions(&scontrol(&["show", "partition", "-o"])?))
}

/// `scontrol -d show node -o`: every node, with GPUs in use (one Slurm command, never one
/// per node).
pub fn show_nodes() -> Result<Vec<NodeInfo>, ShowError> {
    Ok(parse_nodes(&scontrol(&["-d", "show", "node", "-o"])?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from the test cluster: a held job asking 2 GPUs (its name holds a space), a
    /// job whose --time exceeds `short`'s MaxTime, a released job asking 100G (more than the
    /// node has: BadConstraints), a job waiting on a dependency.
    #[test]
    fn captured_pending_jobs() {
        let jobs: Vec<JobDetails> =
            include_str!("../../tests/fixtures/slurm/scontrol_job_pending.txt")
                .lines()
                .filter_map(parse_job)
                .collect();
        assert_eq!(jobs.len(), 4);
        let held = &jobs[0];
        assert_eq!(held.job_id, 236);
        assert_eq!(held.name, "cap held");
        assert_eq!((held.user.as_str(), held.uid), ("swuser1", Some(1001)));
        assert_eq!(held.account, "general");
        assert_eq!(held.qos, "normal");
        assert!(held.is_pending());
        assert_eq!(held.reason, "JobHeldUser");
        assert_eq!(held.priority, Some(0));
        assert_eq!(held.partitions, ["debug"]);
        assert_eq!(held.time_limit, TimeLimit::Unlimited);
        assert_eq!(held.start_time, None);
        assert_eq!(held.num_nodes, Some(1));
        assert_eq!(held.num_cpus, Some(2));
        assert_eq!(held.memory_per_node_bytes, Some(1 << 30));
        assert_eq!(held.gpus_per_node, Some(2));
        assert_eq!(held.dependency, None);
        let short = &jobs[1];
        assert_eq!(short.reason, "PartitionTimeLimit");
        assert_eq!(short.partitions, ["short"]);
        assert_eq!(short.time_limit, TimeLimit::Seconds(1200));
        assert_eq!(short.gpus_per_node, None);
        let big = &jobs[2];
        assert_eq!(big.reason, "BadConstraints");
        assert_eq!(big.memory_per_node_bytes, Some(100 << 30));
        assert_eq!((big.user.as_str(), big.uid), ("root", Some(0)));
        let dep = &jobs[3];
        assert_eq!(dep.reason, "Dependency");
        assert_eq!(dep.dependency.as_deref(), Some("afterok:236(unfulfilled)"));
        assert_eq!(dep.memory_per_node_bytes, Some(512 << 20));
    }

    #[test]
    fn a_job_name_cannot_forge_fields() {
        let j = parse_job("JobId=5 JobName=x Partition=evil  QOS=bad UserId=u(7) GroupId=g(7) Account=a QOS=normal JobState=PENDING Reason=Priority Partition=debug TresPerNode=gres:gpu:1 WorkDir=/tmp/a TresPerNode=gres:gpu:9 TresPerNode=gres:gpu:2").unwrap();
        assert_eq!(j.name, "x Partition=evil  QOS=bad");
        assert_eq!(j.partitions, ["debug"]);
        assert_eq!(j.qos, "normal");
        assert_eq!(j.gpus_per_node, Some(2));
        assert_eq!(j.uid, Some(7));
        assert!(parse_job("garbage").is_none());
        assert!(parse_job("").is_none());
    }

    #[test]
    fn reason_codes() {
        assert_eq!(
            reason_code("ReqNodeNotAvail, UnavailableNodes:vm"),
            "ReqNodeNotAvail"
        );
        assert_eq!(
            reason_code("ReqNodeNotAvail,_UnavailableNodes:vm"),
            "ReqNodeNotAvail"
        );
        assert_eq!(reason_code("(Resources)"), "Resources");
        assert_eq!(reason_code(""), "None");
    }

    /// Captured from the test cluster: `scontrol show partition -o`.
    #[test]
    fn captured_partitions() {
        let p = parse_partitions(include_str!(
            "../../tests/fixtures/slurm/scontrol_partitions.txt"
        ));
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["debug", "short", "restricted"]);
        assert!(p[0].default);
        assert_eq!(p[0].max_time, TimeLimit::Unlimited);
        assert_eq!(p[0].allow_accounts, Allowed::All);
        assert_eq!(p[1].max_time, TimeLimit::Seconds(600));
        assert_eq!(p[1].state, "UP");
        assert_eq!(p[1].total_nodes, Some(1));
        assert_eq!(p[1].max_nodes, None);
        assert_eq!(p[1].max_memory_per_node_bytes, None);
        assert_eq!(p[2].allow_accounts, Allowed::Only(vec!["research".into()]));
        assert!(p[2].allow_accounts.permits("research"));
        assert!(!p[2].allow_accounts.permits("general"));
        assert!(p[2].allow_qos.permits("normal"));
        let deny = parse_partitions("PartitionName=x AllowGroups=wheel,hpc DenyAccounts=bad DenyQos=slow State=DOWN RootOnly=YES MaxNodes=4 MaxMemPerNode=1024 MaxTime=1-00:00:00");
        assert_eq!(deny[0].deny_accounts, ["bad"]);
        assert_eq!(deny[0].deny_qos, ["slow"]);
        assert_eq!(
            deny[0].allow_groups,
            Allowed::Only(vec!["wheel".into(), "hpc".into()])
        );
        assert!(deny[0].root_only);
        assert_eq!(deny[0].max_nodes, Some(4));
        assert_eq!(deny[0].max_memory_per_node_bytes, Some(1 << 30));
        assert_eq!(deny[0].max_time, TimeLimit::Seconds(86400));
    }

    /// Captured from the test cluster: `scontrol -d show node -o` with one job running.
    #[test]
    fn captured_nodes() {
        let n = parse_nodes(include_str!(
            "../../tests/fixtures/slurm/scontrol_nodes.txt"
        ));
        assert_eq!(n.len(), 1);
        let vm = &n[0];
        assert_eq!(vm.name, "vm");
        assert_eq!(vm.state, "MIXED");
        assert_eq!(vm.partitions, ["debug", "short", "restricted"]);
        assert_eq!((vm.cpus, vm.cpus_allocated), (Some(2), Some(1)));
        assert_eq!(vm.free_cpus(), Some(1));
        assert_eq!(vm.memory_bytes, Some(20489 << 20));
        assert_eq!(vm.free_memory_bytes(), Some((20489 - 3072) << 20));
        assert_eq!(
            (vm.gpus, vm.gpus_used, vm.free_gpus()),
            (Some(4), Some(0), Some(4))
        );
        assert!(vm.is_up() && vm.has_room());
    }

    #[test]
    fn node_states_and_gres_forms() {
        let n = |state: &str, gres: &str, used: &str| {
            parse_nodes(&format!(
                "NodeName=a CPUAlloc=0 CPUTot=8 Gres={gres} GresUsed={used} RealMemory=1000 AllocMem=0 State={state} Partitions=p"
            ))
            .remove(0)
        };
        assert!(n("IDLE", "(null)", "",).has_room());
        assert_eq!(n("IDLE", "(null)", "").free_gpus(), Some(0));
        assert!(!n("IDLE+DRAIN", "(null)", "").is_up());
        assert!(!n("DOWN*", "(null)", "").is_up());
        assert!(!n("IDLE*", "(null)", "").is_up());
        assert!(n("ALLOCATED", "(null)", "").is_up());
        assert!(!n("ALLOCATED", "(null)", "").has_room());
        assert!(n("IDLE+COMPLETING", "(null)", "").has_room());
        let typed = n(
            "MIXED",
            "gpu:a100:4(S:0-1),gpu:v100:2",
            "gpu:a100:3(IDX:0-2),gpu:v100:0(IDX:N/A)",
        );
        assert_eq!(
            (typed.gpus, typed.gpus_used, typed.free_gpus()),
            (Some(6), Some(3), Some(3))
        );
        assert_eq!(n("IDLE", "gpu:4", "gpu:weird").free_gpus(), None);
        assert_eq!(gpu_count("gres:gpu:2"), Some(2));
        assert_eq!(gpu_count("gres/gpu=4"), Some(4));
        assert_eq!(gpu_count("license:x:3"), Some(0));
        assert_eq!(gpu_count("gpu"), Some(1));
        assert!(parse_nodes("nonsense\n\n").is_empty());
    }

    /// The job ids of `listpids` and `show job` go through `job_id`'s one parser: the
    /// captured answers with a leading-zero, zero or past-`u32` id name no job.
    #[test]
    fn job_ids_go_through_the_one_parser() {
        let pids = include_str!("../../tests/fixtures/slurm/scontrol_listpids.txt");
        let job = include_str!("../../tests/fixtures/slurm/scontrol_job_pending.txt")
            .lines()
            .next()
            .unwrap();
        assert_eq!(parse_job(job).unwrap().job_id, 236u32);
        assert!(parse_listpids(pids).iter().all(|p| p.job_id == 101u32));
        for bad in ["0101", "0", "4294967296", "+101"] {
            let text = pids.replace("     101 ", &format!(" {bad:>7} "));
            assert!(parse_listpids(&text).is_empty(), "{bad}: {text}");
            let line = job.replacen("JobId=236 ", &format!("JobId={bad} "), 1);
            assert_eq!(parse_job(&line), None, "{bad}");
        }
    }

    /// Captured from the test cluster: `scontrol listpids 101` for a running batch job.
    #[test]
    fn captured_listpids() {
        let p = parse_listpids(include_str!(
            "../../tests/fixtures/slurm/scontrol_listpids.txt"
        ));
        assert_eq!(p.len(), 4, "{p:?}"); // the header and the `-1` line are skipped
        assert_eq!(
            p[0],
            JobPid {
                pid: 1605,
                job_id: 101,
                step: "extern".into()
            }
        );
        assert_eq!(p[1].step, "batch");
        assert!(parse_listpids("").is_empty());
        assert!(parse_listpids("There are no steps for job 104 on node (null).").is_empty());
    }
}
