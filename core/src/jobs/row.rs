//! One job's row: who and what from sacct, the figures from the job's report.

use serde::Serialize;

use crate::analysis::efficiency::Efficiencies;
use crate::report::Report;
use crate::slurm::sacct;

/// Where a row's figures come from: the job's recording, the summary the controller stored in
/// slurmdbd (the recording's figures, no charts), or sacct alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    Recorded,
    Summary,
    Sacct,
}

impl Basis {
    pub fn of(report_source: &str) -> Basis {
        match report_source {
            "recorded_file" => Basis::Recorded,
            "slurmdbd_summary" => Basis::Summary,
            _ => Basis::Sacct,
        }
    }

    pub fn word(&self) -> &'static str {
        match self {
            Basis::Recorded => "recorded",
            Basis::Summary => "summary",
            Basis::Sacct => "sacct",
        }
    }
}

/// One job of the table. Serialized as one element of `jobs[]` (docs/reference/json.md).
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// As sacct shows it: `123`, or `123_4` for an array task.
    pub job_id: String,
    /// `JobIDRaw`: the task's own job id (`sacct::JobAccounting::raw_id`); empty when sacct printed
    /// none for an array task.
    pub job_id_raw: String,
    pub array_job_id: Option<String>,
    pub array_task_id: Option<String>,
    pub job_name: String,
    pub user: Option<String>,
    pub state: Option<String>,
    pub exit_code: Option<i32>,
    pub elapsed_seconds: Option<f64>,
    pub basis: Basis,
    /// The report's `efficiency` object, as is.
    pub efficiency: Efficiencies,
}

impl Row {
    /// The row of a job from its sacct record and the report built for it.
    pub fn new(acct: &sacct::JobAccounting, rep: &Report) -> Row {
        let j = &acct.job;
        let (array_job_id, array_task_id) = match j.job_id.split_once('_') {
            Some((a, t)) => (Some(a.to_string()), Some(t.to_string())),
            None => (None, None),
        };
        Row {
            job_id: j.job_id.clone(),
            job_id_raw: acct.raw_id().map(|r| r.to_string()).unwrap_or_default(),
            array_job_id,
            array_task_id,
            // slurmdbd's placeholder name is not the job's (sacct::JobAccounting::is_partial).
            job_name: if acct.is_partial() {
                String::new()
            } else {
                j.job_name.clone()
            },
            user: j.user.clone(),
            state: rep.state.clone().or_else(|| Some(j.state.name.clone())),
            exit_code: rep.exit_code.or(j.exit_code.map(|e| e.code)),
            elapsed_seconds: rep.elapsed_seconds,
            basis: Basis::of(rep.source),
            efficiency: rep.efficiency.clone(),
        }
    }
}
