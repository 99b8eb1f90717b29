//! Root's readers against hostile users on the real cluster (issue 37, attacks 4 and 7):
//! `report JOB` run by root on a job whose output the user pointed at a device (directly, or
//! through a work dir swapped for a symlink to `/dev` after the job), watched with `strace`
//! from outside; and `cards` run by root, with the real sacct, over an archive base where one
//! user left 20 forged job files and another squatted 100,000 directories named to sort first.

use slurmwatch_tests::*;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::{GpuCard, GpuError, GpuProcesses, GpuSample, Source};
use slurmwatch_core::store::{paths, JobMeta, Writer};

const WAIT: Duration = Duration::from_secs(300);
/// `report`'s bound with a log that cannot be reached (5 s) and sacct, on a loaded machine.
const REPORT_BOUND: Duration = Duration::from_secs(30);

fn uid_of(user: &str) -> u32 {
    stdout(&run("id", &["-u", user])).trim().parse().unwrap()
}

fn as_user(user: &str, args: &[&str]) {
    let mut a = vec!["-u", user, "--"];
    a.extend_from_slice(args);
    let o = run("runuser", &a);
    assert!(o.status.success(), "{args:?} as {user}: {}", stderr(&o));
}

/// Root's `report JOB --json` under `strace`: the JSON, and every open of `/dev/ptmx` or of
/// `named` (the path the job named, which leads there) that was more than a lookup
/// (`O_PATH`) and succeeded.
fn traced_report(job: u32, tag: &str, named: &Path) -> (serde_json::Value, Vec<String>) {
    let log = std::env::temp_dir().join(format!("sw-report-{tag}-{}.strace", std::process::id()));
    let t = Instant::now();
    let o = Command::new("timeout")
        .arg(REPORT_BOUND.as_secs().to_string())
        .args([
            "strace",
            "-f",
            "-qq",
            "-e",
            "trace=open,openat,openat2",
            "-o",
        ])
        .arg(&log)
        .arg(slurmwatch_bin())
        .args(["report", &job.to_string(), "--json"])
        .output()
        .unwrap();
    assert!(
        t.elapsed() < REPORT_BOUND,
        "report did not finish within its bound"
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let trace = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let named = format!("\"{}\"", named.display());
    let opened: Vec<String> = trace
        .lines()
        .filter(|l| l.contains("\"/dev/ptmx\"") || l.contains(&named))
        .filter(|l| !l.contains("O_PATH") && !l.contains("= -1"))
        .map(String::from)
        .collect();
    let v = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)));
    (v, opened)
}

#[cluster_test]
fn root_report_never_opens_the_device_a_job_named_as_its_output() {
    let _p = shared_plugstack();
    // The job's own output is the pty multiplexer.
    let job = Submit::new("hostile-ptmx", "echo hi")
        .arg("--output=/dev/ptmx")
        .user(USER1)
        .submit();
    job.wait(WAIT);
    let (v, opened) = traced_report(job.id, "ptmx", Path::new("/dev/ptmx"));
    assert!(opened.is_empty(), "root opened the device: {opened:#?}");
    let f = &v["log"]["files"][0];
    assert_eq!(f["path"], "/dev/ptmx", "{v:#}");
    assert!(
        f["error"]
            .as_str()
            .unwrap_or("")
            .contains("not a regular file"),
        "{f:#}"
    );
}

#[cluster_test]
fn root_report_never_opens_through_a_work_dir_swapped_for_dev() {
    let _p = shared_plugstack();
    let base = job_dir("hostile-wd");
    let wd = base.join("wd");
    as_user(USER1, &["mkdir", wd.to_str().unwrap()]);
    let chdir = format!("--chdir={}", wd.display());
    // A relative output name: Slurm places it in the work dir.
    let job = Submit::new("hostile-wd", "echo hi")
        .arg(&chdir)
        .arg("--output=ptmx")
        .user(USER1)
        .submit();
    job.wait(WAIT);
    assert!(
        wd.join("ptmx").is_file(),
        "the job wrote its output in its work dir"
    );
    // After the job, the owner swaps the work dir for a symlink to /dev.
    as_user(
        USER1,
        &[
            "mv",
            wd.to_str().unwrap(),
            base.join("wd.old").to_str().unwrap(),
        ],
    );
    as_user(USER1, &["ln", "-s", "/dev", wd.to_str().unwrap()]);
    let (v, opened) = traced_report(job.id, "wd", &wd.join("ptmx"));
    assert!(opened.is_empty(), "root opened the device: {opened:#?}");
    let f = &v["log"]["files"][0];
    assert_eq!(f["path"], wd.join("ptmx").display().to_string(), "{v:#}");
    assert!(
        f["error"]
            .as_str()
            .unwrap_or("")
            .contains("not a regular file"),
        "{f:#}"
    );
}

const GIB: u64 = 1 << 30;

fn reading(held_back: bool) -> GpuSample {
    GpuSample {
        utilization_percent: Ok(90),
        memory_utilization_percent: Ok(40),
        memory_used_bytes: Ok(30 * GIB),
        power_draw_milliwatts: Ok(if held_back { 163_000 } else { 398_000 }),
        power_limit_milliwatts: Ok(400_000),
        temperature_celsius: Ok(60),
        sm_clock_mhz: Ok(if held_back { 385 } else { 1410 }),
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

/// A job file written by `owner` (every figure theirs): meta names job `job` of `user` on
/// `node`; `cards` are (uuid, held back in every reading).
fn user_file(
    dir: &Path,
    (job, user, node): (u64, &str, &str),
    owner: u32,
    t0: i64,
    cards: &[(&str, bool)],
) -> PathBuf {
    let path = dir.join(paths::archive_name(job, node));
    let meta = JobMeta {
        job_id: job,
        user: user.into(),
        uid: uid_of(user),
        node: node.into(),
        cluster: None,
        plugin_version: "t".into(),
        interval_seconds: 10,
        source: Source::CgroupV1,
        cores_allocated: Some(1),
        memory_allocated_bytes: Some(GIB),
        started_unix_ms: t0,
        incarnation: None,
    };
    let mut w = Writer::create(&path, &meta).unwrap();
    w.begin_step("batch", t0, Some(1)).unwrap();
    let list: Vec<GpuCard> = cards
        .iter()
        .enumerate()
        .map(|(i, (u, _))| card(u, i as u32))
        .collect();
    let ids = w.register_gpus("batch", t0, &list, &[]).unwrap();
    for i in 0..30 {
        let t = t0 + i * 10_000;
        let mut r = SampleRow::empty(t, Series::Job, SampleKind::Periodic);
        r.usage.cpu_usage_usec = Some(i as u64 * 1_000_000);
        w.push(r);
        for (k, (_, held)) in cards.iter().enumerate() {
            w.push_gpu(t, ids[k].0, reading(*held));
        }
    }
    w.end_step("batch", t0 + 300_000, Some(0)).unwrap();
    w.close().unwrap();
    chown(&path, Some(owner), Some(owner)).unwrap();
    path
}

fn node_of(job: u32) -> String {
    let o = run(
        "sacct",
        &["-j", &job.to_string(), "-X", "-n", "-P", "-o", "NodeList"],
    );
    let n = stdout(&o).trim().to_string();
    assert!(!n.is_empty() && !n.contains(['[', ',']), "one node: {n:?}");
    n
}

/// A 1777 archive base on tmpfs (100,000 directories are made in a second there) holding
/// swuser1's own 0700 directory with the file of swuser1's real job `mine` on `node` (one
/// healthy card, `real`); the base, that directory, and the window's start.
fn archive_with_a_real_job(mine: &Job, node: &str, real: &str) -> (PathBuf, PathBuf, String) {
    // Named by the job: tests in one process share its pid and tag, and run at once.
    let base = PathBuf::from(format!(
        "/dev/shm/slurmwatch-it-arch-{}-{}",
        std::process::id(),
        mine.id
    ));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let own = base.join(USER1);
    as_user(USER1, &["mkdir", "-m", "700", own.to_str().unwrap()]);
    let t0 = (now() - 600) * 1000;
    user_file(
        &own,
        (mine.id.into(), USER1, node),
        uid_of(USER1),
        t0,
        &[(real, false)],
    );
    (base, own, format!("@{}", now() - 1200))
}

/// Root's `cards --json` over `base/%u` with the real sacct; the base is removed.
fn cards_over(base: &Path, since: &str) -> serde_json::Value {
    let template = format!("{}/%u", base.display());
    let o = Command::new(slurmwatch_bin())
        .args([
            "cards",
            "--archive",
            &template,
            "-S",
            since,
            "-E",
            "now",
            "--json",
        ])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(base);
    serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&o), stderr(&o)))
}

/// The card `uuid`'s entry in `cards`' JSON.
fn card_entry<'a>(v: &'a serde_json::Value, uuid: &str) -> Option<&'a serde_json::Value> {
    v["cards"].as_array()?.iter().find(|c| c["uuid"] == uuid)
}

#[cluster_test]
fn cards_never_counts_twenty_forged_files_slurm_does_not_confirm() {
    let _p = shared_plugstack();
    let tag = tag();
    let mine = Submit::new("cards-real", "true").user(USER1).submit();
    let theirs = Submit::new("cards-victim", "true").user(USER2).submit();
    mine.wait(WAIT);
    theirs.wait(WAIT);
    let node = node_of(mine.id);
    let (real, victim, other) = (
        format!("GPU-real-{tag}"),
        format!("GPU-victim-{tag}"),
        format!("GPU-other-{tag}"),
    );
    let (base, own, since) = archive_with_a_real_job(&mine, &node, &real);
    let (u1, t0) = (uid_of(USER1), (now() - 600) * 1000);
    // 20 forged files in swuser1's own directory, each holding back a healthy card on the
    // real node: 18 jobs Slurm never ran, one claiming to be swuser2's, and swuser2's job
    // claimed as swuser1's.
    let forged = [(victim.as_str(), true), (other.as_str(), false)];
    for k in 0..18 {
        user_file(
            &own,
            (3_900_000 + k, USER1, &node),
            u1,
            t0 + k as i64,
            &forged,
        );
    }
    let claimed = user_file(&own, (theirs.id.into(), USER2, &node), u1, t0 + 1, &forged);
    std::fs::rename(
        &claimed,
        own.join(paths::archive_name(u64::from(theirs.id) + 1, &node)),
    )
    .unwrap();
    user_file(&own, (theirs.id.into(), USER1, &node), u1, t0, &forged);
    let v = cards_over(&base, &since);
    assert!(
        card_entry(&v, &victim).is_none() && card_entry(&v, &other).is_none(),
        "forged figures counted: {v:#}"
    );
    let drains = v["drain"].to_string();
    assert!(
        !drains.contains(&victim),
        "a drain line from forged figures: {drains}"
    );
    // The real job's own file counts: Slurm confirms it.
    let c = card_entry(&v, &real).unwrap_or_else(|| panic!("the real job was left out: {v:#}"));
    assert_eq!(c["jobs"], 1, "{c:#}");
    // Each forged file is said (the first few one by one, the rest by number).
    let said = v["window"]["left_out"].to_string();
    assert!(said.contains("Slurm has no job 3900000"), "{said}");
    assert!(said.contains("15 more job files not counted"), "{said}");
}

#[cluster_test]
fn cards_reads_a_users_directory_past_100000_squats() {
    let _p = shared_plugstack();
    let mine = Submit::new("cards-squat", "true").user(USER1).submit();
    mine.wait(WAIT);
    let node = node_of(mine.id);
    let real = format!("GPU-real-{}", tag());
    let (base, _own, since) = archive_with_a_real_job(&mine, &node, &real);
    // swuser2 squats the base with names that sort before every user's.
    let u2 = uid_of(USER2);
    for k in 0..100_000 {
        let d = base.join(format!("0{k:06}"));
        std::fs::create_dir(&d).unwrap();
        chown(&d, Some(u2), Some(u2)).unwrap();
    }
    let v = cards_over(&base, &since);
    let c = card_entry(&v, &real).unwrap_or_else(|| panic!("the real job was pushed out: {v:#}"));
    assert_eq!(c["jobs"], 1, "{c:#}");
    let said = v["window"]["left_out"].to_string();
    assert!(
        said.contains("100000 directories not named for their owner"),
        "{said}"
    );
}
