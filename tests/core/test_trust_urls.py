"""Allow-listed URLs are trusted only as every common client reads them.

See docs/evidence.md#trusted-evidence-may-lower-a-score.

Two classes of holes: a URL whose host some client reads differently from the guard (user-info,
backslashes, control characters, encoded or non-ASCII hosts, IP forms, odd ports), and a path that
leaves a ``url_prefixes`` entry once a client or server resolves its dot segments (literal,
percent-encoded, behind ``;params``) or decodes it.  Each example test names the planted bug it
catches; the hypothesis tests compare the guard with real parsers (``urllib.parse``, and urllib3 and
httpx when installed) over generated URL shapes.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guard import Policy, PolicyError
from guard.evidence.trust import trusted_call, trusted_value
from guard.policy import parse_policy
from guard.policy.trusted_urls import strict_url
from guard.records import proposal

HOST = "docs.acme-corp.test"
DOMAIN = "acme-corp.test"
PREFIX = f"https://{HOST}/team/reports/"
TOOLS = {"fetch": {"kind": "sink", "effect": "irreversible", "identifier_args": ["url"]}}


def _policy(**trust: Any) -> Policy:
    return parse_policy({"name": "urls", "tools": TOOLS, "trust": {"user_named": False, **trust}})


DOMAINS = _policy(domains=[DOMAIN])
PREFIXES = _policy(url_prefixes=[PREFIX])


def _trusted(policy: Policy, url: str) -> bool:
    return trusted_call(policy, [], proposal(0, "fetch", {"url": url}, "c"))


# ----------------------------------------------------------------------------- hosts


@pytest.mark.parametrize(
    "url",
    [
        f"https://attacker.example\\@{HOST}/team/reports/q3",  # WHATWG: host attacker.example
        f"https://attacker.example\\\\@{HOST}/",
        f"https://attacker.example%5C@{HOST}/",
        f"https://{HOST}@attacker.example/",  # user-info: the host is attacker.example
        f"https://user:pw@{HOST}/",  # any user-info, even harmless-looking
        f"https://a@b@{HOST}/",  # several @
        f"https://{HOST}:443@attacker.example/",
        f"https://{HOST}\t.attacker.example/",  # WHATWG drops tabs and newlines inside
        f"https://{HOST}\n.attacker.example/",
        f"https://{HOST}\x00.attacker.example/",
        f"https://{HOST}%2eattacker.example/",  # percent-encoded host
        "https://docs%2Eacme-corp.test/",
        "https://docs.acme-corp\u3002test/",  # ideographic full stop: a dot after IDNA mapping
        "https://docs.acme-corp.test\uff0fattacker.example/",  # fullwidth solidus
        "https://d\u043ecs.acme-corp.test/",  # a Cyrillic o
        "https://DOCS.ACME-CORP.TEST\u212a/",  # Kelvin sign folds to k
        f"https://{HOST}./",  # trailing dot
        f"https://{HOST}:/",  # empty port
        f"https://{HOST}:0443/",  # leading zero
        f"https://{HOST}:70000/",  # no such port
        f"https://{HOST}:44 3/",
        f"https:/{HOST}/",  # one slash: WHATWG accepts it, others do not
        f"https:\\\\{HOST}/",
        f"https:///{HOST}/",
        f"//{HOST}/",  # scheme-relative
        f" https://attacker.example\\@{HOST}/",
        "https://127.0.0.1/",
        "https://0x7f.1/",
        "https://2130706433/",
        "https://[::1]/",
        "https://-docs.acme-corp.test/",
    ],
)
def test_a_host_some_client_reads_otherwise_is_not_trusted(url: str) -> None:
    """Catches an allow-list that reads the host with a lenient parser (user-info, backslash, encoded or
    non-ASCII host, control characters, IP forms, odd ports all trusted as the allowed host)."""
    assert not _trusted(DOMAINS, url)
    assert not _trusted(_policy(recipients=[f"https://{HOST}/"]), url)


@pytest.mark.parametrize(
    "url",
    [
        f"https://{HOST}/team/reports/q3.pdf?v=2#top",
        "HTTPS://DOCS.Acme-Corp.test:443/x",
        f"http://{HOST}:8080/",
        f"https://{HOST}/@attacker.example",  # an @ in the path is not user-info
        f"www.{DOMAIN}/a",
        f"https://a_b.{HOST}/",
        f"https://{HOST}",
    ],
)
def test_a_plain_url_on_an_allowed_host_is_trusted(url: str) -> None:
    """Catches an allow-list so strict that it trusts no ordinary URL on the allowed host."""
    assert _trusted(DOMAINS, url)


def test_a_url_recipient_is_the_same_url_in_every_reading() -> None:
    """Catches URL recipients compared by the guard's lossy key (user-info dropped, path decoded)."""
    policy = _policy(recipients=[f"https://{HOST}/hooks/build"])
    assert _trusted(policy, f"https://{HOST.upper()}:443/hooks/build/")
    assert not _trusted(policy, f"https://x\\@{HOST}/hooks/build")
    assert not _trusted(policy, f"https://{HOST}/hooks%2Fbuild")
    assert not _trusted(policy, f"https://{HOST}/hooks/build/../deploy")


def test_a_user_named_url_is_named_only_as_the_same_url() -> None:
    """Catches user-named URLs matched on the lossy key: the user named the host, the argument has
    user-info or a backslash in front of it and goes elsewhere."""
    turn = f"Please fetch https://{HOST}/team/notes today."
    assert trusted_value(f"https://{HOST}/team/notes", turn)
    assert not trusted_value(f"https://mallory.example\\@{HOST}/team/notes", turn)
    assert not trusted_value(f"https://mallory.example@{HOST}/team/notes", turn)
    assert not trusted_value(f"https://{HOST}/team/notes/../../admin", turn)
    assert not trusted_value(f"https://{HOST}/team/%2e%2e/admin", turn)
    odd = f"https://mallory.example\\@{HOST}/team/q3.pdf"  # a URL holding a file name: still one URL
    assert not trusted_value(odd, f"fetch {odd} now")
    assert trusted_value(f"https://{HOST}/team/q3.pdf", f"fetch https://{HOST}/team/q3.pdf now")


def test_an_email_source_route_is_not_trusted_by_domain() -> None:
    """Catches a domain allow-list that trusts ``user%attacker@relay.allowed`` (relays forward it to attacker)."""
    policy = parse_policy(
        {
            "name": "mail",
            "tools": {"mail": {"kind": "sink", "identifier_args": ["to"]}},
            "trust": {"user_named": False, "domains": [DOMAIN]},
        }
    )
    assert trusted_call(policy, [], proposal(0, "mail", {"to": f"ops@{DOMAIN}"}, "c"))
    assert not trusted_call(policy, [], proposal(0, "mail", {"to": f"ops%evil.example@{DOMAIN}"}, "c"))


# ----------------------------------------------------------------------------- paths under a prefix


@pytest.mark.parametrize(
    "path",
    [
        "/team/reports/../../billing/export",
        "/team/reports/%2e%2e/%2e%2e/billing",
        "/team/reports/%2E%2E/%2E%2E/billing",
        "/team/reports/.%2e/.%2E/billing",
        "/team/reports/%2e./billing/../../x",
        "/team/reports/..;/..;/billing",
        "/team/reports;x=1/../../billing",
        "/team/reports/..%2f..%2fbilling",
        "/team/reports/..%2F..%2Fbilling",
        "/team/reports/%252e%252e/%252e%252e/billing",  # decoded twice by some servers
        "/team/reports/..\\..\\billing",
        "/team/reports/%5c..%5c..%5cbilling",
        "/team/reports/%00/../../billing",
        "/team/reports-archive/q3",  # a path-segment boundary
        "/team/reportsx",
        "/team/report",
        "/other/../team/reports/q3",  # under the prefix only once resolved; http.client sends it raw
        "/team/./reports/../../billing",
        "/team//reports/q3",
        "/team/reports/q3\n/../../../billing",
        "/team/reports/%zz",
    ],
)
def test_a_path_that_leaves_the_prefix_in_some_reading_is_not_trusted(path: str) -> None:
    """Catches a prefix matched on the raw or once-normalised path: dot segments (literal, %2e, ..;),
    encoded separators, double encoding, backslashes, or no segment boundary let the request leave it."""
    assert not _trusted(PREFIXES, f"https://{HOST}{path}")


@pytest.mark.parametrize(
    "path",
    ["/team/reports", "/team/reports/", "/team/reports/q3.pdf", "/team/reports/2026/q3?x=1", "/team/reports/a/../b"],
)
def test_a_path_under_the_prefix_in_every_reading_is_trusted(path: str) -> None:
    """Catches a prefix allow-list that trusts nothing under its prefix (or not the prefix itself)."""
    assert _trusted(PREFIXES, f"https://{HOST.upper()}:443{path}")


def test_a_prefix_without_a_trailing_slash_stops_at_a_segment() -> None:
    """Catches a prefix compared as a string: ``/team/reports`` must not trust ``/team/reports-old``."""
    policy = _policy(url_prefixes=[f"https://{HOST}/team/reports"])
    assert _trusted(policy, f"https://{HOST}/team/reports/q1")
    assert not _trusted(policy, f"https://{HOST}/team/reports-old/q1")
    assert not _trusted(policy, f"http://{HOST}/team/reports/q1")  # another scheme
    assert not _trusted(policy, f"https://{HOST}:8443/team/reports/q1")  # another port


def test_a_prefix_with_a_query_needs_that_query() -> None:
    """Catches a query prefix that lets a later repeated parameter through (servers may take the last one)."""
    policy = _policy(url_prefixes=[f"https://{HOST}/api?team=blue"])
    assert _trusted(policy, f"https://{HOST}/api?team=blue")
    assert not _trusted(policy, f"https://{HOST}/api?team=blue&team=red")


@pytest.mark.parametrize(
    "prefix",
    [
        f"https://{HOST}/a/../b/",
        f"https://{HOST}/a/%2e%2e/b/",
        f"https://u@{HOST}/",
        "https://10.0.0.1/",
        f"https://{HOST}:0/",
        f"https://{HOST}/a%zz",
    ],
)
def test_a_prefix_the_clients_read_differently_is_refused_at_load(prefix: str) -> None:
    """Catches a policy that loads a prefix that names no one place (dot segments, user-info, IP, odd port)."""
    with pytest.raises(PolicyError, match="url_prefixes"):
        _policy(url_prefixes=[prefix])


# ----------------------------------------------------------------------------- against real parsers

SCHEMES = ["https://", "http://", "HTTPS://", "https:/", "https:\\\\", "https:///", "ftp://", ""]
USERINFO = ["", "", "", "x@", "evil.example@", "evil.example\\@", "a:b@", "@", "a@b@", "%40"]
HOSTS = [
    HOST,
    HOST.upper(),
    f"www.{DOMAIN}",
    "evil.example",
    f"{HOST}.evil.example",
    f"{HOST}.",
    f"{HOST}%2eevil.example",
    f"{HOST}\\evil.example",
    f"evil.example\\{HOST}",
    "d\u043ecs.acme-corp.test",
    f"{HOST}\u3002evil.example",
    f"{HOST}\t",
    f"{HOST}\r\nevil.example",
    "127.0.0.1",
    "0x7f.0.0.1",
    "[::1]",
    f"{HOST}#@evil.example",
    f"{HOST}?@evil.example",
]
PORTS = ["", "", ":443", ":8443", ":", ":0443", ":99999", ":x", ":80"]
SEGMENTS = [
    "team",
    "reports",
    "q3",
    "..",
    ".",
    "%2e%2e",
    "%2E.",
    ".%2e",
    "%2e",
    "..;",
    "a;b",
    "%2f",
    "%5c",
    "\\",
    "",
    "%252e%252e",
    "billing",
    "reports-x",
    "%",
    "\u00e9",
    " ",
]
tails_of_paths = st.lists(st.sampled_from(SEGMENTS), max_size=6).map(lambda s: "/" + "/".join(s) if s else "")
heads = st.sampled_from(["/team/reports", "/team/reports-old", "/team/reportsx", "/x/../team/reports", "/team/report"])
paths = st.one_of(tails_of_paths, st.builds(str.__add__, heads, tails_of_paths))  # near the prefix or in it
separators = st.sampled_from(["/", "/", "/", "\\"])
tails = st.sampled_from(["", "?q=1", "#f", "?next=/../x", "#@evil.example", "?a=%2e%2e"])
shapes = st.builds(
    lambda scheme, user, host, port, path, sep, tail: scheme + user + host + port + path.replace("/", sep) + tail,
    st.sampled_from(SCHEMES),
    st.sampled_from(USERINFO),
    st.one_of(st.just(HOST), st.sampled_from(HOSTS)),
    st.sampled_from(PORTS),
    paths,
    separators,
    tails,
)
plain_authority = st.builds(
    lambda port, path, tail: f"https://{HOST}{port}{path}{tail}", st.sampled_from(["", ":443"]), paths, tails
)
anything = st.lists(st.sampled_from([*"htps:/\\@.%2eE;?#[]x ", HOST, "\t", "\u3002", "www.", "../"]), max_size=24).map(
    "".join
)


def _parsers() -> list[tuple[str, Callable[[str], tuple[str | None, str]]]]:
    """``(name, url -> (host, path as sent))`` of every parser at hand: urllib.parse (http.client sends the
    path raw), a WHATWG reading (tabs and newlines dropped, backslash as ``/``), urllib3 and httpx."""

    def stdlib(url: str) -> tuple[str | None, str]:
        parts = urlsplit(url)
        return parts.hostname, parts.path

    def whatwg(url: str) -> tuple[str | None, str]:
        cleaned = re.sub(r"[\t\n\r]", "", url.strip("\x00 \t\r\n")).replace("\\", "/")
        parts = urlsplit(cleaned)
        return parts.hostname, parts.path

    found: list[tuple[str, Callable[[str], tuple[str | None, str]]]] = [("urllib", stdlib), ("whatwg", whatwg)]
    try:
        from urllib3.util import parse_url

        found.append(("urllib3", lambda url: (parse_url(url).host, parse_url(url).path or "/")))
    except ImportError:  # pragma: no cover - urllib3 is installed with the dev extras' dependencies
        pass
    try:
        import httpx

        found.append(("httpx", lambda url: (httpx.URL(url).host, httpx.URL(url).raw_path.decode().split("?")[0])))
    except ImportError:  # pragma: no cover
        pass
    return found


PARSERS = _parsers()


def _server_paths(path: str) -> list[str]:
    """How a server may read a path it received: as is, dot segments resolved, decoded once or twice, with
    ``;params`` cut."""
    out = []
    for text in (path, unquote(path), unquote(unquote(path))):
        for cut in (text, "/".join(s.partition(";")[0] for s in text.split("/"))):
            out += [cut, posixpath.normpath(cut) if cut else "/"]
    return out


def _readings(url: str) -> list[tuple[str, str]]:
    """``(host, path)`` of ``url`` as each parser, then each server reading, sees it (parsers that refuse it
    send nothing and are left out)."""
    seen = []
    for _name, parse in PARSERS:
        try:
            host, path = parse(url if "://" in url or not url.lower().startswith("www.") else "http://" + url)
        except Exception:  # noqa: BLE001 - a client that refuses the URL sends nothing
            continue
        seen += [((host or "").lower(), p) for p in _server_paths(path or "/")]
    return seen


def _segments_under(path: str, prefix: tuple[str, ...]) -> bool:
    segments = tuple(s for s in path.split("/")[1:])
    return segments[: len(prefix)] == prefix


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(url=st.one_of(plain_authority, shapes, anything))
def test_a_trusted_host_is_the_host_every_client_reads(url: str) -> None:
    """Catches any host-parser differential: whenever the domain allow-list trusts a URL, every parser at
    hand (stdlib, WHATWG reading, urllib3, httpx) reads a host in the allowed domain."""
    if not _trusted(DOMAINS, url):
        return
    readings = _readings(url)
    assert readings, url
    assert all(host == DOMAIN or host.endswith("." + DOMAIN) for host, _ in readings), (url, readings)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(url=st.one_of(plain_authority, shapes, anything))
def test_a_trusted_path_stays_under_the_prefix_for_every_client_and_server(url: str) -> None:
    """Catches dot segments (literal, encoded, double-encoded, behind ;params, backslashed) or a missing
    segment boundary escaping a prefix: a trusted URL lies under it however it is parsed, sent and read."""
    if not _trusted(PREFIXES, url):
        return
    readings = _readings(url)
    assert readings, url
    for host, path in readings:
        assert host == HOST, (url, host)
        assert _segments_under(path, ("team", "reports")), (url, path)


@settings(max_examples=200, deadline=None)
@given(url=st.one_of(plain_authority, shapes, anything))
def test_strict_parsing_never_raises_and_is_stable(url: str) -> None:
    """Catches a strict parser that raises on hostile text, or reads its own canonical host otherwise."""
    parsed = strict_url(url)
    if parsed is not None:
        again = strict_url(f"{parsed.scheme}://{parsed.host}{':' + parsed.port if parsed.port else ''}{parsed.path}")
        assert again is not None and (again.host, again.port, again.readings) == (
            parsed.host,
            parsed.port,
            parsed.readings,
        )
