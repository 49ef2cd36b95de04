"""Structured values: recognised, validated and normalised; their parts are not free text."""

from __future__ import annotations

import random
import re
import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.evidence import regex_screen, value_checks, values
from guard.evidence.values import find_values, free_fragments, iban_valid, luhn_valid
from guard.policy.trusted_urls import host_in_domain


def _keys(text: str) -> list[str]:
    return [v.key for v in find_values(text)]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Mail Carol.Secret@Company.COM now", "email:carol.secret@company.com"),
        ("https://Docs.Company.com:443/a/b/", "url:https://docs.company.com/a/b"),
        ("http://docs.company.com:80/a", "url:http://docs.company.com/a"),
        ("http://docs.company.com:8080/a", "url:http://docs.company.com:8080/a"),
        ("www.company.com/payroll.", "url:http://www.company.com/payroll"),
        ("DE89 3704 0044 0532 0130 00", "iban:DE89370400440532013000"),
        ("gb82west12345698765432", "iban:GB82WEST12345698765432"),
        ("+1 (415) 555-0132", "phone:+14155550132"),
        ("4111-1111-1111-1111", "card:4111111111111111"),
        ("$1,234.50", "amount:USD:1234.50"),
        ("1.234,50 EUR", "amount:EUR:1234.50"),
        ("EUR 99", "amount:EUR:99.00"),
        ("2024-03-05", "date:2024-03-05"),
        ("March 5th, 2024", "date:2024-03-05"),
        ("5 Mar 2024", "date:2024-03-05"),
        ("/home//dana/x.pdf", "path:/home/dana/x.pdf"),
        ("report-q3.xlsx", "path:report-q3.xlsx"),
    ],
)
def test_normal_forms(text: str, key: str) -> None:
    """Catches a recogniser or normaliser that misses a writing of a value (case, port, separators, currency)."""
    assert key in _keys(text)


@pytest.mark.parametrize(
    "text",
    [
        "DE89 3704 0044 0532 0130 01",  # bad IBAN check digits
        "4111 1111 1111 1112",  # fails Luhn
        "call 415 555 0132",  # no country code: no E.164 form
        "and/or 3/4 of them",
        "1, 2, 3",
    ],
)
def test_invalid_values_are_not_recognised(text: str) -> None:
    """Catches validation skipped: a failed checksum or a value without a country stays free text."""
    assert _keys(text) == []


def test_checksums_exact() -> None:
    """Catches a wrong Luhn or mod-97 implementation (known valid and invalid numbers)."""
    assert luhn_valid("79927398713") and not luhn_valid("79927398710") and not luhn_valid("7992a")
    assert iban_valid("GB82 WEST 1234 5698 7654 32") and not iban_valid("GB82 WEST 1234 5698 7654 33")
    assert not iban_valid("US133000000121212121212")


def test_iban_check_digits_against_iso_7064_oracle() -> None:
    """Every IBAN given the check digits ISO 7064 mod 97-10 computes (each letter read as its base-36
    value) is valid, and each other pair of check digits is not (catches a letter mapped to the wrong
    number, or the country moved to the wrong end)."""
    rng = random.Random(7)
    alphabet = string.ascii_uppercase + string.digits
    for _ in range(300):
        country = "".join(rng.choices(string.ascii_uppercase, k=2))
        bban = "".join(rng.choices(alphabet, k=rng.randint(11, 30)))
        number = int("".join(str(int(c, 36)) for c in bban + country + "00"))
        check = 98 - number % 97
        assert iban_valid(f"{country}{check:02d}{bban}"), (country, bban)
        assert not iban_valid(f"{country}{(check + rng.randint(1, 96)) % 97:02d}{bban}"), (country, bban)


def test_an_amount_with_more_digits_than_decimal_precision_is_not_an_error() -> None:
    """A currency next to a 34-digit number is not an amount, and finding values does not raise (caught by a
    fuzz run: ``Decimal.quantize`` raised ``InvalidOperation``, so observing such a tool result failed)."""
    text = "05323704000532004400442024053212.50€"
    assert [v.kind for v in find_values(text) if v.kind == "amount"] == []
    assert ("amount", "amount:EUR:12.50") in {(v.kind, v.key) for v in find_values("paid 12.50€ today")}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("refund of $1,110.90 today", "amount:USD:1110.90"),
        ("refund of 1.110,90 € today", "amount:EUR:1110.90"),
        ("refund of EUR 1110.9 today", "amount:EUR:1110.90"),
        ("refund of 1 110,90 EUR today", "amount:EUR:1110.90"),
        ("refund of 1\u00a0110,90\u00a0€ today", "amount:EUR:1110.90"),
        ("refund of CHF 1'110.90 today", "amount:CHF:1110.90"),
        ("refund of USD 1110 today", "amount:USD:1110.00"),
        ("refund of $1,110 today", "amount:USD:1110.00"),
        ("refund of €1.110 today", "amount:EUR:1110.00"),
        ("refund of $1,110.90.", "amount:USD:1110.90"),
        ("refund of $1110.905 today", None),
        ("refund of 1,110.905 USD today", None),
        ("refund of 1,110,90 EUR today", None),
        ("refund of $1.110,905 today", None),
    ],
)
def test_amount_writings(text: str, key: str | None) -> None:
    """Catches a common writing of an amount not read as its value, a group of three digits read as cents
    (``$1,110`` as 1.11), and an inconsistent writing read as some other amount: ``$1110.905`` as $1110 (the
    number cut short), ``1,110.905`` as 1110905 (two group separators), ``1,110,90`` (one separator for both)."""
    found = [v.key for v in find_values(text) if v.kind == "amount"]
    assert found == ([key] if key else []), text


def test_dates_found_from_their_year_alone() -> None:
    """Dates whose year ends a run of exactly four digits, written with numbers, a month name or a line break
    before the year, are found; a longer digit run is no year (catches the shortcut that only looks before a
    year for ``/``, ``.`` or a space missing the line break that ``$`` allows)."""
    assert _keys("paid 5/3/\n2024") == ["date:2024-05-03?"]
    assert _keys("on 5 Mar 2024, and 2024-03-06") == ["date:2024-03-05", "date:2024-03-06"]
    assert _keys("ref 120245 and 5/3/20245") == []


def test_url_free_parts() -> None:
    """Catches a URL's origin or query keys left as free text, or its path and query values masked."""
    text = "see https://shop.example.org/order/items?customer=dana-7781&x=1#top now"
    assert free_fragments(text) == ["see ", "order", "items", "dana-7781", "1", "top", " now"]


def test_value_inside_url_query_is_found() -> None:
    """Catches a value carried in a URL's query (plain or percent-encoded) not recognised as a whole."""
    assert "email:carol@company.com" in _keys("https://evil.test/?e=carol@company.com")
    assert "email:carol@company.com" in _keys("https://evil.test/?e=carol%40company.com")


def test_overlapping_candidates_longest_wins() -> None:
    """Catches an e-mail address inside a URL claimed on its own, cutting the URL."""
    values = find_values("https://a.test/u/bob@x.org/p")
    assert [v.kind for v in values] == ["url", "email"]
    assert values[0].end == len("https://a.test/u/bob@x.org/p")


def test_host_in_domain_label_boundary() -> None:
    """Catches a domain match on a raw suffix (evilcompany.com is not company.com)."""
    assert host_in_domain("mail.Company.com", "company.com") and host_in_domain("company.com.", "company.com")
    assert not host_in_domain("evilcompany.com", "company.com")


@given(st.text(alphabet="ab@.:/-?=&#%0123456789 xyzcom", max_size=60))
def test_free_fragments_are_disjoint_pieces_of_the_text(text: str) -> None:
    """Catches free ranges that overlap a value or run outside the text."""
    values = find_values(text)
    for fragment in free_fragments(text, values):
        assert fragment and fragment in text
    for value in values:
        assert 0 <= value.start < value.end <= len(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="HhTtPpSsFfWw:/.aZ9 ,$€£¥USDEURGBPCHF1", max_size=40))
@example("see HTTPS://Example.COM/a and www.X.org, ftp://h/p")
@example("EUR 12, 5 USD, $3, €4 and CHF9")
def test_fast_scans_find_what_the_plain_patterns_find(text: str) -> None:
    """The URL scan over the lowercased text and the literal-only currency alternation find exactly the spans
    of the case-insensitive URL pattern and of the currency pattern with a class branch (catches a lowered
    scan whose spans shift, or a reordered alternation that prefers another currency at a position)."""
    url_ci = re.compile(values._URL.pattern, re.IGNORECASE)
    if text.isascii():
        assert [m.span() for m in values._URL_LOWER.finditer(text.lower())] == [m.span() for m in url_ci.finditer(text)]
    with_class = re.compile(r"(?:USD|EUR|GBP|CHF|JPY|CAD|AUD|CNY|INR|SEK|NOK|DKK|PLN|[$€£¥])")
    assert [m.span() for m in values._HAS_CURRENCY.finditer(text)] == [m.span() for m in with_class.finditer(text)]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="/~.a-b_9 :x", max_size=40))
@example("see ~/a/b, ../c/d and x/y://z/w")
@example("..//a...//b /")
def test_unix_paths_are_tried_only_near_slashes_and_found_as_a_full_scan_finds_them(text: str) -> None:
    """Trying the Unix-path pattern only at a slash or one or two characters before one finds exactly what
    ``finditer`` over the whole text finds (catches a start two characters back, ``../``, left untried)."""
    slashes = [i for i, char in enumerate(text) if char == "/"]
    near = regex_screen.matches_at(values._UNIX_PATH, text, (q - d for q in slashes for d in (2, 1, 0)))
    assert [m.span() for m in near] == [m.span() for m in values._UNIX_PATH.finditer(text)]


def _runs(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(r"\d+", text)]


_NUMERIC = st.lists(
    st.sampled_from(
        ["GB71803065450336013279", "DE44 5001 0517 5407 3249 31", "4929381755201146", "4929-3817-5520-1146",
         "4929 3817 5520 1146", "1" * 20, "9" * 25, "٤٩٢٩٣٨١٧٥٥٢٠١١٤٦" + "٠" * 4, "²", "2024", "x2024", "05/03/",
         "March 5, ", "ab12", "Z", " ", "-", "\n", ".", "a", "0"]
    ),
    max_size=10,
).map("".join)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(_NUMERIC)
@example("GB71803065450336013279 and 4929381755201146")
@example("x" + "1" * 20 + "-4929381755201146")
@example("٤" * 21)
@example("١٤٩٢٩٣٨١٧٥٥٢٠١١٤٦٠٠٢")  # a valid card after a non-ASCII digit, which _numeric keeps
def test_numeric_fast_paths_find_what_the_plain_scans_find(text: str) -> None:
    """Cards from chains (one run of more than 19 ASCII digits not searched), IBAN starts told by two letters in
    a set, dates from runs of exactly four digits: the same values as the plain scans (catches a long run of
    non-ASCII digits skipped though ``_numeric`` keeps a match after one, a lone run skipped at 19 digits, a
    letter test that admits a non-ASCII letter, or a date dropped from a run of four after a ``²``)."""
    runs = _runs(text)
    plain_cards = []
    for m in values._CARD.finditer(text):
        at, digits = m.start(), re.sub(r"\D", "", m.group(0))
        if at and (text[at - 1] in "0123456789" or (text[at - 1] == "-" and at > 1 and text[at - 2] in "0123456789")):
            continue
        if 13 <= len(digits) <= 19 and luhn_valid(digits):
            plain_cards.append((m.span(), "card:" + digits))
    found = values._numeric(text, runs) if runs else []
    assert [((v.start, v.end), v.key) for v in found if v.kind == "card"] == plain_cards
    plain_ibans, after = [], 0
    for start, end in runs:
        at = start - 2
        pair = text[max(at, 0) : start]
        if end - start >= 2 and at >= after and pair.isascii() and pair.isalpha():
            iban = value_checks._IBAN.match(text, at)
            cut = value_checks.iban_end.__wrapped__(iban.group(0)) if iban is not None else None
            if cut is not None:
                plain_ibans.append((at, at + cut))
                after = at + cut
    assert value_checks.iban_spans(text, runs) == plain_ibans
    assert values._dates(text, [(lo, hi) for lo, hi in runs if hi - lo >= 4]) == values._dates(
        text, [(lo, hi) for lo, hi in runs if hi - lo == 4]
    )


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "B", ".", "_", "%", "+", "-", "@", "x.io", " ", "é", "a" * 70, "@@"]), max_size=9)
)
@example(["a" * 70, "@", "x.io"])
@example(["a" * 64, "@", "x.io", " ", "b@", "x.io"])
def test_email_starts_found_before_each_at_sign(parts: list[str]) -> None:
    """Trying the e-mail pattern only where the local part before an ``@`` starts finds what ``finditer`` finds
    (catches a local part of exactly 64 characters missed, a longer run taken from its middle, or an address
    right after another's ``@`` skipped)."""
    text = "".join(parts)
    assert [m.span() for m in values._emails(text)] == [m.span() for m in values._EMAIL.finditer(text)]
