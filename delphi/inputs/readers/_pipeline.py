"""Turn a manifest into a Ladder: read, then run ids, constants, derived columns, clipping,
filters, duplicates and curation, in that order. Every dropped row becomes an Exclusion."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ...errors import LadderError, ManifestError
from ..ladder import FLOPS_PER_PARAM_TOKEN, Exclusion, Ladder, columns_found
from ._common import SourceTable, plain
from .checks import check_tables
from .manifest import (MAX_RUN_ID_CHARS, FilterSpec, Manifest, parse_run_id_template,
                       quote_template)
from .marin import read_marin
from .olmo import read_olmo
from .tabular import read_csv, read_jsonl, read_parquet
from .wandb import read_wandb

__all__ = ["build_ladder", "READER_FUNCTIONS", "format_run_ids", "check_tables"]


READER_FUNCTIONS: dict[str, Callable[..., SourceTable]] = {
    "csv": read_csv, "parquet": read_parquet, "jsonl": read_jsonl,
    "wandb": read_wandb, "marin": read_marin, "olmo": read_olmo,
}
# Column names quoted in messages: at most this many, each cut at this many characters.
_MAX_NAMES, _MAX_NAME_CHARS = 30, 64


def _names(columns) -> str:
    """Column names for a message: the first few, each cut short, non-printing characters
    escaped (the names come from a file that parsed as a table, but may be long)."""
    cols = [str(c) for c in columns]
    shown = []
    for c in cols[:_MAX_NAMES]:
        c = c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
        shown.append(c if len(c) <= _MAX_NAME_CHARS else c[:_MAX_NAME_CHARS - 3] + "...")
    more = f" ... ({len(cols) - _MAX_NAMES} more)" if len(cols) > _MAX_NAMES else ""
    return ", ".join(shown) + more


def _column(table: SourceTable, name: str, where: str, what: str) -> str:
    try:
        return table.column(name)
    except KeyError:
        raise ManifestError(f"{where}: {what} names column {name!r}, which the source does not "
                            f"have; {columns_found(table.frame.columns)}") from None


def format_run_ids(table: SourceTable, template: str, where: str = "manifest") -> pd.Series:
    """Run ids from a template such as ``"{model}-lr{peak_lr:g}"``: each ``{column[:spec]}`` is
    replaced by the row's value formatted with ``format(value, spec)``. No other syntax; the
    template is checked (:func:`~delphi.readers.manifest.parse_run_id_template`: format specs,
    widths and precisions bounded) and every column looked up before any id is built.

    Raises
    ------
    ManifestError
        Unknown column, stray brace, a bad or oversized format spec, a spec that does not
        fit the values, or an id over :data:`~delphi.readers.manifest.MAX_RUN_ID_CHARS`
        characters (names the row).
    """
    t = table.frame
    try:
        template_parts = parse_run_id_template(template)
    except ValueError as exc:
        raise ManifestError(f"{where}: run_id template {quote_template(template)}: {exc}") from None
    parts = [p if isinstance(p, str) else (_column(table, p[0], where, "run_id"), p[1])
             for p in template_parts]
    fields = [p for p in parts if isinstance(p, tuple)]
    out = []
    for i, values in enumerate(zip(*(t[col].tolist() for col, _ in fields))):
        it = iter(values)
        try:
            out.append("".join(p if isinstance(p, str) else format(next(it), p[1]) for p in parts))
        except (ValueError, TypeError) as exc:
            raise ManifestError(f"{where}: run_id template {quote_template(template)}: {exc}") from None
        if len(out[-1]) > MAX_RUN_ID_CHARS:     # a long text cell: stop before building more
            raise ManifestError(f"{where}: run_id template {quote_template(template)} builds an id of "
                                f"{len(out[-1]):,} characters for row {t['row'].iat[i]}; the "
                                f"limit is {MAX_RUN_ID_CHARS}")
    return pd.Series(out, index=t.index, dtype=object)


def _check_id_collisions(table: SourceTable, ids: pd.Series, template: str, where: str) -> None:
    """Say when a run-id template gives several rows one id and the table has no ``step`` (or
    ``tokens``) to order them as checkpoints: all rows one id is an error (a one-run ladder),
    some rows sharing one a note on the ladder, naming the rows and the id.

    Raises
    ------
    ManifestError
        Every one of several rows maps to the same id.
    """
    t = table.frame
    if "step" in t.columns or "tokens" in t.columns or len(ids) < 2:
        return
    shared = ids[ids.duplicated(keep=False)]
    if shared.empty:
        return
    first = shared.iloc[0]
    rows = t.loc[shared.index[shared == first], "row"].tolist()
    listed = ", ".join(map(str, rows[:10])) + (f" and {len(rows) - 10:,} more" if len(rows) > 10
                                                 else "")
    quoted = first if len(first) <= 64 else first[:61] + "..."
    said = (f"{where}: run_id template {quote_template(template)} maps rows {listed} to the "
            f"same id {quoted!r}, and the table has no step column")
    if len(shared) == len(ids):
        raise ManifestError(f"{said}: every row is one run; make the template tell the runs "
                            f"apart (e.g. add {{row}} or a model column)")
    n = shared.nunique()
    table.notes.append(f"{said}, so they are read as checkpoints of one run"
                       + (f" ({n - 1} more ids are shared)" if n > 1 else ""))


def _apply_runs(table: SourceTable, manifest: Manifest) -> None:
    t = table.frame
    where = manifest.where()
    runs = t["run"].astype(str)
    for spec in manifest.runs:
        mask = runs.str.fullmatch(spec.match)
        if not mask.any():
            known = ", ".join(sorted(runs.unique())[:12])
            raise ManifestError(f"{where}: [[runs]] match {spec.match!r} matches no run; runs: {known}")
        for col, value in spec.values().items():
            if col in t.columns:
                have = t.loc[mask, col].dropna()
                if len(have) and not (have == value).all():
                    raise ManifestError(
                        f"{where}: [[runs]] match {spec.match!r} sets {col} = {value!r}, but the "
                        f"source already has {plain(have.iloc[0])} (run {runs[have.index[0]]!r})")
            else:
                t[col] = pd.Series(np.nan, index=t.index,
                                   dtype=object if col in ("final", "status") else float)
            if col in ("final", "status"):
                t[col] = t[col].astype(object)
            t.loc[mask, col] = value


def _derive(table: SourceTable, manifest: Manifest) -> None:
    if not manifest.derive.tokens_from_flops:
        return
    t = table.frame
    if "tokens" in t.columns:
        raise ManifestError(f"{manifest.where()}: [derive] tokens_from_flops, but the source already "
                            "has a tokens column")
    missing = [c for c in ("flops", "params") if c not in t.columns]
    if missing:
        raise ManifestError(f"{manifest.where()}: [derive] tokens_from_flops needs column(s) "
                            f"{', '.join(missing)}")
    t["tokens"] = t["flops"] / (FLOPS_PER_PARAM_TOKEN * t["params"])


def _clip(table: SourceTable, manifest: Manifest) -> None:
    for col, bounds in manifest.clip.model_dump(exclude_none=True).items():
        t = table.frame
        if col not in t.columns:
            raise ManifestError(f"{manifest.where()}: [clip] names column {col!r}, which is absent")
        lo, hi = bounds
        values = pd.to_numeric(t[col], errors="coerce")
        outside = (values < lo) | (values > hi)
        if outside.any():
            table.notes.append(
                f"ladder {manifest.name!r}: clipped {col} of {int(outside.sum())} row(s) into "
                f"[{lo:g}, {hi:g}] (values from {values[outside].min():g} to "
                f"{values[outside].max():g})")
            t[col] = values.clip(lo, hi)


def _condition(series: pd.Series, op: str, value) -> pd.Series:
    def same(v) -> pd.Series:
        if isinstance(v, bool):
            return series.astype(str).str.lower() == str(v).lower()
        if isinstance(v, (int, float)):
            return pd.to_numeric(series, errors="coerce") == v
        return series.astype(str) == v

    if op == "equals":
        return same(value)
    if op == "not_equals":
        return ~same(value) & series.notna()
    if op == "in":
        return pd.concat([same(v) for v in value], axis=1).any(axis=1) if value else series != series
    if op == "not_in":
        hit = pd.concat([same(v) for v in value], axis=1).any(axis=1) if value else series != series
        return ~hit & series.notna()
    text = series.astype(str)
    if op == "contains":
        return text.str.contains(value, regex=False) & series.notna()
    if op == "not_contains":
        return ~text.str.contains(value, regex=False) & series.notna()
    numbers = pd.to_numeric(series, errors="coerce")
    return numbers >= value if op == "min" else numbers <= value


def _filter_label(spec: FilterSpec) -> str:
    symbols = {"equals": "==", "not_equals": "!=", "in": "in", "not_in": "not in",
               "contains": "contains", "not_contains": "does not contain", "min": ">=", "max": "<="}
    return " and ".join(f"{spec.column} {symbols[op]} {value!r}" for op, value in spec.conditions())


def _apply_filters(table: SourceTable, manifest: Manifest) -> None:
    for spec in manifest.filters:
        t = table.frame
        col = _column(table, spec.column, manifest.where(), "a filter")
        keep = pd.Series(True, index=t.index)
        for op, value in spec.conditions():
            keep &= _condition(t[col], op, value).fillna(False).astype(bool)
        dropped = t[~keep]
        if dropped.empty:
            continue
        label = f"filter {_filter_label(spec)}"
        suffix = f": {spec.reason}" if spec.reason else ""
        if spec.per_run and "run" in t.columns:
            runs = dropped["run"].astype(str)
            totals = t["run"].astype(str).value_counts()
            for run, n in runs.value_counts(sort=False).sort_index().items():
                scope = "run dropped" if n == totals[run] else f"dropped {n} of its {totals[run]} rows"
                table.exclusions.append(Exclusion(run, f"{label}: {scope}{suffix}"))
        else:
            table.exclusions.append(Exclusion("*", f"{label} dropped {len(dropped):,} of "
                                                   f"{len(t):,} rows{suffix}"))
        table.frame = t[keep].reset_index(drop=True)


def _step_key(t: pd.DataFrame) -> list[str]:
    # The Ladder's own duplicate key: (run, step), else (run, tokens), else (run, flops).
    return ["run", next(c for c in ("step", "tokens", "flops", "row") if c in t.columns)]


def _drop_duplicates(table: SourceTable) -> None:
    t = table.frame
    if "run" not in t.columns:
        return
    # Compare cells as text: metadata may hold unhashable values (dicts from JSON).
    # One column at a time (bounded memory): row groups numbered by first appearance.
    group = np.zeros(len(t), dtype=np.int64)
    for col in (c for c in t.columns if c not in ("row", "source_file")):
        codes, _ = pd.factorize(t[col].astype(str), use_na_sentinel=False)
        group, _ = pd.factorize(group * (int(codes.max(initial=0)) + 1) + codes)
    group = pd.Series(group, index=t.index)
    first_row = t.groupby(group)["row"].transform("first")
    exact = group.duplicated()
    for idx in t.index[exact]:
        table.exclusions.append(Exclusion(str(t.at[idx, "run"]),
                                          f"row {t.at[idx, 'row']} repeats row {first_row[idx]} "
                                          "exactly; the copy dropped"))
    t = t[~exact]
    key = _step_key(t)
    clash = t.duplicated(subset=key, keep=False)
    runs = t["run"].astype(str)
    if clash.any():
        sizes = runs.value_counts()
        clashing = t[clash].assign(_run=runs[clash])
        for run, rows in clashing.groupby("_run", sort=True):    # only runs that clash
            value = rows[key[1]].iloc[0]
            same = rows[rows[key[1]] == value]["row"].tolist()
            table.exclusions.append(Exclusion(
                run, f"ambiguous: the source has {len(same)} different rows for {key[1]} {value:g} "
                     f"(rows {', '.join(map(str, same))}), so the run id names more than one run; "
                     f"all {int(sizes[run])} rows of the run dropped"))
    bad = runs.isin(runs[clash])
    table.frame = t[~bad].reset_index(drop=True)


def _curate(table: SourceTable, manifest: Manifest) -> None:
    spec = manifest.curate
    if spec is None or spec.drop_highest_loss == 0:
        return
    t = table.frame
    if "loss" not in t.columns:
        raise ManifestError(f"{manifest.where()}: [curate] needs a loss column")
    loss = pd.to_numeric(t["loss"], errors="coerce")
    worst = loss.sort_values(ascending=False, kind="mergesort")
    drop = worst.index[:spec.drop_highest_loss]
    for rank, idx in enumerate(drop, 1):
        run = str(t.at[idx, "run"]) if "run" in t.columns else f"row {t.at[idx, 'row']}"
        table.exclusions.append(Exclusion(
            run, f"curation: loss {loss[idx]:.4g} is #{rank} of the {spec.drop_highest_loss} "
                 f"highest (row {t.at[idx, 'row']}): {spec.reason}"))
    table.frame = t.drop(index=drop).reset_index(drop=True)


def build_ladder(manifest: Manifest, *, metric: str | None = None,
                 source: str | None = None, unit: str | None = None,
                 notes: Sequence[str] = (), drop_invalid: bool = False,
                 allow_outside_paths: bool = False) -> Ladder:
    """Read the manifest's data and build its :class:`Ladder`.

    The manifest is untrusted input: its ``[source] path`` is checked first
    (:meth:`Manifest.source_files`: inside the manifest's folder or the data directory,
    bounded globs), then every file it names is checked to be a table of the reader's
    format (:func:`check_tables`), and only then read.

    Parameters
    ----------
    metric:
        Source column to use as ``loss`` instead of the manifest's (CLI ``--metric``).
    source:
        How the ladder records its origin (default: the manifest file).
    unit:
        Unit of the loss (default: the manifest's ``unit``).
    notes:
        Facts to record as ladder warnings (e.g. the unit implied by ``metric``'s name).
    drop_invalid:
        Drop invalid rows (each listed in the ladder's exclusions) instead of raising; see
        :class:`~delphi.ladder.Ladder`.
    allow_outside_paths:
        Let ``[source] path`` read outside the manifest's folder and the data directory (CLI
        ``--allow-outside-paths``); only for manifests you trust.

    Raises
    ------
    DataDirError
        ``root = "data"`` and the published-ladders folder is missing.
    ManifestError
        The manifest names columns or runs the data does not have; its path leads outside the
        allowed folders; its glob is unbounded (see :meth:`Manifest.source_files`).
    LadderError
        Missing files, a file that is not a table of the reader's format, or bad values (see
        :class:`Ladder`).
    """
    where = manifest.where()
    checked = manifest.source_files(allow_outside_paths=allow_outside_paths)
    check_tables(checked.files, manifest.source.reader,
                 f"{where}: [source] path {manifest.source.path!r}")
    path = checked.path
    columns = manifest.columns.model_dump(exclude_none=True)
    scale = manifest.scale.model_dump(exclude_none=True)
    table = READER_FUNCTIONS[manifest.source.reader](path, columns=columns, scale=scale, metric=metric)

    if manifest.source.run_id:
        if manifest.columns.run is not None:
            raise ManifestError(f"{where}: give either [columns] run or [source] run_id, not both")
        ids = format_run_ids(table, manifest.source.run_id, where)
        _check_id_collisions(table, ids, manifest.source.run_id, where)
        # A reader's own run column (file or folder name) stays available as metadata.
        table.frame = table.frame.rename(columns={"run": "source:run"})
        table.frame["run"] = ids
    if manifest.runs:
        if "run" not in table.frame.columns:
            raise ManifestError(f"{where}: [[runs]] needs run ids: map [columns] run or set "
                                "[source] run_id")
        _apply_runs(table, manifest)
    _derive(table, manifest)
    _clip(table, manifest)
    _apply_filters(table, manifest)
    if manifest.source.duplicates == "drop":
        _drop_duplicates(table)
    _curate(table, manifest)
    if table.frame.empty:
        raise LadderError(f"{where}: no rows left after the manifest's filters")
    table.notes.extend(notes)
    ladder = table.to_ladder(name=manifest.name, metric=metric or manifest.metric,
                             unit=unit or manifest.unit, source=source or where,
                             schedule=manifest.schedule, drop_invalid=drop_invalid)
    # what `delphi predict NAME` applies; delphi.predict notes it when not given
    spec = manifest.predict
    ladder.predict_defaults = {k: v for k, v in (("law", spec.law),
                                                 ("fixed", dict(spec.fixed)))
                               if v}
    return ladder
