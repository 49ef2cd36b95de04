"""Cores of structured values match altered copies (docs/evidence.md#cores-altered-copies-of-a-structured-value).

Every single-character edit (substitution, insertion, deletion) of a card number or an IBAN, a dropped
check digit, an IBAN's BBAN alone, a phone number without its ``+`` or its country code, an address's
local part alone or with one character changed: each links to the private record that holds the valid
value.  A person's name is no copy of an address, and values that differ in two characters or more do
not link.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.evidence.value_cores import CoreIndex, cores_of, one_edit
from guard.evidence.value_index import ValueIndex
from guard.evidence.values import find_values

ALNUM = string.ascii_uppercase + string.digits


def _card(prefix: str) -> str:
    """A Luhn-valid card number: ``prefix`` and its check digit."""
    for check in "0123456789":
        total = 0
        for i, c in enumerate(reversed(prefix + check)):
            d = int(c) * (2 if i % 2 else 1)
            total += d - 9 if d > 9 else d
        if total % 10 == 0:
            return prefix + check
    raise AssertionError("unreachable")


def _iban(country: str, bban: str) -> str:
    """A valid IBAN (ISO 13616 check digits) for ``country`` and ``bban``."""
    digits = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


def _edits(value: str, alphabet: str) -> list[str]:
    """Every single-character edit of ``value`` over ``alphabet``: deletions, substitutions, insertions."""
    out = [value[:i] + value[i + 1 :] for i in range(len(value))]
    out += [value[:i] + c + value[i + 1 :] for i in range(len(value)) for c in alphabet if c != value[i]]
    out += [value[:i] + c + value[i:] for i in range(len(value) + 1) for c in alphabet]
    return out


def _index(private: str) -> ValueIndex:
    index = ValueIndex((), 8)
    index.add(0, "Client file\n" + private + "\nDo not share", ())
    return index


def _grouped(value: str, size: int, sep: str) -> str:
    return sep.join(value[i : i + size] for i in range(0, len(value), size))


cards = st.builds(
    lambda bin_, rest: _card(bin_ + rest),
    st.sampled_from(["4", "51", "37", "6011", "35"]),
    st.text("0123456789", min_size=11, max_size=14),
)
ibans = st.builds(
    _iban,
    st.sampled_from(["DE", "FR", "GB", "NL", "IT", "ES", "CH"]),
    st.one_of(
        st.text("0123456789", min_size=14, max_size=22),
        st.builds(
            lambda b, d: b + d,
            st.text(string.ascii_uppercase, min_size=4, max_size=4),
            st.text("0123456789", min_size=10, max_size=18),
        ),
    ),
)


@settings(max_examples=25, deadline=None)
@given(card=cards, size=st.sampled_from([4, 3, 16]), sep=st.sampled_from([" ", "-", ""]))
def test_every_single_edit_of_a_card_links(card: str, size: int, sep: str) -> None:
    """Each deletion (a dropped check digit too), substitution and insertion of one digit, written in any
    grouping, links to the record with the valid number (catches a card matched only as a whole valid
    value, and cores matched only exactly)."""
    index = _index("Card on file: " + _grouped(card, 4, " "))
    for copy in _edits(card, string.digits):
        assert index.span_bits("pay with " + _grouped(copy, size, sep)) == 1, copy


@settings(max_examples=25, deadline=None)
@given(iban=ibans, spaced=st.booleans())
def test_every_single_edit_of_an_iban_links(iban: str, spaced: bool) -> None:
    """Each single-character edit of an IBAN (wrong check digits, a changed country or bank letter, a digit
    dropped, added or changed), and its BBAN alone, link to the record with the valid IBAN (catches an
    IBAN matched only when its mod-97 check holds)."""
    index = _index("Payout account: " + _grouped(iban, 4, " "))
    copies = [*_edits(iban, ALNUM), iban[4:], iban[2:]]
    for copy in copies:
        assert index.span_bits("transfer to " + (_grouped(copy, 4, " ") if spaced else copy)) == 1, copy


@pytest.mark.parametrize(
    ("private", "copy"),
    [
        ("+49 30 1234 5678", "49 30 1234 5678"),  # the + dropped
        ("+49 30 1234 5678", "030 1234 5678"),  # national form: country code dropped, trunk 0 added
        ("+49 30 1234 5678", "0049-30-1234-5678"),  # international prefix instead of +
        ("+1 (415) 555-0132", "4155550132"),  # country code and + dropped
        ("+44 20 7946 0958", "+44 20 7946 0959"),  # one digit changed
        ("+33 1 87 65 43 21", "+33 1 87 65 4 21"),  # one digit dropped
    ],
)
def test_altered_phone_numbers_link(private: str, copy: str) -> None:
    """A phone number without its ``+``, without its country code, or with one digit changed links to the
    record with the E.164 number (catches phones matched only with their ``+`` as whole values)."""
    assert _index("Mobile: " + private).span_bits("call " + copy) == 1


local_parts = st.builds(
    lambda first, sep, last, n: f"{first}{sep}{last}{n}",
    st.text(string.ascii_lowercase, min_size=4, max_size=8),
    st.sampled_from([".", "_", "-"]),
    st.text(string.ascii_lowercase, min_size=3, max_size=8),
    st.sampled_from(["", "7", "1984"]),
)


@settings(max_examples=30, deadline=None)
@given(local=local_parts, domain=st.sampled_from(["example.com", "corp.example.org"]))
def test_altered_addresses_link(local: str, domain: str) -> None:
    """An address's local part alone, at another domain, with one character added, dropped or changed
    links to the record with the address (catches addresses matched only whole)."""
    index = _index(f"Private mailbox: {local}@{domain}")
    copies = [local, f"{local}@drop.test", f"{local}x@{domain}", f"{local[1:]}@{domain}"]
    copies += [f"{local[:3]}q{local[4:]}@{domain}", f"{local[:4]}{local[3:]}@{domain}"]
    for copy in copies:
        assert index.span_bits(f"write to {copy} today") == 1, copy


@pytest.mark.parametrize(
    ("private", "sent"),
    [
        ("Private mailbox: lena.novak@example.com", "Dear Lena Novak, thanks"),  # a name is no address
        ("Private mailbox: emma.johnson@example.com", "emma johnson's report"),
        ("Card on file: 4929 3817 5520 1146", "card 4929 3817 9920 1846"),  # two digits apart
        ("Mobile: +1 415 555 0132", "call +1 415 555 0199"),  # same area and exchange
        ("Mail: newsletter@shop.example", "subscribe to our newsletter"),  # letters only: no core
    ],
)
def test_what_is_no_copy_makes_no_edge(private: str, sent: str) -> None:
    """Precision: a person's name, a number two or more digits away, a shared area code and a local part of
    letters only make no edge (catches a ``text`` projection that lets a space stand for a dot, and cores
    matched with more than one edit)."""
    assert _index(private).span_bits(sent) == 0


def test_cores_of_each_kind() -> None:
    """The cores of each kind are the ones the evidence page lists (catches a kind that loses its core)."""
    text = "c 4929 3817 5520 1146 i DE44500105175407324931 p +49 30 1234 5678 m lena.novak@example.com, x@y.org"
    cores = set(cores_of(find_values(text)))
    assert ("digits", "4929381755201146") in cores
    assert {("digits", "44500105175407324931"), ("digits", "500105175407324931")} <= cores
    assert {("digits", "493012345678"), ("digits", "3012345678")} <= cores
    assert ("text", "lena.novak") in cores
    assert not any(core == "x" for _, core in cores)


@given(st.text("ab", max_size=6), st.text("ab", max_size=6))
def test_one_edit_is_levenshtein_at_most_one(a: str, b: str) -> None:
    """``one_edit`` agrees with the Levenshtein distance (catches an off-by-one in the prefix scan)."""
    rows = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, rows[0] = rows[0], i
        for j, cb in enumerate(b, 1):
            prev, rows[j] = rows[j], min(rows[j] + 1, rows[j - 1] + 1, prev + (ca != cb))
    assert one_edit(a, b) == (rows[-1] <= 1)


def test_an_index_without_cores_answers_nothing() -> None:
    """An empty core index answers 0 for any text (catches a lookup that fails without cores)."""
    assert CoreIndex().bits("4929381755201146 lena.novak") == 0


def test_consecutive_numbers_link() -> None:
    """The documented precision cost: two phone numbers one digit apart share a core and link (catches the
    evidence page and the code parting)."""
    assert _index("Mobile: +1 415 555 0132").span_bits("call +1 415 555 0133") == 1
