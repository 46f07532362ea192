"""Benchmark: two rules chosen on the public ladders, re-chosen leave one ladder out (issue 21,
item 5): the recency weight of ``compare`` / ``--law auto`` and the calibration's small-sample
t-factor.

Each rule was picked (issue 11) by looking at the figures of ``bench_calibration.py`` on the
same ladders it is scored on, so its figure there is in sample. Here each rule gets a small
grid of alternatives fixed before looking (:data:`RECENCY_GRID`, :data:`T_FACTORS`), and for
each the script reports

* **in sample**: the grid value best pooled over every ladder, and its pooled figure;
* **leave one ladder out**: for each ladder, the value best pooled over the *other* ladders,
  scored on the ladder left out; the figures pooled over ladders (:func:`lolo`);
* **today's default** (``RECENCY = 4``; t with n_folds - 1 dof), scored the same way (a fixed
  value is not chosen per ladder, so its figure is the same in and out of sample);

and every grid value's own figure. Ties are broken towards today's default, then grid order.

The building blocks are computed once per ladder, exactly as ``bench_calibration.py`` does
(its functions are imported, not rewritten), and the grid is re-scored from them without a
refit:

* **Recency** (:data:`delphi.selection.RECENCY`, read by :func:`delphi.selection.fold_weights`
  at each call): one :func:`delphi.selection.compare` per ladder (every default candidate
  refitted leave-future-out at the same cuts), then ``bench_calibration.bench_ladder`` on that
  comparison under each grid value: the nested auto (choice on earlier folds only) and its
  mean |log error|. Chosen by the pooled mean |log error| over predictions (lower is better).
* **t-factor** (:meth:`delphi.calibration.CalibrationModel.small_sample_factor`): one
  :func:`delphi.calibration.calibration_backtest` of the default law per ladder (the nested
  calibrated 90% new-run intervals of ``bench_calibration.py``), with each calibrated
  interval's parts recorded as delphi computes them (sigma(r) of the model fitted on earlier
  folds, its number of folds n, the fit's parameter and run-noise sds); the half-width under a
  factor f(n) is z sqrt((f(n) sigma(r))^2 + param_sd^2 + run_sd^2). Today's factor reproduces
  the backtest's intervals exactly (checked). Chosen by the mean interval score of Gneiting &
  Raftery (2007, Eq. 43) on log loss with alpha = 0.1, S = (u - l) + (2/alpha)(l - y)[y < l]
  + (2/alpha)(y - u)[y > u] (lower is better: it charges width and misses alike); coverage
  (pooled, lowest ladder) and mean half-width beside it.
* **t-factor inside the shipped blend** (``--no-blend`` skips it): what ``delphi predict``
  now does with a ladder that can calibrate itself, the own calibration shrunk towards the
  reference class, s(r) = w f(n) sigma_own(r) + (1 - w) sigma_ref(r), w = n / (n + 3), the
  reference class rebuilt without the ladder; the rows of ``bench_reference.py``'s evaluation
  (frontier runs of each ladder's default law; a fold without 3 earlier folds gets the
  reference interval, the same for every f), pooled over its ladders as it pools them.

The t-factor grid: ``z`` (f = 1: sigma(r) used as fitted), ``t(n-1)`` (today: t_{n-1} / z,
the folds as the independent units of a scale estimated from n of them), ``t(n-2)``
(t_{n-2} / z: sigma(r) = sigma_0 + k log10 r is a line, two coefficients fitted from the n
folds, so a regression's residual degrees of freedom are n - 2, as in the prediction interval
of a simple linear regression; at least 1 dof). Pooled ladders are ``bench_calibration``'s;
its extra rows (not pooled) are scored with the value chosen on all pooled ladders: ladders no
choice saw.

Deterministic (seed 0 for every fit), no network. Usage:
python benchmarks/bench_rules_lolo.py [--quick] [--only NAME ...] [--no-blend] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import warnings
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Hashable, Mapping, Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_calibration as bc  # noqa: E402

LEVEL = bc.LEVEL
ALPHA = 1 - LEVEL
SEED = bc.SEED
#: Recency weights tried (a fold weighs this many times the one before; 1: uniform).
RECENCY_GRID = (1.0, 2.0, 4.0, 8.0)
RECENCY_DEFAULT = 4.0
#: t-factor variants: name -> degrees of freedom as n_folds minus this (None: f = 1).
T_FACTORS = {"z": None, "t(n-1)": 1, "t(n-2)": 2}
T_DEFAULT = "t(n-1)"
#: The factor the shipped blend applies to the own calibration's sigma(r) (delphi.reference.blend):
#: none since this benchmark found z better on every ladder left out (it was t(n-1) before).
BLEND_DEFAULT = "z"
#: Coverage targets of issue 21 for calibrated 90% intervals: pooled in this range, no ladder
#: below the floor (the filter of the "meeting the coverage targets" rows).
COVERAGE_RANGE = (0.85, 0.95)
COVERAGE_FLOOR = 0.75


# ------------------------------------------------------------------------ pure functions
def t_factor(name: str, n_folds, level: float = LEVEL) -> np.ndarray:
    """The factor sigma(r) is widened by under variant ``name`` of :data:`T_FACTORS`, for
    calibration models fitted from ``n_folds`` folds (array-like): 1 for ``z``, else
    t_{max(n - k, 1)} / z at the two-sided ``level``."""
    from scipy.stats import norm, t
    n = np.asarray(n_folds, float)
    k = T_FACTORS[name]
    if k is None:
        return np.ones_like(n)
    q = 0.5 + level / 2
    return t.ppf(q, np.maximum(n - k, 1.0)) / norm.ppf(q)


def half_width(sigma, factor, param_sd, run_sd, level: float = LEVEL) -> np.ndarray:
    """Half-width [log loss] of the calibrated new-run interval: z sqrt((f sigma)^2 + param^2
    + run^2), as :meth:`delphi.calibration.CalibrationModel.interval`."""
    from scipy.stats import norm
    z = float(norm.ppf(0.5 + level / 2))
    s = np.asarray(factor, float) * np.asarray(sigma, float)
    return z * np.sqrt(s ** 2 + np.asarray(param_sd, float) ** 2 + np.asarray(run_sd, float) ** 2)


def interval_scores(log_error, half, alpha: float = ALPHA) -> np.ndarray:
    """Gneiting & Raftery (2007), Eq. 43, per prediction, on log loss, for the interval
    centre +- ``half`` around the forecast: 2 half + (2/alpha) max(|e| - half, 0), with e =
    log L_pred - log L_obs (the same as ``bench_reference.interval_score(-h, h, -e)``)."""
    e = np.abs(np.asarray(log_error, float))
    h = np.asarray(half, float)
    return 2 * h + (2 / alpha) * np.maximum(e - h, 0.0)


def pooled_mean(table: Mapping[str, Mapping[Hashable, np.ndarray]], value: Hashable,
                ladders: Sequence[str] | None = None, weighting: str = "pooled") -> float:
    """Mean of ``table[ladder][value]`` over ``ladders`` (default all): over predictions
    (``weighting="pooled"``) or the mean of the ladders' means (``"ladder"``). NaN when no
    ladder has a prediction."""
    names = [n for n in (table if ladders is None else ladders)
             if len(np.asarray(table[n][value]))]
    if not names:
        return float("nan")
    if weighting == "ladder":
        return float(np.mean([np.mean(table[n][value]) for n in names]))
    if weighting != "pooled":
        raise ValueError(f"weighting must be 'pooled' or 'ladder', got {weighting!r}")
    return float(np.mean(np.concatenate([np.asarray(table[n][value], float) for n in names])))


def choose(table: Mapping[str, Mapping[Hashable, np.ndarray]], values: Sequence[Hashable],
           default: Hashable, ladders: Sequence[str] | None = None,
           weighting: str = "pooled", rtol: float = 1e-9) -> Hashable:
    """The value of ``values`` with the lowest :func:`pooled_mean` over ``ladders``; a value
    within ``rtol`` of the lowest ties, and ties go to ``default``, then to grid order."""
    score = {v: pooled_mean(table, v, ladders, weighting) for v in values}
    finite = [s for s in score.values() if math.isfinite(s)]
    if not finite:
        return default
    best = min(finite)
    tied = [v for v in values if math.isfinite(score[v]) and score[v] <= best + rtol * abs(best)]
    return default if default in tied else tied[0]


def lolo(table: Mapping[str, Mapping[Hashable, np.ndarray]], values: Sequence[Hashable],
         default: Hashable, weighting: str = "pooled",
         admissible: Callable[[Sequence[str]], Sequence[Hashable]] | None = None) -> dict:
    """Leave one ladder out: ``in_sample`` (the value :func:`choose` picks on every ladder of
    ``table``) and ``chosen`` (ladder -> the value it picks on the other ladders).

    ``admissible(ladders)``: the values allowed when choosing on ``ladders`` (e.g. those whose
    coverage there meets a target); all of ``values`` when it allows none or is None."""
    names = list(table)

    def pick(on):
        allowed = [v for v in values if admissible is None or v in set(admissible(on))]
        return choose(table, allowed or values, default, on, weighting)
    return {"in_sample": pick(names),
            "chosen": {n: pick([m for m in names if m != n]) for n in names}}


def coverage_admissible(inside: Mapping[str, Mapping[Hashable, np.ndarray]],
                        values: Sequence[Hashable], cov_range=COVERAGE_RANGE,
                        floor: float = COVERAGE_FLOOR) -> Callable[[Sequence[str]], list]:
    """The issue's coverage targets as a filter for :func:`lolo`: on ``ladders``, the values
    whose pooled coverage (``inside``: ladder -> value -> 0/1 per prediction) lies in
    ``cov_range`` and whose lowest ladder covers at least ``floor``."""
    def ok(ladders):
        out = []
        for v in values:
            names = [n for n in ladders if len(inside[n][v])]
            if not names:
                continue
            c = pooled_mean(inside, v, names)
            low = min(float(np.mean(inside[n][v])) for n in names)
            if cov_range[0] <= c <= cov_range[1] and low >= floor:
                out.append(v)
        return out
    return ok


def score_choice(table: Mapping[str, Mapping[Hashable, np.ndarray]],
                 chosen: Mapping[str, Hashable]) -> np.ndarray:
    """Each ladder's predictions under its own chosen value, concatenated (in ladder order)."""
    parts = [np.asarray(table[n][v], float) for n, v in chosen.items()]
    return np.concatenate(parts) if parts else np.array([])


def per_ladder_min(table: Mapping[str, Mapping[Hashable, np.ndarray]],
                   chosen: Mapping[str, Hashable]) -> tuple[str, float] | None:
    """(ladder, mean) of the ladder with the lowest mean under its chosen value."""
    means = {n: float(np.mean(table[n][v])) for n, v in chosen.items() if len(table[n][v])}
    return min(means.items(), key=lambda kv: kv[1]) if means else None


# ------------------------------------------------------------------ building blocks
@contextmanager
def recency(value: float):
    """``delphi.selection.RECENCY`` set to ``value`` (read by ``fold_weights`` at each call)."""
    import delphi.selection as sel
    old = sel.RECENCY
    sel.RECENCY = float(value)
    try:
        yield
    finally:
        sel.RECENCY = old


@contextmanager
def recorded_intervals():
    """Record the ``calibration`` dict of every calibrated interval
    :func:`delphi.calibration.calibration_backtest` makes, in row order.

    The backtest computes a fold's intervals at once on arrays (``_fold_intervals``, the same
    bits as one point at a time, commit 0a6f2d0) and calls ``calibrated_interval`` only for a
    point that must be computed alone; while recording, the array path is switched off, so
    every kept row goes through ``calibrated_interval`` (the same numbers: :func:`t_blocks`
    checks today's factor reproduces the backtest's half-widths)."""
    import delphi.forecasting.calibration as cal
    original, arrays = cal.calibrated_interval, cal._fold_intervals
    log: list[dict] = []

    def recording(base, centre, model, ratio):
        iv = original(base, centre, model, ratio)
        log.append(dict(iv.calibration))
        return iv

    cal.calibrated_interval = recording
    cal._fold_intervals = lambda *args, **kwargs: None
    try:
        yield log
    finally:
        cal.calibrated_interval, cal._fold_intervals = original, arrays


def recency_blocks(ladder, max_folds: int) -> dict:
    """Nested auto's per-prediction |log error| under each :data:`RECENCY_GRID` value, from
    one ``compare`` (``bench_calibration.bench_ladder`` on it under each value)."""
    from delphi.errors import DelphiError
    from delphi.selection import compare, default_candidates
    out: dict = {"why": None, "auto": {}, "picks": {}, "n_pairs": 0}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            comp = compare(ladder, default_candidates(ladder), max_folds=max_folds, level=LEVEL,
                           seed=SEED)
    except DelphiError as exc:
        out["why"] = f"no candidate can be backtested: {exc}"
        return out
    if comp.rule != "backtest" or any(sc.backtest is None for sc in comp.ranked):
        # fewer than 3 shared cuts: compare ranks by the reference class, no recency involved
        out["why"] = (f"compare ranks by the {comp.rule} rule ({len(comp.cuts)} shared "
                      f"cut(s)): no nested auto to score")
        return out
    for v in RECENCY_GRID:
        with recency(v):
            r = bc.bench_ladder(ladder, comparison=comp, max_folds=max_folds, coverage=False)
        if not r.get("_arrays"):
            out["why"] = r.get("why")
            return out
        out["auto"][v] = np.abs(r["_arrays"]["auto"])
        out["picks"][v] = r["auto_choices"]
        out["n_pairs"] = r["n_pairs"]
        out["default_mae"] = r["mae"]["default"]
    return out


def t_blocks(ladder, max_folds: int) -> dict:
    """Per calibrated prediction of the default law's nested calibration backtest: the log
    error and the interval's parts (sigma(r), n folds, parameter and run-noise sds)."""
    from delphi.calibration import calibration_backtest
    from delphi.errors import DelphiError
    from delphi.forecast import default_law
    law = default_law(ladder)
    try:
        with warnings.catch_warnings(), recorded_intervals() as log:
            warnings.simplefilter("ignore")
            bt = calibration_backtest(ladder, law, level=LEVEL, max_folds=max_folds, seed=SEED)
    except DelphiError as exc:
        return {"why": f"default law {law} cannot be backtested: {exc}", "n": 0}
    n = len(bt.log_error)
    if len(log) != n:
        raise RuntimeError(f"{ladder.name}: {len(log)} calibrated intervals recorded for {n} "
                           f"rows")
    if not n:
        return {"why": f"{bt.errors.n_folds} fold(s): a calibrated interval needs 3 earlier "
                       f"folds", "n": 0}
    blk = {"why": None, "n": n, "log_error": np.asarray(bt.log_error, float),
           "sigma": np.array([c["sigma_at_target"] for c in log]),
           "n_folds": np.array([c["n_folds"] for c in log], float),
           "param_sd": np.array([c["param_sd"] for c in log]),
           "run_sd": np.array([c["run_sd"] for c in log])}
    # today's factor must reproduce the library's intervals
    f = t_factor(T_DEFAULT, blk["n_folds"])
    if not np.allclose(f, [c["small_sample_factor"] for c in log], rtol=1e-12):
        raise RuntimeError(f"{ladder.name}: t({T_DEFAULT}) differs from small_sample_factor")
    h = half_width(blk["sigma"], f, blk["param_sd"], blk["run_sd"])
    if not np.allclose(h, bt.width_after, rtol=1e-9, atol=1e-12):
        raise RuntimeError(f"{ladder.name}: recomputed half-widths differ from the backtest's")
    agree = (np.abs(blk["log_error"]) <= h) == np.asarray(bt.inside_after, bool)
    blk["n_disagree"] = int((~agree).sum())     # only at an interval's edge, to rounding
    return blk


def t_tables(blocks: Mapping[str, dict]) -> tuple[dict, dict, dict]:
    """(interval score, inside, half-width) tables: ladder -> variant -> per-prediction array."""
    score, inside, width = {}, {}, {}
    for name, b in blocks.items():
        score[name], inside[name], width[name] = {}, {}, {}
        for v in T_FACTORS:
            h = half_width(b["sigma"], t_factor(v, b["n_folds"]), b["param_sd"], b["run_sd"])
            score[name][v] = interval_scores(b["log_error"], h)
            inside[name][v] = (np.abs(b["log_error"]) <= h).astype(float)
            width[name][v] = h
    return score, inside, width


def blend_tables(rows: Sequence[dict]) -> tuple[dict, dict, dict]:
    """The same tables for the shipped blend, from ``bench_reference``'s evaluation rows (the
    reference class without the ladder): the own part's factor replaced by each variant's."""
    from bench_reference import _blend_half
    from delphi.reference import PRIOR_FOLDS
    score: dict = {}
    inside: dict = {}
    width: dict = {}
    for r in rows:
        lad = r["ladder"]
        for d in (score, inside, width):
            d.setdefault(lad, {v: [] for v in T_FACTORS})
        for v in T_FACTORS:
            row = r
            if r["own_s"] is not None:
                # bench_reference's own_s is the own sigma(r) unwidened (the shipped blend
                # applies no factor): each variant's factor multiplies it
                row = {**r, "own_s": r["own_s"] * float(t_factor(v, r["own_n"]))}
            h = _blend_half(row, PRIOR_FOLDS)
            score[lad][v].append(float(interval_scores(r["log_error"], h)))
            inside[lad][v].append(float(abs(r["log_error"]) <= h))
            width[lad][v].append(h)
    conv = lambda d: {k: {v: np.asarray(a, float) for v, a in x.items()} for k, x in d.items()}  # noqa: E731
    return conv(score), conv(inside), conv(width)


# ------------------------------------------------------------------------------ summary
def summarise_rule(crit: dict, values: Sequence, default, extra: Mapping[str, dict] | None = None,
                   others: Mapping[str, dict] | None = None,
                   admissible: Callable[[Sequence[str]], Sequence] | None = None) -> dict:
    """In-sample, leave-one-ladder-out and default figures of one rule.

    ``crit``: the criterion table (ladder -> value -> per-prediction, lower is better) over
    the pooled ladders; ``others``: further tables (name -> table) scored with the same
    choices; ``extra``: criterion tables of unpooled ladders (scored with the in-sample
    choice); ``admissible``: a filter of values (:func:`coverage_admissible`) for the extra
    rows ``in_sample_constrained`` and ``lolo_constrained``."""
    others = dict(others or {})
    res = lolo(crit, values, default)
    res_ladder = lolo(crit, values, default, weighting="ladder")
    ins = {n: res["in_sample"] for n in crit}
    dflt = {n: default for n in crit}
    choices = [("in_sample", ins), ("lolo", res["chosen"]), ("default", dflt),
               ("lolo_ladder_weighted", res_ladder["chosen"])]
    res_c = None
    if admissible is not None:
        res_c = lolo(crit, values, default, admissible=admissible)
        choices += [("in_sample_constrained", {n: res_c["in_sample"] for n in crit}),
                    ("lolo_constrained", res_c["chosen"])]
    rows = {}
    for label, chosen in choices:
        row = {"criterion": float(np.mean(score_choice(crit, chosen))),
               "criterion_ladder_mean": float(np.mean([np.mean(crit[n][v])
                                                        for n, v in chosen.items()])),
               "per_ladder": {n: float(np.mean(crit[n][v])) for n, v in chosen.items()}}
        for oname, tab in others.items():
            row[oname] = float(np.mean(score_choice(tab, chosen)))
            row[f"{oname}_min_ladder"] = per_ladder_min(tab, chosen)
        rows[label] = row
    grid = {}
    for v in values:
        chosen = {n: v for n in crit}
        g = {"criterion": pooled_mean(crit, v), "criterion_ladder_mean":
             pooled_mean(crit, v, weighting="ladder"),
             "per_ladder": {n: float(np.mean(crit[n][v])) for n in crit}}
        for oname, tab in others.items():
            g[oname] = float(np.mean(score_choice(tab, chosen)))
            g[f"{oname}_min_ladder"] = per_ladder_min(tab, chosen)
        grid[v] = g
    out = {"in_sample_value": res["in_sample"], "chosen": res["chosen"],
           "chosen_ladder_weighted": res_ladder["chosen"], "rows": rows, "grid": grid,
           "in_sample_constrained_value": res_c["in_sample"] if res_c else None,
           "chosen_constrained": res_c["chosen"] if res_c else None,
           "n": int(sum(len(crit[n][default]) for n in crit))}
    if extra:
        out["extra"] = {n: {"value": res["in_sample"],
                            "criterion": float(np.mean(t[res["in_sample"]])),
                            "default": float(np.mean(t[default])),
                            "grid": {v: float(np.mean(t[v])) for v in values}}
                        for n, t in extra.items() if len(t[default])}
    return out


# ------------------------------------------------------------------------------ printing
def _pc(v, d=2) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else \
        f"{100 * v:.{d}f}%"


def _fmt_value(v) -> str:
    return f"{v:g}x" if isinstance(v, float) else str(v)


def recency_table(s: dict, default=RECENCY_DEFAULT) -> list[str]:
    """Markdown: the grid, then in sample / leave one ladder out / default side by side."""
    lines = ["| recency | nested auto mean abs log error, pooled | mean of ladders |",
             "|---|---|---|"]
    for v, g in s["grid"].items():
        mark = " (today)" if v == default else ""
        lines.append(f"| {_fmt_value(v)}{mark} | {_pc(g['criterion'])} | "
                     f"{_pc(g['criterion_ladder_mean'])} |")
    r = s["rows"]
    chosen = ", ".join(f"{n} {_fmt_value(v)}" for n, v in s["chosen"].items())
    lines += ["", "| how the value is chosen | value | pooled (n = %d) | mean of ladders |"
              % s["n"], "|---|---|---|---|",
              f"| in sample (best on all ladders) | {_fmt_value(s['in_sample_value'])} | "
              f"{_pc(r['in_sample']['criterion'])} | "
              f"{_pc(r['in_sample']['criterion_ladder_mean'])} |",
              f"| **leave one ladder out** (best on the others) | per ladder | "
              f"**{_pc(r['lolo']['criterion'])}** | {_pc(r['lolo']['criterion_ladder_mean'])} |",
              f"| leave one ladder out, chosen by the mean of ladders | per ladder | "
              f"{_pc(r['lolo_ladder_weighted']['criterion'])} | "
              f"{_pc(r['lolo_ladder_weighted']['criterion_ladder_mean'])} |",
              f"| today's default | {_fmt_value(default)} | {_pc(r['default']['criterion'])} | "
              f"{_pc(r['default']['criterion_ladder_mean'])} |",
              "", f"Chosen on the other ladders: {chosen}."]
    return lines


def recency_ladders(s: dict, blocks: Mapping[str, dict], default=RECENCY_DEFAULT) -> list[str]:
    head = " | ".join(_fmt_value(v) for v in RECENCY_GRID)
    lines = [f"| ladder | pairs | {head} | chosen on the others -> its figure | auto's picks at "
             f"{_fmt_value(default)} |",
             "|---|---|" + "---|" * len(RECENCY_GRID) + "---|---|"]
    for n, g in s["rows"]["lolo"]["per_ladder"].items():
        cells = " | ".join(_pc(s["grid"][v]["per_ladder"][n]) for v in RECENCY_GRID)
        picks = ", ".join(f"{k} {c}" for k, c in blocks[n]["picks"][default].items() if c)
        lines.append(f"| {n} | {blocks[n]['n_pairs']} | {cells} | "
                     f"{_fmt_value(s['chosen'][n])} -> {_pc(g)} | {picks} |")
    for n, x in (s.get("extra") or {}).items():
        cells = " | ".join(_pc(x["grid"][v]) for v in RECENCY_GRID)
        lines.append(f"| {n} (extra) | {blocks[n]['n_pairs']} | {cells} | "
                     f"{_fmt_value(x['value'])} (in-sample choice) -> {_pc(x['criterion'])} | "
                     + ", ".join(f"{k} {c}" for k, c in blocks[n]["picks"][default].items() if c)
                     + " |")
    return lines


def t_table(s: dict, default=T_DEFAULT) -> list[str]:
    def ml(m):
        return "-" if m is None else f"{m[0]} {_pc(m[1], 0)}"
    lines = ["| t-factor | interval score, pooled | mean of ladders | 90% coverage, pooled | "
             "lowest ladder | mean half-width |", "|---|---|---|---|---|---|"]
    for v, g in s["grid"].items():
        mark = " (today)" if v == default else ""
        lines.append(f"| {v}{mark} | {g['criterion']:.4f} | {g['criterion_ladder_mean']:.4f} | "
                     f"{_pc(g['inside'], 1)} | {ml(g['inside_min_ladder'])} | "
                     f"{_pc(g['width'])} |")
    r = s["rows"]
    lines += ["", f"| how the variant is chosen | variant | interval score, pooled (n = "
                  f"{s['n']}) | mean of ladders | 90% coverage, pooled | lowest ladder | "
                  f"mean half-width |", "|---|---|---|---|---|---|---|"]
    for label, key, val in (("in sample (best on all ladders)", "in_sample", s["in_sample_value"]),
                            ("**leave one ladder out** (best on the others)", "lolo",
                             "per ladder"),
                            ("leave one ladder out, chosen by the mean of ladders",
                             "lolo_ladder_weighted", "per ladder"),
                            ("in sample, among variants meeting the coverage targets",
                             "in_sample_constrained", s.get("in_sample_constrained_value")),
                            ("leave one ladder out, among variants meeting the coverage "
                             "targets on the others", "lolo_constrained", "per ladder"),
                            ("today's default", "default", default)):
        if key not in r:
            continue
        x = r[key]
        lines.append(f"| {label} | {val} | {x['criterion']:.4f} | "
                     f"{x['criterion_ladder_mean']:.4f} | {_pc(x['inside'], 1)} | "
                     f"{ml(x['inside_min_ladder'])} | {_pc(x['width'])} |")
    lines += ["", "Chosen on the other ladders: "
              + ", ".join(f"{n} {v}" for n, v in s["chosen"].items()) + "."]
    if s.get("chosen_constrained"):
        lines.append("Chosen on the other ladders among variants meeting the coverage targets "
                     "there (pooled 85-95%, no ladder below 75%; all variants when none does): "
                     + ", ".join(f"{n} {v}" for n, v in s["chosen_constrained"].items()) + ".")
    return lines


def t_ladders(s: dict, inside: dict, extra_inside: dict | None = None) -> list[str]:
    head = " / ".join(T_FACTORS)
    lines = [f"| ladder | n | interval score {head} | coverage {head} | chosen on the others |",
             "|---|---|" + "---|" * 2 + "---|"]
    for n in s["rows"]["lolo"]["per_ladder"]:
        sc = " / ".join(f"{s['grid'][v]['per_ladder'][n]:.3f}" for v in T_FACTORS)
        cv = " / ".join(_pc(float(np.mean(inside[n][v])), 0) for v in T_FACTORS)
        lines.append(f"| {n} | {len(inside[n][T_DEFAULT])} | {sc} | {cv} | {s['chosen'][n]} |")
    for n, x in (s.get("extra") or {}).items():
        sc = " / ".join(f"{x['grid'][v]:.3f}" for v in T_FACTORS)
        cv = " / ".join(_pc(float(np.mean(extra_inside[n][v])), 0) for v in T_FACTORS)
        lines.append(f"| {n} (extra) | {len(extra_inside[n][T_DEFAULT])} | {sc} | {cv} | "
                     f"{x['value']} (in-sample choice) |")
    return lines


# --------------------------------------------------------------------------------- main
def collect(names: Sequence[str] | None, max_folds: int, verbose: bool = True) -> dict:
    """Per ladder of ``bench_calibration.LADDERS`` (or ``names``): the recency and t-factor
    building blocks, and whether it is pooled."""
    from delphi.errors import DelphiError
    out = {}
    for name, pooled in bc.LADDERS:
        if names and name not in names:
            continue
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ladder = bc.load(name)
        except DelphiError as exc:
            out[name] = {"pooled": pooled, "why": f"not loaded: {exc}",
                         "recency": {"why": "not loaded"}, "t": {"why": "not loaded", "n": 0}}
            continue
        rec = recency_blocks(ladder, max_folds)
        tb = t_blocks(ladder, max_folds)
        out[name] = {"pooled": pooled, "recency": rec, "t": tb,
                     "seconds": time.perf_counter() - t0}
        if verbose:
            a = rec["auto"]
            print(f"  {name}: {out[name]['seconds']:.0f} s; auto "
                  + ", ".join(f"{_fmt_value(v)} {_pc(float(np.mean(a[v])))}" for v in a)
                  + (f" ({rec['why']})" if rec.get("why") else "")
                  + f"; calibrated predictions {tb['n']}"
                  + (f" ({tb['why']})" if tb.get("why") else ""), flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 folds a ladder instead of 12")
    parser.add_argument("--only", nargs="*", help="ladder names (default: all)")
    parser.add_argument("--no-blend", action="store_true",
                        help="skip the t-factor inside the shipped blend (bench_reference rows)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits
    max_folds = 6 if args.quick else bc.MAX_FOLDS
    started = time.perf_counter()
    payload: dict = {"seed": SEED, "level": LEVEL, "max_folds": max_folds}
    with threadpool_limits(1):   # small matrices; leave the other core to the machine
        blocks = collect(args.only, max_folds)
        t_collect = time.perf_counter() - started
        rows = None
        if not args.no_blend:
            import bench_reference as br
            from delphi.reference import load_reference
            t1 = time.perf_counter()
            rows, _ = br.evaluate(args.only, load_reference(), verbose=True)
            t_blend = time.perf_counter() - t1
    elapsed = time.perf_counter() - started
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print()
    print(f"Leave one ladder out over bench_calibration's pooled ladders, at most {max_folds} "
          f"folds a ladder, seed {SEED}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; "
          f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{elapsed:.0f} s ({t_collect:.0f} s building blocks"
          + (f", {t_blend:.0f} s blend rows" if rows is not None else "") + ")"
          + (f"; load {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}" if load else ""))

    # recency
    rec_ok = {n: b["recency"] for n, b in blocks.items() if b["recency"].get("auto")}
    crit = {n: b["auto"] for n, b in rec_ok.items() if blocks[n]["pooled"]}
    extra = {n: b["auto"] for n, b in rec_ok.items() if not blocks[n]["pooled"]}
    skipped = {n: b["recency"].get("why") for n, b in blocks.items() if n not in rec_ok}
    if crit:
        s = summarise_rule(crit, RECENCY_GRID, RECENCY_DEFAULT, extra)
        payload["recency"] = {**s, "skipped": skipped}
        print("\n### Recency weight (nested auto, mean |log error|; lower is better)\n")
        print("\n".join(recency_table(s)))
        print()
        print("\n".join(recency_ladders(s, rec_ok)))
        if skipped:
            print("\nNot scored: " + "; ".join(f"{n}: {str(w)[:160]}" for n, w in
                                               skipped.items()))

    # t-factor, own calibration (bench_calibration's coverage)
    t_ok = {n: b["t"] for n, b in blocks.items() if b["t"].get("n")}
    score, inside, width = t_tables(t_ok)
    pooled_names = [n for n in t_ok if blocks[n]["pooled"]]
    sub = lambda d, names: {n: d[n] for n in names}  # noqa: E731
    if pooled_names:
        extra_names = [n for n in t_ok if not blocks[n]["pooled"]]
        s = summarise_rule(sub(score, pooled_names), list(T_FACTORS), T_DEFAULT,
                           sub(score, extra_names),
                           {"inside": sub(inside, pooled_names),
                            "width": sub(width, pooled_names)},
                           coverage_admissible(sub(inside, pooled_names), list(T_FACTORS)))
        s["n_disagree"] = {n: t_ok[n]["n_disagree"] for n in t_ok}
        payload["t_factor"] = s
        print("\n### t-factor, the ladder's own calibration (bench_calibration's nested "
              "calibrated 90% intervals of the default law)\n")
        print("\n".join(t_table(s)))
        print()
        print("\n".join(t_ladders(s, inside, sub(inside, extra_names))))
        nd = sum(s["n_disagree"].values())
        print(f"\n(recomputed intervals agree with calibration_backtest's; {nd} inside/outside "
              f"flips at an interval's edge from rounding)")

    # t-factor inside the shipped blend
    if rows is not None and rows:
        bscore, binside, bwidth = blend_tables(rows)
        # the shipped blend applies no factor since this benchmark chose z out of sample
        s = summarise_rule(bscore, list(T_FACTORS), BLEND_DEFAULT, None,
                           {"inside": binside, "width": bwidth},
                           coverage_admissible(binside, list(T_FACTORS)))
        n_own = sum(r["own_s"] is not None for r in rows)
        s["n_with_own"] = n_own
        payload["t_factor_blend"] = s
        print(f"\n### t-factor inside the shipped blend (w = n/(n+3), reference class without "
              f"the ladder; bench_reference's {len(rows)} frontier predictions on "
              f"{len(bscore)} ladders, {n_own} with an own calibration)\n")
        print("\n".join(t_table(s)))
        print()
        print("\n".join(t_ladders(s, binside)))
    if args.json:
        Path(args.json).write_text(json.dumps(payload, indent=1, default=str))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
