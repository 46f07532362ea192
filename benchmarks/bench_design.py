"""Benchmark: which run to train next (issue 25), a retrospective design study on real ladders.

For each public ladder with many runs -- Epoch's Chinchilla points (epoch-chinchilla), Porian
et al. 2024's isoFLOP grids (porian2024-owt2, porian2024-rw), the (Mis)Fitting sweeps
(misfitting2025-final, the best-LR run of each (N, D)) -- the runs are split by compute:

* **start**: the smallest budgets (the ladder in hand);
* **pool**: the runs above them up to a cap: what could be trained next, their losses hidden;
* **held out**: the largest budgets, far above the pool: the targets (the lowest-loss run of
  each held-out compute bin, as N and D).

Three ways to spend the same FLOPs S on the pool, S = the cost of the **usual rule**: add
the next two compute budgets up, every size of each (a standard isoFLOP grid):

* **suggest**: rounds of ``delphi.suggest_runs(n=4)`` for the largest held-out target, the
  candidates the pool's runs not yet picked, the budget what is left of S; a pick's true loss
  is revealed (the run joins the ladder) and the next round refits;
* **usual**: the next two budgets up;
* **random**: pool runs in a seeded random order, each taken when it fits in what is left of
  S (3 seeds).

Each final ladder predicts every held-out target with delphi's default interval
(``interval="auto"``: calibrated, or reference). Reported: the 90% new-run interval's width
relative to the forecast (at the suggest target and mean over targets), |log error|,
coverage, FLOPs spent. Plus the timing of ``delphi suggest`` on the Epoch ladder (one target,
the default grid; the CLI in a subprocess, 3 runs, median) against ``delphi predict`` for the
same target in the same way.

**Pick criteria, chosen out of sample** (``--variants width spread --selection --choose``):
suggest runs once per criterion of ``delphi.suggest_runs`` (``criterion=``), on the four
study ladders above and on five **selection** ladders -- Marin's isoFLOP sweeps
(marin-isoflop-comma, -dclm, -nemotron), Open-Athena's Llama 3 isoFLOP points
(openathena-isoflops) and Gadre et al. 2024's over-training grid (gadre2024) -- split the same
way (:data:`SELECTION`). The criterion is chosen on selection ladders only, leave one ladder
out: for each ladder, the criterion chosen on the selection ladders other than it (all five
for a study ladder), then scored on it. The choice rule, fixed before any run: among the
criteria whose pooled coverage on the choosing ladders is at least 85% (all, if none is),
the lowest mean over those ladders of the mean width ratio suggest / usual; a tie keeps the
default, ``width``. ``--random-seeds 0`` leaves the random picks out and ``--no-extras`` the
Fisher/refit agreement and the timing (to keep such a run within about half an hour).

Deterministic (seed 0), no network. Usage:
python benchmarks/bench_design.py [--write] [--only LADDER ...] [--variants width spread]
    [--selection] [--choose] [--json PATH] [--random-seeds K] [--no-extras]
(--write replaces the "Issue 25" section of benchmarks/RESULTS.md; with --variants, the
"Issue 25: pick criteria" section instead)
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
SECTION = "## Issue 25: which run to train next (`benchmarks/bench_design.py`)"
CHOICE_SECTION = "## Issue 25: pick criteria, chosen out of sample"

#: Per ladder: start below ``start`` FLOPs, pool up to ``pool``, held out from ``hold``;
#: ``tol`` groups runs into compute bins (runs within 1 + tol of a bin's smallest share it).
SETUPS = {
    "epoch-chinchilla": dict(start=1.2e19, pool=3e20, hold=1e21, tol=1.0),
    "porian2024-owt2": dict(start=1.1e17, pool=1.7e18, hold=6e18, tol=0.05),
    "porian2024-rw": dict(start=1.1e17, pool=1.7e18, hold=6e18, tol=0.05),
    "misfitting2025-final": dict(start=1.5e17, pool=3e18, hold=9e18, tol=1.0, best_lr=True),
}
#: Ladders the pick criterion is chosen on (never the study ladders above), split by the same
#: rule -- start at the two or three smallest budgets, a pool of the next three, targets the
#: top budgets after a gap -- fixed from the ladders' budgets alone, before any run.
SELECTION = {
    "marin-isoflop-comma": dict(start=1.5e19, pool=1.5e20, hold=1.5e20, tol=0.05),
    "marin-isoflop-dclm": dict(start=1.5e19, pool=1.5e20, hold=1.5e20, tol=0.05),
    "marin-isoflop-nemotron": dict(start=1.5e19, pool=1.5e20, hold=1.5e20, tol=0.05),
    "openathena-isoflops": dict(start=2e19, pool=2e20, hold=5e20, tol=0.3),
    "gadre2024": dict(start=1e18, pool=1e20, hold=3e20, tol=1.0),
}
#: The rule that picks a criterion on a set of ladders (module docstring).
MIN_COVERAGE = 0.85
DEFAULT_CRITERION = "width"
LAW = "chinchilla"
ROUND = 4
MAX_ROUNDS = 6
RANDOM_SEEDS = (0, 1, 2)


def bins(c: np.ndarray, tol: float) -> np.ndarray:
    """Compute bin of each run: sorted, a new bin when C exceeds the bin's first by 1 + tol."""
    order = np.argsort(c, kind="mergesort")
    ids = np.empty(len(c), dtype=int)
    b, first = -1, None
    for i in order:
        if first is None or c[i] > first * (1 + tol):
            b, first = b + 1, c[i]
        ids[i] = b
    return ids


def runs_table(name: str, setup: dict):
    import delphi
    full = delphi.load_ladder(name)
    fin, _ = full.final_points()
    if setup.get("best_lr"):
        fin = fin.loc[fin.groupby(["params", "tokens"])["loss"].idxmin()]
        full = full.select(runs=fin["run"])
    t = fin[["run", "params", "tokens", "flops", "loss"]].reset_index(drop=True)
    t["bin"] = bins(t["flops"].to_numpy(float), setup["tol"])
    return full, t


#: Keep each interval's calibration terms (``"cal"``) in the rows (benchmarks/probe_design.py).
KEEP_CALIBRATION = False


def forecast_all(full, runs: list[str], targets: pd.DataFrame, seed: int = 0) -> list[dict]:
    import delphi
    ladder = full.select(runs=runs)
    out = []
    for tg in targets.itertuples():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = delphi.predict(ladder, {"params": tg.params, "tokens": tg.tokens}, LAW,
                               seed=seed, off_trend=False)
        iv = f.interval
        out.append({"target": tg.run, "flops": tg.flops, "loss": tg.loss, "forecast": f.loss,
                    "log_error": float(np.log(f.loss / tg.loss)),
                    "rel_width": (iv.upper - iv.lower) / f.loss if iv else np.nan,
                    "covered": bool(iv and iv.lower <= tg.loss <= iv.upper),
                    "method": iv.method if iv else None})
        if KEEP_CALIBRATION:
            out[-1]["cal"] = dict(iv.calibration or {}) if iv else {}
    return out


def key_of(criterion: str) -> str:
    """The design's key: ``suggest`` for the default criterion, ``suggest-<criterion>``."""
    return "suggest" if criterion == DEFAULT_CRITERION else f"suggest-{criterion}"


def candidates_of(full, left: pd.DataFrame) -> pd.DataFrame:
    """The pool's runs as candidates: their given FLOPs, except where those are more than
    25% from the ladder's k x 6 N D (Marin's nominal budgets on some rows), which
    read_candidates refuses: those rows cost k x 6 N D in suggest's budget (the study's
    accounting stays in the ladder's FLOPs)."""
    from delphi.analyses.design import _FLOPS_RTOL, _k_convention
    out = left[["run", "params", "tokens", "flops"]].copy()
    six_nd = _k_convention(full) * 6.0 * out["params"] * out["tokens"]
    out.loc[(out["flops"] / six_nd - 1).abs() > _FLOPS_RTOL, "flops"] = np.nan
    return out


def suggest_design(full, t, start, pool, main, spend, criterion):
    """Rounds of suggest_runs for ``main``, losses revealed between rounds."""
    import delphi
    from delphi.analyses.design import _k_convention
    chosen: list[str] = []
    spent, rounds, t0, expected = 0.0, 0, time.perf_counter(), float("nan")
    while rounds < MAX_ROUNDS:
        left = pool[~pool.run.isin(chosen) & (pool.flops <= spend - spent)]
        cands = candidates_of(full, left)
        # a row without its given FLOPs costs k 6 N D in suggest's budget: it must fit too
        six_nd = _k_convention(full) * 6.0 * cands["params"] * cands["tokens"]
        cands = cands[cands["flops"].fillna(six_nd) <= (spend - spent) * (1 + 1e-9)]
        if cands.empty:
            break
        ladder = full.select(runs=list(start.run) + chosen)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s = delphi.suggest_runs(ladder, {"params": main.params, "tokens": main.tokens},
                                    LAW, budget=spend - spent, n=ROUND, repeats=False,
                                    candidates=cands,
                                    criterion=criterion)
        picks = [c.run.name for c in s.candidates]
        expected = s.candidates[-1].width_after / s.loss
        chosen += picks
        spent += float(t.set_index("run").loc[picks, "flops"].sum())
        rounds += 1
    return chosen, rounds, time.perf_counter() - t0, expected


def study(name: str, setup: dict, criteria=(DEFAULT_CRITERION,),
          random_seeds=RANDOM_SEEDS) -> dict:
    import delphi
    full, t = runs_table(name, setup)
    start = t[t.flops < setup["start"]]
    pool = t[(t.flops >= setup["start"]) & (t.flops < setup["pool"])]
    held = t[t.flops >= setup["hold"]]
    targets = held.loc[held.groupby("bin")["loss"].idxmin()].sort_values("flops")
    main = targets.iloc[-1]
    nxt = sorted(pool["bin"].unique())[:2]
    usual = pool[pool["bin"].isin(nxt)]
    spend = float(usual["flops"].sum())
    designs: dict[str, list[str]] = {"usual": list(start.run) + list(usual.run)}
    runs_of = {}
    for crit in criteria:
        runs_of[crit] = suggest_design(full, t, start, pool, main, spend, crit)
        designs[key_of(crit)] = list(start.run) + runs_of[crit][0]
    first = runs_of[criteria[0]]
    rounds, suggest_seconds, expected = first[1], first[2], first[3]
    for seed in random_seeds:
        order = pool.sample(frac=1.0, random_state=seed)
        take, used = [], 0.0
        for r in order.itertuples():
            if used + r.flops <= spend * (1 + 1e-9):
                take.append(r.run)
                used += r.flops
        designs[f"random{seed}"] = list(start.run) + take
    cost = t.set_index("run")["flops"]
    result = {"ladder": name, "n_start": len(start), "n_pool": len(pool),
              "targets": list(targets.run), "main": main.run, "spend": spend,
              "start_flops": float(start.flops.sum()), "rounds": rounds,
              "suggest_seconds": suggest_seconds, "expected": expected, "designs": {},
              "criteria": list(criteria),
              "by_criterion": {c: {"rounds": r[1], "seconds": r[2], "expected": r[3]}
                               for c, r in runs_of.items()}}
    for key, runs in designs.items():
        rows = forecast_all(full, runs, targets)
        result["designs"][key] = {
            "n_added": len(runs) - len(start), "flops": float(cost.loc[runs].sum()
                                                               - start.flops.sum()),
            "max_flops": float(cost.loc[runs].max()), "rows": rows,
            "added": [r for r in runs if r not in set(start.run)]}
    return result


def summarize(res: dict) -> dict:
    out = {}
    for key, d in res["designs"].items():
        rows = d["rows"]
        main = [r for r in rows if r["target"] == res["main"]][0]
        out[key] = {"n_added": d["n_added"], "flops": d["flops"], "max_flops": d["max_flops"],
                    "width_main": main["rel_width"], "err_main": abs(main["log_error"]),
                    "width": float(np.mean([r["rel_width"] for r in rows])),
                    "err": float(np.mean([abs(r["log_error"]) for r in rows])),
                    "covered": sum(r["covered"] for r in rows), "n": len(rows),
                    "methods": sorted({str(r["method"]) for r in rows})}
    rnd = [out[k] for k in out if k.startswith("random")]
    if not rnd:
        return out
    out["random"] = {k: float(np.mean([r[k] for r in rnd])) for k in
                     ("n_added", "flops", "max_flops", "width_main", "err_main", "width", "err")}
    out["random"].update(covered=sum(r["covered"] for r in rnd), n=sum(r["n"] for r in rnd),
                         methods=sorted({m for r in rnd for m in r["methods"]}))
    return out


def agreement() -> dict:
    """The Fisher fast path against the refits on the Epoch ladder: every default-grid
    candidate for one target, width after by both (the refits with 64 draws)."""
    import delphi
    ladder = delphi.load_ladder("epoch-chinchilla")
    target = {"params": 7e10, "tokens": 1.4e12}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = delphi.predict(ladder, target, LAW, off_trend=False)
        t0 = time.perf_counter()
        fast = delphi.suggest_runs(ladder, target, LAW, budget=3e22, forecast=f)
        t1 = time.perf_counter()
        slow = delphi.suggest_runs(ladder, target, LAW, budget=3e22, forecast=f,
                                   method="refit")
        t2 = time.perf_counter()
    a = {c.run.name: c for c in fast.candidates}
    b = {c.run.name: c for c in slow.candidates}
    names = list(a)
    # the parameter term alone (the extrapolation term is the same formula in both)
    pa = np.array([a[k].param_sd_after for k in names])
    pb = np.array([b[k].param_sd_after for k in names])
    ra = pd.Series([a[k].reduction_per_flop for k in names]).rank()
    rb = pd.Series([b[k].reduction_per_flop for k in names]).rank()
    return {"n": len(names), "param_sd_now": fast.param_sd,
            "param_rel_diff_median": float(np.median(np.abs(pa / pb - 1))),
            "param_rel_diff_max": float(np.max(np.abs(pa / pb - 1))),
            "rank_corr": float(np.corrcoef(ra, rb)[0, 1]),
            "top_fast": fast.best.run.name, "top_refit": slow.best.run.name,
            "top10_overlap": len(set(names[:10]) & set(list(b)[:10])),
            "fast_s": t1 - t0, "refit_s": t2 - t1}


def timing(repeats: int = 3) -> dict:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    base = [sys.executable, "-m", "delphi.presentation.cli"]
    args = ["epoch-chinchilla", "--target-params", "7e10", "--target-tokens", "1.4e12", "-q"]
    out = {}
    for cmd in (["suggest"] + args + ["--budget", "3e22"], ["predict"] + args):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            subprocess.run(base + cmd, env=env, check=True, capture_output=True)
            times.append(time.perf_counter() - t0)
        out[cmd[0]] = float(np.median(times))
    out["ratio"] = out["suggest"] / out["predict"]
    return out


def section(results, sums, tm, command, seconds, ag) -> list[str]:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [SECTION, "",
             f"`{command}` ({stamp}; Python {platform.python_version()}, {os.cpu_count()} "
             f"cores shared with other jobs; {seconds:.0f} s). Law {LAW}; 90% new-run "
             f"intervals from `delphi.predict` (interval auto); suggest = rounds of "
             f"`suggest_runs(n={ROUND})` (Fisher fast path, default settings) for the largest "
             f"held-out target, losses revealed between rounds; usual = the next two budgets "
             f"up, every size; random = seeded random pool runs (mean of {len(RANDOM_SEEDS)} "
             f"seeds), all within the usual rule's FLOPs. Widths are (upper - lower) / "
             f"forecast; errors |log(forecast / loss)|.", "",
             "| ladder | design | runs added | FLOPs added | largest run | width at main "
             "target | mean width | mean abs log error | covered |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        s = sums[res["ladder"]]
        for key in ("suggest", "usual", "random"):
            d = s[key]
            lines.append(f"| {res['ladder']} | {key} | {d['n_added']:.3g} | {d['flops']:.3g} "
                         f"| {d['max_flops']:.3g} | {d['width_main']:.2%} | {d['width']:.2%} "
                         f"| {d['err']:.2%} | {d['covered']}/{d['n']} |")
    lines += ["", "Suggest against the usual rule at equal FLOPs (width ratio < 0.75 is the "
              "issue's target of a 25% narrower interval):", "",
              "| ladder | start runs | pool | targets | width ratio suggest/usual (main) | "
              "mean width ratio | error suggest vs usual | suggest's expected width (main) | "
              "suggest rounds, s |",
              "|---|---:|---:|---|---:|---:|---:|---:|---:|"]
    met = 0
    cov = {"suggest": [0, 0], "usual": [0, 0], "random": [0, 0]}
    for res in results:
        s = sums[res["ladder"]]
        ratio = s["suggest"]["width_main"] / s["usual"]["width_main"]
        mratio = s["suggest"]["width"] / s["usual"]["width"]
        met += ratio <= 0.75 and s["suggest"]["err"] <= s["usual"]["err"]
        for k in cov:
            cov[k][0] += s[k]["covered"]
            cov[k][1] += s[k]["n"]
        lines.append(f"| {res['ladder']} | {res['n_start']} | {res['n_pool']} | "
                     f"{len(res['targets'])} (C {min(r['flops'] for r in res['designs']['usual']['rows']):.2g}"
                     f"..{max(r['flops'] for r in res['designs']['usual']['rows']):.2g}) | "
                     f"{ratio:.2f} | {mratio:.2f} | {s['suggest']['err']:.2%} vs "
                     f"{s['usual']['err']:.2%} | {res['expected']:.2%} (realized "
                     f"{s['suggest']['width_main']:.2%}) | {res['rounds']}, "
                     f"{res['suggest_seconds']:.0f} |")
    lines += ["", "Pooled coverage of the 90% intervals at the held-out targets: "
              + ", ".join(f"{k} {c}/{n} ({c / n:.0%})" for k, (c, n) in cov.items()) + ".",
              "", f"Target 1 (>= 25% narrower than the usual rule, no larger error, on at least "
              f"two of the ladders): met on {met} of {len(results)}"
              + (" -- **not met**." if met < 2 else "."),
              "", f"Timing (target 2: under 10 s): `delphi suggest epoch-chinchilla "
              f"--target-params 7e10 --target-tokens 1.4e12 --budget 3e22` {tm['suggest']:.1f} "
              f"s wall (median of 3, process start included); `delphi predict` of the same "
              f"target {tm['predict']:.1f} s: ratio {tm['ratio']:.2f}.", "",
              f"Fisher fast path against the refits (`method=\"refit\"`, 64 Poisson-bootstrap "
              f"draws per candidate) on epoch-chinchilla, the {ag['n']} default-grid "
              f"candidates for the 70B / 1.4T target (budget 3e22): parameter sd after a "
              f"candidate differs by {ag['param_rel_diff_median']:.1%} median, "
              f"{ag['param_rel_diff_max']:.1%} at most (the current one is "
              f"{ag['param_sd_now']:.2%}); rank correlation of reduction per FLOP "
              f"{ag['rank_corr']:.3f}; top pick {ag['top_fast']} (Fisher) vs {ag['top_refit']} "
              f"(refit), {ag['top10_overlap']}/10 of the top ten shared; "
              f"{ag['fast_s']:.2g} s vs {ag['refit_s']:.1f} s.", "",
              "Reading: the width of delphi's calibrated interval at these extrapolation "
              "ratios is mostly the extrapolation term f sigma(r), so the ranking buys a lower "
              "r: suggest spends the FLOPs on fewer, larger runs than the usual rule (the "
              "largest-run column). The realised width also depends on the calibration "
              "refitted on the new ladder, which suggest holds fixed; the expected-width "
              "column is suggest's own prediction in its last round, before those picks' "
              "losses were revealed, next to the width realised.", "",
              "No setting here was chosen by looking at these results (the grid, n = 4 per "
              "round and the ladders' start/pool/held-out splits were fixed before the first "
              "run), so there is no in-sample/out-of-sample split to show.", "",
              "Picks (suggest), per ladder:", ""]
    for res in results:
        added = res["designs"]["suggest"]["added"]
        lines.append(f"- {res['ladder']}: {', '.join(added) or 'none'}")
    return lines


def scores(res: dict, s: dict, criteria) -> dict:
    """Per criterion on one ladder: width ratios against the usual rule (at the main target
    and the mean over targets), mean |log error| (and the usual rule's), coverage."""
    u = s["usual"]
    out = {}
    for crit in criteria:
        d = s[key_of(crit)]
        ratio = d["width_main"] / u["width_main"]
        out[crit] = {"ratio_main": ratio, "ratio_mean": d["width"] / u["width"],
                     "err": d["err"], "err_usual": u["err"], "covered": d["covered"],
                     "n": d["n"], "n_added": d["n_added"], "max_flops": d["max_flops"],
                     "meets": bool(ratio <= 0.75 and d["err"] <= u["err"])}
    return out


def choose(table: dict, criteria, on) -> str:
    """The criterion the fixed rule picks on ladders ``on`` (module docstring): coverage
    pooled over them at least :data:`MIN_COVERAGE` (all, if none is), then the lowest mean of
    the mean width ratio; ties keep :data:`DEFAULT_CRITERION`."""
    def cov(c):
        return (sum(table[n][c]["covered"] for n in on)
                / max(1, sum(table[n][c]["n"] for n in on)))
    if not on:
        return DEFAULT_CRITERION            # nothing to choose on: the default stands
    ok = [c for c in criteria if cov(c) >= MIN_COVERAGE] or list(criteria)
    mean = {c: float(np.mean([table[n][c]["ratio_mean"] for n in on])) for c in ok}
    best = min(mean.values())
    tied = [c for c in ok if mean[c] <= best + 1e-12]
    return DEFAULT_CRITERION if DEFAULT_CRITERION in tied else tied[0]


def lolo(table: dict, criteria, selection) -> dict:
    """Per ladder: the criterion chosen on the selection ladders other than it."""
    return {n: choose(table, criteria, [m for m in selection if m != n and m in table])
            for n in table}


def choice_section(results, table, criteria, selection, command, seconds, load) -> list[str]:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    names = [r["ladder"] for r in results]
    sel = [n for n in names if n in selection]
    study_ = [n for n in names if n not in selection]
    chosen_all = choose(table, criteria, sel) if sel else DEFAULT_CRITERION
    out_ = lolo(table, criteria, sel) if sel else {n: DEFAULT_CRITERION for n in names}
    lines = [CHOICE_SECTION, "",
             f"`{command}` ({stamp}; Python {platform.python_version()}, {os.cpu_count()} "
             f"cores shared with other jobs; load average (1, 5, 15 min) at the start "
             f"{load[0]}, at the end {load[1]}; {seconds:.0f} s). The splits, the usual rule, "
             f"suggest's rounds (n = {ROUND}, at most {MAX_ROUNDS}) and the intervals are the "
             f"\"Issue 25\" section's; each criterion of `suggest_runs(criterion=...)` "
             f"picks its own runs. Width ratio = the criterion's 90% interval width / the "
             f"usual rule's at equal FLOPs (main = the largest held-out target; mean = "
             f"mean over the held-out targets); error = mean |log(forecast / loss)|.", "",
             f"Choice rule (fixed before the run): among the criteria whose pooled coverage "
             f"on the choosing ladders is at least {MIN_COVERAGE:.0%}, the lowest mean of the "
             f"mean width ratio; ties keep `{DEFAULT_CRITERION}`. Chosen on selection ladders "
             f"only ({', '.join(sel) or 'none'}); the study ladders "
             f"({', '.join(study_) or 'none'}) are never used to choose.", "",
             "| ladder | role | " + " | ".join(
                 f"{c}: ratio main / mean, error (usual), covered" for c in criteria)
             + " | in-sample choice | out-of-sample (LOLO) choice | LOLO: ratio main / mean, "
               "error, covered |",
             "|---|---|" + "---|" * len(criteria) + "---|---|---|"]
    for n in names:
        row = table[n]
        cells = [f"{row[c]['ratio_main']:.3f} / {row[c]['ratio_mean']:.3f}, "
                 f"{row[c]['err']:.2%} ({row[c]['err_usual']:.2%}), "
                 f"{row[c]['covered']}/{row[c]['n']}" for c in criteria]
        o = row[out_[n]]
        lines.append(f"| {n} | {'selection' if n in selection else 'study'} | "
                     + " | ".join(cells) + f" | {chosen_all} | {out_[n]} | "
                     f"{o['ratio_main']:.3f} / {o['ratio_mean']:.3f}, {o['err']:.2%}, "
                     f"{o['covered']}/{o['n']} |")

    def pooled(pick, over):
        cov = sum(table[n][pick(n)]["covered"] for n in over)
        tot = sum(table[n][pick(n)]["n"] for n in over)
        mean = float(np.mean([table[n][pick(n)]["ratio_mean"] for n in over]))
        main_ = float(np.mean([table[n][pick(n)]["ratio_main"] for n in over]))
        met = sum(table[n][pick(n)]["meets"] for n in over)
        return mean, main_, cov, tot, met

    lines += ["", "| design | ladders | mean of mean width ratio | mean of main-target ratio "
              "| coverage pooled | target 1 met on (main ratio <= 0.75, error <= usual) |",
              "|---|---|---:|---:|---:|---:|"]
    for label, pick in [*[(f"`{c}` everywhere", (lambda c: lambda n: c)(c))
                          for c in criteria],
                        ("in-sample choice", lambda n: chosen_all),
                        ("out-of-sample (LOLO) choice", lambda n: out_[n])]:
        for over, what in ((names, f"all {len(names)}"), (study_, f"study {len(study_)}")):
            if not over:
                continue
            m, mm, c, t, met = pooled(pick, over)
            lines.append(f"| {label} | {what} | {m:.3f} | {mm:.3f} | {c}/{t} ({c / t:.1%}) "
                         f"| {met} of {len(over)} |")
    n_width = sum(out_[n] == DEFAULT_CRITERION for n in names)
    m, mm, c, t, met = pooled(lambda n: out_[n], study_) if study_ else (0, 0, 0, 1, 0)
    ok_cov = 0.85 <= c / t <= 0.95
    lines += ["", f"Leave one ladder out chose `{DEFAULT_CRITERION}` on {n_width} of "
              f"{len(names)} ladders; on all selection ladders, `{chosen_all}`.",
              "", f"Target 1 (>= 25% narrower than the usual rule at equal FLOPs on at least "
              f"two of the study ladders, no larger error, coverage 85-95% pooled), with the "
              f"criterion chosen out of sample: met on {met} of {len(study_)} study ladders, "
              f"coverage {c}/{t} ({c / t:.1%}){'' if ok_cov else ', outside 85-95%'} -- "
              + ("**met**." if met >= 2 and ok_cov else "**not met**."), "",
              "Picks per criterion and ladder (runs added, largest run):", ""]
    for res in results:
        n = res["ladder"]
        lines.append(f"- {n}: " + "; ".join(
            f"{c} {table[n][c]['n_added']} runs, largest {table[n][c]['max_flops']:.3g}"
            for c in criteria)
            + f"; usual {res['designs']['usual']['n_added']} runs")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the RESULTS.md section")
    ap.add_argument("--only", nargs="*", help="ladders to run (default all)")
    ap.add_argument("--variants", nargs="+", metavar="CRITERION",
                    help="pick criteria of suggest_runs to compare (e.g. width spread); "
                         "the section written is then the pick-criteria one")
    ap.add_argument("--selection", action="store_true",
                    help="add the selection ladders (the criterion is chosen on them only)")
    ap.add_argument("--choose", action="store_true",
                    help="choose the criterion leave one ladder out (needs --variants)")
    ap.add_argument("--json", metavar="PATH", help="write every result as JSON here")
    ap.add_argument("--random-seeds", type=int, default=len(RANDOM_SEEDS), metavar="K",
                    help=f"random-pick seeds (default {len(RANDOM_SEEDS)}; 0: none)")
    ap.add_argument("--no-extras", action="store_true",
                    help="skip the Fisher/refit agreement and the timing")
    ap.add_argument("--from-json", metavar="PATH", nargs="+",
                    help="with --variants: render (and --write) the section from a --json "
                         "file of an earlier run instead of running the study again")
    args = ap.parse_args(argv)
    from delphi.analyses.design import CRITERIA
    criteria = tuple(args.variants or (DEFAULT_CRITERION,))
    bad = [c for c in criteria if c not in CRITERIA]
    if bad:
        ap.error(f"unknown criterion {', '.join(bad)}; use {' or '.join(CRITERIA)}")
    if args.choose and len(criteria) < 2:
        ap.error("--choose needs --variants with two or more criteria")
    if args.random_seeds < 0:
        ap.error("--random-seeds must be >= 0")
    if not args.variants and (args.no_extras or args.random_seeds == 0):
        ap.error("the Issue 25 section needs the random picks and the extras: --random-seeds "
                 "0 and --no-extras go with --variants")
    if args.from_json:
        import json
        if not (args.variants and args.choose):
            ap.error("--from-json renders the pick-criteria section: give --variants and "
                     "--choose")
        # several files: runs of disjoint ladder sets (--only), merged in the order given
        parts = [json.loads(Path(p).read_text(encoding="utf-8")) for p in args.from_json]
        results = [r for p in parts for r in p["results"]]
        sums = {k: v for p in parts for k, v in p["summaries"].items()}
        table = {k: v for p in parts for k, v in p["scores"].items()}
        lines = choice_section(results, table, criteria, set(SELECTION),
                               "` and `".join(p["command"] for p in parts),
                               max(p["seconds"] for p in parts),
                               (" | ".join(p["load"][0] for p in parts),
                                " | ".join(p["load"][1] for p in parts)))
        print("\n".join(lines))
        if args.write:
            from run_all import write_section
            write_section(HERE / "RESULTS.md", CHOICE_SECTION, lines)
        return 0
    load0 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    setups = {**SETUPS, **(SELECTION if args.selection else {})}
    results, sums = [], {}
    for name, setup in setups.items():
        if args.only and name not in args.only:
            continue
        print(f"{name} ...", flush=True)
        res = study(name, setup, criteria, RANDOM_SEEDS[:args.random_seeds])
        results.append(res)
        sums[name] = summarize(res)
        for k in [key_of(c) for c in criteria] + ["usual"] + (
                ["random"] if args.random_seeds else []):
            print(f"  {k}: {sums[name][k]}", flush=True)
    table = {r["ladder"]: scores(r, sums[r["ladder"]], criteria) for r in results}
    ag = tm = None
    if not args.no_extras:
        print("Fisher vs refit ...", flush=True)
        ag = agreement()
        print(f"  {ag}", flush=True)
        print("timing ...", flush=True)
        tm = timing()
    command = "python benchmarks/bench_design.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    command = command.rstrip()
    load1 = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if args.json:
        Path(args.json).write_text(__import__("json").dumps(
            {"command": command, "criteria": list(criteria), "results": results,
             "summaries": sums, "scores": table, "agreement": ag, "timing": tm,
             "load": [load0, load1], "seconds": time.perf_counter() - t0}, indent=1, default=float), encoding="utf-8")
    if args.variants and not args.choose:
        # the figures per criterion only: the section is of the out-of-sample choice
        for n, row in table.items():
            print(n, row)
        if args.write:
            ap.error("--write with --variants needs --choose (the section shows the choice)")
        return 0
    if args.variants:
        lines = choice_section(results, table, criteria, set(SELECTION), command,
                               time.perf_counter() - t0, (load0, load1))
        target = CHOICE_SECTION
    else:
        lines = section(results, sums, tm, command, time.perf_counter() - t0, ag)
        target = SECTION
    print("\n".join(lines))
    if args.write:
        from run_all import write_section
        write_section(HERE / "RESULTS.md", target, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
