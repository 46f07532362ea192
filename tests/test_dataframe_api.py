"""fit, predict, backtest and prefix_fits take a pandas DataFrame wherever they take a Ladder
(issue 12, Python API): read exactly as load_ladder reads it. (complete does too, but a bare
table carries no LR schedule unless it logs an lr column: not tested here.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.errors import LadderError


def _frame() -> pd.DataFrame:
    # L = 1.8 + 2 (C/1e17)^-0.3 at 8 budgets half a decade apart, 0.2% seeded noise
    c = 1e17 * 10 ** (0.5 * np.arange(8))
    rng = np.random.default_rng(3)
    loss = (1.8 + 2.0 * (c / 1e17) ** -0.3) * np.exp(rng.normal(0, 0.002, len(c)))
    return pd.DataFrame({"run": [f"r{i}" for i in range(len(c))], "flops": c, "loss": loss})


def test_fit_predict_backtest_take_a_dataframe_and_agree_with_a_ladder():
    df = _frame()
    lad = delphi.load_ladder(df)
    a, b = delphi.fit(df, "power"), delphi.fit(lad, "power")
    assert a.params == b.params and a.objective == b.objective
    fa = delphi.predict(df, {"flops": 1e22}, "power", interval="delta")
    fb = delphi.predict(lad, {"flops": 1e22}, "power", interval="delta")
    assert fa.loss == fb.loss and fa.ladder_sha256 == fb.ladder_sha256
    ba = delphi.backtest(df, "power", fit_max_flops=1e19)
    bb = delphi.backtest(lad, "power", fit_max_flops=1e19)
    assert [r.predicted for r in ba.rows] == [r.predicted for r in bb.rows]
    assert len(delphi.prefix_fits(df, "power").steps) == len(
        delphi.prefix_fits(lad, "power").steps)


def test_anything_else_is_a_ladder_error_naming_the_type():
    with pytest.raises(LadderError, match=r"got str; read it first: delphi.load_ladder"):
        delphi.fit("epoch-chinchilla", "power")
    with pytest.raises(LadderError, match="got list"):
        delphi.predict([1, 2, 3], {"flops": 1e22})


def test_a_dataframe_takes_metric_as_a_file_does(tmp_path):
    # Before: load_ladder(frame, metric="val_loss") ignored metric and asked for metric=NAME.
    df = _frame().rename(columns={"loss": "val_loss"})
    df.to_csv(tmp_path / "v.csv", index=False)
    from_frame = delphi.load_ladder(df, metric="val_loss")
    from_file = delphi.load_ladder(tmp_path / "v.csv", metric="val_loss")
    assert from_frame.metric == from_file.metric == "val_loss"
    assert list(from_frame.table["loss"]) == list(from_file.table["loss"])
    with pytest.raises(LadderError, match="column 'nope' \\(for loss\\) not found"):
        delphi.load_ladder(df, metric="nope")


def test_one_compute_budget_written_two_ways_is_one_level_without_a_numpy_warning():
    # 1e18 and 9.999999999999999e17 FLOPs: one budget; numpy divided 0 by 0 on it before
    df = pd.DataFrame({"run": ["a", "b", "c"], "params": [1e7, 2e7, 4e7],
                       "tokens": [1e18 / 6e7, 1e18 / 12e7, 1e18 / 24e7],
                       "flops": [1e18, 9.999999999999999e17, 1e18], "loss": [3.0, 2.9, 2.95]})
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        conv = delphi.load_ladder(df).flops_convention
    assert conv is not None and conv.drift is None


def test_the_api_says_when_it_leaves_out_a_manifests_predict_defaults():
    # Before (a new user): delphi.predict(load_ladder("marin-moe-535b"), ...) fitted E freely
    # and printed 2.0442, `delphi predict marin-moe-535b` (E = 1.5 from the manifest) 2.0414,
    # with no word on why.
    import warnings
    lad = delphi.load_ladder("marin-moe-535b")
    assert lad.predict_defaults == {"law": "power", "fixed": {"E": 1.5}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bare = delphi.predict(lad, {"flops": 2.61e24})
        given = delphi.predict(lad, {"flops": 2.61e24}, "power", fixed={"E": 1.5})
    said = [n for n in bare.notes if "sets defaults this call did not use" in n]
    assert said and "fixed={'E': 1.5}" in said[0]
    assert not [n for n in given.notes if "sets defaults" in n]
    assert round(given.loss, 4) == 2.0414


def test_a_coefficient_with_a_huge_standard_error_has_an_unbounded_wald_end():
    # Before: math.exp overflowed in Fit.to_dict (complete --law multipower --json on a
    # (Mis)Fitting run raised an InternalError OverflowError).
    from dataclasses import replace
    fit = delphi.fit(_frame(), "power")
    huge = replace(fit, stderr={**fit.stderr, "A": fit.params["A"] * 1e6}, identification=None)
    rows = {r["name"]: r for r in huge._param_rows()}
    assert rows["A"]["upper"] == float("inf") and rows["A"]["lower"] == 0.0
    import json
    json.dumps(delphi.core.records.jsonable(huge.to_dict()), allow_nan=False)
