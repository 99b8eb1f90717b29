//! A cgroup that disappears between two readings (Slurm removes the step directory at step
//! end; an admin may kill a job mid-sample): the next reading is all "unreadable", never a
//! panic and never zeros.

use slurmwatch_core::collect::{V1Reader, V2Reader};
use std::path::Path;

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

fn fixtures() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../recorder/tests/fixtures/collect")
}

#[test]
fn v1_step_vanishing_between_readings_reads_as_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("v1"), dir.path());
    let step = Path::new("/slurm_node1/uid_1000/job_42/step_batch");
    let mut reader = V1Reader::new(dir.path(), step, step, None, None);
    let before = reader.read();
    assert!(before.cpu_usage_usec.is_some() && before.memory_usage_bytes.is_some());
    for ctrl in ["memory", "cpuacct"] {
        std::fs::remove_dir_all(dir.path().join(ctrl).join(step.strip_prefix("/").unwrap()))
            .unwrap();
    }
    let after = reader.read();
    assert_eq!(
        after,
        slurmwatch_core::sample::UsageReading::default(),
        "{after:?}"
    );
}

#[test]
fn v2_job_vanishing_between_readings_reads_as_unreadable() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("v2"), dir.path());
    let job = Path::new("/system.slice/slurmstepd.scope/job_42");
    let mut reader = V2Reader::new(dir.path(), job);
    let before = reader.read();
    assert!(before.cpu_usage_usec.is_some() && before.memory_working_set_bytes.is_some());
    std::fs::remove_dir_all(dir.path().join(job.strip_prefix("/").unwrap())).unwrap();
    let after = reader.read();
    assert_eq!(
        after,
        slurmwatch_core::sample::UsageReading::default(),
        "{after:?}"
    );
}

/// The readers keep their files open between readings: a file rewritten in place, replaced
/// by a new one (rename), removed with its directory or recreated must read as what is
/// there now, never as what the old descriptor still holds.
#[test]
fn v1_kept_open_files_never_read_stale() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("v1"), dir.path());
    let step = Path::new("/slurm_node1/uid_1000/job_42/step_batch");
    let rel = step.strip_prefix("/").unwrap();
    let mem = dir.path().join("memory").join(rel);
    let cpu = dir.path().join("cpuacct").join(rel);
    let mut reader = V1Reader::new(dir.path(), step, step, None, None);
    let first = reader.read();
    assert_eq!(first.memory_usage_bytes, Some(629_145_600));
    assert_eq!(first.cpu_usage_usec, Some(12_345_678));

    // Rewritten in place (same inode), shorter than before.
    std::fs::write(mem.join("memory.usage_in_bytes"), "12345\n").unwrap();
    // Replaced by another inode: the old descriptor still reads the old text.
    let tmp = dir.path().join("usage.new");
    std::fs::write(&tmp, "7000000\n").unwrap();
    std::fs::rename(&tmp, cpu.join("cpuacct.usage")).unwrap();
    let r = reader.read();
    assert_eq!(r.memory_usage_bytes, Some(12345));
    assert_eq!(r.cpu_usage_usec, Some(7000));
    assert_eq!(reader.read_fast(None).cpu_usage_usec, Some(7000));

    // The memory group removed: its fields are unreadable, the CPU ones still read.
    std::fs::remove_dir_all(&mem).unwrap();
    let r = reader.read();
    assert_eq!(
        (r.memory_usage_bytes, r.memory_cache_bytes, r.processes),
        (None, None, None)
    );
    assert_eq!(r.cpu_usage_usec, Some(7000));
    assert_eq!(reader.read_fast(None).memory_usage_bytes, None);

    // Recreated: read afresh.
    copy_tree(&fixtures().join("v1/memory").join(rel), &mem);
    let r = reader.read();
    assert_eq!(r.memory_usage_bytes, first.memory_usage_bytes);
    assert_eq!(r.processes, first.processes);
}

/// An empty file is a reading too (io.stat before the first IO): kept open, re-read, and
/// still a readable zero, then the new contents once written.
#[test]
fn v2_empty_kept_open_file_is_a_readable_zero() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("v2"), dir.path());
    let job = Path::new("/system.slice/slurmstepd.scope/job_42");
    let io = dir
        .path()
        .join(job.strip_prefix("/").unwrap())
        .join("io.stat");
    std::fs::write(&io, "").unwrap();
    let mut reader = V2Reader::new(dir.path(), job);
    for _ in 0..2 {
        assert_eq!(reader.read().io_read_bytes, Some(0));
    }
    std::fs::write(
        &io,
        "8:0 rbytes=10 wbytes=20 rios=1 wios=1 dbytes=0 dios=0\n",
    )
    .unwrap();
    let r = reader.read();
    assert_eq!((r.io_read_bytes, r.io_write_bytes), (Some(10), Some(20)));
}

/// On a real cgroup v1 mount, a group removed while its files are held open reads as
/// unreadable (the kernel fails reads with ENODEV), and a group recreated under the same
/// name reads afresh. Needs root and /sys/fs/cgroup/{memory,cpuacct}:
/// `cargo test -p slurmwatch-core --test vanish -- --ignored`.
#[test]
#[ignore]
fn v1_real_cgroup_removed_while_open_reads_as_unreadable() {
    let root = Path::new("/sys/fs/cgroup");
    let name = format!("/slurmwatch_vanish_{}", std::process::id());
    let rel = Path::new(&name);
    let mk = || {
        for ctrl in ["memory", "cpuacct"] {
            std::fs::create_dir(root.join(ctrl).join(&name[1..])).unwrap();
        }
    };
    let rm = || {
        for ctrl in ["memory", "cpuacct"] {
            std::fs::remove_dir(root.join(ctrl).join(&name[1..])).unwrap();
        }
    };
    mk();
    let mut reader = V1Reader::new(root, rel, rel, None, None);
    let before = reader.read();
    assert_eq!(before.memory_usage_bytes, Some(0), "{before:?}");
    assert_eq!(before.cpu_usage_usec, Some(0), "{before:?}");
    rm();
    let after = reader.read();
    assert_eq!(
        after,
        slurmwatch_core::sample::UsageReading::default(),
        "{after:?}"
    );
    mk();
    let again = reader.read();
    rm();
    assert_eq!(again.memory_usage_bytes, Some(0), "{again:?}");
    assert_eq!(again.processes, Some(0), "{again:?}");
}
