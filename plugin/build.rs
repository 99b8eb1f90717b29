//! Generates the SPANK bindings from the installed `<slurm/spank.h>` so one build matches the
//! Slurm it was built against, including `plugin_version` (from `slurm_version.h`): slurmstepd
//! refuses a plugin whose major.minor differs from its own.
//!
//! `SLURM_INCLUDE_DIR` overrides the directory that holds `slurm/spank.h` (sites with Slurm in
//! `/opt/slurm/include`, say).

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    // slurmstepd may dlclose the plugin while a sampler or archive thread left behind past
    // its deadline still runs: keep the code mapped for the life of the process.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    let include = env::var_os("SLURM_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/include"));
    let header = include.join("slurm/spank.h");
    let version = include.join("slurm/slurm_version.h");
    for h in [&header, &version] {
        if !h.is_file() {
            eprintln!(
                "error: {} not found: install Slurm's development headers (Debian/Ubuntu: apt-get install libslurm-dev; RHEL: dnf install slurm-devel) or set SLURM_INCLUDE_DIR to the directory that contains slurm/spank.h",
                h.display()
            );
            std::process::exit(1);
        }
        println!("cargo:rerun-if-changed={}", h.display());
    }

    let bindings = bindgen::Builder::default()
        .header_contents(
            "wrapper.h",
            "#include <slurm/slurm_version.h>\n#include <slurm/spank.h>\n",
        )
        .clang_arg(format!("-I{}", include.display()))
        .allowlist_function("spank_.*")
        .allowlist_function("slurm_(info|error|verbose|debug)")
        .allowlist_type("spank_.*")
        .allowlist_var("SLURM_VERSION_NUMBER|ESPANK_.*")
        .rustified_enum("spank_item")
        .rustified_enum("spank_context")
        .layout_tests(false)
        .generate()
        .unwrap_or_else(|e| {
            eprintln!("error: bindgen could not read {}: {e}", header.display());
            std::process::exit(1);
        });
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("spank.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}
