//! Which job: the id forms Slurm prints, or a choice among the user's own jobs.

use std::io::{BufRead, IsTerminal, Write};

use slurmwatch_core::slurm::job_id::JobId;
use slurmwatch_core::slurm::squeue::{self, QueryError, QueueEntry};

use super::Outcome;

/// What the user named: the id squeue understands, and a step when they gave `12345.0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub query: String,
    pub step: Option<String>,
}

/// Accepts `12345`, `12345_3` (array task), `123+1` (het component), each optionally with
/// `.step` (`12345.0`, `12345.batch`).
pub fn parse_spec(s: &str) -> Result<JobSpec, String> {
    let s = s.trim();
    let (base, step) = match s.split_once('.') {
        Some((b, st)) => (b, Some(st)),
        None => (s, None),
    };
    let base_ok = JobId::parse(base).is_ok();
    let digits = |x: &str| !x.is_empty() && x.len() <= 20 && x.bytes().all(|b| b.is_ascii_digit());
    let step_ok =
        step.is_none_or(|st| digits(st) || matches!(st, "batch" | "extern" | "interactive"));
    if !base_ok || !step_ok {
        return Err(format!(
            "{s:?} is not a job id. Use the forms squeue prints: 12345, 12345_3 (array task), 12345.0 (step), 123+1 (het component)."
        ));
    }
    Ok(JobSpec {
        query: base.to_string(),
        step: step.map(str::to_string),
    })
}

/// The name of the user running slurmwatch (squeue's `-u`).
pub fn current_user() -> Option<String> {
    slurmwatch_core::sys::current_user_name().or_else(|| std::env::var("USER").ok())
}

pub fn no_slurm(e: &impl std::fmt::Display) -> Outcome {
    Outcome::fail(
        2,
        format!("cannot ask Slurm about jobs: {e}."),
        "Run slurmwatch on a cluster login or compute node (or load the Slurm module); --file PATH reads a recorded file without Slurm.",
    )
}

/// Picks the job when none was named: the user's running and pending jobs, as a list to
/// choose from on a terminal; a single job is taken directly when output is not a terminal.
pub fn choose_own_job() -> Result<QueueEntry, Outcome> {
    let user = current_user().ok_or_else(|| {
        Outcome::fail(
            2,
            "cannot tell which user you are.",
            "Name the job: slurmwatch 12345.",
        )
    })?;
    let jobs = match squeue::query_user(&user) {
        Ok(j) => j,
        Err(QueryError::Command(e)) => return Err(no_slurm(&e)),
        Err(e) => {
            return Err(Outcome::fail(
                2,
                super::sentence(&e),
                "Name the job: slurmwatch 12345.",
            ))
        }
    };
    if jobs.is_empty() {
        return Err(Outcome::fail(
            1,
            format!("{user} has no running or pending jobs."),
            "Submit one, or name a job: slurmwatch 12345.",
        ));
    }
    pick(jobs, "Your jobs")
}

/// One entry from several: directly when there is one (or one running) and stdout is not a
/// terminal,
/// otherwise a numbered list and a prompt (Enter takes the first running job).
pub fn pick(jobs: Vec<QueueEntry>, heading: &str) -> Result<QueueEntry, Outcome> {
    let interactive = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if !interactive {
        // A script gets the job when there is no doubt: the only job, or the only running one.
        let running: Vec<usize> = (0..jobs.len()).filter(|&i| jobs[i].is_running()).collect();
        let only = match (jobs.len(), running.as_slice()) {
            (1, _) => Some(0),
            (_, [i]) => Some(*i),
            _ => None,
        };
        if let Some(i) = only {
            return Ok(jobs.into_iter().nth(i).expect("index in range"));
        }
    }
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{heading}:");
    for (i, j) in jobs.iter().enumerate() {
        let what = if j.is_pending() {
            // One line on why: the reason code in words.
            let code = slurmwatch_core::slurm::scontrol::reason_code(&j.reason);
            format!(
                "PENDING: {}",
                slurmwatch_core::queue::reasons::explain(&code).short
            )
        } else {
            format!(
                "{} {} on {}",
                j.state,
                j.elapsed_seconds
                    .map(slurmwatch_core::units::slurm_duration)
                    .unwrap_or_default(),
                j.nodes
            )
        };
        let name = slurmwatch_core::render::terminal::field(&j.name);
        let _ = writeln!(
            err,
            "  [{}] {:<12} {:<20} {what}",
            i + 1,
            j.display_id,
            name
        );
    }
    if !interactive {
        return Err(Outcome::fail(
            2,
            "several jobs match and there is no terminal to choose on.",
            "Name one: slurmwatch 12345.",
        ));
    }
    let default = jobs.iter().position(|j| j.is_running()).unwrap_or(0);
    let _ = write!(err, "Watch which? [{}] ", default + 1);
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return Err(Outcome::code(1));
    }
    let line = line.trim();
    let idx = if line.is_empty() {
        default
    } else {
        match line.parse::<usize>() {
            Ok(n) if (1..=jobs.len()).contains(&n) => n - 1,
            _ => {
                return Err(Outcome::fail(
                    2,
                    format!("{line:?} is not one of the numbers listed."),
                    "Run slurmwatch again and type a number from the list, or name the job.",
                ))
            }
        }
    };
    Ok(jobs.into_iter().nth(idx).expect("index checked"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_slurm_prints_are_accepted() {
        let p = |s: &str| parse_spec(s).unwrap();
        assert_eq!(p("12345").query, "12345");
        assert_eq!(p("12345_3").query, "12345_3");
        assert_eq!(p("123+1").query, "123+1");
        let s = p("12345.0");
        assert_eq!((s.query.as_str(), s.step.as_deref()), ("12345", Some("0")));
        assert_eq!(p("12345_3.batch").step.as_deref(), Some("batch"));
    }

    #[test]
    fn anything_else_is_refused_with_the_forms() {
        for bad in [
            "",
            "abc",
            "12345.",
            "12_",
            "+1",
            "1;rm -rf",
            "12345.x",
            "-5",
            "1.2.3",
            "012345",
            "4294967296",
            "12345678901.0",
            "12345_[1-3]",
            "1+2_3",
        ] {
            let e = parse_spec(bad).unwrap_err();
            assert!(e.contains("12345_3"), "{bad}: {e}");
        }
    }
}
