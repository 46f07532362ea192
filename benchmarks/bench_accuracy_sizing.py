"""Benchmark: the accuracy bootstraps sized to their Monte-Carlo error against the fixed
counts before issue 27, forecast by forecast, in one process.

Each case is forecast twice with the same seed: *fixed* (``n_boot=200,
calibration_draws=40``, the defaults before issue 27) and *sized* (the defaults since:
``n_boot=None, calibration_draws=None``, 100-200 draws and 20-40 per calibration cut, added
until each end of the interval has a Monte-Carlo standard error <= 0.1 of its width). For
each end of the 90% new-run interval: the difference sized - fixed, in points and in units of
the sized interval's own Monte-Carlo standard error (reported by the forecast, ``sizing``);
the draws used; the in-process CPU time of each.

Cases (three ladders; the OLMo ladder's tasks count as one):
1. the OLMo ladder's eight tasks at N = 6.9e9, D = 4e12 (``delphi accuracy olmo-ladder
   --task all``'s forecasts, the tasks stacked as that command does);
2. the 16 simulated ladders of the calibration study (``bench_accuracy.py --calibration``:
   ``tests/task_ladders.simulate_noisy``, 15 runs, a new 1.6B run at 2x Chinchilla, guard
   off, no smoothing), here at the default counts, with the coverage of each new run's own
   truth (``noisy_truth``) and the mean width before and after;
3. a third family of simulated ladders: the quiet ladder of the CLI tests
   (``task_ladders.simulate``, seeds 0-3, 12 runs x 10 checkpoints; target 1.6B at 1x).

Acceptance (fixed before the run): on every case both ends within 3 Monte-Carlo standard
errors of the fixed forecast (the sized draws are a prefix of the fixed ones, so the
difference has at most the sized interval's MC variance), the mean of the studentized
differences within +-0.5 (no bias), and the simulated coverage not lower than the fixed.

Usage: python benchmarks/bench_accuracy_sizing.py [--sims K] [--no-olmo]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
sys.path.insert(0, str(TESTS))

FIXED = dict(n_boot=200, calibration_draws=40)


def _row(case: str, fixed, sized, t_fixed: float, t_sized: float, truth=None) -> dict:
    sz = sized.sizing
    return {"case": case, "fixed": (fixed.lower, fixed.upper), "sized": (sized.lower, sized.upper),
            "se": (sz["mc_se_lower"], sz["mc_se_upper"]), "n_boot": sized.n_boot,
            "cal": sized.calibration["draws_per_cut"] if sized.calibration else None,
            "met": sz["met"], "t_fixed": t_fixed, "t_sized": t_sized, "truth": truth,
            "z": ((sized.lower - fixed.lower) / sz["mc_se_lower"],
                  (sized.upper - fixed.upper) / sz["mc_se_upper"])}


def olmo_rows() -> list[dict]:
    from delphi.accuracy import predict_accuracy

    kw = dict(target_params=6.9e9, target_tokens=4e12)
    t = time.process_time()
    fixed = predict_accuracy("olmo-ladder", "all", **kw, **FIXED)
    t_fixed = time.process_time() - t
    t = time.process_time()
    sized = predict_accuracy("olmo-ladder", "all", **kw)
    t_sized = time.process_time() - t
    return [_row(f"olmo-ladder {f.task.name}", f, s, t_fixed / len(fixed), t_sized / len(sized))
            for f, s in zip(fixed, sized)]


def sim_rows(n: int, family: str) -> list[dict]:
    import delphi
    from task_ladders import TASK, noisy_truth, simulate, simulate_noisy

    rows = []
    for seed in range(n):
        if family == "noisy":
            ladder = delphi.load_ladder(simulate_noisy(seed, ckpts=8))
            tn, td = 1.6e9, 6.4e10
            truth = noisy_truth(seed, tn, td)
        else:
            ladder = delphi.load_ladder(simulate(seed, ckpts=10))
            tn, td, truth = 1.6e9, 3.2e10, None
        kw = dict(target_params=tn, target_tokens=td, seed=seed, smooth=1, check_every=0)
        t = time.process_time()
        fixed = delphi.predict_accuracy(ladder, TASK, **kw, **FIXED)
        t_fixed = time.process_time() - t
        t = time.process_time()
        sized = delphi.predict_accuracy(ladder, TASK, **kw)
        t_sized = time.process_time() - t
        rows.append(_row(f"{family} sim {seed}", fixed, sized, t_fixed, t_sized, truth))
        print(_line(rows[-1]), flush=True)
    return rows


def _line(r: dict) -> str:
    f, s, se, z = r["fixed"], r["sized"], r["se"], r["z"]
    truth = "" if r["truth"] is None else f" | truth {100 * r['truth']:.1f}"
    return (f"| {r['case']} | [{100 * f[0]:.2f}, {100 * f[1]:.2f}] | [{100 * s[0]:.2f}, "
            f"{100 * s[1]:.2f}] | {100 * se[0]:.2f} / {100 * se[1]:.2f} | {z[0]:+.2f} / "
            f"{z[1]:+.2f} | {r['n_boot']} / {r['cal']} | {'yes' if r['met'] else 'no'} | "
            f"{r['t_fixed']:.2f} / {r['t_sized']:.2f} s{truth} |")


def summary(rows: list[dict], name: str) -> list[str]:
    z = np.array([r["z"] for r in rows]).ravel()
    out = [f"- {name}: {len(rows)} forecasts; |z| max {np.max(np.abs(z)):.2f}, mean z "
           f"{np.mean(z):+.2f}; within 3 MC s.e.: {'yes' if np.all(np.abs(z) <= 3) else 'NO'}; "
           f"CPU fixed {sum(r['t_fixed'] for r in rows):.1f} s, sized "
           f"{sum(r['t_sized'] for r in rows):.1f} s; draws used (main / per cut): "
           + ", ".join(f"{r['n_boot']}/{r['cal']}" for r in rows)]
    if rows and rows[0]["truth"] is not None:
        cf = sum(r["fixed"][0] <= r["truth"] <= r["fixed"][1] for r in rows)
        cs = sum(r["sized"][0] <= r["truth"] <= r["sized"][1] for r in rows)
        wf = np.mean([r["fixed"][1] - r["fixed"][0] for r in rows])
        ws = np.mean([r["sized"][1] - r["sized"][0] for r in rows])
        out.append(f"  90% coverage of the new run's truth: fixed {cf} of {len(rows)}, sized "
                   f"{cs} of {len(rows)}; mean width fixed {100 * wf:.2f}, sized "
                   f"{100 * ws:.2f} points")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sims", type=int, default=16, help="noisy simulated ladders (16)")
    ap.add_argument("--quiet-sims", type=int, default=4, help="quiet simulated ladders (4)")
    ap.add_argument("--no-olmo", action="store_true")
    args = ap.parse_args(argv)
    from threadpoolctl import threadpool_limits

    head = ("| case | fixed 200/40 [lo, hi] | sized [lo, hi] | MC s.e. lo / hi | z lo / hi | "
            "draws main / per cut | rule met | CPU fixed / sized |")
    print(head + "\n|---|---|---|---|---|---|---|---|", flush=True)
    lines = []
    with threadpool_limits(1):
        groups = {}
        if not args.no_olmo:
            groups["OLMo ladder, 8 tasks"] = olmo_rows()
            for r in groups["OLMo ladder, 8 tasks"]:
                print(_line(r), flush=True)
        groups["noisy simulated ladders"] = sim_rows(args.sims, "noisy")
        groups["quiet simulated ladders"] = sim_rows(args.quiet_sims, "quiet")
    for name, rows in groups.items():
        lines += summary(rows, name)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
