//! Pictures of a report: an SVG (memory: working set, cache, limit; cores in use vs
//! allocated; step boundaries; the job's marked phases and, when its log gave one, its
//! throughput in a third panel) and a self-contained HTML page around it (no network, no
//! script). Series carry stable ids (`series-working-set`, `series-cache`, `series-limit`,
//! `series-cores`, `series-allocated`, `step-<name>`, `phase-<n>`, `series-throughput`,
//! `slowdown-<n>`; panels `panel-memory`, `panel-cores`, `panel-throughput`) so tests and
//! users can find them.

mod progress;

use std::borrow::Cow;

use super::throughput::Throughput;
use super::{Point, Report};
use crate::analysis::throughput::RatePoint;
use crate::units;

const W: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const MEM_TOP: f64 = 40.0;
const MEM_H: f64 = 220.0;
const CPU_TOP: f64 = 320.0;
const CPU_H: f64 = 150.0;
const H: f64 = 510.0;
/// The throughput panel, under the cores panel when the report has a throughput; the
/// picture grows by it (and keeps its height without one).
const RATE_TOP: f64 = 530.0;
const RATE_H: f64 = 150.0;
const H_WITH_RATE: f64 = 720.0;
/// Identity colours (principle 2: colour names a resource, not a grade).
const MEM_COLOUR: &str = "#8e44ad";
const CACHE_COLOUR: &str = "#c39bd3";
const CPU_COLOUR: &str = "#2e86c1";
const LIMIT_COLOUR: &str = "#555555";

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The SVG's opening: its size, title and white ground.
fn head(r: &Report, h: f64) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {h}\" width=\"{W}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"12\">\n<title>slurmwatch report: job {}</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        esc(&r.job_id)
    )
}

/// The report's charts as one SVG document.
pub fn svg(r: &Report) -> String {
    // A multi-node job: one line per node on a common time axis; the axes fit every node.
    let multi = r.node_points.len() > 1;
    let pts = chart_points(r, multi);
    if pts.is_empty() {
        return head(r, H)
            + &format!(
                "<text x=\"20\" y=\"40\">{}</text>\n</svg>\n",
                esc("No time series was recorded for this job (enable it with #SBATCH --slurmwatch).")
            );
    }
    let alloc = cores_allocated_line(r, multi);
    let rate = r.throughput.as_ref();
    let axes = Axes::fit(&pts, alloc, rate.map(|t| t.points.as_slice()));
    let mut o = head(r, axes.height());
    o += &frames(&axes, rate);
    o += &tick_labels(&axes);
    if let Some(t) = rate {
        o += &progress::throughput_panel(t, &axes);
    }
    o += &step_marks(r, &axes);
    o += &progress::phase_marks(&r.phases, &axes);
    if multi {
        o += &node_lines(r, &axes);
    }
    o += &job_lines(&pts, &axes, multi, alloc);
    o += &oom_marks(r, &axes);
    o += "</svg>\n";
    o
}

/// The points the axes fit: the job's, or every node's merged in time order.
fn chart_points(r: &Report, multi: bool) -> Cow<'_, [Point]> {
    if !multi {
        return Cow::Borrowed(&r.points);
    }
    let mut v: Vec<Point> = r.node_points.iter().flat_map(|(_, p)| p.clone()).collect();
    v.sort_by_key(|p| p.t_unix_ms);
    Cow::Owned(v)
}

/// The dashed "allocated" line's level: per node in a multi-node job (each node's line is
/// against its own allocation), else the job's.
fn cores_allocated_line(r: &Report, multi: bool) -> Option<f64> {
    if multi {
        r.nodes
            .iter()
            .filter_map(|n| n.cores_allocated)
            .reduce(f64::max)
    } else {
        r.cpu.cores_allocated
    }
}

/// The panels, stacked: memory above, cores below, the throughput (when there is one)
/// at the bottom.
#[derive(Clone, Copy)]
enum Panel {
    Memory,
    Cores,
    Throughput,
}

impl Panel {
    fn top(self) -> f64 {
        match self {
            Panel::Memory => MEM_TOP,
            Panel::Cores => CPU_TOP,
            Panel::Throughput => RATE_TOP,
        }
    }

    fn height(self) -> f64 {
        match self {
            Panel::Memory => MEM_H,
            Panel::Cores => CPU_H,
            Panel::Throughput => RATE_H,
        }
    }
}

/// The scales every mark shares: time from the first point over `span_ms`; each panel's
/// top value (a little above the largest reading, so a peak never touches the frame);
/// `rate_max` only when there is a throughput panel.
struct Axes {
    t0_unix_ms: i64,
    span_ms: f64,
    mem_max_bytes: f64,
    cpu_max_cores: f64,
    rate_max: Option<f64>,
}

impl Axes {
    /// Fits `pts` (not empty), the allocation line and the throughput's rates: the time axis
    /// covers every rate's stretch too, so each is drawn at its own time, never clamped.
    fn fit(pts: &[Point], alloc: Option<f64>, rates: Option<&[RatePoint]>) -> Axes {
        let rate_max = rates.map(|r| {
            let top = r
                .iter()
                .map(|p| p.per_second)
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max);
            if top > 0.0 {
                top * 1.1
            } else {
                1.0
            }
        });
        let rates = rates.unwrap_or_default();
        let t0 = rates
            .iter()
            .map(|r| r.from_unix_ms)
            .fold(pts[0].t_unix_ms, i64::min);
        let t1 = rates
            .iter()
            .map(|r| r.to_unix_ms)
            .fold(pts[pts.len() - 1].t_unix_ms, i64::max);
        let mem_max = pts
            .iter()
            .flat_map(|p| [p.working_set_bytes, p.limit_bytes, cache_top(p)])
            .flatten()
            .map(|v| v as f64)
            .fold(1.0, f64::max)
            * 1.05;
        let cpu_max = pts
            .iter()
            .filter_map(|p| p.cores)
            .chain(alloc)
            .fold(1.0, f64::max)
            * 1.1;
        Axes {
            t0_unix_ms: t0,
            span_ms: (t1 - t0).max(1) as f64,
            mem_max_bytes: mem_max,
            cpu_max_cores: cpu_max,
            rate_max,
        }
    }

    fn ymax(&self, panel: Panel) -> f64 {
        match panel {
            Panel::Memory => self.mem_max_bytes,
            Panel::Cores => self.cpu_max_cores,
            Panel::Throughput => self.rate_max.unwrap_or(1.0),
        }
    }

    /// The panels drawn, top to bottom.
    fn panels(&self) -> &'static [Panel] {
        match self.rate_max {
            Some(_) => &[Panel::Memory, Panel::Cores, Panel::Throughput],
            None => &[Panel::Memory, Panel::Cores],
        }
    }

    /// The lowest panel's bottom edge: the time axis is labelled under it, and marks that
    /// cross every panel end there.
    fn bottom(&self) -> f64 {
        let last = self.panels()[self.panels().len() - 1];
        last.top() + last.height()
    }

    fn height(&self) -> f64 {
        if self.rate_max.is_some() {
            H_WITH_RATE
        } else {
            H
        }
    }

    /// A value's y in `panel` (held a little above the top, never below the bottom).
    fn y(&self, panel: Panel, v: f64) -> f64 {
        let (top, h) = (panel.top(), panel.height());
        top + h - (v / self.ymax(panel)).clamp(0.0, 1.05) * h
    }

    /// A point's x (never clamped: every point lies inside the span).
    fn x(&self, t_unix_ms: i64) -> f64 {
        LEFT + (t_unix_ms - self.t0_unix_ms) as f64 / self.span_ms * (W - LEFT - RIGHT)
    }

    /// A mark's x, held inside the frame (a step may start before the first reading).
    fn x_clamped(&self, t_unix_ms: i64) -> f64 {
        LEFT + ((t_unix_ms - self.t0_unix_ms) as f64 / self.span_ms).clamp(0.0, 1.0)
            * (W - LEFT - RIGHT)
    }
}

/// Working set + page cache: the light line's level.
fn cache_top(p: &Point) -> Option<u64> {
    p.cache_bytes.zip(p.working_set_bytes).map(|(c, w)| c + w)
}

/// One series as polylines in `panel`; an unreadable point breaks the line (never drawn as 0).
fn polyline(
    id: &str,
    pts: &[Point],
    axes: &Axes,
    panel: Panel,
    get: impl Fn(&Point) -> Option<f64>,
    style: &str,
) -> String {
    let at = pts.iter().map(|p| get(p).map(|v| (p.t_unix_ms, v)));
    polyline_at(id, at, axes, panel, style)
}

/// Values at times as polylines in `panel`: `None` (or a value that is not finite) is a
/// gap that breaks the line.
fn polyline_at(
    id: &str,
    at: impl Iterator<Item = Option<(i64, f64)>>,
    axes: &Axes,
    panel: Panel,
    style: &str,
) -> String {
    let mut segs: Vec<String> = Vec::new();
    let mut cur = String::new();
    for p in at {
        match p {
            Some((t, v)) if v.is_finite() => {
                let (x, y) = (axes.x(t), axes.y(panel, v));
                cur += &format!("{x:.1},{y:.1} ");
            }
            _ => {
                if !cur.is_empty() {
                    segs.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if !cur.is_empty() {
        segs.push(cur);
    }
    let lines: String = segs
        .iter()
        .map(|s| {
            format!(
                "<polyline fill=\"none\" {style} points=\"{}\"/>",
                s.trim_end()
            )
        })
        .collect();
    format!("<g id=\"{id}\">{lines}</g>")
}

/// Each panel's title and frame (`panel-<name>`).
fn frames(axes: &Axes, rate: Option<&Throughput>) -> String {
    let mut o = String::new();
    for &panel in axes.panels() {
        let (name, title) = match panel {
            Panel::Memory => (
                "memory",
                "Memory: working set (solid), working set + page cache (light), limit (dashed)"
                    .to_string(),
            ),
            Panel::Cores => (
                "cores",
                "Cores in use (solid) vs allocated (dashed)".to_string(),
            ),
            Panel::Throughput => ("throughput", progress::title(rate)),
        };
        let (top, h) = (panel.top(), panel.height());
        o += &format!(
            "<text x=\"{LEFT}\" y=\"{:.0}\" font-weight=\"bold\">{}</text>\n<rect id=\"panel-{name}\" x=\"{LEFT}\" y=\"{top}\" width=\"{}\" height=\"{h}\" fill=\"none\" stroke=\"#bbb\"/>\n",
            top - 8.0,
            esc(&title),
            W - LEFT - RIGHT
        );
    }
    o
}

/// Five ticks on each axis (time under the cores panel, bytes and cores at the left), and
/// the time axis's title.
fn tick_labels(axes: &Axes) -> String {
    let mut o = String::new();
    for i in 0..=4 {
        let f = i as f64 / 4.0;
        let x = LEFT + f * (W - LEFT - RIGHT);
        let label = units::offset((f * axes.span_ms) as i64);
        o += &format!(
            "<text x=\"{x:.1}\" y=\"{:.0}\" text-anchor=\"middle\" fill=\"#444\">{label}</text>\n",
            axes.bottom() + 16.0
        );
        let ym = MEM_TOP + MEM_H - f * MEM_H;
        o += &format!(
            "<text x=\"{:.0}\" y=\"{ym:.1}\" text-anchor=\"end\" fill=\"#444\">{}</text>\n",
            LEFT - 4.0,
            esc(&units::bytes((f * axes.mem_max_bytes) as u64))
        );
        let yc = CPU_TOP + CPU_H - f * CPU_H;
        o += &format!(
            "<text x=\"{:.0}\" y=\"{yc:.1}\" text-anchor=\"end\" fill=\"#444\">{:.1}</text>\n",
            LEFT - 4.0,
            f * axes.cpu_max_cores
        );
        if let Some(max) = axes.rate_max {
            o += &progress::rate_tick(f, max);
        }
    }
    o += &format!(
        "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\" fill=\"#444\">time into the job (hh:mm:ss)</text>\n",
        W - RIGHT,
        axes.height() - 6.0
    );
    o
}

/// A dotted line across every panel at each step's start and end (`step-<name>`).
fn step_marks(r: &Report, axes: &Axes) -> String {
    let mut o = String::new();
    for (name, a, b) in &r.step_marks {
        let mut g = format!("<g id=\"step-{}\">", esc(name));
        for (t, label) in [(a, format!("{name} start")), (b, format!("{name} end"))] {
            if let Some(t) = t {
                let x = axes.x_clamped(*t);
                g += &format!(
                    "<line x1=\"{x:.1}\" y1=\"{MEM_TOP}\" x2=\"{x:.1}\" y2=\"{:.0}\" stroke=\"#999\" stroke-dasharray=\"2,3\"><title>{}</title></line>",
                    axes.bottom(),
                    esc(&label)
                );
            }
        }
        g += "</g>\n";
        o += &g;
    }
    o
}

/// The job's own series: working set, cache, cores (single node only: a multi-node job
/// has one line per node instead), the limit and the allocation.
fn job_lines(pts: &[Point], axes: &Axes, multi: bool, alloc: Option<f64>) -> String {
    let mut o = String::new();
    let mut line = |id: &str, panel: Panel, get: &dyn Fn(&Point) -> Option<f64>, style: String| {
        o += &polyline(id, pts, axes, panel, get, &style);
        o += "\n";
    };
    if !multi {
        line(
            "series-cache",
            Panel::Memory,
            &|p| cache_top(p).map(|v| v as f64),
            format!("stroke=\"{CACHE_COLOUR}\" stroke-width=\"1.5\""),
        );
        line(
            "series-working-set",
            Panel::Memory,
            &|p| p.working_set_bytes.map(|v| v as f64),
            format!("stroke=\"{MEM_COLOUR}\" stroke-width=\"2\""),
        );
    }
    line(
        "series-limit",
        Panel::Memory,
        &|p| p.limit_bytes.map(|v| v as f64),
        format!("stroke=\"{LIMIT_COLOUR}\" stroke-dasharray=\"6,4\""),
    );
    if !multi {
        line(
            "series-cores",
            Panel::Cores,
            &|p| p.cores,
            format!("stroke=\"{CPU_COLOUR}\" stroke-width=\"2\""),
        );
    }
    if alloc.is_some() {
        line(
            "series-allocated",
            Panel::Cores,
            &|_| alloc,
            format!("stroke=\"{LIMIT_COLOUR}\" stroke-dasharray=\"6,4\""),
        );
    }
    o
}

/// A red line and label in the memory panel at each OOM kill (`oom-kill`).
fn oom_marks(r: &Report, axes: &Axes) -> String {
    let mut o = String::new();
    for e in &r.memory.oom_events {
        let x = axes.x_clamped(e.t_unix_ms);
        o += &format!(
            "<g id=\"oom-kill\"><line x1=\"{x:.1}\" y1=\"{MEM_TOP}\" x2=\"{x:.1}\" y2=\"{:.0}\" stroke=\"#c0392b\" stroke-width=\"2\"/><text x=\"{:.1}\" y=\"{:.0}\" fill=\"#c0392b\">OOM kill</text></g>\n",
            MEM_TOP + MEM_H,
            x + 3.0,
            MEM_TOP + 14.0
        );
    }
    o
}

/// Line styles told apart without colour alone (dash patterns), in node order.
const NODE_DASHES: [(&str, &str); 4] = [
    ("", "solid"),
    ("8,3", "dashed"),
    ("2,3", "dotted"),
    ("8,3,2,3", "dash-dot"),
];

/// One working-set line and one cores line per node (`node-<name>-working-set`,
/// `node-<name>-cores`), each labelled at its right end.
fn node_lines(r: &Report, axes: &Axes) -> String {
    let mut o = String::new();
    for (i, (node, pts)) in r.node_points.iter().enumerate() {
        let (dash, pattern) = NODE_DASHES[i % NODE_DASHES.len()];
        let style = |colour: &str| {
            let d = if dash.is_empty() {
                String::new()
            } else {
                format!(" stroke-dasharray=\"{dash}\"")
            };
            format!("stroke=\"{colour}\" stroke-width=\"2\"{d}")
        };
        let id = esc(node);
        o += &polyline(
            &format!("node-{id}-working-set"),
            pts,
            axes,
            Panel::Memory,
            |p| p.working_set_bytes.map(|v| v as f64),
            &style(MEM_COLOUR),
        );
        o += "\n";
        o += &polyline(
            &format!("node-{id}-cores"),
            pts,
            axes,
            Panel::Cores,
            |p| p.cores,
            &style(CPU_COLOUR),
        );
        o += "\n";
        o += &format!(
            "<text x=\"{:.0}\" y=\"{:.0}\" fill=\"#444\">{}: {}</text>\n",
            LEFT + 8.0,
            MEM_TOP + 16.0 + 14.0 * i as f64,
            pattern,
            id
        );
    }
    o
}

/// A self-contained HTML page: the ledger section, the SVG inline, then the rest of the text
/// report. No script, no network.
pub fn html(r: &Report) -> String {
    let title = format!("slurmwatch report: job {}", r.job_id);
    // The report opens with where the allocation went (as the text report does), as text.
    let ledger = super::text::ledger_text(r);
    let ledger = if ledger.is_empty() {
        String::new()
    } else {
        format!(
            "<section id=\"ledger\">\n<pre>{}</pre>\n</section>\n",
            esc(&ledger)
        )
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>body{{font-family:sans-serif;margin:2em;max-width:1000px}}pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}</style>\n</head>\n<body>\n<h1>{}</h1>\n{ledger}<figure>\n{}</figure>\n<pre>{}</pre>\n</body>\n</html>\n",
        esc(&title),
        esc(&title),
        svg(r),
        esc(&super::text::render_without_ledger(r))
    )
}
