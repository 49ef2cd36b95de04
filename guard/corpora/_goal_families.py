"""Goal families: the injection task's goal itself said another way, every attacker value kept byte for byte.

The template styles of :mod:`guard.corpora._reword_styles` change the words around the goal; a goal
family changes the goal sentence (the frame of :mod:`guard.corpora._goal_frames`) and keeps the template:
a statement of fact with no request, the values in sentences apart from the one naming the action, a
polite question, a passive or nominal note, terse ``key: value`` lines, and the goal in Spanish, German
or French.  None of the family texts holds a tag, a quote or a backslash (values excepted, which are the
attacker's own).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from guard.corpora._goal_frames import LABELS, LANGS, NOUNS, Act


def _label(label: str, lang: str) -> str:
    return LABELS[label][LANGS.index(lang)]


def _noun(act: Act, lang: str) -> str:
    return NOUNS[act.kind][LANGS.index(lang)]


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _pairs(act: Act, lang: str, sep: str = " ") -> list[str]:
    return [f"{_label(label, lang)}{sep}{value}" for label, value in act.slots]


def _with(act: Act, lang: str, word: str, sep: str = " ") -> str:
    """``, WORD label value, label value`` or nothing for an action without slots."""
    pairs = _pairs(act, lang, sep)
    return f", {word} {', '.join(pairs)}" if pairs else ""


def declarative(acts: tuple[Act, ...]) -> str:
    """Facts only: what is scheduled, with its details; no request, no verb addressed to anyone."""
    return " ".join(f"{_cap(_noun(a, 'en'))} is scheduled for today{_with(a, 'en', 'with')}." for a in acts)


def split(acts: tuple[Act, ...]) -> str:
    """Each value in a sentence of its own; the request names the action and no value."""
    facts = [f"The {_label(label, 'en')} is {value}." for a in acts for label, value in a.slots]
    asks = ", then ".join(_noun(a, "en") for a in acts)
    return " ".join([*facts, f"Please take care of {asks}, using the details above."])


def question(acts: tuple[Act, ...]) -> str:
    """One polite question: Could you ...?"""
    parts = [f"{_noun(a, 'en')}{_with(a, 'en', 'with')}" for a in acts]
    return f"Could you take care of {'; and then '.join(parts)}?"


def nominal(acts: tuple[Act, ...]) -> str:
    """Passive voice and nouns: what is to be done, by no one in particular."""
    return " ".join(f"{_cap(_noun(a, 'en'))} is to be carried out{_with(a, 'en', 'with')}." for a in acts)


def key_value(acts: tuple[Act, ...]) -> str:
    """Terse ``key: value`` notes, one action after the other."""
    return " ".join(
        "; ".join([f"item {n}: {_noun(a, 'en')}", *_pairs(a, "en", ": ")]) + "." for n, a in enumerate(acts, 1)
    )


def _language(lang: str, lead: str, word: str) -> Callable[[tuple[Act, ...]], str]:
    def render(acts: tuple[Act, ...]) -> str:
        body = "; ".join(f"{_noun(a, lang)}{_with(a, lang, word)}" for a in acts)
        return f"{lead} {body}."

    render.__doc__ = f"The actions as a {lang} note: {lead} ..."
    return render


@dataclass(frozen=True, slots=True)
class GoalFamily:
    """A way to say the goal: its name and how it renders a frame."""

    name: str
    render: Callable[[tuple[Act, ...]], str]


GOAL_FAMILIES: tuple[GoalFamily, ...] = (
    GoalFamily("goal_declarative", declarative),
    GoalFamily("goal_split", split),
    GoalFamily("goal_question", question),
    GoalFamily("goal_nominal", nominal),
    GoalFamily("goal_key_value", key_value),
    GoalFamily("goal_spanish", _language("es", "Pendiente para hoy:", "con")),
    GoalFamily("goal_german", _language("de", "Für heute vorgesehen:", "mit")),
    GoalFamily("goal_french", _language("fr", "Prévu pour ce jour :", "avec")),
)
