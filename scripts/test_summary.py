#!/usr/bin/env python3
"""The whole suite's count, as one closing line: `tests: N passed, M failed`.

`make test` runs the doctests (`cargo test --doc`) and then cargo-nextest,
each writing its own closing lines: the doctests one `test result:` line per
crate (the last one often a crate with none, `0 passed`), nextest one
`Summary` line. A reader of the run's tail, a person or a tool that reads
the last line, should see the suite's total, not the last crate's. This
reads both logs and prints their sum, after the runners' own lines.

Usage: test_summary.py DOCTEST_LOG NEXTEST_LOG
Exit status: 1 when a log has no closing line (a runner that did not run),
or when anything failed; 0 otherwise.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

# cargo test's (and so rustdoc's) closing line of one crate.
DOCTEST = re.compile(r"^test result: \w+\. (\d+) passed; (\d+) failed")
# nextest's closing line: "Summary [ 12.3s] 512 tests run: 510 passed (2 slow), 2 failed, 0 skipped"
NEXTEST = re.compile(r"Summary \[.*\] (\d+) tests? run: (\d+) passed(?: \([^)]*\))?(?:, (\d+) failed)?")


def counts(text: str) -> tuple[int, int, int]:
    """(passed, failed, closing lines seen) of both runners' lines in text."""
    passed = failed = seen = 0
    for line in text.splitlines():
        line = line.strip()
        if m := DOCTEST.match(line):
            passed += int(m.group(1))
            failed += int(m.group(2))
            seen += 1
        elif m := NEXTEST.search(line):
            passed += int(m.group(2))
            failed += int(m.group(3) or 0)
            seen += 1
    return passed, failed, seen


def main(paths: list[str]) -> int:
    if len(paths) != 2:
        print(__doc__.split("\n\n")[3], file=sys.stderr)
        return 2
    total_passed = total_failed = 0
    for path in paths:
        passed, failed, seen = counts(Path(path).read_text(encoding="utf-8", errors="replace"))
        if seen == 0:
            print(f"test_summary: no closing line in {path}: did its runner run?", file=sys.stderr)
            return 1
        total_passed += passed
        total_failed += failed
    print(f"tests: {total_passed} passed, {total_failed} failed")
    return 1 if total_failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
