#!/usr/bin/env python3
"""The longest functions in the workspace's sources, by lines from `fn` to its closing brace.

usage: scripts/long-functions.py [N]      (default: the 15 longest; tests excluded)
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def functions(path: Path):
    lines = path.read_text().split("\n")
    i = 0
    in_tests = False
    while i < len(lines):
        line = lines[i]
        if re.match(r"\s*#\[cfg\(test\)\]", line):
            in_tests = True
        m = re.match(r"\s*(pub(\([^)]*\))?\s+)?(async\s+)?fn\s+(\w+)", line)
        if m and not in_tests:
            depth, j, opened = 0, i, False
            while j < len(lines):
                code = re.sub(r'"(\\.|[^"\\])*"|//.*', "", lines[j])
                depth += code.count("{") - code.count("}")
                opened = opened or "{" in code
                if opened and depth <= 0:
                    break
                if not opened and code.rstrip().endswith(";"):
                    break
                j += 1
            yield m.group(4), i + 1, j - i + 1
            i = j
        i += 1


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    found = []
    for crate in ["core/src", "cli/src", "plugin/src", "epilog/src"]:
        for f in (ROOT / crate).rglob("*.rs"):
            if f.name == "tests.rs":
                continue
            for name, line, length in functions(f):
                found.append((length, f"{f.relative_to(ROOT)}:{line}", name))
    for length, where, name in sorted(found, reverse=True)[:n]:
        print(f"{length:5d}  {name:32s} {where}")


if __name__ == "__main__":
    main()
