"""Intervals: exact on a linear law, Epoch bootstrap standard errors, determinism.

Their coverage over many simulated ladders is measured by benchmarks/bench_coverage.py.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from delphi.cli import main
from delphi.errors import FitError
from delphi.fitting import fit_arrays
from delphi.uncertainty import (BootstrapDraws, bootstrap, bootstrap_interval, delta_interval,
                               run_noise)


def _linear_ladder(seed, n=12, noise=0.005):
    """``n`` runs 1e18..1e21 on L = 150 C^-0.12 with seeded log-normal noise: with the floor
    fixed at E = 0, log L = log A - alpha log C is a straight line in log C, so a least-squares
    fit (Huber delta 10, far above every residual) is ordinary least squares and its exact 90%
    prediction interval is known in closed form."""
    rng = np.random.default_rng([4, seed])
    c = np.logspace(18, 21, n)
    y = 150 * c ** -0.12 * np.exp(rng.normal(0, noise, n))
    f = fit_arrays("power", {"flops": c}, y, labels=[f"r{i}" for i in range(n)],
                   fixed={"E": 0.0}, delta=10.0)
    return c, y, f


def _ols_interval(c, y, target_c):
    """Centre, s and leverage of the OLS prediction at ``target_c`` (log L on log C)."""
    x = np.stack([np.ones(c.size), np.log(c)], axis=1)
    coef, *_ = np.linalg.lstsq(x, np.log(y), rcond=None)
    r = np.log(y) - x @ coef
    s = math.sqrt(r @ r / (c.size - 2))
    x0 = np.array([1.0, math.log(target_c)])
    return float(x0 @ coef), s, float(x0 @ np.linalg.inv(x.T @ x) @ x0)


def test_delta_interval_is_the_exact_prediction_interval_of_a_linear_law():
    """Issue 4: the delta-method 90% new-run interval covers a new run 90% of the time. On a
    law linear in its parameters with normal noise this holds exactly: the interval must be
    the textbook OLS prediction interval, centre +- t(0.95, n - 2) s sqrt(1 + h), whose
    coverage P(|T_{n-2}| <= t) is exactly 90% (computed here from delphi's own half-width).
    A wrong quantile (normal instead of t), a missing parameter or noise term, or the wrong
    dof moves the ends by more than 1e-6. The coverage of the nonlinear case (E fixed at
    1.8), with even and with uneven (heavy-tailed) noise, is measured over 300 simulated
    ladders each by benchmarks/bench_coverage.py (RESULTS.md, "Issue 20")."""
    c, y, f = _linear_ladder(0)
    target = {"flops": np.array([1e23])}
    band = delta_interval(f, target, level=0.9)
    centre, s, h = _ols_interval(c, y, 1e23)
    assert band.noise_source == "fit residuals (10 dof)"
    assert band.noise == pytest.approx(s, rel=1e-6)
    t90 = stats.t.ppf(0.95, c.size - 2)
    assert math.log(band.lower) == pytest.approx(centre - t90 * s * math.sqrt(1 + h), abs=1e-6)
    assert math.log(band.upper) == pytest.approx(centre + t90 * s * math.sqrt(1 + h), abs=1e-6)
    assert math.log(band.mean_upper) == pytest.approx(centre + t90 * s * math.sqrt(h), abs=1e-6)
    q = math.log(band.upper / band.lower) / 2 / (s * math.sqrt(1 + h))
    assert 2 * stats.t.cdf(q, c.size - 2) - 1 == pytest.approx(0.9, abs=1e-5)


def test_bootstrap_interval_matches_the_exact_interval_of_a_linear_law():
    """The run-bootstrap 90% intervals on the linear case, against the exact OLS intervals of
    the same ladders at 1e22 (10x beyond the largest run, where parameter and run noise are of
    similar size). A pairs bootstrap of 12 runs shrinks the parameter spread by about
    sqrt((n - p) / n) = 0.91 and its percentiles are normal, not t (1.645 / 1.812 = 0.91), so
    the expected width ratio is about 0.85-0.9; over 20 seeded ladders it was 0.90 +- 0.06
    (new run) and 0.87 +- 0.14 (expected loss), so the means of 6 ladders must fall in
    [0.80, 1.00] and [0.70, 1.05] (about 3.5 and 3 s.e.). Dropping the run noise (new-run
    ratio ~0.57), the parameter spread (expected-loss ratio ~0), or taking the wrong
    percentiles (80%: x0.78) fails them. The guard is off (check_every=0): its 1e-9 relative
    threshold is at the refinement's own tolerance on a least-squares objective this small
    (it flags differences of 1e-10-1e-9, nothing an interval can see); tests/test_refits.py
    tests the guard. The bootstrap's coverage (80 ladders x 30 draws, the nonlinear case) is
    measured by benchmarks/bench_coverage.py."""
    new, mean = [], []
    t90 = stats.t.ppf(0.95, 10)
    for seed in range(6):
        c, y, f = _linear_ladder(seed)
        centre, s, h = _ols_interval(c, y, 1e22)        # the exact interval, by hand
        band = bootstrap_interval(f, bootstrap(f, n=200, seed=seed, check_every=0),
                                  {"flops": np.array([1e22])}, level=0.9, seed=seed)
        assert band.noise == pytest.approx(s, rel=1e-6) and band.n_draws == 200
        new.append(math.log(band.upper / band.lower) / 2 / (t90 * s * math.sqrt(1 + h)))
        mean.append(math.log(band.mean_upper / band.mean_lower) / 2 / (t90 * s * math.sqrt(h)))
    assert 0.80 <= np.mean(new) <= 1.00, new
    assert 0.70 <= np.mean(mean) <= 1.05, mean


@pytest.fixture(scope="module")
def clean7():
    """A noiseless 7-run ladder on the linear law: run noise at its 1e-4 floor."""
    return _linear_ladder(0, n=7, noise=0.0)[2]


def test_bootstrap_new_run_interval_contains_the_expected_loss_interval(clean7):
    """Run noise only widens an interval, but percentiles of few draws need not know it: 7
    draws 1.7% apart (a clean ladder resampled) with run noise at its 1e-4 floor. At level
    0.68 the expected-loss lower end interpolates 96% of the way from the lowest draw to the
    next, while the new-run one (each draw times 25 noise draws) falls on the second draw's
    own cluster, ~1.2 sigma below it: above the expected-loss end, at both ends, unless the
    nesting is imposed. At level 0.9 the ends were already nested and stay strictly outside."""
    f = clean7
    draws = BootstrapDraws(params=[{**f.params, "A": f.params["A"] * math.exp(d)}
                                   for d in np.linspace(-0.05, 0.05, 7)],
                           n_failed=0, unit="run", seed=0)
    target = {"flops": np.array([1e22])}
    band = bootstrap_interval(f, draws, target, level=0.68, seed=0)
    assert band.noise == pytest.approx(1e-4)
    assert band.lower <= band.mean_lower < band.mean_upper <= band.upper, band
    wide = bootstrap_interval(f, draws, target, level=0.9, seed=0)
    assert wide.lower < wide.mean_lower < wide.mean_upper < wide.upper, wide


@pytest.mark.parametrize("level, shown", [(90, "0.90"), (95.0, "0.95"), (99.5, "0.995")])
def test_a_level_given_as_a_percent_is_refused_with_the_fraction(clean7, monkeypatch,
                                                                  level, shown):
    """level=90 meant 0.9: the error says so, from the interval functions and from predict,
    whose check comes before the fit (it used to come after it, from inside the interval)."""
    import delphi
    import delphi.forecasting.forecast as fc
    hint = f"level is a fraction in (0, 1): did you mean {shown}?"
    target = {"flops": np.array([1e22])}
    with pytest.raises(FitError, match=re.escape(hint)):
        delta_interval(clean7, target, level=level)
    draws = BootstrapDraws(params=[dict(clean7.params)], n_failed=0, unit="run", seed=0)
    with pytest.raises(FitError, match=re.escape(hint)):
        bootstrap_interval(clean7, draws, target, level=level)

    def no_fit(*a, **k):
        raise AssertionError("fitted before checking the level")
    monkeypatch.setattr(fc, "fit_stage", no_fit)
    c = np.logspace(18, 20, 6)
    ladder = pd.DataFrame({"run": [f"r{i}" for i in range(6)], "flops": c,
                           "loss": 1.8 + 150 * c ** -0.12})
    with pytest.raises(FitError, match=re.escape(hint)):
        delphi.predict(ladder, {"flops": 1e22}, "power", interval="delta", level=level)


@pytest.mark.parametrize("level", [1.5, 100, 0, -0.9, True, "0.9"])
def test_a_level_out_of_range_but_not_a_percent_gets_the_range(clean7, level):
    with pytest.raises(FitError, match=re.escape(f"interval level must be in (0, 1), "
                                                 f"got {level!r}")):
        delta_interval(clean7, {"flops": np.array([1e22])}, level=level)


def test_epoch_bootstrap_standard_errors(data_dir):
    # Besiroglu et al. 2024 (arXiv 2404.10102), Table 2: bootstrap s.e. of alpha 0.015,
    # beta 0.021, E 0.026 for their refit of Chinchilla's Approach 3. Issue 4 asks for ours
    # within 25%; with 200 draws the s.e. of an s.e. is about 5%.
    e = pd.read_csv(data_dir / "epoch_chinchilla" / "svg_extracted_data.csv")
    e = e.sort_values("loss", kind="mergesort").iloc[:-5]
    n = e["Model Size"].to_numpy(float)
    d = e["Training FLOP"].to_numpy(float) / (6 * n)
    f = fit_arrays("chinchilla", {"params": n, "tokens": d}, e["loss"].to_numpy(float),
                   labels=[str(i) for i in range(len(n))])
    se = bootstrap(f, n=200, seed=0).stderr()
    assert se["alpha"] == pytest.approx(0.015, rel=0.25)
    assert se["beta"] == pytest.approx(0.021, rel=0.25)
    assert se["E"] == pytest.approx(0.026, rel=0.25)


def test_bootstrap_is_bit_reproducible_across_workers():
    rng = np.random.default_rng(0)
    c = np.logspace(18, 21, 15)
    y = (1.8 + 150 * c ** -0.12) * np.exp(rng.normal(0, 0.004, c.size))
    f = fit_arrays("power", {"flops": c}, y, labels=[f"r{i}" for i in range(15)])
    a = bootstrap(f, n=12, seed=5, workers=1)
    b = bootstrap(f, n=12, seed=5, workers=2)
    assert a.params == b.params
    assert bootstrap(f, n=12, seed=6, workers=1).params != a.params


def test_noise_from_repeated_runs():
    c = np.repeat(np.logspace(18, 21, 6), 3)
    rng = np.random.default_rng(1)
    y = (1.8 + 150 * c ** -0.12) * np.exp(rng.normal(0, 0.01, c.size))
    f = fit_arrays("power", {"flops": c}, y)
    sigma, source = run_noise(f)
    assert source.startswith("repeated runs (12 dof)")
    assert sigma == pytest.approx(0.01, rel=0.5)


def test_predict_json_has_intervals(capsys):
    code = main(["predict", "marin-delphi-dense", "--target-flops", "1e23", "--json",
                 "--interval", "delta"])
    d = json.loads(capsys.readouterr().out)
    p = d["prediction"]
    assert code == 0 and p["kind"] == "new-run" and p["method"] == "delta" and p["level"] == 0.9
    assert p["lower"] < p["mean_lower"] <= p["loss"] <= p["mean_upper"] < p["upper"]


def test_zero_dof_gives_no_interval_and_says_why(tmp_path, capsys):
    c = np.logspace(18, 20, 3)
    pd.DataFrame({"run": list("abc"), "flops": c, "loss": 1.8 + 150 * c ** -0.12}).to_csv(
        tmp_path / "three.csv", index=False)
    # named, a method that cannot be made is an error saying why (issue 23: one rule)
    code = main(["predict", str(tmp_path / "three.csv"), "--target-flops", "1e22",
                 "--interval", "delta", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 1 and d["error"]["type"] == "FitError"
    assert d["error"]["message"].startswith("no delta interval: the fit has no covariance (no "
                                            "residual degrees of freedom")
    assert "--interval auto" in d["error"]["message"]
    # by default the reference class gives one, and says the fit has none of its own
    code = main(["predict", str(tmp_path / "three.csv"), "--target-flops", "1e22", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["prediction"]["method"] == "reference"
    assert any(n.startswith("no interval from the fit alone") for n in d["notes"])


def test_per_fit_memo_answers_as_a_fresh_fit_and_goes_with_the_fit():
    """Issue 27: run noise and the floored covariance are computed once per fit and reused
    (compare asks for thousands of targets). A second, equal fit (a new object: no memo)
    must give the same interval bit for bit at each of several targets, whatever order they
    are asked in, and the memo entry must go when its fit is collected (no leak)."""
    import gc
    import weakref
    from delphi.forecasting import uncertainty as unc
    c, y, f = _linear_ladder(3, n=25)
    targets = [{"flops": np.array([t])} for t in (1e19, 1e22, 1e24)]
    first = [delta_interval(f, t, level=0.9) for t in targets]
    g = fit_arrays("power", {"flops": c}, y, labels=[f"r{i}" for i in range(c.size)],
                   fixed={"E": 0.0}, delta=10.0)
    again = [delta_interval(g, t, level=0.9) for t in reversed(targets)][::-1]
    assert [(b.lower, b.upper, b.noise) for b in first] == \
        [(b.lower, b.upper, b.noise) for b in again]
    assert id(f) in unc._MEMO
    ref, key = weakref.ref(f), id(f)
    del f, first
    gc.collect()
    assert ref() is None and key not in unc._MEMO
