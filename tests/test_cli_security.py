"""The CLI's safety rules: outputs never overwrite an input and are written atomically, the report refuses
hostile audit entries, checkpoints against a keyed log must be MAC'd, an unkeyed verify says what it did not
check, and every command that reads an audit log takes --key-file.  All through ``guard.cli.main``."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from guard.audit import AuditLog, read_entries
from guard.cli import main

KEY = b"k" * 32
FIX = Path(__file__).resolve().parent / "fixtures" / "episodes"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def _error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("carbguard: error:"), err
    return lines[0]


def _decision(**fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "session": "s1",
        "proposal_index": 2,
        "call_id": "c1",
        "tool": "send_email",
        "verdict": "execute",
        "reason": "below_threshold",
        "score": 0.1,
        "threshold": 0.5,
        "selected": [0, 1],
        "edges_in": [[0, "E4"]],
        "features": {"provenance_path": False},
        "probes": [],
        "latency_us": 12.5,
    }
    entry.update(fields)
    return entry


def _log(path: Path, entries: list[dict[str, Any]], key: bytes | None = None) -> Path:
    log = AuditLog(path, fsync=False, key=key)
    for entry in entries:
        log.write(entry)
    return path


def _key_file(tmp_path: Path) -> Path:
    path = tmp_path / "deploy.key"
    path.write_bytes(KEY)
    return path


# --------------------------------------------------------------------------- outputs never overwrite inputs


def _same(log: Path, out: Path) -> None:
    assert out == log


def _hard(log: Path, out: Path) -> None:
    os.link(log, out)


def _sym(log: Path, out: Path) -> None:
    out.symlink_to(log)


@pytest.mark.parametrize("make", [_same, _hard, _sym], ids=["same-path", "hard-link", "symlink"])
@pytest.mark.parametrize("command", ["checkpoint", "report"])
def test_output_over_an_audit_input_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make: Any, command: str
) -> None:
    """Catches `audit checkpoint LOG -o X` / `report LOG -o X` writing over LOG when X is LOG, a hard link to it or
    a symlink to it (planted: check_output's st_ino comparison removed -> the hard-link cases fail; both comparisons
    removed -> all six fail; the old code exited 0 and destroyed the log)."""
    log = _log(tmp_path / "audit.jsonl", [_decision()])
    before = log.read_bytes()
    out = log if make is _same else tmp_path / "out"
    make(log, out)
    argv = (
        ["audit", "checkpoint", str(log), "-o", str(out)]
        if command == "checkpoint"
        else ["report", str(log), "-o", str(out)]
    )
    code, _, err = _run(argv, capsys)
    assert code == 2
    line = _error_line(err)
    assert str(out) in line and "input" in line and str(log) in line
    assert log.read_bytes() == before


def test_episodes_convert_over_its_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches `episodes convert -o INPUT` overwriting its input (planted: _convert passing no inputs to
    check_output/write_output)."""
    src = tmp_path / "msgs.json"
    src.write_text(json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]))
    before = src.read_bytes()
    code, _, err = _run(["episodes", "convert", "--from", "openai", str(src), "-o", str(src)], capsys)
    assert code == 2 and str(src) in _error_line(err)
    assert src.read_bytes() == before


def test_failed_write_leaves_old_output_intact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Catches an output written in place, or a temporary file left behind, when the write fails (planted:
    write_output opening the target itself instead of a temporary file -> the old checkpoint is lost)."""
    log = _log(tmp_path / "audit.jsonl", [_decision()])
    out = tmp_path / "cp.json"
    out.write_text("old checkpoint\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    code, _, err = _run(["audit", "checkpoint", str(log), "-o", str(out)], capsys)
    assert code == 2 and "No space left" in _error_line(err)
    assert out.read_text() == "old checkpoint\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.jsonl", "cp.json"]


def test_output_is_written_and_replaced(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches the helper refusing an ordinary existing output or not replacing it (planted: clash check on
    any existing file)."""
    log = _log(tmp_path / "audit.jsonl", [_decision()])
    out = tmp_path / "cp.json"
    out.write_text("stale\n")
    code, _, _ = _run(["audit", "checkpoint", str(log), "-o", str(out)], capsys)
    assert code == 0 and json.loads(out.read_text())["entries"] == 1


# --------------------------------------------------------------------------- report: hostile entries


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"selected": ["x"]}, "selected"),
        ({"selected": [1_000_000_000]}, "selected"),
        ({"selected": [2]}, "selected"),  # the proposal itself is not in its prefix
        ({"selected": "01"}, "selected"),
        ({"edges_in": [[0]]}, "edges_in"),
        ({"edges_in": [["a", "E1"]]}, "edges_in"),
        ({"edges_in": {"0": "E1"}}, "edges_in"),
        ({"proposal_index": 1_000_000_000}, "proposal_index"),
        ({"proposal_index": True}, "proposal_index"),
        ({"probes": 5}, "probes"),
        ({"latency_us": 10**400}, "latency_us"),
        ({"threshold": 10**400}, "threshold"),
        ({"score": "high"}, "score"),
        ({"features": []}, "features"),
        ({"tool": ["send_email"]}, "tool"),
    ],
)
def test_report_refuses_hostile_entries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], name: str
) -> None:
    """Catches a traceback, or a run without end, on a hostile audit line (planted: check_entry's selected
    bound `item < bound` dropped -> [1000000000] and [2] pass; check_audit_entries not called -> no line number;
    each wrong type here raised TypeError/ValueError/OverflowError before)."""
    log = _log(tmp_path / "audit.jsonl", [_decision(call_id="c0", proposal_index=1, selected=[0]), _decision(**fields)])
    out = tmp_path / "r.html"
    start = time.monotonic()
    code, _, err = _run(["report", str(log), "-o", str(out)], capsys)
    assert time.monotonic() - start < 10
    assert code == 2
    line = _error_line(err)
    assert str(log) in line and "line 2" in line and repr(name) in line
    assert not out.exists()


def test_views_from_audit_refuses_hostile_entries() -> None:
    """Catches the library path (render_audit_report, views_from_audit) reaching int("x") with a traceback
    (planted: the check_entry call in views_from_audit removed -> ValueError instead of EntryError)."""
    from guard.report.entries import EntryError
    from guard.report.model import views_from_audit

    with pytest.raises(EntryError, match=r"audit entry 2: field 'selected'") as caught:
        views_from_audit([_decision(), _decision(selected=["x"])])
    assert caught.value.field == "selected"


def test_report_work_is_bounded_by_the_entries(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches the audit view drawing every index up to the highest one (planted: audit_indices always
    range(top) -> 20 000 placeholder records for one entry)."""
    from guard.report.model import views_from_audit

    entry = _decision(proposal_index=19_999, selected=[19_998], edges_in=[[0, "E4"]])
    (view,) = views_from_audit([entry])
    assert [r.index for r in view.records] == [0, 19_998, 19_999]
    log = _log(tmp_path / "audit.jsonl", [entry])
    assert _run(["report", str(log), "-o", str(tmp_path / "r.html")], capsys)[0] == 0


def test_report_small_gaps_still_drawn() -> None:
    """Catches the bound hiding the unknown records of an ordinary log (planted: audit_indices always sparse)."""
    from guard.report.model import UNKNOWN, views_from_audit

    (view,) = views_from_audit([_decision(proposal_index=5, selected=[1], edges_in=[])])
    assert [r.index for r in view.records] == [0, 1, 2, 3, 4, 5]
    assert view.records[2].kind == UNKNOWN


# --------------------------------------------------------------------------- checkpoints and keys


def test_macless_checkpoint_of_a_cut_keyed_log_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a keyed verify accepting a checkpoint without a MAC: cut the keyed log, write a MAC-less checkpoint
    matching the cut log (planted: the `keyed is not True or given is None` refusal removed -> exit 0, the attack
    the old code let through)."""
    key_file = _key_file(tmp_path)
    log = _log(tmp_path / "audit.jsonl", [_decision(call_id=f"c{k}") for k in range(4)], key=KEY)
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(b"\n".join(lines[:2]) + b"\n")
    last = read_entries(log)[-1]["hash"]
    forged = tmp_path / "forged.json"
    forged.write_text(
        json.dumps({"format": "carbguard-audit-checkpoint/1", "entries": 2, "last_hash": last, "keyed": False})
    )
    code, out, _ = _run(["audit", "verify", str(log), "--key-file", str(key_file), "--checkpoint", str(forged)], capsys)
    assert code == 1 and "checkpoint check" in out and "no MAC" in out


def test_keyed_checkpoint_roundtrip_and_unkeyed_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches a genuine keyed checkpoint being refused (planted: MAC compared over the wrong body), and a keyed
    checkpoint against an unkeyed verify passing (planted: `key is None and keyed` check removed)."""
    key_file = _key_file(tmp_path)
    log = _log(tmp_path / "audit.jsonl", [_decision(call_id=f"c{k}") for k in range(3)], key=KEY)
    point = tmp_path / "cp.json"
    assert _run(["audit", "checkpoint", str(log), "--key-file", str(key_file), "-o", str(point)], capsys)[0] == 0
    code, out, _ = _run(["audit", "verify", str(log), "--key-file", str(key_file), "--checkpoint", str(point)], capsys)
    assert code == 0 and "checkpoint of 3 entries matches" in out and "NOT checked" not in out
    plain = _log(tmp_path / "plain.jsonl", [_decision(call_id=f"c{k}") for k in range(3)])
    body = json.loads(point.read_text())
    body["last_hash"] = read_entries(plain)[-1]["hash"]
    point.write_text(json.dumps(body))
    code, out, _ = _run(["audit", "verify", str(plain), "--checkpoint", str(point)], capsys)
    assert code == 1 and "the checkpoint is keyed; verify it with --key-file" in out


def test_unkeyed_verify_says_what_it_did_not_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches an unkeyed verify reporting plain OK / exit 0 (planted: the EXIT_UNAUTHENTICATED branch removed ->
    exit 0; the `not self.keyed` clause removed from describe -> no NOT checked text)."""
    log = _log(tmp_path / "audit.jsonl", [_decision(call_id=f"c{k}") for k in range(2)])
    code, out, _ = _run(["audit", "verify", str(log)], capsys)
    assert code == 4
    assert "chain intact; NOT checked: truncation, re-chaining (unkeyed log; use a key and checkpoints)" in out
    point = tmp_path / "cp.json"
    assert _run(["audit", "checkpoint", str(log), "-o", str(point)], capsys)[0] == 0
    code, out, _ = _run(["audit", "verify", str(log), "--checkpoint", str(point)], capsys)
    assert code == 4 and "NOT checked: re-chaining" in out
    log.write_bytes(log.read_bytes().replace(b'"c1"', b'"cX"'))
    assert _run(["audit", "verify", str(log)], capsys)[0] == 1


def test_report_reads_a_keyed_log_with_key_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Catches `report` ignoring --key-file (planted: key not passed to render_audit_report -> the note says the
    key check failed) and the option missing altogether (argparse exit 2)."""
    key_file = _key_file(tmp_path)
    log = _log(tmp_path / "audit.jsonl", [_decision()], key=KEY)
    out = tmp_path / "r.html"
    assert _run(["report", str(log), "--key-file", str(key_file), "-o", str(out)], capsys)[0] == 0
    html = out.read_text()
    assert "OK: 1 entries verify (keyed chain)" in html and "key check" not in html
    assert _run(["report", str(log), "-o", str(out)], capsys)[0] == 0
    assert "key check" in out.read_text()


def test_calibrate_and_policy_init_outputs_over_inputs_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Catches `calibrate --out EPISODES` and `policy init --from-openai-tools T --out T --force` overwriting their
    input (planted: calibrate's and policy init's input lists emptied -> the artifact / skeleton replaces the input)."""
    episodes = tmp_path / "episodes.jsonl"
    episodes.write_bytes((FIX / "assistant.jsonl").read_bytes())
    before = episodes.read_bytes()
    code, _, err = _run(
        [
            "calibrate",
            "--policy",
            str(FIX / "assistant_policy.yaml"),
            "--episodes",
            str(episodes),
            "--alpha",
            "0.3",
            "--out",
            str(episodes),
        ],
        capsys,
    )
    assert code == 2 and "--out" in _error_line(err) and episodes.read_bytes() == before
    tools = tmp_path / "tools.json"
    schema = {"name": "read_file", "description": "Read a file", "parameters": {"type": "object", "properties": {}}}
    tools.write_text(json.dumps([{"type": "function", "function": schema}]))
    before = tools.read_bytes()
    code, _, err = _run(["policy", "init", "--from-openai-tools", str(tools), "--out", str(tools), "--force"], capsys)
    assert code == 2 and str(tools) in _error_line(err) and tools.read_bytes() == before
