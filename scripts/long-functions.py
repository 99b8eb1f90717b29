#!/usr/bin/env python3
"""The longest functions in the workspace's sources, by lines from `fn` to its closing brace.

usage: scripts/long-functions.py [--top N] [--max LINES] [DIR...]

Lists the N longest (default 15) in DIR... (default: recorder/src core/src cli/src plugin/src epilog/src).
With --max, lists those longer than LINES instead and exits 1 if there is any (the house rule
"small functions", kept by core/tests/layering.rs). Tests are left out: `#[cfg(test)]` items
and files named tests.rs. Braces are matched on the code alone: comments, strings (raw ones
included) and char literals are blanked first, so a `"{"` or `'}'` does not count.
"""
import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = ["recorder/src", "core/src", "cli/src", "plugin/src", "epilog/src"]


def code_only(text: str) -> str:
    """`text` with comments, string and char literals blanked (newlines kept)."""
    out = list(text)
    n, i = len(text), 0

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            blank(i, j)
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            blank(i, j)
            i = j
        elif c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")) and (
            m := re.match(r'r(#*)"', text[i:i + 260])
        ):
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            blank(i, j)
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        elif c == "'":
            # A char literal ('x', '\n', '\u{7f}'), else a lifetime ('a) left as it is.
            if i + 1 < n and text[i + 1] == "\\":
                j = text.find("'", i + 3)
                j = n if j < 0 else j + 1
            elif i + 2 < n and text[i + 2] == "'":
                j = i + 3
            else:
                i += 1
                continue
            blank(i, j)
            i = j
        else:
            i += 1
    return "".join(out)


def matching_brace(code: str, open_at: int) -> int:
    depth = 0
    for k in range(open_at, len(code)):
        if code[k] == "{":
            depth += 1
        elif code[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return len(code) - 1


def test_ranges(code: str):
    """Spans of `#[cfg(test)]` items (a test module, fn or impl)."""
    for m in re.finditer(r"#\[cfg\(test\)\]", code):
        brace, semi = code.find("{", m.end()), code.find(";", m.end())
        if brace >= 0 and (semi < 0 or brace < semi):
            yield m.start(), matching_brace(code, brace)


def functions(path: Path):
    """(name, first line, length in lines) of each function with a body in `path`."""
    code = code_only(path.read_text())
    tests = list(test_ranges(code))
    line_of = lambda pos: code.count("\n", 0, pos) + 1  # noqa: E731
    for m in re.finditer(r"\bfn\s+(\w+)", code):
        if any(a <= m.start() <= b for a, b in tests):
            continue
        depth, k = 0, m.end()
        while k < len(code):
            ch = code[k]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch in "{;":
                break
            k += 1
        if k >= len(code) or code[k] == ";":
            continue  # a declaration without a body (a trait's, or an extern one)
        first = line_of(m.start())
        yield m.group(1), first, line_of(matching_brace(code, k)) - first + 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--max", type=int)
    ap.add_argument("dirs", nargs="*")
    a = ap.parse_args()
    dirs = [Path(d) for d in a.dirs] or [ROOT / c for c in CRATES]
    found = []
    for d in dirs:
        for f in sorted(d.rglob("*.rs")):
            if f.name == "tests.rs":
                continue
            shown = f.relative_to(ROOT) if f.is_relative_to(ROOT) else f
            for name, line, length in functions(f):
                found.append((length, f"{shown}:{line}", name))
    found.sort(key=lambda x: (-x[0], x[1]))
    if a.max is None:
        for length, where, name in found[: a.top]:
            print(f"{length:5d}  {name:32s} {where}")
        return
    over = [x for x in found if x[0] > a.max]
    for length, where, name in over:
        print(f"{length:5d}  {name:32s} {where}: over {a.max} lines")
    longest = found[0] if found else (0, "-", "-")
    print(
        f"{len(found)} functions checked, {len(over)} over {a.max} lines; "
        f"longest {longest[0]} ({longest[2]} at {longest[1]})"
    )
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
