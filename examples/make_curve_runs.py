"""Write ``examples/curve_ladder.csv`` and ``examples/hero_run.csv``: the tracking examples
(docs/tracking.md, notebooks/track_a_run.ipynb use the published ladders instead).

Synthetic, so that they ship with delphi: a ladder of 8 runs (50M..400M parameters, 600 and
1,500 steps, 20 checkpoints each, cosine schedule with 20 warm-up steps to 0.1 x a 1e-3
peak, batch 2^20 tokens) whose checkpoint losses follow the chinchilla-ckpt law L = E +
A/N^alpha + B/D^beta + F h^gamma (E = 1.8, A = 400, B = 2000, F = 0.25, alpha = 0.34,
beta = 0.37, gamma = 1.5; h = lr / peak) with 0.1% log-normal noise (seed 26); and the
"hero" run, 1.6B parameters and 4,000 steps on the same schedule, logged every 200 steps
from the same law with 0.1% noise (seed 27), the first 3,000 steps only (a run in progress).
Run it to regenerate the files: ``python examples/make_curve_runs.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

TRUE = {"E": 1.8, "A": 400.0, "B": 2000.0, "F": 0.25, "alpha": 0.34, "beta": 0.37, "gamma": 1.5}
BATCH = 2 ** 20
PEAK = 1e-3


def _lr(steps: np.ndarray, total: int) -> np.ndarray:
    """cosine:warmup=20,final=0.1 with a 1e-3 peak (delphi.inputs.schedules.Schedule)."""
    warm = steps <= 20
    t = (steps - 20) / (total - 20)
    cos = 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * np.clip(t, 0, 1)))
    return PEAK * np.where(warm, steps / 20, cos)


def _loss(n: float, steps: np.ndarray, total: int, rng) -> np.ndarray:
    t = TRUE
    h = _lr(steps, total) / PEAK
    loss = (t["E"] + t["A"] * n ** -t["alpha"] + t["B"] * (steps * BATCH) ** -t["beta"]
            + t["F"] * h ** t["gamma"])
    return loss * np.exp(rng.normal(0, 0.001, steps.size))


def main() -> None:
    here = Path(__file__).resolve().parent
    rng = np.random.default_rng(26)
    rows = []
    for n in (5e7, 1e8, 2e8, 4e8):
        for total in (600, 1500):
            s = np.arange(total // 20, total + 1, total // 20)
            rows.append(pd.DataFrame({"run": f"n{int(n / 1e6)}m-s{total}", "params": n,
                                      "tokens": s * BATCH, "step": s, "lr": _lr(s, total),
                                      "peak_lr": PEAK, "total_steps": total,
                                      "loss": _loss(n, s, total, rng).round(5)}))
    pd.concat(rows).to_csv(here / "curve_ladder.csv", index=False)
    s = np.arange(200, 3001, 200)
    pd.DataFrame({"step": s, "loss": _loss(1.6e9, s, 4000, np.random.default_rng(27)).round(5)}
                 ).to_csv(here / "hero_run.csv", index=False)


if __name__ == "__main__":
    main()
