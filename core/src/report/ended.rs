//! Waiting for slurmdbd's record of a job that has just ended (`report --wait-ended`, which the
//! MailProg wrapper uses). Slurm mails as the job ends, often before slurmdbd has the job's
//! whole record: none yet, one still running, or — for a job of a few seconds — a stand-in row
//! (slurmctld sends a job's start in batches and its end at once, so slurmdbd makes a row named
//! `allocation`, UID 0, with no request, filled in seconds later). The report's own sacct query
//! is asked, at [`PACING`]'s times, until the record is whole: each ask is one query to
//! slurmdbd and the last is the report's answer (the wrapper once polled sacct itself every
//! 0.5 s and the report then asked once more).

use std::time::{Duration, Instant};

use crate::slurm::sacct::{JobAccounting, SacctError};

/// When to ask. The mail leaves as the job ends and slurmdbd has the end a moment later, but
/// a job of a few seconds has only its stand-in row for a second or two more. Sacct calls a
/// mail for jobs of 1 s on the test cluster (one run each, docs/admin.md): the wrapper's old
/// loop (every 0.5 s) and then the report, 2.48; the report asking every 0.5 s from the start,
/// 1.98; from 1 s with growing pauses, 1.55; every 2 s from 2 s, 1.45 (jobs of 6 s: 1.00).
#[derive(Debug, Clone, Copy)]
pub struct Pacing {
    /// Before the first ask.
    pub first: Duration,
    /// Between asks after that.
    pub every: Duration,
}

/// `report --wait-ended`'s pacing: asks at 2, 4, 6, 8, 10 s for a 10-s wait.
pub const PACING: Pacing = Pacing {
    first: Duration::from_secs(2),
    every: Duration::from_secs(2),
};

impl Pacing {
    /// When each ask is made, counted from the start, within `limit`; always at least one
    /// (at `limit` when it comes before `first`; at once for a zero `limit`).
    pub fn schedule(&self, limit: Duration) -> Vec<Duration> {
        let every = self.every.max(Duration::from_millis(1));
        let mut t = self.first.min(limit);
        let mut out = vec![t];
        while t + every <= limit {
            t += every;
            out.push(t);
        }
        out
    }
}

/// True when `r` is slurmdbd's whole record of an ended job: an end time, a state that no
/// longer changes, and the request (which the stand-in row lacks).
pub fn is_whole(r: &JobAccounting) -> bool {
    r.job.end_unix.is_some()
        && !matches!(
            r.job.state.name.as_str(),
            "" | "PENDING" | "RUNNING" | "REQUEUED" | "RESIZING" | "SUSPENDED" | "COMPLETING"
        )
        && r.job
            .fields
            .get("ReqTRES")
            .is_some_and(|t| !t.trim().is_empty())
}

/// Calls `ask` (one sacct query) at `pacing`'s times within `limit` until it answers a whole
/// record. A job sacct does not know yet and an open or stand-in record are asked again; any
/// other error is returned at once (a sacct that fails, or no accounting, is not waited for).
/// At the last time, the last answer, whatever it is. `limit` zero: one ask, at once.
pub fn wait(
    limit: Duration,
    pacing: &Pacing,
    mut ask: impl FnMut() -> Result<JobAccounting, SacctError>,
) -> Result<JobAccounting, SacctError> {
    let start = Instant::now();
    let times = pacing.schedule(limit);
    for (i, at) in times.iter().enumerate() {
        std::thread::sleep((start + *at).saturating_duration_since(Instant::now()));
        let answer = ask();
        let again = match &answer {
            Ok(r) => !is_whole(r),
            Err(SacctError::UnknownJob(_)) => true,
            Err(_) => false,
        };
        if !again || i + 1 == times.len() {
            return answer;
        }
    }
    unreachable!("a schedule has at least one ask")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::sacct::{parse, DELIMITER};

    /// A record as sacct prints it: `End|ReqTRES|State|User` under a header.
    fn record(end: &str, req: &str, state: &str, user: &str) -> JobAccounting {
        let d = DELIMITER.to_string();
        let text = format!(
            "{}\n{}\n",
            ["JobID", "JobIDRaw", "End", "ReqTRES", "State", "User"].join(&d),
            ["7", "7", end, req, state, user].join(&d)
        );
        parse(&text, DELIMITER).expect("parsed")
    }

    const END: &str = "2026-12-06T10:00:00";
    const REQ: &str = "billing=1,cpu=1,mem=256M,node=1";

    #[test]
    fn whole_means_ended_final_and_with_its_request() {
        assert!(is_whole(&record(END, REQ, "COMPLETED", "alice")));
        assert!(is_whole(&record(END, REQ, "FAILED", "alice")));
        assert!(!is_whole(&record("Unknown", REQ, "RUNNING", "alice")));
        assert!(!is_whole(&record(END, REQ, "COMPLETING", "alice")));
        // slurmdbd's stand-in row: the end before the start.
        assert!(!is_whole(&record(END, "", "COMPLETED", "root")));
    }

    /// Fast, for the tests: every 10 ms from 10 ms.
    const FAST: Pacing = Pacing {
        first: Duration::from_millis(10),
        every: Duration::from_millis(10),
    };

    #[test]
    fn the_mails_pacing_asks_five_times_in_ten_seconds() {
        let secs: Vec<u64> = PACING
            .schedule(Duration::from_secs(10))
            .iter()
            .map(|d| d.as_secs())
            .collect();
        assert_eq!(secs, [2, 4, 6, 8, 10]);
        assert_eq!(PACING.schedule(Duration::ZERO), [Duration::ZERO]);
        assert_eq!(
            PACING.schedule(Duration::from_millis(500)),
            [Duration::from_millis(500)]
        );
    }

    #[test]
    fn asks_again_until_whole_and_the_last_ask_is_the_answer() {
        let mut asks = 0;
        let r = wait(Duration::from_secs(10), &FAST, || {
            asks += 1;
            match asks {
                1 => Err(SacctError::UnknownJob("7".into())),
                2 => Ok(record("Unknown", REQ, "RUNNING", "alice")),
                3 => Ok(record(END, "", "COMPLETED", "root")),
                4 => Ok(record(END, REQ, "COMPLETED", "alice")),
                _ => Ok(record(END, REQ, "COMPLETED", "never asked")),
            }
        })
        .unwrap();
        assert_eq!(asks, 4);
        assert_eq!(r.job.user.as_deref(), Some("alice"));
    }

    #[test]
    fn a_failing_sacct_is_not_waited_for_and_the_limit_holds() {
        let mut asks = 0;
        let t = Instant::now();
        let r = wait(Duration::from_secs(10), &FAST, || {
            asks += 1;
            Err(SacctError::Failed("no accounting".into()))
        });
        assert!(matches!(r, Err(SacctError::Failed(_))));
        assert_eq!(asks, 1);
        // Never whole: the last answer at the limit, after the schedule's asks (10, 20, … 60
        // ms).
        let mut asks = 0;
        let r = wait(Duration::from_millis(60), &FAST, || {
            asks += 1;
            Ok(record("Unknown", REQ, "RUNNING", "alice"))
        })
        .unwrap();
        assert_eq!(r.job.state.name, "RUNNING");
        assert_eq!(asks, 6);
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        // Zero: one ask.
        let mut asks = 0;
        let _ = wait(Duration::ZERO, &PACING, || {
            asks += 1;
            Err(SacctError::UnknownJob("7".into()))
        });
        assert_eq!(asks, 1);
    }
}
