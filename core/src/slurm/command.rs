//! Runs Slurm's commands with a bounded time, a pinned time format and locale, so their
//! output is the same on every site and a hung `slurmctld` never hangs the caller.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// How long a Slurm query may take before we give up on it (a busy controller answers in
/// well under a second; a dead one never does).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a Slurm command gave no usable output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// The program is not on `PATH`: no Slurm client here.
    #[error("{program} is not on PATH (no Slurm client on this machine)")]
    NotFound { program: String },
    #[error("{program} did not answer within {seconds} s (is slurmctld up?)")]
    Timeout { program: String, seconds: u64 },
    #[error("cannot run {program}: {message}")]
    Spawn { program: String, message: String },
}

/// What a finished command printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    pub success: bool,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The first line of stderr, trimmed: Slurm puts its one-sentence reason there.
    pub fn reason(&self) -> String {
        self.stderr.lines().next().unwrap_or("").trim().to_string()
    }
}

/// Runs `program args…` with `SLURM_TIME_FORMAT=standard` and `LC_ALL=C`, killing it after
/// `timeout`. Output is read on threads, so a large answer never blocks on a full pipe.
pub fn run(program: &str, args: &[&str], timeout: Duration) -> Result<Finished, CommandError> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_command(cmd, timeout, None)
}

/// [`run`] for a client of slurmdbd (`sacct`, `sacctmgr`): the same, with the TCP shim
/// preloaded ([`quickack`](super::quickack)), so a request does not wait on delayed
/// acknowledgements. Never for `srun` or `sbatch`: their environment reaches the job's tasks.
pub fn run_dbd_client(
    program: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<Finished, CommandError> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    super::quickack::preload_into(&mut cmd);
    run_command(cmd, timeout, None)
}

/// What every Slurm command runs with: `SLURM_TIME_FORMAT=standard` and `LC_ALL=C`, so a
/// user's `SLURM_TIME_FORMAT=relative` or locale never rewrites what is parsed.
pub fn pin_environment(cmd: &mut Command) -> &mut Command {
    cmd.env("SLURM_TIME_FORMAT", "standard").env("LC_ALL", "C")
}

/// [`run`] for a command the caller has built (its program, arguments and environment),
/// with the same pinned environment and bounded time. With `grace`, a command that runs
/// past `timeout` gets SIGTERM first (srun then cancels the step it started) and SIGKILL
/// only if it is still there `grace` later.
pub fn run_command(
    cmd: Command,
    timeout: Duration,
    grace: Option<Duration>,
) -> Result<Finished, CommandError> {
    run_inner(cmd, timeout, grace, None)
}

/// [`run`] with `input` written to the command's stdin (then closed), on a thread of its
/// own: a command that never reads cannot block the caller past `timeout`.
pub fn run_with_input(
    program: &str,
    args: &[&str],
    input: &[u8],
    timeout: Duration,
) -> Result<Finished, CommandError> {
    let mut cmd = Command::new(program);
    cmd.args(args);
    run_inner(cmd, timeout, None, Some(input.to_vec()))
}

fn run_inner(
    mut cmd: Command,
    timeout: Duration,
    grace: Option<Duration>,
    input: Option<Vec<u8>>,
) -> Result<Finished, CommandError> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let program = program.as_str();
    let mut child = pin_environment(&mut cmd)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CommandError::NotFound {
                program: program.to_string(),
            },
            _ => CommandError::Spawn {
                program: program.to_string(),
                message: e.to_string(),
            },
        })?;
    let pid = child.id();
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A write to a killed child fails (EPIPE; Rust ignores SIGPIPE): the thread ends.
        std::thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, &input);
        });
    }
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let err_thread = std::thread::spawn(move || {
            let mut s = Vec::new();
            if let Some(e) = err.as_mut() {
                let _ = e.read_to_end(&mut s);
            }
            s
        });
        let mut o = Vec::new();
        if let Some(out) = out.as_mut() {
            let _ = out.read_to_end(&mut o);
        }
        let e = err_thread.join().unwrap_or_default();
        let status = child.wait();
        let _ = tx.send((status, o, e));
    });
    let mut answer = rx.recv_timeout(timeout);
    if let (Err(_), Some(grace)) = (&answer, grace) {
        // SAFETY: as below: the child is not reaped while the waiting thread has not sent.
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
        }
        answer = rx.recv_timeout(grace);
        if answer.is_ok() {
            // It ended on SIGTERM, but past its time all the same.
            return Err(CommandError::Timeout {
                program: program.to_string(),
                seconds: timeout.as_secs(),
            });
        }
    }
    match answer {
        Ok((status, o, e)) => {
            let status = status.map_err(|e| CommandError::Spawn {
                program: program.to_string(),
                message: e.to_string(),
            })?;
            Ok(Finished {
                success: status.success(),
                code: status.code(),
                stdout: String::from_utf8_lossy(&o).into_owned(),
                stderr: String::from_utf8_lossy(&e).into_owned(),
            })
        }
        Err(_) => {
            // SAFETY: plain kill(2) of the child we spawned; it has not been reaped (the
            // waiting thread is still blocked on its pipes), so the pid is still ours.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
            Err(CommandError::Timeout {
                program: program.to_string(),
                seconds: timeout.as_secs(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_program_is_not_found() {
        let e = run("slurmwatch-no-such-program", &[], DEFAULT_TIMEOUT).unwrap_err();
        assert!(matches!(e, CommandError::NotFound { .. }), "{e}");
    }

    #[test]
    fn output_and_status_are_returned() {
        let f = run(
            "sh",
            &["-c", "echo $LC_ALL; echo oops >&2; exit 3"],
            DEFAULT_TIMEOUT,
        )
        .unwrap();
        assert_eq!(f.stdout, "C\n");
        assert_eq!(f.reason(), "oops");
        assert_eq!(f.code, Some(3));
        assert!(!f.success);
    }

    /// Input reaches stdin; a command that never reads a large input is still bounded.
    #[test]
    fn input_is_fed_to_stdin_within_the_bound() {
        let f = run_with_input("sh", &["-c", "tr a-z A-Z"], b"payload", DEFAULT_TIMEOUT).unwrap();
        assert_eq!(f.stdout, "PAYLOAD");
        let t = std::time::Instant::now();
        let big = vec![b'x'; 4 << 20];
        let e = run_with_input("sleep", &["30"], &big, Duration::from_millis(300));
        assert!(matches!(e, Err(CommandError::Timeout { .. })), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn with_grace_a_hung_command_gets_sigterm_then_sigkill() {
        // Ends on SIGTERM: reported as a timeout all the same, promptly.
        let mut c = Command::new("sh");
        c.args(["-c", "trap 'exit 0' TERM; while :; do sleep 0.1; done"]);
        let t = std::time::Instant::now();
        let e = run_command(c, Duration::from_millis(200), Some(Duration::from_secs(5)));
        assert!(matches!(e, Err(CommandError::Timeout { .. })), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(4));
        // Ignores SIGTERM: killed once the grace is over.
        let mut c = Command::new("sh");
        c.args(["-c", "trap '' TERM; sleep 30"]);
        let t = std::time::Instant::now();
        let e = run_command(
            c,
            Duration::from_millis(200),
            Some(Duration::from_millis(300)),
        );
        assert!(matches!(e, Err(CommandError::Timeout { .. })), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_hung_command_is_killed() {
        let t = std::time::Instant::now();
        let e = run("sleep", &["30"], Duration::from_millis(200)).unwrap_err();
        assert!(matches!(e, CommandError::Timeout { .. }));
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}
