//! A thin safe wrapper over the generated SPANK bindings: only the calls the plugin makes.

use crate::ffi;
use std::ffi::{c_char, c_int, CStr, CString};

/// Where the plugin is running (the SPANK context).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// `srun` on the submit host.
    Local,
    /// `slurmstepd` on a compute node: the only place that records.
    Remote,
    /// `sbatch` / `salloc`.
    Allocator,
    Slurmd,
    JobScript,
    Other,
}

pub fn context() -> Context {
    // SAFETY: spank_context takes no arguments and only reads a global.
    match unsafe { ffi::spank_context() } {
        ffi::spank_context::S_CTX_LOCAL => Context::Local,
        ffi::spank_context::S_CTX_REMOTE => Context::Remote,
        ffi::spank_context::S_CTX_ALLOCATOR => Context::Allocator,
        ffi::spank_context::S_CTX_SLURMD => Context::Slurmd,
        ffi::spank_context::S_CTX_JOB_SCRIPT => Context::JobScript,
        _ => Context::Other,
    }
}

/// The handle slurmstepd passes to each callback; valid only during that callback.
#[derive(Clone, Copy)]
pub struct Spank(pub ffi::spank_t);

impl Spank {
    fn item_u32(&self, item: ffi::spank_item) -> Option<u32> {
        let mut v: u32 = 0;
        // SAFETY: these items take one `uint32_t *` (spank.h), `v` outlives the call.
        let rc = unsafe { ffi::spank_get_item(self.0, item, &mut v as *mut u32) };
        (rc == ffi::ESPANK_SUCCESS).then_some(v)
    }

    pub fn job_id(&self) -> Option<u32> {
        self.item_u32(ffi::spank_item::S_JOB_ID)
    }

    pub fn step_id(&self) -> Option<u32> {
        self.item_u32(ffi::spank_item::S_JOB_STEPID)
    }

    pub fn uid(&self) -> Option<u32> {
        self.item_u32(ffi::spank_item::S_JOB_UID)
    }

    pub fn gid(&self) -> Option<u32> {
        self.item_u32(ffi::spank_item::S_JOB_GID)
    }

    pub fn local_task_count(&self) -> Option<u32> {
        self.item_u32(ffi::spank_item::S_JOB_LOCAL_TASK_COUNT)
    }

    pub fn ncpus(&self) -> Option<u16> {
        let mut v: u16 = 0;
        // SAFETY: S_JOB_NCPUS takes a `uint16_t *`.
        let rc = unsafe { ffi::spank_get_item(self.0, ffi::spank_item::S_JOB_NCPUS, &mut v) };
        (rc == ffi::ESPANK_SUCCESS).then_some(v)
    }

    /// Memory allocated to the job on this node, MiB (0 when the job set no limit).
    pub fn job_alloc_mem_mib(&self) -> Option<u64> {
        let mut v: u64 = 0;
        // SAFETY: S_JOB_ALLOC_MEM takes a `uint64_t *`.
        let rc = unsafe { ffi::spank_get_item(self.0, ffi::spank_item::S_JOB_ALLOC_MEM, &mut v) };
        (rc == ffi::ESPANK_SUCCESS).then_some(v)
    }

    /// The task's pid; only in task callbacks.
    pub fn task_pid(&self) -> Option<u32> {
        let mut v: libc::pid_t = 0;
        // SAFETY: S_TASK_PID takes a `pid_t *`.
        let rc = unsafe { ffi::spank_get_item(self.0, ffi::spank_item::S_TASK_PID, &mut v) };
        (rc == ffi::ESPANK_SUCCESS && v > 0).then_some(v as u32)
    }

    /// The task's wait status; only in `task_exit`.
    pub fn task_exit_status(&self) -> Option<i32> {
        let mut v: c_int = 0;
        // SAFETY: S_TASK_EXIT_STATUS takes an `int *`.
        let rc =
            unsafe { ffi::spank_get_item(self.0, ffi::spank_item::S_TASK_EXIT_STATUS, &mut v) };
        (rc == ffi::ESPANK_SUCCESS).then_some(v)
    }

    /// A variable of the job's environment (remote context), up to 4 KiB (eight GPU UUIDs
    /// need more than 256 bytes). What comes back is the job owner's text: parse it strictly,
    /// never use it as a path or a command.
    pub fn getenv(&self, name: &str) -> Option<String> {
        let name = CString::new(name).ok()?;
        let mut buf = vec![0 as c_char; 4096];
        // SAFETY: buf is writable for its length; spank_getenv NUL-terminates on success.
        let rc = unsafe {
            ffi::spank_getenv(self.0, name.as_ptr(), buf.as_mut_ptr(), buf.len() as c_int)
        };
        if rc != ffi::ESPANK_SUCCESS {
            return None;
        }
        // SAFETY: NUL-terminated within buf on success.
        let s = unsafe { CStr::from_ptr(buf.as_ptr()) };
        Some(s.to_string_lossy().into_owned())
    }

    /// Sets `name` in the job's environment (in slurmstepd: what the tasks will inherit),
    /// replacing any value the job gave it.
    pub fn setenv(&self, name: &str, value: &str) -> Result<(), String> {
        let (n, v) = (CString::new(name), CString::new(value));
        let (Ok(n), Ok(v)) = (n, v) else {
            return Err(format!("{name}: not a C string"));
        };
        // SAFETY: two NUL-terminated strings; overwrite = 1.
        let rc = unsafe { ffi::spank_setenv(self.0, n.as_ptr(), v.as_ptr(), 1) };
        (rc == ffi::ESPANK_SUCCESS)
            .then_some(())
            .ok_or_else(|| format!("cannot set {name} for the job's tasks (spank error {rc})"))
    }
}

/// The plugstack arguments of this callback as strings (lossy: they are validated next).
///
/// # Safety
/// `argv` must point to `argc` valid C strings (slurmstepd guarantees it for the callback).
pub unsafe fn args<'a>(argc: c_int, argv: *mut *mut c_char) -> Vec<std::borrow::Cow<'a, str>> {
    if argv.is_null() || argc <= 0 {
        return Vec::new();
    }
    (0..argc as usize)
        .filter_map(|i| {
            let p = *argv.add(i);
            (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy())
        })
        .collect()
}
