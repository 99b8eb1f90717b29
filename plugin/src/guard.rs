//! Every SPANK callback runs through `guarded`: a panic or an error inside the plugin is
//! logged and turned into success, so the job's exit code, output and runtime never depend on
//! slurmwatch. Panic messages go to the slurmd log, never to the job's stderr (the default
//! hook would print them there), and no backtrace is taken.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

static HOOK: Once = Once::new();

fn install_panic_hook() {
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let msg = panic_text(info.payload()).unwrap_or_else(|| "unknown panic".into());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            // Only the callback thread logs through Slurm; a sampler thread's panic is
            // reported when it is joined.
            if crate::state::is_callback_thread() {
                crate::log::problem(&format!(
                    "slurmwatch: internal error (panic{at}): {msg}; the job is not affected"
                ));
            }
        }));
    });
}

/// A panic's message, when it is text (`panic!` with a literal or a format).
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
}

/// Runs one callback body. The return value to Slurm is always 0 (success) in slurmstepd.
pub fn guarded(callback: &str, body: impl FnOnce() -> Result<(), String>) -> i32 {
    install_panic_hook();
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(msg)) => {
            crate::log::problem(&format!(
                "slurmwatch: {callback}: {msg}; the job is not affected"
            ));
            0
        }
        Err(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The message of `Box<dyn Any>` itself (not of the box) is read, whichever way the
    /// panic was raised; a payload that is not text has none.
    #[test]
    fn a_panics_text_is_read_from_either_payload() {
        let literal = catch_unwind(|| panic!("literal")).unwrap_err();
        assert_eq!(panic_text(literal.as_ref()).as_deref(), Some("literal"));
        let formatted = catch_unwind(|| panic!("n={}", 3)).unwrap_err();
        assert_eq!(panic_text(formatted.as_ref()).as_deref(), Some("n=3"));
        let other = catch_unwind(|| std::panic::panic_any(7u8)).unwrap_err();
        assert_eq!(panic_text(other.as_ref()), None);
    }
}
