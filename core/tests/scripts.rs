//! Repository scripts that act as root are safe on a real node: scripts/cluster.sh refuses to
//! touch a slurm.conf it did not write (it would overwrite it, SIGKILL every slurmstepd and
//! wipe the controller's state).

use std::process::Command;

#[test]
fn cluster_script_refuses_a_slurm_conf_it_did_not_write() {
    let etc = tempfile::tempdir().unwrap();
    let conf = etc.path().join("slurm.conf");
    let site = "# Site config\nClusterName=prod\nSlurmctldHost=head1\n";
    std::fs::write(&conf, site).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/cluster.sh");
    for cmd in ["up", "down", "wipe", "reinstall"] {
        let out = Command::new("bash")
            .arg(script)
            .arg(cmd)
            .env("CLUSTER_ETC", etc.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{cmd}: {err}");
        assert!(
            err.contains("was not written by this script") && err.contains("refusing"),
            "{cmd}: {err}"
        );
        assert_eq!(std::fs::read_to_string(&conf).unwrap(), site, "{cmd}");
    }
    // Nothing else was written beside it.
    let names: Vec<_> = std::fs::read_dir(etc.path()).unwrap().flatten().collect();
    assert_eq!(names.len(), 1);
}
