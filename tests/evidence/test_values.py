"""Structured values: recognised, validated and normalised; their parts are not free text."""

from __future__ import annotations

import random
import re
import string

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.evidence import regex_screen, values
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
