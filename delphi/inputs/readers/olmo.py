"""OLMo ladder runs: one W&B history CSV per run (Bhagia et al. 2024, allenai/OLMo-ladder).

Files are named ``<size>-<k>xC[-rerun].csv`` (``olmo_ladder2024/ladder-runs``); the run id is
the file stem. Columns used: ``_step`` -> step, ``throughput/total_tokens`` -> tokens,
``optim/learning_rate_group0`` -> lr, ``learning_rate_peak`` -> peak_lr,
``batch_size_in_tokens`` -> batch_size, ``throughput/total_training_Gflops`` x 1e9 -> flops,
``eval/<set>-validation/CrossEntropyLoss`` -> loss (``c4_en`` by default, the paper's "C4
loss"). The files carry no parameter count: a manifest supplies it per size. The ladder runs
finished, so each run's last row is marked ``final``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pandas as pd

from ._common import (ColumnDefault, SourceTable, canonicalize, drop_missing_metric, read_file,
                      resolve_paths)

__all__ = ["read_olmo", "OLMO_COLUMNS", "DEFAULT_EVAL_SET", "eval_column"]

DEFAULT_EVAL_SET = "c4_en"

OLMO_COLUMNS: tuple[ColumnDefault, ...] = (
    ColumnDefault("step", "_step"),
    ColumnDefault("tokens", "throughput/total_tokens"),
    ColumnDefault("lr", "optim/learning_rate_group0"),
    ColumnDefault("peak_lr", "learning_rate_peak"),
    ColumnDefault("batch_size", "batch_size_in_tokens"),
    ColumnDefault("flops", "throughput/total_training_Gflops", 1e9),   # GFLOPs -> FLOPs
)


def eval_column(eval_set: str) -> str:
    """The OLMo history column of the cross-entropy on ``eval_set`` (e.g. ``"pile"``)."""
    return f"eval/{eval_set}-validation/CrossEntropyLoss"


def read_olmo(path: str | Path, *, columns: Mapping[str, str] | None = None,
              scale: Mapping[str, float] | None = None, metric: str | None = None) -> SourceTable:
    """Read OLMo ladder run CSVs: a file, a directory (every ``*.csv`` below it) or a glob.

    Parameters
    ----------
    columns, scale:
        As in :func:`delphi.readers.tabular.read_csv`, on top of :data:`OLMO_COLUMNS`.
    metric:
        The loss: a column name, or an eval-set name such as ``"pile"`` meaning
        ``eval/pile-validation/CrossEntropyLoss``. Default ``c4_en``.

    Returns
    -------
    SourceTable
        One row per logged step; ``run`` = file stem; ``final`` True on each run's last row
        (by step). Rows without the metric are dropped and listed in ``exclusions``.

    Raises
    ------
    LadderError
        Missing or unparsable files, or a metric/column not in the files (the message lists
        the loss-like columns found).
    """
    files = resolve_paths(path, pattern="*.csv")
    frames = []
    for f in files:
        frame = read_file(f, "csv")
        frame.insert(0, "run", f.stem)
        frames.append(frame)
    # A run file with a header and no rows adds no rows; leaving it out of the concat keeps
    # pandas (2.x) from warning that empty frames will stop setting the dtypes.
    rows = [f for f in frames if len(f)] or frames[:1]
    frame = pd.concat(rows, ignore_index=True, sort=False)

    columns = dict(columns or {})
    if metric is not None:
        # An eval-set name ("pile") stands for its cross-entropy column.
        use_set = metric not in frame.columns and eval_column(metric) in frame.columns
        columns["loss"] = eval_column(metric) if use_set else metric
    columns.setdefault("loss", eval_column(DEFAULT_EVAL_SET))
    frame, renamed, loss_source = canonicalize(frame, columns=columns, scale=scale,
                                               defaults=OLMO_COLUMNS, where=str(path))
    table = SourceTable(frame, str(path), renamed=renamed, metric=loss_source)
    drop_missing_metric(table)

    t = table.frame
    order = "step" if "step" in t.columns else "row"
    last = t.groupby("run")[order].transform("max")
    t["final"] = t[order] == last
    return table
