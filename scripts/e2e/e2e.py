#!/usr/bin/env python3
"""`make e2e`: deploy template.yaml into MiniStack and prove SQS -> Lambda ->
DynamoDB, with real redelivery and a real dead-letter queue.

Run by scripts/e2e/run.sh, which owns the MiniStack process. Subcommands:

    e2e.py wait-healthy --endpoint URL --timeout S
    e2e.py run --endpoint URL --template FILE --zip FILE
               [--function-zip NAME=FILE ...] [...]

`run` uploads the function zip to the emulator's S3, deploys a copy of the
template (only `CodeUri` is changed, to that S3 object) through the emulator's
CloudFormation, sends a realistic stream of order events to the deployed
queue, waits until the queue drains, checks the table, the DLQ and the
function's logs, places an order through the stack's HTTP API with an
Idempotency-Key (api.py), checks the notifier, replays everything
(replay.py), and deletes the stack. The functions under functions/ are
deployed from their --function-zip (one per function folder, by run.sh);
each one's checks run when the stack has it (its outputs: PaymentQueueUrl
for the payment ledger, OrderNotifierFunctionName for the order notifier,
OrderApiUrl for the order API), so a removed function's checks are skipped.

Every client is built here with an explicit endpoint_url and dummy
credentials; nothing can reach real AWS.
"""
import argparse
import hashlib
import json
import random
import re
import sys
import time
import urllib.request
from collections import Counter, defaultdict

import api
import fifo
import latency
import replay

REGION = "us-east-1"
STACK = "order-consumer-e2e"
BUCKET = "order-consumer-e2e-artifacts"


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------

def say(msg=""):
    print(msg, flush=True)


def step(msg):
    say(f"e2e: [{time.strftime('%H:%M:%S')}] {msg}")


class Failure(Exception):
    """A precondition failed (deploy, wait): the run cannot go on."""


def clients(endpoint):
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name=REGION,
    )
    cfg = Config(retries={"mode": "standard", "max_attempts": 3},
                 connect_timeout=5, read_timeout=60)

    def make(name):
        return session.client(name, endpoint_url=endpoint, config=cfg)

    return {n: make(n) for n in ("s3", "cloudformation", "sqs", "dynamodb", "lambda", "logs", "ssm", "iam",
                                         "apigatewayv2")}


class WebhookProvider:
    """A notification provider on 127.0.0.1 for the order notifier: accepts a
    POST once per Idempotency-Key (a repeat gets the same answer and changes
    nothing), and counts requests and acceptances per key. `bodies` keeps
    every request's (key, JSON body), in order."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.requests, self.accepted = Counter(), Counter()
        self.bodies = []
        lock = threading.Lock()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                key = self.headers.get("Idempotency-Key")
                try:
                    doc = json.loads(raw)
                except ValueError:
                    doc = None
                with lock:
                    provider.bodies.append((key, doc))
                    if key is None:
                        status = 400
                    else:
                        provider.requests[key] += 1
                        status = 200 if provider.accepted[key] else 201
                        provider.accepted[key] = 1
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            # The listen backlog (socketserver's default is 5). The notifier
            # connects with a 1 s connect timeout and sends concurrently;
            # under CPU load (a cargo build beside the run) this thread
            # accepts late, the kernel drops the SYNs beyond the backlog,
            # and their retransmit comes after 1 s: the notification
            # fails ("error sending request"). MiniStack's DynamoDB-stream
            # poller ignores batchItemFailures and moves on, so it is then
            # never retried, as AWS would.
            request_queue_size = 128
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/notify"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


# ---------------------------------------------------------------------------
# wait-healthy
# ---------------------------------------------------------------------------

def wait_healthy(endpoint, timeout):
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{endpoint}/_ministack/health", timeout=2) as r:
                doc = json.load(r)
            services = doc.get("services", {})
            needed = ("cloudformation", "s3", "sqs", "dynamodb", "lambda", "logs", "iam")
            missing = [s for s in needed if services.get(s) not in ("available", "running")]
            if not missing:
                return 0
            last = f"services not ready: {missing}"
        except Exception as e:  # noqa: BLE001 - any error means "not yet"
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.5)
    say(f"e2e: FAIL: MiniStack at {endpoint} not healthy after {timeout}s ({last})")
    return 1


# ---------------------------------------------------------------------------
# The event stream
# ---------------------------------------------------------------------------

MINUTES = {1: 0, 2: 5, 3: 60, 4: 1440}
DATA = {
    "OrderPlaced": lambda o: {"customerId": f"cust-{o[-4:]}", "amount": 150000, "currency": "INR"},
    "OrderPaid": lambda o: {"paymentId": f"pay-{o[-4:]}", "amount": 150000, "currency": "INR"},
    "OrderShipped": lambda o: {"carrier": "BlueDart", "trackingId": f"BD{o[-4:]}IN"},
    "OrderDelivered": lambda o: {},
    "OrderCancelled": lambda o: {"reason": "customer request"},
}
LIFECYCLE = ["OrderPlaced", "OrderPaid", "OrderShipped", "OrderDelivered"]


def event(order, seq, typ, event_id=None):
    m = MINUTES.get(seq, seq * 10)
    return {
        "eventId": event_id or f"evt-{order[4:]}-{seq}",
        "orderId": order,
        "seq": seq,
        "type": typ,
        "occurredAt": f"2026-12-0{1 + m // 1440}T{10 + (m % 1440) // 60:02d}:{m % 60:02d}:00Z",
        "data": DATA[typ](order),
    }


def body(ev):
    return json.dumps(ev, separators=(",", ":"))


class Plan:
    """What is sent, and what the table must hold afterwards."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        # order -> (final status, last_event_seq, [eventIds applied, in seq order])
        self.expect = {}
        self.sent = []          # every body sent, in order (for the totals)
        self.rejected = 0       # events that can never apply (acknowledged, Rejected)
        self.expect_rejected = {}  # order -> [eventIds rejected in their turn]
        self.poison = f"this is not JSON: poison message {seed} {{"
        self.extra_invalid = 0  # Invalid outcomes of poison messages not in `sent` (fifo.py)

    def lifecycle(self, order, n, cancel_at=None):
        """Events of one order: the first n steps of the lifecycle, or, with
        cancel_at=k, k steps then OrderCancelled."""
        if cancel_at:
            evs = [event(order, s + 1, LIFECYCLE[s]) for s in range(cancel_at)]
            evs.append(event(order, cancel_at + 1, "OrderCancelled"))
            status = "CANCELLED"
        else:
            evs = [event(order, s + 1, LIFECYCLE[s]) for s in range(n)]
            status = {1: "PLACED", 2: "PAID", 3: "SHIPPED", 4: "DELIVERED"}[n]
        self.expect[order] = (status, evs[-1]["seq"], [e["eventId"] for e in evs])
        return evs

    def applied_total(self):
        return sum(len(h) for _, _, h in self.expect.values())


def send_bodies(sqs, queue_url, bodies, plan):
    """SendMessageBatch, 10 at a time. Every entry is a new SQS message (new
    messageId), even when its body repeats an earlier one."""
    for i in range(0, len(bodies), 10):
        chunk = bodies[i:i + 10]
        resp = sqs.send_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(j), "MessageBody": b} for j, b in enumerate(chunk)],
        )
        if resp.get("Failed"):
            raise Failure(f"SendMessageBatch refused entries: {resp['Failed']}")
        plan.sent.extend(chunk)


def queue_counts(sqs, url):
    a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed"])["Attributes"]
    return (int(a.get("ApproximateNumberOfMessages", 0)),
            int(a.get("ApproximateNumberOfMessagesNotVisible", 0)),
            int(a.get("ApproximateNumberOfMessagesDelayed", 0)))


def get_order(ddb, table, order_id):
    item = ddb.get_item(TableName=table, Key={"order_id": {"S": order_id}},
                        ConsistentRead=True).get("Item")
    return item


def wait_until(what, timeout, probe, interval=1.0):
    """Poll probe() until it returns a truthy value; raise a clear Failure on
    timeout. probe() may return (ok, detail)."""
    deadline = time.monotonic() + timeout
    detail = ""
    while True:
        r = probe()
        ok, detail = r if isinstance(r, tuple) else (r, "")
        if ok:
            return
        if time.monotonic() >= deadline:
            raise Failure(f"timed out after {timeout:.0f}s waiting for {what}" + (f" ({detail})" if detail else ""))
        time.sleep(interval)


# ---------------------------------------------------------------------------
# Deploy
# ---------------------------------------------------------------------------

def template_with_code_uris(path, uris):
    """The template's text with each function's `CodeUri` pointed at the S3
    object of its binary: `uris` maps the binary named in the function's
    `BuildProperties: Binary:` (which precedes its `CodeUri:`) to an s3 URI.
    A text edit, so the YAML short-form tags (!Ref, !If, ...) stay as they are."""
    text = open(path, encoding="utf-8").read()
    binary = re.compile(r"^\s+Binary:\s*(\S+)\s*$", re.MULTILINE)
    code_uri = re.compile(r"^(\s+CodeUri:)\s*\S.*$", re.MULTILINE)
    found = list(code_uri.finditer(text))
    # Every CodeUri needs its zip (checked below); a zip no function names
    # (order-api in a template from before the API) is simply not used.
    if not found:
        raise Failure(f"no `CodeUri:` lines in {path}")
    out, last = [], 0
    for m in found:
        names = binary.findall(text, 0, m.start())
        if not names or names[-1] not in uris:
            raise Failure(f"no zip for the function whose CodeUri is at offset {m.start()} (binary {names[-1:]})")
        out.append(text[last:m.start()] + f"{m.group(1)} {uris[names[-1]]}")
        last = m.end()
    return "".join(out) + text[last:]


def without_metric_math_alarms(text):
    """Work around a MiniStack 1.5.33 limitation, only while it is there.

    Its CloudFormation refuses an AWS::CloudWatch::Alarm whose `Metrics`
    (metric math) replace `MetricName` ("Properties.Metrics (metric math) is
    not supported"), and the whole stack fails. MiniStack never evaluates an
    alarm anyway, so such an alarm is left out of the deployed copy (a text
    edit of the resource's block, which nothing else in the template
    references): (copy's text, names of the alarms left out)."""
    block = re.compile(r"^  ([A-Za-z0-9]+):\n    Type: AWS::CloudWatch::Alarm\n(?:(?:    .*|\s*)\n)*?(?=^  \S|^\S)",
                       re.MULTILINE)
    dropped = []

    def drop(m):
        if re.search(r"^      Metrics:", m.group(0), re.MULTILINE):
            dropped.append(m.group(1))
            return ""
        return m.group(0)
    text = block.sub(drop, text)
    for name in dropped:
        if re.search(rf"\b{name}\b", text):
            raise Failure(f"{name} is left out of the deployed copy (metric math), but something refers to it")
    return text, dropped


def deploy(c, template_path, zips, params, timeout):
    """`zips` maps each binary name to its deployment package."""
    c["s3"].create_bucket(Bucket=BUCKET)
    uris = {}
    for name, zip_path in zips.items():
        blob = open(zip_path, "rb").read()
        key = f"{name}/{hashlib.sha256(blob).hexdigest()[:16]}.zip"
        c["s3"].put_object(Bucket=BUCKET, Key=key, Body=blob)
        uris[name] = f"s3://{BUCKET}/{key}"
        step(f"uploaded {zip_path} ({len(blob)} bytes) to {uris[name]}")

    text, dropped = without_metric_math_alarms(template_with_code_uris(template_path, uris))
    step(f"deploying {template_path} as stack {STACK} (CodeUri -> the uploaded zips)")
    if dropped:
        say(f"     workaround (MiniStack limitation): left out of the deployed copy, because MiniStack's "
            f"CloudFormation refuses metric-math alarms (and never evaluates alarms): {', '.join(dropped)}")
    say("     parameters: " + " ".join(f"{k}={v}" for k, v in params.items()))
    cfn = c["cloudformation"]
    # From S3, as `sam deploy` does: an inline TemplateBody is limited to
    # 51,200 bytes, and the template is larger.
    tkey = f"template/{hashlib.sha256(text.encode()).hexdigest()[:16]}.yaml"
    c["s3"].put_object(Bucket=BUCKET, Key=tkey, Body=text.encode())
    t0 = time.monotonic()
    cfn.create_stack(
        StackName=STACK,
        TemplateURL=f"https://s3.amazonaws.com/{BUCKET}/{tkey}",
        Parameters=[{"ParameterKey": k, "ParameterValue": str(v)} for k, v in params.items()],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"],
        OnFailure="DO_NOTHING",
    )
    while True:
        st = cfn.describe_stacks(StackName=STACK)["Stacks"][0]
        status = st["StackStatus"]
        if status == "CREATE_COMPLETE":
            break
        if status.endswith("FAILED") or status.startswith("ROLLBACK") or status.startswith("DELETE"):
            reasons = []
            for e in cfn.describe_stack_events(StackName=STACK)["StackEvents"]:
                if "FAILED" in e.get("ResourceStatus", ""):
                    reasons.append(f"{e['LogicalResourceId']} {e['ResourceStatus']}: {e.get('ResourceStatusReason', '')}")
            raise Failure(f"stack {STACK} is {status}: {st.get('StackStatusReason', '')}\n       "
                          + "\n       ".join(reasons[:10]))
        if time.monotonic() - t0 > timeout:
            raise Failure(f"timed out after {timeout}s waiting for stack {STACK} (status {status})")
        time.sleep(1)
    outputs = {o["OutputKey"]: o["OutputValue"] for o in st.get("Outputs", [])}
    resources = cfn.describe_stack_resources(StackName=STACK)["StackResources"]
    step(f"stack CREATE_COMPLETE in {time.monotonic() - t0:.1f}s: "
         + ", ".join(sorted(f"{r['ResourceType']}" for r in resources)))
    return outputs


def fix_scaling_config(endpoint, lam, mapping):
    """Work around a MiniStack 1.5.33 bug, only while it is there.

    Its CloudFormation provisioner copies ScalingConfig verbatim, and a value
    that comes from a parameter (`!Ref EventSourceMaximumConcurrency`) is a
    string there, as CloudFormation parameters are. The SQS poller then
    compares the in-flight count with that string and fails on every pass
    ("ESM SQS poller error: '>=' not supported between instances of 'int'
    and 'str'"): nothing is ever delivered. The raw API answer shows the
    string (boto3 would coerce it); if it is one, the same value is set again
    as a number through UpdateEventSourceMapping, which is what the template
    asks for."""
    raw = urllib.request.Request(
        f"{endpoint}/2015-03-31/event-source-mappings/{mapping['UUID']}",
        headers={"Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/lambda/aws4_request, "
                                  "SignedHeaders=host, Signature=0"})
    with urllib.request.urlopen(raw, timeout=10) as r:
        doc = json.load(r)
    mc = (doc.get("ScalingConfig") or {}).get("MaximumConcurrency")
    if isinstance(mc, str):
        lam.update_event_source_mapping(UUID=mapping["UUID"], ScalingConfig={"MaximumConcurrency": int(mc)})
        say(f"     workaround (MiniStack bug): ScalingConfig.MaximumConcurrency was stored as the string "
            f"{mc!r}, which stops its SQS poller; set it again as {int(mc)} via UpdateEventSourceMapping")


def grant_batch_visibility_alias(c):
    """Work around a MiniStack 1.5.33 IAM bug, only while it is there.

    AWS authorises ChangeMessageVisibilityBatch with the
    sqs:ChangeMessageVisibility action (there is no IAM action named after
    the batch call), which is what the template grants. MiniStack checks the
    call against "sqs:ChangeMessageVisibilityBatch" instead and denies it
    ("AccessDenied", logged by the functions as a failed visibility change).
    The deployed SQS consumers' roles get that one extra action, on their own
    queue, as an inline policy the template does not contain; every other
    permission is still checked as written."""
    cfn, iam, sqs = c["cloudformation"], c["iam"], c["sqs"]
    for role_id, queue_id in (("OrderConsumerRole", "OrderQueue"), ("PaymentLedgerRole", "PaymentQueue")):
        try:
            role = cfn.describe_stack_resource(StackName=STACK, LogicalResourceId=role_id)
            queue = cfn.describe_stack_resource(StackName=STACK, LogicalResourceId=queue_id)
        except Exception:  # noqa: BLE001 - a function that is not deployed
            continue
        role_name = role["StackResourceDetail"]["PhysicalResourceId"]
        queue_url = queue["StackResourceDetail"]["PhysicalResourceId"]
        name = queue_url.rstrip("/").split("/")[-1]
        arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        iam.put_role_policy(RoleName=role_name, PolicyName="ministack-batch-visibility-alias",
                            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [{
                                "Effect": "Allow", "Action": "sqs:ChangeMessageVisibilityBatch",
                                "Resource": arn}]}))
        say(f"     workaround (MiniStack bug): {role_id} also gets sqs:ChangeMessageVisibilityBatch on {name}, "
            f"the action MiniStack checks the batch call against (AWS checks sqs:ChangeMessageVisibility)")


def bootstrap_environments(root_pid):
    """(pid, environment) of every `bootstrap` process below root_pid."""
    import os
    children = defaultdict(list)
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
                children[ppid].append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        for kid in children.get(pid, []):
            todo.append(kid)
            try:
                if os.path.basename(os.readlink(f"/proc/{kid}/exe")) == "bootstrap":
                    raw = open(f"/proc/{kid}/environ", "rb").read().split(b"\0")
                    env = dict(x.decode(errors="replace").split("=", 1) for x in raw if b"=" in x)
                    found.append((kid, env))
            except OSError:
                pass
    return found


def delete_stack(c, timeout=90):
    cfn = c["cloudformation"]
    cfn.delete_stack(StackName=STACK)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            st = cfn.describe_stacks(StackName=STACK)["Stacks"][0]
        except Exception:  # noqa: BLE001 - gone
            return "DELETE_COMPLETE"
        if st["StackStatus"] in ("DELETE_COMPLETE", "DELETE_FAILED"):
            return st["StackStatus"]
        time.sleep(1)
    return "timed out"


# ---------------------------------------------------------------------------
# Logs
# ---------------------------------------------------------------------------

def function_log_lines(logs, group):
    lines = []
    kwargs = {"logGroupName": group}
    while True:
        resp = logs.filter_log_events(**kwargs)
        lines.extend(e["message"] for e in resp.get("events", []))
        tok = resp.get("nextToken")
        if not tok or not resp.get("events"):
            break
        kwargs["nextToken"] = tok
    return lines


def parse_json_lines(lines):
    out = []
    for line in lines:
        for part in line.splitlines():
            part = part.strip()
            if part.startswith("{"):
                try:
                    out.append(json.loads(part))
                except ValueError:
                    pass
    return out


def find_key(doc, key):
    """First value of `key` in a tracing JSON line (top level, fields or span)."""
    if key in doc:
        return doc[key]
    for sub in ("fields", "span"):
        if isinstance(doc.get(sub), dict) and key in doc[sub]:
            return doc[sub][key]
    return None


# ---------------------------------------------------------------------------
# run
# ---------------------------------------------------------------------------

class Checks:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.failures = []

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            say(f"  ok    {what}")
        else:
            self.failed += 1
            self.failures.append(what)
            say(f"  FAIL  {what}" + (f"\n        {detail}" if detail else ""))
        return ok


def run(args):
    c = clients(args.endpoint)
    checks = Checks()
    timeout = int(args.function_timeout)
    params = {
        "Architecture": "x86_64",          # MiniStack runs host binaries only
        "FunctionTimeout": timeout,
        "DeadlineMarginMs": args.deadline_margin_ms,
        "QueueVisibilityTimeout": 6 * timeout,
        "MaxReceiveCount": 5,              # the template's minimum
        "BatchSize": 10,
        "MaximumBatchingWindowInSeconds": 0,
        "TableDeletionProtection": "false",
        "LogRetentionInDays": 1,
        "RustLog": "info",
    }
    deployed = False
    provider = None
    try:
        # The webhook URL lives in an SSM SecureString parameter, as in AWS
        # (NotifyWebhookUrlParameter's default name); the template passes only
        # its name, and the notifier reads and decrypts it at cold start
        # through AWS_ENDPOINT_URL (MiniStack's SSM).
        provider = WebhookProvider()
        c["ssm"].put_parameter(Name=WEBHOOK_PARAMETER, Value=provider.url, Type="SecureString", Overwrite=True)
        step(f"SSM {WEBHOOK_PARAMETER} = {provider.url} (a local provider that deduplicates by Idempotency-Key)")
        zips = {"order-consumer": args.zip}
        for pair in args.function_zip:
            name, sep, path = pair.partition("=")
            if not sep or not name or name in zips:
                raise Failure(f"--function-zip {pair!r}: expected NAME=FILE, one per function")
            zips[name] = path
        out = deploy(c, args.template, zips, params, args.deploy_timeout)
        deployed = True
        checks.check(True, f"stack {STACK} deployed from {args.template} (SAM transform applied by the emulator)")
        plan = run_scenario(c, out, params, args, checks)
        if "OrderApiUrl" in out:
            api_order = api.run(sys.modules[__name__], c, out, plan, args, checks)
        else:
            api_order = None
            say("\ne2e: the stack has no order API (no OrderApiUrl output): its step is skipped")
        if has_notifier(out):
            check_notifications(c, out, plan, provider, args, checks)
            if api_order:
                api.check_notified(*api_order, provider, checks)
        else:
            say("\ne2e: the stack has no order notifier (no OrderNotifierFunctionName output): its checks are skipped")
        replay.backfill(sys.modules[__name__], c, out, plan, provider, params, args, checks)
    except Failure as e:
        checks.check(False, "run completed", str(e))
    except Exception as e:  # noqa: BLE001 - report, delete the stack, fail
        import traceback
        traceback.print_exc()
        checks.check(False, "run completed", f"unexpected {type(e).__name__}: {e}")
    finally:
        if provider:
            provider.close()
        if deployed and not args.keep_stack:
            status = delete_stack(c)
            step(f"stack {STACK}: {status}")

    say("")
    if checks.failures:
        say("e2e: failed checks:")
        for f in checks.failures:
            say(f"  - {f}")
    say(f"e2e: {checks.passed} passed, {checks.failed} failed")
    return 0 if checks.failed == 0 else 1


def has_ledger(out):
    """Whether the stack has the payment ledger (functions/payment-ledger)."""
    return "PaymentQueueUrl" in out


def has_notifier(out):
    """Whether the stack has the order notifier (functions/order-notifier)."""
    return "OrderNotifierFunctionName" in out


def payment(typ, event_id, payment_id, account, amount, refund_id=None, currency="INR"):
    ev = {"eventId": event_id, "type": typ, "paymentId": payment_id, "accountId": account,
          "amount": amount, "currency": currency, "occurredAt": "2026-12-05T10:00:00Z"}
    if refund_id:
        ev["refundId"] = refund_id
    return json.dumps(ev, separators=(",", ":"))


class LedgerRun:
    """The payment-ledger function, deployed by the same stack: a refund sent
    before its capture (Early, then applied), a capture re-published under a
    new eventId (Duplicate), a refund beyond its capture (Suspended: parked in
    a suspense entry); once that has drained, a USD capture for the INR
    account (Suspended) and the over-refund sent again (Duplicate). Checked
    at the end: balance, entries, the two suspense entries, an empty ledger
    DLQ."""

    def __init__(self, c, out, endpoint):
        self.sqs, self.ddb, lam = c["sqs"], c["dynamodb"], c["lambda"]
        self.qurl, self.dlq = out["PaymentQueueUrl"], out["PaymentDeadLetterQueueUrl"]
        self.ledger, self.accounts = out["LedgerTableName"], out["AccountsTableName"]
        fn = out["PaymentLedgerFunctionName"]
        self.sent = []          # every body sent (replayed by replay.py)
        for m in lam.list_event_source_mappings(FunctionName=fn)["EventSourceMappings"]:
            fix_scaling_config(endpoint, lam, m)

    def send(self, bodies):
        self.sent.extend(bodies)
        self.sqs.send_message_batch(
            QueueUrl=self.qurl,
            Entries=[{"Id": str(i), "MessageBody": b} for i, b in enumerate(bodies)])

    def send_early(self):
        step("payment ledger: sending a refund of pay-e2 before its capture")
        self.send([payment("PaymentRefunded", "evt-ref-e1", "pay-e2", "acct-e1", 200, "ref-e1")])

    OVER_REFUND = payment("PaymentRefunded", "evt-ref-e2", "pay-e1", "acct-e1", 2000, "ref-e2")

    def send_rest(self):
        step("payment ledger: sending captures (one re-published), and a refund beyond its capture")
        cap = payment("PaymentCaptured", "evt-pay-e1", "pay-e1", "acct-e1", 1000)
        self.send([
            cap,
            cap.replace("evt-pay-e1", "evt-pay-e1-republished"),
            payment("PaymentCaptured", "evt-pay-e2", "pay-e2", "acct-e1", 500),
            self.OVER_REFUND,
        ])

    def check(self, checks, timeout):
        def drained():
            v, nv, d = queue_counts(self.sqs, self.qurl)
            return v + nv + d == 0, f"payment queue visible={v} in flight={nv} delayed={d}"
        wait_until("the payment queue to drain", timeout, drained, interval=1)
        # Only now is acct-e1 certainly open in INR: sent earlier, the USD
        # capture might have been processed first and opened it in USD.
        step("payment ledger: sending a USD capture for acct-e1 (INR), and the over-refund again")
        self.send([
            payment("PaymentCaptured", "evt-pay-e3", "pay-e3", "acct-e1", 700, currency="USD"),
            self.OVER_REFUND,
        ])
        wait_until("the payment queue to drain again", timeout, drained, interval=1)
        acct = self.ddb.get_item(TableName=self.accounts, Key={"account_id": {"S": "acct-e1"}},
                                 ConsistentRead=True).get("Item", {})
        got = (acct.get("balance", {}).get("N"), acct.get("entry_count", {}).get("N"))
        checks.check(got == ("1300", "3"),
                     "payment ledger: acct-e1 balance 1300 (1000 + 500 - 200) over 3 entries: the duplicate "
                     "added nothing, the early refund applied once its capture had, the over-refund and the USD "
                     "capture were parked, not posted",
                     f"got balance/entry_count {got}")
        items = {i["entry_id"]["S"]: i for i in
                 self.ddb.scan(TableName=self.ledger, ConsistentRead=True)["Items"]}
        entries = sorted(items)
        want = ["pay:pay-e1", "pay:pay-e2", "refund:ref-e1", "suspense:pay:pay-e3", "suspense:refund:ref-e2"]
        checks.check(entries == want,
                     "payment ledger: entries pay:pay-e1, pay:pay-e2, refund:ref-e1 and one suspense entry each "
                     "for the over-refund and the USD capture (no refund:ref-e2, no pay:pay-e3, the over-refund "
                     "sent twice parked once)",
                     f"got {entries}")

        def fields(entry_id, keys):
            item = items.get(entry_id, {})
            return {k: next(iter(item[k].values())) if k in item else None for k in keys}
        got = fields("suspense:refund:ref-e2", ["event_id", "event_type", "payment_id", "refund_id", "account_id",
                                                "amount", "currency", "suspense_reason", "capture_refundable"])
        want = {"event_id": "evt-ref-e2", "event_type": "PaymentRefunded", "payment_id": "pay-e1",
                "refund_id": "ref-e2", "account_id": "acct-e1", "amount": "2000", "currency": "INR",
                "suspense_reason": "over-refund", "capture_refundable": "1000"}
        checks.check(got == want, "payment ledger: the over-refund's suspense entry holds the event and its reason",
                     f"got {got}")
        got = fields("suspense:pay:pay-e3", ["event_id", "event_type", "payment_id", "account_id", "amount",
                                             "currency", "suspense_reason", "account_currency"])
        want = {"event_id": "evt-pay-e3", "event_type": "PaymentCaptured", "payment_id": "pay-e3",
                "account_id": "acct-e1", "amount": "700", "currency": "USD",
                "suspense_reason": "currency-mismatch", "account_currency": "INR"}
        checks.check(got == want, "payment ledger: the USD capture's suspense entry holds the event and its reason",
                     f"got {got}")
        v, nv, _ = queue_counts(self.sqs, self.dlq)
        checks.check(v + nv == 0, "payment ledger: its DLQ is empty", f"{v + nv} message(s)")


WEBHOOK_PARAMETER = "/order-consumer/notify-webhook-url"


def check_notifications(c, out, plan, provider, args, checks):
    """The order notifier, fed by the orders table's stream: one accepted
    notification per (order, template), none twice."""
    want = set()
    for order, (status, _seq, _hist) in plan.expect.items():
        want.add(f"order-{order}-order-confirmation")
        if status in ("SHIPPED", "DELIVERED"):
            want.add(f"order-{order}-shipping-notice")
        if status == "CANCELLED":
            want.add(f"order-{order}-cancellation-notice")

    def delivered():
        got = set(provider.accepted)
        return got >= want, f"{len(got & want)} of {len(want)} notifications accepted"
    try:
        wait_until("the order notifier to deliver every notification", args.drain_timeout, delivered, interval=1)
    except Failure as e:
        say(f"        {e}")
    got = set(provider.accepted)
    checks.check(got == want,
                 f"order notifier: the provider accepted exactly the {len(want)} notifying transitions "
                 "(confirmation per order, shipping notice per shipped order, cancellation per cancelled order)",
                 f"missing {sorted(want - got)}, unexpected {sorted(got - want)}")
    resent = {k: n for k, n in provider.requests.items() if n > 1}
    checks.check(all(n == 1 for n in provider.accepted.values()),
                 "order notifier: nothing accepted twice (Idempotency-Key)"
                 + (f"; {len(resent)} key(s) were re-sent and deduplicated" if resent else ""),
                 f"accepted counts {dict(provider.accepted)}")
    items = c["dynamodb"].scan(TableName=out["NotificationsTableName"], ConsistentRead=True)["Items"]
    statuses = Counter(i["status"]["S"] for i in items)
    checks.check(statuses == Counter({"SENT": len(want)}),
                 f"order notifier: the notifications table records {len(want)} SENT, nothing else",
                 f"got {dict(statuses)}")
    v, nv, _ = queue_counts(c["sqs"], out["NotifierFailureQueueUrl"])
    checks.check(v + nv == 0, "order notifier: its failure destination is empty", f"{v + nv} message(s)")


def run_scenario(c, out, params, args, checks):
    sqs, ddb, lam, logs = c["sqs"], c["dynamodb"], c["lambda"], c["logs"]
    qurl, dlq_url = out["QueueUrl"], out["DeadLetterQueueUrl"]
    table, fn, group = out["TableName"], out["FunctionName"], out["LogGroupName"]
    say(f"     queue {qurl}\n     dlq   {dlq_url}\n     table {table}  function {fn}  logs {group}")

    # What the emulator made of the function and its event source (informative:
    # the behaviour below is what is asserted, not this configuration).
    cfg = lam.get_function_configuration(FunctionName=fn)
    env = cfg.get("Environment", {}).get("Variables", {})
    say(f"     function: Runtime={cfg.get('Runtime')} Architectures={cfg.get('Architectures')} "
        f"Timeout={cfg.get('Timeout')} env={sorted(env)}")
    esms = lam.list_event_source_mappings(FunctionName=fn)["EventSourceMappings"]
    for m in esms:
        fix_scaling_config(args.endpoint, lam, m)
    esms = lam.list_event_source_mappings(FunctionName=fn)["EventSourceMappings"]
    for m in esms:
        say(f"     event source mapping: BatchSize={m.get('BatchSize')} "
            f"MaximumBatchingWindowInSeconds={m.get('MaximumBatchingWindowInSeconds')} "
            f"FunctionResponseTypes={m.get('FunctionResponseTypes', [])} "
            f"ScalingConfig={m.get('ScalingConfig', {})} State={m.get('State')}")
    checks.check(len(esms) == 1 and esms[0].get("EventSourceArn") == out["QueueArn"],
                 "one event source mapping, from the deployed queue to the function",
                 f"got {[(m.get('EventSourceArn'), m.get('State')) for m in esms]}")

    grant_batch_visibility_alias(c)

    plan = Plan(args.seed)
    rng = plan.rng
    t_start = time.monotonic()

    # The early event's latency without and with the retry backoff (leaves
    # the function with RETRY_BACKOFF=on, the template's default).
    latency.measure(sys.modules[__name__], c, out, plan, params["QueueVisibilityTimeout"], checks)

    # The payment ledger runs alongside: its early refund goes first.
    ledger = LedgerRun(c, out, args.endpoint) if has_ledger(out) else None
    plan.ledger = ledger
    if ledger:
        ledger.send_early()
    else:
        say("     the stack has no payment ledger (no PaymentQueueUrl output): its checks are skipped")

    # 1. The early event: ord-2003's OrderPaid, alone, before its OrderPlaced.
    early = event("ord-2003", 2, "OrderPaid")
    plan.expect["ord-2003"] = ("PAID", 2, ["evt-2003-1", "evt-2003-2"])
    step("sending ord-2003 OrderPaid (seq 2) before its OrderPlaced")
    send_bodies(sqs, qurl, [body(early)], plan)
    # The event source mapping's LastProcessingResult says when the batch is
    # settled; the function's log says what the record's outcome was.
    esm_uuid = esms[0]["UUID"]
    before = lam.get_event_source_mapping(UUID=esm_uuid).get("LastProcessingResult")

    def esm_settled():
        now = lam.get_event_source_mapping(UUID=esm_uuid).get("LastProcessingResult")
        return now != before, f"LastProcessingResult still {now!r}"
    wait_until("the event source mapping to deliver the early OrderPaid", 60, esm_settled, interval=0.3)
    result = lam.get_event_source_mapping(UUID=esm_uuid).get("LastProcessingResult")
    first_outcome = "(not in the captured log)"
    t_log = time.monotonic() + 5
    while time.monotonic() < t_log:
        found = [str(find_key(d, "outcome")) for d in parse_json_lines(function_log_lines(logs, group))
                 if find_key(d, "event_id") == "evt-2003-2" and find_key(d, "outcome")]
        if found:
            first_outcome = found[0]
            break
        time.sleep(0.3)
    v, nv, _ = queue_counts(sqs, qurl)
    step(f"first delivery of the early OrderPaid: outcome {first_outcome}; event source mapping: "
         f"{result!r}; queue visible={v} in flight={nv}")
    early_kept = v + nv == 1
    checks.check(early_kept and first_outcome in ("Early", "(not in the captured log)"),
                 "the early OrderPaid was reported as a batch item failure (Early) and kept in the queue",
                 f"outcome {first_outcome}, messages left in the queue: {v + nv}")
    item = get_order(ddb, table, "ord-2003")
    checks.check(item is None, "the early OrderPaid did not create ord-2003 (no predecessor yet)",
                 f"item: {item}")
    time.sleep(args.early_gap)

    if ledger:
        ledger.send_rest()

    # 2. The main stream.
    step("sending the main stream")
    bodies = []
    # ord-2003's predecessor, several seconds after the early event was received.
    bodies.append(body(event("ord-2003", 1, "OrderPlaced")))
    # ord-2001: in order, with OrderPaid published twice (two messageIds, same body).
    o1 = plan.lifecycle("ord-2001", 4)
    bodies += [body(o1[0]), body(o1[1]), body(o1[1]), body(o1[2]), body(o1[3])]
    # ord-2002: the whole lifecycle reversed, in one SendMessageBatch.
    bodies += [body(e) for e in reversed(plan.lifecycle("ord-2002", 4))]
    # ord-2004: placed and cancelled.
    o4 = plan.lifecycle("ord-2004", 0, cancel_at=1)
    bodies += [body(e) for e in o4]
    # The poison message: not JSON.
    bodies.append(plan.poison)
    # Bulk: 12 orders of random length, some cancelled, shuffled together, a
    # fifth of the events published twice. Cancellations come right after
    # OrderPlaced: a cancellation after OrderPaid may legally arrive first and
    # supersede the payment (Stale), which would make the expected history
    # depend on timing.
    bulk = []
    for k in range(12):
        order = f"ord-{2100 + k}"
        if rng.random() < 0.25:
            evs = plan.lifecycle(order, 0, cancel_at=1)
        else:
            evs = plan.lifecycle(order, rng.choice([2, 3, 4, 4]))
        for e in evs:
            bulk.append(body(e))
            if rng.random() < 0.2:
                bulk.append(body(e))
    rng.shuffle(bulk)
    bodies += bulk
    send_bodies(sqs, qurl, bodies, plan)
    say(f"     sent {len(plan.sent)} messages so far ({len(bulk)} shuffled bulk events of 12 orders)")

    # 3. After ord-2001 and ord-2004 are settled: identical re-sends and illegal events.
    def settled(order):
        def probe():
            it = get_order(ddb, table, order)
            st = plan.expect[order]
            got = (it or {}).get("status", {}).get("S"), int((it or {}).get("last_event_seq", {}).get("N", 0))
            return got == (st[0], st[1]), f"{order} is {got}"
        return probe
    wait_until("ord-2001 to reach DELIVERED", args.drain_timeout, settled("ord-2001"))
    wait_until("ord-2004 to reach CANCELLED", args.drain_timeout, settled("ord-2004"))
    step("ord-2001 DELIVERED and ord-2004 CANCELLED: sending identical re-sends and illegal events")
    late = [
        body(o1[3]),   # identical re-send of the last applied event: Duplicate
        body(o1[1]),   # identical re-send of an older event: Stale
        body(event("ord-2001", 5, "OrderPlaced", event_id="evt-2001-placed-again")),  # Rejected
        body(event("ord-2004", 3, "OrderShipped")),  # shipping a cancelled order: Rejected
    ]
    plan.rejected = 2
    # Each rejected event is its order's next one, so it spends its seq:
    # last_event_seq moves to it, status and history do not.
    for order, seq, eid in (("ord-2001", 5, "evt-2001-placed-again"), ("ord-2004", 3, "evt-2004-3")):
        status, _, hist = plan.expect[order]
        plan.expect[order] = (status, seq, hist)
        plan.expect_rejected[order] = [eid]
    send_bodies(sqs, qurl, late, plan)

    # 4. Wait for the queue to drain: every message deleted or moved to the DLQ.
    step(f"waiting (at most {args.drain_timeout}s) for the queue to drain; the poison message needs "
         f"{params['MaxReceiveCount']} receives, which the retry backoff makes back to back "
         f"(without it: {params['MaxReceiveCount']} x {params['QueueVisibilityTimeout']}s visibility)")
    stable = {"n": 0}

    def drained():
        v, nv, d = queue_counts(sqs, qurl)
        dv, dnv, _ = queue_counts(sqs, dlq_url)
        stable["n"] = stable["n"] + 1 if v + nv + d == 0 else 0
        return stable["n"] >= 2, f"queue visible={v} in flight={nv} delayed={d}; dlq={dv + dnv}"
    wait_until("the queue to drain", args.drain_timeout, drained, interval=2)
    drain_s = time.monotonic() - t_start
    step(f"queue drained {drain_s:.0f}s after the first message")

    # FIFO: a poison head and the messages behind it, on a FIFO queue of its
    # own (its orders join plan.expect, its poison message extra_invalid).
    fifo.measure(sys.modules[__name__], c, out, plan, params, args, checks)

    # 5. Assertions.
    say("")
    say("e2e: checks")
    n_sent = len(plan.sent)
    counts = Counter(plan.sent)
    extra_copies = sum(n - 1 for b, n in counts.items() if b != plan.poison)

    # Table.
    items = {}
    kwargs = {"TableName": table, "ConsistentRead": True}
    while True:
        resp = ddb.scan(**kwargs)
        for it in resp["Items"]:
            items[it["order_id"]["S"]] = it
        if "LastEvaluatedKey" not in resp:
            break
        kwargs["ExclusiveStartKey"] = resp["LastEvaluatedKey"]
    checks.check(set(items) == set(plan.expect),
                 f"the table holds exactly the {len(plan.expect)} orders sent",
                 f"missing {sorted(set(plan.expect) - set(items))}, unexpected {sorted(set(items) - set(plan.expect))}")
    for order in sorted(plan.expect):
        status, seq, hist = plan.expect[order]
        it = items.get(order, {})
        got_status = it.get("status", {}).get("S")
        got_seq = int(it.get("last_event_seq", {}).get("N", 0)) if it else None
        got_hist = [x.get("S") for x in it.get("history", {}).get("L", [])]
        checks.check((got_status, got_seq) == (status, seq),
                     f"{order}: status {status}, last_event_seq {seq}",
                     f"got status {got_status}, last_event_seq {got_seq}")
        checks.check(got_hist == hist and len(set(got_hist)) == len(got_hist),
                     f"{order}: history is {hist} (each transition applied once, in seq order)",
                     f"got history {got_hist}")
        want_rej = plan.expect_rejected.get(order, [])
        got_rej = [x.get("S") for x in it.get("rejected_events", {}).get("L", [])]
        if want_rej or got_rej:
            checks.check(got_rej == want_rej,
                         f"{order}: rejected_events is {want_rej} (the rejection spent its seq)",
                         f"got rejected_events {got_rej}")

    if ledger:
        ledger.check(checks, args.drain_timeout)

    # DLQ.
    dlq_msgs = []
    for _ in range(5):
        r = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, VisibilityTimeout=10,
                                AttributeNames=["All"], WaitTimeSeconds=0)
        got = r.get("Messages", [])
        if not got:
            break
        dlq_msgs += got
    dlq_bodies = [m["Body"] for m in dlq_msgs]
    checks.check(dlq_bodies == [plan.poison],
                 "the DLQ holds the poison message, and only it",
                 f"DLQ bodies: {[b[:80] for b in dlq_bodies]}")
    if dlq_msgs:
        rc = dlq_msgs[0].get("Attributes", {}).get("ApproximateReceiveCount")
        say(f"        (its ApproximateReceiveCount, this ReceiveMessage included: {rc})")

    # Function logs.
    lines = function_log_lines(logs, group)
    docs = parse_json_lines(lines)
    emf = [d for d in docs if isinstance(d.get("_aws"), dict) and "CloudWatchMetrics" in d["_aws"]]
    checks.check(len(emf) > 0, f"the function's logs ({group}) contain EMF metric lines",
                 f"{len(lines)} log lines, none with _aws.CloudWatchMetrics")
    totals = Counter()
    for d in emf:
        for k in ("Applied", "Duplicate", "Stale", "Rejected", "Early", "Conflict", "Invalid",
                  "Failed", "NotAttempted", "BatchSize"):
            if isinstance(d.get(k), int):
                totals[k] += d[k]
    say(f"        EMF totals over {len(emf)} invocations: " + ", ".join(f"{k}={totals[k]}" for k in sorted(totals)))
    # MiniStack reads the function's stdout through a pipe and stops collecting
    # an invocation's lines 5 ms after the last one (250 ms at most). Under CPU
    # load it can miss lines, which then belong to no invocation. Each
    # invocation writes exactly one EMF line and MiniStack writes one REPORT
    # line per invocation, so the totals are exact when the counts match, and
    # only lower bounds otherwise.
    n_inv = sum(1 for line in lines if line.startswith("REPORT RequestId:"))
    complete = len(emf) == n_inv
    if not complete:
        say(f"        note: MiniStack captured the EMF line of {len(emf)} of {n_inv} invocations "
            f"(its log capture is lossy under load): metric totals are checked as upper bounds")
    same = (lambda got, want: got == want) if complete else (lambda got, want: got <= want)
    rel = "=" if complete else "<="
    checks.check(same(totals["Applied"], plan.applied_total()),
                 f"EMF: Applied {rel} {plan.applied_total()} (every transition applied exactly once)",
                 f"Applied = {totals['Applied']}")
    checks.check(same(totals["Duplicate"] + totals["Stale"], extra_copies),
                 f"EMF: Duplicate + Stale {rel} {extra_copies} (every repeated message acknowledged, none applied)",
                 f"Duplicate = {totals['Duplicate']}, Stale = {totals['Stale']}")
    checks.check(same(totals["Rejected"], plan.rejected),
                 f"EMF: Rejected {rel} {plan.rejected} (a second OrderPlaced, OrderShipped on a cancelled order)",
                 f"Rejected = {totals['Rejected']}")
    want_invalid = params["MaxReceiveCount"] + plan.extra_invalid
    checks.check(same(totals["Invalid"], want_invalid),
                 f"EMF: Invalid {rel} {want_invalid} (each poison message, once per receive, "
                 f"until MaxReceiveCount moved it to the DLQ)",
                 f"Invalid = {totals['Invalid']}")
    checks.check((totals["BatchSize"] >= n_sent or not complete) and all(d.get("BatchSize", 0) <= 10 for d in emf),
                 f"EMF: at most 10 records per batch" + (f", every message reached the function (BatchSize total >= {n_sent} sent)" if complete else ""),
                 f"BatchSize total {totals['BatchSize']}, max {max((d.get('BatchSize', 0) for d in emf), default=0)}")

    # The early event: returned to SQS, redelivered, then applied.
    outcomes = defaultdict(list)
    for d in docs:
        eid, oc = find_key(d, "event_id"), find_key(d, "outcome")
        if eid and oc:
            outcomes[eid].append(str(oc))
    early_seen = outcomes.get("evt-2003-2", [])
    ord2003 = [x.get("S") for x in items.get("ord-2003", {}).get("history", {}).get("L", [])]
    checks.check(early_kept and "evt-2003-2" in ord2003 and early_seen.count("Applied") <= 1,
                 "the early OrderPaid was redelivered after the visibility timeout and applied once",
                 f"kept in the queue after its first delivery: {early_kept}; ord-2003 history {ord2003}; "
                 f"its outcomes in the logs: {early_seen}")
    say(f"        evt-2003-2 outcomes in order: {early_seen}")

    # The environment the function's process really got (Linux /proc).
    if args.ministack_pid:
        # The ledger's processes (LEDGER_TABLE set) are checked apart; the
        # notifier's (NOTIFICATIONS_TABLE) by what they delivered; the order
        # API's (IDEMPOTENCY_TABLE) by api.py.
        all_envs = bootstrap_environments(args.ministack_pid)
        envs = [(pid, e) for pid, e in all_envs
                if "LEDGER_TABLE" not in e and "NOTIFICATIONS_TABLE" not in e and "IDEMPOTENCY_TABLE" not in e]
        ledger_envs = [(pid, e) for pid, e in all_envs if "LEDGER_TABLE" in e]
        want = {"TABLE_NAME": table, "AWS_ENDPOINT_URL": args.endpoint, "AWS_REGION": REGION}
        bad = [(pid, {k: e.get(k) for k in want}) for pid, e in envs if any(e.get(k) != v for k, v in want.items())]
        checks.check(envs and not bad,
                     f"the function's {len(envs)} bootstrap process(es) run with TABLE_NAME from the stack and "
                     f"AWS_ENDPOINT_URL={args.endpoint}",
                     f"found {len(envs)} bootstrap processes; mismatches: {bad}")
        if ledger:
            want = {"LEDGER_TABLE": out["LedgerTableName"], "ACCOUNTS_TABLE": out["AccountsTableName"]}
            bad = [(pid, {k: e.get(k) for k in want}) for pid, e in ledger_envs
                   if any(e.get(k) != v for k, v in want.items())]
            checks.check(ledger_envs and not bad,
                         f"the payment ledger's {len(ledger_envs)} bootstrap process(es) run with LEDGER_TABLE and "
                         f"ACCOUNTS_TABLE from the stack",
                         f"found {len(ledger_envs)}; mismatches: {bad}")
        if args.auth == "true":
            keys = sorted({e.get("AWS_ACCESS_KEY_ID", "")[:4] for _, e in envs})
            checks.check(envs and keys == ["ASIA"],
                         "the function ran with its execution role's session credentials "
                         "(AUTH=true: its DynamoDB calls were checked against the template's role policy)",
                         f"access key prefixes seen: {keys}")
        if envs:
            e = envs[0][1]
            say("        bootstrap env: " + " ".join(
                f"{k}={e.get(k)}" for k in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "TABLE_NAME",
                                            "AWS_ACCESS_KEY_ID", "AWS_LAMBDA_FUNCTION_NAME",
                                            "AWS_LAMBDA_RUNTIME_API", "AWS_CONFIG_FILE")))
    say(f"        {n_sent} messages sent ({extra_copies} repeats, {plan.rejected} illegal, 1 poison); "
        f"{len(plan.expect)} orders; drained in {drain_s:.0f}s")
    return plan


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("wait-healthy")
    h.add_argument("--endpoint", required=True)
    h.add_argument("--timeout", type=float, default=60)
    r = sub.add_parser("run")
    r.add_argument("--endpoint", required=True)
    r.add_argument("--template", required=True)
    r.add_argument("--zip", required=True)
    r.add_argument("--function-zip", action="append", default=[], metavar="NAME=FILE",
                   help="the deployment package of the function under functions/NAME (its binary's name)")
    r.add_argument("--function-timeout", type=int, default=3)
    r.add_argument("--deadline-margin-ms", type=int, default=1000)
    r.add_argument("--deploy-timeout", type=int, default=180)
    r.add_argument("--drain-timeout", type=int, default=300)
    r.add_argument("--early-gap", type=float, default=3.0,
                   help="seconds between the early event's first receive and sending its predecessor")
    r.add_argument("--seed", type=int, default=8)
    r.add_argument("--keep-stack", action="store_true")
    r.add_argument("--auth", default="false", help="whether MiniStack runs with AUTH=true (IAM enforced)")
    r.add_argument("--ministack-pid", type=int, default=0,
                   help="check the environment of the function processes below this pid")
    a = p.parse_args()
    if a.cmd == "wait-healthy":
        return wait_healthy(a.endpoint, a.timeout)
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
