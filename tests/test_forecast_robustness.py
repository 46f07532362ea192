"""Issue 9, section 4: pinned floors, off-trend rungs and drift across nested fits.

Expected values come from an independent Huber fit written here with scipy's
``least_squares(loss="huber")`` (the same objective, another optimiser and code path), or
from a ladder built from a known law.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import least_squares

from delphi.analyses.backtest import _steady_drift, prefix_fits
from delphi.cli import main
from delphi.errors import FitError, FitWarning, LawError
from delphi.forecast import predict
from delphi.ladder import Ladder
from delphi.robustness import OFF_TREND_MIN, find_off_trend

from bundled import expect_warnings

DELTA = 1e-3  # delphi's default Huber delta on log residuals

# Issue 9, section 4: the first rung is another architecture (a shallow dense model).
OFF_TREND_CSV = """run,flops,loss
shallow-d384-3e17,3e17,3.816
moe-v16-1e18,1e18,3.522
moe-v16-3e18,3e18,3.339
moe-v16-1e19,1e19,3.154
moe-v16-3e19,3e19,3.000
moe-v16-1e20,1e20,2.848
moe-v16-3e20,3e20,2.725
"""


def _ladder(df: pd.DataFrame, name: str = "test") -> Ladder:
    return Ladder(df, source="<test>", name=name)


def _off_trend_ladder() -> Ladder:
    rows = [line.split(",") for line in OFF_TREND_CSV.strip().splitlines()[1:]]
    return _ladder(pd.DataFrame({"run": [r[0] for r in rows],
                                 "flops": [float(r[1]) for r in rows],
                                 "loss": [float(r[2]) for r in rows]}), "offtrend")


def _huber_power(c, loss, floor=None):
    """Independent fit of L = E + A C^-alpha: summed Huber(delta=1e-3) of log residuals,
    by scipy's trust-region least squares from a grid of starts. Returns (E, A, alpha)."""
    c, loss = np.asarray(c, float), np.asarray(loss, float)
    lc = np.log(c / c.min())

    def model(p):
        e = floor if floor is not None else np.exp(p[2])
        return e + np.exp(p[0] - p[1] * lc)

    best = None
    floors = [None] if floor is not None else [0.2, 0.5, 0.8, 0.95]
    for share in floors:
        e0 = floor if floor is not None else share * loss.min()
        slope, icpt = np.polyfit(lc, np.log(loss - e0), 1)
        p0 = [icpt, -slope] + ([] if floor is not None else [np.log(e0)])
        res = least_squares(lambda p: np.log(model(p)) - np.log(loss), p0, loss="huber",
                            f_scale=DELTA, xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=20000)
        if best is None or res.cost < best.cost:
            best = res
    p = best.x
    e = floor if floor is not None else float(np.exp(p[2]))
    # back to A in L = E + A C^-alpha (C in FLOPs)
    return e, float(np.exp(p[0]) * c.min() ** p[1]), float(p[1])


def _power(params, c):
    e, a, alpha = params
    return e + a * np.asarray(c, float) ** -alpha


# ----------------------------------------------------------------------------- off-trend rungs
def test_off_trend_rung_is_named_with_forecast_with_and_without_it():
    ladder = _off_trend_ladder()
    t = ladder.table
    fc = predict(ladder, {"flops": 1e23}, "power", fixed={"E": 1.6}, interval="delta")
    ot = fc.off_trend
    assert ot is not None and [r.run for r in ot.rungs] == ["shallow-d384-3e17"]
    # Reported, not excluded: the rung is still fitted and the forecast is the all-rung one.
    assert "shallow-d384-3e17" in fc.fit.labels and fc.fit.n_points == 7
    every = _huber_power(t["flops"], t["loss"], floor=1.6)
    moe = t[t["run"] != "shallow-d384-3e17"]
    others = _huber_power(moe["flops"], moe["loss"], floor=1.6)
    assert fc.loss == pytest.approx(_power(every, 1e23), rel=1e-5)
    assert ot.loss_with == pytest.approx(_power(every, 1e23), rel=1e-5)
    assert ot.loss_without == pytest.approx(_power(others, 1e23), rel=1e-5)
    rung = ot.rungs[0]
    assert rung.trend == pytest.approx(_power(others, 3e17), rel=1e-5)
    assert rung.loss / rung.trend - 1 > 0.01  # 1.6% above the trend of the moe rungs
    note = [n for n in fc.notes if "off-trend" in n]
    assert len(note) == 1 and "kept in the fit, not excluded" in note[0]
    assert "without it" in note[0]
    d = fc.to_dict()["off_trend"]
    assert d["excluded"] is False and d["rungs"][0]["run"] == "shallow-d384-3e17"
    assert d["loss_without"] == pytest.approx(_power(others, 1e23), rel=1e-5)


def test_off_trend_rung_with_a_free_floor_is_the_rung_not_its_neighbour():
    # With E free, the full fit bends towards the shallow rung and its neighbour carries the
    # largest residual; the leave-one-out test still names the shallow rung.
    ladder = _off_trend_ladder()
    fc = predict(ladder, {"flops": 1e23}, "power", interval=None)
    assert int(np.argmax(np.abs(fc.fit.residuals))) == fc.fit.labels.index("moe-v16-1e18")
    assert [r.run for r in fc.off_trend.rungs] == ["shallow-d384-3e17"]
    moe = ladder.table[ladder.table["run"] != "shallow-d384-3e17"]
    others = _huber_power(moe["flops"], moe["loss"])
    assert fc.off_trend.loss_without == pytest.approx(_power(others, 1e23), rel=1e-4)


@pytest.mark.parametrize("bump, named", [(0.003, False), (0.02, True)])
def test_off_trend_needs_a_minimum_size(bump, named):
    # An exact law (E = 1.6, A = 80, alpha = 0.09) with one rung moved up by `bump`: the
    # others fit exactly (zero scatter), so only the minimum size (0.5%) decides.
    c = np.logspace(17, 20.5, 8)
    loss = 1.6 + 80 * c ** -0.09
    loss[3] *= 1 + bump
    ladder = _ladder(pd.DataFrame({"run": [f"r{i}" for i in range(8)], "flops": c,
                                   "loss": loss}))
    fc = predict(ladder, {"flops": 1e23}, "power", fixed={"E": 1.6}, interval=None)
    assert OFF_TREND_MIN == 0.005
    if not named:
        assert fc.off_trend is None and not any("off-trend" in n for n in fc.notes)
        return
    assert [r.run for r in fc.off_trend.rungs] == ["r3"]
    assert fc.off_trend.rungs[0].trend == pytest.approx(1.6 + 80 * c[3] ** -0.09, rel=1e-6)
    assert fc.off_trend.rungs[0].residual == pytest.approx(-np.log(1.02), rel=1e-4)
    assert fc.off_trend.loss_without == pytest.approx(1.6 + 80 * 1e23 ** -0.09, rel=1e-6)


def test_no_off_trend_rung_on_a_noisy_law():
    # A law with 0.5% seeded log-normal noise: no rung is 6 standard deviations off.
    rng = np.random.default_rng(11)
    c = np.logspace(17, 21, 12)
    loss = (1.7 + 1e4 * c ** -0.2) * np.exp(rng.normal(0, 0.005, len(c)))
    ladder = _ladder(pd.DataFrame({"run": [f"r{i}" for i in range(12)], "flops": c,
                                   "loss": loss}))
    fc = predict(ladder, {"flops": 1e22}, "power", interval=None)
    assert fc.off_trend is None
    assert find_off_trend(fc.fit, {"flops": [1e22]}) is None
    # too few rungs to tell one from the others' scatter: no verdict
    few = ladder.select(runs=["r0", "r4", "r8", "r11"])
    assert predict(few, {"flops": 1e22}, "power", interval=None).off_trend is None


# ----------------------------------------------------------------------------- pinned floors
def test_fixed_floor_makes_the_interval_conditional():
    ladder = _off_trend_ladder()
    fc = predict(ladder, {"flops": 1e23}, "power", fixed={"E": 1.6}, interval="delta",
                 off_trend=False)
    notes = [n for n in fc.notes if "conditional on" in n]
    assert len(notes) == 1 and notes[0].startswith("E = 1.6 fixed")
    assert fc.to_dict()["prediction"]["conditional_on"] == {"E": 1.6}
    assert "conditional on E = 1.6" in fc.report()
    free = predict(ladder, {"flops": 1e23}, "power", interval="delta", off_trend=False)
    assert free.to_dict()["prediction"]["conditional_on"] == {}
    assert not any("conditional on" in n for n in free.notes)


def test_floor_range_reports_the_forecast_across_the_range():
    ladder = _off_trend_ladder()
    t = ladder.table
    fc = predict(ladder, {"flops": 1e23}, "power", floor_range=(1.4, 1.8), interval="delta")
    scan = fc.floor_scan
    assert scan.values == pytest.approx((1.4, 1.6, 1.8))
    expected = [_power(_huber_power(t["flops"], t["loss"], floor=e), 1e23) for e in (1.4, 1.6, 1.8)]
    assert scan.losses == pytest.approx(expected, rel=1e-5)
    # the reported forecast is the middle of the range, E pinned at 1.6
    assert fc.fit.fixed == {"E": 1.6} and fc.loss == pytest.approx(expected[1], rel=1e-5)
    for loss, lo, hi in zip(scan.losses, scan.lowers, scan.uppers):
        assert lo < loss < hi
    assert scan.minimum == min(scan.lowers) and scan.maximum == max(scan.uppers)
    d = fc.to_dict()["floor_range"]
    assert [p["value"] for p in d["points"]] == pytest.approx([1.4, 1.6, 1.8])
    assert d["min"] == scan.minimum and d["max"] == scan.maximum
    assert any("scanned over [1.4, 1.8]" in n for n in fc.notes)
    assert "E = 1.4" in fc.report() and "over the range" in fc.report()
    five = predict(ladder, {"flops": 1e23}, "power", floor_range=(1.4, 1.8), floor_points=5,
                   interval=None, off_trend=False)
    assert five.floor_scan.values == pytest.approx((1.4, 1.5, 1.6, 1.7, 1.8))
    assert five.floor_scan.lowers == (None,) * 5 and five.floor_scan.minimum == pytest.approx(
        expected[0], rel=1e-5)


def test_floor_range_errors():
    ladder = _off_trend_ladder()
    with pytest.raises(LawError, match="both fixed"):
        predict(ladder, 1e23, "power", fixed={"E": 1.5}, floor_range=(1.4, 1.8))
    with pytest.raises(LawError, match="low < high"):
        predict(ladder, 1e23, "power", floor_range=(1.8, 1.4))
    # a floor above an observed loss (2.725) is refused, naming the value of the range
    with pytest.raises(FitError, match=r"E = 3 \(floor range \[2, 3\]\)"):
        predict(ladder, 1e23, "power", floor_range=(2.0, 3.0), interval=None)


# ----------------------------------------------------------------------------- nested fits
#: The steady drifts prefix_fits(_climbing_floor_ladder(), "power", {"flops": 1e22}) warns of.
CLIMBING_DRIFTS = (r"^steady drift of E across the last 4 nested fits",
                   r"^steady drift of alpha across the last 4 nested fits",
                   r"^steady drift of the forecast across the last 4 nested fits")


def _climbing_floor_ladder() -> Ladder:
    # The effective floor rises with scale: L = 0.61 + 0.01 (log10 C/1e17)^3 + 1e4 C^-0.2.
    c = np.logspace(17, 20.5, 8)
    loss = 0.61 + 0.01 * np.log10(c / 1e17) ** 3 + 1e4 * c ** -0.2
    return _ladder(pd.DataFrame({"run": [f"r{i}" for i in range(8)], "flops": c,
                                 "loss": loss}), "climbing")


def test_steady_drift_rule():
    se = [0.05] * 4
    up = _steady_drift([1.0, 1.1, 1.2, 1.3], se, 4, 2.0)
    assert up["drift"] and up["change"] == pytest.approx(0.3)
    assert up["combined_se"] == pytest.approx(np.sqrt(2) * 0.05)
    assert not _steady_drift([1.0, 1.2, 1.1, 1.3], se, 4, 2.0)["drift"]     # not monotone
    assert not _steady_drift([1.0, 1.02, 1.04, 1.06], se, 4, 2.0)["drift"]  # 0.06 < 0.141
    # only the last `window` values count
    assert _steady_drift([2.0, 1.0, 1.1, 1.2, 1.3], se + [0.05], 4, 2.0)["drift"]
    untested = _steady_drift([1.0, 1.1, 1.2, 1.3], [None, 0.1, 0.1, 0.05], 4, 2.0)
    assert not untested["tested"] and not untested["drift"]


def test_prefix_fits_flag_a_climbing_floor():
    ladder = _climbing_floor_ladder()
    t = ladder.table.sort_values("flops")
    with pytest.warns(FitWarning) as caught:
        result = prefix_fits(ladder, "power", {"flops": 1e22})
    assert any("steady drift of E" in str(w.message) for w in caught)
    assert [s.n_runs for s in result.steps] == [5, 6, 7, 8]   # n_free + 2 = 5 runs first
    e_path = [s.params["E"] for s in result.steps]
    expected = [_huber_power(t["flops"][:k], t["loss"][:k])[0] for k in (5, 6, 7, 8)]
    assert e_path == pytest.approx(expected, rel=1e-3)
    assert e_path[0] == pytest.approx(1.05, abs=0.01) and e_path[-1] == pytest.approx(1.44,
                                                                                       abs=0.01)
    assert "E" in result.drifting and "forecast" in result.drifting
    d = result.drift["E"]
    assert d["monotone"] and d["change"] > 2 * d["combined_se"]
    assert any("steady drift of E" in w for w in result.warnings)
    assert "steady drift of E" in result.report()


def test_prefix_fits_no_drift_on_a_settled_law():
    rng = np.random.default_rng(5)
    c = np.logspace(17, 20.5, 8)
    loss = (1.7 + 1e4 * c ** -0.2) * np.exp(rng.normal(0, 0.003, len(c)))
    ladder = _ladder(pd.DataFrame({"run": [f"r{i}" for i in range(8)], "flops": c,
                                   "loss": loss}))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FitWarning)   # no drift warning may be raised
        result = prefix_fits(ladder, "power")
    assert result.drifting == []
    assert all(d["tested"] for d in result.drift.values())
    assert result.target["flops"] == pytest.approx(c[-1])     # default: the largest run


def test_prefix_fits_need_three_prefixes():
    from delphi.errors import LadderError
    c = np.logspace(17, 19, 5)
    ladder = _ladder(pd.DataFrame({"run": [f"r{i}" for i in range(5)], "flops": c,
                                   "loss": 1.7 + 1e4 * c ** -0.2}))
    with pytest.raises(LadderError, match="nested fits need 3"):
        prefix_fits(ladder, "power")


# ----------------------------------------------------------------------------- CLI
def test_cli_off_trend_pinned_floor_and_floor_range(tmp_path, capsys):
    path = tmp_path / "offtrend.csv"
    path.write_text(OFF_TREND_CSV)
    assert main(["predict", str(path), "--floor", "1.6", "--target-flops", "1e23",
                 "--interval", "delta"]) == 0
    out = capsys.readouterr().out
    assert "off-trend  shallow-d384-3e17" in out and "kept in the fit" in out
    assert "without it" in out and "conditional on E = 1.6" in out
    assert main(["predict", str(path), "--floor", "1.6", "--target-flops", "1e23",
                 "--interval", "delta", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["off_trend"]["rungs"][0]["run"] == "shallow-d384-3e17"
    assert d["prediction"]["conditional_on"] == {"E": 1.6}
    assert main(["predict", str(path), "--floor", "1.4:1.8", "--target-flops", "1e23",
                 "--interval", "delta", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [p["value"] for p in d["floor_range"]["points"]] == pytest.approx([1.4, 1.6, 1.8])
    assert d["params"]["E"] == 1.6
    assert main(["fit", str(path), "--floor", "1.4:1.8"]) == 2     # command-line usage
    assert "for `delphi predict`" in capsys.readouterr().err


def test_cli_backtest_prefixes(tmp_path, capsys):
    ladder = _climbing_floor_ladder()
    path = tmp_path / "climbing.csv"
    ladder.table[["run", "flops", "loss"]].to_csv(path, index=False)
    assert main(["backtest", str(path), "--law", "power", "--prefixes",
                 "--target-flops", "1e22"]) == 0
    out = capsys.readouterr().out
    assert "nested fits" in out and "steady drift of E" in out
    assert main(["backtest", str(path), "--law", "power", "--prefixes", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["design"] == "prefixes" and "E" in d["drifting"]
    assert [s["n_runs"] for s in d["steps"]] == [5, 6, 7, 8]
    assert main(["backtest", str(path), "--law", "power", "--prefixes",
                 "--fit-max-flops", "1e19"]) == 2   # usage (issue 23)
    assert "choose one backtest design" in capsys.readouterr().err


# ----------------------------------------------------------------- review of issue 9
def test_floor_range_cli_note_uses_flags_and_is_not_repeated_in_a_scan(capsys):
    ladder = _off_trend_ladder()
    pinned = predict(ladder, {"flops": 1e23}, "power", fixed={"E": 1.6}, interval=None,
                     off_trend=False)
    [note] = [n for n in pinned.notes if "conditional on" in n]
    # The suggestion names the setting in both spellings and reads "--floor LO:HI" on the CLI.
    from delphi.errors import for_cli
    assert "floor_range (CLI --floor LO:HI)" in note
    assert "a floor range, --floor LO:HI, shows" in for_cli(note)
    # Within a floor range the suggestion to use a floor range is not made.
    scan = predict(ladder, {"flops": 1e23}, "power", floor_range=(1.4, 1.8), interval=None,
                   off_trend=False)
    assert not [n for n in scan.notes if "a floor range" in n and "shows how" in n]


def test_prefix_fits_keep_each_prefix_fit_equal_to_a_full_fit(capsys):
    from delphi.fitting import fit
    ladder = _climbing_floor_ladder()
    with expect_warnings(FitWarning, *CLIMBING_DRIFTS):
        result = prefix_fits(ladder, "power", {"flops": 1e22})
    for step in result.steps:
        # Skipping the profiles of the nested fits must not move any fitted value.
        full = fit(ladder, "power", fit_max_flops=step.max_flops)
        assert step.params == full.params
    # Only the last prefix (the whole ladder) is profiled; it says so.
    assert any("identification profiles" in n for n in result.notes)


def test_prefix_report_shows_each_prefix_fits_warnings(tmp_path, capsys):
    ladder = _climbing_floor_ladder()
    with expect_warnings(FitWarning, *CLIMBING_DRIFTS):
        result = prefix_fits(ladder, "power", {"flops": 1e22})
    shown = [(s.max_flops, w) for s in result.steps for w in s.warnings]
    assert shown, "the climbing-floor ladder's prefixes carry fit warnings"
    text = result.report()
    for c, w in shown:
        assert f"warning    prefix <= {c:.3g}: {w}" in text


def test_too_few_prefixes_names_the_law_and_a_smaller_one(tmp_path, capsys):
    from delphi.errors import LadderError
    # 7 runs, one per budget: chinchilla (5 free + 2 = 7 runs per prefix) has 1 prefix.
    n = np.logspace(8, 9.5, 7)
    d = n * np.linspace(4, 9, 7)
    df = pd.DataFrame({"run": [f"r{i}" for i in range(7)], "params": n, "tokens": d,
                       "flops": 6 * n * d, "loss": 1.7 + 400 / n ** 0.34 + 1500 / d ** 0.28})
    with pytest.raises(LadderError) as err:
        prefix_fits(_ladder(df), "chinchilla")
    msg = str(err.value)
    assert "law 'chinchilla': 5 free parameters + 2" in msg and "gives 1 prefix(es)" in msg
    assert "law='power' (CLI --law power)" in msg
    path = tmp_path / "seven.csv"
    df.to_csv(path, index=False)
    # The CLI's default for this ladder (D/N spans 2.25x) is chinchilla, as predict's.
    assert main(["backtest", str(path), "--prefixes"]) == 1
    err_text = capsys.readouterr().err
    assert "law 'chinchilla'" in err_text and "--law power" in err_text


@pytest.fixture(scope="module")
def epoch_fit(data_dir):
    """Epoch's Chinchilla points (the 5 highest losses dropped) fitted by chinchilla: the
    off-trend test names two rungs on them."""
    from delphi.fitting import fit_arrays

    e = pd.read_csv(data_dir / "epoch_chinchilla" / "svg_extracted_data.csv")
    e = e.sort_values("loss", kind="mergesort").iloc[:-5]
    n = e["Model Size"].to_numpy(float)
    x = {"params": n, "tokens": e["Training FLOP"].to_numpy(float) / (6 * n)}
    return fit_arrays("chinchilla", x, e["loss"].to_numpy(float),
                      labels=[str(i) for i in range(len(n))])


EPOCH_AT = {"params": np.array([7e10]), "tokens": np.array([1.4e12])}


def test_a_rung_named_first_reuses_its_deleted_residual_refit(epoch_fit, monkeypatch):
    """Issue 27: the forecast without a rung alone is the deleted-residual refit already made
    for it when it was named with every other rung in (the same points, start and settings):
    no fit runs twice, and each rung's forecast without it is the one a fresh refit gives,
    bit for bit. Epoch's Chinchilla points: two rungs named."""
    from delphi import robustness

    fit, at = epoch_fit, EPOCH_AT
    calls = []
    real, real_many = robustness.fit_arrays, robustness.warm_fits_many

    def spy(law, xs, ys, **kw):
        calls.append((ys.tobytes(), tuple(sorted((kw.get("warm_start") or {}).items()))))
        return real(law, xs, ys, **kw)

    def spy_many(requests):      # the refits made together count as calls too
        calls.extend((r["y"].tobytes(), tuple(sorted(r["warm_start"].items())))
                     for r in requests)
        return real_many(requests)

    monkeypatch.setattr(robustness, "fit_arrays", spy)
    monkeypatch.setattr(robustness, "warm_fits_many", spy_many)
    ot = find_off_trend(fit, at)
    assert ot is not None and len(ot.rungs) == 2
    assert len(calls) == len(set(calls)), "a refit ran twice"
    monkeypatch.setattr(robustness, "fit_arrays", real)
    labels = np.array(fit.labels, dtype=object)
    settings = dict(fixed=dict(fit.fixed) or None, bounds=None, delta=fit.delta, seed=0)
    for rung in ot.rungs:
        keep = labels != rung.run
        fresh = robustness._fit_without(fit, fit.x, fit.y, labels, keep, settings,
                                        start=fit.params)
        assert rung.loss_without == float(fresh.predict(at)[0])


def test_off_trend_refits_made_together_are_the_one_by_one_refits_bit_for_bit(epoch_fit,
                                                                            monkeypatch):
    """Issue 27: a round's deleted-residual refits (and the fits without each named rung
    alone) run as one stacked batched BFGS (:func:`delphi.fitting.engine.warm_fits_many`);
    every number of the result is the one the refits made one by one give."""
    import delphi.fitting.engine as engine
    from delphi import robustness

    stacked = []
    real_batch = engine.refine_batch

    def spy(*args, **kwargs):
        if kwargs.get("member") is not None:
            stacked.append(len(kwargs["member"]))
        return real_batch(*args, **kwargs)

    monkeypatch.setattr(engine, "refine_batch", spy)
    together = find_off_trend(epoch_fit, EPOCH_AT)
    assert stacked and max(stacked) >= 5          # a round's refits shared a batch
    monkeypatch.setattr(engine, "refine_batch", real_batch)

    def one_by_one(requests):
        out = []
        for r in requests:
            try:
                out.append(robustness.fit_arrays(**r))
            except Exception as exc:          # noqa: BLE001 - returned, as warm_fits_many does
                out.append(exc)
        return out

    monkeypatch.setattr(robustness, "warm_fits_many", one_by_one)
    alone = find_off_trend(epoch_fit, EPOCH_AT)
    assert together is not None and len(together.rungs) == 2
    assert together.rungs == alone.rungs          # runs, trends, residuals, scales, losses
    assert (together.loss_with, together.loss_without) == (alone.loss_with, alone.loss_without)
    assert together.fit_without.params == alone.fit_without.params
    assert together.fit_without.objective == alone.fit_without.objective
