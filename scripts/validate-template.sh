#!/usr/bin/env bash
# Validate template.yaml offline: SAM validate + cfn-lint on the SAM template,
# offline SAM -> CloudFormation translation, cfn-lint on the translation, and
# project-specific policy checks (scripts/check_template.py); then the same
# translation, lint and checks for each combination of the functions' Deploy*
# parameters (each function under functions/ has one; check_template.py
# --deploy-parameters lists them), with those conditions resolved (what
# CloudFormation would create), which also proves that nothing refers to a
# function that is switched off; then the same for the Lambda Managed
# Instances variant of the template (scripts/managed_instances.py).
#
# Needs only python3 (with venv) and PyPI access for the first run. No AWS
# credentials and no AWS API calls are needed. Does not build any Rust.
# --tools-only: install the pinned tools into .venv, and stop.
# VALIDATE_CHECKS_ONLY=1: the translations and the policy checks alone (no
# sam validate, no cfn-lint, no deploy-flow test): seconds instead of
# minutes, what scripts/check-removal.sh runs in each copy without a function.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO_ROOT"

TEMPLATE="${TEMPLATE:-template.yaml}"
VENV="$REPO_ROOT/.venv"
OUT_DIR="$REPO_ROOT/target"
TRANSLATED="$OUT_DIR/template.translated.json"
CHECKS_ONLY=${VALIDATE_CHECKS_ONLY:-0}

# Pinned tool versions. aws-sam-cli 1.170.0 itself pins
# aws-sam-translator==1.115.0 and cfn-lint>=1.52,<1.59, so bump them together.
PINNED=(
  "aws-sam-cli==1.170.0"
  "aws-sam-translator==1.115.0"
  "cfn-lint==1.58.0"
)
STAMP="$VENV/.order-consumer-validate-tools"
WANT_STAMP="$(printf '%s\n' "${PINNED[@]}")"

step() { printf '\n==> %s\n' "$*"; current_step="$*"; }
current_step="setup"
# One verdict line at the end, whichever way it ends.
trap 'rc=$?; if [[ $rc -ne 0 ]]; then printf "\nmake validate: FAILED at: %s\n" "$current_step" >&2; fi' EXIT

if [[ ! -x "$VENV/bin/python" ]]; then
  step "creating venv at .venv"
  python3 -m venv "$VENV"
fi

if [[ ! -f "$STAMP" ]] || [[ "$(cat "$STAMP")" != "$WANT_STAMP" ]]; then
  step "installing pinned tools: ${PINNED[*]}"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINNED[@]}"
  printf '%s\n' "$WANT_STAMP" > "$STAMP"
else
  step "pinned tools already installed (stamp: .venv/$(basename "$STAMP"))"
fi
if [[ "${1:-}" == --tools-only ]]; then exit 0; fi

# A SAM template: sam validate --lint and cfn-lint on it, its offline
# translation to plain CloudFormation, and cfn-lint on that.
lint_and_translate() {  # SAM template, translation to write
  local sam=$1 translated=$2
  if [[ $CHECKS_ONLY == 1 ]]; then
    step "translating SAM -> CloudFormation offline -> ${translated#"$REPO_ROOT"/} (VALIDATE_CHECKS_ONLY: no lint)"
    mkdir -p "$OUT_DIR"
    "$VENV/bin/python" scripts/translate_template.py "$sam" "$translated"
    return
  fi
  step "sam validate --lint ($sam)"
  SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=us-east-1 \
    "$VENV/bin/sam" validate --lint --template-file "$sam"
  # --include-checks I: informational findings (e.g. I3011, missing
  # DeletionPolicy on stateful resources) are opt-in in cfn-lint; keep them at
  # zero too. Any accepted finding must be suppressed on its resource with
  # Metadata.cfn-lint.config.ignore_checks and listed in docs/deployment.md ("Template checks").
  step "cfn-lint --include-checks I $sam"
  "$VENV/bin/cfn-lint" --include-checks I -- "$sam"
  step "translating SAM -> CloudFormation offline -> ${translated#"$REPO_ROOT"/}"
  mkdir -p "$OUT_DIR"
  "$VENV/bin/python" scripts/translate_template.py "$sam" "$translated"
  step "cfn-lint --include-checks I ${translated#"$REPO_ROOT"/}"
  "$VENV/bin/cfn-lint" --include-checks I -- "$translated"
}

# scripts/check_template.py on a translation, with Key=Value parameter
# values: shows the FAIL lines and the count; every line is in FILE.checks.
policy_checks() {  # translation, Key=Value...
  local translated=$1 rc=0
  shift
  "$VENV/bin/python" scripts/check_template.py "$translated" "$@" >"$translated.checks" || rc=$?
  grep -v '^PASS: ' "$translated.checks" || true
  ((rc == 0)) || { echo "policy checks failed${*:+ for $*} (all lines: ${translated#"$REPO_ROOT"/}.checks)" >&2; exit 1; }
}

lint_and_translate "$TEMPLATE" "$TRANSLATED"
step "policy checks on the translated template"
policy_checks "$TRANSLATED"
step "policy checks on the translated template with the optional Valkey cache on"
policy_checks "$TRANSLATED" ValkeyCache=true CacheVpcId=vpc-0123456789abcdef0 \
  CacheSubnetIds=subnet-0123456789abcdef0,subnet-0fedcba9876543210

# Every deployment the functions' Deploy* parameters allow (2^n: all on,
# all off, and every mix), each function under functions/ switched by its
# own. W2001 (parameter not used) is expected there: the Deploy* parameters
# are used only by the conditions that are resolved away, and a switched-off
# function's own parameters by nothing (check_template.py asserts exactly
# that). Unused parameters are still caught by the lint of the SAM template
# and of the plain translation above.
# "DeployX name", one per function under functions/ (a failure stops here:
# set -e applies to an assignment's command substitution).
listed=$("$VENV/bin/python" scripts/check_template.py --deploy-parameters)
switches=()
if [[ -n "$listed" ]]; then mapfile -t switches <<<"$listed"; fi
n=${#switches[@]}
summary=() combo_outs=()
for ((combo = 0; combo < (1 << n); combo++)); do
  params=() name=""
  for ((i = 0; i < n; i++)); do
    read -r param function <<<"${switches[i]}"
    # Bit i set: function i off; combination 0 is all on.
    if (((combo >> i) & 1)); then value=false; else value=true; fi
    params+=("$param=$value")
    name+=".$function-$value"
  done
  ((n > 0)) || name=".resolved"
  out="$OUT_DIR/template.translated$name.json"
  step "${params[*]:-(no Deploy* parameter)}: translate with the conditions resolved, policy checks"
  "$VENV/bin/python" scripts/translate_template.py --resolve-conditions "$TEMPLATE" "$out" ${params[@]+"${params[@]}"}
  policy_checks "$out" ${params[@]+"${params[@]}"}
  summary+=("$(tail -n 1 "$out.checks")")
  combo_outs+=("$out")
done
combinations="${#summary[@]} Deploy* combinations"
if [[ $CHECKS_ONLY != 1 ]]; then
  # cfn-lint on the translations, a few per run and one run per core: its
  # start (loading the resource schemas) is about 3 s of a run's CPU, each
  # template about 4 s more; one run per combination spent half the step
  # starting cfn-lint. xargs exits non-zero when any run finds anything.
  step "cfn-lint --include-checks I on the $combinations' translations"
  printf '%s\0' "${combo_outs[@]}" |
    xargs -0 -n 4 -P "$(getconf _NPROCESSORS_ONLN)" "$VENV/bin/cfn-lint" --include-checks I --ignore-checks W2001 --
fi
step "all $combinations"
printf '  %s\n' "${summary[@]}"

# The Lambda Managed Instances variant (scripts/managed_instances.py; what
# `make deploy PARAMS="CapacityProviderArn=..."` builds and deploys): the same
# SAM validation, lint, translation, lint of the translation and policy
# checks, which there also require every function on the capacity provider.
MI_TEMPLATE="$OUT_DIR/template.managed-instances.json"
MI_TRANSLATED="$OUT_DIR/template.managed-instances.translated.json"
MI_ARN="arn:aws:lambda:us-east-1:123456789012:capacity-provider:example"
step "Lambda Managed Instances variant -> ${MI_TEMPLATE#"$REPO_ROOT"/}"
"$VENV/bin/python" scripts/managed_instances.py "$TEMPLATE" "$MI_TEMPLATE"
# Written elsewhere than template.yaml, its CodeUri must still name this folder
# or a workspace member's under it, with its Cargo.toml (what `sam build`
# builds with cargo-lambda); the translation hides it.
"$VENV/bin/python" - "$MI_TEMPLATE" "$(dirname "$(realpath "$TEMPLATE")")" <<'PY'
import json, os, sys
path, want = sys.argv[1], sys.argv[2]
t = json.load(open(path))
bad = {k: v["Properties"].get("CodeUri") for k, v in t["Resources"].items()
       if v["Type"] == "AWS::Serverless::Function"
       and not (lambda d: (d == want or d.startswith(want + os.sep)) and os.path.isfile(os.path.join(d, "Cargo.toml")))(
           os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), str(v["Properties"].get("CodeUri")))))}
if bad:
    sys.exit(f"{path}: CodeUri does not lead back to {want}: {bad}")
PY
lint_and_translate "$MI_TEMPLATE" "$MI_TRANSLATED"
step "policy checks on the translated Managed Instances variant"
policy_checks "$MI_TRANSLATED" CapacityProviderArn="$MI_ARN"

if [[ $CHECKS_ONLY == 1 ]]; then
  printf '\nmake validate (VALIDATE_CHECKS_ONLY=1): PASSED: the policy checks of template.yaml, its %s and the Managed Instances variant\n' "$combinations"
  exit 0
fi
step "make deploy control flow (scripts/test_deploy.sh, sam replaced by a recording stub)"
bash scripts/test_deploy.sh

printf '\nmake validate: PASSED: template.yaml, its %s and the Managed Instances variant (sam validate --lint, cfn-lint on each and on its translation, policy checks), and the make deploy flow\n' "$combinations"
