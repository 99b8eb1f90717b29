//! The job's own progress on the chart: a line across every panel where each phase it marked
//! begins (`phase-<n>`, `n` the phase's index in the report's `phases`), and the throughput
//! panel: the rate series from its log (`series-throughput`), the usual (median) rate dashed
//! (`throughput-usual`), and each slowdown shaded (`slowdown-<n>`, `n` its index in
//! `throughput.slowdowns`).

use super::{esc, polyline_at, Axes, Panel, LEFT, MEM_H, MEM_TOP, RIGHT, W};
use crate::analysis::phases::{self, Phase};
use crate::analysis::throughput::usual_rate;
use crate::report::text_phases::LABEL_CHARS;
use crate::report::text_throughput::held_words;
use crate::report::throughput::{SlowdownSeen, Throughput};
use crate::units;

/// Identity colours (principle 2): the job's own work and its marks; a slowdown is shaded
/// grey, a fact, not a grade.
const RATE_COLOUR: &str = "#b9770e";
const PHASE_COLOUR: &str = "#117a65";

/// The throughput panel's title, with the rate's unit.
pub(super) fn title(rate: Option<&Throughput>) -> String {
    let unit = rate.map_or("", |t| t.unit.as_ref());
    format!("Throughput, {unit}: the job's own rate from its log (solid), usual (dashed), slowdowns (shaded)")
}

/// One tick label of the rate axis at fraction `f` of `max`, with the panel's unit beside
/// the axis in the title.
pub(super) fn rate_tick(f: f64, max: f64) -> String {
    let v = f * max;
    let text = if max >= 100.0 {
        format!("{v:.0}")
    } else if max >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    let top = Panel::Throughput.top();
    let h = Panel::Throughput.height();
    format!(
        "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#444\">{text}</text>\n",
        LEFT - 4.0,
        top + h - f * h
    )
}

/// A user's label as shown beside its line: cut to [`LABEL_CHARS`] (the whole label is in
/// the line's title), then escaped.
fn shown(label: &str) -> String {
    if label.chars().count() <= LABEL_CHARS {
        return esc(label);
    }
    let cut: String = label.chars().take(LABEL_CHARS - 1).collect();
    esc(&format!("{cut}…"))
}

/// A thin solid line where each marked phase begins, across every panel, labelled near the
/// memory panel's foot (three rows, so labels of close marks do not overprint). Step
/// boundaries are dotted grey; these are solid and coloured.
pub(super) fn phase_marks(phases: &[Phase], axes: &Axes) -> String {
    let mut o = String::new();
    for (k, (n, p)) in phases::marked(phases).enumerate() {
        let x = axes.x_clamped(p.started_unix_ms);
        let y = MEM_TOP + MEM_H - 4.0 - 12.0 * (k % 3) as f64;
        o += &format!(
            "<g id=\"phase-{n}\"><title>phase {}</title><line x1=\"{x:.1}\" y1=\"{MEM_TOP}\" x2=\"{x:.1}\" y2=\"{:.0}\" stroke=\"{PHASE_COLOUR}\" stroke-width=\"1\"/><text x=\"{:.1}\" y=\"{y:.0}\" fill=\"{PHASE_COLOUR}\" font-size=\"10\">{}</text></g>\n",
            esc(&p.label),
            axes.bottom(),
            x + 2.0,
            shown(&p.label)
        );
    }
    o
}

/// The throughput panel's marks: slowdowns behind, the usual rate, then the series.
pub(super) fn throughput_panel(t: &Throughput, axes: &Axes) -> String {
    let mut o = String::new();
    for (n, s) in t.slowdowns.iter().enumerate() {
        o += &slowdown_band(n, s, &t.unit, axes);
    }
    if let Some(usual) = usual_rate(&t.points) {
        let y = axes.y(Panel::Throughput, usual);
        o += &format!(
            "<line id=\"throughput-usual\" x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.0}\" y2=\"{y:.1}\" stroke=\"{RATE_COLOUR}\" stroke-dasharray=\"6,4\"><title>usual (median) {usual:.2} {}</title></line>\n",
            W - RIGHT,
            esc(&t.unit)
        );
    } else {
        // No rate was placed in time: the panel says so rather than drawing a line at 0.
        o += &format!(
            "<text x=\"{:.0}\" y=\"{:.0}\" fill=\"#444\">no rate from the log could be placed in time</text>\n",
            LEFT + 8.0,
            Panel::Throughput.top() + 20.0
        );
    }
    o += &polyline_at(
        "series-throughput",
        rate_at(t),
        axes,
        Panel::Throughput,
        &format!("stroke=\"{RATE_COLOUR}\" stroke-width=\"2\""),
    );
    o += "\n";
    o
}

/// Each rate at the middle of its stretch; a stretch that does not start where the last one
/// ended (another bar, or counts that could not be placed) leaves a gap: the rate there is
/// unknown, not 0.
fn rate_at(t: &Throughput) -> impl Iterator<Item = Option<(i64, f64)>> + '_ {
    let mut last_to: Option<i64> = None;
    t.points.iter().flat_map(move |p| {
        let gap = last_to.is_some_and(|to| p.from_unix_ms > to);
        last_to = Some(p.to_unix_ms);
        let mid = p.from_unix_ms + (p.to_unix_ms - p.from_unix_ms) / 2;
        gap.then_some(None)
            .into_iter()
            .chain([Some((mid, p.per_second))])
    })
}

/// A shaded band over a slowdown's stretch, its title the rates, the time lost and what held
/// the cards meanwhile.
fn slowdown_band(n: usize, s: &SlowdownSeen, unit: &str, axes: &Axes) -> String {
    let d = &s.slowdown;
    let (a, b) = (axes.x(d.from_unix_ms), axes.x(d.to_unix_ms));
    let held = held_words(&s.held, "held");
    let held = if held.is_empty() {
        String::new()
    } else {
        format!("; {}", held.join(", "))
    };
    let title = format!(
        "slowdown from {:.2} to {:.2} {unit} for {}, about {} lost{held}",
        d.usual_per_second,
        d.during_per_second,
        units::duration((d.to_unix_ms - d.from_unix_ms) as f64 / 1e3),
        units::duration(d.seconds_lost)
    );
    format!(
        "<g id=\"slowdown-{n}\"><title>{}</title><rect x=\"{a:.1}\" y=\"{}\" width=\"{:.1}\" height=\"{}\" fill=\"#999\" fill-opacity=\"0.25\"/></g>\n",
        esc(&title),
        Panel::Throughput.top(),
        b - a,
        Panel::Throughput.height()
    )
}
