//! `sstat`: the accounting figures of a job's *running* steps, the live view's last resort
//! when neither the plugin's file, nor the job's processes, nor the node (through srun) can
//! be reached.
//!
//! What sstat gives is not a live reading: `AveCPU` is each task's CPU time so far averaged
//! over the step's tasks, `MaxRSS` the largest resident set any one task has had since it
//! started (page cache not counted, shared pages counted in every process), `MaxDisk*` bytes
//! moved so far. Steps that have ended are not listed at all. No rate and no working set can
//! be had from it, so the snapshot built from it says so instead of guessing.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::command::{self, CommandError};
use super::units::{parse_duration, parse_size};

/// The fields asked for, in this order (`-o`). `TRESUsageInTot` carries the step's CPU time
/// summed over its tasks (`cpu=`), where `AveCPU × NTasks` loses up to a second per task to
/// sstat printing whole seconds.
pub const FIELDS: &str =
    "JobID,AveCPU,MaxRSS,MaxRSSNode,AveRSS,NTasks,MaxDiskRead,MaxDiskWrite,TRESUsageInTot";

/// How long `sstat` may take: it asks slurmctld, then every node of every step.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// One running step's line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepStat {
    /// As sstat prints it: `12345.batch`, `12345.extern`, `12345.0`.
    pub step_id: String,
    /// CPU time per task so far, averaged over the step's tasks (`AveCPU`).
    pub ave_cpu_seconds: Option<f64>,
    pub ntasks: Option<u32>,
    /// The largest resident set of any one task of the step so far (`MaxRSS`).
    pub max_rss_bytes: Option<u64>,
    /// Where that task ran.
    pub max_rss_node: Option<String>,
    /// Resident set averaged over the step's tasks (`AveRSS`).
    pub ave_rss_bytes: Option<u64>,
    /// Bytes read / written so far by the task that moved the most (`MaxDiskRead/Write`).
    pub max_disk_read_bytes: Option<u64>,
    pub max_disk_write_bytes: Option<u64>,
    /// CPU time summed over the step's tasks (`TRESUsageInTot` `cpu=`; whole seconds).
    pub tres_cpu_seconds: Option<f64>,
    /// Resident sets summed over the step's tasks, each task's own maximum
    /// (`TRESUsageInTot` `mem=`).
    pub tres_mem_bytes: Option<u64>,
}

impl StepStat {
    /// CPU seconds of the whole step so far: `TRESUsageInTot`'s `cpu=`, else
    /// `AveCPU × NTasks`. sstat prints whole seconds (truncated), so either undercounts by
    /// less than a second per step (per task for the second).
    pub fn cpu_seconds(&self) -> Option<f64> {
        self.tres_cpu_seconds
            .or_else(|| Some(self.ave_cpu_seconds? * f64::from(self.ntasks?)))
    }
}

/// `cpu=00:00:03,energy=0,fs/disk=6976,mem=96K,...`: the value of `key`.
fn tres_value<'a>(tres: &'a str, key: &str) -> Option<&'a str> {
    tres.split(',')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// The job's running steps, as one summary.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub steps: Vec<StepStat>,
}

impl Summary {
    /// CPU seconds the running steps have used so far (Σ `AveCPU × NTasks`); `None` when no
    /// step gave both figures.
    pub fn cpu_seconds_total(&self) -> Option<f64> {
        let v: Vec<f64> = self
            .steps
            .iter()
            .filter_map(StepStat::cpu_seconds)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    }

    /// The step whose one task had the largest resident set.
    pub fn max_rss(&self) -> Option<&StepStat> {
        self.steps
            .iter()
            .filter(|s| s.max_rss_bytes.is_some())
            .max_by_key(|s| s.max_rss_bytes)
    }

    pub fn max_rss_bytes(&self) -> Option<u64> {
        self.max_rss().and_then(|s| s.max_rss_bytes)
    }

    pub fn max_rss_node(&self) -> Option<String> {
        self.max_rss().and_then(|s| s.max_rss_node.clone())
    }
}

/// Parses `sstat -P -o FIELDS` output, with or without its header line. Columns are found
/// by the header's names when there is one, else taken in [`FIELDS`] order (with or without
/// the last). Lines with the wrong number of fields are skipped.
pub fn parse(text: &str) -> Summary {
    let default: Vec<String> = FIELDS.split(',').map(str::to_string).collect();
    let mut header: Option<Vec<String>> = None;
    let mut steps = Vec::new();
    for line in text.lines() {
        let line = line.trim_end_matches(['\r', '\n']);
        if line.trim().is_empty() {
            continue;
        }
        let cells: Vec<&str> = line.split('|').collect();
        if cells.first().map(|c| c.trim()) == Some("JobID") {
            header = Some(cells.iter().map(|c| c.trim().to_string()).collect());
            continue;
        }
        // Without a header: FIELDS, or FIELDS without TRESUsageInTot (the older list).
        let names: &[String] = match &header {
            Some(h) => h,
            None if cells.len() + 1 == default.len() => &default[..cells.len()],
            None => &default,
        };
        if cells.len() != names.len() {
            continue;
        }
        let get = |key: &str| {
            names
                .iter()
                .position(|n| n == key)
                .and_then(|i| cells.get(i))
                .map(|c| c.trim())
                .filter(|c| !c.is_empty())
        };
        let Some(step_id) = get("JobID") else {
            continue;
        };
        // Sizes: a unit suffix (K, M, G...) or bare bytes.
        let size = |key: &str| get(key).and_then(|v| parse_size(v, 1));
        steps.push(StepStat {
            step_id: step_id.to_string(),
            ave_cpu_seconds: get("AveCPU").and_then(parse_duration),
            ntasks: get("NTasks").and_then(|v| v.parse().ok()),
            max_rss_bytes: size("MaxRSS"),
            max_rss_node: get("MaxRSSNode").map(str::to_string),
            ave_rss_bytes: size("AveRSS"),
            max_disk_read_bytes: size("MaxDiskRead"),
            max_disk_write_bytes: size("MaxDiskWrite"),
            tres_cpu_seconds: get("TRESUsageInTot")
                .and_then(|t| tres_value(t, "cpu"))
                .and_then(parse_duration),
            tres_mem_bytes: get("TRESUsageInTot")
                .and_then(|t| tres_value(t, "mem"))
                .and_then(|v| parse_size(v, 1)),
        });
    }
    Summary { steps }
}

/// Why sstat gave no summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SstatError {
    #[error(transparent)]
    Command(#[from] CommandError),
    /// sstat ran and refused (its first line of stderr).
    #[error("sstat failed: {0}")]
    Failed(String),
    #[error("sstat lists no running step of job {0}")]
    NoSteps(u32),
}

/// Runs `sstat -j ID --allsteps -P -o FIELDS` (pinned locale and time format, bounded).
pub fn query(job_id: u32, timeout: Duration) -> Result<Summary, SstatError> {
    let id = job_id.to_string();
    let f = command::run(
        "sstat",
        &["-j", &id, "--allsteps", "-P", "-o", FIELDS],
        timeout,
    )?;
    let s = parse(&f.stdout);
    if s.steps.is_empty() {
        // sstat exits 0 even when it fails ("couldn't get steps for job N"): its stderr
        // says what happened.
        let why = f.reason();
        return Err(match (why.is_empty(), f.success) {
            (false, _) => SstatError::Failed(why.trim_start_matches("sstat: ").to_string()),
            (true, false) => SstatError::Failed(format!("exit status {:?}", f.code)),
            (true, true) => SstatError::NoSteps(job_id),
        });
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_durations() {
        let s = parse(
            "JobID|AveCPU|MaxRSS|MaxRSSNode|AveRSS|NTasks|MaxDiskRead|MaxDiskWrite\n\
             7.batch|1-00:00:02|2.5G|n1|1024K|2|5.23M|0\n\
             7.0|01:02.500|||||bad|\n",
        );
        assert_eq!(s.steps.len(), 2);
        let b = &s.steps[0];
        assert_eq!(b.ave_cpu_seconds, Some(86_402.0));
        assert_eq!(b.cpu_seconds(), Some(172_804.0));
        assert_eq!(b.max_rss_bytes, Some(5 << 29));
        assert_eq!(b.ave_rss_bytes, Some(1 << 20));
        assert_eq!(
            b.max_disk_read_bytes,
            Some((5.23 * 1048576.0f64).round() as u64)
        );
        assert_eq!(b.max_disk_write_bytes, Some(0));
        let z = &s.steps[1];
        assert_eq!(z.ave_cpu_seconds, Some(62.5));
        assert_eq!(
            (z.ntasks, z.max_rss_bytes, z.max_disk_read_bytes),
            (None, None, None)
        );
        assert_eq!(s.cpu_seconds_total(), Some(172_804.0));
        assert_eq!(s.max_rss_node().as_deref(), Some("n1"));
    }

    #[test]
    fn without_header_and_with_ragged_lines() {
        let s = parse("7.0|00:00:01|10K|n|10K|1|0|0\n7.1|only|three\n");
        assert_eq!(s.steps.len(), 1);
        assert_eq!(s.steps[0].max_rss_bytes, Some(10 << 10));
        assert!(parse("").steps.is_empty());
    }
}
