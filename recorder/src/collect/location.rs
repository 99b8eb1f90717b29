//! Where a process's cgroup is: parse `/proc/<pid>/cgroup`, pick v1 or v2, and find the
//! Slurm step and job directories above it. Paths are derived, never globbed: Slurm 26.05
//! renamed job directories, and a glob would also find a neighbour's job.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// The cgroup of one process. Paths are as the kernel prints them: relative to the
/// controller's mount but starting with `/` (e.g. `/slurm_node1/uid_0/job_5/step_batch/task_0`).
/// Join them with [`under_mount`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupLocation {
    V1 {
        memory: PathBuf,
        cpuacct: PathBuf,
        blkio: Option<PathBuf>,
        pids: Option<PathBuf>,
    },
    V2 {
        path: PathBuf,
    },
}

/// Reads and parses `<proc_root>/<pid>/cgroup`.
pub fn locate(proc_root: &Path, pid: u32) -> Result<CgroupLocation> {
    let path = proc_root.join(pid.to_string()).join("cgroup");
    let text = std::fs::read_to_string(&path).map_err(|source| Error::Read {
        path: path.clone(),
        source,
    })?;
    parse_proc_cgroup(&text).ok_or_else(|| Error::Parse {
        path,
        what: "no v1 memory+cpuacct controllers and no v2 `0::` line".into(),
    })
}

/// The step's cgroup as slurmstepd's own `/proc/<pid>/cgroup` shows it: for a step whose
/// first task was reaped before its cgroup could be read (`srun true`). slurmstepd moves
/// itself into its step's group before any task starts — v2 `…/step_<s>/slurm`; v1 only in
/// the memory hierarchy (`…/step_<s>`, its cpuacct stays `/`: seen with Slurm 22.05), and
/// Slurm makes the same path in every v1 controller, so cpuacct is taken from memory's.
/// `None` when slurmstepd is not in a step group (`proctrack/linuxproc`).
pub fn locate_step_of_stepd(proc_root: &Path, stepd_pid: u32) -> Option<CgroupLocation> {
    let under_step = |p: &PathBuf| step_and_job_dirs(p).map(|(step, _)| step);
    match locate(proc_root, stepd_pid).ok()? {
        CgroupLocation::V1 {
            memory,
            cpuacct,
            blkio,
            pids,
        } => {
            let memory = under_step(&memory)?;
            Some(CgroupLocation::V1 {
                cpuacct: under_step(&cpuacct).unwrap_or_else(|| memory.clone()),
                memory,
                blkio: blkio.as_ref().and_then(under_step),
                pids: pids.as_ref().and_then(under_step),
            })
        }
        CgroupLocation::V2 { path } => Some(CgroupLocation::V2 {
            path: under_step(&path)?,
        }),
    }
}

/// Parses the text of `/proc/<pid>/cgroup`: lines `hierarchy-id:controller-list:path`.
///
/// Hybrid hosts list v1 controllers *and* an (unused) `0::/` line, so v1 wins whenever a
/// `memory` controller line exists; otherwise the `0::` line is the v2 cgroup. Controllers
/// may be co-mounted (`2:cpu,cpuacct:/...`), so the list is split on commas. v1 needs both
/// memory and cpuacct; with memory but no cpuacct the process has no usable v1 CPU figure
/// and this returns the v2 line if any (else `None`).
pub fn parse_proc_cgroup(text: &str) -> Option<CgroupLocation> {
    let mut memory = None;
    let mut cpuacct = None;
    let mut blkio = None;
    let mut pids = None;
    let mut unified = None;
    for line in text.lines() {
        // The path is the remainder after the second ':' and may itself contain ':'.
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let path = clean_path(path);
        if ctrls.is_empty() {
            // The v2 hierarchy is always id 0 with an empty controller list.
            if id == "0" {
                unified = Some(path);
            }
            continue;
        }
        for ctrl in ctrls.split(',') {
            let slot = match ctrl {
                "memory" => &mut memory,
                "cpuacct" => &mut cpuacct,
                "blkio" => &mut blkio,
                "pids" => &mut pids,
                _ => continue,
            };
            *slot = Some(path.clone());
        }
    }
    match (memory, cpuacct) {
        (Some(memory), Some(cpuacct)) => Some(CgroupLocation::V1 {
            memory,
            cpuacct,
            blkio,
            pids,
        }),
        _ => unified.map(|path| CgroupLocation::V2 { path }),
    }
}

/// The kernel appends ` (deleted)` to the path of a removed v1 cgroup; drop it so the
/// directory computations still work (the reads will then fail and report `None`).
fn clean_path(path: &str) -> PathBuf {
    PathBuf::from(path.strip_suffix(" (deleted)").unwrap_or(path))
}

/// The Slurm step directory (nearest ancestor-or-self whose name starts with `step_`) and
/// the job directory (its parent, whatever its name: Slurm 26.05 no longer uses `job_<id>`).
/// `None` when the path is not under a step (e.g. `/`, `/user.slice/...`): the caller then
/// falls back to /proc. A step directory directly under the root has no job dir: `None`.
pub fn step_and_job_dirs(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let step = path.ancestors().find(|p| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("step_"))
    })?;
    let job = step.parent()?;
    job.file_name()?;
    Some((step.to_path_buf(), job.to_path_buf()))
}

/// Joins a kernel-printed cgroup path (`/a/b`) under a mount directory. `Path::join` with an
/// absolute path would replace the mount, and `..` must never climb out of it.
pub fn under_mount(mount: &Path, cgroup_path: &Path) -> PathBuf {
    let mut out = mount.to_path_buf();
    for c in cgroup_path.components() {
        if let Component::Normal(n) = c {
            out.push(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/collect/proc_cgroup")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn v1(text: &str) -> (PathBuf, PathBuf, Option<PathBuf>, Option<PathBuf>) {
        match parse_proc_cgroup(text) {
            Some(CgroupLocation::V1 {
                memory,
                cpuacct,
                blkio,
                pids,
            }) => (memory, cpuacct, blkio, pids),
            other => panic!("expected v1, got {other:?}"),
        }
    }

    #[test]
    fn v1_hybrid_picks_v1_despite_unified_line() {
        let (mem, cpu, blkio, pids) = v1(&fixture("v1_hybrid_task.txt"));
        assert_eq!(
            mem,
            Path::new("/slurm_node1/uid_1000/job_42/step_batch/task_0")
        );
        assert_eq!(
            cpu,
            Path::new("/slurm_node1/uid_1000/job_42/step_batch/task_0")
        );
        // Slurm makes no blkio/pids cgroups: these are the node root.
        assert_eq!(blkio.as_deref(), Some(Path::new("/")));
        assert_eq!(pids.as_deref(), Some(Path::new("/")));
        let (step, job) = step_and_job_dirs(&mem).unwrap();
        assert_eq!(step, Path::new("/slurm_node1/uid_1000/job_42/step_batch"));
        assert_eq!(job, Path::new("/slurm_node1/uid_1000/job_42"));
        assert!(step_and_job_dirs(&blkio.unwrap()).is_none());
    }

    #[test]
    fn v1_real_machine_non_slurm_path() {
        // Captured verbatim on the development machine (not inside a Slurm job).
        let (mem, cpu, _, _) = v1(&fixture("v1_real_nonslurm.txt"));
        assert_eq!(
            mem,
            Path::new("/process_api/b9370f1f2c2695de1739861c8a5bdc4d")
        );
        assert_eq!(cpu, Path::new("/"));
        assert!(step_and_job_dirs(&mem).is_none());
        assert!(step_and_job_dirs(&cpu).is_none());
    }

    #[test]
    fn v1_joined_cpu_cpuacct() {
        let (mem, cpu, blkio, pids) = v1(&fixture("v1_cpu_cpuacct_joined.txt"));
        assert_eq!(mem, Path::new("/slurm_node1/uid_1000/job_7/step_0/task_1"));
        assert_eq!(cpu, mem);
        assert_eq!(blkio, None);
        assert_eq!(pids, None);
    }

    #[test]
    fn v2_pure_task_and_stepd() {
        let task = parse_proc_cgroup(&fixture("v2_task.txt")).unwrap();
        let CgroupLocation::V2 { path } = task else {
            panic!("expected v2: {task:?}")
        };
        assert_eq!(
            path,
            Path::new("/system.slice/slurmstepd.scope/job_42/step_0/user/task_0")
        );
        let (step, job) = step_and_job_dirs(&path).unwrap();
        assert_eq!(
            step,
            Path::new("/system.slice/slurmstepd.scope/job_42/step_0")
        );
        assert_eq!(job, Path::new("/system.slice/slurmstepd.scope/job_42"));

        let stepd = parse_proc_cgroup(&fixture("v2_slurmstepd.txt")).unwrap();
        let CgroupLocation::V2 { path } = stepd else {
            panic!("expected v2: {stepd:?}")
        };
        assert!(path.ends_with("step_extern/slurm"));
        let (step, _) = step_and_job_dirs(&path).unwrap();
        assert!(step.ends_with("job_42/step_extern"));
    }

    #[test]
    fn slurm_26_05_job_dir_name_is_not_required_to_start_with_job() {
        let text = "0::/system.slice/slurmstepd.scope/sluid_c0ffee1234/step_batch/user/task_0\n";
        let Some(CgroupLocation::V2 { path }) = parse_proc_cgroup(text) else {
            panic!()
        };
        let (step, job) = step_and_job_dirs(&path).unwrap();
        assert!(step.ends_with("sluid_c0ffee1234/step_batch"));
        assert!(job.ends_with("slurmstepd.scope/sluid_c0ffee1234"));
    }

    #[test]
    fn not_under_a_step_or_malformed() {
        assert!(
            step_and_job_dirs(Path::new("/user.slice/user-1000.slice/session-3.scope")).is_none()
        );
        assert!(step_and_job_dirs(Path::new("/")).is_none());
        // A step directory at the root has no job directory.
        assert!(step_and_job_dirs(Path::new("/step_0/user")).is_none());
        // `job_step_1` does not start with `step_`.
        assert!(step_and_job_dirs(Path::new("/a/job_step_1")).is_none());
        assert_eq!(parse_proc_cgroup(""), None);
        assert_eq!(parse_proc_cgroup("garbage\n\n::\n1:name=systemd:/\n"), None);
        // memory without cpuacct and no unified line: nothing usable.
        assert_eq!(parse_proc_cgroup("4:memory:/a\n"), None);
    }

    #[test]
    fn deleted_suffix_and_colons_in_path() {
        let Some(CgroupLocation::V2 { path }) =
            parse_proc_cgroup("0::/a:b/step_0/slurm (deleted)\n")
        else {
            panic!()
        };
        assert_eq!(path, Path::new("/a:b/step_0/slurm"));
    }

    #[test]
    fn under_mount_never_escapes() {
        let m = Path::new("/sys/fs/cgroup/memory");
        assert_eq!(
            under_mount(m, Path::new("/slurm_n/uid_0/job_1")),
            Path::new("/sys/fs/cgroup/memory/slurm_n/uid_0/job_1")
        );
        assert_eq!(under_mount(m, Path::new("/../../etc")), m.join("etc"));
        assert_eq!(under_mount(m, Path::new("/")), m);
    }

    #[test]
    fn locate_reads_proc_file() {
        let proc_root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/collect/proc_tree");
        let loc = locate(&proc_root, 4242).unwrap();
        assert!(matches!(loc, CgroupLocation::V1 { .. }));
        assert!(matches!(locate(&proc_root, 1), Err(Error::Read { .. })));
    }
}
