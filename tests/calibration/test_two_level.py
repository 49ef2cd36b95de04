"""The two-level group rule (docs/calibrate.md#the-two-level-rule): λ̂ = min(CRC over episodes at α, the group rule
at α_g), α_g = max(α, 2/(G+1)) by default; exact against a Fraction oracle, both guarantees checked by a seeded
Monte Carlo, and the flag ``--group-alpha`` of ``calibrate`` / ``evaluate`` / ``evaluate --shift``.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from fractions import Fraction
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from guard.artifact import GROUP_CRC_GUARANTEE, load_artifact, two_level_guarantee, two_level_statements
from guard.calibration import crc, group_crc, two_level
from guard.calibration.evaluate import CarbRule, carb_lambdas
from guard.calibration.replay import ScoredCorpus
from guard.cli import main
from guard.errors import CalibrationError
from guard.policy import load_policy

ROOT = Path(__file__).resolve().parents[2]
EPISODES = ROOT / "tests" / "fixtures" / "episodes"
OWN = ["--policy", str(EPISODES / "assistant_policy.yaml"), "--episodes", str(EPISODES / "assistant.jsonl")]
FIXTURE_RUNS = ROOT / "tests" / "fixtures" / "agentdojo_runs"
ALPHAS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5)

# --------------------------------------------------------------------------- 1. the exact oracle


def _crc_oracle(levels: Sequence[float], grid: Sequence[float], alpha: Fraction) -> float | None:
    """Plain CRC by brute force: the largest grid λ with #{M_i <= λ} + 1 <= α(n+1) (None: none)."""
    best = None
    for lam in grid:
        if sum(1 for m in levels if lam >= m) + 1 > alpha * (len(levels) + 1):
            break
        best = float(lam)
    return best


def _group_oracle(
    levels: Sequence[float], keys: Sequence[Hashable], grid: Sequence[float], level: Fraction
) -> float | None:
    """The group rule by brute force: the largest grid λ with Σ_g ℓ_g(λ) + 1 <= α_g(G+1) (None: none)."""
    names = sorted(set(keys), key=repr)
    best = None
    for lam in grid:
        total = Fraction(0)
        for name in names:
            members = [m for m, k in zip(levels, keys, strict=True) if k == name]
            total += Fraction(sum(1 for m in members if lam >= m), len(members))
        if total + 1 > level * (len(names) + 1):
            break
        best = float(lam)
    return best


def _oracle(levels: list[float], keys: list[Hashable], grid: list[float], alpha: float) -> tuple[float, str] | str:
    """min of the two oracles with α_g = max(α, 2/(G+1)) in Fractions, and which one bound it."""
    a, g = Fraction(repr(alpha)), len(set(keys))
    level = max(a, Fraction(2, g + 1))
    if level >= 1:
        return "infeasible"
    episodes, grouped = _crc_oracle(levels, grid, a), _group_oracle(levels, keys, grid, level)
    if episodes is None or grouped is None:
        return "infeasible"
    bound = "both" if episodes == grouped else ("episodes" if episodes < grouped else "groups")
    return min(episodes, grouped), bound


def _answer(levels: list[float], keys: list[Hashable], grid: list[float], alpha: float) -> tuple[float, str] | str:
    try:
        got = two_level.two_level_threshold(levels, keys, grid, alpha)
    except CalibrationError:
        return "infeasible"
    return got.threshold, got.bound_by


def _instance(rng: np.random.Generator) -> tuple[list[float], list[Hashable], list[float], float]:
    n = int(rng.integers(2, 25))
    keys: list[Hashable] = [f"goal-{k}" for k in rng.integers(0, int(rng.integers(1, min(n, 9) + 1)), n)]
    levels = np.where(rng.random(n) < 0.5, np.inf, rng.integers(0, 6, n).astype(float))
    grid = [-np.inf, *np.unique(rng.integers(0, 7, 5)).astype(float).tolist()]
    return levels.tolist(), keys, grid, float(rng.choice(ALPHAS))


def test_two_level_rule_equals_the_min_of_both_oracles() -> None:
    """On 1,500 seeded small instances (G = 1..8, α .05-.5) λ̂ and the constraint that bound it equal the brute-force
    Fraction oracle min(CRC at α, group rule at max(α, 2/(G+1))); at least 100 instances have each rule binding
    alone and 100 have α_g > α, so neither case is vacuous.

    Planted bugs it catches (each tried): max instead of min; α_g = α always (the pure group rule's level at small
    G); α_g = 1/(G+1) + α; 2/(G+1) computed as a float (2/3 reads as 0.666..., budget just under 1, ties refused);
    bound_by reporting the higher rule.
    """
    rng = np.random.default_rng(20261207)
    seen = {"episodes": 0, "groups": 0, "raised": 0}
    for _ in range(1500):
        levels, keys, grid, alpha = _instance(rng)
        expected = _oracle(levels, keys, grid, alpha)
        assert _answer(levels, keys, grid, alpha) == expected, (levels, keys, grid, alpha)
        if isinstance(expected, tuple) and expected[1] != "both":
            seen[expected[1]] += 1
        g = len(set(keys))
        seen["raised"] += isinstance(expected, tuple) and Fraction(2, g + 1) > Fraction(repr(alpha))
    assert min(seen.values()) >= 100, seen


def test_group_level_is_exact_and_checks_the_flag() -> None:
    """α_g: auto = max(α, 2/(G+1)) as a Fraction (2/(G+1) = α exactly at G = 39, α = .05: α_g = α), ``alpha`` = α,
    a number = itself; below the floor 1/(G+1), or auto at G = 1, CalibrationError naming the flag and the value.

    Planted bugs it catches (each tried): 2/(G+1) as a float (G = 39 gives 0.05000000000000000277 > α); the floor
    check of a given number dropped; auto at G = 1 returning α_g = 1 (a statement that says nothing).
    """
    assert two_level.group_level(0.05, 39) == Fraction(1, 20)
    assert two_level.group_level(0.05, 31) == Fraction(1, 16)
    assert two_level.group_level(0.05, 21) == Fraction(1, 11)
    assert two_level.group_level(0.1, 31, two_level.SAME) == Fraction(1, 10)
    assert two_level.group_level(0.05, 9, Fraction(1, 10)) == Fraction(1, 10)
    with pytest.raises(CalibrationError, match=r"--group-alpha 0\.09 .*floor 1/\(G\+1\) = 1/11 with G=10"):
        two_level.group_level(0.05, 10, Fraction(9, 100))
    with pytest.raises(CalibrationError, match="G >= 2"):
        two_level.group_level(0.6, 1)
    with pytest.raises(CalibrationError, match="G=10 groups"):
        two_level.group_level(0.05, 10, two_level.SAME)


@pytest.mark.parametrize("value", ["0", "1", "-0.1", "1.5", "abc", "nan", "inf", "", "Auto"])
def test_parse_group_alpha_refuses_bad_values_naming_flag_and_value(value: str) -> None:
    """Every value that is not auto, alpha or a number in (0, 1) raises CalibrationError naming --group-alpha and
    the value.

    Planted bug it catches (tried): the check ``0 <= value <= 1`` (0 and 1 accepted); NaN passing a ``not (x <= 0)``
    style check."""
    with pytest.raises(CalibrationError) as caught:
        two_level.parse_group_alpha(value)
    assert "--group-alpha" in str(caught.value) and repr(value) in str(caught.value)
    assert two_level.parse_group_alpha("0.1") == Fraction(1, 10)
    assert two_level.parse_group_alpha("auto") == "auto" and two_level.parse_group_alpha("alpha") == "alpha"


def _corpus(n: int, rng: np.random.Generator) -> ScoredCorpus:
    scores = rng.normal(size=3 * n).round(2)
    offsets = np.arange(0, 3 * n + 1, 3)
    zeros = np.zeros(3 * n)
    return ScoredCorpus(
        episode_ids=tuple(f"e{i}" for i in range(n)),
        offsets=offsets,
        scores=scores,
        cummax=zeros,
        n_selected=zeros,
        n_prefix=zeros,
        harmful=zeros.astype(bool),
        harm_level=np.where(rng.random(n) < 0.5, scores[offsets[:-1] + 1], np.inf),
        category_levels={},
        max_score=np.zeros(n),
        utility=np.zeros(n, dtype=bool),
    )


def test_permutation_lambdas_match_the_single_rule_per_row() -> None:
    """two_level_lambdas (and carb_lambdas with groups, the default rule) give, per permutation row, the two-level
    rule on that row's own exact grid with α_g from that row's own G; ``--group-alpha alpha`` gives the pure rule.

    Planted bugs it catches (each tried): α_g from the corpus's G instead of the row's; the episode rule dropped
    from the permutation path; CarbRule's default left at the pure group rule.
    """
    rng = np.random.default_rng(5)
    n = 60
    corpus = _corpus(n, rng)
    keys = [i % 15 for i in range(n)]
    rows = np.stack([rng.permutation(n)[:24] for _ in range(8)])
    owner = np.repeat(np.arange(n), 3)
    for alpha in (0.1, 0.2):
        lams = carb_lambdas(corpus, rows, alpha, CarbRule(groups=keys))
        assert lams.tolist() == two_level.two_level_lambdas(corpus, rows, keys, alpha).tolist()
        for r, row in enumerate(rows):
            grid = crc.exact_grid(corpus.scores[np.isin(owner, row)])
            got = two_level.two_level_threshold(corpus.harm_level[row], [keys[i] for i in row], grid, alpha)
            assert lams[r] == got.threshold
        pure = carb_lambdas(corpus, rows, alpha, CarbRule(groups=keys, group_alpha=two_level.SAME))
        assert pure.tolist() == group_crc.group_lambdas(corpus, rows, keys, alpha).tolist()


# --------------------------------------------------------------------------- 2. both guarantees, simulated

G_CAL, ALPHA, TRIALS, SEED = 10, 0.05, 6_000, 20261207
GRID = np.concatenate(([-np.inf], np.linspace(-4.0, 4.0, 401)))


def _draw_group(rng: np.random.Generator) -> np.ndarray:
    """One attack goal: its own location, harm share and size (2 to 40 episodes), iid per group (exchangeable)."""
    location, share, size = rng.normal(), rng.uniform(0.3, 1.0), int(rng.integers(2, 41))
    return np.where(rng.random(size) < share, location + 0.1 * rng.normal(size=size), np.inf)


@cache
def _simulation() -> dict[str, np.ndarray]:
    """Per trial, on G=10 exchangeable calibration groups at α=.05 (α_g = 2/11): a NEW group's mean loss at λ̂, and a
    NEW episode's loss at λ̂ where the new episode is exchangeable with the calibration episodes (the G+1 groups'
    episodes pooled, one drawn at random as the new one, the rest calibrate with their group keys); each at λ̂ of
    the two-level rule (the new group also at λ̂ of its group part alone, which the group statement rests on) and
    the new episode at λ̂ of the planted max-instead-of-min rule."""
    rng = np.random.default_rng(SEED)
    out = {name: np.empty(TRIALS) for name in ("group", "group_part", "episode", "episode_max")}
    for t in range(TRIALS):
        groups = [_draw_group(rng) for _ in range(G_CAL)]
        keys = np.repeat(np.arange(G_CAL), [g.size for g in groups])
        got = two_level.two_level_threshold(np.concatenate(groups), keys.tolist(), GRID, ALPHA)
        new = _draw_group(rng)
        out["group"][t], out["group_part"][t] = (new <= got.threshold).mean(), (new <= got.group_threshold).mean()
        pool = [*groups, _draw_group(rng)]
        levels = np.concatenate(pool)
        pool_keys = np.repeat(np.arange(G_CAL + 1), [g.size for g in pool])
        pick = int(rng.integers(levels.size))
        rest = np.arange(levels.size) != pick
        two = two_level.two_level_threshold(levels[rest], pool_keys[rest].tolist(), GRID, ALPHA)
        out["episode"][t] = levels[pick] <= two.threshold
        out["episode_max"][t] = levels[pick] <= max(two.episode_threshold, two.group_threshold)
    return out


def _tolerance(losses: np.ndarray) -> float:
    """The Monte Carlo tolerance: 3 standard errors of the mean over trials."""
    return float(3 * losses.std(ddof=1) / np.sqrt(losses.size))


@pytest.mark.xdist_group("two_level_monte_carlo")  # one worker runs the cached simulation for all four tests
def test_a_new_episode_loses_at_most_alpha() -> None:
    """The episode statement: over 6,000 seeded trials a new episode exchangeable with the calibration episodes
    (G=10 groups of 2-40 episodes, α=.05) charges at λ̂ with frequency <= α + 3 standard errors (measured: 0.049
    against 0.05, tolerance 0.008: plain CRC's part is tight).

    Planted bug it catches (tried): max instead of min (the group rule at α_g = 2/11 then decides; the next test
    measures it)."""
    losses = _simulation()["episode"]
    assert losses.mean() <= ALPHA + _tolerance(losses), (losses.mean(), _tolerance(losses))


@pytest.mark.xdist_group("two_level_monte_carlo")
def test_max_instead_of_min_breaks_the_episode_statement() -> None:
    """Negative control: in the same simulation λ̂ = max of the two rules (the planted bug) charges a new episode
    above α + 3 standard errors (measured: 0.104 against 0.05, tolerance 0.012), so the previous test can fail.

    Planted bug it catches (tried): a simulation whose group part never exceeds CRC's (the group rule at its floor
    level 1/(G+1): then 0.041, and the control holds α)."""
    losses = _simulation()["episode_max"]
    assert losses.mean() > ALPHA + _tolerance(losses), (losses.mean(), _tolerance(losses))


@pytest.mark.xdist_group("two_level_monte_carlo")
def test_a_new_group_loses_at_most_alpha_g() -> None:
    """The group statement: over the same trials a NEW group's mean loss averages <= α_g = 2/11 + 3 standard errors,
    at λ̂ (measured: 0.075 against 0.182, tolerance 0.008) and at λ̂ of the group part alone, which the statement
    rests on since λ̂ is at or below it (measured: 0.120, tolerance 0.010).

    Planted bug it catches (tried): the group part's budget without the held-back 1 (Σ_g ℓ_g <= α_g(G+1): the group
    part alone then loses about 0.21).  (Max instead of min does not show here, 0.126: the episode test catches it.)"""
    level = float(two_level.group_level(ALPHA, G_CAL))
    for name in ("group", "group_part"):
        losses = _simulation()[name]
        assert losses.mean() <= level + _tolerance(losses), (name, losses.mean(), _tolerance(losses))


@pytest.mark.xdist_group("two_level_monte_carlo")
def test_the_group_statement_does_not_hold_at_alpha_with_ten_groups() -> None:
    """Negative control: at G=10 the group statement is at α_g = 2/11, not at α: a new group's mean loss at λ̂
    exceeds α = .05 by more than 3 standard errors (measured: 0.075 against 0.05, tolerance 0.008), so claiming α
    for new groups would be false.

    Planted bug it catches (tried): a simulation whose new group is drawn from the calibration episodes (then 0.038:
    the episode statement alone holds α there)."""
    losses = _simulation()["group"]
    assert losses.mean() > ALPHA + _tolerance(losses), (losses.mean(), _tolerance(losses))


# --------------------------------------------------------------------------- 3. the commands


def test_calibrate_records_both_levels_and_prints_both_statements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`calibrate --episodes ... --group-by task --alpha 0.15` (G = 5, under the pure rule's floor 1/6) runs the
    two-level rule at α_g = max(.15, 2/6) = 1/3: the artifact records rule, alpha, group_alpha (exact 1/3), groups,
    both rules' λ̂ and which bound it, states both statements as its guarantee, loads, and stderr prints both
    statements in exactly those words; ``--group-alpha alpha`` refuses there (the pure rule's floor), and at α=.3
    writes the earlier artifact (rule group_crc, its guarantee, none of the new fields); both load and verify.

    Planted bugs it catches (each tried): statements missing from stderr; the group statement printed at α instead
    of α_g; --group-alpha not passed on to the calibration; the pure rule still given the new fields.
    """
    out = tmp_path / "two.json"
    argv = ["calibrate", *OWN, "--group-by", "task", "--utility-slack", "0"]
    assert main([*argv, "--alpha", "0.15", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    body = json.loads(out.read_text(encoding="utf-8"))
    assert (body["rule"], body["alpha"], body["groups"], body["group_alpha_exact"]) == (
        two_level.TWO_LEVEL_RULE,
        0.15,
        5,
        "1/3",
    )
    assert body["group_alpha"] == 1 / 3 and body["bound_by"] in ("episodes", "groups", "both")
    assert body["threshold"] == min(body["threshold_episode_rule"], body["threshold_group_rule"])
    episode, group = two_level_statements("0.15", "1/3 (~0.3333)", 5)
    assert f"episode statement: {episode}" in err and f"group statement: {group}" in err
    assert body["guarantee"] == two_level_guarantee("0.15", "1/3 (~0.3333)", 5)
    policy = load_policy(EPISODES / "assistant_policy.yaml")
    assert load_artifact(out, policy).rule == two_level.TWO_LEVEL_RULE  # checksum and pipeline fingerprint verify
    pure = tmp_path / "pure.json"
    code = main([*argv, "--alpha", "0.15", "--group-alpha", "alpha", "--out", str(pure)])
    assert code != 0 and "G=5" in capsys.readouterr().err and not pure.exists()
    assert main([*argv, "--alpha", "0.3", "--group-alpha", "alpha", "--out", str(pure)]) == 0
    old = json.loads(pure.read_text(encoding="utf-8"))
    assert (old["rule"], old["guarantee"]) == ("group_crc", GROUP_CRC_GUARANTEE) and "group_alpha" not in old
    assert load_artifact(pure, policy).rule == "group_crc"
    assert "statement" not in capsys.readouterr().err


@pytest.mark.parametrize("value", ["0", "1", "abc", "-1", "0.1"])
@pytest.mark.parametrize(
    "command",
    [
        ["calibrate", *OWN, "--group-by", "task", "--alpha", "0.3"],
        ["evaluate", *OWN, "--group-by", "task", "--alpha", "0.3", "--permutations", "2"],
        ["evaluate", "--shift", "--runs", str(FIXTURE_RUNS), "--alpha", "0.5", "--permutations", "2"],
    ],
    ids=["calibrate", "evaluate", "evaluate-shift"],
)
def test_bad_group_alpha_fails_naming_flag_and_value(
    command: list[str], value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """calibrate, evaluate and evaluate --shift refuse a bad --group-alpha (out of (0, 1), not a number, or 0.1
    below the floor 1/(G+1): the fixture's G = 5 tasks, the shift fixture's G = 3 goals per calibration set) with
    a non-zero exit naming the flag and the value, and calibrate writes nothing.

    Planted bugs it catches (each tried): the flag parsed by one command only; a given value under its floor
    silently replaced by auto."""
    out = tmp_path / "x.json"
    extra = ["--out", str(out)] if command[0] == "calibrate" else ["--json"]
    code = main([*command, "--group-alpha", value, *extra])
    err = capsys.readouterr().err
    assert code != 0 and "--group-alpha" in err and value in err and not out.exists(), err


def test_evaluate_names_the_rule_per_alpha(capsys: pytest.CaptureFixture[str]) -> None:
    """evaluate --json records per α the rule that ran and α_g: the two-level rule by default, group_crc with
    --group-alpha alpha, crc with --group-by none.

    Planted bug it catches (tried): describe() naming group_crc for the two-level rule."""
    base = ["evaluate", *OWN, "--group-by", "task", "--alpha", "0.3", "--permutations", "2", "--json"]
    for extra, name in (([], two_level.TWO_LEVEL_RULE), (["--group-alpha", "alpha"], "group_crc")):
        assert main([*base, *extra]) == 0
        rule = json.loads(capsys.readouterr().out)["rule"]
        assert rule["per_alpha"] == {"0.3": name}
        assert rule["group_alpha"] == {"0.3": 1 / 3 if not extra else 0.3}


def test_shift_report_words_name_alpha_g() -> None:
    """The shift report's rule line names α_g next to the two-level rule only.

    Planted bug it catches (tried): α_g dropped from the line (the reader cannot tell which group level ran)."""
    from guard.studies._shift_report import rule_words

    rule = CarbRule(groups=[i % 31 for i in range(62)], slack=0.01).describe((0.05, 0.1))
    assert rule_words(rule) == (
        "α 0.05: group_crc_two_level (α_g 0.0625), α 0.1: group_crc_two_level (α_g 0.1), G=31, utility slack 0.01"
    )
    pure = CarbRule(groups=[i % 31 for i in range(62)], group_alpha="alpha").describe((0.05,))
    assert rule_words(pure) == "α 0.05: group_crc, G=31, utility slack 0.0"


@pytest.mark.parametrize(
    "command",
    [
        ["calibrate", "--corpus", "command-r-plus", "--alpha", "0.1", "--group-by", "none", "--out", "x.json"],
        ["calibrate", *OWN, "--alpha", "0.3", "--out", "x.json"],
        ["calibrate", "--corpus", "command-r-plus", "--alpha", "0.1", "--rule", "ltt", "--out", "x.json"],
        ["evaluate", *OWN, "--alpha", "0.3", "--permutations", "2", "--json"],
        ["evaluate", "--shift", "--runs", str(FIXTURE_RUNS), "--group-by", "none", "--json"],
    ],
    ids=["group-by-none", "episodes-without-group-by", "ltt", "evaluate-episodes", "shift-group-by-none"],
)
def test_group_alpha_without_a_group_rule_is_refused(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--group-alpha other than auto where no group rule runs (--group-by none, --episodes without --group-by, --rule
    ltt) exits non-zero naming the flag and its value, before any corpus is read, instead of being ignored.

    Planted bug it catches (tried): the check dropped (the flag silently ignored, exit 0)."""
    monkeypatch.chdir(tmp_path)
    assert main([*command, "--group-alpha", "0.2"]) != 0
    err = capsys.readouterr().err
    assert "--group-alpha '0.2'" in err and "no group rule runs" in err and not (tmp_path / "x.json").exists()
