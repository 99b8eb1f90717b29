//! Lines to the slurmd log (in slurmstepd) or to the user's terminal (in sbatch/srun).
//!
//! Always through a constant `"%s"` format: the message may contain user text, and a `%` in
//! it must never reach printf as a directive. Never call these from a forked task child or the
//! sampler thread: Slurm's log takes a lock that another thread may hold at fork time.
//!
//! In slurmstepd, `slurm_error` is also copied to the job's stderr once the step's I/O is set
//! up (seen in the cluster test: "slurmstepd-vm: error: ..." in the job's output file), so
//! problems inside a step are logged at info level, with the word "error" in the text.

use crate::ffi;
use crate::spank::{context, Context};
use std::ffi::CString;

fn cstring(msg: &str) -> CString {
    CString::new(msg.replace('\0', "?")).unwrap_or_default()
}

/// An informational line in the slurmd log.
pub fn info(msg: &str) {
    let m = cstring(msg);
    // SAFETY: constant format, one NUL-terminated string argument.
    unsafe { ffi::slurm_info(c"%s".as_ptr(), m.as_ptr()) }
}

/// A problem: shown to the user when submitting (sbatch/srun/salloc), logged quietly to the
/// slurmd log when inside a step.
pub fn problem(msg: &str) {
    if context() == Context::Remote {
        info(&format!("error: {msg}"));
    } else {
        let m = cstring(msg);
        // SAFETY: as above.
        unsafe { ffi::slurm_error(c"%s".as_ptr(), m.as_ptr()) }
    }
}
