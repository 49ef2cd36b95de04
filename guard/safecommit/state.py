"""What SafeCommit keeps in a session between decisions (written by :mod:`guard.safecommit.runtime`).

``Session.certifier_state`` is a :class:`CertifierState`: a dict, by certifier, of that certifier's
own state.  SafeCommit is its one writer: under :data:`STATE_KEY` it keeps a :class:`ProposalState`
per call id (``node-<n>`` for a proposal without one), built on the proposal's first decision and
reused by every later one, so worlds and scores are never recomputed.  The carrier is a dict, so what
is stored and how a plain reader (``state.get(STATE_KEY, {})``) sees it are those of a plain dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guard.decision import ProbeCall
    from guard.policy.safecommit import ProbeConfig
    from guard.safecommit.types import ProbeSpec
    from guard.safecommit.worlds import Support, Target

STATE_KEY = "safecommit"
"""The key of SafeCommit's proposal states in ``Session.certifier_state``."""


@dataclass(frozen=True)
class BoundProbe:
    """A policy probe bound to one target of one proposal."""

    spec: ProbeSpec
    config: ProbeConfig
    target: Target
    args: Mapping[str, Any]


@dataclass
class ProposalState:
    """What SafeCommit keeps per proposal between decisions (in ``session.certifier_state``)."""

    support: Support
    probes: tuple[BoundProbe, ...]
    issued: list[tuple[str, ProbeCall]] = field(default_factory=list)


class CertifierState(dict[str, Any]):
    """``Session.certifier_state``: each certifier's own per-session state, under its key (a plain dict)."""


def proposal_states(state: dict[str, Any]) -> dict[str, ProposalState]:
    """SafeCommit's proposal states by call id in a session's ``certifier_state`` (added empty on first use)."""
    states: dict[str, ProposalState] = state.setdefault(STATE_KEY, {})
    return states


__all__ = ["STATE_KEY", "BoundProbe", "CertifierState", "ProposalState", "proposal_states"]
