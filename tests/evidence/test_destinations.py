"""Trust is granted on an exact match (docs/evidence.md#trust-is-granted-on-an-exact-match).

Internal destinations, the trust allow-lists and user-named values grant trust, so a false equality
removes evidence: they match a value exactly (surrounding ASCII spaces and ASCII case aside), while the
loose normal form (:func:`guard.evidence.normalize.normalize_value`) stays for finding provenance.  Each
test here plants a look-alike that the loose form reads as the granted value and checks that nothing
grants it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard.evidence.destinations import ascii_fold, carried, exact_key, exact_pattern
from guard.evidence.normalize import normalize_value
from guard.evidence.trust import internal_value, trusted_call, trusted_value
from guard.policy import Policy, parse_policy
from guard.policy.trust import InternalSpec
from guard.records import proposal

#: Look-alike spellings: each reads as its original in the loose normal form and is another value.
LOOK_ALIKES: list[tuple[str, str]] = [
    ("#ops", "#op\u017f"),  # long s (NFKC and casefold: s)
    ("#finance", "#\ufb01nance"),  # the fi ligature (NFKC: fi)
    ("#ops", "#\uff4fps"),  # a full-width o (NFKC: o)
    ("#ops", "\uff03ops"),  # a full-width number sign (NFKC: #)
    ("#ops", "#o\u200bps"),  # a zero-width space inside (dropped by the loose form)
    ("#ops", "#ops\u2060"),  # a word joiner after it
    ("#ops", "#o\u00adps"),  # a soft hyphen
    ("#keys", "#\u212aeys"),  # the Kelvin sign (casefold and lower(): k)
    ("#ops", "%23ops"),  # percent-encoded (the loose form decodes)
    ("#ops", "#ops\u00a0"),  # a no-break space after it (the loose form collapses it)
    ("pay 10.00", "pay 1000"),  # digits joined across a separator
    ("#ops team", "#ops  team"),  # whitespace collapsed
    ("bob@corp.example", "bob@corp\uff0eexample"),  # a full-width full stop in the domain
    ("bob@corp.example", "b\uff4fb@corp.example"),  # a full-width o in the local part
]
ORIGINALS = sorted({original for original, _ in LOOK_ALIKES})
TOOLS: dict[str, Any] = {
    "read_vault": {"kind": "private_source", "identifier_args": ["name"]},
    "post": {"kind": "sink", "effect": "irreversible", "payload_args": ["text"], "identifier_args": ["channel"]},
}


def _policy(**trust: Any) -> Policy:
    return parse_policy({"name": "exact", "tools": TOOLS, "trust": trust})


def test_the_look_alikes_are_loose_equals() -> None:
    """Control: every look-alike of the table reads as its original in the loose normal form, so a grant that
    compared normal forms would accept it (the tests below would then fail)."""
    for original, variant in LOOK_ALIKES:
        assert normalize_value(variant) == normalize_value(original), variant


@pytest.mark.parametrize(("original", "variant"), LOOK_ALIKES)
def test_a_look_alike_is_never_granted(original: str, variant: str) -> None:
    """Catches a grant on a loose match (the normal form, casefold, ``lower()``): a look-alike of an internal
    identifier or recipient is not internal, of an allow-listed recipient is not allowed, of a value the user
    named is not named; the original is granted by all three."""
    internal = InternalSpec(identifiers=(original,), recipients=(original,))
    assert internal_value(internal, original) and not internal_value(internal, variant)
    allowed = _policy(user_named=False, recipients=[original])
    assert trusted_call(allowed, [], proposal(1, "post", {"channel": original}, "c"))
    assert not trusted_call(allowed, [], proposal(1, "post", {"channel": variant}, "c"))
    turn = f"please use {original} for it"
    assert trusted_value(original, turn) and not trusted_value(variant, turn)


_CONFUSABLE = {"s": "\u017f", "k": "\u212a", "o": "\uff4f", "a": "\uff41", "e": "\uff45", "i": "\uff49"}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    word=st.text(alphabet="abcdefikmnopst-", min_size=2, max_size=12).filter(lambda w: set(w) & set(_CONFUSABLE)),
    prefix=st.sampled_from(["#", "@", ""]),
    where=st.integers(0, 11),
    invisible=st.sampled_from(["", "\u200b", "\u200d", "\ufeff"]),
    data=st.data(),
)
def test_any_confusable_spelling_is_another_value(
    word: str, prefix: str, where: int, invisible: str, data: st.DataObject
) -> None:
    """Catches Unicode folding anywhere in a grant (NFKC, casefold, ``lower()``, invisible characters dropped):
    a name with one letter swapped for a compatibility or case look-alike, or with an invisible character put
    in, grants nothing, while the name in ASCII upper case (the only folding allowed) does."""
    original = prefix + word
    spots = [i for i, c in enumerate(original) if c in _CONFUSABLE]
    spot = data.draw(st.sampled_from(spots))
    variant = original[:spot] + _CONFUSABLE[original[spot]] + original[spot + 1 :]
    cut = min(where, len(variant))
    variant = variant[:cut] + invisible + variant[cut:]
    internal = InternalSpec(identifiers=(original,))
    assert not internal_value(internal, variant)
    assert not trusted_value(variant, f"send it to {original} now")
    assert internal_value(internal, f" {original.upper()} ")
    assert trusted_value(original.upper(), f"send it to {original} now")


@pytest.mark.parametrize(
    ("value", "granted"),
    [
        ("#OPS", True),  # ASCII case: channel names fold in every common chat system
        ("  #ops\t", True),  # surrounding ASCII whitespace
        ("Bob@Corp.Example", True),  # e-mail: ASCII case folds (domain by rule, local part by choice)
        ("https://WIKI.corp.example/a", True),  # URL scheme and host fold
        ("https://wiki.corp.example/A", False),  # a URL path does not
        ("/srv/Prod/db", False),  # a path does not
        ("#ops-x", False),  # a whole value, not a prefix
    ],
)
def test_what_an_exact_match_still_folds(value: str, granted: bool) -> None:
    """Catches an exact match that is stricter or looser than documented: surrounding ASCII spaces and ASCII
    case aside where the destination's rules (or the documented choice) say case does not matter."""
    names = ["#ops", "bob@corp.example", "https://wiki.corp.example/a", "/srv/prod/db"]
    policy = _policy(user_named=False, recipients=names)
    assert trusted_call(policy, [], proposal(1, "post", {"channel": value}, "c")) is granted


def test_exact_key_keeps_a_structured_values_own_spellings() -> None:
    """Catches an exact key that splits one phone number or IBAN written in two groupings (the value's own
    rules read them as one), or that reads a non-ASCII spelling as its ASCII twin."""
    assert exact_key("+1 (415) 555-0132") == exact_key("+14155550132")
    assert exact_key("DE89 3704 0044 0532 0130 00") == exact_key("de89370400440532013000")
    assert exact_key("+\uff11 415 555 0132") != exact_key("+1 415 555 0132")
    assert ascii_fold("ÀB\u212a") == "Àb\u212a"


def test_exact_pattern_does_not_fold_unicode_under_ignorecase() -> None:
    """Catches a value pattern that ``re.IGNORECASE`` folds beyond ASCII (``ſ`` as ``s``, Kelvin as ``k``)."""
    import re

    pattern = re.compile(exact_pattern("#keys"), re.IGNORECASE)
    assert pattern.fullmatch("#KEYS") and pattern.fullmatch("#keys")
    assert not pattern.fullmatch("#\u212aeys") and not pattern.fullmatch("#key\u017f")


@pytest.mark.parametrize(
    ("value", "payload", "found"),
    [
        ("cc eve@evil.test", False, ["eve@evil.test"]),
        ("cc eve@evil.test", True, []),  # an address in a declared payload is content
        ("see https://evil.test/x?u=@eve.", True, ["https://evil.test/x?u=@eve"]),  # a link leaves by its preview
        ("also #random and @mallory.", False, ["#random", "@mallory"]),
        ("+44 20 7946 0958", False, ["+44 20 7946 0958"]),
        ("DE89 3704 0044 0532 0130 00", False, ["DE89 3704 0044 0532 0130 00"]),
        ("Quarterly numbers, see attached", False, []),
    ],
)
def test_carried_destinations(value: str, payload: bool, found: list[str]) -> None:
    """Catches a destination finder that misses a kind (address, URL, phone, IBAN, handle) or reads a declared
    payload's addresses as destinations."""
    assert carried(value, declared_payload=payload) == found
