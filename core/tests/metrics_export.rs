//! `slurmwatch metrics` over real recordings: files written by the store's writer into a
//! spool directory, gathered and rendered as Prometheus exposition. Exact values, NULL
//! readings as absent series, ended and stale jobs with no series, and a broken file
//! skipped with its error series while the rest of the scrape goes on.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::time::Duration;

use slurmwatch_core::export::live::{self, FileState, GatherOptions};
use slurmwatch_core::export::prometheus::{render, RenderOptions};
use slurmwatch_core::model::{SampleKind, SampleRow, Series};
use slurmwatch_core::sample::{GpuCard, GpuError, GpuProcesses, GpuSample, Source};
use slurmwatch_core::store::{summary, JobMeta, Writer};

const GIB: u64 = 1 << 30;

fn meta(job_id: u64, t0: i64) -> JobMeta {
    JobMeta {
        job_id,
        user: "alice".into(),
        uid: 1000,
        node: "node1".into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 5,
        source: Source::CgroupV1,
        cores_allocated: Some(4),
        memory_allocated_bytes: Some(8 * GIB),
        started_unix_ms: t0,
        incarnation: None,
    }
}

/// Row `i`: CPU climbing 3.5 cores' worth a 5 s interval, a steady working set; I/O and
/// PSI unreadable (NULL), as on cgroup v1 without blkio.
fn row(t0: i64, i: u64, series: Series) -> SampleRow {
    let kind = if i == 0 {
        SampleKind::Start
    } else {
        SampleKind::Periodic
    };
    let mut r = SampleRow::empty(t0 + i as i64 * 5_000, series, kind);
    let u = &mut r.usage;
    u.cpu_usage_usec = Some(i * 17_500_000 + 345_678);
    u.cpu_user_usec = Some(i * 17_000_000);
    u.cpu_system_usec = Some(i * 500_000 + 345_678);
    u.memory_usage_bytes = Some(3 * GIB);
    u.memory_cache_bytes = Some(GIB);
    u.memory_working_set_bytes = Some(2 * GIB);
    u.memory_lifetime_peak_bytes = Some(4 * GIB);
    u.memory_limit_bytes = Some(8 * GIB);
    u.memory_oom_kills = Some(0);
    u.memory_limit_hits = Some(2);
    u.memory_major_faults = Some(7);
    u.processes = Some(3);
    u.threads = Some(9);
    // Stall totals for two of the six: the others unreadable.
    u.pressure.memory_some_total_usec = Some(i * 1_250_000);
    u.pressure.cpu_some_total_usec = Some(i * 300_000);
    r.cores_allocated = Some(4);
    r.memory_working_set_max_bytes = Some(2 * GIB + 4096);
    r.effective_cores_max = Some(3.5);
    r.sampler_cpu_usec = Some(i * 1_000 + 250);
    r.sampler_bytes_written = Some(i * 60);
    r
}

fn card() -> GpuCard {
    GpuCard {
        uuid: "GPU-0000abcd".into(),
        cuda_index: Some(1),
        nvml_index: 3,
        pci_bus_id: Some("00000000:13:00.0".into()),
        name: Some("NVIDIA A100-SXM4-80GB".into()),
        memory_total_bytes: Some(80 * GIB),
        sm_clock_max_mhz: Some(1785),
        power_limit_watts: Some(400.0),
        nvlink_links: Some(0),
    }
}

fn gpu_sample() -> GpuSample {
    GpuSample {
        utilization_percent: Ok(93),
        memory_utilization_percent: Ok(30),
        memory_used_bytes: Ok(51 * GIB),
        power_draw_milliwatts: Err(GpuError::NotSupported),
        power_limit_milliwatts: Ok(400_000),
        temperature_celsius: Ok(0),
        sm_clock_mhz: Ok(1410),
        throttle_reasons: Ok(0x4 | 0x8),
        energy_millijoules: Ok(1_234_567),
        processes: Ok(GpuProcesses {
            job_processes: 1,
            job_memory_bytes: 20 * GIB,
            other_processes: 0,
            other_memory_bytes: 0,
        }),
        ecc_uncorrected: Err(GpuError::NotSupported),
        nvlink: Err(GpuError::NotSupported),
        pcie_tx_kib_per_s: Ok(0),
        pcie_rx_kib_per_s: Ok(0),
        ledger: slurmwatch_core::sample::GpuLedger::all_failed(GpuError::NotSupported),
        xid_errors: Ok(vec![]),
    }
}

/// Job `id` in `spool`: extern and batch steps, 3 job rows, one card (power unsupported).
fn recording(spool: &Path, id: u64, t0: i64) -> Writer {
    let path = spool.join(format!("{id}.sqlite"));
    let mut w = Writer::create(&path, &meta(id, t0)).unwrap();
    w.begin_step("extern", t0 - 100, None).unwrap();
    w.begin_step("batch", t0, Some(1)).unwrap();
    let ids = w.register_gpus("batch", t0, &[card()], &[]).unwrap();
    for i in 0..3 {
        w.push(row(t0, i, Series::Job));
        w.push_gpu(t0 + i as i64 * 5_000, ids[0].0, gpu_sample());
    }
    w.flush().unwrap();
    w
}

fn opts(now: i64) -> GatherOptions {
    GatherOptions {
        now_unix_ms: now,
        deadline: Duration::from_secs(5),
        per_file: Duration::from_secs(2),
        max_age: Duration::from_secs(3600),
    }
}

fn jobstats() -> RenderOptions {
    RenderOptions {
        cluster: Some("tiger".into()),
        jobstats: true,
    }
}

/// Every sample line of the exposition, and the checks a scraper makes: each family has
/// its HELP and TYPE before its samples, no series twice, every value a number.
fn samples(text: &str) -> Vec<String> {
    let mut typed = HashSet::new();
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(matches!(kind, "gauge" | "counter"), "{line}");
            assert!(typed.insert(name.to_string()), "TYPE twice: {line}");
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let name = series.split('{').next().unwrap();
        assert!(typed.contains(name), "sample before its TYPE: {line}");
        assert!(value.parse::<f64>().is_ok_and(f64::is_finite), "{line}");
        assert!(seen.insert(series.to_string()), "series twice: {line}");
        out.push(line.to_string());
    }
    out
}

const JOB: &str = r#"cluster="tiger",node="node1",jobid="42",step="",user="alice""#;
const CARD: &str = r#"cluster="tiger",node="node1",jobid="42",step="batch",user="alice",cuda_index="1",nvml_index="3",uuid="GPU-0000abcd""#;

#[test]
fn a_running_job_gives_exact_series_and_null_readings_are_absent() {
    let spool = tempfile::tempdir().unwrap();
    let t0 = slurmwatch_core::sys::now_unix_ms() - 20_000;
    let _w = recording(spool.path(), 42, t0);
    let scrape = live::gather(spool.path(), &opts(t0 + 11_000));
    assert_eq!(scrape.jobs.len(), 1, "{:?}", scrape.files);
    let text = render(&scrape, &jobstats());
    let lines = samples(&text);
    let has = |want: String| {
        assert!(lines.contains(&want), "missing {want}\n{text}");
    };
    // The latest row (i = 2, at t0 + 10 s), exactly.
    has(format!("slurmwatch_cpu_seconds_total{{{JOB}}} 35.345678"));
    has(format!(
        "slurmwatch_pressure_stalled_seconds_total{{{JOB},resource=\"memory\",kind=\"some\"}} 2.500000"
    ));
    has(format!(
        "slurmwatch_pressure_stalled_seconds_total{{{JOB},resource=\"cpu\",kind=\"some\"}} 0.600000"
    ));
    // An unreadable total is no series, never 0.
    assert!(!text.contains(r#"resource="io",kind="full"} "#), "{text}");
    has(format!(
        "slurmwatch_cpu_user_seconds_total{{{JOB}}} 34.000000"
    ));
    has(format!(
        "slurmwatch_memory_working_set_bytes{{{JOB}}} {}",
        2 * GIB
    ));
    has(format!("slurmwatch_memory_page_cache_bytes{{{JOB}}} {GIB}"));
    has(format!(
        "slurmwatch_memory_lifetime_peak_bytes{{{JOB}}} {}",
        4 * GIB
    ));
    has(format!(
        "slurmwatch_memory_limit_bytes{{{JOB}}} {}",
        8 * GIB
    ));
    has(format!("slurmwatch_memory_oom_kills_total{{{JOB}}} 0"));
    has(format!("slurmwatch_cores_allocated{{{JOB}}} 4"));
    has(format!("slurmwatch_effective_cores_max{{{JOB}}} 3.5"));
    has(format!(
        "slurmwatch_sampler_cpu_seconds_total{{{JOB}}} 0.002250"
    ));
    let t = t0 + 10_000;
    has(format!(
        "slurmwatch_sample_timestamp_seconds{{{JOB}}} {}.{:03}000",
        t / 1000,
        t % 1000
    ));
    // The card, labelled as the job's code addresses it (cuda:1 is NVML's 3).
    has(format!("slurmwatch_gpu_utilization_ratio{{{CARD}}} 0.93"));
    has(format!(
        "slurmwatch_gpu_memory_used_bytes{{{CARD}}} {}",
        51 * GIB
    ));
    has(format!(
        "slurmwatch_gpu_job_memory_used_bytes{{{CARD}}} {}",
        20 * GIB
    ));
    has(format!(
        "slurmwatch_gpu_memory_total_bytes{{{CARD}}} {}",
        80 * GIB
    ));
    has(format!("slurmwatch_gpu_power_limit_watts{{{CARD}}} 400"));
    // 0 °C is a reading, not a missing one.
    has(format!("slurmwatch_gpu_temperature_celsius{{{CARD}}} 0"));
    has(format!(
        "slurmwatch_gpu_sm_clock_hertz{{{CARD}}} 1410000000"
    ));
    has(format!(
        "slurmwatch_gpu_sm_clock_max_hertz{{{CARD}}} 1785000000"
    ));
    has(format!(
        "slurmwatch_gpu_throttle_reason{{{CARD},reason=\"power_cap\"}} 1"
    ));
    has(format!(
        "slurmwatch_gpu_throttle_reason{{{CARD},reason=\"hardware_slowdown\"}} 1"
    ));
    has(format!(
        "slurmwatch_gpu_throttle_reason{{{CARD},reason=\"gpu_idle\"}} 0"
    ));
    has(format!(
        "slurmwatch_gpu_throttle_reason{{{CARD},reason=\"other\"}} 0"
    ));
    has(format!(
        "slurmwatch_gpu_energy_joules_total{{{CARD}}} 1234.567"
    ));
    // NULL readings: no series at all (not 0), and no empty family either.
    for absent in [
        "slurmwatch_io_read_bytes_total",
        "slurmwatch_io_written_bytes_total",
        "slurmwatch_pressure_avg10_ratio",
        "slurmwatch_gpu_power_watts",
        "slurmwatch_gpu_ecc_uncorrected_errors_total",
        "nvidia_gpu_power_usage_milliwatts",
    ] {
        assert!(!text.contains(&format!("{absent}{{")), "{absent}\n{text}");
        assert!(!text.contains(&format!("# TYPE {absent} ")), "{absent}");
    }
    // jobstats' names, at job level, and the card joined to the job by its labels alone.
    let js = r#"cluster="tiger",jobid="42",step="",task="""#;
    has(format!("cgroup_memory_total_bytes{{{js}}} {}", 8 * GIB));
    has(format!("cgroup_memory_rss_bytes{{{js}}} {}", 2 * GIB));
    has(format!("cgroup_cpu_total_seconds{{{js}}} 35.345678"));
    has(format!("cgroup_cpus{{{js}}} 4"));
    has(r#"cgroup_uid{cluster="tiger",jobid="42"} 1000"#.to_string());
    // jobstats' used memory is rss + shmem: shared memory is already in the working set.
    has(format!("cgroup_memory_shmem_bytes{{{js}}} 0"));
    has(format!("cgroup_memory_fail_count{{{js}}} 2"));
    // The GPU exporter's labels since 0.2.2: jobstats' GPU_EXPORTER_JOBID mode selects the
    // job's cards by `jobid`.
    let gl = r#"cluster="tiger",jobid="42",userid="1000",minor_number="3",uuid="GPU-0000abcd",name="NVIDIA A100-SXM4-80GB""#;
    has(format!("nvidia_gpu_jobId{{{gl}}} 42"));
    has(format!("nvidia_gpu_duty_cycle{{{gl}}} 93"));
    has(format!("nvidia_gpu_memory_used_bytes{{{gl}}} {}", 51 * GIB));
    has(format!(
        "nvidia_gpu_memory_total_bytes{{{gl}}} {}",
        80 * GIB
    ));
    has(r#"slurmwatch_file_up{jobid="42"} 1"#.to_string());
    has("slurmwatch_scrape_file_errors 0".to_string());
    // Without the switch, none of jobstats' names.
    let native = render(&scrape, &RenderOptions::default());
    assert!(!native.contains("cgroup_") && !native.contains("nvidia_gpu_"));
    assert!(native
        .contains(r#"slurmwatch_cores_allocated{node="node1",jobid="42",step="",user="alice"} 4"#));
}

#[test]
fn a_second_running_step_gets_its_own_series_until_it_ends() {
    let spool = tempfile::tempdir().unwrap();
    let t0 = slurmwatch_core::sys::now_unix_ms() - 20_000;
    let mut w = recording(spool.path(), 42, t0);
    w.begin_step("0", t0 + 6_000, Some(2)).unwrap();
    let mut r = row(t0, 2, Series::step("0"));
    r.usage.cpu_usage_usec = Some(1_500_000);
    // A step whose cores and limit were not read: the job's never stand in for them.
    r.cores_allocated = None;
    r.usage.memory_limit_bytes = None;
    r.kind = SampleKind::Start;
    w.push(r);
    w.flush().unwrap();
    let step0 = |text: &str| {
        samples(text).into_iter().any(|l| {
            l == r#"slurmwatch_cpu_seconds_total{cluster="tiger",node="node1",jobid="42",step="0",user="alice"} 1.500000"#
        })
    };
    // jobstats' names for the step, as cgroup_exporter's step_0 cgroup: its own CPU, and no
    // job allocation standing in for its cores or limit (the row has neither).
    let js_step0 = r#"cluster="tiger",jobid="42",step="0",task="""#;
    let js_step = |text: &str, family: &str| {
        samples(text)
            .into_iter()
            .find(|l| l.starts_with(&format!("{family}{{{js_step0}}} ")))
    };
    let text = render(&live::gather(spool.path(), &opts(t0 + 11_000)), &jobstats());
    assert!(step0(&text), "{text}");
    assert_eq!(
        js_step(&text, "cgroup_cpu_total_seconds").as_deref(),
        Some(format!("cgroup_cpu_total_seconds{{{js_step0}}} 1.500000").as_str()),
        "{text}"
    );
    assert_eq!(js_step(&text, "cgroup_cpus"), None, "{text}");
    assert_eq!(js_step(&text, "cgroup_memory_total_bytes"), None, "{text}");
    assert!(text.contains(r#"cgroup_cpus{cluster="tiger",jobid="42",step="",task=""} 4"#));
    w.end_step("0", t0 + 10_500, Some(0)).unwrap();
    let text = render(&live::gather(spool.path(), &opts(t0 + 11_000)), &jobstats());
    assert!(!step0(&text), "{text}");
    assert_eq!(
        js_step(&text, "cgroup_cpu_total_seconds"),
        None,
        "ended: {text}"
    );
    assert!(text.contains(&format!("slurmwatch_cpu_seconds_total{{{JOB}}} 35.345678")));
}

#[test]
fn ended_and_stale_jobs_give_no_series_and_a_broken_file_is_skipped() {
    let spool = tempfile::tempdir().unwrap();
    let t0 = slurmwatch_core::sys::now_unix_ms() - 20_000;
    let _live = recording(spool.path(), 42, t0);
    // 43: the batch step ended (its last task exited).
    let mut ended = recording(spool.path(), 43, t0);
    ended.end_step("batch", t0 + 10_100, Some(0)).unwrap();
    // 44: the epilog wrote its summary, though no step end was recorded.
    let _summarised = recording(spool.path(), 44, t0);
    summary::write(&spool.path().join("44.sqlite"), &[("k".into(), "1".into())]).unwrap();
    // 45: running by the file, but nothing written for a minute (a lost slurmstepd).
    let _stale = recording(spool.path(), 45, t0 - 60_000);
    // 46: not a slurmwatch file at all; 47: not written for two hours (not even opened).
    std::fs::write(spool.path().join("46.sqlite"), b"not sqlite at all").unwrap();
    std::fs::write(spool.path().join("47.sqlite"), b"old").unwrap();
    let old = std::time::SystemTime::now() - Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(spool.path().join("47.sqlite"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    // Names that are not a job's live file are not looked at.
    std::fs::write(spool.path().join("48.alloc"), b"gpus=\n").unwrap();

    let scrape = live::gather(spool.path(), &opts(t0 + 11_000));
    let states: Vec<(u32, FileState)> = scrape
        .files
        .iter()
        .map(|f| (f.job_id, f.state.clone()))
        .collect();
    assert_eq!(states.len(), 5, "{states:?}");
    assert_eq!(states[0], (42, FileState::Live));
    assert_eq!(states[1], (43, FileState::Ended));
    assert_eq!(states[2], (44, FileState::Ended));
    assert_eq!(states[3], (45, FileState::Stale));
    assert!(
        matches!(&states[4], (46, FileState::Error(e)) if e.contains("not an SQLite database")),
        "{states:?}"
    );
    let text = render(&scrape, &jobstats());
    let lines = samples(&text);
    for gone in ["43", "44", "45", "47"] {
        assert!(
            !lines
                .iter()
                .any(|l| l.contains(&format!("jobid=\"{gone}\""))),
            "job {gone}:\n{text}"
        );
    }
    assert!(lines.contains(&r#"slurmwatch_file_up{jobid="46"} 0"#.to_string()));
    assert!(lines.contains(&"slurmwatch_scrape_file_errors 1".to_string()));
    assert!(lines.contains(&r#"slurmwatch_scrape_files{state="ended"} 2"#.to_string()));
    assert!(lines.contains(&r#"slurmwatch_scrape_files{state="stale"} 1"#.to_string()));
    assert!(lines.contains(&format!("slurmwatch_cpu_seconds_total{{{JOB}}} 35.345678")));
}

#[test]
fn a_spool_that_cannot_be_listed_is_a_series_not_a_crash() {
    let scrape = live::gather(Path::new("/nonexistent/slurmwatch-spool"), &opts(0));
    let text = render(&scrape, &RenderOptions::default());
    assert!(
        samples(&text).contains(&"slurmwatch_scrape_spool_up 0".to_string()),
        "{text}"
    );
}

#[test]
fn a_scrape_out_of_time_leaves_files_unchecked() {
    let spool = tempfile::tempdir().unwrap();
    let t0 = slurmwatch_core::sys::now_unix_ms() - 20_000;
    let _w = recording(spool.path(), 42, t0);
    let mut o = opts(t0 + 11_000);
    o.deadline = Duration::ZERO;
    let scrape = live::gather(spool.path(), &o);
    assert_eq!(scrape.files[0].state, FileState::Unchecked);
    assert!(scrape.deadline_exceeded && scrape.jobs.is_empty());
    let text = render(&scrape, &RenderOptions::default());
    assert!(
        text.contains("slurmwatch_scrape_deadline_exceeded 1"),
        "{text}"
    );
}

/// An exporter process keeps ended and unreadable files' verdicts until the file changes:
/// the second scrape opens only the running job's file, and a change is seen at once.
#[test]
fn verdicts_are_kept_until_the_file_changes() {
    let spool = tempfile::tempdir().unwrap();
    let t0 = slurmwatch_core::sys::now_unix_ms() - 20_000;
    let _live = recording(spool.path(), 42, t0);
    let mut ended = recording(spool.path(), 43, t0);
    ended.end_step("batch", t0 + 10_100, Some(0)).unwrap();
    std::fs::write(spool.path().join("46.sqlite"), b"not sqlite at all").unwrap();
    let mut v = live::Verdicts::default();
    let first = live::gather_with(spool.path(), &opts(t0 + 11_000), &mut v);
    // With no time left, only kept verdicts can answer: 43 and 46 do, 42 is unchecked.
    let mut late = opts(t0 + 11_000);
    late.deadline = Duration::ZERO;
    let second = live::gather_with(spool.path(), &late, &mut v);
    let states = |s: &live::Scrape| s.files.iter().map(|f| f.state.clone()).collect::<Vec<_>>();
    assert_eq!(states(&first)[1..], states(&second)[1..]);
    assert_eq!(states(&second)[0], FileState::Unchecked);
    // 46 replaced by a real recording: read again, and live.
    std::fs::remove_file(spool.path().join("46.sqlite")).unwrap();
    let _now_live = recording(spool.path(), 46, t0);
    let third = live::gather_with(spool.path(), &opts(t0 + 11_000), &mut v);
    assert_eq!(third.files[2].state, FileState::Live);
}

// --- the Grafana dashboard (docs/grafana/slurmwatch-job.json) ------------------------------

/// Each metric family a scrape of a job with every reading present publishes (natively), with
/// the label names its series carry: taken from the exporter's own output.
fn published() -> BTreeMap<String, BTreeSet<String>> {
    let spool = tempfile::tempdir().unwrap();
    let t0 = slurmwatch_core::sys::now_unix_ms() - 20_000;
    let path = spool.path().join("42.sqlite");
    let mut w = Writer::create(&path, &meta(42, t0)).unwrap();
    w.begin_step("batch", t0, Some(1)).unwrap();
    let ids = w.register_gpus("batch", t0, &[card()], &[]).unwrap();
    let mut full_gpu = gpu_sample();
    full_gpu.power_draw_milliwatts = Ok(250_000);
    full_gpu.ecc_uncorrected = Ok(0);
    for i in 0..3 {
        let mut r = row(t0, i, Series::Job);
        r.usage.io_read_bytes = Some(i * 4096);
        r.usage.io_write_bytes = Some(i * 8192);
        r.usage.pressure = slurmwatch_core::sample::Pressure {
            cpu_some_avg10: Some(1.5),
            memory_some_avg10: Some(0.5),
            memory_full_avg10: Some(0.25),
            io_some_avg10: Some(2.0),
            io_full_avg10: Some(1.0),
            ..Default::default()
        };
        w.push(r);
        w.push_gpu(t0 + i as i64 * 5_000, ids[0].0, full_gpu.clone());
    }
    w.flush().unwrap();
    let scrape = live::gather(spool.path(), &opts(t0 + 11_000));
    assert_eq!(scrape.jobs.len(), 1, "{:?}", scrape.files);
    let text = render(&scrape, &RenderOptions::default());
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in samples(&text) {
        let (series, _) = line.rsplit_once(' ').unwrap();
        let (name, labels) = series.split_once('{').unwrap_or((series, "}"));
        let e = out.entry(name.to_string()).or_default();
        for kv in labels
            .trim_end_matches('}')
            .split(',')
            .filter(|kv| !kv.is_empty())
        {
            e.insert(kv.split_once('=').unwrap().0.to_string());
        }
    }
    out
}

/// What one PromQL expression uses: each selector's metric name with the label names it
/// matches on, and the label names of `by (…)` / `without (…)` / `on (…)` clauses.
#[derive(Debug, Default)]
struct Uses {
    selectors: Vec<(String, Vec<String>)>,
    grouping: Vec<String>,
}

const PROMQL_WORDS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "and",
    "or",
    "unless",
    "offset",
];

fn promql_uses(expr: &str) -> Uses {
    let c: Vec<char> = expr.chars().collect();
    let mut u = Uses::default();
    let ident = |i: usize| {
        let mut j = i;
        while j < c.len() && (c[j].is_ascii_alphanumeric() || c[j] == '_' || c[j] == ':') {
            j += 1;
        }
        (c[i..j].iter().collect::<String>(), j)
    };
    let skip_ws = |mut i: usize| {
        while i < c.len() && c[i].is_whitespace() {
            i += 1;
        }
        i
    };
    // Label names of a `{…}` or `(…)` list starting at `i` (the opening bracket).
    let labels = |i: usize, close: char| {
        let mut names = Vec::new();
        let mut j = i + 1;
        while j < c.len() && c[j] != close {
            if c[j] == '"' {
                j += 1;
                while j < c.len() && c[j] != '"' {
                    j += if c[j] == '\\' { 2 } else { 1 };
                }
                j += 1;
            } else if c[j].is_ascii_alphabetic() || c[j] == '_' {
                let (name, k) = ident(j);
                names.push(name);
                j = k;
            } else {
                j += 1;
            }
        }
        (names, j + 1)
    };
    let mut i = 0;
    let mut grouping_next = false;
    while i < c.len() {
        match c[i] {
            '"' => {
                i += 1;
                while i < c.len() && c[i] != '"' {
                    i += if c[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            }
            '[' => {
                i = c[i..]
                    .iter()
                    .position(|&x| x == ']')
                    .map_or(c.len(), |p| i + p + 1)
            }
            '$' => i = ident(i + 1).1,
            '(' if grouping_next => {
                let (names, j) = labels(i, ')');
                u.grouping.extend(names);
                grouping_next = false;
                i = j;
            }
            '{' => {
                // A selector with no name (`{jobid="1"}`) has no metric to check against.
                let (names, j) = labels(i, '}');
                u.selectors.push((String::new(), names));
                i = j;
            }
            ch if ch.is_ascii_alphabetic() || ch == '_' || ch == ':' => {
                let (word, j) = ident(i);
                let next = skip_ws(j);
                if PROMQL_WORDS.contains(&word.as_str()) {
                    grouping_next = matches!(word.as_str(), "by" | "without" | "on" | "ignoring");
                    i = j;
                } else if c.get(next) == Some(&'(')
                    || matches!(ident(next).0.as_str(), "by" | "without")
                {
                    i = j; // a function or an aggregation (`max by (…) (…)`)
                } else if c.get(next) == Some(&'{') {
                    let (names, k) = labels(next, '}');
                    u.selectors.push((word, names));
                    i = k;
                } else {
                    u.selectors.push((word, Vec::new()));
                    i = j;
                }
            }
            _ => i += 1,
        }
    }
    u
}

/// Every PromQL expression in the dashboard (panel targets, nested rows, and the template
/// variables' `label_values(selector, label)`), with the legend of each target.
fn dashboard_queries(v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(e) = m.get("expr").and_then(|e| e.as_str()) {
                let legend = m.get("legendFormat").and_then(|l| l.as_str()).unwrap_or("");
                out.push((e.to_string(), legend.to_string()));
            }
            for (k, x) in m {
                if k != "expr" {
                    dashboard_queries(x, out);
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| dashboard_queries(x, out)),
        _ => {}
    }
}

#[test]
fn the_grafana_dashboard_queries_only_series_the_exporter_publishes() {
    let published = published();
    // The exporter's own families, not a list typed here: the bare minimum it must offer.
    for f in [
        "slurmwatch_memory_working_set_bytes",
        "slurmwatch_gpu_throttle_reason",
    ] {
        assert!(published.contains_key(f), "{published:?}");
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/grafana/slurmwatch-job.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let vars = dash["templating"]["list"].as_array().unwrap();
    let var = |name: &str| vars.iter().find(|v| v["name"] == name);
    let jobid = var("jobid").expect("a jobid template variable");
    let mut queries = Vec::new();
    dashboard_queries(&dash["panels"], &mut queries);
    assert!(queries.len() >= 10, "{queries:?}");
    for v in vars.iter().filter(|v| v["type"] == "query") {
        let q = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .unwrap();
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{q}"));
        let (selector, label) = inner.rsplit_once(',').unwrap();
        queries.push((
            selector.trim().to_string(),
            format!("{{{{{}}}}}", label.trim()),
        ));
    }
    assert!(jobid["query"]["query"]
        .as_str()
        .unwrap()
        .contains(", jobid)"));
    let mut checked = BTreeSet::new();
    for (expr, legend) in &queries {
        let u = promql_uses(expr);
        assert!(!u.selectors.is_empty(), "no metric in {expr}");
        let mut labels_here: BTreeSet<&str> = BTreeSet::new();
        for (metric, labels) in &u.selectors {
            let have = published
                .get(metric)
                .unwrap_or_else(|| panic!("{expr}: {metric} is not published"));
            for l in labels {
                assert!(
                    have.contains(l),
                    "{expr}: {metric} has no label {l}: {have:?}"
                );
            }
            labels_here.extend(have.iter().map(String::as_str));
            checked.insert(metric.clone());
        }
        for l in &u.grouping {
            assert!(
                labels_here.contains(l.as_str()),
                "{expr}: no metric in it has label {l}"
            );
        }
        for l in legend
            .split("{{")
            .skip(1)
            .filter_map(|p| p.split_once("}}"))
        {
            assert!(
                labels_here.contains(l.0.trim()),
                "{expr}: legend label {}",
                l.0
            );
        }
    }
    // Every panel is about the chosen job.
    let panel_exprs: Vec<&String> = queries.iter().map(|(e, _)| e).collect();
    for e in panel_exprs
        .iter()
        .filter(|e| !e.starts_with("slurmwatch_sample_timestamp_seconds"))
    {
        assert!(e.contains(r#"jobid="$jobid""#), "{e}");
    }
    // What the issue asks the dashboard to show.
    for must in [
        "slurmwatch_memory_working_set_bytes",
        "slurmwatch_memory_limit_bytes",
        "slurmwatch_cpu_seconds_total",
        "slurmwatch_cores_allocated",
        "slurmwatch_gpu_utilization_ratio",
        "slurmwatch_gpu_throttle_reason",
    ] {
        assert!(checked.contains(must), "the dashboard does not show {must}");
    }
}

#[test]
fn the_dashboard_check_catches_a_wrong_name_or_label() {
    let published = published();
    let u = promql_uses(
        r#"max by (node, reason) (rate(slurmwatch_gpu_throttle_reasons{jobid="$jobid", card="0"}[$__rate_interval]))"#,
    );
    assert_eq!(u.selectors.len(), 1, "{u:?}");
    assert_eq!(u.selectors[0].0, "slurmwatch_gpu_throttle_reasons");
    assert_eq!(u.selectors[0].1, ["jobid", "card"]);
    assert_eq!(u.grouping, ["node", "reason"]);
    assert!(!published.contains_key("slurmwatch_gpu_throttle_reasons"));
    assert!(!published["slurmwatch_gpu_throttle_reason"].contains("card"));
    let u = promql_uses(r#"time() - slurmwatch_sample_timestamp_seconds{step=""} > bool 60"#);
    assert_eq!(
        u.selectors,
        [(
            "slurmwatch_sample_timestamp_seconds".to_string(),
            vec!["step".to_string()]
        )]
    );
}
