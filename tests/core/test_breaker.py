"""The circuit breaker (guard.breaker): a running guard switches to its fallback on an alarm, audited."""

from __future__ import annotations

import json
import math
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from guard import breaker as breaker_module
from guard.audit import AuditLog, MemoryAudit, read_entries, verify
from guard.breaker import MAX_TRIP_BYTES, Breaker, parse_trip, trip_text
from guard.decision import Verdict
from guard.policy import Policy
from guard.runtime import Guard

READ = ("read_document", {"path": "a.md"})
NOTE = ("create_note", {"title": "t", "body": "b"})  # a side effect, not a sink
SEND = ("send_email", {"to": "bob@example.com", "subject": "s", "body": "hello"})


def test_trip_escalates_the_next_decision_and_is_audited(small_policy: Policy) -> None:
    """After ``trip`` (fallback ``escalate``) the very next sink call and side-effectful call escalate while reads
    keep the calibrated threshold; one breaker entry is audited.

    Catches: ``trip`` not switching (planted: the gate's breaker check removed -> the send executes), reads
    escalated too (the fallback is every sink, not every call), or a second trip writing a second entry.
    """
    audit = MemoryAudit()
    guard = Guard(small_policy, threshold=0.5, audit=audit, artifact_id="art#abc")
    session = guard.session("s")
    assert session.decide(*SEND, "c0").verdict is Verdict.EXECUTE
    assert guard.trip("risk alarm") is True
    assert guard.trip("again") is False
    after = session.decide(*SEND, "c1")
    assert after.verdict is Verdict.ESCALATE and "circuit breaker" in after.message
    assert session.decide(*NOTE, "c2").verdict is Verdict.ESCALATE
    assert session.decide("read_document", {"path": "b.md"}, "c3").verdict is Verdict.EXECUTE
    breakers = [
        {k: v for k, v in e.items() if k not in ("prev", "hash")} for e in audit.entries if e.get("kind") == "breaker"
    ]
    assert breakers == [
        {
            "event": "breaker",
            "kind": "breaker",
            "reason": "risk alarm",
            "from": {"threshold": 0.5, "artifact": "art#abc"},
            "to": {"threshold": 0.5, "artifact": None, "escalate": "sinks and side effects"},
        }
    ]


def test_trip_file_is_consulted_at_each_decision(small_policy: Policy, tmp_path: Path) -> None:
    """In a running process, a trip file written after a decision trips the guard at the next decision.

    The hash-chained audit log still verifies with the breaker entry in it.  Catches: the trip file
    not polled in ``decide`` (planted: the ``breaker.poll`` line in ``Session._core`` removed).
    """
    log, trip = tmp_path / "audit.jsonl", tmp_path / "trip.json"
    guard = Guard(small_policy, threshold=0.5, audit=AuditLog(log), artifact_id="art#abc", trip_file=trip)
    session = guard.session("s")
    assert session.decide(*READ, "c1").verdict is Verdict.EXECUTE
    trip.write_text(trip_text("art#abc", "RISK ALARM at labelled session 7"), encoding="utf-8")
    assert session.decide(*SEND, "c2").verdict is Verdict.ESCALATE
    assert guard.breaker.tripped and guard.threshold == 0.5
    entries = read_entries(log)
    breaker = [e for e in entries if e.get("kind") == "breaker"]
    assert len(breaker) == 1 and "RISK ALARM" in breaker[0]["reason"]
    assert verify(log).ok


def test_trip_file_of_another_artifact_is_ignored_and_garbage_trips(small_policy: Policy, tmp_path: Path) -> None:
    """A new calibration (another artifact id) is not tripped by the old alarm; an unparsable trip file trips.

    Catches: the artifact check dropped (a recalibrated guard stuck tripped) or a bad file failing open.
    """
    trip = tmp_path / "trip.json"
    trip.write_text(trip_text("old#111", "alarm"), encoding="utf-8")
    fresh = Guard(small_policy, threshold=0.5, artifact_id="new#222", trip_file=trip)
    assert fresh.session("s").decide(*SEND, "c1").verdict is Verdict.EXECUTE
    trip.write_text("{not json", encoding="utf-8")
    assert fresh.session("t").decide(*SEND, "c1").verdict is Verdict.ESCALATE
    assert fresh.breaker.reason is not None and "unreadable" in fresh.breaker.reason


def test_fallback_never_loosens(small_policy: Policy) -> None:
    """A fallback looser than the running threshold is clamped to the running one.

    Catches: ``trip`` adopting a looser fallback threshold (more calls executing after an alarm).
    """
    guard = Guard(small_policy, threshold=0.2, fallback=0.9, fallback_id="loose#1")
    guard.trip("alarm")
    assert guard.threshold == 0.2
    assert json.dumps(guard.breaker.reason) == '"alarm"'


# --------------------------------------------------------------------------- the trip file's exact format
#
# docs/monitoring.md#the-circuit-breaker: a trip file is exactly the UTF-8 of
# ``json.dumps({"artifact": ID, "reason": TEXT}) + "\n"``; only such a file naming another artifact id is
# ignored, everything else at the path trips.

MINE = "art#abc"
JSON_NOT_STR = st.one_of(
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)


def _canonical(artifact: object, reason: object) -> bytes:
    return (json.dumps({"artifact": artifact, "reason": reason}) + "\n").encode("utf-8")


@st.composite
def malformed_trip_files(draw: st.DrawFn) -> bytes:
    """Bytes at a trip path that are not exactly a well-formed alarm (each shape names another artifact
    where it names one at all, so ignoring it is the failure)."""
    other = draw(st.text(min_size=1, max_size=20).filter(lambda s: s != MINE))
    good = _canonical(other, "carbguard monitor: risk alarm on audit.jsonl")
    body = good.rstrip(b"\n")
    shape = draw(st.sampled_from(sorted(MALFORMED)))
    return MALFORMED[shape](draw, other, good, body)


MALFORMED: dict[str, Callable[[st.DrawFn, str, bytes, bytes], bytes]] = {
    "artifact not a string": lambda d, o, g, b: _canonical(d(JSON_NOT_STR), "alarm"),
    "artifact empty": lambda d, o, g, b: _canonical("", "alarm"),
    "reason not a string": lambda d, o, g, b: _canonical(o, d(st.one_of(JSON_NOT_STR, st.none()))),
    "reason missing": lambda d, o, g, b: (json.dumps({"artifact": o}) + "\n").encode(),
    "artifact missing": lambda d, o, g, b: (json.dumps({"reason": "alarm"}) + "\n").encode(),
    "unknown key": lambda d, o, g, b: (
        json.dumps({"artifact": o, "reason": "alarm", d(st.text(min_size=1, max_size=8)): d(JSON_NOT_STR)}) + "\n"
    ).encode(),
    "keys reordered": lambda d, o, g, b: (json.dumps({"reason": "alarm", "artifact": o}) + "\n").encode(),
    "duplicate key": lambda d, o, g, b: b'{"artifact": "' + MINE.encode() + b'", ' + b[1:] + b"\n",
    "not an object": lambda d, o, g, b: (json.dumps(d(st.one_of(JSON_NOT_STR, st.none(), st.text()))) + "\n").encode(),
    "not UTF-8": lambda d, o, g, b: g.replace(b"carbguard", b"carb\xff\xfeguard"),
    "empty": lambda d, o, g, b: d(st.sampled_from([b"", b"\n", b"   ", b"\x00"])),
    "BOM": lambda d, o, g, b: b"\xef\xbb\xbf" + g,
    "trailing garbage": lambda d, o, g, b: g + d(st.binary(min_size=1, max_size=20)),
    "leading garbage": lambda d, o, g, b: d(st.binary(min_size=1, max_size=20)) + g,
    "no final newline": lambda d, o, g, b: b,
    "other spacing": lambda d, o, g, b: json.dumps(
        {"artifact": o, "reason": "x"}, indent=d(st.integers(0, 3))
    ).encode(),
    "deeply nested": lambda d, o, g, b: b"[" * d(st.integers(1000, 100_000)) + b"]" * 3,
    "deeply nested artifact": lambda d, o, g, b: b'{"artifact": ' + b"[" * 5000 + b"]" * 5000 + b', "reason": "x"}\n',
    "NaN artifact": lambda d, o, g, b: b'{"artifact": NaN, "reason": "alarm"}\n',
    "lone surrogate": lambda d, o, g, b: b'{"artifact": "\\ud800", "reason": "alarm"}\n',
    "truncated": lambda d, o, g, b: g[: d(st.integers(0, len(g) - 2))],
    "too large": lambda d, o, g, b: _canonical(o, "x" * (MAX_TRIP_BYTES + 1)),
    "random bytes": lambda d, o, g, b: d(st.binary(max_size=64)),
}


def _ignored_by_oracle(data: bytes) -> bool:
    """Independent of parse_trip: is ``data`` the canonical alarm of another artifact (within the size cap,
    no lone surrogate)?"""
    try:
        value = json.loads(data.decode("utf-8"))
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate does not encode
    except (ValueError, RecursionError):
        return False
    return (
        len(data) <= MAX_TRIP_BYTES
        and type(value) is dict
        and list(value) == ["artifact", "reason"]
        and type(value["artifact"]) is str
        and value["artifact"] not in ("", MINE)
        and type(value["reason"]) is str
        and data == _canonical(value["artifact"], value["reason"])
    )


@settings(max_examples=400)
@given(data=malformed_trip_files())
def test_every_malformed_trip_file_trips(data: bytes) -> None:
    """Any trip file the breaker cannot read exactly trips it, with one breaker entry audited.

    Shapes: artifact a number/bool/list/object/empty, reason not a string or missing, unknown,
    missing, reordered or duplicate keys, not an object, non-UTF-8, empty, BOM, leading or trailing
    garbage, other spacing, no final newline, nesting deep enough to overflow the parser, NaN, a
    lone surrogate, truncated, over the size cap, random bytes.  Catches the old reading (planted:
    ``named = data.get("artifact"); if named is None or named == artifact_id: trip``, i.e. any object
    naming something other than this artifact ignored) and any shape ``parse_trip`` lets through.
    """
    assume(not _ignored_by_oracle(data))
    with tempfile.TemporaryDirectory() as tmp:
        trip = Path(tmp) / "trip.json"
        trip.write_bytes(data)
        audit = MemoryAudit()
        breaker = Breaker(0.5, MINE, -math.inf, None, trip)
        breaker.poll(audit)
        assert breaker.tripped, data[:200]
        assert breaker.state.when is not None and breaker.reason is not None and str(trip) in breaker.reason
        assert [e["kind"] for e in audit.entries] == ["breaker"]


@settings(max_examples=200)
@given(
    artifact=st.text(min_size=1, max_size=40).filter(lambda s: s != MINE),
    reason=st.one_of(
        st.text(max_size=1200),
        st.builds(lambda a, b: f"alarm on {a}\udcff{b}", st.text(max_size=20), st.text(max_size=20)),
    ),
)
def test_well_formed_alarms_trip_only_their_artifact(artifact: str, reason: str) -> None:
    """``trip_text`` always writes a file ``parse_trip`` reads back; a guard of another artifact ignores
    it, a guard of the named artifact trips on it.

    Catches ``trip_text`` writing something the strict reader refuses (planted: the reason written as is,
    so a path that is not UTF-8 (a lone surrogate) makes every guard trip on every alarm) and the artifact
    comparison dropped (planted: ``if True:`` in ``Breaker.poll`` -> the other artifact's guard trips)."""
    text = trip_text(artifact, reason)
    assert parse_trip(text.encode("utf-8")).artifact == artifact
    with tempfile.TemporaryDirectory() as tmp:
        trip = Path(tmp) / "trip.json"
        trip.write_text(text, encoding="utf-8")
        other, named = Breaker(0.5, MINE, -math.inf, None, trip), Breaker(0.5, artifact, -math.inf, None, trip)
        other.poll(None)
        named.poll(None)
        assert not other.tripped and named.tripped


def test_a_trip_path_that_is_not_a_regular_file_trips_without_hanging(tmp_path: Path) -> None:
    """A FIFO (whose blocking open would hang every decision) or a directory at the trip path trips.

    Catches a plain ``open`` of the path (planted: ``path.read_bytes()`` -> the FIFO blocks forever; the
    test's timeout fails it) and a directory treated as no alarm."""
    for name, make in (("fifo", os.mkfifo), ("dir", os.mkdir)):
        trip = tmp_path / name
        make(trip)
        breaker = Breaker(0.5, MINE, -math.inf, None, trip)
        done = threading.Event()
        worker = threading.Thread(target=lambda b=breaker, e=done: (b.poll(None), e.set()), daemon=True)
        worker.start()
        assert done.wait(10), f"poll hung on a {name}"
        assert breaker.tripped, name


def test_an_ignored_alarm_rewritten_in_place_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another artifact's alarm, then the same file rewritten in place (same size) to name this artifact:
    the next poll trips, even where the file system's timestamps are too coarse to show the change (here
    simulated: the identity the breaker compares keeps only device, inode and size).

    Catches a stat cache trusted for a file that changed within the timestamp granularity (planted:
    ``_read`` returning its identity even when the file changed less than ``RACY_NS`` ago -> missed)."""
    monkeypatch.setattr(breaker_module, "_identity", lambda st: (st.st_dev, st.st_ino, st.st_size))
    other = "art#xyz"
    assert len(other) == len(MINE)
    trip = tmp_path / "trip.json"
    trip.write_text(trip_text(other, "alarm"), encoding="utf-8")
    breaker = Breaker(0.5, MINE, -math.inf, None, trip)
    breaker.poll(None)
    assert not breaker.tripped
    with open(trip, "r+", encoding="utf-8") as handle:  # in place: same inode, same size
        handle.write(trip_text(MINE, "alarm"))
    breaker.poll(None)
    assert breaker.tripped
