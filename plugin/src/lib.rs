//! slurmwatch's SPANK plugin: loaded by slurmstepd through `plugstack.conf`, it records the
//! job's own cgroup into a per-job file. Every exported callback goes through
//! [`guard::guarded`], so nothing here can change a job's outcome.

#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    clippy::all
)]
mod ffi {
    include!(concat!(env!("OUT_DIR"), "/spank.rs"));
}

mod archive;
use slurmwatch_recorder::as_user;
mod guard;
mod log;
mod marks;
mod output_size;
mod recorder;
mod spank;
mod state;

use slurmwatch_recorder::analysis::summary::EPILOG_BOUND;
use slurmwatch_recorder::options::{self, PluginConfig};
use slurmwatch_recorder::recording::marks::MARK_SOCKET_ENV;
use spank::{Context, Spank};
use std::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

// This step's recording, owned by the callbacks (state.rs's locking rules apply).
/// The running sampler of this step, started in `init_post_opt` when the step is recorded.
static RECORDER: Mutex<Option<recorder::Recorder>> = Mutex::new(None);

/// Slurm reads these three symbols to accept the plugin; `plugin_version` must equal the
/// running Slurm's major.minor, so it comes from the headers this build was made against.
#[no_mangle]
#[used]
pub static plugin_name: [u8; 11] = *b"slurmwatch\0";
#[no_mangle]
#[used]
pub static plugin_type: [u8; 6] = *b"spank\0";
#[no_mangle]
#[used]
pub static plugin_version: u32 = ffi::SLURM_VERSION_NUMBER;

const OPTION_NAME: &CStr = c"slurmwatch";
/// Slurm's help printer always writes `--name=ARGINFO`, so the optional value is shown as
/// `--slurmwatch=[SECONDS]` (the spelling `--slurmwatch[=SECONDS]` cannot be produced via SPANK).
const OPTION_ARGINFO: &CStr = c"[SECONDS]";
const OPTION_USAGE: &CStr = c"Record this job's CPU, memory and GPU use every SECONDS (optional; default 5) into a per-job file; read it with `slurmwatch report JOBID`.";
/// `has_arg = 2`: the value is optional (`--slurmwatch` or `--slurmwatch=10`). The static
/// `spank_options` table is ignored by sbatch in 22.05; registering in init works everywhere.
const HAS_OPTIONAL_ARG: c_int = 2;

/// Parses the plugstack arguments; a bad line disables the plugin for this process with one
/// logged sentence (never a failed job).
fn load_config(ac: c_int, av: *mut *mut c_char) -> Result<PluginConfig, String> {
    // SAFETY: slurmstepd/sbatch pass argc/argv of the plugstack line.
    let args = unsafe { spank::args(ac, av) };
    PluginConfig::parse(&args).map_err(|e| e.to_string())
}

/// Called by Slurm while it parses the command line (sbatch/srun/salloc: `remote == 0`) and
/// again inside slurmstepd (`remote == 1`).
extern "C" fn on_option(_val: c_int, optarg: *const c_char, remote: c_int) -> c_int {
    let mut result = 0;
    guard::guarded("option", || {
        let value = (!optarg.is_null())
            // SAFETY: Slurm passes a NUL-terminated argument or NULL.
            .then(|| {
                unsafe { CStr::from_ptr(optarg) }
                    .to_string_lossy()
                    .into_owned()
            })
            // slurmstepd receives a bare `--slurmwatch` as an empty value.
            .filter(|v| !(remote != 0 && v.is_empty()));
        let config = state::config().unwrap_or_default();
        match options::parse_interval(value.as_deref(), &config) {
            Ok(seconds) => state::set_requested_interval(seconds),
            Err(e) if remote == 0 => {
                // At submission: refuse, so the user fixes it before the job queues.
                log::problem(&format!("{} {}", e.message, e.hint));
                result = -1;
            }
            // Inside the step (a value that bypassed sbatch): record nothing, say why.
            Err(e) => log::problem(&format!("{} Not recording this step.", e.message)),
        }
        Ok(())
    });
    result
}

fn register_option(sp: Spank) -> Result<(), String> {
    // Slurm keeps the pointer for the life of the process: leak one small struct per process.
    let opt = Box::leak(Box::new(ffi::spank_option {
        name: OPTION_NAME.as_ptr() as *mut c_char,
        arginfo: OPTION_ARGINFO.as_ptr() as *mut c_char,
        usage: OPTION_USAGE.as_ptr() as *mut c_char,
        has_arg: HAS_OPTIONAL_ARG,
        val: 0,
        cb: Some(on_option),
    }));
    // SAFETY: `opt` lives forever; `sp` is the handle of the running callback.
    let rc = unsafe { ffi::spank_option_register(sp.0, opt) };
    if rc == ffi::ESPANK_SUCCESS {
        Ok(())
    } else {
        Err(format!(
            "could not register --slurmwatch (SPANK error {rc})"
        ))
    }
}

/// Test builds only: panic in the named callback when the job sets SLURMWATCH_TEST_PANIC.
#[cfg(feature = "fault-injection")]
fn inject_fault(sp: Spank, callback: &str) {
    if spank::context() == Context::Remote
        && sp.getenv("SLURMWATCH_TEST_PANIC").as_deref() == Some(callback)
    {
        panic!("injected test panic in {callback}");
    }
}

#[cfg(not(feature = "fault-injection"))]
fn inject_fault(_sp: Spank, _callback: &str) {}

/// Test builds only: a job may lower (never raise) its file cap with
/// SLURMWATCH_TEST_MAX_FILE_BYTES, so a test reaches the cap in seconds.
#[cfg(feature = "fault-injection")]
fn test_cap(sp: Spank) -> Option<u64> {
    sp.getenv("SLURMWATCH_TEST_MAX_FILE_BYTES")?.parse().ok()
}

#[cfg(not(feature = "fault-injection"))]
fn test_cap(_sp: Spank) -> Option<u64> {
    None
}

/// Test builds only: the sampler waits SLURMWATCH_TEST_LOCATE_DELAY_MS (at most 2 s) before
/// it locates the step's cgroup, so a test can have the task reaped first, as a loaded node
/// does with `srun true`; SLURMWATCH_TEST_LOCATE_TASK_ONLY=1 leaves slurmstepd's own group
/// out, so such a step is read from /proc.
#[cfg(feature = "fault-injection")]
fn test_locate(sp: Spank) -> recorder::LocateTest {
    let ms = sp
        .getenv("SLURMWATCH_TEST_LOCATE_DELAY_MS")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    recorder::LocateTest {
        delay: std::time::Duration::from_millis(ms.min(2000)),
        task_only: sp.getenv("SLURMWATCH_TEST_LOCATE_TASK_ONLY").as_deref() == Some("1"),
    }
}

#[cfg(not(feature = "fault-injection"))]
fn test_locate(_sp: Spank) -> recorder::LocateTest {
    recorder::LocateTest::default()
}

/// # Safety
/// Called by Slurm with a valid handle and plugstack argv.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init(
    sp: ffi::spank_t,
    ac: c_int,
    av: *mut *mut c_char,
) -> c_int {
    let sp = Spank(sp);
    guard::guarded("init", || {
        let ctx = spank::context();
        if !matches!(ctx, Context::Local | Context::Remote | Context::Allocator) {
            return Ok(());
        }
        // The option is registered even when the site line is bad, so job scripts that use
        // it keep submitting; the plugin then records nothing and says why in the log.
        let config = load_config(ac, av);
        state::set_config(config.clone().unwrap_or_default());
        register_option(sp)?;
        config.map(|_| ())
    })
}

/// # Safety
/// Called by Slurm with a valid handle and plugstack argv.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init_post_opt(
    sp: ffi::spank_t,
    ac: c_int,
    av: *mut *mut c_char,
) -> c_int {
    let sp = Spank(sp);
    guard::guarded("init_post_opt", || {
        if spank::context() != Context::Remote {
            return Ok(());
        }
        inject_fault(sp, "init_post_opt");
        let config = load_config(ac, av)?;
        let interval = match (state::requested_interval(), config.default) {
            (Some(s), _) => s,
            (None, options::Default::On) => config.default_interval_seconds,
            (None, options::Default::Off) => return Ok(()),
        };
        let plan = plan_step(sp, &config, interval)?;
        log::info(&format!(
            "slurmwatch: job {} step {}: recording every {interval} s into {}",
            plan.job_id,
            plan.step,
            plan.file.display()
        ));
        let marks = marks_socket(&plan);
        let (uid, gid) = (plan.uid, plan.gid);
        let mut recorder = recorder::Recorder::start(plan)?;
        if let Some(path) = marks {
            let taken = recorder.take_marks(path.clone(), uid, gid);
            let told = taken.and_then(|()| sp.setenv(MARK_SOCKET_ENV, &path.to_string_lossy()));
            if let Err(e) = told {
                log::info(&format!("slurmwatch: {e}"));
            }
        }
        *state::lock(&RECORDER) = Some(recorder);
        Ok(())
    })
}

/// Where this step takes the job's phase marks: a name in the root-owned spool. The extern
/// step runs none of the job's code, so it takes none.
fn marks_socket(plan: &recorder::Plan) -> Option<std::path::PathBuf> {
    (plan.step != "extern").then(|| {
        plan.spool
            .join(slurmwatch_recorder::store::paths::mark_socket_name(
                plan.job_id,
                &plan.step,
            ))
    })
}

/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_post_fork(
    sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    let sp = Spank(sp);
    guard::guarded("task_post_fork", || {
        if spank::context() != Context::Remote {
            return Ok(());
        }
        inject_fault(sp, "task_post_fork");
        let mut running = state::lock(&RECORDER);
        let Some(r) = running.as_mut() else {
            return Ok(()); // this step is not recorded
        };
        let Some(pid) = sp.task_pid() else {
            return Err("no task pid".into());
        };
        r.add_task(pid);
        Ok(())
    })
}

/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_task_exit(
    sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    let sp = Spank(sp);
    guard::guarded("task_exit", || {
        if spank::context() != Context::Remote {
            return Ok(());
        }
        inject_fault(sp, "task_exit");
        let mut running = state::lock(&RECORDER);
        if let Some(r) = running.as_mut() {
            r.tasks_exited += 1;
            // The last local task: take the final reading while the step cgroup still exists.
            if r.tasks_exited >= sp.local_task_count().unwrap_or(1) {
                r.final_reading(sp.task_exit_status());
            }
        }
        Ok(())
    })
}

// How long `job_epilog` may take, whatever the files hold or the archive filesystem does, is
// the one bound `analysis::summary::EPILOG_BOUND`: the work runs on a thread of its own and
// is left behind (the process exits after the callbacks) when it is not done by then.
/// Of [`EPILOG_BOUND`]: the summary (statement deadlines inside), then the archive copy.
const EPILOG_ARCHIVE_WAIT: std::time::Duration = std::time::Duration::from_secs(4);
/// The spool sweep for expired files, at most this long per job end.
const SWEEP_BUDGET: std::time::Duration = std::time::Duration::from_secs(1);

/// This node's name as Slurm knows it: slurmd sets `SLURMD_NODENAME` in its own environment,
/// which its prolog, epilog and slurmstepd inherit (the job's environment, which
/// `spank_getenv` reads, is a separate list the job controls). Several slurmd may share one
/// host, so the host name is only the fallback. Used as a validated file-name component.
fn slurmd_node_name() -> String {
    slurmwatch_recorder::recording::step::node_name(
        std::env::var("SLURMD_NODENAME").ok(),
        slurmwatch_recorder::sys::short_host_name,
    )
}

/// Runs once per job and node before the job's first step here (a separate root process in
/// the job-script context, environment from slurmd): notes the job's GPU allocation from
/// `SLURM_JOB_GPUS`, which slurmd builds from the job's credential, so the steps record only
/// cards Slurm allocated (docs/design.md §7). Writes one small file, `<spool>/<job>.alloc`.
///
/// # Safety
/// Called by Slurm with a valid handle and plugstack argv.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_job_prolog(
    sp: ffi::spank_t,
    ac: c_int,
    av: *mut *mut c_char,
) -> c_int {
    let sp = Spank(sp);
    guard::guarded("job_prolog", || {
        if spank::context() != Context::JobScript {
            return Ok(());
        }
        let config = load_config(ac, av)?;
        let job_id = sp.job_id().ok_or("no job id")?;
        let spool = slurmwatch_recorder::spool::node_spool(&config, &slurmd_node_name())?;
        let gpus = std::env::var("SLURM_JOB_GPUS").ok();
        let alloc = slurmwatch_recorder::spool::Allocation::from_job_gpus(gpus.as_deref())
            .ok_or_else(|| format!("SLURM_JOB_GPUS {gpus:?} is not a list of indices"))?;
        slurmwatch_recorder::spool::write_allocation(&spool, job_id, &alloc)
            .map_err(|e| format!("cannot note job {job_id}'s allocation: {e}"))
    })
}

/// Runs once per job and node when the job ends (a separate root process in the job-script
/// context): writes the summary into the job's file, refreshes the archive copy, removes the
/// job's allocation note and expired spool files. Returns within `EPILOG_BOUND`.
///
/// # Safety
/// Called by Slurm with a valid handle and plugstack argv.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_job_epilog(
    sp: ffi::spank_t,
    ac: c_int,
    av: *mut *mut c_char,
) -> c_int {
    let sp = Spank(sp);
    guard::guarded("job_epilog", || {
        if spank::context() != Context::JobScript {
            return Ok(());
        }
        let config = load_config(ac, av)?;
        let job_id = sp.job_id().ok_or("no job id")?;
        let ids = (sp.uid().ok_or("no job uid")?, sp.gid().ok_or("no job gid")?);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("slurmwatch-epilog".into())
            .spawn(move || {
                let r = std::panic::catch_unwind(|| epilog_work(&config, job_id, ids))
                    .unwrap_or_else(|_| Err("internal error (panic in the epilog)".into()));
                let _ = tx.send(r);
            })
            .map_err(|e| format!("cannot start the epilog thread: {e}"))?;
        match rx.recv_timeout(EPILOG_BOUND) {
            Ok(Ok(Some(note))) => {
                log::info(&note);
                Ok(())
            }
            Ok(Ok(None)) => Ok(()),
            Ok(Err(e)) => Err(format!("job {job_id}: {e}")),
            Err(_) => Err(format!(
                "job {job_id}: the epilog's work did not finish within {} s; left it behind",
                EPILOG_BOUND.as_secs()
            )),
        }
    })
}

/// The epilog's work, on its own thread. `Ok(Some(note))` is logged.
fn epilog_work(
    config: &PluginConfig,
    job_id: u32,
    (uid, gid): (u32, u32),
) -> Result<Option<String>, String> {
    use slurmwatch_recorder::analysis::summary::{summarise_job_file, EpilogOutcome};
    use slurmwatch_recorder::spool;
    let started = std::time::Instant::now();
    let node = slurmd_node_name();
    let spool_dir = options::spool_for_node(&config.spool_dir, &node).ok_or("bad spool")?;
    let _ =
        std::fs::remove_file(spool_dir.join(slurmwatch_recorder::store::paths::alloc_name(job_id)));
    if config.retain_days > 0 {
        let retain = std::time::Duration::from_secs(u64::from(config.retain_days) * 86_400);
        let swept = spool::remove_expired(
            &spool_dir,
            std::time::SystemTime::now(),
            retain,
            SWEEP_BUDGET,
        );
        if !swept.removed.is_empty() {
            log::info(&format!(
                "slurmwatch: removed {} spool files older than {} days",
                swept.removed.len(),
                config.retain_days
            ));
        }
    }
    let outcome = summarise_job_file(&spool_dir, job_id).map_err(|e| e.to_string())?;
    if outcome == EpilogOutcome::NotRecorded {
        return Ok(None);
    }
    let mut note = format!(
        "slurmwatch: job {job_id}: summary written in {} ms",
        started.elapsed().as_millis()
    );
    if let Some(dir) = archive::dir_for(config, &user_name(uid), uid, job_id, &node)? {
        let file = spool_dir.join(slurmwatch_recorder::store::paths::live_name(job_id));
        let name = archive::file_name(job_id, &node);
        match archive::copy_as_user(
            slurmwatch_recorder::store::archive::snapshot(&file, &spool_dir, job_id),
            &dir,
            &name,
            (uid, gid),
            EPILOG_ARCHIVE_WAIT,
        ) {
            Ok(()) => {}
            Err(e) => note.push_str(&format!("; {e}")),
        }
    }
    Ok(Some(note))
}

/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_exit(
    sp: ffi::spank_t,
    _ac: c_int,
    _av: *mut *mut c_char,
) -> c_int {
    let sp = Spank(sp);
    guard::guarded("exit", || {
        if spank::context() != Context::Remote {
            return Ok(());
        }
        inject_fault(sp, "exit");
        let recorder = state::lock(&RECORDER).take();
        if let Some(r) = recorder {
            let job = sp.job_id().unwrap_or(0);
            let step = sp
                .step_id()
                .map(slurmwatch_recorder::recording::step::step_name)
                .unwrap_or_default();
            match r.stop() {
                Ok(summary) => log::info(&format!(
                    "slurmwatch: job {job} step {step}: done, {summary}"
                )),
                Err(problem) => log::problem(&format!(
                    "slurmwatch: job {job} step {step}: {problem}; the job is not affected"
                )),
            }
        }
        Ok(())
    })
}

/// The user's name from the system's databases (never from the job's environment).
fn user_name(uid: u32) -> String {
    slurmwatch_recorder::sys::user_name(uid).unwrap_or_else(|| uid.to_string())
}

/// The step's GPUs: the cards Slurm allocated to the job on this node (noted by
/// `job_prolog` from slurmd's environment), ordered and narrowed by the step's environment
/// (`cuda:N` follows the job's `CUDA_VISIBLE_DEVICES`). `None` when no card is both named and
/// allocated: NVML is then never loaded.
fn plan_gpus(
    sp: Spank,
    config: &PluginConfig,
    spool: &std::path::Path,
    job_id: u32,
) -> Option<recorder::GpuPlan> {
    use slurmwatch_recorder::collect::gpu::{wanted_cards, GpuEnv, DEFAULT_NVML_LIB};
    let env = GpuEnv::from_lookup(|name| sp.getenv(name));
    let wanted = wanted_cards(&env);
    if wanted.is_empty() {
        return None;
    }
    let allocated = match slurmwatch_recorder::spool::read_allocation(spool, job_id) {
        Ok(a) => a.gpus,
        Err(why) => {
            log::info(&format!(
                "slurmwatch: job {job_id}: no GPU section: the job's allocation is unknown ({why})"
            ));
            return None;
        }
    };
    let any = slurmwatch_recorder::recording::step::any_wanted_card_allocated(&wanted, &allocated);
    any.then(|| recorder::GpuPlan {
        lib_path: config
            .nvml_library
            .clone()
            .unwrap_or_else(|| DEFAULT_NVML_LIB.into()),
        wanted,
        allocated,
    })
}

/// What this step records and where. The file name is built only from Slurm's numeric job
/// id inside the root-owned spool: nothing the user controls chooses a path.
fn plan_step(sp: Spank, config: &PluginConfig, interval: u32) -> Result<recorder::Plan, String> {
    use slurmwatch_recorder::recording::step;
    let job_id = sp.job_id().ok_or("no job id")?;
    let step_id = sp.step_id().ok_or("no step id")?;
    let step_name = step::step_name(step_id);
    let uid = sp.uid().ok_or("no job uid")?;
    let gid = sp.gid().ok_or("no job gid")?;
    let user = user_name(uid);
    let node = slurmd_node_name();
    let archive_dir = archive::dir_for(config, &user, uid, job_id, &node)?;
    let spool = slurmwatch_recorder::spool::node_spool(config, &node)?;
    Ok(recorder::Plan {
        archive_dir,
        job_id,
        records_job_series: slurmwatch_recorder::store::is_job_series_step(&step_name),
        step: step_name,
        interval: std::time::Duration::from_secs(u64::from(interval)),
        uid,
        gid,
        user,
        node,
        file: spool.join(slurmwatch_recorder::store::paths::live_name(job_id)),
        gpu: plan_gpus(sp, config, &spool, job_id),
        spool,
        max_file_bytes: step::file_cap_bytes(config.max_file_mb, test_cap(sp)),
        cores_allocated: sp.ncpus().map(u32::from),
        memory_allocated_bytes: step::memory_allocated_bytes(sp.job_alloc_mem_mib()),
        local_tasks: sp.local_task_count(),
        locate_test: test_locate(sp),
    })
}
