"""Identifier runs and sign-off lines of guard/evidence/boilerplate.py, checked against the plain patterns."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from guard.evidence import boilerplate
from guard.evidence.boilerplate import IDENT_MIN, NUMBER_MIN, TLDS, identifier_values
from guard.evidence.values import Value

_TEXT = st.text(alphabet="ab.C_+-12 \n/@:\u00e9\u00b2\u0661", max_size=30)


@settings(max_examples=500, deadline=None)
@given(_TEXT, st.integers(0, 30), st.integers(0, 30))
@example("ab12 34", 1, 7)
@example("x.12 34 56a 78 90", 0, 17)
@example("a.b", 0, 3)
def test_runs_are_the_matches_of_the_run_pattern(text: str, lo: int, hi: int) -> None:
    """``_runs`` finds what ``_RUN.finditer`` finds in ``[lo, hi)`` (catches a run that began before ``lo`` read
    from its middle, a scan resumed inside a multi-run digit group, and a digit the key scan misses, such as
    the Arabic-Indic one, if it were read as ASCII ``[0-9]``)."""
    lo, hi = min(lo, hi, len(text)), min(max(lo, hi), len(text))
    expected = [m.span() for m in boilerplate._RUN.finditer(text, lo, hi)]
    assert [m.span() for m in boilerplate._runs(text, lo, hi)] == expected


def _reference_identifiers(text: str) -> list[Value]:
    """identifier_values as first written: every run of ``_RUN``, stripped, sized and classified in full."""
    found: list[Value] = []
    for m in boilerplate._RUN.finditer(text):
        start, token = m.start(), m.group(0)
        stripped = token.strip("._+-")
        numeric = stripped.translate(str.maketrans("", "", " .-_+")).isdigit()
        if len(stripped) < (NUMBER_MIN if numeric else IDENT_MIN):
            continue
        start += len(token) - len(token.lstrip("._+-"))
        labels = stripped.split(".")
        kind = ""
        if len(labels) >= 2 and labels[-1].lower() in TLDS and all(x and x.replace("-", "").isalnum() for x in labels):
            kind = "host"
        elif any(c.isdigit() for c in stripped) or any(
            stripped[i] == "." and stripped[i - 1].isalnum() and stripped[i + 1].isalnum()
            for i in range(1, len(stripped) - 1)
        ):
            kind = "ident"
        if kind:
            key = f"id:{stripped}" if kind == "ident" else ""
            found.append(Value(kind, start, start + len(stripped), key))
    return found


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="ab.co-m_+12 \u00b2\u00e9", max_size=30))
@example("host.example.com")
@example("-ab.c\u00b2de.")
@example("12 34")
def test_identifiers_are_those_of_the_plain_reading(text: str) -> None:
    """The fast paths of :func:`identifier_values` (no separator test for a long token, an ASCII digit search,
    the host test only for a dotted token) change no identifier (catches a size threshold read the wrong way, and
    a digit test that misses a non-ASCII digit such as the superscript two, which ``str.isdigit`` accepts)."""
    assert identifier_values(text, [(0, len(text))]) == _reference_identifiers(text)


@given(st.text(alphabet="best regards,thx-\u2014 .!\t", max_size=24))
@example("Best regards, Ann")
@example("bestie")
def test_the_sign_off_screen_drops_only_lines_without_a_sign_off_prefix(line: str) -> None:
    """The tuple prefix test in front of ``_signoff_line`` agrees with the phrase loop (catches a screen over
    the line before it is lower-cased and stripped, which would miss "Best regards")."""
    stripped = line.strip().lower().rstrip(",!.;:")
    looped = False
    for phrase in boilerplate.SIGNOFFS:
        if stripped.startswith(phrase):
            rest = stripped[len(phrase) :]
            looped = not rest or (rest[0] in ",-\u2013\u2014" and len(rest.split()) <= 4)
            break
    assert boilerplate._signoff_line(line) == (looped and len(stripped) <= 40)
