//! Consistent copies of a job's file into a place the user owns (the archive).
//!
//! The caller runs this in a process that has dropped to the job user's uid and gids: a
//! symlink or hardlink the user planted can then only redirect the user's own write. The copy
//! goes to a temporary name created with `O_EXCL|O_NOFOLLOW`, is checked, then renamed.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use super::reader::Reader;
use super::sql_err;
use super::writer::vacuum_into;
use crate::error::{Error, Result};

/// Copies `src` (a consistent snapshot, even while a writer appends) to
/// `<dest_dir>/<final_name>` through `<dest_dir>/.<final_name>.tmp.<pid>`; returns the final
/// path. An existing `<final_name>` is replaced atomically.
pub fn copy_consistent(src: &Path, dest_dir: &Path, final_name: &str) -> Result<PathBuf> {
    if final_name.is_empty()
        || final_name == "."
        || final_name == ".."
        || final_name.contains(['/', '\0'])
    {
        return Err(Error::Store(format!(
            "bad archive file name {final_name:?}: one plain file name is needed"
        )));
    }
    let reader = Reader::open(src)?;
    let tmp = dest_dir.join(format!(".{final_name}.tmp.{}", std::process::id()));
    let dest = dest_dir.join(final_name);
    let create = || {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
    };
    let file = match create() {
        // A leftover of an earlier run with our pid: ours to remove.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::remove_file(&tmp).map_err(|e| sql_err(&tmp, e))?;
            create()
        }
        r => r,
    }
    .map_err(|e| Error::Store(format!("cannot create {}: {e}", tmp.display())))?;
    let done = (|| {
        vacuum_into(reader.conn(), src, &tmp)?;
        file.sync_all().map_err(|e| sql_err(&tmp, e))?;
        Reader::open(&tmp)?; // the copy must read back before it replaces anything
        std::fs::rename(&tmp, &dest).map_err(|e| {
            Error::Store(format!(
                "cannot rename {} to {}: {e}",
                tmp.display(),
                dest.display()
            ))
        })?;
        if let Ok(d) = std::fs::File::open(dest_dir) {
            let _ = d.sync_all();
        }
        Ok(dest.clone())
    })();
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}
