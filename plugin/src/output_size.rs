//! The batch script's output files' sizes, for placing the job's progress lines in time
//! (`recording::output`, `store::output`). A size is read by `statx` of
//! `/proc/<task>/fd/{1,2}`: the magic link leads to the open file without a path lookup, and
//! nothing is opened or read. `AT_STATX_DONT_SYNC` and a mask without times keep a network
//! filesystem's client from asking its server or flushing, but a filesystem may still block,
//! so the reads run on a thread of their own: the sampler asks at each stored row and takes
//! the answer at a later row, never waiting (a stuck read only means no more sizes).

use slurmwatch_recorder::recording::output::FileSeen;
use slurmwatch_recorder::sys::{now_unix_ms, thread_cpu_usec};
use std::ffi::CString;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::time::Duration;

/// What one read saw, and when; and the reading thread's CPU so far (the sampler counts it
/// as its own: it is charged to the job as the sampler's is).
pub struct Seen {
    pub t_unix_ms: i64,
    pub out: Option<FileSeen>,
    pub err: Option<FileSeen>,
    pub thread_cpu_usec: Option<u64>,
}

/// The reading thread and the one request it may have in hand.
pub struct OutputWatch {
    ask: SyncSender<u32>,
    answers: Receiver<Seen>,
    pending: bool,
}

impl OutputWatch {
    pub fn start() -> Option<OutputWatch> {
        let (ask, asked) = mpsc::sync_channel::<u32>(1);
        let (answer, answers) = mpsc::channel();
        std::thread::Builder::new()
            .name("slurmwatch-out".into())
            .stack_size(64 * 1024)
            .spawn(move || {
                while let Ok(pid) = asked.recv() {
                    let t_unix_ms = now_unix_ms();
                    let (out, err) = (stat_fd(pid, 1), stat_fd(pid, 2));
                    let seen = Seen {
                        t_unix_ms,
                        out,
                        err,
                        thread_cpu_usec: thread_cpu_usec(),
                    };
                    if answer.send(seen).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some(OutputWatch {
            ask,
            answers,
            pending: false,
        })
    }

    /// The answer to the last request if it has come (never waits longer than `wait`), and
    /// a new request for `pid`'s files once none is pending.
    pub fn poll(&mut self, pid: u32, wait: Duration) -> Option<Seen> {
        let got = if self.pending {
            match self.answers.recv_timeout(wait) {
                Ok(s) => Some(s),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        } else {
            self.answers.try_recv().ok()
        };
        if got.is_some() {
            self.pending = false;
        }
        if !self.pending && self.ask.try_send(pid).is_ok() {
            self.pending = true;
        }
        got
    }
}

/// A regular file open on `fd` of `pid`, as `statx` sees it without syncing; `None` for
/// anything else (a pipe, a terminal, /dev/null, a process gone).
fn stat_fd(pid: u32, fd: u32) -> Option<FileSeen> {
    let path = CString::new(format!("/proc/{pid}/fd/{fd}")).ok()?;
    // SAFETY: zeroed statx is a valid output buffer.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let mask = libc::STATX_TYPE | libc::STATX_INO | libc::STATX_SIZE;
    // SAFETY: a NUL-terminated path and a valid buffer; the call follows the magic link to the
    // open file and reads its attributes, opening nothing.
    let rc = unsafe {
        libc::statx(
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_STATX_DONT_SYNC,
            mask,
            &mut st,
        )
    };
    let regular = u32::from(st.stx_mode) & libc::S_IFMT == libc::S_IFREG;
    (rc == 0 && st.stx_mask & mask == mask && regular).then(|| FileSeen {
        dev: (u64::from(st.stx_dev_major) << 32) | u64::from(st.stx_dev_minor),
        ino: st.stx_ino,
        bytes: st.stx_size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_regular_file_on_a_descriptor_is_seen_and_a_pipe_is_not() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"12345").unwrap();
        use std::os::fd::AsRawFd;
        let pid = std::process::id();
        let seen = stat_fd(pid, f.as_raw_fd() as u32).expect("a regular file");
        assert_eq!(seen.bytes, 5);
        let (r, _w) = std::io::pipe().unwrap();
        assert_eq!(stat_fd(pid, r.as_raw_fd() as u32), None);
        assert_eq!(stat_fd(pid, 9999), None);
    }

    #[test]
    fn the_watch_answers_a_later_poll_and_never_holds_the_sampler() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        let mut w = OutputWatch::start().unwrap();
        let pid = std::process::id();
        assert!(
            w.poll(pid, Duration::ZERO).is_none(),
            "the first poll only asks"
        );
        f.write_all(b"abc").unwrap();
        // The answer comes within the bounded wait of a later poll.
        let seen = w.poll(pid, Duration::from_secs(5)).expect("an answer");
        assert!(seen.t_unix_ms > 0);
    }
}
