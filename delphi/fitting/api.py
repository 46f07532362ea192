"""Fitting a law to a ladder: point selection, diverged-run exclusion, provenance."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import FitError, LadderError
from ..ladder import Exclusion, Ladder
from ..laws import CHECKPOINT_LAWS, Law, get_law
from .engine import DEFAULT_DELTA, fit_arrays
from .result import Fit

__all__ = ["fit", "ScalingLawFitter", "DIVERGENCE_THRESHOLD", "MIN_CHECKPOINT_FRACTION"]

#: A run whose final loss sits more than this far above the fitted trend (log residual,
#: about 10%) is treated as diverged, excluded and reported.
DIVERGENCE_THRESHOLD = 0.10
# ... and only when it also stands out from the ladder's own scatter by this many robust sigmas.
_DIVERGENCE_SIGMAS = 6.0


#: Checkpoint laws skip the first quarter of each run: warmup and the initial rapid descent,
#: which the Chinchilla form (a law of well-trained models) does not describe.
MIN_CHECKPOINT_FRACTION = 0.25


def _lr_ratio(ladder: Ladder, rows: pd.DataFrame) -> np.ndarray:
    """h = lr / peak_lr per row: from logged LRs, or from the ladder's schedule shape."""
    if "lr" in rows.columns and "peak_lr" in rows.columns and rows["lr"].notna().all() \
            and rows["peak_lr"].notna().all():
        return (rows["lr"] / rows["peak_lr"]).to_numpy(float)
    if ladder.schedule:
        from ..curves import run_schedule  # curves builds on fitting: import at use
        from ..schedules import features
        h = np.empty(len(rows))
        for run, idx in rows.groupby("run").groups.items():
            sched = run_schedule(ladder, run)
            steps = np.minimum(rows.loc[idx, "step"].to_numpy(float), sched.total_steps)
            h[rows.index.get_indexer(idx)] = features(sched, steps.astype(np.int64))["h"]
        return h
    raise LadderError(f"ladder {ladder.name!r} gives no learning rate per checkpoint: a "
                      f"checkpoint law needs lr and peak_lr columns or a schedule shape")


def _run_fraction(rows: pd.DataFrame) -> np.ndarray:
    if "fraction" in rows.columns and rows["fraction"].notna().all():
        return rows["fraction"].to_numpy(float)
    if "step" in rows.columns and "total_steps" in rows.columns and rows["total_steps"].notna().all():
        return (rows["step"] / rows["total_steps"]).to_numpy(float)
    return (rows["tokens"] / rows.groupby("run")["tokens"].transform("max")).to_numpy(float)


def _points(ladder: Ladder, law: Law, include_unfinished: bool, min_fraction: float):
    needed = [c for c in law.inputs if c != "h"]
    missing = [c for c in needed if not ladder.has(c)]
    if missing:
        raise LadderError(
            f"law {law.name!r} reads {', '.join(law.inputs)} but ladder {ladder.name!r} has no "
            f"{', '.join(missing)} column; columns found: {', '.join(map(str, ladder.table.columns))}")
    if law.name not in CHECKPOINT_LAWS:
        return ladder.final_points(include_unfinished=include_unfinished)
    # Every checkpoint of every run counts, unfinished runs included; diverged runs do not.
    _, excluded = ladder.final_points(include_unfinished=True)
    dropped = {e.run for e in excluded}
    rows = ladder.table[~ladder.table["run"].isin(dropped)].reset_index(drop=True)
    rows = rows.assign(h=_lr_ratio(ladder, rows))
    early = _run_fraction(rows) < min_fraction
    if early.any():
        excluded = excluded + [Exclusion("*", f"{int(early.sum())} checkpoint(s) in the first "
                                              f"{min_fraction:.0%} of their run (warmup and initial "
                                              f"descent) not fitted")]
    return rows[~early].reset_index(drop=True), excluded


def _most_diverged(fit: Fit, threshold: float) -> int | None:
    """The point furthest above the trend, if it is diverged: more than ``threshold`` (log
    residual) above the fit and far outside the ladder's scatter, with enough points left."""
    if len(fit.y) - 1 < fit.n_free + 1:
        return None
    above = -fit.residuals  # log(L_obs / L_pred): positive when the run is above the trend
    sigma = 1.4826 * float(np.median(np.abs(fit.residuals - np.median(fit.residuals))))
    i = int(np.argmax(above))
    if above[i] > threshold and above[i] > _DIVERGENCE_SIGMAS * sigma:
        return i
    return None


def _dominated(pts: pd.DataFrame, law: Law, threshold: float) -> dict[int, str]:
    """Runs whose loss is far above that of a run with no more of every input.

    Every final-loss law here falls with each of its inputs (more compute, parameters or
    tokens never raise the loss), so a run whose loss exceeds, by more than ``threshold``
    (log ratio), the loss of a run that had at most its N, D or C has diverged, whatever the
    fitted trend: this needs no fit, so several diverged runs cannot mask each other.
    """
    cols = [c for c in law.inputs if c in ("flops", "params", "tokens")]
    if not cols or len(cols) != len(law.inputs):
        return {}
    x = pts[cols].to_numpy(float)
    y = np.log(pts["loss"].to_numpy(float))
    out = {}
    for i in range(len(pts)):
        smaller = np.all(x <= x[i] * (1 + 1e-9), axis=1)
        smaller[i] = False
        if smaller.any():
            j = np.flatnonzero(smaller)[np.argmin(y[smaller])]
            if y[i] - y[j] > threshold:
                out[i] = (f"diverged or mis-tuned: loss {np.exp(y[i]):.4g} is "
                          f"{np.exp(y[i] - y[j]) - 1:.0%} above that of run "
                          f"{pts['run'].iloc[j]!r}, which had no more {' or '.join(cols)}; "
                          f"not fitted")
    if len(pts) - len(out) < 2:
        return {}
    return out


# Runs whose compute agrees within this factor share a budget (an isoFLOP design).
_BUDGET_TOLERANCE = 1.05


def _compute_frontier(pts: pd.DataFrame) -> tuple[pd.DataFrame, list[Exclusion], list[str]]:
    """For a compute-only law: the lowest-loss run of each compute budget.

    A power law in C describes the compute-optimal frontier; the other runs of an isoFLOP
    budget sit above it by design (too large or too small for their compute) and would be
    mistaken for diverged runs.
    """
    order = pts.sort_values("flops", kind="mergesort")
    budget, start, ids = 0, None, []
    for c in order["flops"]:
        if start is None or c > start * _BUDGET_TOLERANCE:
            budget, start = budget + 1, c
        ids.append(budget)
    order = order.assign(_budget=ids)
    best = order.loc[order.groupby("_budget")["loss"].idxmin()]
    others = order.drop(index=best.index)
    if others.empty:
        return pts, [], []
    excluded = [Exclusion(r, f"isoFLOP point: not the lowest loss of its compute budget "
                             f"(~{c:.3g} FLOPs)") for r, c in zip(others["run"], others["flops"])]
    note = (f"{len(others)} run(s) share a compute budget with a lower-loss run; a power law in C "
            f"is fitted to the compute-optimal frontier ({len(best)} budgets), the rest are "
            f"excluded (use chinchilla to fit every run)")
    return best.drop(columns="_budget").reset_index(drop=True), excluded, [note]


def fit(ladder: Ladder, law: str | Law, *, fixed: Mapping[str, float] | None = None,
        bounds: Mapping[str, Sequence[float]] | None = None, delta: float = DEFAULT_DELTA,
        fit_max_flops: float | None = None, include_unfinished: bool = False,
        divergence_threshold: float | None = DIVERGENCE_THRESHOLD, seed: int = 0,
        min_checkpoint_fraction: float = MIN_CHECKPOINT_FRACTION,
        warm_start: Mapping[str, float] | None = None) -> Fit:
    """Fit a law to a ladder: one point per finished run, or every checkpoint for a checkpoint
    law (``chinchilla-ckpt``).

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
    min_checkpoint_fraction: checkpoint laws skip checkpoints in this first share of each run.
    warm_start: parameter values of a fit of the same law to more of this ladder (a backtest
        fold's full-data fit): skip the global search and refine from there (see
        :func:`~delphi.fitting.fit_arrays`).

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
    pts, dropped = _points(ladder, law, include_unfinished, min_checkpoint_fraction)
    excluded += dropped
    notes: list[str] = []
    if include_unfinished and "fraction" in pts.columns:
        partial = pts[pts["fraction"].notna() & (pts["fraction"] < 1)]
        if len(partial) and law.name not in CHECKPOINT_LAWS:
            notes.append(f"included {len(partial)} unfinished run(s) at their last checkpoint "
                         f"({', '.join(partial['run'][:5])}): their losses are above what the "
                         f"finished runs would reach")
    if law.inputs == ("flops",):
        pts, frontier_excluded, frontier_notes = _compute_frontier(pts)
        excluded += frontier_excluded
        notes += frontier_notes

    if divergence_threshold is not None and math.isfinite(divergence_threshold):
        bad = _dominated(pts, law, divergence_threshold)
        excluded += [Exclusion(pts["run"].iloc[i], why) for i, why in bad.items()]
        pts = pts.drop(index=pts.index[list(bad)]).reset_index(drop=True)

    def run(table):
        x = {c: table[c].to_numpy(float) for c in law.inputs}
        labels = table["run"].tolist()
        if law.name in CHECKPOINT_LAWS and "step" in table.columns:
            labels = [f"{r}@{s:g}" for r, s in zip(table["run"], table["step"])]
        try:
            return fit_arrays(law, x, table["loss"].to_numpy(float), labels=labels,
                              fixed=fixed, bounds=bounds, delta=delta, seed=seed,
                              warm_start=warm_start)
        except FitError as exc:
            if not excluded or "cannot fit" not in str(exc):
                raise
            why = "; ".join(f"{e.run}: {e.reason}" for e in excluded[:4])
            more = f" (+{len(excluded) - 4} more)" if len(excluded) > 4 else ""
            raise type(exc)(f"{exc}; {len(excluded)} exclusion(s): {why}{more}") from None

    result = run(pts)
    # Checkpoint laws: a diverged run is caught by its own rising loss (final_points).
    if (divergence_threshold is not None and math.isfinite(divergence_threshold)
            and law.name not in CHECKPOINT_LAWS):
        # One at a time, worst first: several diverged runs can drag a first fit so far that
        # the good runs look off-trend, and removing the worst lets the fit recover.
        while (i := _most_diverged(result, divergence_threshold)) is not None:
            ratio = math.exp(-result.residuals[i]) - 1
            excluded.append(Exclusion(
                result.labels[i],
                f"diverged: loss {result.y[i]:.4g} is {ratio:.0%} above the trend of the "
                f"other runs; not fitted"))
            pts = pts.drop(index=pts.index[i]).reset_index(drop=True)
            result = run(pts)
    extra = {"ladder": ladder.name, "source": ladder.source, "metric": ladder.metric,
             "unit": ladder.unit, "sha256": ladder.fingerprint(pts),
             "max_flops": float(pts["flops"].max()) if "flops" in pts else None,
             "min_flops": float(pts["flops"].min()) if "flops" in pts else None,
             "notes": notes}
    ladder_warnings = tuple(ladder.warnings)
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

    def fit(self, ladder: Ladder | pd.DataFrame) -> "ScalingLawFitter":
        """Fit to ``ladder`` (a Ladder or a DataFrame with its columns); returns self.

        Raises as :func:`delphi.fitting.fit`.
        """
        if isinstance(ladder, pd.DataFrame):
            ladder = Ladder(ladder, source="<DataFrame>", name="dataframe")
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
