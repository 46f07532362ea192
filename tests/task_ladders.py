"""A small simulated ladder for the accuracy tests (registry, figure, benchmark): each run's
task loss (bpb) follows a known Chinchilla law times a run offset (0.3% sd), and its accuracy
the task sigmoid of that loss plus checkpoint noise (0.5 points sd)."""

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
