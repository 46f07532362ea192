"""Compute-optimal allocation from a fitted Chinchilla law (Hoffmann et al. 2022, Eq. 4).

For L(N, D) = E + A/N^alpha + B/D^beta and C = 6 N D, minimising L at fixed C gives

    N_opt(C) = G (C/6)^a,   D_opt(C) = G^-1 (C/6)^b,
    G = (alpha A / (beta B))^(1 / (alpha + beta)),   a = beta / (alpha + beta),   b = alpha / (alpha + beta)

(Hoffmann et al. 2022, arXiv 2203.15556, Eq. 4; D_opt = (C/6) / N_opt). The tokens per
parameter at C are D_opt / N_opt = G^-2 (C/6)^(b - a).

:func:`optimal_allocation` takes the law's parameters (a :class:`~delphi.fitting.Fit` or a
mapping) and, optionally, *draws* of them (bootstrap or posterior samples, e.g. from
``delphi.uncertainty``): each draw gives its own N_opt, D_opt, D/N at the target, and the
allocation reports their percentile intervals. :func:`compute_optimal` fits the law to a
ladder first.

**Unidentified split.** N_opt, D_opt and D/N rest on how the loss splits between the N and D
terms: the exponent a = beta / (alpha + beta) and G are ratios of the two terms' parameters.
When the fitted ladder does not identify alpha or beta (their profile-likelihood interval
reaches the end of the admissible range, :attr:`Fit.unidentified`), equally good fits give
N_opt differing by orders of magnitude at an extrapolated budget, so a single number would be
arbitrary: the allocation is **refused** (:class:`~delphi.fitting.diagnostics.UnidentifiedError`,
naming the parameter and its range) unless ``allow_unidentified=True``
(``--allow-unidentified``), and then the allocation carries the flag
(:attr:`Allocation.unidentified`, in the report and the JSON). The floor E does not enter the
allocation, so an unidentified E is not a reason to refuse.

**Outside the ladder's design.** A law fitted to a ladder says little about allocations the
ladder never tried. With a :class:`~delphi.fitting.Fit`, the allocation is compared with the
fitted runs (:attr:`Allocation.design`):

* *D/N*: D_opt/N_opt more than 10x above the largest or below the smallest tokens per
  parameter among the fitted runs is flagged (:attr:`Allocation.outside`, report, JSON);
* *N_opt shrinking with compute*: at a budget above the ladder's largest, N_opt below the size of the ladder's
  best (lowest-loss) run of its largest budget (the ladder's own estimate of N* there; runs
  within 5% of the largest compute form that budget) means the law says N* shrinks with
  compute, which the ladder's runs contradict; flagged.

The extreme case is **refused** (:class:`~delphi.errors.TargetError`) unless
``allow_outside=True`` (``--allow-outside-design``): D/N more than 100x beyond the fitted
range, or a shrinking N* at 10x or more the ladder's largest compute. The report also gives
the ladder's own N* trend: the exponent of N against C over its best run per budget (a
least-squares line in log-log, over at least 3 budgets), to compare with a = beta/(alpha+beta).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..core.quantiles import check_level
from ..core.records import jsonable, positive_number
from ..core.text import level_percent
from ..errors import FitError, FitWarning, LawError, TargetError, option, user_stacklevel
from ..inputs.ladder import FLOPS_PER_PARAM_TOKEN, Ladder
from ..forecasting.uncertainty import MAX_DRAWS, BootstrapDraws, bootstrap
from ..fitting.result import Fit
from ..fitting.diagnostics import require_identified
from ..fitting import fit

__all__ = ["Allocation", "chinchilla_optimum", "optimal_allocation", "compute_optimal",
           "draws_to_arrays", "ladder_design", "REQUIRED_PARAMS", "SPLIT_PARAMS",
           "OUTSIDE_FLAG", "OUTSIDE_REFUSE"]

#: Parameters of the Chinchilla law that fix the allocation (E does not).
REQUIRED_PARAMS = ("A", "B", "alpha", "beta")
#: The exponents profiled by :func:`delphi.fitting.diagnostics.identify` that the split rests on.
SPLIT_PARAMS = ("alpha", "beta")
#: D/N beyond this factor of the fitted runs' range is flagged ...
OUTSIDE_FLAG = 10.0
#: ... and beyond this one refused (also: N* shrinking at this many times the largest compute).
OUTSIDE_REFUSE = 100.0
_REFUSE_GROWTH = 10.0
#: Bootstrap draws of :func:`compute_optimal` by default (as ``delphi predict``), and the fewest
#: it accepts (a percentile interval from fewer is mostly Monte-Carlo noise).
DEFAULT_BOOT = 200
MIN_BOOT = 20
# Runs within this factor of the largest compute form the ladder's largest budget.
_BUDGET_TOLERANCE = 1.05


_jsonable = jsonable


def _check_flops(flops: float) -> float:
    return positive_number(flops, "target compute must be a positive number of FLOPs",
                           TargetError)


def _law_params(params: Mapping[str, float]) -> dict[str, float]:
    missing = [p for p in REQUIRED_PARAMS if p not in params]
    if missing:
        raise LawError(f"a compute-optimal allocation needs the Chinchilla parameters "
                       f"{', '.join(REQUIRED_PARAMS)}; missing {', '.join(missing)} (got "
                       f"{', '.join(map(str, params)) or 'none'})")
    out = {p: float(params[p]) for p in REQUIRED_PARAMS}
    bad = [f"{p} = {v:g}" for p, v in out.items() if not (math.isfinite(v) and v > 0)]
    if bad:
        raise FitError(f"no compute-optimal allocation: {', '.join(bad)} (A, B, alpha and beta "
                       f"must be positive: with a zero term or exponent the loss does not trade "
                       f"N against D)")
    return out


def chinchilla_optimum(params: Mapping[str, float],
                       flops: float | Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """N_opt and D_opt at compute ``flops`` for a Chinchilla law (Hoffmann et al. 2022, Eq. 4).

    Parameters
    ----------
    params:
        ``A``, ``B``, ``alpha``, ``beta`` (``E`` is ignored), all positive.
    flops:
        Compute C [FLOPs], scalar or array of any shape.

    Returns
    -------
    (N_opt [params], D_opt [tokens]), arrays shaped like ``np.asarray(flops)``;
    6 N_opt D_opt = C exactly.

    Raises
    ------
    LawError: a required parameter is missing.
    FitError: a parameter is not positive and finite.
    TargetError: a compute value is not positive and finite.
    """
    p = _law_params(params)
    c = np.asarray(flops, dtype=float)
    if not (np.all(np.isfinite(c)) and np.all(c > 0)):
        raise TargetError(f"compute must be positive and finite [FLOPs], got {flops!r}")
    s = p["alpha"] + p["beta"]
    log_g = (math.log(p["alpha"] * p["A"]) - math.log(p["beta"] * p["B"])) / s
    log_c6 = np.log(c / FLOPS_PER_PARAM_TOKEN)
    n = np.exp(log_g + (p["beta"] / s) * log_c6)
    return n, np.exp(log_c6) / n


def draws_to_arrays(draws: Any) -> dict[str, np.ndarray]:
    """Parameter draws as ``{name: array of shape (n_draws,)}``.

    Accepts the draws of :func:`delphi.bootstrap` (a
    :class:`~delphi.uncertainty.BootstrapDraws`: its ``params``), a sequence of mappings (one
    per draw), a mapping of name to a 1-D array, or a :class:`pandas.DataFrame` with one
    column per parameter.

    Raises
    ------
    FitError: empty draws, ragged arrays, or draws that are not numbers.
    """

    if isinstance(draws, BootstrapDraws):
        draws = draws.params
    if isinstance(draws, pd.DataFrame):
        out = {str(c): draws[c].to_numpy(float) for c in draws.columns}
    elif isinstance(draws, Mapping):
        out = {str(k): np.asarray(v, dtype=float).reshape(-1) for k, v in draws.items()}
    else:
        rows = list(draws)
        if not rows:
            raise FitError("no parameter draws given")
        if not all(isinstance(r, Mapping) for r in rows):
            raise FitError("parameter draws must be mappings name -> value (one per draw), a "
                           "mapping name -> array, or a DataFrame")
        names = sorted({k for r in rows for k in r})
        out = {k: np.array([float(r.get(k, math.nan)) for r in rows]) for k in names}
    sizes = {v.size for v in out.values()}
    if not out or sizes == {0}:
        raise FitError("no parameter draws given")
    if len(sizes) != 1:
        raise FitError(f"parameter draws have different lengths: "
                       f"{ {k: v.size for k, v in out.items()} }")
    return out


@dataclass(frozen=True)
class Allocation:
    """The compute-optimal model size and token count at one compute budget.

    ``print(allocation)`` gives a short report; :meth:`to_dict` the JSON form.
    """

    flops: float
    """Target compute C [FLOPs]."""
    params: float
    """N_opt [params]."""
    tokens: float
    """D_opt [tokens]."""
    G: float
    """Prefactor of N_opt = G (C/6)^a [params / (FLOPs/6)^a]."""
    a: float
    """Exponent of N_opt in C, beta / (alpha + beta)."""
    b: float
    """Exponent of D_opt in C, alpha / (alpha + beta)."""
    law_params: dict[str, float]
    """The law's point parameters used (A, B, alpha, beta, and E when given)."""
    intervals: dict[str, tuple[float, float]] | None = None
    """Percentile intervals from draws: keys ``params``, ``tokens``, ``tokens_per_param``,
    ``a``; ``None`` without draws."""
    medians: dict[str, float] | None = None
    """Medians of the draws, same keys."""
    level: float | None = None
    """Level of the intervals (e.g. 0.9)."""
    n_draws: int = 0
    """Draws given."""
    n_invalid: int = 0
    """Draws left out (missing, non-positive or non-finite parameters)."""
    source: str = ""
    """Where the law came from (ladder name, law)."""
    max_flops: float | None = None
    """Largest compute among the fitted runs [FLOPs], when known."""
    warnings: tuple[str, ...] = ()
    """Everything the user should know (extrapolation, invalid draws...)."""
    unidentified: dict[str, tuple[float, float]] | None = None
    """Split parameters (alpha, beta) the fitted ladder does not identify -> their profile
    interval; only set when the allocation was asked for anyway (``allow_unidentified``): the
    N_opt, D_opt and D/N above are then one of many equally good answers. None or empty when
    the split is identified (or the law came as bare parameters)."""
    design: dict | None = None
    """The fitted runs' design (from a Fit): ``tokens_per_param`` (min, max) of the fitted runs,
    ``ref_params``/``ref_flops`` (the best run of the largest budget), ``ladder_exponent`` (N
    against C over the best run per budget, or None with under 3 budgets) and ``factor`` (how
    far D_opt/N_opt lies beyond the D/N range, 1 inside it). None for bare parameters."""
    outside: tuple[str, ...] = ()
    """Why the allocation lies outside the ladder's design (empty when inside; see the module
    docstring); only non-empty past the refusal threshold when ``allow_outside`` was given."""
    interval_source: str = ""
    """Where the draws behind :attr:`intervals` came from (e.g. ``"bootstrap: 200 refits of
    resampled runs, seed 0"`` or ``"parameter draws given"``); empty without intervals."""
    no_interval_reason: str = ""
    """Why :attr:`intervals` is None (no draws given, bootstrap off, too few runs to bootstrap,
    the bootstrap failed, or every draw gave the same allocation); empty with intervals."""

    @property
    def tokens_per_param(self) -> float:
        """D_opt / N_opt."""
        return self.tokens / self.params

    @property
    def extrapolation(self) -> float | None:
        """Target compute over the largest fitted run's compute (None when unknown)."""
        return self.flops / self.max_flops if self.max_flops else None

    def to_dict(self) -> dict:
        """JSON-ready fields."""
        return _jsonable({
            "flops": self.flops, "params": self.params, "tokens": self.tokens,
            "tokens_per_param": self.tokens_per_param,
            "allocation_law": {"G": self.G, "a": self.a, "b": self.b,
                               "formula": "N_opt = G (C/6)^a, D_opt = (C/6) / N_opt"},
            "law_params": self.law_params, "intervals": self.intervals,
            "medians": self.medians, "level": self.level, "n_draws": self.n_draws,
            "n_invalid": self.n_invalid, "source": self.source, "max_flops": self.max_flops,
            "extrapolation": self.extrapolation, "warnings": list(self.warnings),
            "identified": not self.unidentified,
            "unidentified": {k: list(v) for k, v in (self.unidentified or {}).items()},
            "design": self.design, "outside_design": list(self.outside),
            "interval_source": self.interval_source or None,
            "no_interval_reason": self.no_interval_reason or None})

    def report(self) -> str:
        """Readable multi-line report."""
        def iv(key: str) -> str:
            if not self.intervals or key not in self.intervals:
                return ""
            lo, hi = self.intervals[key]
            return f"   {level_percent(self.level)} interval [{lo:.4g}, {hi:.4g}]"

        lines = [f"compute-optimal allocation at C = {self.flops:.4g} FLOPs "
                 f"(Hoffmann et al. 2022, Eq. 4)" + (f" from {self.source}" if self.source else "")]
        if self.unidentified:
            which = ", ".join(f"{k} in [{lo:.3g}, {hi:.3g}]"
                              for k, (lo, hi) in self.unidentified.items())
            lines.append(f"UNIDENTIFIED split: the ladder does not identify {which}; N_opt, "
                         f"D_opt and D/N below are arbitrary within that range")
        if self.outside:
            lines.append("OUTSIDE THE LADDER'S DESIGN: N_opt, D_opt and D/N below are "
                         "extrapolated beyond the fitted runs (see the warnings)")
        lines += [f"N_opt      {self.params:.4g} params{iv('params')}",
                  f"D_opt      {self.tokens:.4g} tokens{iv('tokens')}",
                  f"D/N        {self.tokens_per_param:.4g} tokens per parameter"
                  f"{iv('tokens_per_param')}",
                  f"law        N_opt = {self.G:.4g} (C/6)^{self.a:.4f}, D_opt = (C/6)/N_opt "
                  f"(a = beta/(alpha+beta){iv('a')})"]
        if self.intervals:
            lines.append(f"draws      {self.n_draws - self.n_invalid} of {self.n_draws} used"
                         + (f" ({self.interval_source})" if self.interval_source else ""))
        elif self.no_interval_reason:
            lines.append(f"interval   none: {self.no_interval_reason}")
        if self.extrapolation is not None:
            lines.append(f"extrapol.  {self.extrapolation:.3g}x the largest fitted run's compute")
        if self.design:
            lo, hi = self.design["tokens_per_param"]
            trend = self.design.get("ladder_exponent")
            lines.append(f"design     fitted runs' D/N {lo:.3g}..{hi:.3g}"
                         + (f"; its best run per budget grows as N ~ C^{trend:.3f}"
                            if trend is not None else ""))
        lines += [f"warning    {w}" for w in self.warnings]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _split_check(fit_or_params: Any, allow: bool) -> dict[str, tuple[float, float]]:
    """Split parameters a Fit's ladder does not identify -> their profile interval.

    Raises
    ------
    UnidentifiedError: there are some and ``allow`` is False.
    """

    if not isinstance(fit_or_params, Fit):
        return {}
    if not allow:
        require_identified(fit_or_params, SPLIT_PARAMS,
                           "the compute-optimal allocation (N_opt, D_opt, D/N)",
                           f"pass {option('allow_unidentified=True', '--allow-unidentified')} "
                           f"to get it anyway, flagged")
    return {k: v for k, v in fit_or_params.unidentified.items() if k in SPLIT_PARAMS}


def ladder_design(fit: Any, run_flops: Mapping[str, float] | None = None) -> dict | None:
    """The design of the runs a Chinchilla :class:`~delphi.fitting.Fit` was fitted to.

    ``run_flops`` maps a fitted run's label to its compute as the ladder counts it [FLOPs];
    runs missing from it (or all, when None) count 6·N·D. Budgets are runs within 5% in
    compute.

    Returns ``{"tokens_per_param": (min, max) of D/N, "ref_params": N of the lowest-loss run
    of the largest budget, "ref_flops": the largest compute [FLOPs], "ladder_exponent": slope
    of ln N on ln C over the lowest-loss run of each budget (None with fewer than 3
    budgets)}``, or None when the fit has no ``params``/``tokens`` points.
    """
    x = getattr(fit, "x", None) or {}
    if "params" not in x or "tokens" not in x:
        return None
    n = np.asarray(x["params"], float)
    d = np.asarray(x["tokens"], float)
    y = np.asarray(fit.y, float)
    c = FLOPS_PER_PARAM_TOKEN * n * d
    if run_flops:
        given = np.array([float(run_flops.get(str(r), math.nan)) for r in fit.labels])
        c = np.where(np.isfinite(given) & (given > 0), given, c)
    ok = np.isfinite(n) & np.isfinite(d) & (n > 0) & (d > 0) & np.isfinite(y) & np.isfinite(c)
    n, d, y, c = n[ok], d[ok], y[ok], c[ok]
    if not n.size:
        return None
    top = c >= c.max() / _BUDGET_TOLERANCE
    ref = int(np.flatnonzero(top)[np.argmin(y[top])])
    # Best run of each budget (runs within 5% of the budget's smallest compute).
    order = np.argsort(c, kind="mergesort")
    best_n, best_c, start = [], [], 0
    while start < order.size:
        end = start
        while end < order.size and c[order[end]] <= c[order[start]] * _BUDGET_TOLERANCE:
            end += 1
        members = order[start:end]
        i = int(members[np.argmin(y[members])])
        best_n.append(n[i])
        best_c.append(c[i])
        start = end
    slope = None
    if len(best_c) >= 3:
        slope = float(np.polyfit(np.log(best_c), np.log(best_n), 1)[0])
    return {"tokens_per_param": (float((d / n).min()), float((d / n).max())),
            "ref_params": float(n[ref]), "ref_flops": float(c.max()), "ladder_exponent": slope}


def _outside_design(design: dict | None, flops: float, n_opt: float, d_opt: float,
                    max_flops: float | None, a: float) -> tuple[list[str], bool, float]:
    """(reasons the allocation lies outside the design, whether it is extreme, D/N factor)."""
    if not design:
        return [], False, 1.0
    lo, hi = design["tokens_per_param"]
    r = d_opt / n_opt
    factor = r / hi if r > hi else (lo / r if r < lo else 1.0)
    reasons, extreme = [], False
    if factor > OUTSIDE_FLAG:
        reasons.append(f"D_opt/N_opt = {r:.3g} tokens per parameter is {factor:.3g}x "
                       f"{'above' if r > hi else 'below'} the fitted runs' range {lo:.3g}..{hi:.3g}")
        extreme = factor > OUTSIDE_REFUSE
    c_max = max_flops or design["ref_flops"]
    growth = flops / c_max
    if growth > 1 and n_opt < design["ref_params"]:
        trend = design.get("ladder_exponent")
        reasons.append(f"N_opt = {n_opt:.3g} at {growth:.3g}x the ladder's largest compute is "
                       f"below the size of its best run at that budget ({design['ref_params']:.3g}"
                       f"): the law makes N* shrink with compute (N_opt ~ C^{a:.3f}"
                       + (f"; the ladder's best runs grow as N ~ C^{trend:.3f})" if trend
                          is not None else ")"))
        extreme = extreme or growth >= _REFUSE_GROWTH
    return reasons, extreme, factor


def _fit_params(fit_or_params: Any) -> tuple[dict[str, float], str, float | None, tuple[str, ...]]:
    """(params, source, max_flops, warnings) from a Fit or a mapping."""

    if isinstance(fit_or_params, Fit):
        f = fit_or_params
        if not all(p in f.params for p in REQUIRED_PARAMS):
            raise LawError(f"a compute-optimal allocation needs a Chinchilla law (L = E + A/N^alpha "
                           f"+ B/D^beta); got law {f.law.name!r}")
        source = f"law {f.law.name}" + (f" fitted to {f.extra['ladder']}" if f.extra.get("ladder") else "")
        fit_warnings = tuple(f"fit: {w}" for w in f.warnings)
        if not f.converged:
            fit_warnings += ("fit: the law's fit did not converge",)
        return dict(f.params), source, f.extra.get("max_flops"), fit_warnings
    if isinstance(fit_or_params, Mapping):
        return {str(k): float(v) for k, v in fit_or_params.items()}, "", None, ()
    raise LawError(f"expected a Fit or a mapping of Chinchilla parameters, got "
                   f"{type(fit_or_params).__name__}")


def optimal_allocation(fit_or_params: Any, flops: float, *, draws: Any = None,
                       level: float = 0.9, max_flops: float | None = None,
                       allow_unidentified: bool = False,
                       allow_outside: bool = False,
                       run_flops: Mapping[str, float] | None = None) -> Allocation:
    """The compute-optimal N_opt, D_opt and tokens per parameter at ``flops``.

    Parameters
    ----------
    fit_or_params:
        A :class:`~delphi.fitting.Fit` of the ``chinchilla`` law, or a mapping with ``A``,
        ``B``, ``alpha``, ``beta`` (Hoffmann et al. 2022, Eq. 2).
    flops:
        Target compute C [FLOPs].
    draws:
        Optional parameter draws (see :func:`draws_to_arrays`): each gives its own N_opt,
        D_opt, D/N and exponent a, summarised by medians and percentile intervals. Draws with
        a missing, non-positive or non-finite A, B, alpha or beta are left out and counted.
    level:
        Level of the percentile intervals, in (0, 1).
    max_flops:
        Largest compute among the runs the law was fitted to [FLOPs] (taken from the Fit when
        it records it); the report states the extrapolation factor.
    allow_unidentified:
        Return the allocation even when the Fit's ladder does not identify alpha or beta (see
        the module docstring), flagged in :attr:`Allocation.unidentified` and its warnings.
    allow_outside:
        Return the allocation even when it lies far outside the fitted ladder's design (D/N
        over 100x beyond the fitted runs' range, or N* shrinking at 10x the largest compute;
        see the module docstring), flagged in :attr:`Allocation.outside`. Milder cases (over
        10x, or any shrinking N*) are always flagged, never refused.
    run_flops:
        Compute of each fitted run by label [FLOPs], as the ladder counts it, to group the
        runs into budgets for the design check (default 6·N·D; see :func:`ladder_design`).

    Returns
    -------
    Allocation

    Raises
    ------
    UnidentifiedError: (an :class:`~delphi.errors.IdentifiabilityError`) the Fit's ladder does
        not identify alpha or beta, and ``allow_unidentified`` is False.
    LawError: not a Chinchilla law, or parameters missing.
    FitError: a point parameter is not positive; ``level`` outside (0, 1); malformed draws;
        fewer than 2 valid draws.
    TargetError: ``flops`` not positive and finite; or the allocation lies far outside the
        fitted ladder's design and ``allow_outside`` is False.
    """
    c = _check_flops(flops)
    params, source, fit_max, warnings_ = _fit_params(fit_or_params)
    unidentified = _split_check(fit_or_params, allow_unidentified)
    p = _law_params(params)
    n, d = chinchilla_optimum(p, c)
    s = p["alpha"] + p["beta"]
    g = math.exp((math.log(p["alpha"] * p["A"]) - math.log(p["beta"] * p["B"])) / s)
    law_params = dict(p)
    if "E" in params:
        law_params["E"] = float(params["E"])
    max_flops = max_flops if max_flops is not None else fit_max
    warnings_ = list(warnings_)
    if unidentified:
        warnings_.append(f"allocation given on request "
                         f"({option('allow_unidentified=True', '--allow-unidentified')}) "
                         f"although the ladder "
                         f"does not identify {', '.join(unidentified)}: N_opt, D_opt and D/N are "
                         f"one of many equally good answers")
    intervals = medians = None
    n_draws = n_invalid = 0
    reason = "no parameter draws given (pass draws, e.g. delphi.bootstrap(fit); " \
             "compute_optimal bootstraps by default)"
    if draws is not None:
        intervals, medians, n_draws, n_invalid, reason, notes = _draw_intervals(draws, c, level)
        warnings_ += notes
    if max_flops:
        ratio = c / max_flops
        if ratio > 1e3:
            warnings_.append(f"the target is {ratio:.3g}x the largest fitted run's compute: "
                             f"far outside the ladder")
    min_flops = (fit_or_params.extra.get("min_flops") if isinstance(fit_or_params, Fit)
                 else None)
    if min_flops and c < min_flops:
        # as predict says it (h120's F21): below the ladder nothing was measured either
        warnings_.append(f"the target's compute {c:.3g} is {min_flops / c:.3g}x below the "
                         f"smallest fitted run's ({min_flops:.3g}): the law is extrapolated "
                         f"downwards, and N_opt, D_opt with it")

    design = (ladder_design(fit_or_params, run_flops) if isinstance(fit_or_params, Fit)
              else None)
    outside, extreme, factor = _outside_design(design, c, float(n), float(d), max_flops,
                                               p["beta"] / s)
    if design is not None:
        design = {**design, "factor": factor}
    if extreme and not allow_outside:
        raise TargetError(f"no compute-optimal allocation at C = {c:.4g} FLOPs from {source}: "
                          f"it lies far outside the ladder's design ({'; '.join(outside)}), so "
                          f"the law's N/D split is extrapolated beyond anything the ladder "
                          f"measured; pass "
                          f"{option('allow_outside=True', '--allow-outside-design')} to get it "
                          f"anyway, flagged")
    for w in outside:
        warnings_.append(f"outside the ladder's design: {w}")
        warnings.warn(FitWarning(warnings_[-1]), stacklevel=user_stacklevel())
    return Allocation(flops=c, params=float(n), tokens=float(d), G=g, a=p["beta"] / s,
                      b=p["alpha"] / s, law_params=law_params, intervals=intervals,
                      medians=medians, level=level if intervals else None,
                      n_draws=n_draws, n_invalid=n_invalid, source=source,
                      max_flops=float(max_flops) if max_flops else None,
                      warnings=tuple(warnings_), unidentified=unidentified or None,
                      design=design, outside=tuple(outside),
                      interval_source="parameter draws given" if intervals else "",
                      no_interval_reason="" if intervals else reason)


def _draw_intervals(draws: Any, c: float, level: float) -> tuple[
        dict | None, dict | None, int, int, str, list[str]]:
    """Percentile intervals and medians of N_opt, D_opt, D/N and a at compute ``c`` over
    parameter ``draws``: (intervals, medians, n_draws, n_invalid, no_interval_reason,
    warnings). Intervals are None, with the reason, when every valid draw gives the same N_opt
    (a zero-width interval would be an artefact of the draws, not a statement of certainty).

    Raises FitError as :func:`optimal_allocation` (bad level, malformed or too few draws)."""
    check_level(level)
    arr = draws_to_arrays(draws)
    missing = [k for k in REQUIRED_PARAMS if k not in arr]
    if missing:
        raise FitError(f"parameter draws lack {', '.join(missing)}; they need "
                       f"{', '.join(REQUIRED_PARAMS)}")
    n_draws = next(iter(arr.values())).size
    A, B, al, be = (arr[k] for k in REQUIRED_PARAMS)
    ok = np.ones(n_draws, bool)
    for v in (A, B, al, be):
        ok &= np.isfinite(v) & (v > 0)
    n_invalid = int(n_draws - ok.sum())
    if ok.sum() < 2:
        raise FitError(f"only {int(ok.sum())} of {n_draws} parameter draws have positive, "
                       f"finite A, B, alpha and beta; an interval needs at least 2")
    notes = []
    if n_invalid:
        notes.append(f"{n_invalid} of {n_draws} parameter draws have a missing, "
                     f"non-positive or non-finite A, B, alpha or beta and were left out")
    A, B, al, be = A[ok], B[ok], al[ok], be[ok]
    sd = al + be
    log_g = (np.log(al * A) - np.log(be * B)) / sd
    log_c6 = math.log(c / FLOPS_PER_PARAM_TOKEN)
    dn = np.exp(log_g + (be / sd) * log_c6)
    dd = math.exp(log_c6) / dn
    if np.ptp(dn) == 0:
        return (None, None, n_draws, n_invalid,
                f"all {int(ok.sum())} valid draws give the same N_opt, so they carry no "
                f"uncertainty (e.g. a law that fits every resample exactly)", notes)
    values = {"params": dn, "tokens": dd, "tokens_per_param": dd / dn, "a": be / sd}
    q = [(1 - level) / 2, (1 + level) / 2]
    intervals = {k: tuple(float(x) for x in np.quantile(v, q)) for k, v in values.items()}
    medians = {k: float(np.median(v)) for k, v in values.items()}
    return intervals, medians, n_draws, n_invalid, "", notes


def compute_optimal(ladder: Ladder, flops: float, *, law: str = "chinchilla",
                    fixed: Mapping[str, float] | None = None,
                    bounds: Mapping[str, Sequence[float]] | None = None,
                    draws: Any = None, level: float = 0.9, n_boot: int = DEFAULT_BOOT,
                    boot_unit: str = "run", seed: int = 0, n_jobs: int | None = None,
                    allow_unidentified: bool = False, allow_outside: bool = False,
                    **fit_options: Any) -> Allocation:
    """Fit the Chinchilla law to ``ladder`` and return the allocation at ``flops`` [FLOPs].

    Without ``draws``, the law is bootstrapped (:func:`delphi.uncertainty.bootstrap`:
    ``n_boot`` refits of the ladder's runs, or of whole compute budgets with
    ``boot_unit="budget"``, resampled with ``seed``; ``n_jobs`` workers, the same draws
    whatever their number) and the allocation carries percentile
    intervals of N_opt, D_opt, D/N and a at ``level``, as ``delphi predict`` does for the loss.
    ``n_boot=0`` turns the bootstrap off. No interval is made, and
    :attr:`Allocation.no_interval_reason` says why, when the ladder has fewer than 2p + 2 runs
    for the law's p free parameters (resamples would repeat runs and the interval would be too
    narrow, the rule of ``predict``), when more than half the refits fail, or when every draw
    gives the same N_opt. The split and design checks run before the bootstrap, so a refused
    allocation costs no refits.

    ``fixed``, ``bounds`` and ``fit_options`` (``delta``, ``fit_max_flops``,
    ``include_unfinished``, ...) go to :func:`delphi.fitting.fit`; ``draws``, ``level``,
    ``allow_unidentified`` and ``allow_outside`` to :func:`optimal_allocation` (which refuses
    an allocation whose split the ladder does not identify, or that lies far outside the
    ladder's design).

    Raises
    ------
    FitError: ``n_boot`` neither 0 nor 20..1,000,000; an unknown ``boot_unit``; a negative
        ``seed``. Otherwise as :func:`delphi.fitting.fit` and :func:`optimal_allocation`.
    """

    _check_flops(flops)
    check_level(level)
    if draws is None:
        if not (isinstance(n_boot, (int, np.integer)) and (n_boot == 0 or
                                                           MIN_BOOT <= n_boot <= MAX_DRAWS)):
            raise FitError(f"{option('n_boot', '--n-boot')} must be 0 (no bootstrap) or "
                           f"{MIN_BOOT} to {MAX_DRAWS:,} draws, got {n_boot!r}")
        if boot_unit not in ("run", "budget"):
            raise FitError(f"unknown bootstrap unit {boot_unit!r} "
                           f"({option('boot_unit', '--boot-unit')}); use 'run' or 'budget'")
        if not (isinstance(seed, (int, np.integer)) and seed >= 0):
            raise FitError(f"seed must be a non-negative integer, got {seed!r}")
    result = fit(ladder, law, fixed=fixed, bounds=bounds, **fit_options)
    run_flops = None
    if ladder.has("flops"):     # budgets as the ladder counts compute, not 6·N·D
        t = ladder.table.dropna(subset=["flops"])
        run_flops = dict(zip(t["run"].astype(str), t["flops"].astype(float)))
    alloc = optimal_allocation(result, flops, draws=draws, level=level,
                               allow_unidentified=allow_unidentified,
                               allow_outside=allow_outside, run_flops=run_flops)
    if draws is not None:
        return alloc
    if n_boot == 0:
        return replace(alloc, no_interval_reason=(
            f"bootstrap off ({option('n_boot=0', '--n-boot 0')}); bootstrap draws "
            f"({option('n_boot', '--n-boot N')}, N >= {MIN_BOOT}) or parameter draws "
            f"({option('draws', '--draws PATH')}) give intervals"))
    need = 2 * result.n_free + 2
    if result.n_points < need:
        return replace(alloc, no_interval_reason=(
            f"too few runs ({result.n_points}) to bootstrap {result.n_free} free parameters "
            f"(needs 2p+2 = {need}: resamples of fewer repeat runs and the interval would be "
            f"too narrow); give parameter draws ({option('draws', '--draws PATH')})"))
    unit_text = "compute budgets" if boot_unit == "budget" else "runs"
    try:
        boot = bootstrap(result, n=int(n_boot), unit=boot_unit, seed=int(seed), n_jobs=n_jobs)
    except FitError as exc:
        return replace(alloc, no_interval_reason=f"the bootstrap failed: {exc}")
    intervals, medians, _, n_invalid, reason, notes = _draw_intervals(boot, float(flops), level)
    notes = list(boot.warnings) + notes
    if boot.n_failed:
        notes.append(f"{boot.n_failed} of {n_boot} bootstrap refits failed and were left out")
    return replace(alloc, intervals=intervals, medians=medians,
                   level=level if intervals else None, n_draws=int(n_boot),
                   n_invalid=n_invalid + boot.n_failed,
                   interval_source=(f"bootstrap: {n_boot} refits of resampled {unit_text}, "
                                    f"seed {seed}") if intervals else "",
                   no_interval_reason=reason, warnings=alloc.warnings + tuple(notes))
