//! sacct's `standard` timestamps read without a `mktime` each: a window of a million jobs
//! prints eight million of them, and `mktime` (time zone rules, `getenv("TZ")`) was a tenth of
//! the parse.
//!
//! Exact, not approximate: an hour's start is converted once, and a time in it is that plus
//! its minutes and seconds only when the whole hour has one UTC offset (its last second is
//! 3599 s after its first); an hour with a time-zone transition in it is converted one time
//! at a time, as [`parse_time`] does. One cache per answer: the zone cannot change inside it.

use std::cell::{Cell, RefCell};

use super::parse_time;
use crate::fasthash::FastMap;
use crate::slurm::units::trim;

/// An hour's first second in Unix time, or `None` when the hour is not regular.
#[derive(Debug, Clone, Default)]
pub struct Times {
    hours: RefCell<FastMap<u64, Option<i64>>>,
    /// The hour asked last, and its entry: a line's times mostly share their hour, so most
    /// are read without a lookup.
    last: Cell<Option<(u64, Option<i64>)>>,
}

/// `YYYY-MM-DDTHH:MM:SS` as numbers, or `None` for any other form.
fn fields(s: &[u8]) -> Option<(u64, u64, u64)> {
    if s.len() != 19 || s[4] != b'-' || s[7] != b'-' || s[10] != b'T' || s[13] != b':' {
        return None;
    }
    if s[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        s[r].iter().try_fold(0u64, |v, &b| {
            b.is_ascii_digit().then(|| v * 10 + u64::from(b - b'0'))
        })
    };
    let hour_key = num(0..4)? * 1_000_000 + num(5..7)? * 10_000 + num(8..10)? * 100 + num(11..13)?;
    Some((hour_key, num(14..16)?, num(17..19)?))
}

impl Times {
    /// What [`parse_time`] gives for `s`.
    pub fn parse(&self, s: &str) -> Option<i64> {
        let t = trim(s);
        let Some((hour, min, sec)) = fields(t.as_bytes()).filter(|&(_, m, s)| m < 60 && s < 60)
        else {
            return parse_time(t);
        };
        let base = match self.last.get() {
            Some((h, base)) if h == hour => base,
            _ => {
                let base = *self.hours.borrow_mut().entry(hour).or_insert_with(|| {
                    let first = parse_time(&format!("{}:00:00", &t[..13]))?;
                    let last = parse_time(&format!("{}:59:59", &t[..13]))?;
                    (last - first == 3599).then_some(first)
                });
                self.last.set(Some((hour, base)));
                base
            }
        };
        match base {
            Some(b) => Some(b + (min * 60 + sec) as i64),
            None => parse_time(t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_as_mktime_for_every_form() {
        let t = Times::default();
        for s in [
            "2026-11-30T10:44:58",
            "2026-11-30T10:00:00",
            "2026-11-30T10:59:59",
            " 2026-11-30T10:44:58 ",
            "2026-03-29T02:30:00", // in a spring-forward gap in Europe's zones
            "2026-10-25T02:30:00", // in a fall-back repeat
            "2026-11-30T10:44",
            "2026-1-5T3:4:5",
            "Unknown",
            "None",
            "",
            "2026-11-30T10:61:00",
        ] {
            assert_eq!(t.parse(s), parse_time(s), "{s:?}");
            assert_eq!(t.parse(s), parse_time(s), "{s:?}, cached");
        }
        assert_eq!(
            t.parse("2026-11-30T10:44:58").unwrap() - t.parse("2026-11-30T10:00:00").unwrap(),
            44 * 60 + 58
        );
    }

    /// Every minute of the days around both of 2026's transitions, in zones with a one-hour
    /// and a half-hour shift, in a child process with that `TZ` (the zone is process-wide).
    #[test]
    fn the_same_as_mktime_across_transitions() {
        let zones = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe"];
        for tz in zones {
            if !std::path::Path::new("/usr/share/zoneinfo")
                .join(tz)
                .exists()
            {
                eprintln!("no zoneinfo for {tz}: not checked");
                continue;
            }
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "slurm::sacct::times::tests::transitions_in_this_zone",
                ])
                .args(["--ignored", "--nocapture"])
                .env("TZ", tz)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{tz}: {text}");
            assert!(text.contains("1 passed"), "{tz}: {text}");
        }
    }

    #[test]
    #[ignore = "run by the_same_as_mktime_across_transitions with TZ set"]
    fn transitions_in_this_zone() {
        let t = Times::default();
        let mut checked = 0;
        for (m, d0, d1) in [
            (3, 7, 9),
            (3, 28, 30),
            (4, 4, 6),
            (10, 3, 5),
            (10, 24, 26),
            (11, 1, 2),
        ] {
            for d in d0..=d1 {
                for h in 0..24 {
                    for min in 0..60 {
                        for sec in [0, 29, 59] {
                            let s = format!("2026-{m:02}-{d:02}T{h:02}:{min:02}:{sec:02}");
                            assert_eq!(t.parse(&s), parse_time(&s), "{s}");
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 70_000);
    }
}
