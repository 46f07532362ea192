"""Reading ladders: bundled names, TOML manifests, and tidy data files.

``load_ladder`` is the one entry point the CLI and the API use::

    load_ladder("epoch-chinchilla")          # a bundled manifest (ladders/<name>.toml)
    load_ladder("my_ladder.toml")            # any manifest
    load_ladder("runs.csv", metric="val")    # a tidy CSV / Parquet / JSONL file
    load_ladder("-", format="jsonl")         # standard input (the CLI's ``-``)
    load_ladder("wandb_export.csv")          # a W&B runs table (Name, State, summary columns)
    load_ladder("tb_logs/", format="tensorboard", metric="eval/loss")   # TensorBoard runs

The format-specific readers (:func:`read_csv`, :func:`read_wandb`, :func:`read_marin`,
:func:`read_olmo`, ...) return a :class:`SourceTable`; ``.to_ladder()`` validates it.
"""

from __future__ import annotations

import difflib
import math
import numbers
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import LadderError, option
from ..ladder import Ladder, columns_found
from ..units import DEFAULT_UNIT, normalize_unit, unit_from_metric
from ._common import SourceTable, canonicalize, not_a_file, sniff_content
from ._pipeline import build_ladder, check_tables
from .manifest import Manifest, ScaleSpec, read_manifest
from .marin import read_marin
from .olmo import read_olmo
from .paths import BUNDLED_DIR
from .tabular import (FORMATS, STDIN_LABEL, STREAM_FORMATS, format_of, read_csv, read_jsonl,
                      read_parquet, read_stream, read_table, supported)
from .tensorboard import is_event_dir, read_tensorboard
from .wandb import is_runs_table, read_wandb, read_wandb_runs

__all__ = ["load_ladder", "as_ladder", "load_manifest", "list_ladders", "Manifest", "SourceTable",
           "read_csv", "read_parquet", "read_jsonl", "read_table", "read_stream", "read_wandb",
           "read_wandb_runs", "read_tensorboard", "is_data_source",
           "read_marin", "read_olmo", "FORMATS", "STDIN", "format_problem", "scale_problem",
           "SCALABLE"]

#: The source that means standard input (as in ``cat runs.csv | delphi fit -``).
STDIN = "-"

_MANIFEST_SUFFIX = ".toml"


def _bundled_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_DIR.glob(f"*{_MANIFEST_SUFFIX}"))


def _looks_like_path(source: str | Path) -> bool:
    if isinstance(source, Path):
        return True
    return "/" in source or "\\" in source or Path(source).suffix != ""


def _path_source(source, what: str = "a ladder is a bundled name, a path (str or "
                 "os.PathLike), a pandas DataFrame or an open stream") -> str | Path:
    """``source`` as a str or Path, checked before any filesystem call: bytes and other
    ``os.PathLike`` objects are accepted as paths; anything else, or a NUL character (no file
    can be named so, and the OS would refuse it with a bare ValueError), is a LadderError."""
    if isinstance(source, bytes):
        source = os.fsdecode(source)
    elif isinstance(source, os.PathLike) and not isinstance(source, Path):
        source = Path(os.fsdecode(os.fspath(source)))
    if not isinstance(source, (str, Path)):
        rows = ("; for rows in a dict or list, pass pandas.DataFrame(...)"
                if isinstance(source, (dict, list, tuple)) else "")
        raise LadderError(f"{what}, got {type(source).__name__}{rows}")
    if "\x00" in str(source):
        raise LadderError(f"path {_clip(str(source))!r} contains a NUL character (\\x00): no "
                          f"file can be named so")
    return source


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _unreachable(source, exc: OSError) -> LadderError:
    # A name the OS refuses before looking (too long, say): one line naming it, no traceback.
    return LadderError(f"cannot look up {_clip(str(source))!r}: {exc.strerror or exc}")


def _resolve(source: str | Path) -> tuple[str, Path, str]:
    """``(kind, path, label)``: kind is ``"manifest"`` or ``"data"``; label names the ladder's
    source in reports (the bundled name, else the path)."""
    if not _looks_like_path(source):
        path = BUNDLED_DIR / f"{source}{_MANIFEST_SUFFIX}"
        if not path.is_file() and Path(source).is_dir():
            raise LadderError(f"{source} is a directory (not a bundled ladder): give a manifest "
                              f"(.toml) or a data file, or "
                              f"{option('format=tensorboard', '--format tensorboard')} for a "
                              f"directory of TensorBoard runs")
        if not path.is_file():
            names = list(_bundled_names())
            known = ", ".join(names) or "(none)"
            close = difflib.get_close_matches(str(source), names, n=1, cutoff=0.75)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise LadderError(f"unknown ladder {str(source)!r}{hint}; known ladders: {known}; "
                              f"or give a path to a .toml manifest or a {'/'.join(FORMATS)} "
                              f"file")
        return "manifest", path, str(source)
    path = Path(source).expanduser()
    is_manifest = path.suffix.lower() == _MANIFEST_SUFFIX
    fmt, suffix = format_of(path)
    if not is_manifest and fmt is None:
        if path.is_dir():
            raise LadderError(f"{path} is a directory; give a manifest (.toml) or a data file, "
                              f"or {option('format=tensorboard', '--format tensorboard')} for "
                              f"a directory of TensorBoard runs")
        raise LadderError(f"unsupported file format {suffix or '(no suffix)'!r} for {path}; "
                          f"supported: {_MANIFEST_SUFFIX} (manifest), {supported()}")
    if not path.is_file():
        # Say what is there (a directory, a FIFO, a device, a broken link), never open it.
        raise not_a_file(path)
    return ("manifest" if is_manifest else "data"), path, str(path)


def is_data_source(source, format: str | None = None) -> bool:
    """Whether ``source`` names data rather than a manifest (so it has no ``[predict]``
    defaults): standard input (``"-"``), a tidy file by its suffix (W&B runs tables included),
    ``format="tensorboard"``, or a directory holding TensorBoard event files."""
    if not isinstance(source, (str, Path)):
        return True
    if (isinstance(source, str) and source == STDIN) or format == _TENSORBOARD:
        return True
    return format_of(source)[0] is not None or is_event_dir(source)


def load_manifest(source: str | Path) -> Manifest:
    """The manifest of a bundled ladder name or a ``.toml`` path (e.g. for ``[predict]``).

    Raises
    ------
    LadderError
        Unknown name (the message lists the known ones), missing file, or not a manifest;
        ``source`` not a str or path, or a path the OS refuses (a NUL character, too long).
    ManifestError
        Invalid TOML or schema (the message names the key and the file).
    """
    source = _path_source(source, "a manifest is a bundled ladder name or a path to a .toml "
                                  "file (str or os.PathLike)")
    try:
        kind, path, _ = _resolve(source)
    except OSError as exc:
        raise _unreachable(source, exc) from None
    if kind != "manifest":
        raise LadderError(f"{path} is a data file, not a manifest (.toml)")
    return read_manifest(path)


def _unit_for(metric: str | None, unit: str | None, default: str) -> tuple[str, str | None]:
    """``(unit, note)``: the given unit, else the one the metric's name implies (with a note
    saying so), else ``default``. A given unit that the metric's name contradicts (a bpb
    column read in nats) is used, with a note."""
    implied = unit_from_metric(metric)
    if unit is not None:
        given = normalize_unit(unit)
        if implied is not None and implied != given:
            # The explicit unit wins, but a bpb-named metric in nats is worth a second look.
            return given, (f"metric {metric!r} is named as bits per byte ({implied}), but the "
                           f"unit given is {given}: the given unit is used; check it")
        return given, None
    if implied is not None and implied != default:
        return implied, (f"metric {metric!r} is named as bits per byte: its unit is taken as "
                         f"{implied} (give --unit / unit= to override)")
    return default, None


def as_ladder(ladder):
    """``ladder`` as a :class:`~delphi.ladder.Ladder`: a Ladder as it is, a pandas DataFrame
    read by :func:`load_ladder` (the same columns and checks). What :func:`delphi.fit`,
    :func:`delphi.predict`, :func:`delphi.backtest` and :func:`delphi.complete` call first.

    Raises
    ------
    LadderError: anything else (a name or path is read with :func:`load_ladder` first), or a
        DataFrame that is not a valid ladder (see :func:`load_ladder`).
    """
    import pandas as pd

    if isinstance(ladder, Ladder):
        return ladder
    if isinstance(ladder, pd.DataFrame):
        try:
            return load_ladder(ladder)
        except LadderError as exc:
            # The reading options a message suggests are load_ladder's: say so, rather than
            # suggest a keyword the caller (fit, predict...) does not take.
            text = _OPTION_LOAD.sub(lambda m: f"delphi.load_ladder(df, {m.group('api')}) (in "
                                              f"place of the DataFrame)", str(exc))
            if text == str(exc):
                raise
            raise LadderError(text) from exc
    hint = (f"; read it first: delphi.load_ladder({ladder!r:.60})"
            if isinstance(ladder, (str, Path)) else "")
    raise LadderError(f"expected a Ladder or a pandas DataFrame of runs, got "
                      f"{type(ladder).__name__}{hint}")


def format_problem(format) -> str | None:
    """What is wrong with ``format`` (``load_ladder``'s ``format=``, the CLI's ``--format``):
    ``"unknown format 'xml'; choose ..."`` naming the known ones, or None when it is one
    (:data:`STREAM_FORMATS`, ``toml`` or ``tensorboard``). Shared by the library, which
    raises a LadderError with it, and the command line, which makes it a usage error."""
    if format in STREAM_FORMATS + ("toml", _TENSORBOARD):
        return None
    return (f"unknown format {format!r}; choose {', '.join(STREAM_FORMATS)} "
            f"(or {_TENSORBOARD} for a directory of event files)")


def _format_flag(format: str) -> str:
    """``format`` named for a message in both spellings (API and CLI); an unknown value is
    refused here, naming the known ones."""
    problem = format_problem(format)
    if problem is not None:
        raise LadderError(problem)
    return option(f"format={format!r}", f"--format {format}")


#: ``format=`` for a directory of TensorBoard event files (:mod:`delphi.readers.tensorboard`).
_TENSORBOARD = "tensorboard"


def _read_data_file(path: Path, metric: str | None,
                    columns: Mapping[str, str] | None = None) -> SourceTable:
    """A data file's table: a W&B runs-table export (recognised from its CSV header, see
    :func:`~delphi.readers.wandb.is_runs_table`) through its reader, anything else as a tidy
    table."""
    if format_of(path)[0] == "csv":
        try:
            gz = path.suffix.lower() == ".gz"
            header = pd.read_csv(path, nrows=0, compression="gzip" if gz else None).columns
        except Exception:       # unreadable: the tidy reader says why, with the line
            header = []
        if columns:
            # The header as the tidy reader would see it: a column mapped to run makes it a
            # tidy table (is_runs_table wants no run column), as a file with one already is.
            source_to_name = {v: k for k, v in columns.items()}
            header = [source_to_name.get(c, c) for c in header]
        if is_runs_table(header):
            if columns:
                raise LadderError(f"{str(path)!r} is read as a W&B runs-table export (a Name "
                                  f"column and no run column), with its own column mapping; "
                                  f"columns= is for tidy tables: to read it as one, map its "
                                  f"run names too, e.g. run=Name")
            return read_wandb_runs(path, metric=metric)
    return read_table(path, metric=metric, columns=columns)


def _load_tensorboard(source, *, metric: str | None, unit: str | None,
                      drop_invalid: bool, scale: dict[str, float] | None = None) -> Ladder:
    """A ladder of loss curves from a directory of TensorBoard runs, named after it."""
    path = Path(source).expanduser()
    table = read_tensorboard(path, metric=metric)
    chosen, note = _unit_for(table.metric or metric, unit, DEFAULT_UNIT)
    if note:
        table.notes.append(note)
    return _scaled_ladder(table, scale, name=path.resolve().name or str(path),
                          metric=table.metric or metric, source=str(path), unit=chosen,
                          drop_invalid=drop_invalid)


def _check_format(format: str | None, kind: str, path: Path, label: str) -> None:
    """Refuse a ``format`` that a named source contradicts: a file's suffix says its format."""
    if format is None:
        return
    flag = _format_flag(format)
    if kind == "manifest":
        if format != "toml":
            raise LadderError(f"{flag} is for a data file or standard input, but {label!r} is "
                              f"a manifest (.toml); drop the format")
        return
    fmt, suffix = format_of(path)
    if format != fmt:
        raise LadderError(f"{flag} contradicts {path}, whose suffix {suffix} says {fmt}; drop "
                          f"the format (a file's suffix names it) or rename the file")


def _load_stream(stream, *, format: str | None, metric: str | None, unit: str | None,
                 drop_invalid: bool, columns: Mapping[str, str] | None = None,
                 scale: dict[str, float] | None = None) -> Ladder:
    """A ladder read from standard input or another stream: ladder ``stdin``, source
    ``<stdin>`` (never a file name, so forecasts and registry entries are the same whatever
    pipe fed them)."""
    fmt = format or "csv"
    flag = _format_flag(fmt)
    if fmt == "toml":
        raise LadderError(f"a manifest cannot come from standard input ({flag}): give the "
                          f"manifest's path (its [source] path is relative to its folder)")
    if fmt == _TENSORBOARD:
        raise LadderError(f"TensorBoard logs cannot come from standard input ({flag}): give "
                          f"the directory of runs")
    table = read_stream(stream, fmt, metric=metric, columns=columns)
    chosen, note = _unit_for(table.metric or metric, unit, DEFAULT_UNIT)
    if note:
        table.notes.append(note)
    return _scaled_ladder(table, scale, name="stdin", metric=table.metric or metric,
                          source=STDIN_LABEL, unit=chosen, drop_invalid=drop_invalid)


def load_ladder(source: str | Path, *, metric: str | None = None,
                unit: str | None = None, drop_invalid: bool = False,
                allow_outside_paths: bool = False, format: str | None = None,
                columns: Mapping[str, str] | None = None,
                scale: Mapping[str, float] | None = None) -> Ladder:
    """Load a ladder from a bundled name, a manifest (``.toml``), a tidy data file or
    standard input (``"-"``).

    Parameters
    ----------
    source:
        A bundled ladder name (``ladders/<name>.toml`` in the repository, see
        :func:`list_ladders`), a manifest path, a ``.csv``/``.parquet``/``.jsonl`` file
        (``.csv.gz``/``.jsonl.gz`` read as is) with canonical columns (see
        :mod:`delphi.ladder`), a pandas DataFrame with them, ``"-"`` for standard input
        (``sys.stdin``, read whole into memory; the ladder is named ``stdin``, its source
        ``<stdin>``), or an open stream (anything with ``read``, e.g. ``io.BytesIO``).
    metric:
        Source column to use as the loss instead of the default (CLI ``--metric``); for OLMo
        ladders an eval-set name such as ``"pile"`` also works.
    unit:
        Unit of the loss (CLI ``--unit``): ``"nats/token"``, ``"bits/byte"`` or
        ``"bits/token"`` (:data:`delphi.units.UNITS`). Default: a manifest's ``unit``; for a
        data file or DataFrame, bits/byte when the metric column's name says so (``bpb``,
        ``bits-per-byte``, ``bits_per_byte``; recorded in :attr:`Ladder.warnings`), else
        nats/token.
    drop_invalid:
        Drop invalid rows instead of raising (CLI ``--drop-invalid``): each dropped row, or
        whole run for a run-level problem (duplicate step, contradictory run state), is
        listed in :attr:`Ladder.exclusions` with its reason, and a warning gives the count;
        a resumed run's superseded rows (a rollback logging steps again) are dropped, not
        the run.
    allow_outside_paths:
        Let a manifest's ``[source] path`` read files outside the manifest's folder and the
        data directory (CLI ``--allow-outside-paths``). A manifest is untrusted input: by
        default such a path, symlinks resolved, is refused (see :mod:`delphi.readers.manifest`).
        No effect on a data file given directly.
    format:
        The table's format on standard input or a stream (CLI ``--format``): ``"csv"``
        (default), ``"jsonl"`` or ``"parquet"``. With a path it must agree with the file's
        suffix (a check, not an override). ``"tensorboard"``: ``source`` is a directory of
        TensorBoard runs (:mod:`delphi.readers.tensorboard`, needs the ``tensorboard``
        extra); a directory holding event files is read as one without it.
    columns:
        ``{canonical: source column}`` for a data file, stream or DataFrame whose columns have
        other names (CLI ``--columns params=n_params,tokens=D``): e.g. ``{"params": "N",
        "tokens": "D"}``. Canonical names are those of :mod:`delphi.ladder` (``run``,
        ``params``, ``tokens``, ``flops``, ``loss``, ``step``...). A manifest maps its own in
        its ``[columns]`` table, so ``columns`` is refused with a manifest or bundled name.
    scale:
        ``{canonical column: factor}`` multiplying a column after reading (CLI ``--scale
        params=1e6``, repeatable), for a data file, stream, DataFrame or TensorBoard logs that
        count in other units: parameters in millions (``{"params": 1e6}``), tokens in billions
        (``{"tokens": 1e9}``), GFLOPs. Columns: ``params``, ``tokens``, ``flops``, ``loss``,
        ``step``, ``lr``, ``peak_lr``, ``batch_size``, ``active_params`` (after ``columns``
        renames them); a factor is a positive finite number. Recorded in
        :attr:`Ladder.scale` and :attr:`Ladder.warnings` (every report prints it). A
        manifest scales in its ``[scale]`` table, so ``scale`` is refused with a manifest or
        bundled name.

    A CSV whose header is a W&B runs-table export (``Name``, ``State`` and summary columns
    such as ``parameter_count``, ``throughput/total_tokens``, ``eval/paloma/macro_loss``) is
    read by :func:`~delphi.readers.wandb.read_wandb_runs`: ``Name`` is the run, ``metric``
    picks the loss column, crashed/failed/killed runs are excluded with their state and
    running ones are unfinished.

    Returns
    -------
    Ladder
        With the reader's and manifest's exclusions and any warnings recorded on it.

    Raises
    ------
    LadderError
        Unknown name (lists the known ladders), unsupported format (names the suffix and the
        supported ones), missing file (gives the path), a path that is not a regular file
        (says what it is: a directory, a FIFO, a device, a broken symlink), compressed or
        non-UTF-8 content (says so, with the line), a JSONL line that is not an object (names
        the line), bad data (one error lists the first
        20 invalid rows, each naming run, row and column, and gives the count), an
        unknown unit (lists the accepted ones), or a unit contradicting the manifest's.
        Standard input that is a terminal (nothing piped) or empty, a ``format`` that is
        unknown, ``"toml"`` for standard input (a manifest needs its folder), or that
        contradicts a file's suffix (names both). A ``source`` of another type (None, a dict,
        an array...), a path with a NUL character or one the OS refuses (too long), a
        ``metric`` that is not a str. A ``scale`` naming a column that cannot be scaled
        (the closest one suggested) or one the table lacks, or a factor that is not a
        positive finite number; ``scale`` with a manifest.
    ManifestError
        An invalid manifest (names the key and the file; a file that is not UTF-8 or is
        nested too deeply, or a path with a NUL character, too), or one whose ``[source] path``
        leads outside its folder and the data directory (names the manifest, the key and the
        resolved path) or whose glob is unbounded.
    DataDirError
        The manifest reads published data and ``$DELPHI_DATA_DIR`` (or ``../shared/ladders``)
        does not exist; the message says where delphi looked and how to set it.
    """
    columns = _check_columns(columns)
    scale = _check_scale(scale)
    if metric is not None and not isinstance(metric, str):
        raise LadderError(f"{option('metric', '--metric')} is a column name, got "
                          f"{type(metric).__name__} {metric!r:.60}")
    if isinstance(source, str) and source == STDIN:
        return _load_stream(sys.stdin, format=format, metric=metric, unit=unit,
                            drop_invalid=drop_invalid, columns=columns, scale=scale)
    if hasattr(source, "read"):
        return _load_stream(source, format=format, metric=metric, unit=unit,
                            drop_invalid=drop_invalid, columns=columns, scale=scale)
    if isinstance(source, pd.DataFrame):
        if format is not None:
            raise LadderError(f"format={format!r} is for standard input or a stream; a "
                              f"DataFrame has no format")
        chosen, note = _unit_for(metric, unit, DEFAULT_UNIT)
        loss_source = None
        if columns or metric:
            # metric: the column read as the loss, as for a file or stream
            frame, renamed, loss_source = canonicalize(source, columns=columns, metric=metric,
                                                       where="<DataFrame>")
            table = SourceTable(frame, "<DataFrame>", renamed=renamed,
                                notes=[note] if note else [])
        else:
            table = SourceTable(source, "<DataFrame>", notes=[note] if note else [])
        if scale:       # scaled in a copy: the caller's DataFrame is left as it is
            table.frame = table.frame.copy(deep=False)
        return _scaled_ladder(table, scale, name="dataframe",
                              metric=loss_source or metric or "loss", unit=chosen,
                              drop_invalid=drop_invalid)
    source = _path_source(source)
    try:
        events = format == _TENSORBOARD or (format is None and is_event_dir(source))
        if not events:
            kind, path, label = _resolve(source)
    except OSError as exc:
        raise _unreachable(source, exc) from None
    if events:
        # A directory of runs with event files (format="tensorboard" may be left out).
        return _load_tensorboard(source, metric=metric, unit=unit, drop_invalid=drop_invalid,
                                 scale=scale)
    _check_format(format, kind, path, label)
    if kind == "manifest" and columns:
        raise LadderError(f"{label!r} is a manifest: it maps its columns in its [columns] "
                          f"table; {option('columns=', '--columns')} is for a data file, "
                          f"stream or DataFrame")
    if kind == "manifest" and scale:
        raise LadderError(f"{label!r} is a manifest: it scales its columns in its [scale] "
                          f"table; {option('scale=', '--scale')} is for a data file, stream "
                          f"or DataFrame")
    if kind == "manifest":
        manifest = read_manifest(path)
        if unit is not None and normalize_unit(unit) != manifest.unit:
            raise LadderError(f"--unit {normalize_unit(unit)} contradicts manifest {label!r}, "
                              f"whose loss is in {manifest.unit}; edit the manifest's unit if "
                              f"it is wrong")
        # A manifest's unit is for its own metric; another metric (--metric) may say otherwise.
        chosen, note = _unit_for(metric, None, manifest.unit) if metric else (manifest.unit, None)
        return build_ladder(manifest, metric=metric, source=label, unit=chosen,
                            notes=[note] if note else [], drop_invalid=drop_invalid,
                            allow_outside_paths=allow_outside_paths)
    # Never quote a non-table's first line as "columns found" (a symlink to a secret, say).
    # Compressed or Parquet content under another name is named as such (no content shown).
    sniff_content(path, format_of(path)[0] or "")
    plain_suffix = Path(path.stem).suffix if path.suffix.lower() == ".gz" else path.suffix
    if path.is_file() and plain_suffix.lower() in FORMATS:
        check_tables([path], FORMATS[plain_suffix.lower()])
    table = _read_data_file(path, metric, columns)
    chosen, note = _unit_for(table.metric or metric, unit, DEFAULT_UNIT)
    if note:
        table.notes.append(note)
    suffix = format_of(path)[1]       # "runs.csv.gz" is ladder "runs"
    # The metric as the file spells it (--metric matches a header ignoring case).
    return _scaled_ladder(table, scale, name=path.name[:-len(suffix)] or path.stem,
                          metric=table.metric or metric, source=label, unit=chosen,
                          drop_invalid=drop_invalid)


#: A reading option named in a message (``option("drop_invalid=True", "--drop-invalid")``):
#: the options of :func:`load_ladder` that a message about a DataFrame may suggest.
_OPTION_LOAD = re.compile(r"(?P<api>(?:drop_invalid|metric|columns)=(?:\{[^{}\s]*\}|[^\s(),;:]+))"
                          r" \(CLI [^()]*\)")


#: Canonical columns ``scale`` may multiply: the numeric ones a manifest's ``[scale]`` takes.
SCALABLE = tuple(ScaleSpec.model_fields)


def _check_scale(scale) -> dict[str, float] | None:
    """``scale`` as ``{canonical column: factor}`` (None when empty), or a LadderError naming
    an unknown column (with the closest scalable name) or a factor that is not a positive
    finite number."""
    if scale is None:
        return None
    if not isinstance(scale, Mapping):
        raise LadderError(f"scale maps canonical columns to factors, e.g. {{'params': 1e6}}, "
                          f"got {type(scale).__name__}")
    out: dict[str, float] = {}
    for name, factor in scale.items():
        problem = scale_problem(name, factor)
        if problem is not None:
            raise LadderError(f"{option('scale', '--scale')}: {problem}")
        out[name] = float(factor)
    return out or None


def scale_problem(name, factor) -> str | None:
    """What is wrong with one ``scale`` entry (``--scale NAME=FACTOR``): an unknown column
    (with the closest scalable name, :data:`SCALABLE`) or a factor that is not a positive
    finite number; None when it is fine. Shared by :func:`load_ladder` and the command line,
    which refuses a bad ``--scale`` while parsing (a usage error)."""
    if not isinstance(name, str) or name not in SCALABLE:
        close = difflib.get_close_matches(str(name).strip().lower(), SCALABLE, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return (f"unknown column {name!r}{hint}; columns that can be scaled: "
                f"{', '.join(SCALABLE)}")
    if (isinstance(factor, (bool, np.bool_)) or not isinstance(factor, numbers.Real)
            or not math.isfinite(factor) or factor <= 0):
        return f"the factor for {name} must be a positive finite number, got {factor!r}"
    return None


def _apply_scale(table: SourceTable, scale: dict[str, float] | None) -> list[str]:
    """Multiply ``table``'s canonical columns by ``scale`` in place; the notes saying so (one
    per column). Cells that are not numbers (text, booleans, dates) are left for the ladder
    to name. Raises LadderError for a column the table does not have."""
    if not scale:
        return []
    frame, notes = table.frame, []
    for col, factor in scale.items():
        if col not in frame.columns:
            raise LadderError(f"{table.source}: {option('scale', '--scale')} given for column "
                              f"{col!r}, which the table does not have; "
                              f"{columns_found(frame.columns)}")
        values = frame[col]
        if pd.api.types.is_bool_dtype(values):
            continue            # true/false where a number belongs: the ladder names the cells
        if pd.api.types.is_numeric_dtype(values):
            frame[col] = values * factor
        else:
            # numbers among bad cells: those scaled, the rest left as read for the ladder
            num = pd.to_numeric(values, errors="coerce")
            ok = num.notna() & ~values.map(lambda v: isinstance(v, (bool, np.bool_)))
            frame[col] = values.astype(object).where(~ok, num * factor)
        api = "scale={" + repr(col) + ":" + f"{factor:g}" + "}"
        done = pd.to_numeric(frame[col], errors="coerce")
        at = done.first_valid_index()
        e_g = (f"; e.g. row {frame.at[at, 'row'] if 'row' in frame.columns else at}: "
               f"{done[at] / factor:.4g} -> {done[at]:.4g}" if at is not None else "")
        notes.append(f"column {col} multiplied by {factor:g} after reading, as "
                     f"{option(api, f'--scale {col}={factor:g}')} asked{e_g}")
    return notes


def _scaled_ladder(table: SourceTable, scale: dict[str, float] | None, **kwargs) -> Ladder:
    """``table.to_ladder(**kwargs)`` after :func:`_apply_scale`, the scaling recorded in the
    ladder's :attr:`~Ladder.scale` and :attr:`~Ladder.warnings` (what the user asked for,
    so not warned about: the reports print it)."""
    notes = _apply_scale(table, scale)
    ladder = table.to_ladder(**kwargs)
    if scale:
        ladder.scale = dict(scale)
        ladder.warnings.extend(f"ladder {ladder.name!r}: {n}" for n in notes)
    return ladder


def _check_columns(columns) -> dict[str, str] | None:
    """``columns`` as a dict of str -> str (None when empty), or a LadderError naming what is
    wrong; which names are canonical is checked by the reader (it lists them)."""
    if columns is None:
        return None
    if not isinstance(columns, Mapping):
        raise LadderError(f"columns must map canonical names to source columns, e.g. "
                          f"{{'params': 'N'}}, got {type(columns).__name__}")
    bad = [f"{k!r}: {v!r}" for k, v in columns.items()
           if not (isinstance(k, str) and isinstance(v, str) and k and v)]
    if bad:
        raise LadderError(f"columns maps canonical names (str) to source columns (str); got "
                          f"{', '.join(bad[:3])}")
    return dict(columns) or None


def list_ladders() -> list[tuple[str, str]]:
    """``[(name, description)]`` of every bundled ladder, sorted by name.

    Raises
    ------
    ManifestError
        A bundled manifest is invalid.
    """
    return [(m.name, m.description) for m in
            (read_manifest(BUNDLED_DIR / f"{n}{_MANIFEST_SUFFIX}") for n in _bundled_names())]
