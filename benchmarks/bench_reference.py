"""Benchmark: the reference class of leave-future-out errors (issue 21, item 2), and its
intervals scored leave one ladder out.

``--build`` regenerates the data file delphi ships, ``delphi/data/reference_errors.json.gz``
(:func:`delphi.reference.build_reference`): for every public ladder (the ladders of
``bench_calibration.LADDERS``; marin-moe-535b has 3 finished rungs, too few to cut, and
misfitting2025's curves end at the runs of misfitting2025-final, so both are left out and
the provenance says so) and every default candidate law of its design, the leave-future-out
log errors at up to 12 cuts, with r = C_run / C_max_fitted and the rungs each fold fitted.

The evaluation (default) scores three interval rules on every ladder's leave-future-out
predictions of its default law at the runs of its compute frontier (the lowest loss of each
budget: the run a forecast of a larger budget is about, as in the reference class itself),
with the reference class rebuilt **without that ladder**
(leave one ladder out, so no ladder is scored on errors it contributed):

* ``today``: the interval delphi gave before issue 21 -- calibrated on the ladder's own
  earlier folds (nested, as ``calibration_backtest``) where 3 of them exist, else the delta
  method's (a fold whose delta interval cannot be had counts as no interval: a miss);
* ``reference``: the reference-class interval at the fold's r and rungs, combined with the
  fold fit's delta-method parameter sd;
* ``default``: what ``delphi predict`` now does -- the own calibration blended with the
  reference class (w = n / (n + 3)) where 3 earlier folds exist, else the reference interval.

For each: coverage of the 90% new-run interval (pooled over predictions, and the lowest
ladder), mean half-width in log loss, and the mean interval score of Gneiting & Raftery
(2007, Eq. 43) in log loss, S = (u - l) + (2 / alpha)(l - y)[y < l] + (2 / alpha)(y - u)[y > u]
with alpha = 0.1 (lower is better; it charges width and misses alike). "In sample" rows use the
reference class with the ladder in it.

``--truncations`` runs ``delphi.predict`` (the default path) on every public ladder cut to
its 4, 5 and 7 smallest budgets, at the frontier run (lowest loss) of each of the next 3
budgets, the reference class rebuilt without that ladder: refusals, intervals, coverage.

``--fixed-d`` simulates fixed-data sweeps (every run at one D; Hoffmann et al.'s law, 0.5%
run noise, 40 seeds) of 5, 6 and 7 sizes and runs the default path at the next two sizes: it
must pick ``power-n``, and its reference intervals (no public ladder is a fixed-D sweep, so
they borrow ``power``'s errors) should cover 85-95%.

Deterministic (seed 0), no network. Usage:
python benchmarks/bench_reference.py [--build] [--truncations] [--fixed-d] [--only NAME ...]
    [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_calibration import LADDERS, load  # noqa: E402

LEVEL = 0.9
SEED = 0
#: Ladders of ../shared/ladders left out of the reference class, with why.
LEFT_OUT = {
    "marin-moe-535b": "3 finished rungs: too few for any leave-future-out cut",
    "misfitting2025": "its curves end at the runs of misfitting2025-final, which is in",
}
TRUNCATIONS = (4, 5, 7)


def _empty():
    from delphi.reference import COLUMNS, ReferenceClass
    import pandas as pd
    return ReferenceClass(rows=pd.DataFrame(columns=list(COLUMNS)))


#: A reference class with no errors: ``predict`` then behaves as before issue 21.
EMPTY = _empty()
NEXT_BUDGETS = 3


def _names(only: Sequence[str] | None) -> list[str]:
    return [n for n, _ in LADDERS if not only or n in only]


def _quiet_load(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load(name)


def build(only: Sequence[str] | None = None, verbose: bool = True):
    """The reference class of every ladder in :data:`LADDERS` (or ``only``)."""
    import delphi
    from delphi.reference import build_reference
    ladders = []
    for name in _names(only):
        ladders.append(_quiet_load(name))
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE.parent, check=True,
                                capture_output=True, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    prov = {"generated_by": "benchmarks/bench_reference.py --build",
            "delphi_version": getattr(delphi, "__version__", "?"), "git_commit": commit,
            "date": f"{datetime.now(timezone.utc):%Y-%m-%d}",
            "description": "leave-future-out log errors (log L_pred - log L_obs) of every "
                           "default candidate law on the public ladders of ../shared/ladders, at the runs of "
                           "each ladder's compute frontier (the lowest loss of each budget)",
            "left_out": LEFT_OUT}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_reference(ladders, seed=SEED, provenance=prov,
                               progress=(lambda s: print(f"  {s}", flush=True)) if verbose
                               else None)


# ------------------------------------------------------------------------------ scoring
def interval_score(lo: float, hi: float, y: float, alpha: float = 1 - LEVEL) -> float:
    """Gneiting & Raftery (2007), Eq. 43: (u - l) + (2/alpha)(l - y)[y < l] +
    (2/alpha)(y - u)[y > u], here on log loss."""
    return (hi - lo) + (2 / alpha) * max(lo - y, 0.0) + (2 / alpha) * max(y - hi, 0.0)


def _rule_rows(ladder, ref_out, ref_in) -> list[dict]:
    """Per leave-future-out prediction of the ladder's default law: the three rules'
    intervals (log space), out of sample (``ref_out``) and in sample (``ref_in``)."""
    from scipy.stats import norm

    from delphi.calibration import MIN_FOLDS, CalibrationModel, LFOErrors, leave_future_out
    from delphi.errors import DelphiError
    from delphi.forecast import default_law
    from delphi.law_inputs import rows_inputs
    from delphi.reference import _frontier_runs, blend
    from delphi.uncertainty import delta_interval
    from delphi.calibration import _log_sds
    from delphi.fitting.diagnostics import residual_scale
    law = default_law(ladder)
    z = float(norm.ppf(0.5 + LEVEL / 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            errors = leave_future_out(ladder, law, max_folds=12, seed=SEED)
        except DelphiError:
            # e.g. chinchilla on 7 points: a forecast given C uses the law of C
            law = "power"
            errors = leave_future_out(ladder, law, max_folds=12, seed=SEED)
    finals, _ = ladder.final_points()
    finals = finals.drop_duplicates("run", keep="last").set_index("run")
    frontier = _frontier_runs(ladder)
    rows = []
    for fold, result in zip(errors.folds, errors.fits):
        c_k = fold["cut"]
        seen = (errors.cut < c_k) & (errors.flops <= c_k * (1 + 1e-9))
        own = None
        if len(np.unique(errors.cut[seen])) >= MIN_FOLDS:
            own = CalibrationModel.from_errors(errors.ratio[seen], errors.log_error[seen],
                                               runs=errors.run[seen],
                                               n_folds=len(np.unique(errors.cut[seen])))
        models = {}
        sd = {"fit_sd": residual_scale(result), "fit_dof": result.dof}
        for tag, ref, cond in (("out", ref_out, sd), ("in", ref_in, sd),
                               ("flat", ref_out, {})):
            models[tag] = ref.model(law, fold["n_budgets"], LEVEL,
                                    exclude=() if tag == "in" else (ladder.name,), **cond)
        mine = np.flatnonzero((errors.cut == c_k) & np.isin(errors.run.astype(str),
                                                            list(frontier)))
        if not len(mine):
            continue
        held = finals.loc[[str(r) for r in errors.run[mine]]].reset_index()
        x = rows_inputs(result.law, ladder, held)
        for j, i in enumerate(mine):
            xi = {k: v[j:j + 1] for k, v in x.items()}
            e, r = float(errors.log_error[i]), float(errors.ratio[i])
            try:
                base = delta_interval(result, xi, level=LEVEL)
                param, run = _log_sds(base)
                half_delta = math.log(base.upper / base.lower) / 2
            except DelphiError:
                param, run, half_delta = 0.0, 0.0, None
            row = {"ladder": ladder.name, "law": law, "ratio": r, "log_error": e,
                   "n_budgets": fold["n_budgets"], "param": param, "run_sd": run,
                   "fit_rms": float(np.sqrt(np.mean(np.square(result.residuals)))),
                   "fit_dof": int(result.dof),
                   "own_n": own.n_folds if own is not None else None,
                   "own_s": own.sigma(r) if own is not None else None,
                   "own_t": own.small_sample_factor(LEVEL) if own is not None else None,
                   "ref_out": models["out"].sigma(r), "ref_in": models["in"].sigma(r),
                   "ref_flat": models["flat"].sigma(r)}
            if own is not None:
                s = own.small_sample_factor(LEVEL) * own.sigma(r)
                row["today"] = z * math.sqrt(s * s + param * param + run * run)
            else:
                row["today"] = half_delta
            for tag in ("out", "in", "flat"):
                ref = models[tag]
                s_ref = ref.sigma(r)
                row[f"reference_{tag}"] = z * math.sqrt(s_ref ** 2 + param ** 2 + run ** 2)
                if own is not None:
                    b = blend(own, ref, LEVEL)
                    row[f"default_{tag}"] = z * math.sqrt(b.sigma(r) ** 2 + param ** 2
                                                          + run ** 2)
                else:
                    row[f"default_{tag}"] = row[f"reference_{tag}"]
            rows.append(row)
    return rows


#: Prior strengths n0 of the blend w = n / (n + n0) scored leave one ladder out (0: the own
#: calibration alone where it exists; inf: the reference class alone).
PRIORS = (0.0, 1.0, 3.0, 10.0, math.inf)


def _blend_half(row: dict, n0: float, tag: str = "out") -> float:
    """The half-width [log loss] of the new-run interval at prior strength ``n0``."""
    z = 1.6448536269514722
    ref = row[f"ref_{tag}"]
    if row["own_s"] is None or n0 == math.inf:
        s = ref
    else:
        w = row["own_n"] / (row["own_n"] + n0)
        s = w * row["own_s"] + (1 - w) * ref
    return z * math.sqrt(s * s + row["param"] ** 2 + row["run_sd"] ** 2)


def _mean_score(rows: list[dict], n0: float) -> float:
    """Mean interval score at ``n0``, each ladder weighing the same."""
    by: dict[str, list[float]] = {}
    for r in rows:
        h = _blend_half(r, n0)
        by.setdefault(r["ladder"], []).append(interval_score(-h, h, -r["log_error"]))
    return float(np.mean([np.mean(v) for v in by.values()]))


def choose_prior(rows: list[dict]) -> dict:
    """The blend's prior strength n0 chosen leave one ladder out: for each ladder, the n0 of
    :data:`PRIORS` with the lowest ladder-weighted mean interval score on the *other*
    ladders, scored on it; beside the n0 chosen on every ladder (in sample)."""
    ladders = sorted({r["ladder"] for r in rows})
    in_sample = min(PRIORS, key=lambda n0: _mean_score(rows, n0))
    chosen, out_rows = {}, []
    for lad in ladders:
        others = [r for r in rows if r["ladder"] != lad]
        n0 = min(PRIORS, key=lambda v: _mean_score(others, v))
        chosen[lad] = n0
        for r in rows:
            if r["ladder"] == lad:
                out_rows.append({**r, "nested": _blend_half(r, n0)})
    per_prior = {str(n0): {"score": _mean_score(rows, n0),
                           "coverage": float(np.mean([abs(r["log_error"]) <= _blend_half(r, n0)
                                                      for r in rows]))}
                 for n0 in PRIORS}
    return {"in_sample": in_sample, "per_ladder": chosen, "rows": out_rows,
            "per_prior": per_prior}


def summarise(rows: list[dict], key: str) -> dict:
    """Coverage (pooled and lowest ladder), mean half-width and mean interval score of rule
    ``key``; a prediction without an interval counts as a miss with an infinite score."""
    by: dict[str, list] = {}
    inside, widths, scores = [], [], []
    for r in rows:
        h = r.get(key)
        e = r["log_error"]
        ok = h is not None and abs(e) <= h
        inside.append(ok)
        by.setdefault(r["ladder"], []).append(ok)
        if h is not None:
            widths.append(h)
            # y = -e relative to the centre (log L_obs - log L_pred)
            scores.append(interval_score(-h, h, -e))
    n_none = sum(r.get(key) is None for r in rows)
    per = {k: float(np.mean(v)) for k, v in by.items()}
    return {"n": len(rows), "coverage": float(np.mean(inside)) if rows else None,
            "min_ladder": min(per.items(), key=lambda kv: kv[1]) if per else None,
            "per_ladder": per, "mean_half_width": float(np.mean(widths)) if widths else None,
            "interval_score": float(np.mean(scores)) if scores and not n_none else None,
            "interval_score_with_interval": float(np.mean(scores)) if scores else None,
            "no_interval": n_none}


def evaluate(only: Sequence[str] | None, ref, verbose: bool = True) -> tuple[list, dict]:
    rows = []
    for name in _names(only):
        if name not in ref.ladders:
            continue
        t0 = time.perf_counter()
        ladder = _quiet_load(name)
        got = _rule_rows(ladder, ref, ref)
        rows += got
        if verbose:
            print(f"  {name}: {len(got)} predictions, {time.perf_counter() - t0:.0f} s",
                  flush=True)
    keys = ("today", "reference_flat", "default_flat", "reference_out", "default_out",
            "reference_in", "default_in")
    return rows, {k: summarise(rows, k) for k in keys}


def truncations(only: Sequence[str] | None, ref, verbose: bool = True) -> list[dict]:
    """``delphi.predict`` on each ladder cut to its k smallest budgets (k in
    :data:`TRUNCATIONS`), at the frontier run of each of the next :data:`NEXT_BUDGETS`
    budgets, with the reference class rebuilt without the ladder."""
    import delphi
    from delphi.law_inputs import budget_labels
    from delphi.errors import DelphiError
    out = []
    for name in _names(only):
        ladder = _quiet_load(name)
        finals, _ = ladder.final_points()
        finals = finals.dropna(subset=["flops"]).reset_index(drop=True)
        labels = budget_labels(finals).astype(float)
        levels = np.unique(labels)
        for k in TRUNCATIONS:
            if len(levels) <= k:
                continue
            keep = finals["run"][labels <= levels[k - 1]].tolist()
            small = ladder.select(runs=keep)
            for b in levels[k:k + NEXT_BUDGETS]:
                grp = finals[labels == b]
                run = grp.loc[grp["loss"].idxmin()]
                target = ({"params": float(run["params"]), "tokens": float(run["tokens"])}
                          if "params" in grp and np.isfinite(run.get("params", np.nan))
                          and np.isfinite(run.get("tokens", np.nan))
                          else {"flops": float(run["flops"])})
                row = {"ladder": name, "rungs": k, "run": str(run["run"]),
                       "actual": float(run["loss"])}
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        f = delphi.predict(small, target, seed=SEED,
                                           reference=ref.without(name))
                    row.update(law=f.fit.law.name, loss=f.loss,
                               method=f.interval.method if f.interval else None,
                               lower=f.lower, upper=f.upper,
                               inside=bool(f.interval and f.lower <= row["actual"] <= f.upper))
                    # before issue 21: the same default path with no reference class
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        old = delphi.predict(small, target, seed=SEED, reference=EMPTY)
                    row.update(today_method=old.interval.method if old.interval else None,
                               today_inside=bool(old.interval and old.lower <= row["actual"]
                                                 <= old.upper))
                except DelphiError as exc:
                    row.update(error=f"{type(exc).__name__}: {exc}", inside=False)
                out.append(row)
        if verbose:
            mine = [r for r in out if r["ladder"] == name]
            print(f"  {name}: {len(mine)} truncated forecasts, "
                  f"{sum(r['inside'] for r in mine)} inside", flush=True)
    return out


#: The simulated fixed-data sweeps: Hoffmann et al. 2022's fitted law (Approach 3), sizes 2x
#: apart from 2e7, every run at D = 1e10 tokens, log-normal run noise.
SWEEP_TRUTH = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
SWEEP_D = 1e10
SWEEP_NOISE = 0.005
SWEEP_SEEDS = 40


def fixed_d_sweeps(ref, seeds: int = SWEEP_SEEDS, verbose: bool = True) -> list[dict]:
    """``delphi.predict`` (the default path) on simulated fixed-D sweeps of 5, 6 and 7 sizes
    at the next two larger sizes: the law it picks, the interval method and coverage."""
    import pandas as pd

    import delphi
    from delphi.laws import CHINCHILLA
    out = []
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        n = 2e7 * 2.0 ** np.arange(9)
        loss = CHINCHILLA.predict(SWEEP_TRUTH, {"params": n, "tokens": np.full(9, SWEEP_D)}) \
            * np.exp(rng.normal(0, SWEEP_NOISE, 9))
        frame = pd.DataFrame({"run": [f"n{i}" for i in range(9)], "params": n,
                              "tokens": SWEEP_D, "loss": loss})
        for k in (5, 6, 7):
            lad = delphi.Ladder(frame.iloc[:k], name=f"sweep{seed}")
            for j in (k, k + 1):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    f = delphi.predict(lad, {"params": float(n[j])}, seed=SEED, reference=ref,
                                       off_trend=False)
                truth = float(loss[j])
                out.append({"seed": seed, "sizes": k, "law": f.fit.law.name,
                            "method": f.interval.method if f.interval else None,
                            "inside": bool(f.interval and f.lower <= truth <= f.upper),
                            "half": (float(np.log(f.upper / f.loss)) if f.interval else None),
                            "error": float(np.log(f.loss / truth))})
    if verbose:
        print(f"  fixed-D sweeps: {len(out)} forecasts", flush=True)
    return out


def _pc(v, d=1) -> str:
    return "-" if v is None else f"{100 * v:.{d}f}%"


def table(summary: dict) -> list[str]:
    label = {"today": "today (own calibration, else delta)",
             "reference_flat": "reference only, not conditioned on the fit's residual scale, "
                               "leave one ladder out",
             "default_flat": "default, not conditioned on the fit's residual scale, leave one "
                             "ladder out",
             "reference_out": "reference only, leave one ladder out",
             "default_out": "default (blend, else reference), leave one ladder out",
             "reference_in": "reference only, in sample",
             "default_in": "default (blend, else reference), in sample"}
    lines = ["| rule | predictions | coverage of 90% | lowest ladder | mean half-width | "
             "interval score | no interval |", "|---|---|---|---|---|---|---|"]
    for k, s in summary.items():
        lo = s["min_ladder"]
        score = s["interval_score"] if s["interval_score"] is not None else s[
            "interval_score_with_interval"]
        lines.append(f"| {label[k]} | {s['n']} | {_pc(s['coverage'])} | "
                     f"{lo[0] + ' ' + _pc(lo[1], 0) if lo else '-'} | "
                     f"{_pc(s['mean_half_width'], 2)} | "
                     f"{'-' if score is None else f'{score:.4f}'}"
                     f"{'' if s['interval_score'] is not None else ' (with an interval)'} | "
                     f"{s['no_interval']} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="store_true",
                        help="regenerate delphi/data/reference_errors.json.gz first")
    parser.add_argument("--no-evaluate", action="store_true", help="skip the evaluation")
    parser.add_argument("--truncations", action="store_true",
                        help="also run predict on ladders cut to 4, 5 and 7 budgets")
    parser.add_argument("--fixed-d", action="store_true",
                        help="also run predict on simulated fixed-data sweeps")
    parser.add_argument("--only", nargs="*", help="ladder names (default: all)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure as JSON")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    from delphi.reference import REFERENCE_PATH, load_reference
    started = time.perf_counter()
    payload: dict = {}
    with threadpool_limits(1):
        if args.build:
            ref = build(args.only)
            ref.to_json(REFERENCE_PATH)
            print(f"wrote {REFERENCE_PATH} ({len(ref)} errors, {len(ref.ladders)} ladders)")
        ref = load_reference(REFERENCE_PATH)
        print(ref.report())
        if not args.no_evaluate:
            rows, summary = evaluate(args.only, ref)
            payload["summary"] = summary
            print()
            print("\n".join(table(summary)))
            for k in ("today", "default_flat", "default_out"):
                print(f"per ladder, {k}: " + ", ".join(
                    f"{n} {_pc(v, 0)}" for n, v in summary[k]["per_ladder"].items()))
            prior = choose_prior(rows)
            nested = summarise(prior["rows"], "nested")
            payload["prior"] = {k: v for k, v in prior.items() if k != "rows"}
            payload["prior"]["nested"] = nested
            print(f"\nblend prior n0 (w = n / (n + n0)), interval score (ladder-weighted) and "
                  f"coverage with the reference class left out per ladder:")
            for n0, v in prior["per_prior"].items():
                print(f"  n0 = {n0}: score {v['score']:.4f}, coverage {_pc(v['coverage'])}")
            print(f"  chosen on every ladder (in sample): n0 = {prior['in_sample']}; chosen "
                  f"on the other ladders, per ladder: " + ", ".join(
                      f"{k} {v}" for k, v in prior["per_ladder"].items()))
            print(f"  scored leave one ladder out with its own choice: coverage "
                  f"{_pc(nested['coverage'])}, lowest {nested['min_ladder'][0]} "
                  f"{_pc(nested['min_ladder'][1], 0)}, interval score "
                  f"{nested['interval_score']:.4f}, mean half-width "
                  f"{_pc(nested['mean_half_width'], 2)}")
        if args.truncations:
            tr = truncations(args.only, ref)
            payload["truncations"] = tr
            def cov(rows):
                made = [r for r in rows if "error" not in r]
                return (f"{len(rows)} targets, {len(rows) - len(made)} refused, "
                        f"{sum(r.get('method') is None for r in made)} without an interval; "
                        f"coverage of the {len(made)} forecasts "
                        f"{_pc(np.mean([r['inside'] for r in made]) if made else None)}")
            for k in TRUNCATIONS:
                mine = [r for r in tr if r["rungs"] == k]
                if mine:
                    print(f"truncated to {k} budgets: {cov(mine)}")
            if tr:
                print(f"pooled over truncations: {cov(tr)}")
                made = [r for r in tr if "error" not in r]
                print(f"  before issue 21 (no reference class), the same {len(made)} "
                      f"forecasts: {sum(r['today_method'] is None for r in made)} without an "
                      f"interval, coverage {_pc(np.mean([r['today_inside'] for r in made]))} "
                      f"(a forecast without an interval counts as a miss)")
                for m in sorted({r.get("method") for r in tr if "error" not in r}, key=str):
                    sub = [r for r in tr if "error" not in r and r.get("method") == m]
                    print(f"  method {m}: {len(sub)} forecasts, coverage "
                          f"{_pc(np.mean([r['inside'] for r in sub]))}")
            for r in tr:
                if "error" in r:
                    print(f"  refused: {r['ladder']} {r['rungs']} rungs -> {r['run']}: "
                          f"{r['error'][:200]}")
        if args.fixed_d:
            sw = fixed_d_sweeps(ref)
            payload["fixed_d"] = sw
            laws = sorted({r["law"] for r in sw})
            print(f"fixed-D sweeps ({SWEEP_SEEDS} seeds x 5/6/7 sizes x next 2 sizes = "
                  f"{len(sw)} forecasts; truth Chinchilla at D = {SWEEP_D:g}, noise "
                  f"{SWEEP_NOISE:.1%}): law {', '.join(laws)}; methods "
                  + ", ".join(f"{m} {sum(r['method'] == m for r in sw)}"
                              for m in sorted({str(r['method']) for r in sw}))
                  + f"; coverage {_pc(np.mean([r['inside'] for r in sw]))}, mean half-width "
                  f"{_pc(np.mean([r['half'] for r in sw if r['half'] is not None]), 2)}, "
                  f"mean |error| {_pc(np.mean([abs(r['error']) for r in sw]), 2)}")
            for k in (5, 6, 7):
                sub = [r for r in sw if r["sizes"] == k]
                print(f"  {k} sizes: coverage {_pc(np.mean([r['inside'] for r in sub]))}, "
                      f"mean half-width "
                      f"{_pc(np.mean([r['half'] for r in sub if r['half'] is not None]), 2)}")
    load_avg = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"\nseed {SEED}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; "
          f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{time.perf_counter() - started:.0f} s"
          + (f"; load {load_avg[0]:.2f}" if load_avg else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(payload, indent=1, default=str))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
