//! Progress lines in a job's log: how fast the job's own work went, as its tools print it.
//! Groundwork for issue 39's throughput series; so far tqdm's bar (which PyTorch Lightning and
//! Hugging Face print too, with a description such as `Epoch 3`), parsed from real captured
//! output (tests/fixtures/joblog/progress). Hand-written, like [`super::joblog`]: core is
//! linked into the root plugin, which carries no regex engine.
//!
//! tqdm redraws its bar with `\r`, so a log holds many readings on one `\n` line:
//! [`readings`] splits on both.

use serde::Serialize;

/// One progress reading: where the work was and how fast it went, as the tool said.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Progress {
    /// The bar's description before its `:` (`Epoch 3`), if any.
    pub label: Option<String>,
    pub done: u64,
    /// `None` for a bar without a known total (`1234it [...]`).
    pub total: Option<u64>,
    /// Iterations per second; `None` before tqdm has a rate (`?it/s`).
    pub per_second: Option<f64>,
    /// Seconds since the bar started, as tqdm printed them.
    pub elapsed_seconds: Option<u64>,
}

/// Every progress reading of `text`, in order.
pub fn readings(text: &str) -> Vec<Progress> {
    text.split(['\n', '\r']).filter_map(tqdm).collect()
}

/// tqdm's `[elapsed<remaining, rate, postfix…]` or `[elapsed, rate]` bracket, and the count
/// before it: `Epoch 3:  67%|██████▋   | 4/6 [00:01<00:00,  2.50it/s, loss=0.123]`,
/// `11it [00:00, 96.85it/s]`, `1/3 [00:01<00:02,  1.20s/it]`.
pub fn tqdm(line: &str) -> Option<Progress> {
    let open = line.rfind(" [")?;
    let close = open + line[open..].find(']')?;
    let inside = &line[open + 2..close];
    let mut fields = inside.split(", ");
    let times = fields.next()?;
    let rate = fields.next()?.trim();
    let per_second = match (rate.strip_suffix("it/s"), rate.strip_suffix("s/it")) {
        (Some("?"), _) => None,
        (Some(v), _) => Some(v.trim().parse::<f64>().ok()?),
        (None, Some(v)) => Some(1.0 / v.trim().parse::<f64>().ok().filter(|s| *s > 0.0)?),
        _ => return None,
    };
    let elapsed_seconds = clock_seconds(times.split('<').next()?);
    let before = line[..open].trim_end();
    let count = before.rsplit([' ', '|']).next()?;
    let (done, total) = match count.split_once('/') {
        Some((d, t)) => (d.parse().ok()?, Some(t.parse().ok()?)),
        None => (count.strip_suffix("it")?.parse().ok()?, None),
    };
    let label = before
        .split_once(':')
        .map(|(l, _)| l.trim().to_string())
        .filter(|l| !l.is_empty() && !l.contains('|'));
    Some(Progress {
        label,
        done,
        total,
        per_second,
        elapsed_seconds,
    })
}

/// `MM:SS` or `H:MM:SS` as seconds.
fn clock_seconds(s: &str) -> Option<u64> {
    s.trim()
        .split(':')
        .try_fold(0u64, |acc, p| Some(acc * 60 + p.parse::<u64>().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured from tqdm 4.70.1 (PyPI) on stderr: a 40-step bar, a described bar with a
    /// postfix, a bar without a total, and a slow bar (seconds per iteration).
    const CAPTURE: &str = include_str!("../../tests/fixtures/joblog/progress/tqdm-4.70.1.txt");

    #[test]
    fn every_bar_of_the_capture_is_read_in_order() {
        let r = readings(CAPTURE);
        let first = &r[0];
        assert_eq!(
            (first.done, first.total, first.per_second),
            (0, Some(40), None)
        );
        let last40 = r.iter().rfind(|p| p.total == Some(40)).unwrap();
        assert_eq!(last40.done, 40);
        // The described bar: its label and rate beside a postfix.
        let epoch = r
            .iter()
            .find(|p| p.label.as_deref() == Some("Epoch 3") && p.done == 4)
            .expect("the Epoch 3 bar");
        assert_eq!((epoch.total, epoch.per_second), (Some(6), Some(2.5)));
        // Without a total: a count and a rate.
        assert!(r
            .iter()
            .any(|p| p.total.is_none() && p.done == 11 && p.per_second == Some(96.85)));
        // Seconds per iteration are turned into a rate.
        let slow = r.iter().rfind(|p| p.total == Some(3)).unwrap();
        assert_eq!((slow.done, slow.elapsed_seconds), (3, Some(3)));
        assert!((slow.per_second.unwrap() - 1.0 / 1.2).abs() < 1e-9);
        // Counts never go backwards within one bar.
        let bar40: Vec<u64> = r
            .iter()
            .filter(|p| p.total == Some(40))
            .map(|p| p.done)
            .collect();
        assert!(bar40.windows(2).all(|w| w[0] <= w[1]), "{bar40:?}");
    }

    #[test]
    fn lines_that_are_not_bars_are_not_readings() {
        for l in [
            "",
            "Traceback (most recent call last):",
            "see [docs] for more",
            "array [1, 2]",
            "x [00:01, fast]",
            "12/x [00:01<00:02, 3.0it/s]",
        ] {
            assert_eq!(tqdm(l), None, "{l:?}");
        }
        assert_eq!(clock_seconds("1:02:03"), Some(3723));
    }
}
