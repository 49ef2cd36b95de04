"""guard/stages.py: argument hashes keyed by the sink's typed ``value_key``; the decision's timed copy."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.audit import AuditKey, KeyedSink, MemoryAudit
from guard.decision import Decision, ProbeCall, Reason, Verdict, with_latency
from guard.policy import Policy
from guard.runtime import Guard

KEY = b"k" * 16


class ListSink:
    """A sink that is neither :class:`AuditLog` nor :class:`MemoryAudit`: entries in a list, optionally keyed."""

    def __init__(self, **value_key: Any) -> None:
        self.entries: list[dict[str, Any]] = []
        self.__dict__.update(value_key)

    def write(self, entry: Mapping[str, Any]) -> None:
        self.entries.append(dict(entry))


def _args(sink: Any, policy: Policy) -> dict[str, Any]:
    Guard(policy, threshold=0.5, audit=sink).session("s").decide("read_document", {"path": "a.md"}, "c1")
    args: dict[str, Any] = sink.entries[0]["args"]
    return args


def test_any_sink_with_a_bytes_value_key_gets_keyed_argument_hashes(small_policy: Policy) -> None:
    """Catches reading the key only from the built-in sinks (``isinstance(sink, AuditLog)``) or not at all:
    an integrator's sink that carries ``value_key`` must hash arguments exactly as a keyed MemoryAudit does."""
    keyed = MemoryAudit(key=KEY)
    theirs = ListSink(value_key=AuditKey.derive(KEY).values)  # what MemoryAudit(key=KEY).value_key is
    assert isinstance(keyed, KeyedSink) and isinstance(theirs, KeyedSink)
    assert _args(theirs, small_policy) == _args(keyed, small_policy)
    assert _args(theirs, small_policy)["path"].startswith("hmac-sha256:")


@pytest.mark.parametrize("value_key", [{}, {"value_key": None}, {"value_key": "not bytes"}])
def test_a_sink_without_a_bytes_value_key_hashes_arguments_unkeyed(small_policy: Policy, value_key: Any) -> None:
    """Catches a key read that fails on a sink without ``value_key`` or uses a non-bytes value as a key:
    such a sink gets the unkeyed SHA-256 prefixes, exactly as an unkeyed MemoryAudit does."""
    assert _args(ListSink(**value_key), small_policy) == _args(MemoryAudit(), small_policy)
    assert _args(ListSink(**value_key), small_policy)["path"].startswith("sha256:")


@settings(max_examples=300, deadline=None)
@given(
    verdict=st.sampled_from(list(Verdict)),
    reason=st.sampled_from(list(Reason)),
    message=st.text(max_size=8),
    score=st.one_of(st.none(), st.floats(allow_nan=False)),
    threshold=st.one_of(st.none(), st.floats(allow_nan=False)),
    selected=st.lists(st.integers(0, 50), max_size=3).map(tuple),
    index=st.integers(-1, 50),
    tool=st.text(max_size=6),
    call_id=st.text(max_size=6),
    latency=st.floats(allow_nan=False),
    new_latency=st.floats(allow_nan=False),
    args=st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2)),
)
def test_with_latency_is_replace_of_the_latency(
    verdict: Verdict,
    reason: Reason,
    message: str,
    score: float | None,
    threshold: float | None,
    selected: tuple[int, ...],
    index: int,
    tool: str,
    call_id: str,
    latency: float,
    new_latency: float,
    args: dict[str, str] | None,
) -> None:
    """``with_latency`` (every field passed in order, read by two getters) = ``dataclasses.replace`` of
    ``latency_us``: catches a field dropped, two fields swapped, or the latency put in the wrong place."""
    decision = Decision(
        verdict,
        reason,
        message,
        score,
        threshold,
        MappingProxyType({"f": bool(index % 2)}),
        selected,
        index,
        tool,
        call_id,
        latency,
        (ProbeCall("p", {"a": 1}, "c", tool),),
        {"k": message},
        args,
    )
    timed = with_latency(decision, new_latency)
    assert timed == dataclasses.replace(decision, latency_us=new_latency)
    assert all(getattr(timed, f.name) is getattr(decision, f.name) for f in dataclasses.fields(Decision)[:10])
    assert all(getattr(timed, f.name) is getattr(decision, f.name) for f in dataclasses.fields(Decision)[11:])
