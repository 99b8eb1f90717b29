//! Finding and reading the job's own stdout/stderr for the report: where Slurm put them
//! (`scontrol show job` while the controller still knows the job, else sbatch's command line
//! from sacct's `SubmitLine`, else Slurm's default `slurm-%j.out` in the work dir, or the
//! files given with `--log`), read safely and boundedly, then scanned by
//! [`crate::analysis::joblog`].
//!
//! Safety: only the reported job's logs are read; at most [`LOG_TAIL_BYTES`] of each (the
//! tail). A user may read only their own jobs' logs. The path is the user's choice (it can
//! name a device, or lead through a directory the user swapped for a symlink to `/dev`), so
//! root never opens it: a thread of its own switches to the job user's filesystem identity
//! ([`crate::as_user`]), takes an `O_PATH|O_NOFOLLOW` handle (a lookup only: no device's open
//! runs), `fstat`s it, and opens for reading only a regular file owned by the job's user,
//! through that handle (`/proc/self/fd`: the inode checked, not the name again) — all within
//! [`ROOT_LOG_DEADLINE`] (a FUSE or dead NFS path cannot hang the report).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::analysis::joblog::{self, PatternVars, Scan, LOG_TAIL_BYTES};
use crate::slurm::job_id::JobId;
use crate::slurm::{sacct, scontrol};

/// One log file the report looked at.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LogFile {
    /// `stdout`, `stderr`, `stdout+stderr` (one file for both, Slurm's default) or `given`.
    pub stream: &'static str,
    pub path: String,
    /// `option` (`--log`), `scontrol`, `submit_line` (sacct's SubmitLine), `slurm_default`
    /// (`slurm-%j.out` in the work dir).
    pub found_by: &'static str,
    pub size_bytes: Option<u64>,
    pub bytes_read: Option<u64>,
    /// Only the last [`LOG_TAIL_BYTES`] were read.
    pub truncated: bool,
    /// Why it was not read, or null.
    pub error: Option<String>,
}

/// The report's `log` object.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct LogInfo {
    pub files: Vec<LogFile>,
    /// The codes of the findings that came from the log.
    pub codes: Vec<&'static str>,
    /// A sentence when no log could be located or some of it is uncertain.
    pub note: Option<String>,
}

/// Where the job's output went, before expansion.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Located {
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub work_dir: Option<String>,
    pub vars: PatternVars,
    pub found_by: &'static str,
    /// The job's owner, when the source said.
    pub uid: Option<u32>,
}

fn field<'a>(fields: &'a [(String, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !matches!(*v, "" | "(null)" | "N/A" | "None" | "Unknown" | "n/a"))
}

/// From `scontrol show job -o ID` (the first record).
pub fn from_scontrol(text: &str) -> Option<Located> {
    let fields = scontrol::parse_record(text.lines().find(|l| l.contains("JobId="))?);
    let job_id = JobId::own(field(&fields, "JobId")?)?;
    let array_job_id = field(&fields, "ArrayJobId").and_then(JobId::own);
    let (user, uid) = match field(&fields, "UserId").and_then(|u| u.split_once('(')) {
        Some((n, id)) => (n.to_string(), id.trim_end_matches(')').parse().ok()),
        None => (field(&fields, "UserId").unwrap_or("").to_string(), None),
    };
    // A task number through the one parser too: as the task of `<array>_<task>`.
    let array_task_id = field(&fields, "ArrayTaskId").and_then(|t| {
        match JobId::parse(&format!("{}_{t}", array_job_id.unwrap_or(job_id))) {
            Ok(JobId::ArrayTask { task, .. }) => Some(task),
            _ => None,
        }
    });
    Some(Located {
        stdout: field(&fields, "StdOut").map(str::to_string),
        stderr: field(&fields, "StdErr").map(str::to_string),
        work_dir: field(&fields, "WorkDir").map(str::to_string),
        vars: PatternVars {
            job_id,
            array_job_id,
            array_task_id,
            job_name: fields
                .iter()
                .find(|(k, _)| k == "JobName")
                .map(|(_, v)| v.clone())
                .unwrap_or_default(),
            node: field(&fields, "BatchHost").unwrap_or("").to_string(),
            user,
        },
        found_by: "scontrol",
        uid,
    })
}

/// From sacct's record and its `SubmitLine` (which keeps only what was typed on sbatch's
/// command line: `#SBATCH --output` lines in the script are not there).
pub fn from_sacct(acct: &sacct::JobAccounting, submit_line: Option<&str>) -> Option<Located> {
    let j = &acct.job;
    let raw = acct.raw_id()?;
    let (array_job_id, array_task_id) = match JobId::parse(&j.job_id) {
        Ok(JobId::ArrayTask { array, task }) => (Some(array), Some(task)),
        _ => (None, None),
    };
    let node = j
        .node_list
        .as_deref()
        .and_then(|l| crate::slurm::hostlist::expand(l).ok())
        .and_then(|h| h.into_iter().next())
        .unwrap_or_default();
    let opts = submit_line.and_then(joblog::parse_submit_line);
    let work_dir = j
        .work_dir
        .clone()
        .or_else(|| opts.as_ref().and_then(|o| o.chdir.clone()));
    let (stdout, stderr, found_by) = match &opts {
        Some(o) if o.output.is_some() || o.error.is_some() => {
            (o.output.clone(), o.error.clone(), "submit_line")
        }
        _ => (None, None, "slurm_default"),
    };
    Some(Located {
        stdout,
        stderr,
        work_dir,
        vars: PatternVars {
            job_id: raw,
            array_job_id,
            array_task_id,
            job_name: j.job_name.clone(),
            node,
            user: j.user.clone().unwrap_or_default(),
        },
        found_by,
        uid: j.uid,
    })
}

/// A job's log files as [`Located::paths`] gives them: `(stream, path, found by)`.
pub type LogPaths = Vec<(&'static str, PathBuf, &'static str)>;

/// The job's log files and the uid whose they are, the one way the report and the live view
/// find them: the controller's record (`scontrol show job -o`, kept only when it is job
/// `raw_id`'s: the controller may answer for another task of an array), else sacct's
/// `SubmitLine` or Slurm's default; `owner` is the caller's best uid, the controller's word
/// wins over it.
pub fn locate(
    controller: Option<&str>,
    acct: Option<&sacct::JobAccounting>,
    raw_id: Option<u32>,
    owner: Option<u32>,
) -> (LogPaths, Option<u32>) {
    let from_ctl = controller
        .and_then(from_scontrol)
        .filter(|l| raw_id.is_none_or(|raw| raw == l.vars.job_id));
    // sacct's one answer already holds the SubmitLine: no second query.
    let located = from_ctl.or_else(|| {
        let a = acct?;
        from_sacct(a, a.job.submit_line.as_deref())
    });
    match located {
        Some(l) => {
            let owner = match l.found_by {
                "scontrol" => l.uid.or(owner),
                _ => owner,
            };
            (l.paths(), owner)
        }
        None => (Vec::new(), owner),
    }
}

impl Located {
    /// The files, expanded and made absolute (relative to the work dir); one entry when
    /// stdout and stderr are the same file. Slurm's default when no `--output` was given.
    pub fn paths(&self) -> Vec<(&'static str, PathBuf, &'static str)> {
        let array = self.vars.array_task_id.is_some();
        let out_pat = self
            .stdout
            .clone()
            .unwrap_or_else(|| joblog::default_pattern(array).to_string());
        let found_out = if self.stdout.is_some() {
            self.found_by
        } else {
            "slurm_default"
        };
        let abs = |p: String| -> PathBuf {
            let p = PathBuf::from(joblog::expand(&p, &self.vars));
            match &self.work_dir {
                Some(w) if p.is_relative() => Path::new(w).join(p),
                _ => p,
            }
        };
        let out = abs(out_pat);
        let err = self.stderr.clone().map(abs);
        match err {
            Some(e) if e != out => vec![("stdout", out, found_out), ("stderr", e, self.found_by)],
            _ => vec![("stdout+stderr", out, found_out)],
        }
    }
}

/// The tail of a log: text, size, bytes read, truncated.
#[derive(Debug)]
pub struct Tail {
    pub text: String,
    pub size: u64,
    pub read: u64,
    pub truncated: bool,
}

/// How long root waits for one log to be found and read as the job's user.
pub const ROOT_LOG_DEADLINE: Duration = Duration::from_secs(5);

/// Reads the last `max` bytes of `path` for the job owned by `owner_uid`, as the caller's
/// effective uid allows (module docs). The partial first line of a cut tail is dropped.
pub fn read_tail(path: &Path, owner_uid: Option<u32>, max: u64) -> Result<Tail, String> {
    // SAFETY: geteuid has no failure mode.
    let euid = unsafe { libc::geteuid() };
    let Some(owner) = owner_uid else {
        return Err("the job's owner is not known, so its log is not read".into());
    };
    if euid == 0 {
        return read_tail_as_user(path, owner, max, ROOT_LOG_DEADLINE);
    }
    if euid != owner {
        return Err(format!(
            "the job belongs to uid {owner}; only its owner or root reads its log"
        ));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT) => "no such file".to_string(),
            _ => e.to_string(),
        })?;
    let md = f.metadata().map_err(|e| e.to_string())?;
    if !md.file_type().is_file() {
        return Err("not a regular file".into());
    }
    tail_of(f, md.len(), max)
}

/// Root's way (module docs): on a thread of its own, as `owner`, within `deadline`.
fn read_tail_as_user(
    path: &Path,
    owner: u32,
    max: u64,
    deadline: Duration,
) -> Result<Tail, String> {
    let Some(gid) = crate::sys::user_gid(owner) else {
        return Err(format!(
            "uid {owner} is not a user of this host: its log is not read as root"
        ));
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let p = path.to_path_buf();
    std::thread::Builder::new()
        .name("slurmwatch-log".into())
        .spawn(move || {
            let r = crate::as_user::with_user_fs(owner, gid, || open_checked(&p, owner, max))
                .and_then(|r| r);
            let _ = tx.send(r);
        })
        .map_err(|e| format!("cannot start the log reader: {e}"))?;
    // A lookup stuck on a hung filesystem leaves its thread behind; the process ends anyway.
    rx.recv_timeout(deadline).unwrap_or_else(|_| {
        Err(format!(
            "not read: it took longer than {} s to reach (a hung filesystem?)",
            deadline.as_secs()
        ))
    })
}

/// Runs as the job's user: a handle to the path that opens nothing, checked, then the
/// checked inode opened for reading.
fn open_checked(path: &Path, owner: u32, max: u64) -> Result<Tail, String> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| "the path holds a NUL byte".to_string())?;
    // SAFETY: a NUL-terminated path; O_PATH runs no open of the file itself.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOENT) => "no such file".to_string(),
            _ => e.to_string(),
        });
    }
    // SAFETY: a fresh descriptor that we now own.
    let handle = unsafe { File::from_raw_fd(fd) };
    let md = handle.metadata().map_err(|e| e.to_string())?;
    if md.file_type().is_symlink() {
        return Err("it is a symbolic link (not followed as root)".into());
    }
    if !md.file_type().is_file() {
        return Err("not a regular file: not opened as root".into());
    }
    if md.uid() != owner {
        return Err(format!(
            "owned by uid {}, not by the job's user (uid {owner}): not read as root",
            md.uid()
        ));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{}", handle.as_raw_fd()))
        .map_err(|e| e.to_string())?;
    let now = f.metadata().map_err(|e| e.to_string())?;
    if (now.dev(), now.ino()) != (md.dev(), md.ino()) {
        return Err("it changed while being opened: not read".into());
    }
    tail_of(f, now.len(), max)
}

/// The last `max` of `size` bytes of the open file `f`.
fn tail_of(mut f: File, size: u64, max: u64) -> Result<Tail, String> {
    let start = size.saturating_sub(max);
    f.seek(SeekFrom::Start(start)).map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(max.min(size) as usize);
    f.take(max)
        .read_to_end(&mut buf)
        .map_err(|e| e.to_string())?;
    let read = buf.len() as u64;
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    if start > 0 {
        if let Some(i) = text.find('\n') {
            text.drain(..=i);
        }
    }
    Ok(Tail {
        text,
        size,
        read,
        truncated: start > 0,
    })
}

/// Reads and scans each file; the scans merged in order (stderr after stdout).
pub fn gather(
    files: &[(&'static str, PathBuf, &'static str)],
    owner_uid: Option<u32>,
) -> (LogInfo, Scan) {
    let mut info = LogInfo::default();
    let mut scan = Scan::default();
    for (stream, path, found_by) in files {
        let mut lf = LogFile {
            stream,
            path: path.display().to_string(),
            found_by,
            size_bytes: None,
            bytes_read: None,
            truncated: false,
            error: None,
        };
        if path == Path::new("/dev/null") {
            lf.error = Some("discarded: the job wrote it to /dev/null".into());
            info.files.push(lf);
            continue;
        }
        match read_tail(path, owner_uid, LOG_TAIL_BYTES) {
            Ok(t) => {
                lf.size_bytes = Some(t.size);
                lf.bytes_read = Some(t.read);
                lf.truncated = t.truncated;
                scan.merge(joblog::scan(&t.text));
            }
            Err(e) => lf.error = Some(e),
        }
        info.files.push(lf);
    }
    let failed = |f: &LogFile| f.error.is_some() && f.path != "/dev/null";
    if !info.files.is_empty()
        && info.files.iter().all(|f| f.error.is_some())
        && info.files.iter().any(failed)
    {
        info.note = Some("The job's log could not be read (see `log.files[].error`); give its path with --log FILE.".into());
    } else if info
        .files
        .iter()
        .any(|f| f.found_by == "slurm_default" && failed(f))
    {
        info.note = Some("Slurm no longer knows where this job wrote its output (an #SBATCH --output line is not kept by accounting) and the default file is not there; give its path with --log FILE.".into());
    }
    (info, scan)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scontrol_record() {
        let line = "JobId=1240 ArrayJobId=1234 ArrayTaskId=7 JobName=my job UserId=alice(1001) GroupId=alice(1001) MCS_label=N/A Priority=1 JobState=COMPLETED BatchHost=vm1 WorkDir=/home/alice/run StdErr=/home/alice/run/err-%A_%a.txt StdIn=/dev/null StdOut=logs/out-%x.txt Power=";
        let l = from_scontrol(line).unwrap();
        assert_eq!(l.uid, Some(1001));
        assert_eq!(l.vars.job_name, "my job");
        let p = l.paths();
        assert_eq!(
            p,
            vec![
                (
                    "stdout",
                    PathBuf::from("/home/alice/run/logs/out-my job.txt"),
                    "scontrol"
                ),
                (
                    "stderr",
                    PathBuf::from("/home/alice/run/err-1234_7.txt"),
                    "scontrol"
                ),
            ]
        );
    }

    /// The ids of `scontrol show job` go through `job_id`'s one parser: a job id with a
    /// leading zero is none, and a task id that is not one leaves the job a plain job.
    #[test]
    fn scontrol_ids_go_through_the_one_parser() {
        let line = "JobId=1240 ArrayJobId=1234 ArrayTaskId=7 JobName=j UserId=alice(1001) BatchHost=vm1 WorkDir=/w StdOut=o-%A_%a-%j";
        let l = from_scontrol(line).unwrap();
        assert_eq!(
            (l.vars.job_id, l.vars.array_job_id, l.vars.array_task_id),
            (1240u32, Some(1234u32), Some(7u32))
        );
        assert!(from_scontrol(&line.replace("JobId=1240", "JobId=01240")).is_none());
        assert!(from_scontrol(&line.replace("JobId=1240", "JobId=4294967296")).is_none());
        for bad in ["07", "4294967296", "1-3"] {
            let l = from_scontrol(&line.replace("ArrayTaskId=7", &format!("ArrayTaskId={bad}")))
                .unwrap();
            assert_eq!(l.vars.array_task_id, None, "{bad}");
            assert_eq!(l.vars.array_job_id, Some(1234));
        }
        let l = from_scontrol(&line.replace("ArrayJobId=1234", "ArrayJobId=0")).unwrap();
        assert_eq!(l.vars.array_job_id, None);
    }

    #[test]
    fn default_file_when_nothing_said() {
        let l = Located {
            work_dir: Some("/w".into()),
            vars: PatternVars {
                job_id: 5,
                ..Default::default()
            },
            found_by: "submit_line",
            ..Default::default()
        };
        assert_eq!(
            l.paths(),
            vec![(
                "stdout+stderr",
                PathBuf::from("/w/slurm-5.out"),
                "slurm_default"
            )]
        );
    }

    #[test]
    fn tail_is_bounded_and_starts_on_a_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out");
        let mut s = String::new();
        for i in 0..20_000 {
            s.push_str(&format!("line {i}\n"));
        }
        std::fs::write(&p, &s).unwrap();
        // SAFETY: no failure mode.
        let me = unsafe { libc::geteuid() };
        let t = read_tail(&p, Some(me), 4096).unwrap();
        assert!(t.truncated && t.read == 4096 && t.size == s.len() as u64);
        assert!(t.text.starts_with("line ") && t.text.ends_with("line 19999\n"));
        // Someone else's job: refused unless root, and root refuses a file not theirs.
        let e = read_tail(&p, Some(me.wrapping_add(1)), 4096).unwrap_err();
        assert!(e.contains("uid"), "{e}");
        // Not a regular file.
        assert!(read_tail(Path::new("/dev/null"), Some(me), 10).is_err());
        if me == 0 {
            let l = d.path().join("link");
            std::os::unix::fs::symlink(&p, &l).unwrap();
            let e = read_tail(&l, Some(0), 10).unwrap_err();
            assert!(e.contains("symbolic link"), "{e}");
        }
    }
}
