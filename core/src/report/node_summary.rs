//! A node's file as the summary the controller stores, and back: [`NodeSummary`] made from a
//! report's [`NodeRecording`] (and from a node's spool for the controller, [`from_spool`]), and a
//! stored summary read back as a recording without rows. The string's codec is
//! `analysis::admin_comment`; this is the report's side of it, which knows [`NodeRecording`].

use std::path::Path;

use super::{NodeRecording, Origin};
use crate::analysis::admin_comment::{Incarnation, NodeSummary, MAX_EVENTS};

// An inherent impl beside the report's `NodeRecording` it converts, not beside the codec's type:
// the codec sits below the report and must not know it.
impl NodeSummary {
    /// From a node's file as the report loaded it.
    pub fn from_recording(r: &NodeRecording) -> NodeSummary {
        let mut events = r.events.clone();
        // The latest events are the ones that explain an end (a kill, a failed step).
        if events.len() > MAX_EVENTS {
            events.drain(..events.len() - MAX_EVENTS);
        }
        NodeSummary {
            meta: r.meta.clone(),
            steps: r.steps.clone(),
            events,
            step_figures: r.step_figures.clone(),
            summary: r.summary.clone(),
        }
    }

    /// A recording with no rows: figures from the summary, no charts.
    pub fn into_recording(self) -> NodeRecording {
        NodeRecording {
            path: format!("slurmdbd:AdminComment/{}", self.meta.node).into(),
            origin: Origin::SlurmdbdSummary,
            meta: self.meta,
            steps: self.steps,
            events: self.events,
            job_rows: Vec::new(),
            summary: self.summary,
            summary_stored: true,
            step_figures: self.step_figures,
            phases: Vec::new(),
            progress: Default::default(),
        }
    }
}

/// What a node's spool holds for one run of a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Spooled {
    Recorded(Box<NodeSummary>),
    /// No file for the job.
    NotRecorded,
    /// A file of an earlier job with the same id (one sentence: how it differs).
    Earlier(String),
}

/// The summary of run `want` of job `job_id` from its file in this node's `spool`, for the
/// controller to collect; `Err` (one sentence) when its file is there but cannot be read
/// now. Read-only, through the hardened reader (this runs as root).
pub fn from_spool(spool: &Path, job_id: u32, want: Incarnation) -> Result<Spooled, String> {
    let path = crate::locate::live_file(spool, job_id);
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Spooled::NotRecorded),
        Err(e) => return Err(format!("{}: {e}", path.display())),
        Ok(_) => {}
    }
    let recording = NodeRecording::load(&path).map_err(|e| e.to_string())?;
    if recording.meta.job_id != u64::from(job_id) {
        return Err(format!(
            "{} records job {}, not {job_id}",
            path.display(),
            recording.meta.job_id
        ));
    }
    if let Some(why) = want.mismatch(&recording.meta) {
        return Ok(Spooled::Earlier(why));
    }
    Ok(Spooled::Recorded(Box::new(NodeSummary::from_recording(
        &recording,
    ))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::admin_comment::tests::node;

    const ANY_RUN: Incarnation = Incarnation {
        uid: 1000,
        start_unix: 0,
    };

    /// The node endpoint runs as root: a spool entry that is a symlink (to a file the root
    /// process must not read for a caller) or a FIFO (that would block an open) is refused,
    /// within a bound, and never answered as a summary.
    #[test]
    fn the_endpoint_refuses_a_symlink_or_fifo_in_the_spool() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("elsewhere.sqlite");
        std::fs::write(&target, b"not ours").unwrap();
        std::os::unix::fs::symlink(&target, d.path().join("41.sqlite")).unwrap();
        let fifo = std::ffi::CString::new(d.path().join("42.sqlite").to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        let spool = d.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send((
                from_spool(&spool, 41, ANY_RUN),
                from_spool(&spool, 42, ANY_RUN),
            ));
        });
        let (link, fifo) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("answered within the bound");
        assert!(link.is_err(), "{link:?}");
        assert!(fifo.is_err(), "{fifo:?}");
        assert_eq!(from_spool(d.path(), 43, ANY_RUN), Ok(Spooled::NotRecorded));
    }

    #[test]
    fn a_node_summary_becomes_a_recording_without_rows() {
        let r = node("n1").into_recording();
        assert_eq!(r.origin, Origin::SlurmdbdSummary);
        assert!(r.job_rows.is_empty());
        assert_eq!(r.summary.peak_working_set_bytes, Some(3 << 30));
        assert_eq!(NodeSummary::from_recording(&r), node("n1"));
    }

    /// Attack 8 of issue 37 without Slurm: a spool file an earlier job with this id left
    /// (another user's, or the same user's earlier run) is not served for the new run.
    #[test]
    fn a_file_of_an_earlier_job_with_the_id_is_not_this_runs() {
        let spool = tempfile::tempdir().unwrap();
        let meta = node("n1").meta;
        let w = crate::store::Writer::create(
            &spool.path().join(crate::store::paths::live_name(42)),
            &meta,
        )
        .unwrap();
        w.close().unwrap();
        let started = meta.started_unix_ms / 1000;
        let this_run = Incarnation {
            uid: 1000,
            start_unix: started,
        };
        assert!(matches!(
            from_spool(spool.path(), 42, this_run),
            Ok(Spooled::Recorded(n)) if n.meta == meta
        ));
        // A clock a little behind the controller's still finds its own file.
        let lagging = Incarnation {
            start_unix: started + 3,
            ..this_run
        };
        assert!(matches!(
            from_spool(spool.path(), 42, lagging),
            Ok(Spooled::Recorded(_))
        ));
        let other_user = Incarnation {
            uid: 1001,
            ..this_run
        };
        match from_spool(spool.path(), 42, other_user) {
            Ok(Spooled::Earlier(why)) => assert!(why.contains("uid 1000"), "{why}"),
            other => panic!("{other:?}"),
        }
        let later_run = Incarnation {
            start_unix: started + 3600,
            ..this_run
        };
        assert!(matches!(
            from_spool(spool.path(), 42, later_run),
            Ok(Spooled::Earlier(_))
        ));
        assert_eq!(
            from_spool(spool.path(), 43, this_run),
            Ok(Spooled::NotRecorded)
        );
    }
}
