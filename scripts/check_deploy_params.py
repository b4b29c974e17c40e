#!/usr/bin/env python3
"""Check the parameter values a deployment will use, before it uses them.

Usage: check_deploy_params.py TEMPLATE [SAMCONFIG] [Key=Value ...]

CloudFormation cannot do arithmetic, so the template cannot derive the
source queue's visibility timeout from the function timeout. AWS's guidance
is VisibilityTimeout >= 6 * FunctionTimeout + MaximumBatchingWindowInSeconds:
a lower value lets SQS hand a message that is still being processed (or
retried inside the function) to another invocation. This script resolves the
values `sam deploy` will pass (the template's defaults, then samconfig.toml's
`parameter_overrides` for the default environment, then the Key=Value
arguments) and refuses a combination that breaks the rule. `make deploy` runs
it; scripts/check_template.py checks the same rule for the defaults in CI.

Exits 0 when the rule holds, 1 when it does not, 2 on unusable input.
"""

from __future__ import annotations

import shlex
import sys
import tomllib
from pathlib import Path

import yaml


class _Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (!Ref, !If, ...) read as None:
    only the Parameters section, which has none, is used."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def template_defaults(path: Path) -> dict[str, str]:
    doc = yaml.load(path.read_text(), Loader=_Loader)  # noqa: S506 - SafeLoader subclass
    params = doc.get("Parameters", {}) or {}
    return {k: str(v["Default"]) for k, v in params.items() if "Default" in v}


def samconfig_overrides(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    conf = tomllib.loads(path.read_text())
    raw = conf.get("default", {}).get("deploy", {}).get("parameters", {}).get("parameter_overrides")
    if raw is None:
        return {}
    items = raw if isinstance(raw, list) else shlex.split(raw)
    return dict(pair(i) for i in items)


def pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"not Key=Value: {text!r}")
    return key, value


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        values = template_defaults(Path(argv[1]))
        if len(argv) > 2:
            values |= samconfig_overrides(Path(argv[2]))
        values |= dict(pair(a) for a in argv[3:])
        timeout = int(values["FunctionTimeout"])
        visibility = int(values["QueueVisibilityTimeout"])
        window = 0 if values.get("FifoQueue", "false") == "true" else int(values["MaximumBatchingWindowInSeconds"])
    except (OSError, KeyError, ValueError, tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        print(f"check_deploy_params: cannot read the parameters: {e}", file=sys.stderr)
        return 2
    need = 6 * timeout + window
    if visibility < need:
        print(
            f"check_deploy_params: QueueVisibilityTimeout={visibility} is below "
            f"6 * FunctionTimeout ({timeout}) + MaximumBatchingWindowInSeconds ({window}) = {need}. "
            f"Raise it to at least {need} (e.g. --parameter-overrides QueueVisibilityTimeout={need}).",
            file=sys.stderr,
        )
        return 1
    print(
        f"check_deploy_params: QueueVisibilityTimeout={visibility} >= 6 * {timeout} + {window} = {need}: ok"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
