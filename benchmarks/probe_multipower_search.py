"""Probe (issue 26, target 3): other search paths for the multi-power completion, scored
against today's path on the 12 cases of ``probe_multipower_cases.py``.

Each variant replaces part of the two-level search of :func:`delphi.fitting.engine.global_search`
(screen on a 256-checkpoint subsample, batched BFGS from 10 starts, L-BFGS-B polish there,
trust-region least squares on all checkpoints) and is run in the same process as the current
path (``current``: ``delphi.complete``), case by case. One JSON line per (case, variant): time
of the search, objective and forecast relative to ``current``, whether the fit is stationary.
The acceptance rule, fixed before any variant was run: objective <= current x (1 + 1e-9) and
forecast within 1e-6 relative, or a strictly lower objective.

Variants (none adopted; benchmarks/RESULTS.md, "fifth pass"):

- ``capK`` (K = 50, 100): the subsample's batched BFGS capped at K iterations, its unfinished
  starts polished by trust-region least squares there (then L-BFGS-B when not stationary),
  the full-data level unchanged.
- ``loose``: the subsample's L-BFGS-B polish at ftol 1e-10, one run (today: 1e-15, restarted
  while it improves); everything else unchanged.
- ``valley``: the subsample's batched BFGS and the full-data least squares in coordinates
  (ln(C beta), 1/beta) (the limit beta -> inf at fixed C beta is G = 1 - exp(-C beta x), along
  which the bench case's optimum valley runs: nearly straight there, a hyperbola in (C, beta)),
  then the usual least squares in the law's coordinates to finish.
- ``map``: every screen start polished to the end on the subsample (least squares, valley
  coordinates) and each on all checkpoints (valley, then the law's coordinates): the distinct
  full-data optima the starts lead to, the best of them against ``current``.

Usage: ``nice -n 10 python benchmarks/probe_multipower_search.py [--variants V,...] [CASE ...]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares, minimize
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

import delphi  # noqa: E402
from bench_curves import multipower_ladder  # noqa: E402
from probe_multipower_cases import CASES, ladder  # noqa: E402
from delphi.fitting import engine as E  # noqa: E402
from delphi.fitting import refit as R  # noqa: E402
from delphi.fitting.objective import Problem  # noqa: E402
from delphi.forecasting import curves as CV  # noqa: E402
from delphi.laws.base import Param  # noqa: E402
from delphi.laws.curves import MULTIPOWER, MultiPowerLaw  # noqa: E402

C_LO, C_HI = 1e-6, 1e6


class ValleyLaw(MultiPowerLaw):
    """The multi-power law with non-linear parameters (alpha, ln k, eps, gamma), k = C beta,
    eps = 1/beta; C clipped to its bounds (derivative 0 there)."""

    def _map(self, th):
        th = np.asarray(th, float)
        out = th.copy()
        raw = np.exp(th[..., 1]) * th[..., 2]
        out[..., 1] = np.clip(raw, C_LO, C_HI)
        out[..., 2] = 1.0 / th[..., 2]
        return out, (raw > C_LO) & (raw < C_HI)

    def _chain(self, th, t, inside, d):
        c_in = np.where(inside, t[..., 1], 0.0)
        e_in = np.where(inside, t[..., 1] / th[..., 2], 0.0)
        out = d.copy()
        out[..., 1] = d[..., 1] * np.asarray(c_in)[..., None, None]
        out[..., 2] = (d[..., 1] * np.asarray(e_in)[..., None, None]
                       - d[..., 2] * np.asarray(1.0 / th[..., 2] ** 2)[..., None, None])
        return out

    def log_basis(self, theta, x):
        th = np.asarray(theta, float)
        t, inside = self._map(th)
        lp, d = super().log_basis(t, x)
        return lp, self._chain(th, t, inside, d)

    def log_basis_grid(self, thetas, x):
        return super().log_basis_grid(self._map(thetas)[0], x)

    def log_basis_batch(self, thetas, x):
        th = np.asarray(thetas, float)
        t, inside = self._map(th)
        lp, d = super().log_basis_batch(t, x)
        return lp, self._chain(th, t, inside, d)


VALLEY = ValleyLaw(name="multipower-valley", formula=MULTIPOWER.formula, source=MULTIPOWER.source,
                   inputs=MULTIPOWER.inputs,
                   params=MULTIPOWER.params[:4] + (
                       Param("lnk", linear=False, lower=math.log(1e-9), upper=math.log(1e7)),
                       Param("eps", linear=False, lower=0.1, upper=1000.0), MULTIPOWER.params[6]),
                   signs=MULTIPOWER.signs, floor="L0", identified_by=MULTIPOWER.identified_by,
                   search_points=512)
V_IB = [(None, None)] * 3 + [(0.0, 5.0), (math.log(1e-9), math.log(1e7)), (0.1, 1000.0), (0.0, 3.0)]
V_LO = np.array([-np.inf if b[0] is None else b[0] for b in V_IB])
V_HI = np.array([np.inf if b[1] is None else b[1] for b in V_IB])


def to_v(z):
    v = np.array(z, float)
    v[..., 4] = np.log(v[..., 4] * v[..., 5])
    v[..., 5] = 1.0 / np.asarray(z, float)[..., 5]
    return np.clip(v, V_LO, V_HI)


def from_v(v):
    z = np.array(v, float)
    z[..., 4] = np.clip(np.exp(z[..., 4]) * z[..., 5], C_LO, C_HI)
    z[..., 5] = 1.0 / np.asarray(v, float)[..., 5]
    return z


def valley_problem(pr: Problem) -> Problem:
    names = {"C": "lnk", "beta": "eps"}
    return Problem(law=VALLEY, x=pr.x, log_y=pr.log_y, delta=pr.delta,
                   free=tuple(names.get(n, n) for n in pr.free), fixed={})


def valley_lsq(pr: Problem, z0, max_nfev=400):
    """Trust-region least squares (as refit.refine_least_squares) in (ln k, eps), both linear."""
    vp = valley_problem(pr)
    last: list = [None, None]

    def ev(u):
        if last[0] != u.tobytes():
            r, j, ok = vp.residuals_and_jacobian(u)
            last[0], last[1] = u.tobytes(), (r if ok and np.all(np.isfinite(r))
                                             else np.full(len(pr.log_y), 1e3), j)
        return last[1]

    res = least_squares(lambda u: ev(u)[0], to_v(z0), jac=lambda u: ev(u)[1], bounds=(V_LO, V_HI),
                        method="trf", loss="huber", f_scale=pr.delta, x_scale="jac",
                        ftol=1e-15, xtol=1e-15, gtol=1e-15, max_nfev=max_nfev)
    z = from_v(res.x)
    return z, pr.objective(z), int(res.nfev)


def setup(name):
    spec = CASES[name]
    lad = multipower_ladder() if spec is None else ladder(*spec)
    run = "mp-2000" if spec is None else "mp"
    req, state = CV._setup(lad, run, "multipower", upto_fraction=None, upto_step=None,
                           min_step_fraction=0.0, siblings=False, keep_warmup=False, fixed=None,
                           bounds=None, delta=1e-3, seed=0)
    prep = E.prepare(req["law"], req["x"], req["y"], labels=req["labels"], delta=1e-3)
    return lad, run, state, prep


def descend_capped(problem, z0, ibounds, cap):
    """_descend with the batch capped at ``cap`` and least squares before L-BFGS-B."""
    batch = R.refine_batch(problem, z0, np.ones((len(z0), len(problem.log_y))), ibounds,
                           race=True, max_iter=cap)
    done = batch.converged & np.isfinite(batch.objective)
    best = float(batch.objective[done].min()) if done.any() else math.inf
    unfinished = np.flatnonzero(~done)
    unfinished = unfinished[np.argsort(batch.objective[unfinished], kind="stable")]
    polish = (unfinished[:2].tolist() if not done.any()
              else [i for i in unfinished.tolist() if batch.objective[i] < best])
    out = {int(i): (batch.z[i], float(batch.objective[i]), True, "converged (batched BFGS)")
           for i in np.flatnonzero(done)}
    for rank, i in enumerate(polish):
        start = batch.z[i] if np.all(np.isfinite(batch.z[i])) else z0[i]
        if rank > 0:
            zp, fp, _, st, _ = R.refine_least_squares(problem, start, ibounds, max_nfev=20)
            if not fp < best * (1 - 1e-9):
                out[i] = (zp, fp, st > 0, "probe above the best")
                continue
            start = zp
        z, f, _, st, _ = R.refine_least_squares(problem, start, ibounds, max_nfev=200)
        stationary = st > 0 and E._stationarity(problem, z, ibounds) < 1e-6
        out[i] = (z, f, True, "least squares") if stationary else R.refine_one(problem, z, ibounds)
        best = min(best, out[i][1])
    for i in range(len(z0)):
        out.setdefault(i, (batch.z[i], float(batch.objective[i]), False, E._UNPOLISHED))
    return [out[i] for i in range(len(z0))]


def loose_one(problem, z0, ibounds, *, max_iter=None):
    res = minimize(problem.scaled_objective_and_grad, z0, jac=True, method="L-BFGS-B",
                   bounds=ibounds, options={"maxiter": max_iter or 20000,
                                            "maxfun": 2 * (max_iter or 20000), "ftol": 1e-10,
                                            "gtol": 1e-11, "maxcor": 30})
    return res.x, float(res.fun) * problem.delta, bool(res.success), str(res.message)


def distinct(results):
    """Indices of the distinct optima of ``results`` (as engine._second_level dedupes)."""
    reps = []
    for i, (z, f, _, _) in enumerate(results):
        if not any(abs(f - results[r][1]) <= 1e-6 * abs(results[r][1])
                   and np.allclose(z, results[r][0], rtol=1e-3, atol=1e-4) for r in reps):
            reps.append(i)
    return reps


def valley_full(prep, results):
    """The full-data level of ``valley``: as engine._second_level / _polish_all_points, each
    polish in valley coordinates first, then in the law's."""
    problem, ib = prep.problem, prep.ibounds
    reps = distinct(results)
    best_sub = min(results[r][1] for r in reps)
    finished = [r for r in reps if results[r][3] != E._UNPOLISHED] or reps
    keep = [r for r in finished if results[r][1] <= best_sub * 1.10] or finished[:1]
    keep.sort(key=lambda r: results[r][1])
    out, best = [], math.inf
    for rank, r in enumerate(keep):
        z0 = results[r][0]
        if rank > 0:
            zp, fp, _ = valley_lsq(problem, z0, max_nfev=20)
            if not fp < best * (1 - 1e-9):
                out.append((zp, fp, True, "probe above the best"))
                continue
            z0 = zp
        zv, _, _ = valley_lsq(problem, z0)
        z, f, _, st, _ = R.refine_least_squares(problem, zv, ib)
        if st > 0 and E._stationarity(problem, z, ib) < 1e-6:
            out.append((z, f, True, "least squares"))
            best = min(best, f)
        else:
            out.extend(E._descend(problem, results[r][0][None], ib))
    return out


def search(prep, variant):
    sp, _, _, z0 = E._search_starts(prep, seed=0, starts=E.REFINE_STARTS)
    ib = prep.ibounds
    if variant.startswith("cap"):
        return E._second_level(prep, descend_capped(sp, z0, ib, int(variant[3:])))
    if variant == "loose":
        saved = E._refine, E.refine_one
        E._refine, E.refine_one = (lambda p, z, b: loose_one(p, z, b)), loose_one
        try:
            sub = E._descend(sp, z0, ib)
        finally:
            E._refine, E.refine_one = saved
        return E._second_level(prep, sub)
    if variant == "valley":
        sub = E._descend(valley_problem(sp), to_v(z0), V_IB)
        return valley_full(prep, [(from_v(v), f, s, m) for v, f, s, m in sub])
    if variant == "map":
        out = []
        for z in z0:
            zs, _, _ = valley_lsq(sp, z)
            zv, _, _ = valley_lsq(prep.problem, zs)
            zf, f, _, _, _ = R.refine_least_squares(prep.problem, zv, ib)
            out.append((zf, f, True, "polished"))
        return out
    raise SystemExit(f"unknown variant {variant!r}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variants", default="cap50,cap100,loose,valley,map")
    ap.add_argument("cases", nargs="*")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    from scipy.stats import qmc  # noqa: F401  (the search's Sobol import, outside the timing)
    with threadpool_limits(limits=1):
        for name in args.cases or list(CASES):
            lad, run, state, prep = setup(name)
            t0 = time.perf_counter()
            ref = delphi.complete(lad, run, "multipower")
            t_ref = time.perf_counter() - t0
            print(json.dumps({"case": name, "variant": "current", "t": round(t_ref, 3),
                              "objective": ref.fit.objective, "loss": ref.loss}), flush=True)
            for variant in args.variants.split(","):
                t0 = time.perf_counter()
                results = search(prep, variant)
                fit = E._finish_fit(prep, results, None)
                dt = time.perf_counter() - t0
                loss = float(CV._finish(state, fit).loss)
                d_obj = fit.objective / ref.fit.objective - 1
                d_loss = loss / ref.loss - 1
                ok = (d_obj <= 1e-9 and abs(d_loss) <= 1e-6) or d_obj < -1e-9
                row = {"case": name, "variant": variant, "t": round(dt, 3),
                       "objective_rel": float(f"{d_obj:.2e}"), "loss_rel": float(f"{d_loss:.2e}"),
                       "stationary": bool(fit.converged), "accepted": bool(ok)}
                if variant == "map":
                    row["distinct_optima"] = len(distinct(results))
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
