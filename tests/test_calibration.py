"""Leave-future-out errors and the extrapolation calibration model (issue 11, item 1)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
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
    z = 1.6448536269514722                           # two-sided 90% normal quantile
    # sigma(r) is widened by t(0.95, 3 folds - 1 = 2 dof) / z = 2.919986 / 1.644854
    f = 2.919985580355516 / z
    assert m.small_sample_factor(0.9) == pytest.approx(f, rel=1e-9)
    sd = math.sqrt((f * 0.05) ** 2 + 0.03 ** 2 + 0.04 ** 2)
    lo, hi = m.interval(2.0, 100.0, 0.9, param_sd=0.03, run_sd=0.04)
    assert lo == pytest.approx(2.0 * math.exp(-z * sd)) and hi == pytest.approx(2.0 * math.exp(z * sd))
    lo_v, hi_v = m.interval(np.array([2.0, 3.0]), np.array([1.0, 100.0]))
    assert hi_v[0] == pytest.approx(2.0 * math.exp(z * f * 0.01))
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


def _calibrated_forecast(g, nb=10):
    """Noise-free ladder of ``nb`` budgets half a decade apart on the curved truth: the power
    law refitted leave-future-out, its calibration model, and the full-ladder fit."""
    c = 1e17 * 10 ** (0.5 * np.arange(nb))
    lad = _ladder(c, _truth(c, g), f"curved{g:+.2f}")
    e = leave_future_out(lad, "power")
    model = CalibrationModel.fit(e)
    # Full-ladder forecast by the same fast path, warm-started from the last cut.
    full = delphi.fit(lad, "power", warm_start=e.folds[-1]["params"], identify=False)
    return c, model, full


@pytest.mark.parametrize("g", [-0.02, -0.01, 0.01, 0.02, 0.03])
def test_calibrated_interval_covers_a_curved_truth_the_delta_interval_misses(g):
    """The calibrated 90% interval covers the known true loss 10x and 100x beyond a ladder
    whose truth a power law misfits, where the uncalibrated delta-method interval of the same
    forecast misses it at 100x. Noise-free ladders, so the answer is known without a seed:
    the leave-future-out errors are the misfit alone. At 100x the forecast misses the truth
    by 0.8-3.2% and the calibrated half-width is 3-7x that miss; the delta interval sees
    only the residuals (half-width 0.5-2.0% for |g| <= 0.02, 1.3-2.2x short of the miss; at
    g = 0.03 its 3.1% nearly reaches the 3.2% miss, so its miss is not asserted there).

    Coverage over many noisy ladders (93.5% of 200 with g ~ U(-0.03, 0.03), 0.5% noise, the
    85-95% band the former test asserted) is measured by benchmarks/bench_coverage.py
    (RESULTS.md, "Issue 20"). It is lower for g < -0.02, where the full ladder's error
    outgrows the leave-future-out errors at the same ratio: noise-free, g = -0.03 misses by
    13.6% at 100x against a 5.2% half-width, which is why that case is not here."""
    from delphi.uncertainty import delta_interval
    c, model, full = _calibrated_forecast(g)
    assert model.n_folds == 5 and model.k > 0       # the misfit grows with the ratio
    for r in (10.0, 100.0):
        target = {"flops": np.array([c[-1] * r])}
        truth = float(_truth(target["flops"], g)[0])
        pred = float(full.predict(target)[0])
        lo, hi = model.interval(pred, r, 0.9)
        assert lo <= truth <= hi, (r, pred, truth, lo, hi)
        if r == 100.0 and abs(g) <= 0.02:
            delta = delta_interval(full, target, level=0.9)
            assert not delta.lower <= truth <= delta.upper, (truth, delta.lower, delta.upper)


def test_calibrated_interval_of_an_exact_law_stays_at_the_floor():
    """The same pipeline on a noise-free ladder the power law fits exactly (g = 0): every
    leave-future-out error is ~0, so sigma(r) is the floor at every ratio (no width from
    nowhere), and the interval still covers the exact forecast."""
    c, model, full = _calibrated_forecast(0.0)
    assert model.sigma_0 == pytest.approx(SIGMA_FLOOR) and model.k == pytest.approx(0, abs=1e-9)
    target = np.array([c[-1] * 100.0])
    pred = float(full.predict({"flops": target})[0])
    assert pred == pytest.approx(float(_truth(target, 0.0)[0]), rel=1e-6)
    lo, hi = model.interval(pred, 100.0, 0.9)
    half = norm.ppf(0.95) * model.small_sample_factor(0.9) * SIGMA_FLOOR
    assert math.log(hi / pred) == pytest.approx(half, rel=1e-6)
    assert lo <= float(_truth(target, 0.0)[0]) <= hi


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


# ----------------------------------------------------------------------------- calibrated_interval
def _base_interval(param_sd, run_sd, centre=2.0, level=0.9, method="delta"):
    """A hand-made delta-method Interval whose expected-loss interval has log half-width
    z * param_sd and whose run noise is run_sd."""
    from delphi.uncertainty import Interval
    z = norm.ppf(0.5 + level / 2)
    new = math.sqrt(param_sd ** 2 + run_sd ** 2)
    return Interval(lower=centre * math.exp(-z * new), upper=centre * math.exp(z * new),
                    mean_lower=centre * math.exp(-z * param_sd),
                    mean_upper=centre * math.exp(z * param_sd), level=level, method=method,
                    noise=run_sd, noise_source="hand")


@pytest.mark.parametrize("param, run, ratio", [(0.03, 0.04, 100.0), (0.02, 0.08, 10.0),
                                               (0.0, 0.0, 1000.0)])
def test_calibrated_interval_adds_sigma_param_and_run_in_quadrature(param, run, ratio):
    from delphi.calibration import calibrated_interval
    m = CalibrationModel(sigma_0=0.01, k=0.02, n_folds=4, n_errors=20, max_ratio=100.0,
                         law="power", ladder="hand")
    base = _base_interval(param, run, level=0.8)
    cal = calibrated_interval(base, 2.5, m, ratio)
    z = norm.ppf(0.9)                              # two-sided 80%
    # 4 folds: sigma(r) widened by t(0.9, 3 dof) / z (Student t over the folds)
    s = (0.01 + 0.02 * math.log10(ratio)) * stats.t.ppf(0.9, 3) / z
    sd_new = math.sqrt(s ** 2 + param ** 2 + run ** 2)
    # Expected loss: the errors sigma(r) models already hold run noise, so it is taken out.
    # run noise above s would leave nothing: floored at SIGMA_FLOOR, never zero-width
    sd_mean = math.sqrt(max(s ** 2 - run ** 2, 1e-4 ** 2) + param ** 2)
    assert cal.method == "calibrated" and cal.level == 0.8
    assert cal.lower == pytest.approx(2.5 * math.exp(-z * sd_new), rel=1e-12)
    assert cal.upper == pytest.approx(2.5 * math.exp(z * sd_new), rel=1e-12)
    assert cal.mean_lower == pytest.approx(2.5 * math.exp(-z * sd_mean), rel=1e-12)
    assert cal.mean_upper == pytest.approx(2.5 * math.exp(z * sd_mean), rel=1e-12)
    info = cal.calibration
    assert info["method"] == "calibrated" and info["base_method"] == "delta"
    assert info["sigma_0"] == 0.01 and info["k"] == 0.02 and info["n_folds"] == 4
    raw = 0.01 + 0.02 * math.log10(ratio)              # sigma(r) itself
    assert info["ratio"] == ratio and info["sigma_at_target"] == pytest.approx(raw)
    assert info["sigma_used"] == pytest.approx(s)       # widened by the t factor
    assert info["param_sd"] == pytest.approx(param, abs=1e-12)
    assert info["run_sd"] == pytest.approx(run, abs=1e-12)
    assert info["extrapolated"] is (ratio > 100.0)
    d = json.loads(json.dumps(cal.to_dict(), allow_nan=False))
    assert d["method"] == "calibrated" and d["calibration"]["sigma_used"] == pytest.approx(s)
    assert "calibration" not in base.to_dict()     # uncalibrated intervals: JSON unchanged


def test_calibrated_interval_rejects_a_bad_ratio():
    from delphi.calibration import calibrated_interval
    m = CalibrationModel(sigma_0=0.01, k=0.02, n_folds=3, n_errors=9, max_ratio=10.0)
    with pytest.raises(TargetError):
        calibrated_interval(_base_interval(0.01, 0.01), 2.0, m, float("nan"))


# ----------------------------------------------------------------------------- cuts and budgets
def test_first_cut_rule_sets_the_fewest_points_below_the_first_cut(monkeypatch):
    import delphi.forecasting.calibration as cal
    from delphi.calibration import cut_levels, first_cut_formula, first_cut_points
    assert cal.FIRST_CUT_RULE == "p+2"          # the default (benchmarks/bench_cut_rule.py)
    assert [first_cut_points(5, r) for r in ("p+2", "2p", "2p+2", "3p")] == [7, 10, 12, 15]
    assert first_cut_points(3) == 5 and first_cut_formula() == "free parameters + 2"
    with pytest.raises(LadderError, match="unknown first-cut rule 'p\\+9'"):
        first_cut_points(3, "p+9")
    with pytest.raises(LadderError, match="whole number"):
        first_cut_points(-1)
    # one point per budget, power (3 free parameters): the first cut has need(3) points
    c = 1e17 * 10 ** (0.5 * np.arange(12))
    lad = _ladder(c, 1.8 + 2.0 * (c / 1e17) ** -0.3)
    first = {}
    for rule, need in (("p+2", 5), ("2p", 6), ("2p+2", 8), ("3p", 9)):
        monkeypatch.setattr(cal, "FIRST_CUT_RULE", rule)
        lv = cut_levels(lad, "power")
        first[rule] = lv[0]
        assert lv[0] == float(f"{c[need - 1]:.3g}"), rule
        assert lv[-1] == float(f"{c[-2]:.3g}")
    monkeypatch.setattr(cal, "FIRST_CUT_RULE", "3p")
    e = leave_future_out(lad, "power")
    assert e.folds[0]["n_points"] == 9 and e.folds[0]["budget"] == first["3p"]
    small = _ladder(c[:9], 1.8 + 2.0 * (c[:9] / 1e17) ** -0.3)
    with pytest.raises(LadderError, match=r">= 9 points \(3 x free parameters\)"):
        leave_future_out(small, "power")


def test_lfo_budget_is_the_cut_level_and_cuts_restrict_the_folds():
    from delphi.calibration import cut_levels
    c = 1e17 * 10 ** (0.5 * np.arange(9))
    y = 1.8 + 2.0 * (c / 1e17) ** -0.3
    lad = _ladder(c, y)
    # Budget labels are the budget's smallest C to 3 significant digits; power has 3 free
    # parameters, so cuts at index 4..7 (5 points below, a budget above).
    levels = [float(f"{x:.3g}") for x in c[4:8]]
    assert cut_levels(lad, "power") == levels
    e = leave_future_out(lad, "power")
    assert [f["budget"] for f in e.folds] == levels
    np.testing.assert_allclose([f["cut"] for f in e.folds], c[4:8])
    # each prediction's budget is the label of its fold's cut; cut is the C actually fitted
    for b, k in zip(e.budget, e.cut):
        assert b == float(f"{k:.3g}")
    # cuts=: only those levels (an unknown level is ignored), the rest as before
    e2 = leave_future_out(lad, "power", cuts=[levels[1], levels[3], 123.0])
    assert [f["budget"] for f in e2.folds] == [levels[1], levels[3]]
    assert list(e2.run) == ["r6", "r7", "r8", "r8"]
    np.testing.assert_allclose(e2.ratio, [c[6] / c[5], c[7] / c[5], c[8] / c[5], c[8] / c[7]])


def test_lfo_first_fold_matches_an_independent_fit():
    # The first cut is a plain global fit of the runs below it: redo it with delphi.fit.
    rng = np.random.default_rng(5)
    c = 1e17 * 10 ** (0.5 * np.arange(8))
    y = (1.8 + 2.0 * (c / 1e17) ** -0.3) * np.exp(rng.normal(0, 0.004, 8))
    lad = _ladder(c, y)
    e = leave_future_out(lad, "power")
    f = delphi.fit(_ladder(c[:5], y[:5]), "power", identify=False)
    pred = f.predict({"flops": c[5:]})
    first = e.cut == c[4]
    np.testing.assert_allclose(e.predicted[first], pred, rtol=1e-6)
    np.testing.assert_allclose(e.log_error[first], np.log(pred) - np.log(y[5:]), atol=1e-6)


def test_lfo_skips_a_failing_first_cut_with_a_note(monkeypatch):
    import delphi.calibration as cal
    c = 1e17 * 10 ** (0.5 * np.arange(8))
    lad = _ladder(c, 1.8 + 2.0 * (c / 1e17) ** -0.3)
    real, calls = cal.fit, []

    def flaky(ladder, *a, **k):
        calls.append(len(ladder.runs))
        if len(calls) == 1:
            raise FitError("simulated failure of the smallest cut")
        return real(ladder, *a, **k)

    monkeypatch.setattr(cal, "fit", flaky)
    e = leave_future_out(lad, "power")
    assert calls[:2] == [5, 6]             # the 5-run cut failed; the 6-run cut came next
    assert [f["budget"] for f in e.folds] == [float(f"{x:.3g}") for x in c[5:7]]
    assert e.folds[0]["warm_start"] is False        # the next cut starts by global search
    assert any("skipped" in n and "simulated failure" in n and "1e+19" in n
               for n in e.notes), e.notes
    assert "r5" not in set(e.run)                   # only the failed cut predicted r5


# ----------------------------------------------------------------------------- nested backtest
def _bent_ladder(nb=12, bend_from=10, seed=3):
    """Power-law runs with 0.3% noise; runs from index ``bend_from`` on are 4% higher (a
    late bend that earlier data cannot see)."""
    rng = np.random.default_rng(seed)
    c = 1e17 * 10 ** (0.5 * np.arange(nb))
    y = (1.8 + 2.0 * (c / 1e17) ** -0.3) * np.exp(rng.normal(0, 0.003, nb))
    y[bend_from:] *= 1.04
    return c, y


def test_calibration_backtest_uses_only_what_each_fold_saw(monkeypatch):
    import delphi.calibration as cal
    c, y = _bent_ladder()
    seen = []
    real = cal.CalibrationModel.fit.__func__

    def spy(cls, errors):
        seen.append((np.asarray(errors.cut).copy(), np.asarray(errors.flops).copy()))
        return real(cls, errors)

    monkeypatch.setattr(cal.CalibrationModel, "fit", classmethod(spy))
    full = cal.calibration_backtest(_ladder(c, y), "power")
    # The same ladder without the bent runs: the folds both share must get the same
    # calibrated intervals -- and would not if a fold's model read the 4% misses of runs
    # above its own cut.
    short = cal.calibration_backtest(_ladder(c[:10], y[:10]), "power")
    cuts = [f["cut"] for f in full.errors.folds]
    calibrated = [k for i, k in enumerate(cuts) if i >= MIN_FOLDS]
    assert sorted(set(full.cut)) == pytest.approx(calibrated)
    # Model inputs of each calibrated fold of the full run: earlier cuts, runs <= its cut.
    for (cut_in, flops_in), c_k in zip(seen[:len(calibrated)], calibrated):
        assert len(np.unique(cut_in)) >= MIN_FOLDS
        assert np.all(cut_in < c_k) and np.all(flops_in <= c_k * (1 + 1e-9))
    both = [(k, r) for k, r in zip(short.cut, short.run)]
    assert both, "no fold in common"
    full_w = {(k, r): w for k, r, w in zip(full.cut, full.run, full.width_after)}
    for (k, r), w in zip(both, short.width_after):
        assert full_w[(k, r)] == pytest.approx(w, rel=1e-9)
    # ...while the bent runs' own errors are large: a model using them would be wider.
    assert np.abs(full.errors.log_error[full.errors.flops >= c[10]]).max() > 0.02


def _backtest_point_by_point(ladder, law, errors, level=0.9):
    """The nested backtest's intervals computed one point at a time (the code before the
    fold's points were evaluated at once): the reference the fast path must equal."""
    import delphi.calibration as cal
    from delphi.errors import DelphiError
    from delphi.inputs.law_inputs import rows_inputs
    from delphi.uncertainty import delta_interval
    law = delphi.laws.get_law(law)
    out = {k: [] for k in ("run", "inside_before", "inside_after", "width_before",
                           "width_after")}
    notes = []
    finals = ladder.final_points()[0].drop_duplicates("run", keep="last").set_index("run")
    for fold, result in zip(errors.folds, errors.fits):
        c_k = fold["cut"]
        seen = (errors.cut < c_k) & (errors.flops <= c_k * (1 + 1e-9))
        mine = np.flatnonzero(errors.cut == c_k)
        if len(np.unique(errors.cut[seen])) < MIN_FOLDS:
            continue
        model = CalibrationModel.from_errors(errors.ratio[seen], errors.log_error[seen],
                                             runs=errors.run[seen],
                                             n_folds=len(np.unique(errors.cut[seen])))
        x = rows_inputs(law, ladder, finals.loc[[str(r) for r in errors.run[mine]]]
                        .reset_index())
        for j, i in enumerate(mine):
            try:
                base = delta_interval(result, {k: v[j:j + 1] for k, v in x.items()},
                                      level=level)
            except DelphiError as exc:
                notes.append(f"fold {c_k:.3g}: run {errors.run[i]!r} has no delta interval "
                             f"({exc})")
                continue
            pred, act = float(errors.predicted[i]), float(errors.actual[i])
            c = cal.calibrated_interval(base, pred, model, float(errors.ratio[i]))
            out["run"].append(str(errors.run[i]))
            out["inside_before"].append(bool(base.lower <= act <= base.upper))
            out["inside_after"].append(bool(c.lower <= act <= c.upper))
            out["width_before"].append(math.log(base.upper / pred))
            out["width_after"].append(math.log(c.upper / pred))
    return out, notes


def test_the_backtests_intervals_at_once_are_each_points_own_bit_for_bit(monkeypatch):
    import delphi.calibration as cal
    import delphi.uncertainty as unc
    # Noise that shrinks with compute: the later folds' run noise trends with C (the noise's
    # trend branch, 6 folds), the earlier ones pool it, the first has too few dof for any.
    rng = np.random.default_rng(2)
    c = 1e17 * 10 ** (0.2 * np.arange(24))
    y = (1.8 + 2.0 * (c / 1e17) ** -0.3) * np.exp(rng.normal(0, 0.05 * (c / 1e17) ** -0.4))
    lad = _ladder(c, y)
    errors = leave_future_out(lad, "power")
    assert sum(unc._noise_basis(f)["trend"] is not None for f in errors.fits[1:]) == 6
    bt = cal.calibration_backtest(lad, "power", errors=errors)
    ref, ref_notes = _backtest_point_by_point(lad, "power", errors)
    assert len(ref["run"]) > 100
    for k, v in ref.items():
        assert np.array_equal(np.asarray(v), getattr(bt, k)), k
    assert [n for n in bt.notes if n.startswith("fold")] == ref_notes
    # Where a fold or a point must be computed alone (its own error for its note), the
    # result is the same: one fold without the fast path, one point of another flagged.
    real, calls = unc.delta_rows, []

    def partial(fit, x, level):
        calls.append(1)
        if len(calls) == 1:
            return None
        rows = real(fit, x, level=level)
        rows["ok"][0] = False
        return rows

    monkeypatch.setattr(cal, "delta_rows", partial)
    bt2 = cal.calibration_backtest(lad, "power", errors=errors)
    assert len(calls) > 1
    for k, v in ref.items():
        assert np.array_equal(np.asarray(v), getattr(bt2, k)), k


def test_fold_intervals_calibrate_each_point_as_calibrated_interval_does(monkeypatch):
    # 2,000 points of made-up delta intervals: the arrays' calibrated ends equal
    # calibrated_interval's at each point, bit for bit. (The scalar power of (f sigma)^2,
    # which rounds apart from an array's square at ~1 point in 1,000, moved 3 ends of the
    # bundled ladders' backtests by an ulp; it seldom reaches an end, and is checked there.)
    import delphi.calibration as cal
    from delphi.uncertainty import Interval
    rng = np.random.default_rng(0)
    m = 2000
    centre = rng.normal(0.8, 0.2, m)
    # small parameter and run sds, so the calibrated spread's rounding reaches the ends
    half_mean = np.abs(rng.normal(0, 2e-4, m))
    noise = np.abs(rng.normal(1e-4, 5e-5, m)) + 1e-4
    q = 1.6448536269514722
    rows = {"centre": centre, "mean_lower": np.exp(centre - half_mean),
            "mean_upper": np.exp(centre + half_mean),
            "lower": np.exp(centre - q * np.hypot(half_mean / q, noise)),
            "upper": np.exp(centre + q * np.hypot(half_mean / q, noise)),
            "noise": noise, "ok": np.ones(m, dtype=bool)}
    monkeypatch.setattr(cal, "delta_rows", lambda fit, x, level: dict(rows))
    model = CalibrationModel(sigma_0=0.004, k=0.013, n_folds=5, n_errors=50, max_ratio=30.0)
    pred, ratio = np.exp(centre), 10 ** rng.uniform(0, 2.5, m)
    got = cal._fold_intervals(None, {}, model, pred, ratio, 0.9)
    for i in range(m):
        base = Interval(lower=rows["lower"][i], upper=rows["upper"][i],
                        mean_lower=rows["mean_lower"][i], mean_upper=rows["mean_upper"][i],
                        level=0.9, method="delta", noise=noise[i], noise_source="")
        c = cal.calibrated_interval(base, float(pred[i]), model, float(ratio[i]))
        assert (got["cal_lower"][i], got["cal_upper"][i]) == (c.lower, c.upper), i


def test_lfo_points_found_once_per_command_and_each_caller_gets_its_own_notes(monkeypatch):
    """Inside shared_fits (one CLI command) a forecast's calibration and its reference
    class's rung count share one lfo_points of the ladder and law (issue 27); each caller gets
    its own notes list, and outside the scope every call computes afresh."""
    from delphi.core.shared_fits import shared_fits
    from delphi.forecasting import calibration as cal
    from delphi.laws import get_law

    c = np.geomspace(1e18, 1e21, 8)
    ladder = _ladder(c, 2.0 + 40 * c ** -0.1)
    law = get_law("power")
    calls = []
    real = cal._lfo_points
    monkeypatch.setattr(cal, "_lfo_points", lambda *a: calls.append(1) or real(*a))
    with shared_fits():
        first = cal.lfo_points(ladder, law)
        first[5].append("a caller's note")
        second = cal.lfo_points(ladder, law)
        other = cal.lfo_points(ladder.select(max_flops=c[-2]), law)
    assert len(calls) == 2                      # the same ladder once, the selection apart
    assert "a caller's note" not in second[5]
    for a, b in zip(first[:5], second[:5]):
        if isinstance(a, pd.DataFrame):
            pd.testing.assert_frame_equal(a, b)
        else:
            np.testing.assert_array_equal(np.asarray(list(a) if isinstance(a, dict) else a),
                                          np.asarray(list(b) if isinstance(b, dict) else b))
    assert len(other[1]) < len(first[1])
    cal.lfo_points(ladder, law)
    assert len(calls) == 3                      # no scope: computed again
