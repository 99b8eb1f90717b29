//! The live view's throughput: the job's log found and read as the report does
//! (`report::joblog::locate`, `report::throughput::from_files`: as the file's owner, at most
//! `progress::MAX_PARSED_BYTES` from its end), placed by the sizes the recorder noted and the
//! size this read found (past the recorder's last note, where a steady writer's lines are). The
//! log is read again at most every [`MIN_GAP`] (and no more often than once per
//! [`COST_RATIO`] times the last read's cost), and only when the recording moved on: a
//! frame shows the last answer.

use std::time::{Duration, Instant};

use slurmwatch_core::analysis::progress::Patterns;
use slurmwatch_core::analysis::throughput::{SizeAt, Throughput};
use slurmwatch_core::report::joblog::{self, LogPaths};
use slurmwatch_core::report::throughput::{from_files, ProgressInputs};
use slurmwatch_core::slurm::scontrol;
use slurmwatch_core::store::Reader;

/// The log is read again at most this often.
pub const MIN_GAP: Duration = Duration::from_secs(5);
/// …and at most once per this many times what the last read took (64 MiB of a week's log).
pub const COST_RATIO: u32 = 20;
/// How long the controller may take to say where the job's output goes.
const SCONTROL_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the job's output goes and whose it is, as the report finds it.
#[derive(Debug, Clone, Default)]
pub struct JobLog {
    pub files: LogPaths,
    pub owner: Option<u32>,
}

impl JobLog {
    /// Asks the controller (a running job is in its records); `uid`: squeue's owner.
    pub fn ask(job_id: u32, uid: Option<u32>) -> JobLog {
        let out = scontrol::show_job_record(&job_id.to_string(), SCONTROL_TIMEOUT);
        let (files, owner) = joblog::locate(out.as_deref(), None, Some(job_id), uid);
        JobLog { files, owner }
    }
}

/// The last read: when, what it cost, the newest noted sizes and row it saw, its answer.
struct Read {
    at: Instant,
    took: Duration,
    newest: ([Option<SizeAt>; 2], Option<i64>),
    throughput: Option<Throughput>,
}

/// A log followed for its throughput.
pub struct Look {
    log: JobLog,
    patterns: Patterns,
    last: Option<Read>,
}

impl Look {
    pub fn new(log: JobLog) -> Look {
        Look {
            log,
            patterns: Patterns::default(),
            last: None,
        }
    }

    /// Is the log to be looked at again at `now`?
    fn due(&self, now: Instant) -> bool {
        self.last
            .as_ref()
            .is_none_or(|r| now.saturating_duration_since(r.at) >= MIN_GAP.max(r.took * COST_RATIO))
    }

    /// The throughput so far from `reader`'s noted sizes, read again when due and the
    /// recording moved on (a new row: the recorder notes a steady writer's size only when
    /// its pace changes, so the log itself is looked at then); `None` without progress
    /// lines (or no sizes noted, or no log found).
    pub fn get(
        &mut self,
        reader: &Reader,
        newest_row_ms: Option<i64>,
        now: Instant,
    ) -> Option<Throughput> {
        if self.log.files.is_empty() || !self.due(now) {
            return self.last.as_ref().and_then(|r| r.throughput.clone());
        }
        let started = Instant::now();
        let Ok(mut inputs) = ProgressInputs::load_sizes(reader) else {
            return self.last.as_ref().and_then(|r| r.throughput.clone());
        };
        let noted = [inputs.stdout.last().copied(), inputs.stderr.last().copied()];
        let newest = (noted, newest_row_ms);
        if let Some(r) = self.last.as_mut().filter(|r| r.newest == newest) {
            // The recording stands still (ended): the answer stands, asked again after the gap.
            r.at = now;
            return r.throughput.clone();
        }
        // The cards' rows only where there are sizes to place by (the slowdowns' holds).
        let throughput = if inputs.is_empty() || inputs.load_cards(reader).is_err() {
            None
        } else {
            let read_at = Some(slurmwatch_core::sys::now_unix_ms());
            from_files(
                &self.log.files,
                self.log.owner,
                &inputs,
                (&self.patterns, read_at),
            )
        };
        self.last = Some(Read {
            at: now,
            took: started.elapsed(),
            newest,
            throughput,
        });
        self.last.as_ref().and_then(|r| r.throughput.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurmwatch_core::analysis::progress::Tool;
    use slurmwatch_core::model::{SampleKind, SampleRow, Series};
    use slurmwatch_core::sample::Source;
    use slurmwatch_core::store::{JobMeta, OutputSize, Writer};

    const T0: i64 = 1_780_000_000_000;

    fn me() -> u32 {
        // SAFETY: no failure modes.
        unsafe { libc::geteuid() }
    }

    /// Rows `from..to` (one a second) noting the log's size `bytes` at each.
    fn note(w: &mut Writer, secs: std::ops::Range<i64>, bytes: impl Fn(i64) -> u64) {
        for s in secs {
            let kind = match s {
                0 => SampleKind::Start,
                _ => SampleKind::Periodic,
            };
            w.push(SampleRow::empty(T0 + s * 1000, Series::Job, kind));
            w.push_output_size(OutputSize {
                t_unix_ms: T0 + s * 1000,
                fd: 1,
                bytes: bytes(s),
            });
        }
        w.flush().unwrap();
    }

    /// A 1-s recording's meta for job `job_id` of this user, from T0.
    fn test_meta(job_id: u64, cores_allocated: Option<u32>) -> JobMeta {
        JobMeta {
            job_id,
            user: "me".into(),
            uid: me(),
            node: "n1".into(),
            cluster: None,
            plugin_version: "test".into(),
            interval_seconds: 1,
            source: Source::CgroupV2,
            cores_allocated,
            memory_allocated_bytes: None,
            started_unix_ms: T0,
            incarnation: None,
        }
    }

    /// A tqdm bar at 10 it/s is found and placed; the log is not read again within the gap,
    /// nor after it while the recording stands still (the file changed meanwhile, unseen);
    /// once it moves on, it is read again (now without progress lines: no throughput).
    #[test]
    fn the_log_is_read_again_only_after_the_gap_and_when_the_recording_moved_on() {
        let d = tempfile::tempdir().unwrap();
        let meta = test_meta(4242, Some(1));
        let file = d.path().join("4242.sqlite");
        let mut w = Writer::create(&file, &meta).unwrap();
        let mut log = String::new();
        let mut at = vec![0u64];
        for tenth in 1..=300 {
            let e = tenth / 10;
            log.push_str(&format!("\r{tenth}/1000 [00:{e:02}<01:00, 10.00it/s]"));
            if tenth % 10 == 0 {
                at.push(log.len() as u64);
            }
        }
        note(&mut w, 0..31, |s| at[s as usize]);
        let out = d.path().join("slurm-4242.out");
        std::fs::write(&out, &log).unwrap();
        let reader = Reader::open(&file).unwrap();
        let mut look = Look::new(JobLog {
            files: vec![("stdout+stderr", out.clone(), "scontrol")],
            owner: Some(me()),
        });
        let now = Instant::now();
        let t = look
            .get(&reader, Some(T0 + 30_000), now)
            .expect("a throughput");
        assert_eq!((t.tool, t.unit.as_ref()), (Tool::Tqdm, "it/s"));
        let usual = slurmwatch_core::analysis::throughput::usual_rate(&t.points).unwrap();
        assert!((usual - 10.0).abs() < 0.5, "{usual}");
        // The log now holds no progress line: unseen within the gap, and after it while the
        // recording stands still.
        let plain = "plain line\n".repeat(log.len() / 10);
        std::fs::write(&out, &plain).unwrap();
        let row = Some(T0 + 30_000);
        let later = |d: Duration| now + d;
        let t1 = look.get(&reader, row, later(Duration::from_secs(1)));
        assert_eq!(t1, Some(t.clone()));
        assert_eq!(look.get(&reader, row, later(MIN_GAP)), Some(t.clone()));
        // A new row: read again after the gap (counted from the last look).
        note(&mut w, 31..33, |_| plain.len() as u64);
        let row = Some(T0 + 32_000);
        assert_eq!(look.get(&reader, row, later(MIN_GAP)), Some(t));
        assert_eq!(look.get(&reader, row, later(MIN_GAP * 2)), None);
    }

    #[test]
    fn no_log_found_no_throughput_and_nothing_read() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("1.sqlite");
        let meta = test_meta(1, None);
        let mut w = Writer::create(&file, &meta).unwrap();
        note(&mut w, 0..3, |s| s as u64 * 10);
        let reader = Reader::open(&file).unwrap();
        let mut look = Look::new(JobLog::default());
        assert_eq!(look.get(&reader, Some(T0), Instant::now()), None);
        assert!(look.last.is_none());
    }
}
