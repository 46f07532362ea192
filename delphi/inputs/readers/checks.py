"""Checks that a file is a table of the format its reader expects, before it is read, so that
no error quotes content of a file that is not a ladder table (:func:`check_tables`)."""

from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
from pathlib import Path
from typing import Sequence

from ...errors import LadderError
from ._common import open_bytes, utf16_name

__all__ = ["check_tables"]

# The table check reads this much of each file (decompressed), at most.
_SNIFF_BYTES = 64 * 1024
_MAX_JSON_LINE = 16 * 1024 * 1024
_MAX_HEADER_NAME = 256
_GZIP_MAGIC = b"\x1f\x8b"
# Other compressed or binary formats: the reader names them (without quoting content).
_OTHER_MAGIC = (b"BZh", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd", b"PK\x03\x04", b"PAR1")


def _head(path: Path, size: int) -> tuple[bytes, bool]:
    """The first ``size`` bytes of ``path`` (decompressed if it is gzip), and whether that is
    all of it."""
    with path.open("rb") as fh:
        magic = fh.read(8)
    if magic.startswith(_OTHER_MAGIC):
        return b"", True
    opener = gzip.open if magic.startswith(_GZIP_MAGIC) else open_bytes
    try:
        with opener(path, "rb") as fh:
            data = fh.read(size + 1)
    except (OSError, EOFError):     # a damaged gzip stream: the reader says what is wrong
        return b"", True
    return data[:size], len(data) <= size


def _not_a_table(key: str, file: Path, expected: str) -> LadderError:
    prefix = f"{key}: " if key else ""
    return LadderError(f"{prefix}{file} is not {expected}; its content is not shown")


def _check_csv(file: Path, key: str) -> None:
    data, complete = _head(file, _SNIFF_BYTES)
    expected = ("a CSV table of the expected format (a header row of at least 2 column names, "
                "then rows as wide)")
    if not data.strip():
        return                      # empty: the reader reports it as such
    wide = utf16_name(data)
    if wide:
        prefix = f"{key}: " if key else ""
        raise LadderError(f"{prefix}{file} is {wide} text; save it as UTF-8")
    if b"\x00" in data:
        raise _not_a_table(key, file, expected + " (it holds binary data)")
    try:
        text = codecs.getincrementaldecoder("utf-8-sig")().decode(data, final=complete)
    except UnicodeDecodeError:
        return                      # pandas cannot read it either; the reader names the byte
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if not complete and len(lines) > 1:
        lines = lines[:-1]          # the last line read may be cut short
    try:
        reader = csv.reader(io.StringIO("\n".join(lines)))
        # (file line where the row ends, fields): line_num counts lines read so far.
        numbered = [(reader.line_num, r) for r in reader if any(c.strip() for c in r)]
    except csv.Error:
        raise _not_a_table(key, file, expected) from None
    rows = [r for _, r in numbered]
    if not rows:
        return
    header = rows[0]
    names = [c for c in header if c.strip()]
    if len(header) < 2:
        for sep, name in ((";", "semicolons"), ("\t", "tabs"), ("|", "'|'")):
            # a spreadsheet's export in a locale with decimal commas: say what to change
            if header and header[0].count(sep) >= 1 and all(
                    r and r[0].count(sep) == header[0].count(sep) for r in rows[1:6]):
                raise _not_a_table(key, file, expected + f" (its fields look separated by "
                                   f"{name}: save it comma-separated, or as Parquet or JSON Lines)")
    if (len(header) < 2 or len(names) < 2
            or any(len(c) > _MAX_HEADER_NAME or not c.isprintable() for c in header)):
        raise _not_a_table(key, file, expected)
    # Rows under a real header have its width (pandas fills a short row with NaN, so a few
    # may be shorter); prose under a line with a comma has not.
    body = rows[1:21]
    if 2 * sum(len(r) == len(header) for r in body) < len(body):
        raise _not_a_table(key, file, expected)
    for line, r in numbered[1:21]:
        if len(r) > len(header):        # counts only: a ragged ladder, no content quoted
            prefix = f"{key}: " if key else ""
            raise LadderError(f"{prefix}{file}, line {line}: {len(r)} fields, but the header "
                              f"has {len(header)} columns; remove the extra fields (or quote a "
                              f"field holding a comma)")


def _check_jsonl(file: Path, key: str) -> None:
    expected = "JSON Lines of the expected format (one JSON object per line)"
    with file.open("rb") as fh:
        magic = fh.read(8)
    if magic.startswith(_OTHER_MAGIC):
        return
    opener = gzip.open if magic.startswith(_GZIP_MAGIC) else open_bytes
    read, line = 0, b""
    try:
        with opener(file, "rb") as fh:
            while not line.lstrip(codecs.BOM_UTF8).strip():    # the first non-blank line
                line = fh.readline(_MAX_JSON_LINE + 1)
                if not line:
                    return          # empty: the reader reports it as such
                read += len(line)
                if read > _MAX_JSON_LINE:
                    raise _not_a_table(key, file, expected + " (no JSON object in its first "
                                                             "16 MiB)")
    except (OSError, EOFError):
        return                      # a damaged gzip stream: the reader says what is wrong
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError:
        return                      # the reader names the byte
    try:
        json.loads(text, parse_int=len)     # any integer, however long (the reader checks it)
    except ValueError:
        raise _not_a_table(key, file, expected) from None
    except RecursionError:
        return                      # nested too deeply: the reader names the line
    # Valid JSON that is not an object (null, an array, a number) is the reader's to name,
    # by line: those messages quote no content.


def _check_parquet(file: Path, key: str) -> None:
    with file.open("rb") as fh:
        magic = fh.read(4)
    if magic and magic != b"PAR1":
        raise _not_a_table(key, file, "a Parquet file")


_TABLE_CHECKS = {"csv": _check_csv, "wandb": _check_csv, "olmo": _check_csv,
                 "jsonl": _check_jsonl, "marin": _check_jsonl, "parquet": _check_parquet}


def check_tables(files: Sequence[Path], reader: str, key: str = "") -> None:
    """Refuse any file that is not a table of the format ``reader`` expects, before it is read,
    so no error ever quotes content (such as a first line taken for column names) of a file
    that is not a ladder table: a CSV (``csv``, ``wandb``, ``olmo``) needs a header of at least
    2 printable column names (each at most 256 characters), no row wider than it among the
    first 20 and most of those as wide; JSON Lines (``jsonl``, ``marin``) valid JSON on the
    first line (an array or ``null`` there is left to the reader, whose message names the
    line and quotes nothing); Parquet its magic number. Only the first 64 KiB (16 MiB for a
    JSON line) are read; gzip content is looked at decompressed; an empty file, or one that
    is not UTF-8 or is compressed in another format, is left to the reader, whose messages
    quote no content.

    Parameters
    ----------
    files:
        Regular files (a FIFO would block: callers pass what :meth:`Manifest.source_files`
        found, or a path checked to be a file).
    reader:
        A manifest reader name (:data:`~delphi.readers.manifest.READERS`).
    key:
        What the message names before the file (e.g. the manifest and ``[source] path``).

    Raises
    ------
    LadderError
        ``"<key>: <file> is not <format>; its content is not shown"``.
    """
    for file in files:
        try:
            _TABLE_CHECKS[reader](file, key)
        except OSError:
            continue                # unreadable: the reader reports it
