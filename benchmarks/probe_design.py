"""Probe: why issue 25's width target is not met -- the terms of each design's interval.

Runs ``bench_design.study`` (the same start/pool/held-out splits, the same suggest rounds,
usual rule and random picks, seed 0) and, for each ladder's main target, splits each final
design's 90% new-run interval into its terms (:func:`delphi.calibration.calibrated_interval`):
r = C_target / C_max_fitted, the calibration line sigma(r) = sigma_0 + k log10 r refitted on
the design's own ladder (blended with the reference class), the parameter sd and the run
noise. Then the width ratio suggest / usual three ways: realised (each design with its own
refitted calibration), with the usual design's calibration evaluated at suggest's r (what
suggest's ranking assumes: the calibration held fixed), and random picks' mean.

Deterministic (seed 0), no network; several minutes (the (Mis)Fitting study is the slow one).
Usage: python benchmarks/probe_design.py [LADDER ...]   (default: the four of bench_design)
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_design as B  # noqa: E402


def _rel_width(cal: dict, ratio: float, z: float) -> float:
    """Relative width (upper - lower) / forecast of a calibrated interval with terms ``cal``
    at extrapolation ratio ``ratio``."""
    sig = (cal["sigma_0"] + cal["k"] * math.log10(max(ratio, 1.0))) \
        * cal.get("small_sample_factor", 1.0)
    sd = math.sqrt(sig ** 2 + cal["param_sd"] ** 2 + cal["run_sd"] ** 2)
    return 2 * math.sinh(z * sd)


def main(argv=None) -> int:
    from scipy.stats import norm
    names = (argv if argv is not None else sys.argv[1:]) or list(B.SETUPS)
    B.KEEP_CALIBRATION = True
    z = float(norm.ppf(0.95))
    print("| ladder | design | largest run | r | sigma_0 | k | own folds (weight) | f sigma(r) "
          "| param sd | run sd | width |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary = []
    for name in names:
        t0 = time.perf_counter()
        res = B.study(name, B.SETUPS[name])
        rows = {d: [x for x in v["rows"] if x["target"] == res["main"]][0]
                for d, v in res["designs"].items()}
        for d, v in res["designs"].items():
            c = rows[d]["cal"]
            print(f"| {name} | {d} | {v['max_flops']:.3g} | {c['ratio']:.3g} | "
                  f"{c['sigma_0']:.4f} | {c['k']:.4f} | {c.get('n_folds')} "
                  f"({c.get('blend_weight', 1.0):.2f}) | {c['sigma_used']:.4f} | "
                  f"{c['param_sd']:.4f} | {c['run_sd']:.4f} | {rows[d]['rel_width']:.2%} |")
        u, s = rows["usual"]["cal"], rows["suggest"]["cal"]
        fixed = _rel_width(u, s["ratio"], z) / _rel_width(u, u["ratio"], z)
        rnd = [rows[k]["rel_width"] for k in rows if k.startswith("random")]
        summary.append((name, rows["suggest"]["rel_width"] / rows["usual"]["rel_width"],
                        fixed, float(np.mean(rnd)) / rows["usual"]["rel_width"],
                        time.perf_counter() - t0))
    print()
    print("| ladder | suggest / usual, realised | with usual's calibration at suggest's r "
          "| random (mean of 3) / usual | s |")
    print("|---|---:|---:|---:|---:|")
    for name, real, fixed, rnd, sec in summary:
        print(f"| {name} | {real:.3f} | {fixed:.3f} | {rnd:.3f} | {sec:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
