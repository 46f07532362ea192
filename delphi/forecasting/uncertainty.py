"""Intervals for forecasts: parameter uncertainty (bootstrap or delta method) plus run noise.

Two intervals are kept apart:

* the interval of the **expected loss** at the target (``mean_lower``/``mean_upper``): only
  the uncertainty of the fitted parameters;
* the interval of **one new run** (``lower``/``upper``): adds run-to-run noise (seed, data
  order), estimated from repeated runs of one configuration when the ladder has them, else
  from the fit's residuals. A target is one run, so this is the default interval.

Methods: the bootstrap (Efron & Tibshirani 1993) resamples whole runs, or whole compute
budgets (a cluster bootstrap, for isoFLOP designs where runs of a budget share their
hyper-parameters); Besiroglu et al. 2024 (arXiv 2404.10102, Sec. 4) bootstrap the Chinchilla
fit this way. The delta method propagates the fit's Gauss-Newton covariance through the law's
gradient: fast, approximate, labelled as such.
"""

from __future__ import annotations

import math
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..errors import DelphiError, FitError, FitWarning, user_stacklevel
from ..fitting import Fit
from ..fitting.engine import basin_probes, check_design, global_search, prepare, safe_start
from ..fitting.refit import refine_batch, refine_least_squares, refine_one, weighted_objective
from ..fitting.objective import Problem
from ..fitting.search import screen_weighted
from ..fitting.diagnostics import NOISE_FLOOR, floored_covariance
from ..core.quantiles import check_level, norm_ppf, t_ppf
from ..core.parallel import map_jobs

__all__ = ["Interval", "BootstrapDraws", "run_noise", "bootstrap", "delta_interval",
           "delta_rows", "bootstrap_interval", "basin_suspects", "DEFAULT_LEVEL"]

#: Default interval level.
DEFAULT_LEVEL = 0.90
# Fewer residual dof than this cannot estimate the run noise (with 1 dof the estimate is one
# residual, often near 0 by chance): no interval rather than a falsely narrow one.
_MIN_NOISE_DOF = 3
# Noise draws per bootstrap draw when forming the new-run interval (smooths the percentiles).
_NOISE_PER_DRAW = 25


@dataclass(frozen=True)
class Interval:
    """A forecast interval, in the ladder's loss unit."""

    lower: float
    """Lower end of the new-run interval (one new run at the target)."""
    upper: float
    """Upper end of the new-run interval."""
    mean_lower: float
    """Lower end of the interval of the expected loss (parameter uncertainty only)."""
    mean_upper: float
    """Upper end of the expected-loss interval."""
    level: float
    """Central coverage, e.g. 0.9."""
    method: str
    """``"bootstrap"``, ``"delta"`` (approximate) or ``"calibrated"`` (either, widened by the
    ladder's own leave-future-out extrapolation errors: :mod:`delphi.calibration`)."""
    noise: float
    """Run-to-run noise, standard deviation of log loss."""
    noise_source: str
    """Where the noise estimate came from."""
    kind: str = "new-run"
    """Which interval ``lower``/``upper`` are: always the new-run one."""
    n_draws: int = 0
    """Bootstrap draws used (0 for the delta method)."""
    n_failed: int = 0
    """Bootstrap draws whose refit failed (left out, reported)."""
    n_checked: int = 0
    """Bootstrap draws checked by the warm-start guard (see :func:`bootstrap`)."""
    n_worse: int = 0
    """Checked draws whose warm-started optimum was worse than the global one (> 1e-9 rel.)."""
    calibration: dict | None = None
    """For ``method="calibrated"``: the calibration model (sigma_0, k, folds), the target's
    extrapolation ratio r and sigma(r), the parameter and run-noise sds, and the base method
    (:func:`delphi.calibration.calibrated_interval`); None otherwise."""

    def __repr__(self) -> str:
        """One line: both intervals, the level, the method and the run noise (the fields,
        :attr:`calibration` among them, hold the rest)."""
        draws = f", n_draws={self.n_draws}" if self.n_draws else ""
        return (f"Interval([{self.lower:.4g}, {self.upper:.4g}] new run, [{self.mean_lower:.4g}, "
                f"{self.mean_upper:.4g}] expected, level={self.level:g}, "
                f"method={self.method!r}, noise={self.noise:.3g}{draws}"
                f"{', calibration={...}' if self.calibration else ''})")

    def label(self) -> str:
        """What the interval rests on, in a few words (the text and HTML reports' label)."""
        cal = self.calibration or {}
        base = cal.get("base_method", "")
        if self.method == "calibrated":
            return (f"calibrated on extrapolation errors"
                    f"{' blended with the reference class' if cal.get('reference') else ''}"
                    f"{f', {base}' if base else ''}")
        if self.method == "reference":
            return ("reference class: other ladders' extrapolation errors"
                    + (f", {base}" if base and base != "none" else ", the fit has no interval"))
        return {"bootstrap": "bootstrap", "ensemble": "ensemble: members' intervals and the "
                "between-model spread", "delta": "delta method, approximate"}.get(
                    self.method, str(self.method))

    def to_dict(self) -> dict:
        out = {"lower": self.lower, "upper": self.upper, "mean_lower": self.mean_lower,
               "mean_upper": self.mean_upper, "level": self.level, "kind": self.kind,
               "method": self.method, "noise": self.noise, "noise_source": self.noise_source,
               "n_draws": self.n_draws, "n_failed": self.n_failed,
               "guard": {"checked": self.n_checked, "worse": self.n_worse}}
        if self.calibration is not None:
            out["calibration"] = dict(self.calibration)
        return out


@dataclass(frozen=True)
class BootstrapDraws:
    """Refitted parameters of bootstrap resamples."""

    params: list[dict[str, float]]
    """One dict of parameter values per successful draw."""
    n_failed: int
    """Draws whose refit raised (e.g. a resample with too few distinct runs)."""
    unit: str
    """What was resampled: ``"run"`` or ``"budget"``."""
    seed: int
    failures: list[str] = field(default_factory=list)
    """First few failure messages."""
    n_checked: int = 0
    """Draws checked by the warm-start guard (every successful draw when it is on)."""
    n_worse: int = 0
    """Checked draws whose warm-started optimum was worse than the global search's by more
    than 1e-9 relative (the global optimum was kept for those)."""
    n_searched: int = 0
    """Checked draws also fitted by the global search: those the basin check flagged, and the
    audit sample (every ``check_every``-th draw)."""
    n_missed: int = 0
    """Audited draws that the basin check had passed but the global search improved (the
    cheap check missed a basin; 0 is what the guard relies on)."""
    warnings: list[str] = field(default_factory=list)
    """Warnings about the draws (e.g. the guard found too many worse warm starts)."""

    @property
    def worse_share(self) -> float:
        """Share of checked draws whose warm start was worse (0 when none was checked)."""
        return self.n_worse / self.n_checked if self.n_checked else 0.0

    def values(self, name: str) -> np.ndarray:
        """Draws of one parameter, shape (n_draws,)."""
        return np.array([p[name] for p in self.params])

    def stderr(self) -> dict[str, float]:
        """Bootstrap standard error of every parameter (ddof = 1)."""
        return {k: float(np.std(self.values(k), ddof=1)) for k in self.params[0]} \
            if len(self.params) > 1 else {}


def _log_compute(fit: Fit, x: Mapping[str, np.ndarray] | None = None) -> np.ndarray | None:
    src = fit.x if x is None else x
    if "flops" in src:
        return np.log(np.asarray(src["flops"], dtype=float))
    if "params" in src and "tokens" in src:
        return np.log(6.0 * np.asarray(src["params"], float) * np.asarray(src["tokens"], float))
    return None


# E[log |z|] for z ~ N(0, 1): turns a fitted mean of log|residual| into log sigma.
_LOG_ABS_NORMAL = -0.6351814227307391


def run_noise(fit: Fit, x: Mapping[str, Sequence[float]] | None = None) -> tuple[float, str]:
    """Run-to-run noise of log loss at the target inputs ``x`` (or overall): (sigma, source).

    The estimate of :func:`_run_noise_estimate`, floored at
    :data:`delphi.fitting.diagnostics.NOISE_FLOOR` (1e-4, about the rounding of a loss logged
    to 4-5 significant digits): identical losses or a law that interpolates the ladder give a
    noise of 0, and an interval resting on it would be zero-width. The source then says so.

    Raises
    ------
    FitError: as :func:`_run_noise_estimate`.
    """

    sigma, source = _run_noise_estimate(fit, x)
    if not sigma >= NOISE_FLOOR:
        return NOISE_FLOOR, (f"{source}; the estimate {sigma:.2g} is below the floor "
                             f"{NOISE_FLOOR:g} and was raised to it")
    return sigma, source


def _run_noise_estimate(fit: Fit, x: Mapping[str, Sequence[float]] | None = None
                        ) -> tuple[float, str]:
    """Run-to-run noise of log loss at the target inputs ``x`` (or overall), not floored.

    * Repeated runs (points with identical inputs: seeds of one configuration): the pooled
      within-group standard deviation.
    * Else the fit's log residuals. When the ladder has 10+ points and the size of the
      residuals trends with compute (small runs are often noisier), a regression of
      log|r| on log C (E[log|z|] = -0.635 for normal z) gives sigma at the target's compute
      (held at the ladder's edge beyond it), used when its slope is significant (|t| > 2.5). Otherwise one pooled scale: the RMS
      with n - p dof below 20 points, a robust 1.4826 x MAD above.

    The parts that do not depend on ``x`` are computed once per fit (:func:`_noise_basis`):
    compare and the calibration backtest ask for thousands of (fold, target) pairs.

    Raises
    ------
    FitError
        Fewer than 3 residual degrees of freedom and no repeated runs: the noise cannot be
        estimated.
    """
    basis = _fit_memo(fit).get("noise")
    if basis is None:
        basis = _fit_memo(fit)["noise"] = _noise_basis(fit)
    if isinstance(basis, FitError):
        raise FitError(str(basis))
    if basis["fixed"] is not None:
        return basis["fixed"]
    trend = basis["trend"]
    target_c = _log_compute(fit, x) if x is not None else None
    if trend is not None and target_c is not None:
        coef, c_min, c_max, c_mean, inflate = trend
        # The trend is known only across the ladder: hold it at the ladder's edge beyond.
        c_at = float(np.clip(target_c[0], c_min, c_max))
        at = float(coef[0] + coef[1] * (c_at - c_mean)) - _LOG_ABS_NORMAL
        return math.exp(at) * inflate, (f"fit residuals, trending with compute "
                                        f"(slope {coef[1]:+.2f} per e-fold of C)")
    return basis["pooled"]


def _noise_basis(fit: Fit) -> dict | FitError:
    """The target-independent parts of :func:`_run_noise_estimate`: ``fixed`` (the answer
    whatever the target: repeated runs), ``trend`` (the significant log|r| ~ log C
    regression, or None) and ``pooled`` (the pooled scale); a FitError (returned, raised by
    the caller) when the noise cannot be estimated."""
    with np.errstate(divide="ignore"):   # an input of 0 (lr decayed to 0) keys as -inf
        keys = np.round(np.log(np.stack([np.asarray(fit.x[c], dtype=float)
                                         for c in fit.law.inputs], axis=1)), 9) + 0.0
    # Groups of identical inputs, in order of first appearance and each in table order (the
    # order the sums below have always run in: the same bits).
    _, first, inverse, counts = np.unique(keys, axis=0, return_index=True,
                                          return_inverse=True, return_counts=True)
    inverse = np.asarray(inverse).ravel()
    log_y = np.log(fit.y)
    reps = [log_y[inverse == g] for g in np.argsort(first, kind="stable") if counts[g] > 1]
    dof_rep = sum(len(v) - 1 for v in reps)
    if dof_rep >= 3:
        ss = sum(float(np.sum((v - v.mean()) ** 2)) for v in reps)
        return {"fixed": (math.sqrt(ss / dof_rep), f"repeated runs ({dof_rep} dof)")}
    if fit.dof < _MIN_NOISE_DOF:
        return FitError(f"{fit.dof} residual degree(s) of freedom and no repeated runs: the "
                        f"run-to-run noise cannot be estimated, and an interval resting on it "
                        f"would be too narrow to trust (need {_MIN_NOISE_DOF} dof or repeated "
                        f"seeds)")
    r = fit.residuals
    inflate = math.sqrt(fit.n_points / fit.dof)
    log_c = _log_compute(fit)
    trend = None
    if log_c is not None and fit.n_points >= 10 and np.ptp(log_c) > 0:
        la = np.log(np.maximum(np.abs(r), 1e-12))
        design = np.stack([np.ones_like(log_c), log_c - log_c.mean()], axis=1)
        coef, ss, *_ = np.linalg.lstsq(design, la, rcond=None)
        resid = la - design @ coef
        s2 = float(resid @ resid) / (len(la) - 2)
        se_b = math.sqrt(s2 / float(np.sum((log_c - log_c.mean()) ** 2)))
        if se_b > 0 and abs(coef[1] / se_b) > 2.5:
            trend = (coef, log_c.min(), log_c.max(), log_c.mean(), inflate)
    rms = float(np.sqrt(np.sum(r ** 2) / fit.dof))
    if fit.n_points < 20:  # too few points for a robust scale
        pooled = rms, f"fit residuals ({fit.dof} dof)"
    else:
        mad = float(np.median(np.abs(r - np.median(r))))
        sigma = 1.4826 * mad * inflate
        pooled = (sigma if sigma > 0 else rms), f"fit residuals ({fit.dof} dof, robust)"
    return {"fixed": None, "trend": trend, "pooled": pooled}


# Per-fit memo of what the intervals reuse (a Fit is immutable): id(fit) -> (weak
# reference to it, dict); the entry goes when the fit does.
_MEMO: dict[int, tuple] = {}


def _fit_memo(fit: Fit) -> dict:
    key = id(fit)
    hit = _MEMO.get(key)
    if hit is not None and hit[0]() is fit:
        return hit[1]
    memo: dict = {}
    _MEMO[key] = (weakref.ref(fit, lambda _ref, k=key: _forget(k, _ref)), memo)
    return memo


def _forget(key: int, ref) -> None:
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is ref:
        del _MEMO[key]


def _quantile(level: float, dof: int | None) -> float:
    """Two-sided quantile: Student t when the dof are few, normal otherwise."""
    q = 0.5 + level / 2
    return float(t_ppf(q, dof)) if dof and dof < 1000 else float(norm_ppf(q))


def _check_level(level: float) -> float:
    return check_level(level)           # FitError; a percent (90) gets "did you mean 0.90?"


#: exp() of more than this overflows float64: interval ends beyond it do not exist.
_LOG_FLOAT_MAX = math.log(np.finfo(float).max)


def delta_interval(fit: Fit, x: Mapping[str, Sequence[float]], *,
                   level: float = DEFAULT_LEVEL) -> Interval:
    """Delta-method interval at one target point ``x`` (each input of shape (1,)).

    var(log L) = g' Sigma g with g = d log L / d(theta) at the fit and Sigma its Gauss-Newton
    covariance (:attr:`Fit.covariance`); parameters at a bound are held fixed. New-run
    interval: log L +- q sqrt(var + sigma_run^2), q from Student t with the fit's dof.

    Raises
    ------
    FitError: no covariance (zero residual dof) or noise estimate, or interval ends beyond
        floating point.
    """
    level = _check_level(level)
    if fit.covariance is None:
        raise FitError("the fit has no covariance (no residual degrees of freedom, or a "
                       "singular direction); no delta-method interval")
    sigma, source = run_noise(fit, x)
    free = tuple(n for n in fit.law.param_names if n not in fit.fixed)
    xt = fit.law.check_inputs({k: np.asarray(v, dtype=float) if not k.startswith("_") else v
                               for k, v in x.items()})
    problem = Problem(law=fit.law, x=xt, log_y=np.zeros(1), delta=fit.delta, free=free,
                      fixed=dict(fit.fixed))
    r, jac, ok = problem.residuals_and_jacobian(problem.pack(fit.params))
    if not ok:
        raise FitError("the law predicts a non-positive loss at the target")
    idx = [free.index(n) for n in fit.covariance_params]
    g = jac[0, idx]
    # A fit that interpolates its ladder has a covariance of ~0: use the floored noise.
    memo = _fit_memo(fit)
    if "covariance" not in memo:
        memo["covariance"] = floored_covariance(fit)
    var = float(g @ memo["covariance"] @ g)
    q = _quantile(level, fit.dof)
    centre = float(r[0])
    half_mean = q * math.sqrt(max(var, 0.0))
    half_new = q * math.sqrt(max(var, 0.0) + sigma ** 2)
    if not abs(centre) + half_new < _LOG_FLOAT_MAX:
        raise FitError(f"the delta-method interval overflows: its half-width in log loss is "
                       f"{half_new:.3g} (run noise {sigma:.3g}); the fit is too uncertain at "
                       f"the target for an interval")
    return Interval(lower=math.exp(centre - half_new), upper=math.exp(centre + half_new),
                    mean_lower=math.exp(centre - half_mean), mean_upper=math.exp(centre + half_mean),
                    level=level, method="delta", noise=sigma, noise_source=source)


def delta_rows(fit: Fit, x: Mapping[str, Sequence[float]], *,
               level: float = DEFAULT_LEVEL) -> dict | None:
    """:func:`delta_interval` at many target points at once, each one's numbers bit for bit
    those of a call at that point alone: ``x`` holds each input with shape (m,); returns
    arrays of shape (m,) ``centre`` (log L), ``lower``, ``upper``, ``mean_lower``,
    ``mean_upper``, ``noise`` and ``ok`` (False where the point's own call would raise:
    a non-positive prediction or an interval beyond floating point; its other entries are
    then NaN). None when the fit has no interval at any point (no covariance or noise
    estimate, a non-positive prediction anywhere, since the law's evaluation is shared), so
    the caller makes each call to get its error. The calibration backtest asks for ~1,800
    points of 27 fits in ``compare``: the law evaluated once per fit, not once per point.
    """
    level = _check_level(level)
    if fit.covariance is None:
        return None
    basis = _fit_memo(fit).get("noise")
    if basis is None:
        basis = _fit_memo(fit)["noise"] = _noise_basis(fit)
    if isinstance(basis, FitError):
        return None
    free = tuple(n for n in fit.law.param_names if n not in fit.fixed)
    xt = fit.law.check_inputs({k: np.asarray(v, dtype=float) if not k.startswith("_") else v
                               for k, v in x.items()})
    m = len(next(iter(xt.values())))
    problem = Problem(law=fit.law, x=xt, log_y=np.zeros(m), delta=fit.delta, free=free,
                      fixed=dict(fit.fixed))
    r, jac, ok_all = problem.residuals_and_jacobian(problem.pack(fit.params))
    if not ok_all:
        return None
    idx = [free.index(n) for n in fit.covariance_params]
    memo = _fit_memo(fit)
    if "covariance" not in memo:
        memo["covariance"] = floored_covariance(fit)
    cov = memo["covariance"]
    q = _quantile(level, fit.dof)
    # run_noise at each point, as it computes it alone (scalar math, the same rounding)
    if basis["fixed"] is not None:
        noise = [basis["fixed"][0]] * m
    elif basis["trend"] is not None and _log_compute(fit, x) is not None:
        coef, c_min, c_max, c_mean, inflate = basis["trend"]
        noise = [math.exp(float(coef[0] + coef[1] * (float(np.clip(c, c_min, c_max))
                                                     - c_mean)) - _LOG_ABS_NORMAL) * inflate
                 for c in _log_compute(fit, x)]
    else:
        noise = [basis["pooled"][0]] * m
    out = {k: np.full(m, np.nan) for k in ("centre", "lower", "upper", "mean_lower",
                                           "mean_upper", "noise")}
    out["ok"] = np.zeros(m, dtype=bool)
    for i in range(m):
        sigma = noise[i] if noise[i] >= NOISE_FLOOR else NOISE_FLOOR
        g = jac[i, idx]      # a new array as at one point: BLAS's rounding can follow alignment
        var = float(g @ cov @ g)
        centre = float(r[i])
        half_mean = q * math.sqrt(max(var, 0.0))
        half_new = q * math.sqrt(max(var, 0.0) + sigma ** 2)
        if not abs(centre) + half_new < _LOG_FLOAT_MAX:
            continue
        out["centre"][i], out["noise"][i], out["ok"][i] = centre, sigma, True
        out["lower"][i], out["upper"][i] = math.exp(centre - half_new), math.exp(centre + half_new)
        out["mean_lower"][i] = math.exp(centre - half_mean)
        out["mean_upper"][i] = math.exp(centre + half_mean)
    return out


# ----------------------------------------------------------------------------- bootstrap
def _units(fit: Fit, unit: str) -> np.ndarray:
    runs = np.array([lbl.split("@")[0] for lbl in fit.labels])
    if unit == "run":
        return runs
    if unit == "budget":
        if "flops" not in fit.x:
            c = 6.0 * fit.x["params"] * fit.x["tokens"] if {"params", "tokens"} <= set(fit.x) \
                else None
        else:
            c = fit.x["flops"]
        if c is None:
            raise FitError("a budget bootstrap needs flops (or params and tokens)")
        order = np.argsort(c, kind="mergesort")
        ids = np.empty(len(c), dtype=int)
        budget, start = -1, None
        for i in order:  # runs within 5% of compute share a budget (as in an isoFLOP design)
            if start is None or c[i] > start * 1.05:
                budget, start = budget + 1, c[i]
            ids[i] = budget
        return ids.astype(str)
    raise FitError(f"unknown bootstrap unit {unit!r}; use 'run' or 'budget'")


#: Most bootstrap draws one call accepts (each draw is a refit).
MAX_DRAWS = 1_000_000
# Every CHECK_EVERY-th draw (from a seeded offset) also runs the global search, to check
# that the warm start found the resample's optimum; a larger share worse than this warns.
CHECK_EVERY = 25
#: The bootstrap's guard checks every draw cheaply (:func:`bootstrap`); every AUDIT_EVERY-th
#: draw also runs the global search, an audit of that check.
AUDIT_EVERY = 250
WORSE_RTOL = 1e-9
#: ... plus this much per point (scipy convention, 0.5 r^2: log residuals of ~1e-6), as the
#: engine's agreement test: a resample the law interpolates has an objective of ~1e-20, where
#: a relative test compares rounding errors.
WORSE_ATOL = 1e-12
_WORSE_WARN = 0.02
#: Which draws the batched refinement left unfinished get the global search: "failed" (the
#: default) those whose L-BFGS-B finish and least-squares polish did not converge either,
#: "all" every one (the rule before 2026-12-04, kept for
#: benchmarks/bench_guard_unfinished.py's comparison).
UNFINISHED_RULE = "failed"
# Improved draws in a block after which its polished draws are searched as well.
_ESCALATE_AFTER = 2
# Draws per batch: fixed by the problem's size alone, so a draw's result never depends on
# the number of workers.
_BATCH_ELEMENTS = 4_000_000


def _batch_size(fit: Fit) -> int:
    k = len(fit.law.linear_names)
    m = max(1, len(fit.law.nonlinear_names))
    return int(max(1, min(64, _BATCH_ELEMENTS // max(1, fit.n_points * k * m))))


def _draw_weights(names: np.ndarray, inverse: np.ndarray,
                  child: np.random.SeedSequence) -> np.ndarray:
    """Point multiplicities of one resample of whole units, shape (n_points,): ``names`` are
    the sorted unit names, ``inverse`` each point's index into them."""
    rng = np.random.default_rng(child)
    chosen = rng.choice(names, size=len(names), replace=True)
    counts = np.zeros(len(names))
    np.add.at(counts, np.searchsorted(names, chosen), 1.0)
    return counts[inverse]


def design_failure(prep, w: np.ndarray) -> str:
    """Why a resample cannot be fitted ("" when it can): too few distinct points, or an
    input that no longer varies (the same checks as the full fit)."""
    keep = w > 0
    if int(keep.sum()) < len(prep.free):
        return (f"resample has {int(keep.sum())} distinct point(s) for {len(prep.free)} free "
                f"parameters")
    try:
        check_design(prep.law, {k: v[keep] for k, v in prep.x.items()
                                 if isinstance(v, np.ndarray) and v.shape == w.shape},
                      prep.y[keep], [prep.labels[i] for i in np.flatnonzero(keep)], prep.free,
                      prep.fixed, prep.bounds)
    except DelphiError as exc:
        return str(exc)
    return ""


def resample_optimum(prep, w: np.ndarray, seed: int) -> np.ndarray:
    """Internal optimum of one resample by the global search (dense screen, then L-BFGS-B
    from its two best distinct points), the points repeated by their multiplicity."""
    idx = np.repeat(np.arange(len(w)), w.astype(int))
    xb = {k: (v[idx] if isinstance(v, np.ndarray) and v.shape == prep.y.shape else v)
          for k, v in prep.x.items()}
    sub = prepare(prep.law, xb, prep.y[idx], fixed=prep.fixed,
                  bounds={k: v for k, v in prep.bounds.items() if k not in prep.fixed},
                  delta=prep.problem.delta)
    return min(global_search(sub, seed=seed, starts=2), key=lambda t: t[1])[0]


def basin_suspects(problem: Problem, probes: np.ndarray | None, weights: np.ndarray,
                   objective: np.ndarray, ibounds) -> np.ndarray:
    """Which warm-started refits the basin check rejects, shape (B,) bool.

    ``probes`` (K, m_free) are :func:`delphi.fitting.engine.basin_probes` of the full-data
    problem, ``weights`` (B, n) the refits' point multiplicities, ``objective`` (B,) their
    optima (scipy convention) and ``ibounds`` the internal bounds. Each probe gets the
    resample's exact NNLS coefficients (:func:`delphi.fitting.search.screen_weighted`),
    clipped into their bounds so the point is feasible, and is scored by the same weighted
    objective as the refits. A refit is suspect when its objective is not finite or lies above
    a probe's by more than :data:`WORSE_RTOL` relative plus :data:`WORSE_ATOL` per point: no
    feasible point scores below an optimum, so such a refit stopped in the wrong basin or short
    of its optimum. All False when ``probes`` is None (guard off)."""
    objective = np.asarray(objective, dtype=float)
    nb = len(objective)
    if probes is None:
        return np.zeros(nb, dtype=bool)
    best = np.full(nb, np.inf)
    if len(probes):
        _, c = screen_weighted(problem, probes, weights)          # (B, K, k_free)
        nk, kf = len(probes), c.shape[2]
        lo = np.array([b[0] if b[0] is not None else -np.inf for b in ibounds])
        hi = np.array([b[1] if b[1] is not None else np.inf for b in ibounds])
        with np.errstate(divide="ignore"):
            z_lin = np.log(np.maximum(c, 1e-300)).reshape(nb * nk, kf)
        z = np.concatenate([z_lin, np.tile(probes, (nb, 1))], axis=1)
        z = np.clip(z, lo, hi)
        score = weighted_objective(problem, z, np.repeat(weights, nk, axis=0))
        best = np.where(np.isfinite(score), score, np.inf).reshape(nb, nk).min(axis=1)
    slack = WORSE_ATOL * weights.sum(axis=1)
    return ~np.isfinite(objective) | (objective > best * (1 + WORSE_RTOL) + slack)


def _bootstrap_block(job) -> list[tuple[dict[str, float] | None, str, int, int]]:
    """Refit one block of draws: [(params or None, failure message, check code, searched)],
    where check code is -1 unchecked (guard off), 0 checked and as good as the checks, 1 a
    check found a lower optimum (kept); searched is 0 when the global search did not run, 1
    when it ran because the cheap check failed, 2 when it ran as an audit only."""
    (law, x, y, labels, fixed, bounds, delta, params, names, inverse, children, audited,
     probes, seed) = job
    # Drawn here, block by block: a large n never holds every draw's weights at once.
    weights = np.stack([_draw_weights(names, inverse, c) for c in children])
    prep = prepare(law, x, y, labels=labels, fixed=fixed, bounds=bounds, delta=delta)
    problem = prep.problem
    z0 = safe_start(problem, params, prep.ibounds)
    failures = [design_failure(prep, w) for w in weights]
    ok = np.array([not f for f in failures])
    out: list[tuple[dict[str, float] | None, str, int, int]] = [(None, f, -1, 0)
                                                                for f in failures]
    if not ok.any():
        return out
    batch = refine_batch(problem, z0, weights[ok], prep.ibounds)
    rows = np.flatnonzero(ok)
    zs, objs = batch.z.copy(), batch.objective.copy()
    # Whether the draw's local refinement converged: the batch's, else L-BFGS-B's finish.
    finished = batch.converged.astype(bool) & np.isfinite(objs)
    for a, b in enumerate(rows):
        z, obj = batch.z[a], float(batch.objective[a])
        if not batch.converged[a] or not np.isfinite(obj):
            # Finish with L-BFGS-B on the resample itself.
            idx = np.repeat(np.arange(len(y)), weights[b].astype(int))
            sub = type(problem)(law=problem.law,
                                x={k: (v[idx] if isinstance(v, np.ndarray) and v.shape == y.shape
                                       else v) for k, v in problem.x.items()},
                                log_y=problem.log_y[idx], delta=problem.delta,
                                free=problem.free, fixed=problem.fixed)
            start = z if np.all(np.isfinite(z)) else z0
            z = refine_one(sub, start, prep.ibounds)[0]
            # L-BFGS-B reports convergence in a flat valley short of the optimum (the dense
            # ladder's power law: 2e-5 relative above the global search's); a trust-region
            # Gauss-Newton polish from there (never worse) reaches it or says it stopped.
            if UNFINISHED_RULE != "all":
                z, _, _, status, _ = refine_least_squares(sub, z, prep.ibounds)
                finished[a] = status > 0
            obj = float(weighted_objective(problem, z, weights[b])[0])
            zs[a], objs[a] = z, obj
            finished[a] &= np.isfinite(obj)
    # The cheap check: each draw's weighted screen at the full data's basin probes. No
    # feasible point can score below a draw's optimum, so a probe below the warm optimum
    # proves it is not the optimum (wrong basin, or stopped short): the global search runs,
    # as it does for a draw the batched refinement did not finish.
    suspects = basin_suspects(problem, probes, weights[ok], objs, prep.ibounds)
    codes = np.full(len(rows), -1 if probes is None else 0)
    searched = np.zeros(len(rows), dtype=int)

    def search(a: int, b: int, why: int) -> None:
        """The global search on draw b (row a); the better optimum kept."""
        searched[a] = why
        try:
            zg = resample_optimum(prep, weights[b], seed)
            obj_g = float(weighted_objective(problem, zg, weights[b])[0])
        except DelphiError:  # the global search found nothing: nothing to compare with
            return
        obj = float(objs[a])
        slack = WORSE_ATOL * float(weights[b].sum())
        if np.isfinite(obj_g) and (not np.isfinite(obj) or obj > obj_g * (1 + WORSE_RTOL) + slack):
            codes[a], zs[a], objs[a] = 1, zg, obj_g

    if probes is not None:
        # A draw whose local refinement did not converge (the batch's, nor L-BFGS-B's and the
        # polish's) is suspect as well as one the basin check rejects. UNFINISHED_RULE "all":
        # every draw the batch left unfinished is suspect (the rule before 2026-12-04).
        unfinished = ~batch.converged.astype(bool)
        first = (unfinished if UNFINISHED_RULE == "all" else ~finished) | suspects
        for a, b in enumerate(rows):
            if first[a] or audited[b]:
                search(a, b, 1 if first[a] else 2)
        # Evidence that warm starts fail in this block (the searches of suspects improved
        # two draws): the draws only the polish finished are searched too, as every
        # unfinished draw was before (the dense ladder's Chinchilla law: polished draws in a
        # basin 2x above the optimum). Counted on suspects alone, so audits do not change
        # the rule; an unfinished draw already audited counts as searched by it.
        if int(np.sum((codes == 1) & (searched == 1))) >= _ESCALATE_AFTER:
            for a, b in enumerate(rows):
                if unfinished[a] and searched[a] == 2:
                    searched[a] = 1
                elif unfinished[a] and not searched[a]:
                    search(a, b, 1)
    for a, b in enumerate(rows):
        if not np.isfinite(objs[a]):
            out[b] = (None, "the refit gave no finite objective", int(codes[a]), int(searched[a]))
        else:
            out[b] = (problem.values(zs[a]), "", int(codes[a]), int(searched[a]))
    return out


def bootstrap(fit: Fit, *, n: int = 200, unit: str = "run", seed: int = 0,
              n_jobs: int | None = None, workers: int | None = None,
              progress: bool | None = None, check_every: int = AUDIT_EVERY) -> BootstrapDraws:
    """Refit ``fit``'s law to ``n`` resamples of its runs (or compute budgets).

    Each draw resamples whole units with replacement (point multiplicities) and refits with
    the same fixed values, bounds and Huber delta, **starting at the full-data optimum**: the
    global search ran once, for ``fit``; draws are refined locally in batches
    (:func:`delphi.fitting.refit.refine_batch`, L-BFGS-B for any draw the batch does not
    finish). The guard checks every draw cheaply: the global search's screen is scored once
    on the full data, the best point of each of its basins is kept
    (:func:`delphi.fitting.engine.basin_probes`), and each draw's weighted screen at those
    points (exact NNLS coefficients for the draw,
    :func:`delphi.fitting.search.screen_weighted`) is compared with its warm optimum. A probe
    scoring lower by more than 1e-9 (relative) proves the warm start stopped in the wrong
    basin or short of the optimum: that draw is fitted by the full global search and the
    better optimum kept. A draw the batched refinement did not finish is finished by L-BFGS-B
    and polished by trust-region least squares
    (:func:`delphi.fitting.refit.refine_least_squares`), and searched as well when the polish
    does not converge; when the searches of two suspects (of either kind) in one block of
    draws improve them, every unfinished draw of the block is searched
    (``benchmarks/bench_guard_unfinished.py`` compares this rule with searching every
    unfinished draw, on 14 ladder and law pairs). Every ``check_every``-th draw (from a seeded offset) is also fitted
    by the global search as an audit of the cheap check. The share of checked draws whose warm
    start was worse is reported (:attr:`BootstrapDraws.n_worse`), with a warning above 2% (and at
    least two draws) or when an audit finds a draw the cheap check passed. Draw b uses the b-th child of
    ``numpy.random.SeedSequence(seed)`` and draws are batched by the problem's size alone, so
    the result is bit-identical for a given seed whatever ``n_jobs`` or backend.

    Parameters
    ----------
    fit: the fit to bootstrap (its points, law and settings are reused).
    n: number of draws.
    unit: ``"run"`` (default) or ``"budget"`` (cluster bootstrap over compute budgets).
    seed: random seed.
    n_jobs: joblib workers (see :mod:`delphi.parallel`; default serial, or the active
        ``joblib.parallel_config``, e.g. a Dask cluster). ``workers`` is an older alias.
    progress: show a progress bar (default: when stderr is a terminal, after 2 s).
    check_every: audit rate of the guard: every draw gets the cheap basin check and every
        ``check_every``-th one the global search too (0 turns the whole guard off).

    Raises
    ------
    FitError: ``fit`` is not a :class:`~delphi.fitting.Fit`, n < 2, an unknown unit, a bad
        n_jobs, or more than half of the draws failed.
    """
    if not isinstance(fit, Fit):
        raise FitError(f"bootstrap resamples a Fit (from delphi.fit), got {type(fit).__name__}")
    if not (isinstance(n, int) and 2 <= n <= MAX_DRAWS):
        raise FitError(f"bootstrap needs 2 <= n <= {MAX_DRAWS:,} draws (--n-boot), got {n!r}")
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise FitError(f"seed must be a non-negative integer, got {seed!r}")
    if n_jobs is None and workers is not None:
        n_jobs = workers
    groups = _units(fit, unit)
    names, inverse = np.unique(groups, return_inverse=True)
    children = np.random.SeedSequence(seed).spawn(n + 1)
    audited = np.zeros(n, dtype=bool)
    probes = None
    if check_every and check_every > 0:
        offset = int(np.random.default_rng(children[n]).integers(min(check_every, n)))
        audited[offset::check_every] = True
        prep = prepare(fit.law, dict(fit.x), fit.y, labels=fit.labels, fixed=dict(fit.fixed),
                       bounds={k: v for k, v in fit.bounds.items() if k not in fit.fixed},
                       delta=fit.delta)
        try:
            probes = basin_probes(prep, seed=seed)
        except DelphiError:  # no basin to probe: the audit sample alone checks the draws
            probes = np.zeros((0, prep.problem.n_free - len(prep.problem.free_lin)))
    bounds = {k: v for k, v in fit.bounds.items() if k not in fit.fixed}
    size = _batch_size(fit)
    jobs = [(fit.law, dict(fit.x), fit.y, fit.labels, dict(fit.fixed), bounds, fit.delta,
             dict(fit.params), names, inverse, children[i:min(i + size, n)],
             audited[i:i + size], probes, seed)
            for i in range(0, n, size)]
    blocks = map_jobs(_bootstrap_block, jobs, n_jobs=n_jobs, desc=f"bootstrap ({n} draws)",
                      show_progress=progress, unit="block")
    results = [r for block in blocks for r in block]
    params = [p for p, _, _, _ in results if p is not None]
    failures = [msg for p, msg, _, _ in results if p is None]
    codes = np.array([c for _, _, c, _ in results])
    searched = np.array([s for _, _, _, s in results], dtype=int)
    n_checked, n_worse = int(np.sum(codes >= 0)), int(np.sum(codes == 1))
    # Audited draws the cheap check passed but the global search improved: it missed a basin.
    missed = int(np.sum((searched == 2) & (codes == 1)))
    if len(failures) > n / 2:
        raise FitError(f"{len(failures)} of {n} bootstrap draws failed (e.g. {failures[0]}); "
                       f"the ladder has too few {unit}s to resample")
    guard_warnings = []
    # One draw is not a rate: below 50 checked draws a single improved draw (often a resample
    # the law interpolates, stopped a hair short of objective 0) would pass 2% on its own.
    if n_checked and n_worse >= 2 and n_worse / n_checked > _WORSE_WARN:
        guard_warnings.append(f"warm-start guard: {n_worse} of {n_checked} checked bootstrap draws "
                        f"found a better optimum by global search than by the warm start "
                        f"(> {_WORSE_WARN:.0%}): the resamples' optima are far from the "
                        f"full-data fit, so the interval may be too narrow; check the fit")
        warnings.warn(guard_warnings[-1], FitWarning, stacklevel=user_stacklevel())
    if missed:
        guard_warnings.append(f"warm-start guard: the global search improved {missed} audited "
                              f"draw(s) that the basin check had passed: the check misses a "
                              f"basin of this fit; use check_every=1 for a global search on "
                              f"every draw")
        warnings.warn(guard_warnings[-1], FitWarning, stacklevel=user_stacklevel())
    return BootstrapDraws(params=params, n_failed=len(failures), unit=unit, seed=seed,
                          failures=failures[:5], n_checked=n_checked, n_worse=n_worse,
                          n_searched=int(np.sum(searched > 0)), n_missed=missed,
                          warnings=guard_warnings)


def bootstrap_interval(fit: Fit, draws: BootstrapDraws, x: Mapping[str, Sequence[float]], *,
                       level: float = DEFAULT_LEVEL, seed: int = 0) -> Interval:
    """Percentile intervals at one target point from bootstrap draws.

    Expected loss: percentiles of the law evaluated with each draw's parameters. New run: the
    same draws times exp(eps), eps ~ N(0, sigma_run^2) (seeded), so both parameter and run
    noise enter. The new-run interval contains the expected-loss one: an end Monte-Carlo noise
    put inside it (few draws, run noise small against the parameter spread) is moved out to
    the expected-loss end (docs/intervals.md).

    Raises
    ------
    FitError: no successful draws, or no noise estimate.
    """
    level = _check_level(level)
    if not draws.params:
        raise FitError("no successful bootstrap draws")
    sigma, source = run_noise(fit, x)
    xt = {k: np.asarray(v, dtype=float) if not k.startswith("_") else v for k, v in x.items()}
    preds = np.array([fit.law.predict(p, xt)[0] for p in draws.params])
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    eps = rng.normal(0.0, sigma, size=(len(preds), _NOISE_PER_DRAW))
    with np.errstate(over="ignore", invalid="ignore"):
        new = (preds[:, None] * np.exp(eps)).ravel()
    if not (np.all(np.isfinite(preds)) and np.all(np.isfinite(new))):
        raise FitError(f"the bootstrap interval overflows: a draw's prediction or the run noise "
                       f"(sigma {sigma:.3g} in log loss) is beyond floating point at the target; "
                       f"the fit is too uncertain there for an interval")
    a = (1 - level) / 2
    lo, hi = np.quantile(preds, [a, 1 - a])
    nlo, nhi = np.quantile(new, [a, 1 - a])
    # Adding run noise can only widen the interval; with few draws Monte-Carlo noise can put a
    # new-run end inside the expected-loss interval, so the nesting is imposed.
    nlo, nhi = min(nlo, lo), max(nhi, hi)
    return Interval(lower=float(nlo), upper=float(nhi), mean_lower=float(lo), mean_upper=float(hi),
                    level=level, method="bootstrap", noise=sigma, noise_source=source,
                    n_draws=len(draws.params), n_failed=draws.n_failed,
                    n_checked=draws.n_checked, n_worse=draws.n_worse)
