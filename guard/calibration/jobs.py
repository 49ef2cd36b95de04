"""Calibration and evaluation jobs: corpus → scores per selector → artifact / results.

I/O-free orchestration; the CLI handles files and printing.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from guard.artifact import build_artifact
from guard.calibration import crc, group_crc, ltt, two_level
from guard.calibration.evaluate import DEFAULT_ALPHAS, METHOD_SELECTORS, CarbRule, run_protocol
from guard.calibration.group_jobs import group_rule
from guard.calibration.monitor import artifact_monitor_field
from guard.calibration.replay import EpisodeScores as ScoredEpisode
from guard.calibration.replay import ScoredCorpus
from guard.calibration.slack import slack_threshold
from guard.errors import CalibrationError, CorpusError
from guard.jsonio import encode_float
from guard.ledger import LedgerLabels
from guard.policy import Policy, SelectorName
from guard.progress import Progress
from guard.records import Episode

EACH: tuple[str, ...] = (
    "claude-3-7-sonnet-20250219",
    "command-r-plus",
    "gpt-4o-2024-05-13",
    "meta-llama_Llama-3-70b-chat-hf",
    "meta-llama_Llama-3.3-70B-Instruct",
    "all",
)
SELECTOR_NAMES: tuple[SelectorName, ...] = (
    "gcarb",
    "full_prefix",
    "fixed_window",
    "ledger_current",
    "random_equal_size",
)


@dataclass
class Corpus:
    """A loaded corpus: the episodes used for calibration and what was left out."""

    name: str
    episodes: list[Episode]
    n_dropped: int
    excluded: int = 0
    notes: list[str] = field(default_factory=list)
    embedded: bool = False
    """The embedded AgentDojo corpus (its artifacts are shipped; see :func:`_monitor_field`)."""
    policy_of: Mapping[str, Policy] | None = None
    """Episode id → policy (episodes files); None: AgentDojo episodes, whose policy follows from the suite."""
    labels_of: Mapping[str, LedgerLabels] = field(default_factory=dict)
    """Episode id → ledger labels from a labels file (episodes files only)."""
    tags_of: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Episode id → its free ``meta.tags`` (episodes files; ``--group-by tags.NAME``)."""

    def policies(self, selector: SelectorName) -> list[Policy]:
        """The distinct policies of the corpus, switched to ``selector``, by name."""
        if self.policy_of is None:
            return [suite_policy(s, selector) for s in sorted({e.meta.suite for e in self.episodes})]
        by_name = {p.name: p for p in self.policy_of.values()}
        return [by_name[name].with_selector(selector) for name in sorted(by_name)]


def load_corpus(
    runs: str | None, corpus: str | None, *, progress: bool = False, exclude_models: Sequence[str] = ()
) -> Corpus:
    """AgentDojo episodes from a runs folder or the embedded corpus (user-task runs only)."""
    from guard.corpora import agentdojo

    if runs is not None:
        report = agentdojo.load_runs(runs, progress=progress)
        name = runs
    else:
        name = corpus or "all"
        if name != "all" and name not in agentdojo.EMBEDDED_MODELS:
            raise CorpusError(f"unknown corpus {name!r}; embedded: all, {', '.join(agentdojo.EMBEDDED_MODELS)}")
        report = _embedded(name)
    unknown = set(exclude_models) - {e.meta.model for e in report.episodes}
    if unknown:
        raise CorpusError(f"--exclude-model: no episodes of {sorted(unknown)} in {name}")
    if exclude_models:
        name = f"{name} without {', '.join(exclude_models)}"
    kept = [e for e in report.episodes if not agentdojo.is_injection_goal_run(e) and e.meta.model not in exclude_models]
    if not kept:
        raise CorpusError(f"{name}: no usable episodes (user-task runs) found")
    notes = [f"{len(report.failed)} file(s) failed to parse: " + "; ".join(f"{p}: {r}" for p, r in report.failed[:5])]
    return Corpus(
        name=name,
        episodes=kept,
        n_dropped=len(report.dropped_error) + len(report.failed),
        excluded=len(report.episodes) - len(kept),
        notes=notes if report.failed else [],
        embedded=runs is None,
    )


def _embedded(name: str) -> Any:
    """The embedded corpus of one model, or of all (their episodes, in model order): each model is read once
    per process, so the pooled corpus holds the very episode objects of the per-model corpora."""
    from guard.corpora import agentdojo

    if name != "all":
        return _embedded_model(name)
    parts = [_embedded_model(m) for m in agentdojo.EMBEDDED_MODELS]
    return agentdojo.LoadReport(
        tuple(e for p in parts for e in p.episodes),
        tuple(d for p in parts for d in p.dropped_error),
        tuple(f for p in parts for f in p.failed),
    )


@lru_cache(maxsize=8)
def _embedded_model(name: str) -> Any:
    from guard.corpora import agentdojo

    return agentdojo.load_embedded(name)


@lru_cache(maxsize=64)
def suite_policy(suite: str, selector: SelectorName) -> Policy:
    from guard.corpora import agentdojo

    return agentdojo.load_suite_policy(suite).with_selector(selector)


def load_episodes_corpus(policies: Sequence[Policy], episodes: str, labels: str | None = None) -> Corpus:
    """A deployment's corpus: an episodes file read under its policies, plus an optional labels file.

    Every episode must use only tools its policy declares; every label must name an episode of the
    file and charge an executed proposal.  Nothing is dropped.
    """
    from guard.corpora.episodes import read_episodes
    from guard.ledger.labels import attach, read_labels

    read = read_episodes(episodes, policies)
    attached = attach(read_labels(labels), read.episodes, labels) if labels else {}
    return Corpus(
        name=episodes,
        episodes=list(read.episodes),
        n_dropped=0,
        policy_of=dict(read.policy_of),
        labels_of=attached,
        tags_of=dict(read.tags),
    )


def check_alpha_feasible(corpus: Corpus, alphas: Sequence[float], *, split: bool = False) -> None:
    """CalibrationError before any scoring when α < 1/(n+1) (``split``: n is the calibration half)."""
    n = len(corpus.episodes) // 2 if split else len(corpus.episodes)
    for alpha in alphas:
        try:
            crc.max_harmful_allowed(n, alpha)
        except CalibrationError as exc:
            where = f"the calibration half ({n} of {len(corpus.episodes)} episodes)" if split else corpus.name
            raise CalibrationError(f"{where}: {exc}") from None


_NO_LABELS = LedgerLabels()


def corpus_functions(
    corpus: Corpus, selector: SelectorName
) -> tuple[Callable[[Episode], Policy], Callable[[Episode], LedgerLabels]]:
    """The policy (switched to ``selector``) and the ledger labels of each episode of ``corpus``."""
    from guard.corpora import agentdojo

    if corpus.policy_of is None:
        return policy_for(selector), agentdojo.episode_ledger_labels
    policy_of, labels_of = corpus.policy_of, corpus.labels_of
    switched: dict[str, Policy] = {}

    def policy(episode: Episode) -> Policy:
        base = policy_of[episode.episode_id]
        if base.name not in switched:
            switched[base.name] = base.with_selector(selector)
        return switched[base.name]

    return policy, lambda episode: labels_of.get(episode.episode_id, _NO_LABELS)


def policy_for(selector: SelectorName) -> Callable[[Episode], Policy]:
    """The suite policy of an episode, switched to ``selector``."""
    return lambda episode: suite_policy(episode.meta.suite, selector)


def score_selectors(
    episodes: Sequence[Episode],
    selectors: Sequence[SelectorName],
    *,
    progress: bool = False,
    workers: int = 1,
    dask_scheduler: str | None = None,
    corpus: Corpus | None = None,
) -> tuple[dict[str, ScoredCorpus], float]:
    """Score the corpus under every selector (one pass per episode); return the arrays and seconds.

    ``workers`` > 1 scores in local processes, ``dask_scheduler`` on a running dask.distributed
    scheduler; both give arrays identical to the single-process run.  ``corpus`` (an episodes-file
    corpus) supplies each episode's policy and labels; without it they are AgentDojo's.
    """
    from guard.calibration.parallel import score_selectors_rows
    from guard.calibration.replay import assemble
    from guard.corpora import agentdojo

    if corpus is not None:
        policy_fn, labels_fn = corpus_functions(corpus, selectors[0])
    else:
        policy_fn, labels_fn = policy_for(selectors[0]), agentdojo.episode_ledger_labels
    start = time.perf_counter()
    reuse = corpus is None or corpus.policy_of is None  # AgentDojo episodes: suite policies and labels
    reused = _reused(episodes, selectors) if reuse else {}
    missing = [e for i, e in enumerate(episodes) if i not in reused]
    label = f"{corpus.name}: scoring episodes" if corpus is not None else "scoring episodes"
    with Progress(len(missing), label, enabled=progress and bool(missing)) as tick:
        fresh = iter(
            score_selectors_rows(
                missing, policy_fn, labels_fn, selectors, workers=workers, dask_scheduler=dask_scheduler, progress=tick
            )
        )
    rows: list[dict[str, ScoredEpisode]] = [
        reused[i] if i in reused else dict(next(fresh)) for i in range(len(episodes))
    ]
    if reuse:
        _remember(episodes, rows)
    out: dict[str, ScoredCorpus] = {name: assemble([row[name] for row in rows]) for name in selectors}
    return out, time.perf_counter() - start


def _reused(episodes: Sequence[Episode], selectors: Sequence[str]) -> dict[int, dict[str, ScoredEpisode]]:
    """Position → scores of the episodes already replayed under every one of ``selectors``."""
    out: dict[int, dict[str, ScoredEpisode]] = {}
    for i, episode in enumerate(episodes):
        hit = _SCORED.get(id(episode))  # the entry keeps its episode alive, so no other object has its id
        if hit is not None and set(selectors) <= set(hit[1]):
            out[i] = {name: hit[1][name] for name in selectors}
    return out


def _remember(episodes: Sequence[Episode], rows: list[dict[str, ScoredEpisode]]) -> None:
    if len(_SCORED) > _SCORED_MAX:
        _SCORED.clear()
    for episode, row in zip(episodes, rows, strict=True):
        hit = _SCORED.get(id(episode))
        merged = dict(hit[1]) if hit is not None else {}
        merged.update(row)
        _SCORED[id(episode)] = (episode, merged)


#: per-episode scores of AgentDojo episodes (suite policies, AgentDojo labels) already replayed in this
#: process, keyed by the episode object (kept alive here), per selector: the pooled corpus reuses the
#: per-model corpora's episodes (:func:`_embedded`), so each episode is replayed once.
_SCORED: dict[int, tuple[Episode, dict[str, ScoredEpisode]]] = {}
_SCORED_MAX = 50_000


def calibrate(
    corpus: Corpus,
    *,
    alpha: float,
    selector: SelectorName,
    rule: str = "carb",
    delta: float = 0.1,
    command: Sequence[str] = (),
    progress: bool = False,
    workers: int = 1,
    dask_scheduler: str | None = None,
    group_by: str | None = None,
    slack: float = 0.0,
    group_alpha: two_level.GroupAlpha = two_level.AUTO,
) -> dict[str, Any]:
    """Calibrate λ̂ on the whole corpus and return the artifact body (``group_by``: the group rule over that key,
    two-level at α_g from ``group_alpha`` unless it is ``alpha``, the pure group rule; ``slack``: lower λ̂ while
    the calibration episodes keep ``1 - slack`` of their harm-free successes)."""
    keys = _checked_group_keys(corpus, group_by, alpha, rule, group_alpha) if group_by is not None else None
    scored, _ = score_selectors(
        corpus.episodes,
        [selector],
        progress=progress,
        workers=workers,
        dask_scheduler=dask_scheduler,
        corpus=corpus,
    )
    data = scored[selector]
    if group_by is None or keys is None:
        chosen = ltt.threshold_by_rule(data.scores, data.harm_level, rule, alpha, delta)
        risk_fields = ltt.rule_fields(chosen.rule, alpha=alpha, n=data.n, calibration_risk=chosen.risk)
        group_fields: dict[str, Any] = {}
    else:
        chosen, risk_fields, group_fields = group_rule(data, keys, alpha, group_by, group_alpha)
    policies = corpus.policies(selector)
    threshold = slack_threshold(chosen.threshold, data.harm_level, data.max_score, data.utility, slack)
    slack_fields = {"utility_slack": slack, "threshold_before_slack": encode_float(chosen.threshold)} if slack else {}
    return build_artifact(
        policies,
        alpha=alpha,
        n=data.n,
        threshold=threshold,
        calibration_risk=chosen.risk,
        grid=chosen.grid,
        rule=chosen.rule,
        risk_fields=risk_fields,
        calibration_fingerprint=data.fingerprint(),
        command=shlex.join(["carbguard", *command]),
        extra={
            "corpus": corpus.name,
            "n_dropped": corpus.n_dropped,
            **group_fields,
            **slack_fields,
            **_monitor_field(corpus, data, threshold),
        },
    )


def _checked_group_keys(
    corpus: Corpus, group_by: str, alpha: float, rule: str, group_alpha: two_level.GroupAlpha
) -> list[Hashable]:
    """The episodes' group keys; CalibrationError for another rule than CRC or where α_g has no group rule (below
    the floor 1/(G+1), or G < 2 with ``auto``)."""
    group_crc.check_group_by(group_by, agentdojo=corpus.policy_of is None, rule=rule)
    keys = group_crc.episode_group_keys(corpus.episodes, group_by, corpus.policy_of, corpus.tags_of)
    try:
        two_level.group_level(alpha, len(set(keys)), group_alpha)
    except CalibrationError as exc:
        raise CalibrationError(f"{corpus.name}, grouped by {group_by}: {exc}") from None
    return keys


def _monitor_field(corpus: Corpus, data: ScoredCorpus, threshold: float) -> dict[str, Any]:
    """The calibration statistics ``carbguard monitor`` needs (the artifact's ``monitor`` field)."""
    return {"monitor": artifact_monitor_field(data.offsets, data.scores, threshold)}


def evaluate(
    corpus: Corpus,
    *,
    alphas: Sequence[float] = DEFAULT_ALPHAS,
    permutations: int = 200,
    seed: int = 0,
    progress: bool = False,
    workers: int = 1,
    dask_scheduler: str | None = None,
    also: Callable[[dict[str, ScoredCorpus]], dict[str, Any]] | None = None,
    group_by: str | None = None,
    slack: float = 0.0,
    group_alpha: two_level.GroupAlpha = two_level.AUTO,
) -> dict[str, Any]:
    """The protocol of docs/studies.md for every method; the JSON of the evaluation issue.  ``group_by``,
    ``group_alpha`` and ``slack``: the CARB methods calibrate as ``carbguard calibrate`` does with them (the
    group rule where it applies, :meth:`CarbRule.grouped`, plain CRC elsewhere)."""
    for alpha in alphas:
        crc.alpha_fraction(alpha)
    if permutations < 1:
        raise CalibrationError(f"permutations must be >= 1, got {permutations}")
    scored, score_seconds = score_selectors(
        corpus.episodes,
        SELECTOR_NAMES,
        progress=progress,
        workers=workers,
        dask_scheduler=dask_scheduler,
        corpus=corpus,
    )
    start = time.perf_counter()
    with Progress(len(alphas), f"{corpus.name}: calibrating (all methods)", enabled=progress or None) as tick:
        groups = (
            group_crc.episode_group_keys(corpus.episodes, group_by, corpus.policy_of, corpus.tags_of)
            if group_by
            else None
        )
        rule = CarbRule(groups=groups, slack=slack, group_alpha=group_alpha)
        rows = run_protocol(scored, alphas=alphas, permutations=permutations, seed=seed, tick=tick, rule=rule)
    fitted = also(scored) if also is not None else None  # e.g. the three-way protocol on the same scores
    return {
        **({"fitted": fitted} if fitted is not None else {}),
        "corpus": corpus.name,
        "n_episodes": len(corpus.episodes),
        "n_dropped": corpus.n_dropped,
        "n_excluded_injection_goal_runs": corpus.excluded,
        "permutations": permutations,
        "rule": rule.describe(alphas),
        "methods": ["no_guard", "stop_all", "step_crc", *METHOD_SELECTORS],
        "results": [row.to_json() for row in rows],
        "seconds": {"scoring": round(score_seconds, 3), "calibration": round(time.perf_counter() - start, 3)},
    }
