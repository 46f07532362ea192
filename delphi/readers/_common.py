"""Pieces every reader shares: finding files, renaming columns, reporting dropped rows.

A reader turns files into a :class:`SourceTable`: a DataFrame whose canonical columns (see
:mod:`delphi.ladder`) have been renamed and scaled, the remaining source columns kept as
metadata, plus the rows it already left out. Manifests transform that table further before it
becomes a :class:`~delphi.ladder.Ladder`.
"""

from __future__ import annotations

import glob
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ..errors import LadderError, LadderWarning
from ..ladder import CANONICAL_COLUMNS, Exclusion, Ladder

__all__ = ["SourceTable", "ColumnDefault", "resolve_paths", "read_file", "canonicalize",
           "drop_missing_metric", "NUMERIC_COLUMNS", "plain", "list_columns"]

#: Canonical columns holding numbers (converted to float on read).
NUMERIC_COLUMNS = ("params", "tokens", "flops", "loss", "step", "lr", "peak_lr", "batch_size",
                   "active_params", "fraction")
_GLOB_CHARS = set("*?[")
# Column lists in error messages are cut here: W&B histories have hundreds of columns.
_MAX_LISTED = 30


@dataclass(frozen=True)
class ColumnDefault:
    """A reader's default source for a canonical column, used when the source has it.

    ``factor`` converts the source unit (e.g. GFLOPs: 1e9) and applies only to this default.
    """

    canonical: str
    source: str
    factor: float = 1.0


@dataclass
class SourceTable:
    """What a reader returns: a canonicalised table and what it already left out.

    Attributes
    ----------
    frame:
        One row per (run, checkpoint); canonical columns renamed and scaled (numbers as
        float), every other source column kept, ``row`` = 0-based row in its source file.
    source:
        The path (or glob) read.
    exclusions:
        Rows or runs dropped while reading (e.g. W&B rows without the metric).
    renamed:
        ``{source column: canonical column}`` for every renamed column, so filters and run-id
        templates may name either.
    metric:
        The source column that became ``loss`` (``None`` when the table had ``loss`` itself).
    notes:
        True facts worth a warning on the ladder (e.g. values clipped by a manifest).
    """

    frame: pd.DataFrame
    source: str
    exclusions: list[Exclusion] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)
    metric: str | None = None
    notes: list[str] = field(default_factory=list)

    def column(self, name: str) -> str:
        """The frame column for ``name``, a current column or a renamed source column."""
        if name in self.frame.columns:
            return name
        if name in self.renamed:
            return self.renamed[name]
        raise KeyError(name)

    def to_ladder(self, *, name: str | None = None, metric: str | None = None,
                  unit: str = "nats/token", source: str | None = None,
                  schedule: str | None = None, drop_invalid: bool = False) -> Ladder:
        """Validate into a :class:`Ladder`: raises :class:`LadderError` listing every invalid
        row, or with ``drop_invalid`` drops them and lists each in ``Ladder.exclusions``."""
        ladder = Ladder(self.frame, source=source or self.source, name=name,
                        metric=metric or self.metric or "loss", unit=unit,
                        exclusions=self.exclusions, schedule=schedule,
                        drop_invalid=drop_invalid)
        for note in self.notes:
            ladder.warnings.append(note)
            warnings.warn(note, LadderWarning, stacklevel=2)
        return ladder


def plain(value) -> str:
    """``repr`` of a cell for messages, without numpy's ``np.float64(...)`` wrapper."""
    return repr(value.item() if hasattr(value, "item") else value)


def list_columns(columns: Iterable[str]) -> str:
    """Comma-separated column names, cut after a few dozen."""
    cols = [str(c) for c in columns]
    more = f" ... ({len(cols) - _MAX_LISTED} more)" if len(cols) > _MAX_LISTED else ""
    return ", ".join(cols[:_MAX_LISTED]) + more


def resolve_paths(path: str | Path, *, pattern: str) -> list[Path]:
    """The files at ``path``: the file itself, files matching ``pattern`` under a directory
    (recursively), or the matches of a glob. Sorted, so row order is reproducible.

    Raises
    ------
    LadderError
        Nothing exists there, or nothing matches (the message gives the path).
    """
    text = str(Path(path).expanduser())
    if _GLOB_CHARS & set(text) and not Path(text).exists():   # a real "[x]" folder is not a glob
        files = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
        if not files:
            raise LadderError(f"no files match {text}")
        return files
    p = Path(text)
    if p.is_dir():
        files = sorted(f for f in p.rglob(pattern) if f.is_file())
        if not files:
            raise LadderError(f"no {pattern} files under {p}")
        return files
    if p.is_file():
        return [p]
    raise LadderError(f"file not found: {p}")


def _text_columns(names, text_columns: Sequence[str]) -> dict:
    """Source columns read as text: ``run`` whatever its case and spacing, and the given
    columns (a manifest's mapped run column). Run ids are names: ``1``, ``1.0`` and ``001``
    are three runs, not one number."""
    wanted = {"run"} | {str(c).strip().lower() for c in text_columns}
    return {c: str for c in names if isinstance(c, str) and c.strip().lower() in wanted}


def read_file(path: Path, fmt: str, text_columns: Sequence[str] = ()) -> pd.DataFrame:
    """Read one CSV, Parquet or JSONL file with pandas; ``row`` = 0-based row number.

    The run column (and any of ``text_columns``) is read as text, so ids keep their spelling.

    Raises
    ------
    LadderError
        The file cannot be parsed as ``fmt`` (the message names the file).
    """
    errors: tuple[type[BaseException], ...] = (pd.errors.ParserError, pd.errors.EmptyDataError,
                                               ValueError, OSError)
    if fmt == "parquet":
        import pyarrow  # heavy: only when a Parquet file is read

        errors += (pyarrow.ArrowException,)
    try:
        if fmt == "csv":
            header = pd.read_csv(path, nrows=0).columns
            frame = pd.read_csv(path, dtype=_text_columns(header, text_columns))
        elif fmt == "parquet":
            frame = pd.read_parquet(path)
        elif fmt == "jsonl":
            # dtype=False: no guessing, so a string "001" stays text (numbers stay numbers).
            frame = pd.read_json(path, lines=True, precise_float=True, dtype=False)
            for col in _text_columns(frame.columns, text_columns):
                # JSON numbers as ids: 1 -> "1", 1.5 -> "1.5" (their JSON spelling)
                frame[col] = frame[col].map(_json_id, na_action="ignore")
        else:  # pragma: no cover - callers pass a known format
            raise ValueError(f"unknown format {fmt!r}")
    except errors as exc:
        raise LadderError(f"cannot read {path} as {fmt}: {exc}") from None
    if "row" not in frame.columns:
        frame["row"] = range(len(frame))
    return frame


def _json_id(value) -> str:
    """A JSON run id as text: a number keeps its JSON spelling (1 -> "1", 1.5 -> "1.5")."""
    return str(value)


def concat_files(frames: Sequence[pd.DataFrame], files: Sequence[Path]) -> pd.DataFrame:
    """Stack per-file frames; with several files a ``source_file`` column says which."""
    if len(frames) == 1:
        return frames[0]
    for frame, path in zip(frames, files):
        frame["source_file"] = path.name
    return pd.concat(frames, ignore_index=True, sort=False)


def canonicalize(frame: pd.DataFrame, *, columns: Mapping[str, str] | None = None,
                 scale: Mapping[str, float] | None = None, metric: str | None = None,
                 defaults: Sequence[ColumnDefault] = (), where: str = "source",
                 ) -> tuple[pd.DataFrame, dict[str, str], str | None]:
    """Rename source columns to canonical ones, scale them and make numbers floats.

    Parameters
    ----------
    columns:
        ``{canonical: source column}``. A source column already named like a canonical column
        is used as-is unless ``columns`` maps that canonical name to another column; then the
        original is kept as ``source:<name>`` metadata.
    scale:
        ``{canonical: factor}`` multiplied in after renaming (e.g. ``flops = 1e9`` for GFLOPs).
    metric:
        Source column to use as ``loss`` (overrides ``columns["loss"]``).
    defaults:
        The reader's own mapping, applied for canonical columns ``columns`` does not map and
        only when the source column exists.

    Returns
    -------
    (frame, renamed, metric_column)

    Raises
    ------
    LadderError
        An unknown canonical name, or a mapped source column that is not in the table (the
        message lists the columns found).
    """
    # Hand-written headers: "run, flops, loss" or "Loss" mean the canonical columns.
    frame = frame.rename(columns={c: c.strip() for c in frame.columns if isinstance(c, str)})
    lowered = {c.lower(): c for c in frame.columns if isinstance(c, str)}
    frame = frame.rename(columns={lowered[c]: c for c in CANONICAL_COLUMNS
                                  if c not in frame.columns and c in lowered})
    mapping = {k: v.strip() if isinstance(v, str) else v for k, v in dict(columns or {}).items()}
    if metric is not None:
        mapping["loss"] = metric
    unknown = sorted(set(mapping) - set(CANONICAL_COLUMNS))
    if unknown:
        raise LadderError(f"{where}: unknown canonical column(s) {', '.join(unknown)}; "
                          f"known: {', '.join(CANONICAL_COLUMNS)}")
    factors = {}
    for d in defaults:
        if d.canonical not in mapping and d.source in frame.columns and d.canonical not in frame.columns:
            mapping[d.canonical] = d.source
            factors[d.canonical] = d.factor
    for canonical, src in mapping.items():
        if src not in frame.columns:
            hint = ""
            if canonical == "loss":
                lossy = [c for c in frame.columns if "loss" in str(c).lower()]
                hint = f"; loss-like columns: {list_columns(lossy)}" if lossy else ""
            raise LadderError(f"{where}: column {src!r} (for {canonical}) not found; columns found: "
                              f"{list_columns(frame.columns)}{hint}")
    new = {canonical: frame[src] for canonical, src in mapping.items() if canonical != src}
    identity = {c for c, src in mapping.items() if c == src}
    consumed = {src for c, src in mapping.items() if c != src} - identity
    rest = frame.drop(columns=sorted(consumed))
    # Keep a clashing, unmapped source column (e.g. a raw `lr` that is really the peak) as metadata.
    rest = rest.rename(columns={c: f"source:{c}" for c in rest.columns if c in new})
    out = pd.concat([rest, pd.DataFrame(new, index=frame.index)], axis=1) if new else rest
    renamed = {src: canonical for canonical, src in mapping.items() if canonical != src}

    for col in NUMERIC_COLUMNS:
        if col in out.columns and out[col].dtype != np.float64:    # float columns as they are
            values = pd.to_numeric(out[col], errors="coerce")
            if (values.isna() == out[col].isna()).all():   # else leave it: Ladder names the bad cell
                out[col] = values.astype(float)
    scale = dict(scale or {})
    for col in sorted(set(factors) | set(scale)):
        if col not in out.columns:
            raise LadderError(f"{where}: scale given for column {col!r}, which the table does not have")
        if pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col] * (factors.get(col, 1.0) * scale.get(col, 1.0))
    loss_source = mapping.get("loss")
    return out, renamed, None if loss_source in (None, "loss") else loss_source


def drop_missing_metric(table: SourceTable, *, what: str = "sparse W&B history") -> None:
    """Drop rows without a ``loss`` value, recording one exclusion per affected run.

    W&B histories log evals on some steps only, so rows without the metric are expected; they
    are reported, never dropped silently.
    """
    t = table.frame
    if "loss" not in t.columns:
        return
    missing = t["loss"].isna()
    if not missing.any():
        return
    metric = table.metric or "loss"
    runs = t["run"].astype(str) if "run" in t.columns else pd.Series("?", index=t.index)
    counts = missing.groupby(runs, sort=True).agg(["sum", "size"])   # per run, vectorised
    counts = counts[counts["sum"] > 0]
    for run, n, total in zip(counts.index, counts["sum"].tolist(), counts["size"].tolist()):
        if n == total:
            reason = f"no {metric} value in any of its {total} row(s); run dropped"
        else:
            reason = f"{n} of its {total} rows have no {metric} value ({what}); those rows dropped"
        table.exclusions.append(Exclusion(str(run), reason))
    table.frame = t[~missing].reset_index(drop=True)
