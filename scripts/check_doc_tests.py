#!/usr/bin/env python3
"""Fail when a test a document names does not exist.

docs/powertools.md maps each Powertools feature to the test that shows it
working, in the last column ("Test") of its tables. A test renamed or
deleted would leave the row claiming a proof that is gone; this check
(run by `make lint`) finds every backticked name in that column and
requires a `fn <name>(` in a Rust file of the repository (outside target/).

Usage: check_doc_tests.py [DOC ...]   (default: docs/powertools.md)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FN = re.compile(r"\bfn\s+([a-z_][a-z0-9_]*)\s*[<(]")
NAME = re.compile(r"`([a-z_][a-z0-9_]*)`")


def defined_functions() -> set[str]:
    names: set[str] = set()
    for path in ROOT.rglob("*.rs"):
        rel = path.relative_to(ROOT).parts
        if rel[0] in {"target", ".venv"} or "target" in rel:
            continue
        names.update(FN.findall(path.read_text(encoding="utf-8", errors="replace")))
    return names


def named_tests(doc: Path) -> list[tuple[int, str]]:
    """(line, name) for each backticked name in a table's "Test" column."""
    found: list[tuple[int, str]] = []
    test_col: int | None = None
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("|"):
            test_col = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if test_col is None:
            # A table's header row: which column is "Test".
            test_col = cells.index("Test") if "Test" in cells else -1
            continue
        if test_col < 0 or set(line) <= set("|-: ") or test_col >= len(cells):
            continue
        found += [(number, n) for n in NAME.findall(cells[test_col])]
    return found


def main(argv: list[str]) -> int:
    docs = [Path(a) for a in argv] or [ROOT / "docs" / "powertools.md"]
    defined = defined_functions()
    missing, total = [], 0
    for doc in docs:
        for line, name in named_tests(doc):
            total += 1
            if name not in defined:
                missing.append(f"{doc.relative_to(ROOT) if doc.is_absolute() else doc}:{line}: no test `{name}`")
    if missing:
        print("\n".join(missing), file=sys.stderr)
        print(f"check_doc_tests: {len(missing)} of {total} named tests do not exist", file=sys.stderr)
        return 1
    if total == 0:
        print("check_doc_tests: no test named in a Test column (has the table's header changed?)", file=sys.stderr)
        return 1
    print(f"check_doc_tests: {total} named tests, all defined")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
