"""Evidence transforms for the constructed-suite diagnostics (see :mod:`guard.studies.diagnostics`).

:class:`EdgeFilterGraph` drops whole edge types or a seeded fraction of edges;
:func:`paraphrase_sink_text` rewrites the exact text a sink's payload copies from earlier records.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from guard.evidence.kgrams import window_keys
from guard.evidence.values import find_values
from guard.graph import E1, E3, PrefixGraph, ValueIndex, record_text
from guard.policy import Policy
from guard.records import Episode, Record, RecordKind, freeze_args

STRUCTURED_EDGES = frozenset({E1, E3})
PARAPHRASE_MARK = "…"
GraphFactory = Callable[[Policy, str], PrefixGraph]


def edge_draw(seed: int, episode_id: str, source: int, target: int) -> float:
    """A uniform number in [0, 1) fixed by (seed, episode, edge); an edge is dropped at rate r iff < r."""
    digest = hashlib.sha256(f"{seed}|{episode_id}|{source}|{target}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class EdgeFilterGraph(PrefixGraph):
    """A prefix graph that never adds some edges: whole edge types, or a seeded fraction of edges.

    Dropping happens where an edge would be added, so the graph is what :class:`PrefixGraph` builds
    from the same records minus those edges (edges never depend on other edges).  An edge with
    several types survives type removal through the types it keeps.
    """

    def __init__(
        self,
        policy: Policy,
        *,
        episode_id: str = "",
        drop_types: frozenset[str] = frozenset(),
        dropout: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__(policy)
        self.episode_id = episode_id
        self.drop_types = drop_types
        self.dropout = dropout
        self.seed = seed
        self.snapshot = False

    @classmethod
    def dropped_from(cls, base: PrefixGraph, *, episode_id: str, dropout: float, seed: int) -> EdgeFilterGraph:
        """``base`` minus the edges this dropout drops: a read-only snapshot that shares base's records.

        Equal to building the records incrementally with the same dropout, because dropout decides
        per edge (every call that adds an edge is dropped or kept together).
        """
        out = cls(base.policy, episode_id=episode_id, dropout=dropout, seed=seed)
        out.records, out.facts, out.index = base.records, base.facts, base.index
        out.injected, out.substrings, out.instructed = base.injected, base.substrings, base.instructed
        out.graph.add_nodes_from(base.graph.nodes)
        for source, target, data in base.graph.edges(data=True):
            if out.keeps(source, target, data["etype"]):
                out.graph.add_edge(
                    source, target, etype=data["etype"], types=set(data["types"]), args=set(data["args"])
                )
        out.snapshot = True
        return out

    def add(self, record: Record) -> None:
        """Add ``record`` (refused on a snapshot, whose index is shared with its base)."""
        if self.snapshot:
            raise ValueError("a graph derived with dropped_from is a read-only snapshot")
        super().add(record)

    def keeps(self, source: int, target: int, etype: str) -> bool:
        """Whether the edge ``source → target`` of type ``etype`` is added."""
        if etype in self.drop_types:
            return False
        return self.dropout <= 0 or edge_draw(self.seed, self.episode_id, source, target) >= self.dropout

    def _add_edge(self, source: int, target: int, etype: str, arg: str) -> None:
        if self.keeps(source, target, etype):
            super()._add_edge(source, target, etype, arg)


def standard_graph(policy: Policy, episode_id: str) -> PrefixGraph:
    """The graph every selector uses online."""
    return PrefixGraph(policy)


def no_provenance_graph(policy: Policy, episode_id: str) -> PrefixGraph:
    """The graph without structured provenance (E1 and E3 edges)."""
    return EdgeFilterGraph(policy, episode_id=episode_id, drop_types=STRUCTURED_EDGES)


def paraphrase_sink_text(episode: Episode, policy: Policy) -> Episode:
    """The episode as the gate would see it if no sink payload copied exact text from earlier records.

    Every span of ``min_span`` characters and every value token in a sink's payload arguments that
    occurs in an earlier (already rewritten) record is replaced by ``…``, repeatedly until none is
    left.  Identifier arguments (recipients, attachments) are untouched: they are structured.
    """
    index = ValueIndex(policy.graph.value_patterns.values(), policy.graph.min_span)
    out: list[Record] = []
    for record in episode.records:
        spec = policy.tool(record.tool or "") if record.kind is RecordKind.PROPOSAL else None
        if spec is not None and spec.is_sink:
            args = {k: _strip_copied(v, index) if k in spec.payload_args else v for k, v in record.args.items()}
            record = Record(
                record.index, record.kind, record.trust, record.text, record.tool, freeze_args(args), record.call_id
            )
        out.append(record)
        index.add(record.index, record_text(record), ())
    return Episode(episode.episode_id, tuple(out), episode.meta)


def _strip_copied(value: Any, index: ValueIndex) -> Any:
    if isinstance(value, list | tuple):
        return [_strip_copied(v, index) for v in value]
    if not isinstance(value, str):
        return value
    text = value
    while True:  # every pass replaces runs of >= 4 characters by one: the text shrinks, so this ends
        covered = _copied(text, index)
        if not any(covered):
            return text
        text = _replace_runs(text, covered)


def _copied(text: str, index: ValueIndex) -> list[bool]:
    k = index.min_span
    covered = [False] * len(text)
    spans = [(i, i + k) for i, key in enumerate(window_keys(text, k)) if key in index.kgrams]
    spans += [(v.start, v.end) for v in find_values(text) if v.key in index.wholes]  # whole structured values
    for token in index.tokens_in(text) & index.tokens.keys():
        start = text.find(token)
        while start >= 0:
            spans.append((start, start + len(token)))
            start = text.find(token, start + 1)
    for start, end in spans:
        covered[start:end] = [True] * (end - start)
    return covered


def _replace_runs(text: str, covered: list[bool]) -> str:
    out: list[str] = []
    for ch, hit in zip(text, covered, strict=True):
        if not hit:
            out.append(ch)
        elif not out or out[-1] != PARAPHRASE_MARK:
            out.append(PARAPHRASE_MARK)
    return "".join(out)
