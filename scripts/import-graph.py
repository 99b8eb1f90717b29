#!/usr/bin/env python3
"""The module import graph of each crate, and its cycles.

usage: scripts/import-graph.py [--dot] [CRATE_SRC_DIR ...]   (default: every crate's src/)

Every `use crate::…`, `use super::…` and inline `crate::a::b` path in a file is an edge from
that file's module to the deepest module the path names. An edge A → B is judged at the level
where A and B part: both are mapped to their ancestors just below their common ancestor, so
`store::reader → store::codec` is an edge between siblings `reader` and `codec`, while
`store::reader → store` (a child using its parent) says nothing about layering. A cycle among
siblings fails the check (exit 1) with the files behind each edge; `--dot` prints the sibling
graph for Graphviz instead. Test modules (`tests.rs`, `#[cfg(test)] mod tests { … }`) are
left out: tests may use anything.
"""
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_of(src: Path, file: Path) -> tuple:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return tuple(parts)


def strip_tests_and_comments(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    # Drop `#[cfg(test)] mod NAME { … }` bodies by brace matching.
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def use_paths(tree: str, prefix: str = ""):
    """Flattens a use tree (`a::{b, c::{d, e}}`) into full paths."""
    tree = tree.strip()
    if not tree:
        return
    depth, start, items = 0, 0, []
    for k, ch in enumerate(tree):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(tree[start:k])
            start = k + 1
    items.append(tree[start:])
    if len(items) > 1:
        for it in items:
            yield from use_paths(it, prefix)
        return
    item = items[0].strip()
    brace = item.find("{")
    if brace >= 0:
        head = item[:brace].rstrip(":").strip()
        inner = item[brace + 1 : item.rfind("}")]
        yield from use_paths(inner, prefix + head + "::" if head else prefix)
    else:
        item = re.split(r"\s+as\s+", item)[0].strip()
        yield prefix + item


def resolve(module: tuple, path: str, known: set):
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    elif parts[0] in ("super", "self"):
        base = module
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                base = base[:-1]
            parts = parts[1:]
        rest = parts
    else:
        return None
    target = base
    for p in rest:
        if target + (p,) in known:
            target = target + (p,)
        else:
            break
    return target


def edges_of(src: Path):
    files = {module_of(src, f): f for f in src.rglob("*.rs") if f.name != "tests.rs"}
    known = set(files)
    edges = defaultdict(set)  # (a, b) siblings -> {(from_file, to_module)}
    for module, file in files.items():
        text = strip_tests_and_comments(file.read_text())
        paths = []
        for m in re.finditer(r"\buse\s+((?:crate|super|self)\b[^;]*);", text, re.S):
            paths.extend(use_paths(m.group(1)))
        paths += re.findall(r"(?<![\w:])(crate(?:::\w+)+|super(?:::\w+)+)", text)
        for p in paths:
            target = resolve(module, p, known)
            if target is None or target == module:
                continue
            common = 0
            while (
                common < min(len(module), len(target))
                and module[common] == target[common]
            ):
                common += 1
            if common == len(module) or common == len(target):
                continue  # ancestor and descendant
            a = module[: common + 1]
            b = target[: common + 1]
            shown = file.relative_to(ROOT) if file.is_relative_to(ROOT) else file
            edges[(a, b)].add((str(shown), "::".join(target)))
    return edges


def cycles(edges):
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            strong(v)
    return out


def main(argv):
    dot = "--dot" in argv
    dirs = [Path(a) for a in argv if a != "--dot"] or sorted(
        p.parent for p in ROOT.glob("*/Cargo.toml") if (p.parent / "src").is_dir()
    )
    dirs = [d / "src" if (d / "src").is_dir() else d for d in dirs]
    failed = False
    for src in dirs:
        src = src.resolve()
        edges = edges_of(src)
        name = src.parent.name
        if dot:
            print(f'digraph "{name}" {{')
            for a, b in sorted(edges):
                print(f'  "{"::".join(a)}" -> "{"::".join(b)}";')
            print("}")
            continue
        found = cycles(edges)
        print(f"{name}: {len({m for e in edges for m in e})} modules, {len(edges)} edges, "
              f"{len(found)} cycles")
        for comp in found:
            failed = True
            print("  cycle: " + " <-> ".join("::".join(m) for m in comp))
            for a, b in sorted(edges):
                if a in comp and b in comp:
                    for f, t in sorted(edges[(a, b)]):
                        print(f"    {'::'.join(a)} -> {'::'.join(b)}  ({f} uses {t})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
