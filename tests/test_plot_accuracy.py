"""delphi.plot.plot_accuracy and ``delphi plot accuracy``: the chained accuracy prediction's
three panels, checked on the data they draw."""

from __future__ import annotations

import json
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import delphi  # noqa: E402
from delphi.accuracy import predict_accuracy  # noqa: E402
from delphi.cli.main import main  # noqa: E402
from delphi.errors import LawError  # noqa: E402
from delphi.laws import CHINCHILLA  # noqa: E402
from delphi.plot import plot_accuracy  # noqa: E402
from task_ladders import TASK, simulate  # noqa: E402

N_T, D_T = 8e8, 1.6e10


@pytest.fixture(scope="module")
def forecast():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ladder = delphi.load_ladder(simulate())
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


def test_cli_plot_accuracy(tmp_path, capsys):
    data = tmp_path / "sim.csv"
    simulate().to_csv(data, index=False)
    tasks = tmp_path / "tasks.toml"
    tasks.write_text('[tasks.sim]\nbpb = "bpb/sim"\naccuracy = "acc/sim"\nchance = 0.25\n')
    out = tmp_path / "acc.png"
    base = ["plot", "accuracy", str(data), "--tasks", str(tasks), "--target-params", "8e8",
            "--target-tokens", "1.6e10", "--n-boot", "20", "--no-calibration", "-o", str(out)]
    assert main(base + ["--task", "sim", "--actual", "0.6", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "accuracy" and out.read_bytes()[:4] == b"\x89PNG"
    assert main(base) == 1
    assert "--task TASK" in capsys.readouterr().err
