"""AgentDojo adapter: the guard inside AgentDojo pipelines, and logged runs re-executed in the real suites.

- :class:`GuardElement` goes inside ``ToolsExecutionLoop``, before ``ToolsExecutor``.  It feeds the
  message list into a session incrementally (user turns, tool results) and decides every tool call
  of the newest assistant turn, in order, before any of them runs.  Only a ``user`` message whose text is
  the pipeline's query (the task's prompt) is a user turn; any other ``user``-role message is
  untrusted content (docs/security.md#the-user-channel).  ``mode="abort"`` stops the
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
  replay of the transcript cannot have (docs/concepts.md): only the decisions before the first probed
  proposal of an episode are compared.

Provider note: in ``deny`` mode a refused call's error result answers a call that is no longer in
the assistant message.  AgentDojo's own pipeline and :class:`ReplayLLM` accept that; provider APIs
that require every tool message to answer a call of the preceding turn (OpenAI, Anthropic) will
reject the next request, so use ``abort`` with those live models.

The module imports without AgentDojo; its entry points raise ImportError with the install hint
(``pip install 'carbguard[agentdojo]'``).
"""

from guard.adapters._agentdojo_compat import Mode as Mode
from guard.adapters._agentdojo_element import GuardedRun, GuardElement
from guard.adapters._agentdojo_replay import ReplayLLM, offline_episode, transcript
from guard.adapters._agentdojo_runner import (
    VERSIONS,
    AgentDojoVersionWarning,
    EpisodeOutcome,
    compatible_versions,
    episode_injections,
    rerun_episode,
    run_suite,
)
from guard.adapters._agentdojo_runner import injection_candidates as injection_candidates

__all__ = [
    "VERSIONS",
    "AgentDojoVersionWarning",
    "EpisodeOutcome",
    "GuardElement",
    "GuardedRun",
    "ReplayLLM",
    "compatible_versions",
    "episode_injections",
    "offline_episode",
    "rerun_episode",
    "run_suite",
    "transcript",
]
