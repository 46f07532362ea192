"""Benchmark (issue 26): replay the largest runs of the public curve ladders as if live.

Hero runs, each forecast from the smaller rungs only and then tracked checkpoint by checkpoint
with :func:`delphi.track` (a fresh registry per run: register with the curve, append an outcome
per checkpoint, score, revise):

* OLMo ladder (Bhagia et al. 2024): the five 3B runs (0.5..10 x Chinchilla), ladder fitted on
  the 190M..1B runs; target schedule ``cosine:warmup=1000,final=0.1`` (the logged LR of the
  3B runs: linear warm-up to step ~1,000, cosine to 0.1 x peak at the last step), batch
  3,145,728 tokens.
* (Mis)Fitting (Li et al. 2025): the twelve 400M runs (3 peak LRs x 4 lengths), ladder
  fitted on every smaller model; schedule ``cosine:warmup=50,final=0.1``, batch 512 x 2048.

The band's size term (``size_holdout_errors``, ``size_band``) was added after the
interval-only band missed OLMo 3B-0.5xC on these heroes, so its figures on them are in
sample; it is scored out of sample on each ladder's second-largest size fitted on the sizes
below it (``--oos``; the (Mis)Fitting ladder by default: below 1B the OLMo ladder has too few
sizes for a fold), and every replay is scored with and without it, side by side. The
precision weighting, the patience and the run-only error model (measured on the fitted
ladder's own runs) were fixed before the replays.

Figures:

* band coverage: share of replayed checkpoints after warm-up inside the preregistered 90%
  band (target 85-95%);
* at 25%, 50%, 75% of each run (its first checkpoint at or after that fraction): median
  |ln(final / forecast)| of the revised, the ladder-only and the run-only forecasts (target:
  revised below both), and the revised interval's coverage of the final loss over (run,
  fraction) pairs (target 85-95%);
* replay time of a whole run, and of a synthetic 2,000-checkpoint run (the 3B-10xC forecast
  followed at 2,000 evenly spaced steps, its curve with 0.2% noise; target < 60 s);
* refit cost per checkpoint (the run-only completion, warm-started; mean over the 2,000
  checkpoints, full searches included) over one Epoch ``chinchilla`` fit in this process
  (target <= 5x);
* the multi-power completion of ``bench_curves.py`` (one 2,000-step run, 1,600 checkpoints)
  over the same Epoch fit (issue 8 target <= 20x; not changed by this issue).

Revision rules side by side: every forecast is made with the early completion's error
(``predict_curve(early_completion=True)``) and the fold correlations (``correlated=True``)
measured, and replayed once per rule of ``VARIANTS`` with the other fields removed (the
main tables: ``predict_curve``'s defaults); the run-only figures are the tracker's completion,
else the early one (from warm-up), the same for every rule.

Fold weights (``predict_curve(fold_weights=...)``, off by default; replayed as variants):
once anchored, the ladder forecast's weight is shrunk from the precision weight towards the
weight measured on the fit ladder's size folds by a share (``FOLD_WEIGHT_SHARE`` = 0.25, chosen
on the in-sample heroes among the shares of ``VARIANTS`` before the out-of-sample replays).
``--oos-down 1 2 3`` replays three out-of-sample sets (one, two and three sizes down).

Carry-over anchoring (the ladder forecast anchored to the run's deviation so far, rho and sd
measured on each fit ladder's own size folds: ``target_curve.carry_over``) is on; ``--no-anchor``
registers the forecasts without it (the figures before it). The per-fraction errors are shown
in sample (the issue's heroes) and out of sample (one size down, ``--oos``).

Usage: ``python benchmarks/bench_track.py [--n-boot 200] [--oos misfitting] [--oos-down 1 2 3] [--no-anchor]
[--write]``;
``--multipower-only K`` times only the multi-power completion against one Epoch fit, K times.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import delphi  # noqa: E402
from delphi.registry.tracking import track  # noqa: E402
from delphi.forecasting.completion_refit import WarmCompletion  # noqa: E402
from delphi.forecasting.target_curve import predict_curve  # noqa: E402
from delphi.inputs.ladder import Ladder  # noqa: E402
from delphi.inputs.schedules import Schedule  # noqa: E402

SECTION = "## Issue 26: tracking the big run while it trains (`benchmarks/bench_track.py`)"
FRACTIONS = (0.25, 0.5, 0.75)
#: Revision rules replayed side by side: (early completion, use of the correlation: False,
#: "weights" = BLUE, "variance" = inverse-variance weights with the correlated variance). Every
#: forecast is made with both measured; a variant registers it with the others' fields removed.
VARIANTS = {"independent": (False, False), "early": (True, False),
            "correlated weights": (False, "weights"),
            "correlated variance": (False, "variance"),
            "early+correlated weights": (True, "weights"),
            # 2026-12-03: BLUE only where the fold correlation is significant; the ladder
            # weight measured on the folds (their combination's least squares), shrunk
            # towards the precision weight by the share given (FOLD_WEIGHT_SHARE chosen on
            # the in-sample heroes among these)
            "significant correlated weights": (False, "significant"),
            "fold weights 0.25": (False, False, 0.25),
            "fold weights 0.5": (False, False, 0.5),
            "fold weights 0.75": (False, False, 0.75),
            "fold weights 1": (False, False, 1.0)}


def default_variant() -> str:
    """The variant ``predict_curve``'s defaults register."""
    import inspect
    p = inspect.signature(predict_curve).parameters
    from delphi.forecasting.target_curve import FOLD_WEIGHT_SHARE
    corr, fw = p["correlated"].default, p["fold_weights"].default
    on = (p["early_completion"].default, "weights" if corr is True else corr,
          FOLD_WEIGHT_SHARE if fw is True else (None if fw is False else fw))
    return next(k for k, v in VARIANTS.items() if (v + (None,))[:3] == on)


#: One-sided level of the test that the folds' correlation is above 0 ("significant").
SIGNIFICANCE = 0.05


def fold_pairs(cf) -> dict:
    """{fraction: runs with both the anchored residual and the completion error} on ``cf``'s
    size folds (the n of each carry-over correlation)."""
    n = {}
    for f in cf.size_folds:
        errs = getattr(f, "completion_errors", ()) or (None,) * len(f.deviations)
        for (q, _, _), c in zip(f.deviations, errs):
            if c is not None:
                n[round(q, 9)] = n.get(round(q, 9), 0) + 1
    return n


def significant(r: float, n: int, level: float = SIGNIFICANCE) -> bool:
    """Whether a correlation r of n pairs is above 0 at one-sided ``level`` (Student's t with
    n - 2 degrees of freedom, t = r sqrt((n - 2) / (1 - r^2)))."""
    from scipy.stats import t as student_t
    if n < 3 or r <= 0:
        return False
    return r * math.sqrt((n - 2) / (1 - r * r)) > student_t.ppf(1 - level, n - 2)


def variant(cf, early: bool, correlated, fold_share: float | None = None):
    """``cf`` with the early completion error, the carry-over's correlations and its fold
    weights kept or removed (what a record registered without them holds), the correlation
    used as ``correlated`` says (``"significant"``: the BLUE weights with the correlation
    set to 0 at the fractions where it is not significantly above 0), the fold weights with
    share ``fold_share`` (None: removed)."""
    fold_w = fold_share is not None
    from dataclasses import replace
    n = fold_pairs(cf) if correlated == "significant" else {}

    def corr(c):
        if not correlated or c.corr is None:
            return None
        if correlated == "significant":
            return c.corr if significant(c.corr, n.get(round(c.fraction, 9), 0)) else 0.0
        return c.corr
    return replace(cf, early_completion_error=cf.early_completion_error if early else (),
                   carry_over=tuple(replace(c, corr=corr(c),
                                            weight=c.weight if fold_w else None)
                                    for c in cf.carry_over),
                   correlation_use=("weights" if correlated in (False, "significant")
                                    else correlated),
                   fold_weight_share=fold_share)


def _sub(ladder: Ladder, keep, name: str) -> Ladder:
    t = ladder.table[keep].drop(columns=["row"], errors="ignore")
    return Ladder(t.reset_index(drop=True), name=name, metric=ladder.metric, unit=ladder.unit,
                  schedule=ladder.schedule, source=ladder.source)


def heroes(only=None, down: int = 0):
    """(ladder name, fit ladder, [(run, target dict, log DataFrame)]): the runs of each ladder's
    largest size (``down`` = 0, the issue's heroes) or of its ``down``-th size below the
    largest, fitted on the smaller sizes only (``down`` = 1: the out-of-sample check of a rule
    chosen on the issue's heroes; the largest size is then not used at all)."""
    out = []
    if only != "misfitting":
        out.append(_olmo(down))
    if only != "olmo":
        out.append(_misfitting(down))
    return out


def _label(n: float) -> str:
    return f"{n / 1e9:.3g}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def _olmo(down=0):
    olmo = delphi.load_ladder("olmo-ladder")
    t = olmo.table
    sizes = np.sort(t["params"].unique())
    hero = sizes[-1 - down]
    fit = _sub(olmo, t["params"] < hero, f"olmo-below-{_label(hero)}")
    runs = []
    for run in sorted(t.loc[t["params"] == hero, "run"].unique()):
        r = t[t["run"] == run].sort_values("step")
        steps = int(r["step"].max())
        runs.append((run, {"name": run, "params": float(r["params"].iloc[0]), "steps": steps,
                           "batch_size": float(r["batch_size"].iloc[0]),
                           "schedule": "cosine:warmup=1000,final=0.1"},
                     r[["step", "loss"]].reset_index(drop=True)))
    name = "olmo-ladder 3B (fit 190M-1B)" if down == 0 else \
        f"olmo-ladder {run.split('-')[0]} (fit 190M-{_label(sizes[-2 - down])})"
    return (name, fit, runs)


def _misfitting(down=0):
    mis = delphi.load_ladder("misfitting2025")
    t = mis.table
    sizes = np.sort(t["params"].unique())
    top = sizes[-1 - down]
    fit = _sub(mis, t["params"] < top, f"misfitting-below-{_label(top)}")
    runs = []
    for run in sorted(t.loc[t["params"] == top, "run"].unique()):
        r = t[t["run"] == run].sort_values("step")
        runs.append((run, {"name": run, "params": float(top),
                           "steps": int(r["total_steps"].iloc[0]),
                           "batch_size": float(r["batch_size"].iloc[0]),
                           "schedule": "cosine:warmup=50,final=0.1"},
                     r[["step", "loss"]].reset_index(drop=True)))
    name = "misfitting2025 400M (fit 12M-300M)" if down == 0 else \
        f"misfitting2025 {run.split('_')[1].split('-')[0]} (fit 12M-{_label(sizes[-2 - down])})"
    return (name, fit, runs)


def without_size_band(cf):
    """``cf`` with the band of the final interval alone (the rule before the size band)."""
    from dataclasses import replace
    from delphi.forecasting.target_curve import BAND_METHOD, CurvePoint
    lo, hi = cf.interval.lower / cf.loss, cf.interval.upper / cf.loss
    pts = tuple(CurvePoint(fraction=p.fraction, step=p.step, tokens=p.tokens, loss=p.loss,
                           lower=p.loss * lo, upper=p.loss * hi) for p in cf.points)
    return replace(cf, points=pts, band_method=BAND_METHOD, size_folds=())


def _replay(cf, run, target, log, folder, tag):
    reg = delphi.Registry(Path(folder) / f"{run}-{tag}.jsonl")
    reg.register(cf, id="hero")
    t0 = time.perf_counter()
    res = track(reg, "hero", log)
    return res, time.perf_counter() - t0


def replay_one(cf_all, t_forecast, run, target, log, folder):
    cf = variant(cf_all, *VARIANTS[default_variant()])
    res, t_replay = _replay(cf, run, target, log, folder, "band")
    res0, _ = _replay(without_size_band(cf), run, target, log, folder, "interval")
    runs = {k: _replay(variant(cf_all, *v), run, target, log, folder, k)[0]
            for k, v in VARIANTS.items()}
    final_step = int(target["steps"])
    last = log.iloc[-1]
    actual = float(last["loss"]) if int(last["step"]) >= final_step else None

    def scored(res):
        cps = [c for c in res.checkpoints if c.step < final_step]
        at = {}
        for q in FRACTIONS:
            after = [c for c in cps if c.fraction >= q - 1e-12]
            if after and actual is not None:
                c = after[0]
                r = c.revised
                at[q] = {"revised": abs(math.log(actual / r.loss)),
                         "ladder": abs(math.log(actual / cf.loss)),
                         "anchored": (None if r.anchored is None
                                      else abs(math.log(actual / r.anchored))),
                         "run": None if r.run_only is None else abs(math.log(actual / r.run_only)),
                         "covered": r.lower <= actual <= r.upper,
                         "ladder_weight": r.ladder_weight}
        return cps, [bool(c.inside) for c in cps if c.inside is not None], at

    # the run-only completion scored at every fraction: the tracker's (from the curve's
    # start), else the early one (from warm-up), as the early variant revises with
    _, _, at_early = scored(runs["early"])
    _, _, at_start = scored(runs["independent"])
    by_variant = {k: scored(v)[2] for k, v in runs.items()}

    def with_run_only(at):
        for q, a in at.items():
            a["run"] = at_early[q]["run"]
            a["run_start"] = at_start[q]["run"]     # the tracker's only (None before it fits)
        return at
    cps, inside, at = scored(res)
    _, inside0, at0 = scored(res0)
    at, at0 = with_run_only(at), with_run_only(at0)
    by_variant = {k: with_run_only(v) for k, v in by_variant.items()}
    last_pt = cf.points[-1]
    return {"cf": cf, "run": run, "n_checkpoints": len(cps), "inside": inside, "at": at,
            "inside0": inside0, "at0": at0, **{f"at_{k}": v for k, v in by_variant.items()},
            "forecast": cf.loss, "lower": last_pt.lower, "upper": last_pt.upper,
            "lower0": cf.lower, "upper0": cf.upper, "actual": actual,
            "t_forecast": t_forecast, "t_replay": t_replay, "alarm": res.alarm,
            "alarm_step": res.alarm_step}


def synthetic_replay(cf, target, folder, n=2000):
    """The 3B-10xC forecast ``cf`` followed at ``n`` evenly spaced steps (its curve, 0.2%
    noise)."""
    reg = delphi.Registry(Path(folder) / "synthetic.jsonl")
    reg.register(cf, id="syn")
    steps = np.unique(np.linspace(1, target["steps"], n).round().astype(int))
    f = np.array([p.fraction for p in cf.points])
    loss = np.interp(steps / target["steps"], f, [p.loss for p in cf.points])
    loss = loss * np.exp(np.random.default_rng(26).normal(0, 0.002, steps.size))
    log = pd.DataFrame({"step": steps, "loss": loss})
    t0 = time.perf_counter()
    res = track(reg, "syn", log)
    t_replay = time.perf_counter() - t0
    # the refits alone (no registry): mean cost per checkpoint, full searches included
    sched = Schedule.parse(target["schedule"], peak_lr=1.0, total_steps=target["steps"])
    wc = WarmCompletion(sched.lrs())
    t0 = time.perf_counter()
    for k in range(1, steps.size + 1):
        wc.predict(steps[:k], loss[:k])
    t_refits = time.perf_counter() - t0
    return {"n": int(steps.size), "n_scored": len(res.checkpoints), "t_replay": t_replay,
            "t_refit_mean": t_refits / steps.size, "n_full": wc.n_full_, "n_warm": wc.n_warm_}


def epoch_fit_seconds(repeats: int = 5) -> float:
    from bench_epoch_fit import epoch_points
    n, d, y = epoch_points()
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        delphi.fit_arrays("chinchilla", {"params": n, "tokens": d}, y)
        best = min(best, time.perf_counter() - t0)
    return best


def multipower_seconds() -> float:
    from bench_curves import multipower_ladder
    mp = multipower_ladder()
    t0 = time.perf_counter()
    delphi.complete(mp, "mp-2000", "multipower")
    return time.perf_counter() - t0


def _med(xs):
    xs = [x for x in xs if x is not None]
    return float(np.median(xs)) if xs else float("nan")


def stats(groups, inside="inside", at="at"):
    """Pooled figures of one configuration under one band rule."""
    pooled_in, cov, per = [], [], []
    keys = ("revised", "ladder", "run", "anchored", "run_start")
    q_err = {q: {k: [] for k in keys} for q in FRACTIONS}
    for name, results in groups:
        lad = [x for r in results for x in r[inside]]
        pooled_in += lad
        per.append((name, float(np.mean(lad)) if lad else float("nan"), len(lad)))
        for r in results:
            for q, a in r[at].items():
                for k in keys:
                    q_err[q][k].append(a.get(k))
                cov.append(a["covered"])
    med = {q: tuple(_med(q_err[q][k]) for k in ("revised", "ladder", "run")) for q in FRACTIONS}
    wins = sum(rv < ld and rv < ro for rv, ld, ro in med.values())
    anchored = {q: _med(q_err[q]["anchored"]) for q in FRACTIONS}
    # against the tracker's own completion only, over the runs that have one there
    start = {q: _med(q_err[q]["run_start"]) for q in FRACTIONS}
    n_start = {q: sum(x is not None for x in q_err[q]["run_start"]) for q in FRACTIONS}
    wins_start = sum(med[q][0] < med[q][1] and med[q][0] < start[q] for q in FRACTIONS)
    return {"run_start": start, "n_start": n_start, "wins_start": wins_start,"band": float(np.mean(pooled_in)) if pooled_in else float("nan"),
            "n": len(pooled_in), "per": per, "med": med, "wins": wins, "anchored": anchored,
            "revised_cov": float(np.mean(cov)) if cov else float("nan"), "n_cov": len(cov)}


def _sets(groups, oos):
    """(label, groups) of the in-sample heroes, then of each out-of-sample set when there are
    several (``--oos-down``), then of all out-of-sample heroes pooled."""
    out = [("in sample", groups)]
    if oos and len(oos) > 1:
        out += [(f"out of sample, {name.split(' (')[0]}", [(name, rs)]) for name, rs in oos]
        out.append(("out of sample, pooled", oos))
    elif oos:
        out.append(("out of sample", oos))
    return out


def summarise(groups, oos, syn, base, mp, anchor=True) -> list[str]:
    lines = [SECTION, "",
             "(run only at 25%: the tracker's completion from the curve's start has fewer "
             "than 6 checkpoints there; the run-only figures at 25% are the early "
             "completion's, the same law fitted from the end of warm-up.)", "",
             "Each hero run is forecast from the smaller rungs only (`predict_curve`, "
             "`chinchilla-ckpt`, default interval; band = the final 90% new-run interval's "
             "relative widths, widened to contain the law's leave-one-size-out errors at the "
             "target's tokens per parameter (`size_holdout_errors`: the two largest sizes of "
             "the fit ladder with at least 3 smaller sizes held out in turn, each fold fitted "
             "on the smaller sizes; error "
             "interpolated in ln(D/N), scaled by ln(N_target / N_max) over the fold's "
             "ln(N_k / N_fitted), plus 1.645 x run noise), carried along the curve), "
             "registered, then replayed checkpoint by checkpoint with `delphi.track` (outcome "
             "appended, scored against the band, final forecast revised by precision weighting "
             "in log space with the band at fraction 1 as the ladder's uncertainty, alarm at 3 "
             "consecutive out-of-band checkpoints). Runs sharing N, length, batch and schedule "
             "(the (Mis)Fitting peak LRs) share one forecast; its time is shown on each.", ""]
    lines += ["| ladder | run | checkpoints | band coverage (interval only) | ladder forecast "
              "[90% band at the end] (interval) | final | alarm at step | forecast s | "
              "replay s |", "|---|---|---|---|---|---|---|---|---|"]
    for name, results in groups:
        for r in results:
            cov = np.mean(r["inside"]) if r["inside"] else float("nan")
            cov0 = np.mean(r["inside0"]) if r["inside0"] else float("nan")
            lines.append(f"| {name} | {r['run']} | {r['n_checkpoints']} | {cov:.0%} ({cov0:.0%}) | "
                         f"{r['forecast']:.4f} [{r['lower']:.4f}, {r['upper']:.4f}] "
                         f"([{r['lower0']:.4f}, {r['upper0']:.4f}]) | "
                         f"{r['actual']:.4f} | {r['alarm_step'] or '-'} | "
                         f"{r['t_forecast']:.1f} | {r['t_replay']:.2f} |")
    st = stats(groups)
    st0 = stats(groups, "inside0", "at0")
    lines += ["", "Band coverage of the scored checkpoints, from the curve's start (after "
                  "warm-up and the first 25% of the run, where the checkpoint law is fitted) "
                  "to the last step before the end (target 85-95% after warm-up):", ""]
    for (name, cov, n), (_, cov0, _) in zip(st["per"], st0["per"]):
        lines.append(f"- {name}: {cov:.1%} of {n} (interval only: {cov0:.1%})")
    pc = st["band"]
    lines.append(f"- pooled: {pc:.1%} of {st['n']} (interval only: {st0['band']:.1%}): "
                 f"**{'met' if 0.85 <= pc <= 0.95 else 'not met'}**")
    if oos:
        so, so0 = stats(oos), stats(oos, "inside0", "at0")
        lines += ["", "In sample and out of sample. The size band was added after the "
                      "interval-only band missed 3B-0.5xC on these heroes (in sample). Out of "
                      "sample it is scored on heroes it was not chosen on: each ladder's "
                      "second-largest size, fitted on the sizes below it (the largest size "
                      "unused; leave one size out), the same code and settings:", "",
                  "| heroes | ladder | checkpoints | band coverage, interval only | band "
                  "coverage, with size band | revised interval covers final, interval only "
                  "| with size band | revised below both (of 3 fractions), interval only | "
                  "with size band |", "|---|---|---|---|---|---|---|---|---|"]
        for label, g, a, b in (("in sample", groups, st, st0), ("out of sample", oos, so, so0)):
            for (name, cov, n), (_, cov0, _) in zip(a["per"], b["per"]):
                sub = [(nm, rs) for nm, rs in g if nm == name]
                sa, sb = stats(sub), stats(sub, "inside0", "at0")
                lines.append(f"| {label} | {name} | {n} | {cov0:.1%} | {cov:.1%} | "
                             f"{sb['revised_cov']:.0%} of {sb['n_cov']} | "
                             f"{sa['revised_cov']:.0%} of {sa['n_cov']} | {sb['wins']} | "
                             f"{sa['wins']} |")
            lines.append(f"| {label} | pooled | {a['n']} | {b['band']:.1%} | {a['band']:.1%} | "
                         f"{b['revised_cov']:.1%} of {b['n_cov']} | {a['revised_cov']:.1%} of "
                         f"{a['n_cov']} | {b['wins']} | {a['wins']} |")
        oos_runs = [(nm, r["run"], r["lower"] != r["lower0"] or r["upper"] != r["upper0"])
                    for nm, rs in oos for r in rs]
        widened = [f"{nm.split(' (')[0]} {run}" for nm, run, w in oos_runs if w]
        lines += ["", f"Out of sample the size band widened the band of {len(widened)} of "
                      f"{len(oos_runs)} heroes" + (f" ({', '.join(widened)})." if widened
                                                   else ".") +
                  " A fold needs 3 smaller sizes (the law's N term E + A/N^alpha has three "
                  "parameters): with that floor the OLMo ladder below 1B has no fold, so its "
                  "out-of-sample heroes test only that the rule leaves them alone. The floor "
                  "was set after a fold fitted on 2 sizes of a ladder drawn from "
                  "chinchilla-ckpt itself missed its held-out size by 3% "
                  "(tests/test_track_size_band.py); a partial replay with a floor of 2 (OLMo "
                  "3B-0.5xC and 3B-10xC only, same coverage of those two) had been seen "
                  "before, so the floor is in-sample for the OLMo 3B heroes too."]
    lines += ["", "Final-loss error per fraction, in sample and out of sample (median "
                  "|ln(final / forecast)| over runs, pooled over ladders; anchored = the "
                  "ladder forecast anchored by the carry-over, " + (
                      "measured on each fit ladder's size folds, never on these runs):"
                      if anchor else "off in this run, `--no-anchor`):"), "",
              "| heroes | fraction | revised | ladder only | anchored ladder | run only "
              "(tracker's completion, else the early one) | tracker's completion only "
              "(runs) | revised below both | below both, against the tracker's completion "
              "only | revised below ladder only |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for label, g in _sets(groups, oos):
        sx = stats(g)
        for q in FRACTIONS:
            rv, ld, ro = sx["med"][q]
            an = sx["anchored"][q]
            rs, ns = sx["run_start"][q], sx["n_start"][q]
            lines.append(f"| {label} | {q:.0%} | {rv:.2%} | {ld:.2%} | "
                         f"{'-' if math.isnan(an) else f'{an:.2%}'} | "
                         f"{'none' if math.isnan(ro) else f'{ro:.2%}'} | "
                         f"{'none' if not ns else f'{rs:.2%} ({ns})'} | "
                         f"{'yes' if rv < ld and rv < ro else 'no'} | "
                         f"{'yes' if ns and rv < ld and rv < rs else 'no'} | "
                         f"{'yes' if rv < ld else 'no'} |")
        lines.append(f"| {label} | revised interval covers final | {sx['revised_cov']:.1%} of "
                     f"{sx['n_cov']} | | | | | | | |")
    lines += ["", "Revision rules side by side (every forecast made once with the early "
                  "completion error and the correlations measured; each rule registers it "
                  "with the others' fields removed; run only = the tracker's completion from "
                  "the curve's start, else the early one from warm-up, the same for every "
                  f"rule; default rule: {default_variant()}). Median |ln(final / forecast)| "
                  "at 25/50/75%, the revised interval's coverage of the final loss over "
                  "(run, fraction) pairs, pooled and at each fraction:", "",
              "| heroes | rule | revised 25/50/75% | run only 25/50/75% | ladder only | "
              "covers final (pooled) | covers at 25/50/75% | revised below both (of 3) | "
              "below both, against the tracker's completion only (of 3) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for label, g in _sets(groups, oos):
        for k in VARIANTS:
            sx = stats(g, "inside", f"at_{k}")
            cov_q = []
            for q in FRACTIONS:
                c = [r[f"at_{k}"][q]["covered"] for _, rs in g for r in rs
                     if q in r[f"at_{k}"]]
                cov_q.append(f"{np.sum(c)}/{len(c)}")
            pct = " / ".join(f"{sx['med'][q][0]:.3%}" for q in FRACTIONS)
            ro = " / ".join(f"{sx['med'][q][2]:.3%}" for q in FRACTIONS)
            lines.append(f"| {label} | {k} | {pct} | {ro} | {sx['med'][0.25][1]:.2%} | "
                         f"{sx['revised_cov']:.1%} of {sx['n_cov']} | {' / '.join(cov_q)} | "
                         f"{sx['wins']} | {sx['wins_start']} |")
    lines += ["", "The tracker's own completion alone (from the curve's start; over the runs "
                  "that have one at the fraction), the comparator before the early completion "
                  "filled the gaps: " + "; ".join(
                      f"{label} " + ", ".join(
                          f"{q:.0%} " + ("none" if not stats(g)["n_start"][q] else
                                         f"{stats(g)['run_start'][q]:.3%} "
                                         f"({stats(g)['n_start'][q]} runs)")
                          for q in FRACTIONS)
                      for label, g in _sets(groups, oos)) + ".", ""]
    lines += ["", "Final-loss error, median |ln(final / forecast)| over runs, at the first "
                  "checkpoint at or after each fraction (both ladders pooled; per ladder "
                  "below):", "",
              "| fraction | revised | ladder only | run only | revised below both |",
              "|---|---|---|---|---|"]
    for q in FRACTIONS:
        rv, ld, ro = st["med"][q]
        ok = rv < ld and rv < ro
        lines.append(f"| {q:.0%} | {rv:.2%} | {ld:.2%} | {ro:.2%} | {'yes' if ok else 'no'} |")
    lines += ["", "| ladder | fraction | revised | ladder only | run only | revised interval "
                  "covers final | ladder weight (median) |", "|---|---|---|---|---|---|---|"]
    for name, results in groups:
        for q in FRACTIONS:
            a = [r["at"][q] for r in results if q in r["at"]]
            lines.append(f"| {name} | {q:.0%} | {_med([x['revised'] for x in a]):.2%} | "
                         f"{_med([x['ladder'] for x in a]):.2%} | "
                         f"{_med([x['run'] for x in a]):.2%} | "
                         f"{np.mean([x['covered'] for x in a]):.0%} of {len(a)} | "
                         f"{_med([x['ladder_weight'] for x in a]):.2f} |")
    cov, wins = st["revised_cov"], st["wins"]
    so = stats(oos) if oos else None
    lines += ["", f"- Revised error below both the ladder-only and the run-only forecast "
                  f"(median over runs) at 25/50/75%: **{'met' if wins == 3 else 'not met'}** "
                  f"({wins} of 3 fractions; the run-only forecast at 25%, and for runs whose "
                  f"tracker completion has fewer than 6 checkpoints, is the early completion, "
                  f"from warm-up" + ("" if so is None else f"; out of sample {so['wins']} of "
                                     f"3") + f"). Against the tracker's own completion only "
                  f"(none at 25%): {st['wins_start']} of 3" + (
                      "" if so is None else f" ({so['wins_start']} of 3 out of sample)") + ".",
              f"- Revised interval covers the final loss in {cov:.1%} of {st['n_cov']} "
              f"(run, fraction) pairs (target 85-95%): "
              f"**{'met' if 0.85 <= cov <= 0.95 else 'not met'}**."]
    longest = max((r for _, rs in groups for r in rs), key=lambda r: r["n_checkpoints"])
    lines.append(f"- Replay of a whole run: longest real run {longest['run']} "
                 f"({longest['n_checkpoints']} checkpoints) {longest['t_replay']:.1f} s" + (
                     "." if syn is None else
                     f"; synthetic {syn['n']}-checkpoint run (3B-10xC forecast, its curve + "
                     f"0.2% noise, {syn['n_scored']} scored after warm-up) "
                     f"{syn['t_replay']:.1f} s, registry appends included (target < 60 s): "
                     f"**{'met' if syn['t_replay'] < 60 else 'not met'}**."))
    if syn is not None:
        lines.append(
            f"- Refit per checkpoint (run-only annealing completion, warm-started; mean over "
            f"the {syn['n']} checkpoints of the synthetic run, its {syn['n_full']} full "
            f"searches included): {1e3 * syn['t_refit_mean']:.1f} ms = "
            f"{syn['t_refit_mean'] / base:.2f}x one Epoch chinchilla fit ({1e3 * base:.1f} "
            f"ms, same process; target <= 5x): "
            f"**{'met' if syn['t_refit_mean'] / base <= 5 else 'not met'}**.")
    lines += [f"- Multi-power completion (bench_curves.py workload, one 2,000-step run, 1,600 "
              f"checkpoints): {mp:.1f} s = {mp / base:.0f}x one Epoch fit (target <= 20x): "
              f"**{'met' if mp / base <= 20 else 'not met'}** (the tracker completes runs with "
              f"the annealing law).",
              "", f"Load average at the end: {os.getloadavg()[0]:.2f} (a shared 2-core "
                  f"machine); BLAS one thread."]
    return lines


def run_config(down, only, n_boot, folder, syn_box, anchor=True):
    """Replay the heroes of one configuration (``down`` as in :func:`heroes`)."""
    from delphi.forecasting.target_curve import size_holdout_errors
    groups = []
    for name, fit_ladder, runs in heroes(only, down):
        t0 = time.perf_counter()
        folds = size_holdout_errors(fit_ladder)
        t_folds = time.perf_counter() - t0
        print(f"{name}: {len(folds)} size folds in {t_folds:.1f} s", flush=True)
        cache, results = {}, []
        for run, target, log in runs:
            key = (target["params"], target["steps"], target["batch_size"], target["schedule"])
            if key not in cache:
                t0 = time.perf_counter()
                cf = predict_curve(fit_ladder, target, n_boot=n_boot, seed=0,
                                   size_errors=folds, carry=anchor, early_completion=True,
                                   correlated=anchor, fold_weights=anchor)
                cache[key] = (cf, time.perf_counter() - t0 + t_folds)
            cf, t_forecast = cache[key]
            r = replay_one(cf, t_forecast, run, target, log, folder)
            print(f"{name:36s} {run:40s} cov {np.mean(r['inside']):.0%} "
                  f"(interval only {np.mean(r['inside0']):.0%}) "
                  f"forecast {r['forecast']:.4f} final {r['actual']:.4f} "
                  f"replay {r['t_replay']:.2f}s", flush=True)
            results.append(r)
            if run == "3B-10xC" and down == 0 and syn_box is not None:
                syn_box.append(synthetic_replay(variant(cf, *VARIANTS[default_variant()]),
                                                target, folder))
                print("synthetic", syn_box[-1], flush=True)
        groups.append((name, results))
    return groups


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-boot", type=int, default=200, help="bootstrap draws per forecast")
    ap.add_argument("--only", choices=("olmo", "misfitting"), help="one ladder only")
    ap.add_argument("--write", action="store_true", help="write the RESULTS.md section")
    ap.add_argument("--skip-multipower", action="store_true")
    ap.add_argument("--no-anchor", action="store_true",
                    help="forecasts without the carry-over (the tracker's rule before "
                         "anchoring: reproduces the figures before it)")
    ap.add_argument("--multipower-only", type=int, metavar="K", default=0,
                    help="only time the multi-power completion against one Epoch fit, K times "
                         "(no replay, nothing written)")
    ap.add_argument("--oos-down", type=int, nargs="+", default=[1], metavar="K",
                    help="out-of-sample sets: the K-th size below the largest, fitted on the "
                         "sizes below it (default 1; e.g. 1 2 3)")
    ap.add_argument("--oos", choices=("misfitting", "olmo", "all", "none"),
                    default="misfitting",
                    help="ladders whose second-largest size is replayed out of sample (default "
                         "misfitting: below 1B the OLMo ladder has 3 sizes, too few for a size "
                         "fold, so its out-of-sample band is the interval's by construction)")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.multipower_only:
        with threadpool_limits(limits=1):
            for _ in range(args.multipower_only):
                base = epoch_fit_seconds()
                mp = multipower_seconds()
                print(f"multi-power completion {mp:.2f} s, one Epoch fit {base * 1e3:.1f} ms: "
                      f"{mp / base:.0f}x (target <= 20x); load {os.getloadavg()[0]:.2f}",
                      flush=True)
        return 0
    t_start = time.perf_counter()
    with threadpool_limits(limits=1), tempfile.TemporaryDirectory() as folder:
        base = epoch_fit_seconds()
        syn_box = []
        anchor = not args.no_anchor
        groups = run_config(0, args.only, args.n_boot, folder, syn_box, anchor)
        oos_only = {"all": args.only, "none": None}.get(args.oos, args.oos)
        oos = [] if args.oos == "none" or (args.only and args.oos not in ("all", args.only)) \
            else [g for k in args.oos_down
                  for g in run_config(k, oos_only, args.n_boot, folder, None, anchor)]
        mp = float("nan") if args.skip_multipower else multipower_seconds()
    syn = syn_box[0] if syn_box else None
    lines = summarise(groups, oos, syn, base, mp, anchor)
    lines.insert(2, f"Command: `python benchmarks/bench_track.py --n-boot {args.n_boot} "
                    f"--oos {args.oos}"
                    + ("" if args.oos_down == [1] else
                       f" --oos-down {' '.join(map(str, args.oos_down))}")
                    + f"{' --no-anchor' if args.no_anchor else ''} --write` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                    f"{time.perf_counter() - t_start:.0f} s).")
    lines.insert(3, "")
    print("\n".join(lines))
    if args.write:
        from run_all import write_section
        write_section(HERE / "RESULTS.md", SECTION, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
