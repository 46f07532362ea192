"""Benchmark: coverage of delphi's 90% intervals over many simulated ladders (issues 4 and 11).

These studies were unit tests until issue 20 ("a unit test checks behaviour, a benchmark
measures statistics"); the tests now check each interval on a tiny case with a known answer
(tests/test_uncertainty.py, tests/test_calibration.py) and this script measures the coverage,
with the same designs, seeds and acceptance bands the tests had:

* **calibrated, misspecified truth** (issue 11, item 1): 200 seeded ladders, 10 budgets half a
  decade apart (1e17..3e21 FLOPs), truth L = 1.8 + 2 x^-(0.25 + g log10 x), x = C/1e17, with a
  drifting exponent g ~ U(-0.03, 0.03) that a power law cannot follow, run noise 0.5% (log).
  The power law is refitted leave-future-out, calibrated (:class:`CalibrationModel`), and the
  full-ladder forecast at r ~ 10^U(1, 2) beyond the largest budget gets a 90% interval; it
  should cover the true loss 85-95% of the time. Baseline: the uncalibrated delta-method
  new-run interval of the same forecast. Also by curvature (g) and distance (r).
* **delta method, even noise** (issue 4): 300 ladders of 12 runs (1e18..1e21) on
  L = 1.8 + 150 C^-0.12 (E fixed at 1.8), run noise 0.5%; the 90% new-run interval at 1e23
  should cover one new run 85-95% of the time.
* **delta method, uneven noise**: the same, each run (and the new one) noisy (1%) or quiet
  (0.25%) at random, so the pooled noise estimate stands for a heavy-tailed mixture: 85-95%.
* **bootstrap**: 80 ladders x 30 run-bootstrap draws (the even-noise design): 80-99% (about
  3 binomial s.e. of 80 ladders either side of 90%).

Each coverage row counts hits of the simulated new run (or true loss), as the tests did; the
issue-4 rows also give the *conditional* coverage, the probability that a new run lands in
each ladder's interval given its fit (a normal CDF difference, exact), averaged over the
ladders: the same expectation with less Monte-Carlo noise. Deterministic (seeded), serial,
no network. Usage: python benchmarks/bench_coverage.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

sys.path.insert(0, str(Path(__file__).resolve().parent))

Z90 = float(norm.ppf(0.95))


def _row(benchmark, figure, value, unit="", baseline=None, baseline_value=None, target=None,
         met=None, note="", ratio=False):
    """A row of ``run_all.py``'s table; ``ratio``: give value / baseline_value (a coverage
    is compared with its baseline side by side, not as a ratio)."""
    ratio = (value / baseline_value if ratio and isinstance(baseline_value, (int, float))
             and baseline_value else None)
    return {"benchmark": benchmark, "figure": figure, "value": value, "unit": unit,
            "baseline": baseline, "baseline_value": baseline_value, "ratio": ratio,
            "target": target, "met": met, "note": note}


def _binomial_se(p: float, n: int) -> float:
    return math.sqrt(p * (1 - p) / n) if n else float("nan")


# ----------------------------------------------------------------------------- calibrated
def misspecified_truth(c, g):
    """The curved truth of the calibration study: the power law's exponent drifts with
    log C, alpha(C) = 0.25 + g log10(C / 1e17)."""
    x = np.asarray(c, dtype=float) / 1e17
    return 1.8 + 2.0 * x ** -(0.25 + g * np.log10(x))


def calibrated_study(n_sim: int = 200, nb: int = 10, noise: float = 0.005) -> pd.DataFrame:
    """One row per simulated ladder: g, r, the forecast's log error against the truth, the
    calibrated and delta-method 90% intervals, and whether each covers the true loss."""
    import delphi
    from delphi.calibration import CalibrationModel, leave_future_out
    from delphi.errors import DelphiError
    from delphi.ladder import Ladder
    from delphi.uncertainty import delta_interval

    c = 1e17 * 10 ** (0.5 * np.arange(nb))
    rows = []
    # Simulated ladders raise delphi's warnings about themselves (identification, few points):
    # incidental to the coverage measured here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s in range(n_sim):
            rng = np.random.default_rng([11, s])
            g = rng.uniform(-0.03, 0.03)
            y = misspecified_truth(c, g) * np.exp(rng.normal(0, noise, nb))
            lad = Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(nb)], "flops": c,
                                       "loss": y}), name=f"sim{s}")
            e = leave_future_out(lad, "power")
            model = CalibrationModel.fit(e)
            # Full-ladder forecast by the same fast path, warm-started from the last cut.
            full = delphi.fit(lad, "power", warm_start=e.folds[-1]["params"], identify=False)
            r = 10 ** rng.uniform(1, 2)
            target = np.array([c[-1] * r])
            pred = float(full.predict({"flops": target})[0])
            lo, hi = model.interval(pred, r, 0.9)
            truth = float(misspecified_truth(target, g)[0])
            try:
                d = delta_interval(full, {"flops": target}, level=0.9)
                d_hit, d_half = bool(d.lower <= truth <= d.upper), math.log(d.upper / pred)
            except DelphiError:
                d_hit, d_half = None, None
            rows.append({"seed": s, "g": g, "r": r, "log_error": math.log(pred / truth),
                         "half": math.log(hi / pred), "hit": bool(lo <= truth <= hi),
                         "delta_hit": d_hit, "delta_half": d_half,
                         "sigma_0": model.sigma_0, "k": model.k})
    return pd.DataFrame(rows)


def _calibrated_rows(n_sim: int) -> list[dict]:
    t0 = time.perf_counter()
    d = calibrated_study(n_sim)
    seconds = time.perf_counter() - t0
    name = "calibrated 90% interval, misspecified truth"
    cov = float(d["hit"].mean())
    delta = d["delta_hit"].dropna().astype(bool)
    rows = [_row(name, f"coverage of the true loss ({len(d)} ladders)", cov * 100, "%",
                 "delta-method new-run interval, same forecasts",
                 float(delta.mean()) * 100 if len(delta) else None, "85%-95%",
                 bool(0.85 <= cov <= 0.95),
                 f"binomial s.e. {_binomial_se(cov, len(d)):.1%}; r ~ 10^U(1,2) beyond 3e21 "
                 f"FLOPs, g ~ U(-0.03, 0.03), noise 0.5%; delta interval for {len(delta)} "
                 f"ladders; {seconds:.0f} s")]
    for label, sel in (("g < -0.01", d["g"] < -0.01), ("-0.01 <= g <= 0.01", d["g"].abs() <= 0.01),
                       ("g > 0.01", d["g"] > 0.01), ("g < -0.02", d["g"] < -0.02),
                       ("r < 30", d["r"] < 30), ("r >= 30", d["r"] >= 30)):
        part = d[sel]
        dp = part["delta_hit"].dropna().astype(bool)
        p = float(part["hit"].mean())
        rows.append(_row(name, f"coverage, {label} ({len(part)} ladders)", p * 100, "%",
                         "delta-method interval, same ladders",
                         float(dp.mean()) * 100 if len(dp) else None, None, None,
                         f"binomial s.e. {_binomial_se(p, len(part)):.1%}"))
    z = np.abs(d["log_error"]) / (d["half"] / Z90)
    rows.append(_row(name, "median abs. log error of the forecast", float(np.median(
        np.abs(d["log_error"]))) * 100, "%", note="the point forecast's miss of the true loss"))
    rows.append(_row(name, "median log half-width of the interval", float(np.median(d["half"]))
                     * 100, "%", "delta-method interval", float(d["delta_half"].dropna().median())
                     * 100, note="half-width of log L at 90%", ratio=True))
    rows.append(_row(name, "median abs. log error / (half-width / 1.645)", float(np.median(z)),
                     note="0.67 for a calibrated normal error (the median of abs. Z); above "
                          "0.67 the interval is too narrow, below it too wide"))
    return rows


# ----------------------------------------------------------------------------- issue 4
def interval_coverage(n_sims, noise_of, seed, method="delta", n_boot=40, target_mix=None):
    """Simulate ``n_sims`` ladders; per ladder whether its 90% new-run interval covers one new
    target run, its conditional coverage and its log half-width.

    ``noise_of(c, rng)`` gives each run's noise s.d. (log scale), the target's included;
    ``target_mix`` is the target's noise distribution as [(sd, probability), ...] for the
    conditional coverage (the probability a new run falls in the interval given the fit).
    The draws are those of the issue-4 tests (same order, same seeds).
    """
    from delphi.fitting import fit_arrays
    from delphi.laws import POWER
    from delphi.uncertainty import bootstrap, bootstrap_interval, delta_interval

    rng = np.random.default_rng(seed)
    true = {"E": 1.8, "A": 150.0, "alpha": 0.12}
    c = np.logspace(18, 21, 12)
    target = {"flops": np.array([1e23])}
    truth = POWER.predict(true, target)[0]
    hits, cond, half = [], [], []
    for k in range(n_sims):
        y = POWER.predict(true, {"flops": c}) * np.exp(rng.normal(0, 1, c.size) * noise_of(c, rng))
        f = fit_arrays("power", {"flops": c}, y, labels=[f"r{i}" for i in range(12)],
                       fixed={"E": 1.8})
        if method == "delta":
            band = delta_interval(f, target, level=0.9)
        else:
            band = bootstrap_interval(f, bootstrap(f, n=n_boot, seed=k), target, level=0.9, seed=k)
        new_run = truth * np.exp(rng.normal(0, noise_of(target["flops"], rng)[0]))
        hits.append(band.lower <= new_run <= band.upper)
        lo, hi = math.log(band.lower / truth), math.log(band.upper / truth)
        cond.append(sum(p * (norm.cdf(hi / sd) - norm.cdf(lo / sd)) for sd, p in target_mix))
        half.append(math.log(band.upper / band.lower) / 2)
    return np.array(hits), np.array(cond), np.array(half)


def _issue4_rows(quick: bool) -> list[dict]:
    even = lambda c, rng: np.full(np.shape(c), 0.005)  # noqa: E731
    uneven = lambda c, rng: np.where(rng.random(np.size(c)) < 0.5, 0.01, 0.0025)  # noqa: E731
    studies = [
        ("delta-method 90% new-run interval, even noise 0.5%", dict(
            n_sims=60 if quick else 300, noise_of=even, seed=1, target_mix=[(0.005, 1.0)]),
         (0.85, 0.95)),
        ("delta-method 90% new-run interval, uneven noise (1% or 0.25%)", dict(
            n_sims=60 if quick else 300, noise_of=uneven, seed=2,
            target_mix=[(0.01, 0.5), (0.0025, 0.5)]), (0.85, 0.95)),
        ("bootstrap 90% new-run interval (30 draws), even noise 0.5%", dict(
            n_sims=20 if quick else 80, noise_of=even, seed=3, method="bootstrap", n_boot=30,
            target_mix=[(0.005, 1.0)]), (0.80, 0.99)),
    ]
    rows = []
    for name, kw, (lo, hi) in studies:
        t0 = time.perf_counter()
        hits, cond, half = interval_coverage(**kw)
        seconds = time.perf_counter() - t0
        cov = float(hits.mean())
        rows.append(_row(name, f"coverage of one new run ({len(hits)} ladders)", cov * 100, "%",
                         target=f"{lo:.0%}-{hi:.0%}", met=bool(lo <= cov <= hi),
                         note=f"binomial s.e. {_binomial_se(cov, len(hits)):.1%}; 12 runs "
                              f"1e18..1e21, target 1e23, E fixed; {seconds:.0f} s"))
        rows.append(_row(name, "conditional coverage, mean over the ladders", float(cond.mean())
                         * 100, "%", target=f"{lo:.0%}-{hi:.0%}",
                         met=bool(lo <= cond.mean() <= hi),
                         note=f"P(new run in the interval given the fit), exact per ladder; "
                              f"s.e. over ladders {cond.std(ddof=1) / math.sqrt(len(cond)):.1%}"))
        rows.append(_row(name, "median log half-width", float(np.median(half)) * 100, "%"))
    return rows


def run(quick: bool = False) -> list[dict]:
    """The coverage studies, for the benchmark runner (``quick``: a quarter of the ladders)."""
    from delphi.errors import DelphiWarning
    # Simulated ladders warn about themselves (identification, few points): not measured here.
    warnings.simplefilter("ignore", DelphiWarning)
    return _calibrated_rows(50 if quick else 200) + _issue4_rows(quick)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the ladders")
    args = parser.parse_args()
    from run_all import print_rows
    t0 = time.perf_counter()
    print_rows(run(quick=args.quick))
    print(f"{time.perf_counter() - t0:.0f} s")
