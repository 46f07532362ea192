"""Figures of the HTML report, as inline SVG text.

The ladder page draws its forecast and backtest with :mod:`delphi.plot`
(:func:`~delphi.plot.plot_forecast`, :func:`~delphi.plot.plot_backtest`); this module adds the
figures only the report has (the residuals of a fit, a registered forecast curve against its
partial outcomes) and turns any matplotlib figure into SVG markup that can sit inside an HTML
page: no XML prolog, no metadata, element ids prefixed so that several figures on one page do
not share ids, and the same bytes for the same figure (``svg.hashsalt`` fixed, no date).

Figures are made with :class:`matplotlib.figure.Figure` directly, never through pyplot: no
global state (backend, open figures, rcParams) is touched.
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import warnings
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ...core.text import level_percent
from ...inputs.ladder import FLOPS_PER_PARAM_TOKEN
from ..plot import label_extremes

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from ...fitting import Fit
    from ...registry import Entry, Score

__all__ = ["new_figure", "to_svg", "plain_text_tick_label", "residual_figure", "curve_figure",
           "point_compute"]

#: Figure size [inches] of the report's figures (rendered at most the page's width).
FIGSIZE = (8.0, 4.8)
#: Residuals named on the residual figure (the largest |r|; the page's table has them all).
LABELLED = 3

# Fixed salt: matplotlib derives SVG ids from it, so the same figure gives the same bytes.
_RC = {"svg.hashsalt": "delphi-report", "svg.fonttype": "none", "font.size": 10,
       # no layout engine comes back when to_svg takes the figure's away (for one draw)
       "figure.autolayout": False, "figure.constrained_layout.use": False}
_ID = re.compile(r'\bid="([^"]+)"')
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_ASCII = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻", "0123456789-")
_MATH_POWER = re.compile(r"\^\{(-?\d+)\}")
# a tick label of plain_text_tick_label in matplotlib's SVG: <text style="font-size: 10px; ...
_TICK_POWER = re.compile(r'(<text style="font-size: ([\d.]+)px;[^"]*"[^>]*>)'
                         r'(\u2212?(?:\d+(?:\.\d+)?\u2009×\u2009)?\d+)([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+)</text>')


def new_figure(size: tuple[float, float] = FIGSIZE) -> "Figure":
    """A new matplotlib Figure (not registered with pyplot) of ``size`` inches, with
    constrained layout, on an Agg canvas of its own."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, layout="constrained")
    # An Agg canvas keeps one renderer for the figure (a bare Figure makes a new one each
    # time a layout or a legend's placement measures text), so text is measured once.
    FigureCanvasAgg(fig)
    return fig


def plain_text_tick_label(label: str) -> str:
    """A log axis' mathtext tick label as plain Unicode text: ``$\\mathdefault{10^{21}}$``
    -> ``"10²¹"``, ``$\\mathdefault{2\\times10^{-3}}$`` -> ``"2 × 10⁻³"`` (thin spaces
    around the sign, a leading minus sign as U+2212, as mathtext draws them). Drawn as text,
    such a label needs no mathtext parse (the costliest step of drawing a log axis). Any
    other label is returned unchanged."""
    if not (label.startswith("$\\mathdefault{") and label.endswith("}$")):
        return label
    inner = label[len("$\\mathdefault{"):-2].replace("\\times", "\u2009×\u2009")
    inner = _MATH_POWER.sub(lambda m: m.group(1).translate(_SUPERSCRIPT), inner)
    if "$" in inner or "\\" in inner or "{" in inner:
        return label                                              # not one of the forms above
    return inner.replace("-", "\u2212")


@contextlib.contextmanager
def _plain_log_ticks(fig: "Figure"):
    """While inside: every log axis of ``fig`` whose tick labels are matplotlib's default
    (:class:`~matplotlib.ticker.LogFormatterSciNotation`) writes the same labels, at the same
    ticks, as plain text (:func:`plain_text_tick_label`); the default formatter still chooses
    them. The axes' own formatters are put back on the way out."""
    from matplotlib.ticker import LogFormatterSciNotation

    plain = _plain_formatter()
    swapped = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            major, minor = axis.get_major_formatter(), axis.get_minor_formatter()
            if type(major) is LogFormatterSciNotation or type(minor) is LogFormatterSciNotation:
                swapped.append((axis, major, minor))
                if type(major) is LogFormatterSciNotation:
                    axis.set_major_formatter(plain(major))
                if type(minor) is LogFormatterSciNotation:
                    axis.set_minor_formatter(plain(minor))
    try:
        yield
    finally:
        for axis, major, minor in swapped:
            axis.set_major_formatter(major)
            axis.set_minor_formatter(minor)


@functools.cache
def _plain_formatter() -> type:
    """A :class:`~matplotlib.ticker.Formatter` that asks another for its labels and writes
    them as plain text (made on first use: matplotlib is imported only when drawing)."""
    from matplotlib.ticker import Formatter

    class PlainText(Formatter):
        def __init__(self, inner):
            self.inner = inner

        def set_axis(self, axis):
            super().set_axis(axis)
            self.inner.set_axis(axis)

        def set_locs(self, locs):
            self.inner.set_locs(locs)

        def __call__(self, x, pos=None):
            return plain_text_tick_label(self.inner(x, pos))

        def format_data(self, value):
            return self.inner.format_data(value)

        def format_data_short(self, value):
            return self.inner.format_data_short(value)

        def get_offset(self):
            return self.inner.get_offset()

    return PlainText


def _raised_exponents(svg: str) -> str:
    """The plain-text powers of ten of :func:`plain_text_tick_label` (``10¹⁸``) drawn as
    mathtext drew them: the exponent in ASCII digits, 70% of the label's size, raised by 0.41
    of it (an SVG ``<tspan>``), so the page shows the label it showed before."""
    def raise_(m: re.Match) -> str:
        size = float(m.group(2))
        digits = m.group(4).translate(_ASCII).replace("-", "\u2212")
        return (f'{m.group(1)}{m.group(3)}<tspan dy="{-0.413 * size:.3f}" '
                f'style="font-size: {0.7 * size:.3g}px">{digits}</tspan></text>')

    return _TICK_POWER.sub(raise_, svg)


@contextlib.contextmanager
def _layout_done_once(fig: "Figure"):
    """While inside, ``fig``'s constrained layout, run once here, is frozen, so that
    ``savefig`` neither lays the figure out again (a draw with drawing disabled) nor needs
    ``bbox_inches="tight"``: constrained layout keeps the title, labels, legends and note
    boxes of every Axes inside the figure. Yields True when it did, False (the layout engine
    unchanged) when the figure has no constrained layout or an Axes it does not place (one
    appended to another, with an axes locator, or added at a fixed place), the layout could
    not be made
    (matplotlib's "axes sizes collapsed" warning), or something drawn still reaches past the
    figure's edge: the caller then saves with ``bbox_inches="tight"``."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    engine = fig.get_layout_engine()
    # constrained layout places only the Axes of a grid: one added beside another
    # (axes_grid1's append_axes, an axes locator) or at a fixed place is not its own
    if not isinstance(engine, ConstrainedLayoutEngine) or any(
            ax.get_subplotspec() is None or ax.get_axes_locator() is not None
            for ax in fig.axes):
        yield False
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        engine.execute(fig)
    failed = any("constrained_layout not applied" in str(w.message) for w in caught)
    for w in caught:
        if "constrained_layout not applied" not in str(w.message):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if failed:
        yield False
        return
    if _reaches_out(fig):
        yield False
        return
    fig.set_layout_engine(None)       # None, not "none": savefig then makes no layout draw
    try:
        yield True
    finally:
        fig.set_layout_engine(engine)


def _reaches_out(fig: "Figure") -> bool:
    """Whether something the layout does not place reaches past the figure's edge: a legend,
    text, annotation or other artist of an Axes or of the figure, or an unclipped line,
    patch or collection (the Axes, their tick labels, axis labels and titles are the
    layout's own). Measured at the current layout, without updating the ticks: about 1 ms a
    figure, where the whole figure's tight bbox costs 20-40 ms."""
    renderer = fig.canvas.get_renderer() if hasattr(fig.canvas, "get_renderer") else None
    loose = [*fig.legends, *fig.texts, *fig.artists]
    for ax in fig.axes:
        loose += [*([ax.get_legend()] if ax.get_legend() is not None else []),
                  *ax.texts, *ax.artists]
        loose += [a for a in (*ax.lines, *ax.patches, *ax.collections, *ax.images)
                  if not a.get_clip_on()]
    box = fig.bbox
    for artist in loose:
        if not artist.get_visible() or not artist.get_in_layout():
            continue
        bb = artist.get_tightbbox(renderer)
        if bb is None or not (np.isfinite(bb.x0) and np.isfinite(bb.x1)) or \
                bb.width == 0 and bb.height == 0:
            continue
        if bb.x0 < box.x0 or bb.y0 < box.y0 or bb.x1 > box.x1 or bb.y1 > box.y1:
            return True
    return False


def to_svg(fig: "Figure", prefix: str, title: str = "") -> str:
    """``fig`` as an ``<svg>`` element to embed in HTML.

    Parameters
    ----------
    fig: the figure.
    prefix: prepended to every element id (``"f1-"``...) and to the references to them
        (``url(#...)``, ``href="#..."``), unique per figure on a page. Artists that share a
        gid get ``-2``, ``-3``... after the first, so ids stay unique.
    title: accessible name of the figure (``role="img"`` and ``aria-label``); escaped here.

    Returns
    -------
    The SVG markup (text is kept as ``<text>`` elements, so a browser and a text search see
    the labels). Deterministic: the same figure gives the same string.

    A figure with constrained layout (:func:`new_figure`'s) is laid out once and drawn once,
    at its own size: the layout keeps every Axes' title, labels, legends and note boxes inside
    it. Any other figure, or one whose layout collapses, is saved with
    ``bbox_inches="tight"`` (matplotlib then lays it out and draws it again to find its
    extent). Log axes with matplotlib's default tick labels get them as text with a raised
    exponent (:func:`plain_text_tick_label`), drawn as mathtext drew them, without a mathtext
    parse. The figure's own layout engine and tick formatters are put back on return.
    """
    import html

    import matplotlib as mpl

    buf = io.StringIO()
    with mpl.rc_context(_RC), warnings.catch_warnings(), _plain_log_ticks(fig):
        # a run named in a script the font lacks (CJK, emoji) is drawn as boxes; the page's
        # tables spell it out, so matplotlib's "Glyph ... missing" warning is not the user's
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing", category=UserWarning)
        with _layout_done_once(fig) as laid_out:
            if laid_out:
                # one draw: the layout is done and keeps everything inside the figure
                fig.savefig(buf, format="svg", metadata={"Date": None})
            else:
                # tight: a legend or title placed outside the axes is kept whole
                fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight",
                            pad_inches=0.08)
    text = _raised_exponents(buf.getvalue())
    text = text[text.index("<svg"):]                                  # no prolog or DOCTYPE
    text = re.sub(r"\s*<metadata>.*?</metadata>", "", text, count=1, flags=re.S)
    ids = set(_ID.findall(text))
    seen: dict[str, int] = {}

    def unique(m: re.Match) -> str:
        # several artists may share a gid ("residual-label"): ids on a page must not
        name = m.group(1)
        seen[name] = seen.get(name, 0) + 1
        return f'id="{prefix}{name}"' if seen[name] == 1 else \
            f'id="{prefix}{name}-{seen[name]}"'

    text = _ID.sub(unique, text)

    def ref(m: re.Match) -> str:
        name = m.group(2)
        return f"{m.group(1)}{prefix}{name}" if name in ids else m.group(0)

    text = re.sub(r'(url\(#|href="#)([^")]+)', ref, text)
    label = html.escape(title, quote=True)
    return text.replace("<svg ", f'<svg role="img" aria-label="{label}" ', 1)


def point_compute(fit: "Fit") -> np.ndarray | None:
    """Compute C [FLOPs] of each fitted point, shape (n_points,): the law's ``flops`` input,
    else 6·N·D from its ``params`` and ``tokens``; None when the law reads neither."""
    x = fit.x
    if "flops" in x:
        return np.asarray(x["flops"], dtype=float)
    n = x.get("active_params", x.get("params"))
    if n is not None and "tokens" in x:
        return FLOPS_PER_PARAM_TOKEN * np.asarray(n, float) * np.asarray(x["tokens"], float)
    return None


def residual_figure(fit: "Fit") -> "Figure":
    """The fit's residuals, log(L_pred) - log(L_obs) per fitted point, against compute.

    One marker per point (``gid="residuals"``) at C [FLOPs] on a log axis (by point index when
    the law reads no compute), a zero line, and the residual scale in the title (rms and max
    |r|). A point above zero is one the law predicts too high. The ``LABELLED`` largest
    |residuals| are named (``gid="residual-label"``), each where it overlaps no other label.
    """
    from matplotlib.ticker import PercentFormatter

    fig = new_figure((8.0, 3.4))
    ax = fig.subplots()
    r = np.asarray(fit.residuals, dtype=float)
    c = point_compute(fit)
    if c is None:
        xs, label = np.arange(len(r)), "fitted point (index)"
    else:
        xs, label = c, "training compute C [FLOPs]"
        ax.set_xscale("log")
    ax.axhline(0.0, color="k", lw=0.8)
    ax.plot(xs, r, "o", color="C0", ms=6, gid="residuals", label=f"fitted points ({len(r)})")
    # Log residuals are relative errors for small values: show them as percentages.
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=None))
    ax.set_xlabel(label)
    ax.set_ylabel("log(L_pred) - log(L_obs)")
    rms = float(np.sqrt(np.mean(r ** 2))) if len(r) else float("nan")
    top = float(np.max(np.abs(r))) if len(r) else float("nan")
    ax.set_title(f"residuals of {fit.law.name}: rms {rms:.3g}, max |r| {top:.3g} (log scale)",
                 fontsize="medium")
    lim = max(top, 1e-6) * 1.3
    ax.set_ylim(-lim, lim)
    ax.grid(True, alpha=0.3)
    # Name only the few largest residuals, where no two labels collide; the table under the
    # figure names every point.
    label_extremes(ax, xs, r, fit.labels, LABELLED)
    return fig


def curve_figure(entry: "Entry", scores: Sequence["Score"]) -> "Figure":
    """A registered forecast curve against the outcomes scored on it.

    * the forecast curve, loss against fraction of training (``gid="forecast-curve"``),
      closed at fraction 1 by the point forecast when it stops short (as the registry
      interpolates it, :func:`delphi.registry.scoring.predicted_at`);
    * the point forecast at fraction 1 (``gid="forecast-point"``) with its interval for the
      final loss as a bar (``gid="forecast-interval"``) when it has one;
    * partial outcomes (``gid="partial-outcomes"``, circles) and final outcomes
      (``gid="final-outcomes"``, diamonds) at their fraction and observed loss;
    * with a curve band (``predict --curve``): the band (``gid="forecast-band"``), the
      outcomes outside it (``gid="outside-band"``), and below, the tracker's revised final
      forecast after each outcome with its interval (``gid="revised-forecast"``,
      ``"revised-interval"``) against the preregistered one.

    ``entry`` must have a forecast curve (``entry.forecast.curve``).
    """
    fc = entry.forecast
    fractions = [f for f, _ in fc.curve]
    losses = [loss for _, loss in fc.curve]
    if fractions[-1] < 1.0:
        fractions.append(1.0)
        losses.append(fc.loss)
    band = getattr(fc, "band", None)
    partial = [s for s in scores if not s.final]
    history = _revised_history(entry, scores) if band is not None and scores else []
    fig = new_figure((8.0, 7.4) if history else (8.0, 4.2))
    if history:
        ax, ax2 = fig.subplots(2, 1, gridspec_kw={"height_ratios": [3, 2]})
    else:
        ax = fig.subplots()
    ax.plot(fractions, losses, "-", color="C0", lw=1.8, gid="forecast-curve",
            label="forecast curve")
    if band is not None:
        bf = [f for f, _ in fc.curve]
        ax.fill_between(bf, band.lower, band.upper, color="C0", alpha=0.18, lw=0,
                        gid="forecast-band", label=f"{level_percent(band.level)} band")
        outside = [s for s in partial if s.inside is False]
        if outside:
            ax.plot([s.fraction for s in outside], [s.actual for s in outside], "x",
                    color="C3", ms=8, zorder=6, gid="outside-band",
                    label=f"outside the band ({len(outside)})")
    ax.plot([1.0], [fc.loss], "*", color="C0", ms=12, zorder=4, gid="forecast-point",
            label=f"forecast final loss {fc.loss:.4f}")
    iv = fc.interval
    if iv is not None:
        ax.vlines([1.0], [iv.lower], [iv.upper], colors="C0", lw=6, alpha=0.35,
                  gid="forecast-interval",
                  label=f"{level_percent(iv.level)} interval [{iv.lower:.4f}, {iv.upper:.4f}]")
    final = [s for s in scores if s.final]
    if partial:
        ax.plot([s.fraction for s in partial], [s.actual for s in partial], "o", color="C1",
                ms=7, zorder=5, gid="partial-outcomes", label=f"partial outcomes ({len(partial)})")
    if final:
        ax.plot([s.fraction for s in final], [s.actual for s in final], "D", color="C3", ms=7,
                zorder=5, gid="final-outcomes", label=f"final outcome ({len(final)})")
    ax.set_xlim(max(0.0, fractions[0] - 0.05), 1.05)
    ax.set_xlabel("fraction of training")
    unit = entry.target.unit or "loss unit"
    ax.set_ylabel(f"loss [{unit}]")
    ax.set_title(f"{entry.id}: forecast curve and outcomes", fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")
    if history:
        f = [h[0] for h in history]
        ax2.fill_between(f, [h[1].lower for h in history], [h[1].upper for h in history],
                         color="C2", alpha=0.25, lw=0, gid="revised-interval",
                         label="revised forecast's interval")
        ax2.plot(f, [h[1].loss for h in history], "-", color="C2", lw=1.6,
                 gid="revised-forecast", label="revised final forecast")
        ax2.axhline(fc.loss, color="C0", lw=1.2, ls="--", label="preregistered forecast")
        if iv is not None:
            ax2.axhspan(iv.lower, iv.upper, color="C0", alpha=0.08)
        for s in final:
            ax2.axhline(s.actual, color="C3", lw=1.2, ls=":",
                        label=f"final loss {s.actual:.4f}")
        ax2.set_xlim(ax.get_xlim())
        ax2.set_xlabel("fraction of training when revised")
        ax2.set_ylabel(f"final loss [{unit}]")
        ax2.grid(True, alpha=0.3)
        ax2.legend(fontsize="small", loc="upper right")
    return fig


def _revised_history(entry, scores) -> list:
    """The tracker's revised final forecasts, recomputed from the recorded outcomes
    (:func:`delphi.registry.tracking.revised_history`); empty when it cannot be."""
    from ...registry.tracking import revised_history
    from ...errors import DelphiError

    try:
        return revised_history(entry, [(s.fraction, s.actual) for s in scores])
    except DelphiError:
        return []
