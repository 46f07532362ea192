"""The fitting engine: objective, global search, refinement and diagnostics -> :class:`Fit`."""

from .api import DIVERGENCE_THRESHOLD, SCREEN_MAX_SHARE, ScalingLawFitter, fit
from .engine import DEFAULT_DELTA, fit_arrays
from .result import Fit

__all__ = ["fit", "fit_arrays", "Fit", "ScalingLawFitter", "DEFAULT_DELTA", "DIVERGENCE_THRESHOLD",
           "SCREEN_MAX_SHARE"]
