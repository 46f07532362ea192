"""Planning a ladder: which small runs to train before a target run of C FLOPs.

:func:`plan_ladder` proposes an isoFLOP ladder below a target compute:

1. **Budgets**: ``K`` budgets log-spaced by a constant factor so the largest is ``span`` times
   the smallest (default 100, as Marin's dense ladder, 3e18..3e20 in 7 budgets), scaled so
   that the ladder's total compute is ``fraction`` x the target (every run of a budget costs
   the budget). Budgets are rounded to 2 significant digits.
2. **Centre**: the current estimate of N*(C) at each budget: from a tokens-per-parameter prior
   ``r`` (C = 6 N D and D = r N give N* = sqrt(C / (6 r)); default r = 20, Hoffmann et al.
   2022's Chinchilla), or from any callable C -> N* (e.g. a Chinchilla law fitted to an
   earlier ladder, :func:`optimum_from_allocation`, or an isoFLOP power law).
3. **Sizes**: ``M`` model sizes per budget, log-spaced over a factor ``spread`` in N centred
   on N* (default 10: N* / 3.16 .. N* x 3.16), each rounded to a width on a grid of 128 with
   the parameter count of :func:`transformer_params`::

       layers(d) = max(1, round(d / 100))      (aspect ratio d / layers ~ 100)
       N(d)      = 12 * layers(d) * d^2        (non-embedding parameters; Kaplan et al. 2020,
                                                §2.1: 4 d^2 attention + 8 d^2 MLP per layer)

   When rounding merges sizes, neighbouring widths on the grid are used instead (and said).
4. **Tokens and hyperparameters**: D = budget / (6 N); a run above ``max_tokens_per_param``
   (Marin caps its ladder at 250) is dropped and reported. Batch size, peak learning rate
   and steps come from the hyperparameter rule (``"adamh"``: :func:`delphi.rules.adamh_rule`).

The plan states its total compute as a share of the target's and the farthest extrapolation
(target C / largest budget), and writes a tidy CSV ready to run (:meth:`LadderPlan.to_frame`).

**An unidentified centre is flagged, not refused.** When N*(C) comes from a law fitted to an
earlier ladder that does not identify alpha or beta (:attr:`delphi.fitting.Fit.unidentified`),
the centre of every budget's sizes is one of many equally good guesses. The plan is still
made, with the flag (:attr:`LadderPlan.unidentified`, a warning, ``unidentified`` in the JSON):
a plan is a proposal for measuring the optimum, and an isoFLOP sweep locates it whatever its
centre, so a wrong centre costs efficiency (a vertex nearer the edge of the sizes), not a wrong
answer; the warning suggests a wider ``spread`` or the tokens-per-parameter prior.
(:func:`delphi.analyses.optimal.optimal_allocation`, whose answer *is* the split, refuses instead.)

**A centre outside the source ladder's design is flagged too.** When N*(C) comes from a law
fitted to an earlier ladder, the plan carries that law's outside-design findings at the target
(``outside``, e.g. :attr:`delphi.analyses.optimal.Allocation.outside`: D/N far beyond the fitted runs',
or N* shrinking with compute), and, given the source ladder's D/N range
(``design_tokens_per_param``), names every budget whose centre D*/N* = (C/6)/N*^2 lies more
than 10x beyond it. Both are listed first in the report (:attr:`LadderPlan.outside`,
``centre_outside_design`` in the JSON).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from ..core.records import jsonable, positive_number
from ..errors import LadderError
from ..inputs.ladder import FLOPS_PER_PARAM_TOKEN, check_target_value
from ..inputs.rules import adamh_rule

__all__ = ["PlannedRun", "LadderPlan", "plan_ladder", "transformer_params", "layers_for_width",
           "width_for_params", "optimum_from_allocation", "RULES", "CSV_COLUMNS", "WIDTH_STEP",
           "ASPECT_RATIO"]

#: Widths are multiples of this (Marin's ladder steps widths by 128).
WIDTH_STEP = 128
#: Target width / layers ratio of :func:`layers_for_width`.
ASPECT_RATIO = 100
#: Widths considered: WIDTH_STEP .. WIDTH_STEP * _MAX_WIDTH_STEPS.
_MAX_WIDTH_STEPS = 1024
# A centre D*/N* beyond this factor of the source ladder's D/N range is flagged.
_OUTSIDE_FACTOR = 10.0
#: Columns of the tidy CSV, in order (``width`` and ``layers`` follow, to build the model).
CSV_COLUMNS = ("run", "budget_flops", "params", "tokens", "tokens_per_param", "batch_size",
               "peak_lr", "steps")


def _hparams_adamh(tokens: float) -> dict[str, float]:
    s = adamh_rule(tokens)
    return {"batch_size": float(s.batch_tokens), "peak_lr": float(s.lr), "steps": int(s.steps)}


#: Hyperparameter rules by name: tokens -> {batch_size [tokens], peak_lr, steps}.
RULES: dict[str, Callable[[float], dict[str, float]]] = {"adamh": _hparams_adamh}


_jsonable = jsonable


# ------------------------------------------------------------------------------- model sizes
def layers_for_width(width: int) -> int:
    """Layers of a model of width ``width``: ``max(1, round(width / 100))`` (half rounds up).

    Marin's isoFLOP models use ``width / layers`` of 85..102 (d512-L6 .. d4096-L40).
    """
    return max(1, int(math.floor(width / ASPECT_RATIO + 0.5)))


def transformer_params(width: int) -> int:
    """Non-embedding parameters ``12 * layers * width^2`` (Kaplan et al. 2020, §2.1)."""
    return 12 * layers_for_width(width) * width * width


_WIDTHS = np.arange(1, _MAX_WIDTH_STEPS + 1) * WIDTH_STEP
_PARAMS = np.array([transformer_params(int(w)) for w in _WIDTHS], dtype=float)


def width_for_params(params: float) -> int:
    """The width on the 128 grid whose :func:`transformer_params` is closest in log to
    ``params``.

    Raises
    ------
    LadderError: ``params`` not positive and finite.
    """
    if not (math.isfinite(params) and params > 0):
        raise LadderError(f"model size must be a positive number of parameters, got {params!r}")
    return int(_WIDTHS[int(np.argmin(np.abs(np.log(_PARAMS) - math.log(params))))])


def optimum_from_allocation(G: float, a: float) -> Callable[[float], float]:
    """C -> N* = G (C/6)^a, the form of :class:`delphi.analyses.optimal.Allocation` (Hoffmann et al.
    2022, Eq. 4)."""
    return lambda c: float(G * (c / FLOPS_PER_PARAM_TOKEN) ** a)


# ------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class PlannedRun:
    """One run of a planned ladder."""

    run: str
    """Run id, e.g. ``"C1.1e+19-d1024-L10"``."""
    budget_flops: float
    """The budget [FLOPs]; 6 N D equals it up to token rounding."""
    params: int
    """N, non-embedding parameters (:func:`transformer_params`)."""
    tokens: int
    """D = budget / (6 N), rounded [tokens]."""
    width: int
    """Model width d (a multiple of 128)."""
    layers: int
    """Layers (:func:`layers_for_width`)."""
    batch_size: float
    """Batch size [tokens], from the hyperparameter rule."""
    peak_lr: float
    """Peak learning rate, from the hyperparameter rule."""
    steps: int
    """Optimiser steps, ceil(D / batch)."""

    @property
    def tokens_per_param(self) -> float:
        """D / N."""
        return self.tokens / self.params

    @property
    def flops(self) -> float:
        """6 N D [FLOPs]."""
        return FLOPS_PER_PARAM_TOKEN * self.params * self.tokens

    def to_dict(self) -> dict:
        """The CSV row (columns :data:`CSV_COLUMNS`, then ``width`` and ``layers``)."""
        return _jsonable({"run": self.run, "budget_flops": self.budget_flops,
                          "params": self.params, "tokens": self.tokens,
                          "tokens_per_param": self.tokens_per_param,
                          "batch_size": self.batch_size, "peak_lr": self.peak_lr,
                          "steps": self.steps, "width": self.width, "layers": self.layers})


@dataclass(frozen=True)
class LadderPlan:
    """A proposed ladder for a target compute (see :func:`plan_ladder`)."""

    target_flops: float
    """The target run's compute [FLOPs]."""
    fraction: float
    """Requested ladder compute as a share of the target's."""
    budgets: tuple[float, ...]
    """The budgets [FLOPs], ascending."""
    centres: tuple[float, ...]
    """N*(C) estimate at each budget [params]."""
    runs: tuple[PlannedRun, ...]
    """Every planned run, by budget then size."""
    rule: str
    """Hyperparameter rule name."""
    prior: str
    """How N*(C) was estimated, e.g. ``"20 tokens per parameter"``."""
    spread: float
    """Ratio of the largest to the smallest size wanted per budget."""
    span: float
    """Ratio of the largest to the smallest budget."""
    max_tokens_per_param: float | None = None
    """Cap on D / N (runs above it are dropped)."""
    warnings: tuple[str, ...] = ()
    """Merged sizes, dropped runs, tiny budgets..."""
    unidentified: dict[str, tuple[float, float]] | None = None
    """Parameters of the law behind ``optimum`` that its ladder does not identify -> their
    profile interval (the centres N*(C) are then uncertain guesses); None when none given."""
    outside: tuple[str, ...] = ()
    """Why the centres N*(C) lie outside the design of the ladder they were fitted to (see the
    module docstring); empty when inside or unknown."""

    @property
    def total_flops(self) -> float:
        """Sum of 6 N D over the runs [FLOPs]."""
        return float(sum(r.flops for r in self.runs))

    @property
    def share(self) -> float:
        """Ladder compute / target compute."""
        return self.total_flops / self.target_flops

    @property
    def extrapolation(self) -> float:
        """Target compute / largest budget: how far the fitted law must extrapolate."""
        return self.target_flops / max(self.budgets)

    def to_frame(self) -> pd.DataFrame:
        """The tidy table, one row per run: :data:`CSV_COLUMNS`, then ``width``, ``layers``."""
        rows = [r.to_dict() for r in self.runs]
        return pd.DataFrame(rows, columns=list(CSV_COLUMNS) + ["width", "layers"])

    def to_csv(self, path: str | Path) -> Path:
        """Write :meth:`to_frame` to ``path`` (CSV, no index); returns the path.

        Raises
        ------
        LadderError: the file cannot be written.
        """
        path = Path(path)
        try:
            self.to_frame().to_csv(path, index=False, float_format="%.6g")
        except OSError as exc:
            raise LadderError(f"cannot write the ladder plan to {path}: {exc}") from None
        return path

    def to_dict(self) -> dict:
        """JSON-ready summary with every run."""
        return _jsonable({
            "target_flops": self.target_flops, "fraction": self.fraction,
            "total_flops": self.total_flops, "share": self.share,
            "extrapolation": self.extrapolation, "budgets": self.budgets,
            "centres": self.centres, "rule": self.rule, "prior": self.prior,
            "spread": self.spread, "span": self.span,
            "max_tokens_per_param": self.max_tokens_per_param,
            "size_formula": "params = 12 * layers * width^2, layers = max(1, round(width/100)), "
                            "width a multiple of 128",
            "runs": [r.to_dict() for r in self.runs], "warnings": list(self.warnings),
            "centre_identified": not self.unidentified,
            "centre_outside_design": list(self.outside),
            "unidentified": {k: list(v) for k, v in (self.unidentified or {}).items()}})

    def report(self) -> str:
        """Readable plan: summary lines and a table of runs."""
        lines = [f"ladder plan for a target of {self.target_flops:.4g} FLOPs: {len(self.budgets)} "
                 f"budgets {min(self.budgets):.3g}..{max(self.budgets):.3g}, {len(self.runs)} runs",
                 f"compute    {self.total_flops:.4g} FLOPs = {self.share:.3%} of the target "
                 f"(asked {self.fraction:.3%})",
                 f"extrapol.  target / largest budget = {self.extrapolation:.3g}x",
                 f"centre     N*(C) from {self.prior}; sizes over a {self.spread:g}x range, "
                 f"widths in steps of {WIDTH_STEP}, N = 12 * layers * d^2, layers = round(d/100)",
                 f"hparams    rule {self.rule}"]
        lines += [f"OUTSIDE    {w}" for w in self.outside]
        lines += [f"{'run':<24} {'budget':>9} {'params':>10} {'tokens':>10} {'D/N':>7} "
                 f"{'batch':>8} {'peak_lr':>9} {'steps':>7}"]
        for r in self.runs:
            lines.append(f"{r.run:<24} {r.budget_flops:>9.3g} {r.params:>10.4g} "
                         f"{r.tokens:>10.4g} {r.tokens_per_param:>7.1f} {r.batch_size:>8.4g} "
                         f"{r.peak_lr:>9.3g} {r.steps:>7d}")
        lines += [f"warning    {w}" for w in self.warnings if w not in self.outside]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


# ------------------------------------------------------------------------------- planning
def _round_sig(x: float, digits: int = 2) -> float:
    return float(f"{x:.{digits - 1}e}")


def _positive(name: str, value: Any, error: type[Exception] = LadderError) -> float:
    return positive_number(value, f"{name} must be a positive number", error)


def _count(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or int(value) != value or value < minimum:
        raise LadderError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _widths(centre: float, m: int, spread: float) -> tuple[list[int], bool]:
    """m distinct grid widths around N* = ``centre``: log-spaced sizes over ``spread``, each
    rounded to the nearest width; when rounding merges them, m consecutive grid widths centred
    on the centre's width. Returns (widths, widened)."""
    if m == 1:
        return [width_for_params(centre)], False
    wanted = centre * spread ** (np.linspace(-0.5, 0.5, m))
    widths = sorted({width_for_params(float(n)) for n in wanted})
    if len(widths) == m:
        return widths, False
    k = int(np.flatnonzero(_WIDTHS == width_for_params(centre))[0])
    lo = min(max(k - (m - 1) // 2, 0), len(_WIDTHS) - m)
    return [int(w) for w in _WIDTHS[lo:lo + m]], True


def plan_ladder(target_flops: float, *, fraction: float = 0.01, budgets: int = 7,
                sizes_per_budget: int = 5, rule: str = "adamh", tokens_per_param: float = 20.0,
                optimum: Callable[[float], float] | None = None, prior: str | None = None,
                max_tokens_per_param: float | None = None, span: float = 100.0,
                spread: float = 10.0,
                unidentified: dict[str, tuple[float, float]] | None = None,
                outside: tuple[str, ...] | list[str] = (),
                design_tokens_per_param: tuple[float, float] | None = None) -> LadderPlan:
    """Propose an isoFLOP ladder of ``budgets`` x ``sizes_per_budget`` runs below a target.

    Parameters
    ----------
    target_flops:
        The target run's compute C [FLOPs].
    fraction:
        The ladder's total compute as a share of the target's, in (0, 1) (default 1%).
    budgets:
        Number of budgets K (log-spaced; the largest is ``span`` x the smallest).
    sizes_per_budget:
        Model sizes M per budget (at least 3 for a parabola to have a vertex).
    rule:
        Hyperparameter rule, a key of :data:`RULES` (``"adamh"``: Marin's AdamH recipe).
    tokens_per_param:
        Prior D*/N* used when ``optimum`` is not given (default 20, Hoffmann et al. 2022).
    optimum:
        Callable C [FLOPs] -> N*(C) [params], e.g. :func:`optimum_from_allocation` of a law
        fitted to an earlier ladder; overrides ``tokens_per_param``.
    prior:
        Text describing ``optimum`` for the report.
    max_tokens_per_param:
        Drop runs with D / N above this (Marin's dense ladder: 250).
    span:
        Largest / smallest budget (default 100, as 3e18..3e20); ignored when ``budgets`` is 1.
    spread:
        Largest / smallest model size wanted per budget (default 10).
    unidentified:
        Parameters of the law behind ``optimum`` that its ladder does not identify -> their
        profile interval (e.g. ``Allocation.unidentified``): the plan is made and flagged (see
        the module docstring for why it is not refused).
    outside:
        Why the law behind ``optimum`` is outside its ladder's design at the target (e.g.
        ``Allocation.outside``); carried into the plan as flags.
    design_tokens_per_param:
        (min, max) D/N of the runs that law was fitted to (``Allocation.design``); a budget
        whose centre D*/N* = (C/6)/N*^2 lies more than 10x beyond it is flagged.

    Returns
    -------
    LadderPlan

    Raises
    ------
    TargetError: ``target_flops`` not positive and finite, or outside 1..1e40 FLOPs.
    LadderError: ``fraction`` outside (0, 1), a count below its minimum, an unknown rule, a
        non-positive ``span``/``spread``/``tokens_per_param``/cap, an ``optimum`` that returns
        a non-positive size, or no run left after the tokens-per-parameter cap.
    """
    target = check_target_value("flops", target_flops)   # as for a forecast's target
    fraction = _positive("fraction (ladder compute / target compute)", fraction)
    if not fraction < 1:
        raise LadderError(f"fraction (ladder compute / target compute) must be in (0, 1), got "
                          f"{fraction!r}")
    k = _count("budgets", budgets, 1)
    m = _count("sizes per budget", sizes_per_budget, 1)
    if rule not in RULES:
        raise LadderError(f"unknown hyperparameter rule {rule!r}; known: {', '.join(RULES)}")
    span = _positive("span (largest / smallest budget)", span)
    spread = _positive("spread (largest / smallest size per budget)", spread)
    if span < 1 or spread < 1:
        raise LadderError(f"span and spread are ratios >= 1, got span={span:g}, spread={spread:g}")
    cap = None if max_tokens_per_param is None else _positive(
        "max tokens per parameter", max_tokens_per_param)
    if optimum is None:
        r = _positive("tokens per parameter", tokens_per_param)
        optimum = lambda c: math.sqrt(c / (FLOPS_PER_PARAM_TOKEN * r))  # noqa: E731
        prior = f"a prior of {r:g} tokens per parameter (N* = sqrt(C / (6 x {r:g})))"
    prior = prior or "a given N*(C)"

    warnings_: list[str] = []
    if unidentified:
        which = ", ".join(f"{k} in [{lo:.3g}, {hi:.3g}]" for k, (lo, hi) in unidentified.items())
        warnings_.append(f"the centre N*(C) comes from a law whose ladder does not identify "
                         f"{which}: the centres are one guess among many equally good ones; "
                         f"widen --spread or centre on --tokens-per-param instead")
    if m < 3:
        warnings_.append(f"{m} size(s) per budget: a parabola needs at least 3 to have a vertex")
    ratio = span ** (1.0 / (k - 1)) if k > 1 else 1.0
    rel = ratio ** (np.arange(k) - (k - 1))                  # C_k / C_max, ascending
    c_max = fraction * target / (m * float(rel.sum()))
    values = [_round_sig(c_max * x) for x in rel]
    if len(set(values)) < len(values):
        raise LadderError(f"{k} budgets over a span of {span:g} round to repeated values; use "
                          f"fewer budgets or a larger span")

    flags = [f"the centre law at the target: {w}" for w in outside]
    runs: list[PlannedRun] = []
    centres = []
    hp = RULES[rule]
    for c in values:
        n_star = float(optimum(c))
        if not (math.isfinite(n_star) and n_star > 0):
            raise LadderError(f"budget C={c:.3g}: the N*(C) estimate is {n_star!r}, not a "
                              f"positive number of parameters")
        centres.append(n_star)
        if design_tokens_per_param is not None:
            lo, hi = design_tokens_per_param
            r = c / (FLOPS_PER_PARAM_TOKEN * n_star ** 2)
            factor = r / hi if r > hi else (lo / r if r < lo else 1.0)
            if factor > _OUTSIDE_FACTOR:
                flags.append(f"budget C={c:.3g}: centre D*/N* = {r:.3g} is {factor:.3g}x "
                             f"{'above' if r > hi else 'below'} the source ladder's D/N "
                             f"{lo:.3g}..{hi:.3g}")
        widths, widened = _widths(n_star, m, spread)
        if widened:
            warnings_.append(f"budget C={c:.3g}: sizes {spread:g}x apart round to fewer than "
                             f"{m} widths on the {WIDTH_STEP} grid; used {m} consecutive widths "
                             f"{widths[0]}..{widths[-1]} instead")
        if n_star < _PARAMS[0]:
            warnings_.append(f"budget C={c:.3g}: N* ~ {n_star:.3g} is below the smallest model "
                             f"on the grid (width {WIDTH_STEP}, {int(_PARAMS[0])} params)")
        for w in widths:
            n = transformer_params(w)
            d = int(round(c / (FLOPS_PER_PARAM_TOKEN * n)))
            name = f"C{c:.2g}-d{w}-L{layers_for_width(w)}"
            if cap is not None and d / n > cap:
                warnings_.append(f"run {name}: {d / n:.0f} tokens per parameter exceeds the cap "
                                 f"of {cap:g}; dropped")
                continue
            if d < 1:
                warnings_.append(f"run {name}: less than one token; dropped")
                continue
            h = hp(float(d))
            runs.append(PlannedRun(run=name, budget_flops=c, params=n, tokens=d, width=w,
                                   layers=layers_for_width(w), batch_size=h["batch_size"],
                                   peak_lr=h["peak_lr"], steps=int(h["steps"])))
    if not runs:
        raise LadderError("no run is left in the plan after the tokens-per-parameter cap")
    per_budget = {c: sum(r.budget_flops == c for r in runs) for c in values}
    thin = [f"C={c:.3g} ({n})" for c, n in per_budget.items() if n < min(3, m)]
    if thin:
        warnings_.append(f"budgets with fewer than 3 runs cannot locate an optimum: "
                         f"{', '.join(thin)}")
    return LadderPlan(target_flops=target, fraction=float(fraction), budgets=tuple(values),
                      centres=tuple(centres), runs=tuple(runs), rule=rule, prior=prior,
                      spread=spread, span=span if k > 1 else 1.0, max_tokens_per_param=cap,
                      warnings=tuple(flags + warnings_), outside=tuple(flags),
                      unidentified={str(name): (float(lo), float(hi))
                                    for name, (lo, hi) in unidentified.items()}
                      if unidentified else None)
