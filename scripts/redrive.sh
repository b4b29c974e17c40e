#!/usr/bin/env bash
# `make redrive QUEUE=orders|payments [STACK=name]`: move a dead-letter
# queue's messages back to the queue they came from, the standard way: SQS
# StartMessageMoveTask (aws sqs start-message-move-task), then wait for the
# task to finish and print what it moved. Fix the cause first
# (docs/operations.md): a redrive into the same fault lands in the DLQ again.
#
#   QUEUE=orders    the order events' DLQ (output DeadLetterQueueArn) -> QueueUrl
#   QUEUE=payments  the payment ledger's DLQ (PaymentDeadLetterQueueUrl) -> PaymentQueueUrl
#   STACK           the stack name (default: stack_name in samconfig.toml)
#   MAX_RATE        optional messages per second for the move task
#
# The order notifier has no DLQ to redrive: its NotifierFailureQueue holds
# descriptions of stream batches (shard and sequence numbers), not the
# records. See "When NotifierFailureQueue receives a batch" in
# docs/operations.md.
#
# LOCAL ONLY: with ENDPOINT=http://127.0.0.1:PORT (a local emulator such as
# MiniStack, which has no StartMessageMoveTask) the move is done by
# scripts/redrive_local.py instead: receive, send the same body and message
# attributes to the source queue, delete from the DLQ only after the send
# succeeded. It refuses any endpoint that is not on this machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

QUEUE=${QUEUE:-}
ENDPOINT=${ENDPOINT:-}
die() { echo "redrive: $*" >&2; exit 1; }

case "$QUEUE" in
  orders)   dlq_out=DeadLetterQueueUrl;        src_out=QueueUrl ;;
  payments) dlq_out=PaymentDeadLetterQueueUrl; src_out=PaymentQueueUrl ;;
  notifier) die "the notifier's failure queue holds stream-batch descriptions, not messages: nothing to move. See docs/operations.md (When NotifierFailureQueue receives a batch)" ;;
  *)        die "set QUEUE=orders (order events' DLQ) or QUEUE=payments (payment ledger's DLQ)" ;;
esac

if [[ -z "${STACK:-}" && -f samconfig.toml ]]; then
  STACK=$(sed -n 's/^stack_name *= *"\(.*\)"/\1/p' samconfig.toml | head -n1)
fi
[[ -n "${STACK:-}" ]] || die "set STACK=<stack name> (no samconfig.toml with a stack_name here)"

aws_() {
  if [[ -n "$ENDPOINT" ]]; then aws --endpoint-url "$ENDPOINT" "$@"; else aws "$@"; fi
}
out() {
  local v
  v=$(aws_ cloudformation describe-stacks --stack-name "$STACK" \
        --query "Stacks[0].Outputs[?OutputKey=='$1'].OutputValue" --output text)
  [[ -n "$v" && "$v" != None ]] || die "stack $STACK has no output $1 (is the function deployed?)"
  echo "$v"
}

dlq_url=$(out "$dlq_out")
src_url=$(out "$src_out")
dlq_arn=$(aws_ sqs get-queue-attributes --queue-url "$dlq_url" --attribute-names QueueArn \
            --query Attributes.QueueArn --output text)
waiting=$(aws_ sqs get-queue-attributes --queue-url "$dlq_url" --attribute-names ApproximateNumberOfMessages \
            --query Attributes.ApproximateNumberOfMessages --output text)
echo "redrive: $STACK $QUEUE: $waiting message(s) in $dlq_arn -> $src_url"

if [[ -n "$ENDPOINT" ]]; then
  py=python3
  [[ -x .venv-e2e/bin/python ]] && py=.venv-e2e/bin/python
  exec "$py" scripts/redrive_local.py --endpoint "$ENDPOINT" --dlq-url "$dlq_url" --source-url "$src_url"
fi

rate=()
[[ -n "${MAX_RATE:-}" ]] && rate=(--max-number-of-messages-per-second "$MAX_RATE")
# No --destination-arn: SQS moves each message back to the queue it was
# dead-lettered from.
handle=$(aws sqs start-message-move-task --source-arn "$dlq_arn" ${rate[@]+"${rate[@]}"} \
           --query TaskHandle --output text)
echo "redrive: started move task $handle"
while :; do
  read -r status moved total reason < <(aws sqs list-message-move-tasks --source-arn "$dlq_arn" --max-results 1 \
    --query 'Results[0].[Status, ApproximateNumberOfMessagesMoved, ApproximateNumberOfMessagesToMove, FailureReason]' \
    --output text)
  echo "redrive: $status, moved $moved of about $total"
  case "$status" in
    COMPLETED) exit 0 ;;
    FAILED|CANCELLED) die "move task $status: $reason" ;;
  esac
  sleep 5
done
