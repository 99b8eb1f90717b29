//! Readers of the job's cgroup (v1, v2) and of /proc, each taking a root path.
//!
//! [`JobCollector`] is what the sampler holds: it finds the job's cgroup once from
//! `/proc/<task pid>/cgroup` (never by globbing), pre-computes every file path, and then
//! reads job-level and step-level [`UsageReading`]s. With no job cgroup it falls back to
//! summing the step's process trees in /proc.

pub mod cgroup_v1;
pub mod cgroup_v2;
pub mod gpu;
pub mod location;
mod parse;
pub mod procfs;
mod tree;

use std::path::{Path, PathBuf};

pub use cgroup_v1::{read_v1, V1Reader};
pub use cgroup_v2::{read_v2, V2Reader};
pub use location::{locate, parse_proc_cgroup, step_and_job_dirs, under_mount, CgroupLocation};
pub(crate) use procfs::is_this_jobs_scan_key;
pub use procfs::{find_step_pids, job_incarnation, parse_stat, ProcStat, ProcTreeTracker};

use crate::sample::{Source, UsageReading};

/// The real mount and proc roots; tests pass fixture trees instead.
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";
pub const PROC_ROOT: &str = "/proc";

/// What sets a cgroup incarnation key apart from a /proc one (`<boot>:<ticks>`).
pub(crate) const CGROUP_KEY_MARK: &str = ":cgroup:";

/// Job- and step-level readers for one step of one job, chosen once at construction.
#[derive(Debug)]
pub struct JobCollector {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    V1 {
        job: Box<V1Reader>,
        step: Box<V1Reader>,
    },
    V2 {
        job: Box<V2Reader>,
        step: Box<V2Reader>,
    },
    Proc {
        proc_root: PathBuf,
        job_id: u32,
        /// The job's slurmstepds found at construction (the incarnation key's).
        stepds: Vec<u32>,
        job: Box<ProcTreeTracker>,
        step: Box<ProcTreeTracker>,
    },
}

impl JobCollector {
    /// Locates `task_pid`'s cgroup under `proc_root` and picks the readers. Falls back to
    /// /proc (`Source::Proc`) when the cgroup cannot be read or is not under a Slurm step
    /// directory (`proctrack/linuxproc`, or a process outside the job).
    pub fn new(cgroup_root: &Path, proc_root: &Path, task_pid: u32, job_id: u32) -> JobCollector {
        Self::locate_or_proc(cgroup_root, proc_root, task_pid, None, job_id)
    }

    /// As [`new`](Self::new), from inside the step's slurmstepd (`stepd_pid`, the sampler's
    /// own process): when the task has already been reaped (`srun true` often is before the
    /// sampler runs), the step's cgroup is found from slurmstepd's own group instead of
    /// falling back to /proc, whose incarnation key would differ from the job's file's.
    pub fn for_step(
        cgroup_root: &Path,
        proc_root: &Path,
        task_pid: u32,
        stepd_pid: u32,
        job_id: u32,
    ) -> JobCollector {
        Self::locate_or_proc(cgroup_root, proc_root, task_pid, Some(stepd_pid), job_id)
    }

    /// The step's cgroup only, as [`for_step`](Self::for_step) finds it, or `None` where it
    /// would fall back to /proc. Reads only the two processes' `/proc/<pid>/cgroup` and then
    /// cgroup files, none of which a user's process can hold up; the /proc fallback reads
    /// other processes' command lines, which block while their memory map is locked (a
    /// page fault stuck on a filesystem the user serves), so a callback that must not wait
    /// unbounded uses this.
    pub fn in_cgroup(
        cgroup_root: &Path,
        proc_root: &Path,
        task_pid: u32,
        stepd_pid: u32,
    ) -> Option<JobCollector> {
        Self::cgroup_kind_of(cgroup_root, proc_root, task_pid, Some(stepd_pid))
            .map(|kind| JobCollector { kind })
    }

    /// Whether readings come from /proc (which may block on a user's process; see
    /// [`in_cgroup`](Self::in_cgroup)).
    pub fn reads_proc(&self) -> bool {
        matches!(self.kind, Kind::Proc { .. })
    }

    fn cgroup_kind_of(
        cgroup_root: &Path,
        proc_root: &Path,
        task_pid: u32,
        stepd_pid: Option<u32>,
    ) -> Option<Kind> {
        let from_task = || {
            locate(proc_root, task_pid)
                .ok()
                .and_then(|loc| cgroup_kind(cgroup_root, &loc))
        };
        let from_stepd = || {
            stepd_pid
                .and_then(|pid| location::locate_step_of_stepd(proc_root, pid))
                .and_then(|loc| cgroup_kind(cgroup_root, &loc))
        };
        from_task().or_else(from_stepd)
    }

    /// The step's cgroup, else the /proc fallback.
    fn locate_or_proc(
        cgroup_root: &Path,
        proc_root: &Path,
        task_pid: u32,
        stepd_pid: Option<u32>,
        job_id: u32,
    ) -> JobCollector {
        let in_cgroup = Self::cgroup_kind_of(cgroup_root, proc_root, task_pid, stepd_pid);
        let kind = in_cgroup.unwrap_or_else(|| {
            // The job level: everything below the job's slurmstepds (not their own CPU,
            // which sacct leaves out too); if they cannot be found, the task's tree.
            let stepds = find_step_pids(proc_root, job_id);
            let job = if stepds.is_empty() {
                ProcTreeTracker::new(proc_root, &[task_pid])
            } else {
                ProcTreeTracker::descendants_of(proc_root, &stepds)
            };
            // The step: everything below its slurmstepd (the task's parent), which also
            // catches the tasks' final moments through what slurmstepd reaps.
            let step = match procfs::parent_of(proc_root, task_pid) {
                Some(stepd) if stepds.contains(&stepd) => {
                    ProcTreeTracker::descendants_of(proc_root, &[stepd])
                }
                _ => ProcTreeTracker::new(proc_root, &[task_pid]),
            };
            Kind::Proc {
                proc_root: proc_root.to_path_buf(),
                job_id,
                stepds,
                job: Box::new(job),
                step: Box::new(step),
            }
        });
        JobCollector { kind }
    }

    /// A key that tells this job from an earlier job with the same id on this node (Slurm
    /// reuses ids after a state loss or a wrap at MaxJobId): this boot's id and, in a cgroup,
    /// the job directory's inode number. That number is the kernel's id of the cgroup, never
    /// given to another directory within a boot (v2: the cgroup id; v1: kernfs's 64-bit node
    /// id, Linux ≥ 5.5; seen here: a v1 group made and removed three times got three
    /// numbers), and the directory lives while any step of the job runs on the node. One
    /// `stat`, where the /proc kind ([`job_incarnation`], kept for /proc mode) reads every
    /// process's command line on the node: 0.6 ms with 75 processes, 13 ms with 1,075
    /// (`examples/incarnation_cost.rs`) — per step, in every slurmstepd.
    pub fn incarnation(&self, proc_root: &Path) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        let dir = match &self.kind {
            Kind::V1 { job, .. } => job.memory_dir(),
            Kind::V2 { job, .. } => job.dir(),
            Kind::Proc { stepds, .. } => return procfs::incarnation_of_stepds(proc_root, stepds),
        };
        let ino = std::fs::symlink_metadata(dir).ok()?.ino();
        Some(format!(
            "{}{CGROUP_KEY_MARK}{ino}",
            procfs::boot_id(proc_root)?
        ))
    }

    pub fn source(&self) -> Source {
        match self.kind {
            Kind::V1 { .. } => Source::CgroupV1,
            Kind::V2 { .. } => Source::CgroupV2,
            Kind::Proc { .. } => Source::Proc,
        }
    }

    /// Another local task of the step (SPANK `task_post_fork` runs once per task). Only the
    /// /proc fallback needs it: in a cgroup every task of the step is already counted.
    pub fn add_task_pid(&mut self, pid: u32) {
        if let Kind::Proc { job, step, .. } = &mut self.kind {
            // Below a slurmstepd root every task is already a descendant.
            for t in [job, step] {
                if t.counts_roots() {
                    t.add_root(pid);
                }
            }
        }
    }

    /// The whole job on this node (all steps). In v1 and v2 the job directory's counters
    /// are hierarchical, so concurrent steps are counted once.
    pub fn read_job(&mut self) -> UsageReading {
        match &mut self.kind {
            Kind::V1 { job, .. } => job.read(),
            Kind::V2 { job, .. } => job.read(),
            Kind::Proc {
                proc_root,
                job_id,
                job,
                ..
            } => {
                // Steps start during the job: look for new slurmstepds at every reading
                // (known roots are not re-added). Only in this fallback mode.
                for pid in find_step_pids(proc_root, *job_id) {
                    job.add_root(pid);
                }
                job.read()
            }
        }
    }

    /// The job's working set and CPU only (for the running maxima between stored rows);
    /// the working set is left out when it cannot exceed `working_set_seen`, the largest
    /// seen since the last stored row ([`needs_cache_figure`]). The /proc fallback has no
    /// cheaper read than its full walk.
    pub fn read_job_fast(&mut self, working_set_seen: Option<u64>) -> UsageReading {
        match &mut self.kind {
            Kind::V1 { job, .. } => job.read_fast(working_set_seen),
            Kind::V2 { job, .. } => job.read_fast(working_set_seen),
            // No new-step search here (a full /proc scan): stored rows do that.
            Kind::Proc { job, .. } => job.read(),
        }
    }

    /// The step's working set and CPU only, as [`read_job_fast`](Self::read_job_fast).
    pub fn read_step_fast(&mut self, working_set_seen: Option<u64>) -> UsageReading {
        match &mut self.kind {
            Kind::V1 { step, .. } => step.read_fast(working_set_seen),
            Kind::V2 { step, .. } => step.read_fast(working_set_seen),
            Kind::Proc { step, .. } => step.read(),
        }
    }

    /// The step this collector was created for.
    pub fn read_step(&mut self) -> UsageReading {
        match &mut self.kind {
            Kind::V1 { step, .. } => step.read(),
            Kind::V2 { step, .. } => step.read(),
            Kind::Proc { step, .. } => step.read(),
        }
    }
}

/// Whether a fast read must read the file cache (memory.stat, the costliest of its files)
/// to know the working set: not when the usage is at most `working_set_seen`, the largest
/// working set already seen since the last stored row — the working set is the usage less
/// the file cache, so it cannot be a new maximum, and leaving it unknown loses nothing.
pub(crate) fn needs_cache_figure(usage_bytes: Option<u64>, working_set_seen: Option<u64>) -> bool {
    match (usage_bytes, working_set_seen) {
        (Some(usage), Some(seen)) => usage > seen,
        _ => true,
    }
}

/// Readers for a located cgroup, or `None` when it is not inside a Slurm step.
/// Whether `file_key`, kept in a job's file and differing from this step's own key, is
/// this job's key all the same: a file keyed by a /proc scan (a plugin built before the
/// cgroup key, or a step without a cgroup: [`is_this_jobs_scan_key`]), or a file keyed by
/// the job's cgroup met by a step that found none — then any live slurmstepd of the job
/// whose own group is under that job directory says so. Costs a /proc scan: ask only on a
/// mismatch.
pub fn is_this_jobs_key(file_key: &str, cgroup_root: &Path, proc_root: &Path, job_id: u32) -> bool {
    if !file_key.contains(CGROUP_KEY_MARK) {
        return is_this_jobs_scan_key(file_key, proc_root, job_id);
    }
    find_step_pids(proc_root, job_id).into_iter().any(|pid| {
        location::locate_step_of_stepd(proc_root, pid)
            .and_then(|loc| cgroup_kind(cgroup_root, &loc))
            .and_then(|kind| JobCollector { kind }.incarnation(proc_root))
            .as_deref()
            == Some(file_key)
    })
}

fn cgroup_kind(cgroup_root: &Path, loc: &CgroupLocation) -> Option<Kind> {
    match loc {
        CgroupLocation::V1 {
            memory,
            cpuacct,
            blkio,
            pids,
        } => {
            // Both memory and cpuacct must be the job's own groups; reading a node-level
            // directory would credit the neighbours' usage to this job.
            let (mem_step, mem_job) = step_and_job_dirs(memory)?;
            let (cpu_step, cpu_job) = step_and_job_dirs(cpuacct)?;
            // Slurm creates no blkio or pids groups; a site might. Use them only when they
            // are per-step too, for the same reason.
            let blkio = blkio.as_deref().and_then(step_and_job_dirs);
            let pids = pids.as_deref().and_then(step_and_job_dirs);
            let reader = |mem: &Path, cpu: &Path, bio: Option<&Path>, pid: Option<&Path>| {
                Box::new(V1Reader::new(cgroup_root, mem, cpu, bio, pid))
            };
            Some(Kind::V1 {
                job: reader(
                    &mem_job,
                    &cpu_job,
                    blkio.as_ref().map(|d| d.1.as_path()),
                    pids.as_ref().map(|d| d.1.as_path()),
                ),
                step: reader(
                    &mem_step,
                    &cpu_step,
                    blkio.as_ref().map(|d| d.0.as_path()),
                    pids.as_ref().map(|d| d.0.as_path()),
                ),
            })
        }
        CgroupLocation::V2 { path } => {
            let (step, job) = step_and_job_dirs(path)?;
            // Pure v2 mounts the hierarchy at the root; a hybrid host at `<root>/unified`.
            let unified = cgroup_root.join("unified");
            let mount = if !cgroup_root.join("cgroup.controllers").exists()
                && unified.join("cgroup.controllers").exists()
            {
                unified
            } else {
                cgroup_root.to_path_buf()
            };
            Some(Kind::V2 {
                job: Box::new(V2Reader::new(&mount, &job)),
                step: Box::new(V2Reader::new(&mount, &step)),
            })
        }
    }
}

#[cfg(test)]
mod tests;
