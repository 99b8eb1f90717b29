//! GPU scenarios through the real collector (nvml-wrapper dlopen-ing the fake NVML built
//! by this package) and into a job's file, read back through the store's reader.
//!
//! The fake's state and NVML's init count are per process, so scenarios run one at a time.

use serde_json::{json, Value};
use slurmwatch_core::collect::gpu::derive::{card_state, throttle_state, CardState, ThrottleState};
use slurmwatch_core::collect::gpu::worker::{GpuWorker, GpuWorkerConfig, Opened};
use slurmwatch_core::collect::gpu::{wanted_cards, GpuCollector, GpuEnv, NoGpus};
use slurmwatch_core::sample::{GpuError, GpuSample, Source};
use slurmwatch_core::store::{JobMeta, Reader, Writer};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());
const GIB: u64 = 1 << 30;
/// A pid that is the job's in these tests; every other pid is a neighbour's.
const JOB_PID: u32 = 4242;

/// The fake built by cargo for this package: `target/<profile>/deps/libfake_nvml.so`.
fn fake_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    for p in [
        deps.join("libfake_nvml.so"),
        deps.join("../libfake_nvml.so"),
    ] {
        if p.exists() {
            return p;
        }
    }
    panic!("libfake_nvml.so not found beside {}", exe.display());
}

struct Scene {
    _guard: std::sync::MutexGuard<'static, ()>,
    dir: tempfile::TempDir,
}

impl Scene {
    fn new(state: Value) -> Scene {
        let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        std::env::set_var("FAKE_NVML_STATE", dir.path().join("state.json"));
        let s = Scene { _guard: guard, dir };
        s.set(state);
        s
    }

    /// Rewrites the state the way tests do between samples: a new file renamed over.
    fn set(&self, state: Value) {
        let tmp = self.dir.path().join("state.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&state).unwrap()).unwrap();
        std::fs::rename(&tmp, self.dir.path().join("state.json")).unwrap();
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("1.sqlite")
    }
}

fn card(i: u32) -> Value {
    json!({
        "uuid": format!("GPU-{i:08x}-aaaa-bbbb-cccc-0123456789ab"),
        "name": "NVIDIA A100-SXM4-80GB",
        "pci_bus_id": format!("00000000:{:02X}:00.0", 7 + i),
        "numa": i / 4, "switch": i / 2,
        "memory_total": 80 * GIB, "memory_used": 30 * GIB, "memory_reserved": GIB / 2,
        "utilization_gpu": 97, "utilization_memory": 41,
        "power_usage_mw": 398_000, "power_limit_mw": 400_000, "temperature": 71,
        "sm_clock": 1410, "sm_clock_max": 1785, "throttle_reasons": 4,
        "energy_mj": 123_456_789u64, "ecc_uncorrected_volatile": 0,
        "pcie_tx_kib_per_s": 1_200_000, "pcie_rx_kib_per_s": 0,
        "processes": [ { "pid": JOB_PID, "used_memory": 29 * GIB } ],
    })
}

fn node(cards: Vec<Value>) -> Value {
    json!({ "driver_version": "550.54.15", "devices": cards })
}

fn env_cvd(v: &str) -> GpuEnv {
    GpuEnv {
        cuda_visible_devices: Some(v.into()),
        ..GpuEnv::default()
    }
}

fn meta() -> JobMeta {
    JobMeta {
        job_id: 1,
        user: "u".into(),
        uid: 1000,
        node: "n1".into(),
        cluster: None,
        plugin_version: "test".into(),
        interval_seconds: 5,
        source: Source::CgroupV2,
        cores_allocated: Some(4),
        memory_allocated_bytes: None,
        started_unix_ms: 1_000_000,
        incarnation: None,
    }
}

/// Opens the collector for `env`, takes one reading per `states` entry (rewriting the
/// fake's state before each), stores everything, and returns the file.
fn record(scene: &Scene, env: &GpuEnv, states: &[Value]) -> PathBuf {
    let mut c = GpuCollector::open(&fake_lib(), &wanted_cards(env)).expect("cards open");
    let mut w = Writer::create(&scene.file(), &meta()).unwrap();
    let ids = w
        .register_gpus("batch", 1_000_000, &c.cards(), &c.topology())
        .unwrap();
    for (i, st) in states.iter().enumerate() {
        scene.set(st.clone());
        let samples = c.read(&mut |pid| pid == JOB_PID);
        for ((id, _), s) in ids.iter().zip(samples) {
            w.push_gpu(1_000_000 + 5000 * i as i64, *id, s);
        }
        w.flush().unwrap();
    }
    w.close().unwrap();
    scene.file()
}

/// The stored readings of each card, in cuda order.
fn stored(file: &Path) -> Vec<Vec<GpuSample>> {
    let r = Reader::open(file).unwrap();
    r.gpus()
        .unwrap()
        .iter()
        .map(|g| {
            r.gpu_samples(g.id)
                .unwrap()
                .into_iter()
                .map(|row| row.sample)
                .collect()
        })
        .collect()
}

#[test]
fn busy_healthy_card_at_power_limit() {
    let st = node(vec![card(0)]);
    let scene = Scene::new(st.clone());
    let file = record(&scene, &env_cvd("0"), &[st]);
    let r = Reader::open(&file).unwrap();
    let g = &r.gpus().unwrap()[0];
    assert_eq!(g.card.label(), "cuda:0");
    assert_eq!(g.card.nvml_index, 0);
    assert_eq!(g.card.pci_bus_id.as_deref(), Some("00000000:07:00.0"));
    assert_eq!(g.card.memory_total_bytes, Some(80 * GIB));
    assert_eq!(g.card.sm_clock_max_mhz, Some(1785));
    let s = &stored(&file)[0][0];
    assert_eq!(s.utilization_percent, Ok(97));
    assert_eq!(s.power_draw_milliwatts, Ok(398_000));
    assert_eq!(s.memory_used_bytes, Ok(30 * GIB));
    let p = s.processes.unwrap();
    assert_eq!((p.job_processes, p.job_memory_bytes), (1, 29 * GIB));
    assert_eq!(card_state(s), CardState::Active);
    assert_eq!(throttle_state(s), ThrottleState::AtPowerLimit);
    assert_eq!(s.energy_millijoules, Ok(123_456_789));
    assert_eq!(s.nvlink, Err(GpuError::NotSupported));
    // PCIe: a readable 0 stays 0 (an idle direction), never NULL.
    assert_eq!(s.pcie_tx_kib_per_s, Ok(1_200_000));
    assert_eq!(s.pcie_rx_kib_per_s, Ok(0));
    assert_eq!(s.xid_errors, Ok(vec![]));
    let conn = rusqlite::Connection::open(&file).unwrap();
    let got: (i64, Option<i64>, Option<String>, i64, Option<String>) = conn
        .query_row(
            "SELECT pcie_tx_bytes_per_second, pcie_rx_bytes_per_second, pcie_rx_error,
                    xid_events, xid_codes FROM gpu_readings",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    assert_eq!(got, (1_200_000 * 1024, Some(0), None, 0, None));
}

#[test]
fn pcie_throughput_unreadable_is_never_zero() {
    let mut c0 = card(0);
    c0["errors"] = json!({ "pcie_rx": "NOT_SUPPORTED" });
    let mut c1 = card(1);
    c1.as_object_mut().unwrap().remove("pcie_tx_kib_per_s");
    c1["errors"] = json!({ "pcie_rx": "GPU_IS_LOST" });
    let st = node(vec![c0, c1]);
    let scene = Scene::new(st.clone());
    let file = record(&scene, &env_cvd("0,1"), &[st]);
    let rows = stored(&file);
    assert_eq!(rows[0][0].pcie_tx_kib_per_s, Ok(1_200_000));
    assert_eq!(rows[0][0].pcie_rx_kib_per_s, Err(GpuError::NotSupported));
    assert_eq!(rows[1][0].pcie_tx_kib_per_s, Err(GpuError::NotSupported));
    assert_eq!(rows[1][0].pcie_rx_kib_per_s, Err(GpuError::GpuIsLost));
    let conn = rusqlite::Connection::open(&file).unwrap();
    let mut q = conn
        .prepare(
            "SELECT gpu, pcie_tx_bytes_per_second, pcie_tx_error, pcie_rx_bytes_per_second,
                    pcie_rx_error FROM gpu_readings ORDER BY gpu",
        )
        .unwrap();
    type Cells = (
        String,
        Option<i64>,
        Option<String>,
        Option<i64>,
        Option<String>,
    );
    let got: Vec<Cells> = q
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        got,
        vec![
            (
                "cuda:0".into(),
                Some(1_200_000 * 1024),
                None,
                None,
                Some("NOT_SUPPORTED".into())
            ),
            (
                "cuda:1".into(),
                None,
                Some("NOT_SUPPORTED".into()),
                None,
                Some("GPU_IS_LOST".into())
            ),
        ]
    );
}

#[test]
fn xid_events_are_recorded_once_per_card_at_the_reading_that_saw_them() {
    let with = |a: Value, b: Value| {
        let (mut c0, mut c1) = (card(0), card(1));
        c0["xid_events"] = a;
        c1["xid_events"] = b;
        node(vec![c0, c1])
    };
    let states = [
        with(json!([]), json!([])),
        with(json!([]), json!([48])),
        // The same list again: nothing new to deliver.
        with(json!([]), json!([48])),
        with(json!([13, 31]), json!([48, 63])),
        with(json!([13, 31]), json!([48, 63])),
    ];
    let scene = Scene::new(states[0].clone());
    let file = record(&scene, &env_cvd("0,1"), &states);
    let rows = stored(&file);
    let xids = |card: usize| -> Vec<Vec<u64>> {
        rows[card]
            .iter()
            .map(|s| s.xid_errors.clone().unwrap())
            .collect()
    };
    let none: Vec<u64> = vec![];
    assert_eq!(
        xids(0),
        vec![
            none.clone(),
            none.clone(),
            none.clone(),
            vec![13, 31],
            none.clone()
        ]
    );
    assert_eq!(
        xids(1),
        vec![none.clone(), vec![48], none.clone(), vec![63], none.clone()]
    );
    // The live view's tail decodes the same events.
    let r = Reader::open(&file).unwrap();
    let g = r.gpus().unwrap();
    let tail: Vec<_> = r
        .gpu_last(g[0].id, 2)
        .unwrap()
        .into_iter()
        .map(|row| row.sample.xid_errors.unwrap())
        .collect();
    assert_eq!(tail, vec![vec![13, 31], none.clone()]);
    // In SQL: the table of events and the view's count and codes.
    let conn = rusqlite::Connection::open(&file).unwrap();
    let events: Vec<(i64, i64, i64)> = conn
        .prepare("SELECT t_unix_ms, gpu, xid FROM gpu_xid ORDER BY rowid")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let (id0, id1) = (g[0].id, g[1].id);
    assert_eq!(
        events,
        vec![
            (1_005_000, id1, 48),
            (1_015_000, id0, 13),
            (1_015_000, id0, 31),
            (1_015_000, id1, 63)
        ]
    );
    let view: Vec<(i64, String, i64, Option<String>)> = conn
        .prepare(
            "SELECT t_unix_ms, gpu, xid_events, xid_codes FROM gpu_readings
             WHERE xid_events > 0 ORDER BY t_unix_ms, gpu",
        )
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        view,
        vec![
            (1_005_000, "cuda:1".into(), 1, Some("48".into())),
            (1_015_000, "cuda:0".into(), 2, Some("13,31".into())),
            (1_015_000, "cuda:1".into(), 1, Some("63".into())),
        ]
    );
}

#[test]
fn xid_events_unsupported_where_scripted() {
    // One card cannot register its Xid events: that card's reading is NOT_SUPPORTED,
    // the other card's events are still recorded.
    let mut c0 = card(0);
    c0["errors"] = json!({ "register_events": "NOT_SUPPORTED" });
    c0["xid_events"] = json!([79]);
    let mut c1 = card(1);
    c1["xid_events"] = json!([94]);
    let st = node(vec![c0, c1]);
    let scene = Scene::new(st.clone());
    let file = record(&scene, &env_cvd("0,1"), &[st]);
    let rows = stored(&file);
    assert_eq!(rows[0][0].xid_errors, Err(GpuError::NotSupported));
    assert_eq!(rows[1][0].xid_errors, Ok(vec![94]));
    let conn = rusqlite::Connection::open(&file).unwrap();
    let (n, e): (Option<i64>, Option<String>) = conn
        .query_row(
            "SELECT xid_events, xid_error FROM gpu_readings WHERE gpu = 'cuda:0'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((n, e.as_deref()), (None, Some("NOT_SUPPORTED")));

    // No event sets on this platform at all: every card's Xid reading is NOT_SUPPORTED;
    // every other reading is unaffected.
    let mut st = node(vec![card(0)]);
    st["errors"] = json!({ "event_set_create": "NOT_SUPPORTED" });
    scene.set(st.clone());
    let mut c = GpuCollector::open(&fake_lib(), &wanted_cards(&env_cvd("0"))).unwrap();
    let s = &c.read(&mut |_| true)[0];
    assert_eq!(s.xid_errors, Err(GpuError::NotSupported));
    assert_eq!(s.utilization_percent, Ok(97));

    // A failing wait marks the reading unreadable (never "no events").
    let mut st = node(vec![card(0)]);
    scene.set(st.clone());
    let mut c = GpuCollector::open(&fake_lib(), &wanted_cards(&env_cvd("0"))).unwrap();
    st["errors"] = json!({ "event_wait": "UNKNOWN" });
    scene.set(st);
    assert_eq!(c.read(&mut |_| true)[0].xid_errors, Err(GpuError::Unknown));
}

#[test]
fn hardware_slowdown_at_a_fraction_of_the_limit_is_broken() {
    let mut c = card(0);
    c["sm_clock"] = json!(385);
    c["power_usage_mw"] = json!(163_000);
    c["temperature"] = json!(52);
    c["throttle_reasons"] = json!(8);
    let st = node(vec![c]);
    let scene = Scene::new(st.clone());
    let file = record(&scene, &env_cvd("0"), &[st]);
    let s = &stored(&file)[0][0];
    assert_eq!(s.sm_clock_mhz, Ok(385));
    assert_eq!(s.temperature_celsius, Ok(52));
    assert_eq!(throttle_state(s), ThrottleState::HardwareSlowdownBroken);
    // The view decodes the same in SQL.
    let conn = rusqlite::Connection::open(&file).unwrap();
    let (w, mhz, max): (f64, i64, i64) = conn
        .query_row(
            "SELECT power_draw_watts, sm_clock_mhz, sm_clock_max_mhz FROM gpu_readings",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((w, mhz, max), (163.0, 385, 1785));
}

#[test]
fn idle_card_holding_40_gb() {
    let mut c = card(0);
    c["utilization_gpu"] = json!(0);
    c["throttle_reasons"] = json!(1);
    c["power_usage_mw"] = json!(61_000);
    c["processes"] = json!([{ "pid": JOB_PID, "used_memory": 40 * GIB }]);
    let st = node(vec![c]);
    let scene = Scene::new(st.clone());
    let s = &stored(&record(&scene, &env_cvd("0"), &[st]))[0][0];
    assert_eq!(card_state(s), CardState::IdleHoldingMemory);
    assert_eq!(throttle_state(s), ThrottleState::None);
    assert_eq!(s.processes.unwrap().job_memory_bytes, 40 * GIB);
}

#[test]
fn shared_card_is_not_credited_to_the_job() {
    let mut c = card(0);
    c["memory_used"] = json!(64 * GIB);
    c["processes"] = json!([
        { "pid": JOB_PID, "used_memory": 2 * GIB },
        { "pid": 777, "used_memory": 60 * GIB },
    ]);
    let st = node(vec![c]);
    let scene = Scene::new(st.clone());
    let s = &stored(&record(&scene, &env_cvd("0"), &[st]))[0][0];
    let p = s.processes.unwrap();
    assert_eq!((p.job_processes, p.job_memory_bytes), (1, 2 * GIB));
    assert_eq!((p.other_processes, p.other_memory_bytes), (1, 60 * GIB));
    assert_eq!(card_state(s), CardState::SharedNotOurs);
}

#[test]
fn unreadable_power_is_stored_as_unreadable_not_zero() {
    let mut c = card(0);
    c["errors"] = json!({ "power": "NOT_SUPPORTED" });
    let st = node(vec![c]);
    let scene = Scene::new(st.clone());
    let file = record(&scene, &env_cvd("0"), &[st]);
    let s = &stored(&file)[0][0];
    assert_eq!(s.power_draw_milliwatts, Err(GpuError::NotSupported));
    assert_eq!(s.power_limit_milliwatts, Ok(400_000));
    let conn = rusqlite::Connection::open(&file).unwrap();
    let (w, e): (Option<f64>, Option<String>) = conn
        .query_row(
            "SELECT power_draw_watts, power_draw_error FROM gpu_readings",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((w, e.as_deref()), (None, Some("NOT_SUPPORTED")));
}

#[test]
fn card_lost_mid_job() {
    let ok = node(vec![card(0)]);
    let mut lost = card(0);
    lost["lost"] = json!(true);
    // How a card announces it fell off the bus: Xid 79, kept beside the lost readings.
    lost["xid_events"] = json!([79]);
    let scene = Scene::new(ok.clone());
    let rows = &stored(&record(&scene, &env_cvd("0"), &[ok, node(vec![lost])]))[0];
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].utilization_percent, Ok(97));
    assert_eq!(
        rows[1],
        GpuSample {
            xid_errors: Ok(vec![79]),
            ..GpuSample::all_failed(GpuError::GpuIsLost)
        }
    );
    assert_eq!(card_state(&rows[1]), CardState::Unknown);
}

#[test]
fn nvml_absent_or_driver_not_loaded_means_no_gpu_section() {
    let scene = Scene::new(node(vec![card(0)]));
    let wanted = wanted_cards(&env_cvd("0"));
    match GpuCollector::open(Path::new("/nonexistent/libnvidia-ml.so.1"), &wanted) {
        Err(NoGpus::NoLibrary(_)) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened a missing library"),
    }
    scene.set(json!({ "init_error": "DRIVER_NOT_LOADED", "devices": [] }));
    assert!(matches!(
        GpuCollector::open(&fake_lib(), &wanted),
        Err(NoGpus::Init(GpuError::DriverNotLoaded))
    ));
    // A job that holds no card records none of the node's cards.
    scene.set(node(vec![card(0)]));
    assert!(matches!(
        GpuCollector::open(&fake_lib(), &wanted_cards(&GpuEnv::default())),
        Err(NoGpus::NoneRequested)
    ));
    // And a file without GPUs reads as "no GPU section".
    let w = Writer::create(&scene.file(), &meta()).unwrap();
    w.close().unwrap();
    assert!(Reader::open(&scene.file())
        .unwrap()
        .gpus()
        .unwrap()
        .is_empty());
}

#[test]
fn utilization_unsupported_like_a_mig_slice() {
    let mut c = card(0);
    c.as_object_mut().unwrap().remove("utilization_gpu");
    c.as_object_mut().unwrap().remove("utilization_memory");
    let st = node(vec![c]);
    let scene = Scene::new(st.clone());
    let file = record(&scene, &env_cvd("0"), &[st]);
    let s = &stored(&file)[0][0];
    assert_eq!(s.utilization_percent, Err(GpuError::NotSupported));
    assert_eq!(s.memory_utilization_percent, Err(GpuError::NotSupported));
    assert_eq!(s.memory_used_bytes, Ok(30 * GIB));
    assert_eq!(card_state(s), CardState::Unknown);
}

#[test]
fn cuda_visible_devices_2_3_are_cuda_0_and_1() {
    let st = node((0..4).map(card).collect());
    let scene = Scene::new(st.clone());
    let file = record(&scene, &env_cvd("2,3"), &[st]);
    let r = Reader::open(&file).unwrap();
    let g = r.gpus().unwrap();
    let got: Vec<(String, u32, String)> = g
        .iter()
        .map(|g| (g.card.label(), g.card.nvml_index, g.card.uuid.clone()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "cuda:0".into(),
                2,
                "GPU-00000002-aaaa-bbbb-cccc-0123456789ab".into()
            ),
            (
                "cuda:1".into(),
                3,
                "GPU-00000003-aaaa-bbbb-cccc-0123456789ab".into()
            ),
        ]
    );
    // Same cards named by UUID, in reverse order.
    let env = env_cvd(
        "GPU-00000003-aaaa-bbbb-cccc-0123456789ab,GPU-00000002-AAAA-bbbb-cccc-0123456789ab",
    );
    let c = GpuCollector::open(&fake_lib(), &wanted_cards(&env)).unwrap();
    let got: Vec<(String, u32)> = c
        .cards()
        .iter()
        .map(|c| (c.label(), c.nvml_index))
        .collect();
    assert_eq!(got, vec![("cuda:0".into(), 3), ("cuda:1".into(), 2)]);
    // PCIe only here: the pair behind one switch.
    assert_eq!(r.gpu_links().unwrap()[0].level, "single");
}

#[test]
fn eight_card_node_with_nvlink_counts_every_link() {
    let bus = |i: u32| format!("00000000:{:02X}:00.0", 7 + i);
    let cards = |k: u64| -> Vec<Value> {
        (0..8u32)
            .map(|i| {
                let mut c = card(i);
                c["nvswitch"] = json!(true);
                // 12 links: 0..11, each carrying a different amount, link 11 the most.
                c["nvlinks"] = json!((0..12u64)
                    .map(|l| json!({
                        "active": true,
                        "remote_pci_bus_id": format!("00000000:{:02X}:00.0", 0xA0 + l),
                        "tx_kib": k * (l + 1) * 1000, "rx_kib": k * (l + 1) * 10,
                    }))
                    .collect::<Vec<_>>());
                c["processes"] = json!([{ "pid": JOB_PID, "used_memory": 10 * GIB }]);
                c["pci_bus_id"] = json!(bus(i));
                c
            })
            .collect()
    };
    let scene = Scene::new(node(cards(1)));
    let file = record(
        &scene,
        &env_cvd("0,1,2,3,4,5,6,7"),
        &[node(cards(1)), node(cards(2))],
    );
    let r = Reader::open(&file).unwrap();
    let g = r.gpus().unwrap();
    assert_eq!(g.len(), 8);
    assert!(g.iter().all(|g| g.card.nvlink_links == Some(12)));
    let links = r.gpu_links().unwrap();
    assert_eq!(links.len(), 28);
    assert!(links.iter().all(|l| l.level == "nvlink"), "{links:?}");
    let rows = stored(&file);
    // Sum over links 0..11 of (l+1)*1000 = 78,000 KiB; link 0 alone would be 1,000.
    for card_rows in &rows {
        let n0 = card_rows[0].nvlink.unwrap();
        let n1 = card_rows[1].nvlink.unwrap();
        assert_eq!((n0.tx_kib, n0.rx_kib), (78_000, 780));
        assert_eq!(n1.tx_kib - n0.tx_kib, 78_000);
    }
}

#[test]
fn worker_bounds_init_and_hung_reads() {
    let mut c = card(0);
    c["delay_ms"] = json!(600);
    // Collected by the reading that times out below.
    c["xid_events"] = json!([79]);
    let scene = Scene::new(json!({ "init_delay_ms": 300, "devices": [c] }));
    let mut w = GpuWorker::start(GpuWorkerConfig {
        lib_path: fake_lib(),
        wanted: wanted_cards(&env_cvd("0")),
        allocated: Some(vec![0]),
        proc_root: PathBuf::from("/proc"),
        job_id: 1,
        ledger_since_unix_ms: None,
    });
    // Init takes 300 ms: the first poll returns at once with Pending.
    assert!(matches!(w.poll_open(Duration::ZERO), Opened::Pending));
    let mut opened = Opened::Pending;
    for _ in 0..50 {
        opened = w.poll_open(Duration::from_millis(100));
        if !matches!(opened, Opened::Pending) {
            break;
        }
    }
    assert!(matches!(opened, Opened::Ready { .. }), "{opened:?}");
    let opened_ms = slurmwatch_core::sys::now_unix_ms();
    // The worker takes the cards' base reading at once (600 ms on this card): asking for it
    // meanwhile never waits.
    let t = std::time::Instant::now();
    assert!(w.take_base(Duration::ZERO, None).is_none());
    // Each read of the card takes 600 ms: a 100 ms budget records TIMEOUT, not a stall.
    let s = w.read(&[], Duration::from_millis(100)).unwrap();
    assert!(t.elapsed() < Duration::from_millis(400));
    assert_eq!(s[0], GpuSample::all_failed(GpuError::Timeout));
    // A second event, before that late reading drains the card's events (it starts when the
    // base, which drained the first, is done).
    c["xid_events"] = json!([79, 80]);
    scene.set(json!({ "devices": [c] }));
    std::thread::sleep(Duration::from_millis(1200));
    // The event the late reply collected is not lost: it comes with the next reading.
    let mut c = card(0);
    c["xid_events"] = json!([79, 80]);
    scene.set(json!({ "devices": [c] }));
    let s = w.read(&[], Duration::from_secs(2)).unwrap();
    assert_eq!(s[0].utilization_percent, Ok(97));
    assert_eq!(s[0].xid_errors, Ok(vec![80]));
    // The base came meanwhile, stamped when it was taken, with the event it drained; once.
    let (t_base, base) = w.take_base(Duration::ZERO, None).expect("the base reading");
    assert!(
        (opened_ms - 50..=opened_ms + 100).contains(&t_base),
        "{t_base} vs {opened_ms}"
    );
    assert_eq!(base[0].utilization_percent, Ok(97));
    assert_eq!(base[0].xid_errors, Ok(vec![79]));
    assert!(w.take_base(Duration::from_millis(100), None).is_none());
    drop(scene);
}

/// A MIG slice named by its UUID (`CUDA_VISIBLE_DEVICES=MIG-…`, as Slurm's MIG GRES sets it):
/// recorded as the job's card with its own memory and processes, on its parent's NVML index
/// and PCI bus; the slice beside it (another job's) is not read, and the card's power,
/// shared by both slices, is not credited to it.
#[test]
fn a_mig_slice_is_recorded_by_its_uuid() {
    const MIG_A: &str = "MIG-11111111-2222-3333-4444-555555555555";
    const MIG_B: &str = "MIG-66666666-7777-8888-9999-000000000000";
    let mut c = card(1);
    c["mig_devices"] = json!([
        {
            "uuid": MIG_A, "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
            "memory_total": 40 * GIB, "memory_used": 12 * GIB,
            "temperature": 64, "sm_clock": 1410,
            "processes": [ { "pid": JOB_PID, "used_memory": 11 * GIB } ],
        },
        {
            "uuid": MIG_B, "name": "NVIDIA A100-SXM4-80GB MIG 3g.40gb",
            "memory_total": 40 * GIB, "memory_used": 30 * GIB,
            "processes": [ { "pid": 9999, "used_memory": 30 * GIB } ],
        },
    ]);
    let st = node(vec![card(0), c]);
    let scene = Scene::new(st.clone());
    let file = record(&scene, &env_cvd(MIG_A), &[st]);
    let r = Reader::open(&file).unwrap();
    let g = r.gpus().unwrap();
    assert_eq!(g.len(), 1, "only the slice the job holds");
    let card = &g[0].card;
    assert_eq!(card.label(), "cuda:0");
    assert_eq!(card.uuid, MIG_A);
    assert_eq!(card.nvml_index, 1, "the parent's index");
    assert_eq!(card.pci_bus_id.as_deref(), Some("00000000:08:00.0"));
    assert_eq!(card.memory_total_bytes, Some(40 * GIB));
    assert_eq!(
        card.power_limit_watts, None,
        "the card's limit is not the slice's"
    );
    let s = &stored(&file)[0][0];
    assert_eq!(s.memory_used_bytes, Ok(12 * GIB));
    assert_eq!(s.utilization_percent, Err(GpuError::NotSupported));
    assert_eq!(s.power_draw_milliwatts, Err(GpuError::NotSupported));
    assert_eq!(s.temperature_celsius, Ok(64));
    let p = s.processes.unwrap();
    assert_eq!((p.job_processes, p.job_memory_bytes), (1, 11 * GIB));
    assert_eq!((p.other_processes, p.other_memory_bytes), (0, 0));
    assert_eq!(
        card_state(s),
        CardState::Unknown,
        "no utilization, no verdict"
    );
    // A MIG UUID that no card has: no GPU section, as for any unmatched card.
    let none = GpuCollector::open(
        &fake_lib(),
        &wanted_cards(&env_cvd("MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")),
    );
    assert!(matches!(none, Err(NoGpus::NoMatch)), "{:?}", none.err());
}

/// The job's environment only narrows Slurm's allocation: a job that names every card of the
/// node gets the allocated ones; a job without an allocation gets none, even by UUID.
#[test]
fn only_allocated_cards_are_opened_whatever_the_environment_names() {
    let _scene = Scene::new(json!({ "devices": [card(0), card(1), card(2), card(3)] }));
    let all = wanted_cards(&env_cvd("0,1,2,3"));
    let c = GpuCollector::open_allocated(&fake_lib(), &all, Some(&[1, 2])).unwrap();
    let idx: Vec<u32> = c.cards().iter().map(|k| k.nvml_index).collect();
    assert_eq!(idx, [1, 2]);
    assert!(matches!(
        GpuCollector::open_allocated(&fake_lib(), &all, Some(&[])),
        Err(NoGpus::NoneRequested)
    ));
    let uuid = c.cards()[0].uuid.clone();
    drop(c);
    let by_uuid = wanted_cards(&GpuEnv {
        cuda_visible_devices: Some(uuid),
        ..GpuEnv::default()
    });
    assert!(GpuCollector::open_allocated(&fake_lib(), &by_uuid, Some(&[])).is_err());
    // Allocated card 3 only: the UUID of card 1 selects nothing.
    assert!(matches!(
        GpuCollector::open_allocated(&fake_lib(), &by_uuid, Some(&[3])),
        Err(NoGpus::NoMatch)
    ));
}

// ---- The exact ledger's counters: violation time, utilization samples, GPM ----

fn open_nvml() -> nvml_wrapper::Nvml {
    nvml_wrapper::Nvml::builder()
        .lib_path(fake_lib().as_os_str())
        .init()
        .unwrap()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn hopper(i: u32) -> Value {
    let mut c = card(i);
    c["name"] = json!("NVIDIA H100 80GB HBM3");
    c
}

/// Per limiter, NVML's cumulative ns with a µs reference timestamp; a window grows in real
/// time; a limiter the card does not script is NOT_SUPPORTED, never 0.
#[test]
fn violation_time_per_limiter_in_ns() {
    use nvml_wrapper::enum_wrappers::device::PerformancePolicy as P;
    use nvml_wrapper::error::NvmlError;
    let now = now_ms();
    let mut c = card(0);
    c["violations_ns"] = json!({ "power": 7_000, "thermal": 0 });
    c["violation_windows"] = json!({
        "sync_boost": [[now - 20_000, now - 10_000]],
        "board_limit": [[now - 2_000, null]],
    });
    let _scene = Scene::new(node(vec![c]));
    let nvml = open_nvml();
    let d = nvml.device_by_index(0).unwrap();
    let v = d.violation_status(P::Power).unwrap();
    assert_eq!(v.violation_time, 7_000);
    let now_us = now * 1000;
    assert!(v.reference_time >= now_us && v.reference_time < now_us + 5_000_000);
    assert_eq!(d.violation_status(P::Thermal).unwrap().violation_time, 0);
    assert_eq!(
        d.violation_status(P::SyncBoost).unwrap().violation_time,
        10_000_000_000
    );
    let a = d.violation_status(P::BoardLimit).unwrap().violation_time;
    assert!(a >= 2_000_000_000, "{a}");
    std::thread::sleep(Duration::from_millis(20));
    let b = d.violation_status(P::BoardLimit).unwrap().violation_time;
    assert!(
        b >= a + 10_000_000,
        "an open window grows in real time: {a} then {b}"
    );
    for p in [
        P::LowUtilization,
        P::Reliability,
        P::TotalAppClocks,
        P::TotalBaseClocks,
    ] {
        assert!(
            matches!(d.violation_status(p), Err(NvmlError::NotSupported)),
            "{p:?}"
        );
    }
    // nvmlPerfPolicyType_t has no value 7.
    let sym = nvml.lib().nvmlDeviceGetViolationStatus.as_ref().unwrap();
    let mut out: nvml_wrapper_sys::bindings::nvmlViolationTime_t = unsafe { std::mem::zeroed() };
    assert_eq!(
        unsafe { sym(d.handle(), 7, &mut out) },
        fake_nvml::INVALID_ARGUMENT
    );
}

/// NVML's samples protocol: NULL asks the count of samples newer than the timestamp; a
/// smaller buffer gets the oldest of them; none newer is NOT_FOUND.
#[test]
fn utilization_samples_ring_protocol() {
    use nvml_wrapper::enum_wrappers::device::Sampling;
    use nvml_wrapper::enums::device::SampleValue;
    use nvml_wrapper::error::NvmlError;
    let mut c = card(0);
    c["utilization_samples"] = json!([[1_000_100, 50], [1_000_200, 0], [1_000_300, 0]]);
    let _scene = Scene::new(node(vec![c, card(1)]));
    let nvml = open_nvml();
    let d = nvml.device_by_index(0).unwrap();
    let all = d.samples(Sampling::GpuUtilization, None).unwrap();
    let got: Vec<_> = all.iter().map(|s| (s.timestamp, s.value.clone())).collect();
    assert_eq!(
        got,
        [
            (1_000_100, SampleValue::U32(50)),
            (1_000_200, SampleValue::U32(0)),
            (1_000_300, SampleValue::U32(0))
        ]
    );
    assert_eq!(
        d.samples(Sampling::GpuUtilization, 1_000_100)
            .unwrap()
            .len(),
        2
    );
    assert!(matches!(
        d.samples(Sampling::GpuUtilization, 1_000_300),
        Err(NvmlError::NotFound)
    ));
    assert!(matches!(
        d.samples(Sampling::Power, None),
        Err(NvmlError::NotSupported)
    ));
    let other = nvml.device_by_index(1).unwrap();
    assert!(matches!(
        other.samples(Sampling::GpuUtilization, None),
        Err(NvmlError::NotSupported)
    ));

    let sym = nvml.lib().nvmlDeviceGetSamples.as_ref().unwrap();
    let (mut ty, mut n) = (99u32, 0u32);
    let rc = unsafe {
        sym(
            d.handle(),
            1,
            1_000_100,
            &mut ty,
            &mut n,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(
        (rc, n, ty),
        (fake_nvml::SUCCESS, 2, 1),
        "count, NVML_VALUE_TYPE_UNSIGNED_INT"
    );
    let mut buf: [nvml_wrapper_sys::bindings::nvmlSample_t; 2] = unsafe { std::mem::zeroed() };
    n = 1;
    let rc = unsafe { sym(d.handle(), 1, 1_000_100, &mut ty, &mut n, buf.as_mut_ptr()) };
    assert_eq!(
        (rc, n, buf[0].timeStamp),
        (fake_nvml::SUCCESS, 1, 1_000_200)
    );
    n = 0;
    let rc = unsafe { sym(d.handle(), 1, 0, &mut ty, &mut n, buf.as_mut_ptr()) };
    assert_eq!(rc, fake_nvml::INVALID_ARGUMENT);
}

/// GPM on a Hopper card, from two samples; an Ampere card says it has none; a wrong
/// struct version or samples out of order are refused as NVML refuses them.
#[test]
fn gpm_on_hopper_not_on_ampere() {
    use nvml_wrapper::enums::gpm::GpmMetricId as M;
    use nvml_wrapper::error::NvmlError;
    use nvml_wrapper::gpm::gpm_metrics_get;
    let mut h = hopper(0);
    h["gpm"] = json!({ "sm_active": 62.5, "sm_occupancy": 30.0, "tensor_active": 45.0 });
    let _scene = Scene::new(node(vec![h, card(1)]));
    let nvml = open_nvml();
    let (d, a100) = (
        nvml.device_by_index(0).unwrap(),
        nvml.device_by_index(1).unwrap(),
    );
    assert!(d.gpm_support().unwrap());
    assert!(!a100.gpm_support().unwrap());
    assert!(matches!(a100.gpm_sample(), Err(NvmlError::NotSupported)));

    let (s1, s2) = (d.gpm_sample().unwrap(), d.gpm_sample().unwrap());
    let ids = [M::SmUtil, M::SmOccupancy, M::AnyTensorUtil, M::DramBwUtil];
    let got = gpm_metrics_get(&nvml, &s1, &s2, &ids).unwrap();
    let values: Vec<_> = got
        .iter()
        .map(|r| r.as_ref().map(|m| m.value).ok())
        .collect();
    assert_eq!(values, [Some(62.5), Some(30.0), Some(45.0), None]);
    assert!(matches!(got[3], Err(NvmlError::NotSupported)));
    assert_eq!(got[0].as_ref().unwrap().metric_info.unit, "%");
    // The second sample must be the later one.
    assert!(matches!(
        gpm_metrics_get(&nvml, &s2, &s1, &ids),
        Err(NvmlError::InvalidArg)
    ));

    let sym = nvml.lib().nvmlGpmMetricsGet.as_ref().unwrap();
    let mut req: nvml_wrapper_sys::bindings::nvmlGpmMetricsGet_t = unsafe { std::mem::zeroed() };
    req.version = 2;
    req.numMetrics = 1;
    unsafe {
        req.sample1 = s1.handle();
        req.sample2 = s2.handle();
    }
    assert_eq!(
        unsafe { sym(&mut req) },
        fake_nvml::ARGUMENT_VERSION_MISMATCH
    );
}

/// The core's ledger reading: NVML's counters per limiter (None where unsupported), the
/// idle time since the last read from the samples ring, GPM from the second read on.
#[test]
fn ledger_reads_counters_idle_time_and_gpm() {
    use slurmwatch_core::collect::gpu::ledger::{
        limiter_names, read_ledger, GpmUnavailable, LedgerCursor,
    };
    // Aligned to whole seconds, so the 100 ms periods split exactly: busy, idle 1 s, busy.
    let t0 = now_ms() / 1000 * 1000 - 3000;
    let timeline = json!({ "points": [[t0 - 1000, 90], [t0 + 1000, 0], [t0 + 2000, 80]],
        "period_us": 100_000 });
    let mut h = hopper(0);
    h["violations_ns"] = json!({ "power": 1_500_000_000u64, "total_app_clocks": 1_500_000_000u64 });
    h["utilization_timeline"] = timeline;
    h["gpm"] = json!({ "sm_active": 10.0 });
    let scene = Scene::new(node(vec![h.clone(), card(1)]));
    let nvml = open_nvml();
    let (d, a100) = (
        nvml.device_by_index(0).unwrap(),
        nvml.device_by_index(1).unwrap(),
    );
    let (mut ch, mut ca) = (LedgerCursor::new(t0 * 1000), LedgerCursor::new(t0 * 1000));

    let r = read_ledger(&d, &mut ch);
    assert_eq!(limiter_names()[0], "power");
    assert_eq!(r.violation_ns[0], Ok(1_500_000_000));
    assert_eq!(r.violation_ns[6], Ok(1_500_000_000));
    assert!(
        r.violation_ns[1..6].iter().all(Result::is_err),
        "{:?}",
        r.violation_ns
    );
    let idle = r.idle.unwrap();
    assert_eq!(idle.no_work_us, 1_000_000);
    assert!(
        idle.covered_us >= 3_000_000 && idle.covered_us < 8_000_000,
        "{idle:?}"
    );
    assert_eq!(r.gpm, Err(GpmUnavailable::FirstSample));

    let r = read_ledger(&a100, &mut ca);
    assert_eq!(
        r.violation_ns,
        [Err(GpuError::NotSupported); 8],
        "unsupported is NVML's error, never 0"
    );
    assert_eq!(r.idle, Err(GpuError::NotSupported));
    assert_eq!(r.gpm, Err(GpmUnavailable::NotThisCard));
    assert_eq!(r.gpm.unwrap_err().to_string(), "not available on this card");

    h["gpm"] = json!({ "sm_active": 62.5, "dram_bw_util": 71.0 });
    scene.set(node(vec![h, card(1)]));
    let r = read_ledger(&d, &mut ch);
    let g = r.gpm.unwrap();
    assert_eq!(
        (g.sm_active_percent, g.dram_bw_util_percent),
        (Some(62.5), Some(71.0))
    );
    assert_eq!(g.sm_occupancy_percent, None);
    // Busy since: nothing idle in the new interval (or no new sample yet).
    let idle = r.idle.unwrap();
    assert_eq!(idle.no_work_us, 0);
    assert!(idle.covered_us < 1_000_000, "{idle:?}");
    ch.release(&nvml);
    ca.release(&nvml);
}

/// The collector's ledger through the file: a power-capping window of known length between
/// two readings and an idle stretch of the card's utilization timeline are recorded to
/// within the fake's sample period (here exactly: the stretch is whole periods); GPM on an
/// H100 from its second reading, "not available on this card" on an A100.
#[test]
fn collector_records_the_ledger_exactly() {
    use slurmwatch_core::analysis::card_ledger;
    use slurmwatch_core::sample::GpmUnavailable;
    // On a period boundary: the fake's samples fall on multiples of its period.
    let t0 = now_ms() / 100 * 100;
    let mut h = hopper(0);
    h["violations_ns"] = json!({ "power": 5_000_000_000u64 });
    h["violation_windows"] = json!({ "power": [[t0 + 1600, t0 + 2300]] });
    // 100 ms periods: no kernel from t0 + 1600 to t0 + 2600, ten whole periods.
    h["utilization_timeline"] = json!({ "points": [[t0 - 1000, 90], [t0 + 1600, 0],
        [t0 + 2600, 85]], "period_us": 100_000 });
    h["gpm"] = json!({ "sm_active": 62.5, "sm_occupancy": 30.0, "tensor_active": 45.0,
        "dram_bw_util": 20.0 });
    let scene = Scene::new(node(vec![h, card(1)]));
    let mut c = GpuCollector::open(&fake_lib(), &wanted_cards(&env_cvd("0,1"))).unwrap();
    c.count_ledger_from(t0 * 1000);
    let mut w = Writer::create(&scene.file(), &meta()).unwrap();
    let ids = w
        .register_gpus("batch", 1_000_000, &c.cards(), &c.topology())
        .unwrap();
    let mut read = |w: &mut Writer| {
        let t = now_ms() as i64;
        for ((id, _), s) in ids.iter().zip(c.read(&mut |pid| pid == JOB_PID)) {
            w.push_gpu(t, *id, s);
        }
        t
    };
    let first = read(&mut w);
    assert!(
        first < t0 as i64 + 1600,
        "the first reading precedes both windows"
    );
    std::thread::sleep(Duration::from_millis((t0 + 3000).saturating_sub(now_ms())));
    read(&mut w);
    read(&mut w);
    w.close().unwrap();
    drop(c);

    let r = Reader::open(&scene.file()).unwrap();
    let gpus = r.gpus().unwrap();
    let h100 = r.gpu_samples(gpus[0].id).unwrap();
    let l = card_ledger(&h100, i64::MIN, i64::MAX).unwrap();
    assert_eq!(l.limiter_seconds[0], Some(0.7), "{l:?}");
    assert_eq!(
        l.limiter_seconds[1], None,
        "a limiter the card lacks is None, never 0"
    );
    assert_eq!(l.no_work_seconds, Some(1.0), "{l:?}");
    let covered = l.no_work_covered_seconds.unwrap();
    assert!((2.8..=3.3).contains(&covered), "{l:?}");
    assert_eq!(h100[0].sample.ledger.gpm, Err(GpmUnavailable::FirstSample));
    let g = l.gpm.unwrap();
    assert_eq!(
        (g.sm_active_percent, g.tensor_active_percent),
        (Some(62.5), Some(45.0))
    );

    let a100 = r.gpu_samples(gpus[1].id).unwrap();
    assert!(a100
        .iter()
        .all(|row| row.sample.ledger.gpm == Err(GpmUnavailable::NotThisCard)));
    let l = card_ledger(&a100, i64::MIN, i64::MAX).unwrap();
    assert_eq!(
        (l.gpm, l.gpm_unavailable),
        (None, Some(GpmUnavailable::NotThisCard))
    );
    assert_eq!(
        l.no_work_seconds, None,
        "no samples ring scripted: unreadable"
    );

    // The epilog's summary keeps each card's ledger, and the report's ledger sums them.
    let cards = slurmwatch_core::analysis::summary::gpu_summaries(&r).unwrap();
    let t = cards[0].ledger.as_ref().expect("the H100's ledger");
    assert_eq!(t.held_seconds.get("power"), Some(&0.7), "{t:?}");
    assert!(!t.held_seconds.contains_key("thermal"), "{t:?}");
    assert_eq!(t.no_work_seconds, Some(1.0));
    let a = cards[1].ledger.as_ref().expect("the A100's ledger");
    assert_eq!(
        a.gpm_unavailable.as_deref(),
        Some("not available on this card")
    );
    let whole =
        slurmwatch_core::analysis::ledger::build(&slurmwatch_core::analysis::ledger::Inputs {
            gpus: &cards,
            ..Default::default()
        });
    assert_eq!(whole.gpu_held_seconds.get("power"), Some(&0.7));
    assert_eq!(
        whole.gpu_no_work_seconds,
        Some(1.0),
        "the A100 had no samples ring"
    );
    assert_eq!(whole.gpus.len(), 2);
}
