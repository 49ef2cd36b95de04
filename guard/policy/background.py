"""The background table a policy names (``graph.background``): read and checked when the policy is loaded.

A table file holds the boilerplate k-grams of :mod:`guard.evidence.specificity` (format
``carbguard-background/1``).  It lives on the policy floor so that a policy naming a missing or malformed table
fails at load time, naming the file; the evidence floor reads the same checked body.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

__all__ = ["FORMAT", "K", "check_table", "read_table"]

FORMAT = "carbguard-background/1"
K = 8


def check_table(body: object) -> dict[str, object]:
    """``body`` if it is a background table (raises ValueError saying what is wrong)."""
    if not isinstance(body, dict):
        raise ValueError("background table: expected a JSON object")
    grams = body.get("grams")
    records = body.get("records")
    if body.get("format") != FORMAT or body.get("k") != K or not isinstance(grams, dict):
        raise ValueError(f"background table: expected format {FORMAT!r} with k = {K} and a 'grams' mapping")
    if not isinstance(records, int) or isinstance(records, bool) or records < 1:
        raise ValueError("background table: 'records' must be a positive integer")
    if not all(isinstance(g, str) and len(g) == K and type(c) is int and 0 < c <= records for g, c in grams.items()):
        raise ValueError(f"background table: every gram must be {K} characters with a count in 1..records")
    return body


def read_table(path: Path) -> tuple[dict[str, object], str]:
    """The checked body of the table file ``path`` and its SHA-256 (kept per file version: path, size, mtime)."""
    try:
        stat = path.stat()
    except OSError as exc:
        raise ValueError(f"background table {path}: cannot read it ({exc.strerror or exc})") from None
    return _read(path, stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=32)
def _read(path: Path, size: int, mtime: int) -> tuple[dict[str, object], str]:
    del size, mtime  # the cache key: a rewritten file is read again
    try:
        raw = path.read_bytes()
        body = check_table(json.loads(raw))
    except (OSError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise ValueError(f"background table {path}: {exc}") from None
    return body, hashlib.sha256(raw).hexdigest()
