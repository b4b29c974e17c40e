#!/usr/bin/env bash
# `make e2e`: deploy the project's own template.yaml into MiniStack (a local AWS
# emulator) and prove SQS -> Lambda -> DynamoDB with real redelivery and a
# real DLQ. See docs/end-to-end.md.
#
# 1. installs pinned ministack, aws-sam-translator and boto3 into .venv-e2e
#    (once; a stamp file holds the hash of scripts/e2e/requirements.txt);
# 2. builds the function for this machine (one release build);
# 3. starts MiniStack on 127.0.0.1 on a free port, its state in a temp dir;
# 4. runs scripts/e2e/e2e.py: deploy, send events, wait, check, delete stack;
# 5. stops MiniStack and everything it started, by PID, whatever happened.
#
# Environment:
#   E2E_TEMPLATE          template to deploy (default: template.yaml)
#   E2E_FUNCTION_TIMEOUT  FunctionTimeout in seconds (default 6; visibility = 6x):
#                         the notifier starts a POST only when the invocation has
#                         time left for its whole 3 s webhook timeout
#   E2E_DRAIN_TIMEOUT     seconds to wait for the queue to drain (default 300)
#   E2E_AUTH=false        run MiniStack without IAM enforcement (default true:
#                         the function gets its execution role's session
#                         credentials and its DynamoDB calls are checked
#                         against the role's policy)
#   E2E_BINARY=PATH       deploy this host order-consumer binary instead of
#                         building one (e.g. target/lambda/order-consumer/bootstrap
#                         from `make build-host`)
#   E2E_<NAME>_BINARY=PATH
#                         the same for the function under functions/<name>/
#                         (NAME in capitals, - as _: E2E_PAYMENT_LEDGER_BINARY;
#                         default: in E2E_FUNCTION_BINARIES, else next to
#                         E2E_BINARY, else in target/release)
#   E2E_FUNCTION_BINARIES=DIR
#                         where the functions' binaries are, by name (what
#                         .ci/run copies there: one per functions/*/)
# The functions deployed are those under functions/ (each folder with a
# Cargo.toml), the order consumer from E2E_BINARY; e2e.py runs a function's
# own checks only when the stack has it.
#   E2E_KEEP_TMP=1        keep the temp dir (MiniStack log, template copy, zip)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD

VENV=.venv-e2e
REQ=scripts/e2e/requirements.txt
TEMPLATE=${E2E_TEMPLATE:-template.yaml}
FUNCTION_TIMEOUT=${E2E_FUNCTION_TIMEOUT:-6}
DRAIN_TIMEOUT=${E2E_DRAIN_TIMEOUT:-300}
AUTH=${E2E_AUTH:-true}
BIN=${E2E_BINARY:-target/release/order-consumer}
BINS=${E2E_FUNCTION_BINARIES:-$(dirname "$BIN")}
# The functions under functions/, by name (their binaries' names), but for
# the order consumer: its package is E2E_BINARY's (--zip below), which
# e2e.py's own checks (SQS -> Lambda -> DynamoDB, redrive) are about.
FUNCTIONS=()
for dir in functions/*/; do
  name=$(basename "$dir")
  [[ -f "$dir/Cargo.toml" && "$name" != order-consumer ]] && FUNCTIONS+=("$name")
done

t_start=$(date +%s)
log() { printf 'e2e: [%s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { printf 'e2e: FAIL: %s\n' "$*" >&2; exit 1; }

[[ -f "$TEMPLATE" ]] || die "template not found: $TEMPLATE"

# Nothing below may reach real AWS: dummy credentials, no profile or config
# file, no instance metadata. Every client also names the local endpoint.
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test
export AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_EC2_METADATA_DISABLED=true
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_DEFAULT_PROFILE AWS_ROLE_ARN AWS_WEB_IDENTITY_TOKEN_FILE \
      AWS_CONTAINER_CREDENTIALS_FULL_URI AWS_CONTAINER_CREDENTIALS_RELATIVE_URI \
      AWS_ENDPOINT_URL_DYNAMODB 2>/dev/null || true

# ---- 1. pinned tools -------------------------------------------------------
stamp="$VENV/.e2e-stamp-$(sha256sum "$REQ" | cut -c1-16)"
if [[ ! -f "$stamp" ]]; then
  log "installing $(grep -Ev '^(#|$)' "$REQ" | tr '\n' ' ')into $VENV"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQ"
  touch "$stamp"
fi
PY=$ROOT/$VENV/bin/python
# --tools-only: the pinned tools above, and stop (CI installs them early,
# beside a build).
[[ "${1:-}" != --tools-only ]] || exit 0

# ---- 2. the function, built for this machine --------------------------------
if [[ -z "${E2E_BINARY:-}" ]]; then
  log "cargo build --release --bins"
  t_build=$(date +%s)
  cargo build --release --locked --bins
  log "build took $(( $(date +%s) - t_build ))s"
fi
[[ -x "$BIN" ]] || die "$BIN missing or not executable"
BIN=$(realpath "$BIN")
FUNCTION_BINS=()   # one path per name in FUNCTIONS
for name in ${FUNCTIONS[@]+"${FUNCTIONS[@]}"}; do
  var="E2E_$(tr 'a-z-' 'A-Z_' <<<"$name")_BINARY"
  path=${!var:-$BINS/$name}
  [[ -x "$path" ]] || die "$path missing or not executable (set $var)"
  FUNCTION_BINS+=("$(realpath "$path")")
done

# ---- 3. MiniStack ----------------------------------------------------------
TMP=$(mktemp -d "${TMPDIR:-/tmp}/order-consumer-e2e.XXXXXX")
mkdir -p "$TMP/tmp" "$TMP/state" "$TMP/s3"
ms_pid=""

descendants() {  # all descendants of PID $1, deepest first
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    descendants "$child"
    echo "$child"
  done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$ms_pid" ]] && kill -0 "$ms_pid" 2>/dev/null; then
    # The function's bootstrap processes are MiniStack's children: collect
    # them before MiniStack goes, then stop each by PID.
    local kids
    kids=$(descendants "$ms_pid" | tr '\n' ' ')
    kill -TERM "$ms_pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$ms_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$ms_pid" 2>/dev/null || true
    for p in $kids; do kill -TERM "$p" 2>/dev/null || true; done
    sleep 0.2
    for p in $kids; do kill -KILL "$p" 2>/dev/null || true; done
    wait "$ms_pid" 2>/dev/null || true
    log "stopped MiniStack (pid $ms_pid)${kids:+ and its children ($kids)}"
  fi
  if [[ $rc -ne 0 && -f "$TMP/ministack.log" ]]; then
    echo "--- last 40 lines of the MiniStack log ($TMP/ministack.log):" >&2
    tail -n 40 "$TMP/ministack.log" >&2 || true
  fi
  if [[ "${E2E_KEEP_TMP:-0}" == 1 || $rc -ne 0 ]]; then
    log "kept $TMP"
  else
    rm -rf "$TMP"
  fi
  log "total wall time $(( $(date +%s) - t_start ))s"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
ENDPOINT=http://127.0.0.1:$PORT
export AWS_ENDPOINT_URL=$ENDPOINT   # belt and braces: e2e.py names it on every client too

# MiniStack hands its own environment to the function's bootstrap process and
# sets AWS_ENDPOINT_URL there only if it has one itself: without it the
# function's SDK would aim at real AWS. TMPDIR also holds the extracted code.
log "starting MiniStack $("$PY" -c 'import importlib.metadata as m; print(m.version("ministack"))') on $ENDPOINT (state in $TMP)"
(
  cd "$TMP"
  exec env BIND_HOST=127.0.0.1 GATEWAY_PORT="$PORT" IOT_MTLS_ENABLED=0 SFTP_ENABLED=0 \
    TMPDIR="$TMP/tmp" STATE_DIR="$TMP/state" S3_DATA_DIR="$TMP/s3" \
    PERSIST_STATE=0 S3_PERSIST=0 LOG_LEVEL=INFO AUTH="$AUTH" \
    AWS_ENDPOINT_URL="$ENDPOINT" \
    "$PY" -m ministack
) >"$TMP/ministack.log" 2>&1 &
ms_pid=$!
t_ms=$(date +%s)

"$PY" scripts/e2e/e2e.py wait-healthy --endpoint "$ENDPOINT" --timeout 60 \
  || die "MiniStack did not become healthy"
kill -0 "$ms_pid" 2>/dev/null || die "MiniStack exited"
log "MiniStack healthy after $(( $(date +%s) - t_ms ))s (IAM enforcement: AUTH=$AUTH)"

# ---- 4. deploy, stream, check ----------------------------------------------
# The deployment packages: each binary as `bootstrap`, mode 755.
pairs=("$BIN:$TMP/function.zip")
zip_args=()
for i in "${!FUNCTION_BINS[@]}"; do
  pairs+=("${FUNCTION_BINS[i]}:$TMP/${FUNCTIONS[i]}.zip")
  zip_args+=(--function-zip "${FUNCTIONS[i]}=$TMP/${FUNCTIONS[i]}.zip")
done
for pair in "${pairs[@]}"; do
"$PY" - "${pair%%:*}" "${pair#*:}" <<'EOF'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
info = zipfile.ZipInfo("bootstrap", date_time=(2020, 1, 1, 0, 0, 0))
info.external_attr = 0o100755 << 16
info.compress_type = zipfile.ZIP_DEFLATED
with zipfile.ZipFile(dst, "w") as z, open(src, "rb") as f:
    z.writestr(info, f.read(), compresslevel=1)
EOF
done

"$PY" scripts/e2e/e2e.py run --endpoint "$ENDPOINT" --template "$TEMPLATE" \
  --zip "$TMP/function.zip" ${zip_args[@]+"${zip_args[@]}"} --function-timeout "$FUNCTION_TIMEOUT" \
  --drain-timeout "$DRAIN_TIMEOUT" --ministack-pid "$ms_pid" --auth "$AUTH"
