"""Comparing recipes (issue 24): delphi.compare_recipes, backtest_recipes, compare-recipes.

Small seeded simulated ladders with a known answer; cheap (a few seconds in all).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.analyses.recipes import backtest_recipes, compare_recipes
from delphi.errors import LadderError, LadderWarning, TargetError
from delphi.ladder import Ladder

C0 = 1e18
# Two power laws in C (Kaplan et al. 2020 Eq. 1.3 + E) that meet once, at C = 1e19: below it
# A is better, above it B (lower floor, steeper slope).
A_LAW = {"E": 1.8, "A": 1.0 * C0 ** 0.2, "alpha": 0.2}
B_LAW = {"E": 1.7, "A": (1.8 + 10 ** -0.2 - 1.7) * 10 ** 0.25 * C0 ** 0.25, "alpha": 0.25}
CROSS = 1e19
TARGET = 1e21


def _power(p, c):
    return p["E"] + p["A"] * np.asarray(c, float) ** -p["alpha"]


def _power_ladders(seed=0, shared=0.004, own=0.0015, metric_b="loss", unit_b="nats/token"):
    """One run per budget, 13 budgets 1e16..1e20; each budget's losses carry a shared
    (design: the same hyperparameters) and an own log perturbation."""
    rng = np.random.default_rng(seed)
    c = np.logspace(16, 20, 13)
    common = rng.normal(0, shared, len(c))
    out = []
    for name, law, metric, unit in (("A", A_LAW, "loss", "nats/token"),
                                    ("B", B_LAW, metric_b, unit_b)):
        loss = _power(law, c) * np.exp(common + rng.normal(0, own, len(c)))
        df = pd.DataFrame({"run": [f"{name}-{i}" for i in range(len(c))], "flops": c,
                           "loss": loss})
        out.append(Ladder(df, name=name, metric=metric, unit=unit))
    return out


def _true_multiplier(target):
    goal = _power(B_LAW, target)
    c_a = (A_LAW["A"] / (goal - A_LAW["E"])) ** (1 / A_LAW["alpha"])
    return c_a / target


@pytest.fixture(scope="module")
def power_pair():
    return _power_ladders()


@pytest.fixture(scope="module")
def paired(power_pair):
    return compare_recipes(power_pair, target_flops=[TARGET], law="power", n_boot=100, seed=1,
                           forecasts=False)


def test_known_multiplier_and_crossover_are_recovered_within_their_intervals(paired):
    (c,) = paired.comparisons
    assert paired.pairing == "run" and "paired bootstrap" in paired.method
    true_diff = float(_power(B_LAW, TARGET) - _power(A_LAW, TARGET))
    assert c.lower <= true_diff <= c.upper and c.loss < 0 and c.p_better > 0.9
    m = _true_multiplier(TARGET)
    assert c.multiplier_lower <= m <= c.multiplier_upper
    assert abs(math.log(c.multiplier / m)) < 1.0
    assert c.crossover_lower <= CROSS <= c.crossover_upper
    assert abs(math.log10(c.crossover / CROSS)) < 0.5 and c.crossover_share > 0.9


def test_paired_interval_is_narrower_than_the_unpaired_one(power_pair, paired):
    unpaired = compare_recipes(power_pair, target_flops=[TARGET], law="power", n_boot=100, seed=1,
                               pairing="none", forecasts=False)
    assert unpaired.pairing == "none" and "unpaired" in unpaired.method
    p, u = paired.comparisons[0], unpaired.comparisons[0]
    assert (p.mean_upper - p.mean_lower) < 0.8 * (u.mean_upper - u.mean_lower)
    assert (p.upper - p.lower) < (u.upper - u.lower)


def test_mismatched_units_and_metrics_are_refused_naming_both():
    a, b = _power_ladders(unit_b="bits/byte")
    with pytest.raises(LadderError, match=r"'A' and 'B' are in different units "
                                          r"\(nats/token and bits/byte\)"):
        compare_recipes([a, b], target_flops=TARGET, law="power", n_boot=20, forecasts=False)
    a, b = _power_ladders(metric_b="HellaSwag accuracy")
    with pytest.raises(LadderError, match="different metrics"):
        compare_recipes([a, b], target_flops=TARGET, law="power", n_boot=20, forecasts=False)


def test_a_different_eval_set_is_warned_about():
    a, b = _power_ladders(metric_b="C4 validation loss")
    with pytest.warns(LadderWarning, match="evaluated on different sets"):
        r = compare_recipes([a, b], target_flops=TARGET, law="power", n_boot=20,
                            forecasts=False)
    assert any("different sets" in w for w in r.warnings)


def test_bad_targets_and_single_ladder_are_refused(power_pair):
    with pytest.raises(TargetError, match="no target"):
        compare_recipes(power_pair, law="power", n_boot=20, forecasts=False)
    with pytest.raises(TargetError, match="not both"):
        compare_recipes(power_pair, target_flops=TARGET, target_params=1e9, target_tokens=2e10,
                        law="power", n_boot=20)
    with pytest.raises(LadderError, match="at least two"):
        compare_recipes(power_pair[:1], target_flops=TARGET, law="power")


def test_same_seed_same_result_and_the_seed_matters(power_pair, paired):
    again = compare_recipes(power_pair, target_flops=[TARGET], law="power", n_boot=100, seed=1,
                            forecasts=False)
    assert again.to_dict() == paired.to_dict()
    other = compare_recipes(power_pair, target_flops=[TARGET], law="power", n_boot=100, seed=2,
                            forecasts=False)
    assert other.comparisons[0].lower != paired.comparisons[0].lower


def _isoflop_pair(s=1.5, seed=0):
    """Chinchilla recipes on one isoFLOP grid: B at (N, D) is A at (sN, sD), so B is worth
    s^2 times the compute at every budget (the envelope multiplier)."""
    law = {"E": 1.8, "A": 400.0, "B": 1500.0, "alpha": 0.34, "beta": 0.30}
    rng = np.random.default_rng(seed)
    rows = {"A": [], "B": []}
    for c in (1e17, 3e17, 1e18, 3e18, 1e19):
        n_opt = 0.09 * (c / 6) ** 0.5
        for j, n in enumerate(n_opt * np.exp(np.linspace(-1.2, 1.2, 5))):
            d = c / (6 * n)
            shared = rng.normal(0, 0.002)
            for name, f in (("A", 1.0), ("B", s)):
                loss = (law["E"] + law["A"] * (f * n) ** -law["alpha"]
                        + law["B"] * (f * d) ** -law["beta"]) * math.exp(shared)
                rows[name].append({"run": f"{name}-{c:g}-{j}", "params": n, "tokens": d,
                                   "flops": c, "loss": loss})
    return [Ladder(pd.DataFrame(rows[k]), name=f"iso-{k}") for k in ("A", "B")]


def test_chinchilla_envelope_multiplier_and_json_shape():
    ladders = _isoflop_pair()
    r = compare_recipes(ladders, target_flops=[1e21, 1e22], n_boot=40, seed=0,
                        forecasts=False)
    assert r.law == "chinchilla" and len(r.comparisons) == 2
    for c in r.comparisons:
        assert c.loss < 0 and c.p_better == 1.0
        assert c.multiplier_lower <= 1.5 ** 2 <= c.multiplier_upper
        assert abs(c.multiplier / 2.25 - 1) < 0.15
        assert c.crossover is None          # B better everywhere
    d = r.to_dict()
    assert d["reference"] == "iso-A"
    for c in d["comparisons"]:
        assert {"recipe", "target_flops", "difference", "p_better", "compute_multiplier",
                "crossover"} <= set(c)
        assert {"loss", "lower", "upper"} <= set(c["difference"])
        assert {"value", "lower", "upper"} <= set(c["compute_multiplier"])
        assert {"flops", "lower", "upper"} <= set(c["crossover"])
        assert c["crossover"]["flops"] is None
    json.dumps(d, allow_nan=False)
    assert "none in 1e+15..1e+27" in r.report()


def test_cli_json_and_text(tmp_path, capsys):
    from delphi.cli.main import main
    paths = []
    for ld in _isoflop_pair():
        p = tmp_path / f"{ld.name}.csv"
        ld.table[["run", "params", "tokens", "flops", "loss"]].to_csv(p, index=False)
        paths.append(str(p))
    code = main(["compare-recipes", *paths, "--target-flops", "1e21", "--n-boot", "20",
                 "--interval", "delta", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    d = json.loads(out)
    assert d["reference"] == "iso-A" and d["comparisons"][0]["recipe"] == "iso-B"
    assert d["comparisons"][0]["forecasts"]["recipe"]["loss"] > 0
    code = main(["compare-recipes", paths[0], "--target-flops", "1e21"])
    assert code == 2


def test_decision_backtest_scores_every_pair_against_the_baseline():
    bt = backtest_recipes(_isoflop_pair(), n_boot=20, seed=0, max_cuts=1)
    s = bt.summary
    assert bt.design == "envelope" and s["n"] == 2 and s["n_cuts"] == 1
    assert s["decision_accuracy"] == 1.0 and s["baseline_accuracy"] == 1.0
    assert 0 <= s["coverage"] <= 1
    assert {"cut", "a", "b", "observed", "predicted", "lower", "upper", "inside",
            "correct", "baseline", "baseline_correct"} <= set(bt.rows[0])
    json.dumps(bt.to_dict(), allow_nan=False)


def test_lazy_export():
    assert delphi.compare_recipes is compare_recipes
    assert "compare_recipes" in delphi.__all__
