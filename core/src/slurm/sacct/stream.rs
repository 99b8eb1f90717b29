//! sacct's output read as it comes, within a bounded wait.
//!
//! A site's month is hundreds of megabytes of sacct text: it is never held whole. A reader
//! thread hands stdout over in chunks through a small bounded channel (so a slow consumer
//! stalls sacct on its pipe rather than growing a buffer), and the caller's thread hands each
//! to the consumer (which cuts it into records: [`records`](super::records)). The bound is on
//! *waiting*: every moment spent blocked on sacct (for its next chunk, then for its exit)
//! comes off one [`Budget`]; the consumer's own work does not, so a large answer parsed
//! slowly is not called a hung slurmdbd.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::SacctError;

/// Bytes per chunk handed from the reader thread.
const CHUNK_BYTES: usize = 64 << 10;
/// Chunks in flight: with [`CHUNK_BYTES`], at most 512 KiB of unread output.
const CHUNKS_IN_FLIGHT: usize = 8;
/// stderr kept (sacct's reason is its first line).
const STDERR_MAX_BYTES: usize = 64 << 10;

/// Time that may still be spent waiting on sacct, across every call of one query.
#[derive(Debug, Clone, Copy)]
pub(super) struct Budget {
    pub left: Duration,
    /// What the whole query was allowed, for the error's wording.
    pub total: Duration,
}

impl Budget {
    pub fn new(total: Duration) -> Budget {
        Budget { left: total, total }
    }

    fn timed_out(&self) -> SacctError {
        SacctError::TimedOut(self.total.as_secs().max(1))
    }

    /// Waits for at most what is left; returns what the wait took off.
    fn spend<T>(&mut self, wait: impl FnOnce(Duration) -> T) -> T {
        let t = Instant::now();
        let v = wait(self.left);
        self.left = self.left.saturating_sub(t.elapsed());
        v
    }
}

/// How a streamed run ended.
pub(super) struct Ended {
    pub status_ok: bool,
    pub stderr: String,
}

/// Runs `program args` with the pinned format and locale, handing stdout to `on_chunk` as it
/// comes. Kills sacct and answers `TimedOut` once the budget is spent waiting on it.
pub(super) fn run_chunks(
    program: &Path,
    args: &[String],
    budget: &mut Budget,
    on_chunk: &mut dyn FnMut(&[u8]),
) -> Result<Ended, SacctError> {
    if budget.left.is_zero() {
        return Err(budget.timed_out());
    }
    let mut cmd = Command::new(program);
    cmd.args(args).env_remove("SACCT_FORMAT");
    crate::slurm::quickack::preload_into(&mut cmd);
    let mut child = crate::slurm::command::pin_environment(&mut cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                SacctError::Missing(format!("{} not found", program.display()))
            }
            _ => SacctError::Missing(format!("cannot run {}: {e}", program.display())),
        })?;
    let mut so = child.stdout.take().expect("piped");
    let mut se = child.stderr.take().expect("piped");
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(CHUNKS_IN_FLIGHT);
    std::thread::spawn(move || loop {
        let mut b = vec![0u8; CHUNK_BYTES];
        match so.read(&mut b) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                b.truncate(n);
                if tx.send(b).is_err() {
                    break;
                }
            }
        }
    });
    // stderr on its own thread: a full stderr pipe must never block sacct.
    let t_err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = (&mut se).take(STDERR_MAX_BYTES as u64).read_to_end(&mut b);
        let _ = std::io::copy(&mut se, &mut std::io::sink());
        b
    });
    let kill = |child: &mut std::process::Child| {
        let _ = child.kill();
        let _ = child.wait();
        // The pipes may be held open by a grandchild: the reader threads are not joined.
    };
    loop {
        match budget.spend(|left| rx.recv_timeout(left)) {
            Ok(chunk) => on_chunk(&chunk),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                kill(&mut child);
                return Err(budget.timed_out());
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    // stdout is closed: sacct is exiting. Its exit is waited for within the same budget.
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if !budget.left.is_zero() => {
                budget.spend(|left| std::thread::sleep(left.min(Duration::from_millis(5))))
            }
            Ok(None) => {
                kill(&mut child);
                return Err(budget.timed_out());
            }
            Err(e) => return Err(SacctError::Failed(format!("cannot wait for sacct: {e}"))),
        }
    };
    let stderr = String::from_utf8_lossy(&t_err.join().unwrap_or_default()).into_owned();
    Ok(Ended {
        status_ok: status.success(),
        stderr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, budget: Duration) -> (Result<Ended, SacctError>, Vec<String>) {
        let mut got = Vec::new();
        let mut b = Budget::new(budget);
        let r = run_chunks(
            Path::new("sh"),
            &["-c".to_string(), script.to_string()],
            &mut b,
            &mut |c| got.extend_from_slice(c),
        );
        let text = String::from_utf8(got).unwrap();
        (r, text.lines().map(str::to_string).collect())
    }

    #[test]
    fn every_byte_arrives_in_order_across_chunks() {
        // 200,000 lines (about 2.6 MB): many chunks.
        let (r, got) = sh(
            "i=0; while [ $i -lt 200000 ]; do echo \"line $i\"; i=$((i+1)); done | cat; printf 'tail'",
            Duration::from_secs(60),
        );
        let e = r.unwrap();
        assert!(e.status_ok);
        assert_eq!(got.len(), 200_001);
        assert_eq!(got[0], "line 0");
        assert_eq!(got[123_456], "line 123456");
        assert_eq!(got[200_000], "tail");
    }

    #[test]
    fn a_silent_sacct_is_killed_when_the_budget_is_spent() {
        let t = Instant::now();
        let (r, got) = sh("echo first; sleep 30", Duration::from_millis(300));
        assert!(matches!(r, Err(SacctError::TimedOut(1))), "{:?}", r.err());
        assert_eq!(got, ["first"], "what came before the stall was delivered");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn the_consumers_own_time_is_not_a_wait() {
        // sacct answers at once; the consumer takes 400 ms a chunk, past a 300 ms budget
        // that sacct itself never comes near.
        let mut b = Budget::new(Duration::from_millis(300));
        let mut n = 0;
        let r = run_chunks(
            Path::new("sh"),
            &[
                "-c".into(),
                "for i in 1 2 3 4 5 6 7 8 9 10; do echo $i; done".into(),
            ],
            &mut b,
            &mut |c| {
                n += c.iter().filter(|&&b| b == b'\n').count();
                std::thread::sleep(Duration::from_millis(400));
            },
        );
        assert!(r.unwrap().status_ok);
        assert_eq!(n, 10);
        assert!(b.left > Duration::ZERO);
    }

    #[test]
    fn failure_keeps_stderr() {
        let (r, got) = sh(
            "echo 'sacct: error: bad' >&2; exit 1",
            Duration::from_secs(10),
        );
        let e = r.unwrap();
        assert!(!e.status_ok);
        assert!(got.is_empty());
        assert_eq!(e.stderr.trim(), "sacct: error: bad");
    }
}
