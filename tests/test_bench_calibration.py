"""benchmarks/bench_calibration.py (issue 11, item 5): the nested auto and ensemble cannot see
the future, on a small simulated ladder (no published data); benchmarks/bench_coverage.py's
bookkeeping on a few simulated ladders."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_calibration as bc  # noqa: E402

from delphi import Ladder  # noqa: E402
from delphi.calibration import LFOErrors  # noqa: E402
from delphi.selection import Candidate, CandidateScore, Comparison  # noqa: E402

# Epoch's refit of Chinchilla (Besiroglu et al. 2024): the simulated ladder's true law.
E, A, B, ALPHA, BETA = 1.8172, 482.01, 2085.43, 0.3478, 0.3658
BUDGETS = [1e17, 3e17, 1e18, 3e18, 1e19, 3e19]


def _ladder(budgets=BUDGETS) -> Ladder:
    """isoFLOP budgets x 4 model sizes (D/N from 5 to 80), noise-free Chinchilla losses."""
    rows = []
    for c in budgets:
        n0 = np.sqrt(c / (6 * 20))
        for j, f in enumerate((0.5, 0.8, 1.25, 2.0)):
            n = n0 * f
            d = c / (6 * n)
            rows.append({"run": f"c{c:.0e}-{j}", "params": n, "tokens": d, "flops": c,
                         "loss": E + A / n ** ALPHA + B / d ** BETA})
    return Ladder(pd.DataFrame(rows), name="sim")


def _errors(law, ladder, cuts, err) -> LFOErrors:
    """Fake leave-future-out errors: fold k (cut at ``cuts[k]``) predicts every run of a
    larger budget with log error ``err(k, run budget)``."""
    finals, _ = ladder.final_points()
    cols = {k: [] for k in ("run", "cut", "flops", "ratio", "log_error", "predicted", "actual",
                            "budget")}
    for k, b in enumerate(cuts):
        for run, c, loss in zip(finals["run"], finals["flops"], finals["loss"]):
            if c > b * 1.05:
                e = err(k, c)
                cols["run"].append(run)
                cols["cut"].append(b)
                cols["budget"].append(b)
                cols["flops"].append(c)
                cols["ratio"].append(c / b)
                cols["log_error"].append(e)
                cols["predicted"].append(loss * np.exp(e))
                cols["actual"].append(loss)
    arrays = {k: np.asarray(v, dtype=object if k == "run" else float) for k, v in cols.items()}
    return LFOErrors(law=law, ladder=ladder.name, **arrays)


def _score(law, errors) -> CandidateScore:
    e = np.abs(errors.log_error)
    return CandidateScore(candidate=Candidate(law=law), n_scored=len(e),
                          mean_abs_error=float(e.mean()), max_abs_error=float(e.max()),
                          mse=float(np.mean(e ** 2)), coverage_before=None, coverage_after=None,
                          n_calibrated=0, aic=None, bic=None, n_points=24, params={},
                          backtest=SimpleNamespace(errors=errors))


def test_nested_auto_and_ensemble_cannot_see_the_future():
    ladder = _ladder()
    cuts = BUDGETS[1:4]          # folds fitted up to 3e17, 1e18, 3e18
    last = cuts[-1]
    # chinchilla (the default law) is 3% off everywhere; overtrain 1% everywhere; power is
    # 2% off on every run a forecaster at the last cut has seen and exact on every run above
    # it: a selection that peeked at those runs (or at the last fold) would pick power there.
    errs = {"chinchilla": _errors("chinchilla", ladder, cuts, lambda k, c: 0.03),
            "overtrain": _errors("overtrain", ladder, cuts, lambda k, c: 0.01),
            "power": _errors("power", ladder, cuts,
                             lambda k, c: 0.0 if c > last * 1.05 else 0.02)}
    # the leaky choice really differs: over all earlier-fold pairs power has the lower mean
    p = errs["power"]
    leaky = np.abs(p.log_error[p.budget < last]).mean()
    assert leaky < 0.01
    comp = Comparison(ladder="sim", scores=[_score(k, v) for k, v in errs.items()],
                      cuts=list(cuts), level=0.9)

    res = bc.bench_ladder(ladder, comparison=comp, coverage=False)

    assert res["default_law"] == "chinchilla"
    assert (res["n_folds"], res["n_scored_folds"], res["n_skipped_folds"]) == (3, 2, 1)
    # fold 2 predicts budgets 3e18, 1e19, 3e19 (12 runs); fold 3 predicts 1e19, 3e19 (8 runs)
    assert res["n_pairs"] == 12 + 8
    assert [f["auto"] for f in res["folds"]] == ["overtrain", "overtrain"]
    assert res["folds"][-1]["earlier_mean_abs_error"]["power"] == pytest.approx(0.02)
    assert res["mae"]["default"] == pytest.approx(0.03)
    assert res["mae"]["auto"] == pytest.approx(0.01)
    # in hindsight power is best on the scored pairs: 4 runs at 2% of 20 pairs
    assert res["best_fixed"] == "power"
    assert res["mae"]["fixed"]["power"] == pytest.approx(4 * 0.02 / 20)
    assert res["auto_worse"] is True
    # ensemble at the last fold: 1/MSE weights from the seen pairs (0.03^2, 0.01^2, 0.02^2)
    inv = np.array([1 / 0.03 ** 2, 1 / 0.01 ** 2, 1 / 0.02 ** 2])
    w = inv / inv.sum()
    last_fold = res["folds"][-1]["weights"]
    assert [last_fold[k] for k in ("chinchilla", "overtrain", "power")] == \
        pytest.approx(w.tolist())
    # fold 2 saw only the 4 runs of budget 1e18 from fold 1 (power 2%): the same weights.
    # The ensemble's log error is the weighted mean of the members': fold 2 predicts 4 runs
    # of 3e18 (power 2%) and 8 above (power exact), fold 3 the same 8.
    base = w[0] * 0.03 + w[1] * 0.01
    expected = (4 * (base + w[2] * 0.02) + 8 * base + 8 * base) / 20
    assert res["mae"]["ensemble"] == pytest.approx(expected)


def test_bench_ladder_real_fits_on_a_noise_free_chinchilla_ladder():
    # 9 budgets: a power law in C fits one (frontier) run per budget, so needs 5 of them
    ladder = _ladder([1e17 * 2.0 ** i for i in range(9)])
    res = bc.bench_ladder(ladder, candidates=[Candidate("power"), Candidate("chinchilla")],
                          max_folds=4, coverage=False)
    assert res["why"] is None
    assert res["n_skipped_folds"] >= 1 and res["n_scored_folds"] >= 1
    # the true law extrapolates noise-free data exactly; a power law in C cannot
    assert res["mae"]["default"] < 1e-3
    assert res["mae"]["fixed"]["power"] > 10 * res["mae"]["default"]
    assert set(f["auto"] for f in res["folds"]) == {"chinchilla"}
    assert res["mae"]["auto"] == pytest.approx(res["mae"]["default"])


def test_pool_targets_from_hand_made_results():
    def r(name, d, a, cov_in, n, worse):
        return {"ladder": name, "mae": {"default": d, "auto": a, "ensemble": a},
                "auto_worse": worse,
                "_arrays": {"default": np.full(n, d), "auto": np.full(n, a),
                            "ensemble": np.full(n, a)},
                "coverage": {"n": n, "inside_before": cov_in // 2, "inside_after": cov_in,
                             "before": cov_in / 2 / n, "after": cov_in / n}}
    # 10 predictions at 2%/1%, 30 at 1%/3%: pooled default 1.25%, auto 2.5%
    p = bc.pool([r("a", 0.02, 0.01, 6, 10, False), r("b", 0.01, 0.03, 30, 30, True)])
    assert p["mae"]["default"] == pytest.approx((10 * 0.02 + 30 * 0.01) / 40)
    assert p["mae"]["auto"] == pytest.approx((10 * 0.01 + 30 * 0.03) / 40)
    assert p["mae_ladder_mean"]["auto"] == pytest.approx(0.02)
    assert p["coverage"]["after"] == pytest.approx(36 / 40)
    assert p["coverage"]["after_ladder_mean"] == pytest.approx((0.6 + 1.0) / 2)
    met = [t["met"] for t in p["targets"]]
    # 90% pooled is in range; ladder a at 60% is below 70%; 1 ladder worse; auto not better
    assert met == [True, False, True, False]


# ----------------------------------------------------------------------------- bench_coverage
def test_bench_coverage_bookkeeping_on_a_few_ladders():
    """benchmarks/bench_coverage.py (the coverage studies moved out of the unit tests, issue
    20) on 2 ladders each: a calibrated interval is symmetric in log loss about the forecast,
    so it covers the truth exactly when |log error| <= its log half-width; a new run's
    conditional coverage is a probability, and the studies are seeded (run twice, equal)."""
    import bench_coverage as bcov

    d = bcov.calibrated_study(n_sim=2)
    assert len(d) == 2 and d["r"].between(10, 100).all() and (d["half"] > 0).all()
    assert (d["hit"] == (d["log_error"].abs() <= d["half"])).all()
    assert d["g"].between(-0.03, 0.03).all() and d["delta_hit"].notna().all()
    even = lambda c, rng: np.full(np.shape(c), 0.005)  # noqa: E731
    for method in ("delta", "bootstrap"):
        hits, cond, half = bcov.interval_coverage(2, even, seed=1, method=method, n_boot=20,
                                                  target_mix=[(0.005, 1.0)])
        assert hits.dtype == bool and len(hits) == 2
        assert np.all((cond > 0) & (cond <= 1)) and np.all(half > 0)
        again = bcov.interval_coverage(2, even, seed=1, method=method, n_boot=20,
                                       target_mix=[(0.005, 1.0)])
        assert all(np.array_equal(a, b) for a, b in zip((hits, cond, half), again))
