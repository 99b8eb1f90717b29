//! The write for node_exporter's textfile collector: the collector reads every `*.prom` file
//! in its directory at each scrape, so a file must never be seen half-written.
//!
//! Written by root (the exporter reads root's spool), so the rules for root's writes apply
//! (docs/design.md §7): the target directory must be owned by root (or this process's
//! user) and writable by nobody else, else nothing is written; the content goes to a fresh
//! temporary name (`.<name>.tmp.<pid>`, which is not `*.prom`, so the collector skips it),
//! created `O_EXCL|O_NOFOLLOW`, mode 0644, synced, then renamed over the target.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

/// Writes `text` to `path` atomically (see the module notes). `Err` is one sentence.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), String> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let md = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // SAFETY: no preconditions.
    let euid = unsafe { libc::geteuid() };
    if !md.is_dir() || (md.uid() != 0 && md.uid() != euid) || md.mode() & 0o022 != 0 {
        return Err(format!(
            "{} must be a directory owned by root and writable by nobody else: not written",
            dir.display()
        ));
    }
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_file_is_replaced_whole_and_no_temporary_is_left() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = d.path().join("slurmwatch.prom");
        write_atomically(&p, "a 1\n").unwrap();
        write_atomically(&p, "b 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "b 2\n");
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["slurmwatch.prom"]);
        assert_eq!(p.metadata().unwrap().mode() & 0o777, 0o644);
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let p = d.path().join("slurmwatch.prom");
        let e = write_atomically(&p, "a 1\n").unwrap_err();
        assert!(e.contains("writable by nobody else"), "{e}");
        assert!(!p.exists());
    }
}
