"""The group rule (docs/calibrate.md, "Calibrating for unseen attack goals: the group rule").

λ̂ = the largest grid value with ``sum_g l_g(λ) + 1 <= α (G + 1)``, ``l_g`` the mean loss of group ``g``'s
episodes; exact, checked against a Fraction oracle, and its guarantee (a new group's expected mean loss
<= α under exchangeable groups) checked by a seeded Monte Carlo that plain pooled CRC fails.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from fractions import Fraction
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from guard.artifact import GROUP_CRC_GUARANTEE, load_artifact
from guard.calibration import crc, group_crc
from guard.calibration.jobs import load_corpus, score_selectors
from guard.calibration.replay import ScoredCorpus
from guard.cli import main
from guard.errors import CalibrationError

ROOT = Path(__file__).resolve().parents[2]
EPISODES = ROOT / "tests" / "fixtures" / "episodes"
ALPHAS = (0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 0.7)

# --------------------------------------------------------------------------- 1. the exact oracle


def _oracle(levels: Sequence[float], keys: Sequence[Hashable], grid: Sequence[float], alpha: float) -> float | str:
    """Brute force with Fractions: every grid value, every group's mean loss; ``floor``/``column 0`` when none."""
    budget = Fraction(repr(alpha))
    names = sorted(set(keys), key=repr)
    if budget * (len(names) + 1) < 1:
        return "floor"
    best: float | str = "column 0"
    for lam in grid:
        total = Fraction(0)
        for name in names:
            members = [m for m, k in zip(levels, keys, strict=True) if k == name]
            total += Fraction(sum(1 for m in members if lam >= m), len(members))
        if total + 1 > budget * (len(names) + 1):
            break
        best = float(lam)
    return best


def _answer(levels: Sequence[float], keys: Sequence[Hashable], grid: Sequence[float], alpha: float) -> float | str:
    try:
        return group_crc.group_crc_threshold(levels, keys, grid, alpha)
    except CalibrationError as exc:
        return "floor" if "floor" in str(exc) else "column 0"


def _index_answer(table: np.ndarray, keys: Sequence[Hashable], grid: np.ndarray, alpha: float) -> float | str:
    try:
        return float(grid[group_crc.group_crc_threshold_index(table, keys, alpha)])
    except CalibrationError as exc:
        return "floor" if "floor" in str(exc) else "column 0"


def _random_instance(rng: np.random.Generator) -> tuple[list[float], list[Hashable], list[float], float]:
    n = int(rng.integers(1, 16))
    keys: list[Hashable] = [f"goal-{k}" for k in rng.integers(0, int(rng.integers(1, n + 1)), n)]
    levels = np.where(rng.random(n) < 0.3, np.inf, rng.integers(0, 6, n).astype(float))
    grid = [-np.inf, *np.unique(rng.integers(0, 7, 5)).astype(float).tolist()]
    return levels.tolist(), keys, grid, float(rng.choice(ALPHAS))


#: exact ties: ``k`` groups of ``size`` episodes charge ``c`` each at λ = 1, summing to exactly α(G+1) - 1,
#: where the float sum of the k fractions overshoots it (G groups, one more charge at λ = 2).
TIES = ((7, 0.2, 5, 1, 3), (10, 0.2, 10, 4, 3), (12, 0.1, 10, 1, 3), (15, 0.15, 10, 1, 14), (15, 0.25, 5, 1, 15))


def _tie_instance(groups: int, alpha: float, size: int, c: int, k: int) -> tuple[list[float], list[Hashable]]:
    levels: list[float] = []
    keys: list[Hashable] = []
    for g in range(groups):
        charged = c if g < k else 0
        levels += [1.0] * charged + [np.inf] * (size - charged)
        keys += [g] * size
    levels[-1] = 2.0  # the last group charges once more at λ = 2, which breaks the budget
    return levels, keys


def test_group_rule_equals_the_fraction_oracle() -> None:
    """The rule equals a brute-force Fraction enumeration on 600 seeded small instances and on exact ties.

    Planted bugs it catches (each tried): the budget alpha*G instead of alpha*(G+1); group losses summed as
    floats (the ties, where sum_g l_g equals alpha*(G+1) - 1 exactly, come out infeasible); groups weighted by
    their size (pooled episodes: sum_i L_i * G / n); a strict ``<`` budget; no floor check.
    """
    rng = np.random.default_rng(20240611)
    for _ in range(600):
        levels, keys, grid, alpha = _random_instance(rng)
        expected = _oracle(levels, keys, grid, alpha)
        assert _answer(levels, keys, grid, alpha) == expected, (levels, keys, grid, alpha)
        table = np.asarray(grid)[None, :] >= np.asarray(levels)[:, None]
        assert _index_answer(table.astype(np.int64), keys, np.asarray(grid), alpha) == expected
        assert _index_answer(table.astype(np.float64), keys, np.asarray(grid), alpha) == expected
    for groups, alpha, size, c, k in TIES:
        levels, keys = _tie_instance(groups, alpha, size, c, k)
        assert sum([c / size] * k) > float(Fraction(repr(alpha)) * (groups + 1) - 1)  # floats would refuse λ = 1
        assert _oracle(levels, keys, [-np.inf, 1.0, 2.0], alpha) == 1.0
        assert group_crc.group_crc_threshold(levels, keys, [-np.inf, 1.0, 2.0], alpha) == 1.0


def test_fractional_losses_are_compared_exactly() -> None:
    """A float loss table whose group means sum to exactly alpha*(G+1) - 1 keeps that column (equality allowed).

    Twelve groups of five episodes, α = 0.1: in three groups one episode loses 0.5 at column 1, so each mean is
    1/10 and the sum 3/10 = 0.1 * 13 - 1 exactly; as floats, 0.1 + 0.1 + 0.1 = 0.30000000000000004 > 0.3.
    Planted bugs it catches (tried): float sums of the group means in the loss-table form; a strict ``<``
    instead of ``<=`` in the budget.
    """
    keys = [g for g in range(12) for _ in range(5)]
    table = np.zeros((60, 3))
    table[[0, 5, 10], 1:] = 0.5
    table[15, 2] = 1.0
    assert sum([0.5 / 5] * 3) > 0.3
    assert group_crc.group_crc_threshold_index(table, keys, 0.1) == 1


# --------------------------------------------------------------------------- 2-3. the guarantee, simulated

G_CAL, ALPHA, TRIALS, SEED = 5, 0.25, 10_000, 20240611
GRID = np.concatenate(([-np.inf], np.linspace(-4.0, 4.0, 801)))


def _draw_group(rng: np.random.Generator) -> np.ndarray:
    """One attack goal: its own location, harm share and size, drawn iid per group (so groups are exchangeable)."""
    location, share, size = rng.normal(), rng.uniform(0.8, 1.0), int(rng.integers(5, 31))
    harmful = rng.random(size) < share
    return np.where(harmful, location + 0.05 * rng.normal(size=size), np.inf)


@cache
def _new_group_losses() -> tuple[np.ndarray, np.ndarray]:
    """Per trial, a NEW group's mean loss at λ̂ of the group rule and of plain pooled CRC (same calibration draw)."""
    rng = np.random.default_rng(SEED)
    out = np.empty((TRIALS, 2))
    for t in range(TRIALS):
        groups = [_draw_group(rng) for _ in range(G_CAL)]
        levels = np.concatenate(groups)
        keys = np.repeat(np.arange(G_CAL), [g.size for g in groups]).tolist()
        new = _draw_group(rng)
        grouped = group_crc.group_crc_threshold(levels, keys, GRID, ALPHA)
        pooled = crc.carb_threshold_from_harm_levels(levels, GRID, ALPHA)
        out[t] = (new <= grouped).mean(), (new <= pooled).mean()
    return out[:, 0], out[:, 1]


def _tolerance(losses: np.ndarray) -> float:
    """The Monte Carlo tolerance: 3 standard errors of the mean over trials."""
    return float(3 * losses.std(ddof=1) / np.sqrt(losses.size))


@pytest.mark.xdist_group("group_crc_monte_carlo")  # one worker runs the cached simulation for both tests
def test_group_rule_holds_alpha_on_new_groups() -> None:
    """Over 10,000 seeded trials (G=5 exchangeable groups with iid group parameters, α=0.25), a new group's mean
    loss at λ̂ averages <= α + 3 standard errors (measured: 0.152 against 0.25, tolerance 0.010).

    Planted bugs it catches (each tried): dropping the +B correction (sum_g l_g <= alpha*(G+1)); G counted as
    episodes instead of groups (the budget alpha*(n+1) - 1).
    """
    grouped, _ = _new_group_losses()
    assert grouped.mean() <= ALPHA + _tolerance(grouped), (grouped.mean(), _tolerance(grouped))


@pytest.mark.xdist_group("group_crc_monte_carlo")
def test_plain_crc_overshoots_alpha_on_new_groups() -> None:
    """Negative control: in the same simulation, plain CRC over the pooled episodes overshoots α on new groups by
    more than the tolerance (measured: 0.285 against 0.25, tolerance 0.012).

    Planted bug it catches (tried): a simulation unable to see a violation, e.g. drawing the new group's episodes
    iid from the pooled calibration episodes instead of as a new group (then plain CRC holds α).
    """
    _, pooled = _new_group_losses()
    assert pooled.mean() > ALPHA + _tolerance(pooled), (pooled.mean(), _tolerance(pooled))


# --------------------------------------------------------------------------- 3b. the rule on the composed gate's loss

G_SMALL, ALPHA_SMALL, TRIALS_SMALL, SEED_SMALL = 21, 0.05, 3_000, 7
GRID_SMALL = np.concatenate(([-np.inf], np.linspace(-4.0, 4.0, 401)))


def _draw_composed_group(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One goal's harm levels behind score + SafeCommit: (a probe counts as a stop, the probes are answered).

    SafeCommit refuses 99% of the harmful steps at its first decision, half of them by asking a probe that the
    attacker's world answers "legitimate" (so the step runs once the probe is answered); a refused step never
    harms.
    """
    location, share, size = rng.normal(), rng.uniform(0.8, 1.0), int(rng.integers(5, 31))
    level = np.where(rng.random(size) < share, location + 0.05 * rng.normal(size=size), np.inf)
    refused, by_probe = rng.random(size) < 0.99, rng.random(size) < 0.5
    return np.where(refused, np.inf, level), np.where(refused & ~by_probe, np.inf, level)


@cache
def _composed_new_group_losses() -> tuple[np.ndarray, np.ndarray]:
    """Per trial, a NEW goal's mean loss with its probes answered, at λ̂ of the group rule calibrated on G=21 goals'
    composed loss with their probes answered, and at λ̂ calibrated where a probe counts as a stop."""
    rng = np.random.default_rng(SEED_SMALL)
    out = np.empty((TRIALS_SMALL, 2))
    for t in range(TRIALS_SMALL):
        groups = [_draw_composed_group(rng) for _ in range(G_SMALL)]
        keys = np.repeat(np.arange(G_SMALL), [g[0].size for g in groups]).tolist()
        stop = group_crc.group_crc_threshold(np.concatenate([g[0] for g in groups]), keys, GRID_SMALL, ALPHA_SMALL)
        answered = group_crc.group_crc_threshold(np.concatenate([g[1] for g in groups]), keys, GRID_SMALL, ALPHA_SMALL)
        new = _draw_composed_group(rng)[1]
        out[t] = (new <= answered).mean(), (new <= stop).mean()
    return out[:, 0], out[:, 1]


@pytest.mark.xdist_group("group_crc_monte_carlo")
def test_group_rule_on_the_composed_loss_holds_alpha_with_few_groups() -> None:
    """docs/calibrate.md#small-groups: the group rule calibrated on the loss of score + SafeCommit as it runs (probes
    answered) holds α for a new goal with G=21 goals at α=0.05, just above the floor 1/22: over 3,000 seeded trials
    a new goal's mean loss averages <= α + 3 standard errors (measured: 0.018 against 0.05, tolerance 0.005).

    Planted bugs it catches (each tried): dropping the +B correction (then 0.059 against 0.050 + 0.009); calibrating
    on the loss where a probe counts as a stop (the next test's control)."""
    answered, _ = _composed_new_group_losses()
    assert answered.mean() <= ALPHA_SMALL + _tolerance(answered), (answered.mean(), _tolerance(answered))


@pytest.mark.xdist_group("group_crc_monte_carlo")
def test_group_rule_calibrated_with_probes_as_stops_overshoots_when_probes_run() -> None:
    """Negative control (docs/calibrate.md#small-groups): λ̂ calibrated on the composed loss where a probe counts as a
    stop, deployed where probes are answered, overshoots α by more than the tolerance in the same simulation
    (measured: 0.282 against 0.05, tolerance 0.013): the loss calibrated must be the loss the pipeline has at run time.

    Planted bug it catches (tried): a simulation in which answering a probe lets nothing more run (then both
    calibrations agree and the control holds α)."""
    _, stop = _composed_new_group_losses()
    assert stop.mean() > ALPHA_SMALL + _tolerance(stop), (stop.mean(), _tolerance(stop))


# --------------------------------------------------------------------------- 4. floor and reduction


def test_alpha_below_the_floor_raises_naming_g() -> None:
    """α < 1/(G+1) raises naming G and the floor; α = 1/(G+1) exactly is allowed (equality).

    Planted bugs it catches (each tried): no floor check (the message names column 0, not G); the floor
    read as alpha > 1/(G+1) (α = 0.2 with G = 4 refused); G counted as episodes instead of groups.
    """
    levels = [np.inf] * 8
    keys = ["a", "a", "b", "b", "c", "c", "d", "d"]
    with pytest.raises(CalibrationError, match=r"G=4 groups.*floor|floor.*G=4 groups") as caught:
        group_crc.group_crc_threshold(levels, keys, [-np.inf, 0.0], 0.19)
    assert "1/5" in str(caught.value)
    assert group_crc.group_crc_threshold(levels, keys, [-np.inf, 0.0], 0.2) == 0.0
    with pytest.raises(CalibrationError, match="G=4 groups"):
        group_crc.group_crc_threshold_index(np.zeros((8, 2), dtype=np.int64), keys, 0.19)


def test_groups_of_one_episode_are_plain_crc() -> None:
    """With every episode its own group the rule is carb_threshold_from_harm_levels exactly (300 seeded cases).

    Planted bugs it catches (each tried): an episode charged only when λ > M_i (not λ >= M_i); the budget
    alpha*G instead of alpha*(G+1).
    """
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(4, 60))
        levels = np.where(rng.random(n) < 0.4, np.inf, rng.normal(size=n).round(1))
        grid = crc.exact_grid(rng.normal(size=20).round(1))
        alpha = float(rng.choice(ALPHAS))
        try:
            expected: float | str = crc.carb_threshold_from_harm_levels(levels, grid, alpha)
        except CalibrationError:
            expected = "infeasible"
        try:
            got: float | str = group_crc.group_crc_threshold(levels, list(range(n)), grid, alpha)
        except CalibrationError:
            got = "infeasible"
        assert got == expected


def test_group_lambdas_match_the_single_rule_per_row() -> None:
    """group_lambdas gives, per permutation row, group_crc_threshold on that row's own exact grid.

    Planted bug it catches (tried): the rows' group keys taken by position in the row instead of by episode.
    """
    rng = np.random.default_rng(3)
    n = 40
    scores = rng.normal(size=3 * n).round(2)
    offsets = np.arange(0, 3 * n + 1, 3)
    harm = np.where(rng.random(n) < 0.5, scores[offsets[:-1] + 1], np.inf)
    zeros = np.zeros(3 * n)
    corpus = ScoredCorpus(
        episode_ids=tuple(f"e{i}" for i in range(n)),
        offsets=offsets,
        scores=scores,
        cummax=zeros,
        n_selected=zeros,
        n_prefix=zeros,
        harmful=zeros.astype(bool),
        harm_level=harm,
        category_levels={},
        max_score=np.zeros(n),
        utility=np.zeros(n, dtype=bool),
    )
    keys = [i % 8 for i in range(n)]
    rows = np.stack([rng.permutation(n)[:20] for _ in range(5)])
    lams = group_crc.group_lambdas(corpus, rows, keys, 0.3)
    for r, row in enumerate(rows):
        mask = np.isin(np.repeat(np.arange(n), 3), row)
        grid = crc.exact_grid(scores[mask])
        assert lams[r] == group_crc.group_crc_threshold(harm[row], [keys[i] for i in row], grid, 0.3)


# --------------------------------------------------------------------------- 5. the command


def test_calibrate_group_by_injection_task_records_the_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`calibrate --corpus command-r-plus --alpha 0.1 --group-by injection_task --group-alpha alpha` (the pure group
    rule) writes rule=group_crc, group_by, G = the number of (suite, injection task) goals (benign runs: one group
    per suite), the group guarantee, and the group rule's λ̂; the artifact loads (checksum intact).

    Planted bugs it catches (each tried): --group-by not passed on to the calibration (rule stays carb); benign
    runs pooled into one group across suites (G off by 3); the CRC guarantee text kept.
    """
    out = tmp_path / "group.json"
    argv = ["calibrate", "--corpus", "command-r-plus", "--alpha", "0.1", "--group-by", "injection_task"]
    argv += ["--group-alpha", "alpha"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "group_by=injection_task G=31" in capsys.readouterr().out
    body = json.loads(out.read_text(encoding="utf-8"))
    corpus = load_corpus(None, "command-r-plus")
    goals = {(e.meta.suite, e.meta.injection_task or "none") for e in corpus.episodes}
    assert len(goals) == 31 and (body["rule"], body["group_by"], body["groups"]) == ("group_crc", "injection_task", 31)
    assert body["guarantee"] == GROUP_CRC_GUARANTEE and body["n"] == len(corpus.episodes)
    assert load_artifact(out).rule == "group_crc"
    scored = score_selectors(corpus.episodes, ["gcarb"])[0]["gcarb"]  # the calibration's scores, cached
    keys = [(e.meta.suite, e.meta.injection_task or "none") for e in corpus.episodes]
    grid = crc.exact_grid(scored.scores)
    lam = group_crc.group_crc_threshold(scored.harm_level, keys, grid, 0.1)
    assert body["threshold_before_slack"] == lam and body["threshold"] <= lam  # the default utility slack lowers it
    assert main([*argv, "--utility-slack", "0", "--out", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["threshold"] == lam


@pytest.mark.parametrize(
    ("source", "allowed"),
    [
        (["--corpus", "command-r-plus"], "injection_task, user_task, suite"),
        (
            [
                "--policy",
                str(EPISODES / "assistant_policy.yaml"),
                "--episodes",
                str(EPISODES / "assistant.jsonl"),
            ],
            "tags.NAME",
        ),
    ],
)
def test_calibrate_unknown_group_key_fails_naming_it(
    source: list[str], allowed: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown --group-by key exits non-zero, names the key and what is allowed, and writes nothing.

    Planted bug it catches (tried): an unknown key accepted silently (read as the injection goal).
    """
    out = tmp_path / "x.json"
    code = main(["calibrate", *source, "--alpha", "0.3", "--group-by", "goal_of_the_day", "--out", str(out)])
    err = capsys.readouterr().err
    assert code != 0 and "'goal_of_the_day'" in err and allowed in err and not out.exists()


def test_calibrate_group_by_an_episode_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--episodes --group-by task groups the fixture's 7 episodes into its 5 tasks; the pure rule (--group-alpha
    alpha) refuses below its floor 1/6.

    Planted bug it catches (tried): the episode field read from the wrong place (every episode one group, G=1).
    """
    own = ["--policy", str(EPISODES / "assistant_policy.yaml"), "--episodes", str(EPISODES / "assistant.jsonl")]
    own += ["--group-alpha", "alpha"]
    out = tmp_path / "task.json"
    assert main(["calibrate", *own, "--alpha", "0.3", "--group-by", "task", "--out", str(out)]) == 0
    body = json.loads(out.read_text(encoding="utf-8"))
    assert (body["rule"], body["group_by"], body["groups"]) == ("group_crc", "task", 5)
    code = main(["calibrate", *own, "--alpha", "0.15", "--group-by", "task", "--out", str(tmp_path / "no.json")])
    assert code != 0 and "G=5" in capsys.readouterr().err
