"""From loss to benchmark accuracy: two-step task scaling laws with intervals.

The method of Bhagia et al. 2024, "Establishing Task Scaling Laws via Compute-Efficient Model
Ladders" (arXiv 2412.04403), on a ladder whose runs logged a task's loss and accuracy at
every checkpoint (the OLMo ladder's ``eval/downstream_bpb/...`` and ``eval/downstream/...``
columns):

1. **Task loss** from N and D (paper Eq. 1): the ``chinchilla`` law fitted to each finished
   run's final task loss (bits per byte of the correct answer, ranked classification,
   5-shot), smoothed as in the reference code by a trailing mean of the last 5 checkpoints
   (``moving_avg=5``).
2. **Accuracy** from task loss (paper Eq. 2): the sigmoid :func:`delphi.laws.sigmoid_law`
   (accuracy falls from at most 1 to the task's chance level as the loss grows), fitted to
   *every checkpoint* of every fitted run after warm-up: checkpoints before the LR reaches its
   peak and the first 10% of each run's checkpoints are left out (the reference code's
   ``skip_perc=0.1``), and the checkpoints' task loss is smoothed the same way. Least
   squares on log accuracy (Huber delta 1: every residual in the quadratic zone; the
   reference code uses ``curve_fit`` least squares). The accuracy at high loss ``C`` is
   fixed at the task's chance level and the accuracy at low loss ``U`` at 1 by default:
   the reference code bounds ``b`` (= U) by 1 and adds a helper point (loss 0, accuracy 1),
   which on the OLMo ladder puts U at its bound 1 for every one of the eight tasks (fitted
   freely within [chance, 1], U ends at 1 too); fixing it keeps the bootstrap's warm-started
   refits off an active bound (about 300x faster). ``upper="fit"`` frees it,
   ``helper_point=True`` adds the helper point.

:func:`predict_accuracy` chains them. Its interval resamples whole runs (one resample drives
both fits, so their errors stay correlated), refits both steps from the full-data optimum
(warm-started, :func:`delphi.fitting.refit.refine_batch`), and draws for each resample a new
run's task loss (the step-1 run noise, :func:`delphi.uncertainty.run_noise`) and a
checkpoint's accuracy noise: the task's *checkpoint-to-checkpoint noise*, the paper's
variance diagnostic (Sec. 5.1), estimated as the standard deviation of accuracy around a straight
line over the last 10% of each run's checkpoints (at least 4), pooled over runs
(:func:`checkpoint_noise`). A task whose noise alone gives
a 90% half-width above 2 points (1.645 sd > 0.02, i.e. sd > 1.22 points) is warned about:
no prediction of it can be trusted to 2 points. Every 25th bootstrap draw of each step (from
a seeded offset) is also fitted by the global search, the better optimum kept (the guard of
:func:`delphi.uncertainty.bootstrap`; ``check_every``).

**Extrapolation calibration** (``calibrate=True``, the default). The bootstrap cannot see
that the laws are slightly wrong and that the error grows with the extrapolation: on the
OLMo ladder (fit 190M-760M, predict the 1B and 3B finals) it covers 67.5% of the finals at
90%. As ``delphi predict`` does for losses (:mod:`delphi.calibration`), the interval is
widened by the ladder's own out-of-sample errors: leave-future-out cuts *inside the fitted
runs* (:func:`_lfo_errors`: runs ordered by N D; both steps refitted on the runs at
or below each cut, which predict the final accuracy of those above it), the errors in
accuracy against r = max(N / N_max, N D / (N D)_max) of the runs fitted, sigma(r) =
sigma_0 + k log10 r fitted by median regression of |error| / Phi^-1(0.75) (Williams &
Goodman 1971; Koenker & Bassett 1978), times the Student-t factor t_{folds-1} / z, added in
quadrature to the bootstrap's draws. Only the fitted runs enter, so a held-out test stays
out of its own calibration (nested). With fewer than 3 cuts the interval is the bootstrap's
and a note says so. Measured (fit 190M-760M, 80 finals of the 1B and 3B runs, 8 tasks, 50
draws): coverage 100% (67.5% before) with a mean width of 23.7 points (8.3 before): the
early cuts (7 runs of two sizes) extrapolate badly (inside-the-ladder MAE 4.0 points, 4.4-5.3
at the first cuts, 2.0 at the last), so sigma(r) grows 2.4-23 points per decade of r and the
intervals over-cover. ``calibrate=False`` gives the bootstrap interval alone.

**Design choices checked inside the fitted runs** (leave-future-out over 190M-760M, the 8
tasks, 288 predictions; never on the 1B/3B runs): mean |error| 4.04 points with the paper's
choices (median 2.47, mean error -0.92), 3.91 with the helper point (median 2.36), 3.53 with
U fitted (median 2.96, mean error -3.44: it lowers the curve), 3.59 with no smoothing of the
task loss (median 2.43). The differences come mostly from OpenBookQA (9.8 points with the
default, 4.0 with U fitted, 7.2 unsmoothed) and no choice is better on the median and the
bias together, so the paper's choices stay the default. Step 1 on the final checkpoint only
(the smoothed final, as the reference code's ``get_step1_data_by_name`` with
``moving_avg=5``) is the paper's choice too: its intermediate checkpoints are mid-schedule.
The reference code weights MMLU's four subject groups (0.215, 0.335, 0.219, 0.231) where the
bundled manifest averages them unweighted.

Baselines (:func:`compare_accuracy`): the one-step law (accuracy directly from N and D,
:func:`delphi.laws.onestep_law`, fitted to final accuracies) and step 2 on the ladder's
own loss (the C4 loss on the OLMo ladder) instead of the task loss.

Accuracies are fractions in [0, 1] in the API and JSON, and points (percent) in reports.

Tasks manifest
--------------
Tasks are named in a TOML file; the bundled ``ladders/tasks/olmo-ladder-tasks.toml`` names
the paper's eight (it lives in a sub-folder so that ``delphi ladders`` does not read it as a
ladder). The format::

    name = "my-tasks"
    description = "..."
    ladder = "olmo-ladder"          # the ladder the columns belong to (informational)

    [tasks.hellaswag]
    bpb = "eval/downstream_bpb/hellaswag_val_rc_5shot_bpb"        # task loss column(s)
    accuracy = "eval/downstream/hellaswag_val_rc_5shot_len_norm"  # accuracy column(s)
    chance = 0.25                                                 # fraction
    split = "val"                                                 # optional
    description = "..."                                           # optional

``bpb`` and ``accuracy`` may be lists of columns of the same length: the task's value at a
checkpoint is then their unweighted mean (MMLU: the mean of its four subject groups, as in
the reference code's ``mmlu_avg_test_5shot``). Accuracy columns must hold fractions.
"""

from __future__ import annotations

import math
import tomllib
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from .errors import DelphiError, FitError, LadderError, ManifestError, TargetError
from .fitting import Fit, fit_arrays
from .fitting.engine import prepare, safe_start
from .fitting.refit import refine_batch, refine_one, weighted_objective
from .uncertainty import _design_failure
from .laws import get_law, onestep_law, sigmoid_law
from .readers.paths import BUNDLED_DIR

__all__ = ["Task", "load_tasks", "task_table", "AccuracyForecast", "predict_accuracy",
           "AccuracyComparison", "compare_accuracy", "checkpoint_noise",
           "TASKS_DIR",
           "DEFAULT_TASKS", "DEFAULT_LEVEL", "NOISE_WARN_POINTS"]

#: Folder of bundled task manifests, and the default one.
TASKS_DIR = BUNDLED_DIR / "tasks"
DEFAULT_TASKS = "olmo-ladder-tasks"
DEFAULT_LEVEL = 0.9
#: Trailing mean over this many checkpoints of the task loss (reference code ``moving_avg``).
SMOOTH = 5
#: Share of each run's first checkpoints left out of step 2 (reference code ``skip_perc``).
SKIP_FRACTION = 0.1
#: Share of each run's last checkpoints over which the checkpoint noise is measured.
NOISE_FRACTION = 0.1
#: Warn when the checkpoint noise's 90% half-width exceeds this many points.
NOISE_WARN_POINTS = 2.0
#: Huber delta (log residuals) of step 2: 1 keeps every residual quadratic (least squares).
STEP2_DELTA = 1.0
_Z90 = 1.6448536269514722
_NOISE_DRAWS = 20   # new-run noise draws per bootstrap draw
_BATCH_ITER = 1000  # batched BFGS iterations before a draw goes to L-BFGS-B
_FALLBACK_ITER = 50  # L-BFGS-B iterations for a draw the batched refit leaves unfinished
_CHECK_EVERY = 25   # guard: every 25th bootstrap draw is also fitted by the global search


# ---------------------------------------------------------------------------- tasks
@dataclass(frozen=True)
class Task:
    """One benchmark task of a ladder.

    Attributes
    ----------
    name: the task's name (``hellaswag``).
    bpb: task-loss column(s) (bits per byte of the correct answer); several are averaged.
    accuracy: accuracy column(s), fractions; several are averaged (same count as ``bpb``).
    chance: the chance level of the accuracy, a fraction in [0, 1).
    split: the evaluation split (``val``/``test``), informational.
    description: free text.
    """

    name: str
    bpb: tuple[str, ...]
    accuracy: tuple[str, ...]
    chance: float
    split: str = ""
    description: str = ""

    def to_dict(self) -> dict:
        return {"name": self.name, "bpb": list(self.bpb), "accuracy": list(self.accuracy),
                "chance": self.chance, "split": self.split, "description": self.description}


def _as_columns(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ManifestError(f"{where} must be a column name or a non-empty list of them, "
                        f"got {value!r}")


def load_tasks(manifest: str | Path | None = None) -> dict[str, Task]:
    """The tasks of a tasks manifest, by name (see the module docstring for the format).

    Parameters
    ----------
    manifest: a bundled tasks manifest name (``olmo-ladder-tasks``, the default), or a path
        to a ``.toml`` file.

    Raises
    ------
    ManifestError: the file is missing or malformed (the message names the task and key).
    """
    manifest = DEFAULT_TASKS if manifest is None else manifest
    path = Path(manifest)
    if not path.suffix == ".toml" or not path.exists():
        bundled = TASKS_DIR / f"{manifest}.toml"
        if bundled.exists():
            path = bundled
        elif not path.exists():
            known = sorted(p.stem for p in TASKS_DIR.glob("*.toml"))
            raise ManifestError(f"tasks manifest {str(manifest)!r} not found (bundled: "
                                f"{', '.join(known)})")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from None
    tasks = data.get("tasks")
    if not isinstance(tasks, dict) or not tasks:
        raise ManifestError(f"{path}: needs a [tasks.NAME] table for each task")
    out = {}
    for name, spec in tasks.items():
        where = f"{path.name}: task {name!r}"
        if not isinstance(spec, dict):
            raise ManifestError(f"{where} must be a table")
        unknown = set(spec) - {"bpb", "accuracy", "chance", "split", "description"}
        if unknown:
            raise ManifestError(f"{where}: unknown key(s) {sorted(unknown)}; known: bpb, "
                                f"accuracy, chance, split, description")
        for key in ("bpb", "accuracy", "chance"):
            if key not in spec:
                raise ManifestError(f"{where} needs {key!r}")
        bpb = _as_columns(spec["bpb"], f"{where} bpb")
        acc = _as_columns(spec["accuracy"], f"{where} accuracy")
        if len(bpb) != len(acc):
            raise ManifestError(f"{where}: {len(bpb)} bpb column(s) but {len(acc)} accuracy "
                                f"column(s); they are averaged pairwise")
        chance = spec["chance"]
        if not (isinstance(chance, (int, float)) and 0 <= chance < 1):
            raise ManifestError(f"{where}: chance must be a fraction in [0, 1), got {chance!r}")
        out[str(name)] = Task(str(name), bpb, acc, float(chance), str(spec.get("split", "")),
                              str(spec.get("description", "")))
    return out


def _resolve_task(task: str | Task, tasks_manifest) -> Task:
    if isinstance(task, Task):
        return task
    tasks = load_tasks(tasks_manifest)
    if task not in tasks:
        raise LadderError(f"unknown task {task!r}; known tasks: {', '.join(tasks)} (or 'all')")
    return tasks[task]


def _load(ladder):
    from .ladder import Ladder
    from .readers import load_ladder

    if isinstance(ladder, Ladder):
        return ladder
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # recorded on the ladder (ladder.warnings)
        return load_ladder(ladder)


def task_table(ladder, task: Task, *, smooth: int = SMOOTH) -> pd.DataFrame:
    """Every checkpoint of every run with the task's loss and accuracy.

    Returns
    -------
    DataFrame with ``run, step, params, tokens, flops, lr, peak_lr, loss`` (those the ladder
    has; ``loss`` is the ladder's own metric), ``task_loss_raw`` (mean of the task's bpb
    columns), ``task_loss`` (its trailing mean over ``smooth`` checkpoints within the run),
    ``accuracy`` (mean of the accuracy columns, a fraction) and ``index`` (checkpoint number
    within the run, from 0), sorted by run and step. Rows where a task column is missing are
    dropped.

    Raises
    ------
    LadderError: a task column is not in the ladder (names the task and column), no row has
        the task's values, or an accuracy outside [0, 1].
    """
    t = ladder.table
    for col in task.bpb + task.accuracy:
        if col not in t.columns:
            raise LadderError(f"task {task.name!r}: column {col!r} is not in ladder "
                              f"{ladder.name!r}")
    keep = [c for c in ("run", "step", "params", "tokens", "flops", "lr", "peak_lr", "loss")
            if c in t.columns]
    out = t[keep].copy()
    out["task_loss_raw"] = t[list(task.bpb)].astype(float).mean(axis=1, skipna=False)
    out["accuracy"] = t[list(task.accuracy)].astype(float).mean(axis=1, skipna=False)
    out = out[np.isfinite(out["task_loss_raw"]) & np.isfinite(out["accuracy"])]
    if out.empty:
        raise LadderError(f"task {task.name!r}: no checkpoint of ladder {ladder.name!r} has "
                          f"both {task.bpb[0]!r} and {task.accuracy[0]!r}")
    bad = out[(out["accuracy"] < 0) | (out["accuracy"] > 1) | (out["task_loss_raw"] <= 0)]
    if not bad.empty:
        r = bad.iloc[0]
        raise LadderError(f"task {task.name!r}: run {r['run']!r} has accuracy {r['accuracy']:g} "
                          f"and task loss {r['task_loss_raw']:g}; accuracy must be a fraction "
                          f"in [0, 1] (column {task.accuracy[0]!r}) and the loss positive")
    by = ["run", "step"] if "step" in out.columns else ["run"]
    out = out.sort_values(by, kind="stable").reset_index(drop=True)
    g = out.groupby("run", sort=False)
    out["task_loss"] = g["task_loss_raw"].transform(
        lambda s: s.rolling(max(1, int(smooth)), min_periods=1).mean())
    out["index"] = g.cumcount()
    return out


def checkpoint_noise(table: pd.DataFrame, *, fraction: float = NOISE_FRACTION,
                     column: str = "accuracy") -> tuple[float, int]:
    """Checkpoint-to-checkpoint noise of ``column``: the pooled standard deviation around a
    straight line over the last ``fraction`` of each run's checkpoints (at least 4 per run),
    and the number of runs that entered.

    Per run, s_i^2 = RSS_i / (n_i - 2) of a least-squares line in the checkpoint index (the
    accuracy still climbs over a run's last checkpoints; a plain sd would count that climb
    as noise); pooled: sqrt(sum_i RSS_i / sum_i (n_i - 2)). The paper's variance diagnostic
    (Bhagia et al. 2024 Sec. 5.1: spread of the final checkpoints). (nan, 0) when no run
    has 4 checkpoints.
    """
    rss, dof, runs = 0.0, 0, 0
    for _, g in table.groupby("run", sort=True):
        if len(g) < 4:
            continue
        n = max(4, int(math.ceil(fraction * len(g))))
        v = g[column].to_numpy(float)[-n:]
        i = np.arange(len(v), dtype=float)
        coef = np.polyfit(i, v, 1)
        rss += float(np.sum((v - np.polyval(coef, i)) ** 2))
        dof += len(v) - 2
        runs += 1
    return (math.sqrt(rss / dof) if dof else math.nan), runs


# ---------------------------------------------------------------------------- data
@dataclass
class _Data:
    """The points of both steps, for one task and one set of fitted runs."""

    runs: np.ndarray            # sorted run ids (the bootstrap's units)
    final: pd.DataFrame         # one row per run: params, tokens, task_loss, accuracy, loss
    ckpt: pd.DataFrame          # step-2 checkpoints
    noise: float
    noise_runs: int
    table: pd.DataFrame
    notes: list[str]


def _select_runs(ladder, runs, fit_max_params) -> tuple[list[str], list[str]]:
    final, excluded = ladder.final_points()
    names = [str(r) for r in final["run"]]
    notes = [f"run {e.run} left out: {e.reason}" for e in excluded]
    if runs is not None:
        wanted = [str(r) for r in runs]
        unknown = sorted(set(wanted) - set(ladder.runs))
        if unknown:
            raise LadderError(f"unknown run(s) {unknown} in ladder {ladder.name!r}; known: "
                              f"{', '.join(ladder.runs)}")
        names = [r for r in names if r in set(wanted)]
    if fit_max_params is not None:
        if "params" not in final.columns:
            raise LadderError(f"ladder {ladder.name!r} has no params column for the fit filter")
        p = dict(zip(final["run"].astype(str), final["params"].astype(float)))
        names = [r for r in names if p[r] <= fit_max_params * (1 + 1e-9)]
    if not names:
        raise LadderError(f"no finished runs of ladder {ladder.name!r} are left to fit")
    return sorted(names), notes


def _data(ladder, task: Task, runs, fit_max_params, *, smooth: int, skip_fraction: float,
          keep_warmup: bool = False) -> _Data:
    table = task_table(ladder, task, smooth=smooth)
    names, notes = _select_runs(ladder, runs, fit_max_params)
    table = table[table["run"].isin(names)]
    missing = sorted(set(names) - set(table["run"]))
    if missing:
        notes.append(f"task {task.name}: run(s) {', '.join(missing)} have no values of the task")
        names = [r for r in names if r not in missing]
    final = table.groupby("run", sort=True).tail(1).reset_index(drop=True)
    for col in ("params", "tokens"):
        if col not in final.columns:
            raise LadderError(f"ladder {ladder.name!r} needs {col!r} per run for task laws")
    sizes = table.groupby("run")["index"].transform("size")
    keep = table["index"] >= np.floor(skip_fraction * sizes)
    if not keep_warmup and {"lr", "peak_lr"} <= set(table.columns):
        # Warm-up: before the LR first reaches (99% of) its peak.
        reached = (table["lr"] >= 0.99 * table["peak_lr"]).groupby(table["run"]).cummax()
        keep &= reached.to_numpy()
    ckpt = table[keep].reset_index(drop=True)
    noise, nruns = checkpoint_noise(table)
    return _Data(np.array(sorted(final["run"].astype(str))), final, ckpt, noise, nruns, table,
                 notes)


# ---------------------------------------------------------------------------- fits
def _step1_inputs(law, frame_or_target: Mapping[str, Any], k_flops: float) -> dict:
    x = {}
    for name in law.inputs:
        if name == "flops" and "flops" not in frame_or_target:
            x["flops"] = k_flops * 6.0 * np.asarray(frame_or_target["params"], float) * \
                np.asarray(frame_or_target["tokens"], float)
        else:
            x[name] = np.asarray(frame_or_target[name], dtype=float)
    return x


def _fit_step1(law, data: _Data, column: str, k_flops: float, warm_start=None) -> Fit:
    law = get_law(law)
    x = _step1_inputs(law, {c: data.final[c].to_numpy(float) for c in data.final.columns
                            if c in ("params", "tokens", "flops")}, k_flops)
    return fit_arrays(law, x, data.final[column].to_numpy(float),
                      labels=data.final["run"].astype(str).tolist(), warm_start=warm_start)


def _step2_arrays(data: _Data, column: str, helper: bool):
    xs = data.ckpt[column].to_numpy(float)
    ys = data.ckpt["accuracy"].to_numpy(float)
    labels = data.ckpt["run"].astype(str).tolist()
    if helper:
        xs, ys, labels = np.append(xs, 0.0), np.append(ys, 1.0), labels + ["<helper L=0>"]
    return xs, ys, labels


def _positive(y: np.ndarray, what: str) -> np.ndarray:
    # log residuals need accuracy > 0: a 0 accuracy (tiny eval) is floored at 1e-4.
    return np.maximum(y, 1e-4)


def _fixed(task: Task, upper) -> dict:
    """Fixed asymptotes: C at the task's chance level; U at ``upper`` unless "fit"."""
    if isinstance(upper, str):
        if upper != "fit":
            raise FitError(f"upper must be a fraction in (chance, 1] or 'fit', got {upper!r}")
        return {"C": task.chance}
    u = float(upper)
    if not (task.chance < u <= 1):
        raise FitError(f"task {task.name!r}: upper = {u:g} must be in (chance {task.chance:g}, 1]")
    return {"C": task.chance, "U": u}


def _fit_step2(task: Task, data: _Data, column: str, helper: bool, upper=1.0,
               warm_start=None) -> Fit:
    law = sigmoid_law(task.chance)
    xs, ys, labels = _step2_arrays(data, column, helper)
    if len(np.unique(xs)) < 3:
        raise FitError(f"task {task.name!r}: step 2 needs checkpoints at 3 or more task losses, "
                       f"got {len(np.unique(xs))}")
    return fit_arrays(law, {"task_loss": xs}, _positive(ys, "accuracy"), labels=labels,
                      fixed=_fixed(task, upper), delta=STEP2_DELTA, warm_start=warm_start)


def _fit_onestep(task: Task, data: _Data, upper=1.0) -> Fit:
    law = onestep_law(task.chance)
    f = data.final
    return fit_arrays(law, {"params": f["params"].to_numpy(float),
                            "tokens": f["tokens"].to_numpy(float)},
                      _positive(f["accuracy"].to_numpy(float), "accuracy"),
                      labels=f["run"].astype(str).tolist(), fixed=_fixed(task, upper),
                      delta=STEP2_DELTA)


def _k_flops(ladder) -> float:
    conv = getattr(ladder, "flops_convention", None)
    k = getattr(conv, "median", None) if conv is not None else None
    return float(k) if k and math.isfinite(k) else 1.0


def _refits(fit: Fit, weights: np.ndarray, checked: np.ndarray | None = None,
            seed: int = 0) -> tuple[list[dict | None], int, int]:
    """Warm-started refits of ``fit`` with point multiplicities ``weights`` (B, n).

    Every draw is refined at once from the full-data optimum by the engine's batched BFGS
    (:func:`delphi.fitting.refit.refine_batch`, up to :data:`_BATCH_ITER` iterations: on the
    OLMo ladder the step-1 law has a flat A-alpha valley, so a few draws need ~1,000 cheap
    batched iterations); a draw still unfinished gets at most :data:`_FALLBACK_ITER`
    L-BFGS-B iterations on its resample. Guard (as :func:`delphi.uncertainty.bootstrap`):
    the draws marked in ``checked`` are also fitted by the global search and the better
    optimum is kept. Each draw's arithmetic involves only its own row, so results do not
    depend on the batch.

    Returns (params per draw, None for a draw with too few distinct points; draws checked;
    checked draws whose warm start was worse than the global search by > 1e-9 relative).
    """
    from .uncertainty import _WORSE_RTOL, _resample_optimum

    bounds = {k: v for k, v in fit.bounds.items() if k not in fit.fixed}
    prep = prepare(fit.law, fit.x, fit.y, labels=fit.labels, fixed=fit.fixed, bounds=bounds,
                   delta=fit.delta)
    problem = prep.problem
    z0 = safe_start(problem, fit.params, prep.ibounds)
    out: list[dict | None] = [None] * len(weights)
    checked = np.zeros(len(weights), bool) if checked is None else checked
    # A resample that cannot identify the law (e.g. one model size left) fails, as in
    # delphi.uncertainty.bootstrap.
    ok = np.array([not _design_failure(prep, w) for w in weights])
    if not ok.any():
        return out, 0, 0
    batch = refine_batch(problem, z0, weights[ok], prep.ibounds, max_iter=_BATCH_ITER)
    n_checked = n_worse = 0
    for a, b in enumerate(np.flatnonzero(ok)):
        z, obj = batch.z[a], float(batch.objective[a])
        if not batch.converged[a] or not np.isfinite(obj):
            idx = np.repeat(np.arange(len(fit.y)), weights[b].astype(int))
            sub = type(problem)(law=problem.law,
                                x={k: (v[idx] if isinstance(v, np.ndarray)
                                       and v.shape == fit.y.shape else v)
                                   for k, v in problem.x.items()},
                                log_y=problem.log_y[idx], delta=problem.delta,
                                free=problem.free, fixed=problem.fixed)
            z = refine_one(sub, z if np.all(np.isfinite(z)) else z0, prep.ibounds,
                           max_iter=_FALLBACK_ITER)[0]
            obj = float(weighted_objective(problem, z, weights[b])[0])
        if checked[b]:
            n_checked += 1
            try:
                zg = _resample_optimum(prep, weights[b], seed)
                obj_g = float(weighted_objective(problem, zg, weights[b])[0])
            except DelphiError:   # the global search found nothing to compare with
                zg, obj_g = None, math.inf
            if zg is not None and np.isfinite(obj_g) and (
                    not np.isfinite(obj) or obj > obj_g * (1 + _WORSE_RTOL)):
                n_worse += 1
                z, obj = zg, obj_g
        if np.all(np.isfinite(z)) and np.isfinite(obj):
            out[b] = problem.values(z)
    return out, n_checked, n_worse


def _unit_weights(labels: Sequence[str], runs: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Point multiplicities (B, n) from run multiplicities (B, R); unknown labels (the
    helper point) always count once."""
    pos = {r: i for i, r in enumerate(runs)}
    idx = np.array([pos.get(str(s), -1) for s in labels])
    w = np.ones((counts.shape[0], len(labels)))
    hit = idx >= 0
    w[:, hit] = counts[:, idx[hit]]
    return w


# ---------------------------------------------------------------------------- forecast
@dataclass
class AccuracyForecast:
    """A task's predicted accuracy at a target (N, D), through the task loss.

    Attributes
    ----------
    task: the task (name, columns, chance level).
    target: ``{"params": N, "tokens": D}``.
    task_loss: predicted task loss (bits per byte) at the target; ``design="c4-loss"``: the
        ladder's own loss.
    accuracy: predicted accuracy (fraction) = step2(step1(N, D)).
    lower, upper: the ``level`` interval for one new run's final accuracy (fractions):
        parameter uncertainty of both steps (bootstrap over runs), the step-1 run noise and
        the checkpoint noise, widened by the extrapolation calibration (``calibration``).
    mean_lower, mean_upper: the interval of the expected accuracy (bootstrap only).
    task_loss_lower, task_loss_upper: the interval of the expected task loss.
    level: the interval's level.
    step1, step2: the two fits (:class:`~delphi.fitting.Fit`).
    noise_sd: checkpoint-to-checkpoint noise of the accuracy (fraction), pooled sd.
    step1_noise: run-to-run noise of the task loss (sd of its log) used for new runs.
    n_boot, n_failed, seed: bootstrap draws asked for, failed, and the seed.
    design: ``"two-step"`` or ``"c4-loss"`` (step 2 on the ladder's own loss).
    warnings, notes: messages for the report.
    bootstrap_lower, bootstrap_upper: the new-run interval before the extrapolation
        calibration (bootstrap + run noise + checkpoint noise), fractions.
    calibration: the extrapolation-calibration block (sigma_0, k, folds, r and sigma(r) at
        the target, all in accuracy fractions; see :func:`_lfo_errors`), or None
        when it was off or had too few cuts (a note says why).
    n_checked, n_worse: bootstrap refits also fitted by the global search (the guard), and
        those whose warm start was worse.
    """

    task: Task
    target: dict
    task_loss: float
    accuracy: float
    lower: float
    upper: float
    mean_lower: float
    mean_upper: float
    task_loss_lower: float
    task_loss_upper: float
    level: float
    step1: Fit
    step2: Fit
    noise_sd: float
    step1_noise: float
    n_boot: int
    n_failed: int
    seed: int
    ladder: str = ""
    design: str = "two-step"
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    bootstrap_lower: float = math.nan
    bootstrap_upper: float = math.nan
    calibration: dict | None = None
    n_checked: int = 0
    n_worse: int = 0

    def to_dict(self) -> dict:
        """JSON-ready: ``prediction`` (accuracy, lower, upper, task_loss... as fractions),
        ``step1`` and ``step2`` (the fits' ``to_dict()``, step 2's runs listed once each),
        ``task``, ``target``, ``noise``, ``warnings``, ``notes``."""
        step2 = self.step2.to_dict()
        step2["fit"]["runs"] = sorted(set(self.step2.labels))
        return {
            "ladder": self.ladder,
            "task": self.task.to_dict(),
            "design": self.design,
            "target": {k: float(v) for k, v in self.target.items()},
            "prediction": {
                "accuracy": self.accuracy, "lower": self.lower, "upper": self.upper,
                "mean_lower": self.mean_lower, "mean_upper": self.mean_upper,
                "level": self.level, "task_loss": self.task_loss,
                "task_loss_lower": self.task_loss_lower,
                "task_loss_upper": self.task_loss_upper, "unit": "fraction",
            },
            "noise": {"checkpoint_sd": _json_float(self.noise_sd),
                      "step1_log_sd": _json_float(self.step1_noise),
                      "warn_above_points": NOISE_WARN_POINTS},
            "bootstrap": {"n": self.n_boot, "failed": self.n_failed, "seed": self.seed,
                          "unit": "run", "lower": _json_float(self.bootstrap_lower),
                          "upper": _json_float(self.bootstrap_upper),
                          "guard": {"checked": self.n_checked, "worse": self.n_worse}},
            "calibration": self.calibration,
            "step1": self.step1.to_dict(),
            "step2": step2,
            "warnings": list(self.warnings),
            "notes": list(self.notes),
        }

    def to_frame(self) -> pd.DataFrame:
        """One row: task, target, task_loss, accuracy, lower, upper (fractions), noise_sd..."""
        return pd.DataFrame([{
            "task": self.task.name, "design": self.design, "params": self.target["params"],
            "tokens": self.target["tokens"], "task_loss": self.task_loss,
            "accuracy": self.accuracy, "lower": self.lower, "upper": self.upper,
            "level": self.level, "noise_sd": self.noise_sd, "chance": self.task.chance,
            "n_warnings": len(self.warnings)}])

    def report(self) -> str:
        """A text report (accuracies in points)."""
        t = self.target
        lines = [f"task {self.task.name} on ladder {self.ladder}: target N = {t['params']:.4g}, "
                 f"D = {t['tokens']:.4g} ({self.design})",
                 f"  step 1 ({self.step1.law.name}, {self.step1.n_points} final checkpoints): "
                 f"task loss {self.task_loss:.4f} [{self.task_loss_lower:.4f}, "
                 f"{self.task_loss_upper:.4f}]",
                 "    " + ", ".join(f"{k} = {v:.4g}" for k, v in self.step1.params.items()),
                 f"  step 2 ({self.step2.law.name}, {self.step2.n_points} checkpoints): "
                 + ", ".join(f"{k} = {v:.4g}" for k, v in self.step2.params.items()),
                 f"  accuracy {100 * self.accuracy:.1f} points, {self.level:.0%} interval "
                 f"[{100 * self.lower:.1f}, {100 * self.upper:.1f}] (new run; expected "
                 f"[{100 * self.mean_lower:.1f}, {100 * self.mean_upper:.1f}]); chance "
                 f"{100 * self.task.chance:.1f}",
                 f"  checkpoint noise sd {100 * self.noise_sd:.2f} points; bootstrap "
                 f"{self.n_boot - self.n_failed}/{self.n_boot} draws (seed {self.seed})"]
        lines += [f"  warning: {w}" for w in self.warnings]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _json_float(v: float):
    return float(v) if v is not None and math.isfinite(v) else None


def _check_target(target_params, target_tokens) -> dict:
    out = {}
    for name, v in (("params", target_params), ("tokens", target_tokens)):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise TargetError(f"target {name} must be a positive number, got {v!r}") from None
        if not (math.isfinite(f) and f > 0):
            raise TargetError(f"target {name} must be a positive finite number, got {v!r}")
        out[name] = f
    return out


def _quantiles(values: np.ndarray, level: float) -> tuple[float, float]:
    a = (1 - level) / 2
    lo, hi = np.quantile(values, [a, 1 - a])
    return float(lo), float(hi)


def _subset(data: _Data, runs: Sequence[str]) -> _Data:
    """The points of ``data`` that belong to ``runs`` (the checkpoint noise is kept)."""
    keep = set(runs)
    final = data.final[data.final["run"].isin(keep)].reset_index(drop=True)
    ckpt = data.ckpt[data.ckpt["run"].isin(keep)].reset_index(drop=True)
    return _Data(np.array(sorted(keep)), final, ckpt, data.noise, data.noise_runs,
                 data.table[data.table["run"].isin(keep)], [])


def _extrapolation_ratio(params, tokens, n_max: float, c_max: float):
    """r = max(N / N_max, N D / (N D)_max) of the fitted runs: the larger of the
    extrapolation in model size and in compute (C ~ 6 N D), >= 1 beyond the fitted runs."""
    return np.maximum(np.asarray(params, float) / n_max,
                      np.asarray(params, float) * np.asarray(tokens, float) / c_max)


def _lfo_errors(ladder, task: Task, data: _Data, *, step1_law: str = "chinchilla",
                        column: str = "task_loss", helper_point: bool = False,
                        upper: float | str = 1.0, k_flops: float = 1.0,
                        max_folds: int = 12) -> tuple[pd.DataFrame, list[str]]:
    """Leave-future-out errors of the chained prediction *inside* the fitted runs.

    The fitted runs are ordered by compute N D; for each cut (from the first with at least
    free step-1 parameters + 2 runs and two model sizes, to the second-largest compute; at
    most ``max_folds`` evenly spaced), both steps are refitted on the runs at or below the
    cut (step 2 on those runs' checkpoints only) and predict the final accuracy of every
    fitted run above it. Nothing outside ``data`` is read: when ``data`` holds the fit runs
    of a held-out test, the test runs never inform these errors (nested).

    Returns (one row per (cut, predicted run): ``cut`` (largest fitted N D), ``run``,
    ``params``, ``tokens``, ``ratio`` (:func:`_extrapolation_ratio`), ``predicted``,
    ``actual`` (fractions), ``error`` (predicted - actual, fraction); notes on skipped cuts).
    """
    fin = data.final.assign(nd=data.final["params"] * data.final["tokens"])
    fin = fin.sort_values("nd", kind="stable").reset_index(drop=True)
    need = sum(1 for _ in get_law(step1_law).params) + 2
    levels = np.unique(fin["nd"].to_numpy(float))
    cuts = [c for c in levels[:-1]
            if (fin["nd"] <= c).sum() >= need and fin.loc[fin["nd"] <= c, "params"].nunique() >= 2]
    if len(cuts) > max_folds:
        cuts = [cuts[i] for i in np.unique(np.round(np.linspace(0, len(cuts) - 1,
                                                                max_folds)).astype(int))]
    rows, notes = [], []
    warm: tuple = (None, None)
    for c in cuts:
        inside = fin[fin["nd"] <= c]
        held = fin[fin["nd"] > c]
        sub = _subset(data, inside["run"].astype(str).tolist())
        try:
            try:   # warm-started from the previous cut (as delphi.calibration does)
                s1 = _fit_step1(step1_law, sub, column, k_flops, warm_start=warm[0])
                s2 = _fit_step2(task, sub, column, helper_point, upper, warm_start=warm[1])
            except DelphiError:
                if warm == (None, None):
                    raise
                s1 = _fit_step1(step1_law, sub, column, k_flops)
                s2 = _fit_step2(task, sub, column, helper_point, upper)
        except DelphiError as exc:
            notes.append(f"calibration cut at N D <= {c:.3g}: skipped ({exc})")
            continue
        warm = (dict(s1.params), {k: v for k, v in s2.params.items() if k not in s2.fixed})
        x = _step1_inputs(s1.law, {"params": held["params"].to_numpy(float),
                                   "tokens": held["tokens"].to_numpy(float)}, k_flops)
        pred = s2.law.predict(s2.params, {"task_loss": s1.law.predict(s1.params, x)})
        ratio = _extrapolation_ratio(held["params"], held["tokens"], inside["params"].max(),
                                     inside["nd"].max())
        for (r, n, d, a), pr, q in zip(held[["run", "params", "tokens", "accuracy"]]
                                       .itertuples(index=False), pred, ratio):
            rows.append({"cut": float(c), "run": str(r), "params": float(n),
                         "tokens": float(d), "ratio": float(q), "predicted": float(pr),
                         "actual": float(a), "error": float(pr - a)})
    cols = ["cut", "run", "params", "tokens", "ratio", "predicted", "actual", "error"]
    return pd.DataFrame(rows, columns=cols), notes


def _calibration(ladder, task: Task, data: _Data, target: dict, *, level: float,
                 step1_law: str, column: str, helper_point: bool, upper, k_flops: float
                 ) -> tuple[dict | None, str]:
    """The extrapolation-calibration term at the target: (block for JSON, note); the block
    is None (with a note saying why) when fewer than MIN_FOLDS cuts could be made.

    sigma(r) = sigma_0 + k log10 r in accuracy (fraction), fitted by median regression of
    |error| / Phi^-1(0.75) on log10 r over :func:`_lfo_errors` (the method of
    :mod:`delphi.calibration` for losses: Williams & Goodman 1971 empirical prediction
    intervals, Koenker & Bassett 1978 median regression), widened by the Student-t factor
    t_{folds - 1} / z (:meth:`~delphi.calibration.CalibrationModel.small_sample_factor`).
    """
    from .calibration import MIN_FOLDS, CalibrationModel

    errors, skipped = _lfo_errors(ladder, task, data, step1_law=step1_law,
                                          column=column, helper_point=helper_point,
                                          upper=upper, k_flops=k_flops)
    n_folds = int(errors["cut"].nunique()) if len(errors) else 0
    if n_folds < MIN_FOLDS:
        return None, (f"no extrapolation calibration: {n_folds} leave-future-out cut(s) inside "
                      f"the fitted runs, {MIN_FOLDS} needed (more runs or model sizes); the "
                      f"interval is the bootstrap's alone" + (f"; {skipped[0]}" if skipped
                                                              else ""))
    r = errors["ratio"].to_numpy(float)
    model = CalibrationModel.from_errors(r, errors["error"].to_numpy(float),
                                         runs=errors["run"].tolist(), n_folds=n_folds,
                                         law=f"{step1_law} + task-sigmoid",
                                         ladder=getattr(ladder, "name", ""),
                                         what="accuracy error")
    s0, k = model.sigma_0, model.k
    fin = data.final
    rt = float(_extrapolation_ratio(target["params"], target["tokens"], fin["params"].max(),
                                    (fin["params"] * fin["tokens"]).max()))
    raw = float(model.sigma(rt))
    f = model.small_sample_factor(level)
    block = {"method": "leave-future-out inside the fitted runs",
             "model": "sigma(r) = sigma_0 + k log10 r (accuracy, fraction)",
             "ratio_definition": "r = max(N / N_max, N D / (N D)_max) of the fitted runs",
             "sigma_0": s0, "k": k, "n_folds": n_folds, "n_errors": int(len(errors)),
             "max_ratio": float(r.max()), "ratio": rt, "sigma_at_target": raw,
             "small_sample_factor": f, "sigma_used": raw * f,
             "extrapolated": bool(rt > r.max()),
             "lfo_mae_points": float(100 * np.mean(np.abs(errors["error"]))),
             "lfo_bias_points": float(100 * np.mean(errors["error"])),
             "notes": skipped}
    note = (f"extrapolation calibration: sigma(r) = {100 * s0:.2f} + {100 * k:.2f} log10 r "
            f"points (median regression over {len(errors)} leave-future-out predictions from "
            f"{n_folds} cuts inside the fitted runs, r up to {r.max():.3g}); at the target "
            f"r = {rt:.3g}: sigma {100 * raw:.2f} points x small-sample factor {f:.2f}, added "
            f"in quadrature to the bootstrap")
    return block, note


def _predict_one(ladder, task: Task, target: dict, *, level: float, n_boot: int, seed: int,
                 runs, fit_max_params, step1_law: str, smooth: int, skip_fraction: float,
                 helper_point: bool, design: str, upper, calibrate: bool = True,
                 check_every: int = _CHECK_EVERY) -> AccuracyForecast:
    from .uncertainty import run_noise

    data = _data(ladder, task, runs, fit_max_params, smooth=smooth, skip_fraction=skip_fraction)
    column = "task_loss" if design == "two-step" else "loss"
    if design == "c4-loss" and "loss" not in data.ckpt.columns:
        raise LadderError(f"ladder {ladder.name!r} has no loss column for design 'c4-loss'")
    notes = list(data.notes)
    warns: list[str] = []
    k_flops = _k_flops(ladder)
    step1 = _fit_step1(step1_law, data, column, k_flops)
    step2 = _fit_step2(task, data, column, helper_point, upper)
    law1, law2 = step1.law, step2.law
    xt = _step1_inputs(law1, {k: [v] for k, v in target.items()}, k_flops)
    loss_hat = float(law1.predict(step1.params, xt)[0])
    acc_hat = float(law2.predict(step2.params, {"task_loss": [loss_hat]})[0])
    sigma1, _ = run_noise(step1)
    noise = data.noise if math.isfinite(data.noise) else 0.0
    if not math.isfinite(data.noise):
        warns.append(f"task {task.name}: no run has 4 checkpoints: checkpoint noise not "
                     f"measured (taken as 0)")
    elif _Z90 * noise > NOISE_WARN_POINTS / 100:
        warns.append(f"task {task.name}: checkpoint-to-checkpoint noise sd {100 * noise:.2f} "
                     f"points (last {NOISE_FRACTION:.0%} of each run's checkpoints, pooled over "
                     f"{data.noise_runs} runs) alone gives a 90% half-width of "
                     f"{100 * _Z90 * noise:.1f} points > {NOISE_WARN_POINTS:g}: a "
                     f"{NOISE_WARN_POINTS:g}-point prediction of this task is impossible")
    for w in step1.warnings:
        warns.append(f"step 1: {w}")
    for w in step2.warnings:
        warns.append(f"step 2: {w}")
    p_range = (data.final["params"].min(), data.final["params"].max())
    if target["params"] > 10 * p_range[1]:
        warns.append(f"target N = {target['params']:.3g} is {target['params'] / p_range[1]:.0f}x "
                     f"the largest fitted model ({p_range[1]:.3g})")

    # Bootstrap over runs: one resample of runs drives both steps.
    children = np.random.SeedSequence(seed).spawn(n_boot + 1)
    R = len(data.runs)
    counts = np.zeros((n_boot, R))
    for b in range(n_boot):
        rng = np.random.default_rng(children[b])
        np.add.at(counts[b], rng.integers(0, R, size=R), 1.0)
    w1 = _unit_weights(step1.labels, data.runs, counts)
    w2 = _unit_weights(step2.labels, data.runs, counts)
    checked = np.zeros(n_boot, dtype=bool)
    if check_every and check_every > 0:
        offset = int(np.random.default_rng(children[n_boot]).integers(min(check_every, n_boot)))
        checked[offset::check_every] = True
    p1, c1, bad1 = _refits(step1, w1, checked, seed)
    p2, c2, bad2 = _refits(step2, w2, checked, seed)
    n_checked, n_worse = c1 + c2, bad1 + bad2
    if n_checked and n_worse / n_checked > 0.02:
        warns.append(f"warm-start guard: {n_worse} of {n_checked} checked bootstrap refits "
                     f"were worse than the global search (kept the better)")
    loss_b, acc_b, new = [], [], []
    rng = np.random.default_rng(children[n_boot])
    for a, b in zip(p1, p2):
        eps1 = rng.normal(0.0, sigma1, _NOISE_DRAWS)
        eps2 = rng.normal(0.0, noise, _NOISE_DRAWS)
        if a is None or b is None:
            continue
        lb = float(law1.predict(a, xt)[0])
        ab = float(law2.predict(b, {"task_loss": [lb]})[0])
        an = law2.predict(b, {"task_loss": lb * np.exp(eps1)}) + eps2
        loss_b.append(lb)
        acc_b.append(ab)
        new.append(an)
    n_failed = n_boot - len(acc_b)
    if len(acc_b) < max(2, n_boot // 2):
        raise FitError(f"task {task.name!r}: {n_failed} of {n_boot} bootstrap draws failed; "
                       f"the ladder has too few runs to resample")
    new_all = np.concatenate(new)
    blo, bhi = _quantiles(np.clip(new_all, 0.0, 1.0), level)
    mlo, mhi = _quantiles(np.array(acc_b), level)
    llo, lhi = _quantiles(np.array(loss_b), level)
    notes.append(f"interval: bootstrap over {R} runs ({n_boot} draws, both steps refitted per "
                 f"draw; guard: {n_checked} refits also fitted by the global search, "
                 f"{n_worse} worse) + step-1 run noise (log sd {sigma1:.3g}) + checkpoint "
                 f"noise (sd {100 * noise:.2f} points)")
    lo, hi, cal = blo, bhi, None
    loose = [i for i, w in enumerate(warns) if w.startswith("step 1: poorly determined")]
    if loose:
        # Real on the OLMo ladder: with model sizes spanning only a few x, A and alpha trade
        # off along a valley of near-equal fits. What matters is how far that moves the
        # prediction at the target, which the bootstrap refits measure.
        sizes = data.final["params"]
        warns[loose[0]] += (f" (the fitted model sizes span {sizes.min():.3g}-{sizes.max():.3g}, "
                            f"so A and alpha trade off); what it means for this prediction: "
                            f"the bootstrap refits move the expected task loss within "
                            f"[{llo:.4f}, {lhi:.4f}] and the expected accuracy within "
                            f"+-{50 * (mhi - mlo):.1f} points ({level:.0%}), inside the interval")
    if calibrate:
        cal, cal_note = _calibration(ladder, task, data, target, level=level,
                                     step1_law=step1_law, column=column,
                                     helper_point=helper_point, upper=upper, k_flops=k_flops)
        notes.append(cal_note)
        if cal is not None:
            # The extrapolation error, independent of the bootstrap's spread: its sd adds in
            # quadrature (a convolution of the draws with N(0, f sigma(r))).
            extra = np.random.default_rng(np.random.SeedSequence([seed, 13])).normal(
                0.0, cal["sigma_used"], new_all.size)
            lo, hi = _quantiles(np.clip(new_all + extra, 0.0, 1.0), level)
    name = getattr(ladder, "name", "")
    return AccuracyForecast(task=task, target=dict(target), task_loss=loss_hat,
                            accuracy=acc_hat, lower=lo, upper=hi, mean_lower=mlo,
                            mean_upper=mhi, task_loss_lower=llo, task_loss_upper=lhi,
                            level=level, step1=step1, step2=step2, noise_sd=noise,
                            step1_noise=sigma1, n_boot=n_boot, n_failed=n_failed, seed=seed,
                            ladder=name, design=design, warnings=warns, notes=notes,
                            bootstrap_lower=blo, bootstrap_upper=bhi, calibration=cal,
                            n_checked=n_checked, n_worse=n_worse)


def predict_accuracy(ladder, task: str | Task = "all", *, target_params: float,
                     target_tokens: float, level: float = DEFAULT_LEVEL, n_boot: int = 200,
                     seed: int = 0, runs: Iterable[str] | None = None,
                     fit_max_params: float | None = None,
                     tasks_manifest: str | Path | None = None, step1_law: str = "chinchilla",
                     smooth: int = SMOOTH, skip_fraction: float = SKIP_FRACTION,
                     helper_point: bool = False, design: str = "two-step",
                     upper: float | str = 1.0, calibrate: bool = True,
                     check_every: int = _CHECK_EVERY):
    """Predict a task's accuracy at (N, D) in two steps (see the module docstring).

    Parameters
    ----------
    ladder: a :class:`~delphi.ladder.Ladder`, a bundled ladder name, a path or a DataFrame.
    task: a task name of the tasks manifest, a :class:`Task`, or ``"all"`` (every task of the
        manifest: a list of forecasts, one per task, in manifest order).
    target_params, target_tokens: the target's N (parameters) and D (tokens).
    level: the interval's level, in (0, 1).
    n_boot: bootstrap draws (resamples of runs), >= 2.
    seed: the seed of the bootstrap and noise draws; same inputs and seed give bit-identical
        results.
    runs: fit only these runs (default: every finished run); ``fit_max_params``: only runs
        with N at most this.
    tasks_manifest: the tasks manifest (default the bundled ``olmo-ladder-tasks``).
    step1_law: the task-loss law (default ``chinchilla``, the paper's Eq. 1).
    smooth: trailing mean of the task loss over this many checkpoints (paper: 5).
    skip_fraction: share of each run's first checkpoints left out of step 2 (paper: 0.1).
    helper_point: add the reference code's helper point (loss 0, accuracy 1) to step 2.
    upper: the accuracy at very low loss U: fixed at 1 by default (see the module
        docstring), a fraction in (chance, 1] to fix it elsewhere, or ``"fit"`` to fit it
        within [chance, 1] (slower: the bound is usually active).
    design: ``"two-step"`` (task loss) or ``"c4-loss"`` (the ladder's own loss in both steps:
        the baseline that skips the task loss).
    calibrate: widen the interval by the extrapolation error measured inside the fitted runs
        (default; see the module docstring). Needs 3 leave-future-out cuts, else a note.
    check_every: the warm-start guard's rate, as in :func:`delphi.uncertainty.bootstrap`:
        every ``check_every``-th bootstrap draw (from a seeded offset) of each step is also
        fitted by the global search and the better optimum kept (``n_checked``/``n_worse``;
        a warning above 2% worse); 0 turns it off.

    Returns
    -------
    AccuracyForecast, or a list of them for ``task="all"``.

    Raises
    ------
    LadderError: unknown task (the message lists the known ones), a task column missing from
        the ladder (names the task and column), unknown runs, or no runs left.
    TargetError: a target that is not a positive number.
    FitError: too few points or failed bootstrap; LawError: unknown ``step1_law``.
    """
    target = _check_target(target_params, target_tokens)
    if not (isinstance(level, float) and 0 < level < 1):
        raise FitError(f"level must be in (0, 1), got {level!r}")
    if not (isinstance(n_boot, int) and n_boot >= 2):
        raise FitError(f"n_boot must be an integer >= 2, got {n_boot!r}")
    if design not in ("two-step", "c4-loss"):
        raise FitError(f"design must be 'two-step' or 'c4-loss', got {design!r}")
    ladder = _load(ladder)
    kwargs = dict(level=level, n_boot=n_boot, seed=seed, runs=runs,
                  fit_max_params=fit_max_params, step1_law=step1_law, smooth=smooth,
                  skip_fraction=skip_fraction, helper_point=helper_point, design=design,
                  upper=upper, calibrate=calibrate, check_every=check_every)
    if isinstance(task, str) and task == "all":
        return [_predict_one(ladder, t, target, **kwargs)
                for t in load_tasks(tasks_manifest).values()]
    return _predict_one(ladder, _resolve_task(task, tasks_manifest), target, **kwargs)


# ---------------------------------------------------------------------------- compare
DESIGNS = ("two-step", "c4-loss", "one-step")


@dataclass
class AccuracyComparison:
    """The three designs side by side for one task.

    Attributes
    ----------
    task: the task.
    target: ``{"params": N, "tokens": D}`` (None when only the held-out split was asked).
    predictions: design -> predicted accuracy (fraction) at the target.
    heldout: one row per (design, held-out run): run, params, tokens, actual, predicted,
        abs_error_points.
    mae_points: design -> mean absolute error in points over the held-out runs.
    fit_runs, heldout_runs: the runs fitted and predicted in the held-out split.
    """

    task: Task
    target: dict | None
    predictions: dict[str, float]
    heldout: pd.DataFrame
    mae_points: dict[str, float]
    fit_runs: list[str]
    heldout_runs: list[str]
    notes: list[str] = field(default_factory=list)

    def to_frame(self) -> pd.DataFrame:
        """One row per design: task, design, accuracy (target), mae_points, n_heldout."""
        return pd.DataFrame([{"task": self.task.name, "design": d,
                              "accuracy": self.predictions.get(d, math.nan),
                              "mae_points": self.mae_points.get(d, math.nan),
                              "n_heldout": len(self.heldout_runs)} for d in DESIGNS])

    def to_dict(self) -> dict:
        return {"task": self.task.name, "target": self.target,
                "designs": {d: {"accuracy": _json_float(self.predictions.get(d, math.nan)),
                                "heldout_mae_points": _json_float(self.mae_points.get(d,
                                                                                      math.nan))}
                            for d in DESIGNS},
                "fit_runs": self.fit_runs, "heldout_runs": self.heldout_runs,
                "heldout": [{k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}
                            for r in self.heldout.to_dict("records")],
                "notes": self.notes}

    def report(self) -> str:
        lines = [f"task {self.task.name}: designs compared (accuracy in points)",
                 f"  held-out split: fit on {len(self.fit_runs)} runs, predict "
                 f"{', '.join(self.heldout_runs)}",
                 f"  {'design':<10} {'target':>8} {'held-out MAE':>13}"]
        for d in DESIGNS:
            p = self.predictions.get(d, math.nan)
            lines.append(f"  {d:<10} {100 * p:8.1f} {self.mae_points.get(d, math.nan):13.2f}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _point_predictions(ladder, task: Task, fit_runs, x: dict, *, smooth, skip_fraction,
                       helper_point, step1_law, upper=1.0) -> dict[str, np.ndarray]:
    """Each design's accuracy at the inputs ``x`` (params, tokens arrays), fitted on
    ``fit_runs`` (no intervals)."""
    data = _data(ladder, task, fit_runs, None, smooth=smooth, skip_fraction=skip_fraction)
    k = _k_flops(ladder)
    out = {}
    for design, column in (("two-step", "task_loss"), ("c4-loss", "loss")):
        s1 = _fit_step1(step1_law, data, column, k)
        s2 = _fit_step2(task, data, column, helper_point, upper)
        loss = s1.law.predict(s1.params, _step1_inputs(s1.law, x, k))
        out[design] = s2.law.predict(s2.params, {"task_loss": loss})
    one = _fit_onestep(task, data, upper)
    out["one-step"] = one.law.predict(one.params, x)
    return out


def compare_accuracy(ladder, task: str | Task, *, target_params: float | None = None,
                     target_tokens: float | None = None, holdout: Iterable[str] | None = None,
                     runs: Iterable[str] | None = None, fit_max_params: float | None = None,
                     tasks_manifest=None, step1_law: str = "chinchilla", smooth: int = SMOOTH,
                     skip_fraction: float = SKIP_FRACTION, helper_point: bool = False,
                     upper: float | str = 1.0) -> AccuracyComparison:
    """Compare the two-step design with its baselines for one task.

    Designs: ``two-step`` (task loss, then sigmoid), ``c4-loss`` (the ladder's own loss in
    both steps) and ``one-step`` (sigmoid of a power law in N and D, fitted to final
    accuracies). Each predicts the target (fitted on ``runs`` and ``fit_max_params``, default
    every finished run) and, on a held-out split of those runs, the final accuracy of the
    ``holdout`` runs (default: the runs of the largest model size), fitted on the others; errors are absolute, in points.

    Raises
    ------
    LadderError: unknown task or runs, a missing column, or a held-out split that leaves no
        run to fit.
    """
    ladder = _load(ladder)
    task = _resolve_task(task, tasks_manifest)
    names, notes = _select_runs(ladder, runs, fit_max_params)
    table = task_table(ladder, task, smooth=smooth)
    final = table[table["run"].isin(names)].groupby("run", sort=True).tail(1)
    if holdout is None:
        biggest = final["params"].max()
        held = sorted(final.loc[final["params"] == biggest, "run"].astype(str))
    else:
        held = sorted(map(str, holdout))
        unknown = set(held) - set(final["run"].astype(str))
        if unknown:
            raise LadderError(f"held-out run(s) {sorted(unknown)} are not finished runs of "
                              f"ladder {ladder.name!r} with task {task.name!r}")
    fit_runs = [r for r in names if r not in held]
    if not fit_runs:
        raise LadderError("the held-out split leaves no run to fit")
    kw = dict(smooth=smooth, skip_fraction=skip_fraction, helper_point=helper_point,
              step1_law=step1_law, upper=upper)
    hf = final[final["run"].isin(held)].sort_values("run")
    xh = {"params": hf["params"].to_numpy(float), "tokens": hf["tokens"].to_numpy(float)}
    preds = _point_predictions(ladder, task, fit_runs, xh, **kw)
    rows = []
    mae = {}
    for d in DESIGNS:
        err = 100 * np.abs(preds[d] - hf["accuracy"].to_numpy(float))
        mae[d] = float(np.mean(err))
        for (r, p, t, a), pr, e in zip(hf[["run", "params", "tokens", "accuracy"]].itertuples(
                index=False), preds[d], err):
            rows.append({"design": d, "run": str(r), "params": float(p), "tokens": float(t),
                         "actual": float(a), "predicted": float(pr),
                         "abs_error_points": float(e)})
    target = None
    predictions: dict[str, float] = {}
    if target_params is not None or target_tokens is not None:
        target = _check_target(target_params, target_tokens)
        xt = {"params": np.array([target["params"]]), "tokens": np.array([target["tokens"]])}
        tp = _point_predictions(ladder, task, names, xt, **kw)
        predictions = {d: float(tp[d][0]) for d in DESIGNS}
    return AccuracyComparison(task=task, target=target, predictions=predictions,
                              heldout=pd.DataFrame(rows), mae_points=mae, fit_runs=fit_runs,
                              heldout_runs=held, notes=notes)
