//! The site's configuration as this host sees it, resolved once per process: the one owner of
//! where recordings are (spool, archive), which cluster this is and which node this host is.
//! Every command, the epilog and the node service read them here; a command's flag overrides
//! one value for one run, and no command types a default path of its own.
//!
//! - spool, archive, intervals: the slurmwatch line of Slurm's plugstack configuration, as
//!   slurmstepd reads it (`PlugStackConfig=` in slurm.conf, `include` globs followed:
//!   [`crate::slurm::plugstack`]); its defaults where no line is readable (a login host with
//!   slurm.conf but the plugin not installed).
//! - cluster: slurm.conf's `ClusterName`; the controller's own directory: `StateSaveLocation`.
//! - node: `SLURMD_NODENAME` (what slurmd gives its epilog; a host may run several slurmd),
//!   else this host's short name. It fills `%n` in a spool template.
//!
//! Files a user can write are never read here: slurm.conf and the plugstack files are the
//! admin's (root-owned on every site Slurm supports).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::options::{spool_for_node, PluginConfig};
use crate::slurm::{conf, plugstack};

/// The site as resolved from slurm.conf and the plugstack configuration.
#[derive(Debug, Clone, Default)]
pub struct Site {
    /// The plugin's settings from the site's plugstack line (defaults without one).
    pub plugin: PluginConfig,
    /// slurm.conf's `ClusterName`.
    pub cluster: Option<String>,
    /// This host's node name (`SLURMD_NODENAME`, else the short host name).
    pub node: Option<String>,
    /// slurm.conf's `StateSaveLocation`: on the controller, SlurmUser's own directory (the
    /// held mails' queue, `slurmwatch_core::mailq`).
    pub state_save_location: Option<PathBuf>,
}

impl Site {
    /// The site as this process sees it, resolved on first use (`SLURM_CONF` names
    /// slurm.conf, as for Slurm's own commands).
    pub fn here() -> &'static Site {
        static SITE: OnceLock<Site> = OnceLock::new();
        SITE.get_or_init(|| {
            let node = std::env::var("SLURMD_NODENAME")
                .ok()
                .filter(|n| !n.is_empty())
                .or_else(crate::sys::short_host_name);
            Site::resolve(&conf::path(), node)
        })
    }

    /// The site that `slurm_conf` and the plugstack files it names describe, for `node`.
    pub fn resolve(slurm_conf: &Path, node: Option<String>) -> Site {
        let plugin = plugstack::find_line(&plugstack::plugstack_path(slurm_conf))
            .and_then(|l| PluginConfig::parse(&l.args).ok())
            .unwrap_or_default();
        Site {
            plugin,
            cluster: conf::value_in(slurm_conf, "ClusterName"),
            node,
            state_save_location: conf::value_in(slurm_conf, "StateSaveLocation").map(PathBuf::from),
        }
    }

    /// The spool as the site names it, `%n` kept: the directory of every node's files on a
    /// host that sees several (the test cluster, a shared view of the spools).
    pub fn spool_template(&self) -> &Path {
        &self.plugin.spool_dir
    }

    /// This host's spool: `%n` filled with this node's name. `None` when the spool has `%n`
    /// and the node name is unknown or not a plain name.
    pub fn spool_here(&self) -> Option<PathBuf> {
        spool_for_node(&self.plugin.spool_dir, self.node.as_deref().unwrap_or(""))
    }

    /// The site's archive template (`archive=`), when it has one.
    pub fn archive_template(&self) -> Option<&str> {
        self.plugin.archive_template.as_deref()
    }

    /// Where recorded files are looked for, templates kept (the reader expands `%n`, `%u`,
    /// `%U`, `%j` per job): `spool` when given (a flag), else the site's spool; the site's
    /// archive; then `extra` directories (flags), each once.
    pub fn record_dirs(&self, spool: Option<&Path>, extra: &[PathBuf]) -> Vec<PathBuf> {
        let mut dirs = vec![spool.unwrap_or(self.spool_template()).to_path_buf()];
        dirs.extend(self.archive_template().map(PathBuf::from));
        dirs.extend(extra.iter().cloned());
        let mut seen = std::collections::HashSet::new();
        dirs.retain(|d| seen.insert(d.clone()));
        dirs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn the_site_is_read_from_slurm_conf_and_the_plugstack_line_it_names() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        let spank = d.path().join("spank/plugstack.conf");
        write(
            &conf,
            &format!(
                "ClusterName=tiger\nStateSaveLocation=/var/spool/slurmctld\nPlugStackConfig={}\n",
                spank.display()
            ),
        );
        write(&spank, "include plugstack.conf.d/*.conf\n");
        write(
            &d.path().join("spank/plugstack.conf.d/slurmwatch.conf"),
            "optional /usr/lib/slurmwatch.so spool=/local/sw/%n archive=/shared/sw/%u\n",
        );
        let s = Site::resolve(&conf, Some("gpu-07".into()));
        assert_eq!(s.cluster.as_deref(), Some("tiger"));
        assert_eq!(
            s.state_save_location.as_deref(),
            Some(Path::new("/var/spool/slurmctld"))
        );
        assert_eq!(s.spool_template(), Path::new("/local/sw/%n"));
        assert_eq!(s.spool_here(), Some(PathBuf::from("/local/sw/gpu-07")));
        assert_eq!(s.archive_template(), Some("/shared/sw/%u"));
        assert_eq!(
            s.record_dirs(None, &[PathBuf::from("/extra"), PathBuf::from("/extra")]),
            vec![
                PathBuf::from("/local/sw/%n"),
                PathBuf::from("/shared/sw/%u"),
                PathBuf::from("/extra")
            ]
        );
        // A flag's spool replaces the site's; the archive is still searched.
        assert_eq!(
            s.record_dirs(Some(Path::new("/mine")), &[]),
            vec![PathBuf::from("/mine"), PathBuf::from("/shared/sw/%u")]
        );
        // A node name that is not a plain name never fills %n.
        let s = Site::resolve(&conf, Some("../x".into()));
        assert_eq!(s.spool_here(), None);
    }

    #[test]
    fn without_a_line_the_defaults_hold() {
        let d = tempfile::tempdir().unwrap();
        let conf = d.path().join("slurm.conf");
        write(&conf, "SlurmctldHost=ctl\n");
        let s = Site::resolve(&conf, None);
        assert_eq!(s.cluster, None);
        assert_eq!(s.spool_template(), PluginConfig::default().spool_dir);
        assert_eq!(s.spool_here(), Some(PluginConfig::default().spool_dir));
        assert_eq!(s.archive_template(), None);
    }
}
