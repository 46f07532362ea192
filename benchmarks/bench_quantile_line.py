"""Benchmark: the exact quantile line (delphi.core.quantile_line) against the linear programme
it replaced, on every call of the bundled ladders' predict and compare (issue 27).

Every call of the calibration's median line (``calibration._median_line``) and of the
reference class's quantile line (``reference._quantile_line``) made by ``delphi predict L
--target-flops 1e22``, ``delphi compare L`` and ``delphi predict L --target-flops 1e22 --law
auto`` on the 13 bundled ladders is recorded (the commands run in this process), then
replayed through the sparse HiGHS linear programme the code used before (kept here as
``lp_line``) and through :func:`~delphi.core.quantile_line.quantile_line`. Printed: the
number of distinct calls, the largest relative excess of the exact line's objective over the
programme's (<= 1e-12 is the claim; negative means lower), the calls whose lines differ by
more than 1e-12 relative (the programme's optimum not unique: another vertex of the same
optimal face, or the programme stopping short of the optimum), and the CPU of both.
Three-parameter lines (the reference class conditioned on the fit's residual scale) still go
through the programme and are counted, not replayed.

Usage: python benchmarks/bench_quantile_line.py [LADDER ...]   (default: all 13)
"""

from __future__ import annotations

import contextlib
import io
import sys
import time

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

import delphi.forecasting.calibration as cal
import delphi.forecasting.reference as ref
from delphi.core.quantile_line import quantile_line, quantile_line_objective
from delphi.presentation.cli import main

LADDERS = ["epoch-chinchilla", "gadre2024", "marin-delphi-dense", "marin-isoflop-comma",
           "marin-isoflop-dclm", "marin-isoflop-nemotron", "marin-moe-535b", "misfitting2025",
           "misfitting2025-final", "olmo-ladder", "openathena-isoflops", "porian2024-owt2",
           "porian2024-rw"]


def lp_line(x, y, tau, w, a_min):
    """The programme the calibration and the reference class solved before: (a, b)."""
    n = len(y)
    eye = sparse.identity(n, format="csc")
    a_eq = sparse.hstack([sparse.csc_matrix(np.stack([np.ones(n), x], axis=1)), eye, -eye],
                         format="csc")
    res = linprog(np.concatenate([[0.0, 0.0], tau * w, (1 - tau) * w]), A_eq=a_eq, b_eq=y,
                  bounds=[(a_min, None), (0, None)] + [(0, None)] * (2 * n), method="highs")
    assert res.success, res.message
    return float(res.x[0]), float(res.x[1])


def record(ladders) -> tuple[list, int]:
    calls, three = [], [0]
    real_m, real_q = cal._median_line, ref._quantile_line

    def median(x, y):
        calls.append((np.array(x), np.array(y), 0.5, None))
        return real_m(x, y)

    def quantile(x, y, tau, w, s=None):
        if s is None:
            calls.append((np.array(x), np.array(y), tau, np.array(w)))
        else:
            three[0] += 1
        return real_q(x, y, tau, w, s)

    cal._median_line, ref._quantile_line = median, quantile
    try:
        for name in ladders:
            for args in (["predict", name, "--target-flops", "1e22"], ["compare", name],
                         ["predict", name, "--target-flops", "1e22", "--law", "auto"]):
                with contextlib.redirect_stdout(io.StringIO()), \
                        contextlib.redirect_stderr(io.StringIO()):
                    main(args)
    finally:
        cal._median_line, ref._quantile_line = real_m, real_q
    return calls, three[0]


def main_() -> None:
    ladders = sys.argv[1:] or LADDERS
    calls, three = record(ladders)
    seen, distinct = set(), []
    for c in calls:
        key = (c[0].tobytes(), c[1].tobytes(), c[2], None if c[3] is None else c[3].tobytes())
        if key not in seen:
            seen.add(key)
            distinct.append(c)
    worst, differ, t_lp, t_new = -np.inf, [], 0.0, 0.0
    for x, y, tau, w in distinct:
        ww = np.ones(len(y)) if w is None else w
        t = time.process_time()
        a0, b0 = lp_line(x, y, tau, ww, cal.SIGMA_FLOOR)
        t_lp += time.process_time() - t
        t = time.process_time()
        a1, b1 = quantile_line(x, y, tau, w, a_min=cal.SIGMA_FLOOR, b_min=0.0)
        t_new += time.process_time() - t
        f0 = quantile_line_objective(x, y, a0, b0, tau, w)
        f1 = quantile_line_objective(x, y, a1, b1, tau, w)
        worst = max(worst, (f1 - f0) / abs(f0))
        if abs(a1 - a0) > 1e-12 * abs(a0) or abs(b1 - b0) > 1e-12 * max(abs(b0), 1e-300):
            differ.append((len(y), tau, a0, b0, a1, b1, (f1 - f0) / abs(f0)))
    print(f"{len(calls)} calls recorded, {len(distinct)} distinct, on {len(ladders)} ladder(s); "
          f"{three} three-parameter call(s) left to the programme")
    print(f"largest (exact - programme) / programme objective: {worst:.3g}")
    print(f"CPU: programme {t_lp:.3f} s, exact {t_new:.3f} s")
    print(f"{len(differ)} call(s) whose lines differ by more than 1e-12 relative:")
    for n, tau, a0, b0, a1, b1, rel in differ:
        print(f"  n={n:5d} tau={tau:g}: programme a={a0:.10g} b={b0:.10g}; exact a={a1:.10g} "
              f"b={b1:.10g}; objective {rel:+.2g} relative")


if __name__ == "__main__":
    main_()
