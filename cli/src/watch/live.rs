//! The two loops: the dashboard and the headless `--log`.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use slurmwatch_core::slurm::squeue::{self, QueryError};
use slurmwatch_core::snapshot::{JobFacts, JobState, SnapshotSource};
use slurmwatch_core::sys::now_unix_ms;

use super::nodes::Feeds;
use super::screen::{self, View};
use super::{logfile, signals, take, LogFormat, Outcome, QueueInfo, WatchArgs};

/// How often Slurm is asked again (state, time budget): rarely, since every squeue costs
/// the controller and this process CPU, and the elapsed time is carried by the clock.
const QUEUE_POLL: Duration = Duration::from_secs(15);
/// The dashboard's default refresh.
const SCREEN_REFRESH_SECONDS: f64 = 1.0;

/// Follows the job's state between polls; `Ended` once Slurm no longer runs it.
fn poll_queue(facts: &mut JobFacts, queue: &mut QueueInfo, feed: &Feeds) {
    if feed.looks_ended() {
        facts.state = Some(JobState::Ended);
    }
    let Some(asked) = queue.asked else {
        return; // a file read without Slurm
    };
    if asked.elapsed() < QUEUE_POLL || facts.state == Some(JobState::Ended) {
        return;
    }
    match squeue::query_job(&facts.job_id) {
        Ok(entries) => {
            if let Some(e) = entries.into_iter().next() {
                *queue = QueueInfo::from_entry(&e);
                if !e.is_running() {
                    facts.state = Some(JobState::Ended);
                }
            }
        }
        Err(QueryError::UnknownJob(_)) => facts.state = Some(JobState::Ended),
        // Slurm busy or gone for a moment: keep the clock-carried figures, ask again later.
        Err(_) => queue.asked = Some(Instant::now()),
    }
}

fn today() -> Option<String> {
    slurmwatch_core::sys::local_time(now_unix_ms().div_euclid(1000)).map(|t| t.date())
}

pub fn screen(
    args: &WatchArgs,
    mut feed: Feeds,
    mut facts: JobFacts,
    mut queue: QueueInfo,
    hop: Option<SnapshotSource>,
) -> Result<i32, Outcome> {
    let refresh = args.interval.unwrap_or(SCREEN_REFRESH_SECONDS);
    let mut view = View {
        ascii: args.ascii,
        color: slurmwatch_core::sys::colour_allowed(),
        now_unix_ms: now_unix_ms(),
        today: today(),
        showing: None,
    };
    // The node switcher: `None` is the whole job, `Some(i)` one node of a multi-node job.
    let mut selected: Option<usize> = None;
    // Read before taking over the terminal, so an unreadable file is a plain message.
    feed.refresh()
        .map_err(|e| Outcome::fail(2, super::sentence(&e), ""))?;
    signals::install();
    let mut terminal = ratatui::try_init().map_err(|e| {
        Outcome::fail(
            2,
            format!("cannot use this terminal: {e}."),
            "Use --once or --log FILE where there is no terminal.",
        )
    })?;
    let tick = Duration::from_secs_f64(refresh);
    let mut code = 0;
    let mut next = Instant::now();
    'outer: loop {
        if let Some(c) = signals::caught() {
            code = c;
            break;
        }
        if Instant::now() >= next {
            if facts.state != Some(JobState::Ended) {
                if let Err(e) = feed.refresh() {
                    // A read that fails mid-run (file replaced, cgroup gone) keeps the last
                    // figures on screen; the queue poll tells whether the job ended.
                    let _ = e;
                }
            }
            poll_queue(&mut facts, &mut queue, &feed);
            view.now_unix_ms = now_unix_ms();
            view.showing = (feed.len() > 1).then(|| match selected {
                None => format!("all {} nodes", feed.len()),
                Some(i) => format!(
                    "node {} of {}: {}",
                    i + 1,
                    feed.len(),
                    feed.node_name(i).unwrap_or("")
                ),
            });
            let s = take(&feed, &facts, &queue, hop, selected);
            if terminal.draw(|f| screen::draw(f, &s, &view)).is_err() {
                code = 2;
                break;
            }
            next = Instant::now() + tick;
        }
        let wait = next.saturating_duration_since(Instant::now());
        // Short polls so a signal is noticed promptly; key presses wake us at once.
        match event::poll(wait.min(Duration::from_millis(250))) {
            Ok(true) => match event::read() {
                Ok(Event::Key(k)) if k.kind == KeyEventKind::Press => match k.code {
                    KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => break 'outer,
                    // Next node (then back to the whole job).
                    KeyCode::Char('n') | KeyCode::Tab if feed.len() > 1 => {
                        selected = next_node(selected, feed.len());
                        next = Instant::now();
                    }
                    // Raw mode turns Ctrl-C into a key: treat it as the signal it was.
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        code = 128 + libc::SIGINT;
                        break 'outer;
                    }
                    _ => {}
                },
                Ok(Event::Resize(..)) => next = Instant::now(),
                _ => {}
            },
            Ok(false) => {}
            Err(_) => {
                code = 2;
                break;
            }
        }
    }
    ratatui::restore();
    Ok(code)
}

pub fn log(
    path: &Path,
    format: LogFormat,
    args: &WatchArgs,
    mut feed: Feeds,
    mut facts: JobFacts,
    mut queue: QueueInfo,
    hop: Option<SnapshotSource>,
) -> Result<i32, Outcome> {
    let interval = args
        .interval
        .or(feed.interval_seconds().map(f64::from))
        .unwrap_or(5.0);
    let had_content = args.append && std::fs::metadata(path).is_ok_and(|m| m.len() > 0);
    let mut file = OpenOptions::new()
        .create(true)
        .write(true)
        .append(args.append)
        .truncate(!args.append)
        .open(path)
        .map_err(|e| {
            Outcome::fail(
                2,
                format!("cannot write {}: {e}.", path.display()),
                "Choose a writable path.",
            )
        })?;
    signals::install();
    let write_err =
        |e: std::io::Error| Outcome::fail(2, format!("cannot write {}: {e}.", path.display()), "");
    let mut wrote_header = had_content;
    // The last reading written: an appended file goes on after its own last line.
    let mut last_t = had_content
        .then(|| logfile::last_written_ms(path, format))
        .flatten();
    let mut ended_at = None;
    loop {
        if let Some(c) = signals::caught() {
            return Ok(c);
        }
        let fresh = feed.refresh().unwrap_or(false);
        poll_queue(&mut facts, &mut queue, &feed);
        let (rows, more) = logfile::rows_after(&feed, &facts, &queue, hop, last_t, fresh);
        if !rows.is_empty() {
            let text = logfile::lines(&rows, format, &mut wrote_header);
            file.write_all(text.as_bytes()).map_err(write_err)?;
            file.flush().map_err(write_err)?;
            last_t = rows.last().and_then(|s| s.reading_unix_ms);
        }
        if more {
            continue; // rows still to write: no wait
        }
        let (state, reading) = match rows.last() {
            Some(s) => (s.state, s.reading_unix_ms),
            None => {
                let s = take(&feed, &facts, &queue, hop, None);
                (s.state, s.reading_unix_ms)
            }
        };
        if state == JobState::Ended && logfile::ended(&feed, &mut ended_at) {
            return Ok(0);
        }
        // Sleep in short steps so a signal ends the log promptly.
        let wait = next_log_poll(now_unix_ms(), reading, interval, !rows.is_empty());
        let until = Instant::now() + wait;
        while Instant::now() < until {
            if signals::caught().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100).min(until - Instant::now()));
        }
    }
}

/// How long `--log` waits before it looks again. No row is lost whatever the wait (a look
/// writes every row stored since the last line); the wait keeps lines timely. A whole
/// interval after each look lags: the look itself takes time and the plugin commits a row a
/// moment after it is taken, so the looks drift behind the rows (on Slurm 24.11 a job
/// recorded every second got a look every 2 s). So the next look is due one
/// interval after the *reading* (plus a little for the commit), and when a look finds no new
/// reading it looks again soon (a tenth of the interval, 100 ms to 1 s) instead of waiting a
/// whole interval.
pub(crate) fn next_log_poll(
    now_unix_ms: i64,
    reading_unix_ms: Option<i64>,
    interval_s: f64,
    fresh: bool,
) -> Duration {
    let interval_ms = (interval_s * 1000.0).max(1.0) as i64;
    let retry_ms = (interval_ms / 10).clamp(100, 1000);
    const COMMIT_SLACK_MS: i64 = 150;
    match reading_unix_ms {
        Some(t) if fresh => {
            let due = t + interval_ms + COMMIT_SLACK_MS - now_unix_ms;
            // A reading older than an interval (a late file): look again soon, never at once.
            Duration::from_millis(due.clamp(50, interval_ms + COMMIT_SLACK_MS) as u64)
        }
        _ => Duration::from_millis(retry_ms.min(interval_ms) as u64),
    }
}

/// The switcher's order: the whole job, node 1, …, node n, the whole job again.
fn next_node(selected: Option<usize>, nodes: usize) -> Option<usize> {
    match selected {
        None => Some(0),
        Some(i) if i + 1 < nodes => Some(i + 1),
        Some(_) => None,
    }
}

#[cfg(test)]
mod switcher_tests {
    use super::{next_log_poll, next_node};
    use std::time::Duration;

    /// Rows every 1 s, each committed 300 ms after it was taken, and a look that itself takes
    /// 250 ms: the schedule sees every row (the old one, a full interval after each look,
    /// missed every other row).
    #[test]
    fn log_polls_keep_up_with_one_second_rows() {
        let commit = 300;
        let look = 250;
        let mut now = 0i64;
        let mut seen = std::collections::BTreeSet::new();
        let mut last = None;
        while now < 20_000 {
            now += look;
            // The newest committed row at the end of the look.
            let newest = (now - commit).div_euclid(1000) * 1000;
            let reading = (newest >= 0).then_some(newest);
            let fresh = reading.is_some() && reading != last;
            if fresh {
                seen.insert(newest);
                last = reading;
            }
            now += next_log_poll(now, reading, 1.0, fresh).as_millis() as i64;
        }
        let want: Vec<i64> = (0..19).map(|k| k * 1000).collect();
        let got: Vec<i64> = seen.into_iter().filter(|t| *t < 19_000).collect();
        assert_eq!(got, want, "every row gets a line");
    }

    #[test]
    fn log_poll_waits_an_interval_after_the_reading_and_retries_soon_without_one() {
        // Reading at 10.0 s, now 10.4 s, interval 5 s: due at 15.15 s.
        assert_eq!(
            next_log_poll(10_400, Some(10_000), 5.0, true),
            Duration::from_millis(4_750)
        );
        // No new reading: a tenth of the interval.
        assert_eq!(
            next_log_poll(10_400, Some(10_000), 5.0, false),
            Duration::from_millis(500)
        );
        assert_eq!(
            next_log_poll(0, None, 1.0, false),
            Duration::from_millis(100)
        );
        // A stale reading is never a busy loop.
        assert_eq!(
            next_log_poll(99_000, Some(10_000), 1.0, true),
            Duration::from_millis(50)
        );
    }

    #[test]
    fn cycles_through_every_node_and_back_to_the_job() {
        let mut s = None;
        let mut seen = Vec::new();
        for _ in 0..4 {
            s = next_node(s, 3);
            seen.push(s);
        }
        assert_eq!(seen, [Some(0), Some(1), Some(2), None]);
    }
}
