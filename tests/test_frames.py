"""Results as pandas frames (issue 12, Python API): Fit.params_table(), Backtest.to_frame(),
PrefixFits.to_frame(), Forecast.to_frame(), and the ``parameters`` block of ``fit --json``.

Expected values are recomputed from the fit's covariance, its recorded profiles and the
dataclass rows, not read back from the frames' own code."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.analyses.backtest import Backtest, BacktestRow, PrefixFits, PrefixStep
from delphi.cli import main
from delphi.errors import FitWarning

Z95 = 1.959963984540054          # standard normal 97.5% quantile


def _chinchilla_frame(seed: int = 0) -> pd.DataFrame:
    # L = 1.7 + 400 N^-0.34 + 410 D^-0.28 on a 4 x 4 grid of N and D, 0.3% seeded noise
    rng = np.random.default_rng(seed)
    n = np.repeat([1e8, 3e8, 1e9, 3e9], 4)
    d = np.tile([2e9, 6e9, 2e10, 6e10], 4)
    loss = (1.7 + 400 * n ** -0.34 + 410 * d ** -0.28) * np.exp(rng.normal(0, 0.003, len(n)))
    return pd.DataFrame({"run": [f"r{i}" for i in range(len(n))], "params": n, "tokens": d,
                         "loss": loss})


def _power_frame() -> pd.DataFrame:
    # L = 1.8 + 2 (C/1e17)^-0.3 at 8 budgets half a decade apart, 0.2% seeded noise
    c = 1e17 * 10 ** (0.5 * np.arange(8))
    rng = np.random.default_rng(3)
    loss = (1.8 + 2.0 * (c / 1e17) ** -0.3) * np.exp(rng.normal(0, 0.002, len(c)))
    return pd.DataFrame({"run": [f"r{i}" for i in range(len(c))], "flops": c, "loss": loss})


@pytest.fixture(scope="module")
def chin_fit():
    return delphi.fit(delphi.load_ladder(_chinchilla_frame()), "chinchilla")


def _se_from_covariance(fit) -> dict[str, float]:
    # Engine coordinates: log c for coefficients (delta method back to c), exponents as is.
    out = {}
    for i, name in enumerate(fit.covariance_params):
        s = math.sqrt(fit.covariance[i, i])
        out[name] = fit.params[name] * s if name in ("E", "A", "B") else s
    return out


def test_params_table_columns_and_stderr_from_the_covariance(chin_fit):
    t = chin_fit.params_table()
    assert list(t.index) == ["E", "A", "B", "alpha", "beta"]
    assert list(t.columns) == ["value", "stderr", "lower", "upper", "interval", "fixed",
                               "at_bound", "linear"]
    se = _se_from_covariance(chin_fit)
    assert set(se) == {"E", "A", "B", "alpha", "beta"}
    for name, s in se.items():
        assert t.loc[name, "stderr"] == pytest.approx(s, rel=1e-12)
        assert t.loc[name, "value"] == chin_fit.params[name]
    # E, A, B are the law's coefficients (solved exactly); alpha, beta are exponents
    assert t["linear"].to_dict() == {"E": True, "A": True, "B": True, "alpha": False,
                                     "beta": False}
    assert not t["fixed"].any() and not t["at_bound"].any()


def test_params_table_uses_the_profile_intervals_and_wald_for_coefficients(chin_fit):
    t = chin_fit.params_table()
    prof = chin_fit.identification.profiles
    assert set(prof) == {"E", "alpha", "beta"}
    for name in ("E", "alpha", "beta"):
        assert t.loc[name, "interval"] == "profile"
        assert (t.loc[name, "lower"], t.loc[name, "upper"]) == prof[name].within
        assert t.loc[name, "lower"] < chin_fit.params[name] < t.loc[name, "upper"]
    se = _se_from_covariance(chin_fit)
    for name in ("A", "B"):
        # Wald in log c: c exp(+-1.96 s.e.(log c)); s.e.(log c) = sqrt(cov_kk)
        k = chin_fit.covariance_params.index(name)
        s_log = math.sqrt(chin_fit.covariance[k, k])
        v = chin_fit.params[name]
        assert t.loc[name, "interval"] == "wald"
        assert t.loc[name, "lower"] == pytest.approx(v * math.exp(-Z95 * s_log), rel=1e-9)
        assert t.loc[name, "upper"] == pytest.approx(v * math.exp(Z95 * s_log), rel=1e-9)
        assert se[name] == pytest.approx(v * s_log)


def test_params_table_wald_for_exponents_without_profiles():
    # fit_arrays makes no identification profiles: every interval is Wald
    df = _chinchilla_frame(1)
    fit = delphi.fit_arrays("chinchilla", {"params": df["params"].to_numpy(),
                                           "tokens": df["tokens"].to_numpy()},
                            df["loss"].to_numpy())
    assert fit.identification is None
    t = fit.params_table()
    assert set(t["interval"]) == {"wald"}
    for name in ("alpha", "beta"):
        k = fit.covariance_params.index(name)
        s = math.sqrt(fit.covariance[k, k])
        v = fit.params[name]
        assert t.loc[name, "lower"] == pytest.approx(v - Z95 * s, rel=1e-9)
        assert t.loc[name, "upper"] == pytest.approx(v + Z95 * s, rel=1e-9)


def test_params_table_marks_fixed_and_bound_parameters():
    lad = delphi.load_ladder(_chinchilla_frame())
    fixed = delphi.fit(lad, "chinchilla", fixed={"E": 1.7})
    # the data's alpha is about 0.31-0.34: an upper bound of 0.2 binds, and the profile of
    # alpha stays flat up to it
    with pytest.warns(FitWarning, match=r"not identified by the ladder: .* for alpha in "
                                        r".*\(reaches the upper end of its range \[0, 0\.2\]\)"):
        bound = delphi.fit(lad, "chinchilla", bounds={"alpha": (0.0, 0.2)})
    t = fixed.params_table()
    assert t.loc["E"].to_dict() == {"value": 1.7, "stderr": 0.0, "lower": 1.7, "upper": 1.7,
                                    "interval": "fixed", "fixed": True, "at_bound": False,
                                    "linear": True}
    assert list(t.index[t["fixed"]]) == ["E"]
    assert (t.loc[["A", "B", "alpha", "beta"], "stderr"] > 0).all()
    b = bound.params_table()
    assert b.loc["alpha", "value"] == pytest.approx(0.2)
    assert list(b.index[b["at_bound"]]) == ["alpha"]
    # no curvature-based s.e. at a bound: NaN, but the profile still gives an interval that
    # reaches the bound
    assert math.isnan(b.loc["alpha", "stderr"])
    assert b.loc["alpha", "interval"] == "profile"
    assert b.loc["alpha", "upper"] == pytest.approx(0.2)


def test_params_table_says_none_when_no_standard_error_exists():
    # 3 points, 3 free parameters: no residual dof, so no s.e.; fit_arrays has no profiles
    c = np.array([1e18, 1e19, 1e20])
    fit = delphi.fit_arrays("power", {"flops": c}, 2.0 + 50 * c ** -0.1)
    assert fit.dof == 0
    t = fit.params_table()
    assert list(t["interval"]) == ["none"] * 3
    assert t[["stderr", "lower", "upper"]].isna().all().all()
    d = fit.to_dict()["fit"]["parameters"]
    assert d["alpha"]["stderr"] is None and d["alpha"]["interval"] == "none"
    json.dumps(d, allow_nan=False)


def test_to_dict_parameters_block_matches_the_table(chin_fit):
    d = chin_fit.to_dict()["fit"]["parameters"]
    t = chin_fit.params_table()
    assert list(d) == list(t.index)
    for name, row in d.items():
        assert row == t.loc[name].to_dict()


def test_backtest_to_frame_rows_are_the_dataclass_rows():
    bt = delphi.backtest(delphi.load_ladder(_power_frame()), "power", fit_max_flops=1e19)
    frame = bt.to_frame()
    fields = ["run", "flops", "params", "tokens", "actual", "predicted", "lower", "upper",
              "rel_error", "inside", "fold"]
    assert list(frame.columns) == fields
    # runs above 1e19 FLOPs: budgets 10^19.5 .. 10^20.5 (r5, r6, r7)
    assert list(frame["run"]) == ["r5", "r6", "r7"] == [r.run for r in bt.rows]
    assert frame.to_dict("records") == [{f: getattr(r, f) for f in fields} for r in bt.rows]
    assert list(frame["rel_error"]) == pytest.approx(
        [(r.actual - r.predicted) / r.predicted for r in bt.rows])


def test_backtest_to_frame_of_hand_made_rows_and_of_none():
    rows = [BacktestRow("a", 1e20, None, None, 3.0, 2.9, None, None, 0.1 / 2.9, None, "f"),
            BacktestRow("b", 1e21, None, None, 2.5, 2.6, 2.4, 2.8, -0.1 / 2.6, True, "f")]
    frame = Backtest(law="power", design="cut", rows=rows, level=0.9).to_frame()
    assert frame.shape == (2, 11)
    assert frame.loc[1, "upper"] == 2.8 and bool(frame.loc[1, "inside"]) is True
    assert frame.loc[0, "inside"] is None
    empty = Backtest(law="power", design="cut", rows=[], level=0.9).to_frame()
    assert empty.shape == (0, 11)


def test_prefix_fits_to_frame_hand_made():
    steps = [PrefixStep(1e19, 4, {"E": 1.5, "A": 2.0, "alpha": 0.3}, {"A": 0.2, "alpha": 0.01},
                        2.1, 0.05, True, ("w",)),
             PrefixStep(1e20, 5, {"E": 1.5, "A": 2.2, "alpha": 0.31}, {"A": 0.1}, 2.05, None,
                        False)]
    pf = PrefixFits(law="power", target={"flops": 1e22}, target_label="C = 1e22", steps=steps,
                    drift={"A": {}, "alpha": {}, "forecast": {}}, window=4, n_se=2.0)
    frame = pf.to_frame()
    assert list(frame.columns) == ["max_flops", "n_runs", "E", "A", "alpha", "A_se",
                                   "alpha_se", "forecast", "forecast_se", "converged",
                                   "n_warnings"]
    assert list(frame["A"]) == [2.0, 2.2] and list(frame["A_se"]) == [0.2, 0.1]
    assert frame.loc[0, "alpha_se"] == 0.01 and math.isnan(frame.loc[1, "alpha_se"])
    assert frame.loc[0, "forecast_se"] == 0.05 and math.isnan(frame.loc[1, "forecast_se"])
    assert list(frame["n_warnings"]) == [1, 0] and list(frame["converged"]) == [True, False]


def test_prefix_fits_to_frame_follows_the_steps():
    pf = delphi.prefix_fits(delphi.load_ladder(_power_frame()), "power")
    frame = pf.to_frame()
    assert len(frame) == len(pf.steps) >= 2
    assert list(frame["max_flops"]) == sorted(frame["max_flops"])
    assert list(frame["forecast"]) == [s.forecast for s in pf.steps]
    assert list(frame["alpha"]) == [s.params["alpha"] for s in pf.steps]
    assert list(frame["n_runs"]) == [s.n_runs for s in pf.steps]


def test_forecast_to_frame():
    df = _power_frame()
    fc = delphi.predict(delphi.load_ladder(df), {"flops": 1e22, "name": "big"}, "power",
                        interval="delta")
    bare = delphi.predict(delphi.load_ladder(df), {"flops": 1e22}, "power", interval=None)
    frame = fc.to_frame()
    assert frame.shape[0] == 1
    row = frame.iloc[0]
    assert row["target"] == "big" and row["flops"] == 1e22
    assert row["params"] is None and row["tokens"] is None
    assert row["loss"] == fc.loss and row["unit"] == "nats/token" and row["law"] == "power"
    iv = fc.interval
    assert (row["lower"], row["upper"], row["mean_lower"], row["mean_upper"], row["level"],
            row["method"]) == (iv.lower, iv.upper, iv.mean_lower, iv.mean_upper, iv.level,
                               "delta")
    assert row["lower"] < row["loss"] < row["upper"]
    # extrapolation: target compute over the largest fitted run's, 1e22 / 10^20.5
    assert row["extrapolation"] == pytest.approx(1e22 / df["flops"].max())
    assert row["n_warnings"] == len(fc.warnings)
    assert row["n_fit_warnings"] == len(fc.fit.warnings)
    b = bare.to_frame().iloc[0]
    assert bare.interval is None and b["method"] is None
    assert b[["lower", "upper", "mean_lower", "mean_upper", "level"]].isna().all()
    both = pd.concat([frame, bare.to_frame()], ignore_index=True)
    assert list(both["loss"]) == [fc.loss, bare.loss]


def test_cli_fit_json_has_the_parameters_table(tmp_path, capsys):
    path = tmp_path / "ladder.csv"
    _chinchilla_frame().to_csv(path, index=False)
    code = main(["fit", str(path), "--law", "chinchilla", "--fix", "E=1.7", "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    fit = json.loads(out)["fit"]
    p = fit["parameters"]
    assert list(p) == ["E", "A", "B", "alpha", "beta"]
    assert p["E"] == {"value": 1.7, "stderr": 0.0, "lower": 1.7, "upper": 1.7,
                      "interval": "fixed", "fixed": True, "at_bound": False, "linear": True}
    for name in ("alpha", "beta"):
        assert p[name]["interval"] == "profile"
        assert [p[name]["lower"], p[name]["upper"]] == \
            fit["identification"]["profiles"][name]["interval"]
    a = p["A"]
    assert a["interval"] == "wald" and a["stderr"] == fit["stderr"]["A"]
    assert a["lower"] == pytest.approx(a["value"] * math.exp(-Z95 * a["stderr"] / a["value"]))
