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
"""

from __future__ import annotations

import sys
import time
import warnings

import numpy as np

import delphi
from delphi.laws import get_law
from delphi.laws.lr import lr_form

INPUTS = ("params", "tokens", "peak_lr")


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


def main(argv: list[str]) -> None:
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
        for s in np.unique(size):
            test = (size == s) & np.isin(runs, list(kept))
            loso.append(errors(fit(law, size != s), test))
        loso = np.concatenate(loso)
        n, k = f200.n_points, f200.n_free
        aic = n * np.log(np.sum(f200.residuals ** 2) / n) + 2 * k
        params = " ".join(f"{p}={v:.4g}" for p, v in f200.params.items())
        print(f"{label:22s} {k:2d} {e200.mean():8.2%} /{e200.max():6.2%}  {e100.mean():8.2%} /"
              f"{e100.max():6.2%}  {loso.mean():6.2%} {aic:8.1f} {'same' if same else 'DIFF':5s}"
              f"  {params}  [{time.perf_counter() - t0:.0f}s]", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
