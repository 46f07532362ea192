"""The exact quantile regression line (delphi.core.quantile_line) against a linear programme
and against every vertex, ties and bounds included."""

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog

from delphi.core.quantile_line import quantile_line, quantile_line_objective


def _lp(x, y, tau, w, a_min, b_min):
    n = len(y)
    eye = sparse.identity(n, format="csr")
    a_eq = sparse.hstack([sparse.csr_matrix(np.column_stack([np.ones(n), x])), eye, -eye],
                         format="csr")
    res = linprog(np.concatenate([[0.0, 0.0], tau * w, (1 - tau) * w]), A_eq=a_eq, b_eq=y,
                  bounds=[(a_min, None), (b_min, None)] + [(0, None)] * (2 * n),
                  method="highs")
    assert res.success
    return res.x[0], res.x[1]


def _vertex_minimum(x, y, tau, w, a_min, b_min):
    """Lowest objective over every feasible vertex: lines through two points, through one
    point on a bound, and the corner."""
    i, j = np.triu_indices(len(y), 1)
    ok = x[i] != x[j]
    i, j = i[ok], j[ok]
    b = np.concatenate([(y[j] - y[i]) / (x[j] - x[i]), (y - a_min)[x != 0] / x[x != 0],
                        np.full(len(y), b_min), [b_min]])
    a = np.concatenate([y[i] - b[:len(i)] * x[i], np.full((x != 0).sum(), a_min),
                        y - b_min * x, [a_min]])
    keep = (a >= a_min) & (b >= b_min)
    r = y[None, :] - a[keep, None] - b[keep, None] * x[None, :]
    return float((w * np.where(r >= 0, tau * r, (tau - 1) * r)).sum(1).min())


def _problems():
    rng = np.random.default_rng(7)
    for case in range(24):
        n = int(rng.integers(3, 60))
        if case % 3 == 0:      # few distinct x and rounded y: tied (non-unique) optima
            x = rng.integers(0, 4, n).astype(float)
            y = np.round(rng.exponential(1.0, n) * (1 + x), 1)
        else:
            x = np.abs(rng.normal(1, 1, n))
            y = np.abs(rng.normal(0.02 + 0.01 * x, 0.01 + 0.005 * x))
        w = np.ones(n) if case % 2 else rng.uniform(0.1, 3.0, n)
        tau = [0.5, 0.9, 0.25][case % 3]
        a_min = [1e-4, 0.05, -np.inf][case % 4 % 3]
        yield x, y, tau, w, a_min, (0.0 if case % 5 else -np.inf)


def test_the_line_attains_the_lowest_objective_of_every_vertex_and_the_lp():
    for x, y, tau, w, a_min, b_min in _problems():
        a, b = quantile_line(x, y, tau, w, a_min=a_min, b_min=b_min)
        assert a >= a_min and b >= b_min
        f = quantile_line_objective(x, y, a, b, tau, w)
        best = _vertex_minimum(x, y, tau, w, a_min if np.isfinite(a_min) else -1e300,
                               b_min if np.isfinite(b_min) else -1e300)
        assert f <= best * (1 + 1e-12) + 1e-15
        lp = _lp(x, y, tau, w, None if not np.isfinite(a_min) else a_min,
                 None if not np.isfinite(b_min) else b_min)
        assert f <= quantile_line_objective(x, y, *lp, tau, w) * (1 + 1e-12) + 1e-15


def test_ties_give_the_midpoint_of_the_optimal_lines_whatever_the_order():
    # Four points at x = 0, b held at 0: every a in [2, 3] is optimal; the median's midpoint.
    assert quantile_line(np.zeros(4), np.array([4.0, 1.0, 3.0, 2.0]), b_min=0.0) == (2.5, 0.0)
    # Two columns of two points: every line between the lows and the highs is optimal, the
    # optimal lines run from slope -1 to slope 1 through the centre; the midpoint is flat.
    x, y = np.array([0.0, 0.0, 1.0, 1.0]), np.array([0.0, 1.0, 0.0, 1.0])
    a, b = quantile_line(x, y)
    assert (a, b) == (0.5, 0.0)
    # The same line, bit for bit, for the inputs in any order (tied cases included).
    rng = np.random.default_rng(1)
    for x, y, tau, w, a_min, b_min in _problems():
        ref = quantile_line(x, y, tau, w, a_min=a_min, b_min=b_min)
        p = rng.permutation(len(y))
        got = quantile_line(x[p], y[p], tau, w[p], a_min=a_min, b_min=b_min)
        assert got == pytest.approx(ref, rel=1e-13, abs=1e-15)
        assert quantile_line(x, y, tau, w, a_min=a_min, b_min=b_min) == ref


def test_bad_inputs_are_refused():
    with pytest.raises(ValueError, match="one length"):
        quantile_line([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="finite"):
        quantile_line([1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="weights"):
        quantile_line([1.0, 2.0], [1.0, 2.0], w=[1.0, 0.0])
    with pytest.raises(ValueError, match="tau"):
        quantile_line([1.0, 2.0], [1.0, 2.0], tau=1.0)
    with pytest.raises(ValueError, match="tau must be a number"):
        quantile_line([1.0, 2.0], [1.0, 2.0], tau="0.5")
    # A bound no line meets was an IndexError (no side of the boundary to search).
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="a_min must be a number below"):
            quantile_line([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], a_min=bad)
        with pytest.raises(ValueError, match="b_min must be a number below"):
            quantile_line([1.0, 2.0, 3.0], [3.0, 2.0, 1.0], b_min=bad)
    # A (2, 2) x beside a length-4 y was flattened silently.
    with pytest.raises(ValueError, match="one-dimensional"):
        quantile_line([[1.0, 2.0], [3.0, 4.0]], [1.0, 2.0, 3.0, 4.0])


def test_the_line_does_not_depend_on_the_weights_scale():
    """Weights near the float limit (sums overflowed to inf: y = x gave a = 1, b = 0.5)."""
    x, y = [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.5]
    for scale in (1e-300, 1e200, 1e308):
        assert quantile_line(x, x, w=[scale] * 4) == (0.0, 1.0)
        assert quantile_line(x, y, w=[scale] * 4) == quantile_line(x, y)
