"""Tidy tables: CSV, Parquet and JSONL files with one row per (run, checkpoint).

Columns are the canonical ones of :mod:`delphi.ladder` (``run``, ``params``, ``tokens``,
``flops``, ``loss``, ...) or are renamed to them with ``columns``; every other column is kept
as metadata. Values are checked when the table becomes a :class:`~delphi.ladder.Ladder`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..errors import LadderError
from ._common import (GZIP_SUFFIX, SourceTable, canonicalize, concat_files, read_file,
                      resolve_paths)

__all__ = ["read_csv", "read_parquet", "read_jsonl", "read_table", "FORMATS", "format_of"]

#: File suffix -> format of the tidy readers. Text formats may also be gzip-compressed
#: (``runs.csv.gz``, ``runs.jsonl.gz``): see :func:`format_of`.
FORMATS: dict[str, str] = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet",
                           ".jsonl": "jsonl", ".ndjson": "jsonl"}
_COMPRESSIBLE = ("csv", "jsonl")


def format_of(path: str | Path) -> tuple[str | None, str]:
    """``(format, suffix)`` of a tidy file from its name: ``("csv", ".csv")``,
    ``("csv", ".csv.gz")``; format ``None`` when the suffix is not a tidy format (the suffix
    is then returned for the message, e.g. ``".parquet.gz"`` or ``".txt"``)."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if not suffixes:
        return None, ""
    if suffixes[-1] == GZIP_SUFFIX and len(suffixes) >= 2:
        inner = suffixes[-2]
        fmt = FORMATS.get(inner)
        return (fmt if fmt in _COMPRESSIBLE else None), inner + GZIP_SUFFIX
    return FORMATS.get(suffixes[-1]), suffixes[-1]


def supported() -> str:
    """The supported suffixes, for messages."""
    return ", ".join(list(FORMATS) + [f".{f}{GZIP_SUFFIX}" for f in _COMPRESSIBLE])
_PATTERNS = {"csv": "*.csv", "parquet": "*.parquet", "jsonl": "*.jsonl"}


def _read(fmt: str, path: str | Path, columns: Mapping[str, str] | None,
          scale: Mapping[str, float] | None, metric: str | None) -> SourceTable:
    files = resolve_paths(path, pattern=_PATTERNS[fmt])
    run_source = [dict(columns or {}).get("run")] if (columns or {}).get("run") else []
    frame = concat_files([read_file(f, fmt, run_source) for f in files], files)
    frame, renamed, loss_source = canonicalize(frame, columns=columns, scale=scale, metric=metric,
                                               where=str(path))
    return SourceTable(frame, str(path), renamed=renamed, metric=loss_source)


def read_csv(path: str | Path, *, columns: Mapping[str, str] | None = None,
             scale: Mapping[str, float] | None = None, metric: str | None = None) -> SourceTable:
    """Read a tidy CSV (a file, a directory of ``*.csv`` or a glob; several files are stacked).

    Parameters
    ----------
    columns:
        ``{canonical: source column}`` renames, e.g. ``{"params": "N", "flops": "C"}``.
    scale:
        ``{canonical: factor}`` unit conversions applied after renaming.
    metric:
        Source column to use as ``loss``.

    Raises
    ------
    LadderError
        Missing file, unparsable file, or a mapped column that does not exist.
    """
    return _read("csv", path, columns, scale, metric)


def read_parquet(path: str | Path, *, columns: Mapping[str, str] | None = None,
                 scale: Mapping[str, float] | None = None, metric: str | None = None) -> SourceTable:
    """Read a tidy Parquet file (or directory/glob of them); arguments as in :func:`read_csv`."""
    return _read("parquet", path, columns, scale, metric)


def read_jsonl(path: str | Path, *, columns: Mapping[str, str] | None = None,
               scale: Mapping[str, float] | None = None, metric: str | None = None) -> SourceTable:
    """Read tidy JSON Lines (one flat object per row); arguments as in :func:`read_csv`."""
    return _read("jsonl", path, columns, scale, metric)


def read_table(path: str | Path, *, columns: Mapping[str, str] | None = None,
               scale: Mapping[str, float] | None = None, metric: str | None = None) -> SourceTable:
    """Read a tidy file choosing the reader from its suffix (see :data:`FORMATS`; ``.csv.gz``
    and ``.jsonl.gz`` are decompressed on the fly).

    Raises
    ------
    LadderError
        Unsupported suffix (the message lists the supported ones), or as :func:`read_csv`.
    """
    fmt, suffix = format_of(path)
    if fmt is None:
        raise LadderError(f"unsupported file format {suffix or '(no suffix)'!r} for {path}; "
                          f"supported: {supported()}")
    return _read(fmt, path, columns, scale, metric)
