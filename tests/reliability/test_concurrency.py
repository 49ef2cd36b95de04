"""Concurrency: many sessions deciding at once share one audit file and nothing else.

- 32 threads × 500 decisions, each thread on its own sessions, all writing one ``AuditLog`` file;
- the same with 32 asyncio tasks × 500 ``adecide`` calls;

afterwards every decision has exactly one entry, no line is torn or interleaved, the hash chain
verifies (``guard.audit.verify`` and ``carbguard audit verify``), and each session's entries are
in its own decision order.  The audit log runs with ``fsync=False`` here (the flush and the
``flock`` that order writers are the same; only the disk sync is skipped, to keep the run short —
the crash test keeps fsync on).

Per-session state is never shared: interleaved sessions reuse the same call ids with conflicting
tools and values; a private value read in one session and sent on must not make another session's
benign send of the same string look connected.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from guard.audit import AuditLog, read_entries, verify
from guard.cli import main as cli_main
from guard.decision import Decision, Verdict
from guard.policy import Policy
from guard.runtime import Guard, Session

WORKERS = 32
DECISIONS = 500
SESSIONS_PER_WORKER = 50
SECRET = "X4821-99317"
CERT = f"Certificate: passport\nHolder: Emma Johnson\nNumber: {SECRET}"


def episode_step(session: Session, step: int) -> tuple[str, Decision]:
    """One decision of a five-step episode that cycles private read → leak → public read → benign sends."""
    call_id = f"c{step}"
    kind = step % 5
    if kind == 0:
        decision = session.decide("read_certificate", {"name": "passport"}, call_id)
        session.observe_result(call_id, CERT)
    elif kind == 1:
        decision = session.decide("send_email", {"to": "x@partner.example", "body": f"Number {SECRET}"}, call_id)
    elif kind == 2:
        decision = session.decide("read_document", {"path": "press.md"}, call_id)
        session.observe_result(call_id, "Acme opens a new solar plant in Lyon.")
    elif kind == 3:
        decision = session.decide("create_note", {"title": "todo", "body": "call the plant"}, call_id)
    else:
        decision = session.decide("post_note", {"body": "Lyon plant opens in June"}, call_id)
    return call_id, decision


def expected_verdict(step: int) -> Verdict:
    """The leak (kind 1) escalates; everything else executes under threshold 0.5."""
    return Verdict.ESCALATE if step % 5 == 1 else Verdict.EXECUTE


def check_log(path: Path, decided: dict[tuple[str, str], str], capsys: pytest.CaptureFixture[str]) -> None:
    """Exactly one intact entry per decision, in session order; the chain verifies (API and CLI)."""
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    lines = raw.split(b"\n")[:-1]
    assert len(lines) == len(decided)
    for line in lines:  # no torn or interleaved line: each one is a whole JSON object
        assert line.startswith(b"{") and line.endswith(b"}")
        json.loads(line)
    entries = read_entries(path)
    keys = Counter((e["session"], e["call_id"]) for e in entries)
    assert set(keys) == set(decided) and set(keys.values()) == {1}
    assert all(e["verdict"] == decided[e["session"], e["call_id"]] for e in entries)
    by_session: dict[str, list[int]] = {}
    for e in entries:
        by_session.setdefault(e["session"], []).append(int(e["call_id"][1:]))
    assert all(steps == sorted(steps) for steps in by_session.values())
    report = verify(path)
    assert report.ok and report.entries == len(decided) and not report.torn_tail, report.describe()
    capsys.readouterr()
    assert cli_main(["audit", "verify", str(path)]) == 4  # unkeyed: intact, not authenticated
    assert f"OK: {len(decided)} entries verify" in capsys.readouterr().out


def test_threads_share_one_audit_file(small_policy: Policy, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """32 threads × 500 decisions on separate sessions: one intact, verifiable entry each."""
    path = tmp_path / "threads.jsonl"
    guard = Guard(small_policy, threshold=0.5, audit=AuditLog(path, fsync=False))
    decided: dict[tuple[str, str], str] = {}
    wrong: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(WORKERS)

    def work(worker: int) -> None:
        sessions = [guard.session(f"t{worker}-s{k}") for k in range(SESSIONS_PER_WORKER)]
        barrier.wait()
        per_session = DECISIONS // SESSIONS_PER_WORKER
        out = {}
        for step in range(per_session):  # interleave this worker's sessions step by step
            for session in sessions:
                call_id, decision = episode_step(session, step)
                out[session.session_id, call_id] = decision.verdict.value
                if decision.verdict is not expected_verdict(step):
                    wrong.append(f"{session.session_id}/{call_id}: {decision.verdict} {decision.message}")
        with lock:
            decided.update(out)

    start = time.perf_counter()
    threads = [threading.Thread(target=work, args=(w,)) for w in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    assert wrong == []
    assert len(decided) == WORKERS * DECISIONS
    check_log(path, decided, capsys)
    assert elapsed < 60


def test_asyncio_tasks_share_one_audit_file(
    small_policy: Policy, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """32 asyncio tasks × 500 ``adecide`` calls (audit writes in worker threads): the same guarantees."""
    path = tmp_path / "tasks.jsonl"
    guard = Guard(small_policy, threshold=0.5, audit=AuditLog(path, fsync=False))
    decided: dict[tuple[str, str], str] = {}
    wrong: list[str] = []

    async def task(worker: int) -> None:
        sessions = [guard.session(f"a{worker}-s{k}") for k in range(SESSIONS_PER_WORKER)]
        for step in range(DECISIONS // SESSIONS_PER_WORKER):
            for session in sessions:
                call_id = f"c{step}"
                decision = await adecide_step(session, step)
                decided[session.session_id, call_id] = decision.verdict.value
                if decision.verdict is not expected_verdict(step):
                    wrong.append(f"{session.session_id}/{call_id}: {decision.verdict}")

    async def run_all() -> None:
        await asyncio.gather(*(task(w) for w in range(WORKERS)))

    asyncio.run(run_all())
    assert wrong == []
    assert len(decided) == WORKERS * DECISIONS
    check_log(path, decided, capsys)


async def adecide_step(session: Session, step: int) -> Decision:
    """:func:`episode_step` with ``adecide``."""
    call_id = f"c{step}"
    kind = step % 5
    if kind == 0:
        decision = await session.adecide("read_certificate", {"name": "passport"}, call_id)
        session.observe_result(call_id, CERT)
    elif kind == 1:
        decision = await session.adecide("send_email", {"to": "x@partner.example", "body": f"Number {SECRET}"}, call_id)
    elif kind == 2:
        decision = await session.adecide("read_document", {"path": "press.md"}, call_id)
        session.observe_result(call_id, "Acme opens a new solar plant in Lyon.")
    elif kind == 3:
        decision = await session.adecide("create_note", {"title": "todo", "body": "call the plant"}, call_id)
    else:
        decision = await session.adecide("post_note", {"body": "Lyon plant opens in June"}, call_id)
    return decision


# --------------------------------------------------------------------------- isolation


def leak_steps(session: Session) -> list[Decision]:
    """Session A: reads the certificate (private), then sends its number out."""
    out = [session.decide("read_certificate", {"name": "passport"}, "c1")]
    session.observe_result("c1", CERT)
    out.append(session.decide("send_email", {"to": "x@partner.example", "body": f"Number {SECRET}"}, "c2"))
    return out


def benign_steps(session: Session) -> list[Decision]:
    """Session B: the same call ids; reads a *public* page with the same string, then sends it on."""
    out = [session.decide("read_document", {"path": "catalogue.md"}, "c1")]
    session.observe_result("c1", f"Catalogue: spare part {SECRET} in stock")
    out.append(session.decide("send_email", {"to": "x@partner.example", "body": f"Number {SECRET}"}, "c2"))
    return out


def check_isolated(a: Session, b: Session, a_out: list[Decision], b_out: list[Decision]) -> None:
    assert [d.verdict for d in a_out] == [Verdict.EXECUTE, Verdict.ESCALATE]
    assert a_out[1].features["provenance_path"]
    assert [d.verdict for d in b_out] == [Verdict.EXECUTE, Verdict.EXECUTE], [d.message for d in b_out]
    assert not b_out[1].features["provenance_path"] and not b_out[1].features["private_in_context"]
    assert a.graph.records[1].tool == "read_certificate" and b.graph.records[1].tool == "read_document"
    assert len(a.graph) == len(b.graph) == 4
    assert a.graph is not b.graph and a.decisions is not b.decisions and a.certifier_state is not b.certifier_state
    assert {r.text for r in b.graph.records.values() if r.kind.value == "result"} == {
        f"Catalogue: spare part {SECRET} in stock"
    }


def test_interleaved_sessions_with_conflicting_values_stay_apart(small_policy: Policy) -> None:
    """Step by step interleaving on one thread: A's leak does not connect B's benign send."""
    guard = Guard(small_policy, threshold=0.5)
    a, b = guard.session("A"), guard.session("B")
    a.observe_user("Archive my documents.")
    b.observe_user("Send the catalogue number to our partner.")
    a_out = [a.decide("read_certificate", {"name": "passport"}, "c1")]
    b_out = [b.decide("read_document", {"path": "catalogue.md"}, "c1")]
    a.observe_result("c1", CERT)
    b.observe_result("c1", f"Catalogue: spare part {SECRET} in stock")
    a_out.append(a.decide("send_email", {"to": "x@partner.example", "body": f"Number {SECRET}"}, "c2"))
    b_out.append(b.decide("send_email", {"to": "x@partner.example", "body": f"Number {SECRET}"}, "c2"))
    check_isolated(a, b, a_out, b_out)


def test_interleaved_sessions_across_threads_stay_apart(small_policy: Policy) -> None:
    """64 leak/benign pairs on 32 threads, released together: no benign send is ever connected."""
    guard = Guard(small_policy, threshold=0.5)
    pairs = 64
    barrier = threading.Barrier(WORKERS)
    results: dict[int, Any] = {}

    def work(worker: int) -> None:
        mine = range(worker, pairs, WORKERS)
        sessions = {p: (guard.session(f"A{p}"), guard.session(f"B{p}")) for p in mine}
        barrier.wait()
        for p, (a, b) in sessions.items():
            a.observe_user("Archive my documents.")
            b.observe_user("Send the catalogue number to our partner.")
            results[p] = (a, b, leak_steps(a), benign_steps(b))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == pairs
    for a, b, a_out, b_out in results.values():
        check_isolated(a, b, a_out, b_out)


def test_one_session_shared_by_threads_keeps_one_consistent_graph(small_policy: Policy, tmp_path: Path) -> None:
    """Not a supported pattern, but it must not corrupt: 32 threads deciding in one session serialize on its lock."""
    path = tmp_path / "shared.jsonl"
    session = Guard(small_policy, threshold=0.5, audit=AuditLog(path, fsync=False)).session("shared")
    session.observe_user("hello")

    def work(worker: int) -> None:
        for k in range(20):
            session.decide("read_document", {"path": f"doc-{worker}-{k}.md"}, f"c{worker}-{k}")

    threads = [threading.Thread(target=work, args=(w,)) for w in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(session.graph) == 1 + WORKERS * 20
    assert sorted(session.graph.records) == list(range(1 + WORKERS * 20))
    entries = read_entries(path)
    assert len(entries) == WORKERS * 20 and verify(path).ok
    assert len({e["proposal_index"] for e in entries}) == WORKERS * 20
