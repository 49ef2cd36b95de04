"""``Session.certifier_state`` (guard/safecommit/state.py): a typed dict carrier, SafeCommit's states under its key."""

from __future__ import annotations

from guard.policy import Policy
from guard.runtime import Guard
from guard.safecommit.runtime import STATE_KEY as RUNTIME_STATE_KEY
from guard.safecommit.state import STATE_KEY, CertifierState, ProposalState, proposal_states


def test_a_session_starts_with_an_empty_certifier_state_that_is_a_plain_dict_to_readers(small_policy: Policy) -> None:
    """Catches a carrier that is not a dict (readers do ``certifier_state.get(STATE_KEY, {})``), is shared
    between sessions, or starts with something stored."""
    guard = Guard(small_policy, threshold=0.5)
    a, b = guard.session("a"), guard.session("b")
    assert isinstance(a.certifier_state, CertifierState) and isinstance(a.certifier_state, dict)
    assert a.certifier_state == {} and a.certifier_state is not b.certifier_state
    assert a.certifier_state.get(STATE_KEY, {}) == {}
    assert RUNTIME_STATE_KEY == STATE_KEY == "safecommit"


def test_proposal_states_are_stored_once_under_the_safecommit_key_and_reused() -> None:
    """Catches an accessor that hands back a fresh dict without storing it (every decision would rebuild
    the proposal's worlds and scores) or stores it under another key than the one readers use."""
    state = CertifierState()
    first = proposal_states(state)
    assert state == {STATE_KEY: {}} and state[STATE_KEY] is first
    marker = ProposalState.__new__(ProposalState)
    first["c1"] = marker
    assert proposal_states(state) is first and proposal_states(state)["c1"] is marker
    other = {"someone_else": 1}
    assert proposal_states(other) == {} and other["someone_else"] == 1 and STATE_KEY in other
