"""The order API step of `make e2e` (issue 15): POST /orders with an
Idempotency-Key, through the deployed HTTP API, into the same orders table
the consumer and the notifier work on.

Called by e2e.py once the main stream has been checked, before the
notifier's checks and the backfill. On the stack's own HTTP API
(`OrderHttpApi`, payload format 2.0, the `$default` stage), addressed the
way MiniStack serves execute-api locally (see `Gateway`):

1. POST /orders with a fresh Idempotency-Key -> 201, the order, Location;
   the same request again (a client's retry) -> the byte-identical 201 with
   `Idempotent-Replayed: true`; the same order with its JSON keys in another
   order and other whitespace -> the same replay (the fingerprint is of the
   canonical JSON); the same key with another body -> 422 problem+json; no
   key -> 400 problem+json; a path with no route -> API Gateway's own 404,
   the function not invoked; the POST and the GET unsigned -> the gateway's
   403, the function not invoked; GET /orders/{orderId} -> 200 PLACED; the
   same GET signed by a second IAM user -> 404 (not its order);
2. the order's OrderPaid (seq 2) through the orders queue, built as e2e.py
   builds every event; the order becomes PAID, and GET shows it;
3. one order item for the customer, one COMPLETED record in the
   idempotency table, the API function's EMF counts, its processes' tables.

The order joins `plan.expect` (for the notifier's checks: exactly one
confirmation although the POST was sent three times), its OrderPaid joins
`plan.sent` (re-sent by the backfill, which must find it a Duplicate), and
`plan.api_retry` lets the backfill send the first POST once more.

MiniStack 1.5.33 leaves the HTTP API without routes: SAM describes them in
the Api's OpenAPI `Body`, which MiniStack's CloudFormation does not import.
`import_routes` creates them, from that Body as the stack holds it, through
the API Gateway v2 API (CreateIntegration, CreateRoute), each with the
authorization its `security` names (AWS_IAM, the template's default).

Authorization: the routes require IAM authorization, so every
request is signed with SigV4 for `execute-api` (botocore's SigV4Auth, the
e2e's credentials). What MiniStack 1.5.33 enforces on an AWS_IAM route of an
HTTP API: a request without an `Authorization` header is answered 403 by
the gateway whatever AUTH is, the function not invoked. With AUTH=true (the
default here) it also authenticates the request (an IAM user's SigV4
signature is verified against its secret; the root key `test` is accepted
as root) and evaluates execute-api:Invoke on the route's ARN against the
caller's identity policies, as AWS does; with AUTH=false it does neither.
The access key is resolved to its principal, which fills
`requestContext.authorizer.iam` (userArn) as API Gateway does. The e2e
checks the unsigned 403, and with a second IAM user created in MiniStack: a
bad signature 403, no policy 403 (AUTH=true), then, allowed, its GET of the
order 404 (not its order: the function's principal scoping).
"""
import json
import os
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
import re
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter

LABELS = ("Created", "Replayed", "Shown", "KeyReused", "InProgress", "Invalid", "Forbidden", "NotFound",
          "Unavailable", "Internal")
_NOVALUE = object()


class Gateway:
    """HTTP to the deployed HTTP API through MiniStack's execute-api host
    form: the request goes to MiniStack on 127.0.0.1 with
    `Host: {apiId}.execute-api.localhost:{port}` (the host of the API's
    ApiEndpoint there), so the path is exactly the one a client appends to
    OrderApiUrl (`/orders`, no stage: the `$default` stage serves from the
    root). No DNS, no proxy: nothing leaves 127.0.0.1."""

    def __init__(self, endpoint, api_endpoint, credentials=None, region="us-east-1"):
        m = re.fullmatch(r"https?://([a-z0-9]+\.execute-api\.localhost)(?::\d+)?/?", api_endpoint)
        port = endpoint.rsplit(":", 1)[1]
        if not m or not endpoint.startswith("http://127.0.0.1:"):
            raise ValueError(f"not a local execute-api endpoint: {api_endpoint} (MiniStack at {endpoint})")
        self.base = endpoint
        self.host = f"{m.group(1)}:{port}"
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.credentials = credentials
        self.region = region

    def as_(self, credentials):
        """The same gateway, requests signed with other credentials."""
        g = Gateway.__new__(Gateway)
        g.__dict__.update(self.__dict__, credentials=credentials)
        return g

    def request(self, method, path, body=None, headers=None, signed=True):
        """(status, headers, body bytes) of one request; 4xx/5xx included.
        Signed with SigV4 for execute-api (as a client of the deployed API
        must) unless `signed` is false, over the URL a client would use:
        the signature covers the execute-api Host."""
        data = body.encode() if isinstance(body, str) else body
        headers = {"Host": self.host, **(headers or {})}
        if signed and self.credentials is not None:
            aws = AWSRequest(method=method, url=f"http://{self.host}{path}", data=data or b"",
                             headers=dict(headers))
            SigV4Auth(self.credentials, "execute-api", self.region).add_auth(aws)
            headers = dict(aws.headers.items())
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with self.opener.open(req, timeout=30) as r:
                return r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()


def _resolver(e2e, c, phys, conditions):
    """Resolve the intrinsic functions of a processed template's Api Body:
    Fn::If on the API's own condition (true: the Api was created), Ref,
    AWS::NoValue, Fn::Sub with pseudo parameters, Refs and a function's
    .Arn. Anything else is a Failure, not a guess."""
    lam = c["lambda"]

    def sub_var(name):
        pseudo = {"AWS::Partition": "aws", "AWS::Region": e2e.REGION, "AWS::StackName": e2e.STACK,
                  "AWS::URLSuffix": "amazonaws.com"}
        if name in pseudo:
            return pseudo[name]
        if name.endswith(".Arn") and name[:-4] in phys:
            return lam.get_function_configuration(FunctionName=phys[name[:-4]])["FunctionArn"]
        if name in phys:
            return phys[name]
        raise e2e.Failure(f"cannot resolve ${{{name}}} in the HTTP API's Body")

    def resolve(node):
        if isinstance(node, list):
            return [r for r in (resolve(x) for x in node) if r is not _NOVALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (k, v), = node.items()
            if k == "Fn::If":
                if v[0] not in conditions:
                    raise e2e.Failure(f"cannot evaluate condition {v[0]} in the HTTP API's Body")
                return resolve(v[1])
            if k == "Ref":
                return _NOVALUE if v == "AWS::NoValue" else sub_var(v)
            if k == "Fn::Sub" and isinstance(v, str):
                return re.sub(r"\$\{([^}!]+)\}", lambda m: sub_var(m.group(1)), v)
            if k.startswith("Fn::"):
                raise e2e.Failure(f"cannot resolve {k} in the HTTP API's Body")
        return {k: r for k, r in ((k, resolve(v)) for k, v in node.items()) if r is not _NOVALUE}

    return resolve


def _route_authorization(e2e, body, op, key):
    """The AuthorizationType of a route, from its `security` in the Body:
    NONE without one, AWS_IAM for SAM's awsSigv4 scheme. Any other
    authorizer (JWT, Lambda) would need CreateAuthorizer: a Failure here,
    not a route left open."""
    schemes = body.get("components", {}).get("securitySchemes", {})
    names = [name for req in op.get("security") or [] for name in req]
    if not names:
        return "NONE"
    if all(schemes.get(n, {}).get("x-amazon-apigateway-authtype") == "awsSigv4" for n in names):
        return "AWS_IAM"
    raise e2e.Failure(f"HTTP API Body: {key} has authorizers {names} the e2e cannot create in MiniStack")


def import_routes(e2e, c, api_logical_id="OrderHttpApi"):
    """The routes of the HTTP API, as its Body (OpenAPI, written by the SAM
    transform) declares them: created through the API Gateway v2 API when
    MiniStack's CloudFormation left the API without any. Returns
    (api id, its local ApiEndpoint, the route keys it now has)."""
    cfn, v2 = c["cloudformation"], c["apigatewayv2"]
    resources = cfn.describe_stack_resources(StackName=e2e.STACK)["StackResources"]
    phys = {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources}
    api_id = phys[api_logical_id]
    api = v2.get_api(ApiId=api_id)
    routes = v2.get_routes(ApiId=api_id)["Items"]
    if not routes:
        tpl = cfn.get_template(StackName=e2e.STACK, TemplateStage="Processed")["TemplateBody"]
        if isinstance(tpl, str):
            tpl = json.loads(tpl)
        res = tpl["Resources"][api_logical_id]
        conditions = {res["Condition"]} if "Condition" in res else set()
        body = _resolver(e2e, c, phys, conditions)(res["Properties"]["Body"])
        created = []
        for path, ops in sorted(body.get("paths", {}).items()):
            for method, op in sorted(ops.items()):
                integ = op.get("x-amazon-apigateway-integration") if isinstance(op, dict) else None
                verb = {"x-amazon-apigateway-any-method": "ANY"}.get(method, method.upper())
                if not integ or verb not in ("ANY", "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"):
                    raise e2e.Failure(f"HTTP API Body: {method} {path} is not a route with an integration")
                iid = v2.create_integration(
                    ApiId=api_id, IntegrationType=integ["type"].upper(), IntegrationUri=integ["uri"],
                    IntegrationMethod=integ.get("httpMethod", "POST"),
                    PayloadFormatVersion=integ.get("payloadFormatVersion", "1.0"))["IntegrationId"]
                key = f"{verb} {path}"
                auth = _route_authorization(e2e, body, op, key)
                v2.create_route(ApiId=api_id, RouteKey=key, Target=f"integrations/{iid}",
                                AuthorizationType=auth)
                created.append(f"{key} (payload {integ.get('payloadFormatVersion')}, {auth})")
        e2e.say(f"     workaround (MiniStack limitation): its CloudFormation created {api_logical_id} and its "
                f"$default stage but ignored the OpenAPI Body the SAM transform writes its routes into; "
                f"created them from that Body via CreateIntegration/CreateRoute: {', '.join(created)}")
        routes = v2.get_routes(ApiId=api_id)["Items"]
    return api_id, api["ApiEndpoint"], sorted((r["RouteKey"], r.get("AuthorizationType", "NONE")) for r in routes)


def _json(b):
    try:
        return json.loads(b)
    except ValueError:
        return None


def run(e2e, c, out, plan, args, checks):
    """The API step; returns (order id, customer id) of the order it placed
    (None if none was). E2E_API_TAMPER=1 plays a client that makes a new
    Idempotency-Key for each attempt: the retry and the reordered repeat go
    out under keys of their own, so the checks of one order must fail."""
    say, step = e2e.say, e2e.step
    ddb, sqs, logs = c["dynamodb"], c["sqs"], c["logs"]
    table, itable = out["TableName"], out["IdempotencyTableName"]
    group = f"/aws/lambda/{e2e.STACK}-order-api"

    say("")
    step("order API: POST /orders with an Idempotency-Key through the stack's HTTP API")
    api_id, api_endpoint, routes = import_routes(e2e, c)
    checks.check(routes == [("GET /orders/{orderId}", "AWS_IAM"), ("POST /orders", "AWS_IAM")],
                 "order API: the HTTP API has exactly the template's two routes, POST /orders and "
                 "GET /orders/{orderId}, both with IAM authorization (AWS_IAM)", f"routes {routes}")
    gw = Gateway(args.endpoint, api_endpoint, Credentials("test", "test"), e2e.REGION)
    say(f"     OrderApiUrl {out.get('OrderApiUrl')} (AWS's form, not served locally); requests go to "
        f"{gw.base} with Host: {gw.host}")

    key = f"e2e-{uuid.uuid4()}"
    customer = f"cust-api-{key[-12:]}"
    order = {"customerId": customer, "amount": 150000, "currency": "INR"}
    sent = json.dumps(order, separators=(",", ":"))
    json_headers = {"Content-Type": "application/json"}

    tamper = os.environ.get("E2E_API_TAMPER") == "1"
    if tamper:
        say("     E2E_API_TAMPER=1: the retry and the reordered repeat are sent under new Idempotency-Keys")

    def post(text, idem=key):
        return gw.request("POST", "/orders", text, {**json_headers, **({"Idempotency-Key": idem} if idem else {})})

    # 1. First request, the client's retry, the same order written otherwise.
    s1, h1, b1 = post(sent)
    doc = _json(b1) or {}
    oid = doc.get("orderId")
    checks.check(s1 == 201 and isinstance(oid, str) and h1.get("Location") == f"/orders/{oid}"
                 and doc.get("status") == "PLACED" and doc.get("customerId") == customer
                 and h1.get("Idempotent-Replayed") is None,
                 "order API: POST /orders with a new Idempotency-Key -> 201, the order (PLACED) and "
                 "Location: /orders/{orderId}",
                 f"status {s1}, Location {h1.get('Location')}, body {b1[:300]!r}")
    if not (s1 == 201 and oid):
        return None
    say(f"     placed {oid} for {customer} with Idempotency-Key {key}")
    # The backfill (replay.py) sends this first request once more, with its
    # key, and expects the stored answer.
    plan.api_retry = (lambda: post(sent), b1)
    s2, h2, b2 = post(sent, idem=f"e2e-{uuid.uuid4()}" if tamper else key)
    checks.check(s2 == 201 and b2 == b1 and h2.get("Idempotent-Replayed") == "true"
                 and h2.get("Location") == h1.get("Location"),
                 "order API: the same POST again (the client's retry) -> the byte-identical 201 with "
                 "Idempotent-Replayed: true, no new order",
                 f"status {s2}, Idempotent-Replayed {h2.get('Idempotent-Replayed')}, Location {h2.get('Location')}, "
                 f"body identical: {b2 == b1} ({b2[:200]!r})")
    reordered = '{ "currency": "INR",\n  "amount": 150000, "customerId": "%s" }' % customer
    s3, h3, b3 = post(reordered, idem=f"e2e-{uuid.uuid4()}" if tamper else key)
    checks.check(s3 == 201 and b3 == b1 and h3.get("Idempotent-Replayed") == "true",
                 "order API: the same order with its JSON keys reordered and other whitespace, same key -> "
                 "the same replay (the key's fingerprint is of the canonical JSON)",
                 f"status {s3}, Idempotent-Replayed {h3.get('Idempotent-Replayed')}, body {b3[:200]!r}")

    # 2. The key with another body; no key; no route.
    s4, h4, b4 = post(json.dumps({**order, "amount": 1}, separators=(",", ":")))
    p4 = _json(b4) or {}
    checks.check(s4 == 422 and h4.get("Content-Type", "").startswith("application/problem+json")
                 and p4.get("type") == "urn:order-api:problem:idempotency-key-reused" and p4.get("status") == 422,
                 "order API: the same Idempotency-Key with another body -> 422 application/problem+json "
                 "(idempotency-key-reused)",
                 f"status {s4}, Content-Type {h4.get('Content-Type')}, body {b4[:300]!r}")
    s5, h5, b5 = post(sent, idem=None)
    p5 = _json(b5) or {}
    checks.check(s5 == 400 and h5.get("Content-Type", "").startswith("application/problem+json")
                 and p5.get("status") == 400,
                 "order API: POST /orders without an Idempotency-Key -> 400 application/problem+json",
                 f"status {s5}, Content-Type {h5.get('Content-Type')}, body {b5[:300]!r}")
    s6, _, b6 = gw.request("GET", "/orders")
    checks.check(s6 == 404 and _json(b6) == {"message": "Not Found"},
                 "order API: GET /orders (no such route) -> API Gateway's own 404, the function not invoked",
                 f"status {s6}, body {b6[:200]!r}")
    # Unsigned: refused by the gateway's IAM authorization, before the
    # function (the invocation count below proves it was not invoked).
    s6u, _, b6u = gw.request("POST", "/orders", sent, {**json_headers, "Idempotency-Key": f"e2e-{uuid.uuid4()}"},
                             signed=False)
    s6g, _, _ = gw.request("GET", f"/orders/{oid}", signed=False)
    checks.check(s6u == 403 and s6g == 403,
                 "order API: an unsigned POST /orders and GET /orders/{orderId} -> 403 from API Gateway's IAM "
                 "authorization, the function not invoked",
                 f"POST status {s6u} ({b6u[:200]!r}), GET status {s6g}")

    # 3. GET while PLACED.
    s7, _, b7 = gw.request("GET", f"/orders/{oid}")
    g7 = _json(b7) or {}
    checks.check(s7 == 200 and g7.get("status") == "PLACED" and g7.get("lastEventSeq") == 1
                 and g7.get("orderId") == oid and g7.get("customerId") == customer,
                 "order API: GET /orders/{orderId} -> 200, PLACED, lastEventSeq 1",
                 f"status {s7}, body {b7[:300]!r}")

    # 3b. Another IAM principal: the order is not its to read. Under
    # AUTH=true MiniStack evaluates execute-api:Invoke against the user's
    # identity policies, as AWS does: refused by the gateway until granted.
    iam = c["iam"]
    user = f"e2e-other-{key[-8:]}"
    account = iam.create_user(UserName=user)["User"]["Arn"].split(":")[4]
    ak = iam.create_access_key(UserName=user)["AccessKey"]
    other = gw.as_(Credentials(ak["AccessKeyId"], ak["SecretAccessKey"]))
    if args.auth == "true":
        forged = gw.as_(Credentials(ak["AccessKeyId"], "not-" + ak["SecretAccessKey"]))
        s7f, _, b7f = forged.request("GET", f"/orders/{oid}")
        checks.check(s7f == 403 and b"signature" in b7f.lower(),
                     "order API: GET /orders/{orderId} with a bad SigV4 signature -> 403 from API Gateway "
                     "(AUTH=true), the function not invoked",
                     f"status {s7f}, body {b7f[:300]!r}")
        s7d, _, b7d = other.request("GET", f"/orders/{oid}")
        checks.check(s7d == 403 and b"execute-api:Invoke" in b7d,
                     "order API: GET /orders/{orderId} signed by an IAM user no policy allows execute-api:Invoke -> "
                     "403 from API Gateway (AUTH=true), the function not invoked",
                     f"status {s7d}, body {b7d[:300]!r}")
    api_arn = f"arn:aws:execute-api:{e2e.REGION}:{account}:{api_id}/*"
    iam.put_user_policy(UserName=user, PolicyName="invoke-order-api", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": api_arn}]}))
    s7o, h7o, b7o = other.request("GET", f"/orders/{oid}")
    p7o = _json(b7o) or {}
    checks.check(s7o == 404 and p7o.get("type") == "urn:order-api:problem:not-found"
                 and customer.encode() not in b7o,
                 "order API: GET /orders/{orderId} signed by another IAM principal allowed execute-api:Invoke -> "
                 "404 problem+json, as for an unknown id (an order is shown only to the principal that placed it)",
                 f"status {s7o}, body {b7o[:300]!r}")

    # 4. The rest of its lifecycle arrives through SQS, as for every order.
    paid = e2e.event(oid, 2, "OrderPaid")
    step(f"order API: sending {oid}'s OrderPaid (seq 2, {paid['eventId']}) through the orders queue")
    e2e.send_bodies(sqs, out["QueueUrl"], [e2e.body(paid)], plan)
    plan.expect[oid] = ("PAID", 2, [f"{oid}-placed", paid["eventId"]])

    def is_paid():
        it = e2e.get_order(ddb, table, oid) or {}
        got = it.get("status", {}).get("S"), it.get("last_event_seq", {}).get("N")
        return got == ("PAID", "2"), f"{oid} is {got}"
    e2e.wait_until(f"{oid} to be PAID", args.drain_timeout, is_paid, interval=0.5)
    s8, _, b8 = gw.request("GET", f"/orders/{oid}")
    g8 = _json(b8) or {}
    checks.check(s8 == 200 and g8.get("status") == "PAID" and g8.get("lastEventSeq") == 2
                 and bool(g8.get("paidAt")),
                 "order API: after its OrderPaid went through SQS, the order is PAID in the table and "
                 "GET /orders/{orderId} shows PAID (lastEventSeq 2, paidAt)",
                 f"status {s8}, body {b8[:300]!r}")

    # 5. The tables.
    items = ddb.scan(TableName=table, ConsistentRead=True, FilterExpression="customer_id = :c",
                     ExpressionAttributeValues={":c": {"S": customer}})["Items"]
    hist = [[x.get("S") for x in it.get("history", {}).get("L", [])] for it in items]
    checks.check(len(items) == 1 and items[0]["order_id"]["S"] == oid
                 and hist[0] == [f"{oid}-placed", paid["eventId"]],
                 f"order API: the orders table holds exactly one order for {customer} (three POSTs with the key), "
                 "its history the API's OrderPlaced, then the OrderPaid",
                 f"{len(items)} item(s): {[(i['order_id']['S'], h) for i, h in zip(items, hist)]}")
    records = ddb.scan(TableName=itable, ConsistentRead=True)["Items"]

    def stored(r):
        # The library's layer keeps the response as one JSON text (`data`):
        # its status, the stored headers and the body.
        try:
            d = json.loads(r.get("data", {}).get("S", ""))
        except ValueError:
            return None
        headers = dict(d.get("headers") or [])
        order = json.loads(d.get("text") or "null") or {}
        return d.get("status"), order.get("orderId"), headers.get("location")

    got = [(r.get("status", {}).get("S"),) + (stored(r) or (None, None, None)) for r in records]
    checks.check(got == [("COMPLETED", 201, oid, f"/orders/{oid}")] and "lease_until" not in records[0],
                 "order API: the idempotency table holds one record, COMPLETED, with the 201 and the order "
                 "(the 422 and the 400 stored nothing)",
                 f"records (status, response status, order id, location): {got}")

    # 6. The API function's EMF lines: one per invocation (8; the gateway's
    # 404 and the unsigned 403s never reached it).
    invoked = 8
    lines = []

    def logged():
        lines[:] = e2e.function_log_lines(logs, group)
        n = sum(1 for line in lines if line.startswith("REPORT RequestId:"))
        return n >= invoked, f"{n} REPORT lines of {invoked}"
    try:
        e2e.wait_until(f"the API function's {invoked} invocations in {group}", 15, logged, interval=0.5)
    except e2e.Failure as e:
        say(f"        {e}")
    emf = [d for d in e2e.parse_json_lines(lines) if isinstance(d.get("_aws"), dict)
           and "CloudWatchMetrics" in d["_aws"]]
    n_inv = sum(1 for line in lines if line.startswith("REPORT RequestId:"))
    totals = Counter()
    for d in emf:
        for k in LABELS + ("ColdStart",):
            if isinstance(d.get(k), int):
                totals[k] += d[k]
    namespaces = {m.get("Namespace") for d in emf for m in d["_aws"]["CloudWatchMetrics"]}
    say(f"        order API EMF totals over {len(emf)} lines, {n_inv} invocations: "
        + ", ".join(f"{k}={totals[k]}" for k in LABELS + ("ColdStart",)))
    # As in e2e.py: MiniStack writes one REPORT line per invocation; the
    # function's own lines can be lost under load, and then the counts are
    # only upper bounds.
    complete = len(emf) == n_inv
    if not complete:
        say(f"        note: {len(emf)} EMF lines for {n_inv} invocations: MiniStack's log capture is lossy "
            "under load, the counts are checked as upper bounds")
    want = {"Created": 1, "Replayed": 2, "KeyReused": 1, "Invalid": 1, "Shown": 2, "NotFound": 1,
            "Forbidden": 0, "InProgress": 0, "Unavailable": 0, "Internal": 0}
    ok = all((totals[k] == v) if complete else (totals[k] <= v) for k, v in want.items())
    checks.check(emf and ok and namespaces == {"OrderApi"} and n_inv == invoked,
                 f"order API: {invoked} invocations; their EMF lines (namespace OrderApi) count Created 1, "
                 "Replayed 2, KeyReused 1, Invalid 1, Shown 2, NotFound 1 (the other principal's GET), and no "
                 "Forbidden, InProgress, Unavailable or Internal"
                 + ("" if complete else " (upper bounds: lossy capture)"),
                 f"totals {dict(totals)}, namespaces {namespaces}, {len(emf)} EMF lines, {n_inv} invocations")

    # 7. The processes MiniStack ran it in: the stack's tables, the role's credentials.
    if args.ministack_pid:
        envs = [e for _, e in e2e.bootstrap_environments(args.ministack_pid) if "IDEMPOTENCY_TABLE" in e]
        bad = [{k: e.get(k) for k in ("TABLE_NAME", "IDEMPOTENCY_TABLE", "METRICS_NAMESPACE")} for e in envs
               if (e.get("TABLE_NAME"), e.get("IDEMPOTENCY_TABLE"), e.get("METRICS_NAMESPACE"))
               != (table, itable, "OrderApi")]
        auth = args.auth != "true" or {e.get("AWS_ACCESS_KEY_ID", "")[:4] for e in envs} == {"ASIA"}
        checks.check(envs and not bad and auth,
                     f"order API: its {len(envs)} bootstrap process(es) run with TABLE_NAME and IDEMPOTENCY_TABLE "
                     "from the stack" + (" and its role's session credentials (AUTH=true)" if args.auth == "true"
                                         else ""),
                     f"{len(envs)} processes; mismatches {bad}; access key prefixes "
                     f"{sorted({e.get('AWS_ACCESS_KEY_ID', '')[:4] for e in envs})}")
    return oid, customer


def check_notified(order_id, customer, provider, checks):
    """After check_notifications: the API's customer got one notification,
    the confirmation of the one order (its PLACED, from the table's stream),
    and nothing else (the notifier sends nothing for PAID), although the
    order was POSTed three times. Counted by the customerId in the bodies
    the provider received, so a second order placed by a repeated POST would
    show, whatever its orderId."""
    got = [(k, (d or {}).get("orderId"), (d or {}).get("template")) for k, d in provider.bodies
           if (d or {}).get("customerId") == customer]
    want = [(f"order-{order_id}-order-confirmation", order_id, "order-confirmation")]
    checks.check(got == want,
                 f"order API: the provider received one notification for {customer}, the confirmation of "
                 f"{order_id}, and nothing else, although the POST was sent three times",
                 f"requests (Idempotency-Key, orderId, template): {got}")
