"""The background table builder: counts per environment, the share and group rules, exact."""

from __future__ import annotations

from pathlib import Path

from guard.evidence.specificity import Background
from guard.studies.background import build_table, gram_counts


def test_gram_counts_skip_structured_values() -> None:
    """Catches k-grams counted inside structured values or twice in one text."""
    counts, n = gram_counts(["hello world hello world", "mail bob@company.com"], 8)
    assert n == 2 and counts["hello wo"] == 1
    assert not any("company" in g for g in counts)


def test_build_table_exact() -> None:
    """Catches a gram kept when common in one environment only, or dropped when common in two."""
    groups = {
        "a": ["hello world!", "hello world?", "acct 1234567890"],
        "b": ["hello worlds", "hello world.", "x"],
        "c": ["acct 1234567890", "acct 1234567890"],
    }
    body = build_table(groups, 1 / 3, 2, "synthetic", "cmd")
    grams = body["grams"]
    assert grams == {"hello wo": 4, "ello wor": 4, "llo worl": 4, "lo world": 4}  # "acct 123": common in c only
    assert body["records"] == 8 and body["groups"] == {"a": 3, "b": 3, "c": 2}
    table = Background(body, "f" * 64)
    assert table.is_boilerplate("hello world")


def test_main_writes_a_loadable_table(tmp_path: Path, monkeypatch: object) -> None:
    """Catches a written table that the loader refuses."""
    import json

    import guard.studies.background as builder

    def records(models: object = None, seed: int = 0) -> tuple[list[tuple[str, object]], int]:
        from guard.records import user

        return [(s, user(i, "please do the following now")) for i, s in enumerate(["a", "a", "b", "b"])], 2

    monkeypatch.setattr(builder, "development_records", records)  # type: ignore[attr-defined]
    out = tmp_path / "t.json"
    assert builder.write_background(out).startswith(f"wrote {out}")
    table = Background(json.loads(out.read_text()), "f" * 64)
    assert table.is_boilerplate("please do the following")


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
