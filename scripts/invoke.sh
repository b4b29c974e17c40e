#!/usr/bin/env bash
# `make invoke`: send EVENT to FUNCTION of a running `cargo lambda watch`
# (`make local`) and print one line per record (scripts/invoke_summary.py),
# then what the local services printed meanwhile (the notifier's webhook).
#
#   invoke.sh FUNCTION EVENT
#
# Environment: INVOKE_PORT (default 9000, the watch's), WATCH_LOG (default
# target/local-watch.log, which `make local` writes), ANSWER (default
# target/invoke-answer.json).
#
# A function that fails its cold start (a missing variable): `cargo lambda
# watch` answers the invoke with the init error, then the process exits and
# the watch never starts it again, so every later invoke waited for ever.
# The first answer is shown and remembered (WATCH_LOG.exited, which
# `make local` clears when it starts), and every later invoke of that
# function fails at once with the same error.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
[[ $# == 2 ]] || { echo "usage: $0 FUNCTION EVENT" >&2; exit 2; }
function=$1 event=$2
port=${INVOKE_PORT:-9000}
log=${WATCH_LOG:-target/local-watch.log}
answer=${ANSWER:-target/invoke-answer.json}
exited="$log.exited"
[[ -f "$event" ]] || { echo "invoke: no event file $event" >&2; exit 2; }
mkdir -p "$(dirname "$answer")"

restart="cargo lambda watch does not start it again: fix its settings (the Makefile's LOCAL_ENV, functions/*/local.mk), then restart 'make local'"
error=$(awk -F '\t' -v f="$function" '$1 == f { print $2; exit }' "$exited" 2>/dev/null || true)
if [[ -n "$error" ]]; then
  echo "invoke: $function is not running: it failed its cold start ($error); $restart" >&2
  exit 1
fi

start=$(wc -c <"$log" 2>/dev/null || echo 0)
rc=0
cargo lambda invoke "$function" --invoke-port "$port" --data-file "$event" --output-format json >"$answer" || rc=$?
if [[ $rc != 0 ]]; then
  echo "invoke: cargo lambda invoke failed (exit $rc); the 'make local' terminal shows why (if its process exited, $restart)" >&2
  exit "$rc"
fi
# An error answer followed by the process's exit is a failed cold start:
# remember it. The watch answers as soon as the function reports the error,
# and logs "command exited" about 3 s later (the report's own request waits
# out its 2 s bound), so wait up to 8 s for that line.
if grep -q '"errorType"' "$answer"; then
  for _ in $(seq 1 16); do
    if tail -c +"$((start + 1))" "$log" 2>/dev/null | grep -q 'command exited'; then
      error=$(python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); print(a.get("errorType"), a.get("errorMessage"), sep=": ")' "$answer" 2>/dev/null || echo "see the 'make local' terminal")
      printf '%s\t%s\n' "$function" "$error" >>"$exited"
      echo "invoke: $function failed its cold start ($error); $restart" >&2
      exit 1
    fi
    sleep 0.5
  done
fi
python3 scripts/invoke_summary.py "$event" "$answer" "$log"
# What the functions' local services (the notifier's webhook) printed
# during this invoke: their lines start with their name and a colon.
if [[ -f "$log" ]]; then tail -c +"$((start + 1))" "$log" | grep -E '^webhook: ' || true; fi
