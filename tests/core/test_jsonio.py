"""Strict JSON reading (guard/jsonio.py) and its use by the artifact, policy and κ readers."""

from __future__ import annotations

import json
import math
from pathlib import Path

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
