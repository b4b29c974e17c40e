# `make smoke`'s part for the order notifier, sourced by scripts/smoke-invoke.sh
# under its `cargo lambda watch` (invoke, make_ready, fail, LOG, DDB_PORT and
# INVOKE_PORT are its; the webhook sink of local.mk runs beside it and
# prints into the watch's log). Deleting this folder deletes it.
# shellcheck shell=bash

# ---- make invoke FUNCTION=order-notifier: its sample stream events, posted
# to the local webhook, through the script `make invoke` runs ----
make_ready order-notifier
notify() { # sample file -> what `make invoke` prints (summary and webhook lines)
  local out
  out=$(INVOKE_PORT=$INVOKE_PORT WATCH_LOG="$LOG/watch.log" ANSWER="$LOG/answer.json" \
    bash scripts/invoke.sh order-notifier "functions/order-notifier/events/$1" 2>&1) \
    || fail "make invoke FUNCTION=order-notifier EVENT=$1 failed: $out"
  printf '%s\n' "$out"
}
count() { grep -c -- "$1" <<<"$2" || true; }

out=$(notify 01-placed-paid-shipped.json)
echo "order-notifier 01-placed-paid-shipped ->"; echo "$out"
[[ "$(count ' Sent ' "$out")" == 2 ]] || fail "01: not 2 records Sent"
[[ "$(count ' NothingToSend ' "$out")" == 1 ]] || fail "01: the payment did not show NothingToSend"
for key in order-ord-1001-order-confirmation order-ord-1001-shipping-notice; do
  grep -q "^webhook: POST /notify Idempotency-Key: $key (new) " <<<"$out" \
    || fail "01: the webhook did not receive $key"
done
grep -q '"trackingId": *"trk-ord-1001"' <<<"$out" || fail "01: the shipping notice carries no tracking id"

out=$(notify 02-batch-retried.json)
echo "order-notifier 02-batch-retried ->"; echo "$out"
[[ "$(count ' AlreadySent ' "$out")" == 2 ]] || fail "02: the retried batch was not AlreadySent twice"
[[ "$(count '^webhook: ' "$out")" == 0 ]] || fail "02: the retried batch posted to the webhook again"

out=$(notify 03-cancelled-and-unreadable.json)
echo "order-notifier 03-cancelled-and-unreadable ->"; echo "$out"
[[ "$(count ' Sent ' "$out")" == 2 ]] || fail "03: not 2 records Sent"
[[ "$(count ' Unreadable ' "$out")" == 1 ]] || fail "03: the unknown status was not Unreadable"
grep -q 'batchItemFailures: 0 of 3' <<<"$out" || fail "03: a record was left to retry"
grep -q "^webhook: POST /notify Idempotency-Key: order-ord-1002-cancellation-notice (new) " <<<"$out" \
  || fail "03: the webhook did not receive the cancellation notice"

echo "smoke: make invoke reached order-notifier, which posted each notification once to the local webhook, with its Idempotency-Key"
