"""Law and recipe selection by backtest, model averaging, their registry records and CLI
(issue 11, items 2 and 3), and the calibrated default interval of ``predict`` (item 1).

Expected values are computed here from the simulated ladders (numpy/scipy, by hand), not
copied from delphi's output. The ladders are small so the file runs in well under a minute.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
from scipy import stats
import pandas as pd
import pytest
from scipy.stats import norm

import delphi
from delphi.cli import main
from delphi.errors import FitError, LawError, TargetError
from delphi.ladder import Ladder
from delphi.registry import Registry
from delphi.selection import Candidate, compare, parse_candidates

Z90 = float(norm.ppf(0.95))      # two-sided 90% normal quantile
TARGET = {"params": 7e9, "tokens": 1.4e11}


def _chin_truth(n, d):
    # alpha and beta far apart: the compute-optimal frontier is a sum of two power laws in C,
    # which one power law in C misfits when extrapolated.
    return 1.7 + 1500 * n ** -0.5 + 300 * d ** -0.22


def _chin_frame() -> pd.DataFrame:
    """9 compute budgets half a decade apart (1e17..1e21), 4 model sizes each (D/N from about
    5 to 125), losses on the Chinchilla law with 0.2% (log) seeded run noise."""
    rng = np.random.default_rng(0)
    rows = []
    for i, c in enumerate(1e17 * 10 ** (0.5 * np.arange(9))):
        for k, n in enumerate(np.sqrt(c / 6 / 20) * np.array([0.4, 0.7, 1.2, 2.0])):
            d = c / 6 / n
            rows.append({"run": f"c{i}n{k}", "params": n, "tokens": d, "flops": 6 * n * d,
                         "loss": _chin_truth(n, d) * math.exp(rng.normal(0, 0.002))})
    return pd.DataFrame(rows)


def _power_ladder(nb: int, noise: float = 0.003, seed: int = 1, name: str = "pow") -> Ladder:
    """``nb`` distinct runs (one per budget) half a decade apart from 1e17 FLOPs, on
    L = 1.8 + 2 (C/1e17)^-0.3 with seeded log-normal run noise."""
    rng = np.random.default_rng(seed)
    c = 1e17 * 10 ** (0.5 * np.arange(nb))
    y = (1.8 + 2.0 * (c / 1e17) ** -0.3) * np.exp(rng.normal(0, noise, nb))
    return Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(nb)], "flops": c, "loss": y}),
                  name=name)


def _log_sd(lo, hi, z=Z90):
    return math.log(hi / lo) / (2 * z)


@pytest.fixture(scope="module")
def chin():
    return Ladder(_chin_frame(), name="chin")


@pytest.fixture(scope="module")
def chin_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("sel") / "chin.csv"
    _chin_frame().to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def comparison(chin):
    # The failing candidate comes first: it must be listed last.
    bad = Candidate("power", fixed={"E": 5.0})          # floor above every observed loss
    return compare(chin, [bad, "power", "chinchilla"])


@pytest.fixture(scope="module")
def ensemble_forecast(chin):
    return delphi.predict(chin, TARGET, ensemble=True, candidates=["power", "chinchilla"],
                          n_boot=50)


#: FitWarning of law="auto" on this ladder: power, the runner-up, forecasts far below the
#: chosen chinchilla's interval (a one-term law of C misfits the two-term frontier).
RUNNER_UP_OUTSIDE = r"the runner-up law power forecasts .* outside the chosen law's interval"


@pytest.fixture(scope="module")
def auto_forecast(chin):
    with pytest.warns(delphi.FitWarning, match=RUNNER_UP_OUTSIDE):
        return delphi.predict(chin, TARGET, "auto", candidates=["power", "chinchilla"],
                              interval="delta")


@pytest.fixture(scope="module")
def alone(chin):
    """Each candidate law's own delta-interval forecast of TARGET; tests only read them."""
    return {law: delphi.predict(chin, TARGET, law, interval="delta")
            for law in ("chinchilla", "power")}


def _frontier(frame: pd.DataFrame) -> dict[str, float]:
    """Lowest-loss run of each budget (every budget's runs share C here) -> its C."""
    f = frame.assign(c=frame["flops"].round(-10))
    best = f.loc[f.groupby("c")["loss"].idxmin()]
    return dict(zip(best["run"], best["flops"]))


# ----------------------------------------------------------------------------- compare
def test_compare_ranks_the_true_law_first_on_common_pairs(comparison):
    frame = _chin_frame()
    c = 1e17 * 10 ** (0.5 * np.arange(9))
    # power (3 free parameters) fits one point per budget, so its first cut needs 5 budgets
    # (index 4); every cut up to the second-largest budget: index 4..7.
    np.testing.assert_allclose(comparison.cuts, [float(f"{x:.3g}") for x in c[4:8]])
    labels = [s.candidate.label for s in comparison.scores]
    assert labels == ["chinchilla", "power", "power E=5"]
    chin_s, pow_s, bad = comparison.scores
    assert comparison.best is chin_s and comparison.ranked == [chin_s, pow_s]
    # Common (budget, run) pairs: the frontier runs of the budgets above each cut
    # (a law of C predicts only those): 4 + 3 + 2 + 1 = 10 for both candidates.
    front = _frontier(frame)
    assert chin_s.n_scored == pow_s.n_scored == 10
    expected_pairs = {(float(f"{k:.3g}"), r) for k in c[4:8] for r, cr in front.items()
                      if cr > k * 1.01}
    assert len(expected_pairs) == 10
    for s in (chin_s, pow_s):
        e = s.backtest.errors
        sel = np.array([(b, r) in expected_pairs for b, r in zip(e.budget, e.run)])
        assert sel.sum() == 10
        le = np.log(e.predicted[sel]) - np.log(e.actual[sel])
        assert s.mean_abs_error == pytest.approx(np.abs(le).mean(), rel=1e-12)
        assert s.max_abs_error == pytest.approx(np.abs(le).max(), rel=1e-12)
        # ranked and weighted with each fold 4x the one before (delphi.selection.RECENCY):
        # by hand, a prediction of a fold with a later folds after it weighs 4^-a
        b = e.budget[sel].astype(float)
        levels = sorted(set(b))
        w = np.array([4.0 ** -(len(levels) - 1 - levels.index(x)) for x in b])
        w /= w.sum()
        assert s.mse == pytest.approx(np.sum(w * le ** 2), rel=1e-12)
        assert s.score == pytest.approx(np.sum(w * np.abs(le)), rel=1e-12)
    # chinchilla predicted every run (36 in total over the cuts); only 10 are scored.
    assert len(chin_s.backtest.errors) > 10 == len(pow_s.backtest.errors)
    assert chin_s.mean_abs_error < pow_s.mean_abs_error
    # The unscorable candidate: an error naming why, no numbers, no weight.
    assert bad.error and not bad.scored and bad.mean_abs_error is None and bad.n_scored == 0
    assert "5" in bad.error


def test_compare_weights_are_normalised_inverse_mse(comparison):
    chin_s, pow_s, _ = comparison.scores
    inv = np.array([1 / chin_s.mse, 1 / pow_s.mse])
    w = comparison.weights()
    assert set(w) == {"chinchilla", "power"}
    assert w["chinchilla"] == pytest.approx(inv[0] / inv.sum(), rel=1e-12)
    assert w["power"] == pytest.approx(inv[1] / inv.sum(), rel=1e-12)
    assert sum(w.values()) == pytest.approx(1.0, abs=1e-12)



def _score(label, mse):
    from delphi.selection import CandidateScore
    return CandidateScore(candidate=Candidate(label), n_scored=5, mean_abs_error=math.sqrt(mse),
                          max_abs_error=math.sqrt(mse), mse=mse, coverage_before=None,
                          coverage_after=None, n_calibrated=0, aic=None, bic=None,
                          n_points=5, params={})


def test_weights_drop_members_under_one_percent_and_renormalise():
    from delphi.selection import Comparison
    # inverse MSE 1, 0.5, 0.005 -> raw weights 0.664, 0.332, 0.0033: the last (< 1%) is
    # dropped and the other two renormalised to 2/3 and 1/3.
    cmp = Comparison(ladder="hand", scores=[_score("power", 1.0), _score("chinchilla", 2.0),
                                            _score("overtrain", 200.0)], cuts=[1.0], level=0.9)
    w = cmp.weights()
    assert set(w) == {"power", "chinchilla"}
    assert w["power"] == pytest.approx(2 / 3) and w["chinchilla"] == pytest.approx(1 / 3)
    assert Comparison(ladder="hand", scores=[], cuts=[], level=0.9).weights() == {}
    with pytest.raises(FitError, match="no candidate law could be ranked"):
        Comparison(ladder="hand", scores=[], cuts=[], level=0.9).best

def _hand(*scores, rule="backtest", cuts=(1.0, 2.0, 3.0)):
    from delphi.selection import Comparison
    return Comparison(ladder="hand", scores=list(scores), cuts=list(cuts), level=0.9, rule=rule,
                      reference={"ladders": ["p0", "p1"], "window": "4"})


def test_best_reason_says_lowest_score_near_tie_exact_tie_and_only_one():
    from delphi.selection import TIE
    far = _hand(replace(_score("power", 1e-4), score=0.010, n_scored=12),
                replace(_score("chinchilla", 4e-4), score=0.030, n_scored=12))
    assert far.best_reason == ("power has the lowest score (1.00%: mean leave-future-out |log "
                               "error| on 12 (cut, run) pair(s), each fold weighing 4x the one "
                               "before); runner-up chinchilla has 3.00%")
    # runner-up within TIE (5%) of the best: a near tie, said; few predictions: weak evidence
    near = _hand(replace(_score("power", 1e-4), score=0.0100),
                 replace(_score("chinchilla", 1e-4), score=0.0100 * (1 + TIE / 2)))
    assert "a near tie with runner-up chinchilla (1.02%, within 5%)" in near.best_reason
    assert "on only 5 prediction(s): weak evidence" in near.best_reason
    assert "near tie" not in far.best_reason and "weak evidence" not in far.best_reason
    # equal scores: compare's sort puts the fewer free parameters first, and says so
    tie = _hand(replace(_score("power", 1e-4), score=0.01),
                replace(_score("chinchilla", 1e-4), score=0.01))
    assert "tied with chinchilla, the tie broken by the fewest free parameters" in tie.best_reason
    failed = replace(_score("overtrain", 1.0), mean_abs_error=None, mse=None, n_scored=0,
                     error="too few budgets")
    only = _hand(replace(_score("power", 1e-4), score=0.01), failed)
    assert only.best_reason.startswith("power is the only one of the 2 candidates that could "
                                       "be backtested leave-future-out")
    alone = _hand(replace(_score("power", 1e-4), score=0.01))
    assert alone.best_reason.startswith("power is the only candidate compared; it has the "
                                        "lowest score (1.00%")
    for c in (far, near, tie, only, alone):
        assert f"why        {c.best_reason}" in c.report()
        assert c.to_dict()["best_reason"] == c.best_reason
    assert _hand().to_dict()["best_reason"] is None
    with pytest.raises(FitError, match="no candidate law could be ranked"):
        _hand().best_reason


def test_best_reason_under_the_reference_rule_and_unbacktested_members_shown_weighted():
    # power backtested (but its law not in the reference class), chinchilla at two floors not
    # backtested: ranked and weighted by the reference class alone, their shared law's score
    # tied, the tie going to the fewest fixed parameters.
    from delphi.selection import CandidateScore
    power = replace(_score("power", 1e-4), score=0.01)

    def unbacktested(c, ref):
        return CandidateScore(candidate=c, n_scored=0, mean_abs_error=None, max_abs_error=None,
                              mse=None, coverage_before=None, coverage_after=None,
                              n_calibrated=0, aic=None, bic=None, n_points=8, params={},
                              error="too few compute budgets", reference_error=ref,
                              reference_mse=ref ** 2)
    free = unbacktested(Candidate("chinchilla"), 0.04)
    pinned = unbacktested(Candidate("chinchilla", fixed={"E": 1.5}), 0.04)
    c = _hand(power, pinned, free, rule="reference", cuts=[1.0, 2.0])
    assert c.best is free
    assert c.best_reason == (
        "chinchilla has the lowest reference-class error (4.00%: its law's mean |error| on 2 "
        "public ladder(s) in folds fitted on 4 rungs), ranked by the reference class because "
        "this ladder's 2 leave-future-out cut(s) are fewer than 3 to rank on; power, "
        "backtested here (mean |error| 1.00%), is not ranked: its law has no errors on the "
        "public ladders the others share; tied with chinchilla E=1.5 (the reference class "
        "scores the law chinchilla, not its floor or Huber delta), the tie broken by the "
        "fewest fixed parameters")
    w = c.weights()
    assert w == pytest.approx({"chinchilla": 0.5, "chinchilla E=1.5": 0.5})
    rows = {ln[:26].strip(): ln[26:] for ln in c.report().splitlines()
            if ln[:26].strip() in ("power", "chinchilla", "chinchilla E=1.5")}
    for label in ("chinchilla", "chinchilla E=1.5"):
        assert rows[label].strip().startswith("not backtested, weight 0.50 from the reference "
                                              "class (4.00%): too few compute budgets")
    assert rows["power"].split()[-1] == "-"     # backtested, not ranked: no weight
    d = c.to_dict()
    assert [(x["label"], x["backtested"]) for x in d["candidates"]] == [
        ("power", True), ("chinchilla E=1.5", False), ("chinchilla", False)]
    assert d["weights"] == w
    # with 3 cuts but only power backtestable there, the reason says so
    three = _hand(power, free, rule="reference")
    assert "because only power could be backtested at this ladder's 3 cut(s)" in three.best_reason


def test_compare_aic_bic_from_residuals_by_hand(comparison):
    frame = _chin_frame()
    chin_s, pow_s, _ = comparison.scores
    p = chin_s.params
    n, d, y = (frame[k].to_numpy(float) for k in ("params", "tokens", "loss"))
    res = np.log(p["E"] + p["A"] * n ** -p["alpha"] + p["B"] * d ** -p["beta"]) - np.log(y)
    rss, m, k = float(np.sum(res ** 2)), len(y), 5
    assert chin_s.n_points == 36
    assert chin_s.aic == pytest.approx(m * math.log(rss / m) + 2 * k, rel=1e-6)
    assert chin_s.bic == pytest.approx(m * math.log(rss / m) + k * math.log(m), rel=1e-6)
    # power fits the compute frontier only (9 points, 3 free parameters).
    front = frame[frame["run"].isin(_frontier(frame))]
    q = pow_s.params
    res = (np.log(q["E"] + q["A"] * front["flops"].to_numpy(float) ** -q["alpha"])
           - np.log(front["loss"].to_numpy(float)))
    rss, m, k = float(np.sum(res ** 2)), len(front), 3
    assert pow_s.n_points == 9
    assert pow_s.aic == pytest.approx(m * math.log(rss / m) + 2 * k, rel=1e-6)
    assert pow_s.bic == pytest.approx(m * math.log(rss / m) + k * math.log(m), rel=1e-6)
    assert any("different numbers of points" in x for x in comparison.notes)


def test_compare_report_and_json(comparison):
    text = comparison.report()
    lines = text.splitlines()
    assert "3 candidate(s)" in lines[0] and "4 cut(s)" in lines[0]
    rows = [ln for ln in lines if ln.split()[:1] in (["chinchilla"], ["power"])]
    assert rows[0].startswith("chinchilla") and rows[1].startswith("power ")
    assert "power E=5" in rows[2] and "not scored" in rows[2]
    assert "best       chinchilla" in text
    assert "why        chinchilla has the lowest score" in text and "runner-up power" in text
    d = json.loads(json.dumps(comparison.to_dict(), allow_nan=False))
    assert d["best"] == "chinchilla" and d["design"] == "leave-future-out"
    assert d["best_reason"] == comparison.best_reason
    assert [c["label"] for c in d["candidates"]] == ["chinchilla", "power", "power E=5"]
    assert d["candidates"][2]["error"] and d["candidates"][2]["mean_abs_error"] is None
    assert d["candidates"][0]["n_scored"] == d["candidates"][1]["n_scored"] == 10
    assert sum(d["weights"].values()) == pytest.approx(1.0)


def test_parse_candidates_cross_product_and_labels():
    cands = parse_candidates("power,chinchilla", "free,1.5", "1e-3,1e-2")
    assert len(cands) == 8
    assert [c.label for c in cands] == [
        "power", "power delta=0.01", "power E=1.5", "power E=1.5 delta=0.01",
        "chinchilla", "chinchilla delta=0.01", "chinchilla E=1.5", "chinchilla E=1.5 delta=0.01"]
    assert cands[3].fixed == {"E": 1.5} and cands[3].delta == 0.01 and cands[0].fixed == {}
    assert cands[0].delta == 1e-3
    assert cands[3].to_dict() == {"label": "power E=1.5 delta=0.01", "law": "power",
                                  "fixed": {"E": 1.5}, "huber_delta": 0.01}


@pytest.mark.parametrize("laws, floors, deltas, fragment", [
    ("power,nosuchlaw", None, None, "nosuchlaw"),
    ("", None, None, "empty list or an empty item"),
    ("power,,chinchilla", None, None, "empty item"),
    ("power", "free,abc", None, "'abc'"),
    ("power", "-1", None, "'-1'"),
    ("power", None, "0", "Huber delta"),
    ("power", None, "1e-3,nan", "'nan'"),
    ("deepseek-lr", "1.5", None, "'deepseek-lr' has no floor"),
])
def test_parse_candidates_bad_items_are_law_errors_naming_them(laws, floors, deltas, fragment):
    with pytest.raises(LawError) as info:
        parse_candidates(laws, floors, deltas)
    assert fragment in str(info.value)


# ----------------------------------------------------------------------------- law="auto"
def test_predict_auto_chooses_the_best_and_reports_the_runner_up(comparison, auto_forecast,
                                                                 alone):
    auto = auto_forecast
    sel = auto.selection
    assert sel["rule"] == "auto" and sel["chosen"] == comparison.best.candidate.label
    assert sel["chosen"] == "chinchilla" and auto.fit.law.name == "chinchilla"
    assert auto.loss == alone["chinchilla"].loss
    assert sel["runner_up"] == "power"
    assert sel["runner_up_loss"] == pytest.approx(alone["power"].loss, rel=1e-12)
    assert sel["spread"] == pytest.approx(alone["power"].loss / alone["chinchilla"].loss - 1,
                                          rel=1e-9)
    weights = {c["label"]: c["weight"] for c in sel["candidates"]}
    assert weights == {"chinchilla": 1.0, "power": 0.0}
    assert any("law chosen by leave-future-out backtest: chinchilla" in n for n in auto.notes)
    assert any(n.startswith("runner-up power") for n in auto.notes)
    text = auto.report()
    assert "<- chosen" in text and "runner-up power differs by" in text
    d = json.loads(json.dumps(auto.to_dict(), allow_nan=False))
    assert d["selection"]["chosen"] == "chinchilla"


# ----------------------------------------------------------------------------- ensemble
def test_ensemble_is_the_weighted_log_mean_of_separate_forecasts(chin, comparison,
                                                                 ensemble_forecast):
    f = ensemble_forecast
    # The same backtests as the ensemble's own compare(chin, ["power", "chinchilla"]): the
    # module's comparison adds only a candidate that cannot be scored (no weight, no cuts).
    cmp = comparison
    inv = {s.candidate.label: 1 / s.mse for s in cmp.ranked}
    w = {k: v / sum(inv.values()) for k, v in inv.items()}
    # each member's interval is calibrated on the comparison's own refits (no second
    # leave-future-out pass): the model of its leave-future-out errors there
    from delphi.forecasting.forecast import calibration_of, fit_stage, forecast_from_fit
    scores = {s.candidate.label: s for s in cmp.ranked}
    members = {law: forecast_from_fit(fit_stage(chin, law), TARGET, n_boot=50,
                                      calibration=calibration_of(scores[law])) for law in w}
    assert all(m.interval.calibration["n_errors"] ==
               len(scores[k].backtest.errors) for k, m in members.items())
    log_l = sum(w[k] * math.log(members[k].loss) for k in w)
    assert f.loss == pytest.approx(math.exp(log_l), rel=1e-12)
    # Interval: mixture sd = sqrt(sum w sd_i^2 + sum w (ln L_i - ln L)^2), centred on L.
    within = sum(w[k] * _log_sd(members[k].lower, members[k].upper) ** 2 for k in w)
    between = sum(w[k] * (math.log(members[k].loss) - log_l) ** 2 for k in w)
    sd = math.sqrt(within + between)
    assert f.interval.method == "ensemble"
    assert f.lower == pytest.approx(math.exp(log_l - Z90 * sd), rel=1e-9)
    assert f.upper == pytest.approx(math.exp(log_l + Z90 * sd), rel=1e-9)
    within_m = sum(w[k] * _log_sd(members[k].interval.mean_lower,
                                  members[k].interval.mean_upper) ** 2 for k in w)
    assert f.interval.mean_upper == pytest.approx(
        math.exp(log_l + Z90 * math.sqrt(within_m + between)), rel=1e-9)
    assert f.interval.calibration["between_model_sd"] == pytest.approx(math.sqrt(between))
    sel = f.selection
    assert sel["rule"] == "ensemble"
    got = {c["label"]: (c["weight"], c["loss"]) for c in sel["candidates"]}
    for k in w:
        assert got[k][0] == pytest.approx(w[k], rel=1e-12)
        assert got[k][1] == pytest.approx(members[k].loss, rel=1e-12)
    assert sum(c["weight"] for c in sel["candidates"]) == pytest.approx(1.0)
    d = json.loads(json.dumps(f.to_dict(), allow_nan=False))
    assert d["prediction"]["method"] == "ensemble" and d["selection"]["rule"] == "ensemble"


def test_selection_argument_errors(chin):
    with pytest.raises(TargetError, match="'chinchilla'"):
        delphi.predict(chin, TARGET, "chinchilla", ensemble=True)
    with pytest.raises(TargetError, match="candidates"):
        delphi.predict(chin, TARGET, "chinchilla", candidates=["power"])
    with pytest.raises(TargetError, match="floor range"):
        delphi.predict(chin, TARGET, "auto", floor_range=(1.0, 1.6))


def test_flops_only_target_gets_laws_of_compute_only(chin):
    f = delphi.predict(chin, {"flops": 1e22}, ensemble=True, interval="delta")
    laws = {c["law"] for c in f.selection["candidates"]}
    assert laws == {"power"}        # chinchilla/overtrain need N and D, which the target lacks
    assert all(delphi.laws.get_law(x).inputs == ("flops",) for x in laws)
    assert f.selection["candidates"][0]["weight"] == 1.0


# ----------------------------------------------------------------------------- registry
def test_registry_records_the_selection_and_still_verifies(tmp_path, ensemble_forecast,
                                                           auto_forecast, alone):
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    entry = reg.register(ensemble_forecast, id="ens")
    sel = entry.forecast.selection
    assert sel is not None and sel.rule == "ensemble" and sel.chosen == "ensemble"
    want = {c["label"]: c["weight"] for c in ensemble_forecast.selection["candidates"]}
    assert {c.label: c.weight for c in sel.candidates} == want
    assert sum(c.weight for c in sel.candidates) == pytest.approx(1.0)
    assert sel.weighting and "inverse-MSE" in sel.weighting
    reg.register(alone["chinchilla"], id="plain")
    auto = auto_forecast
    a = reg.register(auto, id="auto").forecast.selection
    assert (a.rule, a.chosen, a.runner_up) == ("auto", "chinchilla", "power")
    assert a.spread == pytest.approx(auto.selection["runner_up_loss"] / auto.loss - 1)
    assert {c.label: c.weight for c in a.candidates} == {"chinchilla": 1.0, "power": 0.0}
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [c["label"] for c in lines[0]["forecast"]["selection"]["candidates"]] == list(want)
    assert "selection" not in lines[1]["forecast"]      # entries stay as before
    assert Registry(path).verify().ok
    assert Registry(path).get("ens").forecast.selection.candidates[0].law in ("chinchilla",
                                                                               "power")
    assert main(["registry", "verify", str(path)]) == 0


# ----------------------------------------------------------------------------- calibrated default
def test_predict_default_interval_is_calibrated_on_a_long_ladder():
    lad = _power_ladder(12)
    c_max = 1e17 * 10 ** 5.5
    target = {"flops": 100 * c_max}
    f = delphi.predict(lad, target, "power", n_boot=50)
    boot = delphi.predict(lad, target, "power", interval="bootstrap", n_boot=50)
    dlt = delphi.predict(lad, target, "power", interval="delta")
    iv = f.interval
    assert iv.method == "calibrated"
    cal = iv.calibration
    assert cal["base_method"] == "bootstrap" and cal["n_folds"] >= 3
    assert cal["ratio"] == pytest.approx(100.0)
    # the own sigma(r) at r = 100 blended with the reference class's with weight n / (n + 3),
    # the shrinkage in place of the Student-t widening the own model alone gets
    n = cal["n_folds"]
    assert cal["own_small_sample_factor"] == 1.0
    own = cal["own_sigma_0"] + cal["own_k"] * 2.0
    ref = cal["reference"]
    w = n / (n + 3)
    assert cal["blend_weight"] == pytest.approx(w)
    assert cal["sigma_used"] == pytest.approx(
        w * own + (1 - w) * (ref["q_0"] + ref["q_1"] * 2.0) / Z90, rel=1e-9)
    assert cal["sigma_at_target"] == pytest.approx(cal["sigma_0"] + cal["k"] * 2.0)
    # param and run sds come from the bootstrap interval made with the same seed.
    param = _log_sd(boot.interval.mean_lower, boot.interval.mean_upper)
    run = boot.interval.noise
    assert cal["param_sd"] == pytest.approx(param, rel=1e-9)
    assert cal["run_sd"] == pytest.approx(run, rel=1e-12)
    sd = math.sqrt(cal["sigma_used"] ** 2 + param ** 2 + run ** 2)
    assert _log_sd(iv.lower, iv.upper) == pytest.approx(sd, rel=1e-9)
    assert iv.lower == pytest.approx(f.loss * math.exp(-Z90 * sd), rel=1e-9)
    # The point forecast does not depend on the interval method.
    assert f.loss == dlt.loss == boot.loss
    assert any("sigma(r)" in n and "calibrated" in n for n in f.notes)
    d = json.loads(json.dumps(f.to_dict(), allow_nan=False))
    assert d["prediction"]["method"] == "calibrated"
    assert d["prediction"]["calibration"]["sigma_at_target"] == cal["sigma_at_target"]
    assert "calibrated on extrapolation errors" in f.report()


def test_too_few_budgets_fall_back_with_a_note_and_calibrated_is_an_error():
    lad = _power_ladder(6)        # power: one cut only (index 4), fewer than 3 folds
    target = {"flops": 1e23}
    f = delphi.predict(lad, target, "power")
    dlt = delphi.predict(lad, target, "power", interval="delta")
    # 6 points < 2p + 2 = 8: no bootstrap either; the delta interval widened by the
    # reference class, since the ladder cannot calibrate itself
    assert f.interval.method == "reference"
    assert f.interval.calibration["base_method"] == "delta"
    assert any("not calibrated" in n and "at least 3 folds" in n for n in f.notes)
    assert f.loss == dlt.loss and f.lower < dlt.lower and f.upper > dlt.upper
    with pytest.raises(FitError, match="no calibrated interval"):
        delphi.predict(lad, target, "power", interval="calibrated")


def test_marin_moe_hero_forecast_is_unchanged(data_dir):
    from delphi.readers import load_manifest
    m = load_manifest("marin-moe-535b").predict
    f = delphi.predict(delphi.load_ladder("marin-moe-535b"), {"flops": m.target_flops}, m.law,
                       fixed=m.fixed)
    assert m.fixed == {"E": 1.5} and m.target_flops == 2.61e24
    assert f.loss == pytest.approx(2.0414, abs=5e-5)
    # 3 finished rungs: no leave-future-out folds, so the interval is the reference class's
    assert f.interval.method == "reference"


# ----------------------------------------------------------------------------- CLI
def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_compare_plain_and_json(chin_csv, capsys):
    code, out, err = run_cli(capsys, "compare", chin_csv, "--laws", "power,chinchilla")
    assert code == 0, err
    assert "2 candidate(s)" in out and "best       chinchilla" in out
    code, out, err = run_cli(capsys, "compare", chin_csv, "--laws", "power,chinchilla",
                             "--floors", "free,1.5", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert {c["label"] for c in d["candidates"]} == {"power", "power E=1.5", "chinchilla",
                                                      "chinchilla E=1.5"}
    assert d["best"] == d["candidates"][0]["label"]
    assert d["best_reason"].startswith(f"{d['best']} has the lowest score")


def test_cli_predict_auto_and_ensemble(chin_csv, capsys):
    base = ["predict", chin_csv, "--target-params", "7e9", "--target-tokens", "1.4e11",
            "--laws", "power,chinchilla", "--interval", "delta"]
    code, out, err = run_cli(capsys, *base, "--law", "auto")
    assert code == 0, err
    assert "law chosen by leave-future-out backtest: chinchilla" in out and "<- chosen" in out
    code, out, err = run_cli(capsys, *base, "--ensemble", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["selection"]["rule"] == "ensemble" and d["prediction"]["method"] == "ensemble"
    assert {c["label"] for c in d["selection"]["candidates"]} == {"power", "chinchilla"}
    ws = [c["weight"] for c in d["selection"]["candidates"]]
    ls = [c["loss"] for c in d["selection"]["candidates"]]
    assert d["prediction"]["loss"] == pytest.approx(
        math.exp(sum(w * math.log(x) for w, x in zip(ws, ls))), rel=1e-12)


def test_cli_candidate_lists_need_auto_or_ensemble(chin_csv, capsys):
    code, out, err = run_cli(capsys, "predict", chin_csv, "--target-params", "7e9",
                             "--target-tokens", "1.4e11", "--law", "chinchilla",
                             "--laws", "power,chinchilla")
    assert code == 2 and out == ""   # flags that contradict each other: usage (h113)
    assert err.startswith("delphi: error: ") and len(err.strip().splitlines()) == 1
    assert "--laws" in err and "Traceback" not in err


def test_cli_register_ensemble_records_the_selection(chin_csv, tmp_path, capsys):
    reg = tmp_path / "r.jsonl"
    code, out, err = run_cli(capsys, "register", chin_csv, "--id", "ens", "--registry", reg,
                             "--target-params", "7e9", "--target-tokens", "1.4e11",
                             "--laws", "power,chinchilla", "--interval", "delta", "--ensemble",
                             "--json")
    assert code == 0, err
    entry = json.loads(out)
    sel = entry["forecast"]["selection"]
    assert sel["rule"] == "ensemble" and {c["label"] for c in sel["candidates"]} == {
        "power", "chinchilla"}
    assert sum(c["weight"] for c in sel["candidates"]) == pytest.approx(1.0)
    code, out, _ = run_cli(capsys, "registry", "verify", reg)
    assert code == 0 and "OK, 1 entry" in out


# ----------------------------------------------------------------------------- review fixes
def test_calibrated_by_name_without_any_base_interval_is_an_error():
    # 3 runs, a 3-parameter power law: no residual dof, so no bootstrap or delta interval to
    # widen; asking for the calibrated one by name must fail, not print "no interval".
    lad = _power_ladder(3)
    with pytest.raises(FitError, match="no calibrated interval"):
        delphi.predict(lad, {"flops": 1e21}, "power", interval="calibrated")
    # auto: the fit has none, so the reference class's alone, said
    auto = delphi.predict(lad, {"flops": 1e21}, "power")
    assert auto.interval.method == "reference"
    assert auto.interval.calibration["base_method"] == "none"
    assert any(n.startswith("no interval from the fit alone") for n in auto.notes)
    # named, the delta method is an error too (one rule for every named method, issue 23)
    with pytest.raises(FitError, match="no delta interval: .*the default, .*auto"):
        delphi.predict(lad, {"flops": 1e21}, "power", interval="delta")


def test_candidate_delta_outside_the_engines_range_is_refused_up_front():
    with pytest.raises(LawError, match=r"1e-08\.\.10, got 1000000000"):
        Candidate("power", delta=1e9)
    with pytest.raises(LawError, match="Huber delta"):
        parse_candidates("power", None, "1e-3,1e9")


def test_compare_keeps_one_of_each_recipe(chin):
    cmp = compare(chin, ["power", "power", "chinchilla"], max_folds=3)
    assert [s.candidate.label for s in cmp.scores].count("power") == 1
    assert sum(cmp.weights().values()) == pytest.approx(1.0)


def test_auto_with_a_pinned_floor_says_the_free_floor_was_not_compared(chin):
    with pytest.warns(delphi.FitWarning, match=r"the runner-up law overtrain E=1.7 forecasts "
                                               r".* outside the chosen law's interval"):
        f = delphi.predict(chin, TARGET, "auto", fixed={"E": 1.7}, interval="delta")
    assert all(c["fixed"] == {"E": 1.7} for c in f.selection["candidates"])
    assert any("keeps E = 1.7 fixed" in n and "--floors free,1.7" in n for n in f.notes)


def test_compare_header_with_no_cut_says_why_not_an_empty_budget_list():
    # F1: a 5-run flops ladder has no leave-future-out cut; the header printed "( FLOPs)".
    hero = pd.DataFrame({"run": [f"r{i}" for i in range(5)],
                         "flops": [1e18, 3e18, 1e19, 3e19, 1e20],
                         "loss": [4.4684, 4.1246, 3.8033, 3.5405, 3.2899]})
    result = compare(hero)
    assert result.cuts == []
    head = result.report().splitlines()[0]
    assert "( FLOPs)" not in head and "()" not in head
    assert head.endswith("refits at 0 cuts (too few compute budgets)")
