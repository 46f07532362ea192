"""The exact weighted quantile (L1 at tau = 1/2) regression line, without a linear programme.

A line y = a + b x minimising sum_i w_i rho_tau(y_i - a - b x_i) (Koenker & Bassett 1978;
rho_tau(u) = tau u for u >= 0, (tau - 1) u below) is a linear programme whose optimum lies
on a vertex: a line through two data points, or through one point on a bound of a or b.
With two parameters that vertex is found directly by the descent of Wesolowsky (1981, "A new
descent algorithm for the least absolute value regression problem"): the best line through a
pivot point is a one-dimensional weighted quantile of the slopes to the other points (a sort
and a cumulative sum), and the point it passes through is the next pivot, while the
objective falls. This replaces HiGHS's LP (about 18 ms a call on 1,400 errors, compare's
calibration asks for 27) by a few sorts.

Exactness. The objective is convex and piecewise linear. Near a line through the points
with zero residual, it is linear on each sector between the directions "rotate about one of
those points", so the line is optimal when no rotation about any of them lowers it (each is
a one-dimensional problem solved exactly); the descent stops only there (every point the
line passes through, within rounding, is tried as a pivot). Bounds a >= a_min, b >= b_min:
if the free optimum breaks one, a constrained optimum lies on the boundary (convexity), where
each side is again one-dimensional: a = a_min (the best b >= b_min) or b = b_min (the best
a >= a_min); the lower of the two is taken.

Ties (the optimum is not unique, e.g. few distinct x whose groups of points balance
exactly, or an even number of equal weights on a flat line): the midpoint of the least steep
and the steepest optimal lines is returned, as the median of an even sample is the midpoint
of its two middle values. The optimal lines form a convex polygon whose edges are rotations
about a point on the line, so both ends are found by climbing from the descent's vertex
along flat edges while the slope falls (rises). On a bound, each one-dimensional problem
takes the midpoint of its minimisers, and the side a = a_min is kept unless b = b_min is
lower beyond rounding. With a single x only a + b x is identified: b = 0 and the midpoint of
the optimal a. The rule depends on the points, not their order (to rounding), and the same
inputs give the same line bit for bit. A linear programme solver returns whichever vertex
of the optimal polygon its pivots reach.
"""

from __future__ import annotations

import numpy as np

__all__ = ["quantile_line", "quantile_line_objective"]

# A vertex is left only for an objective lower by more than this (relative): rounding of a
# sum of ~1,000 terms is ~1e-15, so a smaller "decrease" is noise and could cycle.
_DECREASE_RTOL = 1e-14


def quantile_line_objective(x, y, a: float, b: float, tau: float = 0.5, w=None) -> float:
    """sum_i w_i rho_tau(y_i - a - b x_i), the objective :func:`quantile_line` minimises
    (x, y, w: shape (n,); w = 1 when None)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    r = y - a - b * x
    loss = np.where(r >= 0, tau * r, (tau - 1.0) * r)
    return float(loss.sum() if w is None else (np.asarray(w, float) * loss).sum())


def _argmin_1d(s: np.ndarray, c: np.ndarray, t: np.ndarray, largest: bool = True) -> int:
    """Index i of the largest (or smallest) minimiser s_i of h(v) = sum_i c_i rho_{t_i}(s_i - v),
    c > 0: h's right derivative at v is sum_{s_i <= v} c_i - sum_i c_i t_i, so a minimiser
    is a sorted s whose cumulative weight reaches sum c t (a weighted quantile); the largest
    is the first whose cumulative weight passes it."""
    order = np.argsort(s, kind="stable")
    cum = np.cumsum(c[order])
    j = int(np.searchsorted(cum, float((c * t).sum()), side="right" if largest else "left"))
    return int(order[min(j, len(order) - 1)])


def _on_line(x, y, a, b, scale):
    """Points the line passes through, within rounding; one of each repeated (x, y), which
    give the same pivot problem (a tied line can pass through thousands)."""
    on = np.flatnonzero(np.abs(y - a - b * x) <= 1e-12 * scale * (1.0 + abs(b)))
    if len(on) > 1:
        _, first = np.unique(np.stack([x[on], y[on]], axis=1), axis=0, return_index=True)
        on = on[np.sort(first)]
    return on


def _free_line(x, y, w, tau):
    """(a, b) of the unconstrained optimum (the midpoint of the optimal lines when there are
    several): pivoting descent, then climbs along the optimal polygon."""
    n = len(y)
    if x.min() == x.max():
        # One x: only a + b x is identified, the optimal lines are unbounded; b = 0 (the
        # flat line) and the midpoint of the optimal a.
        return _mid_minimiser(y, w, np.full(n, tau), -np.inf), 0.0
    k = _argmin_1d(y, w, np.full(n, tau), largest=False)
    a, b = float(y[k]), 0.0
    f = quantile_line_objective(x, y, a, b, tau, w)
    scale = float(np.abs(y).max() + np.abs(x).max())
    moved = True
    while moved:     # ends: each move lowers f by more than rounding, over finitely many vertices
        moved = False
        # Pivots: k first, then every other point the line passes through (a degenerate
        # vertex), until one gives a strictly lower objective.
        for p in [k] + [int(i) for i in _on_line(x, y, a, b, scale)
                        if not (x[i] == x[k] and y[i] == y[k])]:
            d = x - x[p]
            m = np.flatnonzero(d != 0)
            if len(m) == 0:
                continue             # every point at x_p: the slope does not matter
            dm = d[m]
            s = (y[m] - y[p]) / dm
            j = _argmin_1d(s, w[m] * np.abs(dm), np.where(dm > 0, tau, 1.0 - tau), largest=False)
            b_new = float(s[j])
            a_new = float(y[p] - b_new * x[p])
            f_new = quantile_line_objective(x, y, a_new, b_new, tau, w)
            if f_new < f - _DECREASE_RTOL * abs(f):
                a, b, f, k, moved = a_new, b_new, f_new, int(m[j]), True
                break
    # Ties: the optimal lines form a polygon whose edges are rotations about a point on the
    # line; the steepest and the least steep are found by climbing along flat edges (b moves
    # one way at each step, so each climb ends), and their midpoint is returned.
    ends = [_climb(x, y, w, tau, a, b, f, scale, up) for up in (False, True)]
    if ends[0] == ends[1]:
        return ends[0]
    return 0.5 * (ends[0][0] + ends[1][0]), 0.5 * (ends[0][1] + ends[1][1])


def _climb(x, y, w, tau, a, b, f_opt, scale, up: bool):
    """From the optimal line (a, b), along edges of the optimal polygon while the slope rises
    (up) or falls: the steepest (least steep) optimal line."""
    moved = True
    while moved:
        moved = False
        for p in _on_line(x, y, a, b, scale):
            d = x - x[p]
            m = np.flatnonzero(d != 0)
            s = (y[m] - y[p]) / d[m]
            gap = 4 * np.finfo(float).eps * max(abs(b), 1e-300)
            s = s[s > b + gap] if up else s[s < b - gap]
            if not len(s):
                continue
            b_new = float(s.min() if up else s.max())
            a_new = float(y[p] - b_new * x[p])
            if quantile_line_objective(x, y, a_new, b_new, tau, w) \
                    <= f_opt + _DECREASE_RTOL * abs(f_opt):
                a, b, moved = a_new, b_new, True
                break
    return a, b


def _mid_minimiser(s, c, t, low: float) -> float:
    """Midpoint of the minimisers of sum_i c_i rho_{t_i}(s_i - v) over v >= low (the
    median's convention when the minimiser is not unique)."""
    lo = max(float(s[_argmin_1d(s, c, t, largest=False)]), low)
    hi = max(float(s[_argmin_1d(s, c, t, largest=True)]), low)
    return lo if lo == hi else 0.5 * (lo + hi)


def quantile_line(x, y, tau: float = 0.5, w=None, *, a_min: float = -np.inf,
                  b_min: float = -np.inf) -> tuple[float, float]:
    """(a, b) minimising sum_i w_i rho_tau(y_i - a - b x_i) subject to a >= a_min,
    b >= b_min: the weighted linear quantile regression line (Koenker & Bassett 1978; the
    median, least absolute deviations, line at tau = 0.5), found exactly (see the module
    docstring for the method, Wesolowsky 1981, and the tie rule).

    x, y: shape (n,), finite; w: shape (n,) positive weights (1 when None); tau in (0, 1).
    Returns floats (intercept a in y's unit, slope b in y's unit per x's unit).

    Raises ValueError for empty, mismatched or multi-dimensional inputs, non-finite
    values, weights <= 0, tau outside (0, 1), or a bound that is NaN or +inf.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    w = np.ones(y.shape) if w is None else np.asarray(w, float)
    if max(x.ndim, y.ndim, w.ndim) > 1:
        # ravel would pair a (2, 2) x with a length-4 y silently, in an order the caller
        # did not choose.
        raise ValueError(f"quantile_line needs one-dimensional x, y and w, got shapes "
                         f"{x.shape}, {y.shape}, {w.shape}")
    x, y, w = x.ravel(), y.ravel(), w.ravel()
    if not (len(x) == len(y) == len(w) > 0):
        raise ValueError(f"quantile_line needs x, y and w of one length > 0, got {len(x)}, "
                         f"{len(y)}, {len(w)}")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y)) and np.all(np.isfinite(w))
            and np.all(w > 0)):
        raise ValueError("quantile_line needs finite x and y and finite weights > 0")
    if not (isinstance(tau, (int, float, np.integer, np.floating)) and 0 < tau < 1):
        raise ValueError(f"tau must be a number in (0, 1), got {tau!r}")
    # A NaN or +inf bound has no feasible line (it found no side to search: an IndexError).
    for name, bound in (("a_min", a_min), ("b_min", b_min)):
        if not (isinstance(bound, (int, float, np.integer, np.floating)) and bound < np.inf):
            raise ValueError(f"{name} must be a number below +inf (or -inf for no bound), "
                             f"got {bound!r}")
    if w.max() > 1e150:
        # The line does not depend on the weights' scale; sums of weights near the float
        # limit overflow to inf (four weights of 1e308 gave a wrong line). A power of two
        # scales exactly; smaller weights are left as given, bit for bit.
        w = np.ldexp(w, -int(np.frexp(w.max())[1]))
    a, b = _free_line(x, y, w, tau)
    if a >= a_min and b >= b_min:
        return a, b
    # A bound is broken: the optimum lies on the boundary, a = a_min (the best b >= b_min:
    # a one-dimensional quantile of the slopes (y - a_min) / x; points at x = 0 add a
    # constant) or b = b_min (the best a >= a_min: a quantile of y - b_min x).
    sides = []
    if np.isfinite(a_min):
        m = np.flatnonzero(x != 0)
        b1 = b_min if np.isfinite(b_min) else 0.0
        if len(m):
            xm = x[m]
            b1 = _mid_minimiser((y[m] - a_min) / xm, w[m] * np.abs(xm),
                                np.where(xm > 0, tau, 1.0 - tau), b_min)
        sides.append((float(a_min), float(b1)))
    if np.isfinite(b_min):
        sides.append((_mid_minimiser(y - b_min * x, w, np.full(len(y), tau), a_min),
                      float(b_min)))
    f = [quantile_line_objective(x, y, ab[0], ab[1], tau, w) for ab in sides]
    # The steeper side (a = a_min) unless the other is lower beyond rounding.
    if len(sides) == 2 and f[1] < f[0] - _DECREASE_RTOL * abs(f[0]):
        return sides[1]
    return sides[0]
