"""The forecast pipeline (issue 23, items 2 and 3): predict as stages that share one fit across
targets, and findings as typed records rendered alike by the report, the JSON and the
registry."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi import Ladder
from delphi.core.findings import CODES, Finding
from delphi.forecasting import forecast as fc_module
from delphi.forecasting.forecast import (fit_stage, forecast_from_fit, interval_stage,
                                         point_stage)


def _ladder(nb: int = 8, noise: float = 0.003, seed: int = 1) -> Ladder:
    """``nb`` compute-optimal runs (20 tokens per parameter) half a decade apart, on the
    Chinchilla law of Hoffmann et al. 2022 (Eq. 10's published fit), seeded log noise."""
    rng = np.random.default_rng(seed)
    c = 1e18 * 10 ** (0.5 * np.arange(nb))
    n = np.sqrt(c / 120)
    d = 20 * n
    y = (1.69 + 406.4 * n ** -0.34 + 410.7 * d ** -0.28) * np.exp(rng.normal(0, noise, nb))
    return Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(nb)], "params": n, "tokens": d,
                                "flops": 6 * n * d, "loss": y}), name="pipe")


TARGETS = [{"flops": 1e22}, {"flops": 3e22}, {"flops": 1e23}]


@pytest.fixture(scope="module")
def ladder():
    return _ladder()


@pytest.fixture(scope="module")
def separate(ladder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [delphi.predict(ladder, t, n_boot=40) for t in TARGETS]


def test_several_targets_share_one_fit_and_one_calibration(ladder, separate, monkeypatch):
    calls = {"fit": 0, "calibrate": 0, "bootstrap": 0}
    real_fit = fc_module.fit

    def counting_fit(*a, **k):
        calls["fit"] += 1
        return real_fit(*a, **k)

    real_cal, real_boot = fc_module.calibrate, fc_module.bootstrap

    def counting_cal(*a, **k):
        calls["calibrate"] += 1
        return real_cal(*a, **k)

    def counting_boot(*a, **k):
        calls["bootstrap"] += 1
        return real_boot(*a, **k)

    monkeypatch.setattr(fc_module, "fit", counting_fit)
    monkeypatch.setattr(fc_module, "calibrate", counting_cal)
    monkeypatch.setattr(fc_module, "bootstrap", counting_boot)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        together = delphi.predict(ladder, TARGETS, n_boot=40)
    assert calls == {"fit": 1, "calibrate": 1, "bootstrap": 1}
    # ... and each forecast is what its own call gives, to the bit
    for a, b in zip(together, separate):
        assert (a.loss, a.lower, a.upper) == (b.loss, b.lower, b.upper)
        assert a.findings == b.findings
        assert a.interval.method == b.interval.method


def test_numpy_scalars_and_pandas_series_are_targets_like_numbers_and_lists(ladder, separate):
    # a 0-d array (a value out of numpy arithmetic) crashed with "len() of unsized object";
    # a pandas Series was refused as "must be a positive finite number"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        one = delphi.predict(ladder, {"flops": np.array(1e22)}, n_boot=40)
        many = delphi.predict(ladder, {"flops": pd.Series([1e22, 3e22])}, n_boot=40)
    assert (one.loss, one.lower, one.upper) == (separate[0].loss, separate[0].lower,
                                                separate[0].upper)
    assert [(f.loss, f.lower, f.upper) for f in many] == [(f.loss, f.lower, f.upper)
                                                          for f in separate[:2]]


def test_stages_compose_to_predict(ladder, separate):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = fit_stage(ladder, "power")
        point = point_stage(fitted, TARGETS[0])
        band, made = interval_stage(fitted, point, n_boot=40)
        whole = forecast_from_fit(fitted, TARGETS[0], n_boot=40)
    assert fitted.fit.law.name == separate[0].fit.law.name == "power"
    assert point.loss == separate[0].loss == whole.loss
    assert point.extrapolation == pytest.approx(1e22 / float(ladder.table["flops"].max()))
    # stage 3 is the fit's own interval; stage 4 (calibration) widens it
    assert band is not None and band.method == "bootstrap"
    assert whole.interval.method in ("calibrated", "reference")
    assert whole.upper / whole.lower > band.upper / band.lower
    assert all(isinstance(f, Finding) for f in made)
    assert (whole.lower, whole.upper) == (separate[0].lower, separate[0].upper)


def test_predict_has_no_private_or_internal_arguments():
    import inspect
    params = inspect.signature(delphi.predict).parameters
    assert not [p for p in params if p.startswith("_")]
    assert not hasattr(fc_module, "_predict")     # no twin of predict with internal settings


def test_findings_are_typed_and_json_keeps_the_strings(ladder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = delphi.predict(ladder, {"flops": 1e27}, fixed={"E": 1.69}, interval="delta")
    codes = [x.code for x in f.findings]
    assert "far-extrapolation" in codes and "fixed-parameters" in codes
    far = next(x for x in f.findings if x.code == "far-extrapolation")
    assert far.severity == "warning" and far.subject == "target"
    fixed = next(x for x in f.findings if x.code == "fixed-parameters")
    assert fixed.severity == "note" and fixed.subject == "E"
    assert all(x.code in CODES for x in f.findings)
    # warnings/notes are the findings' messages by severity, in order
    assert f.warnings == tuple(x.message for x in f.findings if x.severity == "warning")
    assert f.notes == tuple(x.message for x in f.findings if x.severity == "note")
    d = json.loads(json.dumps(f.to_dict()))
    assert d["warnings"] == list(f.warnings) and d["notes"] == list(f.notes)
    assert [x["message"] for x in d["findings"]] == [x.message for x in f.findings]
    assert {x["code"] for x in d["findings"]} == set(codes)
    # the text report prints each message once, by severity
    text = f.report()
    assert f"warning    {far.message}" in text and f"note       {fixed.message}" in text


def test_no_interval_is_a_finding_and_the_reference_class_fills_it(ladder):
    small = ladder.select(runs=ladder.runs[:3])       # 3 runs, 3 parameters: no dof
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted = fit_stage(small, "power")
        point = point_stage(fitted, {"flops": 1e22})
        band, made = interval_stage(fitted, point)
        f = forecast_from_fit(fitted, {"flops": 1e22}, off_trend=False)
    assert band is None and [x.code for x in made] == ["no-interval"]
    # the forecast has the reference interval; the fit's own missing one is a note about it
    assert f.interval is not None and f.interval.method == "reference"
    assert not [x for x in f.findings if x.code == "no-interval"]
    assert any(x.message.startswith("no interval from the fit alone") for x in f.findings)
    from delphi.presentation.plot import caption
    assert "no interval" not in caption(f).split("Forecast", 1)[1].split(".")[0]


def test_the_registry_records_the_findings(ladder, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f = delphi.predict(ladder, {"flops": 1e27}, interval="delta")
        reg = delphi.Registry(tmp_path / "r.jsonl")
        entry = reg.register(f, id="pipe-1", author="test")
    got = entry.forecast.findings
    assert [(r.code, r.severity, r.subject, r.message) for r in got] == \
        [(x.code, x.severity, x.subject, x.message) for x in f.findings]
    assert delphi.Registry(tmp_path / "r.jsonl").verify().ok
    line = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    assert line["forecast"]["findings"][0]["code"] == f.findings[0].code


def test_a_finding_refuses_an_unknown_code_or_severity():
    with pytest.raises(ValueError, match="unknown finding code"):
        Finding("made-up", "note", "x")
    with pytest.raises(ValueError, match="severity"):
        Finding("other", "info", "x")
    assert str(Finding.note("other", "hello")) == "hello"
    assert math.isfinite(len(CODES))
