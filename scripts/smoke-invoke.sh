#!/usr/bin/env bash
# The interactive loop (`make local` + `make invoke`), scripted for CI: the
# functions' real binaries under `cargo lambda watch` (which emulates the
# Lambda Runtime API), a local DynamoDB, and sample events sent with
# `cargo lambda invoke --data-file`, each function under functions/ by its
# own functions/<name>/smoke.sh (the order consumer's also checks that a
# function that fails its init makes `make invoke` fail at once with its
# error). Their tables, environment and local services come from `make
# smoke` (LOCAL_TABLES, LOCAL_ENV, LOCAL_SERVICES: the Makefile and
# functions/*/local.mk). Everything it starts it stops, by PID.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export PATH="$PWD/.venv/bin:$PATH"
command -v cargo-lambda >/dev/null || { echo "cargo-lambda missing: run 'make smoke'" >&2; exit 2; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
DDB_PORT=$(free_port)
INVOKE_PORT=$(free_port)
LOG=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$LOG"
}
trap cleanup EXIT INT TERM

cargo build --quiet --example local_dynamodb --workspace
# The functions with the features the watch's `cargo run --bin NAME` builds
# them with (the default members'), so that it finds them built.
cargo build --quiet --bins
DYNAMODB_PORT=$DDB_PORT TABLE_NAME=orders LOCAL_TABLES="${LOCAL_TABLES:-}" \
  target/debug/examples/local_dynamodb serve 2>"$LOG/ddb.log" &
pids+=($!)

# The functions' local services (the notifier's webhook), with the same
# environment, their lines in the watch's log as in `make local` (both
# append, so neither overwrites the other). Word-split on purpose.
: >"$LOG/watch.log"
for service in ${LOCAL_SERVICES:-}; do
  # shellcheck disable=SC2086
  env ${LOCAL_ENV:-} "$service" >>"$LOG/watch.log" 2>&1 &
  pids+=($!)
done

# The functions' own variables (word-split on purpose: KEY=VALUE pairs).
# shellcheck disable=SC2086
env ${LOCAL_ENV:-} \
TABLE_NAME=orders RETRY_BACKOFF=off AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$DDB_PORT AWS_REGION=us-east-1 \
AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local RUST_LOG=info \
  cargo lambda watch --invoke-port "$INVOKE_PORT" --ignore-changes --timeout 30 >>"$LOG/watch.log" 2>&1 &
pids+=($!)

invoke() { # event [function]
  cargo lambda invoke "${2:-order-consumer}" --invoke-port "$INVOKE_PORT" --data-file "$1" --output-format json
}

# Wait (bounded) for the local DynamoDB and the emulator's port. cargo lambda
# watch compiles and starts the function on the first invocation, so warm it
# up with an empty batch (retried: the first tries can time out while it
# compiles) before sending the sample events.
echo '{"Records": []}' > "$LOG/empty.json"
ready=""
fail() { echo "smoke: FAIL: $*" >&2; echo "--- cargo lambda watch log:" >&2; tail -40 "$LOG/watch.log" >&2; exit 1; }

# Wait (bounded) for FUNCTION to answer an empty batch: `make_ready
# FUNCTION`. An answer that is an error (its init failed) fails at once: the
# watch would not start it again, and every later invoke would hang.
make_ready() {
  local answer
  for _ in $(seq 1 60); do
    if grep -q "local DynamoDB on" "$LOG/ddb.log" 2>/dev/null && answer=$(invoke "$LOG/empty.json" "$1" 2>/dev/null); then
      grep -q '"errorType"' <<<"$answer" && fail "$1 failed its init: $answer"
      return 0
    fi
    sleep 2
  done
  fail "$1 did not answer within 2 minutes"
}

# ---- each function's own part, under the same watch (functions/*/smoke.sh,
# sourced: they use invoke, make_ready, fail, free_port, pids, LOG, DDB_PORT
# and INVOKE_PORT) ----
for part in functions/*/smoke.sh; do
  [[ -f "$part" ]] || continue
  # shellcheck source=/dev/null
  source "$part"
done

