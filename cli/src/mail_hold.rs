//! `slurmwatch mail-hold` (hidden): the end-of-job mail held until the job's summary is in
//! slurmdbd, for `contrib/slurmwatch-mail.sh` (Slurm's MailProg, as SlurmUser on the
//! controller). The queue and its rules are `slurmwatch_core::mailq`; this runs the processes.
//!
//! As MailProg: queue the mail and start a detached deliverer, then return at once (slurmctld
//! holds one of its agent threads while MailProg runs). The deliverer waits until the
//! EpilogSlurmctld has settled the job or `--hold` seconds have passed since the mail was
//! queued, appends `slurmwatch report` (bounded; left out when it fails), and hands the mail
//! to the real mailer, removing it from the queue only once the mailer accepted it. Mails
//! whose deliverer died are sent by the next MailProg run. Where the queue cannot be used (no
//! StateSaveLocation here, a directory others can write) or no EpilogSlurmctld of ours ever
//! settled a job, the mail is sent at once, with the report, as before.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use slurmwatch_core::mailq::{self, Entry, Queue};
use slurmwatch_core::slurm::command;
use slurmwatch_core::sys::now_unix_ms;

#[derive(Args, Clone)]
pub struct MailHoldArgs {
    /// The job, as sacct names it (123, or 123_4 for an array task).
    #[arg(long, required_unless_present = "deliver")]
    pub job: Option<String>,
    /// The job's own id (SLURM_JOB_ID), when it differs from --job (an array task).
    #[arg(long, value_name = "ID")]
    pub job_id: Option<String>,
    /// The job's user, as slurmctld named it to MailProg.
    #[arg(long, required_unless_present = "deliver")]
    pub user: Option<String>,
    /// The most seconds a mail waits for the job's summary (the EpilogSlurmctld's bound and
    /// slurmdbd's delay).
    #[arg(long, value_name = "SECONDS", default_value_t = 90)]
    pub hold: u64,
    /// Seconds the report may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 20)]
    pub report_timeout: u64,
    /// Seconds the report waits for slurmdbd's end record.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub sacct_wait: u64,
    /// The program that writes the report (default: this one).
    #[arg(long, value_name = "PATH")]
    pub report_bin: Option<PathBuf>,
    /// The queue's directory (default: slurm.conf's StateSaveLocation/slurmwatch-mail).
    #[arg(long, value_name = "DIR")]
    pub queue: Option<PathBuf>,
    /// Deliver this queued mail (the detached deliverer).
    #[arg(long, value_name = "FILE")]
    pub deliver: Option<PathBuf>,
    /// The real mailer and Slurm's arguments to it.
    #[arg(last = true)]
    pub mailer: Vec<String>,
}

/// The most left-over mails one MailProg run starts deliverers for.
const STALE_PER_RUN: usize = 4;
/// How long the real mailer may take to accept a mail.
const MAILER_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest report appended to a mail.
const MAX_REPORT_BYTES: usize = 256 << 10;
/// How often a deliverer looks for the job's settled mark (one `stat`).
const SETTLED_POLL: Duration = Duration::from_millis(500);

fn queue_of(args: &MailHoldArgs) -> Option<Queue> {
    args.queue.clone().map(|dir| Queue { dir }).or_else(|| {
        slurmwatch_core::site::Site::here()
            .state_save_location
            .as_deref()
            .map(Queue::under)
    })
}

pub fn run(args: MailHoldArgs) -> Result<i32> {
    let queue = queue_of(&args);
    if let Some(path) = &args.deliver {
        let Some(q) = queue else {
            bail!("no queue to deliver from.\nhint: give --queue");
        };
        return Ok(deliver(&q, path, &args));
    }
    let (Some(job), Some(user)) = (args.job.clone(), args.user.clone()) else {
        bail!("--job and --user are required.");
    };
    if args.mailer.is_empty() {
        bail!("no mailer.\nhint: slurmwatch mail-hold --job ID --user U -- /usr/bin/mail -s SUBJECT ADDRESS");
    }
    let body = read_body();
    let mut entry = mailq::entry(&job, &user, args.mailer.clone(), body);
    entry.job_id = args.job_id.clone().filter(|id| *id != job);
    if let Some(q) = queue.as_ref().filter(|q| q.in_use()) {
        // Mails a dead deliverer left, sent now (oldest first), each by a deliverer of its own.
        let stale_after =
            Duration::from_secs(args.hold + args.report_timeout + args.sacct_wait + 60);
        // A few per run: a day of a mail server's refusals never starts hundreds of reports
        // (and their sacct calls) at once on the controller.
        for p in q.stale(stale_after).into_iter().take(STALE_PER_RUN) {
            let _ = spawn_deliverer(&args, q, &p);
        }
        match q
            .put(&entry)
            .and_then(|p| spawn_deliverer(&args, q, &p).map(|()| p))
        {
            Ok(_) => return Ok(0),
            // Queued but no deliverer: the next MailProg run sends it; nothing else to do.
            Err(e) if e.starts_with("deliverer:") => {
                eprintln!("slurmwatch mail-hold: {e}; the next mail sends it");
                return Ok(0);
            }
            Err(e) => eprintln!("slurmwatch mail-hold: {e}; sent without holding"),
        }
    }
    let body = with_report(&entry, &args);
    match send(&entry.argv, &body) {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("slurmwatch mail-hold: {e}");
            Ok(1)
        }
    }
}

/// Slurm's body (empty as Slurm sends it), at most [`mailq::MAX_BODY_BYTES`].
fn read_body() -> String {
    use std::io::Read;
    let mut b = Vec::new();
    let _ = std::io::stdin()
        .take(mailq::MAX_BODY_BYTES as u64)
        .read_to_end(&mut b);
    String::from_utf8_lossy(&b).into_owned()
}

/// Starts `slurmwatch mail-hold --deliver PATH` in a session of its own, with no terminal
/// and no pipe of slurmctld's (which waits for MailProg's output to close).
fn spawn_deliverer(args: &MailHoldArgs, q: &Queue, path: &Path) -> Result<(), String> {
    let me = std::env::current_exe().map_err(|e| format!("deliverer: {e}"))?;
    let report_bin = args.report_bin.clone().unwrap_or_else(|| me.clone());
    let mut cmd = Command::new(&me);
    cmd.arg("mail-hold")
        .arg("--deliver")
        .arg(path)
        .arg("--queue")
        .arg(&q.dir)
        .args(["--hold", &args.hold.to_string()])
        .args(["--report-timeout", &args.report_timeout.to_string()])
        .args(["--sacct-wait", &args.sacct_wait.to_string()])
        .arg("--report-bin")
        .arg(report_bin)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe and has no preconditions in a fresh child.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    cmd.spawn()
        .map(drop)
        .map_err(|e| format!("deliverer: cannot start {}: {e}", me.display()))
}

/// The deliverer: waits for the job's settled mark within the hold, then sends with the
/// report. Exit 0 when sent (or already taken by another deliverer), 1 when the mailer failed
/// (the mail stays queued).
fn deliver(q: &Queue, path: &Path, args: &MailHoldArgs) -> i32 {
    let Some((claimed, entry)) = q.claim(path) else {
        return 0;
    };
    let until_ms = entry.queued_unix_ms + (args.hold as i64) * 1000;
    while !q.entry_settled(&entry) && now_unix_ms() < until_ms {
        std::thread::sleep(SETTLED_POLL);
    }
    let body = with_report(&entry, args);
    match send(&entry.argv, &body) {
        Ok(()) => {
            q.done(&claimed);
            0
        }
        Err(_) => {
            q.release(&claimed);
            1
        }
    }
}

/// The body with `slurmwatch report --owner USER JOB` appended, when the report exited 0
/// with output within its bound (SIGTERM past it, SIGKILL 2 s later); else the body as is.
fn with_report(e: &Entry, args: &MailHoldArgs) -> String {
    let bin = args
        .report_bin
        .clone()
        .or_else(|| std::env::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("slurmwatch"));
    let mut cmd = Command::new(bin);
    cmd.args(["report", "--no-log"])
        .args(["--sacct-timeout", &args.report_timeout.to_string()])
        .args(["--wait-ended", &args.sacct_wait.to_string()])
        .args(["--owner", &e.user, &e.job]);
    let limit = Duration::from_secs(args.report_timeout + args.sacct_wait);
    let report = match command::run_command(cmd, limit, Some(Duration::from_secs(2))) {
        Ok(f) if f.success && !f.stdout.is_empty() => f.stdout,
        _ => return e.body.clone(),
    };
    let mut body = e.body.clone();
    if !body.is_empty() {
        body.push('\n');
    }
    let mut cut = report.len().min(MAX_REPORT_BYTES);
    while !report.is_char_boundary(cut) {
        cut -= 1;
    }
    body.push_str(&report[..cut]);
    body
}

/// Hands `body` to the mailer `argv`; `Err` (one sentence) unless it exited 0 in time.
fn send(argv: &[String], body: &str) -> Result<(), String> {
    let (program, rest) = argv.split_first().ok_or("no mailer")?;
    let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
    match command::run_with_input(program, &rest, body.as_bytes(), MAILER_TIMEOUT) {
        Ok(f) if f.success => Ok(()),
        Ok(f) => Err(format!("the mailer {program} failed: {}", f.reason())),
        Err(e) => Err(e.to_string()),
    }
}
