"""Review sampling: which closed sessions a human labels, picked by a keyed hash nobody can steer.

With the policy section ``review: {rate: p, key_env: NAME}`` (or ``key_file: PATH``), session ``s`` is
picked for review iff ``u(s) < p``, where ``u(s) = HMAC-SHA256(key, s)`` read as a 64-bit integer and
divided by ``2**64`` — uniform on [0, 1) for a secret key, so neither the agent nor an operator who
does not hold the key can choose which sessions get reviewed, and the pick is independent of the
session's outcome.  The ``session_end`` audit entry records ``review: {"picked": bool, "p": p}``.

The risk monitor then weights each reviewed session by ``1/p`` (inverse propensity): the per-session
term is ``X = (picked/p) · L`` with ``E[X] = E[L]``, and an unpicked closed session is an ``X = 0``
term in session order.  No key, an empty key or an unreadable key file refuse to build the guard
(fail closed: a guard that cannot sample unpredictably does not start).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path
from typing import Any

from guard.errors import PolicyError


def review_uniform(key: bytes, session_id: str) -> float:
    """``u(s)`` in [0, 1): the first 8 bytes of HMAC-SHA256(key, session id) over ``2**64``."""
    digest = hmac.new(key, f"carbguard-review:{session_id}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def review_key(spec: Any, resolve: Any) -> bytes:
    """The review key the policy's ``review`` section names (env var or key file); PolicyError if none."""
    if spec.key_env is not None:
        key = os.environ.get(spec.key_env, "").strip().encode()
        where = f"environment variable {spec.key_env}"
    else:
        path = Path(resolve(spec.key_file))
        where = f"key file {path}"
        try:
            key = path.read_bytes().strip()
        except OSError as exc:
            raise PolicyError(f"review: {where} cannot be read: {type(exc).__name__}") from exc
    if len(key) < 16:
        raise PolicyError(f"review: {where} must hold a secret of at least 16 bytes")
    return key


class ReviewSampler:
    """The keyed review pick at rate ``p`` of one guard."""

    def __init__(self, key: bytes, rate: float) -> None:
        if not key:
            raise PolicyError("review: empty key")
        if not 0.0 < rate <= 1.0:
            raise PolicyError(f"review: rate must lie in (0, 1], got {rate}")
        self._key = key
        self.rate = float(rate)

    def entry(self, session_id: str) -> dict[str, Any]:
        """The ``review`` member of a session's ``session_end`` entry."""
        return {"picked": review_uniform(self._key, session_id) < self.rate, "p": self.rate}


__all__ = ["ReviewSampler", "review_key", "review_uniform"]
