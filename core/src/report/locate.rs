//! Where a job's files are: one per node, in the node-local spool (`spool=` may hold `%n`
//! for several slurmd on one host) and in the archive (`<job>.<node>.sqlite`, written by the
//! plugin under the site's `archive=` template). Names are built from Slurm's numeric job id
//! and plain node names only; nothing is globbed but the job id's own prefix.

use std::path::{Path, PathBuf};

use crate::options::{expand_template, is_plain_name, spool_for_node, TemplateIds};
use crate::store::paths;

/// What is known about the job for finding its files.
pub struct Wanted<'a> {
    /// The job's own id (an array task's own: `slurm::job_id::raw_id`).
    pub job_id: u32,
    /// The allocation's node names (empty when unknown).
    pub nodes: &'a [String],
    pub user: Option<&'a str>,
    pub uid: Option<u32>,
}

/// Candidate files, most current first: the spool (live) before archive copies. Each path
/// at most once; files that do not exist are left out.
pub fn candidates(
    w: &Wanted<'_>,
    spool: &Path,
    archive_template: Option<&str>,
    archive_dirs: &[PathBuf],
) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut push_dir = |d: PathBuf| {
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    };
    if spool.to_str().is_some_and(|s| s.contains('%')) {
        for n in w.nodes {
            if let Some(d) = spool_for_node(spool, n) {
                push_dir(d);
            }
        }
    } else {
        push_dir(spool.to_path_buf());
    }
    if let (Some(t), Some(user), Some(uid)) = (archive_template, w.user, w.uid) {
        for n in w.nodes {
            let ids = TemplateIds {
                user,
                uid,
                job_id: w.job_id,
                node: n,
            };
            if let Some(d) = expand_template(t, &ids) {
                push_dir(d);
            }
        }
    }
    for d in archive_dirs {
        push_dir(d.clone());
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for d in &dirs {
        for p in in_dir(d, w.job_id, w.nodes) {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// One node's own files, most current first, whether or not they exist: the spool's
/// `<id>.sqlite` (`%n` expanded) and the archive's `<id>.<node>.sqlite`.
pub fn node_files(
    w: &Wanted<'_>,
    node: &str,
    spool: &Path,
    archive_template: Option<&str>,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = spool_for_node(spool, node)
        .map(|d| d.join(paths::live_name(w.job_id)))
        .into_iter()
        .collect();
    if let (Some(t), Some(user), Some(uid)) = (archive_template, w.user, w.uid) {
        let ids = TemplateIds {
            user,
            uid,
            job_id: w.job_id,
            node,
        };
        if let Some(dir) = expand_template(t, &ids) {
            out.push(dir.join(paths::archive_name(w.job_id, node)));
        }
    }
    out
}

/// `<id>.sqlite` and `<id>.<node>.sqlite` in `dir`: the named nodes first, then any other
/// plain node name found by listing (a file of a node the caller did not know about).
fn in_dir(dir: &Path, job_id: u32, nodes: &[String]) -> Vec<PathBuf> {
    let mut out = vec![dir.join(paths::live_name(job_id))];
    out.extend(
        nodes
            .iter()
            .filter(|n| is_plain_name(n))
            .map(|n| dir.join(paths::archive_name(job_id, n))),
    );
    if let Ok(rd) = std::fs::read_dir(dir) {
        let mut more: Vec<PathBuf> = rd
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let node = paths::node_of_archive_name(&name, job_id)?;
                is_plain_name(node).then(|| dir.join(&name))
            })
            .collect();
        more.sort();
        out.extend(more);
    }
    let mut seen = Vec::new();
    out.retain(|p| {
        let keep = !seen.contains(p) && std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
        seen.push(p.clone());
        keep
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    #[test]
    fn spool_per_node_and_archive_by_node() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        touch(&root.join("spool/sw1/42.sqlite"));
        touch(&root.join("spool/sw2/42.sqlite"));
        touch(&root.join("spool/sw2/420.sqlite"));
        touch(&root.join("arch/alice/42.sw1.sqlite"));
        touch(&root.join("arch/alice/42.sw3.sqlite"));
        touch(&root.join("arch/alice/42.x.y.sqlite.tmp"));
        let nodes = vec!["sw1".to_string(), "sw2".to_string(), "sw3".to_string()];
        let w = Wanted {
            job_id: 42,
            nodes: &nodes,
            user: Some("alice"),
            uid: Some(1000),
        };
        let spool = root.join("spool/%n");
        let t = format!("{}/arch/%u", root.display());
        let got = candidates(&w, &spool, Some(&t), &[]);
        let rel: Vec<String> = got
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect();
        assert_eq!(
            rel,
            [
                "spool/sw1/42.sqlite",
                "spool/sw2/42.sqlite",
                "arch/alice/42.sw1.sqlite",
                "arch/alice/42.sw3.sqlite"
            ]
        );
    }

    #[test]
    fn unknown_nodes_are_found_by_listing_and_odd_names_are_not() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        touch(&a.join("7.n1.sqlite"));
        touch(&a.join("7.n2.sqlite"));
        touch(&a.join("7...sqlite"));
        touch(&a.join("77.n1.sqlite"));
        let w = Wanted {
            job_id: 7,
            nodes: &[],
            user: None,
            uid: None,
        };
        let got = candidates(
            &w,
            &d.path().join("nospool"),
            None,
            std::slice::from_ref(&a),
        );
        assert_eq!(got, [a.join("7.n1.sqlite"), a.join("7.n2.sqlite")]);
    }
}
