"""Approach 1 (Hoffmann et al. 2022, Section 3.1): the lower envelope of the loss curves."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import FitError, LadderError
from ...inputs.ladder import Exclusion, Ladder
from ._common import as_jsonable, listed_names
from .power_law import PowerLaw, fit_power_law
from .approach2 import optimal_point


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
        return as_jsonable(dict(self.__dict__))


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
        return optimal_point(self.params_law, self.tokens_law, flops)

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return as_jsonable({
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
        lines += listed_names("excluded", [f"{e.run}: {e.reason}" for e in self.exclusions])
        lines += listed_names("warning", list(self.warnings))
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
