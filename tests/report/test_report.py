"""The decision report: self-contained HTML, escaping, redaction, and what it shows about each decision."""

from __future__ import annotations

import json
import re
import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from guard.audit import AuditLog, MemoryAudit
from guard.calibration.replay import replay_decisions
from guard.decision import Certification, Reason, Verdict
from guard.errors import CorpusError, GuardError
from guard.policy import Policy, parse_policy
from guard.records import Episode, Trust, final, proposal, result, user
from guard.redaction import hash_value
from guard.report import (
    render_audit_report,
    render_episode_report,
    render_replay_report,
    write_audit_report,
    write_episode_report,
)
from guard.report.page import script_json
from guard.runtime import Guard, Session
from guard.safecommit.controller import step
from guard.safecommit.types import Action, ProbeSpec, World

SECRET_ARG = "wire-note-7Q2Z-ONLY-IN-ARGS"
HOSTILE = '<script>alert("x")</script><img src="https://evil.example/p.png" onerror="steal()"></pre></script>'
CERT = "Certificate: passport\nHolder: Emma Johnson\nNumber: X4821-99317\nExpires: 2031-04-30"


class _Tags(HTMLParser):
    """Collects every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _tags(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = _Tags()
    parser.feed(html)
    return parser.tags


def _episode_data(html: str) -> list[dict[str, Any]]:
    blocks = re.findall(r'<script type="application/json" class="episode-data">(.*?)</script>', html, re.S)
    return [json.loads(block) for block in blocks]


def leak_episode(episode_id: str = "leak-1") -> Episode:
    """Certificate read → note carrying its number → e-mail of the note (with hostile inbox text)."""
    records = (
        user(0, "Tidy up my documents and send the summary to partners@newsletter.example."),
        proposal(1, "read_certificate", {"name": "passport"}, "c1"),
        result(2, "c1", CERT, Trust.TOOL_PRIVATE, "read_certificate"),
        proposal(3, "read_inbox", {}, "c2"),
        result(4, "c2", "From: promo@deals.example\n" + HOSTILE, Trust.TOOL_UNTRUSTED, "read_inbox"),
        proposal(5, "create_note", {"title": SECRET_ARG, "body": "Passport number X4821-99317"}, "c3"),
        result(6, "c3", "Note created: note-17", Trust.TOOL_PUBLIC, "create_note"),
        proposal(
            7, "send_email", {"to": "partners@newsletter.example", "subject": "notes", "body": "X4821-99317"}, "c4"
        ),
        result(8, "c4", "sent", Trust.TOOL_PUBLIC, "send_email"),
        final(9, "Done."),
    )
    return Episode(episode_id, records)


@pytest.fixture
def leak_guard(small_policy: Policy) -> Guard:
    """A G-CARB guard at λ = 0.5: the reads and the note pass, the e-mail of the number is refused."""
    return Guard(small_policy, threshold=0.5)


def test_report_is_self_contained(leak_guard: Guard) -> None:
    """No attribute points outside the file; no external script, stylesheet or import; a CSP forbids the network."""
    html = render_episode_report(leak_guard, leak_episode())
    for tag, attrs in _tags(html):
        for name in ("src", "href", "xlink:href", "action", "formaction", "poster", "data"):
            value = (attrs.get(name) or "").strip().lower()
            assert not value or value.startswith(("#", "data:")), f"<{tag} {name}={value!r}> leaves the file"
        assert not (tag == "script" and "src" in attrs)
        assert tag != "link"
    assert "@import" not in html
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", html)
    assert "Content-Security-Policy" in html and "default-src 'none'" in html


def test_tool_text_is_escaped(leak_guard: Guard) -> None:
    """Injected HTML in a tool result is shown as text, never as markup."""
    html = render_episode_report(leak_guard, leak_episode())
    assert HOSTILE not in html
    assert "<img" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert html.count("<script") == html.count("</script>") == 2  # the data block and the inlined script


def test_audit_fields_are_escaped(tmp_path: Path) -> None:
    """Text from an audit log (session, tool, message) is escaped too."""
    entry = {
        "session": "<b>s</b>",
        "proposal_index": 1,
        "call_id": "c<1>",
        "tool": "<i>tool</i>",
        "args": {"x": "sha256:00"},
        "verdict": "escalate",
        "reason": "unknown_tool",
        "message": HOSTILE,
        "score": None,
        "threshold": 0.5,
        "selected": [],
        "edges_in": [],
        "features": {},
    }
    log = AuditLog(tmp_path / "audit.jsonl", fsync=False)
    log.write(entry)
    html = render_audit_report(tmp_path / "audit.jsonl")
    assert "<i>tool</i>" not in html and "&lt;i&gt;tool&lt;/i&gt;" in html
    assert "<b>s</b>" not in html and HOSTILE not in html


def test_hashed_args_stay_hashed_in_audit_report(small_policy: Policy, tmp_path: Path) -> None:
    """The audit report shows the hash the log holds, never the value."""
    path = tmp_path / "audit.jsonl"
    guard = Guard(small_policy, threshold=0.5, audit=path)
    replay_decisions(guard, leak_episode())
    html = render_audit_report(path, policy=small_policy)
    assert SECRET_ARG not in html
    assert hash_value(SECRET_ARG) in html


def test_episode_report_hashes_args_unless_allowed_raw(policy_data: dict[str, Any]) -> None:
    """Replay hashes argument values with redact_args; names the policy allows raw are shown raw."""
    hashed = render_episode_report(Guard(parse_policy(policy_data), threshold=0.5), leak_episode())
    assert SECRET_ARG not in hashed and hash_value(SECRET_ARG) in hashed
    policy_data["audit"] = {"raw_args": ["title"]}
    raw = render_episode_report(Guard(parse_policy(policy_data), threshold=0.5), leak_episode())
    assert SECRET_ARG in raw


def test_episode_report_matches_replay(leak_guard: Guard) -> None:
    """The report's decisions are the replay's: same verdicts, selections; the e-mail is the stop."""
    decisions = replay_decisions(leak_guard, leak_episode())
    html = render_episode_report(leak_guard, leak_episode())
    (data,) = _episode_data(html)
    assert [d["selected"] for d in data["decisions"]] == [list(d.selected) for d in decisions]
    stop = next(k for k, d in enumerate(decisions) if d.verdict is not Verdict.EXECUTE)
    assert decisions[stop].tool == "send_email" and decisions[stop].reason is Reason.RISK_BUDGET
    assert data["initial"] == stop
    assert "risk score" in html and "exceeds the threshold set by hand" in html


def test_path_runs_from_private_source_to_sink(leak_guard: Guard) -> None:
    """The emphasised path of the e-mail is certificate read → note → e-mail, with the edges between."""
    (data,) = _episode_data(render_episode_report(leak_guard, leak_episode()))
    email = next(d for d in data["decisions"] if d["node"] == 7)
    assert email["pathNodes"] == [2, 5, 7]
    assert "5-7" in email["pathEdges"] and "2-5" in email["pathEdges"]
    assert next(d for d in data["decisions"] if d["node"] == 3)["pathNodes"] == []


def test_graph_draws_every_record_and_edge_type(leak_guard: Guard) -> None:
    """One node per record, one path per edge, each edge styled by its type; the legend names E1–E4."""
    html = render_episode_report(leak_guard, leak_episode())
    nodes = [a for t, a in _tags(html) if t == "g" and "node" in (a.get("class") or "").split()]
    assert [int(a["data-index"] or -1) for a in nodes] == list(range(10))
    edge_classes = {a["class"] for t, a in _tags(html) if t == "path" and "edge" in (a.get("class") or "")}
    assert {"edge E1", "edge E2"} <= edge_classes
    for etype in ("E1", "E2", "E3", "E4"):
        assert f"{etype} " in html


def test_feature_table_is_value_times_weight(leak_guard: Guard) -> None:
    """Every fired feature contributes its policy weight; the sum row equals the score."""
    html = render_episode_report(leak_guard, leak_episode())
    detail = html.split('<div class="detail" data-dec="3" hidden>', 1)[1].split('<div class="detail"', 1)[0]
    rows = re.findall(
        r"<tr class=\"(on|off)\"><td><code>(\w+)</code></td><td>[^<]*</td><td>([\d.]+)</td><td>([\d.]+)</td>", detail
    )
    weights = leak_guard.policy.scorer.weights.model_dump()
    assert {name for _, name, _, _ in rows} == set(weights)
    for state, name, weight, contribution in rows:
        assert float(weight) == pytest.approx(weights[name])
        assert float(contribution) == pytest.approx(weights[name] if state == "on" else 0.0)
    score = replay_decisions(leak_guard, leak_episode())[3].score
    assert sum(float(c) for *_, c in rows) == pytest.approx(score)


def test_replay_leaves_the_guards_audit_alone(small_policy: Policy) -> None:
    """Rendering replays on a copy of the guard: its own audit sink gets no entries."""
    audit = MemoryAudit()
    render_episode_report(Guard(small_policy, threshold=0.5, audit=audit), leak_episode())
    assert audit.entries == []


class _SafeCommitCertifier:
    """A certifier whose log is a real SafeCommit log: two worlds, the attacker's blocks the send."""

    def certify(self, session: Session, node: int, spec: Any) -> Certification:
        worlds = [World("user_named", {"recipient": "user"}, 0.1), World("from_untrusted", {"recipient": "inbox"}, 0.3)]
        actions = [Action("send"), Action("draft", reward=0.5, reversible=True)]
        safe: dict[str, list[str]] = {"user_named": ["send", "draft"], "from_untrusted": []}
        probe = ProbeSpec("lookup_contact", 1.0, {"user_named": "known", "from_untrusted": "unknown"})
        out = step(worlds, actions, safe, 0.5, [probe], budget=0)
        return Certification(Verdict(out.verdict), Reason.NOT_CERTIFIED, "not certified", log=out.to_dict())


def test_safecommit_log_is_rendered(small_policy: Policy) -> None:
    """Retained worlds, signatures per action, blocking worlds and the probe budget appear in the detail."""
    guard = Guard(small_policy, threshold=10.0, certifier=_SafeCommitCertifier())
    html = render_episode_report(guard, leak_episode())
    assert "Retained safety classes (signatures)" in html
    assert "Blocking worlds" in html and "from_untrusted" in html and "user_named" in html
    assert "Γ ∋ <code>send</code>" in html and "probe budget 0" in html


def test_frontier_png_is_embedded(leak_guard: Guard, tmp_path: Path) -> None:
    """A frontier PNG becomes a data URI; a file that is not a PNG is refused."""
    png = tmp_path / "frontier.png"
    png.write_bytes(_tiny_png())
    html = render_replay_report(leak_guard, [leak_episode()], frontier_png=png)
    assert 'src="data:image/png;base64,' in html
    bogus = tmp_path / "frontier.txt"
    bogus.write_text("not a png")
    with pytest.raises(GuardError, match="not a PNG"):
        render_replay_report(leak_guard, [leak_episode()], frontier_png=bogus)


def _tiny_png() -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\x00")) + chunk(b"IEND", b"")
    )


def test_audit_overview_counts_and_chain(small_policy: Policy, tmp_path: Path) -> None:
    """The overview counts verdicts per session and reports the hash chain; a tampered log says FAILED."""
    path = tmp_path / "audit.jsonl"
    guard = Guard(small_policy, threshold=0.5, audit=path)
    for k in range(2):
        replay_decisions(guard, leak_episode(f"leak-{k}"))
    html = render_audit_report(path)
    assert "OK: 8 entries verify" in html
    assert '<div class="big">2</div><div>episodes</div>' in html
    assert '<div class="big">2</div><div>verdict escalate</div>' in html
    assert 'href="#ep-0"' in html and 'href="#ep-1"' in html
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"read_inbox"', '"read_inbox2"')
    path.write_text("\n".join(lines) + "\n")
    assert "FAILED at line 2" in render_audit_report(path)


def test_write_functions(leak_guard: Guard, small_policy: Policy, tmp_path: Path) -> None:
    """The CLI entry points write the file; an unknown episode id names the closest one."""
    out = write_episode_report([leak_episode()], "leak-1", leak_guard, tmp_path / "sub" / "r.html")
    assert out.read_text().startswith("<!DOCTYPE html>")
    with pytest.raises(CorpusError, match="did you mean leak-1"):
        write_episode_report([leak_episode()], "leak-2", leak_guard, tmp_path / "x.html")
    path = tmp_path / "audit.jsonl"
    replay_decisions(Guard(small_policy, threshold=0.5, audit=path), leak_episode())
    assert write_audit_report(path, tmp_path / "a.html").read_text().endswith("</html>\n")


def test_script_json_cannot_close_the_script() -> None:
    """Data embedded in a script element cannot end it or open markup."""
    text = script_json({"x": "</script><b>&"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"x": "</script><b>&"}


def test_degenerate_audit_logs_render(tmp_path: Path) -> None:
    """An empty log, a fail-closed entry without a proposal index, an infinite λ and a torn line all render."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert '<div class="big">0</div><div>decisions</div>' in render_audit_report(empty)
    path = tmp_path / "odd.jsonl"
    log = AuditLog(path, fsync=False)
    log.write({"session": "s", "verdict": "escalate", "error": "RuntimeError('boom')"})
    log.write(
        {"session": "s", "proposal_index": 2, "tool": "t", "verdict": "execute", "score": 0.2, "threshold": "inf"}
    )
    with path.open("a") as handle:
        handle.write('{"session": "s", "verd')
    html = render_audit_report(path)
    assert "RuntimeError(&#x27;boom&#x27;)" in html
    assert "score 0.200 vs λ̂ +∞" in html
    assert "1 lines could not be parsed" in html and "torn" in html
