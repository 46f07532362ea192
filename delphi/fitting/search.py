"""Global search over a law's non-linear parameters (variable projection).

For fixed non-linear parameters theta the law is linear in its coefficients c >= 0, so the
search scans theta densely (a full grid for one or two free non-linear parameters, a
scrambled Sobol sequence for more) and, at every theta, solves for c exactly by non-negative
least squares on relative residuals (L_pred - L_obs)/L_obs, the first-order form of the log
residual. Each point is then scored by the true Huber objective; the best distinct points
seed the refinement. Variable projection: Golub & Pereyra 1973, SIAM J. Numer. Anal. 10(2).
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
from .objective import Problem

__all__ = ["Candidate", "theta_candidates", "screen", "screen_weighted", "local_minima"]

GRID_1D = 801
GRID_2D = 41
SOBOL_POINTS = 4096
# Elements per block of search points: small enough to stay in cache (the screen is bound
# by memory traffic, not arithmetic).
_CHUNK_ELEMENTS = 200_000


class Candidate(tuple):
    """(objective, theta (m,), c_free (k_free,)) for one scanned point."""


def theta_candidates(ranges: list[tuple[float, float]], seed: int, *,
                     log_scale: list[bool] | None = None,
                     points: int = SOBOL_POINTS) -> np.ndarray:
    """Points to scan, shape (G, m), inside the given per-parameter ranges.

    A full grid for one or two parameters; a scrambled Sobol sequence of ``points`` (rounded
    up to a power of two) for more. ``log_scale[i]`` spaces parameter i log-uniformly.
    """
    m = len(ranges)
    if m == 0:
        return np.zeros((1, 0))
    log_scale = log_scale or [False] * m
    lo = np.array([math.log(r[0]) if lg else r[0] for r, lg in zip(ranges, log_scale)])
    hi = np.array([math.log(r[1]) if lg else r[1] for r, lg in zip(ranges, log_scale)])
    if m == 1:
        unit = np.linspace(0.0, 1.0, GRID_1D)[:, None]
    elif m == 2:
        a, b = np.meshgrid(np.linspace(0, 1, GRID_2D), np.linspace(0, 1, GRID_2D), indexing="ij")
        unit = np.stack([a.ravel(), b.ravel()], axis=1)
    else:
        from scipy.stats import qmc  # imported here: scipy.stats is slow to import
        unit = qmc.Sobol(d=m, scramble=True, seed=seed).random_base2(
            max(1, math.ceil(math.log2(points))))
    out = lo + unit * (hi - lo)
    return np.where(np.array(log_scale)[None, :], np.exp(out), out)


def _nnls_batched(gram: np.ndarray, rhs: np.ndarray, tt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact NNLS for a batch of small problems by enumerating active sets.

    The NNLS optimum is the unconstrained least-squares solution on its own support, and any
    support whose solution is non-negative is feasible, so the best feasible support wins.
    gram (G, k, k), rhs (G, k), tt (G,) -> (c (G, k), residual sum of squares (G,)).
    """
    g, k = rhs.shape
    best_c = np.zeros((g, k))
    best_ss = tt.copy()
    eye = np.eye(k)
    for size in range(1, k + 1):
        for subset in combinations(range(k), size):
            idx = np.array(subset)
            sub = gram[:, idx[:, None], idx[None, :]]
            ridge = 1e-12 * np.trace(sub, axis1=1, axis2=2)[:, None, None] * eye[:size, :size]
            try:
                c = np.linalg.solve(sub + ridge, rhs[:, idx][..., None])[..., 0]
            except np.linalg.LinAlgError:
                continue
            ss = tt - np.einsum("gk,gk->g", c, rhs[:, idx])
            better = np.all(c >= 0, axis=1) & (ss < best_ss) & np.isfinite(ss)
            if better.any():
                full = np.zeros((int(better.sum()), k))
                full[:, idx] = c[better]
                best_c[better] = full
                best_ss[better] = ss[better]
    return best_c, best_ss


def screen(problem: Problem, thetas: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Score every theta in ``thetas`` (G, m_free).

    Returns (objective (G,), c_free (G, k_free)); the objective is +inf where the law cannot
    represent the data at that theta.
    """
    law = problem.law
    k = len(problem.lin_names)
    free_lin = problem.free_lin
    fixed_lin = [j for j in range(k) if j not in free_lin]
    n = len(y)
    out_obj = np.full(len(thetas), np.inf)
    out_c = np.zeros((len(thetas), len(free_lin)))
    chunk = max(1, _CHUNK_ELEMENTS // max(1, n * k))
    inv_y = 1.0 / y
    log_y = np.log(y)
    signed = bool(np.any(problem.signs < 0))
    all_free = len(free_lin) == k
    d = problem.delta
    for start in range(0, len(thetas), chunk):
        block = thetas[start:start + chunk]
        full = np.repeat(problem.theta_fixed[None, :], len(block), axis=0)
        full[:, problem.free_nl] = block
        # Overflow and 0 * inf give inf/nan here; such points score +inf below.
        with np.errstate(all="ignore"):
            phi = np.exp(law.log_basis_grid(full, problem.x))
            if signed:
                phi *= problem.signs[None, None, :]
            fixed_part = None
            for j in fixed_lin:
                term = np.exp(problem.gamma_fixed[j]) * phi[:, :, j]
                fixed_part = term if fixed_part is None else fixed_part + term
            free = phi if all_free else phi[:, :, free_lin]
            # NNLS on relative residuals: design phi_j / y, target (y - fixed) / y.
            design = free * inv_y[None, :, None]
            # Batched matmul, not einsum: several times faster for these shapes.
            design_t = design.transpose(0, 2, 1)
            gram = design_t @ design
            if fixed_part is None:
                rhs = np.einsum("gnk->gk", design)
                tt = np.full(len(block), float(n))
            else:
                target = 1.0 - fixed_part * inv_y[None, :]
                rhs = (design_t @ target[:, :, None])[:, :, 0]
                tt = np.einsum("gn,gn->g", target, target)
            # Unit-norm columns (from the Gram diagonal) keep the small solves well scaled.
            norms = np.sqrt(np.einsum("gkk->gk", gram))
            norms = np.where((norms > 0) & np.isfinite(norms), norms, 1.0)
            gram = gram / (norms[:, :, None] * norms[:, None, :])
            rhs = rhs / norms
            c, _ = _nnls_batched(gram, rhs, tt) if free_lin else (np.zeros((len(block), 0)), tt)
            c = c / norms
            pred = (free @ c[:, :, None])[:, :, 0]
            if fixed_part is not None:
                pred += fixed_part
            r = np.log(pred) - log_y[None, :]
            a = np.abs(r)
            obj = np.where(a <= d, 0.5 * r * r, d * a - 0.5 * d * d).sum(axis=1)
            obj = np.where(np.all(pred > 0, axis=1) & np.isfinite(obj), obj, np.inf)
        out_obj[start:start + chunk] = obj
        out_c[start:start + chunk] = c
    return out_obj, out_c


def pick_starts(obj: np.ndarray, thetas: np.ndarray, ranges: list[tuple[float, float]],
                count: int) -> list[int]:
    """Indices of up to ``count`` best finite points, at least 5% of the range apart."""
    order = np.argsort(obj, kind="stable")
    span = np.array([max(hi - lo, 1e-12) for lo, hi in ranges]) if ranges else np.zeros(0)
    chosen: list[int] = []
    if count >= 1:
        # The greedy choice below, one array operation per start chosen: a point is taken
        # when it is the best finite one not within 5% of a start already taken
        # (|a - b| = |b - a| exactly, so the distances are those of the loop).
        stop = np.flatnonzero(~np.isfinite(obj[order]))
        finite = order[:stop[0]] if stop.size else order
        blocked = np.zeros(len(obj), dtype=bool)
        while len(chosen) < count:
            free = finite[~blocked[finite]]
            if free.size == 0:
                break
            i = int(free[0])
            chosen.append(i)
            blocked |= ~(np.max(np.abs(thetas - thetas[i]) / span, axis=1, initial=0.0) > 0.05)
        return chosen
    for i in order:
        if not np.isfinite(obj[i]):
            break
        if all(np.max(np.abs(thetas[i] - thetas[j]) / span, initial=0.0) > 0.05 for j in chosen):
            chosen.append(int(i))
        if len(chosen) == count:
            break
    return chosen


def local_minima(obj: np.ndarray, thetas: np.ndarray, ranges: list[tuple[float, float]],
                 count: int, *, log_scale: list[bool] | None = None) -> list[int]:
    """Indices of up to ``count`` scanned points that are the lowest of their neighbourhood
    (best first): one per basin of the screen, at the scan's resolution.

    A point is kept when no scanned point within ``radius`` of it (Chebyshev distance in the
    unit cube of the search ranges, log-spaced where the search is) scores lower. The radius is
    1.5 grid steps for a full grid (so the 8 neighbours in 2-D) and twice the mean spacing
    G^(-1/m) of a quasi-random scan. Only the best 256 finite points are candidates.
    """
    m = thetas.shape[1] if thetas.ndim == 2 else 0
    finite = np.flatnonzero(np.isfinite(obj))
    if m == 0 or finite.size == 0:
        return [int(finite[np.argmin(obj[finite])])] if finite.size else []
    log_scale = log_scale or [False] * m
    lo = np.array([math.log(r[0]) if lg else r[0] for r, lg in zip(ranges, log_scale)])
    hi = np.array([math.log(r[1]) if lg else r[1] for r, lg in zip(ranges, log_scale)])
    t = np.where(np.array(log_scale)[None, :], np.log(np.abs(thetas) + 1e-300), thetas)
    unit = (t - lo) / np.maximum(hi - lo, 1e-300)
    g = len(thetas)
    steps = {1: GRID_1D - 1, 2: GRID_2D - 1}.get(m)
    radius = 1.5 / steps if steps else 2.0 * g ** (-1.0 / m)
    cand = finite[np.argsort(obj[finite], kind="stable")][:256]
    pts = unit[finite]
    keep: list[int] = []
    for i in cand:
        near = np.max(np.abs(pts - unit[i]), axis=1) <= radius
        if not np.any(obj[finite][near] < obj[i]):
            keep.append(int(i))
            if len(keep) == count:
                break
    return keep


def screen_weighted(problem: Problem, thetas: np.ndarray, weights: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`screen` of a few thetas (K, m_free) for many weighted copies of the problem.

    ``weights`` (B, n) counts point i ``weights[b, i]`` times in problem b (a bootstrap
    resample), so each (b, theta) pair gets its own exact NNLS coefficients. Returns
    (objective (B, K) in the scipy convention of :func:`screen`, c_free (B, K, k_free));
    +inf where the law cannot represent the data at that theta.
    """
    law = problem.law
    k = len(problem.lin_names)
    free_lin = problem.free_lin
    fixed_lin = [j for j in range(k) if j not in free_lin]
    w = np.asarray(weights, dtype=float)
    nb, n = w.shape
    nk, kf = len(thetas), len(free_lin)
    y = np.exp(problem.log_y)
    inv_y = 1.0 / y
    d = problem.delta
    full = np.repeat(problem.theta_fixed[None, :], nk, axis=0)
    full[:, problem.free_nl] = thetas
    with np.errstate(all="ignore"):
        phi = np.exp(law.log_basis_grid(full, problem.x))
        if np.any(problem.signs < 0):
            phi *= problem.signs[None, None, :]
        fixed_part = np.zeros((nk, n))
        for j in fixed_lin:
            fixed_part += np.exp(problem.gamma_fixed[j]) * phi[:, :, j]
        free = phi[:, :, free_lin]
        design = free * inv_y[None, :, None]                       # (K, n, kf)
        target = 1.0 - fixed_part * inv_y[None, :]                 # (K, n)
        # Weighted normal equations of every (draw, theta) pair as one matrix product each.
        outer = (design[:, :, :, None] * design[:, :, None, :]).transpose(1, 0, 2, 3)
        gram = (w @ outer.reshape(n, -1)).reshape(nb, nk, kf, kf)
        rhs = (w @ (design * target[:, :, None]).transpose(1, 0, 2).reshape(n, -1)
               ).reshape(nb, nk, kf)
        tt = w @ (target * target).T                               # (B, K)
        norms = np.sqrt(np.einsum("bgkk->bgk", gram))
        norms = np.where((norms > 0) & np.isfinite(norms), norms, 1.0)
        gram = gram / (norms[..., :, None] * norms[..., None, :])
        rhs = rhs / norms
        if kf:
            c, _ = _nnls_batched(gram.reshape(-1, kf, kf), rhs.reshape(-1, kf), tt.ravel())
            c = c.reshape(nb, nk, kf) / norms
        else:
            c = np.zeros((nb, nk, 0))
        pred = np.einsum("gni,bgi->bgn", free, c) + fixed_part[None]
        r = np.log(pred) - problem.log_y[None, None, :]
        a = np.abs(r)
        h = np.where(a <= d, 0.5 * r * r, d * a - 0.5 * d * d)
        obj = np.einsum("bgn,bn->bg", h, w)
        obj = np.where(np.all(pred > 0, axis=2) & np.isfinite(obj), obj, np.inf)
    return obj, c
