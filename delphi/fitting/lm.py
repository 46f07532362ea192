"""A Levenberg-Marquardt polish of the summed Huber objective in numpy, for few parameters.

The full-data polish of a two-level search (:mod:`delphi.fitting.engine`) refines a handful of
parameters (the multi-power law: 7) on thousands of log residuals. Each step needs one
residual-and-Jacobian evaluation and the solution of a p x p system; a general trust-region
code (``scipy.optimize.least_squares``) adds about 1-2 ms of its own per step there (an SVD
of the n x p Jacobian, its bookkeeping), a third of the step's cost. This module runs the
same kind of iteration on the p x p normal equations alone.

Method: Levenberg-Marquardt (Levenberg 1944; Marquardt 1963) with Marquardt's diagonal
scaling kept at its running maximum (More 1978) and Nielsen's damping update (Nielsen 1999;
Madsen, Nielsen & Tingleff 2004, Sec. 3.2); the Huber loss by the exact Gauss-Newton model
of ``rho(r^2)`` that scipy's ``least_squares(loss="huber")`` uses (Triggs et al. 2000): a
residual inside ``delta`` counts with weight 1, one outside with weight 0 in the curvature
and ``delta sign(r)`` in the gradient. Bounds by projection of each step onto the box
(the gain ratio is taken for the projected step). Parameters with a positive lower bound
are iterated in log coordinates, as :func:`delphi.fitting.refit.refine_least_squares` does.

Not used by the fitting engine (issue 26, eighth pass, benchmarks/RESULTS.md): as the
two-level search's full-data polish it took 72-99 evaluations where scipy's trust region took
105-194 on the bench case, at the same optimum, but on a held-out run (a 3,200-step cosine run
with a flat valley) its probes missed a lower basin that the trust region's path finds, and in
the valley of 0.5%-noise WSD runs towards beta's lower bound (most residuals outside delta,
so few of them carry curvature) it crawls: 400 evaluations where the trust region takes ~300,
ending 3.4e-9 above its objective.
"""

from __future__ import annotations

import math

import numpy as np

from .objective import Problem

__all__ = ["refine_lm"]

# Objective returned when the law's prediction is not positive somewhere (the step is
# rejected and the damping raised).
_INFEASIBLE = math.inf
# The first damping, relative to the scaled curvature (the system is H + mu diag(H)).
_MU0 = 1e-3


def _bounds(ibounds) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([b[0] if b[0] is not None else -np.inf for b in ibounds], dtype=float)
    hi = np.array([b[1] if b[1] is not None else np.inf for b in ibounds], dtype=float)
    return lo, hi


def refine_lm(problem: Problem, z0: np.ndarray, ibounds, *, max_nfev: int = 400,
              ftol: float = 1e-15, xtol: float = 1e-15
              ) -> tuple[np.ndarray, float, int, int, str]:
    """Polish ``z0`` (p,) by Levenberg-Marquardt on the summed Huber objective of
    ``problem`` (:meth:`~delphi.fitting.objective.Problem.objective`, scipy's convention).

    ``ibounds``: the internal bounds [(lo or None, hi or None)] per parameter. A step is
    accepted when it lowers the objective; the iteration stops when an accepted step lowers
    it by less than ``ftol`` relative (a model reduction below that, too), when a step is
    below ``xtol`` relative to the point, or after ``max_nfev`` evaluations of the residuals
    and Jacobian (each costs one :meth:`~delphi.fitting.objective.Problem.residuals_and_jacobian`).

    Returns (z (p,), objective, evaluations, status, message), as
    :func:`delphi.fitting.refit.refine_least_squares`: status 2 ftol met, 3 xtol met, 0
    ``max_nfev`` reached or the start infeasible. Raises nothing of its own; the returned
    point is never worse than ``z0``. The caller judges stationarity.
    """
    z0 = np.asarray(z0, dtype=float)
    lo, hi = _bounds(ibounds)
    z0 = np.clip(z0, lo, hi)
    p = len(z0)
    if p == 0:
        return z0, problem.objective(z0), 0, 1, "nothing to fit: every parameter is fixed"
    logs = lo > 0
    ulo, uhi = lo.copy(), hi.copy()
    ulo[logs], uhi[logs] = np.log(lo[logs]), np.log(hi[logs])
    d = problem.delta

    def to_z(u):
        z = u.copy()
        z[logs] = np.exp(u[logs])
        return np.clip(z, lo, hi)

    def evaluate(u):
        z = to_z(u)
        with np.errstate(all="ignore"):
            r, jz, ok = problem.residuals_and_jacobian(z)
        if not ok or not np.all(np.isfinite(r)):
            return _INFEASIBLE, None, None
        ju = jz.copy()
        ju[:, logs] *= z[logs]
        a = np.abs(r)
        f = float(np.where(a <= d, 0.5 * r * r, d * (a - 0.5 * d)).sum())
        return f, r, ju

    u = np.clip(np.where(logs, np.log(np.where(logs, z0, 1.0)), z0), ulo, uhi)
    f, r, j = evaluate(u)
    nfev = 1
    if r is None:
        return z0, problem.objective(z0), nfev, 0, "the start is infeasible"
    mu, nu = None, 2.0
    dmax = np.zeros(p)
    status, message = 0, "the maximum number of evaluations is reached"
    while nfev < max_nfev:
        inside = np.abs(r) <= d
        psi = np.clip(r, -d, d)
        g = j.T @ psi
        ji = j[inside]
        h = ji.T @ ji
        # More's scaling: the running maximum of the curvature's diagonal (a parameter with no
        # residual inside delta keeps its column's size, so the system stays definite).
        col = np.einsum("ij,ij->j", j, j) * 1e-8
        dmax = np.maximum(dmax, np.maximum(np.diag(h), col))
        if mu is None:
            mu = _MU0
        # Active bounds: a parameter on a bound that the gradient pushes outwards stays there
        # this step (the others are solved for without it, so the projection does not bend
        # the step).
        tol = 1e-12 * np.maximum(1.0, np.abs(u))
        free = ~(((u <= ulo + tol) & (g > 0)) | ((u >= uhi - tol) & (g < 0)))
        if not free.any():
            return to_z(u), f, nfev, 1, "every parameter is held by an active bound"
        hf, gf = h[np.ix_(free, free)], g[free]
        while nfev < max_nfev:
            step = np.zeros(p)
            try:
                step[free] = np.linalg.solve(hf + mu * np.diag(dmax[free]), -gf)
            except np.linalg.LinAlgError:
                mu *= nu
                nu *= 2.0
                continue
            un = np.clip(u + step, ulo, uhi)
            step = un - u
            pred = -(g @ step + 0.5 * step @ h @ step)
            if not np.any(step) or np.linalg.norm(step) <= xtol * (xtol + np.linalg.norm(u)):
                return to_z(u), f, nfev, 3, "the step is below xtol"
            fn, rn, jn = evaluate(un)
            nfev += 1
            gain = (f - fn) / pred if pred > 0 else -1.0
            if rn is not None and fn < f:
                small = (f - fn) < ftol * f and pred < ftol * f
                u, f, r, j = un, fn, rn, jn
                if gain > 0:
                    mu *= max(1.0 / 3.0, 1.0 - (2.0 * gain - 1.0) ** 3)
                nu = 2.0
                if small:
                    return to_z(u), f, nfev, 2, "the objective's reduction is below ftol"
                break
            mu *= nu
            nu *= 2.0
    return to_z(u), f, nfev, status, message
