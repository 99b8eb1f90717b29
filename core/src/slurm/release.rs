//! A Slurm client's release, from the line its `--version` prints (`slurm-wlm 22.05.8` from
//! Debian's packages, `slurm 24.11.5` from SchedMD's builds): what a rule that changed between
//! releases asks.

use std::time::Duration;

use super::command;

/// A release's major and minor number (`24.11`): what its behaviour follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    pub major: u32,
    pub minor: u32,
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:02}", self.major, self.minor)
    }
}

/// The release named by a `--version` line: its last word, `MAJOR.MINOR[.PATCH…]`.
pub fn parse(version_line: &str) -> Option<Release> {
    let word = version_line.lines().next()?.split_whitespace().last()?;
    let mut parts = word.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some(Release { major, minor })
}

/// The release of `program` (`sacctmgr`, `sacct`, …) as it says itself, within `timeout`.
pub fn of_program(program: &str, timeout: Duration) -> Result<Release, String> {
    match command::run(program, &["--version"], timeout) {
        Ok(f) if f.success => {
            parse(&f.stdout).ok_or_else(|| format!("{program} --version: {:?}", f.stdout.trim()))
        }
        Ok(f) => Err(format!("{program} --version: {}", f.reason())),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured: Debian bookworm's 22.05.8, trixie's 24.11.5, sid's 26.05.5 and SchedMD's
    /// own build (`slurm 23.11.10`).
    #[test]
    fn every_packaging_of_the_version_line_is_read() {
        let r = |major, minor| Some(Release { major, minor });
        assert_eq!(parse("slurm-wlm 22.05.8\n"), r(22, 5));
        assert_eq!(parse("slurm-wlm 24.11.5"), r(24, 11));
        assert_eq!(parse("slurm 26.05.5"), r(26, 5));
        assert_eq!(parse("slurm 23.11.10\n"), r(23, 11));
        assert!(parse("slurm 23.11.10") < parse("slurm-wlm 24.11.0"));
        assert_eq!(parse("slurm-wlm 24.11.5").unwrap().to_string(), "24.11");
        assert_eq!(parse("slurm 26.05.5").unwrap().to_string(), "26.05");
    }

    #[test]
    fn a_line_without_a_release_is_none() {
        for line in ["", "slurm", "slurm x.y", "sacctmgr: error: foo", "slurm 24"] {
            assert_eq!(parse(line), None, "{line:?}");
        }
    }
}
