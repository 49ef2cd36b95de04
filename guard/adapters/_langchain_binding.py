"""How the LangChain adapter tells whether a request is exactly the call that was decided.

See :mod:`guard.adapters.langchain`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from guard.decision import Decision


def safe_repr(value: Any) -> str:
    """``repr(value)`` for messages, never raising (a hostile ``__repr__`` gives a placeholder)."""
    try:
        text = repr(value)
        return text if type(text) is str else f"<{type(value).__name__}>"
    except Exception:  # noqa: BLE001 - the refusal path must not raise
        return f"<unrepresentable {type(value).__name__}>"


def canonical_args(args: Mapping[str, Any]) -> Any:
    """The canonical copy the core decides on (a JSON round trip, sorted keys), for comparing calls."""
    return json.loads(json.dumps(args, allow_nan=False, sort_keys=True, ensure_ascii=False))


def _matches(decision: Decision | None, tool: Any, args: Any) -> bool:
    """Whether ``decision`` was made on exactly (tool, canonical arguments)."""
    if decision is None or decision.args is None or type(tool) is not str or tool != decision.tool:
        return False
    if not isinstance(args, Mapping):
        return False
    try:
        return bool(canonical_args(args) == dict(decision.args))
    except (TypeError, ValueError, RecursionError):
        return False


def edited_call_id(call_id: str, tool: Any, args: Any) -> str:
    """The call id under which a call changed after its decision is decided again (stable per content)."""
    try:
        body = json.dumps([tool, args], sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        body = safe_repr((tool, args))
    return f"{call_id}~{hashlib.sha256(body.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


__all__ = ["_matches", "canonical_args", "edited_call_id", "safe_repr"]
