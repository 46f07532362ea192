"""Simulated ladders for the accuracy tests and benchmarks: each run's task loss (bpb)
follows a known Chinchilla law times a run offset, and its accuracy the task sigmoid of that
loss plus checkpoint noise.

:func:`simulate` is a small, quiet ladder (run offsets 0.3% sd, checkpoint noise 0.5 points;
registry, figure and benchmark-table tests). :func:`simulate_noisy` is the noisier ladder of
``tests/test_accuracy.py`` and of the calibration study in ``benchmarks/bench_accuracy.py``
(run offsets 1% sd, checkpoint noise 0.6 points, 15 runs), and :func:`noisy_truth` the final
accuracy of a new run of it (its own run offset and checkpoint noise).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from delphi.accuracy import Task
from delphi.laws import CHINCHILLA, sigmoid_law

#: The simulated task: bpb and accuracy columns, chance 0.25.
TASK = Task("sim", ("bpb/sim",), ("acc/sim",), 0.25)
#: Step 1's true parameters (task loss in bpb) and step 2's (accuracy).
T1 = {"E": 0.55, "A": 400.0, "B": 150.0, "alpha": 0.45, "beta": 0.3}
T2 = {"U": 1.0, "C": 0.25, "k": 8.0, "L0": 0.8}
#: :func:`simulate_noisy`'s run noise (sd of the log task loss) and checkpoint noise
#: (sd of the accuracy, fraction).
RUN_SD, CKPT_SD = 0.01, 0.006


def task_loss(n, d) -> np.ndarray:
    """The true task loss (bpb) at N = ``n``, D = ``d`` (arrays or scalars)."""
    return CHINCHILLA.predict(T1, {"params": np.atleast_1d(n), "tokens": np.atleast_1d(d)})


def true_accuracy(n, d) -> float:
    """The true expected accuracy at (N, D): the sigmoid of the true task loss."""
    return float(sigmoid_law(0.25).predict(T2, {"task_loss": task_loss(n, d)})[0])


def simulate(seed: int = 0, ckpts: int = 20, sizes=(1e8, 2e8, 4e8),
             mults=(0.5, 1, 2, 5)) -> pd.DataFrame:
    """One row per checkpoint of runs of N in ``sizes`` trained on ``mults`` x 20 N tokens."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        for m in mults:
            tok = 20 * n * m * np.linspace(0.05, 1.0, ckpts)
            bpb = CHINCHILLA.predict(T1, {"params": np.full(ckpts, n), "tokens": tok}) * \
                math.exp(rng.normal(0, 0.003))
            acc = sigmoid_law(0.25).predict(T2, {"task_loss": bpb}) + rng.normal(0, 0.005,
                                                                                 ckpts)
            for i in range(ckpts):
                rows.append({"run": f"{n / 1e6:.0f}M-{m}x", "step": i + 1, "params": n,
                             "tokens": tok[i], "loss": 2 + bpb[i], "bpb/sim": bpb[i],
                             "acc/sim": acc[i]})
    return pd.DataFrame(rows)


def simulate_noisy(seed: int, sizes=(1e8, 2e8, 4e8), mults=(0.5, 1, 2, 5, 10),
                   ckpts: int = 40) -> pd.DataFrame:
    """One ladder: each run's task loss follows the Chinchilla law at every checkpoint times
    exp(run offset, sd :data:`RUN_SD`); accuracy = the sigmoid of the task loss + checkpoint
    noise (sd :data:`CKPT_SD`). Runs are named like ``100M-1xC``."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        for m in mults:
            d = 20 * n * m
            run = f"{n / 1e6:.0f}M-{m}xC"
            off = rng.normal(0, RUN_SD)
            tok = d * np.linspace(0.05, 1.0, ckpts)
            bpb = task_loss(np.full(ckpts, n), tok) * math.exp(off)
            acc = sigmoid_law(0.25).predict(T2, {"task_loss": bpb}) + rng.normal(
                0, CKPT_SD, ckpts)
            for i in range(ckpts):
                rows.append({"run": run, "step": i + 1, "params": n, "tokens": tok[i],
                             "loss": 2.0 + 1.5 * bpb[i], "bpb/sim": bpb[i],
                             "acc/sim": acc[i]})
    return pd.DataFrame(rows)


def noisy_truth(seed: int, n: float, d: float) -> float:
    """A new run's final accuracy at (n, d) on ladder ``simulate_noisy(seed)``'s laws: its
    own run offset and checkpoint noise (seeded from ``seed``)."""
    rng = np.random.default_rng(10_000 + seed)
    bpb = task_loss(n, d) * math.exp(rng.normal(0, RUN_SD))
    return float(sigmoid_law(0.25).predict(T2, {"task_loss": bpb})[0]
                 + rng.normal(0, CKPT_SD))
