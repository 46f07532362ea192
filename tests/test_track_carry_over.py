"""Carry-over anchoring (issue 26): the tracker anchors the ladder's final forecast to the run's
deviation so far from its curve, by a carry-over measured on the ladder's own size folds."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.forecasting.target_curve import (CarryOver, SizeFold, carry_over, predict_curve,
                                             run_deviation, size_holdout_errors)
from delphi.inputs.schedules import Schedule
from delphi.laws import CHINCHILLA_CKPT
from delphi.registry.schema import Entry
from delphi.registry.tracking import Reviser, track

TRUE = {"E": 1.8, "A": 400.0, "B": 2000.0, "F": 0.25, "alpha": 0.34, "beta": 0.37, "gamma": 1.5}
SPEC = "cosine:warmup=20,final=0.1"
BATCH = 2.0 ** 20
SIZES = (5e7, 1e8, 2e8, 4e8, 8e8)
#: Each size's curves are off the law by its own factor (a per-size offset the law's power
#: laws cannot absorb); the target's is +3%: all of a run's deviation carries over.
OFFSET = dict(zip(SIZES, (0.0, 0.012, -0.015, 0.02, -0.01)))
TARGET_OFFSET = 0.03
TARGET = {"params": 3.2e9, "steps": 3000, "batch_size": BATCH, "schedule": SPEC}
KW = dict(interval="delta", off_trend=False, identify=False, points=30)


def _curve(n: float, steps: int, every: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sched = Schedule.parse(SPEC, peak_lr=1e-3, total_steps=steps)
    s = np.arange(every, steps + 1, every)
    h = sched.lr_at(s) / 1e-3
    loss = CHINCHILLA_CKPT.predict(TRUE, {"params": np.full(s.size, n),
                                          "tokens": s * BATCH, "h": h})
    return s, h, loss * math.exp(OFFSET.get(n, TARGET_OFFSET))


@pytest.fixture(scope="module")
def ladder():
    rng = np.random.default_rng(26)
    parts = []
    for n in SIZES:
        for steps in (600, 1500):
            s, h, loss = _curve(n, steps, steps // 20)
            loss = loss * np.exp(rng.normal(0, 0.001, s.size))
            parts.append(pd.DataFrame({"run": f"n{int(n / 1e6)}m-s{steps}", "params": n,
                                       "tokens": s * BATCH, "step": s, "lr": h * 1e-3,
                                       "peak_lr": 1e-3, "total_steps": steps, "loss": loss}))
    return delphi.Ladder(pd.concat(parts, ignore_index=True), name="carry-over")


@pytest.fixture(scope="module")
def forecasts(ladder):
    folds = size_holdout_errors(ladder)
    on = predict_curve(ladder, TARGET, size_errors=folds, **KW)
    off = predict_curve(ladder, TARGET, size_errors=folds, carry=False, **KW)
    return folds, on, off


def test_carry_over_is_least_squares_through_the_origin_clipped():
    d = np.array([0.01, -0.02, 0.03, 0.015])
    noise = np.array([0.001, -0.001, 0.0005, 0.0])
    fold = SizeFold(params=4e8, fitted_params=2e8, tokens_per_param=(10.0,), errors=(0.0,),
                    deviations=tuple((0.5, float(a), float(0.6 * a + b))
                                     for a, b in zip(d, noise)))
    (c,) = carry_over((fold,))
    e = 0.6 * d + noise
    rho = float(d @ e / (d @ d))
    assert c.fraction == 0.5 and c.n == 4 and c.rho == pytest.approx(rho)
    assert c.sd == pytest.approx(math.sqrt(np.sum((e - rho * d) ** 2) / 3))
    assert c.rms == pytest.approx(math.sqrt(np.mean(e ** 2)))
    # a deviation that grows into a larger final error is not amplified; an opposite sign is
    # not carried over at all
    up = SizeFold(params=4e8, fitted_params=2e8, tokens_per_param=(10.0,), errors=(0.0,),
                  deviations=tuple((0.5, float(a), float(3 * a)) for a in d))
    flip = SizeFold(params=4e8, fitted_params=2e8, tokens_per_param=(10.0,), errors=(0.0,),
                    deviations=tuple((0.5, float(a), float(-a)) for a in d))
    assert carry_over((up,))[0].rho == 1.0 and carry_over((flip,))[0].rho == 0.0
    # too few runs at a fraction: none there
    assert carry_over((fold,), min_runs=5) == ()
    assert run_deviation([0.3, 0.35, 0.5], [0.1, 0.2, 0.4], 0.5, window=0.2) == \
        pytest.approx(0.3)
    assert run_deviation([0.3], [0.1], 0.5, window=0.1) is None


def test_folds_measure_the_carry_over_of_a_size_offset(forecasts):
    folds, on, off = forecasts
    assert [f.params for f in folds] == [8e8, 4e8]
    assert all(f.deviations for f in folds)
    assert off.carry_over == () and on.carry_over
    for c in on.carry_over:
        assert isinstance(c, CarryOver) and c.n == 4
        # a per-size offset carries over whole: the held-out runs' deviation so far explains
        # nearly all of their final error
        assert 0.9 < c.rho <= 1 and c.sd < 0.2 * c.rms
    assert any("carry-over" in f.message for f in on.curve_findings)


def _run_log(every: int = 60) -> pd.DataFrame:
    s, _, loss = _curve(TARGET["params"], TARGET["steps"], every)
    return pd.DataFrame({"step": s, "loss": loss})


def test_anchored_forecast_moves_towards_the_truth(forecasts, tmp_path):
    _, on, off = forecasts
    log = _run_log()
    truth = float(log["loss"].iloc[-1])
    reg = delphi.Registry(tmp_path / "r.jsonl")
    reg.register(on, id="on")
    # the run is above its forecast: the ladder cannot know the target size's offset
    assert math.log(truth / on.loss) > 0.005
    rev = Reviser(reg.get("on"))
    checked = 0
    for step, loss in zip(log["step"], log["loss"]):
        f = step / TARGET["steps"]
        r = rev.add(int(step), float(loss), revise=f >= rev.start_fraction)
        if r is None or step >= TARGET["steps"]:
            continue
        assert r.anchored is not None
        # anchored between the ladder's forecast and the truth, never past it
        assert abs(math.log(truth / r.anchored)) < abs(math.log(truth / on.loss))
        assert r.anchored > on.loss
        checked += 1
    assert checked > 30
    reg.register(off, id="off")
    res = track(reg, "off", log)
    assert all(c.revised.anchored is None for c in res.checkpoints)


def test_a_record_without_carry_over_tracks_as_before(forecasts, tmp_path):
    _, on, off = forecasts
    reg = delphi.Registry(tmp_path / "r.jsonl")
    reg.register(off, id="off")
    reg.register(on, id="on")
    e_off, e_on = reg.get("off"), reg.get("on")
    # written without the field, so an entry registered before it existed keeps its hash
    line = json.loads(e_off.line)
    assert "carry_over" not in line["forecast"]["band"]
    assert "carry_over" in json.loads(e_on.line)["forecast"]["band"]
    assert Entry.model_validate_json(e_off.line).line == e_off.line
    # the anchored entry with its carry-over removed revises exactly as unanchored tracking,
    # by the precision weighting of the module docstring
    band = e_on.forecast.band.model_copy(update={"carry_over": None})
    stripped = e_on.model_copy(update={"forecast": e_on.forecast.model_copy(
        update={"band": band})})
    a, b, c = Reviser(stripped), Reviser(e_off), Reviser(e_on)
    log = _run_log()
    moved = weighted = 0
    for step, loss in zip(log["step"], log["loss"]):
        revise = step / TARGET["steps"] >= a.start_fraction
        ra, rb = a.add(int(step), float(loss), revise=revise), b.add(int(step), float(loss),
                                                                      revise=revise)
        rc = c.add(int(step), float(loss), revise=revise)
        if ra is None:
            continue
        assert ra.to_dict() == rb.to_dict()
        assert set(ra.to_dict()) == {"loss", "lower", "upper", "run_only", "run_sd",
                                     "ladder_weight"}
        if step < TARGET["steps"]:
            mu, sd = a.mu_ladder, a.sd_ladder
            if ra.run_sd is not None:
                p_l, p_r = 1.0 / sd ** 2, 1.0 / ra.run_sd ** 2
                mu = (p_l * mu + p_r * math.log(ra.run_only)) / (p_l + p_r)
                sd = (p_l + p_r) ** -0.5
            assert ra.loss == math.exp(mu)
            assert ra.upper == math.exp(mu + a.z * sd)
            moved += rc.loss != ra.loss
            weighted += ra.run_sd is not None
    assert moved > 30 and weighted > 20


def test_anchoring_is_deterministic(ladder, forecasts, tmp_path):
    folds, on, _ = forecasts
    again = predict_curve(ladder, TARGET, size_errors=size_holdout_errors(ladder), **KW)
    assert again.carry_over == on.carry_over
    outs = []
    for k in range(2):
        reg = delphi.Registry(tmp_path / f"r{k}.jsonl")
        reg.register(on if k == 0 else again, id="hero")
        res = track(reg, "hero", _run_log())
        outs.append(json.dumps([c.revised.to_dict() for c in res.checkpoints]))
    assert outs[0] == outs[1]


def test_cli_register_no_carry_over_records_none(ladder, tmp_path):
    # (the default, recorded, is predict_curve's: the tests above)
    from delphi.presentation.cli.main import main
    csv = tmp_path / "ladder.csv"
    ladder.table.drop(columns=["row"], errors="ignore").to_csv(csv, index=False)
    reg = tmp_path / "r.jsonl"
    base = ["register", str(csv), "--registry", str(reg), "--target-params",
            str(TARGET["params"]), "--target-steps", str(TARGET["steps"]), "--target-batch",
            str(BATCH), "--target-schedule", SPEC, "--curve", "--interval", "delta"]
    assert main(base + ["--id", "off", "--no-carry-over"]) == 0
    entry = delphi.Registry(reg).get("off")
    assert entry.forecast.band.carry_over is None
    assert entry.forecast.band.completion_error and "carry_over" not in entry.line


# --- the early completion and the correlated (BLUE) weights (issue 26, target 2)

def test_carry_over_correlation_is_uncentred_and_clipped():
    d = np.array([0.01, -0.02, 0.03, 0.015])
    e = 0.5 * d + np.array([0.002, -0.001, 0.001, -0.002])
    res = e - float(d @ e / (d @ d)) * d
    c = np.array([0.004, -0.001, 0.003, -0.003])

    def fold(comps):
        return SizeFold(params=4e8, fitted_params=2e8, tokens_per_param=(10.0,),
                        errors=(0.0,), deviations=tuple((0.5, float(a), float(b))
                                                        for a, b in zip(d, e)),
                        completion_errors=comps)
    (r,) = carry_over((fold(tuple(map(float, c))),), correlated=True)
    assert r.corr == pytest.approx(float(res @ c / math.sqrt((res @ res) * (c @ c))))
    assert 0 < r.corr < 0.95
    # not asked for, a negative correlation, one of 1, too few completions
    assert carry_over((fold(tuple(map(float, c))),))[0].corr is None
    assert carry_over((fold(tuple(map(float, -c))),), correlated=True)[0].corr == 0.0
    assert carry_over((fold(tuple(map(float, 3 * res))),), correlated=True)[0].corr == 0.95
    assert carry_over((fold((0.01, None, None, 0.02)),), correlated=True)[0].corr is None


def test_folds_record_the_run_only_completion_at_each_deviation(forecasts):
    folds, _, _ = forecasts
    for f in folds:
        assert len(f.completion_errors) == len(f.deviations)
        # fitted past the early descent, and closer to the final loss the more it has seen
        at = {}
        for (q, _, _), c in zip(f.deviations, f.completion_errors):
            at.setdefault(q, []).append(c)
        assert all(c is not None and abs(c) < 0.1 for q in at if q >= 0.6 for c in at[q])
        assert np.mean(np.abs(at[0.9])) < np.mean(np.abs(at[0.6])) < np.mean(np.abs(at[0.3]))


def _entry(reg, cf, id, **band):
    reg.register(cf, id=id)
    e = reg.get(id)
    if not band:
        return e
    b = e.forecast.band.model_copy(update=band)
    return e.model_copy(update={"forecast": e.forecast.model_copy(update={"band": b})})


def _without_fold_weights(cf):
    from dataclasses import replace
    return replace(cf, carry_over=tuple(replace(c, weight=None) for c in cf.carry_over),
                   fold_weight_share=None)


def test_correlated_weights_are_the_blue_of_two_correlated_estimates(forecasts, tmp_path):
    from dataclasses import replace
    _, on, _ = forecasts
    on = _without_fold_weights(on)
    reg = delphi.Registry(tmp_path / "r.jsonl")
    corr = 0.6
    cor = replace(on, carry_over=tuple(replace(c, corr=corr) for c in on.carry_over))
    # recorded, and only then: a record without it keeps its line
    e_ind, e_cor = _entry(reg, on, "ind"), _entry(reg, cor, "cor")
    e_var = _entry(reg, replace(cor, correlation_use="variance"), "var")
    assert '"corr"' not in e_ind.line and '"corr":0.6' in e_cor.line
    assert "correlation_use" not in e_cor.line and '"correlation_use":"variance"' in e_var.line
    assert Entry.model_validate_json(e_cor.line).line == e_cor.line
    a, b, v = Reviser(e_ind), Reviser(e_cor), Reviser(e_var)
    checked = 0
    for step, loss in zip(*_run_log().to_numpy().T):
        revise = step / TARGET["steps"] >= a.start_fraction
        ra = a.add(int(step), float(loss), revise=revise)
        rb = b.add(int(step), float(loss), revise=revise)
        rv = v.add(int(step), float(loss), revise=revise)
        if ra is None or ra.run_sd is None or step >= TARGET["steps"]:
            continue
        assert ra.anchored == rb.anchored and ra.run_only == rb.run_only
        # the anchored sd from the independent weights: w = s_R^2 / (s_L^2 + s_R^2)
        s_r = ra.run_sd
        s_l = s_r * math.sqrt((1 - ra.ladder_weight) / ra.ladder_weight)
        cov = corr * s_l * s_r
        w = min(1.0, max(0.0, (s_r ** 2 - cov) / (s_l ** 2 + s_r ** 2 - 2 * cov)))
        sd = math.sqrt(w * w * s_l ** 2 + (1 - w) ** 2 * s_r ** 2 + 2 * w * (1 - w) * cov)
        mu = w * math.log(rb.anchored) + (1 - w) * math.log(rb.run_only)
        assert rb.ladder_weight == pytest.approx(w, abs=1e-9)
        assert rb.loss == pytest.approx(math.exp(mu), rel=1e-12)
        assert math.log(rb.upper / rb.loss) == pytest.approx(a.z * sd, rel=1e-9)
        # positively correlated estimates are worth less together than independent ones
        assert rb.upper / rb.lower >= ra.upper / ra.lower * (1 - 1e-12)
        # "variance": the independent weights and loss, their variance under the correlation
        w = ra.ladder_weight
        sd = math.sqrt(w * w * s_l ** 2 + (1 - w) ** 2 * s_r ** 2 + 2 * w * (1 - w) * cov)
        assert rv.loss == pytest.approx(ra.loss, rel=1e-12)
        assert rv.ladder_weight == pytest.approx(w, rel=1e-9)
        assert math.log(rv.upper / rv.loss) == pytest.approx(a.z * sd, rel=1e-9)
        checked += 1
    assert checked > 20


def test_early_completion_fills_the_start_of_the_curve(ladder, forecasts, tmp_path):
    from delphi.forecasting.target_curve import completion_errors
    _, on, _ = forecasts
    # at 30% (6 checkpoints from warm-up, 2 from 25%) only the completion from warm-up can be
    # fitted on the ladder's runs
    assert completion_errors(ladder, fractions=(0.3,)) == ()
    ((f, err),) = completion_errors(ladder, fractions=(0.3,), start=0.0)
    assert f == 0.3 and 0 < err < 1
    reg = delphi.Registry(tmp_path / "r.jsonl")
    base = _entry(reg, on, "base")
    assert "early_completion_error" not in base.line
    early = _entry(reg, on, "early", early_completion_error=((0.25, 0.02), (0.5, 0.01)))
    a, b = Reviser(base), Reviser(early)
    filled = same = 0
    for step, loss in zip(*_run_log().to_numpy().T):
        revise = step / TARGET["steps"] >= a.start_fraction
        ra = a.add(int(step), float(loss), revise=revise)
        rb = b.add(int(step), float(loss), revise=revise)
        if ra is None or step >= TARGET["steps"]:
            continue
        if ra.run_only is None:
            # the tracker's completion is not fitted yet: the early one is, weighed by its
            # own preregistered error
            assert rb.run_only is not None and rb.ladder_weight < 1
            assert rb.run_sd == pytest.approx(float(np.interp(step / TARGET["steps"],
                                                              [0.25, 0.5], [0.02, 0.01])))
            filled += 1
        else:
            assert rb.to_dict() == ra.to_dict()
            same += 1
    assert filled >= 3 and same > 20


# --- fold weights (issue 26, target 2, 2026-12-03)

def test_fold_weight_is_the_least_squares_weight_of_the_combination_clipped():
    d = np.array([0.01, -0.02, 0.03, 0.015, -0.005])
    e = 0.5 * d + np.array([0.002, -0.001, 0.001, -0.002, 0.003])
    a = e - float(d @ e / (d @ d)) * d
    c = np.array([0.004, -0.001, 0.003, -0.003, -0.002])

    def fold(comps):
        return SizeFold(params=4e8, fitted_params=2e8, tokens_per_param=(10.0,),
                        errors=(0.0,), deviations=tuple((0.5, float(x), float(y))
                                                        for x, y in zip(d, e)),
                        completion_errors=tuple(None if v is None else float(v)
                                                for v in comps))
    (r,) = carry_over((fold(c),), fold_weights=True)
    w = float(c @ (c - a) / ((a - c) @ (a - c)))
    assert 0 < w < 1 and r.weight == pytest.approx(w, rel=1e-12)
    # it minimises the folds' squared combined error
    grid = np.linspace(0, 1, 1001)
    sse = [float(np.sum((g * a + (1 - g) * c) ** 2)) for g in grid]
    assert abs(grid[int(np.argmin(sse))] - r.weight) <= 1e-3
    assert r.corr is None and carry_over((fold(c),))[0].weight is None
    # clipped: a completion that is always worse gets none, one always exact all
    assert carry_over((fold(10 * a),), fold_weights=True)[0].weight == 1.0
    assert carry_over((fold(0 * a),), fold_weights=True)[0].weight == 0.0
    assert carry_over((fold(a),), fold_weights=True)[0].weight == 0.5     # a = c: undecided
    assert carry_over((fold((0.01, None, None, None, 0.02)),),
                      fold_weights=True)[0].weight is None              # too few runs


def test_fold_weights_shrink_towards_the_precision_weight(forecasts, tmp_path):
    from dataclasses import replace
    from delphi.forecasting.target_curve import FOLD_WEIGHT_SHARE
    folds, ind, _ = forecasts
    assert ind.fold_weight_share is None                     # not recorded by default
    assert all(c.weight is None for c in ind.carry_over)
    on = replace(ind, carry_over=carry_over(folds, fold_weights=True),
                 fold_weight_share=FOLD_WEIGHT_SHARE)
    assert [replace(c, weight=None) for c in on.carry_over] == list(ind.carry_over)
    assert sum(c.weight is not None for c in on.carry_over) >= 5
    reg = delphi.Registry(tmp_path / "r.jsonl")
    e_ind, e_on = _entry(reg, ind, "ind"), _entry(reg, on, "on")
    e_zero = _entry(reg, replace(on, fold_weight_share=0.0), "zero")
    e_corr = _entry(reg, replace(on, carry_over=tuple(replace(c, corr=0.5)
                                                       for c in on.carry_over)), "corr")
    # only a record with them carries the fields; both lines read back to themselves
    assert '"weight"' not in e_ind.line and "fold_weight_share" not in e_ind.line
    assert '"weight"' in e_on.line and f'"fold_weight_share":{FOLD_WEIGHT_SHARE}' in e_on.line
    assert Entry.model_validate_json(e_on.line).line == e_on.line
    fw_f = [c.fraction for c in on.carry_over if c.weight is not None]
    fw = [c.weight for c in on.carry_over if c.weight is not None]
    a, b, z, k = Reviser(e_ind), Reviser(e_on), Reviser(e_zero), Reviser(e_corr)
    checked = 0
    for step, loss in zip(*_run_log().to_numpy().T):
        revise = step / TARGET["steps"] >= a.start_fraction
        ra, rb, rz, rk = (r.add(int(step), float(loss), revise=revise) for r in (a, b, z, k))
        if ra is None or ra.run_sd is None or step >= TARGET["steps"]:
            continue
        assert ra.anchored == rb.anchored and ra.run_only == rb.run_only
        s_r = ra.run_sd
        s_l = s_r * math.sqrt((1 - ra.ladder_weight) / ra.ladder_weight)
        prec = s_r ** 2 / (s_l ** 2 + s_r ** 2)
        w = (FOLD_WEIGHT_SHARE * float(np.interp(step / TARGET["steps"], fw_f, fw))
             + (1 - FOLD_WEIGHT_SHARE) * prec)
        mu = w * math.log(rb.anchored) + (1 - w) * math.log(rb.run_only)
        sd = math.sqrt(w * w * s_l ** 2 + (1 - w) ** 2 * s_r ** 2)
        assert rb.ladder_weight == pytest.approx(w, abs=1e-9)
        assert rb.loss == pytest.approx(math.exp(mu), rel=1e-12)
        assert math.log(rb.upper / rb.loss) == pytest.approx(a.z * sd, rel=1e-9)
        # a share of 0 is the precision weighting itself
        assert rz.loss == pytest.approx(ra.loss, rel=1e-12)
        assert rz.upper == pytest.approx(ra.upper, rel=1e-12)
        # with a correlation recorded: the same weight, the variance under it
        sd_k = math.sqrt(sd ** 2 + 2 * w * (1 - w) * 0.5 * s_l * s_r)
        assert rk.loss == rb.loss
        assert math.log(rk.upper / rk.loss) == pytest.approx(a.z * sd_k, rel=1e-9)
        checked += 1
    assert checked > 20


def test_fold_weights_option_and_cli(ladder, tmp_path):
    from delphi.errors import TargetError
    from delphi.forecasting.target_curve import FOLD_WEIGHT_SHARE
    from delphi.presentation.cli.main import main
    with pytest.raises(TargetError, match="fold_weights"):
        predict_curve(ladder, TARGET, fold_weights=2.0, **KW)
    csv = tmp_path / "ladder.csv"
    ladder.table.drop(columns=["row"], errors="ignore").to_csv(csv, index=False)
    reg = tmp_path / "r.jsonl"
    assert main(["register", str(csv), "--registry", str(reg), "--target-params",
                 str(TARGET["params"]), "--target-steps", str(TARGET["steps"]),
                 "--target-batch", str(BATCH), "--target-schedule", SPEC, "--curve",
                 "--interval", "delta", "--id", "fw", "--fold-weights"]) == 0
    band = delphi.Registry(reg).get("fw").forecast.band
    assert band.fold_weight_share == FOLD_WEIGHT_SHARE
    assert [c.weight for c in band.carry_over] == [
        c.weight for c in carry_over(size_holdout_errors(ladder), fold_weights=True)]


def test_fold_weights_and_no_carry_over_only_with_the_curve_alone(ladder, tmp_path, capsys):
    """--fold-weights / --no-carry-over without --curve (or with a FRACTION:LOSS list) were
    accepted and dropped; with each other, no fold weights were recorded."""
    from delphi.errors import TargetError
    from delphi.presentation.cli.main import main
    with pytest.raises(TargetError, match="fold_weights needs carry=True"):
        predict_curve(ladder, TARGET, carry=False, fold_weights=True, **KW)
    csv = tmp_path / "ladder.csv"
    ladder.table.drop(columns=["row"], errors="ignore").to_csv(csv, index=False)
    reg = tmp_path / "r.jsonl"
    target = ["--target-params", str(TARGET["params"]), "--target-steps", str(TARGET["steps"]),
              "--target-batch", str(BATCH), "--target-schedule", SPEC]
    base = ["register", str(csv), "--registry", str(reg), *target, "--interval", "delta"]
    for extra in (["--fold-weights"], ["--no-carry-over"], ["--curve", "0.5:3,1:2.9",
                                                            "--fold-weights"]):
        assert main(base + ["--id", "x", *extra]) == 1
        assert "the forecast curve of --curve alone" in capsys.readouterr().err
    assert main(["predict", str(csv), *target, "--fold-weights", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert "--fold-weights shapes the forecast curve" in doc["error"]["message"]
    assert main(base + ["--id", "x", "--curve", "--no-carry-over", "--fold-weights"]) == 1
    assert "--fold-weights without --no-carry-over" in capsys.readouterr().err
    assert not reg.exists()
