"""The commit–probe–fallback controller (docs/safecommit.md): it only sequences the pure functions.

One decision, :func:`step`, in order:

1. keep the worlds with ``s(ω) ≤ κ`` (scores are never recomputed);
2. replay the probe results seen so far: each one consumes budget; a parsed outcome removes the
   worlds that contradict it, an unparseable one changes nothing;
3. certify over the retained safety-equivalence classes → ``execute`` the best certified action;
4. else, if budget remains, pick the probe of best expected shrinkage per cost → ``probe``;
5. else fall back (``defer`` / ``escalate`` / ``abstain``, see :mod:`.fallback`).

A runtime calls :func:`step` again with the longer history once a probe result arrives;
:meth:`SafeCommitController.run` does that loop with a callback or a list of outcomes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from guard.errors import InputError
from guard.safecommit.certificate import SafetyMap, certify, compress, safety_matrix, signature
from guard.safecommit.conformal import retained_mask
from guard.safecommit.fallback import choose_fallback
from guard.safecommit.probes import (
    best_blocked_action,
    expected_shrinkage,
    outcome_matrix,
    parse_outcome,
    select_probe,
)
from guard.safecommit.types import (
    Action,
    ProbeRecord,
    ProbeSpec,
    SafeCommitLog,
    SafeCommitResult,
    SafetyClass,
    Verdict,
    World,
)

BoolArray = npt.NDArray[np.bool_]
History = Sequence[tuple[str, object]]
Observer = Callable[[ProbeSpec], object] | Sequence[object]


def _unique_names(kind: str, names: Sequence[str]) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise InputError(f"{kind} name {name!r} appears twice; names must be unique")
        seen.add(name)


def _check_settings(kappa: float, budget: int, eta: float) -> None:
    if isinstance(kappa, bool) or not isinstance(kappa, (int, float)) or math.isnan(kappa):
        raise InputError(f"kappa must be a number (not NaN), got {kappa!r}")
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise InputError(f"budget must be an int >= 0, got {budget!r}")
    if isinstance(eta, bool) or not isinstance(eta, (int, float)) or not eta >= 0:
        raise InputError(f"eta must be a number >= 0, got {eta!r}")


def _replay(
    retained: BoolArray, probes: Sequence[ProbeSpec], labels: npt.NDArray[np.intp], history: History
) -> tuple[BoolArray, tuple[ProbeRecord, ...]]:
    """Apply the observed probe outcomes in order; unparseable ones leave the set unchanged."""
    index = {p.name: i for i, p in enumerate(probes)}
    records = []
    for entry in history:
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            raise InputError(f"a probe result must be a (probe name, outcome) pair, got {entry!r:.80}")
        name, raw = entry
        if name not in index:
            raise InputError(f"probe result for unknown probe {name!r}; known: {sorted(index)}")
        probe = probes[index[name]]
        parsed = parse_outcome(probe, raw)
        records.append(ProbeRecord(probe=name, outcome=parsed, raw_type=type(raw).__name__))
        if parsed is not None:
            retained = retained & (labels[index[name]] == probe.labels.index(parsed))
    return retained, tuple(records)


def _classes(worlds: Sequence[World], gamma: BoolArray, keep: BoolArray) -> tuple[SafetyClass, ...]:
    idx: list[int] = np.flatnonzero(keep).tolist()
    merged = compress(gamma[idx], [worlds[i].weight for i in idx])
    return tuple(
        SafetyClass(
            signature=signature(merged.gamma[c]),
            worlds=tuple(worlds[idx[m]].name for m in members),
            weight=float(merged.weights[c]),
        )
        for c, members in enumerate(merged.members)
    )


def step(
    worlds: Sequence[World],
    actions: Sequence[Action],
    safe: SafetyMap,
    kappa: float,
    probes: Sequence[ProbeSpec] = (),
    *,
    budget: int = 2,
    eta: float = 0.0,
    history: History = (),
) -> SafeCommitResult:
    """One SafeCommit decision after the probe results in ``history`` (see module docstring)."""
    _check_settings(kappa, budget, eta)
    for kind, items in (("world", worlds), ("action", actions), ("probe", probes)):
        _unique_names(kind, [x.name for x in items])
    names = tuple(w.name for w in worlds)
    gamma = safety_matrix(worlds, actions, safe)
    labels = outcome_matrix(probes, names)
    scored = retained_mask(np.array([w.score for w in worlds], dtype=np.float64), kappa)
    retained, records = _replay(scored, probes, labels, history)
    cert = certify(worlds, actions, gamma, retained)
    log: dict[str, Any] = {
        "kappa": float(kappa),
        "actions": tuple(a.name for a in actions),
        "worlds": names,
        "retained": tuple(n for n, k in zip(names, retained, strict=True) if k),
        "excluded_by_score": tuple(n for n, k in zip(names, scored, strict=True) if not k),
        "removed_by_probes": tuple(n for n, s, k in zip(names, scored, retained, strict=True) if s and not k),
        "classes": _classes(worlds, gamma, retained),
        "certificate": cert,
        "probes_run": records,
        "budget": budget,
    }
    if cert.chosen is not None:
        return _result("execute", "certified", log, action=cert.chosen)
    return _probe_or_fall_back(worlds, actions, gamma, retained, probes, labels, budget - len(records), eta, log)


def _probe_or_fall_back(
    worlds: Sequence[World],
    actions: Sequence[Action],
    gamma: BoolArray,
    retained: BoolArray,
    probes: Sequence[ProbeSpec],
    labels: npt.NDArray[np.intp],
    budget_left: int,
    eta: float,
    log: dict[str, Any],
) -> SafeCommitResult:
    """Nothing is certified: the probe of best Δ/c for the best-blocked action, else a fallback."""
    weights = np.array([w.weight for w in worlds], dtype=np.float64)
    utility = np.array([a.utility for a in actions], dtype=np.float64)
    blocked = int(best_blocked_action(gamma, retained, weights, utility)) if actions else -1
    stop = "budget_spent" if budget_left <= 0 else "no_probes" if not probes else None
    if stop is None and blocked >= 0:
        shrink = expected_shrinkage(gamma, retained, weights, labels, blocked)
        pick = int(select_probe(shrink, [p.cost for p in probes], eta))
        if pick >= 0:
            log.update(expected_shrinkage=float(shrink[pick]), probe_value=float(shrink[pick] / probes[pick].cost))
            return _result("probe", "probe_selected", log, probe=probes[pick].name)
    log["probe_stop"] = stop or "no_valuable_probe"
    kept: list[int] = np.flatnonzero(retained).tolist()
    blocking = [worlds[i] for i in kept if blocked >= 0 and not gamma[i, blocked]]
    verdict, reason = choose_fallback([worlds[i] for i in kept], gamma[kept], blocking)
    return _result(verdict, reason, log)


def _result(
    verdict: Verdict, reason: str, log: dict[str, Any], *, action: str | None = None, probe: str | None = None
) -> SafeCommitResult:
    full = SafeCommitLog(verdict=verdict, reason=reason, probe=probe, **log)
    return SafeCommitResult(verdict=verdict, action=action, probe=probe, log=full)


@dataclass(frozen=True)
class SafeCommitController:
    """A deployment's SafeCommit settings: κ (from calibration), probe budget and η."""

    kappa: float
    budget: int = 2
    eta: float = 0.0

    def __post_init__(self) -> None:
        _check_settings(self.kappa, self.budget, self.eta)

    def step(
        self,
        worlds: Sequence[World],
        actions: Sequence[Action],
        safe: SafetyMap,
        probes: Sequence[ProbeSpec] = (),
        history: History = (),
    ) -> SafeCommitResult:
        """One decision after ``history``: see :func:`step`."""
        return step(worlds, actions, safe, self.kappa, probes, budget=self.budget, eta=self.eta, history=history)

    def run(
        self,
        worlds: Sequence[World],
        actions: Sequence[Action],
        safe: SafetyMap,
        probes: Sequence[ProbeSpec] = (),
        observe: Observer = (),
    ) -> SafeCommitResult:
        """Step, run each chosen probe through ``observe``, step again, until not ``probe``.

        ``observe`` is a callback ``probe -> raw outcome`` or a list of raw outcomes consumed
        in order; when the list runs out the pending ``probe`` verdict is returned.
        """
        source = _outcome_source(observe)
        history: list[tuple[str, object]] = []
        while True:
            result = self.step(worlds, actions, safe, probes, history)
            if result.verdict != "probe" or result.probe is None:
                return result
            spec = next(p for p in probes if p.name == result.probe)
            got = source(spec)
            if not got:
                return result
            history.append((result.probe, got[0]))


def _outcome_source(observe: Observer) -> Callable[[ProbeSpec], tuple[object, ...]]:
    """A function giving ``(raw,)`` for a probe, or ``()`` once a list of outcomes runs out."""
    if callable(observe):
        call = observe
        return lambda spec: (call(spec),)
    queue = iter(list(observe))
    return lambda spec: tuple(item for item, _ in zip(queue, range(1), strict=False))


__all__ = ["History", "Observer", "SafeCommitController", "step"]
