//! "Joined with history where it exists" (issue 8): a pending job's request against what the
//! finished runs of its workload (same user, job name with digit runs collapsed) used, and
//! whether the smaller request the sizing advice supports would fit somewhere right now.
//!
//! Pure: the runs come in [`super::Inputs::history`], gathered once per invocation. The
//! numbers are the sizing advice's ([`crate::history::sizing`]), so the pending view and
//! `slurmwatch sizing` never disagree, and its rules hold here too: fewer than
//! [`sizing::MIN_RUNS`] usable runs gives no hint, and no suggestion is below what a run used.

use super::reasons::Waiting;
use super::{limit_text, verdict, Inputs, Request};
use crate::history::{sizing, workload_name, Brief, Outcome, Run};
use crate::slurm::squeue::TimeLimit;
use crate::units::{bytes, duration};

/// How far back the pending view looks for runs of the workload: four weeks, asked of sacct
/// in one call (one user's own jobs).
pub const HISTORY_WINDOW_DAYS: u32 = 28;

/// What the pending view knows of the workload's past runs.
#[derive(Debug, Clone, Default)]
pub enum History {
    /// Not looked up (fixtures, `--csv`): no hint and nothing to say about it.
    #[default]
    NotAsked,
    /// sacct failed or did not answer in time: no hint, and this says why.
    Unavailable(String),
    /// The user's finished jobs in the window (any workload: filtered here).
    Runs(Vec<Run>),
}

/// The request figure a hint is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Gpus,
    Memory,
    Cpus,
    Time,
}

impl Resource {
    pub fn as_str(self) -> &'static str {
        match self {
            Resource::Gpus => "gpus",
            Resource::Memory => "memory",
            Resource::Cpus => "cpus",
            Resource::Time => "time",
        }
    }

    /// The unit of `requested`, `history_used` and `suggested`.
    pub fn unit(self) -> &'static str {
        match self {
            Resource::Gpus => "gpus_per_node",
            Resource::Memory => "bytes_per_node",
            Resource::Cpus => "cpus_per_node",
            Resource::Time => "seconds",
        }
    }

    fn flag(self) -> &'static str {
        match self {
            Resource::Gpus => "--gres",
            Resource::Memory => "--mem",
            Resource::Cpus => "--cpus-per-task",
            Resource::Time => "--time",
        }
    }
}

/// One resource the job asks more of than its workload's runs needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryHint {
    pub resource: Resource,
    /// In [`Resource::unit`].
    pub requested: u64,
    /// The most any usable run used, rounded up to the unit.
    pub history_used: u64,
    /// Usable runs behind the figure.
    pub runs: usize,
    /// The smaller request: the sizing advice's, never below `history_used`.
    pub suggested: u64,
    /// Where the figure comes from (the sizing advice's basis).
    pub basis: String,
    /// Accessible partitions where the job with `suggested` would fit now.
    pub fits_now_in: Vec<String>,
    pub command: String,
    pub sentence: String,
}

/// Every hint's smaller request at once, where that fits now somewhere no single hint does
/// (a job that needs fewer GPUs *and* less memory to start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CombinedHint {
    pub resources: Vec<Resource>,
    pub fits_now_in: Vec<String>,
    pub command: String,
    pub sentence: String,
}

/// The combined hint over `hints` (each already worth saying on its own), if it opens a
/// partition none of them opens alone.
pub fn combined(inp: &Inputs, request: &Request, hints: &[HistoryHint]) -> Option<CombinedHint> {
    if hints.len() < 2 {
        return None;
    }
    let j = &inp.job;
    let mut req = request.clone();
    let mut keys = Vec::new();
    let mut parts = Vec::new();
    for h in hints {
        let (_, smaller, key) = apply(j, &req, h.resource, h.suggested)?;
        req = smaller;
        keys.push(key);
        parts.push(match h.resource {
            Resource::Gpus => format!("{} → {} GPUs", h.requested, h.suggested),
            Resource::Memory => format!("{} → {} memory", bytes(h.requested), bytes(h.suggested)),
            Resource::Cpus => format!("{} → {} CPUs", h.requested, h.suggested),
            Resource::Time => format!(
                "{} → {} time limit",
                limit_text(TimeLimit::Seconds(h.requested)),
                limit_text(TimeLimit::Seconds(h.suggested))
            ),
        });
    }
    let fits_now_in = fits_now(inp, &req);
    let opened = fits_now_in
        .iter()
        .any(|p| !hints.iter().any(|h| h.fits_now_in.contains(p)));
    if !opened {
        return None;
    }
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let command = command_for(j, &fits_now_in, &keys);
    let sentence = format!(
        "Together ({}) it would fit now on {} {}.",
        parts.join(", "),
        if fits_now_in.len() == 1 {
            "partition"
        } else {
            "partitions"
        },
        fits_now_in.join(", ")
    );
    Some(CombinedHint {
        resources: hints.iter().map(|h| h.resource).collect(),
        fits_now_in,
        command,
        sentence,
    })
}

/// The hints for the job, and a note when there are none for a reason worth saying.
pub fn hints(
    inp: &Inputs,
    request: &Request,
    waiting: Waiting,
) -> (Vec<HistoryHint>, Option<String>) {
    let all = match &inp.history {
        History::NotAsked => return (Vec::new(), None),
        History::Unavailable(why) => {
            return (Vec::new(), Some(format!("no history hint: {why}")));
        }
        History::Runs(runs) => runs,
    };
    if !waiting.movable() {
        return (
            Vec::new(),
            Some(format!(
                "no history hint: it waits for {}, which a smaller request does not change",
                match waiting {
                    Waiting::Dependency => "its dependency",
                    Waiting::Hold => "its release",
                    Waiting::BeginTime => "its begin time",
                    Waiting::Limit => "an account or QOS limit",
                    _ => "something other than room",
                }
            )),
        );
    }
    let j = &inp.job;
    let workload = workload_name(&j.name);
    let mut runs: Vec<&Run> = all
        .iter()
        .filter(|r| workload_name(&r.name) == workload)
        .filter(|r| r.user.as_deref().is_none_or(|u| u == j.user))
        .filter(|r| r.raw_id != Some(j.job_id))
        .collect();
    runs.sort_by_key(|r| r.t());
    if runs.is_empty() {
        return (
            Vec::new(),
            Some(format!(
                "no history hint: no finished run of workload {workload} in the last {HISTORY_WINDOW_DAYS} days"
            )),
        );
    }
    let briefs: Vec<Brief> = runs.iter().map(|r| Brief::from(*r)).collect();
    let advice = sizing::advise(&briefs.iter().collect::<Vec<_>>());
    let timed_out = runs.iter().any(|r| r.outcome == Outcome::Timeout);
    let out: Vec<HistoryHint> = [
        Resource::Gpus,
        Resource::Memory,
        Resource::Cpus,
        Resource::Time,
    ]
    .into_iter()
    .filter(|&res| !(res == Resource::Time && timed_out))
    .filter_map(|res| {
        let a = advice.iter().find(|a| a.flag == res.flag())?;
        hint(inp, request, res, a)
    })
    .collect();
    let note = out.is_empty().then(|| {
        let usable = advice.iter().map(|a| a.usable_runs).max().unwrap_or(0);
        if usable < sizing::MIN_RUNS {
            format!(
                "no history hint: {} finished runs of workload {workload} in the last {HISTORY_WINDOW_DAYS} days, fewer than {} usable",
                runs.len(),
                sizing::MIN_RUNS
            )
        } else {
            format!(
                "no history hint: the request is no larger than {} runs of workload {workload} needed",
                runs.len()
            )
        }
    });
    (out, note)
}

/// One resource's hint, when the evidence suffices and says the request is larger.
fn hint(inp: &Inputs, r: &Request, res: Resource, a: &sizing::Advice) -> Option<HistoryHint> {
    let f = a.figures?;
    if a.usable_runs < sizing::MIN_RUNS || !f.used.is_finite() || f.used < 0.0 {
        return None;
    }
    let j = &inp.job;
    let used = match res {
        // The sizing's tolerance: 1.02 cores busy is one core's work.
        Resource::Cpus => (f.used - 0.05).ceil().max(1.0) as u64,
        _ => f.used.ceil() as u64,
    };
    // Never below what a run used, whatever rounding did.
    let suggested = f.need.max(used);
    let (requested, smaller, key_value) = apply(j, r, res, suggested)?;
    if suggested >= requested {
        return None;
    }
    let fits_now_in = fits_now(inp, &smaller);
    let command = command_for(j, &fits_now_in, &[key_value.as_str()]);
    build_hint(
        r,
        res,
        a,
        f.used,
        used,
        requested,
        suggested,
        fits_now_in,
        command,
    )
}

/// The accessible partitions where `req` would fit now.
fn fits_now(inp: &Inputs, req: &Request) -> Vec<String> {
    inp.partitions
        .iter()
        .map(|p| verdict(p, inp, req, false))
        .filter(|v| v.accessible && v.fits_now)
        .map(|v| v.name)
        .collect()
}

/// `scontrol update JobId=N K=V…`, plus `Partition=` when only another partition has room.
fn command_for(j: &super::JobDetails, fits_now_in: &[String], key_values: &[&str]) -> String {
    let mut command = format!(
        "scontrol update JobId={} {}",
        j.job_id,
        key_values.join(" ")
    );
    let in_own = fits_now_in.iter().any(|p| j.partitions.contains(p));
    if let (false, Some(p)) = (in_own, fits_now_in.first()) {
        command.push_str(&format!(" Partition={p}"));
    }
    command
}

/// The request with `res` lowered to `suggested`: (what it asked, the smaller request, the
/// `scontrol update` key). `None` where the resource does not apply to this job.
fn apply(
    j: &super::JobDetails,
    r: &Request,
    res: Resource,
    suggested: u64,
) -> Option<(u64, Request, String)> {
    let mut smaller = r.clone();
    let (requested, key_value) = match res {
        // Recordings are per node: only a one-node job compares like with like.
        Resource::Gpus if r.nodes == 1 && r.gpus_per_node > 0 => {
            smaller.gpus_per_node = u32::try_from(suggested).ok()?;
            (u64::from(r.gpus_per_node), format!("Gres=gpu:{suggested}"))
        }
        Resource::Memory => {
            let want = r.memory_per_node_bytes?;
            let mib = suggested.div_ceil(1 << 20);
            if j.memory_per_node_bytes.is_none() && j.memory_per_cpu_bytes.is_some() {
                // Asked per CPU: Slurm takes one of the two, so keep the job's kind.
                let per_cpu_mib = mib.div_ceil(u64::from(r.cpus_per_node.max(1)));
                smaller.memory_per_node_bytes =
                    Some((per_cpu_mib << 20).saturating_mul(u64::from(r.cpus_per_node.max(1))));
                (want, format!("MinMemoryCPU={per_cpu_mib}"))
            } else {
                smaller.memory_per_node_bytes = Some(mib << 20);
                (want, format!("MinMemoryNode={mib}"))
            }
        }
        Resource::Cpus => {
            smaller.cpus_per_node = u32::try_from(suggested).ok()?;
            smaller.cpus = smaller.cpus_per_node.saturating_mul(r.nodes);
            (
                u64::from(r.cpus_per_node),
                format!("NumCPUs={}", smaller.cpus),
            )
        }
        Resource::Time => {
            let TimeLimit::Seconds(asked) = r.time_limit else {
                return None;
            };
            smaller.time_limit = TimeLimit::Seconds(suggested);
            (
                asked,
                format!("TimeLimit={}", limit_text(smaller.time_limit)),
            )
        }
        Resource::Gpus => return None,
    };
    Some((requested, smaller, key_value))
}

#[allow(clippy::too_many_arguments)] // the figures of one hint, each named where it is made
fn build_hint(
    r: &Request,
    res: Resource,
    a: &sizing::Advice,
    used_exact: f64,
    used: u64,
    requested: u64,
    suggested: u64,
    fits_now_in: Vec<String>,
    command: String,
) -> Option<HistoryHint> {
    let show = |v: u64| match res {
        Resource::Gpus => v.to_string(),
        Resource::Memory => bytes(v),
        Resource::Cpus => v.to_string(),
        Resource::Time => limit_text(TimeLimit::Seconds(v)),
    };
    let (asks, runs_kind, did) = match res {
        Resource::Gpus => (format!("{requested} GPUs"), "recorded ", "used at most"),
        Resource::Memory => (format!("{} per node", bytes(requested)), "", "peaked at"),
        Resource::Cpus => (
            format!("{requested} CPUs per node"),
            "completed ",
            "kept at most",
        ),
        Resource::Time => (
            format!("a time limit of {}", limit_text(r.time_limit)),
            "completed ",
            "took at most",
        ),
    };
    let used_text = match res {
        Resource::Memory => bytes(used),
        Resource::Cpus => format!("{:.1} cores busy", used_exact),
        Resource::Time => duration(used_exact),
        Resource::Gpus => used.to_string(),
    };
    let tail = match fits_now_in.as_slice() {
        [] => "though no partition has room for it even then right now".to_string(),
        [one] => format!("it would fit now on partition {one}"),
        many => format!("it would fit now on partitions {}", many.join(", ")),
    };
    let sentence = format!(
        "This job asks for {asks}; your last {} {runs_kind}runs of this workload {did} {used_text} — with {} {tail}.",
        a.usable_runs,
        show(suggested)
    );
    Some(HistoryHint {
        resource: res,
        requested,
        history_used: used,
        runs: a.usable_runs,
        suggested,
        basis: a.basis.clone(),
        fits_now_in,
        command,
        sentence,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::RunRecording;
    use crate::queue::analyse;
    use crate::slurm::scontrol::{parse_job, parse_nodes, parse_partitions};

    const GIB: u64 = 1 << 30;

    /// A finished run of `train-N`: 20 min, one node, 4 CPUs, 2 of them busy on average.
    fn run(i: u64) -> Run {
        Run {
            job_id: (100 + i).to_string(),
            raw_id: Some(100 + i as u32),
            name: format!("train-{i}"),
            user: Some("u".into()),
            partition: Some("gpu".into()),
            state: "COMPLETED".into(),
            outcome: Outcome::Completed,
            exit_code: Some(0),
            submit_unix: Some(1_000 * i as i64),
            start_unix: Some(1_000 * i as i64),
            end_unix: Some(1_000 * i as i64 + 1_200),
            elapsed_seconds: Some(1_200.0),
            timelimit_seconds: Some(8.0 * 3600.0),
            cpus_per_node: Some(4),
            cpus_total: Some(4),
            nodes: 1,
            gpus: 4,
            node_names: vec!["g1".into()],
            mem_request_bytes: Some(64 * GIB),
            mem_whole_node: false,
            cpu_seconds: Some(2.0 * 1_200.0),
            max_rss_bytes: Some(3 * GIB),
            sacct_memory: None,
            recorded: None,
        }
    }

    /// A recording that saw 4 cards, `used` of them busy, and a working-set peak.
    fn recorded(gpus_used: usize, working_set_bytes: Option<u64>) -> Option<RunRecording> {
        Some(RunRecording {
            gpus_seen: 4,
            gpus_used,
            peak_working_set_bytes: working_set_bytes,
            ..RunRecording::default()
        })
    }

    /// `gpu`: one node with every card busy; `debug`: one node with 2 GPUs, 20 GiB free and
    /// at most one hour.
    fn inputs(reason: &str, runs: Vec<Run>) -> Inputs {
        Inputs {
            job: parse_job(&format!(
                "JobId=50 JobName=train-11 UserId=u(5) GroupId=g(5) Account=a QOS=normal \
                 JobState=PENDING Reason={reason} Partition=gpu TimeLimit=08:00:00 NumNodes=1 \
                 NumCPUs=4 MinMemoryNode=64G TresPerNode=gres:gpu:4 Priority=100"
            ))
            .unwrap(),
            partitions: parse_partitions(
                "PartitionName=gpu State=UP MaxTime=1-00:00:00 TotalNodes=1\n\
                 PartitionName=debug State=UP MaxTime=01:00:00 TotalNodes=1\n",
            ),
            nodes: parse_nodes(
                "NodeName=g1 CPUAlloc=8 CPUTot=32 RealMemory=256000 AllocMem=16000 State=MIXED Partitions=gpu Gres=gpu:a100:4 GresUsed=gpu:a100:4(IDX:0-3)\n\
                 NodeName=d1 CPUAlloc=4 CPUTot=8 RealMemory=40960 AllocMem=20480 State=MIXED Partitions=debug Gres=gpu:t4:4 GresUsed=gpu:t4:2(IDX:0-1)\n",
            ),
            queue: vec![],
            groups: vec!["g".into()],
            history: History::Runs(runs),
        }
    }

    fn gpu_runs(n: u64, used: usize) -> Vec<Run> {
        (1..=n)
            .map(|i| Run {
                recorded: recorded(used, None),
                ..run(i)
            })
            .collect()
    }

    fn find(hints: &[HistoryHint], r: Resource) -> Option<&HistoryHint> {
        hints.iter().find(|h| h.resource == r)
    }

    #[test]
    fn four_gpus_asked_one_used_fits_where_two_are_free() {
        let a = analyse(&inputs("Resources", gpu_runs(10, 1)));
        let h = find(&a.history_hints, Resource::Gpus).expect("a GPU hint");
        assert_eq!(
            (h.requested, h.history_used, h.suggested, h.runs),
            (4, 1, 1, 10)
        );
        // 64 GiB still does not fit debug's 20 GiB free: the GPU hint alone fits nowhere.
        assert!(h.fits_now_in.is_empty(), "{h:?}");
        assert!(
            h.sentence.contains("no partition has room"),
            "{}",
            h.sentence
        );
        // With the memory the runs used, debug has room for one card.
        let mut i = inputs("Resources", gpu_runs(10, 1));
        i.job.memory_per_node_bytes = Some(8 * GIB);
        i.job.time_limit = TimeLimit::Seconds(3600);
        let a = analyse(&i);
        let h = find(&a.history_hints, Resource::Gpus).expect("a GPU hint");
        assert_eq!(h.fits_now_in, vec!["debug".to_string()]);
        assert_eq!(
            h.command,
            "scontrol update JobId=50 Gres=gpu:1 Partition=debug"
        );
        assert_eq!(
            h.sentence,
            "This job asks for 4 GPUs; your last 10 recorded runs of this workload used at most 1 — with 1 it would fit now on partition debug."
        );
        assert!(a.history_note.is_none());
    }

    /// With 64 GiB and 8 h asked, no single hint opens a partition; all of them together
    /// (fewer GPUs, the memory and time the runs needed) open debug.
    #[test]
    fn lowering_every_figure_together_fits_where_none_does_alone() {
        let i = inputs("Resources", gpu_runs(10, 1));
        let a = analyse(&i);
        assert!(a.history_hints.len() >= 2, "{:?}", a.history_hints);
        assert!(a.history_hints.iter().all(|h| h.fits_now_in.is_empty()));
        let c = a.history_combined.as_ref().expect("a combined hint");
        assert_eq!(c.fits_now_in, vec!["debug".to_string()]);
        assert!(
            c.command
                .starts_with("scontrol update JobId=50 Gres=gpu:1 MinMemoryNode="),
            "{}",
            c.command
        );
        assert!(c.command.contains(" TimeLimit="), "{}", c.command);
        assert!(c.command.ends_with(" Partition=debug"), "{}", c.command);
        assert!(
            c.sentence
                .starts_with("Together (4 → 1 GPUs, 64.0 GiB → 4.00 GiB memory, "),
            "{}",
            c.sentence
        );
        assert!(
            c.sentence.ends_with("it would fit now on partition debug."),
            "{}",
            c.sentence
        );
        // Where one hint alone already fits, the combined one adds nothing.
        let mut i = inputs("Resources", gpu_runs(10, 1));
        i.job.memory_per_node_bytes = Some(8 * GIB);
        i.job.time_limit = TimeLimit::Seconds(3600);
        assert!(analyse(&i).history_combined.is_none());
    }

    #[test]
    fn fewer_than_three_runs_give_no_hint() {
        let a = analyse(&inputs("Resources", gpu_runs(2, 1)));
        assert!(a.history_hints.is_empty(), "{:?}", a.history_hints);
        let note = a.history_note.unwrap();
        assert!(note.contains("fewer than 3"), "{note}");
    }

    #[test]
    fn runs_that_used_all_four_cards_give_no_gpu_hint() {
        let a = analyse(&inputs("Resources", gpu_runs(10, 4)));
        assert!(find(&a.history_hints, Resource::Gpus).is_none());
    }

    #[test]
    fn a_job_waiting_for_its_dependency_gets_no_hint() {
        let a = analyse(&inputs("Dependency", gpu_runs(10, 1)));
        assert!(a.history_hints.is_empty());
        assert!(a.history_note.unwrap().contains("dependency"));
        let a = analyse(&inputs("JobHeldUser", gpu_runs(10, 1)));
        assert!(a.history_hints.is_empty());
    }

    #[test]
    fn memory_from_the_recorded_peak_where_there_is_one_else_max_rss() {
        // MaxRSS 3 GiB but the recorded working set peaked at 4 GiB: the recording decides.
        let runs: Vec<Run> = (1..=5)
            .map(|i| Run {
                recorded: recorded(4, Some(4 * GIB)),
                ..run(i)
            })
            .collect();
        let a = analyse(&inputs("Resources", runs));
        let h = find(&a.history_hints, Resource::Memory).expect("a memory hint");
        assert_eq!(h.history_used, 4 * GIB);
        // 4 GiB + 20 % headroom, rounded up to whole GiB.
        assert_eq!(h.suggested, 5 * GIB);
        assert!(h.basis.contains("recorded working-set peak"), "{}", h.basis);
        assert!(h.command.ends_with("MinMemoryNode=5120"), "{}", h.command);
        // Without recordings: MaxRSS, said so.
        let a = analyse(&inputs("Resources", (1..=5).map(run).collect()));
        let h = find(&a.history_hints, Resource::Memory).expect("a memory hint");
        assert_eq!(h.history_used, 3 * GIB);
        assert_eq!(h.suggested, 4 * GIB);
        assert!(h.basis.contains("MaxRSS"), "{}", h.basis);
        assert!(h.suggested >= h.history_used);
    }

    #[test]
    fn time_and_cpus_from_completed_runs() {
        let a = analyse(&inputs("Resources", (1..=5).map(run).collect()));
        let t = find(&a.history_hints, Resource::Time).expect("a time hint");
        assert_eq!((t.requested, t.history_used), (8 * 3600, 1_200));
        assert!(t.suggested >= 1_200 && t.suggested < 3600, "{t:?}");
        // Under an hour, in Slurm's notation: `minutes:seconds`.
        assert!(
            t.command.contains("TimeLimit=") && !t.command.contains("TimeLimit=0:"),
            "{}",
            t.command
        );
        assert!(t.command.matches(':').count() == 1, "{}", t.command);
        let c = find(&a.history_hints, Resource::Cpus).expect("a CPU hint");
        assert_eq!((c.requested, c.history_used, c.suggested), (4, 2, 2));
        assert_eq!(c.command, "scontrol update JobId=50 NumCPUs=2");
        // A run that hit its limit: the time is not sized down.
        let mut runs: Vec<Run> = (1..=5).map(run).collect();
        runs[0].outcome = Outcome::Timeout;
        let a = analyse(&inputs("Resources", runs));
        assert!(find(&a.history_hints, Resource::Time).is_none());
    }

    #[test]
    fn other_workloads_users_and_sacct_failures() {
        let mut runs = gpu_runs(10, 1);
        for r in &mut runs {
            r.name = "eval-1".into();
        }
        let a = analyse(&inputs("Resources", runs));
        assert!(a.history_hints.is_empty());
        assert!(a.history_note.unwrap().contains("train-#"));
        let mut runs = gpu_runs(10, 1);
        for r in &mut runs {
            r.user = Some("someone-else".into());
        }
        assert!(analyse(&inputs("Resources", runs)).history_hints.is_empty());
        let mut i = inputs("Resources", vec![]);
        i.history = History::Unavailable("sacct did not answer within 10 s".into());
        let a = analyse(&i);
        assert!(a.history_hints.is_empty());
        assert!(a.history_note.unwrap().contains("sacct did not answer"));
        i.history = History::NotAsked;
        assert_eq!(analyse(&i).history_note, None);
    }

    #[test]
    fn hints_in_json_and_lines() {
        let a = analyse(&inputs("Resources", gpu_runs(10, 1)));
        let v = crate::queue::render::to_value(&a, 4, 0.1);
        let h = &v["pending"]["history_hints"][0];
        assert_eq!(h["resource"], "gpus");
        assert_eq!(h["unit"], "gpus_per_node");
        assert_eq!(h["requested"], 4);
        assert_eq!(h["suggested"], 1);
        assert!(h["fits_now_in"].is_array());
        assert!(v["pending"]["history_note"].is_null());
        let lines = crate::queue::render::lines(&a);
        assert!(lines
            .iter()
            .any(|l| l.starts_with("Past:  This job asks for 4 GPUs")));
    }
}
