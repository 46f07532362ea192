"""The fitting engine: objective, global search, refinement and diagnostics -> :class:`Fit`."""

from .engine import DEFAULT_DELTA, fit_arrays
from .result import Fit

__all__ = ["fit_arrays", "Fit", "DEFAULT_DELTA"]
