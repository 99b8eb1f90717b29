//! tqdm's bar, which PyTorch Lightning and Hugging Face's Trainer print too (with a
//! description such as `Epoch 3`): one bar per `\r`-ended segment.

use super::{clock_seconds, Count, Rate, Reading, Tool};

/// tqdm's `[elapsed<remaining, rate, postfix…]` or `[elapsed, rate]` bracket, and the count
/// before it: `Epoch 3:  67%|██████▋   | 4/6 [00:01<00:00,  2.50it/s, loss=0.123]`,
/// `11it [00:00, 96.85it/s]`, `1/3 [00:01<00:02,  1.20s/it]`.
pub(super) fn parse(line: &str) -> Option<Reading> {
    let open = line.rfind(" [")?;
    let close = open + line[open..].find(']')?;
    let inside = &line[open + 2..close];
    let mut fields = inside.split(", ");
    let times = fields.next()?;
    let rate = fields.next()?.trim();
    let per_second = match (rate.strip_suffix("it/s"), rate.strip_suffix("s/it")) {
        (Some("?"), _) => None,
        (Some(v), _) => Some(v.trim().parse::<f64>().ok()?),
        // Slower than one a second, tqdm prints seconds per iteration: turned over so that
        // higher is faster, like every other rate.
        (None, Some(v)) => Some(1.0 / v.trim().parse::<f64>().ok().filter(|s| *s > 0.0)?),
        _ => return None,
    };
    let elapsed = clock_seconds(times.split('<').next()?);
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
    let mut r = Reading::new(Tool::Tqdm);
    r.label = label;
    r.count = Some(Count { done, total });
    r.rates
        .extend(per_second.and_then(|v| Rate::new(v, "it/s")));
    r.elapsed_seconds = elapsed.map(|s| s as f64);
    Some(r)
}
