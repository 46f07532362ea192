"""Compute budgets: grouping a ladder's final points by budget, duplicates and ties."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd

from ...errors import LadderError
from ...inputs.ladder import Exclusion, Ladder, columns_found
from ._common import MAX_LISTED, TIE_MIN


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
    """``(loss, runs)`` for every loss value shared by ``TIE_MIN`` (3) or more of the
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


def final_table(ladder: Ladder) -> tuple[pd.DataFrame, list[Exclusion]]:
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
        table, _ = final_table(table)
    missing = [c for c in ("run", "params", "tokens", "flops", "loss") if c not in table.columns]
    if missing:
        raise LadderError(f"isoFLOP grouping needs column(s) {', '.join(missing)}; "
                          f"{columns_found(table.columns)}")
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


def budget_names(runs: Sequence[str], limit: int = MAX_LISTED) -> str:
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
    text = (f"budget {label}: duplicate model size: runs {budget_names(runs)} "
            f"{'both' if len(runs) == 2 else 'all'} have "
            f"N = {float(d['params'].iloc[0]):.4g}; kept {runs[0]!r} ("
            + ("equal lowest loss, listed first" if tie else "lowest loss")
            + f"), {budget_names(runs[1:])} not used")
    spread = float(tokens.max() / tokens.min() - 1.0)
    if spread > 0.01:
        # one size in one budget should have one D (C = 6ND); a different D is a
        # different budget or a mislabelled tokens column
        text += (f"; their D differ by {spread:.0%} ({tokens.min():.4g} to {tokens.max():.4g}): "
                 f"C = 6ND cannot hold for {'both' if len(runs) == 2 else 'all'} of them, "
                 f"check the tokens and flops columns")
    return text


def _ties(g: pd.DataFrame) -> tuple[tuple[float, tuple[str, ...]], ...]:
    """Loss values shared by ``TIE_MIN`` or more runs of one budget, with the runs (in
    order of N). Exact equality: losses that differ in any printed digit are not ties."""
    g = g.sort_values("params", kind="mergesort")
    out = []
    for value, d in g.groupby("loss", sort=True):
        if len(d) >= TIE_MIN:
            out.append((float(value), tuple(d["run"].astype(str))))
    return tuple(out)
