//! Efficiencies: what share of its allocation a job used — CPU, memory, time, GPUs — each
//! with the figures it rests on (`basis`), or `None` with the reason a part is unknown.
//!
//! One owner for the rules: the report and the live view fill [`Inputs`] from what they
//! know and call [`compute`]; the renderers only print. A part that is unknown makes the
//! efficiency unknown (never 0, never a partial figure presented as the whole).

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;

use crate::units::bytes;

/// A figure with where it came from (`"recording"`, `"sacct TotalCPU summed over the steps"`).
#[derive(Debug, Clone, PartialEq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: String,
}

impl<T> Sourced<T> {
    pub fn new(value: T, source: impl Into<String>) -> Sourced<T> {
        Sourced {
            value,
            source: source.into(),
        }
    }
}

/// One card's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuInput {
    /// `cuda:0`.
    pub label: String,
    pub node: Option<String>,
    /// Mean (report) or current (live view) utilization.
    pub utilization_percent: Option<f64>,
    /// The memory used on the card that counts as the job's, and what it is.
    pub memory_used: Option<Sourced<u64>>,
    pub memory_total_bytes: Option<u64>,
}

/// What the efficiencies are computed from; `None` where unknown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inputs {
    pub cpu_seconds: Option<Sourced<f64>>,
    pub elapsed_seconds: Option<f64>,
    pub cores_allocated: Option<f64>,
    /// The memory used on the busiest node (working-set peak, or sacct's tasks' sum).
    pub memory_used: Option<Sourced<u64>>,
    /// The limit per node it is measured against (the cgroup's, else the allocation).
    pub memory_limit: Option<Sourced<u64>>,
    /// sacct's MaxRSS (the largest task) and the request per node: seff's figure.
    pub max_rss_bytes: Option<u64>,
    pub memory_request_bytes: Option<u64>,
    pub timelimit_seconds: Option<f64>,
    /// The time limit is UNLIMITED (as opposed to unknown).
    pub timelimit_unlimited: bool,
    /// Why the time limit is unknown, when it is (e.g. "sacct not available").
    pub timelimit_unknown_reason: Option<String>,
    /// The job's cards; `gpus_expected` > 0 with no cards means readings are missing.
    pub gpus: Vec<GpuInput>,
    pub gpus_expected: Option<u64>,
}

/// One efficiency: the percentage, what it was computed from, or why it is unknown.
#[derive(Debug, Clone, PartialEq)]
pub struct Efficiency {
    pub percent: Option<f64>,
    pub basis: String,
    pub reason: Option<String>,
}

impl Efficiency {
    fn known(percent: f64, basis: String) -> Efficiency {
        if percent.is_finite() {
            Efficiency {
                percent: Some(percent),
                basis,
                reason: None,
            }
        } else {
            Efficiency::unknown(basis, "not a finite number")
        }
    }

    fn unknown(basis: impl Into<String>, reason: impl Into<String>) -> Efficiency {
        Efficiency {
            percent: None,
            basis: basis.into(),
            reason: Some(reason.into()),
        }
    }

    /// `93 % (basis)` or `n/a (reason)`, for text output.
    pub fn describe(&self) -> String {
        match (self.percent, &self.reason) {
            // A small share keeps a decimal: 0.3 % is not "0 %".
            (Some(p), _) if p < 10.0 => format!("{p:.1} % ({})", self.basis),
            (Some(p), _) => format!("{p:.0} % ({})", self.basis),
            (None, Some(r)) => format!("n/a ({r})"),
            (None, None) => "n/a".into(),
        }
    }

    fn put<M: SerializeMap>(&self, m: &mut M, key: &str, basis_key: &str) -> Result<(), M::Error> {
        m.serialize_entry(key, &self.percent.map(round6))?;
        if self.percent.is_none() {
            m.serialize_entry(
                &format!("{key}_reason"),
                self.reason.as_deref().unwrap_or("unknown"),
            )?;
        }
        m.serialize_entry(basis_key, &self.basis)
    }
}

fn round6(v: f64) -> f64 {
    (v * 1e6).round() / 1e6
}

/// One card's utilization and memory efficiency.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuEfficiency {
    pub label: String,
    pub node: Option<String>,
    pub utilization: Efficiency,
    pub memory: Efficiency,
}

impl Serialize for GpuEfficiency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("label", &self.label)?;
        if let Some(n) = &self.node {
            m.serialize_entry("node", n)?;
        }
        self.utilization
            .put(&mut m, "utilization_percent", "utilization_basis")?;
        self.memory.put(
            &mut m,
            "memory_efficiency_percent",
            "memory_efficiency_basis",
        )?;
        m.end()
    }
}

/// Every efficiency of a job. Serialized flat, units in the key names:
/// `cpu_efficiency_percent`, `cpu_efficiency_basis` (and `cpu_efficiency_percent_reason`
/// when null), and so on; `gpus[]` per card.
#[derive(Debug, Clone, PartialEq)]
pub struct Efficiencies {
    pub cpu: Efficiency,
    pub memory: Efficiency,
    /// sacct's MaxRSS ÷ the request (what seff-style tools print); `None` without sacct.
    pub memory_max_rss: Option<Efficiency>,
    pub time: Efficiency,
    pub gpu_utilization: Efficiency,
    pub gpu_memory: Efficiency,
    pub gpus: Vec<GpuEfficiency>,
}

impl Serialize for Efficiencies {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        self.cpu
            .put(&mut m, "cpu_efficiency_percent", "cpu_efficiency_basis")?;
        self.memory.put(
            &mut m,
            "memory_efficiency_percent",
            "memory_efficiency_basis",
        )?;
        if let Some(e) = &self.memory_max_rss {
            e.put(
                &mut m,
                "memory_max_rss_efficiency_percent",
                "memory_max_rss_efficiency_basis",
            )?;
        }
        self.time
            .put(&mut m, "time_efficiency_percent", "time_efficiency_basis")?;
        self.gpu_utilization
            .put(&mut m, "gpu_utilization_percent", "gpu_utilization_basis")?;
        self.gpu_memory.put(
            &mut m,
            "gpu_memory_efficiency_percent",
            "gpu_memory_efficiency_basis",
        )?;
        m.serialize_entry("gpus", &self.gpus)?;
        m.end()
    }
}

/// The efficiencies from what is known.
pub fn compute(i: &Inputs) -> Efficiencies {
    Efficiencies {
        cpu: cpu(i),
        memory: memory(i),
        memory_max_rss: memory_max_rss(i),
        time: time(i),
        gpu_utilization: gpu_utilization(i),
        gpu_memory: gpu_memory(i),
        gpus: i.gpus.iter().map(card).collect(),
    }
}

/// CPU seconds ÷ (elapsed × cores allocated).
fn cpu(i: &Inputs) -> Efficiency {
    const RULE: &str = "CPU seconds ÷ (elapsed × cores allocated)";
    let Some(c) = &i.cpu_seconds else {
        return Efficiency::unknown(RULE, "CPU seconds unknown");
    };
    let Some(e) = i.elapsed_seconds.filter(|e| *e > 0.0) else {
        return Efficiency::unknown(RULE, "elapsed time unknown or zero");
    };
    let Some(n) = i.cores_allocated.filter(|n| *n > 0.0) else {
        return Efficiency::unknown(RULE, "cores allocated unknown");
    };
    Efficiency::known(
        c.value * 100.0 / (e * n),
        format!(
            "{:.1} CPU-s ({}) ÷ ({e:.0} s elapsed × {n:.0} cores allocated)",
            c.value, c.source
        ),
    )
}

/// Memory used on the busiest node ÷ the limit per node.
fn memory(i: &Inputs) -> Efficiency {
    const RULE: &str = "memory used on the busiest node ÷ limit per node";
    let Some(u) = &i.memory_used else {
        return Efficiency::unknown(RULE, "no memory figure (no recording, no sacct figure)");
    };
    let Some(l) = i.memory_limit.as_ref().filter(|l| l.value > 0) else {
        return Efficiency::unknown(RULE, "memory limit unknown");
    };
    Efficiency::known(
        u.value as f64 * 100.0 / l.value as f64,
        format!(
            "{} ({}) ÷ {} ({})",
            bytes(u.value),
            u.source,
            bytes(l.value),
            l.source
        ),
    )
}

/// sacct's MaxRSS ÷ request per node: one task's peak, the figure seff-style tools show.
fn memory_max_rss(i: &Inputs) -> Option<Efficiency> {
    let rss = i.max_rss_bytes?;
    const RULE: &str = "sacct MaxRSS (the largest single task) ÷ memory requested per node, as seff-style tools show it";
    Some(match i.memory_request_bytes.filter(|r| *r > 0) {
        Some(r) => Efficiency::known(
            rss as f64 * 100.0 / r as f64,
            format!(
                "sacct MaxRSS {} (the largest single task) ÷ {} requested per node, as seff-style tools show it",
                bytes(rss),
                bytes(r)
            ),
        ),
        None => Efficiency::unknown(RULE, "memory request unknown"),
    })
}

/// Elapsed ÷ time limit.
fn time(i: &Inputs) -> Efficiency {
    const RULE: &str = "elapsed ÷ time limit";
    let Some(e) = i.elapsed_seconds else {
        return Efficiency::unknown(RULE, "elapsed time unknown");
    };
    if i.timelimit_unlimited {
        return Efficiency::unknown(RULE, "no time limit (UNLIMITED)");
    }
    let Some(l) = i.timelimit_seconds.filter(|l| *l > 0.0) else {
        return Efficiency::unknown(
            RULE,
            i.timelimit_unknown_reason
                .clone()
                .unwrap_or_else(|| "time limit unknown".into()),
        );
    };
    Efficiency::known(e * 100.0 / l, format!("{e:.0} s elapsed ÷ {l:.0} s limit"))
}

fn no_gpus(i: &Inputs, rule: &str) -> Option<Efficiency> {
    if !i.gpus.is_empty() {
        return None;
    }
    Some(match i.gpus_expected {
        Some(n) if n > 0 => Efficiency::unknown(rule, format!("{n} GPUs allocated, no readings")),
        _ => Efficiency::unknown(rule, "the job has no GPUs"),
    })
}

/// The mean over the cards of each card's utilization: unknown if any card's is.
fn gpu_utilization(i: &Inputs) -> Efficiency {
    const RULE: &str = "mean over the job's cards of each card's utilization";
    if let Some(e) = no_gpus(i, RULE) {
        return e;
    }
    let mut sum = 0.0;
    for g in &i.gpus {
        match g.utilization_percent {
            Some(u) => sum += u,
            None => {
                return Efficiency::unknown(RULE, format!("{}: utilization unreadable", g.label))
            }
        }
    }
    Efficiency::known(
        sum / i.gpus.len() as f64,
        format!("mean of {} cards' utilization", i.gpus.len()),
    )
}

/// The job's card memory summed ÷ the cards' memory summed: unknown if any part is.
fn gpu_memory(i: &Inputs) -> Efficiency {
    const RULE: &str = "the job's memory on its cards ÷ the cards' memory";
    if let Some(e) = no_gpus(i, RULE) {
        return e;
    }
    let (mut used, mut total) = (0u64, 0u64);
    let mut source = None;
    for g in &i.gpus {
        let (Some(u), Some(t)) = (&g.memory_used, g.memory_total_bytes.filter(|t| *t > 0)) else {
            return Efficiency::unknown(RULE, format!("{}: memory figure unknown", g.label));
        };
        used += u.value;
        total += t;
        source.get_or_insert_with(|| u.source.clone());
    }
    Efficiency::known(
        used as f64 * 100.0 / total as f64,
        format!(
            "{} ({}) ÷ {} over {} cards",
            bytes(used),
            source.unwrap_or_default(),
            bytes(total),
            i.gpus.len()
        ),
    )
}

fn card(g: &GpuInput) -> GpuEfficiency {
    let utilization = match g.utilization_percent {
        Some(u) => Efficiency::known(u, "NVML utilization (share of time a kernel ran)".into()),
        None => Efficiency::unknown("NVML utilization", "utilization unreadable"),
    };
    let memory = match (&g.memory_used, g.memory_total_bytes.filter(|t| *t > 0)) {
        (Some(u), Some(t)) => Efficiency::known(
            u.value as f64 * 100.0 / t as f64,
            format!("{} ({}) ÷ {}", bytes(u.value), u.source, bytes(t)),
        ),
        (None, _) => Efficiency::unknown("card memory used ÷ card memory", "memory used unknown"),
        (_, None) => Efficiency::unknown("card memory used ÷ card memory", "card size unknown"),
    };
    GpuEfficiency {
        label: g.label.clone(),
        node: g.node.clone(),
        utilization,
        memory,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn base() -> Inputs {
        Inputs {
            cpu_seconds: Some(Sourced::new(300.0, "recording")),
            elapsed_seconds: Some(200.0),
            cores_allocated: Some(2.0),
            memory_used: Some(Sourced::new(GIB, "working-set peak")),
            memory_limit: Some(Sourced::new(4 * GIB, "cgroup limit")),
            max_rss_bytes: None,
            memory_request_bytes: Some(4 * GIB),
            timelimit_seconds: Some(400.0),
            ..Inputs::default()
        }
    }

    #[test]
    fn cpu_memory_time() {
        let e = compute(&base());
        assert_eq!(e.cpu.percent, Some(75.0));
        assert!(e.cpu.basis.contains("recording"), "{}", e.cpu.basis);
        assert_eq!(e.memory.percent, Some(25.0));
        assert_eq!(e.time.percent, Some(50.0));
        assert_eq!(e.memory_max_rss, None);
        assert_eq!(e.gpu_utilization.percent, None);
        assert_eq!(
            e.gpu_utilization.reason.as_deref(),
            Some("the job has no GPUs")
        );
    }

    #[test]
    fn unknown_parts_are_null_with_a_reason_never_zero() {
        let mut i = base();
        i.cpu_seconds = None;
        i.memory_limit = None;
        i.timelimit_unlimited = true;
        i.elapsed_seconds = Some(0.0);
        let e = compute(&i);
        assert_eq!(e.cpu.percent, None);
        assert!(e.cpu.reason.is_some());
        assert_eq!(e.memory.percent, None);
        assert_eq!(e.memory.reason.as_deref(), Some("memory limit unknown"));
        assert_eq!(e.time.reason.as_deref(), Some("no time limit (UNLIMITED)"));
        let v = serde_json::to_value(&e).unwrap();
        assert!(v["cpu_efficiency_percent"].is_null());
        assert!(v["cpu_efficiency_percent_reason"].is_string());
        assert!(v.get("memory_max_rss_efficiency_percent").is_none());
    }

    #[test]
    fn max_rss_beside_the_sum() {
        let mut i = base();
        i.memory_used = Some(Sourced::new(8 * 2 * GIB, "sacct: sum of 8 tasks' peaks"));
        i.memory_limit = Some(Sourced::new(16 * GIB, "allocation per node"));
        i.max_rss_bytes = Some(2 * GIB);
        i.memory_request_bytes = Some(16 * GIB);
        let e = compute(&i);
        assert_eq!(e.memory.percent, Some(100.0));
        assert_eq!(e.memory_max_rss.unwrap().percent, Some(12.5));
    }

    #[test]
    fn gpus_per_card_and_overall() {
        let mut i = base();
        let card = |l: &str, u: Option<f64>, m: Option<u64>| GpuInput {
            label: l.into(),
            node: None,
            utilization_percent: u,
            memory_used: m.map(|m| Sourced::new(m, "the job's processes, peak")),
            memory_total_bytes: Some(80 * GIB),
        };
        i.gpus = vec![
            card("cuda:0", Some(92.0), Some(20 * GIB)),
            card("cuda:1", Some(93.0), Some(20 * GIB)),
        ];
        let e = compute(&i);
        assert_eq!(e.gpu_utilization.percent, Some(92.5));
        assert_eq!(e.gpu_memory.percent, Some(25.0));
        assert_eq!(e.gpus[1].utilization.percent, Some(93.0));
        i.gpus[1].utilization_percent = None;
        let e = compute(&i);
        assert_eq!(e.gpu_utilization.percent, None);
        assert_eq!(e.gpus[0].memory.percent, Some(25.0));
        i.gpus.clear();
        i.gpus_expected = Some(2);
        let e = compute(&i);
        assert_eq!(
            e.gpu_memory.reason.as_deref(),
            Some("2 GPUs allocated, no readings")
        );
    }
}
