"""API misuse ends in a delphi error, never a bare Python one or a silent answer (issue 22,
items 6 and 7). The cases are those of the reliability review's ``api_misuse.py`` that must
be refused: bad types (None, a dict, a list, an array where a ladder or a mapping goes), bad
values (a bool or a 400-digit integer as FLOPs, complex losses), settings that were ignored
(``boot_unit="zzz"``) or had no limit (``floor_points=10**6``)."""

from __future__ import annotations

import decimal
import math
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.errors import DelphiError, NotFittedError, RegistryError, TargetError
from delphi.registry import Registry

DATA = Path(__file__).resolve().parent / "data"
GOOD = str(DATA / "good.csv")


@pytest.fixture(scope="module")
def ns(tmp_path_factory):
    """What the cases misuse: the good ladder as a frame and a Ladder, a chinchilla fit, a
    registry holding one forecast."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", delphi.DelphiWarning)
        ladder = delphi.load_ladder(GOOD)
        chinchilla = delphi.fit(ladder, "chinchilla")
        forecast = delphi.predict(ladder, {"flops": 1e22}, "power", interval="delta")
    reg = Registry(tmp_path_factory.mktemp("misuse") / "r.jsonl")
    reg.register(forecast, id="ok1")
    return SimpleNamespace(G=pd.read_csv(GOOD), L=ladder, F=chinchilla, fc=forecast, R=reg)


def _predict(target, **kw):
    kw.setdefault("interval", "none")
    return lambda n: delphi.predict(n.L, target, "power", **kw)


def _fit(**kw):
    return lambda n: delphi.fit(n.L, "power", **kw)


# (case, call): each must raise a DelphiError.
REFUSED = [
    # load_ladder / load_manifest: what is not a ladder
    ("load_ladder(None)", lambda n: delphi.load_ladder(None)),
    ("load_ladder(dict)", lambda n: delphi.load_ladder({"run": ["a"], "loss": [3.0]})),
    ("load_ladder(list)", lambda n: delphi.load_ladder([1, 2])),
    ("load_ladder(ndarray)", lambda n: delphi.load_ladder(np.zeros((3, 3)))),
    ("load_ladder(int)", lambda n: delphi.load_ladder(5)),
    ("load_ladder(empty str)", lambda n: delphi.load_ladder("")),
    ("load_ladder(dir)", lambda n: delphi.load_ladder(str(DATA))),
    ("load_ladder(nul)", lambda n: delphi.load_ladder(GOOD.replace("good", "good\x00"))),
    ("load_ladder(very long)", lambda n: delphi.load_ladder("x" * 5000)),
    ("load_ladder(format=zzz)", lambda n: delphi.load_ladder(GOOD, format="zzz")),
    ("load_ladder(unit=5)", lambda n: delphi.load_ladder(GOOD, unit=5)),
    ("load_ladder(metric=[])", lambda n: delphi.load_ladder(GOOD, metric=[])),
    ("load_manifest(None)", lambda n: delphi.load_manifest(None)),
    # fit: ladders that are not ladders, tables that are not valid
    *[(f"fit({name})", (lambda a: lambda n: delphi.fit(a(n), "power"))(arg)) for name, arg in [
        ("None", lambda n: None),
        ("dict", lambda n: {"run": ["a", "b"], "loss": [3.0, 2.9], "flops": [1e18, 1e19]}),
        ("list", lambda n: [1, 2, 3]),
        ("ndarray", lambda n: np.zeros((5, 3))),
        ("str path", lambda n: GOOD),
        ("DF missing loss", lambda n: n.G.drop(columns=["loss"])),
        ("DF missing run", lambda n: n.G.drop(columns=["run"])),
        ("DF loss obj mix", lambda n: n.G.assign(loss=[3.0] * 5 + ["x"] + [3.0] * (len(n.G) - 6))),
        ("DF nan", lambda n: n.G.assign(loss=np.nan)),
        ("DF empty", lambda n: n.G.iloc[:0]),
        ("DF int cols", lambda n: n.G.set_axis(range(5), axis=1)),
        ("DF multiindex cols", lambda n: n.G.set_axis(
            pd.MultiIndex.from_tuples([(c, c) for c in n.G.columns]), axis=1)),
        ("DF dup cols", lambda n: pd.concat([n.G, n.G[["loss"]]], axis=1)),
        ("DF bool loss", lambda n: n.G.assign(loss=True)),
        ("DF complex loss", lambda n: n.G.assign(loss=n.G["loss"] + 0j)),    # was silent
        ("DF complex object", lambda n: n.G.assign(loss=[complex(v) for v in n.G["loss"]])),
        ("DF datetime flops", lambda n: n.G.assign(flops=pd.Timestamp("2020-01-01"))),
        ("Series", lambda n: n.G["loss"]),
    ]],
    *[(f"fit(law={name})", (lambda a: lambda n: delphi.fit(n.L, a))(law)) for name, law in [
        ("None", None), ("int", 5), ("unknown", "zzz"), ("empty", ""), ("upper", "POWER"),
        ("list", ["power"]), ("curve law", "annealing"), ("task law", "task-sigmoid"),
        ("hparam law", "steplaw")]],
    ("fit fixed None-valued", _fit(fixed={"E": None})),
    ("fit fixed str", _fit(fixed={"E": "1.5"})),
    ("fit fixed bool", _fit(fixed={"E": True})),
    ("fit fixed nan", _fit(fixed={"E": np.nan})),
    ("fit fixed list", _fit(fixed=[("E", 1.5)])),
    ("fit bounds bad", _fit(bounds={"alpha": (1, 0)})),
    ("fit bounds scalar", _fit(bounds={"alpha": 0.5})),
    ("fit bounds np", _fit(bounds={"alpha": np.array([0.0, 1.0])})),
    ("fit bounds str value", _fit(bounds={"alpha": ("0", "1")})),
    ("fit bounds list", _fit(bounds=[("alpha", (0, 1))])),
    ("fit delta str", _fit(delta="0.01")),
    ("fit delta neg", _fit(delta=-1)),
    ("fit fit_max_flops str", _fit(fit_max_flops="1e20")),
    ("fit fit_max_flops neg", _fit(fit_max_flops=-1)),
    ("fit warm_start junk", _fit(warm_start={"E": "x"})),
    ("fit warm_start nan", _fit(warm_start={"E": float("nan")})),
    ("fit warm_start partial", _fit(warm_start={"E": 1.8, "A": 2000.0})),
    ("fit warm_start list", _fit(warm_start=[1.8, 2000.0, 0.2])),
    # predict: targets
    *[(f"predict(target={name})", _predict(t)) for name, t in [
        # (lists of targets and dicts of equal-length sequences are several targets, issue 23)
        ("None", None), ("empty dict", {}), ("list of None", [None]), ("empty list", []),
        ("str", "1e22"), ("nan", {"flops": float("nan")}), ("neg", {"flops": -1.0}),
        ("lengths differ", {"flops": np.array([1e22, 1e23]), "params": [1e9]}),
        ("list val bad", {"flops": [1e22, -1.0]}),
        ("unknown key", {"zzz": 1.0}), ("bool", {"flops": True}),          # True was 1 FLOP
        ("np.bool_", {"flops": np.bool_(True)}), ("huge int", {"flops": 10**400}),
        ("huger int", {"flops": 10**5000}), ("DataFrame", pd.DataFrame({"flops": [1e22]})),
        ("Series", pd.Series({"flops": 1e22}))]],
    ("predict(interval=zzz)", _predict({"flops": 1e22}, interval="zzz")),
    ("predict(level=1.5)", _predict({"flops": 1e22}, interval="delta", level=1.5)),
    ("predict(level='0.9')", _predict({"flops": 1e22}, interval="delta", level="0.9")),
    ("predict(level=nan)", _predict({"flops": 1e22}, interval="delta", level=float("nan"))),
    ("predict(n_boot=0)", _predict({"flops": 1e22}, interval="bootstrap", n_boot=0)),
    ("predict(n_boot=2.5)", _predict({"flops": 1e22}, interval="bootstrap", n_boot=2.5)),
    ("predict(n_boot=-1)", _predict({"flops": 1e22}, interval="bootstrap", n_boot=-1)),
    ("predict(n_jobs=0)", _predict({"flops": 1e22}, interval="delta", n_jobs=0)),
    ("predict(n_jobs='a')", _predict({"flops": 1e22}, interval="delta", n_jobs="a")),
    # was a forecast with no interval and a note:
    ("predict(boot_unit=zzz)", _predict({"flops": 1e22}, interval="bootstrap", boot_unit="zzz")),
    ("predict(floor_range=(2,1))", _predict({"flops": 1e22}, floor_range=(2.0, 1.0))),
    ("predict(floor_range=(1,))", _predict({"flops": 1e22}, floor_range=(1.0,))),
    ("predict(floor_points=0)", _predict({"flops": 1e22}, floor_range=(1.0, 1.5),
                                         floor_points=0)),
    # ran without limit (a million forecasts):
    ("predict(floor_points=10**6)", _predict({"flops": 1e22}, floor_range=(1.0, 1.5),
                                             floor_points=10**6)),
    ("predict(candidates=junk)", lambda n: delphi.predict(n.L, {"flops": 1e22}, "auto",
                                                          candidates=["zzz"])),
    ("predict(MoE active > total)", _predict({"params": 1e9, "active_params": 1e10,
                                              "tokens": 1e12})),
    ("Target(flops=-1)", lambda n: delphi.Target(flops=-1)),
    ("Target(flops=nan)", lambda n: delphi.Target(flops=float("nan"))),
    ("Target(params='x')", lambda n: delphi.Target(params="x")),
    ("Target(flops=True)", lambda n: delphi.Target(flops=True)),
    ("Target(active_params > params)", lambda n: delphi.Target(params=1e9, active_params=2e9,
                                                               tokens=1e11)),
    # fitted objects
    ("Fit.predict None", lambda n: n.F.predict(None)),
    ("Fit.predict list", lambda n: n.F.predict([1e9, 1e10])),
    ("Fit.predict missing key", lambda n: n.F.predict({"params": [1e9]})),
    ("Fit.predict nan", lambda n: n.F.predict({"params": [float("nan")], "tokens": [1e10]})),
    ("Fit.predict neg", lambda n: n.F.predict({"params": [-1e9], "tokens": [1e10]})),
    ("Fit.predict str", lambda n: n.F.predict({"params": ["x"], "tokens": [1e10]})),
    ("Fit.predict ragged", lambda n: n.F.predict({"params": [1e9, 2e9], "tokens": [1e10]})),
    ("Fit.predict 2-D", lambda n: n.F.predict({"params": [[1e9]], "tokens": [[1e10]]})),
    ("Estimator.predict unfitted", lambda n: delphi.ScalingLawFitter("power").predict([1e22])),
    ("Estimator.fit None", lambda n: delphi.ScalingLawFitter("power").fit(None)),
    ("Estimator.fit ndarray", lambda n: delphi.ScalingLawFitter("power").fit(np.ones((3, 2)))),
    ("ScalingLawFitter(bogus)", lambda n: delphi.ScalingLawFitter("bogus").fit(n.L)),
    ("backtest None", lambda n: delphi.backtest(None, "power")),
    ("backtest bad fit_max_flops", lambda n: delphi.backtest(n.L, "power", fit_max_flops=-1)),
    ("complete None", lambda n: delphi.complete(None, run="x")),
    ("compare None", lambda n: delphi.compare(None)),
    ("compare list", lambda n: delphi.compare([1, 2])),
    ("bootstrap None", lambda n: delphi.bootstrap(None, n=10)),
    ("bootstrap Ladder", lambda n: delphi.bootstrap(n.L, n=10)),
    ("bootstrap n=0", lambda n: delphi.bootstrap(n.F, n=0)),
    ("bootstrap n=-1", lambda n: delphi.bootstrap(n.F, n=-1)),
    ("get_law(None)", lambda n: delphi.get_law(None)),
    ("fit_arrays junk", lambda n: delphi.fit_arrays("power", None, None)),
    # registry (the constructor's argument; the rest is delphi/registry's own tests)
    ("Registry(None)", lambda n: Registry(None)),
    ("Registry(123)", lambda n: Registry(123).verify()),
    ("Registry(list)", lambda n: Registry(["r.jsonl"])),
    ("Registry(nul)", lambda n: Registry("r\x00.jsonl")),
    ("register(None)", lambda n: n.R.register(None, id="a")),
    ("register(dict)", lambda n: n.R.register({"loss": 2.0}, id="a")),
    ("register id int", lambda n: n.R.register(n.fc, id=5)),
    ("register id None", lambda n: n.R.register(n.fc, id=None)),
    ("register kind zzz", lambda n: n.R.register(n.fc, id="a", kind="zzz")),
    ("register curve junk", lambda n: n.R.register(n.fc, id="a", curve="0.5:2")),
    ("register interval junk", lambda n: n.R.register(n.fc, id="a", interval="x")),
    ("register interval dict missing", lambda n: n.R.register(n.fc, id="a",
                                                              interval={"lower": 1})),
    ("register target_facts nested", lambda n: n.R.register(n.fc, id="a",
                                                            target_facts={"x": {"y": 1}})),
    ("register target_facts nan", lambda n: n.R.register(n.fc, id="a",
                                                         target_facts={"x": float("nan")})),
    ("register settings unknown", lambda n: n.R.register(n.fc, id="a", settings={"zzz": 1})),
    ("register created_at int", lambda n: n.R.register(n.fc, id="a", created_at=5)),
    ("register sign_key int", lambda n: n.R.register(n.fc, id="a", sign_key=5)),
    ("register sign_key missing", lambda n: n.R.register(n.fc, id="a", sign_key="/nonexistent")),
    ("score actual str", lambda n: n.R.score("ok1", "2.5")),
    ("score actual nan", lambda n: n.R.score("ok1", float("nan"))),
    ("score id None", lambda n: n.R.score(None, 2.5)),
    ("score fraction str", lambda n: n.R.score("ok1", 2.5, fraction="1")),
    ("score unit int", lambda n: n.R.score("ok1", 2.5, unit=5)),
    ("verify expect_head int", lambda n: n.R.verify(expect_head=5)),
    ("register_external target list", lambda n: n.R.register_external(
        id="e1", target=[1], loss=2.0, source="s")),
    ("register_external loss str", lambda n: n.R.register_external(
        id="e2", target={"flops": 1e22}, loss="2.0", source="s")),
    ("register_external source None", lambda n: n.R.register_external(
        id="e3", target={"flops": 1e22}, loss=2.0, source=None)),
    ("register_external target unit bad", lambda n: n.R.register_external(
        id="e6", target={"flops": 1e22, "unit": "furlongs"}, loss=2.0, source="s")),
    ("register_external interval tuple 5", lambda n: n.R.register_external(
        id="e7", target={"flops": 1e22}, loss=2.0, source="s", interval=(1, 2, 3, 4, 5))),
    ("register_external made_at int", lambda n: n.R.register_external(
        id="e8", target={"flops": 1e22}, loss=2.0, source="s", made_at=2020)),
    ("register created_at year1 offset", lambda n: n.R.register(
        n.fc, id="a", created_at="0001-01-01T00:00:00+05:00")),
    ("verify trusted list", lambda n: n.R.verify(trusted_keys=["ed25519:x"])),
]


@pytest.mark.parametrize("case,call", REFUSED,
                         ids=[c.values[0] if hasattr(c, "values") else c[0] for c in REFUSED])
def test_misuse_is_a_delphi_error_of_one_line(case, call, ns):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", delphi.DelphiWarning)
        with pytest.raises(DelphiError) as exc:
            call(ns)
    message = str(exc.value)
    assert message.strip(), case
    # One line, unless it is the invalid-rows list (a count, then one row per line).
    assert "\n" not in message or "invalid row(s)" in message, message


def test_the_messages_say_what_is_wrong(ns):
    def error(call):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", delphi.DelphiWarning)
            with pytest.raises(DelphiError) as exc:
                call(ns)
        return exc.value

    e = error(lambda n: delphi.load_ladder({"run": ["a"]}))
    assert isinstance(e, delphi.LadderError) and "got dict" in str(e) and "DataFrame" in str(e)
    assert "NUL character" in str(error(lambda n: delphi.load_ladder("a\x00.csv")))
    assert "File name too long" in str(error(lambda n: delphi.load_ladder("x" * 5000)))
    assert "fixed E must be a number, got NoneType" in str(error(_fit(fixed={"E": None})))
    assert "Huber delta must be a number, got str '0.01'" in str(error(_fit(delta="0.01")))
    assert "missing A, alpha" in str(error(_fit(warm_start={"E": 1.8})))
    e = error(_predict({"flops": 10**400}))
    assert isinstance(e, TargetError) and "an integer of about 401 digits" in str(e)
    assert "got True" in str(error(_predict({"flops": True})))
    assert "unknown bootstrap unit 'zzz'" in str(error(_predict(
        {"flops": 1e22}, interval="bootstrap", boot_unit="zzz")))
    assert "2 to 101 values" in str(error(_predict({"flops": 1e22}, floor_range=(1.0, 1.5),
                                                   floor_points=10**6)))
    e = error(lambda n: delphi.fit(n.G.assign(loss=n.G["loss"] + 0.5j), "power"))
    assert "column 'loss' is not a number: (3.2237+0.5j)" in str(e)
    assert "MultiIndex" in str(error(lambda n: delphi.fit(n.G.set_axis(
        pd.MultiIndex.from_tuples([(c, "x") for c in n.G.columns]), axis=1), "power")))
    assert "params (2,), tokens (1,)" in str(error(
        lambda n: n.F.predict({"params": [1e9, 2e9], "tokens": [1e10]})))
    e = error(_predict({"params": 1e9, "active_params": 1e10, "tokens": 1e12}))
    assert "active_params (CLI --target-active-params) 1e+10 exceeds its params" in str(e)
    e = error(lambda n: delphi.ScalingLawFitter("power").predict([1e22]))
    # scikit-learn's convention: hasattr() and `except AttributeError` still work
    assert isinstance(e, NotFittedError) and isinstance(e, AttributeError)
    assert not hasattr(delphi.ScalingLawFitter("power"), "params_")
    assert isinstance(error(lambda n: Registry(None)), RegistryError)


def test_what_is_accepted_still_is(ns):
    # Paths in every spelling, numpy numbers, a scalar beside arrays.
    import os

    class Spelled(os.PathLike):
        def __fspath__(self):
            return GOOD

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", delphi.DelphiWarning)
        for source in (GOOD.encode(), Path(GOOD), Spelled()):
            assert len(delphi.load_ladder(source).table) == len(ns.G)
        f = delphi.fit(ns.L, "power", delta=np.float32(1e-3), fixed={"E": np.float64(1.8)})
    assert f.delta == pytest.approx(1e-3) and f.fixed == {"E": 1.8}
    pred = ns.F.predict({"params": [1e9, 2e9], "tokens": 1e10})     # a scalar broadcasts
    assert pred.shape == (2,) and np.all(np.isfinite(pred))
    assert math.isfinite(delphi.Target(flops=np.int64(10**18)).flops)
    assert delphi.Target(flops=decimal.Decimal("1e22")).flops == 1e22
    assert delphi.Target(params=1e9, active_params=1e9, tokens=1e11).active_params == 1e9
