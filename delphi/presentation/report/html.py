"""Assembly of the HTML report pages: one self-contained static page per ladder or registry.

A page is a single HTML5 document: CSS in a ``<style>`` element, figures as inline ``<svg>``
(:mod:`delphi.report.figures`), no script, no external asset (nothing is loaded from another
file or site: no ``src``, stylesheet or font), so it can be opened from disk, attached to an
issue or served as is. The ladder page has no link out; the registry page links the http(s)
URLs in its entries' sources and notes (``<a href>``, only the http and https schemes) and
shows a long source as one line that opens to the whole text. Every piece of text that comes
from data (run names, reasons, registry notes, sources) is escaped with
:func:`html.escape`. The page states delphi's version, what it was made from (the ladder's
source and SHA-256, or the registry's path and head hash) and when: ``generated_at``, else the
``SOURCE_DATE_EPOCH`` environment variable (reproducible builds), else now. The same inputs,
settings and seed give a byte-identical page.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from html import escape
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import urlsplit

from ... import __version__
from ...errors import DelphiError, DelphiWarning, RegistryError
from ...core.text import level_percent, plural

__all__ = ["Report", "ladder_page", "ladder_report", "registry_page", "registry_report",
           "recipes_page", "write_html", "generated_time"]

#: Runs listed in the ladder's table of runs (the rest are counted).
MAX_TABLE_RUNS = 500

_CSS = """
:root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg2: #f6f8fa; --bad: #b42318;
        --good: #1a7f37; --warn: #9a6700; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--fg); margin: 0; background: #fff; }
main { max-width: 1200px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 1.6em; margin: 0 0 4px; }
h2 { font-size: 1.25em; margin: 32px 0 8px; padding-bottom: 4px;
     border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05em; margin: 20px 0 6px; }
p, ul { margin: 6px 0; }
.meta { color: var(--muted); font-size: 0.9em; }
.meta code, code { font: 0.88em/1.3 ui-monospace, "DejaVu Sans Mono", monospace;
                   word-break: break-all; }
.headline { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px;
        background: var(--bg2); min-width: 190px; }
.card .k { color: var(--muted); font-size: 0.82em; text-transform: uppercase;
           letter-spacing: 0.04em; }
.card .v { font-size: 1.35em; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .s { color: var(--muted); font-size: 0.85em; }
table { border-collapse: collapse; margin: 8px 0; font-size: 0.9em; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left;
         vertical-align: top; }
th { background: var(--bg2); font-weight: 600; }
.nw { white-space: nowrap; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.excluded td { color: var(--muted); }
td { max-width: 36em; overflow-wrap: break-word; }
table.score td:nth-child(2), table.score td:last-child { min-width: 9em; }
table.score td:first-child, table.score td:nth-child(5) { max-width: 17em;
                                                          overflow-wrap: anywhere; }
table.score td:nth-child(2), table.score td:last-child { max-width: 16em; }
a { color: #0969da; overflow-wrap: anywhere; }
details.src { margin: 2px 0 0; font-size: 0.85em; }
details.src summary { cursor: pointer; color: var(--muted); white-space: nowrap; }
details.src[open] > div { min-width: 16em; max-width: 30em; margin-top: 2px;
                          overflow-wrap: anywhere; }
.wrap { overflow-x: auto; }
figure { margin: 12px 0; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 0.88em; }
.warning { color: var(--warn); }
.bad { color: var(--bad); font-weight: 600; }
.good { color: var(--good); font-weight: 600; }
.banner { border-radius: 8px; padding: 10px 14px; margin: 12px 0; }
.banner.ok { background: #dafbe1; border: 1px solid #aceebb; }
.banner.failed { background: #ffebe9; border: 1px solid #ffcecb; }
ul.notes li { margin: 2px 0; }
details { margin: 10px 0; }
details pre { background: var(--bg2); padding: 10px; overflow-x: auto; font-size: 0.82em; }
footer { margin-top: 40px; color: var(--muted); font-size: 0.85em; }
"""


# ----------------------------------------------------------------------------- helpers
def _e(value: Any) -> str:
    """Escaped text (quotes too: the value may sit in an attribute)."""
    return escape("" if value is None else str(value), quote=True)


# An http(s) URL in free text: up to a space, a quote or an angle bracket.
_URL = re.compile(r"""\bhttps?://[^\s<>"'`]+""", re.I)


def _url_end(url: str) -> str:
    """``url`` without the punctuation a sentence puts after it (a closing bracket only when
    the URL opened none: ``(see https://x.org/a_(b))`` keeps its own)."""
    while url and url[-1] in ".,;:!?)]}":
        if url[-1] in ")]}" and url.count({")": "(", "]": "[", "}": "{"}[url[-1]]) >= \
                url.count(url[-1]):
            break
        url = url[:-1]
    return url


def _linked(value: Any) -> str:
    """Escaped text with each http(s) URL in it as a link (``<a href>``, the address escaped
    in the attribute and in the text). Only http and https are linked: any other scheme
    (``javascript:``, ``data:``, ``file:``) stays text, so a registry's source cannot put a
    script or a local file behind a link."""
    text = "" if value is None else str(value)
    out, pos = [], 0
    for m in _URL.finditer(text):
        url = _url_end(m.group(0))
        try:
            parsed = urlsplit(url)
        except ValueError:            # e.g. an unclosed IPv6 bracket: left as text
            continue
        if parsed.scheme.lower() not in ("http", "https") or not parsed.netloc:
            continue
        out.append(_e(text[pos:m.start()]))
        out.append(f'<a href="{_e(url)}" rel="nofollow noopener noreferrer">{_e(url)}</a>')
        pos = m.start() + len(url)
    out.append(_e(text[pos:]))
    return "".join(out)


def _source_cell(source: Any, label: str = "source") -> str:
    """A source in a table cell: one line (``label`` and, when the text has one, its first
    link) that opens to the whole text, wrapped, so a long quote does not make the row ten
    lines tall."""
    if not source:
        return ""
    text = str(source)
    first = _URL.search(text)
    url = _url_end(first.group(0)) if first else ""
    try:
        parts = urlsplit(url) if url else None
    except ValueError:
        parts = None
    short = label
    if parts is not None and parts.netloc:
        # github.com/.../issues/4447: the host and the path's last two steps
        path = [p for p in parts.path.split("/") if p]
        tail = "/".join(path[-2:])
        short = f"{label}: {parts.netloc}" + (f"/{'.../' if len(path) > 2 else ''}{tail}"
                                               if tail else "")
    if len(text) <= 40 and not url:
        return f"<small>{_e(label)}: {_e(text)}</small>"
    return (f'<details class="src"><summary>{_e(short)}</summary>'
            f'<div>{_linked(text)}</div></details>')


def _num(value: Any, spec: str = ".4g", missing: str = "-") -> str:
    """``value`` formatted with ``spec``, or ``missing`` for None/NaN (never "nan")."""
    if value is None:
        return missing
    try:
        v = float(value)
    except (TypeError, ValueError):
        return _e(value)
    if not math.isfinite(v):
        return missing
    return format(v, spec)


def generated_time(value: datetime | str | int | float | None = None) -> str:
    """The page's "generated at" time, ``YYYY-MM-DD HH:MM:SS UTC``.

    ``value``: a datetime (naive = UTC), an ISO 8601 string, or seconds since the epoch; None:
    the ``SOURCE_DATE_EPOCH`` environment variable when set (reproducible builds), else now.

    Raises
    ------
    DelphiError: ``value`` (or ``SOURCE_DATE_EPOCH``) is not a time.
    """
    source = "generated_at"
    if value is None:
        env = os.environ.get("SOURCE_DATE_EPOCH")
        if env is None or not env.strip():
            value = datetime.now(timezone.utc)
        else:
            value, source = env.strip(), "SOURCE_DATE_EPOCH"
            if not value.isdigit():     # int() would take "-5" (1969) and " 5"
                raise DelphiError(f"SOURCE_DATE_EPOCH must be whole, non-negative seconds "
                                  f"since 1970-01-01 UTC, got {env!r}")
            value = int(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            value = datetime.fromtimestamp(value, timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise DelphiError(f"{source}: {value!r} seconds is not a representable time") \
                from None
    elif isinstance(value, str):
        text = value.strip()
        try:
            value = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
        except ValueError:
            raise DelphiError(f"{source}: expected an ISO 8601 time such as "
                              f"2026-12-01T12:00:00Z, got {text!r}") from None
    if not isinstance(value, datetime):
        raise DelphiError(f"{source}: expected a datetime, an ISO 8601 string or epoch "
                          f"seconds, got {type(value).__name__}")
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _page(title: str, body: str, generated: str) -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f'<meta name="generator" content="delphi {_e(__version__)}">\n'
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
        f"{body}\n"
        f"<footer>Made by delphi {_e(__version__)} on {_e(generated)}. A static page: no "
        f"scripts, no external files.</footer>\n</main>\n</body>\n</html>\n")


def _table(head: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[int] = (),
           row_classes: Sequence[str] | None = None, cls: str = "") -> str:
    """An HTML table; ``head`` is escaped here, cells must already be HTML."""
    attr = f' class="{cls}"' if cls else ""
    out = [f'<div class="wrap"><table{attr}>',
           "<thead><tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        rc = row_classes[i] if row_classes is not None and row_classes[i] else ""
        cells = "".join(f'<td class="n">{c}</td>' if j in numeric else f"<td>{c}</td>"
                        for j, c in enumerate(row))
        out.append(f'<tr class="{rc}">{cells}</tr>' if rc else f"<tr>{cells}</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def _card(key: str, value: str, sub: str = "") -> str:
    """A headline number; ``value`` and ``sub`` are escaped here."""
    return (f'<div class="card"><div class="k">{_e(key)}</div><div class="v">{_e(value)}</div>'
            + (f'<div class="s">{_e(sub)}</div>' if sub else "") + "</div>")


def _list(items: Iterable[str], cls: str = "notes", item_cls: str = "") -> str:
    items = list(items)
    if not items:
        return ""
    attr = f' class="{item_cls}"' if item_cls else ""
    li = "".join(f"<li{attr}>{_e(i)}</li>" for i in items)
    return f'<ul class="{cls}">{li}</ul>'


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{_e(caption)}</figcaption></figure>"


@dataclass(frozen=True)
class Report:
    """A rendered report page and what it shows.

    ``html``: the page (one self-contained HTML document, str). ``kind``: ``"ladder"``,
    ``"registry"`` or ``"recipes"``. ``summary``: the page's headline facts, JSON-ready (``delphi report
    --json`` prints them with the path written). ``objects``: the Python objects behind the
    page (``forecast``, ``backtest``...; not JSON).
    """

    html: str
    kind: str
    summary: dict = field(default_factory=dict)
    objects: dict = field(default_factory=dict, repr=False, compare=False)

    def write(self, out: str | os.PathLike) -> Path:
        """Write the page to ``out/index.html`` (see :func:`write_html`)."""
        return write_html(self.html, out)


def check_html_folder(out: str | os.PathLike) -> Path:
    """Before any work: that ``out`` can take ``out/index.html`` -- a folder, or a path whose
    nearest existing parent is a folder this process may write in. Returns ``out``.

    Raises
    ------
    DelphiError: ``out`` (or a parent of it) exists and is not a folder, or the folder that
        would hold it is not writable.
    """
    folder = Path(out)
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        what = "exists and is not a folder" if probe == folder else f"has a parent {probe} " \
            f"that is a file"
        raise DelphiError(f"{folder} {what}: the report is written to FOLDER/index.html, so "
                          f"give a folder (new or existing)")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise DelphiError(f"cannot write the report to {folder}: {probe} is not writable")
    return folder


def write_html(page: str, out: str | os.PathLike) -> Path:
    """Write ``page`` (an HTML document) to ``out/index.html`` and return that path.

    ``out`` is a folder, created (with its parents) when missing; an existing ``index.html``
    in it is replaced. The file is written as UTF-8 through a temporary file and renamed, so
    a reader never sees half a page.

    Raises
    ------
    DelphiError: ``out`` exists and is not a folder, or it cannot be created or written.
    """
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise DelphiError(f"{folder} exists and is not a folder: the report is written to "
                          f"FOLDER/index.html, so give a folder (new or existing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "index.html"
        tmp = folder / ".index.html.tmp"
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        raise DelphiError(f"cannot write the report to {folder}: "
                          f"{exc.strerror or exc}") from None
    return path


# ----------------------------------------------------------------------------- ladder page
def _interval_label(iv) -> str:
    if iv.method == "bootstrap":
        return f"bootstrap ({iv.n_draws} draws)"
    return iv.label()


def _runs_table(ladder, fit) -> tuple[str, int]:
    """The table of runs (one row per run, at its end row), ordered by compute."""
    import numpy as np

    states = ladder.run_states()
    t = ladder.table
    end = t.merge(states[["run", "row", "state", "reason"]], on=["run", "row"], how="inner") \
        if "row" in t.columns else None
    if end is None or len(end) != len(states):    # no source rows: each run's last row
        end = t.groupby("run", sort=False).tail(1).merge(
            states[["run", "state", "reason"]], on="run", how="left")
    if "flops" in end.columns:
        c = end["flops"].to_numpy(float)
    elif {"params", "tokens"} <= set(end.columns):
        n = end["active_params"] if "active_params" in end.columns else end["params"]
        c = 6.0 * n.to_numpy(float) * end["tokens"].to_numpy(float)
    else:
        c = np.full(len(end), np.nan)
    end = end.assign(_c=c).sort_values(["_c", "run"], kind="stable", na_position="last")
    fitted = {str(lbl).split("@")[0] for lbl in fit.labels}
    excluded = {}
    for e in [*ladder.exclusions, *fit.exclusions]:
        excluded.setdefault(str(e.run), str(e.reason))
    cols = [("run", None), ("_c", "C [FLOPs]"), ("params", "N"),
            ("active_params", "N active"), ("tokens", "D [tokens]"), ("step", "step"),
            ("loss", f"loss [{ladder.unit}]")]
    cols = [(k, h or k) for k, h in cols if k in end.columns]
    head = [h for _, h in cols] + ["state", "in the fit"]
    rows, classes = [], []
    for rec in end.head(MAX_TABLE_RUNS).to_dict("records"):
        run = str(rec["run"])
        cells = [_e(run)]
        for k, _ in cols[1:]:
            spec = ".4f" if k == "loss" else ".4g"
            cells.append(_num(rec.get(k), spec))
        state = str(rec.get("state") or "")
        why = str(rec.get("reason") or "")
        cells.append(_e(state) + (f"<br><small>{_e(why)}</small>" if why and run not in
                                  excluded else ""))
        if run in fitted:
            cells.append("yes")
            classes.append("")
        else:
            cells.append("no: " + _e(excluded.get(run, "not among the fitted points")))
            classes.append("excluded")
        rows.append(cells)
    numeric = list(range(1, len(cols)))
    extra = len(end) - MAX_TABLE_RUNS
    note = (f"<p class=\"meta\">The first {MAX_TABLE_RUNS} runs by compute are listed; "
            f"{extra} more are not.</p>" if extra > 0 else "")
    return _table(head, rows, numeric, classes) + note, len(end)


def _params_table(fit) -> str:
    rows = []
    for r in fit._param_rows():
        if r["fixed"]:
            status = "fixed (not fitted)"
        elif r["at_bound"]:
            status = "at a bound"
        else:
            status = "free"
        iv = ("-" if r["interval"] in ("none", "fixed") else
              f"[{_num(r['lower'], '.5g')}, {_num(r['upper'], '.5g')}] ({_e(r['interval'])})")
        rows.append([_e(r["name"]), _num(r["value"], ".6g"),
                     "-" if r["fixed"] else _num(r["stderr"], ".3g"), iv, _e(status)])
    return _table(["parameter", "value", "approx. s.e.", "95% interval", "status"], rows,
                  numeric=[1, 2])


def _residuals_table(fit) -> str:
    import numpy as np

    from .figures import point_compute

    c = point_compute(fit)
    pred = fit.y * np.exp(fit.residuals)   # residual = log(L_pred) - log(L_obs)
    order = np.argsort(c, kind="stable") if c is not None else np.arange(len(fit.y))
    rows = [[_e(fit.labels[i]), _num(None if c is None else c[i], ".4g"),
             _num(fit.y[i], ".4f"), _num(pred[i], ".4f"), _num(fit.residuals[i], "+.3e")]
            for i in order]
    return _table(["point", "C [FLOPs]", "observed", "law", "residual (log)"], rows,
                  numeric=[1, 2, 3, 4])


def _interpolating_folds(bt, n_free: int) -> list[tuple[str, int]]:
    """The folds of ``bt`` with no residual degree of freedom, as (fold, points fitted): a fit
    of as many points as free parameters passes through them exactly, so its predictions
    test the law's form no more than a ruler through two points tests a line."""
    return [(f["fold"], int(f["n_runs"])) for f in bt.fits if f["n_runs"] - n_free <= 0]


def _backtest_for(ladder, fit, predict_kwargs: Mapping, backtest_max_flops: float | None):
    """A :func:`delphi.backtest` of the forecast's law with a result to show: fit on the runs
    up to the second-largest fitted compute budget (or ``backtest_max_flops``), predict the
    larger runs; when that cannot be made or has no result (its fold has no residual degree
    of freedom), leave one budget out (not when the cut was given).

    Returns (Backtest, None) for a backtest with a result; (the Backtest made, why it has
    no result) when every design tried interpolates its folds; (None, the reason) when no
    backtest could be made at all."""
    import numpy as np

    from ...analyses.backtest import backtest

    fixed, bounds = dict(fit.fixed), predict_kwargs.get("bounds")
    kwargs = dict(fixed=fixed, bounds=bounds, delta=fit.delta,
                  include_unfinished=bool(predict_kwargs.get("include_unfinished", False)),
                  level=predict_kwargs.get("level") or 0.9, seed=predict_kwargs.get("seed", 0))
    fit_max = predict_kwargs.get("fit_max_flops")
    data = ladder.select(max_flops=fit_max) if fit_max is not None else ladder
    errors, empty, made = [], [], None
    cut = backtest_max_flops
    if cut is None:
        from .figures import point_compute

        c = point_compute(fit)
        if c is not None and len(c):
            below = np.sort(c[c < c.max() / 1.05])   # budgets within 5% are one budget
            cut = float(below[-1]) if len(below) else None
        if cut is None:
            errors.append("the fitted runs span one compute budget, so there is nothing "
                          "larger to hold out")
    designs = ([dict(fit_max_flops=cut)] if cut is not None else []) + \
        ([dict(leave_one_budget_out=True)] if backtest_max_flops is None else [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DelphiWarning)   # kept on the Backtest (fits, notes)
        for design in designs:
            try:
                bt = backtest(data, fit.law, **design, **kwargs)
            except DelphiError as exc:
                what = (f"fit on runs <= {cut:.3g} FLOPs" if "fit_max_flops" in design
                        else "leave one budget out")
                errors.append(f"{what}: {exc}")
                continue
            folds = _interpolating_folds(bt, fit.n_free)
            if bt.rows and not folds:
                return bt, None
            made = made or bt
            empty.append((bt, folds))
    if made is None:
        return None, "; ".join(errors)
    tried = "; ".join(b.design for b, _ in empty)
    folds = [f for _, fs in empty for f in fs]
    if not folds:
        return made, f"no held-out run could be scored ({tried})"
    sizes = sorted({n for _, n in folds})
    every = all(len(fs) == len(b.fits) for b, fs in empty)
    return made, (f"{'every' if every else 'a'} fold fits "
                  f"{sizes[0] if len(sizes) == 1 else f'{sizes[0]}-{sizes[-1]}'} points for "
                  f"the law's {fit.n_free} free parameters (0 residual degrees of freedom), so "
                  f"it passes through them exactly and tests nothing (tried: {tried}); a "
                  f"result needs at least {fit.n_free + 1} finished runs per fold")


def _forecast_section(parts: list[str], forecast, fit, ladder) -> tuple[int, str, Any]:
    """The forecast section of :func:`ladder_page`: (figures drawn, law name, interval)."""
    from .figures import new_figure, to_svg

    t = forecast.target
    iv = forecast.interval
    what = ", ".join(f"{k} = {v:.4g}" for k, v in (("C", t.flops), ("N", t.params),
                                                   ("D", t.tokens)) if v is not None)
    ensemble = forecast.selection is not None and forecast.selection.get("rule") == "ensemble"
    law_name = "ensemble" if ensemble else fit.law.name
    cards = [_card("prediction", f"{forecast.loss:.4f}", forecast.unit)]
    if iv is not None:
        cards.append(_card(f"{level_percent(iv.level)} interval, one new run",
                           f"[{iv.lower:.4f}, {iv.upper:.4f}]", _interval_label(iv)))
        cards.append(_card(f"{level_percent(iv.level)} interval, expected loss",
                           f"[{iv.mean_lower:.4f}, {iv.mean_upper:.4f}]", "without run noise"))
    else:
        cards.append(_card("interval", "none", "see the notes below"))
    cards.append(_card("law", law_name, fit.law.formula if not ensemble else ""))
    if forecast.extrapolation is not None:
        cards.append(_card("extrapolation", f"{forecast.extrapolation:.3g}x",
                           "target compute / largest fitted run's"))
    parts.append("<h2>Forecast</h2>")
    named = f"<b>{_e(t.name)}</b>, " if t.name else ""
    parts.append(f"<p>Target: {named}{_e(what)}.</p>")
    parts.append('<div class="headline">' + "".join(cards) + "</div>")
    if iv is not None:
        parts.append(
            f"<p>Interval method: {_e(_interval_label(iv))}; run-to-run noise "
            f"{iv.noise:.2%} (log loss, from {_e(iv.noise_source)}) is in the new-run "
            f"interval only.</p>")
    if fit.fixed:
        given = ", ".join(f"{k} = {v:g}" for k, v in fit.fixed.items())
        parts.append(f"<p>Conditional on {_e(given)} (fixed, not fitted): its uncertainty is "
                     f"not in the interval.</p>")
    if forecast.warnings:
        parts.append("<h3>Warnings</h3>" + _list(forecast.warnings, item_cls="warning"))
    shown = {x.note() for x in (forecast.off_trend, forecast.floor_scan) if x is not None}
    notes = [n for n in forecast.notes if n not in shown]
    if notes:
        parts.append("<h3>Notes</h3>" + _list(notes))
    if forecast.off_trend is not None:
        parts.append("<h3>Off-trend rungs (kept in the fit)</h3>"
                     + _list([forecast.off_trend.note()]))
    if forecast.floor_scan is not None:
        fs = forecast.floor_scan
        rows = [[_num(v, ".4g"), _num(loss, ".4f"), _num(lo, ".4f"), _num(hi, ".4f")]
                for v, loss, lo, hi in zip(fs.values, fs.losses, fs.lowers, fs.uppers)]
        parts.append(f"<h3>Forecast across the floor {_e(fs.param)} in [{fs.low:g}, "
                     f"{fs.high:g}]</h3>"
                     + _table([fs.param, "forecast", "lower", "upper"], rows, [0, 1, 2, 3])
                     + f"<p>{_e(fs.note())}</p>")
    figures = 0
    try:
        from ..plot import plot_forecast

        # the legend sits in a free corner (or under the axes), not beside them
        fig = new_figure((9.0, 4.8))
        plot_forecast(forecast, ax=fig.subplots(), ladder=ladder)
        figures += 1
        with_iv = ("with its new-run interval (thin bar) and expected-loss interval (thick "
                   "bar)" if iv is not None else "(no interval: see the notes)")
        parts.append(_figure(to_svg(fig, "f-forecast-", "forecast figure"),
                             f"The fitted points, the law out to the target, and the target "
                             f"{with_iv}; crosses are excluded runs."))
    except DelphiError as exc:
        parts.append(f'<p class="warning">No forecast figure: {_e(exc)}</p>')
    return figures, law_name, iv


def _no_target_section(parts: list[str], fit, ladder) -> int:
    """The forecast section of a page without a target: why, and the fit's figure."""
    from .figures import new_figure, to_svg

    parts.append("<h2>Forecast</h2>")
    parts.append("<p>No target was given, so this page shows the fit alone. Give one for a "
                 "forecast: <code>--target-flops C</code>, or <code>--target-params N "
                 "--target-tokens D</code>.</p>")
    try:
        from ..plot import plot_fit

        fig = new_figure((9.0, 4.8))
        plot_fit(fit, ax=fig.subplots(), ladder=ladder)
        parts.append(_figure(to_svg(fig, "f-fit-", "fit figure"),
                             "The fitted points and the law over them; crosses are excluded "
                             "runs."))
        return 1
    except DelphiError as exc:
        parts.append(f'<p class="warning">No fit figure: {_e(exc)}</p>')
        return 0


#: :func:`delphi.predict` settings: those of the fit, those that only shape a forecast (a
#: page without a target ignores them), and those that need a target.
_FIT_KEYS = ("fixed", "bounds", "delta", "fit_max_flops", "include_unfinished",
             "divergence_threshold", "seed")
_FORECAST_ONLY = ("interval", "level", "n_boot", "boot_unit", "n_jobs", "workers",
                  "floor_points", "off_trend", "allow_degenerate")
_NEED_TARGET = ("floor_range", "ensemble", "candidates")


def _fit_alone(ladder, law, kwargs: Mapping):
    """:func:`delphi.fit` with the fit settings of ``kwargs`` (a page without a target).

    Raises TargetError for settings whose meaning is a forecast's (a floor range, model
    selection), LawError for settings :func:`delphi.predict` does not take."""
    from ...errors import LawError, TargetError
    from ...fitting import fit as fit_law
    from ...forecasting.forecast import default_law

    needs = [k for k in _NEED_TARGET if kwargs.get(k) not in (None, False, (), [])]
    if needs or law in ("auto", "ensemble"):
        what = "a floor range" if needs == ["floor_range"] else "model selection"
        raise TargetError(f"{what} compares forecasts, so it needs a target: give "
                          f"--target-flops C, or --target-params N --target-tokens D")
    unknown = sorted(set(kwargs) - set(_FIT_KEYS) - set(_FORECAST_ONLY) - set(_NEED_TARGET))
    if unknown:
        raise LawError(f"unknown setting(s): {', '.join(unknown)}")
    settings = {k: kwargs[k] for k in _FIT_KEYS if k in kwargs and kwargs[k] is not None}
    return fit_law(ladder, law or default_law(ladder), **settings)


def ladder_page(ladder, target, law=None, *, generated_at=None, backtest: bool = True,
                backtest_max_flops: float | None = None, **predict_kwargs) -> Report:
    """The ladder report: forecast, fit, residuals, backtest and runs, as a :class:`Report`.

    Parameters
    ----------
    ladder: a :class:`~delphi.ladder.Ladder` (or a DataFrame, read as
        :func:`delphi.load_ladder` reads it).
    target: the run to forecast, a :class:`~delphi.forecast.Target` or a dict (``flops``
        [FLOPs], and/or ``params`` and ``tokens``...); ``None`` for a page of the fit alone
        (no forecast section: the fit, residuals, backtest and runs).
    law: as in :func:`delphi.predict` (default: its default law).
    generated_at: the time the page states (datetime, ISO string or epoch seconds; default
        ``SOURCE_DATE_EPOCH``, else now): see :func:`generated_time`.
    backtest: draw the backtest section (default True).
    backtest_max_flops: the backtest's cut [FLOPs]: fit on runs at or below it, predict the
        larger finished runs. Default: the second-largest fitted compute budget (the largest
        budget is held out); when that backtest cannot be made (too few runs below the cut)
        or has no result, each budget is left out in turn (:func:`delphi.backtest` with
        ``leave_one_budget_out=True``). A backtest whose folds have no residual degree of
        freedom (as many points as the law's free parameters: the fit passes through them
        exactly) has no result: the page shows no error figure or mean for it, only one line
        saying why. The page says which design it used, or why there is no backtest (result).
    **predict_kwargs: passed to :func:`delphi.predict` (``fixed``, ``bounds``, ``delta``,
        ``fit_max_flops``, ``interval``, ``level``, ``n_boot``, ``seed``...).

    Returns
    -------
    Report with ``html``, ``kind="ladder"`` and ``summary`` (ladder name, source and SHA-256,
    the prediction with its interval, the backtest: its design, its summary, ``result``
    (False, with the summary's errors None and ``no_result`` the reason, for a backtest
    without residual degrees of freedom), the generated time).

    Raises
    ------
    The errors of :func:`delphi.predict` (LadderError, LawError, TargetError, FitError...);
    DelphiError for a bad ``generated_at``; TargetError for a forecast-only setting (a floor
    range, model selection) without a target. A backtest that cannot be made is not an
    error: the page gives the reason.
    """
    import numpy as np

    from ...forecasting.forecast import predict
    from ...inputs.readers import as_ladder
    from .figures import new_figure, residual_figure, to_svg

    generated = generated_time(generated_at)
    ladder = as_ladder(ladder)
    if target is None:
        forecast, fit = None, _fit_alone(ladder, law, predict_kwargs)
        fitted_sha = fit.extra.get("sha256", "")
    else:
        forecast = predict(ladder, target, law, **predict_kwargs)
        fit, fitted_sha = forecast.fit, forecast.ladder_sha256
    sha = ladder.fingerprint()
    parts: list[str] = []
    title = f"delphi report: {ladder.name}"
    parts.append(f"<h1>{_e(title)}</h1>")
    parts.append(
        f'<p class="meta">Ladder <b>{_e(ladder.name)}</b> from <code>{_e(ladder.source)}</code>; '
        f"metric {_e(ladder.metric)} [{_e(ladder.unit)}].<br>Ladder SHA-256 "
        f"<code>{_e(sha)}</code> (all its rows); fitted data SHA-256 "
        f"<code>{_e(fitted_sha)}</code>.<br>delphi {_e(__version__)}, generated "
        f"{_e(generated)}.</p>")

    # ---- forecast
    if forecast is not None:
        figures, law_name, iv = _forecast_section(parts, forecast, fit, ladder)
    else:
        figures, law_name, iv = _no_target_section(parts, fit, ladder), fit.law.name, None

    # ---- fit
    parts.append("<h2>Fit</h2>")
    runs = len({lbl.split("@")[0] for lbl in fit.labels})
    conv = "converged" if fit.converged else "DID NOT CONVERGE"
    parts.append(
        f"<p>Law <b>{_e(fit.law.name)}</b>: <code>{_e(fit.law.formula)}</code>. "
        f"{fit.n_points} points from {runs} runs, {fit.n_free} free parameters "
        f"({plural(fit.dof, 'residual degree of freedom', 'residual degrees of freedom')}). Objective {fit.objective:.6g} (summed "
        f"Huber, delta = {fit.delta:g}, on log residuals). "
        f'<span class="{"good" if fit.converged else "bad"}">{conv}</span>: '
        f"{_e(fit.message)} ({fit.n_agree}/{fit.n_starts} starts agree).</p>")
    parts.append(_params_table(fit))
    if fit.identification is not None:
        lines = fit.identification.report_lines()
        if lines:
            parts.append("<h3>Identification</h3><pre>" + _e("\n".join(lines)) + "</pre>")
    # The fit repeats the ladder's warnings it concerns; list each once.
    warns = [*(f"ladder: {w}" for w in ladder.warnings
               if not any(w in fw for fw in fit.warnings)), *fit.warnings]
    parts.append("<h3>Warnings</h3>" + (_list(warns, item_cls="warning") if warns else
                                        "<p>None.</p>"))
    excl = {}
    for e in [*ladder.exclusions, *fit.exclusions]:
        excl.setdefault((str(e.run), str(e.reason)), None)
    parts.append(f"<h3>Exclusions ({len(excl)})</h3>")
    if excl:
        parts.append(_table(["run", "reason"], [[_e(r), _e(why)] for r, why in excl]))
    else:
        parts.append("<p>No run was left out.</p>")
    fit_notes = list(fit.extra.get("notes", ()))
    if fit_notes:
        parts.append("<h3>Fit notes</h3>" + _list(fit_notes))

    # ---- residuals
    parts.append("<h2>Residuals</h2>")
    fig = residual_figure(fit)
    figures += 1
    parts.append(_figure(to_svg(fig, "f-resid-", "residuals figure"),
                         "log(L_pred) - log(L_obs) per fitted point: above zero, the law "
                         "predicts a higher loss than observed."))
    parts.append(_residuals_table(fit))

    # ---- backtest
    bt = None
    bt_summary = None
    parts.append("<h2>Backtest</h2>")
    if backtest:
        bt, why = _backtest_for(ladder, fit, predict_kwargs, backtest_max_flops)
        if bt is None:
            parts.append(f'<p class="warning">No backtest: {_e(why)}</p>')
        elif why is not None:
            # Made, but its folds interpolate: no number is shown as a result.
            parts.append(f'<p class="warning">No backtest result: {_e(why)}.</p>')
            bt_summary = {"design": bt.design, "law": bt.law, "n": 0,
                          "mean_abs_rel_error": None, "max_abs_rel_error": None,
                          "mean_rel_error": None, "coverage": None, "level": bt.level,
                          "result": False, "no_result": why}
        else:
            s = bt.summary
            bt_summary = {"design": bt.design, "law": bt.law,
                          **{k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                             for k, v in s.items()}, "result": True, "no_result": None}
            parts.append(f"<p>Made with <code>delphi.backtest</code> (the law {_e(bt.law)}, "
                         f"its fixed values and Huber delta): {_e(bt.design)}. Each held-out "
                         f"run is predicted by a fit that did not see it.</p>")
            try:
                from ..plot import plot_backtest

                fig = new_figure((8.0, 4.2))
                plot_backtest(bt, ax=fig.subplots())       # zero centred, legend inside
                figures += 1
                parts.append(_figure(to_svg(fig, "f-backtest-", "backtest figure"),
                                     "Relative error of each held-out run's prediction, "
                                     "with its interval when the fold has one."))
            except DelphiError as exc:
                parts.append(f'<p class="warning">No backtest figure: {_e(exc)}</p>')
            rows = [[_e(r.run), _num(r.flops, ".4g"), _num(r.actual, ".4f"),
                     _num(r.predicted, ".4f"),
                     "-" if r.lower is None else f"[{r.lower:.4f}, {r.upper:.4f}]",
                     _num(r.rel_error, "+.2%"),
                     "-" if r.inside is None else ("yes" if r.inside else
                                                   '<span class="bad">no</span>'),
                     _e(r.fold)] for r in bt.rows]
            parts.append(_table(["run", "C [FLOPs]", "actual", "predicted", "interval",
                                 "rel. error", "inside", "fold"], rows, numeric=[1, 2, 3, 5]))
            cov = (f", coverage {s['coverage']:.0%} of {level_percent(s['level'])} intervals"
                   if s["coverage"] is not None else "")
            if s["n"] == 1:        # one run: its error, not a "mean"
                r = bt.rows[0]
                inside = "" if r.inside is None else (
                    f", {'inside' if r.inside else 'outside'} its {level_percent(s['level'])}"
                    f" interval")
                parts.append(f"<p>One held-out run: rel. error {_num(r.rel_error, '+.2%')}"
                             f"{inside}.</p>")
            else:
                parts.append(f"<p>Mean |rel. error| {_num(s['mean_abs_rel_error'], '.2%')}, "
                             f"max {_num(s['max_abs_rel_error'], '.2%')} over {s['n']} "
                             f"held-out runs{cov}.</p>")
            seen: dict[str, list[str]] = {}
            for f in bt.fits:
                for w in f.get("warnings", ()):
                    seen.setdefault(w, []).append(f["fold"])
            bt_warn = [f"[{'every fold' if len(v) == len(bt.fits) else ', '.join(v)}] {w}"
                       for w, v in seen.items()]
            parts.append(_list(bt_warn, item_cls="warning") + _list(bt.notes))
    else:
        parts.append("<p>Not made (backtest=False).</p>")

    # ---- runs
    table, n_runs = _runs_table(ladder, fit)
    parts.append(f"<h2>Runs ({n_runs}, ordered by compute)</h2>")
    parts.append(f"<p class=\"meta\">Each run at its end row (its final row, else its last); "
                 f"{fit.n_points} points enter the fit.</p>")
    parts.append(table)
    if forecast is not None:
        parts.append("<details><summary>The text report (<code>delphi predict</code>)"
                     f"</summary><pre>{_e(forecast.report())}</pre></details>")
    else:
        parts.append("<details><summary>The text report (<code>delphi fit</code>)</summary>"
                     f"<pre>{_e(fit.report())}</pre></details>")

    summary = {
        "ladder": {"name": ladder.name, "source": ladder.source, "sha256": sha,
                   "fitted_sha256": fitted_sha, "metric": ladder.metric,
                   "unit": ladder.unit, "n_runs": n_runs},
        "target": forecast.target.to_dict() if forecast is not None else None,
        "law": law_name,
        "prediction": None if forecast is None else {
            "loss": forecast.loss, "unit": forecast.unit,
            "lower": iv.lower if iv else None, "upper": iv.upper if iv else None,
            "mean_lower": iv.mean_lower if iv else None,
            "mean_upper": iv.mean_upper if iv else None,
            "level": iv.level if iv else None, "method": iv.method if iv else None},
        "backtest": bt_summary,
        "warnings": (list(forecast.warnings) if forecast is not None else []) + list(fit.warnings),
        "figures": figures,
        "generated_at": generated,
        "delphi_version": __version__,
    }
    return Report(html=_page(title, "\n".join(parts), generated), kind="ladder",
                  summary=summary, objects={"forecast": forecast, "backtest": bt})


def ladder_report(ladder, target, law=None, **kwargs) -> str:
    """The ladder report page as HTML text: :func:`ladder_page` (same arguments:
    ``generated_at``, ``backtest``, ``backtest_max_flops`` and :func:`delphi.predict`'s
    keyword arguments) ``.html``. Write it with :func:`write_html`."""
    return ladder_page(ladder, target, law, **kwargs).html


# ----------------------------------------------------------------------------- registry page
def _target_text(target) -> str:
    if target is None:
        return ""
    what = ", ".join(f"{k} = {v:.4g}" for k, v in (("C", target.flops), ("N", target.params),
                                                   ("N active", target.active_params),
                                                   ("D", target.tokens)) if v is not None)
    name = target.name or ""
    return f"{_e(name)}{'<br>' if name and what else ''}<small>{_e(what)}</small>"


def _interval_text(iv, points: bool = False) -> str:
    if iv is None:
        return "none"
    extra = ", ".join(x for x in (iv.kind, iv.method) if x)
    text = (f'<span class="nw">{level_percent(iv.level)}'
            f' [{100 * iv.lower:.2f}, {100 * iv.upper:.2f}] '
            f'pts</span>' if points else
            f'<span class="nw">{level_percent(iv.level)} [{iv.lower:.4f}, {iv.upper:.4f}]</span>')
    return text + (f"<br><small>{_e(extra)}</small>" if extra else "")


def registry_page(registry, *, generated_at=None) -> Report:
    """The registry report ("prediction tracker"): scorecard, forecast curves against their
    partial outcomes, and the chain's verification, as a :class:`Report`.

    Parameters
    ----------
    registry: a :class:`~delphi.registry.Registry` or the path of a registry file.
    generated_at: as in :func:`ladder_page`.

    The scores are the registry's own (:meth:`Registry.report`,
    :func:`delphi.registry.scoring.score_outcome`): predicted value at the outcome's fraction
    (interpolated on the forecast curve below 1), relative error (actual - predicted) /
    predicted (for an accuracy prediction: actual - predicted in points; its values are shown
    in points, 100 x the fraction), inside the interval, z and PIT (final outcomes with an
    interval only). The page states whether the chain verifies (:meth:`Registry.verify`) and
    its head hash; a registry that does not verify still gets its page, under a banner saying
    so and where it breaks (``summary["verified"]`` is False).

    Raises
    ------
    RegistryError: no registry at the path, or (in a chain that verifies) a line that is not
        a valid entry. A chain that does not verify always gets a page: when its file cannot
        even be read as entries, a page with the failed verification and no scorecard
        (``summary["readable"]`` False).
    DelphiError: a bad ``generated_at``.
    """
    from ...registry import Registry
    from .figures import curve_figure, to_svg

    generated = generated_time(generated_at)
    reg = registry if isinstance(registry, Registry) else Registry(registry)
    if not reg.path.exists():
        raise RegistryError(f"no registry at {reg.path}")
    verified = reg.verify()
    try:
        entries = reg.entries()
        board = reg.report()
    except RegistryError as exc:
        if verified.ok:
            raise
        # A line that is not a valid entry (altered, truncated, not JSON): a tracker that
        # publishes this page must show the broken chain, not stop updating.
        return _unreadable_registry_page(reg, verified, exc, generated)
    title = f"delphi registry: {reg.path.name}"
    parts = [f"<h1>{_e(title)}</h1>",
             f'<p class="meta">Registry <code>{_e(reg.path)}</code>, '
             f"{len(entries)} entries. delphi {_e(__version__)}, generated {_e(generated)}.</p>"]
    if verified.ok:
        parts.append(f'<div class="banner ok"><span class="good">Chain verified</span>: '
                     f"{verified.n_entries} entries, every hash and link intact. Head "
                     f"<code>{_e(verified.head or 'none (empty)')}</code>. Publish the head "
                     f"elsewhere and check it later with <code>delphi registry verify "
                     f"--expect-head HASH</code>.</div>")
    else:
        parts.append(f'<div class="banner failed"><span class="bad">Chain does NOT verify'
                     f"</span>: {_e(verified)}. What this page shows cannot be trusted. Head of "
                     f"the verified part: <code>{_e(verified.head or 'none')}</code>.</div>")

    # ---- summary
    cards = [_card("predictions", str(board.n_predictions),
                   f"{board.n_projections} projections" if board.n_projections else ""),
             _card("scored (final)", str(len(board.final)),
                   f"{len(board.unscored)} awaiting an outcome" if board.unscored else "")]
    if board.mean_abs_rel_error is not None:
        cards.append(_card("mean |rel. error|", f"{board.mean_abs_rel_error:.2%}",
                           f"max {board.max_abs_rel_error:.2%}"))
    if board.mean_abs_error_points is not None:   # accuracy predictions: points
        cards.append(_card("accuracy: mean |error|", f"{board.mean_abs_error_points:.2f} pts",
                           f"max {board.max_abs_error_points:.2f} pts over "
                           f"{board.n_accuracy}"))
    if board.final:
        cards.append(_card("interval coverage",
                           f"{board.n_inside}/{board.n_with_interval}" if board.n_with_interval
                           else "-", f"{board.coverage:.0%}" if board.coverage is not None
                           else "no scored prediction has an interval"))
    parts.append("<h2>Scorecard</h2>")
    parts.append('<div class="headline">' + "".join(cards) + "</div>")

    # ---- scorecard: every prediction/projection, each of its outcomes a row
    by_pred: dict[str, list] = {}
    for s in board.scores:
        by_pred.setdefault(s.prediction_id, []).append(s)
    final_ids = {s.outcome_id for s in board.final}
    rows, classes = [], []
    for e in entries:
        if e.kind == "outcome":
            continue
        fc = e.forecast
        ident = _e(e.id) + (" <small>(external)</small>" if fc.external else "") + \
            (" <small>(projection)</small>" if e.kind == "projection" else "") + \
            (f"<br>{_source_cell(fc.source)}" if fc.source else "")
        acc = e.target is not None and e.target.unit == "accuracy"   # fractions -> points
        base = [ident, _target_text(e.target),
                f"{100 * fc.loss:.2f} pts" if acc else f"{fc.loss:.4f}",
                _interval_text(fc.interval, points=acc)]
        scores = by_pred.get(e.id, [])
        if not scores:
            why = ("a projection: never scored" if e.kind == "projection"
                   else "awaiting an outcome")
            rows.append(base + [f"<small>{_e(why)}</small>", "", "", "", "", ""])
            classes.append("excluded")
            continue
        for s in scores:
            at = "final" if s.final else f"at {s.fraction:.0%} of training"
            latest = "" if not s.final or s.outcome_id in final_ids else \
                " <small>(superseded)</small>"
            outcome = (f"{100 * s.actual:.2f} pts" if acc else f"{s.actual:.4f}") + (
                       f" <small>{_e(at)}{latest}</small>"
                       + (f"<br>{_source_cell(s.source)}" if s.source else ""))
            inside = ("-" if s.inside is None else
                      ('<span class="good">yes</span>' if s.inside
                       else '<span class="bad">no</span>'))
            zpit = ("-" if s.z is None else f"{s.z:+.2f} / {s.pit:.3f}")
            rows.append(base + [outcome, f"{100 * s.predicted:.2f} pts" if acc
                                else f"{s.predicted:.4f}", s.error_text(), inside,
                                zpit, f"<small>{_e(s.no_interval_reason or '')}</small>"])
            classes.append("")
    # the interval's header names what it bounds: a loss, an accuracy, or either (mixed)
    acc_kinds = {e.target is not None and e.target.unit == "accuracy"
                 for e in entries if e.kind != "outcome"}
    bounded = ("final accuracy" if acc_kinds == {True} else
               "final" if acc_kinds == {True, False} else "final loss")
    parts.append(_table(["prediction", "target", "forecast (final)", f"interval ({bounded})",
                         "outcome", "predicted at outcome", "error", "inside",
                         "z / PIT", "note"], rows, numeric=[2, 5, 6, 8], row_classes=classes,
                        cls="score"))
    parts.append('<p class="meta">Error: for a loss, relative error = (actual - predicted) / '
                 "predicted (positive: the run did worse than forecast); for a benchmark "
                 "accuracy (unit accuracy), actual - predicted in points. z and PIT read the interval as a central "
                 "normal interval at its level; only final outcomes have them. A prediction's "
                 "score is its latest final outcome.</p>")

    # ---- comparisons of recipes: the difference claimed, and its score once observed
    compared = [e for e in entries if e.kind != "outcome" and e.comparison is not None]
    if compared:
        by_cmp = {c.prediction_id: c for c in board.comparisons}
        crows = []
        for e in compared:
            c = e.comparison
            iv = c.interval
            where = (f"C = {c.target_flops:.4g}" if c.target_params is None else
                     f"N = {c.target_params:.4g}, D = {c.target_tokens:.4g}")
            row = [_e(e.id), _e(f"{c.recipe} - {c.reference}"), _e(where),
                   f"{c.difference:+.4f}",
                   f'<span class="nw">{level_percent(iv.level)}'
                   f' [{iv.lower:+.4f}, {iv.upper:+.4f}]</span>',
                   f"{c.p_better:.3f}"]
            sc = by_cmp.get(e.id)
            if sc is None:
                row += ["<small>awaiting both final losses</small>", "", "", ""]
            else:
                won = "tie" if sc.winner_right is None else ("yes" if sc.winner_right else
                                                             '<span class="bad">no</span>')
                row += [f"{sc.observed:+.4f}",
                        '<span class="good">yes</span>' if sc.inside
                        else '<span class="bad">no</span>', f"{sc.z:+.2f} / {sc.pit:.3f}", won]
            crows.append(row)
        parts.append(f"<h2>Comparisons of recipes ({len(compared)})</h2>")
        parts.append(_table(["comparison", "recipe - reference", "target", "predicted",
                             "interval (one new run each)", "P(better)", "observed", "inside",
                             "z / PIT", "winner right"], crows, numeric=[3, 5, 6]))
        parts.append('<p class="meta">Differences are recipe - reference in the target\'s '
                     "unit (negative: the recipe is better); the observed difference is the "
                     "two runs' final losses, scored against the registered interval.</p>")

    # ---- curves
    curves = [e for e in entries if e.kind != "outcome" and e.forecast.curve]
    parts.append(f"<h2>Forecast curves ({len(curves)})</h2>")
    if not curves:
        parts.append("<p>No entry has a forecast curve (register one with <code>--curve</code> "
                     "to score partial outcomes).</p>")
    for i, e in enumerate(curves):
        fig = curve_figure(e, by_pred.get(e.id, []))
        parts.append(f"<h3>{_e(e.id)}</h3>")
        parts.append(_figure(to_svg(fig, f"f-curve{i}-", f"forecast curve of {e.id}"),
                             "The forecast curve (loss against fraction of training), the "
                             "final-loss forecast with its interval, and the outcomes."))

    # ---- entries
    parts.append("<h2>Entries</h2>")
    erows = []
    accuracy_ids = {e.id for e in entries if e.kind != "outcome" and e.target is not None
                    and e.target.unit == "accuracy"}
    for n, e in enumerate(entries, 1):
        if e.kind == "outcome":
            o = e.outcome
            value = (f"{100 * o.actual:.2f} pts" if o.of in accuracy_ids   # fraction -> points
                     else f"{o.actual:.4f}")
            what = f"outcome of {o.of}: {value} at fraction {o.fraction:g}"
        else:
            what = (f"accuracy {100 * e.forecast.loss:.2f} pts" if e.target is not None
                    and e.target.unit == "accuracy" else f"{e.forecast.loss:.4f}") + (
                " (external)" if e.forecast.external else "")
            if e.law is not None:
                what += f", law {e.law.name}"
            if e.ladder is not None:
                what += f", ladder {e.ladder.name} (sha256 {e.ladder.sha256[:12]}...)"
            if e.comparison is not None:
                what += (f"; comparison {e.comparison.recipe} - {e.comparison.reference} = "
                         f"{e.comparison.difference:+.4f}")
        erows.append([str(n), _e(e.id), _e(e.kind),
                       _e(e.created_at.strftime("%Y-%m-%d %H:%M UTC")), _e(e.author or ""),
                       _e(what), f"<code>{_e(e.hash[:16])}</code>"])
    parts.append(_table(["#", "id", "kind", "created", "author", "what", "hash"], erows,
                        numeric=[0]))
    notes = [(e.id, e.notes) for e in entries if e.notes]
    if notes:
        parts.append("<h3>Notes</h3>" + "".join(f"<p><b>{_e(i)}</b>: {_linked(t)}</p>"
                                                 for i, t in notes))
    summary = {"registry": str(reg.path), "verified": verified.ok,
               "verify": verified.to_dict(), "head": verified.head,
               "n_entries": len(entries), "n_predictions": board.n_predictions,
               "n_projections": board.n_projections, "n_scored": len(board.final),
               "unscored": list(board.unscored), "n_curves": len(curves),
               "mean_abs_rel_error": board.mean_abs_rel_error,
               "mean_abs_error_points": board.mean_abs_error_points,
               "coverage": board.coverage, "n_comparisons": len(compared),
               "n_comparisons_scored": len(board.comparisons), "generated_at": generated,
               "delphi_version": __version__}
    return Report(html=_page(title, "\n".join(parts), generated), kind="registry",
                  summary=summary, objects={"scoreboard": board, "verify": verified})


def _unreadable_registry_page(reg, verified, error, generated: str) -> Report:
    """The page of a registry whose file cannot be read as entries: the failed verification
    (where the chain breaks) and the reason, no scorecard."""
    title = f"delphi registry: {reg.path.name}"
    body = "\n".join([
        f"<h1>{_e(title)}</h1>",
        f'<p class="meta">Registry <code>{_e(reg.path)}</code>. delphi {_e(__version__)}, '
        f"generated {_e(generated)}.</p>",
        f'<div class="banner failed"><span class="bad">Chain does NOT verify</span>: '
        f"{_e(verified)}. Head of the verified part: "
        f"<code>{_e(verified.head or 'none')}</code>.</div>",
        "<h2>Scorecard</h2>",
        f'<p class="warning">The file cannot be read as registry entries, so nothing is '
        f"scored: {_e(error)}. Compare it with a copy you trust; <code>delphi registry "
        f"repair --registry {_e(reg.path)}</code> removes only a torn last line.</p>"])
    summary = {"registry": str(reg.path), "verified": False, "verify": verified.to_dict(),
               "head": verified.head, "readable": False, "error": str(error),
               "n_entries": verified.n_entries, "n_predictions": None, "n_scored": None,
               "generated_at": generated, "delphi_version": __version__}
    return Report(html=_page(title, body, generated), kind="registry", summary=summary,
                  objects={"verify": verified})


def registry_report(registry, *, generated_at=None) -> str:
    """The registry report page as HTML text: :func:`registry_page` ``.html``."""
    return registry_page(registry, generated_at=generated_at).html


# ----------------------------------------------------------------------------- recipes page
def _times(x) -> str:
    return "unbounded" if x is None or not math.isfinite(x) else f"{x:.3g}x"


def _own_forecast(f) -> str:
    if f is None:
        return "-"
    iv = f.interval
    text = f"{f.loss:.4f}"
    if iv is not None:
        text += (f' <span class="nw">[{iv.lower:.4f}, {iv.upper:.4f}]</span>'
                 f"<br><small>{_e(_interval_label(iv))}</small>")
    return text


def recipes_page(comparison, *, generated_at=None) -> Report:
    """The page of a comparison of recipes (:func:`delphi.compare_recipes`): the figure
    (:func:`delphi.plot.plot_recipes`, inline SVG), the comparison table, the method, notes
    and warnings, and each ladder's provenance, as a :class:`Report` (``kind="recipes"``).

    Parameters
    ----------
    comparison: a :class:`~delphi.analyses.recipes.RecipeComparison`.
    generated_at: as in :func:`ladder_page`. The same comparison (same ladders, settings and
        seed) and ``generated_at`` give a byte-identical page.

    The table has one row per (recipe, target): the difference recipe - reference [the
    ladders' loss unit; negative: the recipe is better] with its interval for one new run of
    each and for the expected loss, P(better), the effective compute multiplier and the
    crossover compute [FLOPs] with their intervals, and each recipe's own forecast with its
    interval (when the comparison made them).

    Raises
    ------
    TypeError: not a RecipeComparison. DelphiError: a bad ``generated_at``.
    """
    from ...analyses.recipes import RecipeComparison
    from .figures import new_figure, to_svg

    if not isinstance(comparison, RecipeComparison):
        raise TypeError(f"recipes_page needs a delphi RecipeComparison (from "
                        f"delphi.compare_recipes), got {type(comparison).__name__}")
    generated = generated_time(generated_at)
    c = comparison
    pct = level_percent(c.level)
    title = f"delphi report: {', '.join(c.recipes)}"
    parts = [f"<h1>{_e(title)}</h1>"]
    ladders = []
    for ld in c.ladders:
        sha = ld.fingerprint()
        ladders.append({"name": ld.name, "source": ld.source, "sha256": sha})
    prov = "<br>".join(f"Ladder <b>{_e(x['name'])}</b> from <code>{_e(x['source'])}</code>, "
                       f"SHA-256 <code>{_e(x['sha256'])}</code>" for x in ladders)
    parts.append(f'<p class="meta">{prov}{"<br>" if prov else ""}Metric {_e(c.metric)} '
                 f"[{_e(c.unit)}]; reference {_e(c.reference)}.<br>delphi "
                 f"{_e(__version__)}, generated {_e(generated)}.</p>")
    parts.append("<h2>Comparison</h2>")
    parts.append(f"<p>Law <b>{_e(c.law)}</b> fitted to every recipe"
                 + (", with " + _e(", ".join(f"{k} = {v:.4g}" for k, v in c.fixed.items()))
                    + " fixed" if c.fixed else "")
                 + f". Method: {_e(c.method)}"
                 + (f"; {c.n_draws} draws" if c.n_draws else "")
                 + (f" ({c.n_failed} left out for every recipe)" if c.n_failed and c.n_draws
                    else "")
                 + ". Differences are recipe - reference: negative means the recipe is "
                   "better.</p>")
    cards = []
    for d in c.comparisons:
        where = (f"C = {d.target_flops:.3g}" if d.target_params is None else
                 f"N = {d.target_params:.3g}, D = {d.target_tokens:.3g}")
        cards.append(_card(f"{d.recipe} - {d.reference}, {where}", f"{d.loss:+.4f}",
                           f"{pct} [{d.lower:+.4f}, {d.upper:+.4f}], P(better) "
                           f"{d.p_better:.2f}"))
    parts.append('<div class="headline">' + "".join(cards) + "</div>")
    rows = []
    for d in c.comparisons:
        where = (f"C = {d.target_flops:.4g}" if d.target_params is None else
                 f"N = {d.target_params:.4g}, D = {d.target_tokens:.4g}")
        cross = ("none in 1e15..1e27" if d.crossover is None else
                 f"{d.crossover:.3g} [{_num(d.crossover_lower, '.3g')}, "
                 f"{_num(d.crossover_upper, '.3g')}]")
        rows.append([_e(d.recipe), _e(where), f"{d.loss:+.4f}",
                     f'<span class="nw">[{d.lower:+.4f}, {d.upper:+.4f}]</span>',
                     f'<span class="nw">[{d.mean_lower:+.4f}, {d.mean_upper:+.4f}]</span>',
                     f"{d.p_better:.3f}",
                     f"{_times(d.multiplier)} [{_times(d.multiplier_lower)}, "
                     f"{_times(d.multiplier_upper)}]", _e(cross),
                     _own_forecast(d.reference_forecast), _own_forecast(d.recipe_forecast)])
    parts.append(_table(["recipe", "target", f"difference [{c.unit}]",
                         f"{pct} interval, one new run each", f"{pct} interval, expected loss",
                         "P(better)", "compute multiplier", "crossover [FLOPs]",
                         "reference's own forecast", "recipe's own forecast"], rows,
                        numeric=[2, 5]))
    figures = 0
    try:
        from ..plot import caption, plot_recipes

        fig = new_figure((9.0, 7.0))
        plot_recipes(c, ax=fig.subplots())
        figures += 1
        parts.append(_figure(to_svg(fig, "f-recipes-", "comparison figure"), caption(c)))
    except DelphiError as exc:
        parts.append(f'<p class="warning">No figure: {_e(exc)}</p>')
    parts.append("<h3>Warnings</h3>" + (_list(c.warnings, item_cls="warning") if c.warnings
                                        else "<p>None.</p>"))
    own = list(dict.fromkeys(f"{f.ladder_name}: {w}" for d in c.comparisons
                             for f in (d.reference_forecast, d.recipe_forecast)
                             if f is not None for w in f.warnings))
    if own:
        parts.append("<h3>Warnings of the recipes' own forecasts</h3>"
                     + _list(own, item_cls="warning"))
    if c.notes:
        parts.append("<h3>Notes</h3>" + _list(c.notes))
    parts.append("<details><summary>The text report (<code>delphi compare-recipes</code>)"
                 f"</summary><pre>{_e(c.report())}</pre></details>")
    d = c.to_dict()
    summary = {"reference": c.reference, "recipes": list(c.recipes), "law": c.law,
               "unit": c.unit, "metric": c.metric, "level": c.level, "method": c.method,
               "ladders": ladders, "comparisons": d["comparisons"],
               "warnings": list(c.warnings), "figures": figures, "generated_at": generated,
               "delphi_version": __version__}
    return Report(html=_page(title, "\n".join(parts), generated), kind="recipes",
                  summary=summary, objects={"comparison": c})
