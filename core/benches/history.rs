//! History analysis of a generated 10,000-job sacct answer (job line + `.batch` step each):
//! parse, build runs, group, size and find patterns — everything after sacct returns.
//! Target: under 1 s.

use criterion::{criterion_group, criterion_main, Criterion};
use slurmwatch_core::history;
use slurmwatch_core::slurm::sacct::{self, sacct_time};

fn generated(n: u64) -> String {
    const U: &str = "\u{1f}";
    let header = [
        "JobID",
        "JobIDRaw",
        "JobName",
        "User",
        "UID",
        "Partition",
        "State",
        "ExitCode",
        "Submit",
        "Start",
        "End",
        "ElapsedRaw",
        "TimelimitRaw",
        "NNodes",
        "NCPUS",
        "ReqMem",
        "AllocTRES",
        "NodeList",
        "TotalCPU",
        "MaxRSS",
    ];
    let states = [
        "COMPLETED",
        "COMPLETED",
        "COMPLETED",
        "FAILED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
    ];
    let mut s = header.join(U);
    s.push('\n');
    let t0 = 1_790_000_000i64;
    for i in 0..n {
        let start = t0 + i as i64 * 60;
        let el = 300 + (i * 37) % 7000;
        let end = start + el as i64;
        let state = states[(i % 6) as usize];
        let mem = 1024 * (1 + i % 8);
        let node = format!("cn[{:03}-{:03}]", i % 64, i % 64 + (i % 3));
        let tres = format!(
            "billing=4,cpu=4,mem={mem}M,node=1{}",
            if i % 5 == 0 { ",gres/gpu=2" } else { "" }
        );
        let cpu = format!(
            "{:02}:{:02}:{:02}",
            el * 3 / 3600,
            el * 3 / 60 % 60,
            el * 3 % 60
        );
        let job = [
            i.to_string(),
            i.to_string(),
            format!("wl{}_{}", i % 150, i),
            format!("u{}", i % 20),
            "1001".into(),
            "batch".into(),
            state.into(),
            "0:0".into(),
            sacct_time(start - 30),
            sacct_time(start),
            sacct_time(end),
            el.to_string(),
            "120".into(),
            "1".into(),
            "4".into(),
            format!("{mem}M"),
            tres.clone(),
            node.clone(),
            cpu.clone(),
            String::new(),
        ];
        s += &job.join(U);
        s.push('\n');
        let step = [
            format!("{i}.batch"),
            format!("{i}.batch"),
            "batch".into(),
            String::new(),
            String::new(),
            String::new(),
            state.into(),
            "0:0".into(),
            sacct_time(start),
            sacct_time(start),
            sacct_time(end),
            el.to_string(),
            String::new(),
            "1".into(),
            "4".into(),
            String::new(),
            tres,
            node,
            cpu,
            format!("{}K", (i % 4000) * 1024),
        ];
        s += &step.join(U);
        s.push('\n');
    }
    s
}

fn bench(c: &mut Criterion) {
    let text = generated(10_000);
    let mut g = c.benchmark_group("history");
    g.sample_size(10);
    g.bench_function("analyse_10000_jobs", |b| {
        b.iter(|| {
            let batch = sacct::parse_many(&text, sacct::DELIMITER);
            let (runs, _) = history::runs_from(&batch.records);
            history::analyse(runs)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
