//! The snapshot as CSV (RFC 4180), one row per snapshot.
//!
//! Job names are user input and a spreadsheet runs a cell that begins with `=`, `+`, `-` or
//! `@` (or a tab/CR, which some spreadsheets strip first) as a formula: such text cells get a
//! leading `'`. Numbers are never escaped (they are written by us, never negative text).
//! An unreadable figure is an empty cell, never 0.

use crate::snapshot::{guard_word, GpuSnapshot, Reading, Snapshot};

/// The fixed columns, in order; then `gpu<N>_<key>` for each card (see [`GPU_COLUMNS`]).
pub const COLUMNS: &[&str] = &[
    "reading_unix_ms",
    "job_id",
    "job_name",
    "source",
    "state",
    "cpu_usage_seconds_total",
    "cpu_cores_allocated",
    "cpu_effective_cores",
    "cpu_peak_effective_cores",
    "memory_working_set_bytes",
    "memory_cache_bytes",
    "memory_limit_bytes",
    "memory_limit_used_percent",
    "memory_peak_working_set_bytes",
    "memory_lifetime_peak_bytes",
    "memory_guard",
    "time_elapsed_seconds",
    "time_limit_seconds",
    "gpu_count",
];

/// Per-card columns, prefixed `gpu<N>_` where N is the card's position in the job
/// (its `cuda:N` index).
pub const GPU_COLUMNS: &[&str] = &[
    "uuid",
    "state",
    "utilization_percent",
    "memory_used_bytes",
    "memory_total_bytes",
    "power_watts",
    "power_limit_watts",
    "temperature_celsius",
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "throttle_reasons",
];

/// Added after the rest on an `sstat_summary` row only: sstat's lifetime figures (the
/// live columns stay empty there).
pub const SSTAT_COLUMNS: &[&str] = &[
    "sstat_cpu_seconds_total",
    "sstat_max_rss_bytes",
    "sstat_max_rss_node",
];

/// Escapes one text cell: formula-looking text gets a leading `'`; a cell holding a comma,
/// a quote or a line break is quoted with inner quotes doubled.
pub fn escape_text(s: &str) -> String {
    let guarded = if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if guarded.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", guarded.replace('"', "\"\""))
    } else {
        guarded
    }
}

fn num_u(r: &Reading<u64>) -> String {
    r.value.map(|v| v.to_string()).unwrap_or_default()
}

fn num_u32(r: &Reading<u32>) -> String {
    r.value.map(|v| v.to_string()).unwrap_or_default()
}

fn num_f(r: &Reading<f64>) -> String {
    r.value
        .filter(|v| v.is_finite())
        .map(|v| format!("{}", (v * 1e6).round() / 1e6))
        .unwrap_or_default()
}

/// The header line for this snapshot's shape (its number of GPUs), without a line end.
pub fn header(s: &Snapshot) -> String {
    let mut cols: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    for i in 0..s.gpus.len() {
        cols.extend(GPU_COLUMNS.iter().map(|c| format!("gpu{i}_{c}")));
    }
    if s.sstat.is_some() {
        cols.extend(SSTAT_COLUMNS.iter().map(|c| c.to_string()));
    }
    cols.join(",")
}

/// One data line, without a line end.
pub fn row(s: &Snapshot) -> String {
    let mut cells = vec![
        s.reading_unix_ms.map(|t| t.to_string()).unwrap_or_default(),
        escape_text(&s.job_id),
        escape_text(s.job_name.as_deref().unwrap_or("")),
        s.source.as_str().to_string(),
        s.state.as_str().to_string(),
        num_f(&s.cpu.usage_seconds_total),
        num_u32(&s.cpu.cores_allocated),
        num_f(&s.cpu.effective_cores),
        num_f(&s.cpu.peak_effective_cores),
        num_u(&s.memory.working_set_bytes),
        num_u(&s.memory.cache_bytes),
        num_u(&s.memory.limit_bytes),
        num_f(&s.memory.percent_of_limit),
        num_u(&s.memory.peak_working_set_bytes),
        num_u(&s.memory.lifetime_peak_bytes),
        s.memory.guard.map(guard_word).unwrap_or("").to_string(),
        num_u(&s.time.elapsed_seconds),
        num_u(&s.time.limit_seconds),
        s.gpus.len().to_string(),
    ];
    for g in &s.gpus {
        cells.extend(gpu_cells(g));
    }
    if let Some(st) = &s.sstat {
        cells.push(num_f(&st.cpu_seconds_total));
        cells.push(num_u(&st.max_rss_bytes));
        cells.push(escape_text(st.max_rss_node.as_deref().unwrap_or("")));
    }
    cells.join(",")
}

fn gpu_cells(g: &GpuSnapshot) -> Vec<String> {
    vec![
        escape_text(&g.uuid),
        g.state.map(|s| s.as_str()).unwrap_or("").to_string(),
        num_f(&g.utilization_percent),
        num_u(&g.memory_used_bytes),
        num_u(&g.memory_total_bytes),
        num_f(&g.power_watts),
        num_f(&g.power_limit_watts),
        num_f(&g.temperature_celsius),
        num_u32(&g.sm_clock_mhz),
        num_u32(&g.sm_clock_max_mhz),
        g.throttle_reasons
            .value
            .as_ref()
            .map(|r| escape_text(&r.join(";")))
            .unwrap_or_default(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_cells_are_defused() {
        assert_eq!(escape_text("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
        assert_eq!(escape_text("+1"), "'+1");
        assert_eq!(escape_text("-x"), "'-x");
        assert_eq!(escape_text("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(escape_text("plain"), "plain");
        assert_eq!(escape_text(""), "");
    }

    #[test]
    fn commas_quotes_and_newlines_are_quoted() {
        assert_eq!(escape_text("a,b \"c\"\nd"), "\"a,b \"\"c\"\"\nd\"");
        // Both at once: the guard goes inside the quotes.
        assert_eq!(escape_text("=a,b"), "\"'=a,b\"");
    }
}

#[cfg(test)]
mod rows {
    use super::*;

    fn snap(name: &str) -> Snapshot {
        let path = format!(
            "{}/tests/fixtures/snapshots/cpu_only.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut s: Snapshot =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        s.job_name = Some(name.to_string());
        s
    }

    /// Splits one RFC 4180 record (enough for these tests: quoted fields, doubled quotes).
    fn parse_record(line: &str) -> Vec<String> {
        let mut out = vec![String::new()];
        let mut quoted = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (c, quoted) {
                ('"', true) if chars.peek() == Some(&'"') => {
                    chars.next();
                    out.last_mut().unwrap().push('"');
                }
                ('"', _) => quoted = !quoted,
                (',', false) => out.push(String::new()),
                (c, _) => out.last_mut().unwrap().push(c),
            }
        }
        out
    }

    #[test]
    fn hostile_job_names_are_defused_in_rows() {
        for (name, cell) in [
            ("=cmd|' /C calc'!A0", "'=cmd|' /C calc'!A0"),
            ("+1", "'+1"),
            ("-x", "'-x"),
            ("@SUM(A1)", "'@SUM(A1)"),
            ("a,b \"c\"\nd", "a,b \"c\"\nd"),
        ] {
            let s = snap(name);
            let fields = parse_record(&row(&s));
            let header: Vec<&str> = COLUMNS.to_vec();
            assert_eq!(fields.len(), header.len(), "{name:?}: {:?}", row(&s));
            let i = header.iter().position(|c| *c == "job_name").unwrap();
            assert_eq!(fields[i], cell, "{name:?}");
            assert_eq!(
                fields[header.iter().position(|c| *c == "job_id").unwrap()],
                "4242"
            );
        }
    }

    #[test]
    fn unreadable_is_an_empty_cell_and_gpus_add_columns() {
        let path = format!(
            "{}/tests/fixtures/snapshots/four_gpus.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let s: Snapshot = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let h: Vec<String> = header(&s).split(',').map(String::from).collect();
        let r = parse_record(&row(&s));
        assert_eq!(h.len(), COLUMNS.len() + 4 * GPU_COLUMNS.len());
        assert_eq!(h.len(), r.len());
        let cell = |k: &str| &r[h.iter().position(|c| c == k).unwrap()];
        assert_eq!(cell("gpu2_power_watts"), "");
        assert_eq!(cell("gpu0_power_watts"), "250");
        assert_eq!(cell("gpu1_throttle_reasons"), "sw_power_cap;hw_slowdown");
        assert_eq!(cell("gpu_count"), "4");
        assert_eq!(cell("memory_guard"), "ok");
    }
}
