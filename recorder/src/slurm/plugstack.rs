//! The site's slurmwatch line in Slurm's plugstack configuration: the one reader of it, for
//! `doctor` and for the site's configuration (`crate::site`: the spool and archive every
//! command looks in).
//!
//! Slurm's rules, followed here: the plugstack file is `PlugStackConfig=` in slurm.conf, else
//! `plugstack.conf` beside slurm.conf (`SLURM_CONF` names slurm.conf); an `include PATTERN`
//! line is a glob, relative to the including file's directory when not absolute, its matches
//! read in sorted order; `#` starts a comment. Packages put our line behind an include
//! (`plugstack.conf.d/slurmwatch.conf`), so a reader that ignores includes finds no spool.

use std::path::{Path, PathBuf};

use super::conf;

/// The plugstack file slurmstepd reads, given slurm.conf's path.
pub fn plugstack_path(slurm_conf: &Path) -> PathBuf {
    conf::value_in(slurm_conf, "PlugStackConfig")
        .map(PathBuf::from)
        .unwrap_or_else(|| slurm_conf.with_file_name("plugstack.conf"))
}

/// The slurmwatch line of a plugstack file: its plugin path and arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlugstackLine {
    /// The file the line is in (the plugstack file or one it includes).
    pub file: PathBuf,
    pub required: bool,
    pub plugin: PathBuf,
    pub args: Vec<String>,
}

/// Includes nest at most this deep: a loop of includes ends, as in Slurm, in an error-free
/// "not found" rather than a hang.
const MAX_INCLUDE_DEPTH: u32 = 8;

/// Finds the slurmwatch line in `conf` or the files it includes.
/// Lines are `optional|required PATH [ARGS...]`.
pub fn find_line(conf: &Path) -> Option<PlugstackLine> {
    scan(conf, 0)
}

fn scan(file: &Path, depth: u32) -> Option<PlugstackLine> {
    if depth > MAX_INCLUDE_DEPTH {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["include", pattern] => {
                for f in expand_include(file, pattern) {
                    if let Some(found) = scan(&f, depth + 1) {
                        return Some(found);
                    }
                }
            }
            [kind @ ("optional" | "required"), plugin, args @ ..]
                if plugin.contains("slurmwatch") =>
            {
                return Some(PlugstackLine {
                    file: file.to_path_buf(),
                    required: *kind == "required",
                    plugin: PathBuf::from(plugin),
                    args: args.iter().map(|s| s.to_string()).collect(),
                })
            }
            _ => {}
        }
    }
    None
}

/// The files an `include` names, sorted; relative patterns start at the including file's dir.
fn expand_include(including: &Path, pattern: &str) -> Vec<PathBuf> {
    let full = if Path::new(pattern).is_absolute() {
        PathBuf::from(pattern)
    } else {
        including.parent().unwrap_or(Path::new("/")).join(pattern)
    };
    let Some(full) = full.to_str() else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = match glob::glob(full) {
        Ok(paths) => paths.flatten().filter(|p| p.is_file()).collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn plugstack_config_in_slurm_conf_wins_over_the_default() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        write(&conf, "ClusterName=x\n#PlugStackConfig=/nope\n");
        assert_eq!(plugstack_path(&conf), d.path().join("plugstack.conf"));
        write(
            &conf,
            "ClusterName=x\nplugstackconfig = /site/spank.conf # ours\n",
        );
        assert_eq!(plugstack_path(&conf), PathBuf::from("/site/spank.conf"));
        assert_eq!(
            plugstack_path(&d.path().join("missing.conf")),
            d.path().join("plugstack.conf")
        );
    }

    #[test]
    fn a_line_behind_a_relative_include_glob_is_found() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("plugstack.conf");
        write(
            &conf,
            "# site\noptional /x/other.so\ninclude plugstack.conf.d/*.conf\n",
        );
        write(
            &d.path().join("plugstack.conf.d/10-other.conf"),
            "optional /x/y.so\n",
        );
        write(
            &d.path().join("plugstack.conf.d/slurmwatch.conf"),
            "optional /usr/lib/slurmwatch.so spool=/s archive=/a # note\n",
        );
        write(
            &d.path().join("plugstack.conf.d/slurmwatch.conf.bak"),
            "optional /old/slurmwatch.so\n",
        );
        let line = find_line(&conf).unwrap();
        assert_eq!(line.file, d.path().join("plugstack.conf.d/slurmwatch.conf"));
        assert_eq!(line.plugin, PathBuf::from("/usr/lib/slurmwatch.so"));
        assert_eq!(line.args, vec!["spool=/s", "archive=/a"]);
        assert!(!line.required);
    }

    #[test]
    fn absolute_includes_and_globs_in_directories_are_followed() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("plugstack.conf");
        write(
            &conf,
            &format!("include {}/site*/spank.conf\n", d.path().display()),
        );
        write(
            &d.path().join("site-a/spank.conf"),
            "required /p/slurmwatch.so default=on\n",
        );
        let line = find_line(&conf).unwrap();
        assert!(line.required);
        assert_eq!(line.args, vec!["default=on"]);
    }

    #[test]
    fn an_include_loop_ends_without_a_line() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("plugstack.conf");
        write(&conf, "include plugstack.conf\n");
        assert_eq!(find_line(&conf), None);
        write(&conf, "include nothing-here/*.conf\n");
        assert_eq!(find_line(&conf), None);
    }
}
