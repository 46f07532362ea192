"""Issue 21, item 2: an interval for every forecast, from a reference class of public ladders
when the ladder cannot calibrate itself (:mod:`delphi.reference`)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.calibration import CalibrationModel, cut_levels, leave_future_out
from delphi.cli.main import main
from delphi.errors import DelphiError, FitError
from delphi.laws import CHINCHILLA
from delphi.reference import (COLUMNS, MIN_LADDERS, window_ladders, PRIOR_FOLDS, REFERENCE_PATH,
                              ReferenceClass, blend, build_reference, load_reference,
                              reference_rows)

#: Hoffmann et al. 2022's Approach-3 law, the truth of the simulated ladders.
TRUTH = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


def optimal_ladder(seed: int, rungs: int = 8, noise: float = 0.004,
                   name: str | None = None) -> delphi.Ladder:
    """A compute-optimal ladder (20 tokens per parameter, one run per size, sizes 2x apart
    from 2e7), losses from :data:`TRUTH` times exp(N(0, noise))."""
    rng = np.random.default_rng(seed)
    n = 2e7 * 2.0 ** np.arange(rungs)
    d = 20 * n
    loss = CHINCHILLA.predict(TRUTH, {"params": n, "tokens": d}) * np.exp(
        rng.normal(0, noise, rungs))
    frame = pd.DataFrame({"run": [f"r{i}" for i in range(rungs)], "params": n, "tokens": d,
                          "loss": loss})
    return delphi.Ladder(frame, name=name or f"sim{seed}")


def synthetic_class(spec: dict[str, tuple], seed: int = 0) -> ReferenceClass:
    """A reference class whose errors are drawn, per ladder, as e ~ N(0, s log10 r) at rung
    count n for law ``law``: ``spec[ladder] = (law, n, s[, fit_sd])``, each fold fit's
    residual scale ``fit_sd`` (default 0.005) with 10 residual dof."""
    rng = np.random.default_rng(seed)
    rows = []
    for ladder, (law, n, s, *sd) in spec.items():
        r = 10 ** rng.uniform(0.1, 2.0, 200)
        e = rng.normal(0, s * np.log10(r))
        for i in range(len(r)):
            rows.append((ladder, law, 3, n, n, 1e18 * (i // 20), 1e18, f"{ladder}-{i}",
                         float(r[i]), float(e[i]), sd[0] if sd else 0.005, 10))
    return ReferenceClass(rows=pd.DataFrame(rows, columns=list(COLUMNS)),
                          provenance={"generated_by": "test"})


# ------------------------------------------------------------------------ the shipped file
def test_the_shipped_reference_class_has_its_provenance():
    ref = load_reference()
    assert REFERENCE_PATH.exists() and len(ref) > 500
    prov = ref.provenance
    assert prov["generated_by"].startswith("benchmarks/bench_reference.py")
    assert prov["git_commit"] and prov["date"] and prov["seed"] == 0
    # every public ladder of the benchmark is there (or says why not), each with its data hash
    assert len(prov["ladders"]) >= 12
    for name, entry in prov["ladders"].items():
        assert len(entry["sha256"]) == 64, name
        for law, info in entry["laws"].items():
            assert "skipped" in info or info["errors"] > 0, (name, law)
    assert set(prov["left_out"]) == {"marin-moe-535b", "misfitting2025"}
    assert set(ref.ladders) <= set(prov["ladders"])
    assert {"power", "chinchilla"} <= set(ref.laws)
    assert np.isfinite(ref.rows["log_error"]).all() and (ref.rows["ratio"] > 1).all()
    # a law of C only where the frontier is compute-optimal (FRONTIER_SPAN); none over-training
    assert "skipped" in prov["ladders"]["gadre2024"]["laws"]["power"]


def test_round_trip_is_exact_to_the_stored_precision(tmp_path):
    ref = synthetic_class({"a": ("power", 5, 0.01), "b": ("power", 6, 0.02)})
    path = ref.to_json(tmp_path / "ref.json.gz")
    again = ReferenceClass.from_json(path)
    pd.testing.assert_frame_equal(again.rows, ref.rows, rtol=1e-6, check_dtype=False)
    assert again.provenance == ref.provenance
    # the same errors give the same bytes (gzip mtime 0)
    assert ref.to_json(tmp_path / "again.json.gz").read_bytes() == path.read_bytes()


def test_bad_reference_files_are_named(tmp_path):
    with pytest.raises(DelphiError, match="cannot read the reference errors .*missing"):
        ReferenceClass.from_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"columns": ["x"], "rows": []}))
    with pytest.raises(DelphiError, match="not a delphi reference-errors file"):
        ReferenceClass.from_json(bad)
    nan = tmp_path / "nan.json.gz"
    doc = {"columns": list(COLUMNS), "rows": [["l", "power", 3, 5, 5, 1.0, 1.0, "run7",
                                               2.0, float("nan"), 0.01, 5]]}
    nan.write_bytes(gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(DelphiError, match="row 0 .*'l'.*'run7'.*non-finite"):
        ReferenceClass.from_json(nan)
    # a reference class the caller names must load: the error is theirs, not a silent note
    with pytest.raises(DelphiError, match="cannot read the reference errors"):
        delphi.predict(optimal_ladder(0, rungs=5), {"params": 1e9, "tokens": 2e10}, "power",
                       reference=tmp_path / "missing.json", off_trend=False)


# ------------------------------------------------------------------------------ the model
def test_the_quantile_line_covers_its_level_with_every_ladder_weighing_the_same():
    # Two noisy ladders with many errors, four quiet ones with few: weighting by ladder, the
    # line covers 90% of each ladder's weight in total, not 90% of the noisy ladders' rows.
    spec = {f"q{i}": ("power", 5, 0.01) for i in range(4)}
    ref = synthetic_class(spec)
    m = ref.model("power", 5, 0.9)
    rows = ref.rows
    inside = np.abs(rows["log_error"]) <= m.q_0 + m.q_1 * np.log10(rows["ratio"])
    assert inside.mean() == pytest.approx(0.9, abs=0.02)
    # e ~ N(0, 0.01 log10 r): the 90% half-width is 1.645 x 0.01 per decade
    assert m.q_1 == pytest.approx(1.645 * 0.01, rel=0.15)
    assert m.sigma(100.0) == pytest.approx((m.q_0 + 2 * m.q_1) / 1.6449, rel=1e-4)
    assert m.small_sample_factor() == 1.0
    assert m.ladders == tuple(sorted(spec)) and m.n_errors == len(rows)
    # thin one ladder to 10 rows: it still weighs a quarter
    thin = ReferenceClass(rows=pd.concat([rows[rows.ladder != "q0"],
                                          rows[rows.ladder == "q0"].head(10)]))
    m2 = thin.model("power", 5, 0.9)
    w = thin.rows["ladder"].map(1 / thin.rows["ladder"].value_counts())
    ok = np.abs(thin.rows["log_error"]) <= m2.q_0 + m2.q_1 * np.log10(thin.rows["ratio"])
    assert (w * ok).sum() / w.sum() == pytest.approx(0.9, abs=0.03)


def test_a_noisier_fit_gets_a_wider_reference_interval():
    # Ladders whose extrapolation errors scale with their fits' residual scale (as on the
    # public ladders: Porian's, Gadre's and (Mis)Fitting's fits scatter 3-10x more than the
    # isoFLOP sweeps', and miss by more). Conditioned on the fit's scale, each kind is covered
    # near the level; one pooled line over-covers the quiet ladders and under-covers the noisy.
    spec = {**{f"quiet{i}": ("power", 5, 0.005, 0.002) for i in range(3)},
            **{f"noisy{i}": ("power", 5, 0.03, 0.012) for i in range(3)}}
    ref = synthetic_class(spec, seed=3)
    rows = ref.rows
    x = np.log10(rows["ratio"])
    cover = {}
    for kind, sd in (("quiet", 0.002), ("noisy", 0.012)):
        m = ref.model("power", 5, 0.9, fit_sd=sd, fit_dof=10)
        assert m.fit_sd == sd and m.q_2 > 0
        mine = rows["ladder"].str.startswith(kind)
        half = m.sigma(rows["ratio"][mine].to_numpy()) * 1.6449
        cover[kind] = float(np.mean(np.abs(rows["log_error"][mine]) <= half))
        assert "residual scale" in m.describe()
    flat = ref.model("power", 5, 0.9)
    assert flat.fit_sd is None and flat.q_2 == 0
    flat_half = flat.q_0 + flat.q_1 * x
    noisy = rows["ladder"].str.startswith("noisy")
    flat_noisy = float(np.mean(np.abs(rows["log_error"][noisy]) <= flat_half[noisy]))
    assert 0.8 <= cover["quiet"] <= 1.0 and 0.8 <= cover["noisy"] <= 0.97
    assert flat_noisy < cover["noisy"] - 0.05
    # too few residual dof for a scale, or a bad one: unconditional (said) or an error
    few = ref.model("power", 5, 0.9, fit_sd=0.012, fit_dof=1)
    assert few.fit_sd is None and "residual scale" not in few.describe()
    with pytest.raises(FitError, match="fit_sd must be a finite"):
        ref.model("power", 5, 0.9, fit_sd=float("nan"), fit_dof=10)


def test_a_version_1_file_reads_and_is_not_conditioned(tmp_path):
    ref = synthetic_class({f"l{i}": ("power", 5, 0.01) for i in range(4)})
    path = tmp_path / "v1.json"
    path.write_text(json.dumps({"columns": list(COLUMNS[:10]), "rows": [
        list(r)[:10] for r in ref.rows[list(COLUMNS)].itertuples(index=False)]}))
    old = ReferenceClass.from_json(path)
    assert list(old.rows.columns) == list(COLUMNS) and old.rows["fit_sd"].isna().all()
    m = old.model("power", 5, 0.9, fit_sd=0.01, fit_dof=10)
    assert m.fit_sd is None and any("record their folds' residual scale" in n for n in m.notes)


def test_the_law_and_rung_filters_widen_and_say_so():
    spec = {"a": ("power", 5, 0.01), "b": ("power", 5, 0.01), "c": ("power", 6, 0.01),
            "d": ("power", 8, 0.01), "e": ("chinchilla", 5, 0.05)}
    ref = synthetic_class(spec)
    m = ref.model("power", 5)
    # 3 ladders at 5 +- 1 rungs, 4 at 5 +- 3
    assert m.rungs == (5, 8) and m.laws == ("power",)
    assert "folds fitted on 5-8 rungs (the forecast has 5)" in m.notes[0]
    assert "d" in m.ladders and "e" not in m.ladders
    # power-n borrows power's errors (the same form), saying so
    n = ref.model("power-n", 5)
    assert n.laws == ("power",) and "the errors of 'power', the same form" in n.notes[0]
    # chinchilla has one ladder: every law's errors are pooled
    c = ref.model("chinchilla", 5)
    assert c.laws == ("chinchilla", "power") and "every law's errors are used" in c.notes[0]
    # leaving ladders out
    assert "a" not in ref.without("a").ladders
    assert ref.model("power", 5, exclude=("a",)).excluded == ("a",)
    with pytest.raises(FitError, match=r"has 0 ladder\(s\) outside a, b, c, d, e"):
        ref.model("power", 5, exclude=tuple(spec))
    # fewer than 4 ladders is one ladder's errors, not a reference class
    with pytest.raises(FitError, match=r"has 2 ladder\(s\) outside a, b, c \(d, e\): a "
                                       r"reference model needs at least 4"):
        ref.model("power", 5, exclude=("a", "b", "c"))
    with pytest.raises(delphi.LawError, match="nosuchlaw"):
        ref.model("nosuchlaw", 5)
    with pytest.raises(FitError, match="n_rungs must be a whole number >= 1"):
        ref.model("power", 0)
    with pytest.raises(FitError, match="level must be in"):
        ref.model("power", 5, level=1.5)
    assert MIN_LADDERS == 4


def test_the_rung_window_takes_in_enough_ladders_for_the_level():
    # ladder i has folds of 3 + i rungs: a window centred on 3 rungs must reach 3 + 8 = 11
    # for 9 ladders at 90% (a new ladder is covered only when K >= level / (1 - level):
    # Lee, Barber & Willett 2023), and 3 + 3 = 6 for 4 at 80%
    assert [window_ladders(v) for v in (0.5, 0.8, 0.9, 0.95)] == [4, 4, 9, 19]
    ref = synthetic_class({f"l{i}": ("power", 3 + i, 0.01) for i in range(12)})
    m90, m80 = ref.model("power", 3, 0.9), ref.model("power", 3, 0.8)
    assert m90.rungs == (3, 11) and len(m90.ladders) == 9
    assert m80.rungs == (3, 6) and len(m80.ladders) == 4
    assert "until 9 public ladders contribute" in m90.notes[0]
    # fewer ladders than the level asks for: all of them, and the note says so
    m95 = ref.model("power", 3, 0.95)
    assert len(m95.ladders) == 12 and "a 95% reference interval asks for 19" in m95.notes[0]
    with pytest.raises(FitError, match="level must be in"):
        window_ladders(1.0)


def test_blend_shrinks_by_the_number_of_folds():
    ref = synthetic_class({f"q{i}": ("power", 5, 0.01) for i in range(4)}).model("power", 5)
    own = CalibrationModel(sigma_0=0.002, k=0.004, n_folds=9, n_errors=40, max_ratio=30.0,
                           law="power", ladder="mine")
    b = blend(own, ref, 0.9)
    w = 9 / (9 + PRIOR_FOLDS)
    # the shrinkage replaces the own model's Student-t widening (chosen leave one ladder out)
    for r in (1.0, 10.0, 1e3):
        assert b.sigma(r) == pytest.approx(w * own.sigma(r) + (1 - w) * ref.sigma(r))
    assert b.small_sample_factor() == 1.0 and b.weight == pytest.approx(0.75)
    d = b.to_dict()
    assert d["method"] == "calibrated" and d["blend_weight"] == pytest.approx(0.75)
    assert d["reference"]["method"] == "reference"


# ------------------------------------------------- coverage on simulated small ladders
def test_reference_intervals_cover_held_out_rungs_of_simulated_small_ladders():
    # A reference class built from 6 simulated compute-optimal ladders (the same truth, run
    # noise 0.4%) sizes the intervals of 12 fresh 5-rung ladders' leave-future-out errors
    # at their next rungs. Truth known, so the 90% intervals must cover about 90%; with 12
    # ladders x 3 rungs the binomial band is wide, and the test fails on a broken scale (a
    # wrong z, sd vs half-width, or log10 vs ln r give coverage near 60% or 100%).
    train = [optimal_ladder(s, rungs=8) for s in range(6)]
    ref = build_reference(train, laws=lambda lad: ["power"], max_folds=None)
    assert set(ref.ladders) == {f"sim{s}" for s in range(6)}
    inside, widths = [], []
    m = ref.model("power", 5, 0.9)
    for s in range(100, 112):
        full = optimal_ladder(s, rungs=8)
        first = cut_levels(full, "power")[0]        # fitted on the 5 smallest rungs
        rows = reference_rows(leave_future_out(full, "power", cuts=[first]), 3)
        assert (rows["n_budgets"] == 5).all()
        half = m.q_0 + m.q_1 * np.log10(rows["ratio"].to_numpy())
        inside += list(np.abs(rows["log_error"].to_numpy()) <= half)
        widths += list(half)
    assert len(inside) == 36
    assert 0.75 <= np.mean(inside) <= 0.98, np.mean(inside)
    assert 0.002 < np.mean(widths) < 0.05


# --------------------------------------------------------------------------- in predict
@pytest.fixture(scope="module")
def small_ref() -> ReferenceClass:
    return build_reference([optimal_ladder(s, rungs=7) for s in range(4)],
                           laws=lambda lad: ["power"], max_folds=None)


def test_a_five_rung_ladder_gets_a_reference_interval(small_ref):
    # 5 runs for 3 free parameters: 2 residual dof, too few for any interval of the fit's own
    small = optimal_ladder(42, rungs=5, name="five")
    target = {"params": 1.6e9, "tokens": 3.2e10}
    f = delphi.predict(small, target, reference=small_ref, off_trend=False)
    assert f.fit.law.name == "power"          # one D/N: a law in C
    iv = f.interval
    assert iv is not None and iv.method == "reference"
    assert iv.lower < f.loss < iv.upper
    cal = iv.calibration
    assert cal["ladders"] == sorted(small_ref.ladders) and cal["n_rungs"] == 5
    assert cal["ratio"] == pytest.approx(f.extrapolation) and cal["base_method"] == "none"
    assert any(n.startswith("no interval from the fit alone: 2 residual") for n in f.notes)
    # the fit's rough residual scale (2 dof) still enters as run noise: it only widens
    from scipy import stats

    from delphi.fitting.diagnostics import residual_scale
    t_over_z = stats.t.ppf(0.95, 2) / stats.norm.ppf(0.95)      # Student t, 2 dof
    assert iv.noise == pytest.approx(residual_scale(f.fit) * t_over_z) and iv.noise > 0
    assert cal["run_sd"] == iv.noise and "from 2 dof" in iv.noise_source
    note = next(n for n in f.notes if n.startswith("interval from the reference class"))
    assert "sim0" in note and f"r = {f.extrapolation:.3g}" in note
    assert "the fit gives no interval of its own" in note
    assert f.to_dict()["prediction"]["method"] == "reference"
    assert "reference class: other ladders' extrapolation errors" in f.report()
    # "none" still means none, and "calibrated" needs the ladder's own folds
    assert delphi.predict(small, target, interval=None, off_trend=False).interval is None
    with pytest.raises(FitError, match="no calibrated interval"):
        delphi.predict(small, target, interval="calibrated", reference=small_ref,
                       off_trend=False)


def test_a_six_rung_ladder_widens_its_delta_interval_by_the_reference(small_ref):
    six = optimal_ladder(43, rungs=6, name="six")
    target = {"params": 1.6e9, "tokens": 3.2e10}
    f = delphi.predict(six, target, reference=small_ref, off_trend=False)
    iv = f.interval
    assert iv.method == "reference" and iv.calibration["base_method"] == "delta"
    assert any(n.startswith("not calibrated on the ladder's own errors") for n in f.notes)
    plain = delphi.predict(six, target, interval="delta", off_trend=False)
    assert plain.loss == f.loss and plain.interval.method == "delta"
    assert plain.upper - plain.lower < iv.upper - iv.lower
    # parameter and run-noise spread add in quadrature to the reference's, which is read at
    # the fit's residual scale (3 dof)
    from delphi.fitting.diagnostics import residual_scale
    m = small_ref.model("power", 6, 0.9, fit_sd=residual_scale(f.fit), fit_dof=f.fit.dof)
    assert m.fit_sd is not None and iv.calibration["fit_sd"] == m.fit_sd
    z = 1.6448536269514722
    s_ref = m.sigma(f.extrapolation)
    p, r = iv.calibration["param_sd"], iv.calibration["run_sd"]
    assert np.log(iv.upper / f.loss) == pytest.approx(z * np.sqrt(s_ref ** 2 + p ** 2 + r ** 2))
    # asked for by name it is the same
    again = delphi.predict(six, target, interval="reference", reference=small_ref,
                           off_trend=False)
    assert (again.lower, again.upper) == (iv.lower, iv.upper)


def test_a_ladder_that_calibrates_itself_blends_in_the_reference(small_ref):
    big = optimal_ladder(7, rungs=12, name="twelve")
    f = delphi.predict(big, {"params": 1e11, "tokens": 2e12}, reference=small_ref,
                       off_trend=False, n_boot=40)
    cal = f.interval.calibration
    assert f.interval.method == "calibrated"
    n = cal["n_folds"]
    assert n >= 3 and cal["blend_weight"] == pytest.approx(n / (n + PRIOR_FOLDS))
    assert cal["reference"]["method"] == "reference"
    assert any("blended" in x and "reference counts as 3 folds" in x for x in f.notes)


def test_the_marin_hero_forecast_keeps_its_point_and_gains_a_reference_interval(data_dir):
    # README and Marin's preregistration: about 2.04 at 2.61e24 FLOPs with E = 1.5 pinned;
    # 3 runs for 2 free parameters leave 1 dof, so the fit alone has no interval.
    ladder = delphi.load_ladder("marin-moe-535b")
    f = delphi.predict(ladder, {"flops": 2.61e24}, "power", fixed={"E": 1.5})
    assert f.loss == pytest.approx(2.0414, abs=5e-5)
    assert f.interval is not None and f.interval.method == "reference"
    assert f.lower < 2.0414 < f.upper
    assert any(n.startswith("no interval from the fit alone: 1 residual degree") for n in f.notes)
    note = next(n for n in f.notes if n.startswith("interval from the reference class"))
    assert "porian2024-rw" in note and "marin-moe-535b" not in note.split(":")[0]
    assert any("beyond the largest in the reference class" for n in f.notes)


def test_cli_json_says_reference(data_dir, capsys):
    assert main(["predict", "marin-moe-535b", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    pred = out["prediction"]
    assert pred["method"] == "reference" and pred["calibration"]["ladders"]
    assert pred["lower"] < pred["loss"] < pred["upper"]
    assert pred["loss"] == pytest.approx(2.0414, abs=5e-5)
    assert main(["predict", "marin-moe-535b", "--interval", "none", "--json"]) == 0
    none = json.loads(capsys.readouterr().out)["prediction"]
    assert none["lower"] is None and none["method"] is None


def test_reference_by_name_fails_loudly_and_intervals_are_never_zero_width(small_ref):
    six = optimal_ladder(43, rungs=6, name="six")
    target = {"params": 1.6e9, "tokens": 3.2e10}
    # asked for by name, a reference class too small to model is an error, not the delta
    tiny = small_ref.without("sim0", "sim1")
    with pytest.raises(FitError, match=r"no reference-class interval: .*2 ladder\(s\)"):
        delphi.predict(six, target, interval="reference", reference=tiny, off_trend=False)
    with pytest.raises(TypeError, match="reference must be a ReferenceClass or a path"):
        delphi.predict(six, target, reference=42, off_trend=False)
    # below the ladder the reference spread is that of the downward distance taken upwards
    # and says so (once the in-sample floor: h111's F2); the expected-loss interval keeps a
    # width even when the rough run noise exceeds the reference spread
    five = optimal_ladder(42, rungs=5, name="five")
    with pytest.warns(delphi.FitWarning, match="extrapolated downwards"):
        low = delphi.predict(five, {"params": 1e7, "tokens": 2e8}, reference=small_ref,
                             off_trend=False)
    assert low.interval.mean_upper > low.interval.mean_lower
    assert any("extrapolation errors are measured upwards only" in n for n in low.notes)
