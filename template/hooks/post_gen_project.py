"""Writes what depends on the event list: src/machine.rs (the state machine),
events/ (sample SQS batches of your event types) and the library's source
in Cargo.toml. Reads `.template-spec.json`, which pre_gen_project.py left
after checking the answers, and removes it.
"""

import base64
import hashlib
import json
import os
import pathlib
import subprocess
import uuid
from collections import deque

PROJECT = {{ cookiecutter.project_name|tojson }}
ID_FIELD = {{ cookiecutter.__id_field|tojson }}
HTTP_API = {{ cookiecutter.include_http_api|tojson }} == "yes"
API_PATH = "/" + {{ cookiecutter.__plural|tojson }}
# The rest is Python that writes Rust, with braces of its own: not rendered.
{% raw %}

spec_path = pathlib.Path(".template-spec.json")
spec = json.loads(spec_path.read_text())
spec_path.unlink()
ENTITY = spec["entity"]
EVENTS = spec["events"]

# ---- src/machine.rs --------------------------------------------------------
def arms(value):
    return "\n".join(f"            Self::{e['name']} => {value(e)}," for e in EVENTS)


def str_slice(states):
    return "&[" + ", ".join(json.dumps(s) for s in states) + "]"


width = max(len(e["name"]) for e in EVENTS)
table = "\n".join(
    f"//! - {'`' + e['name'] + '`':<{width + 2}} {'|'.join(e['from']) or '(none)':>20} -> {e['to']}"
    for e in EVENTS
)
machine = f"""//! The {ENTITY}'s state machine, written by the template from the events
//! it was given (`events` below). An event applies when the stored status is
//! one of its `from` statuses (none: the event creates the {ENTITY}) and its
//! `seq` is the {ENTITY}'s next one; it then sets the status to `to`.
//!
//! To add an event type: a variant, its arm in `from` and `to`, its entry in
//! `ALL`, and a sample in events/.
//!
//! events: {spec['raw']}
//!
{table}

use serde::Deserialize;

/// The event types, as the `type` field of a message names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
pub enum EventType {{
{chr(10).join(f"    {e['name']}," for e in EVENTS)}
}}

impl EventType {{
    /// Every event type, as they were given.
    pub const ALL: &[EventType] = &[{", ".join(f"Self::{e['name']}" for e in EVENTS)}];

    /// The name, as in the message's `type` (and in logs).
    pub fn name(self) -> &'static str {{
        match self {{
{arms(lambda e: json.dumps(e['name']))}
        }}
    }}

    /// The statuses the event may follow; empty: it creates the {ENTITY}.
    pub fn from(self) -> &'static [&'static str] {{
        match self {{
{arms(lambda e: str_slice(e['from']))}
        }}
    }}

    /// The status the event sets.
    pub fn to(self) -> &'static str {{
        match self {{
{arms(lambda e: json.dumps(e['to']))}
        }}
    }}

    /// Does the event create the {ENTITY} (no status before it)?
    pub fn creates(self) -> bool {{
        self.from().is_empty()
    }}
}}
"""
pathlib.Path("src/machine.rs").write_text(machine)

# ---- events/: sample SQS batches -------------------------------------------
REGION, ACCOUNT = "us-east-1", "111122223333"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{PROJECT}-events"
BASE_MS = 1796551200000  # 2026-12-05T10:00:00Z
by_name = {e["name"]: e for e in EVENTS}
prefix = ENTITY.replace("_", "-")


def path_to(target_event):
    """The shortest run of events from a creating one to `target_event`."""
    queue = deque([e["name"]] for e in EVENTS if not e["from"])
    seen = set()
    while queue:
        run = queue.popleft()
        last = by_name[run[-1]]
        if run[-1] == target_event:
            return run
        if last["to"] in seen:
            continue
        seen.add(last["to"])
        for e in EVENTS:
            if last["to"] in e["from"]:
                queue.append(run + [e["name"]])
    raise SystemExit(f"no path to {target_event}")  # pre_gen checked reachability


def longest_walk():
    """A walk from the first creating event, each step the first legal event
    not used yet: the happy path of the demo."""
    run = [next(e for e in EVENTS if not e["from"])["name"]]
    while True:
        state = by_name[run[-1]]["to"]
        nxt = next((e["name"] for e in EVENTS if state in e["from"] and e["name"] not in run), None)
        if nxt is None:
            return run
        run.append(nxt)


def body(entity_id, seq, typ, event_id=None):
    return {
        "type": typ,
        "eventId": event_id or f"evt-{entity_id}-{seq}",
        ID_FIELD: entity_id,
        "seq": seq,
    }


def record(i, ev, name):
    text = ev if isinstance(ev, str) else json.dumps(ev, separators=(",", ":"))
    return {
        "messageId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}:{i}:{text}")),
        "receiptHandle": base64.b64encode(hashlib.sha256(f"{name}{i}".encode()).digest()).decode(),
        "body": text,
        "attributes": {
            "ApproximateReceiveCount": "1",
            "SentTimestamp": str(BASE_MS + i * 1000),
            "SenderId": "AROAEXAMPLEPRODUCER:producer",
            "ApproximateFirstReceiveTimestamp": str(BASE_MS + i * 1000 + 15),
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(text.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": REGION,
    }


happy = longest_walk()
first = f"{prefix}-1001"
second = f"{prefix}-1002"
creating = happy[0]
scenarios = []
scenarios.append(
    ("happy-path", f"every step of one {ENTITY}, in turn: Applied each",
     [body(first, i + 1, t) for i, t in enumerate(happy)])
)
scenarios.append(
    ("redelivered-duplicate", "the last event again: Duplicate (acknowledged, nothing written)",
     [body(first, len(happy), happy[-1])])
)
if len(happy) > 1:
    scenarios.append(
        ("stale-event", "the first event again after later ones: Stale (acknowledged)",
         [body(first, 1, creating)])
    )
follow = path_to(next(e["name"] for e in EVENTS if e["from"]))
scenarios.append(
    ("early-event", f"seq 2 of a new {ENTITY} before its seq 1: Early (returned to the queue)",
     [body(second, 2, follow[1])])
)
scenarios.append(
    ("early-event-redelivered", "its seq 1, then the early event again: Applied, Applied",
     [body(second, 1, follow[0]), body(second, 2, follow[1])])
)
# In its turn but not allowed from the status: a creating event can never
# follow, so one always exists; a transition is nicer where there is one.
final = by_name[happy[-1]]["to"]
illegal = next((e["name"] for e in EVENTS if e["from"] and final not in e["from"]), creating)
scenarios.append(
    ("illegal-transition", f"{illegal} in its turn after {final}: Rejected (acknowledged, its seq spent)",
     [body(first, len(happy) + 1, illegal)])
)
scenarios.append(
    ("conflicting-producer", "seq 1 again under another eventId: Conflict (returned, then to the DLQ)",
     [body(first, 1, creating, event_id=f"evt-{first}-other")])
)
scenarios.append(
    ("poison-message", "not JSON; an unknown type; seq 0: Invalid each (returned, then to the DLQ)",
     ["{not json", {**body(f"{prefix}-1003", 1, creating), "type": "Teleported"},
      body(f"{prefix}-1003", 0, creating)])
)
# Every other event type, each on a fresh entity by its shortest path.
others = [e["name"] for e in EVENTS if e["name"] not in happy]
if others:
    bodies = []
    for k, name in enumerate(others):
        eid = f"{prefix}-{2001 + k}"
        bodies += [body(eid, i + 1, t) for i, t in enumerate(path_to(name))]
    scenarios.append(
        ("other-paths", f"the other event types ({', '.join(others)}), each on a new {ENTITY}: Applied each",
         bodies)
    )

out = pathlib.Path("events")
out.mkdir(exist_ok=True)
manifest = []
for n, (name, what, bodies) in enumerate(scenarios, start=1):
    fname = f"{n:02d}-{name}.json"
    recs = [record(i, b, fname) for i, b in enumerate(bodies)]
    (out / fname).write_text(json.dumps({"Records": recs}, indent=2) + "\n")
    manifest.append({"file": fname, "what": what})
(out / "scenarios.json").write_text(json.dumps(manifest, indent=2) + "\n")

# ---- the HTTP API: its sample requests, or none of its files ---------------
def http_request(method, path, route_key, body=None, headers=None, path_parameters=None):
    """An API Gateway HTTP API request (payload 2.0) from an IAM-authorised
    caller, as the function receives it."""
    request_id = "JKJaXmPLvHcESHA-" + hashlib.sha256(f"{method}{path}".encode()).hexdigest()[:8]
    event = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": "",
        "headers": {
            "content-type": "application/json",
            "host": "abc123.execute-api.us-east-1.amazonaws.com",
            "user-agent": "awscurl/0.36",
            **(headers or {}),
        },
        "requestContext": {
            "accountId": ACCOUNT,
            "apiId": "abc123",
            "authorizer": {"iam": {
                "accessKey": "AKIAEXAMPLE", "accountId": ACCOUNT, "callerId": "AIDAEXAMPLE",
                "principalOrgId": None, "userArn": f"arn:aws:iam::{ACCOUNT}:user/example",
                "userId": "AIDAEXAMPLE",
            }},
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "abc123",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1",
                     "sourceIp": "192.0.2.1", "userAgent": "awscurl/0.36"},
            "requestId": request_id,
            "routeKey": route_key,
            "stage": "$default",
            "time": "05/Dec/2026:10:00:00 +0000",
            "timeEpoch": BASE_MS,
        },
        "isBase64Encoded": False,
    }
    if body is not None:
        event["body"] = body
    if path_parameters:
        event["pathParameters"] = path_parameters
    return event, request_id


if HTTP_API:
    created, request_id = http_request(
        "POST", API_PATH, f"POST {API_PATH}",
        body=json.dumps({"reference": "my-ref-1"}),
        headers={"idempotency-key": "8e03978e-40d5-43e8-bc93-6894a57f9324"},
    )
    (out / "api-create.json").write_text(json.dumps(created, indent=2) + "\n")
    # The id that request creates: the entity, then API Gateway's request id.
    new_id = f"{prefix}-{request_id}"
    shown, _ = http_request(
        "GET", f"{API_PATH}/{new_id}", f"GET {API_PATH}/{{{ID_FIELD}}}",
        path_parameters={ID_FIELD: new_id},
    )
    shown["headers"].pop("content-type")
    (out / "api-get.json").write_text(json.dumps(shown, indent=2) + "\n")
else:
    # Nothing of the API is left: no module, no binary, no test.
    for gone in ("src/api.rs", "src/bin/api.rs", "tests/api.rs"):
        pathlib.Path(gone).unlink()
    pathlib.Path("src/bin").rmdir()

# ---- Cargo.toml: where lambda-idempotency comes from until it is published --
lib = spec["library"]
if lib:
    source = f'path = "{lib}/crates/lambda-idempotency"'
    testing = f'path = "{lib}/crates/lambda-idempotency-testing"'
    where = f"the checkout this project was made from ({lib})"
else:
    source = f'git = "{spec["repository"]}"'
    testing = source
    where = "its git repository"
with open("Cargo.toml", "a") as f:
    f.write(
        f"""
# lambda-idempotency is not on crates.io yet: until it is, the two crates
# come from {where}. Once it is published, delete this
# section (README.md, "The library").
[patch.crates-io]
lambda-idempotency = {{ {source} }}
lambda-idempotency-testing = {{ {testing} }}
"""
    )

# Formatted as `cargo fmt` would (rustfmt itself: `cargo fmt` would resolve
# the dependencies first). Best effort: without rustfmt the code still builds.
try:
    sources = sorted(str(p) for d in ("src", "src/bin", "tests", "examples") for p in pathlib.Path(d).glob("*.rs"))
    subprocess.run(["rustfmt", "--edition", "2024", *sources], check=False, capture_output=True, timeout=120)
except (OSError, subprocess.SubprocessError):
    pass

print(f"\n{PROJECT}: written. Next:\n  cd {PROJECT}\n  make demo    # your events against a local DynamoDB\n  make test\n")
{% endraw %}
