"""Hash-chained JSON-lines audit log (METHOD §12), written through structlog, and its verifier.

Each line is one JSON object with ``prev`` (the SHA-256 of the previous entry's ``hash``; 64 zeros
for the first) and ``hash`` (the SHA-256 of the entry's canonical JSON without ``hash``).  An edited
line fails its own hash; a removed or reordered line breaks the chain at the next line.  A final
line without its newline is reported as *torn* (a crash mid-write), not as tampering.  Entries are
flushed and fsync'ed before :meth:`AuditLog.write` returns; an ``flock`` keeps writers from several
processes from interleaving.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from guard.errors import AuditError

GENESIS = "0" * 64


def entry_hash(entry: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``entry`` without its ``hash`` field."""
    body = {k: v for k, v in entry.items() if k != "hash"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _chain(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    event["hash"] = entry_hash(event)
    return event


class AuditLog:
    """An append-only, hash-chained JSON-lines file shared by every session of a guard."""

    def __init__(self, path: str | Path, *, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._render = structlog.processors.JSONRenderer(sort_keys=True, ensure_ascii=False, allow_nan=False)

    def write(self, entry: Mapping[str, Any]) -> None:
        """Append ``entry`` to the chain, flushed and synced before returning; raise AuditError."""
        try:
            with self._lock, open(self.path, "a+b") as handle:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    prev, torn = _tail(handle)
                    if torn:
                        handle.truncate(handle.seek(0, os.SEEK_END) - torn)
                    event = {**entry, "prev": prev, **({"recovered_torn_bytes": torn} if torn else {})}
                    line = self._render(None, "audit", _chain(None, "audit", event))
                    data = line if isinstance(line, bytes) else line.encode("utf-8")
                    handle.write(data + b"\n")
                    handle.flush()
                    if self.fsync:
                        os.fsync(handle.fileno())
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        except (OSError, TypeError, ValueError) as exc:
            raise AuditError(f"{self.path}: cannot write audit entry: {exc}") from exc


def _tail(handle: Any) -> tuple[str, int]:
    """``(hash of the last complete line, bytes of a torn partial line after it)``."""
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
    return str(json.loads(complete[-1])["hash"]), torn


class MemoryAudit:
    """An in-memory audit sink that keeps the same chain (for tests and replay)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def write(self, entry: Mapping[str, Any]) -> None:
        """Append a chained copy of ``entry``."""
        with self._lock:
            prev = self.entries[-1]["hash"] if self.entries else GENESIS
            event = json.loads(json.dumps({**entry, "prev": prev}, allow_nan=False))
            self.entries.append(_chain(None, "audit", event))


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What :func:`verify` found."""

    ok: bool
    entries: int
    problem: str | None = None
    line: int | None = None
    torn_tail: bool = False

    def describe(self) -> str:
        """One human-readable sentence."""
        if self.ok and self.torn_tail:
            return f"OK: {self.entries} entries verify; the final line is torn (incomplete write), not tampered"
        if self.ok:
            return f"OK: {self.entries} entries verify"
        return f"FAILED at line {self.line}: {self.problem}"


def verify(path: str | Path) -> VerifyReport:
    """Check every line's hash and the chain; report the first edited, reordered or removed line."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise AuditError(f"{path}: cannot read audit log: {exc.strerror or exc}") from None
    lines = data.split(b"\n")
    torn = not data.endswith(b"\n") and data != b""
    complete = lines[:-1]
    prev = GENESIS
    for number, raw in enumerate(complete, start=1):
        problem = _check_line(raw, prev)
        if problem is not None:
            return VerifyReport(False, number - 1, problem, number)
        prev = json.loads(raw)["hash"]
    return VerifyReport(True, len(complete), torn_tail=torn)


def _check_line(raw: bytes, prev: str) -> str | None:
    try:
        entry = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return "not valid JSON (edited or corrupted)"
    if not isinstance(entry, dict) or "hash" not in entry or "prev" not in entry:
        return "not an audit entry (no hash/prev fields)"
    if entry_hash(entry) != entry["hash"]:
        return "content does not match its hash (entry edited)"
    if entry["prev"] != prev:
        return "chain broken: previous entry removed, inserted or reordered"
    return None


def read_entries(path: str | Path) -> list[dict[str, Any]]:
    """Every complete entry of an audit log (no verification)."""
    data = Path(path).read_bytes().split(b"\n")[:-1]
    return [json.loads(raw) for raw in data if raw]
