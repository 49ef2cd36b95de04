"""LangChain and LangGraph adapter: guard every tool call of an agent.

Three ways in, one core:

- :class:`GuardMiddleware` for ``langchain.agents.create_agent`` (``wrap_tool_call`` and
  ``awrap_tool_call``, plus ``after_model`` to decide a model turn's calls in order and to refuse the
  calls whose arguments LangChain could not parse);
- :func:`guard_tool_node` (or :class:`GuardToolWrapper` passed to LangGraph's
  ``ToolNode(wrap_tool_call=..., awrap_tool_call=...)``) for hand-built graphs; a ``ToolNode`` never
  sees its run start nor end, so :func:`start_run` declares a run's human input and :func:`end_run`
  (:func:`aend_run`) after each run feeds the final answer, sets the episode's metadata and closes the session;
- :func:`guard_tools` for executors that call ``tool.invoke(tool_call)`` themselves (langchain-core
  only).

The session of a run is fed from the message history: the human's turns → ``observe_user`` (their
non-text blocks → untrusted content), each AI turn's
tool calls → ``decide`` (in the order the model wrote them, before any of them runs; a reused call
id is decided again, which refuses it), ``ToolMessage`` results → ``observe_result``, a final AI
answer → ``observe_final``.  A run is keyed by its thread id, else by its first message's id; with
neither, or with a message without an id, every call is refused (no shared session, no position
keys).

The user channel (docs/security.md#the-user-channel): only what a human wrote is a user turn, by
provenance.  A ``HumanMessage`` is one only when its text is that of a human message the guard saw
arrive as a run's input — with a checkpointer, in its record of the thread's inputs (never the
state, which holds what tools, failed runs and ``update_state`` left); without one, the state at a
``create_agent`` run's start (``GuardMiddleware.before_agent``) or what the caller declares to a
``ToolNode`` graph with :func:`start_run` — and it carries no framework marker (``lc_source``).  A
summary of ``SummarizationMiddleware`` or of a node's ``RemoveMessage(REMOVE_ALL_MESSAGES)``, a
``HumanMessage`` a tool's ``Command(update=...)``, a node, a middleware or ``update_state`` adds,
and a message rewritten after it was fed are observed as untrusted content (see
:mod:`guard.adapters._langchain_user`).

Binding: a call runs only as ``decide`` → ``Session.authorize(call id, tool, args)`` → the tool
with the *returned* canonical arguments.  The feed's decision is used only for exactly the tool
and arguments it was made on; a request changed afterwards (e.g. by ``HumanInTheLoopMiddleware``
or any middleware before this one) is decided again on its new content under
:func:`edited_call_id`, and runs only if that decision allows it.

Verdicts: ``execute`` runs the tool; ``probe`` runs the requested side-effect-free tools (found by
name among the agent's tools, each itself decided and authorized), observes their results and
decides again, at most ``max_probe_rounds`` times; ``defer`` and ``abstain`` return a
``ToolMessage`` with ``status="error"`` and the reason; ``escalate`` raises a LangGraph
``interrupt`` when the graph has a checkpointer, else it is refused like ``defer``.  The interrupt
follows LangChain's HITL conventions (see :mod:`guard.adapters._langchain_review`): with
:class:`GuardMiddleware`, one interrupt per model turn lists every escalated call
(``action_requests``) and is answered with ``{"decisions": [...]}`` (one per call, in order) or
``{"decisions": {tool_call_id: ...}}``; a missing, extra or unknown decision is refused and can be
answered again.  A ``ToolNode`` asks about the first escalated call of a model turn and refuses
the turn's later escalated calls (docs/integrations/langgraph.md#after-an-escalation).  Answers are
``approve`` / ``reject`` / ``edit`` / ``respond``; every answer is its own audit entry (``kind:
review``), and an edited call is decided again before it can run.

Observed text: a message's content as the model is given it — ``text`` blocks as their text, every
other content block (``json``, ``search_result``, ``document``, image, file, non-standard, unknown)
as its canonical JSON, a non-JSON block as its repr.  ``ToolMessage.artifact`` never reaches the
model and is not observed.  ``mode="shadow"`` decides and audits every call but never
blocks, never probes and never interrupts.  Sync and async share one I/O-free generator; the
drivers only call ``decide``/``adecide`` and the tool.

The module imports without LangChain; its entry points raise ImportError with the install hint
(``pip install 'carbguard[langchain]'``).  :func:`guard_tools` needs langchain-core only.
"""

from guard.adapters._langchain_binding import edited_call_id
from guard.adapters._langchain_core import SessionKey as SessionKey
from guard.adapters._langchain_core import UnboundCallError, refusal_text, thread_session_key
from guard.adapters._langchain_episode import aend_run, end_run, start_run, tool_node_wrapper
from guard.adapters._langchain_middleware import GuardMiddleware, guard_tool_node
from guard.adapters._langchain_review import (
    ApproveDecision,
    EditDecision,
    RejectDecision,
    RespondDecision,
    review_context,
)
from guard.adapters._langchain_tools import GuardedTool, guard_tools
from guard.adapters._langchain_wrapper import GuardToolWrapper

__all__ = [
    "ApproveDecision",
    "EditDecision",
    "GuardMiddleware",
    "GuardToolWrapper",
    "GuardedTool",
    "RejectDecision",
    "RespondDecision",
    "UnboundCallError",
    "aend_run",
    "edited_call_id",
    "end_run",
    "guard_tool_node",
    "guard_tools",
    "refusal_text",
    "review_context",
    "start_run",
    "thread_session_key",
    "tool_node_wrapper",
]
