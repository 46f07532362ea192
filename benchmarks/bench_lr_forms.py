"""Benchmark: forms of the peak-LR mis-tuning term, chosen by backtest (issue 11, item 4).

Ladder ``misfitting2025-final`` ((Mis)Fitting sweeps, Li et al. 2025, arXiv 2502.18969). Each
form is fitted with :func:`delphi.fit` (the library path: global search, outlier exclusion)
and scored by |relative error| of its predictions at every held-out run's own peak LR:

* **split 200**: fit on models <= 200M (size from the run id), predict every 300M and 400M run
  (the issue's split; target mean <= 0.45%, max <= 1.5%);
* **split 100**: fit on <= 100M, predict every 200M, 300M and 400M run (a second split, to see
  whether a form is fitted to the first);
* **LOSO**: leave one model size out (10 folds), predict that size's runs; pooled mean over the
  runs that the same form's fit to the whole ladder keeps (it excludes the 100-step runs, 50 of
  them warm-up, as off-trend);
* **AIC** on the split-200 fitted points: n ln(sum r^2 / n) + 2k, r = log residuals, k free
  parameters; **seeds**: whether seeds 0 and 7 reach the same split-200 objective (rel. 1e-7).
  AIC compares forms fitted to the same points only: a form that leaves fewer runs off-trend
  (the ``nd`` forms keep three or four of the nine 100-step runs) has a larger n and residual sum.

Prints the table and writes nothing. Usage: python benchmarks/bench_lr_forms.py [FORM ...]

**Nested leave one size out** (``--nested``; issue 21, item 5: a rule chosen by looking at
benchmark results is validated out of sample). The default form (``chinchilla-lr``) was
chosen on the split-200 figure, in sample. With ``--nested`` the script also keeps every
form's LOSO errors per held-out size (the same fits, no refits per selection) and, for each
held-out size s, chooses the form with the best pooled LOSO mean over the *other* sizes
only, scores the chosen form on s, and pools (:func:`nested_loso`). Printed beside it: the
in-sample choices (best pooled LOSO over all sizes; best split-200 mean) with their LOSO
figures, and today's default's. Each form is scored on the runs its own full-ladder fit keeps
(as the LOSO column); the same selection on the runs *every* compared form keeps is printed
too. ``--json PATH`` writes the per-form results after each form (``--from-json PATH``
re-runs the selection from such a file without fitting). BLAS is pinned to one thread.
python benchmarks/bench_lr_forms.py --nested [--json PATH] [FORM ...]
python benchmarks/bench_lr_forms.py --nested --from-json PATH
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

import delphi
from delphi.laws import get_law
from delphi.laws.lr import lr_form

INPUTS = ("params", "tokens", "peak_lr")
#: Today's default LR form (``delphi.laws.lr``), chosen on split 200.
DEFAULT_FORM = "chinchilla-lr"


def forms() -> dict:
    """Candidate laws by label: the registered LR laws and the other combinations compared."""
    out = {name: get_law(name) for name in (
        "chinchilla-lr", "chinchilla-lr-asym", "chinchilla-lr-quartic", "chinchilla-lr-width",
        "chinchilla-lr-mult", "chinchilla-lr-compute", "chinchilla-lr-nd",
        "chinchilla-lr-asym-nd")}
    extra = {
        "width N": dict(width_n=True),
        "width D": dict(width_d=True),
        "compute + asym": dict(optimum="compute", shape="asym"),
        "curved": dict(optimum="curved"),
        "curved + asym": dict(optimum="curved", shape="asym"),
        "asym + nd": dict(shape="asym", interaction=True),
    }
    for label, kw in extra.items():
        out[label] = lr_form(label, formula=label, source="benchmark variant", **kw)
    return out


def _pooled(errors: Mapping[int, np.ndarray], sizes) -> float:
    """Mean of the errors of ``sizes`` pooled over runs (nan when there are none)."""
    parts = [np.asarray(errors[s], float) for s in sizes if s in errors]
    allv = np.concatenate(parts) if parts else np.array([])
    return float(allv.mean()) if allv.size else float("nan")


def nested_loso(errors: Mapping[str, Mapping[int, np.ndarray]],
                order: Sequence[str] | None = None) -> dict:
    """Nested leave one size out selection among forms, from stored LOSO errors.

    ``errors[form][size]`` holds |relative error| of each scored run of ``size`` predicted
    by ``form``'s fit without that size (the LOSO fold). For every held-out size s the form
    with the lowest pooled mean over the other sizes' errors is chosen (ties: the first in
    ``order``, default the mapping's order) and scored on s.

    Returns ``folds`` (one dict per size, ascending: size, chosen, inner (the chosen form's
    pooled mean over the other sizes), errors (the chosen form's on s)), ``errors`` (all
    folds' errors pooled), ``mean``, ``max``, and ``in_sample`` (the form with the lowest
    pooled mean over all sizes) with ``in_sample_mean`` (its pooled LOSO mean).
    """
    forms_ = list(order) if order is not None else list(errors)
    sizes = sorted({int(s) for f in forms_ for s in errors[f]})
    folds = []
    for s in sizes:
        others = [z for z in sizes if z != s]
        inner = {f: _pooled(errors[f], others) for f in forms_ if s in errors[f]}
        finite = {f: v for f, v in inner.items() if np.isfinite(v)}
        if not finite:
            continue
        best = min(finite, key=lambda f: (finite[f], forms_.index(f)))
        folds.append({"size": s, "chosen": best, "inner": finite[best],
                      "errors": np.asarray(errors[best][s], float)})
    pooled = (np.concatenate([f["errors"] for f in folds]) if folds else np.array([]))
    total = {f: _pooled(errors[f], sizes) for f in forms_}
    finite = {f: v for f, v in total.items() if np.isfinite(v)}
    ins = min(finite, key=lambda f: (finite[f], forms_.index(f))) if finite else None
    return {"folds": folds, "errors": pooled,
            "mean": float(pooled.mean()) if pooled.size else float("nan"),
            "max": float(pooled.max()) if pooled.size else float("nan"),
            "in_sample": ins, "in_sample_mean": finite.get(ins, float("nan"))}


def paired(folds: Sequence[dict], base: Mapping[int, np.ndarray], *, draws: int = 2000,
           seed: int = 0, level: float = 0.9) -> dict:
    """The nested choice against a fixed form on the same held-out sizes: ``wins`` (sizes
    where the chosen form's mean error is lower), ``n``, ``diff`` (pooled mean of the chosen
    minus the fixed form's, over runs) and its ``lower``/``upper`` percentile interval from
    a bootstrap over the held-out sizes (``draws`` resamples, ``seed``). The fixed form's
    errors must be on the same runs as the chosen form's (the same run set)."""
    sizes = [f["size"] for f in folds]
    a = [np.asarray(f["errors"], float) for f in folds]
    b = [np.asarray(base[s], float) for s in sizes]
    if any(x.shape != y.shape for x, y in zip(a, b)):
        raise ValueError("the chosen and the fixed form are scored on different runs")
    wins = sum(x.mean() < y.mean() for x, y in zip(a, b))
    sa, sb, na = (np.array([x.sum() for x in a]), np.array([y.sum() for y in b]),
                  np.array([x.size for x in a]))
    diff = float((sa.sum() - sb.sum()) / na.sum())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(sizes), size=(draws, len(sizes)))
    boot = (sa[idx].sum(1) - sb[idx].sum(1)) / na[idx].sum(1)
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return {"wins": int(wins), "n": len(sizes), "diff": diff, "lower": float(lo),
            "upper": float(hi)}


def paired_line(folds, base, default: str) -> str:
    """One line of :func:`paired` (or why it cannot be computed)."""
    try:
        p = paired(folds, base)
    except ValueError:
        return (f"Paired with `{default}`: not computed (the chosen forms are scored on other "
                f"runs than `{default}` at some sizes).")
    return (f"Paired with `{default}` on the same runs: the nested choice is better on "
            f"{p['wins']} of {p['n']} held-out sizes; pooled difference (nested - default) "
            f"{100 * p['diff']:+.3f} points of % error, 90% bootstrap over the sizes (seed 0) "
            f"[{100 * p['lower']:+.3f}, {100 * p['upper']:+.3f}].")


def restrict(store: Mapping[str, dict], runs_ok: set[str]) -> dict[str, dict[int, np.ndarray]]:
    """Per-form LOSO errors (``store[form]["loso_runs"][size]`` run ids with
    ``["loso_all"][size]`` errors of every run of the size) restricted to ``runs_ok``."""
    out = {}
    for form, rec in store.items():
        out[form] = {}
        for s, ids in rec["loso_runs"].items():
            e = np.asarray(rec["loso_all"][s], float)
            keep = np.array([r in runs_ok for r in ids], bool)
            out[form][int(s)] = e[keep]
    return out


def nested_report(store: Mapping[str, dict], *, default: str = DEFAULT_FORM) -> list[str]:
    """The nested selection's lines (markdown) from per-form records (see :func:`main`):
    ``kept`` (runs the form's full fit keeps), ``loso_runs``/``loso_all`` (per size),
    ``split200`` (mean, max)."""
    order = list(store)
    sets = {
        "each form on the runs its own full fit keeps (as the LOSO column)": None,
        "every form on the runs all compared forms keep": set.intersection(
            *[set(rec["kept"]) for rec in store.values()]),
    }
    lines = []
    for title, common in sets.items():
        errs = {f: restrict({f: rec}, set(rec["kept"]) if common is None else common)[f]
                for f, rec in store.items()}
        nest = nested_loso(errs, order)
        sizes = sorted({s for e in errs.values() for s in e})
        big = sizes[-3:]          # the three largest sizes: the folds that extrapolate
        loso = {f: _pooled(errs[f], sizes) for f in order}
        s200 = min(order, key=lambda f: (store[f]["split200"][0], order.index(f)))
        n_runs = len(nest["errors"])
        lines += [f"Scored: {title}" + ("" if common is None else f" ({len(common)} runs)")
                  + f"; {len(order)} forms compared.", "",
                  f"| rule | form(s) | LOSO mean | LOSO max | runs | mean on the "
                  f"{'/'.join(str(b) for b in big)}M folds |", "|---|---|---|---|---|---|"]

        def row(rule, form):
            e = np.concatenate([errs[form][s] for s in sizes if s in errs[form]])
            return (f"| {rule} | `{form}` | {e.mean():.2%} | {e.max():.2%} | {e.size} | "
                    f"{_pooled(errs[form], big):.2%} |")

        lines.append(row("today's default (chosen on split 200 among earlier forms)",
                         default) if default in errs else
                     f"| today's default | `{default}` | not compared | | | |")
        lines.append(row("in sample: best split-200 mean "
                         f"({store[s200]['split200'][0]:.2%})", s200))
        lines.append(row("in sample: best pooled LOSO over all sizes", nest["in_sample"]))
        chosen = sorted({f["chosen"] for f in nest["folds"]}, key=order.index)
        e_big = [f["errors"] for f in nest["folds"] if f["size"] in big]
        lines.append(f"| **out of sample: nested LOSO** (chosen on the other sizes) | "
                     f"{', '.join(f'`{c}`' for c in chosen)} | **{nest['mean']:.2%}** | "
                     f"{nest['max']:.2%} | {n_runs} | "
                     f"{np.concatenate(e_big).mean() if e_big else float('nan'):.2%} |")
        lines += ["", "| held-out size | chosen on the other sizes | its inner LOSO | its error "
                  f"on the size | `{default}` on the size | runs |", "|---|---|---|---|---|---|"]
        for f in nest["folds"]:
            d = errs.get(default, {}).get(f["size"])
            dtxt = f"{np.mean(d):.2%}" if d is not None and len(d) else "-"
            lines.append(f"| {f['size']}M | `{f['chosen']}` | {f['inner']:.2%} | "
                         f"{f['errors'].mean():.2%} | {dtxt} | {len(f['errors'])} |")
        if default in errs:
            lines += ["", paired_line(nest["folds"], errs[default], default)]
        lines += ["", "Pooled LOSO per form (same runs): " + ", ".join(
            f"`{f}` {loso[f]:.2%}" for f in sorted(order, key=lambda f: loso[f])) + ".", ""]
    return lines


def _to_json(store: dict) -> dict:
    return {f: {k: ({str(s): np.asarray(v, float).tolist() if k == "loso_all" else list(v)
                     for s, v in rec[k].items()} if k in ("loso_all", "loso_runs") else
                    (list(rec[k]) if k in ("kept", "split200") else rec[k]))
                for k in rec} for f, rec in store.items()}


def _from_json(data: dict) -> dict:
    return {f: {**rec, "loso_all": {int(s): np.asarray(v, float)
                                    for s, v in rec["loso_all"].items()},
                "loso_runs": {int(s): list(v) for s, v in rec["loso_runs"].items()}}
            for f, rec in data.items()}


def main(argv: list[str]) -> None:
    argv = list(argv)
    nested = "--nested" in argv
    json_path = from_json = None
    if "--json" in argv:
        i = argv.index("--json")
        json_path = argv[i + 1]
        del argv[i:i + 2]
    if "--from-json" in argv:
        i = argv.index("--from-json")
        from_json = argv[i + 1]
        del argv[i:i + 2]
        nested = True
    argv = [a for a in argv if a != "--nested"]
    if from_json:
        store = _from_json(json.loads(Path(from_json).read_text()))
        print("\n".join(nested_report(store)))
        return
    if nested:
        from threadpoolctl import threadpool_limits

        t0 = time.perf_counter()
        with threadpool_limits(limits=1):
            store = _table(argv, keep=True, json_path=json_path)
        print(f"\nNested leave one size out ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
              f"{platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}; {time.perf_counter() - t0:.0f} s)\n")
        print("\n".join(nested_report(store)))
        return
    _table(argv)


def _table(argv: list[str], keep: bool = False, json_path: str | None = None) -> dict:
    warnings.simplefilter("ignore")  # identification notes; the table reports what matters
    ladder = delphi.load_ladder("misfitting2025-final")
    fin, _ = ladder.final_points()
    size = fin["run"].str.extract(r"_(\d+)m-")[0].astype(int).to_numpy()
    runs = fin["run"].to_numpy()
    x_all = {c: fin[c].to_numpy(float) for c in INPUTS}
    y_all = fin["loss"].to_numpy(float)

    def fit(law, train, seed=0):
        return delphi.fit(ladder.select(runs=list(runs[train])), law, seed=seed, identify=False)

    def errors(f, test):
        pred = f.predict({c: v[test] for c, v in x_all.items()})
        return np.abs(y_all[test] - pred) / pred

    table = forms()
    chosen = argv or list(table)
    store: dict = {}
    print(f"(Mis)Fitting final losses: {len(fin)} runs, sizes {sorted(int(s) for s in set(size))}M")
    print(f"{'form':22s} {'k':>2s} {'split200 mean/max':>18s} {'split100 mean/max':>18s} "
          f"{'LOSO':>6s} {'AIC':>8s} seeds  params (split-200 fit)")
    for label in chosen:
        law = table[label]
        t0 = time.perf_counter()
        f200 = fit(law, size <= 200)
        e200 = errors(f200, size > 200)
        same = abs(fit(law, size <= 200, seed=7).objective / f200.objective - 1) < 1e-7
        e100 = errors(fit(law, size <= 100), size > 100)
        kept = set(fit(law, np.ones(len(runs), bool)).labels)
        loso = []
        rec = {"kept": sorted(kept), "split200": [float(e200.mean()), float(e200.max())],
               "loso_all": {}, "loso_runs": {}}
        for s in np.unique(size):
            fs = fit(law, size != s)
            test = (size == s) & np.isin(runs, list(kept))
            loso.append(errors(fs, test))
            if keep:   # every run of the size, to restrict to other run sets afterwards
                every = size == s
                rec["loso_all"][int(s)] = errors(fs, every)
                rec["loso_runs"][int(s)] = [str(r) for r in runs[every]]
        loso = np.concatenate(loso)
        n, k = f200.n_points, f200.n_free
        aic = n * np.log(np.sum(f200.residuals ** 2) / n) + 2 * k
        params = " ".join(f"{p}={v:.4g}" for p, v in f200.params.items())
        print(f"{label:22s} {k:2d} {e200.mean():8.2%} /{e200.max():6.2%}  {e100.mean():8.2%} /"
              f"{e100.max():6.2%}  {loso.mean():6.2%} {aic:8.1f} {'same' if same else 'DIFF':5s}"
              f"  {params}  [{time.perf_counter() - t0:.0f}s]", flush=True)
        if keep:
            rec["loso_mean"] = float(loso.mean())
            rec["seconds"] = time.perf_counter() - t0
            store[label] = rec
            if json_path:
                Path(json_path).write_text(json.dumps(_to_json(store), indent=1))
    return store


if __name__ == "__main__":
    main(sys.argv[1:])
