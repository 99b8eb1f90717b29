//! The snapshot as strict standard JSON: no NaN or Infinity (a non-finite figure becomes
//! `null` with a reason), `schema` first, units in every key name, and each unreadable
//! figure `null` with a `<key>_reason` beside it.

use serde_json::{Map, Value};

use crate::slurm::sstat::StepStat;
use crate::snapshot::NodeSnapshot;
use crate::snapshot::{
    guard_word, CpuSnapshot, GpuSnapshot, JobState, MemorySnapshot, Reading, Snapshot,
    SNAPSHOT_SCHEMA,
};

trait ToJson {
    fn to_json(&self) -> Option<Value>;
}

impl ToJson for u64 {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
}

impl ToJson for u32 {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(*self))
    }
}

impl ToJson for f64 {
    fn to_json(&self) -> Option<Value> {
        // Six significant decimals are more than any reading carries; rounding keeps the
        // output stable and short. Non-finite is refused (strict JSON has no NaN).
        let r = (self * 1e6).round() / 1e6;
        r.is_finite()
            .then(|| serde_json::Number::from_f64(r).map(Value::Number))
            .flatten()
    }
}

impl ToJson for String {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(self.as_str()))
    }
}

impl ToJson for Vec<String> {
    fn to_json(&self) -> Option<Value> {
        Some(Value::from(self.clone()))
    }
}

fn put<T: ToJson>(m: &mut Map<String, Value>, key: &str, r: &Reading<T>) {
    match r.value.as_ref().map(|v| v.to_json()) {
        Some(Some(v)) => {
            m.insert(key.into(), v);
        }
        Some(None) => {
            m.insert(key.into(), Value::Null);
            m.insert(format!("{key}_reason"), "not a finite number".into());
        }
        None => {
            m.insert(key.into(), Value::Null);
            m.insert(
                format!("{key}_reason"),
                r.reason.as_deref().unwrap_or("unreadable").into(),
            );
        }
    }
}

fn opt_str(v: Option<&str>) -> Value {
    v.map_or(Value::Null, Value::from)
}

/// The snapshot as a JSON object (key order as documented in docs/reference/json.md).
pub fn to_value(s: &Snapshot) -> Value {
    let mut m = Map::new();
    m.insert("schema".into(), SNAPSHOT_SCHEMA.into());
    m.insert("job_id".into(), s.job_id.clone().into());
    m.insert("step".into(), opt_str(s.step.as_deref()));
    m.insert("job_name".into(), opt_str(s.job_name.as_deref()));
    m.insert("user".into(), opt_str(s.user.as_deref()));
    m.insert("node".into(), opt_str(s.node.as_deref()));
    m.insert("source".into(), s.source.as_str().into());
    m.insert(
        "measured_by".into(),
        opt_str(s.measured_by.map(|m| m.as_str())),
    );
    m.insert("state".into(), s.state.as_str().into());
    m.insert(
        "reading_unix_ms".into(),
        s.reading_unix_ms.map_or(Value::Null, Value::from),
    );
    m.insert(
        "interval_seconds".into(),
        s.interval_seconds.map_or(Value::Null, Value::from),
    );
    m.insert(
        "peaks_cover".into(),
        if s.sstat.is_some() {
            "running_steps"
        } else if s.peaks_cover_whole_job {
            "whole_job"
        } else {
            "since_watch_start"
        }
        .into(),
    );

    let mut cpu = cpu_map(&s.cpu);
    if let Some(st) = &s.sstat {
        put(&mut cpu, "sstat_cpu_seconds_total", &st.cpu_seconds_total);
    }
    m.insert("cpu".into(), cpu.into());

    let mut mm = memory_map(&s.memory);
    if let Some(st) = &s.sstat {
        put(&mut mm, "sstat_max_rss_bytes", &st.max_rss_bytes);
        mm.insert(
            "sstat_max_rss_node".into(),
            opt_str(st.max_rss_node.as_deref()),
        );
    }
    m.insert("memory".into(), mm.into());

    let mut t = Map::new();
    put(&mut t, "elapsed_seconds", &s.time.elapsed_seconds);
    put(&mut t, "limit_seconds", &s.time.limit_seconds);
    put(&mut t, "ends_at", &s.time.ends_at);
    m.insert("time".into(), t.into());

    m.insert(
        "gpus".into(),
        Value::Array(s.gpus.iter().map(gpu_value).collect()),
    );
    // Live efficiencies: the rules are analysis::efficiency's; an sstat summary has no
    // live figures, so every one is null with its reason there.
    m.insert(
        "efficiency".into(),
        serde_json::to_value(crate::analysis::efficiency::compute(&s.efficiency_inputs()))
            .unwrap_or(Value::Null),
    );
    ledger_keys(&mut m, s);
    progress_keys(&mut m, s);
    m.insert(
        "nodes_reporting".into(),
        s.nodes_reporting.map_or(Value::Null, Value::from),
    );
    m.insert(
        "nodes".into(),
        Value::Array(s.nodes.iter().map(node_value).collect()),
    );
    if let Some(st) = &s.sstat {
        m.insert("sstat_note".into(), SSTAT_NOTE.into());
        m.insert(
            "sstat_steps".into(),
            Value::Array(st.steps.iter().map(sstat_step_value).collect()),
        );
    }
    Value::Object(m)
}

/// `ledger`: the same object as the report's `ledger` (`analysis::ledger`, serialized the
/// same way), or null with `ledger_reason`; `ledger_covers` says it is the job's so far
/// (to its `to_unix_ms`) while the job runs.
fn ledger_keys(m: &mut Map<String, Value>, s: &Snapshot) {
    match s.ledger.get() {
        Some(l) => {
            m.insert(
                "ledger".into(),
                serde_json::to_value(l).unwrap_or(Value::Null),
            );
            let covers = match s.state {
                JobState::Ended => "whole_recording",
                _ => "so_far",
            };
            m.insert("ledger_covers".into(), covers.into());
        }
        None => {
            m.insert("ledger".into(), Value::Null);
            m.insert(
                "ledger_reason".into(),
                s.ledger.reason.as_deref().unwrap_or("not computed").into(),
            );
            m.insert("ledger_covers".into(), Value::Null);
        }
    }
}

/// `phases` (absent without a mark) and `throughput` (null without one): the report's
/// objects, serialized the same way.
fn progress_keys(m: &mut Map<String, Value>, s: &Snapshot) {
    if !s.phases.is_empty() {
        m.insert(
            "phases".into(),
            serde_json::to_value(&s.phases).unwrap_or(Value::Null),
        );
    }
    m.insert(
        "throughput".into(),
        serde_json::to_value(&s.throughput).unwrap_or(Value::Null),
    );
}

/// Beside every `sstat_summary` snapshot: what its figures are and are not.
pub const SSTAT_NOTE: &str = "sstat figures: totals and averages over the life of the job's running steps (ended steps not included), not live readings";

fn sstat_step_value(st: &StepStat) -> Value {
    let num_u = |v: Option<u64>| v.map_or(Value::Null, Value::from);
    let num_f = |v: Option<f64>| v.and_then(|v| v.to_json()).unwrap_or(Value::Null);
    let mut m = Map::new();
    m.insert("step_id".into(), st.step_id.clone().into());
    m.insert("ave_cpu_seconds".into(), num_f(st.ave_cpu_seconds));
    m.insert("cpu_seconds_total".into(), num_f(st.cpu_seconds()));
    m.insert("task_count".into(), num_u(st.ntasks.map(u64::from)));
    m.insert("max_rss_bytes".into(), num_u(st.max_rss_bytes));
    m.insert("max_rss_node".into(), opt_str(st.max_rss_node.as_deref()));
    m.insert("ave_rss_bytes".into(), num_u(st.ave_rss_bytes));
    m.insert("tasks_max_rss_sum_bytes".into(), num_u(st.tres_mem_bytes));
    m.insert("max_disk_read_bytes".into(), num_u(st.max_disk_read_bytes));
    m.insert(
        "max_disk_write_bytes".into(),
        num_u(st.max_disk_write_bytes),
    );
    Value::Object(m)
}

/// `cpu` of a snapshot or of one node.
fn cpu_map(c: &CpuSnapshot) -> Map<String, Value> {
    let mut m = Map::new();
    put(&mut m, "usage_seconds_total", &c.usage_seconds_total);
    put(&mut m, "cores_allocated", &c.cores_allocated);
    put(&mut m, "effective_cores", &c.effective_cores);
    put(&mut m, "peak_effective_cores", &c.peak_effective_cores);
    m
}

/// `memory` of a snapshot or of one node.
fn memory_map(mem: &MemorySnapshot) -> Map<String, Value> {
    let mut m = Map::new();
    put(&mut m, "working_set_bytes", &mem.working_set_bytes);
    put(&mut m, "cache_bytes", &mem.cache_bytes);
    put(&mut m, "limit_bytes", &mem.limit_bytes);
    put(&mut m, "limit_used_percent", &mem.percent_of_limit);
    put(
        &mut m,
        "peak_working_set_bytes",
        &mem.peak_working_set_bytes,
    );
    put(&mut m, "lifetime_peak_bytes", &mem.lifetime_peak_bytes);
    let guard = Reading::from_option(mem.guard.map(|g| guard_word(g).to_string()), || {
        "needs both the working set and a limit".into()
    });
    put(&mut m, "guard", &guard);
    m
}

/// One node of the job: its own readings, keyed as the job-level ones.
fn node_value(n: &NodeSnapshot) -> Value {
    let mut m = Map::new();
    m.insert("node".into(), n.node.clone().into());
    m.insert("reporting".into(), n.reporting.into());
    m.insert("reason".into(), opt_str(n.reason.as_deref()));
    m.insert("source".into(), opt_str(n.source.map(|s| s.as_str())));
    m.insert(
        "reading_unix_ms".into(),
        n.reading_unix_ms.map_or(Value::Null, Value::from),
    );
    m.insert("cpu".into(), cpu_map(&n.cpu).into());
    m.insert("memory".into(), memory_map(&n.memory).into());
    m.insert("gpus".into(), n.gpus.into());
    Value::Object(m)
}

fn gpu_value(g: &GpuSnapshot) -> Value {
    let mut m = Map::new();
    if let Some(n) = &g.node {
        m.insert("node".into(), n.clone().into());
    }
    m.insert(
        "cuda_index".into(),
        g.cuda_index.map_or(Value::Null, Value::from),
    );
    m.insert(
        "nvml_index".into(),
        g.nvml_index.map_or(Value::Null, Value::from),
    );
    m.insert("uuid".into(), g.uuid.clone().into());
    m.insert("name".into(), opt_str(g.name.as_deref()));
    let state = Reading::from_option(g.state.map(|s| s.as_str().to_string()), || {
        "utilization unreadable".into()
    });
    put(&mut m, "state", &state);
    put(&mut m, "utilization_percent", &g.utilization_percent);
    put(&mut m, "memory_used_bytes", &g.memory_used_bytes);
    put(&mut m, "memory_total_bytes", &g.memory_total_bytes);
    put(&mut m, "power_watts", &g.power_watts);
    put(&mut m, "power_limit_watts", &g.power_limit_watts);
    put(&mut m, "temperature_celsius", &g.temperature_celsius);
    put(&mut m, "sm_clock_mhz", &g.sm_clock_mhz);
    put(&mut m, "sm_clock_max_mhz", &g.sm_clock_max_mhz);
    put(&mut m, "throttle_reasons", &g.throttle_reasons);
    m.insert(
        "xid_events".into(),
        Value::Array(
            g.xid_events
                .iter()
                .map(|e| {
                    let mut x = Map::new();
                    x.insert("t_unix_ms".into(), e.t_unix_ms.into());
                    x.insert("xid".into(), e.xid.into());
                    x.insert("meaning".into(), opt_str(e.meaning.as_deref()));
                    Value::Object(x)
                })
                .collect(),
        ),
    );
    Value::Object(m)
}

/// One line of JSON (for `--once --json` and each line of a `.jsonl` log).
pub fn to_line(s: &Snapshot) -> String {
    to_value(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{from_rows, JobFacts, SnapshotSource};

    #[test]
    fn non_finite_becomes_null_with_reason() {
        let mut s = from_rows(
            SnapshotSource::PluginFile,
            None,
            &JobFacts::default(),
            &[],
            true,
        );
        s.cpu.effective_cores = Reading::ok(f64::NAN);
        s.cpu.peak_effective_cores = Reading::ok(f64::INFINITY);
        let line = to_line(&s);
        assert!(!line.contains("NaN") && !line.contains("inf"), "{line}");
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["cpu"]["effective_cores"], Value::Null);
        assert_eq!(v["cpu"]["effective_cores_reason"], "not a finite number");
        assert_eq!(v["memory"]["working_set_bytes"], Value::Null);
        assert_eq!(v["memory"]["working_set_bytes_reason"], "no reading yet");
        assert_eq!(v["schema"], SNAPSHOT_SCHEMA);
    }
}

#[cfg(test)]
mod sstat_keys {
    use serde_json::Value;

    use crate::slurm::sstat;
    use crate::snapshot::{from_sstat, JobFacts};

    #[test]
    fn sstat_figures_have_their_own_keys_and_the_live_ones_are_null() {
        let summary = sstat::parse("9.batch|00:01:00|2G|n1|1G|2|5M|0\n");
        let s = from_sstat(&JobFacts::default(), &summary, 5);
        let line = super::to_line(&s);
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["source"], "sstat_summary");
        assert_eq!(v["peaks_cover"], "running_steps");
        assert_eq!(v["cpu"]["effective_cores"], Value::Null);
        assert_eq!(
            v["cpu"]["effective_cores_reason"],
            "sstat gives lifetime totals, not a rate"
        );
        assert_eq!(v["memory"]["working_set_bytes"], Value::Null);
        assert_eq!(
            v["memory"]["working_set_bytes_reason"],
            "sstat has no page-cache-free figure"
        );
        assert_eq!(v["cpu"]["sstat_cpu_seconds_total"], 120.0);
        assert_eq!(v["memory"]["sstat_max_rss_bytes"], 2u64 << 30);
        assert_eq!(v["memory"]["sstat_max_rss_node"], "n1");
        assert!(v["sstat_note"].as_str().unwrap().contains("not live"));
        let step = &v["sstat_steps"][0];
        assert_eq!(step["step_id"], "9.batch");
        assert_eq!(step["task_count"], 2);
        assert_eq!(step["max_disk_read_bytes"], 5u64 << 20);
        // A live snapshot has none of these keys.
        let live = crate::snapshot::from_rows(
            crate::snapshot::SnapshotSource::Direct,
            None,
            &JobFacts::default(),
            &[],
            false,
        );
        let l = super::to_line(&live);
        assert!(!l.contains("sstat"), "{l}");
        // The CSV row carries sstat's columns at its end.
        let h = crate::render::csv::header(&s);
        let r = crate::render::csv::row(&s);
        assert!(h.ends_with(",sstat_cpu_seconds_total,sstat_max_rss_bytes,sstat_max_rss_node"));
        assert!(r.ends_with(",120,2147483648,n1"), "{r}");
        assert!(r.contains(",sstat_summary,"), "{r}");
    }
}

#[cfg(test)]
mod contract {
    //! The JSON contract, parsed into structs the test defines (not the library's own), from
    //! the 4-GPU fixture snapshot.
    use serde::Deserialize;
    use serde_json::Value;

    use crate::snapshot::{Reading, Snapshot};

    #[derive(Deserialize)]
    struct Doc {
        schema: u32,
        job_id: String,
        source: String,
        state: String,
        cpu: Cpu,
        memory: Memory,
        time: Time,
        gpus: Vec<Gpu>,
    }
    #[derive(Deserialize)]
    struct Cpu {
        usage_seconds_total: f64,
        cores_allocated: u32,
        effective_cores: f64,
        peak_effective_cores: f64,
    }
    #[derive(Deserialize)]
    struct Memory {
        working_set_bytes: u64,
        cache_bytes: u64,
        limit_bytes: u64,
        peak_working_set_bytes: u64,
        lifetime_peak_bytes: u64,
        limit_used_percent: f64,
        guard: String,
    }
    #[derive(Deserialize)]
    struct Time {
        elapsed_seconds: u64,
        limit_seconds: u64,
        ends_at: String,
    }
    #[derive(Deserialize)]
    struct Gpu {
        cuda_index: Option<u32>,
        nvml_index: Option<u32>,
        uuid: String,
        state: Option<String>,
        utilization_percent: Option<f64>,
        memory_used_bytes: Option<u64>,
        memory_total_bytes: Option<u64>,
        power_watts: Option<f64>,
        power_watts_reason: Option<String>,
        power_limit_watts: Option<f64>,
        temperature_celsius: Option<f64>,
        sm_clock_mhz: Option<u32>,
        sm_clock_max_mhz: Option<u32>,
        throttle_reasons: Option<Vec<String>>,
    }

    fn fixture(name: &str) -> Snapshot {
        let path = format!(
            "{}/tests/fixtures/snapshots/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    #[test]
    fn four_gpu_snapshot_as_json() {
        let line = super::to_line(&fixture("four_gpus"));
        let d: Doc = serde_json::from_str(&line).unwrap();
        assert_eq!(d.schema, crate::snapshot::SNAPSHOT_SCHEMA);
        assert_eq!(
            (d.job_id.as_str(), d.source.as_str()),
            ("4343", "plugin_file")
        );
        assert_eq!(d.state, "running");
        assert_eq!(d.cpu.cores_allocated, 32);
        assert_eq!(d.cpu.effective_cores, 7.9);
        assert_eq!(d.cpu.usage_seconds_total, 1234.5);
        assert_eq!(d.cpu.peak_effective_cores, 3.92);
        assert_eq!(d.memory.guard, "ok");
        assert_eq!(d.memory.limit_bytes, 8 << 30);
        assert!(d.memory.working_set_bytes < d.memory.peak_working_set_bytes);
        assert!(d.memory.peak_working_set_bytes < d.memory.lifetime_peak_bytes);
        assert_eq!(d.memory.cache_bytes, 512 << 20);
        assert_eq!(d.memory.limit_used_percent, 28.125);
        assert_eq!(
            (d.time.elapsed_seconds, d.time.limit_seconds),
            (3725, 14400)
        );
        assert_eq!(d.time.ends_at, "2023-11-14T23:08:20");
        assert_eq!(d.gpus.len(), 4);
        let g0 = &d.gpus[0];
        assert_eq!((g0.cuda_index, g0.nvml_index), (Some(0), Some(2)));
        assert!(g0.uuid.starts_with("GPU-"));
        assert_eq!(g0.state.as_deref(), Some("active"));
        assert_eq!(g0.utilization_percent, Some(87.0));
        assert_eq!(g0.memory_used_bytes, Some(30 << 30));
        assert_eq!(g0.memory_total_bytes, Some(40 << 30));
        assert_eq!(g0.power_watts, Some(250.0));
        assert_eq!(g0.power_limit_watts, Some(400.0));
        assert_eq!(g0.temperature_celsius, Some(64.0));
        assert_eq!(
            (g0.sm_clock_mhz, g0.sm_clock_max_mhz),
            (Some(1410), Some(1410))
        );
        assert_eq!(g0.throttle_reasons.as_deref(), Some(&[][..]));
        assert_eq!(
            d.gpus[1].throttle_reasons.as_deref(),
            Some(&["sw_power_cap".to_string(), "hw_slowdown".to_string()][..])
        );
        // Unreadable power: null with its reason, never 0.
        let g2 = &d.gpus[2];
        assert_eq!(g2.power_watts, None);
        assert_eq!(
            g2.power_watts_reason.as_deref(),
            Some("not supported on this card")
        );
        assert_eq!(g2.state.as_deref(), Some("idle"));
        assert!(line.contains("\"power_watts\":null"));
    }

    #[test]
    fn live_efficiencies_with_their_basis() {
        let v = super::to_value(&fixture("four_gpus"));
        let e = &v["efficiency"];
        let cpu = e["cpu_efficiency_percent"].as_f64().unwrap();
        assert!(
            (cpu - 1234.5 * 100.0 / (3725.0 * 32.0)).abs() < 1e-4,
            "{e:#}"
        );
        assert!(e["cpu_efficiency_basis"]
            .as_str()
            .unwrap()
            .contains("32 cores allocated"));
        let t = e["time_efficiency_percent"].as_f64().unwrap();
        assert!((t - 3725.0 * 100.0 / 14400.0).abs() < 1e-4, "{e:#}");
        assert!(e["memory_efficiency_percent"].as_f64().unwrap() > 28.125);
        assert_eq!(e["gpus"][0]["utilization_percent"], 87.0);
        assert_eq!(e["gpus"][0]["memory_efficiency_percent"], 75.0);
        // One card's power is unreadable, not its utilization: the overall figure stands.
        assert!(e["gpu_utilization_percent"].is_number(), "{e:#}");
        assert!(e.get("memory_max_rss_efficiency_percent").is_none());
    }

    /// `throughput` is the report's object, key for key, or null; `phases` the report's
    /// objects, absent without a mark.
    #[test]
    fn throughput_and_phases_are_the_reports_objects() {
        use crate::analysis::progress::Tool;
        use crate::analysis::throughput::{RatePoint, Throughput};
        let mut s = fixture("four_gpus");
        let v = super::to_value(&s);
        assert_eq!(v["throughput"], Value::Null);
        assert!(v.get("throughput").is_some() && v.get("phases").is_none());
        let t = Throughput {
            stream: "stdout+stderr".into(),
            tool: Tool::Tqdm,
            unit: "it/s".into(),
            points: vec![RatePoint {
                from_unix_ms: 1000,
                to_unix_ms: 2000,
                per_second: 10.0,
            }],
            slowdowns: Vec::new(),
            placed_within_seconds: 0.75,
        };
        s.throughput = Some(t.clone());
        s.phases = vec![crate::analysis::phases::Phase {
            label: "epoch 1".into(),
            started_unix_ms: 0,
            ended_unix_ms: 2000,
            seconds: 2.0,
            cpu_seconds: Some(1.0),
            gpu_seconds: None,
            gpu_energy_joules: None,
            peak_working_set_bytes: None,
            exact: true,
            gpu_busy_percent: None,
            rate_per_second: None,
        }];
        let v = super::to_value(&s);
        assert_eq!(v["throughput"], serde_json::to_value(&t).unwrap());
        assert_eq!(v["throughput"]["tool"], "tqdm");
        assert_eq!(v["phases"][0]["label"], "epoch 1");
        // A hop's snapshot carries it back whole.
        let back: Snapshot = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.throughput, Some(t));
    }

    /// Every top-level key of `--once --json` is in docs/reference/json.md's live-view
    /// table: in the key column, or named in a row's meaning (`ledger_reason`).
    #[test]
    fn every_live_key_is_documented() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/reference/json.md"
        ))
        .unwrap();
        let section = doc
            .split("## The live view: JSON")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("docs/reference/json.md has the live view's section");
        let ticked: Vec<&str> = section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .flat_map(|l| l.split('`').skip(1).step_by(2))
            .map(|t| t.split(['.', '[']).next().unwrap_or(t))
            .collect();
        let mut s = fixture("four_gpus");
        s.throughput = Some(crate::analysis::throughput::Throughput {
            stream: "stdout".into(),
            tool: crate::analysis::progress::Tool::Tqdm,
            unit: "it/s".into(),
            points: Vec::new(),
            slowdowns: Vec::new(),
            placed_within_seconds: 0.75,
        });
        let mut no_ledger = fixture("four_gpus");
        no_ledger.ledger = Reading::missing("why");
        for v in [super::to_value(&s), super::to_value(&no_ledger)] {
            for k in v.as_object().unwrap().keys() {
                assert!(
                    ticked.contains(&k.as_str()),
                    "--once --json carries `{k}`, which docs/reference/json.md does not list"
                );
            }
        }
    }

    #[test]
    fn the_ledger_is_the_reports_object_or_null_with_why() {
        let v = super::to_value(&fixture("four_gpus"));
        assert_eq!(v["ledger_covers"], "so_far");
        let l = &v["ledger"];
        assert_eq!(l["gpu_held_seconds"]["power"], 2435.0);
        assert_eq!(
            l["stall_seconds"]["memory_some"],
            Value::Null,
            "v1: unknown, not 0"
        );
        let ledger = fixture("four_gpus").ledger.value.unwrap();
        assert_eq!(
            *l,
            serde_json::to_value(ledger).unwrap(),
            "serialized as the report's"
        );
        let mut s = fixture("cpu_only");
        s.ledger = Reading::missing("direct readings began when this view started");
        let v = super::to_value(&s);
        assert_eq!(v["ledger"], Value::Null);
        assert_eq!(v["ledger_covers"], Value::Null);
        assert_eq!(
            v["ledger_reason"],
            "direct readings began when this view started"
        );
    }

    #[test]
    fn keys_carry_their_units() {
        let v = super::to_value(&fixture("four_gpus"));
        fn walk(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::Object(m) => {
                    for (k, v) in m {
                        if v.is_number() {
                            out.push(k.clone());
                        }
                        walk(v, out);
                    }
                }
                serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let mut keys = Vec::new();
        // `ledger` is the report's object, carried key for key (its units are in its parents'
        // names: `stall_seconds.memory_some`, `gpu_held_seconds.power`): not this layout's.
        let mut v = v;
        v.as_object_mut().unwrap().remove("ledger");
        walk(&v, &mut keys);
        let units = [
            "_bytes", "_seconds", "_percent", "_watts", "_celsius", "_mhz", "_ms", "_total",
            "_cores", "_index",
        ];
        for k in keys {
            assert!(
                k == "schema" || units.iter().any(|u| k.ends_with(u)) || k == "cores_allocated",
                "number under a key without a unit: {k}"
            );
        }
    }
}
