#!/usr/bin/env python3
"""Check the parameter values a deployment will use, before it uses them.

Usage (with the SAM CLI's Python, .venv/bin/python):
  check_deploy_params.py TEMPLATE [--saved] [--print NAME] [Key=Value ...]

CloudFormation cannot do arithmetic, so the template cannot derive the
source queue's visibility timeout from the function timeout. AWS's guidance
is VisibilityTimeout >= 6 * FunctionTimeout + MaximumBatchingWindowInSeconds:
a lower value lets SQS hand a message that is still being processed to
another invocation. Nor can it compare DeadlineMarginMs with
FunctionTimeout: a margin of half the timeout or more leaves the functions
little or no time for any record. This script resolves the values `sam
deploy` will pass and refuses a combination that breaks either rule:

- the template's defaults, then
- Key=Value arguments if there are any (on sam's command line they replace
  samconfig.toml's `parameter_overrides` as a whole), else the
  `parameter_overrides` saved in samconfig.toml for `sam deploy` (the
  default environment; `[default.deploy.parameters]` over
  `[default.global.parameters]`), read with the SAM CLI's own config and
  parameter parsers, so every format sam accepts is understood.

Every resolved value is also checked against its parameter's constraints in
the template (AllowedValues, AllowedPattern, Min/MaxValue, Min/MaxLength), as
CloudFormation will, so that a typo such as DeployOrderNotifier=False stops
the deployment before the build rather than at the change set.

On success it says which functions will be deployed (each function under
functions/ by its Deploy* parameter, from its folder's template_check.py,
scripts/check_template.py loads them) and what each function's expectations
say about its deployment (`deploy_note`, `off_note`): with the order
notifier, which SSM SecureString parameter it reads at cold start (nothing
here calls AWS to look for it); with DeployOrderNotifier=false, that no SSM
parameter is needed, named or checked.

Lambda Managed Instances: when the values name `CapacityProviderArn`, the
deployment is the Managed Instances variant of the template
(scripts/managed_instances.py), and the values are checked against its
parameters (the ARN's pattern, FunctionMemorySize of at least 2048, ...).
A function's compute type is fixed when it is created, so Key=Value
arguments that would switch a stack saved in samconfig.toml to the other
compute type are refused.

--saved: samconfig.toml must exist (after `sam deploy --guided`).
--print NAME: on success, print only the resolved value of NAME (for
  `sam build`, which must build for the Architecture that is deployed);
  given more than once, the values on one line, separated by spaces, an
  unset CapacityProviderArn (Lambda's own fleet) as nothing.

`make deploy` (scripts/deploy.sh) runs it; scripts/check_template.py checks
the same rule for the defaults in CI. Exits 0 when the rule holds, 1 when it
does not, 2 on unusable input.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import managed_instances  # noqa: E402 - the variant's parameters, from the one place that defines them
import check_template  # noqa: E402 - the functions' expectations (FUNCTIONS), loaded from their folders


class _Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (!Ref, !If, ...) read as None:
    only the Parameters section, which has none, is used."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def template_parameters(path: Path) -> dict[str, dict]:
    doc = yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    return doc.get("Parameters", {}) or {}


def source_queue_retention(path: Path) -> dict[str, int]:
    """MessageRetentionPeriod of every queue with a RedrivePolicy (the
    source queues), from the template itself."""
    doc = yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    out = {}
    for name, res in (doc.get("Resources") or {}).items():
        props = (res or {}).get("Properties") or {}
        if res.get("Type") == "AWS::SQS::Queue" and "RedrivePolicy" in props:
            out[name] = int(props.get("MessageRetentionPeriod", 345600))
    if not out:
        raise ValueError("no source queue (AWS::SQS::Queue with a RedrivePolicy) in the template")
    return out


def worst_case_secs(receives: int, visibility: int, curves) -> int:
    """The longest a message can spend between its receives before the DLQ:
    each return waits the longest delay of any curve, or the visibility
    timeout when setting the delay failed."""
    total = 0
    for n in range(1, receives + 1):
        delays = [min(base * 2 ** (n - 1), cap) for base, cap in curves]
        total += max([visibility, *delays])
    return total


def constraint_errors(specs: dict[str, dict], values: dict[str, str]) -> list[str]:
    """What CloudFormation would refuse in `values`, by each parameter's
    constraints in the template."""
    errors = []
    for name, value in values.items():
        spec = specs[name]
        allowed = spec.get("AllowedValues")
        if allowed is not None and value not in [str(a) for a in allowed]:
            errors.append(f"{name}={value!r} is not one of {[str(a) for a in allowed]}")
            continue
        pattern = spec.get("AllowedPattern")
        if pattern is not None and not re.fullmatch(pattern, value):
            errors.append(f"{name}={value!r} does not match {pattern!r}")
        if spec.get("Type") == "Number":
            try:
                number = float(value)
            except ValueError:
                errors.append(f"{name}={value!r} is not a number")
                continue
            if "MinValue" in spec and number < float(spec["MinValue"]):
                errors.append(f"{name}={value} is below its MinValue {spec['MinValue']}")
            if "MaxValue" in spec and number > float(spec["MaxValue"]):
                errors.append(f"{name}={value} is above its MaxValue {spec['MaxValue']}")
        if "MinLength" in spec and len(value) < int(spec["MinLength"]):
            errors.append(f"{name}={value!r} is shorter than its MinLength {spec['MinLength']}")
        if "MaxLength" in spec and len(value) > int(spec["MaxLength"]):
            errors.append(f"{name}={value!r} is longer than its MaxLength {spec['MaxLength']}")
    return errors


def parse_overrides(value) -> dict[str, str]:
    """sam's own parsing of a parameter_overrides value (string, list, or
    the Key=Value arguments)."""
    from samcli.cli.types import CfnParameterOverridesType

    if isinstance(value, (list, tuple)):
        value = tuple(value)
    return {k: str(v) for k, v in CfnParameterOverridesType().convert(value, None, None).items()}


def saved_overrides(config_dir: Path, required: bool) -> dict[str, str]:
    from samcli.lib.config.samconfig import SamConfig

    if not (config_dir / "samconfig.toml").is_file():
        if required:
            raise ValueError(
                "samconfig.toml not found: answer Y to 'Save arguments to configuration file' "
                "in the guided deploy (default name, default environment)"
            )
        return {}
    raw = SamConfig(str(config_dir)).get_all(["deploy"], "parameters").get("parameter_overrides")
    return parse_overrides(raw) if raw else {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("template", type=Path)
    ap.add_argument("overrides", nargs="*", help="Key=Value, as sam's --parameter-overrides")
    ap.add_argument("--saved", action="store_true", help="samconfig.toml must exist")
    ap.add_argument("--print", dest="print_names", metavar="NAME", action="append", default=[])
    args = ap.parse_intermixed_args()
    arn = managed_instances.ARN_PARAMETER
    config_dir = args.template.resolve().parent
    try:
        specs = template_parameters(args.template)
        if args.overrides:
            given = parse_overrides(args.overrides)
            source = "the template's defaults and the given overrides"
            saved = saved_overrides(config_dir, False)
            # A saved stack without saved overrides is on Lambda's own fleet.
            if (config_dir / "samconfig.toml").is_file() and (arn in saved) != (arn in given):
                print(
                    f"check_deploy_params: samconfig.toml deploys {'with' if arn in saved else 'without'} {arn}, "
                    f"these overrides {'with' if arn in given else 'without'} it: a function's compute type "
                    f"(Lambda Managed Instances or not) is fixed when it is created, so a stack cannot switch. "
                    f"Give {arn} in PARAMS as samconfig.toml does (PARAMS replace its overrides as a whole), "
                    f"or deploy another stack.",
                    file=sys.stderr,
                )
                return 1
        else:
            given = saved_overrides(config_dir, args.saved)
            source = "the template's defaults and samconfig.toml"
        if arn in given:
            # The Managed Instances variant: its parameters and defaults.
            specs = managed_instances.variant_parameters(specs)
            source += " (Lambda Managed Instances)"
        values = {k: str(v["Default"]) for k, v in specs.items() if "Default" in v} | given
        unknown = sorted(set(values) - set(specs))
        if unknown and set(unknown) <= set(managed_instances.PARAMETERS):
            raise ValueError(f"{', '.join(unknown)}: Lambda Managed Instances settings, which need {arn} too")
        if unknown:
            raise ValueError(f"not parameters of {args.template}: {', '.join(unknown)}")
    except Exception as e:  # noqa: BLE001 - any unusable input is exit 2 with its reason
        print(f"check_deploy_params: cannot resolve the parameters: {e}", file=sys.stderr)
        return 2
    errors = constraint_errors(specs, values)
    if errors:
        for err in errors:
            print(f"check_deploy_params: {err} (values from {source}); CloudFormation would refuse it", file=sys.stderr)
        return 1
    try:
        timeout = int(values["FunctionTimeout"])
        margin = int(values["DeadlineMarginMs"])
        visibility = int(values["QueueVisibilityTimeout"])
        fifo = values.get("FifoQueue", "false").lower() == "true"
        window = 0 if fifo else int(values["MaximumBatchingWindowInSeconds"])
    except Exception as e:  # noqa: BLE001 - any unusable input is exit 2 with its reason
        print(f"check_deploy_params: cannot resolve the parameters: {e}", file=sys.stderr)
        return 2
    # The functions stop starting records DEADLINE_MARGIN_MS before the
    # deadline. A margin of half the timeout or more leaves them little or no
    # time: every record is NotAttempted, the queue drains into the DLQ (the
    # functions then fail such invocations, but better never to deploy it).
    if margin * 2 > timeout * 1000:
        print(
            f"check_deploy_params: DeadlineMarginMs={margin} is more than half of "
            f"FunctionTimeout ({timeout} s = {timeout * 1000} ms) (values from {source}): "
            f"the functions would have little or no time for any record. Lower it to at most "
            f"{timeout * 500}, or raise FunctionTimeout.",
            file=sys.stderr,
        )
        return 1
    need = 6 * timeout + window
    if visibility < need:
        print(
            f"check_deploy_params: QueueVisibilityTimeout={visibility} is below "
            f"6 * FunctionTimeout ({timeout}) + MaximumBatchingWindowInSeconds ({window}) = {need} "
            f"(values from {source}). Raise it to at least {need}: edit parameter_overrides in "
            f"samconfig.toml, or give every override you want in PARAMS.",
            file=sys.stderr,
        )
        return 1
    print(
        f"check_deploy_params: QueueVisibilityTimeout={visibility} >= 6 * {timeout} + {window} = {need}: ok",
        file=sys.stderr,
    )
    # A returned message comes back after the delay the function set
    # (RetryBackoff), or after QueueVisibilityTimeout when that call fails.
    # Its receives must all fit in the source queue's retention, with room
    # to spare, or it expires there instead of reaching the DLQ.
    try:
        receives = int(values["MaxReceiveCount"])
        backoff = values.get("RetryBackoff", "on") == "on"
        curves = {
            "Early": (int(values["BackoffEarlyBaseSecs"]), int(values["BackoffEarlyCapSecs"])),
            "Failed": (int(values["BackoffFailedBaseSecs"]), int(values["BackoffFailedCapSecs"])),
        }
        retention = min(source_queue_retention(args.template).values())
    except Exception as e:  # noqa: BLE001 - any unusable input is exit 2 with its reason
        print(f"check_deploy_params: cannot resolve the parameters: {e}", file=sys.stderr)
        return 2
    for name, (base, cap) in curves.items():
        if cap < base:
            print(
                f"check_deploy_params: Backoff{name}CapSecs={cap} is below Backoff{name}BaseSecs={base} "
                f"(values from {source}); the functions would refuse to start.",
                file=sys.stderr,
            )
            return 1
    worst = worst_case_secs(receives, visibility, curves.values() if backoff else [])
    if worst * 2 > retention:
        print(
            f"check_deploy_params: MaxReceiveCount={receives} receives of up to {worst // receives} s each "
            f"({worst} s) exceed half the source queues' MessageRetentionPeriod ({retention} s) "
            f"(values from {source}): a message could expire before it reaches the DLQ. Lower "
            f"MaxReceiveCount, QueueVisibilityTimeout or the Backoff caps.",
            file=sys.stderr,
        )
        return 1
    print(
        f"check_deploy_params: worst time to the DLQ {worst} s <= half the retention ({retention} s): ok",
        file=sys.stderr,
    )
    # The functions under functions/, from their expectations (each
    # folder's template_check.py): a removed function's folder took its
    # part of this report with it. One whose Deploy* parameter is not in
    # the template is not in this deployment either.
    deployed = []
    notes = []
    for spec in check_template.FUNCTIONS.values():
        param = spec.get("deploy_param")
        if param is not None and param not in specs:
            continue
        on = param is None or values.get(param) == "true"
        if on:
            deployed.append(spec["name"])
        note = spec.get("deploy_note" if on else "off_note")
        if note:
            try:
                notes.append(note.format_map(values))
            except (KeyError, IndexError, ValueError) as e:
                print(f"check_deploy_params: {spec['source_file']}: its note names no parameter: {e}", file=sys.stderr)
                return 2
    print(f"check_deploy_params: functions deployed: {', '.join(deployed) or 'none'}", file=sys.stderr)
    for note in notes:
        print(f"check_deploy_params: {note}", file=sys.stderr)
    if arn in values:
        # Lambda takes whole invocations, and gives a function
        # FunctionMemorySize / (ratio x 1024) vCPUs, at least one.
        concurrency, ratio = values["PerExecutionEnvironmentMaxConcurrency"], values["ExecutionEnvironmentMemoryGiBPerVCpu"]
        if not concurrency.isdigit():
            print(f"check_deploy_params: PerExecutionEnvironmentMaxConcurrency={concurrency!r} is not a whole number "
                  f"(values from {source})", file=sys.stderr)
            return 1
        if int(values["FunctionMemorySize"]) < float(ratio) * 1024:
            print(
                f"check_deploy_params: FunctionMemorySize={values['FunctionMemorySize']} is below one vCPU at "
                f"ExecutionEnvironmentMemoryGiBPerVCpu={ratio} ({float(ratio) * 1024:g} MB) (values from {source}). "
                f"Raise FunctionMemorySize or lower the ratio.",
                file=sys.stderr,
            )
            return 1
        print(
            f"check_deploy_params: Lambda Managed Instances: every function on the capacity provider "
            f"{values[arn]}, up to {values['PerExecutionEnvironmentMaxConcurrency']} invocations per process, "
            f"{values['FunctionMemorySize']} MB, {values['ExecutionEnvironmentMemoryGiBPerVCpu']} GiB per vCPU",
            file=sys.stderr,
        )
    if args.print_names:
        printed = []
        for name in args.print_names:
            if name in values:
                printed.append(values[name])
            elif name == arn:
                printed.append("")  # Lambda's own fleet
            else:
                print(f"check_deploy_params: no parameter {name}", file=sys.stderr)
                return 2
        print(" ".join(printed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
