"""What the converters share: reading their input (JSON or JSON lines), building episode objects, writing files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from guard.episode_json import EPISODES_FORMAT
from guard.errors import CorpusError
from guard.jsonio import JSON_WHITESPACE, json_lines, loads_strict, read_utf8, write_atomic


def write_lines(path: str | Path, lines: Iterable[str]) -> None:
    """Write ``lines`` (one per line) with :func:`guard.jsonio.write_atomic`: a failed write leaves no partial file."""
    target = Path(path)
    if target.is_dir():
        raise CorpusError(f"{target} is a folder; give a file path")
    write_atomic(target, "".join(line + "\n" for line in lines))


def read_json_items(path: str | Path) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` of a JSON file (one value) or a JSON-lines file (one value a line)."""
    file = Path(path)
    text = read_utf8(file, "input file", CorpusError)
    items = list(json_lines(text))
    if len(items) > 1 and not _one_value(text, file):
        for number, line in items:
            yield f"{file}:{number}", loads_strict(line, f"{file}:{number}")
    elif items:
        where = f"{file}:{items[0][0]}" if len(items) == 1 else str(file)
        yield where, loads_strict(items[0][1] if len(items) == 1 else text, where)


def _one_value(text: str, file: Path) -> bool:
    """Whether ``text`` is one JSON value (a JSON file) rather than JSON lines; strictness is checked later."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    except RecursionError:
        raise CorpusError(f"{file}: JSON nested too deeply") from None
    except ValueError:  # an integer literal too long to convert: a single value, refused by loads_strict
        return True
    return True


def conversations(path: str | Path) -> Iterator[tuple[str, str | None, list[Any], dict[str, Any]]]:
    """``(where, id or None, messages, meta)`` of every conversation in a message-list file.

    A value is one conversation (a list of messages, or an object with ``messages`` and optional
    ``id`` and ``meta``) or a list of conversations.
    """
    for where, value in read_json_items(path):
        items = value if isinstance(value, list) and value and all(_is_conversation(v) for v in value) else [value]
        for position, item in enumerate(items):
            at = f"{where}[{position}]" if len(items) > 1 else where
            if isinstance(item, list):
                yield at, None, item, {}
            elif isinstance(item, dict) and isinstance(item.get("messages"), list):
                meta = item.get("meta", {})
                if not isinstance(meta, dict):
                    raise CorpusError(f"{at}: meta: must be an object")
                eid = item.get("id")
                if eid is not None and (not isinstance(eid, str) or not eid):
                    raise CorpusError(f"{at}: id: must be a non-empty string, got {eid!r}")
                yield at, eid, item["messages"], meta
            else:
                raise CorpusError(f"{at}: expected a list of messages or an object with 'messages'")


def _is_conversation(value: Any) -> bool:
    return isinstance(value, list) or (isinstance(value, dict) and isinstance(value.get("messages"), list))


def text_of(content: Any, where: str) -> str:
    """Message content as text: a string, null, or a list of text blocks (other blocks are skipped)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, dict) and isinstance(block.get("content"), str):
                parts.append(block["content"])
        return "\n".join(parts)
    raise CorpusError(f"{where}: content must be a string, null or a list of blocks, got {type(content).__name__}")


class EpisodeBuilder:
    """Records of one episode in order; checks call ids as the episodes reader will."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.records: list[dict[str, Any]] = []
        self.proposed: set[str] = set()
        self.answered: set[str] = set()

    def user(self, text: str) -> None:
        self.records.append({"kind": "user", "text": text})

    def proposal(self, tool: Any, args: Any, call_id: Any, at: str) -> None:
        if not isinstance(tool, str) or not tool:
            raise CorpusError(f"{at}: tool call has no name")
        if not isinstance(call_id, str) or not call_id:
            raise CorpusError(f"{at}: tool call {tool!r} has no id (results are linked to calls by id)")
        if not isinstance(args, dict):
            raise CorpusError(f"{at}: arguments of tool call {call_id!r} must be a JSON object")
        if call_id in self.proposed:
            raise CorpusError(f"{at}: tool call id {call_id!r} used twice in one conversation")
        self.proposed.add(call_id)
        self.records.append({"kind": "proposal", "tool": tool, "args": args, "call_id": call_id})

    def result(self, call_id: Any, text: str, status: str, at: str) -> None:
        if call_id not in self.proposed:
            raise CorpusError(f"{at}: tool result for call id {call_id!r}, which no earlier tool call has")
        if call_id in self.answered:
            raise CorpusError(f"{at}: tool call id {call_id!r} answered twice")
        self.answered.add(call_id)
        self.records.append({"kind": "result", "call_id": call_id, "text": text, "status": status})

    def final(self, text: str) -> None:
        self.records.append({"kind": "final", "text": text})

    def episode(self, episode_id: str, meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """The episode object (``carbguard-episodes/1``)."""
        if not self.records:
            raise CorpusError(f"{self.where}: conversation has no user turn, tool call or answer")
        known = {"model", "task", "attack", "injection_task", "suite", "utility", "policy", "tags"}
        given = dict(meta or {})
        tags = dict(given.pop("tags", {}) or {})
        tags.update({k: given.pop(k) for k in sorted(set(given) - known)})
        return {"format": EPISODES_FORMAT, "id": episode_id, "meta": {**given, "tags": tags}, "records": self.records}


def parse_arguments(raw: Any, at: str) -> Any:
    """Tool-call arguments given as a JSON string or an object."""
    if isinstance(raw, str):
        return loads_strict(raw, f"{at}: arguments") if raw.strip(JSON_WHITESPACE) else {}
    return {} if raw is None else raw


def episode_lines(episodes: Iterable[dict[str, Any]]) -> list[str]:
    """Canonical JSON lines; an episode id used twice is an error."""
    seen: set[str] = set()
    out = []
    for episode in episodes:
        if episode["id"] in seen:
            raise CorpusError(f"episode id {episode['id']!r} produced twice; give conversations distinct ids")
        seen.add(episode["id"])
        out.append(json.dumps(episode, sort_keys=True, ensure_ascii=False, allow_nan=False))
    return out
