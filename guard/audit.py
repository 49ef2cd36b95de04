"""Hash-chained JSON-lines audit log (docs/audit.md), written through structlog, its verifier and checkpoints.

Each line is one JSON object with ``prev`` (the previous entry's ``hash``; 64 zeros for the first)
and ``hash`` over the entry's canonical JSON without ``hash``:

- *unkeyed* (``AuditLog(path)``): ``hash`` is a SHA-256.  An edited line fails its own hash; a
  removed or reordered line breaks the chain at the next line.  Anyone can recompute the chain, so it
  does not show a rewritten log, nor entries cut at the end.
- *keyed* (``AuditLog(path, key=...)``): ``hash`` is an HMAC-SHA256 under a key derived from the
  deployment key, and every entry carries ``chain: "hmac-sha256"`` and a ``key_id`` (an HMAC of a
  constant: it names the key without revealing it; the key itself is never written).  Without the
  key no one can write an entry that verifies, so a rewritten or re-chained log fails.
- *checkpoints* (:func:`checkpoint`): the entry count and last hash, exported outside the log (keyed:
  with a MAC).  ``verify(path, checkpoint=...)`` then also shows entries removed at the end.

A final line without its newline is *torn* (a crash mid-write), not tampering; the next writer drops
it and records ``recovered_torn_bytes``.  Entries are fsync'ed before :meth:`AuditLog.write` returns;
an ``flock`` keeps processes from interleaving.  Lines are parsed strictly (:func:`parse_line`):
duplicate keys, ``NaN``/``Infinity``, overflowing numbers and lone surrogates are refused.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import math
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import structlog

from guard.errors import AuditError
from guard.jsonio import has_lone_surrogate

GENESIS = "0" * 64
KEYED = "hmac-sha256"
CHECKPOINT_FORMAT = "carbguard-audit-checkpoint/1"
MIN_KEY_BYTES = 16


@dataclass(frozen=True, slots=True)
class AuditKey:
    """Keys derived from a deployment key: one for the chain, one for argument hashes, and its public id."""

    chain: bytes
    values: bytes
    key_id: str

    @classmethod
    def derive(cls, key: bytes) -> AuditKey:
        """Derive the keys; AuditError for a key shorter than 16 bytes."""
        if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
            raise AuditError(f"an audit key must be at least {MIN_KEY_BYTES} bytes")
        labels = (b"chain", b"values", b"key-id")
        chain, values, key_id = (hmac.new(key, b"carbguard-audit/" + k, "sha256").digest() for k in labels)
        return cls(chain, values, key_id.hex()[:16])

    def __repr__(self) -> str:  # never show key material
        return f"AuditKey(key_id={self.key_id!r})"


def read_key_file(path: str | Path) -> bytes:
    """The deployment key in ``path`` (surrounding whitespace dropped); AuditError naming the file."""
    try:
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise AuditError(f"{path}: cannot read key file: {exc.strerror or exc}") from None
    if len(key) < MIN_KEY_BYTES:
        raise AuditError(f"{path}: key file holds {len(key)} bytes; an audit key needs at least {MIN_KEY_BYTES}")
    return key


def _canonical(entry: Mapping[str, Any], drop: str) -> bytes:
    body = {k: v for k, v in entry.items() if k != drop}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8")


def entry_hash(entry: Mapping[str, Any], key: AuditKey | None = None) -> str:
    """SHA-256 (or, with ``key``, HMAC-SHA256) of the canonical JSON of ``entry`` without its ``hash``."""
    body = _canonical(entry, "hash")
    if key is None:
        return hashlib.sha256(body).hexdigest()
    return hmac.new(key.chain, body, hashlib.sha256).hexdigest()


# --------------------------------------------------------------------------- writing


class AuditLog:
    """An append-only, hash-chained JSON-lines file shared by every session of a guard.

    ``key`` (bytes, at least 16) makes the chain keyed and argument hashes keyed HMACs; it is kept
    in memory only, never written or logged.
    """

    def __init__(self, path: str | Path, *, fsync: bool = True, key: bytes | None = None) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.key = AuditKey.derive(key) if key is not None else None
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._render = structlog.processors.JSONRenderer(sort_keys=True, ensure_ascii=False, allow_nan=False)

    @property
    def value_key(self) -> bytes | None:
        """The key argument hashes use (None: unkeyed SHA-256 prefixes)."""
        return self.key.values if self.key is not None else None

    def write(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` to the chain, flushed and synced before returning; raise AuditError."""
        try:
            with self._lock, open(self.path, "a+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    prev, torn = _tail(handle, self.key)
                    if torn:
                        handle.truncate(handle.seek(0, os.SEEK_END) - torn)
                    event = _chained(entry, prev, self.key, {"recovered_torn_bytes": torn} if torn else {})
                    line = self._render(None, "audit", event)
                    data = line if isinstance(line, bytes) else line.encode("utf-8")
                    handle.write(data + b"\n")
                    handle.flush()
                    if self.fsync:
                        os.fsync(handle.fileno())
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        except (OSError, TypeError, ValueError) as exc:
            raise AuditError(f"{self.path}: cannot write audit entry: {exc}") from exc


def _chained(entry: Mapping[str, Any], prev: str, key: AuditKey | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = {**entry, **extra, "prev": prev}
    if key is not None:
        event.update(chain=KEYED, key_id=key.key_id)
    event.pop("hash", None)
    event["hash"] = entry_hash(event, key)
    return event


def _tail(handle: Any, key: AuditKey | None) -> tuple[str, int]:
    """``(hash of the last complete line, bytes of a torn partial line after it)``; refuse a mode change."""
    handle.seek(0, os.SEEK_END)
    end = handle.tell()
    start = end
    chunk = b""
    while start > 0 and chunk.count(b"\n") < 2:
        start = max(0, start - 65536)
        handle.seek(start)
        chunk = handle.read(end - start)
    cut = chunk.rfind(b"\n") + 1
    torn = len(chunk) - cut
    complete = [line for line in chunk[:cut].split(b"\n") if line]
    if not complete:
        return GENESIS, torn
    last = parse_line(complete[-1])
    if not isinstance(last.get("hash"), str):
        raise ValueError("the last line is not an audit entry; run `carbguard audit verify`")
    if (last.get("chain") == KEYED) != (key is not None):
        have = "keyed" if last.get("chain") == KEYED else "unkeyed"
        raise ValueError(f"the log is {have}; this writer is {'keyed' if key else 'unkeyed'} (one log, one mode)")
    if key is not None and last.get("key_id") != key.key_id:
        raise ValueError("the log was written with another key")
    return last["hash"], torn


@runtime_checkable
class KeyedSink(Protocol):
    """A sink whose ``value_key`` keys argument hashes (:class:`AuditLog`, :class:`MemoryAudit`; None: unkeyed)."""

    @property
    def value_key(self) -> bytes | None: ...


class MemoryAudit:
    """An in-memory audit sink that keeps the same chain (for tests and replay)."""

    value_key = AuditLog.value_key

    def __init__(self, key: bytes | None = None) -> None:
        self.entries: list[dict[str, Any]] = []
        self.key = AuditKey.derive(key) if key is not None else None
        self._lock = threading.Lock()

    def write(self, entry: Mapping[str, Any]) -> None:
        """Append a chained copy of ``entry``."""
        with self._lock:
            prev = self.entries[-1]["hash"] if self.entries else GENESIS
            copy = json.loads(json.dumps(dict(entry), allow_nan=False))
            self.entries.append(_chained(copy, prev, self.key, {}))


# --------------------------------------------------------------------------- strict parsing


class StrictJSONError(ValueError):
    """A line that is not strict JSON (duplicate key, non-finite number, lone surrogate, bad UTF-8)."""


def _no_constant(name: str) -> Any:
    raise StrictJSONError(f"non-finite number {name}")


def _finite(text: str) -> float:  # 1e999 parses to inf
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError(f"number {text[:40]} overflows to infinity")
    return value


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in pairs:
        if name in out:
            raise StrictJSONError(f"duplicate key {_shown(name)!r}")
        out[name] = value
    return out


def _shown(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")[:60]


def _check_text(value: Any) -> None:  # json.loads turns "\ud800" into a lone surrogate
    if has_lone_surrogate(value):
        raise StrictJSONError("lone surrogate in a string")


def parse_line(raw: bytes) -> dict[str, Any]:
    """One audit line parsed strictly; StrictJSONError saying why it is refused."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StrictJSONError(f"not UTF-8 at byte {exc.start}") from None
    try:
        value = json.loads(text, object_pairs_hook=_unique, parse_constant=_no_constant, parse_float=_finite)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise StrictJSONError(f"not valid JSON ({str(exc)[:80]})") from None
    _check_text(value)
    if not isinstance(value, dict):
        raise StrictJSONError(f"a JSON {type(value).__name__}, not an object")
    return value


def read_entries(path: str | Path) -> list[dict[str, Any]]:
    """Every complete entry of an audit log, parsed strictly (no chain check); AuditError naming the line."""
    try:
        data = Path(path).read_bytes().split(b"\n")[:-1]
    except OSError as exc:
        raise AuditError(f"{path}: cannot read audit log: {exc.strerror or exc}") from None
    out = []
    for number, raw in enumerate(data, start=1):
        if raw:
            try:
                out.append(parse_line(raw))
            except StrictJSONError as exc:
                raise AuditError(f"{path}: line {number}: {exc}") from None
    return out


# --------------------------------------------------------------------------- verification and checkpoints


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :func:`verify` found; ``check`` names the check that failed (parse, hash, chain, key, checkpoint)."""

    ok: bool
    entries: int
    problem: str | None = None
    line: int | None = None
    torn_tail: bool = False
    keyed: bool = False
    check: str | None = None
    last_hash: str = GENESIS
    checkpoint: int | None = None

    def describe(self) -> str:
        """One human-readable sentence."""
        if not self.ok:
            return f"FAILED at line {self.line}: {self.check} check: {self.problem}"
        text = f"OK: {self.entries} entries verify" + (" (keyed chain)" if self.keyed else "")
        if self.checkpoint is not None:
            text += f"; the checkpoint of {self.checkpoint} entries matches"
        if self.torn_tail:
            text += "; the final line is torn (incomplete write), not tampered"
        if not self.keyed:  # anyone can recompute an unkeyed chain (and its checkpoint)
            cut = "truncation, " if self.checkpoint is None else ""
            text += f"; chain intact; NOT checked: {cut}re-chaining (unkeyed log; use a key and checkpoints)"
        return text


def verify(path: str | Path, *, key: bytes | None = None, checkpoint: Mapping[str, Any] | None = None) -> VerifyReport:
    """Check every line (strict JSON, hash, chain; with ``key`` the HMAC chain), then ``checkpoint``.

    Reports the first line that fails and which check failed; never raises for a bad log (AuditError
    only when the file cannot be read, the key is too short or the checkpoint is malformed).
    """
    derived = AuditKey.derive(key) if key is not None else None
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise AuditError(f"{path}: cannot read audit log: {exc.strerror or exc}") from None
    complete = data.split(b"\n")[:-1]
    torn = not data.endswith(b"\n") and data != b""
    prev = GENESIS
    for number, raw in enumerate(complete, start=1):
        problem = _check_line(raw, prev, derived)
        if problem is not None:
            return VerifyReport(False, number - 1, problem[1], number, check=problem[0], keyed=derived is not None)
        prev = str(json.loads(raw)["hash"])
    report = VerifyReport(True, len(complete), torn_tail=torn, keyed=derived is not None, last_hash=prev)
    return report if checkpoint is None else _against(report, complete, checkpoint, derived)


def _check_line(raw: bytes, prev: str, key: AuditKey | None) -> tuple[str, str] | None:
    try:
        entry = parse_line(raw)
    except StrictJSONError as exc:
        return "parse", f"not strict JSON: {exc}"
    return check_entry(entry, prev, key)


def check_entry(entry: Mapping[str, Any], prev: str, key: AuditKey | None) -> tuple[str, str] | None:
    """:func:`verify`'s checks of one parsed entry after ``prev``: None, or ``(check, problem)``."""
    if not isinstance(entry.get("hash"), str) or "prev" not in entry:
        return "parse", "not an audit entry (no hash/prev fields)"
    keyed = entry.get("chain") == KEYED
    if key is None and keyed:
        return "key", f"the entry is keyed (HMAC-SHA256, key id {entry.get('key_id')}); verify it with --key-file"
    if key is not None and not keyed:
        return "key", "the entry is not keyed: written without the key, or the log was rewritten without it"
    if key is not None and entry.get("key_id") != key.key_id:
        return "key", f"the entry was keyed with another key (key id {entry.get('key_id')}, yours {key.key_id})"
    if entry_hash(entry, key) != entry["hash"]:
        return "hash", f"content does not match its {'HMAC' if key else 'hash'} (entry edited)"
    if entry["prev"] != prev:
        return "chain", "chain broken: previous entry removed, inserted or reordered"
    return None


def checkpoint(path: str | Path, *, key: bytes | None = None) -> dict[str, Any]:
    """A checkpoint of a verifying log: entry count and last hash (keyed: with a MAC); AuditError otherwise."""
    report = verify(path, key=key)
    if not report.ok:
        raise AuditError(f"{path}: no checkpoint of a log that does not verify: {report.describe()}")
    body: dict[str, Any] = {"format": CHECKPOINT_FORMAT, "entries": report.entries, "last_hash": report.last_hash}
    if key is not None:
        derived = AuditKey.derive(key)
        body.update(keyed=True, key_id=derived.key_id)
        body["mac"] = hmac.new(derived.chain, _canonical(body, "mac"), hashlib.sha256).hexdigest()
    else:
        body["keyed"] = False
    return body


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """A checkpoint file, parsed strictly; AuditError naming the file and what is wrong."""
    try:
        body = parse_line(Path(path).read_bytes().strip())
    except OSError as exc:
        raise AuditError(f"{path}: cannot read checkpoint: {exc.strerror or exc}") from None
    except StrictJSONError as exc:
        raise AuditError(f"{path}: not a checkpoint: {exc}") from None
    entries, last = body.get("entries"), body.get("last_hash")
    if body.get("format") != CHECKPOINT_FORMAT or type(entries) is not int or entries < 0 or not isinstance(last, str):
        raise AuditError(f"{path}: not a checkpoint (format {CHECKPOINT_FORMAT} with entries and last_hash)")
    return body


def _against(report: VerifyReport, lines: list[bytes], point: Mapping[str, Any], key: AuditKey | None) -> VerifyReport:
    count, last, keyed, given = (point.get(k) for k in ("entries", "last_hash", "keyed", "mac"))
    if type(count) is not int or count < 0 or not isinstance(last, str) or not isinstance(given, str | None):
        raise AuditError("not a checkpoint (entries and last_hash missing, or a mac that is not a string)")

    def failed(line: int, problem: str) -> VerifyReport:
        return VerifyReport(False, report.entries, problem, line, report.torn_tail, report.keyed, "checkpoint")

    if key is None and ((keyed is not None and keyed is not False) or given is not None):
        return failed(max(count, 1), "the checkpoint is keyed; verify it with --key-file")
    if key is not None:  # against a keyed log, only a checkpoint MAC'd with its key counts
        if keyed is not True or given is None:
            return failed(max(count, 1), "the checkpoint carries no MAC; a keyed log needs `checkpoint --key-file`")
        mac = hmac.new(key.chain, _canonical(point, "mac"), hashlib.sha256).hexdigest()
        if point.get("key_id") != key.key_id or not hmac.compare_digest(given.encode(), mac.encode()):
            return failed(max(count, 1), "the checkpoint's MAC does not verify (edited, or made with another key)")
    if count > len(lines):
        return failed(
            len(lines) + 1, f"the checkpoint records {count} entries; the log ends after {len(lines)} (entries removed)"
        )
    have = json.loads(lines[count - 1])["hash"] if count else GENESIS
    if have != last:
        return failed(max(count, 1), f"entry {count} differs from the checkpoint's last hash (the log was rewritten)")
    return VerifyReport(True, report.entries, None, None, report.torn_tail, report.keyed, None, report.last_hash, count)
