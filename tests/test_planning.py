"""Compute-optimal allocation (Hoffmann et al. 2022, Eq. 4) and ladder planning."""

from __future__ import annotations

import argparse
import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize_scalar

from delphi.errors import FitError, LadderError, LawError, TargetError
from delphi.analyses.optimal import Allocation, chinchilla_optimum, draws_to_arrays, optimal_allocation
from delphi.analyses.planning import (CSV_COLUMNS, LadderPlan, layers_for_width, optimum_from_allocation,
                             plan_ladder, transformer_params, width_for_params)
from delphi.rules import adamh_rule

# Hoffmann et al. 2022's printed Approach-3 values and Besiroglu et al. 2024's refit.
HOFFMANN = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
BESIROGLU = {"E": 1.8172, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658}
CHINCHILLA_FLOPS = 5.76e23   # Chinchilla's (and Gopher's) training budget, Hoffmann et al. 2022


# ------------------------------------------------------------------------------- optimal
@pytest.mark.parametrize("params", [HOFFMANN, BESIROGLU,
                                    {"A": 50.0, "B": 5000.0, "alpha": 0.2, "beta": 0.5}])
def test_eq4_is_the_minimum_of_the_law_on_the_isoflop(params):
    c = 1e21
    n, d = chinchilla_optimum(params, c)
    assert 6 * n * d == pytest.approx(c, rel=1e-12)

    def loss(log_n):
        nn = math.exp(log_n)
        return params["A"] / nn ** params["alpha"] + params["B"] / (c / 6 / nn) ** params["beta"]

    best = minimize_scalar(loss, bounds=(math.log(1e3), math.log(1e15)), method="bounded",
                           options={"xatol": 1e-10})
    assert float(n) == pytest.approx(math.exp(best.x), rel=1e-4)


def test_chinchilla_optimum_is_vectorised_and_checks_inputs():
    n, d = chinchilla_optimum(HOFFMANN, np.array([1e20, 1e22]))
    assert n.shape == (2,)
    assert n[1] / n[0] == pytest.approx(100 ** (0.28 / 0.62))
    with pytest.raises(LawError, match="missing B"):
        chinchilla_optimum({"A": 1.0, "alpha": 0.3, "beta": 0.3}, 1e20)
    with pytest.raises(FitError, match="A = 0"):
        chinchilla_optimum({**HOFFMANN, "A": 0.0}, 1e20)
    with pytest.raises(TargetError):
        chinchilla_optimum(HOFFMANN, -1.0)


def test_allocation_record():
    a = optimal_allocation(BESIROGLU, CHINCHILLA_FLOPS)
    assert isinstance(a, Allocation)
    assert a.a == pytest.approx(0.3658 / (0.3478 + 0.3658))
    assert a.params == pytest.approx(a.G * (CHINCHILLA_FLOPS / 6) ** a.a)
    assert a.tokens_per_param == pytest.approx(a.tokens / a.params)
    assert a.intervals is None and a.n_draws == 0
    d = a.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["law_params"]["E"] == 1.8172
    assert "Eq. 4" in a.report() and "tokens per parameter" in a.report()
    with pytest.raises(TargetError):
        optimal_allocation(BESIROGLU, 0.0)


def test_allocation_from_synthetic_draws():
    # delphi.uncertainty will hand over bootstrap draws of (A, B, alpha, beta): each draw
    # gives its own allocation, summarised by percentile intervals.
    rng = np.random.default_rng(0)
    k = 400
    draws = [{"E": 1.8, "A": BESIROGLU["A"] * math.exp(0.1 * rng.standard_normal()),
              "B": BESIROGLU["B"] * math.exp(0.1 * rng.standard_normal()),
              "alpha": BESIROGLU["alpha"] + 0.01 * rng.standard_normal(),
              "beta": BESIROGLU["beta"] + 0.01 * rng.standard_normal()} for _ in range(k)]
    draws[0]["alpha"] = -0.1                        # invalid draws are left out and counted
    draws[1]["B"] = float("nan")
    a = optimal_allocation(BESIROGLU, CHINCHILLA_FLOPS, draws=draws, level=0.9)
    assert a.n_draws == k and a.n_invalid == 2
    assert any("2 of 400" in w for w in a.warnings)
    for key in ("params", "tokens", "tokens_per_param", "a"):
        lo, hi = a.intervals[key]
        assert lo < a.medians[key] < hi
    assert a.intervals["params"][0] < a.params < a.intervals["params"][1]
    # the interval is the percentile of the per-draw allocations
    valid = draws[2:]
    per_draw = np.array([chinchilla_optimum(p, CHINCHILLA_FLOPS)[0] for p in valid])
    assert a.intervals["params"] == pytest.approx(tuple(np.quantile(per_draw, [0.05, 0.95])))
    # the same draws as a DataFrame or a mapping of arrays give the same answer
    frame = pd.DataFrame(valid)
    b = optimal_allocation(BESIROGLU, CHINCHILLA_FLOPS, draws=frame)
    c = optimal_allocation(BESIROGLU, CHINCHILLA_FLOPS, draws=draws_to_arrays(valid))
    assert b.intervals == c.intervals
    expected = optimal_allocation(BESIROGLU, CHINCHILLA_FLOPS, draws=valid).intervals
    assert set(b.intervals) == set(expected)
    for key, pair in expected.items():  # pytest.approx does not nest dicts of tuples
        assert b.intervals[key] == pytest.approx(pair)
    assert "90% interval" in a.report()
    json.dumps(a.to_dict(), allow_nan=False)
    with pytest.raises(FitError, match="lack"):
        optimal_allocation(BESIROGLU, 1e22, draws=[{"A": 1.0}, {"A": 2.0}])
    with pytest.raises(FitError, match="level"):
        optimal_allocation(BESIROGLU, 1e22, draws=valid, level=1.5)


def test_allocation_needs_a_chinchilla_fit():
    from delphi.fitting import fit_arrays

    c = np.logspace(18, 21, 8)
    f = fit_arrays("power", {"flops": c}, 1.7 + 30 * c ** -0.1)
    with pytest.raises(LawError, match="Chinchilla"):
        optimal_allocation(f, 1e22)


def test_epoch_chinchilla_optimal_allocation(data_dir):
    # Golden check. Source: Besiroglu et al. 2024 (arXiv 2404.10102) report that their refit
    # of Hoffmann et al.'s Approach 3 is compatible with Approaches 1 and 2, i.e. with
    # Chinchilla itself: 70B parameters on 1.4T tokens at 5.76e23 FLOPs, about 20 tokens per
    # parameter. Tolerance: 15..25 tokens per parameter (20 +- 25%: the extracted losses have
    # ~1e-2 precision and the ratio moves with (b - a) ln C), N_opt within 1.5x of 70B. The
    # printed (rounded) Hoffmann et al. values give ~93 tokens per parameter and fail it.
    from delphi.analyses.optimal import compute_optimal
    from delphi.readers import load_ladder

    a = compute_optimal(load_ladder("epoch-chinchilla"), CHINCHILLA_FLOPS)
    assert 15 <= a.tokens_per_param <= 25, a.tokens_per_param
    assert 70e9 / 1.5 <= a.params <= 70e9 * 1.5
    assert a.a == pytest.approx(0.514, abs=0.02)          # beta / (alpha + beta) of the refit
    assert a.source.endswith("epoch-chinchilla") and a.max_flops > 0
    assert not 15 <= optimal_allocation(HOFFMANN, CHINCHILLA_FLOPS).tokens_per_param <= 25


# ------------------------------------------------------------------------------- model sizes
def test_transformer_parameter_count():
    assert layers_for_width(512) == 5 and layers_for_width(4096) == 41
    assert layers_for_width(128) == 1
    assert transformer_params(1024) == 12 * 10 * 1024 ** 2
    w = width_for_params(1e9)
    assert w % 128 == 0
    assert transformer_params(w) == pytest.approx(1e9, rel=0.15)
    with pytest.raises(LadderError):
        width_for_params(0)


# ------------------------------------------------------------------------------- planning
def test_plan_budgets_compute_and_extrapolation():
    target = 1e23
    plan = plan_ladder(target, fraction=0.01, budgets=7, sizes_per_budget=5)
    assert isinstance(plan, LadderPlan)
    b = np.array(plan.budgets)
    assert len(b) == 7 and np.all(np.diff(b) > 0)
    assert b[-1] / b[0] == pytest.approx(100, rel=0.1)               # span, as 3e18..3e20
    assert np.diff(np.log(b)) == pytest.approx(np.full(6, math.log(100) / 6), abs=0.06)
    assert plan.share == pytest.approx(0.01, rel=0.05)               # budgets are rounded
    assert plan.total_flops == pytest.approx(sum(r.flops for r in plan.runs))
    assert plan.extrapolation == pytest.approx(target / b[-1])
    assert len(plan.runs) == 35


def test_plan_sizes_are_centred_on_the_prior_and_on_the_grid():
    plan = plan_ladder(1e23, tokens_per_param=20)
    for c, centre in zip(plan.budgets, plan.centres):
        assert centre == pytest.approx(math.sqrt(c / 120))          # D = 20 N, C = 6 N D
        runs = [r for r in plan.runs if r.budget_flops == c]
        geo = math.exp(np.mean([math.log(r.params) for r in runs]))
        assert geo == pytest.approx(centre, rel=0.5)
        sizes = [r.params for r in runs]
        assert max(sizes) / min(sizes) == pytest.approx(10, rel=0.6)
        for r in runs:
            assert r.width % 128 == 0 and r.layers == layers_for_width(r.width)
            assert r.params == 12 * r.layers * r.width ** 2
            assert 6 * r.params * r.tokens == pytest.approx(c, rel=1e-6)
            s = adamh_rule(r.tokens)
            assert (r.batch_size, r.peak_lr, r.steps) == (s.batch_tokens, s.lr, s.steps)


def test_plan_cap_on_tokens_per_param_drops_runs():
    free = plan_ladder(1e23)
    capped = plan_ladder(1e23, max_tokens_per_param=100)
    dropped = [r for r in free.runs if r.tokens_per_param > 100]
    assert dropped
    assert len(capped.runs) == len(free.runs) - len(dropped)
    assert all(r.tokens_per_param <= 100 for r in capped.runs)
    assert sum("exceeds the cap" in w for w in capped.warnings) == len(dropped)
    assert capped.to_dict()["max_tokens_per_param"] == 100


def test_plan_from_a_fitted_optimum():
    alloc = optimal_allocation(BESIROGLU, 1e23)
    opt = optimum_from_allocation(alloc.G, alloc.a)
    plan = plan_ladder(1e23, optimum=opt, prior="Besiroglu et al. 2024")
    assert plan.prior == "Besiroglu et al. 2024"
    assert plan.centres[-1] == pytest.approx(chinchilla_optimum(BESIROGLU, plan.budgets[-1])[0])
    with pytest.raises(LadderError, match="N\\*\\(C\\) estimate"):
        plan_ladder(1e23, optimum=lambda c: -1.0)


def test_plan_csv_is_tidy_and_ready_to_run(tmp_path):
    plan = plan_ladder(3e22, budgets=4, sizes_per_budget=3)
    path = plan.to_csv(tmp_path / "ladder.csv")
    t = pd.read_csv(path)
    assert list(t.columns[:len(CSV_COLUMNS)]) == list(CSV_COLUMNS)
    assert len(t) == len(plan.runs) == 12
    assert t["run"].is_unique
    assert (t["tokens"] / t["params"]).to_numpy() == pytest.approx(
        t["tokens_per_param"].to_numpy(), rel=1e-5)
    assert np.all(t["steps"] * t["batch_size"] >= t["tokens"])
    json.dumps(plan.to_dict(), allow_nan=False)
    text = plan.report()
    assert "of the target" in text and "extrapol" in text and plan.runs[0].run in text


def test_plan_rejects_bad_settings():
    with pytest.raises(TargetError):
        plan_ladder(-1.0)
    with pytest.raises(LadderError, match="fraction"):
        plan_ladder(1e23, fraction=1.5)
    with pytest.raises(LadderError, match="unknown hyperparameter rule"):
        plan_ladder(1e23, rule="muP")
    with pytest.raises(LadderError, match="budgets"):
        plan_ladder(1e23, budgets=0)
    assert any("at least 3" in w for w in plan_ladder(1e23, sizes_per_budget=2).warnings)


def test_small_budgets_widen_onto_the_grid():
    plan = plan_ladder(1e19, fraction=0.05, budgets=3, sizes_per_budget=5, spread=2)
    assert any("consecutive widths" in w for w in plan.warnings)
    for c in plan.budgets:
        assert len({r.width for r in plan.runs if r.budget_flops == c}) == 5


# ------------------------------------------------------------------------------- CLI
def _run_cli(argv, capsys):
    from delphi.cli.analyses import add_commands as add_analysis_commands

    parser = argparse.ArgumentParser(prog="delphi")
    handlers = add_analysis_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code = handlers[args.command](args)
    return code, capsys.readouterr().out


def test_cli_plan_table_csv_and_json(tmp_path, capsys):
    path = tmp_path / "plan.csv"
    code, out = _run_cli(["plan", "--target-flops", "1e22", "--budgets", "3",
                          "--sizes-per-budget", "3", "--max-tokens-per-param", "250",
                          "--csv", str(path)], capsys)
    assert code == 0 and "ladder plan" in out and str(path) in out
    assert list(pd.read_csv(path).columns[:len(CSV_COLUMNS)]) == list(CSV_COLUMNS)
    code, out = _run_cli(["plan", "--target-flops", "1e22", "--fraction", "0.02", "--json"],
                         capsys)
    d = json.loads(out)
    assert d["share"] == pytest.approx(0.02, rel=0.05) and d["csv"] is None
    assert d["extrapolation"] == pytest.approx(1e22 / max(d["budgets"]))


def test_cli_optimal_with_draws(tmp_path, capsys, data_dir):
    draws = tmp_path / "draws.csv"
    rng = np.random.default_rng(1)
    pd.DataFrame({"A": 482 * np.exp(0.05 * rng.standard_normal(50)),
                  "B": 2085 * np.exp(0.05 * rng.standard_normal(50)),
                  "alpha": 0.348 + 0.005 * rng.standard_normal(50),
                  "beta": 0.366 + 0.005 * rng.standard_normal(50)}).to_csv(draws, index=False)
    code, out = _run_cli(["optimal", "epoch-chinchilla", "--target-flops", "5.76e23",
                          "--draws", str(draws), "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["n_draws"] == 50 and d["intervals"]["params"][0] > 0
    assert 15 <= d["tokens_per_param"] <= 25
    from delphi.cli.analyses import add_commands as add_analysis_commands  # noqa: F401  (import is cheap)
    parser = argparse.ArgumentParser()
    handlers = add_analysis_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["optimal", "epoch-chinchilla"])
    from delphi.presentation.cli.output import UsageError
    with pytest.raises(UsageError, match="--target-flops"):      # usage, exit 2 (h113)
        handlers["optimal"](args)


def test_an_implausible_target_compute_is_refused():
    # Same plausible range as a ladder's flops column (1..1e40 FLOPs).
    from delphi.errors import TargetError
    from delphi.analyses.planning import plan_ladder

    with pytest.raises(TargetError, match=r"outside 1\.\.1e\+40"):
        plan_ladder(1e308)
    assert plan_ladder(1e40).target_flops == 1e40


def test_optimal_allocation_takes_bootstrap_draws_as_returned():
    # delphi.bootstrap returns BootstrapDraws; its .params is what draws_to_arrays reads.
    from delphi.uncertainty import BootstrapDraws

    params = [{"A": 482.0, "B": 2085.0, "alpha": 0.348, "beta": 0.366},
              {"A": 470.0, "B": 2100.0, "alpha": 0.346, "beta": 0.368}]
    draws = BootstrapDraws(params=params, n_failed=0, unit="run", seed=0)
    arrays = draws_to_arrays(draws)
    assert arrays["A"].tolist() == [482.0, 470.0] and arrays["beta"].tolist() == [0.366, 0.368]
    via_draws = optimal_allocation(BESIROGLU, CHINCHILLA_FLOPS, draws=draws)
    via_list = optimal_allocation(BESIROGLU, CHINCHILLA_FLOPS, draws=params)
    assert via_draws.intervals == via_list.intervals


def test_cli_plan_csv_dash_writes_standard_output(tmp_path, capsys, monkeypatch):
    # a pipe user's: `delphi plan --csv - | ...` wrote a file named '-' and piped the report
    monkeypatch.chdir(tmp_path)
    code, out = _run_cli(["plan", "--target-flops", "1e22", "--budgets", "3",
                          "--sizes-per-budget", "3", "--csv", "-"], capsys)
    assert code == 0 and not (tmp_path / "-").exists()
    frame = pd.read_csv(io.StringIO(out))
    assert list(frame.columns[:len(CSV_COLUMNS)]) == list(CSV_COLUMNS) and len(frame) == 9
    from delphi.cli.output import UsageError
    with pytest.raises(UsageError, match="--csv - writes the runs to standard output"):
        _run_cli(["plan", "--target-flops", "1e22", "--csv", "-", "--json"], capsys)


def test_cli_optimal_bootstraps_an_interval_by_default_or_says_why_not(capsys, data_dir):
    # F17: `delphi optimal` printed N_opt, D_opt with no interval and no reason unless the
    # user brought a --draws file; usage.md lists optimal among the commands with intervals.
    code, out = _run_cli(["optimal", "epoch-chinchilla", "--target-flops", "5.76e23",
                          "--n-boot", "40", "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["level"] == 0.9 and d["n_draws"] == 40
    for key in ("params", "tokens", "tokens_per_param", "a"):
        lo, hi = d["intervals"][key]
        point = d["allocation_law"]["a"] if key == "a" else d[key]
        assert lo < hi and lo <= point * 1.05 and hi >= point / 1.05
    assert d["interval_source"].startswith("bootstrap: 40 refits") and d["no_interval_reason"] is None
    code, out = _run_cli(["optimal", "epoch-chinchilla", "--target-flops", "5.76e23",
                          "--n-boot", "0"], capsys)
    assert "90% interval" not in out and "interval   none: bootstrap off" in out
    assert "--n-boot 0" in out
    with pytest.raises(FitError, match="must be 0 .no bootstrap. or 20"):
        _run_cli(["optimal", "epoch-chinchilla", "--target-flops", "1e23", "--n-boot", "5"],
                 capsys)


def test_optimal_allocation_says_why_there_is_no_interval():
    bare = optimal_allocation(BESIROGLU, CHINCHILLA_FLOPS)
    assert bare.intervals is None and "no parameter draws given" in bare.no_interval_reason
    assert bare.to_dict()["no_interval_reason"] == bare.no_interval_reason
    assert "interval   none: no parameter draws" in bare.report()
    # identical draws (an exactly fitted law): a zero-width interval would be an artefact
    same = optimal_allocation(BESIROGLU, CHINCHILLA_FLOPS, draws=[BESIROGLU] * 5)
    assert same.intervals is None and same.level is None
    assert "all 5 valid draws give the same N_opt" in same.no_interval_reason


def test_optimal_below_the_ladder_says_it_is_extrapolated_downwards():
    # h120's F21: 1e6x below the smallest run, optimal printed N_opt with no warning at all
    # (predict warns at the same target).
    import warnings as _w
    from delphi.analyses.optimal import compute_optimal
    from delphi.readers import load_ladder

    lad = load_ladder(str(Path(__file__).parents[1] / "examples" / "my_runs.csv"))
    with _w.catch_warnings():
        _w.simplefilter("ignore")
        low = compute_optimal(lad, 3e12, n_boot=0)
        inside = compute_optimal(lad, 1e19, n_boot=0)
    assert any("below the smallest fitted run" in w and "extrapolated downwards" in w
               for w in low.warnings), low.warnings
    assert not any("below the smallest fitted run" in w for w in inside.warnings)
