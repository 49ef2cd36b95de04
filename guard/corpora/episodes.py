"""The product's episode format, reading side: ``carbguard-episodes/1`` JSON lines → :class:`Episode`.

The writing side is :mod:`guard.episode_json`.  Every problem is a :class:`CorpusError` naming the
file, the line and the field (``episodes.jsonl:7: records[3].call_id: ...``): malformed JSON,
missing or unknown fields, a result whose call id no earlier proposal has, a call id proposed or
answered twice, a tool the policy does not declare, an episode id used twice.  Result trust is
not stored in the file: it comes from the policy (:func:`guard.stages.result_trust`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from guard.episode_json import EPISODES_FORMAT, SOURCE_TRUST
from guard.errors import CorpusError, GuardError
from guard.jsonio import json_lines, loads_strict, read_utf8
from guard.policy import Policy
from guard.records import Episode, EpisodeMeta, Record, content, final, proposal, result, user
from guard.stages import result_trust

__all__ = ["EpisodeSet", "episodes_json_schema", "load_episodes", "parse_episode", "read_episodes"]

_TOP = {"format", "id", "meta", "records"}
_META_STR = ("model", "task", "suite")
_META_OPT_STR = ("attack", "injection_task", "policy")
_META = {*_META_STR, *_META_OPT_STR, "utility", "tags"}
_RECORD_FIELDS: dict[str, tuple[set[str], set[str]]] = {  # kind -> (required, optional)
    "user": ({"kind", "text"}, set()),
    "proposal": ({"kind", "tool", "args", "call_id"}, set()),
    "result": ({"kind", "call_id", "text"}, {"status"}),
    "content": ({"kind", "origin", "source", "text"}, set()),
    "final": ({"kind", "text"}, set()),
}


@dataclass(frozen=True)
class EpisodeSet:
    """Episodes read from one file, the policy of each (by episode id) and each one's free tags."""

    source: str
    episodes: tuple[Episode, ...]
    policy_of: Mapping[str, Policy]
    tags: Mapping[str, Mapping[str, Any]]


class _Where:
    """``file:line`` plus a field path, for error messages."""

    def __init__(self, source: str, line: int) -> None:
        self.prefix = f"{source}:{line}"

    def fail(self, field: str, message: str) -> CorpusError:
        return CorpusError(f"{self.prefix}: {field}: {message}" if field else f"{self.prefix}: {message}")


def _policies(policies: Policy | Sequence[Policy]) -> dict[str, Policy]:
    chosen = [policies] if isinstance(policies, Policy) else list(policies)
    if not chosen:
        raise CorpusError("no policy given: episodes are read under a policy (result trust, declared tools)")
    by_name: dict[str, Policy] = {}
    for policy in chosen:
        if policy.name in by_name:
            raise CorpusError(f"policy name {policy.name!r} given twice")
        by_name[policy.name] = policy
    return by_name


def read_episodes(path: str | Path, policies: Policy | Sequence[Policy]) -> EpisodeSet:
    """Read a ``carbguard-episodes/1`` file under one policy or several (then each episode names its own)."""
    by_name = _policies(policies)
    file = Path(path)
    text = read_utf8(file, "episodes file", CorpusError)
    episodes: list[Episode] = []
    policy_of: dict[str, Policy] = {}
    tags: dict[str, Mapping[str, Any]] = {}
    first_line: dict[str, int] = {}
    for number, line in json_lines(text):
        where = _Where(str(file), number)
        episode, policy, episode_tags = parse_episode(_json(line, where), by_name, where)
        if episode.episode_id in first_line:
            earlier = first_line[episode.episode_id]
            raise where.fail("id", f"episode id {episode.episode_id!r} already used on line {earlier}")
        first_line[episode.episode_id] = number
        episodes.append(episode)
        policy_of[episode.episode_id] = policy
        tags[episode.episode_id] = episode_tags
    if not episodes:
        raise CorpusError(f"{file}: no episodes (expected one {EPISODES_FORMAT} JSON object per line)")
    return EpisodeSet(str(file), tuple(episodes), policy_of, tags)


def load_episodes(path: str | Path, policy: Policy | Sequence[Policy]) -> list[Episode]:
    """The episodes of a ``carbguard-episodes/1`` file, in file order (see :func:`read_episodes`)."""
    return list(read_episodes(path, policy).episodes)


def _json(line: str, where: _Where) -> Any:
    return loads_strict(line, where.prefix)


def parse_episode(
    data: Any, policies: Mapping[str, Policy], where: _Where
) -> tuple[Episode, Policy, Mapping[str, Any]]:
    """One decoded line → (episode, its policy, its tags); raise CorpusError naming the field."""
    if not isinstance(data, dict):
        raise where.fail("", f"an episode must be a JSON object, got {type(data).__name__}")
    _keys(data, _TOP, {"format", "id", "records"}, "", where)
    if data["format"] != EPISODES_FORMAT:
        raise where.fail("format", f"must be {EPISODES_FORMAT!r}, got {data['format']!r}")
    episode_id = data["id"]
    if not isinstance(episode_id, str) or not episode_id:
        raise where.fail("id", f"must be a non-empty string, got {episode_id!r}")
    meta, policy_name, tags = _meta(data.get("meta", {}), where)
    policy = _policy_for(policy_name, policies, where)
    records = _records(data["records"], policy, where)
    try:
        episode = Episode(episode_id=episode_id, records=tuple(records), meta=meta)
    except GuardError as exc:
        raise where.fail("records", str(exc)) from None
    return episode, policy, tags


def _keys(obj: dict[str, Any], allowed: set[str], required: set[str], field: str, where: _Where) -> None:
    dot = f"{field}." if field else ""
    for key in sorted(required - set(obj)):
        raise where.fail(f"{dot}{key}", "missing")
    for key in sorted(set(obj) - allowed):
        raise where.fail(f"{dot}{key}", f"unknown field (allowed: {', '.join(sorted(allowed))})")


def _meta(raw: Any, where: _Where) -> tuple[EpisodeMeta, str | None, Mapping[str, Any]]:
    if not isinstance(raw, dict):
        raise where.fail("meta", f"must be an object, got {type(raw).__name__}")
    _keys(raw, _META, set(), "meta", where)
    for key in _META_STR:
        if not isinstance(raw.get(key, ""), str):
            raise where.fail(f"meta.{key}", f"must be a string, got {raw[key]!r}")
    for key in _META_OPT_STR:
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise where.fail(f"meta.{key}", f"must be a string or null, got {raw[key]!r}")
    utility = raw.get("utility")
    if utility is not None and not isinstance(utility, bool):
        raise where.fail("meta.utility", f"must be true, false or null, got {utility!r}")
    tags = raw.get("tags", {})
    if not isinstance(tags, dict):
        raise where.fail("meta.tags", f"must be an object, got {type(tags).__name__}")
    meta = EpisodeMeta(
        suite=raw.get("suite", ""),
        model=raw.get("model", ""),
        user_task=raw.get("task", ""),
        injection_task=raw.get("injection_task"),
        attack=raw.get("attack"),
        utility=utility,
    )
    return meta, raw.get("policy"), tags


def _policy_for(name: str | None, policies: Mapping[str, Policy], where: _Where) -> Policy:
    if name is None:
        if len(policies) == 1:
            return next(iter(policies.values()))
        raise where.fail("meta.policy", f"missing: several policies were given ({', '.join(sorted(policies))})")
    if name not in policies:
        raise where.fail("meta.policy", f"episode names policy {name!r}; given: {', '.join(sorted(policies))}")
    return policies[name]


def _records(raw: Any, policy: Policy, where: _Where) -> list[Record]:
    if not isinstance(raw, list):
        raise where.fail("records", f"must be a list, got {type(raw).__name__}")
    proposed: dict[str, str] = {}
    answered: set[str] = set()
    out: list[Record] = []
    for index, item in enumerate(raw):
        field = f"records[{index}]"
        if not isinstance(item, dict):
            raise where.fail(field, f"must be an object, got {type(item).__name__}")
        kind = item.get("kind")
        if kind not in _RECORD_FIELDS:
            raise where.fail(f"{field}.kind", f"must be one of {', '.join(_RECORD_FIELDS)}, got {kind!r}")
        required, optional = _RECORD_FIELDS[kind]
        _keys(item, required | optional, required, field, where)
        out.append(_record(index, kind, item, policy, proposed, answered, field, where))
    return out


def _string(item: dict[str, Any], key: str, field: str, where: _Where, *, empty: bool = True) -> str:
    value = item[key]
    if not isinstance(value, str) or (not empty and not value):
        raise where.fail(f"{field}.{key}", f"must be a {'' if empty else 'non-empty '}string, got {value!r}")
    return value


def _record(
    index: int,
    kind: str,
    item: dict[str, Any],
    policy: Policy,
    proposed: dict[str, str],
    answered: set[str],
    field: str,
    where: _Where,
) -> Record:
    if kind == "user":
        return user(index, _string(item, "text", field, where))
    if kind == "final":
        return final(index, _string(item, "text", field, where))
    if kind == "content":
        source = item["source"]
        if type(source) is not str or source not in SOURCE_TRUST:
            raise where.fail(f"{field}.source", f"must be one of {', '.join(SOURCE_TRUST)}, got {source!r}")
        origin = _string(item, "origin", field, where, empty=False)
        return content(index, _string(item, "text", field, where), SOURCE_TRUST[source], origin)
    call_id = _string(item, "call_id", field, where, empty=False)
    if kind == "proposal":
        tool = _string(item, "tool", field, where, empty=False)
        if policy.tool(tool) is None:
            raise where.fail(f"{field}.tool", f"tool {tool!r} is not declared in policy {policy.name!r}")
        if call_id in proposed:
            raise where.fail(f"{field}.call_id", f"call id {call_id!r} proposed twice in this episode")
        if not isinstance(item["args"], dict):
            raise where.fail(f"{field}.args", f"must be an object, got {type(item['args']).__name__}")
        proposed[call_id] = tool
        try:
            return proposal(index, tool, item["args"], call_id)
        except GuardError as exc:
            raise where.fail(f"{field}.args", str(exc)) from None
    if call_id not in proposed:
        raise where.fail(f"{field}.call_id", f"result for call id {call_id!r}, which no earlier proposal has")
    if call_id in answered:
        raise where.fail(f"{field}.call_id", f"call id {call_id!r} answered twice")
    answered.add(call_id)
    status = item.get("status", "ok")
    if status not in ("ok", "error"):
        raise where.fail(f"{field}.status", f"must be 'ok' or 'error', got {status!r}")
    tool = proposed[call_id]
    return result(index, call_id, _string(item, "text", field, where), result_trust(policy, tool), tool, status)


def episodes_json_schema() -> dict[str, Any]:
    """The JSON Schema of one line of a ``carbguard-episodes/1`` file."""
    text = {"type": "string"}
    opt_text = {"type": ["string", "null"]}
    call_id = {"type": "string", "minLength": 1, "description": "Links a result to its proposal; unique per episode."}

    def record(kind: str, props: dict[str, Any], required: list[str], doc: str) -> dict[str, Any]:
        return {
            "type": "object",
            "description": doc,
            "properties": {"kind": {"const": kind}, **props},
            "required": ["kind", *required],
            "additionalProperties": False,
        }

    records = [
        record("user", {"text": text}, ["text"], "A user turn."),
        record(
            "proposal",
            {
                "tool": {"type": "string", "minLength": 1, "description": "A tool the policy declares."},
                "args": {"type": "object", "description": "The call's arguments (JSON)."},
                "call_id": call_id,
            },
            ["tool", "args", "call_id"],
            "A tool call the agent proposed.",
        ),
        record(
            "result",
            {
                "call_id": call_id,
                "text": text,
                "status": {"enum": ["ok", "error"], "default": "ok", "description": "error: the call failed."},
            },
            ["call_id", "text"],
            "A tool result; its trust follows from its tool's kind in the policy. After its proposal.",
        ),
        record(
            "content",
            {
                "origin": {"type": "string", "minLength": 1, "description": "The channel (e.g. an MCP resource URI)."},
                "source": {"enum": list(SOURCE_TRUST), "description": "The channel's source kind when it was seen."},
                "text": text,
            },
            ["origin", "source", "text"],
            "Content the model was shown outside any decided call (an MCP resource or prompt, an earlier turn).",
        ),
        record("final", {"text": text}, ["text"], "The agent's final answer."),
    ]
    meta = {
        "type": "object",
        "additionalProperties": False,
        "description": "What is known about the episode; never read by the gate.",
        "properties": {
            "model": {**text, "description": "The agent's model."},
            "task": {**text, "description": "The user task."},
            "suite": {**text, "description": "A group of episodes (free text)."},
            "attack": {**opt_text, "description": "The attack, if known (null: none or unknown)."},
            "injection_task": {**opt_text, "description": "The attacker's goal, if known."},
            "utility": {"type": ["boolean", "null"], "description": "Whether the logged task succeeded, if known."},
            "policy": {**opt_text, "description": "The policy name; required when several policies are given."},
            "tags": {"type": "object", "description": "Free tags."},
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "carbguard episode (one line of a carbguard-episodes/1 JSON-lines file)",
        "type": "object",
        "additionalProperties": False,
        "required": ["format", "id", "records"],
        "properties": {
            "format": {"const": EPISODES_FORMAT},
            "id": {"type": "string", "minLength": 1, "description": "Unique within the file."},
            "meta": meta,
            "records": {"type": "array", "items": {"oneOf": records}, "description": "The records, in order."},
        },
    }
