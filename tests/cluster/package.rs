//! The Debian package (scripts/package-deb.sh, run by scripts/test.sh before this tier):
//! installs, a job records through the installed plugin, man pages render, completion loads,
//! and removing it leaves slurmd healthy.

use slurmwatch_tests::*;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

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

#[cluster_test]
fn the_deb_installs_records_a_job_and_removes_cleanly() {
    let deb = deb();
    let depends = stdout(&run(
        "dpkg-deb",
        &["-f", &deb.display().to_string(), "Depends"],
    ));
    // The summaries are signed with munge (issue 16): the package says so.
    assert!(depends.split(',').any(|d| d.trim() == "munge"), "{depends}");
    // slurmwatch-dbd-comment links libslurm: the package requires the one that holds it.
    let holder = stdout(&run("dpkg", &["-S", "libslurm.so.38"]));
    let holder = holder.split(':').next().unwrap_or("").trim();
    assert!(
        !holder.is_empty() && depends.split(',').any(|d| d.trim() == holder),
        "{depends} (libslurm.so.38 is in {holder:?})"
    );
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
    let site = std::fs::read_to_string("/usr/share/slurmwatch/site.toml.example")
        .expect("the site file's example is installed");
    assert!(site.contains("#[thresholds]") && site.contains("#[notes.gpu_idle]"));
    node_service_is_installed_inactive_and_least_privileged();
    // The AdminComment's store (issue 38), where ctld-epilog looks for it, and it runs.
    let dbd = run("/usr/bin/slurmwatch-dbd-comment", &[]);
    assert!(
        stderr(&dbd).contains("hint: slurmwatch-dbd-comment --cluster NAME JOBID"),
        "{}",
        stderr(&dbd)
    );
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

        // The installed CLI runs sacct with the installed TCP shim (core/src/slurm/quickack.rs).
        let dir = job_dir("packaged-shim");
        let (log, sacct) = (dir.join("preload"), dir.join("sacct"));
        std::fs::write(
            &sacct,
            format!(
                "#!/bin/sh\nprintf '%s\\n' \"$LD_PRELOAD\" >> {}\nexec sacct \"$@\"\n",
                log.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&sacct, std::fs::Permissions::from_mode(0o755)).unwrap();
        let o = std::process::Command::new("/usr/bin/slurmwatch")
            .args(["report", &job.id.to_string(), "--json", "--no-log"])
            .env("SLURMWATCH_SACCT", &sacct)
            .env_remove("LD_PRELOAD")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "/usr/bin/../lib/slurmwatch/libslurmwatch_quickack.so\n"
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

/// The RPMs (scripts/package-rpm.sh, one per Slurm release: the host's, 24.11 and 26.05) carry
/// the same files, the plugstack file as config, require the Slurm major.minor each was built
/// for (and name it in the release field), and their binaries need glibc 2.34 at most — RHEL
/// 9's, so a plugin built on Debian 12 loads there.
#[cluster_test]
fn the_rpms_carry_the_plugin_and_pin_the_slurm_release() {
    // submits no job: it reads the built RPMs.
    for (dir, mm, next) in [
        ("target/rpm", "22.05", "22.06"),
        ("target/rpm-24.11", "24.11", "24.12"),
        ("target/rpm-26.05", "26.05", "26.06"),
    ] {
        check_rpm(dir, mm, next);
    }
}

fn check_rpm(dir: &str, mm: &str, next: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let rpm = walk(&dir)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "rpm"))
        .unwrap_or_else(|| {
            panic!(
                "no .rpm under {}: run scripts/package-rpm.sh (with the release for target/rpm-*)",
                dir.display()
            )
        });
    let f = rpm.display().to_string();
    assert!(
        f.ends_with(&format!("-1.slurm{mm}.x86_64.rpm")) || f.contains(&format!(".slurm{mm}.")),
        "the file name does not say the Slurm release: {f}"
    );
    let files = stdout(&run("rpm", &["-qpl", &f]));
    for want in [
        "/usr/lib64/slurm/slurmwatch.so",
        "/usr/bin/slurmwatch",
        "/usr/lib64/slurmwatch/libslurmwatch_quickack.so",
        "/usr/sbin/slurmwatch-epilog",
        "/usr/share/man/man8/slurmwatch-plugin.8",
        "/etc/slurm/plugstack.conf.d/slurmwatch.conf",
        "/usr/share/slurmwatch/slurmctld-epilog.sh",
        "/usr/share/slurmwatch/slurmwatch-mail.sh",
        "/usr/share/slurmwatch/grafana/slurmwatch-job.json",
        "/usr/share/slurmwatch/site.toml.example",
        "/usr/lib/systemd/system/slurmwatch-node.service",
        "/etc/slurmwatch/node.conf",
    ] {
        assert!(
            files.lines().any(|l| l.starts_with(want)),
            "{want} missing:\n{files}"
        );
    }
    // The AdminComment's store, linked against each release's own libslurm (issue 38).
    assert!(
        files
            .lines()
            .any(|l| l == "/usr/bin/slurmwatch-dbd-comment"),
        "{mm}: {files}"
    );
    let conf = stdout(&run("rpm", &["-qp", "--configfiles", &f]));
    assert!(
        conf.contains("/etc/slurm/plugstack.conf.d/slurmwatch.conf")
            && conf.contains("/etc/slurmwatch/node.conf"),
        "{conf}"
    );
    let req = stdout(&run("rpm", &["-qpR", &f]));
    assert!(
        req.contains(&format!("slurm-slurmd >= {mm}"))
            && req.contains(&format!("slurm-slurmd < {next}"))
            && req.lines().any(|l| l.trim() == "munge"),
        "{req}"
    );
    // …and requires the library it links: 22.05's libslurm.so.38, 24.11's .42, 26.05's .45.
    let soname = match mm {
        "22.05" => "libslurm.so.38",
        "24.11" => "libslurm.so.42",
        _ => "libslurm.so.45",
    };
    assert!(
        req.lines()
            .any(|l| l.trim() == format!("{soname}()(64bit)")),
        "{mm}: {req}"
    );
    // Every ELF file in the package: the highest glibc symbol version it needs.
    let x = job_dir(&format!("rpm-{mm}"));
    let sh = format!("rpm2archive - < '{f}' | tar -xzf - -C '{}'", x.display());
    let o = run("sh", &["-c", &sh]);
    assert!(o.status.success(), "unpacking {f}: {}", stderr(&o));
    for bin in [
        "usr/lib64/slurm/slurmwatch.so",
        "usr/bin/slurmwatch",
        "usr/lib64/slurmwatch/libslurmwatch_quickack.so",
        "usr/sbin/slurmwatch-epilog",
        "usr/bin/slurmwatch-dbd-comment",
    ] {
        let p = x.join(bin);
        let syms = stdout(&run("objdump", &["-T", &p.display().to_string()]));
        let newest = syms
            .split_whitespace()
            .filter_map(|w| {
                w.strip_prefix("(GLIBC_")
                    .or_else(|| w.strip_prefix("GLIBC_"))
            })
            .filter_map(|v| {
                let v = v.trim_end_matches(')');
                let mut it = v.split('.').map(|n| n.parse::<u32>().ok());
                Some((it.next()??, it.next().flatten().unwrap_or(0)))
            })
            .max();
        assert!(
            newest.is_some(),
            "{bin} in {f}: no glibc symbols read:\n{syms}"
        );
        assert!(
            newest <= Some((2, 34)),
            "{bin} in {f} needs glibc {newest:?}, newer than RHEL 9's 2.34"
        );
    }
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

/// The node service as the .deb installs it (issue 36, part 3): not enabled; systemd accepts
/// the unit; systemd's own score of its sandbox (`systemd-analyze security`, 0 best, 10 worst)
/// stays at "OK" or better; and its command line, with the shipped settings, starts an
/// endpoint that serves root. (There is no systemd on the test bed to run it under.)
fn node_service_is_installed_inactive_and_least_privileged() {
    const UNIT: &str = "/lib/systemd/system/slurmwatch-node.service";
    assert!(exists(Path::new(UNIT)), "{UNIT} is not installed");
    assert!(
        !exists(Path::new(
            "/etc/systemd/system/multi-user.target.wants/slurmwatch-node.service"
        )),
        "the package must not enable the node service"
    );
    let v = run("systemd-analyze", &["verify", "--man=no", UNIT]);
    assert!(
        v.status.success() && stderr(&v).trim().is_empty(),
        "systemd-analyze verify: {}{}",
        stdout(&v),
        stderr(&v)
    );
    let s = run("systemd-analyze", &["security", "--offline=yes", UNIT]);
    let text = stdout(&s) + &stderr(&s);
    let score: f64 = text
        .split("Overall exposure level for slurmwatch-node.service: ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level: {text}"));
    eprintln!("systemd-analyze security: exposure {score} (of 10)");
    assert!(score <= 2.5, "exposure {score}: {text}");
    // The unit's command line with the shipped settings (a free port in place of 9944).
    let unit = std::fs::read_to_string(UNIT).unwrap();
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("ExecStart");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = format!(
        ". /etc/slurmwatch/node.conf; SLURMWATCH_LISTEN=127.0.0.1:{port}; exec {}",
        exec.replace("${SLURMWATCH_LISTEN}", "$SLURMWATCH_LISTEN")
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let answer = loop {
        let o = run(
            "curl",
            &[
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
                &format!("http://127.0.0.1:{port}/metrics"),
            ],
        );
        let code = stdout(&o);
        if code == "200" || t.elapsed() > Duration::from_secs(10) {
            break code;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(answer, "200", "{script}");
}
