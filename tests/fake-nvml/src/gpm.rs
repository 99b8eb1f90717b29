//! GPM (GPU Performance Monitoring, Hopper and newer): `nvmlGpmQueryDeviceSupport`,
//! `nvmlGpmSampleAlloc` / `nvmlGpmSampleGet` / `nvmlGpmSampleFree`, `nvmlGpmMetricsGet`.
//!
//! A card whose name contains "H100", "H200" (so also "GH200"), "B100" or "B200" supports
//! GPM; any other (an Ampere "A100") says `isSupportedDevice = 0` and NOT_SUPPORTED to
//! `nvmlGpmSampleGet`, as do MIG handles here. Its metrics are scripted per card:
//! `"gpm": { "sm_active": 62.5, "sm_occupancy": 30.0, "tensor_active": 45.0,
//! "dram_bw_util": 71.0 }` (percent). A sample snapshots them; `nvmlGpmMetricsGet` answers
//! what the second sample saw (the fake's card ran at its scripted figures over the whole
//! interval). A metric the card does not script, or does not know, is NOT_SUPPORTED in its
//! entry; the call itself succeeds.

use super::*;

/// `NVML_GPM_SUPPORT_VERSION` and `NVML_GPM_METRICS_GET_VERSION` (nvml.h).
pub const GPM_SUPPORT_VERSION: c_uint = 1;
pub const GPM_METRICS_GET_VERSION: c_uint = 1;
/// `NVML_GPM_METRIC_MAX`: the length of `nvmlGpmMetricsGet_t.metrics` in the header
/// nvml-wrapper-sys 0.10 was generated from.
pub const GPM_METRIC_MAX: usize = 210;

/// `nvmlGpmMetricId_t` → the state file's key, NVML's short name and unit.
const METRICS: [(c_uint, &str, &[u8], &[u8]); 4] = [
    (2, "sm_active", b"SM_UTIL\0", b"%\0"), // NVML_GPM_METRIC_SM_UTIL
    (3, "sm_occupancy", b"SM_OCCUPANCY\0", b"%\0"), // NVML_GPM_METRIC_SM_OCCUPANCY
    (5, "tensor_active", b"ANY_TENSOR_UTIL\0", b"%\0"), // NVML_GPM_METRIC_ANY_TENSOR_UTIL
    (10, "dram_bw_util", b"DRAM_BW_UTIL\0", b"%\0"), // NVML_GPM_METRIC_DRAM_BW_UTIL
];

/// `nvmlGpmSupport_t`.
#[repr(C)]
pub struct GpmSupport {
    pub version: c_uint,
    pub is_supported_device: c_uint,
}

/// `nvmlGpmMetric_t`: 40 bytes.
#[repr(C)]
pub struct GpmMetric {
    pub metric_id: c_uint,
    pub nvml_return: u32,
    pub value: f64,
    pub short_name: *const c_char,
    pub long_name: *const c_char,
    pub unit: *const c_char,
}
const _: () = assert!(std::mem::size_of::<GpmMetric>() == 40);

/// `nvmlGpmMetricsGet_t`.
#[repr(C)]
pub struct GpmMetricsGet {
    pub version: c_uint,
    pub num_metrics: c_uint,
    pub sample1: *mut c_void,
    pub sample2: *mut c_void,
    pub metrics: [GpmMetric; GPM_METRIC_MAX],
}
const _: () = assert!(std::mem::size_of::<GpmMetricsGet>() == 24 + 40 * GPM_METRIC_MAX);

/// A sample's handle is its id (never dereferenced: a stale or foreign handle is
/// INVALID_ARGUMENT, not a crash). Taken: (card index, order taken, the card's `gpm`).
struct GpmSampleSlot {
    id: usize,
    taken: Option<(usize, u64, Value)>,
}

static SAMPLES: Mutex<Vec<GpmSampleSlot>> = Mutex::new(Vec::new());
static NEXT_SAMPLE: AtomicU32 = AtomicU32::new(1);

fn samples() -> std::sync::MutexGuard<'static, Vec<GpmSampleSlot>> {
    SAMPLES.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn is_gpm_card(d: &Value) -> bool {
    let name = str_of(d, "name").unwrap_or("");
    ["H100", "H200", "B100", "B200"]
        .iter()
        .any(|a| name.contains(a))
}

/// Runs `f` with NVML's init check, never unwinding into C.
fn guarded(f: impl FnOnce() -> u32) -> u32 {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if INIT.load(Ordering::SeqCst) == 0 {
            return UNINITIALIZED;
        }
        f()
    }))
    .unwrap_or(UNKNOWN)
}

/// Scripted errors: `gpm_support`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmQueryDeviceSupport(dev: *mut c_void, out: *mut GpmSupport) -> u32 {
    call(dev, "gpm_support", |d, _| {
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        if (*out).version != GPM_SUPPORT_VERSION {
            return ARGUMENT_VERSION_MISMATCH;
        }
        (*out).is_supported_device = c_uint::from(is_gpm_card(d) && !is_mig_handle(dev));
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleAlloc(out: *mut *mut c_void) -> u32 {
    guarded(|| {
        if out.is_null() {
            return INVALID_ARGUMENT;
        }
        let id = NEXT_SAMPLE.fetch_add(1, Ordering::SeqCst) as usize;
        samples().push(GpmSampleSlot { id, taken: None });
        *out = id as *mut c_void;
        SUCCESS
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleFree(sample: *mut c_void) -> u32 {
    guarded(|| {
        let mut s = samples();
        match s.iter().position(|x| x.id == sample as usize) {
            Some(i) => {
                s.remove(i);
                SUCCESS
            }
            None => INVALID_ARGUMENT,
        }
    })
}

/// Scripted errors: `gpm_sample`.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmSampleGet(dev: *mut c_void, sample: *mut c_void) -> u32 {
    call(dev, "gpm_sample", |d, idx| {
        if !is_gpm_card(d) || is_mig_handle(dev) {
            return NOT_SUPPORTED;
        }
        let order = u64::from(NEXT_SAMPLE.fetch_add(1, Ordering::SeqCst));
        let mut s = samples();
        let Some(slot) = s.iter_mut().find(|x| x.id == sample as usize) else {
            return INVALID_ARGUMENT;
        };
        slot.taken = Some((idx, order, d.get("gpm").cloned().unwrap_or(Value::Null)));
        SUCCESS
    })
}

/// Fills one requested metric from the second sample's snapshot.
fn fill(m: &mut GpmMetric, gpm: &Value) {
    m.value = 0.0;
    m.short_name = std::ptr::null();
    m.long_name = std::ptr::null();
    m.unit = std::ptr::null();
    let Some(&(_, key, short, unit)) = METRICS.iter().find(|x| x.0 == m.metric_id) else {
        m.nvml_return = NOT_SUPPORTED;
        return;
    };
    match gpm.get(key).and_then(Value::as_f64) {
        Some(v) => {
            m.value = v;
            m.nvml_return = SUCCESS;
            m.short_name = short.as_ptr() as *const c_char;
            m.long_name = short.as_ptr() as *const c_char;
            m.unit = unit.as_ptr() as *const c_char;
        }
        None => m.nvml_return = NOT_SUPPORTED,
    }
}

/// Both samples must be taken, on one card, the second after the first; else
/// INVALID_ARGUMENT. A wrong `version`: ARGUMENT_VERSION_MISMATCH.
#[no_mangle]
pub unsafe extern "C" fn nvmlGpmMetricsGet(req: *mut GpmMetricsGet) -> u32 {
    guarded(|| {
        if req.is_null() {
            return INVALID_ARGUMENT;
        }
        let req = &mut *req;
        if req.version != GPM_METRICS_GET_VERSION {
            return ARGUMENT_VERSION_MISMATCH;
        }
        if req.num_metrics as usize > GPM_METRIC_MAX {
            return INVALID_ARGUMENT;
        }
        let s = samples();
        let taken = |h: *mut c_void| {
            s.iter()
                .find(|x| x.id == h as usize)
                .and_then(|x| x.taken.as_ref())
        };
        let (Some(a), Some(b)) = (taken(req.sample1), taken(req.sample2)) else {
            return INVALID_ARGUMENT;
        };
        if a.0 != b.0 || a.1 >= b.1 {
            return INVALID_ARGUMENT;
        }
        for m in req.metrics.iter_mut().take(req.num_metrics as usize) {
            fill(m, &b.2);
        }
        SUCCESS
    })
}
