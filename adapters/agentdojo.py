"""AgentDojo adapter: the guard inside AgentDojo pipelines, and logged runs re-executed in the real suites.

- :class:`GuardElement` goes inside ``ToolsExecutionLoop``, before ``ToolsExecutor``.  It feeds the
  message list into a session incrementally (user turns, tool results) and decides every tool call
  of the newest assistant turn, in order, before any of them runs.  ``mode="abort"`` stops the
  agent at the first refusal (``AbortAgentError``; the calls before it in the turn run, the rest do
  not); ``mode="deny"`` removes the refused calls from the assistant message (AgentDojo's checks
  read calls from assistant messages, executed or not) and answers each with an error tool result
  so the agent can go on.  ``probe`` verdicts run the probe tools against the environment, observe
  them and decide again (bounded).  Calls without ids get ``t{message}c{position}`` ids, and list
  arguments written as strings are parsed the way ``ToolsExecutor`` does, so the guard decides on
  exactly what runs; the rewritten assistant message carries both.
- :class:`ReplayLLM` re-emits a logged run's assistant turns in order, so the run re-executes
  offline in AgentDojo's real environment and gets AgentDojo's own utility and security verdicts.
- :func:`run_suite` re-runs the logged episodes of one suite with and without the guard and checks
  that every online decision equals the offline replay (:func:`guard.calibration.replay.replay_decisions`)
  of the re-run's transcript.  Once a probe ran online, later decisions see probe records that a
  replay of the transcript cannot have (METHOD §11): only the decisions before the first probed
  proposal of an episode are compared.

Provider note: in ``deny`` mode a refused call's error result answers a call that is no longer in
the assistant message.  AgentDojo's own pipeline and :class:`ReplayLLM` accept that; provider APIs
that require every tool message to answer a call of the preceding turn (OpenAI, Anthropic) will
reject the next request, so use ``abort`` with those live models.

The module imports without AgentDojo; its entry points raise ImportError with the install hint
(``pip install 'carbguard[agentdojo]'``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
from ast import literal_eval
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

from guard.decision import Decision, Verdict
from guard.errors import CorpusError, InputError
from guard.records import Episode, RecordKind
from guard.runtime import Guard, Session

_HINT = "pip install 'carbguard[agentdojo]'"

# The module imports without AgentDojo (so ``import guard.adapters.agentdojo`` works in a core-only
# install); every entry point calls ``_require`` first and raises ImportError with the install hint.
_MISSING: ImportError | None = None
try:
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline, load_system_message
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement
    from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage
    from agentdojo.agent_pipeline.errors import AbortAgentError
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor, is_string_list
    from agentdojo.functions_runtime import EmptyEnv, FunctionCall, FunctionsRuntime
    from agentdojo.task_suite.load_suites import get_suite
    from agentdojo.types import get_text_content_as_str, text_content_block_from_string
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    _MISSING = exc
    BasePipelineElement = FunctionCall = object  # type: ignore[assignment,misc,unused-ignore]


def _require() -> None:
    """Raise ImportError with the install hint when AgentDojo did not import."""
    if _MISSING is not None:
        raise ImportError(f"guard.adapters.agentdojo needs AgentDojo: {_HINT}") from _MISSING


__all__ = [
    "VERSIONS",
    "EpisodeOutcome",
    "GuardElement",
    "GuardedRun",
    "ReplayLLM",
    "compatible_versions",
    "offline_episode",
    "rerun_episode",
    "run_suite",
    "transcript",
]

Mode = Literal["abort", "deny"]
VERSIONS: tuple[str, ...] = ("v1", "v1.1", "v1.1.1", "v1.1.2", "v1.2", "v1.2.1", "v1.2.2")
"""AgentDojo benchmark versions, oldest first."""
_EMPTY_ENV: Any = EmptyEnv() if _MISSING is None else None


def _content_text(content: Any) -> str:
    """Text of an AgentDojo ``content``: a string, None, or a list of text blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    parts = [
        b.get("content", b.get("text")) or ""
        for b in content
        if isinstance(b, Mapping) and b.get("type", "text") == "text"
    ]
    return "\n".join(parts)


def _result_text(message: Mapping[str, Any]) -> tuple[str, str]:
    """Text and status of a tool message (an error is appended to any content, as the loader does)."""
    text, error = _content_text(message.get("content")), message.get("error")
    if error is None:
        return text, "ok"
    return (f"{text}\n{error}" if text else str(error)), "error"


def _refusal_text(decision: Decision) -> str:
    """What the agent is told about a refused call (with SafeCommit's certified replacement, if any)."""
    verdict, reason = decision.verdict.value, decision.reason.value
    text = f"carbguard did not run `{decision.tool}` ({verdict}: {reason}). {decision.message}"
    replacement = (decision.safecommit or {}).get("replacement")
    if isinstance(replacement, Mapping) and replacement.get("tool"):
        args = json.dumps(replacement.get("args") or {}, sort_keys=True, default=str)
        text += f" Suggested instead: {replacement['tool']}({args})."
    return text


# --------------------------------------------------------------------------- the pipeline element


@dataclass
class GuardedRun:
    """One agent run seen by a :class:`GuardElement`: its session and what happened online."""

    session: Session
    first: Any
    position: int = 0
    used: set[str] = field(default_factory=set)
    pending: list[str] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    first_probe: int | None = None
    aborted: bool = False
    skipped: list[str] = field(default_factory=list)
    messages: list[Any] | None = None

    @property
    def refused(self) -> list[Decision]:
        """The decisions that did not let their call run."""
        return [d for d in self.decisions if not d.allowed]


class GuardElement(BasePipelineElement):  # type: ignore[misc]
    """Decides every tool call before ``ToolsExecutor`` runs it (see the module docstring).

    Args:
        guard: the configured guard.
        mode: ``"abort"`` (stop the agent at the first refusal) or ``"deny"`` (refuse and go on).
        session_id: id of the first run's session (later runs get ``#2``, ``#3``, ...).
        executor: runs the allowed calls of a turn that also has refused ones; pass the same
            ``ToolsExecutor`` (output formatter) as the pipeline uses.
        max_probe_rounds: probe → decide-again rounds before a call is refused.
        keep_runs: how many past runs to keep in :attr:`runs`.
    """

    name = "carbguard"

    def __init__(
        self,
        guard: Guard,
        mode: Mode = "abort",
        *,
        session_id: str = "agentdojo",
        executor: ToolsExecutor | None = None,
        max_probe_rounds: int = 2,
        keep_runs: int = 64,
    ) -> None:
        _require()
        if mode not in ("abort", "deny"):
            raise ValueError(f"mode must be 'abort' or 'deny', got {mode!r}")
        self.guard = guard
        self.mode: Mode = mode
        self.session_id = session_id
        self.executor = executor or ToolsExecutor()
        self.max_probe_rounds = max_probe_rounds
        self.runs: deque[GuardedRun] = deque(maxlen=keep_runs)
        self._count = 0

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Any = _EMPTY_ENV,
        messages: Sequence[Any] = (),
        extra_args: dict[str, Any] = {},  # noqa: B006 - AgentDojo's signature; never mutated
    ) -> tuple[str, FunctionsRuntime, Any, Sequence[Any], dict[str, Any]]:
        """Feed new messages, decide the newest turn's calls, and refuse what the guard refuses."""
        if not messages:
            return query, runtime, env, messages, extra_args
        run = self._run_for(messages)
        last = messages[-1]
        turn = last.get("role") == "assistant" and bool(last.get("tool_calls"))
        end = len(messages) - 1 if turn else len(messages)
        self._observe(run, messages, end)
        if not turn or run.position > end:
            return query, runtime, env, messages, extra_args
        calls = self._resolve(run, end, last["tool_calls"])
        run.position = end + 1
        decided = self._decide_turn(run, calls, runtime, env)
        if all(d.allowed for _, d in decided):
            return query, runtime, env, [*messages[:-1], {**last, "tool_calls": calls}], extra_args
        env, out = self._answer_refusals(query, runtime, env, messages, decided, extra_args)
        if self.mode == "abort":
            refusal = next(d for _, d in decided if not d.allowed)
            run.aborted = True
            error = AbortAgentError(f"carbguard stopped the agent. {_refusal_text(refusal)}", out, env)
            run.messages = list(error.messages)
            raise error
        return query, runtime, env, out, extra_args

    def _decide_turn(
        self, run: GuardedRun, calls: list[Any], runtime: FunctionsRuntime, env: Any
    ) -> list[tuple[Any, Decision]]:
        """Decide the turn's calls in order (``abort`` stops at the first refusal)."""
        decided = []
        for call in calls:
            decision = self._settle(run, call, runtime, env)
            run.decisions.append(decision)
            decided.append((call, decision))
            if not decision.allowed and self.mode == "abort":
                break
        return decided

    def _answer_refusals(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Any,
        messages: Sequence[Any],
        decided: list[tuple[Any, Decision]],
        extra_args: dict[str, Any],
    ) -> tuple[Any, list[Any]]:
        """Keep only the allowed calls in the turn, run them, and answer every decided call in order."""
        allowed = [c for c, d in decided if d.allowed]
        head = [*messages[:-1], {**messages[-1], "tool_calls": allowed}]
        results: dict[Any, Any] = {}
        if allowed:
            _, _, env, executed, _ = self.executor.query(query, runtime, env, head, extra_args)
            results = {m.get("tool_call_id"): m for m in executed[len(head) :]}
        return env, [*head, *(results.get(c.id) or self._refusal(c, d) for c, d in decided)]

    # ------------------------------------------------------------------ runs and the message feed

    def _run_for(self, messages: Sequence[Any]) -> GuardedRun:
        run = self.runs[-1] if self.runs else None
        if run is None or run.first is not messages[0] or len(messages) < run.position:
            self._count += 1
            sid = self.session_id if self._count == 1 else f"{self.session_id}#{self._count}"
            run = GuardedRun(session=self.guard.session(sid), first=messages[0])
            self.runs.append(run)
        return run

    def _observe(self, run: GuardedRun, messages: Sequence[Any], end: int) -> None:
        session = run.session
        for position in range(run.position, end):
            message = messages[position]
            role = message.get("role")
            if role == "user":
                session.observe_user(_content_text(message.get("content")))
            elif role == "assistant" and message.get("tool_calls"):
                # a turn this element did not see as newest (e.g. placed outside the loop): decide late
                for call in self._resolve(run, position, message["tool_calls"]):
                    run.decisions.append(session.decide(call.function, dict(call.args), call.id))
            elif role == "assistant":
                session.observe_final(_content_text(message.get("content")))
            elif role == "tool":
                self._observe_tool(run, message)
        run.position = max(run.position, end)

    def _observe_tool(self, run: GuardedRun, message: Mapping[str, Any]) -> None:
        call_id = message.get("tool_call_id")
        if call_id in run.pending:
            run.pending.remove(call_id)
        elif not call_id and run.pending:
            call_id = run.pending.pop(0)
        else:
            run.skipped.append(f"tool result for unknown call id {call_id!r}")
            return
        text, status = _result_text(message)
        try:
            run.session.observe_result(call_id, text, status)
        except InputError as exc:  # a call refused before it entered the graph (unknown tool, bad args)
            run.skipped.append(str(exc))

    def _resolve(self, run: GuardedRun, position: int, tool_calls: Sequence[Any]) -> list[Any]:
        """Copies of the calls with unique ids and ``ToolsExecutor``'s argument parsing applied."""
        out = []
        for j, raw in enumerate(tool_calls):
            call = raw if isinstance(raw, FunctionCall) else FunctionCall.model_validate(raw)
            original = call.id if isinstance(call.id, str) and call.id else None
            call_id = original if original is not None and original not in run.used else f"t{position}c{j}"
            while call_id in run.used:
                call_id += "_"
            run.used.add(call_id)
            run.pending.append(call_id)
            args = {k: literal_eval(v) if isinstance(v, str) and is_string_list(v) else v for k, v in call.args.items()}
            out.append(call.model_copy(update={"id": call_id, "args": copy.deepcopy(args)}))
        return out

    def _settle(self, run: GuardedRun, call: Any, runtime: FunctionsRuntime, env: Any) -> Decision:
        session = run.session
        decision = session.decide(call.function, dict(call.args), call.id)
        for _ in range(self.max_probe_rounds):
            if decision.verdict is not Verdict.PROBE:
                break
            if run.first_probe is None:
                run.first_probe = len(run.decisions)
            ran = sum(self._probe(run, probe, runtime, env) for probe in decision.probes)
            decision = session.decide(call.function, dict(call.args), call.id)
            if ran == 0:
                break
        return decision

    def _probe(self, run: GuardedRun, probe: Any, runtime: FunctionsRuntime, env: Any) -> int:
        if probe.tool not in runtime.functions:
            run.skipped.append(f"probe tool {probe.tool!r} is not in the suite")
            return 0
        if not run.session.decide(probe.tool, dict(probe.args), probe.call_id).allowed:
            return 0
        value, error = runtime.run_function(env, probe.tool, dict(probe.args))
        text, status = _result_text({"content": self.executor.output_formatter(value), "error": error})
        try:
            run.session.observe_result(probe.call_id, text, status)
        except InputError as exc:
            run.skipped.append(str(exc))
        return 1

    @staticmethod
    def _refusal(call: Any, decision: Decision) -> dict[str, Any]:
        return {
            "role": "tool",
            "content": [text_content_block_from_string("")],
            "tool_call_id": call.id,
            "tool_call": call,
            "error": _refusal_text(decision),
        }


# --------------------------------------------------------------------------- replaying a logged run


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
        turns.append({"content": None if content is None else _content_text(content), "tool_calls": calls})
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
        _require()
        self.turns = _assistant_turns(source)
        self._cursor = 0

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Any = _EMPTY_ENV,
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


class _Recorder(BasePipelineElement):  # type: ignore[misc]
    """Keeps the messages of the last run that ended normally."""

    def __init__(self) -> None:
        self.messages: list[Any] | None = None

    def query(
        self,
        query: str,
        runtime: FunctionsRuntime,
        env: Any = _EMPTY_ENV,
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
    _require()
    out: list[dict[str, Any]] = []
    for position, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            out.append(
                {
                    "role": "tool",
                    "content": _content_text(message.get("content")),
                    "tool_call_id": message.get("tool_call_id"),
                    "tool_call": _dump_call(message["tool_call"]) if message.get("tool_call") is not None else None,
                    "error": message.get("error"),
                }
            )
            continue
        item = {
            "role": role,
            "content": _content_text(message.get("content")) if message.get("content") is not None else None,
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
    from guard.corpora._agentdojo_format import FormatError, RunFile, parse_run
    from guard.corpora.agentdojo import build_episode

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


# --------------------------------------------------------------------------- suites, versions, injections


def _norm(text: str) -> str:
    return " ".join(text.split())


def _task(suite: Any, task_id: str) -> Any:
    if task_id.startswith("injection_task_"):
        return suite.get_injection_task_by_id(task_id)
    return suite.get_user_task_by_id(task_id)


def compatible_versions(episode: Episode) -> tuple[str, ...]:
    """The benchmark versions whose task texts match a logged episode (user prompt, injection goal)."""
    _require()
    meta = episode.meta
    said = _norm(next((r.text for r in episode.records if r.kind is RecordKind.USER), ""))
    payloads = [_norm(p) for p in meta.injections]
    found = []
    for version in VERSIONS:
        suite = get_suite(version, meta.suite)
        try:
            task = _task(suite, meta.user_task)
            goal = suite.get_injection_task_by_id(meta.injection_task) if meta.injection_task else None
        except (KeyError, ValueError):
            continue
        prompt = task.GOAL if meta.user_task.startswith("injection_task_") else task.PROMPT
        if _norm(prompt) != said:
            continue
        if goal is not None and payloads and not any(_norm(goal.GOAL) in p for p in payloads):
            continue
        found.append(version)
    return tuple(found)


def _choose_versions(episodes: Sequence[Episode], declared: Mapping[str, str] | None = None) -> dict[str, str]:
    """One version per episode: the declared one, else the oldest consistent with all episodes of its model."""
    declared = declared or {}
    per = {e.episode_id: compatible_versions(e) for e in episodes if e.episode_id not in declared}
    by_model: dict[str, set[str]] = {}
    for e in episodes:
        if per.get(e.episode_id):
            by_model.setdefault(e.meta.model, set(VERSIONS)).intersection_update(per[e.episode_id])
    chosen = dict(declared)
    for e in episodes:
        if e.episode_id in declared:
            continue
        shared = [v for v in VERSIONS if v in by_model.get(e.meta.model, set())]
        own = per[e.episode_id]
        if not own:
            raise CorpusError(
                f"{e.episode_id}: its user prompt / injection goal matches no AgentDojo benchmark version "
                f"({', '.join(VERSIONS)}); pass version=... explicitly"
            )
        chosen[e.episode_id] = shared[0] if shared else own[0]
    return chosen


@cache
def injection_candidates(version: str, suite_name: str, user_task: str) -> tuple[str, ...]:
    """The injection vectors the ground truth of ``user_task`` sees (AgentDojo's own rule)."""
    _require()
    suite = get_suite(version, suite_name)
    task = suite.get_user_task_by_id(user_task)
    canaries = {v: f"<CANARY---{v}--->" for v in suite.get_injection_vector_defaults()}
    env = suite.load_and_inject_default_environment(canaries)
    _, _, _, responses, _ = GroundTruthPipeline(task).query(task.PROMPT, FunctionsRuntime(suite.tools), env)
    texts = [get_text_content_as_str(r["content"]) for r in responses if r["content"] is not None]
    return tuple(v for v, canary in canaries.items() if any(canary in t for t in texts))


def _injections(episode: Episode, version: str) -> dict[str, str]:
    """The attack's injections, rebuilt from the episode's payloads (sorted by vector id in the loader)."""
    meta = episode.meta
    if not meta.attack or not meta.injection_task:
        return {}
    vectors = sorted(injection_candidates(version, meta.suite, meta.user_task))
    payloads = list(meta.injections)
    if len(set(payloads)) == 1:
        return dict.fromkeys(vectors, payloads[0])
    if len(payloads) == len(vectors):
        return dict(zip(vectors, payloads, strict=True))
    raise CorpusError(f"{episode.episode_id}: {len(payloads)} injection payloads for {len(vectors)} injection vectors")


# --------------------------------------------------------------------------- re-running episodes


@dataclass(frozen=True)
class EpisodeOutcome:
    """AgentDojo's verdicts for one re-run, and the online/offline comparison when guarded."""

    episode_id: str
    version: str
    attacked: bool
    utility: bool
    security: bool
    decisions: tuple[Decision, ...] = ()
    offline: tuple[Decision, ...] = ()
    compared: int = 0
    equal: int = 0
    note: str = ""
    messages: tuple[Any, ...] = field(default=(), repr=False)


def _same(a: Decision, b: Decision) -> bool:
    return dataclasses.replace(a, latency_us=0.0) == dataclasses.replace(b, latency_us=0.0)


def rerun_episode(
    episode: Episode,
    version: str,
    *,
    guard: Guard | None = None,
    mode: Mode = "deny",
    offline_guard: Guard | None = None,
    max_iters: int = 15,
) -> EpisodeOutcome:
    """Re-execute one logged episode in its real AgentDojo suite, with or without the guard."""
    _require()
    meta = episode.meta
    suite = get_suite(version, meta.suite)
    user_task = _task(suite, meta.user_task)
    injection_task = (
        suite.get_injection_task_by_id(meta.injection_task) if meta.attack and meta.injection_task else None
    )
    replay, recorder = ReplayLLM(episode), _Recorder()
    element = GuardElement(guard, mode, session_id=episode.episode_id) if guard is not None else None
    loop = ToolsExecutionLoop([*([element] if element else []), ToolsExecutor(), replay], max_iters=max_iters)
    pipeline = AgentPipeline([SystemMessage(load_system_message(None)), InitQuery(), replay, loop, recorder])
    pipeline.name = "carbguard-replay"
    utility, security = suite.run_task_with_pipeline(pipeline, user_task, injection_task, _injections(episode, version))
    outcome = EpisodeOutcome(episode.episode_id, version, injection_task is not None, bool(utility), bool(security))
    if guard is None or element is None or not element.runs:
        return dataclasses.replace(outcome, messages=tuple(recorder.messages or ()))
    run = element.runs[-1]
    messages = run.messages if run.aborted and run.messages is not None else recorder.messages or []
    outcome = dataclasses.replace(outcome, decisions=tuple(run.decisions), messages=tuple(messages))
    return _compare(outcome, run, episode, offline_guard or guard)


def _compare(outcome: EpisodeOutcome, run: GuardedRun, episode: Episode, guard: Guard) -> EpisodeOutcome:
    """Replay the re-run's transcript offline and compare decision by decision.

    Once a probe ran online, later decisions see probe records that a replay of the transcript
    cannot have (METHOD §11): only the decisions before the first probed proposal are compared.
    """
    from guard.calibration.replay import replay_decisions

    meta = episode.meta
    try:
        offline_ep = offline_episode(
            outcome.messages,
            episode_id=run.session.session_id,
            suite=meta.suite,
            user_task=meta.user_task,
            injection_task=meta.injection_task if meta.attack else None,
            attack=meta.attack,
        )
        offline = tuple(replay_decisions(guard, offline_ep))
    except Exception as exc:  # noqa: BLE001 - a replay that cannot run is a disagreement, reported
        n = len(outcome.decisions)
        return dataclasses.replace(
            outcome, compared=n, equal=0, note=f"offline replay failed: {type(exc).__name__}: {exc}"
        )
    online = outcome.decisions
    notes = []
    if run.first_probe is not None:
        online = online[: run.first_probe]
        notes.append(f"probes ran online at proposal {run.first_probe}: later decisions not comparable (METHOD §11)")
    # Proposals of a turn the step limit cut off are in the transcript but were never gated online;
    # every online decision must have its offline twin at the same position.
    equal = sum(_same(a, b) for a, b in zip(online, offline, strict=False))
    if len(offline) > len(outcome.decisions):
        notes.append(
            f"{len(offline) - len(outcome.decisions)} proposal(s) after the step limit were never gated online"
        )
    note = "; ".join(notes)
    return dataclasses.replace(outcome, offline=offline, compared=len(online), equal=equal, note=note)


def _episodes_of(runs_or_report: Any, suite: str) -> tuple[list[Episode], dict[str, str]]:
    """The suite's user-task episodes, and the benchmark versions that run files declare."""
    declared: dict[str, str] = {}
    if isinstance(runs_or_report, str | Path):
        from guard.corpora.agentdojo import load_runs

        root = Path(runs_or_report)
        runs_or_report = load_runs(root, suites=[suite])
        declared = _declared_versions(root, runs_or_report.episodes)
    episodes = getattr(runs_or_report, "episodes", runs_or_report)
    if not isinstance(episodes, Iterable):
        raise CorpusError(
            f"run_suite: expected a runs folder, a LoadReport or episodes, got {type(runs_or_report).__name__}"
        )
    chosen = []
    for episode in episodes:
        if not isinstance(episode, Episode):
            raise CorpusError(f"run_suite: expected Episode objects, got {type(episode).__name__}")
        if episode.meta.suite == suite and not episode.meta.user_task.startswith("injection_task_"):
            chosen.append(episode)
    return chosen, declared


def _declared_versions(root: Path, episodes: Iterable[Episode]) -> dict[str, str]:
    """``benchmark_version`` of the run files that carry one (v1.2.x runs; v1 runs have none)."""
    found = {}
    for episode in episodes:
        candidates = [root / episode.meta.source, root.parent / episode.meta.source]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            continue
        try:
            version = json.loads(path.read_text(encoding="utf-8")).get("benchmark_version")
        except (OSError, ValueError):
            continue
        if isinstance(version, str) and version in VERSIONS:
            found[episode.episode_id] = version
    return found


def _rates(outcomes: Sequence[EpisodeOutcome]) -> dict[str, float]:
    attacked = [o for o in outcomes if o.attacked]
    return {
        "utility": sum(o.utility for o in outcomes) / len(outcomes) if outcomes else 0.0,
        "attack_success": sum(o.security for o in attacked) / len(attacked) if attacked else 0.0,
    }


def run_suite(
    runs_or_report: Any,
    suite: str,
    *,
    guard_factory: Callable[[str], Guard],
    mode: Mode = "deny",
    limit: int | None = None,
    progress: bool = False,
    version: str | None = None,
    outcomes: list[tuple[EpisodeOutcome, EpisodeOutcome]] | None = None,
) -> dict[str, Any]:
    """Re-run a suite's logged episodes without and with the guard; AgentDojo's verdicts and the online/offline check.

    ``runs_or_report`` is a runs folder (read with :func:`guard.corpora.agentdojo.load_runs`), a
    ``LoadReport`` or an iterable of episodes; only ``user_task_*`` episodes of ``suite`` are used.
    The benchmark version of each episode is the oldest one whose task texts match it and all
    episodes of the same model (or ``version``).  ``guard_factory(suite)`` makes the guard; a
    second one replays the transcripts offline.  Pass a list as ``outcomes`` to receive the
    per-episode ``(without, with)`` outcomes.
    """
    _require()
    if mode not in ("abort", "deny"):
        raise ValueError(f"mode must be 'abort' or 'deny', got {mode!r}")
    if version is not None and version not in VERSIONS:
        raise ValueError(f"unknown AgentDojo benchmark version {version!r}; known: {', '.join(VERSIONS)}")
    episodes, declared = _episodes_of(runs_or_report, suite)
    episodes = episodes[: limit if limit is not None else None]
    versions = {e.episode_id: version for e in episodes} if version else _choose_versions(episodes, declared)
    pairs = []
    for count, episode in enumerate(episodes, start=1):
        ver = versions[episode.episode_id]
        base = rerun_episode(episode, ver)
        guarded = rerun_episode(episode, ver, guard=guard_factory(suite), mode=mode, offline_guard=guard_factory(suite))
        pairs.append((base, guarded))
        if progress:
            sys.stderr.write(f"\r{suite}: {count}/{len(episodes)} episodes re-run")
            sys.stderr.flush()
    if progress and episodes:
        sys.stderr.write("\n")
    if outcomes is not None:
        outcomes.extend(pairs)
    return {
        "suite": suite,
        "episodes": len(pairs),
        "without_guard": _rates([b for b, _ in pairs]),
        "with_guard": _rates([g for _, g in pairs]),
        "decisions_compared": sum(g.compared for _, g in pairs),
        "decisions_equal": sum(g.equal for _, g in pairs),
    }
