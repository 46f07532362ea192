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
``status``         the tracker's run state, e.g. W&B ``finished``/``crashed``/``running``
                   (optional; a ``state`` column is read as ``status``); see
                   :mod:`delphi.runstate` for how a run's state is decided
``row``            0-based data row of the source the row came from (added if absent): row 0
                   is the first row under a CSV header (line 2); messages name rows by it
=================  ==========================================================================

Any other column is kept as free metadata.

Numbers are checked per cell: a boolean or a date is not a number, and magnitudes must be
plausible (``params``/``active_params``/``tokens`` 1..1e30, ``flops`` 1..1e40, ``loss``
1e-30..1e30, ``lr``/``peak_lr`` at most 1e6): beyond them a value is in other units, and
6·N·D or the fits' powers would overflow float64. Each bad cell is named by run, row and
column.
"""

from __future__ import annotations

import datetime
import hashlib
import math
import numbers
import re
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import (DuplicateRowsWarning, LadderError, LadderWarning, TargetError, option,
                      user_stacklevel)
from ..core import shared_fits as shared
from ..core.records import positive_number
from ..core.text import plural
from .runstate import Invalid, invalid_message, not_annealed, run_states, status_kinds
from .units import LOSS_RANGE, UNITS, normalize_unit, unit_from_metric, unit_plausibility
from .schedules import find_restarts

__all__ = ["Ladder", "Exclusion", "FlopsConvention", "CANONICAL_COLUMNS", "budget_labels",
           "FLOPS_PER_PARAM_TOKEN", "UNITS", "normalize_unit", "unit_from_metric",
           "columns_found", "LOSS_LIKE", "RUN_COLUMN_HINT"]

#: A step of the best loss between adjacent compute budgets this large (either way) is named
#: as likely mixed units: just below 1/ln 2 = 1.44, the smallest factor between loss units.
UNIT_STEP = 1.35

#: Training FLOPs per parameter per token (forward + backward), Kaplan et al. 2020, Eq. 2.1.
FLOPS_PER_PARAM_TOKEN = 6.0

#: How a row or run dropped as invalid is tagged in its exclusion reason (both spellings).
_DROP_INVALID = option("drop_invalid=True", "--drop-invalid")

CANONICAL_COLUMNS: tuple[str, ...] = (
    "run", "params", "tokens", "flops", "loss", "step", "lr", "peak_lr", "batch_size",
    "active_params", "final", "fraction", "total_steps", "status",
)
#: Column names that hold a loss-like metric: losses, bits per byte, perplexities,
#: cross-entropies, negative log-likelihoods.
#: Source column names that usually hold N, D or C (lower case): the missing-column error
#: suggests mapping them (``columns=`` / ``--columns``).
_ALIASES = {"params": ("n", "n_params", "num_params", "nparams", "parameters", "params_count",
                       "parameter_count", "model_size", "num_parameters", "n_parameters"),
            "tokens": ("d", "n_tokens", "num_tokens", "ntokens", "train_tokens", "data",
                       "tokens_seen", "dataset_size"),
            "flops": ("c", "compute", "flop", "total_flops", "train_flops", "num_flops")}


def _likely_columns(columns, missing: list[str]) -> dict[str, str]:
    """``{canonical: source column}`` for the missing N/D/C columns a table seems to have
    under a common other name (the first match of each)."""
    want = (["flops", "params", "tokens"] if any(m.startswith("flops") for m in missing)
            else [])
    have = {str(c).strip().lower(): str(c) for c in columns}
    out = {}
    for canon in want:
        if canon in have:
            continue
        for alias in _ALIASES[canon]:
            if alias in have and have[alias] not in out.values():
                out[canon] = have[alias]
                break
    return out


#: Row numbers a duplicate-rows problem lists before giving the count.
_MAX_LISTED_ROWS = 10


LOSS_LIKE = re.compile(r"loss|(?<![a-z])bpb(?![a-z])|bits?[\s_\-/]*per[\s_\-/]*byte|perplexity|"
                       r"(?<![a-z])ppl(?![a-z])|(?<![a-z])nll(?![a-z])|x_?ent|"
                       r"cross[\s_\-]?entropy", re.IGNORECASE)
# Names (lower case, spaces and dashes as "_") a ladder table's columns commonly have besides
# the canonical ones: a header with none of these, nor a loss-like name, is not shown.
_LADDER_NAMES = frozenset(CANONICAL_COLUMNS) | {
    "_step", "state", "name", "model", "model_size", "n", "d", "c", "num_params", "n_params",
    "parameters", "compute", "training_flop", "training_flops", "tokens_seen", "learning_rate",
    "seed", "run_id", "run_name", "source_file"}
# Column lists in messages: at most this many names, each cut at this many characters.
_MAX_LISTED, _MAX_NAME_CHARS = 30, 64


def _ladder_like(name: str) -> bool:
    key = re.sub(r"[\s\-]+", "_", name.strip().lower())
    return key in _LADDER_NAMES or LOSS_LIKE.search(key) is not None


def columns_found(columns: Iterable, *, metric: str | None = None) -> str:
    """``"columns found: a, b, ..."`` for an error message, or, when no column is a known
    ladder column (:data:`CANONICAL_COLUMNS`, a common alias such as ``_step`` or ``model``,
    a loss-like name, or ``metric``), that the table has none and its header is not shown: a
    file that is not a ladder table (say, ``AWS_ACCESS_KEY_ID,AKIA...``) never has its first
    line echoed. The reader's own ``row`` and internal ``source:<name>`` columns are left out;
    at most 30 names are listed, each cut at 64 characters, non-printing characters escaped.
    """
    cols = [str(c) for c in columns if str(c) != "row" and not str(c).startswith("source:")]
    wanted = metric.strip().lower() if isinstance(metric, str) else None
    if not any(_ladder_like(c) or c.strip().lower() == wanted for c in cols):
        return ("it has none of the expected columns (run, step, flops, params, tokens, loss "
                "...), so its header is not shown")
    shown = []
    for c in cols[:_MAX_LISTED]:
        c = c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
        shown.append(c if len(c) <= _MAX_NAME_CHARS else c[:_MAX_NAME_CHARS - 3] + "...")
    more = f" ... ({len(cols) - _MAX_LISTED:,} more)" if len(cols) > _MAX_LISTED else ""
    return f"columns found: {', '.join(shown)}{more}"


_POSITIVE = ("params", "tokens", "flops", "loss", "peak_lr", "batch_size", "active_params",
             "total_steps")
_NONNEGATIVE = ("step", "lr")
#: Magnitudes a value may take (inclusive) and what it is. A count below 1 is in other units
#: (parameters in billions, say); beyond the top no training run or loss is that large. Inside
#: these, 6·N·D, C/(6·N·D) and every log and power the fits take stay finite in float64.
_MAGNITUDE = {"params": (1.0, 1e30, "parameter count"),
              "active_params": (1.0, 1e30, "parameter count"),
              "tokens": (1.0, 1e30, "token count"),
              "flops": (1.0, 1e40, "FLOP count"),
              "loss": (1e-30, 1e30, "loss"),
              "lr": (1e-30, 1e6, "learning rate"),
              "peak_lr": (1e-30, 1e6, "learning rate")}
MAGNITUDES = _MAGNITUDE
"""The plausible magnitudes per column, ``{column: (low, high, noun)}`` (:data:`_MAGNITUDE`),
for readers of other tables (suggest's candidates) that check values as the ladder does."""


def budget_labels(table: pd.DataFrame, tolerance: float = 1.05) -> pd.Series:
    """Each row's compute budget, as a label (``"1e+19"``): rows are taken in order of
    ``flops`` [FLOPs] and a new budget starts where C exceeds the current budget's first C by
    more than ``tolerance`` (runs of one isoFLOP budget differ by rounding). Shape (n,),
    aligned with ``table``'s index."""
    order = table["flops"].sort_values(kind="mergesort")
    ids, start, label = {}, None, None
    for idx, c in order.items():
        if start is None or c > start * tolerance:
            start, label = c, f"{c:.3g}"
        ids[idx] = label
    return pd.Series(ids).reindex(table.index)


def check_target_value(name: str, value, label: str | None = None) -> float:
    """A target's value of column ``name`` (``flops`` [FLOPs], ``params``, ``tokens``...) as a
    float, checked against the same plausible magnitudes as the ladder's columns
    (:data:`_MAGNITUDE`; beyond them 6·N·D and the laws' powers overflow float64). Messages
    call it ``label``: the caller's argument (``target_params``), by default ``target NAME``
    (a key of :func:`delphi.predict`'s ``target``).

    Raises
    ------
    TargetError: not a positive finite number, or outside the column's plausible range.
    """
    label = f"target {name}" if label is None else label
    value = positive_number(value, f"{label} must be a positive finite number", TargetError)
    lo, hi, noun = _MAGNITUDE.get(name, (0.0, math.inf, ""))
    if not lo <= value <= hi:
        raise TargetError(f"{label} {value:.4g} is outside {lo:g}..{hi:g}: not a "
                          f"plausible {noun} (in other units?)")
    return value


_PER_RUN = ("params", "active_params", "peak_lr", "batch_size", "total_steps")

# A run's own FLOP column may differ from 6ND by up to this much before we say so.
#: Plausible tokens per parameter (D/N) of a training run; a ladder entirely outside it has its
#: tokens counted in other units (sequences, steps).
_TOKENS_PER_PARAM = (0.05, 1e4)
SEQUENCE_LENGTHS = (256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
_FLOPS_RUN_TOLERANCE = 0.25
_FLOPS_MEDIAN_RANGE = (0.5, 2.0)
#: A steady change of k = C / (6·N·D) across rungs beyond this (relative, smallest to largest
#: rung) is reported: a count that includes attention or embedding FLOPs shrinks relative to
#: 6·N·D as models grow, so no single k converts a far larger target.
_FLOPS_DRIFT = 0.10
# Rows per block when hashing a table (bounds the CSV text held at once).
_FINGERPRINT_ROWS = 100_000

@dataclass(frozen=True)
class FlopsConvention:
    """How a ladder counts training compute: k = C / (6·N·D) per run.

    N is ``active_params`` where given (MoE), else ``params``. k = 1 is Kaplan et al.'s
    6·N·D (2020, Eq. 2.1); a count with attention FLOPs is above 1, a forward-only count near
    1/3. A target given by N and D is converted to the ladder's compute with :attr:`median`
    (C = k·6·N·D) so that a law of C sees both in one convention.

    Attributes are per run in rung order (ascending run compute, a run's largest ``flops``);
    arrays are tuples of length n_runs.
    """

    source: str
    """``"given"`` (the ladder's own flops column, compared with 6·N·D) or ``"6ND"`` (no
    flops column: C computed as 6·N·D, so k = 1 exactly)."""
    n_label: str
    """``"6·N·D"`` or ``"6·N_active·D"`` (MoE ladders)."""
    runs: tuple[str, ...]
    """Run ids, by ascending compute."""
    flops: tuple[float, ...]
    """Each run's compute C [FLOPs]."""
    k: tuple[float, ...]
    """Each run's C / (6·N·D) (median over its rows) [dimensionless]."""
    median: float
    """Median of :attr:`k` over runs: the ladder's convention."""
    low: float
    high: float
    """Smallest and largest per-run k."""
    spread: float
    """(high - low) / median [relative]."""
    drift: float | None
    """Fitted relative change of k from the smallest to the largest rung: exp(b·(ln C_max -
    ln C_min)) - 1 for the least-squares slope b of ln k on ln C; ``None`` when every run has
    the same compute."""
    drift_t: float | None
    """t statistic of that slope (``inf`` for an exact trend, ``None`` below 3 compute
    levels)."""
    drifting: bool
    """True when |drift| > 10% and the trend is steady (|t| >= 2, or only two compute
    levels): k is not one number for this ladder."""

    def to_dict(self) -> dict:
        """JSON-ready summary (``"flops_convention"`` in ``--json`` output)."""
        return {"source": self.source, "n": self.n_label, "k_median": self.median,
                "k_low": self.low, "k_high": self.high, "k_spread": self.spread,
                "k_drift": self.drift, "drifting": self.drifting,
                "k_by_run": dict(zip(self.runs, self.k))}

    def describe(self, limit: int = 10) -> str:
        """``"r1 1.8, r2 1.8, ..."``: k per rung, at most ``limit`` rungs spread evenly."""
        idx = np.unique(np.linspace(0, len(self.k) - 1, min(limit, len(self.k))).round()
                        .astype(int))
        shown = ", ".join(f"{self.runs[i]} {self.k[i]:.3g}" for i in idx)
        return shown + (f" ({len(self.k) - len(idx)} more rungs not shown)"
                        if len(idx) < len(self.k) else "")


def _convention(source: str, n_label: str, names: np.ndarray, per_run_k: np.ndarray,
                run_flops: np.ndarray) -> FlopsConvention:
    """A :class:`FlopsConvention` from per-run k and compute, both shape (n_runs,)."""
    order = np.argsort(run_flops, kind="stable")
    k, c = per_run_k[order], run_flops[order]
    median = float(np.median(k))
    drift = t_stat = None
    x, y = np.log(c), np.log(k)
    # compute levels as the log sees them: 1e18 and 9.999999999999999e17 are one budget
    levels = len(np.unique(x)) if np.ptp(x) > 0 else 1
    if levels >= 2:
        xc = x - x.mean()
        slope = float(xc @ (y - y.mean()) / (xc @ xc))
        drift = float(np.expm1(slope * (x.max() - x.min())))
        if levels >= 3 and len(k) >= 3:
            resid = y - y.mean() - slope * xc
            se = math.sqrt(float(resid @ resid) / (len(k) - 2) / float(xc @ xc))
            # An exact trend has no scatter: infinitely significant, not a division by zero.
            t_stat = math.inf if se <= 1e-12 * max(abs(slope), 1e-300) else slope / se
    drifting = bool(drift is not None and abs(drift) > _FLOPS_DRIFT
                    and (t_stat is None or abs(t_stat) >= 2.0))
    return FlopsConvention(
        source=source, n_label=n_label, runs=tuple(str(r) for r in names[order]),
        flops=tuple(float(v) for v in c), k=tuple(float(v) for v in k), median=median,
        low=float(k.min()), high=float(k.max()), spread=float((k.max() - k.min()) / median),
        drift=drift, drift_t=t_stat, drifting=drifting)


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


def _coerce_bool(series: pd.Series, column: str, table: pd.DataFrame,
                 problems: list | None = None) -> pd.Series:
    """``series`` as a nullable boolean Series (shape (n,)): True/False, 1/0, "yes"/"no",
    "t"/"f" (any case, surrounding spaces ignored); empty cells become ``pd.NA``.

    Vectorised over distinct values: each distinct value is read once. With ``problems`` (a
    list), every row holding anything else is appended to it as an :class:`Invalid` (its
    cell becomes ``pd.NA``) instead of raising.

    Raises
    ------
    LadderError
        Without ``problems``: at the first row (in table order) holding anything else; names
        run, row and column.
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
                idx = series.index[pos]
                if problems is None:
                    raise LadderError(f"{_row_label(table, idx)}: column {column!r} "
                                      f"must be true/false, got {value!r}")
                problems.append(Invalid(_row_label(table, idx), f"column {column!r} must be "
                                        f"true/false, got {value!r}", (int(pos),), order=pos))
        mapped = [pd.NA if m is None else m for m in mapped]
    na = np.array([m is pd.NA for m in mapped], dtype=bool)
    truth = np.array([m is True for m in mapped], dtype=bool)
    return pd.Series(pd.arrays.BooleanArray(truth[codes], na[codes]), index=series.index)


def _times(ratio: float) -> str:
    """A ratio for a message: ``1.31x``; far from 1 in 4 significant digits (``1.667e+29x``),
    never hundreds of digits."""
    return f"{ratio:.2f}x" if 0.01 <= ratio < 1e4 else f"{ratio:.4g}x"


def percent(fraction: float, digits: int = 0) -> str:
    """A relative change for a message: ``14%`` (``digits`` decimals); huge ones in 4
    significant digits (``1.2e+31%``), never hundreds of digits."""
    return f"{fraction:.{digits}%}" if abs(fraction) < 1e4 else f"{fraction * 100:.4g}%"


_NOT_NUMBERS = (bool, np.bool_, datetime.date, datetime.timedelta, np.datetime64,
                np.timedelta64, complex, np.complexfloating)


def non_numeric_cells(raw: pd.Series) -> np.ndarray | None:
    """Mask (n,) of the cells of ``raw`` that pandas would turn into numbers but that are not
    measurements: booleans (1.0/0.0), dates or durations (nanoseconds) and complex numbers
    (their imaginary part would be dropped); ``None`` when there are none."""
    if (pd.api.types.is_bool_dtype(raw.dtype) or pd.api.types.is_datetime64_any_dtype(raw.dtype)
            or pd.api.types.is_timedelta64_dtype(raw.dtype)
            or pd.api.types.is_complex_dtype(raw.dtype)):
        return raw.notna().to_numpy()
    if raw.dtype != object:
        return None
    mask = np.fromiter((isinstance(v, _NOT_NUMBERS) for v in raw.to_numpy()), bool,
                       count=len(raw))
    return mask if mask.any() else None


def restart_fix(restarts) -> str:
    """What to do about a resumed run, by kind of restart (:class:`delphi.schedules.Restart`)."""
    kinds = {r.kind for r in restarts}
    parts = []
    if "counter" in kinds:
        parts.append("after a restarted counter, log global steps (or mark the run's end row "
                     "final = true)")
    if "rollback" in kinds:
        parts.append("after a rollback, drop the superseded rows (the earlier segment's rows "
                     "from the step it resumed at)")
    return "Fix it: " + "; ".join(parts)


def span(values) -> str:
    """Sorted distinct numbers for a message, consecutive integers as ranges: ``8..12``,
    ``400, 450, 500``; at most 8 items shown."""
    vals = sorted({float(x) for x in np.asarray(values, dtype=float).ravel()})
    parts: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1 and vals[j].is_integer():
            j += 1
        parts.append(f"{vals[i]:g}" if j - i < 2 else f"{vals[i]:g}..{vals[j]:g}")
        if j - i == 1:
            parts.append(f"{vals[j]:g}")
        i = j + 1
    more = f" ... ({len(parts) - 8} more)" if len(parts) > 8 else ""
    return ", ".join(parts[:8]) + more


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


def _by_compute(v: pd.DataFrame) -> pd.DataFrame:
    """``v`` (sorted by run, then step) reordered by each run's compute (its largest
    ``flops``), then run, then step: the order of :attr:`Ladder.table`. A stable sort on the
    run's compute keeps the run and step order within a compute level."""
    if len(v) < 2:
        return v
    codes, _ = _run_codes(v["run"])
    starts = _group_starts(codes)
    run_flops = np.maximum.reduceat(v["flops"].to_numpy(float), starts)
    per_row = run_flops[codes]
    if np.all(per_row[1:] >= per_row[:-1]):
        return v
    return v.take(np.argsort(per_row, kind="stable")).reset_index(drop=True)


def _group_starts(codes: np.ndarray) -> np.ndarray:
    """First position of each run in ``codes`` sorted ascending (contiguous runs)."""
    return np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])


_STATUS_NAMES = ("status", "state", "run_status", "run_state")


def _status_alias(t: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """``(t, name)``: ``t`` with its run-state column named ``status`` (a ``status`` column
    as it is, else the first column named ``state``, ``run_status`` or ``run_state``, any
    case; W&B's runs table calls it ``State``) and that column's name in the source."""
    if "status" in t.columns:
        return t, "status"
    by_name = {str(c).strip().lower(): c for c in t.columns}
    for name in _STATUS_NAMES:
        if name in by_name:
            return t.rename(columns={by_name[name]: "status"}), str(by_name[name]).strip()
    return t, "status"


def _check_status(t: pd.DataFrame, problems: list, column: str = "status") -> None:
    """Append every row whose ``status`` (named ``column`` in the source) is not a known run
    state to ``problems``."""
    _, bad = status_kinds(t["status"])
    values = t["status"].to_numpy(dtype=object)
    for pos in np.flatnonzero(bad):
        problems.append(Invalid(
            _row_label(t, t.index[pos]),
            f"column {column!r} has an unknown run state {values[pos]!r}; known: finished "
            f"(or success, completed), running, crashed, failed, killed, preempted, "
            f"cancelled, dep_failed ..., or empty/unknown",
            (int(pos),), order=pos))


#: Per-run columns whose values tell runs apart: several of them under one run name is a ladder
#: whose run column is missing.
_SIZE_COLUMNS = ("params", "active_params")
#: What the run column is and how to give it: the end of the errors for a ladder whose rows all
#: have one run name (its run column missing, or holding the experiment's name).
RUN_COLUMN_HINT = ("'run' names each run (one name per model size and length; checkpoints of "
                    "a run share it): add it, or map the column that holds the names with "
                    + option("columns={'run':'NAME'}", "--columns run=NAME"))


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
        Unit of ``loss``: ``"nats/token"`` (default), ``"bits/byte"`` or ``"bits/token"``
        (:data:`UNITS`; ``bpb`` is accepted for bits/byte). Labels only: values are not
        converted.
    exclusions:
        Rows or runs a reader or manifest already left out, kept for the report.
    drop_invalid:
        Drop invalid rows instead of raising: each dropped row (or run, for a problem of the
        whole run such as a duplicate step or contradictory run state) is listed in
        :attr:`exclusions` with its reason, and one warning gives the count. A resumed run
        whose rollback logs steps again loses only its superseded earlier rows (those from
        the step it resumed at), not the run.
    schedule:
        The runs' LR schedule shape, e.g. ``"cosine:warmup=50,final=0.1"``
        (:meth:`delphi.schedules.Schedule.parse`), completed per run by ``peak_lr`` and
        ``total_steps``; ``None`` when unknown (a logged ``lr`` column can stand in).

    Raises
    ------
    LadderError
        A required column is missing (the message lists the columns found), or ``unit`` is
        not a known unit (the message lists them). Unless ``drop_invalid``: rows are invalid
        (one error lists the first 20 problems and gives the count, each naming run, row and
        column): a value non-numeric, NaN, infinite, zero or negative, a (run, step) pair
        repeated with different values (within one segment of a run: after a restarted step
        counter a step logged again is another checkpoint; a row identical in every column to
        an earlier one is a copy, merged with a
        :class:`~delphi.errors.DuplicateRowsWarning` and listed in :attr:`exclusions`), a resumed run's rows superseded by a rollback that
        logs their steps again, a per-run constant (``params``...) varying within a run, an unknown
        ``status``, more than one ``final`` row in a run, or a run whose ``final``,
        ``status`` and ``fraction`` (or step against ``total_steps``) disagree
        (:mod:`delphi.runstate`).

    Attributes
    ----------
    table:
        The validated rows, a DataFrame of shape (n_rows, n_columns) with a fresh
        RangeIndex, ordered by compute: runs by their compute (a run's largest ``flops``
        [FLOPs]), then by run id, then each run's rows by ``step`` (else ``tokens``, else
        ``flops``). A run's rows are contiguous; the smallest rung comes first.
    runs:
        Run ids, sorted by name (:attr:`runs`).

    Notes
    -----
    When ``flops`` is absent it is computed as C = 6·N·D (Kaplan et al. 2020, Eq. 2.1), with
    N = ``active_params`` where given (MoE). A given ``flops`` column is compared with 6·N·D
    run by run: k = C / (6·N·D) is kept in :attr:`flops_convention` (median, spread, drift
    across rungs). A median k outside 0.5..2, single runs straying from the median by more
    than 25%, or a steady drift of k by more than 10% from the smallest to the largest rung
    are reported in :attr:`warnings` (a budget taken from a run's name can be forward-only,
    a third of the training compute; a count with attention FLOPs drifts with model size).
    """

    def __init__(self, table: pd.DataFrame, *, source: str = "<memory>", name: str | None = None,
                 metric: str = "loss", unit: str = "nats/token",
                 exclusions: Iterable[Exclusion] = (), schedule: str | None = None,
                 drop_invalid: bool = False) -> None:
        self.source = str(source)
        self.schedule = schedule
        self.name = name or self.source
        self.metric = metric
        self.unit = normalize_unit(unit)
        self.warnings: list[str] = []
        self.exclusions: list[Exclusion] = list(exclusions)
        #: The manifest's ``[predict]`` law and fixed parameters (``{"law": ..., "fixed":
        #: {...}}``; empty without a manifest): ``delphi predict NAME`` applies them,
        #: :func:`delphi.predict` takes only its arguments and notes the difference.
        self.predict_defaults: dict = {}
        self.flops_source: str = "given"
        #: k = C / (6·N·D) per run, its median, spread and drift across rungs; ``None`` when
        #: the ladder has no params and tokens to compare its compute with.
        self.flops_convention: FlopsConvention | None = None
        #: Runs whose last row was dropped as invalid (``drop_invalid``): run -> source row.
        #: Their final loss is unknown, so final-loss laws leave them out.
        self.cut_runs: dict[str, int] = {}
        #: Runs whose logged step goes back in file order (resumed): run -> restarts.
        self.restarts: dict[str, list] = {}
        #: Rows (source ``row``) of a rollback's earlier segment that the run continued past
        #: without logging their steps again: run -> rows (a warning names them).
        self.superseded: dict[str, list[int]] = {}
        #: ``{canonical column: factor}`` the reader multiplied in after reading
        #: (:func:`delphi.load_ladder`'s ``scale``, CLI ``--scale``); empty when none.
        self.scale: dict[str, float] = {}
        #: The run-state column as the source spells it (W&B: ``State``), for messages.
        self.status_column: str = "status"
        #: ``(rows, runs)`` dropped by ``drop_invalid`` (runs: dropped whole).
        self.dropped: tuple[int, int] = (0, 0)
        # A shallow copy: columns are replaced, never written into (copy-on-write).
        self.table = self._validate(pd.DataFrame(table).copy(deep=False), drop_invalid)
        self._check_unit_column()
        self._check_unit_steps()
        self._check_loss_range()
        self._check_unit_plausible()

    def _check_unit_plausible(self) -> None:
        """Refuse a bits/byte ladder whose every run ends above 8 bits/byte, and warn of one
        whose every run ends above 2 bits/byte: :func:`~delphi.inputs.units.unit_plausibility`,
        on each run's last row."""
        if "loss" not in self.table.columns or not len(self.table):
            return
        last = self.table.groupby("run", sort=False)["loss"].last().to_numpy(float)
        error, warning = unit_plausibility(self.unit, last)
        say = option("unit='nats/token'", "--unit nats/token")
        if error:
            raise LadderError(f"ladder {self.name!r} is read as {self.unit}, but {error}; give "
                              f"the ladder's own unit ({option('unit=...', '--unit')})")
        if warning:
            self._warn(f"ladder {self.name!r} is read as {self.unit}, but {warning}; if so, "
                       f"say so with {say}")

    def _check_loss_range(self) -> None:
        """Warn of losses outside :data:`~delphi.inputs.units.LOSS_RANGE` (a perplexity, a
        percentage, a typo): they fit, but no forecast of them can be registered."""
        if "loss" not in self.table.columns:
            return
        y = self.table["loss"].to_numpy(float)
        lo, hi = LOSS_RANGE
        out = np.isfinite(y) & ((y < lo) | (y > hi))
        if not out.any():
            return
        rows = self.table.loc[out]
        runs = list(dict.fromkeys(rows["run"].astype(str)))
        hint = ("; a perplexity? its log is the cross-entropy" if np.nanmax(y[out]) > hi else
                "; a loss this small is almost never wrong: another metric?")
        low, high = float(np.nanmin(y[out])), float(np.nanmax(y[out]))
        seen = f"{low:.4g}" if low == high else f"{low:.4g}..{high:.4g}"
        self._warn(f"ladder {self.name!r}: {plural(int(out.sum()), 'row')} of "
                   f"{plural(len(runs), 'run')} ({', '.join(map(repr, runs[:3]))}"
                   f"{' ...' if len(runs) > 3 else ''}) {'has' if out.sum() == 1 else 'have'} "
                   f"a {self.metric} outside the plausible {lo:g}..{hi:g} {self.unit} ({seen})"
                   f"{hint}; a registry refuses forecasts outside it")

    def _check_unit_column(self) -> None:
        """Refuse a ``unit`` column (any case; ``units``, ``loss_unit``) naming a loss unit
        other than :attr:`unit` on some row: delphi never converts units, so such a row would
        be fitted in the wrong one. Values that are not loss units (``gpu``) leave the column
        alone; empty cells are skipped."""
        col = next((c for c in self.table.columns
                    if str(c).strip().lower() in ("unit", "units", "loss_unit")), None)
        if col is None:
            return
        named = {}
        for v in self.table[col].dropna().astype(str).str.strip().unique():
            if not v:
                continue
            try:
                named[v] = normalize_unit(v)
            except LadderError:
                return     # not a column of loss units
        t = self.table
        unit = t[col].astype(str).str.strip().map(named)
        off = unit.notna() & (unit != self.unit)
        if not off.any():
            return
        rows = t.loc[off]
        where = ", ".join(f"{r!r} (row {int(i)})" for r, i in
                          zip(rows["run"].astype(str)[:5],
                              rows["row"] if "row" in t.columns else rows.index))
        more = f" and {int(off.sum()) - 5} more" if off.sum() > 5 else ""
        others = sorted(set(unit[off]))
        if off.all() and len(others) == 1:
            raise LadderError(
                f"ladder {self.name!r}: column {str(col)!r} says {others[0]} on every row, but "
                f"the ladder is read as {self.unit}; delphi never converts units: say so with "
                f"{option(f'unit={others[0]!r}', f'--unit {others[0]}')}")
        raise LadderError(
            f"ladder {self.name!r}: column {str(col)!r} names {', '.join(others)} for run(s) "
            f"{where}{more}, but the ladder is read as {self.unit}; delphi never converts "
            f"units (bits/token = nats/token / ln 2; bits/byte needs the eval set's bytes per "
            f"token): convert those losses, or fit the runs of each unit as their own ladder")

    def _check_unit_steps(self) -> None:
        """Warn when the best loss of one compute budget jumps from the next by at least
        :data:`UNIT_STEP` (against the typical step) while the other steps between budgets
        are small, with at least two budgets on either side: no scaling law makes such a
        step, mixed units do (nats/token and bits/token differ by 1/ln 2 = 1.44x; bits/byte by
        more). Budgets: runs within 5% of compute, each at its last row; the step named by its
        runs, budgets and factor."""
        t = self.table
        if "flops" not in t.columns or "loss" not in t.columns or len(t) < 4:
            return
        last = t.groupby("run", sort=False).tail(1)
        c = last["flops"].to_numpy(float)
        y = last["loss"].to_numpy(float)
        ok = np.isfinite(c) & np.isfinite(y) & (c > 0) & (y > 0)
        order = np.argsort(c[ok], kind="stable")
        c, y, runs = c[ok][order], y[ok][order], last["run"].to_numpy()[ok][order]
        if len(c) < 4:
            return
        budget = budget_labels(pd.DataFrame({"flops": c})).to_numpy()   # c is sorted
        best = pd.Series(y).groupby(budget, sort=False).idxmin().to_numpy()
        if len(best) < 4:
            return
        log_step = np.log(y[best[1:]] / y[best[:-1]])
        # each step against the typical one (the law's own fall between budgets)
        dev = log_step - np.median(log_step)
        big = np.flatnonzero(np.abs(dev) >= math.log(UNIT_STEP))
        if len(big) != 1 or not 1 <= big[0] <= len(log_step) - 2:
            # none, several (a ladder rough throughout), or one beside the first or last
            # budget: a single run off the trend, which the fits' screens name
            return
        rest = np.delete(log_step, big)
        if np.median(np.abs(rest - np.median(rest))) > 0.05:
            return
        i = int(big[0])
        step = np.exp(log_step)
        a, b = runs[best[i]], runs[best[i + 1]]
        f = float(step[i])
        way = f"falls {1 / f:.3g}x" if f < 1 else f"rises {f:.3g}x"
        self._warn(f"ladder {self.name!r}: the best loss {way} from run {a!r} (C = "
                   f"{c[best[i]]:.3g}) to run {b!r} (C = {c[best[i + 1]]:.3g}), while the other "
                   f"steps between budgets change it by {np.median(np.abs(np.expm1(rest))):.1%} "
                   f"(median): no scaling law makes such a step; are the runs on either side "
                   f"in different units (nats/token vs bits/token is 1.44x, bits/byte more) or "
                   f"metrics?")

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_records(cls, records: Sequence[dict], **kwargs) -> "Ladder":
        """Build a ladder from a list of dicts (one per row); keyword arguments as in ``Ladder``."""
        return cls(pd.DataFrame.from_records(list(records)), **kwargs)

    def _warn(self, message: str, category: type[LadderWarning] = LadderWarning) -> None:
        self.warnings.append(message)
        warnings.warn(message, category, stacklevel=user_stacklevel())

    def _merge_exact_copies(self, t: pd.DataFrame) -> pd.DataFrame:
        """``t`` with one copy of each group of rows identical in every column but ``row``
        and ``source_file`` (two logs of a run concatenated), in file order; each dropped
        copy is listed in :attr:`exclusions` and one :class:`~delphi.errors.DuplicateRowsWarning`
        names the runs, keys and rows. Rows sharing a (run, step) key but differing
        elsewhere are left for the duplicate check (an error: which row is right?)."""
        key = ["run", next(c for c in ("step", "tokens", "flops") if c in t.columns)]
        try:
            # only rows whose key repeats can be copies: the whole rows are compared on them
            maybe = t.duplicated(subset=key, keep=False).to_numpy()
        except TypeError:        # unhashable run ids or keys: the checks below name them
            return t
        if not maybe.any():
            return t
        c = t.loc[maybe]
        cols = [x for x in c.columns if x not in ("row", "source_file")]
        # Cells as text (metadata may hold unhashable values: dicts from JSON), NaN equal to
        # NaN; rows numbered by their group of identical cells, one column at a time.
        group = np.zeros(len(c), dtype=np.int64)
        for col in cols:
            codes, _ = pd.factorize(c[col].astype(str), use_na_sentinel=False)
            group, _ = pd.factorize(group * (int(codes.max(initial=0)) + 1) + codes)
        copy = pd.Series(group, index=c.index).duplicated(keep="first")
        if not copy.any():
            return t
        first = c["row"].groupby(group).transform("first")
        by_run: dict[str, list[tuple]] = {}
        for idx in c.index[copy.to_numpy()]:
            run, row, orig = str(t.at[idx, "run"]), t.at[idx, "row"], first[idx]
            self.exclusions.append(Exclusion(run, f"row {row} repeats row {orig} exactly "
                                                  f"(identical in every column); the copy dropped"))
            by_run.setdefault(run, []).append((t.at[idx, key[1]], row, orig))
        listed = []
        for run, items in list(by_run.items())[:5]:
            shown = items[:_MAX_LISTED_ROWS]
            more = f", ... ({len(items)} in all)" if len(items) > len(shown) else ""
            listed.append(f"run {run!r} {key[1]} {', '.join(_show(k) for k, _, _ in shown)}"
                          f"{more} (row(s) {', '.join(str(r) for _, r, _ in shown)}{more} "
                          f"repeat row(s) {', '.join(str(o) for _, _, o in shown)})")
        runs_more = f"; and {len(by_run) - 5} more run(s)" if len(by_run) > 5 else ""
        n = int(copy.sum())
        self._warn(f"ladder {self.name!r}: {plural(n, 'row')} repeat{'s' if n == 1 else ''} "
                   f"an earlier row exactly (identical in every column: two logs "
                   f"concatenated?), merged into one copy each: {'; '.join(listed)}"
                   f"{runs_more}; each dropped copy is listed in the exclusions",
                   DuplicateRowsWarning)
        return t.loc[~t.index.isin(c.index[copy.to_numpy()])].reset_index(drop=True)

    def _drop_initial_evals(self, t: pd.DataFrame) -> pd.DataFrame:
        """Leave out step-0 rows with no tokens or FLOPs yet (an evaluation before training,
        the usual first line of a training log), with a warning; they carry no scaling
        information and their 0 is not an invalid count."""
        if "step" not in t.columns or not ({"tokens", "flops"} & set(t.columns)):
            return t
        step = pd.to_numeric(t["step"], errors="coerce")
        zero = pd.Series(False, index=t.index)
        for col in ("tokens", "flops"):
            if col in t.columns:
                zero |= pd.to_numeric(t[col], errors="coerce").eq(0)
        initial = (step.eq(0) & zero).to_numpy()
        if not initial.any() or initial.all():
            return t        # all rows step 0: not a training log; the checks below name them
        rows = t.loc[initial, "row"].tolist()
        shown = ", ".join(str(r) for r in rows[:_MAX_LISTED])
        more = f" and {len(rows) - _MAX_LISTED} more" if len(rows) > _MAX_LISTED else ""
        self._warn(f"ladder {self.name!r}: {len(rows)} step-0 row(s) with no tokens or FLOPs "
                   f"yet (evaluations before training: rows {shown}{more}) left out")
        return t.loc[~initial].reset_index(drop=True)

    def _validate(self, t: pd.DataFrame, drop_invalid: bool = False) -> pd.DataFrame:
        # Vectorised: whole-column checks and per-run aggregates over integer run codes. Every
        # invalid row is collected (an Invalid each, with the wording the row-by-row checks
        # had) and reported in one error, or dropped and listed with drop_invalid.
        if t.empty:
            if self.exclusions:     # the reader left nothing: say what it excluded, and why
                groups: dict[str, list[Exclusion]] = {}
                for e in self.exclusions:   # reasons differing only in numbers (rows) group
                    groups.setdefault(re.sub(r"\d+", "#", str(e.reason)), []).append(e)
                parts = [f"{len(g)} run(s) ({', '.join(e.run for e in g[:3])}"
                         f"{' ...' if len(g) > 3 else ''}), e.g. {g[0].reason}"
                         for g in list(groups.values())[:3]]
                more = f"; and {len(groups) - 3} more reasons" if len(groups) > 3 else ""
                raise LadderError(f"ladder {self.name!r} has no rows left: all "
                                  f"{len(self.exclusions)} run(s) were excluded while reading: "
                                  f"{'; '.join(parts)}{more}")
            raise LadderError(f"ladder {self.name!r} has no rows")
        if isinstance(t.columns, pd.MultiIndex):    # t["loss"] would be a table, not a column
            raise LadderError(f"ladder {self.name!r} has {t.columns.nlevels}-level (MultiIndex) "
                              f"column names, e.g. {t.columns[0]!r}; give one name per column "
                              f"(frame.columns = frame.columns.get_level_values(0), or join "
                              f"the levels)")
        twice = sorted({str(c) for c in t.columns[t.columns.duplicated()]})
        if twice:       # t["loss"] would be a table: which column is the loss?
            raise LadderError(f"ladder {self.name!r} has several columns named "
                              f"{', '.join(map(repr, twice))}; keep one")
        missing = [c for c in ("run", "loss") if c not in t.columns]
        if "flops" not in t.columns and not {"params", "tokens"} <= set(t.columns):
            missing.append("flops (or both params and tokens)")
        if missing:
            found = columns_found(t.columns, metric=self.metric)
            lossy = [str(c) for c in t.columns if "loss" in missing and isinstance(c, str)
                     and not c.startswith("source:") and LOSS_LIKE.search(c)]
            hint = (f"; pick the loss among {', '.join(lossy[:_MAX_LISTED])} with "
                    f"{option('metric=NAME', '--metric NAME')}" if lossy and found.startswith("columns")
                    else "")
            likely = _likely_columns(t.columns, missing)
            if likely:
                pairs = ",".join(f"{k}={v}" for k, v in likely.items())
                api = "{" + ", ".join(f"'{k}': '{v}'" for k, v in likely.items()) + "}"
                hint += (f"; map them with {option('columns=' + api.replace(' ', ''), '--columns ' + pairs)}")
            raise LadderError(
                f"ladder {self.name!r} is missing required column(s) {', '.join(missing)}; "
                f"{found}{hint}")
        if "row" not in t.columns:
            t["row"] = np.arange(len(t))
        t = t.reset_index(drop=True)
        t = self._drop_initial_evals(t)
        t = self._merge_exact_copies(t)
        t, self.status_column = _status_alias(t)
        problems: list[Invalid] = []
        blank = t["run"].isna()
        if not pd.api.types.is_numeric_dtype(t["run"]):     # "   " is as empty as ""
            blank |= t["run"].map(lambda v: isinstance(v, str) and v != "" and not v.strip())
        for i in np.flatnonzero(blank.to_numpy()):
            problems.append(Invalid(f"row {t.at[i, 'row']}", "column 'run' is empty", (int(i),),
                                    order=i))
        t["run"] = t["run"].astype(str)

        for col in _POSITIVE + _NONNEGATIVE + ("fraction",):
            if col not in t.columns:
                continue
            values = self._check_numbers(t, col, problems)
            if values.dtype != t[col].dtype or not isinstance(t[col].dtype, np.dtype):
                t[col] = values          # float64 columns stay as they are (no copy)
        if {"params", "active_params"} <= set(t.columns):
            # Active parameters are a subset of the total (as a target's are): more is a
            # swapped pair of columns or a typo, and would put C off by their ratio.
            n = pd.to_numeric(t["params"], errors="coerce").to_numpy(float)
            act = pd.to_numeric(t["active_params"], errors="coerce").to_numpy(float)
            with np.errstate(invalid="ignore"):
                over = act > n * (1 + 1e-9)
            for pos in np.flatnonzero(over):
                idx = t.index[pos]
                problems.append(Invalid(
                    _row_label(t, idx), f"column 'active_params' is {act[pos]:.4g}, more than "
                    f"its params {n[pos]:.4g} (a mixture of experts activates part of its "
                    f"parameters per token; swapped?)", (int(pos),), order=pos))
        if "final" in t.columns:
            t["final"] = _coerce_bool(t["final"], "final", t, problems)
        if "status" in t.columns:
            _check_status(t, problems, self.status_column)

        # Run-level checks on the rows whose values are valid.
        bad = np.zeros(len(t), dtype=bool)
        for p in problems:
            bad[list(p.rows)] = True
        v = t.take(np.flatnonzero(~bad)) if bad.any() else t
        key = ["run", "step"] if "step" in t.columns else (
            ["run", "tokens"] if "tokens" in t.columns else ["run", "flops"])
        if len(v):
            codes, names = _run_codes(v["run"])
            segment = unreliable = None
            if "step" in v.columns:
                # Resumed runs first, rows still in file order: a rollback's superseded rows
                # are reported as such (not as duplicates), and steps logged again after a
                # restarted counter are other checkpoints.
                v, codes, segment, unreliable = self._resumed_rows(v, codes, names, problems)
            self._check_per_run(v, codes, names, problems)
            order = _sort_order(codes, v[key[1]].to_numpy(float))
            self._check_duplicates(v, key, codes, order, problems, segment)
            self._check_states(v if order is None else v.take(order),
                               codes if order is None else codes[order], names, problems,
                               step_unreliable=unreliable)
        if problems:
            rows = set()
            for p in problems:
                rows.update(p.rows)
            if not drop_invalid:
                n_runs = t["run"].take(sorted(rows)).nunique()
                raise LadderError(invalid_message(self.name, problems, len(rows), n_runs))
            v = self._drop_invalid(t, problems, key[1])
            codes, names = _run_codes(v["run"])
            order = _sort_order(codes, v[key[1]].to_numpy(float))

        if "step" in v.columns:
            # Rows are still in file order here: a step going back is a resumed run.
            self._check_restarts(v, codes, names)
        self._account_flops(v, codes, names)
        if order is not None:        # not already sorted by run, then step/tokens/flops
            v = v.take(order)
        v = v.reset_index(drop=True)
        if "status" in v.columns:
            self._check_stateless(v)
        if "step" not in v.columns and "tokens" not in v.columns:
            self._check_unordered_repeats(v)
        v = _by_compute(v)
        if v.shape[1] > 100:
            # A wide export (hundreds of W&B metrics) read column by column is fragmented, and
            # pandas warns (PerformanceWarning) on each later column insert; one copy joins it.
            v = v.copy()
        return v

    def _check_unordered_repeats(self, v: pd.DataFrame) -> None:
        """Warn when a run has several rows but the table has no ``step`` or ``tokens``: they
        are taken as its checkpoints in order of ``flops`` and final-loss laws use only the
        last, so the others must not vanish unmentioned (they may be other runs sharing an
        id). ``v`` is sorted by run, then flops."""
        runs = v["run"]
        repeated = runs[runs.duplicated(keep=False)]
        if repeated.empty:
            return
        groups = v.loc[repeated.index, "row"].groupby(repeated, sort=False)
        listed = []
        for run, rows in list(groups)[:5]:
            rows = rows.tolist()
            shown = ", ".join(map(str, rows[:-1][:10])) + (" ..." if len(rows) > 11 else "")
            listed.append(f"run {run!r}: rows {shown} before row {rows[-1]}")
        n = groups.ngroups
        more = f"; and {n - 5} more run(s)" if n > 5 else ""
        self._warn(f"ladder {self.name!r}: {n} run(s) have several rows and the table has no "
                   f"step or tokens column, so the rows are read as checkpoints of one run in "
                   f"order of flops and final-loss laws use only each run's last row; left out "
                   f"of final-loss laws: {'; '.join(listed)}{more} (if they are different "
                   f"runs, give each its own run id)")

    def _check_stateless(self, v: pd.DataFrame) -> None:
        """Warn when some runs have a run state and others none (an empty cell at their end
        row and no final/fraction/step evidence): those are counted as finished for lack of a
        state, which is right for a tidy table of final rows but not for a run whose state was
        lost. ``v`` is sorted by run, then step."""
        codes, names = _run_codes(v["run"])
        st = run_states(v, codes, names, _group_starts(codes),
                        step_unreliable=self._counter_restarted(names),
                        status_name=self.status_column)
        stateless = np.flatnonzero((st.status == -1) & (st.state == -1))
        if not len(stateless) or not (st.status != -1).any():
            return
        listed = ", ".join(repr(str(names[k])) for k in stateless[:10])
        more = f" and {len(stateless) - 10} more" if len(stateless) > 10 else ""
        self._warn(f"ladder {self.name!r}: {len(stateless)} run(s) have no {self.status_column} "
                   f"(empty or unknown at their last row) while the other runs have one: "
                   f"{listed}{more}; they are counted as finished for lack of a state "
                   f"(give their {self.status_column} if they did not finish)")

    def _drop_invalid(self, t: pd.DataFrame, problems: list[Invalid], key: str) -> pd.DataFrame:
        """``t`` without the invalid rows (and the whole runs of run-level problems), in file
        order; each dropped row or run is recorded in :attr:`exclusions` with its reason, and
        runs that lost their last row in :attr:`cut_runs`."""
        by_run: dict[str, list[str]] = {}
        by_row: dict[int, list[str]] = {}
        first: dict = {}                       # where each dropped run or row is listed
        superseded: set[int] = set()
        for p in sorted(problems, key=lambda p: p.order):
            if p.run is not None:
                by_run.setdefault(p.run, []).append(p.detail)
                first.setdefault(("run", p.run), p.order)
            else:
                # Every row of a row-level problem (a rollback's superseded rows: several).
                for r in p.rows:
                    by_row.setdefault(r, []).append(p.detail)
                    first.setdefault(("row", r), float(r) if p.superseded else p.order)
                if p.superseded:
                    superseded.update(p.rows)
        runs = t["run"].to_numpy(dtype=object)
        keep = ~t["run"].isin(list(by_run)).to_numpy()
        keep[list(by_row)] = False
        src = t["row"].to_numpy()
        no_id = np.zeros(len(t), dtype=bool)
        no_id[[p.rows[0] for p in problems if p.detail == "column 'run' is empty"]] = True
        listed = []
        for run, details in by_run.items():
            listed.append((first[("run", run)], Exclusion(
                run, f"invalid run dropped by {_DROP_INVALID}: " + "; ".join(details))))
        for pos, details in by_row.items():
            run = "*" if no_id[pos] else runs[pos]
            what = "superseded row" if pos in superseded else "invalid row"
            listed.append((first[("row", pos)], Exclusion(
                run, f"{what} {src[pos]} dropped by {_DROP_INVALID}: "
                + "; ".join(details))))
        self.exclusions.extend(e for _, e in sorted(listed, key=lambda x: x[0]))
        v = t.take(np.flatnonzero(keep))
        if v.empty:
            raise LadderError(f"ladder {self.name!r}: every row is invalid ({len(problems)} "
                              f"problem(s); first: {sorted(problems, key=lambda p: p.order)[0].message})")
        # A run that lost its last row (by step) would show an earlier checkpoint as its end.
        last = pd.Series(v[key].to_numpy(float)).groupby(v["run"].to_numpy()).max()
        keys = pd.to_numeric(t[key], errors="coerce").to_numpy(float)
        for pos in sorted(by_row):
            run = runs[pos]
            # A superseded row is replaced by a later segment: the run's end is still logged.
            if (run in last.index and not no_id[pos] and pos not in superseded
                    and not keys[pos] < last[run]):
                self.cut_runs.setdefault(str(run), int(src[pos]))
        single = sum(1 for pos in by_row if runs[pos] not in by_run and pos not in superseded)
        n_sup = sum(1 for pos in by_row if runs[pos] not in by_run and pos in superseded)
        parts = ([f"{len(by_run)} invalid run(s), all their rows"] if by_run else []) + (
            [f"{single} invalid row(s)"] if single else []) + (
            [f"{n_sup} superseded row(s) of resumed runs"] if n_sup else [])
        self.dropped = (int((~keep).sum()), len(by_run))
        self._warn(f"ladder {self.name!r}: {_DROP_INVALID} dropped {int((~keep).sum())} row(s) "
                   f"({' and '.join(parts)}); each is listed with its reason in the exclusions")
        return v

    def _check_states(self, s: pd.DataFrame, codes: np.ndarray, names, problems: list,
                      step_unreliable: np.ndarray | None = None) -> None:
        """Append to ``problems`` the runs of ``s`` (sorted by run, then step) with several
        ``final`` rows or whose ``final``, ``status`` and ``fraction`` disagree (a run whose
        step counter restarted, ``step_unreliable``, is not judged by its step)."""
        starts = _group_starts(codes)
        st = run_states(s, codes, names, starts, step_unreliable=step_unreliable,
                        status_name=self.status_column)
        pos = s.index.to_numpy()
        rows = s["row"].to_numpy()
        for k, at in st.multiple_finals:
            run = str(names[k])
            listed = sorted(rows[at].tolist())
            problems.append(Invalid(f"run {run!r}", f"{len(at)} rows are marked final (rows "
                                    f"{', '.join(map(str, listed))}); a run has one final "
                                    f"checkpoint", tuple(int(i) for i in pos[at]), run=run,
                                    order=float(pos[at].min())))
        multiple = {k for k, _ in st.multiple_finals}
        for k, detail in st.contradictions:
            if k in multiple:
                continue
            i = st.end[k]
            run = str(names[k])
            problems.append(Invalid(f"run {run!r} (row {rows[i]})", detail, (int(pos[i]),),
                                    run=run, order=float(pos[i])))

    @staticmethod
    def _check_numbers(t: pd.DataFrame, col: str, problems: list | None = None) -> np.ndarray:
        """Column ``col`` as float, shape (n,). Every bad row is appended to ``problems`` (an
        :class:`Invalid` each); without ``problems``, raises at the first."""
        raw = t[col]
        found: list[Invalid] = []

        def report(mask: np.ndarray, what) -> None:
            for pos in np.flatnonzero(mask):
                idx = t.index[pos]
                found.append(Invalid(_row_label(t, idx), what(_show(t.at[idx, col])),
                                     (int(pos),), order=pos))

        if pd.api.types.is_float_dtype(raw.dtype) and not isinstance(raw.dtype, pd.api.extensions.ExtensionDtype):
            values = raw.to_numpy()
            not_number = None
        else:
            numbers = pd.to_numeric(raw, errors="coerce")
            odd = non_numeric_cells(raw)
            if odd is not None:     # true/false, dates: not numbers (pandas reads 1.0, ns)
                as_float = np.full(len(raw), np.nan)
                if not odd.all():
                    as_float[~odd] = pd.to_numeric(raw[~odd], errors="coerce").to_numpy(
                        dtype=float, na_value=np.nan)
                numbers = pd.Series(as_float, index=raw.index)
            not_number = (numbers.isna() & raw.notna()).to_numpy()
            report(not_number, lambda v: f"column {col!r} is not a number: {v}")
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
        if not_number is not None:
            nonfinite = nonfinite & ~not_number      # one problem per cell
        # An empty cell reads as NaN: say "empty or NaN", so a short row is recognisable.
        missing = nonfinite & np.isnan(values)
        for mask, problem in ((missing, "is empty or NaN"), (nonfinite & ~missing, "is infinite"),
                              (out_of_range, what)):
            report(mask, lambda v, problem=problem: f"column {col!r} {problem}, got {v}")
        if col in _MAGNITUDE:
            lo, hi, noun = _MAGNITUDE[col]
            with np.errstate(invalid="ignore"):
                extreme = (values > 0) & np.isfinite(values) & ((values < lo) | (values > hi))
            # a count below 1 is in millions or billions: the reader can scale it
            low = (f"scale={{'{col}':FACTOR}}", f"--scale {col}=FACTOR")
            with np.errstate(invalid="ignore"):
                small = extreme & (values < lo)
            report(small, lambda v: f"column {col!r} is {v}, outside {lo:g}..{hi:g}: not a "
                                    f"plausible {noun} (in other units? multiply the column "
                                    f"as it is read: {option(*low)}, or [scale] in a "
                                    f"manifest)")
            report(extreme & ~small, lambda v: f"column {col!r} is {v}, outside {lo:g}..{hi:g}: "
                                               f"not a plausible {noun} (in other units?)")
        if found and problems is None:
            raise LadderError(min(found, key=lambda p: p.order).message)
        if problems is not None:
            problems.extend(found)
        return values

    def _check_per_run(self, t: pd.DataFrame, codes: np.ndarray, names: np.ndarray,
                       problems: list) -> None:
        """Per-run constants must not vary within a run: min == max per run (NaN ignored).
        Each failing run is appended to ``problems`` (the whole run is invalid)."""
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
        for k in np.flatnonzero(failing):
            run = str(names[k])
            g = t[codes == k]
            at = tuple(int(i) for i in g.index)
            src = g["row"]

            def add(detail: str) -> None:
                problems.append(Invalid(f"run {run!r}", detail, at, run=run, order=min(at)))

            info = {"run": run}
            varies = False
            for c in cols:
                vals = g[c].dropna().unique()
                if len(vals) > 1:
                    varies = True
                    # Every row under one name, with several N or D: the run column is
                    # probably missing (a constant such as the experiment name took its place).
                    one = (f": every row of the ladder has run {run!r}, so these are "
                           f"probably several runs under one name: is the run column missing? "
                           f"The column {RUN_COLUMN_HINT}" if n_runs == 1 and c in _SIZE_COLUMNS
                           else "")
                    add(f"column {c!r} must be constant within a run, found "
                        f"{', '.join(f'{v:g}' for v in vals[:4])}"
                        f"{f', ... ({len(vals)} values)' if len(vals) > 4 else ''} (rows "
                        f"{src.min()}..{src.max()}){one}")
                elif len(vals) == 1:
                    info[c] = float(vals[0])
            if varies:
                continue
            try:
                _RunInfo(**info)
            except ValidationError as exc:
                add(exc.errors()[0]["msg"])

    def _resumed_rows(self, v: pd.DataFrame, codes: np.ndarray, names, problems: list
                      ) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray]:
        """Resumed runs (rows of ``v`` in file order; :func:`delphi.schedules.find_restarts`)
        before the duplicate-step check.

        A *rollback* whose later segment logs a step its earlier rows already logged is one
        problem naming the restart and the superseded earlier rows (those at or after the
        step it resumed at): the later segment is what the run continued from, so
        ``drop_invalid`` drops only the superseded rows and keeps the run. A rollback that
        repeats no step is left to the resumed-run warning. After a *restarted counter* a
        step logged again is another checkpoint (a later segment), not a duplicate.

        Returns ``(v, codes, segment, unreliable)``: ``v`` and ``codes`` without the
        superseded rows, each row's segment number within its run (shape (n,), +1 after each
        restarted counter) and, per run (shape (n_runs,)), whether its step counter restarted.
        """
        found = find_restarts(codes, v["step"].to_numpy(float), v["loss"].to_numpy(float),
                              v["row"].to_numpy(), names)
        segment = np.zeros(len(v), dtype=np.int64)
        unreliable = np.zeros(len(names), dtype=bool)
        if not found:
            return v, codes, segment, unreliable
        code_of = {str(n): k for k, n in enumerate(names)}
        steps = v["step"].to_numpy(float)
        src = v["row"].to_numpy()
        pos = np.arange(len(v))
        drop = np.zeros(len(v), dtype=bool)
        for r in found:
            k = code_of[r.run]
            mine = codes == k
            if r.kind == "counter":
                unreliable[k] = True
                later = pos >= r.index if r.index > r.prev_index else pos <= r.index
                segment[mine & later] += 1
                continue
            gone = np.asarray(r.superseded, dtype=np.int64)
            kept = mine.copy()
            kept[gone] = False
            if not len(gone) or not np.isin(steps[gone], steps[kept]).any():
                continue
            drop[gone] = True
            labels = tuple(int(i) for i in v.index[gone])
            problems.append(Invalid(
                f"run {r.run!r}",
                f"resumed run: {r.describe()}; its earlier rows {span(src[gone])} (steps "
                f"{steps[gone].min():g} to {steps[gone].max():g}, logged again from row "
                f"{r.row} on) are superseded by the segment the run continued from",
                labels, order=float(min(labels)), superseded=True,
                fix=f"drop them ({_DROP_INVALID} drops only these rows)"))
        if drop.any():
            keep = ~drop
            return v.take(np.flatnonzero(keep)), codes[keep], segment[keep], unreliable
        return v, codes, segment, unreliable

    def _check_restarts(self, t: pd.DataFrame, codes: np.ndarray, names: np.ndarray) -> None:
        """Record and warn about runs whose logged step goes back in file order (resumed
        runs; :func:`delphi.schedules.find_restarts`): ``self.restarts`` maps run -> restarts.
        Curve laws refuse such runs; their last row by step may not be their last checkpoint."""
        found = find_restarts(codes, t["step"].to_numpy(float), t["loss"].to_numpy(float),
                              t["row"].to_numpy(), names)
        self.restarts = {}
        for r in found:
            self.restarts.setdefault(r.run, []).append(r)
        src = t["row"].to_numpy()
        for run, items in self.restarts.items():
            listed = "; ".join(r.describe() for r in items[:3])
            more = f"; and {len(items) - 3} more" if len(items) > 3 else ""
            gone = [i for r in items for i in r.superseded]
            if gone:      # a rollback that repeats no step: its earlier rows are superseded
                self.superseded[run] = [int(x) for x in src[gone]]
                more += (f"; the rows it continued past, superseded by the later segment: "
                         f"{span(src[gone])}")
            self._warn(f"ladder {self.name!r}: run {run!r} was resumed: its step goes back "
                       f"{len(items)} time(s) in file order ({listed}{more}); sorted by step "
                       f"its segments interleave, so it is not one loss curve: curve laws "
                       f"(delphi complete) refuse it, and its last row by step may not be its "
                       f"last checkpoint. {restart_fix(items)}")

    @staticmethod
    def _check_duplicates(t: pd.DataFrame, key: list[str], codes: np.ndarray,
                          order: np.ndarray | None, problems: list,
                          segment: np.ndarray | None = None) -> None:
        """A (run, step) pair (or (run, tokens), (run, flops)) may not repeat: adjacent equal
        keys in sorted order (NaN equals NaN, as in ``DataFrame.duplicated``). Each repeated
        pair is appended to ``problems`` (the whole run is invalid: which row is right?).
        Rows in different ``segment`` s (shape (n,): logged before and after a restarted step
        counter) are different checkpoints, not duplicates."""
        v = t[key[1]].to_numpy(float)
        c = codes
        pos = t.index.to_numpy()
        seg = segment
        if order is not None:
            v, c, pos = v[order], c[order], pos[order]
            seg = None if seg is None else seg[order]
        same = (c[1:] == c[:-1]) & ((v[1:] == v[:-1]) | (np.isnan(v[1:]) & np.isnan(v[:-1])))
        if seg is not None:
            same &= seg[1:] == seg[:-1]
        if not same.any():
            return
        src = t["row"]
        at = np.flatnonzero(same)
        # Blocks of equal keys: a block starts where `same` turns on.
        for b in at[np.r_[True, at[1:] != at[:-1] + 1]]:
            end = b + 1
            while end < len(same) and same[end]:
                end += 1
            members = pos[b:end + 1]
            run = str(t.at[members[0], "run"])
            rows = sorted(src.loc[members].tolist())
            shown = ", ".join(map(str, rows[:_MAX_LISTED_ROWS]))
            if len(rows) > _MAX_LISTED_ROWS:    # a message stays short, however many rows
                shown += f", ... ({len(rows)} rows in all)"
            # what differs: they are not copies (those were merged), so which row is right?
            cells = t.loc[members, [x for x in t.columns if x not in ("row", "source_file")]]
            differ = [str(x) for x in cells.columns
                      if cells[x].astype(str).nunique(dropna=False) > 1]
            shown += f"), differing in {', '.join(differ[:5])}" if differ else ")"
            problems.append(Invalid(
                f"run {run!r}", f"duplicate rows for {key[1]} = {v[b]:g} (rows {shown}",
                tuple(int(i) for i in members), run=run, order=float(members.min())))

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
        moe = "active_params" in t.columns and bool(np.any(~np.isnan(
            t["active_params"].to_numpy(float))))
        n_label = "6·N_active·D" if moe else "6·N·D"
        if "flops" not in t.columns:
            t["flops"] = six_nd
            self.flops_source = "6ND"
            run_flops = pd.Series(six_nd).groupby(codes).max().to_numpy()
            self.flops_convention = _convention("6ND", n_label, names, np.ones(len(names)),
                                                run_flops)
            return
        ratio = t["flops"].to_numpy(float) / six_nd
        if len(names) == len(ratio):                       # one row per run
            per_run = np.empty(len(ratio))
            per_run[codes] = ratio
            run_flops = np.empty(len(ratio))
            run_flops[codes] = t["flops"].to_numpy(float)
        else:
            per_run = pd.Series(ratio).groupby(codes).median().to_numpy()
            run_flops = pd.Series(t["flops"].to_numpy(float)).groupby(codes).max().to_numpy()
        conv = self.flops_convention = _convention("given", n_label, names, per_run, run_flops)
        median = conv.median
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
            listed = ", ".join(f"{names[k]} ({_times(per_run[k] / median)})" for k in stray[:8])
            more = f" and {len(stray) - 8} more" if len(stray) > 8 else ""
            self._warn(
                f"ladder {self.name!r}: flops of {len(stray)} run(s) stray more than "
                f"{_FLOPS_RUN_TOLERANCE:.0%} from the ladder's median flops/(6·N·D): "
                f"{listed}{more} (k = C/({n_label}) median {median:.3g}, range {conv.low:.3g}..{conv.high:.3g} "
                f"over {len(per_run)} runs)")
        if conv.drifting:
            sign = "rises" if conv.drift > 0 else "falls"
            self._warn(
                f"ladder {self.name!r}: the FLOP convention k = C/({n_label}) {sign} by "
                f"{percent(abs(conv.drift))} from the smallest to the largest rung (fitted trend over "
                f"{conv.flops[0]:.3g}..{conv.flops[-1]:.3g} FLOPs; median {median:.3g}, range "
                f"{conv.low:.3g}..{conv.high:.3g}); k by rung: {conv.describe()}. A count that "
                f"includes attention or embedding FLOPs changes relative to 6·N·D with model "
                f"size, so a target's C converted with one k is uncertain by as much")

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
            near = [L for L in SEQUENCE_LENGTHS if abs(k / L - 1) < 0.2]
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
        rows, runs = getattr(self, "dropped", (0, 0))
        dropped = (f", dropped_invalid={rows} row(s)" + (f" ({runs} whole run(s))" if runs else "")
                   if rows else "")
        return (f"Ladder({self.name!r}, runs={len(self.runs)}, rows={len(self.table)}, "
                f"metric={self.metric!r}, unit={self.unit!r}{dropped})")

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
        recorded in :attr:`exclusions` with the reason. Inside
        :func:`delphi.core.shared_fits.shared_fits` the same selection of this ladder (the same
        run set, in any order, and ``max_flops``) returns the ladder made the first time.

        Raises
        ------
        LadderError: an unknown run, a ``max_flops`` that is not a positive finite number, or
            no run left.
        """
        key = None
        if shared.active():
            # compare cuts every candidate law at the same budgets: one selection per cut
            runs = None if runs is None else list(runs)
            key = ("select", id(self), id(self.table),
                   None if runs is None else frozenset(map(str, runs)), repr(max_flops))
            hit = shared.lookup(key, self)
            if hit is not None:
                return hit
        new = self._select(max_flops=max_flops, runs=runs)
        shared.store(key, self, new)
        return new

    def _select(self, *, max_flops: float | None, runs) -> "Ladder":
        t = self.table
        excluded = []
        keep = pd.Series(True, index=t.index)
        if runs is not None:
            wanted = set(map(str, runs))
            unknown = wanted - set(t["run"].tolist())
            if unknown:
                raise LadderError(f"unknown run(s) {sorted(unknown)}; known: {self.runs}")
            keep &= t["run"].isin(wanted)
        if max_flops is not None:
            if (isinstance(max_flops, (bool, np.bool_)) or not isinstance(max_flops, numbers.Real)
                    or not (math.isfinite(max_flops) and max_flops > 0)):
                raise LadderError(f"{option('fit_max_flops', '--fit-max-flops')} must be a "
                                  f"positive finite number, got {max_flops!r}")
            codes, names = _run_codes(t["run"])
            run_max = pd.Series(t["flops"].to_numpy(float)).groupby(codes).max()
            run_max = run_max.reindex(range(len(names))).to_numpy()
            over_run = run_max > max_flops * (1 + 1e-9)
            over = pd.Series(over_run[codes], index=t.index)
            dropped = np.zeros(len(names), dtype=bool)
            dropped[codes[(over & keep).to_numpy()]] = True
            run_ids = names.tolist()    # a list: pandas arrays index slowly one id at a time
            for code in np.flatnonzero(dropped):          # sorted run order
                excluded.append(Exclusion(run_ids[code], f"compute {float(run_max[code]):.3g} "
                                                         f"FLOPs above --fit-max-flops "
                                                         f"{max_flops:.3g}"))
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

        A run's state follows one rule (:mod:`delphi.runstate`): its end row is its ``final``
        row, else its last row; ``final``, ``status`` (W&B / Marin run state) and
        ``fraction`` (or step against ``total_steps``) there say whether it finished. Only
        finished runs contribute their end row. Left out, each with its reason: unfinished
        runs (stopped early, crashed, failed, killed, still running, marked final = false),
        runs whose last row was dropped as invalid (:attr:`cut_runs`), and runs whose end row
        is still at its peak LR on a decaying schedule (not annealed), unless
        ``include_unfinished``; and a run whose last loss is more than ``divergence_rise``
        (relative) above its own best checkpoint (diverged). Inside
        :func:`delphi.core.shared_fits.shared_fits` they are found once per ladder and
        settings; each call gets its own copy of the table.

        Returns
        -------
        (table, exclusions):
            ``table`` has one row per kept run (all columns); ``exclusions`` lists each run
            left out with its reason (the ladder's own earlier exclusions are not repeated).

        Raises
        ------
        LadderError
            No run is left; or (for a table not validated by :class:`Ladder`) a run with
            several ``final`` rows or contradictory state.
        """
        key = None
        if shared.active():
            # the same ladder's final points are asked for by every fit and cut of a command
            key = ("final_points", id(self), id(self.table), bool(include_unfinished),
                   repr(divergence_rise))
            hit = shared.lookup(key, self)
            if hit is None:
                hit = self._final_points(include_unfinished, divergence_rise)
                shared.store(key, self, hit)
            return hit[0].copy(), list(hit[1])      # a caller may change its copy
        return self._final_points(include_unfinished, divergence_rise)

    def _final_points(self, include_unfinished: bool, divergence_rise: float
                      ) -> tuple[pd.DataFrame, list[Exclusion]]:
        t = self.table
        codes, names = _run_codes(t["run"])
        perm = None if _is_sorted(codes) else np.argsort(codes, kind="stable")
        s = t if perm is None else t.take(perm)
        c = codes if perm is None else codes[perm]
        pos = np.arange(len(t)) if perm is None else perm      # table position of sorted row
        starts = _group_starts(c)
        problems: list[Invalid] = []
        unreliable = self._counter_restarted(names)
        self._check_states(s.reset_index(drop=True), c, names, problems,
                           step_unreliable=unreliable)
        if problems:
            rows = {r for p in problems for r in p.rows}
            raise LadderError(invalid_message(self.name, problems, len(rows)))
        st = run_states(s, c, names, starts, step_unreliable=unreliable,
                        status_name=getattr(self, "status_column", "status"))
        chosen = pos[st.end]
        loss = t["loss"].to_numpy(float)
        best = np.minimum.reduceat(loss if perm is None else loss[perm], starts)
        last_loss = loss[chosen]
        n_runs = len(starts)
        reasons: list = list(st.reason)
        # The ids as a list: indexing a pandas array one run at a time costs microseconds each.
        run_ids = names.tolist()
        cut_runs = getattr(self, "cut_runs", {})
        if cut_runs:
            for k in range(n_runs):
                run = str(run_ids[k])
                if reasons[k] is None and run in cut_runs and not (
                        st.fin[k] == 1 or st.reached[k] == 1):
                    reasons[k] = (f"unfinished: its last row (row {self.cut_runs[run]}) was "
                                  f"dropped as invalid, so its final loss is unknown; "
                                  f"final-loss laws need finished runs")
        for k, why in not_annealed(s, c, names, st, self.schedule).items():
            if reasons[k] is None:
                reasons[k] = why
        restarts = getattr(self, "restarts", None) or {}
        for k in (range(n_runs) if restarts else ()):
            # A restarted step counter puts the run's real end anywhere in step order, so its
            # highest step is not known to be its final loss unless a row says final = true.
            counter = [r for r in restarts.get(str(run_ids[k]), ()) if r.kind == "counter"]
            if counter and reasons[k] is None and st.fin[k] != 1:
                r = counter[0]
                reasons[k] = (f"resumed with a restarted step counter (row {r.row}: step "
                              f"{r.prev_step:g} -> {r.step:g}): its highest step is not "
                              f"known to be its end; mark its end row final = true")
        left_out = np.array([r is not None for r in reasons], dtype=bool) & (not include_unfinished)
        diverged = ~left_out & (last_loss > best * (1 + divergence_rise))
        out = left_out | diverged
        excluded = []
        for k in np.flatnonzero(out):
            if left_out[k]:
                excluded.append(Exclusion(run_ids[k], reasons[k]))
            else:
                b, last = float(best[k]), float(last_loss[k])
                excluded.append(Exclusion(
                    run_ids[k], f"diverged: last loss {last:.4g} is {percent(last / b - 1, 1)} above the "
                                f"run's best {b:.4g}"))
        if out.all():
            reasons = "; ".join(f"{e.run}: {e.reason}" for e in excluded[:5])
            raise LadderError(f"ladder {self.name!r} has no finished runs to fit ({reasons})")
        return t.take(chosen[~out]).reset_index(drop=True), excluded

    def _counter_restarted(self, names) -> np.ndarray:
        """Per run (shape (n_runs,)): whether its step counter restarted (its step says
        nothing about how far it got)."""
        restarts = getattr(self, "restarts", None) or {}
        if not restarts:
            return np.zeros(len(names), dtype=bool)
        return np.array([any(r.kind == "counter" for r in restarts.get(str(n), ()))
                         for n in names.tolist()], dtype=bool)

    def run_states(self) -> pd.DataFrame:
        """Each run's state by the one rule of :mod:`delphi.runstate`, one row per run.

        Returns
        -------
        DataFrame with columns ``run``, ``row`` (source row of its end row: the ``final``
        row, else the last), ``state`` (``"finished"``, ``"unfinished"`` or ``"unknown"``,
        which final-loss laws treat as finished) and ``reason`` (why not finished, or the
        not-annealed flag; else empty).
        """
        t = self.table
        codes, names = _run_codes(t["run"])
        perm = None if _is_sorted(codes) else np.argsort(codes, kind="stable")
        s = t if perm is None else t.take(perm)
        c = codes if perm is None else codes[perm]
        st = run_states(s, c, names, _group_starts(c),
                        step_unreliable=self._counter_restarted(names),
                        status_name=getattr(self, "status_column", "status"))
        flags = not_annealed(s, c, names, st, self.schedule)
        label = {1: "finished", 0: "unfinished", -1: "unknown"}
        return pd.DataFrame({
            "run": [str(n) for n in names],
            "row": s["row"].to_numpy()[st.end],
            "state": [label[int(v)] for v in st.state],
            "reason": [st.reason[k] or flags.get(k) or "" for k in range(len(st.state))],
        })

    def fingerprint(self, table: pd.DataFrame | None = None) -> str:
        """SHA-256 (hex) of the canonical columns of ``table`` (default: the whole ladder).

        Rows are sorted by run and position, floats written with 17 significant digits, so
        the same data gives the same fingerprint whatever the source format or row order.
        """
        t = self.table if table is None else table
        cols = [c for c in CANONICAL_COLUMNS if c in t.columns]
        order = [c for c in ("run", "step", "tokens", "flops") if c in cols]
        fast = _fast_fingerprint(t, cols, order, self.unit)
        if fast is not None:
            return fast
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


def _fast_fingerprint(t: pd.DataFrame, cols: list[str], order: list[str], unit: str
                      ) -> str | None:
    """:meth:`Ladder.fingerprint` of ``t`` without pandas' sort and frame copies: the rows
    ordered by ``np.lexsort`` (stable, NaN last: the order of ``sort_values(order,
    kind="mergesort")``) and each column written once by :func:`_csv_column`, then hashed in
    the same blocks of rows, so the same bytes. None when a sort key or a column is not
    plain floats, integers or strings pandas writes unquoted (the caller then uses pandas).

    The fits of a command fingerprint their points (``Fit.extra["sha256"]``): ``compare``
    fits 39 subsets of Epoch's 240 points, where pandas' sort, copies and per-column lookups
    were most of the ~2.6 ms a call."""
    if not cols or not t.columns.is_unique:
        return None
    keys = []
    for name in reversed(order):          # np.lexsort: the last key is the primary one
        col = t[name]
        kind = col.dtype.kind
        if kind in "fiu" and isinstance(col.dtype, np.dtype):
            keys.append(col.to_numpy())
        elif name == "run":
            values = col.tolist()
            if not all(type(v) is str for v in values):
                return None
            _, codes = np.unique(np.array(values, dtype=object), return_inverse=True)
            keys.append(codes.reshape(-1))
        else:
            return None
    n = len(t)
    perm = np.lexsort(keys) if keys else np.arange(n)
    columns = []
    for name in cols:
        strings = _csv_column(t[name], perm)
        if strings is None:
            return None
        columns.append(strings)
    if any(_CSV_SPECIAL.search(str(c)) for c in cols):
        return None
    digest = hashlib.sha256(f"unit={unit}\n".encode())
    head = ",".join(map(str, cols)) + "\n"
    for start in range(0, max(n, 1), _FINGERPRINT_ROWS):
        text = head if start == 0 else ""
        rows = [c[start:start + _FINGERPRINT_ROWS] for c in columns]
        if rows and rows[0]:
            text += "\n".join(map(",".join, zip(*rows))) + "\n"
        digest.update(text.encode())
    return digest.hexdigest()


def _csv_column(col: pd.Series, perm: np.ndarray | None = None) -> list[str] | None:
    """The CSV cells of ``col`` (rows in the order ``perm``, default as they are), as
    ``to_csv(index=False, float_format="%.17g")`` writes them; None when pandas would quote
    a value or the dtype is not one written here (see :func:`_fast_csv`)."""
    kind = col.dtype.kind
    if kind in "fiu" and not isinstance(col.dtype, np.dtype):
        return None                     # a nullable number column: pandas writes it
    if kind == "f":
        values = col.to_numpy(dtype=float)
        if perm is not None:
            values = values[perm]
        # Format each distinct value once (N, peak LR, planned steps repeat along a run).
        uniq, inverse = np.unique(values, return_inverse=True)
        text = np.array(["" if v != v else format(v, ".17g") for v in uniq.tolist()],
                        dtype=object)
        strings = text[inverse.reshape(-1)].tolist()
        # -0.0 == 0.0 in unique: one of them stands for both, so zeros are written by sign
        zero = values == 0
        if zero.any():
            for i in np.flatnonzero(zero).tolist():
                strings[i] = "-0" if np.signbit(values[i]) else "0"
        return strings
    if kind in "iu":
        values = col.to_numpy()
        return [str(v) for v in (values if perm is None else values[perm]).tolist()]
    if kind == "b":
        # A nullable final column: unknown cells are empty, as pandas writes them.
        values = col.tolist()
        if perm is not None:
            values = [values[i] for i in perm.tolist()]
        return ["" if v is pd.NA else "True" if v else "False" for v in values]
    if kind in "OUT" or str(col.dtype) in ("str", "string"):
        values = col.tolist()
        if not all(type(v) is str for v in values):
            return None
        if any(_CSV_SPECIAL.search(v) or v == "" for v in values):
            return None
        return values if perm is None else [values[i] for i in perm.tolist()]
    return None


def _fast_csv(block: pd.DataFrame, *, header: bool) -> str | None:
    """``block.to_csv(index=False, float_format="%.17g", lineterminator="\\n")``, the same
    text, several times faster: floats formatted by Python directly instead of through
    pandas' per-value formatter. None when a column needs pandas' quoting or an unusual
    dtype (the caller then uses pandas)."""
    columns = []
    for name in block.columns:
        strings = _csv_column(block[name])
        if strings is None:
            return None
        columns.append(strings)
    head = ",".join(map(str, block.columns)) + "\n" if header else ""
    if any(_CSV_SPECIAL.search(str(c)) for c in block.columns):
        return None
    if not len(block):
        return head
    return head + "\n".join(map(",".join, zip(*columns))) + "\n"
