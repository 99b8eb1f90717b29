//! Strict parsing of the `--slurmwatch[=SECONDS]` value and of the plugstack arguments.
//!
//! Both come from outside the plugin (the job's owner and the site's `plugstack.conf`) and are
//! read by code running as root, so every value is parsed strictly: whole numbers in range,
//! known keys only, absolute paths without `..`, templates that expand only Slurm-provided ids.

use std::fmt;
use std::path::PathBuf;

/// Sampling interval when the job gives `--slurmwatch` without a value.
pub const DEFAULT_INTERVAL_SECONDS: u32 = 5;
/// Site bounds on the user's interval unless plugstack says otherwise.
pub const DEFAULT_MIN_INTERVAL_SECONDS: u32 = 1;
pub const DEFAULT_MAX_INTERVAL_SECONDS: u32 = 3600;
/// Where per-job files live on the node unless plugstack says otherwise (root-owned).
pub const DEFAULT_SPOOL_DIR: &str = "/var/spool/slurmwatch";
/// A job's live file stops growing here (`max_file_mb=`): a 7-day job at 5 s is 5–9 MB.
pub const DEFAULT_MAX_FILE_MB: u32 = 32;
/// The largest `max_file_mb=` a site may set: readers refuse files above
/// `store::schema::MAX_FILE_BYTES`, so a capped file must stay readable.
pub const MAX_MAX_FILE_MB: u32 = 48;
/// Spool files older than this are removed at job ends on the node (`retain_days=`; 0 keeps
/// them for ever).
pub const DEFAULT_RETAIN_DAYS: u32 = 30;

/// A refused value: one sentence saying what is wrong, and a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionError {
    pub message: String,
    pub hint: String,
}

impl fmt::Display for OptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.message, self.hint)
    }
}

impl std::error::Error for OptionError {}

fn refuse(message: String, hint: String) -> OptionError {
    OptionError { message, hint }
}

/// Parses the value of `--slurmwatch[=SECONDS]`: `None` (no `=`) means the site's default.
pub fn parse_interval(value: Option<&str>, config: &PluginConfig) -> Result<u32, OptionError> {
    let hint = format!(
        "Use a whole number of seconds from {} to {}, e.g. --slurmwatch={}.",
        config.min_interval_seconds, config.max_interval_seconds, config.default_interval_seconds
    );
    let Some(raw) = value else {
        return Ok(config.default_interval_seconds);
    };
    let shown: String = raw.chars().take(40).collect();
    // Only ASCII digits: rejects signs, exponents, spaces and hex that `parse` or `strtoul`
    // would accept or silently truncate.
    if raw.is_empty() || raw.len() > 10 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refuse(
            format!("slurmwatch: --slurmwatch={shown:?} is not a whole number of seconds."),
            hint,
        ));
    }
    let seconds: u64 = raw.parse().map_err(|_| {
        refuse(
            format!("slurmwatch: --slurmwatch={shown} is not a whole number of seconds."),
            hint.clone(),
        )
    })?;
    if seconds < u64::from(config.min_interval_seconds)
        || seconds > u64::from(config.max_interval_seconds)
    {
        return Err(refuse(
            format!("slurmwatch: --slurmwatch={seconds} is outside the range this site allows."),
            hint,
        ));
    }
    Ok(seconds as u32)
}

/// Whether jobs are recorded when they do not ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    /// Only jobs that pass `--slurmwatch` are recorded.
    Off,
    /// Every job is recorded at the default interval.
    On,
}

/// The site's configuration: the arguments after the plugin path in `plugstack.conf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    pub default: Default,
    pub default_interval_seconds: u32,
    pub min_interval_seconds: u32,
    pub max_interval_seconds: u32,
    /// Node-local, root-owned directory for the live per-job files.
    pub spool_dir: PathBuf,
    /// Optional archive template on a filesystem reachable from login nodes, e.g.
    /// `/shared/slurmwatch/%u/%j`; expanded only with Slurm-provided ids.
    pub archive_template: Option<String>,
    /// The NVML library the sampler loads for GPU readings (`nvml=`): the site's choice,
    /// never the job's environment. `None`: the driver's `libnvidia-ml.so.1` via the
    /// loader's default search (ld.so.cache; slurmstepd's own environment).
    pub nvml_library: Option<PathBuf>,
    /// The cap on one job's live file per node, MiB (`max_file_mb=`).
    pub max_file_mb: u32,
    /// How long spool files are kept, days (`retain_days=`; 0: for ever).
    pub retain_days: u32,
}

impl std::default::Default for PluginConfig {
    fn default() -> Self {
        PluginConfig {
            default: Default::Off,
            default_interval_seconds: DEFAULT_INTERVAL_SECONDS,
            min_interval_seconds: DEFAULT_MIN_INTERVAL_SECONDS,
            max_interval_seconds: DEFAULT_MAX_INTERVAL_SECONDS,
            spool_dir: PathBuf::from(DEFAULT_SPOOL_DIR),
            archive_template: None,
            nvml_library: None,
            max_file_mb: DEFAULT_MAX_FILE_MB,
            retain_days: DEFAULT_RETAIN_DAYS,
        }
    }
}

/// One plugstack argument as the manual, the example file and the admin guide describe it.
/// The default is written from the constant the parser uses, so no document can drift.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgDoc {
    pub key: &'static str,
    /// The value's placeholder (`SECONDS`, `DIR`, ...).
    pub value: &'static str,
    pub default: String,
    pub meaning: &'static str,
}

/// Every plugstack argument, in [`PLUGSTACK_KEYS`] order.
pub fn plugstack_args() -> Vec<ArgDoc> {
    let arg = |key, value, default: String, meaning| ArgDoc {
        key,
        value,
        default,
        meaning,
    };
    vec![
        arg("default", "on|off", "off".into(), "on records every job at `interval`; off records only jobs that pass --slurmwatch"),
        arg("interval", "SECONDS", DEFAULT_INTERVAL_SECONDS.to_string(), "interval for a bare --slurmwatch and for default=on (1..86400)"),
        arg("min_interval", "SECONDS", DEFAULT_MIN_INTERVAL_SECONDS.to_string(), "smallest interval a user may ask for"),
        arg("max_interval", "SECONDS", DEFAULT_MAX_INTERVAL_SECONDS.to_string(), "largest interval a user may ask for"),
        arg("spool", "DIR", DEFAULT_SPOOL_DIR.into(), "node-local, root-owned directory for the live per-job files; never a network filesystem"),
        arg("archive", "TEMPLATE", "none".into(), "directory for a consistent copy at each step's end and every 5 minutes, written with the job user's credentials; placeholders %u user, %U uid, %j job id, %n node, %% percent; every directory below the fixed prefix must be the job user's (or root's) and not group/other-writable, else the copy is refused"),
        arg("nvml", "PATH", "libnvidia-ml.so.1".into(), "the NVML library to load for GPU readings (site-chosen; never taken from the job's environment)"),
        arg("max_file_mb", "N", DEFAULT_MAX_FILE_MB.to_string(), "a job's live file (database + WAL) stops growing at N MiB per node (1..48); one event says so, the job runs on"),
        arg("retain_days", "N", DEFAULT_RETAIN_DAYS.to_string(), "spool files older than N days are removed at job ends on the node (0: never)"),
    ]
}

/// The plugstack keys, for messages.
pub const PLUGSTACK_KEYS: &[&str] = &[
    "default",
    "interval",
    "min_interval",
    "max_interval",
    "spool",
    "archive",
    "nvml",
    "max_file_mb",
    "retain_days",
];

/// A whole number in `lo..=hi` for plugstack `key`.
fn parse_bounded_arg(key: &str, value: &str, lo: u32, hi: u32) -> Result<u32, OptionError> {
    let n = (!value.is_empty() && value.len() <= 6 && value.bytes().all(|b| b.is_ascii_digit()))
        .then(|| value.parse::<u32>().ok())
        .flatten()
        .filter(|n| (lo..=hi).contains(n));
    n.ok_or_else(|| {
        refuse(
            format!("slurmwatch: plugstack argument {key}={value:?} is not a whole number from {lo} to {hi}."),
            format!("Write it as e.g. {key}={hi}."),
        )
    })
}

fn parse_seconds_arg(key: &str, value: &str) -> Result<u32, OptionError> {
    if value.is_empty() || value.len() > 7 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refuse(
            format!(
                "slurmwatch: plugstack argument {key}={value:?} is not a whole number of seconds."
            ),
            "Write it as e.g. interval=5.".into(),
        ));
    }
    let n: u32 = value.parse().unwrap_or(0);
    if n == 0 || n > 86_400 {
        return Err(refuse(
            format!("slurmwatch: plugstack argument {key}={n} is out of range."),
            "Use 1 to 86400 seconds.".into(),
        ));
    }
    Ok(n)
}

/// An absolute, normalised path: no `..`, no `.`, no empty components, no NUL.
fn parse_abs_path(key: &str, value: &str) -> Result<PathBuf, OptionError> {
    let ok = value.starts_with('/')
        && value.len() < 4096
        && !value.contains('\0')
        && value
            .split('/')
            .skip(1)
            .all(|c| !c.is_empty() && c != "." && c != "..");
    if !ok {
        return Err(refuse(
            format!("slurmwatch: plugstack argument {key}={value:?} is not an absolute path without '..'."),
            format!("Write an absolute path, e.g. {key}={}.", match key {
                "nvml" => "/usr/lib64/libnvidia-ml.so.1",
                "archive" => "/shared/slurmwatch/%u",
                _ => "/var/spool/slurmwatch",
            }),
        ));
    }
    Ok(PathBuf::from(value))
}

impl PluginConfig {
    /// Parses `key=value` arguments; an unknown key or a bad value refuses the whole line
    /// (the plugin then records nothing and logs the sentence: a typo must not half-apply).
    pub fn parse<S: AsRef<str>>(args: &[S]) -> Result<PluginConfig, OptionError> {
        let mut c = PluginConfig::default();
        for arg in args {
            let arg = arg.as_ref();
            let Some((key, value)) = arg.split_once('=') else {
                return Err(refuse(
                    format!("slurmwatch: plugstack argument {arg:?} is not key=value."),
                    format!("Known keys: {}.", PLUGSTACK_KEYS.join(", ")),
                ));
            };
            match key {
                "default" => {
                    c.default = match value {
                        "on" => Default::On,
                        "off" => Default::Off,
                        _ => {
                            return Err(refuse(
                                format!("slurmwatch: plugstack argument default={value:?} is neither on nor off."),
                                "Write default=on to record every job, default=off to record only jobs that ask.".into(),
                            ))
                        }
                    }
                }
                "interval" => c.default_interval_seconds = parse_seconds_arg(key, value)?,
                "min_interval" => c.min_interval_seconds = parse_seconds_arg(key, value)?,
                "max_interval" => c.max_interval_seconds = parse_seconds_arg(key, value)?,
                "spool" => {
                    c.spool_dir = parse_abs_path(key, value)?;
                    validate_spool_template(value)?;
                }
                "nvml" => c.nvml_library = Some(parse_abs_path(key, value)?),
                "max_file_mb" => c.max_file_mb = parse_bounded_arg(key, value, 1, MAX_MAX_FILE_MB)?,
                "retain_days" => c.retain_days = parse_bounded_arg(key, value, 0, 36_500)?,
                "archive" => {
                    parse_abs_path(key, value)?;
                    validate_template(value)?;
                    c.archive_template = Some(value.to_string());
                }
                _ => {
                    return Err(refuse(
                        format!("slurmwatch: unknown plugstack argument {key:?}."),
                        format!("Known keys: {}.", PLUGSTACK_KEYS.join(", ")),
                    ))
                }
            }
        }
        if c.min_interval_seconds > c.max_interval_seconds
            || c.default_interval_seconds < c.min_interval_seconds
            || c.default_interval_seconds > c.max_interval_seconds
        {
            return Err(refuse(
                format!(
                    "slurmwatch: plugstack arguments need min_interval <= interval <= max_interval (got {} <= {} <= {}).",
                    c.min_interval_seconds, c.default_interval_seconds, c.max_interval_seconds
                ),
                "Adjust them in plugstack.conf.".into(),
            ));
        }
        Ok(c)
    }
}

/// The placeholders an archive template may use; all are ids Slurm provides, never user text.
pub const TEMPLATE_PLACEHOLDERS: &[(char, &str)] = &[
    ('u', "user name"),
    ('U', "numeric uid"),
    ('j', "job id"),
    ('n', "node name"),
];

fn validate_template(t: &str) -> Result<(), OptionError> {
    let mut chars = t.chars();
    while let Some(ch) = chars.next() {
        if ch == '%' {
            match chars.next() {
                Some(p) if p == '%' || TEMPLATE_PLACEHOLDERS.iter().any(|(c, _)| *c == p) => {}
                other => {
                    return Err(refuse(
                        format!(
                            "slurmwatch: archive template {t:?} uses %{} which is not a known placeholder.",
                            other.map(String::from).unwrap_or_default()
                        ),
                        "Use %u (user), %U (uid), %j (job id), %n (node) or %%.".into(),
                    ))
                }
            }
        }
    }
    Ok(())
}

/// The spool may name the node (`%n`) for hosts that run several slurmd (test clusters,
/// emulated nodes): nothing else, since root creates it.
fn validate_spool_template(t: &str) -> Result<(), OptionError> {
    let mut chars = t.chars();
    while let Some(ch) = chars.next() {
        if ch == '%' && !matches!(chars.next(), Some('n' | '%')) {
            return Err(refuse(
                format!("slurmwatch: spool {t:?} uses a placeholder other than %n."),
                "Only %n (the node name) is allowed in spool=.".into(),
            ));
        }
    }
    Ok(())
}

/// The spool directory for `node`: `%n` expanded (the node name must be a plain name).
pub fn spool_for_node(spool: &std::path::Path, node: &str) -> Option<PathBuf> {
    let t = spool.to_str()?;
    if !t.contains('%') {
        return Some(spool.to_path_buf());
    }
    if !is_plain_name(node) {
        return None;
    }
    Some(PathBuf::from(
        t.replace("%%", "\u{0}")
            .replace("%n", node)
            .replace('\u{0}', "%"),
    ))
}

/// A user or node name that can be a path component: letters, digits, `-_.@`, no leading dot.
pub fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && !s.starts_with('.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
}

/// Values substituted into an archive template.
pub struct TemplateIds<'a> {
    pub user: &'a str,
    pub uid: u32,
    pub job_id: u32,
    pub node: &'a str,
}

/// The archive directory as the site's fixed prefix (the leading components without a
/// placeholder: the admin's, which may hold symlinks) and the expanded components below it,
/// which `private_dir` walks without following links. `None` when an id is unsafe.
pub fn archive_dir_parts(t: &str, ids: &TemplateIds<'_>) -> Option<(PathBuf, Vec<String>)> {
    let mut prefix = PathBuf::from("/");
    let mut below = Vec::new();
    for c in t.split('/').filter(|c| !c.is_empty()) {
        if below.is_empty() && !c.contains('%') {
            prefix.push(c);
        } else {
            let name = expand_template(c, ids)?.to_str()?.to_string();
            if !is_plain_name(&name) {
                return None;
            }
            below.push(name);
        }
    }
    Some((prefix, below))
}

/// Expands a validated template. A user or node name that could escape the directory
/// (`/`, `..`, leading `.`, control characters) is refused rather than substituted.
pub fn expand_template(t: &str, ids: &TemplateIds<'_>) -> Option<PathBuf> {
    fn safe(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 255
            && !s.starts_with('.')
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '@'))
    }
    if !safe(ids.user) || !safe(ids.node) {
        return None;
    }
    let mut out = String::new();
    let mut chars = t.chars();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        match chars.next()? {
            '%' => out.push('%'),
            'u' => out.push_str(ids.user),
            'U' => out.push_str(&ids.uid.to_string()),
            'j' => out.push_str(&ids.job_id.to_string()),
            'n' => out.push_str(ids.node),
            _ => return None,
        }
    }
    Some(PathBuf::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn cfg() -> PluginConfig {
        PluginConfig::default()
    }

    #[test]
    fn interval_accepts_plain_seconds_and_default() {
        assert_eq!(parse_interval(None, &cfg()), Ok(5));
        assert_eq!(parse_interval(Some("5"), &cfg()), Ok(5));
        assert_eq!(parse_interval(Some("1"), &cfg()), Ok(1));
        assert_eq!(parse_interval(Some("3600"), &cfg()), Ok(3600));
    }

    #[test]
    fn interval_refuses_hostile_values() {
        for bad in [
            "abc",
            "0",
            "-5",
            "1e9",
            "1000000000",
            "",
            " 5",
            "5 ",
            "+5",
            "0x10",
            "5.0",
            "3601",
            "99999999999999999999",
            "٣",
        ] {
            let e = parse_interval(Some(bad), &cfg()).unwrap_err();
            assert!(
                e.message.starts_with("slurmwatch: --slurmwatch="),
                "{bad}: {e}"
            );
            assert!(e.hint.contains("1 to 3600"), "{bad}: {e}");
        }
    }

    #[test]
    fn interval_respects_site_bounds() {
        let c =
            PluginConfig::parse(&["min_interval=10", "interval=30", "max_interval=60"]).unwrap();
        assert_eq!(parse_interval(None, &c), Ok(30));
        assert!(parse_interval(Some("5"), &c).is_err());
        assert!(parse_interval(Some("61"), &c).is_err());
        assert_eq!(parse_interval(Some("60"), &c), Ok(60));
    }

    #[test]
    fn plugstack_parses_known_keys() {
        let c = PluginConfig::parse(&[
            "default=on",
            "spool=/var/spool/sw",
            "archive=/shared/sw/%u/%j",
        ])
        .unwrap();
        assert_eq!(c.default, Default::On);
        assert_eq!(c.spool_dir, PathBuf::from("/var/spool/sw"));
        assert_eq!(c.archive_template.as_deref(), Some("/shared/sw/%u/%j"));
    }

    #[test]
    fn plugstack_refuses_bad_lines() {
        for bad in [
            "defualt=on",
            "default=yes",
            "spool=relative/dir",
            "spool=/var/../etc",
            "spool=/var//x",
            "archive=/shared/%x",
            "archive=/shared/%",
            "interval=0",
            "interval=-1",
            "noequals",
        ] {
            assert!(PluginConfig::parse(&[bad]).is_err(), "{bad}");
        }
        assert!(PluginConfig::parse(&["min_interval=10", "max_interval=5"]).is_err());
    }

    #[test]
    fn plugstack_nvml_library_is_an_absolute_path() {
        assert_eq!(PluginConfig::default().nvml_library, None);
        let c = PluginConfig::parse(&["nvml=/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"]).unwrap();
        assert_eq!(
            c.nvml_library,
            Some(PathBuf::from("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"))
        );
        for bad in [
            "nvml=libnvidia-ml.so.1",
            "nvml=",
            "nvml=/opt/../tmp/libnvidia-ml.so.1",
            "nvml=/opt//lib.so",
            "nvml=/opt/./lib.so",
        ] {
            let e = PluginConfig::parse(&[bad]).unwrap_err();
            assert!(e.message.contains("nvml="), "{bad}: {e}");
        }
    }

    #[test]
    fn spool_may_name_the_node_only() {
        let c = PluginConfig::parse(&["spool=/var/spool/sw/%n"]).unwrap();
        assert_eq!(
            spool_for_node(&c.spool_dir, "sw2"),
            Some(PathBuf::from("/var/spool/sw/sw2"))
        );
        assert_eq!(spool_for_node(&c.spool_dir, "../etc"), None);
        assert_eq!(
            spool_for_node(Path::new("/var/spool/sw"), "any"),
            Some(PathBuf::from("/var/spool/sw"))
        );
        assert!(PluginConfig::parse(&["spool=/var/spool/%u"]).is_err());
    }

    #[test]
    fn archive_parts_split_the_fixed_prefix_from_the_ids() {
        let ids = TemplateIds {
            user: "alice",
            uid: 1001,
            job_id: 42,
            node: "n1",
        };
        let (p, c) = archive_dir_parts("/shared/sw/%u/j%j", &ids).unwrap();
        assert_eq!(
            (p.as_path(), c),
            (
                Path::new("/shared/sw"),
                vec!["alice".to_string(), "j42".into()]
            )
        );
        let (p, c) = archive_dir_parts("/shared/sw", &ids).unwrap();
        assert_eq!((p.as_path(), c.len()), (Path::new("/shared/sw"), 0));
        let evil = TemplateIds { user: "..", ..ids };
        assert_eq!(archive_dir_parts("/shared/%u", &evil), None);
    }

    #[test]
    fn plugstack_caps_and_retention_are_bounded() {
        let c = PluginConfig::parse(&["max_file_mb=8", "retain_days=0"]).unwrap();
        assert_eq!((c.max_file_mb, c.retain_days), (8, 0));
        let d = PluginConfig::default();
        assert_eq!(
            (d.max_file_mb, d.retain_days),
            (DEFAULT_MAX_FILE_MB, DEFAULT_RETAIN_DAYS)
        );
        for bad in [
            "max_file_mb=0",
            "max_file_mb=49",
            "max_file_mb=-1",
            "retain_days=x",
            "retain_days=",
        ] {
            let e = PluginConfig::parse(&[bad]).unwrap_err();
            assert!(
                e.message.contains("is not a whole number"),
                "{bad}: {}",
                e.message
            );
        }
    }

    #[test]
    fn template_expands_only_slurm_ids() {
        let ids = TemplateIds {
            user: "alice",
            uid: 1001,
            job_id: 42,
            node: "cn01",
        };
        assert_eq!(
            expand_template("/shared/%u/%U/%j-%n%%", &ids),
            Some(PathBuf::from("/shared/alice/1001/42-cn01%"))
        );
        let evil = TemplateIds {
            user: "../root",
            ..ids
        };
        assert_eq!(expand_template("/shared/%u", &evil), None);
    }
}

/// The example file and the admin guide state the defaults the parser uses.
#[cfg(test)]
mod docs_agree {
    use super::*;

    fn repo_file(rel: &str) -> String {
        std::fs::read_to_string(format!("{}/../{rel}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn every_key_is_documented_once_with_the_parsers_default() {
        let keys: Vec<&str> = plugstack_args().iter().map(|a| a.key).collect();
        assert_eq!(keys, PLUGSTACK_KEYS);
        let admin = repo_file("docs/admin.md");
        let example = repo_file("plugstack.conf.example");
        for a in plugstack_args() {
            // docs/admin.md's table: | `key=VALUE` | `default` | bounds | meaning |
            let row = format!("| `{}={}` | ", a.key, a.value.replace('|', "\\|"));
            let rows: Vec<&str> = admin.lines().filter(|l| l.starts_with(&row)).collect();
            assert_eq!(rows.len(), 1, "docs/admin.md: one row for {row:?}");
            let cell = rows[0][row.len()..].split(" | ").next().unwrap();
            assert_eq!(
                cell.trim_matches('`'),
                a.default,
                "docs/admin.md, {}",
                a.key
            );
            // plugstack.conf.example: `#   key=VALUE  meaning ... (default...)` up to the next key.
            let start = example
                .find(&format!("#   {}={}", a.key, a.value))
                .unwrap_or_else(|| panic!("plugstack.conf.example lacks {}", a.key));
            let para: String = example[start..]
                .lines()
                .enumerate()
                .take_while(|(i, l)| {
                    *i == 0 || !l.trim_start_matches('#').trim_start().contains('=')
                })
                .map(|(_, l)| l)
                .collect();
            assert!(
                para.contains(&format!("({}", a.default))
                    || para.contains(&format!("(default: {}", a.default)),
                "plugstack.conf.example, {}: default {} not stated in {para:?}",
                a.key,
                a.default
            );
        }
    }
}
