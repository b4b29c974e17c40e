#!/usr/bin/env python3
"""Fail when the modules of a crate under crates/*/src import each other in a cycle.

A mention of `crate::X` (or `super::X` in a top-level module, or a
`crate::{X, ...}` group) in module Y counts as the edge Y -> X, doc links
included, except inside Y's `#[cfg(test)] mod tests { ... }`: tests may reach
anywhere. Run from the repository root; prints the cycle it finds.
"""
import pathlib
import re
import sys


def strip_tests(text: str) -> str:
    """The text without its `#[cfg(test)] mod tests { ... }` block(s)."""
    out, i = [], 0
    pat = re.compile(r"#\[cfg\([^\]]*test[^\]]*\)\]\s*mod\s+\w+\s*\{")
    while True:
        m = pat.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j


def edges(src: pathlib.Path) -> dict:
    mods = {p.stem: p for p in src.glob("*.rs") if p.stem not in ("lib", "main")}
    mods.update({p.name: p / "mod.rs" for p in src.iterdir() if (p / "mod.rs").exists()})
    graph = {m: set() for m in mods}
    for name, path in mods.items():
        text = strip_tests(path.read_text())
        found = set(re.findall(r"\b(?:crate|super)::(\w+)", text))
        for group in re.findall(r"\bcrate::\{([^}]*)\}", text):
            found.update(re.findall(r"(?:^|,)\s*(\w+)", group))
        graph[name] = {m for m in found if m in mods and m != name}
    return graph


def find_cycle(graph: dict):
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state:
                c = visit(m)
                if c:
                    return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            c = visit(n)
            if c:
                return c
    return None


def main() -> int:
    failed = False
    for src in sorted(pathlib.Path("crates").glob("*/src")):
        cycle = find_cycle(edges(src))
        if cycle:
            print(f"{src}: import cycle: {' -> '.join(cycle)}", file=sys.stderr)
            failed = True
    if not failed:
        print("no import cycles among the modules of crates/*/src")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
