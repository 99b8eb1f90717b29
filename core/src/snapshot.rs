//! The one snapshot model: what the live view, `--once --json`, CSV and `--log` all show.
//!
//! Built from stored rows (the plugin's file, or the CLI's own direct readings, which take
//! the same [`SampleRow`] shape), so every output derives its rates and peaks the same way.
//! Each figure is a [`Reading`]: a value, or the reason there is none — never a stand-in 0.

use serde::{Deserialize, Serialize};

use crate::analysis::ledger::{Ledger, NodeFigures};
use crate::collect::gpu::derive::{self, CardState};
use crate::model::{self, MemoryGuard, Peaks};
use crate::model::{SampleKind, SampleRow};
use crate::sample::{GpuReading, Source};
use crate::slurm::sstat::{self, StepStat};
use crate::store::{GpuRow, JobMeta, Reader, StoredGpu};

/// Version of the snapshot's JSON and CSV layout (`schema` key). Bump on any rename or
/// change of meaning; adding a key is compatible.
pub const SNAPSHOT_SCHEMA: u32 = 1;

/// Where a snapshot's figures came from. Always shown: a reader must never mistake a
/// lifetime summary for a live reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotSource {
    /// The plugin's per-job SQLite file (spool on the node, archive copy elsewhere).
    PluginFile,
    /// Read directly from the job's cgroup (or /proc) by this process, on the node.
    Direct,
    /// Run on the job's node through `srun --jobid --overlap`, which read one of the above.
    SrunHop,
    /// `sstat`'s summary: lifetime totals, not live readings.
    SstatSummary,
}

impl SnapshotSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SnapshotSource::PluginFile => "plugin_file",
            SnapshotSource::Direct => "direct",
            SnapshotSource::SrunHop => "srun_hop",
            SnapshotSource::SstatSummary => "sstat_summary",
        }
    }

    /// The words the screen uses.
    pub fn describe(self) -> &'static str {
        match self {
            SnapshotSource::PluginFile => "recorded by the plugin",
            SnapshotSource::Direct => "read directly (plugin not recording)",
            SnapshotSource::SrunHop => "read on the node via srun",
            SnapshotSource::SstatSummary => "sstat lifetime totals (not live)",
        }
    }
}

/// A figure, or why there is none (principle 3: a failed reading is never a number).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reading<T> {
    pub value: Option<T>,
    /// Set exactly when `value` is `None`.
    pub reason: Option<String>,
}

impl<T> Reading<T> {
    pub fn ok(v: T) -> Reading<T> {
        Reading {
            value: Some(v),
            reason: None,
        }
    }

    pub fn missing(reason: impl Into<String>) -> Reading<T> {
        Reading {
            value: None,
            reason: Some(reason.into()),
        }
    }

    pub fn from_option(v: Option<T>, reason: impl FnOnce() -> String) -> Reading<T> {
        match v {
            Some(v) => Reading::ok(v),
            None => Reading::missing(reason()),
        }
    }

    pub fn get(&self) -> Option<&T> {
        self.value.as_ref()
    }
}

impl<T: Copy> Reading<T> {
    pub fn value(&self) -> Option<T> {
        self.value
    }
}

/// Is the job still there?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    /// The job has ended: the figures are its last reading.
    Ended,
    /// Not known (a file read without Slurm).
    Unknown,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Running => "running",
            JobState::Ended => "ended",
            JobState::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuSnapshot {
    /// Cumulative CPU time of the job on this node, seconds.
    pub usage_seconds_total: Reading<f64>,
    pub cores_allocated: Reading<u32>,
    /// Δcpu / Δt between the last two readings.
    pub effective_cores: Reading<f64>,
    /// Most cores in use at once over the recording (or since watching, for direct reads).
    pub peak_effective_cores: Reading<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemorySnapshot {
    /// usage − page cache: what `--mem` must cover.
    pub working_set_bytes: Reading<u64>,
    pub cache_bytes: Reading<u64>,
    /// The cgroup's limit, else the Slurm allocation.
    pub limit_bytes: Reading<u64>,
    pub percent_of_limit: Reading<f64>,
    /// The largest working set over the recording (between-row maxima included).
    pub peak_working_set_bytes: Reading<u64>,
    /// The kernel's high-water mark of usage, page cache included.
    pub lifetime_peak_bytes: Reading<u64>,
    /// `None` when there is no working set or no limit: no grade without a figure.
    pub guard: Option<MemoryGuard>,
}

/// A GPU's one health word (principle 2), from its utilization and whose memory is on it
/// (`collect::gpu::derive::card_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuState {
    Active,
    Idle,
    /// Idle while the job holds memory on it: allocated, not used.
    IdleHoldingMemory,
    /// Others' processes hold most of its memory: the card-wide utilization is not the job's.
    SharedNotOurs,
}

impl GpuState {
    /// Below this utilization a card counts as idle (the anchors' "idle" threshold).
    pub const IDLE_BELOW_PERCENT: f64 = 5.0;

    pub fn from_utilization(percent: f64) -> GpuState {
        if percent < Self::IDLE_BELOW_PERCENT {
            GpuState::Idle
        } else {
            GpuState::Active
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            GpuState::Active => "active",
            GpuState::Idle => "idle",
            GpuState::IdleHoldingMemory => "idle_holding_memory",
            GpuState::SharedNotOurs => "shared_not_ours",
        }
    }

    /// The derived card state; `None` when it has no verdict (utilization unreadable).
    pub fn from_card_state(c: CardState) -> Option<GpuState> {
        match c {
            CardState::Active => Some(GpuState::Active),
            CardState::Idle => Some(GpuState::Idle),
            CardState::IdleHoldingMemory => Some(GpuState::IdleHoldingMemory),
            CardState::SharedNotOurs => Some(GpuState::SharedNotOurs),
            CardState::Unknown => None,
        }
    }
}

/// One card the job holds. Filled from the GPU samples once those are recorded; the view,
/// JSON and CSV already render it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSnapshot {
    /// The node the card is in (multi-node jobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Position in the job's `CUDA_VISIBLE_DEVICES`: what the user's code calls `cuda:N`.
    pub cuda_index: Option<u32>,
    pub nvml_index: Option<u32>,
    pub uuid: String,
    pub name: Option<String>,
    /// `None` when utilization is unreadable.
    pub state: Option<GpuState>,
    pub utilization_percent: Reading<f64>,
    pub memory_used_bytes: Reading<u64>,
    pub memory_total_bytes: Reading<u64>,
    pub power_watts: Reading<f64>,
    pub power_limit_watts: Reading<f64>,
    pub temperature_celsius: Reading<f64>,
    pub sm_clock_mhz: Reading<u32>,
    pub sm_clock_max_mhz: Reading<u32>,
    /// Active throttle reasons (`sw_power_cap`, `hw_slowdown`, `sw_thermal_slowdown`, ...);
    /// empty when the card runs unthrottled.
    pub throttle_reasons: Reading<Vec<String>>,
    /// The card's critical Xid events so far (the latest few), oldest first.
    #[serde(default)]
    pub xid_events: Vec<crate::analysis::summary::XidEvent>,
    /// Recent utilization, oldest first, one slot per interval; `None` is a gap.
    pub utilization_history: Vec<Option<f64>>,
}

impl GpuSnapshot {
    /// A card with every reading unreadable for `reason`.
    pub fn unreadable(uuid: impl Into<String>, reason: &str) -> GpuSnapshot {
        let r = || reason.to_string();
        GpuSnapshot {
            node: None,
            cuda_index: None,
            nvml_index: None,
            uuid: uuid.into(),
            name: None,
            state: None,
            utilization_percent: Reading::missing(r()),
            memory_used_bytes: Reading::missing(r()),
            memory_total_bytes: Reading::missing(r()),
            power_watts: Reading::missing(r()),
            power_limit_watts: Reading::missing(r()),
            temperature_celsius: Reading::missing(r()),
            sm_clock_mhz: Reading::missing(r()),
            sm_clock_max_mhz: Reading::missing(r()),
            throttle_reasons: Reading::missing(r()),
            xid_events: Vec::new(),
            utilization_history: Vec::new(),
        }
    }
}

/// A GPU reading as a snapshot figure: unreadable → `None` with the NVML error's name.
fn gpu_reading<T, U>(r: &GpuReading<T>, f: impl FnOnce(&T) -> U) -> Reading<U> {
    match r {
        Ok(v) => Reading::ok(f(v)),
        Err(e) => Reading::missing(e.name()),
    }
}

/// Why a card constant is absent.
const NOT_REPORTED: &str = "not reported by NVML";

/// One card's snapshot from its stored constants and its latest readings (oldest first; the
/// last one is shown). `history` fills the utilization sparkline (see [`gpu_history`]).
pub fn gpu_snapshot(g: &StoredGpu, rows: &[GpuRow]) -> GpuSnapshot {
    let c = &g.card;
    let mut out = GpuSnapshot::unreadable(c.uuid.clone(), "no GPU reading yet");
    out.cuda_index = c.cuda_index;
    out.nvml_index = Some(c.nvml_index);
    out.name = c.name.clone();
    out.memory_total_bytes = Reading::from_option(c.memory_total_bytes, || NOT_REPORTED.into());
    out.sm_clock_max_mhz = Reading::from_option(c.sm_clock_max_mhz, || NOT_REPORTED.into());
    let Some(last) = rows.last() else {
        return out;
    };
    let s = &last.sample;
    out.state = GpuState::from_card_state(derive::card_state(s));
    out.utilization_percent = gpu_reading(&s.utilization_percent, |v| f64::from(*v));
    out.memory_used_bytes = gpu_reading(&s.memory_used_bytes, |v| *v);
    out.power_watts = gpu_reading(&s.power_draw_milliwatts, |v| f64::from(*v) / 1000.0);
    out.power_limit_watts = gpu_reading(&s.power_limit_milliwatts, |v| f64::from(*v) / 1000.0);
    out.temperature_celsius = gpu_reading(&s.temperature_celsius, |v| f64::from(*v));
    out.sm_clock_mhz = gpu_reading(&s.sm_clock_mhz, |v| *v);
    out.throttle_reasons = gpu_reading(&s.throttle_reasons, |m| {
        // "gpu_idle" is the card resting, not being held back.
        derive::throttle_names(*m & !derive::THROTTLE_GPU_IDLE)
    });
    out
}

/// Places a card's utilization readings on a grid of `slot_seconds` ending at the last one
/// (as [`history`] does for the job's rows): a missed or unreadable reading is a gap.
pub fn gpu_history(rows: &[GpuRow], slot_seconds: u32, slots: usize) -> Vec<Option<f64>> {
    let mut h = vec![None; slots];
    let Some(last) = rows.last() else {
        return h;
    };
    let slot_ms = i64::from(slot_seconds.max(1)) * 1000;
    for r in rows.iter().rev() {
        let back = (last.t_unix_ms - r.t_unix_ms + slot_ms / 2).div_euclid(slot_ms);
        let Ok(back) = usize::try_from(back) else {
            continue;
        };
        if back >= slots {
            break;
        }
        let idx = slots - 1 - back;
        if h[idx].is_none() {
            h[idx] = r.sample.utilization_percent.ok().map(f64::from);
        }
    }
    h
}

/// Xid events shown per card in a live view.
pub const LIVE_XID_EVENTS: u32 = 5;

/// The job's cards from its file, each with its latest readings (every card of the job on
/// this node, whichever step records it: a card is one step's to record, every step's to
/// use). A file without GPU tables, or one that cannot be read, gives no cards.
pub fn gpus_from_reader(reader: &Reader, slot_seconds: u32) -> Vec<GpuSnapshot> {
    StoredCards::load(reader, 0).as_of(None, slot_seconds)
}

/// The job's cards as read from its file once, with enough of their latest readings and
/// Xid events to show them as of any of the last `extra + 1` job rows: `--log` writes a
/// line per stored row, and an older row's line must not show a newer card reading.
pub struct StoredCards {
    cards: Vec<StoredCard>,
}

/// A card's constants, its latest readings and its Xid events (time, code), oldest first.
type StoredCard = (StoredGpu, Vec<GpuRow>, Vec<(i64, u64)>);

impl StoredCards {
    /// Reads the cards, their last `HISTORY_SLOTS + extra` readings and last
    /// `LIVE_XID_EVENTS + extra` Xid events (an unreadable part is empty, as above).
    pub fn load(reader: &Reader, extra: u32) -> StoredCards {
        let cards = reader.gpus().unwrap_or_default();
        let cards = cards
            .into_iter()
            .map(|g| {
                let rows = reader
                    .gpu_last(g.id, HISTORY_SLOTS as u32 + extra)
                    .unwrap_or_default();
                let xids = reader
                    .gpu_xids(g.id, LIVE_XID_EVENTS + extra)
                    .unwrap_or_default();
                (g, rows, xids)
            })
            .collect();
        StoredCards { cards }
    }

    /// Every card as of `until_ms` (its readings and events at or before it; `None`: all).
    /// A card records in the same tick as the job's row, with the row's time.
    pub fn as_of(&self, until_ms: Option<i64>, slot_seconds: u32) -> Vec<GpuSnapshot> {
        let upto = |t: i64| until_ms.is_none_or(|u| t <= u);
        self.cards
            .iter()
            .map(|(g, rows, xids)| {
                // Readings are stored in time order.
                let end =
                    until_ms.map_or(rows.len(), |u| rows.partition_point(|r| r.t_unix_ms <= u));
                let rows = &rows[end.saturating_sub(HISTORY_SLOTS)..end];
                let mut s = gpu_snapshot(g, rows);
                s.utilization_history = gpu_history(rows, slot_seconds, HISTORY_SLOTS);
                let xids: Vec<_> = xids.iter().filter(|(t, _)| upto(*t)).collect();
                let skip = xids.len().saturating_sub(LIVE_XID_EVENTS as usize);
                s.xid_events = xids[skip..]
                    .iter()
                    .map(|(t, x)| crate::analysis::summary::XidEvent::new(*t, *x))
                    .collect();
                s
            })
            .collect()
    }
}

/// The job's time budget, from Slurm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeBudget {
    pub elapsed_seconds: Reading<u64>,
    /// `None` with reason `unlimited` for a job without a limit.
    pub limit_seconds: Reading<u64>,
    /// When the limit runs out, as Slurm prints it (local time, `YYYY-MM-DDTHH:MM:SS`).
    pub ends_at: Reading<String>,
}

impl TimeBudget {
    pub fn unknown(reason: &str) -> TimeBudget {
        TimeBudget {
            elapsed_seconds: Reading::missing(reason),
            limit_seconds: Reading::missing(reason),
            ends_at: Reading::missing(reason),
        }
    }
}

/// Recent history for the sparklines: one slot per recording interval, oldest first. A slot
/// with no row (a missed sample) or an unreadable value is `None`: drawn as a gap, not 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    pub slot_seconds: u32,
    pub effective_cores: Vec<Option<f64>>,
    pub working_set_bytes: Vec<Option<u64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// As Slurm prints it: `12345`, `12345_3`, `123+1`.
    pub job_id: String,
    /// The step shown, when the user asked for one (`12345.0`); `None` is the whole job.
    pub step: Option<String>,
    pub job_name: Option<String>,
    pub user: Option<String>,
    pub node: Option<String>,
    pub source: SnapshotSource,
    /// How the figures were measured (`cgroup_v1`, `cgroup_v2`, `proc`).
    pub measured_by: Option<Source>,
    pub state: JobState,
    /// When the latest reading was taken.
    pub reading_unix_ms: Option<i64>,
    /// Seconds between recorded rows (the plugin's interval).
    pub interval_seconds: Option<u32>,
    /// Peaks cover the whole job (`true`, from a recording) or only since this view started.
    pub peaks_cover_whole_job: bool,
    pub cpu: CpuSnapshot,
    pub memory: MemorySnapshot,
    pub gpus: Vec<GpuSnapshot>,
    pub time: TimeBudget,
    pub history: History,
    /// sstat's own figures, only on an `sstat_summary` snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sstat: Option<SstatFigures>,
    /// Every node of the job with its own figures (`snapshot_merge`); empty until merged.
    #[serde(default)]
    pub nodes: Vec<NodeSnapshot>,
    /// How many of `nodes` had a recent reading.
    #[serde(default)]
    pub nodes_reporting: Option<u32>,
    /// Where the allocation went so far (`analysis::ledger`, the report's own arithmetic), to
    /// its `to_unix_ms`; or why there is none.
    #[serde(default = "ledger_not_built")]
    pub ledger: Reading<Ledger>,
    /// This node's recording as the ledger reads it (a file's snapshot only): what a merge
    /// of the nodes' snapshots adds up, carried across an `srun` hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_input: Option<NodeFigures>,
    /// The phases the job marked so far (`slurmwatch mark`), from this node's file: the
    /// last one runs to the newest row. Absent without a mark.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<crate::analysis::phases::Phase>,
    /// How fast the job's own work went so far, from its log's progress lines (the report's
    /// `throughput`), on a file's snapshot of the whole job; `None` without progress lines.
    #[serde(default)]
    pub throughput: Option<crate::analysis::throughput::Throughput>,
}

/// Why a snapshot has no ledger: it was not read from the plugin's recording.
pub const LEDGER_NEEDS_RECORDING: &str =
    "needs the plugin's recording of the job: the ledger subtracts its counters' first reading from its last";

fn ledger_not_built() -> Reading<Ledger> {
    Reading::missing(LEDGER_NEEDS_RECORDING)
}

/// Sets a snapshot's ledger from its node's recording (`Err`: why there is none).
pub fn set_ledger(s: &mut Snapshot, input: Result<NodeFigures, String>) {
    match input {
        Ok(n) => {
            s.ledger = Reading::ok(crate::analysis::ledger::of_nodes(&[&n]));
            s.ledger_input = Some(n);
        }
        Err(why) => {
            s.ledger = Reading::missing(why);
            s.ledger_input = None;
        }
    }
}

/// One node of the job, as `nodes[]` in the live JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSnapshot {
    /// Slurm's node name.
    pub node: String,
    /// A reading within two intervals of the newest reading of any node.
    pub reporting: bool,
    /// Why there is no (recent) reading, when `reporting` is false.
    pub reason: Option<String>,
    pub reading_unix_ms: Option<i64>,
    /// How this node's figures were read (its file, directly, a hop to it); `None` without.
    pub source: Option<SnapshotSource>,
    pub cpu: CpuSnapshot,
    pub memory: MemorySnapshot,
    pub gpus: usize,
}

impl Snapshot {
    /// What the live efficiencies are computed from (`analysis::efficiency` owns the rules):
    /// CPU so far over elapsed × cores, the peak working set over the limit on the busiest
    /// node, elapsed over the limit, and each card's current utilization and memory.
    pub fn efficiency_inputs(&self) -> crate::analysis::efficiency::Inputs {
        use crate::analysis::efficiency::{GpuInput, Inputs, Sourced};
        // Per node: the node with the largest peak, against its own limit (the job-level
        // limit of a multi-node job is a sum over nodes; `--mem` is per node).
        let (peak, limit) = if self.nodes.len() > 1 {
            self.nodes
                .iter()
                .filter(|n| n.reporting)
                .max_by_key(|n| n.memory.peak_working_set_bytes.value())
                .map(|n| {
                    (
                        n.memory.peak_working_set_bytes.value(),
                        n.memory.limit_bytes.value(),
                    )
                })
                .unwrap_or((None, None))
        } else {
            (
                self.memory.peak_working_set_bytes.value(),
                self.memory.limit_bytes.value(),
            )
        };
        Inputs {
            cpu_seconds: self
                .cpu
                .usage_seconds_total
                .value()
                .map(|c| Sourced::new(c, "CPU time so far")),
            elapsed_seconds: self.time.elapsed_seconds.value().map(|e| e as f64),
            cores_allocated: self.cpu.cores_allocated.value().map(f64::from),
            memory_used: peak.map(|p| Sourced::new(p, "working-set peak so far")),
            memory_limit: limit.map(|l| Sourced::new(l, "limit per node")),
            max_rss_bytes: None,
            memory_request_bytes: None,
            timelimit_seconds: self.time.limit_seconds.value().map(|l| l as f64),
            timelimit_unlimited: self.time.limit_seconds.reason.as_deref() == Some("unlimited"),
            timelimit_unknown_reason: self.time.limit_seconds.reason.clone(),
            gpus: self
                .gpus
                .iter()
                .map(|g| GpuInput {
                    label: g
                        .cuda_index
                        .map_or_else(|| g.uuid.clone(), |i| format!("cuda:{i}")),
                    node: g.node.clone(),
                    utilization_percent: g.utilization_percent.value(),
                    memory_used: g
                        .memory_used_bytes
                        .value()
                        .map(|m| Sourced::new(m, "card memory in use, every process on it")),
                    memory_total_bytes: g.memory_total_bytes.value(),
                })
                .collect(),
            gpus_expected: None,
        }
    }
}

/// What `sstat` gives for the job's *running* steps: totals and averages over each step's
/// life so far, never a live reading. Kept apart from the live figures (which stay `None`
/// with a reason on an `sstat_summary` snapshot) so that neither is mistaken for the other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SstatFigures {
    /// CPU seconds the running steps have used so far: Σ `AveCPU × NTasks`.
    pub cpu_seconds_total: Reading<f64>,
    /// The largest resident set any one task has had (`MaxRSS`): page cache not counted,
    /// shared pages counted in every process; not the cgroup's working set.
    pub max_rss_bytes: Reading<u64>,
    pub max_rss_node: Option<String>,
    pub steps: Vec<StepStat>,
}

/// Facts from Slurm that the rows do not carry.
#[derive(Debug, Clone, Default)]
pub struct JobFacts {
    pub job_id: String,
    pub step: Option<String>,
    pub job_name: Option<String>,
    pub user: Option<String>,
    pub node: Option<String>,
    pub cores_allocated: Option<u32>,
    pub memory_allocated_bytes: Option<u64>,
    pub state: Option<JobState>,
}

/// The guard's word in JSON, CSV and on screen.
pub fn guard_word(g: MemoryGuard) -> &'static str {
    match g {
        MemoryGuard::Ok => "ok",
        MemoryGuard::Amber => "amber",
        MemoryGuard::Red => "red",
    }
}

/// How many history slots a snapshot keeps (the widest dashboard needs no more).
pub const HISTORY_SLOTS: usize = 120;

/// Builds a snapshot from one series' rows, oldest first. `meta` is the file's (absent for
/// direct readings); `facts` fill what neither has. `peaks_cover_whole_job` says whether
/// `rows` start at the job's start.
pub fn from_rows(
    source: SnapshotSource,
    meta: Option<&JobMeta>,
    facts: &JobFacts,
    rows: &[SampleRow],
    peaks_cover_whole_job: bool,
) -> Snapshot {
    let peaks = Peaks::over(rows);
    let whole = peaks_cover_whole_job;
    from_rows_with(source, meta, facts, rows, &peaks, whole)
}

/// One snapshot per row of `rows[each]`, oldest first, each as of its row: what
/// [`from_rows`] gives for `rows[..=i]` (the rate from that row and its predecessor, the
/// peaks up to it), with the peaks carried forward rather than recomputed (a day of 1-s rows
/// written at once would otherwise be quadratic). Slurm's word in `facts.state` is about now,
/// so it is the newest row's only: an earlier row is running unless it is an end row.
pub fn from_each_row(
    source: SnapshotSource,
    meta: Option<&JobMeta>,
    facts: &JobFacts,
    rows: &[SampleRow],
    each: std::ops::Range<usize>,
    peaks_cover_whole_job: bool,
) -> Vec<Snapshot> {
    let end = each.end.min(rows.len());
    let first = each.start.min(end);
    let mut peaks = Peaks::over(&rows[..first]);
    let earlier = JobFacts {
        state: None,
        ..facts.clone()
    };
    let whole = peaks_cover_whole_job;
    (first..end)
        .map(|i| {
            peaks.add(&rows[i]);
            let newest = i + 1 == rows.len();
            let f = if newest { facts } else { &earlier };
            let mut s = from_rows_with(source, meta, f, &rows[..=i], &peaks, whole);
            if !newest && s.state == JobState::Unknown {
                s.state = JobState::Running; // the recording went on past this row
            }
            s
        })
        .collect()
}

/// [`from_rows`] with the rows' peaks already taken.
fn from_rows_with(
    source: SnapshotSource,
    meta: Option<&JobMeta>,
    facts: &JobFacts,
    rows: &[SampleRow],
    peaks: &Peaks,
    peaks_cover_whole_job: bool,
) -> Snapshot {
    let last = rows.last();
    let prev = rows.len().checked_sub(2).and_then(|i| rows.get(i));
    let measured_by = meta.map(|m| m.source);
    let proc_mode = measured_by == Some(Source::Proc);
    let allocated_mem = meta
        .and_then(|m| m.memory_allocated_bytes)
        .or(facts.memory_allocated_bytes);
    let cores_allocated = last
        .and_then(|r| r.cores_allocated)
        .or(meta.and_then(|m| m.cores_allocated))
        .or(facts.cores_allocated);
    let memory = memory_from_rows(last, peaks, allocated_mem, proc_mode);

    let state = match (facts.state, last) {
        (Some(s), _) => s,
        (None, Some(r)) if r.kind == SampleKind::End => JobState::Ended,
        _ => JobState::Unknown,
    };
    let interval = meta.map(|m| m.interval_seconds);
    Snapshot {
        job_id: if facts.job_id.is_empty() {
            meta.map(|m| m.job_id.to_string()).unwrap_or_default()
        } else {
            facts.job_id.clone()
        },
        step: facts.step.clone(),
        job_name: facts.job_name.clone(),
        user: facts.user.clone().or(meta.map(|m| m.user.clone())),
        node: facts.node.clone().or(meta.map(|m| m.node.clone())),
        source,
        measured_by,
        state,
        reading_unix_ms: last.map(|r| r.t_unix_ms),
        interval_seconds: interval,
        peaks_cover_whole_job,
        cpu: cpu_from_rows(prev, last, cores_allocated, peaks),
        memory,
        gpus: Vec::new(),
        time: TimeBudget::unknown("not asked of Slurm"),
        history: history(rows, interval.unwrap_or(5).max(1), HISTORY_SLOTS),
        sstat: None,
        nodes: Vec::new(),
        nodes_reporting: None,
        ledger: ledger_not_built(),
        ledger_input: None,
        phases: Vec::new(),
        throughput: None,
    }
}

/// Why a figure of [`from_rows`] is absent.
const NO_ROWS: &str = "no reading yet";
const UNREADABLE: &str = "unreadable in the latest reading";
const NO_CGROUP: &str = "not available without a job cgroup (/proc mode)";

/// [`from_rows`]' CPU figures: the latest counter in seconds, and the rate (effective cores)
/// between the last two readings.
fn cpu_from_rows(
    prev: Option<&SampleRow>,
    last: Option<&SampleRow>,
    cores_allocated: Option<u32>,
    peaks: &Peaks,
) -> CpuSnapshot {
    let effective_cores = match (prev, last) {
        (Some(p), Some(c)) => Reading::from_option(model::effective_cores(p, c), || {
            "no rate: a CPU reading is missing or the counter went back".into()
        }),
        (None, Some(_)) => Reading::missing("one reading so far: a rate needs two"),
        _ => Reading::missing(NO_ROWS.to_string()),
    };
    CpuSnapshot {
        usage_seconds_total: match last {
            None => Reading::missing(NO_ROWS.to_string()),
            Some(r) => Reading::from_option(r.usage.cpu_usage_usec.map(|u| u as f64 / 1e6), || {
                UNREADABLE.into()
            }),
        },
        cores_allocated: Reading::from_option(cores_allocated, || "not known".into()),
        effective_cores,
        peak_effective_cores: Reading::from_option(peaks.effective_cores_max, || {
            "a rate needs two readings".into()
        }),
    }
}

/// [`from_rows`]' memory figures (bytes) from the latest reading, the peaks over all rows,
/// and the allocation where the cgroup has no limit; `proc_mode` says why cgroup-only
/// figures are absent.
fn memory_from_rows(
    last: Option<&SampleRow>,
    peaks: &Peaks,
    allocated_mem: Option<u64>,
    proc_mode: bool,
) -> MemorySnapshot {
    let field = |f: fn(&SampleRow) -> Option<u64>, why: &str| -> Reading<u64> {
        match last {
            None => Reading::missing(NO_ROWS.to_string()),
            Some(r) => Reading::from_option(f(r), || why.to_string()),
        }
    };
    let limit = last.and_then(|r| model::memory_limit_bytes(r, allocated_mem));
    let percent = last.and_then(|r| model::memory_percent_of_limit(r, allocated_mem));
    MemorySnapshot {
        working_set_bytes: field(|r| r.usage.memory_working_set_bytes, UNREADABLE),
        cache_bytes: field(
            |r| r.usage.memory_cache_bytes,
            if proc_mode { NO_CGROUP } else { UNREADABLE },
        ),
        limit_bytes: match last {
            None => Reading::missing(NO_ROWS.to_string()),
            Some(_) => {
                Reading::from_option(limit, || "no memory limit and no allocation known".into())
            }
        },
        percent_of_limit: Reading::from_option(percent, || {
            "needs both the working set and a limit".into()
        }),
        peak_working_set_bytes: Reading::from_option(peaks.working_set_max_bytes, || {
            "no working set recorded".into()
        }),
        lifetime_peak_bytes: Reading::from_option(peaks.lifetime_peak_bytes, || {
            if proc_mode { NO_CGROUP } else { "not recorded" }.into()
        }),
        guard: percent.map(MemoryGuard::from_percent),
    }
}

/// Why a live figure is absent from an `sstat_summary` snapshot.
pub const SSTAT_NO_RATE: &str = "sstat gives lifetime totals, not a rate";
pub const SSTAT_NO_WORKING_SET: &str = "sstat has no page-cache-free figure";

/// The snapshot of an `sstat` summary taken at `t_unix_ms`: Slurm's facts (allocation,
/// state), sstat's lifetime figures in [`Snapshot::sstat`], and every live figure `None`
/// with the reason sstat cannot give it.
pub fn from_sstat(facts: &JobFacts, summary: &sstat::Summary, t_unix_ms: i64) -> Snapshot {
    let mut s = from_rows(SnapshotSource::SstatSummary, None, facts, &[], false);
    s.reading_unix_ms = Some(t_unix_ms);
    s.history = History {
        slot_seconds: 0,
        effective_cores: Vec::new(),
        working_set_bytes: Vec::new(),
    };
    s.cpu.usage_seconds_total = Reading::missing(
        "sstat has only per-task averages of the running steps: see sstat_cpu_seconds_total",
    );
    s.cpu.effective_cores = Reading::missing(SSTAT_NO_RATE);
    s.cpu.peak_effective_cores = Reading::missing(SSTAT_NO_RATE);
    let m = &mut s.memory;
    m.working_set_bytes = Reading::missing(SSTAT_NO_WORKING_SET);
    m.cache_bytes = Reading::missing("sstat has no page-cache figure");
    m.limit_bytes = Reading::from_option(facts.memory_allocated_bytes, || {
        "no memory allocation known".into()
    });
    m.percent_of_limit = Reading::missing(SSTAT_NO_WORKING_SET);
    m.peak_working_set_bytes = Reading::missing(SSTAT_NO_WORKING_SET);
    m.lifetime_peak_bytes = Reading::missing(
        "sstat's MaxRSS is one task's resident set, not the cgroup's peak: see sstat_max_rss_bytes",
    );
    m.guard = None;
    s.ledger = Reading::missing(
        "sstat gives lifetime totals of the running steps, not the counters the ledger subtracts",
    );
    s.sstat = Some(SstatFigures {
        cpu_seconds_total: Reading::from_option(summary.cpu_seconds_total(), || {
            "sstat gave no AveCPU and NTasks".into()
        }),
        max_rss_bytes: Reading::from_option(summary.max_rss_bytes(), || {
            "sstat gave no MaxRSS".into()
        }),
        max_rss_node: summary.max_rss_node(),
        steps: summary.steps.clone(),
    });
    s
}

/// Places rows on a grid of `slot_seconds` ending at the last row; a slot no row falls in
/// stays `None` (a gap). Effective cores in a slot are the rate from the previous row.
pub fn history(rows: &[SampleRow], slot_seconds: u32, slots: usize) -> History {
    let mut h = History {
        slot_seconds,
        effective_cores: vec![None; slots],
        working_set_bytes: vec![None; slots],
    };
    let Some(last) = rows.last() else {
        return h;
    };
    let slot_ms = i64::from(slot_seconds) * 1000;
    let end = last.t_unix_ms;
    for (i, r) in rows.iter().enumerate().rev() {
        // Slot 0 ends at the last row; round so a row a little early or late stays in its slot.
        let back = (end - r.t_unix_ms + slot_ms / 2).div_euclid(slot_ms);
        if back < 0 {
            continue;
        }
        let Ok(back) = usize::try_from(back) else {
            break;
        };
        if back >= slots {
            break;
        }
        let idx = slots - 1 - back;
        if h.working_set_bytes[idx].is_none() {
            h.working_set_bytes[idx] = r.usage.memory_working_set_bytes;
        }
        if h.effective_cores[idx].is_none() {
            h.effective_cores[idx] = i
                .checked_sub(1)
                .and_then(|p| rows.get(p))
                .and_then(|p| model::effective_cores(p, r));
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Series;

    fn row(t: i64, cpu_s: Option<f64>, ws: Option<u64>) -> SampleRow {
        let mut r = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = cpu_s.map(|s| (s * 1e6) as u64);
        r.usage.memory_working_set_bytes = ws;
        r.usage.memory_limit_bytes = Some(1000);
        r.cores_allocated = Some(4);
        r
    }

    /// A snapshot as of each row is the one the row's prefix gives, peaks carried forward;
    /// Slurm's word on the state is the newest row's only.
    #[test]
    fn each_row_is_its_prefix_snapshot() {
        let rows: Vec<SampleRow> = [(0.0, 100), (4.0, 500), (5.0, 300), (13.0, 200)]
            .iter()
            .enumerate()
            .map(|(i, (cpu, ws))| row(i as i64 * 2_000, Some(*cpu), Some(*ws)))
            .collect();
        let facts = JobFacts {
            state: Some(JobState::Ended),
            ..JobFacts::default()
        };
        let src = SnapshotSource::PluginFile;
        let each = from_each_row(src, None, &facts, &rows, 1..4, true);
        assert_eq!(each.len(), 3);
        for (k, s) in each.iter().enumerate() {
            let i = k + 1;
            let mut want = from_rows(src, None, &facts, &rows[..=i], true);
            if i < 3 {
                want.state = JobState::Running;
            }
            assert_eq!(s, &want, "row {i}");
        }
        let cores: Vec<_> = each.iter().map(|s| s.cpu.effective_cores.value).collect();
        assert_eq!(cores, [Some(2.0), Some(0.5), Some(4.0)]);
        let peaks: Vec<_> = each
            .iter()
            .map(|s| s.cpu.peak_effective_cores.value)
            .collect();
        assert_eq!(peaks, [Some(2.0), Some(2.0), Some(4.0)]);
        assert_eq!(each[2].state, JobState::Ended);
    }

    #[test]
    fn rates_and_guard_from_the_last_two_rows() {
        let rows = [
            row(0, Some(0.0), Some(100)),
            row(5_000, Some(10.0), Some(860)),
        ];
        let s = from_rows(
            SnapshotSource::PluginFile,
            None,
            &JobFacts::default(),
            &rows,
            true,
        );
        assert_eq!(s.cpu.effective_cores.value(), Some(2.0));
        assert_eq!(s.cpu.usage_seconds_total.value(), Some(10.0));
        assert_eq!(s.cpu.cores_allocated.value(), Some(4));
        assert_eq!(s.memory.guard, Some(MemoryGuard::Amber));
        assert_eq!(s.memory.peak_working_set_bytes.value(), Some(860));
        assert_eq!(s.memory.cache_bytes.value(), None);
        assert!(s.memory.cache_bytes.reason.is_some());
    }

    #[test]
    fn one_row_has_no_rate_and_says_why() {
        let s = from_rows(
            SnapshotSource::Direct,
            None,
            &JobFacts::default(),
            &[row(0, Some(1.0), None)],
            false,
        );
        assert_eq!(s.cpu.effective_cores.value(), None);
        assert!(s
            .cpu
            .effective_cores
            .reason
            .as_deref()
            .unwrap()
            .contains("two"));
        assert_eq!(s.memory.guard, None);
    }

    #[test]
    fn an_sstat_summary_is_never_a_live_reading() {
        let summary = crate::slurm::sstat::parse(
            "JobID|AveCPU|MaxRSS|MaxRSSNode|AveRSS|NTasks|MaxDiskRead|MaxDiskWrite\n\
             9.extern|00:00:00|1000K|n1|1000K|1|0|0\n\
             9.batch|00:00:12|310M|n1|310M|1|1M|2K\n\
             9.0|00:00:05|100M|n2|90M|2|0|0\n",
        );
        let facts = JobFacts {
            job_id: "9".into(),
            cores_allocated: Some(2),
            memory_allocated_bytes: Some(1 << 30),
            state: Some(JobState::Running),
            ..JobFacts::default()
        };
        let s = from_sstat(&facts, &summary, 1_000);
        assert_eq!(s.source, SnapshotSource::SstatSummary);
        assert_eq!(s.reading_unix_ms, Some(1_000));
        assert_eq!(s.cpu.effective_cores.reason.as_deref(), Some(SSTAT_NO_RATE));
        assert_eq!(s.cpu.peak_effective_cores.value(), None);
        assert_eq!(s.cpu.usage_seconds_total.value(), None);
        assert_eq!(s.cpu.cores_allocated.value(), Some(2));
        assert_eq!(
            s.memory.working_set_bytes.reason.as_deref(),
            Some(SSTAT_NO_WORKING_SET)
        );
        assert_eq!(s.memory.peak_working_set_bytes.value(), None);
        assert_eq!(s.memory.lifetime_peak_bytes.value(), None);
        assert_eq!(s.memory.limit_bytes.value(), Some(1 << 30));
        assert_eq!(s.memory.guard, None);
        let st = s.sstat.as_ref().unwrap();
        assert_eq!(st.cpu_seconds_total.value(), Some(22.0));
        assert_eq!(st.max_rss_bytes.value(), Some(310 << 20));
        assert_eq!(st.max_rss_node.as_deref(), Some("n1"));
        assert_eq!(st.steps.len(), 3);
    }

    #[test]
    fn a_missed_sample_is_a_gap_in_history() {
        // Rows at 0, 5, 15 s (10 s missing) and one with an unreadable working set.
        let rows = [
            row(0, Some(0.0), Some(1)),
            row(5_000, Some(5.0), Some(2)),
            row(15_000, Some(15.0), None),
        ];
        let h = history(&rows, 5, 5);
        assert_eq!(h.working_set_bytes, [None, Some(1), Some(2), None, None]);
        assert_eq!(h.effective_cores, [None, None, Some(1.0), None, Some(1.0)]);
    }
}
