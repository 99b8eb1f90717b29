//! LAMMPS: the `Step` column of each run's thermo table, and the run's `Performance:` with its
//! `Loop time` seconds.
//!
//! What it prints (29 Sep 2021 - Update 2): a banner `LAMMPS (29 Sep 2021 - Update 2)`; for
//! each `run`, a header of thermo keywords (`Step Temp E_pair E_mol TotEng Press`), a row every
//! `thermo` steps, then `Loop time of 0.701343 on 1 procs for 250 steps with 4000 atoms` and
//! `Performance: 153990.280 tau/day, 356.459 timesteps/s` (lj units) or `Performance: 95.055
//! ns/day, 0.252 hours/ns, 1100.176 timesteps/s`. Steps go on from run to run; a run's first
//! row repeats the last run's step.

use super::{number, Count, Rate, Reading, Tool};

/// What LAMMPS said before the line being read.
#[derive(Default)]
pub(super) struct Lammps {
    /// LAMMPS's banner was seen: a table of numbers means nothing elsewhere.
    banner: bool,
    /// The thermo table being printed.
    table: Option<Table>,
    loop_seconds: Option<f64>,
}

/// Where the step is in a thermo row, and the elapsed CPU column if the table has one.
struct Table {
    columns: usize,
    step: usize,
    cpu: Option<usize>,
}

impl Lammps {
    pub(super) fn line(&mut self, line: &str) -> Option<Reading> {
        let t = line.trim();
        if t.starts_with("LAMMPS (") {
            self.banner = true;
            return None;
        }
        if !self.banner {
            return None;
        }
        if let Some(rest) = t.strip_prefix("Loop time of ") {
            self.table = None;
            self.loop_seconds = rest.split_whitespace().next().and_then(number);
            return None;
        }
        if let Some(figures) = t.strip_prefix("Performance:") {
            let mut r = Reading::new(Tool::Lammps);
            r.rates = performance(figures)?;
            r.elapsed_seconds = self.loop_seconds;
            return Some(r);
        }
        if let Some(table) = header(t) {
            self.table = Some(table);
            return None;
        }
        self.row(t)
    }

    /// A thermo row: as many numbers as the header has keywords (a warning in the table is
    /// no row, and does not end it).
    fn row(&self, t: &str) -> Option<Reading> {
        let table = self.table.as_ref()?;
        let words: Vec<&str> = t.split_whitespace().collect();
        if words.len() != table.columns || words.iter().any(|w| number(w).is_none()) {
            return None;
        }
        let mut r = Reading::new(Tool::Lammps);
        r.count = Some(Count {
            done: words[table.step].parse().ok()?,
            total: None,
        });
        r.elapsed_seconds = table.cpu.and_then(|i| number(words[i]));
        Some(r)
    }
}

/// `Step Temp E_pair …`: thermo keywords, one of them `Step` (`CPU`: seconds since the run
/// began, when the thermo style has it).
fn header(t: &str) -> Option<Table> {
    if !t.contains("Step") {
        return None;
    }
    let words: Vec<&str> = t.split_whitespace().collect();
    if words.iter().any(|w| number(w).is_some()) {
        return None;
    }
    Some(Table {
        columns: words.len(),
        step: words.iter().position(|w| *w == "Step")?,
        cpu: words.iter().position(|w| *w == "CPU"),
    })
}

/// `153990.280 tau/day, 356.459 timesteps/s`: each figure with its unit; hours/ns is ns/day
/// turned over, so it is left out.
fn performance(figures: &str) -> Option<Vec<Rate>> {
    let mut rates = Vec::new();
    for part in figures.split(',') {
        let (value, unit) = part.trim().split_once(' ')?;
        let value = number(value)?;
        if unit != "hours/ns" {
            rates.push(Rate::new(value, unit.to_string())?);
        }
    }
    Some(rates)
}

#[cfg(test)]
mod tests {
    use super::super::{readings, Tool};

    /// Captured from LAMMPS 29 Sep 2021 - Update 2 (Debian bookworm's `lammps`
    /// 20220106.git7586adbb6a+ds1-2), `lmp -in in.melt > out 2>&1`: the 3d Lennard-Jones melt of
    /// LAMMPS's examples (lj units, 4000 atoms, `thermo 50`, `run 250` then `run 100`), then
    /// `clear` and an argon box in metal units (864 atoms, `thermo 100`, `run 500`) for ns/day.
    const CAPTURE: &str =
        include_str!("../../../tests/fixtures/joblog/progress/lammps-29Sep2021-update2.txt");

    #[test]
    fn every_thermo_step_and_each_runs_performance() {
        let r = readings(CAPTURE);
        assert!(r.iter().all(|r| r.tool == Tool::Lammps), "{r:?}");
        let steps: Vec<u64> = r
            .iter()
            .filter_map(|r| r.count.as_ref().map(|c| c.done))
            .collect();
        let melt = [0, 50, 100, 150, 200, 250, 250, 300, 350];
        let argon = [0, 100, 200, 300, 400, 500];
        assert_eq!(steps, [&melt[..], &argon[..]].concat());
        let perf: Vec<_> = r.iter().filter(|r| !r.rates.is_empty()).collect();
        assert_eq!(perf.len(), 3);
        let units = |i: usize| -> Vec<(f64, &str)> {
            perf[i].rates.iter().map(|r| (r.value, &*r.unit)).collect()
        };
        assert_eq!(
            units(0),
            [(153990.280, "tau/day"), (356.459, "timesteps/s")]
        );
        assert_eq!(perf[0].elapsed_seconds, Some(0.701343));
        assert_eq!(perf[1].elapsed_seconds, Some(0.3442));
        // hours/ns is left out: it is ns/day turned over.
        assert_eq!(units(2), [(95.055, "ns/day"), (1100.176, "timesteps/s")]);
        assert_eq!(perf[2].elapsed_seconds, Some(0.454473));
        // A row's offset is the end of its line (trailing space and all).
        let row = "     250    1.6645597   -4.7774327            0   -2.2812174    5.7526089 ";
        let end = CAPTURE.find(row).unwrap() + row.len();
        assert!(r.iter().any(|r| r.end == end));
    }

    #[test]
    fn the_tables_of_other_programs_are_not_lammps() {
        assert!(readings("Step Loss\n1 0.5\n2 0.4\n").is_empty());
        // After the banner, a row must fit the header, and the MPI timing table is no row.
        let text = "LAMMPS (29 Sep 2021)\nStep Temp\n0 3.0 1.0\nPair | 0.56 | 0.56\n";
        assert!(readings(text).is_empty());
    }
}
