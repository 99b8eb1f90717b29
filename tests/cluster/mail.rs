//! contrib/slurmwatch-mail.sh as the cluster's real MailProg (scripts/cluster.sh): slurmctld
//! runs it for `--mail-type=END` jobs, and it hands the mail to a stand-in mailer that keeps
//! each one (arguments, body) in MAIL_DIR. A recorded job's mail has Slurm's subject and the
//! report; a job without a recording still gets its mail; a report that fails (exit 2 on a
//! missing site file), crashes, hangs past the wrapper's limit, or a missing binary, still
//! delivers Slurm's mail unchanged and promptly. The faults are chosen by job name in
//! scripts/cluster.sh's slurmwatch-mail.conf.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use slurmwatch_tests::*;

const MAIL_DIR: &str = "/var/spool/slurmwatch-test-mail";
const WAIT: Duration = Duration::from_secs(90);

/// One captured mail.
#[derive(Debug)]
pub(crate) struct Mail {
    pub(crate) args: Vec<String>,
    pub(crate) body: String,
    /// When the stand-in mailer got it (its file name), in ms since the epoch.
    pub(crate) sent_unix_ms: i64,
}

/// The `Ended` mail of `job`, waited for.
fn ended_mail(job: u32, timeout: Duration) -> Mail {
    let want = format!("Slurm Job_id={job} ");
    mail_where(
        &format!("an Ended mail for job {job}"),
        |s| s.starts_with(&want) && s.contains(" Ended, "),
        timeout,
    )
}

/// The first mail (in the order sent) whose subject, Slurm's `-s` argument, `matches`; waited
/// for.
pub(crate) fn mail_where(what: &str, matches: impl Fn(&str) -> bool, timeout: Duration) -> Mail {
    let end = std::time::Instant::now() + timeout;
    loop {
        let mut files: Vec<PathBuf> = std::fs::read_dir(MAIL_DIR)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|x| x == "mail"));
        files.sort();
        for p in files {
            let m = read_mail(&p);
            if m.args.len() == 3 && m.args[0] == "-s" && matches(&m.args[1]) {
                return m;
            }
        }
        assert!(
            std::time::Instant::now() < end,
            "no mail in {MAIL_DIR} within {timeout:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A mail as the stand-in mailer keeps it: `-s`, the subject and the user, then a blank line
/// and the body. An argument holding a newline (a job's name in the subject) spans lines: the
/// subject is every line between `-s` and the last argument line.
fn read_mail(p: &std::path::Path) -> Mail {
    let text = std::fs::read_to_string(p).unwrap_or_default();
    parse_mail(&p.file_name().unwrap().to_string_lossy(), &text)
}

/// A kept mail from its file name (`<ns>.<pid>.mail`, the time it came in) and its text.
pub(crate) fn parse_mail(name: &str, text: &str) -> Mail {
    let (head, body) = text.split_once("\n\n").unwrap_or((text, ""));
    let lines: Vec<&str> = head.lines().collect();
    let args = match lines.as_slice() {
        [s, subject @ .., user] if *s == "-s" && !subject.is_empty() => {
            vec![s.to_string(), subject.join("\n"), user.to_string()]
        }
        _ => lines.iter().map(|l| l.to_string()).collect(),
    };
    let ns: i64 = name.split('.').next().unwrap().parse().unwrap();
    Mail {
        args,
        body: body.to_string(),
        sent_unix_ms: ns / 1_000_000,
    }
}

fn mailed(name: &'static str, record: bool) -> Job {
    let mut s = Submit::new(name, "sleep 2; echo done")
        .arg("--mail-type=END")
        .arg("--mem=256M")
        .arg("-t")
        .arg("5")
        .user(USER1);
    if record {
        s = s.arg("--slurmwatch=1");
    }
    s.submit()
}

/// Slurm's own arguments: `-s SUBJECT USER`, the subject naming the job and its end.
fn assert_slurms_arguments(m: &Mail, job: &Job, name: &str) {
    assert_eq!(m.args.len(), 3, "{:?}", m.args);
    assert_eq!(m.args[0], "-s");
    let subject = format!("Slurm Job_id={} Name={name} Ended, Run time ", job.id);
    assert!(m.args[1].starts_with(&subject), "{:?}", m.args);
    assert!(
        m.args[1].ends_with(", COMPLETED, ExitCode 0"),
        "{:?}",
        m.args
    );
    assert!(m.args[2].starts_with(USER1), "{:?}", m.args);
}

pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[cluster_test]
fn mail_of_a_recorded_job_has_slurms_subject_and_the_report() {
    let _p = shared_plugstack();
    let job = mailed("swmail-rec", true);
    assert_eq!(job.wait(WAIT).state, "COMPLETED");
    let m = ended_mail(job.id, WAIT);
    assert_slurms_arguments(&m, &job, "swmail-rec");
    // The report as `slurmwatch report` prints it, from the job's file: Slurm sends the mail
    // before EpilogSlurmctld stores the summary, and here the spool is on the controller.
    let head = format!("Job {} (swmail-rec)  user {USER1}", job.id);
    assert!(m.body.starts_with(&head), "{}", m.body);
    let source = format!("Source: recording {}", spool_file(job.id).display());
    assert!(m.body.contains(&source), "{}", m.body);
    for section in ["\nFINDINGS\n", "\nNEXT TIME\n"] {
        assert!(m.body.contains(section), "{section:?} missing:\n{}", m.body);
    }
}

/// The site file reaches the mail: its threshold says `walltime_slack` for this 5-min limit
/// (by default not said under 30 min), its note and link stand under it.
#[cluster_test]
fn mail_carries_the_site_files_threshold_and_note() {
    let _p = shared_plugstack();
    let job = mailed("swmail-site", true);
    assert_eq!(job.wait(WAIT).state, "COMPLETED");
    let m = ended_mail(job.id, WAIT);
    assert_slurms_arguments(&m, &job, "swmail-site");
    let at = m
        .body
        .find("  [walltime_slack] Used ")
        .unwrap_or_else(|| panic!("{}", m.body));
    let under: Vec<&str> = m.body[at..].lines().skip(1).take(2).collect();
    assert_eq!(
        under,
        [
            "      site note: Shorter limits start sooner on this cluster.",
            "      see https://hpc.example.org/docs/walltime"
        ]
    );
    // Without the site file the same job's report does not say it.
    let o = std::process::Command::new(slurmwatch_bin())
        .args(["report", "--no-log", &job.id.to_string()])
        .env("SLURMWATCH_SITE_FILE", "")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stdout(&o).contains("[walltime_slack]"), "{}", stdout(&o));
}

/// Without a recording the mail still comes, with the report from sacct's figures when sacct
/// already has the job (it says so), else Slurm's mail alone — never lost.
#[cluster_test]
fn mail_of_a_job_without_a_recording_still_comes() {
    let _p = shared_plugstack();
    let job = mailed("swmail-plain", false);
    assert_eq!(job.wait(WAIT).state, "COMPLETED");
    let m = ended_mail(job.id, WAIT);
    assert_slurms_arguments(&m, &job, "swmail-plain");
    assert!(!spool_file(job.id).exists());
    // sacct had the end record when the mail went in every run seen here; the race with
    // slurmdbd is real, so Slurm's mail alone is allowed, anything else is not.
    if !m.body.is_empty() {
        let head = format!("Job {} (swmail-plain)  user {USER1}", job.id);
        assert!(m.body.starts_with(&head), "{}", m.body);
        for want in [
            "Source: sacct only (no recording)",
            "\nOUTCOME\n  COMPLETED, exit code 0",
        ] {
            assert!(m.body.contains(want), "{want:?} missing:\n{}", m.body);
        }
    }
    eprintln!(
        "mail of job {} without a recording: {}",
        job.id,
        if m.body.is_empty() {
            "Slurm's mail alone".to_string()
        } else {
            format!("with the sacct report ({} bytes)", m.body.len())
        }
    );
}

/// Each fault: Slurm's mail as Slurm gave it (no report text, not even the broken report's
/// partial output), soon after the job ended — the hang within its 3-s limit (its wait for
/// slurmdbd set to 0 in scripts/cluster.sh) and the 2-s kill grace, plus Slurm's own delay.
#[cluster_test]
fn mail_is_delivered_unchanged_and_promptly_when_the_report_fails() {
    let _p = shared_plugstack();
    let faults = ["swmail-fail", "swmail-crash", "swmail-hang", "swmail-nobin"];
    let jobs: Vec<(&str, Job)> = faults.iter().map(|&n| (n, mailed(n, true))).collect();
    for (name, job) in &jobs {
        assert_eq!(job.wait(WAIT).state, "COMPLETED", "{name}");
        let ended_ms = now_ms();
        let m = ended_mail(job.id, WAIT);
        assert_slurms_arguments(&m, job, name);
        assert_eq!(m.body, "", "{name}: Slurm's mail unchanged");
        // From the moment sacct had the end (after the mail may already have gone) to the
        // mail: the hang is cut at 3 s (+2 s grace).
        let late_ms = m.sent_unix_ms - ended_ms;
        eprintln!(
            "{name}: job {} mail {late_ms} ms after sacct showed its end",
            job.id
        );
        assert!(late_ms < 15_000, "{name}: mail {late_ms} ms after the end");
    }
}

/// The held mails' queue on the test cluster's controller (StateSaveLocation/slurmwatch-mail).
const MAIL_QUEUE: &str = "/var/spool/slurmctld/slurmwatch-mail";

/// The queue is in use once an EpilogSlurmctld of ours has settled a job: a job without
/// mail, waited for until its EpilogSlurmctld has run.
fn queue_in_use() {
    let settled = std::path::Path::new(MAIL_QUEUE).join("settled");
    if !settled.is_dir() {
        let job = Submit::new("swmail-warm", "true").user(USER1).submit();
        job.wait(WAIT);
        let end = std::time::Instant::now() + WAIT;
        while !settled.join(job.id.to_string()).exists() {
            assert!(
                std::time::Instant::now() < end,
                "job {} never settled",
                job.id
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// Issue 36, part 4: at a site the controller has no spool (the report here is made with the
/// spool out of its reach, scripts/cluster.sh's `swmail-nospool`), and Slurm mails as the job
/// ends, before the EpilogSlurmctld has stored the summary. The mail is held until it has, and
/// carries the recorded figures from slurmdbd, within the stated bound.
#[cluster_test(Phase::Cgroup)]
fn mail_is_held_until_the_summary_is_stored_and_carries_it() {
    let _p = shared_plugstack();
    let _server = crate::slurmdbd::Server::start();
    queue_in_use();
    let job = Submit::new(
        "swmail-nospool",
        "python3 -c \"import time; a = bytearray(200 << 20); time.sleep(3)\"",
    )
    .arg("--mail-type=END")
    .arg("--slurmwatch=1")
    .arg("--mem=512M")
    .arg("-t")
    .arg("5")
    .user(USER1)
    .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED", "{}", job.output());
    let ended_ms = now_ms();
    let m = ended_mail(job.id, Duration::from_secs(150));
    assert_slurms_arguments(&m, &job, "swmail-nospool");
    let late_ms = m.sent_unix_ms - ended_ms;
    eprintln!(
        "job {}: mail {late_ms} ms after sacct showed its end",
        job.id
    );
    // The bound: SLURMWATCH_MAIL_HOLD (90 s) and the report's own limit and wait (30 s).
    assert!(late_ms < 120_000, "mail {late_ms} ms after the end");
    let stored = crate::slurmdbd::admin_comment_now(&job);
    assert!(
        slurmwatch_core::analysis::admin_comment::is_ours(&stored),
        "{stored}"
    );
    assert!(
        m.body
            .contains("Source: the job's summary in slurmdbd (AdminComment"),
        "{}",
        m.body
    );
    // The recorded working-set peak, as the file has it, and the #SBATCH advice from it.
    let from_file = cli_json(&["report", &job.id.to_string(), "--json", "--no-log"]);
    let peak = from_file["memory"]["peak_working_set_bytes"]
        .as_f64()
        .unwrap();
    assert!(peak > 200.0 * 1048576.0, "{peak}");
    let from_dbd = cli_json(&[
        "report",
        &job.id.to_string(),
        "--json",
        "--no-log",
        "--spool",
        "/nonexistent/slurmwatch-spool",
    ]);
    assert_eq!(from_dbd["source"], "slurmdbd_summary");
    assert_eq!(
        from_dbd["memory"]["peak_working_set_bytes"].as_f64(),
        Some(peak)
    );
    assert!(m.body.contains("#SBATCH --mem="), "{}", m.body);
    // Sent, so no longer queued.
    let left: Vec<_> = std::fs::read_dir(std::path::Path::new(MAIL_QUEUE).join("queue"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left
            .iter()
            .any(|n| n.to_string_lossy().contains(&format!(".{}.", job.id))),
        "{left:?}"
    );
}

/// Nothing is lost: the mail server refuses a held mail; it stays queued, and once the server
/// takes mail again, the next MailProg run (another job's mail) sends it.
#[cluster_test(Phase::Cgroup)]
fn a_held_mail_the_mailer_refused_is_sent_by_the_next_mail() {
    let _p = shared_plugstack();
    queue_in_use();
    let refuse = std::path::Path::new(MAIL_DIR).join(".refuse");
    std::fs::write(&refuse, "").unwrap();
    let job = Submit::new("swmail-nospool-lost", "true")
        .arg("--mail-type=END")
        .arg("-t")
        .arg("5")
        .user(USER1)
        .submit();
    assert_eq!(job.wait(WAIT).state, "COMPLETED");
    // Queued, refused by the mailer, given back to the queue.
    let queue = std::path::Path::new(MAIL_QUEUE).join("queue");
    let id = format!(".{}.", job.id);
    let entry = || {
        std::fs::read_dir(&queue).ok().and_then(|d| {
            d.flatten().map(|e| e.path()).find(|p| {
                p.to_string_lossy().contains(&id) && p.extension().is_some_and(|x| x == "json")
            })
        })
    };
    let end = std::time::Instant::now() + WAIT;
    let held = loop {
        // Given back once its deliverer's mailer failed (no deliverer holds it any more).
        let delivering = run("pgrep", &["-f", "mail-hold --deliver"])
            .status
            .success();
        if let (Some(p), false) = (entry(), delivering) {
            break p;
        }
        assert!(
            std::time::Instant::now() < end,
            "job {}'s mail never queued",
            job.id
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    std::fs::remove_file(&refuse).unwrap();
    // Ten minutes on (its deliverer long gone), another job's mail comes.
    let ten_min_ago = SystemTime::now() - Duration::from_secs(600);
    std::fs::File::options()
        .write(true)
        .open(&held)
        .unwrap()
        .set_modified(ten_min_ago)
        .unwrap();
    let next = mailed("swmail-next", false);
    next.wait(WAIT);
    let m = ended_mail(job.id, WAIT);
    assert_eq!(m.args[0], "-s");
    assert!(
        m.args[1].contains("Name=swmail-nospool-lost Ended"),
        "{:?}",
        m.args
    );
    assert!(entry().is_none(), "still queued after it was sent");
}
