"""The ``mode`` option every adapter takes: enforce (the default) or shadow (decide and audit, never block)."""

from __future__ import annotations

from guard.decision import Mode
from guard.runtime import Guard


def guard_in_mode(guard: Guard, mode: str | None) -> Guard:
    """``guard`` itself when ``mode`` is None or its own mode, else ``guard.view(mode)``.

    The view (:meth:`guard.runtime.Guard.view`) shares the breaker (so one threshold and one trip),
    policy, audit sink, selector, scorer, certifier, recorder and review sampler, so its decisions and
    audit entries are those of ``guard``; only :meth:`Session.authorize` differs (shadow permits every
    decided call once).
    """
    if mode is None:
        return guard
    wanted = Mode.parse(mode)  # a typo is a PolicyError, as in Guard
    if wanted is guard.mode:
        return guard
    return guard.view(wanted)
