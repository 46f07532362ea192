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

import pandas as pd

from ...errors import LadderError
from ..ladder import LOSS_LIKE, Exclusion, columns_found
from ._common import (ColumnDefault, SourceTable, canonicalize, concat_files, drop_missing_metric,
                      list_columns, read_file, resolve_paths)

__all__ = ["read_wandb", "LEVANTER_COLUMNS", "read_wandb_runs", "is_runs_table",
           "RUNS_TABLE_NAMES", "RUNS_TABLE_COLUMNS", "STOPPED_STATES"]

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


# ---------------------------------------------------------------- W&B runs tables (UI export)
#: Columns W&B's runs table ("Export CSV" in the UI) writes before the config and summary keys.
RUNS_TABLE_COLUMNS = ("Name", "State", "Notes", "User", "Tags", "Created", "Runtime", "Sweep")
#: Names looked for, in this order, for each canonical column of a runs table (matched
#: ignoring case): Levanter/Marin's keys first, then common logger and config names.
#: ``(name, factor)``: the factor converts to the canonical unit (GFLOPs -> FLOPs).
RUNS_TABLE_NAMES: dict[str, tuple[tuple[str, float], ...]] = {
    "params": (("parameter_count", 1.0), ("num_params", 1.0), ("n_params", 1.0),
               ("params", 1.0), ("num_parameters", 1.0), ("model/num_params", 1.0),
               ("model.num_params", 1.0), ("total_params", 1.0), ("parameters", 1.0),
               ("N", 1.0)),
    "tokens": (("throughput/total_tokens", 1.0), ("tokens", 1.0), ("total_tokens", 1.0),
               ("tokens_seen", 1.0), ("train/tokens", 1.0), ("train/tokens_seen", 1.0),
               ("num_tokens", 1.0), ("consumed_tokens", 1.0), ("D", 1.0)),
    "flops": (("throughput/total_gflops", 1e9), ("flops", 1.0), ("total_flops", 1.0),
              ("throughput/total_flops", 1.0), ("train/flops", 1.0), ("C", 1.0)),
    "loss": (("eval/paloma/macro_loss", 1.0), ("eval/loss", 1.0), ("val/loss", 1.0),
             ("val_loss", 1.0), ("eval_loss", 1.0), ("validation/loss", 1.0),
             ("valid/loss", 1.0), ("loss", 1.0)),
    # Levanter's config key holds the peak LR; a summary "lr" is the last (decayed) one.
    "peak_lr": (("optimizer.learning_rate", 1.0), ("peak_lr", 1.0)),
    "step": (("_step", 1.0),),
}
#: States of runs that stopped for good: excluded while reading, the state as the reason.
STOPPED_STATES = frozenset({"crashed", "failed", "killed"})


def _find(columns, name: str) -> str | None:
    """The column spelled ``name`` ignoring case and surrounding spaces, else ``None``."""
    want = name.strip().lower()
    same = [c for c in columns if isinstance(c, str) and c.strip().lower() == want]
    return same[0] if same else None


def is_runs_table(columns) -> bool:
    """Whether a header is a W&B runs-table export: a ``Name`` column and no ``run`` column
    (a tidy table is read as one), and either

    * a ``State`` column and a recognisable N, D, C or loss column (:data:`RUNS_TABLE_NAMES`)
      or two more of W&B's own columns (``Created``, ``Runtime``...), so that a runs table
      whose metrics have other names is still recognised and gets an error naming what was
      looked for; or
    * no ``State`` (an export trimmed to its metrics, as Marin's ``isoflop-*.csv``), but a
      recognisable loss and C, or N and D (every run then counts as finished)."""
    cols = [c for c in columns if isinstance(c, str)]
    if _find(cols, "run") or not _find(cols, "Name"):
        return False

    def has(k):
        return any(_find(cols, n) for n, _ in RUNS_TABLE_NAMES[k])

    if not _find(cols, "State"):
        # An export trimmed to its metrics (Marin's isoflop-*.csv): all of run, loss and C or N+D.
        return has("loss") and (has("flops") or (has("params") and has("tokens")))
    own = sum(_find(cols, n) is not None for n in RUNS_TABLE_COLUMNS[2:])
    return any(has(k) for k in ("params", "tokens", "flops", "loss")) or own >= 2


def _looked_for(canonical: str) -> str:
    return ", ".join(n for n, _ in RUNS_TABLE_NAMES[canonical])


def read_wandb_runs(path: str | Path, *, metric: str | None = None,
                    columns: Mapping[str, str] | None = None) -> SourceTable:
    """Read a W&B runs table exported from the UI ("Export CSV"): one row per run, columns
    ``Name``, ``State``, ``Notes``, ``User``, ``Tags``, ``Created``, ``Runtime``, ``Sweep``,
    then config keys (``optimizer.learning_rate``...) and summary metrics
    (``parameter_count``, ``throughput/total_tokens``, ``eval/paloma/macro_loss``...). No
    manifest is needed: :func:`delphi.load_ladder` reads such a file when its header passes
    :func:`is_runs_table`.

    Columns: ``Name`` is the run id; N, D, C and the loss are the first of
    :data:`RUNS_TABLE_NAMES` the table has (``throughput/total_gflops`` is GFLOPs, x 1e9);
    ``metric`` (CLI ``--metric``) names the loss column; ``columns`` (``{canonical: column}``)
    overrides any of them. Every other column is kept.

    Run state (``State``, read by :mod:`delphi.runstate`): ``finished`` runs are used;
    ``crashed``, ``failed`` and ``killed`` runs are excluded here, each with its state as the
    reason (their summary is wherever they stopped, often without the metric); ``running``
    (and ``preempted``...) runs are kept and marked unfinished, so final-loss laws leave them
    out, naming them, and checkpoint laws use their last loss. A run without the loss value is
    excluded with its state. A table without ``State`` (an export trimmed to its metrics)
    has every run count as finished. A row equal to an earlier one in every column (overlapping
    exports read together) is excluded as a copy; runs sharing a ``Name`` otherwise (a rerun
    under the same name) get ``#2``, ``#3``... in file order, with a note naming the rows, and
    are fitted as separate runs, each screened on its own by :func:`delphi.fit`.

    Returns
    -------
    SourceTable
        One row per kept run; ``exclusions`` lists each excluded run with its reason.

    Raises
    ------
    LadderError
        The file cannot be read (see :func:`~delphi.readers._common.read_file`); no loss
        column (lists the loss-like columns, suggests ``--metric``); no column for C nor for
        both N and D (names the columns looked for and the ones the file has, and suggests
        ``--metric`` or a manifest with ``reader = "wandb"`` and ``[columns]``).
    """
    files = resolve_paths(path, pattern="*.csv")
    frame = concat_files([read_file(f, "csv", ["Name"]) for f in files], files)
    cols = list(frame.columns)
    where = str(path)
    mapping: dict[str, str] = {}
    factors: dict[str, float] = {}
    given = dict(columns or {})
    if metric is not None:
        given["loss"] = metric
    for canonical, names in RUNS_TABLE_NAMES.items():
        if canonical in given:
            continue
        for name, factor in names:
            found = _find(cols, name)
            if found is not None:
                mapping[canonical], factors[canonical] = found, factor
                break
    mapping.update(given)
    if "loss" not in mapping:
        lossy = [c for c in cols if isinstance(c, str) and LOSS_LIKE.search(c)]
        have = f"its loss-like columns: {list_columns(lossy)}" if lossy else columns_found(cols)
        raise LadderError(f"{where}: a W&B runs table without a loss column we know (looked "
                          f"for {_looked_for('loss')}); {have}; pick one with --metric "
                          f"COLUMN (metric= in Python)")
    if "flops" not in mapping and not {"params", "tokens"} <= set(mapping):
        missing = [k for k in ("params", "tokens") if k not in mapping]
        looked = "; ".join(f"{k}: {_looked_for(k)}" for k in missing + ["flops"])
        raise LadderError(
            f"{where}: a W&B runs table without columns for C (flops) or for both N (params) "
            f"and D (tokens); looked for {looked} (ignoring case); {columns_found(cols)}. "
            f"--metric picks only the loss: for other names write a manifest with [source] "
            f'reader = "wandb" and [columns] params = "...", tokens = "..." (or flops = "...")')
    mapping["run"] = _find(cols, "Name")
    frame, renamed, loss_source = canonicalize(
        frame, columns=mapping, where=where,
        scale={k: f for k, f in factors.items() if f != 1.0})     # defaults only
    table = SourceTable(frame, where, renamed=renamed, metric=loss_source)
    state_col = _find(cols, "State")
    if state_col is None:        # a trimmed export: no run state, every run counts as finished
        table.frame = table.frame.assign(**{"State": ""})
        state_col = "State"
    _runs_table_states(table, state_col)
    return table


def _runs_table_states(table: SourceTable, state_col: str) -> None:
    """Exclude stopped runs and runs without the metric (each with its state), then give
    repeated names a ``#k`` suffix."""
    t = table.frame
    state = t[state_col].astype("string").str.strip()
    norm = state.str.lower().fillna("")
    metric = table.metric or "loss"
    stopped = norm.isin(STOPPED_STATES).to_numpy()
    no_loss = t["loss"].isna().to_numpy() & ~stopped
    for pos in range(len(t)):
        if stopped[pos] or no_loss[pos]:
            run, row = t["run"].iat[pos], int(t["row"].iat[pos])
            said = f"{state_col} {state.iat[pos]!r}" if norm.iat[pos] else f"no {state_col}"
            reason = (f"{said} in the W&B runs table (row {row}): the run did not finish, its "
                      f"summary is not a final loss" if stopped[pos] else
                      f"no {metric} value ({said}, row {row})")
            table.exclusions.append(Exclusion(str(run), reason))
    t = t[~(stopped | no_loss)].reset_index(drop=True)
    # A row equal to an earlier one in every value (two overlapping exports read together) is
    # one run listed twice, not a rerun: fitting both would count it twice.
    cells = t.drop(columns=[c for c in ("row", "source_file") if c in t.columns]).astype(str)
    copy = cells.duplicated().to_numpy()
    if copy.any():
        # Equal rows hash equal (missing cells included, unlike ==): the first row of each.
        digest = pd.util.hash_pandas_object(cells, index=False).tolist()
        first: dict[int, int] = {}
        for pos, h in enumerate(digest):
            first.setdefault(h, pos)
        for pos in copy.nonzero()[0]:
            original = int(t["row"].iat[first[digest[pos]]])
            table.exclusions.append(Exclusion(str(t["run"].iat[pos]),
                                              f"row {int(t['row'].iat[pos])} repeats row "
                                              f"{original} exactly; the copy dropped"))
        t = t[~copy].reset_index(drop=True)
    names = t["run"].astype("string")
    counts = names.groupby(names).cumcount().to_numpy() + 1
    repeated = names.duplicated(keep=False).to_numpy()
    if repeated.any():
        t["run"] = [f"{n} #{k}" if r and k > 1 else n
                    for n, k, r in zip(names.tolist(), counts.tolist(), repeated.tolist())]
        dup = sorted(set(names[repeated].tolist()))
        rows = t["row"].groupby(names).agg(lambda r: ", ".join(str(int(v)) for v in r))
        named = ", ".join(f"{n!r} (rows {rows[n]})" for n in dup[:10])
        more = f" and {len(dup) - 10} more" if len(dup) > 10 else ""
        # Each is then screened on its own: a rerun far off (another unit or setup) is
        # excluded as such, and is never the yardstick that excludes the other runs.
        table.notes.append(f"{len(dup)} run name(s) appear more than once in the W&B runs "
                           f"table ({named}{more}); later rows are named '<name> #2', '#3'... "
                           f"in file order and fitted as separate runs")
    table.frame = t
