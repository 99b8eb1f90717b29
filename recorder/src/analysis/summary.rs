//! The epilog's summary of a job's file: peaks with their times, totals, OOM events and the
//! sampler's own overhead. Pure: computed from decoded rows, stored as `summary(key, value)`.

use serde::{Deserialize, Serialize};

use super::stalls::StallSeconds;
use crate::collect::gpu::derive::{self, CardState, ThrottleState};
use crate::model::effective_cores;
use crate::model::SampleRow;
use crate::sample::GpuCard;
use crate::store::{Event, GpuRow, StepInfo, EXTERN_STEP};

/// Version of the summary's keys (the `summary_version` row).
/// 2: per-card `xid_events`; CPU totals kept across a new job-series writer's counter.
/// 3: `limit_hit_events[]` keep the hits in `limit_hits` and only kills in `kills`.
/// 4: per-card `peak_job_memory_bytes` and `memory_total_bytes` (GPU-memory efficiency).
/// 5: per-card `nvml_index`, `pci_bus_id`, `sm_clock_max_mhz` and, while held back,
///    `throttled_readings` with the median `throttled_sm_clock_mhz`, `throttled_power_watts`
///    and `throttled_power_limit_watts` (the cross-job card view, `fleet`).
/// 6: `stall_seconds`: PSI's stall totals between the first and last rows (the ledger), and
///    per card `ledger` (limiter, no-work and GPM time from schema 3's counters).
pub const SUMMARY_VERSION: u32 = 6;

/// A working set is "steady" while it stays within this share of the level before a kill.
pub const STEADY_TOLERANCE_PERCENT: f64 = 10.0;

/// One OOM kill seen in the recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OomEvent {
    /// Time of the first row that saw the kill counter rise (or of the `oom_kill` event).
    pub t_unix_ms: i64,
    /// Kills counted at that row (usually 1; 0 for a limit hit without a kill).
    pub kills: u64,
    /// For `limit_hit_events`: the rise of the limit-hit counter at that row (`kills` holds
    /// only the kills). Absent in OOM events and in summaries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_hits: Option<u64>,
    /// The working set in the row before the kill: the level the job ran at.
    pub working_set_before_bytes: Option<u64>,
    /// The largest working set between that row and the kill (close to the limit).
    pub working_set_at_kill_bytes: Option<u64>,
    /// How long the working set had stayed within [`STEADY_TOLERANCE_PERCENT`] of
    /// `working_set_before_bytes` before the kill, seconds.
    pub steady_seconds: Option<f64>,
    pub limit_bytes: Option<u64>,
    /// The kernel's high-water mark of usage at that row: when the climb to the limit was
    /// faster than the sampler's 1-s reads, this is the only witness of it.
    pub usage_peak_bytes: Option<u64>,
}

/// Most limit-hit events kept (a job can brush its limit thousands of times).
pub const MAX_LIMIT_EVENTS: usize = 20;

/// Per card, from the GPU recording ([`GpuSummary::from_rows`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSummary {
    /// `cuda:0` as the job's code addresses it.
    pub label: String,
    /// The node the card is in: set in a multi-node job's merged report, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    pub uuid: Option<String>,
    /// NVML's (nvidia-smi's) index on the node and the PCI bus id: where an admin finds it.
    #[serde(default)]
    pub nvml_index: Option<u32>,
    #[serde(default)]
    pub pci_bus_id: Option<String>,
    pub name: Option<String>,
    pub peak_memory_used_bytes: Option<u64>,
    /// The job's own processes' memory on the card at its largest (others' never counted).
    #[serde(default)]
    pub peak_job_memory_bytes: Option<u64>,
    /// The card's memory size.
    #[serde(default)]
    pub memory_total_bytes: Option<u64>,
    pub peak_power_watts: Option<f64>,
    pub peak_temperature_celsius: Option<f64>,
    pub mean_utilization_percent: Option<f64>,
    pub energy_joules: Option<f64>,
    pub minutes_throttled: Option<f64>,
    pub throttle_reasons: Vec<String>,
    /// The card's rated maximum SM clock.
    #[serde(default)]
    pub sm_clock_max_mhz: Option<u32>,
    /// Readings held back by a slowdown ([`is_slowdown`]); `None` when no reading's throttle
    /// state was readable (or the summary predates version 5).
    #[serde(default)]
    pub throttled_readings: Option<u64>,
    /// Medians over the held-back readings that had the figure (`None` when none had it):
    /// the SM clock, the power drawn and the power limit then.
    #[serde(default)]
    pub throttled_sm_clock_mhz: Option<f64>,
    #[serde(default)]
    pub throttled_power_watts: Option<f64>,
    #[serde(default)]
    pub throttled_power_limit_watts: Option<f64>,
    pub minutes_idle: Option<f64>,
    /// Critical Xid events NVML reported for the card (the latest [`MAX_XID_EVENTS`]).
    #[serde(default)]
    pub xid_events: Vec<XidEvent>,
    /// The card's exact ledger over its recording (`analysis::card_ledger`); absent before
    /// schema 3 recorded the counters, or with fewer than two readings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<CardTime>,
}

/// Where one card's time went, exactly (the summary's form of
/// [`CardLedger`](super::gpu_ledger::CardLedger)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CardTime {
    /// Between the card's first and last readings.
    pub span_seconds: f64,
    /// Seconds each limiter held the clocks down, by NVML's limiter
    /// (`sample::GPU_LIMITER_NAMES`); a limiter the card could not say is absent.
    pub held_seconds: std::collections::BTreeMap<String, f64>,
    /// Seconds with no kernel running, from NVML's utilization samples, and the seconds
    /// those samples covered.
    pub no_work_seconds: Option<f64>,
    pub no_work_covered_seconds: Option<f64>,
    pub gpm: Option<crate::sample::Gpm>,
    /// Why there are no GPM means (e.g. "not available on this card"), when there are none.
    pub gpm_unavailable: Option<String>,
}

impl CardTime {
    fn of(rows: &[GpuRow]) -> Option<CardTime> {
        let (first, last) = (rows.first()?, rows.last()?);
        let l = super::gpu_ledger::card_ledger(rows, first.t_unix_ms, last.t_unix_ms)?;
        let held_seconds: std::collections::BTreeMap<String, f64> =
            crate::sample::GPU_LIMITER_NAMES
                .iter()
                .zip(l.limiter_seconds)
                .filter_map(|(n, s)| Some((n.to_string(), s?)))
                .collect();
        let not_this_card = matches!(
            l.gpm_unavailable,
            Some(crate::sample::GpmUnavailable::NotThisCard)
        );
        let t = CardTime {
            span_seconds: (l.to_unix_ms - l.from_unix_ms) as f64 / 1000.0,
            held_seconds,
            no_work_seconds: l.no_work_seconds,
            no_work_covered_seconds: l.no_work_covered_seconds,
            gpm: l.gpm,
            gpm_unavailable: l.gpm_unavailable.map(|w| w.to_string()),
        };
        // A file from before schema 3 has none of the counters (its rows read back as
        // NOT_SUPPORTED): no ledger, not zeros. A pre-Hopper card's "no GPM" is an answer.
        let any = !t.held_seconds.is_empty() || t.no_work_seconds.is_some() || t.gpm.is_some();
        (any || not_this_card).then_some(t)
    }
}

/// Most Xid events kept per card in a summary (a failing card can report thousands).
pub const MAX_XID_EVENTS: usize = 20;

/// One critical Xid event: when the reading that saw it was taken, the code, what it means.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct XidEvent {
    pub t_unix_ms: i64,
    pub xid: u64,
    pub meaning: Option<String>,
}

impl XidEvent {
    pub fn new(t_unix_ms: i64, xid: u64) -> XidEvent {
        XidEvent {
            t_unix_ms,
            xid,
            meaning: crate::collect::gpu::xid::meaning(xid).map(str::to_string),
        }
    }
}

/// What the epilog writes into the file (all times Unix ms; `None` = unreadable).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub summary_version: u32,
    pub job_rows: u64,
    pub first_t_unix_ms: Option<i64>,
    pub last_t_unix_ms: Option<i64>,
    pub cpu_usage_seconds_total: Option<f64>,
    pub cpu_user_seconds: Option<f64>,
    pub cpu_system_seconds: Option<f64>,
    pub peak_effective_cores: Option<f64>,
    pub peak_effective_cores_t_unix_ms: Option<i64>,
    pub cores_allocated: Option<u32>,
    pub peak_working_set_bytes: Option<u64>,
    pub peak_working_set_t_unix_ms: Option<i64>,
    pub lifetime_peak_bytes: Option<u64>,
    /// First row that showed the final lifetime peak.
    pub lifetime_peak_t_unix_ms: Option<i64>,
    pub memory_limit_bytes: Option<u64>,
    pub oom_kills: Option<u64>,
    pub oom_events: Vec<OomEvent>,
    /// Rows where the limit-hit counter rose (v1 `failcnt`, v2 `memory.events max`). On cgroup
    /// v1 the kill may be counted in a child cgroup the sampler does not read, so a job that
    /// Slurm calls OUT_OF_MEMORY can show no kill here: the first limit hit then dates it.
    pub limit_hit_events: Vec<OomEvent>,
    pub memory_major_faults: Option<u64>,
    pub io_read_bytes: Option<u64>,
    pub io_write_bytes: Option<u64>,
    /// slurmwatch's own CPU and writes, over every step's sampler: charged to the job.
    pub sampler_cpu_usec: Option<u64>,
    pub sampler_bytes_written: Option<u64>,
    pub gpus: Vec<GpuSummary>,
    /// Seconds the job's tasks waited for CPU, memory and I/O (cgroup v2 PSI totals, exact
    /// between the first and last rows); `None` where no total was readable.
    #[serde(default)]
    pub stall_seconds: Option<StallSeconds>,
}

fn max_at<T: PartialOrd + Copy>(best: &mut Option<(T, i64)>, v: Option<T>, t: i64) {
    if let Some(v) = v {
        if !matches!(best, Some((b, _)) if *b >= v) {
            *best = Some((v, t));
        }
    }
}

impl Summary {
    /// `job`: the job series, oldest first. `step_ends`: each step's last row (its own sampler's
    /// final counters). `gpus`: per-card summaries from the GPU recording.
    pub fn compute(
        job: &[SampleRow],
        steps: &[StepInfo],
        step_ends: &[(String, SampleRow)],
        events: &[Event],
        gpus: Vec<GpuSummary>,
    ) -> Summary {
        let mut s = Summary {
            summary_version: SUMMARY_VERSION,
            job_rows: job.len() as u64,
            first_t_unix_ms: job.first().map(|r| r.t_unix_ms),
            last_t_unix_ms: job.last().map(|r| r.t_unix_ms),
            gpus,
            ..Summary::default()
        };
        let mut ws: Option<(u64, i64)> = None;
        let mut cores: Option<(f64, i64)> = None;
        let mut life: Option<(u64, i64)> = None;
        let mut prev: Option<&SampleRow> = None;
        let mut last_kills: Option<u64> = None;
        let mut last_hits: Option<u64> = None;
        let (mut usage, mut user, mut system) = (
            Climbing::default(),
            Climbing::default(),
            Climbing::default(),
        );
        for (i, r) in job.iter().enumerate() {
            let u = &r.usage;
            let row_ws = match (u.memory_working_set_bytes, r.memory_working_set_max_bytes) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            max_at(&mut ws, row_ws, r.t_unix_ms);
            max_at(&mut life, u.memory_lifetime_peak_bytes, r.t_unix_ms);
            let rate = prev.and_then(|p| effective_cores(p, r));
            let c = match (rate, r.effective_cores_max.filter(|c| c.is_finite())) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            max_at(&mut cores, c, r.t_unix_ms);
            if let Some(v) = usage.add(u.cpu_usage_usec) {
                s.cpu_usage_seconds_total = Some(v as f64 / 1e6);
            }
            if let Some(v) = user.add(u.cpu_user_usec) {
                s.cpu_user_seconds = Some(v as f64 / 1e6);
            }
            if let Some(v) = system.add(u.cpu_system_usec) {
                s.cpu_system_seconds = Some(v as f64 / 1e6);
            }
            s.memory_limit_bytes = u.memory_limit_bytes.or(s.memory_limit_bytes);
            s.memory_major_faults = u.memory_major_faults.or(s.memory_major_faults);
            s.io_read_bytes = u.io_read_bytes.or(s.io_read_bytes);
            s.io_write_bytes = u.io_write_bytes.or(s.io_write_bytes);
            s.cores_allocated = r.cores_allocated.or(s.cores_allocated);
            s.note_memory_events(job, i, &mut last_kills, &mut last_hits);
            prev = Some(r);
        }
        if s.oom_events.is_empty() {
            s.oom_events_from_log(job, events);
        }
        (s.peak_working_set_bytes, s.peak_working_set_t_unix_ms) = ws.unzip();
        (s.peak_effective_cores, s.peak_effective_cores_t_unix_ms) = cores.unzip();
        (s.lifetime_peak_bytes, s.lifetime_peak_t_unix_ms) = life.unzip();
        (s.sampler_cpu_usec, s.sampler_bytes_written) = sampler_totals(job, steps, step_ends);
        let stalls = StallSeconds::from_rows(job);
        s.stall_seconds = stalls.any().then_some(stalls);
        s
    }

    /// Row `i`'s OOM-kill and limit-hit counters: a rise over the last reading (`last_kills`,
    /// `last_hits`, carried between rows) is an event; the first reading sets the base.
    fn note_memory_events(
        &mut self,
        job: &[SampleRow],
        i: usize,
        last_kills: &mut Option<u64>,
        last_hits: &mut Option<u64>,
    ) {
        let u = &job[i].usage;
        let mut kills_here = 0;
        if let Some(k) = u.memory_oom_kills {
            // Counters only climb: a rise is a kill; the first reading sets the base.
            if let Some(before) = *last_kills {
                if k > before {
                    kills_here = k - before;
                    self.oom_events.push(oom_event(job, i, kills_here));
                }
            } else if k > 0 {
                kills_here = k;
                self.oom_events.push(oom_event(job, i, k));
            }
            *last_kills = Some(last_kills.map_or(k, |b| b.max(k)));
            self.oom_kills = *last_kills;
        }
        if let Some(h) = u.memory_limit_hits {
            if last_hits.is_some_and(|b| h > b) && self.limit_hit_events.len() < MAX_LIMIT_EVENTS {
                let mut ev = oom_event(job, i, kills_here);
                ev.limit_hits = Some(h - last_hits.unwrap_or(0));
                self.limit_hit_events.push(ev);
            }
            *last_hits = Some(last_hits.map_or(h, |b| b.max(h)));
        }
    }

    /// No readable kill counter, but the plugin logged a kill: keep it, at the row nearest
    /// its time, with what we know.
    fn oom_events_from_log(&mut self, job: &[SampleRow], events: &[Event]) {
        for e in events.iter().filter(|e| e.kind == "oom_kill") {
            let i = job.partition_point(|r| r.t_unix_ms < e.t_unix_ms);
            let i = i.min(job.len().saturating_sub(1));
            if !job.is_empty() {
                let mut ev = oom_event(job, i, 1);
                ev.t_unix_ms = e.t_unix_ms;
                self.oom_events.push(ev);
            }
        }
        if !self.oom_events.is_empty() && self.oom_kills.is_none() {
            self.oom_kills = Some(self.oom_events.len() as u64);
        }
    }

    /// Rows for the `summary` table: one per field, each value JSON text.
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        match v {
            serde_json::Value::Object(m) => {
                m.into_iter().map(|(k, v)| (k, v.to_string())).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Back from the table. Unknown keys (a newer epilog) are ignored; a value that does not
    /// parse makes the whole summary unreadable (`None`): callers then recompute it.
    pub fn from_pairs(pairs: &[(String, String)]) -> Option<Summary> {
        let mut m = serde_json::Map::new();
        for (k, v) in pairs {
            m.insert(k.clone(), serde_json::from_str(v).ok()?);
        }
        let s: Summary = serde_json::from_value(serde_json::Value::Object(m)).ok()?;
        (s.summary_version <= SUMMARY_VERSION).then_some(s)
    }
}

/// A cumulative counter's total across writers. The job series has one writer at a time,
/// but a later step can take over on a node where none was left running
/// (`store::claims_job_series`); in /proc mode its counter starts from what its own tracker
/// sees, so a drop means "a new counter" and the old one's last value is kept, never lost.
#[derive(Default)]
struct Climbing {
    base: u64,
    last: Option<u64>,
}

impl Climbing {
    /// The running total after `v` (`None` while nothing was readable).
    fn add(&mut self, v: Option<u64>) -> Option<u64> {
        if let Some(v) = v {
            if let Some(last) = self.last.filter(|&l| v < l) {
                self.base += last;
            }
            self.last = Some(v);
        }
        self.last.map(|l| self.base + l)
    }
}

fn oom_event(job: &[SampleRow], i: usize, kills: u64) -> OomEvent {
    let at = &job[i];
    let ws = |j: usize| job[j].usage.memory_working_set_bytes;
    // The level the job ran at: the row before the kill, or, when the climb to the limit took
    // several readings, the row where that climb began. On cgroup v2 Slurm sets memory.high
    // to the limit, so the kernel throttles a job just below it (seen on Slurm 24.11: 288 of
    // 300 MiB for seconds before the kill): rows that close to the limit are the climb too.
    let keep = 1.0 - STEADY_TOLERANCE_PERCENT / 100.0;
    let climbing =
        |j: usize| matches!((ws(j - 1), ws(j)), (Some(p), Some(c)) if (p as f64) < c as f64 * keep);
    let near_limit = |j: usize| {
        let limit = job[j]
            .usage
            .memory_limit_bytes
            .or(at.usage.memory_limit_bytes);
        matches!((ws(j), limit), (Some(w), Some(l)) if w as f64 >= l as f64 * keep)
    };
    let b = i.checked_sub(1).map(|mut j| {
        while j > 0 && (climbing(j) || near_limit(j)) {
            j -= 1;
        }
        j
    });
    let before = b.map(|j| &job[j]);
    let ws_before = before.and_then(|b| b.usage.memory_working_set_bytes);
    let ws_at = match (
        at.memory_working_set_max_bytes,
        at.usage.memory_working_set_bytes,
    ) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    let steady_seconds = ws_before.zip(b).and_then(|(level, b)| {
        let tol = level as f64 * STEADY_TOLERANCE_PERCENT / 100.0;
        let mut from = b;
        while from > 0 {
            let w = job[from - 1].usage.memory_working_set_bytes?;
            if (w as f64 - level as f64).abs() > tol {
                break;
            }
            from -= 1;
        }
        Some((job[b].t_unix_ms - job[from].t_unix_ms) as f64 / 1000.0)
    });
    OomEvent {
        t_unix_ms: at.t_unix_ms,
        kills,
        limit_hits: None,
        working_set_before_bytes: ws_before,
        working_set_at_kill_bytes: ws_at,
        steady_seconds,
        limit_bytes: at
            .usage
            .memory_limit_bytes
            .or(before.and_then(|b| b.usage.memory_limit_bytes)),
        usage_peak_bytes: at.usage.memory_lifetime_peak_bytes,
    }
}

/// The sampler's counters are per sampler thread (one per step's slurmstepd). The job series
/// is written by the batch step's sampler (or, with no batch step, the first step's), so the
/// total is the job series' last value plus every *other* non-extern step's last value.
fn sampler_totals(
    job: &[SampleRow],
    steps: &[StepInfo],
    step_ends: &[(String, SampleRow)],
) -> (Option<u64>, Option<u64>) {
    let last = |f: fn(&SampleRow) -> Option<u64>| job.iter().rev().find_map(f);
    let job_cpu = last(|r| r.sampler_cpu_usec);
    let job_bytes = last(|r| r.sampler_bytes_written);
    let writer = job_series_writer(steps);
    let mut cpu = job_cpu;
    let mut bytes = job_bytes;
    for (name, end) in step_ends {
        if name == EXTERN_STEP || Some(name) == writer.as_ref() {
            continue;
        }
        if let Some(c) = end.sampler_cpu_usec {
            cpu = Some(cpu.unwrap_or(0) + c);
        }
        if let Some(b) = end.sampler_bytes_written {
            bytes = Some(bytes.unwrap_or(0) + b);
        }
    }
    (cpu, bytes)
}

/// Reads a job's file and computes its summary (what the epilog does, minus the write).
pub fn from_reader(reader: &crate::store::Reader) -> crate::error::Result<Summary> {
    let job = reader.samples(&crate::model::Series::Job)?;
    let steps = reader.steps()?;
    let events = reader.events()?;
    from_parts(reader, &job, &steps, &events)
}

/// As [`from_reader`], with the job series, steps and events already read.
pub fn from_parts(
    reader: &crate::store::Reader,
    job: &[SampleRow],
    steps: &[StepInfo],
    events: &[Event],
) -> crate::error::Result<Summary> {
    let writer = job_series_writer(steps);
    let mut ends = Vec::new();
    // The job series' writer is counted from the job series: its rows are not decoded.
    let counted = |step: &str| step != EXTERN_STEP && Some(step) != writer.as_deref();
    for (step, mut last) in reader.step_samples(job, counted)? {
        if let Some(r) = last.pop() {
            ends.push((step, r));
        }
    }
    Ok(Summary::compute(
        job,
        steps,
        &ends,
        events,
        gpu_summaries(reader)?,
    ))
}

/// The epilog's summary stored in the file, when it is this version's (an older epilog's
/// lacks what this version adds: the caller computes it again).
pub fn stored(reader: &crate::store::Reader) -> crate::error::Result<Option<Summary>> {
    Ok(crate::store::summary::read(reader)?
        .as_deref()
        .and_then(Summary::from_pairs)
        .filter(|s| s.summary_version == SUMMARY_VERSION))
}

/// What the ledger reads of a file (core's `analysis::ledger::NodeFigures`): the stored
/// summary, as the report reads it, else the figures the job series `job` (oldest first) and
/// the cards give so far. The ledger needs no step ends or events, so none are read: their figures
/// (the sampler's overhead, logged OOM kills) are absent from the second.
pub fn for_ledger(
    reader: &crate::store::Reader,
    job: &[SampleRow],
) -> crate::error::Result<Summary> {
    match stored(reader)? {
        Some(s) => Ok(s),
        None => Ok(Summary::compute(job, &[], &[], &[], gpu_summaries(reader)?)),
    }
}

/// Every card of the job's file, summarised from all its readings.
pub fn gpu_summaries(reader: &crate::store::Reader) -> crate::error::Result<Vec<GpuSummary>> {
    let mut out = Vec::new();
    for g in reader.gpus()? {
        let rows = reader.gpu_samples(g.id)?;
        out.push(GpuSummary::from_rows(&g.card, &rows));
    }
    Ok(out)
}

/// A throttle verdict that holds the card back for a reason other than working at its power
/// limit (a healthy card under full load) or a clock setting the admins chose.
pub fn is_slowdown(t: ThrottleState) -> bool {
    matches!(
        t,
        ThrottleState::HardwareSlowdownBroken
            | ThrottleState::HardwareSlowdownUnderLoad
            | ThrottleState::Thermal
    )
}

impl GpuSummary {
    /// One card's summary from its readings, oldest first. A figure no reading gave stays
    /// `None`. Minutes are the time between consecutive readings that *both* show the
    /// condition (a single reading spans no time); a pair where either is unreadable is not
    /// counted, and the minutes are `None` when no reading said either way.
    pub fn from_rows(card: &GpuCard, rows: &[GpuRow]) -> GpuSummary {
        fn max_opt<T: PartialOrd + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) => Some(if y > x { y } else { x }),
                (x, y) => x.or(y),
            }
        }
        let mut g = GpuSummary {
            label: card.label(),
            uuid: Some(card.uuid.clone()),
            nvml_index: Some(card.nvml_index),
            pci_bus_id: card.pci_bus_id.clone(),
            name: card.name.clone(),
            memory_total_bytes: card.memory_total_bytes,
            sm_clock_max_mhz: card.sm_clock_max_mhz,
            ..GpuSummary::default()
        };
        // While held back: the clock, draw and limit of each such reading that had them.
        let (mut slow_clock, mut slow_power, mut slow_limit) = (Vec::new(), Vec::new(), Vec::new());
        let (mut util_sum, mut util_n) = (0.0, 0u64);
        let mut energy: Option<(u64, u64)> = None;
        let mut reasons: u64 = 0;
        // Per reading: Some(throttled?) / Some(idle?) when the verdict is known.
        let mut throttled: Vec<Option<bool>> = Vec::with_capacity(rows.len());
        let mut idle: Vec<Option<bool>> = Vec::with_capacity(rows.len());
        for r in rows {
            let s = &r.sample;
            g.peak_memory_used_bytes = max_opt(g.peak_memory_used_bytes, s.memory_used_bytes.ok());
            g.peak_job_memory_bytes = max_opt(
                g.peak_job_memory_bytes,
                s.processes.as_ref().ok().map(|p| p.job_memory_bytes),
            );
            g.peak_power_watts = max_opt(
                g.peak_power_watts,
                s.power_draw_milliwatts.ok().map(|w| f64::from(w) / 1000.0),
            );
            g.peak_temperature_celsius = max_opt(
                g.peak_temperature_celsius,
                s.temperature_celsius.ok().map(f64::from),
            );
            if let Ok(u) = s.utilization_percent {
                util_sum += f64::from(u);
                util_n += 1;
            }
            if let Ok(e) = s.energy_millijoules {
                energy = Some(energy.map_or((e, e), |(first, _)| (first, e)));
            }
            let t = derive::throttle_state(s);
            let slow = is_slowdown(t);
            if slow {
                reasons |= s.throttle_reasons.unwrap_or(0);
                slow_clock.extend(s.sm_clock_mhz.ok().map(f64::from));
                slow_power.extend(s.power_draw_milliwatts.ok().map(|w| f64::from(w) / 1000.0));
                slow_limit.extend(s.power_limit_milliwatts.ok().map(|w| f64::from(w) / 1000.0));
            }
            throttled.push((t != ThrottleState::Unknown).then_some(slow));
            if let Ok(codes) = &s.xid_errors {
                g.xid_events
                    .extend(codes.iter().map(|&x| XidEvent::new(r.t_unix_ms, x)));
            }
            idle.push(match derive::card_state(s) {
                CardState::Unknown => None,
                c => Some(matches!(c, CardState::Idle | CardState::IdleHoldingMemory)),
            });
        }
        g.mean_utilization_percent = (util_n > 0).then(|| util_sum / util_n as f64);
        // The counter runs since the driver loaded: a fall means a reload, so no figure.
        g.energy_joules = energy
            .filter(|(a, b)| b >= a)
            .map(|(a, b)| (b - a) as f64 / 1000.0);
        g.minutes_throttled = minutes_where(rows, &throttled);
        g.throttled_readings = throttled
            .iter()
            .any(Option::is_some)
            .then(|| throttled.iter().filter(|t| **t == Some(true)).count() as u64);
        g.throttled_sm_clock_mhz = median(slow_clock);
        g.throttled_power_watts = median(slow_power);
        g.throttled_power_limit_watts = median(slow_limit);
        g.minutes_idle = minutes_where(rows, &idle);
        g.throttle_reasons = derive::throttle_names(reasons & !derive::THROTTLE_GPU_IDLE);
        let keep = g.xid_events.len().saturating_sub(MAX_XID_EVENTS);
        g.xid_events.drain(..keep);
        g.ledger = CardTime::of(rows);
        g
    }
}

/// The median of readings (the mean of the middle two for an even count); `None` when empty.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Minutes between consecutive readings that both have the condition; `None` when no reading
/// had a verdict.
fn minutes_where(rows: &[GpuRow], cond: &[Option<bool>]) -> Option<f64> {
    if cond.iter().all(Option::is_none) {
        return None;
    }
    let ms: i64 = rows
        .windows(2)
        .zip(cond.windows(2))
        .filter(|(_, c)| c[0] == Some(true) && c[1] == Some(true))
        .map(|(r, _)| (r[1].t_unix_ms - r[0].t_unix_ms).max(0))
        .sum();
    Some(ms as f64 / 60_000.0)
}

/// The step whose sampler writes the job series: `batch`, else the first non-extern step.
fn job_series_writer(steps: &[StepInfo]) -> Option<String> {
    if steps.iter().any(|s| s.step == "batch") {
        Some("batch".to_string())
    } else {
        steps
            .iter()
            .find(|s| s.step != EXTERN_STEP)
            .map(|s| s.step.clone())
    }
}

/// Cards and readings as the GPU tests script them, for these tests and for core's (feature
/// `test-support`).
#[cfg(any(test, feature = "test-support"))]
pub mod fixture {
    use super::{GpuCard, GpuRow};

    /// A card reading as the GPU tests script it: busy, `mhz` SM clock, `mw` of a 400 W limit.
    pub fn card_reading(t_s: i64, mhz: u32, mw: u32, reasons: u64) -> GpuRow {
        let mut s = crate::sample::GpuSample::all_failed(crate::sample::GpuError::NotSupported);
        s.utilization_percent = Ok(97);
        s.sm_clock_mhz = Ok(mhz);
        s.power_draw_milliwatts = Ok(mw);
        s.power_limit_milliwatts = Ok(400_000);
        s.throttle_reasons = Ok(reasons);
        GpuRow {
            t_unix_ms: t_s * 1000,
            gpu: 1,
            sample: s,
            totals: Default::default(),
        }
    }

    /// An A100 as NVML describes it, CUDA and NVML index `i`.
    pub fn a100(i: u32) -> GpuCard {
        GpuCard {
            uuid: format!("GPU-{i:08x}"),
            cuda_index: Some(i),
            nvml_index: i,
            pci_bus_id: Some(format!("00000000:{:02X}:00.0", 0x10 + i)),
            name: Some("NVIDIA A100-SXM4-80GB".into()),
            memory_total_bytes: Some(80 << 30),
            sm_clock_max_mhz: Some(1785),
            power_limit_watts: Some(400.0),
            nvlink_links: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::{a100, card_reading};
    use super::*;
    use crate::model::{SampleKind, Series};

    const MIB: u64 = 1 << 20;

    fn row(t_s: i64, cpu_s: f64, ws_mib: u64, kills: u64) -> SampleRow {
        let mut r = SampleRow::empty(t_s * 1000, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some((cpu_s * 1e6) as u64);
        r.usage.memory_working_set_bytes = Some(ws_mib * MIB);
        r.usage.memory_limit_bytes = Some(300 * MIB);
        r.usage.memory_oom_kills = Some(kills);
        r.usage.memory_lifetime_peak_bytes = Some(ws_mib * MIB + 50 * MIB);
        r
    }

    #[test]
    fn oom_after_steady_phase() {
        let mut rows: Vec<SampleRow> = (0..7).map(|t| row(t, t as f64, 100, 0)).collect();
        let mut kill = row(7, 7.0, 20, 1);
        kill.memory_working_set_max_bytes = Some(299 * MIB);
        rows.push(kill);
        let s = Summary::compute(&rows, &[], &[], &[], Vec::new());
        assert_eq!(s.oom_kills, Some(1));
        assert_eq!(s.oom_events.len(), 1);
        let e = &s.oom_events[0];
        assert_eq!(e.t_unix_ms, 7000);
        assert_eq!(e.working_set_before_bytes, Some(100 * MIB));
        assert_eq!(e.working_set_at_kill_bytes, Some(299 * MIB));
        assert_eq!(e.steady_seconds, Some(6.0));
        assert_eq!(s.peak_working_set_bytes, Some(299 * MIB));
        assert_eq!(s.peak_working_set_t_unix_ms, Some(7000));
        assert_eq!(s.peak_effective_cores, Some(1.0));
        assert_eq!(s.cpu_usage_seconds_total, Some(7.0));
    }

    /// In /proc mode a later step that takes over a node's job series starts its counter from
    /// what its own tracker sees: the earlier writer's CPU is kept, not replaced.
    /// A climb to the limit over several readings (as under emulation): the level before the
    /// kill is where the climb began, not the last reading of it.
    #[test]
    fn oom_after_a_slow_climb_dates_the_steady_level_before_it() {
        let mut rows: Vec<SampleRow> = (0..7).map(|t| row(t, t as f64, 100, 0)).collect();
        // The climb, then throttled just below the 300 MiB limit (memory.high) until the kill.
        for (t, ws) in [
            (7, 150),
            (8, 200),
            (9, 250),
            (10, 280),
            (11, 288),
            (12, 290),
        ] {
            rows.push(row(t, t as f64, ws, 0));
        }
        rows.push(row(13, 13.0, 20, 1));
        let s = Summary::compute(&rows, &[], &[], &[], Vec::new());
        let e = &s.oom_events[0];
        assert_eq!(e.t_unix_ms, 13_000);
        assert_eq!(e.working_set_before_bytes, Some(100 * MIB));
        assert_eq!(e.steady_seconds, Some(6.0));
        assert_eq!(e.working_set_at_kill_bytes, Some(20 * MIB));
    }

    /// Seen on Slurm 24.11 (cgroup v2): `limit_hit_events[].kills` held the limit-hit count.
    /// Each limit-hit event now carries the hits in `limit_hits` and the kills of that row in
    /// `kills` (0 when the kernel reclaimed its way out without killing).
    #[test]
    fn limit_hit_events_keep_hits_and_kills_apart() {
        let mut rows: Vec<SampleRow> = (0..4).map(|t| row(t, t as f64, 100, 0)).collect();
        for (i, hits) in [0u64, 0, 40, 90].into_iter().enumerate() {
            rows[i].usage.memory_limit_hits = Some(hits);
        }
        let mut kill = row(4, 4.0, 20, 1);
        kill.usage.memory_limit_hits = Some(95);
        rows.push(kill);
        let s = Summary::compute(&rows, &[], &[], &[], Vec::new());
        let got: Vec<(i64, u64, Option<u64>)> = s
            .limit_hit_events
            .iter()
            .map(|e| (e.t_unix_ms, e.kills, e.limit_hits))
            .collect();
        assert_eq!(
            got,
            vec![(2000, 0, Some(40)), (3000, 0, Some(50)), (4000, 1, Some(5))]
        );
        assert_eq!(s.oom_events.len(), 1);
        assert_eq!(
            (s.oom_events[0].kills, s.oom_events[0].limit_hits),
            (1, None)
        );
        let back = Summary::from_pairs(&s.to_pairs()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn cpu_total_survives_a_new_writer_counter() {
        let rows = vec![
            row(0, 0.0, 10, 0),
            row(5, 40.0, 10, 0),
            row(10, 3.0, 10, 0),
            row(15, 13.0, 10, 0),
        ];
        let s = Summary::compute(&rows, &[], &[], &[], Vec::new());
        assert_eq!(s.cpu_usage_seconds_total, Some(53.0));
        assert_eq!(s.peak_effective_cores, Some(8.0), "no rate across the drop");
    }

    #[test]
    fn pairs_round_trip_and_unreadable_stays_none() {
        let rows: Vec<SampleRow> = (0..3).map(|t| row(t, 0.0, 10, 0)).collect();
        let mut s = Summary::compute(&rows, &[], &[], &[], Vec::new());
        s.cpu_user_seconds = None;
        let back = Summary::from_pairs(&s.to_pairs()).unwrap();
        assert_eq!(back, s);
        assert!(s.oom_events.is_empty());
        let empty = Summary::compute(&[], &[], &[], &[], Vec::new());
        assert_eq!(empty.peak_working_set_bytes, None);
        assert_eq!(empty.cpu_usage_seconds_total, None);
    }

    /// The field record (hardware slowdown, SM 385 of 1785 MHz, 163 of 400 W) is held back,
    /// with its clock and power while held back; a card at its power cap is not, and a card
    /// whose throttle reasons are unreadable says nothing either way.
    #[test]
    fn held_back_card_keeps_its_clock_and_power_and_a_power_capped_one_is_not_held_back() {
        let slow: Vec<GpuRow> = (0..5)
            .map(|t| card_reading(t, 385, 163_000, derive::THROTTLE_HW_SLOWDOWN))
            .collect();
        let g = GpuSummary::from_rows(&a100(2), &slow);
        assert_eq!(g.throttled_readings, Some(5));
        assert_eq!(g.throttled_sm_clock_mhz, Some(385.0));
        assert_eq!(g.throttled_power_watts, Some(163.0));
        assert_eq!(g.throttled_power_limit_watts, Some(400.0));
        assert_eq!(g.sm_clock_max_mhz, Some(1785));
        assert_eq!(
            (g.nvml_index, g.pci_bus_id.as_deref()),
            (Some(2), Some("00000000:12:00.0"))
        );
        assert!((g.minutes_throttled.unwrap() - 4.0 / 60.0).abs() < 1e-9);
        assert_eq!(g.throttle_reasons, vec!["hardware_slowdown"]);

        let capped: Vec<GpuRow> = (0..5)
            .map(|t| card_reading(t, 1410, 398_000, derive::THROTTLE_SW_POWER_CAP))
            .collect();
        let g = GpuSummary::from_rows(&a100(1), &capped);
        assert_eq!(
            (g.throttled_readings, g.minutes_throttled),
            (Some(0), Some(0.0))
        );
        assert_eq!(
            g.throttled_sm_clock_mhz, None,
            "no held-back reading: no clock"
        );

        let mut blind = card_reading(0, 385, 163_000, 0);
        blind.sample.throttle_reasons = Err(crate::sample::GpuError::NotSupported);
        let g = GpuSummary::from_rows(&a100(0), &[blind]);
        assert_eq!((g.throttled_readings, g.minutes_throttled), (None, None));
        let back: GpuSummary = serde_json::from_str(&serde_json::to_string(&g).unwrap()).unwrap();
        assert_eq!(back, g);
    }

    #[test]
    fn sampler_overhead_counts_each_sampler_once() {
        let mut j = row(1, 1.0, 1, 0);
        j.sampler_cpu_usec = Some(100);
        j.sampler_bytes_written = Some(1000);
        let mut b = j.clone();
        b.series = Series::step("batch");
        let mut s0 = row(1, 1.0, 1, 0);
        s0.sampler_cpu_usec = Some(30);
        s0.sampler_bytes_written = Some(300);
        let info = |n: &str| StepInfo {
            step: n.into(),
            started_unix_ms: Some(0),
            ended_unix_ms: Some(1),
            tasks: None,
            exit_status: None,
        };
        let s = Summary::compute(
            &[j],
            &[info("extern"), info("batch"), info("0")],
            &[("batch".into(), b), ("0".into(), s0)],
            &[],
            Vec::new(),
        );
        assert_eq!(s.sampler_cpu_usec, Some(130));
        assert_eq!(s.sampler_bytes_written, Some(1300));
    }
}

/// What [`summarise_job_file`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpilogOutcome {
    /// No file: the job was not recorded on this node.
    NotRecorded,
    Written,
}

/// The epilog's bound, the one constant: how long an epilog may take, whatever the files
/// hold or their filesystem does. `slurmwatch-epilog` and the plugin's `job_epilog` run
/// their work on a thread of its own and leave it behind when it is not done by then; and
/// [`summarise_job_file`] runs every SQLite statement of its reader and its summary write
/// under this one deadline (see `store::harden`), so it ends within it plus the summary's
/// own arithmetic. Slurm's own `PrologEpilogTimeout` is far longer.
pub const EPILOG_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// The epilog's whole job, shared by `slurmwatch-epilog` and the plugin's `job_epilog`:
/// summarise `<spool>/<job_id>.sqlite` into its `summary` table, within [`EPILOG_BOUND`].
/// The path is built only from the numeric job id inside the root-owned spool; the file is
/// opened hardened (`store::harden`): a symlink, FIFO, oversized file or a schema that is not
/// slurmwatch's is refused with one sentence and nothing in it runs.
pub fn summarise_job_file(
    spool: &std::path::Path,
    job_id: u32,
) -> crate::error::Result<EpilogOutcome> {
    summarise_job_file_until(spool, job_id, crate::store::Deadline::after(EPILOG_BOUND))
}

/// As [`summarise_job_file`], by `deadline`.
pub fn summarise_job_file_until(
    spool: &std::path::Path,
    job_id: u32,
    deadline: crate::store::Deadline,
) -> crate::error::Result<EpilogOutcome> {
    let path = spool.join(crate::store::paths::live_name(job_id));
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(EpilogOutcome::NotRecorded)
        }
        Err(e) => {
            return Err(crate::error::Error::Store(format!(
                "cannot stat {}: {e}",
                path.display()
            )))
        }
        Ok(_) => {}
    }
    let reader = crate::store::Reader::open_until(&path, deadline)?;
    let pairs = from_reader(&reader)?.to_pairs();
    drop(reader);
    crate::store::summary::write_until(&path, &pairs, deadline)?;
    Ok(EpilogOutcome::Written)
}
