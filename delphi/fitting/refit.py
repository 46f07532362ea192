"""Warm-started refits of a law already fitted: many weighted problems refined at once.

A bootstrap draw, a leave-one-out fold or a backtest fold is the full-data problem with
each point counted ``w_i`` times (0 = left out, 2 = drawn twice), so its optimum is usually
close to the full-data optimum. The global search (:mod:`delphi.fitting.search`) has
already run once, on the full data; each refit starts at that optimum and refines locally.

The refinement is BFGS (Nocedal & Wright 2006, Alg. 6.1) on the same summed Huber
objective and analytic gradient as :mod:`delphi.fitting.objective`, run for a whole batch of
weight vectors with numpy (one array operation per step for every draw), with an
Armijo backtracking line search, bounds by projection, and an initial inverse Hessian from
the iteratively-reweighted Gauss-Newton matrix ``J' diag(w min(1/delta, 1/|r|)) J`` (the IRLS
approximation of the Huber Hessian, Holland & Welsch 1977). Draws that do not converge, or
that end on a bound, are finished one by one with L-BFGS-B (:func:`refine_one`), so the batch
only ever speeds things up. Each draw's arithmetic involves only its own row, so a draw's
result does not depend on which other draws share its batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, minimize

from .objective import Problem

__all__ = ["WeightedBatch", "StackedProblems", "stack_key", "refine_batch", "refine_one",
           "refine_least_squares", "weighted_objective", "MAX_ITER"]

#: refine_batch's default cap on iterations.
MAX_ITER = 200
_ARMIJO = 1e-4
_MAX_HALVINGS = 30
# Line search: after the first trial, up to _LS_TRIALS halvings in one evaluation while
# they hold at most _LS_ELEMENTS residuals (rows x points x trials).
_LS_TRIALS = 8
_LS_ELEMENTS = 4096
_HALVES = 0.5 ** np.arange(_MAX_HALVINGS + 1)
# A draw has converged when an iteration lowers the (scaled) objective by less than this,
# relative, and its scale-free gradient is small.
_FTOL = 1e-14
_GTOL = 1e-8
_GTOL_STALLED = 1e-6


@dataclass
class WeightedBatch:
    """Refined optima of a batch of weighted problems.

    Attributes
    ----------
    z: internal parameter vectors, shape (B, p) (see :class:`~delphi.fitting.objective.Problem`).
    objective: summed Huber objective (scipy convention) of each draw at ``z``, shape (B,).
    converged: whether each draw met the tolerances in the batch (others were polished by
        L-BFGS-B), shape (B,).
    iterations: batch iterations run.
    """

    z: np.ndarray
    objective: np.ndarray
    converged: np.ndarray
    iterations: int


def stack_key(problem: Problem):
    """What problems must share to be refined in one :class:`StackedProblems` batch (law,
    points, free and fixed parameters, delta, which derivatives can be non-zero), or None when
    the law has no stacked basis (:meth:`delphi.laws.Law.stack_inputs`)."""
    law = problem.law
    if getattr(law, "stack_inputs", None) is None:
        return None
    _, d = law.log_basis(problem.theta_fixed, problem.x)
    nonzero = np.any(d != 0, axis=tuple(range(d.ndim - 2)))
    return (law.name, id(law), len(problem.log_y), tuple(problem.free_lin),
            tuple(problem.free_nl), problem.gamma_fixed.tobytes(),
            problem.theta_fixed.tobytes(), float(problem.delta), nonzero.tobytes())


class StackedProblems:
    """Problems of one law with the same :func:`stack_key` (their own inputs and losses),
    refined in one batch: row b of a batch belongs to problem ``member[b]``.

    Each row's arithmetic is the one :func:`refine_batch` does for that problem alone, so the
    results are bit-identical; only the per-iteration Python overhead is shared (the
    (Mis)Fitting ladder's 119 completions: one global search each, a few starts of a
    10-60 point problem, where the overhead is the cost).
    """

    def __init__(self, problems) -> None:
        p0 = problems[0]
        self.law, self.delta = p0.law, p0.delta
        self.free_lin, self.free_nl, self.n_free = p0.free_lin, p0.free_nl, p0.n_free
        self.gamma_fixed, self.theta_fixed, self.signs = p0.gamma_fixed, p0.theta_fixed, p0.signs
        self.log_y = np.stack([p.log_y for p in problems])
        self.basis_inputs, d = p0.law.stack_inputs([p.x for p in problems])
        # As _evaluate does for one problem: the pattern of derivatives that can be non-zero
        # (equal for all members: stack_key), and the derivatives with non-finite ones as 0.
        self.nonzero = np.any(d[0] != 0, axis=0)
        clean = np.where(np.isfinite(d), d, 0.0)
        self.dcols = {(j, i): np.ascontiguousarray(clean[:, :, j, i])
                      for j in range(d.shape[2]) for i in range(d.shape[3])}


def _params(problem: Problem, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gamma (B, k), theta (B, m)) of internal parameter rows z (B, p)."""
    b = z.shape[0]
    nk = len(problem.free_lin)
    gamma = np.repeat(problem.gamma_fixed[None, :], b, axis=0)
    theta = np.repeat(problem.theta_fixed[None, :], b, axis=0)
    gamma[:, problem.free_lin] = z[:, :nk]
    theta[:, problem.free_nl] = z[:, nk:]
    return gamma, theta


def _residuals(problem, gamma, logphi, log_y, weights_too: bool = True):
    """(log residuals r (B, n), each term's share of the prediction w (k arrays (B, n)) or
    None, rows whose prediction is positive everywhere ok (B,))."""
    k = logphi.shape[2]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        terms = []
        for j in range(k):
            t = gamma[:, j:j + 1] + logphi[:, :, j]
            terms.append(np.where(np.isfinite(t), t, -np.inf))
        m = terms[0]
        for t in terms[1:]:
            m = np.maximum(m, t)
        m = np.where(np.isfinite(m), m, 0.0)
        e = [problem.signs[j] * np.exp(terms[j] - m) for j in range(k)]
        s = e[0]
        for ej in e[1:]:
            s = s + ej
        pos = s > 0
        ok = np.all(pos, axis=1)
        s_safe = np.where(pos, s, 1.0)
        r = m + np.log(s_safe) - log_y
        w = [ej / s_safe for ej in e] if weights_too else None
    return r, w, ok


def _evaluate(problem: Problem, z: np.ndarray, weights: np.ndarray, member=None):
    """Scaled objective f (B,), gradient (B, p), log residuals r (B, n), Jacobian (B, n, p).

    f is the objective of :meth:`Problem.scaled_objective_and_grad` with point i counted
    ``weights[b, i]`` times; +inf where the law's prediction is not positive. The law has few
    terms, so the log-sum-exp runs over them as a Python loop of (B, n) array operations
    (reductions over a short last axis are several times slower in numpy). With ``member``
    (B,), ``problem`` is a :class:`StackedProblems` and row b is its problem ``member[b]``.
    """
    gamma, theta = _params(problem, z)
    const = None if member is not None else _constant_jacobian(problem)
    if member is not None:
        logphi = problem.law.log_basis_stacked(theta, problem.basis_inputs, member)
        log_y = problem.log_y[member]
    elif const is not None:
        logphi = problem.law.log_basis_values(theta, problem.x)
        log_y = problem.log_y[None, :]
    else:
        logphi, dlogphi = problem.law.log_basis_batch(theta, problem.x)
        log_y = problem.log_y[None, :]
    k = logphi.shape[2]
    r, w, ok = _residuals(problem, gamma, logphi, log_y)
    if const is not None:
        return _huber(problem, r, _constant_jac(problem, const, w, r), weights, ok)
    if member is not None:
        cols = [w[j] for j in problem.free_lin]
        for i in problem.free_nl:
            col = None
            for j in range(k):
                if problem.nonzero[j, i]:
                    term = w[j] * problem.dcols[j, i][member]
                    col = term if col is None else col + term
            cols.append(col if col is not None else np.zeros_like(r))
        return _huber(problem, r, _stack(cols, r), weights, ok)
    # Which (term, parameter) derivatives can be non-zero: from one row when the law
    # returned the same derivative for every draw (a broadcast view).
    shared = dlogphi.strides[0] == 0
    probe = dlogphi[0] if shared else dlogphi
    nonzero = np.any(probe != 0, axis=tuple(range(probe.ndim - 2)))
    # A shared derivative is cleaned once, on its one row (the same numbers broadcast).
    clean = np.where(np.isfinite(probe), probe, 0.0)[None] if shared else None
    cols = [w[j] for j in problem.free_lin]
    for i in problem.free_nl:
        col = None
        for j in range(k):
            if nonzero[j, i]:
                if shared:
                    term = w[j] * clean[:, :, j, i]
                else:
                    dj = dlogphi[:, :, j, i]
                    term = w[j] * np.where(np.isfinite(dj), dj, 0.0)
                col = term if col is None else col + term
        cols.append(col if col is not None else np.zeros_like(r))
    return _huber(problem, r, _stack(cols, r), weights, ok)


@dataclass
class _ConstantJacobian:
    """A law's theta-free derivative, prepared once per problem: for each free non-linear
    parameter the terms whose derivative can be non-zero and those derivatives (non-finite
    ones as 0), shape (n,) each; ``single`` when every such parameter has exactly one (then
    its Jacobian columns are one product of arrays)."""

    terms: list[list[int]]
    cols: list[list[np.ndarray]]
    single: np.ndarray | None    # (n, m_free): the one derivative of each parameter
    term_of: list[int]


def _constant_jacobian(problem: Problem) -> _ConstantJacobian | None:
    """The problem's :class:`_ConstantJacobian` (cached on it), or None when the law's
    derivative depends on theta (:meth:`delphi.laws.Law.constant_derivative`)."""
    cached = problem.__dict__.get("_refit_constant_jacobian", False)
    if cached is not False:
        return cached
    d = problem.law.constant_derivative(problem.x)
    out = None
    if d is not None:
        # The numbers _evaluate takes from a shared derivative: its non-zero pattern and its
        # derivatives with non-finite ones as 0.
        d = np.asarray(d, dtype=float)
        nonzero = np.any(d != 0, axis=0)
        clean = np.where(np.isfinite(d), d, 0.0)
        terms = [[j for j in range(d.shape[1]) if nonzero[j, i]] for i in problem.free_nl]
        cols = [[clean[:, j, i] for j in js] for i, js in zip(problem.free_nl, terms)]
        single = None
        if terms and all(len(js) == 1 for js in terms):
            single = np.stack([c[0] for c in cols], axis=1)
        out = _ConstantJacobian(terms, cols, single, [js[0] if js else -1 for js in terms])
    problem.__dict__["_refit_constant_jacobian"] = out
    return out


def _constant_jac(problem: Problem, const: _ConstantJacobian, w: list, r: np.ndarray
                  ) -> np.ndarray:
    """The Jacobian (B, n, p) from the terms' weights ``w`` (k arrays (B, n)) and a constant
    derivative: the numbers of the general path (the same products and sums, in the same
    order), written into one array instead of stacked from columns."""
    nk, nfree = len(problem.free_lin), len(problem.free_nl)
    jac = np.empty(r.shape + (nk + nfree,))
    for c, j in enumerate(problem.free_lin):
        jac[:, :, c] = w[j]
    if const.single is not None:
        # One term per parameter: all the non-linear columns in one product.
        jac[:, :, nk:] = np.stack([w[j] for j in const.term_of], axis=2) * const.single
        return jac
    for c, (js, cs) in enumerate(zip(const.terms, const.cols)):
        col = None
        for j, dcol in zip(js, cs):
            term = w[j] * dcol
            col = term if col is None else col + term
        jac[:, :, nk + c] = col if col is not None else 0.0
    return jac


def _stack(cols: list, r: np.ndarray) -> np.ndarray:
    return np.stack(cols, axis=2) if cols else np.zeros(r.shape + (0,))


def _huber(problem, r, jac, weights, ok):
    """The end of :func:`_evaluate`: (f, g, r, jac) from the log residuals and the Jacobian."""
    d = problem.delta
    # A trial step far outside the data's range overflows here; it scores +inf (rejected).
    with np.errstate(over="ignore", invalid="ignore"):
        f = _huber_value(r, d, weights)
        psi = weights * np.clip(r / d, -1.0, 1.0)
        g = (psi[:, None, :] @ jac)[:, 0, :]
    f = np.where(ok & np.isfinite(f), f, np.inf)
    return f, g, r, jac


def _huber_value(r, d, weights):
    a = np.abs(r)
    return np.sum(weights * np.where(a <= d, 0.5 * r * r / d, a - 0.5 * d), axis=1)


def weighted_objective(problem: Problem, z: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Summed Huber objective (scipy convention) of each weighted problem: z (B, p),
    weights (B, n) -> (B,).

    The objective of :func:`_evaluate`, bit for bit, without the gradient and Jacobian (the
    guard's basin check scores B x 16 probes: the Jacobian was most of its cost)."""
    z, weights = np.atleast_2d(z), np.atleast_2d(weights)
    gamma, theta = _params(problem, z)
    logphi = problem.law.log_basis_values(theta, problem.x)
    r, _, ok = _residuals(problem, gamma, logphi, problem.log_y[None, :], weights_too=False)
    with np.errstate(over="ignore", invalid="ignore"):
        f = _huber_value(r, problem.delta, weights)
    return np.where(ok & np.isfinite(f), f, np.inf) * problem.delta


def _lohi(ibounds) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([b[0] if b[0] is not None else -np.inf for b in ibounds], dtype=float)
    hi = np.array([b[1] if b[1] is not None else np.inf for b in ibounds], dtype=float)
    return lo, hi


def _scale(jac: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per-parameter scale sum_i w_i |dr_i/dz| (B, p): the gradient divided by it is
    scale-free (see ``engine._stationarity``)."""
    return np.maximum((weights[:, None, :] @ np.abs(jac))[:, 0, :], 1e-300)


def _reduced_step(z: np.ndarray, g: np.ndarray, hinv: np.ndarray, lo, hi, member=None
                  ) -> np.ndarray:
    """Quasi-Newton steps (B, p) with the parameters held at a bound taken out.

    A parameter at a bound whose gradient pushes it further out is held: the step on the
    others is the Newton step of the reduced problem, whose inverse Hessian is the Schur
    complement hinv_ff - hinv_fa hinv_aa^-1 hinv_af (the inverse of the Hessian's free
    block). Clipping the full step instead keeps the coupling to the held parameter and
    zig-zags: a refit whose optimum sits on a bound then took hundreds of iterations.
    Rows of different ``member`` problems (stacked) are never solved together, so that a
    singular block falls back for its own problem only, as it would alone.
    """
    d = -(hinv @ g[:, :, None])[:, :, 0]
    held = ((z <= lo) & (g > 0)) | ((z >= hi) & (g < 0))
    rows = np.flatnonzero(held.any(axis=1) & ~held.all(axis=1))
    d[held.all(axis=1)] = 0.0
    if rows.size == 0:
        return d
    # One group per (held pattern, member): the pattern's bits and the member in one
    # integer (a 1-D unique; the same groups as the rows themselves would give).
    hr = held[rows]
    key = hr.astype(np.int64) @ (np.int64(1) << np.arange(z.shape[1], dtype=np.int64))
    if member is not None:
        key = key + (np.asarray(member, dtype=np.int64)[rows] << np.int64(z.shape[1]))
    _, first, which = np.unique(key, return_index=True, return_inverse=True)
    for k, at in enumerate(first):
        sel = rows[which == k]
        pat = hr[at]
        a, f = np.flatnonzero(pat), np.flatnonzero(~pat)
        h = hinv[sel]
        hff, hfa, haa = h[:, f][:, :, f], h[:, f][:, :, a], h[:, a][:, :, a]
        try:
            red = hff - hfa @ np.linalg.solve(haa, hfa.transpose(0, 2, 1))
        except np.linalg.LinAlgError:
            red = hff
        step = np.zeros((len(sel), z.shape[1]))
        step[:, f] = -(red @ g[sel][:, f, None])[:, :, 0]
        d[sel] = step
    return d


def refine_batch(problem: Problem, z0: np.ndarray, weights: np.ndarray, ibounds, *,
                 max_iter: int = MAX_ITER, race: bool = False, member=None) -> WeightedBatch:
    """Refine every weighted problem from ``z0`` (p,) or (B, p) by batched BFGS.

    Parameters
    ----------
    problem: the full-data problem (law, inputs, log losses, delta, free/fixed parameters).
    z0: start in internal coordinates, usually the full-data optimum.
    weights: (B, n) non-negative point multiplicities, one row per refit.
    ibounds: internal bounds, as passed to L-BFGS-B.
    max_iter: batch iterations before the remaining draws go to L-BFGS-B.
    race: the rows are starts of one problem (a global search), not separate problems: once
        one has converged at iteration t, the others get until iteration max(2t, t + 30) to
        go below it, and those still above it then stop (unconverged).
    member: (B,) with a :class:`StackedProblems` ``problem``: the problem of each row. Rows
        are refined (and raced, with ``race``) within their own problem, bit-identically to a
        call on that problem alone; ``iterations`` is then the largest over the problems.

    Returns
    -------
    WeightedBatch.
    """
    weights = np.asarray(weights, dtype=float)
    nb, p = weights.shape[0], problem.n_free
    lo, hi = _lohi(ibounds)
    z = np.clip(np.broadcast_to(np.asarray(z0, float), (nb, p)).copy(), lo, hi)
    if member is not None:
        member = np.asarray(member, dtype=np.int64)
    f, g, r, jac = _evaluate(problem, z, weights, member)
    if p == 0:  # every parameter fixed: nothing to refine
        return WeightedBatch(z=z, objective=f * problem.delta, converged=np.isfinite(f),
                             iterations=0)
    # Initial inverse Hessian: IRLS Gauss-Newton matrix of the scaled Huber objective.
    with np.errstate(all="ignore"):  # an infeasible start gives inf/nan here: identity below
        irls = weights / np.maximum(np.abs(r), problem.delta)
        h = (jac.transpose(0, 2, 1) * irls[:, None, :]) @ jac
        ridge = 1e-10 * np.trace(h, axis1=1, axis2=2)[:, None, None] * np.eye(p)[None] + 1e-300
        try:
            hinv = np.linalg.inv(h + ridge)
        except np.linalg.LinAlgError:
            hinv = np.repeat(np.eye(p)[None], nb, axis=0)
            # Stacked problems: each one's own inverse, or its identity, as alone.
            for mm in (np.unique(member) if member is not None else ()):
                sel = np.flatnonzero(member == mm)
                try:
                    hinv[sel] = np.linalg.inv(h[sel] + ridge[sel])
                except np.linalg.LinAlgError:
                    pass
    bad = ~np.all(np.isfinite(hinv), axis=(1, 2))
    hinv[bad] = np.eye(p)
    # The gradient's scale for the stationarity test, from the start (it barely moves).
    scale = _scale(jac, weights)
    active = np.isfinite(f)
    converged = np.zeros(nb, dtype=bool)
    stalls = np.zeros(nb, dtype=int)
    first_converged = None
    if member is not None:
        n_members = int(member.max()) + 1 if nb else 0
        first_of = np.full(n_members, -1, dtype=np.int64)
    it = 0
    eye = np.eye(p)
    while active.any() and it < max_iter:
        it += 1
        idx = np.flatnonzero(active)
        za, fa, ga, ha, wa = z[idx], f[idx], g[idx], hinv[idx], weights[idx]
        ma = None if member is None else member[idx]
        d = _reduced_step(za, ga, ha, lo, hi, ma)
        # Project: no movement out of the box along a bound already reached.
        d = np.where((za <= lo) & (d < 0) | (za >= hi) & (d > 0), 0.0, d)
        slope = (ga * d).sum(axis=1)
        uphill = slope >= 0  # not a descent direction: restart from steepest descent
        if uphill.any():
            d[uphill] = -ga[uphill]
            ha[uphill] = eye
            d = np.where((za <= lo) & (d < 0) | (za >= hi) & (d > 0), 0.0, d)
            slope = (ga * d).sum(axis=1)
        t = np.ones(len(idx))
        # No decrease is possible at machine precision: the draw is at its optimum.
        flat = -slope <= _FTOL * np.maximum(np.abs(fa), 1.0)
        accepted = flat.copy()
        z_new = za.copy()
        f_new, g_new = fa.copy(), ga.copy()
        halvings = 0
        while halvings < _MAX_HALVINGS:
            todo = np.flatnonzero(~accepted)
            if todo.size == 0:
                break
            # After the first trial, a few small rows left (a batch's stragglers, whose
            # steps are often halved many times, where each call's cost is its Python
            # overhead): their next halvings are evaluated in one call, the first that
            # passes kept. Each trial is the same arithmetic as in a call of its own
            # (t = 0.5^j exactly, rows independent), so only the number of calls changes.
            k = 1
            if halvings:
                k = max(1, min(_LS_TRIALS, _MAX_HALVINGS - halvings,
                               _LS_ELEMENTS // (todo.size * wa.shape[1])))
            halvings += k
            tk = (t[todo][None, :] * _HALVES[:k, None]).ravel()          # (k R,), j-major
            rows = np.tile(todo, k)
            trial = np.clip(za[rows] + tk[:, None] * d[rows], lo, hi)
            ft, gt, _, _ = _evaluate(problem, trial, wa[rows], None if ma is None else ma[rows])
            ok = ft <= fa[rows] + _ARMIJO * tk * np.minimum(slope[rows], 0.0)
            ok &= np.isfinite(ft)
            ok = ok.reshape(k, todo.size)
            first = np.argmax(ok, axis=0)                  # the first trial that passes
            got = ok[first, np.arange(todo.size)]
            pick = first[got] * todo.size + np.flatnonzero(got)
            hit = todo[got]
            z_new[hit], f_new[hit], g_new[hit] = trial[pick], ft[pick], gt[pick]
            accepted[hit] = True
            t[todo[~got]] *= _HALVES[k]
        s = z_new - za
        yv = g_new - ga
        sy = (s * yv).sum(axis=1)
        # np.linalg.norm(., axis=1)'s own arithmetic, without its dispatch (a sizeable share
        # of an iteration of a one-row batch).
        norms = np.sqrt(np.add.reduce(s * s, axis=1)) * np.sqrt(np.add.reduce(yv * yv, axis=1))
        upd = accepted & (sy > 1e-12 * norms)
        if upd.any():
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                rho = 1.0 / sy[upd]
                su, yu = s[upd], yv[upd]
                v = eye[None] - rho[:, None, None] * (su[:, :, None] * yu[:, None, :])
                ha[upd] = (v @ ha[upd] @ v.transpose(0, 2, 1)
                           + rho[:, None, None] * (su[:, :, None] * su[:, None, :]))
            # A near-singular update overflows: that draw restarts from the identity.
            ha[~np.all(np.isfinite(ha), axis=(1, 2))] = eye
        hinv[idx] = ha
        decrease = fa - f_new
        small = (decrease <= _FTOL * np.maximum(np.abs(f_new), 1.0)) | flat
        z[idx[accepted]] = z_new[accepted]
        f[idx[accepted]] = f_new[accepted]
        g[idx[accepted]] = g_new[accepted]
        # Scale-free projected gradient.
        gp = g[idx] / scale[idx]
        gp = np.where((z[idx] <= lo) & (g[idx] > 0) | (z[idx] >= hi) & (g[idx] < 0), 0.0, gp)
        gmax = np.max(np.abs(gp), axis=1)
        stationary = gmax < _GTOL
        stalls[idx] = np.where(small | ~accepted, stalls[idx] + 1, 0)
        stalled = stalls[idx] >= 2
        done = stationary | stalled
        # A draw that stalls (no more progress at machine precision) counts as converged
        # when its scale-free gradient meets the engine's stationarity test.
        converged[idx[done]] = stationary[done] | (gmax[done] < _GTOL_STALLED)
        active[idx[done]] = False
        if race and converged.any() and member is None:
            first = it if first_converged is None else first_converged
            first_converged = first
            if it >= max(2 * first, first + 30):
                best = float(f[converged].min())
                active &= f < best * (1 - 1e-9)
        elif race and converged.any():
            # The same race, problem by problem.
            has = np.zeros(n_members, dtype=bool)
            has[member[converged]] = True
            first_of[has & (first_of < 0)] = it
            judged = has & (it >= np.maximum(2 * first_of, first_of + 30))
            if judged.any():
                best = np.full(n_members, np.inf)
                np.minimum.at(best, member[converged], f[converged])
                active &= ~judged[member] | (f < best[member] * (1 - 1e-9))
    return WeightedBatch(z=z, objective=f * problem.delta, converged=converged, iterations=it)


def refine_one(problem: Problem, z0: np.ndarray, ibounds, *, max_iter: int | None = None
               ) -> tuple[np.ndarray, float, bool, str]:
    """L-BFGS-B from z0, restarted (fresh curvature memory) while it keeps improving.

    ``max_iter`` caps the iterations of a single run (a probe: no restarts).
    Returns (z, objective in the scipy convention, success, scipy's message).
    """
    if len(z0) == 0:  # every parameter fixed: nothing to refine
        return z0, problem.objective(z0), True, "nothing to fit: every parameter is fixed"
    z, best, success, message = z0, math.inf, False, "not run"
    for _ in range(4 if max_iter is None else 1):
        res = minimize(problem.scaled_objective_and_grad, z, jac=True, method="L-BFGS-B",
                       bounds=ibounds,
                       options={"maxiter": max_iter or 20000, "maxfun": 2 * (max_iter or 20000),
                                "ftol": 1e-15, "gtol": 1e-11, "maxcor": 30})
        improved = res.fun < best - 1e-13 * max(1.0, abs(best))
        if res.fun <= best:
            z, success, message = res.x, bool(res.success), str(res.message)
            best = float(res.fun)
        if not improved:
            break
    return z, best * problem.delta, success, message


# A trial point whose prediction is not positive gets this log residual on every point:
# far above any real residual, so the trust region rejects the step and shrinks.
_LSQ_INFEASIBLE = 1e3


def refine_least_squares(problem: Problem, z0: np.ndarray, ibounds, *, max_nfev: int = 400
                         ) -> tuple[np.ndarray, float, int, int, str]:
    """Polish ``z0`` by a trust-region Gauss-Newton method on the log residuals.

    ``scipy.optimize.least_squares`` (method ``"trf"``: Branch, Coleman & Li 1999, a
    reflective trust-region method for bounds) with ``loss="huber"`` and ``f_scale=delta``
    minimises exactly the summed Huber objective of :meth:`Problem.objective` (scipy's
    robust loss ``rho(z) = z`` for ``z <= 1`` else ``2 sqrt(z) - 1``, times ``delta^2 / 2``),
    with the analytic Jacobian of :meth:`Problem.residuals_and_jacobian` and its Huber
    reweighting (Triggs et al. 2000). Near an optimum it needs one residual-and-Jacobian
    evaluation per step, where L-BFGS-B (:func:`refine_one`) in a flat valley needs
    hundreds: the polish for an expensive law (the multi-power law on all checkpoints).
    A parameter with a positive lower bound is polished in log coordinates (the same points,
    the Jacobian by the chain rule): the multi-power law's valley along C beta ~ const is a
    hyperbola in (C, beta) and nearly a line in (ln C, ln beta), and the polish from the
    bench case's subsample optimum took 392 evaluations in (C, beta), 194 in logs.
    Tolerances 1e-15 (ftol, xtol, gtol); the caller judges stationarity.

    Returns (z (p,), objective in the scipy convention, evaluations, scipy's status (> 0:
    a tolerance was met; 0: ``max_nfev`` reached, or scipy refused the problem: bounds with
    lower = upper, a Jacobian its SVD cannot take), scipy's message). Raises nothing of its
    own; the returned point is never worse than ``z0`` (the trust region only accepts
    decreases).
    """
    z0 = np.asarray(z0, dtype=float)
    lo, hi = _lohi(ibounds)
    z0 = np.clip(z0, lo, hi)
    if len(z0) == 0:
        return z0, problem.objective(z0), 0, 1, "nothing to fit: every parameter is fixed"
    logs = lo > 0                                  # finite positive lower bound: ln
    ulo, uhi = lo.copy(), hi.copy()
    ulo[logs], uhi[logs] = np.log(lo[logs]), np.log(hi[logs])   # ln inf = inf

    def to_z(u):
        z = u.copy()
        z[logs] = np.exp(u[logs])
        return np.clip(z, lo, hi)

    last: list = [None, None]

    def evaluate(u):
        key = u.tobytes()
        if last[0] != key:
            z = to_z(u)
            r, jz, ok = problem.residuals_and_jacobian(z)
            ju = jz.copy()
            ju[:, logs] *= z[logs]                  # dr/d ln z = z dr/dz
            last[0], last[1] = key, (r, ju, ok)
        return last[1]

    def fun(u):
        r, _, ok = evaluate(u)
        return r if ok and np.all(np.isfinite(r)) else np.full(len(problem.log_y),
                                                                _LSQ_INFEASIBLE)

    def jac(u):
        return evaluate(u)[1]

    u0 = z0.copy()
    u0[logs] = np.log(z0[logs])
    try:
        res = least_squares(fun, np.clip(u0, ulo, uhi), jac=jac, bounds=(ulo, uhi),
                            method="trf", loss="huber", f_scale=problem.delta, x_scale="jac",
                            ftol=1e-15, xtol=1e-15, gtol=1e-15, max_nfev=max_nfev)
    except (ValueError, np.linalg.LinAlgError) as err:
        # Bounds scipy refuses (lower = upper) or a Jacobian its SVD cannot take: status 0,
        # so the caller descends this start another way.
        return z0, problem.objective(z0), 0, 0, f"least squares not run ({err})"
    z = to_z(res.x)
    return z, problem.objective(z), int(res.nfev), int(res.status), str(res.message)
