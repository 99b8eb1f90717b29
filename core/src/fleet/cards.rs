//! The cross-job verdict on cards and nodes. Per card (keyed by UUID) and per node: how many
//! jobs held it, in how many it was held back — a hardware slowdown, power brake or thermal
//! slowdown for a measured stretch, or an Xid that is the card's fault — and whether that
//! rate is above the rest of the fleet's by more than chance. Working at the power limit is a
//! healthy card doing all it may: never counted. Pure: no I/O.

use std::collections::{BTreeMap, BTreeSet};

use super::CardJob;
use crate::analysis::summary::GpuSummary;
use crate::collect::gpu::xid;
use crate::slurm::hostlist;
use crate::stats::{median, newcombe_difference, wilson};

/// The window when none is given: four weeks.
pub const DEFAULT_WINDOW_DAYS: i64 = 28;
/// The family-wise error rate over every card and node comparison (Bonferroni: each at
/// `FAMILY_ALPHA / comparisons`).
pub const FAMILY_ALPHA: f64 = 0.05;
/// A card (or node) is compared only with at least this many jobs whose verdict is known…
pub const MIN_JOBS: u64 = 5;
/// …and at least this many on the rest of the fleet (other cards' or other nodes' jobs).
pub const MIN_REST_JOBS: u64 = 10;

/// What one job saw of one card.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    /// Held back: slowed for a measured stretch (two consecutive readings), or an Xid that
    /// is the card's fault.
    HeldBack,
    /// Its throttle state was read and never held it back; no card-fault Xid.
    Healthy,
    /// No reading said either way: left out of the counts, never counted as healthy.
    Unknown,
}

/// Card-fault Xid codes of a card's summary (sorted, deduplicated).
pub fn hardware_xids(g: &GpuSummary) -> Vec<u64> {
    let set: BTreeSet<u64> = g
        .xid_events
        .iter()
        .map(|e| e.xid)
        .filter(|&x| xid::is_hardware(x))
        .collect();
    set.into_iter().collect()
}

/// The verdict on one card in one job.
pub fn seen(g: &GpuSummary) -> Seen {
    let slowed = g.minutes_throttled.is_some_and(|m| m > 0.0);
    if slowed || !hardware_xids(g).is_empty() {
        Seen::HeldBack
    } else if g.minutes_throttled.is_some() {
        Seen::Healthy
    } else {
        Seen::Unknown
    }
}

/// A rate against the rest of the fleet's, with the intervals behind the verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub rest_held_back: u64,
    pub rest_jobs: u64,
    /// 95 % Wilson intervals of the rate and of the rest's (for reading, not the verdict).
    pub wilson95: (f64, f64),
    pub rest_wilson95: (f64, f64),
    /// The two-sided level each comparison is made at: `1 − FAMILY_ALPHA / comparisons`.
    pub corrected_level: f64,
    /// The interval of (rate − rest's rate) at that level (Newcombe's, from Wilson intervals).
    pub difference_corrected: (f64, f64),
    /// The difference's interval lies wholly above 0: held back more often than the fleet.
    pub named: bool,
}

/// What held a card back while it was (over the jobs that were held back by a slowdown).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeldBackFigures {
    pub minutes: f64,
    /// Union of the throttle reasons raised while held back.
    pub reasons: Vec<String>,
    /// Medians over the held-back jobs' own medians; `None` when no job had the figure.
    pub sm_clock_mhz: Option<f64>,
    pub sm_clock_max_mhz: Option<u32>,
    pub power_watts: Option<f64>,
    pub power_limit_watts: Option<f64>,
    /// Card-fault Xid codes raised in any job.
    pub hardware_xids: Vec<u64>,
}

/// One card over the window.
#[derive(Debug, Clone, PartialEq)]
pub struct CardTally {
    pub uuid: String,
    /// The node of its latest job; `nodes` every node it was seen in (a card moved).
    pub node: String,
    pub nodes: Vec<String>,
    pub nvml_index: Option<u32>,
    pub pci_bus_id: Option<String>,
    pub name: Option<String>,
    /// Jobs with a known verdict, and how many of them held it back.
    pub jobs: u64,
    pub held_back: u64,
    pub held_back_by_slowdown: u64,
    pub held_back_by_xid: u64,
    /// Jobs that held the card but whose readings said nothing either way.
    pub unknown: u64,
    pub figures: HeldBackFigures,
    pub first_job_unix_ms: Option<i64>,
    pub last_job_unix_ms: Option<i64>,
    pub held_back_job_ids: Vec<String>,
    /// `None` when too few jobs (here or on the rest) for a verdict.
    pub comparison: Option<Comparison>,
}

impl CardTally {
    pub fn named(&self) -> bool {
        self.comparison.as_ref().is_some_and(|c| c.named)
    }
}

/// One node over the window: a job counts once, held back when any of its cards was.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTally {
    pub node: String,
    pub cards: Vec<String>,
    pub jobs: u64,
    pub held_back: u64,
    pub unknown: u64,
    pub comparison: Option<Comparison>,
}

impl NodeTally {
    pub fn named(&self) -> bool {
        self.comparison.as_ref().is_some_and(|c| c.named)
    }
}

/// The whole view.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// Entries with at least one card (job on a node).
    pub gpu_jobs: usize,
    pub cards: Vec<CardTally>,
    pub nodes: Vec<NodeTally>,
    /// Comparisons made (cards and nodes with enough jobs): the Bonferroni divisor.
    pub comparisons: usize,
    /// Cards' summaries without a UUID (cannot be followed across jobs).
    pub cards_without_uuid: usize,
}

impl Analysis {
    pub fn named_cards(&self) -> impl Iterator<Item = &CardTally> {
        self.cards.iter().filter(|c| c.named())
    }

    pub fn named_nodes(&self) -> impl Iterator<Item = &NodeTally> {
        self.nodes.iter().filter(|n| n.named())
    }

    /// The nodes to avoid (those of named cards, and named nodes), compressed as Slurm
    /// prints a hostlist; `None` when nothing is named.
    pub fn exclude(&self) -> Option<String> {
        let set: BTreeSet<&str> = self
            .named_cards()
            .map(|c| c.node.as_str())
            .chain(self.named_nodes().map(|n| n.node.as_str()))
            .collect();
        let v: Vec<&str> = set.into_iter().collect();
        (!v.is_empty()).then(|| hostlist::compress(&v))
    }
}

#[derive(Default)]
struct CardAcc {
    node: (i64, String),
    nodes: BTreeSet<String>,
    nvml_index: Option<u32>,
    pci_bus_id: Option<String>,
    name: Option<String>,
    jobs: BTreeSet<String>,
    held: BTreeSet<String>,
    by_slowdown: u64,
    by_xid: u64,
    unknown: BTreeSet<String>,
    minutes: f64,
    reasons: BTreeSet<String>,
    clock: Vec<f64>,
    clock_max: Option<u32>,
    power: Vec<f64>,
    limit: Vec<f64>,
    xids: BTreeSet<u64>,
    first: Option<i64>,
    last: Option<i64>,
}

#[derive(Default)]
struct NodeAcc {
    cards: BTreeSet<String>,
    jobs: BTreeSet<String>,
    held: BTreeSet<String>,
    unknown: BTreeSet<String>,
}

impl Seen {
    /// A job's verdict over its cards: held back on any card, else healthy on any.
    fn and(self, other: Seen) -> Seen {
        match (self, other) {
            (Seen::HeldBack, _) | (_, Seen::HeldBack) => Seen::HeldBack,
            (Seen::Healthy, _) | (_, Seen::Healthy) => Seen::Healthy,
            _ => Seen::Unknown,
        }
    }
}

impl CardAcc {
    /// One job's reading of this card, on `node` at `t` (`None`: the job's time is unknown).
    fn add(&mut self, job_id: &str, node: &str, t: Option<i64>, g: &GpuSummary) -> Seen {
        let key = t.unwrap_or(i64::MIN);
        if self.nodes.is_empty() || key >= self.node.0 {
            self.node = (key, node.to_string());
        }
        self.nodes.insert(node.to_string());
        self.nvml_index = g.nvml_index.or(self.nvml_index);
        self.pci_bus_id = g.pci_bus_id.clone().or(self.pci_bus_id.take());
        self.name = g.name.clone().or(self.name.take());
        self.clock_max = g.sm_clock_max_mhz.or(self.clock_max);
        if let Some(t) = t {
            self.first = Some(self.first.map_or(t, |f| f.min(t)));
            self.last = Some(self.last.map_or(t, |l| l.max(t)));
        }
        let s = seen(g);
        match s {
            Seen::HeldBack => {
                // Two files of one job count its figures once.
                if self.held.insert(job_id.to_string()) {
                    self.add_held_back(g);
                }
                self.jobs.insert(job_id.to_string());
            }
            Seen::Healthy => {
                self.jobs.insert(job_id.to_string());
            }
            Seen::Unknown => {
                self.unknown.insert(job_id.to_string());
            }
        }
        s
    }

    /// The figures of a job the card held back: its slowdown, or its card-fault Xids.
    fn add_held_back(&mut self, g: &GpuSummary) {
        let m = g.minutes_throttled.unwrap_or(0.0);
        if m > 0.0 {
            self.by_slowdown += 1;
            self.minutes += m;
            self.reasons.extend(g.throttle_reasons.iter().cloned());
            self.clock.extend(g.throttled_sm_clock_mhz);
            self.power.extend(g.throttled_power_watts);
            self.limit.extend(g.throttled_power_limit_watts);
        }
        let x = hardware_xids(g);
        if !x.is_empty() {
            self.by_xid += 1;
            self.xids.extend(x);
        }
    }

    fn tally(self, uuid: String) -> CardTally {
        CardTally {
            uuid,
            node: self.node.1,
            nodes: self.nodes.into_iter().collect(),
            nvml_index: self.nvml_index,
            pci_bus_id: self.pci_bus_id,
            name: self.name,
            jobs: self.jobs.len() as u64,
            held_back: self.held.len() as u64,
            held_back_by_slowdown: self.by_slowdown,
            held_back_by_xid: self.by_xid,
            // A job with a verdict on the card is not also "unknown" (two files of one job).
            unknown: self.unknown.difference(&self.jobs).count() as u64,
            figures: HeldBackFigures {
                minutes: self.minutes,
                reasons: self.reasons.into_iter().collect(),
                sm_clock_mhz: median(&self.clock),
                sm_clock_max_mhz: self.clock_max,
                power_watts: median(&self.power),
                power_limit_watts: median(&self.limit),
                hardware_xids: self.xids.into_iter().collect(),
            },
            first_job_unix_ms: self.first,
            last_job_unix_ms: self.last,
            held_back_job_ids: self.held.into_iter().collect(),
            comparison: None,
        }
    }
}

impl NodeAcc {
    /// One job's verdict over its cards on this node.
    fn add(&mut self, job_id: &str, s: Seen) {
        match s {
            Seen::HeldBack => {
                self.jobs.insert(job_id.to_string());
                self.held.insert(job_id.to_string());
            }
            Seen::Healthy => {
                self.jobs.insert(job_id.to_string());
            }
            Seen::Unknown => {
                self.unknown.insert(job_id.to_string());
            }
        }
    }

    fn tally(self, node: String) -> NodeTally {
        NodeTally {
            node,
            cards: self.cards.into_iter().collect(),
            jobs: self.jobs.len() as u64,
            held_back: self.held.len() as u64,
            unknown: self.unknown.difference(&self.jobs).count() as u64,
            comparison: None,
        }
    }
}

/// The tallies and verdicts over `jobs` (already limited to the window).
pub fn analyse(jobs: &[CardJob]) -> Analysis {
    let mut cards: BTreeMap<String, CardAcc> = BTreeMap::new();
    let mut nodes: BTreeMap<String, NodeAcc> = BTreeMap::new();
    let mut without_uuid = 0;
    let mut gpu_jobs = 0;
    for j in jobs.iter().filter(|j| !j.gpus.is_empty()) {
        gpu_jobs += 1;
        let t = j.t_unix_ms();
        let n = nodes.entry(j.node.clone()).or_default();
        let mut job_seen = Seen::Unknown;
        for g in &j.gpus {
            let Some(uuid) = g.uuid.clone() else {
                without_uuid += 1;
                continue;
            };
            n.cards.insert(uuid.clone());
            let s = cards.entry(uuid).or_default().add(&j.job_id, &j.node, t, g);
            job_seen = job_seen.and(s);
        }
        n.add(&j.job_id, job_seen);
    }
    let mut card_tallies: Vec<CardTally> = cards.into_iter().map(|(u, c)| c.tally(u)).collect();
    let mut node_tallies: Vec<NodeTally> = nodes.into_iter().map(|(n, a)| a.tally(n)).collect();
    let comparisons = compare_with_the_rest(&mut card_tallies, &mut node_tallies);
    rank(&mut card_tallies, &mut node_tallies);
    Analysis {
        gpu_jobs,
        cards: card_tallies,
        nodes: node_tallies,
        comparisons,
        cards_without_uuid: without_uuid,
    }
}

/// Compares each card and node with enough jobs against the rest of the fleet, at the
/// family's alpha shared over the comparisons made; returns how many were made.
fn compare_with_the_rest(cards: &mut [CardTally], nodes: &mut [NodeTally]) -> usize {
    // Which comparisons are made decides the correction, so count them first.
    let (ck, cn) = totals(cards.iter().map(|c| (c.held_back, c.jobs)));
    let (nk, nn) = totals(nodes.iter().map(|n| (n.held_back, n.jobs)));
    let eligible = |n: u64, rest: u64| n >= MIN_JOBS && rest >= MIN_REST_JOBS;
    let comparisons = cards
        .iter()
        .filter(|c| eligible(c.jobs, cn - c.jobs))
        .count()
        + nodes
            .iter()
            .filter(|n| eligible(n.jobs, nn - n.jobs))
            .count();
    let alpha = FAMILY_ALPHA / comparisons.max(1) as f64;
    for c in cards.iter_mut() {
        if eligible(c.jobs, cn - c.jobs) {
            c.comparison = Some(compare(
                c.held_back,
                c.jobs,
                ck - c.held_back,
                cn - c.jobs,
                alpha,
            ));
        }
    }
    for n in nodes.iter_mut() {
        if eligible(n.jobs, nn - n.jobs) {
            n.comparison = Some(compare(
                n.held_back,
                n.jobs,
                nk - n.held_back,
                nn - n.jobs,
                alpha,
            ));
        }
    }
    comparisons
}

/// Named first, then the highest rate, then the UUID or node name (a stable order).
fn rank(cards: &mut [CardTally], nodes: &mut [NodeTally]) {
    let rate = |k: u64, n: u64| if n == 0 { 0.0 } else { k as f64 / n as f64 };
    cards.sort_by(|a, b| {
        b.named()
            .cmp(&a.named())
            .then(rate(b.held_back, b.jobs).total_cmp(&rate(a.held_back, a.jobs)))
            .then(a.uuid.cmp(&b.uuid))
    });
    nodes.sort_by(|a, b| {
        b.named()
            .cmp(&a.named())
            .then(rate(b.held_back, b.jobs).total_cmp(&rate(a.held_back, a.jobs)))
            .then(a.node.cmp(&b.node))
    });
}

fn totals(it: impl Iterator<Item = (u64, u64)>) -> (u64, u64) {
    it.fold((0, 0), |(k, n), (a, b)| (k + a, n + b))
}

fn compare(k: u64, n: u64, rk: u64, rn: u64, alpha: f64) -> Comparison {
    let difference_corrected = newcombe_difference(k, n, rk, rn, alpha);
    Comparison {
        rest_held_back: rk,
        rest_jobs: rn,
        wilson95: wilson(k, n, FAMILY_ALPHA),
        rest_wilson95: wilson(rk, rn, FAMILY_ALPHA),
        corrected_level: 1.0 - alpha,
        difference_corrected,
        named: difference_corrected.0 > 0.0,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::analysis::summary::fixture::{a100, card_reading};
    use crate::analysis::summary::XidEvent;
    use crate::collect::gpu::derive::{THROTTLE_HW_SLOWDOWN, THROTTLE_SW_POWER_CAP};

    /// A card's summary from readings: the field record's slowdown, a card at its power
    /// cap, or a healthy card; `n` readings 1 s apart.
    fn summary(i: u32, how: &str, n: i64) -> GpuSummary {
        let rows: Vec<_> = (0..n)
            .map(|t| match how {
                "slow" => card_reading(t, 385, 163_000, THROTTLE_HW_SLOWDOWN),
                "capped" => card_reading(t, 1410, 398_000, THROTTLE_SW_POWER_CAP),
                _ => card_reading(t, 1410, 250_000, 0),
            })
            .collect();
        GpuSummary::from_rows(&a100(i), &rows)
    }

    fn job(id: u32, node: &str, gpus: Vec<GpuSummary>) -> CardJob {
        CardJob {
            job_id: id.to_string(),
            user: Some("alice".into()),
            node: node.into(),
            start_unix_ms: Some(1_700_000_000_000 + i64::from(id) * 60_000),
            end_unix_ms: Some(1_700_000_000_000 + i64::from(id) * 60_000 + 30_000),
            gpus,
            source: format!("/s/{id}.sqlite"),
        }
    }

    /// The scene: six jobs on a 4-card node; card 2 held back in four of them, card 1
    /// at its power cap in every one, the others healthy.
    pub(crate) fn six_jobs() -> Vec<CardJob> {
        (0..6)
            .map(|k| {
                let slow = [0, 2, 3, 4].contains(&k);
                job(
                    100 + k,
                    "sw1",
                    (0..4)
                        .map(|i| match i {
                            1 => summary(i, "capped", 5),
                            2 if slow => summary(i, "slow", 5),
                            _ => summary(i, "healthy", 5),
                        })
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn a_card_held_back_in_4_of_6_is_named_and_the_power_limited_one_never() {
        let a = analyse(&six_jobs());
        assert_eq!(a.gpu_jobs, 6);
        assert_eq!(
            a.comparisons, 4,
            "four cards, one node (no rest to compare it with)"
        );
        let named: Vec<&str> = a.named_cards().map(|c| c.uuid.as_str()).collect();
        assert_eq!(named, ["GPU-00000002"]);
        let c = &a.cards[0];
        assert_eq!((c.held_back, c.jobs, c.unknown), (4, 6, 0));
        assert_eq!((c.held_back_by_slowdown, c.held_back_by_xid), (4, 0));
        assert_eq!(c.figures.sm_clock_mhz, Some(385.0));
        assert_eq!(c.figures.sm_clock_max_mhz, Some(1785));
        assert_eq!(c.figures.power_watts, Some(163.0));
        assert_eq!(c.figures.power_limit_watts, Some(400.0));
        assert_eq!(c.figures.reasons, ["hardware_slowdown"]);
        assert_eq!(c.held_back_job_ids, ["100", "102", "103", "104"]);
        let cmp = c.comparison.as_ref().unwrap();
        assert_eq!((cmp.rest_held_back, cmp.rest_jobs), (0, 18));
        assert!((cmp.corrected_level - 0.9875).abs() < 1e-12);
        assert!(cmp.difference_corrected.0 > 0.0);
        let capped = a.cards.iter().find(|c| c.uuid == "GPU-00000001").unwrap();
        assert_eq!((capped.held_back, capped.jobs), (0, 6));
        assert!(!capped.named());
        assert_eq!(a.exclude().as_deref(), Some("sw1"));
        let node = &a.nodes[0];
        assert_eq!((node.held_back, node.jobs), (4, 6));
        assert!(node.comparison.is_none(), "a fleet of one node has no rest");
    }

    /// Every card always at its power limit, over many jobs: nothing is held back.
    #[test]
    fn a_fleet_at_its_power_limit_names_nothing() {
        let jobs: Vec<CardJob> = (0..20)
            .map(|k| job(k, "sw1", (0..4).map(|i| summary(i, "capped", 5)).collect()))
            .collect();
        let a = analyse(&jobs);
        assert!(a.cards.iter().all(|c| c.held_back == 0 && c.jobs == 20));
        assert_eq!(a.named_cards().count(), 0);
        assert_eq!(a.exclude(), None);
    }

    /// Every card held back now and then at the same rate (1 in 6): no outlier, none named.
    #[test]
    fn a_fleet_without_an_outlier_names_nothing() {
        let jobs: Vec<CardJob> = (0..12)
            .map(|k| {
                let node = if k % 2 == 0 { "sw1" } else { "sw2" };
                job(
                    k,
                    node,
                    (0..4)
                        .map(|i| {
                            let i = i + if node == "sw2" { 4 } else { 0 };
                            let how = if (k / 2 + i) % 6 == 0 {
                                "slow"
                            } else {
                                "healthy"
                            };
                            summary(i, how, 5)
                        })
                        .collect(),
                )
            })
            .collect();
        let a = analyse(&jobs);
        assert!(
            a.cards.iter().all(|c| c.held_back == 1 && c.jobs == 6),
            "{a:#?}"
        );
        assert_eq!(
            a.comparisons, 8,
            "two nodes of 6 jobs: too few on the rest to compare"
        );
        assert_eq!(a.named_cards().count() + a.named_nodes().count(), 0);
    }

    /// Too few jobs on a card for a verdict: counted, not compared, not named (3 of 3 is
    /// the same card held back three times, but three jobs cannot tell it from chance here).
    #[test]
    fn too_few_jobs_are_counted_but_not_compared() {
        let mut jobs = six_jobs();
        for k in 0..3 {
            jobs.push(job(200 + k, "sw2", vec![summary(9, "slow", 5)]));
        }
        let a = analyse(&jobs);
        let c = a.cards.iter().find(|c| c.uuid == "GPU-00000009").unwrap();
        assert_eq!((c.held_back, c.jobs, &c.node[..]), (3, 3, "sw2"));
        assert!(c.comparison.is_none());
        assert!(!c.named());
    }

    /// A single held-back reading spans no time; an unreadable card is unknown, never healthy;
    /// a card-fault Xid holds a card back, an Xid of the job's own code does not.
    #[test]
    fn verdicts_per_job() {
        assert_eq!(seen(&summary(0, "slow", 1)), Seen::Healthy);
        assert_eq!(seen(&summary(0, "slow", 2)), Seen::HeldBack);
        assert_eq!(seen(&summary(0, "capped", 5)), Seen::Healthy);
        let mut g = summary(0, "healthy", 5);
        g.minutes_throttled = None;
        assert_eq!(seen(&g), Seen::Unknown);
        g.xid_events = vec![XidEvent::new(1, 13)];
        assert_eq!(seen(&g), Seen::Unknown, "Xid 13 is the job's own kernel");
        g.xid_events.push(XidEvent::new(2, 79));
        assert_eq!(seen(&g), Seen::HeldBack);
        assert_eq!(hardware_xids(&g), [79]);
    }

    /// Unknown jobs are reported beside the counts, not in them.
    #[test]
    fn unknown_jobs_stay_out_of_the_rate() {
        let mut jobs = six_jobs();
        let mut g = summary(2, "healthy", 5);
        g.minutes_throttled = None;
        jobs.push(job(300, "sw1", vec![g]));
        let a = analyse(&jobs);
        let c = a.cards.iter().find(|c| c.uuid == "GPU-00000002").unwrap();
        assert_eq!((c.held_back, c.jobs, c.unknown), (4, 6, 1));
    }
}
