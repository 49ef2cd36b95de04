"""``carbguard policy validate|schema``."""

from __future__ import annotations

import argparse
from typing import Any


def _policy_validate(args: argparse.Namespace) -> int:
    import logging
    import sys

    from guard.policy import load_policy
    from guard.policy.defaults import policy_warnings

    logging.getLogger("guard.policy").disabled = True  # printed below, once, instead of logged at load
    try:
        policy = load_policy(args.file)
    finally:
        logging.getLogger("guard.policy").disabled = False
    print(f"OK: policy {policy.name!r} with {len(policy.tools)} tools is valid")
    for warning in policy_warnings(policy):
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _policy_schema(args: argparse.Namespace) -> int:
    from guard.policy import policy_schema_text

    print(policy_schema_text())
    return 0


def register(sub: Any) -> None:
    policy = sub.add_parser("policy", help="validate a policy file or print its JSON Schema").add_subparsers(
        dest="action", required=True
    )
    validate = policy.add_parser("validate", help="report every error of a policy file with its location")
    validate.add_argument("file")
    validate.set_defaults(func=_policy_validate)
    policy.add_parser("schema", help="print the JSON Schema of policy files").set_defaults(func=_policy_schema)
