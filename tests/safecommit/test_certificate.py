"""Safety map, signatures, safety-equivalence compression and the action certificate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from guard.errors import InputError
from guard.safecommit.certificate import (
    certified_actions,
    certify,
    choose_action,
    compress,
    safety_matrix,
    signature,
    uncertified_region,
)
from guard.safecommit.types import Action, World


@pytest.fixture
def worlds() -> list[World]:
    """The paper's running example: temp path + valid recipient, repurposed path, injected recipient."""
    return [World("w1", {}, 0.2), World("w2", {}, 0.6), World("w3", {}, 0.9)]


@pytest.fixture
def actions() -> list[Action]:
    """Delete, send, and a reversible staged move."""
    return [Action("delete", 1.0, 0.3), Action("send", 1.0, 0.2), Action("stage", 0.8, 0.05, reversible=True)]


@pytest.fixture
def gamma(worlds: list[World], actions: list[Action]) -> np.ndarray:
    """Γ of the running example."""
    safe = {"w1": ["delete", "send", "stage"], "w2": ["send", "stage"], "w3": ["delete", "stage"]}
    return safety_matrix(worlds, actions, safe)


def test_safety_matrix_from_mapping(gamma: np.ndarray) -> None:
    """Rows are worlds, columns actions, True where safe."""
    assert gamma.tolist() == [[True, True, True], [False, True, True], [True, False, True]]
    assert signature(gamma[1]) == (False, True, True)


def test_safety_map_errors_name_the_problem(worlds: list[World], actions: list[Action]) -> None:
    """A missing world, an unknown action or a wrongly shaped matrix is an InputError."""
    with pytest.raises(InputError, match="'w3'"):
        safety_matrix(worlds, actions, {"w1": [], "w2": []})
    with pytest.raises(InputError, match="unknown action 'fly'"):
        safety_matrix(worlds, actions, {"w1": ["fly"], "w2": [], "w3": []})
    with pytest.raises(InputError, match="shape"):
        safety_matrix(worlds, actions, np.ones((2, 3), dtype=bool))


def test_certificate_of_running_example(worlds: list[World], actions: list[Action], gamma: np.ndarray) -> None:
    """With all three worlds retained only the staged move is certified; blockers are named."""
    cert = certify(worlds, actions, gamma, np.ones(3, dtype=bool))
    assert cert.certified == ("stage",)
    assert cert.chosen == "stage"
    assert dict(cert.blocking) == {"delete": ("w2",), "send": ("w3",)}


def test_several_certified_pick_best_utility(worlds: list[World], actions: list[Action], gamma: np.ndarray) -> None:
    """Retaining only w1 certifies all three; send has the largest reward − penalty (0.8)."""
    cert = certify(worlds, actions, gamma, np.array([True, False, False]))
    assert cert.certified == ("delete", "send", "stage")
    assert cert.chosen == "send"


def test_empty_world_set_certifies_nothing(gamma: np.ndarray) -> None:
    """The universal condition would hold vacuously; the certificate fails closed instead."""
    assert not certified_actions(gamma, np.zeros(3, dtype=bool)).any()
    assert choose_action(certified_actions(gamma, np.zeros(3, dtype=bool)), [1.0, 1.0, 1.0]) == -1


def test_choose_action_ties_take_first() -> None:
    """Equal utilities: the lower index wins; nothing certified: -1."""
    assert choose_action([True, True, False], [0.5, 0.5, 9.0]) == 0
    assert choose_action([[False, False], [False, True]], [1.0, 0.0]).tolist() == [-1, 1]


def test_compress_merges_equal_signatures_and_sums_weights() -> None:
    """Rows 0 and 2 share a signature: one class, weight 1 + 3, first-appearance order."""
    merged = compress([[1, 0], [0, 1], [1, 0]], [1.0, 2.0, 3.0])
    assert merged.members == ((0, 2), (1,))
    assert merged.weights.tolist() == [4.0, 2.0]
    assert merged.gamma.tolist() == [[True, False], [False, True]]


boolean_maps = st.integers(1, 8).flatmap(
    lambda k: st.tuples(
        hnp.arrays(np.bool_, (k, 3)),
        hnp.arrays(np.bool_, (k,)),
        hnp.arrays(np.float64, (k,), elements=st.floats(0.01, 10.0)),
    )
)


@given(boolean_maps)
def test_compression_never_changes_the_certified_set(data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Certifying over merged classes of the retained worlds gives the same actions."""
    gamma, retained, weights = data
    merged = compress(gamma[retained], weights[retained])
    by_class = certified_actions(merged.gamma, np.ones(len(merged.members), dtype=bool))
    assert by_class.tolist() == certified_actions(gamma, retained).tolist()
    assert np.isclose(merged.weights.sum(), weights[retained].sum())
    for c, members in enumerate(merged.members):
        assert all(signature(gamma[retained][m]) == signature(merged.gamma[c]) for m in members)


@given(boolean_maps)
def test_certified_action_is_safe_in_every_retained_world(data: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """a certified ⇒ a ∈ Γ(ω) for all retained ω, and U(a) is empty."""
    gamma, retained, _ = data
    certified = certified_actions(gamma, retained)
    region = uncertified_region(gamma, retained)
    for a in np.flatnonzero(certified):
        assert gamma[retained, a].all()
        assert not region[:, a].any()
    for a in np.flatnonzero(~certified):
        assert region[:, a].any() or not retained.any()


def test_batched_certificate_equals_row_by_row() -> None:
    """Leading batch axes give the same answer as one episode at a time."""
    rng = np.random.default_rng(1)
    gamma = rng.random((50, 5, 3)) < 0.6
    retained = rng.random((50, 5)) < 0.7
    batched = certified_actions(gamma, retained)
    for i in range(50):
        assert batched[i].tolist() == certified_actions(gamma[i], retained[i]).tolist()
