"""Every file reader splits JSON lines on "\\n" only and refuses duplicate keys and non-finite numbers;
`carbguard episodes convert` turns any bad input into one stderr line, exit code 2 and no output file."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from guard.audit import AuditLog, read_entries, verify
from guard.cli import main
from guard.corpora.episodes import load_episodes, read_episodes
from guard.errors import CorpusError
from guard.policy import Policy
from guard.runtime import Guard

SEPARATORS = ("\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r")
ALL = "".join(SEPARATORS)
FIX = Path(__file__).resolve().parents[1] / "fixtures" / "episodes"
OPENAI = json.loads((FIX / "openai_messages.json").read_text(encoding="utf-8"))


def _record(policy: Policy, tmp_path: Path, text: str) -> tuple[Path, Path]:
    episodes, audit = tmp_path / "episodes.jsonl", tmp_path / "audit.jsonl"
    g = Guard(policy, threshold=0.5, mode="shadow", record=episodes, audit=AuditLog(audit, fsync=False))
    for n in range(2):
        s = g.session(f"ep-{n}{text}")
        s.observe_user(f"user{text}")
        s.decide("read_certificate", {"name": f"pass{text}port"}, "c0")
        s.observe_result("c0", f"result{text}")
        s.observe_final(f"done{text}")
        s.close()
    return episodes, audit


@pytest.mark.parametrize("sep", [*SEPARATORS, ALL])
def test_recorded_episodes_with_line_separators_read_back(small_policy: Policy, tmp_path: Path, sep: str) -> None:
    """A recording whose tool results, user turns and ids hold a line separator reads back exactly.

    Catches the episodes reader splitting lines with str.splitlines (U+2028/U+2029/U+0085 are written raw).
    """
    path, _ = _record(small_policy, tmp_path, sep)
    episodes = load_episodes(path, small_policy)
    assert [e.episode_id for e in episodes] == [f"ep-0{sep}", f"ep-1{sep}"]
    texts = [getattr(r, "text", None) for r in episodes[0].records]
    assert texts == [f"user{sep}", "", f"result{sep}", f"done{sep}"]


@pytest.mark.parametrize("sep", [*SEPARATORS, ALL])
def test_audit_entries_with_line_separators_read_back(small_policy: Policy, tmp_path: Path, sep: str) -> None:
    """Audit entries of calls whose arguments hold a line separator read back and verify, one entry a line.

    Catches an audit reader splitting on anything other than b"\\n".
    """
    _, audit = _record(small_policy, tmp_path, sep)
    entries = read_entries(audit)
    assert verify(audit).ok and len(entries) == len(audit.read_bytes().split(b"\n")) - 1
    assert any(f"ep-0{sep}" == e.get("session") or f"ep-0{sep}" in json.dumps(e, ensure_ascii=False) for e in entries)


@pytest.mark.parametrize("sep", [*SEPARATORS, ALL])
def test_labels_with_line_separators_read_back(small_policy: Policy, tmp_path: Path, sep: str) -> None:
    """A label whose episode id and reason hold a line separator is read: catches the labels reader's splitlines."""
    from guard.ledger.labels import read_labels

    path = tmp_path / "l.jsonl"
    rows = [{"episode": f"ep-{n}{sep}", "harms": [], "by": f"rev{sep}", "why": f"why{sep}"} for n in range(2)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    labels = read_labels(path)
    assert sorted(labels) == [f"ep-0{sep}", f"ep-1{sep}"] and labels[f"ep-1{sep}"].line == 2
    assert labels[f"ep-0{sep}"].why == f"why{sep}"


def test_episodes_duplicate_key_refused(small_policy: Policy, tmp_path: Path) -> None:
    """An episode line with a key twice is refused naming file, line and key: catches last-wins decoding."""
    path, _ = _record(small_policy, tmp_path, "")
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[1] = lines[1].replace('"records": [', '"records": [], "records": [', 1)
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(CorpusError, match=r"episodes\.jsonl:2: duplicate key 'records'"):
        read_episodes(path, small_policy)


def test_episodes_non_finite_argument_refused(small_policy: Policy, tmp_path: Path) -> None:
    """An episode whose call arguments hold 1e999 is refused naming the key: catches it read as infinity."""
    path, _ = _record(small_policy, tmp_path, "")
    text = path.read_text(encoding="utf-8").replace('"name": "passport"', '"name": 1e999', 1)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"episodes\.jsonl:1: records\[1\]\.args\.name: number 1e999 overflows"):
        read_episodes(path, small_policy)


def test_labels_duplicate_harms_refused(tmp_path: Path) -> None:
    """A labels line with ``harms`` twice is refused (last-wins would drop the reviewer's harm and loosen λ̂).

    Catches the labels reader decoding with plain json.loads.
    """
    from guard.ledger.labels import read_labels

    path = tmp_path / "l.jsonl"
    path.write_text(
        '{"episode": "a", "harms": [], "by": "x", "why": ""}\n'
        '{"episode": "b", "harms": [{"category": "privacy_flow"}], "by": "x", "why": "", "harms": []}\n',
        encoding="utf-8",
    )
    with pytest.raises(CorpusError, match=r"l\.jsonl:2: duplicate key 'harms'"):
        read_labels(path)


def _openai(tmp_path: Path, mutate: Any) -> Path:
    data = copy.deepcopy(OPENAI)
    text = mutate(json.dumps(data, indent=1, ensure_ascii=False))
    path = tmp_path / "in.json"
    path.write_text(text, encoding="utf-8")
    return path


BAD_OPENAI = {
    "NaN argument": (lambda t: t.replace('"arguments": "{}"', '"arguments": "{\\"n\\": NaN}"', 1), "NaN"),
    "Infinity argument": (
        lambda t: t.replace('"arguments": "{}"', '"arguments": "{\\"n\\": Infinity}"', 1),
        "Infinity",
    ),
    "-Infinity argument": (
        lambda t: t.replace('"arguments": "{}"', '"arguments": "{\\"n\\": -Infinity}"', 1),
        "-Infinity",
    ),
    "1e999 argument": (lambda t: t.replace('"arguments": "{}"', '"arguments": "{\\"n\\": 1e999}"', 1), "1e999"),
    "duplicate argument": (
        lambda t: t.replace('"arguments": "{}"', '"arguments": "{\\"n\\": 1, \\"n\\": 2}"', 1),
        "duplicate key 'n'",
    ),
    "NaN in the file": (lambda t: t.replace('"model": "gpt-test"', '"model": NaN', 1), "meta.model: non-finite"),
    "1e999 in the file": (lambda t: t.replace('"model": "gpt-test"', '"model": 1e999', 1), "meta.model: number"),
    "duplicate in the file": (
        lambda t: t.replace('"model": "gpt-test"', '"model": "a", "model": "b"', 1),
        "duplicate key '[0].meta.model'",
    ),
    "lone surrogate": (lambda t: t.replace("Read my inbox.", "Read \\ud800", 1), "lone surrogate"),
    "JSON lines with NaN": (
        lambda t: (
            json.dumps(OPENAI[1])
            + "\n"
            + json.dumps(OPENAI[0]).replace('"model": "gpt-test"', '"model": NaN', 1)
            + "\n"
        ),
        "in.json:2: meta.model: non-finite",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_OPENAI))
def test_convert_bad_input_one_line_exit_2(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Non-finite numbers, duplicate keys and lone surrogates in converter input: one stderr line, exit 2, no file.

    Catches the converters' input read with plain json.loads (NaN then crashed the writer with a traceback;
    duplicates were kept last-wins).
    """
    mutate, needle = BAD_OPENAI[case]
    source = _openai(tmp_path, mutate)
    out = tmp_path / "out.jsonl"
    code = main(["episodes", "convert", "--from", "openai", str(source), "-o", str(out)])
    _, err = capsys.readouterr()
    lines = [line for line in err.split("\n") if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("carbguard: error:") and "in.json" in lines[0] and needle in lines[0], lines[0]
    assert not out.exists() and list(tmp_path.iterdir()) == [source]


@pytest.mark.parametrize("token", ["NaN", "Infinity", "1e999"])
def test_otel_messages_attribute_non_finite(token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A non-finite number inside an OTel messages attribute (JSON in a string) is one error line, exit 2.

    Catches the OTel converter decoding message attributes with plain json.loads.
    """
    text = (FIX / "otel_otlp.json").read_text(encoding="utf-8")
    needle = '"stringValue": "[{'
    assert needle in text
    source = tmp_path / "in.json"
    source.write_text(text.replace(needle, '"stringValue": "[{\\"x\\": ' + token + ", ", 1), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    code = main(["episodes", "convert", "--from", "otel", str(source), "-o", str(out)])
    _, err = capsys.readouterr()
    lines = [line for line in err.split("\n") if line.strip()]
    assert code == 2 and len(lines) == 1 and "messages attribute" in lines[0] and token in lines[0], err
    assert not out.exists()


def test_converted_separators_validate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A converted export whose tool result holds every line separator validates with the same episodes.

    Catches the converter's JSON-lines input or the episodes reader splitting at U+2028/U+2029/U+0085.
    """
    data = copy.deepcopy(OPENAI)
    data[0]["messages"][3]["content"] += ALL
    lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in data)
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(lines, encoding="utf-8")
    assert main(["episodes", "convert", "--from", "openai", str(source), "-o", str(out)]) == 0
    policy = str(FIX / "assistant_policy.yaml")
    assert main(["episodes", "validate", str(out), "--policy", policy]) == 0
    assert f"valid: {len(data)} episodes" in capsys.readouterr().out
