"""How much a forecast rests on one rung or on a pinned floor.

Two checks that :func:`delphi.forecast.predict` runs for every forecast, and whose results it
reports (notes, the text report and ``--json``):

* **Off-trend rungs** (:func:`find_off_trend`): a rung that the other rungs' law misses by
  several times their own scatter, though by less than the divergence threshold (10%) that
  excludes a run. A rung of another architecture or setup at the edge of a small ladder bends
  the law; it is named, with the forecast with and without it. It is **kept** in the fit:
  the check reports, the user decides.
* **Pinned floors** (:func:`scan_floor`): an interval computed with the irreducible loss E
  fixed is conditional on E (its uncertainty is not in the interval); a floor range reports
  the forecast, with its interval, at several values of E across the range, and the overall
  lowest and highest values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from .errors import DelphiError, LawError
from .fitting import Fit, fit_arrays
from .laws import CHECKPOINT_LAWS

__all__ = ["OFF_TREND_SIGMAS", "OFF_TREND_MIN", "OffTrendRung", "OffTrend", "find_off_trend",
           "log_prediction_se",
           "FloorScan", "scan_floor", "check_floor_range"]

#: A rung is off-trend when the law fitted to the other rungs misses it by more than this many
#: standard deviations (its externally studentized, or deleted, residual) ...
OFF_TREND_SIGMAS = 6.0
#: ... and by more than this log residual (0.5% of the loss, about the seed-to-seed noise of
#: small LLM runs), so that a ladder fitted almost exactly does not flag its tiny noise.
OFF_TREND_MIN = 0.005
# At most this many rungs are named (one at a time, worst first).
_OFF_TREND_MAX = 3
# Ladders up to this size test every rung; larger ones test the rungs furthest off the full
# fit and the two compute ends (the rungs with the most leverage), to bound the refits.
_TEST_ALL = 12
_TEST_WORST = 5


@dataclass(frozen=True)
class OffTrendRung:
    """A rung the other rungs' law misses by several times their scatter."""

    run: str
    """Run id."""
    loss: float
    """Observed final loss (ladder unit)."""
    trend: float
    """Loss the law fitted to the other rungs predicts for it (ladder unit)."""
    residual: float
    """log(trend) - log(loss): negative when the rung lies above the others' trend."""
    scale: float
    """Standard deviation of :attr:`residual` if the rung were on trend: the other rungs'
    scatter about their law, sqrt(sum r^2 / dof), combined with that law's uncertainty at
    this rung (delta method)."""

    @property
    def sigmas(self) -> float:
        """|residual| in units of :attr:`scale` (inf when the others fit exactly)."""
        return abs(self.residual) / self.scale if self.scale > 0 else float("inf")

    def describe(self) -> str:
        off = self.loss / self.trend - 1
        side = "above" if off > 0 else "below"
        times = f"{self.sigmas:.3g}x" if np.isfinite(self.sigmas) else "far beyond"
        return (f"loss {self.loss:.4g} is {abs(off):.2%} {side} the trend of the other rungs "
                f"({times} their scatter, {self.scale:.2%})")

    def to_dict(self) -> dict:
        return {"run": self.run, "loss": self.loss, "trend": self.trend,
                "residual": self.residual, "scale": self.scale,
                "sigmas": self.sigmas if np.isfinite(self.sigmas) else None}


@dataclass(frozen=True)
class OffTrend:
    """Off-trend rungs of a forecast, and the forecast without them."""

    rungs: tuple[OffTrendRung, ...]
    """The rungs named, worst first."""
    loss_with: float
    """The forecast (all rungs fitted, as reported)."""
    loss_without: float
    """The forecast of the same law fitted without the named rungs."""
    fit_without: Fit
    """That fit (global search)."""

    @property
    def change(self) -> float:
        """loss_without / loss_with - 1 (a fraction)."""
        return self.loss_without / self.loss_with - 1

    def note(self) -> str:
        """One line for :attr:`Forecast.notes`."""
        which = "; ".join(f"{r.run}: {r.describe()}" for r in self.rungs)
        them = "it" if len(self.rungs) == 1 else "them"
        return (f"off-trend rung{'s' if len(self.rungs) > 1 else ''} (kept in the fit, not "
                f"excluded): {which}. Forecast {self.loss_with:.4f} with {them}, "
                f"{self.loss_without:.4f} without {them} ({self.change:+.2%})")

    def to_dict(self) -> dict:
        return {"rungs": [r.to_dict() for r in self.rungs], "excluded": False,
                "loss_with": self.loss_with, "loss_without": self.loss_without,
                "change": self.change,
                "params_without": {k: float(v) for k, v in self.fit_without.params.items()},
                "sigmas": OFF_TREND_SIGMAS, "min_residual": OFF_TREND_MIN}


def log_prediction_se(result: Fit, x: Mapping[str, Sequence[float]]) -> float | None:
    """Delta-method standard error of log L predicted at one point ``x`` (each input shape
    (1,)) from the fit's Gauss-Newton covariance; None when the fit has none."""
    from .fitting.objective import Problem

    if result.covariance is None:
        return None
    free = tuple(n for n in result.law.param_names if n not in result.fixed)
    xt = result.law.check_inputs({k: np.asarray(v, dtype=float) for k, v in x.items()})
    problem = Problem(law=result.law, x=xt, log_y=np.zeros(1), delta=result.delta, free=free,
                      fixed=dict(result.fixed))
    _, jac, ok = problem.residuals_and_jacobian(problem.pack(result.params))
    if not ok:
        return None
    g = jac[0, [free.index(n) for n in result.covariance_params]]
    return float(np.sqrt(max(float(g @ result.covariance @ g), 0.0)))


def _deleted_scale(loo: Fit, xi) -> float:
    """sd of a deleted residual: the refit's scatter (sum r^2 / dof) plus its prediction
    variance at the deleted point."""
    r = np.asarray(loo.residuals, float)
    s2 = float(r @ r) / max(loo.dof, 1)
    se = log_prediction_se(loo, xi)
    return float(np.sqrt(s2 + (se ** 2 if se is not None else 0.0)))


def _take(x: Mapping[str, np.ndarray], keep: np.ndarray) -> dict[str, np.ndarray]:
    return {k: np.asarray(v)[keep] for k, v in x.items()}


def _candidates(result: Fit) -> np.ndarray:
    n = result.n_points
    if n <= _TEST_ALL:
        return np.arange(n)
    off = np.abs(result.residuals - np.median(result.residuals))
    picks = set(np.argsort(-off, kind="stable")[:_TEST_WORST].tolist())
    first = next(iter(result.x.values()))
    c = result.x["flops"] if "flops" in result.x else np.asarray(first, float)
    picks |= {int(np.argmin(c)), int(np.argmax(c))}
    return np.array(sorted(picks))


def find_off_trend(result: Fit, target_inputs: Mapping[str, Sequence[float]] | None = None, *,
                   bounds: Mapping[str, Sequence[float]] | None = None, seed: int = 0,
                   sigmas: float = OFF_TREND_SIGMAS, min_residual: float = OFF_TREND_MIN,
                   max_rungs: int = _OFF_TREND_MAX) -> OffTrend | None:
    """Rungs that the law fitted to the other rungs misses by several times their scatter.

    For each rung i (every rung of a ladder of up to 12 fitted points; else the 5 furthest
    off the full fit and the smallest and largest compute), the law is refitted without it
    (warm-started at ``result``). Its deleted residual d_i = log L_pred(i) - log L_i, the miss
    of the law of the other rungs, is divided by the standard deviation it would have if the
    rung were on trend, s_i = sqrt(s^2 + se_i^2): s^2 = sum r^2 / dof of the refit's residuals
    and se_i the refit's delta-method standard error of log L at the rung (the externally
    studentized residual of regression diagnostics; Cook & Weisberg 1982). The rung with the
    largest |d_i| / s_i is named when that ratio exceeds ``sigmas`` (default 6, as for
    diverged runs; on seeded normal noise of 0.3-1% it names a rung in under 1% of 7- and
    12-rung ladders) **and** |d_i| exceeds ``min_residual`` (default 0.005, i.e. 0.5%); then
    the test repeats without it, up to ``max_rungs`` rungs, while at least n_free + 3 points
    remain.

    Why not the full fit's residuals and their MAD: a free law bends towards a rung at the
    edge of a small ladder and blames its neighbour instead; and with the Huber delta far
    below the noise the fit passes through several rungs exactly, so a MAD of its residuals
    understates the scatter about twofold and flags ordinary noise. Two off-trend rungs can
    mask each other (each inflates the scatter seen by the other). Runs beyond the
    divergence threshold are already excluded by :func:`delphi.fitting.fit`.

    Parameters
    ----------
    result: the fit of a final-loss law (checkpoint laws are not tested: None).
    target_inputs: the law's inputs at the target (each shape (1,)); the forecast with and
        without the named rungs is evaluated there; without it, at the fitted point with the
        largest first input (the largest compute for a law of C).
    bounds, seed: as passed to the fit (``result.fixed`` and ``result.delta`` are reused).

    Returns
    -------
    OffTrend, or None when no rung is off-trend or the fit has fewer than n_free + 3 points
    (too few to tell a rung from the others' scatter).

    Raises
    ------
    FitError: the fit without the named rungs fails (rare: the test refits succeeded).
    """
    if result.law.name in CHECKPOINT_LAWS or result.n_points < result.n_free + 3:
        return None
    x = {k: np.asarray(v, float) for k, v in result.x.items()}
    y = np.asarray(result.y, float)
    labels = np.array(result.labels, dtype=object)
    settings = dict(fixed=dict(result.fixed) or None, bounds=bounds, delta=result.delta,
                    seed=seed)
    named: list[OffTrendRung] = []
    current = result
    alive = np.ones(len(y), dtype=bool)
    while len(named) < max_rungs and int(alive.sum()) - 1 >= result.n_free + 2:
        idx = np.flatnonzero(alive)
        best = None
        for j in _candidates(current):
            i = idx[j]
            keep = alive.copy()
            keep[i] = False
            try:
                loo = fit_arrays(result.law, _take(x, keep), y[keep], fixed=settings["fixed"],
                                 bounds=bounds, delta=result.delta, seed=seed,
                                 warm_start=dict(current.params))
                trend = float(loo.predict(_take(x, [i]))[0])
            except DelphiError:
                continue  # e.g. the others cannot identify the law: no verdict on this rung
            d = float(np.log(trend) - np.log(y[i]))
            scale = _deleted_scale(loo, _take(x, [i]))
            score = abs(d) / scale if scale > 0 else np.inf
            if abs(d) > min_residual and score > sigmas and (best is None or score > best[0]):
                best = (score, i, OffTrendRung(run=str(labels[i]), loss=float(y[i]), trend=trend,
                                               residual=d, scale=scale), loo)
        if best is None:
            break
        named.append(best[2])
        alive[best[1]] = False
        # The next round starts from the refit without this rung (warm); the fit reported
        # without the named rungs is searched globally once, below.
        current = fit_arrays(result.law, _take(x, alive), y[alive], labels=list(labels[alive]),
                             warm_start=dict(best[3].params), **settings)
    if not named:
        return None
    current = fit_arrays(result.law, _take(x, alive), y[alive], labels=list(labels[alive]),
                         **settings)
    if target_inputs is not None:
        loss_with = float(result.predict(target_inputs)[0])
        loss_without = float(current.predict(target_inputs)[0])
    else:
        top = int(np.argmax(np.asarray(next(iter(x.values())))))
        at = _take(x, [top])
        loss_with = float(result.predict(at)[0])
        loss_without = float(current.predict(at)[0])
    return OffTrend(rungs=tuple(named), loss_with=loss_with, loss_without=loss_without,
                    fit_without=current)


# ----------------------------------------------------------------------------- floor range
@dataclass(frozen=True)
class FloorScan:
    """The forecast at several values of a pinned floor across a range."""

    param: str
    """The floor parameter (``"E"``)."""
    low: float
    """Lower end of the floor range (ladder unit)."""
    high: float
    """Upper end of the floor range."""
    values: tuple[float, ...]
    """Floor values at which the forecast was made, increasing (shape (k,))."""
    losses: tuple[float, ...]
    """Forecast at each floor value."""
    lowers: tuple[float | None, ...]
    """Lower end of the new-run interval at each value (None without an interval)."""
    uppers: tuple[float | None, ...]
    """Upper end of the new-run interval at each value."""
    level: float | None
    """Interval level (None without intervals)."""

    @property
    def minimum(self) -> float:
        """Lowest forecast over the range, interval ends included."""
        return float(min([*self.losses, *(v for v in self.lowers if v is not None)]))

    @property
    def maximum(self) -> float:
        """Highest forecast over the range, interval ends included."""
        return float(max([*self.losses, *(v for v in self.uppers if v is not None)]))

    def note(self) -> str:
        """One line for :attr:`Forecast.notes`."""
        return (f"{self.param} is not fitted but scanned over [{self.low:g}, {self.high:g}] "
                f"({len(self.values)} values): forecasts {min(self.losses):.4f} .. "
                f"{max(self.losses):.4f}, {self.minimum:.4f} .. {self.maximum:.4f} with their "
                f"intervals; the reported forecast is at the middle, {self.param} = "
                f"{(self.low + self.high) / 2:g}")

    def report_lines(self) -> list[str]:
        lines = [f"floor      {self.param} across [{self.low:g}, {self.high:g}] (pinned, not "
                 f"fitted; each forecast is conditional on its {self.param})"]
        for v, loss, lo, hi in zip(self.values, self.losses, self.lowers, self.uppers):
            iv = f"  [{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""
            lines.append(f"           {self.param} = {v:<8.4g} {loss:.4f}{iv}")
        lines.append(f"           over the range: {self.minimum:.4f} .. {self.maximum:.4f} "
                     f"(forecasts and interval ends)")
        return lines

    def to_dict(self) -> dict:
        return {"param": self.param, "low": self.low, "high": self.high, "level": self.level,
                "points": [{"value": v, "loss": loss, "lower": lo, "upper": hi}
                           for v, loss, lo, hi in zip(self.values, self.losses, self.lowers,
                                                      self.uppers)],
                "min": self.minimum, "max": self.maximum}


def _floor_values(floor_range, points: int) -> tuple[float, float, np.ndarray]:
    try:
        low, high = (float(v) for v in floor_range)
    except (TypeError, ValueError):
        raise LawError(f"a floor range is two numbers (low, high), e.g. (1.4, 1.8); got "
                       f"{floor_range!r}") from None
    if not (np.isfinite(low) and np.isfinite(high) and 0 <= low < high):
        raise LawError(f"a floor range needs 0 <= low < high, both finite; got "
                       f"[{low:g}, {high:g}]")
    if not (isinstance(points, int) and points >= 2):
        raise LawError(f"a floor range is scanned at 2 or more values, got {points!r}")
    return low, high, np.linspace(low, high, points)


def scan_floor(predict_one, law, floor_range: Sequence[float], points: int,
               fixed: Mapping[str, float] | None):
    """Forecasts with the law's floor pinned at ``points`` values across ``floor_range``.

    ``predict_one(fixed)`` makes one forecast with those fixed values (a
    :class:`~delphi.forecast.Forecast`). The forecast returned is the one at the middle of
    the range, with :attr:`~delphi.forecast.Forecast.floor_scan` set and a note; the scan
    holds the forecast and new-run interval at each of ``numpy.linspace(low, high, points)``.

    Raises
    ------
    LawError: the law has no floor, the floor is also fixed, or the range is malformed.
    FitError, TargetError...: from a forecast at one floor value (e.g. a floor at or above an
        observed loss).
    """
    name = law.floor
    if not name:
        raise LawError(f"law {law.name!r} has no irreducible loss to scan (floor range)")
    if fixed and name in fixed:
        raise LawError(f"{name} is both fixed ({fixed[name]:g}) and given a range; give one")
    low, high, values = _floor_values(floor_range, points)
    middle = (low + high) / 2
    forecasts = {}
    for v in sorted({*values.tolist(), middle}):
        try:
            forecasts[v] = predict_one({**(fixed or {}), name: v})
        except DelphiError as exc:
            raise type(exc)(f"with {name} = {v:g} (floor range [{low:g}, {high:g}]): "
                            f"{exc}") from None
    scanned = [forecasts[v] for v in values.tolist()]
    scan = FloorScan(param=name, low=low, high=high, values=tuple(values.tolist()),
                     losses=tuple(f.loss for f in scanned),
                     lowers=tuple(f.lower for f in scanned),
                     uppers=tuple(f.upper for f in scanned),
                     level=scanned[0].interval.level if scanned[0].interval else None)
    main = forecasts[middle]
    return replace(main, floor_scan=scan, notes=(*main.notes, scan.note()))


def check_floor_range(floor_range) -> None:
    """Fail early on a malformed floor range (before any fit). Raises LawError."""
    _floor_values(floor_range, 2)

