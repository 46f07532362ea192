"""delphi.plot: figures of fits, forecasts, backtests, isoFLOP analyses and completions.

Each test builds real delphi objects (bundled ladders, or small synthetic ladders with known
laws) and checks what the artists hold: the points drawn are the points fitted, interval bars
span exactly the interval, curves are the fitted law, axes are labelled with units.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

import delphi  # noqa: E402
from delphi.analyses.isoflop import isoflop_analysis  # noqa: E402
from delphi.laws.curves import ANNEALING  # noqa: E402
from delphi.plot import (plot_backtest, plot_completion, plot_fit, plot_forecast,  # noqa: E402
                         plot_isoflop, plot_isoflop_frontier)
from delphi.schedules import Schedule, features  # noqa: E402

CHINCHILLA = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def lines(ax, gid):
    return [line for line in ax.get_lines() if line.get_gid() == gid]


def line(ax, gid):
    found = lines(ax, gid)
    assert len(found) == 1, f"expected one line {gid!r}, found {len(found)}"
    return found[0]


def collection(ax, gid) -> LineCollection:
    found = [c for c in ax.collections if c.get_gid() == gid]
    assert len(found) == 1, f"expected one collection {gid!r}, found {len(found)}"
    return found[0]


def legend_texts(ax) -> list[str]:
    legend = ax.get_legend()
    return [t.get_text() for t in legend.get_texts()] if legend else []


def saved(ax, path) -> None:
    ax.figure.savefig(path)
    assert path.stat().st_size > 1000


# ----------------------------------------------------------------------------- objects
@pytest.fixture(scope="module")
def moe():
    return delphi.load_ladder("marin-moe-535b")


@pytest.fixture(scope="module")
def hero(moe):
    return delphi.predict(moe, {"flops": 2.61e24, "name": "535B-A23B hero"}, "power",
                          fixed={"E": 1.5})


@pytest.fixture(scope="module")
def dense():
    return delphi.load_ladder("marin-delphi-dense")


def synthetic_isoflop(noise=0.002, seed=0) -> delphi.Ladder:
    """5 budgets x 7 sizes on Chinchilla's law, sizes centred on N* ~ C^0.5."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in (1e18, 3e18, 1e19, 3e19, 1e20):
        for k in np.linspace(-1.5, 1.5, 7):
            n = 0.09 * c ** 0.5 * np.exp(k)
            d = c / (6 * n)
            loss = (CHINCHILLA["E"] + CHINCHILLA["A"] / n ** CHINCHILLA["alpha"]
                    + CHINCHILLA["B"] / d ** CHINCHILLA["beta"])
            rows.append({"run": f"C{c:.0e}-N{n:.4g}", "params": n, "tokens": d,
                         "loss": loss * (1 + noise * rng.standard_normal())})
    return delphi.Ladder(pd.DataFrame(rows), name="synthetic-isoflop")


def synthetic_rung() -> delphi.Ladder:
    """One finished run on a cosine schedule whose losses follow a known annealing law."""
    true = {"L0": 2.3, "A": 0.6, "C": 0.25, "alpha": 0.5}
    sched = Schedule.parse("cosine:warmup=200,final=0.1", peak_lr=2e-3, total_steps=20000)
    steps = np.arange(250, 20001, 250)
    f = features(sched, steps)
    rng = np.random.default_rng(11)
    loss = ANNEALING.predict(true, {"S1": f["S1"], "S2": f["S2"]}) * (
        1 + 0.002 * rng.standard_normal(steps.size))
    frame = pd.DataFrame({"run": "d2048", "step": steps, "loss": loss, "flops": 1e18 * steps,
                          "peak_lr": 2e-3, "total_steps": 20000, "fraction": steps / 20000})
    return delphi.Ladder(frame, name="rung", schedule="cosine:warmup=200,final=0.1")


# ----------------------------------------------------------------------------- plot_fit / forecast
def test_forecast_moe_points_curve_target_and_excluded_rung(hero, moe, tmp_path):
    ax = plot_forecast(hero, ladder=moe)
    fit = hero.fit
    pts = line(ax, "fit-points")
    assert len(pts.get_xdata()) == fit.n_points == 3
    np.testing.assert_array_equal(pts.get_xdata(), fit.x["flops"])
    np.testing.assert_array_equal(pts.get_ydata(), fit.y)

    # 3 runs for 2 free parameters: no interval (1 residual dof), so no bars are drawn
    assert hero.interval is None
    assert not [c for c in ax.collections if c.get_gid() == "target-interval"]
    star = line(ax, "target")
    assert star.get_xdata().tolist() == [2.61e24]
    assert star.get_ydata().tolist() == [hero.loss]

    # the law over the data, then dashed to the target, where it equals the forecast
    curve, ext = line(ax, "law-curve"), line(ax, "law-extrapolation")
    np.testing.assert_allclose(curve.get_ydata(), fit.predict({"flops": curve.get_xdata()}))
    # solid over the fitted runs only (not out to the excluded rung), then dashed
    assert curve.get_xdata()[0] == fit.x["flops"].min()
    assert curve.get_xdata()[-1] == fit.x["flops"].max() == 1.38e21
    assert ext.get_xdata()[0] == 1.38e21
    assert ext.get_linestyle() == "--"
    assert ext.get_xdata()[-1] == 2.61e24
    assert ext.get_ydata()[-1] == pytest.approx(hero.loss, rel=1e-12)

    # the crashed d2048 rung is excluded from the fit and drawn where the ladder has it
    ex = line(ax, "excluded-points")
    assert ex.get_xdata().tolist() == [7.74e21]
    assert ex.get_ydata().tolist() == [2.4745]
    assert ex.get_marker() != pts.get_marker()
    assert any("d2048" in t for t in legend_texts(ax))

    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "training compute C [FLOPs]"
    assert ax.get_ylabel() == "loss [nats/token]"
    assert "marin-moe-535b" in ax.get_title()
    saved(ax, tmp_path / "hero.png")


def test_forecast_without_ladder_names_the_excluded_run(hero):
    ax = plot_forecast(hero)
    assert not lines(ax, "excluded-points")
    assert any("not drawn" in t and "d2048" in t for t in legend_texts(ax))


def test_plot_forecast_is_plot_fit_with_the_forecast_as_target(hero):
    a = plot_forecast(hero)
    b = plot_fit(hero.fit, target=hero)
    for gid in ("fit-points", "law-curve", "law-extrapolation", "target"):
        np.testing.assert_array_equal(line(a, gid).get_xydata(), line(b, gid).get_xydata())


def test_target_intervals_are_drawn_exactly(dense):
    forecast = delphi.predict(dense, {"flops": 1e23}, "power", interval="delta")
    iv = forecast.interval
    assert iv is not None
    ax = plot_forecast(forecast)
    # the new-run interval is one segment from exactly lower to exactly upper at the target C
    (seg,) = collection(ax, "target-interval").get_segments()
    assert seg.tolist() == [[1e23, iv.lower], [1e23, iv.upper]]
    (seg,) = collection(ax, "target-expected-interval").get_segments()
    assert seg.tolist() == [[1e23, iv.mean_lower], [1e23, iv.mean_upper]]
    assert collection(ax, "target-expected-interval").get_linewidth()[0] > \
        collection(ax, "target-interval").get_linewidth()[0]


def test_chinchilla_fit_drawn_at_6nd_and_against_n(dense, tmp_path):
    forecast = delphi.predict(dense, {"params": 7e9, "tokens": 1.4e11}, "chinchilla",
                              interval="delta")
    fit = forecast.fit
    ax = plot_forecast(forecast)
    pts = line(ax, "fit-points")
    assert len(pts.get_xdata()) == fit.n_points == 7
    np.testing.assert_allclose(pts.get_xdata(), 6 * fit.x["params"] * fit.x["tokens"])
    # the curve follows the runs' allocation and ends on the forecast
    ext = line(ax, "law-extrapolation")
    assert ext.get_xdata()[-1] == pytest.approx(6 * 7e9 * 1.4e11, rel=1e-12)
    assert ext.get_ydata()[-1] == pytest.approx(forecast.loss, rel=1e-9)
    # 7 runs for 5 parameters: too few residual dof for an interval, so none is drawn
    assert forecast.interval is None
    assert not [c for c in ax.collections if c.get_gid() == "target-interval"]

    by_n = plot_fit(fit, x="params", target=forecast)
    np.testing.assert_array_equal(line(by_n, "fit-points").get_xdata(), fit.x["params"])
    assert line(by_n, "target").get_xdata().tolist() == [7e9]
    assert by_n.get_xlabel() == "model size N [parameters]"
    assert by_n.get_xscale() == "log"
    by_d = plot_fit(fit, x="tokens")
    np.testing.assert_array_equal(line(by_d, "fit-points").get_xdata(), fit.x["tokens"])
    assert by_d.get_xlabel() == "training tokens D [tokens]"
    saved(by_n, tmp_path / "dense_n.png")


def test_plot_fit_with_a_target_and_no_forecast(dense):
    fit = delphi.fit(dense, "power")
    target = delphi.Target(flops=1e22, name="1e22 run")
    ax = plot_fit(fit, target=target)
    star = line(ax, "target")
    assert star.get_xdata().tolist() == [1e22]
    assert star.get_ydata()[0] == pytest.approx(fit.predict({"flops": [1e22]})[0], rel=1e-12)
    assert not [c for c in ax.collections if c.get_gid() == "target-interval"]
    assert line(ax, "law-extrapolation").get_xdata()[-1] == 1e22
    # without a target the curve covers the data only
    ax = plot_fit(fit)
    assert not lines(ax, "law-extrapolation")
    assert line(ax, "law-curve").get_xdata()[-1] == pytest.approx(3e20)


def test_draws_on_the_given_axes_without_new_figures_or_global_changes(hero):
    fig, (a, b) = plt.subplots(1, 2)
    before = plt.get_fignums()
    rc = dict(matplotlib.rcParams)
    out = plot_forecast(hero, ax=b)
    assert out is b
    assert plt.get_fignums() == before
    assert not a.get_lines()
    assert dict(matplotlib.rcParams) == rc


def test_plot_fit_errors(hero, dense):
    with pytest.raises(TypeError, match="Fit"):
        plot_fit(hero)                       # a Forecast is not a Fit
    with pytest.raises(TypeError, match="Forecast"):
        plot_forecast(hero.fit)
    with pytest.raises(TypeError, match="Axes"):
        plot_fit(hero.fit, ax="not axes")
    with pytest.raises(TypeError, match="target"):
        plot_fit(hero.fit, target={"flops": 1e24})
    with pytest.raises(TypeError, match="Ladder"):
        plot_fit(hero.fit, ladder="marin-moe-535b")
    with pytest.raises(delphi.LawError, match="N and D"):
        plot_fit(hero.fit, x="params")      # a power law in C has no N axis
    with pytest.raises(delphi.LawError, match="x must be"):
        plot_fit(hero.fit, x="steps")
    chin = delphi.fit(dense, "chinchilla")
    with pytest.raises(delphi.TargetError):
        plot_fit(chin, target=delphi.Target(flops=1e22))   # chinchilla needs N and D
    completion = delphi.complete(synthetic_rung(), "d2048", upto_fraction=0.5)
    with pytest.raises(delphi.LawError, match="plot_completion"):
        plot_fit(completion.fit)


# ----------------------------------------------------------------------------- plot_backtest
def test_backtest_relative_errors_intervals_and_summary(dense, tmp_path):
    # fitted up to 1.8e20: 6 runs, 3 residual dof, so the held-out run has an interval
    bt = delphi.backtest(dense, "power", fit_max_flops=1.8e20)
    ax = plot_backtest(bt)
    pts = line(ax, "rel-errors")
    assert pts.get_xdata().tolist() == [r.flops for r in bt.rows]
    assert pts.get_ydata().tolist() == [r.rel_error for r in bt.rows]
    segs = collection(ax, "interval-bars").get_segments()
    assert len(segs) == len(bt.rows) == 1
    for seg, r in zip(segs, bt.rows):
        assert seg[0, 1] == pytest.approx((r.lower - r.predicted) / r.predicted, rel=1e-12)
        assert seg[1, 1] == pytest.approx((r.upper - r.predicted) / r.predicted, rel=1e-12)
        assert (seg[0, 1] <= r.rel_error <= seg[1, 1]) == r.inside
    zero = line(ax, "zero-line")
    assert set(zero.get_ydata()) == {0.0}
    s = bt.summary
    assert f"{s['mean_abs_rel_error']:.2%}" in ax.get_title()
    assert f"{s['max_abs_rel_error']:.2%}" in ax.get_title()
    assert f"coverage {s['coverage']:.0%}" in ax.get_title()
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "training compute C [FLOPs]"
    assert not lines(ax, "outside-interval")     # every run fell inside its interval
    saved(ax, tmp_path / "backtest.png")


def test_backtest_rings_runs_outside_their_interval(dense):
    bt = delphi.backtest(dense, "power", leave_one_budget_out=True, fixed={"E": 2.5},
                         level=0.5)
    outside = [r for r in bt.rows if r.inside is False]
    assert outside and len(outside) < len(bt.rows)   # a misfit floor and narrow intervals
    ax = plot_backtest(bt)
    ring = line(ax, "outside-interval")
    assert ring.get_xdata().tolist() == [r.flops for r in outside]
    assert ring.get_ydata().tolist() == [r.rel_error for r in outside]
    assert len(line(ax, "rel-errors").get_xdata()) == len(bt.rows)


def test_backtest_errors(hero):
    with pytest.raises(TypeError, match="Backtest"):
        plot_backtest(hero)


# ----------------------------------------------------------------------------- plot_isoflop
@pytest.fixture(scope="module")
def iso():
    ladder = synthetic_isoflop()
    return ladder, isoflop_analysis(ladder, n_boot=50)


def test_isoflop_budgets_vertices_and_frontier(iso, tmp_path):
    ladder, result = iso
    fig, (ax, fax) = plt.subplots(1, 2)
    out = plot_isoflop(result, ladder, ax=ax, frontier_ax=fax)
    assert out is ax
    budgets = result.budgets
    pts = lines(ax, "budget-points")
    assert len(pts) == len(budgets) == 5
    colors = {tuple(p.get_color()) for p in pts}
    assert len(colors) == 5                              # one colour per budget
    finals, _ = ladder.final_points()
    for p, b in zip(pts, budgets):
        assert len(p.get_xdata()) == b.n_sizes == 7
        want = finals.set_index("run").loc[list(b.runs)]
        np.testing.assert_array_equal(p.get_xdata(), want["params"])
        np.testing.assert_array_equal(p.get_ydata(), want["loss"])
    vertices = lines(ax, "vertex")
    assert [v.get_xdata()[0] for v in vertices] == [b.params for b in budgets]
    assert [v.get_ydata()[0] for v in vertices] == [b.loss for b in budgets]
    # each drawn parabola has its minimum at the budget's vertex (to the grid's resolution)
    for curve, b in zip(lines(ax, "budget-curve"), budgets):
        x, y = curve.get_xdata(), curve.get_ydata()
        assert x[np.argmin(y)] == pytest.approx(b.params, rel=0.02)
        assert y.min() == pytest.approx(b.loss, abs=1e-4)
    assert len([c for c in ax.collections if c.get_gid() == "vertex-interval"]) == 5
    assert ax.get_xscale() == "log"
    assert ax.get_xlabel() == "model size N [parameters]"
    assert ax.get_ylabel() == "final loss [nats/token]"
    assert f"{result.params_law.exponent:.3f}" in ax.get_title()

    opt = line(fax, "optima")
    assert opt.get_xdata().tolist() == [b.flops for b in budgets]
    assert opt.get_ydata().tolist() == [b.params for b in budgets]
    law = line(fax, "power-law")
    np.testing.assert_allclose(law.get_ydata(), result.params_law.predict(law.get_xdata()))
    assert fax.get_xscale() == fax.get_yscale() == "log"
    assert fax.get_xlabel() == "training compute C [FLOPs]"
    saved(ax, tmp_path / "isoflop.png")


def test_isoflop_without_ladder_draws_the_vertices(iso):
    _, result = iso
    ax = plot_isoflop(result)
    assert not lines(ax, "budget-points")
    assert len(lines(ax, "vertex")) == len(result.budgets)
    tokens = plot_isoflop_frontier(result, quantity="tokens")
    assert line(tokens, "optima").get_ydata().tolist() == [b.tokens for b in result.budgets]
    assert tokens.get_ylabel() == "compute-optimal tokens D* [tokens]"


def test_isoflop_errors(iso, dense):
    ladder, result = iso
    with pytest.raises(TypeError, match="IsoflopResult"):
        plot_isoflop(delphi.fit(dense, "power"))
    with pytest.raises(TypeError, match="Ladder"):
        plot_isoflop(result, ladder.table)
    with pytest.raises(delphi.LadderError, match="not among the finished runs"):
        plot_isoflop(result, dense)
    with pytest.raises(delphi.LadderError, match="quantity"):
        plot_isoflop_frontier(result, quantity="flops")


def test_isoflop_porian_refinedweb(data_dir, tmp_path):
    ladder = delphi.load_ladder("porian2024-rw")
    result = isoflop_analysis(ladder, method="akima", n_boot=50)
    ax = plot_isoflop(result, ladder)
    assert len(lines(ax, "budget-points")) == len(result.budgets) == 12
    assert sum(len(p.get_xdata()) for p in lines(ax, "budget-points")) == \
        sum(b.n_sizes for b in result.budgets)
    assert len(lines(ax, "vertex")) == 12
    saved(ax, tmp_path / "porian.png")


# ----------------------------------------------------------------------------- plot_completion
@pytest.fixture(scope="module")
def rung():
    return synthetic_rung()


def test_completion_checkpoints_trajectory_and_final(rung, tmp_path):
    c = delphi.complete(rung, "d2048", upto_fraction=0.6)
    ax = plot_completion(c, rung)
    fitted = line(ax, "fitted-checkpoints")
    held = line(ax, "held-out-checkpoints")
    assert len(fitted.get_xdata()) == c.n_checkpoints == 48
    assert fitted.get_xdata().max() == c.fitted_upto_step == 12000
    assert len(held.get_xdata()) == len(rung.table) - c.n_checkpoints
    assert held.get_xdata().min() > c.fitted_upto_step

    solid, dashed = lines(ax, "trajectory")
    assert solid.get_xdata()[-1] == c.fitted_upto_step
    assert dashed.get_linestyle() == "--"
    assert dashed.get_xdata()[-1] == c.total_steps == 20000
    assert dashed.get_ydata()[-1] == pytest.approx(c.loss, rel=1e-12)
    # the solid part is the fitted law at the fitted checkpoints' schedule features
    sched = Schedule.parse(rung.schedule, peak_lr=2e-3, total_steps=20000)
    f = features(sched, np.array([12000]), momentum=0.999)
    assert solid.get_ydata()[-1] == pytest.approx(
        c.fit.predict({"S1": f["S1"], "S2": f["S2"]})[0], rel=1e-12)

    star = line(ax, "predicted-final")
    assert star.get_xydata().tolist() == [[20000, c.loss]]
    assert line(ax, "actual-final").get_xydata().tolist() == [[20000, c.actual]]
    assert line(ax, "fit-cutoff").get_xdata()[0] == 12000
    assert ax.get_xlabel() == "training step"
    assert ax.get_ylabel() == "loss [nats/token]"
    saved(ax, tmp_path / "completion.png")


def test_completion_on_every_checkpoint_has_no_held_out(rung):
    c = delphi.complete(rung, "d2048")
    ax = plot_completion(c, rung)
    assert len(line(ax, "fitted-checkpoints").get_xdata()) == c.n_checkpoints == len(rung.table)
    assert not lines(ax, "held-out-checkpoints")


def test_completion_errors(rung, dense, hero):
    c = delphi.complete(rung, "d2048", upto_fraction=0.5)
    with pytest.raises(TypeError, match="Completion"):
        plot_completion(hero, rung)
    with pytest.raises(TypeError, match="Ladder"):
        plot_completion(c, "rung")
    with pytest.raises(delphi.LadderError, match="not in ladder"):
        plot_completion(c, dense)


def test_isoflop_single_budget_draws_vertex_without_power_law():
    # One budget (issue 9 §5): a vertex, no power law across budgets; the plots must not need one.
    import warnings as _w

    n = np.geomspace(1e8, 1e9, 7)
    loss = 2.0 + 0.1 * np.log(n / 3e8) ** 2  # exact parabola in log N, vertex at 3e8
    table = pd.DataFrame({"run": [f"r{i}" for i in range(7)], "params": n,
                          "tokens": 1e19 / (6 * n), "flops": 1e19, "loss": loss})
    with _w.catch_warnings():
        _w.simplefilter("ignore")
        result = isoflop_analysis(delphi.Ladder(table))
    assert result.params_law is None
    fig, (ax, fax) = plt.subplots(1, 2)
    plot_isoflop(result, ax=ax, frontier_ax=fax)
    assert "no power law" in ax.get_title()
    assert [ln for ln in fax.get_lines() if ln.get_gid() == "power-law"] == []
    (star,) = [ln for ln in ax.get_lines() if ln.get_gid() == "vertex"]
    assert star.get_xdata()[0] == pytest.approx(3e8, rel=1e-6)
    plt.close(fig)
