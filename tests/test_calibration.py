"""Leave-future-out errors and the extrapolation calibration model (issue 11, item 1)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

import delphi
from delphi.calibration import (MIN_FOLDS, SIGMA_FLOOR, CalibrationModel, LFOErrors,
                                leave_future_out)
from delphi.errors import FitError, LadderError, TargetError
from delphi.ladder import Ladder


def _ladder(c, y, name="sim"):
    return Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(len(c))], "flops": c, "loss": y}),
                  name=name)


def _errors(ratio, log_error, n_folds=3):
    """LFOErrors built by hand: ``n_folds`` distinct cuts spread over the entries."""
    n = len(ratio)
    cut = 1.0 + np.arange(n) % n_folds
    return LFOErrors(law="power", ladder="hand", run=np.array([f"r{i}" for i in range(n)], object),
                     cut=cut, flops=cut * np.asarray(ratio), ratio=np.asarray(ratio, float),
                     log_error=np.asarray(log_error, float), predicted=np.ones(n),
                     actual=np.exp(-np.asarray(log_error, float)))


# ----------------------------------------------------------------------------- leave_future_out
def test_lfo_exact_power_law_has_zero_errors_and_right_ratios():
    # Budgets at 1e17 * 10^(i/2), i = 0..6, losses exactly on L = 1.8 + 2 (C/1e17)^-0.3: every
    # refit recovers the law, so every log error is ~0. Power has 3 free parameters, so the
    # first cut needs 5 points (index 4): cuts at budgets 4 and 5, predicting 2 + 1 runs.
    c = 1e17 * 10 ** (0.5 * np.arange(7))
    y = 1.8 + 2.0 * (c / 1e17) ** -0.3
    e = leave_future_out(_ladder(c, y), "power")
    assert e.n_folds == 2 and len(e) == 3
    assert list(e.run) == ["r5", "r6", "r6"]
    np.testing.assert_allclose(e.cut, [c[4], c[4], c[5]])
    np.testing.assert_allclose(e.ratio, [10 ** 0.5, 10.0, 10 ** 0.5])
    np.testing.assert_allclose(e.actual, [y[5], y[6], y[6]])
    assert np.abs(e.log_error).max() < 1e-6
    np.testing.assert_allclose(e.log_error, np.log(e.predicted) - np.log(e.actual))
    assert e.folds[0]["warm_start"] is False and e.folds[1]["warm_start"] is True
    d = json.loads(json.dumps(e.to_dict()))
    assert d["n_folds"] == 2 and len(d["rows"]) == 3 and d["design"] == "leave-future-out"
    assert "2 fold(s), 3 prediction(s)" in e.report()


def test_lfo_min_budgets_and_fixed_floor_move_the_first_cut():
    c = 1e17 * 10 ** (0.5 * np.arange(7))
    y = 1.8 + 2.0 * (c / 1e17) ** -0.3
    lad = _ladder(c, y)
    # E fixed: 2 free parameters, first cut needs 4 points (index 3) -> cuts 3, 4, 5.
    assert leave_future_out(lad, "power", fixed={"E": 1.8}).n_folds == 3
    # min_budgets=6: first cut at index 5 only.
    assert leave_future_out(lad, "power", min_budgets=6).n_folds == 1


def test_lfo_too_few_budgets_is_a_ladder_error():
    c = 1e17 * 10 ** (0.5 * np.arange(5))
    with pytest.raises(LadderError, match=r">= 5 points .*5 point\(s\)"):
        leave_future_out(_ladder(c, 1.8 + 2 * (c / 1e17) ** -0.3), "power")


# ----------------------------------------------------------------------------- CalibrationModel
def test_calibration_recovers_a_known_linear_spread():
    # e ~ N(0, s(r)) with s(r) = 0.002 + 0.01 log10 r: the median regression of
    # |e| / Phi^-1(0.75) recovers both coefficients (3,000 seeded draws).
    rng = np.random.default_rng(0)
    r = 10 ** rng.uniform(0, 3, 3000)
    e = rng.normal(0, 0.002 + 0.01 * np.log10(r))
    m = CalibrationModel.fit(_errors(r, e, n_folds=5))
    assert m.sigma_0 == pytest.approx(0.002, abs=0.0007)
    assert m.k == pytest.approx(0.01, rel=0.08)
    assert m.n_folds == 5 and m.n_errors == 3000


def test_calibration_exact_median_line_and_constraints():
    # |e| / 0.6745 = 0.01 + 0.02 log10 r exactly on 4 points: the L1 line passes through them.
    r = np.array([1.0, 10.0, 100.0, 1000.0])
    z75 = norm.ppf(0.75)
    e = (0.01 + 0.02 * np.log10(r)) * z75 * np.array([1, -1, 1, -1])
    m = CalibrationModel.fit(_errors(r, e))
    assert (m.sigma_0, m.k) == (pytest.approx(0.01, abs=1e-9), pytest.approx(0.02, abs=1e-9))
    # Errors shrinking with r: k is held at 0 (never a narrowing interval with distance).
    m2 = CalibrationModel.fit(_errors(r, (0.05 - 0.01 * np.log10(r)) * z75))
    assert m2.k == 0.0 and m2.sigma_0 > 0
    # All-zero errors: sigma_0 at the floor, never a zero-width interval.
    m3 = CalibrationModel.fit(_errors(r, np.zeros(4)))
    assert m3.sigma_0 == pytest.approx(SIGMA_FLOOR) and m3.k == 0.0


def test_interval_combines_in_quadrature_in_log_space():
    m = CalibrationModel(sigma_0=0.01, k=0.02, n_folds=3, n_errors=9, max_ratio=100.0)
    assert m.sigma(100.0) == pytest.approx(0.05)
    assert m.sigma(0.5) == pytest.approx(0.01)     # r <= 1: in-sample spread
    sd = math.sqrt(0.05 ** 2 + 0.03 ** 2 + 0.04 ** 2)
    z = 1.6448536269514722                           # two-sided 90% normal quantile
    lo, hi = m.interval(2.0, 100.0, 0.9, param_sd=0.03, run_sd=0.04)
    assert lo == pytest.approx(2.0 * math.exp(-z * sd)) and hi == pytest.approx(2.0 * math.exp(z * sd))
    lo_v, hi_v = m.interval(np.array([2.0, 3.0]), np.array([1.0, 100.0]))
    assert hi_v[0] == pytest.approx(2.0 * math.exp(z * 0.01))
    with pytest.raises(TargetError):
        m.interval(-1.0, 10.0)
    with pytest.raises(TargetError):
        m.interval(2.0, 10.0, level=1.5)
    with pytest.raises(TargetError):
        m.sigma(0.0)


def test_calibration_refuses_fewer_than_three_folds():
    assert MIN_FOLDS == 3
    with pytest.raises(FitError, match="at least 3 folds.*gave 2"):
        CalibrationModel.fit(_errors([2.0, 3.0, 4.0], [0.01, 0.02, 0.0], n_folds=2))


# ----------------------------------------------------------------------------- simulated ladders
def _truth(c, g):
    # A misspecified truth for the power law: the exponent drifts with log C (curvature in
    # log-log), alpha(C) = 0.25 + g log10(C / 1e17).
    x = c / 1e17
    return 1.8 + 2.0 * x ** -(0.25 + g * np.log10(x))


def test_calibrated_interval_covers_misspecified_truth_over_200_ladders():
    # 200 seeded ladders: 10 budgets half a decade apart (1e17..3e21), the curved truth above
    # with g ~ U(-0.03, 0.03), run noise 0.5% (log). The power law is refitted leave-future-out
    # (5 folds), calibrated, and the full-ladder forecast at r ~ 10^U(1, 2) beyond the largest
    # budget gets a 90% interval; it should cover the true loss 85-95% of the time.
    n_sim, nb, noise = 200, 10, 0.005
    c = 1e17 * 10 ** (0.5 * np.arange(nb))
    hits = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(n_sim):
            rng = np.random.default_rng([11, s])
            g = rng.uniform(-0.03, 0.03)
            lad = _ladder(c, _truth(c, g) * np.exp(rng.normal(0, noise, nb)), f"sim{s}")
            e = leave_future_out(lad, "power")
            model = CalibrationModel.fit(e)
            # Full-ladder forecast by the same fast path, warm-started from the last cut.
            full = delphi.fit(lad, "power", warm_start=e.folds[-1]["params"], identify=False)
            r = 10 ** rng.uniform(1, 2)
            target = c[-1] * r
            lo, hi = model.interval(float(full.predict({"flops": np.array([target])})[0]), r, 0.9)
            hits += lo <= _truth(target, g) <= hi
    coverage = hits / n_sim
    print(f"\ncalibrated 90% interval coverage over {n_sim} misspecified ladders: {coverage:.1%}")
    assert 0.85 <= coverage <= 0.95


# ----------------------------------------------------------------------------- real ladder
def test_lfo_on_epoch_chinchilla_errors_grow_with_ratio(data_dir):
    ladder = delphi.load_ladder("epoch-chinchilla")
    # Every Epoch run is its own budget (80 cuts); 12 evenly spaced cuts keep the test quick.
    e = leave_future_out(ladder, "chinchilla", max_folds=12)
    assert e.n_folds == 12 and np.all(e.ratio > 1) and np.all(np.isfinite(e.log_error))
    # Far extrapolation (r >= 100) misses by more than nearer extrapolation; with 12 of the 80
    # cuts the r < 10 and 10..100 bins are close (3.4% and 2.7%; all 80 cuts order all three).
    a = np.abs(e.log_error)
    bins = [a[e.ratio < 10].mean(), a[(e.ratio >= 10) & (e.ratio < 100)].mean(),
            a[e.ratio >= 100].mean()]
    assert bins[2] > 1.5 * max(bins[0], bins[1])
    m = CalibrationModel.fit(e)
    assert m.k > 0
