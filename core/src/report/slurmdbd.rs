//! The job's summary as slurmdbd keeps it: one compact, versioned string in the job's
//! `AdminComment` (jobstats' convention), readable with `sacct -o AdminComment` from any login
//! node for as long as accounting keeps the job.
//!
//! Format: `SW1:` then unpadded base32 (RFC 4648, written in lower case) of the raw-deflated
//! JSON of a [`JobSummaryRecord`] (one [`NodeSummary`] per recorded node). The prefix names
//! the format; the JSON carries the epilog's `summary_version`, so a newer epilog's keys are
//! ignored by an older reader and an older summary is read with the defaults of what it
//! lacks. Base32, not base64: `sacctmgr modify job … set AdminComment=` lowercases the value
//! it stores (seen on 22.05.8, quoted or not), which destroys base64; base32 read
//! case-insensitively survives it, and keeps `|` and the unit separator out of sacct's
//! columns.
//!
//! Decoding is bounded ([`MAX_JSON_BYTES`] after inflating): AdminComment is writable by
//! admins and other tools, so a string that is not ours, or is damaged, is refused with one
//! sentence and never trusted.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Origin, Recording, StepFigures};
use crate::analysis::Summary;
use crate::store::{Event, JobMeta, StepInfo};

/// The prefix of our AdminComment strings (format 1).
pub const PREFIX: &str = "SW1:";
/// The largest encoded string written: slurmdbd keeps AdminComment in a MariaDB `TEXT`
/// column (64 KiB); a summary is normally 1–3 KB.
pub const MAX_ENCODED_BYTES: usize = 60_000;
/// The most JSON a decoder inflates (a compressed bomb stops here).
pub const MAX_JSON_BYTES: u64 = 4 << 20;
/// Events kept per node: the report reads OOM kills, step ends and errors from them.
pub const MAX_EVENTS: usize = 100;

/// What one node recorded, as much of its file as the report needs without the rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSummary {
    pub meta: JobMeta,
    pub steps: Vec<StepInfo>,
    #[serde(default)]
    pub events: Vec<Event>,
    #[serde(default)]
    pub step_figures: BTreeMap<String, StepFigures>,
    pub summary: Summary,
}

/// The whole AdminComment: every recorded node of one job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobSummaryRecord {
    pub job_id: String,
    pub nodes: Vec<NodeSummary>,
}

/// Why an AdminComment could not be read as ours. Each `Display` is one sentence.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    #[error("the AdminComment is empty")]
    Empty,
    #[error("the AdminComment is not a slurmwatch summary (another tool's, e.g. jobstats' JS1:)")]
    NotOurs,
    #[error("the slurmwatch summary in the AdminComment is damaged ({0})")]
    Damaged(String),
}

impl NodeSummary {
    /// From a node's file as the report loaded it.
    pub fn from_recording(r: &Recording) -> NodeSummary {
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
    pub fn into_recording(self) -> Recording {
        Recording {
            path: format!("slurmdbd:AdminComment/{}", self.meta.node).into(),
            origin: Origin::SlurmdbdSummary,
            meta: self.meta,
            steps: self.steps,
            events: self.events,
            job_rows: Vec::new(),
            summary: self.summary,
            summary_stored: true,
            step_figures: self.step_figures,
        }
    }
}

/// Which run of a job id the controller asks for: the job's uid and the time Slurm started
/// it (EpilogSlurmctld's `SLURM_JOB_UID`, `SLURM_JOB_START_TIME`). A job id is reused after
/// a controller loses or restores its state, and a file an earlier job of that id left in a
/// node's spool (the new job unrecorded, so nothing moved it aside) is not this job's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incarnation {
    pub uid: u32,
    pub start_unix: i64,
}

/// How far a node's clock may lag the controller's when a file's start is compared with
/// Slurm's start time (a recorded run starts its file after Slurm starts the job).
pub const START_SLACK_MS: i64 = 5_000;

impl Incarnation {
    /// Why `meta` is not this run's file (one sentence), or `None` when it is: the same uid,
    /// and started no earlier than Slurm started this run (less [`START_SLACK_MS`]).
    pub fn mismatch(&self, meta: &JobMeta) -> Option<String> {
        if meta.uid != self.uid {
            return Some(format!(
                "the file of job {} is of uid {}, not the job's uid {}: an earlier job with this id",
                meta.job_id, meta.uid, self.uid
            ));
        }
        if meta.started_unix_ms < self.start_unix.saturating_mul(1000) - START_SLACK_MS {
            return Some(format!(
                "the file of job {} started at {} ms, before Slurm started the job ({} s): an earlier job with this id",
                meta.job_id, meta.started_unix_ms, self.start_unix
            ));
        }
        None
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
    let path = spool.join(crate::store::paths::live_name(job_id.to_string()));
    match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Spooled::NotRecorded),
        Err(e) => return Err(format!("{}: {e}", path.display())),
        Ok(_) => {}
    }
    let rec = Recording::load(&path).map_err(|e| e.to_string())?;
    if rec.meta.job_id != u64::from(job_id) {
        return Err(format!(
            "{} records job {}, not {job_id}",
            path.display(),
            rec.meta.job_id
        ));
    }
    if let Some(why) = want.mismatch(&rec.meta) {
        return Ok(Spooled::Earlier(why));
    }
    Ok(Spooled::Recorded(Box::new(NodeSummary::from_recording(
        &rec,
    ))))
}

/// The AdminComment string for `record`; `Err` with a sentence when it would not fit.
pub fn encode(record: &JobSummaryRecord) -> Result<String, String> {
    let json = serde_json::to_vec(record).map_err(|e| e.to_string())?;
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut z, &json).map_err(|e| e.to_string())?;
    let packed = z.finish().map_err(|e| e.to_string())?;
    let s = format!("{PREFIX}{}", text_of(&packed));
    if s.len() > MAX_ENCODED_BYTES {
        return Err(format!(
            "the summary is {} bytes encoded, more than the {} an AdminComment is given",
            s.len(),
            MAX_ENCODED_BYTES
        ));
    }
    Ok(s)
}

/// Whether `comment` is one of ours (whatever its case: see the module doc).
pub fn is_ours(comment: &str) -> bool {
    comment
        .get(..PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(PREFIX))
}

/// RFC 4648 base32 without padding, written in lower case and read in either case (sacctmgr
/// may store either): no upper-cased copy of every comment on the history path.
fn base32() -> &'static data_encoding::Encoding {
    static ENCODING: std::sync::LazyLock<data_encoding::Encoding> =
        std::sync::LazyLock::new(|| {
            let mut spec = data_encoding::Specification::new();
            spec.symbols.push_str("abcdefghijklmnopqrstuvwxyz234567");
            spec.translate.from.push_str("ABCDEFGHIJKLMNOPQRSTUVWXYZ");
            spec.translate.to.push_str("abcdefghijklmnopqrstuvwxyz");
            spec.encoding().expect("a valid base32 alphabet")
        });
    &ENCODING
}

/// The encoded text of `packed`, in lower case.
fn text_of(packed: &[u8]) -> String {
    base32().encode(packed)
}

/// Ours, if `comment` is: trailing whitespace ignored, anything else refused.
pub fn decode(comment: &str) -> Result<JobSummaryRecord, DecodeError> {
    let rec: JobSummaryRecord = serde_json::from_slice(&unpack(comment)?)
        .map_err(|e| DecodeError::Damaged(format!("JSON: {e}")))?;
    if rec.nodes.is_empty() {
        return Err(DecodeError::Damaged("no node in it".into()));
    }
    Ok(rec)
}

/// What `history` and `sizing` read from one node's summary, decoded alone: the rest of
/// the JSON (meta, steps, events, per-step figures, the other summary fields) is skipped by
/// the parser without being built. Same format, same version: every field here is in every
/// summary written, and what it lacks reads as `None`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeFigures {
    pub peak_working_set_bytes: Option<u64>,
    pub peak_effective_cores: Option<f64>,
    pub cpu_usage_seconds_total: Option<f64>,
    pub oom_kills: Option<u64>,
    /// Each card's mean utilization, in the summary's order.
    pub gpu_mean_utilization_percent: Vec<Option<f64>>,
}

#[derive(Deserialize)]
struct FiguresRecord {
    nodes: Vec<FiguresNode>,
}

#[derive(Deserialize)]
struct FiguresNode {
    summary: FiguresSummary,
}

#[derive(Deserialize)]
struct FiguresSummary {
    #[serde(default)]
    peak_working_set_bytes: Option<u64>,
    #[serde(default)]
    peak_effective_cores: Option<f64>,
    #[serde(default)]
    cpu_usage_seconds_total: Option<f64>,
    #[serde(default)]
    oom_kills: Option<u64>,
    #[serde(default)]
    gpus: Vec<FiguresGpu>,
}

#[derive(Deserialize)]
struct FiguresGpu {
    #[serde(default)]
    mean_utilization_percent: Option<f64>,
}

/// [`decode`] for the history path: each node's [`NodeFigures`] only.
pub fn decode_figures(comment: &str) -> Result<Vec<NodeFigures>, DecodeError> {
    let rec: FiguresRecord = serde_json::from_slice(&unpack(comment)?)
        .map_err(|e| DecodeError::Damaged(format!("JSON: {e}")))?;
    if rec.nodes.is_empty() {
        return Err(DecodeError::Damaged("no node in it".into()));
    }
    Ok(rec
        .nodes
        .into_iter()
        .map(|n| NodeFigures {
            peak_working_set_bytes: n.summary.peak_working_set_bytes,
            peak_effective_cores: n.summary.peak_effective_cores,
            cpu_usage_seconds_total: n.summary.cpu_usage_seconds_total,
            oom_kills: n.summary.oom_kills,
            gpu_mean_utilization_percent: n
                .summary
                .gpus
                .into_iter()
                .map(|g| g.mean_utilization_percent)
                .collect(),
        })
        .collect())
}

/// The JSON inside one of our comments, bounded.
fn unpack(comment: &str) -> Result<Vec<u8>, DecodeError> {
    let c = comment.trim();
    if c.is_empty() {
        return Err(DecodeError::Empty);
    }
    if !is_ours(c) {
        return Err(DecodeError::NotOurs);
    }
    let packed = base32()
        .decode(&c.as_bytes()[PREFIX.len()..])
        .map_err(|e| DecodeError::Damaged(format!("base32: {e}")))?;
    let mut json = Vec::new();
    flate2::read::DeflateDecoder::new(&packed[..])
        .take(MAX_JSON_BYTES + 1)
        .read_to_end(&mut json)
        .map_err(|e| DecodeError::Damaged(format!("deflate: {e}")))?;
    if json.len() as u64 > MAX_JSON_BYTES {
        return Err(DecodeError::Damaged(format!(
            "more than {MAX_JSON_BYTES} bytes inflated"
        )));
    }
    Ok(json)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sample::Source;

    /// A node's summary of job 42 (also for export::slurmdbd's tests).
    pub(crate) fn node(name: &str) -> NodeSummary {
        NodeSummary {
            meta: JobMeta {
                job_id: 42,
                user: "alice".into(),
                uid: 1000,
                node: name.into(),
                cluster: Some("c".into()),
                plugin_version: "0.1.0".into(),
                interval_seconds: 5,
                source: Source::CgroupV2,
                cores_allocated: Some(4),
                memory_allocated_bytes: Some(8 << 30),
                started_unix_ms: 1_700_000_000_000,
                incarnation: None,
            },
            steps: vec![StepInfo {
                step: "batch".into(),
                started_unix_ms: Some(1_700_000_000_000),
                ended_unix_ms: Some(1_700_000_600_000),
                tasks: Some(1),
                exit_status: Some(0),
            }],
            events: Vec::new(),
            step_figures: BTreeMap::new(),
            summary: Summary {
                summary_version: crate::analysis::summary::SUMMARY_VERSION,
                peak_working_set_bytes: Some(3 << 30),
                ..Summary::default()
            },
        }
    }

    #[test]
    fn a_record_comes_back_as_it_went() {
        let rec = JobSummaryRecord {
            job_id: "42".into(),
            nodes: vec![node("n1"), node("n2")],
        };
        let s = encode(&rec).unwrap();
        assert!(s.starts_with(PREFIX), "{s}");
        assert!(!s.contains('|') && !s.contains('\n') && !s.contains('\u{1f}'));
        assert_eq!(decode(&format!("{s}\n")).unwrap(), rec);
        // What sacctmgr stores: the whole string lowercased.
        assert_eq!(decode(&s.to_ascii_lowercase()).unwrap(), rec);
        assert_eq!(decode(&s.to_ascii_uppercase()).unwrap(), rec);
    }

    #[test]
    fn what_is_not_ours_or_is_damaged_is_refused_with_a_reason() {
        assert_eq!(decode("  "), Err(DecodeError::Empty));
        assert_eq!(decode("JS1:H4sIAAAA"), Err(DecodeError::NotOurs));
        assert!(matches!(decode("SW1:!!!"), Err(DecodeError::Damaged(_))));
        assert!(matches!(
            decode("SW1:aGVsbG8="),
            Err(DecodeError::Damaged(_))
        ));
        // Valid deflate of something that is not a record.
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, b"{\"job_id\":\"1\",\"nodes\":[]}").unwrap();
        let s = format!("{PREFIX}{}", text_of(&z.finish().unwrap()));
        assert_eq!(
            decode(&s),
            Err(DecodeError::Damaged("no node in it".into()))
        );
    }

    /// 64 MiB of zeros deflate to ~64 KB: the decoder stops at its bound.
    #[test]
    fn a_compressed_bomb_is_refused_at_the_bound() {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![b' '; 1 << 20];
        for _ in 0..64 {
            std::io::Write::write_all(&mut z, &zeros).unwrap();
        }
        let s = format!("{PREFIX}{}", text_of(&z.finish().unwrap()));
        match decode(&s) {
            Err(DecodeError::Damaged(why)) => assert!(why.contains("inflated"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

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

    /// The history path's figures-only decode reads what the full decode reads, on real
    /// comments from the test cluster's slurmdbd and on one with cards.
    #[test]
    fn the_figures_only_decode_agrees_with_the_full_one() {
        let mut with_cards = node("n2");
        with_cards.summary.oom_kills = Some(2);
        with_cards.summary.gpus = vec![
            crate::analysis::summary::GpuSummary {
                mean_utilization_percent: Some(80.0),
                ..Default::default()
            },
            crate::analysis::summary::GpuSummary::default(),
        ];
        let made = encode(&JobSummaryRecord {
            job_id: "42".into(),
            nodes: vec![node("n1"), with_cards],
        })
        .unwrap();
        let real = include_str!("../../tests/fixtures/slurm/admin_comments_real.txt");
        let mut seen = 0;
        for c in real.lines().chain([made.as_str()]) {
            let full = decode(c).unwrap();
            let figures = decode_figures(c).unwrap();
            assert_eq!(full.nodes.len(), figures.len());
            for (n, f) in full.nodes.iter().zip(&figures) {
                let s = &n.summary;
                assert_eq!(
                    *f,
                    NodeFigures {
                        peak_working_set_bytes: s.peak_working_set_bytes,
                        peak_effective_cores: s.peak_effective_cores,
                        cpu_usage_seconds_total: s.cpu_usage_seconds_total,
                        oom_kills: s.oom_kills,
                        gpu_mean_utilization_percent: s
                            .gpus
                            .iter()
                            .map(|g| g.mean_utilization_percent)
                            .collect(),
                    }
                );
                seen += usize::from(s.peak_working_set_bytes.is_some());
            }
        }
        assert!(seen >= 10, "{seen}");
        assert_eq!(
            decode_figures(&made).unwrap()[1].gpu_mean_utilization_percent,
            vec![Some(80.0), None]
        );
        assert_eq!(decode_figures("JS1:x"), Err(DecodeError::NotOurs));
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
