//! GPM (GPU Performance Monitoring, Hopper and newer): SM activity, SM occupancy, tensor
//! activity and DRAM bandwidth over the interval between two reads, from two GPM samples.
//! Before Hopper NVML has no GPM: [`GpmUnavailable::NotThisCard`].

use nvml_wrapper::enums::gpm::GpmMetricId;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::gpm::gpm_metrics_get;
use nvml_wrapper::{Device, GpmSample, Nvml};
use nvml_wrapper_sys::bindings::nvmlGpmSample_t;

use crate::collect::gpu::gpu_error;

pub use crate::sample::{Gpm, GpmUnavailable};

const METRICS: [GpmMetricId; 4] = [
    GpmMetricId::SmUtil,
    GpmMetricId::SmOccupancy,
    GpmMetricId::AnyTensorUtil,
    GpmMetricId::DramBwUtil,
];

#[derive(Debug, Default)]
pub(super) struct GpmCursor {
    /// Whether the card has GPM, once NVML said.
    supported: Option<bool>,
    /// The previous read's sample, owned (raw, so the cursor does not borrow the `Nvml`).
    prev: Option<nvmlGpmSample_t>,
}

// SAFETY: a GPM sample handle is NVML's heap pointer, used from one thread at a time.
unsafe impl Send for GpmCursor {}

impl GpmCursor {
    fn supported(&mut self, dev: &Device) -> Result<bool, GpmUnavailable> {
        if let Some(s) = self.supported {
            return Ok(s);
        }
        let s = match dev.gpm_support() {
            Ok(s) => s,
            // An older driver lacks the call or says so: no GPM on this card here.
            Err(NvmlError::NotSupported)
            | Err(NvmlError::FunctionNotFound)
            | Err(NvmlError::FailedToLoadSymbol(_)) => false,
            Err(e) => return Err(GpmUnavailable::Error(gpu_error(&e))),
        };
        self.supported = Some(s);
        Ok(s)
    }

    pub(super) fn read(&mut self, dev: &Device) -> Result<Gpm, GpmUnavailable> {
        if !self.supported(dev)? {
            return Err(GpmUnavailable::NotThisCard);
        }
        let nvml = dev.nvml();
        let now = dev
            .gpm_sample()
            .map_err(|e| GpmUnavailable::Error(gpu_error(&e)))?;
        let Some(h) = self.prev.take() else {
            self.prev = Some(now.into_handle());
            return Err(GpmUnavailable::FirstSample);
        };
        // SAFETY: `h` came from `into_handle` on this library and was owned only here; the
        // wrapper frees it when dropped at the end of this call.
        let prev = unsafe { GpmSample::from_handle(nvml, h) };
        let got = gpm_metrics_get(nvml, &prev, &now, &METRICS);
        self.prev = Some(now.into_handle());
        let got = got.map_err(|e| GpmUnavailable::Error(gpu_error(&e)))?;
        let value = |i: usize| got.get(i).and_then(|r| r.as_ref().ok()).map(|m| m.value);
        Ok(Gpm {
            sm_active_percent: value(0),
            sm_occupancy_percent: value(1),
            tensor_active_percent: value(2),
            dram_bw_util_percent: value(3),
        })
    }

    pub(super) fn release(&mut self, nvml: &Nvml) {
        if let Some(h) = self.prev.take() {
            // SAFETY: owned here, from this library; freed once, on drop.
            drop(unsafe { GpmSample::from_handle(nvml, h) });
        }
    }
}
