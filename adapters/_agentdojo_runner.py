"""Re-running logged AgentDojo episodes in the real suites (see :mod:`guard.adapters.agentdojo`).

Benchmark versions are chosen per episode, injections rebuilt from the logged payloads, and every
online decision compared with the offline replay of the re-run's transcript.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from guard.adapters._agentdojo_compat import Mode, require
from guard.adapters._agentdojo_element import GuardedRun, GuardElement
from guard.adapters._agentdojo_replay import Recorder, ReplayLLM, offline_episode
from guard.decision import Decision
from guard.errors import CorpusError, PolicyError
from guard.progress import Progress
from guard.records import Episode, RecordKind
from guard.runtime import Guard

with contextlib.suppress(ImportError):  # exercised only without the extra; require reports it
    from agentdojo.agent_pipeline.agent_pipeline import AgentPipeline, load_system_message
    from agentdojo.agent_pipeline.basic_elements import InitQuery, SystemMessage
    from agentdojo.agent_pipeline.ground_truth_pipeline import GroundTruthPipeline
    from agentdojo.agent_pipeline.tool_execution import ToolsExecutionLoop, ToolsExecutor
    from agentdojo.functions_runtime import FunctionsRuntime
    from agentdojo.task_suite.load_suites import get_suite
    from agentdojo.types import get_text_content_as_str

VERSIONS: tuple[str, ...] = ("v1", "v1.1", "v1.1.1", "v1.1.2", "v1.2", "v1.2.1", "v1.2.2")
"""AgentDojo benchmark versions, oldest first."""


def _norm(text: str) -> str:
    return " ".join(text.split())


def _task(suite: Any, task_id: str) -> Any:
    if task_id.startswith("injection_task_"):
        return suite.get_injection_task_by_id(task_id)
    return suite.get_user_task_by_id(task_id)


def compatible_versions(episode: Episode) -> tuple[str, ...]:
    """The benchmark versions whose task texts match a logged episode (user prompt, injection goal)."""
    require()
    meta = episode.meta
    said = _norm(next((r.text for r in episode.records if r.kind is RecordKind.USER), ""))
    payloads = [_norm(p) for p in meta.injections]
    found = []
    for version in VERSIONS:
        suite = get_suite(version, meta.suite)
        try:
            task = _task(suite, meta.user_task)
            goal = suite.get_injection_task_by_id(meta.injection_task) if meta.injection_task else None
        except (KeyError, ValueError):
            continue
        prompt = task.GOAL if meta.user_task.startswith("injection_task_") else task.PROMPT
        if _norm(prompt) != said:
            continue
        if goal is not None and payloads and not any(_norm(goal.GOAL) in p for p in payloads):
            continue
        found.append(version)
    return tuple(found)


def choose_versions(episodes: Sequence[Episode], declared: Mapping[str, str] | None = None) -> dict[str, str]:
    """One version per episode: the declared one, else the oldest consistent with all episodes of its model."""
    declared = declared or {}
    per = {e.episode_id: compatible_versions(e) for e in episodes if e.episode_id not in declared}
    by_model: dict[str, set[str]] = {}
    for e in episodes:
        if per.get(e.episode_id):
            by_model.setdefault(e.meta.model, set(VERSIONS)).intersection_update(per[e.episode_id])
    chosen = dict(declared)
    for e in episodes:
        if e.episode_id in declared:
            continue
        shared = [v for v in VERSIONS if v in by_model.get(e.meta.model, set())]
        own = per[e.episode_id]
        if not own:
            raise CorpusError(
                f"{e.episode_id}: its user prompt / injection goal matches no AgentDojo benchmark version "
                f"({', '.join(VERSIONS)}); pass version=... explicitly"
            )
        chosen[e.episode_id] = shared[0] if shared else own[0]
    return chosen


@cache
def injection_candidates(version: str, suite_name: str, user_task: str) -> tuple[str, ...]:
    """The injection vectors the ground truth of ``user_task`` sees (AgentDojo's own rule)."""
    require()
    suite = get_suite(version, suite_name)
    task = suite.get_user_task_by_id(user_task)
    canaries = {v: f"<CANARY---{v}--->" for v in suite.get_injection_vector_defaults()}
    env = suite.load_and_inject_default_environment(canaries)
    _, _, _, responses, _ = GroundTruthPipeline(task).query(task.PROMPT, FunctionsRuntime(suite.tools), env)
    texts = [get_text_content_as_str(r["content"]) for r in responses if r["content"] is not None]
    return tuple(v for v, canary in canaries.items() if any(canary in t for t in texts))


class AgentDojoVersionWarning(UserWarning):
    """An episode is re-run in a benchmark version whose task texts do not match its log."""


def episode_injections(episode: Episode, version: str) -> dict[str, str]:
    """The ``{injection vector id: payload}`` mapping AgentDojo's ``run_task_with_pipeline`` needs.

    Rebuilt from the episode's logged payloads (``episode.meta.injections`` is the payload texts, not
    this mapping) and the vectors the user task's ground truth sees in ``version``; ``{}`` for a
    benign episode.  Raises CorpusError when payloads and vectors cannot be paired.
    """
    meta = episode.meta
    if not meta.attack or not meta.injection_task:
        return {}
    vectors = sorted(injection_candidates(version, meta.suite, meta.user_task))
    payloads = list(meta.injections)
    if len(set(payloads)) == 1:
        return dict.fromkeys(vectors, payloads[0])
    if len(payloads) == len(vectors):
        return dict(zip(vectors, payloads, strict=True))
    raise CorpusError(f"{episode.episode_id}: {len(payloads)} injection payloads for {len(vectors)} injection vectors")


# --------------------------------------------------------------------------- re-running episodes


@dataclass(frozen=True)
class EpisodeOutcome:
    """AgentDojo's verdicts for one re-run, and the online/offline comparison when guarded."""

    episode_id: str
    version: str
    attacked: bool
    utility: bool
    security: bool
    decisions: tuple[Decision, ...] = ()
    offline: tuple[Decision, ...] = ()
    compared: int = 0
    equal: int = 0
    note: str = ""
    messages: tuple[Any, ...] = field(default=(), repr=False)


def _same(a: Decision, b: Decision) -> bool:
    return dataclasses.replace(a, latency_us=0.0) == dataclasses.replace(b, latency_us=0.0)


def rerun_episode(
    episode: Episode,
    version: str,
    *,
    guard: Guard | None = None,
    mode: Mode = "deny",
    offline_guard: Guard | None = None,
    max_iters: int = 15,
) -> EpisodeOutcome:
    """Re-execute one logged episode in its real AgentDojo suite, with or without the guard.

    ``version`` should be one of :func:`compatible_versions` ``(episode)``; another one re-runs
    tasks whose texts differ from the log and warns (:class:`AgentDojoVersionWarning`).
    """
    require()
    meta = episode.meta
    matching = compatible_versions(episode)
    if version not in matching:
        warnings.warn(
            f"{episode.episode_id}: AgentDojo version {version!r} does not match its logged task texts "
            f"(matching: {', '.join(matching) or 'none'}); the re-run's verdicts are not comparable to the log",
            AgentDojoVersionWarning,
            stacklevel=2,
        )
    suite = get_suite(version, meta.suite)
    user_task = _task(suite, meta.user_task)
    injection_task = (
        suite.get_injection_task_by_id(meta.injection_task) if meta.attack and meta.injection_task else None
    )
    replay, recorder = ReplayLLM(episode), Recorder()
    element = GuardElement(guard, mode, session_id=episode.episode_id) if guard is not None else None
    loop = ToolsExecutionLoop([*([element] if element else []), ToolsExecutor(), replay], max_iters=max_iters)
    pipeline = AgentPipeline([SystemMessage(load_system_message(None)), InitQuery(), replay, loop, recorder])
    pipeline.name = "carbguard-replay"
    injections = episode_injections(episode, version)
    try:
        utility, security = suite.run_task_with_pipeline(pipeline, user_task, injection_task, injections)
    finally:
        if element is not None:
            element.close()  # the run's session_end, however the pipeline ended
    outcome = EpisodeOutcome(episode.episode_id, version, injection_task is not None, bool(utility), bool(security))
    if guard is None or element is None or not element.runs:
        return dataclasses.replace(outcome, messages=tuple(recorder.messages or ()))
    run = element.runs[-1]
    messages = run.messages if run.aborted and run.messages is not None else recorder.messages or []
    outcome = dataclasses.replace(outcome, decisions=tuple(run.decisions), messages=tuple(messages))
    return _compare(outcome, run, episode, offline_guard or guard)


def _compare(outcome: EpisodeOutcome, run: GuardedRun, episode: Episode, guard: Guard) -> EpisodeOutcome:
    """Replay the re-run's transcript offline and compare decision by decision.

    Once a probe ran online, later decisions see probe records that a replay of the transcript
    cannot have (docs/concepts.md): only the decisions before the first probed proposal are compared.
    """
    from guard.calibration.replay import replay_decisions

    meta = episode.meta
    try:
        offline_ep = offline_episode(
            outcome.messages,
            episode_id=run.session.session_id,
            suite=meta.suite,
            user_task=meta.user_task,
            injection_task=meta.injection_task if meta.attack else None,
            attack=meta.attack,
        )
        offline = tuple(replay_decisions(guard, offline_ep))
    except Exception as exc:  # noqa: BLE001 - a replay that cannot run is a disagreement, reported
        n = len(outcome.decisions)
        return dataclasses.replace(
            outcome, compared=n, equal=0, note=f"offline replay failed: {type(exc).__name__}: {exc}"
        )
    online = outcome.decisions
    notes = []
    if run.first_probe is not None:
        online = online[: run.first_probe]
        notes.append(
            f"probes ran online at proposal {run.first_probe}: later decisions not comparable (docs/concepts.md)"
        )
    # Proposals of a turn the step limit cut off are in the transcript but were never gated online;
    # every online decision must have its offline twin at the same position.
    equal = sum(_same(a, b) for a, b in zip(online, offline, strict=False))
    if len(offline) > len(outcome.decisions):
        notes.append(
            f"{len(offline) - len(outcome.decisions)} proposal(s) after the step limit were never gated online"
        )
    note = "; ".join(notes)
    return dataclasses.replace(outcome, offline=offline, compared=len(online), equal=equal, note=note)


def _episodes_of(runs_or_report: Any, suite: str) -> tuple[list[Episode], dict[str, str]]:
    """The suite's user-task episodes, and the benchmark versions that run files declare."""
    declared: dict[str, str] = {}
    if isinstance(runs_or_report, str | Path):
        from guard.corpora.agentdojo import load_runs

        root = Path(runs_or_report)
        runs_or_report = load_runs(root, suites=[suite])
        declared = _declared_versions(root, runs_or_report.episodes)
    episodes = getattr(runs_or_report, "episodes", runs_or_report)
    if not isinstance(episodes, Iterable):
        raise CorpusError(
            f"run_suite: expected a runs folder, a LoadReport or episodes, got {type(runs_or_report).__name__}"
        )
    chosen = []
    for episode in episodes:
        if not isinstance(episode, Episode):
            raise CorpusError(f"run_suite: expected Episode objects, got {type(episode).__name__}")
        if episode.meta.suite == suite and not episode.meta.user_task.startswith("injection_task_"):
            chosen.append(episode)
    return chosen, declared


def _declared_versions(root: Path, episodes: Iterable[Episode]) -> dict[str, str]:
    """``benchmark_version`` of the run files that carry one (v1.2.x runs; v1 runs have none)."""
    found = {}
    for episode in episodes:
        candidates = [root / episode.meta.source, root.parent / episode.meta.source]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            continue
        try:
            version = json.loads(path.read_text(encoding="utf-8")).get("benchmark_version")
        except (OSError, ValueError):
            continue
        if isinstance(version, str) and version in VERSIONS:
            found[episode.episode_id] = version
    return found


def _rates(outcomes: Sequence[EpisodeOutcome]) -> dict[str, float]:
    attacked = [o for o in outcomes if o.attacked]
    return {
        "utility": sum(o.utility for o in outcomes) / len(outcomes) if outcomes else 0.0,
        "attack_success": sum(o.security for o in attacked) / len(attacked) if attacked else 0.0,
    }


def run_suite(
    runs_or_report: Any,
    suite: str,
    *,
    guard_factory: Callable[[str], Guard],
    mode: Mode = "deny",
    limit: int | None = None,
    progress: bool = False,
    version: str | None = None,
    outcomes: list[tuple[EpisodeOutcome, EpisodeOutcome]] | None = None,
) -> dict[str, Any]:
    """Re-run a suite's logged episodes without and with the guard; AgentDojo's verdicts and the online/offline check.

    ``runs_or_report`` is a runs folder (read with :func:`guard.corpora.agentdojo.load_runs`), a
    ``LoadReport`` or an iterable of episodes; only ``user_task_*`` episodes of ``suite`` are used.
    The benchmark version of each episode is the oldest one whose task texts match it and all
    episodes of the same model (or ``version``).  ``guard_factory(suite)`` makes the guard; a
    second one replays the transcripts offline.  Pass a list as ``outcomes`` to receive the
    per-episode ``(without, with)`` outcomes.
    """
    require()
    if mode not in ("abort", "deny"):
        raise PolicyError(f"mode must be 'abort' or 'deny', got {mode!r}")
    if version is not None and version not in VERSIONS:
        raise ValueError(f"unknown AgentDojo benchmark version {version!r}; known: {', '.join(VERSIONS)}")
    episodes, declared = _episodes_of(runs_or_report, suite)
    episodes = episodes[: limit if limit is not None else None]
    versions = {e.episode_id: version for e in episodes} if version else choose_versions(episodes, declared)
    pairs = []
    bar = Progress(len(episodes), f"{suite}: episodes re-run", enabled=progress and bool(episodes))
    for count, episode in enumerate(episodes, start=1):
        ver = versions[episode.episode_id]
        base = rerun_episode(episode, ver)
        guarded = rerun_episode(episode, ver, guard=guard_factory(suite), mode=mode, offline_guard=guard_factory(suite))
        pairs.append((base, guarded))
        bar.update(count)
    bar.close()
    if outcomes is not None:
        outcomes.extend(pairs)
    return {
        "suite": suite,
        "episodes": len(pairs),
        "without_guard": _rates([b for b, _ in pairs]),
        "with_guard": _rates([g for _, g in pairs]),
        "decisions_compared": sum(g.compared for _, g in pairs),
        "decisions_equal": sum(g.equal for _, g in pairs),
    }
