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

    pub fn interval_seconds(&self) -> Option<u32> {
        self.feeds().find_map(Feed::interval_seconds)
    }

    /// The whole job: every node merged (`selected == None`), or one node's own snapshot
    /// (with the job's `nodes[]` beside it, so the view still says who reports).
    pub fn snapshot(&self, facts: &JobFacts, selected: Option<usize>) -> Snapshot {
        let per_node: Vec<(String, Result<Snapshot, String>)> = self
            .nodes
            .iter()
            .map(|(n, f)| {
                let facts = JobFacts {
                    node: Some(n.clone()),
                    ..facts.clone()
                };
                (
                    n.clone(),
                    f.as_ref()
                        .map(|f| f.snapshot(&facts))
                        .map_err(String::clone),
                )
            })
            .collect();
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
}
