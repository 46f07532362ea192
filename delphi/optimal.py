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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .records import jsonable, positive_number
from .errors import FitError, LawError, TargetError
from .ladder import FLOPS_PER_PARAM_TOKEN, Ladder

__all__ = ["Allocation", "chinchilla_optimum", "optimal_allocation", "compute_optimal",
           "draws_to_arrays", "REQUIRED_PARAMS", "SPLIT_PARAMS"]

#: Parameters of the Chinchilla law that fix the allocation (E does not).
REQUIRED_PARAMS = ("A", "B", "alpha", "beta")
#: The exponents profiled by :func:`delphi.fitting.diagnostics.identify` that the split rests on.
SPLIT_PARAMS = ("alpha", "beta")


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

    Accepts a sequence of mappings (one per draw), a mapping of name to a 1-D array, or a
    :class:`pandas.DataFrame` with one column per parameter.

    Raises
    ------
    FitError: empty draws, ragged arrays, or draws that are not numbers.
    """
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
            "unidentified": {k: list(v) for k, v in (self.unidentified or {}).items()}})

    def report(self) -> str:
        """Readable multi-line report."""
        def iv(key: str) -> str:
            if not self.intervals or key not in self.intervals:
                return ""
            lo, hi = self.intervals[key]
            return f"   {self.level:.0%} interval [{lo:.4g}, {hi:.4g}]"

        lines = [f"compute-optimal allocation at C = {self.flops:.4g} FLOPs "
                 f"(Hoffmann et al. 2022, Eq. 4)" + (f" from {self.source}" if self.source else "")]
        if self.unidentified:
            which = ", ".join(f"{k} in [{lo:.3g}, {hi:.3g}]"
                              for k, (lo, hi) in self.unidentified.items())
            lines.append(f"UNIDENTIFIED split: the ladder does not identify {which}; N_opt, "
                         f"D_opt and D/N below are arbitrary within that range")
        lines += [f"N_opt      {self.params:.4g} params{iv('params')}",
                  f"D_opt      {self.tokens:.4g} tokens{iv('tokens')}",
                  f"D/N        {self.tokens_per_param:.4g} tokens per parameter"
                  f"{iv('tokens_per_param')}",
                  f"law        N_opt = {self.G:.4g} (C/6)^{self.a:.4f}, D_opt = (C/6)/N_opt "
                  f"(a = beta/(alpha+beta){iv('a')})"]
        if self.n_draws:
            lines.append(f"draws      {self.n_draws - self.n_invalid} of {self.n_draws} used")
        if self.extrapolation is not None:
            lines.append(f"extrapol.  {self.extrapolation:.3g}x the largest fitted run's compute")
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
    from .fitting.diagnostics import require_identified
    from .fitting.result import Fit

    if not isinstance(fit_or_params, Fit):
        return {}
    if not allow:
        require_identified(fit_or_params, SPLIT_PARAMS,
                           "the compute-optimal allocation (N_opt, D_opt, D/N)",
                           "pass --allow-unidentified (API allow_unidentified=True) to get it "
                           "anyway, flagged")
    return {k: v for k, v in fit_or_params.unidentified.items() if k in SPLIT_PARAMS}


def _fit_params(fit_or_params: Any) -> tuple[dict[str, float], str, float | None, tuple[str, ...]]:
    """(params, source, max_flops, warnings) from a Fit or a mapping."""
    from .fitting.result import Fit

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
                       allow_unidentified: bool = False) -> Allocation:
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
    TargetError: ``flops`` not positive and finite.
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
        warnings_.append(f"allocation given on request (allow_unidentified) although the ladder "
                         f"does not identify {', '.join(unidentified)}: N_opt, D_opt and D/N are "
                         f"one of many equally good answers")
    intervals = medians = None
    n_draws = n_invalid = 0
    if draws is not None:
        if not 0 < level < 1:
            raise FitError(f"interval level must be in (0, 1), got {level}")
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
        if n_invalid:
            warnings_.append(f"{n_invalid} of {n_draws} parameter draws have a missing, "
                             f"non-positive or non-finite A, B, alpha or beta and were left out")
        A, B, al, be = A[ok], B[ok], al[ok], be[ok]
        sd = al + be
        log_g = (np.log(al * A) - np.log(be * B)) / sd
        log_c6 = math.log(c / FLOPS_PER_PARAM_TOKEN)
        dn = np.exp(log_g + (be / sd) * log_c6)
        dd = math.exp(log_c6) / dn
        values = {"params": dn, "tokens": dd, "tokens_per_param": dd / dn, "a": be / sd}
        q = [(1 - level) / 2, (1 + level) / 2]
        intervals = {k: tuple(float(x) for x in np.quantile(v, q)) for k, v in values.items()}
        medians = {k: float(np.median(v)) for k, v in values.items()}
    if max_flops:
        ratio = c / max_flops
        if ratio > 1e3:
            warnings_.append(f"the target is {ratio:.3g}x the largest fitted run's compute: "
                             f"far outside the ladder")
    return Allocation(flops=c, params=float(n), tokens=float(d), G=g, a=p["beta"] / s,
                      b=p["alpha"] / s, law_params=law_params, intervals=intervals,
                      medians=medians, level=level if draws is not None else None,
                      n_draws=n_draws, n_invalid=n_invalid, source=source,
                      max_flops=float(max_flops) if max_flops else None,
                      warnings=tuple(warnings_), unidentified=unidentified or None)


def compute_optimal(ladder: Ladder, flops: float, *, law: str = "chinchilla",
                    fixed: Mapping[str, float] | None = None,
                    bounds: Mapping[str, Sequence[float]] | None = None,
                    draws: Any = None, level: float = 0.9, allow_unidentified: bool = False,
                    **fit_options: Any) -> Allocation:
    """Fit the Chinchilla law to ``ladder`` and return the allocation at ``flops`` [FLOPs].

    ``fixed``, ``bounds`` and ``fit_options`` (``delta``, ``fit_max_flops``,
    ``include_unfinished``, ...) go to :func:`delphi.fitting.fit`; ``draws``, ``level`` and
    ``allow_unidentified`` to :func:`optimal_allocation` (which refuses an allocation whose
    split the ladder does not identify).

    Raises
    ------
    As :func:`delphi.fitting.fit` and :func:`optimal_allocation`.
    """
    from .fitting import fit

    _check_flops(flops)
    result = fit(ladder, law, fixed=fixed, bounds=bounds, **fit_options)
    return optimal_allocation(result, flops, draws=draws, level=level,
                              allow_unidentified=allow_unidentified)
