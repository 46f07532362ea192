"""The typed result of a fit."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ..laws.base import Inputs, Law
from ..inputs.ladder import Exclusion

if TYPE_CHECKING:  # pragma: no cover
    from .diagnostics import Identification

__all__ = ["Fit"]


@dataclass(frozen=True)
class Fit:
    """A fitted law, with everything needed to judge the fit.

    The optimum is :attr:`params` (every parameter by name, natural units), the summed Huber
    loss there is :attr:`objective`, and the optimiser's verdict is :attr:`converged` (also
    :attr:`success`) with its :attr:`message`. This is not a scipy ``OptimizeResult``:
    :attr:`x` holds the *inputs* fitted (the ladder columns the law reads, with :attr:`y` the
    losses), not the solution vector, and there is no ``fun``/``nit``.

    Check :attr:`converged` and :attr:`warnings` before trusting :attr:`params`;
    ``print(fit)`` gives a readable report and :meth:`params_table` a pandas table of the
    parameters with standard errors and intervals.
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
        """Same as :attr:`converged` (the optimiser met its tolerances); it says nothing about
        identification: check :attr:`unidentified` and :attr:`warnings`."""
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
            ``x`` not a mapping; missing, non-numeric, non-finite or non-positive inputs;
            inputs of different lengths (see :meth:`delphi.laws.Law.check_inputs`).
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
                # params_table() by parameter (JSON has no NaN or inf: None)
                "parameters": {r["name"]: {k: (None if isinstance(v, float)
                                               and not math.isfinite(v) else v)
                                           for k, v in r.items() if k != "name"}
                               for r in self._param_rows()},
            },
        }

    def _param_rows(self) -> list[dict]:
        """Rows of :meth:`params_table` as dicts (plain Python types), in parameter order."""
        from scipy.special import ndtri

        ident = self.identification
        level = ident.level if ident is not None else 0.95
        z = float(ndtri(0.5 + level / 2))          # 1.95996 at 95%
        rows = []
        for name, value in self.params.items():
            value = float(value)
            linear = bool(self.law.param(name).linear)
            fixed = name in self.fixed
            se = math.nan
            lo = hi = math.nan
            kind = "none"
            if fixed:
                se, lo, hi, kind = 0.0, value, value, "fixed"
            else:
                se = float(self.stderr.get(name, math.nan))
                prof = ident.profiles.get(name) if ident is not None else None
                if prof is not None:
                    (lo, hi), kind = map(float, prof.within), "profile"
                elif math.isfinite(se):
                    kind = "wald"
                    if linear and value > 0:
                        # The covariance is in log c (se = c x s.e. of log c): the Wald
                        # interval there, mapped back, stays positive like c.
                        # (a s.e. hundreds of times c itself: the upper end is unbounded,
                        # not an OverflowError)
                        t = z * se / value
                        lo = value * math.exp(-t) if t < 700 else 0.0
                        hi = value * math.exp(t) if t < 700 else math.inf
                    else:
                        lo, hi = value - z * se, value + z * se
            rows.append({"name": name, "value": value, "stderr": se, "lower": lo, "upper": hi,
                         "interval": kind, "fixed": fixed, "at_bound": name in self.at_bound,
                         "linear": linear})
        return rows

    def params_table(self):
        """The parameters as a pandas DataFrame, one row per parameter (law order).

        Index ``name`` (``E``, ``A``, ``alpha``...). Columns:

        * ``value``: the fitted (or fixed) value, natural units.
        * ``stderr``: approximate standard error (Gauss-Newton, :attr:`stderr`; for a
          coefficient c the delta method from the s.e. of log c). 0 for a fixed parameter.
          NaN only when none can be computed: a parameter at a bound (its curvature is
          one-sided), a fit with no residual degrees of freedom, or a singular direction
          (see :attr:`warnings`).
        * ``lower``, ``upper``: a 95% interval (the level of :attr:`identification`).
        * ``interval``: which interval that is. ``"profile"``: the profile-likelihood interval
          of :attr:`identification` (the free floor and free exponents of fits made by
          :func:`delphi.fitting.fit`; Venzon & Moolgavkar 1988); it may reach the end of
          the parameter's range (not identified, see :attr:`unidentified`). ``"wald"``:
          value +- 1.96 s.e. (for a coefficient, in log c: value x exp(+-1.96 s.e./value), which
          stays positive). ``"fixed"``: lower = upper = the fixed value (intervals of this fit
          are conditional on it). ``"none"``: no s.e. and no profile, ends NaN.
        * ``fixed``: held fixed (:attr:`fixed`).
        * ``at_bound``: ended at a bound (:attr:`at_bound`; for a coefficient at 0 this means
          its term is negligible over the ladder).
        * ``linear``: a coefficient solved exactly in the search (the law's
          :class:`~delphi.laws.base.Param`), as opposed to an exponent-like parameter.

        The same rows are the ``parameters`` block of :meth:`to_dict` (``delphi fit --json``).
        """
        import pandas as pd

        rows = self._param_rows()
        columns = ["value", "stderr", "lower", "upper", "interval", "fixed", "at_bound", "linear"]
        frame = pd.DataFrame(rows, columns=["name", *columns]).set_index("name")
        return frame

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
        lines.extend(exclusion_lines(self.exclusions))
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


#: Runs excluded for the same reason are listed on one line beyond this many.
_GROUP_AT = 3
#: Run names shown on such a line.
_SHOWN = 3


def exclusion_lines(exclusions) -> list[str]:
    """Report lines for exclusions: one per run, except that runs sharing one reason, more
    than :data:`_GROUP_AT` of them, share a line with the count and the first few names (the
    full list is in ``exclusions`` and the JSON). Reasons that differ only in their numbers
    (``... budget (~3e+18 FLOPs)``, ``... (~1e+19 FLOPs)``) count as one reason; the shared line
    keeps the words they have in common."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for e in exclusions:
        reason = str(e.reason)
        groups.setdefault(_NUMBER.sub("#", reason), []).append((str(e.run), reason))
    lines = []
    for members in groups.values():
        runs = [r for r, _ in members]
        if len(members) <= _GROUP_AT:
            lines += [f"excluded   {r}: {reason}" for r, reason in members]
            continue
        reasons = {reason for _, reason in members}
        text = members[0][1] if len(reasons) == 1 else _common_words(sorted(reasons))
        more = f", ... ({len(runs) - _SHOWN} more)" if len(runs) > _SHOWN else ""
        lines.append(f"excluded   {len(runs)} runs ({', '.join(runs[:_SHOWN])}{more}): {text}")
    return lines


#: A number inside an exclusion reason (``3e+18``, ``0.25``, ``12``).
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def _common_words(reasons: list[str]) -> str:
    """The words reasons share before they first differ, without a dangling ``(`` or ``~``,
    and a pointer to where each run's own reason is."""
    prefix = os.path.commonprefix(reasons)
    cut = prefix.rfind(" ")
    head = (prefix[:cut] if cut > 0 else prefix).rstrip(" (~:,;")
    return f"{head} (each run's own numbers in --json / Fit.excluded)"
