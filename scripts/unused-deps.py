#!/usr/bin/env python3
"""Dependencies a crate declares but never names in its code (as cargo-machete does, offline).

usage: scripts/unused-deps.py            exit 1 and the list when any is unused

For each workspace member, every [dependencies] / [dev-dependencies] / [build-dependencies]
entry must appear as `name::`, `use name`, `extern crate name` or `name!` (dashes as
underscores) in the files that table serves: every target's for dependencies, src/ + tests/ +
benches/ + examples/ for dev-dependencies, build.rs for build-dependencies. A crate's dev-dependency on
itself (to switch a feature on for its tests) counts as used.
"""
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sources(crate: Path, dirs):
    for d in dirs:
        p = crate / d
        if p.is_file():
            yield p
        elif p.is_dir():
            yield from p.rglob("*.rs")


def main():
    ws = tomllib.loads((ROOT / "Cargo.toml").read_text())
    members = [ROOT] + [ROOT / m for m in ws.get("workspace", {}).get("members", [])]
    unused = []
    for crate in members:
        manifest = tomllib.loads((crate / "Cargo.toml").read_text())
        own = manifest.get("package", {}).get("name", "")
        lib_path = manifest.get("lib", {}).get("path")
        src_dirs = ["src"] + ([lib_path] if lib_path else [])
        tables = {
            # Every target may use a normal dependency (the root package is all tests).
            "dependencies": src_dirs + ["tests", "benches", "examples", "build.rs"],
            "dev-dependencies": src_dirs + ["tests", "benches", "examples"],
            "build-dependencies": ["build.rs"],
        }
        for table, dirs in tables.items():
            text = "\n".join(p.read_text() for p in sources(crate, dirs))
            for dep, spec in manifest.get(table, {}).items():
                name = (spec.get("package", dep) if isinstance(spec, dict) else dep)
                if name == own:
                    continue
                ident = dep.replace("-", "_")
                if not re.search(rf"(\b{ident}::|use {ident}\b|extern crate {ident}\b|\b{ident}!)", text):
                    unused.append(f"{crate.relative_to(ROOT) or '.'}: [{table}] {dep}")
    for u in unused:
        print(u)
    print(f"{len(members)} crates checked, {len(unused)} unused dependencies")
    return 1 if unused else 0


if __name__ == "__main__":
    sys.exit(main())
