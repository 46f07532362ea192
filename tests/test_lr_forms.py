"""Forms of the peak-LR mis-tuning term (issue 11, item 4): each law recovers known parameters
from simulated sweeps, its gradient matches finite differences, and the backtest figures on the
(Mis)Fitting sweeps (benchmarks/bench_lr_forms.py prints the whole comparison).

Synthetic data: known parameters, 0.2% multiplicative noise, seeded; tolerances are a few times
the spread seen across noise seeds, so a wrong gradient or a biased form fails them.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import delphi
from delphi.cli import main
from delphi.fitting import fit_arrays
from delphi.laws import LAWS, get_law
from delphi.laws.lr import (ASYM_WIDTH, CHINCHILLA_LR, CHINCHILLA_LR_ASYM, CHINCHILLA_LR_ASYM_ND,
                            CHINCHILLA_LR_COMPUTE,
                            CHINCHILLA_LR_MULT, CHINCHILLA_LR_ND, CHINCHILLA_LR_QUARTIC,
                            CHINCHILLA_LR_WIDTH, LR_FORMS, lr_form)

NOISE = 0.002
LN0, LD0 = np.log(1e8), np.log(1e10)
CURVED = lr_form("curved-test", optimum="curved", formula="", source="test")
BASE = {"E": 1.9, "A": 300.0, "B": 900.0, "alpha": 0.32, "beta": 0.30, "log_eta0": np.log(3e-3),
        "p": -0.5, "q": -0.15}


def sweep(law, true, seed):
    """16 (N, D) pairs, each swept over 5 peak LRs from 1/4.5x to 4.5x the true optimum."""
    rng = np.random.default_rng(seed)
    n = np.repeat(10 ** rng.uniform(7, 9, 16), 5)
    d = np.repeat(10 ** rng.uniform(9, 11, 16), 5)
    lr = law.optimal_lr(true, n, d) * np.exp(np.tile(np.linspace(-1.5, 1.5, 5), 16))
    x = {"params": n, "tokens": d, "peak_lr": lr}
    y = law.predict(true, x) * np.exp(rng.normal(0, NOISE, n.shape))
    return x, y


# (law, its own true parameters, {parameter: (tolerance, "abs" | "rel")})
CASES = [
    (CHINCHILLA_LR_ASYM, {"K_lo": 0.03, "K_hi": 0.09},
     {"K_lo": (0.2, "rel"), "K_hi": (0.2, "rel"), "p": (0.05, "abs"), "q": (0.05, "abs")}),
    (CHINCHILLA_LR_QUARTIC, {"K": 0.04, "K4": 0.01},
     {"K": (0.25, "rel"), "K4": (0.4, "rel"), "p": (0.05, "abs")}),
    (CHINCHILLA_LR_WIDTH, {"K": 0.05, "s": -0.3, "r": 0.2},
     {"K": (0.2, "rel"), "s": (0.1, "abs"), "r": (0.1, "abs"), "p": (0.05, "abs")}),
    (CHINCHILLA_LR_MULT, {"K": 0.05}, {"K": (0.2, "rel"), "p": (0.05, "abs"),
                                       "beta": (0.05, "abs")}),
    (CHINCHILLA_LR_COMPUTE, {"K": 0.05, "p": -0.125}, {"K": (0.2, "rel"), "p": (0.03, "abs")}),
    (CHINCHILLA_LR_ND, {"K": 0.05, "g": 0.2}, {"K": (0.2, "rel"), "g": (0.1, "abs"),
                                               "p": (0.05, "abs")}),
    (CHINCHILLA_LR_ASYM_ND, {"K_lo": 0.03, "K_hi": 0.09, "g": 0.2, "p2": 0.15},
     {"K_lo": (0.25, "rel"), "K_hi": (0.25, "rel"), "g": (0.1, "abs"), "p2": (0.06, "abs")}),
    (CURVED, {"K": 0.05, "p2": 0.15}, {"K": (0.2, "rel"), "p2": (0.06, "abs"),
                                       "p": (0.06, "abs")}),
]


@pytest.mark.parametrize("law, own, tol", CASES, ids=[c[0].name for c in CASES])
def test_form_recovers_known_parameters(law, own, tol):
    true = {k: v for k, v in {**BASE, **own}.items() if k in law.param_names}
    x, y = sweep(law, true, seed=5)
    f = fit_arrays(law, x, y)
    assert f.converged, f.message
    for name, (t, kind) in tol.items():
        if kind == "rel":
            assert f.params[name] == pytest.approx(true[name], rel=t), name
        else:
            assert f.params[name] == pytest.approx(true[name], abs=t), name
    # the optimum itself within 10% over the design
    est = law.optimal_lr(f.params, x["params"], x["tokens"])
    assert np.max(np.abs(est / law.optimal_lr(true, x["params"], x["tokens"]) - 1)) < 0.1


@pytest.mark.parametrize("law", LR_FORMS + (CURVED, lr_form(
    "all-test", optimum="curved", shape="asym", width_n=True, width_d=True, interaction=True,
    formula="", source="test")), ids=lambda law: law.name)
def test_form_gradient_matches_finite_differences(law):
    rng = np.random.default_rng(9)
    x = {"params": 10 ** rng.uniform(7, 9, 40), "tokens": 10 ** rng.uniform(9, 11, 40),
         "peak_lr": 10 ** rng.uniform(-4, -1.5, 40)}
    m = len(law.nonlinear_names)
    theta = np.array([0.3, 0.35, -6.0, -0.5, 0.2, 0.1, -0.3, 0.25, 0.15])[:m]
    logphi, dlogphi = law.log_basis(theta, x)
    assert np.all(np.isfinite(logphi)) and np.all(np.isfinite(dlogphi))
    h = 1e-6
    for j in range(m):
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        fd = (law.log_basis(up, x)[0] - law.log_basis(down, x)[0]) / (2 * h)
        np.testing.assert_allclose(dlogphi[:, :, j], fd, rtol=1e-5, atol=1e-6)
    # the batched and grid evaluations are the same numbers
    thetas = np.stack([theta, theta * 0.9])
    grid = law.log_basis_grid(thetas, x)
    lp, dl = law.log_basis_batch(thetas, x)
    for i, t in enumerate(thetas):
        one, done = law.log_basis(t, x)
        np.testing.assert_allclose(grid[i], one, rtol=1e-12)
        np.testing.assert_allclose(lp[i], one, rtol=1e-12)
        np.testing.assert_allclose(dl[i], done, rtol=1e-12)


def test_formulas_by_hand():
    n, d = np.array([2e8, 5e8]), np.array([4e9, 2e10])
    v = {**BASE, "K": 0.05}
    # The DeepSeek optimum eta = 0.3118 C^-0.125 with C = 6ND (arXiv 2401.02954, Eq. 1)
    ds = {**v, "p": -0.125, "log_eta0": np.log(0.3118) - 0.125 * np.log(6e18)}
    np.testing.assert_allclose(CHINCHILLA_LR_COMPUTE.optimal_lr(ds, n, d),
                               0.3118 * (6 * n * d) ** -0.125, rtol=1e-12)
    # asymmetric: one side's curvature each, beyond the 5% transition
    a = {**BASE, "K_lo": 0.03, "K_hi": 0.09}
    opt = CHINCHILLA_LR_ASYM.optimal_lr(a, n, d)
    base = 1.9 + 300.0 / n ** 0.32 + 900.0 / d ** 0.30
    for u, k in ((-1.0, 0.03), (0.7, 0.09)):
        x = {"params": n, "tokens": d, "peak_lr": opt * np.exp(u)}
        np.testing.assert_allclose(CHINCHILLA_LR_ASYM.predict(a, x), base + k * u ** 2,
                                   rtol=1e-7)
    # at the optimum the smooth halves each carry half of a vanishing u^2
    assert ASYM_WIDTH == 0.05
    x = {"params": n, "tokens": d, "peak_lr": opt}
    np.testing.assert_allclose(CHINCHILLA_LR_ASYM.predict(a, x), base, rtol=1e-12)
    # multiplicative: the mis-tuning cost shrinks with D like the data term
    x = {"params": n, "tokens": d, "peak_lr": CHINCHILLA_LR.optimal_lr(v, n, d) * np.exp(0.5)}
    np.testing.assert_allclose(CHINCHILLA_LR_MULT.predict(v, x),
                               base + 0.05 * (d / 1e10) ** -0.30 * 0.25, rtol=1e-12)
    # interaction and width exponents
    w = {**v, "g": 0.2, "s": -0.3, "r": 0.2}
    np.testing.assert_allclose(
        CHINCHILLA_LR_ND.predict(w, x),
        1.9 + 300.0 / n ** 0.32 + 900.0 * (n / 1e8) ** 0.2 / d ** 0.30 + 0.05 * 0.25, rtol=1e-12)
    np.testing.assert_allclose(
        CHINCHILLA_LR_WIDTH.predict(w, x),
        base + 0.05 * (n / 1e8) ** -0.3 * (d / 1e10) ** 0.2 * 0.25, rtol=1e-12)
    x2 = {**x, "peak_lr": CHINCHILLA_LR.optimal_lr(v, n, d) * np.exp(-1.2)}
    q = {**v, "K4": 0.01}
    np.testing.assert_allclose(CHINCHILLA_LR_QUARTIC.predict(q, x2),
                               base + 0.05 * 1.44 + 0.01 * 1.44 ** 2, rtol=1e-12)
    # chinchilla-lr itself is unchanged: the same parameter names and formula
    assert CHINCHILLA_LR.param_names == ("E", "A", "B", "K", "alpha", "beta", "log_eta0", "p", "q")


def test_forms_are_registered_not_defaults():
    for law in LR_FORMS:
        assert LAWS[law.name] is law and get_law(law.name) is law
        assert law.name.startswith("chinchilla-lr-")


# --------------------------------------------------------------------- CLI
def test_cli_predicts_with_an_asymmetric_lr_term(tmp_path, capsys):
    # A simulated sweep ladder from a known asymmetric law, written as a CSV ladder.
    true = {**BASE, "K_lo": 0.03, "K_hi": 0.09}
    x, y = sweep(CHINCHILLA_LR_ASYM, true, seed=6)
    rows = ["run,params,tokens,flops,loss,peak_lr"] + [
        f"r{i},{n:.6g},{d:.6g},{6 * n * d:.6g},{loss:.8g},{lr:.6g}" for i, (n, d, lr, loss) in
        enumerate(zip(x["params"], x["tokens"], x["peak_lr"], y))]
    (tmp_path / "sweep.csv").write_text("\n".join(rows) + "\n")
    args = ["predict", str(tmp_path / "sweep.csv"), "--law", "chinchilla-lr-asym",
            "--target-params", "4e8", "--target-tokens", "8e9", "--interval", "none", "--json"]
    assert main(args) == 0
    best = json.loads(capsys.readouterr().out)
    assert best["law"] == "chinchilla-lr-asym"
    assert best["params"]["K_hi"] == pytest.approx(0.09, rel=0.2)
    assert best["params"]["K_lo"] == pytest.approx(0.03, rel=0.2)
    assert any("assumed the fitted optimum" in n for n in best["notes"])
    # 3x too high and 3x too low both cost loss: K_hi (ln 3)^2 and K_lo (ln 3)^2 above the optimum
    opt = float(CHINCHILLA_LR_ASYM.optimal_lr(best["params"], 4e8, 8e9))
    u2 = np.log(3.0) ** 2
    for factor, k in ((3.0, "K_hi"), (1 / 3.0, "K_lo")):
        assert main(args + ["--target-peak-lr", f"{opt * factor:.12g}"]) == 0
        off = json.loads(capsys.readouterr().out)
        assert off["target"]["peak_lr"] == pytest.approx(opt * factor, rel=1e-9)
        assert off["prediction"]["loss"] - best["prediction"]["loss"] == pytest.approx(
            best["params"][k] * u2, rel=1e-3)


# --------------------------------------------------------------------- real data: the backtest
def test_chosen_form_meets_the_misfitting_target(data_dir):
    # Issue 11, item 4: fitted on final losses of models <= 200M, predict every 300M and 400M
    # run at its own peak LR. Target mean |rel. error| <= 0.45%, no run worse than 1.5%;
    # chinchilla-lr gives 0.71% / 2.31% through delphi.fit (0.61% with the nine 100-step runs
    # kept in the fit). Measured 0.44% / 1.10%: the mean meets the target by a small margin.
    ladder = delphi.load_ladder("misfitting2025-final")
    fin, _ = ladder.final_points()
    size = fin["run"].str.extract(r"_(\d+)m-")[0].astype(int)
    small = ladder.select(runs=fin.loc[size <= 200, "run"].tolist())
    test = fin[size > 200]
    x = {c: test[c].to_numpy(float) for c in ("params", "tokens", "peak_lr")}
    f = delphi.fit(small, "chinchilla-lr-asym-nd", identify=False)
    err = np.abs(test["loss"].to_numpy() / f.predict(x) - 1)
    print(f"\n300M/400M runs: {len(test)}; chinchilla-lr-asym-nd {err.mean():.2%} (max "
          f"{err.max():.2%})")
    assert len(test) == 21
    assert err.mean() <= 0.0045 and err.max() <= 0.015
    # The 12-parameter search reaches the same optimum whatever its seed: the global search
    # again, seed 7, on the points the fit kept (one search; delphi.fit would redo the
    # off-trend exclusions of the 100-step runs one global search at a time).
    other = fit_arrays(f.law, f.x, f.y, labels=f.labels, seed=7, delta=f.delta)
    assert other.objective == pytest.approx(f.objective, rel=1e-7)
