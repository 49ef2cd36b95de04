"""SafeCommit's probes answered in AgentDojo's own environment, for replay studies (docs/studies.md).

A logged run holds no answer to a probe the guard asks for, so log replay counts a ``probe`` verdict as
a stop.  AgentDojo ships each suite's environment, and every probe of the suite policies is a read-only
lookup in it (contacts, channel members, scheduled transactions, a file's ``shared_with``): the probe
is run with AgentDojo's own function on the environment the episode ran in (its benchmark version, its
injections), as ``carbguard agentdojo run`` runs it, and its result read as the flow reads it.

What it does not model: the environment is the one the episode *started* in.  A call the episode ran
before the proposal (a contact added, a user invited) is not applied, so a probe about a value the run
itself created answers as the initial state does (usually "unknown": a stop).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from guard.adapters._agentdojo_compat import require, result_text
from guard.decision import ProbeCall
from guard.records import Episode, Record, RecordKind, Trust

#: an episode → the answers to its probe calls (a result record; None when the tool is not the suite's).
ProbeAnswers = Callable[[Episode], Callable[[ProbeCall], Record | None]]


def environment_answers(episodes: Sequence[Episode]) -> ProbeAnswers:
    """Answer each episode's probe calls in its AgentDojo environment (module docstring).

    The benchmark version of each episode is chosen as ``carbguard agentdojo run`` chooses it; an episode
    that is not in ``episodes`` (a reworded copy, say) is answered in the environment of the logged
    episode of the same id.  Raises ImportError with the install hint without AgentDojo.
    """
    require()
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutor
    from agentdojo.functions_runtime import FunctionsRuntime
    from agentdojo.task_suite.load_suites import get_suite

    from guard.adapters._agentdojo_runner import choose_versions, episode_injections

    versions = choose_versions(episodes)
    logged = {e.episode_id: e for e in episodes}
    formatter = ToolsExecutor().output_formatter
    environments: dict[str, tuple[Any, Any]] = {}

    def environment(episode: Episode) -> tuple[Any, Any]:
        found = environments.get(episode.episode_id)
        if found is None:
            original = logged.get(episode.episode_id, episode)
            version = versions.get(original.episode_id) or choose_versions([original])[original.episode_id]
            suite = get_suite(version, original.meta.suite)
            env = suite.load_and_inject_default_environment(episode_injections(original, version))
            found = environments[episode.episode_id] = (FunctionsRuntime(suite.tools), env)
        return found

    def answers(episode: Episode) -> Callable[[ProbeCall], Record | None]:
        def answer(call: ProbeCall) -> Record | None:
            runtime, env = environment(episode)
            if call.tool not in runtime.functions:
                return None
            value, error = runtime.run_function(env, call.tool, dict(call.args))
            text, status = result_text({"content": formatter(value), "error": error})
            return Record(
                0, RecordKind.RESULT, Trust.TOOL_PRIVATE, text, call.tool, call_id=call.call_id, status=status
            )

        return answer

    return answers


__all__ = ["ProbeAnswers", "environment_answers"]
