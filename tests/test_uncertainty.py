"""Intervals: calibration by simulation, Epoch bootstrap standard errors, determinism."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from delphi.cli import main
from delphi.fitting import fit_arrays
from delphi.laws import POWER
from delphi.uncertainty import bootstrap, bootstrap_interval, delta_interval, run_noise


def simulate_coverage(n_sims, noise_of, seed, method="delta", n_boot=40):
    """Share of simulated ladders whose 90% new-run interval covers one new target run.

    ``noise_of(c, rng)`` gives each run's noise s.d. (log scale), the target's included."""
    rng = np.random.default_rng(seed)
    true = {"E": 1.8, "A": 150.0, "alpha": 0.12}
    c = np.logspace(18, 21, 12)
    target = {"flops": np.array([1e23])}
    truth = POWER.predict(true, target)[0]
    hits = 0
    for k in range(n_sims):
        y = POWER.predict(true, {"flops": c}) * np.exp(rng.normal(0, 1, c.size) * noise_of(c, rng))
        f = fit_arrays("power", {"flops": c}, y, labels=[f"r{i}" for i in range(12)],
                       fixed={"E": 1.8})
        if method == "delta":
            band = delta_interval(f, target, level=0.9)
        else:
            band = bootstrap_interval(f, bootstrap(f, n=n_boot, seed=k), target, level=0.9, seed=k)
        new_run = truth * np.exp(rng.normal(0, noise_of(target["flops"], rng)[0]))
        hits += band.lower <= new_run <= band.upper
    return hits / n_sims


def test_delta_interval_is_calibrated_with_even_noise():
    # Issue 4: the 90% new-run interval covers the true target in 85-95% of simulated ladders
    # (here 300 ladders: the binomial s.e. of the coverage is 1.7 points).
    coverage = simulate_coverage(300, lambda c, rng: np.full(np.shape(c), 0.005), seed=1)
    assert 0.85 <= coverage <= 0.95, coverage


def test_delta_interval_is_calibrated_with_uneven_noise():
    # Uneven noise: each run (the target too) is a noisy one (1%) or a quiet one (0.25%) at
    # random, so the pooled noise estimate must stand for a heavy-tailed mixture.
    noise = lambda c, rng: np.where(rng.random(np.size(c)) < 0.5, 0.01, 0.0025)  # noqa: E731
    coverage = simulate_coverage(300, noise, seed=2)
    assert 0.85 <= coverage <= 0.95, coverage


def test_bootstrap_interval_is_calibrated():
    # Fewer ladders (bootstrap refits are costlier): 80 ladders x 30 draws; a coverage
    # below 0.80 or above 0.99 would be about 3 binomial s.e. from 0.9.
    coverage = simulate_coverage(80, lambda c, rng: np.full(np.shape(c), 0.005), seed=3,
                                 method="bootstrap", n_boot=30)
    assert 0.80 <= coverage <= 0.99, coverage


def test_epoch_bootstrap_standard_errors(data_dir):
    # Besiroglu et al. 2024 (arXiv 2404.10102), Table 2: bootstrap s.e. of alpha 0.015,
    # beta 0.021, E 0.026 for their refit of Chinchilla's Approach 3. Issue 4 asks for ours
    # within 25%; with 200 draws the s.e. of an s.e. is about 5%.
    e = pd.read_csv(data_dir / "epoch_chinchilla" / "svg_extracted_data.csv")
    e = e.sort_values("loss", kind="mergesort").iloc[:-5]
    n = e["Model Size"].to_numpy(float)
    d = e["Training FLOP"].to_numpy(float) / (6 * n)
    f = fit_arrays("chinchilla", {"params": n, "tokens": d}, e["loss"].to_numpy(float),
                   labels=[str(i) for i in range(len(n))])
    se = bootstrap(f, n=200, seed=0).stderr()
    assert se["alpha"] == pytest.approx(0.015, rel=0.25)
    assert se["beta"] == pytest.approx(0.021, rel=0.25)
    assert se["E"] == pytest.approx(0.026, rel=0.25)


def test_bootstrap_is_bit_reproducible_across_workers():
    rng = np.random.default_rng(0)
    c = np.logspace(18, 21, 15)
    y = (1.8 + 150 * c ** -0.12) * np.exp(rng.normal(0, 0.004, c.size))
    f = fit_arrays("power", {"flops": c}, y, labels=[f"r{i}" for i in range(15)])
    a = bootstrap(f, n=12, seed=5, workers=1)
    b = bootstrap(f, n=12, seed=5, workers=2)
    assert a.params == b.params
    assert bootstrap(f, n=12, seed=6, workers=1).params != a.params


def test_noise_from_repeated_runs():
    c = np.repeat(np.logspace(18, 21, 6), 3)
    rng = np.random.default_rng(1)
    y = (1.8 + 150 * c ** -0.12) * np.exp(rng.normal(0, 0.01, c.size))
    f = fit_arrays("power", {"flops": c}, y)
    sigma, source = run_noise(f)
    assert source.startswith("repeated runs (12 dof)")
    assert sigma == pytest.approx(0.01, rel=0.5)


def test_predict_json_has_intervals(capsys):
    code = main(["predict", "marin-delphi-dense", "--target-flops", "1e23", "--json",
                 "--interval", "delta"])
    d = json.loads(capsys.readouterr().out)
    p = d["prediction"]
    assert code == 0 and p["kind"] == "new-run" and p["method"] == "delta" and p["level"] == 0.9
    assert p["lower"] < p["mean_lower"] <= p["loss"] <= p["mean_upper"] < p["upper"]


def test_zero_dof_gives_no_interval_and_says_why(tmp_path, capsys):
    c = np.logspace(18, 20, 3)
    pd.DataFrame({"run": list("abc"), "flops": c, "loss": 1.8 + 150 * c ** -0.12}).to_csv(
        tmp_path / "three.csv", index=False)
    code = main(["predict", str(tmp_path / "three.csv"), "--target-flops", "1e22", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["prediction"]["lower"] is None
    assert any("no interval" in n for n in d["notes"])
