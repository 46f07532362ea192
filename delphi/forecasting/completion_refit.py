"""Completing one run again and again as its checkpoints arrive, each refit warm-started.

:class:`WarmCompletion` fits the ``annealing`` curve law (Tissue et al. 2024, arXiv 2408.11029,
Eq. 1: L(s) = L0 + A S1^-alpha - C S2, S2 with momentum 0.999) to a run's checkpoints after
warm-up under its planned LR schedule, and evaluates it at the schedule's last step, as
:func:`delphi.complete` does. Called with a growing prefix of the same run, each fit starts from
the previous optimum (``warm_start``: no global search, L-BFGS-B only); a full global search is
run on the first fit and whenever the number of fitted checkpoints has doubled since the last
full search, so a warm start cannot stay in a stale basin for long. Used by
:func:`delphi.forecasting.target_curve.completion_errors` (the ladder's runs cut at growing
fractions) and :mod:`delphi.analyses.tracking` (the tracked run, checkpoint by checkpoint), so
the error model and the tracker refit the same way.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import DelphiError
from ..fitting import Fit, fit_arrays
from ..inputs.law_inputs import ANNEALING_MOMENTUM
from ..inputs.schedules import features, warmup_end
from ..laws import ANNEALING

__all__ = ["WarmCompletion", "MIN_CHECKPOINTS"]

#: Fewest checkpoints after warm-up for a completion (the law has 4 parameters).
MIN_CHECKPOINTS = 6


class WarmCompletion:
    """Run-only completions of one run under its planned schedule, refitted warm.

    Parameters
    ----------
    lrs: the planned LR at every step, shape (total_steps,) (any scale: the law's
        coefficients absorb it); from ``Schedule.lrs()`` or ``LoggedSchedule.lrs()``.
    seed: seed of the global searches.

    Attributes
    ----------
    fit_: the last successful :class:`~delphi.Fit`, or None.
    n_full_: global searches run; n_warm_: warm-started refits.
    """

    def __init__(self, lrs, *, seed: int = 0):
        self.lrs = np.asarray(lrs, dtype=float)
        self.total_steps = int(self.lrs.size)
        self.seed = seed
        self.warmup = warmup_end(self.lrs)
        end = features(self.lrs, np.array([self.total_steps]), momentum=ANNEALING_MOMENTUM)
        self._end = {"S1": end["S1"], "S2": end["S2"]}
        self.fit_: Fit | None = None
        self._full_at = 0
        self.n_full_ = 0
        self.n_warm_ = 0

    def predict(self, steps, losses) -> float | None:
        """The predicted final loss from checkpoints ``steps`` (shape (n,), increasing, >= 1,
        <= total steps) with ``losses`` (shape (n,), > 0); None when fewer than
        :data:`MIN_CHECKPOINTS` are after warm-up, or the fit fails or predicts a non-positive
        loss."""
        steps = np.asarray(steps, dtype=np.int64)
        y = np.asarray(losses, dtype=float)
        use = steps >= self.warmup
        if use.sum() < MIN_CHECKPOINTS:
            return None
        s, y = steps[use], y[use]
        f = features(self.lrs, s, momentum=ANNEALING_MOMENTUM)
        x = {"S1": f["S1"], "S2": f["S2"]}
        prev = self.fit_
        full = prev is None or len(s) >= 2 * self._full_at
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if full:
                    fit = fit_arrays(ANNEALING, x, y, seed=self.seed,
                                     init=None if prev is None else prev.params)
                else:
                    fit = fit_arrays(ANNEALING, x, y, seed=self.seed, warm_start=prev.params)
                value = float(fit.predict(self._end)[0])
        except DelphiError:
            return None
        if full:
            self._full_at = len(s)
            self.n_full_ += 1
        else:
            self.n_warm_ += 1
        self.fit_ = fit
        return value if math.isfinite(value) and value > 0 else None
