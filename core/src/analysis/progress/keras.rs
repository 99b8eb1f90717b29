//! Keras's progress bar (`fit`, `evaluate`, `predict`): the batch count under its `Epoch N/M`,
//! the time per step turned into steps a second, and the epoch's seconds once it ends.
//!
//! What it prints (Keras 3.15.1 on JAX, stdout to a file): `Epoch 1/3`, then, redrawn with
//! backspaces and `\r` and coloured with terminal escapes even in a file (it redraws wherever
//! Python's `posix` module is loaded), `  2/300 ━━━━━━━━━━━━━━━━━━━━ 1:49 368ms/step - accuracy:
//! 0.5469 - loss: 0.6913` (the time is what is left) and at the epoch's end `300/300 ━━━━ 1s
//! 2ms/step - …` (the time is the epoch's). With `verbose=2` one line an epoch: `300/300 - 1s -
//! 3ms/step - …`. Keras 2 (tf.keras) draws `123/123 [==============================] - 9s
//! 7ms/step - loss: …`, with `- ETA: 1s` before its end. A target Keras does not know yet reads
//! `     5/Unknown 1s 5ms/step`.

use std::borrow::Cow;

use super::{Count, Rate, Reading, Tool};

/// The epoch the bar being drawn belongs to.
#[derive(Default)]
pub(super) struct Keras {
    epoch: Option<String>,
}

impl Keras {
    pub(super) fn line(&mut self, line: &str) -> Option<Reading> {
        let t = line.trim();
        if let Some(n) = t.strip_prefix("Epoch ") {
            if count(n).is_some() {
                self.epoch = Some(t.to_string());
                return None;
            }
        }
        let r = bar(t, &self.epoch)?;
        let c = r.count.as_ref()?;
        if c.total.is_some_and(|total| c.done >= total) {
            // The epoch's bar is done: an `evaluate` after it is no part of it.
            self.epoch = None;
        }
        Some(r)
    }
}

/// `2/300` or `5/Unknown`.
fn count(word: &str) -> Option<(u64, Option<u64>)> {
    let (done, total) = word.split_once('/')?;
    let total = match total {
        "Unknown" => None,
        t => Some(t.parse().ok()?),
    };
    Some((done.parse().ok()?, total))
}

/// One bar: its count, then the bar itself (Keras 3's `━━━━`, Keras 2's `[===>...]`, or
/// `verbose=2`'s `-`; none without a target), then times and `name: value` metrics.
fn bar(t: &str, epoch: &Option<String>) -> Option<Reading> {
    let mut words = t.split_whitespace().peekable();
    let (done, total) = count(words.next()?)?;
    let drawn = words.peek()?;
    let is_bar = drawn.chars().all(|c| c == '━')
        || (drawn.starts_with('[') && drawn.ends_with(']'))
        || *drawn == "-";
    // Without a target Keras 3 draws no bar: the time follows the count.
    if is_bar {
        words.next();
    } else if total.is_some() {
        return None;
    }
    // Before the end, Keras 3's bare time is what is left; at the end (or with no target) it is
    // the time spent.
    let ended = total.is_none_or(|total| done >= total);
    let mut r = Reading::new(Tool::Keras);
    let (mut eta, mut metrics) = (false, false);
    while let Some(w) = words.next() {
        if w == "-" {
            continue;
        } else if w == "ETA:" {
            eta = true;
        } else if w.ends_with(':') {
            metrics = true;
            words.next();
        } else if let Some(rate) = per_unit(w) {
            r.rates.extend(rate);
        } else if let Some(s) = w.strip_suffix('s').and_then(|s| s.parse::<u64>().ok()) {
            if ended && !eta {
                r.elapsed_seconds = Some(s as f64);
            }
            eta = false;
        } else if !(w.contains(':') || metrics) {
            // A word Keras does not print before its metrics: someone else's `2/3 …`.
            return None;
        }
    }
    r.label = epoch.clone();
    r.count = Some(Count { done, total });
    Some(r)
}

/// `368ms/step`, `2s/step`, `980us/step` (Keras 2: `3s/epoch`) as steps (epochs) a second;
/// `Some(None)` for a zero time, which has no rate.
fn per_unit(w: &str) -> Option<Option<Rate>> {
    let (time, unit) = w.split_once('/')?;
    if unit.is_empty() || !unit.chars().all(|c| c.is_ascii_lowercase()) {
        return None;
    }
    let (n, scale) = [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)]
        .into_iter()
        .find_map(|(suffix, scale)| Some((time.strip_suffix(suffix)?, scale)))?;
    let n: u64 = n.parse().ok()?;
    let unit: Cow<'static, str> = match unit {
        "step" => "steps/s".into(),
        u => format!("{u}s/s").into(),
    };
    Some(
        (n > 0)
            .then(|| Rate::new(1.0 / (n as f64 * scale), unit))
            .flatten(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::{readings, Reading};

    /// Captured from Keras 3.15.1 on JAX 0.10.2 (CPU), `KERAS_BACKEND=jax python train.py 1 >
    /// log`: a 64-256-256-1 dense model on 12000 random rows, `fit(epochs=3, batch_size=32,
    /// validation_split=0.2, verbose=1)`; escapes, backspaces and `\r` as Keras wrote them.
    const V1: &str = include_str!("../../../tests/fixtures/joblog/progress/keras-3.15.1-jax.txt");
    /// The same with `verbose=2`.
    const V2: &str =
        include_str!("../../../tests/fixtures/joblog/progress/keras-3.15.1-jax-verbose2.txt");
    /// Keras 2 (tf.keras) `fit` then `evaluate`, as keras-team/keras-io's generated page kept it
    /// (examples/structured_data/md/deep_neural_decision_forests.md, before its Keras 3
    /// rerun; the page keeps each bar's last state): "Experiment 2", verbatim.
    const V2_KERAS2: &str =
        include_str!("../../../tests/fixtures/joblog/progress/keras-2-keras-io.txt");

    /// Each reading's count and label.
    fn counts(r: &[Reading]) -> Vec<(u64, Option<u64>, Option<String>)> {
        r.iter()
            .map(|r| (r.count.clone().unwrap(), r.label.clone()))
            .map(|(c, label)| (c.done, c.total, label))
            .collect()
    }

    fn epoch(done: u64, total: u64, label: &str) -> (u64, Option<u64>, Option<String>) {
        (done, Some(total), Some(label.to_string()))
    }

    #[test]
    fn keras_3_bars_read_with_their_epoch_and_steps_a_second() {
        let r = readings(V1);
        let epochs: [&[u64]; 3] = [
            &[2, 82, 163, 242, 300],
            &[1, 108, 216, 300],
            &[1, 80, 176, 257, 300],
        ];
        let want: Vec<_> = (1..)
            .zip(epochs)
            .flat_map(|(n, ds)| {
                ds.iter()
                    .map(move |&d| epoch(d, 300, &format!("Epoch {n}/3")))
            })
            .collect();
        assert_eq!(counts(&r), want);
        // `368ms/step` with 1:49 left: a rate, no elapsed time.
        assert_eq!(r[0].rates[0].unit, "steps/s");
        assert!((r[0].rates[0].value - 1.0 / 0.368).abs() < 1e-9);
        assert_eq!(r[0].elapsed_seconds, None);
        // It ends where Keras stopped writing it, before the backspaces of the next redraw.
        assert!(V1[..r[0].end].ends_with("loss: 0.6913"));
        assert_eq!(&V1[r[0].end..r[0].end + 1], "\u{8}");
        // The epoch's end: `1s 2ms/step`, the second the epoch took.
        assert_eq!(r[4].elapsed_seconds, Some(1.0));
        assert!((r[4].rates[0].value - 500.0).abs() < 1e-9);
        assert!((r[5].rates[0].value - 500.0).abs() < 1e-9, "2ms/step");
        // `1s` before the end of epoch 3 is what was left, not what was spent.
        assert_eq!(
            (r[9].count.as_ref().unwrap().done, r[9].elapsed_seconds),
            (1, None)
        );
        // `980us`-style times: 598us/step.
        assert!((r[1].rates[0].value - 1e6 / 598.0).abs() < 1e-6);
    }

    #[test]
    fn keras_3_verbose_2_reads_one_line_an_epoch() {
        let r = readings(V2);
        let want: Vec<_> = (1..=3)
            .map(|n| epoch(300, 300, &format!("Epoch {n}/3")))
            .collect();
        assert_eq!(counts(&r), want);
        let figures: Vec<_> = r
            .iter()
            .map(|r| (r.elapsed_seconds, r.rates[0].value))
            .collect();
        assert_eq!(figures[0].0, Some(1.0));
        assert!((figures[0].1 - 1000.0 / 3.0).abs() < 1e-9);
        assert!((figures[2].1 - 1e6 / 490.0).abs() < 1e-6);
    }

    #[test]
    fn keras_2_bars_read_too_and_evaluate_has_no_epoch() {
        let r = readings(V2_KERAS2);
        assert_eq!(r.len(), 11);
        let c = counts(&r);
        assert_eq!(c[0], epoch(123, 123, "Epoch 1/10"));
        assert_eq!(c[9], epoch(123, 123, "Epoch 10/10"));
        assert_eq!(c[10], (62, Some(62), None));
        assert_eq!(r[0].elapsed_seconds, Some(9.0));
        assert!((r[0].rates[0].value - 1000.0 / 7.0).abs() < 1e-9);
        assert_eq!(r[10].elapsed_seconds, Some(2.0));
    }

    #[test]
    fn other_shapes_are_not_keras_bars() {
        for l in [
            "2/3 files copied",
            "1/2 - done",
            "Epoch 1/3",
            "10/10 [x] - ETA: soon",
            "5/Unknown apples",
        ] {
            assert!(readings(l).is_empty(), "{l:?}");
        }
        // Keras 2's ETA is what is left; a 0s/step is no rate.
        let r = readings(" 12/123 [=>............................] - ETA: 1s - loss: 0.6\n");
        assert_eq!((r[0].elapsed_seconds, r[0].rates.len()), (None, 0));
        let r = readings("     5/Unknown 3s 0s/step - loss: 0.1\n");
        let c = r[0].count.as_ref().unwrap();
        assert_eq!(
            (c.done, c.total, r[0].elapsed_seconds),
            (5, None, Some(3.0))
        );
        assert!(r[0].rates.is_empty());
    }
}
