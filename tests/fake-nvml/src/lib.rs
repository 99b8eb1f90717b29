//! A fake `libnvidia-ml.so.1` for tests: exports the NVML C functions slurmwatch's collector
//! (through nvml-wrapper 0.13) calls, with NVML's return codes and struct layouts, and serves
//! readings from a JSON state file that tests rewrite between samples.
//!
//! State file: `$FAKE_NVML_STATE`, default `/tmp/slurmwatch-fake-nvml/state.json`; re-read
//! whenever it changes (tests write a temporary file and rename it over). Shape:
//!
//! ```json
//! { "driver_version": "550.54.15", "init_error": null, "init_delay_ms": 0,
//!   "devices": [ { "uuid": "GPU-…", "name": "NVIDIA H100", "pci_bus_id": "00000000:07:00.0",
//!     "numa": 0, "switch": 0,
//!     "memory_total": 85899345920, "memory_used": 1073741824, "memory_reserved": 0,
//!     "utilization_gpu": 97, "utilization_memory": 40, "power_usage_mw": 398000,
//!     "power_limit_mw": 400000, "temperature": 71, "sm_clock": 1410, "sm_clock_max": 1785,
//!     "throttle_reasons": 4, "energy_mj": 123456, "ecc_uncorrected_volatile": 0,
//!     "processes": [ { "pid": 4242, "used_memory": 1073741824 } ],
//!     "nvlinks": [ { "active": true, "remote_pci_bus_id": "…", "tx_kib": 1, "rx_kib": 2 } ],
//!     "pcie_tx_kib_per_s": 1200000, "pcie_rx_kib_per_s": 300000, "xid_events": [ 79 ],
//!     "lost": false, "delay_ms": 0, "errors": { "power": "NOT_SUPPORTED" } } ],
//!   "errors": { "event_set_create": "NOT_SUPPORTED", "event_wait": "GPU_IS_LOST" } }
//! ```
//!
//! MIG: a card's `"mig_devices": [ { "uuid": "MIG-…", "name": …, "memory_total": …,
//! "memory_used": …, "processes": […] } ]` are found by `nvmlDeviceGetHandleByUUID` and
//! answer the per-device calls from their own object (utilization and power are absent on a
//! slice, so NOT_SUPPORTED, as on real MIG); `nvmlDeviceGetDeviceHandleFromMigDeviceHandle`
//! gives the card.
//!
//! A missing reading is `NOT_SUPPORTED` (what NVML says for a figure a card lacks); `errors`
//! scripts a return code per call (keys: the names in [`call`] sites below); `"lost": true`
//! makes every call on the card return `GPU_IS_LOST`. Nothing here panics across the C ABI.
//!
//! Xid events: `xid_events` lists the critical Xid codes that occurred on the card, oldest
//! first (append to script a new one). Each event set returns each listed event once, in
//! order, through `nvmlEventSetWait_v2` after `nvmlDeviceRegisterEvents` registered the card
//! for `nvmlEventTypeXidCriticalError`; with nothing pending the wait sleeps its timeout and
//! returns `TIMEOUT`, as NVML does. A lost card's listed events are still delivered (Xid 79
//! is how a card announces it fell off the bus).
//!
//! Counters for an exact ledger, each scripted per card and documented in its module:
//! [`violation`] (`nvmlDeviceGetViolationStatus`: `violations_ns`, `violation_windows`),
//! [`samples`] (`nvmlDeviceGetSamples`: `utilization_samples`, `utilization_timeline`) and
//! [`gpm`] (GPM on Hopper and newer: `gpm`). `"throttle_windows": [[start_ms, end_ms, mask]]`
//! adds `mask` to the clock-event reasons while a window is open (unix ms), so a scripted
//! slowdown shows in the per-row reasons as it does in the violation counters.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use serde_json::Value;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

pub mod gpm;
pub mod samples;
pub mod violation;

pub const DEFAULT_STATE: &str = "/tmp/slurmwatch-fake-nvml/state.json";

// nvmlReturn_t (nvml.h).
pub const SUCCESS: u32 = 0;
pub const UNINITIALIZED: u32 = 1;
pub const INVALID_ARGUMENT: u32 = 2;
pub const NOT_SUPPORTED: u32 = 3;
pub const INSUFFICIENT_SIZE: u32 = 7;
pub const GPU_IS_LOST: u32 = 15;
pub const ARGUMENT_VERSION_MISMATCH: u32 = 25;
pub const UNKNOWN: u32 = 999;

const CODES: &[(&str, u32)] = &[
    ("SUCCESS", 0),
    ("UNINITIALIZED", 1),
    ("INVALID_ARGUMENT", 2),
    ("NOT_SUPPORTED", 3),
    ("NO_PERMISSION", 4),
    ("ALREADY_INITIALIZED", 5),
    ("NOT_FOUND", 6),
    ("INSUFFICIENT_SIZE", 7),
    ("INSUFFICIENT_POWER", 8),
    ("DRIVER_NOT_LOADED", 9),
    ("TIMEOUT", 10),
    ("IRQ_ISSUE", 11),
    ("LIBRARY_NOT_FOUND", 12),
    ("FUNCTION_NOT_FOUND", 13),
    ("CORRUPTED_INFOROM", 14),
    ("GPU_IS_LOST", 15),
    ("RESET_REQUIRED", 16),
    ("OPERATING_SYSTEM", 17),
    ("LIB_RM_VERSION_MISMATCH", 18),
    ("IN_USE", 19),
    ("MEMORY", 20),
    ("NO_DATA", 21),
    ("VGPU_ECC_NOT_SUPPORTED", 22),
    ("INSUFFICIENT_RESOURCES", 23),
    ("FREQ_NOT_SUPPORTED", 24),
    ("ARGUMENT_VERSION_MISMATCH", 25),
    ("DEPRECATED", 26),
    ("NOT_READY", 27),
    ("GPU_NOT_FOUND", 28),
    ("INVALID_STATE", 29),
    ("UNKNOWN", 999),
];

pub fn code_of(name: &str) -> u32 {
    CODES
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(UNKNOWN, |(_, c)| *c)
}

// ---- NVML's structs, byte for byte (nvml.h; sizes asserted) ----

/// `nvmlPciInfo_t` (the v3 layout, 68 bytes).
#[repr(C)]
pub struct PciInfo {
    pub bus_id_legacy: [c_char; 16],
    pub domain: c_uint,
    pub bus: c_uint,
    pub device: c_uint,
    pub pci_device_id: c_uint,
    pub pci_sub_system_id: c_uint,
    pub bus_id: [c_char; 32],
}
const _: () = assert!(std::mem::size_of::<PciInfo>() == 68);

/// `nvmlMemory_v2_t`: 40 bytes; the caller sets `version` = `NVML_STRUCT_VERSION(Memory, 2)`
/// = size | 2 << 24 = 0x2000028, and NVML refuses any other value.
#[repr(C)]
pub struct MemoryV2 {
    pub version: c_uint,
    pub total: c_ulonglong,
    pub reserved: c_ulonglong,
    pub free: c_ulonglong,
    pub used: c_ulonglong,
}
const _: () = assert!(std::mem::size_of::<MemoryV2>() == 40);
pub const MEMORY_V2_VERSION: u32 = 0x0200_0028;

#[repr(C)]
pub struct Utilization {
    pub gpu: c_uint,
    pub memory: c_uint,
}

/// `nvmlProcessInfo_t` as the `_v3` entry points fill it: 24 bytes.
#[repr(C)]
pub struct ProcessInfo {
    pub pid: c_uint,
    pub used_gpu_memory: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}
const _: () = assert!(std::mem::size_of::<ProcessInfo>() == 24);

/// `nvmlFieldValue_t`: 40 bytes; `value` is the 8-byte `nvmlValue_t` union.
#[repr(C)]
pub struct FieldValue {
    pub field_id: c_uint,
    pub scope_id: c_uint,
    pub timestamp: i64,
    pub latency_usec: i64,
    pub value_type: c_uint,
    pub nvml_return: c_uint,
    pub value: u64,
}
const _: () = assert!(std::mem::size_of::<FieldValue>() == 40);

/// `nvmlEventData_t`: 32 bytes.
#[repr(C)]
pub struct EventData {
    pub device: *mut c_void,
    pub event_type: c_ulonglong,
    pub event_data: c_ulonglong,
    pub gpu_instance_id: c_uint,
    pub compute_instance_id: c_uint,
}
const _: () = assert!(std::mem::size_of::<EventData>() == 32);
/// `nvmlEventTypeXidCriticalError`.
pub const EVENT_TYPE_XID_CRITICAL_ERROR: u64 = 8;
pub const TIMEOUT: u32 = 10;

pub const NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: u32 = 138;
pub const NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: u32 = 139;
const NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: u32 = 3;
const NVML_NVLINK_MAX_LINKS: u32 = 18;
const NVML_VALUE_NOT_AVAILABLE: u64 = u64::MAX;

// ---- state ----

static INIT: AtomicU32 = AtomicU32::new(0);

/// One event set: its handle's value and, per registered card (by index), how many of the
/// card's listed Xid events it has delivered.
struct EventSet {
    id: usize,
    cards: Vec<(usize, usize)>,
}

static SETS: Mutex<Vec<EventSet>> = Mutex::new(Vec::new());
static NEXT_SET: AtomicU32 = AtomicU32::new(1);

struct Cache {
    key: Option<(u64, u64, i128, u64)>,
    state: Value,
}

static CACHE: Mutex<Cache> = Mutex::new(Cache {
    key: None,
    state: Value::Null,
});

fn state_path() -> PathBuf {
    std::env::var_os("FAKE_NVML_STATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE))
}

/// The current state, re-read when the file's identity or mtime changed.
fn with_state<R>(f: impl FnOnce(&Value) -> R) -> R {
    use std::os::unix::fs::MetadataExt;
    let path = state_path();
    let mut c = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let key = std::fs::metadata(&path).ok().map(|m| {
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        (m.dev(), m.ino(), mtime, m.len())
    });
    if key != c.key {
        c.state = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        c.key = key;
    }
    f(&c.state)
}

/// A MIG device's handle: its parent's handle plus `(slice + 1) << MIG_SHIFT`.
const MIG_SHIFT: u32 = 16;

/// The object a handle names (a card, or one of its `mig_devices`), its card, and the
/// card's index.
fn resolve(s: &Value, handle: *mut c_void) -> Option<(&Value, &Value, usize)> {
    let h = handle as usize;
    let idx = (h & ((1 << MIG_SHIFT) - 1)).checked_sub(1)?;
    let parent = devices(s).get(idx)?;
    match (h >> MIG_SHIFT).checked_sub(1) {
        None => Some((parent, parent, idx)),
        Some(m) => Some((migs(parent).get(m)?, parent, idx)),
    }
}

fn is_mig_handle(handle: *mut c_void) -> bool {
    (handle as usize) >> MIG_SHIFT != 0
}

/// A card's MIG devices (`"mig_devices": [ { "uuid": "MIG-…", … } ]`): each answers the
/// per-device calls from its own object (a reading it lacks is NOT_SUPPORTED, as NVML says
/// for utilization and power on a slice).
fn migs(d: &Value) -> &[Value] {
    d.get("mig_devices")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn devices(s: &Value) -> &[Value] {
    s.get("devices")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn u64_of(d: &Value, k: &str) -> Option<u64> {
    d.get(k).and_then(Value::as_u64)
}

fn str_of<'a>(d: &'a Value, k: &str) -> Option<&'a str> {
    d.get(k).and_then(Value::as_str)
}

/// Runs `f` on device `handle` (1-based index in disguise) for the call named `call`,
/// applying NVML's preconditions and the scripted errors. Never unwinds into C.
fn call(handle: *mut c_void, call: &str, f: impl FnOnce(&Value, usize) -> u32) -> u32 {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if INIT.load(Ordering::SeqCst) == 0 {
            return UNINITIALIZED;
        }
        let (rc, delay) = with_state(|s| {
            let Some((d, parent, idx)) = resolve(s, handle) else {
                return (INVALID_ARGUMENT, 0);
            };
            // A slice of a lost card is lost with it.
            if parent.get("lost").and_then(Value::as_bool) == Some(true) {
                return (GPU_IS_LOST, 0);
            }
            let delay = if call == "utilization" {
                u64_of(d, "delay_ms").unwrap_or(0)
            } else {
                0
            };
            if d.get("lost").and_then(Value::as_bool) == Some(true) {
                return (GPU_IS_LOST, delay);
            }
            if let Some(e) = d
                .get("errors")
                .and_then(|e| e.get(call))
                .and_then(Value::as_str)
            {
                return (code_of(e), delay);
            }
            (f(d, idx), delay)
        });
        // A slow call (`delay_ms`, on the utilisation call): the answer comes late.
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        rc
    }))
    .unwrap_or(UNKNOWN)
}

/// Now, in µs since the Unix epoch (NVML's "CPU timestamp").
fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |t| t.as_micros() as u64)
}

/// Writes `s` NUL-terminated into `buf` of `len` bytes; INSUFFICIENT_SIZE if it does not fit.
unsafe fn put_str(s: &str, buf: *mut c_char, len: c_uint) -> u32 {
    if buf.is_null() {
        return INVALID_ARGUMENT;
    }
    if s.len() + 1 > len as usize {
        return INSUFFICIENT_SIZE;
    }
    std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, buf, s.len());
    *buf.add(s.len()) = 0;
    SUCCESS
}

fn fill_pci(bus_id: &str, out: &mut PciInfo) {
    // Zeroed first, as NVML does; strings are NUL-terminated within their arrays.
    // SAFETY: PciInfo is plain data.
    *out = unsafe { std::mem::zeroed() };
    for (i, b) in bus_id.bytes().take(31).enumerate() {
        out.bus_id[i] = b as c_char;
    }
    // Legacy form drops the domain's upper digits: "0000:07:00.0".
    let legacy = bus_id.get(4..).unwrap_or(bus_id);
    for (i, b) in legacy.bytes().take(15).enumerate() {
        out.bus_id_legacy[i] = b as c_char;
    }
    let parts: Vec<&str> = bus_id.split([':', '.']).collect();
    let hex = |i: usize| {
        parts
            .get(i)
            .and_then(|p| u32::from_str_radix(p, 16).ok())
            .unwrap_or(0)
    };
    out.domain = hex(0);
    out.bus = hex(1);
    out.device = hex(2);
    out.pci_device_id = 0x2330_10de;
    out.pci_sub_system_id = 0x16c1_10de;
}

/// A reading: the value of `key` through `put`, or NOT_SUPPORTED when the card lacks it.
unsafe fn uint_reading<T: TryFrom<u64>>(d: &Value, key: &str, out: *mut T) -> u32 {
    if out.is_null() {
        return INVALID_ARGUMENT;
    }
    match u64_of(d, key).and_then(|v| T::try_from(v).ok()) {
        Some(v) => {
            *out = v;
            SUCCESS
        }
        None => NOT_SUPPORTED,
    }
}

// ---- exported NVML functions ----

#[no_mangle]
pub extern "C" fn nvmlInit_v2() -> u32 {
    std::panic::catch_unwind(|| {
        let (err, delay) = with_state(|s| {
            (
                str_of(s, "init_error").map(code_of),
                u64_of(s, "init_delay_ms").unwrap_or(0),
            )
        });
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        if let Some(e) = err {
            return e;
        }
        INIT.fetch_add(1, Ordering::SeqCst);
        SUCCESS
    })
    .unwrap_or(UNKNOWN)
}

#[no_mangle]
pub extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> u32 {
    nvmlInit_v2()
}

#[no_mangle]
pub extern "C" fn nvmlShutdown() -> u32 {
    // Reference-counted like NVML: each init needs one shutdown.
    match INIT.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
        Ok(_) => SUCCESS,
        Err(_) => UNINITIALIZED,
    }
}

#[no_mangle]
pub extern "C" fn nvmlErrorString(result: u32) -> *const c_char {
    let s: &'static [u8] = match result {
        0 => b"Success\0",
        1 => b"Uninitialized\0",
        2 => b"Invalid Argument\0",
        3 => b"Not Supported\0",
        4 => b"Insufficient Permissions\0",
        7 => b"Insufficient Size\0",
        9 => b"Driver Not Loaded\0",
        10 => b"Timeout\0",
        15 => b"GPU is lost\0",
        25 => b"Argument version mismatch\0",
        _ => b"Unknown Error\0",
    };
    s.as_ptr() as *const c_char
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(buf: *mut c_char, len: c_uint) -> u32 {
    if INIT.load(Ordering::SeqCst) == 0 {
        return UNINITIALIZED;
    }
    let v = with_state(|s| {
        str_of(s, "driver_version")
            .unwrap_or("550.54.15")
            .to_string()
    });
    put_str(&v, buf, len)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(count: *mut c_uint) -> u32 {
    if INIT.load(Ordering::SeqCst) == 0 {
        return UNINITIALIZED;
    }
    if count.is_null() {
        return INVALID_ARGUMENT;
    }
    let (n, err) = with_state(|s| {
        (
            devices(s).len() as c_uint,
            s.get("errors")
                .and_then(|e| e.get("count"))
                .and_then(Value::as_str)
                .map(code_of),
        )
    });
    if let Some(e) = err {
        return e;
    }
    *count = n;
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    out: *mut *mut c_void,
) -> u32 {
    if out.is_null() {
        return INVALID_ARGUMENT;
    }
    let handle = (index as usize + 1) as *mut c_void;
    call(handle, "handle", |_, _| {
        *out = handle;
        SUCCESS
    })
}

/// A card or a MIG device by its UUID (NVML accepts both), else NOT_FOUND.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByUUID(
    uuid: *const c_char,
    out: *mut *mut c_void,
) -> u32 {
    if INIT.load(Ordering::SeqCst) == 0 {
        return UNINITIALIZED;
    }
    if uuid.is_null() || out.is_null() {
        return INVALID_ARGUMENT;
    }
    let Ok(want) = std::ffi::CStr::from_ptr(uuid).to_str() else {
        return INVALID_ARGUMENT;
    };
    let found = with_state(|s| {
        devices(s).iter().enumerate().find_map(|(i, d)| {
            if str_of(d, "uuid") == Some(want) {
                return Some(i + 1);
            }
            migs(d)
                .iter()
                .position(|m| str_of(m, "uuid") == Some(want))
                .map(|m| (i + 1) | ((m + 1) << MIG_SHIFT))
        })
    });
    match found {
        Some(h) => {
            *out = h as *mut c_void;
            SUCCESS
        }
        None => 6, // NOT_FOUND
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceIsMigDeviceHandle(dev: *mut c_void, is_mig: *mut c_uint) -> u32 {
    call(dev, "is_mig", |_, _| {
        if is_mig.is_null() {
            return INVALID_ARGUMENT;
        }
        *is_mig = c_uint::from(is_mig_handle(dev));
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
    mig: *mut c_void,
    out: *mut *mut c_void,
) -> u32 {
    call(mig, "mig_parent", |_, i| {
        if out.is_null() || !is_mig_handle(mig) {
            return INVALID_ARGUMENT;
        }
        *out = (i + 1) as *mut c_void;
        SUCCESS
    })
}

/// A MIG device has no NVML index of its own (this fake says INVALID_ARGUMENT): callers use
/// its parent's.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetIndex(dev: *mut c_void, index: *mut c_uint) -> u32 {
    if is_mig_handle(dev) {
        return INVALID_ARGUMENT;
    }
    call(dev, "index", |_, i| {
        if index.is_null() {
            return INVALID_ARGUMENT;
        }
        *index = i as c_uint;
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(dev: *mut c_void, buf: *mut c_char, len: c_uint) -> u32 {
    call(dev, "uuid", |d, _| match str_of(d, "uuid") {
        Some(u) => put_str(u, buf, len),
        None => NOT_SUPPORTED,
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(dev: *mut c_void, buf: *mut c_char, len: c_uint) -> u32 {
    call(dev, "name", |d, _| {
        put_str(str_of(d, "name").unwrap_or("NVIDIA Fake"), buf, len)
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(dev: *mut c_void, out: *mut PciInfo) -> u32 {
    call(dev, "pci", |d, _| {
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        match str_of(d, "pci_bus_id") {
            Some(b) => {
                fill_pci(b, &mut *out);
                SUCCESS
            }
            None => NOT_SUPPORTED,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMemoryInfo_v2(dev: *mut c_void, out: *mut MemoryV2) -> u32 {
    call(dev, "memory", |d, _| {
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        if (*out).version != MEMORY_V2_VERSION {
            return ARGUMENT_VERSION_MISMATCH;
        }
        let (Some(total), Some(used)) = (u64_of(d, "memory_total"), u64_of(d, "memory_used"))
        else {
            return NOT_SUPPORTED;
        };
        let reserved = u64_of(d, "memory_reserved").unwrap_or(0);
        (*out).total = total;
        (*out).reserved = reserved;
        (*out).used = used;
        (*out).free = total.saturating_sub(used).saturating_sub(reserved);
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUtilizationRates(
    dev: *mut c_void,
    out: *mut Utilization,
) -> u32 {
    call(dev, "utilization", |d, _| {
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        match (
            u64_of(d, "utilization_gpu"),
            u64_of(d, "utilization_memory"),
        ) {
            (Some(g), Some(m)) => {
                (*out).gpu = g as c_uint;
                (*out).memory = m as c_uint;
                SUCCESS
            }
            _ => NOT_SUPPORTED,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPowerUsage(dev: *mut c_void, mw: *mut c_uint) -> u32 {
    call(dev, "power", |d, _| uint_reading(d, "power_usage_mw", mw))
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetEnforcedPowerLimit(dev: *mut c_void, mw: *mut c_uint) -> u32 {
    call(dev, "power_limit", |d, _| {
        uint_reading(d, "power_limit_mw", mw)
    })
}

/// Sensor 0 is `NVML_TEMPERATURE_GPU`, the only one NVML defines.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTemperature(
    dev: *mut c_void,
    sensor: c_int,
    t: *mut c_uint,
) -> u32 {
    call(dev, "temperature", |d, _| {
        if sensor != 0 {
            return INVALID_ARGUMENT;
        }
        uint_reading(d, "temperature", t)
    })
}

/// Clock type 1 is `NVML_CLOCK_SM`; the others (graphics 0, memory 2, video 3) read the
/// `<kind>_clock` keys.
fn clock_key(kind: c_int, max: bool) -> Option<String> {
    let base = match kind {
        0 => "graphics_clock",
        1 => "sm_clock",
        2 => "mem_clock",
        3 => "video_clock",
        _ => return None,
    };
    Some(if max {
        format!("{base}_max")
    } else {
        base.to_string()
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetClockInfo(
    dev: *mut c_void,
    kind: c_int,
    mhz: *mut c_uint,
) -> u32 {
    call(dev, "clock", |d, _| match clock_key(kind, false) {
        Some(k) => uint_reading(d, &k, mhz),
        None => INVALID_ARGUMENT,
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMaxClockInfo(
    dev: *mut c_void,
    kind: c_int,
    mhz: *mut c_uint,
) -> u32 {
    call(dev, "max_clock", |d, _| match clock_key(kind, true) {
        Some(k) => uint_reading(d, &k, mhz),
        None => INVALID_ARGUMENT,
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksThrottleReasons(
    dev: *mut c_void,
    mask: *mut c_ulonglong,
) -> u32 {
    call(dev, "throttle", |d, _| {
        let rc = uint_reading(d, "throttle_reasons", mask);
        if rc == SUCCESS {
            *mask |= violation::reasons_now(d, now_us() / 1000);
        }
        rc
    })
}

/// Newer drivers' name for the same call (nvml.h 12.2+).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCurrentClocksEventReasons(
    dev: *mut c_void,
    mask: *mut c_ulonglong,
) -> u32 {
    nvmlDeviceGetCurrentClocksThrottleReasons(dev, mask)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEnergyConsumption(
    dev: *mut c_void,
    mj: *mut c_ulonglong,
) -> u32 {
    call(dev, "energy", |d, _| uint_reading(d, "energy_mj", mj))
}

/// `nvmlDeviceGetTotalEccErrors(device, errorType, counterType, count)`: the fake keeps the
/// volatile uncorrected count (errorType 1, counterType 0); other combinations read 0.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTotalEccErrors(
    dev: *mut c_void,
    error_type: c_int,
    counter_type: c_int,
    count: *mut c_ulonglong,
) -> u32 {
    call(dev, "ecc", |d, _| {
        if count.is_null() || !(0..=1).contains(&error_type) || !(0..=1).contains(&counter_type) {
            return INVALID_ARGUMENT;
        }
        if error_type == 1 && counter_type == 0 {
            uint_reading(d, "ecc_uncorrected_volatile", count)
        } else {
            *count = 0;
            SUCCESS
        }
    })
}

/// The two-call protocol: with `*count` smaller than the number of processes NVML writes
/// the number to `*count` and returns INSUFFICIENT_SIZE (so `*count = 0, infos = NULL`
/// asks for the count); with none running it returns SUCCESS and `*count = 0`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    dev: *mut c_void,
    count: *mut c_uint,
    infos: *mut ProcessInfo,
) -> u32 {
    call(dev, "processes", |d, _| {
        if count.is_null() {
            return INVALID_ARGUMENT;
        }
        let empty = Vec::new();
        let list = d
            .get("processes")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        let n = list.len() as c_uint;
        if *count < n {
            *count = n;
            return INSUFFICIENT_SIZE;
        }
        if n > 0 && infos.is_null() {
            return INVALID_ARGUMENT;
        }
        for (i, p) in list.iter().enumerate() {
            *infos.add(i) = ProcessInfo {
                pid: u64_of(p, "pid").unwrap_or(0) as c_uint,
                used_gpu_memory: u64_of(p, "used_memory").unwrap_or(NVML_VALUE_NOT_AVAILABLE),
                gpu_instance_id: u32::MAX,
                compute_instance_id: u32::MAX,
            };
        }
        *count = n;
        SUCCESS
    })
}

fn link_of(d: &Value, link: c_uint) -> Result<&Value, u32> {
    let links = d.get("nvlinks").and_then(Value::as_array);
    match links {
        None => Err(NOT_SUPPORTED),
        Some(_) if link >= NVML_NVLINK_MAX_LINKS => Err(INVALID_ARGUMENT),
        Some(l) => l.get(link as usize).ok_or(INVALID_ARGUMENT),
    }
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkState(
    dev: *mut c_void,
    link: c_uint,
    active: *mut c_int,
) -> u32 {
    call(dev, "nvlink_state", |d, _| {
        if active.is_null() {
            return INVALID_ARGUMENT;
        }
        match link_of(d, link) {
            Ok(l) => {
                *active = c_int::from(l.get("active").and_then(Value::as_bool) == Some(true));
                SUCCESS
            }
            Err(e) => e,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetNvLinkRemotePciInfo_v2(
    dev: *mut c_void,
    link: c_uint,
    out: *mut PciInfo,
) -> u32 {
    call(dev, "nvlink_remote", |d, _| {
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        match link_of(d, link) {
            Ok(l) => match str_of(l, "remote_pci_bus_id") {
                Some(b) => {
                    fill_pci(b, &mut *out);
                    SUCCESS
                }
                None => NOT_SUPPORTED,
            },
            Err(e) => e,
        }
    })
}

/// Each entry gets its own return code; `scopeId` is the NVLink id for the throughput
/// fields (a link the card does not have: INVALID_ARGUMENT in that entry). Unknown fields
/// are NOT_SUPPORTED in their entry; the call itself succeeds.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetFieldValues(
    dev: *mut c_void,
    n: c_int,
    values: *mut FieldValue,
) -> u32 {
    call(dev, "field_values", |d, _| {
        if n < 0 || (n > 0 && values.is_null()) {
            return INVALID_ARGUMENT;
        }
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |t| t.as_micros() as i64);
        for i in 0..n as usize {
            let v = &mut *values.add(i);
            v.timestamp = now;
            v.latency_usec = 0;
            let key = match v.field_id {
                NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX => "tx_kib",
                NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX => "rx_kib",
                _ => {
                    v.nvml_return = NOT_SUPPORTED;
                    continue;
                }
            };
            match link_of(d, v.scope_id) {
                Ok(l) => match u64_of(l, key) {
                    Some(x) => {
                        v.value_type = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
                        v.value = x;
                        v.nvml_return = SUCCESS;
                    }
                    None => v.nvml_return = NOT_SUPPORTED,
                },
                Err(e) => v.nvml_return = e,
            }
        }
        SUCCESS
    })
}

/// `nvmlDeviceGetPcieThroughput(device, counter, *value)`: counter 0 is
/// `NVML_PCIE_UTIL_TX_BYTES` (`pcie_tx_kib_per_s`), 1 is `NVML_PCIE_UTIL_RX_BYTES`
/// (`pcie_rx_kib_per_s`), in KB/s. Scripted errors: `pcie_tx`, `pcie_rx`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPcieThroughput(
    dev: *mut c_void,
    counter: c_int,
    value: *mut c_uint,
) -> u32 {
    let (name, key) = match counter {
        0 => ("pcie_tx", "pcie_tx_kib_per_s"),
        1 => ("pcie_rx", "pcie_rx_kib_per_s"),
        _ => return INVALID_ARGUMENT,
    };
    call(dev, name, |d, _| uint_reading(d, key, value))
}

fn state_error(key: &str) -> Option<u32> {
    with_state(|s| {
        s.get("errors")
            .and_then(|e| e.get(key))
            .and_then(Value::as_str)
            .map(code_of)
    })
}

fn set_id(set: *mut c_void) -> usize {
    set as usize
}

#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetCreate(set: *mut *mut c_void) -> u32 {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if INIT.load(Ordering::SeqCst) == 0 {
            return UNINITIALIZED;
        }
        if set.is_null() {
            return INVALID_ARGUMENT;
        }
        if let Some(e) = state_error("event_set_create") {
            return e;
        }
        let id = NEXT_SET.fetch_add(1, Ordering::SeqCst) as usize;
        SETS.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(EventSet {
                id,
                cards: Vec::new(),
            });
        *set = id as *mut c_void;
        SUCCESS
    }))
    .unwrap_or(UNKNOWN)
}

/// Registers the card for `nvmlEventTypeXidCriticalError` (8), the only event type the fake
/// has: any other bit is NOT_SUPPORTED ("some of requested event types"). Scripted errors:
/// `register_events`.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceRegisterEvents(
    dev: *mut c_void,
    types: c_ulonglong,
    set: *mut c_void,
) -> u32 {
    call(dev, "register_events", |_, idx| {
        if types & !EVENT_TYPE_XID_CRITICAL_ERROR != 0 {
            return NOT_SUPPORTED;
        }
        let mut sets = SETS.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = sets.iter_mut().find(|s| s.id == set_id(set)) else {
            return INVALID_ARGUMENT;
        };
        if types != 0 && !s.cards.iter().any(|(i, _)| *i == idx) {
            s.cards.push((idx, 0));
        }
        SUCCESS
    })
}

/// The next undelivered Xid event of the set's cards (in registration order), else
/// TIMEOUT after `timeout_ms` (capped at 1 s here). Scripted errors: `event_wait` (top level).
#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetWait_v2(
    set: *mut c_void,
    data: *mut EventData,
    timeout_ms: c_uint,
) -> u32 {
    let rc = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if INIT.load(Ordering::SeqCst) == 0 {
            return UNINITIALIZED;
        }
        if data.is_null() {
            return INVALID_ARGUMENT;
        }
        if let Some(e) = state_error("event_wait") {
            return e;
        }
        let listed: Vec<Vec<u64>> = with_state(|s| {
            devices(s)
                .iter()
                .map(|d| {
                    d.get("xid_events")
                        .and_then(Value::as_array)
                        .map(|l| l.iter().filter_map(Value::as_u64).collect())
                        .unwrap_or_default()
                })
                .collect()
        });
        let mut sets = SETS.lock().unwrap_or_else(|e| e.into_inner());
        let Some(s) = sets.iter_mut().find(|s| s.id == set_id(set)) else {
            return INVALID_ARGUMENT;
        };
        for (idx, delivered) in s.cards.iter_mut() {
            if let Some(&xid) = listed.get(*idx).and_then(|l| l.get(*delivered)) {
                *delivered += 1;
                *data = EventData {
                    device: (*idx + 1) as *mut c_void,
                    event_type: EVENT_TYPE_XID_CRITICAL_ERROR,
                    event_data: xid,
                    gpu_instance_id: u32::MAX,
                    compute_instance_id: u32::MAX,
                };
                return SUCCESS;
            }
        }
        TIMEOUT
    }))
    .unwrap_or(UNKNOWN);
    if rc == TIMEOUT && timeout_ms > 0 {
        std::thread::sleep(Duration::from_millis(u64::from(timeout_ms.min(1000))));
    }
    rc
}

#[no_mangle]
pub unsafe extern "C" fn nvmlEventSetFree(set: *mut c_void) -> u32 {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if INIT.load(Ordering::SeqCst) == 0 {
            return UNINITIALIZED;
        }
        let mut sets = SETS.lock().unwrap_or_else(|e| e.into_inner());
        match sets.iter().position(|s| s.id == set_id(set)) {
            Some(i) => {
                sets.remove(i);
                SUCCESS
            }
            None => INVALID_ARGUMENT,
        }
    }))
    .unwrap_or(UNKNOWN)
}

/// `nvmlGpuTopologyLevel_t`: same `switch` → SINGLE (10), same `numa` → NODE (40), else
/// SYSTEM (50); the same card → INTERNAL (0).
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetTopologyCommonAncestor(
    a: *mut c_void,
    b: *mut c_void,
    level: *mut c_int,
) -> u32 {
    let other = with_state(|s| {
        devices(s)
            .get((b as usize).wrapping_sub(1))
            .map(|d| (u64_of(d, "switch"), u64_of(d, "numa")))
    });
    call(a, "topology", |d, ia| {
        let Some((sw, numa)) = other else {
            return INVALID_ARGUMENT;
        };
        if level.is_null() {
            return INVALID_ARGUMENT;
        }
        *level = if ia == (b as usize).wrapping_sub(1) {
            0
        } else if sw.is_some() && u64_of(d, "switch") == sw {
            10
        } else if numa.is_some() && u64_of(d, "numa") == numa {
            40
        } else {
            50
        };
        SUCCESS
    })
}

/// `nvmlDeviceGetP2PStatus(d1, d2, capsIndex, *status)`. For `NVML_P2P_CAPS_INDEX_NVLINK`
/// (2): `NVML_P2P_STATUS_OK` (0) when both cards have `"nvswitch": true` or a link of one
/// ends at the other's bus id, else `NVML_P2P_STATUS_NOT_SUPPORTED` (5). Other indices: OK.
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetP2PStatus(
    a: *mut c_void,
    b: *mut c_void,
    index: c_int,
    status: *mut c_int,
) -> u32 {
    let other = with_state(|s| devices(s).get((b as usize).wrapping_sub(1)).cloned());
    call(a, "p2p", |d, _| {
        let Some(o) = &other else {
            return INVALID_ARGUMENT;
        };
        if status.is_null() || !(0..=4).contains(&index) {
            return INVALID_ARGUMENT;
        }
        let switch = |x: &Value| x.get("nvswitch").and_then(Value::as_bool) == Some(true);
        let direct = |x: &Value, y: &Value| {
            let bus = str_of(y, "pci_bus_id");
            x.get("nvlinks").and_then(Value::as_array).is_some_and(|l| {
                l.iter()
                    .any(|l| bus.is_some() && str_of(l, "remote_pci_bus_id") == bus)
            })
        };
        let ok = index != 2 || (switch(d) && switch(o)) || direct(d, o) || direct(o, d);
        *status = if ok { 0 } else { 5 };
        SUCCESS
    })
}
