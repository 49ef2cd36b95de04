"""The ``mode`` option every adapter takes: enforce (the default) or shadow (decide and audit, never block)."""

from __future__ import annotations

import copy

from guard.errors import PolicyError
from guard.runtime import MODES, Guard


def guard_in_mode(guard: Guard, mode: str | None) -> Guard:
    """``guard`` itself when ``mode`` is None or its own mode, else a copy in ``mode``.

    The copy shares the policy, threshold, audit sink, selector, scorer and certifier, so its
    decisions and audit entries are those of ``guard``; only :meth:`Session.authorize` differs
    (shadow permits every decided call once).
    """
    if mode is None or mode == guard.mode:
        return guard
    if mode not in MODES:
        raise PolicyError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    twin = copy.copy(guard)
    twin.mode = mode
    return twin
