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
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let lines: Vec<&str> = head.lines().collect();
    let args = match lines.as_slice() {
        [s, subject @ .., user] if *s == "-s" && !subject.is_empty() => {
            vec![s.to_string(), subject.join("\n"), user.to_string()]
        }
        _ => lines.iter().map(|l| l.to_string()).collect(),
    };
    let name = p.file_name().unwrap().to_string_lossy().to_string();
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

fn now_ms() -> i64 {
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
