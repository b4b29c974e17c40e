#!/usr/bin/env python3
"""Fail when the modules of a crate under crates/*/src import each other in a cycle.

Two kinds of cycle are looked for in every crate:

- between its top-level modules (`src/x.rs`, `src/x/mod.rs` or `src/x.rs`
  with `src/x/`): every .rs file of a module counts, its submodules'
  included, so `src/http/layer.rs` mentioning `crate::batch` is the edge
  http -> batch;
- between the submodules of one module folder (`http::body` <->
  `http::layer`), through `super::`, `self::` or `crate::http::` paths.
  The folder's own mod.rs is the facade, not a node: a child reading an
  item of its parent is not a cycle.

A mention of such a path, as a `use` (with `{...}` groups, nested too), a
qualified name or a doc link, counts as an edge, except inside a
`#[cfg(test)] mod ... { ... }` block: tests may reach anywhere. In code
(not in comments), a name a facade re-exports (`pub use layer::Foo;` in
http/mod.rs, `pub use batch::Handler;` in lib.rs) counts as the module it
comes from: reading it through the facade is still depending on that
module. A doc link to such a name does not: pointing readers at
`crate::Handler` rather than at where it lives is what the facade is for.

Run from the repository root; prints every cycle it finds and exits 1.
`--self-test` runs its own tests on synthetic trees instead.
"""
import pathlib
import re
import sys

TEST_BLOCK = re.compile(r"#\[cfg\([^\]]*test[^\]]*\)\]\s*mod\s+\w+\s*\{")
# A path from `crate`, `super` (any number of them) or `self`, up to a `{`
# group if it has one: `crate::a::b`, `super::super::c`, `crate::a::{`.
PATH = re.compile(r"\b(crate|self|super)((?:::(?:super|\w+))*)(::\{)?")
COMMENT = re.compile(r"//[^\n]*")
REEXPORT = re.compile(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);")


def strip_tests(text: str) -> str:
    """The text without its `#[cfg(test)] mod tests { ... }` block(s)."""
    out, i = [], 0
    while True:
        m = TEST_BLOCK.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i : m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j


def split_group(body: str) -> list:
    """The elements of a `{...}` group's inside, split at its top-level commas."""
    parts, depth, start = [], 0, 0
    for k, c in enumerate(body):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    parts.append(body[start:])
    return [p.strip() for p in parts if p.strip()]


def group_end(text: str, open_at: int) -> int:
    """The index of the `}` closing the group whose `{` is at `open_at`."""
    depth = 0
    for k in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth == 0:
            return k
    return len(text)


def expand(prefix: list, element: str) -> list:
    """The paths a `use` element stands for, each as (names, the name it is
    known by): `a::{b, c::d as e}` under `prefix` -> (prefix+[a, b], b),
    (prefix+[a, c, d], e)."""
    element = element.strip()
    m = re.match(r"^((?:\w+::)*)\{(.*)\}$", element, re.S)
    if m:
        head = prefix + [s for s in m.group(1).split("::") if s]
        out = []
        for part in split_group(m.group(2)):
            out.extend(expand(head, part))
        return out or [(head, None)]
    alias = re.search(r"\s+as\s+(\w+)$", element)
    if alias:
        element = element[: alias.start()]
    path = prefix + [s for s in element.split("::") if s and s != "*"]
    name = alias.group(1) if alias else (path[-1] if path else None)
    return [(path, name)]


def references(text: str) -> list:
    """Every `crate`/`super`/`self` path in `text`, as (base, names), where
    base is 'crate', 'self' or the number of `super`s."""
    found = []
    for m in PATH.finditer(text):
        names = [s for s in m.group(2).split("::") if s]
        base = m.group(1)
        if base == "super":
            ups = 1
            while names and names[0] == "super":
                ups += 1
                names.pop(0)
            base = ups
        if m.group(3):
            end = group_end(text, m.end() - 1)
            inside = text[m.end() : end]
            for part in split_group(inside):
                for path, _ in expand(names, part):
                    found.append((base, path))
        else:
            found.append((base, names))
    return found


def module_of(src: pathlib.Path, file: pathlib.Path) -> list:
    """A file's module path: src/http/body.rs -> [http, body]; mod.rs and
    lib.rs name their folder."""
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts.pop()
    return parts


def reexports(text: str, here: list) -> dict:
    """What `pub use` in a facade file makes a name stand for: name -> the
    absolute path it comes from (relative uses are taken from `here`)."""
    out = {}
    for m in REEXPORT.finditer(strip_tests(text)):
        for path, name in expand([], m.group(1)):
            if not path or name in (None, "self", "*"):
                continue
            if path[0] == "crate":
                full = path[1:]
            elif path[0] == "self":
                full = here + path[1:]
            elif path[0] == "super":
                full = here[:-1] + path[1:]
            else:
                full = here + path
            out[name] = full
    return out


def crate_modules(src: pathlib.Path):
    """The top-level modules of a crate and each one's files; the children
    of each module folder."""
    files = [
        p
        for p in sorted(src.rglob("*.rs"))
        if p.relative_to(src).parts[0] != "bin"
    ]
    top, children = {}, {}
    for f in files:
        path = module_of(src, f)
        if not path:
            continue
        top.setdefault(path[0], []).append(f)
        if len(path) >= 2:
            children.setdefault(path[0], set()).add(path[1])
    return files, top, children


def edges(src: pathlib.Path):
    """(graph of top-level modules, {folder: graph of its children})."""
    files, top, children = crate_modules(src)
    exported = {}
    for f in files:
        if f.name in ("lib.rs", "main.rs", "mod.rs") or (
            len(module_of(src, f)) == 1 and (src / module_of(src, f)[0]).is_dir()
        ):
            here = module_of(src, f)
            for name, full in reexports(f.read_text(), here).items():
                exported[tuple(here + [name])] = full
    graph = {m: set() for m in top}
    inner = {m: {c: set() for c in kids} for m, kids in children.items()}
    for f in files:
        here = module_of(src, f)
        if not here:
            continue
        text = strip_tests(f.read_text())
        code = COMMENT.sub("", text)
        refs = [(r, True) for r in references(code)] + [(r, False) for r in references(text)]
        for (base, names), in_code in refs:
            if base == "crate":
                target = list(names)
            elif base == "self":
                target = here + names
            else:
                # `super` in src/a/b.rs is `a`; in src/a.rs or a/mod.rs, the crate.
                if base > len(here):
                    continue
                target = here[: len(here) - base] + names
            # In code, a re-exported name stands for where it comes from
            # (twice at most: lib.rs re-exporting a facade's re-export). In
            # docs it does not: a doc link to `crate::Handler` is what the
            # facade is for, and would make every facade a cycle.
            for _ in range(2 if in_code else 0):
                for cut in range(len(target), 0, -1):
                    full = exported.get(tuple(target[:cut]))
                    if full is not None and full != target[:cut]:
                        target = full + target[cut:]
                        break
            if not target:
                continue
            if target[0] in graph and target[0] != here[0]:
                graph[here[0]].add(target[0])
            if (
                len(here) >= 2
                and len(target) >= 2
                and target[0] == here[0]
                and target[1] in inner.get(here[0], {})
                and target[1] != here[1]
            ):
                inner[here[0]][here[1]].add(target[1])
    return graph, inner


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


def cycles(src: pathlib.Path) -> list:
    """Every cycle found in a crate: at most one among its top-level
    modules and one per module folder, each as module paths."""
    graph, inner = edges(src)
    found = []
    cycle = find_cycle(graph)
    if cycle:
        found.append(cycle)
    for folder in sorted(inner):
        cycle = find_cycle(inner[folder])
        if cycle:
            found.append([f"{folder}::{m}" for m in cycle])
    return found


def main() -> int:
    failed = False
    for src in sorted(pathlib.Path("crates").glob("*/src")):
        for cycle in cycles(src):
            print(f"{src}: import cycle: {' -> '.join(cycle)}", file=sys.stderr)
            failed = True
    if not failed:
        print("no import cycles among the modules of crates/*/src")
    return 1 if failed else 0


def self_test() -> int:
    """Synthetic crates: the cycles the first version (mod.rs only, no
    sibling graph) could not see, and what must not count."""
    import tempfile
    import unittest

    def tree(files: dict) -> pathlib.Path:
        root = pathlib.Path(tempfile.mkdtemp()) / "src"
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        return root

    class Cycles(unittest.TestCase):
        def test_an_edge_from_a_submodule_file(self):
            # http/mod.rs is clean; http/layer.rs reads batch, which reads
            # http: the first version read only mod.rs and passed this.
            src = tree({
                "lib.rs": "pub mod batch;\npub mod http;\n",
                "batch.rs": "use crate::http::Body;\n",
                "http/mod.rs": "mod layer;\npub use layer::Body;\n",
                "http/layer.rs": "use crate::batch::run;\npub struct Body;\n",
            })
            self.assertEqual(cycles(src), [["batch", "http", "batch"]])

        def test_siblings_through_super_crate_and_groups(self):
            src = tree({
                "lib.rs": "pub mod http;\n",
                "http/mod.rs": "mod body;\nmod layer;\n",
                "http/body.rs": "use super::layer::Layer;\n",
                "http/layer.rs": "use crate::http::{body::{Body, limit}, other};\n",
            })
            self.assertEqual(cycles(src), [["http::body", "http::layer", "http::body"]])

        def test_siblings_through_the_facades_reexports(self):
            src = tree({
                "lib.rs": "pub mod http;\npub use http::Layer;\n",
                "http/mod.rs": "mod body;\nmod layer;\npub use layer::Layer;\npub use self::body::{Body as B};\n",
                "http/body.rs": "pub fn f(_: &crate::Layer) {}\npub struct Body;\n",
                "http/layer.rs": "use super::B;\npub struct Layer;\n",
            })
            self.assertEqual(cycles(src), [["http::body", "http::layer", "http::body"]])

        def test_what_is_not_a_cycle(self):
            src = tree({
                # A child reading its facade, the facade its children, a
                # test block reaching anywhere, a deeper file by super::super.
                "a/mod.rs": "mod x;\nmod y;\npub struct Shared;\nuse x::X;\n",
                "a/x.rs": "use super::Shared;\nuse super::y::Y;\npub struct X;\n",
                "a/y.rs": "use crate::b::B;\npub struct Y;\n#[cfg(test)]\nmod tests {\n    use super::super::x::X;\n    use crate::a::x::X;\n}\n",
                "a/y/deep.rs": "use super::super::Shared;\n",
                "b.rs": "pub struct B;\n#[cfg(test)]\nmod tests { use crate::a::Shared; }\n",
                # A doc link through lib.rs's re-export: not an edge to a.
                "lib.rs": "pub mod a;\npub mod b;\npub use a::x::X;\n",
                "b/doc.rs": "//! See [`crate::X`].\n",
            })
            self.assertEqual(cycles(src), [])
            graph, inner = edges(src)
            self.assertEqual(graph, {"a": {"b"}, "b": set()})
            self.assertEqual(inner, {"a": {"x": {"y"}, "y": set()}, "b": {"doc": set()}})

    suite = unittest.defaultTestLoader.loadTestsFromTestCase(Cycles)
    return 0 if unittest.TextTestRunner(verbosity=2).run(suite).wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(self_test() if sys.argv[1:] == ["--self-test"] else main())
