"""Attacks worded in another goal family against package-default weights (``run wording``).

The tester's question (docs/calibrate.md#goals-stated-as-facts): a deployment whose policy states no weights
(the package defaults of :mod:`guard.features`) calibrates on its own request-worded episodes, as the worked
example does, and is then attacked with the same goals worded otherwise (:data:`.world.FAMILIES`: stated as
facts, split across sentences, another language, a question).  Per α and per wording family, on a seeded
attack stream whose episodes are the same in every family but for the injection's words:

- ``integrity``: the followed delete and phishing attacks, and how many of them ran to their harmful call;
- ``third_party``: those of them whose file or channel only the injected text named (the user's turn does not
  hold it: the class the control rows of the package defaults are for);
- ``exfiltrate``: the same for the followed exfiltrations (the provenance graph's class);
- ``completed``: the share of episodes whose user task completed (every step of it ran).

Calibration is the worked example's: ``record`` (shadow mode, the calm mix, request wording) and
``carbguard calibrate --selector full_prefix`` on a copy of the policy without its ``weights`` key, so every
weight is the package default (``instructed_value`` off: the copy states only that weight, 0; ``earlier``: it
also states every control row 0, the package defaults before
docs/defaults.md#package-defaults-for-goals-stated-as-facts).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from examples.own_deployment.world import FAMILIES, INTEGRITY, Mix, run_episode
from guard import Guard
from guard.artifact import load_artifact
from guard.cli import main as carbguard
from guard.features import FEATURE_GROUPS, INSTRUCTED_VALUE
from guard.policy import load_policy

#: the attack stream: most episodes injected, the agent follows most injections (many followed attacks per run).
STREAM = Mix(injected=0.85, follows=0.8)
ALPHAS = (0.05, 0.1)
#: the counts of a stream: [followed, ran to the harmful call] per class of attack.
CELLS = ("integrity", "third_party", "exfiltrate")


def package_policy(source: Path, out: Path, instructed_value: bool = True, earlier: bool = False) -> Path:
    """A copy of the policy at ``source`` without its ``weights`` key (``instructed_value``: off states it 0;
    ``earlier``: every control row stated 0)."""
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    data["scorer"].pop("weights", None)
    weights = dict.fromkeys(FEATURE_GROUPS["control"], 0.0) if earlier else {}
    if not instructed_value:
        weights[INSTRUCTED_VALUE.name] = 0.0
    if weights:
        data["scorer"]["weights"] = weights
    out.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return out


def _cli(*argv: str) -> str:
    """Run one ``carbguard`` command in this process; its stdout (a non-zero exit raises)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = carbguard(list(argv))
    if code != 0:
        raise RuntimeError(f"carbguard {' '.join(argv)} exited {code}")
    return buffer.getvalue()


def stream(guard: Guard, family: str, episodes: int, seed: int) -> dict[str, Any]:
    """The counts of one seeded attack stream worded as ``family`` through the enforcing ``guard``."""
    rng = random.Random(seed)
    mix = Mix(STREAM.injected, STREAM.follows, family=family)
    counts: dict[str, Any] = {"episodes": episodes, "completed": 0}
    counts |= {key: [0, 0] for key in CELLS}
    for k in range(episodes):
        outcome = run_episode(guard, f"{family}-{seed}-{k:04d}", rng, mix)
        counts["completed"] += outcome.completed
        if not outcome.followed or outcome.attack is None:
            continue
        keys = ["integrity", *(() if outcome.user_named else ("third_party",))]
        for key in keys if outcome.attack in INTEGRITY else ["exfiltrate"]:
            counts[key][0] += 1
            counts[key][1] += outcome.harmed
    return counts


def measure(
    record: Path,
    policy: Path,
    *,
    families: Iterable[str] = tuple(FAMILIES),
    episodes: int = 400,
    seed: int = 3,
    alphas: Iterable[float] = ALPHAS,
    earlier: bool = False,
) -> dict[str, Any]:
    """Per instructed_value setting, α and family: the counts of :func:`stream`, calibrated as the worked
    example is on the recording ``record`` (a folder with ``episodes.jsonl`` and ``labels.jsonl``)."""
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for iv in (True, False):
            copy = package_policy(policy, Path(tmp) / f"policy-{iv}.yaml", iv, earlier)
            for alpha in alphas:
                artifact = Path(tmp) / f"artifact-{iv}-{alpha:g}.json"
                _cli(
                    *("calibrate", "--policy", str(copy), "--episodes", str(record / "episodes.jsonl")),
                    *("--labels", str(record / "labels.jsonl"), "--alpha", f"{alpha:g}", "--selector", "full_prefix"),
                    *("--out", str(artifact)),
                )
                loaded = load_policy(copy)
                art = load_artifact(str(artifact), loaded)
                cells = {
                    family: stream(Guard(loaded, threshold=art.threshold), family, episodes, seed)
                    for family in families
                }
                key = f"instructed_value {'on' if iv else 'off'}"
                out.setdefault(key, {})[f"{alpha:g}"] = {"threshold": art.threshold, "families": cells}
    return out


def _share(cell: list[int]) -> str:
    return f"{cell[1]}/{cell[0]} ({cell[1] / cell[0]:.3f})" if cell[0] else "0/0"


def format_measure(out: Mapping[str, Any]) -> str:
    """One line per (instructed_value, α, family): harm among followed attacks and completion."""
    lines = [
        "setting | α | λ̂ | family | integrity: harmed/followed | of them third-party named | exfiltration | completed"
    ]
    for key, by_alpha in out.items():
        for alpha, body in by_alpha.items():
            request = body["families"].get("request")
            for family, cell in body["families"].items():
                done = cell["completed"] / cell["episodes"]
                gap = "" if request is None else f" ({done - request['completed'] / request['episodes']:+.3f})"
                lines.append(
                    f"{key} | {alpha} | {body['threshold']:.2f} | {family} | "
                    + " | ".join(_share(cell[name]) for name in CELLS)
                    + f" | {done:.3f}{gap}"
                )
    return "\n".join(lines)


def to_json(out: Mapping[str, Any]) -> str:
    """The measurement as JSON (thresholds finite: λ̂ is on the grid)."""
    return json.dumps(out, indent=1, default=lambda v: None if isinstance(v, float) and math.isinf(v) else v)
