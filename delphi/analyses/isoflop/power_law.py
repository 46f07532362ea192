"""Power laws N* = G C^a across budgets, fitted by (weighted) least squares in log space."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...core.text import level_percent
from ...errors import FitError
from ._common import count_of, interval_text, as_jsonable


# ------------------------------------------------------------------------------- power laws
@dataclass(frozen=True)
class PowerLaw:
    """y = G C^a, fitted by (weighted) least squares of ln y on ln C.

    ``quantity`` is ``"params"`` (N*, parameters) or ``"tokens"`` (D*, tokens); C in FLOPs.
    """

    quantity: str
    """What y is: ``"params"`` or ``"tokens"``."""
    coefficient: float
    """G [y units / FLOPs^a]."""
    exponent: float
    """a [dimensionless]."""
    exponent_stderr: float
    """Standard error of a from the (weighted) residual scatter (NaN with 2 points)."""
    r2: float
    """(Weighted) coefficient of determination in log space."""
    n_points: int
    """Budgets (or envelope points) fitted."""
    weighted: bool
    """True when the fit used per-point weights."""
    exponent_interval: tuple[float, float] | None = None
    """Bootstrap percentile interval of a, when bootstrap draws were available."""
    level: float | None = None
    """Level of :attr:`exponent_interval` (e.g. 0.9)."""
    n_draws: int = 0
    """Bootstrap draws asked for per budget (0 without a bootstrap interval)."""
    n_valid: int = 0
    """Joint draws behind :attr:`exponent_interval`: draw k of every budget is fitted together,
    so this is the smallest number of valid draws (interior vertex) among the budgets."""
    no_interval_reason: str = ""
    """Why a bootstrap was run but :attr:`exponent_interval` is None (e.g. the valid draws of
    a budget are all the original sample, so their spread is an artefact); empty otherwise."""

    def predict(self, flops: float | Sequence[float] | np.ndarray) -> np.ndarray:
        """y at compute ``flops`` [FLOPs], shape as ``np.asarray(flops)``."""
        c = np.asarray(flops, dtype=float)
        return self.coefficient * c ** self.exponent

    @property
    def formula(self) -> str:
        """E.g. ``"N* = 4.23e-08 * C^0.8353"``."""
        sym = {"params": "N*", "tokens": "D*"}.get(self.quantity, self.quantity)
        return f"{sym} = {self.coefficient:.4g} * C^{self.exponent:.4f}"

    def to_dict(self) -> dict:
        """JSON-ready fields."""
        return as_jsonable({"quantity": self.quantity, "coefficient": self.coefficient,
                          "exponent": self.exponent, "exponent_stderr": self.exponent_stderr,
                          "exponent_interval": self.exponent_interval, "level": self.level,
                          "n_draws": self.n_draws, "n_valid_draws": self.n_valid,
                          "no_interval_reason": self.no_interval_reason or None,
                          "r2": self.r2, "n_points": self.n_points, "weighted": self.weighted})

    def report(self) -> str:
        """One line: formula, uncertainty of the exponent, fit quality.

        With a bootstrap interval, that interval is the uncertainty shown (with how many
        draws were valid): the residual standard error of a regression through a handful of
        vertices (1 residual dof for 3 budgets) ignores each vertex's own uncertainty and can
        be ~0 when the vertices happen to lie on a line. Without one, the residual standard
        error is shown with its degrees of freedom (none with 2 budgets)."""
        if self.exponent_interval is not None and self.level is not None:
            unc = (f", {level_percent(self.level)} bootstrap interval of a "
                   f"{interval_text(self.exponent_interval, 4)} (from {self.n_valid} of "
                   f"{self.n_draws} draws, the fewest valid in any budget)")
        elif math.isfinite(self.exponent_stderr):
            unc = (f" +- {self.exponent_stderr:.2g} (s.e. of a from the scatter of "
                   f"{self.n_points} points, {self.n_points - 2} dof; no bootstrap interval"
                   + (f": {self.no_interval_reason}" if self.no_interval_reason else "") + ")")
        else:
            unc = (" (no uncertainty: 2 points and no bootstrap interval"
                   + (f": {self.no_interval_reason}" if self.no_interval_reason else "") + ")")
        return (f"{self.formula}{unc}  ({count_of(self.n_points, 'point')}, "
                f"{'weighted' if self.weighted else 'unweighted'}, R^2 {self.r2:.4f})")


def fit_power_law(flops: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
                  *, weights: Sequence[float] | np.ndarray | None = None,
                  quantity: str = "params") -> PowerLaw:
    """Fit y = G C^a by weighted least squares of ln y on ln C.

    This is the fit of Hoffmann et al. 2022 (Approaches 1 and 2) and of Porian et al. 2024,
    whose code regresses ln N* on ln C with sample weights ``1 / sd^2``.

    Parameters
    ----------
    flops: C of each point, shape (n,) [FLOPs].
    values: y of each point, shape (n,) [params or tokens].
    weights: non-negative weight per point, shape (n,); ``None`` for an unweighted fit.
    quantity: label of y (``"params"`` or ``"tokens"``).

    Raises
    ------
    FitError
        Fewer than 2 points, non-positive or non-finite values, fewer than 2 distinct C, or
        bad weights.
    """
    c = np.asarray(flops, dtype=float)
    y = np.asarray(values, dtype=float)
    if c.shape != y.shape or c.ndim != 1:
        raise FitError(f"power-law fit of {quantity}: flops and values must be 1-D of the same "
                       f"length, got shapes {c.shape} and {y.shape}")
    if not (np.all(np.isfinite(c)) and np.all(c > 0) and np.all(np.isfinite(y)) and np.all(y > 0)):
        raise FitError(f"power-law fit of {quantity}: flops and values must be positive and finite")
    if len(np.unique(c)) < 2:
        raise FitError(f"power-law fit of {quantity} needs at least 2 distinct compute budgets, "
                       f"got {len(np.unique(c))}")
    w = np.ones_like(c) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != c.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise FitError(f"power-law fit of {quantity}: weights must be finite, >= 0 and not all 0")
    x, z = np.log(c), np.log(y)
    sw = np.sqrt(w)
    design = np.stack([np.ones_like(x), x], axis=1)
    (b0, a), *_ = np.linalg.lstsq(design * sw[:, None], z * sw, rcond=None)
    resid = z - (b0 + a * x)
    n = len(x)
    zbar = np.sum(w * z) / np.sum(w)
    ss_tot = float(np.sum(w * (z - zbar) ** 2))
    ss_res = float(np.sum(w * resid ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    if n > 2:
        cov = (ss_res / (n - 2)) * np.linalg.inv(design.T @ (design * w[:, None]))
        se = float(math.sqrt(max(cov[1, 1], 0.0)))
    else:
        se = math.nan
    return PowerLaw(quantity=quantity, coefficient=float(math.exp(b0)), exponent=float(a),
                    exponent_stderr=se, r2=float(r2), n_points=n, weighted=weights is not None)
