"""Fitting a law to a ladder: point selection, diverged-run exclusion, provenance."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np

from ..errors import LadderError
from ..ladder import Exclusion, Ladder
from ..laws import Law, get_law
from .engine import DEFAULT_DELTA, fit_arrays
from .result import Fit

__all__ = ["fit", "ScalingLawFitter", "DIVERGENCE_THRESHOLD"]

#: A run whose final loss sits more than this far above the fitted trend (log residual,
#: about 10%) is treated as diverged, excluded and reported.
DIVERGENCE_THRESHOLD = 0.10
# ... and only when it also stands out from the ladder's own scatter by this many robust sigmas.
_DIVERGENCE_SIGMAS = 6.0


def _points(ladder: Ladder, law: Law, include_unfinished: bool):
    missing = [c for c in law.inputs if not ladder.has(c)]
    if missing:
        raise LadderError(
            f"law {law.name!r} reads {', '.join(law.inputs)} but ladder {ladder.name!r} has no "
            f"{', '.join(missing)} column; columns found: {', '.join(map(str, ladder.table.columns))}")
    pts, excluded = ladder.final_points(include_unfinished=include_unfinished)
    return pts, excluded


def _diverged(fit: Fit, threshold: float) -> list[int]:
    above = -fit.residuals  # log(L_obs / L_pred): positive when the run is above the trend
    mad = float(np.median(np.abs(fit.residuals - np.median(fit.residuals))))
    sigma = 1.4826 * mad
    flagged = np.flatnonzero((above > threshold) & (above > _DIVERGENCE_SIGMAS * sigma))
    if len(fit.y) - flagged.size < fit.n_free + 1:
        return []
    return [int(i) for i in flagged]


def fit(ladder: Ladder, law: str | Law, *, fixed: Mapping[str, float] | None = None,
        bounds: Mapping[str, Sequence[float]] | None = None, delta: float = DEFAULT_DELTA,
        fit_max_flops: float | None = None, include_unfinished: bool = False,
        divergence_threshold: float | None = DIVERGENCE_THRESHOLD, seed: int = 0) -> Fit:
    """Fit a final-loss law to a ladder: one point per finished run.

    Parameters
    ----------
    ladder: the runs (see :class:`~delphi.ladder.Ladder`).
    law: law name or object (``power``: reads ``flops``; ``chinchilla``: ``params``, ``tokens``).
    fixed, bounds, delta, seed: as in :func:`~delphi.fitting.fit_arrays`.
    fit_max_flops: fit only runs whose compute is at most this many FLOPs.
    include_unfinished: also fit the last checkpoint of runs stopped early (biased low-compute
        points: off by default, and reported when excluded).
    divergence_threshold: runs more than this log residual (about 10%) above the trend of a
        first robust fit, and far outside the ladder's scatter, are excluded as diverged and the
        law refitted; ``None`` disables the check.

    Returns
    -------
    Fit, whose ``exclusions`` list every run left out and why, and whose ``extra`` holds the
    ladder's name, source, metric, unit and the sha256 of the fitted points.

    Raises
    ------
    LadderError: the ladder lacks a column the law reads, or has no finished run.
    LawError, FitError, IdentifiabilityError: see :func:`~delphi.fitting.fit_arrays`.
    """
    law = get_law(law)
    excluded: list[Exclusion] = list(ladder.exclusions)
    if fit_max_flops is not None:
        ladder = ladder.select(max_flops=fit_max_flops)
        excluded = list(ladder.exclusions)
    pts, dropped = _points(ladder, law, include_unfinished)
    excluded += dropped

    def run(table):
        x = {c: table[c].to_numpy(float) for c in law.inputs}
        return fit_arrays(law, x, table["loss"].to_numpy(float), labels=table["run"].tolist(),
                          fixed=fixed, bounds=bounds, delta=delta, seed=seed)

    result = run(pts)
    if divergence_threshold is not None and math.isfinite(divergence_threshold):
        flagged = _diverged(result, divergence_threshold)
        if flagged:
            for i in flagged:
                ratio = math.exp(-result.residuals[i]) - 1
                excluded.append(Exclusion(
                    result.labels[i],
                    f"diverged: loss {result.y[i]:.4g} is {ratio:.0%} above the trend of the "
                    f"other runs; not fitted"))
            pts = pts.drop(index=pts.index[flagged]).reset_index(drop=True)
            result = run(pts)
    extra = {"ladder": ladder.name, "source": ladder.source, "metric": ladder.metric,
             "unit": ladder.unit, "sha256": ladder.fingerprint(pts),
             "max_flops": float(pts["flops"].max()) if "flops" in pts else None}
    ladder_warnings = tuple(f"ladder: {w}" for w in ladder.warnings)
    return replace(result, exclusions=tuple(excluded), extra=extra,
                   warnings=ladder_warnings + result.warnings)


class ScalingLawFitter:
    """scikit-learn-style estimator over :func:`fit`.

    Configuration goes in ``__init__``; :meth:`fit` returns ``self`` with the fitted state in
    ``fit_`` (the :class:`Fit`), ``params_`` and ``exclusions_``; :meth:`predict` evaluates the
    law at new inputs.

    Example
    -------
    >>> est = ScalingLawFitter("chinchilla", fixed={"E": 1.8}).fit(ladder)   # doctest: +SKIP
    >>> est.predict({"params": [7e10], "tokens": [1.4e12]})                  # doctest: +SKIP
    """

    def __init__(self, law: str | Law = "chinchilla", *, fixed: Mapping[str, float] | None = None,
                 bounds: Mapping[str, Sequence[float]] | None = None,
                 delta: float = DEFAULT_DELTA, fit_max_flops: float | None = None,
                 include_unfinished: bool = False,
                 divergence_threshold: float | None = DIVERGENCE_THRESHOLD, seed: int = 0) -> None:
        self.law = law
        self.fixed = fixed
        self.bounds = bounds
        self.delta = delta
        self.fit_max_flops = fit_max_flops
        self.include_unfinished = include_unfinished
        self.divergence_threshold = divergence_threshold
        self.seed = seed

    def fit(self, ladder: Ladder) -> "ScalingLawFitter":
        """Fit to ``ladder``; returns self. Raises as :func:`delphi.fitting.fit`."""
        self.fit_ = fit(ladder, self.law, fixed=self.fixed, bounds=self.bounds, delta=self.delta,
                        fit_max_flops=self.fit_max_flops,
                        include_unfinished=self.include_unfinished,
                        divergence_threshold=self.divergence_threshold, seed=self.seed)
        self.params_ = dict(self.fit_.params)
        self.exclusions_ = list(self.fit_.exclusions)
        return self

    def predict(self, x: Mapping[str, Sequence[float]]) -> np.ndarray:
        """Predicted loss at inputs ``x`` (column -> values, shape (n,)) -> shape (n,)."""
        if not hasattr(self, "fit_"):
            raise AttributeError("call fit(ladder) before predict")
        return self.fit_.predict({k: np.asarray(v, dtype=float) for k, v in x.items()})
