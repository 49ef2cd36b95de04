"""What a report shows, as plain values: records, edges and decisions of one episode.

Two builders fill the same views.  :func:`views_from_audit` reads only what an audit log holds
(argument values stay as the log wrote them — hashed unless the policy allowed them raw; record
texts and kinds other than proposals are not in the log).  :func:`view_from_replay` replays an
episode through the same :func:`~guard.calibration.replay.feed` as evaluation, on a copy of the
guard that audits into memory, and keeps the whole prefix graph; proposal arguments are hashed
with :func:`guard.redaction.redact_args` exactly as the audit log would hash them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from guard.audit import MemoryAudit
from guard.decision import Verdict
from guard.features import PROVENANCE_PATH
from guard.graph import PrefixGraph
from guard.jsonio import decode_float
from guard.policy import Policy
from guard.records import Episode, RecordKind
from guard.redaction import redact_args
from guard.report.entries import EntryError, audit_indices, check_entry
from guard.runtime import Guard

UNKNOWN = "unknown"
"""Kind of a record whose content is not in the audit log."""


@dataclass(frozen=True, slots=True)
class RecordView:
    """One node of the prefix graph as the report draws it."""

    index: int
    kind: str
    tool: str | None = None
    text: str = ""
    args: Any = None
    call_id: str | None = None
    status: str = "ok"
    trust: str = ""
    private: bool = False
    untrusted: bool = False
    sink: bool = False


@dataclass(frozen=True, slots=True)
class EdgeView:
    """One edge of the prefix graph: primary type, every type it carries, the argument names."""

    source: int
    target: int
    etype: str
    types: tuple[str, ...] = ()
    args: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FeatureRow:
    """One scorer feature: its value, the policy's weight and the contribution to the score."""

    name: str
    value: bool
    weight: float | None
    contribution: float | None


@dataclass(frozen=True, slots=True)
class DecisionView:
    """One decision with everything the report explains about it."""

    number: int
    node: int | None
    call_id: str
    tool: str
    args: Any
    verdict: str
    reason: str
    message: str
    score: float | None
    threshold: float | None
    selected: tuple[int, ...]
    full_prefix: int
    features: tuple[FeatureRow, ...]
    latency_us: float | None
    edges_in: tuple[tuple[int, str], ...] = ()
    path_nodes: tuple[int, ...] = ()
    path_edges: tuple[tuple[int, int], ...] = ()
    safecommit: Mapping[str, Any] | None = None
    probes: tuple[str, ...] = ()
    error: str | None = None
    artifact: str | None = None
    after_stop: bool = False
    review: str | None = None
    """The human's answer to this decision (``"approve by alice at 2026-…"``), from a ``kind: review`` entry."""

    @property
    def approved(self) -> bool:
        """A human approved this (escalated) call, so it ran."""
        return self.review is not None and self.review.startswith("approve")

    @property
    def refused(self) -> bool:
        """Anything but ``execute``, unless a human approved the call."""
        return self.verdict != Verdict.EXECUTE.value and not self.approved


@dataclass(frozen=True, slots=True)
class EpisodeView:
    """One episode (a replayed episode, or one session of an audit log)."""

    episode_id: str
    records: tuple[RecordView, ...]
    edges: tuple[EdgeView, ...]
    decisions: tuple[DecisionView, ...]
    meta: Mapping[str, str] = field(default_factory=dict)
    complete: bool = True
    replay: bool = False

    @property
    def stop(self) -> DecisionView | None:
        """The first refused decision, if any."""
        return next((d for d in self.decisions if d.refused), None)

    def decisions_at(self, node: int) -> list[DecisionView]:
        """The decisions taken on the proposal at ``node`` (more than one after probes)."""
        return [d for d in self.decisions if d.node == node]


# --------------------------------------------------------------------------- shared helpers


def threshold_value(raw: Any) -> float | None:
    """The threshold of an audit entry as a float (``"inf"`` → ∞), or None."""
    if raw is None:
        return None
    try:
        return decode_float(raw, "threshold", ValueError)
    except ValueError:
        return None


def _score(raw: Any) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        return None
    return float(raw)


def feature_rows(features: Mapping[str, Any], weights: Mapping[str, float] | None) -> tuple[FeatureRow, ...]:
    """Value × weight = contribution for every feature (weights unknown → None)."""
    names = list(features) + [n for n in (weights or {}) if n not in features]
    rows = []
    for name in names:
        value = bool(features.get(name, False))
        weight = None if weights is None or name not in weights else float(weights[name])
        contribution = None if weight is None else (weight if value else 0.0)
        rows.append(FeatureRow(name, value, weight, contribution))
    return tuple(rows)


def _decision(number: int, entry: Mapping[str, Any], weights: Mapping[str, float] | None, **extra: Any) -> DecisionView:
    """A decision view from one audit entry (the fields of docs/audit.md)."""
    index = entry.get("proposal_index")
    node = index if isinstance(index, int) and not isinstance(index, bool) and index >= 0 else None
    latency = entry.get("latency_us")
    safecommit = entry.get("safecommit")
    features = entry.get("features") if isinstance(entry.get("features"), Mapping) else {}
    return DecisionView(
        number=number,
        node=node,
        call_id=str(entry.get("call_id", "")),
        tool=str(entry.get("tool", "")),
        args=entry.get("args"),
        verdict=str(entry.get("verdict", "")),
        reason=str(entry.get("reason", "")),
        message=str(entry.get("message", "")),
        score=_score(entry.get("score")),
        threshold=threshold_value(entry.get("threshold")),
        selected=tuple(sorted(int(n) for n in entry.get("selected") or ())),
        full_prefix=node if node is not None else 0,
        features=feature_rows(features, weights) if features else (),
        latency_us=float(latency) if isinstance(latency, int | float) else None,
        edges_in=tuple((int(s), str(t)) for s, t in entry.get("edges_in") or ()),
        safecommit=safecommit if isinstance(safecommit, Mapping) else None,
        probes=tuple(str(p) for p in entry.get("probes") or ()),
        error=str(entry["error"]) if entry.get("error") else None,
        artifact=str(entry["artifact"]) if entry.get("artifact") else None,
        **extra,
    )


def policy_weights(policy: Policy | None) -> dict[str, float] | None:
    """The scorer weights of ``policy`` (None without a policy)."""
    return None if policy is None else {k: float(v) for k, v in policy.scorer.weights.model_dump().items()}


# --------------------------------------------------------------------------- audit log


def views_from_audit(
    entries: Iterable[Mapping[str, Any]], weights: Mapping[str, float] | None = None
) -> list[EpisodeView]:
    """One view per session of an audit log, in order of first appearance; only what the log holds.

    Every entry is checked first (:func:`check_entry`; EntryError naming the entry and field).
    Human answers (``kind: review`` entries) are not decisions: each is attached to the latest
    decision of its session with the same call id (an approved call is not a refusal).
    """
    sessions: dict[str, list[Mapping[str, Any]]] = {}
    for number, entry in enumerate(entries, start=1):
        try:
            check_entry(entry)
        except EntryError as exc:
            raise EntryError(exc.field, f"audit entry {number}: {exc}") from None
        if "event" in entry:  # not a decision (e.g. a session_end entry)
            continue
        sessions.setdefault(str(entry.get("session", "")), []).append(entry)
    return [_audit_view(session, items, weights) for session, items in sessions.items()]


def review_label(entry: Mapping[str, Any]) -> str:
    """``"<answer> by <reviewer> at <UTC time>"`` of a review entry (plus the edited call's id)."""
    import datetime

    ts = entry.get("ts")
    when = (
        datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        if isinstance(ts, int | float) and not isinstance(ts, bool) and math.isfinite(ts)
        else "unknown time"
    )
    label = f"{entry.get('answer', '?')} by {entry.get('reviewer') or 'unknown'} at {when}"
    if entry.get("edited_call_id"):
        label += f" (edited call {entry['edited_call_id']})"
    return label


def _with_reviews(decisions: list[DecisionView], reviews: Sequence[Mapping[str, Any]]) -> list[DecisionView]:
    for entry in reviews:
        call_id = str(entry.get("call_id", ""))
        for k in range(len(decisions) - 1, -1, -1):
            if decisions[k].call_id == call_id:
                decisions[k] = replace(decisions[k], review=review_label(entry))
                break
    return decisions


def _audit_view(session: str, entries: Sequence[Mapping[str, Any]], weights: Mapping[str, float] | None) -> EpisodeView:
    reviews = [e for e in entries if e.get("kind") == "review"]
    entries = [e for e in entries if e.get("kind") != "review"]
    provisional = _with_reviews([_decision(k, e, weights) for k, e in enumerate(entries)], reviews)
    proposals = {d.node: d for d in provisional if d.node is not None}
    edges = {
        (s, d.node): EdgeView(s, d.node, t, (t,)) for d in provisional if d.node is not None for s, t in d.edges_in
    }
    known = set(proposals) | {n for d in provisional for n in d.selected} | {e.source for e in edges.values()}
    users = {e.source for e in edges.values() if e.etype == "E4"}  # E4 edges start at user turns (docs/evidence.md)
    records = []
    for index in audit_indices(known):
        if index in proposals:
            d = proposals[index]
            records.append(RecordView(index, RecordKind.PROPOSAL.value, tool=d.tool, args=d.args, call_id=d.call_id))
        else:
            records.append(RecordView(index, RecordKind.USER.value if index in users else UNKNOWN))
    decisions = tuple(_with_audit_path(d, edges.values()) for d in provisional)
    return EpisodeView(session, tuple(records), tuple(edges.values()), decisions, complete=False)


def _with_audit_path(decision: DecisionView, edges: Iterable[EdgeView]) -> DecisionView:
    """The private-source → sink path as far as the log shows it: the selection, when the path fired."""
    fired = any(f.name == PROVENANCE_PATH.name and f.value for f in decision.features)
    if not fired or decision.node is None:
        return decision
    nodes = {*decision.selected, decision.node}
    path_edges = tuple(sorted((e.source, e.target) for e in edges if e.source in nodes and e.target in nodes))
    return replace(decision, path_nodes=tuple(sorted(nodes)), path_edges=path_edges)


# --------------------------------------------------------------------------- replay


def shadow_guard(guard: Guard) -> tuple[Guard, MemoryAudit]:
    """A copy of ``guard`` (same policy, threshold, selector, scorer, certifier) auditing into memory."""
    audit = MemoryAudit()
    copy = Guard(
        guard.policy,
        threshold=guard.threshold,
        audit=audit,
        artifact_id=guard.artifact_id,
        selector=guard.selector,
        scorer=guard.scorer,
        certifier=guard.certifier,
    )
    return copy, audit


def scorer_weights(guard: Guard) -> dict[str, float]:
    """The weights the guard's scorer uses (its ``weights`` mapping, else the policy's)."""
    weights = getattr(guard.scorer, "weights", None)
    if isinstance(weights, Mapping) and all(isinstance(v, int | float) for v in weights.values()):
        return {str(k): float(v) for k, v in weights.items()}
    return policy_weights(guard.policy) or {}


def view_from_replay(guard: Guard, episode: Episode) -> EpisodeView:
    """Replay ``episode`` through a fresh session (``feed``) and keep decisions and the whole graph."""
    from guard.calibration.replay import feed

    shadow, audit = shadow_guard(guard)
    session = shadow.session(episode.episode_id)
    feed(session, episode)
    graph = session.graph
    weights = scorer_weights(guard)
    records = tuple(_record_view(graph, n) for n in sorted(graph.records))
    edges = tuple(
        EdgeView(u, v, data["etype"], tuple(sorted(data["types"])), tuple(sorted(data["args"])))
        for u, v, data in sorted(graph.graph.edges(data=True), key=lambda e: (e[1], e[0]))
    )
    decisions: list[DecisionView] = []
    stopped = False
    for number, entry in enumerate(audit.entries):
        view = _decision(number, entry, weights, after_stop=stopped)
        decisions.append(_with_graph_path(view, graph))
        stopped = stopped or view.refused
    return EpisodeView(episode.episode_id, records, edges, tuple(decisions), meta=_meta(episode), replay=True)


def _record_view(graph: PrefixGraph, index: int) -> RecordView:
    record = graph.records[index]
    facts = graph.facts[index]
    policy = graph.policy
    args = None
    if record.kind is RecordKind.PROPOSAL:
        args = redact_args(dict(record.args), policy.audit.raw_args)
    return RecordView(
        index=index,
        kind=record.kind.value,
        tool=record.tool,
        text=record.text,
        args=args,
        call_id=record.call_id,
        status=record.status,
        trust=record.trust.value,
        private=facts.private,
        untrusted=record.kind is RecordKind.RESULT and record.trust.untrusted,
        sink=record.kind is RecordKind.PROPOSAL and _is_sink(policy, record.tool),
    )


def _is_sink(policy: Policy, tool: str | None) -> bool:
    spec = policy.tool(tool or "")
    return spec is not None and spec.is_sink


def _with_graph_path(decision: DecisionView, graph: PrefixGraph) -> DecisionView:
    """Every node on a private-source → proposal path, and the edges between them."""
    node = decision.node
    if node is None or node not in graph.records or not graph.is_reachable_sink(node):
        return decision
    ancestors = graph.ancestors(node)
    sources = graph.private_sources(ancestors)
    nodes = set(sources) | {node}
    for source in sources:
        nodes |= set(_descendants(graph, source)) & ancestors
    edges = tuple(sorted((u, v) for u, v in graph.graph.edges if u in nodes and v in nodes))
    return replace(decision, path_nodes=tuple(sorted(nodes)), path_edges=edges)


def _descendants(graph: PrefixGraph, node: int) -> set[int]:
    found: set[int] = nx.descendants(graph.graph, node)
    return found


def _meta(episode: Episode) -> dict[str, str]:
    meta = episode.meta
    pairs = {
        "model": meta.model,
        "suite": meta.suite,
        "user task": meta.user_task,
        "attack": meta.attack or "none",
        "injection task": meta.injection_task or "",
        "utility (logged)": "" if meta.utility is None else str(meta.utility).lower(),
        "injection goal met (logged)": ""
        if meta.security is None or meta.attack is None
        else str(meta.security).lower(),
        "source": meta.source,
    }
    return {k: v for k, v in pairs.items() if v}
