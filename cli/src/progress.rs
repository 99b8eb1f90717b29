//! A running count on stderr while a long read goes on (`history`/`sizing` over a site's
//! month): only when stderr is a terminal, and only once the read has taken longer than
//! [`DELAY`] — a pipe or a log never gets carriage returns, and a quick answer never flickers.
//! Printed from its own thread, so it also shows while sacct has not answered at all.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Nothing is shown before this.
pub const DELAY: Duration = Duration::from_millis(1500);
/// Then the line is redrawn this often.
const EVERY: Duration = Duration::from_millis(250);

/// Counts; shows the count on a terminal until dropped (the line is then cleared).
pub struct Progress {
    count: Arc<AtomicU64>,
    stop: Arc<(Mutex<bool>, Condvar)>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Counting `what` (`jobs`), shown as read from `from` (`sacct`).
    pub fn start(from: &'static str, what: &'static str) -> Progress {
        let count = Arc::new(AtomicU64::new(0));
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let ticker = std::io::stderr().is_terminal().then(|| {
            let (count, stop) = (count.clone(), stop.clone());
            std::thread::spawn(move || tick(from, what, &count, &stop))
        });
        Progress {
            count,
            stop,
            ticker,
        }
    }

    pub fn add(&self, n: u64) {
        self.count.fetch_add(n, Ordering::Relaxed);
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        let (done, cv) = &*self.stop;
        *done.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

fn tick(from: &str, what: &str, count: &AtomicU64, stop: &(Mutex<bool>, Condvar)) {
    let t0 = Instant::now();
    let (done, cv) = stop;
    let mut wait = DELAY;
    let mut shown = false;
    let mut stopped = done.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let (g, _) = cv
            .wait_timeout_while(stopped, wait, |d| !*d)
            .unwrap_or_else(|e| e.into_inner());
        stopped = g;
        if *stopped {
            break;
        }
        let line = line(from, what, count.load(Ordering::Relaxed), t0.elapsed());
        let _ = write!(std::io::stderr(), "\r\x1b[2K{line}");
        shown = true;
        wait = EVERY;
    }
    if shown {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
}

/// `reading sacct: 412,000 jobs (137,300/s), 3 s`; before the first: `waiting for sacct, 2 s`.
pub fn line(from: &str, what: &str, n: u64, elapsed: Duration) -> String {
    let s = elapsed.as_secs_f64();
    if n == 0 {
        return format!("waiting for {from}, {s:.0} s");
    }
    let rate = (n as f64 / s.max(1e-3)).round() as u64;
    format!(
        "reading {from}: {} {what} ({}/s), {s:.0} s",
        thousands(n),
        thousands(rate)
    )
}

fn thousands(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::with_capacity(d.len() + d.len() / 3);
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_says_how_many_and_how_fast() {
        assert_eq!(
            line("sacct", "jobs", 412_000, Duration::from_secs(3)),
            "reading sacct: 412,000 jobs (137,333/s), 3 s"
        );
        assert_eq!(
            line("sacct", "jobs", 0, Duration::from_millis(2400)),
            "waiting for sacct, 2 s"
        );
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }
}
