//! The floor under the sampler's cost per reading: the CPU a thread that does nothing but
//! wake once a second is charged, waiting the way the sampler waits (`SCHED_BATCH`, an mpsc
//! `recv_timeout` that times out) and measured the way the sampler measures itself
//! (`RUSAGE_THREAD`). Run inside a job by `scripts/bench-sampler.sh`; prints µs per wake-up.
//! `cargo run --release -p slurmwatch-core --example wake_floor -- SECONDS`.
//!
//! A Python `time.sleep` loop was the floor before: it adds the interpreter's own work per
//! wake-up (94 against 63 µs for a C `nanosleep` loop on the test VM, 2026-12-03).

use std::sync::mpsc;
use std::time::Duration;

/// The waiting thread's CPU so far, µs, as the sampler reads its own.
fn thread_cpu_usec() -> u64 {
    slurmwatch_core::sys::thread_cpu_usec().unwrap_or_else(|| {
        eprintln!("getrusage(RUSAGE_THREAD) failed");
        std::process::exit(1)
    })
}

fn main() {
    let seconds: u32 = match std::env::args().nth(1).map(|s| s.parse()) {
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("usage: wake_floor SECONDS (a whole number above 0)");
            std::process::exit(2);
        }
    };
    let per_wake = std::thread::spawn(move || {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: a valid pointer; pid 0 is the calling thread.
        unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
        let (_tx, rx) = mpsc::channel::<()>();
        let before = thread_cpu_usec();
        for _ in 0..seconds {
            let _ = rx.recv_timeout(Duration::from_secs(1));
        }
        (thread_cpu_usec() - before) / u64::from(seconds)
    })
    .join()
    .expect("the waiting thread");
    println!("{per_wake}");
}
