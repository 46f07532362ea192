"""Benchmark: comparing recipes at scale (issue 24).

1. **Paired vs unpaired widths and coverage** on the three Marin isoFLOP mixtures
   (marin-isoflop-comma, -dclm, -nemotron): for every pair, fit both at or below a cut (the
   cuts of :func:`delphi.analyses.recipes.backtest_recipes`), predict the difference of the
   budgets' best runs at every larger budget (each recipe at its compute-optimal allocation,
   :func:`delphi.compare_recipes`), and score three 90% intervals of that difference against
   the observed one: the paired bootstrap (``pairing="run"``), the unpaired bootstrap
   (``pairing="none"``: independent draws) and the difference of the two recipes' own
   ``predict`` intervals (calibrated / reference; ``[lo_B - hi_A, hi_B - lo_A]``, and the
   narrower quadrature half-width sqrt(h_A^2 + h_B^2) for comparison).
2. **Decision backtest** (:func:`delphi.analyses.recipes.backtest_recipes`): decision
   accuracy (the predicted winner won) against the single-scale baseline (rank by the loss at
   the largest budget at or below the cut; DataDecide, Magnusson et al. 2025), and coverage
   of the paired interval, on the Marin mixtures, Porian et al. 2024's setups within a
   dataset (RefinedWeb, OpenWebText2; the setups with validation loss and standard parameter
   counts: each dataset is its own eval set) and Gadre et al. 2024's train sets (C4,
   RedPajama, RefinedWeb) on C4 validation loss; pooled over pairs, cuts and budgets.
3. **Timing**: one comparison of two Marin mixtures at three targets (1e21, 1e22, 1e23
   FLOPs), in process, with each recipe's own forecasts.

Deterministic (seed 0), no network. Usage:
python benchmarks/bench_recipes.py [--write] [--n-boot N] [--no-shared-floor]   (--write
replaces the "Issue 24" section of benchmarks/RESULTS.md)
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import delphi  # noqa: E402
from delphi.analyses.recipes import (DECISIONS, DEFAULT_DECISION, backtest_recipes,  # noqa: E402
                                     compare_recipes)
from delphi.ladder import Ladder  # noqa: E402
from delphi.readers.paths import default_data_dir  # noqa: E402

SECTION = "## Issue 24: comparing recipes at scale (`benchmarks/bench_recipes.py`)"
MARIN = ["marin-isoflop-comma", "marin-isoflop-dclm", "marin-isoflop-nemotron"]
SEED = 0


def quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def marin():
    return [quiet(delphi.load_ladder, n) for n in MARIN]


def porian(dataset: str) -> list[Ladder]:
    """Porian et al.'s setups on one dataset with validation loss and standard counts."""
    d = pd.read_csv(default_data_dir() / "porian2024" / "porian2024_isoflop_points.csv")
    d = d[(d["dataset"] == dataset) & (d["loss_source"] == "val")
          & (d["param_count"] == "standard")]
    out = []
    for key, g in d.groupby(["hparams", "warmup", "decay"]):
        name = f"porian-{dataset}-{'-'.join(key)}"
        t = pd.DataFrame({"run": [f"{name}-C{c:.3g}-N{n:.4g}" for c, n in
                                  zip(g["flops_budget"], g["params"])],
                          "params": g["params"].to_numpy(), "tokens": g["tokens"].to_numpy(),
                          "flops": g["flops_budget"].to_numpy(), "loss": g["loss"].to_numpy()})
        t = t.drop_duplicates("run")
        out.append(quiet(Ladder, t, name=name, metric=f"{dataset} validation loss"))
    return out


def gadre() -> list[Ladder]:
    g = pd.read_csv(default_data_dir() / "gadre2024" / "gadre2024_runs_flat.csv")
    out = []
    for ds in ("c4_original", "rpj", "rw_original"):
        s = g[g["dataset"] == ds]
        # runs by their architecture and multiplier, so the designs pair across train sets
        t = pd.DataFrame({"run": s["name"].to_numpy(), "params": s["params"].to_numpy(),
                          "tokens": s["tokens"].to_numpy(), "flops": s["flops_6ND"].to_numpy(),
                          "loss": s["loss_c4_val"].to_numpy()})
        out.append(quiet(Ladder, t, name=f"gadre-{ds}", metric="C4 validation loss"))
    return out


def widths(ladders, n_boot: int) -> dict:
    """Study 1 over every pair and cut of ``ladders``."""
    bt = quiet(backtest_recipes, ladders, n_boot=20, seed=SEED)     # the cuts and budgets
    cuts = sorted({r["cut"] for r in bt.rows})
    rows = []
    for cut in cuts:
        for i in range(len(ladders)):
            for j in range(i + 1, len(ladders)):
                mine = [r for r in bt.rows if r["cut"] == cut and r["a"] == ladders[i].name
                        and r["b"] == ladders[j].name]
                targets = [r["flops"] for r in mine]
                pair = [ladders[i], ladders[j]]
                p = quiet(compare_recipes, pair, target_flops=targets, fit_max_flops=cut,
                          n_boot=n_boot, seed=SEED, pairing="run")
                u = quiet(compare_recipes, pair, target_flops=targets, fit_max_flops=cut,
                          n_boot=n_boot, seed=SEED, pairing="none", forecasts=False)
                q = quiet(compare_recipes, pair, target_flops=targets, fit_max_flops=cut,
                          n_boot=n_boot, seed=SEED, pairing="run", run_noise="independent",
                          forecasts=False)
                for r, cp, cu, cq in zip(mine, p.comparisons, u.comparisons, q.comparisons):
                    fa, fb = cp.reference_forecast, cp.recipe_forecast
                    ia, ib = fa.interval, fb.interval
                    sep = (ib.lower - ia.upper, ib.upper - ia.lower)
                    ha, hb = (ia.upper - ia.lower) / 2, (ib.upper - ib.lower) / 2
                    quad = (cp.loss - np.hypot(ha, hb), cp.loss + np.hypot(ha, hb))
                    y = r["observed"]
                    rows.append({"cut": cut, "pair": f"{ladders[j].name} - {ladders[i].name}",
                                 "flops": r["flops"], "observed": y, "predicted": cp.loss,
                                 "paired": (cp.lower, cp.upper),
                                 "paired_independent": (cq.lower, cq.upper),
                                 "decided": (cp.decided["lower"], cp.decided["upper"]),
                                 "unpaired": (cu.lower, cu.upper), "separate": sep,
                                 "quadrature": quad})
    return {"rows": rows}


def summarize_widths(rows) -> dict:
    out = {}
    for key in ("paired", "paired_independent", "decided", "unpaired", "separate",
                "quadrature"):
        w = np.array([r[key][1] - r[key][0] for r in rows])
        inside = np.array([r[key][0] <= r["observed"] <= r[key][1] for r in rows])
        out[key] = {"width": float(np.median(w)), "mean_width": float(np.mean(w)),
                    "coverage": float(inside.mean())}
    ratio = np.array([(r["separate"][1] - r["separate"][0]) / (r["paired"][1] - r["paired"][0])
                      for r in rows])
    ratio_u = np.array([(r["unpaired"][1] - r["unpaired"][0]) /
                        (r["paired"][1] - r["paired"][0]) for r in rows])
    out["ratio_separate"] = float(np.median(ratio))
    out["ratio_unpaired"] = float(np.median(ratio_u))
    out["n"] = len(rows)
    return out


def decisions(groups: dict, n_boot: int, **settings) -> dict:
    out = {}
    for name, ladders in groups.items():
        t0 = time.perf_counter()
        bt = quiet(backtest_recipes, ladders, n_boot=n_boot, seed=SEED, **settings)
        s = bt.summary
        s["design"] = bt.design
        s["recipes"] = [ld.name for ld in ladders]
        s["seconds"] = time.perf_counter() - t0
        s["correct"] = sum(r["correct"] for r in bt.rows if r["observed"] != 0)
        s["baseline_correct"] = sum(r["baseline_correct"] for r in bt.rows if r["observed"] != 0)
        s["inside"] = sum(r["inside"] for r in bt.rows if r["observed"] != 0)
        s["close"] = _close(bt.rows)
        s["left_out"] = sum("left out" in n for n in bt.notes)
        scored = [r for r in bt.rows if r["observed"] != 0]
        s["rule_correct"] = {k: sum(r[f"correct_{k}"] for r in scored) for k in DECISIONS}
        s["rule_inside"] = {k: sum(r[f"inside_{k}"] for r in scored) for k in DECISIONS}
        # decisions where a rule overturns the single-scale answer, and how many it got right
        s["rule_flips"] = {k: sum(np.sign(r[f"predicted_{k}"]) != np.sign(r["baseline"])
                                  for r in scored) for k in DECISIONS}
        s["rule_flips_right"] = {k: sum(np.sign(r[f"predicted_{k}"]) != np.sign(r["baseline"])
                                        and r[f"correct_{k}"] for r in scored)
                                 for k in DECISIONS}
        s["method"] = bt.method
        out[name] = s
        print(f"  {name}: {s['n']} decisions, accuracy {s['decision_accuracy']:.1%}, baseline "
              f"{s['baseline_accuracy']:.1%}, coverage {s['coverage']:.1%} "
              f"({s['seconds']:.0f} s)", flush=True)
    return out


def logo(dec: dict) -> dict:
    """Leave one ladder group out: for each group, the rule of :data:`DECISIONS` with the
    highest pooled accuracy on the *other* groups (ties: the earlier rule in DECISIONS),
    scored on the held-out group. Also the in-sample choice (best pooled on every group)."""
    def best(names):
        n = sum(dec[g]["n"] for g in names)
        acc = {k: sum(dec[g]["rule_correct"][k] for g in names) / n for k in DECISIONS}
        top = max(acc.values())
        return next(k for k in DECISIONS if acc[k] == top), acc
    out = {"held_out": {}, "correct": 0, "inside": 0, "n": 0}
    for g in dec:
        rule, _ = best([h for h in dec if h != g])
        d = dec[g]
        out["held_out"][g] = {"rule": rule, "accuracy": d["rule_correct"][rule] / d["n"],
                              "coverage": d["rule_inside"][rule] / d["n"]}
        out["correct"] += d["rule_correct"][rule]
        out["inside"] += d["rule_inside"][rule]
        out["flips"] = out.get("flips", 0) + d["rule_flips"][rule]
        out["flips_right"] = out.get("flips_right", 0) + d["rule_flips_right"][rule]
        out["n"] += d["n"]
    out["in_sample_rule"], out["in_sample"] = best(list(dec))
    out["accuracy"] = out["correct"] / out["n"]
    out["coverage"] = out["inside"] / out["n"]
    out["baseline"] = sum(d["baseline_correct"] for d in dec.values()) / out["n"]
    return out


def rule_table(dec: dict, lo: dict) -> list[str]:
    """Accuracy (coverage) of every rule per group, in sample, and the rule chosen leave
    one group out scored on the held-out group."""
    head = " | ".join(f"`{k}`" for k in DECISIONS)
    lines = [f"| ladders | decisions | baseline | {head} | chosen on the other groups | "
             f"held out: accuracy (coverage) |",
             "|---|---:|---:|" + "---:|" * len(DECISIONS) + "---|---:|"]
    for g, d in dec.items():
        cells = " | ".join(f"{d['rule_correct'][k] / d['n']:.1%} "
                           f"({d['rule_inside'][k] / d['n']:.0%})" for k in DECISIONS)
        h = lo["held_out"][g]
        lines.append(f"| {g} | {d['n']} | {d['baseline_accuracy']:.1%} | {cells} | "
                     f"`{h['rule']}` | {h['accuracy']:.1%} ({h['coverage']:.0%}) |")
    n = lo["n"]
    pooled = " | ".join(
        f"**{sum(d['rule_correct'][k] for d in dec.values()) / n:.1%}** "
        f"({sum(d['rule_inside'][k] for d in dec.values()) / n:.0%})" for k in DECISIONS)
    lines.append(f"| **pooled** | {n} | **{lo['baseline']:.1%}** | {pooled} | "
                 f"in sample: `{lo['in_sample_rule']}` | **{lo['accuracy']:.1%}** "
                 f"({lo['coverage']:.0%}) |")
    return lines


def _close(rows) -> dict:
    """Accuracy on the close calls: observed |difference| below the median."""
    obs = np.array([abs(r["observed"]) for r in rows if r["observed"] != 0])
    if not len(obs):
        return {}
    cut = float(np.median(obs))
    sel = [r for r in rows if r["observed"] != 0 and abs(r["observed"]) <= cut]
    return {"n": len(sel), "threshold": cut,
            "accuracy": sum(r["correct"] for r in sel) / len(sel),
            "baseline": sum(r["baseline_correct"] for r in sel) / len(sel)}


def timing() -> dict:
    lad = marin()[:2]
    t0 = time.perf_counter()
    r = quiet(compare_recipes, lad, target_flops=[1e21, 1e22, 1e23], seed=SEED)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "result": r}


def decision_table(dec: dict) -> tuple[list[str], dict]:
    lines = ["| ladders | recipes | design | decisions | accuracy | baseline | close calls "
             "(accuracy / baseline) | coverage | time |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    tot = {"n": 0, "correct": 0, "baseline_correct": 0, "inside": 0}
    for name, d in dec.items():
        close = d["close"]
        cl = (f"{close['accuracy']:.0%} / {close['baseline']:.0%} (n = {close['n']})"
              if close else "-")
        skipped = f" ({d['left_out']} left out)" if d["left_out"] else ""
        lines.append(f"| {name} | {len(d['recipes'])} | {d['design']} | {d['n']}{skipped} | "
                     f"{d['decision_accuracy']:.1%} | {d['baseline_accuracy']:.1%} | {cl} | "
                     f"{d['coverage']:.1%} | {d['seconds']:.0f} s |")
        for k in tot:
            tot[k] += d[k]
    lines.append(f"| **pooled** | | | {tot['n']} | **{tot['correct'] / tot['n']:.1%}** | "
                 f"**{tot['baseline_correct'] / tot['n']:.1%}** | | "
                 f"{tot['inside'] / tot['n']:.1%} | |")
    return lines, tot


def section(w: dict, dec: dict, dec_shared: dict, tm: dict, command: str, seconds: float,
            n_boot: int) -> list[str]:
    now = datetime.now(timezone.utc)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    s = w["summary"]
    at_end = f"; load {load[0]:.2f} at the end" if load else ""
    lines = [SECTION, "",
             f"Written by `{command}` on {now:%Y-%m-%d %H:%M} UTC ({platform.machine()}, "
             f"{os.cpu_count()} cores, Python {platform.python_version()}; {seconds:.0f} s"
             f"{at_end}). Seed {SEED}, {n_boot} paired draws, law chinchilla (the design-aware "
             f"default of every ladder here), 90% intervals.", ""]
    lines += ["### Paired vs unpaired intervals of the difference (Marin mixtures)", "",
              f"Every pair of the three Marin mixtures, fitted at or below each of 4 cuts "
              f"(1.8e19, 3e19, 9e19, 1.8e20 FLOPs), predicting the difference of the budgets' "
              f"best runs at every larger budget: {s['n']} held-out differences. Width: median "
              f"over them, in nats/token.", "",
              "| interval of L_B - L_A | median width | mean width | coverage |",
              "|---|---:|---:|---:|"]
    labels = {"paired": "paired bootstrap (`pairing=\"run\"`), run noise paired "
                        "(`run_noise=\"paired\"`, the default)",
              "paired_independent": "paired bootstrap, run noise independent per recipe "
                                    "(`run_noise=\"independent\"`, the earlier default)",
              "decided": f"the default decision rule's interval (`{DEFAULT_DECISION}`)",
              "unpaired": "unpaired bootstrap (independent draws)",
              "separate": "difference of the two `predict` intervals [lo_B - hi_A, hi_B - lo_A]",
              "quadrature": "the same, half-widths in quadrature"}
    for key, label in labels.items():
        lines.append(f"| {label} | {s[key]['width']:.4f} | {s[key]['mean_width']:.4f} | "
                     f"{s[key]['coverage']:.1%} |")
    lines += ["", f"Median ratio of widths: separate intervals / paired = "
              f"{s['ratio_separate']:.1f}x; unpaired bootstrap / paired = "
              f"{s['ratio_unpaired']:.2f}x.", ""]
    lines += ["### Decision backtest", "",
              "Each ladder group: every recipe fitted at or below each cut (up to 4, evenly "
              "spaced among those leaving 2p + 2 runs in 3 budgets), every pair scored at "
              "every larger budget (isoFLOP ladders: the budgets' best runs against L*(C); "
              "Gadre: each run all train sets have, against L(N, D)). Baseline: the sign of "
              "the difference at the largest budget at or below the cut.", "",
              ]
    words = {"law": "the fitted laws' difference at the target",
             "anchored": "the observed difference at the largest budget both recipes ran "
                         "(at or below the cut) plus the law's predicted change of the "
                         "difference from there to the target",
             "shrunk": "anchored where the paired 90% interval of the law's change excludes "
                       "zero, else the observed difference at the cut (the baseline's answer)",
             "confident": "anchored where the anchored difference's own 90% interval (one new "
                          "run each) excludes zero, else the observed difference at the cut",
             "robust": "as `confident`, but the anchored interval must exclude zero on the "
                       "same side under both floor models (each recipe's own floor E, and one "
                       "E shared by the recipes: the second fit at each cut), else the "
                       "observed difference at the cut; where the second model gives no "
                       "interval, the observed difference"}
    lines += ["Decision rules (`decision=`, `--decision`): "
              + "; ".join(f"`{k}`: {words[k]}" for k in DECISIONS) + ". Every rule is "
              "scored on the same rows (same fits and draws). The rule is chosen **leave one "
              "ladder group out**: for each group, the rule with the highest pooled accuracy "
              "on the other three groups (ties: the earlier rule in the list above), scored on "
              "the held-out group. Cells: accuracy (coverage of the rule's 90% interval).", ""]
    lo = logo(dec)
    lines += ["Each recipe its own floor E (the default fit):", ""] + rule_table(dec, lo)
    table, tot = decision_table(dec)
    lines += ["", f"The default rule (`{DEFAULT_DECISION}`) in detail:", ""] + table
    lo_s, tot_s = None, None
    if dec_shared:
        lo_s = logo(dec_shared)
        lines += ["", "With `--shared-floor` (one E per group: the recipes share an eval set "
                  "and tokenizer):", ""] + rule_table(dec_shared, lo_s)
        table, tot_s = decision_table(dec_shared)
        lines += ["", f"The default rule (`{DEFAULT_DECISION}`) with `--shared-floor` in "
                  "detail:", ""] + table
    else:
        lines += ["", "(The `--shared-floor` tables were skipped in this run: "
                  "`--no-shared-floor`.)"]
    lines += ["", "Recipes: " + "; ".join(f"{k}: {', '.join(v['recipes'])}"
                                          for k, v in dec.items()), ""]
    r = tm["result"]
    lines += ["### Timing", "",
              f"`delphi.compare_recipes([marin-isoflop-comma, marin-isoflop-dclm], "
              f"target_flops=[1e21, 1e22, 1e23])` (200 paired draws and each recipe's own "
              f"calibrated `predict` at each target), in process: **{tm['seconds']:.1f} s** "
              f"(target: under 10 s).", ""]
    for c in r.comparisons:
        lines.append(f"- C = {c.target_flops:.0e}: dclm - comma = {c.loss:+.4f} "
                     f"[{c.lower:+.4f}, {c.upper:+.4f}], P(dclm better) {c.p_better:.2f}, "
                     f"multiplier {_m(c.multiplier)} [{_m(c.multiplier_lower)}, "
                     f"{_m(c.multiplier_upper)}], crossover "
                     + (f"{c.crossover:.3g} [{_f(c.crossover_lower)}, {_f(c.crossover_upper)}]"
                        if c.crossover else "none in 1e15..1e27"))
    pooled_acc = lo["accuracy"]
    pooled_base = lo["baseline"]
    lines += ["", "### Targets", "",
              f"- Paired intervals at least 2x narrower than the unpaired difference of the "
              f"two separate intervals: **{'met' if s['ratio_separate'] >= 2 else 'not met'}** "
              f"({s['ratio_separate']:.1f}x median). Against the unpaired *bootstrap* (the same "
              f"draws without shared random numbers) the gain is {s['ratio_unpaired']:.2f}x.",
              f"- Coverage of held-out differences 85-95% (paired): "
              f"**{'met' if 0.85 <= s['paired']['coverage'] <= 0.95 else 'not met'}** "
              f"({s['paired']['coverage']:.1%} of {s['n']}).",
              f"- Decision accuracy above the single-scale baseline, pooled: "
              f"**{'met' if pooled_acc > pooled_base else 'not met'}** (rule chosen leave one "
              f"group out, out of sample: {pooled_acc:.1%} vs baseline {pooled_base:.1%}, "
              f"{lo['correct'] - round(pooled_base * lo['n']):+d} decisions of {lo['n']}: the "
              f"chosen rules overturn the single-scale answer on {lo['flips']}, "
              f"{lo['flips_right']} of them rightly; in "
              f"sample the best rule `{lo['in_sample_rule']}` "
              f"{lo['in_sample'][lo['in_sample_rule']]:.1%}; the default `{DEFAULT_DECISION}` "
              f"{tot['correct'] / tot['n']:.1%}"
              + (f"; with a shared floor out of sample {lo_s['accuracy']:.1%} vs "
                 f"{lo_s['baseline']:.1%}, in sample best `{lo_s['in_sample_rule']}` "
                 f"{lo_s['in_sample'][lo_s['in_sample_rule']]:.1%}" if lo_s else "") + ").",
              f"- One comparison of two Marin mixtures at three targets under 10 s: "
              f"**{'met' if tm['seconds'] < 10 else 'not met'}** ({tm['seconds']:.1f} s)."]
    return lines


def _m(x):
    return "unbounded" if x is None or not np.isfinite(x) else f"{x:.3g}x"


def _f(x):
    return "-" if x is None else f"{x:.3g}"


def write_results(lines: list[str], path: Path = HERE / "RESULTS.md") -> None:
    """Put ``lines`` below the kept-by-run_all marker, replacing an earlier Issue 24 section."""
    from run_all import write_section

    write_section(path, SECTION, lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="write the RESULTS.md section")
    ap.add_argument("--n-boot", type=int, default=200)
    ap.add_argument("--no-shared-floor", action="store_true",
                    help="skip the (slow) --shared-floor decision tables")
    ap.add_argument("--save", metavar="PATH", help="pickle the measurements to PATH")
    ap.add_argument("--from-saved", metavar="PATH",
                    help="write the section from measurements pickled with --save")
    args = ap.parse_args(argv)
    if args.from_saved:
        import pickle
        with open(args.from_saved, "rb") as fh:
            w, dec, dec_shared, tm, command, seconds = pickle.load(fh)
        command += f" --save PATH`, then `--from-saved PATH{' --write' if args.write else ''}"
        lines = section(w, dec, dec_shared, tm, command, seconds, args.n_boot)
        print("\n".join(lines))
        if args.write:
            write_results(lines)
        return 0
    t0 = time.perf_counter()
    print("timing ...", flush=True)
    tm = timing()
    print(f"  {tm['seconds']:.1f} s", flush=True)
    print("paired vs unpaired widths (Marin) ...", flush=True)
    w = widths(marin(), args.n_boot)
    w["summary"] = summarize_widths(w["rows"])
    for k, v in w["summary"].items():
        print(f"  {k}: {v}", flush=True)
    print("decision backtest ...", flush=True)
    groups = {"Marin isoFLOP mixtures": marin(), "Porian RefinedWeb setups": porian("rw"),
              "Porian OpenWebText2 setups": porian("owt2"), "Gadre train sets (C4 val)": gadre()}
    dec = decisions(groups, args.n_boot)
    print("decision backtest, shared floor ...", flush=True)
    dec_shared = ({} if args.no_shared_floor else
                  decisions(groups, args.n_boot, shared_floor=True))
    command = ("python benchmarks/bench_recipes.py" + (" --write" if args.write else "")
               + (" --no-shared-floor" if args.no_shared_floor else ""))
    seconds = time.perf_counter() - t0
    if args.save:
        import pickle
        with open(args.save, "wb") as fh:
            pickle.dump((w, dec, dec_shared, tm, command, seconds), fh)
    lines = section(w, dec, dec_shared, tm, command, seconds, args.n_boot)
    print("\n".join(lines))
    if args.write:
        write_results(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
