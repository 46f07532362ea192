"""A fit asked for twice in one command runs once (delphi.core.shared_fits, issue 27 item 3),
and what it hands back is the fit a fresh call makes, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import delphi.fitting.engine as engine
from delphi.analyses.backtest import backtest
from delphi.core.shared_fits import active, shared_fits
from delphi.fitting import fit, fit_arrays

from bundled import load


@pytest.fixture
def runs(monkeypatch):
    """Counts the fits that really run (engine._fit_arrays)."""
    calls = []
    real = engine._fit_arrays

    def spy(law, x, y, **kw):
        calls.append(kw)
        return real(law, x, y, **kw)

    monkeypatch.setattr(engine, "_fit_arrays", spy)
    return calls


def _points():
    rng = np.random.default_rng(3)
    n = np.repeat([1e7, 3e7, 1e8, 3e8], 3)
    d = n * np.tile([10.0, 20.0, 40.0], 4)
    y = (1.7 + 400 * n ** -0.34 + 2000 * d ** -0.37) * np.exp(rng.normal(0, 0.004, n.size))
    return {"params": n, "tokens": d}, y


def _same(a, b):
    """Every field of two fits equal bit for bit (arrays by their bytes)."""
    assert a.params == b.params and a.objective == b.objective and a.stderr == b.stderr
    assert (a.warnings, a.message, a.converged, a.n_starts, a.n_agree, a.at_bound) == \
        (b.warnings, b.message, b.converged, b.n_starts, b.n_agree, b.at_bound)
    assert a.residuals.tobytes() == b.residuals.tobytes() and a.y.tobytes() == b.y.tobytes()
    assert a.covariance.tobytes() == b.covariance.tobytes()
    assert a.covariance_params == b.covariance_params and a.labels == b.labels


def test_a_fit_asked_for_twice_runs_once_and_equals_a_fresh_fit(runs):
    x, y = _points()
    with shared_fits() as memo:
        assert active()
        first = fit_arrays("chinchilla", x, y)
        again = fit_arrays("chinchilla", {k: v.copy() for k, v in x.items()}, y.copy())
        assert again is first and len(runs) == 1 and len(memo) == 1
        # Anything the fit reads makes another fit: the seed, a start, a fixed value, a
        # bound, the delta, the labels, one loss.
        fit_arrays("chinchilla", x, y, seed=1)
        warm = fit_arrays("chinchilla", x, y, warm_start=first.params)
        fit_arrays("chinchilla", x, y, fixed={"E": 1.7})
        fit_arrays("chinchilla", x, y, bounds={"E": (0.0, 1.65)})
        fit_arrays("chinchilla", x, y, delta=1e-2)
        fit_arrays("chinchilla", x, y, labels=[f"r{i}" for i in range(len(y))])
        y2 = y.copy()
        y2[0] = np.nextafter(y2[0], 2.0)
        fit_arrays("chinchilla", x, y2)
        assert len(runs) == 8
        assert fit_arrays("chinchilla", x, y, warm_start=dict(first.params)) is warm
        assert len(runs) == 8
    assert not active()
    fresh = fit_arrays("chinchilla", x, y)          # the scope is gone: fitted again
    assert len(runs) == 9 and fresh is not first
    _same(fresh, first)
    _same(fit_arrays("chinchilla", x, y, warm_start=first.params), warm)


def test_inputs_that_are_not_plain_numbers_are_fitted_as_usual(runs):
    x, y = _points()
    with shared_fits() as memo:
        fit_arrays("chinchilla", x, list(y))        # a list of losses is numbers: kept
        fit_arrays("chinchilla", x, y)
        assert len(runs) == 1
        fit_arrays("chinchilla", x, y, fixed={"E": np.float64(1.7)})
        fit_arrays("chinchilla", x, y, fixed={"E": 1.7})
        assert len(runs) == 2 and len(memo) == 2


def test_a_backtest_reuses_the_fit_of_the_same_points(runs, data_dir):
    # `delphi report` without a target fits the ladder, then its leave-one-budget-out
    # backtest fits the same points as the fold every other fold is refined from.
    ladder = load("marin-isoflop-dclm")
    plain = backtest(ladder, "chinchilla", leave_one_budget_out=True)
    alone = len(runs)
    runs.clear()
    with shared_fits():
        full = fit(ladder, "chinchilla")
        shared = backtest(ladder, "chinchilla", leave_one_budget_out=True)
    assert len(runs) == alone                       # the backtest's full fit came from the memo
    _same(full, fit(ladder, "chinchilla"))
    assert shared.to_dict() == plain.to_dict()


def test_a_selection_and_its_final_points_are_made_once(data_dir, monkeypatch):
    # compare cuts every candidate law at the same budgets: each cut's runs are selected once
    # and their final points read once; each caller still gets its own table.
    import pandas as pd
    from delphi.inputs.ladder import Ladder

    ladder = load("marin-isoflop-dclm")
    runs = ladder.runs[:12]
    fresh_sel = ladder.select(runs=runs)
    fresh, fresh_out = fresh_sel.final_points()
    made = []
    real = Ladder._final_points
    monkeypatch.setattr(Ladder, "_final_points", lambda self, *a: made.append(1) or real(self, *a))
    with shared_fits():
        sel = ladder.select(runs=iter(runs))
        assert ladder.select(runs=list(reversed(runs))) is sel
        assert ladder.select(runs=runs[:-1]) is not sel
        first, out = sel.final_points()
        first["loss"] = 0.0                         # the caller's copy
        again, out2 = sel.final_points()
        assert len(made) == 1
    pd.testing.assert_frame_equal(again, fresh, check_exact=True)
    assert out2 == fresh_out and out == fresh_out
    assert sel.table.equals(fresh_sel.table) and sel.exclusions == fresh_sel.exclusions
