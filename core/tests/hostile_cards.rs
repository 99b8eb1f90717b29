//! Forged card verdicts (issue 37, attack 7), performed in the fast tier: files in a user's
//! archive directory whose owner wrote every figure, and a shared archive base squatted with
//! 100,000 directories named to sort first. `cards` run by root must not name a card from
//! figures a user wrote unless Slurm confirms the jobs are theirs (here, without sacct:
//! never), and must still read the real user's directory. Needs root (the test command runs
//! the fast tier as root): the files are handed to other uids.

use std::os::unix::fs::{chown, PermissionsExt};
use std::path::{Path, PathBuf};

use slurmwatch_core::fleet::files::Files;
use slurmwatch_core::fleet::{cards, render, JobSource, Window};
use slurmwatch_core::locate::scan::expand_dirs;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::{GpuCard, GpuError, GpuProcesses, GpuSample, Source};
use slurmwatch_core::store::{paths, JobMeta, Writer};

const T0: i64 = 1_700_000_000_000;
const GIB: u64 = 1 << 30;
/// The forger: `nobody`, whose name and uid the system knows.
const FORGER: u32 = 65534;

fn require_root() {
    // SAFETY: no failure mode.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this attack is on root's `cards`: run as root"
    );
}

fn reading(held_back: bool) -> GpuSample {
    GpuSample {
        utilization_percent: Ok(90),
        memory_utilization_percent: Ok(40),
        memory_used_bytes: Ok(30 * GIB),
        power_draw_milliwatts: Ok(if held_back { 163_000 } else { 398_000 }),
        power_limit_milliwatts: Ok(400_000),
        temperature_celsius: Ok(60),
        sm_clock_mhz: Ok(if held_back { 385 } else { 1410 }),
        // 0x8: hardware slowdown; 0x4: the application's clock setting (not held back).
        throttle_reasons: Ok(if held_back { 0x8 } else { 0x4 }),
        energy_millijoules: Err(GpuError::NotSupported),
        processes: Ok(GpuProcesses {
            job_processes: 1,
            job_memory_bytes: 29 * GIB,
            other_processes: 0,
            other_memory_bytes: 0,
        }),
        ecc_uncorrected: Ok(0),
        nvlink: Err(GpuError::NotSupported),
        pcie_tx_kib_per_s: Ok(0),
        pcie_rx_kib_per_s: Ok(0),
        ledger: slurmwatch_core::sample::GpuLedger::all_failed(GpuError::NotSupported),
        xid_errors: Ok(Vec::new()),
    }
}

fn card(uuid: &str, i: u32) -> GpuCard {
    GpuCard {
        uuid: uuid.into(),
        cuda_index: Some(i),
        nvml_index: i,
        pci_bus_id: None,
        name: Some("NVIDIA A100-SXM4-80GB".into()),
        memory_total_bytes: Some(80 * GIB),
        sm_clock_max_mhz: Some(1785),
        power_limit_watts: Some(400.0),
        nvlink_links: Some(0),
    }
}

/// A job file as the forger writes it: every figure theirs. `victim` is held back in every
/// reading, `other` never; meta names `user`/`uid`, job `job`, node `n1`; the archive name.
pub fn forged(dir: &Path, job: u64, user: &str, uid: u32) -> PathBuf {
    let path = dir.join(paths::archive_name(job, "n1"));
    let meta = JobMeta {
        job_id: job,
        user: user.into(),
        uid,
        node: "n1".into(),
        cluster: None,
        plugin_version: "t".into(),
        interval_seconds: 10,
        source: Source::CgroupV2,
        cores_allocated: Some(4),
        memory_allocated_bytes: Some(64 * GIB),
        started_unix_ms: T0,
        incarnation: None,
    };
    let mut w = Writer::create(&path, &meta).unwrap();
    w.begin_step("batch", T0, Some(1)).unwrap();
    let ids = w
        .register_gpus(
            "batch",
            T0,
            &[card("GPU-victim", 0), card("GPU-other", 1)],
            &[],
        )
        .unwrap();
    for i in 0..30 {
        let t = T0 + i * 10_000;
        let mut r = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some(i as u64 * 10_000_000);
        w.push(r);
        w.push_gpu(t, ids[0].0, reading(true));
        w.push_gpu(t, ids[1].0, reading(false));
    }
    w.end_step("batch", T0 + 300_000, Some(0)).unwrap();
    w.close().unwrap();
    chown(&path, Some(uid), Some(uid)).unwrap();
    path
}

fn window() -> Window {
    Window {
        since_unix_ms: T0 - 1000,
        until_unix_ms: T0 + 3_600_000,
    }
}

/// `base/%u` with the forger's own directory in a 1777 base (on tmpfs where there is one:
/// 100,000 directories take minutes on this disk and a second there).
fn archive_base() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    let base = d.path().join("archive");
    std::fs::create_dir(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let own = base.join("nobody");
    std::fs::create_dir(&own).unwrap();
    chown(&own, Some(FORGER), Some(FORGER)).unwrap();
    (d, base, own)
}

#[test]
fn twenty_forged_files_name_no_card_without_slurms_word() {
    require_root();
    let (_d, base, own) = archive_base();
    for k in 0..20 {
        forged(&own, 9_000 + k, "nobody", FORGER);
    }
    // As `cards --no-sacct` gathers them: nothing confirms whose jobs these are.
    let files = Files::new([format!("{}/%u", base.display())]);
    let g = files.gather(&window());
    let a = cards::analyse(&g.jobs);
    let text = render::text(&window(), &g, &a);
    assert!(
        render::drains(&a).is_empty(),
        "a drain line from figures the user wrote:\n{text}"
    );
    assert!(!text.contains("GPU-victim"), "{text}");
    assert_eq!(g.jobs.len(), 0, "{:?}", g.jobs);
    assert!(
        g.left_out
            .iter()
            .any(|n| n.starts_with("20 job files in users' directories were left out")),
        "{:?}",
        g.left_out
    );
    let none = render::nothing(&window(), &g);
    assert!(none.contains("Left out: 20 job files"), "{none}");
}

#[test]
fn a_file_whose_owner_name_and_meta_disagree_is_not_counted() {
    require_root();
    let (_d, base, own) = archive_base();
    // The forger's file claiming to be root's job, and one under another name.
    forged(&own, 9_100, "root", FORGER);
    let p = forged(&own, 9_101, "nobody", FORGER);
    std::fs::rename(&p, own.join("9101.n2.sqlite")).unwrap();
    let files = Files {
        dirs: vec![format!("{}/%u", base.display())],
        // Slurm would be asked next; these never get that far.
        slurm: Some(slurmwatch_core::slurm::sacct::Query {
            program: PathBuf::from("/nonexistent/sacct"),
            ..Default::default()
        }),
    };
    let g = files.gather(&window());
    assert!(g.jobs.is_empty(), "{:?}", g.jobs);
    let said = g.left_out.join("\n");
    assert!(said.contains("not by the user it records (root)"), "{said}");
    assert!(said.contains("its name is not 9101.n1.sqlite"), "{said}");
}

#[test]
fn a_hundred_thousand_squat_directories_do_not_push_a_users_directory_out() {
    require_root();
    let (_d, base, own) = archive_base();
    // Another account (uid 4242, no name here) fills the shared base with names sorting first.
    for k in 0..100_000 {
        let d = base.join(format!("0{k:06}"));
        std::fs::create_dir(&d).unwrap();
        chown(&d, Some(4242), Some(4242)).unwrap();
    }
    let e = expand_dirs(&format!("{}/%u", base.display()));
    assert_eq!(e.dirs, [own], "the user's own directory must be read");
    assert!(
        e.notes
            .iter()
            .any(|n| n.contains("100000 directories not named for their owner")),
        "{:?}",
        e.notes
    );
}
