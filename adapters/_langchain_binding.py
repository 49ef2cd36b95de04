"""The call id under which the LangChain adapter decides a request changed after its decision.

See :mod:`guard.adapters.langchain`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from guard.records import safe_repr


def edited_call_id(call_id: str, tool: Any, args: Any) -> str:
    """The call id under which a call changed after its decision is decided again (stable per content)."""
    try:
        body = json.dumps([tool, args], sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        body = safe_repr((tool, args))
    return f"{call_id}~{hashlib.sha256(body.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


__all__ = ["edited_call_id"]
