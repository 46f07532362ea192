"""Is the fit identified, and is it more than a constant? Checks beyond bounds and standard errors.

Bounds and Gauss-Newton standard errors describe a fit only near its optimum, as if the
objective were quadratic. Two failures escape them:

* **Degenerate fits.** A ladder whose losses show no trend the law can follow beyond their
  noise (flat, identical or rising losses) is fitted by a law that collapsed to a constant
  over the ladder, e.g. an
  exponent at its upper bound with a coefficient near 1e90, or an exponent at 0. Any
  extrapolation of it is arbitrary. The test: a constant loss, fitted with the same Huber
  objective, is within the noise-equivalent threshold of the law's objective (a likelihood-ratio
  test of the constant against the law, with ``n_free - 1`` degrees of freedom).
  :func:`delphi.forecast.predict` then refuses to extrapolate (:class:`DegenerateFitError`)
  unless asked to (``allow_degenerate=True``, ``--allow-degenerate``).
* **Unidentified parameters.** The profile of the objective along a parameter (the other
  parameters refitted at each value) can stay flat far beyond the quadratic approximation.
  Profile-likelihood intervals (Venzon & Moolgavkar 1988, Appl. Statist. 37:87; Raue et al.
  2009, Bioinformatics 25:1923) are the values where the profile stays within a threshold of
  the optimum; a parameter whose interval reaches the edge of its admissible range is
  *practically non-identifiable* (Raue et al. 2009): the ladder does not identify it, and the
  range is reported. Delphi profiles every free non-linear parameter (exponents such as alpha,
  beta; admissible range: its bounds, e.g. [0, 5]) and the free floor E (range: 0 up to the
  lowest observed loss). Each side of a profile is walked outwards from the optimum: a first
  step of 1.5x the Wald half-width, then steps growing 3x up to the edge; a crossing of the
  threshold after more than one step is narrowed by 4 bisections, and the end of the interval
  is interpolated in sqrt(increase) (exact for a quadratic profile).

**Noise-equivalent threshold.** For Gaussian log residuals of scale sigma, a chi-square(1)
change of the log-likelihood at level ``q`` is an increase of the summed squared residuals by
``chi2_1(q) sigma^2``, i.e. of the summed Huber objective (``r^2 / 2`` inside delta) by
``chi2_1(q) sigma^2 / 2``. For the Huber loss the drop-in-dispersion statistic is scaled by
``E[psi^2] / E[psi']`` (Schrader & Hettmansperger 1980, Biometrika 67:93; Ronchetti 1982), so

    threshold = chi2_df(q) / 2 * E[psi_delta(r)^2] / P(|r| <= delta),   r ~ N(0, sigma^2),

which is ``chi2_df(q) sigma^2 / 2`` when sigma << delta (least squares) and
``chi2_df(q) delta sigma sqrt(pi/2) / 2`` when sigma >> delta (least absolute deviations).
``q = 0.95``. ``sigma`` is the fit's residual scale (RMS over the residual dof below 20 points,
1.4826 x MAD above), floored at :data:`NOISE_FLOOR`.

**Correlated pairs.** Pairs of free parameters with |correlation| > :data:`CORRELATION_LIMIT`
in :attr:`Fit.covariance` (engine coordinates: log c for coefficients, the exponent itself).
A term's scale and exponent are always strongly correlated when its input is far from 1
(log N ~ 20): the pair is identified jointly, not one by one.

Cost: a profile point is a warm-started local refit (:func:`~delphi.fitting.refit.refine_batch`,
the bootstrap's batched BFGS) from starts moved along the valley by the covariance and from
coefficients solved exactly (variable projection); a well-identified parameter needs one point
per side. On Epoch's 240 Chinchilla points the three profiles take 6 points, ~35 ms, less than
the fit itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping

import numpy as np

from ..core.text import level_percent
from ..errors import (DegenerateFitError, DelphiError, FitError, FitWarning, UnidentifiedError,
                      option, user_stacklevel)
from .objective import Problem, huber
from .search import screen
from .refit import refine_batch, refine_one
from .engine import internal_bounds, start_vector, safe_start

if TYPE_CHECKING:  # pragma: no cover
    from .result import Fit

__all__ = ["Profile", "Identification", "identify", "attach_identification",
           "refuse_degenerate", "require_identified", "residual_scale", "noise_threshold",
           "floored_covariance", "correlated_pairs", "DegenerateFitError", "UnidentifiedError",
           "NOISE_FLOOR", "PROFILE_LEVEL", "CORRELATION_LIMIT"]

#: Smallest residual scale (standard deviation of log loss) delphi assumes: about the rounding
#: of a loss logged to 4-5 significant digits, and well below any seed-to-seed noise. A fit
#: that interpolates its ladder exactly (residuals ~1e-16) says nothing about noise; thresholds
#: and intervals then use this floor instead of 0, so an interval is never zero-width.
NOISE_FLOOR = 1e-4
#: Level of the profile-likelihood intervals and of the degeneracy test.
PROFILE_LEVEL = 0.95
#: Parameter pairs with a larger |correlation| are reported.
CORRELATION_LIMIT = 0.95
# Profile walk: first step 1.5x the Wald half-width, then steps growing by this factor.
_GROWTH = 3.0
_MAX_STEPS = 12
# Bisections of a bracket found after more than one step (1/16 of the last step).
_BISECT = 4
# Batched BFGS iterations of one profile refit (see _Profiler.evaluate).
_PROFILE_ITER = 12
# L-BFGS-B iterations that finish a profile refit the capped BFGS could not decide.
_FINISH_ITER = 2000


# ----------------------------------------------------------------------------- thresholds
def residual_scale(fit: "Fit") -> float:
    """The fit's residual scale sigma (standard deviation of log loss), not floored.

    RMS of the log residuals over the residual dof (at least 1) below 20 points; above,
    1.4826 x MAD x sqrt(n / dof) (robust to the few outliers the Huber loss tolerates), or the
    RMS when the MAD is 0.
    """
    r = np.asarray(fit.residuals, dtype=float)
    dof = max(fit.n_points - fit.n_free, 1)
    rms = float(np.sqrt(np.sum(r ** 2) / dof))
    if len(r) < 20:
        return rms
    mad = 1.4826 * float(np.median(np.abs(r - np.median(r)))) * math.sqrt(len(r) / dof)
    return mad if mad > 0 else rms


def noise_threshold(sigma: float, delta: float, *, level: float = PROFILE_LEVEL,
                    df: int = 1) -> float:
    """Increase of the summed Huber objective equivalent to a chi-square(``df``) change at
    ``level`` for Gaussian log residuals of scale ``sigma`` (see the module docstring).

    ``sigma`` is floored at :data:`NOISE_FLOOR`; ``delta`` is the Huber delta (log scale).
    """
    from scipy.special import chdtri

    sigma = max(float(sigma), NOISE_FLOOR)
    c = delta / sigma
    p_in = math.erf(c / math.sqrt(2.0))                     # P(|r| <= delta) = E[psi']
    e_psi2 = (sigma ** 2 * (p_in - c * math.sqrt(2 / math.pi) * math.exp(-c * c / 2))
              + delta ** 2 * (1 - p_in))                   # E[min(|r|, delta)^2]
    return 0.5 * float(chdtri(df, 1 - level)) * e_psi2 / max(p_in, 1e-300)


def floored_covariance(fit: "Fit") -> np.ndarray | None:
    """:attr:`Fit.covariance` with the residual variance floored at :data:`NOISE_FLOOR` ** 2.

    A fit that interpolates its ladder (residual scale below the floor) gets a covariance of
    ~0 and so a zero-width interval; this recomputes ``(J'J)^-1 sigma^2`` at the floor (same
    rows as :attr:`Fit.covariance_params`). None when the fit has no covariance.
    """
    if fit.covariance is None:
        return None
    r = np.asarray(fit.residuals, float)
    s2 = float(r @ r) / max(fit.dof, 1)
    if s2 >= NOISE_FLOOR ** 2:
        return fit.covariance
    free = tuple(n for n in fit.law.param_names if n not in fit.fixed)
    problem = Problem(law=fit.law, x=fit.x, log_y=np.log(fit.y), delta=fit.delta, free=free,
                      fixed=dict(fit.fixed))
    _, jac, ok = problem.residuals_and_jacobian(problem.pack(fit.params))
    if not ok:
        return fit.covariance
    j = jac[:, [free.index(n) for n in fit.covariance_params]]
    return np.linalg.pinv(j.T @ j) * NOISE_FLOOR ** 2


# ----------------------------------------------------------------------------- results
@dataclass(frozen=True)
class Profile:
    """The profile of the fit's objective along one parameter.

    Values are in natural units (the floor E in the loss unit, exponents dimensionless).
    """

    name: str
    """The parameter profiled."""
    value: float
    """Its fitted value."""
    scanned: tuple[float, float]
    """Its admissible range (bounds; for the floor, 0 up to the lowest observed loss)."""
    within: tuple[float, float]
    """Where the profile stays within the noise-equivalent threshold: the profile-likelihood
    interval at :data:`PROFILE_LEVEL` (ends interpolated between evaluated points)."""
    open_ends: tuple[bool, bool]
    """Whether the interval reaches the lower / upper end of :attr:`scanned`."""
    points: tuple[tuple[float, float], ...]
    """Evaluated (value, objective increase over the optimum), in walking order."""
    assessed: bool = True
    """False when the fit has no residual degrees of freedom: the threshold then rests on the
    assumed :data:`NOISE_FLOOR`, not on the ladder's scatter, so a closed interval does not
    show that the ladder identifies the parameter (an open one still shows a range of exact
    fits)."""

    @property
    def identified(self) -> bool:
        """False when the interval reaches an end of the admissible range (Raue et al. 2009:
        practically non-identifiable), or when the profile could not be assessed
        (:attr:`assessed`); see :attr:`unidentified` for the first case alone."""
        return self.assessed and not any(self.open_ends)

    @property
    def unidentified(self) -> bool:
        """True when the interval reaches an end of the admissible range."""
        return any(self.open_ends)

    def describe(self) -> str:
        """One phrase: the interval, and which ends reach the admissible range."""
        lo, hi = self.within
        ends = [w for w, o in zip(("lower", "upper"), self.open_ends) if o]
        text = f"{self.name} in [{lo:.4g}, {hi:.4g}]"
        if ends:
            text += f" (reaches the {' and '.join(ends)} end of its range " \
                    f"[{self.scanned[0]:.4g}, {self.scanned[1]:.4g}])"
        return text

    def to_dict(self) -> dict:
        # "identified": None when not assessed (no residual dof) and the interval is closed.
        return {"value": self.value,
                "identified": (self.identified if self.assessed or self.unidentified
                               else None),
                "assessed": self.assessed,
                "interval": list(self.within), "range": list(self.scanned),
                "open_ends": list(self.open_ends),
                "points": [[float(v), float(d)] for v, d in self.points]}


@dataclass(frozen=True)
class Identification:
    """What the ladder identifies: profiles, correlated pairs and degeneracy of one fit."""

    threshold: float
    """Noise-equivalent increase of the objective (chi-square(1) at :attr:`level`)."""
    sigma: float
    """Residual scale used (standard deviation of log loss, floored at :data:`NOISE_FLOOR`)."""
    level: float
    """Level of the profile intervals and the degeneracy test."""
    profiles: dict[str, Profile] = field(default_factory=dict)
    """Profile of each free non-linear parameter and of the free floor, by name."""
    correlated: tuple[tuple[str, str, float], ...] = ()
    """(name, name, correlation) of free parameter pairs with |correlation| above
    :data:`CORRELATION_LIMIT` (engine coordinates: log c for coefficients)."""
    degenerate: str = ""
    """Why the fit is degenerate (a constant fits the ladder as well); "" when it is not."""
    constant: float = math.nan
    """The best constant loss (Huber on log residuals), for the degeneracy test."""
    constant_increase: float = math.nan
    """Objective of that constant minus the law's objective."""
    n_refits: int = 0
    """Local refits the profiles took."""
    findings: tuple[str, ...] = ()
    """Other findings recorded as fit warnings: a free floor above the lowest observed loss,
    a trend set by fixed parameters alone (see :func:`identify`)."""

    @property
    def unidentified(self) -> dict[str, tuple[float, float]]:
        """Parameters the ladder does not identify -> their profile interval."""
        return {n: p.within for n, p in self.profiles.items() if p.unidentified}

    def warnings(self) -> list[str]:
        """The warnings recorded on the fit (one per unidentified parameter, one for
        degeneracy)."""
        out = []
        if self.degenerate:
            out.append(f"degenerate fit: {self.degenerate}")
        out.extend(self.findings)
        for p in self.profiles.values():
            if p.unidentified:
                out.append(f"not identified by the ladder: the objective stays within the noise "
                           f"threshold ({self.threshold:.3g}) for {p.describe()}; answers that "
                           f"rest on {p.name} are arbitrary within that range")
        return out

    def report_lines(self) -> list[str]:
        """Lines of :meth:`Fit.report`."""
        lines = []
        if self.profiles:
            ok = [p.describe() for p in self.profiles.values() if p.identified]
            bad = [p.describe() for p in self.profiles.values() if p.unidentified]
            unknown = [p.name for p in self.profiles.values()
                       if not p.assessed and not p.unidentified]
            head = (f"profile    {level_percent(self.level)} profile intervals (objective within "
                    f"{self.threshold:.3g} of the optimum, noise {self.sigma:.3g})")
            lines.append(head)
            if ok:
                lines.append(f"  identified      {'; '.join(ok)}")
            if bad:
                lines.append(f"  NOT IDENTIFIED  {'; '.join(bad)}")
            if unknown:
                lines.append(f"  not assessed    {', '.join(unknown)} (no residual degrees of "
                             f"freedom: the threshold rests on the assumed noise floor "
                             f"{NOISE_FLOOR:g}, not on the ladder's scatter)")
        if self.correlated:
            pairs = ", ".join(f"{a}~{b} {c:+.3f}" for a, b, c in self.correlated)
            lines.append(f"correlated {pairs} (|corr| > {CORRELATION_LIMIT:g}; identified "
                         f"jointly, not one by one)")
        return lines   # degeneracy and unidentified parameters are also in Fit.warnings

    def to_dict(self) -> dict:
        """The ``identification`` block of the JSON output."""
        def num(v):
            return float(v) if math.isfinite(v) else None
        return {"threshold": self.threshold, "noise": self.sigma, "level": self.level,
                "method": "profile likelihood (Venzon & Moolgavkar 1988; Raue et al. 2009), "
                          "Huber drop-in-dispersion threshold",
                "profiles": {n: p.to_dict() for n, p in self.profiles.items()},
                "unidentified": sorted(self.unidentified),
                "correlated": [{"params": [a, b], "correlation": c}
                               for a, b, c in self.correlated],
                "degenerate": bool(self.degenerate), "degenerate_reason": self.degenerate or None,
                "constant": num(self.constant), "constant_increase": num(self.constant_increase),
                "n_refits": self.n_refits, "findings": list(self.findings)}


# ----------------------------------------------------------------------------- computing
def correlated_pairs(fit: "Fit", limit: float = CORRELATION_LIMIT) -> tuple[tuple[str, str, float], ...]:
    """Pairs of :attr:`Fit.covariance_params` with |correlation| > ``limit``, strongest first."""
    cov = fit.covariance
    if cov is None or len(fit.covariance_params) < 2:
        return ()
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    out = []
    names = fit.covariance_params
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            if sd[i] > 0 and sd[j] > 0:
                c = float(cov[i, j] / (sd[i] * sd[j]))
                if abs(c) > limit:
                    out.append((names[i], names[j], max(-1.0, min(1.0, c))))
    return tuple(sorted(out, key=lambda t: -abs(t[2])))


def _best_constant(log_y: np.ndarray, delta: float) -> tuple[float, float]:
    """(objective, constant) of the best constant loss under the summed Huber loss of log
    residuals (a convex problem in one variable)."""
    from scipy.optimize import minimize_scalar

    lo, hi = float(log_y.min()), float(log_y.max())
    if hi - lo < 1e-300:
        return 0.0, math.exp(lo)
    res = minimize_scalar(lambda m: float(np.sum(huber(m - log_y, delta))), bounds=(lo, hi),
                          method="bounded", options={"xatol": 1e-12 * max(1.0, abs(lo))})
    return float(res.fun), math.exp(float(res.x))


class _Profiler:
    """Refits of the fit's problem with one parameter held at given values."""

    def __init__(self, fit: "Fit") -> None:
        self.fit = fit
        self.law = fit.law
        self.free = tuple(n for n in fit.law.param_names if n not in fit.fixed)
        self.log_y = np.log(np.asarray(fit.y, float))
        self.bounds = dict(fit.bounds)
        self.n_refits = 0
        full = Problem(law=self.law, x=fit.x, log_y=self.log_y, delta=fit.delta, free=self.free,
                       fixed=dict(fit.fixed))
        self.best = float(full.objective(full.pack(fit.params))) if self.free else fit.objective
        self.best = min(self.best, float(fit.objective))
        # Predictor for warm starts: how the other parameters move with the profiled one
        # along the valley, from the covariance (engine coordinates: log c, exponents as is).
        self.slopes: dict[str, dict[str, float]] = {}
        cov, names = fit.covariance, fit.covariance_params
        if cov is not None:
            for k, name in enumerate(names):
                if cov[k, k] > 0:
                    self.slopes[name] = {m: float(cov[j, k] / cov[k, k])
                                         for j, m in enumerate(names) if m != name}

    def _coord(self, name: str, value: float) -> float:
        return (math.log(value) if value > 0 else -math.inf) if self.law.param(name).linear \
            else float(value)

    def predicted(self, name: str, value: float, base: Mapping[str, float]) -> dict | None:
        """``base`` moved along the covariance's valley to ``name`` = ``value`` (None when
        there is no covariance or a coordinate is not finite)."""
        slopes = self.slopes.get(name)
        step = self._coord(name, value) - self._coord(name, base[name])
        if not slopes or not math.isfinite(step):
            return None
        out = dict(base)
        for m, b in slopes.items():
            u = self._coord(m, base[m]) + b * step
            if not (math.isfinite(u) and (u < 700 or not self.law.param(m).linear)):
                return None
            out[m] = math.exp(u) if self.law.param(m).linear else u
        out[name] = value
        return out

    def evaluate(self, name: str, value: float, starts: Iterable[Mapping[str, float] | None],
                 projected: Iterable[Mapping[str, float]] = (), threshold: float = math.inf,
                 finish: bool = True):
        """(objective increase over the fit, parameter values) with ``name`` held at ``value``
        and the other free parameters refitted from each of ``starts`` (None entries skipped)
        and of ``projected`` (their non-linear parameters, with the coefficients solved exactly
        there: variable projection, as in the global search, a far better start after a long
        step); the best is kept.

        The refit is the bootstrap's batched BFGS (:func:`~delphi.fitting.refit.refine_batch`),
        first capped at :data:`_PROFILE_ITER` iterations. A capped result is kept when it
        converged, when it is already within ``threshold`` (the true minimum is lower still),
        or when it is above ``threshold`` by more than twice the decrease a Gauss-Newton step
        (IRLS curvature) still promises; otherwise L-BFGS-B finishes it (a close call, or a
        flat valley where BFGS is slow) when ``finish``, else the capped value (an upper
        bound) is returned."""

        fixed = {**self.fit.fixed, name: float(value)}
        free = tuple(n for n in self.free if n != name)
        problem = Problem(law=self.law, x=self.fit.x, log_y=self.log_y, delta=self.fit.delta,
                          free=free, fixed=fixed)
        if not free:
            return problem.objective(np.zeros(0)) - self.best, dict(fixed)
        ibounds = internal_bounds(problem, self.bounds)
        z0 = []
        y = np.asarray(self.fit.y, float)
        n_lin = len(problem.free_lin)
        for s, project in [(s, False) for s in starts] + [(s, True) for s in projected]:
            if s is None:
                continue
            try:
                z = safe_start(problem, {**s, **fixed}, ibounds)
            except FitError:  # a start the reduced problem cannot use: the others remain
                continue
            if not project:
                z0.append(z)
                continue
            obj, coefs = screen(problem, z[n_lin:][None, :], y)
            if np.isfinite(obj[0]):
                z0.append(start_vector(problem, z[n_lin:], coefs[0], y, ibounds))
        if not z0:
            return math.inf, None
        z0 = np.stack(z0)
        self.n_refits += len(z0)
        batch = refine_batch(problem, z0, np.ones((len(z0), len(self.log_y))), ibounds,
                             max_iter=_PROFILE_ITER)
        obj = np.where(np.isfinite(batch.objective), batch.objective, np.inf)
        k = int(np.argmin(obj))
        z, f = batch.z[k], float(obj[k])
        inc = f - self.best
        decided = batch.converged[k] or inc <= threshold or (
            math.isfinite(inc) and inc - 2 * _promised(problem, z) > threshold)
        if not decided and finish:     # a close call or a flat valley: refine to convergence
            start = z if np.all(np.isfinite(z)) else z0[k]
            z, f, _, _ = refine_one(problem, start, ibounds, max_iter=_FINISH_ITER)
            self.n_refits += 1
        if not math.isfinite(f):
            return math.inf, None
        return f - self.best, problem.values(z)


def _promised(problem: Problem, z: np.ndarray) -> float:
    """Decrease of the summed Huber objective a Gauss-Newton step from ``z`` promises:
    g' H^+ g / 2 with g = J' psi_delta(r) and the IRLS curvature H = J' diag(min(1, delta/|r|)) J
    (inf when the residuals are not finite)."""
    r, jac, ok = problem.residuals_and_jacobian(z)
    if not ok:
        return math.inf
    d = problem.delta
    g = jac.T @ np.clip(r, -d, d)
    h = (jac.T * np.minimum(1.0, d / np.maximum(np.abs(r), 1e-300))) @ jac
    return max(float(g @ np.linalg.pinv(h, rcond=1e-12) @ g) / 2, 0.0)


def _range(fit: "Fit", name: str) -> tuple[float, float]:
    """Admissible range of a profiled parameter: its bounds (the law's search range where a
    bound is infinite); for the floor, 0 up to just below the lowest observed loss."""
    lo, hi = fit.bounds[name]
    v = fit.params[name]
    if name == fit.law.floor:
        # The fit itself does not bound a free floor by the losses: a fitted E above the
        # lowest loss (see identify's findings) is inside the range scanned.
        return max(lo, 0.0), max(min(hi, float(np.min(fit.y)) * (1 - 1e-9)), v)
    p = fit.law.param(name)
    s_lo, s_hi = p.search if p.search else (v - 1.0, v + 1.0)
    lo = lo if math.isfinite(lo) else min(s_lo, v)
    hi = hi if math.isfinite(hi) else max(s_hi, v)
    return lo, hi


def _walk(prof: _Profiler, name: str, threshold: float, sign: int, edge: float, h0: float,
          points: list) -> tuple[float, bool]:
    """Walk the profile from the fitted value toward ``edge``; returns (end of the interval on
    that side, whether it reaches the edge)."""
    fit = prof.fit
    v0 = fit.params[name]
    if sign * (edge - v0) <= 1e-12 * max(1.0, abs(v0)):
        return v0, True                         # the fit sits at this end of the range
    prev_v, prev_d, prev_values = v0, 0.0, fit.params
    step = h0
    for _ in range(_MAX_STEPS):
        v = v0 + sign * step
        if sign * (v - edge) >= 0:
            v = edge
        # Starts (one batched refit): the previous point and the optimum moved along the
        # valley, and the previous point's non-linear parameters with exact coefficients.
        starts = [prof.predicted(name, v, prev_values)]
        if prev_values is not fit.params:
            starts.append(prof.predicted(name, v, fit.params))
        d, values = prof.evaluate(name, v, starts, [prev_values], threshold)
        points.append((float(v), float(max(d, 0.0)) if math.isfinite(d) else math.inf))
        if not d <= threshold:                  # crossed (or infeasible)
            if prev_v != v0:
                # Far from the optimum the profile need not be quadratic (a flat valley ending
                # at a cliff): narrow the bracket by bisection first.
                for _ in range(_BISECT):
                    mid = 0.5 * (prev_v + v)
                    # An unfinished refit here (an upper bound) can only pull the end
                    # inwards, by at most the bracket being bisected.
                    dm, vm = prof.evaluate(name, mid, [prof.predicted(name, mid, prev_values)],
                                           [prev_values], threshold, finish=False)
                    points.append((float(mid), float(max(dm, 0.0)) if math.isfinite(dm)
                                   else math.inf))
                    if dm <= threshold:
                        prev_v, prev_d, prev_values = mid, dm, vm
                    else:
                        v, d = mid, dm
            if not math.isfinite(d):
                return prev_v, False
            # Interpolate in sqrt(increase), linear in the distance for a quadratic profile.
            a, b = math.sqrt(max(prev_d, 0.0)), math.sqrt(d)
            t = (math.sqrt(threshold) - a) / (b - a) if b > a else 1.0
            return prev_v + min(max(t, 0.0), 1.0) * (v - prev_v), False
        if v == edge:
            return edge, True
        prev_v, prev_d, prev_values = v, d, values
        step *= _GROWTH
    return prev_v, True                         # never left the threshold: treat as open


def _profile(prof: _Profiler, name: str, threshold: float) -> Profile:
    fit = prof.fit
    lo, hi = _range(fit, name)
    v0 = fit.params[name]
    # First step: 1.5x the Wald half-width at the threshold (standard error rescaled to the
    # floored noise), else 2% of the range.
    se = fit.stderr.get(name, math.nan)
    r = np.asarray(fit.residuals, float)
    s_fit = math.sqrt(float(r @ r) / max(fit.dof, 1)) if fit.dof > 0 else 0.0
    if math.isfinite(se) and se > 0 and s_fit > 0:
        # se / s_fit = sqrt([(J'J)^-1]_kk): the quadratic profile crosses T at sqrt(2T) times it.
        # The Huber profile is flatter than the least-squares one by E[psi'] = P(|r| <= delta).
        p_in = math.erf(fit.delta / (max(s_fit, NOISE_FLOOR) * math.sqrt(2.0)))
        h0 = 1.5 * math.sqrt(2 * threshold / max(p_in, 1e-3)) * se / s_fit
    else:
        h0 = 0.02 * (hi - lo)
    h0 = min(max(h0, 1e-6 * max(1.0, abs(v0)), 1e-4 * (hi - lo)), 0.5 * (hi - lo))
    points: list = []
    low, open_lo = _walk(prof, name, threshold, -1, lo, h0, points)
    up, open_hi = _walk(prof, name, threshold, +1, hi, h0, points)
    return Profile(name=name, value=float(v0), scanned=(float(lo), float(hi)),
                   within=(float(low), float(up)), open_ends=(open_lo, open_hi),
                   points=tuple(points), assessed=fit.dof > 0)


def identify(fit: "Fit", *, level: float = PROFILE_LEVEL,
             limit: float = CORRELATION_LIMIT, profiles: bool = True) -> Identification:
    """Profiles, correlated pairs and the degeneracy test of ``fit`` (see the module docstring).

    Profiles every free non-linear parameter and the free floor; each profile point is a local
    refit warm-started from its neighbour and from the optimum. ``profiles=False`` skips the
    profiles (most of the cost; :attr:`Identification.profiles` is then empty) and keeps the
    degeneracy test, the correlated pairs and the other findings, e.g. for the many nested
    fits of :func:`delphi.analyses.backtest.prefix_fits`, whose profiles are not shown.

    Returns
    -------
    Identification (attach it to the fit with ``dataclasses.replace``; :func:`delphi.fitting.fit`
    does).
    """
    sigma = max(residual_scale(fit), NOISE_FLOOR)
    threshold = noise_threshold(sigma, fit.delta, level=level)
    prof = _Profiler(fit)
    names = [n for n in fit.law.nonlinear_names if n not in fit.fixed]
    if fit.law.floor and fit.law.floor not in fit.fixed:
        names.insert(0, fit.law.floor)
    found = {}
    for name in names if profiles else ():   # with no residual dof too: an exact fit may
        found[name] = _profile(prof, name, threshold)   # exist along a range
    # Degenerate: a constant loss describes the ladder as well as the law. The test compares
    # the law with a one-parameter constant, so it needs a law with more than one free
    # parameter: with one (the others fixed) the constant fits as many points as the law
    # does, and the law's trend over the ladder is the fixed values', not a collapse.
    j_const, const = _best_constant(prof.log_y, fit.delta)
    increase = j_const - prof.best
    df = max(fit.n_free - 1, 1)
    limit_const = noise_threshold(sigma, fit.delta, level=level, df=df)
    degenerate = ""
    findings = []
    if fit.n_free <= 1 and fit.fixed:
        free = ", ".join(n for n in fit.law.param_names if n not in fit.fixed) or "nothing"
        given = ", ".join(f"{k} = {v:g}" for k, v in fit.fixed.items())
        where = ("the ladder's one point sets" if fit.n_points == 1 else
                 f"the ladder's {fit.n_points} points set")
        findings.append(f"only {free} is fitted: {where} the level, and the trend the law "
                        f"extrapolates comes entirely from the fixed {given}, not from the "
                        f"ladder")
    elif increase <= limit_const:
        at = [_bound_phrase(fit, n) for n in fit.at_bound]
        degenerate = (f"the law collapsed to a constant over the ladder: a constant loss of "
                      f"{const:.5g} fits it as well (objective {j_const:.3g} vs the law's "
                      f"{prof.best:.3g}, within the noise threshold {limit_const:.3g})"
                      + (f"; {', '.join(at)}" if at else "")
                      + "; the ladder shows no trend the law can follow beyond its noise "
                        "(flat, identical or rising losses), so extrapolating it is arbitrary"
                      + _against_trend(fit))
    floor = fit.law.floor
    if floor and floor not in fit.fixed and len(fit.y):
        # The engine bounds a free floor only by 0; a fitted E above a run's loss is no
        # irreducible loss (the law cannot reach that run): say what it is instead.
        i = int(np.argmin(fit.y))
        e = float(fit.params[floor])
        if e > float(fit.y[i]):
            what = (f"the law is a constant at the losses' Huber centre {const:.4g}"
                    if degenerate else "the law cannot reach that run's loss")
            findings.append(f"the fitted floor {floor} = {e:.4g} is above the lowest observed "
                            f"loss {float(fit.y[i]):.4g} (run {fit.labels[i]!r}): {what}, so "
                            f"{floor} is not an irreducible loss here")
    return Identification(threshold=float(threshold), sigma=float(sigma), level=float(level),
                          profiles=found, correlated=correlated_pairs(fit, limit),
                          degenerate=degenerate, constant=float(const),
                          constant_increase=float(increase), n_refits=prof.n_refits,
                          findings=tuple(findings))


def _against_trend(fit) -> str:
    """'': or which runs lose against the trend: in compute order, a run whose loss is above
    every cheaper run's while the ladder otherwise falls (one diverged or mis-tuned rung can
    make the law collapse to a constant, and the cause is that run, not a flat ladder)."""
    x = fit.x
    if "flops" in x:
        c = np.asarray(x["flops"], dtype=float)
    elif "params" in x and "tokens" in x:
        c = 6.0 * np.asarray(x["params"], dtype=float) * np.asarray(x["tokens"], dtype=float)
    else:
        return ""
    y = np.asarray(fit.y, dtype=float)
    if len(y) < 3 or c.shape != y.shape:
        return ""
    order = np.argsort(c, kind="stable")
    ys = y[order]
    best = np.minimum.accumulate(ys)
    # above the lowest cheaper loss by more than 1% (noise), and the cheaper runs fall
    rising = np.flatnonzero((np.arange(len(ys)) > 0) & (ys > np.r_[np.inf, best[:-1]] * 1.01))
    if not len(rising) or len(rising) > max(1, len(ys) // 3) or ys[0] <= best[-1] * 1.01:
        return ""
    named = ", ".join(f"{fit.labels[order[i]]!r} (loss {ys[i]:.4g} at C = {c[order[i]]:.3g}, "
                      f"above {best[i - 1]:.4g} of a cheaper run)" for i in rising[:3])
    return (f"; but the other runs do fall with compute: run(s) {named} go against the trend "
            f"(diverged, mis-tuned or mislabelled?): check them, or leave them out of the "
            f"ladder and fit again")


def _bound_phrase(fit: "Fit", name: str) -> str:
    """``alpha = 5 at a bound``, or for a coefficient whose term the engine found negligible
    (below 1e-6 of the loss on every point, so reported at its lower bound 0 while its value
    is not 0): ``A's term negligible over the ladder (as if A = 0)``."""
    value = float(fit.params[name])
    lo, _ = fit.bounds.get(name, (math.nan, math.nan))
    if fit.law.param(name).linear and lo == 0 and value > 0:
        return f"{name}'s term negligible over the ladder (as if {name} = 0)"
    return f"{name} = {value:.3g} at a bound"


def require_identified(fit: "Fit", names: Iterable[str], what: str, hint: str = "") -> None:
    """Raise :class:`UnidentifiedError` when ``what`` (an answer) rests on a parameter of
    ``names`` that the fit's ladder does not identify, naming it and its profile interval
    (``hint`` ends the message, e.g. how to get the answer anyway).

    Does nothing for a fit without :attr:`Fit.identification`.
    """
    ident = getattr(fit, "identification", None)
    if ident is None:
        return
    bad = {n: iv for n, iv in ident.unidentified.items() if n in set(names)}
    if not bad:
        return
    which = "; ".join(ident.profiles[n].describe() for n in bad)
    raise UnidentifiedError(
        f"{what} rests on {', '.join(bad)}, which the ladder does not identify: the fit's "
        f"objective stays within the noise threshold ({ident.threshold:.3g}) for {which}"
        + (f"; {hint}" if hint else ""))


def attach_identification(fit: "Fit", **options) -> "Fit":
    """``fit`` with :attr:`Fit.identification` set (:func:`identify`) and its findings added to
    :attr:`Fit.warnings`, each also issued as a :class:`~delphi.errors.FitWarning`."""
    import warnings as _warnings
    from dataclasses import replace


    try:
        ident = identify(fit, **options)
    except (DelphiError, ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:
        # The fit stands; say that its identification could not be checked.
        message = f"identification not checked: profiling the fit failed ({exc})"
        _warnings.warn(message, FitWarning, stacklevel=user_stacklevel())
        return replace(fit, warnings=tuple(fit.warnings) + (message,))
    found = ident.warnings()
    for message in found:
        _warnings.warn(message, FitWarning, stacklevel=user_stacklevel())
    return replace(fit, identification=ident, warnings=tuple(fit.warnings) + tuple(found))


def refuse_degenerate(fit: "Fit", *, allow: bool = False, what: str = "extrapolate") -> str:
    """Raise :class:`DegenerateFitError` when ``fit`` is degenerate (:attr:`Fit.degenerate`),
    unless ``allow``; then return a short warning for the forecast that points at the fit's
    degenerate-fit warning ("" when the fit is not degenerate).
    """
    reason = fit.degenerate
    if not reason:
        return ""
    ladder = fit.extra.get("ladder")
    where = f" to ladder {ladder!r}" if ladder else ""
    if not allow:
        raise DegenerateFitError(
            f"refusing to {what} a degenerate fit of law {fit.law.name!r}{where}: {reason}. "
            f"Check the loss column and the runs; pass "
            f"{option('allow_degenerate=True', '--allow-degenerate')} to predict anyway")
    # The reason itself is the fit's "degenerate fit: ..." warning; not repeated here.
    return (f"DEGENERATE FIT extrapolated on request "
            f"({option('allow_degenerate=True', '--allow-degenerate')}): the law collapsed to a "
            f"constant over the ladder (see the fit's degenerate-fit warning)")
