//! Slurm's value syntax, parsed once for every command's output: sizes with binary unit
//! suffixes and durations in Slurm's time format. sacct, sstat and squeue all print these.

/// `105460K`, `600.05M`, `1G`, `0`: binary units. `default_unit` for a bare number (sacct
/// prints MaxRSS bare in bytes when under 1 KiB; ReqMem, TRES `mem=` and squeue's `%m` bare
/// are MiB).
pub fn parse_size(s: &str, default_unit: u64) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    let (num, unit) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, ""),
    };
    let mult: u64 = match unit {
        "" => default_unit,
        "K" | "k" => 1 << 10,
        "M" | "m" => 1 << 20,
        "G" | "g" => 1 << 30,
        "T" | "t" => 1 << 40,
        "P" | "p" => 1 << 50,
        _ => return None,
    };
    let v: f64 = num.parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| (v * mult as f64).round() as u64)
}

/// Slurm's time format into seconds: `minutes`, `minutes:seconds`, `hours:minutes:seconds`,
/// `days-hours`, `days-hours:minutes`, `days-hours:minutes:seconds`, seconds with a fraction
/// (`00:04.135`, as sacct prints CPU times). `UNLIMITED`, `Partition_Limit`, `INVALID` and
/// empty are `None`.
pub fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let n = |x: &str| x.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (Some(d.parse::<u64>().ok()? as f64), r),
        None => (None, s),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    let secs = match (days, parts.as_slice()) {
        (Some(_), [h]) => n(h)? * 3600.0,
        (Some(_), [h, m]) => n(h)? * 3600.0 + n(m)? * 60.0,
        (None, [m]) => n(m)? * 60.0,
        (None, [m, s]) => n(m)? * 60.0 + n(s)?,
        (_, [h, m, s]) => n(h)? * 3600.0 + n(m)? * 60.0 + n(s)?,
        _ => return None,
    };
    Some(days.unwrap_or(0.0) * 86400.0 + secs)
}

/// A whole number of seconds in Slurm's time format (squeue and scontrol print no fractions).
pub fn parse_whole_seconds(s: &str) -> Option<u64> {
    parse_duration(s).map(|v| v.round() as u64)
}

/// A memory amount where a bare number is MiB and `0` means "not set" (squeue's `%m`,
/// scontrol's `MinMemoryNode`).
pub fn parse_memory_mib(s: &str) -> Option<u64> {
    parse_size(s, 1 << 20).filter(|&b| b > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_of_slurms_time_format() {
        assert_eq!(parse_duration("10"), Some(600.0));
        assert_eq!(parse_duration("0:10"), Some(10.0));
        assert_eq!(parse_duration("10:00"), Some(600.0));
        assert_eq!(parse_duration("1:02:03"), Some(3723.0));
        assert_eq!(parse_duration("2-01"), Some(2.0 * 86400.0 + 3600.0));
        assert_eq!(parse_duration("2-01:30"), Some(2.0 * 86400.0 + 5400.0));
        assert_eq!(parse_duration("2-01:00:00"), Some(2.0 * 86400.0 + 3600.0));
        assert_eq!(parse_duration("00:04.135"), Some(4.135));
        for bad in [
            "UNLIMITED",
            "Partition_Limit",
            "INVALID",
            "",
            "1:2:3:4",
            "x-1",
            "-1:00",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn sizes_in_binary_units() {
        assert_eq!(parse_size("105460K", 1), Some(105460 << 10));
        assert_eq!(parse_size("1.5G", 1), Some(3 << 29));
        assert_eq!(parse_size("512", 1 << 20), Some(512 << 20));
        assert_eq!(parse_size("0", 1 << 20), Some(0));
        assert_eq!(parse_size("4X", 1), None);
        assert_eq!(parse_size("", 1), None);
    }
}
