//! When the sampler reads, stores a row, flushes and archives. The clock is passed in, so
//! the schedule is tested without sleeping.

use std::time::{Duration, Instant};

/// How often the sampler reads between stored rows, so peaks between rows are not lost.
pub const FAST_READ: Duration = Duration::from_secs(1);
/// Stored rows are committed at least this often (a reader sees data this fresh; a node
/// crash loses at most this much).
pub const FLUSH_EVERY: Duration = Duration::from_secs(5);
/// A consistent copy goes to the archive this often while the step runs, and at its end.
pub const ARCHIVE_EVERY: Duration = Duration::from_secs(300);

/// The sampler's timetable, started when the step's first row is stored.
#[derive(Debug, Clone)]
pub struct Cadence {
    interval: Duration,
    next_store: Instant,
    last_flush: Instant,
    last_archive: Instant,
}

impl Cadence {
    pub fn new(interval: Duration, now: Instant) -> Cadence {
        Cadence {
            interval,
            next_store: now + interval,
            last_flush: now,
            last_archive: now,
        }
    }

    /// How long to wait for a callback's message before the next read.
    pub fn wait(&self, now: Instant) -> Duration {
        FAST_READ.min(self.next_store.saturating_duration_since(now))
    }

    /// Whether a stored row is due at `now`; if so the next one is set an interval on. A
    /// sampler that fell behind by more than an interval starts afresh from `now` rather
    /// than storing a burst of late rows.
    pub fn take_store(&mut self, now: Instant) -> bool {
        if now < self.next_store {
            return false;
        }
        self.next_store += self.interval;
        if self.next_store < now {
            self.next_store = now + self.interval;
        }
        true
    }

    /// Whether buffered rows should be committed: every `FLUSH_EVERY`, or every interval
    /// when the interval is shorter.
    pub fn flush_due(&self, now: Instant, buffered_rows: usize) -> bool {
        buffered_rows > 0
            && now.saturating_duration_since(self.last_flush) >= FLUSH_EVERY.min(self.interval)
    }

    pub fn flushed(&mut self, at: Instant) {
        self.last_flush = at;
    }

    pub fn archive_due(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_archive) >= ARCHIVE_EVERY
    }

    /// The archive copy finished (or failed) at `at`: the next is due `ARCHIVE_EVERY` later.
    pub fn archived(&mut self, at: Instant) {
        self.last_archive = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(non_snake_case)]
    fn S(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn rows_are_due_every_interval_with_fast_reads_between() {
        let t0 = Instant::now();
        let mut c = Cadence::new(S(5), t0);
        assert_eq!(c.wait(t0), S(1));
        assert_eq!(
            c.wait(t0 + Duration::from_millis(4_600)),
            Duration::from_millis(400)
        );
        assert!(!c.take_store(t0 + Duration::from_millis(4_999)));
        assert!(c.take_store(t0 + S(5)));
        // The next is one interval after the last due time, not after the late wake-up.
        assert!(!c.take_store(t0 + Duration::from_millis(9_999)));
        assert!(c.take_store(t0 + Duration::from_millis(10_200)));
        assert_eq!(
            c.wait(t0 + Duration::from_millis(14_500)),
            Duration::from_millis(500)
        );
    }

    #[test]
    fn a_sampler_that_fell_behind_starts_afresh_instead_of_a_burst() {
        let t0 = Instant::now();
        let mut c = Cadence::new(S(5), t0);
        assert!(c.take_store(t0 + S(23)));
        // Not due again at 25 s (the 10 s slot is long past): the next is 23 + 5.
        assert!(!c.take_store(t0 + S(25)));
        assert!(!c.take_store(t0 + Duration::from_millis(27_999)));
        assert!(c.take_store(t0 + S(28)));
    }

    #[test]
    fn a_flush_needs_buffered_rows_and_the_shorter_of_five_seconds_and_the_interval() {
        let t0 = Instant::now();
        let mut slow = Cadence::new(S(30), t0);
        assert!(!slow.flush_due(t0 + S(4), 3));
        assert!(slow.flush_due(t0 + S(5), 3));
        assert!(!slow.flush_due(t0 + S(60), 0));
        slow.flushed(t0 + S(5));
        assert!(!slow.flush_due(t0 + S(9), 1));
        let fast = Cadence::new(S(1), t0);
        assert!(fast.flush_due(t0 + S(1), 1));
    }

    #[test]
    fn the_archive_copy_is_due_five_minutes_after_the_last_one_finished() {
        let t0 = Instant::now();
        let mut c = Cadence::new(S(5), t0);
        assert!(!c.archive_due(t0 + S(299)));
        assert!(c.archive_due(t0 + S(300)));
        c.archived(t0 + S(304));
        assert!(!c.archive_due(t0 + S(600)));
        assert!(c.archive_due(t0 + S(604)));
    }
}
