//! ProcTreeTracker against the real /proc: a child that burns CPU, exits and is reaped
//! between two readings keeps its work in the tracked total. Ground truth is
//! `getrusage(RUSAGE_CHILDREN)` of this test process (its own binary: no other test here
//! spawns children, so the figure is not shared).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use slurmwatch_core::collect::ProcTreeTracker;

fn children_cpu_usec() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) },
        0
    );
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(ru.ru_utime) + us(ru.ru_stime)
}

#[test]
fn real_proc_keeps_cpu_of_reaped_child() {
    let before = children_cpu_usec();
    // P: runs a CPU-burning child B, waits for it (P's cutime absorbs B), says so, then
    // blocks on stdin so it is still alive at the second reading.
    let mut p = Command::new("sh")
        .arg("-c")
        .arg(r#"sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; echo done; read x"#)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn sh");
    let mut tracker = ProcTreeTracker::new(Path::new("/proc"), &[p.id()]);
    let r0 = tracker.read();
    assert!(r0.cpu_usage_usec.is_some(), "{r0:?}");

    let mut line = String::new();
    BufReader::new(p.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "done");
    let r1 = tracker.read();
    assert_eq!(r1.processes, Some(1), "B is gone, P remains: {r1:?}");

    // P exits and we reap it: the tracker keeps P's last-seen total.
    p.stdin.take().unwrap().write_all(b"\n").unwrap();
    assert!(p.wait().unwrap().success());
    let truth = children_cpu_usec() - before;
    let r2 = tracker.read();
    assert_eq!(r2.processes, Some(0));

    let (c0, c1, c2) = (
        r0.cpu_usage_usec.unwrap(),
        r1.cpu_usage_usec.unwrap(),
        r2.cpu_usage_usec.unwrap(),
    );
    eprintln!("tracked {c0} -> {c1} -> {c2} us; getrusage {truth} us");
    assert!(c0 <= c1 && c1 <= c2, "never decreases: {c0} {c1} {c2}");
    assert!(c2 >= 150_000, "child's ~0.3 s of CPU kept: {c2} us");
    // Within 10 % of the kernel's own figure (plus one clock tick of granularity).
    let diff = c2.abs_diff(truth);
    assert!(
        diff <= truth / 10 + 10_000,
        "tracked {c2} us vs getrusage {truth} us"
    );
}
