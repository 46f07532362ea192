"""The forecast curve's size band (issue 26): the law's leave-one-size-out errors at the
target's tokens per parameter widen the band when the compute-based interval does not see
them (an under-trained target one size above the ladder)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.forecasting.target_curve import (BAND_METHOD, SIZE_BAND_METHOD, SizeFold,
                                             predict_curve, size_band, size_holdout_errors)
from delphi.inputs.schedules import Schedule
from delphi.laws import CHINCHILLA_CKPT
from delphi.registry.tracking import Reviser

TRUE = {"E": 1.8, "A": 400.0, "B": 2000.0, "F": 0.25, "alpha": 0.34, "beta": 0.37, "gamma": 1.5}
SPEC = "cosine:warmup=20,final=0.1"
BATCH = 2.0 ** 20
SIZES = (5e7, 1e8, 2e8, 4e8)
Z90 = 1.6448536269514722


def _ladder(b_growth: float = 0.0, seed: int = 26) -> delphi.Ladder:
    """Runs of chinchilla-ckpt at 4 sizes x 2 lengths, checkpoints every 5%; with
    ``b_growth`` > 0 the data term B grows as (N / 5e7)^b_growth (an under-training penalty
    that grows with N, which chinchilla-ckpt cannot represent)."""
    rng = np.random.default_rng(seed)
    parts = []
    for n in SIZES:
        theta = dict(TRUE, B=TRUE["B"] * (n / SIZES[0]) ** b_growth)
        for steps in (600, 1500):
            sched = Schedule.parse(SPEC, peak_lr=1e-3, total_steps=steps)
            s = np.arange(steps // 20, steps + 1, steps // 20)
            h = sched.lr_at(s) / 1e-3
            loss = CHINCHILLA_CKPT.predict(theta, {"params": np.full(s.size, n),
                                                   "tokens": s * BATCH, "h": h})
            loss = loss * np.exp(rng.normal(0, 0.001, s.size))
            parts.append(pd.DataFrame({"run": f"n{int(n / 1e6)}m-s{steps}", "params": n,
                                       "tokens": s * BATCH, "step": s, "lr": h * 1e-3,
                                       "peak_lr": 1e-3, "total_steps": steps, "loss": loss}))
    return delphi.Ladder(pd.concat(parts, ignore_index=True), name="size-band")


def test_size_band_scales_each_fold_to_the_targets_distance():
    folds = (SizeFold(params=4e8, fitted_params=2e8, tokens_per_param=(10.0, 100.0),
                      errors=(0.02, -0.01)),
             SizeFold(params=2e8, fitted_params=1e8, tokens_per_param=(10.0, 100.0),
                      errors=(0.01, 0.0)))
    # target 4x above the largest size: distance ln 4 = 2 x each fold's ln 2
    lo, hi = size_band(folds, 1.6e9, 1.6e10, 4e8, noise=0.0, level=0.9)
    assert (lo, hi) == pytest.approx((0.02, 0.04))
    # between the folds' D/N: linear in ln(D/N); outside: the nearest run's error
    assert folds[0].error_at(math.sqrt(10 * 100)) == pytest.approx(0.005)
    lo, hi = size_band(folds, 1.6e9, 1.6e9 * 1000, 4e8, noise=0.01, level=0.9)
    assert (lo, hi) == pytest.approx((-0.02 - Z90 * 0.01, 0.0 + Z90 * 0.01))
    # a target not above the ladder, or no folds: no size band
    assert size_band(folds, 4e8, 4e9, 4e8, noise=0.01, level=0.9) is None
    assert size_band((), 1.6e9, 1.6e10, 4e8, noise=0.01, level=0.9) is None


def test_folds_of_an_exact_law_ladder_are_small_and_need_three_sizes_below():
    folds = size_holdout_errors(_ladder())
    # 4 sizes: only the largest has 3 sizes below it
    assert [(f.params, f.fitted_params) for f in folds] == [(4e8, 2e8)]
    assert folds[0].tokens_per_param == pytest.approx((600 * BATCH / 4e8, 1500 * BATCH / 4e8))
    assert max(abs(e) for e in folds[0].errors) < 0.005
    assert size_holdout_errors(_ladder(), min_sizes=4) == ()


def test_folds_see_an_under_training_penalty_that_grows_with_size():
    folds = size_holdout_errors(_ladder(b_growth=0.15))
    (f,) = folds
    # the law fitted below 400M underestimates the data term there, most where D/N is low
    assert f.errors[0] > 0.005 and f.errors[0] > f.errors[1]


def test_predict_curve_widens_the_band_by_given_folds_and_the_tracker_uses_it(tmp_path):
    lad = _ladder()
    target = {"params": 1.6e9, "steps": 4000, "batch_size": BATCH, "schedule": SPEC}
    fold = SizeFold(params=4e8, fitted_params=2e8, tokens_per_param=(1.0, 10.0),
                    errors=(0.05, 0.05))
    kw = dict(interval="delta", off_trend=False, identify=False, points=20, completion=False)
    cf = predict_curve(lad, target, size_errors=(fold,), **kw)
    cf0 = predict_curve(lad, target, size_errors=False, **kw)
    assert cf.loss == cf0.loss and cf.interval == cf0.interval
    end = cf.points[-1]
    # the size band: 5% x (ln 4 / ln 2) + z x run noise above the forecast
    assert end.upper == pytest.approx(cf.loss * math.exp(0.1 + Z90 * cf.interval.noise))
    assert end.lower == pytest.approx(cf.lower)          # the interval's side is wider there
    assert (cf0.points[-1].lower, cf0.points[-1].upper) == (cf0.lower, cf0.upper)
    # the same relative widths along the curve
    for p in cf.points:
        assert p.upper / p.loss == pytest.approx(end.upper / end.loss)
    assert cf.band_method == SIZE_BAND_METHOD and cf0.band_method == BAND_METHOD
    assert any("size band" in f.message for f in cf.curve_findings)
    reg = delphi.Registry(tmp_path / "p.jsonl")
    reg.register(cf, id="hero")
    reg.register(cf0, id="plain")
    e, e0 = reg.get("hero"), reg.get("plain")
    assert e.forecast.band.method == SIZE_BAND_METHOD
    # the tracker's ladder uncertainty is the band at fraction 1 (wider than the interval)
    z = Z90
    assert Reviser(e).sd_ladder == pytest.approx(math.log(end.upper / end.lower) / (2 * z),
                                                 rel=1e-6)
    assert Reviser(e0).sd_ladder == pytest.approx(
        math.log(cf0.upper / cf0.lower) / (2 * z), rel=1e-6)
