"""The composed gate of a replayed corpus: G-CARB scores plus SafeCommit's decisions at κ (docs/studies.md).

Pieces of :mod:`guard.studies.composed_shift`: a replayed corpus, SafeCommit's decision on each side-effectful
proposal (a probe counted as a stop, or its probes answered), the composed scores, and what stopped each
test episode first, summed over test sets.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from guard.calibration.replay import ScoredCorpus, assemble
from guard.decision import ProbeCall, Verdict
from guard.records import Episode, Record
from guard.runtime import Guard
from guard.safecommit.runtime import PolicyCertifier
from guard.studies.safecommit_agentdojo import Proposal, Replayed
from guard.studies.shift import Cell

#: an episode → its probe calls' answers (a result record, None when it cannot run); None: log replay.
Answers = Callable[[Episode], Callable[[ProbeCall], Record | None]]

#: SafeCommit's effect on one proposal: runs (certified, or no certificate needed), a probe, another stop.
RUNS, PROBE, REFUSED = 0, 1, 2
#: the composed gate's modes: a probe is a stop, or its probes are answered.
MODES = ("probe_stop", "probe_answered")


@dataclass(frozen=True)
class Replay:
    """One replayed corpus: the episodes' replays and their G-CARB scores."""

    replayed: tuple[Replayed, ...]
    scored: ScoredCorpus


@dataclass(frozen=True)
class Composed:
    """The composed gate on one corpus at one κ in one mode."""

    scored: ScoredCorpus
    """G-CARB scores with +inf where SafeCommit does not certify."""
    sc_level: np.ndarray
    """Per episode, the running-max score at its first SafeCommit stop (NaN: none): stopped there at λ >= it."""
    sc_probe: np.ndarray
    """Per episode, whether its first SafeCommit stop is a probe."""
    probes_run: int = 0


@dataclass
class Decider:
    """SafeCommit's decisions per proposal, memoised by (proposal, κ, mode)."""

    guards: dict[str, Guard]
    answers: Answers | None
    memo: dict[tuple[int, float, str], int] = field(default_factory=dict)
    certifiers: dict[tuple[str, float], PolicyCertifier] = field(default_factory=dict)
    probes_run: int = 0

    def code(self, replayed: Replayed, proposal: Proposal, kappa: float, mode: str) -> int:
        key = (id(proposal), kappa, mode)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = self._decide(replayed, proposal, kappa, mode)
        return found

    def _decide(self, replayed: Replayed, p: Proposal, kappa: float, mode: str) -> int:
        suite = replayed.episode.meta.suite
        certifier = self.certifiers.get((suite, kappa)) or self.certifiers.setdefault(
            (suite, kappa), PolicyCertifier(self.guards[suite].policy, kappa=kappa)
        )
        spec = certifier.policy.tools[p.record.tool or ""]
        if mode == "probe_answered" and self.answers is not None:
            cert, ran = certifier.decide_answered(p.state, p.record, spec, self.answers(replayed.episode))
            self.probes_run += ran
        else:
            cert = certifier.decide_fresh(p.state, p.record, spec)
        if cert.verdict is Verdict.EXECUTE:
            return RUNS
        return PROBE if cert.verdict is Verdict.PROBE else REFUSED


def compose(replay: Replay, decider: Decider, kappa: float, mode: str) -> Composed:
    """The composed gate on ``replay`` at ``kappa`` in ``mode``."""
    items, levels, probes = [], [], []
    before = decider.probes_run
    for r in replay.replayed:
        scores = r.scores.scores.copy()
        first: tuple[int, int] | None = None
        for p in r.proposals:
            code = decider.code(r, p, kappa, mode)
            if code != RUNS:
                scores[p.ordinal] = math.inf
                if first is None or p.ordinal < first[0]:
                    first = (p.ordinal, code)
        items.append(replace(r.scores, scores=scores))
        levels.append(math.nan if first is None else float(np.max(r.scores.scores[: first[0] + 1])))
        probes.append(first is not None and first[1] == PROBE)
    return Composed(assemble(items), np.array(levels), np.array(probes), decider.probes_run - before)


# --------------------------------------------------------------------------- sums over test sets


@dataclass(frozen=True)
class Stops:
    """Test episodes stopped, by what stopped them first (sums over test sets)."""

    score: float = 0.0
    safecommit: float = 0.0
    probe: float = 0.0
    alone: float = 0.0
    """Stopped by the score alone (no SafeCommit)."""

    def plus(self, alone: ScoredCorpus, composed: Composed, lam: np.ndarray, test: np.ndarray) -> Stops:
        with np.errstate(invalid="ignore"):
            by_sc = composed.sc_level[test] <= lam[:, None]  # NaN (no SafeCommit stop) compares False
        over = alone.max_score[test] > lam[:, None]
        return Stops(
            self.score + float((over & ~by_sc).sum()),
            self.safecommit + float(by_sc.sum()),
            self.probe + float((by_sc & composed.sc_probe[test]).sum()),
            self.alone + float(over.sum()),
        )


@dataclass(frozen=True)
class Sums:
    """One row at one α: the score alone, the composed gate per mode at the score's λ̂, and the composed gate
    per mode at λ̂ calibrated on its own loss (``tuned``)."""

    alone: Cell = field(default_factory=Cell)
    composed: dict[str, Cell] = field(default_factory=dict)
    stops: dict[str, Stops] = field(default_factory=dict)
    tuned: dict[str, Cell] = field(default_factory=dict)

    def plus(
        self,
        alone: ScoredCorpus,
        composed: dict[str, Composed],
        lam: np.ndarray,
        test: np.ndarray,
        tuned: dict[str, np.ndarray],
    ) -> Sums:
        return Sums(
            self.alone.plus(alone, lam, test),
            {m: self.composed.get(m, Cell()).plus(c.scored, lam, test) for m, c in composed.items()},
            {m: self.stops.get(m, Stops()).plus(alone, c, lam, test) for m, c in composed.items()},
            {m: self.tuned.get(m, Cell()).plus(c.scored, tuned[m], test) for m, c in composed.items()},
        )

    def summary(self) -> dict[str, Any]:
        sets = max(self.alone.sets, 1)
        first = next(iter(self.stops.values()), Stops())
        out: dict[str, Any] = {"alone": {**self.alone.summary(), "stopped": first.alone / sets}}
        for mode, cell in self.composed.items():
            stops = self.stops[mode]
            out[mode] = {
                **cell.summary(),
                "stopped": (stops.score + stops.safecommit) / sets,
                "stopped_by_safecommit": stops.safecommit / sets,
                "stopped_by_probe": stops.probe / sets,
            }
            out[f"{mode}_own_lambda"] = self.tuned[mode].summary()
        return out


__all__ = ["MODES", "PROBE", "REFUSED", "RUNS", "Answers", "Composed", "Decider", "Replay", "Stops", "Sums", "compose"]
