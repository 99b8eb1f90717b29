//! Pictures of a report: an SVG (memory: working set, cache, limit; cores in use vs
//! allocated; step boundaries) and a self-contained HTML page around it (no network, no
//! script). Series carry stable ids (`series-working-set`, `series-cache`, `series-limit`,
//! `series-cores`, `series-allocated`, `step-<name>`) so tests and users can find them.

use super::{Point, Report};
use crate::units;

const W: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const MEM_TOP: f64 = 40.0;
const MEM_H: f64 = 220.0;
const CPU_TOP: f64 = 320.0;
const CPU_H: f64 = 150.0;
const H: f64 = 510.0;
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

#[allow(clippy::too_many_arguments)] // one call per series; a struct would only rename them
fn polyline(
    id: &str,
    pts: &[Point],
    t0: i64,
    span: f64,
    top: f64,
    h: f64,
    ymax: f64,
    get: impl Fn(&Point) -> Option<f64>,
    style: &str,
) -> String {
    // An unreadable point breaks the line (never drawn as 0).
    let mut segs: Vec<String> = Vec::new();
    let mut cur = String::new();
    for p in pts {
        match get(p) {
            Some(v) if v.is_finite() => {
                let x = LEFT + (p.t_unix_ms - t0) as f64 / span * (W - LEFT - RIGHT);
                let y = top + h - (v / ymax).clamp(0.0, 1.05) * h;
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

/// The report's charts as one SVG document.
pub fn svg(r: &Report) -> String {
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n<title>slurmwatch report: job {}</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
        esc(&r.job_id)
    );
    // A multi-node job: one line per node on a common time axis; the axes fit every node.
    let multi = r.node_points.len() > 1;
    let all: Vec<Point>;
    let pts: &[Point] = if multi {
        all = {
            let mut v: Vec<Point> = r.node_points.iter().flat_map(|(_, p)| p.clone()).collect();
            v.sort_by_key(|p| p.t_unix_ms);
            v
        };
        &all
    } else {
        &r.points
    };
    if pts.is_empty() {
        o += &format!(
            "<text x=\"20\" y=\"40\">{}</text>\n</svg>\n",
            esc("No time series was recorded for this job (enable it with #SBATCH --slurmwatch).")
        );
        return o;
    }
    let t0 = pts[0].t_unix_ms;
    let t1 = pts[pts.len() - 1].t_unix_ms;
    let span = (t1 - t0).max(1) as f64;
    let mem_max = pts
        .iter()
        .flat_map(|p| {
            [
                p.working_set_bytes.map(|v| v as f64),
                p.limit_bytes.map(|v| v as f64),
                p.cache_bytes
                    .zip(p.working_set_bytes)
                    .map(|(c, w)| (c + w) as f64),
            ]
        })
        .flatten()
        .fold(1.0, f64::max)
        * 1.05;
    // Per node in a multi-node job (each node's line is against its own allocation).
    let alloc = if multi {
        r.nodes
            .iter()
            .filter_map(|n| n.cores_allocated)
            .reduce(f64::max)
    } else {
        r.cpu.cores_allocated
    };
    let cpu_max = pts
        .iter()
        .filter_map(|p| p.cores)
        .chain(alloc)
        .fold(1.0, f64::max)
        * 1.1;
    // Frames, titles, axes.
    for (top, h, title) in [
        (
            MEM_TOP,
            MEM_H,
            "Memory: working set (solid), working set + page cache (light), limit (dashed)",
        ),
        (CPU_TOP, CPU_H, "Cores in use (solid) vs allocated (dashed)"),
    ] {
        o += &format!(
            "<text x=\"{LEFT}\" y=\"{:.0}\" font-weight=\"bold\">{}</text>\n<rect x=\"{LEFT}\" y=\"{top}\" width=\"{}\" height=\"{h}\" fill=\"none\" stroke=\"#bbb\"/>\n",
            top - 8.0,
            esc(title),
            W - LEFT - RIGHT
        );
    }
    for i in 0..=4 {
        let f = i as f64 / 4.0;
        let x = LEFT + f * (W - LEFT - RIGHT);
        let label = units::offset((f * span) as i64);
        o += &format!(
            "<text x=\"{x:.1}\" y=\"{:.0}\" text-anchor=\"middle\" fill=\"#444\">{label}</text>\n",
            CPU_TOP + CPU_H + 16.0
        );
        let ym = MEM_TOP + MEM_H - f * MEM_H;
        o += &format!(
            "<text x=\"{:.0}\" y=\"{ym:.1}\" text-anchor=\"end\" fill=\"#444\">{}</text>\n",
            LEFT - 4.0,
            esc(&units::bytes((f * mem_max) as u64))
        );
        let yc = CPU_TOP + CPU_H - f * CPU_H;
        o += &format!(
            "<text x=\"{:.0}\" y=\"{yc:.1}\" text-anchor=\"end\" fill=\"#444\">{:.1}</text>\n",
            LEFT - 4.0,
            f * cpu_max
        );
    }
    o += &format!(
        "<text x=\"{:.0}\" y=\"{:.0}\" text-anchor=\"end\" fill=\"#444\">time into the job (hh:mm:ss)</text>\n",
        W - RIGHT,
        H - 6.0
    );
    // Step boundaries.
    for (name, a, b) in &r.step_marks {
        let mut g = format!("<g id=\"step-{}\">", esc(name));
        for (t, label) in [(a, format!("{name} start")), (b, format!("{name} end"))] {
            if let Some(t) = t {
                let x = LEFT + ((*t - t0) as f64 / span).clamp(0.0, 1.0) * (W - LEFT - RIGHT);
                g += &format!(
                    "<line x1=\"{x:.1}\" y1=\"{MEM_TOP}\" x2=\"{x:.1}\" y2=\"{:.0}\" stroke=\"#999\" stroke-dasharray=\"2,3\"><title>{}</title></line>",
                    CPU_TOP + CPU_H,
                    esc(&label)
                );
            }
        }
        g += "</g>\n";
        o += &g;
    }
    if multi {
        o += &node_lines(r, t0, span, mem_max, cpu_max);
    }
    if !multi {
        o += &polyline(
            "series-cache",
            pts,
            t0,
            span,
            MEM_TOP,
            MEM_H,
            mem_max,
            |p| {
                p.cache_bytes
                    .zip(p.working_set_bytes)
                    .map(|(c, w)| (c + w) as f64)
            },
            &format!("stroke=\"{CACHE_COLOUR}\" stroke-width=\"1.5\""),
        );
        o += "\n";
        o += &polyline(
            "series-working-set",
            pts,
            t0,
            span,
            MEM_TOP,
            MEM_H,
            mem_max,
            |p| p.working_set_bytes.map(|v| v as f64),
            &format!("stroke=\"{MEM_COLOUR}\" stroke-width=\"2\""),
        );
        o += "\n";
    }
    o += &polyline(
        "series-limit",
        pts,
        t0,
        span,
        MEM_TOP,
        MEM_H,
        mem_max,
        |p| p.limit_bytes.map(|v| v as f64),
        &format!("stroke=\"{LIMIT_COLOUR}\" stroke-dasharray=\"6,4\""),
    );
    o += "\n";
    if !multi {
        o += &polyline(
            "series-cores",
            pts,
            t0,
            span,
            CPU_TOP,
            CPU_H,
            cpu_max,
            |p| p.cores,
            &format!("stroke=\"{CPU_COLOUR}\" stroke-width=\"2\""),
        );
        o += "\n";
    }
    if alloc.is_some() {
        o += &polyline(
            "series-allocated",
            pts,
            t0,
            span,
            CPU_TOP,
            CPU_H,
            cpu_max,
            |_| alloc,
            &format!("stroke=\"{LIMIT_COLOUR}\" stroke-dasharray=\"6,4\""),
        );
        o += "\n";
    }
    // OOM kills.
    for e in &r.memory.oom_events {
        let x = LEFT + ((e.t_unix_ms - t0) as f64 / span).clamp(0.0, 1.0) * (W - LEFT - RIGHT);
        o += &format!(
            "<g id=\"oom-kill\"><line x1=\"{x:.1}\" y1=\"{MEM_TOP}\" x2=\"{x:.1}\" y2=\"{:.0}\" stroke=\"#c0392b\" stroke-width=\"2\"/><text x=\"{:.1}\" y=\"{:.0}\" fill=\"#c0392b\">OOM kill</text></g>\n",
            MEM_TOP + MEM_H,
            x + 3.0,
            MEM_TOP + 14.0
        );
    }
    o += "</svg>\n";
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
fn node_lines(r: &Report, t0: i64, span: f64, mem_max: f64, cpu_max: f64) -> String {
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
            t0,
            span,
            MEM_TOP,
            MEM_H,
            mem_max,
            |p| p.working_set_bytes.map(|v| v as f64),
            &style(MEM_COLOUR),
        );
        o += "\n";
        o += &polyline(
            &format!("node-{id}-cores"),
            pts,
            t0,
            span,
            CPU_TOP,
            CPU_H,
            cpu_max,
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

/// A self-contained HTML page: the text report and the SVG inline. No script, no network.
pub fn html(r: &Report) -> String {
    let title = format!("slurmwatch report: job {}", r.job_id);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>body{{font-family:sans-serif;margin:2em;max-width:1000px}}pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}</style>\n</head>\n<body>\n<h1>{}</h1>\n<figure>\n{}</figure>\n<pre>{}</pre>\n</body>\n</html>\n",
        esc(&title),
        esc(&title),
        svg(r),
        esc(&super::text::render(r, false))
    )
}
