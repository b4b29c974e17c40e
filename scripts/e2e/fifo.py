"""FIFO queues in `make e2e`: what a failed head costs the messages behind it.

The template deploys a standard queue (FifoQueue=false), so this step makes
its own FIFO queue pair, as an operator deploying FifoQueue=true would have
it, and deletes it afterwards. Two parts, a few seconds each:

1. MiniStack's receive counting, with boto3 alone: three messages of one
   group are received together; with the head still in flight, the two
   behind it are not handed out even when visible; once the head is visible
   again, all three are handed out again, and each one's
   ApproximateReceiveCount is 2. Held-back messages spend their receives
   with their head, as in SQS.
2. Through the deployed order-consumer: a FIFO queue whose redrive policy
   has the stack's MaxReceiveCount (the function's MAX_RECEIVE_COUNT), wired
   to the function by an event source mapping. One group holds, in order,
   a poison message (not JSON), the OrderPlaced and OrderPaid of one order,
   the OrderPlaced of another, and an OrderPaid whose order never started.
   The poison message fails every receive, and the four behind it are
   handed out with it each time. On its last receive they are attempted
   (docs/retry-timing.md, "FIFO queues"): the two orders apply, the orphan
   OrderPaid is Early on its own last receive. The checks: the DLQ receives
   exactly the poison message and the orphan OrderPaid, in that order, and
   the two orders are in the table. Without the last-receive rule the DLQ
   would receive all five, four of them never attempted.

The role gets sqs:ChangeMessageVisibility (and MiniStack's batch alias) on
this queue as an inline policy: the template grants it on its own queue
only, and this queue is not the template's.
"""

from __future__ import annotations

import json
import time

PROBE = "order-consumer-e2e-probe.fifo"
QUEUE = "order-consumer-e2e-orders.fifo"
DLQ = "order-consumer-e2e-orders-dlq.fifo"
GROUP = "grp-fifo"


def _send(sqs, url, bodies, group):
    resp = sqs.send_message_batch(QueueUrl=url, Entries=[
        {"Id": str(i), "MessageBody": b, "MessageGroupId": group,
         "MessageDeduplicationId": f"{group}-{i}"}
        for i, b in enumerate(bodies)])
    if resp.get("Failed"):
        raise RuntimeError(f"SendMessageBatch refused entries: {resp['Failed']}")


def _receive(sqs, url, visibility):
    r = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=visibility,
                            AttributeNames=["All"], WaitTimeSeconds=0)
    return r.get("Messages", [])


def _counts(msgs):
    return [int(m.get("Attributes", {}).get("ApproximateReceiveCount", 0)) for m in msgs]


def probe_receive_counts(h, sqs, checks):
    """Part 1: receive counting of a group's held-back messages."""
    url = sqs.create_queue(QueueName=PROBE, Attributes={
        "FifoQueue": "true", "VisibilityTimeout": "30"})["QueueUrl"]
    try:
        _send(sqs, url, ["head", "second", "third"], "g")
        first = _receive(sqs, url, 30)
        # The two behind the head visible again, the head still in flight.
        for m in first[1:]:
            sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0)
        held = _receive(sqs, url, 30)
        sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=first[0]["ReceiptHandle"], VisibilityTimeout=0)
        again = _receive(sqs, url, 30)
    finally:
        sqs.delete_queue(QueueUrl=url)
    got = ([m["Body"] for m in first], _counts(first), len(held), [m["Body"] for m in again], _counts(again))
    h.say(f"     FIFO probe: first receive {got[0]} counts {got[1]}; with the head in flight "
          f"{got[2]} handed out; head visible again: {got[3]} counts {got[4]}")
    checks.check(got == (["head", "second", "third"], [1, 1, 1], 0, ["head", "second", "third"], [2, 2, 2]),
                 "FIFO (MiniStack): a group's messages are handed out together and held while its head is in "
                 "flight; each receive of the group counts for every message handed out "
                 "(ApproximateReceiveCount 1, 1, 1, then 2, 2, 2)",
                 f"got {got}")


def _grant_visibility(h, c, arn):
    cfn, iam = c["cloudformation"], c["iam"]
    role = cfn.describe_stack_resource(StackName=h.STACK, LogicalResourceId="OrderConsumerRole")
    role_name = role["StackResourceDetail"]["PhysicalResourceId"]
    iam.put_role_policy(RoleName=role_name, PolicyName="e2e-fifo-queue-visibility",
                        PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [{
                            "Effect": "Allow",
                            "Action": ["sqs:ChangeMessageVisibility", "sqs:ChangeMessageVisibilityBatch"],
                            "Resource": arn}]}))
    return role_name


def through_the_function(h, c, out, plan, params, args, checks):
    """Part 2: a poison head and its group, through the deployed function."""
    sqs, lam, ddb = c["sqs"], c["lambda"], c["dynamodb"]
    max_rc = int(params["MaxReceiveCount"])
    visibility = int(params["QueueVisibilityTimeout"])
    dlq_url = sqs.create_queue(QueueName=DLQ, Attributes={"FifoQueue": "true"})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    url = sqs.create_queue(QueueName=QUEUE, Attributes={
        "FifoQueue": "true", "VisibilityTimeout": str(visibility),
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_rc)})})["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    role_name = _grant_visibility(h, c, arn)
    uuid = None
    try:
        poison = f"this is not JSON: FIFO poison head {args.seed} {{"
        a = [h.event("ord-fifo-1", 1, "OrderPlaced"), h.event("ord-fifo-1", 2, "OrderPaid")]
        b = h.event("ord-fifo-2", 1, "OrderPlaced")
        orphan = h.event("ord-fifo-3", 2, "OrderPaid")
        bodies = [poison, h.body(a[0]), h.body(a[1]), h.body(b), h.body(orphan)]
        _send(sqs, url, bodies, GROUP)
        plan.expect["ord-fifo-1"] = ("PAID", 2, [e["eventId"] for e in a])
        plan.expect["ord-fifo-2"] = ("PLACED", 1, [b["eventId"]])
        plan.extra_invalid += max_rc
        t0 = time.monotonic()
        uuid = lam.create_event_source_mapping(
            EventSourceArn=arn, FunctionName=out["FunctionName"], BatchSize=10,
            FunctionResponseTypes=["ReportBatchItemFailures"])["UUID"]
        h.step(f"FIFO: {len(bodies)} messages in one group (a poison head, two orders, an orphan OrderPaid) on "
               f"{QUEUE}, maxReceiveCount {max_rc}, wired to {out['FunctionName']}")

        def drained():
            v, nv, d = h.queue_counts(sqs, url)
            dv, dnv, _ = h.queue_counts(sqs, dlq_url)
            return v + nv + d == 0 and dv + dnv >= 2, f"queue {v + nv + d}, dlq {dv + dnv}"
        # The orphan's Early delay on its last receive is at most
        # BackoffEarlyBaseSecs x 2^(MaxReceiveCount-1) (16 s with 5).
        h.wait_until("the FIFO queue to drain", 120, drained, interval=0.5)
        took = time.monotonic() - t0
        time.sleep(1)
        dlq = []
        for _ in range(3):
            got = _receive(sqs, dlq_url, 30)
            if not got:
                break
            dlq += got
        dlq_bodies = [m["Body"] for m in dlq]
        h.step(f"FIFO: drained in {took:.1f} s; the DLQ received {len(dlq)} message(s), receive counts "
               f"{_counts(dlq)}")
        checks.check(dlq_bodies == [poison, h.body(orphan)],
                     f"FIFO: the DLQ receives the poison head and the orphan OrderPaid (Early on its own last "
                     f"receive), and nothing else: the messages held behind the head reached maxReceiveCount "
                     f"({max_rc}) with it, and on its last receive they were attempted, not held",
                     f"DLQ bodies: {[x[:60] for x in dlq_bodies]}")
        got = {o: (h.get_order(ddb, out["TableName"], o) or {}).get("status", {}).get("S")
               for o in ("ord-fifo-1", "ord-fifo-2", "ord-fifo-3")}
        checks.check(got == {"ord-fifo-1": "PAID", "ord-fifo-2": "PLACED", "ord-fifo-3": None},
                     "FIFO: the orders behind the poison head were applied on its last receive "
                     "(ord-fifo-1 PAID, ord-fifo-2 PLACED), the orphan created nothing",
                     f"got {got}")
    finally:
        if uuid:
            lam.delete_event_source_mapping(UUID=uuid)
        c["iam"].delete_role_policy(RoleName=role_name, PolicyName="e2e-fifo-queue-visibility")
        sqs.delete_queue(QueueUrl=url)
        sqs.delete_queue(QueueUrl=dlq_url)


def measure(h, c, out, plan, params, args, checks):
    probe_receive_counts(h, c["sqs"], checks)
    through_the_function(h, c, out, plan, params, args, checks)
