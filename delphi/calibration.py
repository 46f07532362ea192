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

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from scipy.optimize import linprog
from scipy.stats import norm

from .backtest import _budgets, _inputs
from .errors import DelphiError, FitError, LadderError
from .fitting import DEFAULT_DELTA, fit
from .fitting.api import DIVERGENCE_THRESHOLD, _compute_frontier, _dominated
from .ladder import Ladder
from .laws import Law, get_law
from .uncertainty import DEFAULT_LEVEL

__all__ = ["LFOErrors", "leave_future_out", "CalibrationModel", "MIN_FOLDS", "SIGMA_FLOOR"]

#: Fewest leave-future-out folds (cuts) a calibration model is fitted from: with fewer, the
#: growth of the error with r rests on one or two refits.
MIN_FOLDS = 3
#: Smallest sigma_0 [log loss]: the run-noise floor used elsewhere in delphi, so no
#: calibrated interval is zero-width.
SIGMA_FLOOR = 1e-4
#: median |Z| of a standard normal, Phi^-1(0.75): median |e| / this estimates a normal sd.
_MEDIAN_ABS_Z = float(norm.ppf(0.75))


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
    """Per cut: ``cut`` [FLOPs], ``n_points`` fitted, ``n_predicted``, ``params``,
    ``converged``, ``warm_start`` and the fit's ``warnings``."""
    notes: list[str] = field(default_factory=list)
    """Cuts skipped or refitted by global search, and runs not predicted, each with why."""

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


def leave_future_out(ladder: Ladder, law: str | Law, *,
                     fixed: Mapping[str, float] | None = None,
                     bounds: Mapping[str, Sequence[float]] | None = None,
                     delta: float = DEFAULT_DELTA, min_budgets: int = 3,
                     max_folds: int | None = None, seed: int = 0) -> LFOErrors:
    """Fit below each compute budget, predict every budget above: errors by extrapolation ratio.

    The finished runs are grouped into compute budgets (runs within 5% of compute, as in
    :func:`delphi.backtest.backtest`). For each cut k, from the first with at least
    ``min_budgets`` budgets and at least (free parameters + 2) fitted points up to the
    second-largest budget, the law is fitted to the runs of budgets <= k and predicts each run
    of the budgets above, giving log L_pred - log L_obs and r = C_run / C_max_fitted.

    The first cut is fitted by the global search; each later cut is warm-started from the
    previous cut's parameters (``warm_start``, ``identify=False``: the fast refit path), and
    fitted by the global search instead if the warm start fails (noted).

    A law of compute alone describes the compute-optimal frontier, so for it only the
    lowest-loss run of each budget (all repeated seeds of a one-size budget) is predicted, as
    it is fitted. Runs far above or below a run with no more of each input (diverged, or in
    another unit) are not predicted and are noted.

    Parameters
    ----------
    ladder: the runs (final losses of finished runs are used).
    law: law name or object.
    fixed, bounds, delta, seed: as in :func:`delphi.fitting.fit`.
    min_budgets: fewest compute budgets in the first fit.
    max_folds: at most this many cuts, evenly spaced in order of compute (always keeping the
        first and the last); None keeps every cut. A ladder of distinct runs (no isoFLOP grid)
        has a budget per run, so a cut per run: this bounds the cost.

    Returns
    -------
    LFOErrors, whose arrays have one element per (cut, predicted run).

    Raises
    ------
    LadderError: the ladder has no compute (``flops``, or params and tokens), or too few
        budgets for any cut (the message gives the counts needed and found).
    FitError: the first cut cannot be fitted (the message names the cut).
    """
    law = get_law(law)
    fixed = dict(fixed or {})
    finals, _ = ladder.final_points()
    if "flops" not in finals.columns or finals["flops"].isna().any():
        raise LadderError(f"leave-future-out needs each run's compute (flops, or params and "
                          f"tokens); ladder {ladder.name!r} lacks it")
    finals = finals.reset_index(drop=True)
    budget_of = dict(zip(finals["run"], _budgets(finals).astype(float)))
    pts, notes = finals, []
    if law.inputs == ("flops",):
        pts, _, _ = _compute_frontier(finals)   # the frontier the law describes
        pts = pts.reset_index(drop=True)
    bad = _dominated(pts, law, DIVERGENCE_THRESHOLD)
    if bad:
        notes += [f"run {pts['run'].iloc[i]!r} not predicted: {why}" for i, why in bad.items()]
        pts = pts.drop(index=pts.index[list(bad)]).reset_index(drop=True)
    b_pts = pts["run"].map(budget_of).to_numpy(float)
    levels = np.unique(b_pts)
    n_free = sum(p.name not in fixed for p in law.params)
    need = n_free + 2
    cuts = [b for i, b in enumerate(levels[:-1])
            if i + 1 >= min_budgets and int((b_pts <= b).sum()) >= need]
    if max_folds is not None and len(cuts) > max_folds:
        if max_folds < 1:
            raise LadderError(f"max_folds must be >= 1, got {max_folds}")
        keep = np.unique(np.round(np.linspace(0, len(cuts) - 1, max_folds)).astype(int))
        cuts = [cuts[i] for i in keep]
    if not cuts:
        raise LadderError(f"leave-future-out of law {law.name!r} on ladder {ladder.name!r} needs "
                          f"a cut with >= {min_budgets} compute budgets and >= {need} points "
                          f"(free parameters + 2) below it and a budget above it; the ladder "
                          f"has {len(levels)} budget(s) and {len(pts)} point(s)")
    b_finals = finals["run"].map(budget_of).to_numpy(float)
    settings = dict(fixed=fixed or None, bounds=bounds, delta=delta, seed=seed, identify=False)
    cols: dict[str, list] = {k: [] for k in ("run", "cut", "flops", "ratio", "log_error",
                                              "predicted", "actual")}
    folds: list[dict] = []
    warm = None
    for b in cuts:
        train = ladder.select(runs=finals["run"][b_finals <= b].tolist())
        name = f"fit <= {b:.3g} FLOPs"
        try:
            result = fit(train, law, warm_start=warm, **settings)
        except DelphiError as exc:
            if warm is None:
                if not folds:
                    raise FitError(f"leave-future-out cut '{name}': {exc}") from None
                notes.append(f"cut '{name}' skipped: {exc}")
                continue
            try:       # a warm start from the smaller cut can fail where a search does not
                result = fit(train, law, **settings)
                notes.append(f"cut '{name}': warm start failed ({exc}); fitted by global search")
            except DelphiError as exc2:
                notes.append(f"cut '{name}' skipped: {exc2}")
                continue
        fitted = set(result.labels)
        c_max = float(finals.loc[finals["run"].isin(fitted), "flops"].max())
        held = pts[b_pts > b]
        x = _inputs(law, ladder, held)
        pred = np.asarray(result.predict(x), float)
        obs = held["loss"].to_numpy(float)
        if not np.all(np.isfinite(pred) & (pred > 0)):
            bad_runs = held["run"][~(np.isfinite(pred) & (pred > 0))].tolist()
            raise FitError(f"leave-future-out cut '{name}': non-finite or non-positive "
                           f"prediction for run(s) {', '.join(map(repr, bad_runs[:5]))}")
        cols["run"] += held["run"].astype(str).tolist()
        cols["cut"] += [c_max] * len(held)
        cols["flops"] += held["flops"].astype(float).tolist()
        cols["ratio"] += (held["flops"].to_numpy(float) / c_max).tolist()
        cols["log_error"] += (np.log(pred) - np.log(obs)).tolist()
        cols["predicted"] += pred.tolist()
        cols["actual"] += obs.tolist()
        folds.append({"cut": c_max, "n_points": result.n_points, "n_predicted": len(held),
                      "params": {k: float(v) for k, v in result.params.items()},
                      "converged": bool(result.converged), "warm_start": warm is not None,
                      "warnings": list(result.warnings)})
        warm = dict(result.params)
    arrays = {k: np.asarray(v, dtype=object if k == "run" else float) for k, v in cols.items()}
    return LFOErrors(law=law.name, ladder=ladder.name, folds=folds, notes=notes, **arrays)


@dataclass(frozen=True)
class CalibrationModel:
    """Spread of a law's extrapolation error against the extrapolation ratio r:
    sigma(r) = sigma_0 + k log10(max(r, 1)), an sd of log loss.

    Fitted (:meth:`fit`) by median regression (L1, Koenker & Bassett 1978, solved as a linear
    programme) of |e| / Phi^-1(0.75) on log10 r over the leave-future-out log errors e, with
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
        if errors.n_folds < MIN_FOLDS:
            raise FitError(f"a calibration model needs leave-future-out errors from at least "
                           f"{MIN_FOLDS} folds; law {errors.law!r} on ladder {errors.ladder!r} "
                           f"gave {errors.n_folds} (more compute budgets are needed)")
        r = np.asarray(errors.ratio, float)
        e = np.asarray(errors.log_error, float)
        bad = ~(np.isfinite(e) & np.isfinite(r) & (r > 0))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise FitError(f"leave-future-out error of run {errors.run[i]!r} is not usable "
                           f"(log error {e[i]}, ratio {r[i]})")
        s0, k = _median_line(np.log10(np.maximum(r, 1.0)), np.abs(e) / _MEDIAN_ABS_Z)
        return cls(sigma_0=s0, k=k, n_folds=errors.n_folds, n_errors=len(e),
                   max_ratio=float(r.max()), law=errors.law, ladder=errors.ladder)

    def sigma(self, r) -> np.ndarray | float:
        """sigma(r) [sd of log loss] at extrapolation ratio(s) r (> 0; r <= 1 gives sigma_0).

        Raises TargetError for r not finite and positive."""
        from .errors import TargetError
        ra = np.asarray(r, float)
        if not np.all(np.isfinite(ra) & (ra > 0)):
            raise TargetError(f"extrapolation ratio must be finite and > 0, got {r!r}")
        s = self.sigma_0 + self.k * np.log10(np.maximum(ra, 1.0))
        return float(s) if s.ndim == 0 else s

    def interval(self, centre, r, level: float = DEFAULT_LEVEL, param_sd=0.0,
                 run_sd=0.0) -> tuple:
        """New-run interval ``(lower, upper)`` around forecast(s) ``centre`` (loss > 0).

        In log loss the three spreads add in quadrature, sd = sqrt(sigma(r)^2 + param_sd^2 +
        run_sd^2) (independent errors), and the interval is centre * exp(+-z sd) with z the
        two-sided normal quantile of ``level``. ``param_sd`` and ``run_sd`` are sds of log loss
        (parameter uncertainty, run-to-run noise); all arguments broadcast.

        Raises TargetError for a centre <= 0, a level outside (0, 1) or a negative sd.
        """
        from .errors import TargetError
        c = np.asarray(centre, float)
        if not np.all(np.isfinite(c) & (c > 0)):
            raise TargetError(f"forecast must be finite and > 0, got {centre!r}")
        if not 0 < level < 1:
            raise TargetError(f"level must be in (0, 1), got {level!r}")
        ps, rs = np.asarray(param_sd, float), np.asarray(run_sd, float)
        if np.any(~np.isfinite(ps) | (ps < 0)) or np.any(~np.isfinite(rs) | (rs < 0)):
            raise TargetError(f"param_sd and run_sd must be finite and >= 0, got "
                              f"{param_sd!r}, {run_sd!r}")
        sd = np.sqrt(np.asarray(self.sigma(r)) ** 2 + ps ** 2 + rs ** 2)
        z = float(norm.ppf(0.5 + level / 2))
        lo, hi = c * np.exp(-z * sd), c * np.exp(z * sd)
        if lo.ndim == 0:
            return float(lo), float(hi)
        return lo, hi

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
    """(a, b) minimising sum |y - a - b x| with a >= SIGMA_FLOOR, b >= 0 (an L1 line, as a
    linear programme: y_i - a - b x_i = u_i - v_i, u, v >= 0, minimise sum u + v)."""
    n = len(y)
    a_eq = np.hstack([np.ones((n, 1)), x[:, None], np.eye(n), -np.eye(n)])
    cost = np.concatenate([[0.0, 0.0], np.ones(2 * n)])
    res = linprog(cost, A_eq=a_eq, b_eq=y,
                  bounds=[(SIGMA_FLOOR, None), (0, None)] + [(0, None)] * (2 * n),
                  method="highs")
    if not res.success:
        raise FitError(f"calibration median regression failed: {res.message}")
    return float(res.x[0]), float(res.x[1])
