"""Curve completion on the (Mis)Fitting ladder: predict each run's final loss from its early
checkpoints, with a schedule-aware curve law and with an LR-blind baseline, side by side.

For every run with at least 8 checkpoints: fit on checkpoints up to FRACTION of its planned
steps, predict the loss at its last step, compare with the logged final loss.
Baseline: L(D) = E + A D^-alpha on the same checkpoints (tokens seen; no LR information).
Data: Li, Kudugunta, Zettlemoyer 2025, (Mis)Fitting (arXiv 2502.18969), scaling_results.csv.

Usage: python benchmarks/curve_completion.py [--fractions 0.5 0.8] [--laws annealing multipower]
       [--every 1] [--jobs 2]
Each law is run on every run through ``delphi.curves.complete_many`` (``--jobs`` workers; the
results do not depend on it); the table puts the laws side by side per fraction.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import delphi
from delphi.curves import complete_many
from delphi.errors import DelphiError
from delphi.fitting import fit_arrays


def baseline(ladder, run, fraction):
    g = ladder.table[ladder.table["run"] == run]
    use = g[g["step"] <= fraction * g["total_steps"].iloc[0]]
    f = fit_arrays("power", {"flops": use["tokens"].to_numpy(float)}, use["loss"].to_numpy(float))
    return float(f.predict({"flops": g["tokens"].to_numpy(float)[-1:]})[0])


def _runs_and_baselines(ladder, every: int, fraction: float):
    """Runs with at least 8 checkpoints (every ``every``-th), and the LR-blind baseline's
    prediction for each run it can fit."""
    counts = ladder.table.groupby("run").size()
    runs = [r for r in counts.index if counts[r] >= 8][::every]
    base = {}
    for r in runs:
        try:
            base[r] = baseline(ladder, r, fraction)
        except DelphiError:
            pass
    return runs, base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.8])
    parser.add_argument("--laws", "--law", nargs="+", default=["annealing"])
    parser.add_argument("--every", type=int, default=1, help="use every k-th run")
    parser.add_argument("--jobs", type=int, default=1, help="joblib workers (-1: all cores)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", delphi.DelphiWarning)
    ladder = delphi.load_ladder("misfitting2025")
    for fraction in args.fractions:
        runs, base = _runs_and_baselines(ladder, args.every, fraction)
        print(f"fit on checkpoints up to {fraction:.0%} of each run ({len(runs)} runs):")
        print(f"  {'law':<26} {'runs':>5} {'failed':>6} {'median':>8} {'p90':>8} {'mean':>8} "
              f"{'time':>7}")
        blind = None
        for law in args.laws:
            t0 = time.perf_counter()
            results = complete_many(ladder, runs, law, upto_fraction=fraction, n_jobs=args.jobs)
            seconds = time.perf_counter() - t0
            ours, lr_blind, failed = [], [], 0
            for run, c in results:
                if isinstance(c, str) or run not in base:
                    failed += 1
                    continue
                if c.actual is None:
                    continue
                ours.append(abs(c.rel_error))
                lr_blind.append(abs((c.actual - base[run]) / base[run]))
            o = np.array(ours)
            print(f"  {law:<26} {len(o):>5} {failed:>6} {np.median(o):>8.2%} "
                  f"{np.percentile(o, 90):>8.2%} {np.mean(o):>8.2%} {seconds:>6.0f}s")
            blind = blind if blind is not None else np.array(lr_blind)
        b = blind
        print(f"  {'LR-blind power law in D':<26} {len(b):>5} {'':>6} {np.median(b):>8.2%} "
              f"{np.percentile(b, 90):>8.2%} {np.mean(b):>8.2%}")


def run(quick: bool = False, laws=("annealing", "multipower"), fraction: float = 0.5,
        n_jobs: int = 1) -> list[dict]:
    """The (Mis)Fitting completion at ``fraction`` of each run, for the benchmark runner.

    Rows (keys as in ``run_all.py``): per law, the median and p90 of |relative error| of the
    predicted final loss over the runs the law could fit, with the LR-blind power law in D
    on the same runs as the baseline; target median <= 0.5%, p90 <= 1.5% (issue 3). Also
    the annealing law on exactly the runs the multi-power law fitted. ``quick`` uses every
    4th run.
    """
    warnings.simplefilter("ignore", delphi.DelphiWarning)
    ladder = delphi.load_ladder("misfitting2025")
    runs, base = _runs_and_baselines(ladder, 4 if quick else 1, fraction)
    errors, seconds = {}, {}
    for law in laws:
        t0 = time.perf_counter()
        out = complete_many(ladder, runs, law, upto_fraction=fraction, n_jobs=n_jobs)
        seconds[law] = time.perf_counter() - t0
        errors[law] = {r: (abs(c.rel_error), c.actual) for r, c in out
                       if not isinstance(c, str) and c.actual is not None and r in base}
    rows = []

    def add(name, errs, note):
        runs_ = sorted(errs)
        ours = np.array([errs[r][0] for r in runs_])
        blind = np.array([abs((errs[r][1] - base[r]) / base[r]) for r in runs_])
        for stat, fn, target in (("median", np.median, 0.005), ("p90",
                                 lambda a: np.percentile(a, 90), 0.015)):
            value, ref = float(fn(ours)), float(fn(blind))
            rows.append({"benchmark": "misfitting completion at 50%",
                         "figure": f"{name}: {stat} |rel. error| ({len(ours)} runs)",
                         "value": value * 100, "unit": "%",
                         "baseline": "LR-blind power law in D, same runs",
                         "baseline_value": ref * 100, "ratio": value / ref,
                         "target": f"<= {target:.1%}", "met": bool(value <= target),
                         "note": note})

    for law in laws:
        failed = len(runs) - len(errors[law])
        add(law, errors[law], f"{failed} of {len(runs)} runs not fitted (too few checkpoints "
                              f"for the law's parameters, or a failed fit); "
                              f"{seconds[law]:.0f} s")
    if "multipower" in errors and "annealing" in errors:
        same = {r: e for r, e in errors["annealing"].items() if r in errors["multipower"]}
        add("annealing on the multipower runs", same, "the same runs as the multipower rows")
    return rows


if __name__ == "__main__":
    main()
