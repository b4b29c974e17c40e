#!/usr/bin/env python3
"""Unit tests of test_summary.py's arithmetic on fixed logs (run by make lint)."""

import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_summary  # noqa: E402

DOCTESTS = """
running 6 tests
test result: ok. 6 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.24s

running 0 tests
test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
"""
NEXTEST = "     Summary [ 159.486s] 373 tests run: 371 passed (2 slow), 2 failed, 0 skipped\n"
GREEN = "     Summary [   7.7s] 125 tests run: 125 passed, 0 skipped\n"


class Counts(unittest.TestCase):
    def test_doctests_are_summed_over_crates(self):
        self.assertEqual(test_summary.counts(DOCTESTS), (6, 0, 2))

    def test_nextest_with_slow_and_failed(self):
        self.assertEqual(test_summary.counts(NEXTEST), (371, 2, 1))

    def test_nextest_green(self):
        self.assertEqual(test_summary.counts(GREEN), (125, 0, 1))

    def test_no_closing_line_is_seen_as_none(self):
        self.assertEqual(test_summary.counts("Compiling x\nerror: could not compile"), (0, 0, 0))

    def test_main_prints_the_sum_and_fails_on_a_failure(self):
        import contextlib
        import io
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            doc, nx = Path(d, "doc.log"), Path(d, "nx.log")
            doc.write_text(DOCTESTS)
            nx.write_text(GREEN)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(test_summary.main([str(doc), str(nx)]), 0)
            self.assertEqual(out.getvalue(), "tests: 131 passed, 0 failed\n")
            nx.write_text(NEXTEST)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                self.assertEqual(test_summary.main([str(doc), str(nx)]), 1)
            self.assertEqual(out.getvalue(), "tests: 377 passed, 2 failed\n")
            nx.write_text("")
            self.assertEqual(test_summary.main([str(doc), str(nx)]), 1)


if __name__ == "__main__":
    unittest.main()
