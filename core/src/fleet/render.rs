//! `slurmwatch cards` as text and as JSON (`schema` 1; keys in docs/reference/json.md). The
//! drain line is a suggestion printed for admins, never run.

use serde_json::{json, Value};

use super::cards::{
    Analysis, CardTally, Comparison, NodeTally, FAMILY_ALPHA, MIN_JOBS, MIN_REST_JOBS,
};
use super::{Gathered, Window};
use crate::units::clock;

/// Version of the `cards --json` layout.
pub const SCHEMA: u32 = 1;

fn pct(k: u64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        k as f64 * 100.0 / n as f64
    }
}

fn r1(v: f64) -> Value {
    if v.is_finite() {
        json!((v * 10.0).round() / 10.0 + 0.0) // + 0.0: no -0 in JSON
    } else {
        Value::Null
    }
}

fn interval(i: (f64, f64)) -> Value {
    json!([r1(i.0 * 100.0), r1(i.1 * 100.0)])
}

fn comparison_json(c: &Option<Comparison>) -> Value {
    match c {
        None => Value::Null,
        Some(c) => json!({
            "rest_jobs": c.rest_jobs,
            "rest_held_back_jobs": c.rest_held_back,
            "rest_held_back_percent": r1(pct(c.rest_held_back, c.rest_jobs)),
            "wilson95_percent": interval(c.wilson95),
            "rest_wilson95_percent": interval(c.rest_wilson95),
            "corrected_level_percent": r1(c.corrected_level * 100.0),
            "difference_corrected_percent": interval(c.difference_corrected),
            "named": c.named,
        }),
    }
}

/// `SM 385 of 1785 MHz (22 %) at 163 of 400 W (41 %)`, with whatever is known.
fn held_back_figures(c: &CardTally) -> String {
    let f = &c.figures;
    let mut parts = Vec::new();
    match (f.sm_clock_mhz, f.sm_clock_max_mhz) {
        (Some(a), Some(m)) if m > 0 => parts.push(format!(
            "SM {a:.0} of {m} MHz ({:.0} %)",
            a * 100.0 / f64::from(m)
        )),
        (Some(a), _) => parts.push(format!("SM {a:.0} MHz")),
        _ => {}
    }
    match (f.power_watts, f.power_limit_watts) {
        (Some(p), Some(l)) if l > 0.0 => {
            parts.push(format!("{p:.0} of {l:.0} W ({:.0} %)", p * 100.0 / l))
        }
        (Some(p), _) => parts.push(format!("{p:.0} W")),
        _ => {}
    }
    parts.join(" at ")
}

/// What held the card back, in a few words: reasons, figures, Xids.
fn why(c: &CardTally) -> String {
    let f = &c.figures;
    let mut parts = Vec::new();
    if c.held_back_by_slowdown > 0 {
        let reasons = if f.reasons.is_empty() {
            "slowed (reason not reported)".to_string()
        } else {
            f.reasons.join(", ")
        };
        let figs = held_back_figures(c);
        parts.push(if figs.is_empty() {
            format!("{reasons} for {:.1} min in all", f.minutes)
        } else {
            format!("{reasons} for {:.1} min in all, {figs}", f.minutes)
        });
    }
    if !f.hardware_xids.is_empty() {
        let codes: Vec<String> = f.hardware_xids.iter().map(u64::to_string).collect();
        parts.push(format!(
            "Xid {} in {} jobs",
            codes.join(", "),
            c.held_back_by_xid
        ));
    }
    parts.join("; ")
}

fn where_(c: &CardTally) -> String {
    let mut s = c.node.clone();
    if let Some(i) = c.nvml_index {
        s += &format!(", nvml {i}");
    }
    if let Some(b) = &c.pci_bus_id {
        s += &format!(", {b}");
    }
    s
}

fn card_sentence(c: &CardTally, comparisons: usize) -> String {
    let Some(cmp) = &c.comparison else {
        return String::new();
    };
    format!(
        "{} on {}: held back in {} of {} jobs ({:.0} %, 95 % Wilson {:.0}–{:.0} %) against {} of {} jobs on the other cards ({:.0} %, {:.0}–{:.0} %); the gap's interval at the Bonferroni-corrected {:.2} % level over {comparisons} comparisons is {:.0}–{:.0} points: {}.",
        c.uuid, where_(c), c.held_back, c.jobs, pct(c.held_back, c.jobs),
        cmp.wilson95.0 * 100.0, cmp.wilson95.1 * 100.0,
        cmp.rest_held_back, cmp.rest_jobs, pct(cmp.rest_held_back, cmp.rest_jobs),
        cmp.rest_wilson95.0 * 100.0, cmp.rest_wilson95.1 * 100.0,
        cmp.corrected_level * 100.0,
        cmp.difference_corrected.0 * 100.0, cmp.difference_corrected.1 * 100.0,
        why(c),
    )
}

fn node_sentence(n: &NodeTally, comparisons: usize) -> String {
    let Some(cmp) = &n.comparison else {
        return String::new();
    };
    format!(
        "{}: a card held back in {} of {} jobs ({:.0} %) against {} of {} on the other nodes ({:.0} %); the gap's interval at the Bonferroni-corrected {:.2} % level over {comparisons} comparisons is {:.0}–{:.0} points.",
        n.node, n.held_back, n.jobs, pct(n.held_back, n.jobs),
        cmp.rest_held_back, cmp.rest_jobs, pct(cmp.rest_held_back, cmp.rest_jobs),
        cmp.corrected_level * 100.0,
        cmp.difference_corrected.0 * 100.0, cmp.difference_corrected.1 * 100.0,
    )
}

/// The facts a drain needs, per node: the command an admin may run (never run here).
pub fn drains(a: &Analysis) -> Vec<(String, String)> {
    let mut by_node: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
    for c in a.named_cards() {
        let mut r = format!(
            "slurmwatch: {}{} held back in {} of {} jobs",
            c.uuid,
            c.nvml_index
                .map(|i| format!(" (nvml {i})"))
                .unwrap_or_default(),
            c.held_back,
            c.jobs
        );
        let w = why(c);
        if !w.is_empty() {
            r += &format!(": {w}");
        }
        by_node.entry(c.node.as_str()).or_default().push(r);
    }
    for n in a.named_nodes() {
        by_node.entry(n.node.as_str()).or_default().push(format!(
            "slurmwatch: a card held back in {} of {} jobs",
            n.held_back, n.jobs
        ));
    }
    by_node
        .into_iter()
        .map(|(node, rs)| {
            // Slurm's reason is one quoted string: no quotes inside it.
            let reason = rs.join("; ").replace('"', "'");
            (
                node.to_string(),
                format!("scontrol update NodeName={node} State=DRAIN Reason=\"{reason}\""),
            )
        })
        .collect()
}

fn card_json(c: &CardTally, comparisons: usize) -> Value {
    let f = &c.figures;
    json!({
        "uuid": c.uuid,
        "node": c.node,
        "nodes": c.nodes,
        "nvml_index": c.nvml_index,
        "pci_bus_id": c.pci_bus_id,
        "name": c.name,
        "jobs": c.jobs,
        "jobs_unknown": c.unknown,
        "held_back_jobs": c.held_back,
        "held_back_percent": r1(pct(c.held_back, c.jobs)),
        "held_back_by_slowdown_jobs": c.held_back_by_slowdown,
        "held_back_by_xid_jobs": c.held_back_by_xid,
        "held_back_minutes": r1(f.minutes),
        "throttle_reasons": f.reasons,
        "held_back_sm_clock_mhz": f.sm_clock_mhz.map(r1),
        "sm_clock_max_mhz": f.sm_clock_max_mhz,
        "held_back_sm_clock_percent_of_max": f.sm_clock_mhz.zip(f.sm_clock_max_mhz).filter(|(_, m)| *m > 0).map(|(a, m)| r1(a * 100.0 / f64::from(m))),
        "held_back_power_watts": f.power_watts.map(r1),
        "held_back_power_limit_watts": f.power_limit_watts.map(r1),
        "held_back_power_percent_of_limit": f.power_watts.zip(f.power_limit_watts).filter(|(_, l)| *l > 0.0).map(|(p, l)| r1(p * 100.0 / l)),
        "hardware_xids": f.hardware_xids,
        "first_job_unix_ms": c.first_job_unix_ms,
        "last_job_unix_ms": c.last_job_unix_ms,
        "held_back_job_ids": c.held_back_job_ids,
        "comparison": comparison_json(&c.comparison),
        "named": c.named(),
        "sentence": if c.named() { Value::from(card_sentence(c, comparisons)) } else { Value::Null },
    })
}

fn node_json(n: &NodeTally, comparisons: usize) -> Value {
    json!({
        "node": n.node,
        "cards": n.cards,
        "jobs": n.jobs,
        "jobs_unknown": n.unknown,
        "held_back_jobs": n.held_back,
        "held_back_percent": r1(pct(n.held_back, n.jobs)),
        "comparison": comparison_json(&n.comparison),
        "named": n.named(),
        "sentence": if n.named() { Value::from(node_sentence(n, comparisons)) } else { Value::Null },
    })
}

fn window_json(w: &Window, g: &Gathered, a: &Analysis) -> Value {
    json!({
        "since_unix_ms": w.since_unix_ms,
        "until_unix_ms": w.until_unix_ms,
        "gpu_jobs": a.gpu_jobs,
        "records_read": g.read,
        "records_unreadable": g.skipped_count,
        "unreadable_examples": g.skipped,
        "left_out": g.left_out,
        "cards_without_uuid": a.cards_without_uuid,
    })
}

/// The JSON document (`schema` 1).
pub fn json(w: &Window, g: &Gathered, a: &Analysis) -> Value {
    let exclude = a.exclude();
    json!({
        "schema": SCHEMA,
        "window": window_json(w, g, a),
        "method": {
            "family_alpha": FAMILY_ALPHA,
            "correction": "bonferroni",
            "comparisons": a.comparisons,
            "test": "newcombe_hybrid_score_difference",
            "min_jobs": MIN_JOBS,
            "min_rest_jobs": MIN_REST_JOBS,
        },
        "cards": a.cards.iter().map(|c| card_json(c, a.comparisons)).collect::<Vec<_>>(),
        "nodes": a.nodes.iter().map(|n| node_json(n, a.comparisons)).collect::<Vec<_>>(),
        "named_cards": a.named_cards().map(|c| c.uuid.clone()).collect::<Vec<_>>(),
        "named_nodes": a.named_nodes().map(|n| n.node.clone()).collect::<Vec<_>>(),
        "exclude": exclude.as_ref().map(|e| format!("--exclude={e}")),
        "sbatch": exclude.as_ref().map(|e| format!("#SBATCH --exclude={e}")),
        "drain": drains(a).into_iter().map(|(node, command)| json!({"node": node, "command": command})).collect::<Vec<_>>(),
    })
}

/// The sentence when the window holds no recorded GPU job (exit code 1).
pub fn nothing(w: &Window, g: &Gathered) -> String {
    format!(
        "no recorded GPU job between {} and {} ({} job files read).{}\nhint: widen the window with -S (e.g. -S now-90d), or point --archive at where the recordings are kept",
        clock(w.since_unix_ms),
        clock(w.until_unix_ms),
        g.read,
        left_out(g)
    )
}

/// The sentences on what was found but not counted, one line each (empty when none).
fn left_out(g: &Gathered) -> String {
    g.left_out
        .iter()
        // Paths hold names users chose: no control byte reaches the terminal.
        .map(|n| format!("\nLeft out: {}.", crate::render::terminal::field(n)))
        .collect()
}

/// The text view.
pub fn text(w: &Window, g: &Gathered, a: &Analysis) -> String {
    let mut s = format!(
        "GPU cards {} – {}: {} recorded GPU jobs, {} cards on {} node{} ({} job files read{})\n\n",
        clock(w.since_unix_ms),
        clock(w.until_unix_ms),
        a.gpu_jobs,
        a.cards.len(),
        a.nodes.len(),
        if a.nodes.len() == 1 { "" } else { "s" },
        g.read,
        if g.skipped_count > 0 {
            format!(", {} unreadable", g.skipped_count)
        } else {
            String::new()
        }
    );
    let notes = left_out(g);
    if !notes.is_empty() {
        s += notes.trim_start();
        s += "\n\n";
    }
    s += &format!(
        "{:<40} {:<10} {:>5} {:>10} {:>7}  {}\n",
        "CARD", "NODE", "JOBS", "HELD BACK", "UNKNOWN", "WHILE HELD BACK"
    );
    for c in &a.cards {
        s += &format!(
            "{:<40} {:<10} {:>5} {:>10} {:>7}  {}{}\n",
            c.uuid,
            c.node,
            c.jobs,
            format!("{} ({:.0} %)", c.held_back, pct(c.held_back, c.jobs)),
            c.unknown,
            if c.held_back > 0 { why(c) } else { "-".into() },
            if c.named() { "  ◀ named" } else { "" }
        );
    }
    s += &format!(
        "\n{:<40} {:<10} {:>5} {:>10} {:>7}\n",
        "NODE", "CARDS", "JOBS", "HELD BACK", "UNKNOWN"
    );
    for n in &a.nodes {
        s += &format!(
            "{:<40} {:<10} {:>5} {:>10} {:>7}{}\n",
            n.node,
            n.cards.len(),
            n.jobs,
            format!("{} ({:.0} %)", n.held_back, pct(n.held_back, n.jobs)),
            n.unknown,
            if n.named() { "  ◀ named" } else { "" }
        );
    }
    s += "\n";
    let named: Vec<String> = a
        .named_cards()
        .map(|c| card_sentence(c, a.comparisons))
        .chain(a.named_nodes().map(|n| node_sentence(n, a.comparisons)))
        .collect();
    if named.is_empty() {
        s += &format!(
            "No card or node was held back more often than the rest of the fleet ({} comparisons, family-wise {:.0} %, Bonferroni; a card or node needs {MIN_JOBS} jobs with a known verdict, and the rest {MIN_REST_JOBS}, to be compared).\n",
            a.comparisons,
            (1.0 - FAMILY_ALPHA) * 100.0
        );
        return s;
    }
    s += "Held back more often than the rest of the fleet:\n";
    for n in &named {
        s += &format!("  - {n}\n");
    }
    if let Some(e) = a.exclude() {
        s += &format!("\nFor users, until it is fixed:\n  #SBATCH --exclude={e}\n");
    }
    s += "\nFor admins (a suggestion; slurmwatch runs nothing):\n";
    for (_, cmd) in drains(a) {
        s += &format!("  {cmd}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::cards::{analyse, tests::six_jobs};
    use super::*;

    #[test]
    fn text_and_json_name_card_2_with_its_counts_and_the_lines_to_act_on() {
        let jobs = six_jobs();
        let a = analyse(&jobs);
        let w = Window {
            since_unix_ms: 1_699_000_000_000,
            until_unix_ms: 1_701_000_000_000,
        };
        let g = Gathered {
            read: 6,
            ..Gathered::default()
        };
        let t = text(&w, &g, &a);
        assert!(
            t.contains("GPU-00000002 on sw1, nvml 2, 00000000:12:00.0: held back in 4 of 6 jobs"),
            "{t}"
        );
        assert!(t.contains("hardware_slowdown for 0.3 min in all, SM 385 of 1785 MHz (22 %) at 163 of 400 W (41 %)"), "{t}");
        assert!(t.contains("#SBATCH --exclude=sw1"), "{t}");
        assert!(t.contains("scontrol update NodeName=sw1 State=DRAIN Reason=\"slurmwatch: GPU-00000002 (nvml 2) held back in 4 of 6 jobs"), "{t}");
        assert_eq!(t.matches("◀ named").count(), 1, "{t}");
        let v = json(&w, &g, &a);
        assert_eq!(v["named_cards"], serde_json::json!(["GPU-00000002"]));
        assert_eq!(v["exclude"], "--exclude=sw1");
        let c = &v["cards"][0];
        assert_eq!(
            (c["held_back_jobs"].as_u64(), c["jobs"].as_u64()),
            (Some(4), Some(6))
        );
        assert_eq!(c["held_back_sm_clock_mhz"], 385.0);
        assert_eq!(c["held_back_power_percent_of_limit"], 40.8);
        assert_eq!(c["comparison"]["rest_jobs"], 18);
        assert_eq!(v["method"]["comparisons"], 4);
        assert!(v["drain"][0]["command"]
            .as_str()
            .unwrap()
            .starts_with("scontrol update NodeName=sw1"));
    }

    #[test]
    fn no_outlier_says_so_and_prints_no_exclude() {
        let mut jobs = six_jobs();
        for j in &mut jobs {
            j.gpus.retain(|g| g.uuid.as_deref() != Some("GPU-00000002"));
        }
        let a = analyse(&jobs);
        let w = Window {
            since_unix_ms: 0,
            until_unix_ms: 1,
        };
        let t = text(&w, &Gathered::default(), &a);
        assert!(
            t.contains("No card or node was held back more often"),
            "{t}"
        );
        assert!(!t.contains("--exclude") && !t.contains("scontrol"), "{t}");
        assert!(json(&w, &Gathered::default(), &a)["exclude"].is_null());
    }
}
