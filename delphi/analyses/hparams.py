"""Hyperparameter laws: the optimal peak learning rate and batch size, fitted from sweeps.

Two steps, each inspectable on its own:

1. :func:`optimal_points` locates the optimum of every sweep. Runs are grouped (by default by
   model size and run length, ``(params, tokens)``); within a group, the final loss is fitted
   with a parabola in ``log(hparam)`` and its vertex is the group's optimum. A quadratic in
   log LR is the usual shape of loss-vs-LR curves near their optimum (Wortsman et al. 2023,
   arXiv 2309.14322, Fig. 1; DeepSeek LLM 2024, arXiv 2401.02954, Fig. 3). A sweep whose best
   sampled point is its lowest or highest value does not bracket the optimum: it is flagged
   ``"edge"`` and its best sampled value is kept as a bound, not an estimate.
2. :func:`fit_hparams` fits a power law to the bracketed optima with the one fitting engine
   (:func:`~delphi.fitting.fit_arrays`, a robust regression in log space):

   * ``"deepseek"``: eta_opt = c C^p and B_opt = c C^p (DeepSeek LLM 2024, arXiv 2401.02954,
     Eq. 1: eta_opt = 0.3118 C^-0.125, B_opt = 0.2920 C^0.3271, B in tokens);
   * ``"steplaw"``: eta_opt = c N^p D^q and B_opt = c D^q (Li et al. 2025, Step Law, arXiv
     2503.04715, Eqs. 6-7: eta_opt = 1.79 N^-0.713 D^0.307, B_opt = 0.58 D^0.571).

   The batch law is fitted only when some group sweeps ``batch_size``; otherwise the result
   says why it was not.

The papers' constants are kept below as references (:data:`REFERENCE_CONSTANTS`) and shown
beside the fitted ones; they come from other setups (DeepSeek's C counts non-embedding FLOPs
per token x tokens, Step Law's N is non-embedding parameters), so agreement is not expected.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import FitError, LadderError, LawError, TargetError, TargetInputError, option
from ..fitting.engine import DEFAULT_DELTA, fit_arrays
from ..fitting.result import Fit
from ..forecasting.uncertainty import DEFAULT_LEVEL, delta_interval
from ..inputs.ladder import FLOPS_PER_PARAM_TOKEN, Exclusion, Ladder, columns_found
from ..laws.base import Law
from ..laws.hparams import DEEPSEEK_BATCH, DEEPSEEK_LR, STEPLAW_BATCH, STEPLAW_LR
from ..core.parallel import map_jobs
from ..core.records import positive_number
from ..core.quantiles import check_level

__all__ = [
    "OptimaTable", "HparamFit", "ExcludedGroup", "optimal_points", "fit_hparams",
    "HPARAM_LAW_FAMILIES", "REFERENCE_CONSTANTS", "STATUSES",
]

# Where a result's left-out runs are listed, in both spellings (API and command line).
_EXTRA_KEY = option("to_dict()['extra']", "the --json output, key extra")

#: The law families of :func:`fit_hparams`: name -> (LR law, batch law).
HPARAM_LAW_FAMILIES: dict[str, tuple[Law, Law]] = {
    "deepseek": (DEEPSEEK_LR, DEEPSEEK_BATCH),
    "steplaw": (STEPLAW_LR, STEPLAW_BATCH),
}

#: Published constants, law name -> parameter -> value (units: LR dimensionless, B in tokens,
#: C in FLOPs, N in parameters, D in tokens).
#: DeepSeek LLM 2024 (arXiv 2401.02954) Eq. 1; Li et al. 2025 Step Law (arXiv 2503.04715) Eqs. 6-7.
REFERENCE_CONSTANTS: dict[str, dict[str, float]] = {
    "deepseek-lr": {"c": 0.3118, "p": -0.125},
    "deepseek-batch": {"c": 0.2920, "p": 0.3271},
    "steplaw-lr": {"c": 1.79, "p": -0.713, "q": 0.307},
    "steplaw-batch": {"c": 0.58, "q": 0.571},
}

#: Values of the ``status`` column of an :class:`OptimaTable`.
STATUSES = ("interior", "edge", "too few points")

_HPARAMS = ("peak_lr", "batch_size")
_SYMBOLS = {"params": "N", "tokens": "D", "flops": "C", "batch_size": "B", "peak_lr": "lr"}
# Hyperparameter values closer than this (relative) are the same setting (float round-off).
_SAME_VALUE_RTOL = 1e-9
# Edge warnings listed one by one in a FitError message before "... and k more".
_MAX_NAMED = 12


# ---------------------------------------------------------------------------------- helpers
def _fmt(value: Any) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.4g}"
    if isinstance(value, np.integer):
        return str(int(value))
    return str(value)


def _group_label(by: Sequence[str], key: Sequence[Any]) -> str:
    return ", ".join(f"{_SYMBOLS.get(c, c)}={_fmt(v)}" for c, v in zip(by, key))


def _jsonable(value: Any) -> Any:
    """Plain Python values for JSON: numpy scalars unwrapped, NaN/inf -> None."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    return value


def _merge_values(values: np.ndarray) -> np.ndarray:
    """Map values equal within a relative 1e-9 onto one representative (the first, sorted)."""
    order = np.argsort(values, kind="mergesort")
    out = values.astype(float).copy()
    rep = None
    for i in order:
        v = values[i]
        if rep is None or not math.isclose(v, rep, rel_tol=_SAME_VALUE_RTOL):
            rep = v
        out[i] = rep
    return out


@dataclass(frozen=True)
class _Optimum:
    """The optimum of one sweep (a 1-D curve of loss against a hyperparameter)."""

    status: str
    optimum: float
    loss: float
    method: str               # "vertex", "best sampled" or "none"
    vertex: float             # vertex of the fitted parabola (NaN if none / opens downward)
    curvature: float          # a in loss = a u^2 + b u + c, u = ln(hparam); NaN if not fitted
    best_value: float
    best_loss: float
    side: str                 # for edge sweeps: "below" (best = lowest value) or "above"
    n_fit: int


def _parabola(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Least-squares parabola of y against u = ln x: returns (a, vertex x, y at vertex).

    u is centred before the solve so the normal equations stay well conditioned; with three
    points the parabola interpolates them (exact vertex on quadratic data).
    """
    u = np.log(x)
    u0 = float(np.mean(u))
    v = u - u0
    design = np.stack([v ** 2, v, np.ones_like(v)], axis=1)
    (a, b, c), *_ = np.linalg.lstsq(design, y, rcond=None)
    if not a > 0:
        return float(a), math.nan, math.nan
    v_star = -b / (2 * a)
    return float(a), float(math.exp(u0 + v_star)), float(c - b * b / (4 * a))


def _locate(x: np.ndarray, y: np.ndarray, *, min_points: int, max_fit_points: int) -> _Optimum:
    """Optimum of one sweep: x distinct hyperparameter values (sorted), y mean losses."""
    n = len(x)
    if n == 0:
        return _Optimum("too few points", math.nan, math.nan, "none", math.nan, math.nan,
                        math.nan, math.nan, "", 0)
    ibest = int(np.argmin(y))
    best_x, best_y = float(x[ibest]), float(y[ibest])
    if n < min_points:
        return _Optimum("too few points", math.nan, math.nan, "none", math.nan, math.nan,
                        best_x, best_y, "", 0)
    # Far from the optimum the loss is not quadratic in log(hparam) (divergence on one side,
    # slow training on the other): fit the lowest few points only.
    use = np.sort(np.argsort(y, kind="mergesort")[:max_fit_points]) if n > max_fit_points \
        else np.arange(n)
    a, vertex, v_loss = _parabola(x[use], y[use])
    if ibest in (0, n - 1):
        # Not bracketed: the vertex would be an extrapolation (or the parabola opens
        # downward). Keep the best sampled value, a bound on the optimum, and flag it.
        return _Optimum("edge", best_x, best_y, "best sampled", vertex, a, best_x, best_y,
                        "below" if ibest == 0 else "above", len(use))
    lo, hi = float(np.min(x[use])), float(np.max(x[use]))
    if math.isfinite(vertex) and lo <= vertex <= hi:
        return _Optimum("interior", vertex, v_loss, "vertex", vertex, a, best_x, best_y, "",
                        len(use))
    # Bracketed by the samples, but the noisy parabola misplaces its vertex: use the best point.
    return _Optimum("interior", best_x, best_y, "best sampled", vertex, a, best_x, best_y, "",
                    len(use))


# ---------------------------------------------------------------------------------- optima
@dataclass(frozen=True)
class ExcludedGroup:
    """A sweep (group of runs) left out of a hyperparameter-law fit, and why."""

    group: str
    """Group label, e.g. ``"N=6.205e+07, D=1.049e+08"``."""
    reason: str
    """Human-readable reason."""
    kind: str = ""
    """``"edge"`` or ``"too few points"`` (the group's status), for grouping in reports."""
    hparam: str = "peak_lr"
    """The swept hyperparameter whose law the group was left out of."""


@dataclass(frozen=True)
class OptimaTable:
    """The optimum of each sweep of a ladder (see :func:`optimal_points`).

    Attributes
    ----------
    table:
        One row per group, sorted by the group keys. Columns: the group keys (``by``);
        ``group`` (label); ``flops`` (median C of the group's runs [FLOPs]); ``optimum`` (the
        optimal ``hparam``: parabola vertex for interior groups, best sampled value for edge
        groups, NaN for groups with too few points); ``loss_at_optimum``; ``status`` (one of
        :data:`STATUSES`); ``method`` (``"vertex"``, ``"best sampled"`` or ``"none"``);
        ``side`` (edge groups: ``"below"`` when the best value is the lowest sampled,
        ``"above"`` when it is the highest); ``vertex`` (the parabola's vertex, NaN when it
        opens downward); ``curvature`` (loss per (ln hparam)^2); ``best_sampled`` and
        ``best_loss``; ``n_points`` (distinct hparam values), ``n_runs`` (runs used),
        ``n_fit`` (values the parabola was fitted to); ``hparam_min`` / ``hparam_max`` (the
        sampled range); ``batch_size`` (the group's batch in tokens when constant, else NaN).
    hparam:
        The swept column (``"peak_lr"`` or ``"batch_size"``).
    by:
        The grouping columns.
    ladder:
        Name of the ladder.
    warnings:
        One line per edge group (naming it and the side of the sweep it is on) and per
        interior group whose parabola was unusable.
    notes:
        What was done to the data: replicate averaging, profiling over the other
        hyperparameter.
    exclusions:
        Runs left out before locating optima (unfinished, diverged, no ``hparam`` value).
    """

    table: pd.DataFrame
    hparam: str
    by: tuple[str, ...]
    ladder: str
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    exclusions: tuple[Exclusion, ...] = ()

    def with_status(self, *statuses: str) -> pd.DataFrame:
        """Rows whose ``status`` is one of ``statuses``."""
        return self.table[self.table["status"].isin(statuses)]

    @property
    def counts(self) -> dict[str, int]:
        """Number of groups per status (every status present, possibly 0)."""
        vc = self.table["status"].value_counts()
        return {s: int(vc.get(s, 0)) for s in STATUSES}

    def summary(self) -> str:
        """One line: how many groups are interior, edge (above / below) and too few."""
        c = self.counts
        edge = self.with_status("edge")
        above = int((edge["side"] == "above").sum())
        return (f"{len(self.table)} groups: {c['interior']} interior, {c['edge']} edge "
                f"({above} at the top of their sweep, {c['edge'] - above} at the bottom), "
                f"{c['too few points']} with too few points")

    def report(self, *, warnings: bool = True) -> str:
        """A readable table of the optima, with notes and (unless ``warnings=False``) the
        per-group warnings (the status column already marks edge groups)."""
        lines = [f"optima of {self.hparam} by {', '.join(self.by)} ({self.ladder}): "
                 f"{self.summary()}",
                 f"  {'group':<34} {'C [FLOPs]':>10} {'optimum':>10} {'loss':>8} "
                 f"{'pts':>3} {'sampled range':>21}  status"]
        for r in self.table.itertuples(index=False):
            status = r.status + (f" ({r.side})" if r.status == "edge" else "")
            if r.method == "best sampled" and r.status == "interior":
                status += " (best sampled)"
            lines.append(
                f"  {r.group:<34} {r.flops:>10.3g} {_fmt(r.optimum):>10} "
                f"{_fmt(r.loss_at_optimum):>8} {r.n_points:>3} "
                f"{_fmt(r.hparam_min):>10}..{_fmt(r.hparam_max):<10} {status}")
        for e in self.exclusions:
            lines.append(f"  excluded run  {e.run}: {e.reason}")
        for n in self.notes:
            lines.append(f"  note     {n}")
        for w in self.warnings if warnings else ():
            lines.append(f"  warning  {w}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def to_dict(self) -> dict:
        """JSON-ready: ``hparam``, ``by``, ``counts``, ``groups`` (one record per row), notes,
        warnings and excluded runs (NaN written as null)."""
        cols = list(self.by) + [c for c in self.table.columns if c not in self.by]
        return _jsonable({
            "hparam": self.hparam, "by": list(self.by), "ladder": self.ladder,
            "counts": self.counts,
            "groups": [dict(zip(cols, row)) for row in self.table[cols].itertuples(index=False)],
            "notes": list(self.notes), "warnings": list(self.warnings),
            "excluded_runs": [{"run": e.run, "reason": e.reason} for e in self.exclusions],
        })


def _edge_warnings(table: pd.DataFrame, hparam: str) -> list[str]:
    """One warning per edge group, naming it and the side of the sweep its optimum is on."""
    out = []
    for r in table[table["status"] == "edge"].itertuples(index=False):
        where = "lowest" if r.side == "below" else "highest"
        out.append(f"{r.group}: the best {hparam} {_fmt(r.best_sampled)} is the {where} sampled "
                   f"({_fmt(r.hparam_min)}..{_fmt(r.hparam_max)}), so the optimum is {r.side} "
                   f"the sweep; the best sampled value is kept as a bound")
    return out


def _fallback_warnings(table: pd.DataFrame, hparam: str) -> list[str]:
    """One warning per bracketed group whose parabola was unusable (best sampled value used)."""
    rows = table[(table["status"] == "interior") & (table["method"] == "best sampled")]
    return [f"{r.group}: the parabola through the lowest {r.n_fit} points does not have its "
            f"minimum inside them; the best sampled {hparam} {_fmt(r.best_sampled)} is used"
            for r in rows.itertuples(index=False)]


def _check_columns(ladder: Ladder, needed: Sequence[str], what: str) -> None:
    missing = [c for c in needed if not ladder.has(c)]
    if missing:
        raise LadderError(
            f"ladder {ladder.name!r} has no {', '.join(missing)} column (or it is empty), "
            f"needed {what}; {columns_found(ladder.table.columns)}")


def _group_optimum(job: tuple) -> tuple[dict, bool, bool]:
    """The optimum of one sweep, for :func:`optimal_points` (module level: run by workers).

    ``job`` is ``(by, key, g, min_points, max_fit_points)`` with ``g`` the group's rows
    (columns ``_h``, ``_o``, ``loss``, ``flops`` and ``batch_size`` when present). Returns the
    table row, whether replicates were averaged and whether the other hparam was profiled.
    """
    by, key, g, min_points, max_fit_points = job
    label = _group_label(by, key)
    # Average replicates: same hparam and same other setting.
    cell = g.groupby(["_h", "_o"], sort=True)["loss"].agg(["mean", "size"]).reset_index()
    replicated = bool((cell["size"] > 1).any())
    xs, ys = [], []
    profiled = False
    for h, sub in cell.groupby("_h", sort=True):
        xs.append(float(h))
        if len(sub) == 1 or (sub["_o"] <= 0).any():   # one setting, or one unknown
            ys.append(float(sub["mean"].min()))
            continue
        profiled = True
        inner = _locate(sub["_o"].to_numpy(float), sub["mean"].to_numpy(float),
                        min_points=min_points, max_fit_points=max_fit_points)
        ys.append(inner.loss if inner.status == "interior" else float(sub["mean"].min()))
    x, y = np.asarray(xs), np.asarray(ys)
    opt = _locate(x, y, min_points=min_points, max_fit_points=max_fit_points)
    batch = g["batch_size"].dropna().unique() if "batch_size" in g.columns else []
    row = {
        **dict(zip(by, key)), "group": label, "flops": float(g["flops"].median()),
        "optimum": opt.optimum, "loss_at_optimum": opt.loss, "status": opt.status,
        "method": opt.method, "side": opt.side, "vertex": opt.vertex,
        "curvature": opt.curvature, "best_sampled": opt.best_value,
        "best_loss": opt.best_loss, "n_points": len(x), "n_runs": len(g), "n_fit": opt.n_fit,
        "hparam_min": float(x.min()), "hparam_max": float(x.max()),
        "batch_size": float(batch[0]) if len(batch) == 1 else math.nan,
    }
    return row, replicated, profiled


def optimal_points(ladder: Ladder, *, by: Sequence[str] = ("params", "tokens"),
                   hparam: str = "peak_lr", min_points: int = 3,
                   max_fit_points: int = 5, n_jobs: int | None = None) -> OptimaTable:
    """Locate the optimal ``hparam`` of each sweep in ``ladder``.

    Each finished run (:meth:`Ladder.final_points`) contributes its final loss. Runs are
    grouped by the ``by`` columns; within a group:

    * runs with the same ``hparam`` value (and the same value of the other hyperparameter,
      ``peak_lr`` / ``batch_size``) are replicates and their losses are **averaged**;
    * when the other hyperparameter is also swept at a given ``hparam`` value, the loss there
      is its best over the other one (a profile: the vertex loss of that sub-sweep when it is
      bracketed, else its lowest loss), so the batch optimum is taken at the best LR and the
      LR optimum at the best batch;
    * a parabola in ``ln(hparam)`` is fitted to the losses (all points, or the
      ``max_fit_points`` lowest when there are more) and its vertex is the optimum.

    A group whose lowest loss is at its lowest or highest sampled value is ``"edge"``: its
    optimum is not bracketed, so the best sampled value is reported (a bound) and a warning
    names the group. A group with fewer than ``min_points`` distinct values is kept in the
    table with status ``"too few points"``.

    Parameters
    ----------
    ladder: the runs; needs ``loss``, ``hparam`` and the ``by`` columns.
    by: columns defining a sweep (default: model size and run length).
    hparam: the swept column, ``"peak_lr"`` (dimensionless) or ``"batch_size"`` [tokens].
    min_points: fewest distinct ``hparam`` values for a parabola (>= 3).
    max_fit_points: most points the parabola is fitted to (>= ``min_points``).
    n_jobs: sweeps located in parallel through :func:`delphi.parallel.map_jobs` (joblib
        convention: None the active ``parallel_config``, serial by default; 1 serial; -1 all
        cores). The table is the same whatever ``n_jobs``.

    Returns
    -------
    OptimaTable
        One row per group (see its docstring for the columns), warnings and notes.

    Raises
    ------
    LadderError: a ``by`` or ``hparam`` column is missing (the message lists the columns
        found), or the ladder has no finished run.
    FitError: ``min_points`` < 3 or ``max_fit_points`` < ``min_points``.
    """
    by = tuple(by)
    if min_points < 3:
        raise FitError(f"min_points must be at least 3 (a parabola has 3 coefficients), "
                       f"got {min_points}")
    if max_fit_points < min_points:
        raise FitError(f"max_fit_points ({max_fit_points}) must be >= min_points ({min_points})")
    if not by:
        raise LadderError("optimal_points needs at least one grouping column in 'by'")
    if hparam in by:
        raise LadderError(f"cannot group by the swept column {hparam!r}")
    _check_columns(ladder, (hparam,), f"to locate optimal {hparam}")
    _check_columns(ladder, by, f"to group runs into sweeps (by={', '.join(by)})")

    pts, dropped = ladder.final_points()
    exclusions = list(dropped)
    missing = pts[hparam].isna()
    for run in pts.loc[missing, "run"]:
        exclusions.append(Exclusion(str(run), f"no {hparam} value"))
    for c in by:
        for run in pts.loc[pts[c].isna() & ~missing, "run"]:
            exclusions.append(Exclusion(str(run), f"no {c} value (needed to group it)"))
    pts = pts[~missing & pts[list(by)].notna().all(axis=1)].copy()
    for c in ("loss", "flops", hparam):   # rows rebuilt from Series may come back as objects
        pts[c] = pts[c].astype(float)
    if pts.empty:
        raise LadderError(f"ladder {ladder.name!r} has no finished run with {hparam} and "
                          f"{', '.join(by)}")
    other = next((c for c in _HPARAMS if c != hparam and c not in by and ladder.has(c)), None)

    pts["_h"] = _merge_values(pts[hparam].to_numpy(float))
    # NaN means "unknown" for the other hyperparameter; treat unknown as one setting.
    pts["_o"] = (_merge_values(pts[other].fillna(-1.0).to_numpy(float)) if other
                 else 0.0)

    keep = ["_h", "_o", "loss", "flops"] + (["batch_size"] if "batch_size" in pts.columns else [])
    jobs = [(by, key if isinstance(key, tuple) else (key,), g[keep], min_points, max_fit_points)
            for key, g in pts.groupby(list(by), sort=True)]
    done = map_jobs(_group_optimum, jobs, n_jobs=n_jobs, desc=f"{hparam} sweeps", unit="sweep")
    rows = [row for row, _, _ in done]
    n_replicated = sum(rep for _, rep, _ in done)
    n_profiled = sum(prof for _, _, prof in done)

    notes = []
    if n_replicated:
        notes.append(f"replicate runs (same {hparam}" + (f" and {other}" if other else "")
                     + f") were averaged in {n_replicated} group(s)")
    if n_profiled:
        notes.append(f"{other} varies within {n_profiled} group(s): at each {hparam} the loss "
                     f"is the best over {other} (vertex of that sub-sweep when bracketed, else "
                     f"the lowest sampled)")
    table = pd.DataFrame(rows).reset_index(drop=True)
    warn = _edge_warnings(table, hparam) + _fallback_warnings(table, hparam)
    return OptimaTable(table=table, hparam=hparam, by=by,
                       ladder=ladder.name, warnings=tuple(warn), notes=tuple(notes),
                       exclusions=tuple(exclusions))


# ---------------------------------------------------------------------------------- laws
def _law_points(optima: OptimaTable, law: Law, include_edge: bool,
                role: str) -> tuple[pd.DataFrame, list[ExcludedGroup], list[str]]:
    """Rows of ``optima`` the law is fitted to, the groups left out, and warnings."""
    t = optima.table
    excluded, warns = [], []
    use = t["status"] == "interior"
    edge = t[t["status"] == "edge"]
    if len(edge):
        sides = edge["side"].value_counts()
        warns.append(
            f"{role}: {len(edge)} of {len(t)} group(s) do not bracket their optimum "
            f"({int(sides.get('above', 0))} above the sweep, {int(sides.get('below', 0))} below)"
            + ("" if include_edge else "; left out of the fit") + ": widen those sweeps")
    if include_edge:
        use |= t["status"] == "edge"
        n_edge = int((t["status"] == "edge").sum())
        if n_edge:
            warns.append(f"{role} law: {n_edge} edge group(s) included at their best sampled "
                         f"{optima.hparam} (bounds, not optima): they pull the law towards the "
                         f"sampled grid")
    for r in t.itertuples(index=False):
        if r.status == "too few points":
            excluded.append(ExcludedGroup(
                r.group, f"{role}: {r.n_points} distinct {optima.hparam} value(s), too few for "
                         f"a parabola", r.status, optima.hparam))
        elif r.status == "edge" and not include_edge:
            excluded.append(ExcludedGroup(
                r.group, f"{role}: edge - optimum {r.side} the sampled "
                         f"{optima.hparam} range {_fmt(r.hparam_min)}..{_fmt(r.hparam_max)}",
                r.status, optima.hparam))
    pts = t[use]
    for c in law.inputs:
        if c not in pts.columns or pts[c].isna().any():
            raise LadderError(f"law {law.name!r} reads {c!r}, which the optima table (grouped by "
                              f"{', '.join(optima.by)}) does not have; group by "
                              f"{', '.join(law.inputs)}")
    if pts.empty:
        statuses = ", ".join(f"{r.group} ({r.status}"
                             + (f" {r.side}" if r.status == "edge" else "") + ")"
                             for r in t.head(_MAX_NAMED).itertuples(index=False))
        more = f" and {len(t) - _MAX_NAMED} more" if len(t) > _MAX_NAMED else ""
        hint = ("" if include_edge else
                f"; {option('include_edge=True', '--include-edge')} uses the best sampled values")
        raise FitError(
            f"no finite {optima.hparam} optimum to fit the {role} law {law.name!r} on ladder "
            f"{optima.ladder!r}: no group brackets its optimum - {statuses}{more}. Widen the "
            f"sweeps{hint}")
    return pts, excluded, warns


def _fit_law(law: Law, pts: pd.DataFrame, delta: float, seed: int) -> Fit:
    x = {c: pts[c].to_numpy(float) for c in law.inputs}
    return fit_arrays(law, x, pts["optimum"].to_numpy(float), labels=list(pts["group"]),
                      delta=delta, seed=seed)


def _fit_law_job(job: tuple) -> Fit | FitError | LadderError:
    """One law fit for :func:`fit_hparams` (module level: run by workers). With ``catch``, a
    FitError or LadderError is returned instead of raised (the optional batch law)."""
    law, pts, delta, seed, catch = job
    try:
        return _fit_law(law, pts, delta, seed)
    except (FitError, LadderError) as exc:
        if not catch:
            raise
        return exc


def _batch_status(ladder: Ladder, by: Sequence[str]) -> str | None:
    """Why the batch law cannot be fitted, or None when some group sweeps batch_size."""
    if not ladder.has("batch_size"):
        return "the ladder has no batch_size column, so no batch law is fitted"
    b = ladder.table["batch_size"].dropna()
    if b.nunique() < 2:
        return (f"batch_size is {_fmt(float(b.iloc[0]))} tokens for every run, so the optimal "
                f"batch cannot be located; the batch law needs sweeps over batch size")
    per_group = ladder.table.dropna(subset=["batch_size"]).groupby(list(by))["batch_size"].nunique()
    if (per_group < 2).all():
        return (f"batch_size varies across groups ({', '.join(by)}) but never within one, so "
                f"no sweep locates an optimal batch; the batch law is not fitted")
    return None


@dataclass(frozen=True)
class HparamFit:
    """Fitted laws of the optimal peak LR (and batch size) for a ladder.

    Attributes
    ----------
    family: ``"deepseek"`` or ``"steplaw"``.
    ladder: the ladder's name.
    lr_fit: the fitted LR law (``deepseek-lr`` or ``steplaw-lr``); its ``y`` are the optima.
    lr_optima: the LR optimum of every group (:class:`OptimaTable`).
    batch_fit: the fitted batch law, or None (then :attr:`batch_note` says why).
    batch_optima: the batch optimum of every group, when batch size is swept.
    batch_note: why no batch law was fitted (None when it was).
    include_edge: whether edge groups were fitted at their best sampled values.
    excluded: groups left out of the fits, with reasons.
    warnings: everything to know: edge groups, fit warnings, the batch law's absence.
    """

    family: str
    ladder: str
    lr_fit: Fit
    lr_optima: OptimaTable
    batch_fit: Fit | None
    batch_optima: OptimaTable | None
    batch_note: str | None
    include_edge: bool
    excluded: tuple[ExcludedGroup, ...] = ()
    warnings: tuple[str, ...] = ()
    extra: dict = field(default_factory=dict)

    # -------------------------------------------------------------- prediction
    def _inputs(self, flops, params, tokens) -> tuple[dict[str, float], list[str]]:
        vals = {}
        for name, v in (("flops", flops), ("params", params), ("tokens", tokens)):
            if v is not None:
                vals[name] = positive_number(
                    v, f"target {name} must be a positive finite number", TargetError)
        notes = []
        if self.family == "steplaw":
            missing = [c for c in ("params", "tokens") if c not in vals]
            if missing:
                given = ("a FLOP budget alone does not fix them" if set(vals) == {"flops"}
                         else f"{' and '.join(missing)} not given")
                flags = " and ".join(option(c, f"--target-{c}") for c in missing)
                raise TargetInputError(f"the steplaw family needs the target's params and "
                                       f"tokens (N and D): {given}; give {flags}")
            if "flops" not in vals:
                vals["flops"] = FLOPS_PER_PARAM_TOKEN * vals["params"] * vals["tokens"]
        else:
            if "flops" not in vals:
                if "params" not in vals or "tokens" not in vals:
                    raise TargetInputError(
                        f"the deepseek family needs the target's flops, or both params and "
                        f"tokens (C = 6ND): give {option('flops', '--target-flops')}, or "
                        f"{option('params', '--target-params')} and "
                        f"{option('tokens', '--target-tokens')}")
                vals["flops"] = FLOPS_PER_PARAM_TOKEN * vals["params"] * vals["tokens"]
                notes.append("C = 6·N·D from the given params and tokens")
        return vals, notes

    @staticmethod
    def _range_warnings(fit: Fit, vals: Mapping[str, float], what: str) -> list[str]:
        out = []
        for c in fit.law.inputs:
            lo, hi = float(np.min(fit.x[c])), float(np.max(fit.x[c]))
            v = vals[c]
            if v > hi * (1 + 1e-9):
                out.append(f"{what}: target {c} {v:.3g} is {v / hi:.3g}x the largest fitted "
                           f"({hi:.3g}); the law is extrapolated")
            elif v < lo * (1 - 1e-9):
                out.append(f"{what}: target {c} {v:.3g} is below the smallest fitted ({lo:.3g})")
        return out

    def edge_bias(self, hparam: str = "peak_lr") -> dict | None:
        """Which way the groups that do not bracket their optimum bias the law, or None.

        An edge group's optimum lies beyond its sweep: above it (``side == "above"``) the true
        optimum exceeds the best sampled value, below it it is smaller. Left out, or fitted at
        their best sampled values (a bound), such groups pull the law towards the sampled
        grid; when they lie mostly on one side (at least 3 of 4) the law, and every value
        recommended from it, is biased that way: low when the optima lie above the sweeps.
        The groups are also a test of the fitted law as censored observations: a group whose
        optimum lies above its sweep contradicts the law where the law predicts less than its
        best sampled value (more, below).

        Returns
        -------
        None without edge groups or when they are not mostly on one side; else a dict:
        ``direction`` (``"low"`` or ``"high"``), ``n_above``, ``n_below``, ``n_groups`` (all
        groups of the optima table), ``n_contradicted`` (edge groups on the majority side
        whose bound the fitted law violates: the bias is evidenced when > 0),
        ``median_factor`` (median of bound / law prediction over those groups, > 1 for
        ``"low"``), ``included`` (whether they were fitted at their bounds) and ``text``
        (a warning of :meth:`recommend` when evidenced, else a note).
        """
        optima, fit = ((self.lr_optima, self.lr_fit) if hparam == "peak_lr"
                       else (self.batch_optima, self.batch_fit))
        if optima is None or fit is None:
            return None
        t = optima.table
        edge = t[t["status"] == "edge"]
        n_above, n_below = int((edge["side"] == "above").sum()), int((edge["side"] == "below").sum())
        if not len(edge) or max(n_above, n_below) < 0.75 * len(edge):
            return None
        side = "above" if n_above >= n_below else "below"
        rows = edge[edge["side"] == side]
        pred = fit.predict({c: rows[c].to_numpy(float) for c in fit.law.inputs})
        bound = rows["best_sampled"].to_numpy(float)
        bad = pred < bound if side == "above" else pred > bound
        factor = float(np.median(bound / pred))
        direction = "low" if side == "above" else "high"
        what = "peak LR" if hparam == "peak_lr" else "batch size"
        more = "less" if side == "above" else "more"
        text = (f"{what}: {len(rows)} of {len(edge)} group(s) that do not bracket their "
                f"optimum have it {side} their sweep, and they were "
                + ("fitted at their best sampled values (bounds)" if self.include_edge
                   else "left out"))
        if bad.any():
            text += (f"; the law predicts {more} than the best sampled value of {int(bad.sum())} "
                     f"of them (median bound / law {factor:.3g}x), so the law and the recommended "
                     f"{what} are biased {direction}: read the recommendation as a "
                     f"{'lower' if side == 'above' else 'upper'} estimate; its interval does not "
                     f"include this bias (widen those sweeps "
                     f"{'upwards' if side == 'above' else 'downwards'})")
        else:
            text += (f"; the law predicts {'more' if side == 'above' else 'less'} than the best "
                     f"sampled value of every one of them, so their bounds do not contradict it "
                     f"(a one-sided exclusion can still bias it {direction})")
        return {"direction": direction, "n_above": n_above, "n_below": n_below,
                "n_groups": len(t), "n_contradicted": int(bad.sum()), "median_factor": factor,
                "included": bool(self.include_edge), "text": text}

    @staticmethod
    def _interval(fit: Fit, x: Mapping[str, np.ndarray], level: float) -> dict:
        """Delta-method interval of a hyperparameter law at ``x``: ``lower``/``upper`` from the
        parameter covariance and the optima's scatter about the law (where the target's own
        optimum may lie), ``law_lower``/``law_upper`` from the covariance alone; or
        ``no_interval_reason``."""
        try:
            iv = delta_interval(fit, x, level=level)
        except FitError as exc:
            return {"lower": None, "upper": None, "law_lower": None, "law_upper": None,
                    "level": None, "method": None, "no_interval_reason": str(exc)}
        return {"lower": iv.lower, "upper": iv.upper, "law_lower": iv.mean_lower,
                "law_upper": iv.mean_upper, "level": level,
                "method": (f"delta method: the law's parameter covariance and the group optima's "
                           f"scatter about it (sigma {iv.noise:.3g} in ln, {iv.noise_source})"),
                "no_interval_reason": None}

    def recommend(self, flops: float | None = None, params: float | None = None,
                  tokens: float | None = None, *, level: float = DEFAULT_LEVEL) -> dict:
        """Optimal peak LR (and batch size, when a batch law was fitted) for a target run.

        Parameters
        ----------
        flops: C [FLOPs]; the ``deepseek`` family reads it (C = 6·N·D when only N, D given).
        params: N [parameters]; needed by ``steplaw``.
        tokens: D [tokens]; needed by ``steplaw``.
        level: level of the intervals, in (0, 1) (default 0.9).

        Returns
        -------
        dict (JSON-ready): ``family``; ``target`` (flops, params, tokens as known);
        ``peak_lr``; ``peak_lr_interval`` (``lower``/``upper``: delta-method interval from the
        law's parameter covariance and the scatter of the group optima about it, i.e. where
        the target's own optimum may lie; ``law_lower``/``law_upper``: the law's uncertainty
        alone; ``level``, ``method``, or ``no_interval_reason`` when there is none);
        ``batch_size`` [tokens] or None, with ``batch_size_interval`` likewise;
        ``batch_note`` (why it is None); ``bias`` (:meth:`edge_bias`: the edge groups lie
        mostly on one side, so the recommendation is biased that way; None otherwise);
        ``reference`` (the papers' constants evaluated at the same target, for comparison);
        ``warnings`` (one-sided edge bias, extrapolation beyond the fitted range, and the fits'
        own warnings); ``notes``.

        Raises
        ------
        TargetError: a needed input is missing, or a value is not positive and finite.
        FitError: ``level`` outside (0, 1).
        """
        level = check_level(level)
        vals, notes = self._inputs(flops, params, tokens)
        lr_law, batch_law = HPARAM_LAW_FAMILIES[self.family]
        x = {c: np.array([vals[c]]) for c in lr_law.inputs}
        warns = self._range_warnings(self.lr_fit, vals, "peak LR")
        out: dict[str, Any] = {
            "family": self.family,
            "target": {k: vals.get(k) for k in ("flops", "params", "tokens")},
            "peak_lr": float(self.lr_fit.predict(x)[0]),
            "peak_lr_interval": self._interval(self.lr_fit, x, level),
            "batch_size": None, "batch_size_interval": None, "batch_note": self.batch_note,
            "reference": {
                "peak_lr": float(lr_law.predict(REFERENCE_CONSTANTS[lr_law.name], x)[0]),
                "batch_size": float(batch_law.predict(
                    REFERENCE_CONSTANTS[batch_law.name],
                    {c: np.array([vals[c]]) for c in batch_law.inputs})[0]),
                "source": f"{lr_law.source}; {batch_law.source}",
            },
        }
        if self.batch_fit is not None:
            xb = {c: np.array([vals[c]]) for c in batch_law.inputs}
            out["batch_size"] = float(self.batch_fit.predict(xb)[0])
            out["batch_size_interval"] = self._interval(self.batch_fit, xb, level)
            warns += self._range_warnings(self.batch_fit, vals, "batch size")
        out["bias"] = self.edge_bias("peak_lr")
        out["batch_bias"] = self.edge_bias("batch_size") if self.batch_fit is not None else None
        biased = [b["text"] for b in (out["bias"], out["batch_bias"]) if b and b["n_contradicted"]]
        notes = notes + [b["text"] for b in (out["bias"], out["batch_bias"])
                         if b and not b["n_contradicted"]]
        warns = biased + warns
        # Law-level warnings only; per-group ones stay in :attr:`warnings` and the report.
        out["warnings"] = warns + [f"peak LR law: {w}" for w in self.lr_fit.warnings] + (
            [f"batch law: {w}" for w in self.batch_fit.warnings] if self.batch_fit else [])
        out["notes"] = notes
        return _jsonable(out)

    # -------------------------------------------------------------- reporting
    @staticmethod
    def _law_block(fit: Fit, role: str) -> list[str]:
        ref = REFERENCE_CONSTANTS[fit.law.name]
        rms = float(np.sqrt(np.mean(fit.residuals ** 2))) if len(fit.residuals) else math.nan
        lines = [f"{role} law  {fit.law.name}: {fit.law.formula}",
                 f"  source     {fit.law.source}",
                 f"  fitted to  {fit.n_points} group optima; converged "
                 f"{'yes' if fit.converged else 'NO'}; rms log residual {rms:.3g} "
                 f"(x{math.exp(rms):.3g})",
                 f"  {'param':<6} {'fitted':>12} {'+- s.e.':>10} {'reference':>12}"]
        for name, value in fit.params.items():
            se = fit.stderr.get(name)
            se_s = f"{se:.3g}" if se is not None and math.isfinite(se) else "-"
            lines.append(f"  {name:<6} {value:>12.5g} {se_s:>10} {ref[name]:>12.5g}")
        lines += [f"  warning    {w}" for w in fit.warnings]
        return lines

    def report(self, *, groups: bool = True) -> str:
        """A readable report: fitted laws beside the papers' constants, optima, exclusions.

        ``groups=False`` leaves out the per-group optima tables.
        """
        lines = [f"hyperparameter laws ({self.family}) for ladder {self.ladder!r}",
                 f"optima     peak LR: {self.lr_optima.summary()}"]
        if self.batch_optima is not None:
            lines.append(f"           batch size: {self.batch_optima.summary()}")
        n_used = int(self.lr_optima.table["n_runs"].sum())
        n_out = len(self.extra.get("excluded_runs", ()))
        lines.append(f"runs       {n_used} finished runs in {len(self.lr_optima.table)} groups by "
                     f"{', '.join(self.lr_optima.by)}; {n_out} run(s) left out (reader, "
                     f"unfinished, diverged or no peak_lr; see {_EXTRA_KEY})")
        for n in self.lr_optima.notes + (self.batch_optima.notes if self.batch_optima else ()):
            lines.append(f"note       {n}")
        edge = ("included at their best sampled values" if self.include_edge
                else f"excluded ({option('include_edge=False', 'no --include-edge')})")
        lines.append(f"edge       groups {edge}")
        lines += self._law_block(self.lr_fit, "peak LR")
        if self.batch_fit is not None:
            lines += self._law_block(self.batch_fit, "batch")
        else:
            lines.append(f"batch law  not fitted: {self.batch_note}")
        lines.append("reference constants come from other setups (DeepSeek: C = non-embedding "
                     "FLOPs/token x D; Step Law: N = non-embedding params): compare, do not expect "
                     "agreement")
        if groups:
            lines.append(self.lr_optima.report(warnings=False))
            if self.batch_optima is not None:
                lines.append(self.batch_optima.report(warnings=False))
        for hp in ("peak_lr", "batch_size"):
            for kind in ("edge", "too few points"):
                hit = [e for e in self.excluded if e.kind == kind and e.hparam == hp]
                if hit:
                    what = ("edge (optimum outside the sweep)" if kind == "edge"
                            else "too few points")
                    text = (f"excluded   {len(hit)} {hp} group(s), {what}: "
                            + "; ".join(e.group for e in hit))
                    lines += textwrap.wrap(text, 100, subsequent_indent=" " * 11)
        for w in self.warnings:
            lines.append(f"warning    {w}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def to_dict(self) -> dict:
        """JSON-ready summary: family, ladder, the fitted laws (params, diagnostics) with the
        reference constants, the optima tables, excluded groups, warnings."""
        def law(fit: Fit | None) -> dict | None:
            if fit is None:
                return None
            d = fit.to_dict()
            d["formula"] = fit.law.formula
            d["source"] = fit.law.source
            d["reference"] = dict(REFERENCE_CONSTANTS[fit.law.name])
            return d
        return _jsonable({
            "family": self.family, "ladder": self.ladder, "include_edge": self.include_edge,
            "lr_law": law(self.lr_fit), "batch_law": law(self.batch_fit),
            "batch_note": self.batch_note,
            "optima": {"peak_lr": self.lr_optima.to_dict(),
                       "batch_size": self.batch_optima.to_dict() if self.batch_optima else None},
            "excluded_groups": [{"group": e.group, "hparam": e.hparam, "status": e.kind,
                                 "reason": e.reason} for e in self.excluded],
            "warnings": list(self.warnings),
            "extra": self.extra,
        })

    def _repr_pretty_(self, p, cycle) -> None:  # IPython/Jupyter
        p.text(self.report())


def fit_hparams(ladder: Ladder, law: str = "deepseek", *, include_edge: bool = False,
                by: Sequence[str] | None = None, min_points: int = 3, max_fit_points: int = 5,
                delta: float = DEFAULT_DELTA, seed: int = 0,
                n_jobs: int | None = None) -> HparamFit:
    """Fit the optimal peak LR (and batch size) laws of a family to a ladder of sweeps.

    Parameters
    ----------
    ladder: runs sweeping ``peak_lr`` (and optionally ``batch_size`` [tokens]) at several
        model sizes / run lengths.
    law: ``"deepseek"`` (eta_opt = c C^p, B_opt = c C^p; DeepSeek LLM 2024, arXiv
        2401.02954, Eq. 1) or ``"steplaw"`` (eta_opt = c N^p D^q, B_opt = c D^q; Li et al.
        2025, arXiv 2503.04715, Eqs. 6-7).
    include_edge: also fit groups whose optimum lies at the edge of their sweep, at their
        best sampled value (a bound, which biases the law towards the sampled grid).
    by: columns defining a sweep; default ``("params", "tokens")``, or ``("flops",)`` for
        ``deepseek`` on a ladder without N and D.
    min_points, max_fit_points: see :func:`optimal_points`.
    delta: Huber delta on log residuals of the optima (default: the engine's 1e-3, which
        makes the regression nearly least-absolute-deviation, robust to a stray optimum).
    seed: seed of the engine's search (results are deterministic for a given seed).
    n_jobs: the sweeps' optima and the LR and batch laws are computed in parallel through
        :func:`delphi.parallel.map_jobs` (joblib convention: None the active
        ``parallel_config``, serial by default; 1 serial; -1 all cores). Results are identical
        whatever ``n_jobs``.

    Returns
    -------
    HparamFit
        With ``recommend(...)``, ``report()`` and ``to_dict()``. When the batch size is never
        swept within a group, ``batch_fit`` is None and ``batch_note`` says why.

    Raises
    ------
    LawError: unknown family (the message lists ``deepseek`` and ``steplaw``).
    LadderError: no ``peak_lr`` column (the message lists the columns found); the family's
        inputs cannot be formed (``steplaw`` needs ``params`` and ``tokens``).
    FitError: no group brackets its LR optimum (the message names the groups and their
        status), or fewer usable groups than the law has parameters.
    IdentifiabilityError: the optima do not vary an input the law needs (e.g. one N only).
    """
    family = str(law).lower()
    if family not in HPARAM_LAW_FAMILIES:
        raise LawError(f"unknown hyperparameter law {law!r}; known: "
                       f"{', '.join(repr(k) for k in HPARAM_LAW_FAMILIES)}")
    lr_law, batch_law = HPARAM_LAW_FAMILIES[family]
    _check_columns(ladder, ("peak_lr",), "to fit a learning-rate law")
    if by is None:
        by = ("params", "tokens") if ladder.has("params", "tokens") or family == "steplaw" \
            else ("flops",)
    by = tuple(by)
    if family == "steplaw":
        _check_columns(ladder, ("params", "tokens"), "by the steplaw family (N and D)")

    lr_optima = optimal_points(ladder, by=by, hparam="peak_lr", min_points=min_points,
                               max_fit_points=max_fit_points, n_jobs=n_jobs)
    pts, excluded, warns = _law_points(lr_optima, lr_law, include_edge, "peak LR")
    fits = [(lr_law, pts, delta, seed, False)]

    batch_fit, batch_optima = None, None
    batch_warns: list[str] = []
    batch_note = _batch_status(ladder, by)
    if batch_note is None:
        batch_optima = optimal_points(ladder, by=by, hparam="batch_size", min_points=min_points,
                                      max_fit_points=max_fit_points, n_jobs=n_jobs)
        batch_warns += _fallback_warnings(batch_optima.table, "batch_size")
        try:
            bpts, bexcl, bwarn = _law_points(batch_optima, batch_law, include_edge, "batch")
            excluded += bexcl
            batch_warns += bwarn
            fits.append((batch_law, bpts, delta, seed, True))
        except (FitError, LadderError) as exc:
            # The LR law stands on its own; say why the batch law is missing instead of failing.
            batch_note = f"batch law not fitted: {exc}"
            batch_warns.append(batch_note)
    # The LR law and the batch law are fitted as two jobs (an LR-law error is raised).
    fitted = map_jobs(_fit_law_job, fits, n_jobs=n_jobs, desc="hparam laws", unit="law")
    lr_fit = fitted[0]
    # Per-group edge warnings stay on the optima table; the summary from _law_points names
    # their count, and `excluded` names the groups.
    warns = _fallback_warnings(lr_optima.table, "peak_lr") + warns \
        + [f"peak LR law: {w}" for w in lr_fit.warnings] + batch_warns
    if len(fitted) > 1:
        if isinstance(fitted[1], Fit):
            batch_fit = fitted[1]
            warns += [f"batch law: {w}" for w in batch_fit.warnings]
        else:
            batch_note = f"batch law not fitted: {fitted[1]}"
            warns.append(batch_note)
    return HparamFit(
        family=family, ladder=ladder.name, lr_fit=lr_fit, lr_optima=lr_optima,
        batch_fit=batch_fit, batch_optima=batch_optima, batch_note=batch_note,
        include_edge=include_edge, excluded=tuple(excluded), warnings=tuple(warns),
        extra={"source": ladder.source, "metric": ladder.metric, "unit": ladder.unit,
               "by": list(by), "huber_delta": delta,
               "excluded_runs": [{"run": e.run, "reason": e.reason}
                                 for e in list(ladder.exclusions) + list(lr_optima.exclusions)]})
