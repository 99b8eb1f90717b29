//! Sparkline marks, one rule for the dashboard and the text report: eight levels scaled to a
//! maximum, 0 the lowest mark, an unknown value a blank (a gap is never drawn as a zero).

/// The eight levels, lowest first.
pub const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
/// The same levels in ASCII (`--ascii`).
pub const ASCII_BARS: [char; 8] = ['_', '.', ',', '-', '=', '+', '*', '#'];

/// The mark for `value` on a scale up to `max` from `bars`; `None` is a blank.
pub fn mark(value: Option<f64>, max: f64, bars: &[char; 8]) -> char {
    match value {
        Some(v) if v.is_finite() && max > 0.0 && max.is_finite() => {
            bars[((v / max).clamp(0.0, 1.0) * 7.0).round() as usize]
        }
        Some(_) => bars[0],
        None => ' ',
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_gaps_and_bad_scales() {
        assert_eq!(mark(Some(0.0), 4.0, &BARS), '▁');
        assert_eq!(mark(Some(4.0), 4.0, &BARS), '█');
        assert_eq!(mark(Some(9.0), 4.0, &BARS), '█');
        assert_eq!(mark(Some(2.0), 4.0, &ASCII_BARS), '=');
        assert_eq!(mark(None, 4.0, &BARS), ' ');
        assert_eq!(mark(Some(f64::NAN), 4.0, &BARS), '▁');
        assert_eq!(mark(Some(1.0), 0.0, &BARS), '▁');
    }
}
