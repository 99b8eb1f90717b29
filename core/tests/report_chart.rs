//! The report's SVG puts the job's own progress beside its memory and cores: a line where
//! each marked phase begins, and a throughput panel (the rate series from its log, the usual
//! rate, each slowdown shaded). Positions are checked against the marks' and rates' times
//! and values through the panel frames the SVG itself draws.

use std::path::PathBuf;

use roxmltree::{Document, Node};
use slurmwatch_core::analysis::phases;
use slurmwatch_core::analysis::throughput::SizeAt;
use slurmwatch_core::analysis::Summary;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::report::throughput::{self, CardHold, Throughput};
use slurmwatch_core::report::{self, chart, NodeRecording, Report};
use slurmwatch_core::sample::Source;
use slurmwatch_core::store::{Event, JobMeta, StepInfo};

const T0: i64 = 1_800_000_000_000;
const MIB: u64 = 1 << 20;
const SCRIPT: &str = "<script>go()</script>";
const LONG: &str = "a phase label far longer than the chart has room for";

/// 60 one-second rows of one busy core and a 100 MiB working set, and three marks: `load`
/// at 10 s, [`SCRIPT`] at 30 s, [`LONG`] at 45 s.
fn recording() -> NodeRecording {
    let rows: Vec<SampleRow> = (0..=60)
        .map(|i| {
            let mut r = SampleRow::empty(T0 + i * 1000, Series::Job, SampleKind::Periodic);
            r.usage.cpu_usage_usec = Some(i as u64 * 1_000_000);
            r.usage.memory_working_set_bytes = Some(100 * MIB);
            r.usage.memory_limit_bytes = Some(1024 * MIB);
            r
        })
        .collect();
    let steps = vec![StepInfo {
        step: "batch".into(),
        started_unix_ms: Some(T0),
        ended_unix_ms: Some(T0 + 60_000),
        tasks: Some(1),
        exit_status: Some(0),
    }];
    let events: Vec<Event> = [(10_000, "load"), (30_000, SCRIPT), (45_000, LONG)]
        .iter()
        .map(|&(dt, label)| Event {
            t_unix_ms: T0 + dt,
            step: Some("batch".into()),
            kind: phases::MARK_EVENT.into(),
            detail: label.into(),
        })
        .collect();
    let phases = phases::phases(&phases::marks(&events), &rows, &[]);
    let summary = Summary::compute(&rows, &steps, &[], &[], Vec::new());
    NodeRecording {
        path: PathBuf::from("/spool/88.sqlite"),
        origin: Default::default(),
        meta: JobMeta {
            job_id: 88,
            user: "alice".into(),
            uid: 1000,
            node: "n1".into(),
            cluster: None,
            plugin_version: "test".into(),
            interval_seconds: 1,
            source: Source::CgroupV2,
            cores_allocated: Some(2),
            memory_allocated_bytes: Some(1024 * MIB),
            started_unix_ms: T0,
            incarnation: None,
        },
        steps,
        events,
        job_rows: rows,
        summary,
        summary_stored: false,
        step_figures: Default::default(),
        phases,
        progress: Default::default(),
    }
}

/// The job's log: a tqdm bar redrawn every 0.1 s at 10 it/s, at a quarter of that from 20 s
/// to 40 s, placed by the log's size at each one-second row.
fn throughput() -> Throughput {
    let (mut log, mut sizes, mut done) = (String::new(), Vec::new(), 0.0f64);
    for tenth in 0..=600i64 {
        if tenth > 0 {
            done += if (200..400).contains(&tenth) {
                0.25
            } else {
                1.0
            };
            let e = tenth / 10;
            log.push_str(&format!(
                "\r{}/1000 [00:{e:02}<00:30, 10.00it/s]",
                done.floor()
            ));
        }
        if tenth % 10 == 0 {
            sizes.push(SizeAt {
                t_unix_ms: T0 + tenth * 100,
                bytes: log.len() as u64,
            });
        }
    }
    throughput::from_log("stderr", (&log, 0), &sizes, &[]).expect("a throughput")
}

fn report(with_throughput: bool) -> Report {
    let mut r = report::build("88", &[recording()], None, None, None);
    if with_throughput {
        r.attach_throughput(throughput());
    }
    r
}

fn by_id<'a>(doc: &'a Document, id: &str) -> Option<Node<'a, 'a>> {
    doc.descendants().find(|n| n.attribute("id") == Some(id))
}

fn num(n: Node, attr: &str) -> f64 {
    n.attribute(attr)
        .unwrap_or_else(|| panic!("no {attr}"))
        .parse()
        .unwrap()
}

/// A panel's frame as the SVG draws it: (x, y, width, height).
fn frame(doc: &Document, panel: &str) -> (f64, f64, f64, f64) {
    let f = by_id(doc, &format!("panel-{panel}")).unwrap_or_else(|| panic!("no {panel}"));
    (num(f, "x"), num(f, "y"), num(f, "width"), num(f, "height"))
}

/// The chart's time axis: from the earliest to the latest of the rows and the rates.
fn x_of(doc: &Document, r: &Report, t: i64) -> f64 {
    let rates = r.throughput.iter().flat_map(|t| &t.points);
    let t0 = rates.clone().map(|p| p.from_unix_ms).fold(T0, i64::min);
    let t1 = rates.map(|p| p.to_unix_ms).fold(T0 + 60_000, i64::max);
    let (x, _, w, _) = frame(doc, "memory");
    x + (t - t0) as f64 / (t1 - t0) as f64 * w
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 0.06
}

#[test]
fn each_marked_phase_is_a_line_at_its_mark_across_every_panel() {
    let r = report(true);
    let svg = chart::svg(&r);
    let doc = Document::parse(&svg).expect("well-formed");
    assert_eq!(
        r.phases.len(),
        4,
        "the stretch before the first mark and three marks"
    );
    assert!(
        by_id(&doc, "phase-0").is_none(),
        "no mark begins the first stretch"
    );
    let (_, mem_top, _, _) = frame(&doc, "memory");
    let (_, rate_top, _, rate_h) = frame(&doc, "throughput");
    for (n, dt) in [(1, 10_000), (2, 30_000), (3, 45_000)] {
        let g = by_id(&doc, &format!("phase-{n}")).unwrap_or_else(|| panic!("phase-{n}"));
        let line = g.children().find(|c| c.has_tag_name("line")).unwrap();
        let x = x_of(&doc, &r, T0 + dt);
        assert!(
            close(num(line, "x1"), x),
            "phase-{n}: {} vs {x}",
            num(line, "x1")
        );
        assert_eq!(num(line, "x1"), num(line, "x2"), "vertical");
        assert_eq!(num(line, "y1"), mem_top);
        assert_eq!(
            num(line, "y2"),
            rate_top + rate_h,
            "down through the throughput"
        );
        // Told apart from the dotted step boundaries.
        assert!(line.attribute("stroke-dasharray").is_none());
    }
    let step = by_id(&doc, "step-batch").unwrap();
    let step_line = step.children().find(|c| c.has_tag_name("line")).unwrap();
    assert!(step_line.attribute("stroke-dasharray").is_some());
}

#[test]
fn user_labels_are_escaped_and_long_ones_cut() {
    let r = report(true);
    let svg = chart::svg(&r);
    assert!(!svg.contains("<script"), "a label is text, never markup");
    assert!(svg.contains("&lt;script&gt;go()&lt;/script&gt;"));
    let doc = Document::parse(&svg).expect("well-formed");
    let text = |id: &str, tag: &str| -> String {
        let g = by_id(&doc, id).unwrap();
        let t = g.children().find(|c| c.has_tag_name(tag)).unwrap();
        t.text().unwrap().to_string()
    };
    assert_eq!(text("phase-2", "text"), SCRIPT);
    let shown = text("phase-3", "text");
    assert_eq!(shown.chars().count(), 24, "{shown}");
    assert!(shown.ends_with('…') && LONG.starts_with(shown.trim_end_matches('…')));
    assert_eq!(text("phase-3", "title"), format!("phase {LONG}"));
    // The HTML holds the same picture, and still the text.
    let html = chart::html(&r);
    assert!(html.contains(&svg));
    assert!(!html.contains("<script"));
    assert!(html.contains("PHASES (as the job marked them)"));
    assert!(html.contains("THROUGHPUT (the job&#39;s own progress"));
}

#[test]
fn the_throughput_panel_draws_each_rate_at_its_time_and_value() {
    let r = report(true);
    let t = r.throughput.as_ref().unwrap();
    assert!(t.points.len() >= 50, "{}", t.points.len());
    let svg = chart::svg(&r);
    let doc = Document::parse(&svg).expect("well-formed");
    assert_eq!(doc.root_element().attribute("height"), Some("720"));
    let (_, top, _, h) = frame(&doc, "throughput");
    let ymax = 1.1 * t.points.iter().map(|p| p.per_second).fold(0.0, f64::max);
    let g = by_id(&doc, "series-throughput").unwrap();
    let lines: Vec<Node> = g
        .children()
        .filter(|c| c.has_tag_name("polyline"))
        .collect();
    assert_eq!(lines.len(), 1, "one bar, no gap");
    let drawn: Vec<(f64, f64)> = lines[0]
        .attribute("points")
        .unwrap()
        .split_whitespace()
        .map(|xy| {
            let (x, y) = xy.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    assert_eq!(drawn.len(), t.points.len(), "one point per rate");
    for (p, (x, y)) in t.points.iter().zip(&drawn) {
        let mid = p.from_unix_ms + (p.to_unix_ms - p.from_unix_ms) / 2;
        assert!(close(*x, x_of(&doc, &r, mid)), "{p:?}: x {x}");
        let want = top + h - p.per_second / ymax * h;
        assert!(close(*y, want), "{p:?}: y {y} vs {want}");
    }
    // The usual rate: the median, dashed across the panel.
    let usual = by_id(&doc, "throughput-usual").unwrap();
    let median = t.slowdowns[0].slowdown.usual_per_second;
    assert!(close(num(usual, "y1"), top + h - median / ymax * h));
    assert!(usual.attribute("stroke-dasharray").is_some());
    assert!(
        svg.contains("Throughput, it/s"),
        "the unit labels the panel"
    );
}

#[test]
fn a_slowdown_is_a_band_over_its_stretch_titled_with_what_held_the_cards() {
    let mut r = report(true);
    let t = r.throughput.as_mut().unwrap();
    assert_eq!(t.slowdowns.len(), 1, "{:?}", t.slowdowns);
    t.slowdowns[0].held.push(CardHold {
        card: "cuda:0".into(),
        limiter: "thermal".into(),
        seconds: 19.0,
    });
    let d = t.slowdowns[0].slowdown;
    let svg = chart::svg(&r);
    let doc = Document::parse(&svg).expect("well-formed");
    let (_, top, _, h) = frame(&doc, "throughput");
    let g = by_id(&doc, "slowdown-0").unwrap();
    let band = g.children().find(|c| c.has_tag_name("rect")).unwrap();
    let (a, b) = (x_of(&doc, &r, d.from_unix_ms), x_of(&doc, &r, d.to_unix_ms));
    assert!(close(num(band, "x"), a), "{} vs {a}", num(band, "x"));
    assert!(
        close(num(band, "width"), b - a),
        "{} vs {}",
        num(band, "width"),
        b - a
    );
    assert_eq!((num(band, "y"), num(band, "height")), (top, h));
    let title = g.children().find(|c| c.has_tag_name("title")).unwrap();
    let title = title.text().unwrap();
    assert!(title.contains("cuda:0 held by heat (19.0 s)"), "{title}");
    assert!(by_id(&doc, "slowdown-1").is_none());
}

#[test]
fn rates_with_a_stretch_between_them_unknown_leave_a_gap() {
    let mut r = report(true);
    let t = r.throughput.as_mut().unwrap();
    // Three rates missing (counts that could not be placed): nothing is known between.
    let n = t.points.len();
    t.points.drain(n / 2..n / 2 + 3);
    let svg = chart::svg(&r);
    let doc = Document::parse(&svg).expect("well-formed");
    let g = by_id(&doc, "series-throughput").unwrap();
    let counts: Vec<usize> = g
        .children()
        .filter_map(|c| c.attribute("points"))
        .map(|p| p.split_whitespace().count())
        .collect();
    assert_eq!(
        counts,
        vec![n / 2, n - n / 2 - 3],
        "two lines, no point at 0"
    );
}

#[test]
fn no_throughput_no_panel_and_the_height_is_kept() {
    let r = report(false);
    let svg = chart::svg(&r);
    let doc = Document::parse(&svg).expect("well-formed");
    assert_eq!(doc.root_element().attribute("height"), Some("510"));
    for id in [
        "panel-throughput",
        "series-throughput",
        "throughput-usual",
        "slowdown-0",
    ] {
        assert!(by_id(&doc, id).is_none(), "{id}");
    }
    // The phases are drawn all the same, down to the cores panel's foot.
    let (_, top, _, h) = frame(&doc, "cores");
    let line = by_id(&doc, "phase-1")
        .unwrap()
        .children()
        .find(|c| c.has_tag_name("line"))
        .unwrap();
    assert_eq!(num(line, "y2"), top + h);
    // Without rates the axis is the rows': 10 s into 60 s.
    let (x, _, w, _) = frame(&doc, "memory");
    assert!(close(num(line, "x1"), x + w / 6.0));
}
