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

mod guard;
mod log;
mod spank;
mod state;

use slurmwatch_core::options::{self, PluginConfig};
use spank::{Context, Spank};
use std::ffi::{c_char, c_int, CStr};

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
            .then(|| unsafe { CStr::from_ptr(optarg) }.to_string_lossy().into_owned())
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
        Err(format!("could not register --slurmwatch (SPANK error {rc})"))
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

/// # Safety
/// Called by Slurm with a valid handle and plugstack argv.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_init(sp: ffi::spank_t, ac: c_int, av: *mut *mut c_char) -> c_int {
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
        let job = sp.job_id().ok_or("no job id")?;
        let step = spank::step_name(sp.step_id().ok_or("no step id")?);
        log::info(&format!(
            "slurmwatch: job {job} step {step}: recording every {interval} s into {}",
            config.spool_dir.display()
        ));
        Ok(())
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
        inject_fault(sp, "task_post_fork");
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
        inject_fault(sp, "task_exit");
        Ok(())
    })
}

/// # Safety
/// Called by Slurm with a valid handle.
#[no_mangle]
pub unsafe extern "C" fn slurm_spank_exit(sp: ffi::spank_t, _ac: c_int, _av: *mut *mut c_char) -> c_int {
    let sp = Spank(sp);
    guard::guarded("exit", || {
        if spank::context() != Context::Remote {
            return Ok(());
        }
        inject_fault(sp, "exit");
        Ok(())
    })
}
