#!/usr/bin/env python3
"""Write template.yaml without one function's resources, as an adopter who
removes the function would (docs/adapting.md, "Removing a function from the
code", step 3): `make check-removal` checks the result.

Usage (with the SAM CLI's Python, .venv/bin/python):
  remove_function.py SAM_TEMPLATE OUTPUT functions/<name>

What belongs to the function is read from the template, not from the
function's folder (which the removal deletes): the AWS::Serverless::Function
whose CodeUri is the folder, its Condition (which must depend on one
parameter only, its Deploy* parameter). Removed: every resource and output
under that condition, the condition, `Fn::If`s on it (the "false" branch
kept, as CloudFormation would with the parameter "false"), the Deploy*
parameter, and every parameter only the removed resources and outputs
referred to, with their ParameterGroups and ParameterLabels entries (a group
left empty goes too). Nothing else is touched; whatever still names the
function (an output without its condition, say) is left for the template
checks to report.

The output is JSON (also YAML, and what `sam` and the translator read): the
short-form tags of the YAML (!Ref, !If) are read as their long forms.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from samcli.yamlhelper import yaml_parse  # noqa: E402 - the SAM CLI's reader of the short-form tags
from translate_template import Unresolvable, _condition_params, resolve_conditions  # noqa: E402


class Refused(Exception):
    pass


def referenced_parameters(node: Any) -> set[str]:
    """Names in every Ref and every ${Name} of a Fn::Sub under `node` (a
    superset of the parameters it uses: resources and pseudo parameters too)."""
    out: set[str] = set()
    if isinstance(node, list):
        for x in node:
            out |= referenced_parameters(x)
    elif isinstance(node, dict):
        for key, arg in node.items():
            if key == "Ref" and isinstance(arg, str):
                out.add(arg)
            elif key == "Fn::Sub":
                text = arg if isinstance(arg, str) else arg[0]
                out |= {v.split(".", 1)[0] for v in re.findall(r"\$\{([^}!][^}]*)\}", str(text))}
                if isinstance(arg, list):
                    out |= referenced_parameters(arg[1:])
            else:
                out |= referenced_parameters(arg)
    return out


def used_parameters(t: dict[str, Any]) -> set[str]:
    sections = [t.get(k) or {} for k in ("Resources", "Outputs", "Conditions", "Rules", "Globals")]
    return referenced_parameters(sections) & set(t.get("Parameters") or {})


def remove(t: dict[str, Any], folder: str) -> list[str]:
    """Removes, in place, what belongs to the function built from `folder`;
    returns what was removed, one "Section/name" each."""
    want = os.path.normpath(folder)
    resources = t.get("Resources") or {}
    found = [lid for lid, r in resources.items() if r.get("Type") == "AWS::Serverless::Function"
             and os.path.normpath(str((r.get("Properties") or {}).get("CodeUri", ""))) == want]
    if len(found) != 1:
        raise Refused(f"expected one AWS::Serverless::Function with CodeUri {want}, found {found}")
    fn = found[0]
    cond = resources[fn].get("Condition")
    conditions = t.get("Conditions") or {}
    if cond not in conditions:
        raise Refused(f"{fn} has no Condition: what belongs to it cannot be told apart from the rest")
    params = _condition_params(cond, conditions)
    if len(params) != 1:
        raise Refused(f"{fn}'s condition {cond} depends on {sorted(params)}, not on one Deploy* parameter")
    (param,) = params
    before = {s: set(t.get(s) or {}) for s in ("Resources", "Outputs", "Conditions")}
    used_before = used_parameters(t)
    resolve_conditions(t, {param: "false"})
    # Only the parameters the removed parts used alone (and the switch).
    dropped_params = (used_before - used_parameters(t)) | {param}
    for name in dropped_params:
        t["Parameters"].pop(name, None)
    interface = (t.get("Metadata") or {}).get("AWS::CloudFormation::Interface") or {}
    groups = []
    for g in interface.get("ParameterGroups", []):
        kept = [p for p in g.get("Parameters", []) if p not in dropped_params]
        if kept:
            groups.append({**g, "Parameters": kept})
    if "ParameterGroups" in interface:
        interface["ParameterGroups"] = groups
    for name in dropped_params:
        interface.get("ParameterLabels", {}).pop(name, None)
    removed = [f"{s}/{n}" for s, names in before.items() for n in sorted(names - set(t.get(s) or {}))]
    return removed + [f"Parameters/{p}" for p in sorted(dropped_params)]


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst, folder = Path(argv[1]), Path(argv[2]), argv[3]
    t = yaml_parse(src.read_text())
    try:
        removed = remove(t, folder)
    except (Refused, Unresolvable) as exc:
        print(f"remove_function: {src}: {exc}", file=sys.stderr)
        return 1
    dst.write_text(json.dumps(t, indent=1) + "\n")
    print(f"remove_function: {dst}: {folder} removed ({len(removed)}: {', '.join(removed)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
