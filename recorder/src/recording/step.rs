//! What a step records and where, from the values Slurm gives the plugin: the node's name,
//! the file's cap, the job's memory, whether its GPUs are worth opening NVML for, and what
//! to do with a job file already at the step's path.

use crate::collect::gpu::{CardRef, Wanted};

/// Slurm's reserved step ids (slurm.h): these steps have names, not numbers.
const SLURM_PENDING_STEP: u32 = 0xffff_fffd;
const SLURM_EXTERN_CONT: u32 = 0xffff_fffc;
const SLURM_BATCH_SCRIPT: u32 = 0xffff_fffb;
const SLURM_INTERACTIVE_STEP: u32 = 0xffff_fffa;

/// The step's name as sacct prints it after the dot (`batch`, `extern`, `0`, `1`, ...):
/// the step's series and its row in the steps table.
pub fn step_name(step_id: u32) -> String {
    match step_id {
        SLURM_BATCH_SCRIPT => "batch".into(),
        SLURM_EXTERN_CONT => "extern".into(),
        SLURM_INTERACTIVE_STEP => "interactive".into(),
        SLURM_PENDING_STEP => "pending".into(),
        n => n.to_string(),
    }
}

/// The node's name as Slurm knows it (`SLURMD_NODENAME` from slurmd's own environment),
/// else the host's short name, else `unknown`: a plain name only, as it becomes a file-name
/// component (`<job>.<node>.sqlite`, a `%n` spool).
pub fn node_name(
    slurmd_nodename: Option<String>,
    host_name: impl FnOnce() -> Option<String>,
) -> String {
    slurmd_nodename
        .filter(|n| crate::options::is_plain_name(n))
        .or_else(host_name)
        .unwrap_or_else(|| "unknown".into())
}

/// The file's cap in bytes: the site's `max_file_mb=`, lowered (never raised) by a test
/// build's per-job cap.
pub fn file_cap_bytes(max_file_mb: u32, test_cap_bytes: Option<u64>) -> u64 {
    let site = u64::from(max_file_mb) << 20;
    test_cap_bytes.map_or(site, |t| t.min(site))
}

/// The job's memory on this node from Slurm's MiB; 0 means the job set no limit.
pub fn memory_allocated_bytes(alloc_mib: Option<u64>) -> Option<u64> {
    alloc_mib.filter(|m| *m > 0).map(|m| m * 1024 * 1024)
}

/// Whether any card the step's environment names is one Slurm allocated to the job here
/// (a UUID is checked once NVML is open; it counts when the job has any card). When none
/// is, NVML is never loaded.
pub fn any_wanted_card_allocated(wanted: &[Wanted], allocated: &[u32]) -> bool {
    wanted.iter().any(|w| match w.card {
        CardRef::Index(i) => allocated.contains(&i),
        CardRef::Uuid(_) => !allocated.is_empty(),
    })
}

/// What a step does with a job file it found at its path and could open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExistingFile {
    /// This job's file: record into it.
    Join,
    /// An earlier job's with the same id (another user's, or another incarnation): moved
    /// aside inside the root-owned spool, never written into.
    MoveAside,
}

/// Judges an existing file by its `uid` and `incarnation` meta against this job's.
/// `continues_the_job` (asked only for the same user, when the incarnations differ) says
/// whether this step is a later step of the same job after a moment with none running: the
/// incarnation key then changes within one job (see `store::continues_the_job`).
pub fn existing_file(
    file_uid: Option<&str>,
    file_incarnation: Option<&str>,
    (uid, incarnation): (u32, Option<&str>),
    continues_the_job: impl FnOnce() -> bool,
) -> ExistingFile {
    let same_user = file_uid == Some(uid.to_string().as_str());
    if same_user && (file_incarnation == incarnation || continues_the_job()) {
        ExistingFile::Join
    } else {
        ExistingFile::MoveAside
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_step_ids_have_slurms_names() {
        // The values of slurm.h 22.05 (SLURM_BATCH_SCRIPT is 0xfffffffb there).
        assert_eq!(step_name(4_294_967_291), "batch");
        assert_eq!(step_name(4_294_967_292), "extern");
        assert_eq!(step_name(4_294_967_290), "interactive");
        assert_eq!(step_name(4_294_967_293), "pending");
        assert_eq!(step_name(0), "0");
        assert_eq!(step_name(17), "17");
        // Each reserved name is one `store` knows.
        assert!(crate::store::is_job_series_step(&step_name(
            SLURM_BATCH_SCRIPT
        )));
        assert_eq!(step_name(SLURM_EXTERN_CONT), crate::store::EXTERN_STEP);
    }

    #[test]
    fn the_node_name_is_slurmds_when_plain_else_the_hosts() {
        let host = || Some("host1".to_string());
        assert_eq!(node_name(Some("sw2".into()), host), "sw2");
        assert_eq!(node_name(Some("../etc".into()), host), "host1");
        assert_eq!(node_name(Some(String::new()), host), "host1");
        assert_eq!(node_name(None, host), "host1");
        assert_eq!(node_name(None, || None), "unknown");
    }

    #[test]
    fn a_test_cap_lowers_the_sites_cap_and_never_raises_it() {
        assert_eq!(file_cap_bytes(64, None), 64 * 1024 * 1024);
        assert_eq!(file_cap_bytes(64, Some(200_000)), 200_000);
        assert_eq!(file_cap_bytes(1, Some(u64::MAX)), 1 << 20);
    }

    #[test]
    fn no_memory_limit_is_not_a_zero_byte_allocation() {
        assert_eq!(memory_allocated_bytes(Some(2048)), Some(2 << 30));
        assert_eq!(memory_allocated_bytes(Some(0)), None);
        assert_eq!(memory_allocated_bytes(None), None);
    }

    #[test]
    fn nvml_is_opened_only_for_a_named_card_slurm_allocated() {
        let index = |i| Wanted {
            card: CardRef::Index(i),
            cuda_index: Some(0),
        };
        let uuid = Wanted {
            card: CardRef::Uuid("GPU-5f1c".into()),
            cuda_index: None,
        };
        assert!(any_wanted_card_allocated(&[index(0), index(2)], &[2, 3]));
        assert!(!any_wanted_card_allocated(&[index(1)], &[2, 3]));
        assert!(any_wanted_card_allocated(std::slice::from_ref(&uuid), &[0]));
        assert!(!any_wanted_card_allocated(&[uuid], &[]));
        assert!(!any_wanted_card_allocated(&[], &[0, 1]));
    }

    #[test]
    fn an_existing_file_is_joined_only_when_it_is_this_jobs() {
        let me = (1000, Some("boot1:4711"));
        let never = || panic!("asked for another user's file");
        assert_eq!(
            existing_file(Some("1000"), Some("boot1:4711"), me, || false),
            ExistingFile::Join
        );
        // Another incarnation of the same id: joined only as a continuation of the job.
        assert_eq!(
            existing_file(Some("1000"), Some("boot1:99"), me, || false),
            ExistingFile::MoveAside
        );
        assert_eq!(
            existing_file(Some("1000"), Some("boot1:99"), me, || true),
            ExistingFile::Join
        );
        // Another user's file is never joined, whatever its incarnation.
        assert_eq!(
            existing_file(Some("1001"), Some("boot1:4711"), me, never),
            ExistingFile::MoveAside
        );
        assert_eq!(
            existing_file(None, None, (1000, None), never),
            ExistingFile::MoveAside
        );
        // Neither incarnation known, same user: the same job.
        assert_eq!(
            existing_file(Some("1000"), None, (1000, None), || false),
            ExistingFile::Join
        );
    }
}
