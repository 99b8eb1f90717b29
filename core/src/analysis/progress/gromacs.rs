//! GROMACS `gmx mdrun -v`: the step of each progress line, the run's total steps, and the
//! run's `Performance:` in ns/day with its wall seconds.
//!
//! What it prints (2022.5, on stderr): a banner `:-) GROMACS - gmx mdrun, 2022.5 (-:`, then
//! `20000 steps,     40.0 ps.`, then every 100 steps (`-stepout`) a `\r`-redrawn `step 200,
//! remaining wall clock time:    31 s` (under five minutes left) or `step 2000, will finish Mon
//! Dec  7 19:24:45 2026`; at the end (also after SIGTERM, as a time limit sends) a `Time:`
//! line of core and wall seconds and `Performance:` under a `(ns/day)    (hour/ns)` header.
//! The progress lines carry no rate: the steps between two readings over the time between
//! them is the rate.

use super::{number, Count, Rate, Reading, Tool};

/// What mdrun said before the line being read.
#[derive(Default)]
pub(super) struct Gromacs {
    /// mdrun's banner was seen: a bare `step N` means nothing elsewhere.
    banner: bool,
    total: Option<u64>,
    /// The units over the `Performance:` figures (`ns/day`, `hour/ns`).
    units: Vec<String>,
    wall_seconds: Option<f64>,
}

impl Gromacs {
    pub(super) fn line(&mut self, line: &str) -> Option<Reading> {
        let t = line.trim();
        if t.starts_with(":-) GROMACS - ") {
            // A new mdrun (a job may run several): nothing of the last one holds.
            *self = Gromacs {
                banner: true,
                ..Default::default()
            };
            return None;
        }
        if !self.banner {
            return None;
        }
        if let Some(step) = t.strip_prefix("step ") {
            let done = step.split(',').next()?.trim().parse().ok()?;
            let mut r = Reading::new(Tool::Gromacs);
            r.count = Some(Count {
                done,
                total: self.total,
            });
            return Some(r);
        }
        if let Some(figures) = t.strip_prefix("Performance:") {
            return self.performance(figures);
        }
        if let Some(times) = t.strip_prefix("Time:") {
            // `Time:  core  wall  (%)`
            self.wall_seconds = times.split_whitespace().nth(1).and_then(number);
        } else if let Some(units) = units(t) {
            self.units = units;
        } else if let Some(n) = total_steps(t) {
            self.total = Some(n);
        }
        None
    }

    /// `Performance:      285.264        0.084` under `(ns/day)    (hour/ns)`; hour/ns is
    /// ns/day turned over, so it is left out.
    fn performance(&self, figures: &str) -> Option<Reading> {
        let values: Vec<f64> = figures
            .split_whitespace()
            .map(number)
            .collect::<Option<_>>()?;
        if values.len() != self.units.len() {
            return None;
        }
        let mut r = Reading::new(Tool::Gromacs);
        r.rates = values
            .iter()
            .zip(&self.units)
            .filter(|(_, u)| u.as_str() != "hour/ns")
            .filter_map(|(v, u)| Rate::new(*v, u.clone()))
            .collect();
        r.elapsed_seconds = self.wall_seconds;
        Some(r)
    }
}

/// `(ns/day)    (hour/ns)`: every word in parentheses.
fn units(t: &str) -> Option<Vec<String>> {
    t.split_whitespace()
        .map(|w| Some(w.strip_prefix('(')?.strip_suffix(')')?.to_string()))
        .collect::<Option<Vec<_>>>()
        .filter(|u| !u.is_empty())
}

/// `20000 steps,     40.0 ps.`: the run's steps (a continued run says more, and is left out).
fn total_steps(t: &str) -> Option<u64> {
    let (n, rest) = t.split_once(" steps,")?;
    let ps = rest.trim().strip_suffix(" ps.")?;
    number(ps)?;
    n.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::{readings, Reading, Tool};

    /// Captured from GROMACS 2022.5 (Debian bookworm's `gromacs` 2022.5-2), stdout and stderr
    /// to one file: 221 SPC waters (`gmx solvate -cs spc216 -box 2 2 2`), PME, v-rescale, then
    /// `gmx mdrun -v -s md.tpr -deffnm md -nt 1 -nsteps 5000`, to its end.
    const RUN: &str = include_str!("../../../tests/fixtures/joblog/progress/gromacs-2022.5.txt");
    /// The same system, `-nsteps 2000000 -stepout 2000`, sent SIGTERM after 12 s (as Slurm's
    /// time limit does): `will finish` lines, then its stop and its Performance.
    const TERM: &str =
        include_str!("../../../tests/fixtures/joblog/progress/gromacs-2022.5-sigterm.txt");

    fn steps(r: &[Reading]) -> Vec<(u64, Option<u64>)> {
        r.iter()
            .filter_map(|r| r.count.as_ref())
            .map(|c| (c.done, c.total))
            .collect()
    }

    #[test]
    fn a_whole_run_reads_every_step_then_ns_per_day() {
        let r = readings(RUN);
        assert!(r.iter().all(|r| r.tool == Tool::Gromacs), "{r:?}");
        let s = steps(&r);
        // `step 0`, then every 100 steps to 5000, the last after `Writing final coordinates.`
        assert_eq!(s.len(), 51, "{s:?}");
        assert_eq!(s[0], (0, Some(5000)));
        assert_eq!(s[1], (100, Some(5000)));
        assert_eq!(*s.last().unwrap(), (5000, Some(5000)));
        assert!(s.windows(2).all(|w| w[0].0 < w[1].0));
        let perf = r.last().unwrap();
        assert!(perf.count.is_none());
        assert_eq!(perf.rates.len(), 1, "hour/ns is ns/day turned over");
        assert_eq!(perf.rates[0].unit, "ns/day");
        assert_eq!(perf.rates[0].value, 285.264);
        assert_eq!(perf.elapsed_seconds, Some(3.029));
        // Each offset ends its reading, where the capture has it.
        let at = |s: &str| RUN.find(s).unwrap() + s.len();
        assert_eq!(
            r[1].end,
            at("step 100, remaining wall clock time:     2 s          ")
        );
        assert_eq!(&RUN[r[1].end..r[1].end + 1], "\r");
        assert_eq!(perf.end, at("Performance:      285.264        0.084"));
    }

    #[test]
    fn a_run_stopped_by_sigterm_reads_its_will_finish_lines_and_its_performance() {
        let r = readings(TERM);
        let s = steps(&r);
        let total = Some(2_000_000);
        let expected: Vec<_> = [0, 2000, 4000, 6000, 8000, 10000, 12000, 13280]
            .into_iter()
            .map(|d| (d, total))
            .collect();
        assert_eq!(s, expected);
        let perf = r.last().unwrap();
        assert_eq!(
            (perf.rates[0].value, perf.elapsed_seconds),
            (194.421, Some(11.804))
        );
    }

    #[test]
    fn steps_without_mdrun_s_banner_are_not_gromacs() {
        assert!(readings("step 100, remaining wall clock time: 2 s\n").is_empty());
        assert!(readings("Performance:      285.264        0.084\n").is_empty());
        // After it, a Performance line without its units header is not read either.
        let text = ":-) GROMACS - gmx mdrun, 2022.5 (-:\nPerformance: 1.0 2.0\nstep x\n";
        assert!(readings(text).is_empty());
    }
}
