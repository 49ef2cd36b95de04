"""``carbguard review AUDIT [--out SHEET.jsonl]``: the sessions review sampling picked, and a labelling sheet.

Reads the (hash-verified) audit log, takes the closed sessions whose ``session_end`` entry says
``review: {"picked": true, ...}`` (:mod:`guard.review`), in session-start order, and lists each with
its decided calls.  ``--out`` writes one template line per picked session in the ledger labels
format (:mod:`guard.ledger.labels`): ``mode: override, harms: []`` and an empty ``by`` — a sheet line
nobody filled in is refused by the labels reader, so an unreviewed session can never pass as
"reviewed: no harm" (fail closed).  ``why`` lists the decided calls (call id, tool, verdict).

Sessions still open past the bound (no ``session_end`` and ``--open-bound`` entries, or
``--open-bound-seconds``, after their last entry) have no recorded pick, so they cannot be sampled;
they are listed by id with a warning and the command exits 5 (docs/monitoring.md).  A closed session
that decided again is a unit of its own, ``<id>#segment-<n>``, with its own pick and label; so is a run
under an id whose unit already ended (``<id>#run-<k>``, :class:`guard.cli.deployed.UnitIds`).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from guard.cli._common import write_output
from guard.cli.deployed import UnitIds
from guard.cli.open_sessions import EXIT_OPEN, add_open_bound, open_bound, open_past_bound, open_past_bound_line
from guard.errors import GuardError


def picked_sessions(entries: list[dict[str, Any]]) -> list[tuple[str, float, list[tuple[str, str, str]]]]:
    """Per picked closed session in session-start order: its id, p, and its decided calls (id, tool, verdict)."""
    calls: dict[str, dict[str, tuple[str, str]]] = {}
    picked: dict[str, float] = {}
    units = UnitIds()  # the monitor's units: a second session_end of one id is a unit of its own
    for entry in entries:
        if entry.get("kind") in ("review", "breaker"):
            continue
        sid = units.of(str(entry.get("session")), ending=entry.get("event") == "session_end")
        if entry.get("event") == "session_end":
            review = entry.get("review")
            if isinstance(review, dict) and review.get("picked") is True:
                picked[sid] = float(review["p"])
            calls.setdefault(sid, {})
        elif "event" not in entry and "call_id" in entry:
            calls.setdefault(sid, {})[str(entry["call_id"])] = (str(entry.get("tool")), str(entry.get("verdict")))
    return [(sid, picked[sid], [(c, t, v) for c, (t, v) in calls[sid].items()]) for sid in calls if sid in picked]


def sheet_line(sid: str, decided: list[tuple[str, str, str]]) -> str:
    """One template label (the ledger labels format) for a picked session; ``by`` is left empty on purpose."""
    listed = "; ".join(f"{c} {t} {v}" for c, t, v in decided) or "no decided calls"
    why = f"TODO fill in by, harms (category, call_id) and why; decided calls: {listed}"
    return json.dumps({"episode": sid, "mode": "override", "harms": [], "by": "", "why": why})


def _review(args: argparse.Namespace) -> int:
    from guard.audit import read_entries, read_key_file, verify

    key = read_key_file(args.key_file) if args.key_file else None
    report = verify(args.audit, key=key)
    if not report.ok:
        raise GuardError(f"{args.audit}: audit log does not verify: {report.describe()}")
    entries = read_entries(args.audit)
    rows = picked_sessions(entries)
    for sid, p, decided in rows:
        print(f"{sid}\tp={p:g}\t{len(decided)} decided call(s)")
    print(f"{len(rows)} session(s) picked for review")
    stale = open_past_bound(entries, open_bound(args))
    for sid in stale:
        print(f"{sid}\tOPEN past the bound\tno session_end: no recorded pick, not on the sheet")
    if stale:
        bound = {"entries": args.open_bound, "seconds": args.open_bound_seconds}
        print(open_past_bound_line(stale, bound, "they cannot be sampled until they close"), file=sys.stderr)
    if args.out:
        text = "".join(sheet_line(sid, decided) + "\n" for sid, _, decided in rows)
        write_output(args.out, text.encode(), [args.audit, args.key_file], "--out")
    return EXIT_OPEN if stale else 0


def register(sub: Any) -> None:
    """``carbguard review``."""
    parser = sub.add_parser(
        "review",
        help="list the sessions review sampling picked; write a labelling sheet (exit 5: sessions open past the bound)",
        description=__doc__,
    )
    parser.add_argument("audit", help="the deployment's audit log (JSON lines, hash-chained)")
    parser.add_argument("--key-file", help="the deployment key of a keyed audit log (verifies its MACs)")
    parser.add_argument("-o", "--out", metavar="SHEET", help="write one template label per picked session (JSON lines)")
    add_open_bound(parser)
    parser.set_defaults(func=_review)
