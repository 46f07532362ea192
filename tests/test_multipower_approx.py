"""The multi-power law's approximate inputs (issue 26, target 3: the seventh pass).

``MultiPowerLaw.approximate_inputs`` groups the LR drops more coarsely (ratio 1.25 instead
of the law's 1.08); the fitting engine uses it only in the first half of the polish on all
points (``engine._polish_all_points``), never for the final objective. These tests check the
approximation against the law's own sum on cosine, WSD, linear and constant schedules with
its stated bound, and that the fit's final objective is the exact law's.
"""

import warnings

import numpy as np
import pytest

import delphi
from delphi.curves import complete
from delphi.fitting import engine
from delphi.fitting.objective import Problem
from delphi.laws import MULTIPOWER
from delphi.laws import curves as lc
from delphi.schedules import Schedule, features

SPECS = ["cosine:warmup=50,final=0.1", "wsd:warmup=50,decay=0.2,cooldown=1-sqrt",
         "wsd:warmup=50,decay=0.3", "linear:warmup=50,final=0.0", "constant:warmup=50"]
# The bounds the docstring of approximate_inputs states (relative error of LD against the
# law's groups over the search range; measured at most ~1.2e-3 at 1.25, ~4e-3 at 1.5).
BOUND = {1.25: 3e-3, 1.5: 1e-2}


def _inputs(spec, T=1500, frac=0.9):
    sched = Schedule.parse(spec, peak_lr=3e-3, total_steps=T)
    steps = np.arange(1, int(T * frac) + 1)
    return {"S1": features(sched, steps)["S1"], "step": steps.astype(float),
            "_group": np.zeros(steps.size, int), "_lrs": [sched.lrs()]}


@pytest.mark.parametrize("ratio", [None, 1.5])
@pytest.mark.parametrize("spec", SPECS)
def test_approximate_ld_is_within_its_bound_of_the_exact_sum(spec, ratio):
    x = _inputs(spec)
    xa = MULTIPOWER.approximate_inputs(x, ratio)
    assert xa["_group_ratio"] == (ratio or lc.APPROX_GROUP_RATIO)
    assert xa is not x and "_group_ratio" not in x          # x itself is not changed
    assert MULTIPOWER.approximate_inputs(xa) is None        # no coarser of the coarse
    rng = np.random.default_rng(0)
    th = np.column_stack([rng.uniform(0.05, 2, 12), 10 ** rng.uniform(-2, 2, 12),
                          rng.uniform(0.05, 10, 12), rng.uniform(0, 1.5, 12)])
    exact = np.exp(MULTIPOWER.log_basis_grid(th, x)[:, :, 2])
    approx = np.exp(MULTIPOWER.log_basis_grid(th, xa)[:, :, 2])
    # the same points where LD is zero (constant LR, warmup), and within the bound elsewhere
    assert np.array_equal(exact > 0, approx > 0)
    pos = exact > 0
    if spec.startswith("constant"):
        assert not pos.any()
        return
    rel = np.abs(approx[pos] - exact[pos]) / exact[pos]
    assert rel.max() <= BOUND[xa["_group_ratio"]]
    # and cheaper: fewer groups of drops
    assert lc._groups(xa).drop.size * (1.6 if ratio is None else 2) < lc._groups(x).drop.size
    # the exact inputs still give the exact groups (the cache keys on the ratio)
    assert lc._groups(x).drop.size > lc._groups(xa).drop.size
    ld, _ = MULTIPOWER.log_basis(th[0], x)
    assert np.array_equal(np.exp(ld[:, 2]), exact[0])


def test_the_fit_reports_the_exact_laws_objective(monkeypatch):
    """The polish on all points runs on the approximate inputs first, then on the exact ones;
    the fit's objective is the exact law's at its parameters. One two-level fit of an
    800-step cosine run (~2 CPU-s: the only end-to-end check that no approximate objective
    reaches the result)."""
    x = _inputs("cosine:warmup=30,final=0.1", T=1000, frac=0.8)
    x = {k: (v[30:] if isinstance(v, np.ndarray) else v) for k, v in x.items()}
    true = {"L0": 2.9, "A": 0.5, "B": 300.0, "alpha": 0.5, "C": 2.0, "beta": 0.6, "gamma": 0.5}
    y = MULTIPOWER.predict(true, x) * np.exp(
        np.random.default_rng(7).normal(0, 0.002, x["step"].size))
    calls = []
    real = engine._polish_exact

    def spy(problem, z0, *args, **kwargs):
        res = real(problem, z0, *args, **kwargs)
        calls.append((problem.x.get("_group_ratio"), res))
        return res

    monkeypatch.setattr(engine, "_polish_exact", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", delphi.DelphiWarning)
        fit = engine.fit_arrays(MULTIPOWER, x, y)
    ratios = [r for r, _ in calls]
    assert ratios[0] == lc.APPROX_GROUP_RATIO and ratios[-1] is None
    assert "_group_ratio" not in fit.x
    pred = MULTIPOWER.predict(fit.params, x)
    exact = float(np.sum(_huber(np.log(pred) - np.log(y), engine.DEFAULT_DELTA)))
    assert fit.objective == pytest.approx(exact, rel=1e-10)
    approx = MULTIPOWER.predict(fit.params, MULTIPOWER.approximate_inputs(x))
    assert abs(float(np.sum(_huber(np.log(approx) - np.log(y), engine.DEFAULT_DELTA)))
               - exact) > 1e-6 * exact                   # the check would see the difference
    # the same optimum as before the approximate polish: test_multipower_two_level.py's
    # reference figures (objective to 1e-9), and benchmarks/probe_multipower_cases.py


def _huber(r, d):
    a = np.abs(r)
    return np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d))
