//! Bindings to the installed `<slurm/slurmdb.h>`: the job-modify call's structs change between
//! Slurm releases, so one build matches the Slurm it was built against (as the plugin's).
//! `SLURM_INCLUDE_DIR` overrides the directory holding `slurm/slurmdb.h`; `SLURM_LIB_DIR`, the
//! directory holding that release's `libslurm.so` when it is not the system's (another
//! release's library unpacked here, as `scripts/vm/plugin.sh` does for the VM tier's).

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=SLURM_LIB_DIR");
    let include = env::var_os("SLURM_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/include"));
    let header = include.join("slurm/slurmdb.h");
    if !header.is_file() {
        eprintln!(
            "error: {} not found: install Slurm's development headers (Debian/Ubuntu: apt-get install libslurm-dev; RHEL: dnf install slurm-devel) or set SLURM_INCLUDE_DIR",
            header.display()
        );
        std::process::exit(1);
    }
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rustc-link-lib=dylib=slurm");
    if let Some(lib) = env::var_os("SLURM_LIB_DIR").map(PathBuf::from) {
        if !lib.join("libslurm.so").exists() {
            eprintln!(
                "error: SLURM_LIB_DIR={}: no libslurm.so there",
                lib.display()
            );
            std::process::exit(1);
        }
        println!("cargo:rustc-link-search=native={}", lib.display());
        // Another release's library may need a newer glibc than this machine's (trixie's
        // libslurm.so.42 needs 2.38): its own needs are resolved where it runs, against that
        // machine's glibc; this program's own stay those of the libc it is linked here with.
        println!("cargo:rustc-link-arg-bins=-Wl,--allow-shlib-undefined");
    }
    let bindings = bindgen::Builder::default()
        .header_contents(
            "wrapper.h",
            // The flags are `SLURM_BIT(n)` macros, which bindgen does not evaluate; clang
            // evaluates them as enum values.
            "#include <stdint.h>\n#include <slurm/slurm.h>\n#include <slurm/slurmdb.h>\n\
             enum sw_flag { SW_NO_DEFAULT_USAGE = JOBCOND_FLAG_NO_DEFAULT_USAGE,\
             SW_JOB_FLAG_NOTSET = SLURMDB_JOB_FLAG_NOTSET };\n",
        )
        .clang_arg(format!("-I{}", include.display()))
        .allowlist_function(
            "slurm_init|slurmdb_connection_(get|commit|close)|slurmdb_job_modify|slurm_list_(create|append|count|destroy)",
        )
        .allowlist_type("slurmdb_job_cond_t|slurmdb_job_rec_t|slurm_selected_step_t")
        .allowlist_var("NO_VAL")
        .allowlist_type("sw_flag")
        .constified_enum("sw_flag")
        .layout_tests(false)
        .generate()
        .unwrap_or_else(|e| {
            eprintln!("error: bindgen could not read {}: {e}", header.display());
            std::process::exit(1);
        });
    let out = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("slurmdb.rs");
    bindings
        .write_to_file(&out)
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", out.display()));
}
