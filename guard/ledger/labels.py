"""Labels files: per-episode harm labels from review or red-team runs (JSON lines), which add to or override the rules.

One line per labelled episode::

    {"episode": "ep-17", "mode": "override",
     "harms": [{"category": "privacy_flow", "call_id": "c3"}],
     "by": "alice (security review)", "why": "sent the honeytoken file to an outside address"}

- ``mode``: ``override`` (default) — the episode's ledger events are exactly ``harms`` (an empty
  list says "reviewed: no harm"); ``add`` — ``harms`` are charged on top of what the rules charge.
- each harm names a ``category`` and where it happened: ``step`` (the proposal's 0-based ordinal)
  or ``call_id``; with neither, the first executed proposal is charged (the conservative choice:
  an episode charged earlier is charged at every threshold where it is charged later).
- ``by`` (who labelled) and ``why`` are required.

A harm must sit on an executed proposal (an ``ok`` result follows it): the ledger charges what ran.
Labels are for the ledger only; the gate never sees them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from guard.errors import CorpusError
from guard.jsonio import json_lines, loads_strict, read_utf8
from guard.ledger import CATEGORIES, LedgerLabels, executed_flags
from guard.records import Episode

LABELS_FORMAT_FIELDS = ("episode", "mode", "harms", "by", "why")
_HARM_FIELDS = ("category", "step", "call_id")


@dataclass(frozen=True, slots=True)
class Harm:
    """One labelled harm: a category and where (proposal ordinal or call id; neither = first executed)."""

    category: str
    step: int | None = None
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class EpisodeLabel:
    """One line of a labels file."""

    episode: str
    harms: tuple[Harm, ...]
    by: str
    why: str
    mode: Literal["override", "add"] = "override"
    line: int = 0

    def to_json(self) -> dict[str, Any]:
        """The line as a JSON object."""
        harms = [
            {
                "category": h.category,
                **({"step": h.step} if h.step is not None else {}),
                **({"call_id": h.call_id} if h.call_id is not None else {}),
            }
            for h in self.harms
        ]
        return {"episode": self.episode, "mode": self.mode, "harms": harms, "by": self.by, "why": self.why}


def label_line(label: EpisodeLabel) -> str:
    """The label as one canonical JSON line."""
    return json.dumps(label.to_json(), sort_keys=True, ensure_ascii=False)


def read_labels(path: str | Path) -> dict[str, EpisodeLabel]:
    """Every label of a labels file by episode id; CorpusError naming file, line and field."""
    file = Path(path)
    text = read_utf8(file, "labels file", CorpusError)
    labels: dict[str, EpisodeLabel] = {}
    for number, line in json_lines(text):
        label = parse_label(line, f"{file}:{number}", number)
        if label.episode in labels:
            raise CorpusError(
                f"{file}:{number}: episode: {label.episode!r} already labelled on line {labels[label.episode].line}"
            )
        labels[label.episode] = label
    return labels


def parse_label(line: str, where: str, number: int = 0) -> EpisodeLabel:
    """One labels line → :class:`EpisodeLabel`."""
    data = loads_strict(line, where)
    if not isinstance(data, dict):
        raise CorpusError(f"{where}: a label must be a JSON object, got {type(data).__name__}")
    for key in ("episode", "harms", "by", "why"):
        if key not in data:
            raise CorpusError(f"{where}: {key}: missing")
    for key in sorted(set(data) - set(LABELS_FORMAT_FIELDS)):
        raise CorpusError(f"{where}: {key}: unknown field (allowed: {', '.join(LABELS_FORMAT_FIELDS)})")
    for key in ("episode", "by"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise CorpusError(f"{where}: {key}: must be a non-empty string, got {data[key]!r}")
    if not isinstance(data["why"], str):
        raise CorpusError(f"{where}: why: must be a string, got {data['why']!r}")
    mode = data.get("mode", "override")
    if mode not in ("override", "add"):
        raise CorpusError(f"{where}: mode: must be 'override' or 'add', got {mode!r}")
    if not isinstance(data["harms"], list):
        raise CorpusError(f"{where}: harms: must be a list, got {type(data['harms']).__name__}")
    harms = tuple(_harm(item, f"{where}: harms[{i}]") for i, item in enumerate(data["harms"]))
    return EpisodeLabel(data["episode"], harms, data["by"], data["why"], mode, number)


def _harm(item: Any, where: str) -> Harm:
    if not isinstance(item, dict):
        raise CorpusError(f"{where}: must be an object, got {type(item).__name__}")
    for key in sorted(set(item) - set(_HARM_FIELDS)):
        raise CorpusError(f"{where}.{key}: unknown field (allowed: {', '.join(_HARM_FIELDS)})")
    category = item.get("category")
    if category not in CATEGORIES:
        raise CorpusError(f"{where}.category: must be one of {', '.join(CATEGORIES)}, got {category!r}")
    step, call_id = item.get("step"), item.get("call_id")
    if step is not None and call_id is not None:
        raise CorpusError(f"{where}: give step or call_id, not both")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise CorpusError(f"{where}.step: must be an integer >= 0, got {step!r}")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        raise CorpusError(f"{where}.call_id: must be a non-empty string, got {call_id!r}")
    return Harm(category, step, call_id)


def resolve(label: EpisodeLabel, episode: Episode, where: str = "") -> tuple[tuple[int, str], ...]:
    """``(proposal ordinal, category)`` of every harm of ``label`` on ``episode``; each on an executed proposal."""
    prefix = where or f"label of episode {episode.episode_id!r}"
    proposals = episode.proposals()
    executed = executed_flags(episode)
    ordinal_of = {p.call_id: k for k, p in enumerate(proposals)}
    out: list[tuple[int, str]] = []
    for i, harm in enumerate(label.harms):
        if harm.call_id is not None:
            if harm.call_id not in ordinal_of:
                raise CorpusError(f"{prefix}: harms[{i}].call_id: episode has no proposal {harm.call_id!r}")
            ordinal = ordinal_of[harm.call_id]
        elif harm.step is not None:
            ordinal = harm.step
        else:
            ordinal = next((k for k, ok in enumerate(executed) if ok), -1)
            if ordinal < 0:
                raise CorpusError(f"{prefix}: harms[{i}]: the episode executed no proposal, so nothing can be charged")
        if not 0 <= ordinal < len(proposals) or not executed[ordinal]:
            raise CorpusError(
                f"{prefix}: harms[{i}]: proposal {ordinal} did not execute (the ledger charges executed proposals only)"
            )
        out.append((ordinal, harm.category))
    return tuple(out)


def attach(
    labels: Mapping[str, EpisodeLabel], episodes: Sequence[Episode], source: str = "labels"
) -> dict[str, LedgerLabels]:
    """Per episode id, :class:`LedgerLabels` carrying its label's events; unknown episode ids are an error."""
    by_id = {e.episode_id: e for e in episodes}
    unknown = [label for eid, label in labels.items() if eid not in by_id]
    if unknown:
        first = min(unknown, key=lambda lab: lab.line)
        raise CorpusError(
            f"{source}:{first.line}: episode: label for unknown episode {first.episode!r} "
            f"({len(unknown)} label(s) name episodes not in the episodes file)"
        )
    out: dict[str, LedgerLabels] = {}
    for eid, label in labels.items():
        events = resolve(label, by_id[eid], f"{source}:{label.line}")
        out[eid] = LedgerLabels(label_mode=label.mode, label_events=events)
    return out


def categories_of(events: Iterable[frozenset[str]]) -> frozenset[str]:
    """The union of per-proposal events."""
    return frozenset().union(*events)


__all__ = ["EpisodeLabel", "Harm", "attach", "categories_of", "label_line", "parse_label", "read_labels", "resolve"]
