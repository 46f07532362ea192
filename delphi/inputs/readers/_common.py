"""Pieces every reader shares: finding files, renaming columns, reporting dropped rows.

A reader turns files into a :class:`SourceTable`: a DataFrame whose canonical columns (see
:mod:`delphi.ladder`) have been renamed and scaled, the remaining source columns kept as
metadata, plus the rows it already left out. Manifests transform that table further before it
becomes a :class:`~delphi.ladder.Ladder`.
"""

from __future__ import annotations

import codecs
import csv
import difflib
import glob
import gzip
import io
import json
import os
import re
import stat
import warnings
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from ...core.files import describe_not_a_file
from ...core.text import not_utf8
from ...errors import LadderError, LadderWarning
from ..ladder import (CANONICAL_COLUMNS, LOSS_LIKE, Exclusion, Ladder, non_numeric_cells,
                      columns_found, user_stacklevel)

__all__ = ["SourceTable", "ColumnDefault", "resolve_paths", "read_file", "read_json_lines",
           "not_a_file", "canonicalize", "drop_missing_metric", "NUMERIC_COLUMNS", "plain",
           "list_columns", "GZIP_SUFFIX", "sniff_content", "InMemoryFile", "open_bytes"]

#: Canonical columns holding numbers (converted to float on read).
NUMERIC_COLUMNS = ("params", "tokens", "flops", "loss", "step", "lr", "peak_lr", "batch_size",
                   "active_params", "fraction")
_GLOB_CHARS = set("*?[")
# Column lists in error messages are cut here: W&B histories have hundreds of columns.
_MAX_LISTED = 30
_LOSS_LIKE = LOSS_LIKE
# Pandas' default missing-value strings, kept for every column but an id column.
_NA_STRINGS = sorted(pd.io.parsers.readers.STR_NA_VALUES)


@dataclass(frozen=True)
class ColumnDefault:
    """A reader's default source for a canonical column, used when the source has it.

    ``factor`` converts the source unit (e.g. GFLOPs: 1e9) and applies only to this default.
    """

    canonical: str
    source: str
    factor: float = 1.0

#: A table of at most this many cells is consolidated (one pandas block per dtype) before it
#: is validated into a Ladder. pandas 3 reads a CSV as one block per column, and every later
#: row selection (each leave-future-out cut, each refit's points) takes each block apart: on
#: the 98-column Gadre table, 97 takes per selection. A larger table keeps its blocks: copying
#: it would double its memory, while the per-block cost is small beside its data.
CONSOLIDATE_CELLS = 1_000_000


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
        frame = self.frame
        if frame.size <= CONSOLIDATE_CELLS:
            frame = frame.copy()   # a deep copy is consolidated: the same values, fewer blocks
        ladder = Ladder(frame, source=source or self.source, name=name,
                        metric=metric or self.metric or "loss", unit=unit,
                        exclusions=self.exclusions, schedule=schedule,
                        drop_invalid=drop_invalid)
        for note in self.notes:
            ladder.warnings.append(note)
            warnings.warn(note, LadderWarning, stacklevel=user_stacklevel())
        return ladder


def plain(value) -> str:
    """``repr`` of a cell for messages, without numpy's ``np.float64(...)`` wrapper."""
    return repr(value.item() if hasattr(value, "item") else value)


def _cut(name, limit: int = 64) -> str:
    """A column name for a message, cut at ``limit`` characters."""
    text = str(name)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def list_columns(columns: Iterable[str]) -> str:
    """Comma-separated column names, cut after a few dozen (each cut at 64 characters)."""
    cols = [str(c) for c in columns]
    more = f" ... ({len(cols) - _MAX_LISTED:,} more)" if len(cols) > _MAX_LISTED else ""
    return ", ".join(_cut(c) for c in cols[:_MAX_LISTED]) + more


def not_a_file(path: Path) -> LadderError:
    """The error for a ``path`` that is not a regular file, saying what is there instead.

    A directory, a named pipe (FIFO), a device, a socket or a broken symbolic link is named as
    such (never opened: reading a FIFO would block); only a path where nothing exists is
    "file not found" (:func:`delphi._files.describe_not_a_file`, which the registry shares).
    """
    return LadderError(describe_not_a_file(path))


class InMemoryFile:
    """A table's bytes held in memory (standard input), read by the same readers and checks
    as a file: it answers the few :class:`~pathlib.Path` methods they use (``open("rb")``,
    ``is_file()``, ``stat().st_size``, ``suffix``) and is named ``label`` (``"<stdin>"``) in
    their messages. Nothing is written to disk. The bytes are plain (not compressed)."""

    def __init__(self, data: bytes, label: str = "<stdin>") -> None:
        self.data = bytes(data)
        self.label = self.name = self.stem = label
        self.suffix = ""

    def __str__(self) -> str:
        return self.label

    def __repr__(self) -> str:
        return f"InMemoryFile({self.label!r}, {len(self.data):,} bytes)"

    def is_file(self) -> bool:
        return True

    def is_symlink(self) -> bool:
        return False

    def stat(self) -> os.stat_result:
        return os.stat_result((stat.S_IFREG, 0, 0, 1, 0, 0, len(self.data), 0, 0, 0))

    def open(self, mode: str = "rb") -> io.BytesIO:
        if mode != "rb":
            raise ValueError(f"{self.label} is read-only bytes; open it with mode 'rb'")
        return io.BytesIO(self.data)


def open_bytes(path: Path | InMemoryFile, mode: str = "rb"):
    """``path`` opened for reading bytes: a file or an :class:`InMemoryFile` (the builtin
    ``open`` takes only a file)."""
    return path.open(mode)


def _for_pandas(path: Path | InMemoryFile):
    """What pandas reads: the path itself, or a fresh buffer over in-memory bytes (each read
    starts at the first byte)."""
    return path.open("rb") if isinstance(path, InMemoryFile) else path


def resolve_paths(path: str | Path, *, pattern: str) -> list[Path]:
    """The files at ``path``: the file itself, files matching ``pattern`` under a directory
    (recursively), or the matches of a glob. Sorted, so row order is reproducible. Only
    regular files (symlinks to them included) are returned.

    Raises
    ------
    LadderError
        Nothing exists there, nothing matches (the message gives the path), or ``path`` is
        something other than a file or directory (a FIFO, a device: :func:`not_a_file`).
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
    raise not_a_file(p)


def _text_columns(names, text_columns: Sequence[str]) -> dict:
    """Source columns read as text: ``run`` whatever its case and spacing, and the given
    columns (a manifest's mapped run column). Run ids are names: ``1``, ``1.0`` and ``001``
    are three runs, not one number."""
    wanted = {"run"} | {str(c).strip().lower() for c in text_columns}
    return {c: str for c in names if isinstance(c, str) and c.strip().lower() in wanted}


# Leading bytes of compressed and binary files, so a misnamed one is named for what it is
# instead of failing as "invalid UTF-8".
MAGIC = ((b"\x1f\x8b", "compressed (gzip)"), (b"BZh", "compressed (bzip2)"),
          (b"\xfd7zXZ\x00", "compressed (xz)"), (b"\x28\xb5\x2f\xfd", "compressed (zstd)"),
          (b"PK\x03\x04", "compressed (zip)"), (b"PAR1", "a Parquet file"))
#: Suffix of a compressed tidy file read transparently (``runs.csv.gz``, ``runs.jsonl.gz``).
GZIP_SUFFIX = ".gz"


def utf16_name(head: bytes) -> str | None:
    """``"UTF-16"`` or ``"UTF-32"`` when the first bytes of a file are that encoding's
    byte-order mark (``FF FE``, ``FE FF``...) or, without one, ASCII text with every other byte
    NUL (``r\0u\0n\0``); else ``None``. Excel's "Unicode text" is UTF-16."""
    if head.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "UTF-32"
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "UTF-16"
    if len(head) >= 4 and (set(head[1::2]) == {0} or set(head[0::2]) == {0}) \
            and not set(head[0::2] + head[1::2]) == {0}:
        return "UTF-16 (without a byte-order mark)"
    return None


def sniff_content(path: Path, fmt: str) -> bool:
    """Whether ``path`` is gzip-compressed (named ``*.gz``), after checking its first bytes.

    Raises
    ------
    LadderError
        A ``.gz`` file that is not gzip, or a file whose content is compressed or Parquet
        but whose name says otherwise (the message says what to rename it to).
    """
    with path.open("rb") as fh:
        head = fh.read(8)
    gz = path.suffix.lower() == GZIP_SUFFIX
    if gz:
        if not head.startswith(b"\x1f\x8b"):
            raise LadderError(f"{path} is named .gz but is not gzip-compressed; rename it "
                              f"{path.stem}")
        return True
    if fmt == "parquet":
        return False
    wide = utf16_name(head)
    if wide:
        raise LadderError(f"cannot read {path} as {fmt}: the file is {wide} text; save it as "
                          f"UTF-8")
    for magic, what in MAGIC:
        if head.startswith(magic):
            if what.endswith("(gzip)"):
                fix = f"rename it {path.name}{GZIP_SUFFIX} to have it read as is"
            elif what == "a Parquet file":
                fix = f"rename it {path.stem}.parquet"
            else:
                fix = f"decompress it, or recompress it as gzip ({path.name}{GZIP_SUFFIX})"
            raise LadderError(f"cannot read {path} as {fmt}: the file is {what}; {fix}")
    return False


def _not_utf8(path: Path, gz: bool) -> LadderError:
    """The error for a text file that is not UTF-8, naming the line and the first bad byte."""
    opener = gzip.open if gz else open_bytes
    with opener(path, "rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return LadderError(f"{not_utf8(path, raw, exc, lineno)}; save the file as "
                                   f"UTF-8")
    return LadderError(f"{path}: not UTF-8 text; save the file as UTF-8")


def json_kind(value) -> str:
    """What a parsed JSON value is, for messages: "null", "an array", "a number", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "a number"


# Integers from 2**1024 on do not fit a float64; _HUGE stands for one while parsing JSON.
_FLOAT_LIMIT = 2 ** 1024
_HUGE = object()


# A JSON escape of a UTF-16 surrogate ("\ud800"): paired, it is one character; alone, it
# decodes to a str that is not text (it cannot be encoded, so it fails far from the file).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _check_text(record: dict, path, lineno: int) -> None:
    """Refuse a lone surrogate in a key or string value of one JSON Lines record."""
    for key, value in record.items():
        for what, text in (("key", key), ("value", value)):
            if isinstance(text, str):
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as exc:
                    where = (f"key {text.encode('utf-8', 'backslashreplace').decode()!r}"
                             if what == "key" else f"column {_cut(key)!r}")
                    raise LadderError(
                        f"{path}, line {lineno}: {where} holds an unpaired surrogate escape "
                        f"(\\u{ord(text[exc.start]):04x}), which is not a character; fix "
                        f"the text") from None


def read_json_lines(path: Path, *, gz: bool = False, what: str = "a JSON object per line"
                    ) -> list[tuple[int, dict]]:
    """The JSON objects of a JSON Lines file: ``[(line number (1-based), object)]``, blank
    lines skipped. A UTF-8 byte-order mark at the start is ignored (as in CSV).

    The lines are parsed as one JSON array (fast); only when that fails are they parsed one
    by one, to name the line at fault.

    Raises
    ------
    LadderError
        Naming the line: bytes that are not UTF-8, invalid JSON, JSON nested too deeply, an
        integer beyond float64 or an unpaired surrogate escape (``"\\ud800"``: names the
        column too), or a line that is not an object (``null``, an array, a number, a
        string); a file holding one JSON array (a ``.json`` file named ``.jsonl``) is named
        as such.
    """
    opener = gzip.open if gz else open_bytes
    with opener(path, "rb") as fh:
        data = fh.read()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LadderError(f"{not_utf8(path, data, exc)}; save the file as UTF-8") from None
    del data
    # Split on "\n" only: str.splitlines would also split inside strings (U+2028, \x1c...).
    numbered = [(i, line) for i, line in enumerate(text.split("\n"), 1) if line.strip()]
    surrogates = _SURROGATE_ESCAPE.search(text) is not None
    del text
    array_hint = (f"{path}: the file is one JSON array (a .json file), not JSON Lines; write "
                  f"{what} (e.g. pandas' to_json(orient='records', lines=True))")
    huge: list[bool] = []
    twice: list[str] = []

    def pairs(items: list) -> dict:
        # {"loss": 1, "loss": 2}: json keeps the last silently; CSV and Parquet refuse it.
        obj = dict(items)
        if len(obj) < len(items) and not twice:
            twice.append(next(k for i, (k, _) in enumerate(items)
                              if any(k == k2 for k2, _ in items[:i])))
        return obj

    def parse_int(digits: str):
        # An integer beyond float64 (a 400-digit count) would overflow when made a number:
        # marked here, named by line and column below.
        value = int(digits) if len(digits) <= 400 else None
        if value is None or abs(value) >= _FLOAT_LIMIT:
            huge.append(True)
            return _HUGE
        return value

    try:
        records = json.loads("[" + ",".join(line for _, line in numbered) + "]",
                             parse_int=parse_int, object_pairs_hook=pairs)
        if len(records) != len(numbered):      # a line held several values: "{...}, {...}"
            records = None
    except (ValueError, RecursionError):
        records = None
    if records is None:                        # find the line at fault
        records = []
        for lineno, line in numbered:
            try:
                records.append(json.loads(line, parse_int=parse_int,
                                          object_pairs_hook=pairs))
            except json.JSONDecodeError as exc:
                if not records and line.lstrip().startswith("["):
                    raise LadderError(array_hint) from None
                raise LadderError(f"{path}, line {lineno}: not valid JSON ({exc.msg} at "
                                  f"column {exc.colno})") from None
            except RecursionError:
                raise LadderError(f"{path}, line {lineno}: JSON nested too deeply") from None
    for k, ((lineno, _), record) in enumerate(zip(numbered, records)):
        if not isinstance(record, dict):
            if k == 0 and isinstance(record, list) and all(isinstance(r, dict)
                                                           for r in record[:1]):
                raise LadderError(array_hint)
            raise LadderError(f"{path}, line {lineno}: expected {what}, got "
                              f"{json_kind(record)}")
    if twice:
        for lineno, line in numbered:
            pairs_twice: list[str] = []
            json.loads(line, object_pairs_hook=lambda items: (
                pairs_twice.extend(k for i, (k, _) in enumerate(items)
                                   if any(k == k2 for k2, _ in items[:i])) or dict(items)),
                       parse_int=len)
            if pairs_twice:
                raise LadderError(f"{path}, line {lineno}: key {_cut(pairs_twice[0])!r} appears "
                                  f"twice in one object (JSON keeps only the last); keep one")
    if surrogates:
        for (lineno, line), record in zip(numbered, records):
            if _SURROGATE_ESCAPE.search(line):
                _check_text(record, path, lineno)
    if huge:
        for (lineno, _), record in zip(numbered, records):
            for key, value in record.items():
                if value is _HUGE:
                    raise LadderError(f"{path}, line {lineno}: column {_cut(key)!r} holds an "
                                      f"integer too large for a number (over 1.8e308)")
    return [(lineno, record) for (lineno, _), record in zip(numbered, records)]


def read_file(path: Path, fmt: str, text_columns: Sequence[str] = ()) -> pd.DataFrame:
    """Read one CSV, Parquet or JSONL file; ``row`` = 0-based row number.

    The run column (and any of ``text_columns``) is read as text, so ids keep their spelling:
    ``NA``, ``null``, ``None`` or ``N/A`` there is an id, only an empty cell is missing.
    ``*.csv.gz`` and ``*.jsonl.gz`` are decompressed on the fly; a UTF-8 byte-order mark is
    ignored. JSONL lines must each be one flat JSON object.

    Raises
    ------
    LadderError
        The path is not a regular file (:func:`not_a_file`), the content is compressed or
        Parquet under another name (the message says what to rename it to), the text is not
        UTF-8 (names the line and byte), a JSONL line is not an object (names the line), or
        the file cannot otherwise be parsed as ``fmt`` (the message names the file).
    """
    if not path.is_file():
        raise not_a_file(path)
    errors: tuple[type[BaseException], ...] = (pd.errors.ParserError, pd.errors.EmptyDataError,
                                               ValueError, OSError, EOFError)
    if fmt == "parquet":
        import pyarrow  # heavy: only when a Parquet file is read

        errors += (pyarrow.ArrowException,)
    try:
        gz = sniff_content(path, fmt)
        compression = "gzip" if gz else None
        if fmt == "csv":
            frame = _read_csv_quickly(path, compression, text_columns)
            if frame is None:
                frame = _read_csv(path, compression, text_columns)
            _refuse_repeated_header(path, frame)
        elif fmt == "parquet":
            _check_parquet_names(path)
            frame = pd.read_parquet(_for_pandas(path))
        elif fmt == "jsonl":
            # No dtype guessing: a string "001" stays text (numbers stay numbers).
            numbered = read_json_lines(path, gz=gz)
            records = [r for _, r in numbered]
            frame = pd.DataFrame.from_records(records) if records else pd.DataFrame()
            for col in _text_columns(frame.columns, text_columns):
                nested = frame[col].map(lambda v: isinstance(v, (list, dict)))
                if nested.any():      # ["c"] is no name: str() would make it the id "['c']"
                    k = int(np.flatnonzero(nested.to_numpy())[0])
                    raise LadderError(f"{path}, line {numbered[k][0]}: the run id ({_cut(col)!r})"
                                      f" is a JSON {'array' if isinstance(frame[col].iat[k], list) else 'object'}"
                                      f", not text or a number")
                # JSON numbers as ids: 1 -> "1", 1.5 -> "1.5" (their JSON spelling)
                frame[col] = frame[col].map(_json_id, na_action="ignore")
        else:  # pragma: no cover - callers pass a known format
            raise ValueError(f"unknown format {fmt!r}")
    except LadderError:
        raise
    except UnicodeDecodeError:
        raise _not_utf8(path, gz) from None
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise LadderError(f"cannot read {path}: corrupt or truncated gzip data ({exc})") from None
    except pd.errors.EmptyDataError:
        raise LadderError(f"{path}: the file is empty (no header row)") from None
    except pd.errors.ParserError as exc:
        ragged = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(exc))
        if ragged:     # pandas' line counts file lines from 1, the header included
            want, line, saw = ragged.groups()
            raise LadderError(f"{path}, line {line}: {saw} fields, but the header has {want} "
                              f"columns; remove the extra fields (or quote a field holding a "
                              f"comma)") from None
        raise LadderError(f"cannot read {path} as {fmt}: {exc}") from None
    except errors as exc:
        raise LadderError(f"cannot read {path} as {fmt}: {_first_line(exc)}") from None
    if "row" not in frame.columns:
        # One concat, not an insert: a frame read with many per-column dtypes (a W&B export
        # of hundreds of metrics) is fragmented, and pandas warns on every insert into it.
        frame = pd.concat([frame, pd.DataFrame({"row": np.arange(len(frame))},
                                               index=frame.index)], axis=1)
    return frame


def _refuse_repeated_header(path, frame: pd.DataFrame) -> None:
    """Refuse a data row that spells the header again (case and spaces aside), as two CSV
    exports joined with ``cat`` have: otherwise each of its cells is a separate "not a
    number". Only text columns can hold a name, so a table with none costs nothing."""
    if len(frame.columns) < 2 or any(pd.api.types.is_numeric_dtype(frame[c].dtype)
                                     for c in frame.columns):
        return      # a numeric column cannot hold its own name: no header was repeated

    def key(v) -> str:
        return str(v).strip().lower()

    first = frame.columns[0]
    hit = frame[first].map(key, na_action="ignore").eq(key(first)).to_numpy()
    for k in np.flatnonzero(hit):
        if all(key(frame[c].iat[k]) == key(c) for c in frame.columns):
            raise LadderError(f"{path}, line {k + 2}: a repeat of the header row (two CSV files "
                              f"joined?); remove it")


def _read_csv(path: Path | InMemoryFile, compression: str | None,
              text_columns: Sequence[str]) -> pd.DataFrame:
    """A CSV file as :func:`read_file` reads it: the header first (refused if it names a
    column twice), then the table with the id columns as text."""
    header = pd.read_csv(_for_pandas(path), nrows=0, compression=compression).columns
    _check_header(path, compression)
    text = _text_columns(header, text_columns)
    # Pandas reads "NA", "null", "None", "N/A"... as missing in every column; in an id
    # column they are ids, so only an empty cell is missing there.
    na = {c: ([""] if c in text else _NA_STRINGS) for c in header}
    return pd.read_csv(_for_pandas(path), dtype=text, compression=compression,
                       keep_default_na=False, na_values=na)


def _read_csv_quickly(path: Path | InMemoryFile, compression: str | None,
                      text_columns: Sequence[str]) -> pd.DataFrame | None:
    """:func:`_read_csv`'s frame in one pandas read, or None where it cannot be sure of it
    (the caller then takes :func:`_read_csv`, whose errors and checks are the reference).

    :func:`_read_csv` costs three reads of the file, and a per-column ``na_values`` dict
    makes pandas convert the missing-value strings once per column (on W&B histories with
    ~100 columns, most of a ladder's load). Here the header is guessed from the first line,
    one list of missing-value strings serves every column (pandas' meaning of the dict with
    that list in each column), and the result is kept only if it must equal the reference:
    the id columns found in the table are the guessed ones and hold no missing cell (so none
    held a missing-value string that the reference keeps as an id; otherwise the reference
    is read), and a name that could be pandas' renaming of a repeated one (``loss.1`` beside
    ``loss``) or an index taken from a short header sends the file through the header check.
    """
    try:
        with _open_text(path, compression) as fh:
            names = next(csv.reader(fh), [])
        text = _text_columns(names, text_columns)
        frame = pd.read_csv(_for_pandas(path), dtype=text, compression=compression,
                            keep_default_na=False, na_values=_NA_STRINGS)
    except Exception:
        return None
    if (_text_columns(frame.columns, text_columns) != text
            or any(frame[c].isna().any() for c in text)):
        with warnings.catch_warnings():     # pandas' warnings on this file were given once
            warnings.simplefilter("ignore")
            return _read_csv(path, compression, text_columns)
    if not isinstance(frame.index, pd.RangeIndex) or _maybe_renamed(frame.columns):
        _check_header(path, compression)
    return frame


def _open_text(path: Path | InMemoryFile, compression: str | None):
    raw = path.open("rb")
    if compression == "gzip":
        raw = gzip.GzipFile(fileobj=raw)
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def _maybe_renamed(names) -> bool:
    """Whether a column name could be pandas' rename of a repeated header name (``x.1``
    beside ``x``)."""
    present = set(names)
    for name in names:
        if isinstance(name, str) and "." in name:
            stem, _, digits = name.rpartition(".")
            if digits.isdigit() and stem in present:
                return True
    return False


def _first_line(exc: BaseException) -> str:
    # pyarrow's messages can end in a schema dump, one line per column: errors are one line.
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _check_parquet_names(path: Path | InMemoryFile) -> None:
    """Refuse a Parquet schema naming a column twice (pyarrow writes such files; reading
    them fails with a schema dump). Reads the footer only."""
    import pyarrow.parquet as pq

    with path.open("rb") as fh:
        names = pq.read_schema(fh).names
    seen: dict[str, int] = {}
    for i, name in enumerate(names, 1):
        if name in seen:
            raise LadderError(f"{path}: columns {seen[name]} and {i} of the Parquet schema are "
                              f"both named {_cut(name)!r}; rename or drop one")
        seen[name] = i


def _check_header(path: Path, compression: str | None) -> None:
    """Refuse a CSV header naming a column twice: pandas would silently rename the second
    ``loss`` to ``loss.1`` and read the first."""
    raw = pd.read_csv(_for_pandas(path), header=None, nrows=1, dtype=str, keep_default_na=False,
                      compression=compression).iloc[0].tolist() if path.stat().st_size else []
    names = [str(c) for c in raw]   # "run" and " run ": canonicalize names them
    seen: dict[str, int] = {}
    for i, name in enumerate(names, 1):
        if name in seen and name:
            raise LadderError(f"{path}: columns {seen[name]} and {i} of the header are both "
                              f"named {_cut(name)!r} (the second would be read as "
                              f"{_cut(name) + '.1'!r}); rename or drop one")
        seen.setdefault(name, i)


def _json_id(value) -> str | None:
    """A JSON run id as text: a number keeps its JSON spelling (1 -> "1", 1.5 -> "1.5");
    ``""`` is missing, like an empty CSV cell."""
    text = str(value)
    return text if text else None


def concat_files(frames: Sequence[pd.DataFrame], files: Sequence[Path]) -> pd.DataFrame:
    """Stack per-file frames; with several files a ``source_file`` column says which."""
    if len(frames) == 1:
        return frames[0]
    for frame, path in zip(frames, files):
        frame["source_file"] = path.name
    return pd.concat(frames, ignore_index=True, sort=False)


#: The field's symbols for the canonical columns (``--columns N=n_params`` means params).
_SYMBOLS = {"n": "params", "d": "tokens", "c": "flops", "l": "loss", "n_active": "active_params"}


def _with_guess(name: str) -> str:
    """``name`` with the canonical column it was probably meant to be: ``parms (did you mean
    'params'?)``; a field symbol (N, D, C) names its column; ``name`` alone when nothing is
    close (difflib's ratio below 0.6)."""
    key = name.strip().lower()
    guess = _SYMBOLS.get(key) or next(iter(difflib.get_close_matches(
        key, CANONICAL_COLUMNS, n=1, cutoff=0.6)), None)
    return f"{name} (did you mean {guess!r}?)" if guess else name


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
    stripped = [c.strip() if isinstance(c, str) else c for c in frame.columns]
    if len(set(stripped)) < len(stripped):
        # "run" and " run " would become two columns named run: which holds the ids?
        same = [c for c in dict.fromkeys(stripped) if stripped.count(c) > 1]
        spelled = "; ".join(", ".join(repr(o) for o, c2 in zip(frame.columns, stripped)
                                      if c2 == c) for c in same[:5])
        raise LadderError(f"{where}: columns with the same name once surrounding spaces are "
                          f"removed: {spelled}; rename or drop one")
    frame = frame.set_axis(stripped, axis=1)
    # "loss" and "Loss" (or a mapped column in two cases): which one is meant? Say so rather
    # than take the first. Other metadata columns may differ only in case.
    # (A mapped column or --metric matching two headers ignoring case is named below.)
    wanted = set(CANONICAL_COLUMNS)
    by_case: dict[str, list[str]] = {}
    for c in stripped:
        if isinstance(c, str) and c.lower() in wanted:
            by_case.setdefault(c.lower(), []).append(c)
    clash = [names for names in by_case.values() if len(names) > 1]
    if clash:
        raise LadderError(f"{where}: columns {' and '.join(repr(_cut(c)) for c in clash[0])} "
                          f"differ only in case, so which one holds "
                          f"{clash[0][0].lower()!r} is ambiguous; rename or drop one")
    lowered = {c.lower(): c for c in frame.columns if isinstance(c, str)}
    frame = frame.rename(columns={lowered[c]: c for c in CANONICAL_COLUMNS
                                  if c not in frame.columns and c in lowered})
    mapping = {k: v.strip() if isinstance(v, str) else v for k, v in dict(columns or {}).items()}
    if metric is not None:
        if isinstance(metric, str) and metric.strip().lower() == "run":
            raise LadderError(f"{where}: --metric {metric!r}: 'run' is the run id column, not a "
                              f"loss; name the loss column")
        mapping["loss"] = metric
    unknown = [name for name in mapping if name not in CANONICAL_COLUMNS]    # as given
    if unknown:
        raise LadderError(f"{where}: unknown canonical column(s) "
                          f"{', '.join(_with_guess(str(u)) for u in unknown)}; "
                          f"known: {', '.join(CANONICAL_COLUMNS)}")
    factors = {}
    for d in defaults:
        if d.canonical not in mapping and d.source in frame.columns and d.canonical not in frame.columns:
            mapping[d.canonical] = d.source
            factors[d.canonical] = d.factor
    for canonical, src in list(mapping.items()):
        if src not in frame.columns and isinstance(src, str):
            # Headers match ignoring case (README): --metric eval/paloma/BPB names eval/paloma/bpb.
            same = [c for c in frame.columns if isinstance(c, str) and c.lower() == src.lower()]
            if len(same) == 1:
                mapping[canonical] = src = same[0]
            elif len(same) > 1:
                raise LadderError(f"{where}: column {src!r} (for {canonical}) matches "
                                  f"{', '.join(map(repr, same))} ignoring case; give the exact "
                                  f"name")
        if src not in frame.columns:
            hint = ""
            # Never the header of a file that is not a ladder table (columns_found).
            found = columns_found(frame.columns)
            if canonical == "loss" and found.startswith("columns found"):
                lossy = [c for c in frame.columns if isinstance(c, str)
                         and not c.startswith("source:") and _LOSS_LIKE.search(c)]
                hint = f"; loss-like columns: {list_columns(lossy)}" if lossy else ""
            raise LadderError(f"{where}: column {_cut(src)!r} (for {canonical}) not found; "
                              f"{found}{hint}")
    new = {canonical: frame[src] for canonical, src in mapping.items() if canonical != src}
    identity = {c for c, src in mapping.items() if c == src}
    consumed = {src for c, src in mapping.items() if c != src} - identity
    rest = frame.drop(columns=sorted(consumed))
    # Keep a clashing, unmapped source column (e.g. a raw `lr` that is really the peak) as metadata.
    rest = rest.rename(columns={c: f"source:{c}" for c in rest.columns if c in new})
    out = pd.concat([rest, pd.DataFrame(new, index=frame.index)], axis=1) if new else rest
    renamed = {src: canonical for canonical, src in mapping.items() if canonical != src}

    for col in ("run", "status"):
        # A JSON object or array (or a Parquet list) where a name belongs: kept as its text, so
        # the ladder names the cell instead of failing on an unhashable value.
        if col in out.columns and out[col].dtype == object:
            nested = out[col].map(lambda v: isinstance(v, (dict, list, np.ndarray)))
            if nested.any():
                out[col] = out[col].where(~nested, out[col][nested].map(_as_text))
    for col in NUMERIC_COLUMNS:
        if col in out.columns and out[col].dtype != np.float64:    # float columns as they are
            if has_non_numbers(out[col]):   # true/false, dates: Ladder names the cell
                continue
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


def _as_text(value) -> str:
    """A nested cell (dict, list, array) as JSON text for messages and ids."""
    try:
        return json.dumps(value.tolist() if isinstance(value, np.ndarray) else value,
                          default=str)
    except (TypeError, ValueError):
        return str(value)


def has_non_numbers(series: pd.Series) -> bool:
    """Whether ``series`` holds a boolean (a bool column, or a JSON ``true`` among numbers) or
    a date or duration: pandas would read them as 1.0/0.0 or nanoseconds, but they are not
    measurements (the ladder names each such cell)."""
    return non_numeric_cells(series) is not None


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
