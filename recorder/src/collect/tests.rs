//! Fixture-tree tests of the collectors. v1 trees are files captured on a cgroup-v1 host
//! (numbers edited consistently); v2 trees are written in the kernel's formats.

use std::fs;
use std::path::{Path, PathBuf};

use super::parse::{clock_ticks_per_sec, page_size, ticks_to_usec};
use super::*;
use crate::sample::{Pressure, Source, UsageReading};

const MIB: u64 = 1 << 20;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/collect")
}

fn ticks(t: u64) -> Option<u64> {
    Some(ticks_to_usec(t, clock_ticks_per_sec()))
}

const V1_JOB: &str = "/slurm_node1/uid_1000/job_42";
const V1_STEP: &str = "/slurm_node1/uid_1000/job_42/step_batch";

#[test]
fn v1_job_exact_values() {
    let root = fixtures().join("v1");
    let job = Path::new(V1_JOB);
    let r = read_v1(&root, job, job, Some(job), Some(job));
    let want = UsageReading {
        cpu_usage_usec: Some(67_795_993),
        cpu_user_usec: ticks(4243),
        cpu_system_usec: ticks(2533),
        memory_usage_bytes: Some(640 * MIB),
        memory_cache_bytes: Some(210 * MIB),
        memory_working_set_bytes: Some(430 * MIB),
        memory_lifetime_peak_bytes: Some(800 * MIB),
        memory_limit_bytes: Some(2048 * MIB),
        memory_oom_kills: Some(1),
        memory_limit_hits: Some(3),
        memory_major_faults: Some(892),
        io_read_bytes: Some(5096),
        io_write_bytes: Some(8192),
        // step_batch (1) + step_batch/task_0 (2) + step_extern/task_0 (1).
        processes: Some(4),
        // From pids.current, which is hierarchical.
        threads: Some(9),
        pressure: Pressure::default(),
    };
    assert_eq!(r, want);
}

#[test]
fn v1_step_unlimited_sentinel_and_recursive_members() {
    let root = fixtures().join("v1");
    let step = Path::new(V1_STEP);
    let r = read_v1(&root, step, step, None, None);
    assert_eq!(r.memory_usage_bytes, Some(600 * MIB));
    assert_eq!(r.memory_cache_bytes, Some(200 * MIB));
    assert_eq!(r.memory_working_set_bytes, Some(400 * MIB));
    assert_eq!(r.memory_lifetime_peak_bytes, Some(700 * MIB));
    assert_eq!(
        r.memory_limit_bytes, None,
        "9223372036854771712 means unlimited"
    );
    assert_eq!(r.memory_limit_hits, Some(2));
    assert_eq!(r.memory_major_faults, Some(23));
    assert_eq!(r.cpu_usage_usec, Some(12_345_678));
    assert_eq!(r.cpu_user_usec, ticks(1000));
    assert_eq!(r.cpu_system_usec, ticks(200));
    // No blkio group: unknown, not zero.
    assert_eq!((r.io_read_bytes, r.io_write_bytes), (None, None));
    // step dir's own (slurmstepd) + task_0, counted recursively.
    assert_eq!((r.processes, r.threads), (Some(3), Some(8)));
}

#[test]
fn v1_real_root_files_verbatim() {
    // Captured unedited from /sys/fs/cgroup/{memory,cpuacct,blkio} of the dev machine.
    let root = fixtures().join("v1_real_root");
    let r = read_v1(
        &root,
        Path::new("/"),
        Path::new("/"),
        Some(Path::new("/")),
        None,
    );
    assert_eq!(
        r.memory_limit_bytes, None,
        "root limit is the unlimited sentinel"
    );
    assert_eq!(r.memory_usage_bytes, Some(2_586_890_240));
    assert_eq!(r.memory_cache_bytes, Some(717_332_480 + 1_263_329_280));
    assert_eq!(
        r.memory_working_set_bytes,
        Some(2_586_890_240 - 717_332_480 - 1_263_329_280)
    );
    assert_eq!(r.memory_lifetime_peak_bytes, Some(2_722_795_520));
    assert_eq!(r.memory_major_faults, Some(1199));
    assert_eq!(
        (r.memory_oom_kills, r.memory_limit_hits),
        (Some(0), Some(0))
    );
    assert_eq!(r.cpu_usage_usec, Some(257_345_096));
    assert_eq!(
        (r.cpu_user_usec, r.cpu_system_usec),
        (ticks(20533), ticks(5199))
    );
    // `Total 0` and nothing else: a readable zero.
    assert_eq!((r.io_read_bytes, r.io_write_bytes), (Some(0), Some(0)));
    // No cgroup.procs/tasks captured: unknown.
    assert_eq!((r.processes, r.threads), (None, None));
}

#[test]
fn v1_missing_files_are_none_not_zero() {
    let root = fixtures().join("v1");
    let step = Path::new("/slurm_node1/uid_1000/job_43/step_0");
    let r = read_v1(&root, step, step, None, None);
    assert_eq!(r.memory_usage_bytes, Some(100 * MIB));
    assert_eq!(r.memory_cache_bytes, Some(30 * MIB));
    assert_eq!(r.memory_working_set_bytes, Some(70 * MIB));
    assert_eq!(r.memory_major_faults, Some(5));
    // memory.max_usage_in_bytes, memory.failcnt, cpuacct/ missing; limit unparsable;
    // oom_control without the `oom_kill` line (kernel < 4.13).
    let none = UsageReading {
        memory_usage_bytes: r.memory_usage_bytes,
        memory_cache_bytes: r.memory_cache_bytes,
        memory_working_set_bytes: r.memory_working_set_bytes,
        memory_major_faults: r.memory_major_faults,
        ..UsageReading::default()
    };
    assert_eq!(r, none);

    let nowhere = read_v1(
        &root,
        Path::new("/no/such"),
        Path::new("/no/such"),
        None,
        None,
    );
    assert_eq!(nowhere, UsageReading::default());
}

const V2_JOB: &str = "/system.slice/slurmstepd.scope/job_42";

#[test]
fn v2_job_exact_values() {
    let r = read_v2(&fixtures().join("v2"), Path::new(V2_JOB));
    let want = UsageReading {
        cpu_usage_usec: Some(123_456_789),
        cpu_user_usec: Some(100_000_000),
        cpu_system_usec: Some(23_456_789),
        memory_usage_bytes: Some(600 * MIB),
        memory_cache_bytes: Some(200 * MIB),
        memory_working_set_bytes: Some(400 * MIB),
        memory_lifetime_peak_bytes: Some(700 * MIB),
        memory_limit_bytes: Some(2048 * MIB),
        memory_oom_kills: Some(1),
        memory_limit_hits: Some(3),
        memory_major_faults: Some(17),
        io_read_bytes: Some(4096 + 1_048_576),
        io_write_bytes: Some(2_097_152),
        // task_0 2 + task_1 1 (v2 job dir is empty); step_0/slurm and step_extern/slurm hold
        // slurmstepd itself (1 process and 4, resp. 2 threads), which is not the job's.
        processes: Some(3),
        threads: Some(4),
        pressure: Pressure {
            cpu_some_avg10: Some(1.5),
            memory_some_avg10: Some(2.25),
            memory_full_avg10: Some(0.75),
            io_some_avg10: Some(0.10),
            io_full_avg10: Some(0.05),
            cpu_some_total_usec: Some(123_456),
            cpu_full_total_usec: Some(98_765),
            memory_some_total_usec: Some(45_678),
            memory_full_total_usec: Some(12_345),
            io_some_total_usec: Some(7_890),
            io_full_total_usec: Some(3_456),
        },
    };
    assert_eq!(r, want);
}

#[test]
fn v2_step_max_limit_missing_peak_and_io() {
    let r = read_v2(&fixtures().join("v2"), &Path::new(V2_JOB).join("step_0"));
    assert_eq!(r.memory_limit_bytes, None, "literal `max`");
    assert_eq!(
        r.memory_lifetime_peak_bytes, None,
        "no memory.peak before 5.19"
    );
    assert_eq!(r.memory_usage_bytes, Some(500 * MIB));
    assert_eq!(r.memory_cache_bytes, Some(128 * MIB));
    assert_eq!(r.memory_working_set_bytes, Some(372 * MIB));
    assert_eq!(r.memory_major_faults, Some(9));
    assert_eq!(
        (r.memory_oom_kills, r.memory_limit_hits),
        (Some(0), Some(0))
    );
    assert_eq!(r.cpu_usage_usec, Some(100_000_000));
    assert_eq!((r.io_read_bytes, r.io_write_bytes), (None, None));
    assert_eq!(r.pressure.cpu_some_avg10, Some(0.0));
    assert_eq!(r.pressure.memory_full_avg10, Some(0.0));
    assert_eq!(
        (r.pressure.io_some_avg10, r.pressure.io_full_avg10),
        (None, None)
    );
    // Without step_0/slurm (slurmstepd: 1 process, 4 threads).
    assert_eq!((r.processes, r.threads), (Some(3), Some(4)));

    assert_eq!(
        read_v2(&fixtures().join("v2"), Path::new("/gone")),
        UsageReading::default()
    );
}

/// A fake /proc holding `<pid>/cgroup` only, for [`JobCollector`] construction.
fn proc_with_cgroup(pid: u32, text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join(pid.to_string())).unwrap();
    fs::write(dir.path().join(pid.to_string()).join("cgroup"), text).unwrap();
    dir
}

#[test]
fn job_collector_v1_hybrid() {
    let text = fs::read_to_string(fixtures().join("proc_cgroup/v1_hybrid_task.txt")).unwrap();
    let proc = proc_with_cgroup(5116, &text);
    let mut c = JobCollector::new(&fixtures().join("v1"), proc.path(), 5116, 42);
    assert_eq!(c.source(), Source::CgroupV1);
    let job = c.read_job();
    assert_eq!(job.memory_working_set_bytes, Some(430 * MIB));
    assert_eq!(job.cpu_usage_usec, Some(67_795_993));
    // blkio and pids are `/` in /proc/<pid>/cgroup (node level): never read for a job.
    assert_eq!((job.io_read_bytes, job.threads), (None, Some(9)));
    assert_eq!(job.processes, Some(4));
    let step = c.read_step();
    assert_eq!(step.memory_working_set_bytes, Some(400 * MIB));
    assert_eq!(step.cpu_usage_usec, Some(12_345_678));
    assert_eq!((step.processes, step.threads), (Some(3), Some(8)));
}

#[test]
fn job_collector_v2() {
    let proc = proc_with_cgroup(2010, &format!("0::{V2_JOB}/step_0/user/task_0\n"));
    let mut c = JobCollector::new(&fixtures().join("v2"), proc.path(), 2010, 42);
    assert_eq!(c.source(), Source::CgroupV2);
    assert_eq!(c.read_job().memory_limit_bytes, Some(2048 * MIB));
    assert_eq!(c.read_step().memory_usage_bytes, Some(500 * MIB));

    // slurmstepd's own cgroup (`step_0/slurm`) resolves to the same step.
    let proc = proc_with_cgroup(2001, &format!("0::{V2_JOB}/step_0/slurm\n"));
    let mut c = JobCollector::new(&fixtures().join("v2"), proc.path(), 2001, 42);
    assert_eq!(c.read_step().memory_usage_bytes, Some(500 * MIB));
}

/// A step whose task was reaped before the sampler read its `/proc/<pid>/cgroup` (`srun
/// true` on a busy node) is located from its slurmstepd's own group: v1's slurmstepd is in
/// the step's memory group only (its cpuacct is `/`: captured from Slurm 22.05), v2's in
/// `step_<s>/slurm`. Without it the step fell back to /proc, and its /proc incarnation key,
/// unlike the job file's cgroup key, had the running job's file moved aside.
#[test]
fn a_step_whose_task_is_gone_is_found_from_its_slurmstepd() {
    let stepd = fs::read_to_string(fixtures().join("proc_cgroup/v1_slurmstepd.txt")).unwrap();
    let proc = proc_with_cgroup(7000, &stepd);
    with_boot_id(proc.path());
    let v1 = fixtures().join("v1");
    // No /proc/5116: the task is gone.
    let mut c = JobCollector::for_step(&v1, proc.path(), 5116, 7000, 42);
    assert_eq!(c.source(), Source::CgroupV1);
    let step = c.read_step();
    assert_eq!(step.memory_working_set_bytes, Some(400 * MIB));
    // cpuacct from the memory group's path, not from slurmstepd's `/`.
    assert_eq!(step.cpu_usage_usec, Some(12_345_678));
    assert_eq!(c.read_job().cpu_usage_usec, Some(67_795_993));
    // The same key as a step located from its task.
    let task = fs::read_to_string(fixtures().join("proc_cgroup/v1_hybrid_task.txt")).unwrap();
    let proc_t = proc_with_cgroup(5116, &task);
    with_boot_id(proc_t.path());
    assert_eq!(
        c.incarnation(proc.path()),
        JobCollector::new(&v1, proc_t.path(), 5116, 42).incarnation(proc_t.path())
    );
    assert!(c.incarnation(proc.path()).unwrap().contains(":cgroup:"));

    let proc = proc_with_cgroup(2001, &format!("0::{V2_JOB}/step_0/slurm\n"));
    let mut c = JobCollector::for_step(&fixtures().join("v2"), proc.path(), 2010, 2001, 42);
    assert_eq!(c.source(), Source::CgroupV2);
    assert_eq!(c.read_step().memory_usage_bytes, Some(500 * MIB));

    // What task_exit may use: the cgroup collector, never a /proc one.
    let stepd_proc = proc_with_cgroup(7000, &stepd);
    let c = JobCollector::in_cgroup(&v1, stepd_proc.path(), 5116, 7000).unwrap();
    assert!(!c.reads_proc());

    // A slurmstepd outside any step group (proctrack/linuxproc): /proc, as before, and
    // nothing for task_exit.
    let proc = proc_with_cgroup(7000, "0::/system.slice/slurmd.service\n");
    let c = JobCollector::for_step(&v1, proc.path(), 5116, 7000, 42);
    assert_eq!(c.source(), Source::Proc);
    assert!(c.reads_proc());
    assert!(JobCollector::in_cgroup(&v1, proc.path(), 5116, 7000).is_none());
}

/// A file keyed by the job's cgroup is recognised by a step that found no cgroup, through
/// the job's live slurmstepds' own groups; never for another job, and never once the job's
/// slurmstepds are gone.
#[test]
fn a_cgroup_key_is_recognised_through_the_jobs_slurmstepds() {
    let v1 = fixtures().join("v1");
    let fp = FakeProc::new();
    with_boot_id(fp.dir.path());
    fp.set(300, p(1, 130, 0));
    fs::write(
        fp.dir.path().join("300/cmdline"),
        "slurmstepd: [42.batch]\0\0",
    )
    .unwrap();
    let stepd = fs::read_to_string(fixtures().join("proc_cgroup/v1_slurmstepd.txt")).unwrap();
    fs::write(fp.dir.path().join("300/cgroup"), &stepd).unwrap();
    let key = JobCollector::for_step(&v1, fp.dir.path(), 999, 300, 42)
        .incarnation(fp.dir.path())
        .unwrap();
    assert!(key.contains(":cgroup:"), "{key}");
    assert!(is_this_jobs_key(&key, &v1, fp.dir.path(), 42));
    assert!(!is_this_jobs_key(&key, &v1, fp.dir.path(), 43));
    assert!(!is_this_jobs_key(
        &format!("{BOOT}:cgroup:1"),
        &v1,
        fp.dir.path(),
        42
    ));
    // The scan key of the same job is still recognised.
    let scan = job_incarnation(fp.dir.path(), 42).unwrap();
    assert!(is_this_jobs_key(&scan, &v1, fp.dir.path(), 42));
    fs::remove_dir_all(fp.dir.path().join("300")).unwrap();
    assert!(!is_this_jobs_key(&key, &v1, fp.dir.path(), 42));
}

const BOOT: &str = "2102edf5-ed9f-42fa-b4cb-899e2d9f4f46";

fn with_boot_id(proc: &Path) {
    fs::create_dir_all(proc.join("sys/kernel/random")).unwrap();
    fs::write(proc.join("sys/kernel/random/boot_id"), format!("{BOOT}\n")).unwrap();
}

fn inode(p: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap())
}

/// In a cgroup the incarnation key is the boot and the job directory's inode (the kernel's
/// id of the cgroup): the same for every step and for slurmstepd's own group, whichever
/// process the step's first task is.
#[test]
fn a_cgroup_jobs_incarnation_is_its_job_directory() {
    let v1 = fixtures().join("v1");
    let text = fs::read_to_string(fixtures().join("proc_cgroup/v1_hybrid_task.txt")).unwrap();
    let proc = proc_with_cgroup(5116, &text);
    with_boot_id(proc.path());
    let key = JobCollector::new(&v1, proc.path(), 5116, 42).incarnation(proc.path());
    let job_dir = v1.join("memory").join(V1_JOB.trim_start_matches('/'));
    assert_eq!(key, Some(format!("{BOOT}:cgroup:{}", inode(&job_dir))));
    // Another step of the job (its task in step_0) gets the same key.
    let proc0 = proc_with_cgroup(6000, &text.replace("step_batch", "step_0"));
    with_boot_id(proc0.path());
    let key0 = JobCollector::new(&v1, proc0.path(), 6000, 42).incarnation(proc0.path());
    assert_eq!(key0, key);

    let v2 = fixtures().join("v2");
    let keys: Vec<_> = [
        format!("0::{V2_JOB}/step_0/user/task_0\n"),
        format!("0::{V2_JOB}/step_0/slurm\n"),
    ]
    .iter()
    .map(|text| {
        let proc = proc_with_cgroup(2010, text);
        with_boot_id(proc.path());
        JobCollector::new(&v2, proc.path(), 2010, 42).incarnation(proc.path())
    })
    .collect();
    let job_dir = v2.join(V2_JOB.trim_start_matches('/'));
    let want = Some(format!("{BOOT}:cgroup:{}", inode(&job_dir)));
    assert_eq!(keys, vec![want.clone(), want]);
    // No boot id: no key, never a partial one.
    let proc = proc_with_cgroup(5116, &text);
    assert_eq!(
        JobCollector::new(&v1, proc.path(), 5116, 42).incarnation(proc.path()),
        None
    );
}

/// Without a cgroup the key is the oldest live slurmstepd of the job (a /proc scan); a file
/// keyed that way (by a slurmwatch before the cgroup key, or a step without a cgroup) is
/// still recognised as this job's by a step in a cgroup, and only while that slurmstepd lives.
#[test]
fn the_proc_key_is_the_oldest_slurmstepd_and_is_recognised_from_a_cgroup() {
    let fp = FakeProc::new();
    with_boot_id(fp.dir.path());
    fp.set(200, p(1, 100, 0)); // slurmstepd [42.extern], started at tick 100
    fp.set(300, p(1, 130, 0)); // slurmstepd [42.0]
    fp.set(400, p(1, 90, 0)); // slurmstepd [43.0]: another job's, older
    fp.set(301, p(300, 150, 0)); // the step's task
    for (pid, title) in [(200, "42.extern"), (300, "42.0"), (400, "43.0")] {
        let title = format!("slurmstepd: [{title}]\0\0\0");
        fs::write(fp.dir.path().join(format!("{pid}/cmdline")), title).unwrap();
    }
    let key = job_incarnation(fp.dir.path(), 42);
    assert_eq!(key, Some(format!("{BOOT}:100")));
    let c = JobCollector::new(Path::new("/nonexistent"), fp.dir.path(), 301, 42);
    assert_eq!(c.source(), Source::Proc);
    assert_eq!(c.incarnation(fp.dir.path()), key);
    assert!(is_this_jobs_scan_key(
        &key.clone().unwrap(),
        fp.dir.path(),
        42
    ));
    assert!(!is_this_jobs_scan_key(
        &format!("{BOOT}:130"),
        fp.dir.path(),
        42
    ));
    assert!(!is_this_jobs_scan_key(
        "another-boot:100",
        fp.dir.path(),
        42
    ));
    // The extern step ends: the job's oldest slurmstepd is now 42.0's.
    fp.remove(200);
    assert!(!is_this_jobs_scan_key(&key.unwrap(), fp.dir.path(), 42));
}

#[test]
fn job_collector_falls_back_to_proc() {
    // Not under a step (proctrack/linuxproc): the /proc trees.
    let text = fs::read_to_string(fixtures().join("proc_cgroup/v1_real_nonslurm.txt")).unwrap();
    let proc = proc_with_cgroup(77, &text);
    let c = JobCollector::new(&fixtures().join("v1"), proc.path(), 77, 42);
    assert_eq!(c.source(), Source::Proc);
    // No /proc/<pid>/cgroup at all.
    let empty = tempfile::tempdir().unwrap();
    let mut c = JobCollector::new(&fixtures().join("v1"), empty.path(), 77, 42);
    assert_eq!(c.source(), Source::Proc);
    // Nothing alive and nothing ever seen: unknown, not zero.
    assert_eq!(c.read_step(), UsageReading::default());
    assert_eq!(c.read_job(), UsageReading::default());
}

#[test]
fn find_step_pids_of_one_job() {
    let pids = find_step_pids(&fixtures().join("proc_tree"), 42);
    // 100 `[42.batch]` (NUL padded), 101 `[42.0]` (space padded), 104 `[42.extern]`;
    // not 102 (job 421) nor 103 (a title inside another program's arguments).
    assert_eq!(pids, vec![100, 101, 104]);
    assert!(find_step_pids(Path::new("/nonexistent"), 42).is_empty());
}

// ---- ProcTreeTracker on a rewritable fake /proc --------------------------------------

/// A fake /proc whose `<pid>/stat` lines are the real captured line (comm `a) b`) with
/// the fields under test rewritten.
struct FakeProc {
    dir: tempfile::TempDir,
    template: String,
}

#[derive(Clone, Copy, Default)]
struct P {
    ppid: u32,
    start: u64,
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
    majflt: u64,
    cmajflt: u64,
    threads: u64,
    rss: u64,
    io: Option<(u64, u64)>,
}

impl FakeProc {
    fn new() -> FakeProc {
        let template = fs::read_to_string(fixtures().join("proc_tree/4242/stat")).unwrap();
        FakeProc {
            dir: tempfile::tempdir().unwrap(),
            template,
        }
    }

    fn set(&self, pid: u32, p: P) {
        let close = self.template.rfind(')').unwrap();
        let mut rest: Vec<String> = self.template[close + 1..]
            .split_ascii_whitespace()
            .map(str::to_string)
            .collect();
        let mut put = |field: usize, v: u64| rest[field - 3] = v.to_string();
        put(4, u64::from(p.ppid));
        put(12, p.majflt);
        put(13, p.cmajflt);
        put(14, p.utime);
        put(15, p.stime);
        put(16, p.cutime);
        put(17, p.cstime);
        put(20, p.threads.max(1));
        put(22, p.start);
        put(24, p.rss);
        let d = self.dir.path().join(pid.to_string());
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("stat"), format!("{pid} (a) b) {}\n", rest.join(" "))).unwrap();
        let _ = fs::remove_file(d.join("io"));
        if let Some((r, w)) = p.io {
            fs::write(
                d.join("io"),
                format!("rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: {r}\nwrite_bytes: {w}\ncancelled_write_bytes: 0\n"),
            )
            .unwrap();
        }
    }

    fn remove(&self, pid: u32) {
        fs::remove_dir_all(self.dir.path().join(pid.to_string())).unwrap();
    }

    fn tracker(&self, roots: &[u32]) -> ProcTreeTracker {
        ProcTreeTracker::new(self.dir.path(), roots)
    }
}

/// Total CPU of a reading in clock ticks.
fn cpu_ticks(r: &UsageReading) -> u64 {
    let us = r.cpu_usage_usec.expect("cpu readable");
    us * clock_ticks_per_sec() / 1_000_000
}

fn p(ppid: u32, start: u64, utime: u64) -> P {
    P {
        ppid,
        start,
        utime,
        io: Some((0, 0)),
        ..P::default()
    }
}

#[test]
fn proc_child_reaped_by_live_parent_is_not_double_counted() {
    let fp = FakeProc::new();
    fp.set(1, p(0, 1, 5000)); // init: never part of the tree
    fp.set(
        100,
        P {
            stime: 0,
            ..p(1, 500, 10)
        },
    );
    fp.set(
        101,
        P {
            stime: 10,
            ..p(100, 600, 40)
        },
    );
    fp.set(300, p(1, 700, 9999)); // a neighbour
    let mut t = fp.tracker(&[100]);
    let r1 = t.read();
    assert_eq!(cpu_ticks(&r1), 60);
    assert_eq!(r1.processes, Some(2));
    assert_eq!(r1.cpu_user_usec, ticks(50));
    assert_eq!(r1.cpu_system_usec, ticks(10));

    // 101 did 5 more ticks, exited, and 100 waited for it: 100's cutime/cstime hold it.
    fp.remove(101);
    fp.set(
        100,
        P {
            cutime: 45,
            cstime: 11,
            ..p(1, 500, 12)
        },
    );
    let r2 = t.read();
    assert_eq!(
        cpu_ticks(&r2),
        12 + 45 + 11,
        "counted once, through the parent"
    );
    assert_eq!(r2.processes, Some(1));
}

#[test]
fn proc_root_task_exit_keeps_its_work() {
    let fp = FakeProc::new();
    fp.set(99, p(1, 400, 7)); // slurmstepd: the tasks' parent, outside the tree
    fp.set(
        100,
        P {
            cutime: 3,
            ..p(99, 500, 10)
        },
    );
    fp.set(
        101,
        P {
            stime: 10,
            ..p(100, 600, 40)
        },
    );
    let mut t = fp.tracker(&[100]);
    assert_eq!(cpu_ticks(&t.read()), 63);
    // The root exits (slurmstepd reaps it); its child is orphaned to init and lives on.
    fp.remove(100);
    fp.set(
        101,
        P {
            stime: 10,
            ..p(1, 600, 45)
        },
    );
    let r = t.read();
    assert_eq!(
        cpu_ticks(&r),
        13 + 55,
        "root's last value kept, orphan still tracked"
    );
    assert_eq!(r.processes, Some(1));
    // The orphan exits too (init reaps it): nothing left alive, nothing lost.
    fp.remove(101);
    let r = t.read();
    assert_eq!(cpu_ticks(&r), 68);
    assert_eq!((r.processes, r.threads), (Some(0), Some(0)));
    assert_eq!(r.memory_usage_bytes, Some(0));
    assert_eq!(cpu_ticks(&t.read()), 68);
}

#[test]
fn proc_departed_chain_reaped_through_dead_middle() {
    // 100 → 101 → 102; 102 exits (101 reaps it), then 101 exits (100 reaps it), both
    // between two readings: 100's cutime carries both, nothing is added.
    let fp = FakeProc::new();
    fp.set(100, p(1, 500, 10));
    fp.set(101, p(100, 600, 20));
    fp.set(102, p(101, 700, 30));
    let mut t = fp.tracker(&[100]);
    assert_eq!(cpu_ticks(&t.read()), 60);
    fp.remove(102);
    fp.remove(101);
    fp.set(
        100,
        P {
            cutime: 20 + 2 + 30 + 3,
            ..p(1, 500, 10)
        },
    );
    assert_eq!(cpu_ticks(&t.read()), 65);
}

#[test]
fn proc_auto_reaped_child_is_credited() {
    // The parent ignores SIGCHLD: the kernel reaps the child without adding it to cutime.
    let fp = FakeProc::new();
    fp.set(100, p(1, 500, 10));
    fp.set(101, p(100, 600, 30));
    let mut t = fp.tracker(&[100]);
    assert_eq!(cpu_ticks(&t.read()), 40);
    fp.remove(101);
    fp.set(100, p(1, 500, 11));
    assert_eq!(cpu_ticks(&t.read()), 41);
}

#[test]
fn proc_recycled_pid_is_a_new_process() {
    let fp = FakeProc::new();
    fp.set(100, p(1, 500, 10));
    fp.set(101, p(100, 600, 30));
    let mut t = fp.tracker(&[100]);
    assert_eq!(cpu_ticks(&t.read()), 40);
    // Old 101 exited and was reaped by 100; a new child got pid 101 (new starttime).
    fp.set(
        100,
        P {
            cutime: 30,
            ..p(1, 500, 10)
        },
    );
    fp.set(101, p(100, 900, 2));
    let r = t.read();
    assert_eq!(cpu_ticks(&r), 42);
    assert_eq!(r.processes, Some(2));

    // A recycled *root* pid belongs to someone else now: not adopted.
    let fp = FakeProc::new();
    fp.set(100, p(1, 500, 10));
    let mut t = fp.tracker(&[100]);
    assert_eq!(cpu_ticks(&t.read()), 10);
    fp.set(100, p(1, 800, 999));
    let r = t.read();
    assert_eq!(cpu_ticks(&r), 10);
    assert_eq!(r.processes, Some(0));
}

#[test]
fn proc_total_never_decreases() {
    let fp = FakeProc::new();
    fp.set(
        100,
        P {
            majflt: 7,
            ..p(1, 500, 100)
        },
    );
    let mut t = fp.tracker(&[100]);
    assert_eq!(cpu_ticks(&t.read()), 100);
    fp.set(
        100,
        P {
            majflt: 3,
            ..p(1, 500, 90)
        },
    );
    let r = t.read();
    assert_eq!(cpu_ticks(&r), 100);
    assert_eq!(r.memory_major_faults, Some(7));
    fp.set(100, p(1, 500, 120));
    assert_eq!(cpu_ticks(&t.read()), 120);
}

#[test]
fn proc_memory_threads_faults_and_io() {
    let fp = FakeProc::new();
    let ps = page_size();
    fp.set(
        100,
        P {
            rss: 1000,
            threads: 4,
            majflt: 2,
            cmajflt: 3,
            io: Some((4096, 100)),
            ..p(1, 500, 10)
        },
    );
    fp.set(
        101,
        P {
            rss: 24,
            threads: 1,
            majflt: 1,
            io: Some((10, 20)),
            ..p(100, 600, 1)
        },
    );
    let mut t = fp.tracker(&[100]);
    let r = t.read();
    assert_eq!(r.memory_usage_bytes, Some(1024 * ps));
    assert_eq!(r.memory_working_set_bytes, Some(1024 * ps));
    // /proc has no page cache, no kernel high-water mark, no limit.
    assert_eq!(r.memory_cache_bytes, None);
    assert_eq!(r.memory_lifetime_peak_bytes, None);
    assert_eq!(r.memory_limit_bytes, None);
    assert_eq!(r.memory_oom_kills, None);
    assert_eq!((r.processes, r.threads), (Some(2), Some(5)));
    assert_eq!(r.memory_major_faults, Some(6));
    assert_eq!((r.io_read_bytes, r.io_write_bytes), (Some(4106), Some(120)));

    // One io file unreadable: the sum is unknown, not a partial number.
    fp.set(
        101,
        P {
            io: None,
            ..p(100, 600, 1)
        },
    );
    let r = t.read();
    assert_eq!((r.io_read_bytes, r.io_write_bytes), (None, None));
    assert!(r.cpu_usage_usec.is_some());

    // Readable again, then the child exits and is reaped: its io moves into the parent's
    // counters (the kernel accumulates reaped children's io), nothing double counted.
    fp.set(
        101,
        P {
            io: Some((10, 20)),
            ..p(100, 600, 1)
        },
    );
    assert_eq!(t.read().io_read_bytes, Some(4106));
    fp.remove(101);
    fp.set(
        100,
        P {
            rss: 1000,
            threads: 4,
            cutime: 1,
            io: Some((4106, 120)),
            ..p(1, 500, 10)
        },
    );
    let r = t.read();
    assert_eq!((r.io_read_bytes, r.io_write_bytes), (Some(4106), Some(120)));
    assert_eq!(cpu_ticks(&r), 11);
}

#[test]
fn proc_roots_added_later_and_missing_root() {
    let fp = FakeProc::new();
    fp.set(100, p(1, 500, 10));
    fp.set(200, p(1, 510, 5));
    let mut t = fp.tracker(&[100, 12345]);
    assert_eq!(cpu_ticks(&t.read()), 10);
    t.add_root(200);
    t.add_root(100);
    let r = t.read();
    assert_eq!(cpu_ticks(&r), 15);
    assert_eq!(r.processes, Some(2));

    let mut nothing = fp.tracker(&[]);
    assert_eq!(nothing.read(), UsageReading::default());
    let mut gone = ProcTreeTracker::new(Path::new("/nonexistent/proc"), &[1]);
    assert_eq!(gone.read(), UsageReading::default());
}

#[test]
fn proc_malformed_stat_is_skipped() {
    let fp = FakeProc::new();
    fp.set(100, p(1, 500, 10));
    fp.set(101, p(100, 600, 5));
    fs::write(fp.dir.path().join("101/stat"), "101 (x) S 100 garbage").unwrap();
    fs::create_dir(fp.dir.path().join("self")).unwrap();
    let mut t = fp.tracker(&[100]);
    let r = t.read();
    assert_eq!(cpu_ticks(&r), 10);
    assert_eq!(r.processes, Some(1));
}

/// The job level in /proc mode: everything below the job's slurmstepds, not the slurmstepds'
/// own CPU (sacct leaves it out; found when the /proc-mode overlapping-steps test counted the
/// three slurmstepds and their samplers as job work).
#[test]
fn proc_descendants_of_slurmstepds_exclude_the_stepds() {
    let fp = FakeProc::new();
    fp.set(1, p(0, 1, 5000));
    fp.set(200, p(1, 100, 700)); // slurmstepd [42.batch]: its own 700 ticks are Slurm's
    fp.set(201, p(200, 110, 30)); // the batch script
    fp.set(202, p(201, 120, 40)); // a child of the script
    fp.set(300, p(1, 130, 900)); // slurmstepd [42.0]
    fp.set(301, p(300, 140, 50)); // the step's task
    let mut t = ProcTreeTracker::descendants_of(fp.dir.path(), &[200, 300]);
    let r = t.read();
    assert_eq!(cpu_ticks(&r), 120, "only the tasks: 30 + 40 + 50");
    assert_eq!(r.processes, Some(3));
    // The step's task burns 10 more ticks after that reading, exits, and slurmstepd reaps
    // it: slurmstepd's cutime carries all 60, so the final moments are not lost (polling
    // alone would keep only the 50 it last saw).
    fp.remove(301);
    fp.set(
        300,
        P {
            cutime: 60,
            ..p(1, 130, 905)
        },
    );
    let r = t.read();
    assert_eq!(cpu_ticks(&r), 130);
    assert_eq!(r.processes, Some(2), "slurmstepds are not job processes");
}

/// Real trees captured from Slurm 24.11 (kernel 6.12) and 26.05 (kernel 7.2, the job directory
/// named by its SLUID) jobs in the VM tier's guests (../shared/captures/cgroup-v2): the reader
/// gives exactly what the kernel's files say, derived from the files themselves (memory.stat's
/// keys come in a different order on each kernel), and no I/O figure (Slurm delegates no io
/// controller to job cgroups).
fn v2_real_job(release: &str) -> (PathBuf, PathBuf) {
    let root = fixtures().join("v2_real").join(release);
    let scope = Path::new("/system.slice/slurmvm_slurmstepd.scope");
    let job = fs::read_dir(root.join(scope.strip_prefix("/").unwrap()))
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .expect("a job directory")
        .file_name();
    (root, scope.join(job))
}

fn file_u64(dir: &Path, name: &str) -> Option<u64> {
    fs::read_to_string(dir.join(name)).ok()?.trim().parse().ok()
}

fn file_key(dir: &Path, name: &str, key: &str) -> Option<u64> {
    fs::read_to_string(dir.join(name))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

fn members(dir: &Path) -> (u64, u64) {
    let mut procs = 0;
    let mut threads = 0;
    for e in walkdir(dir) {
        let count = |f: &str| {
            fs::read_to_string(e.join(f))
                .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count() as u64)
                .unwrap_or(0)
        };
        if e.file_name().is_some_and(|n| n == "slurm") {
            continue;
        }
        procs += count("cgroup.procs");
        threads += count("cgroup.threads");
    }
    (procs, threads)
}

/// The `total=` of `file`'s `kind` line, read here independently of the collector's parser.
fn psi_total(dir: &Path, file: &str, kind: &str) -> Option<u64> {
    let text = fs::read_to_string(dir.join(file)).ok()?;
    let line = text.lines().find(|l| l.starts_with(kind))?;
    line.rsplit("total=").next()?.trim().parse().ok()
}

fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for e in fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walkdir(&e.path()));
        }
    }
    out
}

fn check_v2_real(release: &str, expect_dir_prefix: &str) {
    let (root, job) = v2_real_job(release);
    let name = job.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        name.starts_with(expect_dir_prefix),
        "{release}: job directory {name}"
    );
    for rel in [job.clone(), job.join("step_batch")] {
        let dir = under_mount(&root, &rel);
        let r = read_v2(&root, &rel);
        let what = format!("{release} {}", rel.display());
        let current = file_u64(&dir, "memory.current").unwrap();
        let cache = file_key(&dir, "memory.stat", "active_file").unwrap()
            + file_key(&dir, "memory.stat", "inactive_file").unwrap();
        assert_eq!(r.memory_usage_bytes, Some(current), "{what}");
        assert_eq!(r.memory_cache_bytes, Some(cache), "{what}");
        assert_eq!(r.memory_working_set_bytes, Some(current - cache), "{what}");
        assert_eq!(
            r.memory_lifetime_peak_bytes,
            file_u64(&dir, "memory.peak"),
            "{what}"
        );
        assert_eq!(
            r.memory_major_faults,
            file_key(&dir, "memory.stat", "pgmajfault"),
            "{what}"
        );
        assert_eq!(
            r.memory_oom_kills,
            file_key(&dir, "memory.events", "oom_kill"),
            "{what}"
        );
        assert_eq!(
            r.memory_limit_hits,
            file_key(&dir, "memory.events", "max"),
            "{what}"
        );
        assert_eq!(
            r.cpu_usage_usec,
            file_key(&dir, "cpu.stat", "usage_usec"),
            "{what}"
        );
        assert_eq!(
            r.cpu_user_usec,
            file_key(&dir, "cpu.stat", "user_usec"),
            "{what}"
        );
        assert_eq!(
            r.cpu_system_usec,
            file_key(&dir, "cpu.stat", "system_usec"),
            "{what}"
        );
        // The job holds ~400 MB: a real working set, not a parse of the wrong key.
        assert!(
            current - cache > 300 * MIB,
            "{what}: working set {}",
            current - cache
        );
        // No io.stat in job cgroups (only io.pressure): I/O is unknown, never zero.
        assert!(!dir.join("io.stat").exists());
        assert_eq!((r.io_read_bytes, r.io_write_bytes), (None, None), "{what}");
        assert!(
            r.pressure.io_some_avg10.is_some(),
            "{what}: io.pressure is there"
        );
        assert!(r.pressure.cpu_some_avg10.is_some() && r.pressure.memory_full_avg10.is_some());
        // The stall totals, exactly as the kernel's `total=` says (µs).
        let p = &r.pressure;
        for (file, kind, got) in [
            ("cpu.pressure", "some", p.cpu_some_total_usec),
            ("cpu.pressure", "full", p.cpu_full_total_usec),
            ("memory.pressure", "some", p.memory_some_total_usec),
            ("memory.pressure", "full", p.memory_full_total_usec),
            ("io.pressure", "some", p.io_some_total_usec),
            ("io.pressure", "full", p.io_full_total_usec),
        ] {
            assert_eq!(got, psi_total(&dir, file, kind), "{what} {file} {kind}");
            assert!(got.is_some(), "{what} {file} {kind}");
        }
        let (procs, threads) = members(&dir);
        assert_eq!(
            (r.processes, r.threads),
            (Some(procs), Some(threads)),
            "{what}"
        );
        assert!(procs >= 1, "{what}");
    }
    // The job's limit is on the job directory; the step's on step_batch/user, while
    // step_batch/memory.max itself is `max`.
    let jd = under_mount(&root, &job);
    let limit = file_u64(&jd, "memory.max").expect("a job limit");
    assert_eq!(read_v2(&root, &job).memory_limit_bytes, Some(limit));
    let sd = jd.join("step_batch");
    assert_eq!(
        fs::read_to_string(sd.join("memory.max")).unwrap().trim(),
        "max"
    );
    assert_eq!(
        read_v2(&root, &job.join("step_batch")).memory_limit_bytes,
        file_u64(&sd.join("user"), "memory.max"),
        "{release}: the step's limit from step_batch/user"
    );
    assert_eq!(file_u64(&sd.join("user"), "memory.max"), Some(limit));
}

#[test]
fn v2_real_slurm_24_11_job_and_step() {
    check_v2_real("slurm-24.11", "job_");
}

#[test]
fn v2_real_slurm_26_05_sluid_job_and_step() {
    check_v2_real("slurm-26.05", "s");
}

/// On v2 Slurm keeps slurmstepd (and the sampler inside it) in `step_<s>/slurm`, within the
/// job's cgroup: its CPU is left out of the job's and the step's figures, as sacct's TotalCPU
/// and the v1 layout do (seen on Slurm 24.11 under emulation: 2.2 CPU-s of 19.8 were
/// slurmstepd's). A step gone from the tree keeps its last figure out of the job's total.
#[test]
fn v2_cpu_leaves_out_slurmstepd_and_keeps_it_out_after_the_step_ends() {
    let root = tempfile::tempdir().unwrap();
    let job = root.path().join("scope/job_9");
    let cpu = |usage: u64, user: u64, system: u64| {
        format!("usage_usec {usage}\nuser_usec {user}\nsystem_usec {system}\nnr_periods 0\n")
    };
    fs::create_dir_all(job.join("step_0/slurm")).unwrap();
    fs::create_dir_all(job.join("step_0/user/task_0")).unwrap();
    fs::create_dir_all(job.join("step_extern/slurm")).unwrap();
    fs::write(job.join("cpu.stat"), cpu(10_000_000, 8_000_000, 2_000_000)).unwrap();
    fs::write(
        job.join("step_0/cpu.stat"),
        cpu(9_000_000, 7_500_000, 1_500_000),
    )
    .unwrap();
    fs::write(
        job.join("step_0/slurm/cpu.stat"),
        cpu(1_500_000, 1_000_000, 500_000),
    )
    .unwrap();
    fs::write(
        job.join("step_extern/slurm/cpu.stat"),
        cpu(500_000, 400_000, 100_000),
    )
    .unwrap();
    let rel = Path::new("/scope/job_9");
    let mut r = V2Reader::new(root.path(), rel);
    let got = r.read();
    assert_eq!(
        (got.cpu_usage_usec, got.cpu_user_usec, got.cpu_system_usec),
        (Some(8_000_000), Some(6_600_000), Some(1_400_000))
    );
    assert_eq!(r.read_fast(None).cpu_usage_usec, Some(8_000_000));
    let step = read_v2(root.path(), &rel.join("step_0"));
    assert_eq!(step.cpu_usage_usec, Some(7_500_000));
    // The job idles while slurmstepd (the sampler) works: its figure stays, never dips.
    fs::write(
        job.join("step_0/slurm/cpu.stat"),
        cpu(1_600_000, 1_050_000, 550_000),
    )
    .unwrap();
    assert_eq!(r.read().cpu_usage_usec, Some(8_000_000));
    assert_eq!(r.read_fast(None).cpu_usage_usec, Some(8_000_000));
    // step_0 ends: its directory goes, its usage stays in the job's cpu.stat.
    fs::remove_dir_all(job.join("step_0")).unwrap();
    assert_eq!(r.read().cpu_usage_usec, Some(8_000_000));
}

/// A fast read leaves the working set out (no memory.stat) only when the usage shows it
/// cannot exceed the largest already seen since the last stored row; CPU is always read.
#[test]
fn a_fast_read_skips_the_cache_figure_only_when_the_usage_bounds_the_working_set() {
    let v1 = fixtures().join("v1");
    let job = Path::new(V1_JOB);
    let mut r = V1Reader::new(&v1, job, job, Some(job), Some(job));
    // usage 640 MiB, file cache 210 MiB: working set 430 MiB.
    let full = r.read_fast(None);
    assert_eq!(full.memory_working_set_bytes, Some(430 * MIB));
    let bounded = r.read_fast(Some(640 * MIB));
    assert_eq!(bounded.memory_usage_bytes, Some(640 * MIB));
    assert_eq!(bounded.memory_working_set_bytes, None);
    assert_eq!(bounded.cpu_usage_usec, full.cpu_usage_usec);
    assert!(full.cpu_usage_usec.is_some());
    // One byte of usage above what was seen: the working set might be new, so it is read.
    let above = r.read_fast(Some(640 * MIB - 1));
    assert_eq!(above.memory_working_set_bytes, Some(430 * MIB));

    let mut r = V2Reader::new(&fixtures().join("v2"), Path::new(V2_JOB));
    // usage 600 MiB, file cache 200 MiB: working set 400 MiB.
    assert_eq!(r.read_fast(None).memory_working_set_bytes, Some(400 * MIB));
    let bounded = r.read_fast(Some(600 * MIB));
    assert_eq!(
        (bounded.memory_working_set_bytes, bounded.cpu_usage_usec),
        (None, Some(123_456_789))
    );
    let above = r.read_fast(Some(600 * MIB - 1));
    assert_eq!(above.memory_working_set_bytes, Some(400 * MIB));
}

#[test]
fn the_cache_figure_is_needed_unless_a_known_usage_is_at_most_the_working_set_seen() {
    assert!(needs_cache_figure(Some(10), None));
    assert!(needs_cache_figure(None, Some(10)));
    assert!(needs_cache_figure(Some(11), Some(10)));
    assert!(!needs_cache_figure(Some(10), Some(10)));
    assert!(!needs_cache_figure(Some(9), Some(10)));
}

/// Whether this process holds a descriptor on `path` (a `KeptFile` keeps the files it read).
fn holds_open(path: &Path) -> bool {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| fs::read_link(e.ok()?.path()).ok())
        .any(|target| target == path)
}

/// The bound saves the read itself, not only its use: a bounded fast read never opens
/// memory.stat (seen from the kernel's own list of this process's descriptors), an unbounded
/// one does.
#[test]
fn a_bounded_fast_read_does_not_open_memory_stat() {
    let root = tempfile::tempdir().unwrap();
    let v1_mem = root.path().join("memory/job_7");
    let v1_cpu = root.path().join("cpuacct/job_7");
    let v2 = root.path().join("scope/job_7");
    for d in [&v1_mem, &v1_cpu, &v2] {
        fs::create_dir_all(d).unwrap();
    }
    fs::write(v1_mem.join("memory.usage_in_bytes"), "1048576\n").unwrap();
    fs::write(
        v1_mem.join("memory.stat"),
        "total_active_file 0\ntotal_inactive_file 0\n",
    )
    .unwrap();
    fs::write(v1_cpu.join("cpuacct.usage"), "5000\n").unwrap();
    fs::write(v2.join("memory.current"), "1048576\n").unwrap();
    fs::write(v2.join("memory.stat"), "active_file 0\ninactive_file 0\n").unwrap();
    fs::write(v2.join("cpu.stat"), "usage_usec 5\n").unwrap();
    let rel = Path::new("/job_7");
    let mut v1 = V1Reader::new(root.path(), rel, rel, None, None);
    assert_eq!(v1.read_fast(Some(MIB)).cpu_usage_usec, Some(5));
    assert!(!holds_open(&v1_mem.join("memory.stat")));
    assert_eq!(v1.read_fast(None).memory_working_set_bytes, Some(MIB));
    assert!(holds_open(&v1_mem.join("memory.stat")));

    let mut r = V2Reader::new(root.path(), Path::new("/scope/job_7"));
    assert_eq!(r.read_fast(Some(MIB)).cpu_usage_usec, Some(5));
    assert!(!holds_open(&v2.join("memory.stat")));
    assert_eq!(r.read_fast(None).memory_working_set_bytes, Some(MIB));
    assert!(holds_open(&v2.join("memory.stat")));
}
