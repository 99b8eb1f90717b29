//! contrib/slurmwatch-mail.sh, Slurm's MailProg wrapper: which subjects get the report, and
//! that the mail always reaches the real mailer unchanged (arguments, body) and promptly,
//! whatever the report does; and, where the controller's queue is in use, that the mail is
//! held until the job is settled. The real `slurmwatch mail-hold`, a fake report program and a
//! capturing mailer.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../contrib/slurmwatch-mail.sh");

fn exe(p: &Path, body: &str) {
    std::fs::write(p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

struct Sent {
    args: Vec<String>,
    body: String,
    report_args: Option<String>,
    took: Duration,
}

/// What slurmctld sets in MailProg's environment for the Ended mail of job 123 of `alice`
/// (22.05; docs/admin.md): the wrapper's only source for the job and its user.
const ENDED_ENV: &[(&str, &str)] = &[
    ("SLURM_JOB_ID", "123"),
    ("SLURM_JOB_USER", "alice"),
    ("SLURM_JOB_MAIL_TYPE", "Ended"),
];

/// Runs the wrapper as Slurm does (`-s SUBJECT user`, `body` on stdin, only `env` and PATH in
/// its environment) with `report` as the fake report program's script, and a slurm.conf with
/// no StateSaveLocation (no queue: sent at once). A `sacct` first on PATH fails if called:
/// the wrapper leaves sacct to the report.
fn mail(subject: &str, env: &[(&str, &str)], body: &str, report: &str, timeout_s: u32) -> Sent {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(p.join("slurm.conf"), "ClusterName=t\n").unwrap();
    mail_in(p, subject, env, body, report, timeout_s)
}

/// [`mail`] in `p`, whose `slurm.conf` the wrapper's slurmwatch reads; waits for the mailer.
fn mail_in(
    p: &Path,
    subject: &str,
    env: &[(&str, &str)],
    body: &str,
    report: &str,
    timeout_s: u32,
) -> Sent {
    let (took, p) = start_mail(p, subject, env, body, report, timeout_s);
    let read = |n: &str| std::fs::read_to_string(p.join(n)).ok();
    Sent {
        // NUL-separated: a subject may hold a newline (a job's name).
        args: read("args")
            .expect("the mailer was called")
            .split_terminator('\0')
            .map(str::to_string)
            .collect(),
        body: read("body").unwrap(),
        report_args: read("report_args"),
        took,
    }
}

/// Runs the wrapper to its exit; how long it took.
fn start_mail<'a>(
    p: &'a Path,
    subject: &str,
    env: &[(&str, &str)],
    body: &str,
    report: &str,
    timeout_s: u32,
) -> (Duration, &'a Path) {
    exe(
        &p.join("sacct"),
        "echo called > \"$(dirname \"$0\")/sacct_called\"; exit 1",
    );
    exe(
        &p.join("mailer"),
        &format!(
            "for a in \"$@\"; do printf '%s\\0' \"$a\"; done > {0}/args\ncat > {0}/body",
            p.display()
        ),
    );
    exe(
        &p.join("report"),
        &format!("echo \"$@\" > {}/report_args\n{report}", p.display()),
    );
    std::fs::write(
        p.join("conf"),
        format!(
            "SLURMWATCH_MAILER={0}/mailer\nSLURMWATCH_BIN={1}\nSLURMWATCH_REPORT_BIN={0}/report\nSLURMWATCH_MAIL_TIMEOUT={timeout_s}\nSLURMWATCH_MAIL_SACCT_WAIT=0\nSLURMWATCH_MAIL_HOLD=5\n",
            p.display(),
            env!("CARGO_BIN_EXE_slurmwatch")
        ),
    )
    .unwrap();
    let t = Instant::now();
    let path = format!(
        "{}:{}",
        p.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = Command::new("sh")
        .arg(SCRIPT)
        .args(["-s", subject, "alice"])
        .env_clear()
        .envs(env.iter().copied())
        .env("SLURMWATCH_MAIL_CONF", p.join("conf"))
        .env("SLURM_CONF", p.join("slurm.conf"))
        .env("PATH", path)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let st = child.wait().unwrap();
    let took = t.elapsed();
    assert!(st.success(), "the wrapper exits as the mailer did");
    assert!(
        !p.join("sacct_called").exists(),
        "the wrapper asked sacct itself"
    );
    (took, p)
}

const ENDED: &str = "Slurm Job_id=123 Name=a b Ended, Run time 00:00:05, COMPLETED, ExitCode 0";

#[test]
fn an_ended_mail_gets_the_report_and_slurms_arguments() {
    let s = mail(ENDED, ENDED_ENV, "", "echo 'Job 123 report'", 20);
    assert_eq!(s.args, ["-s", ENDED, "alice"]);
    assert_eq!(s.body, "Job 123 report\n");
    // The report waits for slurmdbd itself and is of alice's job only.
    let ra = s.report_args.unwrap();
    assert!(
        ra.starts_with("report ") && ra.trim_end().ends_with(" --owner alice 123"),
        "{ra}"
    );
    assert!(ra.contains(" --wait-ended 0 "), "{ra}");
    // A body Slurm gave is kept, the report after it.
    let s = mail(ENDED, ENDED_ENV, "hello\n", "echo R", 20);
    assert_eq!(s.body, "hello\n\nR\n");
}

/// Attack (issue 37, 1): swuser2's array job is named `x⏎Slurm Job_id=<victim> Ended, `, so its
/// summary mail's subject has a second line naming the victim; the FAIL variant names an array
/// task. The job and user come from Slurm's variables (as captured on 22.05 for such a mail):
/// the summary gets no report at all, and never the victim's.
#[test]
fn a_job_named_like_a_subject_never_gets_another_jobs_report() {
    let summary_env: &[(&str, &str)] = &[
        ("SLURM_JOB_ID", "300"),
        ("SLURM_ARRAY_JOB_ID", "300"),
        ("SLURM_ARRAY_TASK_ID", "3"),
        ("SLURM_JOB_USER", "swuser2"),
        ("SLURM_JOB_MAIL_TYPE", "Ended"),
    ];
    for (subject, env) in [
        (
            "Slurm Array Summary Job_id=300_* (300) Name=x\nSlurm Job_id=250 Ended,  Ended, COMPLETED, ExitCode [0-0]",
            summary_env,
        ),
        (
            "Slurm Array Summary Job_id=300_* (300) Name=x\nSlurm Array Task Job_id=252_3 (255) Failed,  Failed, FAILED, ExitCode [1-1]",
            &[
                ("SLURM_JOB_ID", "300"),
                ("SLURM_ARRAY_JOB_ID", "300"),
                ("SLURM_ARRAY_TASK_ID", "3"),
                ("SLURM_JOB_USER", "swuser2"),
                ("SLURM_JOB_MAIL_TYPE", "Failed"),
            ][..],
        ),
        // No variables at all (a Slurm that sets none): nothing to trust, no report.
        ("Slurm Job_id=250 Name=y Ended, Run time 00:00:01, COMPLETED, ExitCode 0", &[][..]),
    ] {
        let s = mail(subject, env, "", "echo 'REPORT OF '\"$*\"", 20);
        assert_eq!(s.args, ["-s", subject, "alice"], "{subject:?}");
        assert_eq!(s.body, "", "{subject:?}: Slurm's mail unchanged");
        assert!(s.report_args.is_none(), "{subject:?}: {:?}", s.report_args);
    }
}

/// The job named in the variables, whatever the subject's later lines say; the subject must
/// begin as Slurm writes it for that job (a summary, whose variables match one task's, does
/// not).
#[test]
fn subjects_and_variables() {
    let task_env: &[(&str, &str)] = &[
        ("SLURM_JOB_ID", "107"),
        ("SLURM_ARRAY_JOB_ID", "103"),
        ("SLURM_ARRAY_TASK_ID", "4"),
        ("SLURM_JOB_USER", "alice"),
        ("SLURM_JOB_MAIL_TYPE", "Ended"),
    ];
    let env = |id: &'static str, kind: &'static str| -> Vec<(&'static str, &'static str)> {
        vec![
            ("SLURM_JOB_ID", id),
            ("SLURM_JOB_USER", "alice"),
            ("SLURM_JOB_MAIL_TYPE", kind),
        ]
    };
    for (subject, env, job) in [
        ("Slurm Job_id=7 Name=x Failed, Run time 00:01:00, FAILED, ExitCode 1", env("7", "Failed"), Some("7")),
        ("Slurm Array Task Job_id=103_4 (107) Name=arr Ended, Run time 00:01:01, COMPLETED, ExitCode 0", task_env.to_vec(), Some("103_4")),
        ("Slurm Job_id=9 Name=x\nSlurm Job_id=1 Ended, Run time 00:01:11, TIMEOUT, ExitCode 0", env("9", "Ended"), Some("9")),
        ("Slurm Job_id=8 Name=x Began, Queued time 00:00:01", env("8", "Began"), None),
        ("Slurm Array Summary Job_id=103_* (103) Name=arr Ended, Mixed, MaxSignal [0]", task_env.to_vec(), None),
        ("Slurm Job_id=8 Name=x Reached 90% of time limit, Run time 00:09:00", env("8", "Time reached 90%"), None),
        // The variables and the subject disagree: not Slurm's mail for one job.
        ("Slurm Job_id=250 Name=x Ended, Run time 00:00:01, COMPLETED, ExitCode 0", env("251", "Ended"), None),
        ("Slurm Job_id=8 Name=x Ended, Run time 00:00:01, COMPLETED, ExitCode 0", env("8;id", "Ended"), None),
        ("hello", env("8", "Ended"), None),
    ] {
        let s = mail(subject, &env, "b\n", "echo R", 20);
        assert_eq!(s.args, ["-s", subject, "alice"], "{subject}");
        match job {
            Some(j) => {
                assert_eq!(s.body, "b\n\nR\n", "{subject}");
                let ra = s.report_args.unwrap();
                assert!(ra.trim_end().ends_with(&format!(" --owner alice {j}")), "{subject}: {ra}");
            }
            None => {
                assert_eq!(s.body, "b\n", "{subject}: passed through");
                assert!(s.report_args.is_none(), "{subject}: no report asked");
            }
        }
    }
}

#[test]
fn a_failing_crashing_or_hanging_report_never_costs_the_mail() {
    for report in [
        "echo partial; echo 'slurmwatch: sacct failed' >&2; exit 2",
        "echo partial; kill -SEGV $$",
        "echo partial; exec sleep 60",
        "trap '' TERM; echo partial; sleep 60",
    ] {
        let s = mail(ENDED, ENDED_ENV, "body\n", report, 2);
        assert_eq!(s.args, ["-s", ENDED, "alice"], "{report}");
        assert_eq!(s.body, "body\n", "{report}: Slurm's mail, unchanged");
        // 2 s, then SIGKILL 2 s later: never the report's own 60.
        assert!(s.took < Duration::from_secs(10), "{report}: {:?}", s.took);
    }
}

/// What the wrapper now leaves to the report, with the real binary and a fake sacct: Slurm
/// mails as the job ends, when slurmdbd may not have the job at all, or only its stand-in
/// record (the end before the start: no request, user root). `--wait-ended` asks again until
/// the record is whole, and that last answer is the report's (no extra query); `--owner`
/// reports only a job sacct says is that user's.
#[test]
fn the_report_waits_for_slurmdbd_and_checks_the_owner() {
    let d = tempfile::tempdir().unwrap();
    let calls = d.path().join("calls");
    let u = '\u{1f}';
    let header = [
        "JobID", "JobIDRaw", "JobName", "User", "UID", "State", "ExitCode", "End", "ReqTRES",
    ]
    .join(&u.to_string());
    let line = |user: &str, state: &str, end: &str, req: &str| {
        ["123", "123", "job", user, "1000", state, "0:0", end, req].join(&u.to_string())
    };
    let end = "2026-12-01T10:00:00";
    let req = "billing=1,cpu=1,mem=256M,node=1";
    // Empty, then still running, then the stand-in row, then the whole record (of `owner`),
    // then a line the report must never see. `owner` None: the whole record of swuser1 at
    // once.
    let sacct = |owner: Option<&str>| {
        match owner {
        Some(owner) => format!(
            "n=$(cat {c} 2>/dev/null || echo 0); n=$((n + 1)); echo $n > {c}\n\
             echo '{header}'\ncase $n in 1) ;; 2) echo '{}' ;; 3) echo '{}' ;; 4) echo '{}' ;; *) echo '{}' ;; esac",
            line("alice", "RUNNING", "Unknown", req),
            line("root", "COMPLETED", end, ""),
            line(owner, "COMPLETED", end, req),
            line("mallory", "FAILED", end, req),
            c = calls.display(),
        ),
        None => format!("echo '{header}'; echo '{}'", line("swuser1", "COMPLETED", end, req)),
    }
    };
    let fake = d.path().join("sacct");
    let report = |owner_in_sacct: Option<&str>| {
        let _ = std::fs::remove_file(&calls);
        // Printed with the delimiter the report asks for, as the real sacct does.
        exe(
            &fake,
            &format!(
                "d='|'\nfor a in \"$@\"; do case \"$a\" in --delimiter=*) d=\"${{a#--delimiter=}}\";; esac; done\n\
                 {{ {}\n}} | sed \"s/$(printf '\\037')/$d/g\"",
                sacct(owner_in_sacct)
            ),
        );
        Command::new(env!("CARGO_BIN_EXE_slurmwatch"))
            .args([
                "report",
                "--no-log",
                "--wait-ended",
                "10",
                "--owner",
                "alice",
                "123",
            ])
            .args(["--spool", d.path().to_str().unwrap()])
            .env("SLURMWATCH_SACCT", &fake)
            .env("SLURMWATCH_SITE_FILE", "")
            .env("TZ", "UTC")
            .output()
            .unwrap()
    };
    let o = report(Some("alice"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.starts_with("Job 123 (job)  user alice"), "{out}");
    assert!(out.contains("\nOUTCOME\n  COMPLETED, exit code 0"), "{out}");
    assert_eq!(std::fs::read_to_string(&calls).unwrap().trim(), "4");
    // The whole record names another user: no report, one sentence, exit 2.
    let o = report(None);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(err.contains("belongs to \"swuser1\""), "{err}");
}

/// Where the controller's queue is in use (an EpilogSlurmctld of ours settled a job before),
/// the wrapper returns at once and the mail waits, with its report, until the job is settled;
/// it then goes within the deliverer's half-second look.
#[test]
fn the_mail_is_held_until_the_job_is_settled() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let state = p.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(
        p.join("slurm.conf"),
        format!("ClusterName=t\nStateSaveLocation={}\n", state.display()),
    )
    .unwrap();
    let q = slurmwatch_core::mailq::Queue::under(&state);
    q.settle("1").unwrap(); // an earlier job: the queue is in use
    let (took, _) = start_mail(p, ENDED, ENDED_ENV, "", "echo 'Job 123 report'", 20);
    assert!(
        took < Duration::from_secs(2),
        "the wrapper waited: {took:?}"
    );
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!p.join("args").exists(), "sent before the job was settled");
    q.settle("123").unwrap();
    let t = Instant::now();
    while !p.join("body").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "not sent once settled"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        std::fs::read_to_string(p.join("body")).unwrap(),
        "Job 123 report\n"
    );
    let left = std::fs::read_dir(state.join("slurmwatch-mail/queue"))
        .unwrap()
        .count();
    assert_eq!(left, 0, "the sent mail is still queued");
    // Never settled (no EpilogSlurmctld ran for it): sent at the hold's bound (5 s here).
    let e = [
        ("SLURM_JOB_ID", "124"),
        ("SLURM_JOB_USER", "alice"),
        ("SLURM_JOB_MAIL_TYPE", "Ended"),
    ];
    let subject = ENDED.replace("123", "124");
    std::fs::remove_file(p.join("body")).unwrap();
    let t = Instant::now();
    start_mail(p, &subject, &e, "", "echo R", 20);
    while !p.join("body").exists() {
        assert!(
            t.elapsed() < Duration::from_secs(9),
            "not sent at the bound"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(t.elapsed() >= Duration::from_secs(4), "{:?}", t.elapsed());
}
