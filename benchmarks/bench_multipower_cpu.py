"""Benchmark (issue 26, target 3): CPU seconds of one multi-power completion of the bench case
against the best of 5 Epoch Chinchilla fits, both in this process.

The work of ``bench_track.py --multipower-only`` (``delphi.complete`` of
``bench_curves.multipower_ladder()``'s run ``mp-2000`` with the multi-power law, and
``fit_arrays("chinchilla")`` on Epoch's points), timed in CPU seconds (``time.process_time``,
user + sys of this process) instead of wall clock, so that the ratio means something on a
shared, loaded machine. One BLAS thread. Prints one JSON line per repeat: ``{"tree", "epoch_s",
"complete_s", "ratio", "loss", "objective", "load"}``. To compare two versions of the code, run
it alternately with PYTHONPATH set to each tree (the seventh pass's ``bt3.py``).

Usage: ``nice python benchmarks/bench_multipower_cpu.py [REPEATS]`` (default 1).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import warnings
from pathlib import Path

from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

import delphi  # noqa: E402
from bench_curves import multipower_ladder  # noqa: E402
from bench_epoch_fit import epoch_points  # noqa: E402


def main(repeats: int = 1) -> None:
    warnings.simplefilter("ignore")
    from scipy.stats import qmc  # noqa: F401  (the search's Sobol import, outside the timing)
    tree = str(Path(delphi.__file__).resolve().parents[1])
    n, d, y = epoch_points()
    with threadpool_limits(limits=1):
        for _ in range(repeats):
            epoch = math.inf
            for _ in range(5):
                t0 = time.process_time()
                delphi.fit_arrays("chinchilla", {"params": n, "tokens": d}, y)
                epoch = min(epoch, time.process_time() - t0)
            lad = multipower_ladder()
            t0 = time.process_time()
            c = delphi.complete(lad, "mp-2000", "multipower")
            dt = time.process_time() - t0
            print(json.dumps({"tree": tree, "epoch_s": epoch, "complete_s": dt,
                              "ratio": dt / epoch, "loss": float(c.loss),
                              "objective": float(c.fit.objective),
                              "load": os.getloadavg()[0]}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
