//! Lines to the slurmd log (in slurmstepd) or to the user's terminal (in sbatch/srun).
//!
//! Always through a constant `"%s"` format: the message may contain user text, and a `%` in
//! it must never reach printf as a directive. Never call these from a forked task child or the
//! sampler thread: Slurm's log takes a lock that another thread may hold at fork time.

use crate::ffi;
use std::ffi::CString;

fn cstring(msg: &str) -> CString {
    CString::new(msg.replace('\0', "?")).unwrap_or_default()
}

pub fn info(msg: &str) {
    let m = cstring(msg);
    // SAFETY: constant format, one NUL-terminated string argument.
    unsafe { ffi::slurm_info(c"%s".as_ptr(), m.as_ptr()) }
}

pub fn error(msg: &str) {
    let m = cstring(msg);
    // SAFETY: as above.
    unsafe { ffi::slurm_error(c"%s".as_ptr(), m.as_ptr()) }
}
