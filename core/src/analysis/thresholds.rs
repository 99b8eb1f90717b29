//! The findings' thresholds as one value, passed to [`super::findings`] and [`super::sbatch`].
//! `Default` is the anchors' defaults (the named constants in `analysis/mod.rs`), so a site
//! without a site file sees exactly those. [`KEYS`] is the one list of the site file's
//! `[thresholds]` keys (docs/reference/site.md): name with its unit, meaning, range, setter.

use super::*;

const MIB: f64 = (1u64 << 20) as f64;
const GIB: f64 = (1u64 << 30) as f64;

/// What a finding needs to be said. Figures in the units their names carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Thresholds {
    pub walltime_slack_percent: f64,
    pub walltime_slack_min_limit_seconds: f64,
    pub walltime_margin_seconds: f64,
    pub memory_underused_percent: f64,
    pub memory_underused_min_unused_bytes: u64,
    pub cache_inflated_factor: f64,
    pub cache_inflated_min_bytes: u64,
    pub major_faults_heavy: u64,
    pub cpu_underused_percent: f64,
    pub cpu_underused_min_run_seconds: f64,
    pub cpu_underused_min_cores: f64,
    pub serial_peak_cores: f64,
    pub system_time_percent: f64,
    pub system_time_min_cpu_seconds: f64,
    pub idle_min_seconds: f64,
    pub idle_max_cpu_seconds: f64,
    pub gpu_throttled_min_minutes: f64,
    pub gpu_throttled_min_run_percent: f64,
    pub gpu_idle_min_minutes: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            walltime_slack_percent: WALLTIME_SLACK_PERCENT,
            walltime_slack_min_limit_seconds: WALLTIME_SLACK_MIN_LIMIT_SECONDS,
            walltime_margin_seconds: WALLTIME_MARGIN_SECONDS,
            memory_underused_percent: MEMORY_UNDERUSED_PERCENT,
            memory_underused_min_unused_bytes: MEMORY_UNDERUSED_MIN_UNUSED_BYTES,
            cache_inflated_factor: CACHE_INFLATED_FACTOR,
            cache_inflated_min_bytes: CACHE_INFLATED_MIN_BYTES,
            major_faults_heavy: MAJOR_FAULTS_HEAVY,
            cpu_underused_percent: CPU_UNDERUSED_PERCENT,
            cpu_underused_min_run_seconds: CPU_UNDERUSED_MIN_RUN_SECONDS,
            cpu_underused_min_cores: CPU_UNDERUSED_MIN_CORES,
            serial_peak_cores: SERIAL_PEAK_CORES,
            system_time_percent: SYSTEM_TIME_PERCENT,
            system_time_min_cpu_seconds: SYSTEM_TIME_MIN_CPU_SECONDS,
            idle_min_seconds: IDLE_MIN_SECONDS,
            idle_max_cpu_seconds: IDLE_MAX_CPU_SECONDS,
            gpu_throttled_min_minutes: GPU_THROTTLED_MIN_MINUTES,
            gpu_throttled_min_run_percent: GPU_THROTTLED_MIN_FRACTION * 100.0,
            gpu_idle_min_minutes: GPU_IDLE_MIN_MINUTES,
        }
    }
}

/// The values a key accepts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range {
    /// 0 to 100.
    Percent,
    /// Any finite number ≥ 0.
    NonNegative,
    /// A whole number ≥ 0.
    Count,
    /// A finite factor ≥ 1.
    Factor,
}

impl Range {
    /// Whether `v` fits; the sentence that says what does, for the error.
    pub fn check(self, v: f64) -> Result<(), &'static str> {
        let ok = v.is_finite()
            && match self {
                Range::Percent => (0.0..=100.0).contains(&v),
                Range::NonNegative => v >= 0.0,
                Range::Count => v >= 0.0 && v.fract() == 0.0 && v <= u32::MAX as f64,
                Range::Factor => v >= 1.0,
            };
        if ok {
            Ok(())
        } else {
            Err(match self {
                Range::Percent => "a number from 0 to 100",
                Range::NonNegative => "a number of at least 0",
                Range::Count => "a whole number of at least 0",
                Range::Factor => "a number of at least 1",
            })
        }
    }
}

/// One `[thresholds]` key of the site file.
pub struct Key {
    /// The key, its unit last (`_percent`, `_seconds`, `_gib`…).
    pub name: &'static str,
    /// The finding(s) it decides, and how.
    pub what: &'static str,
    pub range: Range,
    /// Today's value, in the key's unit.
    pub get: fn(&Thresholds) -> f64,
    /// Sets it from a value in the key's unit (already checked against `range`).
    pub set: fn(&mut Thresholds, f64),
}

macro_rules! key {
    ($name:literal, $what:literal, $range:ident, $field:ident) => {
        key!($name, $what, $range, $field, 1.0)
    };
    ($name:literal, $what:literal, $range:ident, $field:ident, $scale:expr) => {
        Key {
            name: $name,
            what: $what,
            range: Range::$range,
            get: |t| t.$field as f64 / $scale,
            set: |t, v| t.$field = (v * $scale) as _,
        }
    };
}

/// Every `[thresholds]` key, in the report's order of findings.
pub const KEYS: &[Key] = &[
    key!("walltime_slack_percent", "walltime_slack: a completed job used less than this share of its time limit", Percent, walltime_slack_percent),
    key!("walltime_slack_min_limit_seconds", "walltime_slack: not said for time limits this short or shorter", NonNegative, walltime_slack_min_limit_seconds),
    key!("walltime_margin_seconds", "walltime_margin: a completed job ended within this many seconds of its limit (having used at least walltime_slack_percent of it)", NonNegative, walltime_margin_seconds),
    key!("memory_overrequested_percent", "memory_overrequested: the working-set peak was below this share of the memory limit…", Percent, memory_underused_percent),
    key!("memory_overrequested_min_unused_gib", "memory_overrequested: …and at least this many GiB were never used", NonNegative, memory_underused_min_unused_bytes, GIB),
    key!("memory_cache_inflated_factor", "memory_cache_inflated: the kernel's peak is at least this many times the working-set peak…", Factor, cache_inflated_factor),
    key!("memory_cache_inflated_min_mib", "memory_cache_inflated: …and at least this many MiB above it", NonNegative, cache_inflated_min_bytes, MIB),
    key!("heavy_paging_major_faults", "heavy_paging: at least this many major page faults", Count, major_faults_heavy),
    key!("cpu_underused_percent", "cpu_underused: the average cores in use were below this share of the allocation…", Percent, cpu_underused_percent),
    key!("cpu_underused_min_run_seconds", "cpu_underused, serial_on_many_cores: …on a run at least this long…", NonNegative, cpu_underused_min_run_seconds),
    key!("cpu_underused_min_cores", "cpu_underused, serial_on_many_cores: …with more than this many cores allocated", NonNegative, cpu_underused_min_cores),
    key!("serial_on_many_cores_peak_cores", "serial_on_many_cores: never more than this many cores busy at once (on 2 or more allocated)", NonNegative, serial_peak_cores),
    key!("system_time_high_percent", "system_time_high: system time was at least this share of the CPU time…", Percent, system_time_percent),
    key!("system_time_high_min_cpu_seconds", "system_time_high: …of at least this many CPU seconds", NonNegative, system_time_min_cpu_seconds),
    key!("idle_min_seconds", "idle_allocation, timeout_hung: a stretch at least this long (timeout_hung: the job's last one)…", NonNegative, idle_min_seconds),
    key!("idle_max_cpu_seconds", "idle_allocation, timeout_hung: …using fewer CPU seconds than this (scaled down for a shorter recorded stretch)", NonNegative, idle_max_cpu_seconds),
    key!("gpu_throttled_min_minutes", "gpu_throttled: a card held back for at least this many minutes…", NonNegative, gpu_throttled_min_minutes),
    key!("gpu_throttled_min_run_percent", "gpu_throttled: …or for at least this share of the run", Percent, gpu_throttled_min_run_percent),
    key!("gpu_idle_min_minutes", "gpu_idle: a card idle for at least this many minutes", NonNegative, gpu_idle_min_minutes),
];

/// The key called `name`, if there is one.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each key reads back what it sets, and the defaults are in range: a key that wrote
    /// another field, or a unit off by its scale, fails here.
    #[test]
    fn every_key_round_trips_and_its_default_fits() {
        for k in KEYS {
            let d = Thresholds::default();
            let v = (k.get)(&d);
            assert!(k.range.check(v).is_ok(), "{} default {v}", k.name);
            let mut t = d.clone();
            (k.set)(&mut t, v);
            assert_eq!(t, d, "{}: setting the default changes nothing", k.name);
            let other = if k.range == Range::Percent { 7.0 } else { 3.0 };
            (k.set)(&mut t, other);
            assert_ne!(t, d, "{} sets something", k.name);
            assert!(((k.get)(&t) - other).abs() < 1e-9, "{}", k.name);
        }
        let mut names: Vec<_> = KEYS.iter().map(|k| k.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KEYS.len(), "key names are unique");
    }

    #[test]
    fn ranges() {
        assert!(Range::Percent.check(100.0).is_ok());
        assert!(Range::Percent.check(100.5).is_err());
        assert!(Range::NonNegative.check(-1.0).is_err());
        assert!(Range::NonNegative.check(f64::INFINITY).is_err());
        assert!(Range::Count.check(2.5).is_err());
        assert!(Range::Factor.check(0.9).is_err());
    }
}
