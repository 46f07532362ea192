"""Extrapolation-calibrated intervals: a ladder's own out-of-sample errors, by extrapolation ratio.

A forecast extrapolated 10x to 1,000x beyond the fitted runs is wrong for two reasons its
parameter and run-noise intervals leave out: the law is slightly wrong (misspecified), and
that error grows with the extrapolation distance. Both are measured here from the ladder
itself, by *leave-future-out* refits (the rolling-origin evaluation of time-series
forecasting, Tashman 2000): fit the law on the compute budgets up to a cut, predict every run
of the budgets above it, and record each log error against the extrapolation ratio
r = C_run / C_max_fitted (:func:`leave_future_out`, :class:`LFOErrors`).

:class:`CalibrationModel` turns those errors into an error spread that grows with log r,
sigma(r) = sigma_0 + k log10 r, fitted by median (L1 quantile) regression of the absolute
errors -- the empirical prediction intervals of Williams & Goodman (1971), which size a
forecast interval from the forecaster's own past out-of-sample errors at each horizon, in
the spirit of split-conformal prediction (Vovk et al. 2005; Lei et al. 2018) with the
horizon as the covariate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from ..core import shared_fits as shared
from ..core.quantile_line import quantile_line
from ..core.quantiles import check_level, norm_ppf, t_ppf
from ..core.text import level_percent

from ..inputs.law_inputs import budget_labels, rows_inputs
from ..errors import DelphiError, FitError, LadderError, TargetError
from ..fitting import DEFAULT_DELTA, fit
from ..fitting.api import (DIVERGENCE_THRESHOLD, compute_frontier, screen_dominated,
                          screen_cap)
from ..inputs.ladder import Ladder
from ..laws import Law, get_law
from .uncertainty import DEFAULT_LEVEL, delta_interval, delta_rows

__all__ = ["LFOErrors", "leave_future_out", "cut_levels", "CalibrationModel",
           "calibrated_interval", "calibrate", "CalibrationBacktest", "calibration_backtest",
           "MIN_FOLDS", "MAX_FOLDS", "SIGMA_FLOOR", "FIRST_CUT_RULES", "FIRST_CUT_RULE",
           "first_cut_points", "first_cut_formula"]

#: Fewest leave-future-out folds (cuts) a calibration model is fitted from: with fewer, the
#: growth of the error with r rests on one or two refits.
MIN_FOLDS = 3
#: Cuts a forecast's calibration refits at most (evenly spaced, see :func:`leave_future_out`):
#: a ladder of distinct runs has a cut per run, and twelve warm-started refits keep the
#: default forecast quick while spanning the ladder.
MAX_FOLDS = 12
#: Smallest sigma_0 [log loss]: the run-noise floor used elsewhere in delphi, so no
#: calibrated interval is zero-width.
SIGMA_FLOOR = 1e-4
#: Rules for the fewest fitted points at or below a leave-future-out cut, as a function of the
#: law's free parameters p (the first cuts fitted are the least determined: 7 points for
#: chinchilla's 5 under ``p+2``). Name -> (points for p free parameters, as a formula).
FIRST_CUT_RULES = {"p+2": (lambda p: p + 2, "free parameters + 2"),
                   "2p": (lambda p: 2 * p, "2 x free parameters"),
                   "2p+2": (lambda p: 2 * p + 2, "2 x free parameters + 2"),
                   "3p": (lambda p: 3 * p, "3 x free parameters")}
#: The rule :func:`leave_future_out`, :func:`cut_levels` (and so :func:`delphi.selection.compare`'s
#: shared cuts) apply, read at each call: at least p + 2 points (2 residual degrees of freedom)
#: at or below the first cut. The stricter rules of :data:`FIRST_CUT_RULES` were scored leave
#: one ladder out (``benchmarks/bench_cut_rule.py``; benchmarks/RESULTS.md, "Issue 27,
#: 2026-12-04: the first leave-future-out cut, chosen leave one ladder out").
FIRST_CUT_RULE = "p+2"
#: median |Z| of a standard normal, Phi^-1(0.75): median |e| / this estimates a normal sd.
_MEDIAN_ABS_Z = float(norm_ppf(0.75))


@dataclass(frozen=True)
class LFOErrors:
    """Leave-future-out errors of a law on a ladder: one entry per (cut, predicted run).

    Every array has shape (n,), one element per prediction, ordered by cut then compute.
    """

    law: str
    """Name of the law refitted."""
    ladder: str
    """Name of the ladder."""
    run: np.ndarray
    """Run id predicted (str)."""
    cut: np.ndarray
    """C_max_fitted of the fold that predicted it: the largest compute fitted [FLOPs]."""
    flops: np.ndarray
    """C of the run predicted [FLOPs]."""
    ratio: np.ndarray
    """Extrapolation ratio r = C_run / C_max_fitted (> 1)."""
    log_error: np.ndarray
    """log L_pred - log L_obs (natural log; ~ relative error; positive = predicted too high)."""
    predicted: np.ndarray
    """Predicted final loss (ladder unit)."""
    actual: np.ndarray
    """Observed final loss (ladder unit)."""
    folds: list[dict] = field(default_factory=list)
    """Per cut: ``cut`` [FLOPs], ``budget`` (its :func:`cut_levels` label), ``n_budgets`` (compute
    budgets fitted: the rungs), ``n_points`` fitted, ``n_predicted``, ``params``,
    ``converged``, ``warm_start`` and the fit's ``warnings``."""
    notes: list[str] = field(default_factory=list)
    """Cuts skipped or refitted by global search, and runs not predicted, each with why."""
    budget: np.ndarray | None = None
    """The budget label [FLOPs] of each prediction's cut (its :func:`cut_levels` value): the
    same for every law cut there, where :attr:`cut` depends on the points the law fitted."""
    fits: list = field(default_factory=list, repr=False, compare=False)
    """The fold fits (:class:`~delphi.fitting.Fit`), one per entry of :attr:`folds` (not
    serialised): the nested calibration backtest reads their parameter uncertainty."""

    @property
    def n_folds(self) -> int:
        """Number of cuts that predicted at least one run."""
        return len(np.unique(self.cut))

    def __len__(self) -> int:
        return len(self.log_error)

    def to_dict(self) -> dict:
        """JSON-ready: the per-prediction rows, the folds and the notes."""
        rows = [{"run": str(r), "cut": float(c), "flops": float(f), "ratio": float(q),
                 "log_error": float(e), "predicted": float(p), "actual": float(a)}
                for r, c, f, q, e, p, a in zip(self.run, self.cut, self.flops, self.ratio,
                                                self.log_error, self.predicted, self.actual)]
        return {"law": self.law, "ladder": self.ladder, "design": "leave-future-out",
                "n_folds": self.n_folds, "rows": rows, "folds": self.folds, "notes": self.notes}

    def report(self) -> str:
        """Readable summary: one line per fold, then |error| binned by decade of r."""
        lines = [f"leave-future-out   {self.law} on {self.ladder}: {self.n_folds} fold(s), "
                 f"{len(self)} prediction(s)",
                 f"{'fit <= C':>10} {'fitted':>6} {'pred.':>5} {'max r':>8} "
                 f"{'mean |e|':>9} {'max |e|':>9}"]
        for f in self.folds:
            sel = self.cut == f["cut"]
            if not sel.any():
                continue
            e = np.abs(self.log_error[sel])
            lines.append(f"{f['cut']:>10.3g} {f['n_points']:>6} {int(sel.sum()):>5} "
                         f"{self.ratio[sel].max():>8.3g} {e.mean():>9.2%} {e.max():>9.2%}")
        if len(self):
            dec = np.floor(np.log10(self.ratio)).astype(int)
            for d in np.unique(dec):
                e = np.abs(self.log_error[dec == d])
                lines.append(f"r in [1e{d}, 1e{d + 1}): {len(e):>4} prediction(s), "
                             f"mean |e| {e.mean():.2%}, max {e.max():.2%}")
        for n in self.notes:
            lines.append(f"note       {n}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def leave_future_out(ladder: Ladder, law: str | Law | None = None, *,
                     fixed: Mapping[str, float] | None = None,
                     bounds: Mapping[str, Sequence[float]] | None = None,
                     delta: float = DEFAULT_DELTA, min_budgets: int = 3,
                     max_folds: int | None = None, cuts: Sequence[float] | None = None,
                     seed: int = 0) -> LFOErrors:
    """Fit below each compute budget, predict every budget above: errors by extrapolation ratio.

    The finished runs are grouped into compute budgets (runs within 5% of compute, as in
    :func:`delphi.analyses.backtest.backtest`). For each cut k, from the first with at least
    ``min_budgets`` budgets and at least :func:`first_cut_points` fitted points (the rule
    :data:`FIRST_CUT_RULE`: free parameters + 2) up to the second-largest budget, the law is
    fitted to the runs of budgets <= k and predicts each run of the budgets above, giving
    log L_pred - log L_obs and r = C_run / C_max_fitted.

    The first cut is fitted by the global search; each later cut is warm-started from the
    previous cut's parameters (``warm_start``, ``identify=False``: the fast refit path), and
    fitted by the global search instead if the warm start fails (noted). A cut that cannot be
    fitted (e.g. the smallest budgets do not vary an input the law needs) is skipped with a
    note, and the next cut is tried.

    A law of compute alone describes the compute-optimal frontier, so for it only the
    lowest-loss run of each budget (all repeated seeds of a one-size budget) is predicted, as
    it is fitted. Runs far above or below a run with no more of each input (diverged, or in
    another unit) are not predicted and are noted.

    Parameters
    ----------
    ladder: the runs (final losses of finished runs are used).
    law: law name or object (required, as for :func:`delphi.fitting.fit`: None raises
        :class:`~delphi.errors.MissingArgumentError` listing the laws).
    fixed, bounds, delta, seed: as in :func:`delphi.fitting.fit`.
    min_budgets: fewest compute budgets in the first fit.
    max_folds: at most this many cuts, evenly spaced in order of compute (always keeping the
        first and the last); None keeps every cut. A ladder of distinct runs (no isoFLOP grid)
        has a budget per run, so a cut per run: this bounds the cost.
    cuts: cut only at these budgets [FLOPs] (of :func:`cut_levels`; others are ignored): the
        same folds for several laws, so their errors can be compared pair by pair.

    Returns
    -------
    LFOErrors, whose arrays have one element per (cut, predicted run).

    Raises
    ------
    LadderError: the ladder has no compute (``flops``, or params and tokens), or too few
        budgets for any cut (the message gives the counts needed and found).
    FitError: no cut can be fitted (the message names the first).
    MissingArgumentError: no ``law`` given.
    """
    law = get_law(law, needed_by="leave_future_out")
    fixed = dict(fixed or {})
    finals, pts, budget_of, b_pts, levels, notes = lfo_points(ladder, law)
    n_free = sum(p.name not in fixed for p in law.params)
    need, rule = first_cut_points(n_free), first_cut_formula()
    allowed = _cuts_of(b_pts, levels, need, min_budgets)
    if cuts is not None:
        wanted = np.asarray(list(cuts), float)
        allowed = [b for b in allowed if np.any(np.abs(wanted / b - 1) < 1e-9)]
    cuts = allowed
    if max_folds is not None and len(cuts) > max_folds:
        if max_folds < 1:
            raise LadderError(f"max_folds must be >= 1, got {max_folds}")
        keep = np.unique(np.round(np.linspace(0, len(cuts) - 1, max_folds)).astype(int))
        cuts = [cuts[i] for i in keep]
    if not cuts:
        raise LadderError(f"leave-future-out of law {law.name!r} on ladder {ladder.name!r} needs "
                          f"a cut with >= {min_budgets} compute budgets and >= {need} points "
                          f"({rule}) below it and a budget above it; the ladder "
                          f"has {len(levels)} budget(s) and {len(pts)} point(s)")
    b_finals = finals["run"].map(budget_of).to_numpy(float)
    # The columns each cut reads, taken out of the tables once (as lists and arrays: pandas
    # selections of a string column cost more than the cut's own arithmetic).
    final_runs = finals["run"].tolist()
    final_flops = finals["flops"].to_numpy(float)
    held_runs, held_ids = pts["run"].tolist(), pts["run"].astype(str).tolist()
    held_flops, held_loss = pts["flops"].to_numpy(float), pts["loss"].to_numpy(float)
    held_x = None           # the law's inputs at every point (read when first needed)
    settings = dict(fixed=fixed or None, bounds=bounds, delta=delta, seed=seed, identify=False)
    cols: dict[str, list] = {k: [] for k in ("run", "cut", "flops", "ratio", "log_error",
                                              "predicted", "actual", "budget")}
    folds: list[dict] = []
    warm = None
    first_error = None
    fold_fits: list = []
    for b in cuts:
        train = ladder.select(runs=[r for r, k in zip(final_runs, b_finals <= b) if k])
        name = f"fit <= {b:.3g} FLOPs"
        try:
            result = fit(train, law, warm_start=warm, **settings)
        except DelphiError as exc:
            if warm is None:
                first_error = first_error or f"leave-future-out cut '{name}': {exc}"
                notes.append(f"cut '{name}' skipped: {exc}")
                continue
            try:       # a warm start from the smaller cut can fail where a search does not
                result = fit(train, law, **settings)
                notes.append(f"cut '{name}': warm start failed ({exc}); fitted by global search")
            except DelphiError as exc2:
                notes.append(f"cut '{name}' skipped: {exc2}")
                continue
        fitted = set(result.labels)
        in_fit = np.array([r in fitted for r in final_runs], dtype=bool)
        # pandas' max of the fitted runs' compute: NaN when none is a run (labels of a law
        # of checkpoints)
        c_max = float(final_flops[in_fit].max()) if in_fit.any() else math.nan
        sel = b_pts > b
        idx = np.flatnonzero(sel)
        if "h" in law.inputs:       # h comes from the ladder's schedules, row by row
            x = rows_inputs(law, ladder, pts[sel])
        else:
            if held_x is None:
                held_x = {c: pts[c].to_numpy(float) for c in law.inputs}
            x = {c: v[sel] for c, v in held_x.items()}
        pred = np.asarray(result.predict(x), float)
        obs = held_loss[sel]
        if not np.all(np.isfinite(pred) & (pred > 0)):
            bad_runs = [held_runs[i] for i in idx[~(np.isfinite(pred) & (pred > 0))]]
            raise FitError(f"leave-future-out cut '{name}': non-finite or non-positive "
                           f"prediction for run(s) {', '.join(map(repr, bad_runs[:5]))}")
        flops = held_flops[sel]
        cols["run"] += [held_ids[i] for i in idx]
        cols["cut"] += [c_max] * len(idx)
        cols["budget"] += [float(b)] * len(idx)
        cols["flops"] += flops.tolist()
        cols["ratio"] += (flops / c_max).tolist()
        cols["log_error"] += (np.log(pred) - np.log(obs)).tolist()
        cols["predicted"] += pred.tolist()
        cols["actual"] += obs.tolist()
        folds.append({"cut": c_max, "budget": float(b),
                      "n_budgets": int((levels <= b * (1 + 1e-12)).sum()),
                      "n_points": result.n_points, "n_predicted": len(idx),
                      "params": {k: float(v) for k, v in result.params.items()},
                      "converged": bool(result.converged), "warm_start": warm is not None,
                      "warnings": list(result.warnings)})
        fold_fits.append(result)
        warm = dict(result.params)
    if not folds:
        raise FitError(first_error or f"leave-future-out of law {law.name!r} on ladder "
                       f"{ladder.name!r}: no cut could be fitted")
    arrays = {k: np.asarray(v, dtype=object if k == "run" else float) for k, v in cols.items()}
    return LFOErrors(law=law.name, ladder=ladder.name, folds=folds, notes=notes, fits=fold_fits,
                     **arrays)


def lfo_points(ladder: Ladder, law: Law):
    """The finished runs, the points ``law`` predicts (the compute frontier for a law of C;
    runs dominated by another are left out, noted), each point's budget, and the budgets.

    Inside :func:`delphi.core.shared_fits.shared_fits` (one CLI command) they are found once
    per ladder and law object: a forecast's calibration and its reference class's rung count
    both ask. Each caller gets its own notes list and budget map; the tables and arrays are
    shared and must not be changed."""
    key = ("lfo_points", id(ladder), id(ladder.table), id(law)) if shared.active() else None
    hit = shared.lookup(key, ladder)
    if hit is not None and hit[0] is law:
        finals, pts, budget_of, b_pts, levels, notes = hit[1]
        return finals, pts, dict(budget_of), b_pts, levels, list(notes)
    out = _lfo_points(ladder, law)
    shared.store(key, ladder, (law, out))
    finals, pts, budget_of, b_pts, levels, notes = out
    return finals, pts, dict(budget_of), b_pts, levels, list(notes)


def _lfo_points(ladder: Ladder, law: Law):
    finals, _ = ladder.final_points()
    if "flops" not in finals.columns or finals["flops"].isna().any():
        raise LadderError(f"leave-future-out needs each run's compute (flops, or params and "
                          f"tokens); ladder {ladder.name!r} lacks it")
    finals = finals.reset_index(drop=True)
    budget_of = dict(zip(finals["run"], budget_labels(finals).astype(float)))
    pts, notes = finals, []
    if law.inputs == ("flops",):
        pts, _, _ = compute_frontier(finals)   # the frontier the law describes
        pts = pts.reset_index(drop=True)
    # Capped as in fit: one run far below the others must not take the runs above it out.
    cap = screen_cap(len(pts))
    bad, _, refused = screen_dominated(pts, law, DIVERGENCE_THRESHOLD, cap)
    if bad:
        notes += [f"run {pts['run'].iloc[i]!r} not predicted: {why}" for i, why in bad.items()]
        pts = pts.drop(index=pts.index[list(bad)]).reset_index(drop=True)
    if refused:
        notes.append(f"{len(refused)} runs sit far above a run with no more of every input, "
                     f"more than {cap} of {len(pts)}: all are predicted (the dominance screen "
                     f"stops there, delphi.fitting.SCREEN_MAX_SHARE)")
    b_pts = pts["run"].map(budget_of).to_numpy(float)
    return finals, pts, budget_of, b_pts, np.unique(b_pts), notes


def first_cut_points(n_free: int, rule: str | None = None) -> int:
    """Fewest fitted points at or below a leave-future-out cut of a law with ``n_free`` free
    parameters, under ``rule`` (a key of :data:`FIRST_CUT_RULES`; default
    :data:`FIRST_CUT_RULE`, read at the call): ``p+2`` gives n_free + 2.

    Raises LadderError for an unknown rule or a negative ``n_free``."""
    rule = FIRST_CUT_RULE if rule is None else rule
    if rule not in FIRST_CUT_RULES:
        raise LadderError(f"unknown first-cut rule {rule!r}; use one of "
                          f"{', '.join(FIRST_CUT_RULES)}")
    if isinstance(n_free, bool) or not isinstance(n_free, (int, np.integer)) or n_free < 0:
        raise LadderError(f"free parameters must be a whole number >= 0, got {n_free!r}")
    return int(FIRST_CUT_RULES[rule][0](int(n_free)))


def first_cut_formula(rule: str | None = None) -> str:
    """The formula of ``rule`` (default :data:`FIRST_CUT_RULE`) in words, for messages:
    "free parameters + 2". Raises LadderError for an unknown rule."""
    rule = FIRST_CUT_RULE if rule is None else rule
    if rule not in FIRST_CUT_RULES:
        raise LadderError(f"unknown first-cut rule {rule!r}; use one of "
                          f"{', '.join(FIRST_CUT_RULES)}")
    return FIRST_CUT_RULES[rule][1]


def _cuts_of(b_pts: np.ndarray, levels: np.ndarray, need: int, min_budgets: int) -> list[float]:
    return [float(b) for i, b in enumerate(levels[:-1])
            if i + 1 >= min_budgets and int((b_pts <= b).sum()) >= need]


def cut_levels(ladder: Ladder, law: str | Law, *, fixed: Mapping[str, float] | None = None,
               min_budgets: int = 3) -> list[float]:
    """The budgets [FLOPs] :func:`leave_future_out` may cut ``law`` at on ``ladder``, in
    increasing order (each with at least ``min_budgets`` budgets and :func:`first_cut_points`
    points at or below it, and a budget above). Raises LadderError as leave_future_out."""
    law = get_law(law)
    _, _, _, b_pts, levels, _ = lfo_points(ladder, law)
    need = first_cut_points(sum(p.name not in (fixed or {}) for p in law.params))
    return _cuts_of(b_pts, levels, need, min_budgets)


@dataclass(frozen=True)
class CalibrationModel:
    """Spread of a law's extrapolation error against the extrapolation ratio r:
    sigma(r) = sigma_0 + k log10(max(r, 1)), an sd of log loss.

    Fitted (:meth:`fit`) by median regression (L1, Koenker & Bassett 1978, solved exactly by
    :func:`~delphi.core.quantile_line.quantile_line`) of |e| / Phi^-1(0.75) on log10 r over the leave-future-out log errors e, with
    k >= 0 and sigma_0 >= :data:`SIGMA_FLOOR`: for e ~ N(0, sigma(r)) the median of |e| is
    Phi^-1(0.75) sigma(r), and the median is robust to the few large errors of a cut far from
    the rest. These are the empirical prediction intervals of Williams & Goodman (1971),
    with the horizon as a covariate as in split-conformal regression (Vovk et al. 2005;
    Lei et al. 2018). The errors keep any bias of the law at that ratio (|e|, not e - mean),
    so the interval, centred on the forecast, widens for a biased law too.
    """

    sigma_0: float
    """Spread at r <= 1 [log loss]."""
    k: float
    """Growth per decade of r [log loss per log10 r], >= 0."""
    n_folds: int
    """Leave-future-out cuts the model was fitted from."""
    n_errors: int
    """Errors (predictions) fitted."""
    max_ratio: float
    """Largest r among the errors: beyond it sigma(r) is extrapolated."""
    law: str = ""
    ladder: str = ""

    @classmethod
    def fit(cls, errors: LFOErrors) -> "CalibrationModel":
        """Fit sigma(r) to leave-future-out errors (see the class docstring).

        Raises
        ------
        FitError: fewer than :data:`MIN_FOLDS` folds, or a non-finite error or ratio <= 0
            (the run is named).
        """
        return cls.from_errors(errors.ratio, errors.log_error, runs=errors.run,
                               n_folds=errors.n_folds, law=errors.law, ladder=errors.ladder)

    @classmethod
    def from_errors(cls, ratio, error, *, runs, n_folds: int, law: str = "",
                    ladder: str = "", what: str = "log error") -> "CalibrationModel":
        """Fit sigma(r) to signed errors ``error`` (shape (n,): log errors for losses, or
        errors in another unit, e.g. accuracy) made at extrapolation ratios ``ratio`` (n,)
        by ``n_folds`` leave-future-out folds; ``runs`` (n,) names each error's run.

        Raises
        ------
        FitError: fewer than :data:`MIN_FOLDS` folds, or a non-finite error or ratio <= 0
            (the run is named).
        """
        if n_folds < MIN_FOLDS:
            raise FitError(f"a calibration model needs leave-future-out errors from at least "
                           f"{MIN_FOLDS} folds; law {law!r} on ladder {ladder!r} "
                           f"gave {n_folds} (more compute budgets are needed)")
        r = np.asarray(ratio, float)
        e = np.asarray(error, float)
        bad = ~(np.isfinite(e) & np.isfinite(r) & (r > 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise FitError(f"leave-future-out error of run {runs[i]!r} is not usable "
                           f"({what} {e[i]}, ratio {r[i]})")
        s0, k = _median_line(np.log10(np.maximum(r, 1.0)), np.abs(e) / _MEDIAN_ABS_Z)
        return cls(sigma_0=s0, k=k, n_folds=n_folds, n_errors=len(e),
                   max_ratio=float(r.max()), law=law, ladder=ladder)

    def sigma(self, r) -> np.ndarray | float:
        """sigma(r) [sd of log loss] at extrapolation ratio(s) r (> 0; r <= 1 gives sigma_0).

        Raises TargetError for r not finite and positive."""
        ra = np.asarray(r, float)
        if not np.all(np.isfinite(ra) & (ra > 0)):
            raise TargetError(f"extrapolation ratio must be finite and > 0, got {r!r}")
        s = self.sigma_0 + self.k * np.log10(np.maximum(ra, 1.0))
        return float(s) if s.ndim == 0 else s

    def interval(self, centre, r, level: float = DEFAULT_LEVEL, param_sd=0.0,
                 run_sd=0.0) -> tuple:
        """New-run interval ``(lower, upper)`` around forecast(s) ``centre`` (loss > 0).

        In log loss the three spreads add in quadrature, sd = sqrt((f sigma(r))^2 +
        param_sd^2 + run_sd^2) (independent errors), and the interval is centre * exp(+-z sd)
        with z the two-sided normal quantile of ``level``. f = :meth:`small_sample_factor`
        widens sigma(r) for a model fitted from few folds. ``param_sd`` and ``run_sd`` are sds
        of log loss (parameter uncertainty, run-to-run noise); all arguments broadcast.

        Raises TargetError for a centre <= 0, a level outside (0, 1) or a negative sd.
        """
        c = np.asarray(centre, float)
        if not np.all(np.isfinite(c) & (c > 0)):
            raise TargetError(f"forecast must be finite and > 0, got {centre!r}")
        check_level(level, what="level", error=TargetError)
        ps, rs = np.asarray(param_sd, float), np.asarray(run_sd, float)
        if np.any(~np.isfinite(ps) | (ps < 0)) or np.any(~np.isfinite(rs) | (rs < 0)):
            raise TargetError(f"param_sd and run_sd must be finite and >= 0, got "
                              f"{param_sd!r}, {run_sd!r}")
        f = self.small_sample_factor(level)
        sd = np.sqrt((f * np.asarray(self.sigma(r))) ** 2 + ps ** 2 + rs ** 2)
        z = float(norm_ppf(0.5 + level / 2))
        lo, hi = c * np.exp(-z * sd), c * np.exp(z * sd)
        if lo.ndim == 0:
            return float(lo), float(hi)
        return lo, hi

    def small_sample_factor(self, level: float = DEFAULT_LEVEL) -> float:
        """t_{n_folds - 1} / z at ``level``: the factor sigma(r) is widened by in an interval.

        The errors of one fold share its fit, so they move together: the folds, not the
        predictions, are the independent units the spread is estimated from, and a spread
        estimated from n of them calls for Student's t with n - 1 degrees of freedom (as a
        prediction interval with an estimated scale does). 1.78 for 3 folds at 90%, 1.14 for
        12.
        """
        return float(t_ppf(0.5 + level / 2, max(self.n_folds - 1, 1))
                     / norm_ppf(0.5 + level / 2))

    def to_dict(self) -> dict:
        return {"method": "calibrated", "model": "sigma(r) = sigma_0 + k log10 r",
                "sigma_0": self.sigma_0, "k": self.k, "n_folds": self.n_folds,
                "n_errors": self.n_errors, "max_ratio": self.max_ratio, "law": self.law,
                "ladder": self.ladder}

    def report(self) -> str:
        return (f"calibration  sigma(r) = {self.sigma_0:.3%} + {self.k:.3%} log10 r "
                f"(median regression of |log error| on {self.n_errors} leave-future-out "
                f"predictions from {self.n_folds} folds, r up to {self.max_ratio:.3g})")

    def __str__(self) -> str:
        return self.report()


def _median_line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(a, b) minimising sum |y - a - b x| with a >= SIGMA_FLOOR, b >= 0: the L1 line, found
    exactly by :func:`delphi.core.quantile_line.quantile_line` (the linear programme's
    optimum; the midpoint of the optimal lines where it is not unique)."""
    return quantile_line(x, y, 0.5, a_min=SIGMA_FLOOR, b_min=0.0)


def log_sd(iv, new_run: bool = True) -> float:
    """sd of log loss behind an :class:`~delphi.uncertainty.Interval`: the log half-width of
    its new-run (or, ``new_run=False``, expected-loss) interval over the normal quantile of
    its level."""
    z = float(norm_ppf(0.5 + iv.level / 2))
    lo, hi = (iv.lower, iv.upper) if new_run else (iv.mean_lower, iv.mean_upper)
    return math.log(hi / lo) / (2 * z)


def _log_sds(base) -> tuple[float, float]:
    """(parameter sd, run-noise sd) of log loss behind an Interval: the sd of its
    expected-loss interval (:func:`log_sd`) and its run noise."""
    return max(log_sd(base, new_run=False), 0.0), float(base.noise)


def calibrated_interval(base, centre: float, model: CalibrationModel, ratio: float):
    """The calibrated interval at a forecast: ``base`` (a bootstrap or delta-method
    :class:`~delphi.uncertainty.Interval` at the same point and level) widened by the
    extrapolation error ``model`` predicts at ``ratio`` = C_target / C_max_fitted.

    New run: sd = sqrt(s^2 + param_sd^2 + run_sd^2) in log loss, s = f sigma(r) with f the
    model's :meth:`~CalibrationModel.small_sample_factor` (as
    :meth:`CalibrationModel.interval`), param_sd and run_sd read from ``base``. Expected
    loss: sd = sqrt(max(s^2 - run_sd^2, 0) + param_sd^2), since the leave-future-out
    errors sigma(r) models are errors of single runs, run noise included. Both are centred
    on ``centre`` (the forecast), centre * exp(+-z sd).

    ``model`` may also be a reference-class model (:class:`delphi.reference.ReferenceModel`:
    the errors of other ladders) or a blend of both (:class:`delphi.reference.BlendedModel`).

    Returns an Interval with ``method`` the model's (``"calibrated"``, or ``"reference"`` for a
    reference-class model) and ``calibration`` holding the model,
    r, sigma(r) (``sigma_at_target``), f and s = f sigma(r) (``small_sample_factor``,
    ``sigma_used``), the parameter and run-noise sds and the base method.

    Raises TargetError for a ratio or centre that is not finite and positive.
    """
    from dataclasses import replace
    param, run = _log_sds(base)
    level = base.level
    raw = float(model.sigma(ratio))
    s = raw * model.small_sample_factor(level)
    lo, hi = model.interval(centre, ratio, level, param_sd=param, run_sd=run)
    z = float(norm_ppf(0.5 + level / 2))
    # floored: a run-noise estimate above s must not collapse the expected-loss interval
    sd_mean = math.sqrt(max(s * s - run * run, SIGMA_FLOOR ** 2) + param * param)
    info = {**model.to_dict(), "ratio": float(ratio), "sigma_at_target": raw,
            "small_sample_factor": model.small_sample_factor(level), "sigma_used": s,
            "param_sd": param, "run_sd": run, "base_method": base.method,
            "extrapolated": bool(ratio > model.max_ratio)}
    return replace(base, lower=lo, upper=hi, mean_lower=centre * math.exp(-z * sd_mean),
                   mean_upper=centre * math.exp(z * sd_mean), method=info["method"],
                   calibration=info)


def _fold_intervals(result, x, model, pred, ratio, level) -> dict | None:
    """The delta-method and calibrated new-run intervals of one fold's predictions at once
    (:func:`~delphi.uncertainty.delta_rows`; then :meth:`CalibrationModel.interval`'s
    arithmetic on arrays, as :func:`calibrated_interval` does it at one point: the same
    bits). ``lower``, ``upper``, ``cal_lower``, ``cal_upper`` and ``ok`` have shape (m,); None
    (or ``ok`` False) where a point must be computed alone."""
    rows = delta_rows(result, x, level=level)
    if rows is None:
        return None
    ok = rows["ok"]
    pred, ratio = np.asarray(pred, float), np.asarray(ratio, float)
    z = float(norm_ppf(0.5 + level / 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        # log_sd of the expected-loss interval, at each point as alone
        param = np.array([max(math.log(hi / lo) / (2 * z), 0.0) if good else 0.0
                          for lo, hi, good in zip(rows["mean_lower"], rows["mean_upper"], ok)])
    run = np.where(ok, rows["noise"], 0.0)
    if not (np.all(np.isfinite(pred) & (pred > 0)) and np.all(np.isfinite(ratio) & (ratio > 0))
            and np.all(np.isfinite(param)) and np.all(np.isfinite(run) & (run >= 0))):
        return None
    f = model.small_sample_factor(level)
    # (f sigma)^2 as numpy's scalar power computes it at one point (its pow() rounds apart
    # from an array's square in ~1 of 1,000 cases); the other squares are squares either way
    spread = np.array([(f * s) ** 2 for s in np.asarray(model.sigma(ratio), float)])
    sd = np.sqrt(spread + param ** 2 + run ** 2)
    rows["cal_lower"], rows["cal_upper"] = pred * np.exp(-z * sd), pred * np.exp(z * sd)
    return rows


def calibrate(ladder: Ladder, law: str | Law, *, fixed: Mapping[str, float] | None = None,
              bounds: Mapping[str, Sequence[float]] | None = None,
              delta: float = DEFAULT_DELTA, max_folds: int | None = MAX_FOLDS,
              seed: int = 0) -> tuple[CalibrationModel, LFOErrors]:
    """Leave-future-out errors of ``law`` on ``ladder`` and the calibration model fitted to
    them: ``(model, errors)``. See :func:`leave_future_out` and :class:`CalibrationModel`.

    Raises
    ------
    LadderError: too few budgets for a cut. FitError: fewer than :data:`MIN_FOLDS` folds
        could be fitted, or none.
    """
    errors = leave_future_out(ladder, law, fixed=fixed, bounds=bounds, delta=delta,
                              max_folds=max_folds, seed=seed)
    return CalibrationModel.fit(errors), errors


@dataclass(frozen=True)
class CalibrationBacktest:
    """Coverage of a law's 90% new-run intervals in leave-future-out refits, before and
    after extrapolation calibration, each calibration fitted only on what that fold saw.

    Every array has shape (n,), one element per prediction that had a calibrated interval
    (folds with at least :data:`MIN_FOLDS` earlier folds predicting inside their own data).
    """

    law: str
    ladder: str
    level: float
    run: np.ndarray
    """Run predicted."""
    cut: np.ndarray
    """C_max_fitted of the fold [FLOPs]."""
    ratio: np.ndarray
    """r = C_run / C_max_fitted."""
    log_error: np.ndarray
    """log L_pred - log L_obs."""
    inside_before: np.ndarray
    """Whether the observed loss lies in the delta-method new-run interval (bool)."""
    inside_after: np.ndarray
    """Whether it lies in the calibrated new-run interval (bool)."""
    width_before: np.ndarray
    """Half-width of the delta-method interval in log loss."""
    width_after: np.ndarray
    """Half-width of the calibrated interval in log loss."""
    errors: LFOErrors = field(repr=False, compare=False, default=None)
    """All leave-future-out errors (including folds without a calibrated interval)."""
    notes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> dict:
        """n, mean and max |log error| over every leave-future-out prediction, and the
        coverage before and after calibration over the calibrated ones."""
        e = np.abs(self.errors.log_error) if self.errors is not None else np.abs(self.log_error)
        n = len(self.inside_after)
        return {"law": self.law, "ladder": self.ladder, "level": self.level,
                "n_predictions": int(len(e)), "n_folds": self.errors.n_folds if self.errors
                is not None else None,
                "mean_abs_error": float(e.mean()) if len(e) else None,
                "max_abs_error": float(e.max()) if len(e) else None,
                "n_calibrated": n,
                "coverage_before": float(self.inside_before.mean()) if n else None,
                "coverage_after": float(self.inside_after.mean()) if n else None}

    def to_dict(self) -> dict:
        rows = [{"run": str(a), "cut": float(b), "ratio": float(c), "log_error": float(d),
                 "inside_before": bool(f), "inside_after": bool(g)}
                for a, b, c, d, f, g in zip(self.run, self.cut, self.ratio, self.log_error,
                                            self.inside_before, self.inside_after)]
        return {"summary": self.summary, "rows": rows, "notes": self.notes}

    def report(self) -> str:
        s = self.summary
        pct = level_percent(self.level)
        lines = [f"calibration backtest  {self.law} on {self.ladder}: {s['n_predictions']} "
                 f"leave-future-out prediction(s) from {s['n_folds']} fold(s), mean |error| "
                 f"{s['mean_abs_error']:.2%}, max {s['max_abs_error']:.2%}"]
        if s["n_calibrated"]:
            lines.append(f"coverage of {pct} new-run intervals on {s['n_calibrated']} "
                         f"prediction(s): {s['coverage_before']:.0%} delta method, "
                         f"{s['coverage_after']:.0%} calibrated")
        lines += [f"note       {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def calibration_backtest(ladder: Ladder, law: str | Law | None = None, *,
                         fixed: Mapping[str, float] | None = None,
                         bounds: Mapping[str, Sequence[float]] | None = None,
                         delta: float = DEFAULT_DELTA, level: float = DEFAULT_LEVEL,
                         max_folds: int | None = None, cuts: Sequence[float] | None = None,
                         errors: LFOErrors | None = None, seed: int = 0) -> CalibrationBacktest:
    """Nested (honest) check of the calibrated intervals on a ladder.

    One leave-future-out pass (:func:`leave_future_out`) fits every cut. For the fold cut at
    C_k, the calibration model is fitted only to the errors of earlier folds on runs at or
    below C_k -- what a forecaster fitting up to C_k would have seen -- and needs
    :data:`MIN_FOLDS` of them. Each run the fold predicts then gets its delta-method new-run
    interval (``before``) and the calibrated one (``after``, :func:`calibrated_interval`),
    and each is checked against the observed loss. No extra fits are made.

    ``errors``: reuse a leave-future-out pass made with ``fits`` kept (the same settings).
    ``law`` is required (None raises MissingArgumentError listing the laws), as for
    :func:`leave_future_out`.

    Raises
    ------
    As :func:`leave_future_out`.
    """
    law = get_law(law, needed_by="calibration_backtest")
    if errors is None:
        errors = leave_future_out(ladder, law, fixed=fixed, bounds=bounds, delta=delta,
                                  max_folds=max_folds, cuts=cuts, seed=seed)
    cols: dict[str, list] = {k: [] for k in ("run", "cut", "ratio", "log_error", "inside_before",
                                              "inside_after", "width_before", "width_after")}
    notes: list[str] = []
    finals, _ = ladder.final_points()
    finals = finals.drop_duplicates("run", keep="last").set_index("run")
    uncalibrated = 0
    for fold, result in zip(errors.folds, errors.fits):
        c_k = fold["cut"]
        seen = (errors.cut < c_k) & (errors.flops <= c_k * (1 + 1e-9))
        mine = np.flatnonzero(errors.cut == c_k)
        if len(np.unique(errors.cut[seen])) < MIN_FOLDS:
            uncalibrated += len(mine)
            continue
        sub = LFOErrors(law=errors.law, ladder=errors.ladder, run=errors.run[seen],
                        cut=errors.cut[seen], flops=errors.flops[seen], ratio=errors.ratio[seen],
                        log_error=errors.log_error[seen], predicted=errors.predicted[seen],
                        actual=errors.actual[seen])
        model = CalibrationModel.fit(sub)
        held = finals.loc[[str(r) for r in errors.run[mine]]].reset_index()
        x = rows_inputs(law, ladder, held)
        rows = _fold_intervals(result, x, model, errors.predicted[mine], errors.ratio[mine],
                               level)
        for j, i in enumerate(mine):
            pred, act = float(errors.predicted[i]), float(errors.actual[i])
            if rows is not None and rows["ok"][j]:
                lo, hi, cal_lo, cal_hi = (rows["lower"][j], rows["upper"][j],
                                          rows["cal_lower"][j], rows["cal_upper"][j])
            else:       # the point alone: its interval, or the error its note names
                xi = {k: v[j:j + 1] for k, v in x.items()}
                try:
                    base = delta_interval(result, xi, level=level)
                except DelphiError as exc:
                    notes.append(f"fold {c_k:.3g}: run {errors.run[i]!r} has no delta "
                                 f"interval ({exc})")
                    continue
                cal = calibrated_interval(base, pred, model, float(errors.ratio[i]))
                lo, hi, cal_lo, cal_hi = base.lower, base.upper, cal.lower, cal.upper
            cols["run"].append(str(errors.run[i]))
            cols["cut"].append(c_k)
            cols["ratio"].append(float(errors.ratio[i]))
            cols["log_error"].append(float(errors.log_error[i]))
            cols["inside_before"].append(bool(lo <= act <= hi))
            cols["inside_after"].append(bool(cal_lo <= act <= cal_hi))
            cols["width_before"].append(math.log(hi / pred))
            cols["width_after"].append(math.log(cal_hi / pred))
    if uncalibrated:
        notes.append(f"{uncalibrated} prediction(s) of the first folds have no calibrated "
                     f"interval: fewer than {MIN_FOLDS} earlier folds to calibrate on")
    arrays = {k: np.asarray(v, dtype=object if k == "run" else (bool if k.startswith("inside")
                                                                  else float))
              for k, v in cols.items()}
    return CalibrationBacktest(law=law.name, ladder=ladder.name, level=level, errors=errors,
                               notes=notes, **arrays)
