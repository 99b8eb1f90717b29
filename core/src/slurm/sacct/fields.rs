//! One sacct value each: a state, an exit code, a TRES list, `ReqMem`, a GPU count from old
//! `AllocGRES`, a `standard` timestamp. Each parser is the only one of its value.

use serde::Serialize;

use crate::slurm::units::{parse_size, split_ascii, split_once_ascii, trim};

/// A state, with the `by <uid>` of `CANCELLED by 0` split off.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct State {
    /// `COMPLETED`, `FAILED`, `OUT_OF_MEMORY`, `TIMEOUT`, `CANCELLED`, `RUNNING`, ...
    pub name: String,
    /// Who cancelled (sacct prints only the uid).
    pub cancelled_by_uid: Option<u32>,
}

impl State {
    pub fn parse(s: &str) -> State {
        // Nearly every state is one word of printable ASCII: nothing to split.
        if s.bytes().all(|b| (b'!'..=b'~').contains(&b)) {
            return State {
                name: s.to_string(),
                cancelled_by_uid: None,
            };
        }
        let mut it = s.split_whitespace();
        let name = it.next().unwrap_or("").to_string();
        let cancelled_by_uid = match (it.next(), it.next()) {
            (Some("by"), Some(uid)) => uid.parse().ok(),
            _ => None,
        };
        State {
            name,
            cancelled_by_uid,
        }
    }
}

/// `ExitCode` `code:signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExitCode {
    pub code: i32,
    pub signal: i32,
}

impl ExitCode {
    pub fn parse(s: &str) -> Option<ExitCode> {
        let (c, sig) = split_once_ascii(s, b':')?;
        Some(ExitCode {
            code: trim(c).parse().ok()?,
            signal: trim(sig).parse().ok()?,
        })
    }
}

/// A TRES list (`cpu=2,mem=1G,node=1,gres/gpu=4,gres/gpu:a100=4,billing=2`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tres {
    pub cpus: Option<u64>,
    /// Total over all nodes of the allocation.
    pub memory_bytes: Option<u64>,
    pub nodes: Option<u64>,
    /// GPUs over all nodes: the untyped `gres/gpu` count, else the sum of the typed ones.
    pub gpus: Option<u64>,
    /// `a100` from `gres/gpu:a100=4`.
    pub gpu_types: Vec<String>,
}

impl Tres {
    pub fn parse(s: &str) -> Tres {
        let mut t = Tres::default();
        let mut untyped = None;
        let mut typed: Option<u64> = None;
        for part in split_ascii(s, b',').map(trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = split_once_ascii(part, b'=') else {
                continue;
            };
            match k {
                "cpu" => t.cpus = v.parse().ok(),
                "mem" => t.memory_bytes = parse_size(v, 1 << 20),
                "node" => t.nodes = v.parse().ok(),
                "gres/gpu" => untyped = v.parse().ok(),
                _ => {
                    if let Some(ty) = k.strip_prefix("gres/gpu:") {
                        if let Ok(n) = v.parse::<u64>() {
                            typed = Some(typed.unwrap_or(0) + n);
                            t.gpu_types.push(ty.to_string());
                        }
                    }
                }
            }
        }
        t.gpus = untyped.or(typed);
        t
    }
}

/// Pre-20.11 `AllocGRES`/`ReqGRES`: `gpu:4`, `gpu:tesla:2`, `gpu:2(IDX:0-1)`, comma-separated.
pub fn parse_gres_gpus(s: &str) -> Option<u64> {
    let mut total = None;
    for part in s.split(',') {
        let part = part.split('(').next().unwrap_or("");
        let mut f = part.split(':');
        if f.next() != Some("gpu") {
            continue;
        }
        let n = f
            .next_back()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(1);
        total = Some(total.unwrap_or(0) + n);
    }
    total
}

/// What `ReqMem` asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "per")]
pub enum ReqMem {
    /// Per node. `bytes: 0` (`0n`, `--mem=0`) means all of each node's memory.
    Node { bytes: u64 },
    /// Per allocated CPU (`--mem-per-cpu`).
    Cpu { bytes: u64 },
}

impl ReqMem {
    pub fn parse(s: &str) -> Option<ReqMem> {
        let s = trim(s);
        if s.is_empty() {
            return None;
        }
        let (body, per_cpu) = match s.as_bytes()[s.len() - 1] {
            b'n' => (&s[..s.len() - 1], false),
            b'c' => (&s[..s.len() - 1], true),
            _ => (s, false),
        };
        let bytes = parse_size(body, 1 << 20)?;
        Some(if per_cpu {
            ReqMem::Cpu { bytes }
        } else {
            ReqMem::Node { bytes }
        })
    }

    /// True for `0n`: the whole node, not "no memory".
    pub fn is_whole_node(&self) -> bool {
        matches!(self, ReqMem::Node { bytes: 0 })
    }
}

/// `2026-11-30T10:44:58` in the local zone (the `standard` format) into Unix seconds.
/// `Unknown`, `None` and anything else are `None`.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = s.split_once('T')?;
    let d: Vec<i32> = date
        .split('-')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<i32> = time
        .split(':')
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || t.len() != 3 {
        return None;
    }
    // SAFETY: tm is plain data; mktime only reads and normalises it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    tm.tm_year = d[0] - 1900;
    tm.tm_mon = d[1] - 1;
    tm.tm_mday = d[2];
    tm.tm_hour = t[0];
    tm.tm_min = t[1];
    tm.tm_sec = t[2];
    tm.tm_isdst = -1;
    let v = unsafe { libc::mktime(&mut tm) };
    (v != -1).then_some(v as i64)
}

/// `cpu=00:00:04,energy=0,fs/disk=2012,mem=1205656K,pages=0,vmem=...`: the value of `key`.
pub fn tres_usage<'a>(tres: &'a str, key: &str) -> Option<&'a str> {
    split_ascii(tres, b',')
        .filter_map(|kv| split_once_ascii(kv, b'='))
        .find(|(k, _)| trim(k) == key)
        .map(|(_, v)| trim(v))
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::units::parse_duration;

    #[test]
    fn sizes_durations_states() {
        assert_eq!(parse_size("105460K", 1), Some(105460 * 1024));
        assert_eq!(
            parse_size("600.05M", 1),
            Some((600.05 * 1048576.0_f64).round() as u64)
        );
        assert_eq!(parse_size("0", 1), Some(0));
        assert_eq!(parse_size("", 1), None);
        assert_eq!(parse_size("12X", 1), None);
        assert_eq!(parse_duration("00:04.135"), Some(4.135));
        assert_eq!(parse_duration("1-02:03:04"), Some(93784.0));
        assert_eq!(parse_duration("UNLIMITED"), None);
        assert_eq!(
            State::parse("CANCELLED by 0"),
            State {
                name: "CANCELLED".into(),
                cancelled_by_uid: Some(0)
            }
        );
        for s in [
            "COMPLETED",
            "",
            " RUNNING ",
            "CANCELLED by 1000",
            "CANCELLED\tby 7",
            "é",
        ] {
            let mut it = s.split_whitespace();
            assert_eq!(State::parse(s).name, it.next().unwrap_or(""), "{s:?}");
        }
        assert_eq!(
            ExitCode::parse("0:125"),
            Some(ExitCode {
                code: 0,
                signal: 125
            })
        );
    }
}
