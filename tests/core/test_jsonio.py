"""Strict JSON reading (guard/jsonio.py) and its use by the artifact, policy and κ readers; the one UTF-8
file reader (:func:`read_utf8`) and the one atomic writer (:func:`write_atomic`) and their callers."""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guard.artifact import build_artifact, load_artifact, write_artifact
from guard.errors import ArtifactError, CorpusError, PolicyError
from guard.jsonio import (
    decode_float,
    decode_float_or_null,
    encode_float,
    encode_float_or_null,
    json_lines,
    loads_strict,
    read_utf8,
    write_atomic,
)
from guard.policy import Policy, load_policy

#: every character ``str.splitlines`` splits on besides "\n"
SEPARATORS = ("\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\r")


@pytest.mark.parametrize("sep", SEPARATORS)
def test_json_lines_splits_on_newline_only(sep: str) -> None:
    """A value holding a line separator stays one line: catches json_lines splitting with str.splitlines."""
    text = "".join(json.dumps({"n": k, "t": f"a{sep}b{sep}"}, ensure_ascii=False) + "\n" for k in range(3))
    lines = list(json_lines(text))
    assert [n for n, _ in lines] == [1, 2, 3]
    assert [loads_strict(line, f"f:{n}")["t"] for n, line in lines] == [f"a{sep}b{sep}"] * 3


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85"])
def test_raw_separators_inside_strings_survive(sep: str) -> None:
    """The three separators JSON allows raw in a string are read back raw: catches a split at them."""
    text = '{"t": "x' + sep + 'y"}\n{"t": "z"}\n'
    assert [loads_strict(line, "f")["t"] for _, line in json_lines(text)] == [f"x{sep}y", "z"]


def test_crlf_lines_and_blank_lines() -> None:
    """CRLF line ends are JSON whitespace and read; only JSON-whitespace lines are blank; a line of U+2028 is not.

    Catches blank lines judged by str.strip (which also strips U+2028, so a junk line would be skipped silently).
    """
    assert [n for n, _ in json_lines('{"a": 1}\r\n \t\r\n\n{"a": 2}\r\n')] == [1, 4]
    assert [n for n, _ in json_lines('{"a": 1}\n\u2028\n')] == [1, 2]
    with pytest.raises(CorpusError, match=r"f:2: column 1: not valid JSON"):
        for number, line in json_lines('{"a": 1}\n\u2028\n'):
            loads_strict(line, f"f:{number}")


def test_duplicate_key_named_with_path_and_lines() -> None:
    """A key twice in one object is refused with its key path and both lines: catches last-wins decoding."""
    with pytest.raises(CorpusError, match=r"^f:7: duplicate key 'harms'; each key"):
        loads_strict('{"harms": [1], "by": "x", "harms": []}', "f:7")
    text = '{\n "a": {"b": 1,\n  "b": 2}\n}'
    with pytest.raises(PolicyError, match=r"^p\.json: line 3: duplicate key 'a\.b' \(first defined at line 2\)"):
        loads_strict(text, "p.json", PolicyError)
    with pytest.raises(CorpusError, match=r"duplicate key 'x\[1\]\.k'"):
        loads_strict('{"x": [{"k": 1}, {"k": 1, "k": 1}]}', "f")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" * 5000])
def test_non_finite_and_unconvertible_numbers_refused(token: str) -> None:
    """NaN, ±Infinity, overflowing and too-long numbers are refused naming the key: catches Python's lax defaults."""
    with pytest.raises(CorpusError, match=r"^f:3: args\.n: "):
        loads_strict('{"args": {"n": ' + token + "}}", "f:3")


def test_lone_surrogate_refused() -> None:
    """An escaped lone surrogate cannot be written back as UTF-8: catches it let through (a later traceback)."""
    with pytest.raises(CorpusError, match=r"^f: t: lone surrogate"):
        loads_strict('{"t": "\\ud800"}', "f")
    assert loads_strict('{"t": "\\ud83d\\ude00"}', "f") == {"t": "\U0001f600"}


def test_infinity_mode_keeps_infinity_refuses_nan() -> None:
    """``infinity=True`` (κ scores) reads ±Infinity but still refuses NaN: catches NaN let through with it."""
    assert loads_strict("[Infinity, -Infinity, 0.5]", "k", infinity=True) == [float("inf"), float("-inf"), 0.5]
    with pytest.raises(CorpusError, match=r"\[1\]: non-finite number NaN"):
        loads_strict("[0.5, NaN]", "k", infinity=True)


def test_artifact_duplicate_key_refused(tmp_path: Path, small_policy: Policy) -> None:
    """A calibration artifact with a key twice is refused naming file, line and key: catches last-wins reading."""
    path = tmp_path / "a.json"
    body = build_artifact(
        [small_policy],
        alpha=0.1,
        n=99,
        threshold=0.5,
        calibration_risk=0.05,
        grid=[float("-inf"), 0.5],
        rule="carb",
        calibration_fingerprint="abc",
        command="carbguard calibrate ...",
    )
    write_artifact(body, path)
    lines = path.read_text().split("\n")
    at = next(k for k, line in enumerate(lines) if line.startswith(' "threshold"'))
    lines.insert(at, ' "threshold": 9.0,')
    path.write_text("\n".join(lines))
    where = rf"a\.json.*line {at + 2}: duplicate key 'threshold' \(first defined at line {at + 1}\)"
    with pytest.raises(ArtifactError, match=where):
        load_artifact(path, small_policy)


def test_artifact_nan_refused(tmp_path: Path, small_policy: Policy) -> None:
    """A NaN token in an artifact is refused (the format spells ±inf as strings): catches NaN read as a float."""
    path = tmp_path / "a.json"
    body = build_artifact(
        [small_policy],
        alpha=0.1,
        n=99,
        threshold=0.5,
        calibration_risk=0.05,
        grid=[0.5],
        rule="carb",
        calibration_fingerprint="abc",
        command="carbguard calibrate ...",
    )
    write_artifact(body, path)
    path.write_text(path.read_text().replace('"calibration_risk": 0.05', '"calibration_risk": NaN'))
    with pytest.raises(ArtifactError, match=r"calibration_risk: non-finite number NaN"):
        load_artifact(path, small_policy)


def test_policy_json_nan_refused(tmp_path: Path, policy_data: dict[str, object]) -> None:
    """A policy JSON file with NaN is refused naming the line and key: catches the policy loader's plain json.loads."""
    path = tmp_path / "p.json"
    text = json.dumps(policy_data, indent=1)
    path.write_text(text.replace('"name": "small"', '"name": "small", "extra_weight": NaN', 1))
    with pytest.raises(PolicyError, match=r"p\.json: line \d+: extra_weight: non-finite number NaN"):
        load_policy(path)


def test_kappa_file_keeps_infinity_refuses_nan_and_duplicates(tmp_path: Path) -> None:
    """A κ scores file reads ``Infinity`` (json.dumps writes it) but refuses NaN and a key twice.

    Catches the κ reader decoding with plain json.loads (NaN scores and last-wins ``scores`` let through).
    """
    from guard.safecommit.kappa import _read_json

    good, nan, dup = tmp_path / "good.json", tmp_path / "nan.json", tmp_path / "dup.json"
    good.write_text(json.dumps({"scores": [0.5, float("inf")]}))
    nan.write_text('{"scores": [0.5, NaN]}')
    dup.write_text('{"scores": [9.0],\n "scores": [0.1]}')
    assert _read_json(good) == {"scores": [0.5, float("inf")]}
    with pytest.raises(PolicyError, match=r"nan\.json: scores\[1\]: non-finite number NaN"):
        _read_json(nan)
    with pytest.raises(PolicyError, match=r"dup\.json: line 2: duplicate key 'scores' \(first defined at line 1\)"):
        _read_json(dup)


@pytest.mark.parametrize("value", [0.0, -1.5, 1e300, math.inf, -math.inf, 3])
def test_float_codec_round_trips_through_strict_json(value: float) -> None:
    """Catches an encoder whose ±inf text the decoder (or strict JSON) does not read back as the same float."""
    text = json.dumps({"x": encode_float(value)}, allow_nan=False)
    assert decode_float(loads_strict(text, "t")["x"], "x") == value


def test_float_codec_writes_inf_as_text_and_refuses_nan() -> None:
    """Catches an encoder writing a JSON Infinity token or "+inf", or letting NaN through as a text."""
    assert (encode_float(math.inf), encode_float(-math.inf)) == ("inf", "-inf")
    assert decode_float("+inf", "x") == math.inf  # written by older κ files
    with pytest.raises(ValueError, match="NaN"):
        encode_float(math.nan)


@pytest.mark.parametrize("bad", [math.nan, True, None, "nan", "Infinity", "1.0", [1.0], 10**400])
def test_float_codec_decoder_names_place_and_value(bad: object) -> None:
    """Catches a decoder that accepts NaN, a bool, null or another text as a float instead of failing closed."""
    with pytest.raises(ArtifactError, match=r"^art\.json: threshold must be a finite number"):
        decode_float(bad, "art.json: threshold", ArtifactError)


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_float_or_null_codec_round_trips_every_float_through_strict_json(value: float) -> None:
    """Catches a writer of a possibly undefined float whose output the strict reader refuses (NaN as ``"nan"``
    or a bare ``NaN`` token): NaN is ``null``, ±inf ``"inf"`` / ``"-inf"``, and every float reads back as itself."""
    written = json.dumps({"v": encode_float_or_null(value)}, allow_nan=False)
    back = decode_float_or_null(loads_strict(written, "f")["v"], "f: v")
    assert (math.isnan(back) and math.isnan(value)) or back == value
    assert ("null" in written) == math.isnan(value)


@pytest.mark.parametrize("bad", ["nan", "NaN", True, "1.0", [None]])
def test_float_or_null_decoder_refuses_everything_but_null_numbers_and_inf(bad: object) -> None:
    """Catches the null codec widening what :func:`decode_float` refuses (the text ``"nan"`` above all)."""
    with pytest.raises(CorpusError, match=r"^f: v must be a finite number"):
        decode_float_or_null(bad, "f: v")


# --------------------------------------------------------------------------- read_utf8


def test_read_utf8_maps_bad_bytes_to_the_callers_error_naming_path_and_file(tmp_path: Path) -> None:
    """Catches a reader that lets ``UnicodeDecodeError`` escape unmapped (not a GuardError, no path), or whose
    message drops the path, what the file is, or where the bad byte is."""
    bad = tmp_path / "labels.jsonl"
    bad.write_bytes(b'{"episode": "e1"}\n\xff\xfe')
    with pytest.raises(CorpusError) as caught:
        read_utf8(bad, "labels file")
    assert str(caught.value).startswith(f"{bad}: labels file is not UTF-8 (")
    assert "position 18" in str(caught.value)


@pytest.mark.parametrize("kind", ["missing", "folder"])
def test_read_utf8_maps_a_missing_file_or_a_folder_to_an_error_naming_the_path(tmp_path: Path, kind: str) -> None:
    """Catches a reader that lets ``FileNotFoundError`` / ``IsADirectoryError`` escape as a bare OSError, or
    maps them to a message without the path, what the file is and why it cannot be read."""
    path = tmp_path / "policy.yaml"
    if kind == "folder":
        path.mkdir()
    reason = "No such file or directory" if kind == "missing" else "Is a directory"
    with pytest.raises(PolicyError, match=f"^{path}: cannot read policy file: {reason}$"):
        read_utf8(path, "policy file", PolicyError)


def test_read_utf8_refuses_a_file_over_max_bytes_before_decoding(tmp_path: Path) -> None:
    """Catches a size limit that is not enforced, is off by one, or is checked after decoding (a huge
    file of bad bytes must be refused for its size, not decoded)."""
    path = tmp_path / "p.json"
    path.write_bytes(b"\xff" * 11)
    with pytest.raises(PolicyError, match=f"^{path}: policy file is 11 bytes; the limit is 10$"):
        read_utf8(path, "policy file", PolicyError, max_bytes=10)
    path.write_text("0123456789")
    assert read_utf8(path, "policy file", PolicyError, max_bytes=10) == "0123456789"


def test_read_utf8_translates_newlines_as_read_text_does_unless_told_not_to(tmp_path: Path) -> None:
    """Catches a shared reader that changed what its callers read: the episodes, labels and corpus readers
    read with ``Path.read_text`` (\\r\\n and a lone \\r become \\n), the policy loader read bytes as they are."""
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"a\r\nb\rc\n\xc3\xa9")
    assert read_utf8(path, "f") == path.read_text(encoding="utf-8") == "a\nb\nc\n\u00e9"
    assert read_utf8(path, "f", translate_newlines=False) == "a\r\nb\rc\n\u00e9"


def _labels(path: Path) -> Any:
    from guard.ledger.labels import read_labels

    return read_labels(path)


def _episodes(path: Path) -> Any:
    from guard.corpora.episodes import read_episodes

    return read_episodes(path, load_policy(Path(__file__).resolve().parents[2] / "policies/agentdojo/banking.yaml"))


def _corpus(path: Path) -> Any:
    from guard.corpora._writing import read_json_items

    return list(read_json_items(path))


def _tools(path: Path) -> Any:
    from guard.policy.tools import read_openai_tools

    return read_openai_tools(path)


def _policy(path: Path) -> Any:
    from guard.policy.loader import read_policy_mapping

    return read_policy_mapping(path)


def _kappa(path: Path) -> Any:
    from guard.safecommit.kappa import _read_json

    return _read_json(path)


READERS: dict[str, tuple[Callable[[Path], Any], type[Exception], str]] = {
    "labels": (_labels, CorpusError, "labels file"),
    "episodes": (_episodes, CorpusError, "episodes file"),
    "corpus": (_corpus, CorpusError, "input file"),
    "tools": (_tools, PolicyError, "tool schemas file"),
    "policy": (_policy, PolicyError, "policy file"),
    "kappa": (_kappa, PolicyError, "SafeCommit calibration file"),
}


@pytest.mark.parametrize("name", sorted(READERS))
def test_every_file_reader_maps_bad_bytes_and_a_folder_through_the_one_reader(tmp_path: Path, name: str) -> None:
    """Catches a caller that reads a UTF-8 file on its own again (``read_text`` with no mapping, or a
    message of its own): bad bytes and a folder must raise the reader's error naming the path and the file."""
    read, error, what = READERS[name]
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"a": "\xff"}\n')
    with pytest.raises(error, match=f"^{bad}: {what} is not UTF-8 "):
        read(bad)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    with pytest.raises(error, match=f"^{folder}: cannot read {what}: Is a directory$"):
        read(folder)


# --------------------------------------------------------------------------- write_atomic


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("failing", ["os.fsync", "os.replace"])
def test_write_atomic_failure_mid_write_leaves_the_old_content_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """Catches a writer that writes the target in place (a failure after the first bytes leaves it cut or
    emptied) or leaves its temporary file behind when the write or the rename fails."""
    target = tmp_path / "out.jsonl"
    target.write_text("old content\n")

    def boom(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(failing, boom)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, "new content that never lands\n")
    monkeypatch.undo()
    assert target.read_text() == "old content\n"
    assert _leftovers(tmp_path) == []
    assert write_atomic(target, "new\n") == target and target.read_bytes() == b"new\n"


def test_write_atomic_syncs_the_data_before_the_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Catches a writer that renames before fsync (after a crash the new name could point at empty data)."""
    order: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        order.append("fsync")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        order.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomic(tmp_path / "sub" / "f.txt", b"\x00bytes")
    assert order == ["fsync", "replace"]
    assert (tmp_path / "sub" / "f.txt").read_bytes() == b"\x00bytes"


@pytest.mark.parametrize(
    ("umask", "private", "mode"),
    [(0o022, False, 0o644), (0o077, False, 0o600), (0o002, False, 0o664), (0o000, True, 0o600)],
)
def test_write_atomic_permission_is_the_umask_default_or_owner_only_when_private(
    tmp_path: Path, umask: int, private: bool, mode: int
) -> None:
    """Catches the temporary file's own 0600 (mkstemp) leaking to a plain output, a writer that ignores
    the umask, and ``private=True`` not giving 0600 whatever the umask (the permission rule of jsonio)."""
    target = tmp_path / "f.txt"
    target.write_text("old")
    os.chmod(target, 0o666)  # the old file's mode does not carry over
    old = os.umask(umask)
    try:
        write_atomic(target, "x", private=private)
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == mode


def test_the_cli_and_corpus_writers_follow_the_one_permission_rule(tmp_path: Path) -> None:
    """Catches a writer that does not go through :func:`write_atomic`: the corpus converter's files were
    0600 (mkstemp's own mode) while the CLI's followed the umask; both must now follow the umask."""
    from guard.cli._common import write_output
    from guard.corpora._writing import write_lines

    old = os.umask(0o022)
    try:
        write_lines(tmp_path / "episodes.jsonl", ["{}", "{}"])
        write_output(tmp_path / "out.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "episodes.jsonl").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "out.json").stat().st_mode) == 0o644
    assert (tmp_path / "episodes.jsonl").read_text() == "{}\n{}\n"
    assert _leftovers(tmp_path) == []
