"""Weights & Biases "export CSV" tables (runs table or run histories).

W&B exports use the logger's metric names as columns, so a column mapping says which is
which. The defaults are Levanter's names, as in Marin's isoFLOP exports
(``marin_isoflop_2026/isoflop-*.csv``): ``Name`` -> run, ``parameter_count`` -> params,
``throughput/total_tokens`` -> tokens, ``throughput/total_gflops`` x 1e9 -> flops (training
FLOPs), ``eval/paloma/macro_loss`` -> loss, ``_step`` -> step. W&B histories are sparse
(evals run on some steps only): rows without the metric are dropped and reported as
exclusions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ._common import (ColumnDefault, SourceTable, canonicalize, concat_files, drop_missing_metric,
                      read_file, resolve_paths)

__all__ = ["read_wandb", "LEVANTER_COLUMNS"]

#: Levanter/Marin metric names (W&B summary keys) and their canonical columns.
LEVANTER_COLUMNS: tuple[ColumnDefault, ...] = (
    ColumnDefault("run", "Name"),
    ColumnDefault("params", "parameter_count"),
    ColumnDefault("tokens", "throughput/total_tokens"),
    ColumnDefault("flops", "throughput/total_gflops", 1e9),   # GFLOPs -> FLOPs
    ColumnDefault("loss", "eval/paloma/macro_loss"),
    ColumnDefault("step", "_step"),
)


def read_wandb(path: str | Path, *, columns: Mapping[str, str] | None = None,
               scale: Mapping[str, float] | None = None, metric: str | None = None) -> SourceTable:
    """Read W&B export CSV(s): a file, a directory of ``*.csv`` or a glob.

    Parameters
    ----------
    columns:
        ``{canonical: W&B column}``; unmapped canonical columns fall back to
        :data:`LEVANTER_COLUMNS` where the export has those columns.
    scale:
        ``{canonical: factor}`` applied after renaming (on top of the GFLOPs default).
    metric:
        W&B column to use as ``loss`` (e.g. ``"eval/paloma/c4_en/bpb"``).

    Returns
    -------
    SourceTable
        Rows without a ``loss`` value removed; each affected run listed in ``exclusions``.

    Raises
    ------
    LadderError
        Missing or unparsable file, or a mapped column not in the export.
    """
    files = resolve_paths(path, pattern="*.csv")
    frame = concat_files([read_file(f, "csv") for f in files], files)
    frame, renamed, loss_source = canonicalize(frame, columns=columns, scale=scale, metric=metric,
                                               defaults=LEVANTER_COLUMNS, where=str(path))
    table = SourceTable(frame, str(path), renamed=renamed, metric=loss_source)
    drop_missing_metric(table)
    return table
