"""``carbguard monitor``'s state file: each run reads and verifies only the entries the log gained since the last.

The state (default ``AUDIT.monitor-state``, ``--state FILE``, ``--no-state`` to read the whole log
every run) is a cache, never an input: a run that uses it prints exactly what a run over the whole
log prints.  It stores

- where the verified part of the log ends: its length in bytes and entries, the last entry's hash
  (the next entry must chain from it), and SHA-256 digests of the first and of the last verified
  line with their byte positions;
- what the monitors need of those entries: the :class:`guard.cli.deployed.SessionTally` (per unit
  in start order: its calls' scores in order, its ``session_end`` statistic and review pick, its
  first and last entry and latest timestamp — open units included, so they are judged again on the
  next run — the units of other artifacts, and which unit each audit id is in,
  :class:`guard.cli.deployed.UnitIds`);
- what it is bound to: the artifact's checksum and the key id of ``--key-file`` (none: unkeyed);
- an HMAC over all of it, under the deployment key for a keyed log, else under the monitor's own
  key file ``STATE.key`` (:mod:`guard.cli.monitor_key`: created ``0600`` on the first run, used only
  when it is a regular file of the monitor's user that nobody else can read or write).  The tally
  changes results, so a state is used only when its MAC verifies: an edit of any byte of it is
  ignored with a warning, never trusted (docs/monitoring.md#the-state-file).

A run with a state reads the first and the last verified line again and checks their digests
(:func:`resume`), then reads only the bytes after the verified part, verifies each new entry
(strict JSON, hash or HMAC, chained from the stored last hash: :func:`guard.audit.check_entry`) and
adds it to the tally; the monitors are recomputed from the tally (cheap).  A state that does not
match — another format, artifact or key, a MAC that fails, a log shorter than the verified part, a
first or last verified line that changed — or that cannot be read is ignored with a warning on
stderr, and the run verifies the whole log as ``--no-state`` does; a key file that cannot be used
is a warning too, and that run neither reads nor writes a state.  Not covered: an edit inside the
verified part that keeps both anchor lines and the length (``carbguard audit verify``, keys and
checkpoints show it; docs/audit.md).  The state is written atomically (:func:`guard.jsonio.write_atomic`)
after the new entries verified; a state that cannot be written is a warning.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from guard.audit import GENESIS, AuditKey, StrictJSONError, VerifyReport, check_entry, parse_line, read_key_file
from guard.cli.deployed import SessionRecord, SessionTally, UnitIds
from guard.cli.monitor_key import KeyFileError, state_key
from guard.errors import AuditError, GuardError
from guard.jsonio import write_atomic

FORMAT = "carbguard-monitor-state/2"
SUFFIX = ".monitor-state"
_MAC_LABEL = b"carbguard-monitor-state/2\n"


@dataclass(frozen=True, slots=True)
class Cursor:
    """The verified part of the log: its bytes and entries, the last entry's hash, and the two anchor lines."""

    offset: int = 0
    entries: int = 0
    head: str = GENESIS
    head_start: int = 0
    head_digest: str = ""
    first_bytes: int = 0
    first_digest: str = ""


def read_bytes(path: str | Path, start: int, length: int | None = None) -> bytes:
    """``length`` bytes (None: all) of the log from byte ``start``: every read of the log goes through here."""
    try:
        with open(path, "rb") as handle:
            handle.seek(start)
            return handle.read() if length is None else handle.read(length)
    except OSError as exc:
        raise AuditError(f"{path}: cannot read audit log: {exc.strerror or exc}") from None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def scan(path: str | Path, cursor: Cursor, key: AuditKey | None) -> tuple[list[dict[str, Any]], Cursor]:
    """The complete entries after ``cursor``, each verified as :func:`guard.audit.verify` does, and the new cursor.

    GuardError with :func:`guard.audit.verify`'s report (line numbers of the whole log) at the first entry
    that does not verify; a final line without its newline is left for the next run.
    """
    data = read_bytes(path, cursor.offset)
    lines = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]
    entries: list[dict[str, Any]] = []
    prev = cursor.head
    for number, raw in enumerate(lines, start=cursor.entries + 1):
        try:
            entry = parse_line(raw)
            problem = check_entry(entry, prev, key)
        except StrictJSONError as exc:
            problem = ("parse", f"not strict JSON: {exc}")
        if problem is not None:
            report = VerifyReport(False, number - 1, problem[1], number, check=problem[0], keyed=key is not None)
            raise GuardError(f"{path}: audit log does not verify: {report.describe()}")
        prev = str(entry["hash"])
        entries.append(entry)
    if not lines:
        return entries, cursor
    end = cursor.offset + sum(len(raw) + 1 for raw in lines)
    first = (len(lines[0]) + 1, _digest(lines[0] + b"\n")) if cursor.entries == 0 else None
    return entries, Cursor(
        offset=end,
        entries=cursor.entries + len(lines),
        head=prev,
        head_start=end - len(lines[-1]) - 1,
        head_digest=_digest(lines[-1] + b"\n"),
        first_bytes=first[0] if first else cursor.first_bytes,
        first_digest=first[1] if first else cursor.first_digest,
    )


# --------------------------------------------------------------------------- the file


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected a count, got {value!r}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _column(columns: dict[str, Any], name: str, kind: type, size: int | None, null: bool = False) -> list[Any]:
    """One column of the session table, every value of type ``kind`` (a float: not NaN) or, with ``null``, None."""
    values = columns[name]
    if not isinstance(values, list) or (size is not None and len(values) != size):
        raise ValueError(f"sessions.{name}: not a list of {size} values")
    if not all((type(v) is kind and v == v) or (null and v is None) for v in values):  # v == v: not NaN
        raise ValueError(f"sessions.{name}: a value is not a {kind.__name__}")
    return values


def _table(tally: SessionTally) -> dict[str, list[Any]]:
    """The sessions as columns (one entry per session in start order; calls and scores flat, ``calls`` per session)."""
    records = list(tally.sessions.values())
    return {
        "ids": list(tally.sessions),
        "first": [r.first for r in records],
        "last": [r.last for r in records],
        "last_ts": [r.last_ts for r in records],
        "closed": [r.closed for r in records],
        "end": [r.end for r in records],
        "picked": [None if r.review is None else r.review[0] for r in records],
        "p": [None if r.review is None else r.review[1] for r in records],
        "calls": [len(r.scores) for r in records],
        "call_ids": [c for r in records for c in r.scores],
        "scores": [v for r in records for v in r.scores.values()],
    }


def _sessions(columns: dict[str, Any]) -> dict[str, SessionRecord]:
    """The inverse of :func:`_table`; ValueError on anything malformed."""
    ids = _column(columns, "ids", str, None)
    n = len(ids)
    first, last, calls = (_column(columns, name, int, n) for name in ("first", "last", "calls"))
    last_ts, end, p = (_column(columns, name, float, n, null=True) for name in ("last_ts", "end", "p"))
    closed, picked = _column(columns, "closed", bool, n), _column(columns, "picked", bool, n, null=True)
    call_ids = _column(columns, "call_ids", str, sum(calls))
    scores = _column(columns, "scores", float, len(call_ids), null=True)
    if any(c < 0 for c in calls) or any(
        (k is None) != (q is None) or (q is not None and not 0 < q <= 1) for k, q in zip(picked, p, strict=True)
    ):
        raise ValueError("sessions: a negative call count, or a review probability outside (0, 1]")
    out: dict[str, SessionRecord] = {}
    at = 0
    for k, sid in enumerate(ids):
        scored = dict(zip(call_ids[at : at + calls[k]], scores[at : at + calls[k]], strict=True))
        at += calls[k]
        review = None if picked[k] is None else (picked[k], p[k])
        out[sid] = SessionRecord(scored, end[k], closed[k], first[k], last[k], last_ts[k], review)
    if len(out) != n:
        raise ValueError("sessions: a session id appears twice")
    return out


@dataclass(frozen=True, slots=True)
class StateKey:
    """What a state is bound to and MAC'ed with: ``--key-file``'s key id (None: unkeyed) and the MAC key."""

    key_id: str | None
    mac: bytes

    @classmethod
    def of(cls, key: AuditKey | None, state: Path) -> StateKey:
        """The deployment key's for a keyed log, else the state's own key file's (KeyFileError if unusable)."""
        return cls(None, state_key(state)) if key is None else cls(key.key_id, key.chain)

    def sign(self, body: bytes) -> str:
        """The MAC of a state body."""
        return hmac.new(self.mac, _MAC_LABEL + body, hashlib.sha256).hexdigest()


def _units(units: UnitIds) -> dict[str, list[list[Any]]]:
    return {"open": [[sid, unit] for sid, unit in units.open.items()], "runs": [[s, k] for s, k in units.runs.items()]}


def _read_units(data: dict[str, Any], used: set[str]) -> UnitIds:
    """The inverse of :func:`_units` (``used``: every unit id of the tally); ValueError on anything malformed."""
    pairs = {name: data[name] for name in ("open", "runs")}
    if not all(isinstance(v, list) and all(isinstance(p, list) and len(p) == 2 for p in v) for v in pairs.values()):
        raise ValueError("units: not lists of pairs")
    units = UnitIds({_text(s): _text(u) for s, u in pairs["open"]}, {_text(s): _count(k) for s, k in pairs["runs"]})
    units.used = used
    if not set(units.open.values()) <= used or any(k < 2 for k in units.runs.values()):
        raise ValueError("units: an open unit the tally does not hold, or a run number below 2")
    return units


def encode(cursor: Cursor, tally: SessionTally, key: StateKey) -> bytes:
    """The state file: a header line (format, key id, MAC) and the body."""
    state = {
        "format": FORMAT,
        "artifact": tally.checksum,
        "key_id": key.key_id,
        "log": {f.name: getattr(cursor, f.name) for f in fields(Cursor)},
        "entries": tally.total,
        "ignored": tally.ignored,
        "others": sorted(tally.others),
        "sessions": _table(tally),
        "units": _units(tally.units),
    }
    # ±inf scores as Infinity (Python's JSON; the state is read by this module only); NaN never occurs
    body = json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    header = {"format": FORMAT, "key_id": key.key_id, "mac": key.sign(body)}
    return json.dumps(header).encode("utf-8") + b"\n" + body


def decode(data: bytes, checksum: str, key: StateKey) -> tuple[Cursor, SessionTally]:
    """The cursor and tally of a state file; ValueError saying why it is not one for this artifact and key.

    The MAC is checked before anything of the body is read; the header's key id only names the key
    a state of another key was made with.
    """
    head, _, body = data.partition(b"\n")
    header = json.loads(head)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} file")
    if header.get("key_id") != key.key_id:
        raise ValueError(f"it was made with key id {header.get('key_id')}, not {key.key_id}")
    if not hmac.compare_digest(str(header.get("mac")), key.sign(body)):
        where = "--key-file" if key.key_id is not None else "its key file"
        raise ValueError(f"its MAC does not verify under {where} (the state was edited, or made with another key)")
    state = json.loads(body)
    if state.get("key_id") != key.key_id or state.get("format") != FORMAT:
        raise ValueError("its body does not match its header")
    if state.get("artifact") != checksum:
        raise ValueError("it was made for another artifact")
    log = state["log"]
    texts = {"head", "head_digest", "first_digest"}
    values: dict[str, Any] = {name: (_text if name in texts else _count)(log[name]) for name in log}
    cursor = Cursor(**values)
    tally = SessionTally(checksum, ignored=_count(state["ignored"]), total=_count(state["entries"]))
    tally.others = {_text(sid) for sid in state["others"]}
    tally.sessions = _sessions(state["sessions"])
    tally.units = _read_units(state["units"], set(tally.sessions) | tally.others)
    if tally.total != cursor.entries:
        raise ValueError("its tally and its log position disagree")
    return cursor, tally


def _anchors_differ(path: str | Path, cursor: Cursor) -> str | None:
    """Why the log no longer starts with the part the state verified (None: its anchors still match)."""
    size = os.stat(path).st_size
    if size < cursor.offset:
        return f"the log has {size} bytes, fewer than the {cursor.offset} it verified (entries removed, or replaced)"
    if cursor.entries and _digest(read_bytes(path, 0, cursor.first_bytes)) != cursor.first_digest:
        return "the log's first entry is not the one it verified (another log, or a rewritten one)"
    if cursor.entries and _digest(read_bytes(path, cursor.head_start, cursor.offset - cursor.head_start)) != (
        cursor.head_digest
    ):
        return f"entry {cursor.entries}, the last it verified, changed (the log was rewritten before it)"
    return None


def _warn(state: Path, why: str) -> None:
    print(f"warning: monitor state {state}: {why}; ignored, verifying the whole log", file=sys.stderr)


def resume(audit: str, state: Path | None, checksum: str, key: StateKey | None) -> tuple[Cursor, SessionTally]:
    """Where to go on from: the state's cursor and tally if it matches the log, else the start (said on stderr)."""
    start = (Cursor(), SessionTally(checksum))
    if state is None or key is None:
        return start
    try:
        data = state.read_bytes()
    except FileNotFoundError:
        return start
    except OSError as exc:
        _warn(state, f"cannot be read ({exc.strerror or exc})")
        return start
    try:
        cursor, tally = decode(data, checksum, key)
        why = _anchors_differ(audit, cursor)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, RecursionError) as exc:
        why = f"not usable: {str(exc)[:200] or type(exc).__name__}"
    except OSError:
        return start  # the log cannot be read: the full read says so
    if why is not None:
        _warn(state, why)
        return start
    return cursor, tally


def _state_key(key: AuditKey | None, state: Path | None) -> StateKey | None:
    """The state's key (None: no state this run; a key file that cannot be used is said on stderr)."""
    if state is None:
        return None
    try:
        return StateKey.of(key, state)
    except KeyFileError as exc:
        print(f"warning: monitor state {state}: {exc}; verifying the whole log, no state written", file=sys.stderr)
        return None


def read_log(audit: str, checksum: str, key_file: str | None, state: Path | None) -> SessionTally:
    """The tally of the whole verified log, reading only what the state has not seen; the state brought up to date."""
    key = AuditKey.derive(read_key_file(key_file)) if key_file else None
    signer = _state_key(key, state)
    cursor, tally = resume(audit, state, checksum, signer)
    entries, after = scan(audit, cursor, key)
    tally.add(entries)
    if state is not None and signer is not None and (after != cursor or not state.exists()):
        try:
            write_atomic(state, encode(after, tally, signer))
        except (OSError, ValueError) as exc:
            print(
                f"warning: monitor state {state}: cannot be written ({exc}); next run reads the whole log",
                file=sys.stderr,
            )
    return tally


def state_path(args: argparse.Namespace) -> Path | None:
    """``--state``, or ``AUDIT.monitor-state``; None with ``--no-state``."""
    if args.no_state:
        return None
    return Path(args.state) if args.state else Path(f"{args.audit}{SUFFIX}")


def add_state_options(parser: Any) -> None:
    """``--state`` and ``--no-state`` (``carbguard monitor``)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--state",
        metavar="FILE",
        help=f"the state file that lets each run read only the entries added since the last (default AUDIT{SUFFIX}); "
        "MAC'ed under --key-file, or for an unkeyed log under its own key file FILE.key (made 0600); a state "
        "that does not match the log, artifact or key, or whose MAC fails, is ignored with a warning",
    )
    group.add_argument(
        "--no-state",
        action="store_true",
        help="read and verify the whole log; neither read nor write a state file",
    )


__all__ = [
    "FORMAT",
    "SUFFIX",
    "Cursor",
    "StateKey",
    "add_state_options",
    "read_bytes",
    "read_log",
    "resume",
    "scan",
    "state_path",
]
