"""Which recipe wins at scale: compare ladders (recipes) at a target compute, with paired draws.

Two forecasts with independent intervals say little about their difference: both ladders were
fitted with the same law on (usually) the same design, so their extrapolation errors are
correlated, and the unpaired difference of two intervals is several times too wide. This
module fits every ladder with the same law and draws the **paired** bootstrap: each draw
resamples the same design cells (compute budget, model size) for every recipe, with common
random numbers (the paired bootstrap of Efron & Tibshirani 1993, Sec. 15; common random
numbers for comparing systems: Law & Kelton, *Simulation Modeling and Analysis*, Sec. 11.2).
From the aligned draws it gives, for each recipe B against the reference A (the first), at each
target:

* the loss difference L_B - L_A [ladder unit, nats/token by default; negative: B is better]
  with its interval (one new run of each: the two runs' noise drawn with the correlation of
  the recipes' log residuals at matched (budget, size) cells, ``run_noise="paired"``, or
  independently);
* P(B better): the share of draws whose expected-loss difference is negative;
* the **effective compute multiplier** m: the compute A needs to reach B's predicted loss at
  the target, divided by the target compute (m > 1: B is worth m times more compute), along
  A's compute-optimal envelope (target by C) or at the target's tokens per parameter (target
  by N and D: N and D scaled together, so C scales by the square of their factor);
* the **crossover compute**, where the two curves meet in 1e15..1e27 FLOPs (the crossing
  nearest the target), with its interval over the draws that cross;
* the winner by a **decision rule** (:data:`DECISIONS`, :func:`_decide`): the law's
  difference, or the observed difference at the largest budget both recipes ran plus the
  law's change from there (``anchored``; ``shrunk`` and ``confident`` fall back on the
  observed difference when the change, or the anchored difference, is not told apart from
  zero; ``robust`` overturns the observed difference only when the anchored difference's
  interval excludes zero on the same side under both floor models, each recipe's own E and
  one shared E). Default ``robust``, chosen leave one ladder group out by the decision
  backtest.

A target given by compute C compares each recipe at its own compute-optimal allocation, the
envelope L*(C) = min_N L(N, C/(6kN)): for ``chinchilla`` (Hoffmann et al. 2022, Eq. 2) in
closed form (their Eq. 4: N_opt = G (C/6k)^(beta/(alpha+beta)), G = (alpha A / (beta B))^
(1/(alpha+beta)); k the ladder's FLOP convention C/(6ND)), for ``power`` in C (Kaplan et al.
2020, Eq. 1.3 with a floor; fitted to the compute frontier) the law itself. Each recipe's own
forecast at the target is :func:`delphi.forecast.predict`'s, with its calibrated (or
reference-class) interval.

:func:`backtest_recipes` checks such decisions on ladders that hold several recipes: fit each
on its runs at or below a cut, predict every larger budget, and score the predicted winner and
the difference's interval against the observed losses, next to the single-scale baseline
(rank by the loss at the largest budget at or below the cut; Magnusson et al. 2025,
DataDecide, find it right about 80% of the time one scale up).
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from .. import fitting
from ..forecasting import forecast, uncertainty
from ..forecasting.calibration import log_sd
from ..errors import (FitError, LadderError, LadderWarning, LawError, TargetError, option,
                      warn_user)
from ..fitting import engine, refit
from ..fitting.objective import Problem
from ..inputs.ladder import FLOPS_PER_PARAM_TOKEN, Ladder
from ..core.parallel import check_n_jobs, map_jobs
from ..core.quantiles import check_level
from ..core.records import jsonable
from ..core.text import level_percent, plural
from ..inputs.readers import as_ladder, load_ladder

__all__ = ["RecipeComparison", "RecipeDifference", "RecipeBacktest", "RecipeCurve",
           "DifferenceCurve", "ComparisonCurves", "compare_recipes", "backtest_recipes",
           "PAIRINGS", "SUPPORTED_LAWS", "CROSSOVER_RANGE", "CURVE_POINTS", "CURVE_BEYOND"]

#: How draws are shared across recipes: ``run`` (the same (budget, size) cells resampled for
#: every recipe), ``budget`` (the same compute budgets), ``none`` (independent draws: the
#: unpaired baseline), ``auto`` (``run`` when most design cells are shared, else ``none``).
PAIRINGS = ("auto", "run", "budget", "none")
#: Laws with a compute-optimal envelope and a path in N and D that this module evaluates.
SUPPORTED_LAWS = ("chinchilla", "power")
#: Compute range searched for a crossover [FLOPs].
CROSSOVER_RANGE = (1e15, 1e27)
# Runs within 5% of compute share a budget; sizes within 2% are one size (as isoFLOP grids).
_BUDGET_TOL = 1.05
_SIZE_TOL = 1.02
# Share of design cells all recipes must share for ``auto`` to pair them.
_MIN_SHARED = 0.5
#: How the run noise of a new run of each recipe is drawn: ``paired`` (correlated as the
#: recipes' log residuals at matched (budget, size) cells) or ``independent``.
RUN_NOISES = ("paired", "independent")
#: Decision rules for the predicted difference (:func:`_decide`): ``law`` (the fits'
#: difference at the target), ``anchored`` (the observed difference at the largest budget
#: both ran plus the law's change from there), ``shrunk`` (anchored where the change's
#: interval excludes zero, else the observed difference), ``confident`` (anchored where the
#: anchored difference's own interval excludes zero, else the observed difference),
#: ``robust`` (as ``confident``, but the anchored interval must exclude zero on the same side
#: under both floor models: each recipe's own floor E and one floor shared by every recipe).
DECISIONS = ("law", "anchored", "shrunk", "confident", "robust")
#: The default decision rule: ``robust``, the rule chosen leave one ladder group out in
#: every fold of the decision backtest (benchmarks/RESULTS.md, Issue 24).
DEFAULT_DECISION = "robust"
# Matched cells needed to estimate the residual correlation; its clip.
_MIN_MATCHED = 5
_MAX_RHO = 0.95
# Noise draws per bootstrap draw for the new-run difference (as delphi.uncertainty's).
_NOISE_PER_DRAW = 25
# Every CHECK_EVERY-th draw is also fitted by the global search (the warm-start guard).
CHECK_EVERY = 25
_WORSE_RTOL = 1e-9
# Grid of the crossover search: points per decade of compute.
_GRID_PER_DECADE = 20
# Compute ratios searched for the multiplier: e^-60..e^60 (about 1e-26..1e26).
_LOG_SPAN = 60.0
_BLOCK = 64
#: Points of the figure's compute grid (log-spaced).
CURVE_POINTS = 121
#: The figure's grid runs to this many times the largest target's compute.
CURVE_BEYOND = 4.0


# ----------------------------------------------------------------------------- the laws
def _envelope(law: str, p: Mapping[str, np.ndarray], log_c: np.ndarray, k: float) -> np.ndarray:
    """L*(C) along the compute-optimal envelope, broadcasting ``p`` (each (m, 1)) against
    ``log_c`` = ln C [FLOPs, ladder convention] ((g,) or (m, g)). Chinchilla: Hoffmann et al.
    2022 Eq. 4 with C/(6k) for 6ND; power: Kaplan et al. 2020 Eq. 1.3 + E."""
    if law == "power":
        return p["E"] + p["A"] * np.exp(-p["alpha"] * log_c)
    a, b = p["alpha"], p["beta"]
    s = a + b
    log_g = (np.log(a * p["A"]) - np.log(b * p["B"])) / s
    lc6 = log_c - math.log(FLOPS_PER_PARAM_TOKEN * k)
    log_n = log_g + (b / s) * lc6
    log_d = lc6 - log_n
    return p["E"] + p["A"] * np.exp(-a * log_n) + p["B"] * np.exp(-b * log_d)


def _allocation(p: Mapping[str, float], flops: float, k: float) -> tuple[float, float]:
    """N_opt, D_opt of a chinchilla law at ``flops`` (ladder convention, C = k 6 N D)."""
    a, b = p["alpha"], p["beta"]
    log_g = (math.log(a * p["A"]) - math.log(b * p["B"])) / (a + b)
    lc6 = math.log(flops / (FLOPS_PER_PARAM_TOKEN * k))
    n = math.exp(log_g + b / (a + b) * lc6)
    return n, math.exp(lc6) / n


def _at_nd(law: str, p: Mapping[str, np.ndarray], log_n, log_d, k: float) -> np.ndarray:
    """L(N, D) broadcasting like :func:`_envelope`; a law of C reads C = k 6 N D."""
    if law == "power":
        return p["E"] + p["A"] * np.exp(-p["alpha"] * (math.log(FLOPS_PER_PARAM_TOKEN * k)
                                                       + log_n + log_d))
    return p["E"] + p["A"] * np.exp(-p["alpha"] * log_n) + p["B"] * np.exp(-p["beta"] * log_d)


@dataclass(frozen=True)
class _Spec:
    """One target: by compute (``flops``; the envelope) or by N and D."""

    flops: float
    params: float | None = None
    tokens: float | None = None

    @property
    def by_compute(self) -> bool:
        return self.params is None

    def path(self, law: str, p, u, k: float) -> np.ndarray:
        """Loss at compute C_target e^u: along the envelope (by compute) or N, D each scaled
        by e^(u/2) (by N and D: the target's tokens per parameter)."""
        if self.by_compute:
            return _envelope(law, p, math.log(self.flops) + u, k)
        return _at_nd(law, p, math.log(self.params) + u / 2, math.log(self.tokens) + u / 2, k)

    def label(self) -> str:
        if self.by_compute:
            return f"C = {self.flops:.3g}"
        return f"N = {self.params:.3g}, D = {self.tokens:.3g} (C = {self.flops:.3g})"


# ----------------------------------------------------------------------------- results
@dataclass(frozen=True)
class RecipeDifference:
    """One recipe against the reference at one target (losses in the ladders' unit)."""

    recipe: str
    """The recipe's (ladder's) name."""
    reference: str
    target_flops: float
    """Target compute C [FLOPs]."""
    target_params: float | None
    target_tokens: float | None
    """N, D of a target given by N and D (None for a target given by compute)."""
    loss: float
    """L_recipe - L_reference at the target, from the full fits (negative: recipe better)."""
    lower: float
    upper: float
    """Interval of the difference for one new run of each recipe (paired draws + run noise);
    it contains the expected-loss difference's interval (an end Monte-Carlo noise put inside
    is moved out to it)."""
    mean_lower: float
    mean_upper: float
    """Interval of the expected-loss difference (paired draws, no run noise)."""
    p_better: float
    """Share of draws whose expected-loss difference is negative (a draw of exactly 0 counts
    half)."""
    multiplier: float
    """Effective compute multiplier (inf: the reference never reaches the recipe's loss)."""
    multiplier_lower: float | None
    multiplier_upper: float | None
    """Its interval; None for an end that is unbounded (draws where the reference never
    reaches the recipe's loss)."""
    crossover: float | None
    """Compute where the two curves meet, nearest the target, in :data:`CROSSOVER_RANGE`
    [FLOPs]; None when they do not meet there."""
    crossover_lower: float | None
    crossover_upper: float | None
    """Its interval over the draws that cross (None without a crossover)."""
    crossover_share: float
    """Share of draws whose curves meet in :data:`CROSSOVER_RANGE`."""
    recipe_forecast: "forecast.Forecast | None" = None
    reference_forecast: "forecast.Forecast | None" = None
    """Each recipe's own forecast at the target (:func:`delphi.forecast.predict`)."""
    decision: str = "law"
    """The decision rule (:data:`DECISIONS`) behind :attr:`decided`."""
    decided: dict = field(default_factory=dict)
    """The rule's difference at the target: ``loss``, ``lower``, ``upper`` (one new run of
    each), ``p_better``; and ``anchor`` (None without one, or for ``law``): ``flops`` (the
    largest budget both recipes ran, FLOPs), ``observed`` (L_recipe - L_reference there),
    ``kind``, ``change`` (the law's change of the difference from there to the target) with
    ``change_lower``/``change_upper``, and ``counted`` (``shrunk``: the change's interval
    excludes zero)."""

    def __repr__(self) -> str:
        return (f"RecipeDifference(recipe={self.recipe!r}, reference={self.reference!r}, "
                f"target_flops={self.target_flops:.3g}, loss={self.loss:+.4f}, "
                f"interval=[{self.lower:+.4f}, {self.upper:+.4f}], p_better={self.p_better:.3f}, "
                f"decision={self.decision!r}, winner={self.winner!r})")

    @property
    def winner(self) -> str | None:
        """The recipe the decision rule predicts wins at the target; None for a tie (a
        difference of exactly 0, as the same ladder twice)."""
        loss = self.decided.get("loss", self.loss)
        if loss == 0:
            return None
        return self.recipe if loss < 0 else self.reference

    @property
    def told_apart(self) -> bool:
        """Whether the decision's interval (one new run of each) excludes zero."""
        lo = self.decided.get("lower", self.lower)
        hi = self.decided.get("upper", self.upper)
        return not (lo <= 0.0 <= hi)

    def to_dict(self) -> dict:
        """The ``comparisons`` entry of ``delphi compare-recipes --json``."""
        def fc(f):
            if f is None:
                return None
            iv = f.interval
            return {"loss": f.loss, "lower": iv.lower if iv else None,
                    "upper": iv.upper if iv else None, "method": iv.method if iv else None,
                    "params": f.target.params, "tokens": f.target.tokens,
                    "warnings": list(f.warnings)}
        return {"recipe": self.recipe, "target_flops": self.target_flops,
                "target_params": self.target_params, "target_tokens": self.target_tokens,
                "difference": {"loss": self.loss, "lower": self.lower, "upper": self.upper,
                               "mean_lower": self.mean_lower, "mean_upper": self.mean_upper},
                "p_better": self.p_better,
                "compute_multiplier": {"value": _finite(self.multiplier),
                                       "lower": self.multiplier_lower,
                                       "upper": self.multiplier_upper},
                "crossover": {"flops": self.crossover, "lower": self.crossover_lower,
                              "upper": self.crossover_upper, "share": self.crossover_share},
                "forecasts": {"recipe": fc(self.recipe_forecast),
                              "reference": fc(self.reference_forecast)},
                "decision": {"rule": self.decision, "winner": self.winner,
                             "told_apart": self.told_apart,
                             **{k: v for k, v in self.decided.items()}}}


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class RecipeCurve:
    """One recipe's curve on the figure's compute grid (losses in the ladders' unit)."""

    recipe: str
    loss: tuple[float, ...]
    """L(C) from the recipe's full fit along the path (:attr:`ComparisonCurves.path`), one
    value per grid point."""
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    """Central quantiles of the paired draws' L(C) at the comparison's level: the
    expected-loss band (no run noise)."""
    frontier: tuple[tuple[float, float], ...] = ()
    """The recipe's compute frontier: (C [FLOPs], lowest fitted loss) per compute budget of
    its fitted runs (budgets within 5% of compute are one)."""

    def to_dict(self) -> dict:
        return {"recipe": self.recipe, "loss": list(self.loss), "lower": list(self.lower),
                "upper": list(self.upper), "frontier": [list(p) for p in self.frontier]}


@dataclass(frozen=True)
class DifferenceCurve:
    """One recipe minus the reference on the figure's compute grid."""

    recipe: str
    reference: str
    difference: tuple[float, ...]
    """L_recipe(C) - L_reference(C) from the full fits (negative: the recipe is better)."""
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    """Central quantiles of the paired draws' difference (expected loss, no run noise)."""

    def to_dict(self) -> dict:
        return {"recipe": self.recipe, "reference": self.reference,
                "difference": list(self.difference), "lower": list(self.lower),
                "upper": list(self.upper)}


@dataclass(frozen=True)
class ComparisonCurves:
    """What the figure of a comparison draws (:func:`delphi.plot.plot_recipes`), computed
    once from the paired fits and draws."""

    flops: tuple[float, ...]
    """The compute grid C [FLOPs, the reference's FLOP convention], :data:`CURVE_POINTS`
    log-spaced points from the smallest fitted run's compute to :data:`CURVE_BEYOND` times
    the largest target's."""
    path: str
    """``envelope`` (each recipe at its own compute-optimal allocation, L*(C)) or ``nd``
    (the first target's N and D scaled together: its tokens per parameter)."""
    level: float
    """Level of the bands (the comparison's)."""
    recipes: tuple[RecipeCurve, ...]
    """One per recipe, the reference first."""
    differences: tuple[DifferenceCurve, ...]
    """One per recipe other than the reference."""

    def to_dict(self) -> dict:
        return {"flops": list(self.flops), "path": self.path, "level": self.level,
                "recipes": [r.to_dict() for r in self.recipes],
                "differences": [d.to_dict() for d in self.differences]}


@dataclass(frozen=True)
class RecipeComparison:
    """The result of :func:`compare_recipes`: every recipe against the reference at every
    target. ``str()`` (and Jupyter's display) is the text report of ``delphi compare-recipes``,
    :meth:`to_dict` its ``--json``, :meth:`to_frame` one row per comparison;
    :attr:`comparisons` hold each :class:`RecipeDifference` (the law's difference, its paired
    interval, P(better), the effective compute multiplier, the crossover, each recipe's own
    forecast and the decision rule's answer)."""

    reference: str
    """The reference recipe (the first ladder)."""
    recipes: tuple[str, ...]
    """Every recipe, the reference first."""
    law: str
    """The law fitted to every recipe (``chinchilla`` or ``power``)."""
    comparisons: tuple[RecipeDifference, ...]
    """One per (recipe other than the reference, target), targets in the order given."""
    method: str
    """How the draws were paired, in words (also ``pairing``)."""
    pairing: str
    """``run``, ``budget`` or ``none`` (the one used)."""
    level: float
    """Level of every interval (0.9: central 90%)."""
    n_draws: int
    """Draws used (aligned across recipes); 0 when the recipes are too small to resample and
    the intervals come from their own forecasts (see :attr:`method`)."""
    n_failed: int
    """Draws left out because a recipe's refit failed (for every recipe, to stay paired)."""
    unit: str
    """The ladders' loss unit (nats/token, bits/byte, ...; every recipe's is the same)."""
    metric: str
    """The reference's metric (eval set) name; :attr:`metrics` has every recipe's."""
    fixed: dict = field(default_factory=dict)
    """Parameters held fixed (e.g. the shared floor E)."""
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    curves: ComparisonCurves | None = None
    """The figure's curves and bands (:func:`delphi.plot.plot_recipes`)."""
    ladders: tuple = field(default=(), repr=False, compare=False)
    """The ladders compared, in order (for their provenance; not in the JSON)."""
    decision: str = "law"
    """The decision rule of every comparison (:data:`DECISIONS`)."""
    run_noise: str = "independent"
    """How the new-run noise of the recipes was drawn (:data:`RUN_NOISES`)."""
    metrics: tuple[str, ...] = ()
    """Each recipe's metric (eval set) name, in the order of :attr:`recipes`."""
    exclusions: tuple[tuple[str, str, str], ...] = ()
    """(recipe, run, reason) of every run or row left out: by the reader (``drop_invalid``,
    unfinished runs) or by the fit."""

    def __repr__(self) -> str:
        return (f"RecipeComparison(reference={self.reference!r}, recipes={self.recipes!r}, "
                f"law={self.law!r}, decision={self.decision!r}, comparisons="
                f"{len(self.comparisons)}, pairing={self.pairing!r}, n_draws={self.n_draws})")

    def _repr_pretty_(self, p, cycle) -> None:      # IPython / Jupyter: the text report
        p.text(self.report() if not cycle else repr(self))

    def to_dict(self) -> dict:
        """The JSON of ``delphi compare-recipes --json`` (``curves``: the figure's; NaN, as a
        band without draws, and infinities are null)."""
        return jsonable({"reference": self.reference, "recipes": list(self.recipes),
                         "law": self.law,
                "decision": self.decision, "decision_rule": _RULE_WORDS[self.decision],
                "run_noise": self.run_noise,
                "unit": self.unit, "metric": self.metric,
                "metrics": list(self.metrics) or [self.metric] * len(self.recipes),
                "level": self.level,
                "method": self.method, "pairing": self.pairing, "n_draws": self.n_draws,
                "n_failed": self.n_failed, "fixed": dict(self.fixed),
                "comparisons": [c.to_dict() for c in self.comparisons],
                "notes": list(self.notes), "warnings": list(self.warnings),
                "exclusions": [{"recipe": r, "run": run, "reason": why}
                               for r, run, why in self.exclusions],
                "curves": self.curves.to_dict() if self.curves is not None else None})

    def to_frame(self):
        """One row per comparison: recipe, target, difference and interval, p_better,
        multiplier (an unbounded end is inf) and crossover with their intervals (None: no
        crossover), and the decision rule's answer (``decision``, ``winner``, ``decided`` with
        ``decided_lower``/``decided_upper``, ``told_apart``)."""
        import pandas as pd
        rows = []
        for c in self.comparisons:
            rows.append({"recipe": c.recipe, "reference": c.reference,
                         "target_flops": c.target_flops, "target_params": c.target_params,
                         "target_tokens": c.target_tokens, "difference": c.loss,
                         "lower": c.lower, "upper": c.upper, "p_better": c.p_better,
                         "multiplier": c.multiplier,
                         # None is an unbounded end: inf, not a missing value
                         "multiplier_lower": (math.inf if c.multiplier_lower is None
                                              else c.multiplier_lower),
                         "multiplier_upper": (math.inf if c.multiplier_upper is None
                                              else c.multiplier_upper),
                         "crossover": c.crossover,
                         "crossover_lower": c.crossover_lower,
                         "crossover_upper": c.crossover_upper,
                         "decision": c.decision, "winner": c.winner,
                         "decided": c.decided.get("loss", c.loss),
                         "decided_lower": c.decided.get("lower", c.lower),
                         "decided_upper": c.decided.get("upper", c.upper),
                         "told_apart": c.told_apart})
        return pd.DataFrame(rows)

    def report(self) -> str:
        """The text report of ``delphi compare-recipes``."""
        pct = level_percent(self.level)
        metrics = list(self.metrics) or [self.metric]
        metric = (f"metric {self.metric}" if len(set(metrics)) <= 1 else
                  "metrics " + "; ".join(f"{m} ({r})" for r, m in zip(self.recipes, metrics)))
        lines = [f"recipes    {', '.join(self.recipes)} (reference {self.reference}), law "
                 f"{self.law}, {metric} [{self.unit}]",
                 f"decision   {self.decision}: {_RULE_WORDS[self.decision]}",
                 f"method     {self.method}"
                 + (f"; {self.n_draws} draws" if self.n_draws else "")
                 + (f" ({self.n_failed} failed, left out for every recipe)"
                    if self.n_failed and self.n_draws else "")]
        if self.fixed:
            lines.append("fixed      " + ", ".join(f"{k} = {v:.4g}" for k, v in self.fixed.items()))
        for w in self.warnings:
            lines.append(f"warning    {w}")
        for n in self.notes:
            lines.append(f"note       {n}")
        for r, run, why in self.exclusions:
            lines.append(f"excluded   {r}: {run}: {why}")
        lo, hi = CROSSOVER_RANGE
        for c in self.comparisons:
            spec = _Spec(c.target_flops, c.target_params, c.target_tokens)
            lines.append("")
            lines.append(f"{c.recipe} vs {c.reference} at {spec.label()}")
            for who, f in ((c.reference, c.reference_forecast), (c.recipe, c.recipe_forecast)):
                if f is None:
                    continue
                iv = f.interval
                at = ("" if f.target.params is None or not spec.by_compute else
                      f" at N = {f.target.params:.3g}, D = {f.target.tokens:.3g}")
                band = (f"  {pct} [{iv.lower:.4f}, {iv.upper:.4f}] ({iv.method})" if iv else
                        "  (no interval)")
                lines.append(f"  forecast    {who}: {f.loss:.4f}{band}{at}")
            lines.append(f"  difference  {c.loss:+.4f} {self.unit}, {pct} [{c.lower:+.4f}, "
                         f"{c.upper:+.4f}] ({'unpaired' if self.pairing == 'none' else 'paired'} draws, one "
                         f"new run each; expected loss [{c.mean_lower:+.4f}, "
                         f"{c.mean_upper:+.4f}])")
            lines.append(f"  P(better)   {c.p_better:.3f} that {c.recipe} is better")
            dd = c.decided
            if dd:
                anc = dd.get("anchor")
                how = ""
                if anc is not None and c.decision != "law":
                    band = ("" if anc["change_lower"] is None else
                            f" [{anc['change_lower']:+.4f}, {anc['change_upper']:+.4f}]")
                    how = (f"; observed {anc['observed']:+.4f} at {anc['flops']:.3g} FLOPs "
                           f"({anc['kind']}), law's change {anc['change']:+.4f}{band}"
                           + ("" if c.decision != "shrunk" else
                              (", counted" if anc["counted"] else
                               ", not told apart from 0: not counted")))
                elif c.decision != "law":
                    how = "; no budget both ran: the law's difference"
                if c.decision == "robust" and dd.get("check"):
                    how += f"; {dd['check']}"
                if "taken" in dd and anc is not None:
                    how += ("; the anchored value is taken" if dd["taken"] else
                            "; the observed difference stands")
                verdict = ("no winner (a tie)" if c.winner is None else
                           f"{c.winner} wins" if c.told_apart else
                           f"{c.winner} ahead, not told apart from 0 at {pct}")
                lines.append(f"  decision    {c.decision}: {verdict}, {dd['loss']:+.4f} "
                             f"{pct} [{dd['lower']:+.4f}, {dd['upper']:+.4f}]{how}")
            lines.append(f"  multiplier  {_mult(c.multiplier)}, {pct} "
                         f"[{_mult(c.multiplier_lower)}, {_mult(c.multiplier_upper)}]"
                         f" ({c.reference}'s compute to reach {c.recipe}'s loss / target compute)")
            if c.crossover is None:
                lines.append(f"  crossover   none in {lo:.0e}..{hi:.0e}"
                             + (f" ({c.crossover_share:.0%} of draws cross)"
                                if c.crossover_share and math.isfinite(c.crossover_share)
                                else ""))
            elif not self.n_draws:
                lines.append(f"  crossover   {c.crossover:.3g} FLOPs (no interval without "
                             f"draws)")
            else:
                lines.append(f"  crossover   {c.crossover:.3g} FLOPs, {pct} "
                             f"[{_flops(c.crossover_lower)}, {_flops(c.crossover_upper)}] "
                             f"({c.crossover_share:.0%} of draws cross in {lo:.0e}..{hi:.0e})")
            seen = set()
            for f in (c.reference_forecast, c.recipe_forecast):
                for w in (f.warnings if f is not None else ()):
                    if w not in seen:
                        seen.add(w)
                        lines.append(f"  warning     {f.ladder_name}: {w}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _mult(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "unbounded"
    return f"{x:.3g}x"


def _flops(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


# ----------------------------------------------------------------------------- checks
def _metric_kind(metric: str) -> str:
    """What a metric measures, from its name: accuracy, perplexity or loss."""
    m = metric.lower()
    if "acc" in m:
        return "accuracy"
    if "perplex" in m or "ppl" in m.split():
        return "perplexity"
    return "loss"


def _check_comparable(ladders: Sequence[Ladder], names: Sequence[str] | None = None
                      ) -> list[str]:
    """Refuse ladders in different units or kinds of metric; warnings (returned, and issued
    as :class:`~delphi.errors.LadderWarning`) for differing eval sets (metric names), FLOP
    conventions (median k = C/(6ND) more than 10% apart) and tokens-per-parameter designs
    (median D/N more than 2x apart)."""
    ref = ladders[0]
    out = []
    for other in ladders[1:]:
        if other.unit != ref.unit:
            raise LadderError(f"ladders {ref.name!r} and {other.name!r} are in different units "
                              f"({ref.unit} and {other.unit}): their losses cannot be compared")
        if _metric_kind(other.metric) != _metric_kind(ref.metric):
            raise LadderError(f"ladders {ref.name!r} and {other.name!r} measure different "
                              f"metrics ({ref.metric!r} and {other.metric!r})")
        if other.metric.strip().lower() != ref.metric.strip().lower():
            out.append(f"ladders {ref.name!r} and {other.name!r} are evaluated on different "
                       f"sets ({ref.metric!r} and {other.metric!r}): the difference mixes the "
                       f"recipes with the eval sets")
        ka, kb = ref.flops_convention, other.flops_convention
        if ka is not None and kb is not None and abs(kb.median / ka.median - 1) > 0.1:
            out.append(f"ladders {ref.name!r} and {other.name!r} count FLOPs differently "
                       f"(C/(6ND) {ka.median:.3g} and {kb.median:.3g}): a target compute means "
                       f"different runs for each")
        ra, rb = _median_tpp(ref), _median_tpp(other)
        if ra and rb and max(ra / rb, rb / ra) > 2:
            out.append(f"ladders {ref.name!r} and {other.name!r} differ in their tokens per "
                       f"parameter (median D/N {ra:.3g} and {rb:.3g}): their designs differ, so "
                       f"the draws pair fewer runs")
    prints = [ld.fingerprint() for ld in ladders]
    names = list(names) if names is not None else [ld.name for ld in ladders]
    for i in range(len(ladders)):
        for j in range(i + 1, len(ladders)):
            if prints[i] == prints[j]:
                out.append(f"recipes {names[i]!r} and {names[j]!r} hold the same "
                           f"runs and losses (the same fingerprint): their difference is 0 by "
                           f"construction")
    for message in out:
        warn_user(message, LadderWarning)
    return out


def _median_tpp(ladder: Ladder) -> float | None:
    if not ladder.has("params", "tokens"):
        return None
    try:
        pts = ladder.final_points()[0]
    except LadderError:
        return None
    if pts.empty:
        return None
    return float(np.median(pts["tokens"].to_numpy(float) / pts["params"].to_numpy(float)))


def _choose_law(ladders: Sequence[Ladder], law) -> tuple[str, list[str]]:
    """The one law for every ladder: the given one, else ``chinchilla`` when every ladder's
    design supports it (:func:`delphi.forecast.default_law`), else ``power`` in C."""
    notes = []
    if law is not None:
        name = getattr(law, "name", law)
        if name not in SUPPORTED_LAWS:
            raise LawError(f"compare-recipes evaluates the laws {', '.join(SUPPORTED_LAWS)} "
                           f"(their compute-optimal envelope and N, D path); got {name!r}")
        return name, notes
    defaults = {ld.name: forecast.default_law(ld) for ld in ladders}
    if all(v == "chinchilla" for v in defaults.values()):
        return "chinchilla", ["law chinchilla: every ladder varies N and D (the design-aware "
                              "default they all support)"]
    others = [f"{k} ({v})" for k, v in defaults.items() if v != "chinchilla"]
    notes.append(f"law power in C: not every ladder supports chinchilla ({', '.join(others)})")
    return "power", notes


def _specs(ladders, law, target_flops, target_params, target_tokens) -> list[_Spec]:
    """Targets: each compute, or each (N, D) pair (C = k 6 N D with the reference's k)."""
    flops = _as_list(target_flops, "target_flops", "--target-flops")
    params = _as_list(target_params, "target_params", "--target-params")
    tokens = _as_list(target_tokens, "target_tokens", "--target-tokens")
    if flops and (params or tokens):
        raise TargetError(f"give targets by compute ({option('target_flops', '--target-flops')}) "
                          f"or by N and D ({option('target_params', '--target-params')} and "
                          f"{option('target_tokens', '--target-tokens')}), not both")
    if len(params) != len(tokens):
        raise TargetError(f"{len(params)} target N value(s) and {len(tokens)} D value(s): give "
                          f"one {option('target_tokens', '--target-tokens')} per "
                          f"{option('target_params', '--target-params')}")
    if not flops and not params:
        raise TargetError(f"no target: give {option('target_flops', '--target-flops')} C, or "
                          f"{option('target_params', '--target-params')} N and "
                          f"{option('target_tokens', '--target-tokens')} D")
    conv = ladders[0].flops_convention
    k = conv.median if conv is not None else 1.0
    for arg, values in (("target_flops", flops), ("target_params", params),
                        ("target_tokens", tokens)):
        for x in values:
            if not (math.isfinite(x) and x > 0):
                raise TargetError(f"{arg} must be positive and finite, got {x!r}")
    # a target given twice is one row (dict.fromkeys keeps the order given)
    if flops:
        return [_Spec(float(c)) for c in dict.fromkeys(flops)]
    return [_Spec(float(k * FLOPS_PER_PARAM_TOKEN * n * d), float(n), float(d))
            for n, d in dict.fromkeys(zip(params, tokens))]


def _as_list(value, api: str, flag: str) -> list[float]:
    if value is None:
        return []
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [float(value)]
    try:
        return [float(v) for v in value]
    except (TypeError, ValueError):
        raise TargetError(f"{option(api, flag)} must be numbers, got {value!r}") from None


# ----------------------------------------------------------------------------- paired draws
def _group(values: np.ndarray, tol: float) -> np.ndarray:
    """Group ids of ``values`` (> 0): sorted, a new group when a value exceeds the group's
    first by more than ``tol`` (a factor)."""
    order = np.argsort(values, kind="mergesort")
    ids = np.empty(len(values), dtype=int)
    gid, start = -1, None
    for i in order:
        if start is None or values[i] > start * tol:
            gid, start = gid + 1, values[i]
        ids[i] = gid
    return ids


def _cells(fits: Sequence, pairing: str) -> tuple[list[np.ndarray], int, float]:
    """Each recipe's points as indices into the union of design cells: (budget, size) for
    ``run`` (budget alone for a law of C), budget for ``budget``. Returns (indices per recipe,
    number of cells, share of cells every recipe has)."""
    comp, size, owner = [], [], []
    for i, f in enumerate(fits):
        x = f.x
        if "flops" in x:
            c = np.asarray(x["flops"], float)
        else:
            c = FLOPS_PER_PARAM_TOKEN * np.asarray(x["params"], float) * np.asarray(
                x["tokens"], float)
        comp.append(c)
        size.append(np.asarray(x["params"], float) if "params" in x else np.ones_like(c))
        owner.append(np.full(len(c), i))
    c_all, n_all, who = np.concatenate(comp), np.concatenate(size), np.concatenate(owner)
    b = _group(c_all, _BUDGET_TOL)
    s = _group(n_all, _SIZE_TOL) if pairing == "run" else np.zeros(len(b), dtype=int)
    keys = b * (int(s.max()) + 1) + s
    uniq, inv = np.unique(keys, return_inverse=True)
    shared = sum(1 for u in range(len(uniq))
                 if len(set(who[inv == u].tolist())) == len(fits)) / len(uniq)
    out, start = [], 0
    for c in comp:
        out.append(inv[start:start + len(c)])
        start += len(c)
    return out, len(uniq), shared


def _weights(cells: list[np.ndarray], n_cells: int, pairing: str, n: int,
             seed: int) -> list[np.ndarray]:
    """Point multiplicities, one (n, n_points) array per recipe. Paired: draw b resamples the
    union of cells once (child b of SeedSequence(seed)) and every recipe takes its cells'
    counts. ``none``: each recipe resamples its own runs with its own seeds."""
    out = []
    if pairing == "none":
        for i, idx in enumerate(cells):
            children = np.random.SeedSequence([seed, i]).spawn(n)
            m = len(idx)
            w = np.empty((n, m))
            for b, ch in enumerate(children):
                w[b] = np.bincount(np.random.default_rng(ch).integers(0, m, m), minlength=m)
            out.append(w)
        return out
    counts = np.empty((n, n_cells))
    for b, ch in enumerate(np.random.SeedSequence(seed).spawn(n)):
        counts[b] = np.bincount(np.random.default_rng(ch).integers(0, n_cells, n_cells),
                                minlength=n_cells)
    return [counts[:, idx] for idx in cells]


def _usable(law_inputs, x, w: np.ndarray, n_free: int) -> bool:
    """A resample can be refitted: enough distinct points, and every input still varies."""
    keep = w > 0
    if int(keep.sum()) < n_free + 1:
        return False
    return all(np.ptp(np.log(np.asarray(x[c], float)[keep])) > 0 for c in law_inputs)


def _refit_block(job) -> list[dict | None]:
    """Refit one recipe's block of weighted resamples from its full-data optimum: batched BFGS
    (:func:`delphi.fitting.refit.refine_batch`), L-BFGS-B for the draws it leaves, and the
    global search (:func:`delphi.fitting.fit_arrays`) for the draws flagged ``checked``,
    keeping the better optimum. Returns each draw's parameters (None: not refittable)."""
    law, x, y, fixed, bounds, delta, params, weights, checked, seed = job
    prep = engine.prepare(law, x, y, fixed=fixed, bounds=bounds, delta=delta)
    problem = prep.problem
    z0 = engine.safe_start(problem, params, prep.ibounds)
    ok = np.array([_usable(prep.law.inputs, prep.x, w, len(prep.free)) for w in weights])
    out: list[dict | None] = [None] * len(weights)
    if not ok.any():
        return out
    batch = refit.refine_batch(problem, z0, weights[ok], prep.ibounds)
    for a, b in enumerate(np.flatnonzero(ok)):
        z, obj = batch.z[a], float(batch.objective[a])
        idx = np.repeat(np.arange(len(y)), weights[b].astype(int))
        if not batch.converged[a] or not np.isfinite(obj):
            sub = Problem(law=problem.law,
                          x={k: (v[idx] if isinstance(v, np.ndarray) and v.shape == y.shape
                                 else v) for k, v in problem.x.items()},
                          log_y=problem.log_y[idx], delta=problem.delta, free=problem.free,
                          fixed=problem.fixed)
            z = refit.refine_one(sub, z if np.all(np.isfinite(z)) else z0, prep.ibounds)[0]
            obj = float(refit.weighted_objective(problem, z, weights[b])[0])
        if checked[b]:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    g = fitting.fit_arrays(law, {k: np.asarray(v)[idx] for k, v in x.items()},
                                           y[idx], fixed=fixed, bounds=bounds, delta=delta,
                                           seed=seed, starts=2)
                zg = problem.pack(g.params)
                obj_g = float(refit.weighted_objective(problem, zg, weights[b])[0])
                if np.isfinite(obj_g) and (not np.isfinite(obj) or obj > obj_g * (1 + _WORSE_RTOL)):
                    z, obj = zg, obj_g
            except FitError:
                pass
        if np.isfinite(obj):
            out[b] = problem.values(z)
    return out


def _draw_params(fits, weights: list[np.ndarray], seed: int, n_jobs) -> list[list[dict | None]]:
    """Each recipe's refitted parameters per draw (None where the refit failed)."""
    n = weights[0].shape[0]
    checked = np.zeros(n, dtype=bool)
    checked[int(np.random.default_rng(seed).integers(min(CHECK_EVERY, n)))::CHECK_EVERY] = True
    jobs, owner = [], []
    for i, (f, w) in enumerate(zip(fits, weights)):
        bounds = {k: v for k, v in f.bounds.items() if k not in f.fixed}
        x = {c: np.asarray(f.x[c], float) for c in f.law.inputs}
        for s in range(0, n, _BLOCK):
            jobs.append((f.law, x, np.asarray(f.y, float), dict(f.fixed), bounds, f.delta,
                         dict(f.params), w[s:s + _BLOCK], checked[s:s + _BLOCK], seed))
            owner.append(i)
    blocks = map_jobs(_refit_block, jobs, n_jobs=n_jobs,
                      desc=f"paired bootstrap ({len(fits)} recipes x {n} draws)", unit="block")
    out: list[list] = [[] for _ in fits]
    for i, block in zip(owner, blocks):
        out[i].extend(block)
    return out


def _stack(draws: list[dict], names: Sequence[str]) -> dict[str, np.ndarray]:
    return {k: np.array([d[k] for d in draws], float)[:, None] for k in names}


def _col(params: Mapping[str, float]) -> dict[str, np.ndarray]:
    return {k: np.array([[float(v)]]) for k, v in params.items()}


# ----------------------------------------------------------------------------- engine
@dataclass
class _Paired:
    """Fits and aligned parameter draws of every recipe (internal)."""

    names: list[str]
    ladders: list[Ladder]
    fits: list
    law: str
    k: list[float]
    draws: list[dict[str, np.ndarray]]
    noise: list[float]
    pairing: str
    method: str
    n_failed: int
    notes: list[str]
    rho: dict = field(default_factory=dict)
    """(a, b) -> (rho, matched cells): correlation of the two recipes' run noise (their log
    residuals at matched (budget, size) cells) under ``run_noise="paired"``; 0 otherwise."""
    run_noise: str = "independent"
    fit_max_flops: float | None = None
    no_draws: str = ""
    """Why there are no paired draws (``draws`` None): too few runs to resample; "" when
    there are."""


def _k(ladder: Ladder) -> float:
    conv = ladder.flops_convention
    return conv.median if conv is not None else 1.0


def _shared_floor(ladders, law, fixed, bounds, delta, fit_max_flops, seed) -> tuple[float, list]:
    """One floor E for every recipe: the E minimising the summed objective of all recipes
    (each refitted with E fixed, warm-started at its free fit), by a grid over E in
    (0, the lowest loss fitted) refined by a bounded scalar search."""
    from scipy.optimize import minimize_scalar
    with warnings.catch_warnings():
        # starts only: the fits with the shared E fixed carry the diagnostics that matter
        warnings.simplefilter("ignore")
        free_fits = [fitting.fit(ld, law, fixed=fixed or None, bounds=bounds, delta=delta,
                                 fit_max_flops=fit_max_flops, seed=seed) for ld in ladders]
    preps = []
    for f in free_fits:
        x = {c: np.asarray(f.x[c], float) for c in f.law.inputs}
        preps.append((f, x))
    top = min(float(np.min(f.y)) for f in free_fits) * 0.999

    def total(e: float) -> float:
        s = 0.0
        for f, x in preps:
            pinned = {**(fixed or {}), "E": float(e)}
            bd = {k: v for k, v in (bounds or {}).items() if k != "E"}
            prep = engine.prepare(law, x, f.y, fixed=pinned, bounds=bd or None, delta=delta)
            z0 = engine.safe_start(prep.problem, f.params, prep.ibounds)
            s += float(refit.refine_one(prep.problem, z0, prep.ibounds)[1])
        return s

    grid = np.linspace(0.02 * top, top, 25)
    vals = [total(e) for e in grid]
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = minimize_scalar(total, bounds=(lo, hi), method="bounded",
                          options={"xatol": 1e-5 * top})
    e = float(res.x) if res.fun <= vals[i] else float(grid[i])
    return e, free_fits


def _residual_correlation(fits, a: int, b: int) -> tuple[float, int]:
    """Correlation of recipes a's and b's log residuals at the design cells both fitted
    ((budget, size); residuals averaged within a cell), and the number of matched cells.
    Fewer than :data:`_MIN_MATCHED` matched cells: (0.0, n) (no estimate). Clipped to
    [-:data:`_MAX_RHO`, :data:`_MAX_RHO`] so the difference keeps some noise of its own."""
    cells, _, _ = _cells([fits[a], fits[b]], "run")
    ra, rb = np.asarray(fits[a].residuals, float), np.asarray(fits[b].residuals, float)
    ca, cb = cells
    common = np.intersect1d(ca, cb)
    n = len(common)
    if n < _MIN_MATCHED:
        return 0.0, n
    xa = np.array([ra[ca == c].mean() for c in common])
    xb = np.array([rb[cb == c].mean() for c in common])
    if np.std(xa) == 0 or np.std(xb) == 0:
        return 0.0, n
    rho = float(np.corrcoef(xa, xb)[0, 1])
    return float(np.clip(rho, -_MAX_RHO, _MAX_RHO)), n


def _shared_exponents(ladders, law, fixed, bounds, delta, fit_max_flops, seed,
                      with_floor: bool) -> dict[str, float]:
    """One set of exponents (alpha, beta for chinchilla; alpha for power) for every recipe,
    and with ``with_floor`` one floor E too: the values minimising the summed objective of
    all recipes, each refitted with them fixed (warm-started at its free fit), by
    Nelder-Mead in log space from the median of the free fits' values (the recipes then
    differ by their coefficients A, B and, without ``with_floor``, E: the gap shrinks with
    scale unless the coefficients' differences have opposite signs). Hoffmann et al. 2022
    Eq. 2 with alpha, beta (and E) tied across recipes: a modelling choice that trades bias
    for variance, scored by :func:`backtest_recipes`."""
    from scipy.optimize import minimize
    names = [n for n in (("alpha", "beta") if law == "chinchilla" else ("alpha",))
             if n not in (fixed or {})]
    if with_floor and "E" not in (fixed or {}):
        names.append("E")
    if not names:
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        free_fits = [fitting.fit(ld, law, fixed=fixed or None, bounds=bounds, delta=delta,
                                 fit_max_flops=fit_max_flops, seed=seed) for ld in ladders]
    top = min(float(np.min(f.y)) for f in free_fits) * 0.999
    start = {n: float(np.median([f.params[n] for f in free_fits])) for n in names}
    if "E" in start:
        start["E"] = min(max(start["E"], 0.05 * top), 0.95 * top)
    preps = [(f, {c: np.asarray(f.x[c], float) for c in f.law.inputs}) for f in free_fits]
    memo: dict = {}

    def total(v: np.ndarray) -> float:
        key = tuple(np.round(v, 12))
        if key in memo:
            return memo[key]
        vals = dict(zip(names, np.exp(v)))
        if "E" in vals and not vals["E"] < top:
            return 1e300
        t = 0.0
        for f, x in preps:
            pinned = {**(fixed or {}), **vals}
            bd = {k: b for k, b in (bounds or {}).items() if k not in pinned}
            prep = engine.prepare(law, x, f.y, fixed=pinned, bounds=bd or None, delta=delta)
            z0 = engine.safe_start(prep.problem, f.params, prep.ibounds)
            o = float(refit.refine_one(prep.problem, z0, prep.ibounds)[1])
            t += o if math.isfinite(o) else 1e300
        memo[key] = t
        return t

    v0 = np.log([start[n] for n in names])
    res = minimize(total, v0, method="Nelder-Mead",
                   options={"xatol": 1e-4, "fatol": 1e-10, "maxfev": 120 * len(names)})
    v = res.x if res.fun <= total(v0) else v0
    return dict(zip(names, (float(x) for x in np.exp(v))))


def _paired(ladders, names, law, *, fixed, bounds, delta, fit_max_flops, shared_floor,
            pairing, n_boot, seed, n_jobs, run_noise: str = "paired",
            shared_exponents: bool = False, allow_none: bool = False) -> _Paired:
    """Fit every recipe and draw its paired bootstrap refits. Too few refittable draws
    raise FitError, or with ``allow_none`` give ``draws`` None and the reason in
    ``no_draws`` (the caller falls back on the recipes' own forecast intervals)."""
    notes: list[str] = []
    fixed = dict(fixed or {})
    if shared_exponents:
        if shared_floor and "E" in fixed:
            raise LawError(f"{option('shared_floor=True', '--shared-floor')} fits one floor E "
                           f"for every recipe; it cannot also be fixed "
                           f"({option('floor', '--floor')})")
        shared = _shared_exponents(ladders, law, fixed, bounds, delta, fit_max_flops, seed,
                                   with_floor=shared_floor)
        fixed.update(shared)
        notes.append("shared " + ", ".join(f"{k} = {v:.4g}" for k, v in shared.items())
                     + " fitted jointly on every recipe (the summed objective); draws hold "
                     "them fixed, so the intervals are conditional on them")
        shared_floor = False
    if shared_floor:
        if "E" in fixed:
            raise LawError(f"{option('shared_floor=True', '--shared-floor')} fits one floor E "
                           f"for every recipe; it cannot also be fixed "
                           f"({option('floor', '--floor')})")
        e, _ = _shared_floor(ladders, law, fixed, bounds, delta, fit_max_flops, seed)
        fixed["E"] = e
        notes.append(f"shared floor E = {e:.4g} fitted jointly on every recipe (the summed "
                     f"objective, profiled over E); draws hold it fixed, so the intervals are "
                     f"conditional on it")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fits = [fitting.fit(ld, law, fixed=fixed or None, bounds=bounds, delta=delta,
                            fit_max_flops=fit_max_flops, seed=seed) for ld in ladders]
    for nm, f in zip(names, fits):
        if not f.converged:
            raise FitError(f"the fit of recipe {nm!r} did not converge; no comparison")
    cells, n_cells, shared = _cells(fits, "budget" if pairing == "budget" else "run")
    used = pairing
    if pairing == "auto":
        used = "run" if shared >= _MIN_SHARED else "none"
        if used == "none":
            notes.append(f"the recipes share {shared:.0%} of their design cells (compute budget, "
                         f"model size), under {_MIN_SHARED:.0%}: independent (unpaired) draws")
    noise_mode = run_noise if used != "none" else "independent"
    if noise_mode == "paired":
        noise_words = ("run noise of the two recipes drawn with the correlation of their log "
                       "residuals at matched (budget, size) cells")
    else:
        noise_words = "run noise added independently per recipe"
    if used == "run":
        what = "(budget, model size) cell" if "params" in fits[0].x else "compute budget"
        method = (f"paired bootstrap: every draw resamples the same {what}s for every recipe "
                  f"(common random numbers; {shared:.0%} of the cells shared), refitted "
                  f"warm-started; {noise_words}")
    elif used == "budget":
        method = (f"paired bootstrap by compute budget: every draw resamples the same budgets "
                  f"for every recipe ({shared:.0%} shared), refitted warm-started; "
                  f"{noise_words}")
    else:
        method = ("unpaired bootstrap: each recipe resamples its own runs with its own random "
                  "numbers; run noise added independently per recipe")
    rho = {}
    if noise_mode == "paired":
        for a in range(len(fits)):
            for b in range(a + 1, len(fits)):
                r, n = _residual_correlation(fits, a, b)
                rho[(a, b)] = rho[(b, a)] = (r, n)
                if n < _MIN_MATCHED:
                    notes.append(f"{names[b]} vs {names[a]}: {n} matched (budget, size) "
                                 f"cells, under {_MIN_MATCHED}: run noise drawn independently")
                else:
                    notes.append(f"{names[b]} vs {names[a]}: run-noise correlation "
                                 f"{r:+.2f} (log residuals at {n} matched cells)")
    weights = _weights(cells, n_cells, used, n_boot, seed)
    raw = _draw_params(fits, weights, seed, n_jobs)
    good = [b for b in range(n_boot) if all(r[b] is not None for r in raw)]
    n_failed = n_boot - len(good)
    if len(good) < max(10, n_boot // 2):
        # Name the recipe that starves the draws, and what would free them.
        per = [sum(r[b] is None for b in range(n_boot)) for r in raw]
        worst = int(np.argmax(per))
        f = fits[worst]
        n_free = len(f.law.param_names) - len(f.fixed)
        floor = (f"; fix the floor ({option('floor=E', '--floor E')}) to leave "
                 f"{n_free - 1} free" if "E" not in f.fixed else "")
        what = "paired" if used != "none" else "unpaired"
        why = (f"{n_failed} of {n_boot} {what} bootstrap draws could not be refitted for every "
               f"recipe: recipe {names[worst]!r} has {plural(f.n_points, 'fitted point')} for "
               f"the {n_free} free parameters of law {law!r}, and a draw needs at least "
               f"{n_free + 1} distinct points with every input still varying ({per[worst]} of "
               f"its draws fail)")
        if not allow_none:
            raise FitError(f"{why}{floor}, or add runs")
        return _Paired(names=list(names), ladders=list(ladders), fits=fits, law=law,
                       k=[_k(ld) for ld in ladders], draws=None, noise=[], pairing="none",
                       method="", n_failed=n_failed, notes=notes, rho={},
                       run_noise="independent", fit_max_flops=fit_max_flops, no_draws=why)
    draws = [_stack([r[b] for b in good], f.law.param_names) for r, f in zip(raw, fits)]
    noise = []
    for f in fits:
        sigma, _ = uncertainty.run_noise(f)
        noise.append(float(sigma))
    return _Paired(names=list(names), ladders=list(ladders), fits=fits, law=law,
                   k=[_k(ld) for ld in ladders], draws=draws, noise=noise, pairing=used,
                   method=method, n_failed=n_failed, notes=notes, rho=rho,
                   run_noise=noise_mode, fit_max_flops=fit_max_flops)


def _alternate(ladders, names, law, *, fixed, bounds, delta, fit_max_flops, shared_floor,
               pairing, n_boot, seed, n_jobs, run_noise, shared_exponents) -> "_Paired | str | None":
    """The same recipes under the other floor model, for the ``robust`` decision rule: one
    shared floor E when ``shared_floor`` is off, each recipe's own E when it is on. None when
    no other floor model applies (E fixed, shared exponents, or the recipes evaluated on
    different sets, where one E has no meaning); the reason (a string) when it cannot be
    fitted."""
    if "E" in (fixed or {}) or shared_exponents:
        return None
    if not shared_floor and len({ld.metric.strip().lower() for ld in ladders}) > 1:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _paired(ladders, names, law, fixed=fixed, bounds=bounds, delta=delta,
                           fit_max_flops=fit_max_flops, shared_floor=not shared_floor,
                           pairing=pairing, n_boot=n_boot, seed=seed, n_jobs=n_jobs,
                           run_noise=run_noise)
    except (FitError, LawError) as exc:
        return f"the {'own' if shared_floor else 'shared'}-floor fit failed: {exc}"


def _alt_note(alt, shared_floor: bool) -> str:
    """The note naming what the ``robust`` rule's second floor model was."""
    other = "each recipe's own floor E" if shared_floor else "one floor E shared by every recipe"
    if alt is None:
        return ("decision robust: no second floor model applies (E fixed, shared exponents or "
                "different eval sets): as confident")
    if isinstance(alt, str):
        return (f"decision robust: the second floor model ({other}) could not be fitted, so the "
                f"observed difference at the largest budget both ran stands: {alt}")
    return (f"decision robust: the anchored difference must exclude zero on the same side "
            f"also with {other}")


def _quantiles(values: np.ndarray, level: float) -> tuple[float | None, float | None]:
    """Central interval of ``values`` (may hold inf); an infinite end is None (unbounded)."""
    a = (1 - level) / 2
    v = np.sort(values[~np.isnan(values)])
    if not len(v):
        return None, None
    lo, hi = np.quantile(np.where(np.isinf(v), np.sign(v) * 1e300, v), [a, 1 - a],
                         method="inverted_cdf")
    return (None if abs(lo) >= 1e299 else float(lo)), (None if abs(hi) >= 1e299 else float(hi))


def _solve(spec: _Spec, law: str, p, k: float, goal: np.ndarray) -> np.ndarray:
    """u = ln(C_A / C_target) with path loss of ``p`` equal to ``goal`` (shape (m,)), by
    bisection in u (losses decrease along the path); +inf where ``goal`` is at or below the
    path's floor, the end of the span where it is beyond it."""
    m = len(goal)
    lo, hi = np.full(m, -_LOG_SPAN), np.full(m, _LOG_SPAN)
    at = lambda u: spec.path(law, p, u[:, None], k)[:, 0]   # noqa: E731
    for _ in range(70):
        mid = (lo + hi) / 2
        above = at(mid) > goal
        lo, hi = np.where(above, mid, lo), np.where(above, hi, mid)
    u = (lo + hi) / 2
    floor = np.broadcast_to(p["E"][:, 0], (m,))
    return np.where(goal <= floor, np.inf, u)


def _crossovers(spec: _Spec, law: str, pa, pb, ka: float, kb: float,
                near: np.ndarray) -> np.ndarray:
    """Compute [FLOPs] where the two curves meet in :data:`CROSSOVER_RANGE` (the crossing
    nearest ``near``, ln C, per row), NaN where they do not; rows broadcast pa/pb (m, 1)."""
    lo, hi = np.log(CROSSOVER_RANGE[0]), np.log(CROSSOVER_RANGE[1])
    grid = np.linspace(lo, hi, int(_GRID_PER_DECADE * (hi - lo) / math.log(10)) + 1)
    u = grid - math.log(spec.flops)
    d = spec.path(law, pb, u[None, :], kb) - spec.path(law, pa, u[None, :], ka)
    sign = np.sign(d)
    change = sign[:, :-1] * sign[:, 1:] < 0
    m = d.shape[0]
    out = np.full(m, np.nan)
    rows, cols = np.nonzero(change)
    if not len(rows):
        return out
    d0, d1 = d[rows, cols], d[rows, cols + 1]
    x = grid[cols] + (grid[cols + 1] - grid[cols]) * d0 / (d0 - d1)   # linear in ln C
    dist = np.abs(x - np.broadcast_to(near, (m,))[rows])
    best = np.full(m, np.inf)
    for r, xi, di in zip(rows, x, dist):
        if di < best[r]:
            best[r], out[r] = di, xi
    return np.exp(out)


def _noise_pair(pp: _Paired, a: int, b: int, rng, shape) -> tuple[np.ndarray, np.ndarray]:
    """Log run noise of one new run of recipe a and of b: normal with each recipe's scale
    (:func:`delphi.uncertainty.run_noise`) and correlation rho of the pair (0 unless
    ``run_noise="paired"``): e_b = sigma_b (rho z_a + sqrt(1 - rho^2) z_b)."""
    rho = pp.rho.get((a, b), (0.0, 0))[0]
    za = rng.normal(0.0, 1.0, size=shape)
    zb = rng.normal(0.0, 1.0, size=shape)
    return pp.noise[a] * za, pp.noise[b] * (rho * za + math.sqrt(1 - rho * rho) * zb)


def _fitted_pair(pp: _Paired, a: int, b: int, spec: _Spec) -> tuple:
    """The full fits' side of a comparison at ``spec``: (parameters of a and of b as
    columns, L_a, L_b, the effective compute multiplier (inf: a never reaches L_b), the
    crossover nearest the target [FLOPs] or None)."""
    law = pp.law
    pa, pb = _col(pp.fits[a].params), _col(pp.fits[b].params)
    zero = np.zeros((1, 1))
    la = float(spec.path(law, pa, zero, pp.k[a])[0, 0])
    lb = float(spec.path(law, pb, zero, pp.k[b])[0, 0])
    u_point = _solve(spec, law, pa, pp.k[a], np.array([lb]))[0]
    mult = math.exp(u_point) if math.isfinite(u_point) else math.inf
    cross = _crossovers(spec, law, pa, pb, pp.k[a], pp.k[b],
                        np.array([math.log(spec.flops)]))[0]
    return pa, pb, la, lb, mult, (None if np.isnan(cross) else float(cross))


def _compare_pair(pp: _Paired, a: int, b: int, spec: _Spec, level: float, seed: int,
                  own: tuple | None = None) -> dict:
    """Difference, P(better), multiplier and crossover of recipe b against a at ``spec``.
    Without paired draws (``pp.draws`` None) the recipes' own forecasts ``own`` = (forecast
    of a, forecast of b) at ``spec`` give the intervals (:func:`_compare_unpaired`).

    The new-run interval (``lower``/``upper``: the draws' difference plus each recipe's run
    noise) contains the expected-difference one (``mean_lower``/``mean_upper``): an end
    Monte-Carlo noise put inside it (few draws, run noise small against the draws' spread) is
    moved out to the expected-difference end, as in
    :func:`delphi.uncertainty.bootstrap_interval` (docs/intervals.md)."""
    if pp.draws is None:
        return _compare_unpaired(pp, a, b, spec, level, seed, own)
    law = pp.law
    pa, pb, la, lb, mult, cross = _fitted_pair(pp, a, b, spec)
    da, db = pp.draws[a], pp.draws[b]
    m = len(next(iter(da.values())))
    za = spec.path(law, da, np.zeros((m, 1)), pp.k[a])[:, 0]
    zb = spec.path(law, db, np.zeros((m, 1)), pp.k[b])[:, 0]
    rng = np.random.default_rng(np.random.SeedSequence([seed, a, b, 7]))
    ea, eb = _noise_pair(pp, a, b, rng, (m, _NOISE_PER_DRAW))
    new = (zb[:, None] * np.exp(eb) - za[:, None] * np.exp(ea)).ravel()
    diff = zb - za
    if not (np.all(np.isfinite(new)) and np.all(np.isfinite(diff))):
        raise FitError(f"the paired draws of {pp.names[b]!r} against {pp.names[a]!r} give a "
                       f"non-finite loss at {spec.label()}: the fits are too uncertain there")
    q = (1 - level) / 2
    lo, hi = np.quantile(new, [q, 1 - q])
    mlo, mhi = np.quantile(diff, [q, 1 - q])
    # as bootstrap_interval: run noise only widens, but percentiles of few draws need not know
    lo, hi = min(lo, mlo), max(hi, mhi)
    u_draws = _solve(spec, law, da, pp.k[a], zb)
    m_lo, m_hi = _quantiles(np.exp(u_draws), level)
    centre = np.array([math.log(cross if cross is not None else spec.flops)])
    cd = _crossovers(spec, law, da, db, pp.k[a], pp.k[b], centre)
    share = float(np.mean(~np.isnan(cd)))
    c_lo = c_hi = None
    if cross is not None:
        c_lo, c_hi = _quantiles(cd[~np.isnan(cd)], level)
    return {"loss": lb - la, "lower": float(lo), "upper": float(hi), "mean_lower": float(mlo),
            "mean_upper": float(mhi),
            "p_better": float(np.mean(diff < 0) + 0.5 * np.mean(diff == 0)),
            "multiplier": mult, "multiplier_lower": m_lo, "multiplier_upper": m_hi,
            "crossover": cross, "crossover_lower": c_lo, "crossover_upper": c_hi,
            "crossover_share": share, "la": la, "lb": lb}


def _compare_unpaired(pp: _Paired, a: int, b: int, spec: _Spec, level: float, seed: int,
                      own: tuple | None) -> dict:
    """:func:`_compare_pair` for recipes too small to resample: the difference of the fits
    at ``spec`` with an interval from the two recipes' own forecast intervals (calibrated
    or reference-class, :func:`delphi.forecast.predict`), taken as independent log-normal
    errors (sd of log loss from each interval, :func:`delphi.calibration.log_sd`) and
    combined by Monte Carlo. Unpaired, so wider than a paired interval would be: the
    recipes' shared design cannot be used. The multiplier's interval solves the reference's
    fitted curve for the draws of its loss plus the difference (the reference's slope held
    at its fit); there is no crossover interval. The new-run interval contains the expected
    one, as in :func:`_compare_pair`."""
    fa, fb = own if own is not None else (None, None)
    if fa is None or fb is None or fa.interval is None or fb.interval is None:
        raise FitError(f"{pp.no_draws}; and the recipes' own forecasts give no interval to "
                       f"fall back on")
    law = pp.law
    pa, pb, la, lb, mult, cross = _fitted_pair(pp, a, b, spec)
    rng = np.random.default_rng(np.random.SeedSequence([seed, a, b, 13]))
    m = 4000
    za, zb = rng.standard_normal(m), rng.standard_normal(m)
    sa, sb = log_sd(fa.interval), log_sd(fb.interval)
    ma, mb = log_sd(fa.interval, new_run=False), log_sd(fb.interval, new_run=False)
    new = lb * np.exp(sb * zb) - la * np.exp(sa * za)
    diff = lb * np.exp(mb * zb) - la * np.exp(ma * za)
    q = (1 - level) / 2
    lo, hi = (float(v) for v in np.quantile(new, [q, 1 - q]))
    mlo, mhi = (float(v) for v in np.quantile(diff, [q, 1 - q]))
    lo, hi = min(lo, mlo), max(hi, mhi)
    u_draws = _solve(spec, law, pa, pp.k[a], la + diff)
    m_lo, m_hi = _quantiles(np.exp(u_draws), level)
    return {"loss": lb - la, "lower": lo, "upper": hi, "mean_lower": mlo, "mean_upper": mhi,
            "p_better": float(np.mean(diff < 0) + 0.5 * np.mean(diff == 0)),
            "multiplier": mult, "multiplier_lower": m_lo, "multiplier_upper": m_hi,
            "crossover": cross, "crossover_lower": None, "crossover_upper": None,
            "crossover_share": float("nan"), "la": la, "lb": lb}


def _runs_upto(ladders, fit_max_flops: float | None) -> list:
    """Each ladder's finished runs (:func:`_table`) at or below ``fit_max_flops``."""
    out = []
    for ld in ladders:
        t = _table(ld)
        if fit_max_flops is not None:
            t = t[t["flops"] <= fit_max_flops]
        out.append(t.reset_index(drop=True))
    return out


def _anchor(tables, a: int, b: int, by_compute: bool, law: str) -> dict | None:
    """The observed difference L_b - L_a at the largest compute budget both recipes ran (at
    or below the cut), and where the law is evaluated to match it.

    On an isoFLOP budget (3+ sizes for each recipe) with a target by compute: the difference
    of the budget's best runs, matched by L*(C) at the budget's compute (the reference's
    median). Otherwise the mean difference of the runs of one size both have at that budget,
    matched by L(N, D) at each recipe's own run (no common size: each recipe's best run).
    Returns ``observed``, ``flops`` (the budget's compute) and ``points`` (pairs of
    (spec of a, spec of b), averaged), or None when the recipes share no budget."""
    ta, tb = tables[a], tables[b]
    if not len(ta) or not len(tb):
        return None
    c = np.concatenate([ta["flops"].to_numpy(float), tb["flops"].to_numpy(float)])
    g = _group(c, _BUDGET_TOL)
    ga, gb = g[:len(ta)], g[len(ta):]
    common = sorted(set(ga.tolist()) & set(gb.tolist()))
    if not common:
        return None
    top = common[-1]
    sa, sb = ta[ga == top], tb[gb == top]
    flops = float(np.median(sa["flops"]))
    has_nd = ("params" in sa.columns and "params" in sb.columns
              and sa["params"].notna().all() and sb["params"].notna().all())

    def nd(row) -> _Spec:
        if law == "power" or not has_nd:
            return _Spec(float(row["flops"]))
        return _Spec(float(row["flops"]), float(row["params"]), float(row["tokens"]))

    if by_compute and (not has_nd or (sa["params"].nunique() >= 3 and sb["params"].nunique() >= 3)):
        return {"observed": float(sb["loss"].min() - sa["loss"].min()), "flops": flops,
                "points": [(_Spec(flops), _Spec(flops))], "kind": "best runs"}
    if has_nd:
        n = np.concatenate([sa["params"].to_numpy(float), sb["params"].to_numpy(float)])
        s = _group(n, _SIZE_TOL)
        za, zb = s[:len(sa)], s[len(sa):]
        sizes = sorted(set(za.tolist()) & set(zb.tolist()))
        if sizes:
            pairs, diffs = [], []
            for z in sizes:
                ra, rb = sa[za == z].iloc[0], sb[zb == z].iloc[0]
                pairs.append((nd(ra), nd(rb)))
                diffs.append(float(rb["loss"]) - float(ra["loss"]))
            return {"observed": float(np.mean(diffs)), "flops": flops, "points": pairs,
                    "kind": f"{plural(len(sizes), 'matched run')}"}
    ra, rb = sa.loc[sa["loss"].idxmin()], sb.loc[sb["loss"].idxmin()]
    return {"observed": float(rb["loss"]) - float(ra["loss"]), "flops": flops,
            "points": [(nd(ra), nd(rb))], "kind": "best runs"}


def _decide(pp: _Paired, a: int, b: int, spec: _Spec, level: float, seed: int, r: dict,
            anchor: dict | None, alt: "_Paired | str | None" = None) -> dict:
    """Every decision rule's predicted L_b - L_a at ``spec`` (:data:`DECISIONS`).

    ``robust`` (the rules of :func:`_decide_one`, then): the anchored value where the anchored
    difference's interval excludes zero on the same side in ``pp`` and in ``alt``, the same
    recipes fitted under the other floor model (:func:`_alternate`: own floors against one
    shared floor), else the observed difference at the anchor. The floor E is the least
    identified parameter of a ladder (free floors drift), so a decision that turns on it is
    not overturned on it. ``alt`` None (no second floor model applies: E fixed, or the
    recipes on different eval sets): as ``confident``; ``alt`` a string (the second model
    could not be fitted; the reason): the observed difference. Same interval as
    ``anchored``.
    """
    if pp.draws is None:
        return _decide_undrawn(pp, a, b, spec, r, anchor)
    out = _decide_one(pp, a, b, spec, level, seed, r, anchor)
    conf = out["confident"]
    if out["anchor"] is None or alt is None:
        out["robust"] = {**conf, "check": None if alt is None else "no anchor"}
        return out
    obs = out["anchor"]["observed"]
    lo, hi = out["anchored"]["lower"], out["anchored"]["upper"]
    check = alt if isinstance(alt, str) else None
    side = 0
    if check is None:
        try:
            r2 = _compare_pair(alt, a, b, spec, level, seed)
            o2 = _decide_one(alt, a, b, spec, level, seed, r2, anchor)
        except FitError as exc:
            check = f"the other floor model gives no interval here: {exc}"
        else:
            lo2, hi2 = o2["anchored"]["lower"], o2["anchored"]["upper"]
            if o2["anchor"] is None:
                check = "the other floor model has no anchor"
            else:
                side = 1 if (lo > 0 and lo2 > 0) else -1 if (hi < 0 and hi2 < 0) else 0
                check = (f"the other floor model's anchored interval [{lo2:+.4f}, {hi2:+.4f}]")
    loss = out["anchored"]["loss"] if side else obs
    out["robust"] = {"loss": loss, "lower": lo, "upper": hi,
                     "p_better": out["anchored"]["p_better"], "check": check,
                     "taken": bool(side)}
    return out


def _law_at_anchor(pp: _Paired, a: int, b: int, anchor: dict) -> tuple[float, float]:
    """The full fits' L_a and L_b at the anchor (:func:`_anchor`), each the mean over its
    matched points."""
    pa, pb = _col(pp.fits[a].params), _col(pp.fits[b].params)
    zero = np.zeros((1, 1))
    pt_a = pt_b = 0.0
    for sa, sb in anchor["points"]:
        pt_a += float(sa.path(pp.law, pa, zero, pp.k[a])[0, 0])
        pt_b += float(sb.path(pp.law, pb, zero, pp.k[b])[0, 0])
    k = len(anchor["points"])
    return pt_a / k, pt_b / k


def _decide_undrawn(pp: _Paired, a: int, b: int, spec: _Spec, r: dict,
                    anchor: dict | None) -> dict:
    """:func:`_decide` without paired draws: ``law`` as always; ``anchored`` the observed
    difference at the anchor plus the law's change (no interval of the change), and the
    rules that overturn the observed difference only with a paired interval (``shrunk``,
    ``confident``, ``robust``) keep it: nothing can say the change is told apart from
    zero. Intervals: the law's (unpaired, :func:`_compare_unpaired`)."""
    law_rule = {"loss": r["loss"], "lower": r["lower"], "upper": r["upper"],
                "p_better": r["p_better"]}
    out = {"law": law_rule, "anchor": None}
    if anchor is None:
        for rule in ("anchored", "shrunk", "confident"):
            out[rule] = dict(law_rule)
        out["robust"] = {**law_rule, "check": "no anchor"}
        return out
    pt_a, pt_b = _law_at_anchor(pp, a, b, anchor)
    obs = anchor["observed"]
    change = r["loss"] - (pt_b - pt_a)
    kept = {**law_rule, "loss": obs, "taken": False}
    out["anchored"] = {**law_rule, "loss": obs + change}
    out["shrunk"] = dict(kept)
    out["confident"] = dict(kept)
    out["robust"] = {**kept, "check": "no paired draws"}
    out["anchor"] = {"flops": anchor["flops"], "observed": obs, "kind": anchor["kind"],
                     "change": change, "change_lower": None, "change_upper": None,
                     "counted": False}
    return out


def _decide_one(pp: _Paired, a: int, b: int, spec: _Spec, level: float, seed: int, r: dict,
                anchor: dict | None) -> dict:
    """Every decision rule but ``robust`` (:func:`_decide`): the predicted L_b - L_a at
    ``spec``.

    * ``law``: the fits' difference at the target (``r``, :func:`_compare_pair`).
    * ``anchored``: the observed difference at the anchor budget (:func:`_anchor`) plus the
      law's predicted change of the difference from the anchor to the target,
      Delta_law(target) - Delta_law(anchor): the law only has to get the trend right
      (the intercept of each recipe's curve cancels; as the "difference-in-differences" of
      a paired design). Interval: the paired draws of the change plus the run noise of the
      target's difference minus the anchor's (each drawn as :func:`_noise_pair`).
    * ``shrunk``: the anchored value where the change's paired interval at ``level``
      excludes zero, else the observed difference at the anchor (the change is not told
      apart from none: the single-scale answer). Same interval as ``anchored``.
    * ``confident``: the anchored value where the anchored difference's own interval (one
      new run of each) excludes zero, else the observed difference at the anchor: the
      single-scale sign is overturned only when the law says the other sign with
      confidence. Same interval as ``anchored``.

    Without an anchor every rule falls back to ``law`` (``anchor`` None in the result).
    """
    law = pp.law
    out = {"law": {"loss": r["loss"], "lower": r["lower"], "upper": r["upper"],
                   "p_better": r["p_better"]}, "anchor": None}
    if anchor is None:
        out["anchored"] = out["shrunk"] = out["confident"] = dict(out["law"])
        return out
    da, db = pp.draws[a], pp.draws[b]
    m = len(next(iter(da.values())))
    zeros = np.zeros((m, 1))
    pt_a, pt_b = _law_at_anchor(pp, a, b, anchor)
    dr_a, dr_b = np.zeros(m), np.zeros(m)
    for sa, sb in anchor["points"]:
        dr_a = dr_a + sa.path(law, da, zeros, pp.k[a])[:, 0]
        dr_b = dr_b + sb.path(law, db, zeros, pp.k[b])[:, 0]
    k = len(anchor["points"])
    dr_a, dr_b = dr_a / k, dr_b / k
    ta = spec.path(law, da, zeros, pp.k[a])[:, 0]
    tb = spec.path(law, db, zeros, pp.k[b])[:, 0]
    change = r["loss"] - (pt_b - pt_a)
    change_draws = (tb - ta) - (dr_b - dr_a)
    q = (1 - level) / 2
    c_lo, c_hi = (float(v) for v in np.quantile(change_draws, [q, 1 - q]))
    obs = anchor["observed"]
    rng = np.random.default_rng(np.random.SeedSequence([seed, a, b, 11]))
    shape = (m, _NOISE_PER_DRAW)
    ea, eb = _noise_pair(pp, a, b, rng, shape)
    na, nb = _noise_pair(pp, a, b, rng, shape)
    noise_t = tb[:, None] * np.expm1(eb) - ta[:, None] * np.expm1(ea)
    noise_c = (dr_b[:, None] * np.expm1(nb) - dr_a[:, None] * np.expm1(na)) / math.sqrt(k)
    new = (obs + change_draws[:, None] + noise_t - noise_c).ravel()
    if not np.all(np.isfinite(new)):
        out["anchored"] = out["shrunk"] = out["confident"] = dict(out["law"])
        return out
    lo, hi = (float(v) for v in np.quantile(new, [q, 1 - q]))
    p_anch = float(np.mean(obs + change_draws < 0) + 0.5 * np.mean(obs + change_draws == 0))
    counted = not (c_lo <= 0.0 <= c_hi)
    out["anchored"] = {"loss": obs + change, "lower": lo, "upper": hi, "p_better": p_anch}
    out["shrunk"] = {"loss": obs + change if counted else obs, "lower": lo, "upper": hi,
                     "p_better": p_anch}
    sure = not (lo <= 0.0 <= hi)
    out["confident"] = {"loss": obs + change if sure else obs, "lower": lo, "upper": hi,
                        "p_better": p_anch, "taken": sure}
    out["anchor"] = {"flops": anchor["flops"], "observed": obs, "kind": anchor["kind"],
                     "change": change, "change_lower": c_lo, "change_upper": c_hi,
                     "counted": counted}
    return out


def _recipe_target(pp: _Paired, i: int, spec: _Spec) -> "forecast.Target":
    """Recipe i's own target: at its compute-optimal N, D for a chinchilla law at a compute
    target, else the target itself."""
    if spec.by_compute:
        if pp.law == "chinchilla":
            n, d = _allocation(pp.fits[i].params, spec.flops, pp.k[i])
            return forecast.Target(params=n, tokens=d,
                                   name=f"{pp.names[i]} compute-optimal at C = {spec.flops:.3g}")
        return forecast.Target(flops=spec.flops)
    return forecast.Target(params=spec.params, tokens=spec.tokens)


def _fitted_compute(fit, k: float) -> np.ndarray:
    """C [FLOPs, ladder convention] of each fitted point: the ``flops`` input, else k 6 N D."""
    if "flops" in fit.x:
        return np.asarray(fit.x["flops"], float)
    return k * FLOPS_PER_PARAM_TOKEN * np.asarray(fit.x["params"], float) * np.asarray(
        fit.x["tokens"], float)


def _fitted_runs(ladder: Ladder, fit, k: float) -> tuple[np.ndarray, np.ndarray]:
    """(C [FLOPs], loss) of the fitted runs: the ladder's own compute when it gives one (its
    FLOP count, not the median convention), else k 6 N D from the fit's inputs."""
    try:
        pts = _table(ladder)
        pts = pts[pts["run"].astype(str).isin({str(x) for x in fit.labels})]
    except (LadderError, KeyError):
        pts = None
    if pts is not None and len(pts) == len(fit.y):
        return pts["flops"].to_numpy(float), pts["loss"].to_numpy(float)
    return _fitted_compute(fit, k), np.asarray(fit.y, float)


def _curves(pp: _Paired, specs: Sequence[_Spec], level: float) -> ComparisonCurves:
    """Each recipe's L(C) with its expected-loss band and each difference with its band, on
    a log grid from the smallest fitted compute to CURVE_BEYOND x the largest target, along
    the first target's path (the envelope for targets by compute)."""
    spec = specs[0]
    runs = [_fitted_runs(ld, f, k) for ld, f, k in zip(pp.ladders, pp.fits, pp.k)]
    c_fit = [c for c, _ in runs]
    lo = min(float(c.min()) for c in c_fit)
    hi = max(max(s.flops for s in specs) * CURVE_BEYOND, lo * 10)
    grid = np.geomspace(lo, hi, CURVE_POINTS)
    u = np.log(grid) - math.log(spec.flops)
    q = (1 - level) / 2
    point, draws = [], []
    for i, f in enumerate(pp.fits):
        point.append(spec.path(pp.law, _col(f.params), u[None, :], pp.k[i])[0])
        # no draws: NaN bands (no band is drawn; null in the JSON)
        draws.append(spec.path(pp.law, pp.draws[i], u[None, :], pp.k[i])
                     if pp.draws is not None else np.full((1, len(grid)), np.nan))

    def band(values: np.ndarray) -> tuple[tuple[float, ...], tuple[float, ...]]:
        if np.isnan(values).all():
            return (tuple([math.nan] * values.shape[1]),) * 2
        lo_, hi_ = np.quantile(values, [q, 1 - q], axis=0)
        return tuple(map(float, lo_)), tuple(map(float, hi_))

    recipes = []
    for i, name in enumerate(pp.names):
        ids = _group(c_fit[i], _BUDGET_TOL)
        y = runs[i][1]
        front = tuple((float(np.median(c_fit[i][ids == g])), float(y[ids == g].min()))
                      for g in np.unique(ids))
        recipes.append(RecipeCurve(name, tuple(map(float, point[i])), *band(draws[i]),
                                   frontier=front))
    diffs = tuple(DifferenceCurve(pp.names[b], pp.names[0],
                                  tuple(map(float, point[b] - point[0])),
                                  *band(draws[b] - draws[0]))
                  for b in range(1, len(pp.names)))
    return ComparisonCurves(flops=tuple(map(float, grid)),
                            path="envelope" if spec.by_compute else "nd", level=level,
                            recipes=tuple(recipes), differences=diffs)


def _load(ladders) -> list[Ladder]:
    if isinstance(ladders, (str, os.PathLike, Ladder)) or hasattr(ladders, "columns"):
        what = ladders if isinstance(ladders, (str, os.PathLike)) else type(ladders).__name__
        raise LadderError(f"a comparison takes a list of two or more ladders (recipes), the "
                          f"reference first, e.g. [A, B]; got one: {what!r}")
    out = []
    for ld in ladders:
        out.append(load_ladder(ld) if isinstance(ld, str) else as_ladder(ld))
    return out


def _check_common(ladders, names, pairing, level, n_boot, seed):
    if len(ladders) < 2:
        raise LadderError(f"a comparison needs at least two ladders (recipes), got {len(ladders)}")
    if pairing not in PAIRINGS:
        raise FitError(f"unknown pairing {pairing!r}; use {', '.join(PAIRINGS)}")
    check_level(level)
    if not (isinstance(n_boot, int) and not isinstance(n_boot, bool) and 20 <= n_boot <= 100_000):
        raise FitError(f"{option('n_boot', '--n-boot')} must be 20 to 100,000 paired bootstrap "
                       f"draws, got {n_boot!r}")
    if not (isinstance(seed, int) and seed >= 0):
        raise FitError(f"seed must be a non-negative integer, got {seed!r}")
    if names is not None:
        if len(names) != len(ladders):
            raise LadderError(f"{len(names)} names for {len(ladders)} ladders: give one per "
                              f"ladder, in order")
    given = names is not None
    names = list(names) if names is not None else [ld.name for ld in ladders]
    if len(set(names)) < len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        how = ("give distinct names" if given else
               f"give {option('names=[...]', '--names A,B')}")
        raise LadderError(f"recipes must have distinct names; {', '.join(map(repr, dup))} "
                          f"appears twice ({how})")
    return names


def compare_recipes(ladders: Sequence, *, target_flops=None, target_params=None,
                    target_tokens=None, law: str | None = None,
                    fixed: Mapping[str, float] | None = None, floor: float | None = None,
                    shared_floor: bool = False,
                    bounds: Mapping[str, Sequence[float]] | None = None,
                    delta: float = fitting.DEFAULT_DELTA, fit_max_flops: float | None = None,
                    pairing: str = "auto", level: float = uncertainty.DEFAULT_LEVEL,
                    n_boot: int = 200, seed: int = 0, interval: str | None = "auto",
                    n_jobs: int | None = None, names: Sequence[str] | None = None,
                    forecasts: bool = True, decision: str = DEFAULT_DECISION,
                    run_noise: str = "paired", shared_exponents: bool = False
                    ) -> RecipeComparison:
    """Compare recipes (ladders) at target computes: each against the first (the reference).

    Parameters
    ----------
    ladders: two or more ladders (names, paths, :class:`~delphi.ladder.Ladder` or DataFrames),
        the reference first.
    target_flops: one or more target computes C [FLOPs]: each recipe at its own
        compute-optimal allocation (the envelope L*(C)).
    target_params, target_tokens: or one or more (N, D) pairs: every recipe at that N and D
        (C = k 6 N D with the reference's FLOP convention k).
    law: ``chinchilla`` or ``power`` (default: chinchilla when every ladder's design supports
        it, :func:`delphi.forecast.default_law`, else power in C).
    fixed, floor: parameters held fixed for every recipe (``floor``: E).
    shared_floor: fit one floor E for all recipes jointly (when they share an eval set and
        tokenizer); the draws hold it fixed (the intervals are conditional on it).
    bounds, delta, fit_max_flops: as in :func:`delphi.fitting.fit`, for every recipe.
    pairing: ``auto`` (default: ``run`` when at least half the design cells are shared by all
        recipes, else ``none``), ``run``, ``budget`` or ``none`` (:data:`PAIRINGS`).
    level: interval level (0.9). n_boot: draws (aligned across recipes). seed: seed of the
        draws (same inputs and seed, same result, whatever ``n_jobs``).
    interval: the method of each recipe's own forecast (:func:`delphi.forecast.predict`;
        default auto: calibrated or reference-class).
    names: labels of the recipes (default the ladders' names).
    forecasts: also make each recipe's own forecast at each target (default True).
    decision: the rule that names the winner (:data:`DECISIONS`; default
        :data:`DEFAULT_DECISION`): ``law`` (the fits' difference at the target),
        ``anchored`` (the observed difference at the largest budget both recipes ran plus
        the law's change from there), ``shrunk`` (anchored where the change's paired
        interval excludes zero, else the observed difference), ``confident``, ``robust`` (see :func:`_decide`). Reported per comparison
        (:attr:`RecipeDifference.decided`); the ``loss``/``lower``/``upper`` fields stay the
        law's.
    run_noise: ``paired`` (default: the two recipes' new-run noise correlated as their log
        residuals at matched (budget, size) cells; independent with fewer than 5 matched)
        or ``independent`` (:data:`RUN_NOISES`).
    shared_exponents: fit the exponents (alpha, beta; with ``shared_floor`` also E) jointly
        for all recipes; the draws hold them fixed.

    Returns
    -------
    RecipeComparison, one :class:`RecipeDifference` per (recipe, target). Differences are
    recipe - reference in the ladders' loss unit (negative: the recipe is better).

    Raises
    ------
    LadderError: fewer than two ladders, ladders in different units or measuring different
        metrics (naming both), duplicate names.
    LawError: a law other than chinchilla or power; a shared floor with a fixed E.
    TargetError: no target, or targets by compute and by N and D at once.
    FitError: a fit that did not converge, bad settings, or too many draws that cannot be
        refitted.
    """
    ladders = _load(ladders)
    names = _check_common(ladders, names, pairing, level, n_boot, seed)
    _check_rules(decision, run_noise)
    check_n_jobs(n_jobs)
    warns = _check_comparable(ladders, names)
    # the ladders' own load warnings (a drifting FLOP convention sets the allocation)
    warns += [w if w.startswith("ladder ") else f"{nm}: {w}"
              for ld, nm in zip(ladders, names) for w in ld.warnings]
    law_name, notes = _choose_law(ladders, law)
    specs = _specs(ladders, law_name, target_flops, target_params, target_tokens)
    fixed = dict(fixed or {})
    if floor is not None:
        if "E" in fixed:
            raise LawError("E fixed twice (floor and fixed['E']); give one")
        fixed["E"] = float(floor)
    pp = _paired(ladders, names, law_name, fixed=fixed, bounds=bounds, delta=delta,
                 fit_max_flops=fit_max_flops, shared_floor=shared_floor, pairing=pairing,
                 n_boot=n_boot, seed=seed, n_jobs=n_jobs, run_noise=run_noise,
                 shared_exponents=shared_exponents, allow_none=True)
    upto = _runs_upto(ladders, fit_max_flops)
    alt = None
    if decision == "robust" and pp.draws is not None:
        alt = _alternate(ladders, names, law_name, fixed=fixed, bounds=bounds, delta=delta,
                         fit_max_flops=fit_max_flops, shared_floor=shared_floor,
                         pairing=pairing, n_boot=n_boot, seed=seed, n_jobs=n_jobs,
                         run_noise=run_noise, shared_exponents=shared_exponents)
        notes.append(_alt_note(alt, shared_floor))
    own = {}
    if forecasts or pp.draws is None:       # without draws the forecasts give the intervals
        for i, ld in enumerate(ladders):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")     # kept on the forecast, reported
                # one fit, bootstrap and calibration per recipe, shared by its targets
                made = forecast.predict(
                    ld, [_recipe_target(pp, i, spec) for spec in specs], law_name,
                    fixed=pp.fits[i].fixed or None, bounds=bounds, delta=delta,
                    fit_max_flops=fit_max_flops, seed=seed, interval=interval, level=level,
                    n_jobs=n_jobs)
            own.update({(i, j): f for j, f in enumerate(made)})
    if pp.draws is None:
        methods = sorted({f.interval.method for f in own.values() if f.interval is not None})
        pp.method = (f"no bootstrap ({pp.no_draws}): the difference's interval combines the "
                     f"recipes' own forecast intervals ({', '.join(methods) or 'none'}) as "
                     f"independent log-normal errors, so it is unpaired and wide (the shared "
                     f"design is not used); no crossover interval")
        if decision != "law":
            notes.append(f"decision {decision}: without paired draws the observed difference "
                         f"at the largest budget both recipes ran is kept (no interval can "
                         f"overturn it)")
    out = []
    for b in range(1, len(ladders)):
        for j, spec in enumerate(specs):
            r = _compare_pair(pp, 0, b, spec, level, seed, (own.get((0, j)), own.get((b, j))))
            rules = _decide(pp, 0, b, spec, level, seed, r,
                            _anchor(upto, 0, b, spec.by_compute, law_name), alt)
            decided = {**rules[decision], "anchor": rules["anchor"]}
            out.append(RecipeDifference(
                recipe=names[b], reference=names[0], target_flops=spec.flops,
                target_params=spec.params, target_tokens=spec.tokens,
                **{k: v for k, v in r.items() if k not in ("la", "lb")},
                recipe_forecast=own.get((b, j)) if forecasts else None,
                reference_forecast=own.get((0, j)) if forecasts else None,
                decision=decision, decided=decided))
    lowest = {nm: float(f.extra.get("min_flops") or math.inf) for nm, f in zip(names, pp.fits)}
    smallest = min(lowest.values())         # where the figure's grid starts
    below = set()
    for r in out:
        pair_min = min(lowest[r.recipe], lowest[r.reference])
        if r.crossover is not None and r.crossover < pair_min:
            below.add((r.recipe, r.reference, r.crossover, pair_min))
    for recipe, reference, crossover, pair_min in sorted(below):
        notes.append(f"{recipe} vs {reference}: the crossover at {crossover:.3g} FLOPs is below "
                     f"the two recipes' smallest fitted run ({pair_min:.3g}): the curves are "
                     f"extrapolated downwards there"
                     + (", and the figure does not reach it" if crossover < smallest else ""))
    if law_name == "chinchilla" and any(s.by_compute for s in specs):
        notes.append("a target by compute puts each recipe at its own compute-optimal N and D "
                     "(Hoffmann et al. 2022, Eq. 4); the multiplier is along the reference's "
                     "envelope")
    if any(not s.by_compute for s in specs):
        notes.append("a target by N and D: the multiplier scales the reference's N and D "
                     "together (the target's tokens per parameter)")
    return RecipeComparison(reference=names[0], recipes=tuple(names), law=law_name,
                            comparisons=tuple(out), method=pp.method, pairing=pp.pairing,
                            level=level, n_draws=(len(next(iter(pp.draws[0].values())))
                                                  if pp.draws is not None else 0),
                            decision=decision, run_noise=pp.run_noise,
                            n_failed=pp.n_failed, unit=ladders[0].unit,
                            metric=ladders[0].metric, fixed=dict(pp.fits[0].fixed),
                            metrics=tuple(ld.metric for ld in ladders),
                            exclusions=tuple(dict.fromkeys(
                                (nm, e.run, e.reason)
                                for nm, ld, f in zip(names, ladders, pp.fits)
                                for e in [*ld.exclusions, *f.exclusions])),
                            notes=tuple(pp.notes + notes), warnings=tuple(warns),
                            curves=_curves(pp, specs, level), ladders=tuple(ladders))


# ----------------------------------------------------------------------------- backtest
@dataclass(frozen=True)
class RecipeBacktest:
    """The result of :func:`backtest_recipes`: one row per (cut, pair of recipes, larger
    budget or run), and the summary."""

    recipes: tuple[str, ...]
    law: str
    level: float
    design: str
    """``envelope`` (isoFLOP budgets: each budget's best run against L*(C)) or ``runs`` (the
    runs every recipe has, matched by (budget, size), against L(N, D))."""
    rows: tuple[dict, ...]
    """``cut`` [FLOPs], ``a``, ``b`` (recipes), ``flops``, ``params``, ``tokens`` (None for an
    envelope target), ``observed`` (L_b - L_a), ``predicted``, ``lower``, ``upper``,
    ``inside``, ``p_better``, ``correct`` (the predicted winner won), ``baseline`` (L_b - L_a
    at the largest budget at or below the cut) and ``baseline_correct``."""
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    decision: str = "law"
    """The decision rule scored in ``correct``/``inside`` (:data:`DECISIONS`); every rule's
    prediction is in the rows as ``predicted_<rule>``, ``correct_<rule>``..."""
    run_noise: str = "paired"
    method: str = ""
    """How the draws (and run noise) were made, in words (the first cut's)."""

    @property
    def summary(self) -> dict:
        """``n``, ``decision_accuracy`` (of :attr:`decision`), ``baseline_accuracy``,
        ``coverage`` (share of observed differences inside their interval), ``n_cuts``, and
        ``by_rule``: {rule: {``accuracy``, ``coverage``}} for every rule of :data:`DECISIONS`;
        accuracies leave out exact ties."""
        rows = [r for r in self.rows if r["observed"] != 0]
        n = len(rows)
        if not n:
            return {"n": 0, "decision": self.decision, "decision_accuracy": None,
                    "baseline_accuracy": None, "coverage": None, "n_cuts": 0, "by_rule": {}}
        return {"n": n, "decision": self.decision,
                "decision_accuracy": sum(r["correct"] for r in rows) / n,
                "baseline_accuracy": sum(r["baseline_correct"] for r in rows) / n,
                "coverage": sum(r["inside"] for r in rows) / n,
                "n_cuts": len({r["cut"] for r in rows}),
                "by_rule": {rule: {"accuracy": sum(r[f"correct_{rule}"] for r in rows) / n,
                                   "coverage": sum(r[f"inside_{rule}"] for r in rows) / n}
                            for rule in DECISIONS if f"correct_{rule}" in rows[0]}}

    def to_dict(self) -> dict:
        """The JSON of ``delphi compare-recipes --backtest --json``."""
        return {"recipes": list(self.recipes), "law": self.law, "level": self.level,
                "design": self.design, "decision": self.decision,
                "run_noise": self.run_noise, "method": self.method,
                "summary": self.summary, "rows": list(self.rows),
                "notes": list(self.notes), "warnings": list(self.warnings)}

    def to_frame(self):
        import pandas as pd
        return pd.DataFrame(list(self.rows))

    def report(self) -> str:
        s = self.summary
        lines = [f"recipes    {', '.join(self.recipes)}, law {self.law}, design {self.design}"]
        for w in self.warnings:
            lines.append(f"warning    {w}")
        for n in self.notes:
            lines.append(f"note       {n}")
        if not s["n"]:
            lines.append("no decisions scored")
            return "\n".join(lines)
        lines.append(f"method     {self.method}" if self.method else "method     -")
        lines.append(f"decision   {self.decision}: {_RULE_WORDS[self.decision]}")
        lines.append(f"decisions  {s['n']} (pairs x larger budgets x {s['n_cuts']} cuts)")
        lo, hi = _binomial_interval(round(s["decision_accuracy"] * s["n"]), s["n"])
        lines.append(f"accuracy   {s['decision_accuracy']:.1%} predicted winner won (90% "
                     f"Clopper-Pearson [{lo:.1%}, {hi:.1%}] for {plural(s['n'], 'decision')}, "
                     f"taken as independent, which decisions sharing a ladder are not); "
                     f"single-scale baseline {s['baseline_accuracy']:.1%} (rank by the loss at "
                     f"the largest budget at or below the cut)")
        lines.append("by rule    " + "; ".join(
            f"{k} {v['accuracy']:.1%} (coverage {v['coverage']:.1%})"
            for k, v in s["by_rule"].items()))
        lines.append(f"coverage   {s['coverage']:.1%} of observed differences inside their "
                     f"{level_percent(self.level)} paired interval")
        lines.append("")
        lines.append(f"{'cut':>9} {'pair':<40} {'flops':>9} {'observed':>9} {'predicted':>9} "
                     f"{'interval':>19} ok  base")
        for r in self.rows:
            pair = f"{r['b']} - {r['a']}"
            lines.append(f"{r['cut']:9.3g} {pair[:40]:<40} {r['flops']:9.3g} "
                         f"{r['observed']:+9.4f} {r['predicted']:+9.4f} "
                         f"[{r['lower']:+8.4f},{r['upper']:+8.4f}] "
                         f"{'y' if r['correct'] else 'n':>2}  {'y' if r['baseline_correct'] else 'n':>4}"
                         f"{'' if r['inside'] else '  outside'}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _binomial_interval(k: int, n: int, level: float = 0.9) -> tuple[float, float]:
    """Clopper & Pearson (1934) exact interval of a share k / n."""
    from scipy.stats import beta
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


_RULE_WORDS = {
    "law": "the fitted laws' difference at the target",
    "anchored": "the observed difference at the largest budget both recipes ran, plus the "
                "law's predicted change of the difference from there to the target",
    "shrunk": "anchored where the paired interval of the law's change excludes zero, else "
              "the observed difference at the largest budget both ran",
    "confident": "anchored where the anchored difference's interval excludes zero, else the "
                 "observed difference at the largest budget both ran",
    "robust": "anchored where the anchored difference's interval excludes zero on the same "
              "side with each recipe's own floor E and with one shared floor, else the "
              "observed difference at the largest budget both ran"}


def _check_rules(decision: str, run_noise: str) -> None:
    if decision not in DECISIONS:
        raise FitError(f"unknown decision rule {decision!r}; use {', '.join(DECISIONS)}")
    if run_noise not in RUN_NOISES:
        raise FitError(f"unknown run_noise {run_noise!r}; use {', '.join(RUN_NOISES)}")


def _table(ladder: Ladder):
    """Finished runs: run, flops (ladder convention), params, tokens, loss."""
    pts = ladder.final_points()[0].copy()
    if "flops" not in pts.columns or pts["flops"].isna().any():
        pts["flops"] = _k(ladder) * FLOPS_PER_PARAM_TOKEN * pts["params"] * pts["tokens"]
    return pts


def backtest_recipes(ladders: Sequence, *, law: str | None = None,
                     fixed: Mapping[str, float] | None = None, shared_floor: bool = False,
                     pairing: str = "auto", level: float = uncertainty.DEFAULT_LEVEL,
                     n_boot: int = 200, seed: int = 0, max_cuts: int = 4,
                     n_jobs: int | None = None, names: Sequence[str] | None = None,
                     decision: str = DEFAULT_DECISION, run_noise: str = "paired",
                     shared_exponents: bool = False) -> RecipeBacktest:
    """Decision backtest: were comparisons of recipes right one or more scales up?

    For each cut (a compute budget; up to ``max_cuts``, evenly spaced among the budgets that
    leave every recipe at least 2p + 2 runs at or below them and 3 budgets, p the law's free
    parameters), every recipe is fitted on its runs at or below the cut
    (:func:`compare_recipes`' paired draws), and for every pair of recipes (a, b) and every
    larger budget: on an isoFLOP design (3+ sizes per budget) the predicted L*_b - L*_a at
    the budget's compute against the difference of the budgets' best runs; otherwise at
    each (N, D) run both recipes trained, against the two runs' losses. Scored: whether the
    predicted winner won, whether the observed difference fell inside the paired interval,
    and the single-scale baseline (the sign of the difference at the largest budget at or
    below the cut; Magnusson et al. 2025, DataDecide).

    Raises
    ------
    LadderError, LawError, FitError: as :func:`compare_recipes`; also (LadderError) no cut
        leaves enough runs and a larger budget.
    """
    ladders = _load(ladders)
    names = _check_common(ladders, names, pairing, level, n_boot, seed)
    _check_rules(decision, run_noise)
    if not (isinstance(max_cuts, int) and max_cuts >= 1):
        raise FitError(f"max_cuts must be a positive whole number, got {max_cuts!r}")
    warns = _check_comparable(ladders, names)
    law_name, notes = _choose_law(ladders, law)
    tables = [_table(ld) for ld in ladders]
    c_all = np.concatenate([t["flops"].to_numpy(float) for t in tables])
    # a ladder without N (compute and loss only) is one size per budget
    n_all = np.concatenate([t["params"].to_numpy(float) if "params" in t.columns
                            else np.ones(len(t)) for t in tables])
    bud = _group(c_all, _BUDGET_TOL)
    size = _group(n_all, _SIZE_TOL)
    start = 0
    for t in tables:
        t["budget"] = bud[start:start + len(t)]
        t["size"] = size[start:start + len(t)]
        start += len(t)
    per_budget = tables[0].groupby("budget")["size"].nunique()
    # without N every run is its budget's point on L(C): compared by compute, as an envelope
    envelope = bool(per_budget.median() >= 3) or any("params" not in t.columns for t in tables)
    design = "envelope" if envelope else "runs"
    n_free = {"chinchilla": 5, "power": 3}[law_name] - len(fixed or {})
    budgets = sorted(set.intersection(*[set(t["budget"]) for t in tables]))
    cuts = []
    for b in budgets[:-1]:
        ok = all(int((t["budget"] <= b).sum()) >= 2 * n_free + 2
                 and t.loc[t["budget"] <= b, "budget"].nunique() >= 3 for t in tables)
        if ok:
            cuts.append(b)
    if not cuts:
        raise LadderError(f"no cut leaves every recipe {2 * n_free + 2} runs in 3 budgets at or "
                          f"below it and a larger budget to predict")
    if len(cuts) > max_cuts:
        cuts = [cuts[int(round(i))] for i in np.linspace(0, len(cuts) - 1, max_cuts)]
    rows = []
    method = None
    for b in cuts:
        cut = float(max(t.loc[t["budget"] == b, "flops"].max() for t in tables)) * (1 + 1e-9)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pp = _paired(ladders, names, law_name, fixed=fixed, bounds=None,
                             delta=fitting.DEFAULT_DELTA, fit_max_flops=cut,
                             shared_floor=shared_floor, pairing=pairing, n_boot=n_boot,
                             seed=seed, n_jobs=n_jobs, run_noise=run_noise,
                             shared_exponents=shared_exponents)
        except (FitError, LawError) as exc:
            notes.append(f"cut at {cut:.3g} FLOPs left out: {exc}")
            continue
        alt = _alternate(ladders, names, law_name, fixed=fixed, bounds=None,
                         delta=fitting.DEFAULT_DELTA, fit_max_flops=cut,
                         shared_floor=shared_floor, pairing=pairing, n_boot=n_boot, seed=seed,
                         n_jobs=n_jobs, run_noise=run_noise, shared_exponents=shared_exponents)
        if isinstance(alt, str):
            notes.append(f"cut at {cut:.3g} FLOPs: robust falls back on the observed "
                         f"difference: {alt}")
        targets = []   # (spec, observed loss per recipe)
        for big in [x for x in budgets if x > b]:
            sel = [t[t["budget"] == big] for t in tables]
            if envelope:
                c = float(np.median(sel[0]["flops"]))
                targets.append((_Spec(c), [float(s["loss"].min()) for s in sel]))
            else:
                common = set.intersection(*[set(s["size"]) for s in sel])
                for sz in sorted(common):
                    runs = [s[s["size"] == sz].iloc[0] for s in sel]
                    r0 = runs[0]
                    targets.append((_Spec(float(r0["flops"]), float(r0["params"]),
                                          float(r0["tokens"])),
                                    [float(r["loss"]) for r in runs]))
        base = [t[t["budget"] == b] for t in tables]
        upto = [t[t["flops"] <= cut] for t in tables]
        if method is None:
            method = pp.method
        for spec, obs in targets:
            for i in range(len(ladders)):
                for j in range(i + 1, len(ladders)):
                    try:
                        r = _compare_pair(pp, i, j, spec, level, seed)
                    except FitError as exc:
                        notes.append(f"cut at {cut:.3g} FLOPs, {names[j]} - {names[i]} at "
                                     f"{spec.label()} left out: {exc}")
                        continue
                    observed = obs[j] - obs[i]
                    if envelope:
                        baseline = float(base[j]["loss"].min() - base[i]["loss"].min())
                    else:
                        common = sorted(set(base[i]["size"]) & set(base[j]["size"]))
                        bi = base[i].set_index("size").loc[common, "loss"]
                        bj = base[j].set_index("size").loc[common, "loss"]
                        baseline = float((bj - bi).mean()) if common else float(
                            base[j]["loss"].min() - base[i]["loss"].min())
                    rules = _decide(pp, i, j, spec, level, seed, r,
                                    _anchor(upto, i, j, spec.by_compute, law_name), alt)
                    d = rules[decision]
                    row = {"cut": cut, "a": names[i], "b": names[j], "flops": spec.flops,
                           "params": spec.params, "tokens": spec.tokens,
                           "observed": observed, "decision": decision,
                           "predicted": d["loss"], "lower": d["lower"], "upper": d["upper"],
                           "inside": bool(d["lower"] <= observed <= d["upper"]),
                           "p_better": d["p_better"],
                           "correct": bool(np.sign(d["loss"]) == np.sign(observed)),
                           "baseline": baseline,
                           "baseline_correct": bool(np.sign(baseline) == np.sign(observed))}
                    for rule in DECISIONS:
                        v = rules[rule]
                        row[f"predicted_{rule}"] = v["loss"]
                        row[f"lower_{rule}"], row[f"upper_{rule}"] = v["lower"], v["upper"]
                        row[f"correct_{rule}"] = bool(np.sign(v["loss"]) == np.sign(observed))
                        row[f"inside_{rule}"] = bool(v["lower"] <= observed <= v["upper"])
                    anc = rules["anchor"]
                    row["anchor_flops"] = anc["flops"] if anc else None
                    row["change"] = anc["change"] if anc else None
                    row["change_counted"] = anc["counted"] if anc else None
                    rows.append(row)
    return RecipeBacktest(recipes=tuple(names), law=law_name, level=level, design=design,
                          rows=tuple(rows), notes=tuple(notes), warnings=tuple(warns),
                          decision=decision, run_noise=run_noise, method=method or "")
