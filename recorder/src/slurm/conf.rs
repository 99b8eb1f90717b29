//! slurm.conf as the CLI reads it: where it is, and one key's value. Keys are
//! case-insensitive; `#` starts a comment; the first assignment wins.

use std::path::{Path, PathBuf};

/// slurm.conf: `SLURM_CONF`, else Slurm's default path.
pub fn path() -> PathBuf {
    std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"))
}

/// The value of `key` in slurm.conf's text (quotes removed); `None` when absent or empty.
pub fn value(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.split('#').next().unwrap_or("").trim();
        let (k, v) = l.split_once('=')?;
        let v = v.trim().trim_matches('"');
        (k.trim().eq_ignore_ascii_case(key) && !v.is_empty()).then(|| v.to_string())
    })
}

/// `key` from the slurm.conf at `conf` (unreadable: `None`).
pub fn value_in(conf: &Path, key: &str) -> Option<String> {
    value(&std::fs::read_to_string(conf).ok()?, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_case_insensitive_and_comments_ignored() {
        let conf = "# ClusterName=commented\nSlurmctldHost=a\nclustername = tiger # main\nPlugStackConfig=\"/x y\"\n";
        assert_eq!(value(conf, "ClusterName").as_deref(), Some("tiger"));
        assert_eq!(value(conf, "plugstackconfig").as_deref(), Some("/x y"));
        assert_eq!(value("ClusterName=\n", "ClusterName"), None);
        assert_eq!(value("", "ClusterName"), None);
    }
}
