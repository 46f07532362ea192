"""delphi.fitting.lm: the numpy Levenberg-Marquardt polish of the Huber objective (issue 26)."""

import numpy as np
import pytest

import delphi
from delphi.fitting import engine
from delphi.fitting.lm import refine_lm
from delphi.fitting.refit import refine_least_squares


def _chinchilla(seed=11, noise=0.01, n_points=40):
    rng = np.random.default_rng(seed)
    n = 10 ** rng.uniform(7, 9, n_points)
    d = n * 10 ** rng.uniform(1, 2.3, n_points)
    true = {"E": 1.8, "A": 400.0, "B": 2000.0, "alpha": 0.34, "beta": 0.37}
    law = delphi.laws.get_law("chinchilla")
    x = {"params": n, "tokens": d}
    y = law.predict(true, x) * np.exp(rng.normal(0, noise, n_points))
    return law, x, y


@pytest.mark.parametrize("noise", [0.0005, 0.01])
def test_lm_reaches_the_engine_optimum_from_a_perturbed_start(noise):
    """From a start 0.05 off in every internal coordinate, the polish ends at the global
    search's optimum (objective to 1e-9, stationary), never above its start; residuals mostly
    inside delta (noise 0.05%) and mostly outside it (1%) both."""
    law, x, y = _chinchilla(noise=noise)
    fit = delphi.fit_arrays("chinchilla", x, y)
    prep = engine.prepare(law, x, y)
    z_opt = prep.problem.pack(fit.params)
    start = z_opt + 0.05
    z, f, nfev, status, _ = refine_lm(prep.problem, start, prep.ibounds)
    assert status > 0 and 1 < nfev < 400
    assert f <= prep.problem.objective(start)
    assert f == pytest.approx(fit.objective, rel=1e-9)
    assert engine._stationarity(prep.problem, z, prep.ibounds) < 1e-6
    # The same inputs give the same point bit for bit.
    z2, f2, nfev2, _, _ = refine_lm(prep.problem, start, prep.ibounds)
    assert np.array_equal(z, z2) and f == f2 and nfev == nfev2


def test_lm_holds_an_active_bound_and_matches_the_trust_region():
    """With alpha's upper bound set below its optimum, the polish ends on that bound at the
    same constrained optimum as scipy's trust region (a projected step that ignored the
    bound's pull stalled there: issue 26, beta on its bound 10)."""
    law, x, y = _chinchilla()
    prep = engine.prepare(law, x, y)
    fit = delphi.fit_arrays("chinchilla", x, y)
    ib = list(prep.ibounds)
    k = len(prep.problem.free_lin) + prep.problem.nl_names.index("alpha")
    ib[k] = (ib[k][0], 0.9 * fit.params["alpha"])
    z0 = np.clip(prep.problem.pack(fit.params), *zip(*[(lo if lo is not None else -np.inf,
                                                        hi if hi is not None else np.inf)
                                                       for lo, hi in ib]))
    z, f, _, status, _ = refine_lm(prep.problem, z0, ib)
    zs, fs, _, _, _ = refine_least_squares(prep.problem, z0, ib)
    assert status > 0
    assert z[k] == ib[k][1]
    assert f == pytest.approx(fs, rel=1e-9)
    assert engine._stationarity(prep.problem, z, ib) < 1e-6


def test_lm_stops_at_max_nfev_and_on_fixed_bounds():
    """A budget of 3 evaluations is kept (status 0, the point no worse than the start);
    lower = upper everywhere gives the start back without a step."""
    law, x, y = _chinchilla()
    prep = engine.prepare(law, x, y)
    fit = delphi.fit_arrays("chinchilla", x, y)
    z_opt = prep.problem.pack(fit.params)
    start = z_opt + 0.3
    z, f, nfev, status, said = refine_lm(prep.problem, start, prep.ibounds, max_nfev=3)
    assert nfev == 3 and status == 0 and "maximum" in said
    assert f <= prep.problem.objective(start)
    same = [(float(v), float(v)) for v in z_opt]
    z2, f2, _, status2, _ = refine_lm(prep.problem, z_opt, same)
    assert np.array_equal(z2, z_opt) and status2 > 0
