"""Specificity: the background table of boilerplate k-grams, its fingerprint, and what it removes."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard import Guard, Verdict
from guard.artifact import pipeline_components
from guard.evidence.kgrams import window_keys
from guard.evidence.specificity import BACKGROUND_PATH, FORMAT, Background, background, common_piece, information
from guard.policy import parse_policy

POLICY = {
    "name": "specificity",
    "tools": {
        "read_private": {"kind": "private_source"},
        "send_email": {"kind": "sink", "effect": "irreversible", "payload_args": ["body"], "identifier_args": ["to"]},
    },
}


def _table(grams: dict[str, int], records: int = 98) -> Background:
    return Background({"format": FORMAT, "k": 8, "records": records, "grams": grams}, "f" * 64)


def test_shipped_table_and_fingerprint() -> None:
    """Catches a fingerprint that is not the hash of the shipped table, or an empty table."""
    table = background()
    assert table.fingerprint == hashlib.sha256(BACKGROUND_PATH.read_bytes()).hexdigest()
    assert table.records > 500 and 1000 < len(table.grams) < 20000
    assert table.is_boilerplate("Best regards") and not table.is_boilerplate("X4471-99207 Dana")
    body = json.loads(BACKGROUND_PATH.read_text("utf-8"))
    assert "AgentDojo" not in body["source"] and body["command"] == "carbguard data background"


def test_fingerprint_is_in_the_pipeline_components(monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches artifacts that do not record which background table made their edges."""
    policy = parse_policy(POLICY)
    before = pipeline_components(policy)
    monkeypatch.setattr("guard.artifact.table_for", lambda _policy: _table({"Best reg": 3}))
    assert pipeline_components(policy)["graph"] != before["graph"]
    off = policy.model_copy(update={"graph": policy.graph.model_copy(update={"background": False})})
    assert pipeline_components(off)["graph"] == pipeline_components(off)["graph"] != before["graph"]


def test_bits_and_information_exact() -> None:
    """Catches a wrong rarity formula (add-one share, log base 2, session term)."""
    table = _table({"Best reg": 48})
    assert table.bits("Best reg") == pytest.approx(-math.log2(49 / 100))
    assert table.bits("zzzzzzzz") == pytest.approx(-math.log2(1 / 100))
    assert information("zzzzzzzz", 2, 8, table) == pytest.approx(-math.log2(1 / 100) + 2)
    with pytest.raises(ValueError, match="holders"):
        information("zzzzzzzz", 0, 8, table)


def test_longer_span_is_boilerplate_only_if_every_gram_is() -> None:
    """Catches a span counted as boilerplate because one of its grams is."""
    table = _table({"Best reg": 1, "est rega": 1, "st regar": 1, "t regard": 1, " regards": 1})
    assert table.is_boilerplate("Best regards") and not table.is_boilerplate("Best regards, Dana")
    assert table.boilerplate(8) == table.grams and table.boilerplate(12) == frozenset()


@pytest.mark.parametrize(
    "body",
    [
        {"format": "x", "k": 8, "records": 3, "grams": {}},
        {"format": FORMAT, "k": 8, "records": 0, "grams": {}},
        {"format": FORMAT, "k": 8, "records": 3, "grams": {"short": 1}},
    ],
)
def test_malformed_table_is_refused(body: dict[str, object]) -> None:
    """Catches a malformed background table accepted (the guard must fail closed on it)."""
    with pytest.raises(ValueError, match="background table"):
        Background(body, "f" * 64)


def _decide(background_on: bool) -> Verdict:
    policy = parse_policy({**POLICY, "graph": {"background": background_on}})
    s = Guard(policy, threshold=0.5).session("b")
    s.observe_user("Answer Ann.")
    s.decide("read_private", {}, "c1")
    s.observe_result("c1", "Salary review for Ann. Payment terms: Net 30 days from the invoice date.")
    body = "Our terms: Net 30 days from the invoice date."
    return s.decide("send_email", {"to": "ann@x.test", "body": body}, "c2").verdict


def test_boilerplate_makes_no_edge() -> None:
    """Catches boilerplate shared with a private record (invoice wording the cold-start table holds; not weak: it
    has digits) still making a provenance edge."""
    assert _decide(True) is Verdict.EXECUTE
    assert _decide(False) is Verdict.ESCALATE  # negative control: without the table the same call escalates


def test_a_value_is_boilerplate_only_when_every_kgram_is() -> None:
    """A phone number whose every 8-gram the table holds is left out of the index's values, one with a k-gram
    missing or shorter than 8 characters is kept, and a value token likewise (catches a value dropped on one
    common k-gram, or a short value taken as boilerplate because it has no k-gram at all)."""
    from guard.evidence.kgrams import gram_key
    from guard.evidence.specificity import uncommon
    from guard.evidence.values import find_values

    text = "call +44 20 7946 0958 or +44 20 7946 0111, ext 4471"
    phone = "+44 20 7946 0958"
    keys = frozenset(gram_key(phone[i : i + 8], 8) for i in range(len(phone) - 7))
    values = tuple(find_values(text))
    assert phone in [text[v.start : v.end] for v in values]
    kept, tokens = uncommon(text, values, frozenset({phone, "+44 20 7946 0111", "4471"}), keys, 8)
    assert [text[v.start : v.end] for v in kept if v.key] == [
        text[v.start : v.end] for v in values if v.key and text[v.start : v.end] != phone
    ]
    assert tokens == {"+44 20 7946 0111", "4471"}
    assert uncommon(text, values, frozenset({"4471"}), frozenset(), 8) == (values, frozenset({"4471"}))


@settings(max_examples=400, deadline=None)
@given(
    piece=st.text(alphabet="ab+1é", max_size=12),
    k=st.sampled_from([3, 4, 9]),
    keep=st.lists(st.booleans(), max_size=12),
    extra=st.text(alphabet="ab+1é", min_size=3, max_size=9),
)
def test_a_common_piece_is_one_whose_every_key_is_boilerplate(piece: str, k: int, keep: list[bool], extra: str) -> None:
    """``common_piece`` (first key looked up alone, then all) = the definition: the piece has a k-gram and every
    k-gram key is in the table (catches a first key computed differently from the window keys, for non-ASCII
    text or k > 8, and a piece shorter than k read as common)."""
    keys = window_keys(piece, k)
    table = frozenset([key for key, on in zip(keys, keep + [True] * len(keys), strict=False) if on])
    table |= frozenset(window_keys(extra, k))
    assert common_piece(piece, table, k) is (bool(keys) and table.issuperset(keys))
    assert common_piece(piece, frozenset(keys), k) is bool(keys)  # not vacuous: the whole-table case fires


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet="ab+1é", min_size=1, max_size=24),
    spans=st.lists(st.tuples(st.integers(0, 24), st.integers(0, 11), st.booleans()), max_size=5),
    token_spans=st.lists(st.tuples(st.integers(0, 24), st.integers(1, 11)), max_size=4),
    k=st.sampled_from([3, 4, 9]),
    keep=st.lists(st.booleans(), max_size=24),
    junk=st.lists(st.one_of(st.integers(-(2**70), 2**70), st.text(alphabet="ab+1é", max_size=10)), max_size=4),
)
def test_uncommon_screens_as_common_piece_defines(
    text: str,
    spans: list[tuple[int, int, bool]],
    token_spans: list[tuple[int, int]],
    k: int,
    keep: list[bool],
    junk: list[int | str],
) -> None:
    """``uncommon`` (each piece's first k-gram screened as text against the table's grams, keys decoded once)
    = the definition, ``common_piece`` per keyed value and token, on tables that also hold keys of no k-gram
    (negative, too wide, non-ASCII bytes, strings of another length).  Catches a screen that drops a common
    piece (a first k-gram decoded wrong, ASCII or not, k > 8), keeps a value without a key or a piece shorter
    than k out, or a key of no k-gram taken for one."""
    from guard.evidence.specificity import uncommon
    from guard.evidence.values import Value

    fits = [(lo, n, on) for lo, n, on in spans if lo + n <= len(text)]
    values = tuple(Value("raw", lo, lo + n, text[lo : lo + n] if on else "") for lo, n, on in fits)
    tokens = frozenset(text[lo : lo + n] for lo, n in token_spans if lo + n <= len(text))
    keys = window_keys(text, k)
    table = frozenset([key for key, on in zip(keys, keep + [True] * len(keys), strict=False) if on] + junk)
    kept, left = uncommon(text, values, tokens, table, k)
    assert kept == tuple(v for v in values if not (v.key and common_piece(text[v.start : v.end], table, k)))
    assert left == frozenset(t for t in tokens if not common_piece(t, table, k))
    whole = frozenset(keys)  # not vacuous: with every key in the table, each piece of k or more characters goes
    assert uncommon(text, values, tokens, whole, k) == (
        tuple(v for v in values if not (v.key and v.end - v.start >= k)),
        frozenset(t for t in tokens if len(t) < k),
    )
