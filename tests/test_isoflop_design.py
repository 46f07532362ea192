"""isoFLOP design checks (issue 9, section 5): a grid too wide for a parabola, a sampling
centre that drifts across budgets, tied or quantised losses, duplicate rows named as such, and
the analysis of a single budget (vertex and interval, no power law)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from delphi.errors import FitError, FitWarning, LadderError, LadderWarning
from delphi.analyses.isoflop import isoflop_analysis, isoflop_table
from delphi.ladder import Ladder

from bundled import expect_warnings, load

# The issue's input: one budget, 4 of 9 losses equal, rows c3e21-4 and c3e21-5 share N.
ISSUE_CSV = """run,params,tokens,flops,loss
c3e21-1,2.63864e+09,1.867e+11,3e21,2.20569
c3e21-2,2.97953e+09,1.64742e+11,3e21,2.21231
c3e21-3,4.51606e+09,1.10297e+11,3e21,2.20569
c3e21-4,6.79561e+09,7.05722e+10,3e21,2.20569
c3e21-5,6.79561e+09,7.89943e+10,3e21,2.20569
c3e21-6,9.29322e+09,5.15783e+10,3e21,2.23899
c3e21-7,1.14518e+10,4.39405e+10,3e21,2.26598
c3e21-8,1.2569e+10,3.9438e+10,3e21,2.26598
c3e21-9,1.61833e+10,3.01633e+10,3e21,2.28645
"""


def issue_table() -> pd.DataFrame:
    from io import StringIO

    return pd.read_csv(StringIO(ISSUE_CSV), dtype={"run": str})


# An isoFLOP loss of the Chinchilla form with strongly unequal exponents, so that it is far from
# a parabola in ln N: L = E + A N^-alpha + B D^-beta, D = C / 6N.
AL, BE, A, B, E = 0.2, 0.6, 400.0, 4000.0, 1.8
TRUE_A = BE / (AL + BE)        # Hoffmann et al. 2022, Eq. 4: N* ~ C^(beta / (alpha + beta))
BUDGETS = [1e18, 3e18, 1e19, 3e19, 1e20]


def n_opt(c: float) -> float:
    """Hoffmann et al. 2022, Eq. 4."""
    g = (AL * A / (BE * B)) ** (1 / (AL + BE))
    return g * (c / 6) ** (BE / (AL + BE))


def grid(budgets, sizes, step, offsets) -> pd.DataFrame:
    """``sizes`` runs per budget spaced ``step`` in ln N around N*(C) e^offset, no noise."""
    rows = []
    for c, o in zip(budgets, offsets):
        centre = math.log(n_opt(c)) + o
        for k in range(sizes):
            n = math.exp(centre + (k - (sizes - 1) / 2) * step)
            d = c / (6 * n)
            rows.append({"run": f"C{c:.3g}-{k}", "params": n, "tokens": d, "flops": c,
                         "loss": E + A * n ** -AL + B * d ** -BE})
    return pd.DataFrame(rows)


# The design warnings (FitWarning): a budget sampled too wide, their count, a drifting centre.
BUDGET_WIDE = r"^budget C=[^:]+: the sizes reach .* beyond the \+-8x a parabola describes well"
DRIFTS = r"^the sampling centre drifts against the vertices"


def wide_budgets(k: int, n: int) -> str:
    return rf"^{k} of {n} budgets sample sizes beyond 8x of their vertex"


# ------------------------------------------------------------------------------- single budget
def test_issue_input_gives_vertex_interval_tie_and_duplicate_warnings():
    with pytest.warns(LadderWarning) as caught:
        res = isoflop_analysis(Ladder(issue_table(), name="issue9"), n_boot=400, seed=0)
    (b,) = res.budgets
    # Independent vertex: numpy's least-squares parabola of loss on ln N over the 8 distinct
    # sizes (c3e21-4 and c3e21-5 have the same N and the same loss, so either one gives it).
    t = issue_table().drop_duplicates("params")
    a2, a1, a0 = np.polyfit(np.log(t["params"]), t["loss"], 2)
    assert b.params == pytest.approx(math.exp(-a1 / (2 * a2)), rel=1e-9)
    assert b.loss == pytest.approx(a0 - a1 ** 2 / (4 * a2), rel=1e-9)
    # D* from the parabola in ln D over the kept rows (c3e21-4's D, the first listed)
    d2, d1, _ = np.polyfit(np.log(t["tokens"]), t["loss"], 2)
    assert b.tokens == pytest.approx(math.exp(-d1 / (2 * d2)), rel=1e-9)
    lo, hi = b.params_interval
    assert lo < b.params < hi and b.tokens_interval is not None
    # no power law from one budget: omitted with a note, not an error
    assert res.params_law is None and res.tokens_law is None
    assert any("at least 2 budgets" in n for n in res.notes)
    with pytest.raises(FitError, match=r"at least 2 compute budgets.*C=3e\+21.*N\* = 3\.843e\+09"):
        res.optimal(1e22)
    # 4 of the 9 losses equal 2.20569: a tie warning naming the four runs
    tie = [w for w in res.warnings if "losses are equal" in w]
    assert len(tie) == 1 and "4 of 9" in tie[0] and "2.20569" in tie[0]
    assert all(f"'c3e21-{k}'" in tie[0] for k in (1, 3, 4, 5))
    # the duplicate size is named as a duplicate, both rows, with the D mismatch
    dup = [w for w in res.warnings if "duplicate" in w]
    assert len(dup) == 1 and "'c3e21-4'" in dup[0] and "'c3e21-5'" in dup[0]
    assert "differ by 12%" in dup[0]
    assert {"tied", "duplicates"} <= set(b.flags)
    assert b.duplicates == (("c3e21-4", "c3e21-5"),)
    assert {str(w.message) for w in caught} >= {tie[0], dup[0]}
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["params_law"] is None and d["budgets"][0]["ties"][0]["loss"] == 2.20569
    text = res.report()
    assert "no power law" in text and "vertex     N* = 3.843e+09" in text


def test_single_budget_exact_parabola():
    # loss = 2 + 0.05 (ln N - ln 1e9)^2: the vertex is N* = 1e9, L* = 2 by construction, and
    # with D = C / 6N the loss is a parabola in ln D with vertex D* = C / 6e9.
    c = 6e19
    n = 1e9 * np.exp(np.array([-1.2, -0.7, -0.3, 0.1, 0.5, 1.0, 1.4]))
    t = pd.DataFrame({"run": [f"r{i}" for i in range(7)], "params": n, "tokens": c / (6 * n),
                      "flops": c, "loss": 2 + 0.05 * np.log(n / 1e9) ** 2})
    res = isoflop_table(t, bootstrap="none")
    (b,) = res.budgets
    assert b.params == pytest.approx(1e9, rel=1e-9)
    assert b.tokens == pytest.approx(c / 6e9, rel=1e-9)
    assert b.loss == pytest.approx(2.0, abs=1e-12)
    assert res.params_law is None and res.warnings == ()
    # seeded loss noise: the resampling interval of N* brackets the true vertex
    noisy = t.assign(loss=t["loss"] + 0.002 * np.random.default_rng(3).standard_normal(7))
    lo, hi = isoflop_table(noisy, n_boot=500, seed=1).budgets[0].params_interval
    assert lo < 1e9 < hi


def test_single_budget_without_a_vertex_is_an_error_naming_it():
    n = np.geomspace(1e8, 1e9, 5)
    t = pd.DataFrame({"run": list("abcde"), "params": n, "tokens": 1e19 / (6 * n),
                      "flops": 1e19, "loss": 3.0 - 0.1 * np.log(n / 1e8)})   # straight line
    with pytest.raises(FitError, match=r"one compute budget \(C=1e\+19, 5 sizes\).*no vertex"):
        isoflop_table(t, bootstrap="none")


# ------------------------------------------------------------------------------- ties
def _parabola_budget(loss_override=None):
    c = 1e20
    n = 2e9 * np.exp(np.linspace(-1.2, 1.2, 7))
    loss = 2.5 + 0.04 * np.log(n / 2e9) ** 2
    if loss_override:
        for i, v in loss_override.items():
            loss[i] = v
    return pd.DataFrame({"run": [f"s{i}" for i in range(7)], "params": n, "tokens": c / (6 * n),
                         "flops": c, "loss": loss})


def test_three_equal_losses_warn_two_do_not():
    three = _parabola_budget({1: 2.51, 2: 2.51, 5: 2.51})
    with pytest.warns(LadderWarning, match=r"3 of 7 losses are equal \(2\.51: runs 's1', 's2' and 's5'\)"):
        res = isoflop_table(three, bootstrap="none")
    assert "tied" in res.budgets[0].flags
    two = _parabola_budget({1: 2.51, 5: 2.51})
    res = isoflop_table(two, bootstrap="none")
    assert "tied" not in res.budgets[0].flags
    assert not any("equal" in w for w in res.warnings)


def test_edge_flag_counts_a_tie_at_either_end():
    # the lowest loss shared by the largest size and an inner one: the optimum may lie beyond
    # the largest size, as it may when the smallest size ties (previously only argmin's first)
    t = _parabola_budget({6: 2.5, 3: 2.5})
    assert "edge" in isoflop_table(t, bootstrap="none").budgets[0].flags


# ------------------------------------------------------------------------------- duplicates
def test_lr_sweep_at_one_size_names_every_run_as_duplicates():
    t = _parabola_budget()
    sweep = t.iloc[[3, 3]].assign(run=["s3-lr2", "s3-lr3"], loss=[2.52, 2.55])
    with pytest.warns(LadderWarning) as caught:
        res = isoflop_table(pd.concat([t, sweep]), bootstrap="none")
    (dup,) = [str(w.message) for w in caught if "duplicate" in str(w.message)]
    assert "runs 's3', 's3-lr2' and 's3-lr3' all have N = 2e+09" in dup
    assert "kept 's3' (lowest loss)" in dup and "differ" not in dup   # same D: consistent
    assert res.budgets[0].runs.count("s3") == 1 and "s3-lr2" not in res.budgets[0].runs


def test_two_sizes_with_one_token_count_is_an_error_naming_both():
    t = _parabola_budget()
    t.loc[4, "tokens"] = t.loc[2, "tokens"]
    with pytest.raises(LadderError, match=r"duplicate token count: runs 's2' and 's4' all have "
                                          r"D = .* but N = "):
        isoflop_table(t, bootstrap="none")


# ------------------------------------------------------------------------------- width
def test_wide_grid_is_flagged_with_a_bias_estimate_toward_the_truth():
    # 13 sizes, 0.5 apart in ln N, centred on the true N*: they reach e^3 = 20x either side.
    # With alpha = 0.2, beta = 0.6 the loss is far from quadratic in ln N there, and the
    # parabola's vertex misses Eq. 4's N* by about -33%.
    with expect_warnings(FitWarning, BUDGET_WIDE, wide_budgets(5, 5)):
        res = isoflop_table(grid(BUDGETS, 13, 0.5, [0.0] * 5), bootstrap="none")
    for b in res.budgets:
        assert "wide" in b.flags
        actual = math.log(b.params / n_opt(b.flops))           # the true bias
        estimate = math.log(b.params / b.narrow_params)         # what the warning reports
        assert actual < -0.3
        # same sign, at least half the size: the refit within 8x removes most of the bias
        assert 0.5 * actual > estimate > actual
        assert abs(math.log(b.narrow_params / n_opt(b.flops))) < 0.5 * abs(actual)
        assert any(f"off by about {math.exp(estimate) - 1:+.0%}" in n for n in b.notes)
    # every budget is biased by the same factor (same grid shape), so the exponent is not
    assert res.params_law.exponent == pytest.approx(TRUE_A, abs=1e-9)
    assert res.design["wide"] == [b.label for b in res.budgets]


def test_grid_within_8x_is_not_wide():
    res = isoflop_table(grid(BUDGETS, 7, 0.35, [0.0] * 5), bootstrap="none")  # +-2.9x
    assert not any("wide" in b.flags for b in res.budgets)
    assert all(math.isnan(b.narrow_params) for b in res.budgets)
    # e^1.05 either side of N*; the vertex itself is a few per cent off N* on this curve
    assert max(max(b.width) for b in res.budgets) == pytest.approx(math.exp(1.05), rel=0.1)
    assert "exponent_within_width" not in res.design


def test_porian_kaplan_grid_width_estimate_recovers_published_exponent(data_dir):
    # Porian et al. 2024, RefinedWeb, "Counting last layer FLOPs" step: grids up to 140x wide.
    # A parabola over all sizes gives a = 0.78; the paper's value (Akima interpolation) is
    # 0.706. Refitting the wide budgets within 8x of their vertex must land near the paper.
    pts = pd.read_csv(data_dir / "porian2024" / "porian2024_isoflop_points.csv")
    setup = {"dataset": "rw", "hparams": "base", "warmup": "long", "decay": "kaplan",
             "param_count": "standard", "loss_source": "val"}
    mask = np.logical_and.reduce([pts[k] == v for k, v in setup.items()])
    t = pts[mask].rename(columns={"flops_budget": "flops"})
    t = t.assign(run=[f"rw-{i}" for i in range(len(t))])
    with expect_warnings(FitWarning, BUDGET_WIDE, wide_budgets(5, 9), DRIFTS):
        res = isoflop_table(t, bootstrap="none")
    assert res.params_law.exponent > 0.76
    assert len(res.design["wide"]) >= 4
    assert res.design["exponent_within_width"] == pytest.approx(0.706, abs=0.015)
    assert res.design["drift"]


# ------------------------------------------------------------------------------- drift
def test_drifting_centre_is_warned_with_a_balanced_estimate():
    # Grids centred at N*(C) e^o with o from -0.8 to +0.8 across the budgets: the sampling
    # centre moves by e^1.6 = 4.95x relative to the optimum. A parabola's vertex is pulled
    # toward an off-centre sample by an amount that changes with o, biasing the exponent
    # (Eq. 4: 0.75).
    with pytest.warns(FitWarning, match="sampling centre drifts"):
        res = isoflop_table(grid(BUDGETS, 9, 0.3, np.linspace(-0.8, 0.8, 5)), bootstrap="none")
    d = res.design
    assert d["drift"] and d["centre_drift"] == pytest.approx(math.exp(1.6), rel=0.1)
    bias = res.params_law.exponent - TRUE_A
    assert bias > 0.005
    assert abs(d["exponent_balanced"] - TRUE_A) < abs(bias) / 3
    (w,) = [w for w in res.warnings if "drifts" in w]
    assert f"a = {d['exponent_balanced']:.4f}" in w and "beyond 2x" in w


def test_constant_offset_is_not_drift():
    # Every budget's grid sits at N*(C) e^0.5: off-centre by the same factor. The Chinchilla
    # isoFLOP loss has the same shape in ln(N / N*) at every C (up to scale and shift, which do
    # not move a vertex), so the ratio of centre to vertex is the same in every budget and the
    # exponent is unbiased: no drift.
    res = isoflop_table(grid(BUDGETS, 9, 0.3, [0.5] * 5), bootstrap="none")
    assert res.design["centre_drift"] == pytest.approx(1.0, abs=1e-9)
    assert not res.design["drift"]
    assert res.params_law.exponent == pytest.approx(TRUE_A, abs=1e-9)
    assert not any("drifts" in w for w in res.warnings)


# ------------------------------------------------------------------------------- real ladders
def test_published_ladders_design_warnings(data_dir):
    from delphi.readers import load_ladder

    # Llama 3's isoFLOP points (Open-Athena's QC'd digitisation): sizes within 5x of every
    # vertex and a centre that moves 1.4x: no width or drift warning.
    llama = isoflop_analysis(load_ladder("openathena-isoflops"), bootstrap="none")
    assert llama.design["wide"] == [] and not llama.design["drift"]
    assert not any("beyond" in w or "drifts" in w for w in llama.warnings)
    # Marin (DCLM): no drift (1.25x); its three largest budgets reach 8-14x from the vertex
    # and are flagged wide.
    marin_ladder = load("marin-isoflop-dclm")   # with its known FLOP-count warnings
    with expect_warnings(FitWarning, BUDGET_WIDE, wide_budgets(3, 7)):
        marin = isoflop_analysis(marin_ladder, bootstrap="none")
    assert not marin.design["drift"]
    assert marin.design["wide"] == ["C=9e+19", "C=1.8e+20", "C=3e+20"]
    # Porian et al.'s corrected RefinedWeb grid drifts (2.1x); trimming each budget to a
    # balanced sample brings the parabola's 0.514 to the paper's 0.497.
    with expect_warnings(FitWarning, BUDGET_WIDE, wide_budgets(4, 12), DRIFTS):
        porian = isoflop_analysis(load_ladder("porian2024-rw"), bootstrap="none")
    assert porian.design["drift"]
    assert porian.design["exponent_balanced"] == pytest.approx(0.497, abs=0.01)
    assert porian.params_law.exponent > 0.505


# ------------------------------------------------------------------------------- CLI
def test_cli_isoflop_issue_input(tmp_path, capsys):
    from delphi.cli import main

    path = tmp_path / "issue9.csv"
    path.write_text(ISSUE_CSV)
    assert main(["isoflop", str(path), "--n-boot", "200"]) == 0
    out = capsys.readouterr().out
    assert "vertex     N* = 3.843e+09" in out and "no power law" in out
    assert "4 of 9 losses are equal" in out
    assert "duplicate model size: runs 'c3e21-4' and 'c3e21-5'" in out
    assert main(["isoflop", str(path), "--n-boot", "200", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["params_law"] is None and d["target"] is None
    assert d["budgets"][0]["params"] == pytest.approx(3.8427e9, rel=1e-4)
    assert d["budgets"][0]["params_interval"] is not None
    assert any("c3e21-5" in w and "duplicate" in w for w in d["warnings"])
    assert d["notes"] and "at least 2 budgets" in d["notes"][0]
    # a target needs the power law: an error (exit 1) that still gives the vertex
    assert main(["isoflop", str(path), "--bootstrap", "none", "--target-flops", "1e22"]) == 1
    assert "N* = 3.843e+09" in capsys.readouterr().err


def test_cli_isoflop_json_carries_design(tmp_path, capsys):
    from delphi.cli import main

    path = tmp_path / "drift.csv"
    grid(BUDGETS, 9, 0.3, np.linspace(-0.8, 0.8, 5)).to_csv(path, index=False)
    assert main(["isoflop", str(path), "--bootstrap", "none", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["design"]["drift"] is True
    assert any("sampling centre drifts" in w for w in d["warnings"])


def test_cli_plan_from_a_single_budget_ladder_is_an_error(tmp_path, capsys):
    # `plan --from-method isoflop` centres sizes on N*(C): one budget has no N*(C)
    from delphi.cli import main

    path = tmp_path / "issue9.csv"
    path.write_text(ISSUE_CSV)
    code = main(["plan", "--target-flops", "1e23", "--from", str(path), "--from-method",
                 "isoflop"])
    assert code == 1
    assert "need at least 2 budgets" in capsys.readouterr().err


# ---------------------------------------- one qualifying budget among several (review item 5)
def _exact_budget_plus_two_sizes() -> pd.DataFrame:
    # Budget 6e19: loss = 2 + 0.05 (ln N - ln 1e9)^2 over 7 sizes, vertex N* = 1e9 and
    # D* = C / 6e9 by construction; budget 1e19: two sizes only (no parabola).
    c = 6e19
    n = 1e9 * np.exp(np.array([-1.2, -0.7, -0.3, 0.1, 0.5, 1.0, 1.4]))
    good = pd.DataFrame({"run": [f"r{i}" for i in range(7)], "params": n,
                         "tokens": c / (6 * n), "flops": c,
                         "loss": 2 + 0.05 * np.log(n / 1e9) ** 2})
    small = pd.DataFrame({"run": ["s0", "s1"], "params": [1e8, 3e8],
                          "tokens": [1e19 / 6e8, 1e19 / 18e8], "flops": 1e19,
                          "loss": [3.1, 3.0]})
    return pd.concat([small, good], ignore_index=True)


def test_one_qualifying_budget_is_analysed_alone_naming_the_others():
    res = isoflop_table(_exact_budget_plus_two_sizes(), n_boot=200, seed=0)
    assert res.params_law is None and res.tokens_law is None and len(res.budgets) == 2
    small, good = res.budgets
    assert not small.used and "too few sizes" in small.flags and good.used
    assert good.params == pytest.approx(1e9, rel=1e-9)
    assert good.tokens == pytest.approx(6e19 / 6e9, rel=1e-9)
    note = res.notes[0]
    assert "one of 2 compute budgets has an interior optimum (C=6e+19)" in note
    assert "left out: C=1e+19 (too few sizes)" in note
    text = res.report()
    assert "vertex     N* = 1e+09 params" in text and "no power law (one usable budget" in text
    with pytest.raises(FitError, match=r"one \(C=6e\+19, vertex N\* = 1e\+09"):
        res.optimal(1e21)


def test_cli_isoflop_one_qualifying_budget(tmp_path, capsys):
    from delphi.cli import main

    path = tmp_path / "mix.csv"
    _exact_budget_plus_two_sizes().to_csv(path, index=False)
    assert main(["isoflop", str(path), "--n-boot", "100"]) == 0
    out = capsys.readouterr().out
    assert "vertex     N* = 1e+09 params" in out and "C=1e+19 (too few sizes)" in out
    assert main(["isoflop", str(path), "--n-boot", "100", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["params_law"] is None and [b["used"] for b in d["budgets"]] == [False, True]


# ---------------------------------------- exponent uncertainty and valid draws (review item 20)
def test_power_law_shows_the_bootstrap_interval_and_valid_draws_not_a_zero_se():
    # Three noiseless budgets: the vertices lie on a line, so the residual s.e. of the
    # exponent is ~0 and "+- 0.000" next to a bootstrap interval was meaningless.
    t = grid(BUDGETS[:3], 9, 0.3, [0.0, 0.0, 0.0])
    t["loss"] = t["loss"] + 0.002 * np.random.default_rng(5).standard_normal(len(t))
    res = isoflop_table(t, n_boot=300, seed=2)
    law = res.params_law
    assert law.exponent_interval is not None and law.n_draws == 300
    # Draw k of every budget is fitted together: the joint draws are the fewest valid ones.
    assert law.n_valid == min(b.n_valid for b in res.budgets if b.used)
    line = law.report()
    assert "+-" not in line and f"from {law.n_valid} of 300 draws" in line
    assert res.to_dict()["params_law"]["n_valid_draws"] == law.n_valid
    plain = isoflop_table(t, bootstrap="none").params_law.report()
    assert plain.count("+- ") == 1 and "1 dof" in plain and "+- 0.000" not in plain


def test_one_size_budget_error_says_size_not_sizes():
    t = pd.DataFrame({"run": ["a"], "params": [1e9], "tokens": [2e10], "flops": [1.2e20],
                      "loss": [2.5]})
    with pytest.raises(FitError, match=r"\(C=1\.2e\+20, 1 size\)"):
        isoflop_table(t, bootstrap="none")


def test_three_sizes_per_budget_give_no_exponent_interval_not_a_zero_width_one():
    # F18: with 3 sizes, the only resample a parabola can use is the original sample, so all
    # valid draws equal the point vertex and the exponent "interval" had zero width.
    t = grid(BUDGETS[:4], 3, 0.6, [0.0, 0.1, -0.1, 0.05])
    t["loss"] = t["loss"] + 0.002 * np.random.default_rng(3).standard_normal(len(t))
    res = isoflop_table(t, n_boot=100, seed=1)
    for law in (res.params_law, res.tokens_law):
        assert law.exponent_interval is None and law.level is None
        assert "original sample" in law.no_interval_reason
        assert "no bootstrap interval: in every used budget" in law.report()
        assert law.to_dict()["no_interval_reason"] == law.no_interval_reason
    assert all(b.params_interval is None for b in res.budgets)
    assert any("they all give the same vertex" in w for w in res.warnings)
    one = isoflop_table(t[t["flops"] == BUDGETS[0]], n_boot=100, seed=1).report()
    assert "params (no interval), D*" in one and "interval )" not in one
    # The seed-noise bootstrap varies the losses themselves: a real, non-zero interval.
    noisy = isoflop_table(t, n_boot=100, seed=1, bootstrap="noise", noise=0.002).params_law
    lo, hi = noisy.exponent_interval
    assert lo < noisy.exponent < hi and noisy.no_interval_reason == ""
