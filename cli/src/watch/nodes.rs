//! The job's feeds, one per node (a multi-node job records one file per node), seen as one
//! job: the merged snapshot (`snapshot_merge`) or one node's own, for the dashboard's node
//! switcher. A single-node job is one feed with its one `nodes[]` entry.

use slurmwatch_core::snapshot::{JobFacts, Snapshot};
use slurmwatch_core::snapshot_merge;

use super::feed::Feed;

pub struct Feeds {
    /// Per node: its feed, or why there is none (no file reachable from here).
    nodes: Vec<(String, Result<Feed, String>)>,
}

impl Feeds {
    pub fn single(node: Option<String>, feed: Feed) -> Feeds {
        let node = node
            .or_else(|| feed.meta().map(|m| m.node.clone()))
            .unwrap_or_default();
        Feeds {
            nodes: vec![(node, Ok(feed))],
        }
    }

    /// At least one node must have a feed (the caller checks).
    pub fn per_node(nodes: Vec<(String, Result<Feed, String>)>) -> Feeds {
        Feeds { nodes }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn node_name(&self, i: usize) -> Option<&str> {
        self.nodes.get(i).map(|(n, _)| n.as_str())
    }

    fn feeds_mut(&mut self) -> impl Iterator<Item = &mut Feed> {
        self.nodes.iter_mut().filter_map(|(_, f)| f.as_mut().ok())
    }

    fn feeds(&self) -> impl Iterator<Item = &Feed> {
        self.nodes.iter().filter_map(|(_, f)| f.as_ref().ok())
    }

    /// Reads what is new on every node. `Ok(true)` when any node had something new; an
    /// error only when every node failed (one node's failure leaves it not reporting).
    pub fn refresh(&mut self) -> Result<bool, String> {
        let mut fresh = false;
        let mut first_err = None;
        let mut any_ok = false;
        for f in self.feeds_mut() {
            match f.refresh() {
                Ok(n) => {
                    any_ok = true;
                    fresh |= n;
                }
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match (any_ok, first_err) {
            (false, Some(e)) => Err(e),
            _ => Ok(fresh),
        }
    }

    /// Follows the job's log for its throughput: where its output goes is asked of the
    /// controller once (nothing asked without a recording: only a file notes the sizes).
    pub fn follow_log(&mut self) {
        let Some(m) = self.feeds().find_map(Feed::meta) else {
            return;
        };
        let Ok(job_id) = u32::try_from(m.job_id) else {
            return;
        };
        let log = super::throughput::JobLog::ask(job_id, Some(m.uid));
        for f in self.feeds_mut() {
            f.follow_log(&log);
        }
    }

    pub fn settle(&mut self, gap: std::time::Duration) -> Result<(), String> {
        for f in self.feeds_mut() {
            f.settle(gap)?;
        }
        Ok(())
    }

    /// Every node's recording has ended.
    pub fn looks_ended(&self) -> bool {
        self.feeds().all(Feed::looks_ended)
    }

    /// Some node's file has no end row yet (its plugin may still commit one).
    pub fn awaits_end_row(&self) -> bool {
        self.feeds().any(Feed::awaits_end_row)
    }

    pub fn interval_seconds(&self) -> Option<u32> {
        self.feeds().find_map(Feed::interval_seconds)
    }

    /// The whole job: every node merged (`selected == None`), or one node's own snapshot
    /// (with the job's `nodes[]` beside it, so the view still says who reports).
    pub fn snapshot(&self, facts: &JobFacts, selected: Option<usize>) -> Snapshot {
        combine(facts, self.each_node(facts, Feed::snapshot), selected)
    }

    /// The whole job as of every stored row newer than `after_ms`, oldest first, at most
    /// `max` of them (the rest come on the next call): one snapshot per row time of any
    /// node, each node as of its own last row by then. `None` when no node stores rows
    /// (direct readings and sstat: one reading per look).
    pub fn snapshots_after(
        &self,
        facts: &JobFacts,
        after_ms: Option<i64>,
        max: usize,
    ) -> Option<Vec<Snapshot>> {
        let mut times: Vec<i64> = Vec::new();
        let mut stored = false;
        for f in self.feeds() {
            if let Some(t) = f.row_times_after(after_ms) {
                stored = true;
                times.extend(t);
            }
        }
        if !stored {
            return None;
        }
        times.sort_unstable();
        times.dedup();
        times.truncate(max);
        let mut per_node: Vec<_> = self
            .each_node(facts, |f, facts| f.snapshots_at(facts, &times))
            .into_iter()
            .map(|(n, s)| (n, s.map(Vec::into_iter)))
            .collect();
        let mut out = Vec::with_capacity(times.len());
        for _ in &times {
            let at: Vec<(String, Result<Snapshot, String>)> = per_node
                .iter_mut()
                .map(|(n, s)| {
                    let s = s.as_mut().map_err(|e| e.clone());
                    let s = s.and_then(|it| it.next().ok_or_else(String::new));
                    (n.clone(), s)
                })
                .collect();
            out.push(combine(facts, at, None));
        }
        Some(out)
    }

    /// Each node's snapshots by `take`, with the node's name in its facts, or why it has none.
    fn each_node<T>(
        &self,
        facts: &JobFacts,
        take: impl Fn(&Feed, &JobFacts) -> T,
    ) -> Vec<(String, Result<T, String>)> {
        self.nodes
            .iter()
            .map(|(n, f)| {
                let facts = JobFacts {
                    node: Some(n.clone()),
                    ..facts.clone()
                };
                let s = f.as_ref().map(|f| take(f, &facts)).map_err(String::clone);
                (n.clone(), s)
            })
            .collect()
    }
}

/// Every node merged, or node `selected`'s own snapshot with the job's `nodes[]` beside it.
fn combine(
    facts: &JobFacts,
    per_node: Vec<(String, Result<Snapshot, String>)>,
    selected: Option<usize>,
) -> Snapshot {
    let merged = snapshot_merge::merge(&per_node);
    let one = selected
        .and_then(|i| per_node.get(i))
        .and_then(|(_, s)| s.as_ref().ok());
    match (one, merged) {
        (Some(s), Some(m)) => Snapshot {
            nodes: m.nodes,
            nodes_reporting: m.nodes_reporting,
            ..s.clone()
        },
        (_, Some(m)) => m,
        // Unreachable by construction (one feed at least); an empty snapshot otherwise.
        (_, None) => slurmwatch_core::snapshot::from_rows(
            slurmwatch_core::snapshot::SnapshotSource::PluginFile,
            None,
            facts,
            &[],
            false,
        ),
    }
}
