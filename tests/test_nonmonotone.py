"""Issue 21, item 4: non-monotone rungs on small ladders are named as off-trend.

A larger model (or budget) whose final loss is above a smaller one's, all else equal,
contradicts every final-loss law delphi fits, however few rungs the ladder has; the
deleted-residual test needs n_free + 3 rungs and its 6-sigma bar rests on 1-3 degrees of
freedom there, so it names none of the rungs below. Each ladder is built from a known law
(the truth), with one rung moved; the forecast without the named rung is checked against the
truth, and the rung stays in the fit.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from delphi.cli import main
from delphi.fitting import fit
from delphi.forecast import predict
from delphi.ladder import Ladder
from delphi.robustness import (NONMONOTONE_MIN, OFF_TREND_MIN, find_off_trend, held_inputs,
                               non_monotone_pairs)

from bundled import expect_warnings, load
from delphi.errors import FitWarning


def _ladder(df: pd.DataFrame, name: str = "test") -> Ladder:
    return Ladder(df, source="<test>", name=name)


def _predict(ladder, target, law=None, **kwargs):
    """``predict`` without an interval, expecting the FitWarning a free floor gets on a
    ladder this small (E is not identified) and allowing its companions."""
    with expect_warnings(FitWarning, "not identified by the ladder",
                         may=("poorly determined", "correlated")):
        return predict(ladder, target, law, interval=None, **kwargs)


# A compute-optimal ladder: 20 tokens per parameter, C = 6ND, one run per budget, and a power
# law in C as the truth (E = 1.8, A = 300, alpha = 0.13; losses 3.17 .. 2.55, 5-6% apart).
C5 = np.array([1e18, 3e18, 1e19, 3e19, 1e20])


def _truth_c(c):
    return 1.8 + 300 * np.asarray(c, float) ** -0.13


def _compute_optimal(loss) -> Ladder:
    n = np.sqrt(C5 / 120)
    return _ladder(pd.DataFrame({"run": [f"r{i}" for i in range(5)], "flops": C5,
                                 "params": n, "tokens": 20 * n, "loss": loss}), "co5")


def _raised(i_up: int, above: int, by: float = 0.01, noise: float = 0.0,
            seed: int = 0) -> np.ndarray:
    """The truth (with seeded log-normal noise of sd ``noise`` on the other rungs) with rung
    ``i_up`` put ``by`` above rung ``above``."""
    loss = _truth_c(C5) * np.exp(np.random.default_rng(seed).normal(0, noise, len(C5)))
    loss[i_up] = loss[above] * (1 + by)
    return loss


def test_compute_optimal_ladder_names_the_raised_rung_with_the_forecast_without_it():
    loss = _raised(3, 2, by=0.01, noise=0.002, seed=4)
    fc = _predict(_compute_optimal(loss), {"flops": 1e21}, "power")
    ot = fc.off_trend
    assert ot is not None and [r.run for r in ot.rungs] == ["r3"]
    rung = ot.rungs[0]
    # only the pair test can name it: 5 rungs < n_free + 3 = 6 for the deleted residuals
    assert rung.flagged_by == ("non-monotone",)
    pair = rung.non_monotone
    assert (pair.larger, pair.smaller, pair.input) == ("r3", "r2", "flops")
    assert pair.gap == pytest.approx(np.log(1.01), rel=1e-6) and pair.same == ()
    assert rung.reason.startswith(f"non-monotone: loss {loss[3]:.4g} at C = 3e+19 above "
                                  f"{loss[2]:.4g} of smaller run r2 (C = 1e+19)")
    # kept in the fit: the forecast is the all-rung one
    assert "r3" in fc.fit.labels and fc.fit.n_points == 5 and ot.loss_with == fc.loss
    # the forecast without it, at the target and the next budget, is closer to the truth
    for target in (1e21, 1e22):
        at = find_off_trend(fc.fit, {"flops": [target]})
        assert at.loss_with == pytest.approx(float(fc.fit.predict({"flops": [target]})[0]))
        assert abs(np.log(at.loss_without / _truth_c(target))) < abs(
            np.log(at.loss_with / _truth_c(target)))
    keep = np.arange(5) != 3
    others = fit(_ladder(pd.DataFrame({"run": [f"r{i}" for i in range(5) if i != 3],
                                       "flops": C5[keep], "loss": loss[keep]})), "power",
                 identify=False)
    assert ot.loss_without == pytest.approx(float(others.predict({"flops": [1e21]})[0]),
                                            rel=1e-6)
    assert rung.loss_without == ot.loss_without     # one rung: alone is all
    note = [n for n in fc.notes if n.startswith("off-trend rung")]
    assert len(note) == 1 and "r3: non-monotone: loss" in note[0]
    assert "kept in the fit, not excluded" in note[0] and "without it" in note[0]


def test_the_off_rung_of_a_pair_is_the_one_the_others_miss_most():
    # Rung r2 lowered below r3 (a lucky or better-tuned run): the pair is (r3 above r2), and
    # the law of the other rungs misses r2, not r3: r2 is named, "below" its larger run.
    loss = _truth_c(C5)
    loss[2] = loss[3] / 1.01
    ot = _predict(_compute_optimal(loss), {"flops": 1e21}, "power").off_trend
    assert [r.run for r in ot.rungs] == ["r2"]
    rung = ot.rungs[0]
    assert rung.non_monotone.larger == "r3" and rung.non_monotone.smaller == "r2"
    assert rung.reason.startswith(f"non-monotone: loss {loss[2]:.4g} at C = 1e+19 below "
                                  f"{loss[3]:.4g} of larger run r3 (C = 3e+19)")
    assert "misses this one more" in rung.reason
    assert rung.trend == pytest.approx(_truth_c(1e19), rel=1e-5)   # the others are exact
    assert ot.loss_without == pytest.approx(_truth_c(1e21), rel=1e-5)


def test_a_rung_in_more_pairs_is_named_before_its_partners():
    # Eight rungs 2% apart in loss; r3 put 0.6% above r1: it is above r1 and r2 (two
    # pairs), each of them in one; removing r3 alone leaves the rest monotone.
    c = np.logspace(18, 20, 8)
    loss = _truth_c(c)
    loss[3] = loss[1] * 1.006
    ladder = _ladder(pd.DataFrame({"run": [f"r{i}" for i in range(8)], "flops": c,
                                   "loss": loss}))
    pairs = non_monotone_pairs(fit(ladder, "power", identify=False))
    assert [(p.larger, p.smaller) for p in pairs] == [("r3", "r2"), ("r3", "r1")]
    assert pairs[0].gap > pairs[1].gap > NONMONOTONE_MIN
    ot = _predict(ladder, {"flops": 1e21}, "power").off_trend
    assert [r.run for r in ot.rungs] == ["r3"]
    assert ot.rungs[0].non_monotone.smaller == "r2"     # its most reversed pair
    assert ot.n_pairs == 2 and ot.n_unresolved == 0


@pytest.mark.parametrize("by", [0.003, -0.01])
def test_a_reversal_within_the_noise_floor_or_none_is_not_named(by):
    # 0.3% above the smaller rung is within run-to-run noise (NONMONOTONE_MIN = 0.5%);
    # -1% is 1% below it: monotone, though far off the law. Neither is named.
    assert NONMONOTONE_MIN == OFF_TREND_MIN == 0.005
    loss = _raised(3, 2, by=by)
    fc = _predict(_compute_optimal(loss), {"flops": 1e21}, "power")
    assert fc.off_trend is None
    assert not any("off-trend" in n or "non-monotone" in n for n in fc.notes)


def test_monotone_noisy_ladders_name_nothing():
    # Seven compute-optimal rungs with 0.5% seeded noise, over ten seeds: losses 3-6% apart
    # do not reverse by 0.5% (that takes a 3.5-sigma draw of the difference of two runs).
    c = np.logspace(18, 21, 7)
    for seed in range(10):
        loss = _truth_c(c) * np.exp(np.random.default_rng(seed).normal(0, 0.005, len(c)))
        result = fit(_ladder(pd.DataFrame({"run": [f"r{i}" for i in range(7)], "flops": c,
                                           "loss": loss})), "power", identify=False)
        assert non_monotone_pairs(result) == (), seed


def test_four_rungs_with_a_pinned_floor():
    # Marin-MoE-like: four rungs, E fixed (2 free parameters); the top rung ends above the
    # one below it. Fitting without it leaves three rungs for two parameters.
    c = np.array([1e19, 4e19, 1.6e20, 6.4e20])
    loss = 1.5 + 40 * c ** -0.07
    loss[3] = loss[2] * 1.008
    ladder = _ladder(pd.DataFrame({"run": ["d768", "d1024", "d1536", "d2048"], "flops": c,
                                   "loss": loss}))
    fc = predict(ladder, {"flops": 2.6e21}, "power", fixed={"E": 1.5}, interval=None)
    ot = fc.off_trend
    assert [r.run for r in ot.rungs] == ["d2048"] and ot.rungs[0].flagged_by == ("non-monotone",)
    assert ot.loss_without == pytest.approx(1.5 + 40 * 2.6e21 ** -0.07, rel=1e-6)
    assert fc.fit.n_points == 4


# ----------------------------------------------------------------------------- laws of N (and D)
def _fixed_d_sweep(raise_at: int | None, by: float = 0.006) -> tuple[Ladder, callable]:
    """Six sizes (100M..3.2B, doubling) all trained on D = 2e10 tokens, from L(N) = 2 +
    60 N^-0.25 (losses 2.60..2.25, 2-4% apart) with 0.2% seeded noise; rung ``raise_at`` put
    ``by`` above its smaller neighbour."""
    n = 1e8 * 2.0 ** np.arange(6)

    def truth(x):
        return 2.0 + 60 * np.asarray(x, float) ** -0.25

    loss = truth(n) * np.exp(np.random.default_rng(3).normal(0, 0.002, len(n)))
    if raise_at is not None:
        loss[raise_at] = loss[raise_at - 1] * (1 + by)
    df = pd.DataFrame({"run": [f"n{i}" for i in range(6)], "params": n, "tokens": 2e10,
                       "loss": loss})
    return _ladder(df, "fixed-d"), truth


def test_fixed_d_sweep_names_a_larger_model_with_a_higher_loss():
    ladder, truth = _fixed_d_sweep(4)
    t = ladder.table
    for target in (6.4e9, 1.28e10):          # the next two sizes
        with expect_warnings(FitWarning, "not identified by the ladder"):
            fc = predict(ladder, {"params": target}, interval=None)   # default: power-n
        assert fc.fit.law.name == "power-n"
        ot = fc.off_trend
        assert ot is not None and [r.run for r in ot.rungs] == ["n4"]
        # six rungs: the deleted-residual test ran, and did not reach 6 sigmas
        assert fc.fit.n_points == fc.fit.n_free + 3 and ot.rungs[0].flagged_by == (
            "non-monotone",)
        pair = ot.rungs[0].non_monotone
        assert (pair.larger, pair.smaller, pair.input) == ("n4", "n3", "params")
        assert pair.same == (("tokens", 2e10),)
        assert "at the same D = 2e+10" in ot.rungs[0].reason
        assert abs(ot.loss_without / truth(target) - 1) < abs(fc.loss / truth(target) - 1)
    assert float(t["loss"].iloc[4]) > float(t["loss"].iloc[3])


def test_power_n_compares_sizes_only_at_one_d():
    # A law in N fitted to runs of several D: a larger model on 2x fewer tokens may rightly
    # be worse, so no pair; at the same D it is one.
    n = np.array([1e8, 2e8, 4e8, 8e8, 1.6e9, 3.2e9])
    d = np.array([8e9, 8e9, 8e9, 4e9, 8e9, 8e9])
    loss = 2.0 + 60 * n ** -0.25 + 410.7 * d ** -0.28
    df = pd.DataFrame({"run": [f"n{i}" for i in range(6)], "params": n, "tokens": d,
                       "loss": loss})
    ladder = _ladder(df)
    result = fit(ladder, "power-n", identify=False)
    assert float(loss[3]) > float(loss[2])
    assert non_monotone_pairs(result) != ()        # N alone: n3 is above n2
    held = held_inputs(ladder, result)
    assert list(held) == ["tokens"]
    assert non_monotone_pairs(result, held) == ()  # at one D they are in order


def _grid(bump: dict[tuple[int, int], float] | None = None, lrs=(None,)) -> pd.DataFrame:
    """A 3 x 3 chinchilla grid: N in {1e8, 2e8, 4e8}, D in {2e9, 4e9, 8e9}, from Hoffmann et
    al.'s Approach 3 fit (E = 1.69, A = 406.4, B = 410.7, alpha = 0.34, beta = 0.28);
    ``bump[(i, j)]`` multiplies the loss of size i at length j."""
    rows = []
    for i, n in enumerate((1e8, 2e8, 4e8)):
        for j, d in enumerate((2e9, 4e9, 8e9)):
            for lr in lrs:
                loss = 1.69 + 406.4 * n ** -0.34 + 410.7 * d ** -0.28
                loss *= (bump or {}).get((i, j), 1.0)
                row = {"run": f"N{i}-D{j}", "params": n, "tokens": d, "loss": loss}
                if lr is not None:
                    row.update(run=f"N{i}-D{j}-lr{lr:g}", peak_lr=lr,
                               loss=loss * (1 + 0.05 * abs(np.log2(lr / 1e-3))))
                rows.append(row)
    return pd.DataFrame(rows)


def _chinchilla(n, d):
    return 1.69 + 406.4 * n ** -0.34 + 410.7 * d ** -0.28


def test_chinchilla_grid_names_the_rung_above_a_smaller_model_at_the_same_d():
    df = _grid()
    up = float(df.loc[df["run"] == "N1-D1", "loss"].iloc[0]) * 1.006
    df.loc[df["run"] == "N2-D1", "loss"] = up   # 400M at 4e9 tokens above 200M at 4e9
    result = fit(_ladder(df), "chinchilla", identify=False)
    ot = find_off_trend(result, {"params": [1.6e9], "tokens": [3.2e10]})
    assert [r.run for r in ot.rungs] == ["N2-D1"]
    pair = ot.rungs[0].non_monotone
    assert (pair.larger, pair.smaller, pair.input) == ("N2-D1", "N1-D1", "params")
    assert pair.same == (("tokens", 4e9),)
    assert "non-monotone" in ot.rungs[0].flagged_by
    assert ot.loss_without == pytest.approx(_chinchilla(1.6e9, 3.2e10), rel=1e-4)
    assert abs(ot.loss_without / _chinchilla(1.6e9, 3.2e10) - 1) < abs(
        ot.loss_with / _chinchilla(1.6e9, 3.2e10) - 1)


def test_chinchilla_grid_names_a_longer_run_with_a_higher_loss():
    df = _grid()
    up = float(df.loc[df["run"] == "N0-D1", "loss"].iloc[0]) * 1.01
    df.loc[df["run"] == "N0-D2", "loss"] = up   # 100M: 8e9 tokens above 4e9 tokens
    result = fit(_ladder(df), "chinchilla", identify=False)
    pairs = non_monotone_pairs(result)
    assert [(p.larger, p.smaller, p.input, p.same) for p in pairs] == [
        ("N0-D2", "N0-D1", "tokens", (("params", 1e8),))]
    ot = find_off_trend(result, {"params": [1.6e9], "tokens": [3.2e10]})
    assert [r.run for r in ot.rungs] == ["N0-D2"]
    assert "at D = 8e+09 above" in ot.rungs[0].reason


def test_a_swept_learning_rate_is_held_equal():
    # Three LRs at every (N, D): a mis-tuned larger model is above a well-tuned smaller one,
    # which says nothing about N. held_inputs holds peak_lr (it differs within one N and D),
    # so only same-LR runs are compared: none is out of order.
    df = _grid(lrs=(5e-4, 1e-3, 2e-3))
    ladder = _ladder(df)
    result = fit(ladder, "chinchilla", identify=False)
    assert non_monotone_pairs(result) != ()         # across LRs there are reversed pairs
    held = held_inputs(ladder, result)
    assert list(held) == ["peak_lr"]
    assert non_monotone_pairs(result, held) == ()
    # an LR that only changes with size (each size its own tuned LR) is the design: not held
    tuned = _grid().assign(peak_lr=lambda t: 1e-3 * (1e8 / t["params"]) ** 0.5)
    tuned_fit = fit(_ladder(tuned), "chinchilla", identify=False)
    assert held_inputs(_ladder(tuned), tuned_fit) is None


def test_at_most_three_rungs_and_the_rest_counted():
    # Every other rung of an 8-rung exact law raised above its smaller neighbour: four pairs.
    c = np.logspace(18, 21.5, 8)
    loss = _truth_c(c)
    for i in (1, 3, 5, 7):
        loss[i] = loss[i - 1] * 1.006
    result = fit(_ladder(pd.DataFrame({"run": [f"r{i}" for i in range(8)], "flops": c,
                                       "loss": loss})), "power", identify=False)
    ot = find_off_trend(result, {"flops": [1e22]})
    assert len(ot.rungs) == 3 and ot.n_pairs >= 4 and ot.n_unresolved >= 1
    assert all("non-monotone" in r.flagged_by for r in ot.rungs)
    assert all(r.loss_without is not None for r in ot.rungs)
    assert "more non-monotone pair(s) among the other rungs" in ot.note()


# ----------------------------------------------------------------------------- real ladders
def test_bundled_monotone_ladders_name_no_non_monotone_rung(data_dir):
    # Marin's dense ladder (7 compute-optimal rungs) and Epoch's Chinchilla grid (240 runs,
    # no two within 1% in D) are in order; Marin's MoE ladder (3 finished rungs) too.
    for name, law, fixed in (("marin-delphi-dense", "power", None),
                             ("epoch-chinchilla", "chinchilla", None),
                             ("marin-moe-535b", "power", {"E": 1.5})):
        ladder = load(name)
        result = fit(ladder, law, fixed=fixed, identify=False)
        assert non_monotone_pairs(result, held_inputs(ladder, result)) == (), name


def test_bundled_dclm_isoflop_names_its_longer_d512_run(data_dir):
    # Marin's DCLM isoFLOP sweep: the d512 model (N = 1.57e8) trained on 2.6e11 tokens
    # (the 6e19 budget) ends 4.5% above the same model on half the tokens: genuinely
    # non-monotone in D. The deleted-residual test names it as well.
    ladder = load("marin-isoflop-dclm")
    result = fit(ladder, "chinchilla", identify=False)
    pairs = non_monotone_pairs(result, held_inputs(ladder, result))
    run = "isoflop-6e+19-d512-L6-B128-dclm-default"
    assert pairs and {p.larger for p in pairs} == {run}
    assert all(p.input == "tokens" and p.gap > NONMONOTONE_MIN for p in pairs)
    ot = find_off_trend(result, {"params": [1e9], "tokens": [2e10]},
                        held=held_inputs(ladder, result))
    named = {r.run: r for r in ot.rungs}
    assert set(named) == {run}
    assert named[run].flagged_by == ("deleted-residual", "non-monotone")
    assert named[run].non_monotone.smaller == "isoflop-3e+19-d512-L6-B128-dclm-default"


# ----------------------------------------------------------------------------- CLI
def test_cli_text_and_json_carry_the_non_monotone_rung(tmp_path, capsys):
    loss = _raised(3, 2, by=0.01)
    path = tmp_path / "co5.csv"
    _compute_optimal(loss).table[["run", "flops", "params", "tokens", "loss"]].to_csv(
        path, index=False)
    assert main(["predict", str(path), "--target-flops", "1e21", "--interval", "none"]) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("off-trend"))
    assert line.startswith("off-trend  r3: non-monotone: loss ") and "smaller run r2" in line
    assert line.endswith("kept in the fit")
    assert "without it" in out
    assert main(["predict", str(path), "--target-flops", "1e21", "--interval", "none",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["off_trend"]
    rung = d["rungs"][0]
    assert rung["run"] == "r3" and rung["flagged_by"] == ["non-monotone"]
    assert rung["reason"].startswith("non-monotone: loss ")
    assert rung["non_monotone"]["smaller"] == "r2" and rung["non_monotone"]["input"] == "flops"
    assert d["excluded"] is False and d["non_monotone_pairs"] == 1
    assert d["loss_without"] == pytest.approx(_truth_c(1e21), rel=1e-5)
    assert rung["loss_without"] == d["loss_without"]
