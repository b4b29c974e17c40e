#!/usr/bin/env python3
"""Translate a SAM template to plain CloudFormation JSON, offline.

Usage: translate_template.py SAM_TEMPLATE OUTPUT_JSON [--resolve-conditions] [Key=Value ...]

Key=Value: parameter values for the transform (as `sam deploy
--parameter-overrides` passes them; the others keep their defaults).

--resolve-conditions: write the template CloudFormation would deploy for
those values, as far as the given parameters decide it: every condition whose
value depends only on given parameters is evaluated; resources and outputs
under a false one are removed, their `Condition:` dropped under a true one,
`Fn::If` on it replaced by the chosen branch (`AWS::NoValue` removing the
property or list item), and the condition deleted. Conditions on other
parameters (IsFifo, HasAlarmTopic) stay as they are. `make validate` lints and
checks one such translation per combination of the Deploy* parameters.

This is what `sam validate` does internally (samcli/lib/translate/
sam_template_validator.py), minus every AWS call:

* The managed-policy map is the one samtranslator bundles
  (samtranslator/internal/data/aws_managed_policies.json) instead of one
  fetched with iam:ListPolicies. It is only consulted when a template names a
  managed policy by name in `Policies`; this template does not.
* The boto3 session only carries a region (for AWS::Region / AWS::Partition
  defaults); no credentials are used.
* Local CodeUri paths are replaced by a placeholder S3 URI, as `sam validate`
  does, because the transform only accepts S3 locations.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

import boto3
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator
from samcli.yamlhelper import yaml_parse

PLACEHOLDER_CODE_URI = "s3://placeholder-bucket/placeholder-key.zip"
REGION = "us-east-1"


def bundled_managed_policy_map() -> dict[str, str]:
    import samtranslator

    data = Path(samtranslator.__file__).parent / "internal" / "data" / "aws_managed_policies.json"
    try:
        by_partition = json.loads(data.read_text())
    except FileNotFoundError:  # older/newer translator layout: fall back to empty
        return {}
    return dict(by_partition.get("aws", {}))


def replace_local_code_uris(template: dict[str, Any]) -> None:
    for resource in template.get("Resources", {}).values():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource.setdefault("Properties", {})
        code_uri = props.get("CodeUri")
        if code_uri is None or (isinstance(code_uri, str) and not code_uri.startswith("s3://")):
            props["CodeUri"] = PLACEHOLDER_CODE_URI


class Unresolvable(Exception):
    pass


_NO_VALUE = object()


def _condition_params(name: str, conditions: dict[str, Any], seen: tuple[str, ...] = ()) -> set[str]:
    """Parameters condition `name` depends on (through nested conditions too)."""
    if name in seen:
        raise Unresolvable(f"condition {name} refers to itself")
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for x in node:
                walk(x)
        elif isinstance(node, dict):
            if len(node) == 1 and "Ref" in node:
                out.add(node["Ref"])
            elif len(node) == 1 and "Condition" in node and isinstance(node["Condition"], str):
                out.update(_condition_params(node["Condition"], conditions, seen + (name,)))
            else:
                for v in node.values():
                    walk(v)

    walk(conditions[name])
    return out


def _eval_condition(node: Any, values: dict[str, str], conditions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_eval_condition(x, values, conditions) for x in node]
    if not isinstance(node, dict):
        return node
    (key, arg), = node.items()
    if key == "Ref":
        return values[arg]
    if key == "Condition":
        return _eval_condition(conditions[arg], values, conditions)
    if key == "Fn::Equals":
        a, b = (_eval_condition(x, values, conditions) for x in arg)
        return str(a) == str(b)
    if key == "Fn::Not":
        return not _eval_condition(arg[0], values, conditions)
    if key == "Fn::And":
        return all(_eval_condition(x, values, conditions) for x in arg)
    if key == "Fn::Or":
        return any(_eval_condition(x, values, conditions) for x in arg)
    raise Unresolvable(f"unsupported condition function {key}")


def resolve_conditions(cfn: dict[str, Any], given: dict[str, str]) -> dict[str, bool]:
    """Evaluate, in place, the conditions that depend only on the `given`
    parameters. Returns the resolved conditions and their values."""
    conditions: dict[str, Any] = cfn.get("Conditions", {}) or {}
    values = {k: str(v["Default"]) for k, v in cfn.get("Parameters", {}).items() if "Default" in v}
    values.update(given)
    resolved = {
        name: bool(_eval_condition(spec, values, conditions))
        for name, spec in conditions.items()
        if _condition_params(name, conditions) <= set(given)
    }

    def sub(node: Any) -> Any:
        """`node` with the resolved Fn::Ifs replaced; _NO_VALUE where one
        chose AWS::NoValue (the caller drops the key or list item)."""
        if isinstance(node, list):
            return [y for y in (sub(x) for x in node) if y is not _NO_VALUE]
        if not isinstance(node, dict):
            return node
        if len(node) == 1 and "Fn::If" in node:
            cond, yes, no = node["Fn::If"]
            if cond in resolved:
                chosen = yes if resolved[cond] else no
                return _NO_VALUE if chosen == {"Ref": "AWS::NoValue"} else sub(chosen)
            # Left to CloudFormation: its branches keep an explicit NoValue.
            branches = [sub(x) for x in (yes, no)]
            return {"Fn::If": [cond] + [{"Ref": "AWS::NoValue"} if b is _NO_VALUE else b for b in branches]}
        return {k: y for k, y in ((k, sub(v)) for k, v in node.items()) if y is not _NO_VALUE}

    used_before = _used_conditions(cfn)
    for section in ("Resources", "Outputs"):
        kept = {}
        for lid, body in (cfn.get(section) or {}).items():
            cond = body.get("Condition")
            if cond in resolved:
                if not resolved[cond]:
                    continue
                body = {k: v for k, v in body.items() if k != "Condition"}
            kept[lid] = sub(body)
        if section in cfn:
            cfn[section] = kept
    # A resolved condition that an unresolved one still refers to would have
    # to stay, as a constant; this template has none, so refuse, not guess.
    remaining = {k: v for k, v in conditions.items() if k not in resolved}
    # A condition only the removed resources used (the order queue's IsFifo
    # once the order consumer is out) goes with them: left alone, cfn-lint
    # would warn that it is not used (W8001). One nothing used before stays.
    while True:
        cfn["Conditions"] = remaining
        unused = {k for k in remaining if k in used_before and k not in _used_conditions(cfn)}
        if not unused:
            break
        remaining = {k: v for k, v in remaining.items() if k not in unused}
    for name in resolved:
        used = any(name in _condition_names(v) for v in remaining.values())
        if used:
            raise Unresolvable(f"condition {name} is used by an unresolved condition")
    if remaining:
        cfn["Conditions"] = remaining
    else:
        cfn.pop("Conditions", None)
    return resolved


def _used_conditions(cfn: dict[str, Any]) -> set[str]:
    """The conditions something refers to: a resource's or output's
    `Condition`, an `Fn::If`, or another condition that is itself used."""

    def names(node: Any) -> set[str]:
        out: set[str] = set()
        if isinstance(node, list):
            for x in node:
                out |= names(x)
        elif isinstance(node, dict):
            for k, v in node.items():
                if k == "Fn::If" and isinstance(v, list) and v and isinstance(v[0], str):
                    out.add(v[0])
                if k == "Condition" and isinstance(v, str):
                    out.add(v)
                out |= names(v)
        return out

    conditions = cfn.get("Conditions") or {}
    used = names([cfn.get(s) or {} for s in ("Resources", "Outputs", "Rules", "Globals")])
    todo = list(used)
    while todo:
        spec = conditions.get(todo.pop())
        for n in names(spec) - used:
            used.add(n)
            todo.append(n)
    return used


def _condition_names(node: Any) -> set[str]:
    out: set[str] = set()
    if isinstance(node, list):
        for x in node:
            out |= _condition_names(x)
    elif isinstance(node, dict):
        if len(node) == 1 and isinstance(node.get("Condition"), str):
            out.add(node["Condition"])
        for v in node.values():
            out |= _condition_names(v)
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", type=Path)
    ap.add_argument("dst", type=Path)
    ap.add_argument("overrides", nargs="*", metavar="Key=Value")
    ap.add_argument("--resolve-conditions", action="store_true")
    args = ap.parse_intermixed_args(argv[1:])
    src, dst = args.src, args.dst
    given: dict[str, str] = {}
    for kv in args.overrides:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            print(f"translate: not Key=Value: {kv!r}", file=sys.stderr)
            return 2
        given[key] = value
    sam_template = yaml_parse(src.read_text())
    unknown = sorted(set(given) - set(sam_template.get("Parameters", {})))
    if unknown:
        print(f"translate: not parameters of {src}: {', '.join(unknown)}", file=sys.stderr)
        return 2
    replace_local_code_uris(sam_template)

    policy_map = bundled_managed_policy_map()
    translator = Translator(
        managed_policy_map=None,
        sam_parser=Parser(),
        plugins=[],
        boto_session=boto3.session.Session(region_name=REGION),
    )
    try:
        cfn = translator.translate(
            sam_template=copy.deepcopy(sam_template),
            parameter_values=dict(given),
            get_managed_policy_map=lambda: policy_map,
        )
    except InvalidDocumentException as exc:
        for cause in exc.causes:
            print(f"translate: {cause}", file=sys.stderr)
        print(f"translate: {exc}", file=sys.stderr)
        return 1

    note = ""
    if args.resolve_conditions:
        try:
            resolved = resolve_conditions(cfn, given)
        except Unresolvable as exc:
            print(f"translate: cannot resolve the conditions: {exc}", file=sys.stderr)
            return 1
        note = ", conditions resolved: " + (
            " ".join(f"{k}={str(v).lower()}" for k, v in resolved.items()) or "none"
        )

    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(cfn, indent=2, sort_keys=False) + "\n")
    given_note = f" with {' '.join(f'{k}={v}' for k, v in given.items())}" if given else ""
    print(f"translated {src}{given_note} -> {dst} ({len(cfn.get('Resources', {}))} resources{note})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
