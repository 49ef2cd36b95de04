"""The decision's audit entry (guard/stages.py): argument hashes keyed by the sink's typed ``value_key``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from guard.audit import AuditKey, KeyedSink, MemoryAudit
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
