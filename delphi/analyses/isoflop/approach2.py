"""Approach 2 (Hoffmann et al. 2022, Section 3.2): a curve per isoFLOP budget, its vertex
with a bootstrap interval, the grid-design checks, and power laws across budgets."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ...core.text import level_percent
from ...errors import (FitError, FitWarning, LadderError, LadderWarning, TargetError, option,
                      user_stacklevel)
from ...inputs.ladder import FLOPS_PER_PARAM_TOKEN, Exclusion, Ladder
from ._common import (BOOTSTRAPS, METHODS, ASYMMETRY, CENTRAL, DRIFT, EXCLUDING, MAX_LISTED,
                      MIN_SIZES, SD_FLOOR_FACTOR, WIDE, check_level, count_of, fmt_g,
                      interval_text, as_jsonable, listed_names, percentiles)
from .budgets import Budget, final_table, budget_names, group_budgets
from .vertices import fit_vertices, vertex_window
from .power_law import PowerLaw, fit_power_law
from ...forecasting.uncertainty import DEFAULT_LEVEL


# ------------------------------------------------------------------------------- approach 2
@dataclass(frozen=True)
class BudgetOptimum:
    """The optimum of one compute budget (Approach 2), with its bootstrap interval and flags."""

    flops: float
    """The budget [FLOPs]."""
    runs: tuple[str, ...]
    """Runs of the budget (one per distinct size)."""
    params_range: tuple[float, float]
    """Smallest and largest sampled N [params]."""
    params: float
    """N* from the curve fitted to all the budget's points [params] (NaN if none)."""
    tokens: float
    """D* from the curve of loss against ln D [tokens] (NaN if none)."""
    loss: float
    """Loss at the vertex of the ln N curve [loss unit]."""
    params_median: float
    """Median of the bootstrap N* draws [params] (NaN without bootstrap)."""
    tokens_median: float
    """Median of the bootstrap D* draws [tokens]."""
    params_interval: tuple[float, float] | None
    """Percentile interval of the bootstrap N* draws at :attr:`level`."""
    tokens_interval: tuple[float, float] | None
    """Percentile interval of the bootstrap D* draws at :attr:`level`."""
    log_params_sd: float
    """Standard deviation of ln N* over the valid draws (NaN without bootstrap)."""
    log_tokens_sd: float
    """Standard deviation of ln D* over the valid draws."""
    position: float
    """Vertex position in the sampled ln N range: 0 = smallest size, 1 = largest."""
    n_left: int
    """Sampled sizes below the vertex."""
    n_right: int
    """Sampled sizes above the vertex."""
    n_draws: int
    """Bootstrap draws made."""
    n_valid: int
    """Draws whose N* and D* were both inside the sampled range."""
    flags: tuple[str, ...]
    """Subset of :data:`FLAGS`."""
    used: bool
    """True when the budget entered the power-law fits."""
    weight: float
    """Weight of the budget in the power-law fits (1 when unweighted, 0 when not used)."""
    level: float
    """Level of the intervals."""
    notes: tuple[str, ...] = ()
    """Human-readable explanation of each flag, naming the budget."""
    centre: float = math.nan
    """Sampling centre: geometric mean of the fitted sizes' N [params]."""
    width: tuple[float, float] | None = None
    """How far the fitted sizes reach from the vertex: ``(N* / N_min, N_max / N*)``
    [ratios]; None without an interior vertex."""
    narrow_params: float = math.nan
    """N* refitted on the sizes within 8x of the vertex [params]; set for ``"wide"``
    budgets (NaN when fewer than the method's minimum sizes remain or the refit has no
    interior minimum). ``params / narrow_params`` estimates the vertex bias of the wide grid."""
    balanced_params: float = math.nan
    """N* refitted on the sizes within ``min(N*/N_min, N_max/N*)`` of the vertex, i.e. a
    sample balanced around it [params] (NaN as for :attr:`narrow_params`)."""
    ties: tuple[tuple[float, tuple[str, ...]], ...] = ()
    """Loss values shared by 3 or more runs of the budget, with the runs."""
    duplicates: tuple[tuple[str, ...], ...] = ()
    """Groups of runs sharing one N (kept run first)."""

    @property
    def label(self) -> str:
        """``"C=1.25e+16"``."""
        return f"C={self.flops:.4g}"

    @property
    def n_sizes(self) -> int:
        """Distinct model sizes sampled."""
        return len(self.runs)

    def to_dict(self) -> dict:
        """JSON-ready fields."""
        return as_jsonable({
            "flops": self.flops, "n_sizes": self.n_sizes, "runs": list(self.runs),
            "params_range": self.params_range, "params": self.params, "tokens": self.tokens,
            "loss": self.loss, "tokens_per_param": self.tokens / self.params,
            "params_median": self.params_median, "tokens_median": self.tokens_median,
            "params_interval": self.params_interval, "tokens_interval": self.tokens_interval,
            "level": self.level, "log_params_sd": self.log_params_sd,
            "log_tokens_sd": self.log_tokens_sd, "position": self.position,
            "n_left": self.n_left, "n_right": self.n_right, "n_draws": self.n_draws,
            "n_valid": self.n_valid, "flags": list(self.flags), "used": self.used,
            "weight": self.weight, "notes": list(self.notes), "centre": self.centre,
            "width": self.width, "narrow_params": self.narrow_params,
            "balanced_params": self.balanced_params,
            "ties": [{"loss": v, "runs": list(r)} for v, r in self.ties],
            "duplicates": [list(d) for d in self.duplicates]})

    def report(self, center: str = "point") -> str:
        """One table row (see :meth:`IsoflopResult.report`); ``center="median"`` shows the
        bootstrap medians of N* and D* instead of the point estimates."""
        n, d = ((self.params_median, self.tokens_median) if center == "median"
                else (self.params, self.tokens))
        return (f"{self.flops:>10.4g} {self.n_sizes:>3d} {fmt_g(n):>10} "
                f"{interval_text(self.params_interval):>22} {fmt_g(d):>10} "
                f"{fmt_g(self.loss):>7} {'yes' if self.used else 'NO':>4}  "
                f"{', '.join(self.flags)}")


def optimal_point(params_law: "PowerLaw", tokens_law: "PowerLaw", flops: float) -> dict:
    if not (isinstance(flops, (int, float, np.number)) and math.isfinite(flops) and flops > 0):
        raise TargetError(f"target compute must be a positive number of FLOPs, got {flops!r}")
    n = float(params_law.predict(flops))
    d = float(tokens_law.predict(flops))
    return {"flops": float(flops), "params": n, "tokens": d, "tokens_per_param": d / n}


@dataclass(frozen=True)
class IsoflopResult:
    """Compute-optimal N*(C) and D*(C) from an isoFLOP ladder (Approach 2).

    ``print(result)`` gives a per-budget table and the two power laws.
    """

    budgets: tuple[BudgetOptimum, ...]
    """Every budget, used or not, sorted by FLOPs."""
    params_law: PowerLaw | None
    """N* = G C^a; None for a ladder of one budget (see :attr:`notes`)."""
    tokens_law: PowerLaw | None
    """D* = G' C^b; None for a ladder of one budget."""
    settings: dict
    """method, window, bootstrap, n_boot, noise, level, seed, center, weighted, tolerance."""
    ladder: str = ""
    """Name of the ladder analysed."""
    warnings: tuple[str, ...] = ()
    """Everything the user should know (flagged budgets, duplicates, ties, grid design...)."""
    exclusions: tuple[Exclusion, ...] = ()
    """Runs left out and why."""
    approach: int = 2
    """Hoffmann et al.'s approach number."""
    notes: tuple[str, ...] = ()
    """Facts that are not warnings (e.g. the power laws omitted for a single budget)."""
    design: dict = field(default_factory=dict)
    """Checks of the grid across budgets (see :func:`isoflop_analysis`): ``wide`` (labels
    of budgets sampled beyond 8x of their vertex), ``exponent_all_sizes`` and
    ``exponent_within_width`` (a of N* ~ C^a from the point vertices, unweighted, with the
    wide budgets refitted within 8x), ``centre_exponent``/``vertex_exponent`` (power laws of
    the sampling centres and of the vertices), ``centre_drift`` (factor by which the
    centre/vertex ratio changes across the budgets along that trend), ``drift`` (True when
    beyond 2x), ``exponent_balanced`` and ``exponent_balanced_reference`` (a with each budget
    trimmed to sizes balanced around its vertex, and a from the untrimmed vertices of the
    same budgets). Empty for a single budget."""

    def _single(self) -> "BudgetOptimum | None":
        """The one budget analysed on its own when there are no power laws (the only budget,
        or the only one with an interior optimum); None otherwise."""
        if self.params_law is not None:
            return None
        used = [b for b in self.budgets if b.used and math.isfinite(b.params)]
        if len(used) == 1:
            return used[0]
        return self.budgets[0] if len(self.budgets) == 1 else None

    def optimal(self, flops: float) -> dict:
        """N*, D*, D*/N*, 6N*D*/C and the extrapolation ratio at compute ``flops`` [FLOPs].

        Raises
        ------
        TargetError
            ``flops`` not positive and finite.
        FitError
            The ladder has one budget, so there is no power law to evaluate (the message
            gives the budget's vertex).
        """
        if self.params_law is None or self.tokens_law is None:
            b = self._single() or self.budgets[0]
            raise FitError(f"N*, D* at another compute need the power laws N*(C), D*(C), fitted "
                           f"across at least 2 compute budgets with an interior optimum; ladder "
                           f"{self.ladder or ''!r} has one ({b.label}, vertex N* = "
                           f"{fmt_g(b.params)}, D* = {fmt_g(b.tokens)}, L* = {fmt_g(b.loss)})")
        out = optimal_point(self.params_law, self.tokens_law, flops)
        used = [b.flops for b in self.budgets if b.used]
        out["compute_check"] = FLOPS_PER_PARAM_TOKEN * out["params"] * out["tokens"] / flops
        out["extrapolation"] = float(flops) / max(used) if used else math.nan
        return out

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return as_jsonable({
            "approach": self.approach, "ladder": self.ladder, "settings": self.settings,
            "params_law": self.params_law.to_dict() if self.params_law else None,
            "tokens_law": self.tokens_law.to_dict() if self.tokens_law else None,
            "budgets": [b.to_dict() for b in self.budgets], "design": self.design,
            "warnings": list(self.warnings), "notes": list(self.notes),
            "excluded": [{"run": e.run, "reason": e.reason} for e in self.exclusions]})

    def report(self) -> str:
        """Readable multi-line report."""
        s = self.settings
        head = (f"isoFLOP analysis (Hoffmann et al. 2022, Approach 2) of {self.ladder or 'ladder'}: "
                f"{s.get('method')} per budget"
                + (f" on the {s['window']} sizes around the minimum" if s.get("window") else "")
                + f", bootstrap {s.get('bootstrap')}"
                + (f" x{s.get('n_boot')}" if s.get("bootstrap") != "none" else "")
                + f", power law on {s.get('center')} optima"
                + (", weighted" if s.get("weighted") else ""))
        level = self.budgets[0].level if self.budgets else DEFAULT_LEVEL
        center = s.get("center", "point")
        tag = " (median)" if center == "median" else ""
        column = f"N* {level_percent(level)} interval"
        lines = [head,
                 f"{'C [FLOPs]':>10} {'n':>3} {'N*' + tag:>10} {column:>22} "
                 f"{'D*' + tag:>10} {'L*':>7} {'used':>4}  flags"]
        lines += [b.report(center) for b in self.budgets]
        for name, law in (("params", self.params_law), ("tokens", self.tokens_law)):
            lines.append(f"{name:<10} " + (law.report() if law is not None else
                                           "no power law (one usable budget; see note)"))
        single = self._single()
        if self.params_law is None and single is not None:
            b = single
            n_iv = (f"{level_percent(b.level)} interval {interval_text(b.params_interval)}"
                    if b.params_interval else "no interval")
            lines.append(f"vertex     N* = {fmt_g(b.params)} params ({n_iv}), "
                         f"D* = {fmt_g(b.tokens)} tokens "
                         f"({interval_text(b.tokens_interval) or 'no interval'}), "
                         f"L* = {fmt_g(b.loss)}")
        lines += listed_names("note", list(self.notes))
        lines += listed_names("excluded", [f"{e.run}: {e.reason}" for e in self.exclusions])
        lines += listed_names("warning", list(self.warnings))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _budget_notes(label: str, flags: Sequence[str], position: float, n_left: int,
                  n_right: int, n_valid: int, n_draws: int, method: str,
                  frozen: bool = False) -> tuple[str, ...]:
    text = {
        "edge": "the lowest sampled loss is at the smallest or largest size: the optimum may "
                "lie outside the sampled sizes",
        "outside": ("the interpolated minimum is at an end of the sampled sizes" if method == "akima"
                    else "the vertex lies outside the sampled sizes")
                   + "; left out of the power-law fit",
        "off-centre": f"the vertex sits at {position:.0%} of the sampled ln N range (outside "
                      f"the central half): " + ("the optimum is bracketed on one side only"
                                                if method == "akima" else
                                                f"an off-centre grid biases the {method} fit"),
        "asymmetric": f"the sample is asymmetric around the vertex ({n_left} sizes below, "
                      f"{n_right} above)",
        "no-minimum": f"the fitted {method} has no minimum; left out of the power-law fit",
        "too few sizes": f"fewer than {MIN_SIZES[method]} distinct sizes; left out of the "
                         f"power-law fit",
        "unstable": f"only {n_valid} of {n_draws} bootstrap draws have an interior optimum"
                    + ("; they all give the same vertex (the original sample), so there is no "
                       "interval" if frozen else ""),
    }
    # "wide", "tied" and "duplicates" carry numbers: their notes are made by the caller
    return tuple(f"budget {label}: {text[f]}" for f in flags if f in text)


def _tie_notes(b: Budget) -> tuple[str, ...]:
    return tuple(
        f"budget {b.label}: {len(runs)} of {b.n_rows} losses are equal ({value:.6g}: runs "
        f"{budget_names(runs)}): tied or quantised losses (rounded, or read off a plot) flatten the "
        f"curve near its minimum, so the vertex and its interval rest on fewer distinct values "
        f"than there are runs" for value, runs in b.ties)


def _data_flags(b: Budget) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Flags and notes about the budget's rows: ties and duplicates."""
    flags = ("tied",) * bool(b.ties) + ("duplicates",) * bool(b.duplicates)
    return flags, _tie_notes(b) + b.duplicate_notes


def _empty_optimum(b: Budget, flags: tuple[str, ...], level: float, method: str) -> BudgetOptimum:
    data_flags, data_notes = _data_flags(b)
    return BudgetOptimum(
        flops=b.flops, runs=b.runs, params_range=(float(b.params.min()), float(b.params.max())),
        params=math.nan, tokens=math.nan, loss=math.nan, params_median=math.nan,
        tokens_median=math.nan, params_interval=None, tokens_interval=None,
        log_params_sd=math.nan, log_tokens_sd=math.nan, position=math.nan, n_left=0, n_right=0,
        n_draws=0, n_valid=0, flags=flags + data_flags, used=False, weight=0.0, level=level,
        notes=_budget_notes(b.label, flags, math.nan, 0, 0, 0, 0, method) + data_notes,
        centre=float(np.exp(np.mean(np.log(b.params)))), ties=b.ties,
        duplicates=b.duplicates)


def _refit_vertex(method: str, u: np.ndarray, y: np.ndarray, keep: np.ndarray) -> float:
    """N* of the ``method`` curve fitted to the points ``keep`` only; NaN when fewer than the
    method's minimum remain or the minimum is not inside their range."""
    if int(keep.sum()) < MIN_SIZES[method]:
        return math.nan
    us, _, inside = fit_vertices(method, u[keep], y[keep][:, None])
    return math.exp(float(us[0])) if bool(inside[0]) and math.isfinite(us[0]) else math.nan


def _wide_note(label: str, method: str, width: tuple[float, float], params: float,
               narrow: float, n_within: int, interval: tuple[float, float] | None,
               level: float) -> str:
    below, above = width
    text = (f"budget {label}: the sizes reach {below:.3g}x below and {above:.3g}x above the "
            f"vertex, beyond the +-{WIDE:g}x a {method} describes well (the loss is not "
            f"polynomial in ln N that far out)")
    if math.isfinite(narrow):
        text += (f"; refitted on the {n_within} sizes within {WIDE:g}x, N* = {narrow:.4g}: the "
                 f"full grid's N* = {params:.4g} is off by about {params / narrow - 1:+.0%}")
        if interval is not None:
            # a shift inside the bootstrap interval cannot be told apart from noise
            inside = interval[0] <= narrow <= interval[1]
            text += (f" ({'inside' if inside else 'outside'} the {level_percent(level)}"
                     f" bootstrap interval "
                     f"of N*, {interval_text(interval)})")
        text += f"; fit with window={n_within} (--window {n_within}) or method 'akima'"
    else:
        text += (f"; too few sizes ({n_within}) within {WIDE:g}x of it to estimate the bias "
                 f"by a refit")
    return text


def _alerts(b: Budget, opt: BudgetOptimum) -> list[tuple[str, type]]:
    """The budget's notes that are also raised as Python warnings: ties and duplicates
    (LadderWarning), a grid too wide for the polynomial (FitWarning)."""
    data = set(_tie_notes(b) + b.duplicate_notes)
    return [(n, LadderWarning if n in data else FitWarning) for n in opt.notes
            if n in data or ("wide" in opt.flags and n.startswith(f"budget {b.label}: the sizes "
                                                                  f"reach"))]


def _analyse_budget(b: Budget, index: int, *, method: str, window: int | None, bootstrap: str,
                    n_boot: int, noise: float | None, level: float,
                    seed: int) -> tuple[BudgetOptimum, np.ndarray, np.ndarray]:
    """Vertex, flags and bootstrap draws of one budget.

    Returns the :class:`BudgetOptimum` (``used``/``weight`` provisional) and the valid N*, D*
    draws (arrays of the same length; draw k of both comes from the same resample)."""
    empty = np.empty(0)
    if len(b) < MIN_SIZES[method]:
        return _empty_optimum(b, ("too few sizes",), level, method), empty, empty
    sel = vertex_window(np.log(b.params), b.loss, window)
    un, y = np.log(b.params[sel]), b.loss[sel]          # ascending in N
    ud_raw = np.log(b.tokens[sel])
    if len(np.unique(ud_raw)) < len(ud_raw):
        runs = np.asarray(b.runs)[sel]
        _, first, counts = np.unique(ud_raw, return_index=True, return_counts=True)
        d = ud_raw[first[np.argmax(counts > 1)]]
        same = np.flatnonzero(ud_raw == d)
        sizes = ", ".join(f"{b.params[sel][i]:.4g}" for i in same)
        raise LadderError(f"budget {b.label}: duplicate token count: runs {budget_names(runs[same])} "
                          f"all have D = {math.exp(d):.4g} but N = {sizes}; in one budget "
                          f"(C = 6ND) each size has its own D, so check the tokens column")
    d_order = np.argsort(ud_raw, kind="mergesort")     # ascending in D
    ud = ud_raw[d_order]

    us_n, ls_n, in_n = fit_vertices(method, un, y[:, None])
    us_d, _, in_d = fit_vertices(method, ud, y[d_order][:, None])
    un_star, loss_star, inside_n = float(us_n[0]), float(ls_n[0]), bool(in_n[0])
    ud_star, inside_d = float(us_d[0]), bool(in_d[0])

    flags: list[str] = []
    if min(b.loss[0], b.loss[-1]) == b.loss.min():     # also when tied with an inner size
        flags.append("edge")
    if not math.isfinite(un_star) or not math.isfinite(ud_star):
        flags.append("no-minimum")
    elif not (inside_n and inside_d):
        flags.append("outside")
    span = un[-1] - un[0]
    position = (un_star - un[0]) / span if math.isfinite(un_star) and span > 0 else math.nan
    n_left = int(np.sum(un < un_star)) if math.isfinite(un_star) else 0
    n_right = int(np.sum(un > un_star)) if math.isfinite(un_star) else 0
    interior = math.isfinite(un_star) and "outside" not in flags
    if interior and not CENTRAL[0] <= position <= CENTRAL[1]:
        flags.append("off-centre")
    if interior and min(n_left, n_right) < ASYMMETRY * max(n_left, n_right):
        flags.append("asymmetric")
    # Design of the grid around the vertex: its reach (a polynomial is a local approximation
    # of a curve that is not polynomial in ln N) and its balance (see IsoflopResult.design).
    width, narrow, balanced, n_within = None, math.nan, math.nan, 0
    if interior:
        width = (math.exp(un_star - un[0]), math.exp(un[-1] - un_star))
        near = np.abs(un - un_star) <= math.log(WIDE)
        n_within = int(near.sum())
        if method != "akima" and max(width) > WIDE:      # an interpolant is local already
            flags.append("wide")
            narrow = _refit_vertex(method, un, y, near)
        radius = min(un_star - un[0], un[-1] - un_star)
        balanced = _refit_vertex(method, un, y, np.abs(un - un_star) <= radius * (1 + 1e-9))

    # Bootstrap, seeded by (seed, budget index): a budget's draws do not depend on the others.
    vn = vd = empty
    n_draws = 0
    if bootstrap != "none" and n_boot > 0:
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(index)]))
        n_draws = int(n_boot)
        if bootstrap == "noise":
            Y = y[:, None] + float(noise) * rng.standard_normal((len(y), n_draws))
            Y = np.maximum(Y, np.finfo(float).tiny)
            vn, _, okn = fit_vertices(method, un, Y)
            vd, _, okd = fit_vertices(method, ud, Y[d_order])
        else:
            idx = rng.integers(0, len(y), size=(n_draws, len(y)))
            vn, vd = np.full(n_draws, np.nan), np.full(n_draws, np.nan)
            okn, okd = np.zeros(n_draws, bool), np.zeros(n_draws, bool)
            rank_d = np.argsort(d_order)                   # position of point i in ud
            for k in range(n_draws):
                counts = np.bincount(idx[k], minlength=len(y)).astype(float)
                pick = np.flatnonzero(counts)              # ascending in N
                if len(pick) < MIN_SIZES[method]:
                    continue
                pick_d = d_order[np.sort(rank_d[pick])]    # the same points, ascending in D
                a, _, o = fit_vertices(method, un[pick], y[pick][:, None], counts[pick])
                c, _, q = fit_vertices(method, np.log(b.tokens[sel])[pick_d], y[pick_d][:, None],
                                    counts[pick_d])
                vn[k], okn[k], vd[k], okd[k] = a[0], o[0], c[0], q[0]
        ok = okn & okd & np.isfinite(vn) & np.isfinite(vd)
        vn, vd = np.exp(vn[ok]), np.exp(vd[ok])
    n_valid = int(vn.size)
    if n_draws and n_valid < n_draws / 2:
        flags.append("unstable")

    def summary(draws: np.ndarray) -> tuple[float, tuple[float, float] | None, float]:
        if draws.size == 0:
            return math.nan, None, math.nan
        sd = float(np.std(np.log(draws))) if draws.size > 1 else math.nan
        if np.ptp(draws) == 0:  # every resample gave the same vertex: no interval to report
            return float(np.median(draws)), None, sd
        return float(np.median(draws)), percentiles(draws, level), sd

    pm, piv, psd = summary(vn)
    tm, tiv, tsd = summary(vd)
    used = not any(f in EXCLUDING for f in flags)
    params = math.exp(un_star) if math.isfinite(un_star) else math.nan
    frozen = n_valid > 0 and (np.ptp(vn) == 0 or np.ptp(vd) == 0)
    notes = _budget_notes(b.label, flags, position, n_left, n_right, n_valid, n_draws, method,
                          frozen)
    if "wide" in flags:
        notes += (_wide_note(b.label, method, width, params, narrow, n_within, piv, level),)
    data_flags, data_notes = _data_flags(b)
    return BudgetOptimum(
        flops=b.flops, runs=b.runs, params_range=(float(b.params.min()), float(b.params.max())),
        params=params, tokens=math.exp(ud_star) if math.isfinite(ud_star) else math.nan,
        loss=loss_star, params_median=pm, tokens_median=tm, params_interval=piv,
        tokens_interval=tiv, log_params_sd=psd, log_tokens_sd=tsd, position=float(position),
        n_left=n_left, n_right=n_right, n_draws=n_draws, n_valid=n_valid,
        flags=tuple(flags) + data_flags, used=used, weight=1.0 if used else 0.0, level=level,
        notes=notes + data_notes, centre=float(np.exp(np.mean(un))), width=width,
        narrow_params=narrow, balanced_params=balanced, ties=b.ties,
        duplicates=b.duplicates), vn, vd


def _check_settings(method: str, window: int | None, bootstrap: str, n_boot: int,
                    noise: float | None, center: str, weighted: bool) -> None:
    if method not in METHODS:
        raise FitError(f"unknown isoFLOP method {method!r}; known: {', '.join(METHODS)}")
    if bootstrap not in BOOTSTRAPS:
        raise FitError(f"unknown bootstrap {bootstrap!r}; known: {', '.join(BOOTSTRAPS)}")
    if window is not None and (int(window) != window or window < MIN_SIZES[method]):
        raise FitError(f"window must be an integer >= {MIN_SIZES[method]} for method "
                       f"{method!r}, got {window!r}")
    if int(n_boot) != n_boot or n_boot < 0:
        raise FitError(f"{option('n_boot', '--n-boot')} must be a non-negative integer, "
                       f"got {n_boot!r}")
    if bootstrap == "noise" and not (noise is not None and math.isfinite(noise) and noise > 0):
        raise FitError(f"bootstrap 'noise' needs a positive noise standard deviation [loss "
                       f"units], got {noise!r} (Porian et al. use 0.002 on RefinedWeb, 0.01 on "
                       f"OpenWebText2)")
    if center not in ("point", "median"):
        raise FitError(f"center must be 'point' or 'median', got {center!r}")
    needs = [what for what, on in ((option("center='median'", "--center median"),
                                    center == "median"),
                                   (option("weighted=True", "--weighted"), weighted)) if on]
    if needs and (bootstrap == "none" or n_boot < 2):
        raise FitError(f"{' and '.join(needs)} need bootstrap draws; set "
                       f"{option('bootstrap', '--bootstrap')} to 'resample' or 'noise' and "
                       f"{option('n_boot', '--n-boot')} >= 2")


def isoflop_table(table: pd.DataFrame, *, method: str = "parabola", window: int | None = None,
                  tolerance: float = 0.05, bootstrap: str = "resample", n_boot: int = 1000,
                  noise: float | None = None, level: float = DEFAULT_LEVEL, seed: int = 0,
                  center: str = "point", weighted: bool = False, ladder: str = "",
                  exclusions: Iterable[Exclusion] = ()) -> IsoflopResult:
    """Approach 2 on a table with one row per run (see :func:`isoflop_analysis`).

    ``table`` has columns ``run``, ``params``, ``tokens``, ``flops``, ``loss`` and optionally
    ``budget`` [FLOPs]. Other parameters, return value and errors as in
    :func:`isoflop_analysis`.
    """
    _check_settings(method, window, bootstrap, n_boot, noise, center, weighted)
    level = check_level(level)
    budgets = group_budgets(table, tolerance=tolerance)
    results, draws, alerts = [], [], []
    for i, b in enumerate(budgets):
        opt, dn, dd = _analyse_budget(b, i, method=method, window=window, bootstrap=bootstrap,
                                      n_boot=int(n_boot), noise=noise, level=level, seed=seed)
        if center == "median" and opt.used and opt.n_valid == 0:
            opt = replace(opt, used=False, weight=0.0, flags=opt.flags + ("unstable",) * (
                "unstable" not in opt.flags), notes=opt.notes + (
                f"budget {opt.label}: no valid bootstrap draw; left out of the median fit",))
        results.append(opt)
        draws.append((dn, dd))
        alerts += _alerts(b, opt)
    settings = {"method": method, "window": window, "bootstrap": bootstrap,
                "n_boot": int(n_boot) if bootstrap != "none" else 0, "noise": noise,
                "level": level, "seed": int(seed), "center": center, "weighted": bool(weighted),
                "tolerance": tolerance}

    if len(results) == 1:
        # One budget: its vertex and interval are the answer; a power law across budgets
        # is not estimable and is left out (not an error).
        r = results[0]
        if not math.isfinite(r.params):
            raise FitError(f"the ladder has one compute budget ({r.label}, "
                           f"{count_of(r.n_sizes, 'size')}) and "
                           f"it has no vertex ({', '.join(r.flags)}): "
                           + "; ".join(n.split(": ", 1)[1] for n in r.notes))
        _raise(alerts)
        note = (f"one compute budget ({r.label}): its vertex is reported; the power laws "
                f"N*(C), D*(C) need at least 2 budgets and are omitted")
        return IsoflopResult(budgets=(r,), params_law=None, tokens_law=None, settings=settings,
                             ladder=ladder, warnings=r.notes, exclusions=tuple(exclusions),
                             notes=(note,))

    used = [i for i, r in enumerate(results) if r.used]
    if len(used) == 1:
        # One budget qualifies: analyse it as a single budget (its vertex and interval) and
        # name the budgets left out, rather than refusing everything for want of a second.
        r = results[used[0]]
        _raise(alerts)
        left = "; ".join(f"{o.label} ({', '.join(f for f in o.flags if f in EXCLUDING)})"
                         for o in results if not o.used)
        note = (f"one of {count_of(len(results), 'compute budget')} has an interior optimum "
                f"({r.label}): its vertex is reported; the power laws N*(C), D*(C) need at "
                f"least 2 such budgets and are omitted; left out: {left}")
        warnings_ = [n for o in results for n in o.notes]
        return IsoflopResult(budgets=tuple(results), params_law=None, tokens_law=None,
                             settings=settings, ladder=ladder, warnings=tuple(warnings_),
                             exclusions=tuple(exclusions), notes=(note,))
    if len(used) < 2:
        listed = "; ".join(f"{r.label} ({', '.join(r.flags) or 'ok'})" for r in results[:12])
        raise FitError(f"an isoFLOP power law needs at least 2 budgets with an interior optimum; "
                       f"{len(used)} of {len(results)} qualify: {listed}")

    def law_inputs(quantity: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        c = np.array([results[i].flops for i in used])
        if center == "median":
            y = np.array([getattr(results[i], f"{quantity}_median") for i in used])
        else:
            y = np.array([getattr(results[i], quantity) for i in used])
        if not weighted:
            return c, y, None
        w = []
        for i in used:
            r, b = results[i], budgets[i]
            sel = vertex_window(np.log(b.params), b.loss, window)
            u = np.log(b.params[sel] if quantity == "params" else b.tokens[sel])
            floor = SD_FLOOR_FACTOR * (u.max() - u.min()) / (len(u) - 1)
            sd = getattr(r, f"log_{quantity}_sd")
            sd = floor if not math.isfinite(sd) else max(sd, floor)
            sd *= r.n_draws / max(r.n_valid, 1)
            w.append(1.0 / sd ** 2)
        return c, y, np.array(w)

    laws = {}
    for q in ("params", "tokens"):
        c, y, w = law_inputs(q)
        law = fit_power_law(c, y, weights=w, quantity=q)
        # bootstrap interval of the exponent: draw k of every used budget, fitted together
        col = 0 if q == "params" else 1
        k_max = min(draws[i][col].size for i in used)
        # A budget whose valid draws are all one value (with 3 sizes, the only resample with 3
        # distinct sizes is the original sample) contributes none of its uncertainty: an
        # interval from such draws is an artefact (zero width when every budget is so).
        frozen = [results[i].label for i in used
                  if draws[i][col].size and np.ptp(draws[i][col]) == 0]
        reason = ""
        if bootstrap != "none" and n_boot > 0:
            if frozen:
                which = ("every used budget" if len(frozen) == len(used) else
                         f"{len(frozen)} of {len(used)} used budgets ("
                         + ", ".join(frozen[:MAX_LISTED])
                         + (" ..." if len(frozen) > MAX_LISTED else "") + ")")
                reason = f"in {which} the valid draws all give the same vertex"
                sizes = {results[i].n_sizes for i in used if results[i].label in frozen}
                if bootstrap == "resample" and sizes == {MIN_SIZES[method]}:
                    reason += (f" (with {MIN_SIZES[method]} sizes the only resample holding "
                               f"the {MIN_SIZES[method]} distinct sizes a {method} needs is "
                               f"the original sample)")
                reason += ", so they carry none of its uncertainty"
                if bootstrap == "resample":
                    reason += (f"; sample more sizes per budget, or use "
                               f"{option('bootstrap=noise', '--bootstrap noise --noise SD')}")
            elif k_max < 10:
                reason = (f"only {k_max} joint valid draws (a budget has {k_max} of "
                          f"{n_boot} draws with an interior optimum; 10 needed)")
        if k_max >= 10 and not reason:
            exps = np.array([fit_power_law(c, np.array([draws[i][col][k] for i in used]),
                                           weights=w, quantity=q).exponent
                             for k in range(k_max)])
            if np.ptp(exps) > 0:
                law = replace(law, exponent_interval=percentiles(exps, level),
                              level=level, n_draws=int(n_boot), n_valid=int(k_max))
            else:
                reason = f"all {k_max} joint draws give the same exponent"
        if reason:
            law = replace(law, no_interval_reason=reason, n_draws=int(n_boot),
                          n_valid=int(k_max))
        laws[q] = law
        if q == "params" and w is not None:
            for j, i in enumerate(used):
                results[i] = replace(results[i], weight=float(w[j]))

    warnings_: list[str] = []
    for r in results:
        warnings_.extend(r.notes)       # flags, ties and duplicates (naming every run)
    design, design_warnings = _design(results, method)
    warnings_ += design_warnings
    _raise(alerts + [(w, FitWarning) for w in design_warnings])
    return IsoflopResult(budgets=tuple(results), params_law=laws["params"],
                         tokens_law=laws["tokens"], settings=settings, ladder=ladder,
                         warnings=tuple(warnings_), exclusions=tuple(exclusions),
                         design=design)


def _raise(alerts: list[tuple[str, type]]) -> None:
    for message, category in alerts:
        warnings.warn(message, category, stacklevel=user_stacklevel())


def _design(results: Sequence[BudgetOptimum], method: str) -> tuple[dict, list[str]]:
    """Checks of the grid across the used budgets: width and drift of the sampling centre.

    **Width.** A polynomial in ln N is a local approximation: the isoFLOP loss of the
    Chinchilla form, ``L - E ~ beta e^{-alpha u} + alpha e^{beta u}`` with ``u = ln(N / N*)``,
    departs from it far from the vertex, and real curves depart further. The bias of a wide
    budget's vertex is estimated empirically, by refitting the same curve to the sizes within
    8x of the vertex (:attr:`BudgetOptimum.narrow_params`); the exponent from those refits is
    compared with the one from all sizes. (On Porian et al.'s RefinedWeb grids with Kaplan's
    warm-up, up to 140x wide, this moves a from 0.78 to 0.70; their published value, from
    an Akima interpolant, is 0.706. A Chinchilla-form curve with Hoffmann et al.'s
    alpha = 0.34, beta = 0.28 over the same grids predicts a shift of only -0.03: the real
    curves are further from a parabola, which is why the estimate uses the data.)

    **Drift.** A parabola's vertex is pulled toward the centre of an off-centre sample when the
    loss is asymmetric in ln N (Open-Athena, scaling-law-analysis, "off-center sampling"). A
    constant offset biases only the coefficient G of N* = G C^a; an offset that changes with
    C biases the exponent. The sampling centre (geometric mean of N) and the vertex are each
    fitted with a power law in C; when their ratio changes by more than 2x across the budgets
    along that trend, a warning gives both exponents and the exponent with every budget
    trimmed to sizes balanced around its vertex (:attr:`BudgetOptimum.balanced_params`).
    The drift is warned for the polynomial methods only: an Akima interpolant is local, and
    on Porian et al.'s drifting grids trimming changes its exponent by less than 0.001
    (against -0.017 for a parabola, which moves to 0.496 next to their published 0.497).
    """
    ok = [r for r in results if r.used and math.isfinite(r.params)]
    design: dict = {"max_width": WIDE, "max_drift": DRIFT}
    out: list[str] = []
    if len({r.flops for r in ok}) < 2:
        return design, out
    c = np.array([r.flops for r in ok])
    n = np.array([r.params for r in ok])

    def exponent(cs: np.ndarray, ys: np.ndarray) -> float:
        return fit_power_law(cs, ys).exponent if len(np.unique(cs)) >= 2 else math.nan

    wide = [r for r in ok if "wide" in r.flags]
    design["wide"] = [r.label for r in wide]
    if wide:
        refit = np.array([r.narrow_params if "wide" in r.flags else r.params for r in ok])
        fine = np.isfinite(refit)
        a_all, a_narrow = exponent(c[fine], n[fine]), exponent(c[fine], refit[fine])
        design["exponent_all_sizes"], design["exponent_within_width"] = a_all, a_narrow
        text = (f"{len(wide)} of {len(ok)} budgets sample sizes beyond {WIDE:g}x of their "
                f"vertex ({', '.join(design['wide'][:MAX_LISTED])}"
                + (" ..." if len(wide) > MAX_LISTED else "") + ")")
        if math.isfinite(a_narrow) and abs(a_narrow - a_all) < 5e-5:
            text += (f": refitting them on the sizes within {WIDE:g}x leaves the exponent of "
                     f"N* ~ C^a at {a_all:.4f} (the bias is the same in every budget; N* is "
                     f"biased, see each budget)")
        elif math.isfinite(a_narrow):
            text += (f": refitting them on the sizes within {WIDE:g}x moves the exponent of "
                     f"N* ~ C^a from {a_all:.4f} to {a_narrow:.4f} ({a_narrow - a_all:+.4f}; "
                     f"point vertices, unweighted, {int(fine.sum())} budgets)")
        out.append(text)

    centre_law, vertex_law = fit_power_law(c, [r.centre for r in ok]), fit_power_law(c, n)
    lo, hi = float(c.min()), float(c.max())
    ratio = [float(centre_law.predict(x) / vertex_law.predict(x)) for x in (lo, hi)]
    drift = ratio[1] / ratio[0]
    design.update(centre_exponent=centre_law.exponent, vertex_exponent=vertex_law.exponent,
                  centre_drift=drift, drift=bool(max(drift, 1 / drift) > DRIFT))
    bal = np.array([r.balanced_params for r in ok])
    fine = np.isfinite(bal)
    a_ref, a_bal = exponent(c[fine], n[fine]), exponent(c[fine], bal[fine])
    design["exponent_balanced"], design["exponent_balanced_reference"] = a_bal, a_ref
    if design["drift"] and method != "akima":   # an interpolant has no global shape to bias
        text = (f"the sampling centre drifts against the vertices: along the trend, a budget's "
                f"geometric-mean size goes from {ratio[0]:.3g}x its vertex at C={lo:.4g} to "
                f"{ratio[1]:.3g}x at C={hi:.4g} (centres ~ C^{centre_law.exponent:.3f}, vertices ~ "
                f"C^{vertex_law.exponent:.3f}; a {max(drift, 1 / drift):.3g}x change, beyond "
                f"{DRIFT:g}x); each budget's {method} is fitted off-centre by a different "
                f"amount, which biases the exponent")
        if math.isfinite(a_bal):
            text += (f"; trimming every budget to sizes balanced around its vertex gives "
                     f"a = {a_bal:.4f} (vs {a_ref:.4f} from the same {int(fine.sum())} budgets)")
        text += "; centre each budget's sizes on the fitted N*(C)"
        out.append(text)
    return design, out


def isoflop_analysis(ladder: Ladder, *, method: str = "parabola", window: int | None = None,
                     tolerance: float = 0.05, bootstrap: str = "resample", n_boot: int = 1000,
                     noise: float | None = None, level: float = DEFAULT_LEVEL, seed: int = 0,
                     center: str = "point", weighted: bool = False) -> IsoflopResult:
    """Compute-optimal N*(C) and D*(C) from an isoFLOP ladder: Hoffmann et al. 2022 Approach 2.

    Each finished run contributes its final loss (:meth:`Ladder.final_points`); runs are
    grouped into budgets (:func:`group_budgets`), the loss is fitted against ``ln N`` and
    against ``ln D`` per budget and the minimisers N*(C), D*(C) are fitted with power laws
    N* = G C^a, D* = G' C^b (:func:`fit_power_law`).

    Parameters
    ----------
    ladder:
        Runs with ``params`` [params], ``tokens`` [tokens], ``flops`` [FLOPs] and ``loss``;
        a ``budget`` column [FLOPs], when present, groups the runs.
    method:
        ``"parabola"`` (Hoffmann et al.), ``"cubic"`` or ``"akima"`` (Porian et al. 2024).
    window:
        Fit only this many consecutive sizes centred on the lowest loss (``None``: all).
    tolerance:
        Relative FLOPs agreement for runs to share a budget (default 5%).
    bootstrap:
        ``"resample"`` (the budget's points with replacement), ``"noise"`` (Gaussian noise
        of standard deviation ``noise`` added to each loss, Porian et al.'s seed noise) or
        ``"none"``.
    n_boot:
        Bootstrap draws per budget.
    noise:
        Noise standard deviation [loss units] for ``bootstrap="noise"``.
    level:
        Level of the percentile intervals (default 0.9, :data:`delphi.uncertainty.DEFAULT_LEVEL`,
        as every interval in delphi).
    seed:
        Seed of the bootstraps; budget ``i`` uses ``SeedSequence([seed, i])``, so results are
        bit-reproducible.
    center:
        Fit the power laws to the ``"point"`` estimates or to the bootstrap ``"median"``.
    weighted:
        Weight each budget by ``1 / sd^2`` of its bootstrap ``ln N*`` (``ln D*`` for the token
        law), floored and inflated as in Porian et al.'s code.

    Checks of the design (each a warning recorded on the result and raised as a
    :class:`~delphi.errors.FitWarning` or :class:`~delphi.errors.LadderWarning`):

    * **width**: a budget whose fitted sizes reach beyond 8x of the vertex (parabola or
      cubic) is flagged ``"wide"``; the note gives N* refitted on the sizes within 8x
      (:attr:`BudgetOptimum.narrow_params`) as the estimate of the bias, and whether that
      shift is inside the bootstrap interval; ``result.design`` gives the exponent with and
      without those refits. The estimate is empirical, not from a model curve: on
      Porian et al.'s 140x-wide grids it moves a from 0.78 to 0.70 (published: 0.706), where
      a Chinchilla-form curve with Hoffmann et al.'s exponents predicts a shift of -0.03.
      On a smooth curve it understates the bias somewhat (the narrower parabola is biased too).
    * **drift**: power laws are fitted to the budgets' sampling centres (geometric mean of N)
      and to their vertices; when the centre/vertex ratio changes by more than 2x across the
      budgets, the vertices are estimated off-centre by varying amounts, which biases the
      exponent (parabola and cubic; an Akima interpolant is local). The warning gives the
      exponent with every budget trimmed to sizes balanced around its vertex.
    * **ties**: 3 or more equal losses in a budget (rounded, or read off a plot): ``"tied"``.
    * **duplicates**: runs of a budget sharing N are named together, with the kept one (lowest
      loss) and a note when their D differ (C = 6ND cannot hold for all).

    A ladder of a single budget is analysed: its vertex N*, D*, L* and bootstrap intervals;
    the power laws need at least 2 budgets, so ``params_law`` and ``tokens_law`` are None and
    ``result.notes`` says so (:meth:`IsoflopResult.optimal` then raises :class:`FitError`).

    Returns
    -------
    IsoflopResult

    Raises
    ------
    LadderError
        The ladder lacks ``params`` or ``tokens``, runs do not cluster into budgets, or
        several sizes of a budget share a token count (the message names those runs).
    FitError
        Bad settings; a single budget with no vertex; or, with 2 or more budgets, fewer than
        2 with an interior optimum (the message lists every budget and its flags).
    """
    points, dropped = final_table(ladder)
    return isoflop_table(points, method=method, window=window, tolerance=tolerance,
                         bootstrap=bootstrap, n_boot=n_boot, noise=noise, level=level,
                         seed=seed, center=center, weighted=weighted, ladder=ladder.name,
                         exclusions=tuple(ladder.exclusions) + tuple(dropped))
