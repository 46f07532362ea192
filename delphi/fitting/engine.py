"""The one fitting engine that serves every law.

1. Check the problem: enough points, the design varies every input a free parameter needs,
   a fixed floor below every observed loss.
2. Global search over the non-linear parameters with exact non-negative least squares for
   the linear ones (:mod:`delphi.fitting.search`).
3. Refine the best distinct points with L-BFGS-B on the summed Huber objective with its
   analytic gradient, restarting until it stops improving; keep the best.
4. Diagnose: convergence, agreement between starts, parameters at a bound, poorly identified
   directions (near-singular scaled Jacobian), zero residual degrees of freedom.

The recipe follows Besiroglu et al. 2024 (arXiv 2404.10102), who refit Hoffmann et al.'s
Approach 3 with L-BFGS-B from a 4,500-point grid of starts; searching the non-linear
parameters only and solving the linear ones exactly reaches the same optimum far faster.
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..errors import DelphiError, FitError, IdentifiabilityError, LawError
from ..laws import Law, get_law
from ..core import shared_fits as memo
from ..core.parallel import one_blas_thread
from .objective import Problem
from .result import Fit
from .refit import (StackedProblems, WeightedBatch, refine_batch,
                    refine_least_squares, refine_one, stack_key)
from .search import local_minima, pick_starts, screen, theta_candidates

__all__ = ["fit_arrays", "fit_arrays_many", "warm_fits_many", "prepare", "Prepared",
           "safe_start", "basin_probes", "warm_fit_steps", "DEFAULT_DELTA", "REFINE_STARTS"]

#: Huber delta on log residuals (Hoffmann et al. 2022; Besiroglu et al. 2024).
DEFAULT_DELTA = 1e-3
#: Starts a global search refines (fit_arrays' default ``starts``).
REFINE_STARTS = 6
_AGREE_RTOL = 1e-6
# Scale-free stationarity (see _stationarity) below which a start counts as converged.
_STATIONARY = 1e-5
# A direction of the scaled Jacobian this much weaker than the strongest is not identified.
_ILL_CONDITIONED = 1e-6
_SINGULAR = 1e-10


def _number(value, what: str, error: type[Exception] = LawError) -> float:
    """``value`` (a real number, numpy's included) as a float, else ``error`` naming
    ``what``. Neither a string nor a bool is a number here (True would be read as 1)."""
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):
            pass
    raise error(f"{what} must be a number, got {type(value).__name__} {value!r:.60}")


def _mapping(value, what: str, example: str) -> Mapping:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise LawError(f"{what} maps parameter names to values, e.g. {example}; got "
                       f"{type(value).__name__} {value!r:.60}")
    return value


def _resolve(law: Law, fixed: Mapping[str, float] | None,
             bounds: Mapping[str, Sequence[float]] | None) -> tuple[dict, dict]:
    fixed = {str(k): _number(v, f"fixed {k}")
             for k, v in _mapping(fixed, "fixed", "{'E': 1.5}").items()}
    out_bounds: dict[str, tuple[float, float]] = {}
    user_bounds = dict(_mapping(bounds, "bounds", "{'alpha': (0.0, 1.0)}"))
    for name in list(fixed) + list(user_bounds):
        law.param(name)  # raises LawError naming the law's parameters
    for name, pair in user_bounds.items():
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise LawError(f"bounds for {name!r} must be a (lower, upper) pair, got {pair!r}")
    for p in law.params:
        lo, hi = user_bounds.get(p.name, (p.lower, p.upper))
        lo = -math.inf if lo is None else _number(lo, f"the lower bound of {p.name}")
        hi = math.inf if hi is None else _number(hi, f"the upper bound of {p.name}")
        if not lo < hi:
            raise LawError(f"bounds for {p.name!r} must have lower < upper, got ({lo}, {hi})")
        if p.linear and lo < 0:
            raise LawError(f"{p.name!r} is a non-negative coefficient of law {law.name!r}; "
                           f"its lower bound must be >= 0, got {lo}")
        out_bounds[p.name] = (lo, hi)
    for name, value in fixed.items():
        lo, hi = out_bounds[name]
        if not math.isfinite(value):
            raise LawError(f"fixed {name} must be finite, got {value}")
        if not lo <= value <= hi:
            raise LawError(f"fixed {name} = {value:g} is outside its bounds [{lo:g}, {hi:g}]")
    return fixed, out_bounds


def _unidentified(law: Law, names: Sequence[str], free: Sequence[str]) -> list[str]:
    """Free parameters of a term whose input does not vary.

    With the input constant, the term is a constant: its exponent cannot be told apart from
    its coefficient, and the coefficient not from the floor. A term with a fixed exponent and
    a fixed floor is still pinned by a single point.
    """
    hit = [p for p in names if p in free]
    exponent_free = any(not law.param(p).linear for p in hit)
    floor_free = bool(law.floor) and law.floor in free
    if exponent_free:
        return hit
    if floor_free and hit:
        return hit + [law.floor]
    return []


def check_design(law: Law, x: Mapping[str, np.ndarray], y: np.ndarray, labels: Sequence[str],
                  free: Sequence[str], fixed: Mapping[str, float],
                  bounds: Mapping[str, tuple[float, float]]) -> None:
    n_free = len(free)
    if len(y) < n_free:
        raise FitError(f"{len(y)} point{'s' if len(y) != 1 else ''} cannot fit {n_free} free "
                       f"parameters of law {law.name!r} ({', '.join(free)}); add runs or fix "
                       f"parameters")
    for column, names in law.identified_by.items():
        hit = _unidentified(law, names, free)
        if hit and len(np.unique(x[column])) < 2:
            raise IdentifiabilityError(
                f"the ladder cannot identify {', '.join(hit)} of law {law.name!r}: every point "
                f"has the same {column} ({x[column][0]:.4g}); vary {column} or fix "
                f"{' or '.join(hit)}")
    if law.floor:
        # The law never falls below its floor, so a floor at or above an observed loss (fixed,
        # or forced by a lower bound) cannot fit that run.
        floor, what = ((fixed[law.floor], "fixed") if law.floor in fixed
                       else (bounds[law.floor][0], "the lower bound of"))
        bad = np.flatnonzero(y <= floor)
        if bad.size and floor > 0:
            i = bad[np.argmin(y[bad])]
            raise FitError(
                f"{what} {law.floor} = {floor:g} is at or above the observed loss {y[i]:.6g} of "
                f"run {labels[i]!r} ({bad.size} run(s) in all); the law cannot fall below "
                f"{law.floor}")


def _search_ranges(law: Law, problem: Problem, bounds: Mapping[str, tuple[float, float]]):
    ranges = []
    for i in problem.free_nl:
        p = law.params[len(problem.lin_names) + i]
        lo, hi = bounds[p.name]
        s_lo, s_hi = p.search if p.search else (lo, hi)
        s_lo, s_hi = max(s_lo, lo), min(s_hi, hi)
        if not (math.isfinite(s_lo) and math.isfinite(s_hi)) or s_lo >= s_hi:
            s_lo, s_hi = lo, hi
        if not (math.isfinite(s_lo) and math.isfinite(s_hi)):
            raise LawError(f"parameter {p.name!r} of law {law.name!r} needs finite bounds or a "
                           f"search range")
        ranges.append((s_lo, s_hi))
    return ranges


def internal_bounds(problem: Problem, bounds: Mapping[str, tuple[float, float]]):
    out = []
    for i in problem.free_lin:
        lo, hi = bounds[problem.lin_names[i]]
        out.append((math.log(lo) if lo > 0 else None, math.log(hi) if math.isfinite(hi) else None))
    for i in problem.free_nl:
        lo, hi = bounds[problem.nl_names[i]]
        out.append((lo if math.isfinite(lo) else None, hi if math.isfinite(hi) else None))
    return out


def start_vector(problem: Problem, theta: np.ndarray, c: np.ndarray, y: np.ndarray,
                  ibounds) -> np.ndarray:
    """Internal start from a scanned point; a zero coefficient starts tiny but positive."""
    gamma = np.empty(len(c))
    for a, (j, cj) in enumerate(zip(problem.free_lin, c)):
        if cj > 0:
            gamma[a] = math.log(cj)
        else:  # a term NNLS switched off: start it at 1e-6 of the median loss
            th = problem.theta_fixed.copy()
            th[problem.free_nl] = theta
            logphi = problem.law.log_basis(th, problem.x)[0][:, j]
            gamma[a] = math.log(1e-6 * float(np.median(y))) - float(np.median(logphi))
    z = np.concatenate([gamma, theta])
    lo = np.array([b[0] if b[0] is not None else -np.inf for b in ibounds])
    hi = np.array([b[1] if b[1] is not None else np.inf for b in ibounds])
    return np.clip(z, lo, hi)


def _refine(problem: Problem, z0: np.ndarray, ibounds) -> tuple[np.ndarray, float, bool, str]:
    """L-BFGS-B from z0, restarted (fresh curvature memory) while it keeps improving."""
    return refine_one(problem, z0, ibounds)


def safe_start(problem: Problem, values: Mapping[str, float], ibounds) -> np.ndarray:
    """Internal start vector from parameter values (natural units), inside the bounds.

    A coefficient at 0 (a vanished term, log c = -inf) starts tiny but positive instead.
    """
    lo = np.array([b[0] if b[0] is not None else -np.inf for b in ibounds])
    hi = np.array([b[1] if b[1] is not None else np.inf for b in ibounds])
    z = np.clip(problem.pack(dict(values)), lo, hi)
    k = len(problem.free_lin)
    if not np.all(np.isfinite(z[k:])):
        raise FitError("a warm start needs finite values of the non-linear parameters")
    theta = z[k:]
    return start_vector(problem, theta, np.where(np.isfinite(z[:k]), np.exp(z[:k]), 0.0),
                         np.exp(problem.log_y), ibounds)


def _stationarity(problem: Problem, z: np.ndarray, ibounds, at_bound: Sequence[str] = ()) -> float:
    """Scale-free first-order optimality: the largest |dJ/dz_i| / sum_n |dr_n/dz_i|.

    The gradient of the scaled objective is J^T psi with |psi| <= 1, so each ratio is a
    weighted mean of psi in [-1, 1] and is 0 at a stationary point whatever the parameter's
    units; components pushing against an active bound are ignored, and so are coefficients whose
    term has vanished (at their lower bound 0, reached only asymptotically in log space).
    """
    r, jac, ok = problem.residuals_and_jacobian(z)
    if not ok:
        return math.inf
    _, g = problem.scaled_objective_and_grad(z)
    scale = np.maximum(np.abs(jac).sum(axis=0), 1e-300)
    pg = g / scale
    for i, (lo, hi) in enumerate(ibounds):
        if lo is not None and z[i] <= lo + 1e-12 and g[i] > 0:
            pg[i] = 0.0
        if hi is not None and z[i] >= hi - 1e-12 and g[i] < 0:
            pg[i] = 0.0
    for a, j in enumerate(problem.free_lin):
        if problem.lin_names[j] in at_bound and g[a] >= 0:
            pg[a] = 0.0
    return float(np.max(np.abs(pg), initial=0.0))


def _at_bound(problem: Problem, z: np.ndarray, bounds, y: np.ndarray) -> list[str]:
    hits = []
    gamma, theta = problem.unpack(z)
    logphi = problem.law.log_basis(theta, problem.x)[0]
    for a, j in enumerate(problem.free_lin):
        name = problem.lin_names[j]
        lo, hi = bounds[name]
        c = math.exp(z[a])
        # A term that matters anywhere is not "at 0" (some terms are 0 on most rows).
        contribution = float(np.max(np.exp(gamma[j] + logphi[:, j])))
        if lo == 0 and contribution < 1e-6 * float(np.median(y)):
            hits.append(name)
        elif (lo > 0 and c <= lo * (1 + 1e-6)) or (math.isfinite(hi) and c >= hi * (1 - 1e-6)):
            hits.append(name)
    k = len(problem.free_lin)
    for a, i in enumerate(problem.free_nl):
        name = problem.nl_names[i]
        lo, hi = bounds[name]
        v = z[k + a]
        if lo > 0 and math.isfinite(hi) and hi > 1e3 * lo:
            # A scale over orders of magnitude (multi-power's C in [1e-6, 1e6]): the distance
            # to a bound is in log space, else 1e-6 of the span would call C = 0.5 "at 1e-6".
            span = math.log(hi / lo)
            lv = math.log(max(v, lo))
            if lv <= math.log(lo) + 1e-6 * span or lv >= math.log(hi) - 1e-6 * span:
                hits.append(name)
            continue
        span = (hi - lo) if math.isfinite(hi - lo) else max(1.0, abs(v))
        if v <= lo + 1e-6 * span or v >= hi - 1e-6 * span:
            hits.append(name)
    return hits


def _identifiability(problem: Problem, z: np.ndarray, free: Sequence[str], at_bound: Sequence[str],
                     n: int, out_cov: dict | None = None) -> tuple[dict[str, float], list[str], list[str]]:
    """Approximate standard errors and weakly identified parameter groups.

    Uses the Jacobian J of the log residuals in the internal coordinates: columns scaled to unit
    norm, its singular values say which directions the data pin down (for coefficients the
    internal coordinate is log c, for exponents the exponent itself).
    Returns (stderr, ill-conditioned groups, singular groups).
    """
    r, jac, ok = problem.residuals_and_jacobian(z)
    if not ok:
        return {}, [], []
    keep = [i for i, name in enumerate(free) if name not in at_bound]
    stderr: dict[str, float] = {}
    weak, singular = [], []
    if not keep:
        return stderr, weak, singular
    j = jac[:, keep]
    norms = np.linalg.norm(j, axis=0)
    norms = np.where(norms > 0, norms, 1.0)
    u, s, vt = np.linalg.svd(j / norms, full_matrices=False)
    smax = s[0] if s.size else 0.0
    for sv, v in zip(s, vt):
        ratio = sv / smax if smax > 0 else 0.0
        if ratio < _ILL_CONDITIONED:
            loading = np.abs(v) / np.max(np.abs(v))
            names = [free[keep[i]] for i in np.flatnonzero(loading > 0.3)]
            (singular if ratio < _SINGULAR else weak).append(", ".join(names))
    dof = n - len(keep)
    if dof > 0 and s.size and s[-1] > _SINGULAR * smax:
        sigma2 = float(r @ r) / dof
        # Inputs of extreme magnitude (a peak LR of 1e30) give singular values whose square
        # underflows: the variance is then infinite (no information), not a numpy warning.
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            cov = (vt.T / s ** 2) @ vt / np.outer(norms, norms) * sigma2
        if out_cov is not None:
            out_cov["matrix"] = cov
            out_cov["index"] = list(keep)
        values = problem.values(z)
        for idx, i in enumerate(keep):
            name = free[i]
            se = math.sqrt(max(cov[idx, idx], 0.0))
            stderr[name] = values[name] * se if i < len(problem.free_lin) else se
    return stderr, weak, singular


def fit_arrays(law: str | Law, x: Mapping[str, np.ndarray], y: np.ndarray, *,
               labels: Sequence[str] | None = None, fixed: Mapping[str, float] | None = None,
               bounds: Mapping[str, Sequence[float]] | None = None, delta: float = DEFAULT_DELTA,
               seed: int = 0, starts: int = REFINE_STARTS,
               init: Mapping[str, float] | None = None,
               warm_start: Mapping[str, float] | None = None) -> Fit:
    """Fit ``law`` to losses ``y`` at inputs ``x`` by minimising the summed Huber loss.

    Parameters
    ----------
    law: a law name (``power``, ``chinchilla``...) or a :class:`~delphi.laws.Law`.
    x: ladder columns the law reads (e.g. ``flops`` in FLOPs, or ``params`` and ``tokens``),
        each of shape (n,).
    y: observed losses, shape (n,), > 0 (nats/token or the ladder's unit).
    labels: run id of each point, for messages.
    fixed: parameter name -> value held fixed (e.g. ``{"E": 1.5}`` pins the floor).
    bounds: parameter name -> (lower, upper) in natural units; ``None`` for unbounded.
    delta: Huber delta on log residuals.
    seed: seed of the quasi-random search (used when a law has more than two free non-linear
        parameters); the same inputs and seed give bit-identical results.
    starts: number of distinct search points refined.
    init: parameter values (natural units) refined as one more start, e.g. the point estimate
        when refitting bootstrap resamples; the search still runs, so a bad init costs nothing.
    warm_start: parameter values (natural units) of a fit of the same law to related data (the
        full ladder, when this is a fold or a resample of it): the global search is skipped
        and L-BFGS-B refines from there only. Faster, but it finds the optimum of the basin it
        starts in: callers check a sample of warm starts against the global search.

    Inside :func:`delphi.core.shared_fits.shared_fits` (every CLI command runs in one) a call
    with the same law, inputs, losses, labels and settings as an earlier one returns the Fit
    that call made (the same bits: the fit is deterministic) instead of fitting again.

    Returns
    -------
    Fit
        The best optimum found, with diagnostics and warnings.

    Raises
    ------
    LawError: unknown law, parameter, or bad bounds/fixed values (a mapping of numbers is
        needed); a warm start that is not a finite value of every free parameter.
    FitError: a Huber delta that is not a number in range; fewer points than free
        parameters; a fixed floor at or above an observed loss; non-finite or non-positive
        data; no start gave a finite objective.
    IdentifiabilityError: the design cannot identify a free parameter (it is named).
    """
    # The linear algebra here is on tiny matrices: BLAS threads only contend for the cores
    # (20-40x slower on a busy 2-core machine), so the fit runs single-threaded.
    key = None
    if memo.active():
        # Inside one command the same fit may be asked for twice (a report's page and its
        # backtest): deterministic, so it runs once (delphi.core.shared_fits).
        law = get_law(law)
        key = memo.fit_key(law, x, y, labels=labels, fixed=fixed, bounds=bounds, delta=delta,
                           seed=seed, starts=starts, init=init, warm_start=warm_start)
        hit = memo.lookup(key, law)
        if hit is not None:
            return hit
    with one_blas_thread():
        result = _fit_arrays(law, x, y, labels=labels, fixed=fixed, bounds=bounds,
                             delta=delta, seed=seed, starts=starts, init=init,
                             warm_start=warm_start)
    memo.store(key, law, result)
    return result


def _member_rows(batch: WeightedBatch, rows) -> WeightedBatch:
    """One problem's rows (a boolean mask or index list) of a batched refinement of stacked
    problems (:class:`~delphi.fitting.refit.StackedProblems`), as its own batch."""
    return WeightedBatch(z=batch.z[rows], objective=batch.objective[rows],
                         converged=batch.converged[rows], iterations=batch.iterations)


def fit_arrays_many(requests: Sequence[Mapping]) -> list:
    """:func:`fit_arrays` of many independent problems: ``[fit_arrays(**r) for r in
    requests]``, each result bit-identical to its own call, the error it would raise
    (a :class:`~delphi.errors.DelphiError`) returned in its place.

    The global searches of problems of one law and size (:func:`delphi.fitting.refit.stack_key`:
    e.g. the annealing-law completions of runs with the same number of checkpoints) run their
    batched BFGS together (:class:`~delphi.fitting.refit.StackedProblems`): their problems
    are small, and one batch per problem spent most of its time in per-iteration Python
    overhead (``delphi complete misfitting2025 --all-runs``: 119 global searches). Problems
    with a warm start or an init, two-level (large) problems and laws without a stacked
    basis are fitted one by one.

    Parameters
    ----------
    requests: keyword arguments of :func:`fit_arrays`, one mapping per problem.

    Returns
    -------
    list, one per request: a :class:`Fit`, or the DelphiError its fit raised.
    """
    out: list = [None] * len(requests)
    with one_blas_thread():
        pending: dict = {}
        for i, req in enumerate(requests):
            req = dict(req)
            try:
                if req.get("warm_start") is not None or req.get("init") is not None:
                    out[i] = fit_arrays(**req)
                    continue
                prep = prepare(req["law"], req["x"], req["y"], labels=req.get("labels"),
                               fixed=req.get("fixed"), bounds=req.get("bounds"),
                               delta=req.get("delta", DEFAULT_DELTA))
                sp, _, big, z0 = _search_starts(prep, seed=req.get("seed", 0),
                                                starts=req.get("starts", REFINE_STARTS))
            except DelphiError as err:
                out[i] = err
                continue
            key = None if big else stack_key(sp)
            if key is None:
                try:
                    results = _descend(sp, z0, prep.ibounds)
                    if big:
                        results = _second_level(prep, results)
                    out[i] = _finish_fit(prep, results, None)
                except DelphiError as err:
                    out[i] = err
                continue
            pending.setdefault(key + (tuple(map(tuple, prep.ibounds)),), []).append(
                (i, prep, z0))
        for group in pending.values():
            stacked = StackedProblems([prep.problem for _, prep, _ in group])
            z0 = np.concatenate([z for _, _, z in group])
            member = np.repeat(np.arange(len(group)), [len(z) for _, _, z in group])
            batch = refine_batch(stacked, z0, np.ones((len(z0), stacked.log_y.shape[1])),
                                 group[0][1].ibounds, race=True, member=member)
            for m, (i, prep, z) in enumerate(group):
                own = _member_rows(batch, member == m)
                try:
                    out[i] = _finish_fit(prep, _descend(prep.problem, z, prep.ibounds, own),
                                         None)
                except DelphiError as err:
                    out[i] = err
    return out


def warm_fits_many(requests: Sequence[Mapping]) -> list:
    """:func:`fit_arrays` of many warm-started problems: ``[fit_arrays(**r) for r in
    requests]``, each result bit-identical to its own call (and kept in, or taken from, the
    memo of :func:`delphi.core.shared_fits.shared_fits` as that call would be), the
    :class:`~delphi.errors.DelphiError` it would raise returned in its place.

    Each request's warm path (:func:`warm_fit_steps`) asks for one batched refinement; those
    of problems of one law and size (:func:`delphi.fitting.refit.stack_key`) and the same
    internal bounds run as one batched BFGS (:class:`~delphi.fitting.refit.StackedProblems`,
    whose rows are each problem's own arithmetic), so a set of refits one point apart (the
    off-trend test's deleted-residual refits of one round, :func:`delphi.robustness.find_off_trend`)
    pays the per-iteration Python overhead once. A request without a warm start, or with an
    ``init``, is passed to :func:`fit_arrays` as it is.

    Parameters
    ----------
    requests: keyword arguments of :func:`fit_arrays`, one mapping per problem.

    Returns
    -------
    list, one per request: a :class:`Fit`, or the DelphiError its fit raised.
    """
    out: list = [None] * len(requests)
    with one_blas_thread():
        groups: dict = {}
        for i, req in enumerate(requests):
            req = dict(req)
            try:
                if req.get("warm_start") is None or req.get("init") is not None:
                    out[i] = fit_arrays(**req)
                    continue
                law, key = req["law"], None
                if memo.active():       # as fit_arrays: the same call made once per scope
                    law = get_law(law)
                    key = memo.fit_key(law, req["x"], req["y"], labels=req.get("labels"),
                                       fixed=req.get("fixed"), bounds=req.get("bounds"),
                                       delta=req.get("delta", DEFAULT_DELTA),
                                       seed=req.get("seed", 0),
                                       starts=req.get("starts", REFINE_STARTS), init=None,
                                       warm_start=req["warm_start"])
                    hit = memo.lookup(key, law)
                    if hit is not None:
                        out[i] = hit
                        continue
                prep = prepare(law, req["x"], req["y"], labels=req.get("labels"),
                               fixed=req.get("fixed"), bounds=req.get("bounds"),
                               delta=req.get("delta", DEFAULT_DELTA))
                steps = warm_fit_steps(prep, req["warm_start"])
                problem, z0, weights, ibounds = next(steps)
            except DelphiError as err:
                out[i] = err
                continue
            sk = stack_key(problem)
            group = ("alone", i) if sk is None else (sk, repr(ibounds))
            groups.setdefault(group, []).append((i, steps, problem, z0, weights, ibounds, key,
                                                 law))
        for members in groups.values():
            if len(members) == 1:
                _, _, problem, z0, weights, ibounds, _, _ = members[0]
                batches = [refine_batch(problem, z0, weights, ibounds)]
            else:
                member = np.arange(len(members))        # one row per problem
                batch = refine_batch(StackedProblems([m[2] for m in members]),
                                     np.stack([m[3] for m in members]),
                                     np.concatenate([m[4] for m in members]), members[0][5],
                                     member=member)
                batches = [_member_rows(batch, [m]) for m in member]
            for (i, steps, _, _, _, _, key, law), own in zip(members, batches):
                try:
                    steps.send(own)
                except StopIteration as done:
                    out[i] = done.value
                    memo.store(key, law, out[i])
                except DelphiError as err:
                    out[i] = err
    return out


def _check_warm_start(law: Law, warm_start, fixed: Mapping[str, float]) -> dict[str, float]:
    """A warm start gives a finite value of every free parameter (those of a fit of the law)."""
    values = {str(k): _number(v, f"warm_start {k}")
              for k, v in _mapping(warm_start, "warm_start", "fit.params").items()}
    for name in values:
        law.param(name)
    missing = [p for p in law.param_names if p not in fixed and p not in values]
    bad = [p for p, v in values.items() if not math.isfinite(v)]
    if missing or bad:
        raise LawError(f"warm_start must give a finite value of every free parameter of law "
                       f"{law.name!r} ({', '.join(p for p in law.param_names if p not in fixed)}"
                       f"): {'missing ' + ', '.join(missing) if missing else ''}"
                       f"{'; ' if missing and bad else ''}"
                       f"{'not finite: ' + ', '.join(bad) if bad else ''}")
    return values


@dataclass
class Prepared:
    """A checked fitting problem: what a fit and its warm-started refits share."""

    law: Law
    problem: Problem
    x: dict
    y: np.ndarray
    labels: tuple[str, ...]
    fixed: dict[str, float]
    bounds: dict[str, tuple[float, float]]
    ibounds: list
    free: tuple[str, ...]


#: Huber deltas that mean something on log residuals (see :func:`prepare`).
DELTA_RANGE = (1e-8, 10.0)


def prepare(law, x, y, *, labels=None, fixed=None, bounds=None, delta=DEFAULT_DELTA) -> Prepared:
    """Validate a fitting problem (see :func:`fit_arrays` for the arguments and errors)."""
    law = get_law(law)
    delta = _number(delta, "Huber delta", FitError)
    if not (math.isfinite(delta) and delta > 0):
        raise FitError(f"Huber delta must be positive and finite, got {delta!r}")
    if not DELTA_RANGE[0] <= delta <= DELTA_RANGE[1]:
        # Below ~1e-8 the Huber kink sits under float64 rounding of a log loss; above 10 every
        # residual is quadratic already (plain least squares).
        raise FitError(f"Huber delta (on log residuals) must be in {DELTA_RANGE[0]:g}.."
                       f"{DELTA_RANGE[1]:g}, got {delta:.4g}")
    y = np.asarray(y, dtype=float)
    if y.ndim != 1 or y.size == 0:
        raise FitError("y must be a non-empty 1-D array of losses")
    labels = tuple(str(s) for s in labels) if labels is not None else tuple(map(str, range(len(y))))
    bad = ~np.isfinite(y) | (y <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise FitError(f"run {labels[i]!r}: loss must be positive and finite, got {y[i]:g}")
    xa = law.check_inputs(x, what="ladder")
    for name in law.inputs:
        arr = xa[name]
        if arr.shape != y.shape:
            raise FitError(f"input {name!r} has shape {arr.shape}, losses have {y.shape}")
    fixed, all_bounds = _resolve(law, fixed, bounds)
    free = tuple(p.name for p in law.params if p.name not in fixed)
    check_design(law, xa, y, labels, free, fixed, all_bounds)
    problem = Problem(law=law, x=xa, log_y=np.log(y), delta=float(delta), free=free, fixed=fixed)
    return Prepared(law=law, problem=problem, x=xa, y=y, labels=labels, fixed=fixed,
                    bounds=all_bounds, ibounds=internal_bounds(problem, all_bounds), free=free)


#: Above four times this many points the dense screen and the first descent of every start
#: run on an evenly spaced subsample of this size; only the distinct optima found there are refined on
#: all the points. The screen only has to find the basins; the full data decide the optimum.
#: Points are counted in the law's cost per row (:meth:`delphi.laws.Law.row_cost`: 1 for a
#: closed-form law, ~60 groups of LR drops per checkpoint for the multi-power law).
SCREEN_ROWS = 1024
#: The subsample of an expensive law keeps at least this many rows (a curve law with seven
#: parameters needs the curve's shape, not a handful of points).
SCREEN_MIN_ROWS = 256
# Distinct optima of a subsample within this factor of the best are refined on all points.
_POLISH_WITHIN = 1.10


def screen_problem(prep: Prepared) -> tuple[Problem, np.ndarray, bool]:
    """The problem the global search screens and first descends on, its losses, and whether
    it is a subsample (``n * row_cost`` above ``4 * SCREEN_ROWS`` and at least twice the
    subsample's size)."""
    n = len(prep.y)
    cost = float(prep.law.row_cost(prep.problem.x))
    size = max(SCREEN_MIN_ROWS, int(math.ceil(SCREEN_ROWS / cost))) if cost > 1 else SCREEN_ROWS
    if n * cost > 4 * SCREEN_ROWS and n >= 2 * size:
        sp, sy = _subsample(prep.problem, prep.y, size)
        return sp, sy, True
    return prep.problem, prep.y, False


def _subsample(problem: Problem, y: np.ndarray, size: int) -> tuple[Problem, np.ndarray]:
    """The problem restricted to ``size`` evenly spaced points (table order, so every run of
    a ladder of runs keeps points), and their losses."""
    n = len(y)
    idx = np.unique(np.linspace(0, n - 1, size).round().astype(np.int64))
    x = {k: (v[idx] if isinstance(v, np.ndarray) and v.shape == (n,) else v)
         for k, v in problem.x.items()}
    sub = Problem(law=problem.law, x=x, log_y=problem.log_y[idx], delta=problem.delta,
                  free=problem.free, fixed=problem.fixed)
    return sub, y[idx]


_UNPOLISHED = "left unfinished above a converged start (not polished)"
# Iterations of L-BFGS-B that an unfinished start gets to show it can beat the best one
# before it is polished to the end.
_PROBE_ITER = 60


def _descend(problem: Problem, z0: np.ndarray, ibounds, batch: WeightedBatch | None = None
             ) -> list:
    """Refine every start of ``z0`` (S, p): one batched BFGS, then L-BFGS-B for the starts it
    left unfinished that could still beat the best converged one (up to the best two when
    none converged). The lowest of those is polished to the end; each other one first gets a
    short probe and is polished only if the probe goes below the best so far (in a flat
    valley, polishing every start to machine precision costs seconds and changes nothing).
    [(z, objective, success, message)] per start; a start not polished carries the message
    :data:`_UNPOLISHED` and is left out of the fit's agreement count. ``batch``: the batched
    BFGS of these starts, already run (:func:`fit_arrays_many` runs it for many problems at
    once)."""
    if batch is None:
        batch = refine_batch(problem, z0, np.ones((len(z0), len(problem.log_y))), ibounds,
                             race=True)
    done = batch.converged & np.isfinite(batch.objective)
    best = float(batch.objective[done].min()) if done.any() else math.inf
    unfinished = np.flatnonzero(~done)
    unfinished = unfinished[np.argsort(batch.objective[unfinished], kind="stable")]
    if not done.any():
        polish = unfinished[:2].tolist()
    else:
        polish = [i for i in unfinished.tolist() if batch.objective[i] < best]
    out: dict[int, tuple] = {}
    for i in np.flatnonzero(done):
        out[int(i)] = (batch.z[i], float(batch.objective[i]), True, "converged (batched BFGS)")
    for rank, i in enumerate(polish):
        start = batch.z[i] if np.all(np.isfinite(batch.z[i])) else z0[i]
        if rank > 0:
            probe = refine_one(problem, start, ibounds, max_iter=_PROBE_ITER)
            if not probe[1] < best * (1 - 1e-9):
                out[i] = probe[:3] + (f"stopped after a {_PROBE_ITER}-iteration probe above "
                                      f"the best start ({probe[3].strip().lower()})",)
                continue
            start = probe[0]
        out[i] = _refine(problem, start, ibounds)
        best = min(best, out[i][1])
    for i in range(len(z0)):
        out.setdefault(i, (batch.z[i], float(batch.objective[i]), False, _UNPOLISHED))
    return [out[i] for i in range(len(z0))]


# The polish on all points of a two-level search (issue 26): a start the trust-region least
# squares leaves with a scale-free gradient above this (refine_batch's stalled tolerance) goes
# to the batched BFGS + L-BFGS-B descent instead.
_LSQ_STATIONARY = 1e-6
# Evaluations a start other than the best gets to show it can beat the best before it is
# polished to the end (as _PROBE_ITER for L-BFGS-B).
_LSQ_PROBE = 20
_PROBE_STOP = "stopped after a"


def _polish_all_points(problem: Problem, z0: np.ndarray, screened: Sequence[float],
                       ibounds) -> list:
    """Refine the subsample's optima ``z0`` (S, p) on all the points: [(z, objective, success,
    message)] per start, as :func:`_descend` returns.

    Each start is polished by trust-region least squares on the Huber objective
    (:func:`~delphi.fitting.refit.refine_least_squares`), in the order of its subsample
    objective ``screened``: the best to the end, each other one first for a probe of
    :data:`_LSQ_PROBE` evaluations, continued only if it goes below the best so far. A
    polish that stops short of a stationary point (scale-free gradient, the engine's
    test, above :data:`_LSQ_STATIONARY`) is not taken: that start is descended as a small
    problem is (:func:`_descend`: batched BFGS, then L-BFGS-B), from where the least squares
    stopped when that is lower, so a hard valley costs time, never a worse optimum. On the multi-power law's 1,551 checkpoints of one 2,000-step run
    (benchmarks/bench_curves.py) this takes 231 evaluations on all the points (194 for the
    best start, a 20-evaluation probe of the other) where the descent took 638 (batched BFGS
    over both starts, then L-BFGS-B), at the same optimum (objective to 3e-15 relative).
    """
    order = np.argsort(np.asarray(screened, dtype=float), kind="stable")
    out: dict[int, tuple] = {}
    best = math.inf
    slow: list[int] = []
    ends: dict[int, np.ndarray] = {}
    for rank, i in enumerate(order.tolist()):
        start = z0[i]
        if rank > 0 and math.isfinite(best):
            zp, fp, _, status, said = refine_least_squares(problem, start, ibounds,
                                                           max_nfev=_LSQ_PROBE)
            if not fp < best * (1 - 1e-9):
                out[i] = (zp, fp, status > 0, f"{_PROBE_STOP} {_LSQ_PROBE}-evaluation "
                          f"least-squares probe above the best start ({said.strip().lower()})")
                continue
            start = zp
        z, f, nfev, status, said = refine_least_squares(problem, start, ibounds)
        if status > 0 and math.isfinite(f) and _stationarity(problem, z, ibounds) < _LSQ_STATIONARY:
            out[i] = (z, f, True, f"converged (trust-region least squares, {nfev} evaluations: "
                      f"{said.strip().rstrip('.').lower()})")
            best = min(best, f)
        else:
            # Descended from where the least squares stopped, when that is lower: from the
            # subsample's optimum the descent can end in a worse basin (issue 26: a 1,000-step
            # cosine run at 60%, its optimum with beta on its bound, 3e-6 from stationary).
            ends[i] = z if math.isfinite(f) and f < problem.objective(z0[i]) else z0[i]
            slow.append(i)
    if slow:
        for i, res in zip(slow, _descend(problem, np.stack([ends[i] for i in slow]), ibounds)):
            out[i] = res
    return [out[i] for i in range(len(z0))]


def global_search(prep: Prepared, *, seed: int = 0, starts: int = REFINE_STARTS) -> list:
    """Dense search over the non-linear parameters, then a local descent from the best
    distinct points: [(z, objective, success, message)] per start, unsorted.

    Large problems (more than 4 x :data:`SCREEN_ROWS` points, counted in the law's
    :meth:`~delphi.laws.Law.row_cost`; see :func:`screen_problem`) are screened and first descended on
    an evenly spaced subsample; the distinct optima found there are then refined on all the
    points (a two-level search: :func:`_polish_all_points`, trust-region least squares, with
    the small problems' descent as its fallback), and each start reports the full-data
    optimum it led to.

    Raises
    ------
    FitError: no point of the search range gives a positive prediction everywhere.
    """
    sp, sy, big, z0 = _search_starts(prep, seed=seed, starts=starts)
    results = _descend(sp, z0, prep.ibounds)
    if not big:
        return results
    return _second_level(prep, results)


def _search_starts(prep: Prepared, *, seed: int, starts: int):
    """The screen of :func:`global_search` and the starts it picks: (problem screened,
    its losses, whether it is a subsample, starts (S, p) in internal coordinates).

    Raises
    ------
    FitError: no point of the search range gives a positive prediction everywhere.
    """
    law, problem, ibounds = prep.law, prep.problem, prep.ibounds
    sp, sy, big = screen_problem(prep)  # small problems: the second level costs more
    ranges = _search_ranges(law, problem, prep.bounds)
    nl_params = [law.param(problem.nl_names[i]) for i in problem.free_nl]
    log_scale = [p.log_search and r[0] > 0 for p, r in zip(nl_params, ranges)]
    thetas = theta_candidates(ranges, seed, log_scale=log_scale, points=law.search_points)
    obj, coefs = _screen_once(sp, thetas, sy, reuse=False)
    # A quasi-random search in three or more dimensions samples each basin thinly: refine more.
    chosen = pick_starts(obj, thetas, ranges, starts + (len(ranges) if len(ranges) >= 3 else 0))
    if not chosen:
        raise FitError(f"law {law.name!r} cannot represent these losses anywhere in its "
                       f"search range (every candidate gives a non-positive prediction)")
    z0 = np.stack([start_vector(sp, thetas[i], coefs[i], sy, ibounds) for i in chosen])
    return sp, sy, big, z0


# The last few screens, by their inputs: the guard's basin_probes screens the full-data
# problem its fit's global search has just screened (the same points, candidates and seed;
# on the OLMo ladder's step 2, 2,638 checkpoints). Enough are kept for accuracy's eight tasks
# in lockstep (each fits both steps, then the other tasks theirs, before its guard runs).
_SCREENS: OrderedDict = OrderedDict()
_SCREENS_KEPT = 48


def _screen_key(sp: Problem, thetas: np.ndarray, sy: np.ndarray):
    """What :func:`delphi.fitting.search.screen` reads, as a key; None when an input is
    not a plain array or number (the screen is then not kept)."""
    xs = []
    for k in sorted(sp.x):
        v = sp.x[k]
        if isinstance(v, np.ndarray) and v.dtype.kind in "fiub":
            xs.append((k, v.dtype.str, v.shape, v.tobytes()))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            xs.append((k, float(v)))
        else:
            return None
    return (id(sp.law), tuple(xs), sp.log_y.tobytes(), float(sp.delta), tuple(sp.free),
            tuple(sorted(sp.fixed.items())), thetas.shape, thetas.tobytes(), sy.shape,
            sy.tobytes())


def _screen_once(sp: Problem, thetas: np.ndarray, sy: np.ndarray, *, reuse: bool):
    """:func:`delphi.fitting.search.screen`, kept in :data:`_SCREENS`; with ``reuse``
    answered from there when the same inputs were screened lately (copies: the caller may
    keep or change them). Only basin_probes reuses: a global search run again screens
    again, so that a fit timed repeatedly (the benchmarks' baseline) costs what one fit does."""
    key = _screen_key(sp, thetas, sy)
    kept = _SCREENS.get(key) if key is not None and reuse else None
    # The law is kept with its screen, so its id cannot be another law's while kept.
    if kept is not None and kept[0] is sp.law:
        return tuple(a.copy() for a in kept[1])
    out = screen(sp, thetas, sy)
    if key is not None:
        _SCREENS[key] = (sp.law, tuple(a.copy() for a in out))
        while len(_SCREENS) > _SCREENS_KEPT:
            _SCREENS.popitem(last=False)
    return out


def _second_level(prep: Prepared, results: list) -> list:
    """The subsample's optima ``results`` of a two-level search refined on all the points
    (see :func:`global_search`)."""
    problem, ibounds = prep.problem, prep.ibounds
    # Distinct optima of the subsample (starts that met in one basin share it).
    reps: list[int] = []
    owner = []
    for i, (z, f, _, _) in enumerate(results):
        for r in reps:
            zr, fr = results[r][0], results[r][1]
            if abs(f - fr) <= 1e-6 * max(abs(fr), 1e-300) and np.allclose(z, zr, rtol=1e-3,
                                                                              atol=1e-4):
                owner.append(r)
                break
        else:
            reps.append(i)
            owner.append(i)
    finite = [results[r][1] for r in reps if np.isfinite(results[r][1])]
    best = min(finite) if finite else math.inf
    # Starts the subsample's descent left unfinished above a finished one are kept too: on
    # the full data such a start can lead to a lower optimum than the subsample's best (the
    # multi-power law on a 1,000-step cosine run at 60%: 5.4e-4 lower, forecast 0.95% apart).
    # Each costs a short least-squares probe there (_polish_all_points), not a full polish.
    keep = [r for r in reps if np.isfinite(results[r][1])
            and results[r][1] <= best * _POLISH_WITHIN + 1e-300] or reps[:1]
    full = dict(zip(keep, _polish_all_points(problem, np.stack([results[r][0] for r in keep]),
                                             [results[r][1] for r in keep], ibounds)))
    out = []
    for i, r in enumerate(owner):
        if r in full and results[r][3] == _UNPOLISHED and full[r][3].startswith(_PROBE_STOP):
            # Still unfinished, on both levels: left out of the agreement count, as before.
            out.append(full[r][:2] + (False, _UNPOLISHED))
        elif r in full:
            out.append(full[r])
        else:  # a worse basin of the subsample: its full-data objective, unrefined
            z = results[r][0]
            out.append((z, problem.objective(z), False, _UNPOLISHED if results[r][3] == _UNPOLISHED
                        else "left in a worse basin (not refined)"))
    return out


def basin_probes(prep: Prepared, *, count: int = 16, seed: int = 0) -> np.ndarray:
    """The non-linear parameters (K, m_free) of the best point of each basin of the global
    search's screen on the full data (:func:`delphi.fitting.search.local_minima`), best first.

    A refit of a resample (a bootstrap draw) that ends above the weighted screen at one of
    these points (:func:`delphi.fitting.search.screen_weighted`) has stopped in the wrong
    basin, or short of its optimum: the cheap check of the warm-start guard. The screen is the
    one :func:`global_search` runs (on the subsample for a large problem), with the same seed.

    Raises
    ------
    FitError: no point of the search range gives a positive prediction everywhere.
    """
    law, problem = prep.law, prep.problem
    sp, sy, _ = screen_problem(prep)
    ranges = _search_ranges(law, problem, prep.bounds)
    nl_params = [law.param(problem.nl_names[i]) for i in problem.free_nl]
    log_scale = [p.log_search and r[0] > 0 for p, r in zip(nl_params, ranges)]
    thetas = theta_candidates(ranges, seed, log_scale=log_scale, points=law.search_points)
    obj, _ = _screen_once(sp, thetas, sy, reuse=True)
    keep = local_minima(obj, thetas, ranges, count, log_scale=log_scale)
    if not keep:
        raise FitError(f"law {law.name!r} cannot represent these losses anywhere in its "
                       f"search range (every candidate gives a non-positive prediction)")
    return thetas[keep]


# A ladder this small cannot afford to have rungs treated as outliers by the Huber loss.
_SMALL_LADDER = 12


def _delta_warning(r: np.ndarray, delta: float, dof: int) -> list[str]:
    """Warn when, on a small ladder, a third or more of the log residuals sit in the Huber
    loss's linear zone (|r| > delta): the fit is then least-absolute-deviations there and
    discounts those rungs, so their misfit barely moves the law. Suggest a delta above the
    residual scale (a least-squares fit of the same law)."""
    a = np.abs(r[np.isfinite(r)])
    if a.size == 0 or a.size > _SMALL_LADDER or dof < 1:
        return []
    outside = int(np.sum(a > delta))
    if outside == 0 or outside < a.size / 3:
        return []
    suggest = float(2 * a.max())
    return [f"{outside} of {a.size} log residuals exceed the Huber delta {delta:g} (largest "
            f"{a.max():.2g}): on a ladder this small the fit treats those rungs as outliers and "
            f"barely follows them; if they are not outliers, refit with --huber-delta "
            f"{suggest:.2g} (least squares on these residuals) and compare"]


def convergence_message(converged: bool, stationarity: float, scipy_said: str) -> str:
    """The fit's one convergence line: the stationarity test, which decides, then how the
    optimiser stopped, worded so that a stationary fit never reads as a failure."""
    said = scipy_said.strip().rstrip(":").lower()
    if said.startswith("abnormal"):
        # At a stationary point this is how L-BFGS-B stops, not a failure: say so, so the
        # line does not read as success and failure at once.
        said = ("stopped where its line search could not improve further, as expected at an "
                "optimum" if converged else "line search could not improve further")
    return (f"{'stationary' if converged else 'NOT stationary'} (scaled gradient "
            f"{stationarity:.1e}, tolerance {_STATIONARY:g}); L-BFGS-B: {said}")


def _fit_arrays(law, x, y, *, labels, fixed, bounds, delta, seed, starts, init,
                warm_start=None) -> Fit:
    prep = prepare(law, x, y, labels=labels, fixed=fixed, bounds=bounds, delta=delta)
    if warm_start is None:
        return _finish_fit(prep, global_search(prep, seed=seed, starts=starts), init)
    steps = warm_fit_steps(prep, warm_start, init)
    req = next(steps)
    try:
        steps.send(refine_batch(*req))
    except StopIteration as done:
        return done.value
    raise AssertionError("warm_fit_steps asks for one batched refinement")  # pragma: no cover


def warm_fit_steps(prep: Prepared, warm_start, init=None):
    """The warm-started fit of :func:`fit_arrays` (``warm_start`` given) as a generator, so a
    caller can stack many such refits in one batched BFGS.

    Yields once the arguments of its :func:`delphi.fitting.refit.refine_batch` call,
    ``(problem, z0 (p,), weights (1, n), ibounds)`` (its default ``max_iter``,
    :data:`~delphi.fitting.refit.MAX_ITER`), and must be sent that call's
    :class:`~delphi.fitting.refit.WeightedBatch` (one row; a row of a larger stacked batch
    is the same arithmetic, as its rows are independent); returns the :class:`Fit`, the one
    ``fit_arrays`` returns, bit for bit.

    A refit of a law already fitted starts at that optimum and refines locally: the batched
    BFGS (IRLS initial Hessian) gets there in a few steps where L-BFGS-B from the warm start
    needs many. A converged batch is taken as the global search takes its converged starts
    (its tolerances are those of refine_batch, tighter than the stationarity test of the
    fit); L-BFGS-B polishes only a refit the batch left unfinished.

    Raises LawError for a warm start that does not name the law's free parameters.
    """
    problem, ibounds = prep.problem, prep.ibounds
    warm_start = _check_warm_start(prep.law, warm_start, prep.fixed)
    z0 = safe_start(problem, {**prep.fixed, **dict(warm_start)}, ibounds)
    batch = yield problem, z0, np.ones((1, len(prep.y))), ibounds
    finite = np.all(np.isfinite(batch.z[0])) and np.isfinite(batch.objective[0])
    if finite and batch.converged[0]:
        results = [(batch.z[0], float(batch.objective[0]), True, "converged (batched BFGS)")]
    else:
        results = [_refine(problem, batch.z[0] if finite else z0, ibounds)]
    return _finish_fit(prep, results, init)


def _finish_fit(prep: Prepared, results: list, init) -> Fit:
    """The fit from the optima of its starts ``results`` (and a refined ``init``): the best
    one, with its diagnostics and warnings."""
    law, problem, xa, y, labels = prep.law, prep.problem, prep.x, prep.y, prep.labels
    fixed, all_bounds, ibounds, free = prep.fixed, prep.bounds, prep.ibounds, prep.free
    if init is not None:
        lo = np.array([b[0] if b[0] is not None else -np.inf for b in ibounds])
        hi = np.array([b[1] if b[1] is not None else np.inf for b in ibounds])
        z0 = np.clip(problem.pack({**fixed, **dict(init)}), lo, hi)
        if np.all(np.isfinite(z0)):
            results.append(_refine(problem, z0, ibounds))
    polished = [t for t in results if t[3] != _UNPOLISHED]
    results = sorted(polished or results, key=lambda t: t[1])
    z, objective, success, message = results[0]
    if not math.isfinite(objective):
        raise FitError(f"every start of law {law.name!r} failed to give a finite objective")
    # Objectives agree within a relative 1e-6, or absolutely when the fit is (near) exact.
    n_agree = sum(1 for t in results if t[1] <= objective * (1 + _AGREE_RTOL) + 1e-12 * len(y))

    warnings: list[str] = []
    at_bound = _at_bound(problem, z, all_bounds, y)
    stationarity = _stationarity(problem, z, ibounds, at_bound)
    converged = stationarity < _STATIONARY
    message = convergence_message(converged, stationarity, message)
    if not converged:
        warnings.append(f"optimiser did not converge: {message}")
    values = problem.values(z)
    for name in at_bound:
        lo, hi = all_bounds[name]
        if law.param(name).linear and lo == 0 and values[name] > 0:
            # A coefficient is bounded at 0 only asymptotically (log space): its value is not
            # 0, its term is too small to matter over the ladder.
            warnings.append(f"{name}'s term is negligible over the ladder ({name} = "
                            f"{values[name]:.3g}, as if 0): the data give it no weight")
            continue
        where = f"lower bound {lo:g}" if abs(values[name] - lo) <= abs(
            values[name] - (hi if math.isfinite(hi) else math.inf)) else f"upper bound {hi:g}"
        warnings.append(f"{name} is at its {where}: the optimum lies on or beyond the bound")
    cov: dict = {}
    stderr, weak, singular = _identifiability(problem, z, free, at_bound, len(y), cov)
    for group in singular:
        warnings.append(f"not identified: the data cannot separate {group} (singular direction); "
                        f"fix one of them or widen the design")
    for group in weak:
        warnings.append(f"poorly identified direction involving {group} "
                        f"(near-singular curvature); treat these values with caution")
    vague = [n for n, se in stderr.items() if np.isfinite(se) and se > abs(problem.values(z)[n])]
    if vague and not weak and not singular:
        warnings.append(f"poorly determined: the approximate standard error of "
                        f"{', '.join(vague)} exceeds its value; the data constrain "
                        f"{'it' if len(vague) == 1 else 'them'} little")
    if n_agree == 1 and len(results) >= 3:
        warnings.append(f"only 1 of {len(results)} starts reached the best objective; other "
                        f"starts ended in worse local optima, so check the fit")
    dof = len(y) - len(free)
    if dof == 0:
        warnings.append(f"no residual degrees of freedom: {len(y)} points for {len(free)} free "
                        f"parameters, so the fit interpolates and its objective says nothing about "
                        f"fit quality")
    r, _, _ = problem.residuals_and_jacobian(z)
    warnings.extend(_delta_warning(r, problem.delta, dof))
    return Fit(law=law, params=problem.values(z), fixed=fixed, bounds=all_bounds,
               objective=float(objective), delta=problem.delta, converged=bool(converged),
               message=message, n_points=len(y), n_free=len(free), at_bound=tuple(at_bound),
               warnings=tuple(warnings), stderr=stderr, residuals=r, labels=labels,
               x={k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in xa.items()},
               y=y.copy(), n_starts=len(results), n_agree=n_agree,
               covariance=cov.get("matrix"),
               covariance_params=tuple(free[i] for i in cov.get("index", ())))
