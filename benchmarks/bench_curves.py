"""Benchmark: curve laws on long runs and many checkpoints, as ratios to one Epoch fit.

Each figure is a wall-clock time divided by the time of ONE ``chinchilla`` fit on Epoch's
240 Chinchilla points (Besiroglu et al. 2024; the points of ``bench_epoch_fit.py``) measured
in the same process, with BLAS pinned to one thread (``threadpoolctl``), best of a few
repeats for both, so the ratio says how the curve laws compare with the standard fit on the
same machine under the same load (issue 8, item 3):

* ``multipower`` completion (Luo et al. 2025) of one 2,000-step cosine run logged at every
  step and stopped at 80% (1,600 checkpoints): ``delphi.curves.complete``. Target <= 20x.
* ``chinchilla-ckpt`` fit (Chinchilla + OLMo-ladder LR term) on 50 runs x 2,000 checkpoints
  (100,000 rows; h from the ladder's cosine schedule): ``delphi.fit``. Target <= 30x.
* ``annealing`` completion (Tissue et al. 2024) with ``siblings=True`` on 80,000 checkpoints
  (40 runs of one model and peak LR x 2,000 steps, 4 schedule shapes). Target <= 20x.

Data: synthetic, generated from the laws themselves with fixed seeds (numpy
``default_rng(2024 + k)``) and 0.2% multiplicative log-normal noise; the Epoch points are
read from the shared data directory (``DELPHI_DATA_DIR``).

Usage: ``python benchmarks/bench_curves.py [--repeats 3]``. A runner may import :func:`run`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

import delphi  # noqa: E402
from delphi.curves import complete  # noqa: E402
from delphi.fitting import fit_arrays  # noqa: E402
from delphi.laws import ANNEALING, CHINCHILLA_CKPT, MULTIPOWER  # noqa: E402
from delphi.schedules import Schedule, features  # noqa: E402

NOISE = 0.002
BASELINE = "one Epoch chinchilla fit"


def _noisy(y: np.ndarray, seed: int) -> np.ndarray:
    return y * np.exp(np.random.default_rng(seed).normal(0.0, NOISE, y.shape))


def _best(fn, repeats: int) -> tuple[float, object]:
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def multipower_ladder() -> delphi.Ladder:
    """One 2,000-step cosine run (warmup 50, final 0.1, peak 3e-3) logged at every step up to
    80%, losses from the multi-power law (Luo et al. 2025 Fig. 1 scale) with 0.2% noise."""
    spec = "cosine:warmup=50,final=0.1"
    sched = Schedule.parse(spec, peak_lr=3e-3, total_steps=2000)
    true = {"L0": 2.9, "A": 0.5, "B": 300.0, "alpha": 0.5, "C": 2.0, "beta": 0.6, "gamma": 0.5}
    steps = np.arange(1, 1601)
    f = features(sched, steps)
    x = {"S1": f["S1"], "step": steps.astype(float), "_group": np.zeros(steps.size, int),
         "_lrs": [sched.lrs()]}
    loss = _noisy(MULTIPOWER.predict(true, x), 2024)
    frame = pd.DataFrame({"run": "mp-2000", "step": steps, "loss": loss, "params": 1e8,
                          "tokens": steps * 1e6, "peak_lr": 3e-3, "total_steps": 2000,
                          "fraction": steps / 2000})
    return delphi.Ladder(frame, name="bench-multipower", schedule=spec)


def ckpt_ladder(runs: int = 50, steps: int = 2000) -> delphi.Ladder:
    """``runs`` cosine runs (warmup 50, final 0.1) of 20M-2B params and 10-200 tokens/param,
    ``steps`` checkpoints each, losses from chinchilla-ckpt with 0.2% noise."""
    rng = np.random.default_rng(2025)
    true = {"E": 1.9, "A": 300.0, "B": 900.0, "F": 0.12, "alpha": 0.32, "beta": 0.30,
            "gamma": 1.5}
    spec = "cosine:warmup=50,final=0.1"
    n = 10 ** rng.uniform(7.3, 9.3, runs)
    ratio = 10 ** rng.uniform(1.0, 2.3, runs)
    parts = []
    for i in range(runs):
        sched = Schedule.parse(spec, peak_lr=3e-3, total_steps=steps)
        s = np.arange(1, steps + 1)
        tokens = n[i] * ratio[i] * s / steps
        h = features(sched, s)["h"]
        parts.append(pd.DataFrame({"run": f"r{i:03d}", "step": s, "params": n[i],
                                   "tokens": tokens, "peak_lr": 3e-3, "total_steps": steps,
                                   "fraction": s / steps, "_h": h}))
    t = pd.concat(parts, ignore_index=True)
    x = {"params": t["params"].to_numpy(float), "tokens": t["tokens"].to_numpy(float),
         "h": t.pop("_h").to_numpy(float)}
    t["loss"] = _noisy(CHINCHILLA_CKPT.predict(true, x), 2026)
    return delphi.Ladder(t, name="bench-ckpt", schedule=spec)


def annealing_ladder(runs: int = 40, steps: int = 2000) -> delphi.Ladder:
    """``runs`` runs of one model and peak LR, ``steps`` checkpoints each (80,000 rows), on
    cosine / linear / WSD / WSD 1-sqrt schedules of 2,000-4,000 steps (logged LR column),
    losses from the annealing law with 0.2% noise."""
    rng = np.random.default_rng(2027)
    true = {"L0": 2.8, "A": 0.45, "C": 0.35, "alpha": 0.55}
    shapes = ("cosine:warmup=100,final=0.1", "linear:warmup=100,final=0.0",
              "wsd:warmup=100,decay=0.2,final=0.0", "wsd:warmup=100,decay=0.3,cooldown=1-sqrt")
    parts = []
    for i in range(runs):
        total = int(rng.integers(2000, 4001))
        sched = Schedule.parse(shapes[i % len(shapes)], peak_lr=2e-3, total_steps=total)
        s = np.unique(np.linspace(1, total, steps).round().astype(int))
        f = features(sched, s)
        loss = _noisy(ANNEALING.predict(true, {"S1": f["S1"], "S2": f["S2"]}), 3000 + i)
        parts.append(pd.DataFrame({"run": f"a{i:03d}", "step": s, "loss": loss, "params": 1.5e8,
                                   "tokens": s * 5e5, "peak_lr": 2e-3, "lr": f["lr"],
                                   "total_steps": total, "fraction": s / total}))
    return delphi.Ladder(pd.concat(parts, ignore_index=True), name="bench-annealing")


def _row(benchmark, figure, seconds, base, target, note) -> dict:
    ratio = seconds / base
    return {"benchmark": benchmark, "figure": figure, "value": round(seconds, 4), "unit": "s",
            "baseline": BASELINE, "baseline_value": round(base, 4), "ratio": round(ratio, 2),
            "target": f"<= {target}x", "met": bool(ratio <= target), "note": note}


def run(repeats: int = 3) -> list[dict]:
    """Time the three curve-law workloads and one Epoch fit in this process; one row each.

    Returns
    -------
    list of dict with keys ``benchmark, figure, value, unit, baseline, baseline_value,
    ratio, target, met, note`` (``value`` and ``baseline_value`` in seconds, best of
    ``repeats``; ``ratio = value / baseline_value``).
    """
    from bench_epoch_fit import epoch_points
    warnings.simplefilter("ignore", delphi.DelphiWarning)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    n, d, y = epoch_points()
    mp, ck, an = multipower_ladder(), ckpt_ladder(), annealing_ladder()
    an_run = an.runs[0]
    rows = []
    with threadpool_limits(limits=1):
        base, _ = _best(lambda: fit_arrays("chinchilla", {"params": n, "tokens": d}, y),
                        max(repeats, 5))
        t, c = _best(lambda: complete(mp, "mp-2000", "multipower"), repeats)
        rows.append(_row("multipower completion, one 2,000-step run", "complete() time", t, base,
                         20, f"1,600 checkpoints (every step to 80%), synthetic seeded; "
                             f"predicted {c.loss:.4f}, {c.fit.n_free} free params; "
                             f"load {load:.2f}"))
        t, f = _best(lambda: delphi.fit(ck, "chinchilla-ckpt"), repeats)
        rows.append(_row("chinchilla-ckpt fit, 50 runs x 2,000 checkpoints", "fit() time", t,
                         base, 30, f"100,000 rows ({len(f.y)} fitted after the first 25% of "
                                   f"each run), synthetic seeded; gamma={f.params['gamma']:.3f}; "
                                   f"load {load:.2f}"))
        t, c = _best(lambda: complete(an, an_run, "annealing", siblings=True, upto_fraction=0.5),
                     repeats)
        rows.append(_row("annealing completion with siblings, 80,000 checkpoints",
                         "complete() time", t, base, 20,
                         f"40 runs x 2,000 checkpoints, fitted to 50% of {an_run} "
                         f"({c.n_checkpoints} checkpoints), synthetic seeded; load {load:.2f}"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from run_all import print_rows
    print_rows(run(args.repeats))


if __name__ == "__main__":
    main()
