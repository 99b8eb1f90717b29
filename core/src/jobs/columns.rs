//! The table's columns, `--format`, and its renderings: an aligned text table, CSV
//! (formula-escaped: job names are user input), `|`-separated (`--parsable`) and JSON.
//!
//! An unknown efficiency is `---` in the text table (reportseff's mark) and an empty cell in
//! CSV and parsable output, never 0.

use serde_json::{json, Value};

use super::array::ArrayRow;
use super::row::Row;
use crate::analysis::efficiency::Efficiency;
use crate::render::csv::escape_text;
use crate::render::terminal;
use crate::units::slurm_duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    JobId,
    JobName,
    User,
    State,
    ExitCode,
    Elapsed,
    TimeEff,
    CpuEff,
    MemEff,
    GpuEff,
    GpuMem,
    Basis,
}

/// Every column, with its header (what `--format` accepts, case-insensitively).
pub const ALL: &[(Column, &str)] = &[
    (Column::JobId, "JobID"),
    (Column::JobName, "JobName"),
    (Column::User, "User"),
    (Column::State, "State"),
    (Column::ExitCode, "ExitCode"),
    (Column::Elapsed, "Elapsed"),
    (Column::TimeEff, "TimeEff"),
    (Column::CpuEff, "CPUEff"),
    (Column::MemEff, "MemEff"),
    (Column::GpuEff, "GPUEff"),
    (Column::GpuMem, "GPUMem"),
    (Column::Basis, "Basis"),
];

/// The columns without `--format`.
pub const DEFAULT: &[Column] = &[
    Column::JobId,
    Column::State,
    Column::Elapsed,
    Column::TimeEff,
    Column::CpuEff,
    Column::MemEff,
    Column::GpuEff,
    Column::GpuMem,
    Column::Basis,
];

impl Column {
    pub fn header(&self) -> &'static str {
        ALL.iter().find(|(c, _)| c == self).map_or("", |(_, h)| h)
    }
}

/// `JobID,State,CPUEff` → the columns. An unknown name is one sentence naming it and the
/// known ones.
pub fn parse_format(s: &str) -> Result<Vec<Column>, String> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match ALL.iter().find(|(_, h)| h.eq_ignore_ascii_case(name)) {
            Some((c, _)) => out.push(*c),
            None => {
                let known: Vec<&str> = ALL.iter().map(|(_, h)| *h).collect();
                return Err(format!(
                    "--format names an unknown column {name:?}; the columns are {}",
                    known.join(", ")
                ));
            }
        }
    }
    if out.is_empty() {
        return Err("--format names no column; give e.g. --format JobID,State,CPUEff".into());
    }
    Ok(out)
}

/// How a cell is written: for people (`%`, `---`) or for programs (bare number, empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    Text,
    Data,
}

fn pct(p: Option<f64>, style: Style) -> String {
    match (p, style) {
        (Some(p), Style::Text) if p < 10.0 => format!("{p:.1}%"),
        (Some(p), Style::Text) => format!("{p:.0}%"),
        (Some(p), Style::Data) => format!("{p:.1}"),
        (None, Style::Text) => "---".into(),
        (None, Style::Data) => String::new(),
    }
}

fn eff(e: &Efficiency, style: Style) -> String {
    pct(e.percent, style)
}

fn opt(s: Option<String>, style: Style) -> String {
    s.unwrap_or_else(|| {
        if style == Style::Text {
            "---".into()
        } else {
            String::new()
        }
    })
}

/// One job's cell.
pub fn cell(r: &Row, c: Column, style: Style) -> String {
    let e = &r.efficiency;
    match c {
        Column::JobId => r.job_id.clone(),
        Column::JobName => r.job_name.clone(),
        Column::User => opt(r.user.clone(), style),
        Column::State => opt(r.state.clone(), style),
        Column::ExitCode => opt(r.exit_code.map(|c| c.to_string()), style),
        Column::Elapsed => opt(
            r.elapsed_seconds.map(|s| slurm_duration(s.max(0.0) as u64)),
            style,
        ),
        Column::TimeEff => eff(&e.time, style),
        Column::CpuEff => eff(&e.cpu, style),
        Column::MemEff => eff(&e.memory, style),
        Column::GpuEff => eff(&e.gpu_utilization, style),
        Column::GpuMem => eff(&e.gpu_memory, style),
        Column::Basis => r.basis.word().into(),
    }
}

/// An array's summary cell: the means over the tasks where they are known.
pub fn array_cell(a: &ArrayRow, c: Column, style: Style) -> String {
    match c {
        Column::JobId => a.job_id_display(),
        Column::JobName => a.job_name.clone(),
        Column::User => opt(a.user.clone(), style),
        Column::State => a.states_word(),
        Column::ExitCode => opt(a.max_exit_code.map(|c| c.to_string()), style),
        Column::Elapsed => opt(
            a.elapsed_max_seconds
                .map(|s| slurm_duration(s.max(0.0) as u64)),
            style,
        ),
        Column::TimeEff => pct(a.time.mean, style),
        Column::CpuEff => pct(a.cpu.mean, style),
        Column::MemEff => pct(a.memory.mean, style),
        Column::GpuEff => pct(a.gpu_utilization.mean, style),
        Column::GpuMem => pct(a.gpu_memory.mean, style),
        Column::Basis => a.basis_word(),
    }
}

/// What is printed: each job's row, or an array's summary in place of its tasks.
pub enum Line<'a> {
    Job(&'a Row),
    Array(&'a ArrayRow),
}

fn cells(l: &Line, cols: &[Column], style: Style) -> Vec<String> {
    cols.iter()
        .map(|c| match l {
            Line::Job(r) => cell(r, *c, style),
            Line::Array(a) => array_cell(a, *c, style),
        })
        .collect()
}

/// An aligned table, a header line first. Text cells go through [`terminal::field`] (a job
/// name is user input and must not move the terminal's cursor).
pub fn text(lines: &[Line], cols: &[Column]) -> String {
    let mut rows: Vec<Vec<String>> = vec![cols.iter().map(|c| c.header().to_string()).collect()];
    rows.extend(lines.iter().map(|l| {
        cells(l, cols, Style::Text)
            .into_iter()
            .map(|c| terminal::field(&c).into_owned())
            .collect()
    }));
    let widths: Vec<usize> = (0..cols.len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(c);
            } else {
                line.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// CSV (RFC 4180), a header first; every text cell through [`escape_text`] (a cell starting
/// with `=`, `+`, `-` or `@` gets a leading `'`).
pub fn csv(lines: &[Line], cols: &[Column]) -> String {
    let mut out = cols
        .iter()
        .map(|c| c.header())
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    for l in lines {
        let row: Vec<String> = cells(l, cols, Style::Data)
            .iter()
            .map(|c| escape_text(c))
            .collect();
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

/// `|`-separated like `sacct --parsable2`, a header first. A `|` or line break inside a cell
/// (a job name) is replaced by a space so every line keeps its field count.
pub fn parsable(lines: &[Line], cols: &[Column]) -> String {
    let mut out = cols
        .iter()
        .map(|c| c.header())
        .collect::<Vec<_>>()
        .join("|");
    out.push('\n');
    for l in lines {
        let row: Vec<String> = cells(l, cols, Style::Data)
            .into_iter()
            .map(|c| c.replace(['|', '\n', '\r'], " "))
            .collect();
        out.push_str(&row.join("|"));
        out.push('\n');
    }
    out
}

/// `{"schema", "jobs": [...], "arrays": [...]}`: every job's row always (the summary adds,
/// never hides, in JSON); `arrays` only with `--array-summary`.
pub fn json(rows: &[Row], arrays: Option<&[ArrayRow]>) -> String {
    let mut v = json!({
        "schema": super::SCHEMA,
        "jobs": rows,
    });
    if let Some(a) = arrays {
        v["arrays"] = serde_json::to_value(a).unwrap_or(Value::Null);
    }
    serde_json::to_string_pretty(&v).unwrap_or_else(|_| "null".into()) + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_the_unknown_column() {
        assert_eq!(
            parse_format("jobid, cpueff,Basis").unwrap(),
            [Column::JobId, Column::CpuEff, Column::Basis]
        );
        let e = parse_format("JobID,CPUEfficiency").unwrap_err();
        assert!(e.contains("\"CPUEfficiency\""), "{e}");
        assert!(e.contains("MemEff"), "{e}");
        assert!(!e.contains('\n'));
        assert!(parse_format(" , ").is_err());
    }

    #[test]
    fn unknown_is_never_zero() {
        assert_eq!(pct(None, Style::Text), "---");
        assert_eq!(pct(None, Style::Data), "");
        assert_eq!(pct(Some(0.3), Style::Text), "0.3%");
        assert_eq!(pct(Some(93.26), Style::Data), "93.3");
    }
}
