//! The archive copy: a consistent copy of the job's file in the site's archive location,
//! written with the job user's credentials (see `as_user`), used by the sampler (each step's
//! end, every few minutes) and by `job_epilog` (once the summary is in).

use slurmwatch_core::options::{self, PluginConfig};
use std::path::{Path, PathBuf};

/// The archive directory for this job, or `None` when the site has none. An error when the
/// template cannot be expanded safely (a user or node name that could escape it).
pub fn dir_for(
    config: &PluginConfig,
    user: &str,
    uid: u32,
    job_id: u32,
    node: &str,
) -> Result<Option<PathBuf>, String> {
    let Some(t) = &config.archive_template else {
        return Ok(None);
    };
    let ids = options::TemplateIds {
        user,
        uid,
        job_id,
        node,
    };
    options::expand_template(t, &ids)
        .map(Some)
        .ok_or_else(|| "the archive template cannot be expanded safely for this job".into())
}

/// The copy's name: the job and the node, so every node of a job can archive to one place.
pub fn file_name(job_id: u32, node: &str) -> String {
    format!("{job_id}.{node}.sqlite")
}

/// Copies `file` to `<dir>/<name>` as the user (uid, gid).
pub fn copy_as_user(file: &Path, dir: &Path, name: &str, uid: u32, gid: u32) -> Result<(), String> {
    let outcome = crate::as_user::with_user_fs(uid, gid, || {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        slurmwatch_core::store::archive::copy_consistent(file, dir, name)
            .map(|_| ())
            .map_err(|e| e.to_string())
    });
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) | Err(e) => Err(format!("archive copy failed: {e}")),
    }
}
