"""Backtests: the Gadre et al. 2024 reproduction and the backtest command's output."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import delphi
from delphi.analyses.backtest import backtest
from delphi.cli import main

from bundled import load

GADRE_TRAIN = ["rpj-d=96_l=8_h=4-1.0", "rpj-d=512_l=8_h=4-1.0", "rpj-d=576_l=24_h=8-1.0",
               "rpj-d=1024_l=24_h=8-1.0", "rpj-d=96_l=8_h=4-16.0"]
GADRE_TEST = ["rpj-open_lm_1b-32.0", "rpj-open_lm_7b-1.0"]


def test_gadre_overtraining_law_predicts_large_runs(data_dir):
    # Gadre et al. 2024 (arXiv 2403.08540), Fig. 1 / Sec. 3: L(C, M) = E + (a M^eta +
    # b M^-eta) C^-eta fitted on 5 small RedPajama runs (the four small archs at M = 20 plus
    # d=96 at M = 320, C4 val loss) predicts the 1.4B M = 640 and the 6.9B M = 20 runs with
    # about 0.7% relative error. Issue 4 asks for both within 0.8%.
    ladder = delphi.load_ladder("gadre2024")
    assert set(GADRE_TRAIN + GADRE_TEST) <= set(ladder.runs)
    fit = delphi.fit(ladder.select(runs=GADRE_TRAIN), "overtrain")
    assert fit.n_points == 5 and fit.converged
    test = ladder.table[ladder.table["run"].isin(GADRE_TEST)]
    pred = fit.predict({"params": test["params"].to_numpy(), "tokens": test["tokens"].to_numpy()})
    rel = (test["loss"].to_numpy() - pred) / pred
    print(f"\nGadre 1.4B M=640 and 6.9B M=20: relative errors {rel[0]:+.2%}, {rel[1]:+.2%}")
    assert abs(rel).max() <= 0.008


def test_backtest_fit_max_flops_json_schema(capsys):
    code = main(["backtest", "marin-delphi-dense", "--law", "power", "--fit-max-flops", "3e19",
                 "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [r["run"] for r in d["rows"]] == ["dense-9e19", "dense-1.8e20", "dense-3e20"]
    for r in d["rows"]:
        assert set(r) >= {"run", "flops", "params", "tokens", "actual", "predicted", "lower",
                          "upper", "rel_error", "inside"}
        assert r["rel_error"] == pytest.approx((r["actual"] - r["predicted"]) / r["predicted"])
        # 4 runs for 3 parameters leave 1 residual dof: too few to estimate the run noise,
        # so no interval rather than a falsely narrow one, and the output says why.
        assert r["lower"] is None and r["inside"] is None
    assert any("no interval" in n for n in d["notes"])
    s = d["summary"]
    assert s["n"] == 3 and s["level"] == 0.9 and s["coverage"] is None
    assert s["max_abs_rel_error"] == pytest.approx(max(abs(r["rel_error"]) for r in d["rows"]))
    # Marin's Delphi dense ladder: a power law fitted up to 3e19 predicts 9e19..3e20 within 1%.
    assert s["max_abs_rel_error"] < 0.01


def test_leave_one_budget_out(data_dir):
    ladder = load("marin-isoflop-dclm")       # with its known FLOP-count warnings
    result = backtest(ladder, "chinchilla", leave_one_budget_out=True)
    folds = {r.fold for r in result.rows}
    assert len(folds) >= 5 and result.summary["n"] == len(ladder.runs)
    assert result.summary["mean_abs_rel_error"] < 0.02
    for r in result.rows:
        assert r.inside == (r.lower <= r.actual <= r.upper)
    print(f"\nleave-one-budget-out on marin-isoflop-dclm: mean |rel. error| "
          f"{result.summary['mean_abs_rel_error']:.2%}, coverage {result.summary['coverage']:.0%}")


def test_backtest_needs_one_design(capsys):
    code = main(["backtest", "marin-delphi-dense"])
    err = capsys.readouterr().err
    assert code == 2 and "choose one backtest design" in err   # usage, as argparse's (issue 23)
    code = main(["backtest", "marin-delphi-dense", "--fit-max-flops", "1e21"])
    assert code == 1 and "nothing to predict" in capsys.readouterr().err


def _isoflop_ladder():
    """Three sizes per budget on a known law of N and D: the middle size is the frontier."""
    import pandas as pd

    rows = []
    for c in (1e18, 3e18, 1e19, 3e19, 1e20, 3e20):
        for k in (0.3, 1.0, 3.0):
            n = k * (c / 120) ** 0.5
            d = c / (6 * n)
            rows.append({"run": f"C{c:.0e}-k{k}", "params": n, "tokens": d, "flops": c,
                         "loss": 1.8 + 482 * n ** -0.35 + 2085 * d ** -0.37})
    return delphi.load_ladder(pd.DataFrame(rows))


def test_a_law_of_compute_scores_only_the_frontier_of_an_isoflop_ladder():
    # The off-size runs sit above the frontier by design: a power law in C does not predict
    # them, so scoring them would report misses that say nothing about the law.
    bt = backtest(_isoflop_ladder(), "power", fit_max_flops=3e19)
    assert [r.run for r in bt.rows] == ["C1e+20-k1.0", "C3e+20-k1.0"]
    assert any("4 held-out run(s) that are not the lowest loss of their budget are not scored"
               in n for n in bt.notes)
    # A law of N and D predicts every run, so every held-out run is scored.
    both = backtest(_isoflop_ladder(), "chinchilla", fit_max_flops=3e19, interval=None)
    assert len(both.rows) == 6


def test_backtest_warnings_collects_the_fold_fits_warnings():
    bt = backtest(_isoflop_ladder(), "power", leave_one_budget_out=True, interval=None)
    expected = list(dict.fromkeys(f"[{f['fold']}] {w}" for f in bt.fits for w in f["warnings"]))
    assert bt.warnings == expected
    assert all(w.startswith("[without budget") for w in bt.warnings)


def test_backtest_scores_predicts_default_interval_on_a_hero_ladder(capsys):
    # A 5-rung hero ladder (F22): the fold fitted on 4 rungs leaves the power law 1 residual
    # dof, so the fit alone has no interval; predict's default (auto) still gives the
    # reference-class one, and the backtest must be able to score that interval.
    hero = pd.DataFrame({"run": [f"r{i}" for i in range(5)],
                         "flops": [1e18, 3e18, 1e19, 3e19, 1e20],
                         "loss": [4.4684, 4.1246, 3.8033, 3.5405, 3.2899]})
    plain = delphi.backtest(hero, "power", fit_max_flops=3e19)
    assert plain.rows[0].lower is None and plain.summary["coverage"] is None
    assert any("--interval auto" in n or 'interval="auto"' in n for n in plain.notes)
    for method in ("auto", "reference"):
        bt = delphi.backtest(hero, "power", fit_max_flops=3e19, interval=method)
        r = bt.rows[0]
        assert r.lower < r.predicted < r.upper and r.inside is True
        assert bt.summary["coverage"] == 1.0
        assert any("interval from the reference class" in n for n in bt.notes)
    # calibrated needs an interval of the fit's own to widen: none, and the reason says so.
    cal = delphi.backtest(hero, "power", fit_max_flops=3e19, interval="calibrated")
    assert cal.rows[0].lower is None
    assert any("no calibrated interval" in n for n in cal.notes)
    with pytest.raises(delphi.errors.FitError, match="unknown backtest interval"):
        delphi.backtest(hero, "power", fit_max_flops=3e19, interval="refrence")
    assert main(["backtest", "marin-delphi-dense", "--law", "power", "--fit-max-flops",
                 "3e19", "--interval", "reference", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert all(r["lower"] is not None for r in d["rows"])
    # A public ladder is not scored against a reference class holding its own errors.
    ref = [n for n in d["notes"] if "interval from the reference class" in n]
    assert ref and all("marin-delphi-dense left out" in n for n in ref)
