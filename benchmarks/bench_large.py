"""Benchmark: large ladders (issue 8, item 5).

Scenarios, each run in a fresh Python subprocess so that its peak memory is its own
(``ru_maxrss`` of that process, read by the process itself at its end):

* ``load 1e5``: loading and validating 1e5 single-row runs from Parquet, as a ratio to
  ``pandas.read_parquet`` of the same file in the same process (median of 5 after a warm-up).
  Target <= 5x.
* ``1e6 end to end``: 1e6 single-row runs loaded, fitted with ``power`` and forecast
  (``interval="none"``). Target: peak RSS <= 1.5 GB.
* ``curve 1e7``: a 1e7-row curve table (1,000 runs x 10,000 checkpoints) loaded from
  Parquet. Target: peak RSS <= 2.5 GB. (Skipped with ``--quick``.)
* scaling: time vs rows for load and for ``power``, ``chinchilla`` and ``chinchilla-ckpt``
  fits; the exponent of a least-squares line through log(time) vs log(rows) (1 = linear).

Data are generated with a fixed seed: single-row runs with N log-uniform in 1e7..1e10,
D/N log-uniform in 2..200, C = 6ND and a Chinchilla loss (Hoffmann et al. 2022's Epoch
refit: E 1.69, A 406.4, B 410.7, alpha 0.34, beta 0.28) times log-normal noise (1%); curve
tables with a cosine LR schedule per run and the same law along each run plus an LR term.

Usage: python benchmarks/bench_large.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

SEED = 0
_LAW = dict(E=1.69, A=406.4, B=410.7, alpha=0.34, beta=0.28)
_GB = 1024.0  # MB per GB


# ---------------------------------------------------------------------------- data
def single_row_runs(n: int, seed: int = SEED):
    """``n`` single-row runs (DataFrame: run, step, params, tokens, flops, loss)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    params = np.exp(rng.uniform(np.log(1e7), np.log(1e10), n))
    tokens = params * np.exp(rng.uniform(np.log(2), np.log(200), n))
    loss = (_LAW["E"] + _LAW["A"] / params ** _LAW["alpha"] + _LAW["B"] / tokens ** _LAW["beta"]) \
        * np.exp(rng.normal(0, 0.01, n))
    width = len(str(max(n - 1, 0)))
    return pd.DataFrame({"run": [f"r{i:0{width}d}" for i in range(n)], "step": np.full(n, 1000.0),
                         "params": params, "tokens": tokens, "flops": 6 * params * tokens,
                         "loss": loss})


def curve_table(runs: int, checkpoints: int, seed: int = SEED):
    """``runs`` x ``checkpoints`` rows: run, step, params, tokens, flops, loss, lr, peak_lr,
    total_steps, with a cosine schedule (final LR 10% of peak) per run."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    params = np.exp(rng.uniform(np.log(2e7), np.log(2e9), runs))
    peak = 10 ** rng.uniform(-3.5, -2.5, runs)
    batch = 2.0 ** 20
    total = float(checkpoints * 10)
    step = np.tile(np.arange(1, checkpoints + 1, dtype=float) * 10, runs)
    n = np.repeat(params, checkpoints)
    tokens = step * batch
    h = 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * step / total))
    loss = (_LAW["E"] + _LAW["A"] / n ** _LAW["alpha"] + _LAW["B"] / tokens ** _LAW["beta"]
            + 0.05 * h) * np.exp(rng.normal(0, 0.005, runs * checkpoints))
    width = len(str(max(runs - 1, 0)))
    names = np.array([f"c{i:0{width}d}" for i in range(runs)], dtype=object)
    return pd.DataFrame({"run": np.repeat(names, checkpoints), "step": step, "params": n,
                         "tokens": tokens, "flops": 6 * n * tokens, "loss": loss,
                         "lr": np.repeat(peak, checkpoints) * h,
                         "peak_lr": np.repeat(peak, checkpoints),
                         "total_steps": np.full(runs * checkpoints, total)})


def _write(frame, path: Path) -> Path:
    frame.to_parquet(path, index=False)
    return path


# ---------------------------------------------------------------------------- children
_CHILD = r'''
import json, resource, statistics, sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import pandas as pd
import delphi
task = json.loads(sys.argv[1])
out = {"import_s": time.perf_counter() - t0}

def timed(f, repeat=1):
    times, value = [], None
    for _ in range(repeat):
        t = time.perf_counter(); value = f(); times.append(time.perf_counter() - t)
    return statistics.median(times), value

kind = task["kind"]
if kind == "load_ratio":
    p = task["path"]
    pd.read_parquet(p); delphi.load_ladder(p)             # warm-up (file cache, lazy imports)
    reads, loads = [], []
    for _ in range(task.get("repeat", 5)):               # interleaved: same load on both
        reads.append(timed(lambda: pd.read_parquet(p))[0])
        loads.append(timed(lambda: delphi.load_ladder(p))[0])
    out["read_s"], out["load_s"] = statistics.median(reads), statistics.median(loads)
elif kind == "read_only":
    out["read_s"] = timed(lambda: pd.read_parquet(task["path"]))[0]
elif kind == "end_to_end":
    p = task["path"]
    out["load_s"], ladder = timed(lambda: delphi.load_ladder(p))
    out["fit_s"], fit = timed(lambda: delphi.fit(ladder, "power"))
    out["predict_s"], fc = timed(lambda: delphi.predict(ladder, {"flops": 1e24}, "power",
                                                        interval="none"))
    out["loss"], out["n_points"] = fc.loss, fit.n_points
elif kind == "load":
    out["load_s"], ladder = timed(lambda: delphi.load_ladder(task["path"]))
    out["rows"] = len(ladder)
elif kind == "scaling":
    res = []
    p, law = task["cases"][0]                             # warm-up: lazy imports, caches
    ladder = delphi.load_ladder(p)
    if law != "load":
        delphi.fit(ladder, law)
    for p, law in task["cases"]:
        ladder = delphi.load_ladder(p)
        if law == "load":
            s, _ = timed(lambda: delphi.load_ladder(p), repeat=3)
        else:
            s, _ = timed(lambda: delphi.fit(ladder, law), repeat=task.get("repeat", 1))
        res.append([len(ladder), s])
    out["times"] = res
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
print(json.dumps(out))
'''


def _child(task: dict) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(task)], capture_output=True,
                          text=True, env=env, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({task['kind']}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _row(benchmark, figure, value, unit, baseline, baseline_value, target, met, note="",
         ratio=None):
    if ratio is None and baseline_value:
        ratio = value / baseline_value
    return {"benchmark": benchmark, "figure": figure, "value": value, "unit": unit,
            "baseline": baseline, "baseline_value": baseline_value, "ratio": ratio,
            "target": target, "met": met, "note": note}


def _exponent(points) -> float:
    rows, secs = np.asarray(points, dtype=float).T
    return float(np.polyfit(np.log(rows), np.log(secs), 1)[0])


# ---------------------------------------------------------------------------- run
def run(quick: bool = False, workdir: str | None = None) -> list[dict]:
    """Run every scenario; one dict per figure (keys: benchmark, figure, value, unit,
    baseline, baseline_value, ratio, target, met, note). ``quick`` skips the 1e7 case."""
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp = Path(tmp)
        load = os.getloadavg()[0]

        # 1e5 single-row runs: load + validate vs pandas.read_parquet
        p5 = _write(single_row_runs(100_000), tmp / "single_1e5.parquet")
        r = _child({"kind": "load_ratio", "path": str(p5)})
        ratio = r["load_s"] / r["read_s"]
        rows.append(_row("large ladders", "load+validate 1e5 single-row runs (Parquet)",
                         r["load_s"], "s", "pandas.read_parquet, same file, same process",
                         r["read_s"], "<= 5x", ratio <= 5, ratio=ratio,
                         note="median of 5 interleaved pairs after a warm-up; before this "
                              "change about 1 minute"))

        # 1e6 single-row runs: load, power fit, forecast; peak RSS of a fresh process
        p6 = _write(single_row_runs(1_000_000), tmp / "single_1e6.parquet")
        base = _child({"kind": "read_only", "path": str(p6)})
        r = _child({"kind": "end_to_end", "path": str(p6)})
        total = r["load_s"] + r["fit_s"] + r["predict_s"]
        rows.append(_row("large ladders", "1e6 single-row runs: load + power fit + forecast, "
                         "peak RSS", r["peak_mb"], "MB",
                         "peak RSS of a fresh process running pandas.read_parquet of the file",
                         base["peak_mb"], "<= 1.5 GB", r["peak_mb"] <= 1.5 * _GB,
                         note=f"time {total:.1f} s (load {r['load_s']:.1f}, fit {r['fit_s']:.1f}, "
                              f"forecast {r['predict_s']:.1f}; the forecast refits); before: "
                              f"7 minutes and 3 GB"))

        if not quick:
            frame = curve_table(1000, 10_000)
            p7 = _write(frame, tmp / "curve_1e7.parquet")
            del frame
            base = _child({"kind": "read_only", "path": str(p7)})
            r = _child({"kind": "load", "path": str(p7)})
            rows.append(_row("large ladders", "1e7-row curve table (1,000 runs x 10,000 "
                             "checkpoints): load, peak RSS", r["peak_mb"], "MB",
                             "peak RSS of a fresh process running pandas.read_parquet",
                             base["peak_mb"], "<= 2.5 GB", r["peak_mb"] <= 2.5 * _GB,
                             note=f"load {r['load_s']:.1f} s; {r['rows']:,} rows"))
            p7.unlink()

        # scaling: time vs rows
        sizes = {"load": [10_000, 30_000, 100_000, 300_000, 1_000_000],
                 "power": [10_000, 30_000, 100_000, 300_000, 1_000_000],
                 "chinchilla": [3_000, 10_000, 30_000, 100_000]}
        files = {}
        for n in sorted(set(sizes["load"]) | set(sizes["chinchilla"])):
            files[n] = p6 if n == 1_000_000 else (
                p5 if n == 100_000 else _write(single_row_runs(n), tmp / f"single_{n}.parquet"))
        curve_sizes = [40, 80, 160, 320]             # checkpoints per run, 50 runs
        curves = {k: _write(curve_table(50, k), tmp / f"curve_50x{k}.parquet") for k in curve_sizes}
        cases = {"load": [(str(files[n]), "load") for n in sizes["load"]],
                 "power": [(str(files[n]), "power") for n in sizes["power"]],
                 "chinchilla": [(str(files[n]), "chinchilla") for n in sizes["chinchilla"]],
                 "chinchilla-ckpt": [(str(curves[k]), "chinchilla-ckpt") for k in curve_sizes]}
        for name, case in cases.items():
            r = _child({"kind": "scaling", "cases": case})
            exp = _exponent(r["times"])
            detail = ", ".join(f"{n:,}: {s:.2f} s" for n, s in r["times"])
            what = "load+validate (Parquet)" if name == "load" else f"{name} fit"
            rows.append(_row("large ladders", f"time vs rows exponent, {what}", exp, "",
                             "linear", 1.0, "about 1 (linear)", exp <= 1.25,
                             note=f"rows: {detail}", ratio=exp))
        rows.append(_row("large ladders", "machine load (1-min average) at start", load, "",
                         "cores", float(os.cpu_count() or 1), "", True, ratio=None))
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="skip the 1e7-row curve table")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    for row in run(quick=args.quick):
        value = f"{row['value']:.4g} {row['unit']}".strip()
        ratio = "" if row["ratio"] is None else f"ratio {row['ratio']:.3g}  "
        base = "" if row["baseline_value"] is None else f"(baseline {row['baseline_value']:.4g}: " \
                                                        f"{row['baseline']})"
        print(f"{row['figure']}: {value}  {ratio}target {row['target'] or '-'}  "
              f"met={row['met']}  {base}")
        if row["note"]:
            print(f"    {row['note']}")
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
