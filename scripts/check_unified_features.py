#!/usr/bin/env python3
"""Fail when the shipped build and the test build would compile a
third-party crate with different features.

The shipped build is what `cargo build --bins`, `cargo lambda watch` and the
e2e build: the default members (the functions), without dev-dependencies.
The test build is `make test`'s: the whole workspace with them. Where the two
resolve different features for a crate, cargo compiles it, and every crate
above it, twice in one CI run (tokio's features alone moved the AWS SDK).
crates/workspace-hack (cargo-hakari) makes every build resolve the union;
this check is what keeps it up to date without installing cargo-hakari in
CI: a difference means `cargo hakari generate && cargo hakari manage-deps`.

Crates of the workspace itself are not compared: their features differ on
purpose (the shipped functions do not turn on the library's test-only or
unused features), and they are cheap to compile again.
"""
import subprocess
import sys


def features(*args):
    run = subprocess.run(
        ["cargo", "tree", "--locked", "--offline", "--prefix", "none", "-f", "{p}|{f}", *args],
        capture_output=True, text=True,
    )
    if run.returncode != 0:
        sys.exit(f"cargo tree {' '.join(args)} failed:\n{run.stderr}")
    out = run.stdout
    seen = {}
    for line in out.splitlines():
        line = line.removesuffix(" (*)").strip()
        if "|" not in line:
            continue
        pkg, feats = line.split("|", 1)
        if "(/" in pkg:  # a path package: one of the workspace's own
            continue
        # One version can be built twice in one tree (as a build or
        # proc-macro dependency, and as a normal one) with other features:
        # every feature set of it counts.
        seen.setdefault(pkg, set()).add(frozenset(filter(None, feats.split(","))))
    return seen


def show(sets):
    return " | ".join("[" + ",".join(sorted(f)) + "]" for f in sorted(sets, key=sorted))


def main():
    shipped = features("-e", "no-dev")
    tests = features("--workspace")
    differ = sorted(
        f"{pkg}: shipped {show(f)} vs tests {show(tests[pkg])}"
        for pkg, f in shipped.items()
        if pkg in tests and tests[pkg] != f
    )
    if differ:
        print("the shipped build and the test build resolve different features of:", file=sys.stderr)
        for d in differ:
            print(f"  {d}", file=sys.stderr)
        print("each is compiled twice (with all it supports); regenerate crates/workspace-hack:\n"
              "  cargo install cargo-hakari --locked && cargo hakari generate && cargo hakari manage-deps",
              file=sys.stderr)
        sys.exit(1)
    print(f"the shipped build's {len(shipped)} third-party crates have the test build's features")


if __name__ == "__main__":
    main()
