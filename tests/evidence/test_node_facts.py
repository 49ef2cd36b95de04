"""Per-record facts: the one-scan gate over the injection and canary patterns changes no fact."""

from __future__ import annotations

import random
import re

from guard.corpora import agentdojo
from guard.evidence.node_facts import _gate, _matches
from guard.policy.defaults import DEFAULT_CANARY_PATTERNS, DEFAULT_INJECTION_PATTERNS

_EXTRA = (r"(?i)\bTODO:", r"(?m)^secret", r"(?s)begin.{0,5}end", r"(?a)\bkey\w{3}", r"x(\d)\1", r"(?x) a b # c")


def _compiled(sources: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(s) for s in sources)


def _texts(rng: random.Random) -> list[str]:
    pieces = [
        "ignore all previous instructions",
        "TODO: ",
        "todo:",
        "\nsecret",
        "begin\n\nend",
        "keyABC",
        "keyÄÖÜ",
        "x11",
        "x12",
        "ab",
        "AKIA" + "A" * 16,
        "<INFORMATION>",
        "note to the assistant",
        "[INST]",
        " ",
        ".",
    ]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) for _ in range(3000)]


def test_gate_changes_no_fact() -> None:
    """With and without the gate, every text gets the same injection positions and canary flag, under the
    default, the AgentDojo and flag-carrying patterns (catches a gate that drops a pattern's flags, such as
    ``(?i)``, or one built over a group reference, which would miss matches and hide an injection)."""
    rng = random.Random(3)
    sets = [
        (_compiled(DEFAULT_INJECTION_PATTERNS), _compiled(DEFAULT_CANARY_PATTERNS)),
        (_compiled(_EXTRA[:4]), _compiled(_EXTRA[4:])),
        (_compiled(_EXTRA[:4]), _compiled(DEFAULT_CANARY_PATTERNS)),
    ]
    for suite in ("banking", "workspace"):
        scorer = agentdojo.load_suite_policy(suite).scorer
        sets.append((_compiled(scorer.injection_patterns), _compiled(scorer.canary_patterns)))
    texts = _texts(rng)
    for injection, canary in sets:
        for text in texts:
            ungated = (
                tuple(sorted(m.start() for p in injection for m in p.finditer(text))),
                any(p.search(text) for p in canary),
            )
            assert _matches(injection, canary, text) == ungated, (text, injection)


def test_gate_is_refused_where_an_alternation_would_change_meaning() -> None:
    """A group reference or a verbose pattern gets no gate (catches a gate built anyway: ``\\1`` would then
    name another pattern's group), and the others get one that keeps each pattern's own flags."""
    assert _gate(_compiled((r"x(\d)\1",))) is None
    assert _gate(_compiled((r"(?x) a b # c",))) is None
    gate = _gate(_compiled((r"(?i)\bTODO:", r"\bAKIA[0-9A-Z]{4}")))
    assert gate is not None and gate.search("todo: x") and not gate.search("akiaABCD")


def test_screened_and_gated_scans_change_no_fact_on_long_texts() -> None:
    """On texts long enough to be screened (ASCII) or gated (not), each pair of pattern tuples gets the plain
    facts, read in turn on one text (catches a plan kept for another pair of tuples, injection and canary
    patterns split at the wrong place, or a pattern behind a first-character lookahead that misses a match)."""
    rng = random.Random(5)
    card = "4929 3817 5520 1146"
    pieces = [*(_texts(rng)[:40]), card, "2024-06-01", " ", "é", "x" * 70, "TODO: pay", "ignore previous instructions"]
    sets = [
        (_compiled(DEFAULT_INJECTION_PATTERNS), _compiled(DEFAULT_CANARY_PATTERNS)),
        (_compiled(DEFAULT_CANARY_PATTERNS), _compiled(DEFAULT_INJECTION_PATTERNS)),
        (_compiled(_EXTRA[:4]), _compiled((r"\b(?:\d{4}[- ]){3}\d{4}\b",))),
    ]
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(3, 12)))
        for injection, canary in sets:
            plain = (
                tuple(sorted(m.start() for p in injection for m in p.finditer(text))),
                any(p.search(text) for p in canary),
            )
            assert _matches(injection, canary, text) == plain, (text, injection)
