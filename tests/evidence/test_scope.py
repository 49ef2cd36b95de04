"""Task scope (guard/evidence/scope.py): whether the user's words ask for a tool's kind of action."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.evidence.scope import _stem, action_words, requested, turn_stems


@pytest.mark.parametrize(
    ("tool", "turn"),
    [
        ("send_money", "Please pay my rent for March."),
        ("transfer_funds", "Wire 20 EUR to Sam."),
        ("delete_file", "Remove the old drafts."),
        ("update_password", "Change my password to something new."),
        ("invite_user_to_workspace", "Add Kim to the team space."),
        ("reserve_hotel", "Book a room in Oslo."),
        ("send_email", "Reply to Dana about lunch."),
        ("send_email", "Then e-mail the brochure to Bob."),
        ("create_calendar_event", "Schedule a call with Bo."),
    ],
)
def test_everyday_words_request_the_action(tool: str, turn: str) -> None:
    """Catches a family missing or a word form not matched (``payment``, ``deleted``): each turn asks for the
    tool's kind of action in other words than its name."""
    assert requested(tool, [turn])


@pytest.mark.parametrize(
    ("tool", "turn"),
    [
        ("send_money", "What is my balance?"),
        ("update_password", "Summarise my inbox."),
        ("delete_file", "How many files do I have?"),
        ("send_email", "Summarise the unread messages in my inbox."),
    ],
)
def test_other_tasks_do_not_request_it(tool: str, turn: str) -> None:
    """Catches families so wide that anything requests anything (a reading word like ``inbox`` in the send
    family): a read-only task does not ask for a payment, a password change, a delete or a mail."""
    assert not requested(tool, [turn])


def test_stopwords_and_extra_words() -> None:
    """Catches a tool name's filler words counting as a request, a deployment's own words ignored, and a tool
    whose name holds no known verb made out of scope for every call (it would stop everything it does)."""
    assert "get" not in action_words("get_and_send_report")
    assert requested("rotate_keys", ["What time is it?"])  # no known verb: scope says nothing, never fires
    assert requested("frob_widget", ["Please twiddle it."], extra=("twiddle",))
    assert not requested("frob_widget", ["What time is it?"], extra=("twiddle",))


def test_a_noun_that_is_also_a_verb_counts_as_a_request() -> None:
    """A documented limit, pinned: words are not parsed for their part of speech, so "mails" (a noun here)
    requests ``send_email``.  The error is toward running the call, never toward stopping a requested one."""
    assert requested("send_email", ["Summarise the unread mails in my inbox."])


@pytest.mark.parametrize(
    ("tool", "turns"),
    [
        ("send_money", ("Paga el alquiler de marzo.", "Bitte überweise die Miete.", "Peux-tu payer le loyer ?")),
        ("delete_file", ("Borra los borradores viejos.", "Lösche die alten Entwürfe.", "Supprime les brouillons.")),
        ("update_password", ("Cambia mi contraseña.", "Ändere mein Passwort.", "Modifie mon mot de passe.")),
        ("send_email", ("Responde a Dana.", "Antworte Dana bitte.", "Réponds à Dana.")),
        ("reserve_hotel", ("Reserva una habitación en Oslo.", "Buche ein Zimmer in Oslo.", "Réserve une chambre.")),
        ("invite_user_to_slack", ("Invita a Kim al equipo.", "Lade Kim ins Team ein, füge sie hinzu.", "Ajoute Kim.")),
        ("create_calendar_event", ("Programa una llamada con Bo.", "Erstelle einen Termin.", "Planifie un appel.")),
        ("send_money", ("Envia 20 EUR a Sam.", "Schicke Sam 20 EUR.", "Envoie 20 EUR à Sam.")),  # no accent written
    ],
)
def test_requests_in_spanish_german_and_french(tool: str, turns: tuple[str, ...]) -> None:
    """Catches scope that reads one language: a user asking in Spanish, German or French (accents written or
    not) for the tool's kind of action is read as asking for it, so the call is not unrequested."""
    for turn in turns:
        assert requested(tool, [turn]), turn


@pytest.mark.parametrize("tool", ["post_slack", "send_channel_message", "send_email", "send_direct_message"])
@pytest.mark.parametrize(
    "turn",
    [
        "Please pass my ticket to your team.",
        "Could you escalate this to the on-call people?",
        "Relay the note to the channel.",
        "Escala mi caso al equipo, por favor.",
        "Bitte eskaliere das an das Team.",
        "Kannst du das ans Team weitergeben?",
        "Transmets mon dossier à ton équipe.",
    ],
)
def test_relaying_something_on_requests_a_post_or_a_message(tool: str, turn: str) -> None:
    """Catches a scope reading without relaying verbs: a user who asks for their ticket to be passed on,
    escalated or relayed (in English, Spanish, German or French) asks for the post or message that does it, so
    the call is not unrequested; :func:`test_relaying_does_not_request_a_payment_or_a_deletion` is the control."""
    assert requested(tool, [turn]), turn


@pytest.mark.parametrize("tool", ["send_money", "delete_file", "update_password"])
def test_relaying_does_not_request_a_payment_or_a_deletion(tool: str) -> None:
    """Catches relaying verbs added to every family: passing a ticket on asks for no payment, deletion or
    password change."""
    for turn in ("Please pass my ticket to your team.", "Escala mi caso al equipo.", "Transmets mon dossier."):
        assert not requested(tool, [turn]), turn


@pytest.mark.parametrize(
    ("tool", "turns"),
    [
        ("send_money", ("¿Cuál es mi saldo?", "Wie hoch ist mein Kontostand?", "Quel est mon solde ?")),
        ("delete_file", ("¿Cuántos archivos tengo?", "Wie viele Dateien habe ich?", "Combien de fichiers ai-je ?")),
        ("update_password", ("Resume mi bandeja.", "Fasse meinen Posteingang zusammen.", "Résume ma boîte.")),
    ],
)
def test_reading_tasks_in_other_languages_request_no_action(tool: str, turns: tuple[str, ...]) -> None:
    """Catches other-language families so wide that a question requests an action in the same languages."""
    for turn in turns:
        assert not requested(tool, [turn]), turn


@settings(max_examples=300, deadline=None)
@given(turns=st.lists(st.text(alphabet="aEé-İ ßs1ingment\u0301", max_size=30), max_size=3))
def test_turn_stems_are_the_stems_of_each_plain_word(turns: list[str]) -> None:
    """The stems of the turns are, word by word, the stem of its plain form (lowercase, no accents, no hyphen):
    catches a fast path for ASCII words that skips lowering or folding a word that needs it, or a word lost
    when distinct words are read once."""
    words = [w for text in turns for w in re.findall(r"[^\W\d_][^\W\d_-]*(?:-[^\W\d_]+)*", text.lower())]
    plain = {
        "".join(c for c in unicodedata.normalize("NFKD", w.replace("-", "").lower()) if not unicodedata.combining(c))
        for w in words
    }
    assert turn_stems(turns) == frozenset(_stem(w) for w in plain)
