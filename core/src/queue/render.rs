//! The queued-job answer as strict JSON (`schema` first, units in key names, an unknown
//! figure `null` with `<key>_reason`) and as the lines the screen and the terminal show.

use serde_json::{Map, Value};

use super::history_hint::HistoryHint;
use super::{limit_text, Analysis, Verdict, QUEUE_SCHEMA};
use crate::slurm::squeue::TimeLimit;
use crate::units::bytes;

fn opt<T: Into<Value>>(m: &mut Map<String, Value>, key: &str, v: Option<T>, why: Option<&str>) {
    match v {
        Some(v) => {
            m.insert(key.into(), v.into());
        }
        None => {
            m.insert(key.into(), Value::Null);
            if let Some(w) = why {
                m.insert(format!("{key}_reason"), w.into());
            }
        }
    }
}

fn limit(m: &mut Map<String, Value>, key: &str, t: TimeLimit) {
    match t {
        TimeLimit::Seconds(s) => opt(m, key, Some(s), None),
        TimeLimit::Unlimited => opt::<u64>(m, key, None, Some("unlimited")),
        TimeLimit::Unknown => opt::<u64>(m, key, None, Some("Slurm gave none")),
    }
}

fn verdict(v: &Verdict) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), v.name.clone().into());
    m.insert("current".into(), v.current.into());
    m.insert("accessible".into(), v.accessible.into());
    opt(&mut m, "access_reason", v.access_reason.clone(), None);
    m.insert("state".into(), v.state.to_lowercase().into());
    limit(&mut m, "max_time_seconds", v.max_time);
    m.insert("fits_now".into(), v.fits_now.into());
    m.insert("fits_when_empty".into(), v.fits_when_empty.into());
    m.insert(
        "obstacle".into(),
        v.obstacle.map_or(Value::Null, |o| o.as_str().into()),
    );
    opt(&mut m, "obstacle_detail", v.obstacle_detail.clone(), None);
    let mut f = Map::new();
    f.insert("nodes_with_room".into(), v.free.nodes_with_room.into());
    let unread = Some("Slurm did not report it for every node");
    opt(&mut f, "cpus", v.free.cpus, unread);
    opt(&mut f, "memory_bytes", v.free.memory_bytes, unread);
    opt(&mut f, "gpus", v.free.gpus, unread);
    m.insert("free".into(), f.into());
    m.insert(
        "command".into(),
        v.command.clone().map_or(Value::Null, Value::from),
    );
    m.into()
}

fn hint(h: &HistoryHint) -> Value {
    let mut m = Map::new();
    m.insert("resource".into(), h.resource.as_str().into());
    m.insert("unit".into(), h.resource.unit().into());
    m.insert("requested".into(), h.requested.into());
    m.insert("history_used".into(), h.history_used.into());
    m.insert("runs".into(), h.runs.into());
    m.insert("suggested".into(), h.suggested.into());
    m.insert("basis".into(), h.basis.clone().into());
    m.insert("fits_now_in".into(), h.fits_now_in.clone().into());
    m.insert("command".into(), h.command.clone().into());
    m.insert("sentence".into(), h.sentence.clone().into());
    m.into()
}

/// The whole answer as a JSON object; `commands` and `seconds` say what it cost.
pub fn to_value(a: &Analysis, commands: u32, seconds: f64) -> Value {
    let mut m = Map::new();
    m.insert("schema".into(), QUEUE_SCHEMA.into());
    m.insert("job_id".into(), a.job_id.to_string().into());
    m.insert("job_name".into(), a.job_name.clone().into());
    m.insert("user".into(), a.user.clone().into());
    m.insert("account".into(), a.account.clone().into());
    m.insert("qos".into(), a.qos.clone().into());
    m.insert("state".into(), "pending".into());
    let mut p = Map::new();
    p.insert("reason".into(), a.reason.clone().into());
    p.insert("reason_raw".into(), a.reason_raw.clone().into());
    p.insert("waiting_for".into(), a.waiting.as_str().into());
    p.insert("explanation".into(), a.explanation.clone().into());
    opt(
        &mut p,
        "expected_start",
        a.expected_start.clone(),
        a.expected_start_reason.as_deref(),
    );
    opt(
        &mut p,
        "queue_position",
        a.queue_position,
        a.queue_reason.as_deref(),
    );
    opt(&mut p, "queue_length", a.queue_length, None);
    p.insert(
        "queue_partition".into(),
        a.partitions
            .first()
            .cloned()
            .map_or(Value::Null, Value::from),
    );
    p.insert("move_would_help".into(), a.move_would_help.into());
    p.insert("advice".into(), a.advice.clone().into());
    let mut r = Map::new();
    r.insert("partitions".into(), a.partitions.clone().into());
    r.insert("nodes".into(), a.request.nodes.into());
    r.insert("cpus".into(), a.request.cpus.into());
    r.insert("cpus_per_node".into(), a.request.cpus_per_node.into());
    opt(
        &mut r,
        "memory_per_node_bytes",
        a.request.memory_per_node_bytes,
        Some("not asked: the partition's default applies"),
    );
    r.insert("gpus_per_node".into(), a.request.gpus_per_node.into());
    limit(&mut r, "time_limit_seconds", a.request.time_limit);
    p.insert("request".into(), r.into());
    p.insert(
        "partitions".into(),
        a.verdicts.iter().map(verdict).collect::<Vec<_>>().into(),
    );
    p.insert(
        "history_hints".into(),
        a.history_hints.iter().map(hint).collect::<Vec<_>>().into(),
    );
    opt(&mut p, "history_note", a.history_note.clone(), None);
    p.insert(
        "history_combined".into(),
        a.history_combined.as_ref().map_or(Value::Null, |c| {
            let mut m = Map::new();
            m.insert(
                "resources".into(),
                c.resources
                    .iter()
                    .map(|r| r.as_str())
                    .collect::<Vec<_>>()
                    .into(),
            );
            m.insert("fits_now_in".into(), c.fits_now_in.clone().into());
            m.insert("command".into(), c.command.clone().into());
            m.insert("sentence".into(), c.sentence.clone().into());
            m.into()
        }),
    );
    m.insert("pending".into(), p.into());
    let mut q = Map::new();
    q.insert("slurm_commands".into(), commands.into());
    let secs = (seconds * 1000.0).round() / 1000.0;
    q.insert(
        "seconds".into(),
        serde_json::Number::from_f64(secs).map_or(Value::Null, Value::Number),
    );
    m.insert("queried".into(), q.into());
    m.into()
}

/// The answer as plain lines: why, when, where.
pub fn lines(a: &Analysis) -> Vec<String> {
    let mut out = Vec::new();
    let reason = if a.reason_raw.is_empty() || a.reason_raw == a.reason {
        a.reason.clone()
    } else {
        a.reason_raw.replace('_', " ")
    };
    out.push(format!("Why:   {reason}: {}", a.explanation));
    let when = match (&a.expected_start, &a.expected_start_reason) {
        (Some(s), _) => format!("expected to start {s}"),
        (None, Some(r)) => format!("no expected start ({r})"),
        (None, None) => "no expected start".into(),
    };
    let place = match (a.queue_position, a.queue_length) {
        (Some(p), Some(l)) => format!(
            "; {p} of {l} pending in {}",
            a.partitions.first().map_or("its partition", String::as_str)
        ),
        _ => a
            .queue_reason
            .as_ref()
            .map_or(String::new(), |r| format!("; no place in the queue ({r})")),
    };
    out.push(format!("When:  {when}{place}"));
    let r = &a.request;
    out.push(format!(
        "Asks:  {} node(s), {} CPU(s), {} memory per node, {} GPU(s) per node, time {}",
        r.nodes,
        r.cpus,
        r.memory_per_node_bytes.map_or("default".into(), bytes),
        r.gpus_per_node,
        limit_text(r.time_limit)
    ));
    out.push("Where:".into());
    for v in &a.verdicts {
        let tag = if v.current { " (queued here)" } else { "" };
        let free = format!(
            "free now: {} CPUs, {}, {} GPUs",
            v.free.cpus.map_or("n/a".into(), |c| c.to_string()),
            v.free.memory_bytes.map_or("n/a".into(), bytes),
            v.free.gpus.map_or("n/a".into(), |g| g.to_string())
        );
        let what = if v.fits_now {
            match &v.command {
                Some(c) => format!("fits now: {c}"),
                None => "fits now".into(),
            }
        } else {
            v.obstacle_detail.clone().unwrap_or_default()
        };
        out.push(format!("  {}{tag}: {what} [{free}]", v.name));
    }
    for h in &a.history_hints {
        out.push(format!("Past:  {} ({})", h.sentence, h.command));
    }
    if let Some(c) = &a.history_combined {
        out.push(format!("Past:  {} ({})", c.sentence, c.command));
    }
    if let Some(n) = &a.history_note {
        out.push(format!("Past:  {n}"));
    }
    out.push(format!("So:    {}", a.advice));
    out
}
