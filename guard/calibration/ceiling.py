"""The ceiling of a feature set: the best harm-free success any function of the features can reach.

A scorer sees a proposal only through its feature vector, so every scorer with a threshold is a
*gate*: a set ``G`` of feature vectors it refuses.  Replayed with gate ``G``, an episode stops at
its first proposal whose vector is in ``G`` (or that the pipeline refuses before scoring); an
out-of-scope proposal is never scored and always runs.  So, for a corpus:

* a harmful episode ``i`` is charged iff no vector of its proposals up to and including its first
  ledger-charging step is in ``G`` — call that set ``H_i``;
* a harm-free, successful episode ``j`` keeps its success iff no vector of any of its proposals is
  in ``G`` — call that set ``S_j``;
* no other episode can add harm-free success at any ``G``.

The ceiling at level α is the largest number of kept successes over gates whose CRC-corrected
in-sample loss is feasible, ``Σ_i charged_i + 1 <= α (n + 1)`` (the rule CARB applies, with the same
integer arithmetic, :func:`guard.calibration.crc.max_harmful_allowed`).  Two families of gates:

* **any function**: ``G`` is any set of observed vectors;
* **monotone function** (what a non-negative weighted sum, or any scorer that never lowers a score
  when a feature grows, can express): ``G`` is an up-set of the product order, ``v in G`` and
  ``v <= w`` component-wise imply ``w in G``.  Conversely every up-set is the gate of a monotone
  function (its indicator), so the family is exactly right.

**Exact method.**  Both are 0/1 integer programs solved to optimality (HiGHS through
``scipy.optimize.milp``, relative gap 0; the objective is a count, so the optimum is exact): a
binary ``x_v`` per distinct vector (refuse ``v``), ``y_i <= Σ_{v in H_i} x_v`` (harmful episode
``i`` stopped), ``z_j <= 1 - x_v`` for ``v in S_j`` (success ``j`` kept), ``Σ_i y_i >= n_harmful -
allowed``, maximise ``Σ_j z_j``; the monotone program adds ``x_v <= x_w`` for every observed pair
``v < w``.  Episodes with the same set are merged into one variable with a count, and each set is
reduced to the vectors no other of its members makes redundant, which keeps the programs small.
A test checks both against brute force over every gate on small hand-made corpora.

The result is in-sample (the gate is chosen on the corpus it is scored on), so it bounds from
above what a scorer fitted on part of a corpus and calibrated on another part reaches on a third;
a gap between a fitted row and the ceiling is the scorer's, a gap between the ceiling and a target
is the evidence's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.calibration import crc
from guard.calibration.replay import ScoredCorpus
from guard.errors import CalibrationError

BoolMatrix = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class GateProblem:
    """A corpus reduced to what a gate decides: vector sets of charged and of successful episodes.

    ``harm_sets[i]`` holds the vector ids of harmful episode ``i`` up to its first harm (``None``: a
    pipeline refusal stops it whatever the gate); ``success_sets[j]`` those of a harm-free
    successful episode (``None``: a refusal stops it, it can never count).
    """

    vectors: BoolMatrix
    harm_sets: tuple[frozenset[int] | None, ...]
    success_sets: tuple[frozenset[int] | None, ...]
    n: int

    @property
    def no_guard(self) -> int:
        """Harm-free successes with no gate at all (the ratio's denominator)."""
        return len(self.success_sets)


@dataclass(frozen=True, slots=True)
class Ceiling:
    """The best harm-free success count of each family at one α, and the no-guard count."""

    alpha: float
    n: int
    no_guard: int
    monotone: int | None
    any_function: int | None

    def ratio(self, family: str) -> float:
        """Harm-free success of ``family`` ("monotone" or "any_function") over no guard's."""
        value = self.monotone if family == "monotone" else self.any_function
        return float("nan") if value is None or not self.no_guard else value / self.no_guard


def gate_problem(corpus: ScoredCorpus, columns: Sequence[int] | None = None) -> GateProblem:
    """The gate problem of a replayed corpus on its recorded features and tool identity (its
    :meth:`~guard.calibration.replay.ScoredCorpus.design` columns; optionally only ``columns``)."""
    if corpus.features is None or corpus.in_scope is None or corpus.first_harm is None:
        raise CalibrationError("this scored corpus has no recorded features; score it with replay first")
    design = corpus.design()
    features = design if columns is None else design[:, list(columns)]
    refused = ~np.isfinite(corpus.scores)
    scored = corpus.in_scope & ~refused
    vectors, inverse = np.unique(features[scored], axis=0, return_inverse=True)
    vid = np.full(corpus.scores.size, -1, dtype=np.int64)
    vid[scored] = inverse.ravel()
    harm: list[frozenset[int] | None] = []
    success: list[frozenset[int] | None] = []
    for i in range(corpus.n):
        lo, hi = int(corpus.offsets[i]), int(corpus.offsets[i + 1])
        first = int(corpus.first_harm[i])
        end = first + 1 if first >= 0 else hi
        if first < 0 and not corpus.utility[i]:
            continue
        steps = slice(lo, end)
        ids = None if refused[steps].any() else frozenset(int(v) for v in vid[steps] if v >= 0)
        (harm if first >= 0 else success).append(ids)
    return GateProblem(vectors.astype(bool), tuple(harm), tuple(success), corpus.n)


def outcome(problem: GateProblem, gate: frozenset[int]) -> tuple[int, int]:
    """``(charged, kept)`` under ``gate``: harmful episodes charged, successes kept."""
    charged = sum(1 for s in problem.harm_sets if s is not None and not (s & gate))
    kept = sum(1 for s in problem.success_sets if s is not None and not (s & gate))
    return charged, kept


def is_up_set(vectors: BoolMatrix, gate: frozenset[int]) -> bool:
    """Whether ``gate`` is closed upwards among ``vectors`` (component-wise order)."""
    return all(w in gate for v in gate for w in range(len(vectors)) if bool((vectors[v] <= vectors[w]).all()))


def below_pairs(vectors: npt.NDArray[np.generic]) -> list[tuple[int, int]]:
    """Every pair ``(v, w)`` of distinct rows with ``v <= w`` component-wise (numeric or boolean)."""
    x = vectors.astype(np.float64)
    pairs: list[tuple[int, int]] = []
    for v in range(len(x)):
        above = np.flatnonzero((x[v] <= x).all(axis=1))
        pairs += [(v, int(w)) for w in above if w != v]
    return pairs


def ceiling(problem: GateProblem, alpha: float) -> Ceiling:
    """The exact monotone and any-function ceilings at ``alpha`` (None: nothing is feasible)."""
    try:
        allowed = crc.max_harmful_allowed(problem.n, alpha)
    except CalibrationError:
        return Ceiling(alpha, problem.n, problem.no_guard, None, None)
    mono = solve(problem, allowed, monotone=True)
    anyf = solve(problem, allowed, monotone=False)
    return Ceiling(alpha, problem.n, problem.no_guard, mono, anyf)


def solve(problem: GateProblem, allowed: int, *, monotone: bool) -> int | None:
    """The largest number of kept successes with at most ``allowed`` charged harmful episodes."""
    from guard.calibration._ceiling_milp import solve_milp

    fixed_charged = sum(1 for s in problem.harm_sets if s is not None and not s)
    if fixed_charged > allowed:
        return None
    harm = _counted(s for s in problem.harm_sets if s)
    success = _counted(s for s in problem.success_sets if s is not None)
    pairs = below_pairs(problem.vectors) if monotone else []
    if monotone:
        harm = _merge(harm, problem.vectors)
        success = _merge(success, problem.vectors)
    free = sum(c for s, c in success.items() if not s)
    need = sum(harm.values()) - (allowed - fixed_charged)
    return free + solve_milp(len(problem.vectors), harm, {s: c for s, c in success.items() if s}, need, pairs)


def _counted(sets: Iterable[frozenset[int]]) -> dict[frozenset[int], int]:
    out: dict[frozenset[int], int] = {}
    for s in sets:
        out[s] = out.get(s, 0) + 1
    return out


def _merge(counts: dict[frozenset[int], int], vectors: BoolMatrix) -> dict[frozenset[int], int]:
    """``counts`` with every set replaced by its maximal members, equal sets merged."""
    out: dict[frozenset[int], int] = {}
    for members, count in counts.items():
        key = _maximal(members, vectors)
        out[key] = out.get(key, 0) + count
    return out


def _maximal(members: frozenset[int], vectors: BoolMatrix) -> frozenset[int]:
    """The members no other member lies strictly above.  An up-set holds a member of a set iff it
    holds one of its maximal members (it holds everything above what it holds)."""
    ids = sorted(members)
    x = vectors[ids].astype(np.float64)
    above = (x[:, None, :] <= x[None, :, :]).all(axis=2) & ~(x[:, None, :] == x[None, :, :]).all(axis=2)
    return frozenset(v for a, v in enumerate(ids) if not above[a].any())


__all__ = ["Ceiling", "GateProblem", "below_pairs", "ceiling", "gate_problem", "is_up_set", "outcome", "solve"]
