"""The canonical ladder table: one validated, tidy row per (run, checkpoint).

Every reader returns a :class:`Ladder`; every law, fit and analysis reads one. Columns
(units in brackets):

=================  ==========================================================================
``run``            run id (str)
``params``         N, parameter count [count]
``tokens``         D, tokens seen at this row [tokens]
``flops``          C, training FLOPs spent up to this row [FLOPs]; 6·N·D when not given
``loss``           eval loss at this row [nats/token unless :attr:`Ladder.unit` says otherwise]
``step``           optimiser step (optional)
``lr``             learning rate at this step (optional)
``peak_lr``        peak learning rate of the run's schedule (optional)
``batch_size``     batch size [tokens] (optional)
``active_params``  active parameters per token for MoE models [count] (optional)
``final``          True on the last checkpoint of a finished run (optional)
``fraction``       share of the planned run completed at this row, in (0, 1] (optional)
``total_steps``    planned length of the run's LR schedule [steps] (optional)
``row``            0-based row of the source table the row came from (added if absent)
=================  ==========================================================================

Any other column is kept as free metadata.
"""

from __future__ import annotations

import hashlib
import math
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import LadderError, LadderWarning

__all__ = ["Ladder", "Exclusion", "CANONICAL_COLUMNS", "FLOPS_PER_PARAM_TOKEN"]

#: Training FLOPs per parameter per token (forward + backward), Kaplan et al. 2020, Eq. 2.1.
FLOPS_PER_PARAM_TOKEN = 6.0

CANONICAL_COLUMNS: tuple[str, ...] = (
    "run", "params", "tokens", "flops", "loss", "step", "lr", "peak_lr", "batch_size",
    "active_params", "final", "fraction", "total_steps",
)
_POSITIVE = ("params", "tokens", "flops", "loss", "peak_lr", "batch_size", "active_params",
             "total_steps")
_NONNEGATIVE = ("step", "lr")
_PER_RUN = ("params", "active_params", "peak_lr", "batch_size", "total_steps")

# A run's own FLOP column may differ from 6ND by up to this much before we say so.
_FLOPS_RUN_TOLERANCE = 0.25
_FLOPS_MEDIAN_RANGE = (0.5, 2.0)


@dataclass(frozen=True)
class Exclusion:
    """A run (or row) left out of a fit, and why. Exclusions are reported, never silent."""

    run: str
    """Run id."""
    reason: str
    """Human-readable reason, e.g. ``"unfinished (fraction = 0.8)"``."""


class _RunInfo(BaseModel):
    """Per-run constants, validated once per run."""

    model_config = ConfigDict(extra="forbid")
    run: str = Field(min_length=1)
    params: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    active_params: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    peak_lr: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    batch_size: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    total_steps: float | None = Field(default=None, gt=0, allow_inf_nan=False)


def _show(value) -> str:
    """A cell value for a message: plain numbers (no numpy reprs), quoted strings."""
    if isinstance(value, (np.generic,)):
        value = value.item()
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _row_label(table: pd.DataFrame, idx) -> str:
    run = table.at[idx, "run"] if "run" in table.columns else "?"
    row = table.at[idx, "row"] if "row" in table.columns else idx
    return f"run {run!r} (row {row})"


def _coerce_bool(series: pd.Series, column: str, table: pd.DataFrame) -> pd.Series:
    truthy = {"true": True, "1": True, "yes": True, "t": True,
              "false": False, "0": False, "no": False, "f": False}
    out = []
    for idx, value in series.items():
        if isinstance(value, (bool, np.bool_)):
            out.append(bool(value))
        elif isinstance(value, (int, np.integer, float, np.floating)) and value in (0, 1):
            out.append(bool(value))
        elif isinstance(value, str) and value.strip().lower() in truthy:
            out.append(truthy[value.strip().lower()])
        elif value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            out.append(pd.NA)  # unknown, not "not final"
        else:
            raise LadderError(
                f"{_row_label(table, idx)}: column {column!r} must be true/false, got {value!r}")
    return pd.Series(out, index=series.index, dtype="boolean")


class Ladder:
    """A validated ladder of training runs (one row per run and checkpoint).

    Parameters
    ----------
    table:
        A DataFrame with at least ``run``, ``loss`` and either ``flops`` or both ``params``
        and ``tokens`` (see the module docstring for every canonical column and its unit).
    source:
        Where the data came from (a path or a bundled ladder name); recorded in forecasts.
    name:
        Short name of the ladder (defaults to ``source``).
    metric:
        Name of the eval metric in ``loss`` (e.g. ``"paloma/macro_loss"``).
    unit:
        Unit of ``loss``: ``"nats/token"`` (default) or ``"bits/byte"``.
    exclusions:
        Rows or runs a reader or manifest already left out, kept for the report.
    schedule:
        The runs' LR schedule shape, e.g. ``"cosine:warmup=50,final=0.1"``
        (:meth:`delphi.schedules.Schedule.parse`), completed per run by ``peak_lr`` and
        ``total_steps``; ``None`` when unknown (a logged ``lr`` column can stand in).

    Raises
    ------
    LadderError
        A required column is missing (the message lists the columns found), a value is
        non-numeric, NaN, infinite, zero or negative (the message names run, row and column),
        a (run, step) pair repeats, or a per-run constant (``params``...) varies within a run.

    Notes
    -----
    When ``flops`` is absent it is computed as C = 6·N·D (Kaplan et al. 2020, Eq. 2.1), with
    N = ``active_params`` where given (MoE). A given ``flops`` column is compared with 6·N·D:
    a median ratio outside 0.5..2 or single runs straying from the median by more than 25%
    are reported in :attr:`warnings` (a budget taken from a run's name can be forward-only,
    a third of the training compute).
    """

    def __init__(self, table: pd.DataFrame, *, source: str = "<memory>", name: str | None = None,
                 metric: str = "loss", unit: str = "nats/token",
                 exclusions: Iterable[Exclusion] = (), schedule: str | None = None) -> None:
        self.source = str(source)
        self.schedule = schedule
        self.name = name or self.source
        self.metric = metric
        self.unit = unit
        self.warnings: list[str] = []
        self.exclusions: list[Exclusion] = list(exclusions)
        self.flops_source: str = "given"
        self.table = self._validate(pd.DataFrame(table).copy())

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_records(cls, records: Sequence[dict], **kwargs) -> "Ladder":
        """Build a ladder from a list of dicts (one per row); keyword arguments as in ``Ladder``."""
        return cls(pd.DataFrame.from_records(list(records)), **kwargs)

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        warnings.warn(message, LadderWarning, stacklevel=3)

    def _validate(self, t: pd.DataFrame) -> pd.DataFrame:
        if t.empty:
            raise LadderError(f"ladder {self.name!r} has no rows")
        found = ", ".join(str(c) for c in t.columns if c != "row")
        missing = [c for c in ("run", "loss") if c not in t.columns]
        if "flops" not in t.columns and not {"params", "tokens"} <= set(t.columns):
            missing.append("flops (or both params and tokens)")
        if missing:
            raise LadderError(
                f"ladder {self.name!r} is missing required column(s) {', '.join(missing)}; "
                f"columns found: {found}")
        if "row" not in t.columns:
            t["row"] = np.arange(len(t))
        t = t.reset_index(drop=True)
        if t["run"].isna().any():
            idx = t.index[t["run"].isna()][0]
            raise LadderError(f"row {t.at[idx, 'row']}: column 'run' is empty")
        t["run"] = t["run"].astype(str)

        for col in _POSITIVE + _NONNEGATIVE + ("fraction",):
            if col not in t.columns:
                continue
            values = pd.to_numeric(t[col], errors="coerce")
            bad = values.isna() & t[col].notna()
            if bad.any():
                idx = t.index[bad][0]
                raise LadderError(
                    f"{_row_label(t, idx)}: column {col!r} is not a number: {_show(t.at[idx, col])}")
            values = values.astype(float)
            if col in ("lr", "step", "fraction", "active_params", "peak_lr", "batch_size",
                       "total_steps"):
                present = values.notna()     # optional per row: empty means unknown
            else:
                present = pd.Series(True, index=values.index)
            v = values[present]
            problems = [
                (~np.isfinite(v.to_numpy()), "is NaN or infinite"),
            ]
            if col in _POSITIVE:
                problems.append((v.to_numpy() <= 0, "must be > 0"))
            elif col == "fraction":
                problems.append(((v.to_numpy() <= 0) | (v.to_numpy() > 1), "must be in (0, 1]"))
            else:
                problems.append((v.to_numpy() < 0, "must be >= 0"))
            for mask, what in problems:
                if mask.any():
                    idx = v.index[mask][0]
                    raise LadderError(
                        f"{_row_label(t, idx)}: column {col!r} {what}, got {_show(t.at[idx, col])}")
            t[col] = values
        if "final" in t.columns:
            t["final"] = _coerce_bool(t["final"], "final", t)

        self._check_per_run(t)
        key = ["run", "step"] if "step" in t.columns else (
            ["run", "tokens"] if "tokens" in t.columns else ["run", "flops"])
        dup = t.duplicated(subset=key, keep=False)
        if dup.any():
            first = t[dup].iloc[0]
            rows = t.loc[(t[key] == first[key]).all(axis=1), "row"].tolist()
            raise LadderError(
                f"run {first['run']!r}: duplicate rows for {key[1]} = {first[key[1]]:g} "
                f"(rows {', '.join(map(str, rows))})")

        self._account_flops(t)
        sort_by = ["run"] + [c for c in ("step", "tokens", "flops") if c in t.columns][:1]
        return t.sort_values(sort_by, kind="mergesort").reset_index(drop=True)

    def _check_per_run(self, t: pd.DataFrame) -> None:
        cols = [c for c in _PER_RUN if c in t.columns]
        for run, g in t.groupby("run", sort=True):
            info = {"run": run}
            for c in cols:
                vals = g[c].dropna().unique()
                if len(vals) > 1:
                    raise LadderError(
                        f"run {run!r}: column {c!r} must be constant within a run, found "
                        f"{', '.join(f'{v:g}' for v in vals[:4])} (rows "
                        f"{g['row'].iloc[0]}..{g['row'].iloc[-1]})")
                if len(vals) == 1:
                    info[c] = float(vals[0])
            try:
                _RunInfo(**info)
            except ValidationError as exc:  # pragma: no cover - checked per column above
                raise LadderError(f"run {run!r}: {exc.errors()[0]['msg']}") from None

    def _account_flops(self, t: pd.DataFrame) -> None:
        has_nd = {"params", "tokens"} <= set(t.columns)
        if not has_nd:
            return
        n = t["params"].to_numpy(float)
        if "active_params" in t.columns:
            n = np.where(t["active_params"].notna(), t["active_params"].to_numpy(float), n)
        six_nd = FLOPS_PER_PARAM_TOKEN * n * t["tokens"].to_numpy(float)
        if "flops" not in t.columns:
            t["flops"] = six_nd
            self.flops_source = "6ND"
            return
        ratio = t["flops"].to_numpy(float) / six_nd
        per_run = pd.Series(ratio).groupby(t["run"].to_numpy()).median()
        median = float(np.median(per_run.to_numpy()))
        lo, hi = _FLOPS_MEDIAN_RANGE
        if not lo <= median <= hi:
            self._warn(
                f"ladder {self.name!r}: the flops column is {median:.3g} x 6·N·D on median "
                f"(outside {lo}..{hi}); is it forward-only or in other units?")
        stray = per_run[np.abs(per_run / median - 1.0) > _FLOPS_RUN_TOLERANCE]
        if len(stray):
            listed = ", ".join(f"{r} ({v / median:.2f}x)" for r, v in stray.head(8).items())
            more = f" and {len(stray) - 8} more" if len(stray) > 8 else ""
            self._warn(
                f"ladder {self.name!r}: flops of {len(stray)} run(s) stray more than "
                f"{_FLOPS_RUN_TOLERANCE:.0%} from the ladder's median flops/(6·N·D): {listed}{more}")

    # ------------------------------------------------------------------ views
    def __len__(self) -> int:
        return len(self.table)

    def __repr__(self) -> str:
        return (f"Ladder({self.name!r}, runs={len(self.runs)}, rows={len(self.table)}, "
                f"metric={self.metric!r}, unit={self.unit!r})")

    @property
    def runs(self) -> list[str]:
        """Run ids, sorted."""
        return sorted(self.table["run"].unique())

    def has(self, *columns: str) -> bool:
        """True when every named column is present (and not all empty)."""
        return all(c in self.table.columns and self.table[c].notna().any() for c in columns)

    def select(self, *, max_flops: float | None = None, runs: Iterable[str] | None = None) -> "Ladder":
        """A new ladder restricted to ``runs`` and/or runs whose final FLOPs are <= ``max_flops``.

        A run's compute is its largest ``flops`` value (its last row). Dropped runs are
        recorded in :attr:`exclusions` with the reason.
        """
        t = self.table
        excluded = []
        keep = pd.Series(True, index=t.index)
        if runs is not None:
            wanted = set(map(str, runs))
            unknown = wanted - set(t["run"])
            if unknown:
                raise LadderError(f"unknown run(s) {sorted(unknown)}; known: {self.runs}")
            keep &= t["run"].isin(wanted)
        if max_flops is not None:
            if not (math.isfinite(max_flops) and max_flops > 0):
                raise LadderError(f"fit_max_flops (--fit-max-flops) must be a positive finite "
                                  f"number, got {max_flops!r}")
            run_c = t.groupby("run")["flops"].transform("max")
            over = run_c > max_flops * (1 + 1e-9)
            for run in sorted(t.loc[over & keep, "run"].unique()):
                c = float(run_c[t["run"] == run].iloc[0])
                excluded.append(Exclusion(run, f"compute {c:.3g} FLOPs above --fit-max-flops {max_flops:.3g}"))
            keep &= ~over
        if not keep.any():
            raise LadderError(f"no runs of ladder {self.name!r} are left after selection")
        new = Ladder.__new__(Ladder)
        new.__dict__.update(self.__dict__)
        new.table = t[keep].reset_index(drop=True)
        new.exclusions = list(self.exclusions) + excluded
        new.warnings = list(self.warnings)
        return new

    def final_points(self, *, include_unfinished: bool = False,
                     divergence_rise: float = 0.05) -> tuple[pd.DataFrame, list[Exclusion]]:
        """One row per run for final-loss laws, and the runs left out.

        A run contributes its ``final`` row; else its last row when its ``fraction`` there is
        1 or absent. Runs stopped early (``fraction`` < 1 and no ``final`` row) are excluded
        unless ``include_unfinished``. A run whose last loss is more than ``divergence_rise``
        (relative) above its own best checkpoint is excluded as diverged.

        Returns
        -------
        (table, exclusions):
            ``table`` has one row per kept run (all columns); ``exclusions`` lists each run
            left out with its reason (the ladder's own earlier exclusions are not repeated).
        """
        rows, excluded = [], []
        for run, g in self.table.groupby("run", sort=True):
            explicit_false = ("final" in g.columns and not g["final"].any()
                              and g["final"].iloc[-1] is not pd.NA and not bool(g["final"].iloc[-1]))
            if "final" in g.columns and g["final"].any():
                finals = g[g["final"].fillna(False).astype(bool)]
                if len(finals) > 1:
                    raise LadderError(
                        f"run {run!r}: {len(finals)} rows are marked final (rows "
                        f"{', '.join(map(str, finals['row']))}); a run has one final checkpoint")
                last = finals.iloc[0]
            else:
                last = g.iloc[-1]
                frac = last.get("fraction", np.nan) if "fraction" in g.columns else np.nan
                if not (pd.isna(frac) or frac >= 1.0) and not include_unfinished:
                    excluded.append(Exclusion(
                        run, f"unfinished (fraction = {frac:g}); final-loss laws need finished runs"))
                    continue
                if explicit_false and pd.isna(frac) and not include_unfinished:
                    excluded.append(Exclusion(
                        run, "unfinished (its last row is marked final = false); final-loss laws "
                             "need finished runs"))
                    continue
            best = float(g["loss"].min())
            if float(last["loss"]) > best * (1 + divergence_rise):
                excluded.append(Exclusion(
                    run, f"diverged: last loss {float(last['loss']):.4g} is "
                         f"{float(last['loss']) / best - 1:.1%} above the run's best {best:.4g}"))
                continue
            rows.append(last)
        if not rows:
            reasons = "; ".join(f"{e.run}: {e.reason}" for e in excluded[:5])
            raise LadderError(f"ladder {self.name!r} has no finished runs to fit ({reasons})")
        return pd.DataFrame(rows).reset_index(drop=True), excluded

    def fingerprint(self, table: pd.DataFrame | None = None) -> str:
        """SHA-256 (hex) of the canonical columns of ``table`` (default: the whole ladder).

        Rows are sorted by run and position, floats written with 17 significant digits, so
        the same data gives the same fingerprint whatever the source format or row order.
        """
        t = self.table if table is None else table
        cols = [c for c in CANONICAL_COLUMNS if c in t.columns]
        order = [c for c in ("run", "step", "tokens", "flops") if c in cols]
        canon = t[cols].sort_values(order, kind="mergesort")
        text = canon.to_csv(index=False, float_format="%.17g", lineterminator="\n")
        return hashlib.sha256(f"unit={self.unit}\n{text}".encode()).hexdigest()
