"""isoFLOP analysis: compute-optimal model size and tokens from a ladder (Hoffmann et al. 2022,
Approaches 1 and 2).

**Approach 2** (:func:`isoflop_analysis`): runs are grouped by compute budget
(:func:`group_budgets`); within each budget the final loss is fitted against ``u = ln N``
(and, separately, against ``ln D``) and the minimiser is the budget's optimum N*(C), D*(C).
Power laws N* = G C^a and D* = G' C^b are then fitted across budgets by (weighted) least
squares in log space (:func:`fit_power_law`). Hoffmann et al. 2022 (arXiv 2203.15556) §3.2
fit a parabola; a cubic and Porian et al.'s Akima interpolation are also offered:

* ``"parabola"``: least-squares ``L = a u^2 + b u + c``, vertex ``u* = -b / 2a``
  (Hoffmann et al. 2022, Approach 2);
* ``"cubic"``: least-squares cubic, its local minimum inside the sampled range;
* ``"akima"``: an Akima spline through ``(ln N, ln L)`` evaluated on ``25 (n - 1)`` points,
  its argmin (Porian et al. 2024, arXiv 2406.19146, §2 and their code
  ``formll/resolving-scaling-law-discrepancies``); a minimum on the end of the grid is an
  edge, not an estimate.

A parabola is biased when the sampled sizes are off-centre around the optimum or span a
wide range where the loss is not quadratic in ``ln N`` (Open-Athena, *scaling-law-analysis*:
"off-center sampling" and "sampling range" experiments). Every budget is therefore flagged
when its sampled minimum is the smallest or largest size (``edge``), when the vertex falls
outside the sampled range (``outside``: the budget is left out of the power-law fit), when the
vertex is outside the central half of the sampled ``ln N`` range (``off-centre``) or when
fewer than half as many sizes lie on one side of the vertex as on the other (``asymmetric``).

The design of the grid is checked too (see :func:`isoflop_analysis`): a polynomial budget whose
sizes reach beyond 8x of its vertex is flagged ``wide``, with an estimate of the vertex's bias
from a refit on the sizes within 8x (empirical; :func:`isoflop_analysis` says why not a model
curve); a sampling centre (geometric mean of N) whose ratio to the vertex changes by more
than 2x across budgets is warned as drift, with the exponent from samples trimmed to be
balanced around each vertex; 3 or more equal losses in a budget are flagged ``tied`` (tied or
quantised losses); runs sharing N in a budget are ``duplicates``, every run of the group named.
A ladder of one budget gives that budget's vertex and interval; the power laws need at least
2 budgets and are omitted, with a note.

Each budget's vertex carries a bootstrap interval (seeded, bit-reproducible): ``"resample"``
draws the budget's points with replacement; ``"noise"`` adds Gaussian noise of a given
standard deviation to every loss (Porian et al.'s "seed noise", 0.002 nats on RefinedWeb and
0.01 on OpenWebText2 in their ``configs.py``). With ``center="median"`` and ``weighted=True``
the power law is fitted to the bootstrap medians with weights ``1 / sd^2`` of ``ln N*``, as in
Porian et al.'s ``bs_median_weighted`` fits (sd floored at 0.33 of the budget's mean spacing
in ``ln N`` and inflated by ``draws / valid draws``, as in their code).

**Approach 1** (:func:`envelope_analysis`): the lower envelope of the loss curves over every
run's checkpoints. At log-spaced FLOP values each run's loss curve is interpolated linearly in
``(ln C, ln L)``; the run with the lowest loss at C gives N*(C) and D*(C), and power laws are
fitted to those minimisers (Hoffmann et al. 2022, §3.1).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from ..records import jsonable
from ..errors import (FitError, FitWarning, LadderError, LadderWarning, TargetError, option,
                     user_stacklevel)
from ..ladder import FLOPS_PER_PARAM_TOKEN, Exclusion, Ladder

__all__ = [
    "Budget", "BudgetOptimum", "PowerLaw", "IsoflopResult", "EnvelopePoint", "EnvelopeResult",
    "group_budgets", "fit_power_law", "isoflop_analysis", "isoflop_table", "envelope_analysis",
    "METHODS", "BOOTSTRAPS", "FLAGS",
]

#: Per-budget curve fits of :func:`isoflop_analysis`.
METHODS = ("parabola", "cubic", "akima")
#: Bootstrap schemes for the per-budget vertex.
BOOTSTRAPS = ("resample", "noise", "none")
#: Flags a budget can carry (see the module docstring).
FLAGS = ("edge", "outside", "off-centre", "asymmetric", "no-minimum", "too few sizes",
         "unstable", "wide", "tied", "duplicates")
#: Flags that leave a budget out of the power-law fit.
_EXCLUDING = ("outside", "no-minimum", "too few sizes")

_MIN_SIZES = {"parabola": 3, "cubic": 4, "akima": 3}
_AKIMA_REFINE = 25                 # grid points per sampled interval (Porian et al.'s code)
_CENTRAL = (0.25, 0.75)            # vertex position in the sampled ln N range: central half
_ASYMMETRY = 0.5                   # fewer than half as many sizes on one side: asymmetric
_SD_FLOOR_FACTOR = 0.33            # Porian et al.'s min_std_factor
_MAX_LISTED = 6
_WIDE = 8.0                        # sizes beyond 8x of the vertex: too wide for a polynomial
_DRIFT = 2.0                       # centre/vertex ratio changing > 2x across budgets: drift
_TIE_MIN = 3                       # this many equal losses in a budget: tied or quantised


# ------------------------------------------------------------------------------- helpers
_jsonable = jsonable


def _g(value: float, digits: int = 4) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.{digits}g}"


def _count(n: int, noun: str) -> str:
    """``"1 size"``, ``"3 sizes"``."""
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _interval_text(iv: tuple[float, float] | None, digits: int = 3) -> str:
    return "" if iv is None else f"[{_g(iv[0], digits)}, {_g(iv[1], digits)}]"


def _listed(kind: str, items: list[str], limit: int = 12) -> list[str]:
    """Report lines ``"kind       item"``, at most ``limit`` of them plus a count of the rest
    (``to_dict`` keeps them all)."""
    lines = [f"{kind:<10} {item}" for item in items[:limit]]
    if len(items) > limit:
        lines.append(f"{kind:<10} ... and {len(items) - limit} more (see --json)")
    return lines


def _check_level(level: float) -> float:
    level = float(level)
    if not 0 < level < 1:
        raise FitError(f"interval level must be in (0, 1), got {level}")
    return level


def _percentiles(values: np.ndarray, level: float) -> tuple[float, float] | None:
    values = values[np.isfinite(values)]
    if values.size < 2:
        return None
    lo, hi = np.quantile(values, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


# ------------------------------------------------------------------------------- budgets
@dataclass(frozen=True)
class Budget:
    """The runs of one compute budget, one point per distinct model size.

    Attributes are arrays of shape ``(n,)`` sorted by ``params``; when several runs share a
    size (e.g. a learning-rate sweep) only the lowest final loss is kept (as Porian et al.'s
    code does), and the others are named in :attr:`dropped`.
    """

    flops: float
    """The budget [FLOPs]: the ``budget`` column's value, else the geometric mean of the
    runs' ``flops``."""
    runs: tuple[str, ...]
    """Run id of each point."""
    params: np.ndarray
    """N of each point [params]."""
    tokens: np.ndarray
    """D of each point [tokens]."""
    loss: np.ndarray
    """Final loss of each point [the ladder's loss unit]."""
    spread: float
    """Largest relative deviation of a run's ``flops`` from :attr:`flops`."""
    dropped: tuple[str, ...] = ()
    """Runs not used because another run of the same size had a lower loss."""
    duplicates: tuple[tuple[str, ...], ...] = ()
    """Groups of runs sharing one model size N, the kept run (lowest loss, the first listed
    on a tie) first; every run of each group is named by the duplicate warning."""
    ties: tuple[tuple[float, tuple[str, ...]], ...] = ()
    """``(loss, runs)`` for every loss value shared by ``_TIE_MIN`` (3) or more of the
    budget's runs (counted before duplicates are dropped): tied or quantised losses."""
    n_rows: int = 0
    """Runs of the budget before duplicates were dropped."""
    duplicate_notes: tuple[str, ...] = ()
    """One message per group of :attr:`duplicates`, naming every run of the group."""

    @property
    def label(self) -> str:
        """``"C=1.25e+16"``: how messages name the budget."""
        return f"C={self.flops:.4g}"

    def __len__(self) -> int:
        return len(self.runs)


def _final_table(ladder: Ladder) -> tuple[pd.DataFrame, list[Exclusion]]:
    for col in ("params", "tokens"):
        if not ladder.has(col):
            raise LadderError(f"an isoFLOP analysis needs N and D per run, but ladder "
                              f"{ladder.name!r} has no {col!r} column")
    return ladder.final_points()


def group_budgets(table: pd.DataFrame | Ladder, *, tolerance: float = 0.05,
                  column: str = "budget") -> list[Budget]:
    """Group runs into compute budgets.

    Parameters
    ----------
    table:
        One row per run with columns ``run``, ``params``, ``tokens``, ``flops``, ``loss``
        (e.g. :meth:`Ladder.final_points`), or a :class:`Ladder` (its final points are used).
    tolerance:
        Without a ``column`` column, runs whose ``flops`` differ by at most this much
        (relative, i.e. ``|ln C_i - ln C_j| <= ln(1 + tolerance)`` between neighbours) share
        a budget.
    column:
        Name of a column holding each run's nominal budget [FLOPs]; used when present.

    Returns
    -------
    list of :class:`Budget`, sorted by FLOPs.

    Raises
    ------
    LadderError
        A required column is missing, ``tolerance`` is not positive, or the runs do not
        cluster: a chain of runs whose neighbours are within the tolerance spans more than
        twice the tolerance (the message names the first and last run of the chain and
        suggests a ``budget`` column).
    """
    if isinstance(table, Ladder):
        table, _ = _final_table(table)
    missing = [c for c in ("run", "params", "tokens", "flops", "loss") if c not in table.columns]
    if missing:
        raise LadderError(f"isoFLOP grouping needs column(s) {', '.join(missing)}; columns "
                          f"found: {', '.join(map(str, table.columns))}")
    if not (math.isfinite(tolerance) and tolerance > 0):
        raise LadderError(f"budget tolerance must be a positive number, got {tolerance!r}")
    t = table.reset_index(drop=True)
    flops = t["flops"].to_numpy(float)
    if column in t.columns and t[column].notna().all():
        keys = pd.to_numeric(t[column], errors="coerce").to_numpy(float)
        if not np.all(np.isfinite(keys) & (keys > 0)):
            bad = int(np.flatnonzero(~(np.isfinite(keys) & (keys > 0)))[0])
            raise LadderError(f"run {t.at[bad, 'run']!r}: {column!r} must be a positive number "
                              f"of FLOPs, got {t.at[bad, column]!r}")
        labels = keys
        values = {k: float(k) for k in np.unique(keys)}
    else:
        log_tol = math.log1p(tolerance)
        order = np.argsort(np.log(flops), kind="mergesort")
        logs = np.log(flops[order])
        cluster = np.zeros(len(t), dtype=int)
        starts = [0]
        for i in range(1, len(order)):
            if logs[i] - logs[i - 1] > log_tol:
                starts.append(i)
        starts.append(len(order))
        values = {}
        for k, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
            span = logs[b - 1] - logs[a]
            if span > 2 * log_tol:
                first, last = t.at[order[a], "run"], t.at[order[b - 1], "run"]
                raise LadderError(
                    f"runs do not cluster into compute budgets: {b - a} runs from {first!r} "
                    f"(C={flops[order[a]]:.4g}) to {last!r} (C={flops[order[b - 1]]:.4g}) span "
                    f"{math.expm1(span):.0%} with no gap wider than the {tolerance:.0%} "
                    f"tolerance; give a {column!r} column with each run's nominal budget, or a "
                    f"different tolerance")
            cluster[order[a:b]] = k
            values[k] = float(np.exp(np.mean(logs[a:b])))
        labels = cluster
    budgets = []
    for key in sorted(values, key=lambda k: values[k]):
        g = t[labels == key]
        c = values[key]
        spread = float(np.max(np.abs(g["flops"].to_numpy(float) / c - 1.0)))
        ties = _ties(g)
        # one point per size: the lowest loss (an LR or batch sweep at one size)
        g = g.sort_values(["params", "loss"], kind="mergesort")
        same = g["params"].duplicated(keep=False)
        groups = [d for _, d in g[same].groupby("params", sort=True)]
        duplicates = tuple(tuple(d["run"].astype(str)) for d in groups)
        label = f"C={c:.4g}"
        dup_notes = tuple(_duplicate_note(label, d) for d in groups)
        keep = ~g["params"].duplicated(keep="first")
        dropped = tuple(g.loc[~keep, "run"].astype(str))
        n_rows = len(g)
        g = g[keep]
        budgets.append(Budget(
            flops=c, runs=tuple(g["run"].astype(str)), params=g["params"].to_numpy(float),
            tokens=g["tokens"].to_numpy(float), loss=g["loss"].to_numpy(float), spread=spread,
            dropped=dropped, duplicates=duplicates, ties=ties, n_rows=n_rows,
            duplicate_notes=dup_notes))
    return budgets


def _names(runs: Sequence[str], limit: int = _MAX_LISTED) -> str:
    """``'a', 'b' and 'c'`` (at most ``limit`` names, then a count)."""
    q = [repr(str(r)) for r in runs[:limit]]
    more = len(runs) - len(q)
    if more:
        return ", ".join(q) + f" and {more} more"
    return q[0] if len(q) == 1 else ", ".join(q[:-1]) + " and " + q[-1]


def _duplicate_note(label: str, d: pd.DataFrame) -> str:
    """The warning for runs of one budget sharing N; ``d`` sorted by loss (kept run first)."""
    runs = list(d["run"].astype(str))
    loss = d["loss"].to_numpy(float)
    tokens = d["tokens"].to_numpy(float)
    tie = loss[1] == loss[0]
    text = (f"budget {label}: duplicate model size: runs {_names(runs)} "
            f"{'both' if len(runs) == 2 else 'all'} have "
            f"N = {float(d['params'].iloc[0]):.4g}; kept {runs[0]!r} ("
            + ("equal lowest loss, listed first" if tie else "lowest loss")
            + f"), {_names(runs[1:])} not used")
    spread = float(tokens.max() / tokens.min() - 1.0)
    if spread > 0.01:
        # one size in one budget should have one D (C = 6ND); a different D is a
        # different budget or a mislabelled tokens column
        text += (f"; their D differ by {spread:.0%} ({tokens.min():.4g} to {tokens.max():.4g}): "
                 f"C = 6ND cannot hold for {'both' if len(runs) == 2 else 'all'} of them, "
                 f"check the tokens and flops columns")
    return text


def _ties(g: pd.DataFrame) -> tuple[tuple[float, tuple[str, ...]], ...]:
    """Loss values shared by ``_TIE_MIN`` or more runs of one budget, with the runs (in
    order of N). Exact equality: losses that differ in any printed digit are not ties."""
    g = g.sort_values("params", kind="mergesort")
    out = []
    for value, d in g.groupby("loss", sort=True):
        if len(d) >= _TIE_MIN:
            out.append((float(value), tuple(d["run"].astype(str))))
    return tuple(out)


# ------------------------------------------------------------------------------- vertices
def _window(u: np.ndarray, y: np.ndarray, window: int | None) -> slice:
    """The ``window`` consecutive sizes centred (by rank) on the lowest loss; all if None."""
    n = len(u)
    if window is None or window >= n:
        return slice(0, n)
    i = int(np.argmin(y))
    lo = min(max(i - window // 2, 0), n - window)
    return slice(lo, lo + window)


def _coef_vertex(coef: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """Local minimum (v*, y*) of polynomials with coefficients ``coef`` (degree+1, B), highest
    power first; NaN where there is none (a parabola opening downward, a monotone cubic)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if degree == 2:
            a, b, c = coef
            return (np.where(a > 0, -b / (2 * a), np.nan),
                    np.where(a > 0, c - b * b / (4 * a), np.nan))
        p3, p2, p1, p0 = coef
        # p'(v) = 3 p3 v^2 + 2 p2 v + p1 = 0; the local minimum has p''(v) = 6 p3 v + 2 p2 > 0
        disc = (2 * p2) ** 2 - 12 * p3 * p1
        root = np.sqrt(np.where(disc >= 0, disc, np.nan))
        cand = np.stack([(-2 * p2 + root) / (6 * p3), (-2 * p2 - root) / (6 * p3)])
        curv = 6 * p3 * cand + 2 * p2
        vs = np.where(curv[0] > 0, cand[0], np.where(curv[1] > 0, cand[1], np.nan))
        flat = p3 == 0                          # exactly quadratic data
        vs = np.where(flat, np.where(p2 > 0, -p1 / (2 * p2), np.nan), vs)
        return vs, ((p3 * vs + p2) * vs + p1) * vs + p0


def _poly_vertices(u: np.ndarray, Y: np.ndarray, degree: int,
                   w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Vertices of least-squares polynomials of each column of Y (n, B) against u (n,).

    ``w`` (n,) are multiplicity weights (a resampled budget). u is centred and scaled before
    the solve so the normal equations stay well conditioned; with degree + 1 points the
    polynomial interpolates them. Returns (u*, y*) of shape (B,), NaN where no local minimum.
    """
    u0 = float(np.mean(u))
    scale = float(np.std(u)) or 1.0
    v = (u - u0) / scale
    design = np.stack([v ** k for k in range(degree, -1, -1)], axis=1)
    if w is not None:
        sw = np.sqrt(w)
        design, Y = design * sw[:, None], Y * sw[:, None]
    coef, *_ = np.linalg.lstsq(design, Y, rcond=None)
    vs, ys = _coef_vertex(coef, degree)
    return u0 + scale * vs, ys


def _akima_vertices(u: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Argmin of Akima splines of ln Y (n, B) against u on a 25 (n - 1) point grid.

    Returns (u*, y*, inside) of shape (B,); ``inside`` is False where the argmin is an end of
    the grid (Porian et al.'s code drops those)."""
    from scipy.interpolate import Akima1DInterpolator  # here, not at import: start-up time

    grid = np.linspace(u[0], u[-1], _AKIMA_REFINE * (len(u) - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = Akima1DInterpolator(u, np.log(Y), axis=0)(grid)   # (G, B)
    j = np.argmin(np.where(np.isfinite(z), z, np.inf), axis=0)
    inside = (j > 0) & (j < len(grid) - 1)
    return grid[j], np.exp(z[j, np.arange(z.shape[1])]), inside


def _vertices(method: str, u: np.ndarray, Y: np.ndarray,
              w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(u*, y*, inside) of the curve ``method`` fitted to every column of Y (n, B).

    u (n,) sorted ascending and distinct; ``w`` multiplicity weights (ignored by ``akima``,
    which interpolates). ``inside`` is True where the minimum lies within [u[0], u[-1]]
    (strictly inside the grid for ``akima``)."""
    if method == "akima":
        return _akima_vertices(u, Y)
    us, ys = _poly_vertices(u, Y, 2 if method == "parabola" else 3, w)
    inside = np.isfinite(us) & (us >= u[0]) & (us <= u[-1])
    return us, ys, inside


# ------------------------------------------------------------------------------- power laws
@dataclass(frozen=True)
class PowerLaw:
    """y = G C^a, fitted by (weighted) least squares of ln y on ln C.

    ``quantity`` is ``"params"`` (N*, parameters) or ``"tokens"`` (D*, tokens); C in FLOPs.
    """

    quantity: str
    """What y is: ``"params"`` or ``"tokens"``."""
    coefficient: float
    """G [y units / FLOPs^a]."""
    exponent: float
    """a [dimensionless]."""
    exponent_stderr: float
    """Standard error of a from the (weighted) residual scatter (NaN with 2 points)."""
    r2: float
    """(Weighted) coefficient of determination in log space."""
    n_points: int
    """Budgets (or envelope points) fitted."""
    weighted: bool
    """True when the fit used per-point weights."""
    exponent_interval: tuple[float, float] | None = None
    """Bootstrap percentile interval of a, when bootstrap draws were available."""
    level: float | None = None
    """Level of :attr:`exponent_interval` (e.g. 0.95)."""
    n_draws: int = 0
    """Bootstrap draws asked for per budget (0 without a bootstrap interval)."""
    n_valid: int = 0
    """Joint draws behind :attr:`exponent_interval`: draw k of every budget is fitted together,
    so this is the smallest number of valid draws (interior vertex) among the budgets."""

    def predict(self, flops: float | Sequence[float] | np.ndarray) -> np.ndarray:
        """y at compute ``flops`` [FLOPs], shape as ``np.asarray(flops)``."""
        c = np.asarray(flops, dtype=float)
        return self.coefficient * c ** self.exponent

    @property
    def formula(self) -> str:
        """E.g. ``"N* = 4.23e-08 * C^0.8353"``."""
        sym = {"params": "N*", "tokens": "D*"}.get(self.quantity, self.quantity)
        return f"{sym} = {self.coefficient:.4g} * C^{self.exponent:.4f}"

    def to_dict(self) -> dict:
        """JSON-ready fields."""
        return _jsonable({"quantity": self.quantity, "coefficient": self.coefficient,
                          "exponent": self.exponent, "exponent_stderr": self.exponent_stderr,
                          "exponent_interval": self.exponent_interval, "level": self.level,
                          "n_draws": self.n_draws, "n_valid_draws": self.n_valid,
                          "r2": self.r2, "n_points": self.n_points, "weighted": self.weighted})

    def report(self) -> str:
        """One line: formula, uncertainty of the exponent, fit quality.

        With a bootstrap interval, that interval is the uncertainty shown (with how many
        draws were valid): the residual standard error of a regression through a handful of
        vertices (1 residual dof for 3 budgets) ignores each vertex's own uncertainty and can
        be ~0 when the vertices happen to lie on a line. Without one, the residual standard
        error is shown with its degrees of freedom (none with 2 budgets)."""
        if self.exponent_interval is not None and self.level is not None:
            unc = (f", {self.level:.0%} bootstrap interval of a "
                   f"{_interval_text(self.exponent_interval, 4)} (from {self.n_valid} of "
                   f"{self.n_draws} draws, the fewest valid in any budget)")
        elif math.isfinite(self.exponent_stderr):
            unc = (f" +- {self.exponent_stderr:.2g} (s.e. of a from the scatter of "
                   f"{self.n_points} points, {self.n_points - 2} dof; no bootstrap interval)")
        else:
            unc = " (no uncertainty: 2 points and no bootstrap interval)"
        return (f"{self.formula}{unc}  ({_count(self.n_points, 'point')}, "
                f"{'weighted' if self.weighted else 'unweighted'}, R^2 {self.r2:.4f})")


def fit_power_law(flops: Sequence[float] | np.ndarray, values: Sequence[float] | np.ndarray,
                  *, weights: Sequence[float] | np.ndarray | None = None,
                  quantity: str = "params") -> PowerLaw:
    """Fit y = G C^a by weighted least squares of ln y on ln C.

    This is the fit of Hoffmann et al. 2022 (Approaches 1 and 2) and of Porian et al. 2024,
    whose code regresses ln N* on ln C with sample weights ``1 / sd^2``.

    Parameters
    ----------
    flops: C of each point, shape (n,) [FLOPs].
    values: y of each point, shape (n,) [params or tokens].
    weights: non-negative weight per point, shape (n,); ``None`` for an unweighted fit.
    quantity: label of y (``"params"`` or ``"tokens"``).

    Raises
    ------
    FitError
        Fewer than 2 points, non-positive or non-finite values, fewer than 2 distinct C, or
        bad weights.
    """
    c = np.asarray(flops, dtype=float)
    y = np.asarray(values, dtype=float)
    if c.shape != y.shape or c.ndim != 1:
        raise FitError(f"power-law fit of {quantity}: flops and values must be 1-D of the same "
                       f"length, got shapes {c.shape} and {y.shape}")
    if not (np.all(np.isfinite(c)) and np.all(c > 0) and np.all(np.isfinite(y)) and np.all(y > 0)):
        raise FitError(f"power-law fit of {quantity}: flops and values must be positive and finite")
    if len(np.unique(c)) < 2:
        raise FitError(f"power-law fit of {quantity} needs at least 2 distinct compute budgets, "
                       f"got {len(np.unique(c))}")
    w = np.ones_like(c) if weights is None else np.asarray(weights, dtype=float)
    if w.shape != c.shape or not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise FitError(f"power-law fit of {quantity}: weights must be finite, >= 0 and not all 0")
    x, z = np.log(c), np.log(y)
    sw = np.sqrt(w)
    design = np.stack([np.ones_like(x), x], axis=1)
    (b0, a), *_ = np.linalg.lstsq(design * sw[:, None], z * sw, rcond=None)
    resid = z - (b0 + a * x)
    n = len(x)
    zbar = np.sum(w * z) / np.sum(w)
    ss_tot = float(np.sum(w * (z - zbar) ** 2))
    ss_res = float(np.sum(w * resid ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    if n > 2:
        cov = (ss_res / (n - 2)) * np.linalg.inv(design.T @ (design * w[:, None]))
        se = float(math.sqrt(max(cov[1, 1], 0.0)))
    else:
        se = math.nan
    return PowerLaw(quantity=quantity, coefficient=float(math.exp(b0)), exponent=float(a),
                    exponent_stderr=se, r2=float(r2), n_points=n, weighted=weights is not None)


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
        return _jsonable({
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
        return (f"{self.flops:>10.4g} {self.n_sizes:>3d} {_g(n):>10} "
                f"{_interval_text(self.params_interval):>22} {_g(d):>10} "
                f"{_g(self.loss):>7} {'yes' if self.used else 'NO':>4}  "
                f"{', '.join(self.flags)}")


def _optimal(params_law: "PowerLaw", tokens_law: "PowerLaw", flops: float) -> dict:
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
                           f"{_g(b.params)}, D* = {_g(b.tokens)}, L* = {_g(b.loss)})")
        out = _optimal(self.params_law, self.tokens_law, flops)
        used = [b.flops for b in self.budgets if b.used]
        out["compute_check"] = FLOPS_PER_PARAM_TOKEN * out["params"] * out["tokens"] / flops
        out["extrapolation"] = float(flops) / max(used) if used else math.nan
        return out

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return _jsonable({
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
        level = self.budgets[0].level if self.budgets else 0.95
        center = s.get("center", "point")
        tag = " (median)" if center == "median" else ""
        lines = [head,
                 f"{'C [FLOPs]':>10} {'n':>3} {'N*' + tag:>10} {f'N* {level:.0%} interval':>22} "
                 f"{'D*' + tag:>10} {'L*':>7} {'used':>4}  flags"]
        lines += [b.report(center) for b in self.budgets]
        for name, law in (("params", self.params_law), ("tokens", self.tokens_law)):
            lines.append(f"{name:<10} " + (law.report() if law is not None else
                                           "no power law (one usable budget; see note)"))
        single = self._single()
        if self.params_law is None and single is not None:
            b = single
            lines.append(f"vertex     N* = {_g(b.params)} params "
                         f"({b.level:.0%} interval {_interval_text(b.params_interval)}), "
                         f"D* = {_g(b.tokens)} tokens "
                         f"({_interval_text(b.tokens_interval) or 'no interval'}), "
                         f"L* = {_g(b.loss)}")
        lines += _listed("note", list(self.notes))
        lines += _listed("excluded", [f"{e.run}: {e.reason}" for e in self.exclusions])
        lines += _listed("warning", list(self.warnings))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _budget_notes(label: str, flags: Sequence[str], position: float, n_left: int,
                  n_right: int, n_valid: int, n_draws: int, method: str) -> tuple[str, ...]:
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
        "too few sizes": f"fewer than {_MIN_SIZES[method]} distinct sizes; left out of the "
                         f"power-law fit",
        "unstable": f"only {n_valid} of {n_draws} bootstrap draws have an interior optimum",
    }
    # "wide", "tied" and "duplicates" carry numbers: their notes are made by the caller
    return tuple(f"budget {label}: {text[f]}" for f in flags if f in text)


def _tie_notes(b: Budget) -> tuple[str, ...]:
    return tuple(
        f"budget {b.label}: {len(runs)} of {b.n_rows} losses are equal ({value:.6g}: runs "
        f"{_names(runs)}): tied or quantised losses (rounded, or read off a plot) flatten the "
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
    if int(keep.sum()) < _MIN_SIZES[method]:
        return math.nan
    us, _, inside = _vertices(method, u[keep], y[keep][:, None])
    return math.exp(float(us[0])) if bool(inside[0]) and math.isfinite(us[0]) else math.nan


def _wide_note(label: str, method: str, width: tuple[float, float], params: float,
               narrow: float, n_within: int, interval: tuple[float, float] | None,
               level: float) -> str:
    below, above = width
    text = (f"budget {label}: the sizes reach {below:.3g}x below and {above:.3g}x above the "
            f"vertex, beyond the +-{_WIDE:g}x a {method} describes well (the loss is not "
            f"polynomial in ln N that far out)")
    if math.isfinite(narrow):
        text += (f"; refitted on the {n_within} sizes within {_WIDE:g}x, N* = {narrow:.4g}: the "
                 f"full grid's N* = {params:.4g} is off by about {params / narrow - 1:+.0%}")
        if interval is not None:
            # a shift inside the bootstrap interval cannot be told apart from noise
            inside = interval[0] <= narrow <= interval[1]
            text += (f" ({'inside' if inside else 'outside'} the {level:.0%} bootstrap interval "
                     f"of N*, {_interval_text(interval)})")
        text += f"; fit with window={n_within} (--window {n_within}) or method 'akima'"
    else:
        text += (f"; too few sizes ({n_within}) within {_WIDE:g}x of it to estimate the bias "
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
    if len(b) < _MIN_SIZES[method]:
        return _empty_optimum(b, ("too few sizes",), level, method), empty, empty
    sel = _window(np.log(b.params), b.loss, window)
    un, y = np.log(b.params[sel]), b.loss[sel]          # ascending in N
    ud_raw = np.log(b.tokens[sel])
    if len(np.unique(ud_raw)) < len(ud_raw):
        runs = np.asarray(b.runs)[sel]
        _, first, counts = np.unique(ud_raw, return_index=True, return_counts=True)
        d = ud_raw[first[np.argmax(counts > 1)]]
        same = np.flatnonzero(ud_raw == d)
        sizes = ", ".join(f"{b.params[sel][i]:.4g}" for i in same)
        raise LadderError(f"budget {b.label}: duplicate token count: runs {_names(runs[same])} "
                          f"all have D = {math.exp(d):.4g} but N = {sizes}; in one budget "
                          f"(C = 6ND) each size has its own D, so check the tokens column")
    d_order = np.argsort(ud_raw, kind="mergesort")     # ascending in D
    ud = ud_raw[d_order]

    us_n, ls_n, in_n = _vertices(method, un, y[:, None])
    us_d, _, in_d = _vertices(method, ud, y[d_order][:, None])
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
    if interior and not _CENTRAL[0] <= position <= _CENTRAL[1]:
        flags.append("off-centre")
    if interior and min(n_left, n_right) < _ASYMMETRY * max(n_left, n_right):
        flags.append("asymmetric")
    # Design of the grid around the vertex: its reach (a polynomial is a local approximation
    # of a curve that is not polynomial in ln N) and its balance (see IsoflopResult.design).
    width, narrow, balanced, n_within = None, math.nan, math.nan, 0
    if interior:
        width = (math.exp(un_star - un[0]), math.exp(un[-1] - un_star))
        near = np.abs(un - un_star) <= math.log(_WIDE)
        n_within = int(near.sum())
        if method != "akima" and max(width) > _WIDE:      # an interpolant is local already
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
            vn, _, okn = _vertices(method, un, Y)
            vd, _, okd = _vertices(method, ud, Y[d_order])
        else:
            idx = rng.integers(0, len(y), size=(n_draws, len(y)))
            vn, vd = np.full(n_draws, np.nan), np.full(n_draws, np.nan)
            okn, okd = np.zeros(n_draws, bool), np.zeros(n_draws, bool)
            rank_d = np.argsort(d_order)                   # position of point i in ud
            for k in range(n_draws):
                counts = np.bincount(idx[k], minlength=len(y)).astype(float)
                pick = np.flatnonzero(counts)              # ascending in N
                if len(pick) < _MIN_SIZES[method]:
                    continue
                pick_d = d_order[np.sort(rank_d[pick])]    # the same points, ascending in D
                a, _, o = _vertices(method, un[pick], y[pick][:, None], counts[pick])
                c, _, q = _vertices(method, np.log(b.tokens[sel])[pick_d], y[pick_d][:, None],
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
        return float(np.median(draws)), _percentiles(draws, level), sd

    pm, piv, psd = summary(vn)
    tm, tiv, tsd = summary(vd)
    used = not any(f in _EXCLUDING for f in flags)
    params = math.exp(un_star) if math.isfinite(un_star) else math.nan
    notes = _budget_notes(b.label, flags, position, n_left, n_right, n_valid, n_draws, method)
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
    if window is not None and (int(window) != window or window < _MIN_SIZES[method]):
        raise FitError(f"window must be an integer >= {_MIN_SIZES[method]} for method "
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
                  noise: float | None = None, level: float = 0.95, seed: int = 0,
                  center: str = "point", weighted: bool = False, ladder: str = "",
                  exclusions: Iterable[Exclusion] = ()) -> IsoflopResult:
    """Approach 2 on a table with one row per run (see :func:`isoflop_analysis`).

    ``table`` has columns ``run``, ``params``, ``tokens``, ``flops``, ``loss`` and optionally
    ``budget`` [FLOPs]. Other parameters, return value and errors as in
    :func:`isoflop_analysis`.
    """
    _check_settings(method, window, bootstrap, n_boot, noise, center, weighted)
    level = _check_level(level)
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
                           f"{_count(r.n_sizes, 'size')}) and "
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
        left = "; ".join(f"{o.label} ({', '.join(f for f in o.flags if f in _EXCLUDING)})"
                         for o in results if not o.used)
        note = (f"one of {_count(len(results), 'compute budget')} has an interior optimum "
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
            sel = _window(np.log(b.params), b.loss, window)
            u = np.log(b.params[sel] if quantity == "params" else b.tokens[sel])
            floor = _SD_FLOOR_FACTOR * (u.max() - u.min()) / (len(u) - 1)
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
        k_max = min(draws[i][0].size for i in used)
        if k_max >= 10:
            col = 0 if q == "params" else 1
            exps = [fit_power_law(c, np.array([draws[i][col][k] for i in used]), weights=w,
                                  quantity=q).exponent for k in range(k_max)]
            law = replace(law, exponent_interval=_percentiles(np.array(exps), level),
                           level=level, n_draws=int(n_boot), n_valid=int(k_max))
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
    design: dict = {"max_width": _WIDE, "max_drift": _DRIFT}
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
        text = (f"{len(wide)} of {len(ok)} budgets sample sizes beyond {_WIDE:g}x of their "
                f"vertex ({', '.join(design['wide'][:_MAX_LISTED])}"
                + (" ..." if len(wide) > _MAX_LISTED else "") + ")")
        if math.isfinite(a_narrow) and abs(a_narrow - a_all) < 5e-5:
            text += (f": refitting them on the sizes within {_WIDE:g}x leaves the exponent of "
                     f"N* ~ C^a at {a_all:.4f} (the bias is the same in every budget; N* is "
                     f"biased, see each budget)")
        elif math.isfinite(a_narrow):
            text += (f": refitting them on the sizes within {_WIDE:g}x moves the exponent of "
                     f"N* ~ C^a from {a_all:.4f} to {a_narrow:.4f} ({a_narrow - a_all:+.4f}; "
                     f"point vertices, unweighted, {int(fine.sum())} budgets)")
        out.append(text)

    centre_law, vertex_law = fit_power_law(c, [r.centre for r in ok]), fit_power_law(c, n)
    lo, hi = float(c.min()), float(c.max())
    ratio = [float(centre_law.predict(x) / vertex_law.predict(x)) for x in (lo, hi)]
    drift = ratio[1] / ratio[0]
    design.update(centre_exponent=centre_law.exponent, vertex_exponent=vertex_law.exponent,
                  centre_drift=drift, drift=bool(max(drift, 1 / drift) > _DRIFT))
    bal = np.array([r.balanced_params for r in ok])
    fine = np.isfinite(bal)
    a_ref, a_bal = exponent(c[fine], n[fine]), exponent(c[fine], bal[fine])
    design["exponent_balanced"], design["exponent_balanced_reference"] = a_bal, a_ref
    if design["drift"] and method != "akima":   # an interpolant has no global shape to bias
        text = (f"the sampling centre drifts against the vertices: along the trend, a budget's "
                f"geometric-mean size goes from {ratio[0]:.3g}x its vertex at C={lo:.4g} to "
                f"{ratio[1]:.3g}x at C={hi:.4g} (centres ~ C^{centre_law.exponent:.3f}, vertices ~ "
                f"C^{vertex_law.exponent:.3f}; a {max(drift, 1 / drift):.3g}x change, beyond "
                f"{_DRIFT:g}x); each budget's {method} is fitted off-centre by a different "
                f"amount, which biases the exponent")
        if math.isfinite(a_bal):
            text += (f"; trimming every budget to sizes balanced around its vertex gives "
                     f"a = {a_bal:.4f} (vs {a_ref:.4f} from the same {int(fine.sum())} budgets)")
        text += "; centre each budget's sizes on the fitted N*(C)"
        out.append(text)
    return design, out


def isoflop_analysis(ladder: Ladder, *, method: str = "parabola", window: int | None = None,
                     tolerance: float = 0.05, bootstrap: str = "resample", n_boot: int = 1000,
                     noise: float | None = None, level: float = 0.95, seed: int = 0,
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
        Level of the percentile intervals (default 0.95).
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
    points, dropped = _final_table(ladder)
    return isoflop_table(points, method=method, window=window, tolerance=tolerance,
                         bootstrap=bootstrap, n_boot=n_boot, noise=noise, level=level,
                         seed=seed, center=center, weighted=weighted, ladder=ladder.name,
                         exclusions=tuple(ladder.exclusions) + tuple(dropped))


# ------------------------------------------------------------------------------- approach 1
@dataclass(frozen=True)
class EnvelopePoint:
    """The run on the lower envelope of the loss curves at one compute value (Approach 1)."""

    flops: float
    """C [FLOPs]."""
    run: str
    """The run with the lowest interpolated loss at C."""
    params: float
    """Its N [params]."""
    tokens: float
    """Its D at C [tokens] (interpolated in ln C)."""
    loss: float
    """Its interpolated loss at C."""
    n_runs: int
    """Runs whose curves cover C."""
    edge: bool
    """True when the winner is the smallest or largest model covering C (the optimum may be
    outside the sizes available there)."""

    def to_dict(self) -> dict:
        """JSON-ready fields."""
        return _jsonable(dict(self.__dict__))


@dataclass(frozen=True)
class EnvelopeResult:
    """Compute-optimal N*(C) and D*(C) from the lower envelope of loss curves (Approach 1)."""

    points: tuple[EnvelopePoint, ...]
    """The envelope at every grid value, used or not."""
    params_law: PowerLaw
    """N* = G C^a, fitted to the non-edge envelope points (all points if ``drop_edge`` off)."""
    tokens_law: PowerLaw
    """D* = G' C^b."""
    settings: dict
    """n_grid, min_runs, drop_edge."""
    ladder: str = ""
    """Name of the ladder analysed."""
    warnings: tuple[str, ...] = ()
    """Everything the user should know."""
    exclusions: tuple[Exclusion, ...] = ()
    """Runs left out and why."""
    approach: int = 1
    """Hoffmann et al.'s approach number."""

    def optimal(self, flops: float) -> dict:
        """N*, D* and D*/N* at compute ``flops`` [FLOPs] from the two power laws.

        Raises
        ------
        TargetError
            ``flops`` not positive and finite.
        """
        return _optimal(self.params_law, self.tokens_law, flops)

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return _jsonable({
            "approach": self.approach, "ladder": self.ladder, "settings": self.settings,
            "params_law": self.params_law.to_dict(), "tokens_law": self.tokens_law.to_dict(),
            "points": [p.to_dict() for p in self.points], "warnings": list(self.warnings),
            "excluded": [{"run": e.run, "reason": e.reason} for e in self.exclusions]})

    def report(self) -> str:
        """Readable multi-line report."""
        used = [p for p in self.points if not (p.edge and self.settings.get("drop_edge"))]
        winners = sorted({p.run for p in used})
        lines = [f"lower-envelope analysis (Hoffmann et al. 2022, Approach 1) of "
                 f"{self.ladder or 'ladder'}: {len(self.points)} log-spaced FLOP values "
                 f"{self.points[0].flops:.3g}..{self.points[-1].flops:.3g}, {len(used)} used, "
                 f"{len(winners)} distinct winning runs",
                 f"params     {self.params_law.report()}",
                 f"tokens     {self.tokens_law.report()}"]
        lines += _listed("excluded", [f"{e.run}: {e.reason}" for e in self.exclusions])
        lines += _listed("warning", list(self.warnings))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def envelope_analysis(ladder: Ladder, *, n_grid: int = 100, min_runs: int = 2,
                      drop_edge: bool = True) -> EnvelopeResult:
    """Compute-optimal N*(C), D*(C) from the lower envelope of loss curves: Hoffmann et al.
    2022, Approach 1 (§3.1, Fig. 2).

    Each run's loss curve (its checkpoints; diverged runs excluded, unfinished runs kept) is
    interpolated linearly in ``(ln C, ln L)``, and ``ln D`` likewise. At ``n_grid`` log-spaced
    FLOP values between the smallest and largest C covered by at least ``min_runs`` curves,
    the run with the lowest interpolated loss is the envelope's minimiser; power laws
    N* = G C^a and D* = G' C^b are fitted to the minimisers (:func:`fit_power_law`).
    Hoffmann et al. use 1,500 FLOP values; the fit hardly changes beyond a hundred.

    Parameters
    ----------
    ladder: runs with checkpoints (``flops`` [FLOPs], ``params``, ``tokens``, ``loss`` per row).
    n_grid: number of log-spaced FLOP values.
    min_runs: a FLOP value is used only where at least this many curves cover it.
    drop_edge: leave out FLOP values whose winner is the smallest or largest model covering
        them (the true optimum may be outside the sizes available there).

    Returns
    -------
    EnvelopeResult

    Raises
    ------
    LadderError
        No ``params``/``tokens`` column, or no run has at least 2 checkpoints (Approach 1
        needs loss curves; use :func:`isoflop_analysis` for one row per run).
    FitError
        Too few FLOP values covered by ``min_runs`` curves, or fewer than 2 distinct winning
        sizes left to fit (the message says how many were edge points).
    """
    for col in ("params", "tokens"):
        if not ladder.has(col):
            raise LadderError(f"Approach 1 needs N and D per checkpoint, but ladder "
                              f"{ladder.name!r} has no {col!r} column")
    if int(n_grid) != n_grid or n_grid < 2:
        raise FitError(f"n_grid must be an integer >= 2, got {n_grid!r}")
    if int(min_runs) != min_runs or min_runs < 1:
        raise FitError(f"min_runs must be a positive integer, got {min_runs!r}")
    _, excluded = ladder.final_points(include_unfinished=True)
    diverged = {e.run for e in excluded}
    curves = []
    single = 0
    usable = ladder.table.dropna(subset=["flops", "params", "tokens", "loss"])
    for run, g in usable.groupby("run", sort=True):
        if run in diverged:
            continue
        g = g.sort_values("flops", kind="mergesort").drop_duplicates("flops", keep="last")
        if len(g) < 2:
            single += 1
            continue
        curves.append((str(run), float(g["params"].iloc[0]), np.log(g["flops"].to_numpy(float)),
                       np.log(g["loss"].to_numpy(float)), np.log(g["tokens"].to_numpy(float))))
    if not curves:
        raise LadderError(f"Approach 1 needs loss curves (several checkpoints per run), but "
                          f"every run of ladder {ladder.name!r} has one row; use the isoFLOP "
                          f"analysis (Approach 2) instead")
    lo = np.array([c[2][0] for c in curves])
    hi = np.array([c[2][-1] for c in curves])
    grid = np.linspace(lo.min(), hi.max(), int(n_grid))
    covering = (lo[None, :] <= grid[:, None]) & (hi[None, :] >= grid[:, None])   # (G, R)
    keep = covering.sum(axis=1) >= min_runs
    if keep.sum() < 2:
        raise FitError(f"ladder {ladder.name!r}: fewer than 2 of {n_grid} FLOP values are "
                       f"covered by {min_runs} or more loss curves")
    params = np.array([c[1] for c in curves])
    points = []
    for gi in np.flatnonzero(keep):
        x = grid[gi]
        idx = np.flatnonzero(covering[gi])
        losses = np.array([np.interp(x, curves[r][2], curves[r][3]) for r in idx])
        j = int(idx[np.argmin(losses)])
        run, n, lc, ll, ld = curves[j]
        pn = params[idx]
        points.append(EnvelopePoint(
            flops=float(math.exp(x)), run=run, params=n,
            tokens=float(math.exp(np.interp(x, lc, ld))), loss=float(math.exp(losses.min())),
            n_runs=int(idx.size), edge=bool(n <= pn.min() or n >= pn.max())))
    fitted = [p for p in points if not (drop_edge and p.edge)]
    n_edge = sum(p.edge for p in points)
    if len({p.params for p in fitted}) < 2:
        raise FitError(f"ladder {ladder.name!r}: the lower envelope has fewer than 2 distinct "
                       f"winning sizes to fit ({len(fitted)} of {len(points)} FLOP values "
                       f"left, {n_edge} won by the smallest or largest model covering them)")
    c = np.array([p.flops for p in fitted])
    laws = {q: fit_power_law(c, np.array([getattr(p, q) for p in fitted]), quantity=q)
            for q in ("params", "tokens")}
    warnings_ = []
    if n_edge:
        warnings_.append(f"{n_edge} of {len(points)} FLOP values are won by the smallest or "
                         f"largest model covering them"
                         + ("; left out of the power-law fits" if drop_edge else ""))
    if single:
        warnings_.append(f"{single} run(s) with a single checkpoint have no curve to interpolate "
                         f"and were not used")
    return EnvelopeResult(points=tuple(points), params_law=laws["params"],
                          tokens_law=laws["tokens"],
                          settings={"n_grid": int(n_grid), "min_runs": int(min_runs),
                                    "drop_edge": bool(drop_edge)},
                          ladder=ladder.name, warnings=tuple(warnings_),
                          exclusions=tuple(ladder.exclusions) + tuple(excluded))
