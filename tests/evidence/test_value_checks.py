"""Checksums and extents: the fast path of the registry-length reading, and the kept IBAN readings."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.evidence import value_checks
from guard.evidence.value_checks import iban_end


def _after_alnums_plain(raw: str, count: int) -> int | None:
    seen = 0
    for at, char in enumerate(raw):
        if char != " ":
            seen += 1
            if seen == count:
                end = at + 1
                return end if end == len(raw) or raw[end] == " " else None
    return None


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="AB12 ", max_size=30), st.integers(0, 32))
@example("DE44500105175407324931", 22)
@example("DE44500105175407324931x", 22)
@example("DE44500105175407324931 today", 22)
@example("DE4450010517540732493", 22)
@example("", 0)
def test_registry_length_reading_is_the_plain_count(raw: str, count: int) -> None:
    """Reading a compact IBAN at its registry length without the loop gives the loop's answer (catches a reading
    accepted with a letter right after it, one past the end of a too-short text, or a count of zero read as an
    empty IBAN)."""
    assert value_checks._after_alnums(raw, count) == _after_alnums_plain(raw, count)


_PIECES = ["DE44 5001 0517 5407 3249 31", "GB71803065450336013279", "XX12 3456", " today", "ES9121000418450200051332"]


@given(st.lists(st.sampled_from([*_PIECES, " 7", "x"]), min_size=1, max_size=4).map("".join))
def test_kept_iban_readings_are_those_computed_afresh(raw: str) -> None:
    """The memo of :func:`iban_end` answers as the function itself, read again and again (catches a memo keyed
    on something other than the whole reading, such as its country or length)."""
    for _ in range(2):
        assert iban_end(raw) == iban_end.__wrapped__(raw)
