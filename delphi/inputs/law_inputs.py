"""A ladder's rows turned into a law's inputs: the LR ratio h = lr / peak_lr per checkpoint,
the schedule areas S1 and S2 (Tissue et al. 2024, Eqs. 1-3), a checkpoint's fraction of its run,
and the points a law is fitted to.

This layer sits below :mod:`delphi.fitting` (which fits the points) and :mod:`delphi.curves`
(which completes runs): both read their inputs here, so neither imports the other for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import LadderError
from .ladder import Exclusion, Ladder, budget_labels, columns_found
from .schedules import LoggedSchedule, Schedule, features

if TYPE_CHECKING:
    from ..laws import Law

__all__ = ["ANNEALING_MOMENTUM", "budget_labels", "rows_inputs", "planned_steps", "run_schedule", "curve_inputs", "lr_ratio",
           "run_fraction", "law_points", "check_columns"]

#: Momentum lambda of the annealing area S2 (Tissue et al. 2024 use 0.999).
ANNEALING_MOMENTUM = 0.999
def planned_steps(g: pd.DataFrame, run: str) -> int:
    if "total_steps" in g.columns and g["total_steps"].notna().any():
        return int(round(float(g["total_steps"].dropna().iloc[0])))
    if "fraction" in g.columns and g["fraction"].notna().any() and "step" in g.columns:
        last = g.dropna(subset=["fraction"]).iloc[-1]
        return int(round(float(last["step"]) / float(last["fraction"])))
    if "step" in g.columns and "final" in g.columns and g["final"].any():
        return int(round(float(g.loc[g["final"].fillna(False).astype(bool), "step"].iloc[0])))
    raise LadderError(f"run {run!r}: its planned length is unknown; give a total_steps column, "
                      f"or fraction with step")


def run_schedule(ladder: Ladder, run: str, rows: pd.DataFrame | None = None
                 ) -> Schedule | LoggedSchedule:
    """The LR schedule of ``run``: the ladder's schedule shape with the run's peak LR and
    length, or else the run's logged ``lr`` column interpolated per step. ``rows``: the
    run's rows of the table, when the caller has them.

    Raises
    ------
    LadderError
        Unknown run, no ``step`` column, or neither a schedule shape nor a logged LR.
    """
    t = ladder.table
    g = t[t["run"] == run] if rows is None else rows
    if g.empty:
        raise LadderError(f"unknown run {run!r} in ladder {ladder.name!r}; runs: "
                          f"{', '.join(ladder.runs[:10])}{' ...' if len(ladder.runs) > 10 else ''}")
    if "step" not in g.columns or g["step"].isna().any():
        raise LadderError(f"run {run!r}: curve laws need the step of every checkpoint "
                          f"(a 'step' column)")
    total = planned_steps(g, run)
    if ladder.schedule and "peak_lr" in g.columns and g["peak_lr"].notna().any():
        return Schedule.parse(ladder.schedule, peak_lr=float(g["peak_lr"].dropna().iloc[0]),
                              total_steps=total)
    n_lr = int(g["lr"].notna().sum()) if "lr" in g.columns else 0
    if n_lr >= 2:
        logged = g.dropna(subset=["lr"])
        return LoggedSchedule.from_logged(logged["step"].to_numpy(), logged["lr"].to_numpy(),
                                          total_steps=max(total, int(logged["step"].max())))
    shape = "the ladder states no schedule shape (with peak_lr)"
    if "lr" not in g.columns:
        why = "the run logs no lr column"
    else:
        # The column is there: what is missing is a second checkpoint to read a schedule from.
        why = (f"its lr is logged at {n_lr} checkpoint(s) of its {len(g)} (a logged schedule "
               f"is interpolated between at least 2)")
    raise LadderError(f"run {run!r}: no LR schedule: {shape} and {why}")


def curve_inputs(ladder: Ladder, runs: list[str], own: dict | None = None
                 ) -> tuple[pd.DataFrame, dict, list, list]:
    """Checkpoint rows of ``runs`` with their schedule features, and the law inputs.
    ``own``: run -> its rows of the table, for the runs the caller has already selected.

    Returns (rows, x, schedules, notes): ``rows`` the ladder rows plus columns S1, S2, h;
    ``x`` the inputs curve laws read (``S1``, ``S2``, ``h``, ``step`` and the per-run LR
    context ``_lrs``/``_group``), each of shape (n,); ``schedules`` one per run; ``notes``
    what was adjusted (checkpoints logged past the planned end are evaluated at the end).

    Raises
    ------
    LadderError: see :func:`run_schedule`; a checkpoint step below 1.
    """
    parts, schedules, lrs, notes = [], [], [], []
    for i, run in enumerate(runs):
        mine = (own or {}).get(run)
        if mine is None:
            mine = ladder.table[ladder.table["run"] == run]
        sched = run_schedule(ladder, run, mine)
        g = mine
        steps = g["step"].to_numpy(float)
        if (steps < 1).any():
            raise LadderError(f"run {run!r}: checkpoint steps must be >= 1, got {steps.min():g}")
        over = steps > sched.total_steps
        if over.any():
            # The run logged a few steps past its planned end (at its final LR).
            notes.append(f"run {run!r}: {int(over.sum())} checkpoint(s) past the planned "
                         f"{sched.total_steps} steps are evaluated at the planned end")
            steps = np.minimum(steps, sched.total_steps)
            g = g.copy()
            g["step"] = steps
        f = features(sched, steps.astype(np.int64), momentum=ANNEALING_MOMENTUM)
        added = {"S1": f["S1"], "S2": f["S2"], "h": f["h"], "_group": i}
        if g is mine and g.index.is_unique and not any(c in g.columns for c in added):
            # The same frame as a copy with four columns inserted, at half the cost (one
            # concatenation; 0.2 ms a run of complete --all-runs).
            g = pd.concat([g, pd.DataFrame(added, index=g.index)], axis=1)
        else:
            g = g.copy() if g is mine else g
            for c, v in added.items():
                g[c] = v
        parts.append(g)
        schedules.append(sched)
        lrs.append(sched.lrs())
    rows = pd.concat(parts, ignore_index=True)
    x = {"S1": rows["S1"].to_numpy(float), "S2": rows["S2"].to_numpy(float),
         "h": rows["h"].to_numpy(float), "step": rows["step"].to_numpy(float),
         "_group": rows["_group"].to_numpy(), "_lrs": lrs}
    return rows, x, schedules, notes


def lr_ratio(ladder: Ladder, rows: pd.DataFrame) -> np.ndarray:
    """h = lr / peak_lr per row: from logged LRs, or from the ladder's schedule shape."""
    if "lr" in rows.columns and "peak_lr" in rows.columns and rows["lr"].notna().all() \
            and rows["peak_lr"].notna().all():
        return (rows["lr"] / rows["peak_lr"]).to_numpy(float)
    if ladder.schedule:
        h = np.empty(len(rows))
        codes, names = pd.factorize(rows["run"])
        slow = np.ones(len(names), dtype=bool)
        if {"step", "peak_lr", "total_steps"} <= set(rows.columns) and len(rows):
            # h = lr / peak_lr of a parametric schedule does not depend on the peak: one
            # evaluation per distinct planned length, for all rows of all runs at once.
            by_run = pd.DataFrame({"total": rows["total_steps"].to_numpy(float),
                                   "peak": rows["peak_lr"].to_numpy(float),
                                   "nostep": rows["step"].isna().to_numpy()}).groupby(codes)
            first = by_run[["total", "peak"]].first()
            ok = (first["total"].notna() & first["peak"].notna()
                  & ~by_run["nostep"].any()).to_numpy()
            total = np.round(first["total"].to_numpy(float)).astype(np.int64, copy=False)
            slow = ~ok
            fast_rows = ok[codes]
            steps = rows["step"].to_numpy(float)
            row_total = total[codes]
            for t_run in np.unique(row_total[fast_rows]):
                sel = fast_rows & (row_total == t_run)
                sched = Schedule.parse(ladder.schedule, peak_lr=1.0, total_steps=int(t_run))
                h[sel] = sched.lr_at(np.minimum(steps[sel], t_run).astype(np.int64))
        for i in np.flatnonzero(slow):        # logged LRs or missing columns: run by run
            idx = np.flatnonzero(codes == i)
            sched = run_schedule(ladder, names[i])
            steps = np.minimum(rows["step"].to_numpy(float)[idx], sched.total_steps)
            h[idx] = features(sched, steps.astype(np.int64))["h"]
        return h
    raise LadderError(f"ladder {ladder.name!r} gives no learning rate per checkpoint: a "
                      f"checkpoint law needs lr and peak_lr columns or a schedule shape")


def rows_inputs(law: Law, ladder: Ladder, rows: pd.DataFrame) -> dict[str, np.ndarray]:
    """``law``'s inputs at ``rows`` (rows of ``ladder``'s table): each input column as an
    array of shape (n,), and h (lr / peak_lr at the row) from the ladder's schedules."""
    x = {}
    for c in law.inputs:
        if c == "h":
            x[c] = lr_ratio(ladder, rows.reset_index(drop=True))
        else:
            x[c] = rows[c].to_numpy(float)
    return x


def run_fraction(rows: pd.DataFrame) -> np.ndarray:
    if "fraction" in rows.columns and rows["fraction"].notna().all():
        return rows["fraction"].to_numpy(float)
    if "step" in rows.columns and "total_steps" in rows.columns and rows["total_steps"].notna().all():
        return (rows["step"] / rows["total_steps"]).to_numpy(float)
    codes, _ = pd.factorize(rows["run"])
    tokens = rows["tokens"].to_numpy(float)
    run_max = np.full(codes.max() + 1 if len(codes) else 0, -np.inf)
    np.maximum.at(run_max, codes, tokens)
    return tokens / run_max[codes]


def check_columns(ladder: Ladder, law: Law) -> None:
    """Raise LadderError when ``ladder`` lacks a column ``law`` reads (the message lists the
    columns found); its LR ratio h is derived, not read. A forecast checks this before the
    target, so that a ladder the law cannot be fitted to is told before a target it would
    need."""
    missing = [c for c in law.inputs if c != "h" and not ladder.has(c)]
    if missing:
        raise LadderError(
            f"law {law.name!r} reads {', '.join(law.inputs)} but ladder {ladder.name!r} has no "
            f"{', '.join(missing)} column; {columns_found(ladder.table.columns)}")


def law_points(ladder: Ladder, law: Law, include_unfinished: bool, min_fraction: float, *,
               per_checkpoint: bool = False):
    """The points ``law`` is fitted to, and the exclusions: each finished run's final row, or
    (``per_checkpoint``: a checkpoint law, :data:`delphi.laws.CHECKPOINT_LAWS`) every
    checkpoint of every run past ``min_fraction`` of it, diverged runs left out.

    Raises
    ------
    LadderError: the ladder lacks a column the law reads (the message lists those found).
    """
    check_columns(ladder, law)
    if not per_checkpoint:
        return ladder.final_points(include_unfinished=include_unfinished)
    # Every checkpoint of every run counts, unfinished runs included; diverged runs do not.
    _, excluded = ladder.final_points(include_unfinished=True)
    dropped = {e.run for e in excluded}
    rows = ladder.table[~ladder.table["run"].isin(dropped)].reset_index(drop=True)
    rows = rows.assign(h=lr_ratio(ladder, rows))
    early = run_fraction(rows) < min_fraction
    if early.any():
        excluded = excluded + [Exclusion("*", f"{int(early.sum())} checkpoint(s) in the first "
                                              f"{min_fraction:.0%} of their run (warmup and initial "
                                              f"descent) not fitted")]
    return rows[~early].reset_index(drop=True), excluded
