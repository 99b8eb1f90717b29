//! The store's delta codec, by property: any sequence of readings the sampler can produce
//! (counters that climb, reset or go unreadable; gauges that jump anywhere; values in the
//! units the file stores: KiB for memory, hundredths for PSI, thousandths for cores) comes
//! back from the file exactly, whatever the flush boundaries.

use proptest::prelude::*;
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::{Pressure, Source, UsageReading};
use slurmwatch_core::store::{JobMeta, Reader, Writer};

const T0: i64 = 1_700_000_000_000;
/// Values stay below 2^52: far above any real counter, and every delta fits an i64.
const MAX: u64 = 1 << 52;

fn meta() -> JobMeta {
    JobMeta {
        job_id: 7,
        user: "alice".into(),
        uid: 1000,
        node: "n1".into(),
        cluster: None,
        plugin_version: "0.1.0".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(4),
        memory_allocated_bytes: Some(8 << 30),
        started_unix_ms: T0,
        incarnation: None,
    }
}

fn plain() -> impl Strategy<Value = Option<u64>> {
    prop_oneof![1 => Just(None), 1 => Just(Some(0)), 6 => (0..MAX).prop_map(Some)]
}

fn kib() -> impl Strategy<Value = Option<u64>> {
    plain().prop_map(|v| v.map(|b| b / 1024 * 1024))
}

/// Microseconds in whole ms (PSI totals are kept to the ms).
fn whole_ms() -> impl Strategy<Value = Option<u64>> {
    plain().prop_map(|v| v.map(|us| us / 1000 * 1000))
}

fn hundredths() -> impl Strategy<Value = Option<f64>> {
    prop::option::weighted(0.8, 0u32..10_001).prop_map(|v| v.map(|n| f64::from(n) / 100.0))
}

fn usage() -> impl Strategy<Value = UsageReading> {
    (
        (plain(), plain(), plain(), kib(), kib(), kib(), kib(), kib()),
        (
            plain(),
            plain(),
            plain(),
            plain(),
            plain(),
            plain(),
            plain(),
        ),
        (
            hundredths(),
            hundredths(),
            hundredths(),
            hundredths(),
            hundredths(),
        ),
        (
            whole_ms(),
            whole_ms(),
            whole_ms(),
            whole_ms(),
            whole_ms(),
            whole_ms(),
        ),
    )
        .prop_map(
            |((cpu, user, sys, mem, cache, ws, peak, limit), b, p, t)| UsageReading {
                cpu_usage_usec: cpu,
                cpu_user_usec: user,
                cpu_system_usec: sys,
                memory_usage_bytes: mem,
                memory_cache_bytes: cache,
                memory_working_set_bytes: ws,
                memory_lifetime_peak_bytes: peak,
                memory_limit_bytes: limit,
                memory_oom_kills: b.0,
                memory_limit_hits: b.1,
                memory_major_faults: b.2,
                io_read_bytes: b.3,
                io_write_bytes: b.4,
                processes: b.5,
                threads: b.6,
                pressure: Pressure {
                    cpu_some_avg10: p.0,
                    memory_some_avg10: p.1,
                    memory_full_avg10: p.2,
                    io_some_avg10: p.3,
                    io_full_avg10: p.4,
                    cpu_some_total_usec: t.0,
                    cpu_full_total_usec: t.1,
                    memory_some_total_usec: t.2,
                    memory_full_total_usec: t.3,
                    io_some_total_usec: t.4,
                    io_full_total_usec: t.5,
                },
            },
        )
}

fn row() -> impl Strategy<Value = (i64, SampleRow)> {
    (
        1i64..600_000,
        usage(),
        prop::option::of(0u32..512),
        kib(),
        prop::option::of(0u32..512_000).prop_map(|v| v.map(|n| f64::from(n) / 1000.0)),
        plain(),
        plain(),
    )
        .prop_map(|(dt, usage, cores, ws_max, cores_max, cpu, written)| {
            let mut r = SampleRow::empty(0, Series::Job, SampleKind::Periodic);
            r.usage = usage;
            r.cores_allocated = cores;
            r.memory_working_set_max_bytes = ws_max;
            r.effective_cores_max = cores_max;
            r.sampler_cpu_usec = cpu;
            r.sampler_bytes_written = written;
            (dt, r)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_rows_come_back_exactly(
        rows in prop::collection::vec(row(), 1..60),
        flush_every in 1usize..25,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("7.sqlite");
        let mut w = Writer::create(&path, &meta()).unwrap();
        let mut t = T0;
        let mut written = Vec::new();
        let last = rows.len() - 1;
        for (i, (dt, mut r)) in rows.into_iter().enumerate() {
            t += dt;
            r.t_unix_ms = t;
            r.kind = match i {
                0 => SampleKind::Start,
                i if i == last && i > 0 => SampleKind::End,
                _ => SampleKind::Periodic,
            };
            w.push(r.clone());
            written.push(r);
            if i % flush_every == flush_every - 1 {
                w.flush().unwrap();
            }
        }
        w.close().unwrap();
        let back = Reader::open(&path).unwrap().samples(&Series::Job).unwrap();
        prop_assert_eq!(back, written);
    }
}
