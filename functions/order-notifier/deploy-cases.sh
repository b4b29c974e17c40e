# order-notifier's cases of scripts/test_deploy.sh (`make deploy`'s control
# flow with a recording stub for sam), sourced by it: they use its run_case,
# later, deployed_without and $B. In this folder so that removing the
# function removes them (docs/adapting.md).

SSM_NEEDED='SSM SecureString parameter /order-consumer/notify-webhook-url'
# A default deploy names the SSM parameter the notifier reads at cold start.
want_out="$SSM_NEEDED" run_case first-deploy-notifier-names-ssm 0 "$B Architecture=arm64
sam deploy --guided --no-execute-changeset
$B Architecture=x86_64
sam deploy" STUB_SAMCONFIG="$GOOD"
# Without the notifier nothing names, needs or checks the SSM parameter: the
# deploy goes through and says so (given on the command line, and saved).
want_out="no SSM parameter is needed
$(deployed_without order-notifier)" not_out="$SSM_NEEDED" \
  run_case first-deploy-notifier-off 0 "$B Architecture=arm64
sam deploy --guided --no-execute-changeset --parameter-overrides DeployOrderNotifier=false
sam deploy" PARAMS="DeployOrderNotifier=false" \
  STUB_SAMCONFIG='version = 0.1\n[default.deploy.parameters]\nparameter_overrides = "DeployOrderNotifier=\\"false\\""\n'
# CloudFormation's AllowedValues are case-sensitive: refused before the build.
want_out="DeployOrderNotifier='False' is not one of" \
  run_case first-deploy-bad-deploy-flag 1 "" PARAMS="DeployOrderNotifier=False"
