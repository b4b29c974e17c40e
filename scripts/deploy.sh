#!/usr/bin/env bash
# `make deploy [PARAMS="Key=Value ..."]`: validate, build, check, deploy.
#
# CloudFormation cannot check QueueVisibilityTimeout >= 6 * FunctionTimeout +
# batching window, and `sam build` does not read the parameters `sam deploy`
# saved, so this script resolves the values that will be deployed
# (scripts/check_deploy_params.py), refuses a bad combination or a value the
# template's parameter constraints do not allow, and builds for the
# Architecture that will be deployed. With DeployOrderNotifier=false nothing
# here names, needs or checks the notifier's SSM parameter.
#
# First time (no samconfig.toml): `sam deploy --guided --no-execute-changeset`
# asks the questions and saves the answers but deploys nothing; the answers
# are checked, the functions rebuilt if another Architecture was chosen, and
# only then does `sam deploy` execute. Later: check, build, `sam deploy`.
# PARAMS replace samconfig.toml's parameter_overrides as a whole (as on sam's
# command line).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export SAM_CLI_TELEMETRY=0
export PATH="$PWD/.venv/bin:$PATH"   # sam and cargo-lambda, pinned, in .venv
SAM=${SAM:-sam}                      # scripts/test_deploy.sh puts a recording stub here
read -r -a PARAMS <<<"${PARAMS:-}"
overrides=()
if ((${#PARAMS[@]})); then overrides=(--parameter-overrides "${PARAMS[@]}"); fi

check() { .venv/bin/python scripts/check_deploy_params.py template.yaml "$@" ${PARAMS[@]+"${PARAMS[@]}"}; }
build() {
  echo "==> sam build for Architecture=$1"
  # rust-cargolambda is a SAM beta feature: without the flag, sam build stops at a prompt.
  "$SAM" build --beta-features --parameter-overrides "Architecture=$1"
}

# The template checks also install the pinned SAM CLI into .venv.
if [[ "${DEPLOY_VALIDATE:-1}" != 0 ]]; then bash scripts/validate-template.sh; fi

if [[ -f samconfig.toml ]]; then
  arch=$(check --saved --print Architecture)
  build "$arch"
  "$SAM" deploy ${overrides[@]+"${overrides[@]}"}
  exit 0
fi

arch=$(check --print Architecture)
build "$arch"
echo "==> first deploy: the guided questions (the answers are checked before anything is deployed)"
"$SAM" deploy --guided --no-execute-changeset ${overrides[@]+"${overrides[@]}"}
# The answers are in samconfig.toml now; check them (not PARAMS) before executing.
PARAMS=()
saved_arch=$(check --saved --print Architecture) || {
  echo "deploy: nothing was deployed (the change set was not executed). Fix samconfig.toml and run make deploy again." >&2
  exit 1
}
if [[ "$saved_arch" != "$arch" ]]; then build "$saved_arch"; fi
"$SAM" deploy
