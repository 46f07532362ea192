"""The multi-power law's approximate inputs (issue 26, target 3: the seventh pass).

``MultiPowerLaw.approximate_inputs`` groups the LR drops more coarsely (ratio 1.25 instead
of the law's 1.08), for the intermediate steps of a fit only (benchmarks/
probe_multipower_cases.py ``--approx-first-level``; not used by the engine). These tests check
the approximation against the law's own sum on cosine, WSD, linear and constant schedules
with its stated bound, and that the exact inputs keep giving the exact law.
"""

import numpy as np
import pytest

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
