//! The controller's queue of held end-of-job mails. Slurm runs MailProg as a job ends, before
//! its EpilogSlurmctld has stored the job's summary in slurmdbd; at a site whose controller
//! has no spool, a report made then has only sacct's figures. So the MailProg wrapper queues
//! the mail here and returns at once (slurmctld runs each MailProg on one of its agent
//! threads, 120 s at most: holding it there would starve them), and a detached deliverer
//! sends it once the EpilogSlurmctld has settled the job (stored, not recorded, or given up:
//! [`settle`]), or when the hold's bound passes, whichever is first.
//!
//! Nothing is lost: a mail is removed only after the mailer accepted it; one whose deliverer
//! died (a controller restart) is claimed and sent by the next MailProg run ([`stale`]).
//!
//! Where: `<StateSaveLocation>/slurmwatch-mail/` (the controller's own disk, SlurmUser's, as
//! both MailProg and EpilogSlurmctld run as SlurmUser), `queue/` one JSON file per mail,
//! `settled/` one empty file per job. The directories must be this user's and writable by no
//! one else, else nothing is held (the mail goes at once, as before).

use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// The queue's directory name under StateSaveLocation.
pub const DIR_NAME: &str = "slurmwatch-mail";
/// Markers and entries older than this are removed by any run (a day of settled jobs).
pub const KEEP: Duration = Duration::from_secs(24 * 3600);
/// The largest mail body held (Slurm's are empty; a site's MailProg chain may add text).
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// One held mail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The job as sacct names it (`123`, `123_4`).
    pub job: String,
    /// The job's own id (an array task's differs from `123_4`): the EpilogSlurmctld of an
    /// array's first task knows only it (seen on 22.05: no `SLURM_ARRAY_*` there).
    #[serde(default)]
    pub job_id: Option<String>,
    /// The job's user, as slurmctld named it to MailProg.
    pub user: String,
    /// The real mailer and Slurm's arguments to it, unchanged.
    pub argv: Vec<String>,
    /// The body Slurm piped to MailProg.
    pub body: String,
    pub queued_unix_ms: i64,
}

/// The queue at `dir` (`<StateSaveLocation>/slurmwatch-mail`).
#[derive(Debug, Clone)]
pub struct Queue {
    pub dir: PathBuf,
}

/// A job reference usable as a file name: a job or an array task, as `slurm::job_id`
/// spells them (`4242`, `12_3`).
pub fn is_job_ref(job: &str) -> bool {
    crate::slurm::job_id::JobId::job_or_task(job).is_some()
}

/// `dir` exists (made 0700 when missing), is a directory of this process's user, and no one
/// else can write it. Refused: a link, another owner, group or other write.
fn private_dir(dir: &Path) -> Result<(), String> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot make {}: {e}", dir.display())),
    }
    let m = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !m.file_type().is_dir() || m.uid() != me || m.mode() & 0o022 != 0 {
        return Err(format!(
            "{} is not a directory of this user that only it can write",
            dir.display()
        ));
    }
    Ok(())
}

impl Queue {
    /// The queue under the controller's StateSaveLocation.
    pub fn under(state_save_location: &Path) -> Queue {
        Queue {
            dir: state_save_location.join(DIR_NAME),
        }
    }

    fn queue_dir(&self) -> PathBuf {
        self.dir.join("queue")
    }

    fn settled_dir(&self) -> PathBuf {
        self.dir.join("settled")
    }

    /// Whether an EpilogSlurmctld of ours has ever settled a job here: only then is a mail
    /// held for it (a site without it would have every mail wait the whole bound).
    pub fn in_use(&self) -> bool {
        std::fs::symlink_metadata(self.settled_dir()).is_ok_and(|m| m.file_type().is_dir())
    }

    /// Marks `job` settled (the EpilogSlurmctld is done with it, whatever the outcome).
    pub fn settle(&self, job: &str) -> Result<(), String> {
        if !is_job_ref(job) {
            return Err(format!("{job:?} is not a job id"));
        }
        private_dir(&self.dir)?;
        private_dir(&self.settled_dir())?;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(self.settled_dir().join(job))
            .map(drop)
            .map_err(|e| format!("cannot mark job {job} settled: {e}"))
    }

    /// Whether `job` is settled.
    pub fn is_settled(&self, job: &str) -> bool {
        is_job_ref(job)
            && std::fs::symlink_metadata(self.settled_dir().join(job))
                .is_ok_and(|m| m.file_type().is_file())
    }

    /// Whether the entry's job is settled, under either of its names.
    pub fn entry_settled(&self, e: &Entry) -> bool {
        self.is_settled(&e.job) || e.job_id.as_deref().is_some_and(|id| self.is_settled(id))
    }

    /// Writes `entry` (atomically: a temporary name, then a rename) and returns its path.
    pub fn put(&self, entry: &Entry) -> Result<PathBuf, String> {
        if !is_job_ref(&entry.job) {
            return Err(format!("{:?} is not a job id", entry.job));
        }
        private_dir(&self.dir)?;
        private_dir(&self.queue_dir())?;
        let name = format!(
            "{}.{}.{}.json",
            entry.queued_unix_ms,
            entry.job,
            std::process::id()
        );
        let path = self.queue_dir().join(&name);
        let tmp = self.queue_dir().join(format!(".{name}.tmp"));
        let text = serde_json::to_vec(entry).map_err(|e| e.to_string())?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| {
                std::io::Write::write_all(&mut f, &text)?;
                f.sync_all()
            })
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("cannot queue the mail: {e}")
            })?;
        Ok(path)
    }

    /// Takes the entry at `path` for delivery: renamed to `*.claimed` (one deliverer wins).
    /// `None` when another took it first or it is unreadable (then left as it is).
    pub fn claim(&self, path: &Path) -> Option<(PathBuf, Entry)> {
        let claimed = path.with_extension("claimed");
        std::fs::rename(path, &claimed).ok()?;
        let text = std::fs::read(&claimed).ok()?;
        let entry = serde_json::from_slice(&text).ok()?;
        Some((claimed, entry))
    }

    /// Gives a claimed entry back to the queue (its mailer failed: a later run sends it).
    pub fn release(&self, claimed: &Path) {
        let _ = std::fs::rename(claimed, claimed.with_extension("json"));
    }

    /// Removes a delivered entry.
    pub fn done(&self, claimed: &Path) {
        let _ = std::fs::remove_file(claimed);
    }

    /// Entries queued more than `age` ago (their deliverer died, or their mailer failed), and
    /// claims older than `age` (a deliverer killed mid-send), oldest first; settled markers
    /// and entries past [`KEEP`] are removed on the way.
    pub fn stale(&self, age: Duration) -> Vec<PathBuf> {
        let now = SystemTime::now();
        let old = |p: &Path, limit: Duration| {
            std::fs::symlink_metadata(p)
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).is_ok_and(|d| d > limit))
        };
        if let Ok(rd) = std::fs::read_dir(self.settled_dir()) {
            for e in rd.flatten() {
                if old(&e.path(), KEEP) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let mut out: Vec<PathBuf> = Vec::new();
        if let Ok(rd) = std::fs::read_dir(self.queue_dir()) {
            for e in rd.flatten() {
                let p = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    if old(&p, KEEP) {
                        let _ = std::fs::remove_file(&p);
                    }
                    continue;
                }
                if !old(&p, age) {
                    continue;
                }
                if name.ends_with(".claimed") {
                    // A deliverer killed while sending: back to the queue, sent once more.
                    let back = p.with_extension("json");
                    if std::fs::rename(&p, &back).is_ok() {
                        out.push(back);
                    }
                } else if name.ends_with(".json") {
                    out.push(p);
                }
            }
        }
        out.sort();
        out
    }
}

/// A new entry queued now.
pub fn entry(job: &str, user: &str, argv: Vec<String>, body: String) -> Entry {
    Entry {
        job: job.to_string(),
        job_id: None,
        user: user.to_string(),
        argv,
        body,
        queued_unix_ms: crate::sys::now_unix_ms(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_refs_are_ids_only() {
        for ok in ["1", "4242", "12_3"] {
            assert!(is_job_ref(ok), "{ok}");
        }
        for bad in [
            "",
            "_",
            "1_",
            "_1",
            "1_2_3",
            "../x",
            "1 2",
            "12345678901",
            "4294967296",
            "012",
            "12_03",
            "12+1",
            "a",
        ] {
            assert!(!is_job_ref(bad), "{bad}");
        }
    }

    #[test]
    fn a_mail_is_queued_claimed_once_and_settled_jobs_are_known() {
        let d = tempfile::tempdir().unwrap();
        let q = Queue::under(d.path());
        assert!(!q.in_use());
        let e = entry(
            "42",
            "alice",
            vec![
                "/usr/bin/mail".into(),
                "-s".into(),
                "S".into(),
                "alice".into(),
            ],
            "b".into(),
        );
        let p = q.put(&e).unwrap();
        let (claimed, got) = q.claim(&p).unwrap();
        assert_eq!(got, e);
        assert!(q.claim(&p).is_none(), "claimed twice");
        q.release(&claimed);
        let (claimed, _) = q.claim(&p).unwrap();
        q.done(&claimed);
        assert!(!p.exists() && !claimed.exists());
        assert!(!q.is_settled("42"));
        q.settle("42").unwrap();
        assert!(q.in_use() && q.is_settled("42") && !q.is_settled("43"));
        assert!(q.settle("../x").is_err());
        // An array task settled under its own id only.
        let mut t = entry("50_1", "alice", vec!["m".into()], String::new());
        t.job_id = Some("51".into());
        assert!(!q.entry_settled(&t));
        q.settle("51").unwrap();
        assert!(q.entry_settled(&t));
    }

    #[test]
    fn a_queue_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let q = Queue::under(d.path());
        std::fs::create_dir(&q.dir).unwrap();
        std::fs::set_permissions(&q.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = entry("42", "alice", vec!["m".into()], String::new());
        assert!(q.put(&e).unwrap_err().contains("only it can write"));
        assert!(q.settle("42").is_err());
    }

    #[test]
    fn stale_entries_and_dead_claims_come_back_oldest_first() {
        let d = tempfile::tempdir().unwrap();
        let q = Queue::under(d.path());
        let a = q
            .put(&entry("1", "u", vec!["m".into()], String::new()))
            .unwrap();
        let b = q
            .put(&entry("2", "u", vec!["m".into()], String::new()))
            .unwrap();
        let (claimed_b, _) = q.claim(&b).unwrap();
        assert!(
            q.stale(Duration::from_secs(60)).is_empty(),
            "fresh ones are their deliverers'"
        );
        let back = SystemTime::now() - Duration::from_secs(120);
        for p in [&a, &claimed_b] {
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(back)
                .unwrap();
        }
        let stale = q.stale(Duration::from_secs(60));
        assert_eq!(stale, {
            let mut v = vec![a.clone(), b.clone()];
            v.sort();
            v
        });
    }
}
