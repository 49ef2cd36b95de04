"""The temporary-outputs example (examples/temporary_outputs.py) shows the three outcomes it claims."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from guard.decision import Verdict

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def example() -> Iterator[ModuleType]:
    """The example script, imported from its file (registered while the tests use it)."""
    path = ROOT / "examples" / "temporary_outputs.py"
    spec = importlib.util.spec_from_file_location("temporary_outputs_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def runs(example: ModuleType) -> dict[str, list[Any]]:
    """The three scenarios' decisions (running the example's main once)."""
    result: dict[str, list[Any]] = example.main()
    return result


def final(steps: list[Any], call_id: str) -> Any:
    """The last decision on ``call_id``."""
    return [s for s in steps if s.call_id == call_id][-1]


def test_every_scenario_probes_both_actions_first(runs: dict[str, list[Any]]) -> None:
    for steps in runs.values():
        firsts = {s.call_id: s for s in reversed(steps)}
        assert firsts["c4"].verdict is Verdict.PROBE and firsts["c5"].verdict is Verdict.PROBE
        assert {s.tool for s in steps} >= {"stat_nofollow", "lookup_recipient"}


def test_all_clear_certifies_the_deletion_and_the_send(runs: dict[str, list[Any]]) -> None:
    steps = runs["all clear"]
    delete, send = final(steps, "c4"), final(steps, "c5")
    assert (delete.verdict, send.verdict) == (Verdict.EXECUTE, Verdict.EXECUTE)
    assert [w.split(":")[0] for w in delete.removed_by_probes] == ["shared"]
    assert [w.split(":")[0] for w in send.removed_by_probes] == ["untrusted"]


def test_a_shared_path_is_replaced_by_the_staged_move(runs: dict[str, list[Any]]) -> None:
    steps = runs["shared path"]
    delete = final(steps, "c4")
    assert delete.verdict is Verdict.DEFER and delete.reason == "certified"
    assert delete.replacement == {
        "action": "stage_move",
        "tool": "move_path",
        "args": {"src": "/work/run/latest", "dst": "/work/.trash/run-latest"},
    }
    assert final(steps, "c4-staged").verdict is Verdict.EXECUTE
    assert final(steps, "c5").verdict is Verdict.EXECUTE


def test_an_uncertain_recipient_is_escalated_after_the_budget(runs: dict[str, list[Any]]) -> None:
    steps = runs["recipient uncertain"]
    send = final(steps, "c5")
    assert send.verdict is Verdict.ESCALATE and send.safecommit_reason == "authority_missing"
    assert [s.tool for s in steps].count("lookup_recipient") == 2
    assert sorted(w.split(":")[0] for w in send.retained) == ["trusted", "untrusted", "user"]
    assert final(steps, "c4").verdict is Verdict.EXECUTE


def test_the_example_prints_each_decision(example: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    example.main()
    out = capsys.readouterr().out
    assert out.count("== ") == 3 and "run instead: move_path" in out and "authority_missing" in out
