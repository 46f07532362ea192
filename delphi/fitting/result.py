"""The typed result of a fit."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ..laws.base import Inputs, Law
from ..ladder import Exclusion

if TYPE_CHECKING:  # pragma: no cover
    from .diagnostics import Identification

__all__ = ["Fit"]


@dataclass(frozen=True)
class Fit:
    """A fitted law, with everything needed to judge the fit (like scipy's ``OptimizeResult``).

    Check :attr:`converged` and :attr:`warnings` before trusting :attr:`params`;
    ``print(fit)`` gives a readable report.
    """

    law: Law
    """The law fitted."""
    params: dict[str, float]
    """Every parameter's value in natural units (fixed ones included)."""
    fixed: dict[str, float]
    """Parameters held fixed, and their values."""
    bounds: dict[str, tuple[float, float]]
    """Bounds used for each parameter (natural units)."""
    objective: float
    """Summed Huber loss of log residuals at the optimum (scipy convention)."""
    delta: float
    """Huber delta used (on log residuals)."""
    converged: bool
    """True when the optimiser met its tolerances; a False fit carries a warning."""
    message: str
    """The optimiser's message for the best start."""
    n_points: int
    """Number of points fitted."""
    n_free: int
    """Number of free parameters."""
    at_bound: tuple[str, ...]
    """Free parameters that ended at (or numerically on) a bound."""
    warnings: tuple[str, ...]
    """Everything the user should know: bounds hit, poorly identified directions, no dof..."""
    stderr: dict[str, float]
    """Approximate standard errors (Gauss-Newton, from the curvature of the log residuals)."""
    residuals: np.ndarray
    """log(L_pred) - log(L_obs) per point, shape (n_points,)."""
    labels: tuple[str, ...]
    """Run id of each point."""
    x: Mapping[str, np.ndarray]
    """Inputs fitted (ladder columns the law reads), each shape (n_points,)."""
    y: np.ndarray
    """Observed losses fitted, shape (n_points,)."""
    n_starts: int
    """Starts refined after the global search."""
    n_agree: int
    """Starts that reached the best objective (within 1e-6 relative)."""
    exclusions: tuple[Exclusion, ...] = ()
    """Runs left out of the fit and why."""
    covariance: np.ndarray | None = None
    """Approximate covariance (Gauss-Newton) of the free parameters not at a bound, in the
    engine's coordinates: log c for coefficients, the value itself for exponents; rows in
    :attr:`covariance_params` order. None when the fit has no residual degrees of freedom."""
    covariance_params: tuple[str, ...] = ()
    """Parameter names of :attr:`covariance`'s rows."""
    extra: dict = field(default_factory=dict)
    """Free-form provenance (ladder name, sha256, metric...)."""
    identification: "Identification | None" = None
    """What the ladder identifies (:func:`delphi.fitting.diagnostics.identify`): the profile
    of the objective along each free exponent and the free floor E, with its profile-likelihood
    interval at 95% (Venzon & Moolgavkar 1988; Raue et al. 2009); parameter pairs with
    |correlation| > 0.95 in :attr:`covariance`; and whether the law collapsed to a constant
    over the ladder (:attr:`degenerate`). Set by :func:`delphi.fitting.fit`; None for fits
    made otherwise (e.g. :func:`~delphi.fitting.fit_arrays`, warm-started refits)."""

    @property
    def success(self) -> bool:
        """Converged and with every parameter identified (warnings may still apply)."""
        return self.converged

    @property
    def unidentified(self) -> dict[str, tuple[float, float]]:
        """Parameters the ladder does not identify -> the range over which the objective stays
        within the noise-equivalent threshold (its profile interval reaches the end of the
        parameter's admissible range). Empty when all are identified or nothing was checked."""
        return dict(self.identification.unidentified) if self.identification else {}

    @property
    def correlated(self) -> tuple[tuple[str, str, float], ...]:
        """(name, name, correlation) of free parameter pairs with |correlation| > 0.95 in
        :attr:`covariance` (coefficients as log c). Empty when none or nothing was checked."""
        return self.identification.correlated if self.identification else ()

    @property
    def degenerate(self) -> str:
        """Why the law collapsed to a constant over the ladder (a constant loss fits the
        ladder within the noise-equivalent threshold of the law), or "" when it did not.
        :func:`delphi.forecast.predict` refuses to extrapolate a degenerate fit."""
        return self.identification.degenerate if self.identification else ""

    @property
    def dof(self) -> int:
        """Residual degrees of freedom: points minus free parameters."""
        return self.n_points - self.n_free

    def predict(self, x: Inputs) -> np.ndarray:
        """Predicted loss at inputs ``x`` (each array of shape (n,)) -> shape (n,).

        Raises
        ------
        TargetError
            Missing, non-finite or non-positive inputs.
        """
        return self.law.predict(self.params, x)

    def to_dict(self) -> dict:
        """JSON-ready summary (the ``fit`` and ``params`` blocks of the CLI's JSON)."""
        return {
            "law": self.law.name,
            "params": {k: float(v) for k, v in self.params.items()},
            "fit": {
                "n_runs": self.n_points,
                "n_free": self.n_free,
                "dof": self.dof,
                "objective": self.objective,
                "huber_delta": self.delta,
                "converged": self.converged,
                "message": self.message,
                "fixed": dict(self.fixed),
                "at_bound": list(self.at_bound),
                "stderr": {k: float(v) for k, v in self.stderr.items()},
                "n_starts": self.n_starts,
                "n_agree": self.n_agree,
                "warnings": list(self.warnings),
                "excluded": [{"run": e.run, "reason": e.reason} for e in self.exclusions],
                "notes": list(self.extra.get("notes", ())),
                "runs": list(self.labels),
                "identification": (self.identification.to_dict()
                                   if self.identification is not None else None),
            },
        }

    def report(self) -> str:
        """A readable, multi-line report of the fit."""
        runs = len({lbl.split("@")[0] for lbl in self.labels})
        what = f"{self.n_points} runs" if runs == self.n_points else \
            f"{self.n_points} checkpoints of {runs} run{'s' if runs != 1 else ''}"
        lines = [f"law        {self.law.name}: {self.law.formula}",
                 f"points     {what}, {self.n_free} free parameters ({self.dof} residual dof)",
                 f"objective  {self.objective:.6g}  (summed Huber, delta={self.delta:g}, "
                 f"on log residuals)",
                 f"converged  {'yes' if self.converged else 'NO'}: {self.message} "
                 f"({self.n_agree}/{self.n_starts} starts agree)",
                 "parameters"]
        for name, value in self.params.items():
            if name in self.fixed:
                note = "fixed"
            else:
                se = self.stderr.get(name)
                note = f"+- {se:.3g} (approx. s.e.)" if se is not None and np.isfinite(se) else ""
                if name in self.at_bound:
                    # A coefficient the engine calls "at 0" because its term is negligible
                    # over the ladder (its value is not 0): say that, not "at bound".
                    negligible = (self.law.param(name).linear and value > 0
                                  and self.bounds.get(name, (None,))[0] == 0)
                    note += "  TERM NEGLIGIBLE (as if 0)" if negligible else "  AT BOUND"
            lines.append(f"  {name:<8} {value:>14.6g}  {note}")
        rms = float(np.sqrt(np.mean(self.residuals ** 2))) if len(self.residuals) else float("nan")
        lines.append(f"residuals  rms {rms:.3g}, max |r| {np.max(np.abs(self.residuals)):.3g} (log scale)")
        if self.identification is not None:
            lines.extend(self.identification.report_lines())
        for e in self.exclusions:
            lines.append(f"excluded   {e.run}: {e.reason}")
        for note in self.extra.get("notes", ()):
            lines.append(f"note       {note}")
        for w in self.warnings:
            lines.append(f"warning    {w}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v:.4g}" for k, v in self.params.items())
        return (f"Fit(law={self.law.name!r}, {params}, objective={self.objective:.4g}, "
                f"n_points={self.n_points}, converged={self.converged}, "
                f"warnings={len(self.warnings)})")

    def _repr_pretty_(self, p, cycle) -> None:  # IPython/Jupyter
        p.text(self.report())
