# `make smoke`'s part for the payment ledger, sourced by scripts/smoke-invoke.sh
# under its `cargo lambda watch` (invoke, make_ready, fail, LOG, DDB_PORT and
# INVOKE_PORT are its). Deleting this folder deletes it.
# shellcheck shell=bash

# ---- make invoke FUNCTION=payment-ledger: another function of the same watch ----
# Its first invoke compiles and starts it (as for every function here).
make_ready payment-ledger
out=$(invoke functions/payment-ledger/events/01-captures.json payment-ledger) || fail "invoke payment-ledger"
printf '%s' "$out" > "$LOG/answer.json"
summary=$(python3 scripts/invoke_summary.py functions/payment-ledger/events/01-captures.json "$LOG/answer.json" "$LOG/watch.log") \
  || fail "invoke_summary on the ledger's answer: $summary"
echo "payment-ledger 01-captures ->"; echo "$summary"
[[ "$(grep -c ' Applied ' <<<"$summary")" -ge 1 ]] || fail "make invoke's summary shows no Applied record for the ledger"
grep -q 'batchItemFailures: 0 of' <<<"$summary" || fail "the ledger's captures were not all acknowledged"

echo "smoke: make invoke reached payment-ledger under the same watch, with one line per record"
