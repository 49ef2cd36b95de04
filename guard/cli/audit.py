"""``carbguard audit verify``."""

from __future__ import annotations

import argparse
from typing import Any


def _audit_verify(args: argparse.Namespace) -> int:
    from guard.audit import verify

    report = verify(args.file)
    print(report.describe())
    return 0 if report.ok else 1


def register(sub: Any) -> None:
    audit = sub.add_parser("audit", help="audit log tools").add_subparsers(dest="action", required=True)
    verify = audit.add_parser("verify", help="check the hash chain; name the first edited/removed line")
    verify.add_argument("file")
    verify.set_defaults(func=_audit_verify)
