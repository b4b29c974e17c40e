#!/usr/bin/env python3
"""Fail when a project generated from template/ still carries the template.

    python3 scripts/check_generated.py DIR [--forbid WORD ...]

Looks at every file under DIR (but target/, .venv/, .aws-sam/ and
Cargo.lock) for:
- a placeholder left unsubstituted: `{{`, `{%`, `{#` (Jinja's and Liquid's
  syntax) or `cookiecutter`, anywhere, comments included;
- a name of the repository's own functions (`order`, `Order`, `payment`,
  `Payment`, `notif`, `Notif`, and each --forbid WORD) outside comments:
  `//` comments in Rust, `#` comments in TOML, YAML, Makefiles, Python and
  shell. Markdown and JSON have no comments: all their text counts.

Prints each finding as path:line: what, and exits 1 if there is any.
"""

import argparse
import pathlib
import re
import sys

PLACEHOLDERS = ["{{", "{%", "{#", "cookiecutter"]
NAMES = ["order", "Order", "ORDER", "payment", "Payment", "notif", "Notif"]
SKIP_DIRS = {"target", ".venv", ".aws-sam", ".git"}
SKIP_FILES = {"Cargo.lock"}


def strip_comment(path, line):
    """The line without its comment (a rough cut: a comment marker inside
    a string also cuts, which can only hide a finding in that string's
    tail, never invent one)."""
    name = path.name
    if path.suffix == ".rs":
        return line.split("//", 1)[0]
    if path.suffix in {".toml", ".yaml", ".yml", ".py", ".sh"} or name in {"Makefile", ".gitignore"}:
        # `#` starts a comment at the line's start or after whitespace.
        return re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
    return line


def findings(root, forbid):
    names = NAMES + forbid
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or set(rel.parts) & SKIP_DIRS or path.name in SKIP_FILES:
            continue
        for needle in PLACEHOLDERS:
            if needle in path.name:
                yield f"{rel}: placeholder `{needle}` in the file's name"
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for needle in PLACEHOLDERS:
                if needle in line:
                    yield f"{rel}:{n}: placeholder `{needle}`: {line.strip()[:100]}"
            code = strip_comment(path, line)
            for word in names:
                if word in code:
                    yield f"{rel}:{n}: `{word}` outside comments: {line.strip()[:100]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", type=pathlib.Path)
    ap.add_argument("--forbid", action="append", default=[], metavar="WORD")
    args = ap.parse_args()
    if not args.dir.is_dir():
        sys.exit(f"{args.dir}: not a folder")
    found = list(findings(args.dir, args.forbid))
    for f in found:
        print(f"{args.dir}/{f}")
    if found:
        print(f"check_generated: {len(found)} finding(s) in {args.dir}: the template left these", file=sys.stderr)
        sys.exit(1)
    files = sum(1 for p in args.dir.rglob("*") if p.is_file() and not set(p.relative_to(args.dir).parts) & SKIP_DIRS)
    print(f"check_generated: {args.dir}: {files} files, no placeholder, no leftover name")


if __name__ == "__main__":
    main()
