//! The archive copy: a consistent copy of the job's file in the site's archive location, used
//! by the sampler (each step's end, every few minutes) and by `job_epilog` (once the summary
//! is in).
//!
//! Root makes the snapshot inside its own spool (`store::archive::snapshot`); a thread of its
//! own then switches to the job user's filesystem identity (`as_user`) and writes it into the
//! user's private directory relative to a checked descriptor (`private_dir`). The caller waits
//! at most a deadline: a hung archive filesystem leaves that thread behind, never the callback
//! or the epilog, and no second copy starts while one is still stuck.

use slurmwatch_recorder::options::{self, PluginConfig};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where the copy goes: the site's fixed prefix and the components below it.
#[derive(Debug, Clone)]
pub struct ArchiveDir {
    pub prefix: PathBuf,
    pub components: Vec<String>,
}

impl ArchiveDir {
    pub fn display(&self) -> String {
        let mut p = self.prefix.clone();
        p.extend(&self.components);
        p.display().to_string()
    }
}

/// The archive directory for this job, or `None` when the site has none. An error when the
/// template cannot be expanded safely (a user or node name that could escape it).
pub fn dir_for(
    config: &PluginConfig,
    user: &str,
    uid: u32,
    job_id: u32,
    node: &str,
) -> Result<Option<ArchiveDir>, String> {
    let Some(t) = &config.archive_template else {
        return Ok(None);
    };
    let ids = options::TemplateIds {
        user,
        uid,
        job_id,
        node,
    };
    options::archive_dir_parts(t, &ids)
        .map(|(prefix, components)| Some(ArchiveDir { prefix, components }))
        .ok_or_else(|| "the archive template cannot be expanded safely for this job".into())
}

/// The copy's name: the job and the node, so every node of a job can archive to one place.
pub fn file_name(job_id: u32, node: &str) -> String {
    slurmwatch_recorder::store::paths::archive_name(job_id, node)
}

/// One copy at a time per process: a copy stuck on a hung filesystem blocks later ones
/// (they are skipped with a reason), not the sampler.
static IN_FLIGHT: AtomicBool = AtomicBool::new(false);

/// Installs `snapshot` (a consistent copy root made in its spool: `Writer::snapshot` in the
/// sampler, `store::archive::snapshot` in the epilog) as `<dir>/<name>` with the user's
/// identity (uid, gid), waiting at most `deadline`.
pub fn copy_as_user(
    snapshot: slurmwatch_recorder::error::Result<std::fs::File>,
    dir: &ArchiveDir,
    name: &str,
    (uid, gid): (u32, u32),
    deadline: Duration,
) -> Result<(), String> {
    let mut snapshot = snapshot.map_err(|e| format!("archive copy failed: {e}"))?;
    if IN_FLIGHT.swap(true, Ordering::SeqCst) {
        return Err(format!(
            "archive copy to {} skipped: the previous one has not finished (hung filesystem?)",
            dir.display()
        ));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let (dir2, name2) = (dir.clone(), name.to_string());
    let spawned = std::thread::Builder::new()
        .name("slurmwatch-archive".into())
        .stack_size(128 * 1024)
        .spawn(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                crate::as_user::with_user_fs(uid, gid, || {
                    let d = slurmwatch_recorder::private_dir::open_private_dir(
                        &dir2.prefix,
                        &dir2.components,
                        uid,
                    )?;
                    slurmwatch_recorder::private_dir::install_file_at(&d, &name2, &mut snapshot)
                })
            }))
            .unwrap_or_else(|_| Err("internal error (panic in the archive copy)".into()));
            IN_FLIGHT.store(false, Ordering::SeqCst);
            let _ = tx.send(outcome);
        });
    if let Err(e) = spawned {
        IN_FLIGHT.store(false, Ordering::SeqCst);
        return Err(format!("archive copy failed: cannot start its thread: {e}"));
    }
    match rx.recv_timeout(deadline) {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) | Ok(Err(e)) => Err(format!("archive copy failed: {e}")),
        Err(_) => Err(format!(
            "archive copy to {} did not finish within {} s (hung filesystem?); left it behind",
            dir.display(),
            deadline.as_secs()
        )),
    }
}
