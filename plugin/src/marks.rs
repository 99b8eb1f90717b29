//! The step's mark socket: a thread that takes the job's phase marks (see
//! `slurmwatch_recorder::recording::marks`) and hands each one the job's own processes sent to
//! the sampler, which stores a row of the counters at that instant.
//!
//! The socket is made by root in the root-owned spool, then given to the job's user with
//! mode 0600: only that user (and root) can send. Each datagram carries the kernel's stamp
//! of the sender (`SO_PASSCRED`); a mark is stored only when the sender is the job's user
//! and its cgroup is inside this job. The thread waits for datagrams without a timeout (an
//! idle step costs no wake-up): stopping shuts the socket down, which wakes it; it never
//! calls Slurm.

use slurmwatch_recorder::collect::location::{locate, locate_step_of_stepd, CgroupLocation};
use slurmwatch_recorder::collect::PROC_ROOT;
use slurmwatch_recorder::recording::marks::{self, FloodBound, Refused, DATAGRAM_MAX_BYTES};
use slurmwatch_recorder::sys::now_unix_ms;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The longest a stop waits for the thread (the shutdown wakes it at once).
const STOP_WAIT: Duration = Duration::from_millis(200);

/// A mark the sampler stores: when it arrived and its label.
pub struct Mark {
    pub t_unix_ms: i64,
    pub label: String,
}

/// Marks not stored, by reason (noted in the file at the step's end).
#[derive(Default)]
pub struct RefusedCounts {
    pub not_the_job: AtomicU32,
    pub flood: AtomicU32,
    pub malformed: AtomicU32,
}

impl RefusedCounts {
    fn count(&self, why: Refused) {
        let c = match why {
            Refused::NotTheJob => &self.not_the_job,
            Refused::Flood => &self.flood,
            Refused::Malformed => &self.malformed,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// One sentence for the file's events, or `None` when every mark was stored.
    pub fn text(&self) -> Option<String> {
        let parts: Vec<String> = [
            (&self.not_the_job, Refused::NotTheJob),
            (&self.flood, Refused::Flood),
            (&self.malformed, Refused::Malformed),
        ]
        .iter()
        .filter_map(|(n, why)| {
            let n = n.load(Ordering::Relaxed);
            (n > 0).then(|| format!("{n} {}", why.why()))
        })
        .collect();
        (!parts.is_empty()).then(|| format!("marks refused: {}", parts.join(", ")))
    }
}

/// The running listener; [`Listener::stop`] ends it and removes the socket.
pub struct Listener {
    path: PathBuf,
    /// The socket, to shut down on stop: that wakes the thread's wait at once.
    sock: UnixDatagram,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub refused: Arc<RefusedCounts>,
}

/// Who may mark: the job's user, from inside the job's cgroup.
#[derive(Clone, Copy)]
pub struct Owner {
    pub uid: u32,
    pub gid: u32,
}

impl Listener {
    /// Binds `path` (a name in the root-owned spool; anything left there by an earlier step
    /// is removed first) and starts the thread that sends each admitted mark to `to`.
    pub fn start<M: Send + 'static>(
        path: PathBuf,
        owner: Owner,
        to: Sender<M>,
        wrap: fn(Mark) -> M,
    ) -> Result<Listener, String> {
        let sock = bind(&path, owner)?;
        let theirs = sock
            .try_clone()
            .map_err(|e| format!("not taking marks: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(RefusedCounts::default());
        let (flag, counts) = (stop.clone(), refused.clone());
        let thread = std::thread::Builder::new()
            .name("slurmwatch-mark".into())
            .stack_size(64 * 1024)
            .spawn(move || listen(&theirs, owner, (&flag, &counts), |m| to.send(wrap(m))))
            .map_err(|e| format!("cannot start the mark thread: {e}"))?;
        Ok(Listener {
            path,
            sock,
            stop,
            thread: Some(thread),
            refused,
        })
    }

    /// Stops taking marks: removes the socket and shuts it down, which ends the thread's
    /// wait at once (the callback that stops it is on the step's exit path), then joins it;
    /// a thread still busy after [`STOP_WAIT`] is left behind. Whether it was joined.
    pub fn stop(&mut self) -> bool {
        self.stop.store(true, Ordering::Relaxed);
        let _ = std::fs::remove_file(&self.path);
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        if let Some(t) = self.thread.take() {
            let end = Instant::now() + STOP_WAIT;
            while !t.is_finished() && Instant::now() < end {
                std::thread::sleep(Duration::from_micros(100));
            }
            if !t.is_finished() {
                return false;
            }
            let _ = t.join();
        }
        true
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// The socket, its owner the job's user and its mode 0600, with credentials passed.
fn bind(path: &Path, owner: Owner) -> Result<UnixDatagram, String> {
    use std::os::unix::ffi::OsStrExt;
    // The spool is root's alone: what is at this name is a stale socket of ours.
    let _ = std::fs::remove_file(path);
    let sock = UnixDatagram::bind(path)
        .map_err(|e| format!("not taking marks: cannot bind {}: {e}", path.display()))?;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // SAFETY: a NUL-terminated path; lchown/chmod on the name just made in root's spool.
    let owned = unsafe { libc::lchown(c.as_ptr(), owner.uid, owner.gid) == 0 };
    // SAFETY: as above.
    let moded = unsafe { libc::chmod(c.as_ptr(), 0o600) == 0 };
    let passcred = marks::pass_credentials(sock.as_raw_fd()).is_ok();
    if !(owned && moded && passcred) {
        let _ = std::fs::remove_file(path);
        return Err(format!(
            "not taking marks: cannot hand {} to the job's user: {}",
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(sock)
}

/// The thread's loop: until `stop`, each datagram is checked and, when admitted, handed on.
fn listen<E>(
    sock: &UnixDatagram,
    owner: Owner,
    (stop, refused): (&AtomicBool, &RefusedCounts),
    mut hand: impl FnMut(Mark) -> Result<(), E>,
) {
    // slurmstepd's own step group, found at the first mark: it moves itself there only
    // after this thread starts. Without one (no cgroup) no sender can be told apart.
    let mut ours: Option<CgroupLocation> = None;
    let mut bound = FloodBound::new(Instant::now());
    let mut buf = vec![0u8; DATAGRAM_MAX_BYTES];
    let mut failed_in_a_row = 0;
    while !stop.load(Ordering::Relaxed) {
        let Some(r) = receive(sock, &mut buf) else {
            // An interrupted wait; a socket that keeps failing is given up, never spun on.
            failed_in_a_row += 1;
            if failed_in_a_row > 100 {
                return;
            }
            continue;
        };
        failed_in_a_row = 0;
        if stop.load(Ordering::Relaxed) {
            break; // woken by the shutdown, not by a mark
        }
        let verdict = r
            .cred
            .ok_or(Refused::Malformed)
            .and_then(|c| {
                if ours.is_none() {
                    ours = locate_step_of_stepd(Path::new(PROC_ROOT), std::process::id());
                }
                sender_is_the_job(c, owner, ours.as_ref().ok_or(Refused::NotTheJob)?)
            })
            .and_then(|()| marks::label_of(&buf[..r.len]).ok_or(Refused::Malformed))
            .and_then(|label| {
                bound
                    .admit(Instant::now())
                    .then_some(label)
                    .ok_or(Refused::Flood)
            });
        // Counted before the answer, so that a sender told "refused" finds it counted.
        if let Err(why) = verdict {
            refused.count(why);
        }
        answer(sock, &r, verdict.as_ref().map(|_| ()).map_err(|w| *w));
        if let Ok(label) = verdict {
            let mark = Mark {
                t_unix_ms: now_unix_ms(),
                label,
            };
            if hand(mark).is_err() {
                return;
            }
        }
    }
}

/// The job's user, and a pid whose cgroup is inside this job.
fn sender_is_the_job(
    cred: libc::ucred,
    owner: Owner,
    ours: &CgroupLocation,
) -> Result<(), Refused> {
    let pid = u32::try_from(cred.pid).map_err(|_| Refused::NotTheJob)?;
    let theirs = locate(Path::new(PROC_ROOT), pid).map_err(|_| Refused::NotTheJob)?;
    (cred.uid == owner.uid && marks::same_job(ours, &theirs))
        .then_some(())
        .ok_or(Refused::NotTheJob)
}

/// Closes descriptors a sender passed along (`SCM_RIGHTS`): the kernel has installed them
/// in slurmstepd, and a sender could otherwise fill its table. (The buffer has room for a
/// few; the rest the kernel drops and closes itself, `MSG_CTRUNC`.)
///
/// # Safety
/// `c` is an `SCM_RIGHTS` header within a buffer `recvmsg` filled.
unsafe fn close_passed_fds(c: *const libc::cmsghdr) {
    let header = libc::CMSG_LEN(0) as usize;
    let count = (*c).cmsg_len.saturating_sub(header) / std::mem::size_of::<libc::c_int>();
    let data = libc::CMSG_DATA(c).cast::<libc::c_int>();
    for i in 0..count {
        libc::close(std::ptr::read_unaligned(data.add(i)));
    }
}

/// What one `recvmsg` gave: the datagram's length (cut to the buffer), the sender's
/// credentials if the kernel sent them, and the sender's address.
struct Received {
    len: usize,
    cred: Option<libc::ucred>,
    from: libc::sockaddr_un,
    from_len: libc::socklen_t,
}

/// One datagram; `None` on an error.
fn receive(sock: &UnixDatagram, buf: &mut [u8]) -> Option<Received> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for one SCM_CREDENTIALS message, aligned as cmsg(3) requires.
    let mut control = [0u64; 8];
    // SAFETY: zeroed msghdr and sockaddr_un are valid empty values; the pointers set below
    // outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    let mut from: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_un).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: a valid socket and a msghdr whose buffers are live and sized as declared.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    let n = usize::try_from(n).ok()?;
    // SAFETY: msg was filled by recvmsg; CMSG_* walk only within msg_controllen.
    let cred = unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        let mut found = None;
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                found = Some(std::ptr::read_unaligned(
                    libc::CMSG_DATA(c).cast::<libc::ucred>(),
                ));
            }
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                close_passed_fds(c);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        found
    };
    Some(Received {
        len: n.min(buf.len()),
        cred,
        from_len: msg.msg_namelen,
        from,
    })
}

/// Tells the sender the verdict, without ever waiting, and only at an abstract address (the
/// name its socket was given on send): a path could be swapped for a link to another
/// socket, which root must never write to.
fn answer(sock: &UnixDatagram, r: &Received, verdict: Result<(), Refused>) {
    let family = std::mem::size_of::<libc::sa_family_t>() as libc::socklen_t;
    if r.from_len <= family || r.from.sun_path[0] != 0 {
        return;
    }
    let text = match verdict {
        Ok(()) => marks::ANSWER_OK.to_vec(),
        Err(why) => format!("{}{}", marks::ANSWER_REFUSED, why.why()).into_bytes(),
    };
    // SAFETY: a valid socket, a buffer of the length given, and the address recvmsg filled.
    unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            text.as_ptr().cast(),
            text.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            (&r.from as *const libc::sockaddr_un).cast(),
            r.from_len,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Owner {
        // SAFETY: no failure modes.
        unsafe {
            Owner {
                uid: libc::geteuid(),
                gid: libc::getegid(),
            }
        }
    }

    /// Outside any Slurm step (this test process), every sender is refused and counted; the
    /// socket is the owner's with mode 0600, and stopping removes it.
    #[test]
    fn a_sender_outside_the_job_is_refused_and_counted() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("1.batch.mark");
        let (tx, rx) = std::sync::mpsc::channel::<Mark>();
        let mut l = Listener::start(path.clone(), me(), tx, |m| m).unwrap();
        let md = std::fs::symlink_metadata(&path).unwrap();
        assert_eq!(
            (md.uid(), md.permissions().mode() & 0o777),
            (me().uid, 0o600)
        );
        // The sender waits for the verdict, and hears why.
        let got = marks::send(Some(&path), "epoch 1");
        assert!(
            matches!(&got, Err(marks::SendError::Refused(w)) if w == "not sent by the job's own processes"),
            "{got:?}"
        );
        assert!(l.stop(), "the shutdown woke the thread, which ended");
        assert!(rx.try_recv().is_err(), "nothing handed on");
        assert_eq!(
            l.refused.text().as_deref(),
            Some("marks refused: 1 not sent by the job's own processes")
        );
        assert!(!path.exists(), "the socket is removed at stop");
    }
}
