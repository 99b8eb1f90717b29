//! Number formats people read: binary units for memory, Slurm's clock style for durations.

/// `1536` → `1.5 KiB`; plain bytes under 1 KiB.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else if v >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Seconds as Slurm prints elapsed time: `M:SS`, `H:MM:SS`, `D-HH:MM:SS`.
pub fn duration(s: u64) -> String {
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{sec:02}")
    } else {
        format!("{m}:{sec:02}")
    }
}

/// Cores with two decimals (`1.98`).
pub fn cores(c: f64) -> String {
    format!("{c:.2}")
}

/// The `HH:MM:SS` part of Slurm's `YYYY-MM-DDTHH:MM:SS`, with the date when it is not
/// `today` (also `YYYY-MM-DD`).
pub fn clock(ts: &str, today: Option<&str>) -> String {
    match ts.split_once('T') {
        Some((date, time)) if Some(date) == today => time.to_string(),
        Some((date, time)) => format!("{date} {time}"),
        None => ts.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(300 << 20), "300 MiB");
        assert_eq!(bytes(1 << 30), "1.0 GiB");
        assert_eq!(duration(42), "0:42");
        assert_eq!(duration(3723), "1:02:03");
        assert_eq!(duration(90_061), "1-01:01:01");
        assert_eq!(clock("2026-11-30T10:56:19", Some("2026-11-30")), "10:56:19");
        assert_eq!(
            clock("2026-12-01T10:56:19", Some("2026-11-30")),
            "2026-12-01 10:56:19"
        );
    }
}
