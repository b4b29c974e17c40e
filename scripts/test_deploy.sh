#!/usr/bin/env bash
# Offline test of `make deploy`'s control flow (scripts/deploy.sh) with a
# recording stub in place of `sam`: what is built for which Architecture,
# what is deployed, and that a bad parameter combination stops it before
# anything is executed. Runs in a scratch copy (template.yaml, scripts/, the
# functions' functions/*/template_check.py, the .venv with the SAM CLI for
# its parsers). Needs `make validate` first.
#
# The cases about one function (its Deploy* flag, its parameters, what the
# deploy says about it) are in its folder, functions/<name>/deploy-cases.sh,
# sourced below when present (they use run_case, later and the variables
# set here): removing the function's folder removes its cases, and nothing
# here names it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
[[ -x .venv/bin/python ]] || { echo "test_deploy: run make validate first (.venv)"; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/deploy-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/sam" <<'EOF'
#!/usr/bin/env bash
echo "sam $*" >>"$SAM_LOG"
# A template given to sam: record which functions it puts on which capacity
# provider (none: Lambda's own fleet), as the transform will see them.
args=("$@")
for i in "${!args[@]}"; do
  if [[ ${args[i]} == --template-file ]]; then
    python3 - "${args[i + 1]}" >>"$SAM_LOG" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
glob = t.get("Globals", {}).get("Function", {})
cpc = glob.get("CapacityProviderConfig", {})
fns = [k for k, v in t["Resources"].items() if v["Type"] == "AWS::Serverless::Function"
       and "CapacityProviderConfig" not in v["Properties"]]
mem = t["Parameters"]["FunctionMemorySize"]
print(f"  {sys.argv[1]}: {len(fns)} functions on {cpc.get('Arn')}, memory >= {mem['MinValue']}, "
      f"republished: {glob.get('PublishToLatestPublished')}")
PY
  fi
done
if [[ " $* " == *" --guided "* && -n "${STUB_SAMCONFIG:-}" ]]; then
  printf '%b' "$STUB_SAMCONFIG" >samconfig.toml
fi
EOF
chmod +x "$TMP/sam"

fails=0
cases=0
# want_out / not_out (set for one call: `want_out=TEXT run_case ...`): text the
# run's output must / must not contain, one fixed string per line.
run_case() {  # name, expected rc, expected calls (one per line), then env assignments
  local name=$1 want_rc=$2 want=$3; shift 3
  local want_out=${want_out:-} not_out=${not_out:-}
  local dir="$TMP/$name"
  mkdir -p "$dir"
  cp -r template.yaml scripts "$dir/"
  # The functions' expectations: check_deploy_params.py reports by them.
  local f
  for f in functions/*/template_check.py; do
    [[ -f "$f" ]] || continue
    mkdir -p "$dir/${f%/*}" && cp "$f" "$dir/$f"
  done
  ln -s "$ROOT/.venv" "$dir/.venv"
  cases=$((cases + 1))
  local rc=0
  env SAM="$TMP/sam" SAM_LOG="$dir/calls" DEPLOY_VALIDATE=0 "$@" \
    bash "$dir/scripts/deploy.sh" >"$dir/out" 2>&1 || rc=$?
  local got
  got=$(cat "$dir/calls" 2>/dev/null || true)
  local out_ok=1
  local line
  while IFS= read -r line; do
    if [[ -n "$line" ]] && ! grep -qF -- "$line" "$dir/out"; then out_ok=0; fi
  done <<<"$want_out"
  while IFS= read -r line; do
    if [[ -n "$line" ]] && grep -qF -- "$line" "$dir/out"; then out_ok=0; fi
  done <<<"$not_out"
  if [[ $rc == "$want_rc" && "$got" == "$want" && $out_ok == 1 ]]; then
    echo "PASS: $name"
  else
    fails=$((fails + 1))
    echo "FAIL: $name (rc $rc, want $want_rc${want_out:+; output must say: $want_out}${not_out:+; must not say: $not_out})"
    echo "  calls:"; sed 's/^/    /' <<<"$got"
    echo "  wanted:"; sed 's/^/    /' <<<"$want"
    echo "  output:"; sed 's/^/    /' "$dir/out"
  fi
}

B='sam build --beta-features --parameter-overrides'
GOOD='version = 0.1\n[default.deploy.parameters]\nstack_name = "s"\nparameter_overrides = "Architecture=\\"x86_64\\" FunctionTimeout=\\"60\\" QueueVisibilityTimeout=\\"360\\""\n'
BAD='version = 0.1\n[default.deploy.parameters]\nstack_name = "s"\nparameter_overrides = "FunctionTimeout=\\"60\\""\n'

# "DeployX name" per function under functions/ (its template_check.py).
listed=$(.venv/bin/python scripts/check_template.py --deploy-parameters)
switches=()
if [[ -n "$listed" ]]; then mapfile -t switches <<<"$listed"; fi
# What the deploy lists when every function is on except those named.
deployed_without() {  # name...
  local out="" sw name
  for sw in ${switches[@]+"${switches[@]}"}; do
    name=${sw#* }
    [[ " $* " == *" $name "* ]] || out+="${out:+, }$name"
  done
  printf 'functions deployed: %s\n' "${out:-none}"
}

want_out="$(deployed_without)" run_case first-deploy 0 "$B Architecture=arm64
sam deploy --guided --no-execute-changeset
$B Architecture=x86_64
sam deploy" STUB_SAMCONFIG="$GOOD"

run_case first-deploy-bad-answers 1 "$B Architecture=arm64
sam deploy --guided --no-execute-changeset" STUB_SAMCONFIG="$BAD"

run_case first-deploy-answers-not-saved 1 "$B Architecture=arm64
sam deploy --guided --no-execute-changeset"

run_case first-deploy-bad-params 1 "" PARAMS="FunctionTimeout=60"

# FunctionTimeout at or below the deadline margin: nothing may run.
run_case first-deploy-margin-over-timeout 1 "" PARAMS="FunctionTimeout=2 DeadlineMarginMs=2000 QueueVisibilityTimeout=12"

run_case first-deploy-with-params 0 "$B Architecture=x86_64
sam deploy --guided --no-execute-changeset --parameter-overrides Architecture=x86_64
sam deploy" PARAMS="Architecture=x86_64" STUB_SAMCONFIG='version = 0.1\n[default.deploy.parameters]\nparameter_overrides = "Architecture=\\"x86_64\\""\n'

# Later deploys: samconfig.toml exists (written before the run).
later() {  # name, rc, calls, samconfig, env...
  local name=$1 rc=$2 calls=$3 conf=$4; shift 4
  mkdir -p "$TMP/$name" && printf '%b' "$conf" >"$TMP/$name/samconfig.toml"
  run_case "$name" "$rc" "$calls" "$@"
}
later later-deploy 0 "$B Architecture=x86_64
sam deploy" "$GOOD"

# Every function off (the order consumer too), saved in samconfig.toml:
# none is deployed, and nothing names one (nor, so, what it needs: the
# order notifier's SSM parameter).
all_off='' not_names=''
for sw in ${switches[@]+"${switches[@]}"}; do
  all_off+="${sw%% *}=\\\"false\\\" "
  not_names+="${sw#* }"$'\n'
done
want_out='functions deployed: none' not_out="$not_names" later later-deploy-all-off 0 "$B Architecture=arm64
sam deploy" "version = 0.1\n[default.deploy.parameters]\nstack_name = \"s\"\nparameter_overrides = \"${all_off% }\"\n"
# Receives whose delays could outlast the source queue's retention: the
# message would expire instead of reaching the DLQ.
want_out="a message could expire before it reaches the DLQ" \
  run_case first-deploy-redrive-past-retention 1 "" PARAMS="MaxReceiveCount=1000"
want_out="BackoffEarlyCapSecs=1 is below BackoffEarlyBaseSecs=2" \
  run_case first-deploy-backoff-cap-below-base 1 "" PARAMS="BackoffEarlyBaseSecs=2 BackoffEarlyCapSecs=1"
later later-deploy-bad-saved 1 "" "$BAD"
later later-deploy-params-replace-saved 0 "$B Architecture=arm64
sam deploy --parameter-overrides FunctionTimeout=10 QueueVisibilityTimeout=60" "$BAD" \
  PARAMS="FunctionTimeout=10 QueueVisibilityTimeout=60"

# Lambda Managed Instances: CapacityProviderArn selects the variant template
# (scripts/managed_instances.py), for this deploy and the later ones; its
# own constraints are checked before the build; a saved stack cannot switch.
ARN=arn:aws:lambda:eu-west-1:123456789012:capacity-provider:prod
functions=$(.venv/bin/python -c 'from samcli.yamlhelper import yaml_parse
t = yaml_parse(open("template.yaml").read())
print(sum(r.get("Type") == "AWS::Serverless::Function" for r in t["Resources"].values()))')
MI_BUILT="  template.managed-instances.json: $functions functions on {'Ref': 'CapacityProviderArn'}, memory >= 2048, republished: True"
MI_SAVED="version = 0.1\n[default.deploy.parameters]\nstack_name = \"s\"\nparameter_overrides = \"CapacityProviderArn=\\\"$ARN\\\"\"\n"
want_out="Lambda Managed Instances: every function on the capacity provider $ARN, up to 8 invocations per process, 2048 MB" \
  run_case first-deploy-managed-instances 0 "sam build --beta-features --template-file template.managed-instances.json --parameter-overrides Architecture=arm64
$MI_BUILT
sam deploy --guided --no-execute-changeset --parameter-overrides CapacityProviderArn=$ARN
sam deploy" PARAMS="CapacityProviderArn=$ARN" STUB_SAMCONFIG="$MI_SAVED"
later later-deploy-managed-instances 0 "sam build --beta-features --template-file template.managed-instances.json --parameter-overrides Architecture=arm64
$MI_BUILT
sam deploy" "$MI_SAVED"
want_out="FunctionMemorySize=512 is below its MinValue 2048" \
  run_case first-deploy-managed-instances-below-2gb 1 "" PARAMS="CapacityProviderArn=$ARN FunctionMemorySize=512"
want_out="CapacityProviderArn='prod' does not match" \
  run_case first-deploy-bad-capacity-provider-arn 1 "" PARAMS="CapacityProviderArn=prod"
want_out="PerExecutionEnvironmentMaxConcurrency: Lambda Managed Instances settings, which need CapacityProviderArn too" \
  run_case first-deploy-managed-instances-setting-alone 1 "" PARAMS="PerExecutionEnvironmentMaxConcurrency=4"
want_out="a stack cannot switch" \
  later later-deploy-switch-to-managed-instances 1 "" "$GOOD" PARAMS="CapacityProviderArn=$ARN"
want_out="a stack cannot switch" \
  later later-deploy-params-drop-capacity-provider 1 "" "$MI_SAVED" PARAMS="FunctionTimeout=10 QueueVisibilityTimeout=60"
# A saved stack without saved overrides is on Lambda's own fleet.
want_out="a stack cannot switch" \
  later later-deploy-switch-no-saved-overrides 1 "" 'version = 0.1\n[default.deploy.parameters]\nstack_name = "s"\n' \
  PARAMS="CapacityProviderArn=$ARN"
# On a Managed Instances stack, PARAMS that keep the provider go through.
later later-deploy-managed-instances-with-params 0 "sam build --beta-features --template-file template.managed-instances.json --parameter-overrides Architecture=arm64
$MI_BUILT
sam deploy --parameter-overrides CapacityProviderArn=$ARN FunctionTimeout=10 QueueVisibilityTimeout=60" "$MI_SAVED" \
  PARAMS="CapacityProviderArn=$ARN FunctionTimeout=10 QueueVisibilityTimeout=60"
# The guided answers chose another Architecture: rebuilt, from the variant again.
run_case first-deploy-managed-instances-answers-change-arch 0 "sam build --beta-features --template-file template.managed-instances.json --parameter-overrides Architecture=arm64
$MI_BUILT
sam deploy --guided --no-execute-changeset --parameter-overrides CapacityProviderArn=$ARN
sam build --beta-features --template-file template.managed-instances.json --parameter-overrides Architecture=x86_64
$MI_BUILT
sam deploy" PARAMS="CapacityProviderArn=$ARN" \
  STUB_SAMCONFIG="version = 0.1\n[default.deploy.parameters]\nparameter_overrides = \"Architecture=x86_64 CapacityProviderArn=$ARN\"\n"
# At least one vCPU: FunctionMemorySize >= ratio x 1024; whole invocations.
want_out="FunctionMemorySize=2048 is below one vCPU at ExecutionEnvironmentMemoryGiBPerVCpu=8" \
  run_case first-deploy-managed-instances-ratio-above-memory 1 "" PARAMS="CapacityProviderArn=$ARN ExecutionEnvironmentMemoryGiBPerVCpu=8"
want_out="PerExecutionEnvironmentMaxConcurrency='2.5' is not a whole number" \
  run_case first-deploy-managed-instances-fractional-concurrency 1 "" PARAMS="CapacityProviderArn=$ARN PerExecutionEnvironmentMaxConcurrency=2.5"

# Each function's own cases.
for f in functions/*/deploy-cases.sh; do
  if [[ -f "$f" ]]; then
    # shellcheck source=/dev/null
    source "$f"
  fi
done

echo "deploy flow checks: $((cases - fails)) of $cases passed"
exit $((fails > 0))
