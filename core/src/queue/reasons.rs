//! Slurm's pending reason codes in plain English, and what each one means for moving the
//! job: only a job waiting for room can gain from another partition.

/// What a pending job is waiting for, as far as moving it is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Room on the nodes (or its turn for it): another partition may have room now.
    Room,
    /// Its partition itself (time limit, node limit, down): another partition may help.
    Partition,
    /// An account or QOS limit: it follows the job to every partition.
    Limit,
    Dependency,
    Hold,
    BeginTime,
    /// Anything else (a reservation, licences, a code we do not know).
    Other,
}

impl Waiting {
    pub fn as_str(self) -> &'static str {
        match self {
            Waiting::Room => "resources",
            Waiting::Partition => "partition",
            Waiting::Limit => "limit",
            Waiting::Dependency => "dependency",
            Waiting::Hold => "hold",
            Waiting::BeginTime => "begin_time",
            Waiting::Other => "other",
        }
    }

    /// Whether moving to another partition can make a difference at all.
    pub fn movable(self) -> bool {
        matches!(self, Waiting::Room | Waiting::Partition)
    }
}

/// A reason code's meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explained {
    pub waiting: Waiting,
    /// A few words for the job picker (`waiting for free resources`).
    pub short: String,
    /// One or two sentences for the screen and the JSON.
    pub sentence: String,
}

fn ex(waiting: Waiting, short: &str, sentence: &str) -> Explained {
    Explained {
        waiting,
        short: short.to_string(),
        sentence: sentence.to_string(),
    }
}

/// The meaning of a reason code (`Resources`, `QOSMaxCpuPerUserLimit`, …); any code not
/// known gets a sentence that names it and says where it is documented.
pub fn explain(code: &str) -> Explained {
    use Waiting::*;
    match code {
        "None" | "" => ex(Room, "not yet considered", "The scheduler has not looked at the job yet (it was submitted moments ago, or the scheduler is busy); a reason appears within a scheduling cycle."),
        "Resources" => ex(Room, "waiting for free resources", "The nodes, CPUs, memory or GPUs it asks for are in use by other jobs; it starts as soon as enough of them are freed."),
        "Priority" => ex(Room, "jobs with higher priority go first", "Jobs with a higher priority are queued for the same resources and go first; it starts when its turn comes."),
        "Dependency" => ex(Dependency, "waiting for another job (dependency)", "It waits for another job to reach the state its --dependency names; it becomes eligible only then."),
        "DependencyNeverSatisfied" => ex(Dependency, "dependency can never be met", "The job it depends on ended in a way that can never satisfy the dependency, so it will never start: cancel it, or change the dependency (scontrol update JobId=ID Dependency=...)."),
        "ReqNodeNotAvail" => ex(Room, "a node it needs is unavailable", "A node it needs (or every node it may use) is unavailable: down, drained, or reserved (e.g. for maintenance). It waits until the node is back, or until it is moved to nodes that are up."),
        "Reservation" => ex(Other, "waiting for its reservation", "It runs in an advanced reservation that has not started yet (or whose nodes are busy); it starts when the reservation allows."),
        "BeginTime" => ex(BeginTime, "start time not reached (--begin)", "It was submitted with a start time (--begin) that has not come yet; it is not eligible until then."),
        "JobHeldUser" => ex(Hold, "held by its owner", "It is held by its owner (sbatch --hold or scontrol hold); it will not start until released: scontrol release ID."),
        "JobHeldAdmin" => ex(Hold, "held by an administrator", "An administrator has held it; only an administrator can release it. Ask your site's support."),
        "PartitionTimeLimit" => ex(Partition, "time limit above the partition's", "Its time limit is longer than its partition's maximum (MaxTime), so it can never start there: lower it (scontrol update JobId=ID TimeLimit=...) or move it to a partition that allows it."),
        "PartitionNodeLimit" => ex(Partition, "more nodes than the partition allows", "It asks for more (or fewer) nodes than its partition allows or has, so it can never start there: change the node count or move it."),
        "PartitionDown" => ex(Partition, "its partition is down", "Its partition is down: no job starts there until an administrator brings it back up. Another partition may take it."),
        "PartitionInactive" => ex(Partition, "its partition is inactive", "Its partition is inactive: it neither accepts nor starts jobs until an administrator changes that. Another partition may take it."),
        "PartitionConfig" => ex(Partition, "asks what the partition cannot give", "It asks for something its partition's configuration does not allow (e.g. more CPUs or memory per node than the partition's limits)."),
        "BadConstraints" => ex(Room, "asks what no node has", "It asks for something no node in its partition can provide (more memory, CPUs or GPUs than any node has, or features no node has); as it is, it will never start there."),
        "Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved_for_jobs_in_higher_priority_partitions"
        | "NodeDown" => ex(Room, "its nodes are down or drained", "The nodes it needs are down, drained, or reserved for jobs in higher-priority partitions."),
        "Licenses" => ex(Other, "waiting for licences", "It waits for licences (--licenses) that other jobs hold."),
        "InvalidAccount" => ex(Limit, "invalid account", "Its account is not valid (or you are not in it): it will never start. Cancel it and resubmit with a valid --account."),
        "InvalidQOS" => ex(Limit, "invalid QOS", "Its QOS is not valid for its account: it will never start. Cancel it and resubmit with a valid --qos."),
        "JobArrayTaskLimit" => ex(Limit, "array task limit (%N)", "The array's own limit on tasks running at once (the %N of --array) is reached; the next task starts when one ends."),
        "launch failed requeued held" | "JobHoldMaxRequeue" => ex(Hold, "held after failed launches", "Its launch failed repeatedly, so Slurm requeued it held; scontrol release ID retries it, but check why it failed first."),
        "Prolog" => ex(Other, "running the prolog", "Its prolog is running on the allocated nodes; it starts when the prolog ends."),
        "Cleaning" => ex(Other, "previous run being cleaned up", "It is being requeued and the previous run is still being cleaned up."),
        "FrontEndDown" => ex(Room, "no front end available", "No front-end node is available to launch it."),
        "TimeLimit" => ex(Partition, "time limit not allowed", "Its time limit exceeds what its partition or QOS allows."),
        other => limit_family(other).unwrap_or_else(|| {
            ex(Other, other, &format!("Slurm gives the reason code \"{other}\", which slurmwatch has no explanation for; man squeue (JOB REASON CODES) describes it."))
        }),
    }
}

/// `QOS…`/`Assoc…` limit codes, read from their parts: owner (QOS or account association),
/// `Grp` (shared by all jobs under it) or `Max`/`Min` (per user, account, job or node), the
/// resource, and the scope. One reader covers the whole family, including new members.
fn limit_family(code: &str) -> Option<Explained> {
    let (owner, rest) = if let Some(r) = code.strip_prefix("QOS") {
        ("its QOS", r)
    } else if let Some(r) = code.strip_prefix("Assoc") {
        ("its account", r)
    } else {
        return None;
    };
    if rest.is_empty() {
        return None;
    }
    let rest = rest.trim_end_matches("Limit");
    let (kind, rest) = if let Some(r) = rest.strip_prefix("Grp") {
        ("Grp", r)
    } else if let Some(r) = rest.strip_prefix("Max") {
        ("Max", r)
    } else if let Some(r) = rest.strip_prefix("Min") {
        ("Min", r)
    } else {
        ("", rest)
    };
    let (what, scope) = match rest.find("Per") {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let resource = match what.trim_end_matches("NotSatisfied") {
        "Cpu" | "CPU" | "Cpus" => "CPUs",
        "CpuMinutes" | "CPUMinutes" | "CpuMin" => "CPU-minutes",
        "CpuRunMinutes" | "CPURunMinutes" => "CPU-minutes of running jobs",
        "Mem" | "Memory" => "memory",
        "MemMinutes" | "MemRunMinutes" => "memory-minutes",
        "Node" | "Nodes" => "nodes",
        "NodeMinutes" | "NodeRunMinutes" => "node-minutes",
        "Jobs" | "Job" => "running jobs",
        "SubmitJob" | "SubmitJobs" => "queued and running jobs",
        "Wall" | "WallDuration" => "wall time",
        "GRES" | "Gres" => "GPUs or other generic resources",
        "GRESMinutes" | "GRESRunMinutes" => "GPU-minutes",
        "Billing" | "BillingMinutes" | "BillingRunMinutes" => "billing units",
        "Energy" | "EnergyMinutes" => "energy",
        "Lic" | "License" => "licences",
        _ => "resources",
    };
    let scope_words = match scope {
        "PerUser" => " per user",
        "PerAccount" => " per account",
        "PerJob" => " per job",
        "PerNode" => " per node",
        _ => "",
    };
    let short = format!(
        "{} limit of {owner}: {resource}{scope_words}",
        kind_word(kind)
    );
    let sentence = match (kind, scope) {
        ("Max", "PerJob" | "PerNode") => format!(
            "The job itself asks for more {resource}{scope_words} than {owner} allows, so it cannot start until it asks for less (scontrol update) or the limit is raised. Moving it to another partition does not change that."
        ),
        ("Min", _) => format!(
            "The job asks for fewer {resource} than {owner} requires at minimum; it cannot start until it asks for more."
        ),
        ("Grp", _) => format!(
            "All running jobs of {owner} together already use the most {resource} it allows; it starts when some of them end. Moving it to another partition does not help: the limit goes with the job."
        ),
        _ => format!(
            "Your jobs already use the most {resource}{scope_words} that {owner} allows; it starts when some of them end. Moving it to another partition does not help: the limit goes with the job."
        ),
    };
    Some(Explained {
        waiting: Waiting::Limit,
        short,
        sentence,
    })
}

fn kind_word(kind: &str) -> &'static str {
    match kind {
        "Grp" => "group",
        "Min" => "minimum",
        _ => "a",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code the issue lists, and the limit families: a sentence that is not the
    /// fallback, and the right verdict on moving.
    #[test]
    fn every_listed_code_is_explained() {
        use Waiting::*;
        let table = [
            ("Resources", Room, "in use"),
            ("Priority", Room, "higher priority"),
            ("Dependency", Dependency, "--dependency"),
            ("DependencyNeverSatisfied", Dependency, "never start"),
            ("ReqNodeNotAvail", Room, "unavailable"),
            ("Reservation", Other, "reservation"),
            ("BeginTime", BeginTime, "--begin"),
            ("JobHeldUser", Hold, "scontrol release"),
            ("JobHeldAdmin", Hold, "administrator"),
            ("PartitionTimeLimit", Partition, "MaxTime"),
            ("PartitionNodeLimit", Partition, "nodes"),
            ("PartitionDown", Partition, "down"),
            ("PartitionInactive", Partition, "inactive"),
            ("BadConstraints", Room, "no node"),
            ("None", Room, "not looked"),
            (
                "QOSMaxCpuPerUserLimit",
                Limit,
                "CPUs per user that its QOS allows",
            ),
            ("QOSMaxJobsPerUserLimit", Limit, "running jobs per user"),
            (
                "QOSMaxSubmitJobPerUserLimit",
                Limit,
                "queued and running jobs per user",
            ),
            ("QOSMaxMemoryPerUser", Limit, "memory per user"),
            ("QOSMaxGRESPerUser", Limit, "GPUs"),
            ("QOSMaxNodePerUserLimit", Limit, "nodes per user"),
            (
                "QOSMaxCpuPerJobLimit",
                Limit,
                "job itself asks for more CPUs per job",
            ),
            ("QOSMaxWallDurationPerJobLimit", Limit, "wall time per job"),
            ("QOSGrpCpuLimit", Limit, "All running jobs of its QOS"),
            ("QOSGrpNodeLimit", Limit, "nodes"),
            ("QOSGrpMemLimit", Limit, "memory"),
            ("QOSGrpJobsLimit", Limit, "running jobs"),
            ("QOSGrpCPUMinutesLimit", Limit, "CPU-minutes"),
            ("QOSMinCpuNotSatisfied", Limit, "fewer CPUs"),
            ("AssocGrpCpuLimit", Limit, "All running jobs of its account"),
            ("AssocGrpMemLimit", Limit, "memory"),
            ("AssocGrpNodeLimit", Limit, "nodes"),
            ("AssocGrpGRES", Limit, "GPUs"),
            ("AssocGrpJobsLimit", Limit, "running jobs"),
            ("AssocGrpSubmitJobsLimit", Limit, "queued and running jobs"),
            ("AssocGrpCPUMinutesLimit", Limit, "CPU-minutes"),
            (
                "AssocGrpCPURunMinutesLimit",
                Limit,
                "CPU-minutes of running jobs",
            ),
            (
                "AssocMaxJobsLimit",
                Limit,
                "running jobs that its account allows",
            ),
            ("AssocMaxSubmitJobLimit", Limit, "queued and running jobs"),
            ("AssocMaxCpuPerJobLimit", Limit, "job itself"),
            ("AssocMaxNodePerJobLimit", Limit, "nodes per job"),
            ("AssocMaxWallDurationPerJobLimit", Limit, "wall time"),
        ];
        for (code, waiting, words) in table {
            let e = explain(code);
            assert_eq!(e.waiting, waiting, "{code}");
            assert!(e.sentence.contains(words), "{code}: {}", e.sentence);
            assert!(!e.sentence.contains("no explanation"), "{code}");
            assert!(!e.short.is_empty(), "{code}");
            assert_eq!(
                e.waiting.movable(),
                matches!(waiting, Room | Partition),
                "{code}"
            );
        }
    }

    #[test]
    fn an_unknown_code_gets_the_fallback() {
        let e = explain("SomethingNew");
        assert_eq!(e.waiting, Waiting::Other);
        assert!(e.sentence.contains("\"SomethingNew\""));
        assert!(e.sentence.contains("man squeue"));
        assert!(!e.waiting.movable());
        // Prefixes alone are not a family member.
        assert_eq!(explain("QOS").waiting, Waiting::Other);
        assert_eq!(explain("Assoc").waiting, Waiting::Other);
    }
}
