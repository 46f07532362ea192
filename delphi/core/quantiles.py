"""Quantiles of the normal and Student t distributions without importing ``scipy.stats``.

``scipy.stats`` takes about half a second to import (it builds every distribution's
docstring), a sixth of a short CLI command; ``scipy.special``'s inverse CDFs are what its
``norm.ppf`` and ``t.ppf`` evaluate, so the values are bit-identical.
"""

from __future__ import annotations

__all__ = ["norm_ppf", "t_ppf"]


def norm_ppf(q):
    """Standard normal quantile Phi^-1(q), q in (0, 1) (float or array): ``scipy.special.ndtri``."""
    from scipy.special import ndtri  # imported here: scipy.special is loaded with scipy.optimize
    return ndtri(q)


def t_ppf(q, df):
    """Student t quantile with ``df`` degrees of freedom: ``scipy.special.stdtrit(df, q)``."""
    from scipy.special import stdtrit
    return stdtrit(df, q)
