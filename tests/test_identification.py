"""Degenerate and unidentified fits (issue 9, section 4): profiles, correlated pairs,
refusing to extrapolate a constant, never a zero-width interval, and the downstream answers
(optimal, plan) that rest on the N/D split."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from delphi.cli import main
from delphi.errors import FitError, FitWarning, IdentifiabilityError
from delphi.fitting import fit
from delphi.errors import DegenerateFitError, UnidentifiedError
from delphi.fitting.diagnostics import NOISE_FLOOR, noise_threshold
from delphi.forecast import predict
from delphi.ladder import Ladder
from delphi.optimal import compute_optimal
from delphi.planning import plan_ladder

CHI2_95 = 3.841458820694124   # chi-square(1) quantile at 0.95


def ladder_of(df: pd.DataFrame, name: str) -> Ladder:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Ladder(df, source="<test>", name=name)


def quiet_fit(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit(*args, **kwargs)


def flat_ladder(noise: float = 3e-4, n: int = 6, seed: int = 0) -> pd.DataFrame:
    """Losses 3.2 at every compute, times exp(N(0, noise)) (seeded)."""
    rng = np.random.default_rng(seed)
    c = 1e18 * 3.0 ** np.arange(n)
    loss = 3.2 * np.exp(rng.normal(0.0, noise, n)) if noise else np.full(n, 3.2)
    return pd.DataFrame({"run": [f"r{i}" for i in range(n)], "flops": c, "loss": loss})


# Chinchilla losses, exact, with every run at nearly the same D (2e10 and 2.02e10): the data
# term is almost a constant, so beta (and the floor) trade off with B and E.
E0, A0, B0, ALPHA0, BETA0 = 1.7, 400.0, 1500.0, 0.34, 0.28


def nearly_one_d() -> pd.DataFrame:
    n = np.repeat(np.logspace(7.5, 9.5, 6), 2)
    d = np.tile([2.0e10, 2.02e10], 6)
    loss = E0 + A0 / n ** ALPHA0 + B0 / d ** BETA0
    return pd.DataFrame({"run": [f"r{i}" for i in range(len(n))], "params": n, "tokens": d,
                         "flops": 6 * n * d, "loss": loss})


def pure_power(noise: float = 2e-4, seed: int = 1) -> pd.DataFrame:
    """L = A C^-alpha (no floor), 10 rungs 1e18..1e21, log-normal noise (seeded)."""
    rng = np.random.default_rng(seed)
    c = np.logspace(18, 21, 10)
    loss = 40.0 * c ** -0.05 * np.exp(rng.normal(0.0, noise, len(c)))
    return pd.DataFrame({"run": [f"p{i}" for i in range(len(c))], "flops": c, "loss": loss})


# ------------------------------------------------------------------------ the threshold
def test_noise_threshold_matches_least_squares_and_lad_limits():
    # sigma << delta: least squares, chi2 sigma^2 / 2.
    assert noise_threshold(1e-3, 1.0) == pytest.approx(CHI2_95 * 1e-6 / 2, rel=1e-9)
    # sigma >> delta: least absolute deviations, chi2 delta sigma sqrt(pi/2) / 2.
    assert noise_threshold(0.1, 1e-5) == pytest.approx(
        CHI2_95 * 1e-5 * 0.1 * math.sqrt(math.pi / 2) / 2, rel=1e-3)
    # A residual scale of 0 (an exact fit) uses the floor.
    assert noise_threshold(0.0, 1e-3) == pytest.approx(CHI2_95 * NOISE_FLOOR ** 2 / 2, rel=1e-6)


# ------------------------------------------------------------------------ degenerate fits
def test_flat_losses_are_a_degenerate_fit_and_predict_refuses_it():
    df = flat_ladder()
    with pytest.warns(FitWarning, match="degenerate fit"):
        f = fit(ladder_of(df, "flat"), "power")
    assert f.degenerate and "collapsed to a constant" in f.degenerate
    # The constant compared is the best constant under the Huber loss: with every residual
    # inside delta, the geometric mean of the losses.
    assert f.identification.constant == pytest.approx(math.exp(np.mean(np.log(df["loss"]))),
                                                      rel=1e-9)
    assert any(w.startswith("degenerate fit") for w in f.warnings)
    # With flat losses neither the exponent nor the floor is identified.
    assert set(f.unidentified) == {"E", "alpha"}
    with pytest.raises(DegenerateFitError, match="allow-degenerate") as err:
        predict(ladder_of(df, "flat"), {"flops": 1e23})
    assert isinstance(err.value, IdentifiabilityError) and isinstance(err.value, FitError)
    fc = predict(ladder_of(df, "flat"), {"flops": 1e23}, allow_degenerate=True)
    assert any(n.startswith("DEGENERATE FIT extrapolated on request") for n in fc.notes)


def test_rising_losses_leave_a_power_law_only_a_constant():
    # A power law in C can only fall: with rising losses its best fit is a constant.
    c = 1e18 * 3.0 ** np.arange(6)
    loss = [3.0, 3.05, 3.1, 3.15, 3.2, 3.25]
    f = quiet_fit(ladder_of(pd.DataFrame({"run": list("abcdef"), "flops": c, "loss": loss}),
                            "rising"), "power")
    assert f.degenerate
    # Residuals of 1-3% are all far beyond delta = 1e-3: the Huber constant is a median,
    # anywhere between the two middle losses.
    assert 3.1 - 1e-9 <= f.identification.constant <= 3.15 + 1e-9
    with pytest.raises(DegenerateFitError):
        predict(ladder_of(pd.DataFrame({"run": list("abcdef"), "flops": c, "loss": loss}),
                          "rising"), {"flops": 1e22})


def test_a_real_trend_is_not_degenerate():
    # Marin's MoE rungs fall by 0.3 nats over 1.5 decades: far beyond their noise.
    c = np.array([1e18, 3e18, 1e19, 3e19, 1e20, 3e20])
    loss = np.array([3.522, 3.339, 3.154, 3.000, 2.848, 2.725])
    f = quiet_fit(ladder_of(pd.DataFrame({"run": list("abcdef"), "flops": c, "loss": loss}),
                            "trend"), "power")
    assert not f.degenerate
    assert f.identification.constant_increase > f.identification.threshold


def test_identical_losses_never_give_a_zero_width_interval():
    df = flat_ladder(noise=0.0, n=10)
    for method in ("delta", "auto"):   # auto would bootstrap 10 runs: all resamples agree
        # E fixed: the law is A C^0 = 3.2 - E, an exact fit whose noise estimate is 0.
        fc = predict(ladder_of(df, "same"), {"flops": 1e23}, fixed={"E": 1.5},
                     allow_degenerate=True, interval=method)
        iv = fc.interval
        assert iv.method == "delta" and iv.noise == NOISE_FLOOR
        # New-run half-width in log at least t(0.95, dof) x the floored noise.
        q = stats.t.ppf(0.95, fc.fit.dof)
        assert math.log(iv.upper / iv.lower) >= 2 * q * NOISE_FLOOR * (1 - 1e-9)
        assert iv.mean_upper > iv.mean_lower
    assert any("fits the ladder exactly" in n for n in fc.notes)
    # E free: E and A both describe the constant (a singular direction): no interval, and
    # the note says why, rather than a zero-width one.
    fc = predict(ladder_of(df, "same"), {"flops": 1e23}, allow_degenerate=True,
                 interval="delta")
    assert fc.interval is None
    assert any(n.startswith("no interval") and "singular" in n for n in fc.notes)


def test_an_exact_law_gets_the_floored_noise_not_zero():
    c = np.logspace(18, 21, 10)
    loss = 1.6 + 40.0 * c ** -0.08
    fc = predict(ladder_of(pd.DataFrame({"run": [f"e{i}" for i in range(10)], "flops": c,
                                         "loss": loss}), "exact"), {"flops": 1e23},
                 interval="delta")
    assert not fc.fit.degenerate
    assert fc.interval.noise == NOISE_FLOOR and "raised to it" in fc.interval.noise_source
    assert fc.interval.upper > fc.interval.lower and fc.interval.mean_upper > fc.interval.mean_lower


# ------------------------------------------------------------------------ identification
def test_profile_interval_and_correlation_match_least_squares_by_hand():
    # With E fixed at 0, log L = log A - alpha log C is linear: inside delta the Huber fit is
    # least squares, its profile exactly quadratic and the covariance that of OLS.
    df = pure_power()
    f = quiet_fit(ladder_of(df, "pure"), "power", fixed={"E": 0.0}, delta=0.01)
    x, y = np.log(df["flops"].to_numpy()), np.log(df["loss"].to_numpy())
    slope, intercept = np.polyfit(x, y, 1)
    assert f.params["alpha"] == pytest.approx(-slope, rel=1e-6)
    resid = y - (intercept + slope * x)
    sigma = math.sqrt(resid @ resid / (len(x) - 2))
    assert sigma > NOISE_FLOOR                      # the floor does not enter
    half = math.sqrt(CHI2_95) * sigma / math.sqrt(np.sum((x - x.mean()) ** 2))
    lo, hi = f.identification.profiles["alpha"].within
    assert lo == pytest.approx(-slope - half, abs=1e-3 * half)
    assert hi == pytest.approx(-slope + half, abs=1e-3 * half)
    assert f.unidentified == {}
    # corr(log A, alpha) of OLS with columns (1, -x): mean(x) / sqrt(mean(x^2)).
    [(a, b, corr)] = f.correlated
    assert {a, b} == {"A", "alpha"}
    assert corr == pytest.approx(x.mean() / math.sqrt(np.mean(x ** 2)), rel=1e-6)
    assert corr > 0.95
    assert "correlated A~alpha" in f.report()
    block = f.to_dict()["fit"]["identification"]
    assert block["correlated"][0]["params"] == ["A", "alpha"]
    assert block["profiles"]["alpha"]["identified"] is True


def test_an_exponent_the_design_cannot_identify_is_reported_with_its_range():
    f = quiet_fit(ladder_of(nearly_one_d(), "one-d"), "chinchilla")
    assert not f.degenerate
    assert f.params["alpha"] == pytest.approx(ALPHA0, abs=1e-6)     # N varies: identified
    alpha = f.identification.profiles["alpha"]
    assert alpha.identified and alpha.within[0] < ALPHA0 < alpha.within[1]
    # beta: to first order the data fix the D term's level l = E + B D^-beta and slope
    # s = beta B D^-beta at the ladder's D; any beta keeps both by moving B and E, down to
    # where E reaches 0: beta_min = s / l. Above, nothing stops it before the bound 5.
    d_mid = math.sqrt(2.0e10 * 2.02e10)
    term = B0 * d_mid ** -BETA0
    beta_min = BETA0 * term / (E0 + term)
    beta = f.identification.profiles["beta"]
    assert not beta.identified and beta.open_ends == (False, True)
    assert beta.within[1] == 5.0
    assert beta.within[0] == pytest.approx(beta_min, abs=0.04)   # bisection resolution
    assert f.unidentified["beta"] == beta.within
    floor = f.identification.profiles["E"]
    assert floor.open_ends[0] and floor.within[0] == 0.0
    assert any("not identified by the ladder" in w and "beta in [" in w for w in f.warnings)


def test_optimal_refuses_an_unidentified_split_and_plan_carries_the_flag():
    lad = ladder_of(nearly_one_d(), "one-d")
    with pytest.raises(UnidentifiedError, match=r"rests on beta"):
        compute_optimal(lad, 1e22)
    alloc = compute_optimal(lad, 1e22, allow_unidentified=True)
    assert set(alloc.unidentified) == {"beta"}
    assert "UNIDENTIFIED split" in alloc.report()
    out = alloc.to_dict()
    assert out["identified"] is False and out["unidentified"]["beta"][1] == 5.0
    plan = plan_ladder(1e22, unidentified=alloc.unidentified)
    assert plan.unidentified == alloc.unidentified
    assert any("does not identify beta" in w for w in plan.warnings)
    assert plan.to_dict()["centre_identified"] is False


def test_identified_split_gives_an_allocation_without_flags(data_dir):
    from delphi.readers import load_ladder
    alloc = compute_optimal(load_ladder("epoch-chinchilla"), 1e24)
    assert not alloc.unidentified and alloc.to_dict()["identified"] is True


def test_the_epoch_chinchilla_ladder_is_identified(data_dir):
    from delphi.readers import load_ladder
    f = quiet_fit(load_ladder("epoch-chinchilla"), "chinchilla")
    ident = f.identification
    assert set(ident.profiles) == {"E", "alpha", "beta"}
    assert f.unidentified == {} and not f.degenerate
    for name, p in ident.profiles.items():
        lo, hi = p.within
        assert lo < f.params[name] < hi
        # The profile interval agrees with the Wald one to within a factor 2 (the objective
        # is close to quadratic on 240 points), and is far inside the admissible range.
        wald = 1.96 * f.stderr[name]
        assert 0.5 * wald < (hi - lo) / 2 < 2 * wald
        assert hi - lo < 0.05 * (p.scanned[1] - p.scanned[0])


# ------------------------------------------------------------------------ CLI
def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_refuses_a_degenerate_forecast_unless_allowed(tmp_path, capsys):
    path = tmp_path / "flat.csv"
    flat_ladder().to_csv(path, index=False)
    code, out, err = run(capsys, "predict", str(path), "--target-flops", "1e23")
    assert code == 1 and "degenerate" in err and "--allow-degenerate" in err and not out
    code, out, _ = run(capsys, "predict", str(path), "--target-flops", "1e23",
                       "--allow-degenerate", "--json")
    data = json.loads(out)
    assert code == 0 and data["fit"]["identification"]["degenerate"] is True
    assert sorted(data["fit"]["identification"]["unidentified"]) == ["E", "alpha"]
    assert any(n.startswith("DEGENERATE FIT") for n in data["notes"])
    code, out, _ = run(capsys, "predict", str(path), "--target-flops", "1e23",
                       "--allow-degenerate")
    assert code == 0 and "NOT IDENTIFIED" in out and "warning    degenerate fit" in out


def test_cli_reports_profiles_and_correlated_pairs(tmp_path, capsys):
    path = tmp_path / "pure.csv"
    pure_power().to_csv(path, index=False)
    code, out, _ = run(capsys, "fit", str(path), "--law", "power", "--floor", "0",
                       "--huber-delta", "0.01", "--json")
    ident = json.loads(out)["fit"]["identification"]
    assert code == 0 and ident["unidentified"] == []
    assert ident["correlated"][0]["params"] == ["A", "alpha"]
    assert ident["correlated"][0]["correlation"] > 0.95


def test_cli_optimal_refuses_and_plan_flags_an_unidentified_split(tmp_path, capsys):
    path = tmp_path / "one_d.csv"
    nearly_one_d().to_csv(path, index=False)
    code, out, err = run(capsys, "optimal", str(path), "--target-flops", "1e22")
    assert code == 1 and "beta" in err and "does not identify" in err
    code, out, _ = run(capsys, "optimal", str(path), "--target-flops", "1e22",
                       "--allow-unidentified", "--json")
    data = json.loads(out)
    assert code == 0 and data["identified"] is False and "beta" in data["unidentified"]
    code, out, _ = run(capsys, "plan", "--target-flops", "1e22", "--from", str(path), "--json")
    data = json.loads(out)
    assert code == 0 and "beta" in data["unidentified"]
    assert any("does not identify beta" in w for w in data["warnings"])
