"""benchmarks/bench_rules_lolo.py (issue 21, item 5): the leave-one-ladder-out chooser on toy
tables, and the t-factor / interval-score arithmetic against delphi's own (no fits, no data)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_rules_lolo as lolo_mod  # noqa: E402

from delphi.calibration import CalibrationModel  # noqa: E402


def _table(means: dict[str, dict], n: dict[str, int] | None = None) -> dict:
    """ladder -> value -> an array of n copies of the given mean."""
    n = n or {}
    return {lad: {v: np.full(n.get(lad, 2), m) for v, m in row.items()} for lad, row in
            means.items()}


def test_lolo_chooses_on_the_other_ladders():
    # value "b" is best pooled, but only because of ladder X; left out, X gets "a"
    t = _table({"X": {"a": 5.0, "b": 0.0}, "Y": {"a": 1.0, "b": 2.0}, "Z": {"a": 1.0, "b": 1.5}})
    res = lolo_mod.lolo(t, ["a", "b"], default="a")
    assert res["in_sample"] == "b"
    assert res["chosen"] == {"X": "a", "Y": "b", "Z": "b"}
    out = lolo_mod.score_choice(t, res["chosen"])
    assert np.mean(out) == pytest.approx((5.0 + 2.0 + 1.5) / 3)
    assert lolo_mod.per_ladder_min(t, res["chosen"]) == ("Z", 1.5)


def test_pooling_over_predictions_or_ladders_and_ties_to_default():
    t = _table({"X": {"a": 1.0, "b": 0.0}, "Y": {"a": 1.0, "b": 3.0}}, n={"X": 3, "Y": 1})
    assert lolo_mod.pooled_mean(t, "b") == pytest.approx(0.75)
    assert lolo_mod.pooled_mean(t, "b", weighting="ladder") == pytest.approx(1.5)
    assert lolo_mod.choose(t, ["a", "b"], "a") == "b"
    assert lolo_mod.choose(t, ["a", "b"], "a", weighting="ladder") == "a"
    tied = _table({"X": {"a": 1.0, "b": 1.0, "c": 1.0}})
    assert lolo_mod.choose(tied, ["a", "b", "c"], default="b") == "b"
    assert lolo_mod.choose(tied, ["a", "b", "c"], default="zz") == "a"


def test_coverage_filter_restricts_the_choice():
    score = _table({"X": {"narrow": 0.1, "wide": 0.3}, "Y": {"narrow": 0.1, "wide": 0.3}})
    inside = {"X": {"narrow": np.array([1, 1, 1, 0.0]), "wide": np.ones(4)},
              "Y": {"narrow": np.array([0, 0, 1, 1.0]), "wide": np.array([1, 1, 1, 0.0])}}
    ok = lolo_mod.coverage_admissible(inside, ["narrow", "wide"], (0.85, 0.95), 0.75)
    assert ok(["X", "Y"]) == ["wide"]          # narrow: 62.5% pooled, Y at 50%
    assert ok(["X"]) == []                     # 75% and 100%: neither in range
    res = lolo_mod.lolo(score, ["narrow", "wide"], "narrow", admissible=ok)
    assert res["in_sample"] == "wide"
    assert res["chosen"] == {"X": "narrow", "Y": "narrow"}   # none admissible: unfiltered


def test_t_factor_is_delphis_small_sample_factor():
    for n in (3, 4, 7, 12):
        m = CalibrationModel(sigma_0=0.01, k=0.0, n_folds=n, n_errors=10, max_ratio=10.0)
        assert lolo_mod.t_factor("t(n-1)", n) == pytest.approx(m.small_sample_factor(0.9),
                                                               rel=1e-12)
    f = lolo_mod.t_factor("t(n-2)", [3, 12])
    assert f[0] == pytest.approx(6.3138 / 1.6449, rel=1e-3)      # t_1, at least 1 dof
    assert f[1] > lolo_mod.t_factor("t(n-1)", 12) > 1.0
    assert np.all(lolo_mod.t_factor("z", [3, 9]) == 1.0)


def test_half_width_and_interval_score():
    import bench_reference as br
    m = CalibrationModel(sigma_0=0.02, k=0.01, n_folds=4, n_errors=10, max_ratio=10.0)
    lo, hi = m.interval(2.0, 10.0, 0.9, param_sd=0.005, run_sd=0.003)
    h = lolo_mod.half_width(m.sigma(10.0), m.small_sample_factor(0.9), 0.005, 0.003)
    assert float(h) == pytest.approx(np.log(hi / 2.0), rel=1e-12)
    for e in (0.0, 0.05, -0.2):
        got = float(lolo_mod.interval_scores(e, 0.1))
        assert got == pytest.approx(br.interval_score(-0.1, 0.1, -e, alpha=0.1))
    assert float(lolo_mod.interval_scores(0.3, 0.1)) == pytest.approx(0.2 + 20 * 0.2)
