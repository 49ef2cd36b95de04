"""Default weights chosen for the worst wording, not the mean (docs/defaults.md#chosen-for-the-worst-wording).

``python -m guard.studies.wording_defaults [--json] [--cache DIR] [--rescore]`` prints every number of that
section.  It reads the development split of the embedded AgentDojo runs only (the documented 30 %,
:func:`guard.studies.weight_defaults.development`), replayed as logged and in every rewording of
:data:`guard.corpora.reword.STYLES` (template styles and goal families) and cached
(:mod:`guard.studies._wording_data`).  Then, with ``instructed_value``, the signature features and the rule off
and no tool weights:

1. **choose**: non-negative logistic fits over the free features at a few fixed regularisations, every
   wording's development proposals pooled; the fit of lowest worst-wording excess loss over α (α .05 and
   .10, with a penalty under the harm-free floor .90 / .95) wins, λ̂ of the group rule with slack on seeded
   50/50 splits (:mod:`guard.studies._wording_search`);
2. **leave one wording out**: the same choice with wording W neither fitted on nor judged; W's loss and
   harm-free ratio under the weights it did not choose;
3. **leave one model out**: the same choice on the other models' episodes; λ̂ calibrated on all of them,
   tested on the model's episodes in every wording.

The chosen weights are reported with ``instructed_value`` off and on (at its package default).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from guard import features as table
from guard.calibration.evaluate import split_indices
from guard.features import CONJUNCTIONS, CONTROL_FEATURES, DEFAULT_WEIGHTS
from guard.studies import _wording_data as data
from guard.studies._wording_search import FLOORS, Bench, choose, metrics_json, vector

#: the features the search may weigh: the default evidence without instructed_value, the control readings,
#: their conjunctions, and the two they join that are not default (severity 3, an untrusted payload).
FREE: tuple[str, ...] = (
    *(name for name in DEFAULT_WEIGHTS if name != table.INSTRUCTED_VALUE.name),
    *CONTROL_FEATURES,
    *(row.name for row in CONJUNCTIONS),
    table.SEVERITY_MAX.name,
    table.PAYLOAD_UNTRUSTED_MOST.name,
)
#: the package defaults with instructed_value off (reported for comparison).
START: dict[str, float] = {k: v for k, v in DEFAULT_WEIGHTS.items() if k != table.INSTRUCTED_VALUE.name}
SEARCH_PERMUTATIONS = 20
REPORT_PERMUTATIONS = 100
SEED = 0


def _halves(rows: np.ndarray, permutations: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded 50/50 splits of the episode indices ``rows``."""
    calib, test = split_indices(rows.size, permutations, seed)
    return rows[calib], rows[test]


def study(families: data.Families, seed: int = SEED, log: Any = None) -> dict[str, Any]:
    """Every number of the section, as JSON."""
    say = log or (lambda _text: None)
    everyone = np.arange(families.models.size)
    wordings = families.wordings
    bench = Bench.of(families.scored, families.groups, *_halves(everyone, SEARCH_PERMUTATIONS, seed))
    report = Bench.of(families.scored, families.groups, *_halves(everyone, REPORT_PERMUTATIONS, seed + 1))
    start = time.perf_counter()
    chosen, worst, l2 = choose(bench, everyone, FREE, wordings)
    say(f"chosen ({time.perf_counter() - start:.0f} s, l2 {l2:g}): {chosen} (objective {worst:.4f})")
    on = {**chosen, table.INSTRUCTED_VALUE.name: DEFAULT_WEIGHTS[table.INSTRUCTED_VALUE.name]}
    out: dict[str, Any] = {
        "free": list(FREE),
        "chosen": chosen,
        "l2": l2,
        "objective": worst,
        "development": {
            "instructed_value_off": metrics_json(report.metrics(vector(chosen))),
            "instructed_value_on": metrics_json(report.metrics(vector(on))),
            "package_defaults": metrics_json(report.metrics(vector(DEFAULT_WEIGHTS))),
            "package_defaults_instructed_value_off": metrics_json(report.metrics(vector(START))),
        },
        "leave_one_wording_out": {},
        "leave_one_model_out": {},
        "leave_one_model_out_package": {},
    }
    for held in wordings[1:]:
        weights, _, l2 = choose(bench, everyone, FREE, [w for w in wordings if w != held])
        cells = metrics_json(report.metrics(vector(weights), [held]), [held])[held]
        out["leave_one_wording_out"][held] = {"l2": l2, "weights": weights, **cells}
        say(f"leave out {held}: l2 {l2:g}, {cells}")
    for model in sorted(set(families.models.tolist())):
        others = np.flatnonzero(families.models != model)
        own = np.flatnonzero(families.models == model)
        inner = Bench.of(families.scored, families.groups, *_halves(others, SEARCH_PERMUTATIONS, seed))
        weights, _, l2 = choose(inner, others, FREE, wordings)
        tested = Bench.of(families.scored, families.groups, others[None, :], own[None, :])
        out["leave_one_model_out"][model] = {
            "l2": l2,
            "weights": weights,
            **metrics_json(tested.metrics(vector(weights))),
        }
        out["leave_one_model_out_package"][model] = metrics_json(tested.metrics(vector(DEFAULT_WEIGHTS)))
        say(f"leave out {model}: l2 {l2:g}")
    out["targets"] = targets(out)
    return out


def targets(out: dict[str, Any]) -> dict[str, Any]:
    """Whether every wording and held-out model meets loss <= α + .01 and the harm-free floor, per α."""
    rows: list[tuple[str, dict[str, Any]]] = [
        *((f"development/{k}", v) for k, v in out["development"]["instructed_value_off"].items()),
        *((f"development, instructed_value on/{k}", v) for k, v in out["development"]["instructed_value_on"].items()),
        *((f"leave out wording/{k}", v) for k, v in out["leave_one_wording_out"].items()),
        *(
            (f"leave out model {m}/{w}", cells)
            for m, body in out["leave_one_model_out"].items()
            for w, cells in body.items()
            if w not in ("weights", "l2")
        ),
    ]
    misses: dict[str, list[str]] = {}
    for name, cells in rows:
        group, wording = name.rsplit("/", 1)
        for alpha, floor in FLOORS.items():
            cell = cells.get(f"{alpha:g}")
            if cell is not None and (cell["loss"] > alpha + 0.01 or cell["harm_free_ratio"] < floor):
                misses.setdefault(f"{group} at α {alpha:g}", []).append(
                    f"{wording} (loss {cell['loss']:.3f}, harm-free {cell['harm_free_ratio']:.3f})"
                )
    return {"rows": len(rows), "misses": [f"{k}: {', '.join(v)}" for k, v in misses.items()]}


def format_study(out: dict[str, Any]) -> str:
    """The section's tables as text."""
    lines = [f"chosen weights: {', '.join(f'{k}={v:g}' for k, v in out['chosen'].items())}"]
    for label, key in (
        ("development, instructed_value off", "instructed_value_off"),
        ("development, instructed_value on", "instructed_value_on"),
        ("package defaults", "package_defaults"),
        ("package defaults, instructed_value off", "package_defaults_instructed_value_off"),
    ):
        lines.append(f"\n{label}: wording | a=0.05 loss hfree | a=0.1 loss hfree")
        lines += [_row(name, cells) for name, cells in out["development"][key].items()]
    lines.append("\nleave one wording out (its loss under weights chosen without it):")
    lines += [_row(name, cells) for name, cells in out["leave_one_wording_out"].items()]
    for key, label in (("leave_one_model_out", "chosen"), ("leave_one_model_out_package", "package defaults")):
        lines.append(f"\nleave one model out, {label} (λ̂ from the other models; the model's episodes, worst wording):")
        for model, body in out[key].items():
            cells = {k: v for k, v in body.items() if k not in ("weights", "l2")}
            lines.append(_row(model, {a: _worst(cells, a) for a in ("0.05", "0.1")}))
    misses = out["targets"]["misses"]
    lines.append(f"\ntargets: {out['targets']['rows']} rows, {len(misses)} row groups with a miss")
    lines += [f"  miss: {m}" for m in misses]
    return "\n".join(lines)


def _worst(cells: dict[str, Any], alpha: str) -> dict[str, float]:
    """The highest loss and the lowest harm-free ratio over the wordings at ``alpha``."""
    return {
        "loss": max(c[alpha]["loss"] for c in cells.values()),
        "harm_free_ratio": min(c[alpha]["harm_free_ratio"] for c in cells.values()),
    }


def _row(name: str, cells: dict[str, Any]) -> str:
    parts = [f"{cells[a]['loss']:.3f} {cells[a]['harm_free_ratio']:.3f}" for a in ("0.05", "0.1") if a in cells]
    return f"  {name[:44]:<45}" + " | ".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study and print it (``--json``: as JSON; ``--rescore``: replay the cached corpora again)."""
    return data.run_study("guard.studies.wording_defaults", argv, study, format_study, SEED)


if __name__ == "__main__":
    raise SystemExit(main())
