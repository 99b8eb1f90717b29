//! An array's tasks summarised into one row (`--array-summary`): how many tasks ended in
//! each state, the longest elapsed time, and each efficiency's mean, min and max over the
//! tasks where it is known (with the count: a mean over 3 of 10 tasks says so).

use std::collections::BTreeMap;

use serde::Serialize;

use super::row::Row;

/// One efficiency over an array's tasks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Spread {
    pub mean: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// Tasks whose figure is known (the others are left out, not counted as 0).
    pub known: usize,
}

impl Spread {
    fn of(values: impl Iterator<Item = Option<f64>>) -> Spread {
        let v: Vec<f64> = values.flatten().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread::default();
        }
        let r6 = |x: f64| (x * 1e6).round() / 1e6;
        Spread {
            mean: Some(r6(v.iter().sum::<f64>() / v.len() as f64)),
            min: v.iter().copied().reduce(f64::min).map(r6),
            max: v.iter().copied().reduce(f64::max).map(r6),
            known: v.len(),
        }
    }
}

/// One array's summary (an element of `arrays[]` in JSON).
#[derive(Debug, Clone, Serialize)]
pub struct ArrayRow {
    pub array_job_id: String,
    /// The tasks' ids (`1`, `2`, ...), in the table's order.
    pub task_ids: Vec<String>,
    pub tasks: usize,
    pub job_name: String,
    pub user: Option<String>,
    /// Tasks per state (`COMPLETED: 9, FAILED: 1`).
    pub states: BTreeMap<String, usize>,
    pub max_exit_code: Option<i32>,
    pub elapsed_max_seconds: Option<f64>,
    /// Tasks per basis (`recorded`, `summary`, `sacct`).
    pub bases: BTreeMap<String, usize>,
    pub time: Spread,
    pub cpu: Spread,
    pub memory: Spread,
    pub gpu_utilization: Spread,
    pub gpu_memory: Spread,
}

impl ArrayRow {
    /// `123_[1-10]` (tasks collapsed into ranges where numeric).
    pub fn job_id_display(&self) -> String {
        let mut nums: Vec<u64> = self
            .task_ids
            .iter()
            .filter_map(|t| t.parse().ok())
            .collect();
        if nums.len() != self.task_ids.len() {
            return format!("{}_[{} tasks]", self.array_job_id, self.tasks);
        }
        nums.sort_unstable();
        nums.dedup();
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < nums.len() {
            let mut j = i;
            while j + 1 < nums.len() && nums[j + 1] == nums[j] + 1 {
                j += 1;
            }
            parts.push(if i == j {
                nums[i].to_string()
            } else {
                format!("{}-{}", nums[i], nums[j])
            });
            i = j + 1;
        }
        format!("{}_[{}]", self.array_job_id, parts.join(","))
    }

    /// `COMPLETED` when all agree, else `COMPLETED:9,FAILED:1`.
    pub fn states_word(&self) -> String {
        if self.states.len() == 1 {
            return self.states.keys().next().cloned().unwrap_or_default();
        }
        counts(&self.states)
    }

    pub fn basis_word(&self) -> String {
        if self.bases.len() == 1 {
            return self.bases.keys().next().cloned().unwrap_or_default();
        }
        counts(&self.bases)
    }
}

fn counts(m: &BTreeMap<String, usize>) -> String {
    m.iter()
        .map(|(k, n)| format!("{k}:{n}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The rows of array tasks grouped by their array, one summary per array in order of first
/// appearance; rows that are not array tasks are not summarised.
pub fn summarise(rows: &[Row]) -> Vec<ArrayRow> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for r in rows {
        if let Some(a) = &r.array_job_id {
            if !groups.contains_key(a) {
                order.push(a.clone());
            }
            groups.entry(a.clone()).or_default().push(r);
        }
    }
    order
        .into_iter()
        .map(|a| {
            let g = &groups[&a];
            let mut states = BTreeMap::new();
            let mut bases = BTreeMap::new();
            for r in g {
                *states
                    .entry(r.state.clone().unwrap_or_else(|| "UNKNOWN".into()))
                    .or_insert(0) += 1;
                *bases.entry(r.basis.word().to_string()).or_insert(0) += 1;
            }
            let spread = |f: &dyn Fn(&Row) -> Option<f64>| Spread::of(g.iter().map(|r| f(r)));
            ArrayRow {
                task_ids: g
                    .iter()
                    .map(|r| r.array_task_id.clone().unwrap_or_default())
                    .collect(),
                tasks: g.len(),
                job_name: g[0].job_name.clone(),
                user: g[0].user.clone(),
                states,
                max_exit_code: g.iter().filter_map(|r| r.exit_code).max(),
                elapsed_max_seconds: g.iter().filter_map(|r| r.elapsed_seconds).reduce(f64::max),
                bases,
                time: spread(&|r| r.efficiency.time.percent),
                cpu: spread(&|r| r.efficiency.cpu.percent),
                memory: spread(&|r| r.efficiency.memory.percent),
                gpu_utilization: spread(&|r| r.efficiency.gpu_utilization.percent),
                gpu_memory: spread(&|r| r.efficiency.gpu_memory.percent),
                array_job_id: a,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_leaves_unknowns_out() {
        let s = Spread::of([Some(10.0), None, Some(30.0)].into_iter());
        assert_eq!(s.mean, Some(20.0));
        assert_eq!((s.min, s.max, s.known), (Some(10.0), Some(30.0), 2));
        assert_eq!(Spread::of([None].into_iter()), Spread::default());
    }
}
