"""Reading ladders: bundled names, TOML manifests, and tidy data files.

``load_ladder`` is the one entry point the CLI and the API use::

    load_ladder("epoch-chinchilla")          # a bundled manifest (ladders/<name>.toml)
    load_ladder("my_ladder.toml")            # any manifest
    load_ladder("runs.csv", metric="val")    # a tidy CSV / Parquet / JSONL file

The format-specific readers (:func:`read_csv`, :func:`read_wandb`, :func:`read_marin`,
:func:`read_olmo`, ...) return a :class:`SourceTable`; ``.to_ladder()`` validates it.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import LadderError
from ..ladder import Ladder
from ..units import DEFAULT_UNIT, normalize_unit, unit_from_metric
from ._common import SourceTable
from ._pipeline import build_ladder
from .manifest import Manifest, read_manifest
from .marin import read_marin
from .olmo import read_olmo
from .paths import BUNDLED_DIR
from .tabular import FORMATS, read_csv, read_jsonl, read_parquet, read_table
from .wandb import read_wandb

__all__ = ["load_ladder", "load_manifest", "list_ladders", "Manifest", "SourceTable",
           "read_csv", "read_parquet", "read_jsonl", "read_table", "read_wandb", "read_marin",
           "read_olmo", "FORMATS"]

_MANIFEST_SUFFIX = ".toml"


def _bundled_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_DIR.glob(f"*{_MANIFEST_SUFFIX}"))


def _looks_like_path(source: str | Path) -> bool:
    if isinstance(source, Path):
        return True
    return "/" in source or "\\" in source or Path(source).suffix != ""


def _resolve(source: str | Path) -> tuple[str, Path, str]:
    """``(kind, path, label)``: kind is ``"manifest"`` or ``"data"``; label names the ladder's
    source in reports (the bundled name, else the path)."""
    if not _looks_like_path(source):
        path = BUNDLED_DIR / f"{source}{_MANIFEST_SUFFIX}"
        if not path.is_file():
            known = ", ".join(_bundled_names()) or "(none)"
            raise LadderError(f"unknown ladder {str(source)!r}; known ladders: {known}; or give a "
                              f"path to a .toml manifest or a {'/'.join(FORMATS)} file")
        return "manifest", path, str(source)
    path = Path(source).expanduser()
    suffix = path.suffix.lower()
    if suffix != _MANIFEST_SUFFIX and suffix not in FORMATS:
        if path.is_dir():
            raise LadderError(f"{path} is a directory; give a manifest (.toml) or a data file")
        raise LadderError(f"unsupported file format {suffix or '(no suffix)'!r} for {path}; "
                          f"supported: {_MANIFEST_SUFFIX} (manifest), {', '.join(FORMATS)}")
    if not path.is_file():
        raise LadderError(f"file not found: {path}")
    return ("manifest" if suffix == _MANIFEST_SUFFIX else "data"), path, str(path)


def load_manifest(source: str | Path) -> Manifest:
    """The manifest of a bundled ladder name or a ``.toml`` path (e.g. for ``[predict]``).

    Raises
    ------
    LadderError
        Unknown name (the message lists the known ones), missing file, or not a manifest.
    ManifestError
        Invalid TOML or schema (the message names the key and the file).
    """
    kind, path, _ = _resolve(source)
    if kind != "manifest":
        raise LadderError(f"{path} is a data file, not a manifest (.toml)")
    return read_manifest(path)


def _unit_for(metric: str | None, unit: str | None, default: str) -> tuple[str, str | None]:
    """``(unit, note)``: the given unit, else the one the metric's name implies (with a note
    saying so), else ``default``."""
    if unit is not None:
        return normalize_unit(unit), None
    implied = unit_from_metric(metric)
    if implied is not None and implied != default:
        return implied, (f"metric {metric!r} is named as bits per byte: its unit is taken as "
                         f"{implied} (give --unit / unit= to override)")
    return default, None


def load_ladder(source: str | Path, *, metric: str | None = None,
                unit: str | None = None, drop_invalid: bool = False) -> Ladder:
    """Load a ladder from a bundled name, a manifest (``.toml``) or a tidy data file.

    Parameters
    ----------
    source:
        A bundled ladder name (``ladders/<name>.toml`` in the repository, see
        :func:`list_ladders`), a manifest path, a ``.csv``/``.parquet``/``.jsonl`` file
        with canonical columns (see :mod:`delphi.ladder`), or a pandas DataFrame with them.
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
        listed in :attr:`Ladder.exclusions` with its reason, and a warning gives the count.

    Returns
    -------
    Ladder
        With the reader's and manifest's exclusions and any warnings recorded on it.

    Raises
    ------
    LadderError
        Unknown name (lists the known ladders), unsupported format (names the suffix and the
        supported ones), missing file (gives the path), bad data (one error lists the first
        20 invalid rows, each naming run, row and column, and gives the count), an
        unknown unit (lists the accepted ones), or a unit contradicting the manifest's.
    ManifestError
        An invalid manifest (names the key and the file).
    DataDirError
        The manifest reads published data and ``$DELPHI_DATA_DIR`` (or ``../shared/ladders``)
        does not exist; the message says where delphi looked and how to set it.
    """
    if isinstance(source, pd.DataFrame):
        chosen, note = _unit_for(metric, unit, DEFAULT_UNIT)
        table = SourceTable(source, "<DataFrame>", notes=[note] if note else [])
        return table.to_ladder(name="dataframe", metric=metric or "loss", unit=chosen,
                               drop_invalid=drop_invalid)
    kind, path, label = _resolve(source)
    if kind == "manifest":
        manifest = read_manifest(path)
        if unit is not None and normalize_unit(unit) != manifest.unit:
            raise LadderError(f"--unit {normalize_unit(unit)} contradicts manifest {label!r}, "
                              f"whose loss is in {manifest.unit}; edit the manifest's unit if "
                              f"it is wrong")
        # A manifest's unit is for its own metric; another metric (--metric) may say otherwise.
        chosen, note = _unit_for(metric, None, manifest.unit) if metric else (manifest.unit, None)
        return build_ladder(manifest, metric=metric, source=label, unit=chosen,
                            notes=[note] if note else [], drop_invalid=drop_invalid)
    table = read_table(path, metric=metric)
    chosen, note = _unit_for(table.metric or metric, unit, DEFAULT_UNIT)
    if note:
        table.notes.append(note)
    return table.to_ladder(name=path.stem, metric=metric, source=label, unit=chosen,
                           drop_invalid=drop_invalid)


def list_ladders() -> list[tuple[str, str]]:
    """``[(name, description)]`` of every bundled ladder, sorted by name.

    Raises
    ------
    ManifestError
        A bundled manifest is invalid.
    """
    return [(m.name, m.description) for m in
            (read_manifest(BUNDLED_DIR / f"{n}{_MANIFEST_SUFFIX}") for n in _bundled_names())]
