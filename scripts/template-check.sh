#!/usr/bin/env bash
# make template-check: prove that template/ writes projects that build, pass
# their tests, validate and run their demo.
#
# 1. The placeholder check (scripts/check_generated.py) is seen failing on
#    a deliberately broken instance: a file with a placeholder left in and
#    one with a leftover name.
# 2. The template refuses invalid answers with a clear error (a name that is
#    not a Rust identifier, a reserved word, an empty event list, a
#    transition from an unknown state, an answer outside a choice
#    list, which cookiecutter itself refuses).
# 3. Two instances, non-interactively, into temporary folders: a non-default
#    one (booking, four events, x86_64, the HTTP API) through `sam init
#    --location` (the command README.md gives), and the defaults (no HTTP
#    API) through cookiecutter itself. Each: the placeholder check, then its
#    own `make test`, `make validate` and `make demo`. The first has the
#    API's files and its tests ran; the second has none of them.
#
# The instances build into this workspace's target dir with its Cargo.lock
# (CARGO_TARGET_DIR, and the lockfile copied in), so the dependencies built
# for the workspace are reused; they use the workspace's .venv (the SAM CLI
# and cfn-lint that make validate installs). TEMPLATE_CHECK_KEEP=1 keeps the
# folders.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

VENV="$ROOT/.venv"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
export SAM_CLI_TELEMETRY=0
WORK="$(mktemp -d "${TMPDIR:-/tmp}/template-check.XXXXXX")"
if [[ "${TEMPLATE_CHECK_KEEP:-0}" != 1 ]]; then
  trap 'rm -rf "$WORK"' EXIT
else
  echo "template-check: keeping $WORK"
fi
step() { printf '\n==> %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }

step "tools: the SAM CLI (and its cookiecutter) and cfn-lint in .venv"
bash scripts/validate-template.sh --tools-only

step "the placeholder check fails on a broken instance"
mkdir -p "$WORK/broken/src"
printf 'pub const NAME: &str = "{{ cookiecutter.entity }}";\n' > "$WORK/broken/src/lib.rs"
printf '// an Order in a comment is fine\npub struct OrderEvent;\n' > "$WORK/broken/src/event.rs"
if out=$(python3 scripts/check_generated.py "$WORK/broken" 2>&1); then
  echo "$out"; echo "template-check: the placeholder check passed a broken tree" >&2; exit 1
fi
echo "$out"
grep -q 'src/lib.rs:1: placeholder `{{`' <<<"$out"
grep -q 'src/event.rs:2: `Order` outside comments' <<<"$out"
if grep -q 'src/event.rs:1' <<<"$out"; then
  echo "template-check: a comment was taken for code" >&2; exit 1
fi
echo "seen failing, as it should"

step "invalid answers are refused, each with its reason"
refused() {  # the expected message, then cookiecutter's key=value answers
  local want=$1; shift
  local out
  if out=$("$VENV/bin/cookiecutter" --no-input template -o "$WORK/refused" "$@" 2>&1); then
    echo "template-check: accepted $*" >&2; exit 1
  fi
  if ! grep -qF -- "$want" <<<"$out"; then
    echo "$out"; echo "template-check: refused $*, but without \"$want\"" >&2; exit 1
  fi
  echo "refused ($want): $*"
}
refused "is not a Rust identifier" entity=Booking-2
refused "is a Rust keyword" entity=type
refused "the list is empty" events=" , "
refused "which no event leads to" events="Made:->NEW, Shipped:NEW->SENT, Lost:GONE->LOST"
# cookiecutter itself refuses an answer outside a choice list.
refused "but the choices are ['no', 'yes']" include_http_api=maybe
refused "use lower-case letters" project_name=My_Consumer
[[ ! -e "$WORK/refused" ]] || [[ -z "$(ls -A "$WORK/refused")" ]]

instance_check() {  # project folder
  local dir=$1
  step "$(basename "$dir"): no placeholder, no leftover name"
  python3 scripts/check_generated.py "$dir"
  # The workspace's versions of every dependency, so its builds are reused.
  cp "$ROOT/Cargo.lock" "$dir/Cargo.lock"
  step "$(basename "$dir"): make test"
  make -C "$dir" test VENV="$VENV" 2>&1 | tee "$WORK/test.out"
  step "$(basename "$dir"): make validate"
  make -C "$dir" validate VENV="$VENV"
  step "$(basename "$dir"): make demo"
  make -C "$dir" demo VENV="$VENV" | tee "$WORK/demo.out"
  # The demo shows every verdict the samples are made for.
  for v in Applied Duplicate Stale Early Rejected Conflict Invalid; do
    grep -q -- "-> $v" "$WORK/demo.out" || { echo "template-check: the demo shows no $v" >&2; exit 1; }
  done
}

step "sam init --location template, non-interactive: booking, four events, x86_64, the HTTP API"
(cd "$WORK" && "$VENV/bin/sam" init --location "$ROOT/template" --no-input --extra-context \
  '{"project_name": "booking-consumer", "entity": "booking", "architecture": "x86_64",
    "include_http_api": "yes",
    "events": "BookingRequested:->REQUESTED, BookingConfirmed:REQUESTED->CONFIRMED, BookingCheckedIn:CONFIRMED->CHECKED_IN, BookingCancelled:REQUESTED|CONFIRMED->CANCELLED"}')
grep -q "BookingCheckedIn" "$WORK/booking-consumer/src/machine.rs"
grep -q "Default: x86_64" "$WORK/booking-consumer/template.yaml"
grep -q "Path: /bookings$" "$WORK/booking-consumer/template.yaml"
for f in src/api.rs src/bin/api.rs tests/api.rs events/api-create.json events/api-get.json; do
  [[ -f "$WORK/booking-consumer/$f" ]] || { echo "template-check: booking-consumer has no $f" >&2; exit 1; }
done
instance_check "$WORK/booking-consumer"
# make test ran the API's tests (a test target that built none would pass).
grep -q "created_once_then_replayed ... ok" "$WORK/test.out" \
  || { echo "template-check: booking-consumer's API tests did not run" >&2; exit 1; }

step "cookiecutter --no-input template: the defaults"
"$VENV/bin/cookiecutter" --no-input template -o "$WORK"
# The default writes nothing of the HTTP API: no file, no dependency.
for f in src/api.rs src/bin tests/api.rs events/api-create.json; do
  [[ ! -e "$WORK/shipment-consumer/$f" ]] || { echo "template-check: the defaults wrote $f" >&2; exit 1; }
done
if grep -rqiE "lambda_http|idempotency-key|HttpApi" "$WORK/shipment-consumer"; then
  echo "template-check: the defaults mention the HTTP API" >&2; exit 1
fi
instance_check "$WORK/shipment-consumer"

step "template-check: both instances build, pass their tests, validate and run their demo"
