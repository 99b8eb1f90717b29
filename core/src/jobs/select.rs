//! What `slurmwatch jobs` was asked about → the job ids for one `sacct -j` call.
//!
//! Accepted, as reportseff accepts them: `123` (a job, or every task of array 123),
//! `123_4` (one task), `123_[1-50]` / `123_[1,3,5-9]` (tasks, expanded here: sacct's `-j`
//! takes no brackets), a Slurm output file (`slurm-123.out`, `slurm-123_4.out`, any
//! `NAME-ID.out` / `NAME_ID.out`), or a directory of them (not recursive; other files
//! ignored).

use std::path::Path;

use crate::slurm::job_id::JobId;

/// The most tasks one bracket expression may expand to (a typo like `1_[1-99999999]` must
/// not build a command line of a hundred million ids).
pub const MAX_EXPANDED: usize = 100_000;

/// `123`, `123_4` or `123_[1-3,7]` → the ids; `Err` with one sentence when it looks like an
/// array expression but is malformed; `Ok(None)` when it is not a job id at all. A job and a
/// task are read by `slurm::job_id`; a het component (`123+1`) is not taken here.
pub fn job_ids(arg: &str) -> Result<Option<Vec<String>>, String> {
    let arg = arg.trim();
    if JobId::job_or_task(arg).is_some() {
        return Ok(Some(vec![arg.to_string()]));
    }
    let Some((job, task)) = arg.split_once('_') else {
        return Ok(None);
    };
    if JobId::own(job).is_none() {
        return Ok(None);
    }
    let Some(inner) = task.strip_prefix('[').and_then(|t| t.strip_suffix(']')) else {
        return Err(format!(
            "{arg:?} is not an array task id (write 123_4 or 123_[1-50])"
        ));
    };
    let mut out = Vec::new();
    for part in inner.split(',') {
        // `%N` (at most N running at once) is sbatch's, not a selection: allowed and ignored.
        let part = part.split('%').next().unwrap_or("");
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) else {
            return Err(format!("{arg:?}: {part:?} is not a task number or range"));
        };
        if b < a {
            return Err(format!("{arg:?}: the range {a}-{b} runs backwards"));
        }
        if (b - a) as usize >= MAX_EXPANDED.saturating_sub(out.len()) {
            return Err(format!(
                "{arg:?} names more than {MAX_EXPANDED} tasks; give the array's id ({job}) for all of them"
            ));
        }
        out.extend((a..=b).map(|t| format!("{job}_{t}")));
    }
    Ok(Some(out))
}

/// The job id in a Slurm output file's name, as reportseff reads it: the name (without a
/// trailing `.out`) ends in `-ID` or `_ID`, where ID is `123` or `123_4`; the first such
/// split from the left wins (`slurm-123_4.out` is task 4 of 123, not job 4).
pub fn job_from_file_name(name: &str) -> Option<String> {
    let stem = name.strip_suffix(".out").unwrap_or(name);
    for (i, c) in stem.char_indices() {
        if c != '-' && c != '_' {
            continue;
        }
        let rest = &stem[i + 1..];
        if JobId::job_or_task(rest).is_some() {
            return Some(rest.to_string());
        }
    }
    None
}

/// The job ids of an output file, or of every output file in a directory (sorted by name).
pub fn from_path(p: &Path) -> Result<Vec<String>, String> {
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    if p.is_dir() {
        let rd = std::fs::read_dir(p).map_err(|e| format!("cannot read {}: {e}", p.display()))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| name(&e.path()))
            .collect();
        names.sort();
        let ids: Vec<String> = names.iter().filter_map(|n| job_from_file_name(n)).collect();
        if ids.is_empty() {
            return Err(format!(
                "{} holds no Slurm output file (slurm-123.out, slurm-123_4.out)",
                p.display()
            ));
        }
        return Ok(ids);
    }
    match name(p).as_deref().and_then(job_from_file_name) {
        Some(id) => Ok(vec![id]),
        None => Err(format!(
            "{}: no job id in the file's name (Slurm names them slurm-123.out or slurm-123_4.out)",
            p.display()
        )),
    }
}

/// Every argument → ids, in order, each once. An argument that is neither a job id nor an
/// existing file or directory is an error naming it.
pub fn resolve(args: &[String]) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for a in args {
        let ids = match job_ids(a)? {
            Some(ids) => ids,
            None if Path::new(a).exists() => from_path(Path::new(a))?,
            None => {
                return Err(format!(
                    "{a:?} is neither a job id (123, 123_4, 123_[1-50]) nor an output file or directory"
                ))
            }
        };
        for id in ids {
            if !out.contains(&id) {
                out.push(id);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_arrays() {
        assert_eq!(job_ids("123").unwrap(), Some(vec!["123".to_string()]));
        assert_eq!(job_ids("123_4").unwrap(), Some(vec!["123_4".to_string()]));
        assert_eq!(
            job_ids("7_[1-3,9]").unwrap().unwrap(),
            ["7_1", "7_2", "7_3", "7_9"]
        );
        assert_eq!(job_ids("7_[2-3%1]").unwrap().unwrap(), ["7_2", "7_3"]);
        assert!(job_ids("7_[3-1]").unwrap_err().contains("backwards"));
        assert!(job_ids("7_[a]").is_err());
        assert!(job_ids("7_x").is_err());
        assert!(job_ids("7_[1-99999999]").unwrap_err().contains("more than"));
        assert_eq!(job_ids("slurm-1.out").unwrap(), None);
        assert_eq!(job_ids("../etc").unwrap(), None);
        // Not one job: left to be read as a file's name, as before.
        for not in ["123+1", "0123", "12345678901", "4294967296_1", "123.0"] {
            assert_eq!(job_ids(not).unwrap(), None, "{not}");
        }
        assert!(job_ids("7_01").is_err());
        assert!(job_ids("7_4294967296").is_err());
        assert!(job_ids("7_[4294967296]").is_err());
    }

    #[test]
    fn output_file_names() {
        assert_eq!(job_from_file_name("slurm-123.out").as_deref(), Some("123"));
        assert_eq!(
            job_from_file_name("slurm-123_4.out").as_deref(),
            Some("123_4")
        );
        assert_eq!(
            job_from_file_name("my_job-55_2.out").as_deref(),
            Some("55_2")
        );
        assert_eq!(job_from_file_name("train_88").as_deref(), Some("88"));
        assert_eq!(job_from_file_name("slurm-.out"), None);
        assert_eq!(job_from_file_name("notes.txt"), None);
        assert_eq!(job_from_file_name("slurm-12a.out"), None);
    }

    #[test]
    fn a_directory_of_output_files() {
        let d = tempfile::tempdir().unwrap();
        for n in ["slurm-9_2.out", "slurm-9_10.out", "README", "slurm-9_1.out"] {
            std::fs::write(d.path().join(n), "").unwrap();
        }
        std::fs::create_dir(d.path().join("slurm-5.out")).unwrap();
        assert_eq!(from_path(d.path()).unwrap(), ["9_1", "9_10", "9_2"]);
        let empty = tempfile::tempdir().unwrap();
        assert!(from_path(empty.path())
            .unwrap_err()
            .contains("no Slurm output file"));
        let args = vec![
            d.path().to_string_lossy().into_owned(),
            "9_1".to_string(),
            "4".to_string(),
        ];
        assert_eq!(resolve(&args).unwrap(), ["9_1", "9_10", "9_2", "4"]);
        assert!(resolve(&["/nonexistent/x".into()])
            .unwrap_err()
            .contains("neither a job id"));
    }
}
