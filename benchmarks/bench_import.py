"""Benchmark: start-up time of ``import delphi`` and ``delphi --help`` (issue 8, item 4).

Every figure is the median of 5 fresh interpreters, interleaved with the baseline
(``import numpy, pandas, scipy.optimize``, the libraries a fit cannot do without) so both see
the same machine load:

* ``import delphi``: public names are imported on first use, so this is the package itself;
* ``import delphi`` and every name in ``delphi.__all__`` resolved: the whole stack a forecast
  loads (readers, laws, fitting engine, bootstrap, registry);
* ``delphi --help``: the console script, wall time of the process (no pandas or scipy).

Import times are measured inside the child (``perf_counter`` around the import statement);
``--help`` and its baseline are wall times of the whole process, interpreter start included.

Usage: python benchmarks/bench_import.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BASELINE = "import numpy, pandas, scipy.optimize"
TARGET = 1.3
HEAVY = ("matplotlib", "pyarrow", "scipy.stats", "scipy.signal", "scipy.interpolate",
         "pydantic", "pandas", "scipy.optimize")

_TIMED = """
import sys, time, json
t = time.perf_counter()
{statement}
seconds = time.perf_counter() - t
print(json.dumps({{"seconds": seconds,
                  "heavy": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def _timed_import(statement: str) -> dict:
    code = _TIMED.format(statement=statement, heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=_env())
    return json.loads(out.stdout.strip().splitlines()[-1])


def _wall(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=_env())
    return time.perf_counter() - t


def _env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    return env


def _delphi_help() -> list[str]:
    script = Path(sys.executable).with_name("delphi")
    if script.exists():
        return [str(script), "--help"]
    found = shutil.which("delphi")
    return [found, "--help"] if found else [sys.executable, "-m", "delphi.cli", "--help"]


def _row(benchmark, figure, value, base, target, met, note, unit="s") -> dict:
    return {"benchmark": benchmark, "figure": figure, "value": round(value, 4), "unit": unit,
            "baseline": BASELINE, "baseline_value": round(base, 4),
            "ratio": round(value / base, 3), "target": target, "met": bool(met), "note": note}


def run(repeats: int = 5) -> list[dict]:
    """Time the start-up figures against the baseline in this run; one row each.

    Returns
    -------
    list of dict with keys ``benchmark, figure, value, unit, baseline, baseline_value, ratio,
    target, met, note`` (seconds, medians of ``repeats`` fresh interpreters; ``ratio =
    value / baseline_value``).
    """
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    full = "import delphi\nfor _n in delphi.__all__: getattr(delphi, _n)"
    base, lazy, whole, base_wall, help_wall = [], [], [], [], []
    lazy_heavy, whole_heavy, base_heavy = set(), set(), set()
    help_cmd = _delphi_help()
    baseline_cmd = [sys.executable, "-c", BASELINE]
    for _ in range(repeats):  # interleaved: every figure sees the same load
        r = _timed_import(BASELINE)
        base.append(r["seconds"])
        base_heavy.update(r["heavy"])
        r = _timed_import("import delphi")
        lazy.append(r["seconds"])
        lazy_heavy.update(r["heavy"])
        r = _timed_import(full)
        whole.append(r["seconds"])
        whole_heavy.update(r["heavy"])
        base_wall.append(_wall(baseline_cmd))
        help_wall.append(_wall(help_cmd))
    b, bw = statistics.median(base), statistics.median(base_wall)
    lz, wh, hp = statistics.median(lazy), statistics.median(whole), statistics.median(help_wall)
    extra = sorted(whole_heavy - base_heavy)
    return [
        _row("import delphi", "import time (median of %d)" % repeats, lz, b, f"<= {TARGET}x",
             lz <= TARGET * b,
             f"public names load on first use; heavy modules loaded: "
             f"{', '.join(sorted(lazy_heavy)) or 'none'}; load {load:.2f}"),
        _row("import delphi + every name in __all__", "import time (median of %d)" % repeats,
             wh, b, f"<= {TARGET}x", wh <= TARGET * b,
             f"the whole stack a forecast uses; beyond the baseline it loads "
             f"{', '.join(extra) or 'nothing heavy'}; load {load:.2f}"),
        _row("delphi --help", "process wall time (median of %d)" % repeats, hp, bw,
             "< 1x (no pandas/scipy)", hp < bw,
             f"baseline here: wall time of `python -c \"{BASELINE}\"`; load {load:.2f}"),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    from run_all import print_rows
    print_rows(run(args.repeats))


if __name__ == "__main__":
    main()
