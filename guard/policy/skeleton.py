"""The policy skeleton `carbguard policy init` writes from tool schemas (docs/policy.md).

:func:`skeleton_yaml` guesses each tool's kind, effect, severity and argument roles from its name and
description, with server hints (MCP annotations) only ever adding caution, and writes the policy with
a YAML emitter; review notes are ``# check:`` comments made of fixed text and JSON-escaped one-line
ASCII.  The text is read back with the strict policy loader and must give exactly the intended data.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from guard.errors import PolicyError
from guard.policy.tools import ToolSchema

# ----------------------------------------------------------------------------- the skeleton


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


#
# Guessing rules (docs/policy.md).  Names are split into words at snake_case, camelCase, kebab-case and digit
# boundaries; matching is on whole words, never substrings.  Server hints (MCP annotations) may only add
# caution: ``destructiveHint: true`` makes a tool a sink (one whose name says it deletes stays ``other``,
# irreversible), ``readOnlyHint: false`` takes a read out of the sources, ``openWorldHint: true`` makes a source
# untrusted; ``readOnlyHint: true`` and ``destructiveHint: false`` never make a tool look safer than its name and
# description do.

_SINK_WORDS = _set(
    "send post forward upload pay transfer wire publish share invite tweet submit notify reply "
    "broadcast dispatch push webhook kill terminate revoke cancel deploy exec execute run shell eval "
    "refund reimburse charge payout withdraw purchase buy checkout"
)
# deletes change state the user owns and send nothing out: the ledger models them as ``kind: other`` with an
# irreversible effect (docs/ledger.md, the ``destructive`` category), so a delete's path is never read as a
# recipient; an irreversible effect keeps every call scored and certified like a sink's
_DELETE_WORDS = _set("delete remove drop erase purge wipe destroy unlink rm rmdir del trash")
# in descriptions: the present-tense forms of the action verbs ("Sends an e-mail"), never past participles,
# which describe data ("messages sent to you", "files shared with me")
_DESC_SINK_WORDS = _set(
    "send sends sending post posts posting forward forwards forwarding upload uploads uploading pay pays paying "
    "transfer transfers transferring publish publishes publishing share shares sharing "
    "refund refunds refunding charge charges charging"
)
_DESC_DELETE_WORDS = _set("delete deletes deleting remove removes removing erase erases erasing")
_DESC_WRITE_WORDS = _set("write writes writing")
_WRITE_WORDS = _set(
    "write create update set save add append edit modify book schedule rename move insert put patch upsert "
    "archive mark tag label assign enable disable reset change store"
)
_READ_WORDS = _set(
    "read get list search find lookup look query show view fetch describe count browse visit download "
    "load retrieve scrape crawl http"
)
# a read verb anywhere in the name reads (``crm_lookup``, ``order_search``) when nothing in it writes or sends
_ANY_READ_WORDS = _set("lookup search query retrieve fetch get list read find")
# text that third parties write: in a tool's name, or (a narrower list) in its description; a description that
# merely names a field ("by e-mail address", "the page number") says nothing about who wrote the results
_UNTRUSTED_WORDS = _set(
    "inbox email emails mail mails message messages web webpage website url page pages fetch browse comment "
    "comments review reviews feed news chat post posts tweet tweets forum internet online http scrape crawl "
    "ticket tickets feedback complaint complaints conversation conversations"
)
_DESC_UNTRUSTED_WORDS = _set(
    "inbox messages webpage website websites internet forum comments reviews feed news chat tweets feedback "
    "complaint complaints conversation conversations ticket tickets written writes"
)
_PUBLIC_WORDS = _set(
    "public doc docs documentation wiki weather time clock calculator calculate help faq faqs article articles kb"
)
# records that belong to someone: customers, orders, accounts (private, whatever else the results are)
_PRIVATE_WORDS = _set(
    "private personal secret internal confidential account accounts user users customer customers crm client "
    "clients order orders profile profiles record records patient patients invoice invoices billing contact "
    "contacts employee employees ticket tickets payment payments transaction transactions subscription "
    "subscriptions"
)
# a URL fetch by name (``web_fetch``, ``open_page``, ``fetch_url``): a fetch verb anywhere in the name with a web
# object; it is a read whose URL carries data out (docs/integrations/mcp.md: a sink that is also a source)
_FETCH_VERBS = _set("fetch browse download visit scrape crawl http https open get load retrieve read view")
_WEB_WORDS = _set("web webpage webpages website websites url urls uri uris http https html page pages")
_URL_ARG_WORDS = _set("url urls uri uris link links href endpoint webhook website")
_IDENT = re.compile(
    r"(^|_)(to|cc|bcc|recipients?|email|url|uri|link|id|ids|name|path|file|filename|account|iban|user|"
    r"username|channel|phone|number|key|target|dest|destination|host|domain)(_|$)|(^|_)e?mail_?address(_|$)",
    re.I,
)
# a bare ``address`` names a destination only on a tool that mails or messages; elsewhere (``change_address``,
# ``shipping_address``) it is a postal address: data, not where the data goes
_ADDRESS = re.compile(r"(^|_)address(_|$)", re.I)
_MAIL_WORDS = _set("mail email emails message messages sms text notify contact")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _words(text: str) -> list[str]:
    """Lower-case words of a name or text: ``sendEmail``, ``send-email``, ``SEND_EMAIL`` are ``send email``."""
    return [w.lower() for w in _WORD.findall(text)]


@dataclass(frozen=True, slots=True)
class _Guess:
    """What init writes for one tool; ``spec`` is None when the tool is left out (unclear: its calls escalate)."""

    spec: dict[str, Any] | None
    why: str
    suggestion: dict[str, Any] | None = None


def _source_kind(tool: ToolSchema, names: set[str], desc: set[str]) -> tuple[str | list[str], str]:
    """The source kind of a read; a description may make it untrusted or private, never public.

    Records that belong to someone (customers, orders, accounts, tickets) are private; text third parties
    write (an inbox, a web page, a ticket's message) is untrusted; both at once (a customer's ticket) is
    ``[private_source, untrusted_source]``.
    """
    words = names | desc
    third_party = tool.open_world is True or bool(names & _UNTRUSTED_WORDS or desc & _DESC_UNTRUSTED_WORDS)
    private = bool(words & _PRIVATE_WORDS)
    if third_party and private:
        return ["private_source", "untrusted_source"], "it reads records that belong to someone, written by them"
    if third_party:
        return "untrusted_source", "it reads text that third parties may write"
    if private:
        return "private_source", "it reads records that belong to someone (customers, orders, accounts)"
    if names & _PUBLIC_WORDS:
        return "public_source", "it reads public information"
    return "private_source", "a read with no other sign: assumed private (the safe side)"


def _roles(args: Sequence[str], kind: str, mails: bool = False) -> tuple[list[str], list[str]]:
    identifiers = [a for a in args if _IDENT.search(a) or (mails and _ADDRESS.search(a))]
    if kind == "sink":
        return list(args), identifiers
    if kind == "other":
        return [a for a in args if a not in identifiers], identifiers
    return [], identifiers


def _spec(
    kind: str | list[str],
    effect: str,
    severity: int,
    args: Sequence[str],
    also: str | list[str] | None = None,
    *,
    mails: bool = False,
) -> dict[str, Any]:
    """One tool's entry; a sink whose results are also read is written ``kind: [sink, <source kinds>]``."""
    payload, identifiers = _roles(args, kind if isinstance(kind, str) else "source", mails)
    also_kinds = [] if also is None else [also] if isinstance(also, str) else list(also)
    kinds = [kind] if isinstance(kind, str) else list(kind)
    kinds += also_kinds
    spec: dict[str, Any] = {
        "kind": _Kinds(kinds) if len(kinds) > 1 else kinds[0],
        "effect": effect,
        "severity": severity,
    }
    if payload:
        spec["payload_args"] = payload
    if identifiers:
        spec["identifier_args"] = identifiers
    return spec


def _guess(tool: ToolSchema) -> _Guess:
    """The most cautious reading of one tool's name, description, argument names and (cautious) hints."""
    name_words = _words(tool.name)
    names = set(name_words)
    desc = set(_words(tool.description))
    args = tool.args or ()
    url_args = [a for a in args if set(_words(a)) & _URL_ARG_WORDS]
    writes = bool(names & _WRITE_WORDS)
    fetch = bool(names & _FETCH_VERBS and names & _WEB_WORDS) and not writes
    acts = bool(names & (_SINK_WORDS | _DELETE_WORDS))
    reads = (
        (bool(name_words) and name_words[0] in _READ_WORDS)
        or name_words[:2] == ["look", "up"]
        or fetch
        or (bool(names & _ANY_READ_WORDS) and not writes and not acts)
    )
    mails = bool(names & _MAIL_WORDS)
    desc_sink = bool(desc & _DESC_SINK_WORDS)
    desc_delete = bool(desc & _DESC_DELETE_WORDS)
    if names & _SINK_WORDS:
        return _Guess(_spec("sink", "irreversible", 3, args, mails=mails), "its name says it acts outside the agent")
    if names & _DELETE_WORDS:
        return _Guess(_spec("other", "irreversible", 3, args), _DELETE_WHY)
    if tool.destructive is True:
        return _Guess(_spec("sink", "irreversible", 3, args), "its MCP hints say it is destructive")
    if reads and writes:
        why = "its name both reads and changes state"
    elif writes:
        if desc_sink:
            return _Guess(_spec("sink", "irreversible", 3, args), "its description says it sends")
        if desc_delete:
            return _Guess(_spec("other", "irreversible", 3, args), _DELETE_WHY_DESC)
        return _Guess(_spec("other", "reversible", 1, args), "it changes state the user owns and sends nothing out")
    elif reads:
        source, why = _source_kind(tool, names, desc)
        if desc_sink or desc_delete:  # a read that deletes stays a sink: only a sink's results can be a source
            spec = _spec("sink", "irreversible", 3, args, source)
            return _Guess(spec, f"its description says it sends or deletes; its results: {why}")
        if tool.read_only is False or desc & _DESC_WRITE_WORDS:
            spec = _spec("sink", "reversible", 2, args, source)
            return _Guess(spec, f"a read that may change state (server hint or description); its results: {why}")
        if url_args or (fetch and tool.args is None):
            spec = _spec("sink", "none", 2, args, source)
            return _Guess(spec, f"its URL argument carries data out (a fetch is a send); its results: {why}")
        return _Guess(_spec(source, "none", 0, args), why)
    elif desc_sink:
        return _Guess(_spec("sink", "irreversible", 3, args), "its description says it sends")
    elif desc_delete:
        return _Guess(_spec("other", "irreversible", 3, args), _DELETE_WHY_DESC)
    else:
        why = "neither its name nor its description says what it does"
    suggestion = _spec("sink", "irreversible", 3, args, "untrusted_source")
    return _Guess(None, why, suggestion)


_DELETE_WHY = "its name says it deletes: a destructive change, kind other with an irreversible effect (docs/ledger.md)"
_DELETE_WHY_DESC = "its description says it deletes: kind other with an irreversible effect (docs/ledger.md)"


class _SkeletonDumper(yaml.SafeDumper):
    """A safe dumper whose strings are plain only when they are simple words, else double-quoted with escapes."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", value) is not None and value.lower() not in _YAML_WORDS
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=None if plain else '"')


class _Kinds(list[str]):
    """A list of kinds, written on the ``kind:`` line itself (``kind: [sink, untrusted_source]``)."""


def _represent_kinds(dumper: yaml.SafeDumper, value: _Kinds) -> yaml.SequenceNode:
    return dumper.represent_sequence("tag:yaml.org,2002:seq", list(value), flow_style=True)


_SkeletonDumper.add_representer(str, _represent_str)
_SkeletonDumper.add_representer(_Kinds, _represent_kinds)
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _dump(data: Any, *, flow: bool | None = None) -> str:
    """YAML text of ``data``: ASCII only (every other character escaped), one scalar per line, never wrapped."""
    text = yaml.dump(
        data,
        Dumper=_SkeletonDumper,
        sort_keys=False,
        allow_unicode=False,
        default_flow_style=flow,
        width=2**30,
    )
    if not text.isascii():  # allow_unicode=False escapes everything else; guard the invariant the comments need
        raise PolicyError("policy init: the YAML emitter wrote a non-ASCII character")
    return text


def _comment(text: str) -> str:
    """A one-line YAML comment body: ASCII, no line break of any kind (\\n, \\r, U+0085, U+2028, U+2029)."""
    if not text.isascii() or any(ch in text for ch in "\n\r\x0b\x0c"):
        raise PolicyError(f"policy init: refusing to write a comment that is not one line of ASCII: {text!r}")
    return text


def _quoted(text: str) -> str:
    """``text`` JSON-escaped (ASCII, newline-free) for use inside a comment."""
    return json.dumps(text, ensure_ascii=True)


def _skeleton(tools: Sequence[ToolSchema], name: str) -> tuple[dict[str, Any], list[tuple[ToolSchema, _Guess]]]:
    guesses = [(tool, _guess(tool)) for tool in tools]
    specs: dict[str, Any] = {}
    for tool, guess in guesses:
        if guess.spec is not None:
            spec = dict(guess.spec)
            if tool.description:
                spec["description"] = tool.description.strip().splitlines()[0][:200] if tool.description.strip() else ""
            specs[tool.name] = spec
    data = {
        "version": 1,
        "name": name,
        "tools": specs,
        "selector": {"name": "gcarb"},
        "on_unknown": "escalate",
        "audit": {"path": "audit.jsonl", "raw_args": []},
    }
    return data, guesses


def skeleton_yaml(tools: Sequence[ToolSchema], name: str, source: str) -> str:
    """A policy file for ``tools``: every clear tool with guessed metadata, each guess marked ``# check:``.

    The YAML is written by a YAML emitter from a data structure (no tool name, argument name or
    description is spliced into the text); review notes are comments built only from fixed text and
    JSON-escaped, single-line ASCII.  A tool whose role is unclear is left out of ``tools`` (so its calls
    escalate under ``on_unknown: escalate`` until a person adds it) and listed in a ``# check:`` comment
    with the most cautious entry.  The text is read back with the strict policy loader and must give
    exactly the intended data, or :class:`PolicyError` is raised.
    """
    if not tools:
        raise PolicyError(f"{source}: no tools found; a policy needs at least one tool")
    data, guesses = _skeleton(tools, name)
    left_out = [(tool, guess) for tool, guess in guesses if guess.spec is None]
    if not data["tools"]:
        names = ", ".join(_quoted(t.name) for t, _ in left_out)
        raise PolicyError(
            f"{source}: no tool's role is clear from its name and description ({names}); write the policy by hand"
        )
    body = _dump(data, flow=False).splitlines()
    notes = iter([(tool, guess) for tool, guess in guesses if guess.spec is not None])
    lines = [
        _comment(f"# carbguard policy skeleton written by `carbguard policy init` from {_quoted(source)}."),
        "# Every line marked `# check:` is a guess from the tool's name, description and schema: read each",
        "# one (docs/policy.md).  No threshold is set: run with --threshold, or calibrate and name the artifact",
        "# under calibration.artifact.  `carbguard policy validate FILE --tools ...` cross-checks it.",
        "# Unknown tools and arguments the guard cannot read never execute (on_unknown: escalate).",
    ]
    in_tools = False
    for line in body:
        if line == "tools:":
            in_tools = True
        elif not line.startswith(" "):
            if in_tools:
                lines.extend(_left_out_block(left_out))
            in_tools = False
        key_line = line.startswith("  ") and not line.startswith(("   ", "  : "))  # `  name:` or `  ? "name"`
        if in_tools and key_line:
            tool, guess = next(notes)
            args = "unknown (no argument schema)" if tool.args is None else json.dumps(list(tool.args))
            lines.append(line)
            lines.append(_comment(f"    # check: arguments {args}; guessed because {guess.why}"))
            continue
        guessed = _GUESSED_LINE.match(line)
        if in_tools and guessed is not None:
            lines.append(_comment(f"{line}  # check: {_NOTES[guessed.group(1)]}"))
            continue
        if line.startswith("  path: audit.jsonl"):
            line = f"{line}  # check: where the audit log goes (relative to this file)"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    _check_reads_back(text, data, source)
    return text


_GUESSED_LINE = re.compile(r"(?:    |  : )(kind|effect|severity): (?:[a-z0-9_]+|\[[a-z_, ]+\])$")
_NOTES = {
    "kind": "guessed: a source kind, sink, other, or a list of them (docs/policy.md#kind)",
    "effect": "guessed from the kind and name",
    "severity": "0 harmless .. 3 severe",
}


def _left_out_block(left_out: Sequence[tuple[ToolSchema, _Guess]]) -> list[str]:
    if not left_out:
        return []
    out = [
        "# check: tools left out because their role is unclear; every call to them escalates (on_unknown)",
        "# until you add them under tools: with the right metadata.  The most cautious entries:",
    ]
    for tool, guess in left_out:
        entry = _dump({tool.name: guess.suggestion}, flow=True).strip()
        out.append(_comment(f"#   {entry}  ({guess.why})"))
    return out


def _check_reads_back(text: str, data: Mapping[str, Any], source: str) -> None:
    """Read ``text`` with the strict policy loader; it must give exactly ``data`` and a valid policy."""
    from guard.policy import parse_policy
    from guard.policy.loader import read_yaml

    loaded, _ = read_yaml(text, Path("the written skeleton"))
    if loaded != data:
        raise PolicyError(f"{source}: the written skeleton does not read back as the policy init meant to write")
    parse_policy(loaded, source="the written skeleton")


__all__ = ["skeleton_yaml"]
