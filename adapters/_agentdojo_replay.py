"""Replaying logged AgentDojo runs: :class:`ReplayLLM`, and re-run transcripts as offline episodes.

See :mod:`guard.adapters.agentdojo`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from guard.adapters._agentdojo_compat import EMPTY_ENV, content_text, require
from guard.errors import CorpusError
from guard.records import Episode, RecordKind

try:
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
    from agentdojo.types import text_content_block_from_string
except ImportError:  # pragma: no cover - exercised only without the extra; require reports it
    BasePipelineElement = FunctionCall = object  # type: ignore[assignment,misc,unused-ignore]


def _turns_from_messages(messages: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(messages, list):
        raise CorpusError(f"{where}: 'messages' must be a list, got {type(messages).__name__}")
    turns = []
    for position, message in enumerate(messages):
        if not isinstance(message, Mapping) or "role" not in message:
            raise CorpusError(f"{where}: message {position} is not an object with a 'role'")
        if message["role"] != "assistant":
            continue
        calls = []
        for j, call in enumerate(message.get("tool_calls") or []):
            fields = call.model_dump() if isinstance(call, FunctionCall) else call
            if not isinstance(fields, Mapping) or not isinstance(fields.get("function"), str):
                raise CorpusError(f"{where}: message {position}, tool call {j} has no 'function' name")
            args = fields.get("args") or {}
            if not isinstance(args, Mapping):
                raise CorpusError(f"{where}: message {position}, tool call {j}: 'args' is not an object")
            calls.append({"function": fields["function"], "args": dict(args), "id": fields.get("id")})
        content = message.get("content")
        turns.append({"content": None if content is None else content_text(content), "tool_calls": calls})
    return turns


def _turns_from_episode(episode: Episode) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    open_turn: dict[str, Any] | None = None
    for record in episode.records:
        if record.kind is RecordKind.PROPOSAL:
            if open_turn is None:
                open_turn = {"content": None, "tool_calls": []}
                turns.append(open_turn)
            args = copy.deepcopy(dict(record.args))
            open_turn["tool_calls"].append({"function": record.tool, "args": args, "id": record.call_id})
            continue
        open_turn = None
        if record.kind is RecordKind.FINAL:
            turns.append({"content": record.text, "tool_calls": []})
    return turns


def _assistant_turns(source: Any) -> list[dict[str, Any]]:
    if isinstance(source, Episode):
        return _turns_from_episode(source)
    if isinstance(source, Mapping):
        if "messages" not in source:
            raise CorpusError("AgentDojo run: missing field 'messages'")
        return _turns_from_messages(source["messages"], f"run {source.get('user_task_id', '?')}")
    return _turns_from_messages(list(source), "messages")


class ReplayLLM(BasePipelineElement):  # type: ignore[misc]
    """Re-emits a logged run's assistant turns, one per call, in order.

    ``source`` is an :class:`~guard.records.Episode`, a raw AgentDojo run (the JSON object), or
    its ``messages`` list.  The cursor restarts whenever a run starts (no assistant message yet);
    past the last logged turn it answers with an empty final message.
    """

    name = "carbguard-replay"

    def __init__(self, source: Episode | Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> None:
        require()
        self.turns = _assistant_turns(source)
        self._cursor = 0

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Any = EMPTY_ENV,
        messages: Sequence[Any] = (),
        extra_args: dict[str, Any] = {},  # noqa: B006 - AgentDojo's signature; never mutated
    ) -> tuple[str, FunctionsRuntime, Any, Sequence[Any], dict[str, Any]]:
        """Append the next logged assistant turn."""
        if not any(m.get("role") == "assistant" for m in messages):
            self._cursor = 0
        turn: dict[str, Any] = (
            self.turns[self._cursor] if self._cursor < len(self.turns) else {"content": "", "tool_calls": []}
        )
        self._cursor += 1
        calls = [
            FunctionCall(function=c["function"], args=copy.deepcopy(c["args"]), id=c["id"]) for c in turn["tool_calls"]
        ]
        content = turn["content"]
        if content is None and not calls:
            content = ""  # a final answer must not be None, or AgentDojo re-runs the task
        message = {
            "role": "assistant",
            "content": None if content is None else [text_content_block_from_string(content)],
            "tool_calls": calls or None,
        }
        return query, runtime, env, [*messages, message], extra_args


class Recorder(BasePipelineElement):  # type: ignore[misc]
    """Keeps the messages of the last run that ended normally."""

    def __init__(self) -> None:
        self.messages: list[Any] | None = None

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Any = EMPTY_ENV,
        messages: Sequence[Any] = (),
        extra_args: dict[str, Any] = {},  # noqa: B006 - AgentDojo's signature; never mutated
    ) -> tuple[str, FunctionsRuntime, Any, Sequence[Any], dict[str, Any]]:
        self.messages = list(messages)
        return query, runtime, env, messages, extra_args


# --------------------------------------------------------------------------- transcripts → offline episodes


def _dump_call(call: Any) -> dict[str, Any]:
    fields = call.model_dump() if isinstance(call, FunctionCall) else dict(call)
    return {"function": fields.get("function"), "args": fields.get("args") or {}, "id": fields.get("id")}


def _followers(messages: Sequence[Any], position: int) -> list[Any]:
    """The tool messages right after ``messages[position]``."""
    found = []
    for message in messages[position + 1 :]:
        if message.get("role") != "tool":
            break
        found.append(message)
    return found


def transcript(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """The re-run's messages as run-file JSON, with every proposal the agent made in its turn.

    A tool message answering a call that is not in the preceding assistant message is a call the
    guard refused (``deny``/``abort``): it is put back into that turn, in the order of the tool
    messages, so the transcript lists every proposal the online session decided.
    """
    require()
    out: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            out.append(
                {
                    "role": "tool",
                    "content": content_text(message.get("content")),
                    "tool_call_id": message.get("tool_call_id"),
                    "tool_call": _dump_call(message["tool_call"]) if message.get("tool_call") is not None else None,
                    "error": message.get("error"),
                }
            )
            continue
        item = {
            "role": role,
            "content": content_text(message.get("content")) if message.get("content") is not None else None,
        }
        if role == "assistant":
            calls = [_dump_call(c) for c in message.get("tool_calls") or []]
            by_id = {c["id"]: c for c in calls}
            answered = [
                _dump_call(t["tool_call"]) for t in _followers(messages, position) if t.get("tool_call") is not None
            ]
            if any(c["id"] not in by_id for c in answered):
                seen = {c["id"] for c in answered}
                calls = [by_id.get(c["id"], c) for c in answered] + [c for c in calls if c["id"] not in seen]
            item["tool_calls"] = calls or None
        out.append(item)
    return out


def offline_episode(
    messages: Sequence[Any],
    *,
    episode_id: str,
    suite: str,
    user_task: str,
    injection_task: str | None,
    attack: str | None,
) -> Episode:
    """The offline :class:`Episode` of a re-run transcript, built by the corpus loader (the replay path)."""
    from guard.corpora.agentdojo import FormatError, RunFile, build_episode, parse_run

    data: dict[str, Any] = {
        "suite_name": suite,
        "user_task_id": user_task,
        "injection_task_id": injection_task,
        "attack_type": attack,
        "injections": {},
        "messages": transcript(messages),
        "utility": False,
        "security": False,
        "error": None,
    }
    where = RunFile(Path(episode_id), "rerun", suite, user_task, attack or "none", injection_task or "none")
    try:
        raw = parse_run(data, where)
    except FormatError as exc:
        raise CorpusError(f"re-run transcript of {episode_id}: {exc}") from None
    if isinstance(raw, str):  # pragma: no cover - 'error' is always None here
        raise CorpusError(raw)
    return dataclasses.replace(build_episode(raw), episode_id=episode_id)
