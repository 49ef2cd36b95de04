"""The checkpointer's record of a thread's inputs (guard.adapters._langchain_inputs), on checkpoint tuples as stored."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from guard.adapters._langchain_inputs import NULL_TASK, START, aread, read, recorded, started

H1, AI, TOOL = HumanMessage("task", id="h1"), AIMessage("", id="a1"), ToolMessage("out", tool_call_id="c", id="t1")
INJECTED, NEW = HumanMessage("injected", id="x1"), HumanMessage("new turn", id="n1")


def stored(messages: Any, writes: list[tuple[str, str, Any]] | None = None, start: Any = None) -> Any:
    """A checkpoint tuple as a saver returns it: channel values and pending writes."""
    values: dict[str, Any] = {} if messages is None else {"messages": messages}
    if start is not None:
        values[START] = start
    return SimpleNamespace(checkpoint={"channel_values": values}, pending_writes=writes or [], metadata={"step": 4})


AT_START = 4 + 3  # the step of the first node after a run's input and __start__ on a checkpoint of step 4


ROWS = [  # latest checkpoint, the state at the run's start, what the run's own input is (at step AT_START)
    ("new thread", None, [NEW], [NEW]),
    ("new thread, more than a human turn", None, [H1, AI, NEW], []),
    ("history then the turn", stored([H1, AI, TOOL]), [H1, AI, TOOL, NEW], [NEW]),
    ("a tool's message left last is history", stored([H1, AI, TOOL, INJECTED]), [H1, AI, TOOL, INJECTED, NEW], [NEW]),
    (
        "a write no task made is history",
        stored([H1], [(NULL_TASK, "messages", [INJECTED])]),
        [H1, INJECTED, NEW],
        [NEW],
    ),
    ("another history (a fork)", stored([H1]), [H1, AI, TOOL, INJECTED, NEW], []),
    ("ids differ", stored([HumanMessage("task", id="other")]), [H1, NEW], []),
    ("a stored message without an id", stored([HumanMessage("task")]), [H1, NEW], []),
    ("messages not stored as a list", stored(None), [H1, NEW], []),
    ("the state is shorter", stored([H1, AI, TOOL]), [H1, AI], []),
    ("the run's checkpoint is saved already", stored([H1, NEW]), [H1, NEW], []),
]


@pytest.mark.parametrize(("latest", "state", "own"), [pytest.param(*r[1:], id=r[0]) for r in ROWS])
def test_a_runs_own_input_is_only_what_follows_the_latest_state(latest: Any, state: list[Any], own: list[Any]) -> None:
    """``started``: the human messages after exactly the latest checkpoint's messages, else nothing.

    Planted bugs it catches: not comparing ids (``ids differ``, ``another history``), leaving out the
    writes no task made (``a write no task made``: the injected message would be the input), taking
    non-human messages or a longer rest (``more than a human turn``, ``a fork``), matching a message
    without an id or a value that is not a list.
    """
    assert started(latest, state, "messages", 1 if latest is None else AT_START) == own


@pytest.mark.parametrize("step", [AT_START + 1, AT_START - 1, None], ids=["a node ran since", "too early", "subgraph"])
def test_only_the_first_node_after_the_input_reads_it_from_the_state(step: int | None) -> None:
    """A node that is not the first after the input (another node may have added a HumanMessage the
    checkpointer has not saved yet), or a subgraph's node, gets nothing from the state.

    Planted bug it catches: ``started`` without the step check (these rows would return the new turn).
    """
    assert started(stored([H1, AI]), [H1, AI, NEW], "messages", step) == []
    assert started(None, [NEW], "messages", None if step is None else step - AT_START + 1) == []


def test_the_record_reads_the_start_channel_and_the_start_tasks_writes_only() -> None:
    """``recorded``: the input as given (``__start__`` channel) and as written by the ``__start__`` task.

    Planted bugs it catches: reading the writes no task made (a caller's ``Command(update=...)``)
    or another channel's, or skipping the ``__start__`` channel (an input whose task's writes are
    not saved yet would be untrusted).
    """
    found = [
        stored([], start={"messages": [("user", "given")]}),
        stored([], [("task-1", "messages", [("user", "written")]), (NULL_TASK, "messages", [INJECTED])]),
        stored([], [("task-2", "other", [("user", "elsewhere")])]),
    ]
    assert [m.text for m in recorded(found, "messages")] == ["given", "written"]


class Broken:
    def get_tuple(self, query: Any) -> Any:
        raise OSError("database down")

    async def aget_tuple(self, query: Any) -> Any:
        raise OSError("database down")


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
def test_a_checkpointer_that_cannot_be_read_vouches_for_nothing(use_async: bool, caplog: Any) -> None:
    """An unreadable checkpointer gives no input (fail closed) and says why.

    Planted bug it catches: an error that escapes (the run fails) or a fallback that takes the state as the input.
    """
    query = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    saver, start = Broken(), ([NEW], 1)
    got = asyncio.run(aread(saver, query, "messages", start)) if use_async else read(saver, query, "messages", start)
    assert got == ([], []) and "database down" in caplog.text
