use super::*;

/// Captured from tqdm 4.70.1 (PyPI) on stderr: a 40-step bar, a described bar with a
/// postfix, a bar without a total, and a slow bar (seconds per iteration).
const TQDM: &str = include_str!("../../../tests/fixtures/joblog/progress/tqdm-4.70.1.txt");

fn count(r: &Reading) -> (u64, Option<u64>) {
    let c = r.count.as_ref().unwrap();
    (c.done, c.total)
}

fn rate(r: &Reading) -> Option<f64> {
    r.rates.first().map(|r| r.value)
}

#[test]
fn every_tqdm_bar_of_the_capture_is_read_in_order() {
    let r = readings(TQDM);
    assert!(r.iter().all(|r| r.tool == Tool::Tqdm));
    assert_eq!((count(&r[0]), rate(&r[0])), ((0, Some(40)), None));
    let last40 = r.iter().rfind(|p| count(p).1 == Some(40)).unwrap();
    assert_eq!(count(last40).0, 40);
    // The described bar: its label and rate beside a postfix.
    let epoch = r
        .iter()
        .find(|p| p.label.as_deref() == Some("Epoch 3") && count(p).0 == 4)
        .expect("the Epoch 3 bar");
    assert_eq!((count(epoch).1, rate(epoch)), (Some(6), Some(2.5)));
    assert_eq!(epoch.rates[0].unit, "it/s");
    // Without a total: a count and a rate.
    assert!(r
        .iter()
        .any(|p| count(p) == (11, None) && rate(p) == Some(96.85)));
    // Seconds per iteration are turned into a rate.
    let slow = r.iter().rfind(|p| count(p).1 == Some(3)).unwrap();
    assert_eq!((count(slow).0, slow.elapsed_seconds), (3, Some(3.0)));
    assert!((rate(slow).unwrap() - 1.0 / 1.2).abs() < 1e-9);
    // Counts never go backwards within one bar.
    let bar40: Vec<u64> = r
        .iter()
        .filter(|p| count(p).1 == Some(40))
        .map(|p| count(p).0)
        .collect();
    assert!(bar40.windows(2).all(|w| w[0] <= w[1]), "{bar40:?}");
}

#[test]
fn each_offset_is_just_past_its_reading_in_the_original_bytes() {
    let r = readings(TQDM);
    let mut start = 0;
    for reading in &r {
        // The text before `end` ends with the bar's bracket, and the byte at `end` (if any)
        // is the `\r`/`\n` that ended it.
        let text = &TQDM[start..reading.end];
        assert!(text.trim_end().ends_with(']'), "{text:?}");
        assert!(matches!(
            TQDM.as_bytes().get(reading.end),
            Some(b'\r' | b'\n') | None
        ));
        start = reading.end;
    }
    // Multi-byte bar characters before a reading do not shift it: offsets are bytes.
    let text = "█▉ 1/2 [00:01<00:01, 1.00it/s]\rdone 2/2 [00:02<00:00, 1.00it/s]";
    let r = readings(text);
    assert_eq!(r[0].end, text.find('\r').unwrap());
    assert_eq!(
        r[1].end,
        text.len(),
        "an unended last line ends with the text"
    );
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
        assert_eq!(tqdm::parse(l), None, "{l:?}");
    }
    assert_eq!(clock_seconds("1:02:03"), Some(3723));
}

#[test]
fn escapes_and_backspaces_are_dropped_before_parsing() {
    assert_eq!(clean("\u{1b}[1m 1/5\u{1b}[0m ok\u{8}\u{8}"), " 1/5 ok");
    assert!(matches!(clean("plain"), Cow::Borrowed("plain")));
    let text = "\u{1b}[32m 2/4 [00:01<00:01,  2.00it/s]\u{1b}[0m\n";
    assert_eq!(count(&readings(text)[0]), (2, Some(4)));
}

#[test]
fn a_huge_log_is_read_only_to_the_bound() {
    // One line past MAX_LINE_BYTES is skipped unparsed; past MAX_PARSED_BYTES nothing is read.
    let bar = "1/2 [00:01<00:01, 1.00it/s]\n";
    let long = format!(
        "{} 1/2 [00:01<00:01, 1.00it/s]\n",
        "x".repeat(MAX_LINE_BYTES)
    );
    let mut text = format!("{bar}{long}");
    text.push_str(&"x".repeat(MAX_PARSED_BYTES - text.len() - 1));
    text.push('\n');
    let at_bound = text.len();
    text.push_str("2/2 [00:02<00:00, 1.00it/s]\n");
    let r = readings(&text);
    assert_eq!(r.len(), 1, "only the first bar");
    assert_eq!(r[0].end, bar.len() - 1);
    assert_eq!(at_bound, MAX_PARSED_BYTES);
    assert_eq!(head(&text, 10), "");
    assert_eq!(head("no line end", 5), "");
    assert_eq!(head("ab\ncd\nef", 7), "ab\ncd\n");
}

#[test]
fn the_readings_kept_are_bounded_evenly_thinned_and_end_with_the_last() {
    let text: String = (0..10_001)
        .map(|i| format!("{i}it [00:00, 1.00it/s]\r"))
        .collect();
    let r = bounded(&text, &Patterns::default(), MAX_PARSED_BYTES, 1000);
    assert!(r.len() <= 1000, "{}", r.len());
    assert!(r.len() > 500, "{}", r.len());
    let done: Vec<u64> = r.iter().map(|r| count(r).0).collect();
    assert_eq!(done[0], 0);
    assert_eq!(*done.last().unwrap(), 10_000);
    // Evenly: one stride between all but the last.
    let gaps: Vec<u64> = done.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps[..gaps.len() - 1].iter().all(|g| *g == gaps[0]),
        "{gaps:?}"
    );
    // At the default bound too.
    let text = "1it [00:00, 1.00it/s]\r".repeat(MAX_READINGS + 10);
    assert!(readings(&text).len() <= MAX_READINGS);
}
