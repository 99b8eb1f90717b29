//! The Debian package (scripts/package-deb.sh, run by scripts/test.sh before this tier):
//! installs, a job records through the installed plugin, man pages render, completion loads,
//! and removing it leaves slurmd healthy.

use slurmwatch_tests::*;
use std::path::Path;
use std::time::Duration;

const INSTALLED_SO: &str = "/usr/lib/x86_64-linux-gnu/slurm-wlm/slurmwatch.so";

fn deb() -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/debian");
    std::fs::read_dir(&dir)
        .ok()
        .and_then(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .find(|p| p.extension().is_some_and(|e| e == "deb"))
        })
        .unwrap_or_else(|| panic!("no .deb in {}: run scripts/package-deb.sh", dir.display()))
}

#[test]
#[ignore = "needs the test cluster: scripts/test.sh"]
fn the_deb_installs_records_a_job_and_removes_cleanly() {
    let deb = deb();
    let i = run("dpkg", &["-i", &deb.display().to_string()]);
    assert!(i.status.success(), "dpkg -i failed: {}", stderr(&i));
    let conf = std::fs::read_to_string("/etc/slurm/plugstack.conf.d/slurmwatch.conf").unwrap();
    assert!(
        conf.lines()
            .all(|l| l.trim().is_empty() || l.starts_with('#')),
        "the packaged plugstack file must not be active:\n{conf}"
    );
    for page in ["slurmwatch", "slurmwatch-report", "slurmwatch-doctor"] {
        let m = run("man", &["-l", &format!("/usr/share/man/man1/{page}.1.gz")]);
        assert!(
            m.status.success() && stdout(&m).contains("slurmwatch"),
            "man {page}: {}",
            stderr(&m)
        );
    }
    // What a site installs beside the binaries: the EpilogSlurmctld, the MailProg wrapper
    // (executable shell that parses) and the Grafana dashboard (JSON).
    for script in [
        "/usr/share/slurmwatch/slurmctld-epilog.sh",
        "/usr/share/slurmwatch/slurmwatch-mail.sh",
    ] {
        let n = run("sh", &["-n", script]);
        assert!(n.status.success(), "{script}: {}", stderr(&n));
        let mode = std::fs::metadata(script).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o755,
            0o755,
            "{script}"
        );
    }
    let dash = std::fs::read_to_string("/usr/share/slurmwatch/grafana/slurmwatch-job.json")
        .expect("the Grafana dashboard is installed");
    let dash: serde_json::Value = serde_json::from_str(&dash).expect("the dashboard is JSON");
    assert!(dash["panels"].as_array().is_some_and(|p| !p.is_empty()));
    let m8 = run("man", &["-l", "/usr/share/man/man8/slurmwatch-plugin.8.gz"]);
    assert!(
        stdout(&m8).contains("archive"),
        "plugin page: {}",
        stderr(&m8)
    );
    let c = run(
        "bash",
        &[
            "-c",
            "source /usr/share/bash-completion/completions/slurmwatch && complete -p slurmwatch",
        ],
    );
    assert!(
        c.status.success() && stdout(&c).contains("slurmwatch"),
        "completion: {}",
        stderr(&c)
    );

    {
        let _o = PlugstackOverride::with_plugin(INSTALLED_SO, &format!("spool={SPOOL}"));
        let job = Submit::new("packaged", "echo packaged; sleep 1")
            .arg("--slurmwatch=1")
            .submit();
        let line = job.wait(Duration::from_secs(180));
        assert_eq!(
            (line.state.as_str(), line.exit_code.as_str()),
            ("COMPLETED", "0:0")
        );
        let rows = recorded(job.id, &slurmwatch_core::model::Series::Job);
        assert!(
            rows.len() >= 2,
            "nothing recorded through the installed plugin"
        );

        let r = run("dpkg", &["-r", "slurmwatch"]);
        assert!(r.status.success(), "dpkg -r failed: {}", stderr(&r));
        assert!(!Path::new(INSTALLED_SO).exists());
        // The line is `optional`: with the plugin gone, jobs (without the option, which is
        // then unknown) still run.
        let job = Submit::new("unpackaged", "echo still runs").submit();
        let line = job.wait(Duration::from_secs(180));
        assert_eq!(
            (line.state.as_str(), line.exit_code.as_str()),
            ("COMPLETED", "0:0")
        );
        assert_eq!(job.output(), "still runs\n");
    }
    let s = run("scontrol", &["ping"]);
    assert!(stdout(&s).contains("UP"), "{}", stdout(&s));
    let n = run("sinfo", &["-h", "-o", "%T"]);
    assert!(
        stdout(&n)
            .lines()
            .all(|l| matches!(l.trim(), "idle" | "mixed" | "allocated")),
        "node unhealthy after removal: {}",
        stdout(&n)
    );
}

/// The RPM (scripts/package-rpm.sh) carries the same files, the plugstack file as config,
/// and requires the Slurm major.minor it was built for.
#[test]
#[ignore = "needs the test cluster: scripts/test.sh"]
fn the_rpm_carries_the_plugin_and_pins_the_slurm_release() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/rpm");
    let rpm = walk(&dir)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "rpm"))
        .unwrap_or_else(|| {
            panic!(
                "no .rpm under {}: run scripts/package-rpm.sh",
                dir.display()
            )
        });
    let f = rpm.display().to_string();
    let files = stdout(&run("rpm", &["-qpl", &f]));
    for want in [
        "/usr/lib64/slurm/slurmwatch.so",
        "/usr/bin/slurmwatch",
        "/usr/sbin/slurmwatch-epilog",
        "/usr/share/man/man8/slurmwatch-plugin.8",
        "/etc/slurm/plugstack.conf.d/slurmwatch.conf",
        "/usr/share/slurmwatch/slurmctld-epilog.sh",
        "/usr/share/slurmwatch/slurmwatch-mail.sh",
        "/usr/share/slurmwatch/grafana/slurmwatch-job.json",
    ] {
        assert!(
            files.lines().any(|l| l.starts_with(want)),
            "{want} missing:\n{files}"
        );
    }
    let conf = stdout(&run("rpm", &["-qp", "--configfiles", &f]));
    assert!(
        conf.contains("/etc/slurm/plugstack.conf.d/slurmwatch.conf"),
        "{conf}"
    );
    let req = stdout(&run("rpm", &["-qpR", &f]));
    assert!(
        req.contains("slurm-slurmd >= 22.05") && req.contains("slurm-slurmd < 22.06"),
        "{req}"
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
