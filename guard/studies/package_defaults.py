"""Package-default weights of the control rows (docs/defaults.md#package-defaults-for-goals-stated-as-facts).

``python -m guard.studies.package_defaults [--json] [--cache DIR] [--rescore] [--workers N]`` prints every number
of that section.  It reads the same development corpora as :mod:`guard.studies.wording_defaults` (the documented
30 % development split of the embedded AgentDojo runs, replayed as logged and in every rewording, cached by
:mod:`guard.studies._wording_data`) and keeps the package defaults' scale: every nonzero default weight of the
feature table stays fixed (``instructed_value`` off while choosing), and only the control rows in :data:`FREE`
move, each over :data:`GRID`.

1. **choose**: coordinate descent from all-zero over :data:`FREE` (rows in table order, values in grid order,
   a move kept only when it lowers the objective), until a sweep moves nothing; the objective is the wording
   study's (:func:`guard.studies._wording_search.objective`: the worst wording's excess loss over α with a
   penalty under the harm-free floor, λ̂ of the group rule on seeded 50/50 splits) at α .05 plus at α .10
   (:func:`summed`);
2. **leave one goal family out**: the same choice with goal family F neither chosen on nor judged; F's loss and
   harm-free ratio under the weights it did not choose.

``control_untrusted_only`` is not free: it fires on a call the user asked for when the user named the record
that supplied the value ("pay the bill in bill.txt"), and a package default must not add score there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from guard import features as table
from guard.calibration.evaluate import split_indices
from guard.features import DEFAULT_WEIGHTS
from guard.studies import _wording_data as data
from guard.studies._wording_search import FLOORS, Bench, Metric, metrics_json, objective, vector

#: the rows the choice may weigh: the control readings and conjunctions that never fire on a call whose
#: control value the user named, or whose source record the user named.
FREE: tuple[str, ...] = (
    table.CONTROL_UNNAMED_SOURCE.name,
    *(row.name for row in table.CONJUNCTIONS),
)
#: each free row's candidate weights (the old scale: the heaviest default weighs 0.52).
GRID: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6)
#: the fixed weights: the package defaults of the default group, instructed_value off.
FIXED: dict[str, float] = {k: v for k, v in DEFAULT_WEIGHTS.items() if k != table.INSTRUCTED_VALUE.name}
GOAL_PREFIX = "goal_"
PERMUTATIONS = {"search": 20, "report": 100}
SEED = 0
MAX_SWEEPS = 10


def package_weights() -> dict[str, float]:
    """What a policy that states no weights gets: every nonzero weight of the feature table."""
    return {row.name: row.weight for row in table.TABLE if row.weight}


def bench(families: data.Families, permutations: int, seed: int) -> Bench:
    """A bench over every development episode, with ``permutations`` seeded 50/50 splits."""
    everyone = np.arange(families.models.size)
    calib, test = split_indices(everyone.size, permutations, seed)
    return Bench.of(families.scored, families.groups, everyone[calib], everyone[test])


def summed(metrics: Mapping[tuple[str, float], Metric], wordings: Sequence[str]) -> float:
    """The wording study's objective (:func:`guard.studies._wording_search.objective`) at each α, summed over α:
    a move that helps at one α and costs nothing at the other counts (the worst over both α would not see it)."""
    return sum(objective({k: m for k, m in metrics.items() if k[1] == alpha}, wordings) for alpha in FLOORS)


def descend(on: Bench, wordings: Sequence[str]) -> tuple[dict[str, float], float]:
    """The free rows' weights chosen by coordinate descent over :data:`GRID` (see the module), and the objective."""
    free = dict.fromkeys(FREE, 0.0)

    def judge(trial: Mapping[str, float]) -> float:
        return summed(on.metrics(vector({**FIXED, **trial}), wordings), wordings)

    best = judge(free)
    for _ in range(MAX_SWEEPS):
        moved = False
        for name in FREE:
            for value in GRID:
                if value == free[name]:
                    continue
                score = judge({**free, name: value})
                if score < best - 1e-9:
                    best, free[name], moved = score, value, True
        if not moved:
            break
    return {k: v for k, v in free.items() if v}, best


def study(families: data.Families, seed: int = SEED, log: Any = None) -> dict[str, Any]:
    """Every number of the section, as JSON."""
    say = log or (lambda _text: None)
    wordings = list(families.wordings)
    search = bench(families, PERMUTATIONS["search"], seed)
    report = bench(families, PERMUTATIONS["report"], seed + 1)
    chosen, worst = descend(search, wordings)
    say(f"chosen: {chosen} (objective {worst:.4f})")
    instructed = {table.INSTRUCTED_VALUE.name: DEFAULT_WEIGHTS[table.INSTRUCTED_VALUE.name]}
    rows = {
        "chosen_instructed_value_off": {**FIXED, **chosen},
        "chosen_instructed_value_on": {**FIXED, **chosen, **instructed},
        "earlier_defaults": dict(DEFAULT_WEIGHTS),
        "earlier_defaults_instructed_value_off": dict(FIXED),
    }
    out: dict[str, Any] = {
        "free": list(FREE),
        "grid": list(GRID),
        "fixed": FIXED,
        "chosen": chosen,
        "objective": worst,
        "development": {key: metrics_json(report.metrics(vector(w))) for key, w in rows.items()},
        "leave_one_family_out": {},
    }
    for held in (w for w in wordings if w.startswith(GOAL_PREFIX)):
        weights, _ = descend(search, [w for w in wordings if w != held])
        cells = metrics_json(report.metrics(vector({**FIXED, **weights}), [held]), [held])[held]
        out["leave_one_family_out"][held] = {"weights": weights, **cells}
        say(f"leave out {held}: {weights}")
    return out


def _worst(cells: Mapping[str, Any], alpha: str) -> tuple[float, float]:
    return max(c[alpha]["loss"] for c in cells.values()), min(c[alpha]["harm_free_ratio"] for c in cells.values())


def _row(name: str, cells: Mapping[str, Any]) -> str:
    parts = [f"{cells[a]['loss']:.3f} {cells[a]['harm_free_ratio']:.3f}" for a in ("0.05", "0.1")]
    return f"  {name[:44]:<45}" + " | ".join(parts)


def format_study(out: Mapping[str, Any]) -> str:
    """The section's numbers as text."""
    lines = [f"chosen control weights: {', '.join(f'{k}={v:g}' for k, v in out['chosen'].items()) or 'none'}"]
    lines.append(f"objective {out['objective']:.4f}; free rows {', '.join(out['free'])}")
    lines.append("\ndevelopment split, worst wording: weights | a=0.05 loss hfree | a=0.1 loss hfree")
    for key, cells in out["development"].items():
        worst = {a: dict(zip(("loss", "harm_free_ratio"), _worst(cells, a), strict=True)) for a in ("0.05", "0.1")}
        lines.append(_row(key, worst))
        lines.append(_row("  as logged", cells[data.AS_IS]))
    lines.append("\nleave one goal family out (its loss under weights chosen without it):")
    for held, body in out["leave_one_family_out"].items():
        lines.append(_row(held, body) + f"  [{', '.join(f'{k}={v:g}' for k, v in body['weights'].items())}]")
    misses = [
        f"{held} at α {alpha}"
        for held, body in out["leave_one_family_out"].items()
        for alpha, floor in ((f"{a:g}", f) for a, f in FLOORS.items())
        if body[alpha]["loss"] > float(alpha) + 0.01 or body[alpha]["harm_free_ratio"] < floor
    ]
    lines.append(f"\ntargets (loss <= α + .01, harm-free floor): {len(misses)} misses {', '.join(misses)}".rstrip())
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and print it (``--json``: as JSON; ``--rescore``: replay the cached corpora again)."""
    return data.run_study("guard.studies.package_defaults", argv, study, format_study, SEED)


if __name__ == "__main__":
    raise SystemExit(main())
