//! A [`Scrape`] as Prometheus text exposition (format 0.0.4), with `# HELP` and `# TYPE`.
//!
//! Why these names and rules:
//! - Prometheus' base units: seconds, bytes, hertz, watts, ratios (0–1, not percent);
//!   cumulative counts end in `_total` and are counters, everything else is a gauge.
//! - A reading that could not be taken is an *absent* series, never 0 (principle 3): zero is
//!   a plausible power, temperature or memory value.
//! - No timestamps on samples: node_exporter's textfile collector refuses them, and a series
//!   with explicit timestamps is not marked stale when it disappears, so an ended job would
//!   linger in queries for Prometheus' lookback window. The time of each reading is a series
//!   of its own (`slurmwatch_sample_timestamp_seconds`).
//! - Labels: `cluster`, `node` (Slurm's node name), `jobid`, `step` (empty for the whole job
//!   on this node, as cgroup_exporter does), `user`; cards add `cuda_index` (the position in
//!   the job's `CUDA_VISIBLE_DEVICES`, absent when the job named no order), `nvml_index` and
//!   `uuid`.
//! - `jobstats`: the series Princeton's jobstats queries, named and labelled as
//!   cgroup_exporter and its GPU exporter publish them (`cgroup_*{jobid, step="", task=""}`,
//!   `nvidia_gpu_*{jobid, userid, minor_number, uuid, name}` and `nvidia_gpu_jobId`), from the
//!   same readings: both of jobstats' GPU modes (`jobid` label, or the `nvidia_gpu_jobId` join)
//!   answer. `cgroup_memory_shmem_bytes` is 0 (the working set already holds shared memory);
//!   `cgroup_memory_fail_count` is the limit-hit counter.
//!   `cgroup_memory_rss_bytes` is the working set (usage − page cache), the figure `--mem`
//!   must cover; `minor_number` is NVML's index (slurmwatch does not record the device minor).

use std::fmt::Write as _;

use super::live::{FileState, LiveGpu, LiveJob, LiveSeries, Scrape};
use crate::collect::gpu::derive::THROTTLE_BITS;
use crate::sample::GpuReading;

/// What to publish besides the native series.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// The `cluster` label; when `None`, the recording's own (`meta.cluster`), else none.
    pub cluster: Option<String>,
    /// Add the series jobstats queries.
    pub jobstats: bool,
}

/// A sample value, kept exact: integers stay integers, microseconds become seconds with six
/// decimals.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Value {
    Int(u64),
    Micros(u64),
    Float(f64),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Micros(us) => write!(f, "{}.{:06}", us / 1_000_000, us % 1_000_000),
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
}

type Labels = Vec<(&'static str, String)>;

/// One metric family and its samples, written out only when it has a sample.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    samples: Vec<(Labels, Value)>,
}

impl Family {
    fn new(name: &'static str, kind: Kind, help: &'static str) -> Family {
        Family {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    fn add(&mut self, labels: &Labels, v: Option<Value>) {
        match v {
            Some(Value::Float(x)) if !x.is_finite() => {}
            Some(v) => self.samples.push((labels.clone(), v)),
            None => {}
        }
    }

    fn write(&self, out: &mut String) {
        if self.samples.is_empty() {
            return;
        }
        let kind = match self.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {kind}", self.name);
        for (labels, v) in &self.samples {
            out.push_str(self.name);
            if !labels.is_empty() {
                out.push('{');
                for (i, (k, val)) in labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", escape(val));
                }
                out.push('}');
            }
            let _ = writeln!(out, " {v}");
        }
    }
}

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

fn int(v: Option<u64>) -> Option<Value> {
    v.map(Value::Int)
}

fn micros(v: Option<u64>) -> Option<Value> {
    v.map(Value::Micros)
}

fn ratio_of_percent(v: Option<f64>) -> Option<Value> {
    v.map(|p| Value::Float(p / 100.0))
}

fn ok<T: Copy>(r: &GpuReading<T>) -> Option<T> {
    r.as_ref().ok().copied()
}

fn cluster_of<'a>(job: &'a LiveJob, opts: &'a RenderOptions) -> Option<&'a str> {
    opts.cluster.as_deref().or(job.meta.cluster.as_deref())
}

/// `cluster`, `node`, `jobid`, `step` (empty: the whole job on this node), `user`.
fn base_labels(job: &LiveJob, step: &str, opts: &RenderOptions) -> Labels {
    let mut l: Labels = Vec::with_capacity(8);
    if let Some(c) = cluster_of(job, opts) {
        l.push(("cluster", c.to_string()));
    }
    l.push(("node", job.meta.node.clone()));
    l.push(("jobid", job.meta.job_id.to_string()));
    l.push(("step", step.to_string()));
    l.push(("user", job.meta.user.clone()));
    l
}

fn series_labels(job: &LiveJob, s: &LiveSeries, opts: &RenderOptions) -> Labels {
    base_labels(job, s.step.as_deref().unwrap_or(""), opts)
}

fn gpu_labels(job: &LiveJob, g: &LiveGpu, opts: &RenderOptions) -> Labels {
    let mut l = base_labels(job, &g.step, opts);
    if let Some(i) = g.card.cuda_index {
        l.push(("cuda_index", i.to_string()));
    }
    l.push(("nvml_index", g.card.nvml_index.to_string()));
    l.push(("uuid", g.card.uuid.clone()));
    l
}

/// The exposition text for `scrape`.
pub fn render(scrape: &Scrape, opts: &RenderOptions) -> String {
    let mut fams: Vec<Family> = Vec::new();
    native_series(scrape, opts, &mut fams);
    native_gpus(scrape, opts, &mut fams);
    if opts.jobstats {
        jobstats(scrape, opts, &mut fams);
    }
    scrape_health(scrape, &mut fams);
    let mut out = String::new();
    for f in &fams {
        f.write(&mut out);
    }
    out
}

fn native_series(scrape: &Scrape, opts: &RenderOptions, fams: &mut Vec<Family>) {
    use Kind::{Counter, Gauge};
    let mut f = [
        Family::new("slurmwatch_sample_timestamp_seconds", Gauge, "When the latest stored reading of this job or step was taken (Unix time)."),
        Family::new("slurmwatch_cpu_seconds_total", Counter, "CPU time used by everything in the job (or step) on this node."),
        Family::new("slurmwatch_cpu_user_seconds_total", Counter, "User-mode CPU time of the job (or step)."),
        Family::new("slurmwatch_cpu_system_seconds_total", Counter, "Kernel-mode CPU time of the job (or step)."),
        Family::new("slurmwatch_cores_allocated", Gauge, "CPUs allocated to the job on this node."),
        Family::new("slurmwatch_effective_cores_max", Gauge, "Most cores in use at once between the previous stored reading and the latest (1 s reads)."),
        Family::new("slurmwatch_memory_working_set_bytes", Gauge, "Memory usage minus page cache: what --mem must cover."),
        Family::new("slurmwatch_memory_working_set_max_bytes", Gauge, "Largest working set seen since the previous stored reading (1 s reads)."),
        Family::new("slurmwatch_memory_page_cache_bytes", Gauge, "Page cache charged to the job (reclaimable)."),
        Family::new("slurmwatch_memory_usage_bytes", Gauge, "The kernel's memory charge: working set plus page cache."),
        Family::new("slurmwatch_memory_lifetime_peak_bytes", Gauge, "The kernel's high-water mark of memory usage, page cache included."),
        Family::new("slurmwatch_memory_limit_bytes", Gauge, "The cgroup's memory limit (absent when unlimited)."),
        Family::new("slurmwatch_memory_allocated_bytes", Gauge, "Memory Slurm allocated to the job on this node."),
        Family::new("slurmwatch_memory_oom_kills_total", Counter, "Processes of the job killed by the kernel's OOM killer."),
        Family::new("slurmwatch_memory_limit_hits_total", Counter, "Times the job's memory reached its limit."),
        Family::new("slurmwatch_memory_major_faults_total", Counter, "Major page faults of the job."),
        Family::new("slurmwatch_io_read_bytes_total", Counter, "Block I/O read by the job (absent where the kernel gives no per-job figure)."),
        Family::new("slurmwatch_io_written_bytes_total", Counter, "Block I/O written by the job (absent where the kernel gives no per-job figure)."),
        Family::new("slurmwatch_processes", Gauge, "Processes in the job (or step)."),
        Family::new("slurmwatch_threads", Gauge, "Threads in the job (or step)."),
        Family::new("slurmwatch_pressure_avg10_ratio", Gauge, "Pressure stall information (cgroup v2), 10 s average, as a ratio of wall time."),
        Family::new("slurmwatch_sampler_cpu_seconds_total", Counter, "CPU time slurmwatch's own sampler spent on this job (charged to the job)."),
        Family::new("slurmwatch_sampler_written_bytes_total", Counter, "Bytes slurmwatch's sampler wrote for this job."),
        Family::new("slurmwatch_pressure_stalled_seconds_total", Counter, "Time in which some (kind=some) or all (kind=full) of the job's runnable tasks waited for the resource: cgroup v2 pressure stall totals."),
    ];
    for job in &scrape.jobs {
        for s in &job.series {
            let l = series_labels(job, s, opts);
            let r = &s.row;
            let u = &r.usage;
            let whole_job = s.step.is_none();
            f[0].add(&l, Some(Value::Micros((r.t_unix_ms.max(0) as u64) * 1000)));
            f[1].add(&l, micros(u.cpu_usage_usec));
            f[2].add(&l, micros(u.cpu_user_usec));
            f[3].add(&l, micros(u.cpu_system_usec));
            let cores = r.cores_allocated.or(if whole_job {
                job.meta.cores_allocated
            } else {
                None
            });
            f[4].add(&l, int(cores.map(u64::from)));
            f[5].add(&l, r.effective_cores_max.map(Value::Float));
            f[6].add(&l, int(u.memory_working_set_bytes));
            f[7].add(&l, int(r.memory_working_set_max_bytes));
            f[8].add(&l, int(u.memory_cache_bytes));
            f[9].add(&l, int(u.memory_usage_bytes));
            f[10].add(&l, int(u.memory_lifetime_peak_bytes));
            f[11].add(&l, int(u.memory_limit_bytes));
            if whole_job {
                f[12].add(&l, int(job.meta.memory_allocated_bytes));
            }
            f[13].add(&l, int(u.memory_oom_kills));
            f[14].add(&l, int(u.memory_limit_hits));
            f[15].add(&l, int(u.memory_major_faults));
            f[16].add(&l, int(u.io_read_bytes));
            f[17].add(&l, int(u.io_write_bytes));
            f[18].add(&l, int(u.processes));
            f[19].add(&l, int(u.threads));
            let p = &u.pressure;
            for (resource, kind, v) in [
                ("cpu", "some", p.cpu_some_avg10),
                ("memory", "some", p.memory_some_avg10),
                ("memory", "full", p.memory_full_avg10),
                ("io", "some", p.io_some_avg10),
                ("io", "full", p.io_full_avg10),
            ] {
                let mut lp = l.clone();
                lp.push(("resource", resource.into()));
                lp.push(("kind", kind.into()));
                f[20].add(&lp, ratio_of_percent(v));
            }
            f[21].add(&l, micros(r.sampler_cpu_usec));
            f[22].add(&l, int(r.sampler_bytes_written));
            let totals = crate::analysis::stalls::totals(p);
            for ((resource, kind), v) in crate::analysis::stalls::STALLS.iter().zip(totals) {
                let mut lp = l.clone();
                lp.push(("resource", (*resource).into()));
                lp.push(("kind", (*kind).into()));
                f[23].add(&lp, micros(v));
            }
        }
    }
    fams.extend(f);
}

fn native_gpus(scrape: &Scrape, opts: &RenderOptions, fams: &mut Vec<Family>) {
    let mut f = native_gpu_families();
    for job in &scrape.jobs {
        for g in &job.gpus {
            add_native_gpu(&mut f, &gpu_labels(job, g, opts), g);
        }
    }
    fams.extend(f);
}

/// The native per-card families, in the order `add_native_gpu` fills them by index.
fn native_gpu_families() -> [Family; 14] {
    use Kind::{Counter, Gauge};
    [
        Family::new(
            "slurmwatch_gpu_sample_timestamp_seconds",
            Gauge,
            "When the card's latest stored reading was taken (Unix time).",
        ),
        Family::new(
            "slurmwatch_gpu_utilization_ratio",
            Gauge,
            "Share of NVML's last sample period in which a kernel ran on the card.",
        ),
        Family::new(
            "slurmwatch_gpu_memory_utilization_ratio",
            Gauge,
            "Share of time the card's memory controller was busy.",
        ),
        Family::new(
            "slurmwatch_gpu_memory_used_bytes",
            Gauge,
            "Card memory in use by anyone (all processes and the driver's reserve).",
        ),
        Family::new(
            "slurmwatch_gpu_job_memory_used_bytes",
            Gauge,
            "Card memory held by the job's own processes.",
        ),
        Family::new(
            "slurmwatch_gpu_memory_total_bytes",
            Gauge,
            "The card's memory size.",
        ),
        Family::new(
            "slurmwatch_gpu_power_watts",
            Gauge,
            "The card's power draw.",
        ),
        Family::new(
            "slurmwatch_gpu_power_limit_watts",
            Gauge,
            "The card's enforced power limit.",
        ),
        Family::new(
            "slurmwatch_gpu_temperature_celsius",
            Gauge,
            "The card's temperature.",
        ),
        Family::new(
            "slurmwatch_gpu_sm_clock_hertz",
            Gauge,
            "The card's SM clock.",
        ),
        Family::new(
            "slurmwatch_gpu_sm_clock_max_hertz",
            Gauge,
            "The card's rated maximum SM clock.",
        ),
        Family::new(
            "slurmwatch_gpu_throttle_reason",
            Gauge,
            "1 while NVML reports this clock throttle reason, else 0.",
        ),
        Family::new(
            "slurmwatch_gpu_energy_joules_total",
            Counter,
            "Energy the card used since its driver loaded.",
        ),
        Family::new(
            "slurmwatch_gpu_ecc_uncorrected_errors_total",
            Counter,
            "Uncorrected ECC errors since the driver loaded (volatile count).",
        ),
    ]
}

/// One card's latest stored reading as one series in each of `native_gpu_families`' families
/// (a reading NVML could not take adds no series: never a made-up 0).
fn add_native_gpu(f: &mut [Family; 14], l: &Labels, g: &LiveGpu) {
    let s = &g.row.sample;
    f[0].add(
        l,
        Some(Value::Micros((g.row.t_unix_ms.max(0) as u64) * 1000)),
    );
    f[1].add(
        l,
        ok(&s.utilization_percent).map(|p| Value::Float(f64::from(p) / 100.0)),
    );
    f[2].add(
        l,
        ok(&s.memory_utilization_percent).map(|p| Value::Float(f64::from(p) / 100.0)),
    );
    f[3].add(l, int(ok(&s.memory_used_bytes)));
    f[4].add(l, int(ok(&s.processes).map(|p| p.job_memory_bytes)));
    f[5].add(l, int(g.card.memory_total_bytes));
    f[6].add(
        l,
        ok(&s.power_draw_milliwatts).map(|mw| Value::Float(f64::from(mw) / 1000.0)),
    );
    f[7].add(
        l,
        ok(&s.power_limit_milliwatts).map(|mw| Value::Float(f64::from(mw) / 1000.0)),
    );
    f[8].add(l, int(ok(&s.temperature_celsius).map(u64::from)));
    f[9].add(
        l,
        int(ok(&s.sm_clock_mhz).map(|m| u64::from(m) * 1_000_000)),
    );
    f[10].add(
        l,
        int(g.card.sm_clock_max_mhz.map(|m| u64::from(m) * 1_000_000)),
    );
    if let Some(mask) = ok(&s.throttle_reasons) {
        add_throttle_reasons(&mut f[11], l, mask);
    }
    f[12].add(
        l,
        ok(&s.energy_millijoules).map(|mj| Value::Float(mj as f64 / 1000.0)),
    );
    f[13].add(l, int(ok(&s.ecc_uncorrected)));
}

/// One 0/1 series per named NVML throttle bit, plus `reason="other"` for any bit not named,
/// so every set bit shows up somewhere.
fn add_throttle_reasons(family: &mut Family, l: &Labels, mask: u64) {
    let known: u64 = THROTTLE_BITS.iter().map(|(b, _)| b).sum();
    let reasons = THROTTLE_BITS
        .iter()
        .map(|(b, n)| (*n, mask & b != 0))
        .chain([("other", mask & !known != 0)]);
    for (name, on) in reasons {
        let mut lr = l.clone();
        lr.push(("reason", name.to_string()));
        family.add(&lr, Some(Value::Int(u64::from(on))));
    }
}

/// One series' `cgroup_*` samples (families 0–7, 9, 10 of [`jobstats`]), labelled `jl` plus
/// its `step` and an empty `task`.
fn cgroup_series(f: &mut [Family], jl: &Labels, job: &LiveJob, series: &LiveSeries) {
    let mut l = jl.clone();
    l.push(("step", series.step.clone().unwrap_or_default()));
    l.push(("task", String::new()));
    let r = &series.row;
    let u = &r.usage;
    // The job's allocation stands in for the job's own figures only, never a step's.
    let whole_job = series.step.is_none();
    let allocated = |v: Option<u64>| v.filter(|_| whole_job);
    f[0].add(
        &l,
        int(crate::model::memory_limit_bytes(
            r,
            allocated(job.meta.memory_allocated_bytes),
        )),
    );
    f[1].add(&l, int(u.memory_working_set_bytes));
    f[2].add(&l, int(u.memory_usage_bytes));
    f[3].add(&l, int(u.memory_cache_bytes));
    f[4].add(&l, micros(u.cpu_usage_usec));
    f[5].add(&l, micros(u.cpu_user_usec));
    f[6].add(&l, micros(u.cpu_system_usec));
    f[7].add(
        &l,
        int(r
            .cores_allocated
            .map(u64::from)
            .or(allocated(job.meta.cores_allocated.map(u64::from)))),
    );
    // The working set already holds shared memory (see the family's help): jobstats'
    // rss + shmem is then the working set, not twice the shared pages.
    f[9].add(&l, u.memory_working_set_bytes.map(|_| Value::Int(0)));
    f[10].add(&l, int(u.memory_limit_hits));
}

/// The series jobstats queries, as cgroup_exporter (`--collect.fullslurm`) and the jobstats
/// GPU exporter name them: the job's (`step=""`, `task=""`) and each recorded step's
/// (`step="batch"`, `task=""`); no per-task series (tasks are not recorded apart).
fn jobstats(scrape: &Scrape, opts: &RenderOptions, fams: &mut Vec<Family>) {
    use Kind::Gauge;
    let mut f = [
        Family::new("cgroup_memory_total_bytes", Gauge, "Memory total given to jobid in bytes (slurmwatch: the cgroup limit, else the allocation)."),
        Family::new("cgroup_memory_rss_bytes", Gauge, "Memory RSS used in bytes (slurmwatch: the working set, usage minus page cache)."),
        Family::new("cgroup_memory_used_bytes", Gauge, "Memory used in bytes (page cache included)."),
        Family::new("cgroup_memory_cache_bytes", Gauge, "Memory cache used in bytes."),
        Family::new("cgroup_cpu_total_seconds", Gauge, "Cumulative CPU total seconds for jobid."),
        Family::new("cgroup_cpu_user_seconds", Gauge, "Cumulative CPU user seconds for jobid."),
        Family::new("cgroup_cpu_system_seconds", Gauge, "Cumulative CPU system seconds for jobid."),
        Family::new("cgroup_cpus", Gauge, "Number of CPUs in the jobid."),
        Family::new("cgroup_uid", Gauge, "UID number of user running this job."),
        Family::new("cgroup_memory_shmem_bytes", Gauge, "Memory shared (tmpfs, shm) in bytes (slurmwatch: always 0, because shared memory is already in cgroup_memory_rss_bytes, the working set: rss + shmem is the working set)."),
        Family::new("cgroup_memory_fail_count", Gauge, "Memory fail count: times the job hit its memory limit (v1 memory.failcnt, v2 memory.events max)."),
        Family::new("nvidia_gpu_memory_total_bytes", Gauge, "Total memory of the GPU device in bytes."),
        Family::new("nvidia_gpu_memory_used_bytes", Gauge, "Memory used by the GPU device in bytes."),
        Family::new("nvidia_gpu_duty_cycle", Gauge, "GPU utilization in percent."),
        Family::new("nvidia_gpu_power_usage_milliwatts", Gauge, "Power usage of the GPU device in milliwatts."),
        Family::new("nvidia_gpu_temperature_celsius", Gauge, "Temperature of the GPU device in Celsius."),
        Family::new("nvidia_gpu_jobId", Gauge, "JobId number of a job currently using this GPU as reported by Slurm."),
        Family::new("nvidia_gpu_jobUid", Gauge, "UID number of user running jobs on this GPU."),
    ];
    let mut cards_seen = std::collections::HashSet::new();
    for job in &scrape.jobs {
        let cluster = cluster_of(job, opts);
        let mut base: Labels = Vec::new();
        if let Some(c) = cluster {
            base.push(("cluster", c.to_string()));
        }
        let mut jl = base.clone();
        jl.push(("jobid", job.meta.job_id.to_string()));
        if job.series.iter().any(|s| s.step.is_none()) {
            f[8].add(&jl, Some(Value::Int(u64::from(job.meta.uid))));
        }
        // The job (`step=""`) and each recorded step (`step="batch"`, `"0"`, as
        // cgroup_exporter names its step_* cgroups); tasks are not recorded apart.
        for series in &job.series {
            cgroup_series(&mut f, &jl, job, series);
        }
        for g in &job.gpus {
            // One card, one set of series: jobstats joins them on these labels alone.
            if !cards_seen.insert(g.card.uuid.clone()) {
                continue;
            }
            let mut lg = base.clone();
            // The GPU exporter's labels since 0.2.2: jobstats' GPU_EXPORTER_JOBID mode selects
            // on `jobid`; its older mode joins on nvidia_gpu_jobId, which carries them too.
            lg.push(("jobid", job.meta.job_id.to_string()));
            lg.push(("userid", job.meta.uid.to_string()));
            lg.push(("minor_number", g.card.nvml_index.to_string()));
            lg.push(("uuid", g.card.uuid.clone()));
            if let Some(n) = &g.card.name {
                lg.push(("name", n.clone()));
            }
            let s = &g.row.sample;
            f[11].add(&lg, int(g.card.memory_total_bytes));
            f[12].add(&lg, int(ok(&s.memory_used_bytes)));
            f[13].add(&lg, int(ok(&s.utilization_percent).map(u64::from)));
            f[14].add(&lg, int(ok(&s.power_draw_milliwatts).map(u64::from)));
            f[15].add(&lg, int(ok(&s.temperature_celsius).map(u64::from)));
            f[16].add(&lg, Some(Value::Int(job.meta.job_id)));
            f[17].add(&lg, Some(Value::Int(u64::from(job.meta.uid))));
        }
    }
    fams.extend(f);
}

/// The exporter's own health: which files could not be read, how long the scrape took.
fn scrape_health(scrape: &Scrape, fams: &mut Vec<Family>) {
    use Kind::Gauge;
    let mut up = Family::new("slurmwatch_file_up", Gauge, "1 for each running job's file read in this scrape, 0 for each recent file that could not be read.");
    let mut errors = Family::new(
        "slurmwatch_scrape_file_errors",
        Gauge,
        "Recent spool files that could not be opened or read in this scrape.",
    );
    let mut files = Family::new(
        "slurmwatch_scrape_files",
        Gauge,
        "Recent spool files by what this scrape made of them.",
    );
    let mut spool = Family::new(
        "slurmwatch_scrape_spool_up",
        Gauge,
        "1 when the spool directory could be listed.",
    );
    let mut late = Family::new(
        "slurmwatch_scrape_deadline_exceeded",
        Gauge,
        "1 when the scrape's time bound left files unread.",
    );
    let mut took = Family::new(
        "slurmwatch_scrape_duration_seconds",
        Gauge,
        "How long reading the spool took.",
    );
    let mut counts = [
        ("live", 0u64),
        ("ended", 0),
        ("stale", 0),
        ("error", 0),
        ("unchecked", 0),
    ];
    for file in &scrape.files {
        let l: Labels = vec![("jobid", file.job_id.to_string())];
        let slot = match &file.state {
            FileState::Live => {
                up.add(&l, Some(Value::Int(1)));
                0
            }
            FileState::Ended => 1,
            FileState::Stale => 2,
            FileState::Error(_) => {
                up.add(&l, Some(Value::Int(0)));
                3
            }
            FileState::Unchecked => 4,
        };
        counts[slot].1 += 1;
    }
    errors.add(&vec![], Some(Value::Int(counts[3].1)));
    for (state, n) in counts {
        files.add(&vec![("state", state.to_string())], Some(Value::Int(n)));
    }
    spool.add(
        &vec![],
        Some(Value::Int(u64::from(scrape.spool_error.is_none()))),
    );
    late.add(
        &vec![],
        Some(Value::Int(u64::from(scrape.deadline_exceeded))),
    );
    took.add(
        &vec![],
        Some(Value::Micros(scrape.duration.as_micros() as u64)),
    );
    fams.extend([up, errors, files, spool, late, took]);
}
