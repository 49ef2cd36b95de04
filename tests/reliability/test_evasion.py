"""The evasion study and the opt-in value normalization it measures (guard/evasion.py, guard/evidence/normalize.py)."""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import quote, quote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.evidence.normalize import normalize_value
from guard.graph import PrefixGraph
from guard.policy import parse_policy
from guard.records import Record, Trust, proposal, result, user
from guard.studies.evasion import (
    BENIGN,
    TRANSFORMS,
    VALUES,
    NormalizingPrefixGraph,
    format_evasion,
    provenance_fires,
    run_evasion_study,
    study_policy,
)

# --------------------------------------------------------------------------- normalize_value


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Emma Johnson", "EMMA JOHNSON"),
        ("Emma Johnson", "emma\n\t johnson  "),
        ("lena.novak@example.com", "lena.novak%40example.com"),
        ("lena.novak@example.com", "lena.novak%2540example.com"),
        ("Emma Johnson", "Emma+Johnson"),
        ("4929 3817 5520 1146", "4929-3817-5520-1146"),
        ("4929 3817 5520 1146", "4929381755201146"),
        ("1,250,000", "1 250 000"),
        ("+49 30 1234 5678", "+49301234 5678"),
        ("DE44 5001 0517 5407 3249 31", "de44500105175407324931"),
        ("Emma", "\uff25\uff4d\uff4d\uff41"),
        ("Straße", "STRASSE"),
        ("secret", "se\u200bcr\u200det"),
        ("1 2", "1  \n\t2"),
    ],
)
def test_surface_variants_share_one_normal_form(a: str, b: str) -> None:
    assert normalize_value(a) == normalize_value(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("1, 2, 3", "123"),  # a list of numbers is not a digit group
        ("X4821-99317", "X4821-99318"),
        ("emma johnson", "emmajohnson"),  # spaces between letters are kept (collapsed, not removed)
        ("aGVsbG8=", "hello"),  # no base64 guessing
        ("Ｅ", "Е"),  # full-width E folds to E; Cyrillic Е does not
    ],
)
def test_distinct_values_stay_distinct(a: str, b: str) -> None:
    assert normalize_value(a) != normalize_value(b)


_texts = st.one_of(
    st.text(max_size=60),
    st.builds(lambda t: quote(t, safe=""), st.text(max_size=20)),
    st.builds(quote_plus, st.text(max_size=20)),
    st.text(alphabet="0123456789 -.,/'%2Fa", max_size=30),
)


@settings(max_examples=300)
@given(text=_texts)
def test_normalize_is_idempotent_and_total(text: str) -> None:
    once = normalize_value(text)
    assert isinstance(once, str)
    assert normalize_value(once) == once


@settings(max_examples=200)
@given(text=st.text(alphabet=st.characters(codec="ascii", categories=("L", "N", "P", "Zs")), max_size=40))
def test_normalize_absorbs_case_whitespace_and_percent_encoding(text: str) -> None:
    assert normalize_value(text.upper()) == normalize_value(text.lower()) == normalize_value(text)
    assert normalize_value(quote(text, safe="")) == normalize_value(text)
    assert normalize_value(text.replace(" ", "  \n\t")) == normalize_value(text)


# --------------------------------------------------------------------------- the normalizing graph


def _records(private: str, payload: str) -> list[Record]:
    return [
        user(0, "Please write to our partner about the review."),
        proposal(1, "read_record", {"name": "client"}, "c1"),
        result(2, "c1", private, Trust.TOOL_PRIVATE, "read_record"),
        proposal(3, "send_email", {"to": "p@x.example", "body": payload}, "c2"),
    ]


_vocab = st.sampled_from(
    ["X4821-99317", "x4821 99317", "EMMA JOHNSON", "Emma Johnson", "lena%40ex.com", "lena@ex.com", "hello", "2021"]
)


@settings(max_examples=150)
@given(
    private=st.lists(_vocab, min_size=1, max_size=4).map(" ".join), payload=st.lists(_vocab, max_size=4).map(" ".join)
)
def test_normalizing_graph_only_adds_edges(private: str, payload: str) -> None:
    """Every edge of the exact-match graph is also in the normalizing graph (recall can only go up)."""
    policy = study_policy()
    raw, norm = PrefixGraph(policy), NormalizingPrefixGraph(policy)
    for record in _records(private, payload):
        raw.add(record)
        norm.add(record)
    raw_edges = {(s, t, d["etype"]) for s, t, d in raw.graph.edges(data=True)}
    norm_edges = {(s, t) for s, t in norm.graph.edges()}
    assert {(s, t) for s, t, _ in raw_edges} <= norm_edges
    if provenance_fires(PrefixGraph, policy, _records(private, payload)):
        assert provenance_fires(NormalizingPrefixGraph, policy, _records(private, payload))


def test_identifier_arguments_match_after_normalization() -> None:
    """E3: an identifier argument equal to an earlier identifier up to case and encoding."""
    data: dict[str, Any] = {
        "version": 1,
        "name": "ids",
        "tools": {
            "open_account": {"kind": "other", "identifier_args": ["account"]},
            "transfer": {"kind": "sink", "identifier_args": ["account"]},
        },
        "graph": {"value_patterns": {}},
    }
    policy = parse_policy(copy.deepcopy(data))
    records = [
        proposal(0, "open_account", {"account": "acct-7Q"}, "c1"),
        proposal(1, "transfer", {"account": "ACCT-7q"}, "c2"),
    ]
    raw, norm = PrefixGraph(policy), NormalizingPrefixGraph(policy)
    for record in records:
        raw.add(record)
        norm.add(record)
    assert not raw.graph.has_edge(0, 1)
    assert norm.graph.has_edge(0, 1) and norm.graph.edges[0, 1]["etype"] == "E3"


# --------------------------------------------------------------------------- the study


@pytest.fixture(scope="module")
def study() -> dict[str, Any]:
    return run_evasion_study()


def test_study_shape(study: dict[str, Any]) -> None:
    assert [r["transform"] for r in study["rows"]] == [t.name for t in TRANSFORMS]
    assert study["values"] == [v.name for v in VALUES]
    by_name = {t.name: t for t in TRANSFORMS}
    assert all(r["cases"] == sum(by_name[r["transform"]].applies(v) for v in VALUES) >= 1 for r in study["rows"])
    assert sum(b["cases"] for b in study["benign"].values()) == len(BENIGN)


def test_exact_values_are_always_caught(study: dict[str, Any]) -> None:
    identity = next(r for r in study["rows"] if r["transform"] == "identity")
    assert identity["recall_before"] == identity["recall_after"] == 1.0


def test_normalization_never_lowers_recall(study: dict[str, Any]) -> None:
    assert all(r["caught_after"] >= r["caught_before"] for r in study["rows"])


def test_cheap_sound_transforms_are_fully_recovered(study: dict[str, Any]) -> None:
    """Case, whitespace layout, zero-width characters, URL encoding, digit groups, full-width forms: recall 1."""
    cheap = [r for r in study["rows"] if r["cheap"]]
    assert {r["family"] for r in cheap} == {"control", "case", "whitespace", "url", "digits", "unicode"}
    assert all(r["recall_after"] == 1.0 for r in cheap), [(r["transform"], r["missed_after"]) for r in cheap]
    assert study["cheap_recall_before"] < 0.75 < study["cheap_recall_after"] == 1.0


def test_what_still_escapes_is_reported(study: dict[str, Any]) -> None:
    """Encodings, short splits, paraphrase: exact matching does not see them, before or after."""
    rows = {r["transform"]: r for r in study["rows"]}
    for name in ("base64", "hex", "reversed"):
        assert rows[name]["recall_after"] == 0.0
    for name in ("paraphrase", "last4", "split_3", "homoglyph", "leetspeak", "spaced_out"):
        assert rows[name]["recall_after"] < 1.0
    assert set(study["still_escaping"]) >= {"base64", "hex", "reversed", "paraphrase", "split_3"}


def test_structure_altered_and_key_transforms_are_caught(study: dict[str, Any]) -> None:
    """Before normalization already: a key position always links; every altered card, IBAN, phone number
    and address links (cores within one edit); a structure built around a value links unless the value had
    to be re-spelled to fit it (catches the three evidence holes of docs/evidence.md coming back)."""
    rows = {r["transform"]: r for r in study["rows"]}
    for row in rows.values():
        if row["family"] in ("position", "altered") and row["transform"] not in ("char_added", "char_dropped"):
            assert row["recall_before"] == 1.0, row
        if row["family"] == "structure":
            assert set(row["missed_after"]) <= {"name_address", "diagnosis"}, row


def test_benign_controls(study: dict[str, Any]) -> None:
    """Unrelated values never connect; the cost of normalization shows on coincidental equal facts."""
    assert study["benign"]["unrelated"]["fired_before"] == study["benign"]["unrelated"]["fired_after"] == 0
    coincidental = study["benign"]["coincidental"]
    assert coincidental["fired_after"] >= coincidental["fired_before"]


def test_format_evasion(study: dict[str, Any]) -> None:
    text = format_evasion(study)
    assert "| transform | family |" in text and "recall before" in text
    for row in study["rows"]:
        assert f"| {row['transform']} |" in text
    assert "Still escaping after normalization" in text and "paraphrase" in text
    assert "What gets out, by transform" in text and "as_email_local: name_address" in text
