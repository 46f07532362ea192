"""TensorBoard event directories: one run per directory of ``events.out.tfevents.*`` files.

Read with `tbparse <https://github.com/j3soon/tbparse>`_, an optional extra
(``pip install "delphi-scaling[tensorboard]"``)::

    load_ladder("tb_logs/", format="tensorboard", metric="eval/loss")
    delphi predict tb_logs/ --format tensorboard --metric eval/loss --target-flops 1e22

Layout: every directory under the given one that holds event files is a run, named by its
path relative to it (``tb_logs/d512/`` is run ``d512``, ``tb_logs/sweep/d512/`` is
``sweep/d512``; event files directly in ``tb_logs/`` are the run ``tb_logs``). Several event
files in one directory (a restarted job) are one run.

Rows: one per step at which the loss tag was logged (a loss curve per run). The loss tag is
``metric`` (CLI ``--metric``), else the first of :data:`LOSS_TAGS` logged. Scalars written
as ``simple_value`` (PyTorch, tensorboardX, TF1) and as scalar tensors (TF2) are both read.

Where N, D and C come from, for each run, first found wins:

1. a side table: ``runs=`` (a CSV path or DataFrame), or else a ``runs.csv`` at the top of the
   directory, with a ``run`` column (the run names above) and any of ``params``, ``tokens``,
   ``flops``, ``total_steps``, ``batch_size`` (tokens per step), ``peak_lr``,
   ``active_params``, ``status``, ``fraction``, ``final``;
2. hparams (the HParams plugin's session start info) named as in :data:`RUN_NAMES`;
3. scalar tags named as in :data:`STEP_NAMES`: ``tokens``/``flops`` logged as they grow give
   each row its own D or C (the value at the loss's step, else the last one before it);
   a tag logged once (``params`` at step 0) is a constant of the run.

``columns={"params": "model/n_params", ...}`` names a tag or hparam for a canonical column.

D at each row: a per-step tokens tag; else a run total (side table or hparam ``tokens``) with
``total_steps``, as ``tokens x step / total_steps`` (a constant batch), or ``batch_size`` x
step; a run total with neither is an error (the rows' D would be unknown). C likewise, when
given; without C the ladder uses 6·N·D.

Run state: event files have none. A ``total_steps`` (or ``status``/``fraction``/``final`` in
the side table) says whether a run finished (:mod:`delphi.runstate`); without any, every run
counts as finished, and a warning says so.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from ...errors import LadderError
from ..ladder import LOSS_LIKE, Exclusion
from ._common import SourceTable, list_columns, read_file

__all__ = ["read_tensorboard", "read_scalars", "is_event_dir", "LOSS_TAGS", "STEP_NAMES", "RUN_NAMES",
           "EVENT_PREFIX", "INSTALL_HINT"]

#: Event files are named ``events.out.tfevents.<time>.<host>...``.
EVENT_PREFIX = "events.out.tfevents."
#: How to install the optional reader.
INSTALL_HINT = 'pip install "delphi-scaling[tensorboard]"'
#: Loss tags tried in this order when no ``metric`` is given (matched ignoring case).
LOSS_TAGS = ("eval/loss", "val/loss", "validation/loss", "valid/loss", "val_loss", "eval_loss",
             "loss")
#: Per-step scalar tags for canonical columns (matched ignoring case).
STEP_NAMES: dict[str, tuple[str, ...]] = {
    "tokens": ("tokens", "train/tokens", "tokens_seen", "train/tokens_seen", "total_tokens",
               "throughput/total_tokens", "num_tokens", "consumed_tokens"),
    "flops": ("flops", "train/flops", "total_flops", "throughput/total_flops"),
    "lr": ("lr", "learning_rate", "train/lr", "train/learning_rate", "optimizer/lr"),
    "params": ("params", "num_params", "n_params", "parameter_count", "model/num_params",
               "model/params", "num_parameters"),
}
#: Hparam names (or side-table columns) for per-run constants (matched ignoring case).
RUN_NAMES: dict[str, tuple[str, ...]] = {
    "params": STEP_NAMES["params"] + ("total_params", "parameters", "n"),
    "active_params": ("active_params", "num_active_params"),
    "tokens": ("tokens", "total_tokens", "num_tokens", "train_tokens", "d"),
    "flops": ("flops", "total_flops", "c"),
    "total_steps": ("total_steps", "max_steps", "num_train_steps", "train_steps", "num_steps"),
    "batch_size": ("batch_size_tokens", "tokens_per_step"),
    "peak_lr": ("peak_lr", "lr", "learning_rate", "max_lr"),
}
_SIDE_TABLE = "runs.csv"
_MAX_FILES = 10_000
# A walk examines at most this many directory entries (a mistaken "/" must not scan the disk);
# detection without format="tensorboard" looks only this deep (runs, or sweep/run).
_MAX_ENTRIES = 200_000
_DETECT_DEPTH = 2


def _import_tbparse():
    try:
        from tbparse import SummaryReader
    except ImportError:
        raise LadderError(f"reading TensorBoard event files needs the optional tbparse "
                          f"package: {INSTALL_HINT}") from None
    return SummaryReader


def is_event_dir(path: str | Path) -> bool:
    """Whether ``path`` is a directory with TensorBoard event files in it or below it."""
    p = Path(path).expanduser()
    if not p.is_dir():
        return False
    try:
        return any(True for _ in _event_files(p, limit=1, depth=_DETECT_DEPTH))
    except LadderError:          # too large to be a log directory
        return False


def _event_files(root: Path, limit: int = _MAX_FILES, depth: int | None = None):
    """Event files under ``root`` (sorted walk, symlinks not followed), at most ``limit``,
    ``depth`` levels down; a tree of over :data:`_MAX_ENTRIES` entries is refused."""
    found = seen = 0
    base = len(root.parts)
    for folder, dirs, files in os.walk(root):
        seen += len(dirs) + len(files)
        if seen > _MAX_ENTRIES:
            raise LadderError(f"{root}: over {_MAX_ENTRIES:,} files and folders examined "
                              f"without finishing; point at the directory of runs")
        dirs.sort()
        if depth is not None and len(Path(folder).parts) - base >= depth:
            dirs.clear()
        for f in sorted(files):
            if f.startswith(EVENT_PREFIX):
                yield Path(folder) / f
                found += 1
                if found >= limit:
                    return


def _lookup(names: Mapping[str, object], candidates) -> str | None:
    """The key of ``names`` spelled like the first of ``candidates`` (ignoring case)."""
    lowered = {str(k).strip().lower(): k for k in names}
    for c in candidates:
        if c.lower() in lowered:
            return lowered[c.lower()]
    return None


def _side_table(runs, root: Path) -> tuple[pd.DataFrame | None, str | None]:
    if runs is None:
        default = root / _SIDE_TABLE
        if not default.is_file():
            return None, None
        runs = default
    if isinstance(runs, pd.DataFrame):
        frame, label = runs.copy(), "runs= DataFrame"
    else:
        frame, label = read_file(Path(runs), "csv"), str(runs)
        frame = frame.drop(columns=["row"])
    run_col = _lookup(frame.columns, ["run"])
    if run_col is None:
        raise LadderError(f"{label}: a side table of runs needs a 'run' column naming each "
                          f"run directory; columns found: {list_columns(frame.columns)}")
    frame = frame.rename(columns={run_col: "run"})
    frame["run"] = frame["run"].astype(str)
    dup = frame["run"][frame["run"].duplicated()].tolist()
    if dup:
        raise LadderError(f"{label}: run(s) {', '.join(map(repr, dup[:10]))} appear more than "
                          f"once; give one row per run")
    return frame.set_index("run"), label


def read_scalars(path: str | Path) -> pd.DataFrame:
    """Every scalar under a TensorBoard log directory, as a long table ``dir_name`` (the run's
    folder, relative; ``""`` for files at the top), ``step``, ``tag``, ``value``: what
    ``delphi track`` reads from a running run's log (no N or D needed, unlike
    :func:`read_tensorboard`).

    Raises
    ------
    LadderError: no event files under ``path``, tbparse missing, or unreadable files.
    """
    root = Path(path)
    if not is_event_dir(root):
        raise LadderError(f"no {EVENT_PREFIX}* files under {root}")
    summary_reader = _import_tbparse()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            return _scalars(summary_reader(str(root), extra_columns={"dir_name", "wall_time"}))
        except Exception as exc:     # tbparse/tensorboard raise many types on bad files
            raise LadderError(f"cannot read the TensorBoard event files under {root}: "
                              f"{type(exc).__name__}: {exc}") from None


def _scalars(reader) -> pd.DataFrame:
    """Long table ``dir_name, step, tag, value, wall_time`` of every scalar, whether written as
    ``simple_value`` or as a scalar tensor (TF2)."""
    parts = []
    for frame in (reader.scalars, reader.tensors):
        if frame is None or frame.empty:
            continue
        frame = frame.copy()
        values = frame["value"].map(lambda v: float(np.asarray(v).reshape(-1)[0])
                                    if np.asarray(v).size == 1 else np.nan)
        frame["value"] = values.astype(float)
        parts.append(frame[frame["value"].notna()])
    if not parts:
        return pd.DataFrame(columns=["dir_name", "step", "tag", "value", "wall_time"])
    out = pd.concat(parts, ignore_index=True)
    out["dir_name"] = out["dir_name"].fillna("").astype(str)
    return out


def read_tensorboard(path: str | Path, *, metric: str | None = None,
                     columns: Mapping[str, str] | None = None,
                     runs: str | Path | pd.DataFrame | None = None) -> SourceTable:
    """Read a directory of TensorBoard runs into a table of loss curves (see the module
    docstring for the layout and where N, D and C come from).

    Parameters
    ----------
    path:
        A directory holding run directories of ``events.out.tfevents.*`` files.
    metric:
        The loss tag (CLI ``--metric``), e.g. ``"eval/loss"``; default: the first of
        :data:`LOSS_TAGS` logged.
    columns:
        ``{canonical: tag or hparam}`` for N, D, C, lr... under other names.
    runs:
        Side table of per-run values (CSV path or DataFrame with a ``run`` column); default
        ``<path>/runs.csv`` when it exists.

    Returns
    -------
    SourceTable
        One row per (run, step with the loss), columns ``run``, ``step``, ``loss`` and those of
        ``params``, ``tokens``, ``flops``, ``lr``, ``peak_lr``, ``total_steps``... found, plus
        ``row`` (0-based position in this table, sorted by run and step). Runs without the loss
        tag are excluded and listed; a step logged twice (a restart) keeps its last value, and
        the run's exclusions say how many.

    Raises
    ------
    LadderError
        tbparse not installed (says ``pip install "delphi-scaling[tensorboard]"``); not a
        directory or no event files; no loss tag (lists the loss-like tags, suggests
        ``--metric``); runs without N and D, or C (names the runs, the names looked for and
        the tags and hparams found, and suggests a ``runs.csv`` side table); a run total of
        tokens without ``total_steps`` or ``batch_size``.
    """
    summary_reader = _import_tbparse()
    root = Path(path).expanduser()
    if not root.is_dir():
        raise LadderError(f"{root}: a TensorBoard log is a directory of runs (each with "
                          f"{EVENT_PREFIX}* files); this is not a directory")
    if not is_event_dir(root):
        raise LadderError(f"no {EVENT_PREFIX}* files under {root}")
    side, side_label = _side_table(runs, root)
    with warnings.catch_warnings():
        # tbparse's own pandas deprecations are not the user's to act on.
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            reader = summary_reader(str(root), extra_columns={"dir_name", "wall_time"})
            long = _scalars(reader)
            hparams = reader.hparams
        except Exception as exc:     # tbparse/tensorboard raise many types on bad files
            raise LadderError(f"cannot read the TensorBoard event files under {root}: "
                              f"{type(exc).__name__}: {exc}") from None
    root_name = root.resolve().name or str(root)
    long["run"] = long["dir_name"].map(lambda d: d.replace(os.sep, "/") or root_name)
    hp: dict[str, dict[str, object]] = {}
    if hparams is not None and not hparams.empty:
        for d, tag, value in zip(hparams["dir_name"].fillna(""), hparams["tag"],
                                 hparams["value"]):
            hp.setdefault(str(d).replace(os.sep, "/") or root_name, {})[str(tag)] = value
    all_runs = sorted(set(long["run"]) | set(hp))
    tags = sorted(set(long["tag"]))
    given = dict(columns or {})
    if not tags:
        n = sum(1 for _ in _event_files(root))
        raise LadderError(f"{root}: the {n} event file(s) under it hold no scalars; are they "
                          f"empty, still being written, or corrupt?")

    # The loss tag.
    if metric is not None:
        loss_tag = _lookup(tags, [metric])
        if loss_tag is None:
            lossy = [t for t in tags if LOSS_LIKE.search(t)]
            raise LadderError(f"{root}: no run logs the tag {metric!r}; loss-like tags: "
                              f"{list_columns(lossy) or '(none)'}; tags: {list_columns(tags)}")
    else:
        loss_tag = _lookup(tags, LOSS_TAGS)
        if loss_tag is None:
            lossy = [t for t in tags if LOSS_LIKE.search(t)]
            raise LadderError(f"{root}: no loss tag we know (looked for {', '.join(LOSS_TAGS)});"
                              f" loss-like tags: {list_columns(lossy) or '(none)'}; pick one "
                              f"with --metric TAG (metric= in Python)")

    exclusions: list[Exclusion] = []
    notes: list[str] = []
    frames = []
    missing: dict[str, list[str]] = {}
    from_totals: list[str] = []
    for run in all_runs:
        own = long[long["run"] == run].sort_values(["wall_time", "step"], kind="stable")
        loss = own[own["tag"] == loss_tag]
        if loss.empty:
            exclusions.append(Exclusion(run, f"no {loss_tag} values logged; run dropped"))
            continue
        repeats = int(loss["step"].duplicated(keep="last").sum())
        if repeats:
            exclusions.append(Exclusion(run, f"{repeats} step(s) of {loss_tag} logged more than "
                                             f"once (a restart); the last logged value kept"))
        frame = (loss.drop_duplicates("step", keep="last").sort_values("step")
                 [["step", "value"]].rename(columns={"value": "loss"}).reset_index(drop=True))
        frame["step"] = frame["step"].astype(float)
        constants: dict[str, float] = {}
        sources: dict[str, str] = {}
        run_tags = set(own["tag"])
        # Per-step tags first (D and C as they grow), then run constants.
        for canonical in ("tokens", "flops", "lr", "params"):
            tag = given.get(canonical) if given.get(canonical) in run_tags else (
                None if canonical in given else _lookup(run_tags, STEP_NAMES[canonical]))
            if tag is None:
                continue
            series = (own[own["tag"] == tag].drop_duplicates("step", keep="last")
                      .sort_values("step")[["step", "value"]])
            if canonical == "params" or len(series) == 1 and canonical != "lr":
                constants[canonical] = float(series["value"].iloc[-1])
                sources[canonical] = f"tag {tag!r}"
                continue
            series = series.assign(step=series["step"].astype(float))
            merged = pd.merge_asof(frame[["step"]], series, on="step", direction="backward")
            frame[canonical] = merged["value"].to_numpy()
        hp_run = hp.get(run, {})
        for canonical, names in RUN_NAMES.items():
            want = [given[canonical]] if canonical in given else list(names)
            key = _lookup(hp_run, want)
            if key is not None and canonical not in frame.columns:
                try:
                    constants[canonical] = float(hp_run[key])
                    sources[canonical] = f"hparam {key!r}"
                except (TypeError, ValueError):
                    pass
        if side is not None and run in side.index:
            for col, value in side.loc[run].items():
                if pd.notna(value):
                    constants[str(col)] = value
                    sources[str(col)] = side_label
        per_run_tokens = "tokens" not in frame.columns and "tokens" in constants
        for canonical in ("tokens", "flops"):
            if canonical in frame.columns or canonical not in constants:
                continue
            total = float(constants.pop(canonical))
            steps = constants.get("total_steps")
            if steps is not None and float(steps) > 0:
                frame[canonical] = total * frame["step"] / float(steps)
            elif canonical == "tokens" and "batch_size" in constants:
                frame[canonical] = float(constants["batch_size"]) * frame["step"]
            else:
                raise LadderError(
                    f"run {run!r}: {canonical} = {total:g} ({sources[canonical]}) is the run's "
                    f"total, but the {canonical} at each logged step is unknown; give "
                    f"total_steps (or batch_size in tokens per step) in the hparams or the "
                    f"side table ({_SIDE_TABLE}), or log a per-step {canonical} tag")
        if per_run_tokens:
            from_totals.append(run)
        for col, value in constants.items():
            frame[col] = value
        if "flops" not in frame.columns and not {"params", "tokens"} <= set(frame.columns):
            missing[run] = [k for k in ("params", "tokens") if k not in frame.columns]
            continue
        frame.insert(0, "run", run)
        frames.append(frame)
    if missing:
        listed = "; ".join(f"{r!r} (no {', '.join(m)})" for r, m in list(missing.items())[:10])
        hp_names = sorted({k for v in hp.values() for k in v})
        raise LadderError(
            f"{root}: {len(missing)} run(s) without N and D, or C: {listed}. Looked for tags "
            f"params: {', '.join(STEP_NAMES['params'])}; tokens: "
            f"{', '.join(STEP_NAMES['tokens'])}; flops: {', '.join(STEP_NAMES['flops'])}, and "
            f"hparams of the same names; tags found: {list_columns(tags)}; hparams found: "
            f"{list_columns(hp_names) or '(none)'}. Give them in a side table {root / _SIDE_TABLE}"
            f" (columns run, params, tokens or flops, total_steps), or columns= in Python")
    if not frames:
        raise LadderError(f"{root}: no run logs {loss_tag!r}")
    table = pd.concat(frames, ignore_index=True, sort=False)
    if from_totals:
        notes.append(f"{len(from_totals)} run(s) log no tokens per step "
                     f"({', '.join(map(repr, from_totals[:10]))}"
                     f"{' ...' if len(from_totals) > 10 else ''}): D at each step is their "
                     f"total x step / total_steps (or batch_size x step), a constant batch")
    table["row"] = np.arange(len(table))
    stated = [c for c in ("total_steps", "status", "fraction", "final") if c in table.columns]
    if not stated:
        notes.append(f"{root}: TensorBoard logs carry no run state; every run counts as "
                     f"finished (give total_steps or status in {_SIDE_TABLE} or the hparams to "
                     f"have unfinished runs left out of final-loss laws)")
    return SourceTable(table, str(root), exclusions=exclusions, metric=loss_tag, notes=notes)
