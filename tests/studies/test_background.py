"""The background table builders: the cold-start corpus, AgentDojo's suites (by sessions), reproducible."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard.evidence.specificity import Background
from guard.studies.background import gram_counts


def test_gram_counts_skip_structured_values() -> None:
    """Catches k-grams counted inside structured values or twice in one text."""
    counts, n = gram_counts(["hello world hello world", "mail bob@company.com"], 8)
    assert n == 2 and counts["hello wo"] == 1
    assert not any("company" in g for g in counts)


def test_the_agentdojo_table_counts_sessions_in_each_suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A k-gram common (by sessions) in two suites enters, one common in one suite only or held by private text does
    not, and the written table loads (catches the suite rule, the session floor or the private rule dropped from
    ``carbguard data background --agentdojo``)."""
    import json

    import guard.studies.background as builder
    from guard.records import Episode, EpisodeMeta, Trust, proposal, result, user

    def episode(n: int, suite: str, said: str, private: str) -> Episode:
        records = (user(0, said), proposal(1, "read", {}, "c"), result(2, "c", private, Trust.TOOL_PRIVATE, "read"))
        return Episode(f"{suite}{n}", records, EpisodeMeta(suite=suite))

    def episodes(models: object = None, seed: int = 0) -> list[Episode]:
        common = [episode(n, s, "please do the following now", "secret ledger 4471") for s in "ab" for n in range(3)]
        return common + [episode(n, "c", "only suite c says this", "please do the paperwork") for n in range(3)]

    monkeypatch.setattr(builder, "development_episodes", episodes)
    out = tmp_path / "t.json"
    assert builder.write_background(out).startswith(f"wrote {out}")
    body = json.loads(out.read_text())
    table = Background(body, "f" * 64)
    assert table.is_boilerplate("the following now") and not table.is_boilerplate("please do the")
    assert not table.is_boilerplate("only suite c says") and not table.is_boilerplate("secret ledger")
    assert body["report"]["by_class"] == {"user": len(body["grams"])}


def test_shipped_table_reproduces_bit_for_bit(tmp_path: Path) -> None:
    """Catches a shipped background table that its recorded command no longer reproduces (drifted
    recognisers, data or builder)."""
    import json
    import shlex

    from guard.cli import main
    from guard.evidence.specificity import BACKGROUND_PATH

    argv = shlex.split(json.loads(BACKGROUND_PATH.read_text(encoding="utf-8"))["command"])
    assert argv[:3] == ["carbguard", "data", "background"]
    out = tmp_path / "kgrams.json"
    assert main([*argv[1:], "--out", str(out)]) == 0
    assert out.read_bytes() == BACKGROUND_PATH.read_bytes()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--episodes", "e.jsonl", "--out", "t.json"], "--policy"),
        (["--episodes", "e.jsonl", "--policy", "p.json", "--out", "t.json", "--min-groups", "2"], "--min-groups"),
    ],
)
def test_the_episodes_table_refuses_what_it_cannot_keep_private(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``data background --episodes`` without the policy that says which text is private, or with the suites'
    --min-groups, fails naming the option (catches a table built with every record's text counted as public)."""
    from guard.cli import main

    assert main(["data", "background", *argv]) == 2
    assert named in capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--min-sessions", "2"], ["--min-share", "0"], ["--min-share", "1.5"]])
def test_the_floor_options_are_bounded(bad: list[str]) -> None:
    """A floor of fewer than 3 sessions or a share outside (0, 1) is refused by the parser (catches a table built
    from one or two sessions)."""
    from guard.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["data", "background", "--agentdojo", *bad])
    assert exited.value.code == 2
