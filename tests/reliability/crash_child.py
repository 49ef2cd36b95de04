"""Child processes of test_crash_durability: decide, and "execute" allowed calls, until killed.

Usage: ``python crash_child.py AUDIT TOOL_LOG`` starts a *zygote*: it imports carbguard once, then
reads one JSON command per line on stdin (``{"prefix": ..., "mode": "run" | "tear", "tear_after":
n}``) and forks a worker for each (imports are the slow part of starting a Python process; a fork
of an idle single-threaded process is cheap and safe).  Each worker:

- every decision goes through a :class:`guard.audit.AuditLog` on ``AUDIT`` (fsync on, the default);
- after ``decide`` returns ``execute``, the child "runs" the tool: it appends one JSON line
  ``{"session", "call_id", "audit_size"}`` to ``TOOL_LOG`` with a single ``write`` on an
  ``O_APPEND`` descriptor (``audit_size`` = the audit file's size when the tool ran);
- it writes ``ready <pid>`` to stdout once its first decision is written, then loops until killed;
- ``MODE=tear``: after ``TEAR_AFTER`` decisions it takes the audit file's lock, writes the first
  half of an entry (as a crash in the middle of ``AuditLog.write`` would leave it) and kills itself
  with SIGKILL while holding the lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from guard.audit import AuditLog
from guard.policy import parse_policy
from guard.runtime import Guard

POLICY: dict[str, Any] = {
    "version": 1,
    "name": "crash",
    "tools": {
        "read_certificate": {"kind": "private_source"},
        "read_document": {"kind": "public_source"},
        "send_email": {"kind": "sink", "effect": "irreversible", "payload_args": ["body"], "identifier_args": ["to"]},
        "post_note": {"kind": "sink", "effect": "reversible", "payload_args": ["body"]},
    },
}
CERT = "Certificate: passport\nNumber: X4821-99317"


def step(guard: Guard, session: Any, k: int) -> tuple[str, str, Any]:
    call_id = f"c{k}"
    kind = k % 4
    if kind == 0:
        return call_id, "read_certificate", session.decide("read_certificate", {"name": "passport"}, call_id)
    if kind == 1:
        return (
            call_id,
            "send_email",
            session.decide("send_email", {"to": "x@p.example", "body": "X4821-99317"}, call_id),
        )
    if kind == 2:
        return call_id, "read_document", session.decide("read_document", {"path": "press.md"}, call_id)
    return call_id, "post_note", session.decide("post_note", {"body": f"note {k}"}, call_id)


def tear(audit: Path) -> None:
    """Half an entry written under the lock, then SIGKILL: a crash in the middle of a write."""
    with open(audit, "ab") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(b'{"session": "torn", "call_id": "c-torn", "verdict": "exec')
        handle.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def worker(audit: Path, tool_log: Path, prefix: str, mode: str, tear_after: int) -> None:
    guard = Guard(parse_policy(POLICY), threshold=0.5, audit=AuditLog(audit))
    fd = os.open(tool_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    decided = 0
    n = 0
    while True:
        session = guard.session(f"{prefix}-{n}")
        session.observe_user("Send the press release to our partners.")
        for k in range(8):
            call_id, tool, decision = step(guard, session, k)
            decided += 1
            if decided == 1:
                os.write(1, f"ready {os.getpid()}\n".encode())
            if decision.allowed:
                size = audit.stat().st_size
                line = json.dumps({"session": session.session_id, "call_id": call_id, "audit_size": size}) + "\n"
                os.write(fd, line.encode("utf-8"))
                session.observe_result(call_id, CERT if tool == "read_certificate" else f"{tool} done")
            if mode == "tear" and decided == tear_after:
                tear(audit)
        n += 1


def zygote(audit: Path, tool_log: Path) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped automatically
    os.write(1, b"zygote\n")
    for line in sys.stdin:
        command = json.loads(line)
        if os.fork() == 0:
            try:
                worker(audit, tool_log, command["prefix"], command["mode"], int(command.get("tear_after", -1)))
            finally:
                os._exit(1)


if __name__ == "__main__":
    zygote(Path(sys.argv[1]), Path(sys.argv[2]))
