"""Learning-rate-aware laws: synthetic ground truth per law, and the real-data acceptance figures.

Synthetic data: known parameters, 0.2% multiplicative noise, seeded. Tolerances are a few
times the spread seen across seeds, so they fail on a wrong gradient or a biased fit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.cli import main
from delphi.curves import complete
from delphi.errors import FitWarning
from delphi.fitting import fit_arrays
from delphi.laws import ANNEALING, CHINCHILLA_CKPT, CHINCHILLA_LR, MULTIPOWER
from delphi.schedules import Schedule, features

from bundled import load

NOISE = 0.002


def noisy(y, seed):
    return y * np.exp(np.random.default_rng(seed).normal(0, NOISE, y.shape))


def curves(specs, steps_every, law, values, seed=0):
    """Checkpoint inputs of several schedules and the law's losses there."""
    parts, lrs = [], []
    for g, sched in enumerate(specs):
        steps = np.arange(steps_every, sched.total_steps + 1, steps_every)
        f = features(sched, steps)
        parts.append(pd.DataFrame({"S1": f["S1"], "S2": f["S2"], "h": f["h"], "step": steps,
                                   "_group": g}))
        lrs.append(sched.lrs())
    t = pd.concat(parts, ignore_index=True)
    x = {"S1": t["S1"].to_numpy(), "S2": t["S2"].to_numpy(), "step": t["step"].to_numpy(float),
         "_group": t["_group"].to_numpy(), "_lrs": lrs}
    return x, noisy(law.predict(values, x), seed)


# --------------------------------------------------------------------- synthetic ground truth
def test_annealing_recovers_known_parameters():
    true = {"L0": 2.8, "A": 0.45, "C": 0.35, "alpha": 0.55}
    specs = [Schedule.parse(s, peak_lr=3e-3, total_steps=t) for s, t in
             (("cosine:warmup=100,final=0.1", 4000), ("wsd:warmup=100,decay=0.2", 6000),
              ("constant:warmup=100", 3000))]
    x, y = curves(specs, 100, ANNEALING, true)
    f = fit_arrays("annealing", x, y)
    assert f.converged
    assert f.params["L0"] == pytest.approx(true["L0"], abs=0.06)
    assert f.params["alpha"] == pytest.approx(true["alpha"], abs=0.06)
    assert f.params["C"] == pytest.approx(true["C"], rel=0.1)


def test_multipower_recovers_known_curve():
    # Luo et al. 2025: the law is fitted on a constant and a cosine run and predicts the rest.
    true = {"L0": 2.9, "A": 0.5, "B": 300.0, "alpha": 0.5, "C": 2.0, "beta": 0.6, "gamma": 0.5}
    specs = [Schedule.parse(s, peak_lr=3e-3, total_steps=2000) for s in
             ("constant:warmup=50", "cosine:warmup=50,final=0.1", "wsd:warmup=50,decay=0.2,final=0")]
    x, y = curves(specs, 50, MULTIPOWER, true)
    f = fit_arrays("multipower", x, y)
    # C, beta and gamma trade off against each other at 0.2% noise; what must be recovered is
    # the curve, including a schedule not fitted (a longer 1-sqrt cooldown), to 0.3%.
    wsd = [Schedule.parse("wsd:warmup=50,decay=0.4,cooldown=1-sqrt,final=0", peak_lr=3e-3,
                          total_steps=2000)]
    xw, _ = curves(wsd, 100, MULTIPOWER, true)
    truth = MULTIPOWER.predict(true, xw)
    assert np.max(np.abs(f.predict(xw) / truth - 1)) < 0.003
    assert f.params["L0"] == pytest.approx(true["L0"], abs=0.15)


def test_chinchilla_ckpt_recovers_known_parameters():
    rng = np.random.default_rng(3)
    true = {"E": 1.9, "A": 300.0, "B": 900.0, "F": 0.12, "alpha": 0.32, "beta": 0.30,
            "gamma": 1.5}
    n = np.repeat(10 ** rng.uniform(7.5, 9.5, 12), 20)
    frac = np.tile(np.linspace(0.25, 1.0, 20), 12)
    d = n * np.repeat(10 ** rng.uniform(0.8, 2.2, 12), 20) * frac
    h = 0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * frac))  # cosine to 0.1
    x = {"params": n, "tokens": d, "h": h}
    f = fit_arrays("chinchilla-ckpt", x, noisy(CHINCHILLA_CKPT.predict(true, x), 3))
    assert f.converged
    for name, tol in (("E", 0.08), ("alpha", 0.03), ("beta", 0.03), ("gamma", 0.4)):
        assert f.params[name] == pytest.approx(true[name], abs=tol), name
    assert f.params["F"] == pytest.approx(true["F"], rel=0.25)


def test_chinchilla_lr_recovers_optimal_lr_rule():
    rng = np.random.default_rng(4)
    true = {"E": 1.9, "A": 300.0, "B": 900.0, "K": 0.05, "alpha": 0.32, "beta": 0.30,
            "log_eta0": np.log(1.79) - 0.713 * np.log(1e8) + 0.307 * np.log(1e10),
            "p": -0.713, "q": 0.307}
    n = np.repeat(10 ** rng.uniform(7, 9, 15), 5)
    d = np.repeat(10 ** rng.uniform(9, 11, 15), 5)
    opt = CHINCHILLA_LR.optimal_lr(true, n, d)
    lr = opt * np.exp(np.tile(np.linspace(-1.5, 1.5, 5), 15))
    x = {"params": n, "tokens": d, "peak_lr": lr}
    f = fit_arrays("chinchilla-lr", x, noisy(CHINCHILLA_LR.predict(true, x), 4))
    assert f.converged
    assert f.params["p"] == pytest.approx(true["p"], abs=0.05)
    assert f.params["q"] == pytest.approx(true["q"], abs=0.05)
    assert f.params["K"] == pytest.approx(true["K"], rel=0.15)
    # the Step Law constants (Li et al. 2025, Eq. 6: c = 1.79) come back from the anchored form
    assert CHINCHILLA_LR.step_law_constants(f.params)["c"] == pytest.approx(1.79, rel=0.5)
    # eta* itself is pinned within a few percent across the sampled range
    est = CHINCHILLA_LR.optimal_lr(f.params, n, d)
    assert np.max(np.abs(est / opt - 1)) < 0.1


# --------------------------------------------------------------------- curve completion
def synthetic_rung(tmp_path, stop=0.8):
    """A rung on a cosine schedule whose losses follow a known annealing law, stopped at 80%
    like Marin's crashed d2048 MoE rung; returns (manifest path, true final loss)."""
    true = {"L0": 2.3, "A": 0.6, "C": 0.25, "alpha": 0.5}
    sched = Schedule.parse("cosine:warmup=200,final=0.1", peak_lr=2e-3, total_steps=20000)
    steps = np.arange(250, 20001, 250)
    f = features(sched, steps)
    loss = noisy(ANNEALING.predict(true, {"S1": f["S1"], "S2": f["S2"]}), 11)
    keep = steps <= stop * 20000
    frame = pd.DataFrame({"run": "d2048", "step": steps[keep], "loss": loss[keep],
                          "flops": 1e18 * steps[keep], "peak_lr": 2e-3, "total_steps": 20000,
                          "fraction": steps[keep] / 20000})
    frame.to_csv(tmp_path / "rung.csv", index=False)
    (tmp_path / "rung.toml").write_text(
        'name = "rung"\ndescription = "synthetic rung"\n'
        'schedule = "cosine:warmup=200,final=0.1"\n'
        '[source]\nreader = "csv"\npath = "rung.csv"\n')
    truth = ANNEALING.predict(true, {k: v[-1:] for k, v in features(sched, [20000]).items()
                                     if k in ("S1", "S2")})[0]
    return tmp_path / "rung.toml", float(truth)


def test_complete_synthetic_rung_stopped_at_80_percent(tmp_path, capsys):
    manifest, truth = synthetic_rung(tmp_path)
    code = main(["complete", str(manifest), "--run", "d2048", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    import json
    d = json.loads(out)
    assert d["prediction"]["at_step"] == 20000
    assert d["actual"] is None  # the run never reached its end
    assert abs(d["prediction"]["loss"] / truth - 1) < 0.003  # issue 3: within 0.3%


def test_complete_needs_a_schedule(tmp_path):
    pd.DataFrame({"run": "a", "step": [100, 200, 300], "flops": [1e17, 2e17, 3e17],
                  "loss": [4.0, 3.6, 3.4]}).to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(delphi.LadderError, match="planned length is unknown|no LR schedule"):
        complete(delphi.load_ladder(str(tmp_path / "a.csv")), "a")


def test_complete_unknown_run(tmp_path):
    manifest, _ = synthetic_rung(tmp_path)
    with pytest.raises(delphi.LadderError, match="unknown run 'nope'"):
        complete(delphi.load_ladder(str(manifest)), "nope")


# --------------------------------------------------------------------- real data acceptance
def mean_abs_rel_error(actual, predicted):
    return float(np.mean(np.abs((actual - predicted) / predicted)))


@pytest.fixture(scope="module")
def misfitting_final(data_dir):
    """The (Mis)Fitting final-loss ladder, loaded once for this module; tests only read it."""
    return delphi.load_ladder("misfitting2025-final")


def test_misfitting_lr_sweeps_peak_lr_law(misfitting_final):
    """Issue 3: fitted on final losses of models <= 200M, the peak-LR mis-tuning law predicts
    every 300M and 400M final loss across all their peak LRs within 1.5% mean |rel. error|;
    the LR-blind chinchilla fit cannot tell a mis-tuned run and does worse.

    delphi.fit of chinchilla-lr on every <= 200M run excludes the nine 100-step runs as
    off-trend, one 5-D global search each (ten searches); here they are left out of the
    selection instead, so the law is fitted once to the same 212 points (the same optimum,
    bit for bit, when this was written) and the fit must exclude no further run as off-trend.
    The exclusion path on these sweeps is test_lr_forms.py's chosen-form test; the LR-blind
    baseline below is still fitted to every <= 200M run."""
    ladder = misfitting_final
    fin, _ = ladder.final_points()
    size = fin["run"].str.extract(r"_(\d+)m-")[0].astype(int)
    small_runs = fin.loc[size <= 200, "run"].tolist()
    long_runs = [r for r in small_runs if "-T100-" not in r]
    assert len(small_runs) - len(long_runs) == 9
    test = fin[size > 200]
    # identify=False: the identification profile (a few more refits) is not what is tested
    # here; it finds the floor E unidentified by these sweeps, for either law.
    lr_fit = delphi.fit(ladder.select(runs=long_runs), "chinchilla-lr", identify=False)
    assert not [e.run for e in lr_fit.exclusions if "trend" in e.reason]
    blind = delphi.fit(ladder.select(runs=small_runs), "chinchilla", identify=False)
    x = {c: test[c].to_numpy(float) for c in ("params", "tokens", "peak_lr")}
    err_lr = mean_abs_rel_error(test["loss"].to_numpy(), lr_fit.predict(x))
    err_blind = mean_abs_rel_error(test["loss"].to_numpy(), blind.predict(x))
    print(f"\n300M/400M runs: {len(test)}; chinchilla-lr {err_lr:.2%}, chinchilla {err_blind:.2%}")
    assert len(test) >= 20
    assert err_lr <= 0.015
    assert err_lr < err_blind
    # The five-dimensional search reaches the same optimum whatever its seed.
    other = fit_arrays(lr_fit.law, lr_fit.x, lr_fit.y, labels=lr_fit.labels, seed=7,
                       delta=lr_fit.delta)
    assert other.objective == pytest.approx(lr_fit.objective, rel=1e-7)


@pytest.fixture(scope="module")
def olmo(olmo_ladder):
    """The OLMo ladder (conftest's, loaded once per test process with its known
    FLOP-convention warning expected); tests only read it."""
    return olmo_ladder


def test_olmo_checkpoint_law_predicts_1b_3b(olmo):
    # Issue 3: a checkpoint-aware law on all checkpoints of the 190M-760M runs (logged LR)
    # predicts the final C4 loss of every 1B and 3B run within 1.0% mean |rel. error|.
    ladder = olmo
    small = [r for r in ladder.runs if r.split("-")[0] in ("190M", "370M", "760M")]
    big = [r for r in ladder.runs if r.split("-")[0] in ("1B", "3B")]
    # identify=False: the identification profile (more refits) is not what is tested here;
    # it finds the floor E unidentified by these runs, for either law.
    ckpt = delphi.fit(ladder.select(runs=small), "chinchilla-ckpt", identify=False)
    final_only = delphi.fit(ladder.select(runs=small), "chinchilla", identify=False)
    fin, _ = ladder.select(runs=big).final_points()
    x = {"params": fin["params"].to_numpy(float), "tokens": fin["tokens"].to_numpy(float),
         "h": (fin["lr"] / fin["peak_lr"]).to_numpy(float)}
    err_ckpt = mean_abs_rel_error(fin["loss"].to_numpy(), ckpt.predict(x))
    err_final = mean_abs_rel_error(fin["loss"].to_numpy(), final_only.predict(x))
    print(f"\n1B/3B runs: {len(fin)}; chinchilla-ckpt {err_ckpt:.2%} on {ckpt.n_points} "
          f"checkpoints, chinchilla (final only) {err_final:.2%} on {final_only.n_points} runs")
    assert len(fin) == 10
    assert ckpt.n_points > 5 * final_only.n_points
    assert err_ckpt <= 0.010


def test_misfitting_completion_at_80_percent_beats_lr_blind_baseline(data_dir):
    # Issue 3: every (Mis)Fitting run stopped at 80% is completed; the median error is
    # reported (benchmarks/curve_completion.py prints the full figures). Here, on every 8th
    # run (18 of the 137 with 8+ checkpoints): the schedule-aware law must beat the LR-blind
    # power law in D, whose extrapolation cannot see the cosine decay still to come, by 2x,
    # with a median under 0.6%. Measured 0.43% vs 1.24% (ratio 0.35); every 4th run gave
    # 0.41% vs 1.29%, and the other offsets of every 8th run 0.14-0.38% (ratios 0.23-0.37),
    # so the subset does not decide the outcome.
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "benchmarks"))
    from curve_completion import baseline

    ladder = load("misfitting2025")    # expecting its clipped-fraction warning
    counts = ladder.table.groupby("run").size()
    runs = [r for r in counts.index if counts[r] >= 8][::8]
    ours, base = [], []
    for run in runs:
        c = complete(ladder, run, "annealing", upto_fraction=0.8)
        b = baseline(ladder, run, 0.8)
        ours.append(abs(c.rel_error))
        base.append(abs((c.actual - b) / b))
    print(f"\n80% completion on {len(ours)} runs: annealing median {np.median(ours):.2%}, "
          f"LR-blind median {np.median(base):.2%}")
    assert len(ours) >= 15
    assert np.median(ours) < 0.5 * np.median(base)
    assert np.median(ours) < 0.006


# --------------------------------------------------------------------- CLI
def test_predict_checkpoint_law_states_the_assumed_schedule(olmo, tmp_path, capsys):
    """`delphi predict --law chinchilla-ckpt` on the OLMo ladder says which schedule it
    assumed for the target, and a WSD schedule to zero predicts a lower loss. The CLI reads
    the module's loaded ladder as a Parquet file (in tmp_path, not the repo; the columns the
    law reads): the same runs and checkpoints, without re-parsing the 30 W&B histories per
    call (the same forecasts as `delphi predict olmo-ladder`, checked when this was written;
    the OLMo reader is tested by the reader tests)."""
    import json
    path = tmp_path / "olmo.parquet"
    olmo.table[["run", "step", "loss", "tokens", "lr", "peak_lr", "batch_size", "flops",
                "final", "params"]].to_parquet(path)
    code = main(["predict", str(path), "--law", "chinchilla-ckpt", "--target-params", "7e9",
                 "--target-tokens", "1.4e11", "--interval", "none", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and d["law"] == "chinchilla-ckpt"
    assert any("ends like the ladder's finished runs (final LR ratio h = 0.1" in n
               for n in d["notes"])
    # A WSD schedule decaying to zero ends at h = 0: no un-annealed gap, a lower loss.
    code = main(["predict", str(path), "--law", "chinchilla-ckpt", "--target-params", "7e9",
                 "--target-tokens", "1.4e11", "--interval", "none", "--json",
                 "--target-schedule", "wsd:warmup=100,decay=0.2,final=0"])
    w = json.loads(capsys.readouterr().out)
    assert code == 0 and w["target"]["schedule"] == "wsd:warmup=100,decay=0.2,final=0"
    assert w["prediction"]["loss"] < d["prediction"]["loss"]


def test_predict_at_a_mistuned_peak_lr_costs_loss(misfitting_final, tmp_path, capsys):
    """`delphi predict --law chinchilla-lr` on the (Mis)Fitting sweeps: without a target peak
    LR it assumes the fitted optimum (and says so); at 0.02 the loss is higher by exactly the
    law's mis-tuning term K (ln(0.02 / eta*))^2, eta* from the parameters it reports. The
    final points are written to a CSV without the nine 100-step runs, which delphi.fit would
    exclude as off-trend one global search at a time (ten 5-D searches a fit; that path on
    these sweeps is test_lr_forms.py's chosen-form test); the CSV is in tmp_path, not the
    repo."""
    import json
    fin, _ = misfitting_final.final_points()
    keep = fin[~fin["run"].str.contains("-T100-")]
    assert len(fin) - len(keep) == 9
    keep[["run", "params", "tokens", "flops", "loss", "peak_lr"]].to_csv(
        tmp_path / "sweeps.csv", index=False)
    args = ["predict", str(tmp_path / "sweeps.csv"), "--law", "chinchilla-lr",
            "--target-params", "4e8", "--target-tokens", "8e9", "--interval", "none", "--json"]
    assert main(args) == 0
    best = json.loads(capsys.readouterr().out)
    # No run is excluded. The sweeps' shortest runs (250-500 steps) are non-monotone in N at
    # one D and peak LR (a larger model ends higher): named off-trend, kept in the fit.
    assert not any("excluded" in n for n in best["notes"]
                   if not n.startswith("off-trend rung")), best["notes"]
    assert all("non-monotone" in r["flagged_by"] for r in best["off_trend"]["rungs"])
    assert any("assumed the fitted optimum" in n for n in best["notes"])
    assert main(args + ["--target-peak-lr", "0.02"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["target"]["peak_lr"] == 0.02
    p = best["params"]
    assert off["params"] == p            # the same fit; only the target differs
    u = np.log(0.02 / float(CHINCHILLA_LR.optimal_lr(p, 4e8, 8e9)))
    assert abs(u) > 1                    # 0.02 is far from the optimum (about 0.0013)
    assert off["prediction"]["loss"] - best["prediction"]["loss"] == pytest.approx(
        p["K"] * u ** 2, rel=1e-6)


def test_hparams_cli_recommends_a_peak_lr(data_dir, capsys):
    import json
    code = main(["hparams", "misfitting2025-final", "--law", "steplaw", "--target-params", "1e9",
                 "--target-tokens", "2e10", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert code == 0 and 1e-5 < d["recommendation"]["peak_lr"] < 1e-1
    assert d["recommendation"]["batch_size"] is None  # the sweeps never vary the batch


# --------------------------------------------------------------------- vectorised evaluation
def _multi_run_inputs():
    specs = [Schedule.parse(s, peak_lr=3e-3, total_steps=t) for s, t in
             (("cosine:warmup=50,final=0.1", 1200), ("wsd:warmup=50,decay=0.3,final=0", 900),
              ("constant:warmup=50", 700))]
    x, _ = curves(specs, 25, ANNEALING, {"L0": 2.8, "A": 0.45, "C": 0.35, "alpha": 0.55})
    order = np.random.default_rng(0).permutation(len(x["S1"]))  # rows of runs interleaved
    return {k: (v[order] if isinstance(v, np.ndarray) else v) for k, v in x.items()}


@pytest.mark.parametrize("law, thetas", [
    (MULTIPOWER, np.array([[0.5, 2.0, 0.6, 0.5], [0.1, 0.02, 2.5, 0.0], [1.5, 80.0, 0.05, 1.4],
                           [0.7, 1e-6, 1e-3, 3.0]])),
    (ANNEALING, np.array([[0.0], [0.55], [1.7]])),
])
def test_curve_law_grid_and_batch_equal_log_basis(law, thetas):
    x = law.check_inputs(_multi_run_inputs(), what="ladder")
    grid = law.log_basis_grid(thetas, x)
    logphi, dlogphi = law.log_basis_batch(thetas, x)
    for i, theta in enumerate(thetas):
        one, done = law.log_basis(theta, x)
        np.testing.assert_allclose(grid[i], one, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(logphi[i], one, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(dlogphi[i], done, rtol=1e-12, atol=1e-300)


def test_chinchilla_ckpt_grid_and_batch_equal_log_basis():
    rng = np.random.default_rng(8)
    x = {"params": 10 ** rng.uniform(7, 9, 60), "tokens": 10 ** rng.uniform(9, 11, 60),
         "h": np.r_[0.0, rng.uniform(0.0, 1.0, 59)]}
    thetas = np.array([[0.3, 0.3, 1.5], [0.0, 2.0, 0.0], [1.2, 0.1, 4.0]])
    grid = CHINCHILLA_CKPT.log_basis_grid(thetas, x)
    logphi, dlogphi = CHINCHILLA_CKPT.log_basis_batch(thetas, x)
    for i, theta in enumerate(thetas):
        with np.errstate(invalid="ignore"):
            one, done = CHINCHILLA_CKPT.log_basis(theta, x)
        np.testing.assert_allclose(grid[i], one, rtol=1e-12)
        np.testing.assert_allclose(logphi[i], one, rtol=1e-12)
        np.testing.assert_allclose(dlogphi[i], done, rtol=1e-12)


def test_multipower_log_basis_gradient_vs_finite_differences():
    x = MULTIPOWER.check_inputs(_multi_run_inputs(), what="ladder")
    theta = np.array([0.5, 2.0, 0.6, 0.5])
    logphi, dlogphi = MULTIPOWER.log_basis(theta, x)
    ok = np.isfinite(logphi[:, 2])
    for j in range(4):
        h = 1e-6
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        with np.errstate(invalid="ignore"):   # -inf - -inf where LD = 0: masked out below
            fd = (MULTIPOWER.log_basis(up, x)[0] - MULTIPOWER.log_basis(down, x)[0]) / (2 * h)
        np.testing.assert_allclose(dlogphi[ok, :, j][:, 1:], fd[ok][:, 1:], rtol=1e-5,
                                   atol=1e-8)
    with pytest.raises(delphi.LawError, match="beta"):
        MULTIPOWER.log_basis(np.array([0.5, 2.0, -0.1, 0.5]), x)


def test_lr_ratio_vectorised_equals_features_per_run():
    from delphi.law_inputs import lr_ratio
    rows = []
    for i, total in enumerate((400, 400, 650, 1000)):
        steps = np.arange(20, total + 1, 20)
        rows.append(pd.DataFrame({"run": f"r{i}", "step": steps, "loss": 3.0, "params": 1e8,
                                  "tokens": steps * 1e6, "peak_lr": 1e-3 * (i + 1),
                                  "total_steps": total}))
    ladder = delphi.Ladder(pd.concat(rows, ignore_index=True), name="t",
                           schedule="cosine:warmup=30,final=0.1")
    t = ladder.table.sample(frac=1.0, random_state=0).reset_index(drop=True)
    h = lr_ratio(ladder, t)
    for run, g in t.groupby("run"):
        sched = Schedule.parse(ladder.schedule, peak_lr=float(g["peak_lr"].iloc[0]),
                               total_steps=int(g["total_steps"].iloc[0]))
        expected = features(sched, g["step"].to_numpy(np.int64))["h"]
        np.testing.assert_allclose(h[g.index.to_numpy()], expected, rtol=1e-14)


def test_complete_many_reports_errors_and_matches_complete(tmp_path):
    manifest, _ = synthetic_rung(tmp_path)
    ladder = delphi.load_ladder(str(manifest))
    out = delphi.complete_many(ladder, ["d2048", "nope"], "annealing", n_jobs=1)
    assert [r for r, _ in out] == ["d2048", "nope"]
    one = complete(ladder, "d2048", "annealing")
    assert out[0][1].loss == one.loss
    assert isinstance(out[1][1], str) and "unknown run" in out[1][1]
    # At half the run the cosine decay has barely begun: both paths warn that its response
    # is not identified by the checkpoints, and still agree.
    decay = r"run 'd2048': the LR-decay response is not identified"
    with pytest.warns(FitWarning, match=decay):
        half_many = delphi.complete_many(ladder, law="annealing", upto_fraction=0.5)
    with pytest.warns(FitWarning, match=decay):
        half_one = complete(ladder, "d2048", "annealing", upto_fraction=0.5)
    assert half_many[0][1].loss == half_one.loss
    with pytest.raises(delphi.LawError):
        delphi.complete_many(ladder, ["d2048"], "no-such-law")
