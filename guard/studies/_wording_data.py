"""The scored development corpora of the wording-defaults study: as logged and in every rewording, cached.

The development split is the documented one (:func:`guard.studies.weight_defaults.development`: the pooled
embedded runs, ``default_rng(0).random(n) < 0.3``).  Each corpus is replayed once with the ``gcarb`` selector
under its suite's policy; its recorded features are then re-scored under any weights without replaying
(:func:`guard.calibration.fit.rescore`).  The cache is a pickle keyed on the feature table, the rewording
families and the seed; pass ``rescore`` to build it again.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from guard.calibration.jobs import Corpus, load_corpus, score_selectors
from guard.calibration.replay import ScoredCorpus
from guard.corpora.reword import STYLES
from guard.features import FEATURES, TABLE
from guard.policy import SelectorName
from guard.studies._shift_reworded import reworded_corpus
from guard.studies.shift import group_keys
from guard.studies.weight_defaults import development

AS_IS = "as is"
SELECTOR: SelectorName = "gcarb"


@dataclass(frozen=True, slots=True)
class Families:
    """The development episodes' scored corpora by wording (``as is`` and each style or goal family), with each
    episode's model and (suite, injection task) group."""

    scored: dict[str, ScoredCorpus]
    models: np.ndarray
    groups: list[tuple[str, str]]

    @property
    def wordings(self) -> tuple[str, ...]:
        """Every wording, ``as is`` first."""
        return tuple(self.scored)


def cache_key(seed: int) -> str:
    """A digest of what the cached arrays depend on: the table's rows, the rewordings and the seed."""
    rows = [(r.name, r.group, r.evidence, r.all_of) for r in TABLE]
    text = repr((rows, sorted(STYLES), seed))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build(seed: int = 0, *, progress: bool = False, workers: int = 1) -> Families:
    """Replay the development episodes as logged and in every rewording of :data:`STYLES`."""
    episodes = development(load_corpus(None, "all").episodes)
    corpus = Corpus("development", episodes, 0)
    base, _ = score_selectors(episodes, [SELECTOR], progress=progress, workers=workers)
    reworded, _ = reworded_corpus(corpus, tuple(STYLES), seed=seed, progress=progress, workers=workers)
    return Families(
        {AS_IS: base[SELECTOR], **reworded},
        np.array([e.meta.model for e in episodes]),
        group_keys(episodes),
    )


def load(
    cache_dir: Path, seed: int = 0, *, rescore: bool = False, progress: bool = False, workers: int = 1
) -> Families:
    """The cached families for ``seed`` (built and written on a miss, or with ``rescore``)."""
    path = cache_dir / f"wording-defaults-{cache_key(seed)}.pkl"
    if path.is_file() and not rescore:
        with path.open("rb") as handle:
            found = pickle.load(handle)  # noqa: S301 (our own cache, keyed on the code it was made by)
        if isinstance(found, Families) and all(
            v.features is not None and v.features.shape[1] == len(FEATURES) for v in found.scored.values()
        ):
            return found
    families = build(seed, progress=progress, workers=workers)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as handle:
        pickle.dump(families, handle, protocol=pickle.HIGHEST_PROTOCOL)
    tmp.replace(path)
    return families


#: the cache folder both wording studies use (one cache for both).
CACHE = Path.home() / ".cache" / "carbguard"


def options(args: list[str]) -> dict[str, Any] | None:
    """The flags of a wording study's ``main`` (no parser: every argument parser lives under guard/cli):
    ``--json``, ``--rescore``, ``--cache DIR``, ``--workers N``; None when a flag is unknown or lacks its value."""
    out: dict[str, Any] = {"json": False, "rescore": False, "cache": CACHE, "workers": 1}
    rest = iter(args)
    for flag in rest:
        if flag in ("--json", "--rescore"):
            out[flag[2:]] = True
        elif flag in ("--cache", "--workers"):
            value = next(rest, None)
            if value is None or (flag == "--workers" and not value.isdigit()):
                return None
            out[flag[2:]] = Path(value) if flag == "--cache" else int(value)
        else:
            return None
    return out


def run_study(
    module: str,
    argv: Sequence[str] | None,
    study: Callable[..., dict[str, Any]],
    show: Callable[[dict[str, Any]], str],
    seed: int,
) -> int:
    """A wording study's command: read the flags (usage on stderr and 2 when they are wrong), load the cached
    corpora, run ``study`` and print it (``--json``: as JSON)."""
    found = options(list(sys.argv[1:] if argv is None else argv))
    if found is None:
        sys.stderr.write(f"usage: python -m {module} [--json] [--rescore] [--cache DIR] [--workers N]\n")
        return 2
    quiet = found["json"]
    families = load(found["cache"], seed, rescore=found["rescore"], progress=not quiet, workers=found["workers"])
    out = study(families, seed, log=None if quiet else print)
    print(json.dumps(out, indent=1) if quiet else show(out))
    return 0
