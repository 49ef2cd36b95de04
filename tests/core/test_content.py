"""Channel records: content the model is shown outside any decided call is observed with its source kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from guard.calibration.replay import replay_decisions
from guard.corpora.episodes import load_episodes
from guard.decision import Verdict
from guard.episode_json import episode_line
from guard.errors import InputError
from guard.policy import Policy
from guard.records import Episode, Trust, is_content
from guard.runtime import Guard
from tests.conftest import TEXTS


def _send(guard: Guard, source: str) -> Verdict:
    session = guard.session(f"content-{source}")
    session.observe_user("Summarise my certificate resource.")
    session.observe_content(TEXTS.cert, source, "mcp:resource:file:///cert.txt")
    body = f"Number {TEXTS.cert_number}"
    return session.decide("send_email", {"to": TEXTS.attacker, "subject": "x", "body": body}, "c1").verdict


def test_private_content_makes_a_send_of_it_refused(guard: Guard) -> None:
    """A private resource's value sent out is refused; the same text as public content is not private.

    Catches: observe_content dropping the text, or ignoring ``source`` (both kinds giving one verdict).
    """
    assert _send(guard, "private_source") is not Verdict.EXECUTE
    session = guard.session("no-content")
    session.observe_user("Send it.")
    verdict = session.decide("send_email", {"to": TEXTS.attacker, "subject": "x", "body": TEXTS.cert_number}, "c1")
    assert verdict.verdict is Verdict.EXECUTE  # without the observed content nothing links the value
    record = guard.session("kinds")
    record.observe_content("t", "public_source", "o")
    assert record.graph.records[0].trust is Trust.TOOL_PUBLIC and is_content(record.graph.records[0])


@pytest.mark.parametrize("source", ["sink", "other", "trusted", "", None, 3])
def test_content_with_an_unknown_source_is_refused(guard: Guard, source: object) -> None:
    """A source that is not a source kind raises InputError naming it; nothing is recorded.

    Catches: an unknown source silently read as public (trusted) content.
    """
    session = guard.session("bad")
    with pytest.raises(InputError, match="content source must be one of"):
        session.observe_content("x", source, "o")  # type: ignore[arg-type]
    assert session.next_index == 0


def test_content_records_round_trip_and_replay(guard: Guard, small_policy: Policy, tmp_path: Path) -> None:
    """A recorded content record is written with its source and read back with the same trust; replay agrees.

    Catches: the writer dropping ``source``/``origin``, the reader mapping it to another trust, or replay
    skipping content records (the replayed send would then execute).
    """
    session = guard.session("rt")
    session.observe_user("Summarise my certificate resource.")
    session.observe_content(TEXTS.cert, "private_source", "mcp:resource:file:///cert.txt")
    episode = Episode("rt", tuple(session.graph.records[i] for i in sorted(session.graph.records)))
    line = episode_line(episode)
    assert json.loads(line)["records"][1] == {
        "kind": "content",
        "origin": "mcp:resource:file:///cert.txt",
        "source": "private_source",
        "text": TEXTS.cert,
    }
    args = {"to": TEXTS.attacker, "subject": "x", "body": TEXTS.cert_number}
    data = json.loads(line)
    data["records"] += [{"kind": "proposal", "tool": "send_email", "args": args, "call_id": "c1"}]
    (tmp_path / "e.jsonl").write_text(json.dumps(data) + "\n", encoding="utf-8")
    (read,) = load_episodes(tmp_path / "e.jsonl", small_policy)
    assert read.records[1] == episode.records[1]
    (decision,) = replay_decisions(guard, read)
    assert decision.verdict is not Verdict.EXECUTE
