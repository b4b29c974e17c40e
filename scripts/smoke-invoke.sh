#!/usr/bin/env bash
# The interactive loop (`make local` + `make invoke`), scripted for CI: the
# real order-consumer binary under `cargo lambda watch` (which emulates the
# Lambda Runtime API), a local DynamoDB, and sample events sent with
# `cargo lambda invoke --data-file`; then the order API under the same
# watch, through its function URL emulation, with curl, as README shows.
# Everything it starts it stops, by PID.
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

cargo build --quiet --example local_dynamodb --bin order-consumer --bin order-api --bin payment-ledger
DYNAMODB_PORT=$DDB_PORT TABLE_NAME=orders target/debug/examples/local_dynamodb serve 2>"$LOG/ddb.log" &
pids+=($!)

# API_AUTH=none: cargo lambda serves the order API without API Gateway, so
# no authorizer puts a principal in the request; the local loop says so
# explicitly (the function refuses every request under its default, iam).
TABLE_NAME=orders IDEMPOTENCY_TABLE=idempotency LEDGER_TABLE=ledger ACCOUNTS_TABLE=accounts API_AUTH=none RETRY_BACKOFF=off AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$DDB_PORT AWS_REGION=us-east-1 \
AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local RUST_LOG=info \
  cargo lambda watch --invoke-port "$INVOKE_PORT" --ignore-changes --timeout 30 >"$LOG/watch.log" 2>&1 &
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
for _ in $(seq 1 60); do
  if grep -q "local DynamoDB on" "$LOG/ddb.log" 2>/dev/null && invoke "$LOG/empty.json" >/dev/null 2>&1; then
    ready=yes
    break
  fi
  sleep 2
done
[[ -n "$ready" ]] || { echo "smoke: the function did not answer within 5 minutes" >&2; tail -40 "$LOG/watch.log" >&2; exit 1; }


fail() { echo "smoke: FAIL: $*" >&2; echo "--- cargo lambda watch log:" >&2; tail -40 "$LOG/watch.log" >&2; exit 1; }

out=$(invoke events/01-happy-path.json) || fail "invoke 01"
echo "01-happy-path   -> $out"
[[ "$(python3 -c 'import json,sys; print(len(json.load(sys.stdin)["batchItemFailures"]))' <<<"$out")" == 0 ]] \
  || fail "happy path reported failures"

early_id=$(python3 -c 'import json; print(json.load(open("events/04-early-event.json"))["Records"][0]["messageId"])')
out=$(invoke events/04-early-event.json) || fail "invoke 04"
echo "04-early-event  -> $out"
grep -q "$early_id" <<<"$out" || fail "early event not in batchItemFailures"

table=$(DYNAMODB_PORT=$DDB_PORT TABLE_NAME=orders target/debug/examples/local_dynamodb scan)
echo "$table"
grep -qE '^ord-1001 +DELIVERED +4 ' <<<"$table" || fail "ord-1001 is not DELIVERED at seq 4"
grep -q '"Applied":4' "$LOG/watch.log" || fail "no EMF metrics line with Applied=4 in the function's output"
echo "smoke: the binary under cargo lambda applied the happy path, returned the early event, and emitted EMF"

# ---- the order API: POST with a key, the same again, another body, GET ----
API="http://127.0.0.1:$INVOKE_PORT/lambda-url/order-api"
body='{"customerId":"cust-smoke","amount":150000,"currency":"INR"}'
post() { # key body -> headers and body of the answer, CRLFs removed
  curl -sS -i -X POST "$API/orders" -H 'content-type: application/json' \
    -H "idempotency-key: $1" --data "$2" | tr -d '\r'
}
status_of() { head -1 <<<"$1" | awk '{print $2}'; }
body_of() { sed -n '/^$/,$p' <<<"$1" | sed 1d; }
# The first request to a function compiles and starts it: retried, bounded.
ready=""
for _ in $(seq 1 60); do
  if [[ "$(curl -s -o /dev/null -w '%{http_code}' "$API/orders/ord_none")" == 404 ]]; then
    ready=yes
    break
  fi
  sleep 2
done
[[ -n "$ready" ]] || fail "the order API did not answer GET /orders/ord_none with 404 within 5 minutes"

first=$(post smoke-key-1 "$body")
echo "POST /orders            -> $(status_of "$first") $(body_of "$first")"
[[ "$(status_of "$first")" == 201 ]] || fail "first POST: not 201: $first"
order=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["orderId"])' <<<"$(body_of "$first")")
grep -qi "^location: /orders/$order\$" <<<"$first" || fail "first POST: no Location /orders/$order"
grep -qi '^idempotency-expires: ' <<<"$first" || fail "first POST: no Idempotency-Expires"

again=$(post smoke-key-1 '{ "currency": "INR", "amount": 150000, "customerId": "cust-smoke" }')
echo "POST again (same key)   -> $(status_of "$again") $(grep -i '^idempotent-replayed' <<<"$again")"
[[ "$(status_of "$again")" == 201 ]] || fail "repeat: not 201: $again"
grep -qi '^idempotent-replayed: true$' <<<"$again" || fail "repeat: not marked replayed"
[[ "$(body_of "$again")" == "$(body_of "$first")" ]] || fail "repeat: body differs from the first answer"

other=$(post smoke-key-1 '{"customerId":"cust-smoke","amount":1,"currency":"INR"}')
echo "POST other body         -> $(status_of "$other")"
[[ "$(status_of "$other")" == 422 ]] || fail "same key, other body: not 422: $other"

shown=$(curl -sS "$API/orders/$order")
echo "GET /orders/{orderId}   -> $shown"
[[ "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' <<<"$shown")" == PLACED ]] \
  || fail "GET: the order is not PLACED"

table=$(DYNAMODB_PORT=$DDB_PORT TABLE_NAME=orders target/debug/examples/local_dynamodb scan)
[[ "$(grep -c "^$order " <<<"$table")" == 1 ]] || fail "the API's order is not in the table exactly once"
grep -q '"Created":1' "$LOG/watch.log" || fail "no EMF line with Created=1 from the order API"
grep -q '"Replayed":1' "$LOG/watch.log" || fail "no EMF line with Replayed=1 from the order API"
echo "smoke: the order API under cargo lambda placed one order for two POSTs with one key, refused another body with 422, and showed it"

# ---- make invoke FUNCTION=payment-ledger: another function of the same watch ----
# Its first invoke compiles and starts it (as for order-consumer above).
ready=""
for _ in $(seq 1 60); do
  if invoke "$LOG/empty.json" payment-ledger >/dev/null 2>&1; then ready=yes; break; fi
  sleep 2
done
[[ -n "$ready" ]] || fail "payment-ledger did not answer within 2 minutes"
out=$(invoke events/ledger/01-captures.json payment-ledger) || fail "invoke payment-ledger"
printf '%s' "$out" > "$LOG/answer.json"
summary=$(python3 scripts/invoke_summary.py events/ledger/01-captures.json "$LOG/answer.json" "$LOG/watch.log") \
  || fail "invoke_summary on the ledger's answer: $summary"
echo "payment-ledger 01-captures ->"; echo "$summary"
[[ "$(grep -c ' Applied ' <<<"$summary")" -ge 1 ]] || fail "make invoke's summary shows no Applied record for the ledger"
grep -q 'batchItemFailures: 0 of' <<<"$summary" || fail "the ledger's captures were not all acknowledged"

echo "smoke: make invoke reached payment-ledger under the same watch, with one line per record"
