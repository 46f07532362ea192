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
from delphi.errors import FitWarning  # noqa: E402
from delphi.analyses.isoflop import isoflop_analysis  # noqa: E402
from delphi.laws.curves import ANNEALING  # noqa: E402
from delphi.plot import (plot_backtest, plot_completion, plot_fit, plot_forecast,  # noqa: E402
                         plot_isoflop, plot_isoflop_frontier, plot_residuals)
from delphi.schedules import Schedule, features  # noqa: E402

from bundled import load  # noqa: E402

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
    # the fit's own interval only (an empty reference class): with 1 residual dof there is
    # none, and the plot must say why (the default adds the reference class's:
    # tests/test_reference.py)
    from delphi.reference import COLUMNS, ReferenceClass
    none = ReferenceClass(rows=pd.DataFrame(columns=list(COLUMNS)))
    return delphi.predict(moe, {"flops": 2.61e24, "name": "535B-A23B hero"}, "power",
                          fixed={"E": 1.5}, reference=none)


@pytest.fixture(scope="module")
def dense():
    return load("marin-delphi-dense")      # with its known FLOP-convention warning


# The chinchilla law on the dense ladder: its 7 runs do not identify the floor E.
E_NOT_IDENTIFIED = r"not identified by the ladder: .* for E in \[0, "


@pytest.fixture(scope="module")
def dense_chinchilla(dense):
    with pytest.warns(FitWarning, match=E_NOT_IDENTIFIED):
        return delphi.fit(dense, "chinchilla")


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
    with pytest.warns(FitWarning, match=E_NOT_IDENTIFIED):
        forecast = delphi.predict(dense, {"params": 7e9, "tokens": 1.4e11}, "chinchilla",
                                  interval=None)
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


def test_plot_fit_errors(hero, dense_chinchilla, half_completion):
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
    with pytest.raises(delphi.TargetError):
        plot_fit(dense_chinchilla, target=delphi.Target(flops=1e22))   # chinchilla needs N and D
    with pytest.raises(delphi.LawError, match="plot_completion"):
        plot_fit(half_completion.fit)


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
    with pytest.raises(TypeError, match="a delphi Ladder or a pandas DataFrame of runs"):
        plot_isoflop(result, 3)
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


@pytest.fixture(scope="module")
def half_completion(rung):
    # Half way through, the LR has not come down far enough to pin the decay's response.
    with pytest.warns(FitWarning, match=r"run 'd2048': the LR-decay response is not "
                                        r"identified by these checkpoints"):
        return delphi.complete(rung, "d2048", upto_fraction=0.5)


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


def test_completion_errors(rung, dense, hero, half_completion):
    c = half_completion
    with pytest.raises(TypeError, match="Completion"):
        plot_completion(hero, rung)
    with pytest.raises(TypeError, match="Ladder"):
        plot_completion(c, "rung")
    with pytest.raises(delphi.LadderError, match="not in ladder"):
        plot_completion(c, dense)


def test_isoflop_single_budget_draws_vertex_without_power_law():
    # One budget (issue 9 §5): a vertex, no power law across budgets; the plots must not need one.
    n = np.geomspace(1e8, 1e9, 7)
    loss = 2.0 + 0.1 * np.log(n / 3e8) ** 2  # exact parabola in log N, vertex at 3e8
    table = pd.DataFrame({"run": [f"r{i}" for i in range(7)], "params": n,
                          "tokens": 1e19 / (6 * n), "flops": 1e19, "loss": loss})
    result = isoflop_analysis(delphi.Ladder(table))
    assert result.params_law is None
    fig, (ax, fax) = plt.subplots(1, 2)
    plot_isoflop(result, ax=ax, frontier_ax=fax)
    assert "no power law" in ax.get_title()
    assert [ln for ln in fax.get_lines() if ln.get_gid() == "power-law"] == []
    (star,) = [ln for ln in ax.get_lines() if ln.get_gid() == "vertex"]
    assert star.get_xdata()[0] == pytest.approx(3e8, rel=1e-6)
    plt.close(fig)


# ----------------------------------------------------------------------------- issue 12: figures
def synthetic_power(extra=True) -> delphi.Ladder:
    """8 finished runs exactly on L = 1.8 + 60 C^-0.1, a run stopped at half its length and a
    run 30% above the trend (diverged)."""
    rows = [{"run": f"r{i}", "flops": c, "loss": 1.8 + 60 * c ** -0.1, "fraction": 1.0}
            for i, c in enumerate(np.geomspace(1e18, 1e21, 8))]
    if extra:
        rows.append({"run": "crash", "flops": 3e21, "loss": 1.8 + 60 * 3e21 ** -0.1 + 0.05,
                     "fraction": 0.5})
        rows.append({"run": "blowup", "flops": 3e19, "loss": (1.8 + 60 * 3e19 ** -0.1) * 1.3,
                     "fraction": 1.0})
    return delphi.Ladder(pd.DataFrame(rows), name="synthetic-power")


def note_text(ax) -> str:
    found = [t for t in ax.texts if t.get_gid() == "warnings-note"]
    assert len(found) == 1, f"expected one note box, found {len(found)}"
    return found[0].get_text()


def display_points(artists) -> np.ndarray:
    """Every data point of the given Line2Ds, in display pixels."""
    return np.vstack([a.get_transform().transform(np.asarray(a.get_xydata(), float))
                      for a in artists])


def assert_legend_off_the_data(ax, artists) -> str:
    """Issue 23: the legend is compact (x-small, at most two columns) and sits inside the axes
    covering none of ``artists``' points, or under the axes; never beside them. Returns
    ``"inside"`` or ``"below"``."""
    legend = ax.get_legend()
    assert legend is not None
    ax.figure.canvas.draw()
    box, bb = ax.get_window_extent(), legend.get_window_extent()
    assert all(t.get_fontsize() < 8 for t in legend.get_texts())      # x-small
    assert len({round(t.get_window_extent().x0) for t in legend.get_texts()}) <= 2
    if bb.x0 >= box.x0 and bb.x1 <= box.x1 and bb.y0 >= box.y0 and bb.y1 <= box.y1:
        pts = display_points(artists)
        covered = ((pts[:, 0] >= bb.x0) & (pts[:, 0] <= bb.x1) & (pts[:, 1] >= bb.y0)
                   & (pts[:, 1] <= bb.y1))
        assert not covered.any(), "the legend covers data"
        return "inside"
    assert bb.y1 <= box.y0 and bb.x0 >= ax.figure.bbox.x0, "the legend is beside the axes"
    return "below"


def residual_axes(ax):
    (rax,) = [a for a in ax.figure.axes if a.get_gid() == "residual-axes"]
    return rax


def test_legend_marks_fixed_parameters_with_greek_letters(hero):
    ax = plot_forecast(hero)
    (label,) = [t for t in legend_texts(ax) if t.startswith("power law")]
    p = hero.fit.params
    assert "E = 1.5 (fixed)" in label
    assert f"A = {p['A']:.4g}" in label and "(fixed)" not in label.split("A =")[1]
    assert f"α = {p['alpha']:.4g}" in label
    assert "alpha" not in label
    assert "E = 1.5 fixed" in ax.get_title()


def test_fit_warnings_are_a_short_box_on_the_figure_when_asked(dense_chinchilla):
    fit = dense_chinchilla                       # E not identified on this ladder
    assert len(fit.warnings) >= 3
    ax = plot_fit(fit, warnings=True)
    text = note_text(ax)
    assert text.startswith(f"⚠ {len(fit.warnings)} fit warnings: not identified")
    assert f"and {len(fit.warnings) - 1} more in the fit's report" in text
    assert len(text) < 400 and max(len(line) for line in text.splitlines()) <= 95
    # issue 23: the warning is whole, not cut with "…"
    assert "…" not in text and "arbitrary within that range" in text.replace("\n", " ")
    assert not [t for t in plot_fit(fit).texts if t.get_gid() == "warnings-note"]


def test_forecast_without_warnings_has_no_box_and_says_why_no_interval(hero):
    assert not hero.fit.warnings and not hero.warnings
    ax = plot_forecast(hero)
    assert not [t for t in ax.texts if t.get_gid() == "warnings-note"]
    (label,) = [t for t in ax.texts if t.get_gid() == "target-label"]
    assert label.get_text().startswith(f"{hero.loss:.4f}\nno interval: 1 residual")


def test_target_interval_drawn_over_a_hollow_marker_with_caps_and_values(dense):
    forecast = delphi.predict(dense, {"flops": 1e23}, "power", interval="delta")
    iv = forecast.interval
    ax = plot_forecast(forecast)
    star = line(ax, "target")
    assert star.get_markerfacecolor() == "none"
    bars = collection(ax, "target-interval")
    assert bars.get_zorder() > star.get_zorder()
    assert collection(ax, "target-expected-interval").get_zorder() > star.get_zorder()
    caps = line(ax, "target-interval-caps")
    assert caps.get_ydata().tolist() == [iv.lower, iv.upper]
    assert caps.get_zorder() > star.get_zorder()
    (label,) = [t for t in ax.texts if t.get_gid() == "target-label"]
    assert label.get_text() == (f"{forecast.loss:.4f}\n[{iv.lower:.4f}, {iv.upper:.4f}]\n"
                                f"({iv.level:.0%}, one new run)")
    # the label sits under the target, inside the y range
    lo, hi = ax.get_ylim()
    assert lo < iv.lower and forecast.loss - lo > 0.12 * (hi - lo)


def test_excluded_runs_one_marker_and_legend_entry_per_reason():
    ladder = synthetic_power()
    fit = delphi.fit(ladder, "power")
    reasons = {e.run: e.reason for e in fit.exclusions}
    assert reasons["crash"].startswith("unfinished")
    assert reasons["blowup"].startswith("diverged or mis-tuned:")
    ax = plot_fit(fit, ladder=ladder)
    excluded = lines(ax, "excluded-points")
    assert len(excluded) == 2
    assert excluded[0].get_marker() != excluded[1].get_marker()
    by_label = {ln.get_label(): ln.get_xydata().tolist() for ln in excluded}
    assert by_label == {
        "excluded: unfinished (1): crash": [[3e21, 1.8 + 60 * 3e21 ** -0.1 + 0.05]],
        "excluded: diverged or mis-tuned (1): blowup": [[3e19,
                                                         (1.8 + 60 * 3e19 ** -0.1) * 1.3]]}
    texts = legend_texts(ax)
    assert "excluded: unfinished (1): crash" in texts


def test_residual_panel_log_residuals_and_excluded_runs():
    ladder = synthetic_power()
    fit = delphi.fit(ladder, "power")
    ax = plot_fit(fit, ladder=ladder, residuals=True)
    rax = residual_axes(ax)
    assert rax is not ax and rax.get_xscale() == "log"
    pts = line(rax, "residual-points")
    c = np.geomspace(1e18, 1e21, 8)
    np.testing.assert_allclose(pts.get_xdata(), c)
    # exact data: residuals ~ 0 (to the optimiser's tolerance)
    np.testing.assert_allclose(pts.get_ydata(), 0.0, atol=1e-8)
    p = fit.params
    want = {"excluded: unfinished (1): crash":
            np.log(p["E"] + p["A"] * 3e21 ** -p["alpha"]) - np.log(1.8 + 60 * 3e21 ** -0.1
                                                                   + 0.05),
            "excluded: diverged or mis-tuned (1): blowup":
            np.log(p["E"] + p["A"] * 3e19 ** -p["alpha"]) - np.log((1.8 + 60 * 3e19 ** -0.1)
                                                                   * 1.3)}
    got = {ln.get_label(): ln.get_ydata()[0] for ln in lines(rax, "excluded-residuals")}
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == pytest.approx(want[k], rel=1e-9)
    assert got["excluded: diverged or mis-tuned (1): blowup"] == pytest.approx(-np.log(1.3),
                                                                               rel=1e-6)
    (band,) = [p for p in rax.patches if p.get_gid() == "huber-delta"]
    # the band spans -delta..+delta in data units (y of its corners in axes-blended coords)
    assert (band.get_y(), band.get_y() + band.get_height()) == pytest.approx(
        (-fit.delta, fit.delta), rel=1e-12)
    assert rax.get_xlabel() == "training compute C [FLOPs]"
    assert ax.get_xlabel() == ""     # shared x: the label is under the residuals


def test_plot_residuals_alone_on_a_real_ladder(dense):
    fit = delphi.fit(dense, "power")
    ax = plot_residuals(fit)
    pts = line(ax, "residual-points")
    np.testing.assert_array_equal(pts.get_xdata(), fit.x["flops"])
    p = fit.params
    want = np.log(p["E"] + p["A"] * fit.x["flops"] ** -p["alpha"]) - np.log(fit.y)
    np.testing.assert_allclose(pts.get_ydata(), want, rtol=1e-9, atol=1e-12)
    assert ax.get_gid() == "residual-axes"
    assert "Huber δ = 0.001" in ax.get_title()
    with pytest.raises(TypeError, match="Fit"):
        plot_residuals(dense)


def test_chinchilla_curve_says_along_which_allocation(dense):
    # 6 runs at one tokens-per-parameter ratio D/N = 20
    rows = []
    for i, n in enumerate(np.geomspace(1e7, 3e9, 9)):
        d = 20 * n
        loss = (CHINCHILLA["E"] + CHINCHILLA["A"] / n ** CHINCHILLA["alpha"]
                + CHINCHILLA["B"] / d ** CHINCHILLA["beta"])
        rows.append({"run": f"n{i}", "params": n, "tokens": d, "loss": loss})
    # a second, independent D/N so that N and D are identified; its runs are off-allocation
    for i, n in enumerate(np.geomspace(1e7, 3e9, 5)):
        d = 5 * n
        loss = (CHINCHILLA["E"] + CHINCHILLA["A"] / n ** CHINCHILLA["alpha"]
                + CHINCHILLA["B"] / d ** CHINCHILLA["beta"])
        rows.append({"run": f"m{i}", "params": n, "tokens": d, "loss": loss})
    # one D/N: the text names it
    one = delphi.Ladder(pd.DataFrame(rows[:9]), name="one-ratio")
    fit = delphi.fit(one, "chinchilla", fixed={"E": 1.69, "beta": 0.28})
    (label,) = [t for t in legend_texts(plot_fit(fit)) if t.startswith("chinchilla law")]
    assert "along the ladder's tokens/param D/N ≈ 20:" in label.replace("\n", " ")
    assert "E = 1.69 (fixed)" in label and "β = 0.28 (fixed)" in label
    # several D/N: the fitted N ∝ C^b, b from a regression done here
    forecast = delphi.predict(dense, {"params": 7e9, "tokens": 1.4e11}, "chinchilla",
                              interval="none", fixed={"E": 1.6})
    n, d = dense.table["params"].to_numpy(float), dense.table["tokens"].to_numpy(float)
    b = np.polyfit(np.log(6 * n * d), np.log(n), 1)[0]
    (label,) = [t for t in legend_texts(plot_forecast(forecast))
                if t.startswith("chinchilla law")]
    flat = label.replace("\n", " ")
    assert f"along the ladder's allocation N ∝ C^{b:.2f} (fitted to its runs), then to the " \
           f"target's N, D:" in flat


def test_isoflop_legend_off_the_data_and_vertex_intervals_on_top(iso):
    ladder, result = iso
    ax = plot_isoflop(result, ladder)
    ax.figure.canvas.draw()
    assert_legend_off_the_data(ax, lines(ax, "budget-points") + lines(ax, "vertex"))
    bars = [c for c in ax.collections if c.get_gid() == "vertex-interval"]
    stars = lines(ax, "vertex")
    assert len(bars) == len(stars) == len(result.budgets)
    for bar, star, b in zip(bars, stars, result.budgets):
        (seg,) = bar.get_segments()
        assert seg.tolist() == [[b.params_interval[0], b.loss], [b.params_interval[1], b.loss]]
        assert bar.get_zorder() > star.get_zorder()
    caps = lines(ax, "vertex-interval-caps")
    assert [c.get_xdata().tolist() for c in caps] == [list(b.params_interval)
                                                      for b in result.budgets]
    assert any("90%" in t or "95%" in t for t in legend_texts(ax))
    # the frontier's N* intervals: capped bars from exactly the lower to the upper end
    fax = plot_isoflop_frontier(result)
    assert [c.get_ydata().tolist() for c in lines(fax, "optimum-interval-caps")] == \
        [list(b.params_interval) for b in result.budgets]


def test_completion_range_shows_the_extrapolated_part(rung):
    c = delphi.complete(rung, "d2048", upto_fraction=0.6)
    ax = plot_completion(c, rung)
    lo, hi = ax.get_ylim()
    # the range rule, by hand: from half the fitted steps (6000) on, 8% margins
    steps = rung.table["step"].to_numpy(float)
    loss = rung.table["loss"].to_numpy(float)
    curve = np.concatenate([ln.get_ydata()[ln.get_xdata() >= 6000]
                            for ln in lines(ax, "trajectory")])
    ys = np.concatenate([curve, loss[steps >= 6000], [c.loss, c.actual]])
    pad = 0.08 * np.ptp(ys)
    assert (lo, hi) == pytest.approx((ys.min() - pad, ys.max() + pad), rel=1e-12)
    above = int((loss > hi).sum())
    assert above > 0
    (note,) = [t for t in ax.texts if t.get_gid() == "clipped-note"]
    assert note.get_text().startswith(f"↑ {above} earlier checkpoints above the range")
    # the extrapolated part fills more than a third of the y range
    dashed = lines(ax, "trajectory")[1]
    assert np.ptp(dashed.get_ydata()) > (hi - lo) / 3
    full = plot_completion(c, rung, full_range=True)
    assert full.get_ylim()[1] >= loss.max()
    # predicted and actual: different markers, hollow vs filled, both in the legend
    pred, act = line(ax, "predicted-final"), line(ax, "actual-final")
    assert pred.get_marker() != act.get_marker()
    assert pred.get_markerfacecolor() == "none" and act.get_zorder() > pred.get_zorder()
    texts = legend_texts(ax)
    assert any(t.startswith(f"predicted final loss {c.loss:.4f}") for t in texts)
    assert any(t.startswith(f"actual final loss {c.actual:.4f}") for t in texts)


def test_backtest_notes_say_why_there_are_no_intervals(dense):
    bt = delphi.backtest(dense, "power", fit_max_flops=3e19)
    assert all(r.lower is None for r in bt.rows)
    ax = plot_backtest(bt, notes=True)
    assert "no interval: 1 residual degree(s) of freedom" in note_text(ax).replace("\n", " ")
    assert not [t for t in plot_backtest(bt).texts if t.get_gid() == "warnings-note"]


# ----------------------------------------------------------------------------- delphi plot
from delphi.cli import main  # noqa: E402


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_plot_forecast_json_and_formats(capsys, tmp_path):
    import json

    png = tmp_path / "hero.png"
    code, out, err = run_cli(capsys, "plot", "forecast", "marin-moe-535b", "-o", str(png),
                             "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc.pop("caption").startswith("Power law fitted to 3 points of marin-moe-535b")
    assert doc == {"path": str(png.resolve()), "kind": "forecast", "format": "png",
                   "delphi_version": delphi.__version__}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = tmp_path / "dense.svg"
    code, out, err = run_cli(capsys, "plot", "fit", "marin-delphi-dense", "--law", "power",
                             "--residuals", "-o", str(svg))
    assert code == 0, err
    wrote, caption = out.strip().splitlines()
    assert wrote == f"wrote the fit figure to {svg}"
    assert caption.startswith("caption: Power law fitted to 7 points of marin-delphi-dense")
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    pdf = tmp_path / "bt.pdf"
    code, _, err = run_cli(capsys, "plot", "backtest", "marin-delphi-dense", "--law", "power",
                           "--leave-one-budget-out", "-o", str(pdf))
    assert code == 0, err
    assert pdf.read_bytes()[:5] == b"%PDF-"


def test_cli_plot_errors(capsys, tmp_path):
    import json

    with pytest.raises(SystemExit) as exc:
        main(["plot", "forecast", "marin-moe-535b", "-o", str(tmp_path / "x.jpg"), "--json"])
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["type"] == "UsageError"
    assert "suffix '.jpg': use .png, .svg, .pdf" in err
    with pytest.raises(SystemExit) as exc:
        main(["plot", "histogram", "marin-moe-535b", "-o", str(tmp_path / "x.png")])
    assert exc.value.code == 2
    assert "invalid choice: 'histogram'" in capsys.readouterr().err
    code, out, err = run_cli(capsys, "plot", "completion", "marin-moe-535b", "-o",
                             str(tmp_path / "c.png"))
    assert code == 2 and "--run RUN" in err       # a usage error
    assert not (tmp_path / "c.png").exists()


def test_residual_panel_on_given_axes(hero, moe):
    # a given Axes is split: the residuals go under it, in the same figure, no new figure
    fig, ax = plt.subplots()
    before = plt.get_fignums()
    out = plot_forecast(hero, ax=ax, ladder=moe, residuals=True)
    assert out is ax and plt.get_fignums() == before
    rax = residual_axes(ax)
    assert rax.figure is fig and len(fig.axes) == 2
    np.testing.assert_allclose(line(rax, "residual-points").get_ydata(),
                               np.log(1.5 + hero.fit.params["A"] * hero.fit.x["flops"]
                                      ** -hero.fit.params["alpha"]) - np.log(hero.fit.y),
                               rtol=0, atol=1e-12)
    # or onto an Axes of one's own
    fig2, (a, b) = plt.subplots(2, 1)
    plot_fit(hero.fit, ax=a, residuals=b)
    assert b.get_gid() == "residual-axes" and len(line(b, "residual-points").get_xdata()) == 3
    with pytest.raises(TypeError, match="Axes"):
        plot_fit(hero.fit, residuals="below")


def test_plots_take_a_dataframe_wherever_they_take_a_ladder(moe, hero):
    # As fit/predict/backtest do: a DataFrame of runs is read as load_ladder reads it.
    ladder, fc = moe, hero
    from_table = plot_forecast(fc, ladder=ladder.table.copy())
    from_ladder = plot_forecast(fc, ladder=ladder)
    # the crashed d2048 rung is drawn as excluded either way, at the same place
    def excluded(ax):
        artists = [*ax.collections, *ax.get_lines()]
        return [(a.get_label(), np.asarray(a.get_offsets() if hasattr(a, "get_offsets")
                                           else a.get_xydata()).tolist())
                for a in artists if str(a.get_label()).startswith("excluded")]

    marks = [excluded(a) for a in (from_table, from_ladder)]
    assert marks[0] == marks[1] and marks[0]
    with pytest.raises(TypeError, match="a delphi Ladder or a pandas DataFrame of runs, got int"):
        plot_forecast(fc, ladder=3)


def test_cli_plot_to_standard_output(capsys, tmp_path, data_dir):
    """``-o -`` writes the figure to stdout: PNG bytes into a pipe (a real process), SVG
    text into a text stream; the note goes to stderr. --json with -o -, a --figure-format
    that contradicts a file's suffix, and a binary figure to a terminal (a real
    pseudo-terminal) are errors. PDF bytes: the next test."""
    import os
    import subprocess

    from test_cli_pty import delphi_command, run_in_pty

    env = {**os.environ, "DELPHI_DATA_DIR": str(data_dir)}
    cmd = delphi_command() + ["plot", "fit", "marin-delphi-dense", "--law", "power", "-o", "-"]
    res = subprocess.run(cmd, capture_output=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"wrote the fit figure (png) to standard output" in res.stderr
    code, out = run_in_pty(cmd, env={"DELPHI_DATA_DIR": str(data_dir)})
    assert code == 1 and "-o - would write a binary PNG to the terminal" in out
    assert "PNG\r\n" not in out
    code, out, err = run_cli(capsys, "plot", "fit", "marin-delphi-dense", "--law", "power",
                             "-o", "-", "--figure-format", "svg")
    assert code == 0, err
    assert out.lstrip().startswith("<?xml") and out.rstrip().endswith("</svg>")
    with pytest.raises(SystemExit) as exc:
        main(["plot", "fit", "marin-delphi-dense", "-o", "-", "--json"])
    assert exc.value.code == 2
    assert "--json and -o - both write to standard output" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["plot", "fit", "marin-delphi-dense", "-o", str(tmp_path / "f.png"),
              "--figure-format", "svg"])
    assert exc.value.code == 2
    assert "--figure-format svg does not match" in capsys.readouterr().err


def test_cli_plot_pdf_to_standard_output(capsysbinary):
    # --figure-format pdf with -o -: PDF bytes on stdout's binary buffer (in-process; the
    # real pipe is the PNG case above), the note on stderr.
    code = main(["plot", "fit", "marin-delphi-dense", "--law", "power", "-o", "-",
                 "--figure-format", "pdf"])
    out, err = capsysbinary.readouterr()
    assert code == 0, err
    assert out[:5] == b"%PDF-" and out.rstrip().endswith(b"%%EOF")
    assert b"wrote the fit figure (pdf) to standard output" in err


# ----------------------------------------------------------------------------- issue 23: papers

def test_forecast_legend_is_compact_and_inside_off_the_data(hero, moe):
    ax = plot_forecast(hero, ladder=moe)
    drawn = [line(ax, g) for g in ("fit-points", "excluded-points", "law-curve",
                                    "law-extrapolation", "target")]
    assert assert_legend_off_the_data(ax, drawn) == "inside"
    texts = legend_texts(ax)
    # merged entries: the law with its extrapolation (one entry, solid and dashed)
    assert len(texts) == 4
    assert texts[2].startswith("power law (dashed: extrapolated):")
    assert not any(t.startswith("law extrapolated") for t in texts)
    # with a residual panel, the loss panel's legend also carries the Huber band
    ax = plot_forecast(hero, ladder=moe, residuals=True)
    assert residual_axes(ax).get_legend() is None
    assert any(t.startswith("±Huber δ") for t in legend_texts(ax))


def test_both_target_intervals_are_one_legend_entry(dense):
    forecast = delphi.predict(dense, {"flops": 1e23}, "power", interval="delta")
    iv = forecast.interval
    ax = plot_forecast(forecast)
    (entry,) = [t for t in legend_texts(ax) if "interval" in t]
    assert entry == (f"90% intervals: one new run [{iv.lower:.4f}, {iv.upper:.4f}],\n"
                     f"expected loss [{iv.mean_lower:.4f}, {iv.mean_upper:.4f}] (thick)")
    assert_legend_off_the_data(ax, [line(ax, "fit-points"), line(ax, "law-curve"),
                                    line(ax, "target")])


def test_legend_goes_under_the_axes_when_no_corner_is_free():
    from delphi.plot import _legend, _legend_below, _note_box

    fig, ax = plt.subplots(figsize=(5, 3), layout="constrained")
    u, v = np.meshgrid(np.linspace(0, 1, 25), np.linspace(0, 1, 25))
    (pts,) = ax.plot(u.ravel(), v.ravel(), "o", ms=2, label="a grid over the whole axes")
    ax.plot([0, 1], [1, 0], "-", label="a line")
    ax.set_xlabel("x")
    legend = _legend(ax)
    assert legend is _legend_below(ax) and legend.get_gid() == "legend-below"
    assert assert_legend_off_the_data(ax, [pts]) == "below"
    # under the x label, not over it; a note box goes under the legend
    fig.canvas.draw()
    assert legend.get_window_extent().y1 <= ax.xaxis.label.get_window_extent().y0
    note = _note_box(ax, ["a warning"], under=legend)
    fig.canvas.draw()
    assert note.get_window_extent().y1 <= legend.get_window_extent().y0


def test_title_does_not_nest_the_metrics_parentheses(hero):
    title = plot_forecast(hero).get_title()
    assert title.splitlines()[0] == ("marin-moe-535b, Paloma macro loss (dropless): power law, "
                                     "3 points")
    assert "((" not in title and "))" not in title


def test_no_interval_reason_is_whole_not_cut(hero):
    (label,) = [t for t in plot_forecast(hero).texts if t.get_gid() == "target-label"]
    text = label.get_text()
    assert "…" not in text and "..." not in text
    assert text.replace("\n", " ") == (f"{hero.loss:.4f} no interval: 1 residual degree(s) "
                                       f"of freedom and no repeated runs")


def test_warnings_are_off_the_figures_by_default_and_in_the_caption(dense_chinchilla,
                                                                     half_completion, rung,
                                                                     iso):
    from delphi.plot import caption

    fit = dense_chinchilla
    figures = [plot_fit(fit), plot_residuals(fit), plot_completion(half_completion, rung),
               plot_isoflop(iso[1], iso[0])]
    for ax in figures:
        assert not [t for t in ax.texts if t.get_gid() == "warnings-note"]
    text = caption(fit)
    assert text.startswith("Chinchilla law fitted to 7 points of marin-delphi-dense")
    for w in fit.warnings:                    # in full, none shortened
        assert w in text
    assert f"Warnings ({len(fit.warnings)}): (1) " in text
    assert half_completion.warnings[0] in caption(half_completion)
    assert plot_fit(fit, warnings=True).texts          # asked for: drawn
    with pytest.raises(TypeError, match="caption"):
        caption("fit")


def synthetic_close_residuals() -> delphi.Ladder:
    """12 runs within one decade of compute whose losses alternate 2% above and below a
    power law: large residuals side by side, where labels at one offset would collide."""
    c = np.geomspace(1e19, 1e20, 12)
    sign = np.where(np.arange(12) % 2 == 0, 1.0, -1.0)
    loss = (1.8 + 60 * c ** -0.1) * (1 + 0.02 * sign * np.linspace(0.5, 1.0, 12))
    return delphi.Ladder(pd.DataFrame({"run": [f"run-{i:02d}" for i in range(12)],
                                       "flops": c, "loss": loss}), name="close")


def assert_labels_apart(ax, fit, k=3) -> None:
    labels = [t for t in ax.texts if t.get_gid() == "residual-label"]
    assert 1 <= len(labels) <= k
    ax.figure.canvas.draw()
    boxes = [t.get_window_extent() for t in labels]
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    # the largest residual is named, and only the largest few are
    order = np.argsort(-np.abs(fit.residuals))
    names = [t.get_text() for t in labels]
    assert names[0] == fit.labels[order[0]]
    assert set(names) <= {fit.labels[i] for i in order[:k]}


def test_residual_labels_name_the_largest_and_do_not_collide():
    from delphi.report.figures import residual_figure

    fit = delphi.fit(synthetic_close_residuals(), "power", fixed={"E": 1.8})
    assert_labels_apart(plot_residuals(fit), fit)
    fig = residual_figure(fit)                 # the HTML report's residual figure
    assert_labels_apart(fig.axes[0], fit)


def test_cli_figure_names_settings_by_their_flags(tmp_path, capsys, monkeypatch):
    """A figure and caption made by `delphi plot` say --drop-invalid, not drop_invalid=True;
    the warning box is drawn with --warnings only (--no-warnings is still accepted)."""
    import delphi.plot as P
    from matplotlib.text import Text

    csv = tmp_path / "bad.csv"
    csv.write_text("run,flops,loss\na,1e18,3.2\nb,3e18,3.05\nc,1e19,2.93\nd,3e19,2.83\n"
                   "e,1e20,2.75\nf,3e20,-1\n")
    drawn = []
    real = P.plot_fit

    def spy(*args, **kwargs):
        drawn.append(real(*args, **kwargs))
        return drawn[-1]

    monkeypatch.setattr(P, "plot_fit", spy)
    base = ["plot", "fit", str(csv), "--law", "power", "--drop-invalid", "-o",
            str(tmp_path / "f.png")]
    code, out, err = run_cli(capsys, *base, "--warnings")
    assert code == 0, err
    texts = [t.get_text() for t in drawn[-1].figure.findobj(Text)]
    assert not any("drop_invalid" in t for t in texts)
    assert any("--drop-invalid" in t for t in texts if "⚠" in t)        # the warning box
    assert any(t.startswith("excluded, not drawn: invalid row dropped by --drop-invalid")
               for t in legend_texts(drawn[-1]))
    caption_line = out.splitlines()[1]
    assert caption_line.startswith("caption: Power law fitted to 5 points of bad")
    assert "--drop-invalid dropped 1 row(s)" in caption_line and "drop_invalid" not in out
    for flags in ([], ["--no-warnings"]):
        code, _, err = run_cli(capsys, *base, *flags)
        assert code == 0, err
        assert not [t for t in drawn[-1].texts if t.get_gid() == "warnings-note"]
