#!/usr/bin/env bash
# make lib-check: the workspace's publishable crates (every member without
# `publish = false`: today crates/lambda-idempotency and
# crates/lambda-idempotency-testing) as crates.io and docs.rs would see them.
#
# 1. Every path dependency outside dev-dependencies has a version (crates.io
#    drops the path; without a version the crate cannot be packaged).
# 2. Their docs build with warnings as errors (broken or private intra-doc
#    links, bad code blocks), with every feature, as docs.rs builds them.
# 3. Each feature of each crate builds alone (`--no-default-features
#    --features F`), and so do no features, the defaults and all of them,
#    with the crate's warnings as errors: an item or import used only under
#    one feature fails here, not in an adopter's build. The feature list is
#    read from `cargo metadata`, so a new feature is covered as it is added.
# 4. `cargo package`: every crate is packaged (its Cargo.toml normalised,
#    its Cargo.lock generated; one command, so that the testing crate's
#    dependency on the library, by path and version, resolves to the
#    packaged library through cargo's local registry overlay: the library is
#    not on crates.io yet). A crate that depends on no other member (the
#    library) is then unpacked and checked from its packaged files alone,
#    every feature on, with its dependencies from the registry (a file
#    missing from `include` fails). The dependencies' artifacts are shared
#    with step 3, which checked the same crate with the same features, so
#    this costs the crate's own check (seconds) instead of the two minutes
#    of `cargo package`'s own verification, which builds the whole SDK stack
#    again in a target dir of its own. LIB_CHECK_VERIFY_ALL=1 runs cargo's
#    own verification of every crate instead: the library, and the testing
#    crate (only packaged otherwise: its sources are compiled by step 2,
#    from the workspace, and the library it uses is checked here).
#
# Costs: steps 2, 3 and 4 check, each with the crate's own
# feature set rather than the workspace's unified one, so a first run builds
# the dependencies again in those sets (minutes, once; docs/performance.md,
# "Time to a green run"); later runs only the crates themselves.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
started=$SECONDS
step_started=$SECONDS
step() {
  printf '\n----- lib-check: %s\n' "$*"
  step_started=$SECONDS
}
step_done() { printf -- '----- %s s\n' "$((SECONDS - step_started))"; }

meta=$(mktemp)
trap 'rm -f "$meta"' EXIT
cargo metadata --format-version 1 --no-deps --locked >"$meta"

# The publishable members, and per member its feature combinations: none,
# each feature alone, the defaults, all; equal sets are checked once (a
# crate with no default features has "defaults" = "none").
# (Each python3 runs in a command substitution of its own, not in `<(...)`,
# so that its failure stops the script.)
crates_txt=$(python3 - "$meta" <<'EOF'
import json, sys
meta = json.load(open(sys.argv[1]))
members = set(meta["workspace_members"])
for p in meta["packages"]:
    # `publish = false` is an empty list; unset is null.
    if p["id"] in members and p["publish"] != []:
        print(p["name"])
EOF
)
mapfile -t crates <<<"$crates_txt"
if [ -z "$crates_txt" ]; then
  echo "lib-check: no publishable member (all have publish = false)" >&2
  exit 1
fi
echo "publishable: ${crates[*]}"

step "the testing crate alone turns on none of the library's optional features"
# An adopter's test build must have the library features its production
# build has, no more: the testing crate's own features turn the library's
# on, its defaults none. The library's features as the testing crate alone
# resolves them (normal edges only), against the library's own defaults.
lib_features() {
  cargo tree --locked -e normal,build,features -p "$1" -i lambda-idempotency --prefix none \
    | sed -n 's/^lambda-idempotency feature "\([^"]*\)".*/\1/p' | sort -u
}
extra=$(comm -13 <(lib_features lambda-idempotency) <(lib_features lambda-idempotency-testing))
if [ -n "$extra" ]; then
  echo "lib-check: lambda-idempotency-testing alone turns on library features beyond the defaults: $extra" >&2
  exit 1
fi
step_done

step "path dependencies have versions"
python3 - "$meta" "${crates[@]}" <<'EOF'
import json, sys
meta = json.load(open(sys.argv[1]))
wanted = set(sys.argv[2:])
bad = [
    f"{p['name']} -> {d['name']}"
    for p in meta["packages"] if p["name"] in wanted
    for d in p["dependencies"]
    # dev-dependencies are stripped when packaging (kind "dev"); a
    # dependency with no version has the requirement "*".
    if d.get("path") and d["kind"] != "dev" and d["req"] == "*"
]
if bad:
    sys.exit("a path dependency without `version = ...` (cargo package refuses it): " + ", ".join(bad))
EOF
step_done

step "docs, warnings as errors, every feature"
# One rustdoc run per crate; --no-deps: the dependencies' docs are theirs.
# One cargo invocation per crate, each resolving that crate's features
# alone: the dependencies' check artifacts are then the very ones the
# feature step below needs for the crate with all its features (one
# invocation for both crates resolved a union of their features, a
# dependency tree checked for the docs alone: about a minute of CPU).
for c in "${crates[@]}"; do
  RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings" cargo doc --locked -p "$c" --all-features --no-deps
done
step_done

step "features: none, each alone, defaults, all (warnings as errors)"
for c in "${crates[@]}"; do
  combos_txt=$(python3 - "$meta" "$c" <<'EOF'
import json, sys
meta = json.load(open(sys.argv[1]))
p = next(p for p in meta["packages"] if p["name"] == sys.argv[2])
feats = p["features"]
# What a feature turns on of the crate's own features, transitively
# (`dep:x` and `x/y` entries are about dependencies, not features).
def closure(names):
    seen, todo = set(), list(names)
    while todo:
        f = todo.pop()
        if f in feats and f not in seen:
            seen.add(f)
            todo.extend(feats[f])
    return frozenset(seen - {"default"})
own = sorted(f for f in feats if f != "default")
combos = [("--no-default-features", frozenset())]
combos += [(f"--no-default-features --features {f}", closure([f])) for f in own]
combos += [("", closure(["default"])), ("--all-features", closure(own))]
done = set()
for args, enabled in combos:
    if enabled not in done:
        done.add(enabled)
        print(args)
EOF
  )
  mapfile -t combos <<<"$combos_txt"
  for args in "${combos[@]}"; do
    echo "$c ${args:-(defaults)}"
    # `cargo rustc` passes what follows `--` to this crate alone: the
    # dependencies are not rebuilt for it, and are shared with `cargo doc`.
    # shellcheck disable=SC2086 # $args is a list of flags
    cargo rustc --locked -p "$c" --lib --profile check $args -- -D warnings
  done
done
step_done

step "cargo package; checked from the packaged files"
# The check's workspace is the extracted crate alone, without this
# workspace's [profile.dev]: pass it on, so that its dependencies are
# compiled as every other dev build here compiles them, and their artifacts
# are shared (below).
profile_txt=$(python3 - <<'EOF'
import json, tomllib
dev = tomllib.load(open("Cargo.toml", "rb")).get("profile", {}).get("dev", {})
def flags(prefix, table):
    for k, v in table.items():
        key = f'{prefix}."{k}"' if not k.replace("-", "").replace("_", "").isalnum() else f"{prefix}.{k}"
        if isinstance(v, dict):
            yield from flags(key, v)
        else:
            yield "--config"
            yield f"{key}={json.dumps(v)}"
print("\n".join(flags("profile.dev", dev)))
EOF
)
profile=()
[ -z "$profile_txt" ] || mapfile -t profile <<<"$profile_txt"
# The members that depend on no other member (by a non-dev path dependency):
# they can be checked against the registry alone.
standalone_txt=$(python3 - "$meta" "${crates[@]}" <<'EOF'
import json, sys
meta = json.load(open(sys.argv[1]))
members = {p["name"] for p in meta["packages"] if p["id"] in set(meta["workspace_members"])}
for p in meta["packages"]:
    if p["name"] in sys.argv[2:] and not any(
        d.get("path") and d["kind"] != "dev" and d["name"] in members for d in p["dependencies"]
    ):
        print(p["name"])
EOF
)
pkg_args=()
for c in "${crates[@]}"; do pkg_args+=(-p "$c"); done
# --allow-dirty: a check, run before committing too; what is packaged is
# the working tree's files that `include` names.
if [ -n "${LIB_CHECK_VERIFY_ALL:-}" ]; then
  # cargo's own verification: a full build of each crate and its whole
  # dependency tree in a target dir of its own (minutes of CPU each).
  cargo package --locked --allow-dirty "${profile[@]}" "${pkg_args[@]}"
else
  cargo package --locked --allow-dirty --no-verify "${pkg_args[@]}"
  # Each standalone crate is unpacked from its .crate file and checked
  # there, every feature on, with the Cargo.lock `cargo package` wrote into
  # it (the workspace's versions) and this workspace's target directory:
  # the crate's own sources are compiled from the packaged files alone (a
  # file missing from `include` fails here), and its dependencies'
  # artifacts are those the feature step above made for the same crate and
  # features, instead of a second build of the SDK stack in a target dir of
  # cargo's own (what `cargo package`'s verification costs: about two
  # minutes of CPU here, for the same proof short of code generation).
  unpacked=$(mktemp -d)
  trap 'rm -f "$meta"; rm -rf "$unpacked"' EXIT
  target_dir=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["target_directory"])' "$meta")
  while read -r c; do
    [ -n "$c" ] || continue
    version=$(python3 - "$meta" "$c" <<'EOF'
import json, sys
print(next(p["version"] for p in json.load(open(sys.argv[1]))["packages"] if p["name"] == sys.argv[2]))
EOF
    )
    tar -xzf "$target_dir/package/$c-$version.crate" -C "$unpacked"
    echo "$c $version: cargo check of the packaged files, every feature"
    (cd "$unpacked/$c-$version" &&
      CARGO_TARGET_DIR="$target_dir" cargo check --locked --all-features "${profile[@]}")
  done <<<"$standalone_txt"
  unverified=()
  for c in "${crates[@]}"; do
    grep -qxF "$c" <<<"$standalone_txt" || unverified+=("$c")
  done
  if [ "${#unverified[@]}" -gt 0 ]; then
    echo "packaged, not checked from the package (LIB_CHECK_VERIFY_ALL=1 verifies them): ${unverified[*]}"
  fi
fi
step_done

printf '\nlib-check: %s passed in %s s\n' "${crates[*]}" "$((SECONDS - started))"
