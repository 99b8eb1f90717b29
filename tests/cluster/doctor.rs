//! `slurmwatch doctor` on the real cluster: ready when set up; each fault named.

use slurmwatch_tests::*;
use std::os::unix::fs::PermissionsExt;

fn doctor() -> (i32, String) {
    let o = std::process::Command::new(slurmwatch_bin())
        .arg("doctor")
        .output()
        .expect("run slurmwatch doctor");
    (o.status.code().unwrap_or(-1), stdout(&o) + &stderr(&o))
}

fn fail_line(text: &str, name: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with("FAIL") && l.split_whitespace().nth(1) == Some(name))
        .map(String::from)
}

#[cluster_test]
fn doctor_passes_on_the_test_cluster_and_names_each_fault() {
    {
        let _p = shared_plugstack();
        let (code, text) = doctor();
        assert_eq!(code, 0, "doctor failed on a set-up node:\n{text}");
        assert!(text.contains("plugin built for Slurm 22.05"), "{text}");
    }
    {
        // A bad plugstack argument.
        let _o = PlugstackOverride::new(&format!("spool={SPOOL} defualt=on"));
        let (code, text) = doctor();
        assert_eq!(code, 1, "{text}");
        let line = fail_line(&text, "plugstack").unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains("defualt"), "{line}");
    }
    {
        // The archive base missing.
        let _o = PlugstackOverride::new(&format!("spool={SPOOL} archive=/nonexistent-archive/%u"));
        let (code, text) = doctor();
        assert_eq!(code, 1, "{text}");
        let line = fail_line(&text, "archive").unwrap_or_else(|| panic!("{text}"));
        assert!(line.contains("/nonexistent-archive"), "{line}");
    }
    {
        // A world-writable spool (restored at once; the lock keeps other tests' jobs out).
        let _o = PlugstackOverride::new(&format!("spool={SPOOL}"));
        std::fs::set_permissions(SPOOL, std::fs::Permissions::from_mode(0o777)).unwrap();
        let (code, text) = doctor();
        std::fs::set_permissions(SPOOL, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(code, 1, "{text}");
        let line = fail_line(&text, "spool").unwrap_or_else(|| panic!("{text}"));
        assert!(
            line.contains("0777") && line.contains("chmod 0755"),
            "{line}"
        );
    }
}
