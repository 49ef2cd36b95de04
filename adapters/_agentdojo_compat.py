"""What the AgentDojo adapter's modules share: the optional import, the install hint, message text.

See :mod:`guard.adapters.agentdojo`.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from guard.decision import Decision
from guard.records import safe_repr

HINT = "pip install 'carbguard[agentdojo]'"

# The adapter imports without AgentDojo (so ``import guard.adapters.agentdojo`` works in a core-only
# install); every entry point calls ``require`` first and raises ImportError with the install hint.
_MISSING: ImportError | None = None
try:
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline, load_system_message  # noqa: F401
    from agentdojo.agent_pipeline.base_pipeline_element import BasePipelineElement  # noqa: F401
    from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage  # noqa: F401
    from agentdojo.agent_pipeline.errors import AbortAgentError  # noqa: F401
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline  # noqa: F401
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor, is_string_list  # noqa: F401
    from agentdojo.functions_runtime import EmptyEnv, FunctionCall, FunctionsRuntime  # noqa: F401
    from agentdojo.task_suite.load_suites import get_suite  # noqa: F401
    from agentdojo.types import get_text_content_as_str, text_content_block_from_string  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    _MISSING = exc

_AGENTDOJO_MODULES = (
    "agentdojo.agent_pipeline.agent_pipeline",
    "agentdojo.agent_pipeline.base_pipeline_element",
    "agentdojo.agent_pipeline.basic_elements",
    "agentdojo.agent_pipeline.errors",
    "agentdojo.agent_pipeline.ground_truth_pipeline",
    "agentdojo.agent_pipeline.tool_execution",
    "agentdojo.functions_runtime",
    "agentdojo.task_suite.load_suites",
    "agentdojo.types",
)


def require() -> None:
    """Raise ImportError with the install hint when AgentDojo did not import.

    The modules are looked up again at call time (a ``sys.modules`` hit once imported), so every
    module of the adapter answers the same however its modules were imported.
    """
    missing = _MISSING
    if missing is None:
        try:
            for name in _AGENTDOJO_MODULES:
                importlib.import_module(name)
        except ImportError as exc:
            missing = exc
    if missing is not None:
        raise ImportError(f"guard.adapters.agentdojo needs AgentDojo: {HINT}") from missing


Mode = Literal["abort", "deny", "enforce", "shadow"]
EMPTY_ENV: Any = EmptyEnv() if _MISSING is None else None


def content_text(content: Any) -> str:
    """Everything of an AgentDojo ``content`` that reaches the model, as text.

    A string as itself; a text block as its text; any other block (an unknown type, a block that
    is not an object) as its canonical JSON or repr: observed as opaque text, never as nothing.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list | tuple):
        return _opaque(content)
    parts = []
    for block in content:
        text = block.get("content", block.get("text")) if isinstance(block, Mapping) else None
        if isinstance(block, Mapping) and block.get("type", "text") == "text" and isinstance(text, str | None):
            parts.append(text or "")
        else:
            parts.append(_opaque(block))
    return "\n".join(parts)


def _opaque(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return safe_repr(value)


def result_text(message: Mapping[str, Any]) -> tuple[str, str]:
    """Text and status of a tool message (an error is appended to any content, as the loader does)."""
    text, error = content_text(message.get("content")), message.get("error")
    if error is None:
        return text, "ok"
    return (f"{text}\n{error}" if text else str(error)), "error"


def refusal_text(decision: Decision) -> str:
    """What the agent is told about a refused call (with SafeCommit's certified replacement, if any)."""
    verdict, reason = decision.verdict.value, decision.reason.value
    text = f"carbguard did not run `{decision.tool}` ({verdict}: {reason}). {decision.message}"
    replacement = (decision.safecommit or {}).get("replacement")
    if isinstance(replacement, Mapping) and replacement.get("tool"):
        args = json.dumps(replacement.get("args") or {}, sort_keys=True, default=str)
        text += f" Suggested instead: {replacement['tool']}({args})."
    return text
