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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.5, 0.8])
    parser.add_argument("--laws", "--law", nargs="+", default=["annealing"])
    parser.add_argument("--every", type=int, default=1, help="use every k-th run")
    parser.add_argument("--jobs", type=int, default=1, help="joblib workers (-1: all cores)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", delphi.DelphiWarning)
    ladder = delphi.load_ladder("misfitting2025")
    counts = ladder.table.groupby("run").size()
    runs = [r for r in counts.index if counts[r] >= 8][::args.every]
    for fraction in args.fractions:
        base = {}
        for run in runs:
            try:
                base[run] = baseline(ladder, run, fraction)
            except DelphiError:
                pass
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


if __name__ == "__main__":
    main()
