# `make smoke`'s part for the order consumer, sourced by scripts/smoke-invoke.sh
# under its `cargo lambda watch` (invoke, make_ready, fail, free_port, pids,
# LOG, DDB_PORT and INVOKE_PORT are its). Deleting this folder deletes it.
# shellcheck shell=bash

# ---- make invoke (FUNCTION=order-consumer, the default): the happy path,
# an early event returned, the table and the EMF line ----
make_ready order-consumer

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

# ---- a function that fails its init: `make invoke` fails at once, with the
# error, on the first invoke and on every later one (cargo lambda watch
# answers only the first: it does not start an exited function again, and
# the invokes after it waited for ever). A second watch, without TABLE_NAME.
BROKEN_PORT=$(free_port)
: >"$LOG/broken.log"
# shellcheck disable=SC2086
env ${LOCAL_ENV:-} AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$DDB_PORT AWS_REGION=us-east-1 \
AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local \
  cargo lambda watch --invoke-port "$BROKEN_PORT" --ignore-changes --timeout 30 >>"$LOG/broken.log" 2>&1 &
pids+=($!)
broken_invoke() { # bounded: a hang is the failure this looks for
  INVOKE_PORT=$BROKEN_PORT WATCH_LOG="$LOG/broken.log" ANSWER="$LOG/broken-answer.json" \
    timeout 90 bash scripts/invoke.sh order-consumer events/01-happy-path.json 2>&1
}
# The first invoke may wait for the watch's port and its `cargo run`.
for _ in $(seq 1 30); do
  out=$(broken_invoke) && fail "make invoke of a function without TABLE_NAME succeeded: $out"
  grep -q 'TABLE_NAME' <<<"$out" && break
  sleep 2
done
echo "init failure, 1st invoke -> $out"
grep -q 'TABLE_NAME' <<<"$out" || fail "make invoke did not show the init error naming TABLE_NAME: $out"
for n in 2 3; do
  started=$SECONDS
  out=$(broken_invoke) && fail "invoke $n of a function that failed its init succeeded: $out"
  echo "init failure, invoke $n  -> ($((SECONDS - started)) s) $out"
  (( SECONDS - started < 10 )) || fail "invoke $n of a function that failed its init took $((SECONDS - started)) s (it must fail at once)"
  grep -q 'TABLE_NAME' <<<"$out" || fail "invoke $n did not show the init error naming TABLE_NAME: $out"
done
echo "smoke: make invoke of a function that failed its init failed at once with its error, every time"
