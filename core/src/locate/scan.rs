//! Every job's files in the places (the cards view reads every recorded job of a window):
//! each place a plain directory or a `%` template, walked one directory level per templated
//! component, entering only plain names and, for a component naming the user (`%u`, `%U`),
//! only a directory named for its owner; nothing is followed outside them. A job file is
//! `<job>.sqlite`, `<job>.<node>.sqlite` or a moved-aside `<job>.stale-<t>.sqlite`
//! (`store::paths::job_of_file_name`).

use std::path::PathBuf;

use crate::options::is_plain_name;
use crate::store;

/// Most directories one templated level may hold under one directory (a runaway archive
/// tree is cut, and said).
pub const MAX_DIRS: usize = 100_000;

/// The directories a template names, and a sentence for each thing left out.
#[derive(Debug, Default, PartialEq)]
pub struct Expanded {
    pub dirs: Vec<PathBuf>,
    pub notes: Vec<String>,
}

/// Whether a directory `name` owned by `owner` can be what the templated component `c` names:
/// where `c` holds `%u`/`%U`, only the owner's own name or uid fits (the plugin makes these
/// directories as the user), so names another user chose in a shared base are not entered.
/// Root's are always entered.
fn fits_owner(
    c: &str,
    name: &str,
    owner: u32,
    names: &mut std::collections::HashMap<u32, Option<String>>,
) -> bool {
    if owner == 0 || !(c.contains("%u") || c.contains("%U")) {
        return true;
    }
    let Some(user) = names
        .entry(owner)
        .or_insert_with(|| crate::sys::user_name(owner))
        .clone()
    else {
        return false;
    };
    let mut pat = String::new();
    let mut chars = c.chars();
    while let Some(ch) = chars.next() {
        match (ch, ch == '%') {
            (_, false) => pat.push_str(&glob::Pattern::escape(&ch.to_string())),
            _ => match chars.next() {
                Some('u') => pat.push_str(&glob::Pattern::escape(&user)),
                Some('U') => pat.push_str(&owner.to_string()),
                Some('%') => pat.push_str(&glob::Pattern::escape("%")),
                _ => pat.push('*'),
            },
        }
    }
    glob::Pattern::new(&pat).is_ok_and(|p| p.matches(name))
}

/// The directories a template names that exist: its fixed leading components, then every
/// plain-named subdirectory for each component holding a `%` ([`fits_owner`]; at most
/// [`MAX_DIRS`] under any one directory, and a note says so when more were there).
pub fn expand_dirs(template: &str) -> Expanded {
    use std::os::unix::fs::MetadataExt;
    if !template.contains('%') {
        return Expanded {
            dirs: vec![PathBuf::from(template)],
            notes: Vec::new(),
        };
    }
    let mut out = Expanded::default();
    let mut level: Vec<PathBuf> = vec![PathBuf::from(if template.starts_with('/') {
        "/"
    } else {
        "."
    })];
    let mut names = std::collections::HashMap::new();
    for c in template.split('/').filter(|c| !c.is_empty()) {
        if !c.contains('%') {
            level.iter_mut().for_each(|d| d.push(c));
            continue;
        }
        let mut next = Vec::new();
        for d in &level {
            let Ok(rd) = std::fs::read_dir(d) else {
                continue;
            };
            let (mut here, mut squats) = (Vec::new(), 0usize);
            for e in rd.flatten() {
                let Ok(name) = e.file_name().into_string() else {
                    continue;
                };
                // Directories only, never through a link.
                if !is_plain_name(&name) || !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                match e.metadata() {
                    Ok(m) if fits_owner(c, &name, m.uid(), &mut names) => here.push(d.join(name)),
                    _ => squats += 1,
                }
            }
            if squats > 0 {
                out.notes.push(format!(
                    "{}: {squats} directories not named for their owner were not read (only a user's own directory counts for `{c}`)",
                    d.display()
                ));
            }
            here.sort();
            if here.len() > MAX_DIRS {
                out.notes.push(format!(
                    "{}: {} directories, only the first {MAX_DIRS} were read",
                    d.display(),
                    here.len()
                ));
                here.truncate(MAX_DIRS);
            }
            next.extend(here);
        }
        level = next;
    }
    out.dirs = level;
    out
}

/// Whether `name` is a job file: `<job>.sqlite` or `<job>.<something>.sqlite`, not a hidden
/// scratch copy or a temporary (`store::paths::job_of_file_name`).
pub fn is_job_file(name: &str) -> bool {
    store::paths::job_of_file_name(name).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_file_names() {
        for ok in [
            "42.sqlite",
            "42.sw1.sqlite",
            "42.stale-1700000000000.sqlite",
        ] {
            assert!(is_job_file(ok), "{ok}");
        }
        for no in [
            ".42.archive-7.sqlite",
            "42.sqlite-wal",
            "42.alloc",
            "x.sqlite",
            "42.sqlite.tmp.1",
            "42.tmp.3.sqlite",
            ".sqlite",
        ] {
            assert!(!is_job_file(no), "{no}");
        }
    }

    #[test]
    fn templates_expand_to_the_directories_that_exist() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        for p in ["arch/alice/x", "arch/bob", "arch/.hidden"] {
            std::fs::create_dir_all(root.join(p)).unwrap();
        }
        std::fs::write(root.join("arch/file"), b"").unwrap();
        std::os::unix::fs::symlink(root.join("arch/bob"), root.join("arch/link")).unwrap();
        let t = format!("{}/arch/%u", root.display());
        assert_eq!(
            expand_dirs(&t).dirs,
            [root.join("arch/alice"), root.join("arch/bob")]
        );
        let plain = format!("{}/arch", root.display());
        assert_eq!(expand_dirs(&plain).dirs, [root.join("arch")]);
        assert!(expand_dirs(&format!("{}/none/%n", root.display()))
            .dirs
            .is_empty());
    }
}
