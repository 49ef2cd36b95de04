"""The function of every feature row: each row of :data:`guard.features.TABLE` is computed by a pure function
of one proposal's evidence view (:mod:`guard.scoring.view`), bound here by the row's name.

A :class:`Prefix` function reads the node's view alone (the prefix: the scorer keeps its value for the
newest proposal of a graph, across selections); a :class:`Selection` function also reads the selection.  A
conjunction row (``all_of``) has no function: it is on when every row it names is on.  :func:`bind` checks
that a binding covers its table exactly (one function per row that is not a conjunction, none for a name
without a row, every part of a conjunction earlier in the table), and :data:`BOUND`, the shipped table's
binding, is checked when this module is imported: a row without a function is an import error, not a
feature silently off.  Adding a feature is one row in the table and one entry in :data:`FUNCTIONS`
(docs/evidence.md#the-feature-table).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from urllib.parse import unquote

from guard import features as table
from guard.evidence.feature_index import SHORT_ID_MAX, merged_windows
from guard.evidence.regex_screen import live
from guard.evidence.scope import requested
from guard.evidence.trust import trusted_value
from guard.features import TABLE, Feature
from guard.graph import members
from guard.policy import Effect
from guard.records import RecordKind
from guard.scoring.view import EvidenceView, NodeEvidence

__all__ = ["BOUND", "FUNCTIONS", "Bound", "Prefix", "Selection", "bind"]

_URL = re.compile(r"(?:https?://|www\.)[^\s'\"<>(){}\[\],]+")
_URL_TOKEN = re.compile(r"[A-Za-z0-9@._+-]{5,}")


@dataclass(frozen=True, slots=True)
class Prefix:
    """A row computed from the node's view alone (it never reads the selection).  ``acting``: the row is off for
    a call that is neither a sink nor side-effectful, and its function is only called for one that is."""

    compute: Callable[[NodeEvidence], bool]
    acting: bool = False


@dataclass(frozen=True, slots=True)
class Selection:
    """A row computed from the node's view and the selection."""

    compute: Callable[[EvidenceView], bool]


@dataclass(frozen=True, slots=True)
class Bound:
    """A table bound to its functions, in the table's order: ``names`` (every row), the prefix rows (``passive``:
    those that are not ``acting``, all a call that does not act reads), the selection rows, and the conjunctions
    with the names of their parts (``passive_conjunctions``: those none of whose parts is an ``acting`` row or a
    conjunction that joins one, the only ones a call that does not act can fire)."""

    names: tuple[str, ...]
    prefix: tuple[tuple[str, Callable[[NodeEvidence], bool]], ...]
    passive: tuple[tuple[str, Callable[[NodeEvidence], bool]], ...]
    selection: tuple[tuple[str, Callable[[EvidenceView], bool]], ...]
    conjunctions: tuple[tuple[str, tuple[str, ...]], ...]
    passive_conjunctions: tuple[tuple[str, tuple[str, ...]], ...]


def bind(rows: tuple[Feature, ...], functions: Mapping[str, Prefix | Selection]) -> Bound:
    """``rows`` bound to ``functions``; a ValueError names every row without a function, every function
    without a row, a name twice, and a conjunction part that is not an earlier row."""
    names = tuple(row.name for row in rows)
    computed = {row.name for row in rows if not row.all_of}
    problems = [f"row {name!r} has no function" for name in names if name in computed and name not in functions]
    problems += [
        f"function {name!r} has no row (or its row is a conjunction)" for name in functions if name not in computed
    ]
    problems += [f"row {name!r} is in the table twice" for name in sorted(set(names)) if names.count(name) > 1]
    for i, row in enumerate(rows):
        problems += [
            f"conjunction {row.name!r} joins {p!r}, not an earlier row" for p in row.all_of if p not in names[:i]
        ]
    if problems:
        raise ValueError("the feature table and its functions disagree: " + "; ".join(problems))
    prefix = tuple((n, f.compute) for n in names if isinstance(f := functions.get(n), Prefix))
    passive = tuple((n, f.compute) for n in names if isinstance(f := functions.get(n), Prefix) and not f.acting)
    selection = tuple((n, f.compute) for n in names if isinstance(f := functions.get(n), Selection))
    conjunctions = tuple((row.name, row.all_of) for row in rows if row.all_of)
    off = {n for n in names if isinstance(f := functions.get(n), Prefix) and f.acting}  # off when a call does not act
    for name, parts in conjunctions:
        if off.intersection(parts):
            off.add(name)
    still = tuple((name, parts) for name, parts in conjunctions if name not in off)
    return Bound(names, prefix, passive, selection, conjunctions, still)


# --------------------------------------------------------------------------- rows that read the selection


def _provenance_path(v: EvidenceView) -> bool:
    """A sink with a retained path from a private record of the selection (graph ancestors)."""
    return v.node.is_sink and bool(v.node.graph.ancestor_bits(v.node.node) & v.private)


def _private_in_context(v: EvidenceView) -> bool:
    return bool(v.private)


def _canary(v: EvidenceView) -> bool:
    """A selected record matched a canary pattern, or a payload argument of the proposal does."""
    return bool(v.node.graph.flagged_bits("canary") & v.chosen) or _payload_canary(v.node)


def _injection_text(v: EvidenceView) -> bool:
    return bool(v.node.graph.flagged_bits("injection") & v.chosen)


def _untrusted_payload(v: EvidenceView) -> bool:
    """A payload argument reuses a selected untrusted record, and no user turn is a source of it."""
    ev = v.node
    users, names = ev.users, ev.payload_names
    selected = ev.untrusted & v.chosen & ~users
    return any(arg and arg in names and not bits & users and bits & selected for arg, bits in ev.sources.items())


def _injected_value(v: EvidenceView) -> bool:
    """A payload value of the proposal occurs inside injection-like text of a selected untrusted record."""
    ev = v.node
    graph = ev.graph
    sources = graph.flagged_bits("injection") & ev.untrusted & v.chosen
    if not sources:
        return False
    window = ev.context.policy.scorer.injection_window
    k = graph.policy.graph.min_span
    for value in (value for value in ev.payload_values if len(value) >= 4):
        # a record holding the value holds its first k-gram: look only there (its text is indexed whole,
        # since a cut text makes the graph limited and every later proposal is refused before scoring)
        candidates = sources if len(value) < k else sources & graph.gram_bits_before(value[:k], ev.node)
        for source in members(candidates):
            if _inside(graph.records[source].text, value, graph.facts[source].injection_at, window):
                return True
    return False


# --------------------------------------------------------------------------- rows that read the prefix


def _irreversible_sink(ev: NodeEvidence) -> bool:
    return ev.is_sink and ev.spec is not None and ev.spec.effect is Effect.IRREVERSIBLE


def _injected_short_id(ev: NodeEvidence) -> bool:
    """A short payload/identifier value (1-12 chars) of the call (bound as ``acting``: a sink or side-effectful
    call) stands as a whole token inside injection-like text of an earlier untrusted record."""
    held = ev.graph.injected.held_before
    return any(held(v, ev.node) for v in ev.payload_stripped if 0 < len(v) <= SHORT_ID_MAX)


def _untrusted_only_value(ev: NodeEvidence) -> bool:
    """A payload/identifier argument of a sink has untrusted records only among its sources (whole prefix)."""
    return ev.is_sink and _untrusted_only(ev)


def _untrusted_only(ev: NodeEvidence) -> bool:
    """:func:`_untrusted_only_value` for any call (the edge-rule reading, not gated on a sink)."""
    untrusted, names = ev.untrusted, ev.payload_names
    return any(arg and arg in names and bits & untrusted and not bits & ~untrusted for arg, bits in ev.sources.items())


def _private_in_url(ev: NodeEvidence) -> bool:
    """A URL in any argument carries, in its path or query, a token (>= 5 chars) of an earlier private
    record's text that no earlier user turn contains."""
    tokens: set[str] = set()
    for _name, value in ev.args:
        if not _may_hold_url(value):
            continue
        for match in _URL.finditer(value):
            tokens |= set(_URL_TOKEN.findall(_path_and_query(match.group(0))))
    graph = ev.graph
    facts = graph.facts
    for token in tokens:
        holders = [n for n in graph.substrings.holders(token) if n < ev.node]
        if any(facts[n].private for n in holders) and not any(facts[n].kind is RecordKind.USER for n in holders):
            return True
    return False


def _severity_high(ev: NodeEvidence) -> bool:
    return ev.spec is not None and ev.spec.severity >= 2


def _severity_max(ev: NodeEvidence) -> bool:
    return ev.spec is not None and ev.spec.severity >= 3


def _instructed_value(ev: NodeEvidence) -> bool:
    """A payload/identifier value of a sink or side-effectful call stands inside an instruction-shaped clause of
    an earlier untrusted record, and some such value no earlier user turn names exactly
    (:func:`guard.evidence.trust.trusted_value`, docs/evidence.md#trust-is-granted-on-an-exact-match)."""
    held_before = ev.graph.instructed.held_before
    held = [value for value in ev.payload_stripped if value and held_before(value, ev.node)]
    return bool(held) and any(not any(trusted_value(value, turn) for turn in ev.turn_texts) for value in held)


def _unrequested_action(ev: NodeEvidence) -> bool:
    """A sink or side-effectful call whose kind of action no user turn asks for; with no user turn seen, scope
    says nothing (:func:`guard.evidence.scope.requested`)."""
    turns, stems = ev.turns
    return bool(turns) and not requested(ev.record.tool or "", stems)


def _role(name: str) -> Prefix:
    """A role or graded row: read from the node's one role reading (:attr:`NodeEvidence.roles`)."""
    return Prefix(lambda ev: ev.roles[name], acting=True)


FUNCTIONS: Mapping[str, Prefix | Selection] = MappingProxyType(
    {
        table.PROVENANCE_PATH.name: Selection(_provenance_path),
        table.PRIVATE_IN_CONTEXT.name: Selection(_private_in_context),
        table.CANARY.name: Selection(_canary),
        table.INJECTION_TEXT.name: Selection(_injection_text),
        table.UNTRUSTED_PAYLOAD.name: Selection(_untrusted_payload),
        table.IRREVERSIBLE_SINK.name: Prefix(_irreversible_sink),
        table.INJECTED_VALUE.name: Selection(_injected_value),
        table.INJECTED_SHORT_ID.name: Prefix(_injected_short_id, acting=True),
        table.UNTRUSTED_ONLY_VALUE.name: Prefix(_untrusted_only_value, acting=True),
        table.PRIVATE_IN_URL.name: Prefix(_private_in_url),
        table.SEVERITY_HIGH.name: Prefix(_severity_high),
        table.SEVERITY_MAX.name: Prefix(_severity_max),
        **{name: _role(name) for name in table.ROLE_FEATURES + table.GRADED_FEATURES},
        table.INSTRUCTED_VALUE.name: Prefix(_instructed_value, acting=True),
        table.UNREQUESTED_ACTION.name: Prefix(_unrequested_action, acting=True),
        table.CONTROL_UNTRUSTED_ONLY.name: Prefix(lambda ev: ev.control.untrusted_only, acting=True),
        table.CONTROL_UNNAMED_SOURCE.name: Prefix(lambda ev: ev.control.unnamed, acting=True),
    }
)
#: The shipped table bound to its functions (checked here, at import).
BOUND: Bound = bind(TABLE, FUNCTIONS)


# --------------------------------------------------------------------------- helpers


def _payload_canary(ev: NodeEvidence) -> bool:
    """Whether a canary pattern of the scorer matches a payload or identifier argument of the proposal."""
    patterns = ev.context.canary
    return bool(patterns) and any(_canary_in(patterns, value) for value in ev.payload_values)


def _may_hold_url(value: str) -> bool:
    """The literal screen of :data:`_URL`: every match starts with ``http`` or ``www.``."""
    return "http" in value or "www." in value


def _canary_in(patterns: tuple[re.Pattern[str], ...], value: str) -> bool:
    """Whether a canary pattern matches ``value`` (only the patterns its literal screen keeps are run)."""
    kept = live(patterns, value)
    return any(patterns[i].search(value) for i in kept) if kept is not None else any(p.search(value) for p in patterns)


def _path_and_query(url: str) -> str:
    """The part of a URL after its host, percent-decoded."""
    rest = url.split("://", 1)[-1]
    slash = [i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0]
    return unquote(rest[min(slash) :]) if slash else ""


def _inside(text: str, value: str, starts: tuple[int, ...], window: int) -> bool:
    """Whether ``value`` occurs in ``text`` starting within ``window`` characters after one of ``starts``.

    One bounded search per run of overlapping windows (:func:`merged_windows`): ``find`` in
    ``[lo, hi - 1 + len(value))`` returns an occurrence starting in ``[lo, hi)`` if there is one, so no
    character outside the windows is read and none twice.
    """
    size = len(value)
    return any(text.find(value, lo, hi - 1 + size) >= 0 for lo, hi in merged_windows(len(text), starts, window))
