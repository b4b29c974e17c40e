# `make smoke`'s part for the order API, sourced by scripts/smoke-invoke.sh
# under its `cargo lambda watch` (invoke, fail, LOG, DDB_PORT and
# INVOKE_PORT are its). Deleting this folder deletes it.
# shellcheck shell=bash

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
