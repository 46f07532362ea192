"""Matplotlib figures of delphi's objects: fits, forecasts, backtests, isoFLOP analyses and
curve completions.

Every function draws on the Axes it is given (or on a new figure's Axes when ``ax`` is None)
and returns that Axes; nothing is shown (no ``plt.show()``) and no global setting (rcParams,
style, backend) is changed. Artists carry a ``gid`` naming what they are (``"fit-points"``,
``"law-curve"``, ``"target-interval"``...) so a figure can be checked or restyled afterwards::

    import delphi
    from delphi.plot import plot_forecast

    ladder = delphi.load_ladder("marin-moe-535b")
    forecast = delphi.predict(ladder, {"flops": 2.61e24}, "power", fixed={"E": 1.5})
    ax = plot_forecast(forecast, ladder=ladder)      # ladder: draw the excluded d2048 rung too
    ax.figure.savefig("forecast.png", dpi=150)

Units: compute C in FLOPs, model size N in parameters, D in tokens, loss in the ladder's unit
(nats/token unless the ladder says otherwise). Wrong object types raise ``TypeError``;
a law the figure cannot draw raises :class:`~delphi.errors.LawError`; inconsistent
inputs raise the delphi error of the object concerned (``TargetError``, ``LadderError``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .analyses.backtest import Backtest
from .curves import Completion
from .law_inputs import ANNEALING_MOMENTUM, run_schedule
from .errors import LadderError, LawError, TargetError
from .fitting import Fit
from .forecast import Forecast, Target
from .analyses.isoflop import EnvelopeResult, IsoflopResult
from .analyses.isoflop.vertices import _window
from .ladder import FLOPS_PER_PARAM_TOKEN, Ladder
from .laws import CURVE_LAWS, HPARAM_LAWS
from .schedules import features

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["plot_fit", "plot_forecast", "plot_backtest", "plot_isoflop", "plot_isoflop_frontier",
           "plot_completion"]

_X_LABELS = {"flops": "training compute C [FLOPs]",
             "params": "model size N [parameters]",
             "tokens": "training tokens D [tokens]"}
_MAX_LISTED = 3          # excluded runs named in a legend entry
_N_CURVE = 200


# ------------------------------------------------------------------------------- helpers
def _axes(ax: Any) -> "Axes":
    """``ax`` itself, or the Axes of a new figure when ``ax`` is None."""
    from matplotlib.axes import Axes

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7.0, 4.6))
        return ax
    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def _check_type(obj: Any, cls: type | tuple[type, ...], what: str, hint: str = "") -> None:
    if not isinstance(obj, cls):
        names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise TypeError(f"{what} must be a delphi {names}, got {type(obj).__name__}{hint}")


def _fmt_params(params: dict[str, float], per_line: int = 3) -> str:
    items = [f"{k}={v:.4g}" for k, v in params.items()]
    return "\n".join(", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line))


def _listed(names: list[str], limit: int = _MAX_LISTED) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _counted(what: str, names: list[str], limit: int = _MAX_LISTED) -> str:
    """``"what (3): a, b, c"``, or ``"what (25)"`` when there are more than ``limit`` names."""
    return f"{what} ({len(names)})" + (f": {', '.join(names)}" if len(names) <= limit else "")


def _legend(ax: "Axes", extra: list | None = None, **kwargs) -> None:
    handles, labels = ax.get_legend_handles_labels()
    for handle, label in extra or ():
        handles.append(handle)
        labels.append(label)
    if handles:
        ax.legend(handles, labels, fontsize="small", **kwargs)


def _is_2d(law) -> bool:
    return "params" in law.inputs and "tokens" in law.inputs


def _check_loss_law(fit: Fit) -> None:
    law = fit.law
    if law.name in CURVE_LAWS:
        raise LawError(f"plot_fit draws final-loss laws against compute; {law.name!r} is a "
                       f"loss-curve law of one run: use plot_completion")
    if law.name in HPARAM_LAWS:
        raise LawError(f"plot_fit draws loss laws; {law.name!r} is a law of an optimal "
                       f"hyperparameter, not of the loss")
    if "flops" not in law.inputs and not _is_2d(law):
        raise LawError(f"plot_fit needs a law of compute (flops) or of N and D (params, "
                       f"tokens); {law.name!r} reads {', '.join(law.inputs)}")


def _other_inputs(fit: Fit, params: np.ndarray, tokens: np.ndarray,
                  given: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """Values of the law's inputs other than C, N, D along a curve (see :func:`plot_fit`)."""
    law, out = fit.law, {}
    for name in law.inputs:
        if name in ("flops", "params", "tokens"):
            continue
        if given and given.get(name) is not None:
            out[name] = np.full(params.shape, float(given[name]))
        elif name == "peak_lr" and hasattr(law, "optimal_lr"):
            out[name] = np.asarray(law.optimal_lr(fit.params, params, tokens), float)
        elif name == "h":
            # the LR ratio at the end of the schedule: the fitted data's smallest ratio
            out[name] = np.full(params.shape, float(np.min(fit.x["h"])))
        else:
            out[name] = np.full(params.shape, float(np.median(fit.x[name])))
    return out


def _coordinates(fit: Fit, x: str) -> np.ndarray:
    """x coordinate of every fitted point: C (given, else 6·N·D), N or D."""
    if x == "flops":
        if "flops" in fit.x:
            return np.asarray(fit.x["flops"], float)
        return FLOPS_PER_PARAM_TOKEN * np.asarray(fit.x["params"], float) * \
            np.asarray(fit.x["tokens"], float)
    return np.asarray(fit.x[x], float)


def _nd_path(fit: Fit, lo: float, hi: float, target_nd: tuple[float, float, float] | None):
    """N and D along the ladder's allocation, as functions of C = 6·N·D.

    ln N is regressed on ln C over the fitted points (a constant D/N when they share one C);
    beyond the data, towards a target at (C_t, N_t), ln N is interpolated linearly in ln C
    from the regression's value at the data's edge to the target's, so the curve ends on the
    target's own N and D. Returns a function C -> (N, D) and the data's C range.
    """
    n = np.asarray(fit.x["params"], float)
    c = FLOPS_PER_PARAM_TOKEN * n * np.asarray(fit.x["tokens"], float)
    lc, ln = np.log(c), np.log(n)
    if np.ptp(lc) > 1e-9:
        b, a = np.polyfit(lc, ln, 1)
    else:
        b = 0.5                                     # a constant tokens-per-parameter ratio
        a = float(np.mean(ln - b * lc))
    knots = None
    if target_nd is not None:
        tc, tn = math.log(target_nd[0]), math.log(target_nd[1])
        l, h = math.log(lo), math.log(hi)
        if tc > h:
            knots = ([l, h, tc], [a + b * l, a + b * h, tn])
        elif tc < l:
            knots = ([tc, l, h], [tn, a + b * l, a + b * h])

    def path(flops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        u = np.log(flops)
        lnn = a + b * u
        if knots is not None:
            within = (u >= knots[0][0]) & (u <= knots[0][-1])
            lnn = np.where(within, np.interp(u, *knots), lnn)
        nn = np.exp(lnn)
        return nn, flops / (FLOPS_PER_PARAM_TOKEN * nn)

    return path


def _run_exclusions(fit: Fit) -> list:
    """The fit's excluded runs, without the source's row filters (run ``"*"``)."""
    return [e for e in fit.exclusions if e.run != "*"]


def _excluded_points(fit: Fit, ladder: Ladder, x: str) -> tuple[list[str], np.ndarray,
                                                                  np.ndarray, list[str]]:
    """Coordinates (in ``x``) and final losses of the fit's excluded runs found in ``ladder``;
    also the names of excluded runs without coordinates."""
    t = ladder.table
    names, xs, ys, unknown = [], [], [], []
    for e in _run_exclusions(fit):
        g = t[t["run"] == e.run]
        if g.empty:
            unknown.append(e.run)
            continue
        if "final" in g.columns and g["final"].fillna(False).astype(bool).any():
            row = g[g["final"].fillna(False).astype(bool)].iloc[0]
        else:
            row = g.iloc[-1]
        if x == "flops" and "flops" not in fit.law.inputs and {"params", "tokens"} <= set(g):
            value = FLOPS_PER_PARAM_TOKEN * float(row["params"]) * float(row["tokens"])
        else:
            value = float(row[x]) if x in g.columns and not _isnan(row[x]) else math.nan
        if not math.isfinite(value):
            unknown.append(e.run)
            continue
        names.append(e.run)
        xs.append(value)
        ys.append(float(row["loss"]))
    return names, np.array(xs, float), np.array(ys, float), unknown


def _isnan(value: Any) -> bool:
    try:
        return math.isnan(float(value))
    except (TypeError, ValueError):
        return True


def _target_point(fit: Fit, target: Forecast | Target, x: str):
    """(x coordinate, loss, interval or None, name) of the target."""
    law = fit.law
    if isinstance(target, Forecast):
        t, loss, iv = target.target, float(target.loss), target.interval
    else:
        t, iv = target, None
        base = t.inputs(law, skip=("peak_lr", "h"))
        n = np.asarray(base.get("params", [t.params or 1.0]), float)
        d = np.asarray(base.get("tokens", [t.tokens or 1.0]), float)
        given = {"peak_lr": t.peak_lr,
                 "h": t.final_lr_ratio() if t.schedule is not None else None}
        inputs = {**base, **_other_inputs(fit, n, d, given)}
        loss = float(fit.predict(inputs)[0])
    if x == "flops":
        if "flops" not in law.inputs and t.params is not None and t.tokens is not None:
            tx = FLOPS_PER_PARAM_TOKEN * t.params * t.tokens
        else:
            tx = t.flops
    else:
        tx = getattr(t, x)
    if tx is None:
        raise TargetError(f"the target gives no {x!r} to place it on the x axis")
    return float(tx), loss, iv, t.name or "target"


# ------------------------------------------------------------------------------- fits
def plot_fit(fit: Fit, *, ax: "Axes | None" = None, x: str = "flops",
             target: Forecast | Target | None = None, ladder: Ladder | None = None) -> "Axes":
    """Draw a fitted law: its points, its curve and (optionally) the target with its intervals.

    Drawn on a log x axis (``ax.get_xscale() == "log"``) against loss on a linear y axis:

    * the fitted points (``gid="fit-points"``, one marker per point, ``fit.n_points`` of them)
      at C [FLOPs]: the law's ``flops`` input, or C = 6·N·D from the N and D it read;
    * the fitted law (``gid="law-curve"``) over the range of the fitted points, continued
      dashed (``gid="law-extrapolation"``) out to the excluded runs drawn and the target. A law of N and D (``chinchilla``,
      ``overtrain``...) is drawn along the ladder's own allocation: ln N regressed on
      ln C = ln 6·N·D over the fitted points (a constant D/N if they share one C), then
      interpolated in ln C from the data's edge to the target's N and D, so the curve ends
      on the forecast. On an isoFLOP ladder (several N per C) it is the law at the average
      allocation, and runs far from it sit off the curve. ``chinchilla-lr`` is evaluated at
      the fitted optimal peak LR eta*(N, D) (at the target's peak LR for a Target that gives
      one) and ``chinchilla-ckpt`` at the smallest fitted LR ratio h (the schedules' end);
    * excluded runs (``gid="excluded-points"``, crosses) at their final (or last) row when
      ``ladder`` holds them; excluded runs without coordinates are counted (and named, when
      few) in the legend. The source's row filters (exclusions of run ``"*"``) are not runs
      and are left out;
    * the target (``gid="target"``, a star) at its C, with the new-run interval
      ``[lower, upper]`` as a thin bar (``gid="target-interval"``, a LineCollection whose one
      segment runs exactly from ``lower`` to ``upper``) and the expected-loss interval
      ``[mean_lower, mean_upper]`` as a thicker bar (``gid="target-expected-interval"``).
      A :class:`~delphi.forecast.Target` (no forecast) is drawn at the law's prediction,
      without intervals.

    Parameters
    ----------
    fit: a final-loss fit (:func:`delphi.fit`).
    ax: Axes to draw on; default a new figure's.
    x: ``"flops"`` (default; x label ``"training compute C [FLOPs]"``), or ``"params"`` /
        ``"tokens"`` for laws of N and D (x = N [parameters] or D [tokens], the curve drawn
        along the same allocation path).
    target: a :class:`~delphi.forecast.Forecast` (drawn with its intervals) or a
        :class:`~delphi.forecast.Target`.
    ladder: the ladder the fit came from, to place excluded runs.

    Returns
    -------
    The Axes drawn on. The y label is ``"loss [<unit>]"`` with the forecast's unit (else the
    fit's ladder unit, nats/token by default).

    Raises
    ------
    TypeError: ``fit`` is not a :class:`~delphi.fitting.Fit`, ``target`` not a Forecast or
        Target, ``ladder`` not a Ladder, ``ax`` not an Axes.
    LawError: a loss-curve or hyperparameter law (use :func:`plot_completion`), a law of
        neither C nor (N, D), or ``x`` not one of the law's quantities.
    TargetError: the target lacks a quantity the law or the x axis needs.
    """
    _check_type(fit, Fit, "fit")
    if target is not None:
        _check_type(target, (Forecast, Target), "target")
    if ladder is not None:
        _check_type(ladder, Ladder, "ladder")
    _check_loss_law(fit)
    law = fit.law
    if x not in _X_LABELS:
        raise LawError(f"x must be one of {', '.join(_X_LABELS)}, got {x!r}")
    if x != "flops" and not _is_2d(law):
        raise LawError(f"x={x!r} needs a law of N and D; {law.name!r} reads "
                       f"{', '.join(law.inputs)} (use x='flops')")
    ax = _axes(ax)

    xp = _coordinates(fit, x)
    checkpoints = len({lbl.split("@")[0] for lbl in fit.labels}) != fit.n_points
    derived = x == "flops" and "flops" not in fit.x
    what = "fitted checkpoints" if checkpoints else "fitted runs"
    ax.plot(xp, fit.y, "o", ls="none", color="C0", ms=6, gid="fit-points",
            label=f"{what} ({fit.n_points}{', C = 6ND' if derived else ''})")

    legend_extra = []
    xs_all = [xp]
    if _run_exclusions(fit):
        from matplotlib.lines import Line2D

        names, ex, ey = [], np.empty(0), np.empty(0)
        unknown = [e.run for e in _run_exclusions(fit)]
        if ladder is not None:
            names, ex, ey, unknown = _excluded_points(fit, ladder, x)
        if names:
            ax.plot(ex, ey, "x", ls="none", color="C3", ms=8, mew=2, gid="excluded-points",
                    label=_counted("excluded runs", names))
            xs_all.append(ex)
        if unknown:
            proxy = Line2D([], [], ls="none", marker="x", color="0.6", mew=2)
            legend_extra.append((proxy, _counted("excluded runs, not drawn", unknown)
                                 + ("" if ladder is not None else " (pass ladder= to draw)")))

    tpoint = None
    if target is not None:
        tpoint = _target_point(fit, target, x)
        xs_all.append(np.array([tpoint[0]]))

    # the law's curve: solid over the fitted points, dashed out to excluded runs and target
    lo_data, hi_data = float(np.min(xp)), float(np.max(xp))
    allx = np.concatenate(xs_all)
    lo, hi = float(np.min(allx)), float(np.max(allx))
    if lo == hi:
        lo, hi = lo / 2, hi * 2
    if _is_2d(law) and "flops" not in law.inputs:
        # the law along the runs' own allocation of C to N and D, continued to the target
        c_pts = FLOPS_PER_PARAM_TOKEN * np.asarray(fit.x["params"], float) * \
            np.asarray(fit.x["tokens"], float)
        c_lo, c_hi = float(c_pts.min()), float(c_pts.max())
        t_nd = None
        if tpoint is not None:
            t = target.target if isinstance(target, Forecast) else target
            if t.params is not None and t.tokens is not None:
                t_nd = (FLOPS_PER_PARAM_TOKEN * t.params * t.tokens, t.params)
        path = _nd_path(fit, c_lo, c_hi, t_nd)
        # a C grid wide enough to cover [lo, hi] on the chosen x axis
        span = [c_lo, c_hi] + ([t_nd[0]] if t_nd else [])
        grid = np.union1d(np.geomspace(min(span) / 1e3, max(span) * 1e3, 8 * _N_CURVE), span)
        n_path, d_path = path(grid)
        gx = {"flops": grid, "params": n_path, "tokens": d_path}[x]
        keep = (gx >= lo * (1 - 1e-9)) & (gx <= hi * (1 + 1e-9))
        grid, n_path, d_path, gx = grid[keep], n_path[keep], d_path[keep], gx[keep]
        curve = fit.predict({"params": n_path, "tokens": d_path,
                             **_other_inputs(fit, n_path, d_path)})
        how = " along the runs' N, D"
    else:
        gx = np.union1d(np.geomspace(lo, hi, _N_CURVE), [lo_data, hi_data])
        curve = fit.predict({"flops": gx, **_other_inputs(fit, gx, gx)})
        how = ""
    inside = gx <= hi_data * (1 + 1e-9)
    inside &= gx >= lo_data * (1 - 1e-9)
    label = f"{law.name} law{how}:\n{_fmt_params(fit.params)}"
    ax.plot(gx[inside], curve[inside], "-", color="C1", lw=1.8, gid="law-curve", label=label)
    extrapolation_label = "law extrapolated beyond the data"
    for side in (gx < lo_data * (1 - 1e-9), gx > hi_data * (1 + 1e-9)):
        if side.any():
            # beyond the data on one side, joined to the fitted part
            idx = np.flatnonzero(side)
            idx = np.union1d(idx, [max(idx.min() - 1, 0), min(idx.max() + 1, gx.size - 1)])
            ax.plot(gx[idx], curve[idx], "--", color="C1", lw=1.5, gid="law-extrapolation",
                    label=extrapolation_label)
            extrapolation_label = None

    unit = (target.unit if isinstance(target, Forecast) else fit.extra.get("unit")) or \
        "nats/token"
    if tpoint is not None:
        tx, tloss, iv, name = tpoint
        if iv is not None:
            ax.vlines([tx], [iv.lower], [iv.upper], colors="C2", lw=1.5,
                      gid="target-interval",
                      label=f"{iv.level:.0%} interval, one new run [{iv.lower:.4f}, "
                            f"{iv.upper:.4f}]")
            ax.plot([tx, tx], [iv.lower, iv.upper], ls="none", marker="_", ms=12, mew=1.5,
                    color="C2", gid="target-interval-caps")
            ax.vlines([tx], [iv.mean_lower], [iv.mean_upper], colors="C2", lw=6, alpha=0.55,
                      gid="target-expected-interval",
                      label=f"{iv.level:.0%} interval, expected loss [{iv.mean_lower:.4f}, "
                            f"{iv.mean_upper:.4f}]")
        kind = "forecast" if isinstance(target, Forecast) else "law at target"
        ax.plot([tx], [tloss], "*", ls="none", color="C2", ms=14, mec="k", mew=0.6, zorder=5,
                gid="target", label=f"{name} ({kind}): {tloss:.4f} {unit}")

    ax.set_xscale("log")
    ax.set_xlabel(_X_LABELS[x])
    ax.set_ylabel(f"loss [{unit}]")
    ladder_name = (target.ladder_name if isinstance(target, Forecast) else
                   fit.extra.get("ladder")) or "ladder"
    metric = fit.extra.get("metric")
    title = f"{ladder_name}: {law.name} law, {fit.n_points} points"
    if metric and metric != "loss":
        title += f" ({metric})"
    if not fit.converged:
        title += " - FIT DID NOT CONVERGE"
    ax.set_title(title, fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax, legend_extra)
    return ax


def plot_forecast(forecast: Forecast, *, ax: "Axes | None" = None, x: str = "flops",
                  ladder: Ladder | None = None) -> "Axes":
    """Draw a forecast: ``plot_fit(forecast.fit, target=forecast)``.

    The ladder's fitted points, the law out to the target, the target with its new-run
    interval (thin bar) and expected-loss interval (thick bar), loss in ``forecast.unit``.
    Pass ``ladder`` to draw excluded runs (e.g. a crashed rung) where they are. See
    :func:`plot_fit` for what is drawn and the errors raised.

    Raises
    ------
    TypeError: ``forecast`` is not a :class:`~delphi.forecast.Forecast`.
    """
    _check_type(forecast, Forecast, "forecast")
    return plot_fit(forecast.fit, ax=ax, x=x, target=forecast, ladder=ladder)


# ------------------------------------------------------------------------------- backtests
def plot_backtest(backtest: Backtest, *, ax: "Axes | None" = None) -> "Axes":
    """Draw a backtest: the relative error of each held-out run's prediction against its C.

    * one marker per held-out run (``gid="rel-errors"``, in row order) at
      (C [FLOPs], ``rel_error`` = (actual - predicted) / predicted); runs whose actual loss
      fell outside their interval are ringed in red (``gid="outside-interval"``);
    * each run's new-run interval in the same relative units (``gid="interval-bars"``, one
      segment per run with an interval, from (lower - predicted) / predicted to
      (upper - predicted) / predicted): a marker inside its bar is a loss inside its interval;
    * a zero line (``gid="zero-line"``);
    * the design and summary (mean and max |rel. error|, coverage) in the title.

    The y axis shows the fractions as percentages; the x axis is logarithmic.

    Raises
    ------
    TypeError: ``backtest`` is not a :class:`~delphi.analyses.backtest.Backtest`.
    LadderError: no rows, or a row without a compute (flops, or params and tokens).
    """
    from matplotlib.ticker import PercentFormatter

    _check_type(backtest, Backtest, "backtest")
    if not backtest.rows:
        raise LadderError("the backtest has no held-out runs to draw")
    ax = _axes(ax)
    xs = []
    for r in backtest.rows:
        if r.flops is not None:
            xs.append(float(r.flops))
        elif r.params is not None and r.tokens is not None:
            xs.append(FLOPS_PER_PARAM_TOKEN * r.params * r.tokens)
        else:
            raise LadderError(f"backtest row {r.run!r} has no compute to place it on the x axis")
    xs = np.array(xs)
    rel = np.array([r.rel_error for r in backtest.rows])
    with_iv = [i for i, r in enumerate(backtest.rows) if r.lower is not None]
    if with_iv:
        lo = [(backtest.rows[i].lower - backtest.rows[i].predicted) / backtest.rows[i].predicted
              for i in with_iv]
        hi = [(backtest.rows[i].upper - backtest.rows[i].predicted) / backtest.rows[i].predicted
              for i in with_iv]
        ax.vlines(xs[with_iv], lo, hi, colors="C0", lw=5, alpha=0.35, gid="interval-bars",
                  label=f"{backtest.level:.0%} new-run interval (relative to prediction)")
    ax.axhline(0.0, color="k", lw=0.8, gid="zero-line")
    ax.plot(xs, rel, "o", ls="none", color="C0", ms=6, zorder=3, gid="rel-errors",
            label=f"held-out runs ({len(rel)})")
    out = [i for i, r in enumerate(backtest.rows) if r.inside is False]
    if out:
        ax.plot(xs[out], rel[out], "o", ls="none", ms=11, mfc="none", mec="C3", mew=1.5,
                zorder=4, gid="outside-interval", label=f"outside its interval ({len(out)})")
    ax.set_xscale("log")
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0))
    ax.set_xlabel(_X_LABELS["flops"])
    ax.set_ylabel("relative error (actual - predicted) / predicted")
    s = backtest.summary
    line = (f"mean |rel. error| {s['mean_abs_rel_error']:.2%}, "
            f"max {s['max_abs_rel_error']:.2%}")
    if s["coverage"] is not None:
        line += f", coverage {s['coverage']:.0%} of {s['level']:.0%} intervals"
    ax.set_title(f"backtest {backtest.law}: {backtest.design}\n{line}", fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax)
    return ax


# ------------------------------------------------------------------------------- isoFLOPs
def _budget_colors(n: int):
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(0.05 + 0.85 * i / max(n - 1, 1)) for i in range(n)]


def _budget_curve(method: str, window: int | None, params: np.ndarray, loss: np.ndarray):
    """The per-budget curve of :func:`delphi.analyses.isoflop.isoflop_analysis` through (N, loss):
    (N grid, loss) over the sampled (windowed) sizes."""
    from scipy.interpolate import Akima1DInterpolator

    order = np.argsort(params)
    u, y = np.log(params[order]), loss[order]
    sel = _window(u, y, window)
    u, y = u[sel], y[sel]
    grid = np.linspace(u[0], u[-1], 200)
    if method == "akima":
        z = Akima1DInterpolator(u, np.log(y))(grid)
        return np.exp(grid), np.exp(z)
    u0, scale = float(np.mean(u)), float(np.std(u)) or 1.0
    coef = np.polyfit((u - u0) / scale, y, 2 if method == "parabola" else 3)
    return np.exp(grid), np.polyval(coef, (grid - u0) / scale)


def plot_isoflop(result: IsoflopResult, ladder: Ladder | None = None, *,
                 ax: "Axes | None" = None, frontier_ax: "Axes | None" = None) -> "Axes":
    """Draw an isoFLOP analysis (Hoffmann et al. 2022, Approach 2): loss against N per budget.

    One colour per compute budget (viridis, from the smallest budget to the largest):

    * with ``ladder`` (the ladder analysed), each budget's runs (``gid="budget-points"``, one
      Line2D per budget, its final loss against N [parameters]) and the budget's fitted curve
      (``gid="budget-curve"``: the analysis' parabola, cubic or Akima spline in ln N, over the
      sampled or windowed sizes);
    * each budget's vertex (``gid="vertex"``, a star at (N*, L*); hollow when the budget was
      left out of the power-law fit) and, when bootstrapped, its N* interval as a horizontal
      bar (``gid="vertex-interval"``). Budgets without a vertex (no minimum) have no star.

    The x axis is logarithmic; the title gives the fitted exponent of N* ~ C^a.

    Parameters
    ----------
    result: :func:`delphi.analyses.isoflop.isoflop_analysis` output.
    ladder: the ladder analysed; without it only the vertices are drawn (the result keeps run
        names, not losses). Runs are matched by name.
    ax: Axes for the loss curves; default a new figure's.
    frontier_ax: a second Axes on which to draw N*(C) (:func:`plot_isoflop_frontier`), e.g.
        ``fig, (a, b) = plt.subplots(1, 2); plot_isoflop(res, ladder, ax=a, frontier_ax=b)``.

    Returns
    -------
    The Axes of the loss curves.

    Raises
    ------
    TypeError: ``result`` is not an :class:`~delphi.analyses.isoflop.IsoflopResult` (an Approach 1
        ``EnvelopeResult`` goes to :func:`plot_isoflop_frontier`), ``ladder`` not a Ladder.
    LadderError: a budget's run is missing from ``ladder`` (not the ladder analysed).
    """
    hint = "; plot an EnvelopeResult with plot_isoflop_frontier" \
        if isinstance(result, EnvelopeResult) else ""
    _check_type(result, IsoflopResult, "result", hint)
    if ladder is not None:
        _check_type(ladder, Ladder, "ladder")
    if frontier_ax is not None:
        _axes(frontier_ax)   # type check before drawing anything
    ax = _axes(ax)
    colors = _budget_colors(len(result.budgets))
    method = result.settings.get("method", "parabola")
    window = result.settings.get("window")
    finals = None
    if ladder is not None:
        finals, _ = ladder.final_points()
        finals = finals.set_index("run")
    for b, color in zip(result.budgets, colors):
        label = f"C = {b.flops:.3g}" + ("" if b.used else " (not used)")
        if finals is not None:
            missing = [r for r in b.runs if r not in finals.index]
            if missing:
                raise LadderError(f"budget {b.label}: run(s) {_listed(missing)} are not among "
                                  f"the finished runs of ladder {ladder.name!r}; pass the "
                                  f"ladder the analysis was run on")
            pts = finals.loc[list(b.runs)]
            n, loss = pts["params"].to_numpy(float), pts["loss"].to_numpy(float)
            ax.plot(n, loss, "o", ls="none", color=color, ms=5, gid="budget-points",
                    label=label)
            label = None
            if len(b.runs) >= {"cubic": 4}.get(method, 3):
                gn, gl = _budget_curve(method, window, n, loss)
                ax.plot(gn, gl, color=color, lw=1.2, alpha=0.9, gid="budget-curve",
                        ls="-" if b.used else ":")
        if math.isfinite(b.params) and math.isfinite(b.loss):
            if b.params_interval is not None:
                ax.hlines([b.loss], [b.params_interval[0]], [b.params_interval[1]],
                          colors=[color], lw=2.5, alpha=0.6, gid="vertex-interval")
            ax.plot([b.params], [b.loss], "*", ls="none", ms=13, mec="k", mew=0.7,
                    mfc=color if b.used else "none", zorder=4, gid="vertex", label=label)
    ax.set_xscale("log")
    ax.set_xlabel(_X_LABELS["params"])
    ax.set_ylabel(f"final loss [{ladder.unit}]" if ladder is not None else "final loss")
    a = result.params_law
    # One budget has a vertex but no power law across budgets.
    slope = f"N* ~ C^{a.exponent:.3f}" if a is not None else "one budget, no power law"
    ax.set_title(f"isoFLOP analysis of {result.ladder or 'ladder'}: {method} per budget, "
                 f"{slope}", fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    from matplotlib.lines import Line2D

    star = Line2D([], [], ls="none", marker="*", ms=11, mec="k", mfc="0.6")
    _legend(ax, [(star, f"vertex N*, L* ({result.budgets[0].level:.0%} interval of N*)")],
            ncol=2 if len(result.budgets) > 6 else 1)
    if frontier_ax is not None:
        plot_isoflop_frontier(result, ax=frontier_ax)
    return ax


def plot_isoflop_frontier(result: IsoflopResult | EnvelopeResult, *, ax: "Axes | None" = None,
                          quantity: str = "params") -> "Axes":
    """Draw the compute-optimal N*(C) (or D*(C)) and its power law, log-log.

    * for an :class:`~delphi.analyses.isoflop.IsoflopResult`, each budget's optimum (``gid="optima"``,
      used budgets; ``gid="unused-optima"``, hollow, budgets left out of the fit), at the
      point estimate or the bootstrap median as the power law was fitted (``settings
      ["center"]``), with its bootstrap interval as a vertical bar (``gid="optimum-interval"``);
      for an :class:`~delphi.analyses.isoflop.EnvelopeResult` (Approach 1), the envelope's minimisers
      (``gid="optima"``; edge points hollow, ``gid="unused-optima"``);
    * the fitted power law N* = G C^a (``gid="power-law"``) over the budgets' range.

    Parameters
    ----------
    result: an Approach 2 or Approach 1 result.
    ax: Axes to draw on; default a new figure's.
    quantity: ``"params"`` (N* [parameters]) or ``"tokens"`` (D* [tokens]).

    Raises
    ------
    TypeError: ``result`` is neither an IsoflopResult nor an EnvelopeResult.
    LadderError: ``quantity`` is not ``"params"`` or ``"tokens"``.
    """
    _check_type(result, (IsoflopResult, EnvelopeResult), "result")
    if quantity not in ("params", "tokens"):
        raise LadderError(f"quantity must be 'params' or 'tokens', got {quantity!r}")
    ax = _axes(ax)
    law = result.params_law if quantity == "params" else result.tokens_law
    sym = "N*" if quantity == "params" else "D*"
    if isinstance(result, IsoflopResult):
        median = result.settings.get("center") == "median"
        attr = f"{quantity}_median" if median else quantity
        cs = np.array([b.flops for b in result.budgets])
        ys = np.array([getattr(b, attr) for b in result.budgets])
        used = np.array([b.used for b in result.budgets])
        for b, c, y in zip(result.budgets, cs, ys):
            iv = getattr(b, f"{quantity}_interval")
            if iv is not None and math.isfinite(y):
                ax.vlines([c], [iv[0]], [iv[1]], colors="C0", lw=2, alpha=0.5,
                          gid="optimum-interval")
        what = "budget optima" + (" (bootstrap medians)" if median else "")
    else:
        cs = np.array([p.flops for p in result.points])
        ys = np.array([getattr(p, quantity) for p in result.points])
        used = ~np.array([p.edge and result.settings.get("drop_edge", True)
                          for p in result.points])
        what = "lower-envelope minimisers"
    ok = np.isfinite(ys)
    ax.plot(cs[used & ok], ys[used & ok], "o", ls="none", color="C0", ms=6, gid="optima",
            label=f"{what} ({int((used & ok).sum())})")
    if (~used & ok).any():
        ax.plot(cs[~used & ok], ys[~used & ok], "o", ls="none", mfc="none", mec="C0", ms=6,
                gid="unused-optima", label=f"not fitted ({int((~used & ok).sum())})")
    if law is not None:  # None for a single budget: a power law needs two
        grid = np.geomspace(cs.min(), cs.max(), _N_CURVE)
        ax.plot(grid, law.predict(grid), "-", color="C1", lw=1.8, gid="power-law",
                label=law.formula)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(_X_LABELS["flops"])
    ax.set_ylabel("compute-optimal model size N* [parameters]" if quantity == "params"
                  else "compute-optimal tokens D* [tokens]")
    ax.set_title(f"{sym}(C) of {result.ladder or 'ladder'} (Approach {result.approach})",
                 fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    _legend(ax)
    return ax


# ------------------------------------------------------------------------------- completions
def _fitted_steps(completion: Completion) -> set[int]:
    prefix = f"{completion.run}@"
    return {int(float(lbl[len(prefix):])) for lbl in completion.fit.labels
            if lbl.startswith(prefix)}


def plot_completion(completion: Completion, ladder: Ladder, *,
                    ax: "Axes | None" = None) -> "Axes":
    """Draw a curve completion: the run's checkpoints, the fitted trajectory, the final loss.

    Against the training step (linear x axis), loss in ``ladder.unit``:

    * the checkpoints the curve law was fitted to (``gid="fitted-checkpoints"``) and the run's
      other checkpoints (``gid="held-out-checkpoints"``, hollow; e.g. those after
      ``upto_fraction``), from ``ladder``; siblings fitted with ``siblings=True`` are not
      drawn (the legend counts them);
    * the fitted law along the run's planned schedule (``gid="trajectory"``), from the first
      checkpoint to the planned end, solid up to the last fitted step and dashed after it;
    * a dotted line at the last fitted step (``gid="fit-cutoff"``);
    * the predicted final loss at the planned end (``gid="predicted-final"``, a star) and the
      observed final loss when the run reached its end (``gid="actual-final"``).

    Parameters
    ----------
    completion: :func:`delphi.curves.complete` output.
    ladder: the ladder it was computed from (checkpoints and the run's schedule).
    ax: Axes to draw on; default a new figure's.

    Raises
    ------
    TypeError: ``completion`` is not a :class:`~delphi.curves.Completion`, or ``ladder`` not a
        :class:`~delphi.ladder.Ladder`.
    LadderError: the run is not in ``ladder``, has no schedule there, or its planned length
        there differs from the completion's (not the ladder it came from).
    """
    _check_type(completion, Completion, "completion")
    _check_type(ladder, Ladder, "ladder")
    t = ladder.table
    g = t[t["run"] == completion.run]
    if g.empty:
        raise LadderError(f"run {completion.run!r} is not in ladder {ladder.name!r}; pass the "
                          f"ladder the completion was computed from")
    sched = run_schedule(ladder, completion.run)
    total = int(sched.total_steps)
    if total != completion.total_steps:
        raise LadderError(f"run {completion.run!r} plans {total} steps in ladder "
                          f"{ladder.name!r} but the completion's {completion.total_steps}: "
                          f"pass the ladder the completion was computed from")
    ax = _axes(ax)
    steps = np.minimum(g["step"].to_numpy(float), total)
    loss = g["loss"].to_numpy(float)
    fitted = np.isin(steps.astype(np.int64), list(_fitted_steps(completion)))
    n_own = int(fitted.sum())
    siblings = completion.n_checkpoints - n_own
    label = f"fitted checkpoints ({n_own})"
    if siblings > 0:
        label += f"; plus {siblings} of sibling runs, not drawn"
    ax.plot(steps[fitted], loss[fitted], "o", ls="none", color="C0", ms=4,
            gid="fitted-checkpoints", label=label)
    if (~fitted).any():
        ax.plot(steps[~fitted], loss[~fitted], "o", ls="none", mfc="none", mec="C0", ms=4,
                gid="held-out-checkpoints", label=f"held-out checkpoints ({int((~fitted).sum())})")

    start = max(int(steps.min()), 1)
    grid = np.unique(np.round(np.linspace(start, total, 400)).astype(np.int64))
    grid = np.union1d(grid, [completion.fitted_upto_step]).astype(np.int64)
    f = features(sched, grid, momentum=ANNEALING_MOMENTUM)
    x = {"S1": f["S1"], "S2": f["S2"], "h": f["h"], "step": grid.astype(float),
         "_group": np.zeros(grid.size, dtype=int), "_lrs": [sched.lrs()]}
    curve = completion.fit.predict(x)
    upto = grid <= completion.fitted_upto_step
    law = completion.fit.law.name
    ax.plot(grid[upto], curve[upto], "-", color="C1", lw=1.8, gid="trajectory",
            label=f"{law} law: {_fmt_params(completion.fit.params)}")
    if (~upto).any():
        k = np.flatnonzero(~upto)
        k = np.concatenate([[k[0] - 1], k]) if k[0] > 0 else k
        ax.plot(grid[k], curve[k], "--", color="C1", lw=1.5, gid="trajectory",
                label="predicted trajectory to the planned end")
    ax.axvline(completion.fitted_upto_step, color="0.4", ls=":", lw=1, gid="fit-cutoff",
               label=f"fitted up to step {completion.fitted_upto_step}")
    ax.plot([total], [completion.loss], "*", ls="none", color="C2", ms=14, mec="k", mew=0.6,
            zorder=5, gid="predicted-final",
            label=f"predicted final loss {completion.loss:.4f} at step {total}")
    if completion.actual is not None:
        ax.plot([total], [completion.actual], "D", ls="none", color="C3", ms=7, zorder=5,
                gid="actual-final", label=f"actual final loss {completion.actual:.4f} "
                                          f"({completion.rel_error:+.2%})")
    ax.set_xlabel("training step")
    ax.set_ylabel(f"loss [{ladder.unit}]")
    ax.set_title(f"{completion.run}: {law} completion\n{completion.n_checkpoints} checkpoints "
                 f"fitted up to step {completion.fitted_upto_step} of {total} "
                 f"({completion.schedule})", fontsize="medium")
    ax.grid(True, alpha=0.3)
    _legend(ax)
    return ax
