//! Generated sacct histories for tests, the `history` bench and the comparison with other
//! tools (`scripts/bench-vs-slurmpast.sh`, through `examples/history_fixture.rs`). Not part of
//! the API: hidden from the docs and free to change.
//!
//! One job line and its `.batch` step per job, `--parsable2` with the unit separator, as
//! Slurm 22.05 prints it. [`text`] prints the [`HEADER`] columns; [`rows`] gives every
//! column of [`wide`] (a superset, for a fake sacct that answers any `--format`).

use crate::slurm::sacct::sacct_time;

/// The columns of [`text`], in this order (a prefix of [`wide`]).
pub const HEADER: &[&str] = &[
    "JobID",
    "JobIDRaw",
    "JobName",
    "User",
    "UID",
    "Partition",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "End",
    "ElapsedRaw",
    "TimelimitRaw",
    "NNodes",
    "NCPUS",
    "ReqMem",
    "AllocTRES",
    "NodeList",
    "TotalCPU",
    "MaxRSS",
];

/// The columns [`rows`] fills beyond [`HEADER`]: the same facts under the other names and
/// forms sacct offers (formatted durations, `*Raw` seconds, requested/allocated counts).
pub const EXTRA: &[&str] = &[
    "Group",
    "Account",
    "Cluster",
    "QOS",
    "Eligible",
    "Elapsed",
    "Timelimit",
    "AllocCPUS",
    "ReqCPUS",
    "AllocNodes",
    "ReqNodes",
    "ReqTRES",
    "NTasks",
    "CPUTime",
    "CPUTimeRAW",
    "UserCPU",
    "SystemCPU",
    "MaxRSSNode",
    "MaxRSSTask",
    "AveRSS",
    "DerivedExitCode",
    "Reason",
    "Flags",
    "WorkDir",
];

/// Every column [`rows`] fills, in order: [`HEADER`], then [`EXTRA`].
pub fn wide() -> Vec<&'static str> {
    HEADER.iter().chain(EXTRA).copied().collect()
}

/// First submit time of the generated histories (2026-09-21, unix seconds).
pub const T0: i64 = 1_790_000_000;

#[derive(Clone, Debug)]
pub struct Job {
    pub name: String,
    pub user: String,
    pub state: String,
    pub exit: String,
    pub elapsed: u64,
    pub limit_min: u64,
    pub cpus: u64,
    pub mem_mb: u64,
    pub node: String,
    pub cpu_s: f64,
    pub maxrss_mb: u64,
    pub gpus: u64,
}

impl Job {
    pub fn new(name: &str) -> Job {
        Job {
            name: name.into(),
            user: "alice".into(),
            state: "COMPLETED".into(),
            exit: "0:0".into(),
            elapsed: 600,
            limit_min: 60,
            cpus: 4,
            mem_mb: 4096,
            node: "cn01".into(),
            cpu_s: 2000.0,
            maxrss_mb: 1000,
            gpus: 0,
        }
    }
}

/// A duration as sacct prints TotalCPU: `[D-]HH:MM:SS`, or `MM:SS.mmm` under an hour.
pub fn dur(s: f64) -> String {
    let ms = ((s.fract()) * 1000.0).round() as u64;
    let s = s as u64;
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else if h > 0 {
        format!("{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{m:02}:{sec:02}.{ms:03}")
    }
}

/// A duration as sacct prints Elapsed/Timelimit/CPUTime: `[D-]HH:MM:SS`.
fn hms(s: u64) -> String {
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

/// Jobs one after another from `t0` (a minute apart), ids from `first_id`: two rows each
/// (job line, `.batch` step), every [`wide`] column in that order.
pub fn rows(jobs: &[Job], t0: i64, first_id: u64) -> Vec<Vec<String>> {
    let mut out = Vec::with_capacity(jobs.len() * 2);
    let mut t = t0;
    for (i, j) in jobs.iter().enumerate() {
        let start = t + 5;
        t = start + 60;
        out.extend(job_rows(j, first_id + i as u64, start, start));
    }
    out
}

/// One job's two rows (job line, `.batch` step), every [`wide`] column in that order:
/// submitted (and eligible) at `submit`, started at `start`.
pub fn job_rows(j: &Job, id: u64, submit: i64, start: i64) -> [Vec<String>; 2] {
    let end = start + j.elapsed as i64;
    let mut tres = format!("billing={0},cpu={0},mem={1}M,node=1", j.cpus, j.mem_mb);
    if j.gpus > 0 {
        tres += &format!(",gres/gpu={}", j.gpus);
    }
    let job = job_line(j, id, submit, start, end, &tres);
    let step = batch_step_line(j, id, start, end, &tres);
    debug_assert_eq!(job.len(), HEADER.len() + EXTRA.len());
    debug_assert_eq!(step.len(), HEADER.len() + EXTRA.len());
    [job, step]
}

/// The job's CPU time: allocated (elapsed s × CPUs), then user and system seconds (90/10).
fn cpu_times(j: &Job) -> (u64, f64, f64) {
    (j.elapsed * j.cpus, j.cpu_s * 0.9, j.cpu_s * 0.1)
}

/// The job line of [`job_rows`]; times in Unix seconds.
fn job_line(j: &Job, id: u64, submit: i64, start: i64, end: i64, tres: &str) -> Vec<String> {
    let (cputime, user_cpu, sys_cpu) = cpu_times(j);
    vec![
        // HEADER
        id.to_string(),
        id.to_string(),
        j.name.clone(),
        j.user.clone(),
        "1001".into(),
        "batch".into(),
        j.state.clone(),
        j.exit.clone(),
        sacct_time(submit),
        sacct_time(start),
        sacct_time(end),
        j.elapsed.to_string(),
        j.limit_min.to_string(),
        "1".into(),
        j.cpus.to_string(),
        format!("{}M", j.mem_mb),
        tres.to_string(),
        j.node.clone(),
        dur(j.cpu_s),
        String::new(),
        // WIDE
        "users".into(),
        "lab".into(),
        "cluster".into(),
        "normal".into(),
        sacct_time(submit),
        hms(j.elapsed),
        hms(j.limit_min * 60),
        j.cpus.to_string(),
        j.cpus.to_string(),
        "1".into(),
        "1".into(),
        tres.to_string(),
        String::new(),
        hms(cputime),
        cputime.to_string(),
        dur(user_cpu),
        dur(sys_cpu),
        String::new(),
        String::new(),
        String::new(),
        "0:0".into(),
        "None".into(),
        "SchedMain".into(),
        format!("/home/{}", j.user),
    ]
}

/// The `.batch` step line of [`job_rows`] (a TIMEOUT job's step ends CANCELLED); times in
/// Unix seconds.
fn batch_step_line(j: &Job, id: u64, start: i64, end: i64, tres: &str) -> Vec<String> {
    let (cputime, user_cpu, sys_cpu) = cpu_times(j);
    let step_state = if j.state == "TIMEOUT" {
        "CANCELLED"
    } else {
        &j.state
    };
    let rss = format!("{}K", j.maxrss_mb * 1024);
    vec![
        format!("{id}.batch"),
        format!("{id}.batch"),
        "batch".into(),
        String::new(),
        String::new(),
        String::new(),
        step_state.to_string(),
        j.exit.clone(),
        sacct_time(start),
        sacct_time(start),
        sacct_time(end),
        j.elapsed.to_string(),
        String::new(),
        "1".into(),
        j.cpus.to_string(),
        String::new(),
        tres.to_string(),
        j.node.clone(),
        dur(j.cpu_s),
        rss.clone(),
        // WIDE
        String::new(),
        "lab".into(),
        "cluster".into(),
        String::new(),
        sacct_time(start),
        hms(j.elapsed),
        String::new(),
        j.cpus.to_string(),
        j.cpus.to_string(),
        "1".into(),
        "1".into(),
        String::new(),
        "1".into(),
        hms(cputime),
        cputime.to_string(),
        dur(user_cpu),
        dur(sys_cpu),
        j.node.clone(),
        "0".into(),
        rss,
        String::new(),
        String::new(),
        String::new(),
        String::new(),
    ]
}

/// A fake `sacct`'s shell script body that prints the sacct text in `answer`, whose fields
/// are split by `delimiter`, split instead by the delimiter it is asked for
/// (`--delimiter=…`, `|` when none): what the real sacct prints for the same jobs (checked
/// on 22.05.8 against captures of both), since no field holds `delimiter`.
pub fn replay(answer: &std::path::Path, delimiter: &str) -> String {
    assert!(
        delimiter
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b.is_ascii_control())
            && !delimiter.contains('\n'),
        "{delimiter:?}: a delimiter sed takes literally"
    );
    let octal: String = delimiter.bytes().map(|b| format!("\\{b:03o}")).collect();
    let path = answer.display().to_string().replace('\'', "'\\''");
    format!(
        "d='|'\nfor a in \"$@\"; do case \"$a\" in --delimiter=*) d=\"${{a#--delimiter=}}\";; esac; done\n\
         exec sed \"s/$(printf '{octal}')/$d/g\" '{path}'\n"
    )
}

/// The [`HEADER`] columns of [`rows`], as `sacct --parsable2 --delimiter=$'\x1f'` prints them.
pub fn text(jobs: &[Job], t0: i64, first_id: u64) -> String {
    let mut s = HEADER.join("\u{1f}");
    s.push('\n');
    for r in rows(jobs, t0, first_id) {
        s += &r[..HEADER.len()].join("\u{1f}");
        s.push('\n');
    }
    s
}

/// The 10,000-job history of the bench and the speed test: [`mixed_jobs`]`(10_000)`.
pub fn ten_thousand_jobs() -> Vec<Job> {
    mixed_jobs(10_000).collect()
}

/// `n` jobs of the bench's mix: 20 users, twelve kinds of work (`align_123`, …), half the
/// runs completed and the rest failed, timed out (at the limit) or killed for memory; CPU and
/// memory use vary by kind, a fifth of the kinds ask for GPUs; 64 nodes. Job `i` is the same
/// whatever `n` is.
pub fn mixed_jobs(n: u64) -> impl Iterator<Item = Job> {
    const KINDS: &[&str] = &[
        "align", "train", "assemble", "fetch", "render", "sim", "blast", "qc", "merge", "index",
        "plot", "convert",
    ];
    const STATES: &[&str] = &[
        "COMPLETED",
        "COMPLETED",
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
    ];
    // Spread so that user, kind, state and memory are not locked together by `i % n`.
    let mix = |i: u64, salt: u64| (i ^ salt).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
    (0..n).map(move |i| {
        let k = ((i / 20) % KINDS.len() as u64) as usize;
        let state = STATES[(mix(i, 1) % 6) as usize];
        let limit_min = 180;
        let cpus = [1, 2, 4, 8][k % 4];
        let mem_mb = 1024 * (1 + mix(i, 2) % 8);
        let elapsed = if state == "TIMEOUT" {
            limit_min * 60 + 30
        } else {
            300 + (i * 37) % 7000
        };
        // CPU efficiency by kind: 95 %, 75 %, 50 %, 25 %, 10 %.
        let eff = [0.95, 0.75, 0.5, 0.25, 0.1][k % 5];
        let maxrss_mb = if state == "OUT_OF_MEMORY" {
            mem_mb
        } else {
            mem_mb * [9, 6, 3, 1][k % 4] / 10
        };
        Job {
            state: state.into(),
            exit: match state {
                "FAILED" => "1:0",
                "TIMEOUT" => "0:15",
                "OUT_OF_MEMORY" => "0:125",
                _ => "0:0",
            }
            .into(),
            elapsed,
            limit_min,
            cpus,
            mem_mb,
            node: format!("cn{:03}", i % 64),
            cpu_s: elapsed as f64 * cpus as f64 * eff,
            maxrss_mb,
            gpus: if k % 5 == 1 { 2 } else { 0 },
            user: format!("u{}", i % 20),
            ..Job::new(&format!("{}_{i}", KINDS[k]))
        }
    })
}

/// [`ten_thousand_jobs`] as sacct text, ids from 1, from [`T0`].
pub fn ten_thousand() -> String {
    text(&ten_thousand_jobs(), T0, 1)
}
