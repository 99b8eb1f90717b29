//! A finished run as the analysis reads it, small enough to keep a million of.
//!
//! [`Run`] carries every string sacct gave (ids, names, each node's name) and is the form the
//! recordings are attached to; sizing and patterns read only numbers, the state and the node
//! names. A [`Brief`] keeps exactly those — the state and node names shared with every other
//! run that has them, the optional numbers without an `Option`'s padding — in 152 bytes
//! against a `Run`'s ~700 with its strings, so a site's month of a million jobs is held in
//! about 150 MB rather than 700.

use std::sync::Arc;

use super::{MemoryBasis, Outcome, Run, RunRecording};
use crate::analysis::{IDLE_MAX_CPU_SECONDS, IDLE_MIN_SECONDS};
use crate::slurm::sacct::{StepMemory, StepMemoryBasis};

/// What the analysis reads of a run's recording (its [`RunRecording`] without the file's path).
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedFigures {
    pub peak_working_set_bytes: Option<u64>,
    pub peak_effective_cores: Option<f64>,
    pub cpu_seconds: Option<f64>,
    pub oom_kills: Option<u64>,
    pub gpus_seen: usize,
    pub gpus_used: usize,
}

impl From<&RunRecording> for RecordedFigures {
    fn from(r: &RunRecording) -> RecordedFigures {
        RecordedFigures {
            peak_working_set_bytes: r.peak_working_set_bytes,
            peak_effective_cores: r.peak_effective_cores,
            cpu_seconds: r.cpu_seconds,
            oom_kills: r.oom_kills,
            gpus_seen: r.gpus_seen,
            gpus_used: r.gpus_used,
        }
    }
}

// Which of the packed optional numbers are present.
const ELAPSED: u8 = 1;
const LIMIT: u8 = 1 << 1;
const CPU: u8 = 1 << 2;
const CPUS_PER_NODE: u8 = 1 << 3;
const CPUS_TOTAL: u8 = 1 << 4;
const MEM_REQUEST: u8 = 1 << 5;
const EXIT: u8 = 1 << 6;

/// One finished run, as sizing and the patterns read it; the accessors mean what the
/// [`Run`] fields of the same names mean.
#[derive(Debug, Clone, PartialEq)]
pub struct Brief {
    t: i64,
    elapsed: f64,
    timelimit: f64,
    cpu: f64,
    cpus_per_node: u64,
    cpus_total: u64,
    mem_request: u64,
    pub nodes: u64,
    pub gpus: u64,
    exit_code: i32,
    has: u8,
    pub outcome: Outcome,
    pub mem_whole_node: bool,
    /// sacct's state name (`COMPLETED`, `TIMEOUT`, ...).
    pub state: Arc<str>,
    /// The job's nodes, expanded.
    pub node_names: Arc<[Arc<str>]>,
    /// sacct's memory figure: the step sum where it has one, else the largest task's MaxRSS.
    sacct_peak: Option<StepMemory>,
    pub recorded: Option<Box<RecordedFigures>>,
}

fn pack<T: Default>(has: &mut u8, bit: u8, v: Option<T>) -> T {
    match v {
        Some(v) => {
            *has |= bit;
            v
        }
        None => T::default(),
    }
}

impl Brief {
    /// `run`'s figures, its state and node names as given (shared with other runs that have
    /// the same ones, see [`super::runs::Runs`]).
    pub fn new(run: &Run, state: Arc<str>, node_names: Arc<[Arc<str>]>) -> Brief {
        let mut has = 0;
        Brief {
            t: run.t(),
            elapsed: pack(&mut has, ELAPSED, run.elapsed_seconds),
            timelimit: pack(&mut has, LIMIT, run.timelimit_seconds),
            cpu: pack(&mut has, CPU, run.cpu_seconds),
            cpus_per_node: pack(&mut has, CPUS_PER_NODE, run.cpus_per_node),
            cpus_total: pack(&mut has, CPUS_TOTAL, run.cpus_total),
            mem_request: pack(&mut has, MEM_REQUEST, run.mem_request_bytes),
            exit_code: pack(&mut has, EXIT, run.exit_code),
            has,
            nodes: run.nodes,
            gpus: run.gpus,
            outcome: run.outcome,
            mem_whole_node: run.mem_whole_node,
            state,
            node_names,
            sacct_peak: sacct_peak(run.sacct_memory, run.max_rss_bytes),
            recorded: run
                .recorded
                .as_ref()
                .map(|r| Box::new(RecordedFigures::from(r))),
        }
    }

    fn f(&self, bit: u8, v: f64) -> Option<f64> {
        (self.has & bit != 0).then_some(v)
    }

    fn u(&self, bit: u8, v: u64) -> Option<u64> {
        (self.has & bit != 0).then_some(v)
    }

    pub fn elapsed_seconds(&self) -> Option<f64> {
        self.f(ELAPSED, self.elapsed)
    }

    pub fn timelimit_seconds(&self) -> Option<f64> {
        self.f(LIMIT, self.timelimit)
    }

    /// See [`Run::cpu_seconds`].
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.f(CPU, self.cpu)
    }

    pub fn cpus_per_node(&self) -> Option<u64> {
        self.u(CPUS_PER_NODE, self.cpus_per_node)
    }

    pub fn cpus_total(&self) -> Option<u64> {
        self.u(CPUS_TOTAL, self.cpus_total)
    }

    pub fn mem_request_bytes(&self) -> Option<u64> {
        self.u(MEM_REQUEST, self.mem_request)
    }

    pub fn exit_code(&self) -> Option<i32> {
        (self.has & EXIT != 0).then_some(self.exit_code)
    }

    /// See [`Run::t`].
    pub fn t(&self) -> i64 {
        self.t
    }

    /// See [`Run::oom`].
    pub fn oom(&self) -> bool {
        oom(
            self.outcome,
            self.recorded.as_ref().and_then(|r| r.oom_kills),
        )
    }

    /// See [`Run::hung`].
    pub fn hung(&self) -> bool {
        hung(
            self.outcome,
            self.recorded
                .as_ref()
                .and_then(|r| r.cpu_seconds)
                .or(self.cpu_seconds()),
            self.elapsed_seconds(),
        )
    }

    /// See [`Run::memory_peak`].
    pub fn memory_peak(&self) -> Option<(u64, MemoryBasis)> {
        if let Some(w) = self
            .recorded
            .as_ref()
            .and_then(|r| r.peak_working_set_bytes)
        {
            return Some((w, MemoryBasis::WorkingSet));
        }
        self.sacct_peak
            .map(|m| (m.bytes_per_node, MemoryBasis::Sacct(m.basis)))
    }

    pub fn core_hours(&self) -> f64 {
        self.elapsed_seconds().unwrap_or(0.0) * self.cpus_total().unwrap_or(0) as f64 / 3600.0
    }

    pub fn gpu_hours(&self) -> f64 {
        self.elapsed_seconds().unwrap_or(0.0) * self.gpus as f64 / 3600.0
    }
}

impl From<&Run> for Brief {
    /// With its own copies of the state and node names (for a handful of runs; a window's
    /// runs share theirs through [`super::runs::Runs`]).
    fn from(run: &Run) -> Brief {
        let nodes: Vec<Arc<str>> = run
            .node_names
            .iter()
            .map(|n| Arc::from(n.as_str()))
            .collect();
        Brief::new(run, Arc::from(run.state.as_str()), nodes.into())
    }
}

/// OOM-killed: Slurm's state, or a kill the recording saw.
pub(super) fn oom(outcome: Outcome, recorded_kills: Option<u64>) -> bool {
    outcome == Outcome::OutOfMemory || recorded_kills.unwrap_or(0) > 0
}

/// Stopped at its time limit having done next to nothing: on average less than
/// [`IDLE_MAX_CPU_SECONDS`] per [`IDLE_MIN_SECONDS`] (docs/design.md §8) over the whole run.
pub(super) fn hung(outcome: Outcome, cpu: Option<f64>, elapsed: Option<f64>) -> bool {
    if outcome != Outcome::Timeout {
        return false;
    }
    match (cpu, elapsed) {
        (Some(c), Some(e)) if e > 0.0 => c < IDLE_MAX_CPU_SECONDS * e / IDLE_MIN_SECONDS,
        _ => false,
    }
}

/// sacct's memory figure: the step figure, else MaxRSS as the largest task's (a floor).
pub(super) fn sacct_peak(step: Option<StepMemory>, max_rss: Option<u64>) -> Option<StepMemory> {
    step.or(max_rss.map(|m| StepMemory {
        bytes_per_node: m,
        basis: StepMemoryBasis::LargestTask { tasks: None },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_the_same_figures_as_the_run() {
        assert!(
            std::mem::size_of::<Brief>() <= 152,
            "{}",
            std::mem::size_of::<Brief>()
        );
        let run = Run {
            job_id: "7".into(),
            raw_id: Some(7),
            name: "x".into(),
            user: None,
            partition: None,
            state: "TIMEOUT".into(),
            outcome: Outcome::Timeout,
            exit_code: None,
            submit_unix: None,
            start_unix: Some(5),
            end_unix: Some(3605),
            elapsed_seconds: Some(3600.0),
            timelimit_seconds: Some(3600.0),
            cpus_per_node: Some(2),
            cpus_total: None,
            nodes: 1,
            gpus: 0,
            node_names: vec!["cn1".into()],
            mem_request_bytes: Some(0),
            mem_whole_node: false,
            cpu_seconds: Some(0.5),
            max_rss_bytes: Some(1 << 20),
            sacct_memory: None,
            recorded: None,
        };
        let b = Brief::from(&run);
        assert_eq!(b.t(), run.t());
        assert_eq!(b.elapsed_seconds(), Some(3600.0));
        assert_eq!(b.cpus_total(), None);
        assert_eq!(
            b.mem_request_bytes(),
            Some(0),
            "zero is a value, not absence"
        );
        assert_eq!(b.exit_code(), None);
        assert_eq!(b.hung(), run.hung());
        assert!(b.hung());
        assert_eq!(b.memory_peak(), run.memory_peak());
        assert_eq!(b.core_hours(), run.core_hours());
        assert_eq!(&*b.state, "TIMEOUT");
        assert_eq!(&*b.node_names[0], "cn1");
    }
}
