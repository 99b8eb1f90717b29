//! Which cards are the job's: from the step's environment as Slurm sets it.
//!
//! These variables are the job owner's text (a job can export anything before `srun`), so
//! they are parsed strictly (ordinals or UUID syntax, bounded) and only ever *select* among
//! the cards NVML reports; they never name a path or a library.

use serde::{Deserialize, Serialize};

/// The step environment variables that name GPUs, as read by the plugin (`spank_getenv`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuEnv {
    /// `CUDA_VISIBLE_DEVICES`: the order the user's code sees (`cuda:0` is the first).
    pub cuda_visible_devices: Option<String>,
    /// `SLURM_STEP_GPUS` / `SLURM_JOB_GPUS`: Slurm's GRES indices on the node, which are
    /// NVML indices where the device files are numbered like NVML's (the usual gres.conf).
    pub slurm_step_gpus: Option<String>,
    pub slurm_job_gpus: Option<String>,
    /// `GPU_DEVICE_ORDINAL`: Slurm sets it beside `CUDA_VISIBLE_DEVICES`.
    pub gpu_device_ordinal: Option<String>,
}

impl GpuEnv {
    /// The names the plugin reads, in the order of the fields.
    pub const NAMES: [&'static str; 4] = [
        "CUDA_VISIBLE_DEVICES",
        "SLURM_STEP_GPUS",
        "SLURM_JOB_GPUS",
        "GPU_DEVICE_ORDINAL",
    ];

    pub fn from_lookup(mut get: impl FnMut(&str) -> Option<String>) -> GpuEnv {
        GpuEnv {
            cuda_visible_devices: get(Self::NAMES[0]),
            slurm_step_gpus: get(Self::NAMES[1]),
            slurm_job_gpus: get(Self::NAMES[2]),
            gpu_device_ordinal: get(Self::NAMES[3]),
        }
    }
}

/// One entry of a device list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CardRef {
    Index(u32),
    /// `GPU-…` or `MIG-…` as NVML prints it (compared case-insensitively).
    Uuid(String),
}

/// A wanted card: how NVML knows it, and its `cuda:N` position if the job has an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wanted {
    pub card: CardRef,
    pub cuda_index: Option<u32>,
}

/// Most cards a node has (NVML's own limit is far lower); longer lists are refused.
const MAX_ENTRIES: usize = 64;
const MAX_LEN: usize = 4096;

/// Parses `0,1,3` or `GPU-uuid,GPU-uuid`; `None` for anything else (empty, `NoDevFiles`,
/// spaces, signs, ranges, over-long, duplicates).
pub fn parse_list(s: &str) -> Option<Vec<CardRef>> {
    if s.is_empty() || s.len() > MAX_LEN {
        return None;
    }
    let mut out = Vec::new();
    for item in s.split(',') {
        let r = if !item.is_empty() && item.len() <= 4 && item.bytes().all(|b| b.is_ascii_digit()) {
            CardRef::Index(item.parse().ok()?)
        } else if is_uuid(item) {
            CardRef::Uuid(item.to_string())
        } else {
            return None;
        };
        if out.contains(&r) || out.len() >= MAX_ENTRIES {
            return None;
        }
        out.push(r);
    }
    Some(out)
}

/// `GPU-` or `MIG-` followed by hex digits and dashes (NVML's UUID form), bounded length.
fn is_uuid(s: &str) -> bool {
    let body = s
        .strip_prefix("GPU-")
        .or_else(|| s.strip_prefix("MIG-"))
        .or_else(|| s.strip_prefix("gpu-"))
        .or_else(|| s.strip_prefix("mig-"));
    matches!(body, Some(b) if (8..=96).contains(&b.len())
        && b.bytes().all(|c| c.is_ascii_hexdigit() || c == b'-' || c == b'/')
        && b.bytes().filter(u8::is_ascii_hexdigit).count() >= 8)
}

/// The job's cards, in `cuda:N` order where the job has one; empty when the environment
/// names none (then no GPU is recorded: never the whole node's).
///
/// - UUIDs in `CUDA_VISIBLE_DEVICES`: selected by UUID, `cuda:N` by position.
/// - Ordinals in `CUDA_VISIBLE_DEVICES` with a Slurm GRES list of the same length: with
///   `ConstrainDevices` the ordinals are relative (`0,1`) and the GRES list (`2,3`) holds
///   the node's indices; without it both agree. So `cuda:N` = the N-th GRES index.
/// - Ordinals alone: they are NVML indices (no device hiding is in effect).
/// - A GRES list alone: those NVML indices, in that order.
pub fn wanted_cards(env: &GpuEnv) -> Vec<Wanted> {
    let parse = |v: &Option<String>| v.as_deref().and_then(parse_list);
    let gres = parse(&env.slurm_step_gpus).or_else(|| parse(&env.slurm_job_gpus));
    let gres = gres.filter(|l| l.iter().all(|r| matches!(r, CardRef::Index(_))));
    let cuda = parse(&env.cuda_visible_devices).or_else(|| parse(&env.gpu_device_ordinal));
    let ordered = |list: Vec<CardRef>| -> Vec<Wanted> {
        list.into_iter()
            .enumerate()
            .map(|(i, card)| Wanted {
                card,
                cuda_index: Some(i as u32),
            })
            .collect()
    };
    match (cuda, gres) {
        (Some(c), Some(g)) if c.iter().all(|r| matches!(r, CardRef::Index(_))) => {
            if c.len() == g.len() {
                ordered(g)
            } else {
                // Inconsistent lists (the job rewrote one): trust Slurm's, without an order.
                g.into_iter()
                    .map(|card| Wanted {
                        card,
                        cuda_index: None,
                    })
                    .collect()
            }
        }
        (Some(c), _) => ordered(c),
        (None, Some(g)) => ordered(g),
        (None, None) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(cvd: Option<&str>, step: Option<&str>) -> GpuEnv {
        GpuEnv {
            cuda_visible_devices: cvd.map(String::from),
            slurm_step_gpus: step.map(String::from),
            ..GpuEnv::default()
        }
    }

    fn idx(w: &[Wanted]) -> Vec<(CardRef, Option<u32>)> {
        w.iter().map(|w| (w.card.clone(), w.cuda_index)).collect()
    }

    #[test]
    fn lists_parse_strictly() {
        assert_eq!(
            parse_list("2,3"),
            Some(vec![CardRef::Index(2), CardRef::Index(3)])
        );
        let u = "GPU-5f1c2a3b-1111-2222-3333-444455556666";
        assert_eq!(parse_list(u), Some(vec![CardRef::Uuid(u.into())]));
        for bad in [
            "",
            "NoDevFiles",
            "0, 1",
            "-1",
            "+1",
            "0-3",
            "1,1",
            "99999",
            "GPU-",
            "GPU-../../etc",
            "/dev/nvidia0",
            "0,",
            "GPU-zzzzzzzz",
        ] {
            assert_eq!(parse_list(bad), None, "{bad:?}");
        }
        assert_eq!(parse_list(&"1,".repeat(3000)), None);
    }

    #[test]
    fn ordinals_alone_are_nvml_indices() {
        let w = wanted_cards(&env(Some("2,3"), None));
        assert_eq!(
            idx(&w),
            vec![(CardRef::Index(2), Some(0)), (CardRef::Index(3), Some(1))]
        );
    }

    #[test]
    fn constrained_devices_map_through_the_gres_list() {
        let w = wanted_cards(&env(Some("0,1"), Some("5,7")));
        assert_eq!(
            idx(&w),
            vec![(CardRef::Index(5), Some(0)), (CardRef::Index(7), Some(1))]
        );
    }

    #[test]
    fn uuids_select_by_uuid() {
        let w = wanted_cards(&env(
            Some("GPU-aaaaaaaa-bbbb,GPU-cccccccc-dddd"),
            Some("0,1"),
        ));
        assert_eq!(w[1].card, CardRef::Uuid("GPU-cccccccc-dddd".into()));
        assert_eq!(w[1].cuda_index, Some(1));
    }

    #[test]
    fn nothing_named_means_no_cards() {
        assert!(wanted_cards(&GpuEnv::default()).is_empty());
        assert!(wanted_cards(&env(Some("NoDevFiles"), None)).is_empty());
        let w = wanted_cards(&GpuEnv {
            slurm_job_gpus: Some("1".into()),
            ..GpuEnv::default()
        });
        assert_eq!(idx(&w), vec![(CardRef::Index(1), Some(0))]);
    }
}
