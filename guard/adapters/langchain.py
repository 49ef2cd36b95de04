"""LangChain and LangGraph adapter: guard every tool call of an agent.

Three ways in, one core:

- :class:`GuardMiddleware` for ``langchain.agents.create_agent`` (``wrap_tool_call`` and
  ``awrap_tool_call``, plus ``after_model`` to decide a model turn's calls in order and to refuse the
  calls whose arguments LangChain could not parse);
- :func:`guard_tool_node` (or :class:`GuardToolWrapper` passed to LangGraph's
  ``ToolNode(wrap_tool_call=..., awrap_tool_call=...)``) for hand-built graphs;
- :func:`guard_tools` for executors that call ``tool.invoke(tool_call)`` themselves (langchain-core
  only).

The session of a run is fed from the message history: human turns → ``observe_user``, each AI turn's
tool calls → ``decide`` (in the order the model wrote them, before any of them runs),
``ToolMessage`` results → ``observe_result``, a final AI answer → ``observe_final``.  Because the
feed is a deterministic function of the messages, the sync and async paths give the same decisions
and a session dropped from memory can be rebuilt from the graph state.

Verdicts: ``execute`` runs the tool; ``probe`` runs the requested side-effect-free tools (found by
name among the agent's tools), observes their results and decides again, at most
``max_probe_rounds`` times; ``defer`` and ``abstain`` return a ``ToolMessage`` with
``status="error"`` and the reason; ``escalate`` raises a LangGraph ``interrupt`` when the graph has a
checkpointer (resume with ``Command(resume={"type": "approve"})`` or ``{"type": "reject",
"message": ...}``, the per-call answers of LangChain's ``HumanInTheLoopMiddleware``), else it is
refused like ``defer``.  Sync and async share one I/O-free generator
(:func:`~guard.adapters._langchain_core._settle`); the drivers only call ``decide``/``adecide`` and
the tool.

The module imports without LangChain; its entry points raise ImportError with the install hint
(``pip install 'carbguard[langchain]'``).  :func:`guard_tools` needs langchain-core only.
"""

from guard.adapters._langchain_core import _HINT as _HINT
from guard.adapters._langchain_core import _MISSING as _MISSING
from guard.adapters._langchain_core import SessionKey as SessionKey
from guard.adapters._langchain_core import _require as _require
from guard.adapters._langchain_core import log as log
from guard.adapters._langchain_core import refusal_text, thread_session_key
from guard.adapters._langchain_tools import GuardedTool, guard_tools
from guard.adapters._langchain_wrapper import (
    ApproveDecision,
    GuardMiddleware,
    GuardToolWrapper,
    RejectDecision,
    guard_tool_node,
)

__all__ = [
    "ApproveDecision",
    "GuardMiddleware",
    "GuardToolWrapper",
    "GuardedTool",
    "RejectDecision",
    "guard_tool_node",
    "guard_tools",
    "refusal_text",
    "thread_session_key",
]
