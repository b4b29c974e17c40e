#!/usr/bin/env bash
# `make check-removal`: removing a function is deleting its folder under
# functions/ and its line in the workspace `members` (and its template.yaml
# resources, which this does not check: docs/adapting.md lists them). Proved
# here for each function: a copy of the repository (its tracked files, as
# they are in the work tree) without it must still check, every target.
#
# Fast because nothing is built twice that need not be: one target dir for
# every copy, the repository's own target/ (so the registry dependencies
# that `make lint` checked are reused; only the workspace's own crates,
# which cargo keys by their path, are checked again), and each function's
# copy at the same path every run, with the files' modification times kept,
# so a warm run checks only what changed since the last one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$CARGO_TARGET_DIR/check-removal"

members=()
for d in functions/*/; do
  [[ -f "$d/Cargo.toml" ]] && members+=("${d%/}")
done
if ((${#members[@]} == 0)); then
  echo "check-removal: no function under functions/: nothing to remove"
  exit 0
fi

failed=()
for member in "${members[@]}"; do
  name=${member#functions/}
  started=$(date +%s)
  copy="$work/$name"
  rm -rf "$copy"
  mkdir -p "$copy"
  # tar keeps the modification times (cargo's fingerprints of the copy).
  git ls-files -z --cached --others --exclude-standard \
    | tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null \
    | tar -xf - -C "$copy"
  rm -rf "${copy:?}/$member"
  # Its line in `members`, and only that: the manifest must still parse.
  grep -qxF "    \"$member\"," "$copy/Cargo.toml" \
    || { echo "check-removal: no line '    \"$member\",' in Cargo.toml's members" >&2; exit 1; }
  grep -vxF "    \"$member\"," "$root/Cargo.toml" >"$copy/Cargo.toml"
  touch -r "$root/Cargo.toml" "$copy/Cargo.toml"
  echo "== without $member"
  if (cd "$copy" && cargo check --workspace --all-targets --offline --quiet); then
    echo "   checks without $member ($(($(date +%s) - started)) s)"
  else
    failed+=("$member")
  fi
done

if ((${#failed[@]} > 0)); then
  echo "check-removal: the workspace does not check without: ${failed[*]}" >&2
  echo "(something outside the folder still names it: see docs/adapting.md)" >&2
  exit 1
fi
echo "check-removal: each of ${members[*]} can be removed alone"
