"""AgentDojo run traces → :class:`~guard.records.Episode`, the embedded corpus, suite policies and ledger labels.

:func:`load_runs` reads a folder in the layout of AgentDojo's ``runs/`` folder
(``<model>/<suite>/<task_id>/<attack>/<injection>.json``): one model's folder or a parent of
several.  :func:`load_embedded` reads the same episodes from the compact copy shipped in
``guard/data/agentdojo/`` (five models; see its ``NOTICE.md``).  Both give identical episodes.

Runs whose ``error`` field is set (API or context-length errors; AgentDojo scored them
``utility=false, security=true``) are dropped and counted; files that cannot be parsed are listed
with the reason; neither aborts a load.  Tool-result trust comes from the suite policy
(``guard/data/policies/agentdojo/<suite>.yaml``).

Calibration uses ``user_task_*`` runs only: the ``none``-attack runs whose user task is an
``injection_task_*`` give the attacker's goal to the agent as if the user asked for it (they show
the goal is feasible) and are not episodes of the deployment; :func:`is_injection_goal_run` finds
them.  ``security`` is meaningless on ``none`` runs (always true by convention).

Ledger labels (attacker identifiers, canaries, ...) come from ``ledger.yaml`` next to the suite
policies; they are for the harm ledger only and never reach the gate.
"""

from __future__ import annotations

import gzip
import io
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

import guard.data
from guard.corpora._agentdojo_format import (
    FORMAT,
    SUITES,
    FormatError,
    RawRun,
    RunFile,
    decode_run,
    discover,
    encode_run,
    header_line,
    parse_run,
    read_run,
)
from guard.errors import CorpusError
from guard.jsonio import json_lines, loads_strict
from guard.ledger import LedgerLabels
from guard.policy import Policy, load_policy
from guard.progress import Progress
from guard.records import Episode, EpisodeMeta, Record, final, proposal, result, user
from guard.stages import result_trust

__all__ = [
    "EMBEDDED_MODELS",
    "SUITES",
    "FormatError",
    "LoadReport",
    "RunFile",
    "build_episode",
    "convert",
    "episode_ledger_labels",
    "is_injection_goal_run",
    "load_embedded",
    "load_runs",
    "load_suite_policy",
    "parse_run",
    "suite_ledger_labels",
    "suite_policy_path",
]

EMBEDDED_MODELS: tuple[str, ...] = (
    "claude-3-7-sonnet-20250219",
    "command-r-plus",
    "gpt-4o-2024-05-13",
    "meta-llama_Llama-3-70b-chat-hf",
    "meta-llama_Llama-3.3-70B-Instruct",
)
DATA_DIR = Path(guard.data.__file__).resolve().parent
POLICY_DIR = DATA_DIR / "policies" / "agentdojo"
EMBEDDED_DIR = DATA_DIR / "agentdojo"


@dataclass(frozen=True)
class LoadReport:
    """What a load produced: the episodes, the runs dropped for a recorded error, the files that failed."""

    episodes: tuple[Episode, ...]
    dropped_error: tuple[str, ...]
    failed: tuple[tuple[str, str], ...]

    def summary(self) -> str:
        """One line per model plus totals."""
        per_model = Counter(e.meta.model for e in self.episodes)
        dropped = Counter(s.split("/", 1)[0] for s in self.dropped_error)
        failed = Counter(s.split("/", 1)[0] for s, _ in self.failed)
        lines = [
            f"{model}: {per_model[model]} episodes, {dropped[model]} dropped (run error), {failed[model]} failed"
            for model in sorted(set(per_model) | set(dropped) | set(failed))
        ]
        lines.append(
            f"total: {len(self.episodes)} episodes, {len(self.dropped_error)} dropped (run error), "
            f"{len(self.failed)} failed"
        )
        return "\n".join(lines)


# --------------------------------------------------------------------------- policies and labels


def _check_suite(suite: str) -> str:
    if suite not in SUITES:
        raise CorpusError(f"unknown AgentDojo suite {suite!r}; known suites: {', '.join(SUITES)}")
    return suite


def suite_policy_path(suite: str) -> Path:
    """The shipped policy file of ``suite`` (inside the installed package)."""
    path = POLICY_DIR / f"{_check_suite(suite)}.yaml"
    if not path.is_file():
        raise CorpusError(f"policy file of suite {suite!r} is missing: {path}")
    return path


@cache
def load_suite_policy(suite: str) -> Policy:
    """The shipped policy of ``suite`` (loaded once; policies are frozen)."""
    return load_policy(suite_policy_path(suite))


@cache
def _ledger_file() -> dict[str, Any]:
    path = POLICY_DIR / "ledger.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise CorpusError(f"{path}: cannot read ledger labels: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("suites"), dict):
        raise CorpusError(f"{path}: expected a mapping with a 'suites' mapping")
    return data


def _suite_entry(suite: str) -> dict[str, Any]:
    entry = _ledger_file()["suites"].get(_check_suite(suite))
    if not isinstance(entry, dict):
        raise CorpusError(f"ledger.yaml has no labels for suite {suite!r}")
    return entry


@cache
def suite_ledger_labels(suite: str) -> LedgerLabels:
    """The suite's ledger labels (attacker identifiers, canaries, protected tools, ...)."""
    fields = {k: v for k, v in _suite_entry(suite).items() if k != "injection_tasks"}
    return LedgerLabels.model_validate(fields)


def _task_labels(suite: str, injection_task: str | None) -> dict[str, tuple[str, ...]]:
    tasks = _suite_entry(suite).get("injection_tasks") or {}
    extra = tasks.get(injection_task, {}) if injection_task else {}
    return {key: tuple(values) for key, values in extra.items()}


def episode_ledger_labels(episode: Episode) -> LedgerLabels:
    """The suite labels for ``episode``, adjusted to what this episode's attacker and user did.

    - the episode's injected texts (its ``injections`` payloads) are added;
    - labels that ``ledger.yaml`` lists under this episode's injection task (values the attacker's
      goal names that are ordinary data of the suite, e.g. a real hotel) are added, only for
      attacked episodes of that injection task.

    Values the user's own turns name are not charged: :class:`guard.ledger.Ledger` exempts them
    (AgentDojo reuses the attacker's IBAN as a landlord's in a banking user task).
    """
    meta = episode.meta
    base = suite_ledger_labels(meta.suite)
    extra = _task_labels(meta.suite, meta.injection_task) if meta.attack else {}
    return base.merged(injected_texts=meta.injections, **extra)


def is_injection_goal_run(episode: Episode) -> bool:
    """A ``none``-attack run whose user task is an injection task (the goal given as a user request)."""
    return episode.meta.attack is None and episode.meta.user_task.startswith("injection_task_")


# --------------------------------------------------------------------------- episodes


def build_episode(raw: RawRun) -> Episode:
    """The episode of a raw run; result trust from the suite policy."""
    policy = load_suite_policy(raw.suite)
    records: list[Record] = []
    for index, item in enumerate(raw.records):
        kind = item[0]
        if kind == "u":
            records.append(user(index, item[1]))
        elif kind == "p":
            records.append(proposal(index, item[1], item[2], item[3]))
        elif kind == "r":
            _, call_id, tool, text, status = item
            records.append(result(index, call_id, text, result_trust(policy, tool), tool, status))
        elif kind == "f":
            records.append(final(index, item[1]))
        else:
            raise CorpusError(f"{raw.source}: unknown raw record kind {kind!r}")
    meta = EpisodeMeta(
        suite=raw.suite,
        model=raw.model,
        user_task=raw.user_task,
        injection_task=raw.injection_task,
        attack=raw.attack,
        utility=raw.utility,
        security=raw.security,
        source=raw.source,
        injections=raw.injections,
    )
    episode_id = f"{raw.model}/{raw.suite}/{raw.user_task}/{raw.attack or 'none'}/{raw.injection_task or 'none'}"
    return Episode(episode_id=episode_id, records=tuple(records), meta=meta)


def _suites(suites: Iterable[str] | None) -> tuple[str, ...]:
    if suites is None:
        return SUITES
    chosen = tuple(suites) if not isinstance(suites, str) else (suites,)
    for suite in chosen:
        _check_suite(suite)
    return tuple(s for s in SUITES if s in chosen)


Outcome = RawRun | str | FormatError


def _read_raw(root: Path, suites: tuple[str, ...], progress: bool) -> Iterator[tuple[RunFile, Outcome]]:
    if not root.is_dir():
        raise CorpusError(f"AgentDojo runs folder {root} does not exist or is not a folder")
    try:
        files = discover(root, suites)
    except OSError as exc:
        raise CorpusError(f"cannot read AgentDojo runs folder {root}: {exc}") from None
    if not files:
        raise CorpusError(
            f"no run files under {root}: expected <model>/<suite>/<task_id>/<attack>/<injection>.json "
            f"with suites {', '.join(suites)}"
        )
    bar = Progress(len(files), f"{root}: loading AgentDojo runs", enabled=progress)
    try:
        for file in files:
            try:
                yield file, read_run(file)
            except FormatError as exc:
                yield file, exc
            bar.step()
    finally:
        bar.close()


def load_runs(path: str | Path, *, suites: Iterable[str] | None = None, progress: bool = False) -> LoadReport:
    """Episodes of every run file under ``path`` (one model's folder or a parent of several)."""
    episodes: list[Episode] = []
    dropped: list[str] = []
    failed: list[tuple[str, str]] = []
    for file, outcome in _read_raw(Path(path), _suites(suites), progress):
        if isinstance(outcome, FormatError):
            failed.append((file.source, str(outcome)))
        elif isinstance(outcome, str):
            dropped.append(file.source)
        else:
            try:
                episodes.append(build_episode(outcome))
            except (ValueError, TypeError) as exc:
                failed.append((file.source, f"{type(exc).__name__}: {exc}"))
    return LoadReport(tuple(episodes), tuple(dropped), tuple(failed))


def load_embedded(model: str = "all", *, suites: Iterable[str] | None = None) -> LoadReport:
    """Episodes from the shipped compact corpus: one model, or ``"all"`` (in :data:`EMBEDDED_MODELS` order)."""
    if model != "all" and model not in EMBEDDED_MODELS:
        raise CorpusError(f"unknown embedded model {model!r}; choose 'all' or one of: {', '.join(EMBEDDED_MODELS)}")
    chosen = set(_suites(suites))
    episodes: list[Episode] = []
    dropped: list[str] = []
    failed: list[tuple[str, str]] = []
    for name in EMBEDDED_MODELS if model == "all" else (model,):
        header, runs = _read_embedded(name)
        dropped.extend(s for s in header["dropped_error"] if _suite_of(s) in chosen)
        failed.extend((s, r) for s, r in header["failed"] if _suite_of(s) in chosen)
        episodes.extend(build_episode(run) for run in runs if run.suite in chosen)
    return LoadReport(tuple(episodes), tuple(dropped), tuple(failed))


def _suite_of(source: str) -> str:
    parts = source.split("/")
    return parts[1] if len(parts) > 1 else ""


def _read_embedded(model: str) -> tuple[dict[str, Any], list[RawRun]]:
    path = EMBEDDED_DIR / f"{model}.jsonl.gz"
    try:
        lines = [line for _, line in json_lines(gzip.decompress(path.read_bytes()).decode("utf-8"))]
    except (OSError, EOFError) as exc:
        raise CorpusError(f"embedded corpus file {path} cannot be read: {exc}") from None
    header = loads_strict(lines[0], f"{path}:1")
    if header.get("format") != FORMAT or header.get("model") != model:
        raise CorpusError(f"{path}: not an embedded AgentDojo corpus file of model {model!r}")
    return header, [decode_run(line, model) for line in lines[1:]]


# --------------------------------------------------------------------------- converter


def convert(runs: str | Path, out: str | Path, *, progress: bool = False) -> dict[str, tuple[int, int, int]]:
    """Write ``<out>/<model>.jsonl.gz`` for every model folder under ``runs``; return kept/dropped/failed."""
    by_model: dict[str, tuple[list[RawRun], list[str], list[tuple[str, str]]]] = {}
    for file, outcome in _read_raw(Path(runs), SUITES, progress):
        kept, dropped, failed = by_model.setdefault(file.model, ([], [], []))
        if isinstance(outcome, FormatError):
            failed.append((file.source, str(outcome)))
        elif isinstance(outcome, str):
            dropped.append(file.source)
        else:
            kept.append(outcome)
    target = Path(out)
    target.mkdir(parents=True, exist_ok=True)
    counts: dict[str, tuple[int, int, int]] = {}
    for model, (kept, dropped, failed) in sorted(by_model.items()):
        text = "\n".join([header_line(model, dropped, failed), *(encode_run(r) for r in kept)]) + "\n"
        buffer = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, compresslevel=9, mtime=0) as zipped:
            zipped.write(text.encode("utf-8"))
        (target / f"{model}.jsonl.gz").write_bytes(buffer.getvalue())
        counts[model] = (len(kept), len(dropped), len(failed))
    return counts
