"""Backtests: fit a recipe on small runs and score its predictions of held-out larger runs.

This is how Marin tested its Delphi recipe: fit only up to 3e20 FLOPs, then compare the
predictions with the 1e21..1e23 runs. Two designs: a compute cut (fit at or below C, predict
every larger run) and leave-one-budget-out (drop each compute budget in turn).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from .errors import DelphiError, FitError, LadderError
from .fitting import DEFAULT_DELTA, fit
from .fitting.api import _lr_ratio
from .ladder import Ladder
from .laws import Law, get_law
from .uncertainty import DEFAULT_LEVEL, bootstrap, bootstrap_interval, delta_interval

__all__ = ["Backtest", "BacktestRow", "backtest"]


@dataclass(frozen=True)
class BacktestRow:
    """One held-out run: its prediction from runs it was not fitted on."""

    run: str
    flops: float | None
    """C [FLOPs]."""
    params: float | None
    """N [parameters]."""
    tokens: float | None
    """D [tokens]."""
    actual: float
    """Observed final loss."""
    predicted: float
    """Predicted final loss."""
    lower: float | None
    """Lower end of the new-run interval."""
    upper: float | None
    """Upper end of the new-run interval."""
    rel_error: float
    """(actual - predicted) / predicted, a fraction."""
    inside: bool | None
    """Whether the actual loss lies in the interval (None without an interval)."""
    fold: str
    """Which fit predicted it (e.g. ``"fit <= 3e+20 FLOPs"`` or ``"without budget 1e+21"``)."""

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class Backtest:
    """Per-run rows and a summary (mean/max |rel. error|, interval coverage)."""

    law: str
    design: str
    rows: list[BacktestRow]
    level: float
    fits: list[dict] = field(default_factory=list)
    """Per fold: the fold name, runs fitted, parameters, converged flag and warnings."""
    notes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict:
        errs = np.array([abs(r.rel_error) for r in self.rows])
        inside = [r.inside for r in self.rows if r.inside is not None]
        return {"n": len(self.rows), "mean_abs_rel_error": float(errs.mean()) if len(errs) else None,
                "max_abs_rel_error": float(errs.max()) if len(errs) else None,
                "mean_rel_error": float(np.mean([r.rel_error for r in self.rows]))
                if self.rows else None,
                "coverage": float(np.mean(inside)) if inside else None, "level": self.level}

    def to_dict(self) -> dict:
        return {"law": self.law, "design": self.design, "rows": [r.to_dict() for r in self.rows],
                "summary": self.summary, "fits": self.fits, "notes": self.notes}

    def report(self) -> str:
        lines = [f"backtest   {self.law}, {self.design}",
                 f"{'run':<28} {'C':>9} {'actual':>8} {'predicted':>9} {'interval':>19} "
                 f"{'rel.err':>8}"]
        for r in self.rows:
            iv = f"[{r.lower:.4f}, {r.upper:.4f}]" if r.lower is not None else "-"
            mark = "" if r.inside is None else ("" if r.inside else "  outside")
            c = f"{r.flops:.3g}" if r.flops else "-"
            lines.append(f"{r.run[:28]:<28} {c:>9} {r.actual:8.4f} {r.predicted:9.4f} {iv:>19} "
                         f"{r.rel_error:+8.2%}{mark}")
        s = self.summary
        cov = f", coverage {s['coverage']:.0%} of {s['level']:.0%} intervals" \
            if s["coverage"] is not None else ""
        lines.append(f"summary    {s['n']} runs: mean |rel. error| {s['mean_abs_rel_error']:.2%}, "
                     f"max {s['max_abs_rel_error']:.2%}{cov}")
        seen: dict[str, list[str]] = {}
        for f in self.fits:
            for w in f["warnings"]:
                seen.setdefault(w, []).append(f["fold"])
        for w, folds in seen.items():
            where = "every fold" if len(folds) == len(self.fits) else ", ".join(folds)
            lines.append(f"warning    [{where}] {w}")
        for n in self.notes:
            lines.append(f"note       {n}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _budgets(table: pd.DataFrame, tolerance: float = 1.05) -> pd.Series:
    order = table["flops"].sort_values(kind="mergesort")
    ids, start, label = {}, None, None
    for idx, c in order.items():
        if start is None or c > start * tolerance:
            start, label = c, f"{c:.3g}"
        ids[idx] = label
    return pd.Series(ids).reindex(table.index)


def _inputs(law: Law, ladder: Ladder, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    x = {}
    for c in law.inputs:
        if c == "h":
            x[c] = _lr_ratio(ladder, rows.reset_index(drop=True))
        else:
            x[c] = rows[c].to_numpy(float)
    return x


def backtest(ladder: Ladder, law: str | Law, *, fit_max_flops: float | None = None,
             leave_one_budget_out: bool = False, fixed: Mapping[str, float] | None = None,
             bounds: Mapping[str, Sequence[float]] | None = None, delta: float = DEFAULT_DELTA,
             interval: str | None = "delta", level: float = DEFAULT_LEVEL, n_boot: int = 100,
             seed: int = 0, include_unfinished: bool = False) -> Backtest:
    """Fit on part of a ladder, predict the rest, and score the predictions.

    Parameters
    ----------
    ladder: the runs; held-out runs are scored on their final loss (finished runs only).
    law: the law to test.
    fit_max_flops: fit on runs at or below this compute [FLOPs], predict every larger run.
    leave_one_budget_out: instead, drop each compute budget (runs within 5% of compute) in
        turn, fit on the others and predict the dropped runs.
    fixed, bounds, delta, include_unfinished: as in :func:`delphi.fitting.fit` (unfinished runs
        are fitted, never predicted: a held-out run is scored on its final loss).
    interval: ``"delta"`` (default, fast), ``"bootstrap"`` or None; level, n_boot, seed: its
        settings.

    Returns
    -------
    Backtest, with ``rel_error = (actual - predicted) / predicted``.

    Raises
    ------
    LadderError: neither or both designs chosen, or nothing left to predict.
    FitError: a fold could not be fitted (the message names it).
    """
    law = get_law(law)
    if (fit_max_flops is None) == (not leave_one_budget_out):
        raise LadderError("choose one backtest design: fit_max_flops=C (--fit-max-flops) or "
                          "leave_one_budget_out (--leave-one-budget-out)")
    finals, _ = ladder.final_points()
    if "flops" not in finals.columns:
        raise LadderError("a backtest needs each run's compute (flops, or params and tokens)")
    if fit_max_flops is not None:
        held = finals[finals["flops"] > fit_max_flops * (1 + 1e-9)]
        if held.empty:
            raise LadderError(f"no run of ladder {ladder.name!r} is above {fit_max_flops:.3g} "
                              f"FLOPs: nothing to predict")
        folds = [(f"fit <= {fit_max_flops:.3g} FLOPs",
                  ladder.select(max_flops=fit_max_flops), held)]
        design = f"fit on runs <= {fit_max_flops:.3g} FLOPs, predict {len(held)} larger run(s)"
    else:
        budgets = _budgets(finals)
        if budgets.nunique() < 3:
            raise LadderError(f"leave-one-budget-out needs at least 3 compute budgets, ladder "
                              f"{ladder.name!r} has {budgets.nunique()}")
        folds = []
        for b in sorted(budgets.unique(), key=float):
            held = finals[budgets == b]
            keep = sorted(set(ladder.runs) - set(held["run"]))
            folds.append((f"without budget {b}", ladder.select(runs=keep), held))
        design = f"leave one budget out ({len(folds)} budgets)"
    rows, fits, notes = [], [], []
    for name, train, held in folds:
        try:
            result = fit(train, law, fixed=fixed, bounds=bounds, delta=delta, seed=seed,
                         include_unfinished=include_unfinished)
        except DelphiError as exc:
            raise FitError(f"backtest fold '{name}': {exc}") from None
        fits.append({"fold": name, "n_runs": result.n_points, "params": result.params,
                     "converged": result.converged, "warnings": list(result.warnings)})
        x = _inputs(law, ladder, held)
        pred = result.predict(x)
        draws = None
        if interval == "bootstrap":
            draws = bootstrap(result, n=n_boot, seed=seed)
        for i, (_, r) in enumerate(held.iterrows()):
            xi = {k: v[i:i + 1] for k, v in x.items()}
            lo = hi = None
            if interval is not None:
                try:
                    band = (bootstrap_interval(result, draws, xi, level=level, seed=seed)
                            if draws is not None else delta_interval(result, xi, level=level))
                    lo, hi = band.lower, band.upper
                except FitError as exc:
                    notes.append(f"[{name}] no interval: {exc}")
            actual, p = float(r["loss"]), float(pred[i])
            rows.append(BacktestRow(
                run=str(r["run"]), flops=float(r["flops"]),
                params=float(r["params"]) if "params" in r and pd.notna(r.get("params")) else None,
                tokens=float(r["tokens"]) if "tokens" in r and pd.notna(r.get("tokens")) else None,
                actual=actual, predicted=p, lower=lo, upper=hi, rel_error=(actual - p) / p,
                inside=None if lo is None else bool(lo <= actual <= hi), fold=name))
    rows.sort(key=lambda r: (r.flops or 0.0, r.run))
    return Backtest(law=law.name, design=design, rows=rows, level=level, fits=fits,
                    notes=sorted(set(notes)))
