"""Completing one run again and again as its checkpoints arrive, each refit warm-started.

:class:`WarmCompletion` fits the ``annealing`` curve law (Tissue et al. 2024, arXiv 2408.11029,
Eq. 1: L(s) = L0 + A S1^-alpha - C S2, S2 with momentum 0.999) to a run's checkpoints after
warm-up under its planned LR schedule, and evaluates it at the schedule's last step, as
:func:`delphi.complete` does, but with a fitter made for thousands of refits:

* the objective is the sum of squared relative residuals ((y - L) / y)^2 (about the squared
  log residuals; ``complete`` minimises a Huber loss of them);
* for a given alpha the law is linear in (L0, A, C), solved exactly by non-negative least
  squares (every coefficient >= 0, the law's signs), so only alpha is searched: variable
  projection (Golub & Pereyra 1973), as delphi's fitting engine does;
* a full search (64 alphas, log-spaced in [0.01, 3], then a bounded 1-D refinement around the
  best) runs on the first fit and whenever the number of fitted checkpoints has doubled since
  the last full search; every other refit is warm-started: the 1-D refinement only, in
  [alpha / 1.5, 1.5 alpha] around the previous optimum, falling back to the full search when
  its optimum lands on an edge of that bracket.

Used by :func:`delphi.forecasting.target_curve.completion_errors` (the ladder's runs cut at
growing fractions) and :mod:`delphi.registry.tracking` (the tracked run, checkpoint by
checkpoint), so the error model and the tracker refit the same way.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import minimize_scalar, nnls

from ..inputs.law_inputs import ANNEALING_MOMENTUM
from ..inputs.schedules import features, warmup_end

__all__ = ["WarmCompletion", "MIN_CHECKPOINTS", "ALPHA_GRID"]

#: Fewest checkpoints after warm-up for a completion (the law has 4 parameters).
MIN_CHECKPOINTS = 6


#: alpha values of the full search.
ALPHA_GRID = np.geomspace(0.01, 3.0, 64)
_ALPHA_BOUNDS = (1e-3, 5.0)


def _profile(alpha: float, cols: tuple, y: np.ndarray) -> tuple[float, np.ndarray]:
    """(objective, (L0, A, C)) at ``alpha``: non-negative least squares in relative error."""
    ones, s1, s2 = cols
    x = np.column_stack([ones, s1 ** -alpha, -s2]) / y[:, None]
    scale = np.linalg.norm(x, axis=0)
    scale[scale == 0] = 1.0
    coef, rnorm = nnls(x / scale, np.ones_like(y))
    return float(rnorm) ** 2, coef / scale


class WarmCompletion:
    """Run-only completions of one run under its planned schedule, refitted warm.

    Parameters
    ----------
    lrs: the planned LR at every step, shape (total_steps,) (any scale: the law's
        coefficients absorb it); from ``Schedule.lrs()`` or ``LoggedSchedule.lrs()``.
    start_step: fit only checkpoints from this step on (and after warm-up, always).

    Attributes
    ----------
    params_: the last fit's ``{"L0", "A", "C", "alpha"}``, or None.
    n_full_: full searches run; n_warm_: warm-started refits.
    """

    def __init__(self, lrs, *, start_step: int = 1):
        self.lrs = np.asarray(lrs, dtype=float)
        self.total_steps = int(self.lrs.size)
        self.warmup = max(warmup_end(self.lrs), int(start_step))
        end = features(self.lrs, np.array([self.total_steps]), momentum=ANNEALING_MOMENTUM)
        self._end = (float(end["S1"][0]), float(end["S2"][0]))
        self._s1, self._s2 = None, None
        self.params_: dict | None = None
        self._full_at = 0
        self.n_full_ = 0
        self.n_warm_ = 0

    def _features(self, s: np.ndarray):
        # the areas at every step once (cumulative sums): a refit reads its checkpoints' rows
        if self._s1 is None:
            f = features(self.lrs, np.arange(1, self.total_steps + 1),
                         momentum=ANNEALING_MOMENTUM)
            self._s1, self._s2 = f["S1"], f["S2"]
        return self._s1[s - 1], self._s2[s - 1]

    def _refine(self, lo: float, hi: float, cols, y):
        res = minimize_scalar(lambda a: _profile(a, cols, y)[0], bounds=(lo, hi),
                              method="bounded", options={"xatol": 1e-5})
        return float(res.x)

    def predict(self, steps, losses) -> float | None:
        """The predicted final loss from checkpoints ``steps`` (shape (n,), increasing, in
        1..total steps) with ``losses`` (shape (n,), > 0); None when fewer than
        :data:`MIN_CHECKPOINTS` are from the start step (after warm-up) on, or the fit predicts
        a non-positive loss."""
        steps = np.asarray(steps, dtype=np.int64)
        y = np.asarray(losses, dtype=float)
        use = (steps >= self.warmup) & (steps <= self.total_steps)
        if use.sum() < MIN_CHECKPOINTS:
            return None
        s, y = steps[use], y[use]
        s1, s2 = self._features(s)
        cols = (np.ones_like(y), s1, s2)
        prev = self.params_
        alpha = None
        if prev is not None and len(s) < 2 * self._full_at:
            lo = max(_ALPHA_BOUNDS[0], prev["alpha"] / 1.5)
            hi = min(_ALPHA_BOUNDS[1], prev["alpha"] * 1.5)
            alpha = self._refine(lo, hi, cols, y)
            if min(alpha - lo, hi - alpha) < 1e-4 * (hi - lo):
                alpha = None            # on the bracket's edge: the basin moved, search again
            else:
                self.n_warm_ += 1
        if alpha is None:
            objective = [_profile(a, cols, y)[0] for a in ALPHA_GRID]
            i = int(np.argmin(objective))
            lo = ALPHA_GRID[max(i - 1, 0)] if i > 0 else _ALPHA_BOUNDS[0]
            hi = ALPHA_GRID[i + 1] if i + 1 < ALPHA_GRID.size else _ALPHA_BOUNDS[1]
            alpha = self._refine(lo, hi, cols, y)
            self._full_at = len(s)
            self.n_full_ += 1
        _, (l0, a, c) = _profile(alpha, cols, y)
        self.params_ = {"L0": float(l0), "A": float(a), "C": float(c), "alpha": alpha}
        value = l0 + a * self._end[0] ** -alpha - c * self._end[1]
        return float(value) if math.isfinite(value) and value > 0 else None
