"""The HTML report (``delphi report``, :mod:`delphi.report`): one self-contained static page per
ladder or registry, rendered in headless Chromium.

The browser tests skip when no ``chromium`` is installed, except in CI (``CI`` set), where
``.ci/run`` installs it and its absence is a failure.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi import DelphiError, RegistryError, load_ladder, predict
from delphi.cli import main
from delphi.errors import FitWarning
from delphi.registry import Registry
from delphi.report import (generated_time, ladder_page, ladder_report, registry_page,
                           registry_report, write_html)

from bundled import load

WHEN = "2026-12-01T00:00:00Z"
MARIN = dict(law="power", fixed={"E": 1.5})
MARIN_TARGET = {"flops": 2.61e24, "name": "marin-535b-a23b hero run"}
# marin-delphi-dense at 1e22 FLOPs: 7 finished runs, a delta-method interval.
DENSE_TARGET = {"flops": 1e22, "name": "dense 1e22"}


# ----------------------------------------------------------------------------- helpers
def text_of(page: str) -> str:
    """The visible text of an HTML document: tags removed, entities decoded, spaces joined."""
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        message = "no chromium browser installed (Debian: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message + "; .ci/run installs it, CI must not skip the browser test")
        pytest.skip(message)
    return exe


def render(page_path: Path, tmp_path: Path) -> tuple[Path, str]:
    """Screenshot (1280x2400 PNG) and rendered DOM of a page, from headless Chromium."""
    exe = chromium()
    flags = [exe, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}"]
    png = tmp_path / "page.png"
    url = page_path.resolve().as_uri()
    shot = [f"--screenshot={png}", "--window-size=1280,2400"]
    # One browser start for both (Chromium's headless mode since 2023 does both in one run);
    # an older headless shell does one of them, so the other is then asked for on its own.
    dom = subprocess.run([*flags, *shot, "--dump-dom", url], check=True, capture_output=True,
                         timeout=180, text=True).stdout
    if not png.is_file():
        subprocess.run([*flags, *shot, url], check=True, capture_output=True, timeout=180)
    if "<html" not in dom:
        dom = subprocess.run([*flags, "--dump-dom", url], check=True, capture_output=True,
                             timeout=180, text=True).stdout
    return png, dom


def assert_real_screenshot(png: Path) -> None:
    """A PNG of the window's size with drawn content: not blank, not one flat colour."""
    from PIL import Image

    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(png) as im:
        assert im.size == (1280, 2400)
        rgb = np.asarray(im.convert("RGB"), dtype=np.int32)
    not_white = np.any(rgb < 245, axis=2).mean()
    # Distinct colours, each pixel's RGB as one integer (np.unique over rows takes seconds).
    colours = len(np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]))
    # Text, tables and figures cover a few percent of the window in many colours (the
    # figures' blue/orange/red, anti-aliasing); a blank or error page has almost none.
    assert 0.02 < not_white < 0.9, not_white
    assert colours > 100, colours


@pytest.fixture(scope="module")
def marin(data_dir):
    ladder = load_ladder("marin-moe-535b")
    report = ladder_page(ladder, MARIN_TARGET, generated_at=WHEN, **MARIN)
    return ladder, report


@pytest.fixture(scope="module")
def dense_ladder(data_dir):
    return load("marin-delphi-dense")         # with its known FLOP-convention warning


@pytest.fixture(scope="module")
def dense_forecast(dense_ladder):
    """The forecast at DENSE_TARGET as delphi.predict makes it, computed on its own."""
    return predict(dense_ladder, DENSE_TARGET, "power")


@pytest.fixture(scope="module")
def dense(dense_ladder):
    report = ladder_page(dense_ladder, DENSE_TARGET, "power", generated_at=WHEN)
    return dense_ladder, report


@pytest.fixture
def registry(tmp_path, dense_forecast) -> Path:
    """Three predictions: a delphi forecast with a curve (a partial and a final outcome), an
    external forecast with an interval (a final outcome), and one awaiting its outcome.
    A new file for each test (some edit it)."""
    path = tmp_path / "reg.jsonl"
    reg = Registry(path)
    reg.register(dense_forecast, id="dense-1e22", curve=[(0.25, 2.80), (0.5, 2.66), (0.75, 2.58)],
                 created_at="2026-11-01T00:00:00Z", author="A <tester>")
    reg.register_external(id="ext-1e21", target={"flops": 1e21, "name": "external 1e21"},
                          loss=2.598, source="https://example.org/issue/1",
                          interval=(2.55, 2.65, 0.9, "new-run"),
                          created_at="2026-11-02T00:00:00Z")
    reg.register_external(id="later-1e23", target={"flops": 1e23}, loss=2.25,
                          source="a talk", created_at="2026-11-03T00:00:00Z")
    reg.score("dense-1e22", 2.671, fraction=0.5, source="W&B run x",
              created_at="2026-11-10T00:00:00Z")
    reg.score("dense-1e22", 2.541, created_at="2026-11-20T00:00:00Z")
    reg.score("ext-1e21", 2.599, source="issue comment", created_at="2026-11-21T00:00:00Z")
    return path


# ----------------------------------------------------------------------------- in a browser
def test_ladder_page_renders_in_chromium_with_the_forecast(dense, dense_forecast, tmp_path):
    _, report = dense
    page = write_html(report.html, tmp_path / "out")
    png, dom = render(page, tmp_path)
    assert_real_screenshot(png)
    text = text_of(dom)
    # The forecast as delphi.predict makes it, computed on its own.
    fc = dense_forecast
    assert fc.interval is not None
    for value in (fc.loss, fc.interval.lower, fc.interval.upper, fc.interval.mean_lower,
                  fc.interval.mean_upper):
        assert f"{value:.4f}" in text, value
    # the interval's method is named: 2 own folds, so the reference class widens the delta one
    assert fc.interval.method == "reference"
    assert "reference class: other ladders' extrapolation errors, delta" in text
    assert "90% interval, one new run" in text
    # The rendered page has its three figures, inline.
    assert dom.count("<svg") == 3


def test_registry_page_renders_in_chromium_with_the_scorecard(registry, tmp_path):
    page = write_html(registry_report(registry, generated_at=WHEN), tmp_path / "out")
    png, dom = render(page, tmp_path)
    assert_real_screenshot(png)
    text = text_of(dom)
    # External forecast 2.598 with a 90% interval [2.55, 2.65], outcome 2.599: by hand.
    rel = (2.599 - 2.598) / 2.598
    sigma = (2.65 - 2.55) / 2 / NormalDist().inv_cdf(0.95)
    z = (2.599 - 2.60) / sigma
    assert f"{rel:+.2%}" == "+0.04%" and f"{z:+.2f}" == "-0.03"
    assert f"{z:+.2f} / {NormalDist().cdf(z):.3f}" in text
    # The curve: predicted 2.66 at half of training (a curve point), outcome 2.671.
    assert "2.6710" in text and "2.6600" in text and f"{(2.671 - 2.66) / 2.66:+.2%}" in text
    assert "awaiting an outcome" in text                 # later-1e23
    assert "Chain verified" in text and Registry(registry).head() in text
    assert dom.count("<svg") == 1                        # one entry has a curve


# ----------------------------------------------------------------------------- page content
def test_ladder_page_is_self_contained(marin):
    _, report = marin
    page = report.html
    assert page.startswith("<!DOCTYPE html>")
    # No external asset or link: nothing loaded or linked from another file or site.
    assert not re.search(r"""\b(src|href)\s*=\s*["']?\s*(https?:|//|file:)""", page, re.I)
    assert not re.search(r"<(script|img|link|iframe|object)\b", page, re.I)
    assert "@import" not in page and "url(http" not in page
    # Figures are inline SVG (forecast, residuals; the backtest has no result, so no
    # figure: its folds fit 2 points for 2 free parameters), their ids unique on the page.
    assert page.count("<svg ") == 2
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page


def test_ladder_page_provenance(marin):
    ladder, report = marin
    text = text_of(report.html)
    assert f"delphi {delphi.__version__}" in text
    assert ladder.fingerprint() in text and "marin-moe-535b" in text
    assert "2026-12-01 00:00:00 UTC" in text
    # E fixed at 1.5, three finished rungs: Marin's 2.04 forecast (issue 2: within 0.005).
    assert abs(report.summary["prediction"]["loss"] - 2.04) < 0.005
    assert f"{report.summary['prediction']['loss']:.4f}" in text


def test_ladder_page_runs_ordered_by_compute_with_exclusion_reason(marin):
    _, report = marin
    runs = report.html[report.html.index("ordered by compute"):]
    order = re.findall(r"<tr[^>]*><td>(d\d+)</td>", runs)
    # Compute from the bundled CSV: d768 2.65e19 < d1024 1.73e20 < d1536 1.38e21 < d2048 7.74e21.
    assert order == ["d768", "d1024", "d1536", "d2048"]
    row = re.search(r'<tr class="excluded"><td>d2048</td>.*?</tr>', runs).group(0)
    assert "no: unfinished (fraction = 0.8)" in row
    # The fit's exclusions table names the run and its reason too.
    fit = report.html[report.html.index("Exclusions (1)"):report.html.index("Residuals")]
    assert "d2048" in fit and "unfinished (fraction = 0.8)" in fit


def test_ladder_page_residuals_are_the_laws(marin):
    ladder, report = marin
    fit = report.objects["forecast"].fit
    a, alpha = fit.params["A"], fit.params["alpha"]
    rows = dict(re.findall(r"<tr><td>(d\d+)</td>(?:<td[^>]*>[^<]*</td>){3}<td class=\"n\">"
                           r"([+-][0-9.e+-]+)</td></tr>", report.html))
    csv = pd.read_csv(Path(delphi.__file__).parents[1] / "ladders" / "marin-moe-535b.csv")
    for run in ("d768", "d1024", "d1536"):
        c, loss = csv.loc[csv.run == run, ["flops", "loss"]].iloc[0]
        expected = math.log((1.5 + a * c ** -alpha) / loss)   # log L_pred - log L_obs
        assert float(rows[run]) == pytest.approx(expected, rel=2e-3, abs=1e-8), run


def test_ladder_page_backtest_without_dof_is_no_result(marin):
    """Issue 23: a backtest whose folds fit 2 points for the law's 2 free parameters passes
    through them exactly: no error, mean or figure is shown as its result, one line says
    why, and the summary has no numbers."""
    _, report = marin
    text = text_of(report.html)
    section = text[text.index("Backtest"):text.index("Runs (")]
    # Second-largest finished compute of the CSV: d1024 at 1.73e20; d1536 is held out. With
    # E fixed the power law has 2 free parameters; leaving one of the 3 budgets out fits 2.
    assert section.strip() == (
        "Backtest No backtest result: every fold fits 2 points for the law's 2 free "
        "parameters (0 residual degrees of freedom), so it passes through them exactly and "
        "tests nothing (tried: fit on runs <= 1.73e+20 FLOPs, predict 1 larger run(s); leave "
        "one budget out (3 budgets)); a result needs at least 3 finished runs per fold.")
    assert "f-backtest-" not in report.html
    bt = report.objects["backtest"]                 # the backtest made, for inspection
    assert [r.run for r in bt.rows] == ["d1536"]
    s = report.summary["backtest"]
    assert s["design"].startswith("fit on runs <= 1.73e+20 FLOPs") and s["result"] is False
    assert s["mean_abs_rel_error"] is None and s["n"] == 0
    assert s["no_result"].startswith("every fold fits 2 points")


def test_ladder_page_backtest_of_a_larger_ladder(dense):
    """On the dense ladder (7 runs) the power law's cut fold fits 6 points, 3 residual dof:
    a result, its one held-out run's error (not a "mean" of one)."""
    _, report = dense
    text = text_of(report.html)
    bt = report.objects["backtest"]
    assert [r.run for r in bt.rows] == ["dense-3e20"]
    assert report.summary["backtest"]["result"] is True
    r = bt.rows[0]
    assert (f"One held-out run: rel. error {r.rel_error:+.2%}, "
            f"{'inside' if r.inside else 'outside'} its 90% interval.") in text
    assert "Mean |rel. error|" not in text and 'id="f-backtest-' in report.html


def test_ladder_page_backtest_falls_back_to_leave_one_budget_out(dense_ladder):
    # chinchilla has 5 free parameters: the cut fold fits 5 of the 7 runs (0 residual dof),
    # so each budget is left out in turn (6 runs, 1 residual dof per fold)
    with pytest.warns(FitWarning, match="not identified by the ladder"):
        report = ladder_page(dense_ladder, None, "chinchilla", generated_at=WHEN)
    s = report.summary["backtest"]
    assert s["result"] is True and s["design"] == "leave one budget out (7 budgets)"
    assert s["n"] == 7
    text = text_of(report.html)
    assert f"Mean |rel. error| {s['mean_abs_rel_error']:.2%}, max " \
           f"{s['max_abs_rel_error']:.2%} over 7 held-out runs." in text


def test_ladder_page_escapes_text(tmp_path):
    runs = ['<b>x</b>&"1', "r2", "r3", "r4", "r5"]
    flops = np.array([1e18, 3e18, 1e19, 3e19, 1e20])
    df = pd.DataFrame({"run": runs, "flops": flops,
                       "loss": 1.8 + 40 * flops ** -0.08 * (1 + np.array([1, -1, 1, -1, 0]) * 1e-3)})
    ladder = delphi.Ladder(df, name="<script>alert(1)</script>")
    page = ladder_report(ladder, {"flops": 1e21, "name": "a <i>b</i> & c"}, "power",
                         generated_at=WHEN, backtest=False)
    assert "<script>" not in page and "<b>x</b>" not in page and "<i>b</i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;b&gt;x&lt;/b&gt;&amp;&quot;1" in page
    assert "a &lt;i&gt;b&lt;/i&gt; &amp; c" in page
    assert "Not made (backtest=False)" in text_of(page)


def test_ladder_page_says_why_there_is_no_backtest(marin):
    # Nothing at or below 1e17 FLOPs (the smallest rung is 2.65e19) to fit the fold on.
    report = ladder_page(marin[0], MARIN_TARGET, generated_at=WHEN,
                         backtest_max_flops=1e17, **MARIN)
    text = text_of(report.html)
    assert report.objects["backtest"] is None and report.summary["backtest"] is None
    assert "No backtest: fit on runs <= 1e+17 FLOPs:" in text
    assert report.html.count("<svg ") == 2                 # forecast and residuals only


def test_same_inputs_and_seed_give_the_same_bytes(dense_ladder, monkeypatch):
    ladder = dense_ladder
    kw = dict(law="power", interval="bootstrap", n_boot=40, seed=3)
    # (Seed 3's draws include a resample the law interpolates, objective ~1e-20: the guard
    # used to count its rounding-level difference from the global search as a missed optimum
    # and warn; its absolute slack, uncertainty.WORSE_ATOL, no longer does.)
    first = ladder_report(ladder, DENSE_TARGET, generated_at=WHEN, **kw)
    # The same ladder loaded afresh gives the same page.
    again_ladder = load("marin-delphi-dense")
    again = ladder_report(again_ladder, DENSE_TARGET, generated_at=WHEN, **kw)
    assert first == again
    # SOURCE_DATE_EPOCH stands in for generated_at (86400 s: the second day of 1970).
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")
    from_env = ladder_report(ladder, DENSE_TARGET, **kw)
    assert "1970-01-02 00:00:00 UTC" in from_env
    assert from_env == first.replace("2026-12-01 00:00:00 UTC", "1970-01-02 00:00:00 UTC")
    other_seed = ladder_report(ladder, DENSE_TARGET, generated_at=WHEN, **{**kw, "seed": 4})
    assert other_seed != first                         # the bootstrap's draws are in it


# ----------------------------------------------------------------------------- figures' SVG
def test_log_tick_labels_are_text_not_mathtext():
    from delphi.presentation.report.figures import plain_text_tick_label as plain

    assert plain(r"$\mathdefault{10^{21}}$") == "10²¹"
    assert plain(r"$\mathdefault{10^{-3}}$") == "10⁻³"
    assert plain(r"$\mathdefault{2\times10^{21}}$") == "2\u2009×\u200910²¹"
    assert plain(r"$\mathdefault{-10^{0}}$") == "\u221210⁰"
    assert plain(r"$\mathdefault{0}$") == "0"
    # anything else as it was: plain text, other mathtext, a non-integer exponent
    for other in ("0.5", "", r"$\alpha$", r"$\mathdefault{10^{2.50}}$"):
        assert plain(other) == other


def test_svg_figure_drawn_once_at_its_size_with_nothing_outside():
    """A constrained-layout figure is laid out once and saved at its own size (no tight
    bbox), its labels inside it; log tick labels are text with the exponent raised (no
    mathtext); the figure's layout engine and formatters come back."""
    from matplotlib.ticker import LogFormatterSciNotation

    from delphi.presentation.report.figures import new_figure, to_svg

    fig = new_figure((4.0, 2.5))
    ax = fig.subplots()
    ax.loglog([1e18, 1e22], [3.0, 2.0], "o-", label="fit")
    ax.set_xlabel("training compute C [FLOPs]", fontsize=14)    # past the default margin
    ax.set_title("a title", fontsize=14)
    ax.legend(loc="upper right")
    engine = fig.get_layout_engine()
    svg = to_svg(fig, "t-", "test")
    assert 'width="288pt" height="180pt"' in svg                   # 4 x 2.5 in, not cropped
    assert "mathdefault" not in svg
    assert '>10<tspan dy="-4.130" style="font-size: 7px">18</tspan></text>' in svg
    assert fig.get_layout_engine() is engine
    assert type(ax.xaxis.get_major_formatter()) is LogFormatterSciNotation
    tight = fig.get_tightbbox()                        # inches, at the layout to_svg made
    assert tight.x0 >= 0 and tight.y0 >= 0 and tight.x1 <= 4.0 and tight.y1 <= 2.5, tight


def test_svg_figure_the_layout_cannot_hold_is_saved_tight():
    """What constrained layout leaves past the figure's edge (a figure's text or legend placed
    there, an Axes it does not place), or a layout that collapses, is kept by the tight
    bbox."""
    from mpl_toolkits.axes_grid1 import make_axes_locatable

    from delphi.presentation.report.figures import new_figure, to_svg

    def size(svg):
        return tuple(float(v) for v in re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"',
                                                 svg).groups())

    fig = new_figure((4.0, 2.5))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1])
    fig.text(0.5, -0.1, "a note under the figure", ha="center")
    assert size(to_svg(fig, "t-", "test"))[1] > 180             # taller than 2.5 in
    fig = new_figure((4.0, 2.5))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], label="a line")
    fig.legend(loc="center left", bbox_to_anchor=(1.0, 0.5))       # right of the figure
    assert size(to_svg(fig, "t-", "test"))[0] > 288             # wider than 4 in
    fig = new_figure((4.0, 2.5))                  # an Axes appended under another (recipes')
    ax = fig.subplots()
    below = make_axes_locatable(ax).append_axes("bottom", size="65%", pad=0.12, sharex=ax)
    below.set_xlabel("training compute C [FLOPs]")
    assert size(to_svg(fig, "t-", "test"))[1] > 180
    fig = new_figure((1.0, 0.6))
    ax = fig.subplots()
    ax.set_ylabel("a long label\n" * 6)
    with pytest.warns(UserWarning, match="collapsed"):
        svg = to_svg(fig, "t-", "test")
    assert size(svg)[1] > 0.6 * 72                     # the tight box holds the whole label


def test_generated_time():
    assert generated_time(0) == "1970-01-01 00:00:00 UTC"
    assert generated_time("2026-12-01T13:00:00+01:00") == "2026-12-01 12:00:00 UTC"
    with pytest.raises(DelphiError, match="ISO 8601"):
        generated_time("yesterday")


def test_generated_time_bad_source_date_epoch(monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "soon")
    with pytest.raises(DelphiError, match="SOURCE_DATE_EPOCH"):
        generated_time()


def test_write_html(tmp_path):
    path = write_html("<!DOCTYPE html><p>x</p>", tmp_path / "a" / "b")
    assert path == tmp_path / "a" / "b" / "index.html" and path.read_text() == \
        "<!DOCTYPE html><p>x</p>"
    (tmp_path / "file").write_text("")
    with pytest.raises(DelphiError, match="is not a folder"):
        write_html("<p>", tmp_path / "file")


def test_registry_page_content(registry, dense_forecast):
    report = registry_page(registry, generated_at=WHEN)
    page, s = report.html, report.summary
    assert s["verified"] is True and s["head"] == Registry(registry).head()
    assert (s["n_predictions"], s["n_scored"], s["unscored"]) == (3, 2, ["later-1e23"])
    # Nothing loaded from elsewhere; the source URL is a link (issue 23); the author's angle
    # brackets are escaped.
    assert not re.search(r"""\bsrc\s*=""", page, re.I)
    assert '<a href="https://example.org/issue/1" rel="nofollow noopener noreferrer">' in page
    assert "A &lt;tester&gt;" in page
    # The forecast curve figure: the curve, the partial and the final outcome.
    for gid in ("forecast-curve", "partial-outcomes", "final-outcomes", "forecast-interval"):
        assert f'id="f-curve0-{gid}"' in page
    # The dense forecast's final outcome 2.541, scored against its interval by hand.
    fc = dense_forecast
    iv = fc.interval
    sigma = (iv.upper - iv.lower) / 2 / NormalDist().inv_cdf((1 + iv.level) / 2)
    z = (2.541 - (iv.lower + iv.upper) / 2) / sigma
    text = text_of(page)
    assert f"{(2.541 - fc.loss) / fc.loss:+.2%}" in text
    assert f"{z:+.2f} / {NormalDist().cdf(z):.3f}" in text


def test_registry_page_of_a_broken_chain(registry, tmp_path):
    lines = registry.read_text().splitlines(keepends=True)
    lines[1] = lines[1].replace('"loss":2.598', '"loss":2.5981')   # an edited forecast
    registry.write_text("".join(lines))
    report = registry_page(registry, generated_at=WHEN)
    assert report.summary["verified"] is False
    assert "Chain does NOT verify" in report.html and "line 2" in text_of(report.html)


def test_registry_page_missing_registry(tmp_path):
    with pytest.raises(RegistryError, match="no registry at"):
        registry_page(tmp_path / "none.jsonl")


# ----------------------------------------------------------------------------- CLI
def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_ladder_report(capsys, tmp_path, data_dir):
    out_dir = tmp_path / "site"
    code, out, err = run_cli(capsys, "report", "marin-moe-535b", "--html", str(out_dir),
                             "--json", "--generated-at", WHEN)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["path"] == str(out_dir / "index.html") and doc["kind"] == "ladder"
    # The manifest's defaults, as `delphi predict marin-moe-535b`: E = 1.5, 2.61e24 FLOPs.
    fc = predict(load_ladder("marin-moe-535b"), {"flops": 2.61e24}, "power", fixed={"E": 1.5})
    assert doc["prediction"]["loss"] == pytest.approx(fc.loss, rel=1e-12)
    assert doc["backtest"]["design"].startswith("fit on runs <= 1.73e+20 FLOPs")
    page = (out_dir / "index.html").read_text()
    assert f"{fc.loss:.4f}" in page and "2026-12-01 00:00:00 UTC" in page
    # Settings named in the page's notes use the CLI's spelling.
    assert "--floor LO:HI" in page and "floor_range (CLI" not in page
    code, out, _ = run_cli(capsys, "report", "marin-moe-535b", "--html", str(out_dir),
                           "--generated-at", WHEN)
    assert code == 0 and out.startswith(f"wrote {out_dir / 'index.html'}: ladder marin-moe-535b")
    assert (out_dir / "index.html").read_text() == page          # same inputs, same bytes


def test_cli_registry_report(capsys, tmp_path, registry):
    code, out, err = run_cli(capsys, "report", "--registry", str(registry), "--html",
                             str(tmp_path / "tracker"), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kind"] == "registry" and doc["verified"] is True
    assert doc["head"] == Registry(registry).head() and doc["n_scored"] == 2
    assert (tmp_path / "tracker" / "index.html").is_file()


def test_cli_report_errors(capsys, tmp_path, registry):
    (tmp_path / "file").write_text("")
    code, out, err = run_cli(capsys, "report", "--registry", str(registry), "--html",
                             str(tmp_path / "file"), "--json")
    assert code == 1 and json.loads(out)["error"]["type"] == "DelphiError"
    assert "is not a folder" in err
    code, out, err = run_cli(capsys, "report", "--registry", str(tmp_path / "none.jsonl"),
                             "--html", str(tmp_path / "o"), "--json")
    assert code == 1 and json.loads(out)["error"]["type"] == "RegistryError"
    # Asking for neither page, or both, is bad usage: exit 2, UsageError in JSON.
    with pytest.raises(SystemExit) as exc:
        main(["report", "--html", str(tmp_path / "o")])
    assert exc.value.code == 2 and "give LADDER for a ladder page" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["report", "marin-moe-535b", "--registry", str(registry), "--target-flops", "1e22",
              "--html", str(tmp_path / "o"), "--json"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and json.loads(out)["error"]["type"] == "UsageError"
    assert "not both: LADDER, --target-flops belong to a ladder page" in err
    with pytest.raises(SystemExit) as exc:                                # no --html
        main(["report", "marin-moe-535b"])
    assert exc.value.code == 2 and "--html" in capsys.readouterr().err


def test_cli_registry_report_of_a_broken_chain(capsys, tmp_path, registry):
    lines = registry.read_text().splitlines(keepends=True)
    registry.write_text("".join(lines[:2] + lines[3:]))     # later-1e23 removed: line 3 breaks
    code, out, err = run_cli(capsys, "report", "--registry", str(registry), "--html",
                             str(tmp_path / "o"))
    assert code == 1 and "does not verify" in err and "line 3" in err
    assert "Chain does NOT verify" in (tmp_path / "o" / "index.html").read_text()
    # Without its prediction an outcome cannot be scored, and a line that is not JSON cannot
    # be read at all: the page is still written (a tracker must show the broken chain, not
    # stop updating), with the reason and no scorecard; exit 1.
    for name, text, why in (
            ("p", "".join(lines[:1] + lines[2:]), "ext-1e21"),      # its outcome kept
            ("q", "".join(lines[:2]) + "{not json\n" + "".join(lines[3:]), "not valid JSON")):
        registry.write_text(text)
        code, out, err = run_cli(capsys, "report", "--registry", str(registry), "--html",
                                 str(tmp_path / name), "--json")
        doc = json.loads(out)
        assert code == 1 and "does not verify" in err
        assert doc["verified"] is False and doc["readable"] is False and why in doc["error"]
        page = (tmp_path / name / "index.html").read_text()
        assert "Chain does NOT verify" in page and "nothing is scored" in page


def test_ladder_page_without_a_target_is_the_fit_alone(capsys, tmp_path, dense_ladder):
    """No target on the command line or in the manifest: the page shows the fit (its
    parameters equal delphi.fit's, computed here), residuals, backtest and runs, says why
    there is no forecast, and renders; settings that compare forecasts need a target."""
    ladder = dense_ladder
    fit = delphi.fit(ladder, "power")
    report = ladder_page(ladder, None, "power", generated_at=WHEN)
    assert report.summary["prediction"] is None and report.summary["target"] is None
    assert report.summary["law"] == "power" and report.summary["figures"] == 3
    text = text_of(report.html)
    assert "No target was given, so this page shows the fit alone" in text
    for name, value in fit.params.items():
        assert f"{value:.6g}" in text, (name, value)
    assert "Backtest" in text and "delphi fit" in text
    png, dom = render(write_html(report.html, tmp_path / "out"), tmp_path)
    assert_real_screenshot(png)
    assert dom.count("<svg") == 3                       # fit, residuals, backtest
    with pytest.raises(delphi.TargetError, match="a floor range compares forecasts"):
        ladder_page(ladder, None, "power", floor_range=(1.5, 1.9))
    with pytest.raises(delphi.TargetError, match="model selection compares forecasts"):
        ladder_page(ladder, None, "auto")
    # The CLI: epoch-chinchilla's manifest names no target.
    out_dir = tmp_path / "site"
    code, out, err = run_cli(capsys, "report", "epoch-chinchilla", "--html", str(out_dir),
                             "--json", "--generated-at", WHEN)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["prediction"] is None and doc["law"] == "chinchilla"
    code, out, err = run_cli(capsys, "report", "epoch-chinchilla", "--html", str(out_dir),
                             "--generated-at", WHEN)
    assert code == 0 and "no target, so no forecast" in out
    # A target option without N, D or C is still an error, not a silently dropped option.
    code, out, err = run_cli(capsys, "report", "epoch-chinchilla", "--html", str(out_dir),
                             "--target-peak-lr", "1e-3")
    assert code == 2 and "no target: give --target-flops" in err     # usage (issue 23)


def test_registry_page_links_urls_and_folds_long_sources(tmp_path):
    """Issue 23: a long source is one line in its cell that opens to the whole text, its
    http(s) URLs are links (the address escaped), and no other scheme is linked."""
    path = tmp_path / "reg.jsonl"
    reg = Registry(path)
    long = ("https://github.com/org/repo/issues/4697 (2026-04-17: 'predicting final paloma "
            "macro loss of 2.25', from the isoFLOP analysis in "
            "https://github.com/org/repo/issues/4447, which records it as 2.252)")
    reg.register_external(id="long", target={"flops": 1e23}, loss=2.252, source=long,
                          created_at="2026-11-01T00:00:00Z")
    odd = ('javascript:alert(1) data:text/html,x file:///etc/passwd '
           'https://e.org/q?a=1&b=2"onmouseover="x <https://e.org/p>.')
    reg.register_external(id="odd", target={"flops": 1e22}, loss=2.4, source=odd,
                          created_at="2026-11-02T00:00:00Z")
    reg.score("long", 2.234, source=long, created_at="2026-11-03T00:00:00Z")
    page = registry_report(path, generated_at=WHEN)
    hrefs = re.findall(r'<a href="([^"]*)"', page)
    assert hrefs and all(h.startswith(("https://", "http://")) for h in hrefs)
    assert set(hrefs) == {"https://github.com/org/repo/issues/4697",
                          "https://github.com/org/repo/issues/4447",
                          "https://e.org/q?a=1&amp;b=2", "https://e.org/p"}
    assert "onmouseover=" not in page.replace("&quot;onmouseover=&quot;", "")
    # one line in the cell, the whole text when opened
    score = page[page.index('<table class="score">'):page.index("</table>")]
    cell = ('<details class="src"><summary>source: github.com/.../issues/4697</summary><div>'
            '<a href="https://github.com/org/repo/issues/4697" rel="nofollow noopener '
            'noreferrer">https://github.com/org/repo/issues/4697</a> (2026-04-17: &#x27;'
            'predicting final paloma macro loss of 2.25&#x27;, from the isoFLOP analysis in '
            '<a href="https://github.com/org/repo/issues/4447" rel="nofollow noopener '
            'noreferrer">https://github.com/org/repo/issues/4447</a>, which records it as '
            '2.252)</div></details>')
    assert score.count(cell) == 2                  # the prediction's and the outcome's
    assert long not in text_of(score.replace(cell, ""))
    assert "details.src[open] > div { min-width: 16em; max-width: 30em;" in page
