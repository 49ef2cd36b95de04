"""The results kept for LangGraph's rerun of an interrupted ``ToolNode`` (:mod:`guard.adapters._langchain_steps`)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from guard import Guard, load_policy
from guard.adapters._langchain_core import Tracker
from guard.adapters._langchain_steps import keep, kept_output, pending_turn
from guard.adapters.langchain_testing import tool_call
from tests.adapters.mail_agent_data import POLICY

DRAFT = tool_call("save_draft", {"subject": "s", "body": "b"}, "c3")
SEND = tool_call("send_email", {"to": "a@b.example", "subject": "s", "body": "b"}, "c2")
TURN = AIMessage(content="", tool_calls=[DRAFT, SEND], id="turn-1")
HUMAN = HumanMessage("hi", id="h1")


def tracker() -> Tracker:
    return Tracker(Guard(load_policy(POLICY), threshold=0.5).session("steps"))


@pytest.mark.parametrize(
    ("messages", "asked", "returned"),
    [
        ([HUMAN, TURN], DRAFT, "kept"),  # the node runs again for the same turn: the result it had
        ([HUMAN, TURN], SEND, None),  # another call of the turn: nothing kept for it
        ([HUMAN, TURN], {**DRAFT, "args": {"subject": "s", "body": "other"}}, None),  # other arguments
        ([HUMAN, TURN], {**DRAFT, "name": "send_email"}, None),  # another tool
        ([HUMAN, TURN, ToolMessage("draft saved", tool_call_id="c3")], DRAFT, None),  # answered: a reuse
        ([HUMAN, TURN, AIMessage(content="", tool_calls=[DRAFT], id="turn-2")], DRAFT, None),  # a later turn
        ([HUMAN, AIMessage(content="", tool_calls=[DRAFT, DRAFT], id="turn-1")], DRAFT, None),  # id twice in a turn
        ([HUMAN, AIMessage(content="", tool_calls=[DRAFT])], DRAFT, None),  # a turn without an id
    ],
)
def test_a_kept_result_is_returned_only_for_exactly_the_call_that_ran_in_its_unanswered_turn(
    messages: list[Any], asked: dict[str, Any], returned: str | None
) -> None:
    """Catches a kept result handed to a call that did not run: another call of the turn, other arguments or
    tool, a call id the model reuses after its result (which must be refused), a later turn's call, an id
    that appears twice in its turn, a turn without an id."""
    kept = tracker()
    keep(kept, pending_turn([HUMAN, TURN], "c3"), DRAFT, "kept")
    assert kept_output(kept, pending_turn(messages, asked["id"]), asked) == returned


def test_only_the_latest_turn_s_results_are_kept() -> None:
    """Catches results kept for ever (one per call the thread ever ran)."""
    kept = tracker()
    keep(kept, "turn-1", DRAFT, "first")
    keep(kept, "turn-2", SEND, "second")
    assert kept.kept == {("turn-2", "c2"): ("send_email", SEND["args"], "second")}
