//! Phase marks: a job's own processes tell the step's recorder "a new phase begins here"
//! (`slurmwatch mark "epoch 3"`, or one datagram from the program itself), and the recorder
//! stores a row of the exact counters at that instant with the label.
//!
//! The wire is one Unix datagram per mark to the socket named in the task's
//! [`MARK_SOCKET_ENV`]: the payload is the label, nothing else. A datagram socket because a
//! sender never waits for the recorder (a full queue refuses at once, [`send`] says so) and
//! the kernel stamps each datagram with the sender's pid and uid (`SO_PASSCRED`), which the
//! recorder checks ([`same_job`]) before it stores anything. This module holds the rules both
//! ends share; the plugin's `marks` is the listening thread around them.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::collect::location::{step_and_job_dirs, CgroupLocation};

/// The task environment variable naming this step's mark socket (set by the plugin).
pub const MARK_SOCKET_ENV: &str = "SLURMWATCH_MARK";

/// Longest label kept, in bytes (cut at a character boundary).
pub const LABEL_MAX_BYTES: usize = 200;
/// Largest datagram read: longer ones are cut to it (and then to [`LABEL_MAX_BYTES`]).
pub const DATAGRAM_MAX_BYTES: usize = 1024;

/// Marks a step may store at once, then [`REFILL_PER_SECOND`]: a loop that marks every
/// iteration costs the job one row per mark, so a flood is cut off, counted and noted.
pub const BURST: u32 = 20;
pub const REFILL_PER_SECOND: u32 = 2;
/// Marks one step stores at most (about 30 bytes each with their rows' share).
pub const MOST_PER_STEP: u32 = 10_000;

/// The label a datagram carries: UTF-8 (invalid bytes replaced), control characters as
/// spaces, trimmed, at most [`LABEL_MAX_BYTES`]; `None` when nothing is left.
pub fn label_of(payload: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(payload);
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let mut label = clean.trim();
    if label.len() > LABEL_MAX_BYTES {
        let mut end = LABEL_MAX_BYTES;
        while !label.is_char_boundary(end) {
            end -= 1;
        }
        label = label[..end].trim_end();
    }
    (!label.is_empty()).then(|| label.to_string())
}

/// Whether a sender's cgroup is inside the same Slurm job as the recorder's own
/// slurmstepd: the two job directories are the same (v1: in the memory hierarchy, where
/// Slurm places every step). A process cannot move itself into another job's group, so this
/// is what makes a mark the job's own.
pub fn same_job(ours: &CgroupLocation, theirs: &CgroupLocation) -> bool {
    let job_dir = |l: &CgroupLocation| {
        let path = match l {
            CgroupLocation::V1 { memory, .. } => memory,
            CgroupLocation::V2 { path } => path,
        };
        step_and_job_dirs(path).map(|(_, job)| job)
    };
    let same_kind = matches!(
        (ours, theirs),
        (CgroupLocation::V1 { .. }, CgroupLocation::V1 { .. })
            | (CgroupLocation::V2 { .. }, CgroupLocation::V2 { .. })
    );
    same_kind && job_dir(ours).is_some_and(|o| job_dir(theirs) == Some(o))
}

/// Why a mark was not stored (counted per reason and noted once in the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Sent by another user, or by a process outside the job.
    NotTheJob,
    /// Past the flood bound.
    Flood,
    /// Empty, or no credentials came with it.
    Malformed,
}

/// The flood bound: a token bucket of [`BURST`] refilled at [`REFILL_PER_SECOND`], and at
/// most [`MOST_PER_STEP`] in all.
#[derive(Debug, Clone)]
pub struct FloodBound {
    tokens: f64,
    last: Instant,
    admitted: u32,
}

impl FloodBound {
    pub fn new(now: Instant) -> FloodBound {
        FloodBound {
            tokens: f64::from(BURST),
            last: now,
            admitted: 0,
        }
    }

    /// Whether a mark arriving at `now` is stored.
    pub fn admit(&mut self, now: Instant) -> bool {
        let gained = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + gained * f64::from(REFILL_PER_SECOND)).min(f64::from(BURST));
        if self.tokens < 1.0 || self.admitted >= MOST_PER_STEP {
            return false;
        }
        self.tokens -= 1.0;
        self.admitted += 1;
        true
    }
}

/// The recorder's answer to a mark from a named sender (what [`send`] waits for): `ok`, or
/// `refused: ` and why.
pub const ANSWER_OK: &[u8] = b"ok";
pub const ANSWER_REFUSED: &str = "refused: ";
/// The longest [`send`] waits for the recorder's answer. It waits because the recorder checks
/// the sender's cgroup in `/proc` while the sender lives: a `slurmwatch mark` that exited at
/// once would be gone before it is checked.
pub const ANSWER_WAIT: Duration = Duration::from_secs(2);

impl Refused {
    /// The answer's reason.
    pub fn why(self) -> &'static str {
        match self {
            Refused::NotTheJob => "not sent by the job's own processes",
            Refused::Flood => "over the flood bound",
            Refused::Malformed => "empty or without the sender's credentials",
        }
    }
}

/// Why a mark could not be handed to the recorder (the job goes on either way).
#[derive(Debug)]
pub enum SendError {
    /// No socket named: the step is not recorded, or its plugin is older.
    NotRecorded,
    /// The label is empty once cleaned.
    EmptyLabel,
    /// The recorder's queue is full: the mark is dropped, the sender not held.
    Busy,
    /// The recorder checked and refused it.
    Refused(String),
    /// No answer within [`ANSWER_WAIT`]: the recorder may be busy; the mark may be lost.
    NoAnswer,
    /// Anything else the kernel said (no recorder listening any more, permission…).
    Io(std::io::Error),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::NotRecorded => write!(
                f,
                "this step is not recorded by slurmwatch (${MARK_SOCKET_ENV} is not set): submit with --slurmwatch"
            ),
            SendError::EmptyLabel => write!(f, "the mark's label is empty: give it a name, e.g. `slurmwatch mark \"epoch 3\"`"),
            SendError::Busy => write!(f, "the recorder is busy: this mark was dropped (the job was not held)"),
            SendError::Refused(why) => write!(f, "the recorder refused this mark: {why}"),
            SendError::NoAnswer => write!(f, "the recorder did not answer within {} s: the mark may not be stored", ANSWER_WAIT.as_secs()),
            SendError::Io(e) => write!(f, "the mark did not reach the recorder: {e}"),
        }
    }
}

/// `SO_PASSCRED` on a Unix socket: the listener receives each sender's credentials with its
/// datagram; a sender that is not yet bound is bound to a fresh abstract name on send.
pub fn pass_credentials(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: a socket descriptor and a pointer to an int of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sends one mark (never waiting to send: a full queue is `Busy`) from an autobound abstract
/// address, then waits at most [`ANSWER_WAIT`] for the recorder's answer.
pub fn send(socket: Option<&Path>, label: &str) -> Result<(), SendError> {
    use std::os::fd::AsRawFd;
    let path = socket.ok_or(SendError::NotRecorded)?;
    let label = label_of(label.as_bytes()).ok_or(SendError::EmptyLabel)?;
    let sock = std::os::unix::net::UnixDatagram::unbound().map_err(SendError::Io)?;
    // SO_PASSCRED makes the kernel bind the socket to a fresh abstract name on send: the
    // address the recorder answers (an abstract name cannot be swapped for a link).
    pass_credentials(sock.as_raw_fd()).map_err(SendError::Io)?;
    sock.set_nonblocking(true).map_err(SendError::Io)?;
    match sock.send_to(label.as_bytes(), path) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Err(SendError::Busy),
        Err(e) => return Err(SendError::Io(e)),
    }
    sock.set_nonblocking(false).map_err(SendError::Io)?;
    sock.set_read_timeout(Some(ANSWER_WAIT))
        .map_err(SendError::Io)?;
    let mut buf = [0u8; 256];
    match sock.recv(&mut buf) {
        Ok(n) if &buf[..n] == ANSWER_OK => Ok(()),
        Ok(n) => Err(SendError::Refused(
            String::from_utf8_lossy(&buf[..n])
                .trim_start_matches(ANSWER_REFUSED)
                .to_string(),
        )),
        Err(_) => Err(SendError::NoAnswer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn labels_are_cleaned_and_bounded() {
        assert_eq!(label_of(b"  epoch 3\n").as_deref(), Some("epoch 3"));
        assert_eq!(label_of(b"a\x1b[31mred\x07").as_deref(), Some("a [31mred"));
        assert_eq!(
            label_of(b"\xff\xfeok").as_deref(),
            Some("\u{fffd}\u{fffd}ok")
        );
        assert_eq!(label_of(b" \t\r\n"), None);
        let long = "é".repeat(150);
        let cut = label_of(long.as_bytes()).unwrap();
        assert!(cut.len() <= LABEL_MAX_BYTES && cut.chars().all(|c| c == 'é'));
        assert_eq!(cut.len(), LABEL_MAX_BYTES);
    }

    fn v1(memory: &str) -> CgroupLocation {
        CgroupLocation::V1 {
            memory: PathBuf::from(memory),
            cpuacct: PathBuf::from(memory),
            blkio: None,
            pids: None,
        }
    }

    fn v2(path: &str) -> CgroupLocation {
        CgroupLocation::V2 {
            path: PathBuf::from(path),
        }
    }

    #[test]
    fn only_processes_of_the_same_job_are_its_own() {
        // slurmstepd's own group and a task's, as the kernel prints them (22.05 v1, 24.11 v2).
        let stepd = v1("/slurm/uid_1000/job_12/step_batch");
        assert!(same_job(
            &stepd,
            &v1("/slurm/uid_1000/job_12/step_0/task_1")
        ));
        assert!(!same_job(
            &stepd,
            &v1("/slurm/uid_1000/job_13/step_batch/task_0")
        ));
        assert!(!same_job(
            &stepd,
            &v1("/user.slice/user-1000.slice/session-3.scope")
        ));
        assert!(!same_job(&stepd, &v1("/")));
        let stepd = v2("/system.slice/slurmstepd.scope/job_12/step_batch/slurm");
        assert!(same_job(
            &stepd,
            &v2("/system.slice/slurmstepd.scope/job_12/step_batch/user/task_0")
        ));
        assert!(!same_job(
            &stepd,
            &v2("/system.slice/slurmstepd.scope/job_120/step_batch/user/task_0")
        ));
        assert!(!same_job(
            &stepd,
            &v1("/system.slice/slurmstepd.scope/job_12/step_0")
        ));
        // A recorder outside any step group recognises nobody.
        assert!(!same_job(&v2("/"), &v2("/")));
    }

    #[test]
    fn a_flood_is_cut_to_the_burst_then_the_refill() {
        let t0 = Instant::now();
        let mut bound = FloodBound::new(t0);
        let burst = (0..100).filter(|_| bound.admit(t0)).count();
        assert_eq!(burst, BURST as usize);
        // Ten seconds later, twenty more (two a second), no more.
        let later = t0 + Duration::from_secs(10);
        let refilled = (0..100).filter(|_| bound.admit(later)).count();
        assert_eq!(refilled, 20);
    }

    #[test]
    fn a_step_stores_at_most_its_share_of_marks() {
        let t0 = Instant::now();
        let mut bound = FloodBound::new(t0);
        let mut admitted = 0;
        for s in 0..20_000u64 {
            // One mark a second never runs out of tokens; the total bound stops it.
            if bound.admit(t0 + Duration::from_secs(s)) {
                admitted += 1;
            }
        }
        assert_eq!(admitted, MOST_PER_STEP);
    }

    #[test]
    fn sending_never_waits_and_says_why_it_failed() {
        use std::os::linux::net::SocketAddrExt;
        assert!(matches!(send(None, "x"), Err(SendError::NotRecorded)));
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("m.sock");
        assert!(matches!(send(Some(&path), "x"), Err(SendError::Io(_))));
        let listener = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        assert!(matches!(
            send(Some(&path), " \n"),
            Err(SendError::EmptyLabel)
        ));
        // A listener that answers: the sender waits for it, and hears a refusal.
        let answering = std::thread::spawn({
            let listener = listener.try_clone().unwrap();
            move || {
                let mut buf = [0u8; DATAGRAM_MAX_BYTES];
                let (n, from) = listener.recv_from(&mut buf).unwrap();
                assert_eq!(&buf[..n], b"epoch 3");
                assert!(from.as_abstract_name().is_some(), "autobound: {from:?}");
                let answer = format!("{ANSWER_REFUSED}{}", Refused::Flood.why());
                listener.send_to_addr(answer.as_bytes(), &from).unwrap();
            }
        });
        let got = send(Some(&path), "epoch 3");
        answering.join().unwrap();
        assert!(
            matches!(&got, Err(SendError::Refused(w)) if w == "over the flood bound"),
            "{got:?}"
        );
        // Nobody reads: the queue fills and the sender is told at once (a blocking send
        // would hang here instead); before that, each send waits out its answer.
        let sock = std::os::unix::net::UnixDatagram::unbound().unwrap();
        sock.set_nonblocking(true).unwrap();
        while sock.send_to(b"fill", &path).is_ok() {}
        assert!(matches!(send(Some(&path), "flood"), Err(SendError::Busy)));
    }
}
