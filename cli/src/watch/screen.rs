//! The dashboard's picture: a pure function of the snapshot and a few view settings, so
//! `TestBackend` snapshot tests see exactly what a terminal shows.
//!
//! Colours name resources (CPU, MEM, GPU, VRAM); only the memory guard and a GPU's
//! active/idle word grade health (docs/design.md, principle 2). Unreadable figures are `n/a`.

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::border;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Padding, Paragraph};
use ratatui::Frame;

use slurmwatch_core::analysis::ledger::{Ledger, STALLS};
use slurmwatch_core::model::MemoryGuard;
use slurmwatch_core::render::{spark, terminal};
use slurmwatch_core::report::{text_ledger, text_throughput};
use slurmwatch_core::snapshot::{
    guard_word, GpuSnapshot, GpuState, JobState, Reading, Snapshot, SnapshotSource,
};
use slurmwatch_core::units;

/// Identity colours: each names a resource, none means good or bad.
pub const CPU_COLOR: Color = Color::Cyan;
pub const MEM_COLOR: Color = Color::Magenta;
pub const GPU_COLOR: Color = Color::Blue;
pub const VRAM_COLOR: Color = Color::LightMagenta;
/// Health colours, used only by the memory guard and the GPU active/idle word.
pub const AMBER: Color = Color::Yellow;
pub const RED: Color = Color::Red;
pub const ACTIVE: Color = Color::Green;

const ASCII_BORDER: border::Set = border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

/// How to draw, apart from the data.
#[derive(Debug, Clone)]
pub struct View {
    /// Plain ASCII: no box drawing or block characters.
    pub ascii: bool,
    /// `false` under `NO_COLOR` (no colour at all, health words still spelled out).
    pub color: bool,
    /// "Now", for the age of the reading (a parameter so tests are deterministic).
    pub now_unix_ms: i64,
    /// Today's local date (`YYYY-MM-DD`): an end time today is shown without its date.
    pub today: Option<String>,
    /// A multi-node job: what the screen shows (`all 3 nodes`, `node 2 of 3: sw2`).
    pub showing: Option<String>,
}

impl View {
    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }

    fn label(&self, c: Color) -> Style {
        self.fg(c).add_modifier(Modifier::BOLD)
    }

    fn block<'a>(&self, title: &'a str, c: Color) -> Block<'a> {
        let b = Block::bordered()
            .title(Span::styled(format!(" {title} "), self.label(c)))
            .border_style(self.fg(c))
            .padding(Padding::horizontal(1));
        if self.ascii {
            b.border_set(ASCII_BORDER)
        } else {
            b
        }
    }

    fn sep(&self) -> &'static str {
        if self.ascii {
            " | "
        } else {
            " · "
        }
    }
}

const NA: &str = "n/a";

fn or_na<T>(r: &Reading<T>, f: impl Fn(&T) -> String) -> String {
    r.get().map(f).unwrap_or_else(|| NA.to_string())
}

/// A sparkline as text: one character per slot, newest on the right; a `None` slot is a
/// blank (a gap), while 0 still draws the lowest mark.
pub fn sparkline(values: &[Option<f64>], max: f64, width: usize, ascii: bool) -> String {
    let bars = if ascii {
        &spark::ASCII_BARS
    } else {
        &spark::BARS
    };
    let start = values.len().saturating_sub(width);
    let mut s: String =
        std::iter::repeat_n(' ', width.saturating_sub(values.len() - start)).collect();
    s.extend(values[start..].iter().map(|v| spark::mark(*v, max, bars)));
    s
}

/// Draws the whole dashboard into `frame`.
pub fn draw(frame: &mut Frame, s: &Snapshot, v: &View) {
    let area = frame.area();
    let banner = u16::from(s.state == JobState::Ended);
    let gpu_rows = (s.gpus.len() as u16) * 4;
    let ledger = ledger_lines(s, v);
    let chunks = Layout::vertical([
        Constraint::Length(1),      // title
        Constraint::Length(banner), // ended banner
        Constraint::Length(4),      // CPU
        Constraint::Length(5),      // memory
        Constraint::Length(3),      // time
        Constraint::Length(ledger.len() as u16 + 2),
        Constraint::Length(gpu_rows),
        Constraint::Min(0),
        Constraint::Length(1), // footer
    ])
    .split(area);
    frame.render_widget(Paragraph::new(title_line(s, v)), chunks[0]);
    if banner > 0 {
        let when = s
            .reading_unix_ms
            .map(|t| format!(" Last reading {}.", age(v.now_unix_ms, t)))
            .unwrap_or_default();
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(
                format!(" JOB ENDED: these are its final figures.{when} Press q to quit. "),
                Style::new().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            ))),
            chunks[1],
        );
    }
    cpu_block(frame, chunks[2], s, v);
    memory_block(frame, chunks[3], s, v);
    time_block(frame, chunks[4], s, v);
    let title = ledger_title(s, v);
    frame.render_widget(
        Paragraph::new(ledger).block(v.block(&title, Color::Reset)),
        chunks[5],
    );
    let gpu_areas = Layout::vertical(vec![Constraint::Length(4); s.gpus.len()]).split(chunks[6]);
    for (g, a) in s.gpus.iter().zip(gpu_areas.iter()) {
        gpu_block(frame, *a, g, v);
    }
    frame.render_widget(Paragraph::new(footer_line(s, v)), chunks[8]);
}

fn title_line<'a>(s: &'a Snapshot, v: &View) -> Line<'a> {
    let mut spans = vec![
        Span::styled("slurmwatch", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw("  job "),
        Span::styled(
            match &s.step {
                Some(step) => format!("{}.{step}", s.job_id),
                None => s.job_id.clone(),
            },
            Style::new().add_modifier(Modifier::BOLD),
        ),
    ];
    if let Some(n) = &s.job_name {
        // A job name is user text.
        spans.push(Span::raw(format!(" ({})", terminal::field(n))));
    }
    let who = match (&s.user, &s.node) {
        (Some(u), Some(n)) => format!("{}{u} on {n}", v.sep()),
        (Some(u), None) => format!("{}{u}", v.sep()),
        (None, Some(n)) => format!("{}on {n}", v.sep()),
        (None, None) => String::new(),
    };
    spans.push(Span::raw(who));
    spans.push(Span::raw(format!("{}{}", v.sep(), s.source.describe())));
    Line::from(spans)
}

fn age(now_ms: i64, t_ms: i64) -> String {
    let secs = ((now_ms - t_ms).max(0) / 1000) as u64;
    if secs < 60 {
        format!("{secs} s ago")
    } else {
        format!("{} ago", units::slurm_duration(secs))
    }
}

fn footer_line<'a>(s: &Snapshot, v: &View) -> Line<'a> {
    let mut parts = vec!["q quit".to_string()];
    if let Some(what) = &v.showing {
        let reporting = s.nodes_reporting.unwrap_or(0);
        parts.push(format!(
            "n next node ({what}; {reporting} of {} reporting)",
            s.nodes.len()
        ));
    }
    match s.reading_unix_ms {
        Some(t) => parts.push(format!("reading {}", age(v.now_unix_ms, t))),
        None => parts.push("no reading yet".into()),
    }
    if let Some(i) = s.interval_seconds {
        parts.push(format!("every {i} s"));
    }
    if let Some(m) = s.measured_by {
        parts.push(m.as_str().to_string());
    }
    if s.source == SnapshotSource::SstatSummary {
        parts.push("lifetime totals, not live".into());
    }
    Line::from(parts.join(v.sep()))
}

fn cpu_block(frame: &mut Frame, area: Rect, s: &Snapshot, v: &View) {
    let c = &s.cpu;
    let alloc = c.cores_allocated.value();
    // sstat has no peaks at all (n/a): no "since watching" to qualify.
    let peak_scope = if s.peaks_cover_whole_job || s.sstat.is_some() {
        "peak"
    } else {
        "peak since watching"
    };
    let line1 = Line::from(vec![
        Span::styled("cores in use ", v.fg(CPU_COLOR)),
        Span::styled(
            or_na(&c.effective_cores, |x| units::cores(*x)),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            " of {} allocated{}{peak_scope} {}{}total {} CPU-s",
            alloc.map_or(NA.to_string(), |a| a.to_string()),
            v.sep(),
            or_na(&c.peak_effective_cores, |x| units::cores(*x)),
            v.sep(),
            or_na(&c.usage_seconds_total, |x| format!("{x:.1}")),
        )),
    ]);
    let width = area.width.saturating_sub(4) as usize;
    let max = alloc
        .map(f64::from)
        .or(c.peak_effective_cores.value())
        .unwrap_or(1.0);
    // sstat has no rate and no history: its lifetime total takes the sparkline's place.
    let line2 = match &s.sstat {
        Some(st) => Line::from(vec![
            Span::styled("sstat ", v.fg(CPU_COLOR)),
            Span::raw(format!(
                "{} CPU-s so far in the running steps (lifetime total, not live)",
                or_na(&st.cpu_seconds_total, |x| format!("{x:.1}"))
            )),
        ]),
        None => Line::styled(
            sparkline(&s.history.effective_cores, max, width, v.ascii),
            v.fg(CPU_COLOR),
        ),
    };
    let p = Paragraph::new(vec![line1, line2]).block(v.block("CPU", CPU_COLOR));
    frame.render_widget(p, area);
}

fn guard_style(g: MemoryGuard, v: &View) -> Style {
    match g {
        MemoryGuard::Ok => Style::new(),
        MemoryGuard::Amber => v.fg(AMBER).add_modifier(Modifier::BOLD),
        MemoryGuard::Red => v.fg(RED).add_modifier(Modifier::BOLD),
    }
}

fn memory_block(frame: &mut Frame, area: Rect, s: &Snapshot, v: &View) {
    let m = &s.memory;
    let mut line1 = vec![
        Span::styled("working set ", v.fg(MEM_COLOR)),
        Span::styled(
            or_na(&m.working_set_bytes, |b| units::bytes(*b)),
            Style::new().add_modifier(Modifier::BOLD),
        ),
        Span::raw(format!(
            " of {} limit",
            or_na(&m.limit_bytes, |b| units::bytes(*b))
        )),
    ];
    if let Some(p) = m.percent_of_limit.value() {
        line1.push(Span::raw(format!(" ({p:.0} %)")));
    }
    line1.push(Span::raw(" "));
    match m.guard {
        Some(g) => line1.push(Span::styled(
            match g {
                MemoryGuard::Ok => "ok".to_string(),
                g => format!("{} (≥{} %)", guard_word(g).to_uppercase(), threshold(g)),
            },
            guard_style(g, v),
        )),
        None => line1.push(Span::raw("guard n/a")),
    }
    let peak_scope = if s.peaks_cover_whole_job || s.sstat.is_some() {
        "peak working set"
    } else {
        "peak since watching"
    };
    line1.push(Span::raw(format!(
        "{}{peak_scope} {}",
        v.sep(),
        or_na(&m.peak_working_set_bytes, |b| units::bytes(*b))
    )));
    let line2 = Line::from(vec![
        Span::styled("page cache ", v.fg(MEM_COLOR)),
        Span::raw(format!(
            "{}{}kernel peak {} (incl. cache)",
            or_na(&m.cache_bytes, |b| units::bytes(*b)),
            v.sep(),
            or_na(&m.lifetime_peak_bytes, |b| units::bytes(*b))
        )),
    ]);
    let width = area.width.saturating_sub(4) as usize;
    let hist: Vec<Option<f64>> = s
        .history
        .working_set_bytes
        .iter()
        .map(|b| b.map(|b| b as f64))
        .collect();
    let max = m
        .limit_bytes
        .value()
        .or(m.peak_working_set_bytes.value())
        .map_or(1.0, |b| b as f64);
    let line3 = match &s.sstat {
        Some(st) => Line::from(vec![
            Span::styled("sstat MaxRSS ", v.fg(MEM_COLOR)),
            Span::raw(format!(
                "{}{} (largest one task's resident set so far, not live)",
                or_na(&st.max_rss_bytes, |b| units::bytes(*b)),
                st.max_rss_node
                    .as_deref()
                    .map(|n| format!(" on {n}"))
                    .unwrap_or_default()
            )),
        ]),
        None => Line::styled(sparkline(&hist, max, width, v.ascii), v.fg(MEM_COLOR)),
    };
    let p = Paragraph::new(vec![Line::from(line1), line2, line3]).block(v.block("MEM", MEM_COLOR));
    frame.render_widget(p, area);
}

fn threshold(g: MemoryGuard) -> f64 {
    match g {
        MemoryGuard::Red => slurmwatch_core::model::MEMORY_RED_PERCENT,
        _ => slurmwatch_core::model::MEMORY_AMBER_PERCENT,
    }
}

fn time_block(frame: &mut Frame, area: Rect, s: &Snapshot, v: &View) {
    let t = &s.time;
    let elapsed = or_na(&t.elapsed_seconds, |x| units::slurm_duration(*x));
    let limit = match (&t.limit_seconds.value, t.limit_seconds.reason.as_deref()) {
        (Some(l), _) => units::slurm_duration(*l),
        (None, Some("unlimited")) => "no limit".into(),
        _ => NA.into(),
    };
    let mut line = format!("elapsed {elapsed} of {limit}");
    if let Some(e) = t.ends_at.get() {
        line.push_str(&format!(
            "{}ends by {}",
            v.sep(),
            units::slurm_clock(e, v.today.as_deref())
        ));
    }
    if let (Some(e), Some(l)) = (t.elapsed_seconds.value(), t.limit_seconds.value()) {
        if l > 0 {
            line.push_str(&format!(" ({:.0} % used)", e as f64 * 100.0 / l as f64));
        }
    }
    let p = Paragraph::new(line).block(v.block("TIME", Color::Reset));
    frame.render_widget(p, area);
}

/// The ledger block's title: the job's so far (to the reading it is as of), or the whole
/// recording once the job ended, and what it is measured from.
fn ledger_title(s: &Snapshot, v: &View) -> String {
    let scope = match (s.state, s.ledger.get().and_then(|l| l.to_unix_ms)) {
        (JobState::Ended, _) => "whole recording".to_string(),
        (_, Some(t)) => format!("so far, to {}", age(v.now_unix_ms, t)),
        (_, None) => "so far".to_string(),
    };
    let sep = v.sep();
    format!("WHERE IT WENT{sep}{scope}{sep}cgroup, PSI, NVML counters")
}

/// The ledger's lines, short enough for 80 columns (the report's words are longer): core
/// time and how much sat idle, the stalls' shares of the wall time, the cards' time with no
/// work and held back by each limiter; `n/a` with why where unknown.
fn ledger_lines<'a>(s: &Snapshot, v: &View) -> Vec<Line<'a>> {
    let Some(l) = s.ledger.get() else {
        let why = s.ledger.reason.as_deref().unwrap_or("not computed");
        return vec![Line::raw(format!("{NA}: {why}"))];
    };
    let line = |label: &'static str, c: Color, text: String| {
        Line::from(vec![Span::styled(label, v.fg(c)), Span::raw(text)])
    };
    let cores = text_ledger::cpu_line(l).map_or_else(
        || format!("{NA} (no CPU total or allocation)"),
        |c| format!("{c} (the cgroup's CPU time)"),
    );
    let mut out = vec![line("cores   ", CPU_COLOR, cores)];
    out.push(match (&l.stalls_unavailable, stall_shares(l, v)) {
        (None, Some(shares)) => line("stalled ", MEM_COLOR, shares),
        (Some(why), _) => line("stalls  ", MEM_COLOR, why.clone()),
        (None, None) => line("stalls  ", MEM_COLOR, format!("{NA} (no wall time yet)")),
    });
    match (l.gpu_seconds, l.gpu_no_work_seconds) {
        (Some(total), no_work) => {
            let idle = no_work.map_or(NA.to_string(), units::duration);
            out.push(line(
                "GPUs    ",
                GPU_COLOR,
                format!(
                    "{} card time, {idle} of it with no work resident (NVML)",
                    units::duration(total)
                ),
            ));
            let held: Vec<String> = text_ledger::LIMITER_WORDS
                .iter()
                .filter_map(|(k, _)| Some((k, *l.gpu_held_seconds.get(*k)?)))
                .filter(|(_, secs)| *secs > 0.0)
                .map(|(k, secs)| format!("{} {}", k.replace('_', " "), units::duration(secs)))
                .collect();
            if !held.is_empty() {
                out.push(line("held by ", GPU_COLOR, held.join(v.sep())));
            }
            out.extend(
                gpm_lines(l, v)
                    .into_iter()
                    .map(|t| line("GPM     ", GPU_COLOR, t)),
            );
        }
        (None, _) if !s.gpus.is_empty() => out.push(line(
            "GPUs    ",
            GPU_COLOR,
            format!("{NA} (the cards' counters were not recorded)"),
        )),
        (None, _) => {}
    }
    out.extend(phase_lines(s, v));
    out.extend(throughput_lines(s, v));
    out
}

/// The job's own rate from its log's progress lines, in the report's words
/// (`report::text_throughput`): its tool, the last interval's rate, the usual (median) one,
/// and the last slowdown with what held the cards; nothing without progress lines.
fn throughput_lines<'a>(s: &Snapshot, v: &View) -> Vec<Line<'a>> {
    use slurmwatch_core::analysis::throughput::usual_rate;
    let Some(t) = &s.throughput else {
        return Vec::new();
    };
    let rate = |r: Option<f64>| r.map_or(NA.to_string(), |r| text_throughput::rate(r, t));
    let mut out = vec![Line::from(vec![
        Span::styled("rate    ", v.fg(CPU_COLOR)),
        Span::raw(format!(
            "{}{sep}latest {}{sep}usually {} (from its {})",
            text_throughput::tool_name(t.tool),
            rate(t.points.last().map(|p| p.per_second)),
            rate(usual_rate(&t.points)),
            t.stream,
            sep = v.sep()
        )),
    ])];
    if let Some(d) = t.slowdowns.last() {
        out.push(Line::from(vec![
            Span::styled("slowed  ", v.fg(CPU_COLOR)),
            Span::raw(text_throughput::slowdown_words(t, d)),
        ]));
    }
    out
}

/// Each card's GPM means so far (Hopper and newer: how much of the card the work used, which
/// "busy" does not say); nothing for cards without them.
fn gpm_lines(l: &Ledger, v: &View) -> Vec<String> {
    let pct = |p: Option<f64>| p.map_or(NA.to_string(), |p| format!("{p:.0}%"));
    l.gpus
        .iter()
        .filter_map(|c| {
            let g = c.time.gpm.as_ref()?;
            Some(format!(
                "{}: SM active {}{sep}occupancy {}{sep}tensor {}{sep}DRAM {}",
                c.label,
                pct(g.sm_active_percent),
                pct(g.sm_occupancy_percent),
                pct(g.tensor_active_percent),
                pct(g.dram_bw_util_percent),
                sep = v.sep()
            ))
        })
        .collect()
}

/// The job's last few marked phases (`slurmwatch mark`): each one's time, CPU and peak
/// memory; the newest runs on to the newest row.
fn phase_lines<'a>(s: &Snapshot, v: &View) -> Vec<Line<'a>> {
    const SHOWN: usize = 3;
    let from = s.phases.len().saturating_sub(SHOWN);
    s.phases[from..]
        .iter()
        .map(|p| {
            let cpu = p
                .cpu_seconds
                .map_or(NA.to_string(), |c| format!("{c:.1} CPU-s"));
            let peak = p
                .peak_working_set_bytes
                .map_or(NA.to_string(), units::bytes);
            let label: String = terminal::field(&p.label).chars().take(24).collect();
            Line::from(vec![
                Span::styled("phase   ", v.fg(CPU_COLOR)),
                Span::raw(format!(
                    "{label}{sep}{}{sep}{cpu}{sep}peak {peak}",
                    units::duration(p.seconds),
                    sep = v.sep()
                )),
            ])
        })
        .collect()
}

/// `cpu 0.1% · memory 12.0% · io 1.0% of the time (PSI)`: each resource's share of the wall
/// time in which some task waited; `None` when no share is known.
fn stall_shares(l: &Ledger, v: &View) -> Option<String> {
    let share = l.stall_share_of_wall.to_array();
    let parts: Vec<String> = STALLS
        .iter()
        .zip(share)
        .filter(|((_, kind), _)| *kind == "some")
        .filter_map(|((resource, _), p)| Some(format!("{resource} {}", text_ledger::percent(p?))))
        .collect();
    (!parts.is_empty()).then(|| format!("{} of the time (PSI)", parts.join(v.sep())))
}

fn gpu_block(frame: &mut Frame, area: Rect, g: &GpuSnapshot, v: &View) {
    let label = match (g.cuda_index, g.nvml_index) {
        (Some(c), Some(n)) => format!("GPU cuda:{c} (nvml {n})"),
        (Some(c), None) => format!("GPU cuda:{c}"),
        (None, Some(n)) => format!("GPU nvml {n}"),
        (None, None) => "GPU".into(),
    };
    let label = match &g.node {
        Some(node) => format!("{label} on {node}"),
        None => label,
    };
    let title = match &g.name {
        Some(n) => format!("{label} {n}"),
        None => label,
    };
    let state = match g.state {
        Some(GpuState::Active) => Span::styled("active", v.fg(ACTIVE).add_modifier(Modifier::BOLD)),
        Some(GpuState::Idle) => Span::styled("idle  ", v.fg(AMBER).add_modifier(Modifier::BOLD)),
        Some(GpuState::IdleHoldingMemory) => Span::styled(
            "idle, holding memory",
            v.fg(AMBER).add_modifier(Modifier::BOLD),
        ),
        Some(GpuState::SharedNotOurs) => Span::styled(
            "shared (not ours)",
            v.fg(AMBER).add_modifier(Modifier::BOLD),
        ),
        None => Span::raw("n/a   "),
    };
    let used = or_na(&g.utilization_percent, |u| format!("{u:.0} %"));
    let throttle = match g.throttle_reasons.get() {
        Some(r) if r.is_empty() => "none".to_string(),
        Some(r) => r.join(", "),
        None => NA.to_string(),
    };
    let line1 = Line::from(vec![
        state,
        Span::raw("  "),
        Span::styled("util ", v.fg(GPU_COLOR)),
        Span::raw(format!("{used:>5}  ")),
        Span::styled(
            sparkline(&g.utilization_history, 100.0, 30, v.ascii),
            v.fg(GPU_COLOR),
        ),
        Span::raw(format!("  throttle {throttle}")),
    ]);
    // A critical Xid is a fault, whoever caused it: said in red beside the throttle state.
    let mut line1 = line1;
    if let Some(last) = g.xid_events.last() {
        let more = g.xid_events.len() - 1;
        line1.spans.push(Span::styled(
            format!(
                "  Xid {}{}",
                last.xid,
                if more > 0 {
                    format!(" (+{more})")
                } else {
                    String::new()
                }
            ),
            v.fg(RED).add_modifier(Modifier::BOLD),
        ));
    }
    let deg = if v.ascii { "C" } else { "°C" };
    let line2 = Line::from(vec![
        Span::styled("VRAM ", v.fg(VRAM_COLOR)),
        Span::raw(format!(
            "{} of {}{}power {} of {}{}temp {}{}SM {} of {} MHz",
            or_na(&g.memory_used_bytes, |b| units::bytes(*b)),
            or_na(&g.memory_total_bytes, |b| units::bytes(*b)),
            v.sep(),
            or_na(&g.power_watts, |w| format!("{w:.0} W")),
            or_na(&g.power_limit_watts, |w| format!("{w:.0} W")),
            v.sep(),
            or_na(&g.temperature_celsius, |t| format!("{t:.0} {deg}")),
            v.sep(),
            or_na(&g.sm_clock_mhz, |c| c.to_string()),
            or_na(&g.sm_clock_max_mhz, |c| c.to_string()),
        )),
    ]);
    let p = Paragraph::new(vec![line1, line2]).block(v.block(&title, GPU_COLOR));
    frame.render_widget(p, area);
}

#[cfg(test)]
mod tests {
    //! Snapshot tests: fixture snapshots drawn on a `TestBackend`, checked on the buffer's
    //! text and on cell colours.
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::buffer::Buffer;
    use ratatui::Terminal;

    fn fixture(name: &str) -> Snapshot {
        let path = format!(
            "{}/../core/tests/fixtures/snapshots/{name}.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn view() -> View {
        View {
            ascii: false,
            color: true,
            now_unix_ms: 1_700_000_103_000,
            today: Some("2023-11-14".into()),
            showing: None,
        }
    }

    fn render(s: &Snapshot, v: &View, w: u16, h: u16) -> Buffer {
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| draw(f, s, v)).unwrap();
        t.backend().buffer().clone()
    }

    fn lines(b: &Buffer) -> Vec<String> {
        let a = b.area;
        (0..a.height)
            .map(|y| (0..a.width).map(|x| b[(x, y)].symbol()).collect())
            .collect()
    }

    fn text(b: &Buffer) -> String {
        lines(b).join("\n")
    }

    /// The cell where `needle` starts (first occurrence), as (x, y).
    fn find(b: &Buffer, needle: &str) -> (u16, u16) {
        for (y, l) in lines(b).iter().enumerate() {
            let chars: Vec<char> = l.chars().collect();
            let n: Vec<char> = needle.chars().collect();
            if let Some(x) = chars.windows(n.len()).position(|w| w == n.as_slice()) {
                return (x as u16, y as u16);
            }
        }
        panic!("{needle:?} not on screen:\n{}", text(b));
    }

    fn fg_at(b: &Buffer, needle: &str) -> Color {
        b[find(b, needle)].fg
    }

    fn health_colours(b: &Buffer) -> Vec<Color> {
        b.content()
            .iter()
            .map(|c| c.fg)
            .filter(|c| matches!(c, &AMBER | &RED | &ACTIVE))
            .collect()
    }

    #[test]
    fn multi_node_footer_says_what_is_shown_and_who_reports() {
        let one = fixture("cpu_only");
        let per_node = vec![
            ("cn01".to_string(), Ok(one.clone())),
            (
                "cn02".to_string(),
                Err("no file for cn02 reachable from this machine".into()),
            ),
        ];
        let s = slurmwatch_core::snapshot_merge::merge(&per_node).unwrap();
        let v = View {
            showing: Some("all 2 nodes".into()),
            ..view()
        };
        let t = text(&render(&s, &v, 120, 24));
        assert!(
            t.contains("n next node (all 2 nodes; 1 of 2 reporting)"),
            "{t}"
        );
        assert!(t.contains("on cn[01-02]"), "{t}");
    }

    #[test]
    fn cpu_only_job_at_80x24() {
        let b = render(&fixture("cpu_only"), &view(), 80, 24);
        let t = text(&b);
        for want in [
            "job 4242 (train-small) · alice on cn01 · recorded by the plugin",
            "cores in use 1.50 of 4 allocated · peak 3.92 · total 1234.5 CPU-s",
            "working set 2.25 GiB of 8.00 GiB limit (28 %) ok · peak working set 3.50 GiB",
            "page cache 512 MiB · kernel peak 6.10 GiB (incl. cache)",
            "elapsed 1:02:05 of 4:00:00 · ends by 23:08:20 (26 % used)",
            "reading 3 s ago · every 5 s · cgroup_v1",
        ] {
            assert!(t.contains(want), "missing {want:?}:\n{t}");
        }
        // Identity colours on the titles; nothing graded when all is well.
        assert_eq!(fg_at(&b, "CPU"), CPU_COLOR);
        assert_eq!(fg_at(&b, "MEM"), MEM_COLOR);
        assert!(
            health_colours(&b).is_empty(),
            "health colour on a healthy job"
        );
        assert!(!t.contains("GPU"));
    }

    /// The whole dashboard, cell by cell, at the sizes users run it: any change to what it
    /// shows fails here until the snapshot is reviewed (`cargo insta review`).
    #[test]
    fn dashboard_snapshots() {
        for (name, w, h) in [
            ("cpu_only", 80, 24),
            ("memory_91", 80, 24),
            ("four_gpus", 120, 40),
            ("ended", 100, 30),
        ] {
            let b = render(&fixture(name), &view(), w, h);
            insta::assert_snapshot!(format!("dashboard_{name}_{w}x{h}"), text(&b));
        }
    }

    #[test]
    fn a_missed_sample_is_a_gap_not_a_zero() {
        let s = fixture("cpu_only");
        // Slot 110 of 120 is missing (None) and slot 100 is a real 0.0.
        let line = sparkline(&s.history.effective_cores, 4.0, 30, false);
        let chars: Vec<char> = line.chars().collect();
        assert_eq!(chars[30 - 10], ' ', "{line:?}");
        assert_eq!(chars[30 - 20], '▁', "{line:?}");
        assert!(chars.iter().filter(|&&c| c == ' ').count() == 1, "{line:?}");
        let b = render(&s, &view(), 80, 24);
        let (_, y) = find(&b, "cores in use");
        // On the dashboard too: the drawn sparkline (newest slot rightmost) has exactly one
        // blank inside it, at slot 110 of 120 (nine before the newest), and slot 100's zero
        // draws the lowest bar.
        let row: Vec<char> = lines(&b)[y as usize + 1].chars().collect();
        let is_bar = |c: &char| spark::BARS.contains(c);
        let first = row.iter().position(is_bar).expect("a sparkline on the row");
        let last = row.iter().rposition(is_bar).unwrap();
        let inside = &row[first..=last];
        let shown: String = inside.iter().collect();
        assert_eq!(inside.iter().filter(|&&c| c == ' ').count(), 1, "{shown:?}");
        assert_eq!(row[last - 9], ' ', "{shown:?}");
        assert_eq!(row[last - 19], '▁', "{shown:?}");
    }

    #[test]
    fn memory_guard_amber_at_86_percent() {
        let b = render(&fixture("memory_86"), &view(), 80, 24);
        let t = text(&b);
        assert!(t.contains("(86 %) AMBER (≥85 %)"), "{t}");
        assert_eq!(fg_at(&b, "AMBER"), AMBER);
        assert!(!health_colours(&b).contains(&RED));
    }

    #[test]
    fn memory_guard_red_at_91_percent() {
        let b = render(&fixture("memory_91"), &view(), 80, 24);
        let t = text(&b);
        assert!(t.contains("(91 %) RED (≥90 %)"), "{t}");
        assert_eq!(fg_at(&b, "RED"), RED);
        assert!(!health_colours(&b).contains(&AMBER));
    }

    #[test]
    fn four_gpu_job_at_120x40() {
        let b = render(&fixture("four_gpus"), &view(), 120, 40);
        let t = text(&b);
        for want in [
            "GPU cuda:0 (nvml 2) NVIDIA A100-SXM4-40GB",
            "GPU cuda:1 (nvml 3)",
            "GPU cuda:2 (nvml 0)",
            "GPU cuda:3 (nvml 1)",
            "VRAM 30.0 GiB of 40.0 GiB · power 250 W of 400 W · temp 64 °C · SM 1410 of 1410 MHz",
            "throttle none",
        ] {
            assert!(t.contains(want), "missing {want:?}:\n{t}");
        }
        assert_eq!(fg_at(&b, "GPU cuda:0"), GPU_COLOR);
        assert_eq!(fg_at(&b, "VRAM"), VRAM_COLOR);
        assert_eq!(fg_at(&b, "active"), ACTIVE);
        assert_eq!(fg_at(&b, "idle    util"), AMBER);
        assert!(t.contains("idle    util   2 %"), "{t}");
    }

    #[test]
    fn an_xid_is_said_in_red_on_the_card() {
        let mut s = fixture("four_gpus");
        s.gpus[1].xid_events = vec![
            slurmwatch_core::analysis::summary::XidEvent::new(1_700_000_100_000, 43),
            slurmwatch_core::analysis::summary::XidEvent::new(1_700_000_101_000, 79),
        ];
        let b = render(&s, &view(), 140, 40);
        let t = text(&b);
        assert!(t.contains("Xid 79 (+1)"), "{t}");
        assert_eq!(fg_at(&b, "Xid 79"), RED);
    }

    #[test]
    fn a_throttled_card_names_its_reasons() {
        let b = render(&fixture("four_gpus"), &view(), 120, 40);
        let t = text(&b);
        assert!(
            t.contains("throttle sw_power_cap, hw_slowdown") && t.contains("SM 1005 of 1410 MHz"),
            "{t}"
        );
        // A fact, not a grade: the reasons carry no health colour.
        assert!(!matches!(fg_at(&b, "sw_power_cap"), AMBER | RED | ACTIVE));
    }

    #[test]
    fn unreadable_power_is_na_never_zero() {
        let b = render(&fixture("four_gpus"), &view(), 120, 40);
        let t = text(&b);
        assert!(t.contains("power n/a of 400 W"), "{t}");
        assert!(!t.contains(" 0 W"), "{t}");
    }

    #[test]
    fn ascii_and_no_color() {
        let v = View {
            ascii: true,
            color: false,
            ..view()
        };
        let b = render(&fixture("four_gpus"), &v, 120, 40);
        let t = text(&b);
        assert!(t.is_ascii(), "non-ASCII on an --ascii screen:\n{t}");
        assert!(t.contains("+ CPU -"), "{t}");
        assert!(t.contains("temp 64 C"), "{t}");
        assert!(
            b.content().iter().all(|c| c.fg == Color::Reset),
            "colour under NO_COLOR"
        );
    }

    #[test]
    fn ended_job_has_a_banner() {
        let b = render(&fixture("ended"), &view(), 80, 24);
        let t = text(&b);
        assert!(t.contains("JOB ENDED: these are its final figures."), "{t}");
        assert!(!text(&render(&fixture("cpu_only"), &view(), 80, 24)).contains("ENDED"));
    }

    /// A Hopper card's GPM means are shown under the ledger; the A100's "not available" adds
    /// no line (the fixture's cards, unchanged).
    #[test]
    fn gpm_means_are_shown_for_the_cards_that_have_them() {
        let mut s = fixture("four_gpus");
        let before = text(&render(&s, &view(), 120, 40));
        assert!(!before.contains("GPM"), "{before}");
        let mut l = s.ledger.get().cloned().expect("the fixture's ledger");
        l.gpus[0].time.gpm = Some(slurmwatch_core::sample::Gpm {
            sm_active_percent: Some(62.4),
            sm_occupancy_percent: Some(40.0),
            tensor_active_percent: Some(12.0),
            dram_bw_util_percent: None,
        });
        let label = l.gpus[0].label.clone();
        s.ledger = Reading::ok(l);
        let t = text(&render(&s, &view(), 120, 44));
        assert!(
            t.contains(&format!(
                "GPM     {label}: SM active 62% · occupancy 40% · tensor 12% · DRAM n/a"
            )),
            "{t}"
        );
    }

    #[test]
    fn the_last_marked_phases_are_shown_under_the_ledger() {
        use slurmwatch_core::analysis::phases::Phase;
        let mut s = fixture("memory_91");
        let phase = |label: &str, cpu: f64| Phase {
            label: label.into(),
            started_unix_ms: 0,
            ended_unix_ms: 90_000,
            seconds: 90.0,
            cpu_seconds: Some(cpu),
            gpu_seconds: None,
            gpu_energy_joules: None,
            peak_working_set_bytes: Some(3 << 30),
            exact: true,
            gpu_busy_percent: None,
            rate_per_second: None,
        };
        s.phases = ["load", "epoch 1", "epoch 2", "epoch 3"]
            .iter()
            .zip([1.0, 2.0, 4.0, 8.0])
            .map(|(l, c)| phase(l, c))
            .collect();
        let t = text(&render(&s, &view(), 100, 30));
        assert!(
            t.contains("phase   epoch 3 · 1 min 30 s · 8.0 CPU-s · peak 3.00 GiB"),
            "{t}"
        );
        assert!(
            t.contains("epoch 1") && !t.contains("load"),
            "the last three only: {t}"
        );
    }

    /// The job's own rate under the ledger, in the report's words: the last interval's and
    /// the median so far, and the last slowdown with the card's hold; nothing without one.
    #[test]
    fn the_throughput_is_shown_under_the_ledger_with_its_last_slowdown() {
        use slurmwatch_core::analysis::progress::Tool;
        use slurmwatch_core::analysis::throughput::{
            CardHold, RatePoint, Slowdown, SlowdownSeen, Throughput,
        };
        let mut s = fixture("memory_91");
        let t0 = 1_780_000_000_000i64;
        let point = |i: i64, per_second: f64| RatePoint {
            from_unix_ms: t0 + i * 1000,
            to_unix_ms: t0 + (i + 1) * 1000,
            per_second,
        };
        let mut t = Throughput {
            stream: "stderr".into(),
            tool: Tool::Tqdm,
            unit: "it/s".into(),
            points: vec![point(0, 10.0), point(1, 10.0), point(2, 2.0), point(3, 9.5)],
            slowdowns: Vec::new(),
            placed_within_seconds: 0.75,
        };
        s.throughput = Some(t.clone());
        let text_of = |s: &Snapshot| text(&render(s, &view(), 140, 40));
        let shown = text_of(&s);
        assert!(
            shown.contains("rate    tqdm · latest 9.50 it/s · usually 9.75 it/s (from its stderr)"),
            "{shown}"
        );
        assert!(!shown.contains("slowed"), "{shown}");
        t.slowdowns.push(SlowdownSeen {
            slowdown: Slowdown {
                from_unix_ms: t0 + 2000,
                to_unix_ms: t0 + 22_000,
                usual_per_second: 9.75,
                during_per_second: 2.0,
                seconds_lost: 15.9,
            },
            held: vec![CardHold {
                card: "cuda:0".into(),
                limiter: "thermal".into(),
                seconds: 18.0,
            }],
        });
        s.throughput = Some(t);
        let shown = text_of(&s);
        let words = text_throughput::slowdown_words(
            s.throughput.as_ref().unwrap(),
            &s.throughput.as_ref().unwrap().slowdowns[0],
        );
        assert!(
            words.starts_with("throughput fell from 9.75 to 2.00 it/s at "),
            "{words}"
        );
        assert!(
            words.contains("for 20 s while cuda:0 was held by heat (18.0 s)"),
            "{words}"
        );
        assert!(shown.contains(&format!("slowed  {words}")), "{shown}");
        s.throughput = None;
        assert!(!text_of(&s).contains("rate    "));
    }

    #[test]
    fn the_ledger_is_said_so_far_and_unknown_is_said_with_why() {
        let t = text(&render(&fixture("memory_91"), &view(), 80, 24));
        assert!(t.contains("WHERE IT WENT · so far, to 3 s ago"), "{t}");
        assert!(t.contains("memory 12.0%"), "{t}");
        let t = text(&render(&fixture("four_gpus"), &view(), 120, 40));
        assert!(
            t.contains("held by power 40 min 35 s · thermal 5 min 10 s"),
            "{t}"
        );
        let mut s = fixture("cpu_only");
        s.ledger = Reading::missing("direct readings began when this view started");
        let t = text(&render(&s, &view(), 80, 24));
        assert!(
            t.contains("n/a: direct readings began when this view started"),
            "{t}"
        );
        assert!(!t.contains("core-hours"), "{t}");
    }

    #[test]
    fn a_tiny_terminal_does_not_panic() {
        for (w, h) in [(1, 1), (10, 3), (40, 10)] {
            render(&fixture("four_gpus"), &view(), w, h);
        }
    }
}
