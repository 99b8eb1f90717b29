//! `--log FILE`'s lines: one per stored row, and where an earlier run's file left off.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::{Duration, Instant};

use slurmwatch_core::render::{csv, json};
use slurmwatch_core::snapshot::{JobFacts, Snapshot, SnapshotSource};

use super::nodes::Feeds;
use super::{take, take_rows, LogFormat, QueueInfo};

/// How much of an existing file's end is read to find its last line.
const TAIL_BYTES: u64 = 64 * 1024;

/// Lines written per look at most, so a long recording read from its start is written in
/// steps of bounded memory; `true` beside them says more rows wait.
const LOG_ROWS_PER_LOOK: usize = 600;

/// What one look writes after `last_t`: a file's every new stored row, each as of itself
/// (rows committed between two looks would otherwise never be written), or a feed's one new
/// reading (direct readings and sstat read once per look).
pub(super) fn rows_after(
    feeds: &Feeds,
    facts: &JobFacts,
    queue: &QueueInfo,
    hop: Option<SnapshotSource>,
    last_t: Option<i64>,
    fresh: bool,
) -> (Vec<Snapshot>, bool) {
    if let Some(rows) = take_rows(feeds, facts, queue, hop, last_t, LOG_ROWS_PER_LOOK) {
        let more = rows.len() == LOG_ROWS_PER_LOOK;
        return (rows, more);
    }
    if !fresh {
        return (Vec::new(), false);
    }
    let s = take(feeds, facts, queue, hop, None);
    let new = s.reading_unix_ms.is_some() && s.reading_unix_ms != last_t;
    (if new { vec![s] } else { Vec::new() }, false)
}

/// How long `--log` waits, once the job has ended, for the plugin's end row: the step
/// commits it as it exits, a moment after squeue stops showing the job running (seen on the
/// test cluster: the log ended first and the end row was never written).
const END_ROW_WAIT: Duration = Duration::from_secs(10);

/// Is the log done, the job having ended? Yes once every file has its end row, or when the
/// wait for it (counted from `since`, set on the first call) ran out: a plugin killed before
/// its last commit never writes one.
pub(super) fn ended(feeds: &Feeds, since: &mut Option<Instant>) -> bool {
    !feeds.awaits_end_row() || since.get_or_insert_with(Instant::now).elapsed() >= END_ROW_WAIT
}

/// The lines for `rows` (CSV: the header first when none was written yet).
pub(super) fn lines(rows: &[Snapshot], format: LogFormat, wrote_header: &mut bool) -> String {
    let mut text = String::new();
    for s in rows {
        match format {
            LogFormat::Jsonl => text.push_str(&json::to_line(s)),
            LogFormat::Csv => {
                if !*wrote_header {
                    text.push_str(&csv::header(s));
                    text.push('\n');
                    *wrote_header = true;
                }
                text.push_str(&csv::row(s));
            }
        }
        text.push('\n');
    }
    text
}

/// The reading time of the last line an earlier run wrote to `path` (`--append`), so its
/// rows are not written twice; `None` when there is none or it cannot be told.
pub(super) fn last_written_ms(path: &Path, format: LogFormat) -> Option<i64> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)))
        .ok()?;
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).ok()?;
    let tail = String::from_utf8_lossy(&tail);
    let last = tail.lines().rev().find(|l| !l.trim().is_empty())?;
    match format {
        LogFormat::Jsonl => serde_json::from_str::<serde_json::Value>(last)
            .ok()?
            .get("reading_unix_ms")?
            .as_i64(),
        // The first column is `reading_unix_ms`; a header line is no reading.
        LogFormat::Csv => last.split(',').next()?.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::feed::Feed;
    use slurmwatch_core::model::{SampleKind, SampleRow, Series};
    use slurmwatch_core::sample::{GpuCard, GpuError, GpuSample, Source};
    use slurmwatch_core::snapshot::JobState;
    use slurmwatch_core::store::{JobMeta, Writer};

    const T0: i64 = 1_790_000_000_000;

    /// A job file recorded every second on one card, as the plugin's writer makes it.
    fn job_file(path: &Path) -> (Writer, i64) {
        let meta = JobMeta {
            job_id: 4242,
            user: "alice".into(),
            uid: 1000,
            node: "cn01".into(),
            cluster: None,
            plugin_version: "test".into(),
            interval_seconds: 1,
            source: Source::CgroupV2,
            cores_allocated: Some(4),
            memory_allocated_bytes: Some(1 << 30),
            started_unix_ms: T0,
            incarnation: None,
        };
        let mut w = Writer::create(path, &meta).unwrap();
        w.begin_step("batch", T0, Some(1)).unwrap();
        let card = GpuCard {
            uuid: "GPU-aaa".into(),
            cuda_index: Some(0),
            nvml_index: 0,
            pci_bus_id: None,
            name: Some("NVIDIA H100".into()),
            memory_total_bytes: None,
            sm_clock_max_mhz: None,
            power_limit_watts: None,
            nvlink_links: None,
        };
        let ids = w.register_gpus("batch", T0, &[card], &[]).unwrap();
        (w, ids[0].0)
    }

    /// One tick: the job's row (CPU seconds so far) and the card's reading (utilization).
    fn tick(w: &mut Writer, gpu: i64, t: i64, kind: SampleKind, cpu_s: f64, util: u32) {
        let mut r = SampleRow::empty(t, Series::Job, kind);
        r.usage.cpu_usage_usec = Some((cpu_s * 1e6) as u64);
        r.usage.memory_working_set_bytes = Some(100 << 20);
        w.push(r);
        let mut g = GpuSample::all_failed(GpuError::NotSupported);
        g.utilization_percent = Ok(util);
        w.push_gpu(t, gpu, g);
    }

    /// One look of `--log`: what it writes, and the time it then remembers.
    fn look(feeds: &mut Feeds, facts: &JobFacts, last_t: &mut Option<i64>) -> Vec<Snapshot> {
        let fresh = feeds.refresh().unwrap();
        let q = QueueInfo::default();
        let (rows, more) = rows_after(feeds, facts, &q, None, *last_t, fresh);
        assert!(!more);
        if let Some(s) = rows.last() {
            *last_t = s.reading_unix_ms;
        }
        rows
    }

    /// The recorder committed three rows between two looks (commit jitter, a slow look):
    /// each gets its own line, in time order, with its own rates and its own card reading;
    /// a look with nothing new writes nothing, and the end row is written once.
    #[test]
    fn every_row_committed_between_two_looks_gets_its_own_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("4242.sqlite");
        let (mut w, gpu) = job_file(&path);
        tick(&mut w, gpu, T0, SampleKind::Start, 0.0, 5);
        w.flush().unwrap();
        let feed = Feed::open_file(&path, Series::Job).unwrap();
        let mut feeds = Feeds::single(None, feed);
        let facts = JobFacts::default();
        let mut last = None;
        let first = look(&mut feeds, &facts, &mut last);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].reading_unix_ms, Some(T0));

        for (k, cpu, util) in [(1, 0.5, 10), (2, 1.5, 20), (3, 3.5, 30)] {
            tick(&mut w, gpu, T0 + k * 1000, SampleKind::Periodic, cpu, util);
        }
        w.flush().unwrap();
        let three = look(&mut feeds, &facts, &mut last);
        let times: Vec<_> = three.iter().map(|s| s.reading_unix_ms).collect();
        assert_eq!(times, [Some(T0 + 1000), Some(T0 + 2000), Some(T0 + 3000)]);
        let cores: Vec<_> = three.iter().map(|s| s.cpu.effective_cores.value).collect();
        assert_eq!(cores, [Some(0.5), Some(1.0), Some(2.0)]);
        let peaks: Vec<_> = three
            .iter()
            .map(|s| s.cpu.peak_effective_cores.value)
            .collect();
        assert_eq!(
            peaks,
            [Some(0.5), Some(1.0), Some(2.0)],
            "peaks as of each row"
        );
        let util: Vec<_> = three
            .iter()
            .map(|s| s.gpus[0].utilization_percent.value)
            .collect();
        assert_eq!(
            util,
            [Some(10.0), Some(20.0), Some(30.0)],
            "cards as of each row"
        );
        assert!(three.iter().all(|s| s.state == JobState::Running));
        // The newest row's line is the snapshot the live view takes.
        let q = QueueInfo::default();
        let now = take(&feeds, &facts, &q, None, None);
        assert_eq!(json::to_line(&three[2]), json::to_line(&now));

        assert!(
            look(&mut feeds, &facts, &mut last).is_empty(),
            "nothing new"
        );

        tick(&mut w, gpu, T0 + 3500, SampleKind::End, 4.0, 0);
        w.flush().unwrap();
        let end = look(&mut feeds, &facts, &mut last);
        assert_eq!(end.len(), 1);
        assert_eq!(end[0].state, JobState::Ended);
        assert_eq!(end[0].cpu.effective_cores.value, Some(1.0));
        assert!(
            look(&mut feeds, &facts, &mut last).is_empty(),
            "the end row once"
        );
    }

    /// A two-node job: a line per row time of either node, each node as of its own last row
    /// by then (never a later reading of the other node).
    #[test]
    fn a_multinode_job_gets_a_line_per_row_of_any_node() {
        let dir = tempfile::tempdir().unwrap();
        let mut feeds = Vec::new();
        for (name, start) in [("cn01", 0), ("cn02", 500)] {
            let path = dir.path().join(format!("4242.{name}.sqlite"));
            let (mut w, gpu) = job_file(&path);
            tick(&mut w, gpu, T0 + start, SampleKind::Start, 0.0, 1);
            tick(&mut w, gpu, T0 + start + 1000, SampleKind::Periodic, 1.0, 2);
            w.flush().unwrap();
            feeds.push((name.to_string(), Feed::open_file(&path, Series::Job)));
        }
        let mut feeds = Feeds::per_node(feeds);
        let mut last = None;
        let lines = look(&mut feeds, &JobFacts::default(), &mut last);
        let at = |s: &Snapshot| -> Vec<Option<i64>> {
            s.nodes.iter().map(|n| n.reading_unix_ms).collect()
        };
        let got: Vec<_> = lines.iter().map(|s| (s.reading_unix_ms, at(s))).collect();
        let t = |ms: i64| Some(T0 + ms);
        assert_eq!(
            got,
            [
                (t(0), vec![t(0), None]),
                (t(500), vec![t(0), t(500)]),
                (t(1000), vec![t(1000), t(500)]),
                (t(1500), vec![t(1000), t(1500)]),
            ]
        );
        assert!(look(&mut feeds, &JobFacts::default(), &mut last).is_empty());
    }

    /// Slurm says the job ended before the plugin committed its end row: the log waits for
    /// it (a while), and is done at once when it is there.
    #[test]
    fn an_ended_job_waits_a_while_for_its_end_row() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("4242.sqlite");
        let (mut w, gpu) = job_file(&path);
        tick(&mut w, gpu, T0, SampleKind::Start, 0.0, 5);
        w.flush().unwrap();
        let mut feeds = Feeds::single(None, Feed::open_file(&path, Series::Job).unwrap());
        feeds.refresh().unwrap();
        let mut since = None;
        assert!(!ended(&feeds, &mut since), "no end row yet");
        assert!(since.is_some());
        let mut long_ago = Instant::now().checked_sub(END_ROW_WAIT);
        assert!(ended(&feeds, &mut long_ago), "the wait ran out");
        tick(&mut w, gpu, T0 + 1000, SampleKind::End, 1.0, 0);
        w.flush().unwrap();
        feeds.refresh().unwrap();
        assert!(ended(&feeds, &mut None), "the end row is there");
    }

    /// `--append`: the last line's reading time, JSONL or CSV; a header alone is none.
    #[test]
    fn an_appended_file_goes_on_after_its_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let j = dir.path().join("a.jsonl");
        std::fs::write(&j, "{\"reading_unix_ms\":1}\n{\"reading_unix_ms\":7}\n\n").unwrap();
        assert_eq!(last_written_ms(&j, LogFormat::Jsonl), Some(7));
        let c = dir.path().join("a.csv");
        std::fs::write(&c, "reading_unix_ms,job_id\n").unwrap();
        assert_eq!(last_written_ms(&c, LogFormat::Csv), None);
        std::fs::write(&c, "reading_unix_ms,job_id\n5,42\n9,42\n").unwrap();
        assert_eq!(last_written_ms(&c, LogFormat::Csv), Some(9));
    }
}
