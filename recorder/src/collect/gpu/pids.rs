//! Is a process on a card one of the job's? NVML lists every process on a card, the
//! neighbours' included; only the job's are credited to it.

use std::path::Path;

/// Whether `pid` belongs to job `job_id`: its cgroup path (v1 or v2) has a `job_<id>`
/// component, or (no job cgroups: `proctrack/linuxproc`) one of its ancestors is in `roots`
/// (the job's slurmstepds and tasks). Reads only `/proc/<pid>/{cgroup,stat}` of that pid and
/// its ancestors; nothing read is used as a path.
pub fn job_owns_pid(proc_root: &Path, job_id: u32, roots: &[u32], pid: u32) -> bool {
    let dir = proc_root.join(pid.to_string());
    let want = format!("job_{job_id}");
    if let Ok(text) = std::fs::read_to_string(dir.join("cgroup")) {
        let in_job = text.lines().any(|l| {
            l.splitn(3, ':')
                .nth(2)
                .is_some_and(|path| path.split('/').any(|c| c == want))
        });
        if in_job {
            return true;
        }
        // In some other job's cgroup: never ours.
        let in_other_job = text.lines().any(|l| {
            l.splitn(3, ':').nth(2).is_some_and(|path| {
                path.split('/').any(|c| {
                    c.strip_prefix("job_")
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                })
            })
        });
        if in_other_job {
            return false;
        }
    }
    // No job cgroup: follow the parents (bounded) to one of the job's roots.
    let mut p = pid;
    for _ in 0..64 {
        if roots.contains(&p) {
            return true;
        }
        match ppid(proc_root, p) {
            Some(parent) if parent > 1 && parent != p => p = parent,
            _ => return false,
        }
    }
    false
}

/// [`job_owns_pid`] with a memory: a process's job does not change while it lives, so each
/// pid is looked up in /proc once, and forgotten when it leaves the cards' process lists
/// (so a reused pid is looked up again).
#[derive(Debug, Default)]
pub struct JobPids {
    known: std::collections::HashMap<u32, bool>,
    seen: std::collections::HashSet<u32>,
}

impl JobPids {
    pub fn owns(&mut self, proc_root: &Path, job_id: u32, roots: &[u32], pid: u32) -> bool {
        self.seen.insert(pid);
        *self
            .known
            .entry(pid)
            .or_insert_with(|| job_owns_pid(proc_root, job_id, roots, pid))
    }

    /// Call after each reading of all cards: forgets pids no card listed this time.
    pub fn end_reading(&mut self) {
        let seen = std::mem::take(&mut self.seen);
        self.known.retain(|pid, _| seen.contains(pid));
    }
}

fn ppid(proc_root: &Path, pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat")).ok()?;
    // The command may contain spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc_entry(root: &Path, pid: u32, cgroup: &str, ppid: u32) {
        let d = root.join(pid.to_string());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cgroup"), cgroup).unwrap();
        std::fs::write(d.join("stat"), format!("{pid} (a b) c) S {ppid} 1 1 0")).unwrap();
    }

    #[test]
    fn cgroup_and_ancestry_decide() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        proc_entry(
            r,
            10,
            "4:memory:/slurm_n1/uid_1000/job_42/step_0/task_0\n",
            1,
        );
        proc_entry(r, 11, "4:memory:/slurm_n1/uid_1001/job_420/step_0\n", 1);
        proc_entry(r, 12, "0::/user.slice\n", 20);
        proc_entry(r, 20, "0::/user.slice\n", 30);
        proc_entry(r, 13, "0::/system.slice/job_42_evil\n", 1);
        assert!(job_owns_pid(r, 42, &[], 10));
        assert!(!job_owns_pid(r, 42, &[], 11));
        assert!(!job_owns_pid(r, 42, &[], 12));
        assert!(job_owns_pid(r, 42, &[30], 12));
        assert!(!job_owns_pid(r, 42, &[], 13));
        assert!(!job_owns_pid(r, 42, &[], 99));
    }
}
