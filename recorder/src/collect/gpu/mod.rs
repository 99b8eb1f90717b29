//! The job's GPUs through NVML (nvml-wrapper), from inside the step.
//!
//! - [`select`]: which cards are the job's (its environment, parsed strictly).
//! - [`GpuCollector`]: opens NVML from a site-chosen library path, keys the job's cards by
//!   UUID, and reads every figure of every card; each reading carries its value or the NVML
//!   error (never 0 for unreadable).
//! - [`worker`]: runs the collector on its own thread so NVML's init and a hung call (a card
//!   falling off the bus) cost the sampler a bounded wait, never a stalled step.
//! - [`derive`]: pure verdicts (active / idle / idle holding memory / shared; throttling).
//! - [`ledger`]: cumulative counters for an exact ledger (violation time per limiter, time
//!   with no kernel running, GPM on Hopper).
//!
//! No library, no driver or no card is "no GPU section", not an error.

pub mod derive;
pub mod ledger;
pub mod pids;
pub mod select;
pub mod worker;
pub mod xid;

use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::{
    Clock, EccCounter, MemoryError, P2pCapabilitiesIndex, P2pStatus, PcieUtilCounter,
    TemperatureSensor, TopologyLevel,
};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::ProcessInfo;
use nvml_wrapper::sys_exports::field_id::{
    NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
};
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings::{nvmlEventData_t, nvmlEventSet_t};

use crate::sample::{
    GpuCard, GpuError, GpuLedger, GpuLink, GpuProcesses, GpuReading, GpuSample, NvlinkCounters,
};
pub use select::{wanted_cards, CardRef, GpuEnv, Wanted};

/// The driver's library name; sites may name another path with the plugstack `nvml=` key.
pub const DEFAULT_NVML_LIB: &str = "libnvidia-ml.so.1";
/// `NVML_NVLINK_MAX_LINKS` (nvml.h, Hopper: 18).
const NVLINK_MAX_LINKS: u32 = 18;
/// `nvmlEventTypeXidCriticalError` (nvml.h).
const EVENT_XID_CRITICAL_ERROR: u64 = 8;
/// The most Xid events taken from NVML per reading; any more wait for the next reading.
const MAX_XID_PER_READ: usize = 64;

/// Maps nvml-wrapper's error to the NVML return code's name.
pub fn gpu_error(e: &NvmlError) -> GpuError {
    match e {
        NvmlError::NotSupported => GpuError::NotSupported,
        NvmlError::NoPermission => GpuError::NoPermission,
        NvmlError::GpuLost => GpuError::GpuIsLost,
        NvmlError::Unknown => GpuError::Unknown,
        NvmlError::Timeout => GpuError::Timeout,
        NvmlError::NoData => GpuError::NoData,
        NvmlError::InvalidArg => GpuError::InvalidArgument,
        NvmlError::Uninitialized => GpuError::Uninitialized,
        // A symbol the driver's library lacks (older driver) reads as NVML's own code.
        NvmlError::FunctionNotFound | NvmlError::FailedToLoadSymbol(_) => {
            GpuError::FunctionNotFound
        }
        NvmlError::InsufficientSize(_) => GpuError::InsufficientSize,
        NvmlError::DriverNotLoaded => GpuError::DriverNotLoaded,
        NvmlError::ResetRequired => GpuError::ResetRequired,
        NvmlError::NotFound => GpuError::NotFound,
        NvmlError::InUse => GpuError::InUse,
        _ => GpuError::Other,
    }
}

fn r<T>(v: Result<T, NvmlError>) -> GpuReading<T> {
    v.map_err(|e| gpu_error(&e))
}

/// Why there is no GPU section (each is normal on a node or job without cards).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoGpus {
    /// The job's environment names no card.
    NoneRequested,
    /// The library could not be loaded (no driver installed): dlopen's message.
    NoLibrary(String),
    /// `nvmlInit` or the device count failed (driver not loaded, no permission, ...).
    Init(GpuError),
    /// NVML answered but none of its cards is one the job names.
    NoMatch,
}

impl std::fmt::Display for NoGpus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoGpus::NoneRequested => write!(f, "the job holds no GPU"),
            NoGpus::NoLibrary(m) => write!(f, "no NVML library ({m})"),
            NoGpus::Init(e) => write!(f, "NVML did not start: {e}"),
            NoGpus::NoMatch => write!(f, "none of the job's GPUs is known to NVML"),
        }
    }
}

/// One of the job's cards: what is fixed, and the NVML handle.
struct Card {
    info: GpuCard,
    handle: nvml_wrapper_sys::bindings::nvmlDevice_t,
    /// Active NVLink links (their ids), read once.
    links: Vec<u32>,
    /// Whether the card's critical Xid events are registered in the collector's event set.
    xid: GpuReading<()>,
    /// Where the card's ledger counters continue from; `None` on a MIG slice (see
    /// [`open_mig`]).
    ledger: Option<ledger::LedgerCursor>,
}

/// Reads the job's cards. Not `Sync`; create and use it on one thread (see [`worker`]).
pub struct GpuCollector {
    // Field order: cards (raw handles) before the library they point into.
    cards: Vec<Card>,
    /// The NVML event set the cards' critical Xid events are registered in (`None`: none
    /// could be); freed in `Drop`, before `nvml` shuts down.
    xid_set: Option<nvmlEventSet_t>,
    nvml: Nvml,
    timings: Option<Vec<(&'static str, Duration)>>,
}

impl Drop for GpuCollector {
    fn drop(&mut self) {
        // The GPM samples the cursors hold are NVML's memory: free them before it shuts down.
        for c in &mut self.cards {
            if let Some(l) = c.ledger.as_mut() {
                l.release(&self.nvml);
            }
        }
        if let (Some(set), Ok(free)) = (self.xid_set.take(), &self.nvml.lib().nvmlEventSetFree) {
            // SAFETY: `set` came from nvmlEventSetCreate on this library and is freed once.
            unsafe {
                free(set);
            }
        }
    }
}

// SAFETY: NVML is thread-safe (nvml.h: "all NVML functions are thread-safe") and device
// handles are plain identifiers valid until nvmlShutdown, which only Drop of `nvml` calls.
unsafe impl Send for GpuCollector {}

/// A MIG slice as the job's card: its own UUID, name, memory and processes; the NVML index
/// and PCI bus id of the card it is on. No power limit, clock limit or NVLinks of its own:
/// those are the whole card's, shared with the other slices' jobs, so they are not
/// credited to this one (NVML answers NOT_SUPPORTED for a slice's utilization and power).
/// No ledger either: a slice has no utilization samples, and the card's limiters and GPM
/// count every slice's work, so they would credit the neighbours' time to this job.
fn open_mig(nvml: &Nvml, uuid: &str, cuda_index: Option<u32>) -> Option<Card> {
    let dev = nvml.device_by_uuid(uuid).ok()?;
    if !dev.mig_is_mig_device_handle().ok()? {
        return None;
    }
    let parent = dev.mig_parent_device().ok()?;
    let info = GpuCard {
        uuid: dev.uuid().unwrap_or_else(|_| uuid.to_string()),
        cuda_index,
        nvml_index: parent.index().ok()?,
        pci_bus_id: parent.pci_info().ok().map(|p| p.bus_id),
        name: dev.name().ok(),
        memory_total_bytes: dev.memory_info().ok().map(|m| m.total),
        sm_clock_max_mhz: None,
        power_limit_watts: None,
        nvlink_links: None,
    };
    // SAFETY: the handle stays valid while `nvml` lives (it is stored beside it).
    let handle = unsafe { dev.handle() };
    Some(Card {
        info,
        handle,
        links: Vec::new(),
        xid: Err(GpuError::NotSupported),
        ledger: None,
    })
}

/// A whole card the job was allocated (NVML index `index`) as the job's card: what it is,
/// its active NVLinks, and its handle for the readings.
fn open_card(dev: &Device<'_>, uuid: String, index: u32, cuda_index: Option<u32>) -> Card {
    let links: Vec<u32> = (0..NVLINK_MAX_LINKS)
        .map_while(|l| dev.link_wrapper_for(l).is_active().ok().map(|a| (l, a)))
        .filter(|(_, a)| *a)
        .map(|(l, _)| l)
        .collect();
    let nvlink_ok = dev.link_wrapper_for(0).is_active();
    let info = GpuCard {
        uuid,
        cuda_index,
        nvml_index: index,
        pci_bus_id: dev.pci_info().ok().map(|p| p.bus_id),
        name: dev.name().ok(),
        memory_total_bytes: dev.memory_info().ok().map(|m| m.total),
        sm_clock_max_mhz: dev.max_clock_info(Clock::SM).ok(),
        power_limit_watts: dev
            .enforced_power_limit()
            .ok()
            .map(|mw| f64::from(mw) / 1000.0),
        nvlink_links: match nvlink_ok {
            Ok(_) => Some(links.len() as u32),
            Err(NvmlError::NotSupported) | Err(NvmlError::InvalidArg) => Some(0),
            Err(_) => None,
        },
    };
    // SAFETY: the handle stays valid while `nvml` lives (it is stored beside it).
    let handle = unsafe { dev.handle() };
    Card {
        info,
        handle,
        links,
        xid: Err(GpuError::NotSupported),
        ledger: Some(ledger::LedgerCursor::starting_now()),
    }
}

impl GpuCollector {
    /// Loads NVML from `lib_path`, initialises it and finds the `wanted` cards. This may
    /// block (driver initialisation): call it off any SPANK callback (see [`worker`]).
    pub fn open(lib_path: &Path, wanted: &[Wanted]) -> Result<GpuCollector, NoGpus> {
        Self::open_allocated(lib_path, wanted, None)
    }

    /// As [`open`](Self::open), keeping only cards whose NVML index (a MIG slice's card's)
    /// is in `allocated` — Slurm's GRES indices for the job on this node, from a source the
    /// job cannot change (the prolog's environment, see `spool::Allocation`). The job's
    /// environment then only orders and narrows, it never widens (docs/design.md §7).
    pub fn open_allocated(
        lib_path: &Path,
        wanted: &[Wanted],
        allocated: Option<&[u32]>,
    ) -> Result<GpuCollector, NoGpus> {
        let allowed = |index: u32| allocated.is_none_or(|a| a.contains(&index));
        let wanted: Vec<Wanted> = wanted
            .iter()
            .filter(|w| match w.card {
                CardRef::Index(i) => allowed(i),
                CardRef::Uuid(_) => allocated.is_none_or(|a| !a.is_empty()),
            })
            .cloned()
            .collect();
        let wanted = &wanted[..];
        if wanted.is_empty() {
            return Err(NoGpus::NoneRequested);
        }
        let nvml = match Nvml::builder().lib_path(OsStr::new(lib_path)).init() {
            Ok(n) => n,
            Err(NvmlError::LibloadingError(e)) => return Err(NoGpus::NoLibrary(e.to_string())),
            Err(e) => return Err(NoGpus::Init(gpu_error(&e))),
        };
        let count = nvml
            .device_count()
            .map_err(|e| NoGpus::Init(gpu_error(&e)))?;
        let mut cards: Vec<(Option<u32>, Card)> = Vec::new();
        for index in 0..count.min(256) {
            if !allowed(index) {
                continue;
            }
            let Ok(dev) = nvml.device_by_index(index) else {
                continue;
            };
            let Ok(uuid) = dev.uuid() else { continue };
            let hit = wanted.iter().find(|w| match &w.card {
                CardRef::Index(i) => *i == index,
                CardRef::Uuid(u) => u.eq_ignore_ascii_case(&uuid),
            });
            let Some(w) = hit else { continue };
            cards.push((w.cuda_index, open_card(&dev, uuid, index, w.cuda_index)));
        }
        // MIG slices (`CUDA_VISIBLE_DEVICES=MIG-…`): no index of their own, found by UUID.
        for w in wanted {
            let CardRef::Uuid(u) = &w.card else { continue };
            if !u.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("MIG-")) {
                continue;
            }
            if let Some(card) = open_mig(&nvml, u, w.cuda_index) {
                if allowed(card.info.nvml_index) {
                    cards.push((w.cuda_index, card));
                }
            }
        }
        if cards.is_empty() {
            return Err(NoGpus::NoMatch);
        }
        // cuda:0, cuda:1, ... first; cards without an order after, by NVML index.
        cards.sort_by_key(|(c, card)| (c.unwrap_or(u32::MAX), card.info.nvml_index));
        let mut cards: Vec<Card> = cards.into_iter().map(|(_, c)| c).collect();
        let xid_set = watch_xid(&nvml, &mut cards);
        Ok(GpuCollector {
            cards,
            xid_set,
            nvml,
            timings: None,
        })
    }

    /// The job's cards, in `cuda:N` order.
    pub fn cards(&self) -> Vec<GpuCard> {
        self.cards.iter().map(|c| c.info.clone()).collect()
    }

    /// Counts the cards' time with no work from `since_unix_us` (the step's start: NVML's
    /// ring also holds samples from before it, which are not the job's) instead of from when
    /// NVML opened. Call it before the first reading.
    pub fn count_ledger_from(&mut self, since_unix_us: u64) {
        for c in &mut self.cards {
            if let Some(l) = c.ledger.as_mut() {
                l.release(&self.nvml);
                *l = ledger::LedgerCursor::new(since_unix_us);
            }
        }
    }

    /// Records the duration of every NVML call of the next reads (for the real-GPU check).
    pub fn set_timing(&mut self, on: bool) {
        self.timings = on.then(Vec::new);
    }

    /// The per-call durations recorded since the last call (empty unless timing is on).
    pub fn take_timings(&mut self) -> Vec<(&'static str, Duration)> {
        self.timings
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn device(&self, i: usize) -> Device<'_> {
        // SAFETY: the handle came from this `nvml` and it is still initialised.
        unsafe { Device::new(self.cards[i].handle, &self.nvml) }
    }

    /// How each pair of the job's cards is wired: NVLink (with the number of direct links,
    /// matched by the remote end's PCI bus id) or the PCIe common ancestor. Once per job.
    pub fn topology(&self) -> Vec<GpuLink> {
        let mut out = Vec::new();
        for a in 0..self.cards.len() {
            for b in a + 1..self.cards.len() {
                let da = self.device(a);
                let b_bus = self.cards[b].info.pci_bus_id.clone();
                let nvlinks = self.cards[a]
                    .links
                    .iter()
                    .filter(|&&l| {
                        let remote = da.link_wrapper_for(l).remote_pci_info().ok();
                        matches!((&remote, &b_bus), (Some(r), Some(bb)) if r.bus_id.eq_ignore_ascii_case(bb))
                    })
                    .count() as u32;
                // Through an NVSwitch the links end at the switch, not at the other card:
                // NVML's peer-to-peer status over NVLink tells those apart from PCIe.
                let p2p_nvlink = nvlinks == 0
                    && !self.cards[a].links.is_empty()
                    && matches!(
                        da.p2p_status(&self.device(b), P2pCapabilitiesIndex::NvLink),
                        Ok(P2pStatus::Ok)
                    );
                let level = if nvlinks > 0 || p2p_nvlink {
                    "nvlink".to_string()
                } else {
                    match da.topology_common_ancestor(self.device(b)) {
                        Ok(TopologyLevel::Internal) => "internal",
                        Ok(TopologyLevel::Single) => "single",
                        Ok(TopologyLevel::Multiple) => "multiple",
                        Ok(TopologyLevel::HostBridge) => "hostbridge",
                        Ok(TopologyLevel::Node) => "node",
                        Ok(TopologyLevel::System) => "system",
                        Err(_) => "unknown",
                    }
                    .to_string()
                };
                out.push(GpuLink {
                    a_uuid: self.cards[a].info.uuid.clone(),
                    b_uuid: self.cards[b].info.uuid.clone(),
                    level,
                    nvlink_links: nvlinks,
                });
            }
        }
        out
    }

    /// One reading of every card, in [`cards`](Self::cards) order. `is_job_pid` decides
    /// which processes on a card are the job's (see [`pids::job_owns_pid`]).
    pub fn read(&mut self, is_job_pid: &mut dyn FnMut(u32) -> bool) -> Vec<GpuSample> {
        let s = Instant::now();
        let xids = self.drain_xid();
        if let Some(v) = self.timings.as_mut() {
            v.push(("event_set_wait_xid", s.elapsed()));
        }
        xids.into_iter()
            .enumerate()
            .map(|(i, xid)| self.read_card(i, is_job_pid, xid))
            .collect()
    }

    /// The critical Xid events NVML holds for the job's cards, per card: polled with a 0 ms
    /// timeout (never waits for one), at most [`MAX_XID_PER_READ`] per reading. A failed
    /// wait marks the cards it left without events as unreadable for this reading.
    fn drain_xid(&mut self) -> Vec<GpuReading<Vec<u64>>> {
        let mut out: Vec<GpuReading<Vec<u64>>> = self
            .cards
            .iter()
            .map(|c| c.xid.map(|_| Vec::new()))
            .collect();
        let Some(set) = self.xid_set else {
            return out;
        };
        let mut failed = None;
        match self.nvml.lib().nvmlEventSetWait_v2.as_ref() {
            Err(_) => failed = Some(GpuError::FunctionNotFound),
            Ok(wait) => {
                for _ in 0..MAX_XID_PER_READ {
                    // SAFETY: plain data; NVML fills it on success.
                    let mut data: nvmlEventData_t = unsafe { std::mem::zeroed() };
                    // SAFETY: `set` is live (freed only in Drop); timeout 0 never blocks.
                    let rc = unsafe { wait(set, &mut data, 0) };
                    match GpuError::from_nvml_return(rc) {
                        None => {
                            if data.eventType & EVENT_XID_CRITICAL_ERROR == 0 {
                                continue;
                            }
                            let i = self.cards.iter().position(|c| c.handle == data.device);
                            if let Some(Ok(list)) = i.map(|i| &mut out[i]) {
                                list.push(data.eventData);
                            }
                        }
                        Some(GpuError::Timeout) => break,
                        Some(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
            }
        }
        if let Some(e) = failed {
            for o in &mut out {
                if matches!(o, Ok(list) if list.is_empty()) {
                    *o = Err(e);
                }
            }
        }
        out
    }

    fn read_card(
        &mut self,
        i: usize,
        is_job_pid: &mut dyn FnMut(u32) -> bool,
        xid: GpuReading<Vec<u64>>,
    ) -> GpuSample {
        let mut timings = self.timings.take();
        let mut t = |name: &'static str, start: Instant| {
            if let Some(v) = timings.as_mut() {
                v.push((name, start.elapsed()));
            }
        };
        let dev = self.device(i);
        let s = Instant::now();
        let util = r(dev.utilization_rates());
        t("utilization_rates", s);
        // A card that fell off the bus answers every call the same way, and on a real
        // driver each such call can be slow: stop at the first.
        if let Err(GpuError::GpuIsLost) = util {
            self.timings = timings;
            // The Xid events stay: Xid 79 is how a card announces it fell off the bus.
            return GpuSample {
                xid_errors: xid,
                ..GpuSample::all_failed(GpuError::GpuIsLost)
            };
        }
        let s = Instant::now();
        let mem = r(dev.memory_info());
        t("memory_info", s);
        let s = Instant::now();
        let power = r(dev.power_usage());
        t("power_usage", s);
        let s = Instant::now();
        let limit = r(dev.enforced_power_limit());
        t("enforced_power_limit", s);
        let s = Instant::now();
        let temp = r(dev.temperature(TemperatureSensor::Gpu));
        t("temperature", s);
        let s = Instant::now();
        let sm = r(dev.clock_info(Clock::SM));
        t("clock_info_sm", s);
        let s = Instant::now();
        let throttle = r(dev.current_throttle_reasons()).map(|b| b.bits());
        t("current_throttle_reasons", s);
        let s = Instant::now();
        let energy = r(dev.total_energy_consumption());
        t("total_energy_consumption", s);
        let s = Instant::now();
        let procs = r(dev.running_compute_processes()).map(|p| split_processes(&p, is_job_pid));
        t("running_compute_processes", s);
        let s = Instant::now();
        let ecc = r(dev.total_ecc_errors(MemoryError::Uncorrected, EccCounter::Volatile));
        t("total_ecc_errors", s);
        let s = Instant::now();
        let nvlink = self.nvlink_counters(i);
        t("field_values_nvlink", s);
        let s = Instant::now();
        let pcie_tx = r(dev.pcie_throughput(PcieUtilCounter::Send));
        t("pcie_throughput_tx", s);
        let s = Instant::now();
        let pcie_rx = r(dev.pcie_throughput(PcieUtilCounter::Receive));
        t("pcie_throughput_rx", s);
        self.timings = timings;
        let ledger = self.card_ledger(i);
        GpuSample {
            utilization_percent: util.as_ref().map(|u| u.gpu).map_err(|e| *e),
            memory_utilization_percent: util.map(|u| u.memory),
            memory_used_bytes: mem.map(|m| m.used),
            power_draw_milliwatts: power,
            power_limit_milliwatts: limit,
            temperature_celsius: temp,
            sm_clock_mhz: sm,
            throttle_reasons: throttle,
            energy_millijoules: energy,
            processes: procs,
            ecc_uncorrected: ecc,
            nvlink,
            pcie_tx_kib_per_s: pcie_tx,
            pcie_rx_kib_per_s: pcie_rx,
            xid_errors: xid,
            ledger,
        }
    }

    /// The card's ledger counters, advancing its cursor (a MIG slice has none).
    fn card_ledger(&mut self, i: usize) -> GpuLedger {
        let Some(mut cursor) = self.cards[i].ledger.take() else {
            return GpuLedger::all_failed(GpuError::NotSupported);
        };
        let s = Instant::now();
        let got = ledger::read_ledger(&self.device(i), &mut cursor);
        if let Some(v) = self.timings.as_mut() {
            v.push(("ledger", s.elapsed()));
        }
        self.cards[i].ledger = Some(cursor);
        got
    }

    /// NVLink data counters summed over *every* active link. nvml-wrapper's
    /// `field_values_for` always sends scopeId 0 (link 0 only), so this calls
    /// `nvmlDeviceGetFieldValues` itself with one TX and one RX entry per link, `scopeId` =
    /// the link id. Each entry carries its own return code; any failed entry fails the sum.
    fn nvlink_counters(&self, i: usize) -> GpuReading<NvlinkCounters> {
        use nvml_wrapper_sys::bindings::{nvmlFieldValue_t, nvmlReturn_t};
        let links = &self.cards[i].links;
        if links.is_empty() {
            return Err(GpuError::NotSupported);
        }
        let get = self
            .nvml
            .lib()
            .nvmlDeviceGetFieldValues
            .as_ref()
            .map_err(|_| GpuError::FunctionNotFound)?;
        let mut values: Vec<nvmlFieldValue_t> = Vec::with_capacity(links.len() * 2);
        for &l in links {
            for field in [
                NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
                NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
            ] {
                // SAFETY: nvmlFieldValue_t is plain data; all-zero is a valid value.
                let mut v: nvmlFieldValue_t = unsafe { std::mem::zeroed() };
                v.fieldId = field;
                v.scopeId = l;
                values.push(v);
            }
        }
        // SAFETY: `values` holds `len` initialised entries that NVML fills in place.
        let rc: nvmlReturn_t = unsafe {
            get(
                self.cards[i].handle,
                values.len() as i32,
                values.as_mut_ptr(),
            )
        };
        if let Some(e) = GpuError::from_nvml_return(rc) {
            return Err(e);
        }
        let mut sum = NvlinkCounters::default();
        for v in &values {
            if let Some(e) = GpuError::from_nvml_return(v.nvmlReturn) {
                return Err(e);
            }
            // Throughput fields are NVML_VALUE_TYPE_UNSIGNED_LONG_LONG (KiB).
            // SAFETY: reading the union's 64-bit member; NVML wrote it for this type.
            let kib = unsafe { v.value.ullVal };
            if v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX {
                sum.tx_kib = sum.tx_kib.saturating_add(kib);
            } else {
                sum.rx_kib = sum.rx_kib.saturating_add(kib);
            }
        }
        Ok(sum)
    }
}

/// Creates one event set and registers every card's critical Xid events in it; records on
/// each card whether that worked (`NOT_SUPPORTED` where the platform has no Xid events).
/// `None` when no card could be registered (the set is freed again).
fn watch_xid(nvml: &Nvml, cards: &mut [Card]) -> Option<nvmlEventSet_t> {
    let lib = nvml.lib();
    let fail = |cards: &mut [Card], e: GpuError| {
        for c in cards.iter_mut() {
            c.xid = Err(e);
        }
    };
    let (Ok(create), Ok(register), Ok(free), Ok(_)) = (
        lib.nvmlEventSetCreate.as_ref(),
        lib.nvmlDeviceRegisterEvents.as_ref(),
        lib.nvmlEventSetFree.as_ref(),
        lib.nvmlEventSetWait_v2.as_ref(),
    ) else {
        fail(cards, GpuError::FunctionNotFound);
        return None;
    };
    let mut set: nvmlEventSet_t = std::ptr::null_mut();
    // SAFETY: NVML writes the new set's handle into `set`.
    if let Some(e) = GpuError::from_nvml_return(unsafe { create(&mut set) }) {
        fail(cards, e);
        return None;
    }
    for i in 0..cards.len() {
        // SAFETY: a live device handle and the set just created.
        let rc = unsafe { register(cards[i].handle, EVENT_XID_CRITICAL_ERROR, set) };
        cards[i].xid = match GpuError::from_nvml_return(rc) {
            None => Ok(()),
            // nvml.h: after an unknown error the whole set is in an undefined state.
            Some(GpuError::Unknown) => {
                fail(cards, GpuError::Unknown);
                break;
            }
            Some(e) => Err(e),
        };
    }
    if cards.iter().all(|c| c.xid.is_err()) {
        // SAFETY: created above, freed once, not used after.
        unsafe {
            free(set);
        }
        return None;
    }
    Some(set)
}

/// The job's processes vs everyone else's. A process whose memory NVML cannot give
/// (`NVML_VALUE_NOT_AVAILABLE`) is counted but adds no bytes.
fn split_processes(list: &[ProcessInfo], is_job_pid: &mut dyn FnMut(u32) -> bool) -> GpuProcesses {
    use nvml_wrapper::enums::device::UsedGpuMemory;
    let mut p = GpuProcesses::default();
    for proc_ in list {
        let bytes = match proc_.used_gpu_memory {
            UsedGpuMemory::Used(b) => b,
            UsedGpuMemory::Unavailable => 0,
        };
        if is_job_pid(proc_.pid) {
            p.job_processes += 1;
            p.job_memory_bytes = p.job_memory_bytes.saturating_add(bytes);
        } else {
            p.other_processes += 1;
            p.other_memory_bytes = p.other_memory_bytes.saturating_add(bytes);
        }
    }
    p
}
