"""Strict JSON reading for every file format carbguard reads (bottom floor: imports only :mod:`guard.errors`).

- :func:`loads_strict` refuses what Python's ``json`` module lets through silently: a key twice in one
  object (``json`` keeps the last one, so a reviewer's ``harms`` could be dropped), the non-standard
  constants ``NaN``, ``Infinity`` and ``-Infinity``, a number that overflows to infinity (``1e999``),
  an integer too long to convert, and a lone surrogate escape (``"\\ud800"``, which no UTF-8 file can
  hold).  The error names the place given, the line (for a text of several lines), the key path and,
  for a duplicate, the line of the first definition.
- :func:`json_lines` splits a JSON-lines text on ``"\\n"`` only.  ``str.splitlines`` also splits on
  U+2028, U+2029, U+0085, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e`` and a lone ``\\r``; the first three are
  legal raw inside a JSON string (the recorder writes them so), the others cannot occur inside a
  string, and ``\\r`` before ``"\\n"`` is JSON whitespace that the decoder skips itself.
- :func:`encode_float` and :func:`decode_float` are the one codec of a float that may be infinite in a
  JSON file: ±inf is written as the text ``"inf"`` / ``"-inf"`` (strict JSON has no infinity).
- :func:`encode_float_or_null` and :func:`decode_float_or_null` are the same codec for a summary that may
  be undefined (a rate or quantile of no values, the mean of no finite value): its NaN is written as
  ``null``, never as a text ``"nan"`` (which :func:`decode_float` refuses) or a bare ``NaN`` token
  (which :func:`loads_strict` refuses).
- :func:`read_utf8` is the one reader of a UTF-8 text file: a missing or unreadable file, a folder,
  a file over a size limit and bytes that are not UTF-8 each raise the caller's error naming the
  path, what the file is and what is wrong.
- :func:`write_atomic` is the one writer of a whole file: a temporary file in the same folder,
  written, fsync'ed and renamed over the target (``os.replace``), so a failed write leaves the old
  content and no temporary file.  Permission rule: the file gets what a plain ``open(path, "w")``
  would give (``0o666`` less the umask); ``private=True`` gives ``0o600`` (owner only) whatever the umask.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import os
import re
import reprlib
import tempfile
from collections.abc import Iterator
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any

from guard.errors import CorpusError

#: JSON's own whitespace (RFC 8259): a line holding only these is blank.
JSON_WHITESPACE = " \t\r\n"
_WS = re.compile(r"[ \t\n\r]*")


class _RefusedError(ValueError):
    """Raised inside the decoder hooks; located and reworded by :func:`loads_strict`."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _RefusedError("duplicate key")
    return out


def _constant(name: str) -> Any:
    raise _RefusedError(f"non-finite number {name} (JSON has no NaN or Infinity)")


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _RefusedError(f"number {text[:40]} overflows to infinity")
    return value


def has_lone_surrogate(value: Any) -> bool:
    """Whether a decoded JSON value holds a lone surrogate (``json.loads`` turns ``"\\ud800"`` into one)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _infinity(name: str) -> Any:
    if name == "NaN":
        _constant(name)
    return float(name)


def loads_strict(text: str, where: str, error: type[Exception] = CorpusError, *, infinity: bool = False) -> Any:
    """``text`` decoded as strict JSON; ``error`` naming ``where``, the line, the key path and what is wrong.

    ``infinity=True`` is for formats that Python's ``json.dumps`` writes with ``Infinity`` tokens (the κ
    scores file): ``Infinity``, ``-Infinity`` and overflowing numbers are then read as ±inf; ``NaN`` never is.
    """
    multi = "\n" in text.rstrip(JSON_WHITESPACE)
    hooks: dict[str, Any] = (
        {"parse_constant": _infinity} if infinity else {"parse_constant": _constant, "parse_float": _float}
    )
    try:
        value = json.loads(text, object_pairs_hook=_pairs, **hooks)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno}, column {exc.colno}" if multi else f"column {exc.colno}"
        raise error(f"{where}: {at}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # _RefusedError, or an integer literal longer than Python converts
        raise error(f"{where}: {_locate(text, multi, hooks) or exc}") from None
    if has_lone_surrogate(value):
        raise error(f"{where}: {_locate(text, multi, hooks) or 'lone surrogate escape in a string'}")
    return value


def json_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line)`` of every non-blank line of a JSON-lines text, split on ``"\\n"`` only."""
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip(JSON_WHITESPACE):
            yield number, line


class _LocatedError(Exception):
    """Carries the located problem out of the walk."""


def _locate(text: str, multi: bool, hooks: dict[str, Any]) -> str | None:
    """The first refused item of ``text`` (already known to be valid JSON syntax) as a message, or None."""
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    plain = json.JSONDecoder(**hooks)

    def at(pos: int) -> str:
        line = bisect.bisect_right(starts, pos)
        return f"line {line}: " if multi else ""

    def key_path(path: tuple[str, ...]) -> str:
        return ".".join(path).replace(".[", "[") or "<top level>"

    def skip(pos: int) -> int:
        match = _WS.match(text, pos)
        return match.end() if match else pos

    def string(pos: int, path: tuple[str, ...]) -> tuple[str, int]:
        got, end = scanstring(text, pos + 1)
        if has_lone_surrogate(got):
            raise _LocatedError(f"{at(pos)}{key_path(path)}: lone surrogate escape in a string (not UTF-8)")
        return str(got), int(end)

    def value(pos: int, path: tuple[str, ...]) -> int:
        pos = skip(pos)
        if text[pos] == "{":
            return members(pos + 1, path)
        if text[pos] == "[":
            pos, i = skip(pos + 1), 0
            while text[pos] != "]":
                pos = skip(value(pos, (*path, f"[{i}]")))
                pos, i = (pos + 1 if text[pos] == "," else pos), i + 1
                pos = skip(pos)
            return pos + 1
        if text[pos] == '"':
            return string(pos, path)[1]
        try:
            return int(plain.raw_decode(text, pos)[1])
        except ValueError as exc:
            raise _LocatedError(f"{at(pos)}{key_path(path)}: {exc}") from None

    def members(pos: int, path: tuple[str, ...]) -> int:
        seen: dict[str, int] = {}
        pos = skip(pos)
        while text[pos] != "}":
            key, end = string(pos, path)
            line = bisect.bisect_right(starts, pos)
            if key in seen:
                first = f" (first defined at line {seen[key]})" if multi else ""
                shown = key_path((*path, key))
                raise _LocatedError(f"{at(pos)}duplicate key {shown!r}{first}; each key may appear once")
            seen[key] = line
            pos = skip(value(skip(end) + 1, (*path, key)))
            pos = skip(pos + 1 if text[pos] == "," else pos)
        return pos + 1

    try:
        value(0, ())
    except _LocatedError as found:
        return str(found)
    except (IndexError, ValueError, RecursionError):
        return None
    return None


#: The JSON texts of +inf and -inf written by :func:`encode_float`.
INF_TEXT = "inf"
NEG_INF_TEXT = "-inf"
_INF_READ = {INF_TEXT: math.inf, "+inf": math.inf, NEG_INF_TEXT: -math.inf}  # "+inf": older κ files


def encode_float(value: float) -> float | str:
    """``value`` for a JSON file: a finite float as itself, +inf as ``"inf"``, -inf as ``"-inf"``; NaN is refused."""
    if math.isnan(value):
        raise ValueError("NaN has no JSON form: a NaN here is a bug upstream")
    return value if math.isfinite(value) else (INF_TEXT if value > 0 else NEG_INF_TEXT)


def decode_float(value: Any, where: str, error: type[Exception] = CorpusError) -> float:
    """The inverse of :func:`encode_float`: a finite number, ``"inf"`` or ``"-inf"`` (also ``"+inf"``) as a float.

    Anything else (a bool, NaN, another text, null) raises ``error`` naming ``where`` and what was found.
    """
    if isinstance(value, str) and value in _INF_READ:
        return _INF_READ[value]
    number = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):  # an integer too large for a float stays NaN: refused
            number = float(value)
    if not math.isfinite(number):
        raise error(f'{where} must be a finite number, "inf" or "-inf", got {reprlib.repr(value)}')
    return number


def encode_float_or_null(value: float) -> float | str | None:
    """``value`` for a JSON file where NaN means *undefined*: NaN as ``null``, else as :func:`encode_float`."""
    return None if math.isnan(value) else encode_float(value)


def decode_float_or_null(value: Any, where: str, error: type[Exception] = CorpusError) -> float:
    """The inverse of :func:`encode_float_or_null`: ``null`` as NaN, else as :func:`decode_float` (which refuses
    the rest, the text ``"nan"`` included)."""
    return math.nan if value is None else decode_float(value, where, error)


def read_utf8(
    path: str | Path,
    what: str,
    error: type[Exception] = CorpusError,
    *,
    max_bytes: int | None = None,
    translate_newlines: bool = True,
) -> str:
    """The text of the UTF-8 file at ``path``; ``error`` naming the path, ``what`` the file is and what is wrong.

    ``what`` names the file for the reader (``"labels file"``): a missing or unreadable file or a
    folder reads ``"{path}: cannot read labels file: <reason>"``, bad bytes
    ``"{path}: labels file is not UTF-8 (<where>)"``.  ``max_bytes`` refuses a larger file before
    decoding it.  ``translate_newlines`` turns ``"\\r\\n"`` and a lone ``"\\r"`` into ``"\\n"``, as
    ``Path.read_text`` does; ``False`` keeps the text exactly as decoded.
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise error(f"{file}: cannot read {what}: {exc.strerror or exc}") from None
    if max_bytes is not None and len(raw) > max_bytes:
        raise error(f"{file}: {what} is {len(raw)} bytes; the limit is {max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{file}: {what} is not UTF-8 ({exc})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n") if translate_newlines else text


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | Path, data: str | bytes, *, private: bool = False) -> Path:
    """Write ``data`` (a text as UTF-8, or bytes) to ``path`` atomically; the path written.

    The data goes to a temporary file in the target's folder (created if missing), is flushed and
    fsync'ed, then renamed over the target: a reader sees the old file or the new one, never a part.
    On any failure the temporary file is removed, an existing target is left as it was, and the
    error (an ``OSError`` for the file system) propagates.  The file's permission is that of a
    plain ``open(path, "w")`` (``0o666`` less the umask), or ``0o600`` with ``private=True``.
    """
    target = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            os.fchmod(stream.fileno(), 0o600 if private else 0o666 & ~_umask())  # mkstemp makes it 0600
            stream.write(payload)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


__all__ = [
    "INF_TEXT",
    "JSON_WHITESPACE",
    "NEG_INF_TEXT",
    "decode_float",
    "decode_float_or_null",
    "encode_float",
    "encode_float_or_null",
    "has_lone_surrogate",
    "json_lines",
    "loads_strict",
    "read_utf8",
    "write_atomic",
]
