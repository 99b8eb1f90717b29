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

/// `s` split at the first `c` (ASCII), as [`str::split_once`] does; by bytes, which a
/// `char` pattern's searcher is several times slower at on sacct's short values.
pub fn split_once_ascii(s: &str, c: u8) -> Option<(&str, &str)> {
    debug_assert!(c.is_ascii());
    let i = s.bytes().position(|b| b == c)?;
    Some((&s[..i], &s[i + 1..]))
}

/// `s` split at every `c` (ASCII), as [`str::split`] does.
pub fn split_ascii(s: &str, c: u8) -> impl Iterator<Item = &str> {
    debug_assert!(c.is_ascii());
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let r = rest?;
        match split_once_ascii(r, c) {
            Some((a, b)) => {
                rest = Some(b);
                Some(a)
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// Slurm's time format into seconds: `minutes`, `minutes:seconds`, `hours:minutes:seconds`,
/// `days-hours`, `days-hours:minutes`, `days-hours:minutes:seconds`, seconds with a fraction
/// (`00:04.135`, as sacct prints CPU times). `UNLIMITED`, `Partition_Limit`, `INVALID` and
/// empty are `None`.
pub fn parse_duration(s: &str) -> Option<f64> {
    let s = s.trim();
    let n = |x: &str| x.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0);
    let (days, rest) = match split_once_ascii(s, b'-') {
        Some((d, r)) => (Some(d.parse::<u64>().ok()? as f64), r),
        None => (None, s),
    };
    // Up to three `:`-separated parts, without collecting them (sacct prints millions).
    let mut it = split_ascii(rest, b':');
    let parts = [it.next(), it.next(), it.next(), it.next()];
    let secs = match (days, parts) {
        (Some(_), [Some(h), None, ..]) => n(h)? * 3600.0,
        (Some(_), [Some(h), Some(m), None, _]) => n(h)? * 3600.0 + n(m)? * 60.0,
        (None, [Some(m), None, ..]) => n(m)? * 60.0,
        (None, [Some(m), Some(s), None, _]) => n(m)? * 60.0 + n(s)?,
        (_, [Some(h), Some(m), Some(s), None]) => n(h)? * 3600.0 + n(m)? * 60.0 + n(s)?,
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
    fn ascii_splits_are_strs_splits() {
        for s in [
            "",
            "a",
            ",",
            "a,b",
            ",a,",
            "cpu=2,mem=1G,,node=1",
            "é,ü,",
            "a,,b",
        ] {
            assert_eq!(
                split_ascii(s, b',').collect::<Vec<_>>(),
                s.split(',').collect::<Vec<_>>()
            );
            assert_eq!(split_once_ascii(s, b','), s.split_once(','));
        }
    }

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
