//! Where a job's recorded files are: the one rule that `report` and `jobs` (every node's file
//! of one job), the live view (each node's file), `history` and `sizing` (many jobs' figures)
//! and the cards view ([`scan`]: every job's files) follow.
//!
//! The places, most current first ([`site_places`]): the node-local spool (`spool=`, `%n` for
//! several slurmd on one host), the site's archive (`archive=`: `%u`, `%U`, `%j`, `%n`), then the
//! directories the caller names (`--archive`); each a plain directory or a template. In each
//! directory a job's files are `<id>.sqlite` (the spool's live file) and `<id>.<node>.sqlite`
//! (an archive copy), named from Slurm's numeric job id and plain node names only; nothing is
//! globbed but the job id's own prefix. One file per node counts, the first found: the live
//! spool before a copy.
//!
//! What may be read: only regular files (never a link or a FIFO); below an archive template's
//! fixed prefix, only directories that are the job user's or root's and writable by no one
//! else, the plugin's own rule for writing there (`options`, `archive=`), so a directory
//! another user made in a shared base is never entered. Opening is the store's
//! (`store::Reader`: no link followed, and root reads a private copy of a file its owner could
//! rewrite), and a file counts for a job only when its own record names that job (the
//! caller's check: a job id is reused, a file is named by hand).
//!
//! The job's summary in slurmdbd (its AdminComment, `analysis::admin_comment`) is the other
//! place its figures are: a report wants the rows for its charts, so it reads the files first
//! and the summary when there is none; `history` and the cards view want figures only, so
//! they take the summary that came with sacct's answer and open no file for that job.

pub mod scan;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::fasthash::FastMap;
use crate::options::{archive_dir_parts, is_plain_name, spool_for_node, TemplateIds};
use crate::store::paths;

/// What is known about the job for finding its files.
pub struct Wanted<'a> {
    /// The job's own id (an array task's own: `slurm::job_id::raw_id`).
    pub job_id: u32,
    /// The allocation's node names (empty when unknown).
    pub nodes: &'a [String],
    pub user: Option<&'a str>,
    /// The user's uid; `None`: looked up by [`user`](Self::user)'s name where a template
    /// needs it.
    pub uid: Option<u32>,
    /// Also every other node's `<id>.<node>.sqlite` a directory holds: for a reader that may
    /// not know the job's nodes (a report without sacct). `history` takes Slurm's node list as
    /// the allocation and looks for no other.
    pub other_nodes: bool,
}

/// The site's places, templates kept, most current first: `spool` when given (a flag), else
/// the site's spool; the site's archive; then `extra` directories (flags), each once.
pub fn site_places(spool: Option<&Path>, extra: &[PathBuf]) -> Vec<PathBuf> {
    crate::site::Site::here().record_dirs(spool, extra)
}

/// A spool's live file of a job: `<id>.sqlite` (the spool of this node, `%n` expanded).
pub fn live_file(spool_here: &Path, job_id: u32) -> PathBuf {
    spool_here.join(paths::live_name(job_id))
}

/// A directory's file names.
type Names =
    std::collections::HashSet<OsString, std::hash::BuildHasherDefault<crate::fasthash::Fnv>>;

/// Finds jobs' files in its places. Each directory is listed once and each templated directory
/// checked once: a window of a million runs then costs a set lookup per candidate name, not a
/// `stat` (most runs have no file).
pub struct Locator {
    places: Vec<PathBuf>,
    /// Each directory's file names; `None` where it cannot be listed but may still be
    /// searched (execute-only), so its candidates are probed one by one.
    /// Keyed by the path's bytes, with FNV: hashing a `Path` (component by component, with
    /// SipHash) twice per run was a seventh of a million-job window's analysis.
    listed: FastMap<OsString, Option<Names>>,
    /// Users' uids by name (`%U`, and whose directories may be entered), looked up once each.
    uids: FastMap<String, Option<u32>>,
    /// Whether each directory below a template's fixed prefix may be entered (see
    /// [`Locator::owned_by`]), checked once each.
    owned: FastMap<OsString, bool>,
}

impl Locator {
    /// A locator over `places` (each a plain directory or a template), most current first.
    pub fn new(places: Vec<PathBuf>) -> Locator {
        Locator {
            places,
            listed: FastMap::default(),
            uids: FastMap::default(),
            owned: FastMap::default(),
        }
    }

    /// Over the site's places ([`site_places`]).
    pub fn site(spool: Option<&Path>, extra: &[PathBuf]) -> Locator {
        Locator::new(site_places(spool, extra))
    }

    /// The job's files that are there, most current first: per place, per directory,
    /// `<id>.sqlite`, then each named node's `<id>.<node>.sqlite` (then any other plain
    /// node's, with [`Wanted::other_nodes`]). Each path at most once; regular files only.
    pub fn files(&mut self, w: &Wanted<'_>) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for d in self.dirs(w, w.nodes) {
            if self.listing(&d).is_some_and(|n| n.is_empty()) {
                continue; // most runs of a window: no file anywhere to look at
            }
            let mut here = names(&d, w.job_id, w.nodes);
            if w.other_nodes {
                here.extend(self.other_nodes(&d, w.job_id));
            }
            for p in here {
                if !out.contains(&p) && self.may_exist(&p) && is_regular_file(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// One node's own files, most current first, whether or not they exist yet (the live view
    /// opens the first that holds the node's recording of the job).
    pub fn node_files(&mut self, w: &Wanted<'_>, node: &str) -> Vec<PathBuf> {
        let node = [node.to_string()];
        let mut out: Vec<PathBuf> = Vec::new();
        for d in self.dirs(w, &node) {
            for p in names(&d, w.job_id, &node) {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The directories `w`'s files for `nodes` may be in, in the places' order, each once.
    fn dirs(&mut self, w: &Wanted<'_>, nodes: &[String]) -> Vec<PathBuf> {
        let places = std::mem::take(&mut self.places);
        let mut out: Vec<PathBuf> = Vec::new();
        for place in &places {
            for d in self.place_dirs(place, w, nodes) {
                if !out.contains(&d) {
                    out.push(d);
                }
            }
        }
        self.places = places;
        out
    }

    /// The directories `place` names for the job on `nodes`: itself, or a template expanded
    /// per node — a spool's `%n` (several slurmd on one host), an archive's `%u`, `%U`, `%j`,
    /// `%n`. Below an archive template's fixed prefix every directory must be the user's or
    /// root's and writable by no one else ([`Locator::owned_by`]).
    fn place_dirs(&mut self, place: &Path, w: &Wanted<'_>, nodes: &[String]) -> Vec<PathBuf> {
        let Some(t) = place.to_str().filter(|d| d.contains('%')) else {
            return vec![place.to_path_buf()];
        };
        let names_the_user = t.replace("%%", "").replace("%n", "").contains('%');
        if !names_the_user {
            return nodes
                .iter()
                .filter_map(|n| spool_for_node(place, n))
                .collect();
        }
        let Some(user) = w.user else {
            return Vec::new();
        };
        let uid = match w.uid {
            Some(uid) => Some(uid),
            None => *self
                .uids
                .entry(user.to_string())
                .or_insert_with(|| crate::sys::user_uid(user)),
        };
        let Some(uid) = uid else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for node in nodes {
            let ids = TemplateIds {
                user,
                uid,
                job_id: w.job_id,
                node,
            };
            let Some((mut d, below)) = archive_dir_parts(t, &ids) else {
                continue;
            };
            let mut ok = true;
            for c in below {
                d.push(c);
                ok = ok && self.owned_by(&d, uid);
            }
            if ok && !out.contains(&d) {
                out.push(d);
            }
        }
        out
    }

    /// Whether `dir` is a directory (not a link) of `uid` or root that no one else can write;
    /// a missing one is fine (nothing is read from it).
    fn owned_by(&mut self, dir: &Path, uid: u32) -> bool {
        use std::os::unix::fs::MetadataExt;
        *self
            .owned
            .entry(dir.as_os_str().to_owned())
            .or_insert_with(|| match std::fs::symlink_metadata(dir) {
                Ok(m) => {
                    m.file_type().is_dir()
                        && (m.uid() == uid || m.uid() == 0)
                        && m.mode() & 0o022 == 0
                }
                Err(e) => e.kind() == std::io::ErrorKind::NotFound,
            })
    }

    /// `dir`'s file names, listed the first time it is asked for.
    fn listing(&mut self, dir: &Path) -> Option<&Names> {
        if !self.listed.contains_key(dir.as_os_str()) {
            let names = match std::fs::read_dir(dir) {
                Ok(rd) => Some(rd.filter_map(|e| e.ok().map(|e| e.file_name())).collect()),
                // Gone: no file in it. Unlistable: probe each name.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(Default::default()),
                Err(_) => None,
            };
            self.listed.insert(dir.as_os_str().to_owned(), names);
        }
        self.listed.get(dir.as_os_str()).and_then(Option::as_ref)
    }

    /// Whether `path` may be a file, without a `stat` where its directory was listed.
    fn may_exist(&mut self, path: &Path) -> bool {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return true;
        };
        self.listing(dir).is_none_or(|n| n.contains(name))
    }

    /// Every `<id>.<node>.sqlite` in `dir` of a plain node name, sorted (a file of a node the
    /// caller did not know about).
    fn other_nodes(&mut self, dir: &Path, job_id: u32) -> Vec<PathBuf> {
        let mut more: Vec<PathBuf> = self
            .listing(dir)
            .into_iter()
            .flatten()
            .filter_map(|name| {
                let name = name.to_str()?;
                let node = paths::node_of_archive_name(name, job_id)?;
                is_plain_name(node).then(|| dir.join(name))
            })
            .collect();
        more.sort();
        more
    }
}

/// A job's file names in `dir`: `<id>.sqlite`, then `<id>.<node>.sqlite` for each plain node.
fn names(dir: &Path, job_id: u32, nodes: &[String]) -> Vec<PathBuf> {
    let mut out = vec![dir.join(paths::live_name(job_id))];
    out.extend(
        nodes
            .iter()
            .filter(|n| is_plain_name(n))
            .map(|n| dir.join(paths::archive_name(job_id, n))),
    );
    out
}

/// A regular file, not reached through a link.
fn is_regular_file(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"x").unwrap();
    }

    fn me() -> (String, u32) {
        // SAFETY: getuid has no preconditions.
        let uid = unsafe { libc::getuid() };
        (crate::sys::current_user_name().unwrap(), uid)
    }

    fn rel(root: &Path, got: &[PathBuf]) -> Vec<String> {
        got.iter()
            .map(|p| p.strip_prefix(root).unwrap().display().to_string())
            .collect()
    }

    #[test]
    fn spool_per_node_and_archive_by_node() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let (user, uid) = me();
        touch(&root.join("spool/sw1/42.sqlite"));
        touch(&root.join("spool/sw2/42.sqlite"));
        touch(&root.join("spool/sw2/420.sqlite"));
        touch(&root.join(format!("arch/{user}/42.sw1.sqlite")));
        touch(&root.join(format!("arch/{user}/42.sw3.sqlite")));
        touch(&root.join(format!("arch/{user}/42.x.y.sqlite.tmp")));
        // The plugin's own rule for the user's directory, whatever the umask.
        std::fs::set_permissions(
            root.join(format!("arch/{user}")),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let nodes = vec!["sw1".to_string(), "sw2".to_string(), "sw3".to_string()];
        let w = Wanted {
            job_id: 42,
            nodes: &nodes,
            user: Some(&user),
            uid: Some(uid),
            other_nodes: true,
        };
        let spool = root.join("spool/%n");
        let arch = root.join("arch/%u");
        let got = Locator::new(vec![spool, arch]).files(&w);
        assert_eq!(
            rel(root, &got),
            [
                "spool/sw1/42.sqlite".to_string(),
                "spool/sw2/42.sqlite".to_string(),
                format!("arch/{user}/42.sw1.sqlite"),
                format!("arch/{user}/42.sw3.sqlite"),
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
            other_nodes: true,
        };
        let got = Locator::new(vec![d.path().join("nospool"), a.clone()]).files(&w);
        assert_eq!(got, [a.join("7.n1.sqlite"), a.join("7.n2.sqlite")]);
        // Without `other_nodes`, only the named nodes' files (here none) and the live file.
        let w = Wanted {
            other_nodes: false,
            ..w
        };
        assert!(Locator::new(vec![a]).files(&w).is_empty());
    }

    /// The rule's order and its refusals in one place: the live spool first, then the
    /// archive template, then named directories; a named node's file before a listed one;
    /// never a link; never a directory under the template that another user could write.
    #[test]
    fn the_order_and_the_refusals() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        let (user, _) = me();
        touch(&root.join("spool/n2/9.sqlite"));
        touch(&root.join(format!("arch/{user}/9.n1.sqlite")));
        touch(&root.join("extra/9.n1.sqlite"));
        touch(&root.join("extra/9.zz.sqlite"));
        touch(&root.join("extra/9.sqlite"));
        std::fs::create_dir_all(root.join("spool/n1")).unwrap();
        std::os::unix::fs::symlink(
            root.join("extra/9.n1.sqlite"),
            root.join("spool/n1/9.sqlite"),
        )
        .unwrap();
        let mine = root.join(format!("arch/{user}"));
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o700)).unwrap();
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let w = Wanted {
            job_id: 9,
            nodes: &nodes,
            user: Some(&user),
            uid: None, // looked up by name
            other_nodes: true,
        };
        let places = vec![
            root.join("spool/%n"),
            root.join("arch/%u"),
            root.join("extra"),
        ];
        let got = Locator::new(places.clone()).files(&w);
        assert_eq!(
            rel(root, &got),
            [
                "spool/n2/9.sqlite".to_string(),
                format!("arch/{user}/9.n1.sqlite"),
                "extra/9.sqlite".to_string(),
                "extra/9.n1.sqlite".to_string(),
                "extra/9.zz.sqlite".to_string(),
            ]
        );
        // One node's files, whether or not they are there, in the same order.
        assert_eq!(
            rel(root, &Locator::new(places.clone()).node_files(&w, "n1")),
            [
                "spool/n1/9.sqlite".to_string(),
                "spool/n1/9.n1.sqlite".to_string(),
                format!("arch/{user}/9.sqlite"),
                format!("arch/{user}/9.n1.sqlite"),
                "extra/9.sqlite".to_string(),
                "extra/9.n1.sqlite".to_string(),
            ]
        );
        // The user's archive directory writable by others (a squat in a shared base): not
        // entered, by either question.
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o777)).unwrap();
        let got = Locator::new(places.clone()).files(&w);
        assert!(!got.iter().any(|p| p.starts_with(&mine)), "{got:?}");
        let got = Locator::new(places).node_files(&w, "n1");
        assert!(!got.iter().any(|p| p.starts_with(&mine)), "{got:?}");
        // Without a user, a template naming the user names no directory.
        let w = Wanted { user: None, ..w };
        let got = Locator::new(vec![root.join("arch/%u")]).files(&w);
        assert!(got.is_empty(), "{got:?}");
    }
}
