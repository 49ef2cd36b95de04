"""guard.records.canonical_args: the one plain copy of a proposal's arguments that is scored, audited and run."""

from __future__ import annotations

from typing import Any

import pytest

from guard.decision import Reason, Verdict
from guard.errors import InputError
from guard.limits import MAX_DEPTH
from guard.records import canonical_args
from guard.runtime import Session


def _nested(levels: int) -> dict[str, Any]:
    value: Any = "leaf"
    for _ in range(levels - 1):
        value = [value]
    return {"path": value}


def test_copy_is_fresh_and_plain() -> None:
    """Catches a copy that shares the caller's containers or keeps tuples (what JSON hands the tool is lists)."""
    inner = [1, (2.5, None), {"k": True}]
    args = {"a": inner, "s": "x"}
    canon = canonical_args(args)
    assert canon == {"a": [1, [2.5, None], {"k": True}], "s": "x"}
    assert canon["a"] is not inner and canon["a"][2] is not inner[2] and type(canon["a"][1]) is list


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({1: "x"}, "key 1 is a int, not a plain string"),
        ({"a": {True: "x"}}, "arguments['a']: key True is a bool"),
        ({"a": float("nan")}, "arguments['a']: nan is not a finite number"),
        ({"a": [float("inf")]}, "arguments['a'][0]: inf is not a finite number"),
        ({"a": {1, 2}}, "a set is not a plain JSON value"),
        ({"a": b"x"}, "a bytes is not a plain JSON value"),
    ],
)
def test_what_json_would_silently_change_is_refused(args: dict[Any, Any], needle: str) -> None:
    """Catches a canonical copy that lets through what a JSON round trip changes (an int key becomes "1", so the
    decided arguments and the ones the tool gets differ) or cannot write (NaN, sets, bytes)."""
    with pytest.raises(InputError) as info:
        canonical_args(args)
    assert needle in str(info.value)


def test_depth_limit_and_cycles_are_refused_by_name(session: Session) -> None:
    """MAX_DEPTH levels pass; one more, or a cyclic list, is a bad_arguments refusal naming the limit.

    Catches a walk without its depth cap: a cycle or deep nesting then ends in RecursionError, an internal
    error instead of a readable refusal (and the depth limit no longer holds).
    """
    assert session.decide("read_document", _nested(MAX_DEPTH), "ok").verdict is Verdict.EXECUTE
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    for i, args in enumerate((_nested(MAX_DEPTH + 1), {"path": cyclic})):
        decision = session.decide("read_document", args, f"c{i}")
        assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.BAD_ARGUMENTS)
        assert f"nest deeper than {MAX_DEPTH} levels" in decision.message


def test_int_key_never_executes(session: Session) -> None:
    """Catches accepting a non-string key: JSON turns {1: ...} into {"1": ...}, so the tool would get other
    arguments than the ones decided."""
    decision = session.decide("read_document", {"path": "a.md", 1: "x"}, "c1")
    assert (decision.verdict, decision.reason) == (Verdict.ESCALATE, Reason.BAD_ARGUMENTS)
