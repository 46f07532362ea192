"""Matplotlib figures of delphi's objects: fits, forecasts, backtests, isoFLOP analyses and
curve completions.

Every function draws on the Axes it is given (or on a new figure's Axes when ``ax`` is None)
and returns that Axes; nothing is shown (no ``plt.show()``) and no global setting (rcParams,
style, backend) is changed. Artists carry a ``gid`` naming what they are (``"fit-points"``,
``"law-curve"``, ``"target-interval"``...) so a figure can be checked or restyled afterwards::

    import delphi
    from delphi.plot import caption, plot_forecast

    ladder = delphi.load_ladder("marin-moe-535b")
    forecast = delphi.predict(ladder, {"flops": 2.61e24}, "power", fixed={"E": 1.5})
    ax = plot_forecast(forecast, ladder=ladder)      # ladder: draw the excluded d2048 rung too
    ax.figure.savefig("forecast.png", dpi=150)
    print(caption(forecast))                         # the text under it, warnings in full

Figures are made to go into a paper as they are: legends are compact and sit in a free corner
of the axes (else under them), and warnings are not drawn unless asked for
(``warnings=True``); :func:`caption` gives them in full.

Units: compute C in FLOPs, model size N in parameters, D in tokens, loss in the ladder's unit
(nats/token unless the ladder says otherwise). Wrong object types raise ``TypeError``;
a law the figure cannot draw raises :class:`~delphi.errors.LawError`; inconsistent
inputs raise the delphi error of the object concerned (``TargetError``, ``LadderError``).
"""

from __future__ import annotations

import math
import re
import textwrap
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.text import level_percent
from ..analyses.backtest import Backtest
from ..analyses.recipes import RecipeComparison
from ..forecasting.curves import Completion
from ..inputs.law_inputs import ANNEALING_MOMENTUM, run_schedule
from ..errors import OPTION, LadderError, LawError, TargetError, option
from ..fitting import Fit
from ..forecasting.forecast import Forecast, Target
from ..analyses.isoflop import EnvelopeResult, IsoflopResult
from ..analyses.isoflop.vertices import vertex_window
from ..inputs.ladder import FLOPS_PER_PARAM_TOKEN, Ladder
from ..laws import CURVE_LAWS, HPARAM_LAWS
from ..inputs.schedules import features

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["plot_fit", "plot_forecast", "plot_residuals", "plot_backtest", "plot_isoflop",
           "plot_isoflop_frontier", "plot_completion", "plot_accuracy", "plot_recipes", "caption",
           "KINDS"]

#: What ``delphi plot KIND`` draws, by KIND.
KINDS = {"forecast": "plot_forecast", "fit": "plot_fit", "residuals": "plot_residuals",
         "backtest": "plot_backtest", "isoflop": "plot_isoflop",
         "frontier": "plot_isoflop_frontier", "completion": "plot_completion",
         "accuracy": "plot_accuracy", "recipes": "plot_recipes"}

_X_LABELS = {"flops": "training compute C [FLOPs]",
             "params": "model size N [parameters]",
             "tokens": "training tokens D [tokens]"}
_MAX_LISTED = 3          # excluded runs named in a legend entry
_N_CURVE = 200


# ------------------------------------------------------------------------------- helpers
def _axes(ax: Any, figsize: tuple[float, float] = (9.0, 4.8)) -> "Axes":
    """``ax`` itself, or the Axes of a new figure when ``ax`` is None.

    A new figure uses matplotlib's constrained layout, so the legends and note boxes drawn
    outside the axes are kept inside the saved figure. On an Axes of your own, save with
    ``bbox_inches="tight"`` (or use constrained layout) to keep them.
    """
    from matplotlib.axes import Axes

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=figsize, layout="constrained")
        return ax
    if not isinstance(ax, Axes):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    return ax


def _inputs(fit: Fit) -> Mapping:
    """The inputs a fit read (``fit.inputs`` when the Fit has it, else ``fit.x``)."""
    x = getattr(fit, "inputs", None)
    return x if isinstance(x, Mapping) else fit.x


#: Parameter names written as Greek letters in legends and titles.
_GREEK = {"alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "eta": "η",
          "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "rho": "ρ", "sigma": "σ",
          "tau": "τ", "phi": "φ", "omega": "ω"}


def _symbol(name: str) -> str:
    """``alpha`` -> ``α``, ``beta_lr`` -> ``β_lr``; other names unchanged."""
    head, sep, tail = name.partition("_")
    return _GREEK.get(head, head) + sep + tail


def _fmt_params(params: dict[str, float], per_line: int = 3,
                fixed: Mapping[str, float] | None = None) -> str:
    """``"E = 1.5 (fixed), A = 83.04, α = 0.0895"``, ``per_line`` parameters a line."""
    fixed = fixed or {}
    items = [f"{_symbol(k)} = {v:.4g}" + (" (fixed)" if k in fixed else "")
             for k, v in params.items()]
    return "\n".join(", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line))


# The warnings a reader most needs first, by the words they start with.
_WARNING_ORDER = ("not identified", "degenerate", "the fit did not converge", "did not converge",
                  "poorly determined", "at a bound", "no residual degrees of freedom")
_NOTE_WIDTH = 95          # characters a line in a note box
_NOTE_CHARS = 220         # a longer warning is shown up to the end of its first clause


def _warning_rank(text: str) -> int:
    low = text.lower()
    for i, key in enumerate(_WARNING_ORDER):
        if key in low[:60]:
            return i
    return len(_WARNING_ORDER)


def _protect_options(text: str) -> str:
    """``text`` with the spaces inside each ``api (CLI --flag)`` made non-breaking, so that
    wrapping never splits one (the command line rewrites the whole span to its flag)."""
    return OPTION.sub(lambda m: m.group(0).replace(" ", "\u00a0"), text)


def _fill(text: str, width: int) -> str:
    """``textwrap.fill`` that keeps each ``api (CLI --flag)`` on one line."""
    return textwrap.fill(_protect_options(text), width).replace("\u00a0", " ")


def _first_clause(text: str, limit: int = _NOTE_CHARS) -> str:
    """``text`` when it is at most ``limit`` characters, else its words up to the end of its
    first sentence or ``;``-clause outside brackets: whole words, never cut mid-sentence with
    an ellipsis (the full text is in the caption and the report)."""
    if len(text) <= limit:
        return text
    depth = 0
    for i, ch in enumerate(text[:-1]):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(depth - 1, 0)
        elif depth == 0 and text[i + 1] == " ":
            if ch == ";":
                return text[:i]
            if ch == "." and i > 0 and text[i - 1] not in " ." and \
                    not text[:i + 1].endswith(("e.g.", "i.e.", "vs.")):
                return text[:i + 1]
    return text


def _note_text(warnings_: list[str] | tuple[str, ...], what: str, where: str,
               kind: str = "warning") -> str:
    """The text of a warning box: the count, the most important warning (whole, or its first
    clause when long) wrapped, and where to read the others."""
    items = list(dict.fromkeys(w for w in warnings_ if w))
    first = min(items, key=_warning_rank)
    n = len(items)
    head = f"{'⚠ ' if kind == 'warning' else ''}{n} {what} {kind}{'s' if n > 1 else ''}: "
    text = _fill(head + _first_clause(first), _NOTE_WIDTH)
    if n > 1:
        # where the others are: the report printed with the result (CLI, HTML page, print())
        text += f"\n(and {n - 1} more in the {where})"
    return text


def _note_box(ax: "Axes", warnings_, what: str = "fit", where: str = "fit's report",
              kind: str = "warning", under=None):
    """A wrapped warning box under ``ax`` (below its x label, off the data), or under the
    legend ``under`` when that sits below the axes: ``gid="warnings-note"``. None when there
    is nothing to say."""
    if not warnings_:
        return None
    if under is not None:
        where_xy = {"xy": (0, 0), "xycoords": under, "xytext": (0, -6)}
    else:
        where_xy = {"xy": (0, 0), "xycoords": "axes fraction", "xytext": (0, -44)}
    return ax.annotate(_note_text(warnings_, what, where, kind), **where_xy,
                       textcoords="offset points", ha="left", va="top",
                       fontsize="x-small", gid="warnings-note", annotation_clip=False,
                       bbox={"boxstyle": "round,pad=0.4", "fc": "#fff6e5", "ec": "#d08a00",
                             "lw": 0.8})


def _short_reason(reason: str) -> str:
    """The kind of an exclusion reason: its words before the first ``:``, ``;`` or ``(``
    (``"unfinished (fraction = 0.8); ..."`` -> ``"unfinished"``), numbers dropped. A setting
    named in both spellings (``drop_invalid=True (CLI --drop-invalid)``) is kept whole."""
    spans: list[str] = []

    def hold(m: re.Match) -> str:
        spans.append(m.group(0))
        return f"\x00{chr(65 + len(spans) - 1)}\x00"      # no digits, no : ; (

    head = re.split(r"[:;(]", OPTION.sub(hold, reason), maxsplit=1)[0]
    head = re.sub(r"\s+", " ", re.sub(r"[-+]?\d[\d.e+-]*", "", head)).strip(" ,.")
    head = textwrap.shorten(head, 40, placeholder="…") if head else ""
    for i, span in enumerate(spans):
        head = head.replace(f"\x00{chr(65 + i)}\x00", span)
    return head or textwrap.shorten(reason, 40, placeholder="…")


def _check_type(obj: Any, cls: type | tuple[type, ...], what: str, hint: str = "") -> None:
    if not isinstance(obj, cls):
        names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise TypeError(f"{what} must be a delphi {names}, got {type(obj).__name__}{hint}")


def _ladder_arg(ladder: Any) -> Ladder:
    """``ladder=`` of a plot: a Ladder, or a DataFrame of runs read as ``load_ladder`` reads
    it (as everywhere a ladder is taken); anything else is a TypeError."""
    import pandas as pd

    if isinstance(ladder, pd.DataFrame):
        from ..inputs.readers import as_ladder
        return as_ladder(ladder)
    if not isinstance(ladder, Ladder):
        raise TypeError(f"ladder must be a delphi Ladder or a pandas DataFrame of runs, got "
                        f"{type(ladder).__name__}")
    return ladder


def _listed(names: list[str], limit: int = _MAX_LISTED) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _counted(what: str, names: list[str], limit: int = _MAX_LISTED) -> str:
    """``"what (3): a, b, c"``, or ``"what (25)"`` when there are more than ``limit`` names."""
    return f"{what} ({len(names)})" + (f": {', '.join(names)}" if len(names) <= limit else "")


#: Where a legend goes, in order: the first free corner inside the axes, else below them.
_CORNERS = ("upper right", "upper left", "lower left", "lower right")
_LEGEND_STYLE = {"fontsize": "x-small", "framealpha": 0.9, "borderaxespad": 0.5,
                 "handlelength": 2.4, "labelspacing": 0.35}
_LEGEND_PAD = 4.0         # pixels kept between a legend and the data


def _obstacles(ax: "Axes") -> tuple[np.ndarray, list]:
    """What a legend inside ``ax`` must not cover, in axes fractions: every marker and curve
    vertex (lines densified to a point every 1% of the axes, interval bars likewise, scatter
    offsets) and the bounding boxes of the texts drawn on the axes. Lines and spans in axes
    coordinates (a zero line, a band) are left out: a legend may sit over them.

    Axes fractions do not change when a layout engine later moves or resizes the axes, so no
    draw is needed to settle the layout first (a draw costs as much as the figure)."""
    from matplotlib.collections import LineCollection, PathCollection

    ax.get_xlim(), ax.get_ylim()                 # autoscale now: transData reads the limits
    to_axes = ax.transAxes.inverted()

    def dense(xy: np.ndarray, joined: bool) -> np.ndarray:
        xy = to_axes.transform(xy)
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        if not joined or len(xy) < 2:
            return xy
        steps = np.minimum(np.maximum(np.ceil(np.hypot(*np.diff(xy, axis=0).T) / 0.01), 1),
                           200).astype(int)
        parts = [np.linspace(p, q, k, endpoint=False) for p, q, k in zip(xy[:-1], xy[1:], steps)]
        return np.vstack(parts + [xy[-1:]])

    points = [np.empty((0, 2))]
    for line in ax.get_lines():
        if line.get_transform() is not ax.transData or not line.get_visible():
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), float))
        points.append(dense(xy, line.get_linestyle() not in ("None", "none", " ", "")))
    for coll in ax.collections:
        if isinstance(coll, LineCollection):
            for seg in coll.get_segments():
                points.append(dense(coll.get_transform().transform(np.asarray(seg, float)),
                                    True))
        elif isinstance(coll, PathCollection):
            offsets = np.asarray(coll.get_offsets(), float)
            if offsets.size:
                points.append(dense(coll.get_offset_transform().transform(offsets), False))
    boxes = [t.get_window_extent().transformed(to_axes) for t in ax.texts
             if t.get_visible() and t.get_text()]
    return np.vstack(points), boxes


def _covers(bbox, points: np.ndarray, boxes: list, pad: tuple[float, float]) -> bool:
    """Whether ``bbox`` (axes fractions, padded by ``pad``) covers any of the points or
    boxes."""
    x0, y0, x1, y1 = bbox.x0 - pad[0], bbox.y0 - pad[1], bbox.x1 + pad[0], bbox.y1 + pad[1]
    if len(points) and np.any((points[:, 0] >= x0) & (points[:, 0] <= x1) &
                              (points[:, 1] >= y0) & (points[:, 1] <= y1)):
        return True
    return any(b.x0 < x1 and b.x1 > x0 and b.y0 < y1 and b.y1 > y0 for b in boxes)


def _legend(ax: "Axes", extra: list | None = None, *, title: str | None = None,
            below: "Axes | None" = None, handles: list | None = None,
            labels: list | None = None):
    """A compact legend (x-small font, at most two columns) in the first corner of ``ax``
    where it covers no data and no text, else centred under ``below`` (default ``ax``),
    under its tick labels and x label. Returns the Legend (gid ``"legend"``, or
    ``"legend-below"`` when under the axes), or None without entries.

    ``handles``/``labels`` replace the axes' own entries; ``extra`` adds (handle, label)
    pairs. A tuple handle draws its artists on top of each other (a bar over a band, a star
    over its interval), as they are drawn on the axes.
    """
    from matplotlib.legend_handler import HandlerTuple
    from matplotlib.transforms import ScaledTranslation

    if handles is None:
        handles, labels = ax.get_legend_handles_labels()
    handles, labels = list(handles), list(labels)
    for handle, label in extra or ():
        handles.append(handle)
        labels.append(label)
    if not handles:
        return None
    style = dict(_LEGEND_STYLE, title=title, title_fontsize="x-small",
                 handler_map={tuple: HandlerTuple(ndivide=1)})
    points, boxes = _obstacles(ax)
    box = ax.get_window_extent()
    pad = (_LEGEND_PAD / max(box.width, 1.0), _LEGEND_PAD / max(box.height, 1.0))
    to_axes = ax.transAxes.inverted()
    for ncols in (1, 2) if len(handles) > 3 else (1,):
        for corner in _CORNERS:
            legend = ax.legend(handles, labels, loc=corner, ncols=ncols, **style)
            bb = legend.get_window_extent().transformed(to_axes)
            if bb.width <= 0.97 and bb.height <= 0.97 and not _covers(bb, points, boxes, pad):
                legend.set_gid("legend")
                return legend
            legend.remove()
    under = below if below is not None else ax
    fig = ax.figure
    # Below the tick labels and x label of ``under``: an offset in points from its bottom
    # edge, so that a layout that later resizes the axes keeps the gap.
    gap = (under.get_window_extent().y0 - under.get_tightbbox().y0) / fig.dpi * 72 + 4
    anchor = under.transAxes + ScaledTranslation(0, -gap / 72, fig.dpi_scale_trans)
    legend = ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0),
                       bbox_transform=anchor, ncols=min(2, len(handles)), **style)
    legend.set_gid("legend-below")
    return legend


def _legend_below(ax: "Axes"):
    """The legend of ``ax`` when it sits below the axes (a note box then goes under it)."""
    legend = ax.get_legend()
    return legend if legend is not None and legend.get_gid() == "legend-below" else None


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
            out[name] = np.full(params.shape, float(np.min(_inputs(fit)["h"])))
        else:
            out[name] = np.full(params.shape, float(np.median(_inputs(fit)[name])))
    return out


def _coordinates(fit: Fit, x: str) -> np.ndarray:
    """x coordinate of every fitted point: C (given, else 6·N·D), N or D."""
    if x == "flops":
        if "flops" in _inputs(fit):
            return np.asarray(_inputs(fit)["flops"], float)
        return FLOPS_PER_PARAM_TOKEN * np.asarray(_inputs(fit)["params"], float) * \
            np.asarray(_inputs(fit)["tokens"], float)
    return np.asarray(_inputs(fit)[x], float)


def _nd_path(fit: Fit, lo: float, hi: float, target_nd: tuple[float, float, float] | None):
    """N and D along the ladder's allocation, as functions of C = 6·N·D.

    ln N is regressed on ln C over the fitted points (a constant D/N when they share one C);
    beyond the data, towards a target at (C_t, N_t), ln N is interpolated linearly in ln C
    from the regression's value at the data's edge to the target's, so the curve ends on the
    target's own N and D. Returns a function C -> (N, D) and the data's C range.
    """
    n = np.asarray(_inputs(fit)["params"], float)
    c = FLOPS_PER_PARAM_TOKEN * n * np.asarray(_inputs(fit)["tokens"], float)
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
    """The fit's excluded runs, once each, without the source's row filters (run ``"*"``)."""
    seen: dict[str, Any] = {}
    for e in fit.exclusions:
        if e.run != "*" and e.run not in seen:
            seen[e.run] = e
    return list(seen.values())


def _end_row(ladder: Ladder, run: str):
    """A run's end row in ``ladder.table`` (its ``final`` row, else its last), or None."""
    t = ladder.table
    g = t[t["run"] == run]
    if g.empty:
        return None
    if "final" in g.columns and g["final"].fillna(False).astype(bool).any():
        return g[g["final"].fillna(False).astype(bool)].iloc[0]
    return g.iloc[-1]


def _excluded_points(fit: Fit, ladder: Ladder, x: str):
    """The fit's excluded runs found in ``ladder``: (names, x coordinates, final losses,
    short reasons, full rows) and the names of excluded runs without coordinates."""
    names, xs, ys, reasons, rows, unknown = [], [], [], [], [], []
    for e in _run_exclusions(fit):
        row = _end_row(ladder, e.run)
        if row is None:
            unknown.append(e.run)
            continue
        if x == "flops" and "flops" not in fit.law.inputs and \
                {"params", "tokens"} <= set(row.index):
            value = FLOPS_PER_PARAM_TOKEN * float(row["params"]) * float(row["tokens"])
        else:
            value = float(row[x]) if x in row.index and not _isnan(row[x]) else math.nan
        if not math.isfinite(value):
            unknown.append(e.run)
            continue
        names.append(e.run)
        xs.append(value)
        ys.append(float(row["loss"]))
        reasons.append(_short_reason(e.reason))
        rows.append(row)
    return names, np.array(xs, float), np.array(ys, float), reasons, rows, unknown


#: Markers of excluded runs, one per kind of reason (the fitted points are circles).
_EXCLUDED_MARKERS = ("x", "^", "s", "v", "D", "P", "<", ">")
_EXCLUDED_COLORS = ("C3", "C4", "C5", "C6", "C8", "C9", "C7", "C3")


def _by_reason(reasons: list[str]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(reasons):
        groups.setdefault(r, []).append(i)
    return groups


def _draw_excluded(ax: "Axes", fit: Fit, ladder: Ladder | None, x: str, ys_of=None,
                   gid: str = "excluded-points") -> tuple[list, list[np.ndarray]]:
    """Draw the fit's excluded runs, one marker and legend entry per kind of reason
    (``"excluded: unfinished (1): d2048"``); ``ys_of(i, row, y)`` maps a run to its y (None:
    not drawn). Returns (legend entries for runs not drawn, x arrays drawn)."""
    from matplotlib.lines import Line2D

    if not _run_exclusions(fit):
        return [], []
    names, ex, ey, reasons, rows, unknown = [], np.empty(0), np.empty(0), [], [], \
        [e.run for e in _run_exclusions(fit)]
    if ladder is not None:
        names, ex, ey, reasons, rows, unknown = _excluded_points(fit, ladder, x)
    drawn = []
    for k, (reason, idx) in enumerate(_by_reason(reasons).items()):
        yv = [ey[i] if ys_of is None else ys_of(rows[i], ey[i]) for i in idx]
        keep = [j for j, v in enumerate(yv) if v is not None and math.isfinite(v)]
        unknown += [names[idx[j]] for j in range(len(idx)) if j not in keep]
        if not keep:
            continue
        xi = ex[[idx[j] for j in keep]]
        marker = _EXCLUDED_MARKERS[k % len(_EXCLUDED_MARKERS)]
        ax.plot(xi, [yv[j] for j in keep], marker, ls="none",
                color=_EXCLUDED_COLORS[k % len(_EXCLUDED_COLORS)], ms=8,
                mew=2 if marker == "x" else 1, mfc="none" if marker != "x" else None,
                zorder=4, gid=gid,
                label=_counted(f"excluded: {reason}", [names[idx[j]] for j in keep]))
        drawn.append(xi)
    extra = []
    reason_of = {e.run: _short_reason(e.reason) for e in _run_exclusions(fit)}
    groups = _by_reason([reason_of[r] for r in unknown])
    for reason, idx in list(groups.items())[:3]:
        proxy = Line2D([], [], ls="none", marker="x", color="0.6", mew=2)
        extra.append((proxy, _counted(f"excluded, not drawn: {reason}",
                                      [unknown[i] for i in idx])
                      + ("" if ladder is not None else " (pass ladder= to draw)")))
    rest = [unknown[i] for idx in list(groups.values())[3:] for i in idx]
    if rest:
        proxy = Line2D([], [], ls="none", marker="x", color="0.6", mew=2)
        extra.append((proxy, _counted("excluded for other reasons, not drawn", rest)))
    return extra, drawn


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


def _allocation(fit: Fit, to_target: bool) -> str:
    """Along which allocation of C to N and D a law of N and D is drawn against C."""
    n = np.asarray(_inputs(fit)["params"], float)
    r = np.asarray(_inputs(fit)["tokens"], float) / n
    if np.ptp(np.log(r)) <= math.log(1.5):       # one D/N, to within 1.5x
        text = f"along the ladder's tokens/param D/N ≈ {float(np.median(r)):.3g}"
    else:
        c = FLOPS_PER_PARAM_TOKEN * n * r * n
        if np.ptp(np.log(c)) > 1e-9:
            b = float(np.polyfit(np.log(c), np.log(n), 1)[0])
            text = f"along the ladder's allocation N ∝ C^{b:.2f} (fitted to its runs)"
        else:
            text = "along the ladder's average allocation at its one C"
    return text + (", then to the target's N, D" if to_target else "")


# ------------------------------------------------------------------------------- fits
def plot_fit(fit: Fit, *, ax: "Axes | None" = None, x: str = "flops",
             target: Forecast | Target | None = None, ladder: Ladder | None = None,
             residuals: "bool | Axes" = False, warnings: bool = False) -> "Axes":
    """Draw a fitted law: its points, its curve and (optionally) the target with its intervals.

    Drawn on a log x axis (``ax.get_xscale() == "log"``) against loss on a linear y axis:

    * the fitted points (``gid="fit-points"``, one marker per point, ``fit.n_points`` of them)
      at C [FLOPs]: the law's ``flops`` input, or C = 6·N·D from the N and D it read;
    * the fitted law (``gid="law-curve"``) over the range of the fitted points, continued
      dashed (``gid="law-extrapolation"``) out to the excluded runs drawn and the target. Its
      legend entry gives the parameters with Greek letters (α, β) and marks the fixed ones
      (``E = 1.5 (fixed)``); one entry stands for both, ``"power law (dashed:
      extrapolated)"``. A law of N and D (``chinchilla``, ``overtrain``...) is drawn
      along the ladder's own allocation, and the legend says which: ``"along the ladder's
      tokens/param D/N ≈ 20"`` when the fitted runs share one D/N (within 1.5x), else
      ``"along the ladder's allocation N ∝ C^0.52"`` (ln N regressed on ln C = ln 6·N·D over
      the fitted points), then interpolated in ln C from the data's edge to the target's N
      and D, so the curve ends on the forecast. On an isoFLOP ladder (several N per C) runs
      far from that allocation sit off the curve. ``chinchilla-lr`` is evaluated at the
      fitted optimal peak LR eta*(N, D) (at the target's peak LR for a Target that gives one)
      and ``chinchilla-ckpt`` at the smallest fitted LR ratio h (the schedules' end);
    * excluded runs (``gid="excluded-points"``, one Line2D per kind of reason, each with its
      own marker and legend entry ``"excluded: unfinished (1): d2048"``) at their final (or
      last) row when ``ladder`` holds them; excluded runs without coordinates are counted
      (and named, when few) in the legend. The source's row filters (exclusions of run
      ``"*"``) are not runs and are left out;
    * the target (``gid="target"``, a hollow star, drawn under its intervals) at its C, with
      the new-run interval ``[lower, upper]`` as a thin capped bar (``gid="target-interval"``,
      a LineCollection whose one segment runs exactly from ``lower`` to ``upper``; caps
      ``gid="target-interval-caps"``), the expected-loss interval ``[mean_lower, mean_upper]``
      as a thicker bar (``gid="target-expected-interval"``), one legend entry for both, and
      the values written next to it (``gid="target-label"``: ``"2.0414 [1.98, 2.10] (90%)"``;
      without an interval, the reason in a few words: ``"no interval: 1 residual degree(s)
      of freedom and no repeated runs"``). A :class:`~delphi.forecast.Target` (no forecast)
      is drawn at the law's prediction, without intervals;
    * with ``warnings=True``, the fit's warnings (and a forecast's) as a note box under the
      axes (``gid="warnings-note"``): their count and the most important one (whole, or its
      first clause when long). Off by default: a figure for a paper carries its warnings in
      its caption, :func:`caption` (which ``delphi plot`` prints);
    * with ``residuals``, a panel of log residuals under the axes (:func:`plot_residuals`;
      its Huber band is in the loss panel's legend).

    The title is ``"ladder, metric: law, n points"`` (plus the fixed parameters). The legend
    is compact (x-small font, at most two columns) and sits in the first corner of the axes
    (upper right, upper left, lower left, lower right) where it covers no point, curve, bar or
    label, else centred under the axes (under the residual panel when there is one), below the
    x label. A new figure uses constrained layout; on your own Axes save with
    ``bbox_inches="tight"``.

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
    residuals: True to add a residual panel under ``ax`` (a new figure gets two stacked
        Axes; a given ``ax`` is split), or an Axes to draw the residuals on. The residual
        Axes has ``get_gid() == "residual-axes"`` (find it in ``ax.figure.axes``).
    warnings: True to draw the warning box (default False: the warnings go in the caption).

    Returns
    -------
    The Axes drawn on (the loss panel). The y label is ``"loss [<unit>]"`` with the
    forecast's unit (else the fit's ladder unit, nats/token by default).

    Raises
    ------
    TypeError: ``fit`` is not a :class:`~delphi.fitting.Fit`, ``target`` not a Forecast or
        Target, ``ladder`` not a Ladder, ``ax`` or ``residuals`` not an Axes.
    LawError: a loss-curve or hyperparameter law (use :func:`plot_completion`), a law of
        neither C nor (N, D), or ``x`` not one of the law's quantities.
    TargetError: the target lacks a quantity the law or the x axis needs.
    """
    _check_type(fit, Fit, "fit")
    if target is not None:
        _check_type(target, (Forecast, Target), "target")
    if ladder is not None:
        ladder = _ladder_arg(ladder)
    _check_loss_law(fit)
    law = fit.law
    if x not in _X_LABELS:
        raise LawError(f"x must be one of {', '.join(_X_LABELS)}, got {x!r}")
    if x != "flops" and not _is_2d(law):
        raise LawError(f"x={x!r} needs a law of N and D; {law.name!r} reads "
                       f"{', '.join(law.inputs)} (use x='flops')")
    ax, rax = _panels(ax, residuals)

    xp = _coordinates(fit, x)
    checkpoints = len({lbl.split("@")[0] for lbl in fit.labels}) != fit.n_points
    derived = x == "flops" and "flops" not in _inputs(fit)
    what = "fitted checkpoints" if checkpoints else "fitted runs"
    ax.plot(xp, fit.y, "o", ls="none", color="C0", ms=6, gid="fit-points",
            label=f"{what} ({fit.n_points}{', C = 6ND' if derived else ''})")

    legend_extra, drawn = _draw_excluded(ax, fit, ladder, x)
    xs_all = [xp] + drawn

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
        c_pts = FLOPS_PER_PARAM_TOKEN * np.asarray(_inputs(fit)["params"], float) * \
            np.asarray(_inputs(fit)["tokens"], float)
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
        how = " " + _allocation(fit, t_nd is not None)
    else:
        gx = np.union1d(np.geomspace(lo, hi, _N_CURVE), [lo_data, hi_data])
        curve = fit.predict({"flops": gx, **_other_inputs(fit, gx, gx)})
        how = ""
    inside = gx <= hi_data * (1 + 1e-9)
    inside &= gx >= lo_data * (1 - 1e-9)
    beyond = [side for side in (gx < lo_data * (1 - 1e-9), gx > hi_data * (1 + 1e-9))
              if side.any()]
    dashed = " (dashed: extrapolated)" if beyond else ""
    first = textwrap.fill(f"{law.name} law{dashed}{how}:", 48)
    ax.plot(gx[inside], curve[inside], "-", color="C1", lw=1.8, gid="law-curve",
            label=first + "\n" + _fmt_params(fit.params, fixed=fit.fixed))
    for side in beyond:
        # beyond the data on one side, joined to the fitted part
        idx = np.flatnonzero(side)
        idx = np.union1d(idx, [max(idx.min() - 1, 0), min(idx.max() + 1, gx.size - 1)])
        # one legend entry for the law: its label says what the dashes are
        ax.plot(gx[idx], curve[idx], "--", color="C1", lw=1.5, gid="law-extrapolation",
                label="_law extrapolated beyond the data")

    unit = (target.unit if isinstance(target, Forecast) else fit.extra.get("unit")) or \
        "nats/token"
    target_entries = []
    if tpoint is not None:
        target_entries = _draw_target(ax, target, tpoint, unit)

    ax.set_xscale("log")
    ax.set_ylabel(f"loss [{unit}]")
    ladder_name = (target.ladder_name if isinstance(target, Forecast) else
                   fit.extra.get("ladder")) or "ladder"
    metric = fit.extra.get("metric")
    # "ladder, metric: law": a metric's own parentheses are not nested in the title's
    title = f"{ladder_name}{f', {metric}' if metric and metric != 'loss' else ''}: " \
            f"{law.name} law, {fit.n_points} points"
    if not fit.converged:
        title += " - FIT DID NOT CONVERGE"
    if fit.fixed:
        title += "\n" + ", ".join(f"{_symbol(k)} = {v:.4g} fixed" for k, v in fit.fixed.items())
        title += ", not fitted: forecasts and intervals are conditional on it"
    ax.set_title(title, fontsize="medium")
    if tpoint is not None:
        # room under the target for its label
        lo_y, hi_y = ax.get_ylim()
        ax.set_ylim(min(lo_y, tpoint[1] - 0.16 * (hi_y - lo_y)), hi_y)
    ax.grid(True, which="major", alpha=0.3)
    bottom = ax
    if rax is not None:
        _residual_panel(rax, fit, x, ladder, share=True)
        ax.tick_params(labelbottom=False)
        bottom = rax
        # the panel's markers are the loss panel's; only its Huber band needs an entry
        legend_extra += [(p, p.get_label()) for p in rax.patches if p.get_gid() == "huber-delta"]
    else:
        ax.set_xlabel(_X_LABELS[x])
    handles, labels = ax.get_legend_handles_labels()
    for h, lab in target_entries:
        handles.append(h)
        labels.append(lab)
    _legend(ax, legend_extra, handles=handles, labels=labels, below=bottom)
    if warnings:
        items = list(fit.warnings) + (list(target.warnings) if isinstance(target, Forecast)
                                      else [])
        _note_box(bottom, items, "fit" if not isinstance(target, Forecast) else "forecast",
                  "forecast's report" if isinstance(target, Forecast) else "fit's report",
                  under=_legend_below(ax))
    return ax


def _draw_target(ax: "Axes", target, tpoint, unit: str) -> list:
    """The target: a small hollow star under capped interval bars, and its values. Returns
    the legend entries of the intervals, one (handle, label) pair for both bars."""
    tx, tloss, iv, name = tpoint
    kind = "forecast" if isinstance(target, Forecast) else "law at target"
    # The marker is drawn first and hollow so that the bars on top stay visible.
    ax.plot([tx], [tloss], "*", ls="none", mfc="none", mec="C2", ms=11, mew=1.4, zorder=4,
            gid="target", label=f"{name} ({kind}): {tloss:.4f}")
    text = f"{tloss:.4f}"
    entries = []
    if iv is not None:
        thick = ax.vlines([tx], [iv.mean_lower], [iv.mean_upper], colors="C2", lw=6,
                          alpha=0.45, zorder=5, gid="target-expected-interval",
                          label="_expected-loss interval")
        thin = ax.vlines([tx], [iv.lower], [iv.upper], colors="k", lw=1.3, zorder=6,
                         gid="target-interval", label="_new-run interval")
        ax.plot([tx, tx], [iv.lower, iv.upper], ls="none", marker="_", ms=12, mew=1.5,
                color="k", zorder=6, gid="target-interval-caps")
        # one entry for both bars: the values of the new-run one are also by the target
        entries.append(((thin, thick), f"{level_percent(iv.level)} intervals: one new run "
                                       f"[{iv.lower:.4f}, {iv.upper:.4f}],\nexpected loss "
                                       f"[{iv.mean_lower:.4f}, {iv.mean_upper:.4f}] (thick)"))
        text += f"\n[{iv.lower:.4f}, {iv.upper:.4f}]\n({level_percent(iv.level)}, one new run)"
    elif isinstance(target, Forecast):
        why = [f.message for f in target.findings if f.code == "no-interval"]
        text += "\n" + _fill(_no_interval_reason(why[0]) if why else "no interval", 36)
    # Below and left of the target: the law comes down to it from the upper left.
    ax.annotate(text, xy=(tx, tloss), xytext=(-8, -8), textcoords="offset points",
                ha="right", va="top", fontsize="small", gid="target-label", zorder=7,
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.7})
    return entries


def _no_interval_reason(note: str) -> str:
    """The reason of a "no interval" note, whole, without its explanation:
    ``"no interval: 1 residual degree(s) of freedom and no repeated runs: the noise..."`` ->
    ``"no interval: 1 residual degree(s) of freedom and no repeated runs"``."""
    parts = note.split(": ")
    return ": ".join(parts[:2]) if len(parts) > 2 else _first_clause(note, 70)


def _panels(ax, residuals):
    """The loss Axes and the residual Axes (None without ``residuals``)."""
    if residuals is False or residuals is None:
        return _axes(ax), None
    if residuals is not True:
        rax = _axes(residuals)        # type check before a new figure is made
        return _axes(ax), rax
    if ax is None:
        import matplotlib.pyplot as plt

        fig, (ax, rax) = plt.subplots(2, 1, figsize=(9.0, 6.4), sharex=True, layout="constrained",
                                      gridspec_kw={"height_ratios": [3, 1]})
    else:
        from mpl_toolkits.axes_grid1 import make_axes_locatable

        ax = _axes(ax)
        rax = make_axes_locatable(ax).append_axes("bottom", size="32%", pad=0.12, sharex=ax)
    return ax, rax


def _law_inputs_of_row(fit: Fit, row) -> dict[str, np.ndarray] | None:
    """The law's inputs at a ladder row (C = 6·N·D when only N and D are known); None when
    the row lacks one."""
    out = {}
    for name in fit.law.inputs:
        if name in row.index and not _isnan(row[name]):
            out[name] = np.array([float(row[name])])
        elif name == "flops" and {"params", "tokens"} <= set(row.index) and \
                not _isnan(row["params"]) and not _isnan(row["tokens"]):
            out[name] = np.array([FLOPS_PER_PARAM_TOKEN * float(row["params"]) *
                                  float(row["tokens"])])
        else:
            return None
    return out


def _residual_panel(ax: "Axes", fit: Fit, x: str, ladder: Ladder | None,
                    share: bool = False) -> list:
    """Draw the residuals on ``ax``; return the legend entries of excluded runs not drawn
    (the caller places the legend, after any labels)."""
    xp = _coordinates(fit, x)
    res = np.asarray(fit.residuals, float)
    ax.axhspan(-fit.delta, fit.delta, color="0.85", alpha=0.6, lw=0, gid="huber-delta",
               label=f"±Huber δ = {fit.delta:g} (quadratic part)")
    ax.axhline(0.0, color="k", lw=0.8, gid="zero-line")
    ax.plot(xp, res, "o", ls="none", color="C0", ms=5, gid="residual-points",
            label=f"fitted ({fit.n_points})")

    def residual(row, y):
        inputs = _law_inputs_of_row(fit, row)
        if inputs is None:
            return None
        return float(np.log(fit.predict(inputs)[0]) - math.log(y))

    extra, _ = _draw_excluded(ax, fit, ladder, x, ys_of=residual, gid="excluded-residuals")
    ax.set_xscale("log")
    ax.set_xlabel(_X_LABELS[x])
    ax.set_ylabel("ln L_pred − ln L_obs" if share else
                  "log residual ln L_pred − ln L_obs")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_gid("residual-axes")
    return extra


def label_extremes(ax: "Axes", xs, ys, names, k: int, gid: str = "residual-label") -> list:
    """Name the ``k`` points farthest from zero (in ``|y|``), largest first, each label at
    the first of a few offsets around its point (away from zero first) where it stays inside
    the axes and overlaps no label already placed; a label with no such place is left out
    rather than drawn over another. Returns the labels drawn (``gid``)."""
    xs, ys = np.asarray(xs, float), np.asarray(ys, float)
    if k <= 0 or not len(ys):
        return []
    ax.get_xlim(), ax.get_ylim()               # autoscale now: the labels' places read it
    box = ax.get_window_extent()
    placed, texts = [], []
    for i in np.argsort(-np.abs(ys), kind="stable")[:k]:
        away = 7 if ys[i] >= 0 else -7
        # at the point's own height first (unambiguous), then diagonally away from zero
        for dx, dy in ((9, 0), (-9, 0), (6, away), (-6, away), (6, -away), (-6, -away)):
            t = ax.annotate(str(names[i]), (xs[i], ys[i]), xytext=(dx, dy),
                            textcoords="offset points", fontsize="x-small", color="0.25",
                            ha="left" if dx > 0 else "right",
                            va="center" if dy == 0 else ("bottom" if dy > 0 else "top"),
                            gid=gid)
            bb = t.get_window_extent()
            inside = bb.x0 >= box.x0 and bb.x1 <= box.x1 and bb.y0 >= box.y0 and \
                bb.y1 <= box.y1
            if inside and not any(bb.overlaps(b) for b in placed):
                placed.append(bb)
                texts.append(t)
                break
            t.remove()
    return texts


def plot_residuals(fit: Fit, *, ax: "Axes | None" = None, x: str = "flops",
                   ladder: Ladder | None = None, warnings: bool = False,
                   labels: int = 3) -> "Axes":
    """Draw a fit's log residuals ln L_pred − ln L_obs against C (or N, D), log x axis.

    * the fitted points' residuals, ``fit.residuals`` (``gid="residual-points"``) at the same
      x as :func:`plot_fit`;
    * the ``labels`` largest |residuals| named by their point (``gid="residual-label"``),
      each placed where it overlaps no other label (a label with no free place is left out);
    * excluded runs (``gid="excluded-residuals"``, one marker and legend entry per kind of
      reason) at ln of the law's prediction at their end row minus ln their loss, when
      ``ladder`` holds them and gives every input the law reads;
    * a zero line (``gid="zero-line"``) and the band ±Huber delta (``gid="huber-delta"``):
      residuals outside it are in the linear (outlier-robust) part of the loss;
    * with ``warnings=True``, the fit's warnings in a note box under the axes (off by
      default: :func:`caption` gives them in full, for the text under the figure).

    The legend sits in a free corner of the axes, else under them (as in :func:`plot_fit`).
    The Axes gets ``gid="residual-axes"``. Raises as :func:`plot_fit`.
    """
    _check_type(fit, Fit, "fit")
    if ladder is not None:
        ladder = _ladder_arg(ladder)
    _check_loss_law(fit)
    if x not in _X_LABELS:
        raise LawError(f"x must be one of {', '.join(_X_LABELS)}, got {x!r}")
    if x != "flops" and not _is_2d(fit.law):
        raise LawError(f"x={x!r} needs a law of N and D; {fit.law.name!r} reads "
                       f"{', '.join(fit.law.inputs)} (use x='flops')")
    ax = _axes(ax)
    extra = _residual_panel(ax, fit, x, ladder)
    name = fit.extra.get("ladder") or "ladder"
    ax.set_title(f"{name}: residuals of the {fit.law.name} law, {fit.n_points} points "
                 f"(Huber δ = {fit.delta:g})", fontsize="medium")
    label_extremes(ax, _coordinates(fit, x), fit.residuals, fit.labels, labels)
    _legend(ax, extra)
    if warnings:
        _note_box(ax, list(fit.warnings), under=_legend_below(ax))
    return ax


def plot_forecast(forecast: Forecast, *, ax: "Axes | None" = None, x: str = "flops",
                  ladder: Ladder | None = None, residuals: "bool | Axes" = False,
                  warnings: bool = False) -> "Axes":
    """Draw a forecast: ``plot_fit(forecast.fit, target=forecast)``.

    The ladder's fitted points, the law out to the target, the target with its new-run
    interval (thin capped bar) and expected-loss interval (thick bar) and their values,
    loss in ``forecast.unit``; with ``warnings=True``, the fit's and the forecast's warnings
    in a note box (default: none on the figure; :func:`caption` has them in full). Pass
    ``ladder`` to draw excluded runs (e.g. a crashed rung) where they are, ``residuals=True``
    for a residual panel. See :func:`plot_fit` for what is drawn and the errors raised.

    Raises
    ------
    TypeError: ``forecast`` is not a :class:`~delphi.forecast.Forecast`.
    """
    _check_type(forecast, Forecast, "forecast")
    return plot_fit(forecast.fit, ax=ax, x=x, target=forecast, ladder=ladder,
                    residuals=residuals, warnings=warnings)


# ------------------------------------------------------------------------------- backtests
def plot_backtest(backtest: Backtest, *, ax: "Axes | None" = None,
                  notes: bool = False) -> "Axes":
    """Draw a backtest: the relative error of each held-out run's prediction against its C.

    * one marker per held-out run (``gid="rel-errors"``, in row order) at
      (C [FLOPs], ``rel_error`` = (actual - predicted) / predicted); runs whose actual loss
      fell outside their interval are ringed in red (``gid="outside-interval"``);
    * each run's new-run interval in the same relative units (``gid="interval-bars"``, one
      segment per run with an interval, from (lower - predicted) / predicted to
      (upper - predicted) / predicted): a marker inside its bar is a loss inside its interval;
    * a zero line (``gid="zero-line"``);
    * the design and summary (mean and max |rel. error|, coverage) in the title;
    * with ``notes=True``, the backtest's notes (e.g. why a fold has no interval) in a note
      box under the axes (``gid="warnings-note"``); off by default, as the other figures'
      warnings: :func:`caption` gives them in full.

    The y axis shows the fractions as percentages, symmetric about zero (a few errors of one
    sign would otherwise sit on the frame); the x axis is logarithmic. The legend sits in a
    free corner, else under the axes.

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
                  label=f"{level_percent(backtest.level)} new-run interval (relative to "
                        f"prediction)")
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
        line += f", coverage {s['coverage']:.0%} of {level_percent(s['level'])} intervals"
    ax.set_title(f"backtest {backtest.law}: {backtest.design}\n{line}", fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    lim = max(abs(v) for v in ax.get_ylim())     # the autoscaled limits, centred on zero
    ax.set_ylim(-lim, lim)
    _legend(ax)
    if notes:
        # why runs have no interval bar, and the like: the backtest's notes
        _note_box(ax, list(backtest.notes), "backtest", "backtest's report", kind="note",
                  under=_legend_below(ax))
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
    sel = vertex_window(u, y, window)
    u, y = u[sel], y[sel]
    grid = np.linspace(u[0], u[-1], 200)
    if method == "akima":
        z = Akima1DInterpolator(u, np.log(y))(grid)
        return np.exp(grid), np.exp(z)
    u0, scale = float(np.mean(u)), float(np.std(u)) or 1.0
    coef = np.polyfit((u - u0) / scale, y, 2 if method == "parabola" else 3)
    return np.exp(grid), np.polyval(coef, (grid - u0) / scale)


def plot_isoflop(result: IsoflopResult, ladder: Ladder | None = None, *,
                 ax: "Axes | None" = None, frontier_ax: "Axes | None" = None,
                 warnings: bool = False) -> "Axes":
    """Draw an isoFLOP analysis (Hoffmann et al. 2022, Approach 2): loss against N per budget.

    One colour per compute budget (viridis, from the smallest budget to the largest):

    * with ``ladder`` (the ladder analysed), each budget's runs (``gid="budget-points"``, one
      Line2D per budget, its final loss against N [parameters]) and the budget's fitted curve
      (``gid="budget-curve"``: the analysis' parabola, cubic or Akima spline in ln N, over the
      sampled or windowed sizes);
    * each budget's vertex (``gid="vertex"``, a star at (N*, L*); hollow when the budget was
      left out of the power-law fit) and, when bootstrapped, its N* interval as a black
      horizontal bar drawn over the star (``gid="vertex-interval"``, one segment from exactly
      the interval's lower to its upper end) with caps (``gid="vertex-interval-caps"``).
      Budgets without a vertex (no minimum) have no star;
    * with ``warnings=True``, the analysis' warnings in a note box under the axes
      (``gid="warnings-note"``; off by default: :func:`caption` gives them in full).

    The x axis is logarithmic; the title gives the fitted exponent of N* ∝ C^a. The legend
    (one entry per budget, ``C = 3e+18`` under the title ``compute budget [FLOPs]``, and one
    for the vertex with its interval) sits in a free corner of the axes, else under them.

    Parameters
    ----------
    result: :func:`delphi.analyses.isoflop.isoflop_analysis` output.
    ladder: the ladder analysed; without it only the vertices are drawn (the result keeps run
        names, not losses). Runs are matched by name.
    ax: Axes for the loss curves; default a new figure's.
    frontier_ax: a second Axes on which to draw N*(C) (:func:`plot_isoflop_frontier`), e.g.
        ``fig, (a, b) = plt.subplots(1, 2); plot_isoflop(res, ladder, ax=a, frontier_ax=b)``.
    warnings: True to draw the warning box (default False).

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
        ladder = _ladder_arg(ladder)
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
            ax.plot([b.params], [b.loss], "*", ls="none", ms=11, mec="k", mew=0.6,
                    mfc=color if b.used else "none", zorder=4, gid="vertex", label=label)
            if b.params_interval is not None:
                # on top of the star, in black with caps, so that a narrow one shows
                lo_n, hi_n = b.params_interval
                ax.hlines([b.loss], [lo_n], [hi_n], colors="k", lw=1.3, zorder=5,
                          gid="vertex-interval")
                ax.plot([lo_n, hi_n], [b.loss, b.loss], ls="none", marker="|", ms=8, mew=1.3,
                        color="k", zorder=5, gid="vertex-interval-caps")
    ax.set_xscale("log")
    ax.set_xlabel(_X_LABELS["params"])
    ax.set_ylabel(f"final loss [{ladder.unit}]" if ladder is not None else "final loss")
    a = result.params_law
    # One budget has a vertex but no power law across budgets.
    slope = f"N* ∝ C^{a.exponent:.3f}" if a is not None else "one budget, no power law"
    ax.set_title(f"isoFLOP analysis of {result.ladder or 'ladder'}: {method} per budget, "
                 f"{slope}", fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    from matplotlib.lines import Line2D

    star = Line2D([], [], ls="none", marker="*", ms=11, mec="k", mfc="0.6")
    extra = [(star, "vertex N*, L*")]
    if any(b.params_interval is not None for b in result.budgets):
        # one entry: the star with its bar
        bar = Line2D([], [], color="k", lw=1.3, marker="|", ms=8, mew=1.3)
        extra = [((star, bar), f"vertex N*, L*, {level_percent(result.budgets[0].level)} "
                               f"bootstrap interval of N*")]
    _legend(ax, extra, title="compute budget [FLOPs]")
    if warnings:
        _note_box(ax, list(result.warnings), "isoFLOP", "isoFLOP report",
                  under=_legend_below(ax))
    if frontier_ax is not None:
        plot_isoflop_frontier(result, ax=frontier_ax)
    return ax


def plot_isoflop_frontier(result: IsoflopResult | EnvelopeResult, *, ax: "Axes | None" = None,
                          quantity: str = "params") -> "Axes":
    """Draw the compute-optimal N*(C) (or D*(C)) and its power law, log-log.

    * for an :class:`~delphi.analyses.isoflop.IsoflopResult`, each budget's optimum
      (``gid="optima"``, used budgets; ``gid="unused-optima"``, hollow, budgets left out of
      the fit), at the point estimate or the bootstrap median as the power law was fitted
      (``settings["center"]``), with its bootstrap interval as a vertical bar
      (``gid="optimum-interval"``, caps ``gid="optimum-interval-caps"``);
      for an :class:`~delphi.analyses.isoflop.EnvelopeResult` (Approach 1), the envelope's
      minimisers (``gid="optima"``; edge points hollow, ``gid="unused-optima"``);
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
                ax.vlines([c], [iv[0]], [iv[1]], colors="0.2", lw=1.2, zorder=3,
                          gid="optimum-interval")
                ax.plot([c, c], list(iv), ls="none", marker="_", ms=8, mew=1.2, color="0.2",
                        zorder=3, gid="optimum-interval-caps")
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
                    ax: "Axes | None" = None, full_range: bool = False,
                    warnings: bool = False) -> "Axes":
    """Draw a curve completion: the run's checkpoints, the fitted trajectory, the final loss.

    Against the training step (linear x axis), loss in ``ladder.unit``:

    * the checkpoints the curve law was fitted to (``gid="fitted-checkpoints"``) and the run's
      other checkpoints (``gid="held-out-checkpoints"``, hollow; e.g. those after
      ``upto_fraction``), from ``ladder``; siblings fitted with ``siblings=True`` are not
      drawn (the legend counts them);
    * the fitted law along the run's planned schedule (``gid="trajectory"``), from the first
      checkpoint to the planned end, solid up to the last fitted step and dashed after it;
    * a dotted line at the last fitted step (``gid="fit-cutoff"``);
    * the predicted final loss at the planned end (``gid="predicted-final"``, a large hollow
      star) and the observed final loss when the run reached its end (``gid="actual-final"``,
      a small filled diamond drawn on top), each with its legend entry;
    * the y range covers the trajectory and checkpoints from half the fitted steps on, the
      prediction and the actual loss (8% margins), so the extrapolated part is not flattened
      by the early steep descent; earlier checkpoints above it are counted in a note
      (``gid="clipped-note"``). ``full_range=True`` keeps matplotlib's range over everything;
    * with ``warnings=True``, the completion's warnings in a note box under the axes (off
      by default: :func:`caption` gives them in full).

    The legend sits in a free corner of the axes, else under them.

    Parameters
    ----------
    completion: :func:`delphi.curves.complete` output.
    ladder: the ladder it was computed from (checkpoints and the run's schedule).
    ax: Axes to draw on; default a new figure's.
    full_range: True to show every checkpoint (the default range starts at half the
        fitted steps).
    warnings: True to draw the warning box (default False).

    Raises
    ------
    TypeError: ``completion`` is not a :class:`~delphi.curves.Completion`, or ``ladder`` not a
        :class:`~delphi.ladder.Ladder`.
    LadderError: the run is not in ``ladder``, has no schedule there, or its planned length
        there differs from the completion's (not the ladder it came from).
    """
    _check_type(completion, Completion, "completion")
    ladder = _ladder_arg(ladder)
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
            label=f"{law} law: {_fmt_params(completion.fit.params, fixed=completion.fit.fixed)}")
    if (~upto).any():
        k = np.flatnonzero(~upto)
        k = np.concatenate([[k[0] - 1], k]) if k[0] > 0 else k
        ax.plot(grid[k], curve[k], "--", color="C1", lw=1.5, gid="trajectory",
                label="predicted trajectory to the planned end")
    ax.axvline(completion.fitted_upto_step, color="0.4", ls=":", lw=1, gid="fit-cutoff",
               label=f"fitted up to step {completion.fitted_upto_step}")
    # predicted: a large hollow star; actual: a small filled diamond on top of it, so both
    # show when they nearly coincide
    ax.plot([total], [completion.loss], "*", ls="none", mfc="none", mec="C2", ms=16, mew=1.6,
            zorder=5, gid="predicted-final",
            label=f"predicted final loss {completion.loss:.4f} at step {total}")
    if completion.actual is not None:
        ax.plot([total], [completion.actual], "D", ls="none", color="C3", ms=6, zorder=6,
                gid="actual-final", label=f"actual final loss {completion.actual:.4f} "
                                          f"({completion.rel_error:+.2%} vs predicted)")
    if not full_range:
        # The y range of the part that matters: from half the fitted steps on (the early,
        # steep descent would flatten the extrapolated part to a line).
        start = 0.5 * min(completion.fitted_upto_step, total)
        ys = [curve[grid >= start], loss[steps >= start], [completion.loss]]
        if completion.actual is not None:
            ys.append([completion.actual])
        ys = np.concatenate([np.asarray(v, float) for v in ys])
        lo_y, hi_y = float(np.min(ys)), float(np.max(ys))
        pad = 0.08 * (hi_y - lo_y) or 0.01 * abs(hi_y)
        ax.set_ylim(lo_y - pad, hi_y + pad)
        above = int(np.sum(loss > hi_y + pad))
        if above:
            shows = option("full_range=True", "--full-range")
            ax.annotate(f"↑ {above} earlier checkpoint{'s' if above > 1 else ''} above the "
                        f"range ({shows} shows them)", xy=(0.01, 0.99),
                        xycoords="axes fraction", ha="left", va="top", fontsize="x-small",
                        color="0.35", gid="clipped-note",
                        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none"})
    ax.set_xlabel("training step")
    ax.set_ylabel(f"loss [{ladder.unit}]")
    ax.set_title(f"{completion.run}: {law} completion\n{completion.n_checkpoints} checkpoints "
                 f"fitted up to step {completion.fitted_upto_step} of {total} "
                 f"({completion.schedule})", fontsize="medium")
    ax.grid(True, alpha=0.3)
    _legend(ax)
    if warnings:
        _note_box(ax, list(completion.warnings), "completion", "completion's report",
                  under=_legend_below(ax))
    return ax


# ------------------------------------------------------------------------------- recipes
def _target_words(c) -> str:
    """``C = 1e+21`` or ``N = 1e+09, D = 2e+10`` of a :class:`RecipeDifference`'s target."""
    if c.target_params is None:
        return f"C = {c.target_flops:.3g}"
    return f"N = {c.target_params:.3g}, D = {c.target_tokens:.3g}"


def _times(x: float | None) -> str:
    return "unbounded" if x is None or not math.isfinite(x) else f"{x:.3g}x"


def plot_recipes(comparison: RecipeComparison, *, ax: "Axes | None" = None,
                 frontier: bool = True, warnings: bool = False) -> "Axes":
    """Draw a comparison of recipes: each recipe's loss against compute with its band, and
    below, each recipe minus the reference with its band, the crossover and the targets.

    Everything is read from ``comparison.curves`` (computed once by
    :func:`delphi.compare_recipes` from the paired fits and draws); compute C in FLOPs on a
    log axis, losses in the ladders' unit.

    Top panel (the Axes returned, ``get_gid() == "recipes-axes"``):

    * each recipe's fitted L(C) (``gid="recipe-curve"``, solid up to its largest fitted
      compute, dashed beyond: ``gid="recipe-extrapolation"``) along the comparison's path:
      the compute-optimal envelope L*(C) for targets by compute (Hoffmann et al. 2022, Eq. 4
      for ``chinchilla``), the target's tokens per parameter for a target by N and D;
    * its expected-loss band (``gid="recipe-band"``): the central quantiles at the
      comparison's level of the paired bootstrap draws;
    * with ``frontier``, its compute frontier (``gid="frontier-points"``): the lowest fitted
      loss of each compute budget;
    * each target compute (``gid="target"``, a dotted vertical line in both panels).

    Bottom panel (``gid="difference-axes"``, found in ``ax.figure.axes``):

    * each recipe minus the reference, L_B(C) - L_A(C) (``gid="difference-curve"``;
      negative: the recipe is better) with its paired band (``gid="difference-band"``);
    * a zero line (``gid="zero-line"``);
    * the crossover nearest the first target where the curves meet (``gid="crossover"``, a
      marker on the zero line) with its interval over the draws that cross
      (``gid="crossover-interval"``), when it lies on the grid;
    * at each target, the difference for one new run of each recipe with its interval
      (``gid="target-difference"``, a capped bar).

    Legends are compact and sit in a free corner of each panel, else one legend under the
    figure; warnings are not drawn unless ``warnings=True`` (a note box under the figure);
    :func:`caption` gives them in full.

    Parameters
    ----------
    comparison: from :func:`delphi.compare_recipes`.
    ax: Axes to draw on (split into the two panels); default a new figure's.
    frontier: draw each recipe's compute-frontier points (default True).
    warnings: draw the comparison's warnings in a note box (default False).

    Returns
    -------
    The top Axes.

    Raises
    ------
    TypeError: ``comparison`` is not a :class:`~delphi.analyses.recipes.RecipeComparison`,
        ``ax`` not an Axes.
    LadderError: the comparison has no curves.
    """
    _check_type(comparison, RecipeComparison, "comparison", " (from delphi.compare_recipes)")
    cv = comparison.curves
    if cv is None or not cv.flops:
        raise LadderError("the comparison has no curves to draw (make it with "
                          "delphi.compare_recipes)")
    if ax is None:
        import matplotlib.pyplot as plt

        _, (ax, dax) = plt.subplots(2, 1, figsize=(9.0, 7.0), sharex=True, layout="constrained",
                                    gridspec_kw={"height_ratios": [3, 2]})
    else:
        from mpl_toolkits.axes_grid1 import make_axes_locatable

        ax = _axes(ax)
        dax = make_axes_locatable(ax).append_axes("bottom", size="65%", pad=0.12, sharex=ax)
    ax.set_gid("recipes-axes")
    dax.set_gid("difference-axes")
    c = np.asarray(cv.flops, float)
    unit, level, ref = comparison.unit, cv.level, comparison.reference
    color = {r.recipe: f"C{i % 10}" for i, r in enumerate(cv.recipes)}
    for r in cv.recipes:
        col = color[r.recipe]
        ax.fill_between(c, r.lower, r.upper, color=col, alpha=0.18, lw=0, gid="recipe-band",
                        label="_band")
        top = max((x for x, _ in r.frontier), default=c[-1])
        inside = c <= top * (1 + 1e-9)
        name = r.recipe + (" (reference)" if r.recipe == ref else "")
        loss = np.asarray(r.loss, float)
        ax.plot(c[inside], loss[inside], "-", color=col, lw=1.8, gid="recipe-curve",
                label=name)
        if (~inside).any():
            k = max(int(np.flatnonzero(inside)[-1]) if inside.any() else 0, 0)
            ax.plot(c[k:], loss[k:], "--", color=col, lw=1.5, gid="recipe-extrapolation",
                    label="_extrapolated")
        if frontier and r.frontier:
            fx, fy = zip(*r.frontier)
            ax.plot(fx, fy, "o", ls="none", ms=4.5, mfc="white", mec=col, mew=1.2,
                    gid="frontier-points", label="_frontier")
    if frontier and any(r.frontier for r in cv.recipes):
        ax.plot([], [], "o", ls="none", ms=4.5, mfc="white", mec="0.3",
                label="compute frontier (lowest fitted loss per budget)")
    ax.plot([], [], "-", color="0.3", lw=1.8,
            label=f"fit (dashed: extrapolated); band {level_percent(level)} expected loss")
    targets = sorted({x.target_flops for x in comparison.comparisons})
    for i, t in enumerate(targets):
        for a in (ax, dax):
            a.axvline(t, ls=":", color="0.35", lw=1.1, gid="target",
                      label=("target" + ("s" if len(targets) > 1 else "") + " "
                             + ", ".join(f"{x:.3g}" for x in targets) + " FLOPs")
                      if (i == 0 and a is dax) else "_target")
    dax.axhline(0.0, color="k", lw=0.8, gid="zero-line")
    for d in cv.differences:
        col = color[d.recipe]
        dax.fill_between(c, d.lower, d.upper, color=col, alpha=0.22, lw=0,
                         gid="difference-band", label="_band")
        dax.plot(c, d.difference, "-", color=col, lw=1.8, gid="difference-curve",
                 label=f"{d.recipe} − {ref}" + (
                     "" if not comparison.n_draws else
                     f" (band {level_percent(level)}, "
                     f"{'unpaired' if comparison.pairing == 'none' else 'paired'})"))
    seen: set[str] = set()
    for x in comparison.comparisons:
        col = color[x.recipe]
        dax.vlines([x.target_flops], [x.lower], [x.upper], colors=col, lw=1.4, zorder=5,
                   gid="target-difference", label="_interval")
        dax.plot([x.target_flops] * 2, [x.lower, x.upper], ls="none", marker="_", ms=10,
                 mew=1.4, color=col, zorder=5, gid="target-difference-caps")
        dax.plot([x.target_flops], [x.loss], "D", ms=5, color=col, zorder=6,
                 gid="target-difference-point",
                 label=(f"at the target: {level_percent(level)} interval, one new run each"
                        if not seen else "_target point"))
        if x.recipe in seen:
            continue
        seen.add(x.recipe)
        if x.crossover is not None and c[0] <= x.crossover <= c[-1]:
            if x.crossover_lower is not None and x.crossover_upper is not None:
                dax.hlines([0.0], [max(x.crossover_lower, c[0])],
                           [min(x.crossover_upper, c[-1])], colors=col, lw=5, alpha=0.5,
                           zorder=4, gid="crossover-interval", label="_crossover interval")
            dax.plot([x.crossover], [0.0], "o", ms=8, mfc="white", mec=col, mew=1.8,
                     zorder=6, gid="crossover",
                     label=f"crossover {x.crossover:.3g} FLOPs"
                           + (f" [{x.crossover_lower:.3g}, {x.crossover_upper:.3g}]"
                              if x.crossover_lower is not None and
                              x.crossover_upper is not None else ""))
    ax.set_xscale("log")
    ax.set_ylabel(f"loss [{unit}]")
    ax.tick_params(labelbottom=False)
    dax.set_xlabel(_X_LABELS["flops"])
    dax.set_ylabel(f"L − L_{ref} [{unit}]" if len(ref) <= 12 else f"difference [{unit}]")
    path = ("compute-optimal envelope L*(C)" if cv.path == "envelope" else
            "at the target's tokens per parameter")
    ax.set_title(f"recipes against {ref}: {comparison.law} law, {path}\n"
                 + (f"{'unpaired' if comparison.pairing == 'none' else 'paired'} bootstrap, "
                    f"{comparison.n_draws} draws" if comparison.n_draws else
                    "no bootstrap (too few runs): no bands"), fontsize="medium")
    for a in (ax, dax):
        a.grid(True, which="major", alpha=0.3)
    top_legend = _legend(ax, below=dax)
    if top_legend is not None and top_legend.get_gid() == "legend-below":
        top_legend.remove()
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = dax.get_legend_handles_labels()
        _legend(dax, handles=h1 + h2, labels=l1 + l2)
    else:
        _legend(dax)
    if warnings:
        _note_box(dax, list(comparison.warnings), "comparison", "comparison's report",
                  under=_legend_below(dax))
    return ax


def _recipes_caption(obj: RecipeComparison) -> str:
    others = [r for r in obj.recipes if r != obj.reference]
    path = ("each recipe along its compute-optimal envelope L*(C)"
            if obj.curves is None or obj.curves.path == "envelope"
            else "each recipe at the target's tokens per parameter")
    text = (f"Recipes {', '.join(others)} against the reference {obj.reference}: the "
            f"{obj.law} law fitted to each ladder, {path}, "
            + (f"with {level_percent(obj.level)} expected-loss bands from {obj.n_draws} draws "
               f"({obj.method}); below, each recipe minus the reference with its band"
               if obj.n_draws else f"without bands ({obj.method}); below, each recipe minus "
               f"the reference")
            + " (negative: the recipe is better).")
    for c in obj.comparisons:
        part = (f" {c.recipe} − {c.reference} at {_target_words(c)}: {c.loss:+.4f} {obj.unit}, "
                f"{level_percent(obj.level)} interval for one new run each [{c.lower:+.4f}, "
                f"{c.upper:+.4f}], P({c.recipe} better) {c.p_better:.2f}, compute multiplier "
                f"{_times(c.multiplier)} [{_times(c.multiplier_lower)}, "
                f"{_times(c.multiplier_upper)}], ")
        if c.crossover is None:
            part += "no crossover in 1e15..1e27 FLOPs"
        else:
            lo = "-" if c.crossover_lower is None else f"{c.crossover_lower:.3g}"
            hi = "-" if c.crossover_upper is None else f"{c.crossover_upper:.3g}"
            part += f"crossover at {c.crossover:.3g} FLOPs [{lo}, {hi}]"
        text += " " + _sentence(part.strip())
    return text + _warnings_text(obj.warnings) + _warnings_text(obj.notes, "Notes")


# ------------------------------------------------------------------------------- captions
def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _warnings_text(items, what: str = "Warnings") -> str:
    items = list(dict.fromkeys(str(w) for w in items if w))
    if not items:
        return ""
    if len(items) == 1:
        return f" {what[:-1] if what.endswith('s') else what}: {_sentence(items[0])}"
    return f" {what} ({len(items)}): " + " ".join(f"({i}) {_sentence(w)}"
                                                  for i, w in enumerate(items, 1))


def _fit_sentence(fit: Fit) -> str:
    name = fit.extra.get("ladder") or "the ladder"
    metric = fit.extra.get("metric")
    what = f"{fit.law.name} law fitted to {fit.n_points} points of {name}"
    if metric and metric != "loss":
        what += f", {metric}"          # not in parentheses: a metric may have its own
    if fit.fixed:
        what += "; " + ", ".join(f"{k} = {v:g}" for k, v in fit.fixed.items()) + \
            " fixed (not fitted)"
    excluded = _run_exclusions(fit)
    if excluded:
        # by kind of reason, as in the legend: "unfinished (1): d2048", "curation (5)"
        groups = _by_reason([_short_reason(e.reason) for e in excluded])
        what += "; excluded: " + "; ".join(_counted(r, [excluded[i].run for i in idx])
                                           for r, idx in groups.items())
    return _sentence(what[0].upper() + what[1:])


def _fold_warnings(backtest: Backtest) -> list[str]:
    """A backtest's fold warnings, each once, prefixed with its folds (``[every fold]``)."""
    seen: dict[str, list[str]] = {}
    for f in backtest.fits:
        for w in f.get("warnings", ()):
            seen.setdefault(w, []).append(f["fold"])
    return [f"[{'every fold' if len(v) == len(backtest.fits) else ', '.join(v)}] {w}"
            for w, v in seen.items()]


def caption(obj: Any) -> str:
    """A caption for the figure of ``obj``, one paragraph of plain text: what the figure
    shows (law, points, fixed values, excluded runs; the target and its interval; a
    backtest's summary...) and then, in full, every warning the figure's note box would
    summarise (a backtest's notes). The figures leave their warnings off by default
    (``warnings=False``) so that a figure can go into a paper as it is, with this text
    under it; ``delphi plot`` prints it after writing the file (settings named by their
    flags there).

    ``obj``: a :class:`~delphi.forecast.Forecast`, :class:`~delphi.fitting.Fit`,
    :class:`~delphi.analyses.backtest.Backtest`, isoFLOP result (Approach 1 or 2),
    :class:`~delphi.curves.Completion`, :class:`~delphi.accuracy.AccuracyForecast` or
    :class:`~delphi.analyses.recipes.RecipeComparison`.

    Raises
    ------
    TypeError: ``obj`` is none of these.
    """
    if isinstance(obj, Forecast):
        fit, t = obj.fit, obj.target
        where = ", ".join(f"{k} = {v:.3g}" for k, v in (("C", t.flops), ("N", t.params),
                                                       ("D", t.tokens)) if v is not None)
        text = _fit_sentence(fit) + f" Forecast for {t.name or 'the target'} ({where}): " \
            f"{obj.loss:.4f} {obj.unit}"
        iv = obj.interval
        if iv is not None:
            text += (f", {level_percent(iv.level)} interval for one new run [{iv.lower:.4f}, "
                     f"{iv.upper:.4f}], for the expected loss [{iv.mean_lower:.4f}, "
                     f"{iv.mean_upper:.4f}] ({iv.label()}).")
        else:
            why = [f.message for f in obj.findings if f.code == "no-interval"]
            text += f"; {_sentence(why[0]) if why else 'no interval.'}"
        return text + _warnings_text(list(fit.warnings) + list(obj.warnings))
    if isinstance(obj, Fit):
        _check_loss_law(obj)
        return _fit_sentence(obj) + _warnings_text(obj.warnings)
    if isinstance(obj, Backtest):
        s = obj.summary
        text = f"Backtest of the {obj.law} law: {obj.design}; {s['n']} held-out run(s)"
        if s["n"]:
            text += (f", mean |rel. error| {s['mean_abs_rel_error']:.2%}, max "
                     f"{s['max_abs_rel_error']:.2%}")
        if s["coverage"] is not None:
            text += f", coverage {s['coverage']:.0%} of {level_percent(s['level'])} intervals"
        return _sentence(text) + _warnings_text(_fold_warnings(obj)) + \
            _warnings_text(obj.notes, "Notes")
    if isinstance(obj, (IsoflopResult, EnvelopeResult)):
        law = obj.params_law
        text = (f"IsoFLOP analysis (Approach {obj.approach}) of {obj.ladder or 'the ladder'}"
                + (f": {obj.settings.get('method', 'parabola')} per budget over "
                   f"{len(obj.budgets)} budgets" if isinstance(obj, IsoflopResult) else "")
                + (f"; {law.formula}" if law is not None else "; no power law across budgets"))
        return _sentence(text) + _warnings_text(obj.warnings)
    if isinstance(obj, Completion):
        text = (f"{obj.run}: {obj.fit.law.name} law fitted to {obj.n_checkpoints} checkpoints "
                f"up to step {obj.fitted_upto_step} of {obj.total_steps} ({obj.schedule}); "
                f"predicted final loss {obj.loss:.4f}")
        if obj.actual is not None:
            text += f", actual {obj.actual:.4f} ({obj.rel_error:+.2%})"
        return _sentence(text) + _warnings_text(obj.warnings)
    if isinstance(obj, RecipeComparison):
        return _recipes_caption(obj)
    if isinstance(obj, _accuracy_forecast_type()):
        text = (f"{obj.task.name} accuracy at N = {float(obj.target['params']):.3g}, "
                f"D = {float(obj.target['tokens']):.3g}: {100 * obj.accuracy:.1f} points, "
                f"{level_percent(obj.level)} interval for one new run [{100 * obj.lower:.1f}, "
                f"{100 * obj.upper:.1f}] (two steps: task loss from N and D, accuracy from "
                f"task loss)")
        return _sentence(text) + _warnings_text(obj.warnings)
    raise TypeError(f"caption: expected a delphi Forecast, Fit, Backtest, isoFLOP result, "
                    f"Completion, AccuracyForecast or RecipeComparison, got "
                    f"{type(obj).__name__}")


# ------------------------------------------------------------------------------- accuracy
def _accuracy_forecast_type():
    from ..analyses.accuracy import AccuracyForecast

    return AccuracyForecast


def plot_accuracy(forecast, *, axes=None, x: str = "params", actual: float | None = None,
                  actual_task_loss: float | None = None, warnings: bool = False):
    """The chained accuracy prediction of one task, in three panels.

    1. **step 1**: the fitted runs' final task loss against N (``x="params"``) or C = 6ND
       (``x="flops"``), the task-loss law along the target's allocation (tokens per
       parameter D/N of the target), and the predicted task loss at the target with its
       interval (expected task loss);
    2. **step 2**: accuracy against task loss at every fitted checkpoint, the sigmoid, the
       task's chance level, and the target (predicted task loss and accuracy with the
       new-run interval of the accuracy and the task-loss interval);
    3. **N, D -> accuracy**: each fitted run's final accuracy, the chained curve
       step2(step1(N, D)) along the target's allocation, and the target's accuracy with its
       new-run interval (thin, capped) and expected-accuracy interval (thick bar).

    Method: Bhagia et al. 2024, "Establishing Task Scaling Laws via Compute-Efficient Model
    Ladders" (arXiv 2412.04403), Eq. 1 (step 1) and Eq. 2 (step 2); see :mod:`delphi.accuracy`.

    Parameters
    ----------
    forecast: an :class:`~delphi.accuracy.AccuracyForecast` (one task).
    axes: three matplotlib Axes to draw on, or None for a new figure (1 x 3 panels).
    x: ``"params"`` (N [parameters]) or ``"flops"`` (C = 6ND [FLOPs]) on panels 1 and 3.
    actual: the target's observed final accuracy as a fraction in (0, 1] (0.612, not 61.2
        points), drawn on panels 2 and 3.
    actual_task_loss: the target's observed task loss, drawn on panels 1 and 2.
    warnings: True to write the forecast's warnings under the figure (default False:
        :func:`caption` gives them in full).

    Accuracy is drawn in points (percent); the task loss in the task's unit (bits per byte).
    Artists carry gids: ``step1-points``, ``step1-curve``, ``step1-target``, ``step2-points``,
    ``step2-curve``, ``chance``, ``step2-target``, ``chain-points``, ``chain-curve``,
    ``target-interval``, ``target-mean-interval``, ``actual``.

    Returns
    -------
    tuple of the three Axes.

    Raises
    ------
    TypeError: not an AccuracyForecast, or ``axes`` not three Axes.
    LawError: ``x`` is neither ``params`` nor ``flops``.
    TargetError: ``actual`` is not an accuracy fraction in (0, 1] (e.g. points, 61.2).
    """
    _check_type(forecast, _accuracy_forecast_type(), "forecast",
                " (from delphi.predict_accuracy, one task)")
    if x not in ("params", "flops"):
        raise LawError(f"plot_accuracy: x must be 'params' or 'flops', got {x!r}")
    if actual is not None:
        # Points (61.2) would be drawn at 6120 on the points axis: refuse rather than misdraw.
        ok = isinstance(actual, (int, float, np.integer, np.floating)) and \
            not isinstance(actual, bool) and 0 < float(actual) <= 1     # NaN fails too
        if not ok:
            raise TargetError(f"plot_accuracy: actual={actual!r} is not an accuracy fraction "
                              f"in (0, 1] (0.612, not 61.2 points)")
        actual = float(actual)
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, 3, figsize=(16, 4.8), layout="constrained")
    axes = tuple(np.ravel(np.asarray(axes, dtype=object)))
    if len(axes) != 3:
        raise TypeError(f"axes must be three matplotlib Axes, got {len(axes)}")
    for a in axes:
        _axes(a)
    ax1, ax2, ax3 = axes
    s1, s2, task = forecast.step1, forecast.step2, forecast.task
    tn, td = float(forecast.target["params"]), float(forecast.target["tokens"])
    ratio = td / tn
    xlabel = ("model size N [parameters]" if x == "params"
              else "training compute C = 6ND [FLOPs]")

    def xval(n, d):
        return np.asarray(n, float) if x == "params" else 6.0 * np.asarray(n, float) * \
            np.asarray(d, float)

    def law1(n):
        d = ratio * n
        xs = {}
        for name in s1.law.inputs:
            xs[name] = {"params": n, "tokens": d}.get(name, 6.0 * n * d)
        return s1.law.predict(s1.params, xs)

    def law2(loss):
        return s2.law.predict(s2.params, {"task_loss": np.asarray(loss, float)})

    # ---- the fitted runs' points
    pn = np.asarray(s1.x["params"], float) if "params" in s1.x else None
    pd_ = np.asarray(s1.x["tokens"], float) if "tokens" in s1.x else None
    if pn is None or pd_ is None:
        raise LawError(f"plot_accuracy needs a step-1 law of N and D, got {s1.law.name!r}")
    n_grid = np.geomspace(min(pn.min(), tn) / 1.5, max(pn.max(), tn) * 1.5, _N_CURVE)
    tx = float(xval(tn, td))
    ll, lu = forecast.task_loss_lower, forecast.task_loss_upper

    # Runs at the target's D/N (within 25%) lie on the drawn curves: filled; others hollow.
    same = np.abs(np.log(pd_ / pn / ratio)) < np.log(1.25)
    colors = np.where(same, "C0", "white")

    # ---- panel 1: task loss vs N or C
    ax1.scatter(xval(pn, pd_), s1.y, s=22, c=colors, edgecolors="C0", zorder=3,
                gid="step1-points",
                label=f"fitted runs' final task loss ({len(pn)}; filled: D/N ~ target's)")
    ax1.plot(xval(n_grid, ratio * n_grid), law1(n_grid), color="C0", lw=1.5, gid="step1-curve",
             label=f"{s1.law.name} law at D/N = {ratio:.3g} (the target's)")
    ax1.errorbar([tx], [forecast.task_loss], yerr=[[forecast.task_loss - ll],
                                                    [lu - forecast.task_loss]],
                 fmt="o", mfc="white", color="C3", capsize=4, zorder=4, gid="step1-target",
                 label=f"target: {forecast.task_loss:.4f} [{ll:.4f}, {lu:.4f}] "
                       f"({level_percent(forecast.level)}, expected)")
    if actual_task_loss is not None:
        ax1.scatter([tx], [actual_task_loss], marker="*", s=90, color="k", zorder=5,
                    gid="actual", label=f"actual {actual_task_loss:.4f}")
    ax1.set_xscale("log")
    ax1.set_xlabel(xlabel)
    ax1.set_ylabel("task loss [bits/byte]")
    ax1.set_title(f"{task.name}, step 1: task loss from N, D", fontsize="medium")

    # ---- panel 2: accuracy vs task loss
    cx = np.asarray(s2.x["task_loss"], float)
    cy = np.asarray(s2.y, float)
    ax2.scatter(cx, 100 * cy, s=5, alpha=0.35, color="C0", gid="step2-points",
                label=f"fitted checkpoints ({len(cx)})")
    lo_l = min(cx.min(), forecast.task_loss, ll) * 0.9
    hi_l = max(cx.max(), forecast.task_loss) * 1.05
    grid = np.linspace(lo_l, hi_l, _N_CURVE)
    ax2.plot(grid, 100 * law2(grid), color="C0", lw=1.5, gid="step2-curve",
             label="sigmoid: " + ", ".join(f"{_symbol(k)} = {v:.3g}"
                                           for k, v in s2.params.items()))
    ax2.axhline(100 * task.chance, color="0.4", ls=":", lw=1, gid="chance",
                label=f"chance {100 * task.chance:.0f}")
    acc = forecast.accuracy
    ax2.errorbar([forecast.task_loss], [100 * acc],
                 xerr=[[forecast.task_loss - ll], [lu - forecast.task_loss]],
                 yerr=[[100 * (acc - forecast.lower)], [100 * (forecast.upper - acc)]],
                 fmt="o", mfc="white", color="C3", capsize=4, zorder=4, gid="step2-target",
                 label=f"target: {100 * acc:.1f} [{100 * forecast.lower:.1f}, "
                       f"{100 * forecast.upper:.1f}] ({level_percent(forecast.level)}, new run)")
    if actual is not None:
        ax2.scatter([forecast.task_loss if actual_task_loss is None else actual_task_loss],
                    [100 * actual], marker="*", s=90, color="k", zorder=5, gid="actual",
                    label=f"actual {100 * actual:.1f}")
    ax2.invert_xaxis()
    ax2.set_xlabel("task loss [bits/byte] (decreasing)")
    ax2.set_ylabel("accuracy [points]")
    ax2.set_title(f"{task.name}, step 2: accuracy from task loss", fontsize="medium")

    # ---- panel 3: N, D -> accuracy
    labels = [str(s) for s in s2.labels]
    final = {}
    for i, lab in enumerate(labels):     # checkpoints are in run, step order: last = final
        final[lab] = i
    runs = [str(r) for r in s1.labels]
    keep = [r for r in runs if r in final]
    idx = [runs.index(r) for r in keep]
    ax3.scatter(xval(pn[idx], pd_[idx]), [100 * cy[final[r]] for r in keep], s=22,
                c=colors[idx], edgecolors="C0", zorder=3, gid="chain-points",
                label=f"fitted runs' final accuracy ({len(keep)}; filled: D/N ~ target's)")
    ax3.plot(xval(n_grid, ratio * n_grid), 100 * law2(law1(n_grid)), color="C0", lw=1.5,
             gid="chain-curve", label=f"step 2(step 1(N, D)) at D/N = {ratio:.3g}")
    ax3.errorbar([tx], [100 * acc], yerr=[[100 * (acc - forecast.mean_lower)],
                                          [100 * (forecast.mean_upper - acc)]],
                 fmt="none", color="C3", elinewidth=3, capsize=0, zorder=4,
                 gid="target-mean-interval",
                 label=f"expected: [{100 * forecast.mean_lower:.1f}, "
                       f"{100 * forecast.mean_upper:.1f}]")
    ax3.errorbar([tx], [100 * acc], yerr=[[100 * (acc - forecast.lower)],
                                          [100 * (forecast.upper - acc)]],
                 fmt="o", mfc="white", color="C3", capsize=5, zorder=5, gid="target-interval",
                 label=f"target: {100 * acc:.1f} [{100 * forecast.lower:.1f}, "
                       f"{100 * forecast.upper:.1f}] ({level_percent(forecast.level)}, new run)")
    ax3.axhline(100 * task.chance, color="0.4", ls=":", lw=1, gid="chance")
    if actual is not None:
        ax3.scatter([tx], [100 * actual], marker="*", s=90, color="k", zorder=6, gid="actual",
                    label=f"actual {100 * actual:.1f} ({100 * (actual - acc):+.1f} points)")
    ax3.set_xscale("log")
    ax3.set_xlabel(xlabel)
    ax3.set_ylabel("accuracy [points]")
    ax3.set_title(f"{task.name}: N = {tn:.3g}, D = {td:.3g} -> accuracy", fontsize="medium")
    from matplotlib.ticker import NullFormatter

    for a in (ax1, ax3):
        a.xaxis.set_minor_formatter(NullFormatter())   # log axes: decades only
    for a in axes:
        a.grid(True, alpha=0.3)
        a.legend(fontsize="x-small", loc="best")
    if warnings and forecast.warnings:
        _note_box(ax3, list(forecast.warnings), "forecast", "forecast's report")
    return axes
