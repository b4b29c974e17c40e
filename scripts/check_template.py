#!/usr/bin/env python3
"""Policy checks on the *translated* (plain CloudFormation) template.

Usage: check_template.py TRANSLATED_TEMPLATE_JSON [Key=Value ...]
       check_template.py --deploy-parameters

Prints one PASS/FAIL line per check and ends with a "template policy checks: N of M passed" line;
exits 1 when any check fails. Checks about one function (its event source,
queues, role, tables, alarms) run once per function in FUNCTIONS that is
deployed, each against that function's expectations; the others run once for
the stack. FUNCTIONS is the expectations of each function under functions/
(its folder's template_check.py; what belongs to the stack itself is
STACK_OWNS, here); one check asserts that they and the template's functions
are the same. Parameter references and conditions are resolved with the
template's defaults and the Key=Value arguments (and, for the FIFO checks,
with FifoQueue=true), so the checks judge what `sam deploy` with those values
would create: resources and outputs whose Condition is false are not in it.
`make validate` runs it on the plain translation and once for each
combination of the functions' Deploy* parameters (--deploy-parameters lists
them; on translations
whose Deploy* conditions translate_template.py --resolve-conditions resolved),
and on the translation of the Lambda Managed Instances variant
(scripts/managed_instances.py), where the "compute" check requires every
function on the CapacityProviderArn capacity provider.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent

NO_VALUE = object()  # result of {"Ref": "AWS::NoValue"}

ALLOWED_MANAGED_POLICY = re.compile(
    r"^arn:aws[a-z-]*:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole$"
)
REQUIRED_SQS_ACTIONS = {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
# The functions' own SQS call: the delay of a returned message
# (ChangeMessageVisibilityBatch needs this action), on their own queue only.
FUNCTION_SQS_ACTIONS = {"sqs:ChangeMessageVisibility"}
FOURTEEN_DAYS = 14 * 24 * 3600
# What Lambda needs to send a function's traces (Tracing): X-Ray has no
# resource-level permissions, so these two, and only these, may be granted
# on Resource "*".
XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


# What each function may touch: its tables (logical id -> (the only DynamoDB
# actions allowed on it, its hash key)), how its environment names them, the
# tuning variables it must set, and whether the FifoQueue parameter applies.
#
# What belongs to it: `deploy_param`, the parameter that switches it off
# ("false"; None: always deployed), and what exists only for it: `owns`
# (resources; SAM's resources generated from the function, named after it,
# count too), `outputs`, `owned_properties` ((resource, property) of a shared
# resource), `params` (parameters only it uses) and `action_prefixes` (IAM
# actions only it needs). Every resource of the stack is owned by exactly one
# function: a new resource goes into the `owns` of the function it serves.
#
# Its dashboard widgets: `emf_namespace`, the namespace its EMF metrics are
# charted under, and `emf_metrics`, the names it emits there (default
# EMF_METRICS). What `make deploy` says about it (scripts/check_deploy_params.py):
# `deploy_note` when it is deployed, `off_note` when its `deploy_param` is
# "false", each formatted with the deployment's parameter values.
#
# Each function under functions/ (the order consumer included) is expected
# in its own folder, functions/<name>/template_check.py (FUNCTION, its
# logical id, and EXPECT, these keys), so that removing a function's folder
# removes its expectations with it (docs/adapting.md).
#
# What belongs to the stack, not to one function: the orders table (the
# order consumer and the order API write it, the order notifier reads its
# stream, so it stays whichever of them is removed), its output, and the one
# dashboard, to which each deployed function adds its widgets. (Outputs are
# claimed only by the functions that own them; TableName is nobody's.)
STACK_OWNS = ["OrdersTable", "Dashboard", "CacheClientSecurityGroup", "CacheSecurityGroup", "IdempotencyCache"]
EXPECTATIONS = "template_check.py"


def load_functions(root: Path = ROOT) -> dict[str, dict[str, Any]]:
    """Logical id -> expectations: each functions/*/template_check.py's (by
    folder name), with `name` (the folder's) and `source_file` (where they
    are written) added."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "functions").glob(f"*/{EXPECTATIONS}")):
        where = path.relative_to(root).as_posix()
        spec = importlib.util.spec_from_file_location(f"template_check_{path.parent.name.replace('-', '_')}", path)
        if spec is None or spec.loader is None:
            raise SystemExit(f"check_template: cannot load {where}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn, expect = getattr(module, "FUNCTION", None), getattr(module, "EXPECT", None)
        if not isinstance(fn, str) or not isinstance(expect, dict):
            raise SystemExit(f"check_template: {where} must define FUNCTION (a logical id) and EXPECT (a dict)")
        if fn in out:
            raise SystemExit(f"check_template: {where} expects {fn}, which {out[fn]['source_file']} already does")
        out[fn] = {**expect, "name": path.parent.name, "source_file": where}
    return out


FUNCTIONS: dict[str, dict[str, Any]] = load_functions()

# Stream retries: by record age (-1 attempts), long enough to outlast a
# provider outage of several hours, and at most the stream's 24 h retention.
MIN_RECORD_AGE = 6 * 3600
STREAM_RETENTION = 24 * 3600
# IteratorAge alarm (milliseconds): must page well before records age out.
MAX_ITERATOR_AGE_THRESHOLD_MS = 3600 * 1000


def sqs_fed(m: "Model") -> bool:
    return m.expect.get("source", "sqs") == "sqs"


def stream_fed(m: "Model") -> bool:
    return m.expect.get("source") == "stream"


def http_fed(m: "Model") -> bool:
    return m.expect.get("source") == "http"


class CheckError(Exception):
    """A check's precondition is missing (e.g. no event source mapping)."""


# ---------------------------------------------------------------------------
# Minimal intrinsic-function evaluator (enough for this template)
# ---------------------------------------------------------------------------
class Evaluator:
    def __init__(self, template: dict[str, Any], overrides: dict[str, str] | None = None):
        self.template = template
        self.params: dict[str, str] = {}
        for name, spec in template.get("Parameters", {}).items():
            if "Default" in spec:
                self.params[name] = str(spec["Default"])
        self.params.update(overrides or {})
        self._conditions: dict[str, bool] = {}

    def condition(self, name: str) -> bool:
        if name not in self._conditions:
            spec = self.template.get("Conditions", {}).get(name)
            if spec is None:
                raise CheckError(f"unknown condition {name!r}")
            self._conditions[name] = bool(self.ev(spec))
        return self._conditions[name]

    def ev(self, node: Any) -> Any:
        if isinstance(node, list):
            out = [self.ev(x) for x in node]
            return [x for x in out if x is not NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1:
            (key, arg), = node.items()
            if key == "Ref":
                if arg == "AWS::NoValue":
                    return NO_VALUE
                if arg in self.params:
                    return self.params[arg]
                return {"Ref": arg}  # resource or pseudo parameter: keep symbolic
            if key == "Fn::If":
                cond, yes, no = arg
                return self.ev(yes if self.condition(cond) else no)
            if key == "Condition" and isinstance(arg, str):
                return self.condition(arg)
            if key == "Fn::Equals":
                a, b = (self.ev(x) for x in arg)
                return str(a) == str(b)
            if key == "Fn::Not":
                return not self.ev(arg[0])
            if key == "Fn::And":
                return all(self.ev(x) for x in arg)
            if key == "Fn::Or":
                return any(self.ev(x) for x in arg)
            if key == "Fn::Contains":
                values, needle = self.ev(arg[0]), self.ev(arg[1])
                return str(needle) in [str(v) for v in values]
            if key == "Fn::Join" and isinstance(arg, list) and len(arg) == 2:
                # As CloudFormation joins: AWS::NoValue items are gone (ev
                # drops them from lists); symbolic ones stay unresolved.
                sep, items = self.ev(arg[0]), self.ev(arg[1])
                if isinstance(sep, str) and isinstance(items, list) and all(isinstance(x, str) for x in items):
                    return sep.join(items)
                return {"Fn::Join": [sep, items]}
            if key == "Fn::Sub" and isinstance(arg, list) and len(arg) == 2:
                names = {k: self.ev(v) for k, v in arg[1].items()}
                if all(isinstance(v, str) for v in names.values()):
                    return re.sub(
                        r"\$\{([A-Za-z0-9_:]+)\}",
                        lambda m: names.get(m.group(1), self.params.get(m.group(1), m.group(0))),
                        arg[0],
                    )
            if key == "Fn::Sub" and isinstance(arg, str):
                return re.sub(
                    r"\$\{([A-Za-z0-9_:]+)\}",
                    lambda m: self.params.get(m.group(1), m.group(0)),
                    arg,
                )
        out = {k: self.ev(v) for k, v in node.items()}
        return {k: v for k, v in out.items() if v is not NO_VALUE}

    def number(self, node: Any, what: str) -> float:
        value = self.ev(node)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise CheckError(f"{what} does not resolve to a number: {value!r}") from None


def getatt_target(node: Any, attr: str = "Arn") -> str | None:
    """Logical id X of {"Fn::GetAtt": [X, attr]} (or "X.attr"), else None."""
    if isinstance(node, dict) and "Fn::GetAtt" in node:
        ga = node["Fn::GetAtt"]
        parts = ga.split(".", 1) if isinstance(ga, str) else list(ga)
        if len(parts) == 2 and parts[1] == attr:
            return parts[0]
    return None


def as_list(x: Any) -> list[Any]:
    if x is None:
        return []
    return x if isinstance(x, list) else [x]


# ---------------------------------------------------------------------------
# Template model
# ---------------------------------------------------------------------------
class Model:
    def __init__(self, template: dict[str, Any], fn: str | None = None, overrides: dict[str, str] | None = None):
        self.t = template
        self.overrides = dict(overrides or {})
        self.defaults = Evaluator(template, self.overrides)
        # What this combination deploys: resources and outputs whose
        # Condition is false are not created.
        self.res: dict[str, dict[str, Any]] = self.present(template.get("Resources", {}))
        self.outputs: dict[str, dict[str, Any]] = self.present(template.get("Outputs", {}))
        self.fn = fn
        self.expect: dict[str, Any] = FUNCTIONS.get(fn or "", {})

    def present(self, section: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in section.items() if "Condition" not in v or self.defaults.condition(v["Condition"])}

    def deployed(self, fn: str) -> bool:
        """Whether this combination's parameters deploy `fn`."""
        param = FUNCTIONS[fn].get("deploy_param")
        return param is None or self.defaults.params.get(param) == "true"

    def of_type(self, rtype: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.res.items() if v.get("Type") == rtype}

    def props(self, logical_id: str, ev: Evaluator | None = None) -> dict[str, Any]:
        raw = self.res[logical_id].get("Properties", {})
        return (ev or self.defaults).ev(raw)

    def function(self) -> str:
        if self.fn is None or self.fn not in self.of_type("AWS::Lambda::Function"):
            raise CheckError(f"no AWS::Lambda::Function {self.fn!r} in the template")
        return self.fn

    def esm(self) -> str:
        fn = self.function()
        esms = [
            k
            for k, v in self.of_type("AWS::Lambda::EventSourceMapping").items()
            if v.get("Properties", {}).get("FunctionName") in ({"Ref": fn}, fn)
        ]
        if len(esms) != 1:
            raise CheckError(f"expected one event source mapping for {fn}, found {esms}")
        return esms[0]

    def source_queue(self) -> str:
        q = getatt_target(self.res[self.esm()]["Properties"].get("EventSourceArn"))
        if q is None or self.res.get(q, {}).get("Type") != "AWS::SQS::Queue":
            raise CheckError("event source mapping is not fed by an AWS::SQS::Queue of this stack")
        return q

    def on_failure_queue(self) -> str:
        dest = self.props(self.esm()).get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        q = getatt_target(dest)
        if q is None or self.res.get(q, {}).get("Type") != "AWS::SQS::Queue":
            raise CheckError(f"no OnFailure destination queue of this stack: {dest!r}")
        return q

    def dlq(self) -> str:
        redrive = self.res[self.source_queue()].get("Properties", {}).get("RedrivePolicy")
        if not isinstance(redrive, dict):
            raise CheckError("source queue has no RedrivePolicy")
        d = getatt_target(redrive.get("deadLetterTargetArn"))
        if d is None or self.res.get(d, {}).get("Type") != "AWS::SQS::Queue":
            raise CheckError("RedrivePolicy.deadLetterTargetArn is not a queue of this stack")
        return d

    def tables(self) -> dict[str, tuple[set[str], str]]:
        expected = self.expect.get("tables", {})
        missing = [t for t in expected if self.res.get(t, {}).get("Type") != "AWS::DynamoDB::Table"]
        if missing:
            raise CheckError(f"tables {missing} missing")
        return expected

    def function_role(self) -> str:
        role = self.res[self.function()]["Properties"].get("Role")
        rid = getatt_target(role)
        if rid is None or self.res.get(rid, {}).get("Type") != "AWS::IAM::Role":
            raise CheckError(f"function role is not an AWS::IAM::Role of this stack: {role!r}")
        return rid

    def iam_statements(self) -> list[tuple[str, dict[str, Any]]]:
        """Every permission statement (not trust policies) in the template."""
        out: list[tuple[str, dict[str, Any]]] = []
        for lid, r in self.res.items():
            p = r.get("Properties", {})
            if r.get("Type") == "AWS::IAM::Role":
                for pol in as_list(p.get("Policies")):
                    for st in as_list(pol.get("PolicyDocument", {}).get("Statement")):
                        out.append((f"{lid}/{pol.get('PolicyName')}", st))
            elif r.get("Type") in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy"):
                for st in as_list(p.get("PolicyDocument", {}).get("Statement")):
                    out.append((lid, st))
        return out

    def role_statements(self, role: str) -> list[dict[str, Any]]:
        sts = [
            st
            for src, st in self.iam_statements()
            if src.split("/")[0] == role
        ]
        for lid, r in self.res.items():
            if r.get("Type") in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                roles = as_list(r.get("Properties", {}).get("Roles"))
                if {"Ref": role} in roles:
                    sts.extend(as_list(r["Properties"].get("PolicyDocument", {}).get("Statement")))
            if r.get("Type") == "AWS::IAM::RolePolicy" and r.get("Properties", {}).get("RoleName") == {"Ref": role}:
                sts.extend(as_list(r["Properties"].get("PolicyDocument", {}).get("Statement")))
        return [self.defaults.ev(st) for st in sts]


# ---------------------------------------------------------------------------
# Checks: each returns None (pass) or raises AssertionError(detail)
# ---------------------------------------------------------------------------
CHECKS: list[tuple[str, Callable[[Model], None], bool]] = []


def check(name: str, per_function: bool = True):
    def deco(fn: Callable[[Model], None]):
        CHECKS.append((name, fn, per_function))
        return fn

    return deco


@check("function runtime is provided.al2023 with handler bootstrap")
def _(m: Model) -> None:
    p = m.props(m.function())
    assert p.get("Runtime") == "provided.al2023", f"Runtime is {p.get('Runtime')!r}"
    assert p.get("Handler") == "bootstrap", f"Handler is {p.get('Handler')!r}"


# Lambda Managed Instances (the variant scripts/managed_instances.py writes):
# what each function's CapacityProviderConfig must name, the smallest
# function Managed Instances run (2 GB), and what SAM refuses beside it.
# Written out here, not imported from the generator, so that the check
# states the expectation instead of repeating the generator's choices.
MANAGED_INSTANCES_CONFIG = {
    "CapacityProviderArn": {"Ref": "CapacityProviderArn"},
    "PerExecutionEnvironmentMaxConcurrency": {"Ref": "PerExecutionEnvironmentMaxConcurrency"},
    "ExecutionEnvironmentMemoryGiBPerVCpu": {"Ref": "ExecutionEnvironmentMemoryGiBPerVCpu"},
}
MANAGED_INSTANCES_MIN_MEMORY_MB = 2048
MANAGED_INSTANCES_EXCLUSIVE = ("ProvisionedConcurrencyConfig", "VpcConfig")


@check("compute: Lambda's own fleet, or (Managed Instances variant) the CapacityProviderArn provider with every setting a parameter, at least 2 GB, republished on deploy")
def _(m: Model) -> None:
    fn = m.function()
    raw = m.res[fn].get("Properties", {})
    params = m.t.get("Parameters", {})
    cpc = raw.get("CapacityProviderConfig")
    if "CapacityProviderArn" not in params:
        assert cpc is None, f"CapacityProviderConfig {cpc!r} in a template without the CapacityProviderArn parameter"
        return
    lmi = (cpc or {}).get("LambdaManagedInstancesCapacityProviderConfig")
    assert lmi == MANAGED_INSTANCES_CONFIG, f"LambdaManagedInstancesCapacityProviderConfig is {lmi!r}"
    # Unqualified invokes run $LATEST.PUBLISHED: a deploy must republish it.
    assert raw.get("PublishToLatestPublished") is True, f"PublishToLatestPublished is {raw.get('PublishToLatestPublished')!r}"
    arn = params["CapacityProviderArn"]
    assert "Default" not in arn and arn.get("AllowedPattern"), f"CapacityProviderArn must be required and patterned: {arn!r}"
    mc = params.get("PerExecutionEnvironmentMaxConcurrency", {})
    assert 1 <= float(mc.get("MinValue", 0)) and float(mc.get("MaxValue", 1e9)) <= 1600, f"PerExecutionEnvironmentMaxConcurrency {mc!r}"
    ratio = params.get("ExecutionEnvironmentMemoryGiBPerVCpu", {})
    assert sorted(map(float, ratio.get("AllowedValues", []))) == [2.0, 4.0, 8.0], f"ExecutionEnvironmentMemoryGiBPerVCpu {ratio!r}"
    mem = raw.get("MemorySize")
    if isinstance(mem, dict) and "Ref" in mem:
        spec = params.get(mem["Ref"], {})
        low = float(spec.get("MinValue", 0))
        assert low >= MANAGED_INSTANCES_MIN_MEMORY_MB, f"MemorySize's parameter {mem['Ref']} allows {low:g} MB"
    assert m.defaults.number(mem, "MemorySize") >= MANAGED_INSTANCES_MIN_MEMORY_MB, f"MemorySize {m.defaults.ev(mem)!r}"
    clash = [p for p in MANAGED_INSTANCES_EXCLUSIVE if p in raw]
    assert not clash, f"sets {clash} on a capacity provider"


@check("event source mapping reports batch item failures (ReportBatchItemFailures)")
def _(m: Model) -> None:
    if http_fed(m):
        return  # no event source mapping; see the HTTP checks
    p = m.props(m.esm())
    types = as_list(p.get("FunctionResponseTypes"))
    assert "ReportBatchItemFailures" in types, f"FunctionResponseTypes is {types!r}"


@check("event source mapping has ScalingConfig.MaximumConcurrency in 2..1000 (SQS sources)")
def _(m: Model) -> None:
    if not sqs_fed(m):
        return  # ScalingConfig exists for SQS event sources only
    p = m.props(m.esm())
    mc = p.get("ScalingConfig", {}).get("MaximumConcurrency")
    assert mc is not None, "ScalingConfig.MaximumConcurrency missing"
    assert 2 <= float(mc) <= 1000, f"MaximumConcurrency default is {mc}"


@check("no IAM statement allows Action '*' or a wildcard action such as dynamodb:*", per_function=False)
def _(m: Model) -> None:
    bad = []
    for src, st in m.iam_statements():
        st = m.defaults.ev(st)
        if "NotAction" in st and st.get("Effect") == "Allow":
            bad.append(f"{src}: Allow with NotAction")
        for a in as_list(st.get("Action")):
            if isinstance(a, str) and "*" in a and st.get("Effect") == "Allow":
                bad.append(f"{src}: Action {a!r}")
    assert not bad, "; ".join(bad)


@check("no IAM statement allows Resource '*' (except exactly the X-Ray write actions, which have no resource ARN)", per_function=False)
def _(m: Model) -> None:
    bad = []
    for src, st in m.iam_statements():
        st = m.defaults.ev(st)
        if st.get("Effect") != "Allow":
            continue
        if "NotResource" in st:
            bad.append(f"{src}: Allow with NotResource")
        if set(as_list(st.get("Action"))) == XRAY_ACTIONS and as_list(st.get("Resource")) == ["*"]:
            continue
        for r in as_list(st.get("Resource")):
            if r == "*" or (isinstance(r, str) and r.endswith(":*:*")):
                bad.append(f"{src}: Resource {r!r}")
    assert not bad, "; ".join(bad)


@check("roles attach no managed policy except AWSLambdaBasicExecutionRole", per_function=False)
def _(m: Model) -> None:
    bad = []
    for lid, r in m.of_type("AWS::IAM::Role").items():
        for arn in as_list(m.props(lid).get("ManagedPolicyArns")):
            if not (isinstance(arn, str) and ALLOWED_MANAGED_POLICY.match(arn)):
                bad.append(f"{lid}: {arn!r}")
    assert not bad, "; ".join(bad)


@check("function's DynamoDB permissions are exactly the actions it uses, each on its table's ARN")
def _(m: Model) -> None:
    tables = m.tables()
    sts = [st for st in m.role_statements(m.function_role()) if st.get("Effect") == "Allow"]
    ddb = [st for st in sts if any(str(a).lower().startswith("dynamodb:") for a in as_list(st.get("Action")))]
    assert ddb, "no DynamoDB permission at all"
    streams: dict[str, set[str]] = m.expect.get("streams", {})
    granted: dict[str, set[str]] = {}
    for st in ddb:
        actions = set(as_list(st.get("Action")))
        for r in as_list(st.get("Resource")):
            t = getatt_target(r)
            # `!Sub "${T.Arn}/stream/*"` (the evaluator leaves resource
            # attributes in it as they are).
            sub = r.get("Fn::Sub") if isinstance(r, dict) else r
            s_ = next((x for x in streams if sub == f"${{{x}.Arn}}/stream/*"), None)
            if s_ is not None:
                granted.setdefault(f"{s_}.StreamArn", set()).update(actions)
                continue
            assert t in tables, f"DynamoDB actions {sorted(actions)} granted on {r!r}, not on one of {sorted(tables)}"
            granted.setdefault(t, set()).update(actions)
    for t, (want, _key) in tables.items():
        assert granted.get(t, set()) == want, f"{t}: grants {sorted(granted.get(t, set()))}, expected {sorted(want)}"
    for t, want in streams.items():
        got = granted.get(f"{t}.StreamArn", set())
        assert got == want, f"{t}'s streams (${{{t}.Arn}}/stream/*): grants {sorted(got)}, expected {sorted(want)}"


@check("function's SQS permissions are the event-source set plus ChangeMessageVisibility, on its own queue (stream: SendMessage to its failure destination)")
def _(m: Model) -> None:
    if http_fed(m):
        sqs = [a for st in m.role_statements(m.function_role()) for a in as_list(st.get("Action"))
               if str(a).lower().startswith("sqs:")]
        assert not sqs, f"SQS actions {sqs} on a function no queue feeds and that sends to none"
        return
    if not sqs_fed(m):
        dest = m.on_failure_queue()
        for st in m.role_statements(m.function_role()):
            actions = [a for a in as_list(st.get("Action")) if str(a).lower().startswith("sqs:")]
            if not actions or st.get("Effect") != "Allow":
                continue
            assert set(actions) == {"sqs:SendMessage"}, f"SQS actions {actions}"
            for r in as_list(st.get("Resource")):
                assert getatt_target(r) == dest, f"SendMessage on {r!r}, expected GetAtt {dest}.Arn"
        return
    queue = m.source_queue()
    sts = [st for st in m.role_statements(m.function_role()) if st.get("Effect") == "Allow"]
    granted: set[str] = set()
    for st in sts:
        actions = [a for a in as_list(st.get("Action")) if str(a).lower().startswith("sqs:")]
        if not actions:
            continue
        granted.update(actions)
        for r in as_list(st.get("Resource")):
            assert getatt_target(r) == queue, f"SQS actions {actions} granted on {r!r}, expected GetAtt {queue}.Arn"
    missing = REQUIRED_SQS_ACTIONS - granted
    assert not missing, f"missing {sorted(missing)} (the event source mapping cannot poll)"
    # The event source mapping needs exactly these three; the function's own
    # call (RetryBackoff) adds ChangeMessageVisibility, nothing more (no
    # Send, no Delete of its own).
    missing = FUNCTION_SQS_ACTIONS - granted
    assert not missing, f"missing {sorted(missing)} (RetryBackoff could not delay returned messages)"
    extra = granted - REQUIRED_SQS_ACTIONS - FUNCTION_SQS_ACTIONS
    assert not extra, f"SQS actions beyond the event source mapping's and the backoff's: {sorted(extra)}"


@check("DLQ MessageRetentionPeriod is 14 days (1209600 s) and longer than the source queue's")
def _(m: Model) -> None:
    if not sqs_fed(m):
        return  # a stream has no queue; see the stream checks
    got = m.props(m.dlq()).get("MessageRetentionPeriod")
    assert got is not None and float(got) == FOURTEEN_DAYS, f"MessageRetentionPeriod is {got!r}"
    # A moved message keeps its original enqueue time, so the DLQ must retain
    # longer than the source queue (SQS default 4 days).
    src = float(m.props(m.source_queue()).get("MessageRetentionPeriod", 345600))
    assert float(got) > src, f"DLQ retention {got} <= source queue retention {src:g}"


def max_body_bytes() -> int:
    """MAX_BODY_BYTES of the library's wire module: the largest body the consumers read."""
    # Searched for rather than read from one path, so that moving the module
    # does not break this check with a FileNotFoundError.
    found = None
    for path in sorted((ROOT / "crates").glob("*/src/**/*.rs")):
        found = re.search(r"pub const MAX_BODY_BYTES: usize = ([0-9_ *]+);", path.read_text())
        if found:
            break
    assert found, "MAX_BODY_BYTES not found under crates/*/src"
    value = 1
    for factor in found.group(1).replace("_", "").split("*"):
        value *= int(factor)
    return value


@check("source queue and DLQ MaximumMessageSize are SQS's 1 MiB, the largest body the function reads (MAX_BODY_BYTES)")
def _(m: Model) -> None:
    if not sqs_fed(m):
        return  # a stream has no queue; see the stream checks
    limit = max_body_bytes()
    assert limit == 1048576, f"MAX_BODY_BYTES is {limit}, not SQS's 1 MiB"
    for q in (m.source_queue(), m.dlq()):
        got = m.props(q).get("MaximumMessageSize")
        assert got is not None and int(got) == limit, f"{q}: MaximumMessageSize is {got!r}, not {limit}"


@check("RedrivePolicy maxReceiveCount >= 5 (default and parameter MinValue)")
def _(m: Model) -> None:
    if not sqs_fed(m):
        return  # a stream has no queue; see the stream checks
    raw = m.res[m.source_queue()]["Properties"]["RedrivePolicy"].get("maxReceiveCount")
    value = m.defaults.number(raw, "maxReceiveCount")
    assert value >= 5, f"maxReceiveCount default is {value:g}"
    if isinstance(raw, dict) and "Ref" in raw:
        spec = m.t.get("Parameters", {}).get(raw["Ref"], {})
        assert float(spec.get("MinValue", 0)) >= 5, f"parameter {raw['Ref']} allows MinValue {spec.get('MinValue')!r}"


@check("source VisibilityTimeout >= 6 * function Timeout + batching window (defaults)")
def _(m: Model) -> None:
    if not sqs_fed(m):
        return  # a stream has no queue; see the stream checks
    vt = m.defaults.number(m.res[m.source_queue()]["Properties"].get("VisibilityTimeout", 30), "VisibilityTimeout")
    timeout = m.defaults.number(m.res[m.function()]["Properties"].get("Timeout", 3), "Timeout")
    window = m.props(m.esm()).get("MaximumBatchingWindowInSeconds", 0)
    need = 6 * timeout + float(window)
    assert vt >= need, f"VisibilityTimeout {vt:g} < 6*{timeout:g} + {float(window):g} = {need:g}"


@check("server-side encryption on every SQS queue", per_function=False)
def _(m: Model) -> None:
    queues = m.of_type("AWS::SQS::Queue")
    # A stack may have no queue at all (the order API alone); one with an
    # SQS-fed function deployed has its queues, so none is a failure then.
    fed = [fn for fn, spec in FUNCTIONS.items() if spec.get("source", "sqs") == "sqs" and m.deployed(fn)]
    assert queues or not fed, f"no queues, yet {fed} are deployed"
    bad = [
        q
        for q in queues
        if not (str(m.props(q).get("SqsManagedSseEnabled")).lower() == "true" or m.props(q).get("KmsMasterKeyId"))
    ]
    assert not bad, f"no SqsManagedSseEnabled/KmsMasterKeyId on {bad}"


@check("tables are on-demand, PITR on, the expected hash key (S), deletion protection on by default")
def _(m: Model) -> None:
    for table, (_actions, key) in m.tables().items():
        p = m.props(table)
        assert p.get("BillingMode") == "PAY_PER_REQUEST", f"{table} BillingMode {p.get('BillingMode')!r}"
        pitr = p.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled")
        assert str(pitr).lower() == "true", f"{table} PointInTimeRecoveryEnabled {pitr!r}"
        assert p.get("KeySchema") == [{"AttributeName": key, "KeyType": "HASH"}], f"{table} KeySchema {p.get('KeySchema')!r}"
        assert {"AttributeName": key, "AttributeType": "S"} in p.get("AttributeDefinitions", []), f"{table}: {key} is not S"
        dp = p.get("DeletionProtectionEnabled")
        assert str(dp).lower() == "true", f"{table} DeletionProtectionEnabled default {dp!r}"


@check("function environment wires its table variables to its tables and sets the tuning variables")
def _(m: Model) -> None:
    env = m.props(m.function()).get("Environment", {}).get("Variables", {})
    for var, table in m.expect["env_tables"].items():
        assert env.get(var) == {"Ref": table}, f"{var} is {env.get(var)!r}, expected Ref {table}"
    missing = [k for k in m.expect["env_vars"] if k not in env]
    assert not missing, f"missing {missing}"


@check("alarms: DLQ (stream: failure destination; HTTP: none) visible messages > 0 and function Errors > 0")
def _(m: Model) -> None:
    fn = m.function()
    # An HTTP-fed function has no DLQ: a failed request is the caller's to retry.
    dlq = None if http_fed(m) else (m.dlq() if sqs_fed(m) else m.on_failure_queue())
    found = {"errors": False} if dlq is None else {"dlq": False, "errors": False}
    for lid in m.of_type("AWS::CloudWatch::Alarm"):
        p = m.props(lid)
        dims = {d["Name"]: d["Value"] for d in p.get("Dimensions", [])}
        gt0 = p.get("ComparisonOperator") == "GreaterThanThreshold" and float(p.get("Threshold", -1)) == 0
        if (
            p.get("MetricName") == "ApproximateNumberOfMessagesVisible"
            and getatt_target(dims.get("QueueName"), "QueueName") == dlq
            and gt0
        ):
            found["dlq"] = True
        if p.get("MetricName") == "Errors" and dims.get("FunctionName") == {"Ref": fn} and gt0:
            found["errors"] = True
    assert all(found.values()), f"missing alarm(s): {[k for k, v in found.items() if not v]}"


@check("alarms: the function's EMF outcome metrics that need a person (e.g. ledger Suspended) > 0")
def _(m: Model) -> None:
    wanted = m.expect.get("outcome_alarms", [])
    if not wanted:
        return
    fn = m.function()
    env = m.props(fn).get("Environment", {}).get("Variables", {})
    # The EMF namespace is the function's METRICS_NAMESPACE, its one
    # dimension FunctionName (the function's own name, i.e. Ref of it).
    namespace = env.get("METRICS_NAMESPACE")
    assert isinstance(namespace, str) and namespace, f"METRICS_NAMESPACE is {namespace!r}"
    found = set()
    for lid in m.of_type("AWS::CloudWatch::Alarm"):
        p = m.props(lid)
        dims = {d["Name"]: d["Value"] for d in p.get("Dimensions", [])}
        if (
            p.get("Namespace") == namespace
            and p.get("MetricName") in wanted
            and dims == {"FunctionName": {"Ref": fn}}
            and p.get("ComparisonOperator") == "GreaterThanThreshold"
            and float(p.get("Threshold", -1)) == 0
            and p.get("Statistic") in ("Sum", "Maximum")
        ):
            found.add(p["MetricName"])
    missing = [w for w in wanted if w not in found]
    assert not missing, f"no alarm on {namespace}/{missing} > 0 by FunctionName"


@check("alarms: source queue's oldest-message age, the function's Throttles, and (SQS) VisibilityFailed")
def _(m: Model) -> None:
    fn = m.function()
    found = {"throttles": False}
    if sqs_fed(m):
        found |= {"age": False, "visibility": False}
    for lid in m.of_type("AWS::CloudWatch::Alarm"):
        p = m.props(lid)
        dims = {d["Name"]: d["Value"] for d in p.get("Dimensions", [])}
        metric = p.get("MetricName")
        if metric == "Throttles" and dims.get("FunctionName") == {"Ref": fn} and p.get("Namespace") == "AWS/Lambda":
            found["throttles"] = True
        if sqs_fed(m) and metric == "ApproximateAgeOfOldestMessage" and getatt_target(
            dims.get("QueueName"), "QueueName"
        ) == m.source_queue():
            found["age"] = True
        if sqs_fed(m) and metric == "VisibilityFailed" and dims == {"FunctionName": {"Ref": fn}}:
            found["visibility"] = True
    assert all(found.values()), f"missing alarm(s): {[k for k, v in found.items() if not v]}"


@check("every alarm has a description and an entry in the operator's runbook (docs/operations.md)")
def _(m: Model) -> None:
    runbook = (ROOT / "docs" / "operations.md").read_text()
    missing = []
    for lid in m.of_type("AWS::CloudWatch::Alarm"):
        desc = m.props(lid).get("AlarmDescription")
        assert isinstance(desc, str) and len(desc) > 40, f"{lid}: AlarmDescription {desc!r}"
        if f"`{lid}`" not in runbook:
            missing.append(lid)
    assert not missing, f"alarms with no runbook entry in docs/operations.md: {missing}"


# What the functions emit (crates/lambda-idempotency/src/function.rs, the outcome enums' labels):
# the dashboard may chart only these in their namespaces.
EMF_METRICS = {
    "Applied", "Duplicate", "Stale", "Rejected", "Early", "Conflict", "Invalid", "Failed", "NotAttempted",
    "Suspended", "Sent", "AlreadySent", "NothingToSend", "AlreadyRejected", "Busy", "Unreadable", "AlreadyUnreadable",
    "BatchSize", "CacheHits", "CacheMisses", "ColdStart", "VisibilityChanged", "VisibilityFailed",
}
AWS_METRICS = {
    "AWS/Lambda": {"Errors", "Throttles", "Duration", "ConcurrentExecutions", "IteratorAge", "Invocations"},
    # HTTP APIs, by ApiId.
    "AWS/ApiGateway": {"Count", "4xx", "5xx", "Latency", "IntegrationLatency", "DataProcessed"},
    "AWS/SQS": {"ApproximateNumberOfMessagesVisible", "ApproximateAgeOfOldestMessage",
                "ApproximateNumberOfMessagesNotVisible"},
}


@check("dashboard: its body is JSON, charts exactly the deployed functions, and names only metrics that exist (EMF per namespace, AWS/Lambda, AWS/SQS, AWS/ApiGateway by ApiId)", per_function=False)
def _(m: Model) -> None:
    dashboards = list(m.of_type("AWS::CloudWatch::Dashboard"))
    if m.defaults.params.get("DeployDashboard") == "false":
        assert not dashboards, f"DeployDashboard=false, yet {dashboards}"
        return
    assert len(dashboards) == 1, f"dashboards: {dashboards}"
    raw = m.props(dashboards[0]).get("DashboardBody")
    assert isinstance(raw, str), f"DashboardBody does not resolve to a string: {str(raw)[:200]}"
    # Resource names stay ${X} after evaluation; any string parses the same.
    body = json.loads(re.sub(r"\$\{[A-Za-z0-9_:.]+\}", "x", raw))
    # Each function's namespace and what it emits there (its expectations'
    # emf_namespace and emf_metrics).
    namespaces = {spec["emf_namespace"]: set(spec.get("emf_metrics", EMF_METRICS))
                  for spec in FUNCTIONS.values() if "emf_namespace" in spec}
    charted = set()
    for widget in body["widgets"]:
        for line in widget["properties"]["metrics"]:
            ns, name = line[0], line[1]
            if ns in AWS_METRICS:
                assert name in AWS_METRICS[ns], f"{ns}/{name} is not a metric this dashboard should chart"
                if ns == "AWS/ApiGateway":
                    # HTTP APIs publish by ApiId (and ApiId, Stage).
                    assert line[2] == "ApiId", f"{ns}/{name} by {line[2]!r}, expected ApiId"
            else:
                assert ns in namespaces, f"namespace {ns!r}: no function's emf_namespace"
                assert name in namespaces[ns], f"{ns}/{name}: its function does not emit it"
        charted.update(str(x) for x in widget["properties"]["metrics"][0])
    titles = " ".join(w["properties"]["title"] for w in body["widgets"])
    for fn, spec in FUNCTIONS.items():
        label = spec["name"]
        if fn in m.res:
            assert label in titles, f"{fn} is deployed but has no widget"
        else:
            assert label not in titles, f"{fn} is not deployed but has widgets"


@check("FifoQueue=false: both queues are standard")
def _(m: Model) -> None:
    if not sqs_fed(m):
        return  # a stream has no queue; see the stream checks
    ev = Evaluator(m.t, {**m.overrides, "FifoQueue": "false"})
    for q in (m.source_queue(), m.dlq()):
        p = m.props(q, ev)
        assert "FifoQueue" not in p or str(p["FifoQueue"]).lower() == "false", f"{q} is FIFO"


@check("FifoQueue=true: queue AND DLQ are FIFO, named *.fifo, no content dedup, no batching window")
def _(m: Model) -> None:
    if not m.expect.get("fifo_param"):
        return  # this function's queues are always standard (checked above)
    ev = Evaluator(m.t, {**m.overrides, "FifoQueue": "true"})
    for q in (m.source_queue(), m.dlq()):
        p = m.props(q, ev)
        assert str(p.get("FifoQueue")).lower() == "true", f"{q} is not FIFO"
        name = p.get("QueueName")
        assert isinstance(name, str) and name.endswith(".fifo"), f"{q} QueueName {name!r} does not end in .fifo"
        assert str(p.get("ContentBasedDeduplication")).lower() == "false", f"{q} ContentBasedDeduplication"
    esm = m.props(m.esm(), ev)
    assert "MaximumBatchingWindowInSeconds" not in esm, "batching window set on a FIFO event source"


@check("stream source: NEW_AND_OLD_IMAGES stream, bisect on error, retries by record age (6..24 h), 14-day failure destination")
def _(m: Model) -> None:
    if not stream_fed(m):
        return
    for table in m.expect.get("streams", {}):
        view = m.props(table).get("StreamSpecification", {}).get("StreamViewType")
        assert view == "NEW_AND_OLD_IMAGES", f"{table} StreamViewType {view!r}"
    p = m.props(m.esm())
    assert str(p.get("BisectBatchOnFunctionError")).lower() == "true", "BisectBatchOnFunctionError is not true"
    # A count of attempts is spent in minutes when the provider is down
    # (every invocation fails); only the record's age may end the retries.
    retries = p.get("MaximumRetryAttempts")
    assert retries is not None and float(retries) == -1, (
        f"MaximumRetryAttempts {retries!r}: must be -1 (retry until MaximumRecordAgeInSeconds), "
        "or an outage exhausts it"
    )
    age = p.get("MaximumRecordAgeInSeconds")
    assert age is not None and MIN_RECORD_AGE <= float(age) <= STREAM_RETENTION, (
        f"MaximumRecordAgeInSeconds {age!r}: expected {MIN_RECORD_AGE}..{STREAM_RETENTION} "
        "(outlast an outage of hours, within the stream's 24 h retention)"
    )
    m.on_failure_queue()  # raises when there is none
    got = m.props(m.on_failure_queue()).get("MessageRetentionPeriod")
    assert got is not None and float(got) == FOURTEEN_DAYS, f"failure destination retention {got!r}"


@check("stream source: IteratorAge alarm (AWS/Lambda, Maximum) on the function, threshold under an hour")
def _(m: Model) -> None:
    if not stream_fed(m):
        return
    fn = m.function()
    seen = []
    for lid in m.of_type("AWS::CloudWatch::Alarm"):
        p = m.props(lid)
        dims = {d["Name"]: d["Value"] for d in p.get("Dimensions", [])}
        if p.get("MetricName") != "IteratorAge" or dims.get("FunctionName") != {"Ref": fn}:
            continue
        seen.append(lid)
        if (
            p.get("Namespace") == "AWS/Lambda"
            and p.get("Statistic") == "Maximum"
            and p.get("ComparisonOperator") == "GreaterThanThreshold"
            and 0 < float(p.get("Threshold", 0)) <= MAX_ITERATOR_AGE_THRESHOLD_MS
        ):
            return
    raise AssertionError(
        f"no IteratorAge alarm (Namespace AWS/Lambda, Statistic Maximum, GreaterThanThreshold, "
        f"0 < Threshold <= {MAX_ITERATOR_AGE_THRESHOLD_MS} ms) on {fn}; candidates {seen}"
    )


@check("stream source: alarm on the EMF Rejected metric > 0 (function's namespace, FunctionName dimension)")
def _(m: Model) -> None:
    metric = m.expect.get("rejected_metric")
    if metric is None:
        return
    fn = m.function()
    env = m.props(fn).get("Environment", {}).get("Variables", {})
    # crates/lambda-idempotency/src/metrics.rs: namespace METRICS_NAMESPACE, one dimension
    # FunctionName = AWS_LAMBDA_FUNCTION_NAME, i.e. the function's Ref.
    namespace = env.get("METRICS_NAMESPACE")
    assert isinstance(namespace, str), f"METRICS_NAMESPACE is {namespace!r}, not a literal"
    for lid in m.of_type("AWS::CloudWatch::Alarm"):
        p = m.props(lid)
        dims = {d["Name"]: d["Value"] for d in p.get("Dimensions", [])}
        if (
            p.get("Namespace") == namespace
            and p.get("MetricName") == metric
            and dims == {"FunctionName": {"Ref": fn}}
            and p.get("ComparisonOperator") == "GreaterThanThreshold"
            and float(p.get("Threshold", -1)) == 0
        ):
            return
    raise AssertionError(f"no alarm on {namespace}/{metric} (FunctionName = Ref {fn}) > 0")


@check("stream source: the webhook URL is read from SSM by name (String parameter, absolute name), never in the environment")
def _(m: Model) -> None:
    if "secret_parameter" not in m.expect:
        return
    var, param = m.expect["secret_parameter"]
    env = m.res[m.function()]["Properties"].get("Environment", {}).get("Variables", {})
    leaked = [v for v in m.expect.get("forbidden_env", []) if v in env]
    assert not leaked, f"{leaked} in the function's environment (the secret itself)"
    raw = env.get(var)
    assert raw == {"Ref": param}, f"{var} is {raw!r}, expected Ref {param}"
    spec = m.t.get("Parameters", {}).get(param, {})
    # AWS::SSM::Parameter::Value<...> would resolve the secret into the
    # environment (and DescribeStacks); the function must get the name.
    assert spec.get("Type") == "String", f"parameter {param} has type {spec.get('Type')!r}, expected String"
    default = spec.get("Default")
    assert default == "/order-consumer/notify-webhook-url", f"parameter {param} default {default!r}"
    pattern = spec.get("AllowedPattern")
    assert pattern, f"parameter {param} has no AllowedPattern"
    must_match = [default, "/a/b_c.d-e"]
    must_not = ["relative/name", "/a/*", "/", "", "/a b", "arn:aws:ssm:us-east-1:111122223333:parameter/a"]
    wrong = [n for n in must_match if not re.fullmatch(pattern, n)]
    wrong += [n for n in must_not if re.fullmatch(pattern, n)]
    assert not wrong, f"AllowedPattern {pattern!r} misjudges {wrong}"


@check("stream source: ssm:GetParameter on exactly the webhook URL parameter's ARN, no other SSM permission")
def _(m: Model) -> None:
    if "secret_parameter" not in m.expect:
        return
    _var, param = m.expect["secret_parameter"]
    name = m.defaults.params.get(param)
    want = f"arn:${{AWS::Partition}}:ssm:${{AWS::Region}}:${{AWS::AccountId}}:parameter{name}"
    granted: list[tuple[list[str], Any]] = []
    for st in m.role_statements(m.function_role()):
        actions = [a for a in as_list(st.get("Action")) if str(a).lower().startswith("ssm:")]
        if actions and st.get("Effect") == "Allow":
            granted.extend((actions, r) for r in as_list(st.get("Resource")))
    assert granted, "no ssm:GetParameter: the function cannot read its webhook URL"
    for actions, r in granted:
        assert actions == ["ssm:GetParameter"], f"SSM actions {actions} (only ssm:GetParameter is needed)"
        # The evaluator substitutes the parameter's default into the Sub.
        assert r == want, f"ssm:GetParameter on {r!r}, expected exactly {want!r}"


@check("JSON logs with Lambda's ApplicationLogLevel/SystemLogLevel parameters; no TRACE level offered", per_function=True)
def _(m: Model) -> None:
    lc = m.props(m.function()).get("LoggingConfig", {})
    assert lc.get("LogFormat") == "JSON", f"LogFormat {lc.get('LogFormat')!r}"
    assert lc.get("ApplicationLogLevel") == "INFO" and lc.get("SystemLogLevel") == "WARN", f"LoggingConfig {lc}"
    allowed = [str(a) for a in m.t.get("Parameters", {}).get("ApplicationLogLevel", {}).get("AllowedValues", [])]
    assert allowed and "TRACE" not in allowed, f"ApplicationLogLevel allows {allowed}"


@check("RustLog offers no trace level (the SDK logs whole requests, secrets included, at trace)", per_function=False)
def _(m: Model) -> None:
    spec = m.t.get("Parameters", {}).get("RustLog", {})
    allowed = spec.get("AllowedValues")
    assert allowed, "RustLog has no AllowedValues: any filter, trace included, can be deployed"
    bad = [v for v in allowed if "trace" in str(v).lower()]
    assert not bad, f"RustLog allows {bad}"
    assert spec.get("Default") in allowed, f"RustLog default {spec.get('Default')!r} not allowed"


@check("tracing: the function's TracingConfig is the Tracing parameter (Active/PassThrough, default Active); its role has exactly the X-Ray write actions, on \"*\"")
def _(m: Model) -> None:
    spec = m.t.get("Parameters", {}).get("Tracing", {})
    allowed = sorted(map(str, spec.get("AllowedValues", [])))
    assert allowed == ["Active", "PassThrough"] and spec.get("Default") == "Active", (
        f"parameter Tracing: AllowedValues {allowed}, Default {spec.get('Default')!r}"
    )
    mode = m.res[m.function()]["Properties"].get("TracingConfig", {}).get("Mode")
    assert mode == {"Ref": "Tracing"}, f"TracingConfig.Mode is {mode!r}, expected Ref Tracing"
    xray = []
    for st in m.role_statements(m.function_role()):
        acts = [a for a in as_list(st.get("Action")) if str(a).lower().startswith("xray:")]
        if acts and st.get("Effect") == "Allow":
            xray.append((set(acts), as_list(st.get("Resource"))))
    got = set().union(*(a for a, _ in xray)) if xray else set()
    assert got == XRAY_ACTIONS, f"X-Ray actions {sorted(got)}, expected exactly {sorted(XRAY_ACTIONS)}"
    for acts, res in xray:
        assert res == ["*"], f"X-Ray actions {sorted(acts)} on {res!r}: X-Ray accepts only Resource \"*\""


# ---------------------------------------------------------------------------
# HTTP-fed functions (the order API)
# ---------------------------------------------------------------------------
@check("HTTP source: the role grants only DynamoDB (above), its own log group's logs and X-Ray: no sqs:, ssm: or DynamoDB stream action")
def _(m: Model) -> None:
    if not http_fed(m):
        return
    stream_actions = {"dynamodb:describestream", "dynamodb:getrecords", "dynamodb:getshariterator",
                      "dynamodb:getsharditerator", "dynamodb:liststreams"}
    bad = []
    for st in m.role_statements(m.function_role()):
        if st.get("Effect") != "Allow":
            continue
        for a in as_list(st.get("Action")):
            low = str(a).lower()
            if low in stream_actions:
                bad.append(f"{a} (a stream action)")
            elif not low.startswith(("dynamodb:", "logs:", "xray:")):
                bad.append(str(a))
            elif low.startswith("logs:"):
                log_groups = [getatt_target(r) for r in as_list(st.get("Resource"))]
                want = m.props(m.function()).get("LoggingConfig", {}).get("LogGroup")
                if [{"Ref": g} for g in log_groups] != [want]:
                    bad.append(f"{a} on {st.get('Resource')!r}, not only its log group {want!r}")
    assert not bad, f"actions an HTTP-fed function does not need: {bad}"


def http_routes(m: Model) -> dict[tuple[str, str], dict[str, Any]]:
    """(METHOD, path) -> x-amazon-apigateway-integration of the function's
    HTTP API's OpenAPI body (SAM writes the routes there)."""
    api = m.expect["http_api"]
    if m.res.get(api, {}).get("Type") != "AWS::ApiGatewayV2::Api":
        raise CheckError(f"no AWS::ApiGatewayV2::Api {api}")
    paths = m.props(api).get("Body", {}).get("paths", {})
    out = {}
    for path, ops in paths.items():
        for method, op in ops.items():
            out[(method.upper(), path)] = op.get("x-amazon-apigateway-integration", {})
    return out


@check("HTTP source: exactly its routes on its HTTP API, each aws_proxy to the function with payload 2.0 and an InvokeFunction permission for that route only")
def _(m: Model) -> None:
    if not http_fed(m):
        return
    fn, api = m.function(), m.expect["http_api"]
    routes = http_routes(m)
    want = m.expect["routes"]
    assert set(routes) == want, f"routes {sorted(routes)}, expected {sorted(want)}"
    want_uri = f"arn:${{AWS::Partition}}:apigateway:${{AWS::Region}}:lambda:path/2015-03-31/functions/${{{fn}.Arn}}/invocations"
    for route, integ in routes.items():
        assert integ.get("type") == "aws_proxy", f"{route}: integration type {integ.get('type')!r}"
        assert str(integ.get("payloadFormatVersion")) == "2.0", f"{route}: payloadFormatVersion {integ.get('payloadFormatVersion')!r}"
        uri = integ.get("uri")
        uri = uri.get("Fn::Sub") if isinstance(uri, dict) else uri
        assert uri == want_uri, f"{route}: integration uri {uri!r}, expected the function {fn}"
    granted = set()
    for lid, r in m.of_type("AWS::Lambda::Permission").items():
        p = r.get("Properties", {})
        if p.get("FunctionName") != {"Ref": fn}:
            continue
        assert p.get("Principal") == "apigateway.amazonaws.com", f"{lid}: Principal {p.get('Principal')!r}"
        src = p.get("SourceArn", {}).get("Fn::Sub")
        assert isinstance(src, list) and src[1].get("__ApiId__") == {"Ref": api}, f"{lid}: SourceArn {src!r} is not on {api}"
        tail = src[0].split("${__Stage__}/", 1)[-1]
        method, _, path = tail.partition("/")
        granted.add((method, "/" + path))
    # SAM writes a path parameter as `*` in the permission's SourceArn.
    want_arns = {(meth, re.sub(r"\{[^}]+\}", "*", path)) for meth, path in want}
    assert granted == want_arns, f"InvokeFunction permissions for {sorted(granted)}, expected exactly {sorted(want_arns)}"


# The kind of principal the function reads (its API_AUTH) for each kind of
# authorizer an HTTP API route can have, as SAM writes it into the API's
# OpenAPI body (components.securitySchemes).
def scheme_kind(scheme: dict[str, Any]) -> str | None:
    if scheme.get("x-amazon-apigateway-authtype") == "awsSigv4":
        return "iam"
    authorizer = scheme.get("x-amazon-apigateway-authorizer") or {}
    return {"jwt": "jwt", "request": "lambda"}.get(str(authorizer.get("type", "")).lower())


@check("HTTP source: every route is behind an authorizer, of the kind the function's API_AUTH reads; API_AUTH never none")
def _(m: Model) -> None:
    if not http_fed(m):
        return
    api = m.expect["http_api"]
    body = m.props(api).get("Body", {})
    schemes = body.get("components", {}).get("securitySchemes", {})
    env = m.res[m.function()]["Properties"].get("Environment", {}).get("Variables", {})
    auth = env.get("API_AUTH")
    # A literal: the function must not learn its authorizer from a value
    # that could differ from the routes' (and `none` is the local loop's).
    assert auth in ("iam", "jwt", "lambda"), f"API_AUTH is {auth!r}, expected iam, jwt or lambda (never none, never unset)"
    bad = []
    for path, ops in body.get("paths", {}).items():
        for method, op in ops.items():
            security = op.get("security") if isinstance(op, dict) else None
            kinds = {scheme_kind(schemes.get(name, {})) for req in (security or []) for name in req}
            if not security or len(kinds) != 1 or kinds != {auth}:
                bad.append(f"{method.upper()} {path}: authorizers {security!r} ({sorted(map(str, kinds))}), expected one of kind {auth}")
    assert not bad, "; ".join(bad)


@check("HTTP source: function Timeout below API Gateway's 30 s integration limit (default and parameter MaxValue)")
def _(m: Model) -> None:
    if not http_fed(m):
        return
    limit = m.expect["max_timeout"]
    raw = m.res[m.function()]["Properties"].get("Timeout", 3)
    value = m.defaults.number(raw, "Timeout")
    assert value <= limit, f"Timeout default {value:g} s > {limit} s: API Gateway would answer before the function"
    if isinstance(raw, dict) and "Ref" in raw:
        spec = m.t.get("Parameters", {}).get(raw["Ref"], {})
        assert "MaxValue" in spec and float(spec["MaxValue"]) <= limit, (
            f"parameter {raw['Ref']} MaxValue {spec.get('MaxValue')!r} allows more than {limit} s"
        )


@check("HTTP source: alarm on the API's 5xx (AWS/ApiGateway by ApiId, alone or as a rate of Count)")
def _(m: Model) -> None:
    if not http_fed(m):
        return
    api = m.expect["http_api"]

    def by_api(metric: dict[str, Any], name: str) -> bool:
        dims = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
        return (metric.get("Namespace") == "AWS/ApiGateway" and metric.get("MetricName") == name
                and dims.get("ApiId") == {"Ref": api} and set(dims) <= {"ApiId", "Stage"})

    for lid in m.of_type("AWS::CloudWatch::Alarm"):
        p = m.props(lid)
        if by_api(p, "5xx") and p.get("ComparisonOperator") == "GreaterThanThreshold":
            return
        queries = p.get("Metrics", [])
        stats = {q["Id"]: q["MetricStat"]["Metric"] for q in queries if "MetricStat" in q}
        out = [q for q in queries if q.get("ReturnData", True) and "Expression" in q]
        errors = [i for i, mt in stats.items() if by_api(mt, "5xx")]
        count = [i for i, mt in stats.items() if by_api(mt, "Count")]
        if len(out) == 1 and errors and count and all(i in out[0]["Expression"] for i in errors[:1] + count[:1]):
            assert p.get("ComparisonOperator") == "GreaterThanThreshold" and 0 < float(p.get("Threshold", 0)) < 100, (
                f"{lid}: a 5xx rate alarm must fire above a threshold of 0..100 %"
            )
            return
    raise AssertionError(f"no alarm on AWS/ApiGateway 5xx by ApiId = Ref {api}")


@check("HTTP source: idempotency table with TTL on its expiry attribute; its lifetime variable from a 1..31536000 parameter")
def _(m: Model) -> None:
    if not http_fed(m):
        return
    table, attr = m.expect["ttl"]
    spec = m.props(table).get("TimeToLiveSpecification", {})
    assert spec.get("AttributeName") == attr and str(spec.get("Enabled")).lower() == "true", (
        f"{table} TimeToLiveSpecification {spec!r}, expected {attr} enabled"
    )
    var, param, lo, hi = m.expect["ttl_env"]
    env = m.res[m.function()]["Properties"].get("Environment", {}).get("Variables", {})
    assert env.get(var) == {"Ref": param}, f"{var} is {env.get(var)!r}, expected Ref {param}"
    p = m.t.get("Parameters", {}).get(param, {})
    got = (p.get("Type"), float(p.get("MinValue", "nan")), float(p.get("MaxValue", "nan")))
    assert got == ("Number", lo, hi), f"parameter {param}: Type/MinValue/MaxValue {got}, expected Number {lo}..{hi} (what the function accepts)"
    assert lo <= float(p.get("Default", 0)) <= hi, f"parameter {param} Default {p.get('Default')!r}"


@check("each switchable function's resources and outputs carry its Deploy* condition (where it is not resolved yet)", per_function=False)
def _(m: Model) -> None:
    conditions = m.t.get("Conditions", {})
    bad = []
    for fn, spec in FUNCTIONS.items():
        param = spec.get("deploy_param")
        if param is None:
            continue
        want = [c for c, body in conditions.items() if body == {"Fn::Equals": [{"Ref": param}, "true"]}]
        if not want:
            continue  # resolved (translate_template.py --resolve-conditions): checked by presence instead
        res, outs = owned(m, fn)
        for section, names in (("Resources", res), ("Outputs", outs)):
            for lid in sorted(names):
                got = m.t[section][lid].get("Condition")
                if got not in want:
                    bad.append(f"{section}/{lid}: Condition {got!r}, expected {want[0]}")
    assert not bad, "; ".join(bad)


def rules_pass(m: Model, overrides: dict[str, str]) -> bool:
    ev = Evaluator(m.t, overrides)
    for rule in m.t.get("Rules", {}).values():
        if "RuleCondition" in rule and not ev.ev(rule["RuleCondition"]):
            continue
        if not all(ev.ev(a["Assert"]) for a in rule.get("Assertions", [])):
            return False
    return True


@check("Rules: BatchSize > 10 needs a batching window; FIFO needs BatchSize <= 10 and no window", per_function=False)
def _(m: Model) -> None:
    cases = [
        ({}, True),
        ({"BatchSize": "100", "MaximumBatchingWindowInSeconds": "0"}, False),
        ({"BatchSize": "100", "MaximumBatchingWindowInSeconds": "1"}, True),
        ({"FifoQueue": "true"}, True),
        ({"FifoQueue": "true", "BatchSize": "11", "MaximumBatchingWindowInSeconds": "1"}, False),
        ({"FifoQueue": "true", "MaximumBatchingWindowInSeconds": "5"}, False),
    ]
    wrong = [(o, want) for o, want in cases if rules_pass(m, o) != want]
    assert not wrong, "; ".join(f"{o} should {'pass' if w else 'be rejected'}" for o, w in wrong)


@check("DeadlineMarginMs default leaves at least half of FunctionTimeout for work", per_function=False)
def _(m: Model) -> None:
    params = m.t.get("Parameters", {})
    margin = float(params["DeadlineMarginMs"]["Default"])
    timeout = float(params["FunctionTimeout"]["Default"])
    assert margin * 2 <= timeout * 1000, f"DeadlineMarginMs {margin} vs FunctionTimeout {timeout} s"


# ---------------------------------------------------------------------------
# Which functions are deployed (DeployPaymentLedger, DeployOrderNotifier)
# ---------------------------------------------------------------------------
PSEUDO_PARAMETERS = {
    "AWS::AccountId", "AWS::NoValue", "AWS::NotificationARNs", "AWS::Partition", "AWS::Region",
    "AWS::StackId", "AWS::StackName", "AWS::URLSuffix",
}


def references(node: Any, ev: Evaluator, where: str = ""):
    """(kind, name, where) for every Ref, GetAtt, Sub variable and condition
    name in `node`, following only the Fn::If branches `ev` chooses."""
    if isinstance(node, list):
        for i, x in enumerate(node):
            yield from references(x, ev, f"{where}/{i}")
        return
    if not isinstance(node, dict):
        return
    if len(node) == 1:
        (key, arg), = node.items()
        if key == "Ref" and isinstance(arg, str):
            yield "Ref", arg, where
            return
        if key == "Fn::GetAtt":
            parts = arg.split(".", 1) if isinstance(arg, str) else list(arg)
            yield "GetAtt", str(parts[0]), where
            return
        if key == "Fn::If":
            cond, yes, no = arg
            yield "Condition", cond, where
            if cond in ev.template.get("Conditions", {}):
                yield from references(yes if ev.condition(cond) else no, ev, f"{where}/Fn::If")
            return
        if key == "Fn::Sub":
            text, local = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
            for var in re.findall(r"\$\{([^}!][^}]*)\}", text):
                name = var.split(".", 1)[0]
                if name not in local:
                    yield ("GetAtt" if "." in var and not var.startswith("AWS::") else "Ref"), name, where
            yield from references(local, ev, f"{where}/Fn::Sub")
            return
    for k, v in node.items():
        yield from references(v, ev, f"{where}/{k}")


def stack_references(m: Model):
    """References made by what this combination deploys (resources and
    outputs; not Metadata), as (kind, name, where)."""
    for section, items in (("Resources", m.res), ("Outputs", m.outputs)):
        for lid, body in items.items():
            if "Condition" in body:
                yield "Condition", body["Condition"], f"{section}/{lid}/Condition"
            for dep in as_list(body.get("DependsOn")):
                yield "DependsOn", dep, f"{section}/{lid}/DependsOn"
            for key in ("Properties", "Value", "Export"):
                if key in body:
                    yield from references(body[key], m.defaults, f"{section}/{lid}/{key}")


def owned(m: Model, fn: str) -> tuple[set[str], set[str]]:
    """(resources, outputs) of `fn` this combination would create: its `owns`
    and `outputs`, and SAM's resources generated from it (named after it)."""
    spec = FUNCTIONS[fn]
    res = {lid for lid in m.res if lid in spec.get("owns", []) or lid.startswith(fn)}
    outs = {o for o in m.outputs if o in spec.get("outputs", [])}
    return res, outs


def combination(m: Model) -> str:
    return " ".join(
        f"{spec['deploy_param']}={m.defaults.params.get(spec['deploy_param'])}"
        for spec in FUNCTIONS.values()
        if spec.get("deploy_param")
    )


@check("Deploy* parameters: \"true\"/\"false\" Strings defaulting to \"true\"; every parameter in exactly one ParameterGroup", per_function=False)
def _(m: Model) -> None:
    params = m.t.get("Parameters", {})
    for fn, spec in FUNCTIONS.items():
        name = spec.get("deploy_param")
        if name is None:
            continue
        p = params.get(name)
        assert p is not None, f"no parameter {name} (switches {fn})"
        assert p.get("Type") == "String", f"{name} Type {p.get('Type')!r}"
        assert sorted(map(str, p.get("AllowedValues", []))) == ["false", "true"], f"{name} AllowedValues {p.get('AllowedValues')!r}"
        assert str(p.get("Default")) == "true", f"{name} Default {p.get('Default')!r}"
        value = m.defaults.params.get(name)
        assert value in ("true", "false"), f"{name}={value!r} in this run: not an allowed value"
    groups = m.t.get("Metadata", {}).get("AWS::CloudFormation::Interface", {}).get("ParameterGroups", [])
    listed = [p for g in groups for p in g.get("Parameters", [])]
    missing = sorted(set(params) - set(listed))
    unknown = sorted(set(listed) - set(params))
    twice = sorted({p for p in listed if listed.count(p) > 1})
    assert not (missing or unknown or twice), (
        f"Metadata AWS::CloudFormation::Interface ParameterGroups: not listed {missing}, "
        f"not parameters {unknown}, listed twice {twice}"
    )


@check("every function in the template has expectations (scripts/check_template.py, functions/*/template_check.py), and every expectation's function and Deploy* parameter are in the template", per_function=False)
def _(m: Model) -> None:
    # Without this a function with no expectations would go unchecked
    # (the per-function checks run for the expected ones), and a
    # half-removed function would show only as the other checks' symptoms.
    params = m.t.get("Parameters", {})
    bad = [
        f"{lid}: a function no expectations name (give its folder a {EXPECTATIONS} naming it, "
        f"or remove it from the template)"
        for lid in sorted(set(m.of_type("AWS::Lambda::Function")) | set(m.of_type("AWS::Serverless::Function")))
        if lid not in FUNCTIONS
    ]
    for fn, spec in FUNCTIONS.items():
        param = spec.get("deploy_param")
        if param is not None and param not in params:
            bad.append(f"{spec['source_file']} expects {fn}, switched by {param}, but the template has no "
                       f"parameter {param} (remove the folder with the function's resources)")
        elif m.deployed(fn) and fn not in m.res:
            bad.append(f"{spec['source_file']} expects {fn}, but the template has no such resource")
    assert not bad, "; ".join(bad)


@check("each function's resources and outputs exist exactly when it is deployed; every resource belongs to one function", per_function=False)
def _(m: Model) -> None:
    bad = []
    # The stack's own resources (STACK_OWNS), whichever functions are deployed.
    claimed: dict[str, str] = {lid: "the stack" for lid in STACK_OWNS if lid in m.res}
    for fn, spec in FUNCTIONS.items():
        res, outs = owned(m, fn)
        for lid in res:
            if lid in claimed:
                bad.append(f"{lid} is owned by {claimed[lid]} and {fn}")
            claimed[lid] = fn
        props = [(r, p) for r, p in spec.get("owned_properties", []) if p in m.res.get(r, {}).get("Properties", {})
                 and m.props(r).get(p) is not None]
        if m.deployed(fn):
            lost = sorted(set(spec.get("owns", [])) - res)
            lost_out = sorted(set(spec.get("outputs", [])) - outs)
            lost_prop = sorted(set(map(tuple, spec.get("owned_properties", []))) - set(props))
            if lost or lost_out or lost_prop:
                bad.append(f"{fn} is deployed but {lost + lost_out + [f'{r}.{p}' for r, p in lost_prop]} are not")
        else:
            left = sorted(res) + sorted(outs) + [f"{r}.{p}" for r, p in props]
            if left:
                bad.append(f"{fn} is off ({spec['deploy_param']}=false) but {left} would still be created")
    unowned = sorted(set(m.res) - set(claimed))
    if unowned:
        bad.append(f"resources owned by no function in FUNCTIONS: {unowned}")
    assert not bad, f"[{combination(m)}] " + "; ".join(bad)


@check("no Ref, GetAtt, Sub, DependsOn or condition names a resource, parameter or condition that is not in the stack", per_function=False)
def _(m: Model) -> None:
    params = set(m.t.get("Parameters", {}))
    conditions = set(m.t.get("Conditions", {}))
    bad = []
    for kind, name, where in stack_references(m):
        ok = {
            "Ref": name in params or name in m.res or name in PSEUDO_PARAMETERS,
            "GetAtt": name in m.res,
            "DependsOn": name in m.res,
            "Condition": name in conditions,
        }[kind]
        if not ok:
            bad.append(f"{where}: {kind} {name}")
    assert not bad, f"[{combination(m)}] dangling: " + "; ".join(bad)


@check("a function that is off leaves its parameters unreferenced and its IAM actions ungranted (notifier off: no SSM parameter)", per_function=False)
def _(m: Model) -> None:
    bad = []
    used = {name for kind, name, _ in stack_references(m) if kind == "Ref"}
    for fn, spec in FUNCTIONS.items():
        if m.deployed(fn):
            continue
        refd = sorted(set(spec.get("params", [])) & used)
        if refd:
            bad.append(f"{fn} is off but {refd} are referenced")
        for src, st in m.iam_statements():
            acts = [a for a in as_list(m.defaults.ev(st).get("Action"))
                    if any(str(a).lower().startswith(p) for p in spec.get("action_prefixes", []))]
            if acts:
                bad.append(f"{fn} is off but {src} grants {acts}")
    assert not bad, f"[{combination(m)}] " + "; ".join(bad)


@check("the optional Valkey cache: off by default; with ValkeyCache=true, reached only from CacheClientSecurityGroup on 6379-6380, in the given subnets, its URL rediss://", per_function=False)
def _(m: Model) -> None:
    params = m.t.get("Parameters", {})
    assert str(params.get("ValkeyCache", {}).get("Default")) == "false", "ValkeyCache must default to false (a cache is billed while it exists)"
    if not m.defaults.condition("HasValkeyCache"):
        left = sorted({"CacheClientSecurityGroup", "CacheSecurityGroup", "IdempotencyCache"} & set(m.res))
        assert not left, f"ValkeyCache=false, yet {left}"
        return
    ingress = as_list(m.props("CacheSecurityGroup").get("SecurityGroupIngress"))
    assert ingress, "the cache's security group admits nothing"
    for rule in ingress:
        rule = m.defaults.ev(rule)
        assert "CidrIp" not in rule and "CidrIpv6" not in rule, f"the cache admits an address range: {rule}"
        assert rule.get("SourceSecurityGroupId") == {"Ref": "CacheClientSecurityGroup"}, f"the cache admits {rule}"
        assert (str(rule.get("IpProtocol")), int(rule.get("FromPort")), int(rule.get("ToPort"))) == ("tcp", 6379, 6380), f"the cache's ports: {rule}"
    cache = m.props("IdempotencyCache")
    assert cache.get("Engine") == "valkey", f"engine {cache.get('Engine')!r}"
    assert cache.get("SecurityGroupIds") == [{"Ref": "CacheSecurityGroup"}], f"the cache's groups: {cache.get('SecurityGroupIds')}"
    given = m.defaults.ev({"Ref": "CacheSubnetIds"})
    assert given and cache.get("SubnetIds") == given, f"the cache's subnets: {cache.get('SubnetIds')}, not CacheSubnetIds"
    url = m.t.get("Outputs", {}).get("ValkeyCacheUrl", {}).get("Value", {})
    assert str(url.get("Fn::Sub", "")).startswith("rediss://"), f"ValkeyCacheUrl {url}: ElastiCache Serverless speaks TLS only"


def main(argv: list[str]) -> int:
    if argv[1:] == ["--deploy-parameters"]:
        # For scripts/validate-template.sh and scripts/test_deploy.sh: the
        # switchable functions, one "Deploy* parameter, name" per line.
        for spec in FUNCTIONS.values():
            if spec.get("deploy_param"):
                print(spec["deploy_param"], spec["name"])
        return 0
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as fh:
        template = json.load(fh)
    overrides: dict[str, str] = {}
    for kv in argv[2:]:
        key, sep, value = kv.partition("=")
        if not sep or key not in template.get("Parameters", {}):
            print(f"check_template: not Key=Value of a template parameter: {kv!r}", file=sys.stderr)
            return 2
        overrides[key] = value
    stack = Model(template, overrides=overrides)
    runs: list[tuple[str, Callable[[Model], None], Model]] = []
    for name, fn, per_function in CHECKS:
        if per_function:
            runs.extend(
                (f"{name} [{f}]", fn, Model(template, f, overrides)) for f in FUNCTIONS if stack.deployed(f)
            )
        else:
            runs.append((name, fn, stack))
    passed = failed = 0
    for name, fn, model in runs:
        try:
            fn(model)
        except (AssertionError, CheckError) as exc:
            failed += 1
            print(f"FAIL: {name}: {exc}")
        except Exception as exc:  # a broken template shape is a failure, not a crash
            failed += 1
            print(f"FAIL: {name}: {type(exc).__name__}: {exc}")
        else:
            passed += 1
            print(f"PASS: {name}")
    label = f" ({combination(stack)})" if overrides else ""
    print(f"template policy checks{label}: {passed} of {passed + failed} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
