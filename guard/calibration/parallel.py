"""Score a corpus in parallel: local processes or a running ``dask.distributed`` scheduler.

The result is identical, bit for bit and in the same order, to the single-process
``assemble([score_episode(policy_for(e), e, labels_for(e)) for e in episodes])``: every episode is
scored by the same :func:`~guard.calibration.replay.score_episode` code, only elsewhere.

What crosses a process boundary is plain data.  ``policy_for`` and ``labels_for`` run in the
calling process (they may be lambdas or closures); each chunk carries the distinct policies it
needs (frozen pydantic models pickle as data), each episode's ledger labels, and the episode as
tuples (records hold read-only mappings, which do not pickle).  The worker function is a
module-level function, so the pool works with the ``spawn`` start method too.

On a Dask cluster the workers must have the same carbguard version installed, and any file a
policy names (a SafeCommit calibration, say) must be readable at the same path.
"""

from __future__ import annotations

import multiprocessing
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from types import MappingProxyType
from typing import Any

from guard.calibration.replay import EpisodeScores, ScoredCorpus, assemble, score_episode, score_episode_selectors
from guard.errors import CalibrationError
from guard.ledger import LedgerLabels
from guard.policy import Policy, SelectorName
from guard.records import Episode, EpisodeMeta, Record, RecordKind, Trust

DASK_HINT = "pip install 'carbguard[dask]'"

WireRecord = tuple[int, str, str, str, str | None, dict[str, Any], str | None, str]
WireEpisode = tuple[str, tuple[WireRecord, ...], EpisodeMeta]
Item = tuple[int, LedgerLabels, WireEpisode]
Chunk = tuple[tuple[Policy, ...], tuple[SelectorName, ...] | None, tuple[Item, ...]]


# --------------------------------------------------------------------------- wire format


def _thaw(value: Any) -> Any:
    """A picklable copy of JSON-like ``value``: read-only mappings become dicts, sequences keep their type."""
    if isinstance(value, Mapping):
        return {key: _thaw(inner) for key, inner in value.items()}
    if isinstance(value, list):
        return [_thaw(inner) for inner in value]
    if isinstance(value, tuple):
        return tuple(_thaw(inner) for inner in value)
    return value


def episode_to_wire(episode: Episode) -> WireEpisode:
    """``episode`` as picklable tuples (see :func:`episode_from_wire`)."""
    records = tuple(
        (r.index, r.kind.value, r.trust.value, r.text, r.tool, _thaw(r.args), r.call_id, r.status)
        for r in episode.records
    )
    return episode.episode_id, records, episode.meta


def episode_from_wire(wire: WireEpisode) -> Episode:
    """The episode that :func:`episode_to_wire` took apart, equal to the original."""
    episode_id, records, meta = wire
    rebuilt = tuple(
        Record(
            index=index,
            kind=RecordKind(kind),
            trust=Trust(trust),
            text=text,
            tool=tool,
            args=MappingProxyType(args),
            call_id=call_id,
            status=status,
        )
        for index, kind, trust, text, tool, args, call_id, status in records
    )
    return Episode(episode_id, rebuilt, meta)


def _score_chunk(chunk: Chunk) -> list[Any]:
    """Worker: score one chunk (module level, so that spawned processes and Dask workers can import it)."""
    policies, selectors, items = chunk
    if selectors is None:
        return [score_episode(policies[p], episode_from_wire(w), labels) for p, labels, w in items]
    return [score_episode_selectors(policies[p], selectors, episode_from_wire(w), labels) for p, labels, w in items]


def _chunks(
    episodes: Sequence[Episode],
    policy_for: Callable[[Episode], Policy],
    labels_for: Callable[[Episode], LedgerLabels],
    selectors: tuple[SelectorName, ...] | None,
    size: int,
) -> Iterator[Chunk]:
    for start in range(0, len(episodes), size):
        policies: dict[int, tuple[int, Policy]] = {}
        items: list[Item] = []
        for episode in episodes[start : start + size]:
            policy = policy_for(episode)
            slot, _ = policies.setdefault(id(policy), (len(policies), policy))
            items.append((slot, labels_for(episode), episode_to_wire(episode)))
        yield tuple(p for _, p in sorted(policies.values(), key=lambda sp: sp[0])), selectors, tuple(items)


# --------------------------------------------------------------------------- public API


def score_parallel(
    episodes: Iterable[Episode],
    policy_for: Callable[[Episode], Policy],
    labels_for: Callable[[Episode], LedgerLabels],
    *,
    workers: int = 1,
    dask_scheduler: str | None = None,
    chunk: int = 64,
    progress: Callable[[int], None] | None = None,
    mp_context: str | None = None,
) -> ScoredCorpus:
    """Score every episode once, in parallel, under its policy's selector; assemble the arrays.

    ``workers`` local processes (1: in this process, no pool), or the workers of the Dask scheduler
    at ``dask_scheduler`` (e.g. ``tcp://host:8786``; ``workers`` is then ignored).  ``chunk``
    episodes travel together.  ``progress`` is called with the number of episodes done, in order.
    ``mp_context`` names a multiprocessing start method (default: the platform's).
    """
    items = _run(list(episodes), policy_for, labels_for, None, workers, dask_scheduler, chunk, progress, mp_context)
    return assemble(items)


def score_selectors_rows(
    episodes: Iterable[Episode],
    policy_for: Callable[[Episode], Policy],
    labels_for: Callable[[Episode], LedgerLabels],
    selectors: Sequence[SelectorName],
    *,
    workers: int = 1,
    dask_scheduler: str | None = None,
    chunk: int = 64,
    progress: Callable[[int], None] | None = None,
    mp_context: str | None = None,
) -> list[dict[str, EpisodeScores]]:
    """Per episode, in order, its scores under each selector, from one pass per episode
    (:func:`~guard.calibration.replay.score_episode_selectors`), in processes or on dask as :func:`score_parallel`."""
    names = tuple(selectors)
    if not names:
        raise CalibrationError("selectors must name at least one selector")
    rows: list[dict[str, EpisodeScores]] = _run(
        list(episodes), policy_for, labels_for, names, workers, dask_scheduler, chunk, progress, mp_context
    )
    return rows


def _run(
    episodes: list[Episode],
    policy_for: Callable[[Episode], Policy],
    labels_for: Callable[[Episode], LedgerLabels],
    selectors: tuple[SelectorName, ...] | None,
    workers: int,
    dask_scheduler: str | None,
    chunk: int,
    progress: Callable[[int], None] | None,
    mp_context: str | None,
) -> list[Any]:
    _check_positive("workers", workers)
    _check_positive("chunk", chunk)
    if dask_scheduler is None and workers == 1:
        return _score_local(episodes, policy_for, labels_for, selectors, progress)
    chunks = _chunks(episodes, policy_for, labels_for, selectors, chunk)
    if dask_scheduler is not None:
        return _score_dask(dask_scheduler, chunks, progress)
    n_chunks = -(-len(episodes) // chunk)
    context = multiprocessing.get_context(mp_context) if mp_context else None
    with ProcessPoolExecutor(max_workers=max(1, min(workers, n_chunks)), mp_context=context) as pool:
        return _collect((pool.submit(_score_chunk, c) for c in chunks), progress)


def _score_local(
    episodes: list[Episode],
    policy_for: Callable[[Episode], Policy],
    labels_for: Callable[[Episode], LedgerLabels],
    selectors: tuple[SelectorName, ...] | None,
    progress: Callable[[int], None] | None,
) -> list[Any]:
    out: list[Any] = []
    for count, episode in enumerate(episodes, start=1):
        policy, labels = policy_for(episode), labels_for(episode)
        if selectors is None:
            out.append(score_episode(policy, episode, labels))
        else:
            out.append(score_episode_selectors(policy, selectors, episode, labels))
        if progress is not None:
            progress(count)
    return out


def _collect(futures: Iterable[Any], progress: Callable[[int], None] | None) -> list[Any]:
    """Results of ``futures`` in submission order (all are submitted before the first is awaited)."""
    pending = list(futures)
    out: list[Any] = []
    for future in pending:
        out.extend(future.result())
        if progress is not None:
            progress(len(out))
    return out


def _score_dask(address: str, chunks: Iterator[Chunk], progress: Callable[[int], None] | None) -> list[Any]:
    """Submit every chunk to the scheduler at ``address``, gather in order, close the client (not the cluster)."""
    client = _dask_client(address)
    try:
        tag = uuid.uuid4().hex[:12]
        futures = [
            client.submit(_score_chunk, c, key=f"carbguard-score-{tag}-{i}", pure=False) for i, c in enumerate(chunks)
        ]
        return _collect(futures, progress)
    finally:
        client.close()


def _dask_client(address: str) -> Any:
    try:
        from distributed import Client
    except ImportError as exc:
        raise CalibrationError(
            f"--dask-scheduler needs dask.distributed ({exc}); install it with: {DASK_HINT}"
        ) from None
    try:
        return Client(address, timeout="15s", set_as_default=False)  # type: ignore[no-untyped-call,unused-ignore]
    except (OSError, TimeoutError, ValueError) as exc:
        raise CalibrationError(f"cannot connect to the Dask scheduler at {address!r}: {exc}") from None


def _check_positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CalibrationError(f"{name} must be a positive integer, got {value!r}")


__all__ = [
    "episode_from_wire",
    "episode_to_wire",
    "score_parallel",
    "score_selectors_rows",
]
