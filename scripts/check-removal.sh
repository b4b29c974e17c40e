#!/usr/bin/env bash
# `make check-removal`: removing a function is deleting its folder under
# functions/ and its template.yaml resources (docs/adapting.md); the
# workspace's `members` is a glob (functions/*), so nothing else names it.
# Proved here for each function, the order consumer included, without the
# two:
# - the template tooling still passes, without an edit, on a copy of the
#   repository (its tracked files, as they are in the work tree) without
#   them: the copy's scripts/validate-template.sh with
#   VALIDATE_CHECKS_ONLY=1 (the offline translation and
#   scripts/check_template.py on the template, on each combination of the
#   Deploy* parameters left, and on the Managed Instances variant; the SAM
#   translator of the .venv that validate-template.sh sets up; not sam
#   validate or cfn-lint, minutes instead of seconds), and
#   scripts/check_deploy_params.py, which must not list the function;
# - the workspace still passes `make lint`'s clippy, every target, in the
#   repository itself with the folder moved aside, and among the targets
#   are the library's HTTP tests (REQUIRED_TARGETS: not silently skipped
#   for want of a feature only the removed function turned on).
# The copy's template.yaml is written by scripts/remove_function.py (JSON,
# without everything under the function's Deploy* condition and the
# parameters only that used), as an adopter would remove it by hand.
# CHECK_REMOVAL_CARGO=0: the template part alone (seconds; for work on the
# template tooling on a machine without the warm target dir).
# CHECK_REMOVAL_TEMPLATE=0: the cargo part alone (CI runs the template part
# in the background beside lint, where no folder moves, and this part
# after it).
#
# Fast because nothing is checked twice that need not be. The template
# part runs on a copy (its tracked files, with their modification times).
# The cargo part runs in the repository itself, with the function's folder
# moved aside for the length of its check and Cargo.lock restored after:
# cargo keys a workspace crate's artifacts by its path, so a copy elsewhere
# checked all of them again (about a minute of CPU per function), while in
# place every crate whose inputs the removal does not change is fresh from
# `make lint`'s clippy (the same command), and only what the removal
# changes (a feature no remaining crate turns on) is checked again. An
# interrupted run leaves the folder in .check-removal-stash; the next run
# puts it back first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
work="$CARGO_TARGET_DIR/check-removal"

# The SAM translator and the SAM CLI's parsers (installed once; a no-op
# after `make validate`).
bash scripts/validate-template.sh --tools-only >/dev/null
py="$root/.venv/bin/python"

# Targets (package directory:kind:name) that must be checked without each
# function: a test target with `required-features` is skipped when no crate
# left turns them on.
REQUIRED_TARGETS=("lambda-idempotency:test:http")

# The cargo part's stash, in the repository (same filesystem, so the moves
# are renames; ignored by git; out of reach of `cargo clean`): the folder
# moved aside, under its own path, and Cargo.lock as it was (cargo drops
# the missing member from it). Each step leaves a state the next run can
# finish: the lock is saved before the folder moves, and dropped only
# after the folder is back.
stash="$root/.check-removal-stash"
put_back() {
  local d m
  for d in "$stash"/functions/*/; do
    [[ -d "$d" ]] || continue
    m="functions/$(basename "$d")"
    if [[ -e "$root/$m" ]]; then
      echo "check-removal: $m exists, and so does a stashed copy of it in ${d%/}: compare them, keep one, then delete $stash" >&2
      exit 1
    fi
    mv "${d%/}" "$root/$m"
  done
  if [[ -f "$stash/Cargo.lock" ]]; then cp -p "$stash/Cargo.lock" "$root/Cargo.lock"; fi
  rm -rf "$stash"
}
move_aside() {  # member (functions/<name>)
  mkdir -p "$stash/functions"
  cp -p "$root/Cargo.lock" "$stash/Cargo.lock"
  mv "$root/$1" "$stash/$1"
}
# A run cut short before it put a folder back: back first.
put_back
trap put_back EXIT
trap 'put_back; exit 130' INT
trap 'put_back; exit 143' TERM

if [[ "${CHECK_REMOVAL_CARGO:-1}" == 0 && "${CHECK_REMOVAL_TEMPLATE:-1}" == 0 ]]; then
  echo "check-removal: CHECK_REMOVAL_CARGO=0 and CHECK_REMOVAL_TEMPLATE=0 leave nothing to check" >&2
  exit 2
fi

members=()
for d in functions/*/; do
  [[ -f "$d/Cargo.toml" ]] && members+=("${d%/}")
done
if ((${#members[@]} == 0)); then
  echo "check-removal: no function under functions/: nothing to remove"
  exit 0
fi

# Without $member, on a copy: the template checks and make deploy's
# parameter check.
template_part() {
  local started copy log deployed
  started=$(date +%s)
  copy="$work/$name"
  rm -rf "$copy"

  mkdir -p "$copy"
  # The template part's copy: the tracked and untracked files, not the
  # ignored ones (target/, .venv, the stash).
  git ls-files -z --cached --others --exclude-standard \
    | tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null \
    | tar -xf - -C "$copy"
  rm -rf "${copy:?}/$member"
  # Cargo.toml as it is: its members are globs; a line naming the folder
  # would be an edit the removal needs, which it must not.
  if grep -qF "\"$member\"" "$copy/Cargo.toml"; then
    echo "check-removal: Cargo.toml names $member: removing it would need an edit there" >&2
    failed+=("$member (Cargo.toml names it)")
  fi
  # Its template resources; then the template checks, quiet unless they
  # fail. Their output goes under the copy's target/, which cargo, with its
  # target dir elsewhere, leaves alone; so does it the .venv link (hidden).
  ln -s "$root/.venv" "$copy/.venv"
  log="$copy/target/removal.log"
  mkdir -p "$copy/target"
  if ! "$py" scripts/remove_function.py template.yaml "$copy/template.yaml" "$member" >"$log" 2>&1 \
    || ! VALIDATE_CHECKS_ONLY=1 bash "$copy/scripts/validate-template.sh" >>"$log" 2>&1; then
    cat "$log"
    echo "   the template checks fail without $member" >&2
    failed+=("$member (template)")
  elif ! deployed=$("$py" "$copy/scripts/check_deploy_params.py" "$copy/template.yaml" 2>&1 | grep 'functions deployed:') \
    || [[ "$deployed, " == *" $name, "* ]]; then
    echo "   make deploy's parameter check, without $member: ${deployed:-no list of the functions deployed}" >&2
    failed+=("$member (deploy parameters)")
  else
    echo "   template checks pass without $member ($(tail -n 1 "$log" | grep -o '[0-9]* Deploy\* combinations'); $(($(date +%s) - started)) s)"
  fi
}

# Without $member, in place: make lint's clippy on every target.
cargo_part() {
  local started checked artifacts missing
  started=$(date +%s)
  # The same check also proves the library's HTTP tests are still among
  # its targets: cargo skips a target whose required features are off
  # without a word (lambda-idempotency's `http` test needs `http`, which the
  # testing crate turns on; were only a function to turn it on, removing
  # that function would drop them). Read from the artifacts this one
  # invocation reports (a fresh unit is reported too), not a second build.
  artifacts="$work/$name.artifacts.json"
  mkdir -p "$work"
  move_aside "$member"
  checked=0
  (cd "$root" && cargo clippy --workspace --all-targets --offline --quiet \
    --message-format json-render-diagnostics -- -D warnings >"$artifacts") || checked=$?
  put_back
  if ((checked != 0)); then
    failed+=("$member")
  elif ! missing=$("$py" - "$artifacts" "${REQUIRED_TARGETS[@]}" <<'PY'
import json, sys
seen = set()
with open(sys.argv[1], encoding="utf-8") as f:
    for line in f:
        m = json.loads(line)
        if m.get("reason") != "compiler-artifact":
            continue
        package = m["manifest_path"].replace("\\", "/").split("/")[-2]
        for kind in m["target"]["kind"]:
            seen.add(f"{package}:{kind}:{m['target']['name']}")
missing = [t for t in sys.argv[2:] if t not in seen]
print(" ".join(missing))
sys.exit(1 if missing else 0)
PY
  ); then
    echo "   without $member, cargo clippy --all-targets skipped: ${missing:-(no artifact list)}" >&2
    echo "   (a target whose required features no remaining crate turns on)" >&2
    failed+=("$member (targets skipped)")
  else
    echo "   checks without $member, ${REQUIRED_TARGETS[*]} among its targets ($(($(date +%s) - started)) s)"
  fi
}

failed=()
for member in "${members[@]}"; do
  name=${member#functions/}
  echo "== without $member"
  if [[ "${CHECK_REMOVAL_TEMPLATE:-1}" != 0 ]]; then
    template_part
  fi
  [[ "${CHECK_REMOVAL_CARGO:-1}" == 0 ]] || cargo_part
done

if ((${#failed[@]} > 0)); then
  echo "check-removal: the workspace or its template checks fail without: ${failed[*]}" >&2
  echo "(something outside the folder still names it: see docs/adapting.md)" >&2
  exit 1
fi
if [[ "${CHECK_REMOVAL_CARGO:-1}" == 0 ]]; then
  echo "check-removal: the template checks pass without each of ${members[*]} (CHECK_REMOVAL_CARGO=0: the workspace not checked)"
elif [[ "${CHECK_REMOVAL_TEMPLATE:-1}" == 0 ]]; then
  echo "check-removal: the workspace checks without each of ${members[*]} (CHECK_REMOVAL_TEMPLATE=0: the template not checked)"
else
  echo "check-removal: each of ${members[*]} can be removed alone"
fi
