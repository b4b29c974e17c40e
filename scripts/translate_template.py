#!/usr/bin/env python3
"""Translate a SAM template to plain CloudFormation JSON, offline.

Usage: translate_template.py SAM_TEMPLATE OUTPUT_JSON

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


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    src, dst = Path(argv[1]), Path(argv[2])
    sam_template = yaml_parse(src.read_text())
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
            parameter_values={},
            get_managed_policy_map=lambda: policy_map,
        )
    except InvalidDocumentException as exc:
        for cause in exc.causes:
            print(f"translate: {cause}", file=sys.stderr)
        print(f"translate: {exc}", file=sys.stderr)
        return 1

    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(cfn, indent=2, sort_keys=False) + "\n")
    print(f"translated {src} -> {dst} ({len(cfn.get('Resources', {}))} resources)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
