//! This site's slurmwatch settings, as the plugin sees them (the plugstack.conf line).

use std::path::PathBuf;

use slurmwatch_core::options::PluginConfig;

/// Slurm's spool and archive settings from plugstack.conf (defaults when unreadable).
pub fn plugin_config() -> PluginConfig {
    let conf = std::env::var_os("SLURM_CONF")
        .map(PathBuf::from)
        .and_then(|p| p.parent().map(|d| d.join("plugstack.conf")))
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/plugstack.conf"));
    let Ok(text) = std::fs::read_to_string(conf) else {
        return PluginConfig::default();
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.contains("slurmwatch"))
        .and_then(|l| {
            // `required|optional PATH ARGS...`
            let args: Vec<&str> = l.split_whitespace().skip(2).collect();
            PluginConfig::parse(&args).ok()
        })
        .unwrap_or_default()
}
