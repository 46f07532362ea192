"""delphi.plot.plot_accuracy and ``delphi plot accuracy``: the chained accuracy prediction's
three panels, checked on the data they draw."""

from __future__ import annotations

import argparse
import json
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import delphi  # noqa: E402
from delphi.accuracy import predict_accuracy  # noqa: E402
import delphi.accuracy  # noqa: E402
import delphi.plot  # noqa: E402
from delphi.cli.main import build_parser, main  # noqa: E402
from delphi.errors import DelphiError, LawError, TargetError  # noqa: E402
from delphi.laws import CHINCHILLA  # noqa: E402
from delphi.plot import plot_accuracy  # noqa: E402
from task_ladders import TASK, simulate  # noqa: E402

N_T, D_T = 8e8, 1.6e10


@pytest.fixture(scope="module")
def forecast():
    ladder = delphi.load_ladder(simulate())     # a simulated ladder loads without warnings
    return predict_accuracy(ladder, TASK, target_params=N_T, target_tokens=D_T, n_boot=8,
                            seed=1, calibrate=False)


def _by_gid(ax, gid):
    found = [a for a in ax.get_children() if a.get_gid() == gid]
    assert found, f"no artist {gid!r}"
    return found


def _line(ax, gid):
    return next(a for a in _by_gid(ax, gid) if hasattr(a, "get_xdata"))


def _errorbar_span(ax, gid):
    """(lowest, highest) y of the vertical error segments of the errorbar ``gid``."""
    cont = next(c for c in ax.containers if any(b.get_gid() == gid for b in c.lines[2]))
    bars = [b for b in cont.lines[2] if not np.allclose(
        [np.ptp(np.asarray(s)[:, 1]) for s in b.get_segments()], 0)]    # vertical bars only
    segs = np.concatenate([np.asarray(s) for col in bars for s in col.get_segments()])
    return segs[:, 1].min(), segs[:, 1].max()


def test_three_panels_draw_the_fits_the_chain_and_the_interval(forecast):
    axes = plot_accuracy(forecast, actual=0.61, actual_task_loss=0.8)
    ax1, ax2, ax3 = axes
    s1, s2 = forecast.step1, forecast.step2
    # panel 1: the fitted final task losses, and the law along the target's D/N
    pts = _by_gid(ax1, "step1-points")[0].get_offsets()
    assert np.allclose(pts[:, 0], s1.x["params"]) and np.allclose(pts[:, 1], s1.y)
    curve = _line(ax1, "step1-curve")
    n = np.asarray(curve.get_xdata())
    want = CHINCHILLA.predict(s1.params, {"params": n, "tokens": n * D_T / N_T})
    assert np.allclose(curve.get_ydata(), want)
    lo, hi = _errorbar_span(ax1, "step1-target")
    assert (lo, hi) == pytest.approx((forecast.task_loss_lower, forecast.task_loss_upper))
    # panel 2: every fitted checkpoint, the sigmoid (points), chance
    pts = _by_gid(ax2, "step2-points")[0].get_offsets()
    assert len(pts) == s2.n_points and np.allclose(pts[:, 1], 100 * s2.y)
    sig = _line(ax2, "step2-curve")
    p = s2.params
    xs = np.asarray(sig.get_xdata())
    want = p["C"] + (p["U"] - p["C"]) / (1 + np.exp(p["k"] * (xs - p["L0"])))
    assert np.allclose(sig.get_ydata(), 100 * want)
    assert _line(ax2, "chance").get_ydata()[0] == pytest.approx(25.0)
    lo, hi = _errorbar_span(ax2, "step2-target")
    assert (lo, hi) == pytest.approx((100 * forecast.lower, 100 * forecast.upper))
    # panel 3: the chain step2(step1(N, D)) and the target's new-run interval
    chain = _line(ax3, "chain-curve")
    n = np.asarray(chain.get_xdata())
    loss = CHINCHILLA.predict(s1.params, {"params": n, "tokens": n * D_T / N_T})
    want = p["C"] + (p["U"] - p["C"]) / (1 + np.exp(p["k"] * (loss - p["L0"])))
    assert np.allclose(chain.get_ydata(), 100 * want)
    assert min(n) < N_T < max(n)
    lo, hi = _errorbar_span(ax3, "target-interval")
    assert (lo, hi) == pytest.approx((100 * forecast.lower, 100 * forecast.upper))
    lo, hi = _errorbar_span(ax3, "target-mean-interval")
    assert (lo, hi) == pytest.approx((100 * forecast.mean_lower, 100 * forecast.mean_upper))
    star = _by_gid(ax3, "actual")[0].get_offsets()
    assert star[0][0] == pytest.approx(N_T) and star[0][1] == pytest.approx(61.0)
    # the final accuracy of each fitted run: its last checkpoint in the simulated ladder
    finals = simulate().groupby("run").tail(1).set_index("run")["acc/sim"]
    pts = _by_gid(ax3, "chain-points")[0].get_offsets()
    assert sorted(np.round(pts[:, 1], 8)) == sorted(np.round(100 * finals.to_numpy(), 8))
    plt.close(ax1.figure)


def test_x_in_flops_given_axes_and_errors(forecast):
    fig, axes = plt.subplots(1, 3)
    out = plot_accuracy(forecast, axes=axes, x="flops")
    assert out[0] is axes[0] and out[0].figure is fig
    pts = _by_gid(out[0], "step1-points")[0].get_offsets()
    assert np.allclose(pts[:, 0], 6 * np.asarray(forecast.step1.x["params"])
                       * np.asarray(forecast.step1.x["tokens"]))
    with pytest.raises(LawError, match="x must be"):
        plot_accuracy(forecast, axes=axes, x="tokens")
    with pytest.raises(TypeError, match="three"):
        plot_accuracy(forecast, axes=axes[:2])
    with pytest.raises(TypeError):
        plot_accuracy(object())
    plt.close(fig)


@pytest.mark.parametrize("bad", [61.0, 61, 0.0, -0.2, 1.5, math.nan, math.inf, True, "0.6"])
def test_actual_outside_0_1_is_refused_not_drawn_in_hundreds(forecast, bad):
    # 61 (points) would be drawn at 6100 on the points axis
    before = plt.get_fignums()
    with pytest.raises(TargetError, match=r"not an accuracy fraction in \(0, 1\]") as err:
        plot_accuracy(forecast, actual=bad)
    assert isinstance(err.value, DelphiError)
    assert plt.get_fignums() == before          # refused before a figure was made


def test_actual_of_1_and_numpy_fractions_are_drawn(forecast):
    for value, points in ((1, 100.0), (np.float64(0.55), 55.0), (np.float32(0.5), 50.0)):
        ax3 = plot_accuracy(forecast, actual=value)[2]
        assert _by_gid(ax3, "actual")[0].get_offsets()[0][1] == pytest.approx(points)
        plt.close(ax3.figure)


@pytest.fixture(scope="module")
def cli_files(tmp_path_factory):
    """The simulated ladder as a CSV and a tasks manifest naming its task ``sim``."""
    folder = tmp_path_factory.mktemp("plot_accuracy")
    data = folder / "sim.csv"
    simulate().to_csv(data, index=False)
    tasks = folder / "tasks.toml"
    tasks.write_text('[tasks.sim]\nbpb = "bpb/sim"\naccuracy = "acc/sim"\nchance = 0.25\n')
    return data, tasks


def _base(cli_files, out):
    data, tasks = cli_files
    return ["plot", "accuracy", str(data), "--tasks", str(tasks), "--target-params", "8e8",
            "--target-tokens", "1.6e10", "--n-boot", "20", "--no-calibration", "-o", str(out)]


def test_cli_plot_accuracy(cli_files, tmp_path, capsys):
    out = tmp_path / "acc.png"
    base = _base(cli_files, out)
    assert main(base + ["--task", "sim", "--actual", "0.6", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "accuracy" and out.read_bytes()[:4] == b"\x89PNG"
    assert main(base) == 2                  # no --task: a usage error
    assert "--task TASK" in capsys.readouterr().err


def _usage_error(capsys, argv) -> str:
    """Run ``argv``; assert a usage error (exit 2); return its stderr."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("value", ["61", "61.2", "0", "-0.5", "1.01", "nan", "inf"])
def test_cli_actual_in_points_or_outside_0_1_is_a_usage_error(cli_files, tmp_path, capsys,
                                                              value):
    out = tmp_path / "acc.png"
    err = _usage_error(capsys, _base(cli_files, out) + ["--task", "sim", "--actual", value])
    assert "--actual" in err and "not an accuracy fraction in (0, 1]" in err
    assert not out.exists()


#: The options `plot accuracy` reads; every other option of `delphi plot` is a loss figure's.
ACCURACY_OPTIONS = {
    "--output", "--figure-format", "--dpi", "--x", "--warnings", "--no-warnings", "--json",
    "--metric",
    "--format", "--unit", "--drop-invalid", "--allow-outside-paths", "--columns", "--scale",
    "--target-params",
    "--target-tokens", "--level", "--n-boot", "--seed", "--task", "--tasks",
    "--fit-max-params", "--runs", "--step1-law", "--lower", "--actual", "--no-calibration",
    "--huber-delta", "--help", "--quiet", "--debug", "--jobs"}
#: A value for each loss-figure option that takes one and has no choices.
LOSS_VALUES = {
    "--law": "power", "--floor": "1.5", "--fix": "alpha=0.3", "--bound": "alpha=0:1",
    "--fit-max-flops": "1e20", "--target-flops": "1e21",
    "--target-name": "big", "--target-peak-lr": "3e-3", "--target-schedule": "cosine",
    "--target-steps": "1e4", "--target-batch": "1e6", "--target-active-params": "1e8",
    "--window": "3", "--run": "100M-1x", "--upto-fraction": "0.5", "--upto-step": "10"}


def _loss_options():
    """``[flag, value...]`` for every option of `delphi plot` outside ACCURACY_OPTIONS, with a
    value other than its default: the list grows with the parser, so a new loss-figure option
    is covered (or this fails, asking for a value in LOSS_VALUES)."""
    parser = next(a for a in build_parser()[0]._actions
                  if isinstance(a, argparse._SubParsersAction)).choices["plot"]
    argv = []
    for action in parser._actions:
        flag = next((s for s in action.option_strings if s.startswith("--")), None)
        if flag is None or flag in ACCURACY_OPTIONS:
            continue
        if action.nargs == 0:
            argv.append([flag])
        elif action.choices:
            argv.append([flag, next(c for c in action.choices if c != action.default)])
        else:
            assert flag in LOSS_VALUES, f"a value for the new option {flag} in LOSS_VALUES"
            argv.append([flag, LOSS_VALUES[flag]])
    return argv


@pytest.mark.parametrize("given", _loss_options(), ids=lambda g: g[0])
def test_cli_refuses_each_loss_figure_option(cli_files, tmp_path, capsys, given):
    out = tmp_path / "acc.png"
    err = _usage_error(capsys, _base(cli_files, out) + ["--task", "sim"] + given)
    assert f"plot accuracy does not use {given[0]}:" in err
    assert "--step1-law, --lower, --runs" in err            # what it takes instead
    assert not out.exists()


def test_cli_names_every_refused_option_and_refuses_x_tokens(cli_files, tmp_path, capsys):
    out = tmp_path / "acc.png"
    base = _base(cli_files, out) + ["--task", "sim"]
    err = _usage_error(capsys, base + ["--law", "chinchilla", "--residuals", "--fix",
                                       "alpha=0.3", "--interval", "bootstrap"])
    assert "does not use --law, --fix, --residuals, --interval: they are options" in err
    # --x tokens would draw N under the label "model size": refused; flops and params are not
    err = _usage_error(capsys, base + ["--x", "tokens"])
    assert "not D (--x tokens)" in err
    # a loss option at its default value was not given: nothing to refuse
    assert main(base + ["--interval", "auto", "--x", "params"]) == 0
    capsys.readouterr()
    assert out.read_bytes()[:4] == b"\x89PNG"
    # --lower as `delphi accuracy --lower`; --runs naming no run would mean every run
    assert "--lower: expected 'fit', 'chance' or a fraction in [0, 1)" in \
        _usage_error(capsys, base + ["--lower", "1"])
    assert "--runs: no run named" in _usage_error(capsys, base + ["--runs", " , "])


@pytest.fixture
def drawn(monkeypatch):
    """The forecasts `delphi plot accuracy` predicted, with the keywords it passed, and the
    axes it drew."""
    calls = {"predict": [], "axes": []}
    real_predict, real_plot = delphi.accuracy.predict_accuracy, delphi.plot.plot_accuracy

    def predict(*args, **kwargs):
        result = real_predict(*args, **kwargs)
        calls["predict"].append((kwargs, result))
        return result

    def plot(*args, **kwargs):
        axes = real_plot(*args, **kwargs)
        calls["axes"].append(axes)
        return axes

    monkeypatch.setattr(delphi.accuracy, "predict_accuracy", predict)
    monkeypatch.setattr(delphi.plot, "plot_accuracy", plot)
    return calls


def test_cli_lower_runs_and_step1_law_reach_the_forecast(cli_files, tmp_path, capsys, drawn):
    out = tmp_path / "acc.png"
    runs = ["100M-1x", "100M-2x", "200M-1x", "200M-2x", "200M-5x", "400M-1x", "400M-2x",
            "400M-5x"]
    assert main(_base(cli_files, out) + ["--task", "sim", "--lower", "chance", "--runs",
                                         ",".join(runs) + ",", "--step1-law", "chinchilla",
                                         "--x", "params"]) == 0
    capsys.readouterr()
    (kwargs, f), = drawn["predict"]
    assert kwargs["lower"] == "chance" and kwargs["runs"] == runs
    assert kwargs["step1_law"] == "chinchilla"
    # the forecast is the one `delphi accuracy --lower chance --runs ...` makes: C at chance,
    # only the named runs in step 1
    assert f.step2.params["C"] == pytest.approx(0.25)
    assert sorted(map(str, f.step1.labels)) == sorted(runs)
    assert f.step1.law.name == "chinchilla"
    ax1 = drawn["axes"][0][0]
    assert ax1.get_xlabel() == "model size N [parameters]"
    pts = _by_gid(ax1, "step1-points")[0].get_offsets()
    assert np.allclose(sorted(pts[:, 0]), sorted(f.step1.x["params"]))

    # a fixed C and the default flops axis
    drawn["predict"].clear()
    assert main(_base(cli_files, out) + ["--task", "sim", "--lower", "0.3"]) == 0
    capsys.readouterr()
    (kwargs, f), = drawn["predict"]
    assert kwargs["lower"] == 0.3 and kwargs["runs"] is None
    assert f.step2.params["C"] == pytest.approx(0.3)
    assert drawn["axes"][-1][0].get_xlabel() == "training compute C = 6ND [FLOPs]"


def test_cli_step1_law_not_of_n_and_d_is_refused_before_fitting(cli_files, tmp_path, capsys,
                                                                drawn):
    out = tmp_path / "acc.png"
    assert main(_base(cli_files, out) + ["--task", "sim", "--step1-law", "power"]) == 2
    err = capsys.readouterr().err
    assert "--step1-law power is a law of flops" in err and "N and D" in err
    assert not drawn["predict"] and not out.exists()
    # an unknown law: predict_accuracy's LawError, naming the laws step 1 takes
    assert main(_base(cli_files, out) + ["--task", "sim", "--step1-law", "nosuch"]) == 1
    assert "nosuch" in capsys.readouterr().err and not out.exists()
