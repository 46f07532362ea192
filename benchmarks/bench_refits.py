"""Benchmark: the exact Epoch optimum and warm-started bootstrap refits (issue 8, items 1 and 6).

* **Full fit vs brute force.** delphi's Chinchilla fit of Epoch's 240 points against L-BFGS-B
  from every point of Besiroglu et al.'s 4,500-point grid of starts (arXiv 2404.10102,
  Sec. 2), both on the same objective code in this process (target: >= 500x, reaching an
  objective <= 1.01828e-3).
* **Bootstrap refits.** 1,000 run-bootstrap refits with one worker, warm-started from the
  full-data optimum with the default guard (every 25th draw also runs the global search),
  as a ratio to one full fit in the same run (target: <= 50x). The same draws refitted with
  the global search each (the pre-warm-start path) are timed on a sample and extrapolated.
* simple-scaling-laws' 1,000-draw bootstrap needs Python >= 3.12 with the package; the row
  says so and is skipped when no such interpreter is found (``DELPHI_BENCH_PY312``).

Usage: python benchmarks/bench_refits.py [--quick]   (--quick subsamples the 4,500 starts
and extrapolates the baseline time).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_epoch_fit import baseline, epoch_points  # noqa: E402

from delphi.fitting import fit_arrays  # noqa: E402
from delphi.uncertainty import bootstrap  # noqa: E402

TARGET_OBJECTIVE = 1.01828e-3


def _row(benchmark, figure, value, unit, baseline_name, baseline_value, ratio, target, met,
         note=""):
    return {"benchmark": benchmark, "figure": figure, "value": value, "unit": unit,
            "baseline": baseline_name, "baseline_value": baseline_value, "ratio": ratio,
            "target": target, "met": met, "note": note}


def _full_fit_time(n, d, y, repeats=7):
    times, f = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        f = fit_arrays("chinchilla", {"params": n, "tokens": d}, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), f


def _python312():
    """An interpreter >= 3.12 that can import simple_scaling_laws, or None."""
    candidates = [os.environ.get("DELPHI_BENCH_PY312")] + [shutil.which(f"python3.{v}")
                                                          for v in (14, 13, 12)]
    for exe in filter(None, candidates):
        ok = subprocess.run([exe, "-c", "import sys, simple_scaling_laws; "
                             "assert sys.version_info >= (3, 12)"], capture_output=True)
        if ok.returncode == 0:
            return exe
    return None


def run(quick: bool = False) -> list[dict]:
    n, d, y = epoch_points()
    rows = []
    with threadpool_limits(1):
        full, f = _full_fit_time(n, d, y)
        base_obj, _, base_time, used = baseline(n, d, y, 450 if quick else None)
        note = "" if used == 4500 else f"baseline extrapolated from {used} of 4,500 starts"
        rows.append(_row("epoch-exact-optimum", "Approach 3 on Epoch's 240 points, one fit (median of 7)",
                         full, "s", "L-BFGS-B from 4,500 grid starts", base_time, base_time / full,
                         ">= 500x", base_time / full >= 500 and f.objective <= TARGET_OBJECTIVE,
                         f"objective {f.objective:.8e} (baseline {base_obj:.8e}); {note}".strip()))

        full2, f = _full_fit_time(n, d, y)
        t0 = time.perf_counter()
        draws = bootstrap(f, n=1000, seed=0, n_jobs=1)
        boot = time.perf_counter() - t0
        fit_ref = min(full, full2)
        rows.append(_row("epoch-bootstrap", "1,000 run-bootstrap refits, 1 worker, guard on",
                         boot, "s", "one full Epoch fit", fit_ref, boot / fit_ref, "<= 50x",
                         boot / fit_ref <= 50,
                         f"guard: {draws.n_worse} of {draws.n_checked} checked draws worse than "
                         f"the global search; {draws.n_failed} failed"))
        t0 = time.perf_counter()
        bootstrap(f, n=1000, seed=0, n_jobs=1, check_every=0)
        noguard = time.perf_counter() - t0
        rows.append(_row("epoch-bootstrap", "1,000 refits, guard off (warm starts only)",
                         noguard, "s", "one full Epoch fit", fit_ref, noguard / fit_ref, "", None))
        # The pre-warm-start path: every draw a global fit (timed on 20 draws, x 50).
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        for _ in range(20):
            idx = rng.integers(0, len(y), len(y))
            fit_arrays("chinchilla", {"params": n[idx], "tokens": d[idx]}, y[idx])
        cold = (time.perf_counter() - t0) * 50
        rows.append(_row("epoch-bootstrap", "1,000 refits by global search each (extrapolated "
                         "from 20)", cold, "s", "warm-started bootstrap", boot, cold / boot, "",
                         None, "speed-up of the warm start over the old path"))
    exe = _python312()
    if exe is None:
        rows.append(_row("epoch-bootstrap", "simple-scaling-laws 1,000-draw bootstrap", None, "s",
                         "warm-started bootstrap", boot, None, "slower than delphi", None,
                         "skipped: no Python >= 3.12 with simple-scaling-laws on this machine "
                         "(set DELPHI_BENCH_PY312 to one)"))
    else:
        code = Path(__file__).with_name("ssl_bootstrap.py")
        out = subprocess.run([exe, str(code)], capture_output=True, text=True)
        seconds = float(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else None
        rows.append(_row("epoch-bootstrap", "simple-scaling-laws 1,000-draw bootstrap", seconds,
                         "s", "warm-started bootstrap", boot,
                         seconds / boot if seconds else None, "slower than delphi",
                         seconds > boot if seconds else None, out.stderr[-200:]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for r in run(args.quick):
        ratio = f"{r['ratio']:.1f}x" if r["ratio"] is not None else "-"
        value = f"{r['value']:.4g} {r['unit']}" if r["value"] is not None else "-"
        print(f"{r['benchmark']:<20} {r['figure']:<58} {value:>12}  ratio {ratio:>8} "
              f"(target {r['target'] or '-'}; met: {r['met']})  {r['note']}")


if __name__ == "__main__":
    main()
