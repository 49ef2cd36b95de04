"""The constructed suites of docs/studies.md: CES and graph-braid, frozen and reloadable.

- **CES** (:mod:`guard.studies._ces`): 80 constructed leaks (private read → note carrying the
  private field → external e-mail) and, per leak, four matched non-leaks: ``clean`` (the clean
  cohort: 80 leaks + 80 non-leaks) and three near-miss kinds (the near-miss cohort: 80 leaks + 240
  non-leaks) — the send carries only public data; the private read flows to an internal sink; the
  private read is disconnected from the send.
- **Graph-braid** (:mod:`guard.studies._braid`): 2,000 trajectories braiding one private chain
  (harmful with probability 0.4) with one to three disconnected benign branches.

Both ship as gzipped JSONL (``guard/data/constructed/{ces,braid}.jsonl.gz``, gzip mtime 0, seed 0);
``carbguard data constructed --write DIR`` regenerates them byte for byte.  One JSON object
per line: ``id``, ``suite``, ``kind``, ``group``, ``domain``, ``records`` (``kind``, ``text``,
``tool``, ``args``, ``call_id``), ``labels`` (ledger-only: ``private_values`` / ``canaries``),
``harmful_sinks`` and ``benign_sinks`` (proposal ordinals).  Record trust is not stored: it comes
from the policy (``guard/data/policies/examples/constructed.yaml``), as online.

Every episode "succeeds" when it runs to its end (``meta.utility`` is true): the suites measure who
gets stopped, not task quality.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from guard.errors import CorpusError
from guard.graph import PrefixGraph, build_graph
from guard.jsonio import json_lines, loads_strict
from guard.ledger import Ledger, LedgerLabels
from guard.policy import Policy, load_policy
from guard.records import Episode, EpisodeMeta, Record, RecordKind, final, proposal, result, user
from guard.stages import result_trust
from guard.studies._braid import braid_rows
from guard.studies._ces import NEAR_MISS_KINDS, Row, ces_rows

SUITES = ("ces", "braid")
DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "constructed"
POLICY_PATH = Path(__file__).resolve().parent.parent / "data" / "policies" / "examples" / "constructed.yaml"


@dataclass(frozen=True, slots=True)
class ConstructedEpisode:
    """One constructed episode with its ledger labels and construction labels (never gate inputs)."""

    episode: Episode
    labels: LedgerLabels
    suite: str
    kind: str
    group: int
    domain: str
    harmful_sinks: tuple[int, ...]
    benign_sinks: tuple[int, ...]

    @property
    def harmful(self) -> bool:
        """Whether the episode holds a harmful sink by construction."""
        return bool(self.harmful_sinks)


def constructed_policy() -> Policy:
    """The policy of the constructed suites (the packaged copy)."""
    return load_policy(POLICY_PATH)


def suite_rows(suite: str, seed: int = 0) -> list[Row]:
    """The rows of ``suite`` ("ces" or "braid") as the generator writes them."""
    if suite == "ces":
        return ces_rows(seed)
    if suite == "braid":
        return braid_rows(seed)
    raise CorpusError(f"unknown constructed suite {suite!r}; use one of {', '.join(SUITES)}")


def _gzip_bytes(lines: Iterable[str]) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0, compresslevel=9) as gz:
        for line in lines:
            gz.write(line.encode("utf-8") + b"\n")
    return buf.getvalue()


def suite_bytes(suite: str, seed: int = 0) -> bytes:
    """The gzipped JSONL of ``suite``, byte for byte (gzip mtime 0, no file name, sorted keys)."""
    rows = suite_rows(suite, seed)
    return _gzip_bytes(json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")) for r in rows)


def write_suites(directory: Path | str, *, seed: int = 0, policy: Policy | None = None) -> list[Path]:
    """Check and write ``ces.jsonl.gz`` and ``braid.jsonl.gz`` into ``directory``; return the paths."""
    pol = policy or constructed_policy()
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for suite in SUITES:
        data = suite_bytes(suite, seed)
        check_structure([episode_from_row(r, pol) for r in read_rows_bytes(data, suite)], pol)
        path = folder / f"{suite}.jsonl.gz"
        path.write_bytes(data)
        paths.append(path)
    return paths


# --------------------------------------------------------------------------- reading


def read_rows_bytes(data: bytes, where: str) -> list[Row]:
    """Rows of gzipped JSONL bytes."""
    try:
        text = gzip.decompress(data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise CorpusError(f"{where}: not a gzipped JSONL constructed suite ({exc})") from exc
    return [loads_strict(line, f"{where}:{number}") for number, line in json_lines(text)]


def read_rows(path: Path | str) -> list[Row]:
    """Rows of one gzipped JSONL file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read constructed suite: {exc.strerror or exc}") from None
    return read_rows_bytes(data, str(path))


def _record(index: int, raw: Row, policy: Policy) -> Record:
    kind = raw["kind"]
    if kind == "user":
        return user(index, raw["text"])
    if kind == "proposal":
        return proposal(index, raw["tool"], raw["args"], raw["call_id"])
    if kind == "result":
        trust = result_trust(policy, raw["tool"])
        return result(index, raw["call_id"], raw["text"], trust, raw["tool"], raw.get("status", "ok"))
    if kind == "final":
        return final(index, raw["text"])
    raise CorpusError(f"record {index}: unknown kind {kind!r}")


def episode_from_row(raw: Row, policy: Policy) -> ConstructedEpisode:
    """A :class:`ConstructedEpisode` from one JSONL row (trust from ``policy``)."""
    try:
        records = tuple(_record(i, r, policy) for i, r in enumerate(raw["records"]))
        meta = EpisodeMeta(
            suite=f"constructed-{raw['suite']}", user_task=raw["kind"], utility=True, source="constructed"
        )
        labels = LedgerLabels.model_validate({k: tuple(v) for k, v in raw["labels"].items()})
        return ConstructedEpisode(
            episode=Episode(raw["id"], records, meta),
            labels=labels,
            suite=raw["suite"],
            kind=raw["kind"],
            group=int(raw["group"]),
            domain=raw["domain"],
            harmful_sinks=tuple(raw["harmful_sinks"]),
            benign_sinks=tuple(raw["benign_sinks"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorpusError(f"constructed row {raw.get('id', '?')!r}: {exc}") from exc


def load_suite(suite: str, path: Path | str | None = None, policy: Policy | None = None) -> list[ConstructedEpisode]:
    """The episodes of a shipped (or given) suite file."""
    if suite not in SUITES:
        raise CorpusError(f"unknown constructed suite {suite!r}; use one of {', '.join(SUITES)}")
    pol = policy or constructed_policy()
    return [episode_from_row(r, pol) for r in read_rows(path or DATA_DIR / f"{suite}.jsonl.gz")]


def load_ces(path: Path | str | None = None, policy: Policy | None = None) -> list[ConstructedEpisode]:
    """The 400 CES episodes (80 groups x leak, clean, three near-miss kinds)."""
    return load_suite("ces", path, policy)


def load_braid(path: Path | str | None = None, policy: Policy | None = None) -> list[ConstructedEpisode]:
    """The 2,000 graph-braid trajectories."""
    return load_suite("braid", path, policy)


def ces_cohorts(items: Sequence[ConstructedEpisode]) -> dict[str, list[ConstructedEpisode]]:
    """``clean`` (leaks + matched non-leaks) and ``near_miss`` (leaks + the three near-miss kinds)."""
    leaks = [e for e in items if e.kind == "leak"]
    return {
        "clean": leaks + [e for e in items if e.kind == "clean"],
        "near_miss": leaks + [e for e in items if e.kind in NEAR_MISS_KINDS],
    }


# --------------------------------------------------------------------------- structure


def reachable_sinks(graph: PrefixGraph) -> list[int]:
    """Ordinals of the proposals that are sinks with a path from a private source."""
    nodes = sorted(n for n, r in graph.records.items() if r.kind is RecordKind.PROPOSAL)
    return [ordinal for ordinal, node in enumerate(nodes) if graph.is_reachable_sink(node)]


def structure_problems(item: ConstructedEpisode, policy: Policy) -> list[str]:
    """What is wrong with one episode's construction (empty when it is what its labels say)."""
    graph = build_graph(policy, item.episode.records)
    trace = Ledger(policy, item.labels).trace(item.episode)
    harm = [k for k, events in enumerate(trace.events) if events]
    reach = reachable_sinks(graph)
    problems = []
    if harm != list(item.harmful_sinks):
        problems.append(f"ledger charges proposals {harm}, labels say {list(item.harmful_sinks)}")
    if reach != list(item.harmful_sinks):
        problems.append(f"private-source-to-sink paths reach proposals {reach}, labels say {list(item.harmful_sinks)}")
    problems.extend(_canary_problems(item, policy))
    return problems


def _canary_problems(item: ConstructedEpisode, policy: Policy) -> list[str]:
    patterns = [re.compile(p) for p in policy.scorer.canary_patterns]
    hits = any(p.search(r.text or r.args_json()) for r in item.episode.records for p in patterns)
    wanted = item.suite == "braid"
    return [] if hits == wanted else [f"canary patterns {'miss' if wanted else 'match'} this {item.suite} episode"]


def check_structure(items: Sequence[ConstructedEpisode], policy: Policy) -> None:
    """Raise CorpusError naming the first episode whose graph or ledger contradicts its labels."""
    for item in items:
        problems = structure_problems(item, policy)
        if problems:
            raise CorpusError(f"constructed episode {item.episode.episode_id}: " + "; ".join(problems))
