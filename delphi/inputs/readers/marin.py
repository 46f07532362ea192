"""Marin per-run ``tracker_metrics.jsonl`` files.

Levanter's W&B tracker mirrors each finished run to ``<run output>/tracker_metrics.jsonl``:
one JSON object per line, ``{"config": {...}, "summary": {...}}``. The config is flattened
with dots (``trainer.train_batch_size``, as W&B exports name it) and merged with the summary
(``throughput/total_tokens``, ``throughput/total_gflops``, ``parameter_count``,
``eval/paloma/macro_loss``, ...), one row per line; the column defaults are those of
:mod:`delphi.readers.wandb`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from ...errors import LadderError
from ._common import (SourceTable, json_kind, canonicalize, drop_missing_metric,
                      read_json_lines, resolve_paths)
from .wandb import LEVANTER_COLUMNS

__all__ = ["read_marin", "RUN_ID_KEYS"]

#: Config keys (flattened) that name the run, in order of preference; else the parent folder.
RUN_ID_KEYS = ("run_id", "name", "trainer.id", "trainer.run_id", "id")


def _records(path: Path) -> list[dict]:
    rows = []
    what = 'a {"config": {...}, "summary": {...}} object per line'
    for lineno, record in read_json_lines(path, what=what):
        summary, config = record.get("summary"), record.get("config")
        if not isinstance(summary, dict):
            raise LadderError(f"{path}, line {lineno}: expected an object with a 'summary' "
                              f"object (and usually a 'config' object); 'summary' is "
                              f"{_kind(summary)}")
        if config is not None and not isinstance(config, dict):
            raise LadderError(f"{path}, line {lineno}: 'config' must be an object "
                              f"({{\"name\": ..., ...}}), got {_kind(config)}")
        flat = pd.json_normalize(config, sep=".").to_dict("records")[0] if config else {}
        run = next((str(flat[k]) for k in RUN_ID_KEYS if flat.get(k) not in (None, "")),
                   path.parent.name)
        rows.append({**flat, **summary, "run": run, "row": len(rows),
                     "source_file": str(path)})
    return rows


def _kind(value) -> str:
    return "missing" if value is None else json_kind(value)


def read_marin(path: str | Path, *, columns: Mapping[str, str] | None = None,
               scale: Mapping[str, float] | None = None, metric: str | None = None) -> SourceTable:
    """Read Marin ``tracker_metrics.jsonl`` files into one row per record.

    Parameters
    ----------
    path:
        A file, a directory (every ``tracker_metrics.jsonl`` below it) or a glob.
    columns, scale, metric:
        As in :func:`delphi.readers.wandb.read_wandb`; defaults map Levanter's summary keys
        (``throughput/total_gflops`` x 1e9 -> flops; ``eval/paloma/macro_loss`` -> loss).

    Returns
    -------
    SourceTable
        ``run`` from the config (``run_id``, ``name``, ``trainer.id``, ... see
        :data:`RUN_ID_KEYS`), else the run's folder name. Records without the metric are
        dropped and listed in ``exclusions``.

    Raises
    ------
    LadderError
        Missing files, bytes that are not UTF-8 or invalid JSON (names the line), a line
        that is not a ``{"config", "summary"}`` object or whose ``config`` is not an object
        (names the line), or a mapped key absent from every record.
    """
    files = resolve_paths(path, pattern="tracker_metrics.jsonl")
    rows = [row for f in files for row in _records(f)]
    if not rows:
        raise LadderError(f"no records in {path}")
    frame = pd.DataFrame.from_records(rows)
    frame, renamed, loss_source = canonicalize(frame, columns=columns, scale=scale, metric=metric,
                                               defaults=LEVANTER_COLUMNS, where=str(path))
    table = SourceTable(frame, str(path), renamed=renamed,
                        metric=loss_source)
    drop_missing_metric(table, what="metric not logged")
    return table
