//! The pattern file: progress lines of tools slurmwatch does not know, one regular expression
//! a line, which a site or a user writes.
//!
//! ```text
//! # Blank lines and lines starting with # are skipped.
//! # A pattern, then (after whitespace) the unit of its rate.
//! ^train step (?P<done>\d+)/(?P<total>\d+) .* (?P<rate>[0-9.]+) samples/s$  unit=samples/s
//! iteration (?P<done>\d+)
//! ```
//!
//! A pattern is a regular expression in the syntax of Rust's `regex` crate (no look-around,
//! no back-references), tried on each segment of the log between two `\r`/`\n`, terminal
//! escapes removed; it matches anywhere in the segment unless anchored with `^`/`$`. Its named
//! groups are what it reads: `done` and `total` (whole numbers), `rate` and `elapsed`
//! (seconds), decimals, and `label` (text). It needs `done` or `rate`; a `rate` needs its
//! unit after the pattern, `unit=UNIT`, a unit in which higher is faster (a pattern cannot
//! turn `s/it` over: read what the tool prints per second, or only `done`). The first
//! pattern that matches a segment and whose groups parse gives its reading, before any
//! built-in parser.
//!
//! Safe whatever a user writes: the `regex` crate matches in time linear in the text, each
//! compiled pattern is bounded ([`COMPILED_LIMIT`]), and so are the file's patterns and
//! their length. A bad file is refused with one sentence naming the line, and a hint.

use regex::{Regex, RegexBuilder};

use super::{number, Count, Rate, Reading, Tool};

/// The most patterns a file may hold.
pub const MAX_PATTERNS: usize = 64;
/// The longest pattern line, in bytes.
pub const MAX_PATTERN_BYTES: usize = 1024;
/// The most memory one compiled pattern may take (`RegexBuilder::size_limit`): `\w{1000}`
/// style repetitions grow past it and are refused, not compiled.
pub const COMPILED_LIMIT: usize = 256 << 10;

/// The group names a pattern may use.
const GROUPS: [&str; 5] = ["done", "total", "rate", "elapsed", "label"];

/// A parsed pattern file: its patterns, in the file's order.
#[derive(Debug, Clone, Default)]
pub struct Patterns {
    patterns: Vec<Pattern>,
}

#[derive(Debug, Clone)]
struct Pattern {
    regex: Regex,
    unit: Option<String>,
}

/// Why a pattern file was refused: its line (from 1) and what is wrong there. Displays as one
/// sentence with a hint; the caller adds the file's path.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("progress patterns, line {line}: {problem}")]
pub struct PatternError {
    pub line: usize,
    pub problem: PatternProblem,
}

/// What is wrong with a pattern line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternProblem {
    #[error(
        "the regular expression does not compile ({0}); hint: the syntax is Rust's regex crate \
         (https://docs.rs/regex), which has no look-around or back-references"
    )]
    Syntax(String),
    #[error(
        "the regular expression compiles to more than {} KiB; hint: use fewer or smaller \
         counted repetitions",
        COMPILED_LIMIT >> 10
    )]
    TooLarge,
    #[error(
        "it has neither a (?P<done>…) nor a (?P<rate>…) group, so it reads nothing; hint: name \
         the count `done` or the speed `rate`, e.g. `step (?P<done>\\d+)`"
    )]
    ReadsNothing,
    #[error(
        "it has a group named `{0}`, which is not read; hint: the names read are done, total, \
         rate, elapsed and label"
    )]
    UnknownGroup(String),
    #[error("its rate has no unit; hint: end the line with the unit, e.g. `  unit=samples/s`")]
    NoUnit,
    #[error("it gives a unit but has no (?P<rate>…) group; hint: name the speed `rate`, or drop the unit")]
    UnitWithoutRate,
    #[error(
        "it is longer than {MAX_PATTERN_BYTES} bytes; hint: a progress line needs a short pattern"
    )]
    TooLong,
    #[error(
        "the file has more than {MAX_PATTERNS} patterns; hint: keep those of the tools you run"
    )]
    TooMany,
}

/// Reads a pattern file: every pattern compiled and checked, or the first bad line.
pub fn parse_patterns(text: &str) -> Result<Patterns, PatternError> {
    let mut patterns = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let at = |problem| PatternError {
            line: i + 1,
            problem,
        };
        if patterns.len() == MAX_PATTERNS {
            return Err(at(PatternProblem::TooMany));
        }
        patterns.push(pattern(t).map_err(at)?);
    }
    Ok(Patterns { patterns })
}

/// One line: the expression, then an optional `unit=UNIT` after whitespace.
fn pattern(t: &str) -> Result<Pattern, PatternProblem> {
    if t.len() > MAX_PATTERN_BYTES {
        return Err(PatternProblem::TooLong);
    }
    let (expr, unit) = match t.rsplit_once(char::is_whitespace) {
        Some((e, u)) if u.starts_with("unit=") => (e.trim_end(), Some(&u["unit=".len()..])),
        _ => (t, None),
    };
    let regex = RegexBuilder::new(expr)
        .size_limit(COMPILED_LIMIT)
        .dfa_size_limit(4 * COMPILED_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => PatternProblem::TooLarge,
            e => PatternProblem::Syntax(syntax_error(&e.to_string())),
        })?;
    let names: Vec<&str> = regex.capture_names().flatten().collect();
    if let Some(n) = names.iter().find(|n| !GROUPS.contains(n)) {
        return Err(PatternProblem::UnknownGroup(n.to_string()));
    }
    let has = |g| names.contains(&g);
    if !has("done") && !has("rate") {
        return Err(PatternProblem::ReadsNothing);
    }
    let unit = unit.filter(|u| !u.is_empty()).map(str::to_string);
    match (has("rate"), &unit) {
        (true, None) => Err(PatternProblem::NoUnit),
        (false, Some(_)) => Err(PatternProblem::UnitWithoutRate),
        _ => Ok(Pattern { regex, unit }),
    }
}

/// The regex crate's own sentence (`unclosed group`) out of its multi-line diagram.
fn syntax_error(message: &str) -> String {
    message
        .lines()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or(message.lines().last().unwrap_or(message))
        .trim()
        .to_string()
}

impl Patterns {
    pub fn len(&self) -> usize {
        self.patterns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    /// The first pattern's reading of `line`.
    pub(super) fn read(&self, line: &str) -> Option<Reading> {
        self.patterns.iter().find_map(|p| p.read(line))
    }
}

impl Pattern {
    /// The reading of `line`, `None` where it does not match or a group does not parse.
    fn read(&self, line: &str) -> Option<Reading> {
        let c = self.regex.captures(line)?;
        let whole = |g| c.name(g).map(|m| m.as_str().parse::<u64>().ok());
        let mut r = Reading::new(Tool::Pattern);
        if let Some(done) = whole("done") {
            r.count = Some(Count {
                done: done?,
                total: whole("total").flatten(),
            });
        }
        if let (Some(rate), Some(unit)) = (c.name("rate"), &self.unit) {
            r.rates
                .push(Rate::new(number(rate.as_str())?, unit.clone())?);
        }
        r.elapsed_seconds = c.name("elapsed").and_then(|m| number(m.as_str()));
        r.label = c.name("label").map(|m| m.as_str().to_string());
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{readings_with, Tool};
    use super::*;

    #[test]
    fn a_pattern_file_reads_a_tool_slurmwatch_does_not_know() {
        let file = "# our in-house trainer\n\
                    \n\
                    ^\\[(?P<label>\\w+)\\] step (?P<done>\\d+)/(?P<total>\\d+), (?P<rate>[0-9.]+) img/s, (?P<elapsed>[0-9.]+)s$  unit=img/s\n\
                    ^iteration (?P<done>\\d+)\n";
        let p = parse_patterns(file).unwrap();
        assert_eq!(p.len(), 2);
        let log = "starting\n[train] step 40/100, 812.5 img/s, 12.5s\niteration 7\r\
                   [train] step x/100, 1 img/s, 1s\n";
        let r = readings_with(log, &p);
        assert_eq!(r.len(), 2, "{r:?}");
        assert_eq!(r[0].tool, Tool::Pattern);
        assert_eq!(r[0].label.as_deref(), Some("train"));
        let c = r[0].count.as_ref().unwrap();
        assert_eq!((c.done, c.total), (40, Some(100)));
        assert_eq!(
            (r[0].rates[0].value, &*r[0].rates[0].unit),
            (812.5, "img/s")
        );
        assert_eq!(r[0].elapsed_seconds, Some(12.5));
        assert_eq!(r[0].end, log.find(", 12.5s").unwrap() + ", 12.5s".len());
        assert_eq!(r[1].count.as_ref().unwrap().done, 7);
        // A pattern comes before the built-in parsers: it may claim a tqdm bar.
        let p = parse_patterns("(?P<done>\\d+)/\\d+ \\[").unwrap();
        let r = readings_with(" 5%|▌ | 2/40 [00:00<00:00, 49.21it/s]", &p);
        assert_eq!((r[0].tool, r[0].rates.len()), (Tool::Pattern, 0));
    }

    fn refused(file: &str) -> PatternError {
        parse_patterns(file).unwrap_err()
    }

    #[test]
    fn a_broken_regex_is_one_sentence_with_its_line_and_a_hint() {
        let e = refused("# mine\nstep (?P<done>\\d+\n");
        assert_eq!(e.line, 2);
        assert_eq!(e.problem, PatternProblem::Syntax("unclosed group".into()));
        let s = e.to_string();
        assert!(s.starts_with("progress patterns, line 2: the regular expression does not compile (unclosed group); hint: "), "{s}");
        assert!(!s.contains('\n'), "{s}");
        // Look-around is not in the syntax (it could take more than linear time).
        let e = refused("(?<=step )(?P<done>\\d+)");
        assert!(matches!(e.problem, PatternProblem::Syntax(_)), "{e}");
    }

    #[test]
    fn a_pattern_without_a_named_group_reads_nothing_and_is_refused() {
        let e = refused("step \\d+\n");
        assert_eq!((e.line, &e.problem), (1, &PatternProblem::ReadsNothing));
        assert!(e.to_string().contains("hint: name the count `done`"), "{e}");
        let e = refused("step (?P<don>\\d+)");
        assert_eq!(e.problem, PatternProblem::UnknownGroup("don".into()));
        assert_eq!(
            refused("(?P<rate>\\d+) it/s").problem,
            PatternProblem::NoUnit
        );
        let e = refused("(?P<done>\\d+) unit=it/s");
        assert_eq!(e.problem, PatternProblem::UnitWithoutRate);
    }

    #[test]
    fn patterns_are_bounded() {
        // 1000 nested counted repetitions compile past the limit: refused, not built.
        let e = refused("(?P<done>(((\\w{100}){100}){100}))");
        assert_eq!(e.problem, PatternProblem::TooLarge);
        let long = format!("(?P<done>\\d+){}", "x".repeat(MAX_PATTERN_BYTES));
        assert_eq!(refused(&long).problem, PatternProblem::TooLong);
        let many = "(?P<done>\\d+)\n".repeat(MAX_PATTERNS + 1);
        assert_eq!(
            refused(&many),
            PatternError {
                line: MAX_PATTERNS + 1,
                problem: PatternProblem::TooMany
            }
        );
        // An empty file, or one of comments, has no patterns.
        assert!(parse_patterns("# none\n\n").unwrap().is_empty());
    }
}
