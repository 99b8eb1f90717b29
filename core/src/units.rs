//! How figures are written for people, one rule each, for the report, the findings, the
//! dashboard and the queue view alike: bytes in binary units to three significant figures,
//! durations in words (sentences) or in Slurm's own notation (beside Slurm's limits), clock
//! times, and the `#SBATCH` values Slurm accepts.

/// `10.95 GiB`, `300 MiB`, `512 KiB`, `12 B`.
pub fn bytes(b: u64) -> String {
    const U: [(&str, f64); 4] = [
        ("TiB", 1099511627776.0),
        ("GiB", 1073741824.0),
        ("MiB", 1048576.0),
        ("KiB", 1024.0),
    ];
    let x = b as f64;
    for (name, size) in U {
        if x >= size {
            let v = x / size;
            return if v >= 100.0 {
                format!("{v:.0} {name}")
            } else if v >= 10.0 {
                format!("{v:.1} {name}")
            } else {
                format!("{v:.2} {name}")
            };
        }
    }
    format!("{b} B")
}

/// `2 h 05 min`, `7 min 03 s`, `42 s`.
pub fn duration(secs: f64) -> String {
    if !secs.is_finite() || secs < 0.0 {
        return "n/a".into();
    }
    let s = secs.round() as u64;
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d} d {h:02} h {m:02} min")
    } else if h > 0 {
        format!("{h} h {m:02} min")
    } else if m > 0 {
        format!("{m} min {sec:02} s")
    } else {
        format!("{sec} s")
    }
}

/// Local wall-clock time `2026-11-30 10:45:05` of a Unix time in ms.
pub fn clock(t_unix_ms: i64) -> String {
    match crate::sys::local_time(t_unix_ms.div_euclid(1000)) {
        Some(t) => t.date_time(' '),
        None => format!("@{}", t_unix_ms / 1000),
    }
}

/// `HH:MM:SS` since the job started (for a time into the job).
pub fn offset(ms: i64) -> String {
    let s = (ms.max(0) + 500) / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// Seconds in Slurm's notation, as squeue prints elapsed times and limits: `M:SS`,
/// `H:MM:SS`, `D-HH:MM:SS`.
pub fn slurm_duration(s: u64) -> String {
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else if h > 0 {
        format!("{h}:{m:02}:{sec:02}")
    } else {
        format!("{m}:{sec:02}")
    }
}

/// The time part of Slurm's `YYYY-MM-DDTHH:MM:SS`, with the date when it is not `today`
/// (`YYYY-MM-DD`).
pub fn slurm_clock(ts: &str, today: Option<&str>) -> String {
    match ts.split_once('T') {
        Some((date, time)) if Some(date) == today => time.to_string(),
        Some((date, time)) => format!("{date} {time}"),
        None => ts.to_string(),
    }
}

/// Cores with two decimals (`1.98`).
pub fn cores(c: f64) -> String {
    format!("{c:.2}")
}

/// A `--mem` value Slurm accepts: whole MiB below 1 GiB (rounded up to 64 MiB), else whole
/// GiB rounded up.
pub fn mem_flag(b: u64) -> String {
    let r = mem_flag_bytes(b);
    if r.is_multiple_of(1 << 30) {
        format!("{}G", r >> 30)
    } else {
        format!("{}M", r >> 20)
    }
}

/// The bytes [`mem_flag`] stands for: what a suggestion really asks, for checks against free
/// memory.
pub fn mem_flag_bytes(b: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if b <= GIB {
        (b.div_ceil(64 * MIB).max(1) * 64 * MIB).min(GIB)
    } else {
        b.div_ceil(GIB).saturating_mul(GIB)
    }
}

/// A `--time` value: `D-HH:MM:SS` or `HH:MM:SS`, rounded up to 5 min (15 min above 2 h).
pub fn time_flag(secs: f64) -> String {
    let s = time_flag_seconds(secs);
    let (d, h, m) = (s / 86400, s / 3600 % 24, s / 60 % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:00")
    } else {
        format!("{h:02}:{m:02}:00")
    }
}

/// A `--time` value for a limit kept as it is: `D-HH:MM:SS` or `HH:MM:SS`, not rounded (a
/// job's limit is whole minutes already; advice that keeps it must print that limit).
pub fn time_limit_flag(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    let (d, h, m, sec) = (s / 86400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        format!("{d}-{h:02}:{m:02}:{sec:02}")
    } else {
        format!("{h:02}:{m:02}:{sec:02}")
    }
}

/// The seconds [`time_flag`] stands for.
pub fn time_flag_seconds(secs: f64) -> u64 {
    let step = if secs > 7200.0 { 900 } else { 300 };
    (secs.max(60.0) as u64).div_ceil(step) * step
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_notation() {
        assert_eq!(slurm_duration(42), "0:42");
        assert_eq!(slurm_duration(3723), "1:02:03");
        assert_eq!(slurm_duration(90_061), "1-01:01:01");
        assert_eq!(
            slurm_clock("2026-11-30T10:56:19", Some("2026-11-30")),
            "10:56:19"
        );
        assert_eq!(
            slurm_clock("2026-12-01T10:56:19", Some("2026-11-30")),
            "2026-12-01 10:56:19"
        );
    }

    #[test]
    fn figures() {
        assert_eq!(bytes(300 << 20), "300 MiB");
        assert_eq!(bytes(11_757_000_000), "10.9 GiB");
        assert_eq!(bytes(5), "5 B");
        assert_eq!(duration(3725.0), "1 h 02 min");
        assert_eq!(duration(42.4), "42 s");
        assert_eq!(mem_flag(120 << 20), "128M");
        assert_eq!(mem_flag((10 << 30) + 1), "11G");
        assert_eq!(time_flag(61.0), "00:05:00");
        assert_eq!(time_flag(2.0 * 86400.0 + 1.0), "2-00:15:00");
        assert_eq!(offset(65_400), "00:01:05");
        assert_eq!(mem_flag(1 << 30), "1G");
        assert_eq!(mem_flag(1000 << 20), "1G");
        assert_eq!(mem_flag_bytes(120 << 20), 128 << 20);
        assert_eq!(mem_flag_bytes((10 << 30) + 1), 11 << 30);
        assert_eq!(time_flag_seconds(61.0), 300);
    }
}
