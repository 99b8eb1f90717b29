//! `slurmwatch doctor`'s checks: is this node set up to record jobs? Each check is one line
//! with a verdict and, when something is wrong, what to do. Checks take their root paths as
//! arguments so tests point them at fixture trees; the CLI passes the real ones. They live in
//! the CLI, not the library, so the plugin's `.so` links none of them (nor the ELF reader).

use serde::Serialize;
use slurmwatch_core::options::PluginConfig;
use slurmwatch_core::slurm::plugstack::{self, PlugstackLine};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Ok,
    /// Works, but worth knowing (e.g. no GPUs, /proc fallback).
    Note,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// Stable name: `plugstack`, `plugin_version`, `spool`, `archive`, `cgroup`, `nvml`, `sacct`.
    pub name: &'static str,
    pub verdict: Verdict,
    /// What was found, one sentence.
    pub finding: String,
    /// What to do; empty when nothing needs doing.
    pub fix: String,
}

impl Check {
    fn new(name: &'static str, verdict: Verdict, finding: String, fix: &str) -> Check {
        Check {
            name,
            verdict,
            finding,
            fix: fix.to_string(),
        }
    }
}

/// The plugstack line exists and its arguments parse.
pub fn check_plugstack(conf: &Path) -> (Check, Option<PluginConfig>, Option<PlugstackLine>) {
    let Some(line) = plugstack::find_line(conf) else {
        return (
            Check::new(
                "plugstack",
                Verdict::Fail,
                format!("no slurmwatch line in {} or the files it includes", conf.display()),
                "add `optional /usr/local/lib/slurmwatch/slurmwatch.so default=off` (see plugstack.conf.example)",
            ),
            None,
            None,
        );
    };
    let where_ = format!("{} ({})", line.file.display(), line.plugin.display());
    if line.required {
        return (
            Check::new(
                "plugstack",
                Verdict::Fail,
                format!("{where_} is marked `required`: a plugin problem would fail every job"),
                "write `optional` instead of `required`",
            ),
            PluginConfig::parse(&line.args).ok(),
            Some(line),
        );
    }
    match PluginConfig::parse(&line.args) {
        Ok(c) => (
            Check::new(
                "plugstack",
                Verdict::Ok,
                format!("{where_}: arguments parse ({})", line.args.join(" ")),
                "",
            ),
            Some(c),
            Some(line),
        ),
        Err(e) => (
            Check::new(
                "plugstack",
                Verdict::Fail,
                format!("{where_}: {}", e.message),
                &e.hint,
            ),
            None,
            Some(line),
        ),
    }
}

/// The spool: a real directory, owned by root, writable by nobody else.
pub fn check_spool(spool: &Path) -> Check {
    let md = match std::fs::symlink_metadata(spool) {
        Ok(md) => md,
        Err(e) => {
            return Check::new(
                "spool",
                Verdict::Fail,
                format!("spool {} is missing: {e}", spool.display()),
                &format!("install -d -m 0755 -o root -g root {}", spool.display()),
            )
        }
    };
    if md.file_type().is_symlink() || !md.is_dir() {
        return Check::new(
            "spool",
            Verdict::Fail,
            format!("spool {} is not a plain directory", spool.display()),
            "make it a root-owned directory (not a symlink)",
        );
    }
    let mode = md.mode() & 0o7777;
    if md.uid() != 0 || mode & 0o022 != 0 {
        return Check::new(
            "spool",
            Verdict::Fail,
            format!(
                "spool {} is owned by uid {} with mode {mode:04o}: users could replace job files",
                spool.display(),
                md.uid()
            ),
            &format!("chown root:root {0} && chmod 0755 {0}", spool.display()),
        );
    }
    if let Some(why) = acl_unsupported(spool) {
        return Check::new(
            "spool",
            Verdict::Note,
            format!(
                "spool {} is root-owned, mode {mode:04o}, but its filesystem refused a read grant ({why}): users cannot read their live files on this node (archive copies and reports still work)",
                spool.display()
            ),
            "put the spool on a filesystem with POSIX ACLs (ext4, XFS; tmpfs with the acl option)",
        );
    }
    Check::new(
        "spool",
        Verdict::Ok,
        format!(
            "spool {} is root-owned, mode {mode:04o}; job files get their user's read grant",
            spool.display()
        ),
        "",
    )
}

/// As root: whether the spool's filesystem takes the read grant the plugin gives each job's
/// user (`store::access`), tried on a probe file of our own. `None` when it does (or when not
/// root: nothing is written then).
fn acl_unsupported(spool: &Path) -> Option<String> {
    use std::os::unix::fs::OpenOptionsExt;
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let probe = spool.join(format!(".doctor-acl-probe.{}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&probe)
        .ok()?;
    let r = slurmwatch_core::store::access::grant_read(&f, 65534);
    let _ = std::fs::remove_file(&probe);
    r.err().map(|e| e.to_string())
}

/// The archive template's fixed part (before the first placeholder) exists: jobs create
/// their own directories below it as the user.
pub fn check_archive(template: Option<&str>) -> Check {
    let Some(t) = template else {
        return Check::new(
            "archive",
            Verdict::Note,
            "no archive= argument: files stay on the node's spool only".into(),
            "",
        );
    };
    let fixed: PathBuf = Path::new(t)
        .components()
        .take_while(|c| !c.as_os_str().to_string_lossy().contains('%'))
        .collect();
    match std::fs::metadata(&fixed) {
        Ok(md) if md.is_dir() => {
            let mode = md.mode() & 0o7777;
            Check::new(
                "archive",
                Verdict::Ok,
                format!("archive base {} exists (mode {mode:04o})", fixed.display()),
                "",
            )
        }
        _ => Check::new(
            "archive",
            Verdict::Fail,
            format!("archive base {} of {t} is missing or not a directory", fixed.display()),
            "create it on the shared filesystem, writable by the users (e.g. mode 1777), or fix archive=",
        ),
    }
}

/// Which cgroup layout this node has, and so which readings jobs will get.
pub fn check_cgroup(cgroup_root: &Path) -> Check {
    let v2 = cgroup_root.join("cgroup.controllers");
    if let Ok(ctrls) = std::fs::read_to_string(&v2) {
        let has = |c: &str| ctrls.split_whitespace().any(|x| x == c);
        return if has("memory") && has("cpu") {
            Check::new(
                "cgroup",
                Verdict::Ok,
                "cgroup v2 with memory and cpu controllers".into(),
                "",
            )
        } else {
            Check::new(
                "cgroup",
                Verdict::Note,
                format!(
                    "cgroup v2 without memory/cpu controllers ({})",
                    ctrls.trim()
                ),
                "jobs fall back to /proc sums (no page cache or limit figures)",
            )
        };
    }
    let ok = ["memory", "cpuacct"]
        .iter()
        .all(|c| cgroup_root.join(c).is_dir() || has_comounted(cgroup_root, c));
    if ok {
        Check::new(
            "cgroup",
            Verdict::Ok,
            "cgroup v1 with memory and cpuacct".into(),
            "",
        )
    } else {
        Check::new(
            "cgroup",
            Verdict::Note,
            "no usable job cgroups: jobs are measured from /proc".into(),
            "for page-cache-aware memory figures use proctrack/cgroup and task/cgroup",
        )
    }
}

fn has_comounted(root: &Path, name: &str) -> bool {
    std::fs::read_dir(root)
        .map(|rd| {
            rd.flatten().any(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.split(',').any(|c| c == name))
            })
        })
        .unwrap_or(false)
}

/// `plugin_version` of the plugin against the running Slurm's `major.minor`.
pub fn check_plugin_version(plugin_version: Option<u32>, slurm_version: Option<&str>) -> Check {
    let Some(pv) = plugin_version else {
        return Check::new(
            "plugin_version",
            Verdict::Fail,
            "cannot read plugin_version from the plugin".into(),
            "rebuild the plugin against this Slurm's headers",
        );
    };
    let built = format!("{}.{:02}", pv >> 16 & 0xff, pv >> 8 & 0xff);
    let Some(running) = slurm_version else {
        return Check::new(
            "plugin_version",
            Verdict::Fail,
            format!("plugin built for Slurm {built}; cannot tell which Slurm runs here"),
            "put slurmd on PATH",
        );
    };
    let mm: Vec<&str> = running.split('.').take(2).collect();
    let running_mm = match mm.as_slice() {
        [a, b] => format!("{a}.{:02}", b.parse::<u32>().unwrap_or(99)),
        _ => running.to_string(),
    };
    if running_mm == built {
        Check::new(
            "plugin_version",
            Verdict::Ok,
            format!("plugin built for Slurm {built}; slurmd is {running}"),
            "",
        )
    } else {
        Check::new(
            "plugin_version",
            Verdict::Fail,
            format!(
                "plugin built for Slurm {built} but slurmd is {running}: slurmstepd will refuse it"
            ),
            "rebuild the plugin against this Slurm's headers (SLURM_INCLUDE_DIR) and reinstall",
        )
    }
}

/// `plugin_version` as exported by a built plugin, read from its ELF dynamic symbols (the
/// plugin cannot be dlopen()ed outside slurmstepd: it is linked with immediate binding and
/// its Slurm functions exist only there).
pub fn plugin_version_from_elf(bytes: &[u8]) -> Option<u32> {
    use object::{Object, ObjectSection, ObjectSymbol};
    let file = object::File::parse(bytes).ok()?;
    let sym = file
        .dynamic_symbols()
        .find(|s| s.name() == Ok("plugin_version"))?;
    let section = file.section_by_index(sym.section_index()?).ok()?;
    let data = section.data().ok()?;
    let offset = usize::try_from(sym.address().checked_sub(section.address())?).ok()?;
    let raw: [u8; 4] = data.get(offset..offset + 4)?.try_into().ok()?;
    Some(if file.is_little_endian() {
        u32::from_le_bytes(raw)
    } else {
        u32::from_be_bytes(raw)
    })
}

/// Whether every check passed (notes are fine).
pub fn ready(checks: &[Check]) -> bool {
    checks.iter().all(|c| c.verdict != Verdict::Fail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn plugstack_line_found_through_includes_and_parsed() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("plugstack.conf.d")).unwrap();
        std::fs::write(
            d.path().join("plugstack.conf"),
            format!(
                "# site\ninclude {}/plugstack.conf.d/*.conf\n",
                d.path().display()
            ),
        )
        .unwrap();
        std::fs::write(
            d.path().join("plugstack.conf.d/slurmwatch.conf"),
            "optional /usr/lib/slurm/slurmwatch.so default=on spool=/var/spool/sw # comment\n",
        )
        .unwrap();
        let (check, config, line) = check_plugstack(&d.path().join("plugstack.conf"));
        assert_eq!(check.verdict, Verdict::Ok, "{check:?}");
        assert_eq!(config.unwrap().spool_dir, PathBuf::from("/var/spool/sw"));
        assert_eq!(
            line.unwrap().plugin,
            PathBuf::from("/usr/lib/slurm/slurmwatch.so")
        );
    }

    #[test]
    fn plugstack_bad_argument_and_required_are_named() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("plugstack.conf");
        std::fs::write(&conf, "optional /x/slurmwatch.so defualt=on\n").unwrap();
        let (check, _, _) = check_plugstack(&conf);
        assert_eq!(check.verdict, Verdict::Fail);
        assert!(
            check
                .finding
                .contains("unknown plugstack argument \"defualt\""),
            "{check:?}"
        );
        std::fs::write(&conf, "required /x/slurmwatch.so\n").unwrap();
        assert!(check_plugstack(&conf).0.finding.contains("required"));
        std::fs::write(&conf, "optional /x/other.so\n").unwrap();
        assert_eq!(check_plugstack(&conf).0.verdict, Verdict::Fail);
    }

    #[test]
    fn spool_must_be_root_owned_and_not_writable_by_others() {
        let d = tempfile::tempdir().unwrap();
        let spool = d.path().join("spool");
        assert_eq!(check_spool(&spool).verdict, Verdict::Fail);
        std::fs::create_dir(&spool).unwrap();
        std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let owned_by_root = std::fs::metadata(&spool).unwrap().uid() == 0;
        assert_eq!(
            check_spool(&spool).verdict,
            if owned_by_root {
                Verdict::Ok
            } else {
                Verdict::Fail
            }
        );
        std::fs::set_permissions(&spool, std::fs::Permissions::from_mode(0o777)).unwrap();
        let c = check_spool(&spool);
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.finding.contains("0777"), "{c:?}");
    }

    #[test]
    fn archive_base_must_exist() {
        let d = tempfile::tempdir().unwrap();
        let t = format!("{}/archive/%u", d.path().display());
        assert_eq!(check_archive(Some(&t)).verdict, Verdict::Fail);
        std::fs::create_dir(d.path().join("archive")).unwrap();
        assert_eq!(check_archive(Some(&t)).verdict, Verdict::Ok);
        assert_eq!(check_archive(None).verdict, Verdict::Note);
    }

    #[test]
    fn plugin_version_compares_major_minor() {
        assert_eq!(
            check_plugin_version(Some(0x160508), Some("22.05.8")).verdict,
            Verdict::Ok
        );
        assert_eq!(
            check_plugin_version(Some(0x160508), Some("22.05.11")).verdict,
            Verdict::Ok
        );
        let c = check_plugin_version(Some(0x160508), Some("23.02.1"));
        assert_eq!(c.verdict, Verdict::Fail);
        assert!(c.finding.contains("22.05") && c.finding.contains("23.02.1"));
    }

    #[test]
    fn elf_without_the_symbol_or_garbage_gives_none() {
        assert_eq!(plugin_version_from_elf(b"not an elf"), None);
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(plugin_version_from_elf(&me), None);
    }

    #[test]
    fn cgroup_layouts() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(check_cgroup(d.path()).verdict, Verdict::Note);
        std::fs::create_dir(d.path().join("memory")).unwrap();
        std::fs::create_dir(d.path().join("cpu,cpuacct")).unwrap();
        assert_eq!(check_cgroup(d.path()).verdict, Verdict::Ok);
        let v2 = tempfile::tempdir().unwrap();
        std::fs::write(
            v2.path().join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )
        .unwrap();
        assert_eq!(check_cgroup(v2.path()).verdict, Verdict::Ok);
    }
}
