"""How the trust allow-lists read a URL: exactly as every common HTTP client would, or not at all.

An allow-list entry vouches for a host (``domains``) or a place on a host (``url_prefixes``), so a URL
is compared with it only when its host and its path cannot be read two ways.  Clients disagree on
much: WHATWG URL parsers (browsers, Node) read a backslash as ``/`` and end the host there, while a
lenient parser reads ``evil.example\\@allowed.example`` as user-info and host ``allowed.example``;
WHATWG drops tabs and newlines inside a URL and resolves ``%2e%2e`` as ``..``, urllib3 resolves only a
literal ``..``, ``http.client`` resolves nothing, servers decode ``%2F``/``%2e`` or strip ``;params``
before resolving.  :func:`strict_url` therefore accepts only one shape
(docs/evidence.md#trusted-evidence-may-lower-a-score):

- ``http``, ``https`` or ``ftp``, then exactly ``://`` (or ``www.`` with no scheme, read as ``http``);
- a host of ASCII DNS labels (letters, digits, ``-``, ``_``; no empty label, no trailing dot, at most
  253 characters) whose last label starts with a letter, so no IPv4 form (``127.1``, ``0x7f.1``,
  ``2130706433``), no IPv6 literal, no percent-encoded or non-ASCII host;
- no user-info (no ``@`` before the path), an optional port of 1-65535 without leading zeros;
- a path, query and fragment of RFC 3986 characters only (no backslash, space, control or non-ASCII
  character), every ``%`` followed by two hex digits.

Anything else gives ``None``: not trusted.  A path that passes is still read several ways
(:func:`path_readings`): as written, with dot segments resolved (literal only, or with ``%2e`` too),
percent-decoded once or twice, with ``;params`` cut; :func:`under` and :func:`same_url` hold only when
they hold in every reading, so a URL is trusted only where every client and server would send it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote_to_bytes

__all__ = [
    "StrictUrl",
    "dot_free",
    "host_allowed",
    "host_in_domain",
    "path_readings",
    "same_url",
    "strict_url",
    "under",
]

_PCHAR = r"A-Za-z0-9\-._~!$&'()*+,;=:@%"
_STRICT = re.compile(
    r"(?P<scheme>[Hh][Tt][Tt][Pp][Ss]?|[Ff][Tt][Pp])://"
    r"(?P<host>[A-Za-z0-9_-]{1,63}(?:\.[A-Za-z0-9_-]{1,63})*)"
    r"(?::(?P<port>[1-9][0-9]{0,4}))?"
    rf"(?P<path>/[{_PCHAR}/]*)?"
    rf"(?:\?(?P<query>[{_PCHAR}/?]*))?"
    rf"(?:#[{_PCHAR}/?]*)?"
)
_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_HEX = re.compile(r"%[0-9a-f]{2}")
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?")
_DEFAULT_PORTS = {"http": "80", "https": "443", "ftp": "21"}
_DOTS = (frozenset({"."}), frozenset({".."}))  # dot segments as urllib3 and RFC 3986 read them
_WHATWG_DOTS = (frozenset({".", "%2e"}), frozenset({"..", ".%2e", "%2e.", "%2e%2e"}))  # compared lower-cased
_UNREADABLE = frozenset(range(0x20)) | {0x5C, 0x7F}  # control characters and a backslash, decoded

#: A path read one way: its segments (the first ``/`` dropped, a trailing empty segment dropped).
Reading = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StrictUrl:
    """A URL every common client reads the same: scheme and host lower-cased, the default port as ``""``,
    the path as written (``/`` for none), the query as written (``None`` for none)."""

    scheme: str
    host: str
    port: str
    path: str
    query: str | None
    readings: tuple[Reading, ...]


@lru_cache(maxsize=1024)
def strict_url(text: str) -> StrictUrl | None:
    """``text`` as a :class:`StrictUrl`, or ``None`` when some client could read its host or path
    otherwise (module docstring).  Only spaces, tabs and line ends around it are ignored."""
    text = text.strip(" \t\r\n")
    if "://" not in text and text[:4].lower() == "www.":
        text = "http://" + text
    match = _STRICT.fullmatch(text)
    if match is None or _BAD_PERCENT.search(text) or not _plain_host(match["host"]):
        return None
    scheme, port = match["scheme"].lower(), match["port"] or ""
    if port and int(port) > 65535:
        return None
    readings = path_readings(match["path"] or "/")
    if readings is None:
        return None
    port = "" if port == _DEFAULT_PORTS[scheme] else port
    query = _upper_hex(match["query"]) if match["query"] is not None else None
    return StrictUrl(scheme, match["host"].lower(), port, match["path"] or "/", query, readings)


def _plain_host(host: str) -> bool:
    """A DNS name: at most 253 characters, no label starting or ending with ``-``, and a last label that
    starts with a letter (WHATWG reads a host whose last label is a number as an IPv4 address)."""
    labels = host.split(".")
    return len(host) <= 253 and labels[-1][0].isalpha() and all(_LABEL.fullmatch(label) for label in labels)


def _upper_hex(text: str) -> str:
    return _HEX.sub(lambda m: m.group(0).upper(), text)


def path_readings(path: str) -> tuple[Reading, ...] | None:
    """The ways a client or server may read ``path`` (an absolute path, ``/...``), in a fixed order, or
    ``None`` when a reading holds a control character or a backslash.

    Each reading decodes the path 0, 1 or 2 times, cuts ``;params`` from each segment or not, and
    leaves dot segments alone, resolves literal ones (RFC 3986, urllib3) or also ``%2e`` ones (WHATWG).
    """
    texts = [_upper_hex(path)]
    for _ in range(2):
        decoded = unquote_to_bytes(texts[-1])
        if _UNREADABLE.intersection(decoded):
            return None
        texts.append(decoded.decode("latin-1"))
    readings: list[Reading] = []
    for text in texts:
        for cut in (False, True):
            segments = [s.partition(";")[0] if cut else s for s in text.split("/")[1:]]
            readings += [_trimmed(segments), _resolved(segments, _DOTS), _resolved(segments, _WHATWG_DOTS)]
    return tuple(readings)


def _resolved(segments: list[str], dots: tuple[frozenset[str], frozenset[str]]) -> Reading:
    """``segments`` with dot segments removed (RFC 3986 section 5.2.4); a path ending in a dot segment
    ends in a directory."""
    single, double = dots
    out: list[str] = []
    for segment in segments:
        low = segment.lower()
        if low in double:
            if out:
                out.pop()
        elif low not in single:
            out.append(segment)
    return _trimmed(out)


def _trimmed(segments: list[str]) -> Reading:
    """The segments without a trailing empty one (``/a/`` and ``/a`` name the same place here)."""
    return tuple(segments[:-1] if segments and not segments[-1] else segments)


def host_allowed(url: StrictUrl, domains: tuple[str, ...]) -> bool:
    """Whether the host of ``url`` is one of ``domains`` or a subdomain of one (at a label boundary)."""
    return any(host_in_domain(url.host, domain) for domain in domains)


def under(url: StrictUrl, prefix: StrictUrl) -> bool:
    """Whether ``url`` is at or under ``prefix`` in every reading: same scheme, host and port, the path's
    segments start with the prefix's (at a segment boundary: ``/shared`` is not under ``/sha``), and, when
    the prefix has a query, the same query."""
    if (url.scheme, url.host, url.port) != (prefix.scheme, prefix.host, prefix.port):
        return False
    if prefix.query is not None and url.query != prefix.query:
        return False
    return all(mine[: len(theirs)] == theirs for mine, theirs in zip(url.readings, prefix.readings, strict=True))


def same_url(url: StrictUrl, other: StrictUrl) -> bool:
    """Whether two URLs name the same place in every reading (scheme, host, port, path and query)."""
    return (url.scheme, url.host, url.port, url.query, url.readings) == (
        other.scheme,
        other.host,
        other.port,
        other.query,
        other.readings,
    )


def dot_free(url: StrictUrl) -> bool:
    """Whether the path of ``url`` reads the same with and without resolving dot segments (an allow-list
    prefix must: a prefix with ``..`` in it names no one place)."""
    return all(len(set(url.readings[i : i + 3])) == 1 for i in range(0, len(url.readings), 3))


def host_in_domain(host: str, domain: str) -> bool:
    """Whether ``host`` is ``domain`` or a subdomain of it (label boundary, case-insensitive)."""
    host, domain = host.lower().rstrip("."), domain.lower().strip(".")
    return host == domain or host.endswith("." + domain)
