"""ScalingLawFitter as a scikit-learn-style estimator, and warnings that point at the caller.

Issue 12 ("Python API"): get_params/set_params/score, predict from arrays, and every warning
reached from delphi's public entry points attributed to the user's line (stacklevel).
"""

from __future__ import annotations

import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi import FitWarning, LadderWarning, ScalingLawFitter, TargetError
from delphi.errors import DelphiWarning, user_stacklevel, warn_user

# Truth of the simulated power ladder: L = E + A C^-alpha.
E0, A0, ALPHA0 = 1.8, 150.0, 0.12
FLOPS = np.logspace(18, 21, 8)


def power_frame() -> pd.DataFrame:
    """Eight noise-free runs on the power law above (one per compute budget)."""
    return pd.DataFrame({"run": [f"c{i}" for i in range(8)], "flops": FLOPS,
                         "loss": E0 + A0 * FLOPS ** -ALPHA0})


def power_truth(c) -> np.ndarray:
    return E0 + A0 * np.asarray(c, dtype=float) ** -ALPHA0


@pytest.fixture(scope="module")
def power_est() -> ScalingLawFitter:
    return ScalingLawFitter("power").fit(power_frame())


# ----------------------------------------------------------------- get_params / set_params
def test_get_params_returns_the_init_arguments():
    bounds = {"alpha": (0.01, 1.0)}
    est = ScalingLawFitter("power", fixed={"E": 1.5}, bounds=bounds, seed=7)
    expected = {"law": "power", "fixed": {"E": 1.5}, "bounds": bounds, "delta": 1e-3,
                "fit_max_flops": None, "include_unfinished": False,
                "divergence_threshold": 0.10, "seed": 7}
    assert est.get_params() == expected
    assert est.get_params(deep=False) == expected
    assert est.get_params()["bounds"] is bounds       # the stored object, as clone expects
    # Exactly the keyword names __init__ takes, so ScalingLawFitter(**get_params()) rebuilds it.
    assert set(expected) == set(inspect.signature(ScalingLawFitter).parameters)


def test_set_params_changes_config_and_returns_self():
    est = ScalingLawFitter("power")
    assert est.set_params(law="chinchilla", seed=3, fixed={"E": 1.7}) is est
    assert (est.law, est.seed, est.fixed) == ("chinchilla", 3, {"E": 1.7})
    assert repr(est) == "ScalingLawFitter(fixed={'E': 1.7}, law='chinchilla', seed=3)"


def test_set_params_unknown_name_names_it_and_the_valid_ones():
    est = ScalingLawFitter("power")
    with pytest.raises(ValueError) as info:
        est.set_params(sed=1)
    message = str(info.value)
    assert "'sed'" in message
    for name in ("bounds", "delta", "divergence_threshold", "fit_max_flops", "fixed",
                 "include_unfinished", "law", "seed"):
        assert f"'{name}'" in message
    assert est.seed == 0                               # nothing was set


def test_rebuilt_from_get_params_fits_the_same(power_est):
    # What sklearn.base.clone does, without scikit-learn: a new object from get_params.
    twin = type(power_est)(**power_est.get_params(deep=False))
    assert twin.get_params() == power_est.get_params() and not hasattr(twin, "fit_")
    twin.fit(power_frame())
    assert twin.params_ == power_est.params_


def test_sklearn_clone_and_cross_validation():
    # scikit-learn is a test extra (pyproject), not a dependency of delphi itself
    from sklearn.base import clone
    from sklearn.model_selection import cross_val_score
    est = ScalingLawFitter("power", fixed={"E": E0}, seed=2)
    copy = clone(est)
    assert copy is not est and copy.get_params() == est.get_params()
    X, y = pd.DataFrame({"flops": FLOPS}), pd.Series(power_truth(FLOPS))
    scores = cross_val_score(est, X, y, cv=2)
    assert scores.shape == (2,)
    assert np.all(scores > 0.999)                     # noise-free data of the fitted law


def test_score_takes_what_fit_takes_so_cross_validation_works_on_a_ladder_table():
    # fit(ladder) needs no y, so neither may score: cross_val_score(est, ladder.table) used to
    # return NaN for every fold (score() required y).
    from sklearn.model_selection import KFold, cross_val_score
    frame = power_frame()
    est = ScalingLawFitter("power", fixed={"E": E0}, seed=2).fit(frame)
    X, y = pd.DataFrame({"flops": frame["flops"]}), frame["loss"]
    assert est.score(frame) == est.score(X, y)
    scores = cross_val_score(ScalingLawFitter("power", fixed={"E": E0}, seed=2), frame,
                             cv=KFold(2, shuffle=True, random_state=0))
    assert not np.isnan(scores).any() and np.all(scores > 0.999)


# ----------------------------------------------------------------- predict
def test_predict_accepts_dict_dataframe_series_list_and_arrays(power_est):
    c = [1e22, 3e22, 1e23]
    expected = power_truth(c)           # the law that generated the ladder, written out here
    forms = [{"flops": c}, {"flops": np.array(c)}, pd.DataFrame({"flops": c, "other": 1.0}),
             pd.Series(c), c, np.array(c), np.array(c).reshape(-1, 1), tuple(c)]
    for x in forms:
        got = power_est.predict(x)
        assert got.shape == (3,)
        np.testing.assert_allclose(got, expected, rtol=1e-4)
    assert power_est.predict(1e22).shape == (1,)


def test_predict_chinchilla_from_dataframe_and_broadcast_scalar():
    n = np.array([1e7, 3e7, 1e8, 3e8, 1e9, 1e7, 3e7, 1e8, 3e8])
    d = 20 * n * np.array([1, 1, 1, 1, 1, 4, 4, 4, 4])
    y = 1.7 + 400 / n ** 0.34 + 410 / d ** 0.28
    est = ScalingLawFitter("chinchilla").fit(pd.DataFrame({"params": n, "tokens": d}), y)
    target_n, target_d = np.array([7e9, 7e10]), 1.4e12
    expected = 1.7 + 400 / target_n ** 0.34 + 410 / target_d ** 0.28
    np.testing.assert_allclose(est.predict({"params": target_n, "tokens": target_d}), expected,
                               rtol=1e-4)
    frame = pd.DataFrame({"tokens": [target_d] * 2, "params": target_n})   # column order free
    np.testing.assert_allclose(est.predict(frame), expected, rtol=1e-4)


@pytest.mark.parametrize("x, fragments", [
    (pd.DataFrame({"flop": [1e22]}), ["'flops'", "DataFrame", "columns found: flop"]),
    ({"compute": [1e22]}, ["'flops'", "dict", "columns found: compute"]),
    ({"flops": [[1e22, 1e23]]}, ["'flops'", "shape (1, 2)"]),
    (np.ones((3, 2)), ["shape (3, 2)"]),
    ([1e22, -1.0, 0.0], ["'flops'", "row 1", "-1", "2 such row(s)"]),
    ({"flops": [1e22, np.nan]}, ["'flops'", "row 1", "nan"]),
    (["a lot"], ["cannot read the inputs as numbers"]),
])
def test_predict_bad_inputs_raise_target_error_naming_the_column(power_est, x, fragments):
    with pytest.raises(TargetError) as info:
        power_est.predict(x)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))


def test_predict_several_inputs_need_names_and_equal_lengths():
    est = ScalingLawFitter("chinchilla")
    est.fit_ = delphi.fit(delphi.load_ladder(pd.DataFrame({
        "run": list("abcdefghi"),
        "params": [1e7, 3e7, 1e8, 3e8, 1e9, 1e7, 3e7, 1e8, 3e8],
        "tokens": [2e8, 6e8, 2e9, 6e9, 2e10, 8e8, 2.4e9, 8e9, 2.4e10],
        "loss": [5.3, 4.3, 3.5, 3.0, 2.6, 4.9, 3.9, 3.2, 2.8]})), "chinchilla", identify=False)
    with pytest.raises(TargetError, match=r"reads params, tokens: pass a dict or DataFrame"):
        est.predict([7e10, 1e11])
    with pytest.raises(TargetError, match=r"different lengths: params 2, tokens 3"):
        est.predict({"params": [7e10, 1e11], "tokens": [1e12, 2e12, 3e12]})
    with pytest.raises(TargetError, match=r"no 'tokens' column"):
        est.predict(pd.DataFrame({"params": [7e10]}))


def test_predict_before_fit_is_an_attribute_error():
    with pytest.raises(AttributeError, match="not fitted yet"):
        ScalingLawFitter("power").predict([1e22])


# ----------------------------------------------------------------- score
def test_score_is_r2_of_log_loss(power_est):
    c = np.array([1e19, 1e20, 1e21, 1e22])
    offsets = np.array([0.02, -0.01, 0.03, -0.04])     # log(y / prediction), chosen
    p = power_est.params_
    predicted = p["E"] + p["A"] * c ** -p["alpha"]      # the power law, by its formula
    y = predicted * np.exp(offsets)
    log_y = np.log(y)
    expected = 1 - np.sum(offsets ** 2) / np.sum((log_y - log_y.mean()) ** 2)
    assert power_est.score(c, y) == pytest.approx(expected, rel=1e-9)
    assert power_est.score(pd.DataFrame({"flops": c}), pd.Series(y)) == pytest.approx(expected,
                                                                                       rel=1e-9)
    # A point of weight 0 counts as absent; weights 2 count as the point twice.
    w = np.array([1.0, 0.0, 1.0, 1.0])
    keep = w > 0
    assert power_est.score(c, y, sample_weight=w) == pytest.approx(
        power_est.score(c[keep], y[keep]), rel=1e-12)
    doubled = power_est.score(np.r_[c, c[:1]], np.r_[y, y[:1]])
    assert power_est.score(c, y, sample_weight=[2, 1, 1, 1]) == pytest.approx(doubled, rel=1e-12)


def test_score_on_the_training_data_of_an_exact_law_is_one(power_est):
    assert power_est.score(FLOPS, power_truth(FLOPS)) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("y, w, fragment", [
    ([2.0, 2.0, 2.0], None, "all 3 losses are equal"),
    ([2.0, 2.1], None, "y has shape (2,)"),
    ([2.0, -1.0, 2.2], None, "y row 1 is -1"),
    ([2.0, 2.1, 2.2], [1.0, 0.0, 0.0], "at least 2 points"),
    ([2.0, 2.1, 2.2], [1.0, -1.0, 1.0], "sample_weight row 1 is -1"),
])
def test_score_refuses_undefined_or_bad_data(power_est, y, w, fragment):
    with pytest.raises(TargetError) as info:
        power_est.score([1e19, 1e20, 1e21], y, sample_weight=w)
    assert fragment in str(info.value)


def test_fit_from_inputs_and_losses_equals_fit_from_the_ladder(power_est):
    X, y = pd.DataFrame({"flops": FLOPS}, index=[f"c{i}" for i in range(8)]), power_truth(FLOPS)
    est = ScalingLawFitter("power").fit(X, y)
    assert est.fit_.labels == tuple(f"c{i}" for i in range(8))     # runs named by the index
    for name, truth in {"E": E0, "A": A0, "alpha": ALPHA0}.items():
        assert est.params_[name] == pytest.approx(truth, rel=1e-4)
        assert est.params_[name] == pytest.approx(power_est.params_[name], rel=1e-9)


# ----------------------------------------------------------------- warnings' stacklevel
def recorded(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fn()
    return result, [w for w in caught if issubclass(w.category, DelphiWarning)]


def ladder_dn_too_low() -> pd.DataFrame:
    """Six runs whose tokens are 0.01 per parameter: a tokens column counted in sequences."""
    n = np.array([1e7, 2e7, 4e7, 8e7, 1.6e8, 3.2e8])
    return pd.DataFrame({"run": [f"r{i}" for i in range(6)], "params": n, "tokens": 0.01 * n,
                         "loss": 1.7 + 400 / n ** 0.34 + 410 / (20 * n) ** 0.28})


def pure_power_frame() -> pd.DataFrame:
    """A power law with no floor (E = 0) and 0.3% seeded noise: the fit puts E at its lower
    bound and the identification check warns that E is not identified."""
    rng = np.random.default_rng(0)
    return pd.DataFrame({"run": [f"c{i}" for i in range(8)], "flops": FLOPS,
                         "loss": A0 * FLOPS ** -ALPHA0 * np.exp(rng.normal(0, 0.003, 8))})


def assert_from_here(caught, category, fragment):
    assert any(issubclass(w.category, category) and fragment in str(w.message)
               for w in caught), [str(w.message) for w in caught]
    for w in caught:
        assert w.filename == __file__, (w.filename, str(w.message))


def test_load_ladder_warning_points_at_the_caller():
    _, caught = recorded(lambda: delphi.load_ladder(ladder_dn_too_low()))
    assert_from_here(caught, LadderWarning, "tokens per parameter (D/N) is below")


def test_fit_warning_at_a_bound_points_at_the_caller():
    fit, caught = recorded(lambda: delphi.fit(pure_power_frame(), "power"))
    assert fit.params["E"] == pytest.approx(0.0, abs=0.05)
    assert_from_here(caught, FitWarning, "not identified by the ladder")


def test_estimator_fit_warning_points_at_the_caller():
    # One level deeper than delphi.fit (ScalingLawFitter.fit -> fit -> identification).
    _, caught = recorded(lambda: ScalingLawFitter("power").fit(pure_power_frame()))
    assert_from_here(caught, FitWarning, "not identified by the ladder")


def test_predict_warnings_point_at_the_caller():
    # From the fit predict makes internally (one level deeper than delphi.fit) ...
    _, caught = recorded(lambda: delphi.predict(pure_power_frame(), {"flops": 1e24}, "power"))
    assert_from_here(caught, FitWarning, "not identified by the ladder")
    # ... and for a target 100x the largest N fitted (outside the ladder's design).
    n = np.array([1e7, 3e7, 1e8, 3e8, 1e9, 1e7, 3e7, 1e8, 3e8])
    d = 20 * n * np.array([1, 1, 1, 1, 1, 4, 4, 4, 4])
    frame = pd.DataFrame({"run": [f"r{i}" for i in range(9)], "params": n, "tokens": d,
                          "loss": 1.7 + 400 / n ** 0.34 + 410 / d ** 0.28})
    _, caught = recorded(lambda: delphi.predict(frame, {"params": 1e11, "tokens": 2e12},
                                                "chinchilla"))
    assert_from_here(caught, FitWarning, "outside the ladder's design")


def test_backtest_warning_points_at_the_caller():
    result, caught = recorded(lambda: delphi.backtest(ladder_dn_too_low(), "power",
                                                      fit_max_flops=1e15))
    assert [r.run for r in result.rows] == ["r4", "r5"]
    assert_from_here(caught, LadderWarning, "tokens per parameter (D/N) is below")


def test_warn_user_skips_delphi_frames_only():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        warn_user("from the test", FitWarning)
    (w,) = caught
    assert (w.filename, w.lineno, w.category) == (__file__, line, FitWarning)
    # Called from outside delphi, the level is that of the calling function itself.
    assert user_stacklevel() == 1


def test_every_delphi_warning_uses_the_computed_stacklevel():
    # A hand-counted stacklevel is right from one entry point and wrong from the others.
    root = Path(delphi.__file__).parent
    calls = 0
    for path in root.rglob("*.py"):
        text = path.read_text()
        for m in re.finditer(r"\bwarnings\.warn\((.*?)\)\n", text, flags=re.S):
            calls += 1
            assert "stacklevel=user_stacklevel()" in m.group(1), (path.name, m.group(0))
    assert calls >= 10


# ----------------------------------------------------------------- command line
def test_cli_reports_warnings_in_its_output_not_as_python_warnings(tmp_path, capsys):
    from delphi.cli import main
    csv = tmp_path / "runs.csv"
    ladder_dn_too_low().to_csv(csv, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DelphiWarning)   # one escaping would raise here
        code = main(["fit", str(csv), "--law", "power"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "tokens per parameter (D/N) is below" in out
    assert "LadderWarning" not in err and "Warning:" not in err
