"""``carbguard audit verify|checkpoint``."""

from __future__ import annotations

import argparse
import json
from typing import Any

from guard.cli._common import add_out

KEY_HELP = "file holding the deployment key the log was written with (keyed chain; never printed)"


def _key(args: argparse.Namespace) -> bytes | None:
    from guard.audit import read_key_file

    return read_key_file(args.key_file) if args.key_file else None


EXIT_FAILED = 1
EXIT_UNAUTHENTICATED = 4
VERIFY_HELP = (
    "check the hash chain (and a checkpoint); name the first line and the check that failed. Exit code 0: the keyed "
    "chain verifies with the key (and the checkpoint matches); 1: a check failed; 4: an unkeyed chain is intact, but "
    "truncation and re-chaining cannot be checked without a key; 2: bad input (unreadable file, bad key or checkpoint)"
)


def _audit_verify(args: argparse.Namespace) -> int:
    from guard.audit import load_checkpoint, verify

    point = load_checkpoint(args.checkpoint) if args.checkpoint else None
    report = verify(args.file, key=_key(args), checkpoint=point)
    print(report.describe())
    if not report.ok:
        return EXIT_FAILED
    if not report.keyed:
        return EXIT_UNAUTHENTICATED
    if point is None:
        print("note: without a checkpoint, entries cut at the end of the log are not detected")
    return 0


def _audit_checkpoint(args: argparse.Namespace) -> int:
    from guard.audit import checkpoint
    from guard.cli._common import check_output, write_output

    if args.out:
        check_output(args.out, [args.file, args.key_file])
    body = json.dumps(checkpoint(args.file, key=_key(args)), sort_keys=True) + "\n"
    if args.out:
        write_output(args.out, body, [args.file, args.key_file])
        print(f"wrote {args.out}: checkpoint of {json.loads(body)['entries']} entries (store it outside the log)")
    else:
        print(body, end="")
    return 0


def register(sub: Any) -> None:
    audit = sub.add_parser("audit", help="audit log tools").add_subparsers(dest="action", required=True)
    verify = audit.add_parser("verify", help=VERIFY_HELP, description=VERIFY_HELP)
    verify.add_argument("file", help="the audit log (JSON lines, hash-chained)")
    verify.add_argument("--key-file", help=KEY_HELP)
    verify.add_argument("--checkpoint", help="a checkpoint written by `carbguard audit checkpoint`")
    verify.set_defaults(func=_audit_verify)
    point = audit.add_parser("checkpoint", help="export entry count + last hash of a verifying log (keyed: with a MAC)")
    point.add_argument("file", help="the audit log (JSON lines, hash-chained)")
    point.add_argument("--key-file", help=KEY_HELP)
    add_out(point, "checkpoint file to write (default: stdout)")
    point.set_defaults(func=_audit_checkpoint)
