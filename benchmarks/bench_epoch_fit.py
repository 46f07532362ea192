"""Benchmark: delphi's fit of the Chinchilla law on Epoch's data vs a brute-force baseline.

Baseline (Besiroglu et al. 2024, arXiv 2404.10102, Sec. 2): L-BFGS-B with the analytic
gradient of the summed Huber objective (delta 1e-3) from every point of their 4,500-point grid
of starts: alpha, beta in {0, 0.5, ..., 2}, e = log E in {-1, -0.5, ..., 1}, a = log A and
b = log B in {0, 5, ..., 25}; keep the best. Both run in this process on the same data and
share the objective code, so the ratio measures the search strategy, not the implementation.

Usage: python benchmarks/bench_epoch_fit.py [--starts K]   (K < 4500 subsamples the grid
evenly and extrapolates the baseline time; the default runs all of it, a minute or two).
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

from delphi.fitting import fit_arrays
from delphi.fitting.objective import Problem
from delphi.laws import CHINCHILLA
from delphi.readers.paths import data_dir


def epoch_points():
    e = pd.read_csv(data_dir() / "epoch_chinchilla" / "svg_extracted_data.csv")
    e = e.sort_values("loss", kind="mergesort").iloc[:-5]
    n = e["Model Size"].to_numpy(float)
    return n, e["Training FLOP"].to_numpy(float) / (6 * n), e["loss"].to_numpy(float)


def baseline(n, d, y, starts: int | None):
    problem = Problem(law=CHINCHILLA, x={"params": n, "tokens": d}, log_y=np.log(y), delta=1e-3,
                      free=CHINCHILLA.param_names, fixed={})

    def objective(z):  # the summed (not averaged) Huber objective and its gradient
        f, g = problem.scaled_objective_and_grad(z)
        return f * problem.delta, g * problem.delta

    grid = list(itertools.product(np.arange(-1, 1.01, 0.5), np.arange(0, 26, 5),
                                  np.arange(0, 26, 5), np.arange(0, 2.01, 0.5),
                                  np.arange(0, 2.01, 0.5)))  # (e, a, b, alpha, beta)
    assert len(grid) == 4500
    if starts is not None and starts < len(grid):
        grid = [grid[i] for i in np.linspace(0, len(grid) - 1, starts).astype(int)]
    best = (np.inf, None)
    t0 = time.perf_counter()
    for e, a, b, alpha, beta in grid:
        res = minimize(objective, np.array([e, a, b, alpha, beta]), jac=True, method="L-BFGS-B")
        if res.fun < best[0]:
            best = (float(res.fun), res.x)
    seconds = (time.perf_counter() - t0) * (4500 / len(grid))
    return best[0], problem.values(best[1]), seconds, len(grid)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=5, help="delphi fits to time (best of)")
    args = parser.parse_args()
    n, d, y = epoch_points()
    with threadpool_limits(1):
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            f = fit_arrays("chinchilla", {"params": n, "tokens": d}, y)
            times.append(time.perf_counter() - t0)
        ours = min(times)
        base_obj, base_params, base_time, used = baseline(n, d, y, args.starts)
    fmt = lambda p: ", ".join(f"{k}={v:.6g}" for k, v in p.items())  # noqa: E731
    print(f"data: Epoch Chinchilla points, {len(y)} runs (5 highest losses dropped)")
    print(f"delphi   objective {f.objective:.8e}  time {ours:8.3f} s  {fmt(f.params)}")
    label = "" if used == 4500 else f" (extrapolated from {used} of 4500 starts)"
    print(f"baseline objective {base_obj:.8e}  time {base_time:8.3f} s{label}  {fmt(base_params)}")
    print(f"objective delphi - baseline: {f.objective - base_obj:+.3e} "
          f"({'equal or lower' if f.objective <= base_obj * (1 + 1e-9) else 'HIGHER'})")
    print(f"speed ratio baseline/delphi: {base_time / ours:.0f}x (target >= 150x)")


if __name__ == "__main__":
    main()
