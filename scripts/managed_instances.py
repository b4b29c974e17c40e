#!/usr/bin/env python3
"""Write the Lambda Managed Instances variant of template.yaml.

Usage (with the SAM CLI's Python, .venv/bin/python):
  managed_instances.py SAM_TEMPLATE OUTPUT_JSON

Why a second template and not a parameter of the first: a function joins a
capacity provider through SAM's `CapacityProviderConfig`, which the SAM
transform validates before CloudFormation resolves any condition, so an
`!If` around it is refused; and a function's compute type is fixed when it
is created (it cannot be added or removed later). So the choice is made once
per stack, at its first deploy, by deploying this variant instead of
template.yaml. `make deploy PARAMS="CapacityProviderArn=arn:..."` does that
(scripts/deploy.sh); `make validate` writes, lints, translates and checks it
like template.yaml.

The variant is template.yaml plus:

* parameters `CapacityProviderArn` (required: an existing capacity provider,
  which owns the VPC, subnets and instance types), `PerExecutionEnvironmentMaxConcurrency`
  (invocations one process serves at once: Lambda sets
  AWS_LAMBDA_MAX_CONCURRENCY to it, and the functions serve that many through
  lambda_runtime's run_concurrent) and `ExecutionEnvironmentMemoryGiBPerVCpu`;
* `Globals.Function.CapacityProviderConfig` naming them, so every function of
  the stack, present and future, runs on the capacity provider, and
  `PublishToLatestPublished`, so every deploy publishes what it deploys;
* `FunctionMemorySize` raised to Managed Instances' minimum, 2 GB.

Everything else (queues, tables, roles, alarms, the Deploy* switches) is the
same template, so the variant cannot drift from it. It is written as JSON
(CloudFormation and SAM read either), with CodeUri made relative to where
it is written.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from pathlib import Path
from typing import Any

ARN_PARAMETER = "CapacityProviderArn"
MEMORY_PARAMETER = "FunctionMemorySize"
# Managed Instances' smallest function: 2 GB (and 1 vCPU).
MIN_MEMORY_MB = 2048
# What Lambda accepts as a capacity provider ARN (the CapacityProviderArn
# pattern of the Lambda API).
ARN_PATTERN = (
    r"arn:aws[a-zA-Z-]*:lambda:(eusc-)?[a-z]{2}((-gov)|(-iso([a-z]?)))?-[a-z]+-\d{1}:\d{12}"
    r":capacity-provider:[a-zA-Z0-9-_]+"
)

PARAMETERS: dict[str, dict[str, Any]] = {
    ARN_PARAMETER: {
        "Type": "String",
        "AllowedPattern": ARN_PATTERN,
        "MaxLength": 140,
        "ConstraintDescription": "the ARN of a Lambda capacity provider "
        "(arn:aws:lambda:REGION:ACCOUNT:capacity-provider:NAME)",
        "Description": "The capacity provider every function runs on (Lambda Managed Instances). "
        "It must exist, in this Region, with the functions' Architecture; its subnets need a "
        "route to DynamoDB, SQS and CloudWatch Logs (and to the webhook for the order notifier).",
    },
    "PerExecutionEnvironmentMaxConcurrency": {
        "Type": "Number",
        # The concurrency the reliability suite and the bench prove and
        # measure one process at (docs/performance.md).
        "Default": 8,
        "MinValue": 1,
        "MaxValue": 1600,
        "Description": "Invocations one execution environment (one process) serves at once. Lambda "
        "sets AWS_LAMBDA_MAX_CONCURRENCY to it. DynamoDB requests in flight per process are up to "
        "this times MaxConcurrency.",
    },
    "ExecutionEnvironmentMemoryGiBPerVCpu": {
        "Type": "Number",
        "Default": 2,
        "AllowedValues": [2, 4, 8],
        "Description": "GiB of memory per vCPU of an execution environment (2: the most CPU per "
        "GiB, right for these I/O-bound functions). FunctionMemorySize must give at least one vCPU.",
    },
}

# Properties SAM refuses beside CapacityProviderConfig (the capacity provider
# owns the VPC; there are no cold starts to provision against).
EXCLUSIVE = ("ProvisionedConcurrencyConfig", "VpcConfig")


class VariantError(Exception):
    """The template cannot be turned into the Managed Instances variant."""


def functions(template: dict[str, Any]) -> list[str]:
    return [k for k, v in template.get("Resources", {}).items() if v.get("Type") == "AWS::Serverless::Function"]


def variant_parameters(params: dict[str, Any]) -> dict[str, Any]:
    """The variant's Parameters section, from template.yaml's (not modified).
    scripts/check_deploy_params.py checks a deployment's values against it."""
    taken = sorted(set(PARAMETERS) & set(params))
    if taken:
        raise VariantError(f"the template already has parameters {taken}")
    if MEMORY_PARAMETER not in params:
        raise VariantError(f"no parameter {MEMORY_PARAMETER} (the functions' MemorySize)")
    out = copy.deepcopy(params) | copy.deepcopy(PARAMETERS)
    memory = out[MEMORY_PARAMETER]
    memory["MinValue"] = max(MIN_MEMORY_MB, int(memory.get("MinValue", 0)))
    memory["Default"] = max(MIN_MEMORY_MB, int(memory.get("Default", 0)))
    memory["Description"] = (
        f"{memory.get('Description', '').strip()} At least {MIN_MEMORY_MB} on Lambda Managed Instances."
    ).strip()
    return out


def variant(template: dict[str, Any], code_uri_prefix: str = "") -> dict[str, Any]:
    """The Managed Instances variant of a parsed SAM template (not modified).

    code_uri_prefix: prepended to each local CodeUri (the way from where the
    variant is written back to the template's folder)."""
    out = copy.deepcopy(template)
    fns = functions(out)
    if not fns:
        raise VariantError("no AWS::Serverless::Function in the template")
    params = out.setdefault("Parameters", {})
    for fn in fns:
        props = out["Resources"][fn].get("Properties", {})
        if props.get("MemorySize") != {"Ref": MEMORY_PARAMETER}:
            raise VariantError(f"{fn}: MemorySize is not {MEMORY_PARAMETER}, so its minimum cannot be raised")
        clash = [p for p in ("CapacityProviderConfig", *EXCLUSIVE) if p in props]
        if clash:
            raise VariantError(f"{fn} sets {clash}: not allowed with (or already) on a capacity provider")
        code_uri = props.get("CodeUri")
        if code_uri_prefix and isinstance(code_uri, str) and "://" not in code_uri:
            props["CodeUri"] = os.path.normpath(os.path.join(code_uri_prefix, code_uri))

    out["Description"] = "(Lambda Managed Instances) " + str(out.get("Description", "")).strip()
    out["Parameters"] = variant_parameters(params)
    interface = out.setdefault("Metadata", {}).setdefault("AWS::CloudFormation::Interface", {})
    interface.setdefault("ParameterGroups", []).insert(
        0, {"Label": {"default": "Lambda Managed Instances"}, "Parameters": list(PARAMETERS)}
    )
    glob = out.setdefault("Globals", {}).setdefault("Function", {})
    if "CapacityProviderConfig" in glob:
        raise VariantError("Globals.Function already sets CapacityProviderConfig")
    glob["CapacityProviderConfig"] = {
        "Arn": {"Ref": ARN_PARAMETER},
        "PerExecutionEnvironmentMaxConcurrency": {"Ref": "PerExecutionEnvironmentMaxConcurrency"},
        "ExecutionEnvironmentMemoryGiBPerVCpu": {"Ref": "ExecutionEnvironmentMemoryGiBPerVCpu"},
    }
    # On Managed Instances an unqualified invoke (the event source mappings',
    # the HTTP API's) runs $LATEST.PUBLISHED, which CloudFormation creates
    # with the function. Without this, a later deploy would update $LATEST
    # only and the old code would go on serving.
    glob["PublishToLatestPublished"] = True
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    from samcli.yamlhelper import yaml_parse  # the SAM CLI's reader: short tags become long-form intrinsics

    src, dst = Path(argv[1]), Path(argv[2])
    try:
        template = yaml_parse(src.read_text())
        prefix = os.path.relpath(src.resolve().parent, dst.resolve().parent)
        out = variant(template, "" if prefix == "." else prefix)
    except (OSError, VariantError) as e:
        print(f"managed_instances: {src}: {e}", file=sys.stderr)
        return 1
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(out, indent=1) + "\n")
    print(
        f"managed_instances: wrote {dst}: {', '.join(functions(out))} on the capacity provider {ARN_PARAMETER}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
