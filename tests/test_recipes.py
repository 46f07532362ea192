"""Comparing recipes (issue 24): delphi.compare_recipes, backtest_recipes, compare-recipes.

Small seeded simulated ladders with a known answer; cheap (a few seconds in all).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.analyses.recipes import backtest_recipes, compare_recipes
from delphi.errors import LadderError, LadderWarning, TargetError
from delphi.ladder import Ladder

C0 = 1e18
# Two power laws in C (Kaplan et al. 2020 Eq. 1.3 + E) that meet once, at C = 1e19: below it
# A is better, above it B (lower floor, steeper slope).
A_LAW = {"E": 1.8, "A": 1.0 * C0 ** 0.2, "alpha": 0.2}
B_LAW = {"E": 1.7, "A": (1.8 + 10 ** -0.2 - 1.7) * 10 ** 0.25 * C0 ** 0.25, "alpha": 0.25}
CROSS = 1e19
TARGET = 1e21


def _power(p, c):
    return p["E"] + p["A"] * np.asarray(c, float) ** -p["alpha"]


def _power_ladders(seed=0, shared=0.004, own=0.0015, metric_b="loss", unit_b="nats/token"):
    """One run per budget, 13 budgets 1e16..1e20; each budget's losses carry a shared
    (design: the same hyperparameters) and an own log perturbation."""
    rng = np.random.default_rng(seed)
    c = np.logspace(16, 20, 13)
    common = rng.normal(0, shared, len(c))
    out = []
    for name, law, metric, unit in (("A", A_LAW, "loss", "nats/token"),
                                    ("B", B_LAW, metric_b, unit_b)):
        loss = _power(law, c) * np.exp(common + rng.normal(0, own, len(c)))
        df = pd.DataFrame({"run": [f"{name}-{i}" for i in range(len(c))], "flops": c,
                           "loss": loss})
        out.append(Ladder(df, name=name, metric=metric, unit=unit))
    return out


def _true_multiplier(target):
    goal = _power(B_LAW, target)
    c_a = (A_LAW["A"] / (goal - A_LAW["E"])) ** (1 / A_LAW["alpha"])
    return c_a / target


@pytest.fixture(scope="module")
def power_pair():
    return _power_ladders()


@pytest.fixture(scope="module")
def paired(power_pair):
    return compare_recipes(power_pair, target_flops=[TARGET], law="power", n_boot=100, seed=1,
                           forecasts=False)


def test_known_multiplier_and_crossover_are_recovered_within_their_intervals(paired):
    (c,) = paired.comparisons
    assert paired.pairing == "run" and "paired bootstrap" in paired.method
    true_diff = float(_power(B_LAW, TARGET) - _power(A_LAW, TARGET))
    assert c.lower <= true_diff <= c.upper and c.loss < 0 and c.p_better > 0.9
    m = _true_multiplier(TARGET)
    assert c.multiplier_lower <= m <= c.multiplier_upper
    assert abs(math.log(c.multiplier / m)) < 1.0
    assert c.crossover_lower <= CROSS <= c.crossover_upper
    assert abs(math.log10(c.crossover / CROSS)) < 0.5 and c.crossover_share > 0.9


def test_paired_interval_is_narrower_than_the_unpaired_one(power_pair, paired):
    unpaired = compare_recipes(power_pair, target_flops=[TARGET], law="power", n_boot=100, seed=1,
                               pairing="none", forecasts=False)
    assert unpaired.pairing == "none" and "unpaired" in unpaired.method
    p, u = paired.comparisons[0], unpaired.comparisons[0]
    assert (p.mean_upper - p.mean_lower) < 0.8 * (u.mean_upper - u.mean_lower)
    assert (p.upper - p.lower) < (u.upper - u.lower)


def test_mismatched_units_and_metrics_are_refused_naming_both():
    with pytest.warns(LadderWarning, match="wrong unit"):    # nats-sized losses as bits/byte
        a, b = _power_ladders(unit_b="bits/byte")
    with pytest.raises(LadderError, match=r"'A' and 'B' are in different units "
                                          r"\(nats/token and bits/byte\)"):
        compare_recipes([a, b], target_flops=TARGET, law="power", n_boot=20, forecasts=False)
    a, b = _power_ladders(metric_b="HellaSwag accuracy")
    with pytest.raises(LadderError, match="different metrics"):
        compare_recipes([a, b], target_flops=TARGET, law="power", n_boot=20, forecasts=False)


def test_a_different_eval_set_is_warned_about():
    a, b = _power_ladders(metric_b="C4 validation loss")
    with pytest.warns(LadderWarning, match="evaluated on different sets"):
        r = compare_recipes([a, b], target_flops=TARGET, law="power", n_boot=20,
                            forecasts=False)
    assert any("different sets" in w for w in r.warnings)


def test_bad_targets_and_single_ladder_are_refused(power_pair):
    with pytest.raises(TargetError, match="no target"):
        compare_recipes(power_pair, law="power", n_boot=20, forecasts=False)
    with pytest.raises(TargetError, match="not both"):
        compare_recipes(power_pair, target_flops=TARGET, target_params=1e9, target_tokens=2e10,
                        law="power", n_boot=20)
    with pytest.raises(LadderError, match="at least two"):
        compare_recipes(power_pair[:1], target_flops=TARGET, law="power")


def test_same_seed_same_result_and_the_seed_matters(power_pair, paired):
    again = compare_recipes(power_pair, target_flops=[TARGET], law="power", n_boot=100, seed=1,
                            forecasts=False)
    assert again.to_dict() == paired.to_dict()
    other = compare_recipes(power_pair, target_flops=[TARGET], law="power", n_boot=100, seed=2,
                            forecasts=False)
    assert other.comparisons[0].lower != paired.comparisons[0].lower


def _isoflop_pair(s=1.5, seed=0):
    """Chinchilla recipes on one isoFLOP grid: B at (N, D) is A at (sN, sD), so B is worth
    s^2 times the compute at every budget (the envelope multiplier)."""
    law = {"E": 1.8, "A": 400.0, "B": 1500.0, "alpha": 0.34, "beta": 0.30}
    rng = np.random.default_rng(seed)
    rows = {"A": [], "B": []}
    for c in (1e17, 3e17, 1e18, 3e18, 1e19):
        n_opt = 0.09 * (c / 6) ** 0.5
        for j, n in enumerate(n_opt * np.exp(np.linspace(-1.2, 1.2, 5))):
            d = c / (6 * n)
            shared = rng.normal(0, 0.002)
            for name, f in (("A", 1.0), ("B", s)):
                loss = (law["E"] + law["A"] * (f * n) ** -law["alpha"]
                        + law["B"] * (f * d) ** -law["beta"]) * math.exp(shared)
                rows[name].append({"run": f"{name}-{c:g}-{j}", "params": n, "tokens": d,
                                   "flops": c, "loss": loss})
    return [Ladder(pd.DataFrame(rows[k]), name=f"iso-{k}") for k in ("A", "B")]


def test_chinchilla_envelope_multiplier_and_json_shape():
    ladders = _isoflop_pair()
    r = compare_recipes(ladders, target_flops=[1e21, 1e22], n_boot=40, seed=0,
                        forecasts=False)
    assert r.law == "chinchilla" and len(r.comparisons) == 2
    for c in r.comparisons:
        assert c.loss < 0 and c.p_better == 1.0
        assert c.multiplier_lower <= 1.5 ** 2 <= c.multiplier_upper
        assert abs(c.multiplier / 2.25 - 1) < 0.15
        assert c.crossover is None          # B better everywhere
    d = r.to_dict()
    assert d["reference"] == "iso-A"
    for c in d["comparisons"]:
        assert {"recipe", "target_flops", "difference", "p_better", "compute_multiplier",
                "crossover"} <= set(c)
        assert {"loss", "lower", "upper"} <= set(c["difference"])
        assert {"value", "lower", "upper"} <= set(c["compute_multiplier"])
        assert {"flops", "lower", "upper"} <= set(c["crossover"])
        assert c["crossover"]["flops"] is None
    json.dumps(d, allow_nan=False)
    assert "none in 1e+15..1e+27" in r.report()


def _pair_csvs(tmp_path) -> list[str]:
    """The simulated isoFLOP pair written as two CSV ladders; their paths."""
    paths = []
    for ld in _isoflop_pair():
        p = tmp_path / f"{ld.name}.csv"
        ld.table[["run", "params", "tokens", "flops", "loss"]].to_csv(p, index=False)
        paths.append(str(p))
    return paths


def test_cli_json_and_text(tmp_path, capsys):
    from delphi.cli.main import main
    paths = _pair_csvs(tmp_path)
    code = main(["compare-recipes", *paths, "--target-flops", "1e21", "--n-boot", "20",
                 "--interval", "delta", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    d = json.loads(out)
    assert d["reference"] == "iso-A" and d["comparisons"][0]["recipe"] == "iso-B"
    assert d["comparisons"][0]["forecasts"]["recipe"]["loss"] > 0
    # each recipe's forecast warnings are in the JSON too, not only in the text (a fresh
    # user's finding: --json dropped them)
    assert "warnings" in d["comparisons"][0]["forecasts"]["recipe"]
    code = main(["compare-recipes", paths[0], "--target-flops", "1e21"])
    assert code == 2


def test_decision_backtest_scores_every_pair_against_the_baseline():
    bt = backtest_recipes(_isoflop_pair(), n_boot=20, seed=0, max_cuts=1)
    s = bt.summary
    assert bt.design == "envelope" and s["n"] == 2 and s["n_cuts"] == 1
    assert s["decision_accuracy"] == 1.0 and s["baseline_accuracy"] == 1.0
    assert 0 <= s["coverage"] <= 1
    assert {"cut", "a", "b", "observed", "predicted", "lower", "upper", "inside",
            "correct", "baseline", "baseline_correct"} <= set(bt.rows[0])
    json.dumps(bt.to_dict(), allow_nan=False)


def test_lazy_export():
    assert delphi.compare_recipes is compare_recipes
    assert "compare_recipes" in delphi.__all__


# ----------------------------------------------------------------------------- item 2: figure
def _usage_error(capsys, argv) -> str:
    """Run ``argv`` through the CLI; assert a usage error (exit 2); return its stderr."""
    from delphi.cli.main import main
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def _gids(ax, gid):
    return [a for a in [*ax.lines, *ax.collections] if a.get_gid() == gid]


def test_figure_draws_both_curves_the_difference_band_and_the_crossover(paired):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from delphi.plot import caption, plot_recipes

    cv = paired.curves
    c = paired.comparisons[0]
    assert [r.recipe for r in cv.recipes] == ["A", "B"] and cv.path == "envelope"
    # the difference curve changes sign once, inside the crossover's interval
    d = np.asarray(cv.differences[0].difference)
    flops = np.asarray(cv.flops)
    (cross,) = np.flatnonzero(np.sign(d[:-1]) != np.sign(d[1:]))
    assert c.crossover_lower <= flops[cross + 1] and flops[cross] <= c.crossover_upper
    assert np.all(np.asarray(cv.differences[0].lower) <= d + 1e-12)
    assert cv.flops[0] == pytest.approx(1e16) and cv.flops[-1] >= TARGET
    ax = plot_recipes(paired)
    try:
        dax = next(a for a in ax.figure.axes if a.get_gid() == "difference-axes")
        assert len(_gids(ax, "recipe-curve")) == 2 and len(_gids(ax, "recipe-band")) == 2
        assert len(_gids(ax, "frontier-points")) == 2
        assert len(_gids(dax, "difference-curve")) == 1
        assert len(_gids(dax, "difference-band")) == 1 and _gids(dax, "zero-line")
        (mark,) = _gids(dax, "crossover")
        assert mark.get_xdata()[0] == pytest.approx(c.crossover)
        (span,) = _gids(dax, "crossover-interval")
        (seg,) = span.get_segments()
        assert seg[0][0] == pytest.approx(c.crossover_lower)
        assert [ln.get_xdata()[0] for ln in _gids(dax, "target")] == [TARGET]
        (bar,) = _gids(dax, "target-difference")
        assert bar.get_segments()[0][:, 1] == pytest.approx([c.lower, c.upper])
    finally:
        plt.close(ax.figure)
    text = caption(paired)
    assert "B − A at C = 1e+21" in text and "crossover at" in text and f"{c.loss:+.4f}" in text
    d = paired.to_dict()
    assert len(d["curves"]["recipes"][1]["loss"]) == len(d["curves"]["flops"])
    json.dumps(d, allow_nan=False)


def _csvs(tmp_path, ladders):
    paths = []
    for ld in ladders:
        p = tmp_path / f"{ld.name}.csv"
        cols = [c for c in ("run", "params", "tokens", "flops", "loss") if c in ld.table]
        ld.table[cols].to_csv(p, index=False)
        paths.append(str(p))
    return paths


def test_plot_recipes_cli_writes_a_png_and_other_kinds_refuse_extra_ladders(tmp_path, capsys,
                                                                           power_pair):
    from delphi.cli.main import main
    a, b = _csvs(tmp_path, power_pair)
    png = tmp_path / "r.png"
    code = main(["plot", "recipes", a, b, "--target-flops", "1e21", "--law", "power",
                 "--n-boot", "20", "-o", str(png), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["kind"] == "recipes" and "crossover" in out["caption"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    err = _usage_error(capsys, ["plot", "fit", a, b, "--law", "power", "-o", str(png)])
    assert "plot fit takes one ladder; got 2" in err
    err = _usage_error(capsys, ["plot", "recipes", a, "--target-flops", "1e21", "-o", str(png)])
    assert "two or more ladders" in err


def test_report_page_is_deterministic_and_holds_the_comparison(tmp_path, capsys, paired):
    from delphi.cli.main import main
    from delphi.report import recipes_page

    page = recipes_page(paired, generated_at="2026-12-01T00:00:00Z")
    again = recipes_page(paired, generated_at="2026-12-01T00:00:00Z")
    assert page.html == again.html and page.kind == "recipes"
    c = paired.comparisons[0]
    html = page.html
    assert html.count("<svg") == 1 and "<script" not in html and "2026-12-01 00:00:00 UTC" in html
    assert f"{c.loss:+.4f}" in html and f"[{c.lower:+.4f}, {c.upper:+.4f}]" in html
    assert 'id="f-recipes-crossover"' in html
    assert page.summary["comparisons"][0]["difference"]["loss"] == c.loss
    assert page.summary["ladders"][1]["sha256"] == paired.ladders[1].fingerprint()
    # a comparison page takes no LADDER and no registry
    err = _usage_error(capsys, ["report", "x.csv", "--recipes", "a.csv", "b.csv", "--html",
                                str(tmp_path)])
    assert "--recipes makes a comparison page: LADDER belongs" in err


# ----------------------------------------------------------------------------- item 3: registry
@pytest.fixture(scope="module")
def with_forecasts(power_pair):
    return compare_recipes(power_pair, target_flops=[TARGET], law="power", n_boot=40, seed=1,
                           interval="delta")


def test_a_registered_comparison_verifies_and_scores_known_losses(tmp_path, with_forecasts):
    from dataclasses import replace

    from delphi.errors import RegistryError
    from delphi.registry import Registry

    reg = Registry(tmp_path / "r.jsonl")
    (e,) = reg.register_comparison(with_forecasts, id="b-vs-a", author="me")
    c = with_forecasts.comparisons[0]
    rec = e.comparison
    assert (rec.recipe, rec.reference, rec.target_flops, rec.law) == ("B", "A", TARGET, "power")
    assert rec.difference == c.loss and rec.p_better == c.p_better
    assert (rec.interval.lower, rec.interval.upper, rec.interval.level) == (c.lower, c.upper, 0.9)
    assert rec.reference_ladder.sha256 == c.reference_forecast.ladder_sha256
    assert e.ladder.sha256 == c.recipe_forecast.ladder_sha256 != rec.reference_ladder.sha256
    assert e.delphi_version == delphi.__version__
    reg.register_comparison(with_forecasts, id="b-vs-a-2")
    with pytest.raises(RegistryError, match="'b-vs-a' is already in"):
        reg.register_comparison(with_forecasts, id="b-vs-a")
    # several (recipe, target) rows: ID-<recipe>-<k>
    two = replace(with_forecasts, comparisons=(c, replace(c, target_flops=1e22)))
    assert [x.id for x in reg.register_comparison(two, id="two")] == ["two-B-1", "two-B-2"]
    mid = (c.lower + c.upper) / 2
    s = reg.score_comparison("b-vs-a", loss_a=2.0, loss_b=2.0 + mid)
    assert s.inside and abs(s.z) < 1e-6 and s.pit == pytest.approx(0.5)
    assert s.observed == pytest.approx(mid) and s.winner_right is (c.loss < 0) == (mid < 0)
    out = reg.score_comparison("b-vs-a-2", loss_a=2.0, loss_b=2.0 + c.upper + 0.05)
    assert not out.inside and out.z > 1.645 and out.pit > 0.95
    with pytest.raises(RegistryError, match="already has a final outcome"):
        reg.score_comparison("b-vs-a", loss_a=2.0, loss_b=1.9)
    with pytest.raises(RegistryError, match="loss_a"):
        reg.score_comparison("two-B-1", loss_a=float("nan"), loss_b=1.9)
    with pytest.raises(RegistryError, match="loss_b"):
        reg.score_comparison("two-B-1", loss_a=2.0, loss_b=-1.0)
    with pytest.raises(RegistryError, match="score it with both observed final losses"):
        reg.score("two-B-1", 2.0)
    assert reg.verify().ok
    board = reg.report()
    assert [x.inside for x in board.comparisons] == [True, False]
    assert [x.prediction_id for x in reg.comparison_scores("b-vs-a")] == ["b-vs-a"]
    from delphi.report import registry_page
    page = registry_page(reg.path, generated_at="2026-12-01T00:00:00Z")
    assert "Comparisons of recipes (4)" in page.html and page.summary["n_comparisons_scored"] == 2


def test_verify_refuses_a_comparison_outcome_without_the_reference_loss(tmp_path,
                                                                         with_forecasts):
    from delphi.registry import Registry
    from delphi.registry.invariants import ChainRules

    reg = Registry(tmp_path / "r.jsonl")
    (e,) = reg.register_comparison(with_forecasts, id="b-vs-a")
    reg.score_comparison("b-vs-a", loss_a=2.0, loss_b=1.9)
    pred, outcome = reg.entries()
    rules = ChainRules()
    assert rules.problem(pred, 1) is None
    rules.add(pred, 1)
    assert rules.problem(outcome, 2) is None
    bare = outcome.model_copy(update={"outcome": outcome.outcome.model_copy(
        update={"reference_actual": None})})
    assert "without the reference's final loss" in rules.problem(bare, 2)


def test_older_registries_still_verify_and_keep_their_bytes(tmp_path):
    import shutil
    from pathlib import Path

    from delphi.registry import Entry, Registry

    src = Path(__file__).resolve().parents[1] / "ladders" / "marin-registry.jsonl"
    dst = tmp_path / "old.jsonl"
    shutil.copy(src, dst)
    assert Registry(dst).verify().ok
    for line in dst.read_text().splitlines():
        e = Entry.model_validate_json(line)
        assert e.line == line and e.comparison is None
        assert e.outcome is None or "reference_actual" not in line


def test_cli_preregisters_and_scores_a_comparison(tmp_path, capsys, power_pair):
    from delphi.cli.main import main
    a, b = _csvs(tmp_path, power_pair)
    path = str(tmp_path / "r.jsonl")
    code = main(["compare-recipes", a, b, "--target-flops", "1e21", "--law", "power",
                 "--n-boot", "20", "--interval", "delta", "--registry", path, "--id", "cmp",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and [r["id"] for r in out["registered"]] == ["cmp"]
    d = out["comparisons"][0]["difference"]
    code = main(["score", "--registry", path, "--id", "cmp", "--loss-a", "2.0",
                 "--loss-b", str(2.0 + d["upper"] + 0.1), "--json"])
    s = json.loads(capsys.readouterr().out)
    assert code == 0 and s["inside"] is False and s["z"] > 1.645
    assert main(["score", "--registry", path, "--id", "cmp", "--actual", "2", "--loss-a",
                 "2"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["compare-recipes", a, b, "--target-flops", "1e21", "--registry", path,
                 "--id", "cmp"]) == 1
    assert "already in" in capsys.readouterr().err


def test_a_crossover_below_the_fitted_runs_is_said(paired):
    # Before (a fresh user): a crossover below the smallest fitted run was reported without a
    # word (and the figure, which starts at the fitted runs, lacks it).
    (c,) = paired.comparisons      # the pair crosses at CROSS, inside its runs: no note
    assert c.crossover is not None and not [n for n in paired.notes if "smallest fitted" in n]
    # the same two laws, each run above 1e19.5 only: they still cross at CROSS = 1e19
    runs = np.logspace(19.5, 21.5, 13)
    pair = [Ladder(pd.DataFrame({"run": [f"{nm}-{i}" for i in range(len(runs))], "flops": runs,
                                 "loss": _power(law, runs)}), name=nm)
            for nm, law in (("A", A_LAW), ("B", B_LAW))]
    out = compare_recipes(pair, target_flops=[1e22], law="power", n_boot=20, seed=1,
                          forecasts=False)
    (d,) = out.comparisons
    said = [n for n in out.notes if "is below the two recipes' smallest fitted run" in n]
    assert d.crossover == pytest.approx(CROSS, rel=0.05) and d.crossover < runs[0]
    assert len(said) == 1 and f"{d.crossover:.3g} FLOPs" in said[0]
    assert "the figure does not reach it" in said[0]


def test_an_id_too_long_for_the_comparison_suffix_says_so(paired, tmp_path):
    # Before (a fresh user): "'xxxx...' is 66 characters" for a 41-character ID, the
    # -<recipe>-<target> suffix unsaid.
    from delphi.registry import Registry
    two = compare_recipes(_power_ladders(), target_flops=[TARGET, 3 * TARGET], law="power",
                          n_boot=20, seed=1, forecasts=False)
    with pytest.raises(delphi.RegistryError, match=r"plus the suffix -<recipe>-<target> .* at "
                                                   r"most 60 characters"):
        Registry(tmp_path / "r.jsonl").register_comparison(two, id="x" * 62)


# ---- a new user's findings (2026-12-03): each test fails on the code before the fix


def test_a_different_eval_set_names_both_metrics_in_the_header_and_json():
    a, b = _power_ladders(metric_b="C4 validation loss")
    with pytest.warns(LadderWarning):
        r = compare_recipes([a, b], target_flops=TARGET, law="power", n_boot=20,
                            forecasts=False)
    assert r.metrics == ("loss", "C4 validation loss")
    assert "metrics loss (A); C4 validation loss (B)" in r.report().splitlines()[0]
    assert r.to_dict()["metrics"] == ["loss", "C4 validation loss"]


def test_the_same_ladder_twice_is_a_tie_and_is_warned_about(power_pair):
    a = power_pair[0]
    with pytest.warns(LadderWarning, match="hold the same runs and losses"):
        r = compare_recipes([a, a], names=["x", "y"], target_flops=TARGET, law="power",
                            n_boot=20, forecasts=False)
    (c,) = r.comparisons
    assert c.loss == 0 and c.p_better == 0.5 and c.winner is None and not c.told_apart
    assert "no winner (a tie)" in r.report()
    assert r.to_dict()["comparisons"][0]["decision"]["winner"] is None


def test_a_winner_whose_interval_spans_zero_is_ahead_not_a_winner(power_pair):
    # at the crossover's compute the two recipes are level: the interval spans zero
    r = compare_recipes(power_pair, target_flops=[CROSS], law="power", n_boot=40, seed=1,
                        forecasts=False, decision="law")
    (c,) = r.comparisons
    assert c.lower < 0 < c.upper and not c.told_apart
    assert "ahead, not told apart from 0 at 90%" in r.report()
    frame = r.to_frame()
    assert list(frame[["decision", "told_apart"]].iloc[0]) == ["law", False]
    assert frame["decided"].iloc[0] == c.loss


def test_one_ladder_given_as_a_string_or_frame_is_refused_plainly(power_pair):
    for one in ("A.csv", power_pair[0], power_pair[0].table):
        with pytest.raises(LadderError, match="a list of two or more ladders"):
            compare_recipes(one, target_flops=TARGET)


def test_a_target_given_twice_is_one_row(power_pair):
    r = compare_recipes(power_pair, target_flops=[TARGET, TARGET, 1e20], law="power",
                        n_boot=20, forecasts=False)
    assert [c.target_flops for c in r.comparisons] == [TARGET, 1e20]


def test_repr_is_short_and_exclusions_are_listed(power_pair):
    a, b = power_pair
    table = b.table.copy()
    table.loc[0, "loss"] = float("nan")
    with pytest.warns(LadderWarning, match="dropped"):
        b_bad = delphi.load_ladder(table, drop_invalid=True)
    r = compare_recipes([a, b_bad], names=["A", "B"], target_flops=TARGET, law="power",
                        n_boot=20, forecasts=False)
    assert len(repr(r)) < 300 and len(repr(r.comparisons[0])) < 400
    (exc,) = r.exclusions
    assert exc[0] == "B" and exc[1] == "B-0" and "drop" in exc[2]
    assert "excluded   B: B-0:" in r.report()
    assert r.to_dict()["exclusions"][0]["run"] == "B-0"


def test_too_few_runs_to_resample_falls_back_on_the_forecasts_intervals():
    # three budgets for the power law's three parameters: no draw can be refitted
    c = np.array([1e18, 1e19, 1e20])
    pair = [Ladder(pd.DataFrame({"run": [f"{nm}-{i}" for i in range(3)], "flops": c,
                                 "loss": _power(law, c)}), name=nm)
            for nm, law in (("A", A_LAW), ("B", B_LAW))]
    r = compare_recipes(pair, target_flops=[1e22], law="power", n_boot=20, seed=0)
    (d,) = r.comparisons
    assert r.n_draws == 0 and "no bootstrap" in r.method and "'A' has 3 fitted points" in r.method
    assert d.lower < d.loss < d.upper and 0 < d.p_better < 1
    # the interval is the forecasts' in quadrature (independent), up to Monte-Carlo error
    fa, fb = d.reference_forecast, d.recipe_forecast
    half = [math.log(f.interval.upper / f.interval.lower) / 2 for f in (fa, fb)]
    approx = math.hypot(fa.loss * half[0], fb.loss * half[1])
    assert (d.upper - d.lower) / 2 == pytest.approx(approx, rel=0.15)
    assert d.crossover_lower is None and "no interval without draws" in r.report()
    assert all(v is None for v in r.to_dict()["curves"]["differences"][0]["lower"])
    json.dumps(r.to_dict(), allow_nan=False)        # valid JSON: no NaN


def _hand_built(draws=None, noise=1e-5):
    """A and B's fits (A_LAW, B_LAW) with hand-built draws: the comparison's engine alone."""
    from types import SimpleNamespace

    from delphi.analyses import recipes as R
    return R._Paired(names=["A", "B"], ladders=[None, None],
                     fits=[SimpleNamespace(params=A_LAW), SimpleNamespace(params=B_LAW)],
                     law="power", k=[1.0, 1.0], draws=draws, noise=[noise, noise],
                     pairing="run" if draws else "none", method="", n_failed=0, notes=[])


def test_the_new_run_difference_interval_contains_the_expected_one():
    """As bootstrap_interval's: run noise only widens, percentiles of few draws need not know
    it. Paired: 7 draws of each recipe's A 1.7% apart (B's in reverse order), run noise
    1e-5. At level 0.68 the expected difference's ends interpolate 96% of the way between
    two draws, the new-run ones (25 noise draws each) fall on the nearer draw's own tight
    cluster: inside, at both ends, unless the nesting is imposed; at 0.9 they were already
    outside and stay so. Unpaired (no draws): B's new-run sd 1.1x its expected-loss sd, A's
    interval the same for both; seed 0's 4000 normal draws put both new-run ends inside."""
    from types import SimpleNamespace

    from delphi.analyses import recipes as R
    spec = R._Spec(1e21)
    step = np.exp(np.linspace(-0.05, 0.05, 7))[:, None]
    draws = [{**{k: np.full((7, 1), v) for k, v in law.items()}, "A": law["A"] * s}
             for law, s in ((A_LAW, step), (B_LAW, step[::-1]))]
    pp = _hand_built(draws)
    r = R._compare_pair(pp, 0, 1, spec, 0.68, 0)
    assert r["lower"] <= r["mean_lower"] < r["mean_upper"] <= r["upper"], r
    wide = R._compare_pair(pp, 0, 1, spec, 0.9, 0)
    assert wide["lower"] < wide["mean_lower"] < wide["mean_upper"] < wide["upper"], wide

    z = 1.6448536269514722                  # the normal's 95th percentile: a 90% interval

    def forecast(centre, sd_new, sd_mean):
        return SimpleNamespace(interval=SimpleNamespace(
            lower=centre * math.exp(-z * sd_new), upper=centre * math.exp(z * sd_new),
            mean_lower=centre * math.exp(-z * sd_mean), mean_upper=centre * math.exp(z * sd_mean),
            level=0.9))
    own = (forecast(2.05, 0.05, 0.05), forecast(2.0, 0.0011, 0.001))
    u = R._compare_pair(_hand_built(), 0, 1, spec, 0.9, 0, own)
    assert u["lower"] <= u["mean_lower"] < u["mean_upper"] <= u["upper"], u


def test_backtest_report_gives_the_accuracys_sampling_interval(power_pair):
    out = backtest_recipes(power_pair, law="power", n_boot=20, max_cuts=1)
    assert "Clopper-Pearson" in out.report()


def test_a_comparison_without_draws_registers_and_scores(tmp_path):
    # Before: the registry refused n_draws = 0 ("greater than or equal to 1").
    c = np.array([1e18, 1e19, 1e20])
    pair = [Ladder(pd.DataFrame({"run": [f"{nm}-{i}" for i in range(3)], "flops": c,
                                 "loss": _power(law, c)}), name=nm)
            for nm, law in (("A", A_LAW), ("B", B_LAW))]
    r = compare_recipes(pair, target_flops=[1e22], law="power", n_boot=20, seed=0)
    reg = delphi.Registry(tmp_path / "r.jsonl")
    (entry,) = reg.register_comparison(r, id="small")
    assert entry.comparison.n_draws == 0 and "no bootstrap" in entry.comparison.method
    assert reg.verify().ok
