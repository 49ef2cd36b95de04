"""Records and episodes (docs/concepts.md)."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.errors import InputError
from guard.records import (
    Episode,
    Record,
    RecordKind,
    Trust,
    final,
    freeze_args,
    proposal,
    result,
    user,
)


def _episode() -> Episode:
    return Episode(
        "e1",
        (
            user(0, "send the report"),
            proposal(1, "read_document", {"path": "report.pdf"}, "c1"),
            result(2, "c1", "the report", Trust.TOOL_PUBLIC, "read_document"),
            proposal(3, "send_email", {"to": "a@b.example", "body": "the report"}, "c2"),
            result(4, "c2", "sent", Trust.TOOL_PUBLIC, "send_email"),
            final(5, "done"),
        ),
    )


def test_freeze_args_is_read_only() -> None:
    """Frozen arguments cannot be assigned to."""
    frozen = freeze_args({"a": 1})
    with pytest.raises(TypeError):
        frozen["a"] = 2  # type: ignore[index]


def test_freeze_args_copies() -> None:
    """Changing the caller's dict after freezing does not change the record."""
    args = {"a": [1, 2]}
    frozen = freeze_args(args)
    args["a"].append(3)
    assert frozen["a"] == [1, 2]


@pytest.mark.parametrize("bad", [{"x": math.nan}, {"x": math.inf}, {"x": {1, 2}}, {"x": object()}])
def test_freeze_args_rejects_non_json(bad: dict[str, object]) -> None:
    """NaN, infinities and non-JSON values raise InputError."""
    with pytest.raises(InputError, match="not valid JSON"):
        freeze_args(bad)


def test_arg_values_flattens_nested_leaves() -> None:
    """Nested leaves and the keys of nested objects are yielded under their top-level argument name; None is
    skipped (catches a walk that drops the keys of a nested object: a value placed as a key would be no evidence)."""
    record = proposal(0, "t", {"to": ["a@b.example", {"cc": "c@d.example"}], "flag": True, "n": None, "k": 7}, "c")
    assert sorted(record.arg_values()) == [
        ("flag", "true"),
        ("k", "7"),
        ("to", "a@b.example"),
        ("to", "c@d.example"),
        ("to", "cc"),
    ]


def test_args_json_is_canonical() -> None:
    """Argument JSON has sorted keys and keeps non-ASCII text."""
    record = proposal(0, "t", {"b": "é", "a": 1}, "c")
    assert record.args_json() == '{"a": 1, "b": "é"}'


def test_record_is_frozen() -> None:
    """Records are immutable."""
    record = user(0, "hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.text = "changed"  # type: ignore[misc]


def test_constructors_set_kind_and_trust() -> None:
    """Each constructor sets the kind and trust of docs/concepts.md"""
    assert (user(0, "x").kind, user(0, "x").trust) == (RecordKind.USER, Trust.USER)
    assert proposal(0, "t", {}, "c").kind is RecordKind.PROPOSAL
    assert result(0, "c", "x", Trust.TOOL_PRIVATE, "t").trust is Trust.TOOL_PRIVATE
    assert final(0, "x").kind is RecordKind.FINAL


def test_result_rejects_unknown_status() -> None:
    """A result status other than ok/error is an InputError."""
    with pytest.raises(InputError, match="status"):
        result(0, "c", "x", Trust.TOOL_PUBLIC, "t", status="maybe")


def test_episode_rejects_index_gap() -> None:
    """Record indices must equal their positions."""
    with pytest.raises(InputError, match="position 1 has index 2"):
        Episode("e", (user(0, "a"), user(2, "b")))


def test_proposals_in_order() -> None:
    """``proposals`` returns the proposals in episode order."""
    assert [r.call_id for r in _episode().proposals()] == ["c1", "c2"]


def test_decision_points_prefix_is_strictly_earlier() -> None:
    """Each decision point's prefix holds exactly the records before the proposal."""
    points = list(_episode().decision_points())
    assert [(len(prefix), p.index) for prefix, p in points] == [(1, 1), (3, 3)]
    assert all(r.index < p.index for prefix, p in points for r in prefix)


def test_result_of_finds_the_answer() -> None:
    """``result_of`` returns the result with the call id, or None."""
    episode = _episode()
    found = episode.result_of("c2")
    assert found is not None
    assert found.text == "sent"
    assert episode.result_of("nope") is None


@given(st.lists(st.sampled_from(["user", "call"]), max_size=20))
def test_decision_points_never_show_the_future(kinds: list[str]) -> None:
    """For any episode, every record in a proposal's prefix has a smaller index."""
    records: list[Record] = []
    for kind in kinds:
        i = len(records)
        if kind == "user":
            records.append(user(i, "u"))
        else:
            records.append(proposal(i, "t", {}, f"c{i}"))
            records.append(result(i + 1, f"c{i}", "r", Trust.TOOL_PUBLIC, "t"))
    for prefix, p in Episode("e", tuple(records)).decision_points():
        assert prefix == tuple(records[: p.index])
