"""Crash durability: children killed with SIGKILL at random points never lose a write-ahead entry.

Each trial starts child processes (``crash_child.py``) that decide tool calls through one shared
``AuditLog`` file (fsync on) and "execute" the allowed calls by appending to a separate tool log
only after ``decide`` returned ``execute``.  The parent kills them with SIGKILL after a seeded
random delay — usually two children at once on the same audit file, so kills also land while the
other process holds the file lock.  Some trials instead tear the log: the child writes half an
entry under the lock and kills itself, as a crash inside ``AuditLog.write`` would.

After every trial:

- every tool call a child executed has a complete ``execute`` entry in the audit file, and that
  entry ends at or before the byte offset the audit file had when the tool ran (write-ahead);
- the audit file verifies up to its last complete line;
- a torn final line is reported as torn (``torn_tail``, "not tampered"), not as tampering, and the
  next writer recovers it (the truncated bytes are recorded in its entry).

SIGKILL tests process crashes (the page cache survives); power loss is what the fsync defends
against and cannot be simulated here.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from guard.audit import verify
from guard.cli import main as cli_main

CHILD = Path(__file__).resolve().parent / "crash_child.py"
SEED = 20240611
TRIALS = 30
TEAR_TRIALS = 5
GROUP = 3
MAX_DELAY_S = 0.25
TIMEOUT_S = 60


class Zygote:
    """The child process that forks workers on request (see crash_child.py)."""

    def __init__(self, audit: Path, tools: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(audit), str(tools)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._buffer = b""
        assert self.readline() == "zygote"

    def readline(self) -> str:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + TIMEOUT_S
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                raise AssertionError(f"child stopped talking: {self._buffer!r} {self.error()}")
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def spawn(self, prefix: str, mode: str = "run", tear_after: int = -1) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"prefix": prefix, "mode": mode, "tear_after": tear_after}).encode() + b"\n")
        self.proc.stdin.flush()

    def ready(self) -> int:
        word, _, pid = self.readline().partition(" ")
        assert word == "ready", word
        return int(pid)

    def error(self) -> str:
        self.proc.kill()
        _, err = self.proc.communicate(timeout=TIMEOUT_S)
        return err.decode(errors="replace")[-2000:]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=TIMEOUT_S)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdout.close()
        err = self.proc.stderr.read().decode(errors="replace")
        self.proc.stderr.close()
        assert self.proc.returncode == 0, err[-2000:]


def wait_gone(pid: int) -> None:
    """Wait until ``pid`` has died and been reaped (the zygote reaps its workers)."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.005)
    raise AssertionError(f"worker {pid} is still alive")


def lines_with_offsets(path: Path) -> list[tuple[dict[str, Any], int]]:
    """Every complete line of the audit file as (entry, byte offset of its end)."""
    data = path.read_bytes()
    out, offset = [], 0
    for raw in data.split(b"\n")[:-1]:
        offset += len(raw) + 1
        out.append((json.loads(raw), offset))
    return out


def executed_calls(path: Path) -> list[dict[str, Any]]:
    """The tool log's complete lines (a line cut by the kill is not an executed call)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    return [json.loads(raw) for raw in data.split(b"\n")[:-1] if raw]


def check_write_ahead(audit: Path, tools: Path) -> tuple[int, int]:
    """Every executed call has a complete execute entry ending before the tool ran; return counts."""
    entries = {(e.get("session"), e.get("call_id")): (e, end) for e, end in lines_with_offsets(audit)}
    calls = executed_calls(tools)
    for call in calls:
        key = (call["session"], call["call_id"])
        assert key in entries, f"executed call {key} has no audit entry"
        entry, end = entries[key]
        assert entry["verdict"] == "execute", (key, entry["verdict"])
        assert end <= call["audit_size"], f"entry of {key} ends at {end}, after the tool ran at {call['audit_size']}"
    return len(calls), len(entries)


def test_sigkill_at_random_points_never_loses_a_write_ahead_entry(tmp_path: Path, capsys: Any) -> None:
    rng = random.Random(SEED)
    audit, tools = tmp_path / "audit.jsonl", tmp_path / "tools.log"
    kinds = ["tear"] * TEAR_TRIALS + ["kill"] * (TRIALS - TEAR_TRIALS)
    rng.shuffle(kinds)
    zygote = Zygote(audit, tools)
    trials = tears = 0
    i = 0
    try:
        while i < len(kinds):
            if kinds[i] == "tear":
                zygote.spawn(f"tear{i}", "tear", tear_after=rng.randint(3, 40))
                wait_gone(zygote.ready())
                trials, tears, i = trials + 1, tears + 1, i + 1
                report = verify(audit)
                assert report.ok and report.torn_tail, report.describe()
                assert "torn" in report.describe() and "FAILED" not in report.describe()
                capsys.readouterr()
                assert cli_main(["audit", "verify", str(audit)]) == 4  # unkeyed: intact, not authenticated
                assert "not tampered" in capsys.readouterr().out
            else:
                group = [j for j in range(i, min(i + GROUP, len(kinds))) if kinds[j] == "kill"]
                group = group[: next((n for n, j in enumerate(group) if j != i + n), len(group))]
                for j in group:
                    zygote.spawn(f"k{j}")
                pids = [zygote.ready() for _ in group]
                t0 = time.monotonic()
                for pid, delay in sorted(((p, rng.uniform(0, MAX_DELAY_S)) for p in pids), key=lambda pd: pd[1]):
                    time.sleep(max(0.0, delay - (time.monotonic() - t0)))
                    os.kill(pid, signal.SIGKILL)
                for pid in pids:
                    wait_gone(pid)
                trials, i = trials + len(group), i + len(group)
                report = verify(audit)
                assert report.ok, report.describe()
            check_write_ahead(audit, tools)
    finally:
        zygote.close()

    assert trials == TRIALS and tears == TEAR_TRIALS
    executed, entries = check_write_ahead(audit, tools)
    assert executed > 50 and entries >= executed
    final = verify(audit)
    assert final.ok, final.describe()
    # every tear that a later writer saw was recovered, with the truncated byte count in its entry; a
    # SIGKILL that lands inside a write tears the tail too, so kills can add recoveries, never remove them
    recovered = sum("recovered_torn_bytes" in e for e, _ in lines_with_offsets(audit))
    assert TEAR_TRIALS - (1 if final.torn_tail else 0) <= recovered <= TRIALS
    print(f"crash trials={trials} tears={tears} executed={executed} entries={entries} recovered={recovered}")


def test_a_torn_line_in_the_middle_is_tampering_not_a_torn_tail(tmp_path: Path) -> None:
    """Only the *final* line may be torn; a cut line followed by more lines breaks verification."""
    from guard.audit import AuditLog

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync=False)
    for k in range(3):
        log.write({"session": "s", "call_id": f"c{k}", "verdict": "execute"})
    lines = path.read_bytes().split(b"\n")
    cut = lines[0] + b"\n" + lines[1][: len(lines[1]) // 2] + b"\n" + lines[2] + b"\n"
    path.write_bytes(cut)
    report = verify(path)
    assert not report.ok and report.line == 2 and "not valid JSON" in (report.problem or "")
    # the same cut as the last line: torn, not tampered
    path.write_bytes(lines[0] + b"\n" + lines[1][: len(lines[1]) // 2])
    report = verify(path)
    assert report.ok and report.torn_tail and report.entries == 1
