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
import re
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
#: Plausible tokens per parameter (D/N) of a training run; a ladder entirely outside it has its
#: tokens counted in other units (sequences, steps).
_TOKENS_PER_PARAM = (0.05, 1e4)
_SEQUENCE_LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
_FLOPS_RUN_TOLERANCE = 0.25
_FLOPS_MEDIAN_RANGE = (0.5, 2.0)
# Rows per block when hashing a table (bounds the CSV text held at once).
_FINGERPRINT_ROWS = 100_000


@dataclass(frozen=True, slots=True)
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


_TRUTHY = {"true": True, "1": True, "yes": True, "t": True,
           "false": False, "0": False, "no": False, "f": False}


def _bool_cell(value):
    """One cell of a ``final`` column as True, False or ``pd.NA``; ``None`` when invalid."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer, float, np.floating)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUTHY:
        return _TRUTHY[value.strip().lower()]
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return pd.NA  # unknown, not "not final"
    return None


def _coerce_bool(series: pd.Series, column: str, table: pd.DataFrame) -> pd.Series:
    """``series`` as a nullable boolean Series (shape (n,)): True/False, 1/0, "yes"/"no",
    "t"/"f" (any case, surrounding spaces ignored); empty cells become ``pd.NA``.

    Vectorised over distinct values: each distinct value is read once.

    Raises
    ------
    LadderError
        At the first row (in table order) holding anything else; names run, row and column.
    """
    if isinstance(series.dtype, pd.BooleanDtype):
        return series.copy()
    if series.dtype == bool:
        return series.astype("boolean")
    try:
        codes, uniques = pd.factorize(series, use_na_sentinel=False)
    except TypeError:  # unhashable cells (dicts from JSON): one at a time
        codes, uniques = np.arange(len(series)), series.to_numpy(dtype=object)
    uniques = np.asarray(uniques, dtype=object)
    mapped = [_bool_cell(u) for u in uniques]
    invalid = np.array([m is None for m in mapped], dtype=bool)
    if invalid.any():
        # Distinct values may conflate (1 == 1.0 == True): report the first bad *row*, and
        # re-check it as a cell so the value shown is the row's own.
        for pos in np.flatnonzero(invalid[codes]):
            value = series.iloc[pos]
            if _bool_cell(value) is None:
                raise LadderError(f"{_row_label(table, series.index[pos])}: column {column!r} "
                                  f"must be true/false, got {value!r}")
    na = np.array([m is pd.NA for m in mapped], dtype=bool)
    truth = np.array([m is True for m in mapped], dtype=bool)
    return pd.Series(pd.arrays.BooleanArray(truth[codes], na[codes]), index=series.index)


def _run_codes(runs: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, names)``: run id of each row as an integer, shape (n,), numbered in sorted
    order of the ids, and the sorted distinct ids (an array of str), shape (n_runs,)."""
    values = runs.array
    if len(values) > 1:
        # Fast path, no hashing: rows already grouped by run in sorted order (files usually are).
        prev, nxt = values[:-1], values[1:]
        changed = np.asarray(nxt != prev, dtype=bool)
        if changed.all():                                  # one row per run
            if np.asarray(nxt > prev, dtype=bool).all():
                return np.arange(len(values), dtype=np.int64), values
        else:
            at = np.flatnonzero(changed)
            if np.asarray(nxt[at] > prev[at], dtype=bool).all():
                codes = np.zeros(len(values), dtype=np.int64)
                codes[at + 1] = 1
                return np.cumsum(codes), values[np.r_[0, at + 1]]
    codes, names = pd.factorize(runs, sort=True)
    return codes.astype(np.int64, copy=False), names


def _is_sorted(codes: np.ndarray) -> bool:
    return bool(np.all(codes[1:] >= codes[:-1]))


def _sort_order(codes: np.ndarray, key: np.ndarray) -> np.ndarray | None:
    """Stable permutation sorting rows by run, then ``key`` (NaN last), shape (n,); ``None``
    when the rows are in that order already (the usual case: files are written that way)."""
    with np.errstate(invalid="ignore"):
        dc = codes[1:] - codes[:-1]
        in_order = (dc > 0) | ((dc == 0) & ((key[1:] >= key[:-1]) | np.isnan(key[1:])))
    if in_order.all():
        return None
    by_key = np.argsort(key, kind="stable")
    return by_key[np.argsort(codes[by_key], kind="stable")]


def _group_starts(codes: np.ndarray) -> np.ndarray:
    """First position of each run in ``codes`` sorted ascending (contiguous runs)."""
    return np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])


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
        # A shallow copy: columns are replaced, never written into (copy-on-write).
        self.table = self._validate(pd.DataFrame(table).copy(deep=False))

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_records(cls, records: Sequence[dict], **kwargs) -> "Ladder":
        """Build a ladder from a list of dicts (one per row); keyword arguments as in ``Ladder``."""
        return cls(pd.DataFrame.from_records(list(records)), **kwargs)

    def _warn(self, message: str) -> None:
        self.warnings.append(message)
        warnings.warn(message, LadderWarning, stacklevel=3)

    def _validate(self, t: pd.DataFrame) -> pd.DataFrame:
        # Vectorised: whole-column checks and per-run aggregates over integer run codes. Only
        # the first failing row or run (in the order the checks have always used) is turned
        # into an error message, with the same wording as the row-by-row checks had.
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
            values = self._check_numbers(t, col)
            if values.dtype != t[col].dtype or not isinstance(t[col].dtype, np.dtype):
                t[col] = values          # float64 columns stay as they are (no copy)
        if "final" in t.columns:
            t["final"] = _coerce_bool(t["final"], "final", t)

        codes, names = _run_codes(t["run"])
        self._check_per_run(t, codes, names)
        key = ["run", "step"] if "step" in t.columns else (
            ["run", "tokens"] if "tokens" in t.columns else ["run", "flops"])
        order = _sort_order(codes, t[key[1]].to_numpy(float))
        self._check_duplicates(t, key, codes, order)

        self._account_flops(t, codes, names)
        if order is not None:        # not already sorted by run, then step/tokens/flops
            t = t.take(order)
        return t.reset_index(drop=True)

    @staticmethod
    def _check_numbers(t: pd.DataFrame, col: str) -> np.ndarray:
        """Column ``col`` as float, shape (n,); raises at its first bad row."""
        raw = t[col]
        if pd.api.types.is_float_dtype(raw.dtype) and not isinstance(raw.dtype, pd.api.extensions.ExtensionDtype):
            values = raw.to_numpy()
        else:
            numbers = pd.to_numeric(raw, errors="coerce")
            bad = (numbers.isna() & raw.notna()).to_numpy()
            if bad.any():
                idx = t.index[np.argmax(bad)]
                raise LadderError(
                    f"{_row_label(t, idx)}: column {col!r} is not a number: {_show(t.at[idx, col])}")
            values = numbers.to_numpy(dtype=float, na_value=np.nan)
        optional = col in ("lr", "step", "fraction", "active_params", "peak_lr", "batch_size",
                           "total_steps")        # optional per row: empty means unknown
        with np.errstate(invalid="ignore"):
            nonfinite = np.isinf(values) if optional else ~np.isfinite(values)
            if col in _POSITIVE:
                out_of_range, what = values <= 0, "must be > 0"
            elif col == "fraction":
                out_of_range, what = (values <= 0) | (values > 1), "must be in (0, 1]"
            else:
                out_of_range, what = values < 0, "must be >= 0"
        for mask, problem in ((nonfinite, "is NaN or infinite"), (out_of_range, what)):
            if mask.any():
                idx = t.index[np.argmax(mask)]
                raise LadderError(
                    f"{_row_label(t, idx)}: column {col!r} {problem}, got {_show(t.at[idx, col])}")
        return values

    def _check_per_run(self, t: pd.DataFrame, codes: np.ndarray, names: np.ndarray) -> None:
        """Per-run constants must not vary within a run: min == max per run (NaN ignored)."""
        cols = [c for c in _PER_RUN if c in t.columns]
        n_runs = len(names)
        failing = np.zeros(n_runs, dtype=bool)
        failing[0] = len(names[0]) == 0        # "" sorts first: only the first id can be empty
        if cols and n_runs < len(codes):           # else every run has one row
            perm = None if _is_sorted(codes) else np.argsort(codes, kind="stable")
            c = codes if perm is None else codes[perm]
            starts = _group_starts(c)
            for col in cols:
                v = t[col].to_numpy(float)
                if perm is not None:
                    v = v[perm]
                lo, hi = np.fmin.reduceat(v, starts), np.fmax.reduceat(v, starts)
                failing |= (lo != hi) & ~np.isnan(lo)     # a run without the value passes
        if not failing.any():
            return
        first = int(np.argmax(failing))
        run = names[first]
        g = t[codes == first]
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
        except ValidationError as exc:
            raise LadderError(f"run {run!r}: {exc.errors()[0]['msg']}") from None

    @staticmethod
    def _check_duplicates(t: pd.DataFrame, key: list[str], codes: np.ndarray,
                          order: np.ndarray | None) -> None:
        """A (run, step) pair (or (run, tokens), (run, flops)) may not repeat: adjacent equal
        keys in sorted order (NaN equals NaN, as in ``DataFrame.duplicated``)."""
        v = t[key[1]].to_numpy(float)
        c = codes
        if order is not None:
            v, c = v[order], c[order]
        same = (c[1:] == c[:-1]) & ((v[1:] == v[:-1]) | (np.isnan(v[1:]) & np.isnan(v[:-1])))
        if not same.any():
            return
        dup = t.duplicated(subset=key, keep=False)
        first = t[dup].iloc[0]
        rows = t.loc[(t[key] == first[key]).all(axis=1) | (
            (t["run"] == first["run"]) & t[key[1]].isna() & pd.isna(first[key[1]])), "row"].tolist()
        raise LadderError(
            f"run {first['run']!r}: duplicate rows for {key[1]} = {first[key[1]]:g} "
            f"(rows {', '.join(map(str, rows))})")

    def _account_flops(self, t: pd.DataFrame, codes: np.ndarray, names: np.ndarray) -> None:
        has_nd = {"params", "tokens"} <= set(t.columns)
        if not has_nd:
            return
        n = t["params"].to_numpy(float)
        if "active_params" in t.columns:
            active = t["active_params"].to_numpy(float)
            n = np.where(~np.isnan(active), active, n)
        six_nd = FLOPS_PER_PARAM_TOKEN * n * t["tokens"].to_numpy(float)
        tokens_suspect = self._check_tokens_per_param(t, n, codes)
        if "flops" not in t.columns:
            t["flops"] = six_nd
            self.flops_source = "6ND"
            return
        ratio = t["flops"].to_numpy(float) / six_nd
        if len(names) == len(ratio):                       # one row per run
            per_run = np.empty(len(ratio))
            per_run[codes] = ratio
        else:
            per_run = pd.Series(ratio).groupby(codes).median().to_numpy()
        median = float(np.median(per_run))
        lo, hi = _FLOPS_MEDIAN_RANGE
        if not lo <= median <= hi:
            culprit = ("the tokens column is the likely culprit (see the tokens-per-parameter "
                       "warning)" if tokens_suspect else
                       "is it forward-only (2·N·D) or in other units?")
            self._warn(
                f"ladder {self.name!r}: the flops column is {median:.3g} x 6·N·D on median "
                f"(outside {lo}..{hi}); {culprit}")
        stray = np.flatnonzero(np.abs(per_run / median - 1.0) > _FLOPS_RUN_TOLERANCE)
        if len(stray):
            listed = ", ".join(f"{names[k]} ({per_run[k] / median:.2f}x)" for k in stray[:8])
            more = f" and {len(stray) - 8} more" if len(stray) > 8 else ""
            self._warn(
                f"ladder {self.name!r}: flops of {len(stray)} run(s) stray more than "
                f"{_FLOPS_RUN_TOLERANCE:.0%} from the ladder's median flops/(6·N·D): {listed}{more}")

    def _check_tokens_per_param(self, t: pd.DataFrame, n: np.ndarray,
                                codes: np.ndarray) -> bool:
        """Warn when no run has a plausible D/N (tokens per parameter, from each run's last
        tokens): below 0.05 the tokens column likely counts sequences or steps, above 1e4 it
        is in other units. Returns whether it warned."""
        tokens = t["tokens"].to_numpy(float)
        per_row = tokens / n
        if codes.size == 0 or np.all(np.isnan(per_row)):
            return False
        tpp = pd.Series(per_row).groupby(codes).max().to_numpy()
        lo, hi = _TOKENS_PER_PARAM
        if not (np.all(tpp < lo) or np.all(tpp > hi)):
            return False
        side = "below" if np.all(tpp < lo) else "above"
        hint = ""
        if side == "below" and "flops" in t.columns:
            # If C is right, C / (6 N D) is the factor missing from D: a sequence length?
            k = float(np.nanmedian(t["flops"].to_numpy(float) / (FLOPS_PER_PARAM_TOKEN * n * tokens)))
            near = [L for L in _SEQUENCE_LENGTHS if abs(k / L - 1) < 0.2]
            hint = (f"; C / (6·N·D) is {k:.4g}, close to a sequence length of {near[0]}: the "
                    f"column likely counts sequences" if near else
                    f"; C / (6·N·D) is {k:.4g}: the column likely counts sequences or steps")
        elif side == "below":
            hint = "; it likely counts sequences or optimizer steps, not tokens"
        self._warn(
            f"ladder {self.name!r}: tokens per parameter (D/N) is {side} the plausible range "
            f"{lo:g}..{hi:g} for every run ({np.min(tpp):.3g}..{np.max(tpp):.3g}): check the "
            f"tokens column{hint}")
        return True

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
            codes, names = _run_codes(t["run"])
            run_max = pd.Series(t["flops"].to_numpy(float)).groupby(codes).max()
            run_max = run_max.reindex(range(len(names))).to_numpy()
            over_run = run_max > max_flops * (1 + 1e-9)
            over = pd.Series(over_run[codes], index=t.index)
            dropped = np.zeros(len(names), dtype=bool)
            dropped[codes[(over & keep).to_numpy()]] = True
            for code in np.flatnonzero(dropped):          # sorted run order
                excluded.append(Exclusion(names[code], f"compute {float(run_max[code]):.3g} FLOPs "
                                                       f"above --fit-max-flops {max_flops:.3g}"))
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
        t = self.table
        codes, names = _run_codes(t["run"])
        perm = None if _is_sorted(codes) else np.argsort(codes, kind="stable")
        pos = np.arange(len(t)) if perm is None else perm      # table position of sorted row
        c = codes if perm is None else codes[perm]
        starts = _group_starts(c)
        ends = np.r_[starts[1:], len(c)] - 1
        n_runs = len(starts)
        chosen = pos[ends]                                      # each run's last row
        any_final = np.zeros(n_runs, dtype=bool)
        explicit_false = np.zeros(n_runs, dtype=bool)
        if "final" in t.columns:
            final = t["final"].astype("boolean")
            is_true = final.fillna(False).to_numpy(bool)
            is_false = (~final).fillna(False).to_numpy(bool)
            if perm is not None:
                is_true, is_false = is_true[perm], is_false[perm]
            n_final = np.add.reduceat(is_true.astype(np.int64), starts)
            if (n_final > 1).any():
                first = int(np.argmax(n_final > 1))
                g = t.iloc[pos[starts[first]:ends[first] + 1]]
                finals = g[g["final"].fillna(False).astype(bool)]
                raise LadderError(
                    f"run {names[first]!r}: {len(finals)} rows are marked final (rows "
                    f"{', '.join(map(str, finals['row']))}); a run has one final checkpoint")
            any_final = n_final == 1
            true_at = np.flatnonzero(is_true)
            chosen[any_final] = pos[true_at]         # one per run, in run order
            explicit_false = ~any_final & is_false[ends]
        if "fraction" in t.columns:
            frac = t["fraction"].to_numpy(float)[pos[ends]]
        else:
            frac = np.full(n_runs, np.nan)
        with np.errstate(invalid="ignore"):
            contradiction = explicit_false & ~np.isnan(frac) & (frac >= 1.0)
        if contradiction.any():
            # A row at 100% of its planned run that says it is not final: one of the two is
            # wrong, and guessing either way changes the forecast.
            bad = np.flatnonzero(contradiction)
            rows = t["row"].to_numpy()[pos[ends[bad]]] if "row" in t.columns else pos[ends[bad]]
            listed = ", ".join(f"run {names[k]!r} (row {r})" for k, r in zip(bad[:20], rows[:20]))
            more = f" and {len(bad) - 20} more" if len(bad) > 20 else ""
            raise LadderError(
                f"{len(bad)} run(s) end on a row marked final = false with fraction = 1: "
                f"{listed}{more}; a run at 100% of its planned length is finished, so fix the "
                f"final or the fraction column")
        loss = t["loss"].to_numpy(float)
        best = np.minimum.reduceat(loss if perm is None else loss[perm], starts)
        last_loss = loss[chosen]
        has_frac = ~np.isnan(frac)
        with np.errstate(invalid="ignore"):
            short = ~any_final & has_frac & (frac < 1.0) & (not include_unfinished)
        marked = ~any_final & ~short & explicit_false & ~has_frac & (not include_unfinished)
        diverged = ~short & ~marked & (last_loss > best * (1 + divergence_rise))
        out = short | marked | diverged
        excluded = []
        for k in np.flatnonzero(out):
            run = names[k]
            if short[k]:
                excluded.append(Exclusion(
                    run, f"unfinished (fraction = {frac[k]:g}); final-loss laws need finished runs"))
            elif marked[k]:
                excluded.append(Exclusion(
                    run, "unfinished (its last row is marked final = false); final-loss laws "
                         "need finished runs"))
            else:
                b, last = float(best[k]), float(last_loss[k])
                excluded.append(Exclusion(
                    run, f"diverged: last loss {last:.4g} is {last / b - 1:.1%} above the run's "
                         f"best {b:.4g}"))
        if out.all():
            reasons = "; ".join(f"{e.run}: {e.reason}" for e in excluded[:5])
            raise LadderError(f"ladder {self.name!r} has no finished runs to fit ({reasons})")
        return t.take(chosen[~out]).reset_index(drop=True), excluded

    def fingerprint(self, table: pd.DataFrame | None = None) -> str:
        """SHA-256 (hex) of the canonical columns of ``table`` (default: the whole ladder).

        Rows are sorted by run and position, floats written with 17 significant digits, so
        the same data gives the same fingerprint whatever the source format or row order.
        """
        t = self.table if table is None else table
        cols = [c for c in CANONICAL_COLUMNS if c in t.columns]
        order = [c for c in ("run", "step", "tokens", "flops") if c in cols]
        canon = t[cols].sort_values(order, kind="mergesort")
        # Hashed in blocks of rows: the same bytes as one CSV text, without holding it all.
        digest = hashlib.sha256(f"unit={self.unit}\n".encode())
        for start in range(0, max(len(canon), 1), _FINGERPRINT_ROWS):
            block = canon.iloc[start:start + _FINGERPRINT_ROWS]
            text = _fast_csv(block, header=start == 0)
            if text is None:
                text = block.to_csv(index=False, header=start == 0, float_format="%.17g",
                                    lineterminator="\n")
            digest.update(text.encode())
        return digest.hexdigest()


_CSV_SPECIAL = re.compile(r'[,"\r\n]')


def _fast_csv(block: pd.DataFrame, *, header: bool) -> str | None:
    """``block.to_csv(index=False, float_format="%.17g", lineterminator="\\n")``, the same
    text, several times faster: floats formatted by Python directly instead of through
    pandas' per-value formatter. None when a column needs pandas' quoting or an unusual
    dtype (the caller then uses pandas)."""
    columns = []
    for name in block.columns:
        col = block[name]
        kind = col.dtype.kind
        if kind == "f":
            values = col.to_numpy(dtype=float)
            # Format each distinct value once (N, peak LR, planned steps repeat along a run).
            uniq, inverse = np.unique(values, return_inverse=True)
            text = np.array(["" if v != v else format(v, ".17g") for v in uniq.tolist()],
                            dtype=object)
            strings = text[inverse.reshape(-1)].tolist()
            for i in np.flatnonzero((values == 0) & np.signbit(values)):  # -0.0 == 0.0 in unique
                strings[i] = format(-0.0, ".17g")
        elif kind in "iu":
            strings = [str(v) for v in col.tolist()]
        elif kind == "b":
            strings = ["True" if v else "False" for v in col.tolist()]
        elif kind in "OUT" or str(col.dtype) in ("str", "string"):
            values = col.tolist()
            if not all(type(v) is str for v in values):
                return None
            if any(_CSV_SPECIAL.search(v) or v == "" for v in values):
                return None
            strings = values
        else:
            return None
        columns.append(strings)
    head = ",".join(map(str, block.columns)) + "\n" if header else ""
    if any(_CSV_SPECIAL.search(str(c)) for c in block.columns):
        return None
    if not len(block):
        return head
    return head + "\n".join(map(",".join, zip(*columns))) + "\n"
