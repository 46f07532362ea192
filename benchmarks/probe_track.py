"""Probes behind the issue-26 targets that ``bench_track.py`` reports as not met.

1. ``runonly``: would a run-only completion fitted from the end of warm-up (instead of from
   the curve's start at 25% of the run, as the tracker does) give a usable forecast at 25%,
   and how does it do at 50% and 75%? For each hero of ``bench_track.heroes`` (``down`` 0 and
   1), the median over runs of |ln(final / completion)| at the first checkpoint at or after
   each fraction, for both starts (``WarmCompletion``, the annealing law).
2. ``profile``: cProfile of the multi-power completion of ``bench_curves.py`` (one 2,000-step
   run, 1,600 checkpoints), with the calls of ``multipower_ld_grid`` counted by problem size
   (checkpoints, groups, parameter points).

Usage: ``python benchmarks/probe_track.py [runonly] [profile]`` (both by default).
"""

from __future__ import annotations

import cProfile
import collections
import math
import pstats
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

FRACTIONS = (0.25, 0.5, 0.75)


def runonly() -> None:
    import bench_track as bt
    from delphi.forecasting.completion_refit import WarmCompletion
    from delphi.inputs.schedules import Schedule, warmup_end
    for down in (0, 1):
        for name, _, runs in bt.heroes(None, down):
            out = {}
            for mode in ("curve start", "warm-up end"):
                errs = {q: [] for q in FRACTIONS}
                for _, tg, log in runs:
                    total = tg["steps"]
                    sched = Schedule.parse(tg["schedule"], peak_lr=1.0, total_steps=total)
                    start = max(1, warmup_end(sched.lrs()), math.ceil(0.25 * total))
                    wc = WarmCompletion(sched.lrs(),
                                        start_step=start if mode == "curve start" else 1)
                    st = log["step"].to_numpy().astype(int)
                    ls = log["loss"].to_numpy(float)
                    if st[-1] < total:
                        continue
                    for q in FRACTIONS:
                        k = np.flatnonzero((st >= q * total) & (st >= start))[0]
                        keep = np.arange(k + 1) if mode == "warm-up end" else \
                            np.flatnonzero(st[:k + 1] >= start)
                        v = wc.predict(st[keep], ls[keep])
                        errs[q].append(None if v is None else abs(math.log(ls[-1] / v)))
                out[mode] = errs
            for mode, errs in out.items():
                cells = []
                for q in FRACTIONS:
                    e = [x for x in errs[q] if x is not None]
                    none = len(errs[q]) - len(e)
                    cells.append(f"{q:.0%}: " + (f"{np.median(e):.2%}" if e else "none")
                                 + (f" ({none} of {len(errs[q])} runs without one)"
                                    if none else ""))
                print(f"{name} | run-only from the {mode} | " + "; ".join(cells), flush=True)


def profile() -> None:
    import delphi
    import delphi.inputs.schedules as S
    import delphi.laws.curves as LC
    from bench_curves import multipower_ladder
    orig = S.multipower_ld_grid
    calls, secs = collections.Counter(), collections.Counter()

    def counted(groups, C, beta, gamma, grad=True):
        key = (groups.start.size - 1, groups.drop.size, int(np.size(C)), grad)
        t0 = time.perf_counter()
        r = orig(groups, C, beta, gamma, grad=grad)
        secs[key] += time.perf_counter() - t0
        calls[key] += 1
        return r

    mp = multipower_ladder()
    LC.multipower_ld_grid = counted
    try:
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        delphi.complete(mp, "mp-2000", "multipower")
        prof.disable()
        total = time.perf_counter() - t0
    finally:
        LC.multipower_ld_grid = orig
    print(f"multipower completion: {total:.1f} s under cProfile")
    pstats.Stats(prof).sort_stats("tottime").print_stats(6)
    by_n = collections.defaultdict(lambda: [0, 0.0, 0])
    for (n, m, pts, grad), c in calls.items():
        b = by_n[(n, m)]
        b[0] += c
        b[1] += secs[(n, m, pts, grad)]
        b[2] += c * pts
    for (n, m), (c, s, pts) in sorted(by_n.items()):
        print(f"multipower_ld_grid on {n} checkpoints ({m} groups): {c} calls, {pts} parameter "
              f"points, {s:.1f} s")


def main(argv=None) -> int:
    which = (argv if argv is not None else sys.argv[1:]) or ["runonly", "profile"]
    warnings.simplefilter("ignore")
    with threadpool_limits(limits=1):
        if "runonly" in which:
            runonly()
        if "profile" in which:
            profile()
    return 0


if __name__ == "__main__":
    sys.exit(main())
