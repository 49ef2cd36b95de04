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
from guard.records import Record

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


def write_background(
    out: Path = BACKGROUND_PATH,
    min_share: float = DEFAULT_MIN_SHARE,
    min_groups: int = DEFAULT_MIN_GROUPS,
    seed: int = 0,
) -> str:
    """Write the background table to ``out`` (default: the shipped one); a line saying what was written."""
    if not 0 < min_share < 1:
        raise ValueError(f"--min-share must be in (0, 1), got {min_share}")
    records, episodes = development_records(seed=seed)
    source = (
        f"AgentDojo embedded corpus, models {', '.join(EMBEDDED_MODELS)}: development split of the three-way "
        f"protocol's first permutation (seed {seed}, development share {DEFAULT_SPLIT[0]}), "
        f"{episodes} episodes"
    )
    command = f"{COMMAND} --min-share {min_share} --min-groups {min_groups} --seed {seed}"
    groups: dict[str, list[str]] = {}
    for suite, record in records:
        groups.setdefault(suite, []).append(record_text(record))
    body = build_table(groups, min_share, min_groups, source, command)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(body, indent=0, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    grams = body["grams"]
    assert isinstance(grams, dict)
    return f"wrote {out}: {len(grams)} boilerplate {K}-grams from {body['records']} records ({episodes} episodes)"
