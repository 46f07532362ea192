"""Benchmark: the exact Epoch optimum, warm-started bootstrap refits and the peers, side by side
(issue 8, items 1 and 6; issue 27, items 1 and 2).

* **Full fit vs brute force.** delphi's Chinchilla fit of Epoch's 240 points against L-BFGS-B
  from every point of Besiroglu et al.'s 4,500-point grid of starts (arXiv 2404.10102,
  Sec. 2), both on the same objective code in this process (target: >= 500x, reaching an
  objective <= 1.01828e-3).
* **Bootstrap refits.** delphi's fit + 1,000 run-bootstrap refits with one worker,
  warm-started from the full-data optimum with the default guard (every draw's weighted
  screen at the basin probes, the global search where a probe beats the warm optimum and on
  every 250th draw), as a ratio to one full fit in the same run (target: <= 50x); the same
  with the guard off, and the pre-warm-start path (a global search per draw, timed on 20).
* **The guard's audit.** On four ladders, 200 draws each with the global search on every
  draw (``check_every=1``): draws the basin check passed but the global search improved
  (target 0), and draws the check flagged.
* **Peers, in the same run** (issue 27): simple-scaling-laws 0.2.0's fit with its default
  1,000-draw bootstrap on the same 240 points (target: slower than delphi's fit + 1,000
  guarded refits), and the PyPI ``chinchilla`` 0.2.0 package's Approach 3 fit (its BFGS from
  Besiroglu et al.'s grid of starts, serial; every 10th start, time scaled to 4,500) with its
  objective scored by delphi's objective code. They need Python >= 3.12: the benchmark takes
  ``DELPHI_PEER_PYTHON``, else a pyenv 3.12+, else python3.12+ on PATH, and builds (once) or
  reuses a virtual environment with the peers in ``DELPHI_PEER_VENV`` (default
  ``~/.cache/delphi-bench/peer-py3.X``). The peer code runs in that interpreter
  (``benchmarks/ssl_bootstrap.py``); nothing of it is in the repository.

Usage: python benchmarks/bench_refits.py [--quick]   (--quick subsamples the 4,500 starts of
the brute-force baseline and the chinchilla package's grid and extrapolates their times).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_epoch_fit import baseline, epoch_points  # noqa: E402

from delphi.fitting import fit_arrays  # noqa: E402
from delphi.fitting.objective import Problem  # noqa: E402
from delphi.laws import CHINCHILLA  # noqa: E402
from delphi.uncertainty import bootstrap  # noqa: E402

TARGET_OBJECTIVE = 1.01828e-3
PEERS = ["simple-scaling-laws==0.2.0", "chinchilla==0.2.0", "polars"]
PEER_SCRIPT = Path(__file__).with_name("ssl_bootstrap.py")


def _row(benchmark, figure, value, unit, baseline_name, baseline_value, ratio, target, met,
         note=""):
    return {"benchmark": benchmark, "figure": figure, "value": value, "unit": unit,
            "baseline": baseline_name, "baseline_value": baseline_value, "ratio": ratio,
            "target": target, "met": met, "note": note}


def _full_fit_time(n, d, y, repeats=7):
    times, f = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        f = fit_arrays("chinchilla", {"params": n, "tokens": d}, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), f


def _version_ok(exe: str) -> bool:
    out = subprocess.run([exe, "-c", "import sys; assert sys.version_info >= (3, 12)"],
                         capture_output=True)
    return out.returncode == 0


def peer_python() -> tuple[str | None, str]:
    """(an interpreter >= 3.12, where it came from), or (None, how to get one)."""
    env = os.environ.get("DELPHI_PEER_PYTHON") or os.environ.get("DELPHI_BENCH_PY312")
    if env:
        return (env, "DELPHI_PEER_PYTHON") if _version_ok(env) else \
            (None, f"DELPHI_PEER_PYTHON={env} is not a Python >= 3.12")
    roots = [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]
    if shutil.which("pyenv"):
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True)
        roots.insert(0, out.stdout.strip() if out.returncode == 0 else None)
    found = []
    for root in filter(None, roots):
        for exe in glob.glob(os.path.join(root, "versions", "3.*", "bin", "python")):
            parts = Path(exe).parents[1].name.split(".")
            if len(parts) >= 2 and parts[1].isdigit() and int(parts[1]) >= 12:
                found.append(((int(parts[1]),), exe))
    if found:
        exe = min(found)[1]  # the oldest 3.12+: the peers' tested version
        if _version_ok(exe):
            return exe, "pyenv"
    for v in (12, 13, 14):
        exe = shutil.which(f"python3.{v}")
        if exe and _version_ok(exe):
            return exe, "PATH"
    return None, ("no Python >= 3.12 found: install one (e.g. `pyenv install 3.12`) or set "
                  "DELPHI_PEER_PYTHON to its interpreter")


def peer_venv(exe: str) -> tuple[str | None, str]:
    """(the peer environment's interpreter, note): built once with :data:`PEERS`, reused."""
    from filelock import FileLock
    ver = subprocess.run([exe, "-c", "import sys; print(f'{sys.version_info[0]}."
                                     "{sys.version_info[1]}')"],
                         capture_output=True, text=True).stdout.strip()
    where = Path(os.environ.get("DELPHI_PEER_VENV")
                 or Path.home() / ".cache" / "delphi-bench" / f"peer-py{ver}")
    where.parent.mkdir(parents=True, exist_ok=True)
    python = where / "bin" / "python"
    check = [str(python), "-c", "import simple_scaling_laws, polars, chinchilla"]
    with FileLock(str(where) + ".lock"):
        if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
            return str(python), f"reused {where}"
        steps = [[exe, "-m", "venv", str(where)],
                 [str(python), "-m", "pip", "install", "-q", *PEERS]]
        for step in steps:
            out = subprocess.run(step, capture_output=True, text=True)
            if out.returncode != 0:
                return None, f"could not build {where}: {(out.stderr or out.stdout)[-300:]}"
        return str(python), f"built {where}"


def run_peer(python: str, mode: str, points: Path, *args: str) -> dict:
    """Run ``ssl_bootstrap.py`` in the peer environment: its JSON, or {"error": ...}."""
    out = subprocess.run([python, str(PEER_SCRIPT), mode, str(points), *args],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": (out.stderr or out.stdout).strip()[-300:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def epoch_objective(n, d, y, params: dict) -> float:
    """Summed Huber objective (delta 1e-3 on log losses, scipy convention) of Chinchilla
    parameters on the points: delphi's objective code, for any fitter's parameters."""
    problem = Problem(law=CHINCHILLA, x={"params": n, "tokens": d}, log_y=np.log(y),
                      delta=1e-3, free=CHINCHILLA.param_names, fixed={})
    return float(problem.objective(problem.pack(params)))


#: The guard's audit: ladder, law, whether the ladder was looked at while the check was designed
#: (in sample: the dense ladder's unfinished draws made them suspects) or not (held out).
AUDIT_LADDERS = [("epoch-chinchilla", "chinchilla", "in sample"),
                 ("marin-isoflop-dclm", "chinchilla", "in sample"),
                 ("gadre2024", "chinchilla", "in sample"),
                 ("marin-delphi-dense", "power", "in sample"),
                 ("marin-isoflop-comma", "chinchilla", "held out"),
                 ("porian2024-rw", "chinchilla", "held out"),
                 ("openathena-isoflops", "chinchilla", "held out")]


def audit_rows() -> list[dict]:
    import delphi
    from delphi.readers import load_ladder
    rows = []
    for name, law, sample in AUDIT_LADDERS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = delphi.fit(load_ladder(name), law)
            t0 = time.perf_counter()
            draws = bootstrap(fit, n=200, seed=0, n_jobs=1, check_every=1)
            seconds = time.perf_counter() - t0
        missed = draws.n_missed
        rows.append(_row("guard-audit", f"{name} ({law}, {sample}): 200 draws, global search "
                         f"on every draw: draws the basin check passed that it improved",
                         missed, "draws", "", None, None, "0", missed == 0,
                         f"{draws.n_worse} draws improved in all; {seconds:.1f} s"))
    return rows


def run(quick: bool = False) -> list[dict]:
    n, d, y = epoch_points()
    rows = []
    with threadpool_limits(1):
        full, f = _full_fit_time(n, d, y)
        base_obj, _, base_time, used = baseline(n, d, y, 450 if quick else None)
        note = "" if used == 4500 else f"baseline extrapolated from {used} of 4,500 starts"
        rows.append(_row("epoch-exact-optimum", "Approach 3 on Epoch's 240 points, one fit (median of 7)",
                         full, "s", "L-BFGS-B from 4,500 grid starts", base_time, base_time / full,
                         ">= 500x", base_time / full >= 500 and f.objective <= TARGET_OBJECTIVE,
                         f"objective {f.objective:.8e} (baseline {base_obj:.8e}); {note}".strip()))

        # delphi's fit + 1,000 guarded refits, best of 3 (the peer's figure is best of 3 too).
        totals, boots, draws = [], [], None
        for _ in range(3):
            t0 = time.perf_counter()
            f = fit_arrays("chinchilla", {"params": n, "tokens": d}, y)
            t1 = time.perf_counter()
            draws = bootstrap(f, n=1000, seed=0, n_jobs=1)
            totals.append(time.perf_counter() - t0)
            boots.append(time.perf_counter() - t1)
        full2, _ = _full_fit_time(n, d, y)
        fit_ref = min(full, full2)
        ours, boot = min(totals), min(boots)
        rows.append(_row("epoch-bootstrap", "1,000 run-bootstrap refits, 1 worker, guard on",
                         boot, "s", "one full Epoch fit", fit_ref, boot / fit_ref, "<= 50x",
                         boot / fit_ref <= 50,
                         f"guard: {draws.n_checked} draws checked, {draws.n_searched} also by "
                         f"the global search, {draws.n_worse} worse, {draws.n_missed} missed by "
                         f"the basin check; {draws.n_failed} failed; best of 3"))
        rows.append(_row("epoch-bootstrap", "delphi fit + 1,000 guarded refits", ours, "s",
                         "one full Epoch fit", fit_ref, ours / fit_ref, "", None, "best of 3"))
        noguard = []
        for _ in range(3):
            t0 = time.perf_counter()
            bootstrap(f, n=1000, seed=0, n_jobs=1, check_every=0)
            noguard.append(time.perf_counter() - t0)
        rows.append(_row("epoch-bootstrap", "1,000 refits, guard off (warm starts only)",
                         min(noguard), "s", "one full Epoch fit", fit_ref, min(noguard) / fit_ref,
                         "", None, f"the guard costs {boot - min(noguard):.3g} s of 1,000 draws"))
        old = []
        for _ in range(2):
            t0 = time.perf_counter()
            bootstrap(f, n=1000, seed=0, n_jobs=1, check_every=25)
            old.append(time.perf_counter() - t0)
        # The pre-warm-start path: every draw a global fit (timed on 20 draws, x 50).
        rng = np.random.default_rng(0)
        t0 = time.perf_counter()
        for _ in range(20):
            idx = rng.integers(0, len(y), len(y))
            fit_arrays("chinchilla", {"params": n[idx], "tokens": d[idx]}, y[idx])
        cold = (time.perf_counter() - t0) * 50
        rows.append(_row("epoch-bootstrap", "1,000 refits by global search each (extrapolated "
                         "from 20)", cold, "s", "warm-started bootstrap", boot, cold / boot, "",
                         None, "speed-up of the warm start over the old path"))
        rows.append(_row("epoch-bootstrap", "1,000 refits, global search on every 25th draw "
                         "too (the audit rate before issue 27)", min(old), "s",
                         "warm-started bootstrap", boot, min(old) / boot, "", None,
                         "what the old guard's 40 global searches cost"))

    exe, where = peer_python()
    python, venv_note = peer_venv(exe) if exe else (None, where)
    if python is None:
        for figure in ("simple-scaling-laws fit + 1,000-draw bootstrap",
                       "chinchilla (PyPI) Approach 3 fit"):
            rows.append(_row("peers", figure, None, "s", "", None, None, "", None,
                             f"skipped: {venv_note}"))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            points = Path(tmp) / "epoch.csv"
            np.savetxt(points, np.c_[n, d, y], delimiter=",", header="params,tokens,loss",
                       comments="", fmt="%.17g")
            peer = run_peer(python, "ssl", points, "--draws", "1000", "--repeats", "3")
            every = "100" if quick else "10"
            cc = run_peer(python, "chinchilla", points, "--grid-every", every)
        context = f"Python {peer.get('python', '?')} from {where}; {venv_note}"
        sec = peer.get("seconds")
        rows.append(_row("peers", "simple-scaling-laws 0.2.0 fit + 1,000-draw bootstrap "
                         "(separable-power, 240 runs)", sec, "s", "delphi fit + 1,000 guarded "
                         "refits", ours, sec / ours if sec else None, "> 1x (delphi faster)",
                         sec > ours if sec else None,
                         peer.get("error") or f"best of 3 ({', '.join(f'{t:.2f}' for t in peer['times'])} s); "
                         f"{context}"))
        if sec:
            rows.append(_row("peers", "simple-scaling-laws fit + 1,000 draws, in Epoch fits",
                             sec, "s", "one full Epoch fit", fit_ref, sec / fit_ref, "", None,
                             ""))
        csec = cc.get("seconds")
        if csec:
            obj = epoch_objective(n, d, y, cc["params"])
            rows.append(_row("peers", "chinchilla 0.2.0 Approach 3 fit (BFGS from Besiroglu's "
                             "grid, serial)", csec, "s", "one full Epoch fit (delphi)", fit_ref,
                             csec / fit_ref, "", None,
                             f"{cc['starts']} of 4,500 starts run, time x {4500 / cc['starts']:.0f}; "
                             f"objective {obj:.8e} vs delphi {f.objective:.8e} "
                             f"({'delphi lower or equal' if f.objective <= obj * (1 + 1e-9) else 'delphi HIGHER'}); "
                             f"params " + ", ".join(f"{k}={v:.5g}" for k, v in cc["params"].items())))
        else:
            rows.append(_row("peers", "chinchilla 0.2.0 Approach 3 fit", None, "s", "", None,
                             None, "", None, cc.get("error", "")))
    rows += audit_rows()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for r in run(args.quick):
        ratio = f"{r['ratio']:.1f}x" if r["ratio"] is not None else "-"
        value = f"{r['value']:.4g} {r['unit']}" if r["value"] is not None else "-"
        print(f"{r['benchmark']:<20} {r['figure']:<58} {value:>12}  ratio {ratio:>8} "
              f"(target {r['target'] or '-'}; met: {r['met']})  {r['note']}")


if __name__ == "__main__":
    main()
