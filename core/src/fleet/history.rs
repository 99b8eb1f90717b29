//! For one job's report: each card that was held back in the job, and how the other jobs that
//! used the same card (by UUID) fared — so the user knows it was the card, not their code.
//! Pure: the other jobs are given.

use serde_json::json;

use super::cards::{seen, Seen};
use super::CardJob;
use crate::analysis::summary::GpuSummary;
use crate::analysis::Finding;
use crate::units::clock;

/// One held-back card of the job and the other jobs that used it.
#[derive(Debug, Clone, PartialEq)]
pub struct CardHistory {
    /// `cuda:N` as the job addressed it.
    pub label: String,
    pub uuid: String,
    pub node: String,
    /// Other jobs with a known verdict on the card, and how many of them held it back.
    pub other_jobs: u64,
    pub other_held_back: u64,
    /// Other jobs that held it with nothing readable either way.
    pub other_unknown: u64,
    /// The earliest of those other jobs.
    pub since_unix_ms: Option<i64>,
}

/// `cards`: the job's cards with their node. `others`: every job in the window (the job itself
/// is left out by its id).
pub fn for_job(
    job_id: &str,
    cards: &[(String, GpuSummary)],
    others: &[CardJob],
) -> Vec<CardHistory> {
    let mut out = Vec::new();
    for (node, g) in cards {
        let Some(uuid) = g.uuid.as_deref() else {
            continue;
        };
        if seen(g) != Seen::HeldBack {
            continue;
        }
        let mut h = CardHistory {
            label: g.label.clone(),
            uuid: uuid.to_string(),
            node: node.clone(),
            other_jobs: 0,
            other_held_back: 0,
            other_unknown: 0,
            since_unix_ms: None,
        };
        let mut counted = std::collections::BTreeSet::new();
        for j in others.iter().filter(|j| j.job_id != job_id) {
            let Some(o) = j.gpus.iter().find(|o| o.uuid.as_deref() == Some(uuid)) else {
                continue;
            };
            if !counted.insert(j.job_id.as_str()) {
                continue;
            }
            match seen(o) {
                Seen::HeldBack => {
                    h.other_jobs += 1;
                    h.other_held_back += 1;
                }
                Seen::Healthy => h.other_jobs += 1,
                Seen::Unknown => {
                    h.other_unknown += 1;
                    continue;
                }
            }
            if let Some(t) = j.t_unix_ms() {
                h.since_unix_ms = Some(h.since_unix_ms.map_or(t, |s| s.min(t)));
            }
        }
        out.push(h);
    }
    out
}

/// The report's `gpu_card_history` finding; `None` when no other job used the card.
pub fn finding(h: &CardHistory) -> Option<Finding> {
    if h.other_jobs == 0 {
        return None;
    }
    let since = h
        .since_unix_ms
        .map(|t| format!(" since {}", clock(t)))
        .unwrap_or_default();
    let sentence = if h.other_held_back > 0 {
        format!(
            "{}: this card ({}, {}) was also held back in {} of the {} other jobs that used it{since} — the card, not your code (`slurmwatch cards` shows every card).",
            h.label, h.uuid, h.node, h.other_held_back, h.other_jobs
        )
    } else {
        format!(
            "{}: this card ({}, {}) was held back in none of the {} other jobs that used it{since}.",
            h.label, h.uuid, h.node, h.other_jobs
        )
    };
    let facts = json!({
        "card": h.label, "uuid": h.uuid, "node": h.node,
        "other_jobs": h.other_jobs, "other_jobs_held_back": h.other_held_back,
        "other_jobs_unknown": h.other_unknown, "since_unix_ms": h.since_unix_ms,
    });
    let serde_json::Value::Object(facts) = facts else {
        return None;
    };
    Some(Finding {
        code: "gpu_card_history",
        facts,
        sentence,
        site_note: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::summary::fixture::{a100, card_reading};
    use crate::collect::gpu::derive::THROTTLE_HW_SLOWDOWN;

    fn card(slow: bool) -> GpuSummary {
        let rows: Vec<_> = (0..4)
            .map(|t| {
                card_reading(
                    t,
                    if slow { 385 } else { 1410 },
                    163_000,
                    if slow { THROTTLE_HW_SLOWDOWN } else { 0 },
                )
            })
            .collect();
        GpuSummary::from_rows(&a100(2), &rows)
    }

    fn job(id: u32, slow: bool) -> CardJob {
        CardJob {
            job_id: id.to_string(),
            user: None,
            node: "sw1".into(),
            start_unix_ms: Some(i64::from(id) * 1000),
            end_unix_ms: Some(i64::from(id) * 1000 + 500),
            gpus: vec![card(slow)],
            source: String::new(),
        }
    }

    #[test]
    fn the_fifth_affected_job_hears_of_the_earlier_ones() {
        let all: Vec<CardJob> = [true, false, true, true, true, false]
            .iter()
            .enumerate()
            .map(|(k, &s)| job(10 + k as u32, s))
            .collect();
        let mine = vec![("sw1".to_string(), card(true))];
        let h = for_job("14", &mine, &all);
        assert_eq!(h.len(), 1);
        assert_eq!((h[0].other_held_back, h[0].other_jobs), (3, 5));
        assert_eq!(h[0].since_unix_ms, Some(10_000));
        let f = finding(&h[0]).unwrap();
        assert!(
            f.sentence.contains("cuda:2: this card (GPU-00000002, sw1) was also held back in 3 of the 5 other jobs that used it since"),
            "{}",
            f.sentence
        );
        // A healthy card in this job gets no line; nor does a card no other job used.
        assert!(for_job("11", &[("sw1".into(), card(false))], &all).is_empty());
        let alone = for_job("14", &mine, &all[4..5]);
        assert_eq!(alone[0].other_jobs, 0);
        assert!(finding(&alone[0]).is_none());
    }
}
