"""The product's episode format, writing side: one episode as one JSON object (one line of a JSONL file).

Format ``carbguard-episodes/1``::

    {"format": "carbguard-episodes/1", "id": "...",
     "meta": {"model": "...", "task": "...", "attack": null, "injection_task": null, "suite": "",
              "utility": null, "policy": null, "tags": {...}},
     "records": [{"kind": "user", "text": "..."},
                 {"kind": "proposal", "tool": "...", "args": {...}, "call_id": "..."},
                 {"kind": "result", "call_id": "...", "text": "...", "status": "ok"},
                 {"kind": "content", "origin": "...", "source": "private_source", "text": "..."},
                 {"kind": "final", "text": "..."}]}

Trust is not stored: it follows from the policy the episode is replayed under (a result's trust is its
tool's ``kind``).  A ``content`` record is what the model was shown outside any decided call (an MCP
resource or prompt, an earlier turn's tool output): its ``source`` kind is the one the observer
resolved from the policy when it was seen, and is stored.
``utility`` is whether the logged task succeeded, if known (evaluation reports
harm-free success from it); ``policy`` names the policy the episode belongs to when one file holds
episodes of several policies.  Every ``meta`` key is optional when reading.  This module is on
the decision floor so that shadow mode can record episodes without importing the corpus code;
reading (with line/field errors), the JSON Schema and the converters live in :mod:`guard.corpora`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from guard.records import Episode, Record, RecordKind, Trust, is_content

EPISODES_FORMAT = "carbguard-episodes/1"


TRUST_SOURCE = {
    Trust.TOOL_PRIVATE: "private_source",
    Trust.TOOL_PUBLIC: "public_source",
    Trust.TOOL_UNTRUSTED: "untrusted_source",
}
"""A content record's stored ``source`` for its trust (the policy's source kinds)."""
SOURCE_TRUST = {source: trust for trust, source in TRUST_SOURCE.items()}


def record_to_json(record: Record) -> dict[str, Any]:
    """One record as a JSON object (the fields its kind uses, nothing else)."""
    if record.kind is RecordKind.PROPOSAL:
        return {"kind": "proposal", "tool": record.tool, "args": dict(record.args), "call_id": record.call_id}
    if is_content(record):
        return {"kind": "content", "origin": record.tool, "source": TRUST_SOURCE[record.trust], "text": record.text}
    if record.kind is RecordKind.RESULT:
        return {"kind": "result", "call_id": record.call_id, "text": record.text, "status": record.status}
    return {"kind": record.kind.value, "text": record.text}


def episode_to_json(
    episode: Episode, tags: Mapping[str, Any] | None = None, policy: str | None = None
) -> dict[str, Any]:
    """One episode as a JSON object of format ``carbguard-episodes/1``."""
    meta = episode.meta
    return {
        "format": EPISODES_FORMAT,
        "id": episode.episode_id,
        "meta": {
            "model": meta.model,
            "task": meta.user_task,
            "attack": meta.attack,
            "injection_task": meta.injection_task,
            "suite": meta.suite,
            "utility": meta.utility,
            "policy": policy,
            "tags": dict(tags or {}),
        },
        "records": [record_to_json(r) for r in episode.records],
    }


def episode_line(episode: Episode, tags: Mapping[str, Any] | None = None, policy: str | None = None) -> str:
    """The episode as one canonical JSON line (sorted keys, no trailing newline)."""
    return json.dumps(episode_to_json(episode, tags, policy), sort_keys=True, ensure_ascii=False, allow_nan=False)


__all__ = ["EPISODES_FORMAT", "SOURCE_TRUST", "TRUST_SOURCE", "episode_line", "episode_to_json", "record_to_json"]
