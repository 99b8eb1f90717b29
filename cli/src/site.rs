//! The site file (docs/reference/site.md): the findings' thresholds, a site's sentence and
//! link per finding code, and where the controller asks nodes for a job's summary
//! (`[summary]`; with the plugstack line read by `slurmwatch_core::site`, the site's one
//! configuration). Read by the CLI alone (never the plugin or the epilogs), parsed
//! strictly: an unknown key or code, a wrong type or a value out of range is one sentence
//! naming the file and the line, and exit 2 — a site's typo never silently changes a report.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use slurmwatch_core::analysis::{self, thresholds, Finding, SiteNote, Thresholds};
use toml::Spanned;

/// Where the site file is looked for when `SLURMWATCH_SITE_FILE` is not set.
pub const DEFAULT_PATH: &str = "/etc/slurmwatch/site.toml";
/// Names another site file (tests, a trial); set empty, no site file is read.
pub const ENV: &str = "SLURMWATCH_SITE_FILE";
/// A site file is a few dozen lines; anything this large is not one.
const MAX_BYTES: u64 = 1 << 20;
/// A note is a sentence, not a page.
const MAX_NOTE_CHARS: usize = 500;

/// What the site file says; `Default` (no file) changes nothing.
#[derive(Debug, Default)]
pub struct Site {
    pub thresholds: Thresholds,
    notes: BTreeMap<String, SiteNote>,
    /// `[summary] url`: where a node serves a job's summary (`{node}`, `{job}` filled in).
    pub summary_url: Option<String>,
    /// `[summary] timeout_seconds`: the controller's bound, collection and store together.
    pub summary_timeout_seconds: Option<u64>,
}

/// The controller's bound when neither a flag nor the site file gives one.
pub const DEFAULT_SUMMARY_TIMEOUT_SECONDS: u64 = 60;

/// The summary endpoint and the controller's bound, each from its flag, else the site file,
/// else the default: the one rule `ctld-epilog`, `ctld-backfill` and `doctor --endpoints`
/// follow.
pub fn summary_endpoint(
    url: Option<String>,
    timeout_seconds: Option<u64>,
) -> anyhow::Result<(String, std::time::Duration)> {
    let site = Site::load()?;
    let url = url
        .or(site.summary_url)
        .unwrap_or_else(|| slurmwatch_core::export::admin_comment_store::DEFAULT_URL.to_string());
    let timeout = timeout_seconds
        .or(site.summary_timeout_seconds)
        .unwrap_or(DEFAULT_SUMMARY_TIMEOUT_SECONDS)
        .max(1);
    Ok((url, std::time::Duration::from_secs(timeout)))
}

/// The bounds of `[summary] timeout_seconds`: slurmctld holds the job COMPLETING meanwhile.
const SUMMARY_TIMEOUT_RANGE: std::ops::RangeInclusive<i64> = 5..=600;

impl Site {
    /// The site file named by [`ENV`], else [`DEFAULT_PATH`] when it exists. A file that was
    /// named but is missing, or any file that cannot be read or parsed, is an error.
    pub fn load() -> anyhow::Result<Site> {
        let (path, named) = match std::env::var_os(ENV) {
            Some(p) if p.is_empty() => return Ok(Site::default()),
            Some(p) => (PathBuf::from(p), true),
            None => (PathBuf::from(DEFAULT_PATH), false),
        };
        let mut text = String::new();
        let read = std::fs::File::open(&path)
            .and_then(|f| f.take(MAX_BYTES + 1).read_to_string(&mut text));
        match read {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => Ok(Site::default()),
            Err(e) => anyhow::bail!(
                "cannot read the site file {}: {e}.\nhint: fix its path or permissions, or unset {ENV}",
                path.display()
            ),
            Ok(_) if text.len() as u64 > MAX_BYTES => anyhow::bail!(
                "the site file {} is over {} KiB: not a site file.\nhint: see docs/reference/site.md",
                path.display(),
                MAX_BYTES >> 10
            ),
            Ok(_) => Site::parse(&path, &text).map_err(anyhow::Error::msg),
        }
    }

    /// Parses a site file's text; the error is the one sentence and hint to print.
    pub fn parse(path: &Path, text: &str) -> Result<Site, String> {
        let at = |span: Option<std::ops::Range<usize>>, what: &str| {
            let line = span.map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            format!(
                "the site file {}{}: {what}.\nhint: the keys and finding codes are in docs/reference/site.md",
                path.display(),
                line.map(|l| format!(" line {l}")).unwrap_or_default()
            )
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            // toml's messages are lower-case, one line, sometimes ending in a newline.
            let msg = e.message().trim().trim_end_matches('.').replace('\n', " ");
            at(e.span(), &msg)
        })?;
        let mut site = Site::default();
        for (k, v) in &raw.thresholds {
            let key = thresholds::key(k.get_ref()).ok_or_else(|| {
                at(
                    Some(k.span()),
                    &format!("unknown key `{}` in [thresholds]", k.get_ref()),
                )
            })?;
            let n = match v.get_ref() {
                toml::Value::Integer(i) => *i as f64,
                toml::Value::Float(f) => *f,
                other => {
                    return Err(at(
                        Some(v.span()),
                        &format!(
                            "`{}` must be a number, not a {}",
                            key.name,
                            other.type_str()
                        ),
                    ))
                }
            };
            key.range.check(n).map_err(|want| {
                at(
                    Some(v.span()),
                    &format!("`{}` must be {want}, not {n}", key.name),
                )
            })?;
            (key.set)(&mut site.thresholds, n);
        }
        summary(&raw.summary, &mut site, &at)?;
        for (code, note) in &raw.notes {
            let c = code.get_ref();
            if !analysis::CODES.contains(&c.as_str()) {
                return Err(at(
                    Some(code.span()),
                    &format!("`{c}` in [notes.{c}] is not a finding code"),
                ));
            }
            let n = note.get_ref();
            if n.text.is_none() && n.url.is_none() {
                return Err(at(
                    Some(code.span()),
                    &format!("[notes.{c}] needs `text` or `url`"),
                ));
            }
            check_note(c, n, &at)?;
            site.notes.insert(
                c.clone(),
                SiteNote {
                    text: n.text.as_ref().map(|t| t.get_ref().clone()),
                    url: n.url.as_ref().map(|u| u.get_ref().clone()),
                },
            );
        }
        Ok(site)
    }

    /// Gives each finding its code's site note.
    pub fn annotate(&self, findings: &mut [Finding]) {
        for f in findings {
            f.site_note = self.notes.get(f.code).cloned();
        }
    }
}

/// Where a site-file error is: its byte span in the file, and what is wrong there.
type ErrorAt<'a> = dyn Fn(Option<std::ops::Range<usize>>, &str) -> String + 'a;

/// `[summary]`: an `http://` URL template with `{job}`, a bound within its range.
fn summary(raw: &RawSummary, site: &mut Site, at: &ErrorAt) -> Result<(), String> {
    if let Some(u) = &raw.url {
        let t = u.get_ref();
        if !t.starts_with("http://") || !t.contains("{job}") || t.chars().any(char::is_whitespace) {
            return Err(at(
                Some(u.span()),
                "[summary] url must be an http:// address with {job} (and {node}) and no spaces",
            ));
        }
        site.summary_url = Some(u.get_ref().clone());
    }
    if let Some(t) = &raw.timeout_seconds {
        if !SUMMARY_TIMEOUT_RANGE.contains(t.get_ref()) {
            return Err(at(
                Some(t.span()),
                &format!(
                    "[summary] timeout_seconds must be {} to {}, not {}",
                    SUMMARY_TIMEOUT_RANGE.start(),
                    SUMMARY_TIMEOUT_RANGE.end(),
                    t.get_ref()
                ),
            ));
        }
        site.summary_timeout_seconds = Some(*t.get_ref() as u64);
    }
    Ok(())
}

/// A note's `text` is one printable line of 1 to [`MAX_NOTE_CHARS`] characters, its `url` an
/// http(s) address without spaces: both are printed to users as they are.
fn check_note(c: &str, n: &RawNote, at: &ErrorAt) -> Result<(), String> {
    if let Some(t) = &n.text {
        let s = t.get_ref();
        if s.trim().is_empty()
            || s.chars().count() > MAX_NOTE_CHARS
            || s.chars().any(char::is_control)
        {
            return Err(at(
                Some(t.span()),
                &format!("[notes.{c}] text must be one line of 1 to {MAX_NOTE_CHARS} characters"),
            ));
        }
    }
    if let Some(u) = &n.url {
        let s = u.get_ref();
        let scheme = s.starts_with("https://") || s.starts_with("http://");
        if !scheme || s.len() > 2000 || s.chars().any(|ch| ch.is_whitespace() || ch.is_control()) {
            return Err(at(
                Some(u.span()),
                &format!("[notes.{c}] url must be an http:// or https:// address without spaces"),
            ));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    thresholds: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    #[serde(default)]
    notes: BTreeMap<Spanned<String>, Spanned<RawNote>>,
    #[serde(default)]
    summary: RawSummary,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSummary {
    url: Option<Spanned<String>>,
    timeout_seconds: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNote {
    text: Option<Spanned<String>>,
    url: Option<Spanned<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Site, String> {
        Site::parse(Path::new("/etc/slurmwatch/site.toml"), text)
    }

    #[test]
    fn the_summary_endpoint_and_its_bound() {
        let s = parse(
            "[summary]\nurl = \"http://{node}.ib:9955/jobs/{job}/summary\"\ntimeout_seconds = 30\n",
        )
        .unwrap();
        assert_eq!(
            s.summary_url.as_deref(),
            Some("http://{node}.ib:9955/jobs/{job}/summary")
        );
        assert_eq!(s.summary_timeout_seconds, Some(30));
        let e = parse("[summary]\nurl = \"https://{node}/jobs/{job}\"\n").unwrap_err();
        assert!(
            e.contains("line 2: [summary] url must be an http:// address"),
            "{e}"
        );
        let e = parse("[summary]\ntimeout_seconds = 3600\n").unwrap_err();
        assert!(
            e.contains("timeout_seconds must be 5 to 600, not 3600"),
            "{e}"
        );
        let e = parse("[summary]\nport = 1\n").unwrap_err();
        assert!(e.contains("unknown field `port`"), "{e}");
    }

    #[test]
    fn thresholds_and_notes() {
        let s = parse(
            "# a comment\n[thresholds]\nmemory_overrequested_percent = 50\nmemory_overrequested_min_unused_gib = 0.5\ngpu_throttled_min_run_percent = 10\n\n[notes.gpu_idle]\ntext = \"Idle GPUs cost the queue.\"\nurl = \"https://hpc.example.org/gpu\"\n",
        )
        .unwrap();
        assert_eq!(s.thresholds.memory_underused_percent, 50.0);
        assert_eq!(s.thresholds.memory_underused_min_unused_bytes, 512 << 20);
        assert_eq!(s.thresholds.gpu_throttled_min_run_percent, 10.0);
        assert_eq!(
            s.thresholds.cpu_underused_percent,
            Thresholds::default().cpu_underused_percent
        );
        assert_eq!(
            s.notes["gpu_idle"].url.as_deref(),
            Some("https://hpc.example.org/gpu")
        );
    }

    /// Each broken file is refused with the line of the fault.
    #[test]
    fn refusals_name_the_line() {
        for (text, line, words) in [
            (
                "[thresholds]\ncpu_underused_percent = 15\n\nbogus_seconds = 3\n",
                4,
                "unknown key `bogus_seconds`",
            ),
            (
                "[thresholds]\ncpu_underused_percent = \"15\"\n",
                2,
                "must be a number, not a string",
            ),
            (
                "[thresholds]\ncpu_underused_percent = 150\n",
                2,
                "from 0 to 100",
            ),
            (
                "[thresholds]\nheavy_paging_major_faults = 1.5\n",
                2,
                "a whole number",
            ),
            (
                "[thresholds]\ncpu_underused_percent = 15\n[notes.gpu_idel]\ntext = \"x\"\n",
                3,
                "`gpu_idel` in [notes.gpu_idel] is not a finding code",
            ),
            (
                "[notes.gpu_idle]\ntext = \"x\"\nlink = \"https://a\"\n",
                3,
                "unknown field `link`",
            ),
            ("[notes.gpu_idle]\ntext = 5\n", 2, "invalid type: integer"),
            (
                "[notes.gpu_idle]\nurl = \"ftp://x\"\n",
                2,
                "http:// or https://",
            ),
            (
                "[notes.gpu_idle]\ntext = \"a\\u001b[31mb\"\n",
                2,
                "one line",
            ),
            ("\n[threshold]\n", 2, "unknown field `threshold`"),
            ("[thresholds\ncpu = 1\n", 1, ""),
        ] {
            let e = parse(text).map(|_| ()).unwrap_err();
            let first = e.lines().next().unwrap();
            assert!(
                first.starts_with(&format!(
                    "the site file /etc/slurmwatch/site.toml line {line}: "
                )),
                "{text:?}: {e}"
            );
            assert!(first.contains(words), "{text:?}: {e}");
            assert_eq!(e.lines().count(), 2, "one sentence and a hint: {e}");
        }
    }

    #[test]
    fn annotate_only_the_named_code() {
        let s = parse("[notes.gpu_idle]\nurl = \"https://x.example/g\"\n").unwrap();
        let f = |code| Finding {
            code,
            facts: Default::default(),
            sentence: String::new(),
            site_note: None,
        };
        let mut fs = vec![f("gpu_idle"), f("cpu_underused")];
        s.annotate(&mut fs);
        assert_eq!(
            fs[0].site_note.as_ref().unwrap().url.as_deref(),
            Some("https://x.example/g")
        );
        assert!(fs[0].site_note.as_ref().unwrap().text.is_none());
        assert!(fs[1].site_note.is_none());
    }
}
