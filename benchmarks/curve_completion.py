"""Curve completion on the (Mis)Fitting ladder: predict each run's final loss from its early
checkpoints, with a schedule-aware curve law and with an LR-blind baseline, side by side.

For every run with at least 8 checkpoints: fit on checkpoints up to FRACTION of its planned
steps, predict the loss at its last step, compare with the logged final loss.
Baseline: L(D) = E + A D^-alpha on the same checkpoints (tokens seen; no LR information).
Data: Li, Kudugunta, Zettlemoyer 2025, (Mis)Fitting (arXiv 2502.18969), scaling_results.csv.

Usage: python benchmarks/curve_completion.py [--fractions 0.5 0.8] [--law annealing] [--every 1]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import delphi
from delphi.curves import complete
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
    parser.add_argument("--law", default="annealing")
    parser.add_argument("--every", type=int, default=1, help="use every k-th run")
    args = parser.parse_args()
    warnings.simplefilter("ignore", delphi.DelphiWarning)
    ladder = delphi.load_ladder("misfitting2025")
    counts = ladder.table.groupby("run").size()
    runs = [r for r in counts.index if counts[r] >= 8][::args.every]
    for fraction in args.fractions:
        t0 = time.perf_counter()
        ours, base, failed = [], [], []
        for run in runs:
            try:
                c = complete(ladder, run, args.law, upto_fraction=fraction)
                b = baseline(ladder, run, fraction)
            except DelphiError as exc:
                failed.append((run, str(exc).split(";")[0]))
                continue
            if c.actual is None:
                continue
            ours.append(abs(c.rel_error))
            base.append(abs((c.actual - b) / b))
        o, b = np.array(ours), np.array(base)
        print(f"fit on checkpoints up to {fraction:.0%} of each run: {len(o)} runs "
              f"({len(failed)} could not be fitted: too few checkpoints), "
              f"{time.perf_counter() - t0:.0f} s")
        for name, e in ((args.law, o), ("LR-blind power law in D", b)):
            print(f"  {name:<26} |rel. error| median {np.median(e):.2%}  p90 "
                  f"{np.percentile(e, 90):.2%}  mean {np.mean(e):.2%}")


if __name__ == "__main__":
    main()
