"""The backfill test of `make e2e`: replay across days.

Called by e2e.py once its run has settled and been checked. It snapshots
every table, then:

1. re-sends every message the run ever sent to the order queue and the
   payment queue (the poison message included), in one random order, each as
   a new SQS message;
2. moves the order DLQ (the poison message) back to its source queue with
   scripts/redrive_local.py, the local-only fallback of `make redrive`
   (MiniStack has no StartMessageMoveTask);
3. replays the orders table's stream from its start into the order notifier
   (a synchronous Invoke with the stream's records, as an operator recovering
   from NotifierFailureQueue would);
4. sends the order API's first POST /orders again, with its Idempotency-Key
   (when api.py placed an order), and expects the stored 201;

waits until both queues are drained, and checks: the orders, ledger,
accounts, notifications and idempotency tables are unchanged item for item; the webhook
provider got no request at all; the functions' EMF lines count every replayed
message as Duplicate or Stale, and nothing Applied, Rejected, Early or
Sent; the two poison
messages (the replayed copy and the redriven one) are back in the DLQ.

The payment ledger's and the order notifier's parts run when the stack has
them (e2e.py's has_ledger, has_notifier): a removed function's are skipped.

E2E_REPLAY_TAMPER=1 alters two replayed messages (a new event for a
delivered order, a capture of a new payment) to show that the checks fail
when a replay does change something.
"""
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import redrive_local  # noqa: E402 - scripts/, next to this directory

ORDER_LABELS = ("Applied", "Duplicate", "Stale", "Rejected", "Early", "Conflict", "Invalid", "Failed",
                "NotAttempted")
LEDGER_LABELS = ("Applied", "Duplicate", "Early", "Suspended", "Conflict", "Invalid", "Failed", "NotAttempted")
NOTIFIER_LABELS = ("Sent", "AlreadySent", "NothingToSend", "AlreadyRejected", "Rejected", "Busy", "Unreadable",
                   "AlreadyUnreadable", "Invalid", "Failed", "NotAttempted")


def scan(ddb, table, key):
    items, kwargs = {}, {"TableName": table, "ConsistentRead": True}
    while True:
        resp = ddb.scan(**kwargs)
        for it in resp["Items"]:
            items[it[key]["S"]] = it
        if "LastEvaluatedKey" not in resp:
            return items
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]


def diff(before, after):
    """What changed between two scans, item by item and attribute by attribute."""
    out = []
    for k in sorted(set(before) | set(after)):
        b, a = before.get(k), after.get(k)
        if b == a:
            continue
        if b is None or a is None:
            out.append(f"{k}: {'added' if b is None else 'removed'}")
            continue
        attrs = sorted(n for n in set(b) | set(a) if b.get(n) != a.get(n))
        out.append(f"{k}: " + ", ".join(f"{n} {b.get(n)} -> {a.get(n)}" for n in attrs))
    return out


class Metrics:
    """EMF totals of one function's log group, and how many of its
    invocations left their EMF line in MiniStack's (lossy) log capture."""

    def __init__(self, e2e, logs, group, labels):
        self.e2e, self.logs, self.group, self.labels = e2e, logs, group, labels
        self.start = self.read()

    def read(self):
        lines = self.e2e.function_log_lines(self.logs, self.group)
        emf = [d for d in self.e2e.parse_json_lines(lines)
               if isinstance(d.get("_aws"), dict) and "CloudWatchMetrics" in d["_aws"]]
        totals = Counter()
        for d in emf:
            for k in self.labels:
                if isinstance(d.get(k), int):
                    totals[k] += d[k]
        reports = sum(1 for line in lines if line.startswith("REPORT RequestId:"))
        return totals, len(emf), reports

    def delta(self):
        (t0, e0, r0), (t1, e1, r1) = self.start, self.read()
        totals = Counter({k: t1[k] - t0[k] for k in self.labels})
        return totals, e1 - e0, r1 - r0


def stream_event(c, table, region):
    """The orders table's stream from TRIM_HORIZON, shaped as Lambda sends it."""
    import boto3
    streams = boto3.client("dynamodbstreams", endpoint_url=c["dynamodb"].meta.endpoint_url,
                           region_name=region, aws_access_key_id="test", aws_secret_access_key="test")
    arn = c["dynamodb"].describe_table(TableName=table)["Table"]["LatestStreamArn"]
    records = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard["ShardId"],
                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        while it:
            resp = streams.get_records(ShardIterator=it, Limit=1000)
            for r in resp["Records"]:
                d = dict(r["dynamodb"])
                t = d.get("ApproximateCreationDateTime")
                if hasattr(t, "timestamp"):
                    d["ApproximateCreationDateTime"] = t.timestamp()
                records.append({"eventID": r["eventID"], "eventName": r["eventName"],
                                "eventVersion": r.get("eventVersion", "1.1"), "eventSource": "aws:dynamodb",
                                "awsRegion": region, "dynamodb": d, "eventSourceARN": arn})
            it = resp.get("NextShardIterator") if resp["Records"] else None
    return records


def backfill(e2e, c, out, plan, provider, params, args, checks):
    say, step, Failure = e2e.say, e2e.step, e2e.Failure
    sqs, ddb, lam, logs = c["sqs"], c["dynamodb"], c["lambda"], c["logs"]
    ledger, notifier = e2e.has_ledger(out), e2e.has_notifier(out)
    qurl, dlq_url = out["QueueUrl"], out["DeadLetterQueueUrl"]
    pqurl, pdlq = (out["PaymentQueueUrl"], out["PaymentDeadLetterQueueUrl"]) if ledger else (None, None)
    stack = e2e.STACK
    tables = {"orders": (out["TableName"], "order_id")}
    if ledger:
        tables["ledger"] = (out["LedgerTableName"], "entry_id")
        tables["accounts"] = (out["AccountsTableName"], "account_id")
    if notifier:
        tables["notifications"] = (out["NotificationsTableName"], "notification_id")
    if "IdempotencyTableName" in out:
        # The order API's keys: nothing in a replay may touch them either.
        tables["idempotency"] = (out["IdempotencyTableName"], "idempotency_key")
    rng = random.Random(args.seed + 1)
    tamper = os.environ.get("E2E_REPLAY_TAMPER") == "1"

    say("")
    step("backfill: replaying every message the run sent, redriving the DLQ, replaying the orders stream")
    before = {n: scan(ddb, t, k) for n, (t, k) in tables.items()}
    requests_before = sum(provider.requests.values())
    m_orders = Metrics(e2e, logs, out["LogGroupName"], ORDER_LABELS)
    m_ledger = Metrics(e2e, logs, f"/aws/lambda/{stack}-payment-ledger", LEDGER_LABELS) if ledger else None
    m_notifier = Metrics(e2e, logs, f"/aws/lambda/{stack}-order-notifier", NOTIFIER_LABELS) if notifier else None

    order_bodies = list(plan.sent)
    ledger_bodies = list(plan.ledger.sent) if ledger else []
    n_poison = order_bodies.count(plan.poison)
    if tamper:
        say("     E2E_REPLAY_TAMPER=1: one replayed order event and one payment are altered")
        i = next(i for i, b in enumerate(order_bodies) if '"evt-2002-4"' in b)
        order_bodies[i] = order_bodies[i].replace('"seq":4', '"seq":5').replace('"evt-2002-4"', '"evt-2002-x"')
        if ledger:
            j = next(j for j, b in enumerate(ledger_bodies) if '"evt-pay-e2"' in b)
            ledger_bodies[j] = ledger_bodies[j].replace("pay-e2", "pay-x2")

    work = [(qurl, b) for b in order_bodies] + [(pqurl, b) for b in ledger_bodies]
    rng.shuffle(work)
    t0 = time.monotonic()
    for i in range(0, len(work), 10):
        for url in (qurl, pqurl) if ledger else (qurl,):
            chunk = [b for u, b in work[i:i + 10] if u == url]
            if chunk:
                resp = sqs.send_message_batch(QueueUrl=url, Entries=[
                    {"Id": str(j), "MessageBody": b} for j, b in enumerate(chunk)])
                if resp.get("Failed"):
                    raise Failure(f"SendMessageBatch refused replayed entries: {resp['Failed']}")
    say(f"     re-sent {len(work)} messages as new messages in random order: {len(order_bodies)} order events "
        f"({n_poison} poison), {len(ledger_bodies)} payment events")

    # The DLQ's poison message: e2e.py's DLQ check received it with a
    # visibility timeout (10 s); it is moved once it is visible again.
    def dlq_visible():
        v, nv, _ = e2e.queue_counts(sqs, dlq_url)
        return v >= 1, f"dlq visible={v} in flight={nv}"
    e2e.wait_until("the DLQ's poison message to be visible again", 90, dlq_visible, interval=1)
    moved, failed = redrive_local.move_messages(sqs, dlq_url, qurl, log=lambda m: say(f"     {m}"))
    checks.check(moved == [plan.poison] and failed == 0,
                 "backfill: the local redrive fallback moved the DLQ's poison message back to the order queue "
                 "(sent, then deleted from the DLQ)",
                 f"moved {[b[:60] for b in moved]}, failed {failed}")

    # The order API's first POST, sent again with its Idempotency-Key (a
    # client retrying long after): the stored 201; the table checks below
    # show it placed nothing.
    if getattr(plan, "api_retry", None):
        retry, first = plan.api_retry
        status, headers, answer = retry()
        checks.check(status == 201 and answer == first and headers.get("Idempotent-Replayed") == "true",
                     "backfill: the order API's first POST, sent again with its Idempotency-Key, is answered "
                     "with the stored 201 (Idempotent-Replayed: true)",
                     f"status {status}, Idempotent-Replayed {headers.get('Idempotent-Replayed')}, "
                     f"body identical: {answer == first}")

    # The orders stream, from its start, into the notifier.
    records = []
    if notifier:
        records = stream_event(c, out["TableName"], e2e.REGION)
        resp = lam.invoke(FunctionName=out["OrderNotifierFunctionName"], InvocationType="RequestResponse",
                          Payload=json.dumps({"Records": records}).encode())
        answer = json.loads(resp["Payload"].read() or b"{}")
        checks.check("FunctionError" not in resp and answer.get("batchItemFailures") == [],
                     f"backfill: the order notifier, invoked with the orders stream's {len(records)} records from "
                     "its start, settled every one (no batch item failures)",
                     f"FunctionError {resp.get('FunctionError')}, answer {str(answer)[:300]}")

    stable = {"n": 0}
    n_dead = n_poison + len(moved)

    def settled():
        v, nv, d = e2e.queue_counts(sqs, qurl)
        pv, pnv, pd = e2e.queue_counts(sqs, pqurl) if ledger else (0, 0, 0)
        dv, dnv, _ = e2e.queue_counts(sqs, dlq_url)
        quiet = v + nv + d + pv + pnv + pd == 0 and dv + dnv >= n_dead
        stable["n"] = stable["n"] + 1 if quiet else 0
        return stable["n"] >= 2, (f"order queue {v}/{nv}/{d}, payment queue {pv}/{pnv}/{pd}, "
                                  f"dlq {dv + dnv} of {n_dead}")
    step(f"backfill: waiting (at most {args.drain_timeout}s) for both queues to drain and {n_dead} poison "
         f"messages to be back in the DLQ ({params['MaxReceiveCount']} receives each)")
    e2e.wait_until("the replayed messages to settle", args.drain_timeout, settled, interval=2)
    time.sleep(3)   # a stream record, had a replay written anything, would reach the notifier by now
    step(f"backfill: settled {time.monotonic() - t0:.0f}s after the first replayed message")

    say("")
    say("e2e: backfill checks")
    after = {n: scan(ddb, t, k) for n, (t, k) in tables.items()}
    for name, (table, _) in tables.items():
        changes = diff(before[name], after[name])
        checks.check(not changes,
                     f"backfill: the {name} table ({len(before[name])} items) is unchanged item for item",
                     f"{len(changes)} item(s) changed: " + "; ".join(changes[:5]))
    new_requests = sum(provider.requests.values()) - requests_before
    checks.check(new_requests == 0,
                 "backfill: the webhook provider received no request (no notification sent again)",
                 f"{new_requests} new request(s); accepted counts {dict(provider.accepted)}")

    replayed = len(order_bodies) - n_poison
    t, n_emf, n_rep = m_orders.delta()
    complete = n_emf == n_rep
    rel = "=" if complete else "<="
    same = (lambda got, want: got == want) if complete else (lambda got, want: got <= want)
    say(f"        order consumer, {n_emf} EMF lines over {n_rep} invocations: "
        + ", ".join(f"{k}={t[k]}" for k in ORDER_LABELS))
    checks.check(same(t["Duplicate"] + t["Stale"], replayed) and t["Applied"] + t["Rejected"] + t["Early"]
                 + t["Conflict"] == 0,
                 f"backfill: EMF Duplicate + Stale {rel} {replayed} replayed order events, nothing Applied, "
                 "Rejected, Early or Conflict",
                 f"Duplicate {t['Duplicate']}, Stale {t['Stale']}, Applied {t['Applied']}, "
                 f"Rejected {t['Rejected']}, Early {t['Early']}, Conflict {t['Conflict']}")
    want_invalid = n_dead * params["MaxReceiveCount"]
    checks.check(same(t["Invalid"], want_invalid),
                 f"backfill: EMF Invalid {rel} {want_invalid} ({n_dead} poison messages, the replayed copy and "
                 f"the redriven one, {params['MaxReceiveCount']} receives each)",
                 f"Invalid {t['Invalid']}")

    if ledger:
        t, n_emf, n_rep = m_ledger.delta()
        complete = n_emf == n_rep
        rel = "=" if complete else "<="
        same = (lambda got, want: got == want) if complete else (lambda got, want: got <= want)
        say(f"        payment ledger, {n_emf} EMF lines over {n_rep} invocations: "
            + ", ".join(f"{k}={t[k]}" for k in LEDGER_LABELS))
        # Every replay is a new attempt with its own ClientRequestToken, so the
        # entry's condition judges it: a Duplicate, never a second Applied.
        checks.check(same(t["Duplicate"], len(ledger_bodies))
                     and t["Applied"] + t["Suspended"] + t["Early"] + t["Conflict"] + t["Invalid"] == 0,
                     f"backfill: EMF Duplicate {rel} {len(ledger_bodies)} replayed payment events, nothing Applied, "
                     "Suspended, Early or Conflict",
                     f"Duplicate {t['Duplicate']}, Applied {t['Applied']}, Suspended {t['Suspended']}, "
                     f"Early {t['Early']}, Conflict {t['Conflict']}, Invalid {t['Invalid']}")

    if notifier:
        t, n_emf, n_rep = m_notifier.delta()
        notifying = sum(1 for r in records
                        if (r["dynamodb"].get("NewImage") or {}).get("status") != (r["dynamodb"].get("OldImage") or {}).get("status")
                        and (r["dynamodb"].get("NewImage") or {}).get("status", {}).get("S") in ("PLACED", "SHIPPED", "CANCELLED"))
        say(f"        order notifier, {n_emf} EMF lines over {n_rep} invocations: "
            + ", ".join(f"{k}={t[k]}" for k in NOTIFIER_LABELS))
        checks.check(t["Sent"] == 0 and (t["AlreadySent"] == notifying or n_emf != n_rep),
                     f"backfill: the notifier's replay found every one of the {notifying} notifying transitions "
                     "AlreadySent, and sent nothing",
                     f"Sent {t['Sent']}, AlreadySent {t['AlreadySent']}, NothingToSend {t['NothingToSend']}")

    # A message just moved to the DLQ can still be invisible there for the
    # rest of the delay it had in its source queue (MiniStack keeps it), and
    # with the retry backoff the poison messages arrive seconds before this
    # check: keep receiving until every one is seen, or 30 s have passed.
    dlq = []
    deadline = time.monotonic() + 30
    while len(dlq) < n_dead and time.monotonic() < deadline:
        r = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=60, WaitTimeSeconds=1)
        dlq += [m["Body"] for m in r.get("Messages", [])]
    r = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=60, WaitTimeSeconds=0)
    dlq += [m["Body"] for m in r.get("Messages", [])]  # anything beyond: a failure below
    checks.check(dlq == [plan.poison] * n_dead,
                 f"backfill: the DLQ holds the {n_dead} poison messages again, and only them",
                 f"DLQ bodies: {[b[:60] for b in dlq]}")
    if ledger:
        v, nv, _ = e2e.queue_counts(sqs, pdlq)
        checks.check(v + nv == 0, "backfill: the payment DLQ is still empty", f"{v + nv} message(s)")
    say(f"        backfill: {len(order_bodies)} order events ({replayed} + {n_poison} poison) and "
        f"{len(ledger_bodies)} payment events re-sent, 1 DLQ message redriven, {len(records)} stream records "
        "replayed")
