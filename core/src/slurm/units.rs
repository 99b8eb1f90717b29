//! Slurm's value syntax, parsed once for every command's output: sizes with binary unit
//! suffixes and durations in Slurm's time format. sacct, sstat and squeue all print these.

/// `105460K`, `600.05M`, `1G`, `0`: binary units. `default_unit` for a bare number (sacct
/// prints MaxRSS bare in bytes when under 1 KiB; ReqMem, TRES `mem=` and squeue's `%m` bare
/// are MiB).
pub fn parse_size(s: &str, default_unit: u64) -> Option<u64> {
    let s = trim(s);
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
    let v = decimal(num)?;
    (v.is_finite() && v >= 0.0).then(|| (v * mult as f64).round() as u64)
}

/// `s.trim()`, sooner for a value that begins and ends with printable ASCII (nearly all of
/// sacct's millions), which no whitespace is: then there is nothing to trim.
pub fn trim(s: &str) -> &str {
    let printable = |b: &u8| (b'!'..=b'~').contains(b);
    match (s.as_bytes().first(), s.as_bytes().last()) {
        (Some(a), Some(z)) if printable(a) && printable(z) => s,
        _ => s.trim(),
    }
}

/// What `s.parse::<f64>().ok()` gives, sooner for the plain decimals sacct prints by the
/// million (`4096`, `04.135`): at most 15 digits, with a point between two of them, are an
/// integer below 2^53 over a power of ten, both exact in an `f64`, so one division rounds
/// them as the full parser does (Clinger's fast path). Anything else goes to the full parser.
pub fn decimal(s: &str) -> Option<f64> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 16 || !b[0].is_ascii_digit() || !b[b.len() - 1].is_ascii_digit() {
        return s.parse().ok();
    }
    let (mut m, mut scale, mut point) = (0u64, 1u64, false);
    for &c in b {
        match c {
            b'0'..=b'9' => {
                m = m * 10 + u64::from(c - b'0');
                if point {
                    scale *= 10;
                }
            }
            b'.' if !point => point = true,
            _ => return s.parse().ok(),
        }
    }
    // At most 15 digits (16 bytes with the point): m < 10^15 < 2^53, scale ≤ 10^14.
    if b.len() == 16 && !point {
        return s.parse().ok();
    }
    Some(m as f64 / scale as f64)
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
    let s = trim(s);
    let n = |x: &str| decimal(x).filter(|v| v.is_finite() && *v >= 0.0);
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
    fn trim_is_strs_trim() {
        for s in [
            "",
            " ",
            "a",
            " a ",
            "a b",
            "\ta\n",
            "\u{a0}x",
            "x\u{2003}",
            "é",
            "~!",
            "\u{7f}",
        ] {
            assert_eq!(trim(s), s.trim(), "{s:?}");
        }
    }

    #[test]
    fn decimals_read_as_the_full_parser_reads_them() {
        let mut cases: Vec<String> = [
            "",
            ".",
            "5.",
            ".5",
            "1.2.3",
            "-1",
            "+1",
            "1e3",
            "inf",
            "NaN",
            "0",
            "00",
            "007.50",
            "123456789012345",
            "1234567890123456",
            "12345678901234.5",
            "1234567890123.45",
            "0.000000000000001",
            "9999999999999.99",
            "1 2",
            "١",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every millisecond figure sacct prints for a minute, and a spread of sizes.
        for ms in 0..60_000 {
            cases.push(format!("{:02}.{:03}", ms / 1000, ms % 1000));
        }
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let digits = format!("{}", x % 10_u64.pow((x % 16) as u32 + 1));
            let p = (x >> 40) as usize % (digits.len() + 1);
            cases.push(format!("{}.{}", &digits[..p], &digits[p..]));
            cases.push(digits);
        }
        for c in &cases {
            let want = c.parse::<f64>().ok();
            assert_eq!(
                decimal(c).map(f64::to_bits),
                want.map(f64::to_bits),
                "{c:?}"
            );
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
