//! Per-process state of the plugin. Each slurmstepd (one per step) and each sbatch/srun is
//! its own process, so "global" here means "this step".
//!
//! Locks are only ever taken on the callback thread; forked task children and the sampler
//! thread never touch them (a lock held at fork time would deadlock the child). A poisoned lock
//! (a panic while held) is recovered, not propagated: one bad callback must not disable the rest.

use slurmwatch_recorder::options::PluginConfig;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The interval the job asked for with `--slurmwatch[=N]`; 0 = the option was not given.
static REQUESTED_INTERVAL: AtomicU32 = AtomicU32::new(0);

static CONFIG: Mutex<Option<PluginConfig>> = Mutex::new(None);

thread_local! {
    static SAMPLER_THREAD: Cell<bool> = const { Cell::new(false) };
}

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub fn set_config(c: PluginConfig) {
    *lock(&CONFIG) = Some(c);
}

pub fn config() -> Option<PluginConfig> {
    lock(&CONFIG).clone()
}

pub fn set_requested_interval(seconds: u32) {
    REQUESTED_INTERVAL.store(seconds, Ordering::SeqCst);
}

pub fn requested_interval() -> Option<u32> {
    match REQUESTED_INTERVAL.load(Ordering::SeqCst) {
        0 => None,
        n => Some(n),
    }
}

/// Marks the current thread as the sampler (its panics are reported at join, not logged).
pub fn mark_sampler_thread() {
    SAMPLER_THREAD.with(|c| c.set(true));
}

pub fn is_callback_thread() -> bool {
    !SAMPLER_THREAD.with(|c| c.get())
}
