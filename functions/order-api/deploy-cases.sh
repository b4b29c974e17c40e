# order-api's cases of scripts/test_deploy.sh (`make deploy`'s control flow
# with a recording stub for sam), sourced by it: they use its run_case,
# later, deployed_without and $B. In this folder so that removing the
# function removes them (docs/adapting.md).

# Without the order API: nothing of it is deployed, and the deploy says so.
want_out="$(deployed_without order-api)" not_out='order-api' \
  run_case first-deploy-api-off 0 "$B Architecture=arm64
sam deploy --guided --no-execute-changeset --parameter-overrides DeployOrderApi=false
sam deploy" PARAMS="DeployOrderApi=false" \
  STUB_SAMCONFIG='version = 0.1\n[default.deploy.parameters]\nparameter_overrides = "DeployOrderApi=\\"false\\""\n'
# The API's own ranges: what the function refuses at cold start
# (IDEMPOTENCY_TTL_SECONDS 1..31536000), and a timeout API Gateway would cut
# off (30 s): refused before the build.
want_out="IdempotencyTtlSeconds=0 is below its MinValue 1" \
  run_case first-deploy-bad-idempotency-ttl 1 "" PARAMS="IdempotencyTtlSeconds=0"
want_out="ApiFunctionTimeout=30 is above its MaxValue 29" \
  run_case first-deploy-api-timeout-at-gateway-limit 1 "" PARAMS="ApiFunctionTimeout=30"
