//! The runs of a window, gathered one job at a time as sacct prints them and analysed at the
//! end: each job becomes a [`Run`] (its recording attached), then a [`Brief`] kept in place
//! of it, so memory grows by a Brief and a job name per run and not by sacct's text.
//!
//! A job listed by two chunks of a window is kept once, the later listing in the earlier's
//! place (the order sacct first listed it in breaks ties between runs submitted in the same
//! second, as it did when the whole answer was held).

use std::path::PathBuf;
use std::sync::Arc;

use super::{workload, workload_name, Analysis, Brief, Recordings, Run, SlurmdbdFigures};
use crate::fasthash::FastMap;
use crate::slurm::job_id::Key;
use crate::slurm::sacct::JobAccounting;

/// A job's key in a window ([`JobAccounting::key`]): its own id as a number (a JobIDRaw, always),
/// any other spelling as text.
#[derive(Default)]
struct Seen {
    ids: FastMap<u32, u32>,
    other: FastMap<String, u32>,
}

impl Seen {
    fn slot(&mut self, key: Key<'_>, next: u32) -> (u32, bool) {
        let e = match key {
            Key::Raw(n) => self.ids.entry(n),
            Key::Printed(key) => return Self::other(&mut self.other, key, next),
        };
        let fresh = matches!(e, std::collections::hash_map::Entry::Vacant(_));
        (*e.or_insert(next), fresh)
    }

    fn other(m: &mut FastMap<String, u32>, key: &str, next: u32) -> (u32, bool) {
        match m.get(key) {
            Some(&i) => (i, false),
            None => {
                m.insert(key.to_string(), next);
                (next, true)
            }
        }
    }
}

/// What a run is grouped by, and its job name (for `names_covered`).
struct Slot {
    workload: u32,
    name: Box<str>,
    /// A recorded file was attached.
    filed: bool,
    /// The summary came from slurmdbd (sacct's AdminComment): no file looked for.
    from_slurmdbd: bool,
}

impl Slot {
    /// A slot reserved for a listing, filled by `put`.
    fn empty() -> Slot {
        Slot {
            workload: 0,
            name: Box::from(""),
            filed: false,
            from_slurmdbd: false,
        }
    }
}

/// The runs gathered so far.
pub struct Runs {
    /// `None`: listed, not finished (yet): no run.
    briefs: Vec<Option<Brief>>,
    slots: Vec<Slot>,
    seen: Seen,
    workloads: Vec<(Option<String>, String)>,
    workload_ids: FastMap<(Option<String>, String), u32>,
    states: FastMap<String, Arc<str>>,
    nodes: FastMap<Vec<String>, Arc<[Arc<str>]>>,
    node_names: FastMap<String, Arc<str>>,
    recordings: Option<Recordings>,
}

impl Runs {
    /// With the directories recordings are looked for in, or `None` for sacct alone.
    pub fn new(recording_dirs: Option<&[PathBuf]>) -> Runs {
        Runs {
            briefs: Vec::new(),
            slots: Vec::new(),
            seen: Seen::default(),
            workloads: Vec::new(),
            workload_ids: FastMap::default(),
            states: FastMap::default(),
            nodes: FastMap::default(),
            node_names: FastMap::default(),
            recordings: recording_dirs.map(Recordings::new),
        }
    }

    /// One job as sacct listed it. A job listed again (by the next chunk) replaces its
    /// earlier listing; one not finished is counted as such, not analysed. Returns whether
    /// the job is new (what a progress count counts: not its second listing).
    pub fn add_record(&mut self, r: &JobAccounting) -> bool {
        self.add_prepared(r, Run::prepare(r))
    }

    /// [`add_record`](Self::add_record) with [`Run::prepare`]'s answer for `r` (made on
    /// another thread: `Query::window_each_prepared`).
    pub fn add_prepared(&mut self, r: &JobAccounting, prepared: Option<SlurmdbdFigures>) -> bool {
        let (i, fresh) = self.seen.slot(r.key(), self.briefs.len() as u32);
        let i = i as usize;
        if fresh {
            self.briefs.push(None);
            self.slots.push(Slot::empty());
        }
        match Run::from_prepared(r, prepared) {
            Some(run) => self.put(i, run),
            None => self.briefs[i] = None,
        }
        fresh
    }

    /// A finished run, kept whatever it is a duplicate of.
    pub fn push(&mut self, run: Run) {
        self.briefs.push(None);
        self.slots.push(Slot::empty());
        self.put(self.briefs.len() - 1, run);
    }

    fn put(&mut self, i: usize, mut run: Run) {
        // The summary in slurmdbd first: a run that has one opens no file.
        let from_slurmdbd = run.recorded.as_ref().is_some_and(|r| r.summary_in_slurmdbd);
        let filed = !from_slurmdbd && self.recordings.as_mut().is_some_and(|f| f.attach(&mut run));
        let key = (run.user.clone(), workload_name(&run.name));
        let workload = match self.workload_ids.get(&key) {
            Some(&w) => w,
            None => {
                let w = self.workloads.len() as u32;
                self.workloads.push(key.clone());
                self.workload_ids.insert(key, w);
                w
            }
        };
        let state = match self.states.get(run.state.as_str()) {
            Some(s) => s.clone(),
            None => {
                let s: Arc<str> = Arc::from(run.state.as_str());
                self.states.insert(run.state.clone(), s.clone());
                s
            }
        };
        let nodes = match self.nodes.get(run.node_names.as_slice()) {
            Some(n) => n.clone(),
            None => {
                let names = &mut self.node_names;
                let n: Arc<[Arc<str>]> = run
                    .node_names
                    .iter()
                    .map(|n| {
                        names
                            .entry(n.clone())
                            .or_insert_with(|| Arc::from(n.as_str()))
                            .clone()
                    })
                    .collect();
                self.nodes.insert(run.node_names.clone(), n.clone());
                n
            }
        };
        self.briefs[i] = Some(Brief::new(&run, state, nodes));
        self.slots[i] = Slot {
            workload,
            name: run.name.into_boxed_str(),
            filed,
            from_slurmdbd,
        };
    }

    /// Jobs listed that had not finished.
    pub fn unfinished(&self) -> usize {
        self.briefs.iter().filter(|b| b.is_none()).count()
    }

    /// Finished runs.
    pub fn len(&self) -> usize {
        self.briefs.len() - self.unfinished()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Runs with a recorded file attached.
    pub fn recorded_files(&self) -> usize {
        self.briefs
            .iter()
            .zip(&self.slots)
            .filter(|(b, s)| b.is_some() && s.filed)
            .count()
    }

    /// Runs whose summary came from slurmdbd.
    pub fn slurmdbd_summaries(&self) -> usize {
        self.briefs
            .iter()
            .zip(&self.slots)
            .filter(|(b, s)| b.is_some() && s.from_slurmdbd)
            .count()
    }

    /// Groups, sizes, ranks and looks for patterns.
    pub fn finish(self) -> Analysis {
        let Runs {
            briefs,
            slots,
            workloads: keys,
            ..
        } = self;
        // The listed-but-unfinished slots dropped in place: a second vector of a million
        // runs would double the peak.
        let mut live = briefs.iter().map(Option::is_some);
        let mut slots = slots;
        slots.retain(|_| live.next().unwrap_or(false));
        // `filter_map`, not `flatten`: std collects it into the same allocation.
        #[allow(clippy::filter_map_identity)]
        let runs: Vec<Brief> = briefs.into_iter().filter_map(|b| b).collect();
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); keys.len()];
        for (i, s) in slots.iter().enumerate() {
            groups[s.workload as usize].push(i);
        }
        let mut workloads = Vec::new();
        for (key, mut idx) in keys.into_iter().zip(groups) {
            if idx.is_empty() {
                continue;
            }
            // Oldest first; stable, so runs of the same second keep sacct's order.
            idx.sort_by_key(|&i| runs[i].t());
            let rs: Vec<&Brief> = idx.iter().map(|&i| &runs[i]).collect();
            let names: Vec<&str> = idx.iter().map(|&i| &*slots[i].name).collect();
            workloads.push(workload(key, names, &rs, idx));
        }
        drop(slots);
        super::rank(workloads, runs)
    }
}
