//! The job's summary as slurmdbd keeps it: one compact, versioned string in the job's
//! `AdminComment`, in jobstats' own format so that jobstats, Job Defense Shield and reportseff
//! read it unchanged, readable with `sacct -o AdminComment` from any login node for as long as
//! accounting keeps the job.
//!
//! Format ([`PREFIX`]): `JS1:` then base64 (standard alphabet, padded) of the gzip of one JSON
//! object ([`JobstatsSummary`]): jobstats' keys exactly (`nodes` → per node `cpus`,
//! `total_memory`, `used_memory`, `total_time`, and per card `gpu_total_memory`,
//! `gpu_used_memory`, `gpu_utilization`; top-level `total_time` and `gpus`), filled from the
//! recording, and slurmwatch's own [`JobSummaryRecord`] under the key `slurmwatch`; it opens
//! with `slurmwatch_figures`, each node's [`NodeFigures`], in a stored deflate block of its
//! own when small, for the readers of figures alone ([`decode_figures`]). The gzip
//! header carries the comment `slurmwatch` ([`GZIP_MARK`]): the first 32 characters of the
//! string tell ours from jobstats' own `JS1:` without decoding (squeue shows only a prefix),
//! and Python's `gzip.decompress` skips it.
//!
//! base64 is case-sensitive, and 22.05's `sacctmgr … set AdminComment=` lowercases what it
//! stores (quoted or not; sacctmgr does it, not slurmdbd): the controller's epilog stores
//! through slurmdbd's API instead (`slurmwatch-dbd-comment`,
//! `export::admin_comment_store::store`), which keeps the value as given.
//!
//! Older summaries, `SW1:` + unpadded base32 (read in either case) of raw-deflated JSON of a
//! [`JobSummaryRecord`], stay readable.
//!
//! Decoding is bounded ([`MAX_JSON_BYTES`] after inflating): AdminComment is writable by
//! admins and other tools, so a string that is not ours, or is damaged, is refused with one
//! sentence and never trusted.
//!
//! The codec lives beside the [`Summary`] it carries so that every reader of the string
//! (`report`, `history`, `fleet`, `export`) finds it below them; turning a node's file into a
//! [`NodeSummary`] and back into a report's recording is the report's (`report::node_summary`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::step_figures::StepFigures;
use super::Summary;
use crate::store::{Event, JobMeta, StepInfo};

/// The prefix of our AdminComment strings: jobstats' format 1.
pub const PREFIX: &str = "JS1:";
/// The prefix of the summaries slurmwatch wrote before it wrote jobstats' format (read only).
pub const LEGACY_PREFIX: &str = "SW1:";
/// The gzip header's comment that marks a `JS1:` string as slurmwatch's.
pub const GZIP_MARK: &str = "slurmwatch";
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
    /// The job's run time as Slurm counts it (end − start), when the controller knew it:
    /// jobstats' top-level `total_time`, the denominator of its CPU efficiency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_seconds: Option<u64>,
    /// The job's nodes whose figures the controller could not fetch when it stored this one
    /// (an endpoint down, busy past the bound, a reply refused): the summary is partial,
    /// `report` says so, and `ctld-backfill` asks those nodes again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unanswered_nodes: Vec<String>,
}

/// One node in jobstats' keys. A figure the recording does not have is left out, never
/// written as a number (jobstats writes every key; its readers index the ones they use).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobstatsNode {
    /// Cores allocated on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// The job's memory limit on the node, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_memory: Option<u64>,
    /// The peak working set on the node, bytes (jobstats: the peak of rss + shmem).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_memory: Option<u64>,
    /// CPU seconds the job used on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_time: Option<f64>,
    /// Per card, keyed by its index on the node (nvidia-smi's, jobstats' `minor_number`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_total_memory: BTreeMap<String, u64>,
    /// The job's own processes' memory on the card at its largest, bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_used_memory: BTreeMap<String, u64>,
    /// The card's mean utilization over the job, percent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gpu_utilization: BTreeMap<String, f64>,
}

/// The whole JSON of one of our `JS1:` strings: jobstats' keys and ours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobstatsSummary {
    /// Each node's figures that `history` and `sizing` read, in `slurmwatch`'s node order:
    /// first in the JSON, so that a reader of these alone inflates the head of the stream and
    /// stops ([`decode_figures`]). Absent in jobstats' own strings and in ours before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slurmwatch_figures: Vec<NodeFigures>,
    pub nodes: BTreeMap<String, JobstatsNode>,
    /// The job's run time, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_time: Option<u64>,
    /// Cards recorded, over all nodes.
    pub gpus: usize,
    /// slurmwatch's own summary (absent in jobstats' own strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurmwatch: Option<JobSummaryRecord>,
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

/// Three decimals: jobstats writes one, which moves a short job's CPU efficiency by up to a
/// percent (0.05 CPU-s of 8 s); three keep its readers' figures equal to the report's.
fn thousandth(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl JobstatsNode {
    /// jobstats' figures of one node's summary.
    pub fn from_summary(n: &NodeSummary) -> JobstatsNode {
        let s = &n.summary;
        let mut out = JobstatsNode {
            cpus: s.cores_allocated.or(n.meta.cores_allocated),
            total_memory: s.memory_limit_bytes.or(n.meta.memory_allocated_bytes),
            used_memory: s.peak_working_set_bytes,
            total_time: s.cpu_usage_seconds_total.map(thousandth),
            ..JobstatsNode::default()
        };
        for (i, g) in s.gpus.iter().enumerate() {
            let key = g.nvml_index.unwrap_or(i as u32).to_string();
            if let Some(t) = g.memory_total_bytes {
                out.gpu_total_memory.insert(key.clone(), t);
            }
            if let Some(u) = g.peak_job_memory_bytes {
                out.gpu_used_memory.insert(key.clone(), u);
            }
            if let Some(u) = g.mean_utilization_percent {
                out.gpu_utilization.insert(key, thousandth(u));
            }
        }
        out
    }
}

impl JobstatsSummary {
    /// jobstats' keys for `record`, with `record` itself under `slurmwatch`.
    pub fn from_record(record: &JobSummaryRecord) -> JobstatsSummary {
        // Without Slurm's run time, the recordings' span stands in (within a sampling interval).
        let span = || {
            let nodes = || record.nodes.iter().map(|n| &n.summary);
            let first = nodes().filter_map(|s| s.first_t_unix_ms).min()?;
            let last = nodes().filter_map(|s| s.last_t_unix_ms).max()?;
            u64::try_from((last - first + 500) / 1000).ok()
        };
        JobstatsSummary {
            slurmwatch_figures: record.nodes.iter().map(NodeFigures::from).collect(),
            nodes: record
                .nodes
                .iter()
                .map(|n| (n.meta.node.clone(), JobstatsNode::from_summary(n)))
                .collect(),
            total_time: record.elapsed_seconds.or_else(span),
            gpus: record.nodes.iter().map(|n| n.summary.gpus.len()).sum(),
            slurmwatch: Some(record.clone()),
        }
    }
}

/// The AdminComment string for `record`; `Err` with a sentence when it would not fit.
pub fn encode(record: &JobSummaryRecord) -> Result<String, String> {
    let summary = JobstatsSummary::from_record(record);
    let json = serde_json::to_vec(&summary).map_err(|e| e.to_string())?;
    let head = r#"{"slurmwatch_figures":"#.len()
        + serde_json::to_vec(&summary.slurmwatch_figures)
            .map_err(|e| e.to_string())?
            .len();
    let packed = gzip_member(json.split_at(head.min(json.len())))?;
    let s = format!("{PREFIX}{}", data_encoding::BASE64.encode(&packed));
    if s.len() > MAX_ENCODED_BYTES {
        return Err(format!(
            "the summary is {} bytes encoded, more than the {} an AdminComment is given",
            s.len(),
            MAX_ENCODED_BYTES
        ));
    }
    Ok(s)
}

/// The largest leading figures stored uncompressed (about 25 nodes'): a larger job's are
/// compressed with the rest, so that the figures never cost a big job's summary its room
/// under [`MAX_ENCODED_BYTES`].
const HEAD_STORED_MAX_BYTES: usize = 4 << 10;

/// One gzip member of `head` then `rest`, with our header ([`GZIP_MARK`], mtime 0): `head`
/// in a deflate stored block when it is small, so that a reader of the leading figures
/// alone copies them out of the stream without building any code tables (that was a third
/// of its time), and the rest compressed at the best level. Any gzip reader reads it as one
/// stream.
fn gzip_member((head, rest): (&[u8], &[u8])) -> Result<Vec<u8>, String> {
    let mut out = vec![0x1f, 0x8b, 8, 0x10, 0, 0, 0, 0, 2, 255];
    out.extend_from_slice(GZIP_MARK.as_bytes());
    out.push(0);
    let stored = if head.len() <= HEAD_STORED_MAX_BYTES {
        // BFINAL 0, BTYPE 00 (stored), then LEN and its complement, little-endian.
        let len = head.len() as u16;
        out.push(0);
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(head);
        head.len()
    } else {
        0
    };
    let mut z = flate2::write::DeflateEncoder::new(out, flate2::Compression::best());
    std::io::Write::write_all(&mut z, &head[stored..]).map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut z, rest).map_err(|e| e.to_string())?;
    let mut out = z.finish().map_err(|e| e.to_string())?;
    let mut crc = flate2::Crc::new();
    crc.update(head);
    crc.update(rest);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&crc.amount().to_le_bytes());
    Ok(out)
}

/// `record` in the older `SW1:` format (base32, any case): for a store through a sacctmgr
/// that lowercases the value (22.05's), which jobstats' format does not survive but this one
/// does — slurmwatch's readers keep it; jobstats' readers get nothing from either.
pub fn encode_legacy(record: &JobSummaryRecord) -> Result<String, String> {
    let json = serde_json::to_vec(record).map_err(|e| e.to_string())?;
    let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut z, &json).map_err(|e| e.to_string())?;
    let packed = z.finish().map_err(|e| e.to_string())?;
    let s = format!("{LEGACY_PREFIX}{}", base32().encode(&packed));
    if s.len() > MAX_ENCODED_BYTES {
        return Err(format!(
            "the summary is {} bytes encoded, more than the {} an AdminComment is given",
            s.len(),
            MAX_ENCODED_BYTES
        ));
    }
    Ok(s)
}

/// The base64 characters that cover [`encode`]'s gzip header up to the end of its comment
/// (magic, method, FCOMMENT, mtime 0, XFL, OS, `slurmwatch\0`: 21 bytes).
const MARK_CHARS: usize = 28;

/// Whether `comment` is one of ours: a `JS1:` string whose gzip header carries our mark
/// (exact case: base64 is case-sensitive), or an older `SW1:` one (any case).
pub fn is_ours(comment: &str) -> bool {
    let c = comment.trim_start();
    if c.get(..LEGACY_PREFIX.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(LEGACY_PREFIX))
    {
        return true;
    }
    let Some(head) = c.strip_prefix(PREFIX).and_then(|b| b.get(..MARK_CHARS)) else {
        return false;
    };
    let Ok(h) = data_encoding::BASE64_NOPAD.decode(head.as_bytes()) else {
        return false;
    };
    // XFL and OS (bytes 8 and 9) depend on the level and the platform: not compared.
    h.len() == 21
        && h[..8] == [0x1f, 0x8b, 8, 0x10, 0, 0, 0, 0]
        && h[10..20] == *GZIP_MARK.as_bytes()
        && h[20] == 0
}

/// RFC 4648 base32 without padding, read in either case: older summaries were written in
/// lower case, and sacctmgr may store either.
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

/// Our record inside one of our comments: under `slurmwatch` in a `JS1:` one, the whole JSON
/// of an older `SW1:` one.
fn parse<T: serde::de::DeserializeOwned>(comment: &str) -> Result<T, DecodeError> {
    #[derive(Deserialize)]
    struct Outer<T> {
        slurmwatch: T,
    }
    with_json(comment, |json, legacy| {
        if legacy {
            from_json(json)
        } else {
            from_json::<Outer<T>>(json).map(|o| o.slurmwatch)
        }
    })
}

/// `json` read as `T`.
fn from_json<T: serde::de::DeserializeOwned>(json: &[u8]) -> Result<T, DecodeError> {
    serde_json::from_slice(json).map_err(|e| DecodeError::Damaged(format!("JSON: {e}")))
}

/// The JSON of one of our `JS1:` comments as jobstats' readers see it.
pub fn decode_jobstats(comment: &str) -> Result<JobstatsSummary, DecodeError> {
    with_json(comment, |json, legacy| {
        if legacy {
            return Err(DecodeError::Damaged(
                "an older SW1: summary has no jobstats keys".into(),
            ));
        }
        from_json(json)
    })
}

/// Ours, if `comment` is: trailing whitespace ignored, anything else refused.
pub fn decode(comment: &str) -> Result<JobSummaryRecord, DecodeError> {
    let summary: JobSummaryRecord = parse(comment)?;
    if summary.nodes.is_empty() {
        return Err(DecodeError::Damaged("no node in it".into()));
    }
    Ok(summary)
}

/// What `history` and `sizing` read from one node's summary, decoded alone: the rest of
/// the JSON (meta, steps, events, per-step figures, the other summary fields) is skipped by
/// the parser without being built. Same format, same version: every field here is in every
/// summary written, and what it lacks reads as `None`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeFigures {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_working_set_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_effective_cores: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_usage_seconds_total: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_kills: Option<u64>,
    /// Each card's mean utilization, in the summary's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_mean_utilization_percent: Vec<Option<f64>>,
}

impl From<&NodeSummary> for NodeFigures {
    fn from(n: &NodeSummary) -> NodeFigures {
        let s = &n.summary;
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
    }
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

/// [`decode`] for the history path: each node's [`NodeFigures`] only. From a `JS1:` string
/// that leads with them (`slurmwatch_figures`), only the head of the stream is inflated
/// ([`Scratch::figures_head`]); from an older one, the whole summary is read for them.
pub fn decode_figures(comment: &str) -> Result<Vec<NodeFigures>, DecodeError> {
    if let Some(head) = with_scratch(|s| s.figures_head(comment)) {
        return head;
    }
    let figures: FiguresRecord = parse(comment)?;
    if figures.nodes.is_empty() {
        return Err(DecodeError::Damaged("no node in it".into()));
    }
    Ok(figures
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

/// The bytes of [`encode`]'s gzip header ([`MARK_CHARS`] of base64, checked by [`is_ours`]):
/// the deflate stream starts right after it (FCOMMENT is the only flag).
const GZIP_HEADER_BYTES: usize = 21;

/// What decoding reuses from one comment to the next on a thread: the history path decodes
/// one comment per job, and a fresh gzip reader per comment (its inflater, window and read
/// buffer allocated and zeroed, the JSON grown in steps) cost as much as inflating it.
struct Scratch {
    packed: Vec<u8>,
    json: Vec<u8>,
    inflater: flate2::Decompress,
}

/// A buffer grown past this by an unusual comment is not kept for the next one.
const SCRATCH_KEPT_BYTES: usize = 1 << 20;

impl Scratch {
    fn new() -> Scratch {
        Scratch {
            packed: Vec::new(),
            json: Vec::new(),
            inflater: flate2::Decompress::new(false),
        }
    }

    /// The JSON inside one of our comments, bounded, and whether it is the older `SW1:`
    /// format.
    fn unpack(&mut self, comment: &str) -> Result<(&[u8], bool), DecodeError> {
        let c = comment.trim();
        if c.is_empty() {
            return Err(DecodeError::Empty);
        }
        if !is_ours(c) {
            return Err(DecodeError::NotOurs);
        }
        let legacy = !c.starts_with(PREFIX);
        let text = &c.as_bytes()[PREFIX.len()..];
        let (encoding, what) = if legacy {
            (base32(), "base32")
        } else {
            (&data_encoding::BASE64, "base64")
        };
        let damaged = |e: data_encoding::DecodeError| DecodeError::Damaged(format!("{what}: {e}"));
        let len = encoding.decode_len(text.len()).map_err(damaged)?;
        self.packed.clear();
        self.packed.resize(len, 0);
        let len = encoding
            .decode_mut(text, &mut self.packed)
            .map_err(|e| damaged(e.error))?;
        let packed = &self.packed[..len];
        let what = if legacy { "deflate" } else { "gzip" };
        let damaged = |e: String| DecodeError::Damaged(format!("{what}: {e}"));
        // A `JS1:` string is one gzip member: our header (checked), deflate, CRC-32 and
        // length (bytes after it are ignored, as a gzip reader does); `SW1:` is raw deflate.
        let stream = if legacy {
            packed
        } else {
            &packed[GZIP_HEADER_BYTES.min(packed.len())..]
        };
        let used = inflate(&mut self.inflater, stream, &mut self.json).map_err(damaged)?;
        if self.json.len() as u64 > MAX_JSON_BYTES {
            return Err(DecodeError::Damaged(format!(
                "more than {MAX_JSON_BYTES} bytes inflated"
            )));
        }
        if !legacy {
            let Some(trailer) = stream.get(used..used + 8) else {
                return Err(damaged("the stream ends early".into()));
            };
            let mut crc = flate2::Crc::new();
            crc.update(&self.json);
            if trailer[..4] != crc.sum().to_le_bytes() || trailer[4..] != crc.amount().to_le_bytes()
            {
                return Err(damaged(
                    "corrupt gzip stream does not have a matching checksum".into(),
                ));
            }
        }
        Ok((&self.json, legacy))
    }

    /// The leading `slurmwatch_figures` of a `JS1:` string, read from the head of its stream:
    /// copied out of the stored block that [`encode`] writes them in when small, else
    /// base64-decoded and inflated [`HEAD_CHUNK_CHARS`] at a time until the array is whole.
    /// `None` when the string is not such a one (an older summary, another tool's, or one
    /// that does not decode this far): the caller reads the whole of it, which says why.
    /// The stream's CRC covers the whole JSON and is not checked here (every reader of the
    /// whole summary checks it): what deflate gives up to the array's end is what was written.
    fn figures_head(&mut self, comment: &str) -> Option<Result<Vec<NodeFigures>, DecodeError>> {
        let c = comment.trim();
        if !c.starts_with(PREFIX) || !is_ours(c) {
            return None;
        }
        let text = &c.as_bytes()[PREFIX.len()..];
        if let Some(head) = self.stored_head(text) {
            // The block holds the whole array: anything short of it is not our writing.
            return settled(head_figures(head));
        }
        self.inflater.reset(false);
        self.packed.clear();
        self.json.clear();
        for chunk in text.chunks(HEAD_CHUNK_CHARS) {
            let at = self.packed.len();
            self.packed
                .resize(at + data_encoding::BASE64.decode_len(chunk.len()).ok()?, 0);
            let n = data_encoding::BASE64
                .decode_mut(chunk, &mut self.packed[at..])
                .ok()?;
            self.packed.truncate(at + n);
            if self.packed.len() <= GZIP_HEADER_BYTES {
                continue;
            }
            let fed = GZIP_HEADER_BYTES + self.inflater.total_in() as usize;
            inflate_more(&mut self.inflater, &self.packed[fed..], &mut self.json).ok()?;
            if self.json.len() > HEAD_MAX_BYTES {
                return None;
            }
            match head_figures(&self.json) {
                Some(Ok(None)) => continue,
                r => return settled(r),
            }
        }
        None
    }

    /// The bytes of the stored block that opens the stream after our gzip header, when it
    /// does (BTYPE 00, LEN and its complement agreeing), base64-decoded from the string's
    /// first characters alone.
    fn stored_head(&mut self, text: &[u8]) -> Option<&[u8]> {
        const DATA_AT: usize = GZIP_HEADER_BYTES + 5;
        let decode = |packed: &mut Vec<u8>, chars: &[u8]| -> Option<()> {
            packed.clear();
            packed.resize(data_encoding::BASE64.decode_len(chars.len()).ok()?, 0);
            let n = data_encoding::BASE64.decode_mut(chars, packed).ok()?;
            packed.truncate(n);
            Some(())
        };
        decode(&mut self.packed, text.get(..DATA_AT.div_ceil(3) * 4)?)?;
        let b = &self.packed;
        let (len, nlen) = (
            u16::from_le_bytes([b[DATA_AT - 4], b[DATA_AT - 3]]),
            u16::from_le_bytes([b[DATA_AT - 2], b[DATA_AT - 1]]),
        );
        if b[GZIP_HEADER_BYTES] != 0 || nlen != !len {
            return None;
        }
        let end = DATA_AT + usize::from(len);
        decode(&mut self.packed, text.get(..end.div_ceil(3) * 4)?)?;
        self.packed.get(DATA_AT..end)
    }

    /// Drops what an unusual comment grew.
    fn trim(&mut self) {
        for b in [&mut self.packed, &mut self.json] {
            if b.capacity() > SCRATCH_KEPT_BYTES {
                *b = Vec::new();
            }
        }
    }
}

/// What the leading figures in `json` (the start of one of our JSONs) say: `None` when
/// `json` does not open with them; `Ok(None)` while the array is not whole yet.
fn head_figures(json: &[u8]) -> Option<Result<Option<Vec<NodeFigures>>, DecodeError>> {
    const OPEN: &[u8] = b"{\"slurmwatch_figures\":";
    if !json.starts_with(&OPEN[..OPEN.len().min(json.len())]) {
        return None;
    }
    let rest = json.get(OPEN.len()..).unwrap_or_default();
    if rest.is_empty() {
        return Some(Ok(None));
    }
    Some(
        match Vec::<NodeFigures>::deserialize(&mut serde_json::Deserializer::from_slice(rest)) {
            Ok(v) if v.is_empty() => Err(DecodeError::Damaged("no node in it".into())),
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_eof() => Ok(None),
            Err(e) => Err(DecodeError::Damaged(format!("JSON: {e}"))),
        },
    )
}

/// [`head_figures`]' answer once no more of the stream will come: `None` (read the whole
/// summary) unless the figures were whole or damaged.
fn settled(
    r: Option<Result<Option<Vec<NodeFigures>>, DecodeError>>,
) -> Option<Result<Vec<NodeFigures>, DecodeError>> {
    match r {
        Some(Ok(Some(v))) => Some(Ok(v)),
        Some(Err(e)) => Some(Err(e)),
        _ => None,
    }
}

/// base64 characters decoded at a time while looking for the leading figures (a multiple of
/// 4): 258 bytes of gzip, which hold one node's figures after the stream's code tables.
const HEAD_CHUNK_CHARS: usize = 344;
/// The most JSON inflated while looking for the leading figures: well over a thousand
/// nodes' worth. Past it the whole summary is read, within [`MAX_JSON_BYTES`].
const HEAD_MAX_BYTES: usize = 256 << 10;

/// Inflates all of `input` (the next bytes of a raw deflate stream `d` is part way through)
/// onto the end of `out`, as far as it goes.
fn inflate_more(d: &mut flate2::Decompress, input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let start = d.total_in();
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.capacity().max(4 << 10));
        }
        let (read, written) = (d.total_in(), d.total_out());
        let status = d
            .decompress_vec(
                &input[(read - start) as usize..],
                out,
                flate2::FlushDecompress::None,
            )
            .map_err(|e| e.to_string())?;
        let stalled = d.total_in() == read && d.total_out() == written;
        if status == flate2::Status::StreamEnd
            || stalled
            || (d.total_in() - start) as usize == input.len() && out.len() < out.capacity()
        {
            return Ok(());
        }
    }
}

/// Inflates the raw deflate stream at the start of `input` into `out`, at most
/// [`MAX_JSON_BYTES`] + 1 bytes (more is the caller's to refuse); the bytes of `input` used.
fn inflate(d: &mut flate2::Decompress, input: &[u8], out: &mut Vec<u8>) -> Result<usize, String> {
    let limit = MAX_JSON_BYTES as usize + 1;
    d.reset(false);
    out.clear();
    loop {
        if out.len() == out.capacity() {
            if out.len() >= limit {
                return Ok(d.total_in() as usize);
            }
            let grown = (out.capacity() * 2).clamp(16 << 10, limit);
            out.reserve_exact(grown - out.len());
        }
        let (read, written) = (d.total_in(), d.total_out());
        let status = d
            .decompress_vec(&input[read as usize..], out, flate2::FlushDecompress::None)
            .map_err(|e| e.to_string())?;
        if status == flate2::Status::StreamEnd {
            return Ok(d.total_in() as usize);
        }
        if d.total_in() == read && d.total_out() == written && out.len() < out.capacity() {
            return Err("the stream ends early".into());
        }
    }
}

/// `read` given the JSON inside `comment` (see [`Scratch::unpack`]) and whether it is the
/// older `SW1:` format, with this thread's buffers.
fn with_json<R>(
    comment: &str,
    read: impl FnOnce(&[u8], bool) -> Result<R, DecodeError>,
) -> Result<R, DecodeError> {
    with_scratch(|s| {
        s.unpack(comment)
            .and_then(|(json, legacy)| read(json, legacy))
    })
}

/// `f` with this thread's [`Scratch`] (a fresh one when `f` asks again from inside), trimmed
/// after.
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    thread_local! {
        static SCRATCH: std::cell::RefCell<Option<Scratch>> = const { std::cell::RefCell::new(None) };
    }
    let mut f = Some(f);
    let mut go = |s: &mut Scratch| {
        let r = f.take().expect("called once")(s);
        s.trim();
        r
    };
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut s) => go(s.get_or_insert_with(Scratch::new)),
        Err(_) => go(&mut Scratch::new()),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sample::Source;

    /// A node's summary of job 42 (also for export::admin_comment_store's tests).
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

    /// An `SW1:` string as slurmwatch wrote them before jobstats' format.
    fn legacy(json: &[u8]) -> String {
        let mut z = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut z, json).unwrap();
        format!("{LEGACY_PREFIX}{}", base32().encode(&z.finish().unwrap()))
    }

    /// A `JS1:` string of `json` with our gzip mark.
    fn marked(json: &[u8]) -> String {
        let mut z = flate2::GzBuilder::new()
            .comment(GZIP_MARK)
            .write(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, json).unwrap();
        format!(
            "{PREFIX}{}",
            data_encoding::BASE64.encode(&z.finish().unwrap())
        )
    }

    fn record() -> JobSummaryRecord {
        JobSummaryRecord {
            job_id: "42".into(),
            nodes: vec![node("n1"), node("n2")],
            elapsed_seconds: Some(600),
            unanswered_nodes: Vec::new(),
        }
    }

    #[test]
    fn a_record_comes_back_as_it_went() {
        let summary = record();
        let s = encode(&summary).unwrap();
        assert!(s.starts_with(PREFIX) && is_ours(&s), "{s}");
        assert!(!s.contains('|') && !s.contains('\n') && !s.contains('\u{1f}'));
        assert_eq!(decode(&format!("{s}\n")).unwrap(), summary);
        // base64 does not survive a change of case: a lowercased string is not taken for ours.
        assert_eq!(decode(&s.to_ascii_lowercase()), Err(DecodeError::NotOurs));
    }

    /// Summaries written before jobstats' format are read as they were, in either case.
    #[test]
    fn an_older_sw1_summary_is_still_read() {
        let mut summary = record();
        summary.elapsed_seconds = None;
        let s = encode_legacy(&summary).unwrap();
        assert!(s.starts_with(LEGACY_PREFIX) && is_ours(&s));
        assert_eq!(decode(&s).unwrap(), summary);
        assert_eq!(legacy(&serde_json::to_vec(&summary).unwrap()), s);
        // What 22.05's sacctmgr stores, and the other case.
        assert_eq!(decode(&s.to_ascii_lowercase()).unwrap(), summary);
        assert_eq!(decode(&s.to_ascii_uppercase()).unwrap(), summary);
        assert_eq!(decode_figures(&s).unwrap().len(), 2);
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
        // jobstats' own summary (gzip without our mark) is another tool's.
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut z, br#"{"nodes":{},"total_time":1,"gpus":0}"#).unwrap();
        let theirs = format!(
            "{PREFIX}{}",
            data_encoding::BASE64.encode(&z.finish().unwrap())
        );
        assert!(!is_ours(&theirs));
        assert_eq!(decode(&theirs), Err(DecodeError::NotOurs));
        // Marked, but not a record, in either format.
        let empty = br#"{"job_id":"1","nodes":[]}"#;
        assert_eq!(
            decode(&legacy(empty)),
            Err(DecodeError::Damaged("no node in it".into()))
        );
        let wrapped = format!(
            r#"{{"nodes":{{}},"gpus":0,"slurmwatch":{}}}"#,
            std::str::from_utf8(empty).unwrap()
        );
        assert_eq!(
            decode(&marked(wrapped.as_bytes())),
            Err(DecodeError::Damaged("no node in it".into()))
        );
        assert!(matches!(
            decode(&marked(br#"{"nodes":{},"gpus":0}"#)),
            Err(DecodeError::Damaged(_))
        ));
        // Marked, then cut short (a width-limited column).
        let s = encode(&record()).unwrap();
        assert!(matches!(decode(&s[..60]), Err(DecodeError::Damaged(_))));
    }

    /// 64 MiB of spaces gzip to ~64 KB: the decoder stops at its bound.
    #[test]
    fn a_compressed_bomb_is_refused_at_the_bound() {
        let mut z = flate2::GzBuilder::new()
            .comment(GZIP_MARK)
            .write(Vec::new(), flate2::Compression::best());
        let spaces = vec![b' '; 1 << 20];
        for _ in 0..64 {
            std::io::Write::write_all(&mut z, &spaces).unwrap();
        }
        let s = format!(
            "{PREFIX}{}",
            data_encoding::BASE64.encode(&z.finish().unwrap())
        );
        match decode(&s) {
            Err(DecodeError::Damaged(why)) => assert!(why.contains("inflated"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    /// The gzip member is read in place (not through a gzip reader): its CRC-32 and length
    /// are checked, a missing trailer refused, bytes after it ignored (as gzip readers do),
    /// and the buffers one comment grew do not spoil the next.
    #[test]
    fn the_gzip_trailer_is_checked_and_the_buffers_reused() {
        let s = encode(&record()).unwrap();
        let packed = data_encoding::BASE64
            .decode(&s.as_bytes()[PREFIX.len()..])
            .unwrap();
        let with = |p: &[u8]| format!("{PREFIX}{}", data_encoding::BASE64.encode(p));
        assert_eq!(decode(&s).unwrap(), record());
        let n = packed.len();
        for at in [n - 8, n - 1] {
            let mut bad = packed.clone();
            bad[at] ^= 1;
            match decode(&with(&bad)) {
                Err(DecodeError::Damaged(why)) => assert!(why.starts_with("gzip:"), "{why}"),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(
            decode(&with(&packed[..n - 3])),
            Err(DecodeError::Damaged(_))
        ));
        let mut longer = packed.clone();
        longer.extend_from_slice(b"more");
        assert_eq!(decode(&with(&longer)).unwrap(), record());
        // A bomb refused, then a comment decoded on the same thread.
        let mut z = flate2::GzBuilder::new()
            .comment(GZIP_MARK)
            .write(Vec::new(), flate2::Compression::best());
        std::io::Write::write_all(&mut z, &vec![b' '; 5 << 20]).unwrap();
        let bomb = with(&z.finish().unwrap());
        assert!(matches!(decode(&bomb), Err(DecodeError::Damaged(_))));
        assert_eq!(decode(&s).unwrap(), record());
        assert_eq!(decode_figures(&s).unwrap().len(), record().nodes.len());
    }

    /// jobstats' keys hold the recording's figures: cores, limit, working-set peak, CPU
    /// seconds per node; each card by its NVML index; the run time and the card count.
    #[test]
    fn jobstats_keys_hold_the_recorded_figures() {
        let mut summary = record();
        let n2 = &mut summary.nodes[1].summary;
        n2.cores_allocated = Some(8);
        n2.memory_limit_bytes = Some(16 << 30);
        n2.cpu_usage_seconds_total = Some(1234.5678);
        n2.gpus = vec![
            crate::analysis::summary::GpuSummary {
                nvml_index: Some(3),
                memory_total_bytes: Some(80 << 30),
                peak_job_memory_bytes: Some(20 << 30),
                mean_utilization_percent: Some(87.12345),
                ..Default::default()
            },
            // An unreadable card: no figures, not zeros.
            crate::analysis::summary::GpuSummary {
                nvml_index: Some(5),
                ..Default::default()
            },
        ];
        let j = decode_jobstats(&encode(&summary).unwrap()).unwrap();
        assert_eq!(j.total_time, Some(600));
        assert_eq!(j.gpus, 2);
        assert_eq!(j.slurmwatch.as_ref(), Some(&summary));
        let n1 = &j.nodes["n1"];
        assert_eq!(
            (n1.cpus, n1.total_memory, n1.used_memory, n1.total_time),
            (Some(4), Some(8 << 30), Some(3 << 30), None)
        );
        let n2 = &j.nodes["n2"];
        assert_eq!(
            (n2.cpus, n2.total_memory, n2.total_time),
            (Some(8), Some(16 << 30), Some(1234.568))
        );
        assert_eq!(
            n2.gpu_total_memory,
            BTreeMap::from([("3".into(), 80 << 30)])
        );
        assert_eq!(n2.gpu_used_memory, BTreeMap::from([("3".into(), 20 << 30)]));
        assert_eq!(n2.gpu_utilization, BTreeMap::from([("3".into(), 87.123)]));
        // No run time from Slurm: the recordings' span.
        summary.elapsed_seconds = None;
        summary.nodes[0].summary.first_t_unix_ms = Some(1_000);
        summary.nodes[1].summary.last_t_unix_ms = Some(61_400);
        assert_eq!(JobstatsSummary::from_record(&summary).total_time, Some(60));
    }

    /// What jobstats' readers run, in Python: jobstats' documented decode, Job Defense
    /// Shield's (`json.loads(gzip.decompress(base64.b64decode(s[4:])))`, no guard) and
    /// reportseff's efficiencies from it.
    #[test]
    fn python_decodes_it_as_jobstats_docs_show() {
        let mut summary = record();
        summary.nodes.truncate(1);
        let s = &mut summary.nodes[0].summary;
        s.cores_allocated = Some(4);
        s.memory_limit_bytes = Some(8 << 30);
        s.cpu_usage_seconds_total = Some(1200.0);
        s.gpus = vec![crate::analysis::summary::GpuSummary {
            nvml_index: Some(0),
            memory_total_bytes: Some(40 << 30),
            peak_job_memory_bytes: Some(10 << 30),
            mean_utilization_percent: Some(62.5),
            ..Default::default()
        }];
        let comment = encode(&summary).unwrap();
        let script = r#"
import base64, gzip, json, sys
s = sys.stdin.read().strip()
assert s[:4] == "JS1:"
d = json.loads(gzip.decompress(base64.b64decode(s[4:])))
n = d["nodes"]["n1"]
cpu = n["total_time"] / n["cpus"] / d["total_time"] * 100
mem = n["used_memory"] / n["total_memory"] * 100
gpu = n["gpu_utilization"]["0"]
gmem = n["gpu_used_memory"]["0"] / n["gpu_total_memory"]["0"] * 100
print(json.dumps([sorted(d), sorted(n), d["gpus"], d["total_time"], cpu, mem, gpu, gmem]))
"#;
        let mut child = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), comment.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            got,
            serde_json::json!([
                [
                    "gpus",
                    "nodes",
                    "slurmwatch",
                    "slurmwatch_figures",
                    "total_time"
                ],
                [
                    "cpus",
                    "gpu_total_memory",
                    "gpu_used_memory",
                    "gpu_utilization",
                    "total_memory",
                    "total_time",
                    "used_memory"
                ],
                1,
                600,
                50.0,
                37.5,
                62.5,
                25.0
            ])
        );
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
            elapsed_seconds: None,
            unanswered_nodes: Vec::new(),
        })
        .unwrap();
        let real = include_str!("../../tests/fixtures/slurm/admin_comments_real.txt");
        let mut seen = 0;
        for c in real.lines().chain([made.as_str()]) {
            let full = decode(c).unwrap();
            let figures = decode_figures(c).unwrap();
            assert_eq!(full.nodes.len(), figures.len());
            for (n, f) in full.nodes.iter().zip(&figures) {
                assert_eq!(*f, NodeFigures::from(n));
                seen += usize::from(n.summary.peak_working_set_bytes.is_some());
            }
        }
        assert!(seen >= 10, "{seen}");
        assert_eq!(
            decode_figures(&made).unwrap()[1].gpu_mean_utilization_percent,
            vec![Some(80.0), None]
        );
        assert_eq!(decode_figures("JS1:x"), Err(DecodeError::NotOurs));
    }

    /// The figures lead the JSON, and `decode_figures` reads them from the head of the stream
    /// alone: the string cut to its first 40 % still gives every node's figures (the whole
    /// decode refuses it), and a real summary re-encoded leads with its own figures.
    #[test]
    fn the_figures_are_read_from_the_head_of_the_stream() {
        let real = include_str!("../../tests/fixtures/slurm/admin_comments_js1_real.txt");
        for summary in real
            .lines()
            .take(5)
            .map(|c| decode(c).unwrap())
            .chain([record()])
        {
            let c = encode(&summary).unwrap();
            let want: Vec<NodeFigures> = summary.nodes.iter().map(NodeFigures::from).collect();
            let mut json = Vec::new();
            let packed = data_encoding::BASE64
                .decode(&c.as_bytes()[PREFIX.len()..])
                .unwrap();
            let mut gz = flate2::read::GzDecoder::new(&packed[..]);
            std::io::Read::read_to_end(&mut gz, &mut json).unwrap();
            assert!(json.starts_with(b"{\"slurmwatch_figures\":["), "{c}");
            assert_eq!(decode_figures(&c).unwrap(), want);
            let cut = &c[..(PREFIX.len() + (c.len() - PREFIX.len()) * 2 / 5) / 4 * 4];
            assert!(decode(cut).is_err());
            assert_eq!(
                decode_figures(cut).unwrap(),
                want,
                "{} of {} chars",
                cut.len(),
                c.len()
            );
        }
    }

    /// A 200-node job's figures (over the stored bound) are compressed with the rest, and
    /// still read from the head of the stream.
    #[test]
    fn a_big_jobs_figures_are_compressed_and_read_from_the_head() {
        let summary = JobSummaryRecord {
            job_id: "42".into(),
            nodes: (0..200).map(|i| node(&format!("n{i}"))).collect(),
            elapsed_seconds: Some(600),
            unanswered_nodes: Vec::new(),
        };
        let c = encode(&summary).unwrap();
        let packed = data_encoding::BASE64
            .decode(&c.as_bytes()[PREFIX.len()..])
            .unwrap();
        // After the header, a compressed block (BTYPE 01 or 10), not a stored one.
        assert_ne!((packed[GZIP_HEADER_BYTES] >> 1) & 3, 0);
        let want: Vec<NodeFigures> = summary.nodes.iter().map(NodeFigures::from).collect();
        assert_eq!(decode_figures(&c).unwrap(), want);
        let cut = &c[..(PREFIX.len() + (c.len() - PREFIX.len()) / 2) / 4 * 4];
        assert!(decode(cut).is_err());
        assert_eq!(decode_figures(cut).unwrap(), want);
        let small = encode(&record()).unwrap();
        let packed = data_encoding::BASE64
            .decode(&small.as_bytes()[PREFIX.len()..])
            .unwrap();
        assert_eq!(packed[GZIP_HEADER_BYTES], 0, "a stored block first");
    }

    /// A head that is not whole figures: damaged, said so; one that never closes within the
    /// head's bound is read whole instead, within the decode's bound, and refused.
    #[test]
    fn a_hostile_head_is_refused() {
        let bad = marked(br#"{"slurmwatch_figures":[{"peak_working_set_bytes":"x"}],"nodes":{}}"#);
        assert!(matches!(decode_figures(&bad), Err(DecodeError::Damaged(e)) if e.contains("JSON")));
        let empty = marked(br#"{"slurmwatch_figures":[],"slurmwatch":{"job_id":"1","nodes":[]}}"#);
        assert_eq!(
            decode_figures(&empty),
            Err(DecodeError::Damaged("no node in it".into()))
        );
        let stored = |head: &[u8], rest: &[u8]| {
            let packed = gzip_member((head, rest)).unwrap();
            format!("{PREFIX}{}", data_encoding::BASE64.encode(&packed))
        };
        let bad = stored(
            br#"{"slurmwatch_figures":[{"oom_kills":"x"}]"#,
            br#","nodes":{}}"#,
        );
        assert!(matches!(decode_figures(&bad), Err(DecodeError::Damaged(e)) if e.contains("JSON")));
        // A stored head that stops short: the whole is read, and has no summary of ours.
        let short = stored(br#"{"slurmwatch_figures":[{}"#, br#"],"nodes":{}}"#);
        assert!(matches!(
            decode_figures(&short),
            Err(DecodeError::Damaged(_))
        ));
        let mut endless = br#"{"slurmwatch_figures":["#.to_vec();
        while endless.len() <= HEAD_MAX_BYTES {
            endless.extend_from_slice(b"{},");
        }
        assert!(matches!(
            decode_figures(&marked(&endless)),
            Err(DecodeError::Damaged(_))
        ));
    }
}
