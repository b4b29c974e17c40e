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
#
# Lambda Managed Instances: when the values name CapacityProviderArn (in
# PARAMS, or saved), the functions are built from, and the stack deployed
# with, the Managed Instances variant of the template, which
# scripts/managed_instances.py writes to template.managed-instances.json.
# The choice is made at a stack's first deploy and kept (check_deploy_params.py
# refuses PARAMS that would switch a saved stack).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

export SAM_CLI_TELEMETRY=0
export PATH="$PWD/.venv/bin:$PATH"   # sam and cargo-lambda, pinned, in .venv
SAM=${SAM:-sam}                      # scripts/test_deploy.sh puts a recording stub here
read -r -a PARAMS <<<"${PARAMS:-}"
overrides=()
if ((${#PARAMS[@]})); then overrides=(--parameter-overrides "${PARAMS[@]}"); fi

MI_TEMPLATE=template.managed-instances.json
check() { .venv/bin/python scripts/check_deploy_params.py template.yaml "$@" ${PARAMS[@]+"${PARAMS[@]}"}; }
# Sets arch and provider (the capacity provider's ARN; empty: Lambda's own fleet).
resolve() {
  local out
  out=$(check "$@" --print Architecture --print CapacityProviderArn) || return 1
  read -r arch provider <<<"$out"
}
build() {  # Architecture, capacity provider ARN or ""
  local template=()
  if [[ -n "$2" ]]; then
    .venv/bin/python scripts/managed_instances.py template.yaml "$MI_TEMPLATE"
    template=(--template-file "$MI_TEMPLATE")
  fi
  echo "==> sam build for Architecture=$1${2:+, on Lambda Managed Instances}"
  # rust-cargolambda is a SAM beta feature: without the flag, sam build stops at a prompt.
  "$SAM" build --beta-features ${template[@]+"${template[@]}"} --parameter-overrides "Architecture=$1"
}

# The template checks also install the pinned SAM CLI into .venv.
if [[ "${DEPLOY_VALIDATE:-1}" != 0 ]]; then bash scripts/validate-template.sh; fi

arch='' provider=''
if [[ -f samconfig.toml ]]; then
  resolve --saved || exit 1
  build "$arch" "$provider"
  "$SAM" deploy ${overrides[@]+"${overrides[@]}"}
  exit 0
fi

resolve || exit 1
build "$arch" "$provider"
built_arch=$arch built_provider=$provider
echo "==> first deploy: the guided questions (the answers are checked before anything is deployed)"
"$SAM" deploy --guided --no-execute-changeset ${overrides[@]+"${overrides[@]}"}
# The answers are in samconfig.toml now; check them (not PARAMS) before executing.
PARAMS=()
resolve --saved || {
  echo "deploy: nothing was deployed (the change set was not executed). Fix samconfig.toml and run make deploy again." >&2
  exit 1
}
# Rebuild when the answers chose another Architecture, or the other template.
if [[ "$arch" != "$built_arch" || "${provider:+mi}" != "${built_provider:+mi}" ]]; then build "$arch" "$provider"; fi
"$SAM" deploy
