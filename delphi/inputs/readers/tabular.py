"""Tidy tables: CSV, Parquet and JSONL files with one row per (run, checkpoint).

Standard input (the command line's ``-``) is read by :func:`read_stream`, through the same
reader and checks as a file.

Columns are the canonical ones of :mod:`delphi.ladder` (``run``, ``params``, ``tokens``,
``flops``, ``loss``, ...) or are renamed to them with ``columns``; every other column is kept
as metadata. Values are checked when the table becomes a :class:`~delphi.ladder.Ladder`.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import IO, Mapping

from ...errors import LadderError, option
from ._common import (MAGIC, GZIP_SUFFIX, InMemoryFile, SourceTable, canonicalize,
                      concat_files, read_file, resolve_paths)
from .checks import check_tables

__all__ = ["read_csv", "read_parquet", "read_jsonl", "read_table", "read_stream", "FORMATS",
           "STREAM_FORMATS", "format_of"]

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


#: Formats :func:`read_stream` reads (the command line's ``--format``; csv by default).
STREAM_FORMATS = ("csv", "jsonl", "parquet")
#: The label standard input has in messages and as a ladder's source.
STDIN_LABEL = "<stdin>"
_STDIN_EXAMPLE = ("pipe a table, e.g. `cat runs.csv | delphi predict - --target-flops 1e22` or "
                  "`delphi fit - --format jsonl < runs.jsonl`")


def stream_bytes(stream: IO | None, fmt: str = "csv", *, label: str = STDIN_LABEL,
                 what: str = "runs", example: str = _STDIN_EXAMPLE) -> InMemoryFile:
    """The table on ``stream`` (standard input) as an :class:`InMemoryFile` for the readers:
    all its bytes (a text stream's underlying ``.buffer`` when it has one, so Parquet's bytes
    and a CSV's encoding reach the reader unchanged), gzip content decompressed.

    Raises
    ------
    LadderError
        No stream (closed), a terminal (nothing piped; checked before reading, which would
        wait for typing), no bytes, Parquet bytes where text is expected or the reverse,
        content compressed other than with gzip, or corrupt gzip data; each message says
        what to pipe instead (``what`` the stream should hold, ``example`` how to pipe it:
        a ladder's runs by default).
    """
    if stream is None:
        raise LadderError(f"no {what} on standard input (it is closed): {example}")
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        raise LadderError(f"no {what} on standard input (it is a terminal, nothing is "
                          f"piped): {example}")
    raw = getattr(stream, "buffer", stream)
    data = raw.read()
    if isinstance(data, str):          # a text stream without bytes underneath (io.StringIO)
        if fmt == "parquet":
            raise LadderError(f"{label}: Parquet is binary; give a byte stream (e.g. "
                              f"sys.stdin.buffer), not text")
        data = data.encode("utf-8")
    if not data.strip():
        raise LadderError(f"no {what} on standard input (it is empty): {example}")
    if data.startswith(b"\x1f\x8b") and fmt != "parquet":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise LadderError(f"cannot read {label}: corrupt or truncated gzip data "
                              f"({exc})") from None
    if fmt == "parquet":
        if not data.startswith(b"PAR1"):
            raise LadderError(f"{label} is not a Parquet file (no PAR1 magic number); for a "
                              f"text table give --format csv or --format jsonl")
    else:
        for magic, what in MAGIC:
            if data.startswith(magic):
                fix = ("give --format parquet" if what == "a Parquet file" else
                       "decompress it before piping it (gzip is read as is)")
                raise LadderError(f"cannot read {label} as {fmt}: it is {what}; {fix}")
    return InMemoryFile(data, label)


def read_stream(stream: IO | None, fmt: str = "csv", *,
                columns: Mapping[str, str] | None = None,
                scale: Mapping[str, float] | None = None, metric: str | None = None,
                label: str = STDIN_LABEL, what: str = "runs",
                example: str = _STDIN_EXAMPLE) -> SourceTable:
    """Read a tidy table from a stream (standard input: ``sys.stdin``), in memory, with the
    reader a file of format ``fmt`` gets (:func:`read_csv`, :func:`read_jsonl`,
    :func:`read_parquet`): the same columns, checks and messages, with rows named from 0 and
    the stream named ``label`` (``"<stdin>"``) instead of a path. No temporary file.

    Parameters
    ----------
    stream:
        A binary or text stream (a text stream's ``.buffer`` is read when it has one).
    fmt:
        ``"csv"`` (default), ``"jsonl"`` or ``"parquet"`` (:data:`STREAM_FORMATS`); gzip
        content of a text format is decompressed.
    columns, scale, metric:
        As in :func:`read_csv`.
    what, example:
        As in :func:`stream_bytes` (what an empty stream lacks, how to pipe it).

    Raises
    ------
    LadderError
        An unknown ``fmt`` (a manifest, ``"toml"``, is named as such), as
        :func:`stream_bytes` (a terminal, empty or mismatched content), or as
        :func:`read_csv`.
    """
    if fmt == "toml":
        raise LadderError(f"a manifest cannot come from standard input (format {fmt!r}): "
                          f"give its path, since its [source] path is relative to its folder")
    if fmt not in STREAM_FORMATS:
        raise LadderError(f"unknown format {fmt!r} for {label}; choose one of "
                          f"{', '.join(STREAM_FORMATS)}")

    buffer = stream_bytes(stream, fmt, label=label, what=what, example=example)
    head = buffer.data[:4096].lstrip()
    if fmt == "csv" and head.startswith(b"{"):
        # A stream has no suffix to tell its format: JSON Lines read as CSV would give a
        # garbled header instead of an answer.
        flag = option("format='jsonl'", "--format jsonl")
        raise LadderError(f"{label} looks like JSON Lines (its first line is a JSON object), "
                          f"not CSV: give {flag}")
    check_tables([buffer], fmt)             # as load_ladder checks a file: no content quoted
    run_source = [dict(columns or {}).get("run")] if (columns or {}).get("run") else []
    frame, renamed, loss_source = canonicalize(read_file(buffer, fmt, run_source),
                                               columns=columns, scale=scale, metric=metric,
                                               where=label)
    return SourceTable(frame, label, renamed=renamed, metric=loss_source)


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
