"""Task scope: whether anything the user wrote asks for the kind of action a call takes.

A call's action is read from the verbs of its tool's name (``send_money`` → send) and widened by families
of everyday verbs for the same side effect (pay, transfer, wire ...; delete, remove, erase ...).  The
call is *requested* when a word of those families, or a form of one (``payment``, ``deleted``), stands
in a user turn before it.  An attack that makes the agent do something the user never asked for — a
password change during a balance check, a mail during a summary — is out of scope however it is worded
(docs/evidence.md#task-scope).  The families were written from English, for the kinds of side effect
tools have; a deployment whose tool names say little can name its own words (``scope_words``).  Each family
also holds the same requests in Spanish, German and French (imperative, infinitive and noun forms), so a user
who writes in one of them is not read as asking for nothing; words are compared without accents.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["action_words", "requested", "turn_stems"]


def _plain(word: str) -> str:
    """``word`` lowercase without accents (``envía`` → ``envia``, ``löschen`` → ``loschen``)."""
    decomposed = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


#: Families of verbs that ask for one kind of side effect.  Only a tool name's words found here count:
#: a noun (money, file, password) names what is acted on, and asking about it asks for no action.
_ENGLISH: tuple[str, ...] = (
    "send transfer pay wire remit refund",
    "email mail reply forward write notify tell inform pass relay escalate",
    "message dm tell text ping pass relay escalate",
    "post publish upload share forward pass relay escalate",
    "delete remove erase trash purge discard clean clear drop",
    "update change modify edit set adjust correct reset rename replace fix",
    "invite add onboard welcome",
    "remove kick ban",
    "reserve book",
    "create add make schedule organise organize plan arrange set",
    "reschedule move postpone",
    "share give grant",
    "cancel abort revoke",
)
#: Relaying something on (a ticket to a team, a note to a channel) in Spanish, German and French.
_RELAY = "reenvía escala escalar weitergeben eskaliere eskalieren transmets transmettre"
#: The same families in Spanish, German and French, in the order of :data:`_ENGLISH`.
_OTHER: tuple[str, ...] = (
    "envía enviar envíe manda mandar transfiere transferir transferencia paga pagar pague pago "
    "sende senden schicke schicken überweise überweisen überweisung zahle zahlen bezahle bezahlen zahlung "
    "envoie envoyer envoyez vire virer virement paie payer payez paiement règle régler",
    "correo escribe escribir responde responder reenvía reenviar "
    "schreibe schreiben antworte antworten weiterleiten leite courriel écris écrire réponds répondre transfère "
    + _RELAY,
    "mensaje nachricht nachrichten " + _RELAY,
    "publica publicar sube subir veröffentliche veröffentlichen posten hochladen publie publier " + _RELAY,
    "borra borrar elimina eliminar lösche löschen entferne entfernen supprime supprimer efface effacer",
    "cambia cambiar actualiza actualizar modifica modificar ändere ändern aktualisiere aktualisieren "
    "changer modifie modifier",
    "invita invitar añade añadir agrega agregar einladen füge hinzufügen inviter ajoute ajouter",
    "expulsa expulsar quita quitar entferne retire",
    "reserva reservar reserviere reservieren buche buchen réserve réserver",
    "crea crear programa programar agenda agendar erstelle erstellen planen crée créer planifie planifier",
    "reprograma reprogramar verschiebe verschieben déplace déplacer",
    "comparte compartir teile teilen partage partager",
    "cancela cancelar anula anular storniere stornieren annule annuler",
)
_FAMILIES: tuple[frozenset[str], ...] = tuple(
    frozenset(_plain(w) for w in f"{english} {other}".split()) for english, other in zip(_ENGLISH, _OTHER, strict=True)
)
_STOPWORDS = "get to for of by in on with all the a an and or from info information data details list new"
_STOP = frozenset(_STOPWORDS.split(" "))
_WORD = re.compile(r"[^\W\d_][^\W\d_-]*(?:-[^\W\d_]+)*")


def _stem(word: str) -> str:
    for suffix in ("ments", "ment", "ings", "ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@lru_cache(maxsize=1024)
def action_words(tool: str, extra: tuple[str, ...] = ()) -> frozenset[str]:
    """The stems of words that request ``tool``: the families of its name's verbs, and ``extra``.  A tool whose
    name holds no known verb has only ``extra`` (none: :func:`requested` leaves such a tool in scope)."""
    named = [w for w in re.split(r"[^a-z]+", tool.lower()) if w and w not in _STOP]
    words = {_plain(w) for w in extra}
    for word in named:
        for family in _FAMILIES:
            if word in family:
                words |= family
    return frozenset(_stem(w) for w in words)


def turn_stems(turns: Iterable[str]) -> frozenset[str]:
    """The stems of every word of ``turns`` (a hyphen dropped: ``e-mail`` reads as ``email``).  Each distinct word
    is read once; an ASCII word (lowercase already) is its own plain form (NFKD leaves ASCII as it is)."""
    words = {word.replace("-", "") for text in turns for word in _WORD.findall(text.lower())}
    return frozenset(_stem(word if word.isascii() else _plain(word)) for word in words)


def requested(tool: str, turns: Iterable[str] | frozenset[str], extra: tuple[str, ...] = ()) -> bool:
    """Whether a user turn holds a word (any form) that requests ``tool``'s action (``turns``: the texts, or
    their :func:`turn_stems`).  A tool whose action no word describes (no known verb in its name, no extra
    words) counts as requested: scope says nothing of it."""
    wanted = action_words(tool, extra)
    stems = turns if isinstance(turns, frozenset) else turn_stems(turns)
    return not wanted or not wanted.isdisjoint(stems)
