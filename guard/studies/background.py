"""Build the background k-gram table of :mod:`guard.evidence.specificity` from development episodes only.

The table counts, for every ``k``-gram of free text (outside structured values, as the value index
takes them), how many development records hold it, and keeps the grams held by at least
``min_share`` of the records of each of at least ``min_groups`` environments (AgentDojo suites):
text that common across unrelated environments is boilerplate (greetings, signatures, phrasing of
requests), not evidence of where a value came from.  A string common in one environment only (an
account number every task of one suite repeats) is a value of that environment, not boilerplate.

Which data it sees: the embedded AgentDojo corpus is the evaluation corpus, so the table is built
on the development split of the three-way protocol's first permutation (seed 0, the default 30 %
development share) of each shipped model, and on nothing else.  The other permutations' calibration
and test splits overlap those episodes; the table holds only counts of strings common to at least
``min_share`` of all development records, never a string of one episode.

Run ``.venv/bin/carbguard data background`` to rewrite the shipped table; the command and
its inputs are recorded in the file, and the file's hash is the fingerprint artifacts record.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from guard.calibration.threeway import DEFAULT_SPLIT, split3
from guard.corpora.agentdojo import EMBEDDED_MODELS, load_embedded
from guard.evidence.node_facts import record_text
from guard.evidence.specificity import BACKGROUND_PATH, FORMAT, K
from guard.evidence.values import free_fragments
from guard.records import Record, argument_strings

DEFAULT_MIN_SHARE = 0.01
DEFAULT_MIN_GROUPS = 2


def development_records(models: Sequence[str] = EMBEDDED_MODELS, seed: int = 0) -> tuple[list[tuple[str, Record]], int]:
    """``(suite, record)`` of the three-way protocol's development split (first permutation) of each
    model, and the number of development episodes."""
    records: list[tuple[str, Record]] = []
    episodes = 0
    for model in models:
        loaded = load_embedded(model).episodes
        dev = split3(len(loaded), 1, seed, DEFAULT_SPLIT)[0][0]
        for i in sorted(int(j) for j in dev):
            records.extend((loaded[i].meta.suite, r) for r in loaded[i].records)
        episodes += len(dev)
    return records, episodes


def gram_counts(texts: Iterable[str], k: int = K) -> tuple[Counter[str], int]:
    """For each free-text k-gram, the number of texts that hold it; and the number of texts."""
    counts: Counter[str] = Counter()
    n = 0
    for text in texts:
        n += 1
        counts.update({f[i : i + k] for f in free_fragments(text) for i in range(len(f) - k + 1)})
    return counts, n


def build_table(
    groups: dict[str, list[str]], min_share: float, min_groups: int, source: str, command: str
) -> dict[str, object]:
    """The table body: the grams held by at least ``min_share`` of the texts of at least ``min_groups``
    of ``groups``, with their total counts."""
    total: Counter[str] = Counter()
    common: Counter[str] = Counter()
    n = 0
    for texts in groups.values():
        counts, size = gram_counts(texts)
        floor = max(2, math.ceil(min_share * size))
        common.update(g for g, c in counts.items() if c >= floor)
        total.update(counts)
        n += size
    grams = {g: total[g] for g in sorted(common) if common[g] >= min_groups}
    return {
        "format": FORMAT,
        "k": K,
        "records": n,
        "groups": {name: len(texts) for name, texts in sorted(groups.items())},
        "min_share": min_share,
        "min_groups": min_groups,
        "source": source,
        "command": command,
        "grams": grams,
    }


COMMAND = "carbguard data background"
GENERIC_CORPUS = BACKGROUND_PATH.parent / "generic_corpus.txt"
AGENTDOJO_PATH = BACKGROUND_PATH.parent / "agentdojo.json"
CORPUS_SEPARATOR = "\n----\n"


def _write(out: Path, body: dict[str, object], what: str) -> str:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(body, indent=0, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    grams = body["grams"]
    assert isinstance(grams, dict)
    return f"wrote {out}: {len(grams)} boilerplate {K}-grams from {body['records']} records ({what})"


def write_generic(out: Path = BACKGROUND_PATH, corpus: Path = GENERIC_CORPUS) -> str:
    """The cold-start table: every free-text k-gram of a corpus of everyday business boilerplate written for it
    (``generic_corpus.txt``: greetings, sign-offs, signature and footer wording, headers, out-of-office lines,
    notification, ticket, invoice, shipping and calendar templates; no benchmark's text, no names or values)."""
    texts = [t.strip() for t in corpus.read_text(encoding="utf-8").split(CORPUS_SEPARATOR) if t.strip()]
    counts, n = gram_counts(f"\n{t}\n" for t in texts)  # each text as a line of its own: its line-edge grams too
    body: dict[str, object] = {
        "format": FORMAT,
        "k": K,
        "records": n,
        "groups": {"generic": n},
        "min_share": 0.0,
        "min_groups": 1,
        "source": f"guard/data/background/{corpus.name}: {n} texts of everyday business-communication boilerplate "
        "written for carbguard (greetings, sign-offs, signature and footer wording, confidentiality headers, "
        "out-of-office replies, ticket, shipping, invoice, calendar and newsletter templates); no benchmark's text. "
        "Every free-text k-gram of the corpus is boilerplate.",
        "command": COMMAND,
        "grams": dict(sorted(counts.items())),
    }
    return _write(out, body, f"{corpus.name}")


def write_episodes_table(
    out: Path, episodes: Path, policy: Path | None, min_share: float = DEFAULT_MIN_SHARE, min_groups: int = 2
) -> str:
    """A deployment's own table from its recorded episodes (``carbguard-episodes/1``): the grams held by at least
    ``min_share`` of the records of each of at least ``min_groups`` origins (user turns, each tool's results, each
    tool's calls).  A value one tool holds (a document read in many episodes) stays evidence."""
    groups = episode_groups(episodes, policy)
    if not any(groups.values()):
        raise ValueError(f"{episodes}: no recorded records to build a background table from")
    source = f"{episodes.name}: {sum(len(t) for t in groups.values())} records of a deployment's recorded episodes"
    command = f"{COMMAND} --episodes {episodes}" + (f" --policy {policy}" if policy else "")
    command += f" --min-share {min_share} --min-groups {min_groups}"
    return _write(out, build_table(groups, min_share, min_groups, source, command), str(episodes))


def episode_groups(episodes: Path, policy: Path | None) -> dict[str, list[str]]:
    """The texts of the records of ``episodes`` by origin: ``user``, ``result:TOOL``, ``call:TOOL``, ``content``."""
    from guard.corpora.episodes import read_episodes
    from guard.policy import load_policy
    from guard.records import RecordKind

    groups: dict[str, list[str]] = {}
    if policy is not None:
        for episode in read_episodes(episodes, load_policy(policy)).episodes:
            tools = {r.call_id: r.tool for r in episode.records if r.kind is RecordKind.PROPOSAL}
            for r in episode.records:
                kind = r.kind.value
                origin = f"result:{tools.get(r.call_id)}" if r.kind is RecordKind.RESULT else kind
                origin = f"call:{r.tool}" if r.kind is RecordKind.PROPOSAL else origin
                groups.setdefault(origin, []).append(record_text(r))
        return groups
    for line in episodes.read_text(encoding="utf-8").splitlines():  # no policy: the records' texts, unvalidated
        if not line.strip():
            continue
        records = json.loads(line).get("records") or []
        tools = {r.get("call_id"): r.get("tool") for r in records if r.get("kind") == "proposal"}
        for r in records:
            if r.get("kind") == "proposal":
                values = [v for _, v in argument_strings(r.get("args") or {})]
                groups.setdefault(f"call:{r.get('tool')}", []).append("\n".join(values))
            elif r.get("kind") == "result":
                groups.setdefault(f"result:{tools.get(r.get('call_id'))}", []).append(str(r.get("text", "")))
            else:
                groups.setdefault(str(r.get("kind")), []).append(str(r.get("text", "")))
    return groups


def write_background(
    out: Path = AGENTDOJO_PATH,
    min_share: float = DEFAULT_MIN_SHARE,
    min_groups: int = DEFAULT_MIN_GROUPS,
    seed: int = 0,
) -> str:
    """Write the AgentDojo development-split table to ``out``; a line saying what was written."""
    if not 0 < min_share < 1:
        raise ValueError(f"--min-share must be in (0, 1), got {min_share}")
    records, episodes = development_records(seed=seed)
    source = (
        f"AgentDojo embedded corpus, models {', '.join(EMBEDDED_MODELS)}: development split of the three-way "
        f"protocol's first permutation (seed {seed}, development share {DEFAULT_SPLIT[0]}), "
        f"{episodes} episodes"
    )
    command = f"{COMMAND} --agentdojo --min-share {min_share} --min-groups {min_groups} --seed {seed}"
    groups: dict[str, list[str]] = {}
    for suite, record in records:
        groups.setdefault(suite, []).append(record_text(record))
    return _write(out, build_table(groups, min_share, min_groups, source, command), f"{episodes} episodes")
