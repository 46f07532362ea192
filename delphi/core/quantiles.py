"""Quantiles of the normal and Student t distributions without importing ``scipy.stats``.

``scipy.stats`` takes about half a second to import (it builds every distribution's
docstring), a sixth of a short CLI command; ``scipy.special``'s inverse CDFs are what its
``norm.ppf`` and ``t.ppf`` evaluate, so the values are bit-identical. Also the one check of
an interval's level (:func:`check_level`), shared by the library and the command line.
"""

from __future__ import annotations

import numbers

from ..errors import FitError

__all__ = ["norm_ppf", "t_ppf", "check_level", "percent_hint"]


def norm_ppf(q):
    """Standard normal quantile Phi^-1(q), q in (0, 1) (float or array): ``scipy.special.ndtri``."""
    from scipy.special import ndtri  # imported here: scipy.special is loaded with scipy.optimize
    return ndtri(q)


def t_ppf(q, df):
    """Student t quantile with ``df`` degrees of freedom: ``scipy.special.stdtrit(df, q)``."""
    from scipy.special import stdtrit
    return stdtrit(df, q)


def percent_hint(level) -> str | None:
    """The message for a ``level`` given as a percent (10 <= level < 100, e.g. 90 for 0.9):
    ``"level is a fraction in (0, 1): did you mean 0.90?"``; None for anything else. Below
    10 a percent would be a coverage nobody asks for (1.5 is more likely a slip of another
    kind than a 1.5% interval), so those get the plain out-of-range message."""
    if (not isinstance(level, numbers.Real) or isinstance(level, bool)
            or not 10 <= float(level) < 100):
        return None
    frac = float(level) / 100
    shown = f"{frac:.2f}" if round(frac, 2) == frac else f"{frac:g}"
    return f"level is a fraction in (0, 1): did you mean {shown}?"


def check_level(level, *, what: str = "interval level", error: type[Exception] = FitError
                ) -> float:
    """``level``, a central coverage, as a float when it is a real number in (0, 1).

    Raises ``error`` (FitError unless told; callers pass the class their own docs name)
    otherwise, naming ``what`` (``"interval level must be in (0, 1), got 1.5"``); a level
    given as a percent (10 <= level < 100) gets :func:`percent_hint`'s message instead,
    since 90 for 0.9 is the likely slip.
    """
    hint = percent_hint(level)
    if hint is not None:
        raise error(f"{hint} (got {level!r})")
    if not (isinstance(level, numbers.Real) and not isinstance(level, bool)
            and 0 < float(level) < 1):
        raise error(f"{what} must be in (0, 1), got {level!r}")
    return float(level)
