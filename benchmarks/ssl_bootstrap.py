"""Peer side of ``bench_refits.py``: run under a Python >= 3.12 virtual environment that has
``simple-scaling-laws`` 0.2.0, ``polars`` and ``chinchilla`` 0.2.0 (``bench_refits.peer_python``
builds it). Imports nothing from delphi: it reads the points the benchmark wrote and prints one
JSON object on its last line.

Modes
-----
``ssl``: simple-scaling-laws' ``fit(..., law="separable-power", n_draws=1000)`` on Epoch's 240
    Chinchilla points (one training run per point, so its bootstrap resamples runs, as
    delphi's does); ``seconds`` is the best of ``--repeats`` timed calls.
``chinchilla``: the PyPI ``chinchilla`` package's Approach 3 fit (Hoffmann et al. 2022,
    Sec. 3.3; Besiroglu et al. 2024, arXiv 2404.10102, Sec. 2): its BFGS from every point of
    Besiroglu et al.'s grid of starts (e in -1..1 step 0.5, log A and log B in 0..25 step 5,
    alpha and beta in 0..2 step 0.5; ``--grid-every k`` keeps every k-th start and the time is
    extrapolated) on the Huber loss (delta 1e-3) of log losses, serially (``parallel=False``)
    and without its plot. Its parameters come back so that the benchmark scores them with
    delphi's own objective code.

Usage: python ssl_bootstrap.py {ssl,chinchilla} POINTS.csv [--draws 1000] [--repeats 3]
       [--grid-every 1]
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np


def run_ssl(points: Path, draws: int, repeats: int) -> dict:
    import polars as pl
    from simple_scaling_laws import fit

    data = np.loadtxt(points, delimiter=",", skiprows=1)
    frame = pl.DataFrame({"training_run_id": [f"r{i}" for i in range(len(data))],
                          "model_size__n_params": data[:, 0],
                          "dataset_size__n_tokens": data[:, 1],
                          "test_loss__cross_entropy": data[:, 2]})
    times, model = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = fit(frame, law="separable-power", n_draws=draws, seed=0)
        times.append(time.perf_counter() - t0)
    params = model.params("test_loss__cross_entropy")
    return {"seconds": min(times), "times": times, "draws": draws,
            "params": {k: float(v) for k, v in params.items()}}


def run_chinchilla(points: Path, grid_every: int) -> dict:
    from chinchilla import Chinchilla
    from chinchilla._metrics import log_huber

    data = np.loadtxt(points, delimiter=",", skiprows=1)
    grid = {"e": np.arange(-1, 1.01, 0.5), "a": np.arange(0, 26, 5), "b": np.arange(0, 26, 5),
            "alpha": np.arange(0, 2.01, 0.5), "beta": np.arange(0, 2.01, 0.5)}
    with tempfile.TemporaryDirectory() as tmp:
        with open(Path(tmp) / "df.csv", "w") as fh:
            fh.write("C,N,D,loss\n")
            for n, d, y in data:
                fh.write(f"{float(6 * n * d)!r},{float(n)!r},{float(d)!r},{float(y)!r}\n")
        cc = Chinchilla(tmp, param_grid=grid, loss_fn=lambda t, p: log_huber(t, p, delta=1e-3),
                        log_level=40)
        cc.visualizer.optim = lambda *a, **k: None  # its plot is not part of the fit
        starts = itertools.product(*grid.values())
        kept = list(starts)[::grid_every]
        if grid_every > 1:  # every k-th start only: the package reads its starts from this
            import chinchilla.core as core
            core.itertools = type("Subsampled", (), {"product": staticmethod(
                lambda *axes: iter(kept))})
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cc.fit(parallel=False)
        seconds = (time.perf_counter() - t0) * 4500 / len(kept)
    return {"seconds": seconds, "starts": len(kept), "grid_every": grid_every,
            "params": {k: float(v) for k, v in cc.get_params().items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["ssl", "chinchilla"])
    parser.add_argument("points", type=Path, help="CSV: params,tokens,loss (one header line)")
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--grid-every", type=int, default=1)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    out = (run_ssl(args.points, args.draws, args.repeats) if args.mode == "ssl"
           else run_chinchilla(args.points, args.grid_every))
    out["python"] = sys.version.split()[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
