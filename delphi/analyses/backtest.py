"""Backtests: fit a recipe on small runs and score its predictions of held-out larger runs.

This is how Marin tested its Delphi recipe: fit only up to 3e20 FLOPs, then compare the
predictions with the 1e21..1e23 runs. Two designs: a compute cut (fit at or below C, predict
every larger run) and leave-one-budget-out (drop each compute budget in turn).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import DelphiError, FitError, FitWarning, LadderError, option, user_stacklevel
from ..fitting import DEFAULT_DELTA, Fit, fit
from ..fitting.api import compute_frontier
from ..inputs.law_inputs import budget_labels, lr_ratio, rows_inputs
from ..inputs.ladder import Ladder
from ..laws import Law, get_law
from ..forecasting.uncertainty import (WORSE_RTOL, CHECK_EVERY, DEFAULT_LEVEL, bootstrap,
                          bootstrap_interval, delta_interval)
from ..inputs.readers import as_ladder
from ..forecasting.target import Target, as_target
from ..forecasting.robustness import log_prediction_se
from ..forecasting.forecast import (FittedLaw, PointForecast, calibration_stage, default_law,
                                   fit_stage, interval_stage, point_stage)
from ..core.parallel import check_n_jobs, map_jobs
from ..core.text import level_percent

__all__ = ["Backtest", "BacktestRow", "backtest", "PrefixFits", "PrefixStep", "prefix_fits",
           "DRIFT_WINDOW", "DRIFT_SES"]


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
    guard: dict = field(default_factory=dict)
    """Warm-start guard of the folds: ``{"checked": folds also fitted by global search,
    "worse": of those, folds whose warm start was worse (the global fit was kept)}``."""

    @property
    def summary(self) -> dict:
        errs = np.array([abs(r.rel_error) for r in self.rows])
        inside = [r.inside for r in self.rows if r.inside is not None]
        return {"n": len(self.rows), "mean_abs_rel_error": float(errs.mean()) if len(errs) else None,
                "max_abs_rel_error": float(errs.max()) if len(errs) else None,
                "mean_rel_error": float(np.mean([r.rel_error for r in self.rows]))
                if self.rows else None,
                "coverage": float(np.mean(inside)) if inside else None, "level": self.level}

    @property
    def warnings(self) -> list[str]:
        """Every fold fit's warnings, each prefixed with its fold (``[fold] text``), in fold
        order without repeats; the per-fold lists are in :attr:`fits`."""
        out: list[str] = []
        for f in self.fits:
            out += [f"[{f['fold']}] {w}" for w in f["warnings"]]
        return list(dict.fromkeys(out))

    def to_dict(self) -> dict:
        return {"law": self.law, "design": self.design, "rows": [r.to_dict() for r in self.rows],
                "summary": self.summary, "fits": self.fits, "notes": self.notes,
                "guard": self.guard}

    def to_frame(self) -> pd.DataFrame:
        """The held-out runs as a pandas DataFrame: one row per :class:`BacktestRow`, in
        :attr:`rows` order, its fields as columns (``run``, ``flops``, ``params``, ``tokens``,
        ``actual``, ``predicted``, ``lower``, ``upper``, ``rel_error``, ``inside``, ``fold``;
        ``lower``/``upper``/``inside`` are None without an interval). :attr:`summary` has the
        aggregates."""
        columns = list(BacktestRow.__dataclass_fields__)
        return pd.DataFrame([r.to_dict() for r in self.rows], columns=columns)

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
        cov = f", coverage {s['coverage']:.0%} of {level_percent(s['level'])} intervals" \
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
        # A fold's note that every fold (or several) shares is printed once, as the warnings.
        by_text: dict[str, list[str]] = {}
        for n in self.notes:
            fold, sep, text = n[1:].partition("] ") if n.startswith("[") else ("", "", n)
            key = text if sep else n
            by_text.setdefault(key, []).append(fold if sep else "")
        for text, folds in by_text.items():
            if not any(folds):
                lines.append(f"note       {text}")
                continue
            where = ("every fold" if len(folds) == len(self.fits) > 1 else ", ".join(folds))
            lines.append(f"note       [{where}] {text}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        """One line: the law, the design, the runs scored, mean and max |rel. error|, the
        coverage and the counts of folds and warnings (:meth:`report` is the full text)."""
        s = self.summary
        err = ("" if s["mean_abs_rel_error"] is None else
               f", mean_abs_rel_error={s['mean_abs_rel_error']:.3%}, "
               f"max_abs_rel_error={s['max_abs_rel_error']:.3%}")
        cov = ("" if s["coverage"] is None else
               f", coverage={s['coverage']:.0%} of {level_percent(self.level)}")
        return (f"Backtest(law={self.law!r}, design={self.design!r}, n={s['n']}{err}{cov}, "
                f"folds={len(self.fits)}, warnings={len(self.warnings)})")

    def _repr_pretty_(self, p, cycle) -> None:      # IPython / Jupyter: the text report
        p.text(self.report() if not cycle else repr(self))


def _fold_fit(job) -> tuple[Fit, int, object, str]:
    """Fit one fold, and bootstrap it when asked: (fit, guard code, draws or None, note).

    Guard code: -1 not checked, 0 warm start as good as the global search, 1 worse or with
    other runs excluded (the global fit is then kept).
    """
    train, law, settings, warm, checked, boot = job
    settings = {**settings, "identify": False}  # fold rows report errors, not profiles
    if warm is None:
        result, code = fit(train, law, **settings), -1
    else:
        result, code = fit(train, law, warm_start=warm, **settings), -1
        if checked:
            glob = fit(train, law, **settings)
            worse = (glob.n_points != result.n_points
                     or result.objective > glob.objective * (1 + WORSE_RTOL))
            result, code = (glob, 1) if worse else (result, 0)
    draws, note = None, ""
    if boot is not None:
        try:
            draws = bootstrap(result, **boot)
        except FitError as exc:  # this fold gets no interval; the others still do
            note = f"no bootstrap interval: {exc}"
    return result, code, draws, note


#: Interval methods that widen the fold fit's own interval as :func:`delphi.predict` does.
WIDENED = ("auto", "calibrated", "reference")


def _widened_interval(fitted: FittedLaw, row, xi, loss: float, method: str, level: float,
                      n_boot: int, n_jobs: int, fold: str, notes: list[str], first: bool):
    """(lower, upper) of ``predict``'s interval ``method`` at one held-out run, from the fold's
    fit alone (:func:`delphi.forecast.interval_stage` and :func:`calibration_stage`), or
    (None, None) with the reason in ``notes``. The fold's calibration refits only its own
    runs; the reference class leaves out the ladder itself (:func:`_reference_model`), so
    a public ladder is not scored on its own errors. ``first``: the fold's first row, whose
    notes describe the interval (later rows add only their no-interval reasons)."""
    top = fitted.fit.extra.get("max_flops")
    c = float(row["flops"])
    point = PointForecast(target=Target(flops=c, name=str(row["run"])), inputs=xi, loss=loss,
                          extrapolation=c / top if top else None, findings=())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FitWarning)  # the fold fit's warnings are in fits
            band, made = interval_stage(fitted, point, method=method, level=level,
                                        n_boot=n_boot, n_jobs=n_jobs)
            band, found = calibration_stage(fitted, point, band, made, method=method,
                                            level=level)
    except FitError as exc:    # e.g. "calibrated" on a fold too small to calibrate itself
        notes.append(f"[{fold}] no interval: {exc}")
        return None, None
    notes.extend(f"[{fold}] {f.message}" for f in found
                 if first or band is None and f.code == "no-interval")
    if band is None:
        return None, None
    return band.lower, band.upper


def backtest(ladder: Ladder, law: str | Law | None = None, *, fit_max_flops: float | None = None,
             leave_one_budget_out: bool = False, fixed: Mapping[str, float] | None = None,
             bounds: Mapping[str, Sequence[float]] | None = None, delta: float = DEFAULT_DELTA,
             interval: str | None = "delta", level: float = DEFAULT_LEVEL, n_boot: int = 100,
             seed: int = 0, include_unfinished: bool = False, n_jobs: int | None = None,
             check_every: int = CHECK_EVERY) -> Backtest:
    """Fit on part of a ladder, predict the rest, and score the predictions.

    Parameters
    ----------
    ladder: the runs; held-out runs are scored on their final loss (finished runs only).
    law: the law to test (required: None raises :class:`~delphi.errors.MissingArgumentError`
        listing the laws).
    fit_max_flops: fit on runs at or below this compute [FLOPs], predict every larger run.
    leave_one_budget_out: instead, drop each compute budget (runs within 5% of compute) in
        turn, fit on the others and predict the dropped runs. The law is fitted once to the
        whole ladder (global search) and each fold refined from that optimum; as a guard,
        one fold in ``check_every`` (at least one, from a seeded offset) is also fitted by
        the global search and the better fit kept (reported in ``notes`` when worse).
    fixed, bounds, delta, include_unfinished: as in :func:`delphi.fitting.fit` (unfinished runs
        are fitted, never predicted: a held-out run is scored on its final loss).
    interval: ``"delta"`` (default, fast: the fold fit's own delta-method interval, none when
        the fold leaves fewer than 3 residual dof and no repeated runs), ``"bootstrap"``,
        None, or :func:`delphi.predict`'s widened intervals ``"auto"``, ``"calibrated"`` and
        ``"reference"``: each fold's interval made as predict makes it from that fold's runs
        alone (its own leave-future-out calibration; the reference class of the public
        ladders without this ladder), so the backtest scores the interval a forecast from the
        ladder would register; level, n_boot, seed: its settings.
    n_jobs: joblib workers for the folds (or for the bootstrap of a single fold); see
        :mod:`delphi.parallel`. Results do not depend on it.

    Returns
    -------
    Backtest, with ``rel_error = (actual - predicted) / predicted``.

    Raises
    ------
    LadderError: neither or both designs chosen, or nothing left to predict.
    FitError: a fold could not be fitted (the message names it), or an unknown ``interval``.
    MissingArgumentError: no ``law`` given.
    """
    law = get_law(law, needed_by="backtest")
    ladder = as_ladder(ladder)      # a DataFrame is read as load_ladder reads it
    n_jobs = check_n_jobs(n_jobs)
    if interval not in (None, "delta", "bootstrap", *WIDENED):
        raise FitError(f"unknown backtest interval {interval!r}; use delta, bootstrap, auto, "
                       f"calibrated, reference or None")
    if (fit_max_flops is None) == (not leave_one_budget_out):
        raise LadderError(f"choose one backtest design: "
                          f"{option('fit_max_flops=C', '--fit-max-flops C')} or "
                          f"{option('leave_one_budget_out=True', '--leave-one-budget-out')}")
    finals, _ = ladder.final_points()
    if "flops" not in finals.columns:
        raise LadderError("a backtest needs each run's compute (flops, or params and tokens)")
    scored = finals
    if law.inputs == ("flops",):
        # A law of C describes the compute-optimal frontier only: the other sizes of an
        # isoFLOP budget sit above it by design, and scoring them would report misses and
        # "outside" marks that say nothing about the law (as compare and calibrate do).
        scored, _, _ = compute_frontier(finals)
    if fit_max_flops is not None:
        above = finals[finals["flops"] > fit_max_flops * (1 + 1e-9)]
        held = above[above["run"].isin(scored["run"])]
        unscored = len(above) - len(held)
        if held.empty:
            raise LadderError(f"no run of ladder {ladder.name!r} is above {fit_max_flops:.3g} "
                              f"FLOPs: nothing to predict")
        folds = [(f"fit <= {fit_max_flops:.3g} FLOPs",
                  ladder.select(max_flops=fit_max_flops), held)]
        design = f"fit on runs <= {fit_max_flops:.3g} FLOPs, predict {len(held)} larger run(s)"
    else:
        budgets = budget_labels(finals)
        if budgets.nunique() < 3:
            raise LadderError(f"leave-one-budget-out needs at least 3 compute budgets, ladder "
                              f"{ladder.name!r} has {budgets.nunique()}")
        folds, unscored = [], 0
        for b in sorted(budgets.unique(), key=float):
            out = finals[budgets == b]
            keep = sorted(set(ladder.runs) - set(out["run"]))
            held = out[out["run"].isin(scored["run"])]
            unscored += len(out) - len(held)
            folds.append((f"without budget {b}", ladder.select(runs=keep), held))
        design = f"leave one budget out ({len(folds)} budgets)"
    settings = dict(fixed=fixed, bounds=bounds, delta=delta, seed=seed,
                    include_unfinished=include_unfinished)
    warm = None
    checked = np.zeros(len(folds), dtype=bool)
    if len(folds) > 1:
        # Refits of a law already fitted start at the full-data optimum (global search once).
        try:
            warm = dict(fit(ladder, law, identify=False, **settings).params)
        except DelphiError:
            warm = None  # the folds then search globally, each on its own
        if check_every and check_every > 0:
            rng = np.random.default_rng(np.random.SeedSequence([seed, len(folds)]))
            checked[int(rng.integers(min(check_every, len(folds))))::check_every] = True
    n_jobs_boot = n_jobs if len(folds) == 1 else 1
    boot = (dict(n=n_boot, seed=seed, n_jobs=n_jobs_boot) if interval == "bootstrap" else None)
    jobs = [(train, law, settings, warm, bool(checked[i]), boot)
            for i, (_, train, _) in enumerate(folds)]
    try:
        fold_fits = map_jobs(_fold_fit, jobs, n_jobs=n_jobs, desc="backtest folds", unit="fold")
    except DelphiError:
        for (name, _, _), job in zip(folds, jobs):  # find and name the fold that failed
            try:
                _fold_fit(job)
            except DelphiError as exc:
                raise FitError(f"backtest fold '{name}': {exc}") from None
        raise
    rows, fits, notes = [], [], []
    if unscored:
        notes.append(f"a law of compute alone predicts the compute-optimal frontier: "
                     f"{unscored} held-out run(s) that are not the lowest loss of their budget "
                     f"are not scored (a law of N and D, e.g. chinchilla, scores every run)")
    codes = []
    for (name, train, held), (result, code, draws, boot_note) in zip(folds, fold_fits):
        codes.append(code)
        if boot_note:
            notes.append(f"[{name}] {boot_note}")
        fits.append({"fold": name, "n_runs": result.n_points, "params": result.params,
                     "converged": result.converged, "warnings": list(result.warnings),
                     "warm_start": warm is not None and code != 1})
        x = rows_inputs(law, ladder, held)
        pred = result.predict(x)
        # One FittedLaw per fold: its bootstrap and calibration are made once for its rows,
        # on the fold's own runs only (the held-out runs never size their interval).
        fitted = FittedLaw(ladder=train, law=law, fit=result, degenerate=None, bounds=bounds,
                           delta=delta, seed=seed) if interval in WIDENED else None
        if draws is not None:
            notes.extend(f"[{name}] {w}" for w in draws.warnings)
        for i, (_, r) in enumerate(held.iterrows()):
            xi = {k: v[i:i + 1] for k, v in x.items()}
            lo = hi = None
            if interval in WIDENED:
                lo, hi = _widened_interval(fitted, r, xi, float(pred[i]), interval, level,
                                           n_boot, n_jobs_boot, name, notes, first=i == 0)
            elif interval is not None and not (interval == "bootstrap" and draws is None):
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
    n_checked, n_worse = sum(c >= 0 for c in codes), sum(c == 1 for c in codes)
    if n_worse:
        notes.append(f"warm-start guard: in {n_worse} of {n_checked} checked fold(s) the global "
                     f"search found a better optimum or excluded other runs (its fit was kept); "
                     f"folds far from the full-data optimum may need a global search each "
                     f"(API: backtest(..., check_every=1))")
    if fixed and interval is not None:
        given = ", ".join(f"{k} = {v:g}" for k, v in fixed.items())
        notes.append(f"{given} fixed (not fitted): the intervals are conditional on "
                     f"{'this value' if len(fixed) == 1 else 'these values'} and leave out "
                     f"{'its' if len(fixed) == 1 else 'their'} uncertainty")
    if interval in ("delta", "bootstrap") and any(r.lower is None for r in rows):
        ask = option('interval="auto"', "--interval auto")
        notes.append(f"the {interval} interval is the fold fit's own; predict's default "
                     f"interval (auto) is widened by the ladder's calibration or the reference "
                     f"class and exists where the fit's own does not: {ask} backtests that one")
    rows.sort(key=lambda r: (r.flops or 0.0, r.run))
    return Backtest(law=law.name, design=design, rows=rows, level=level, fits=fits,
                    notes=sorted(set(notes)), guard={"checked": n_checked, "worse": n_worse})


# ----------------------------------------------------------------------------- nested fits
#: Steady drift is judged over the last this-many nested fits (prefixes) ...
DRIFT_WINDOW = 4
#: ... and must exceed this many combined standard errors.
DRIFT_SES = 2.0


@dataclass(frozen=True)
class PrefixStep:
    """The fit of one prefix of the ladder (every finished run up to a compute budget)."""

    max_flops: float
    """Largest compute budget in the prefix [FLOPs]."""
    n_runs: int
    """Runs fitted."""
    params: dict[str, float]
    """Every parameter's value (fixed ones included)."""
    stderr: dict[str, float]
    """Approximate (Gauss-Newton) standard errors of the free parameters (natural units)."""
    forecast: float
    """Predicted loss at the target (ladder unit)."""
    forecast_se: float | None
    """Its approximate standard error (delta method on the parameters; None when the fit has
    no covariance)."""
    converged: bool
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"max_flops": self.max_flops, "n_runs": self.n_runs,
                "params": {k: float(v) for k, v in self.params.items()},
                "stderr": {k: float(v) for k, v in self.stderr.items()},
                "forecast": self.forecast, "forecast_se": self.forecast_se,
                "converged": self.converged, "warnings": list(self.warnings)}


@dataclass(frozen=True)
class PrefixFits:
    """A law fitted to growing prefixes of a ladder: each parameter's and the forecast's path,
    and which of them drift steadily (see :func:`prefix_fits`)."""

    law: str
    target: dict
    """The target whose forecast is followed (:meth:`delphi.forecast.Target.to_dict`)."""
    target_label: str
    steps: list[PrefixStep]
    """One per prefix, by increasing compute."""
    drift: dict[str, dict]
    """Per free parameter and ``"forecast"``: ``values``, ``stderr`` (over the window),
    ``monotone``, ``change`` (last - first in the window), ``combined_se``,
    ``tested`` (False when a standard error is missing) and ``drift`` (the flag)."""
    window: int
    n_se: float
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    """One per steadily drifting quantity (also raised as :class:`~delphi.errors.FitWarning`)."""

    @property
    def drifting(self) -> list[str]:
        """Names of the quantities flagged for steady drift."""
        return [k for k, d in self.drift.items() if d["drift"]]

    def to_frame(self) -> pd.DataFrame:
        """The prefix fits as a pandas DataFrame: one row per :class:`PrefixStep`, by
        increasing compute.

        Columns: ``max_flops`` [FLOPs], ``n_runs``, then each parameter's value by its name
        (fixed ones included), then ``<name>_se`` for each free parameter (the approximate
        standard error; NaN where that prefix's fit has none: at a bound or without residual
        degrees of freedom), ``forecast`` (loss at :attr:`target_label`), ``forecast_se``
        (NaN without a covariance), ``converged`` and ``n_warnings`` (that fit's warnings).
        Which quantities drift is in :attr:`drift` / :attr:`drifting`.
        """
        names: list[str] = []
        for s in self.steps:
            names += [k for k in s.params if k not in names]
        free = [k for k in self.drift if k != "forecast"] or \
            [k for k in names if any(k in s.stderr for s in self.steps)]
        rows = []
        for s in self.steps:
            row = {"max_flops": s.max_flops, "n_runs": s.n_runs}
            row.update({k: s.params.get(k, math.nan) for k in names})
            row.update({f"{k}_se": s.stderr.get(k, math.nan) for k in free})
            row.update({"forecast": s.forecast,
                        "forecast_se": math.nan if s.forecast_se is None else s.forecast_se,
                        "converged": s.converged, "n_warnings": len(s.warnings)})
            rows.append(row)
        columns = (["max_flops", "n_runs", *names, *(f"{k}_se" for k in free), "forecast",
                    "forecast_se", "converged", "n_warnings"])
        return pd.DataFrame(rows, columns=columns)

    def to_dict(self) -> dict:
        return {"law": self.law, "design": "prefixes", "target": self.target,
                "target_label": self.target_label, "steps": [s.to_dict() for s in self.steps],
                "drift": self.drift, "drifting": self.drifting,
                "rule": {"window": self.window, "n_se": self.n_se}, "notes": self.notes,
                "warnings": self.warnings}

    def report(self) -> str:
        free = [k for k in self.drift if k != "forecast"]
        lines = [f"backtest   {self.law}, nested fits of growing prefixes of the ladder "
                 f"(forecast at {self.target_label})",
                 f"{'prefix <= C':>12} {'runs':>5} " + " ".join(f"{k:>20}" for k in free)
                 + f" {'forecast':>18}"]

        def cell(v, se):
            return f"{v:.4g} +- {se:.2g}" if se is not None and math.isfinite(se) else f"{v:.4g}"

        for s in self.steps:
            lines.append(f"{s.max_flops:>12.3g} {s.n_runs:>5} "
                         + " ".join(f"{cell(s.params[k], s.stderr.get(k)):>20}" for k in free)
                         + f" {cell(s.forecast, s.forecast_se):>18}")
        for name, d in self.drift.items():
            path = " -> ".join(f"{v:.4g}" for v in d["values"])
            if d["drift"]:
                continue  # in the warnings below
            if not d["tested"]:
                why = d.get("why", "no standard error")
                lines.append(f"drift      {name}: {path}: not tested ({why})")
            else:
                lines.append(f"drift      {name}: {path}: no steady drift beyond "
                             f"{self.n_se:g} combined s.e. ({d['combined_se']:.3g})")
        for w in self.warnings:
            lines.append(f"warning    {w}")
        for s in self.steps:      # each prefix fit's own warnings (as in the JSON)
            for w in s.warnings:
                lines.append(f"warning    prefix <= {s.max_flops:.3g}: {w}")
        for n in self.notes:
            lines.append(f"note       {n}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _prefix_job(job):
    """Fit one prefix and forecast the target: a PrefixStep, or the error message."""
    ladder, law, target, settings, max_flops, profiles = job
    try:
        # The prefix report shows no profiles: skip them (half the time of each prefix);
        # the degeneracy test still runs, and the fits themselves are the same.
        fitted = fit_stage(ladder, law or default_law(ladder, target),
                           fit_max_flops=max_flops, identify=profiles, **settings)
        point = point_stage(fitted, target, interval_wanted=False)
    except DelphiError as exc:
        return str(exc)
    result = fitted.fit
    se = None
    try:
        log_se = log_prediction_se(result, point.inputs)
        se = point.loss * log_se if log_se is not None else None
    except DelphiError:
        pass
    return PrefixStep(max_flops=max_flops, n_runs=result.n_points, params=dict(result.params),
                      stderr=dict(result.stderr), forecast=point.loss, forecast_se=se,
                      converged=result.converged, warnings=tuple(result.warnings))


def _steady_drift(values: list[float], ses: list[float | None], window: int,
                  n_se: float) -> dict:
    v = np.asarray(values[-window:], dtype=float)
    s = ses[-window:]
    out = {"values": v.tolist(), "stderr": [None if e is None or not math.isfinite(e) else e
                                            for e in s],
           "monotone": False, "change": float(v[-1] - v[0]), "combined_se": None,
           "tested": False, "drift": False}
    if len(v) < 3:
        out["why"] = f"{len(v)} prefixes; at least 3 needed"
        return out
    steps = np.diff(v)
    out["monotone"] = bool(np.all(steps > 0) or np.all(steps < 0))
    first, last = s[0], s[-1]
    if first is None or last is None or not (math.isfinite(first) and math.isfinite(last)):
        out["why"] = "no standard error at an end of the window (a parameter at a bound?)"
        return out
    combined = math.hypot(first, last)
    out.update(combined_se=combined, tested=True,
               drift=bool(out["monotone"] and abs(out["change"]) > n_se * combined))
    return out


def prefix_fits(ladder: Ladder, law: str | Law | None = None, target=None, *,
                fixed: Mapping[str, float] | None = None,
                bounds: Mapping[str, Sequence[float]] | None = None, delta: float = DEFAULT_DELTA,
                include_unfinished: bool = False, seed: int = 0, min_runs: int | None = None,
                window: int = DRIFT_WINDOW, n_se: float = DRIFT_SES,
                n_jobs: int | None = None) -> PrefixFits:
    """Fit ``law`` to growing prefixes of the ladder and flag parameters that drift.

    The ladder's finished runs are grouped into compute budgets (runs within 5% of compute);
    prefix k holds every run up to budget k. Prefixes start at the first with at least
    ``min_runs`` runs (default n_free + 2, so every fit has 2 residual degrees of freedom)
    and end with the whole ladder. Each prefix is fitted by the global search (as
    :func:`delphi.forecast.predict` with ``fit_max_flops``) and the target predicted.

    **Steady drift**: over the last ``window`` prefixes (default 4; at least 3 needed), a free
    parameter's (or the forecast's) values change in one direction at every step (strictly
    monotone) **and** the total change, last minus first of the window, exceeds ``n_se``
    (default 2) combined standard errors, ``sqrt(se_first^2 + se_last^2)``, with the
    approximate Gauss-Newton standard errors of those two fits (the delta method for the
    forecast). A law that describes the ladder settles as rungs are added; one that climbs
    steadily, beyond its own stated uncertainty, is extrapolating a trend the ladder has not
    finished showing (e.g. an effective floor that rises with scale), and its standard errors
    understate the forecast's uncertainty. A quantity without a standard error at an end of
    the window is reported as not tested.

    Parameters
    ----------
    ladder: the runs (final losses; ``include_unfinished`` as in :func:`delphi.fitting.fit`).
    law: the law (final-loss law; required: None raises
        :class:`~delphi.errors.MissingArgumentError` listing the laws).
    target: what to forecast at each prefix: a :class:`~delphi.forecast.Target`, a dict of its
        fields or a number of FLOPs; default the ladder's largest finished run (its C, N, D).
    fixed, bounds, delta, seed: as in :func:`delphi.fitting.fit`.
    min_runs: smallest prefix fitted [runs].
    window, n_se: the drift rule above.
    n_jobs: joblib workers for the prefixes (results do not depend on it).

    Returns
    -------
    PrefixFits; each drifting quantity is also raised as a :class:`~delphi.errors.FitWarning`.

    Raises
    ------
    LadderError: no compute column, or fewer than 3 prefixes can be formed.
    LawError, TargetError: a bad law, setting or target.
    MissingArgumentError: no ``law`` given.
    """
    law = get_law(law, needed_by="prefix_fits")
    ladder = as_ladder(ladder)      # a DataFrame is read as load_ladder reads it
    if not (isinstance(window, int) and window >= 3):
        raise LadderError(f"the drift window needs at least 3 prefixes, got {window!r}")
    if not (isinstance(n_se, (int, float)) and n_se > 0):
        raise LadderError(f"n_se must be a positive number, got {n_se!r}")
    finals, _ = ladder.final_points(include_unfinished=include_unfinished)
    if "flops" not in finals.columns or finals["flops"].isna().any():
        raise LadderError("nested fits need each run's compute (flops, or params and tokens)")
    if target is None:
        top = finals.loc[finals["flops"].idxmax()]
        # The run's own inputs of the law (its C for a law of C, its N and D for one of N, D).
        fields = {c: float(top[c]) for c in law.inputs
                  if c in ("flops", "params", "tokens") and c in top and pd.notna(top[c])}
        target = Target(name=f"{top['run']} (the ladder's largest run)", **fields)
        label = f"the ladder's largest run {top['run']!r}"
    else:
        target = as_target(target)
        label = target.name or ", ".join(f"{k} = {v:.4g}" for k, v in (
            ("C", target.flops), ("N", target.params), ("D", target.tokens)) if v is not None)
    n_free = len([p for p in law.param_names if p not in (fixed or {})])
    need = max(min_runs if min_runs is not None else n_free + 2, 1)
    budgets = budget_labels(finals)
    ends = finals.groupby(budgets)["flops"].max().sort_values()
    counts = np.cumsum(finals.groupby(budgets).size().reindex(ends.index).to_numpy())
    cuts = [float(c) for c, k in zip(ends.to_numpy(), counts) if k >= need]
    if len(cuts) < 3:
        fewer = sorted((p for p in ("power", "chinchilla")
                        if len(get_law(p).param_names) < len(law.param_names)),
                       key=lambda p: len(get_law(p).param_names))
        hint = (f"; a law with fewer free parameters needs fewer runs per prefix, e.g. "
                f"{option(f'law={fewer[0]!r}', f'--law {fewer[0]}')} "
                f"({len(get_law(fewer[0]).param_names)} parameters)"
                if fewer else f"; fix parameters ({option('fixed', '--fix NAME=VALUE')}) so "
                              f"that each prefix needs fewer runs")
        raise LadderError(f"ladder {ladder.name!r} gives {len(cuts)} prefix(es) of at least "
                          f"{need} runs (law {law.name!r}: {n_free} free parameters + 2; the "
                          f"ladder has {len(ends)} compute budgets, {len(finals)} runs); nested "
                          f"fits need 3{hint}")
    settings = dict(fixed=fixed, bounds=bounds, delta=delta, include_unfinished=include_unfinished,
                    seed=seed)
    # Identification profiles (not shown per prefix, and half the time of each fit) only for
    # the last prefix, the whole ladder; every prefix keeps the degeneracy test.
    results = map_jobs(_prefix_job, [(ladder, law, target, settings, c, c == cuts[-1])
                                     for c in cuts],
                       n_jobs=n_jobs, desc="nested fits", unit="prefix")
    steps, notes = [], []
    for c, r in zip(cuts, results):
        if isinstance(r, str):
            notes.append(f"prefix <= {c:.3g} FLOPs not fitted: {r}")
        else:
            steps.append(r)
    if len(steps) < 3:
        raise LadderError(f"only {len(steps)} prefix(es) of ladder {ladder.name!r} could be "
                          f"fitted; nested fits need 3" + (f" ({notes[0]})" if notes else ""))
    free = [p for p in law.param_names if p not in (fixed or {})]
    drift = {}
    for name in free:
        drift[name] = _steady_drift([s.params[name] for s in steps],
                                    [s.stderr.get(name) for s in steps], window, n_se)
    drift["forecast"] = _steady_drift([s.forecast for s in steps],
                                      [s.forecast_se for s in steps], window, n_se)
    found = []
    for name, d in drift.items():
        if not d["drift"]:
            continue
        path = " -> ".join(f"{v:.4g}" for v in d["values"])
        what = "the forecast" if name == "forecast" else name
        found.append(f"steady drift of {what} across the last {len(d['values'])} nested fits: "
                     f"{path} ({d['change']:+.3g}, {abs(d['change']) / d['combined_se']:.3g}x "
                     f"the combined s.e. {d['combined_se']:.3g}); the law has not settled as "
                     f"the ladder grows, and its standard errors understate the uncertainty")
    for w in found:
        warnings.warn(w, FitWarning, stacklevel=user_stacklevel())
    notes.append("identification profiles (not-identified warnings) are computed for the "
                 "last prefix, the whole ladder, only; every prefix is tested for a "
                 "degenerate fit")
    if any(not s.converged for s in steps):
        notes.append("some prefix fits did not converge: "
                     + ", ".join(f"<= {s.max_flops:.3g}" for s in steps if not s.converged))
    return PrefixFits(law=law.name, target=target.to_dict(), target_label=label, steps=steps,
                      drift=drift, window=window, n_se=float(n_se), notes=notes, warnings=found)
