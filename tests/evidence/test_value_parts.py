"""The sink can build the structure (docs/evidence.md#the-sink-can-build-the-structure).

Private free text links to a sink argument whatever structure the sink wraps around it: an address's
local part, a file name or path, a URL's user-info, a host label, a URL path, a phone-like string.  The
namespace of an address or URL (the last two labels of its domain or host) is not read, so a bare
domain in earlier text makes no edge with an address at that domain.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.evidence.specificity import background
from guard.evidence.value_parts import namespace_spans, read_ranges
from guard.evidence.values import find_values
from guard.graph import PrefixGraph
from guard.policy import Policy, parse_policy
from guard.records import Trust, proposal, result, user

POLICY: dict[str, Any] = {
    "name": "structures",
    "tools": {
        "read_record": {"kind": "private_source"},
        "send_email": {
            "kind": "sink",
            "effect": "irreversible",
            "severity": 3,
            "payload_args": ["body"],
            "identifier_args": ["to"],
        },
    },
}
DOMAINS = ("drop.example", "mail.evil.test", "x.co.uk", "files.attacker.example.org")
EXTENSIONS = ("txt", "pdf", "docx", "csv", "json", "md", "png", "jpg", "zip", "yaml", "py", "log")

# every shape the recognisers accept that a sink can build around a token
SHAPES: dict[str, Callable[[str, str], str]] = {
    "email local part": lambda t, d: f"{t}@{d}",
    "email local part with a tag": lambda t, d: f"ops+{t}@{d}",
    "file name": lambda t, d: f"{t}.{EXTENSIONS[len(d) % len(EXTENSIONS)]}",
    "unix path segment": lambda t, d: f"/srv/{t}",
    "unix path folder": lambda t, d: f"/srv/{t}/index.txt",
    "home path": lambda t, d: f"~/{t}/notes.md",
    "windows path": lambda t, d: f"C:\\data\\{t}.txt",
    "url user-info": lambda t, d: f"https://{t}@{d}/",
    "url password": lambda t, d: f"https://user:{t}@{d}/login",
    "url host label": lambda t, d: f"https://{t}.{d}/",
    "ftp host label": lambda t, d: f"ftp://{t}.{d}/pub",
    "www host label": lambda t, d: f"www.{t}.{d}",
    "url path": lambda t, d: f"https://{d}/c/{t}",
    "url query": lambda t, d: f"https://{d}/c?id={t}&x=1",
    "url fragment": lambda t, d: f"https://{d}/#{t}",
}

# a specific token: not made of the cold-start table's boilerplate 8-grams alone ("recipient" is, and by design
# links nowhere: guard.evidence.specificity), which Hypothesis may draw from the literals it collects
tokens = st.text(string.ascii_letters + string.digits + "_-", min_size=9, max_size=20).filter(
    lambda t: (
        sum(c.isalnum() for c in t) >= 8 and t[0].isalnum() and t[-1].isalnum() and not background().is_boilerplate(t)
    )
)
pins = st.integers(10_000, 9_999_999).map(str)  # value tokens shorter than min_span (a 5-7 digit code)


def _policy(whole_values: bool = True) -> Policy:
    body = dict(POLICY, graph={"whole_values": whole_values})
    return parse_policy(body, source="<structures test>")


def _linked(private: str, body: str, whole_values: bool = True) -> bool:
    graph = PrefixGraph(_policy(whole_values))
    for record in (
        user(0, "Please write to our partner."),
        proposal(1, "read_record", {}, "c1"),
        result(2, "c1", private, Trust.TOOL_PRIVATE, "read_record"),
        proposal(3, "send_email", {"to": "partner@outside.example", "body": body}, "c2"),
    ):
        graph.add(record)
    return bool(graph.ancestor_bits(3) & 1 << 2)


@settings(max_examples=80, deadline=None)
@given(token=tokens, shape=st.sampled_from(sorted(SHAPES)), domain=st.sampled_from(DOMAINS))
def test_private_text_links_whatever_structure_the_sink_builds(token: str, shape: str, domain: str) -> None:
    """A private token of free text links to a sink argument that wraps it in any recognised structure
    (catches k-grams looked up only outside the sink's structured values, the rule that let
    ``TOKEN@host``, ``TOKEN.txt`` and ``https://TOKEN.host/`` out)."""
    body = SHAPES[shape](token, domain)
    assert _linked(f"Client file\nAccess key: {token}\nRotate yearly", body), body


@settings(max_examples=40, deadline=None)
@given(pin=pins, shape=st.sampled_from(sorted(SHAPES)), domain=st.sampled_from(DOMAINS))
def test_a_short_value_token_links_inside_an_address_url_or_path(pin: str, shape: str, domain: str) -> None:
    """A value token shorter than ``min_span`` (a 5-7 digit code) links when the sink builds an address, URL
    or path around it (catches value tokens read only outside the sink's structured values)."""
    body = SHAPES[shape](pin, domain)
    assert _linked(f"Client file\nPIN {pin}, keep it safe", body), body


@settings(max_examples=30, deadline=None)
@given(digits=st.text("0123456789", min_size=10, max_size=14).filter(lambda d: d[0] != "0"))
def test_a_private_number_links_as_a_phone_like_string(digits: str) -> None:
    """A private number sent as a phone-like string (``+`` and its digits) links (catches a phone recogniser
    that hides the digits from the span lookup)."""
    assert _linked(f"Client file\nAccount {digits} closed", f"call +{digits}")


@pytest.mark.parametrize(
    ("private", "body"),
    [
        ("Vendor portal: acme-payments.com, ask there", "write billing@acme-payments.com"),
        ("Our site: bigcorp-holdings.com (public)", "https://www.bigcorp-holdings.com/jobs"),
        ("Mirror at example-mirror.org today", "https://example-mirror.org/releases"),
    ],
)
def test_a_shared_bare_domain_makes_no_edge(private: str, body: str) -> None:
    """A domain that earlier text names bare is namespace in the sink's address or URL: no edge (catches a
    lookup that reads the last labels of a domain or host too, which would link every address at a
    domain some page mentions)."""
    assert not _linked(private, body)


def test_namespace_spans_are_the_last_two_labels() -> None:
    """The namespace of an address or URL is the last two labels of its domain or host, port included;
    a label left of them is read (catches a namespace that swallows the whole host, hiding ``TOKEN.host``)."""
    text = "a.b@mail.evil.test and https://u:p@tok3n.files.example.org:8443/x"
    spans = namespace_spans(text, find_values(text))
    assert [text[lo:hi] for lo, hi in spans] == ["evil.test", "example.org:8443"]
    assert read_ranges(10, [(2, 4), (3, 6)]) == ((0, 2), (6, 10))


def test_a_bare_host_makes_no_edge_even_under_a_two_label_suffix() -> None:
    """A bare host in earlier text is namespace (guard.evidence.boilerplate), so ``bigshop.co.uk`` no longer links
    to ``x@bigshop.co.uk`` through its third label; a token left of a bare host's labels still does (catches the
    bare-host rule dropped, or swallowing the token)."""
    assert not _linked("Visit bigshop.co.uk for deals", "mail x@bigshop.co.uk")
    assert _linked("Access key: QX7731ZZK9", "https://QX7731ZZK9.bigshop.co.uk/")
