//! Issue 37's attacks on the end-of-job mail, on the real cluster with the shipped wrapper as
//! slurmctld's MailProg (scripts/cluster.sh; the stand-in mailer keeps each mail):
//!
//! 1. swuser2 names an array job `x⏎Slurm Job_id=<victim> Ended, `: its summary mail's subject
//!    then has a second line naming swuser1's job, which the wrapper once reported on (as
//!    SlurmUser) and mailed to swuser2. Also the FAIL variant naming an array task
//!    (`<array>_3`), and a victim without a recording (sacct's figures alone).
//! 9. a job named `ESC]0;pwned BEL ESC[2J`: the mailed report holds no control byte.

use std::time::{Duration, Instant};

use slurmwatch_tests::*;

use crate::mail::{mail_where, Mail};

const WAIT: Duration = Duration::from_secs(90);

/// Waits until nothing of `job` (an array: every task) is queued.
fn wait_gone(job: u32) {
    let end = Instant::now() + WAIT;
    let id = job.to_string();
    let queued = || {
        let q = run("squeue", &["-h", "-j", &id, "-o", "%i"]);
        !(q.status.success() && stdout(&q).trim().is_empty())
    };
    while queued() {
        assert!(
            Instant::now() < end,
            "job {job} still queued after {WAIT:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The array's summary mail (`Slurm Array Summary Job_id=<array>_* …`).
fn summary_mail(array: u32) -> Mail {
    let want = format!("Slurm Array Summary Job_id={array}_* ");
    mail_where(
        &format!("the summary mail of array {array}"),
        |s| s.starts_with(&want),
        WAIT,
    )
}

/// Nothing of the victim's report in a mail to the attacker: no report at all (an array's
/// summary gets none), so neither the victim's job line, user, nor any report section.
fn assert_no_trace(m: &Mail, victim: &str) {
    assert_eq!(m.args[2], USER2, "{:?}", m.args);
    for trace in [
        format!("Job {victim}"),
        USER1.to_string(),
        "OUTCOME".into(),
        "Source:".into(),
    ] {
        assert!(!m.body.contains(&trace), "{trace:?} leaked:\n{}", m.body);
    }
    assert_eq!(m.body, "", "the summary mail is Slurm's alone");
}

/// A recorded job of swuser1 whose report the attacker wants: its mail would say
/// `Job <id> (swvictim…)  user swuser1`.
fn victim(name: &'static str, record: bool, extra: &[&'static str]) -> Job {
    let mut s = Submit::new(name, "echo secret-output; sleep 1")
        .arg("--mem=128M")
        .arg("-t")
        .arg("5")
        .user(USER1);
    if record {
        s = s.arg("--slurmwatch=1");
    }
    for a in extra {
        s = s.arg(a);
    }
    s.submit()
}

/// swuser2's array job, named `name`, mailing swuser2 (`--mail-user`) as `mail_type` says.
fn attacker(name: &str, mail_type: &str, script: &str) -> Job {
    let mail_type = format!("--mail-type={mail_type}");
    Submit::new(name, script)
        .arg("--array=1-2")
        .arg(&mail_type)
        .arg("--mail-user=swuser2")
        .arg("--mem=64M")
        .arg("-t")
        .arg("5")
        .user(USER2)
        .submit()
}

/// Attack 1: the summary mail of an array named like a second subject line naming a recorded
/// job of swuser1 carries no trace of that job's report.
#[cluster_test]
fn hostile_mail_array_named_like_another_jobs_subject_gets_no_report() {
    let _p = shared_plugstack();
    let v = victim("swvictim-rec", true, &[]);
    assert_eq!(v.wait(WAIT).state, "COMPLETED");
    assert!(spool_file(v.id).exists(), "the victim's job was recorded");
    let name = format!("x\nSlurm Job_id={} Ended, ", v.id);
    let a = attacker(&name, "END", "true");
    wait_gone(a.id);
    let m = summary_mail(a.id);
    assert!(
        m.args[1].contains(&format!("\nSlurm Job_id={} Ended, ", v.id)),
        "the subject carries the forged line: {:?}",
        m.args[1]
    );
    assert_no_trace(&m, &v.id.to_string());
}

/// Attack 1, FAIL variant: the forged line names an array task of swuser1 (`<array>_2`), the
/// attacker's tasks fail, and the FAIL summary is mailed.
#[cluster_test]
fn hostile_mail_failed_array_naming_an_array_task_gets_no_report() {
    let _p = shared_plugstack();
    let v = victim("swvictim-arr", true, &["--array=1-2"]);
    wait_gone(v.id);
    let task = format!("{}_2", v.id);
    let name = format!("x\nSlurm Array Task Job_id={task} ({}) Failed, ", v.id);
    let a = attacker(&name, "FAIL", "exit 1");
    wait_gone(a.id);
    let m = summary_mail(a.id);
    assert!(
        m.args[1].contains(" Failed, "),
        "a FAIL mail: {:?}",
        m.args[1]
    );
    assert_no_trace(&m, &task);
    assert!(!m.body.contains(&format!("Job {}", v.id)), "{}", m.body);
}

/// Attack 1 against a job without a recording: the report would be sacct's figures alone,
/// still the victim's user, node and figures.
#[cluster_test]
fn hostile_mail_naming_an_unrecorded_job_gets_no_report() {
    let _p = shared_plugstack();
    let v = victim("swvictim-plain", false, &[]);
    assert_eq!(v.wait(WAIT).state, "COMPLETED");
    assert!(!spool_file(v.id).exists());
    let name = format!("x\nSlurm Job_id={} Ended, ", v.id);
    let a = attacker(&name, "END", "true");
    wait_gone(a.id);
    let m = summary_mail(a.id);
    assert_no_trace(&m, &v.id.to_string());
}

/// A hostile name on an array that asks for each task's mail (`ARRAY_TASKS`): each
/// task's mail carries that task's own report, swuser2's, never the victim's. (The defence
/// is not "no reports": the job comes from Slurm's variables, checked against the subject's
/// start and, through `report --owner`, against sacct.)
#[cluster_test]
fn hostile_mail_array_tasks_mails_report_their_own_task_only() {
    let _p = shared_plugstack();
    let v = victim("swvictim-rec2", true, &[]);
    assert_eq!(v.wait(WAIT).state, "COMPLETED");
    // On one line: a newline in a job name breaks sacct's records today (issue 37, 6), and
    // this test is about the mail.
    let name = format!("x Slurm Job_id={} Ended, ", v.id);
    let a = Submit::new(&name, "sleep 1")
        .arg("--array=1-2")
        .arg("--mail-type=END,ARRAY_TASKS")
        .arg("--mail-user=swuser2")
        .arg("--slurmwatch=1")
        .arg("--mem=64M")
        .arg("-t")
        .arg("5")
        .user(USER2)
        .submit();
    wait_gone(a.id);
    for t in 1..=2 {
        let task = format!("{}_{t}", a.id);
        let want = format!("Slurm Array Task Job_id={task} (");
        let m = mail_where(
            &format!("task {task}'s mail"),
            |s| s.starts_with(&want),
            WAIT,
        );
        let head = format!("Job {task} (x Slurm Job_id={} Ended, )  user {USER2}", v.id);
        assert!(m.body.starts_with(&head), "task {task}:\n{}", m.body);
        assert!(!m.body.contains(USER1), "{}", m.body);
        assert!(!m.body.contains(&format!("Job {} ", v.id)), "{}", m.body);
    }
}

/// Attack 9 in the mail: a job named `ESC]0;pwned BEL ESC[2J` (its output file's name too):
/// the mailed report shows the name with `?` for each control byte, and its body holds no
/// control character but line breaks.
#[cluster_test]
fn hostile_mail_report_of_a_job_named_with_escapes_has_no_control_bytes() {
    let _p = shared_plugstack();
    let name = "\u{1b}]0;pwned\u{7}\u{1b}[2J";
    let j = Submit::new(name, "sleep 1")
        .arg("--mail-type=END")
        .arg("--slurmwatch=1")
        .arg("--mem=128M")
        .arg("-t")
        .arg("5")
        .user(USER1)
        .submit();
    assert_eq!(j.wait(WAIT).state, "COMPLETED");
    let want = format!("Slurm Job_id={} Name=", j.id);
    let m = mail_where(
        &format!("job {}'s mail", j.id),
        |s| s.starts_with(&want),
        WAIT,
    );
    let head = format!("Job {} (?]0;pwned??[2J)  user {USER1}", j.id);
    assert!(m.body.starts_with(&head), "{:?}", m.body);
    let bad: Vec<(usize, char)> = m
        .body
        .char_indices()
        .filter(|&(_, c)| c.is_control() && c != '\n')
        .collect();
    assert_eq!(bad, [], "control bytes in the mailed body: {:?}", m.body);
}
