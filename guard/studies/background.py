"""Build the background k-gram tables of :mod:`guard.evidence.specificity`.

Three tables: the shipped cold-start one (every free-text k-gram of a corpus of everyday business boilerplate
written for carbguard, :func:`write_generic`), a deployment's own (:func:`write_episodes_table`, from its
recorded episodes) and AgentDojo's (:func:`write_background`, from the development split).  The last two count
*sessions*, never records or tools, and take in no private-source text
(:mod:`guard.studies.background_sessions`): a k-gram is boilerplate when at least ``max(min_sessions,
ceil(min_share * sessions))`` sessions hold it outside private text.

Which data AgentDojo's table sees: the embedded corpus is the evaluation corpus, so the table is built on the
development split of the three-way protocol's first permutation (seed 0, the default 30 % development share) of
each shipped model, and on nothing else; a k-gram must be common in each of at least ``min_groups`` suites (a
string every task of one suite repeats is a value of that environment, not boilerplate).

Run ``.venv/bin/carbguard data background`` to rewrite the shipped table; the command and
its inputs are recorded in the file, and the file's hash is the fingerprint artifacts record.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from guard.calibration.threeway import DEFAULT_SPLIT, split3
from guard.corpora.agentdojo import EMBEDDED_MODELS, load_embedded
from guard.evidence.specificity import BACKGROUND_PATH, FORMAT, K
from guard.evidence.values import free_fragments
from guard.records import Episode
from guard.studies.background_sessions import (
    DEFAULT_MIN_SESSIONS,
    DEFAULT_SESSION_SHARE,
    common_grams,
    discount_report,
    private_grams,
)

DEFAULT_MIN_GROUPS = 2


def gram_counts(texts: Iterable[str], k: int = K) -> tuple[Counter[str], int]:
    """For each free-text k-gram, the number of texts that hold it; and the number of texts."""
    counts: Counter[str] = Counter()
    n = 0
    for text in texts:
        n += 1
        counts.update({f[i : i + k] for f in free_fragments(text) for i in range(len(f) - k + 1)})
    return counts, n


COMMAND = "carbguard data background"
GENERIC_CORPUS = BACKGROUND_PATH.parent / "generic_corpus.txt"
AGENTDOJO_PATH = BACKGROUND_PATH.parent / "agentdojo.json"
CORPUS_SEPARATOR = "\n----\n"


def _write(out: Path, body: dict[str, object], what: str) -> str:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(body, indent=0, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    grams = body["grams"]
    assert isinstance(grams, dict)
    unit = body.get("unit", "records")
    return f"wrote {out}: {len(grams)} boilerplate {K}-grams from {body['records']} {unit} ({what})"


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
    out: Path,
    episodes: Path,
    policy: Path,
    min_share: float = DEFAULT_SESSION_SHARE,
    min_sessions: int = DEFAULT_MIN_SESSIONS,
) -> str:
    """A deployment's own table from its recorded episodes (``carbguard-episodes/1``, one session each, read under
    ``policy``, which says which text is private): the k-grams at least ``max(min_sessions, ceil(min_share *
    sessions))`` sessions hold outside private-source text (:mod:`guard.studies.background_sessions`); the lines
    written say what it discounts, by origin and by data class."""
    from guard.corpora.episodes import read_episodes
    from guard.policy import load_policy

    loaded = read_episodes(episodes, load_policy(policy)).episodes
    private = private_grams(loaded)
    grams, floor, sessions = common_grams(loaded, min_share, min_sessions, private)
    report = discount_report(loaded, grams)
    body: dict[str, object] = {
        "format": FORMAT,
        "k": K,
        "records": sessions,
        "unit": "sessions",
        "min_share": min_share,
        "min_sessions": min_sessions,
        "floor": floor,
        "source": f"{episodes.name}: {sessions} sessions of a deployment's recorded episodes; a k-gram held by at "
        f"least {floor} of them outside private-source text ({len(private)} private k-grams left out)",
        "command": f"{COMMAND} --episodes {episodes} --policy {policy} --min-share {min_share} "
        f"--min-sessions {min_sessions}",
        "report": report,
        "grams": grams,
    }
    return "\n".join([_write(out, body, f"held by at least {floor} of {sessions} sessions"), *_report_lines(report)])


def _report_lines(report: dict[str, dict[str, int]]) -> list[str]:
    """What a table discounts, one line per origin and per data class."""
    lines = [f"  discounted, held by {name}: {n}" for name, n in report["by_origin"].items()]
    lines += [f"  discounted, {name} text: {n}" for name, n in report["by_class"].items()]
    return lines or ["  nothing discounted"]


def development_episodes(models: Sequence[str] = EMBEDDED_MODELS, seed: int = 0) -> list[Episode]:
    """The episodes of the three-way protocol's development split (first permutation) of each model."""
    chosen: list[Episode] = []
    for model in models:
        loaded = load_embedded(model).episodes
        dev = split3(len(loaded), 1, seed, DEFAULT_SPLIT)[0][0]
        chosen.extend(loaded[i] for i in sorted(int(j) for j in dev))
    return chosen


def write_background(
    out: Path = AGENTDOJO_PATH,
    min_share: float = DEFAULT_SESSION_SHARE,
    min_sessions: int = DEFAULT_MIN_SESSIONS,
    min_groups: int = DEFAULT_MIN_GROUPS,
    seed: int = 0,
) -> str:
    """Write the AgentDojo development-split table to ``out``: the k-grams common (by sessions, outside private
    text: :func:`guard.studies.background_sessions.common_grams`) in each of at least ``min_groups`` suites."""
    episodes = development_episodes(seed=seed)
    private = private_grams(episodes)
    suites: dict[str, list[Episode]] = {}
    for episode in episodes:
        suites.setdefault(episode.meta.suite, []).append(episode)
    common: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for chosen in suites.values():
        grams, _, _ = common_grams(chosen, min_share, min_sessions, private)
        common.update(grams.keys())
        total.update(grams)
    source = (
        f"AgentDojo embedded corpus, models {', '.join(EMBEDDED_MODELS)}: development split of the three-way "
        f"protocol's first permutation (seed {seed}, development share {DEFAULT_SPLIT[0]}), "
        f"{len(episodes)} episodes (one session each); a k-gram held by at least max({min_sessions}, "
        f"ceil({min_share} x sessions)) sessions of each of {min_groups} suites outside private-source text"
    )
    command = (
        f"{COMMAND} --agentdojo --min-share {min_share} --min-sessions {min_sessions} --min-groups {min_groups} "
        f"--seed {seed}"
    )
    report = discount_report(episodes, (g for g, n in common.items() if n >= min_groups))
    body: dict[str, object] = {
        "format": FORMAT,
        "k": K,
        "records": len(episodes),
        "unit": "sessions",
        "groups": {name: len(chosen) for name, chosen in sorted(suites.items())},
        "min_share": min_share,
        "min_sessions": min_sessions,
        "min_groups": min_groups,
        "source": source,
        "command": command,
        "report": report,
        "grams": {g: total[g] for g in sorted(common) if common[g] >= min_groups},
    }
    return "\n".join([_write(out, body, f"{len(episodes)} episodes"), *_report_lines(report)])
