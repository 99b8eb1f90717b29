//! Helpers for the real-cluster tests (tests/cluster.rs): submit a job to the local Slurm
//! started by `scripts/cluster.sh`, wait for it, read its output, its sacct record and the
//! slurmd log lines of its steps.
//!
//! Tests share one cluster; each job gets its own directory and name, and log lines are
//! selected by `[<jobid>.` so concurrent tests never read each other's lines.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// `#[cluster_test]`, `#[cluster_test(PHASE)]`: see `tests/harness-macros`.
pub use slurmwatch_tests_macros::cluster_test;

pub const SLURMD_LOG: &str = "/var/log/slurm/slurmd.log";
pub const SLURMCTLD_LOG: &str = "/var/log/slurm/slurmctld.log";
/// Where scripts/cluster.sh installs the plugin under test.
pub const PLUGIN_SO: &str = "/usr/local/lib/slurmwatch/slurmwatch.so";
pub const SPOOL: &str = "/var/spool/slurmwatch";
/// Unprivileged users created by scripts/cluster.sh.
pub const USER1: &str = "swuser1";
pub const USER2: &str = "swuser2";

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The tracking mode the cluster was started in: "cgroup" or "proc".
pub fn cluster_mode() -> String {
    std::fs::read_to_string("/run/slurm/mode")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| panic!("the test cluster is not up: run scripts/test.sh"))
}

/// The number of slurmd the cluster was started with (`NODES=`; 1 when not recorded).
pub fn cluster_nodes() -> usize {
    std::fs::read_to_string("/run/slurm/nodes")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1)
}

/// The phases of scripts/test.sh's cluster tier a test is written for.
#[derive(Debug, Clone, Copy)]
pub enum Phase {
    /// proctrack/cgroup (the job has a cgroup; page cache and OOM kills are measurable).
    Cgroup,
    /// At least this many nodes.
    Nodes(usize),
    /// Exactly this many nodes.
    ExactlyNodes(usize),
    /// The site topology (`scripts/site.sh up`: a controller, a login host and two compute
    /// hosts in namespaces), the tests run on its login host. Not a phase of scripts/test.sh:
    /// `scripts/check-phases.sh` names these tests as left to that tier instead of failing.
    Site,
    /// A VM tier guest (Slurm 24.11 or 26.05 on cgroup v2, the release's package installed:
    /// scripts/vm/guest-run.sh), for what only differs there (another release's plugin beside
    /// the running one). `scripts/check-phases.sh` leaves these to that tier, whose
    /// `scripts/vm/check.py` requires each listed test to pass.
    Guest,
}

/// The marker scripts/vm/guest-run.sh leaves in a VM tier guest.
pub const GUEST_MARKER: &str = "/run/slurm/guest";

/// The running Slurm's major.minor (`sinfo -V`: `slurm 24.11.1` → `24.11`).
pub fn slurm_release() -> String {
    let v = stdout(&run("sinfo", &["-V"]));
    let full = v
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("sinfo -V said {v:?}"));
    full.split('.').take(2).collect::<Vec<_>>().join(".")
}

/// Whether the cluster's jobs live in the unified hierarchy (cgroup v2: the VM tier's guests).
pub fn cgroup_v2() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

/// The marker `scripts/site.sh up` leaves while the site topology is up.
pub const SITE_MARKER: &str = "/run/slurmwatch-site/up";

/// Where a test's phase decisions are recorded: `<test>.ran` / `<test>.skipped`.
/// scripts/check-phases.sh fails the tier when a test was skipped in every phase (a test
/// that only ever returns early would otherwise count as passed).
pub const PHASE_RECORD_DIR: &str = "/tmp/slurmwatch-it/phases";

/// Whether `test` runs in the cluster's current phase; the only way a cluster test may
/// return early. Records the decision (see [`PHASE_RECORD_DIR`]).
pub fn runs_in(test: &str, phase: Phase) -> bool {
    let runs = match phase {
        Phase::Cgroup => cluster_mode() == "cgroup",
        Phase::Nodes(n) => cluster_nodes() >= n,
        Phase::ExactlyNodes(n) => cluster_nodes() == n,
        Phase::Site => Path::new(SITE_MARKER).exists(),
        Phase::Guest => Path::new(GUEST_MARKER).exists(),
    };
    let dir = Path::new(PHASE_RECORD_DIR);
    std::fs::create_dir_all(dir).expect("create the phase record directory");
    let mark = dir.join(format!("{test}.{}", if runs { "ran" } else { "skipped" }));
    std::fs::write(&mark, format!("{phase:?}\n")).expect("record the phase decision");
    if !runs {
        match phase {
            Phase::Site => eprintln!(
                "{test}: the site topology is not up; it runs in the site tier (scripts/site.sh)"
            ),
            Phase::Guest => eprintln!("{test}: runs in the VM tier's guests (scripts/vm/test.sh)"),
            _ => eprintln!(
                "{test}: not this phase ({phase:?}); it runs in another phase of scripts/test.sh"
            ),
        }
    }
    runs
}

pub fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .env("SLURM_TIME_FORMAT", "standard")
        .env("LC_ALL", "C")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd}: {e}"))
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh directory for one test job, writable by the test users.
pub fn job_dir(name: &str) -> PathBuf {
    let n = SEQ.fetch_add(1, Ordering::SeqCst);
    let dir = PathBuf::from(format!(
        "/tmp/slurmwatch-it/{name}-{}-{n}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create job dir");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        "/tmp/slurmwatch-it",
        std::fs::Permissions::from_mode(0o1777),
    )
    .ok();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// What to submit.
pub struct Submit<'a> {
    pub name: &'a str,
    pub script: &'a str,
    pub args: Vec<&'a str>,
    pub env: Vec<(&'a str, &'a str)>,
    /// Submit as this user instead of root.
    pub user: Option<&'a str>,
}

impl<'a> Submit<'a> {
    pub fn new(name: &'a str, script: &'a str) -> Self {
        Submit {
            name,
            script,
            args: Vec::new(),
            env: Vec::new(),
            user: None,
        }
    }

    pub fn arg(mut self, a: &'a str) -> Self {
        self.args.push(a);
        self
    }

    pub fn env(mut self, k: &'a str, v: &'a str) -> Self {
        self.env.push((k, v));
        self
    }

    pub fn user(mut self, u: &'a str) -> Self {
        self.user = Some(u);
        self
    }

    /// Runs sbatch and returns its raw result (for tests of refused submissions).
    pub fn sbatch(&self) -> (Output, PathBuf) {
        let dir = job_dir(self.name);
        let script = dir.join("job.sh");
        std::fs::write(&script, format!("#!/bin/bash\n{}\n", self.script)).unwrap();
        let out = dir.join("out.txt");
        let mut argv: Vec<String> = vec![
            "--parsable".into(),
            format!("--job-name={}", self.name),
            format!("--output={}", out.display()),
            format!("--chdir={}", dir.display()),
        ];
        argv.extend(self.args.iter().map(|s| s.to_string()));
        argv.push(script.display().to_string());
        let mut cmd = match self.user {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.args(["-u", u, "--", "sbatch"]);
                c
            }
            None => Command::new("sbatch"),
        };
        cmd.args(&argv);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        (cmd.output().expect("run sbatch"), dir)
    }

    /// Submits and returns the job; panics with sbatch's message if it was refused.
    pub fn submit(&self) -> Job {
        let log_offset = log_offset_now();
        let (o, dir) = self.sbatch();
        assert!(o.status.success(), "sbatch failed: {}", stderr(&o));
        let id: u32 = stdout(&o)
            .trim()
            .split(';')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("sbatch printed no job id: {}", stdout(&o)));
        Job {
            id,
            dir,
            log_offset,
        }
    }
}

/// The slurmd log's current length: a job's lines are read from here on (job ids restart
/// after `scripts/cluster.sh wipe`, and the log keeps older jobs' lines).
pub fn log_offset_now() -> u64 {
    std::fs::metadata(SLURMD_LOG).map(|m| m.len()).unwrap_or(0)
}

/// A submitted job.
pub struct Job {
    pub id: u32,
    pub dir: PathBuf,
    /// Where this job's lines start in the slurmd log.
    pub log_offset: u64,
}

/// A test that fails cancels the jobs it submitted (their values drop while it unwinds): a
/// job left running would hold the node, and the tests after it would queue and time out
/// for one failure. A passing test's jobs are left as they are (some end on their own).
impl Drop for Job {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = run("scancel", &[&self.id.to_string()]);
        }
    }
}

/// One line of `sacct` for a job or step.
#[derive(Debug, Clone)]
pub struct SacctLine {
    pub job_id: String,
    pub state: String,
    pub exit_code: String,
    pub elapsed_seconds: u64,
    pub total_cpu: String,
    pub max_rss: String,
    /// slurmdbd holds only its stand-in row for the job so far (its end arrived before its
    /// start): name `allocation`, no request — as `sacct::JobAccounting::is_partial` tells it.
    pub partial: bool,
}

impl Job {
    /// Job `id`, submitted held (`sbatch --hold`) so a test could set its spool up first,
    /// released now; its slurmd log lines start here.
    pub fn release(id: u32, dir: PathBuf) -> Job {
        let log_offset = log_offset_now();
        assert!(run("scontrol", &["release", &id.to_string()])
            .status
            .success());
        Job {
            id,
            dir,
            log_offset,
        }
    }

    /// The number the job's script wrote to `file` in its directory (its shell's pid, say),
    /// once it is there.
    pub fn wait_for_number(&self, file: &str, timeout: Duration) -> u32 {
        let path = self.dir.join(file);
        let end = Instant::now() + timeout;
        loop {
            if let Some(p) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse().ok())
            {
                return p;
            }
            assert!(Instant::now() < end, "job {} never started", self.id);
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn output(&self) -> String {
        std::fs::read_to_string(self.dir.join("out.txt")).unwrap_or_default()
    }

    /// Waits until the job has left the queue and sacct has its final state.
    pub fn wait(&self, timeout: Duration) -> SacctLine {
        let end = Instant::now() + timeout;
        let id = self.id.to_string();
        loop {
            let q = run("squeue", &["-h", "-j", &id, "-o", "%T"]);
            let queued = q.status.success() && !stdout(&q).trim().is_empty();
            if !queued {
                if let Some(l) = self.sacct().into_iter().find(|l| l.job_id == id) {
                    // slurmdbd's stand-in row (the end heard before the start: name
                    // `allocation`, no request) is not yet the job's record: wait for it.
                    let ended = !matches!(l.state.as_str(), "PENDING" | "RUNNING" | "COMPLETING");
                    if ended && !l.partial {
                        return l;
                    }
                }
            }
            assert!(
                Instant::now() < end,
                "job {id} did not finish within {timeout:?}\n{}",
                self.diagnostics()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// What Slurm said of this job, for a failing assertion's message: every sacct line of
    /// the job and its steps (exit and derived exit codes, name, request) and the slurmctld
    /// log lines that name it.
    pub fn diagnostics(&self) -> String {
        let o = run(
            "sacct",
            &[
                "-n",
                "-P",
                "-j",
                &self.id.to_string(),
                "-o",
                "JobID,JobName,State,ExitCode,DerivedExitCode,Start,End,ReqTRES,NodeList",
            ],
        );
        let tag = format!("JobId={} ", self.id);
        let ctld = std::fs::read(SLURMCTLD_LOG).unwrap_or_default();
        let ctld: Vec<String> = String::from_utf8_lossy(&ctld)
            .lines()
            .filter(|l| l.contains(&tag) || l.ends_with(&tag[..tag.len() - 1]))
            .map(String::from)
            .collect();
        format!(
            "sacct -j {}:\n{}slurmctld.log:\n{}\nslurmd.log:\n{}",
            self.id,
            stdout(&o),
            ctld.join("\n"),
            self.log_lines().join("\n")
        )
    }

    /// Waits until the job is running.
    pub fn wait_running(&self, timeout: Duration) {
        let end = Instant::now() + timeout;
        let id = self.id.to_string();
        loop {
            let q = run("squeue", &["-h", "-j", &id, "-o", "%T"]);
            if stdout(&q).trim() == "RUNNING" {
                return;
            }
            assert!(
                Instant::now() < end,
                "job {id} did not start within {timeout:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// sacct lines of the job and its steps, read by slurmwatch's own reader: a job name may
    /// hold newlines and unit separators (tests/cluster/hostile_sacct.rs).
    pub fn sacct(&self) -> Vec<SacctLine> {
        let q = slurmwatch_core::slurm::sacct::Query::default();
        let Ok(r) = q.job(&self.id.to_string()) else {
            return Vec::new();
        };
        let line = |l: &slurmwatch_core::slurm::sacct::Line, partial: bool| {
            let raw = |k: &str| l.fields.get(k).cloned().unwrap_or_default();
            SacctLine {
                job_id: l.job_id.clone(),
                // "CANCELLED by 0" → "CANCELLED"
                state: l.state.name.clone(),
                exit_code: raw("ExitCode"),
                elapsed_seconds: l.elapsed_seconds.unwrap_or(0),
                total_cpu: raw("TotalCPU"),
                max_rss: raw("MaxRSS"),
                // The job line's stand-in (see `wait`); a step line never is.
                partial,
            }
        };
        std::iter::once(line(&r.job, r.is_partial()))
            .chain(r.steps.iter().map(|s| line(s, false)))
            .collect()
    }

    /// slurmd log lines of this job's steps (`[<id>.batch]`, `[<id>.0]`, ...).
    pub fn log_lines(&self) -> Vec<String> {
        let tag = format!("[{}.", self.id);
        let bytes = std::fs::read(SLURMD_LOG).unwrap_or_default();
        let from = (self.log_offset as usize).min(bytes.len());
        String::from_utf8_lossy(&bytes[from..])
            .lines()
            .filter(|l| l.contains(&tag))
            .map(String::from)
            .collect()
    }

    pub fn plugin_lines(&self) -> Vec<String> {
        self.log_lines()
            .into_iter()
            .filter(|l| l.contains("slurmwatch"))
            .collect()
    }
}

/// Parses sacct's `[DD-[HH:]]MM:SS[.mmm]` into seconds.
pub fn sacct_duration_seconds(s: &str) -> Option<f64> {
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<f64>().ok()?, r),
        None => (0.0, s),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let secs = match parts.as_slice() {
        [h, m, s] => {
            h.parse::<f64>().ok()? * 3600.0
                + m.parse::<f64>().ok()? * 60.0
                + s.parse::<f64>().ok()?
        }
        [m, s] => m.parse::<f64>().ok()? * 60.0 + s.parse::<f64>().ok()?,
        _ => return None,
    };
    Some(days * 86400.0 + secs)
}

/// The job's file in the node-local spool.
pub fn spool_file(job: u32) -> PathBuf {
    Path::new(SPOOL).join(format!("{job}.sqlite"))
}

/// The job's recorded series, read through the library's reader.
pub fn recorded(
    job: u32,
    series: &slurmwatch_core::model::Series,
) -> Vec<slurmwatch_core::model::SampleRow> {
    let reader = slurmwatch_core::store::Reader::open(&spool_file(job))
        .unwrap_or_else(|e| panic!("job {job}: no readable file: {e}"));
    reader
        .samples(series)
        .unwrap_or_else(|e| panic!("job {job}: {e}"))
}

/// Tests that rewrite plugstack.conf take this exclusively; every other test shares it.
pub static PLUGSTACK: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// For a test that fills the node: no other test's jobs run meanwhile (they would queue
/// behind it and time out, and would change its pending reason).
pub fn exclusive_cluster() -> std::sync::RwLockWriteGuard<'static, ()> {
    PLUGSTACK.write().unwrap_or_else(|e| e.into_inner())
}

pub fn shared_plugstack() -> std::sync::RwLockReadGuard<'static, ()> {
    PLUGSTACK.read().unwrap_or_else(|e| e.into_inner())
}

/// Rewrites the slurmwatch line for the jobs submitted while the guard lives (slurmstepd
/// reads plugstack.conf and its includes at every step start), and restores it on drop.
/// The line lives behind `include plugstack.conf.d/*.conf` (scripts/cluster.sh), as a
/// package installs it, so every test also proves that each reader follows the include.
pub struct PlugstackOverride {
    original: String,
    _lock: std::sync::RwLockWriteGuard<'static, ()>,
}

/// The file holding the test cluster's slurmwatch line (scripts/cluster.sh's LINE_FILE).
pub const PLUGSTACK_LINE_FILE: &str = "/etc/slurm/plugstack.conf.d/00-test-cluster.conf";

impl PlugstackOverride {
    /// The plugstack line for another plugin path (e.g. the packaged one).
    pub fn with_plugin(plugin: &str, args: &str) -> PlugstackOverride {
        let lock = PLUGSTACK.write().unwrap_or_else(|e| e.into_inner());
        let original = std::fs::read_to_string(PLUGSTACK_LINE_FILE).expect("read the line file");
        std::fs::write(PLUGSTACK_LINE_FILE, format!("optional {plugin} {args}\n")).unwrap();
        PlugstackOverride {
            original,
            _lock: lock,
        }
    }

    /// The line for the plugin the cluster runs (scripts/cluster.sh's copy, or the package's
    /// in a VM guest), with other arguments.
    pub fn new(args: &str) -> PlugstackOverride {
        let lock = PLUGSTACK.write().unwrap_or_else(|e| e.into_inner());
        let original = std::fs::read_to_string(PLUGSTACK_LINE_FILE).expect("read the line file");
        let o = PlugstackOverride {
            original,
            _lock: lock,
        };
        o.set(args);
        o
    }

    /// Other arguments for the same plugin, still under this guard's lock: a test that tries
    /// several lines in turn takes the lock once, not once per line (each take waits for the
    /// other test thread's running test to end, and holds that thread idle meanwhile).
    pub fn set(&self, args: &str) {
        let plugin = self
            .original
            .lines()
            .find_map(|l| l.strip_prefix("optional "))
            .and_then(|l| l.split_whitespace().next())
            .unwrap_or(PLUGIN_SO);
        std::fs::write(PLUGSTACK_LINE_FILE, format!("optional {plugin} {args}\n")).unwrap();
    }
}

impl Drop for PlugstackOverride {
    fn drop(&mut self) {
        let _ = std::fs::write(PLUGSTACK_LINE_FILE, &self.original);
    }
}

pub fn exists(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

/// The target directory the tests were built into (`CARGO_TARGET_DIR` or `<repo>/target`).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

fn built_bin(env: &str, name: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env) {
        return PathBuf::from(p);
    }
    let t = target_dir();
    for profile in ["release", "debug"] {
        let p = t.join(profile).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("{name} is not built: cargo build -p slurmwatch-cli -p slurmwatch-epilog (or set {env})")
}

/// The CLI: `SLURMWATCH_BIN`, else `<target>/release/slurmwatch`, else `<target>/debug/…`.
pub fn slurmwatch_bin() -> PathBuf {
    built_bin("SLURMWATCH_BIN", "slurmwatch")
}

/// The epilog: `SLURMWATCH_EPILOG_BIN`, else the release build, else the debug build.
pub fn epilog_bin() -> PathBuf {
    built_bin("SLURMWATCH_EPILOG_BIN", "slurmwatch-epilog")
}

/// Where the cluster tests install the fake NVML (root-owned, like a driver's library).
pub const FAKE_NVML_INSTALLED: &str = "/usr/local/lib/slurmwatch/test/libnvidia-ml.so.1";
/// The fake's default state file: slurmstepd does not pass FAKE_NVML_STATE on.
pub const FAKE_NVML_STATE: &str = "/tmp/slurmwatch-fake-nvml/state.json";

/// Installs the built fake NVML (`cargo build -p fake-nvml`; `FAKE_NVML_SO` names another
/// build) at [`FAKE_NVML_INSTALLED`] and returns that path.
pub fn install_fake_nvml() -> PathBuf {
    let built = std::env::var_os("FAKE_NVML_SO")
        .map(PathBuf::from)
        .or_else(|| {
            let t = target_dir();
            ["release", "debug"]
                .iter()
                .map(|p| t.join(p).join("libfake_nvml.so"))
                .find(|p| p.exists())
        })
        .expect(
            "the fake NVML is not built: cargo build --release -p fake-nvml (or set FAKE_NVML_SO)",
        );
    let dest = Path::new(FAKE_NVML_INSTALLED);
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    // Tests install it concurrently: each through its own temporary name.
    let tmp = dest.with_extension(format!(
        "new-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::copy(&built, &tmp).unwrap();
    std::fs::rename(&tmp, dest).unwrap();
    dest.to_path_buf()
}

/// Writes the fake NVML's state (a new file renamed over the old: the fake re-reads it).
pub fn set_fake_nvml_state(state: &serde_json::Value) {
    let p = Path::new(FAKE_NVML_STATE);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let tmp = p.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(state).unwrap()).unwrap();
    std::fs::rename(&tmp, p).unwrap();
}

/// Whether the test cluster's node has GPU GRES (scripts/cluster.sh with fake device files).
pub fn cluster_has_gpu_gres() -> bool {
    stdout(&run("sinfo", &["-h", "-N", "-o", "%G"])).contains("gpu")
}

/// `scancel`s a job when dropped, also when the test panics: a leftover running job would
/// hold the node for the tests after it.
pub struct CancelOnDrop(pub u32);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let _ = run("scancel", &[&self.0.to_string()]);
    }
}

/// A command run in a detached tmux session (the dashboard in a real terminal), with its
/// exit code written to `rc_file` when it ends.
pub struct Tmux {
    pub session: String,
    rc_file: PathBuf,
}

fn tmux(args: &[&str]) -> Output {
    Command::new("tmux").args(args).output().expect("run tmux")
}

impl Tmux {
    /// Starts `command` (a shell command line) as `session` on a `width`×`height` terminal.
    pub fn start(session: &str, command: &str, width: u16, height: u16, rc_file: &Path) -> Tmux {
        let cmd = format!("{command}; echo $? > {}", rc_file.display());
        let (w, h) = (width.to_string(), height.to_string());
        let o = tmux(&["new-session", "-d", "-s", session, "-x", &w, "-y", &h, &cmd]);
        assert!(o.status.success(), "tmux: {}", stderr(&o));
        Tmux {
            session: session.to_string(),
            rc_file: rc_file.to_path_buf(),
        }
    }

    /// The screen as text.
    pub fn screen(&self) -> String {
        stdout(&tmux(&["capture-pane", "-p", "-t", &self.session]))
    }

    /// Waits until the screen holds every one of `wants`; returns it.
    pub fn wait_for(&self, wants: &[&str], timeout: Duration, what: &str) -> String {
        let end = Instant::now() + timeout;
        loop {
            let s = self.screen();
            if wants.iter().all(|w| s.contains(w)) {
                return s;
            }
            assert!(Instant::now() < end, "{what} never showed {wants:?}:\n{s}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn keys(&self, keys: &str) {
        tmux(&["send-keys", "-t", &self.session, keys]);
    }

    /// Sends `q` and returns the exit code once the session has ended.
    pub fn quit(&self) -> String {
        self.keys("q");
        let end = Instant::now() + Duration::from_secs(5);
        while tmux(&["has-session", "-t", &self.session]).status.success() {
            assert!(Instant::now() < end, "the view did not quit on q");
            std::thread::sleep(Duration::from_millis(100));
        }
        std::fs::read_to_string(&self.rc_file)
            .unwrap_or_default()
            .trim()
            .to_string()
    }
}

/// One card of the fake NVML (tests/fake-nvml) as the GPU tests script it: an A100 80 GB at
/// NVML index `i`, `utilization_gpu` 90 + i, 51 GiB in use, working at 390 of 400 W with the
/// power-cap throttle reason; no process, no error, no Xid. Tests override fields.
pub fn fake_a100(i: u32) -> serde_json::Value {
    serde_json::json!({
        "uuid": format!("GPU-{i:08x}-5f1c-2a3b-4c5d-0123456789ab"),
        "name": "NVIDIA A100-SXM4-80GB",
        "pci_bus_id": format!("00000000:{:02X}:00.0", 0x10 + i),
        "memory_total": 80u64 << 30, "memory_used": 51u64 << 30,
        "utilization_gpu": 90 + i, "utilization_memory": 30,
        "power_usage_mw": 390_000, "power_limit_mw": 400_000, "temperature": 60 + i,
        "sm_clock": 1410, "sm_clock_max": 1785, "throttle_reasons": 4,
        "energy_mj": 1_000_000, "ecc_uncorrected_volatile": 0,
        "pcie_tx_kib_per_s": 0, "pcie_rx_kib_per_s": 0,
        "xid_events": [], "processes": [], "errors": {},
    })
}

/// Now, Unix seconds (for `-S/-E` windows).
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A tag of letters (digits collapse in workload names) unique to this test process.
pub fn tag() -> String {
    std::process::id()
        .to_string()
        .bytes()
        .map(|d| (b'a' + (d - b'0')) as char)
        .collect()
}

/// `slurmwatch ARGS` that must exit 0 and print JSON.
pub fn cli_json(args: &[&str]) -> serde_json::Value {
    let o = Command::new(slurmwatch_bin())
        .args(args)
        .output()
        .expect("run slurmwatch");
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("bad JSON ({e}): {}", stdout(&o)))
}

/// Runs the epilog as Slurm would (root, `SLURM_JOB_ID`), then `report JOB --json` with
/// `extra` arguments.
pub fn report_after_epilog(job: u32, extra: &[&str]) -> serde_json::Value {
    let e = Command::new(epilog_bin())
        .env("SLURM_JOB_ID", job.to_string())
        .output()
        .expect("run the epilog");
    assert!(e.status.success(), "the epilog must exit 0: {}", stderr(&e));
    let id = job.to_string();
    let mut args = vec!["report", id.as_str(), "--json"];
    args.extend_from_slice(extra);
    cli_json(&args)
}

/// `slurmwatch sizing --json` of `user`'s runs of `workload` between `since` and `until`
/// (sacct's `-S`/`-E` forms).
pub fn sizing_json(since: &str, until: &str, user: &str, workload: &str) -> serde_json::Value {
    cli_json(&[
        "sizing",
        "-S",
        since,
        "-E",
        until,
        "-u",
        user,
        "--workload",
        workload,
        "--json",
    ])
}

/// A running job's own cgroup counters, the ground truth the tests compare with, on cgroup v1
/// (the host cluster) and v2 (the VM tier's guests). Found through a process of the job
/// (`scontrol listpids`), so a 26.05 job directory named by its SLUID is found too.
pub struct JobCgroup {
    /// v2: the job's directory in the unified tree.
    unified: Option<PathBuf>,
    /// v1: the job's directories under the cpuacct and memory controllers.
    cpuacct: PathBuf,
    memory: PathBuf,
}

impl JobCgroup {
    pub fn of(job: u32) -> JobCgroup {
        let o = run("scontrol", &["listpids", &job.to_string()]);
        let pid = stdout(&o)
            .lines()
            .skip(1)
            .find_map(|l| l.split_whitespace().next()?.parse::<u32>().ok())
            .unwrap_or_else(|| panic!("job {job} has no process: {}", stdout(&o)));
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        // The job's directory: the process's path up to its step.
        let job_dir = |line: &str| -> PathBuf {
            let path = line.splitn(3, ':').nth(2).unwrap_or_default();
            let cut = path.find("/step_").unwrap_or(path.len());
            PathBuf::from(&path[..cut])
        };
        let under = |controller: &str| -> PathBuf {
            let line = text
                .lines()
                .find(|l| {
                    l.split(':')
                        .nth(1)
                        .is_some_and(|c| c.split(',').any(|c| c == controller))
                })
                .unwrap_or_else(|| panic!("no {controller} line for job {job}: {text}"));
            Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(job_dir(line).strip_prefix("/").unwrap())
        };
        if cgroup_v2() {
            let line = text
                .lines()
                .find(|l| l.starts_with("0::"))
                .expect("a v2 line");
            let d = Path::new("/sys/fs/cgroup").join(job_dir(line).strip_prefix("/").unwrap());
            return JobCgroup {
                unified: Some(d.clone()),
                cpuacct: d.clone(),
                memory: d,
            };
        }
        JobCgroup {
            unified: None,
            cpuacct: under("cpuacct"),
            memory: under("memory"),
        }
    }

    /// The job's processes' CPU seconds. On v2 slurmstepd lives in the job's cgroup
    /// (`step_*/slurm`); it is not the job's (on v1 and in sacct's TotalCPU it is not there).
    pub fn cpu_seconds(&self) -> f64 {
        let Some(d) = &self.unified else {
            let t = std::fs::read_to_string(self.cpuacct.join("cpuacct.usage")).unwrap();
            return t.trim().parse::<f64>().unwrap() / 1e9;
        };
        let usage_usec = |f: &Path| -> Option<f64> {
            let t = std::fs::read_to_string(f).ok()?;
            t.lines()
                .find_map(|l| l.strip_prefix("usage_usec ")?.trim().parse().ok())
        };
        let total = usage_usec(&d.join("cpu.stat")).expect("the job's cpu.stat");
        let stepd: f64 = std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("step_"))
            .filter_map(|e| usage_usec(&e.path().join("slurm/cpu.stat")))
            .sum();
        (total - stepd) / 1e6
    }

    /// Usage less the file cache, as the kernel's own files give it.
    pub fn working_set_bytes(&self) -> f64 {
        let read = |f: &str| std::fs::read_to_string(self.memory.join(f)).unwrap();
        let stat = read("memory.stat");
        let get = |k: &str| -> f64 {
            stat.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.trim().parse().ok())
                .unwrap_or(0.0)
        };
        if self.unified.is_some() {
            let usage: f64 = read("memory.current").trim().parse().unwrap();
            return usage - get("active_file") - get("inactive_file");
        }
        let usage: f64 = read("memory.usage_in_bytes").trim().parse().unwrap();
        usage - get("total_active_file") - get("total_inactive_file")
    }

    /// The job's directory in the unified tree (cgroup v2 only).
    pub fn unified(&self) -> Option<&Path> {
        self.unified.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::sacct_duration_seconds;

    #[test]
    fn sacct_durations() {
        assert_eq!(sacct_duration_seconds("00:01.500"), Some(1.5));
        assert_eq!(sacct_duration_seconds("01:02:03"), Some(3723.0));
        assert_eq!(sacct_duration_seconds("1-00:00:01"), Some(86401.0));
        assert_eq!(sacct_duration_seconds("bogus"), None);
    }
}
