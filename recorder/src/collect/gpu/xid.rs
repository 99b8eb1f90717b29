//! What a critical Xid code means, in a user's words (NVIDIA's Xid catalogue, the codes a
//! job is likely to meet). NVML delivers only the code; the meaning is ours to say.

/// The meaning of `xid`, or `None` for a code not in the table (shown as the bare code).
pub fn meaning(xid: u64) -> Option<&'static str> {
    Some(match xid {
        13 => "graphics engine exception (often an out-of-range access in the job's kernel)",
        31 => "GPU memory page fault (often an illegal address in the job's kernel)",
        43 => "GPU stopped processing (the job's context hit a fault)",
        45 => "preemptive cleanup after a fault or a killed process",
        48 => "double-bit ECC error: memory contents were lost",
        61 | 62 => "internal micro-controller error: the card may need a reset",
        63 | 64 => "ECC page retirement or row remapping event",
        68 => "video processor exception",
        74 => "NVLink error",
        79 => "the GPU has fallen off the bus: the card is lost until reset",
        92 => "high single-bit ECC error rate",
        94 => "contained ECC error: the affected process was stopped",
        95 => "uncontained ECC error: every process on the card was stopped",
        119 | 120 => "GSP firmware error: the card may need a reset",
        _ => return None,
    })
}

/// Codes that say the card itself is faulty (not the job's code): worth telling the admins.
pub fn is_hardware(xid: u64) -> bool {
    matches!(
        xid,
        48 | 61 | 62 | 63 | 64 | 74 | 79 | 92 | 94 | 95 | 119 | 120
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_unknown_codes() {
        assert!(meaning(79).unwrap().contains("fallen off the bus"));
        assert!(is_hardware(79));
        assert!(!is_hardware(13), "13 is usually the job's own kernel");
        assert_eq!(meaning(9999), None);
    }
}
