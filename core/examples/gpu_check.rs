//! The real-GPU check (scripts/gpu-check.sh): opens the machine's NVML through the same
//! collector the plugin uses and prints every reading of every card, the verdicts, the
//! wiring, and what each NVML call costs.
//!
//! `cargo run --release -p slurmwatch-core --example gpu_check -- [LIB] [READS]`
//! Cards: those in `CUDA_VISIBLE_DEVICES` (as a job sees them), else every card.

use slurmwatch_core::collect::gpu::derive::{card_state, throttle_names, throttle_state};
use slurmwatch_core::collect::gpu::{wanted_cards, CardRef, GpuCollector, GpuEnv, Wanted};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let lib = PathBuf::from(args.next().unwrap_or_else(|| "libnvidia-ml.so.1".into()));
    let reads: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(100);
    let env = GpuEnv::from_lookup(|k| std::env::var(k).ok());
    let mut wanted = wanted_cards(&env);
    if wanted.is_empty() {
        wanted = (0..64)
            .map(|i| Wanted {
                card: CardRef::Index(i),
                cuda_index: None,
            })
            .collect();
    }
    let t = Instant::now();
    let mut c = match GpuCollector::open(&lib, &wanted) {
        Ok(c) => c,
        Err(e) => {
            println!("no GPU section: {e}");
            std::process::exit(1);
        }
    };
    println!("NVML opened in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let cards = c.cards();
    for card in &cards {
        println!("{}: {card:?}", card.label());
    }
    for l in c.topology() {
        println!(
            "link {} - {}: {} ({} direct NVLink links)",
            l.a_uuid, l.b_uuid, l.level, l.nvlink_links
        );
    }
    let own = std::process::id();
    let mut is_job = |pid: u32| pid == own;
    for (card, s) in cards.iter().zip(c.read(&mut is_job)) {
        println!("{} reading: {s:#?}", card.label());
        println!(
            "{} state {} throttle {} reasons {:?}",
            card.label(),
            card_state(&s).as_str(),
            throttle_state(&s).as_str(),
            s.throttle_reasons.map(throttle_names)
        );
    }
    c.set_timing(true);
    let mut calls: BTreeMap<&str, (u128, u32, u128)> = BTreeMap::new();
    let t = Instant::now();
    for _ in 0..reads {
        c.read(&mut is_job);
        for (name, d) in c.take_timings() {
            let e = calls.entry(name).or_default();
            e.0 += d.as_nanos();
            e.1 += 1;
            e.2 = e.2.max(d.as_nanos());
        }
    }
    let per_card = t.elapsed().as_secs_f64() * 1e6 / f64::from(reads) / cards.len() as f64;
    for (name, (ns, n, max)) in calls {
        println!(
            "  {name:<28} mean {:>9.1} µs  max {:>9.1} µs",
            ns as f64 / f64::from(n) / 1e3,
            max as f64 / 1e3
        );
    }
    println!(
        "one reading of one card: {per_card:.1} µs (mean of {reads} reads of {} cards)",
        cards.len()
    );
}
