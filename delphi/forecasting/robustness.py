"""How much a forecast rests on one rung or on a pinned floor.

Two checks that :func:`delphi.forecast.predict` runs for every forecast, and whose results it
reports (notes, the text report and ``--json``):

* **Off-trend rungs** (:func:`find_off_trend`): a rung that the other rungs' law misses by
  several times their own scatter, though by less than the divergence threshold (10%) that
  excludes a run. A rung of another architecture or setup at the edge of a small ladder bends
  the law; it is named, with the forecast with and without it. It is **kept** in the fit:
  the check reports, the user decides.
* **Non-monotone rungs** (:func:`non_monotone_pairs`, named by :func:`find_off_trend` too): a
  larger model or budget whose final loss is higher than a smaller one's, all else equal
  (issue 21, item 4). Every final-loss law delphi fits falls as C, N or D grows, so such a
  pair contradicts the law whatever its parameters; on a ladder of 4-7 rungs the
  deleted-residual test has too few degrees of freedom to flag it, the pair test needs none.
* **Pinned floors** (:func:`scan_floor`): an interval computed with the irreducible loss E
  fixed is conditional on E (its uncertainty is not in the interval); a floor range reports
  the forecast, with its interval, at several values of E across the range, and the overall
  lowest and highest values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import numpy as np

from ..core.findings import Finding
from ..errors import DelphiError, LadderError, LawError
from ..fitting import Fit, fit_arrays
from ..fitting.engine import warm_fits_many
from ..fitting.api import BUDGET_TOLERANCE, HPARAM_COLUMNS
from ..laws import CHECKPOINT_LAWS
from ..fitting.objective import Problem

__all__ = ["OFF_TREND_SIGMAS", "OFF_TREND_MIN", "NONMONOTONE_MIN", "NonMonotone",
           "non_monotone_pairs", "held_inputs", "OffTrendRung", "OffTrend", "find_off_trend",
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
#: Two runs are non-monotone when the larger one's final loss is above the smaller one's by
#: more than this log ratio (0.5%, the same noise floor as :data:`OFF_TREND_MIN`: about the
#: seed-to-seed spread of small LLM runs, so two runs that differ by less say nothing about
#: the order of their true losses). Neighbouring rungs of a ladder that doubles C or N differ
#: by 2-6% in expectation, so with 0.3-0.5% noise per run (0.4-0.7% on a difference) a
#: reversal beyond 0.5% takes a 4-sigma draw or more: a rung off the trend, not noise. Rungs
#: much closer than a doubling (N within 10%) reverse by chance more often.
NONMONOTONE_MIN = 0.005
# Inputs every final-loss law falls in (C in FLOPs, N parameters, D tokens). Any other input
# a law reads (peak_lr...) is held: two runs are compared only when it agrees within
# _SAME_INPUT.
_MONOTONE_INPUTS = ("flops", "params", "tokens")
_SYMBOL = {"flops": "C", "params": "N", "tokens": "D"}
# "All else equal": N, D (or a held input) within 1% of each other are one value, as one
# token count is for a fixed-data sweep (delphi.design.ONE_D). Budgets are larger only
# beyond the 5% that makes one compute budget (delphi.fitting.api._BUDGET_TOLERANCE).
_SAME_INPUT = 1.01
_LARGER = {"flops": BUDGET_TOLERANCE, "params": _SAME_INPUT, "tokens": _SAME_INPUT}
# Ladders up to this size test every rung; larger ones test the rungs furthest off the full
# fit and the two compute ends (the rungs with the most leverage), to bound the refits.
_TEST_ALL = 12
_TEST_WORST = 5


@dataclass(frozen=True)
class NonMonotone:
    """Two fitted runs whose final losses run against the law: the larger run (more C, N or D,
    every other input the same) has the higher loss."""

    larger: str
    """Run id of the larger run (the higher loss)."""
    larger_loss: float
    """Its final loss (ladder unit)."""
    smaller: str
    """Run id of the smaller run (the lower loss)."""
    smaller_loss: float
    """Its final loss (ladder unit)."""
    input: str
    """The input that differs: ``"flops"`` (C, FLOPs; on the compute frontier the law of C
    is fitted to), ``"params"`` (N) or ``"tokens"`` (D, tokens)."""
    larger_value: float
    """The larger run's value of :attr:`input`."""
    smaller_value: float
    """The smaller run's value of :attr:`input`."""
    same: tuple[tuple[str, float | str], ...] = ()
    """The other inputs and held values both runs share (within 1%), as (name, the larger
    run's value): e.g. ``(("tokens", 1e10),)`` for two sizes at one D, with ``("peak_lr",
    0.004)`` when the ladder sweeps the LR. Empty for a law of C alone."""

    @property
    def gap(self) -> float:
        """log(larger_loss / smaller_loss) > 0: how far the order is reversed."""
        return float(np.log(self.larger_loss / self.smaller_loss))

    def _what(self) -> str:
        shared = ", ".join(f"{_SYMBOL.get(k, k)} = {v:.3g}" if isinstance(v, float) else
                           f"{k} = {v}" for k, v in self.same)
        return f" at the same {shared}" if shared else ""

    def describe(self, run: str | None = None) -> str:
        """The pair from the side of ``run`` (the larger run by default): ``non-monotone:
        loss 3.05 at C = 1e+20 above 3.01 of smaller run r2 (C = 5e+19)``."""
        sym = _SYMBOL.get(self.input, self.input)
        if run is not None and run == self.smaller and run != self.larger:
            return (f"non-monotone: loss {self.smaller_loss:.4g} at {sym} = "
                    f"{self.smaller_value:.3g} below {self.larger_loss:.4g} of larger run "
                    f"{self.larger} ({sym} = {self.larger_value:.3g}){self._what()}, "
                    f"{self.gap:.2%} in log loss; the law of the other rungs misses this one "
                    f"more")
        return (f"non-monotone: loss {self.larger_loss:.4g} at {sym} = {self.larger_value:.3g} "
                f"above {self.smaller_loss:.4g} of smaller run {self.smaller} ({sym} = "
                f"{self.smaller_value:.3g}){self._what()}, {self.gap:.2%} in log loss")

    def to_dict(self) -> dict:
        return {"larger": self.larger, "larger_loss": self.larger_loss,
                "smaller": self.smaller, "smaller_loss": self.smaller_loss,
                "input": self.input, "larger_value": self.larger_value,
                "smaller_value": self.smaller_value, "same": dict(self.same),
                "gap": self.gap}


@dataclass(frozen=True)
class OffTrendRung:
    """A rung named off-trend: the other rungs' law misses it by several times their scatter
    (the deleted-residual test), or it is one of a non-monotone pair (:class:`NonMonotone`),
    or both (:attr:`flagged_by`)."""

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
    non_monotone: NonMonotone | None = None
    """The most reversed non-monotone pair this rung belongs to, else None."""
    flagged_by: tuple[str, ...] = ("deleted-residual",)
    """Which tests name it: ``"deleted-residual"`` (more than :data:`OFF_TREND_SIGMAS` times
    the others' scatter and :data:`OFF_TREND_MIN`) and/or ``"non-monotone"``."""
    loss_without: float | None = None
    """The forecast of the law fitted (global search) without this rung alone, at the same
    point as :attr:`OffTrend.loss_with` (None when that fit fails)."""

    @property
    def sigmas(self) -> float:
        """|residual| in units of :attr:`scale` (inf when the others fit exactly)."""
        return abs(self.residual) / self.scale if self.scale > 0 else float("inf")

    def describe(self) -> str:
        off = self.loss / self.trend - 1
        side = "above" if off > 0 else "below"
        times = f"{self.sigmas:.3g}x" if np.isfinite(self.sigmas) else "far beyond"
        miss = f"{abs(off):.2%} {side} the trend of the other rungs"
        if "deleted-residual" in self.flagged_by:
            miss += f" ({times} their scatter, {self.scale:.2%})"
        if self.non_monotone is None:
            return f"loss {self.loss:.4g} is {miss}"
        return f"{self.non_monotone.describe(self.run)}; {miss}"

    @property
    def reason(self) -> str:
        """Why it is named, one line (:meth:`describe`; starts ``non-monotone:`` for a rung of
        a non-monotone pair)."""
        return self.describe()

    def to_dict(self) -> dict:
        return {"run": self.run, "loss": self.loss, "trend": self.trend,
                "residual": self.residual, "scale": self.scale,
                "sigmas": self.sigmas if np.isfinite(self.sigmas) else None,
                "reason": self.reason, "flagged_by": list(self.flagged_by),
                "non_monotone": self.non_monotone.to_dict() if self.non_monotone else None,
                "loss_without": self.loss_without}


@dataclass(frozen=True)
class OffTrend:
    """Off-trend rungs of a forecast, and the forecast without them."""

    rungs: tuple[OffTrendRung, ...]
    """The rungs named: those of the deleted-residual test first (worst first), then those of
    non-monotone pairs."""
    loss_with: float
    """The forecast (all rungs fitted, as reported)."""
    loss_without: float
    """The forecast of the same law fitted without the named rungs."""
    fit_without: Fit
    """That fit (global search)."""
    n_pairs: int = 0
    """Non-monotone pairs among the fitted runs (:func:`non_monotone_pairs`)."""
    n_unresolved: int = 0
    """Of those, pairs left among the rungs not named (at most ``max_rungs`` rungs are named,
    and each leaves enough rungs to fit the law)."""

    @property
    def change(self) -> float:
        """loss_without / loss_with - 1 (a fraction)."""
        return self.loss_without / self.loss_with - 1

    def _alone(self, r: OffTrendRung) -> str:
        if len(self.rungs) < 2 or r.loss_without is None:
            return ""
        return f" (forecast without it alone {r.loss_without:.4f}, " \
               f"{r.loss_without / self.loss_with - 1:+.2%})"

    def unresolved_note(self) -> str | None:
        """Says how many non-monotone pairs remain among the rungs not named, else None."""
        if not self.n_unresolved:
            return None
        return (f"{self.n_unresolved} more non-monotone pair(s) among the other rungs, not "
                f"named (at most {_OFF_TREND_MAX} rungs are, while enough remain to fit the "
                f"law without them)")

    def note(self) -> str:
        """One line for :attr:`Forecast.notes`."""
        which = "; ".join(f"{r.run}: {r.describe()}{self._alone(r)}" for r in self.rungs)
        them = "it" if len(self.rungs) == 1 else "them"
        more = self.unresolved_note()
        return (f"off-trend rung{'s' if len(self.rungs) > 1 else ''} (kept in the fit, not "
                f"excluded): {which}. Forecast {self.loss_with:.4f} with {them}, "
                f"{self.loss_without:.4f} without {them} ({self.change:+.2%})"
                + (f"; {more}" if more else ""))

    def to_dict(self) -> dict:
        return {"rungs": [r.to_dict() for r in self.rungs], "excluded": False,
                "loss_with": self.loss_with, "loss_without": self.loss_without,
                "change": self.change,
                "params_without": {k: float(v) for k, v in self.fit_without.params.items()},
                "sigmas": OFF_TREND_SIGMAS, "min_residual": OFF_TREND_MIN,
                "non_monotone_min_gap": NONMONOTONE_MIN, "non_monotone_pairs": self.n_pairs,
                "non_monotone_unresolved": self.n_unresolved}


def log_prediction_se(result: Fit, x: Mapping[str, Sequence[float]]) -> float | None:
    """Delta-method standard error of log L predicted at one point ``x`` (each input shape
    (1,)) from the fit's Gauss-Newton covariance; None when the fit has none."""

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


def _falls_in(result: Fit, x: Mapping[str, np.ndarray], name: str) -> bool:
    """True when the fitted law does not rise, and somewhere falls, as input ``name`` grows
    by 10% at every fitted point (the others held): the direction a pair is judged in."""
    try:
        base = result.predict(x)
        up = result.predict({**x, name: x[name] * 1.1})
    except DelphiError:
        return False
    ok = np.isfinite(base) & np.isfinite(up)
    return bool(ok.any() and np.all(up[ok] <= base[ok] * (1 + 1e-12))
                and np.any(up[ok] < base[ok]))


def _held_array(values) -> np.ndarray:
    """Numbers as float (None -> NaN), anything else (an optimizer's name) as objects."""
    try:
        return np.asarray([np.nan if v is None else v for v in values], dtype=float)
    except (TypeError, ValueError):
        return np.asarray(values, dtype=object)


def _same_as(values: np.ndarray, j: int) -> np.ndarray:
    """Which of ``values`` equal ``values[j]``: numbers within 1% (relative, so 0 equals 0),
    other values exactly; NaN and None equal nothing."""
    if values.dtype == object:
        ref = values[j]
        if ref is None or (isinstance(ref, float) and np.isnan(ref)):
            return np.zeros(len(values), dtype=bool)
        return np.array([v == ref for v in values], dtype=bool)
    ref = values[j]
    with np.errstate(invalid="ignore"):
        return np.abs(values - ref) <= (_SAME_INPUT - 1) * np.maximum(np.abs(values), abs(ref))


def _pair_indices(result: Fit, held: Mapping[str, Sequence[float]] | None,
                  min_gap: float) -> list[tuple[float, int, int, str]]:
    """(gap, larger index, smaller index, input) of every non-monotone pair, most reversed
    first (ties in index order: deterministic)."""
    if result.law.name in CHECKPOINT_LAWS:
        return []
    x = {k: np.asarray(v, float) for k, v in result.x.items()}
    log_y = np.log(np.asarray(result.y, float))
    n = len(log_y)
    ordered = [k for k in _MONOTONE_INPUTS if k in x and _falls_in(result, x, k)]
    kept = {k: v for k, v in x.items() if k not in _MONOTONE_INPUTS}
    for k, v in (held or {}).items():
        v = _held_array(v)
        if v.shape != (n,):
            raise ValueError(f"held input {k!r} has shape {v.shape}, the fit has {n} points")
        kept[k] = v
    out: list[tuple[float, int, int, str]] = []
    for k in ordered:
        v = x[k]
        others = [x[o] for o in ordered if o != k] + list(kept.values())
        for j in range(n):
            ok = (v * _LARGER[k] < v[j]) & (log_y[j] - log_y > min_gap)
            for o in others:
                ok &= _same_as(o, j)
            out += [(float(log_y[j] - log_y[i]), j, int(i), k) for i in np.flatnonzero(ok)]
    out.sort(key=lambda t: (-t[0], t[1], t[2]))
    return out


def _pair(result: Fit, held, gap_j_i_k) -> NonMonotone:
    _, j, i, k = gap_j_i_k
    x = {**{n: np.asarray(v, float) for n, v in result.x.items()},
         **{n: _held_array(v) for n, v in (held or {}).items()}}
    same = tuple((n, float(v[j]) if v.dtype != object else v[j]) for n, v in x.items()
                 if n != k)
    return NonMonotone(larger=str(result.labels[j]), larger_loss=float(result.y[j]),
                       smaller=str(result.labels[i]), smaller_loss=float(result.y[i]),
                       input=k, larger_value=float(x[k][j]), smaller_value=float(x[k][i]),
                       same=same)


def non_monotone_pairs(result: Fit, held: Mapping[str, Sequence[float]] | None = None, *,
                       min_gap: float = NONMONOTONE_MIN) -> tuple[NonMonotone, ...]:
    """Pairs of fitted runs where the larger run has the higher final loss, all else equal.

    "Larger" and "all else equal" by the law's inputs (``result.x``, the points fitted):

    * a law in C alone (inputs ``("flops",)``, fitted to the compute frontier: the lowest-loss
      run of each budget, :func:`delphi.fitting.api._compute_frontier`): a run with over 5%
      more compute (another budget) and a higher loss;
    * a law of N and D (``chinchilla``, ``overtrain``...): at the same D (within 1%) a larger
      N (over 1%) with a higher loss, and at the same N a larger D with a higher loss; any
      other input the law reads (``peak_lr``) must agree within 1% as well;
    * a law in N alone (``power-n``): a larger N with a higher loss, at the same D when
      ``held`` gives each point's D (``{"tokens": ...}``).

    An input is compared only when the fitted law falls in it (it does for every final-loss
    law delphi fits). "Higher" means log(L_larger / L_smaller) > ``min_gap`` (default
    :data:`NONMONOTONE_MIN`, 0.5%): closer losses are within the run-to-run noise.

    Parameters
    ----------
    result: a fit of a final-loss law (checkpoint laws: no pairs).
    held: extra per-point values that must agree within 1% for two points to be compared,
        each shape (n_points,), aligned with ``result.labels``; NaN is never equal.
    min_gap: the log-loss reversal below which a pair is noise.

    Returns
    -------
    The pairs, most reversed first.
    """
    return tuple(_pair(result, held, t) for t in _pair_indices(result, held, min_gap))


def held_inputs(ladder, result: Fit) -> dict[str, np.ndarray] | None:
    """What else two fitted runs of ``ladder`` must share to be compared for monotonicity
    (the ``held`` of :func:`non_monotone_pairs`), each aligned with ``result.labels``:

    * for a law in N alone (``power-n``), each run's D (``tokens``), when the ladder has it:
      a larger model trained on fewer tokens may rightly be worse;
    * for a law of N and/or D, the hyperparameter columns (``peak_lr``, ``batch_size``...,
      ``lr`` without ``peak_lr``; :data:`delphi.fitting.api._HPARAM_COLUMNS`) that the ladder
      sweeps: that differ between fitted runs of one N and D (within 1%). A run at a better
      learning rate says nothing about N's effect. Columns that only change with size (each
      size at its own tuned LR, one setting per N and D) are the design and are not held.

    A law in C alone is fitted to the compute frontier (each budget's best-tuned run): nothing
    is held. None when nothing is held, or the ladder's finished runs cannot be read.
    """

    inputs = tuple(result.law.inputs)
    if result.law.name in CHECKPOINT_LAWS or inputs == ("flops",):
        return None
    try:
        pts = ladder.final_points()[0]
    except (LadderError, AttributeError):
        return None
    runs = pts["run"].astype(str).tolist()
    row = {r: k for k, r in enumerate(runs)}
    at = [row.get(str(r)) for r in result.labels]
    if any(a is None for a in at):
        return None

    def column(name) -> np.ndarray:
        return _held_array([pts[name].iloc[a] for a in at])

    held: dict[str, np.ndarray] = {}
    if inputs == ("params",) and "tokens" in pts.columns:
        held["tokens"] = column("tokens")
    cols = [c for c in HPARAM_COLUMNS if c in pts.columns]
    if "peak_lr" not in cols and "lr" in pts.columns:
        cols.insert(0, "lr")
    cell_inputs = [np.asarray(result.x[k], float) for k in inputs if k in _MONOTONE_INPUTS]
    cell_inputs += list(held.values())
    n = len(at)
    for c in cols:
        if c in inputs:
            continue         # a law input (peak_lr of chinchilla-lr) is held already
        v = column(c)
        if any(e is None or (isinstance(e, float) and np.isnan(e)) for e in v.tolist()):
            continue         # not logged for every run: no verdict on what it is
        swept = False
        for j in range(n):
            cell = np.ones(n, dtype=bool)
            for o in cell_inputs:
                cell &= _same_as(o, j)
            cell[j] = False
            if cell.any() and not _same_as(v, j)[cell].all():
                swept = True
                break
        if swept:
            held[c] = v
    return held or None


def _fit_without(result: Fit, x, y, labels, keep: np.ndarray, settings: dict,
                 start: Mapping[str, float] | None = None, warm_fit=None,
                 labelled: bool = True) -> Fit:
    """The law refitted without the rungs ``keep`` leaves out: warm-started from ``start`` (a
    fit one to three rungs away, whose optimum moves little; by ``warm_fit(keep, start,
    labelled)`` when given, which reuses a refit already made), by the global search when
    that fails or no start is given."""
    if start is not None:
        try:
            if warm_fit is not None:
                return warm_fit(keep, start, labelled)
            return fit_arrays(result.law, _take(x, keep), y[keep], labels=list(labels[keep]),
                              warm_start=dict(start), **settings)
        except DelphiError:
            pass
    return fit_arrays(result.law, _take(x, keep), y[keep], labels=list(labels[keep]),
                      **settings)


def find_off_trend(result: Fit, target_inputs: Mapping[str, Sequence[float]] | None = None, *,
                   bounds: Mapping[str, Sequence[float]] | None = None, seed: int = 0,
                   sigmas: float = OFF_TREND_SIGMAS, min_residual: float = OFF_TREND_MIN,
                   max_rungs: int = _OFF_TREND_MAX,
                   held: Mapping[str, Sequence[float]] | None = None,
                   min_gap: float = NONMONOTONE_MIN) -> OffTrend | None:
    """Rungs that the law fitted to the other rungs misses by several times their scatter,
    and rungs that make the ladder non-monotone.

    **Deleted residuals.** For each rung i (every rung of a ladder of up to 12 fitted points;
    else the 5 furthest off the full fit and the smallest and largest compute), the law is
    refitted without it (warm-started at ``result``). Its deleted residual
    d_i = log L_pred(i) - log L_i, the miss of the law of the other rungs, is divided by the
    standard deviation it would have if the rung were on trend, s_i = sqrt(s^2 + se_i^2):
    s^2 = sum r^2 / dof of the refit's residuals and se_i the refit's delta-method standard
    error of log L at the rung (the externally studentized residual of regression
    diagnostics; Cook & Weisberg 1982). The rung with the largest |d_i| / s_i is named when
    that ratio exceeds ``sigmas`` (default 6, as for diverged runs; on seeded normal noise of
    0.3-1% it names a rung in under 1% of 7- and 12-rung ladders) **and** |d_i| exceeds
    ``min_residual`` (default 0.005, i.e. 0.5%); then the test repeats without it, up to
    ``max_rungs`` rungs, while at least n_free + 3 points remain (so it does not run on
    smaller ladders).

    **Non-monotone pairs** (issue 21, item 4). A larger model or budget with a higher final
    loss than a smaller one, all else equal (:func:`non_monotone_pairs`; reversed by more
    than ``min_gap``, 0.5%), contradicts any law that falls in C, N and D, however few rungs
    there are. Which rung of the pairs is off: while pairs remain among the rungs not yet
    named (a rung named by the deleted-residual test resolves its pairs), the rung in the
    most remaining pairs is named (its removal leaves the rest monotone with the fewest
    removals); among rungs in equally many, the one the law of the others misses most,
    largest |d_i| of the refit without it (the raw log miss, not |d_i| / s_i: on 4-7 rungs s
    rests on 1-3 degrees of freedom, and both rungs of a pair are judged by nearly the same
    others). A rung is named only while at least n_free rungs stay to fit the law without
    it, and up to ``max_rungs`` rungs in all (both tests); pairs left are counted
    (:attr:`OffTrend.n_unresolved`). Each such rung carries its pair (``non_monotone``) and
    its deleted residual (:attr:`OffTrendRung.scale` is 0 when the others fit the law
    exactly).

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
    held: per-point values two runs must share to be compared for monotonicity (see
        :func:`non_monotone_pairs`; :func:`delphi.forecast.predict` passes each run's D for a
        law in N alone).
    min_gap: the smallest reversal (log loss) that makes a pair non-monotone.

    Returns
    -------
    OffTrend (each rung with the forecast without it alone, and the forecast without them
    all), or None when no rung is named.

    Raises
    ------
    FitError: the fit without the named rungs fails (rare: the test refits succeeded).
    """
    if result.law.name in CHECKPOINT_LAWS:
        return None
    x = {k: np.asarray(v, float) for k, v in result.x.items()}
    y = np.asarray(result.y, float)
    labels = np.array(result.labels, dtype=object)
    settings = dict(fixed=dict(result.fixed) or None, bounds=bounds, delta=result.delta,
                    seed=seed)
    named: list[tuple[int, OffTrendRung]] = []
    current = result
    alive = np.ones(len(y), dtype=bool)
    # Warm refits made here, by their points and start: the same refit is asked for more than
    # once (the fit without a rung alone is its deleted-residual refit of the first round;
    # the fit without every named rung may be the last round's), and runs once. The numbers
    # do not depend on the labels, which only a labelled fit carries (the one reported).
    made: dict[tuple, Fit] = {}

    def warm_fit(keep: np.ndarray, start, labelled: bool) -> Fit:
        key = (keep.tobytes(), tuple(start.items()))
        got = made.get((*key, True))
        if got is None and not labelled:
            got = made.get((*key, False))
        if got is None:
            got = fit_arrays(result.law, _take(x, keep), y[keep],
                             labels=list(labels[keep]) if labelled else None,
                             warm_start=dict(start), **settings)
            made[(*key, labelled)] = got
        return got

    def prefetch(keeps, start) -> None:
        """The unlabelled warm refits of ``keeps`` from ``start`` that warm_fit would make one
        by one, made together (:func:`delphi.fitting.engine.warm_fits_many`: one batched
        BFGS, each refit bit-identical to its own); a refit that fails is left for warm_fit
        to raise again."""
        todo, seen = [], set()
        for keep in keeps:
            key = (keep.tobytes(), tuple(start.items()))
            if (*key, True) in made or (*key, False) in made or key in seen:
                continue
            seen.add(key)
            todo.append((key, keep))
        if len(todo) < 2:
            return
        got = warm_fits_many([dict(law=result.law, x=_take(x, keep), y=y[keep], labels=None,
                                   warm_start=dict(start), **settings) for _, keep in todo])
        for (key, _), fitted in zip(todo, got):
            if isinstance(fitted, Fit):
                made[(*key, False)] = fitted

    def without_one(i: int) -> np.ndarray:
        keep = alive.copy()
        keep[i] = False
        return keep

    def refit_without(i: int):
        """The law of the alive rungs but ``i`` (warm from ``current``), the trend it
        predicts at ``i`` and log(trend) - log(y_i); None when it cannot be fitted (e.g. the
        others cannot identify the law: no verdict on this rung)."""
        try:
            loo = warm_fit(without_one(i), current.params, labelled=False)
            trend = float(loo.predict(_take(x, [i]))[0])
        except DelphiError:
            return None
        return loo, trend, float(np.log(trend) - np.log(y[i]))
    while (result.n_points >= result.n_free + 3 and len(named) < max_rungs
           and int(alive.sum()) - 1 >= result.n_free + 2):
        idx = np.flatnonzero(alive)
        best = None
        prefetch([without_one(idx[j]) for j in _candidates(current)], current.params)
        for j in _candidates(current):
            i = idx[j]
            got = refit_without(i)
            if got is None:
                continue
            loo, trend, d = got
            scale = _deleted_scale(loo, _take(x, [i]))
            score = abs(d) / scale if scale > 0 else np.inf
            if abs(d) > min_residual and score > sigmas and (best is None or score > best[0]):
                best = (score, i, OffTrendRung(run=str(labels[i]), loss=float(y[i]), trend=trend,
                                               residual=d, scale=scale), loo)
        if best is None:
            break
        named.append((best[1], best[2]))
        alive[best[1]] = False
        # The next round starts from the refit without this rung (warm), as does the fit
        # reported without the named rungs, below.
        current = warm_fit(alive.copy(), best[3].params, labelled=True)

    pairs = _pair_indices(result, held, min_gap)

    def worst_pair(i: int, among=None) -> NonMonotone | None:
        for t in pairs:      # most reversed first
            if i in (t[1], t[2]) and (among is None or (among[t[1]] and among[t[2]])):
                return _pair(result, held, t)
        return None

    # A rung the deleted-residual test names also carries its worst pair, if any.
    for k, (i, rung) in enumerate(named):
        p = worst_pair(i)
        if p is not None:
            named[k] = (i, replace(rung, non_monotone=p,
                                   flagged_by=("deleted-residual", "non-monotone")))
    while len(named) < max_rungs and int(alive.sum()) - 1 >= result.n_free:
        left = [t for t in pairs if alive[t[1]] and alive[t[2]]]
        if not left:
            break
        counts: dict[int, int] = {}
        for _, j, i, _ in left:
            counts[j] = counts.get(j, 0) + 1
            counts[i] = counts.get(i, 0) + 1
        top = max(counts.values())
        best = None
        tied = sorted(r for r, c in counts.items() if c == top)
        prefetch([without_one(i) for i in tied], current.params)
        for i in tied:
            got = refit_without(i)
            if got is None:
                continue
            loo, trend, d = got
            if best is None or abs(d) > best[0]:
                best = (abs(d), i, trend, d, loo)
        if best is None:
            break        # no rung of the pairs can be left out and the law still fitted
        _, i, trend, d, loo = best
        named.append((i, OffTrendRung(run=str(labels[i]), loss=float(y[i]), trend=trend,
                                      residual=d, scale=_deleted_scale(loo, _take(x, [i])),
                                      non_monotone=worst_pair(i, alive),
                                      flagged_by=("non-monotone",))))
        alive[i] = False
        current = loo
    if not named:
        return None
    at = target_inputs
    if at is None:
        at = _take(x, [int(np.argmax(np.asarray(next(iter(x.values())))))])
    loss_with = float(result.predict(at)[0])
    without = _fit_without(result, x, y, labels, alive, settings, start=current.params,
                           warm_fit=warm_fit)
    loss_without = float(without.predict(at)[0])
    rungs = []
    if len(named) > 1:
        alone_keeps = []
        for i, _ in named:
            keep = np.ones(len(y), dtype=bool)
            keep[i] = False
            alone_keeps.append(keep)
        prefetch(alone_keeps, result.params)
    for i, rung in named:
        if len(named) == 1:
            alone = loss_without
        else:
            keep = np.ones(len(y), dtype=bool)
            keep[i] = False
            try:
                alone = float(_fit_without(result, x, y, labels, keep, settings,
                                           start=result.params, warm_fit=warm_fit,
                                           labelled=False).predict(at)[0])
            except DelphiError:
                alone = None
        rungs.append(replace(rung, loss_without=alone))
    unresolved = sum(1 for t in pairs if alive[t[1]] and alive[t[2]])
    return OffTrend(rungs=tuple(rungs), loss_with=loss_with, loss_without=loss_without,
                    fit_without=without, n_pairs=len(pairs), n_unresolved=unresolved)


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
    return replace(main, floor_scan=scan).with_findings(Finding.note("floor-range", scan.note(),
                                                                      name))


def check_floor_range(floor_range) -> None:
    """Fail early on a malformed floor range (before any fit). Raises LawError."""
    _floor_values(floor_range, 2)

