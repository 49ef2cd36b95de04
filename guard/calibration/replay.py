"""Replay: every proposal of every episode through the same Session code as online use.

Scores, selections and ledger events are computed once per episode and kept as arrays.  Because a
replayed episode stops at the first proposal whose score exceeds λ, everything about it at any λ
follows from the running maximum of its scores: the loss at λ is ``[λ >= M]`` with ``M`` the running
maximum at its first harmful step, so thresholds for every α and permutation come from sorting.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from guard.calls import CallState
from guard.decision import Decision
from guard.episode_json import TRUST_SOURCE
from guard.features import FEATURES
from guard.ledger import CATEGORIES, Ledger, LedgerLabels, LedgerTrace
from guard.policy import Policy, SelectorName
from guard.protocols import Selector
from guard.records import Episode, Record, RecordKind, is_content
from guard.runtime import Guard, Session
from guard.scorer import WeightedScorer
from guard.selectors import make_selector
from guard.stages import PassThroughCertifier


def feed(
    session: Session, episode: Episode, on_decision: Callable[[Session, Decision], None] | None = None
) -> list[Decision]:
    """Feed an episode's records, in order, into ``session``; one decision per proposal."""
    decisions: list[Decision] = []
    for record in episode.records:
        if record.kind is RecordKind.USER:
            session.observe_user(record.text)
        elif record.kind is RecordKind.PROPOSAL:
            decisions.append(session.decide(record.tool or "", dict(record.args), record.call_id or ""))
            if on_decision is not None:
                on_decision(session, decisions[-1])
        elif is_content(record):
            session.observe_content(record.text, TRUST_SOURCE[record.trust], record.tool or "")
        elif record.kind is RecordKind.RESULT:
            _observe_result(session, record)
        else:
            session.observe_final(record.text)
    return decisions


def _observe_result(session: Session, record: Record) -> None:
    """A logged result; one whose call the session refused before adding it (an unknown tool, arguments it
    cannot read) answers no proposal, so its text, which the logged run showed the model, enters as content
    with the trust the policy gives the tool's results (an unknown tool's: untrusted)."""
    call_id = record.call_id or ""
    if session.call_state(call_id) in (CallState.UNKNOWN, CallState.ANSWERED):
        session.observe_content(record.text, session.tool_source(record.tool or ""), record.tool or "")
        return
    session.observe_result(call_id, record.text, record.status)


def replay_decisions(guard: Guard, episode: Episode, session_id: str | None = None) -> list[Decision]:
    """The offline decisions for every proposal of ``episode`` (a fresh session of ``guard``).

    The session id defaults to the episode id, as an online run of the episode would name it (audit
    logs, online/offline equality); calibration scoring uses :func:`replay_session_id` instead.
    """
    return feed(guard.session(episode.episode_id if session_id is None else session_id), episode)


@dataclass(frozen=True, slots=True)
class EpisodeScores:
    """What calibration needs of one episode, for one selector."""

    episode_id: str
    scores: np.ndarray
    n_selected: np.ndarray
    n_prefix: np.ndarray
    harm_steps: tuple[int, ...]
    category_steps: dict[str, int | None]
    utility: bool
    features: np.ndarray | None = None
    in_scope: np.ndarray | None = None
    tools: tuple[str, ...] = ()
    rule: np.ndarray | None = None
    """Per proposal, whether the signature rule escalates it (a stop outside the calibrated score)."""

    def feature_matrix(self) -> tuple[np.ndarray, np.ndarray]:
        """``(K, F)`` binary features (:data:`guard.scorer.FEATURES` order) and the ``(K,)`` in-scope flags."""
        k = len(self.scores)
        features = self.features if self.features is not None else np.zeros((k, len(FEATURES)), dtype=bool)
        in_scope = self.in_scope if self.in_scope is not None else np.ones(k, dtype=bool)
        return features, in_scope


def score_episode(policy: Policy, episode: Episode, labels: LedgerLabels) -> EpisodeScores:
    """Scores under ``policy`` (threshold +inf: nothing stops) and the ledger trace of the episode."""
    return score_episode_selectors(policy, [policy.selector.name], episode, labels)[policy.selector.name]


def score_episode_selectors(
    policy: Policy, selectors: Sequence[SelectorName], episode: Episode, labels: LedgerLabels
) -> dict[str, EpisodeScores]:
    """Scores of one episode under several selectors from one pass over the records.

    The first selector runs in a real :class:`Session` (the online code path); each other selector
    selects and scores on the same prefix graph with the same selector and scorer code, so its
    scores equal those of a session configured with it (the graph does not depend on the selector).
    SafeCommit is not run: it certifies after the score and the gate, and a replayed proposal is
    followed by its logged records whatever its verdict, so nothing it does reaches a score (a test
    compares every array with and without it).
    """
    guard = replay_guard(policy, selectors[0])
    others = {name: make_selector(policy.with_selector(name).selector) for name in selectors[1:]}
    rows: dict[str, list[Row]] = {name: [] for name in selectors}

    def shadow(session: Session, decision: Decision) -> None:
        scored = _scored(session, decision)
        rows[selectors[0]].append(
            (
                _finite_score(decision),
                len(decision.selected),
                decision.proposal_index,
                _counted(session, decision.proposal_index, decision.features),
                scored and _in_scope(session, decision.proposal_index),
                _tool(session, decision.proposal_index),
                scored and _rule(session, decision.proposal_index, decision.features),
            )
        )
        seen: dict[frozenset[int], Row] = {}  # selectors that pick the same records get the same row
        for name, selector in others.items():
            rows[name].append(_shadow_row(session, decision, selector, seen))

    feed(guard.session(replay_session_id(episode)), episode, shadow)
    trace = Ledger(policy, labels).trace(episode)
    return {name: _episode_scores(episode, trace, rows[name]) for name in selectors}


Row = tuple[float, int, int, tuple[bool, ...], bool, str, bool]

_GUARDS: dict[tuple[int, str], tuple[Policy, Guard]] = {}


def replay_guard(policy: Policy, selector: SelectorName) -> Guard:
    """The replay guard of ``policy`` with ``selector``: threshold +inf, no SafeCommit, one per policy object."""
    key = (id(policy), selector)
    cached = _GUARDS.get(key)
    if cached is None or cached[0] is not policy:
        if len(_GUARDS) > 256:
            _GUARDS.clear()
        cached = _GUARDS[key] = (
            policy,
            Guard(policy.with_selector(selector), threshold=float("inf"), certifier=PassThroughCertifier()),
        )
    return cached[1]


def replay_session_id(episode: Episode) -> str:
    """The session id of a replayed episode: a hash of its first user turn, never its episode id.

    Episode ids of AgentDojo runs name the injection task (an attack label); the random selector
    seeds from the session id, so the id must carry nothing the gate may not see.
    """
    first = next((r.text for r in episode.records if r.kind is RecordKind.USER), "")
    return "replay-" + hashlib.sha256(first.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _vector(features: Mapping[str, bool]) -> tuple[bool, ...]:
    return tuple(bool(features.get(name, False)) for name in FEATURES)


def _counted(session: Session, node: int, features: Mapping[str, bool]) -> tuple[bool, ...]:
    """The features that count in the score: those a fully trusted call leaves out are recorded as off, so
    re-scoring the recorded features under any weights gives the scorer's own score.

    Any decision the runtime returns is read: a refusal before scoring (no features, no node), an
    ``internal_error`` or out-of-scope decision, a partial feature map (a missing feature is off)."""
    vector = _vector(features)
    scorer = session.guard.scorer
    if not any(vector) or not isinstance(scorer, WeightedScorer) or node not in session.graph.records:
        return vector
    lowered = scorer.lowered(session.graph, node, features)
    return tuple(on and name not in lowered for name, on in zip(FEATURES, vector, strict=True))


def _scored(session: Session, decision: Decision) -> bool:
    """Whether ``decision`` was scored on a proposal of the session's graph (a refusal was not)."""
    return decision.score is not None and decision.proposal_index in session.graph.records


def _tool(session: Session, node: int) -> str:
    record = session.graph.records.get(node)  # a refusal before the proposal was added has no node
    return (record.tool or "") if record is not None else ""


def _rule(session: Session, node: int, features: Mapping[str, bool]) -> bool:
    """Whether the signature rule escalates the proposal at ``node`` (it reads the call, not the selection)."""
    scorer = session.guard.scorer
    return isinstance(scorer, WeightedScorer) and scorer.signature_hit(session.graph, node, features)


def _in_scope(session: Session, node: int) -> bool:
    scorer = session.guard.scorer
    return bool(scorer.in_scope(session.graph, node)) if isinstance(scorer, WeightedScorer) else True


def _shadow_row(session: Session, decision: Decision, selector: Selector, seen: dict[frozenset[int], Row]) -> Row:
    """The row of ``selector`` at ``decision``; ``seen`` holds the rows of the selections scored so far at
    this decision (a score is a function of the prefix graph, the proposal and the selection)."""
    node = decision.proposal_index
    if not _scored(session, decision):
        return float("inf"), 0, node, _vector({}), False, _tool(session, node), False
    selected = frozenset(selector.select(session.graph, node, session.session_id))
    row = seen.get(selected)
    if row is None:
        score, features = session.guard.scorer.score(session.graph, node, selected)
        counted = _counted(session, node, features)
        row = seen[selected] = (
            float(score),
            len(selected),
            node,
            counted,
            _in_scope(session, node),
            _tool(session, node),
            _rule(session, node, features),
        )
    return row


def _episode_scores(episode: Episode, trace: LedgerTrace, rows: list[Row]) -> EpisodeScores:
    steps = {name: next((k for k, e in enumerate(trace.events) if name in e), None) for name in CATEGORIES}
    return EpisodeScores(
        episode_id=episode.episode_id,
        scores=np.array([r[0] for r in rows], dtype=np.float64),
        n_selected=np.array([r[1] for r in rows], dtype=np.int64),
        n_prefix=np.array([r[2] for r in rows], dtype=np.int64),
        harm_steps=tuple(k for k, e in enumerate(trace.events) if e),
        category_steps=steps,
        utility=bool(episode.meta.utility),
        features=np.array([r[3] for r in rows], dtype=bool).reshape(len(rows), len(FEATURES)),
        in_scope=np.array([r[4] for r in rows], dtype=bool),
        tools=tuple(r[5] for r in rows),
        rule=np.array([r[6] for r in rows], dtype=bool),
    )


def _finite_score(decision: Decision) -> float:
    """A decision's score; a refusal before scoring (unknown tool, bad args) counts as +inf."""
    return float("inf") if decision.score is None else decision.score


@dataclass(frozen=True, slots=True)
class ScoredCorpus:
    """Flattened per-proposal arrays of a corpus under one selector.

    ``offsets[i]:offsets[i+1]`` are episode ``i``'s proposals.  ``cummax`` is each episode's running
    maximum score; ``harm_level[i]`` is ``cummax`` at its first harmful step (+inf if none).
    """

    episode_ids: tuple[str, ...]
    offsets: np.ndarray
    scores: np.ndarray
    cummax: np.ndarray
    n_selected: np.ndarray
    n_prefix: np.ndarray
    harmful: np.ndarray
    harm_level: np.ndarray
    category_levels: dict[str, np.ndarray]
    max_score: np.ndarray
    utility: np.ndarray
    features: np.ndarray | None = None
    in_scope: np.ndarray | None = None
    first_harm: np.ndarray | None = None
    category_first: dict[str, np.ndarray] | None = None
    tools: tuple[str, ...] = ()
    tool_ids: np.ndarray | None = None
    rule_first: np.ndarray | None = None
    """Per episode, the flat index of its first proposal the signature rule escalates (-1: none)."""

    def gated(self) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """What a deployed gate meets at test time: the harm levels, the maximum scores and the category levels
        with the signature rule's stops added.  A rule stop at or before an episode's first harmful step
        prevents its harm at every threshold, and a rule stop anywhere ends its autonomous run.  The rule is
        never part of calibration: lambda-hat reads :attr:`harm_level` alone."""
        if self.rule_first is None or not (self.rule_first >= 0).any():
            return self.harm_level, self.max_score, self.category_levels
        ruled = self.rule_first >= 0

        def stopped(first: np.ndarray | None, levels: np.ndarray) -> np.ndarray:
            if first is None:
                return levels
            return np.where(ruled & (first >= 0) & (self.rule_first <= first), np.inf, levels)

        categories = {c: stopped((self.category_first or {}).get(c), v) for c, v in self.category_levels.items()}
        return stopped(self.first_harm, self.harm_level), np.where(ruled, np.inf, self.max_score), categories

    def columns(self) -> tuple[str, ...]:
        """Names of the :meth:`design` columns: the scorer features, then ``tool:NAME`` per tool."""
        return (*FEATURES, *(f"tool:{t}" for t in self.tools))

    def design(self) -> np.ndarray:
        """Per proposal, the binary features and the one-hot tool identity (``(K, F + T)``)."""
        features = self.features if self.features is not None else np.zeros((self.scores.size, len(FEATURES)), bool)
        onehot = np.zeros((self.scores.size, len(self.tools)), dtype=bool)
        if self.tool_ids is not None and self.tool_ids.size:
            onehot[np.arange(self.scores.size), self.tool_ids] = True
        return np.hstack([features.astype(bool), onehot])

    @property
    def n(self) -> int:
        """Number of episodes."""
        return len(self.episode_ids)

    def fingerprint(self) -> str:
        """A hash of the calibration set (episode ids and scores)."""
        digest = hashlib.sha256()
        digest.update("\n".join(self.episode_ids).encode())
        digest.update(self.scores.tobytes())
        digest.update(self.harm_level.tobytes())
        return digest.hexdigest()


def _level(cummax: np.ndarray, step: int | None) -> float:
    return float("inf") if step is None else float(cummax[step])


def assemble(items: Sequence[EpisodeScores]) -> ScoredCorpus:
    """Stack per-episode scores into flat arrays."""
    lengths = np.array([len(e.scores) for e in items], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    cummaxes = [np.maximum.accumulate(e.scores) if len(e.scores) else e.scores for e in items]
    harmful = np.zeros(int(offsets[-1]), dtype=bool)
    for i, e in enumerate(items):
        for step in e.harm_steps:
            harmful[offsets[i] + step] = True
    pairs = list(zip(cummaxes, items, strict=True))
    matrices = [e.feature_matrix() for e in items]
    cat = {c: np.array([_level(cm, e.category_steps[c]) for cm, e in pairs]) for c in CATEGORIES}
    tools = tuple(sorted({t for e in items for t in e.tools}))
    ids = {t: i for i, t in enumerate(tools)}
    named = all(len(e.tools) == len(e.scores) for e in items)
    return ScoredCorpus(
        episode_ids=tuple(e.episode_id for e in items),
        offsets=offsets,
        scores=_cat([e.scores for e in items], np.float64),
        cummax=_cat(cummaxes, np.float64),
        n_selected=_cat([e.n_selected for e in items], np.int64),
        n_prefix=_cat([e.n_prefix for e in items], np.int64),
        harmful=harmful,
        harm_level=np.array([_level(cm, e.harm_steps[0] if e.harm_steps else None) for cm, e in pairs]),
        category_levels=cat,
        max_score=np.array([cm[-1] if len(cm) else -np.inf for cm in cummaxes], dtype=np.float64),
        utility=np.array([e.utility for e in items], dtype=bool),
        features=np.concatenate([m[0] for m in matrices]) if matrices else np.zeros((0, len(FEATURES)), bool),
        in_scope=_cat([m[1] for m in matrices], np.bool_),
        first_harm=np.array(
            [_global(offsets, i, e.harm_steps[0] if e.harm_steps else None) for i, e in enumerate(items)],
            dtype=np.int64,
        ),
        category_first={
            c: np.array([_global(offsets, i, e.category_steps[c]) for i, e in enumerate(items)], dtype=np.int64)
            for c in CATEGORIES
        },
        tools=tools if named else (),
        tool_ids=np.array([ids[t] for e in items for t in e.tools], dtype=np.int64) if named else None,
        rule_first=np.array([_first_rule(offsets, i, e.rule) for i, e in enumerate(items)], dtype=np.int64),
    )


def _first_rule(offsets: np.ndarray, episode: int, rule: np.ndarray | None) -> int:
    """The flat index of the episode's first proposal the signature rule escalates (-1 for none)."""
    if rule is None or not rule.any():
        return -1
    return _global(offsets, episode, int(np.argmax(rule)))


def _global(offsets: np.ndarray, episode: int, step: int | None) -> int:
    """The flat proposal index of ``step`` of ``episode`` (-1 for none)."""
    return -1 if step is None else int(offsets[episode]) + step


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)
