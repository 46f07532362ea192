"""Issue 25: which run to train next (delphi.suggest_runs, `delphi suggest`) and the score of a
proposed design (delphi.score_design, `delphi plan --score`).

A simulated Chinchilla ladder with known truth; the brute-force study refits the ladder with
each candidate added at its true loss plus noise and bootstraps it, as a user would."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.analyses.design import read_candidates, score_design, suggest_runs
from delphi.errors import LadderError

TRUTH = dict(E=1.7, A=400.0, B=1500.0, alpha=0.34, beta=0.30)
NOISE = 0.005
TARGET = {"params": 1e9, "tokens": 2e11}       # an over-trained target (D/N = 200)


def _loss(n, d):
    return TRUTH["E"] + TRUTH["A"] / n ** TRUTH["alpha"] + TRUTH["B"] / d ** TRUTH["beta"]


def _frame():
    rng = np.random.default_rng(1)
    rows = []
    for c in (1e17, 3e17, 1e18, 3e18):
        for n in np.geomspace(np.sqrt(c / 120) / 3, np.sqrt(c / 120) * 3, 5):
            d = c / (6 * n)
            rows.append(dict(run=f"C{c:.0e}-N{n:.3g}", params=n, tokens=d, flops=6 * n * d,
                             loss=_loss(n, d) * np.exp(rng.normal(0, NOISE))))
    return pd.DataFrame(rows)


#: Candidates of one cost (1e18 FLOPs) at four tokens per parameter, all below the largest
#: fitted compute (so r does not move and the ranking is the parameter spread's alone).
CANDIDATES = pd.DataFrame([dict(run=f"r{r}", params=np.sqrt(1e18 / (6 * r)),
                                tokens=np.sqrt(1e18 / (6 * r)) * r) for r in (2, 20, 200, 2000)])


@pytest.fixture(scope="module")
def ladder():
    return delphi.Ladder(_frame(), name="sim")


@pytest.fixture(scope="module")
def forecast(ladder):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return delphi.predict(ladder, TARGET, "chinchilla", interval="reference", n_boot=50,
                              off_trend=False)


def _nd(c, r):
    n = np.sqrt(c / (6 * r))
    return n, n * r


#: Candidates: a repeat of a mid-ladder run, a run at twice the largest fitted compute, an
#: over-trained run (D/N = 2000) and a small run. Costs differ: ranked per FLOP.
MIXED = pd.DataFrame([dict(run=k, params=_nd(c, r)[0], tokens=_nd(c, r)[1])
                      for k, c, r in [("dup", 3e18, 20), ("up", 6e18, 20),
                                      ("over", 1e18, 2000), ("small", 1e17, 20)]])


def test_top_suggestion_is_what_brute_force_refits_say(ladder, forecast):
    fast = suggest_runs(ladder, TARGET, "chinchilla", candidates=MIXED, budget=1e19,
                        forecast=forecast)
    slow = suggest_runs(ladder, TARGET, "chinchilla", candidates=MIXED, budget=1e19,
                        forecast=forecast, method="refit", n_refit=48)
    # Brute force: add each candidate at its true loss plus noise (two draws), forecast again
    # with delphi.predict (refit, bootstrap, reference interval) and measure the width.
    eps = np.random.default_rng(7).normal(0, NOISE, 2)
    base, w0 = _frame(), forecast.upper - forecast.lower
    per_flop = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cand in MIXED.itertuples():
            widths = []
            for e in eps:
                row = dict(run=cand.run, params=cand.params, tokens=cand.tokens,
                           flops=6 * cand.params * cand.tokens,
                           loss=_loss(cand.params, cand.tokens) * np.exp(e))
                lad = delphi.Ladder(pd.concat([base, pd.DataFrame([row])]), name="sim")
                f = delphi.predict(lad, TARGET, "chinchilla", interval="reference", n_boot=50,
                                   off_trend=False, identify=False)
                # The width at the current forecast's level: the interval is multiplicative
                # (+-q in log loss), so a draw that moves the point forecast moves its absolute
                # width with it; that is the candidate's unknown loss, not information it adds
                # (suggest holds the point forecast, so compare like with like).
                widths.append((f.upper - f.lower) / f.loss * forecast.loss)
            per_flop[cand.run] = (w0 - np.mean(widths)) / (6 * cand.params * cand.tokens)
    brute = max(per_flop, key=per_flop.get)
    assert brute == "up"            # the study's answer, for the record
    assert fast.best.run.name == brute and slow.best.run.name == brute
    assert fast.best.reduces == "extrapolation"
    # The fast path's expected width for it agrees with the refits' and the brute force's.
    assert fast.best.width_after == pytest.approx(slow.best.width_after, rel=0.01)
    by_refit = {c.run.name: c.param_sd_after for c in slow.candidates}
    for c in fast.candidates:      # the parameter term, candidate by candidate
        assert c.param_sd_after == pytest.approx(by_refit[c.run.name], rel=0.05), c.run.name
    assert fast.best.reduction_per_flop == pytest.approx(per_flop["up"], rel=0.25)
    # The current width is the forecast's interval, recomputed from its terms.
    assert fast.width == pytest.approx(w0, rel=1e-6)


def test_greedy_batch_and_extrapolation(ladder, forecast):
    big = pd.DataFrame([dict(run="big", params=3e8, tokens=3e8 * 20),      # 1.08e19 FLOPs
                        dict(run="small", params=1e7, tokens=2e10)])
    out = suggest_runs(ladder, TARGET, "chinchilla", candidates=big, budget=1.2e19, n=2,
                       forecast=forecast)
    names = [s.run.name for s in out.candidates]
    assert sorted(names) == ["big", "small"]        # both fit in the budget, in some order
    by = {s.run.name: s for s in out.candidates}
    assert by["big"].reduces == "extrapolation" and by["big"].ratio_after < out.ratio
    # each pick is conditioned on the one before
    assert out.candidates[1].width_before == pytest.approx(out.candidates[0].width_after)
    # a run picked twice is said to be extra seeds of it (a fresh user's finding)
    again = suggest_runs(ladder, TARGET, "chinchilla", candidates=big, budget=2.2e19, n=3,
                         forecast=forecast)
    names3 = [s.run.name for s in again.candidates]
    assert sorted(names3) == ["big", "small", "small"]   # small, again: its second seed
    assert any("picked more than once: small x2" in n and "extra seeds" in n
               for n in again.notes)
    once = suggest_runs(ladder, TARGET, "chinchilla", candidates=big, budget=2.2e19, n=3,
                        forecast=forecast, repeats=False)
    assert len({s.run.name for s in once.candidates}) == len(once.candidates)


def test_the_default_grid_stops_below_the_target(ladder, forecast):
    # Before (a fresh user): with a budget far beyond the target, the grid's first pick was a
    # run 160x the target's compute.
    out = suggest_runs(ladder, TARGET, "chinchilla", budget=1e30, forecast=forecast)
    c_target = forecast.target.flops
    assert out.candidates and max(s.run.flops for s in out.candidates) <= c_target / 2 * 1.01
    assert any("stops at half the target's compute" in n for n in out.notes)
    with pytest.raises(delphi.LadderError, match="beyond any training run"):
        suggest_runs(ladder, TARGET, "chinchilla", budget=1e41, forecast=forecast)


def test_candidate_beyond_budget_is_refused(ladder, forecast):
    with pytest.raises(LadderError, match=r"candidate 'r2' \(row 0.*beyond the budget"):
        suggest_runs(ladder, TARGET, "chinchilla", candidates=CANDIDATES, budget=5e17,
                     forecast=forecast)


@pytest.mark.parametrize("frame, message", [
    (pd.DataFrame({"params": [1e8], "D": [1e9]}), r"missing column\(s\) tokens"),
    (pd.DataFrame({"params": [1e8, -3], "tokens": [1e9, 1e9]}), r"row 1, column 'params'"),
    (pd.DataFrame({"params": [1e8], "tokens": ["many"]}), r"row 0, column 'tokens'"),
    # an empty cell used to be reported as "nan is not a positive finite number"
    (pd.DataFrame({"params": [1e8, None], "tokens": [1e9, 2e9]}),
     r"row 1, column 'params' is empty; a candidate needs a positive finite number"),
    (pd.DataFrame({"params": [1e8], "tokens": [1e9], "flops": [1e20]}),
     r"row 0, column 'flops'.*disagrees"),
    # a fresh user's: a typo'd optional column and a loss were accepted silently
    (pd.DataFrame({"params": [1e8], "tokens": [1e9], "peak_rl": [1e-3]}),
     r"column\(s\) 'peak_rl' \(did you mean 'peak_lr'\?\)"),
    (pd.DataFrame({"params": [1e8], "tokens": [1e9], "loss": [3.1]}),
     r"a 'loss' column: candidates are runs not trained yet"),
])
def test_bad_candidate_files_name_row_and_column(tmp_path, frame, message):
    path = tmp_path / "next.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(LadderError, match=message):
        read_candidates(path)


def test_every_bad_candidate_row_is_named_in_one_error(tmp_path):
    # a fresh user's: only the first bad row was reported, so a file took a pass per row
    path = tmp_path / "next.csv"
    pd.DataFrame({"params": [1e8, -3, 2e8, None], "tokens": [1e9, 1e9, "x", 2e9]}).to_csv(
        path, index=False)
    with pytest.raises(LadderError, match=r"3 bad candidate rows \(rows count the records from 0: row 0 is the first "
                                          r"data row \(line 2 of a CSV.*\):\n  row 1, column 'params'"
                                          r".*\n  row 2, column 'tokens'.*\n  row 3, column "
                                          r"'params' is empty"):
        read_candidates(path)
    many = pd.DataFrame({"params": [-1.0] * 12, "tokens": [1e9] * 12})
    with pytest.raises(LadderError, match=r"12 bad candidate rows(.|\n)*row 9, column "
                                          r"'params'.*\n  \.\.\. and 2 more bad row\(s\)$"):
        read_candidates(many)


def test_a_semicolon_separated_candidate_file_is_named_as_such(tmp_path):
    # a fresh user's: a spreadsheet export with ';' was told only "missing column(s)"
    path = tmp_path / "next.csv"
    path.write_text("run;params;tokens\nr1;1e8;2e9\n")
    with pytest.raises(LadderError, match=r"missing column\(s\) params, tokens.*columns are "
                                          r"run;params;tokens; its fields look separated by "
                                          r"semicolons: save it comma-separated"):
        read_candidates(path)


def test_score_design_is_deterministic_by_seed():
    design = _frame()[["params", "tokens"]]
    prior = {k: v * (1.1 if k in ("A", "B") else 1.0) for k, v in TRUTH.items()}
    target = {"params": 1e9, "tokens": 2e10}
    a = score_design(design, target, prior, method="refit", n_boot=40, seed=3)
    b = score_design(design, target, prior, method="refit", n_boot=40, seed=3)
    c = score_design(design, target, prior, method="refit", n_boot=40, seed=4)
    assert a.width == b.width and a.param_sd == b.param_sd        # bit-identical
    assert c.param_sd != a.param_sd                              # the seed is used
    fisher = score_design(design, target, prior)
    assert fisher.param_sd == pytest.approx(a.param_sd, rel=0.35)  # linearised vs refits
    # a prior the law cannot take (a negative exponent: loss growing with scale) is refused
    with pytest.raises(delphi.LawError, match="alpha = -0.3 is outside its range"):
        score_design(design, target, {**prior, "alpha": -0.3})
    # a design with a larger top budget extrapolates less: a narrower expected interval
    more = pd.concat([design, pd.DataFrame({"params": [3e8], "tokens": [6e9]})])
    assert score_design(more, target, prior).width < fisher.width


def test_cli_suggest_json_and_plan_score(tmp_path, capsys):
    from delphi.presentation.cli.main import main
    runs = tmp_path / "runs.csv"
    _frame().to_csv(runs, index=False)
    cands = tmp_path / "next.csv"
    CANDIDATES.to_csv(cands, index=False)
    code = main(["suggest", str(runs), "--target-params", "1e9", "--target-tokens", "2e11",
                 "--law", "chinchilla", "--candidates", str(cands), "--budget", "2e18",
                 "--interval", "reference", "--n-boot", "20", "--json", "-q"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert {"target", "width", "candidates"} <= set(out)
    assert len(out["candidates"]) == 4
    first = out["candidates"][0]
    assert {"params", "tokens", "flops", "peak_lr", "width_after",
            "reduction_per_flop"} <= set(first)
    per = [c["reduction_per_flop"] for c in out["candidates"]]
    assert per == sorted(per, reverse=True)                         # best first
    code = main(["suggest", str(runs), "--target-params", "1e9", "--target-tokens", "2e11",
                 "--law", "chinchilla", "--candidates", str(cands), "--budget", "1e17",
                 "--interval", "reference", "--n-boot", "20", "-q"])
    assert code == 1 and "beyond the budget" in capsys.readouterr().err
    design = tmp_path / "design.csv"
    _frame()[["params", "tokens"]].to_csv(design, index=False)
    code = main(["plan", "--target-flops", "1.2e21", "--target-params", "1e9",
                 "--target-tokens", "2e11", "--score", str(design), "--prior-params",
                 *[f"{k}={v}" for k, v in TRUTH.items()], "--json"])
    assert code == 0
    score = json.loads(capsys.readouterr().out)
    assert score["n_runs"] == 20 and score["width"] > 0 and score["n_budgets"] == 4


# ---- a new user's findings (2026-12-03)


def test_candidates_at_or_above_the_target_are_left_out_and_said(ladder, forecast):
    # Before: a candidate larger than the target was ranked first, without a word.
    c_target = forecast.target.flops
    n, d = _nd(2 * c_target, 200)
    cands = pd.concat([MIXED, pd.DataFrame([dict(run="huge", params=n, tokens=d)])])
    out = suggest_runs(ladder, TARGET, "chinchilla", candidates=cands, budget=1e30,
                       forecast=forecast)
    assert "huge" not in {s.run.name for s in out.candidates}
    assert any("left out 1 candidate costing at least the target's compute" in x
               for x in out.notes)
    with pytest.raises(LadderError, match="every candidate costs at least the target's"):
        suggest_runs(ladder, TARGET, "chinchilla", candidates=cands.iloc[-1:], budget=1e30,
                     forecast=forecast)


def test_a_default_budget_in_a_refusal_is_called_the_default(ladder, forecast):
    n, d = _nd(1e21, 20)
    cands = pd.DataFrame([dict(run="big", params=n, tokens=d)])
    with pytest.raises(LadderError, match=r"beyond the budget of .* \(the default: the fitted "
                                          r"runs' total compute\)"):
        suggest_runs(ladder, TARGET, "chinchilla", candidates=cands, forecast=forecast)


def test_no_parameter_spread_and_no_candidate_above_the_ladder_are_said(capsys):
    # Before: marin-moe-535b (3 runs, E fixed) ranked 6 candidates at reduction 0, each said
    # to reduce "A" or "alpha", param sd 0.00%, and no note.
    from delphi.cli import main
    assert main(["suggest", "marin-moe-535b"]) == 0
    out = capsys.readouterr().out
    assert "no parameter spread (param sd 0" in out
    assert "no candidate narrows the interval: none is above the largest fitted compute" in out
    # the default budget (1.58e21) is above the largest run (1.38e21) already: the note names
    # the budget the doubling grid needs to reach above it (was "give --budget C above the
    # largest fitted compute")
    assert "a budget of 1.7e+21 FLOPs or more (--budget C) reaches above the largest" in out
    assert "give --budget C above the largest fitted compute" not in out
    rows = [ln for ln in out.splitlines() if ln[:4].strip().isdigit()]
    assert rows and all(ln.rstrip().endswith("nothing") for ln in rows)


def test_suggestions_repr_is_short(ladder, forecast):
    out = suggest_runs(ladder, TARGET, "chinchilla", candidates=MIXED, budget=1e30,
                       forecast=forecast)
    assert len(repr(out)) < 300 and repr(out).startswith("Suggestions(law='chinchilla'")


def test_the_peak_lr_column_is_shown_only_when_a_candidate_has_one(ladder, forecast):
    # a new user's: chinchilla (no LR term) showed a peak_lr column of dashes
    plain = suggest_runs(ladder, TARGET, "chinchilla", candidates=MIXED, budget=1e30,
                         forecast=forecast).report()
    header = next(line for line in plain.splitlines() if line.startswith("rank"))
    assert "peak_lr" not in header and header.split()[4:6] == ["flops", "before"]
    given = suggest_runs(ladder, TARGET, "chinchilla", candidates=MIXED.assign(peak_lr=3e-3),
                         budget=1e30, forecast=forecast).report()
    header = next(line for line in given.splitlines() if line.startswith("rank"))
    assert header.split()[4:7] == ["flops", "peak_lr", "before"]
    assert all(" 0.003 " in line for line in given.splitlines() if line[:4].strip().isdigit())


def test_score_names_its_target_and_an_extrapolated_reference():
    design = _frame()[["params", "tokens"]]
    out = score_design(design, {"params": 1e9, "tokens": 2e10}, TRUTH)
    assert out.to_dict()["target"]["params"] == 1e9
    assert not [n for n in out.notes if "beyond the largest extrapolation ratio" in n]
    far = score_design(design, {"params": 1e15, "tokens": 2e19}, TRUTH)   # r ~ 4e13
    assert [n for n in far.notes if "beyond the largest extrapolation ratio" in n]


def test_candidates_and_designs_by_compute_alone_serve_a_law_of_compute(tmp_path):
    # Before: a candidates file with a flops column alone was refused (params, tokens
    # missing) although the power law reads C only.
    c = np.logspace(17, 19, 5)
    lad = delphi.Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(5)], "flops": c,
                                      "loss": 1.8 + 30 * c ** -0.08}), name="c-only")
    cands = pd.DataFrame({"flops": [2e19, 4e19]})
    out = suggest_runs(lad, {"flops": 1e22}, "power", candidates=cands, budget=1e20)
    assert {s.run.name for s in out.candidates} == {"C2e+19", "C4e+19"}
    assert all(s.run.params is None for s in out.candidates)
    assert "2 candidates" in out.report()
    one = suggest_runs(lad, {"flops": 1e22}, "power", candidates=cands.iloc[:1], budget=1e20)
    assert "; 1 candidate" in one.report()
    with pytest.raises(LadderError, match="give compute \\(flops\\) alone, and law 'chinchilla'"):
        suggest_runs(delphi.Ladder(_frame(), name="sim"), TARGET, "chinchilla",
                     candidates=cands, budget=1e20)
    score = score_design(pd.DataFrame({"flops": c}), {"flops": 1e22}, {"E": 1.8, "A": 30.0,
                                                                       "alpha": 0.08},
                         law="power")
    assert score.n_runs == 5 and score.width > 0


# ---- the pick criterion (criterion="width" | "spread")


def test_spread_criterion_ranks_by_the_fits_own_spread(ladder, forecast):
    """Width ranks first the run above the largest fitted compute (it lowers r, most of the
    width); spread leaves the extrapolation term out and ranks first the over-trained run,
    the most information per FLOP about the over-trained target's log loss. The Fisher path
    and the refits (independent computations of param_sd after) agree on that order."""
    width = suggest_runs(ladder, TARGET, "chinchilla", candidates=MIXED, budget=1e19,
                         forecast=forecast)
    fast = suggest_runs(ladder, TARGET, "chinchilla", candidates=MIXED, budget=1e19,
                        forecast=forecast, criterion="spread")
    slow = suggest_runs(ladder, TARGET, "chinchilla", candidates=MIXED, budget=1e19,
                        forecast=forecast, criterion="spread", method="refit", n_refit=48)
    assert width.best.run.name == "up" and width.best.reduces == "extrapolation"
    assert fast.best.run.name == "over" and slow.best.run.name == "over"
    assert [c.run.name for c in fast.candidates][:2] == [c.run.name for c in slow.candidates][:2]
    # what is ranked: the spread's reduction per FLOP, best first
    per = [c.spread_reduction_per_flop for c in fast.candidates]
    assert per == sorted(per, reverse=True) and per[0] > 0
    assert all(c.spread_before == pytest.approx(fast.spread) for c in fast.candidates)
    # the widths reported are the calibrated interval's under either criterion
    by_w = {c.run.name: c.width_after for c in width.candidates}
    assert all(c.width_after == by_w[c.run.name] for c in fast.candidates)
    # among runs that leave r unchanged the two criteria rank alike
    same_r = lambda s: [c.run.name for c in s.candidates if c.ratio_after == s.ratio]
    assert same_r(width) == same_r(fast) and len(same_r(fast)) == 3
    d = fast.to_dict()
    assert d["criterion"] == "spread" and d["spread"] == fast.spread
    assert d["candidates"][0]["spread_after"] == fast.best.spread_after
    assert width.to_dict()["criterion"] == "width" and "spread" not in width.to_dict()
    assert "criterion  spread" in fast.report() and "criterion" not in width.report()


def test_unknown_criterion_names_the_allowed_values(ladder, forecast):
    from delphi.errors import FitError
    with pytest.raises(FitError, match=r"unknown criterion 'calibration'; use width or spread"):
        suggest_runs(ladder, TARGET, "chinchilla", candidates=MIXED, budget=1e19,
                     forecast=forecast, criterion="calibration")


def test_spread_criterion_is_deterministic_by_seed(ladder, forecast):
    kw = dict(candidates=MIXED, budget=2e19, forecast=forecast, criterion="spread",
              method="refit", n_refit=16, n=2)
    a = suggest_runs(ladder, TARGET, "chinchilla", seed=5, **kw).to_dict()
    b = suggest_runs(ladder, TARGET, "chinchilla", seed=5, **kw).to_dict()
    c = suggest_runs(ladder, TARGET, "chinchilla", seed=6, **kw).to_dict()
    assert json.dumps(a) == json.dumps(b)
    assert json.dumps(a) != json.dumps(c)     # the seed does reach the refits


def test_cli_suggest_criterion(tmp_path, capsys):
    from delphi.presentation.cli.main import main
    runs = tmp_path / "runs.csv"
    _frame().to_csv(runs, index=False)
    cands = tmp_path / "next.csv"
    MIXED.to_csv(cands, index=False)
    args = ["suggest", str(runs), "--target-params", "1e9", "--target-tokens", "2e11",
            "--law", "chinchilla", "--candidates", str(cands), "--budget", "1e19",
            "--interval", "reference", "--n-boot", "20", "--json", "-q"]
    assert main(args + ["--criterion", "spread"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["criterion"] == "spread" and out["candidates"][0]["name"] == "over"
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["criterion"] == "width"
    with pytest.raises(SystemExit):
        main(args + ["--criterion", "calibration"])
    assert "invalid choice: 'calibration'" in capsys.readouterr().err


def test_two_candidates_with_one_name_are_refused(tmp_path):
    # Before: two rows named c1 (different N, D) were ranked as two candidates both shown as
    # "c1": which one to train could not be told from the ranking.
    path = tmp_path / "cands.csv"
    path.write_text("run,params,tokens\nc1,1e9,2e10\nc1,2e9,4e10\nc2,1e9,2e10\n")
    with pytest.raises(LadderError, match=r"cands.csv: candidate name 'c1' is on rows 0 and 1"):
        read_candidates(path)
    # unnamed candidates take their N and D as name: the same run twice is one candidate
    path.write_text("params,tokens\n1e9,2e10\n1e9,2e10\n")
    with pytest.raises(LadderError, match=r"'N1e\+09-D2e\+10' is on rows 0 and 1"):
        read_candidates(path)


def test_an_empty_candidates_file_is_called_empty(tmp_path):
    # Before: pandas' "No columns to parse from file".
    path = tmp_path / "none.csv"
    path.write_text("")
    with pytest.raises(LadderError, match=r"candidates file .*none.csv is empty: give a header"):
        read_candidates(path)


@pytest.mark.parametrize("row, message", [
    # a new user's: params 1e-30 was blamed on "target flops 1.2e-19" (the candidate became a
    # target), and params 1e300 "costs inf FLOPs, beyond the budget"
    ({"params": 1e-30, "tokens": 2e10},
     r"row 0, column 'params': 1e-30 is outside 1\.\.1e\+30: not a plausible parameter count"),
    ({"params": 1e300, "tokens": 2e10}, r"row 0, column 'params': 1e\+300 is outside"),
    ({"params": 1e9, "tokens": 1e-3}, r"row 0, column 'tokens': 0\.001 is outside"),
    ({"params": 1e9, "tokens": 2e10, "peak_lr": 1e9},
     r"row 0, column 'peak_lr': 1e\+09 is outside .*learning rate"),
    ({"params": 1e20, "tokens": 1e25},
     r"row 0: k x 6 x params x tokens = 6e\+45 FLOPs is outside 1\.\.1e\+40"),
])
def test_candidates_of_implausible_magnitude_are_named(tmp_path, row, message):
    path = tmp_path / "next.csv"
    pd.DataFrame([row]).to_csv(path, index=False)
    with pytest.raises(LadderError, match=message):
        read_candidates(path)


def test_jsonl_and_parquet_candidate_files_are_read_by_suffix(tmp_path):
    # a new user's: a .jsonl candidates file was read as a CSV, so the error listed the
    # first JSON line as the one column ("columns are {"params":1e8, tokens:2e9}")
    rows = [{"run": "a", "params": 1e8, "tokens": 2e9}, {"run": "b", "params": 2e8, "tokens": 4e9}]
    (tmp_path / "next.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    pd.DataFrame(rows).to_parquet(tmp_path / "next.parquet")
    for name in ("next.jsonl", "next.parquet"):
        got = read_candidates(tmp_path / name)
        assert [(c.name, c.params, c.tokens, c.row) for c in got] == [
            ("a", 1e8, 2e9, 0), ("b", 2e8, 4e9, 1)], name
    (tmp_path / "loss.jsonl").write_text('{"params": 1e8, "tokens": 2e9, "loss": 3.1}\n')
    with pytest.raises(LadderError, match=r"a 'loss' column"):
        read_candidates(tmp_path / "loss.jsonl")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(LadderError, match=r"candidates file .*empty.jsonl is empty"):
        read_candidates(tmp_path / "empty.jsonl")


def test_empty_candidates_and_too_small_designs_say_what_is_needed():
    # a new user's: an empty list was "missing column(s) params, tokens ... columns are none",
    # and a 1-run design "cannot fit law 'chinchilla''s 5 parameters"
    for empty in ([], pd.DataFrame()):
        with pytest.raises(LadderError, match=r"^candidates: no candidate rows"):
            read_candidates(empty)
    prior = {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28}
    with pytest.raises(LadderError, match=r"a design of 1 run cannot fit the 5 free parameters "
                                          r"of law 'chinchilla': it needs more runs than free "
                                          r"parameters \(6 or more\)"):
        delphi.score_design([{"params": 1e8, "tokens": 2e9}],
                            {"params": 7e10, "tokens": 1.4e12}, prior)


def test_a_default_grid_that_stops_below_the_largest_run_says_which_budget_reaches_it():
    # a new user's (marin-moe-535b): the default budget (1.58e21) was above the largest fitted
    # run (1.38e21), but the grid's levels double from the smallest run and its top one
    # (8.5e20) fell below it; the note said "give --budget C above the largest fitted
    # compute", which was already so.
    frame = pd.DataFrame({"run": list("abcd"), "flops": [1e18, 1e19, 1e20, 1.5e21],
                          "loss": [3.2, 2.9, 2.68, 2.5]})
    ladder = delphi.load_ladder(frame)
    got = delphi.suggest_runs(ladder, {"flops": 1e24}, n_boot=20)
    said = [n for n in got.notes if "default grid's levels double" in n]
    assert said and "1.02e+21" in said[0] and "a budget of 2.05e+21 FLOPs or more" in said[0]
    assert not any("give budget=C above the largest" in n for n in got.notes)
    wider = delphi.suggest_runs(ladder, {"flops": 1e24}, n_boot=20, budget=2.05e21)
    assert max(c.run.flops for c in wider.candidates) > 1.5e21


def test_a_design_with_losses_is_not_told_about_suggest(tmp_path):
    # a new user's (plan --score design.csv with a loss column): "candidates are runs not
    # trained yet (their losses are what suggest predicts)"
    path = tmp_path / "design.csv"
    pd.DataFrame({"params": [1e8], "tokens": [2e9], "loss": [3.0]}).to_csv(path, index=False)
    with pytest.raises(LadderError, match=r"a 'loss' column: a design's runs are not trained "
                                          r"yet \(their losses are what the prior law gives\)"):
        read_candidates(path, what="design")


def test_a_batch_that_runs_out_of_candidates_does_not_blame_the_budget(ladder, forecast):
    # a new user's: --n 5 --no-repeats over 3 candidates, within the budget, was told "the
    # budget allows only 3 of the 5 runs asked for"
    three = MIXED.iloc[:3]
    got = suggest_runs(ladder, TARGET, "chinchilla", candidates=three, budget=1e30, n=5,
                       repeats=False, forecast=forecast)
    assert len(got.candidates) == 3
    assert any(n.startswith("only 3 candidates to pick from, each once under repeats=False "
                            "(CLI --no-repeats): 3 of the 5 runs asked for") for n in got.notes)
    assert not any("the budget allows only" in n for n in got.notes)
    # a budget that does stop the batch (2e18: two runs of 'over', 1e18 each) still says so
    tight = suggest_runs(ladder, TARGET, "chinchilla", candidates=three.iloc[2:], budget=2e18,
                         n=5, forecast=forecast)
    assert "the budget allows only 2 of the 5 runs asked for" in tight.notes


def test_a_batch_stops_when_no_candidate_narrows_the_interval():
    # h111's F32: the third pick of a batch spent 1e18 FLOPs for a width reduction of 0. On a
    # 5-rung compute-only ladder with the reference interval (no parameter spread), only runs
    # above the largest fitted compute narrow it; a budget of 1e21 holds two of those from the
    # default grid, and the batch ends there, said in a note.
    c = np.array([1e18, 3e18, 1e19, 3e19, 1e20])
    lad = delphi.Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(5)], "flops": c,
                                      "loss": 1.7 + 400 * c ** -0.12}), name="five")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = suggest_runs(lad, {"flops": 1e22}, budget=1e21, n=3)
    assert 1 <= len(out.candidates) < 3
    assert all(s.width_after < s.width_before for s in out.candidates)
    assert any(n.startswith(f"stopped after {len(out.candidates)} run") and
               "no remaining candidate narrows" in n for n in out.notes)
