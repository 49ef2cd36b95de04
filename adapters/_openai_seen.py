"""What a guarded session has seen of an OpenAI Agents SDK run (no SDK import).

The OpenAI Agents SDK adapter decides a call only on a prefix its session has seen: every item of
the model's input was fed into the session (by the caller through ``observe_input``, by a guarded
run's own feed, or as untrusted content just before the model turn that reads it), and the call
was proposed on a model turn whose input the session saw — or is a pending call of a ``RunState``
fed with that state.  :class:`Seen` is that bookkeeping, one per session, kept beside the session
(the session itself is the runtime's and knows nothing of the SDK's items).  See
:mod:`guard.adapters._openai_turns`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import weakref
from dataclasses import dataclass, field

from guard.runtime import Session

__all__ = ["Seen", "call_key", "seen_by"]


def call_key(call_id: str, name: str, arguments: str) -> str:
    """One function call as the model proposed it: its id, tool and raw argument text."""
    text = json.dumps([call_id, name, arguments], ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class Seen:
    """One session's view of the SDK run: the items it was fed and the calls proposed on turns it saw."""

    items: set[str] = field(default_factory=set)  # item keys (``_openai_history.item_key``)
    calls: dict[str, str] = field(default_factory=dict)  # call id -> tool name of every function call seen
    proposed: set[str] = field(default_factory=set)  # :func:`call_key` of the calls the session may decide

    def witnessed(self, call_id: str, name: str, arguments: str) -> bool:
        """Whether the call was proposed on a model turn this session saw (or is a pending call of a state fed)."""
        return call_key(call_id, name, arguments) in self.proposed


_LOCK = threading.Lock()
_SEEN: weakref.WeakKeyDictionary[Session, Seen] = weakref.WeakKeyDictionary()


def seen_by(session: Session) -> Seen:
    """The :class:`Seen` of ``session`` (created empty on first use; dropped with the session)."""
    with _LOCK:
        found = _SEEN.get(session)
        if found is None:
            found = _SEEN[session] = Seen()
        return found
