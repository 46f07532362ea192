"""Decision rules, paired run noise and shared exponents of delphi.compare_recipes (issue 24).

Seeded simulated pairs of ladders with a known truth; each test a few seconds.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from delphi.analyses import recipes as R
from delphi.analyses.recipes import backtest_recipes, compare_recipes
from delphi.errors import FitError
from delphi.ladder import Ladder

E, A0, ALPHA = 2.0, 40.0, 0.08
TARGET = 1e21


def _law_a(c):
    return E + A0 * (np.asarray(c, float) / 1e10) ** -ALPHA


def _gap(c):
    """B - A: B better by a gap that shrinks with compute and never changes sign."""
    return -0.25 * (np.asarray(c, float) / 1e16) ** -0.35


def _pair(seed=0, shared=0.0, own=0.002, gap=_gap, c=None):
    """One run per budget (a law of C), A on a power law, B = A + gap; each budget's log
    losses carry a shared perturbation (the same design) and one of each recipe's own."""
    rng = np.random.default_rng(seed)
    c = np.logspace(16, 19.5, 12) if c is None else c
    common = rng.normal(0, shared, len(c))
    la = _law_a(c) * np.exp(common + rng.normal(0, own, len(c)))
    lb = (_law_a(c) + gap(c)) * np.exp(common + rng.normal(0, own, len(c)))
    out = []
    for name, loss in (("A", la), ("B", lb)):
        df = pd.DataFrame({"run": [f"{name}-{i}" for i in range(len(c))], "flops": c,
                           "loss": loss})
        out.append(Ladder(df, name=name))
    return out


def test_correlated_run_noise_narrows_the_difference_interval_and_still_covers():
    # The design noise (shared) is 5x each recipe's own: the residuals are correlated.
    ladders = _pair(seed=3, shared=0.01, own=0.002, gap=lambda c: -0.05 + 0 * c)
    kw = dict(target_flops=[1e19], law="power", n_boot=30, seed=0, forecasts=False,
              decision="law")
    paired = compare_recipes(ladders, run_noise="paired", **kw)
    indep = compare_recipes(ladders, run_noise="independent", **kw)
    assert paired.run_noise == "paired" and indep.run_noise == "independent"
    assert "correlation of their log residuals" in paired.method
    assert "independently" in indep.method
    note = [n for n in paired.notes if "run-noise correlation" in n]
    assert note and float(note[0].split("correlation ")[1].split()[0]) > 0.7
    p, i = paired.comparisons[0], indep.comparisons[0]
    assert (p.upper - p.lower) < 0.6 * (i.upper - i.lower)
    # Known truth: the new-run difference at 1e19 is -0.05 x (1 + own noise only).
    rng = np.random.default_rng(11)
    new = []
    for _ in range(400):
        z = rng.normal(0, 0.01)
        la = _law_a(1e19) * np.exp(z + rng.normal(0, 0.002))
        lb = (_law_a(1e19) - 0.05) * np.exp(z + rng.normal(0, 0.002))
        new.append(lb - la)
    new = np.array(new)
    inside = np.mean((new >= p.lower) & (new <= p.upper))
    assert inside >= 0.8
    d = paired.to_dict()
    assert d["run_noise"] == "paired"
    json.dumps(d, allow_nan=False)


def test_independent_noise_is_the_old_interval():
    ladders = _pair(seed=1, shared=0.0)
    r = compare_recipes(ladders, target_flops=[1e20], law="power", n_boot=40, seed=0,
                        forecasts=False, run_noise="independent")
    assert not r.comparisons[0].decided["anchor"] is None
    assert "run noise added independently per recipe" in r.method


def test_anchored_rule_is_the_observed_difference_plus_the_laws_change():
    ladders = _pair(seed=2)
    cut = 1e18 * 1.0001
    r = compare_recipes(ladders, target_flops=[TARGET], law="power", n_boot=40, seed=0,
                        forecasts=False, fit_max_flops=cut, decision="anchored")
    c = r.comparisons[0]
    anc = c.decided["anchor"]
    ta, tb = (ld.table for ld in ladders)
    top = float(ta.loc[ta["flops"] <= cut, "flops"].max())
    obs = float(tb.loc[tb["flops"] == top, "loss"].iloc[0] - ta.loc[ta["flops"] == top,
                                                                    "loss"].iloc[0])
    assert anc["flops"] == pytest.approx(top) and anc["observed"] == pytest.approx(obs)
    assert c.decided["loss"] == pytest.approx(obs + anc["change"])
    assert c.decided["lower"] <= c.decided["loss"] <= c.decided["upper"]
    assert anc["change_lower"] <= anc["change"] <= anc["change_upper"]
    assert c.decision == "anchored" and r.decision == "anchored"
    assert "decision   anchored" in r.report() and "law's change" in r.report()
    d = r.to_dict()["comparisons"][0]["decision"]
    assert d["rule"] == "anchored" and d["winner"] in ("A", "B")


def test_anchored_and_shrunk_rules_recover_a_known_shrinking_gaps_sign():
    # B = A + a gap that shrinks as C^-0.35 and never changes sign: a power law + E fitted to
    # B alone bends to a lower floor; the law's change from the cut overshoots, but both
    # anchored rules keep B ahead at 1e21 (truth: gap -0.25 (1e5)^-0.35 = -0.004).
    ladders = _pair(seed=0, own=0.001)
    cut = 3e18
    truth = float(_gap(TARGET))
    for rule in ("anchored", "shrunk"):
        r = compare_recipes(ladders, target_flops=[TARGET], law="power", n_boot=40, seed=0,
                            forecasts=False, fit_max_flops=cut, decision=rule)
        c = r.comparisons[0]
        assert c.decided["loss"] < 0 and c.winner == "B", rule
        assert c.decided["lower"] <= truth <= c.decided["upper"], rule


def test_shrunk_keeps_the_observed_difference_when_the_change_is_not_told_apart():
    # No gap change (a constant offset) and noisy runs: the change's interval holds 0.
    ladders = _pair(seed=4, own=0.01, gap=lambda c: -0.02 + 0 * c)
    r = compare_recipes(ladders, target_flops=[TARGET], law="power", n_boot=40, seed=0,
                        forecasts=False, fit_max_flops=1e19, decision="shrunk")
    anc = r.comparisons[0].decided["anchor"]
    if anc["change_lower"] <= 0 <= anc["change_upper"]:
        assert not anc["counted"]
        assert r.comparisons[0].decided["loss"] == pytest.approx(anc["observed"])
    else:
        assert anc["counted"]


def test_backtest_rows_hold_every_rule_and_the_chosen_one_is_scored():
    from test_recipes import _isoflop_pair
    ladders = _isoflop_pair()
    bt = backtest_recipes(ladders, n_boot=20, seed=0, max_cuts=1, decision="shrunk")
    s = bt.summary
    assert bt.decision == "shrunk" and s["decision"] == "shrunk"
    assert set(s["by_rule"]) == set(R.DECISIONS)
    assert s["decision_accuracy"] == s["by_rule"]["shrunk"]["accuracy"]
    for row in bt.rows:
        for rule in R.DECISIONS:
            assert row[f"correct_{rule}"] == (np.sign(row[f"predicted_{rule}"])
                                              == np.sign(row["observed"]))
        assert row["predicted"] == row["predicted_shrunk"]
    d = bt.to_dict()
    assert d["decision"] == "shrunk" and "method" in d
    json.dumps(d, allow_nan=False)
    assert "decision   shrunk" in bt.report()
    with pytest.raises(FitError, match="unknown decision rule"):
        backtest_recipes(ladders, n_boot=20, decision="oracle")
    with pytest.raises(FitError, match="unknown run_noise"):
        compare_recipes(ladders, target_flops=TARGET, n_boot=20, run_noise="both")


def test_shared_exponents_tie_alpha_across_recipes():
    # Both recipes on power laws with the same alpha; B's coefficient 10% lower.
    def gap(c):
        return -0.1 * A0 * (np.asarray(c, float) / 1e10) ** -ALPHA

    ladders = _pair(seed=6, own=0.001, gap=gap)
    r = compare_recipes(ladders, target_flops=[TARGET], law="power", n_boot=30, seed=0,
                        forecasts=False, shared_exponents=True)
    assert "alpha" in r.fixed
    assert any(n.startswith("shared alpha") for n in r.notes)
    assert abs(r.fixed["alpha"] - ALPHA) < 0.03
    truth = float(gap(TARGET))
    c = r.comparisons[0]
    assert c.loss < 0 and abs(c.loss - truth) < 0.5 * abs(truth)


def test_cli_constants_match_the_api():
    from delphi.presentation.cli import recipes as cli
    assert cli.DECISIONS == R.DECISIONS
    assert cli.DEFAULT_DECISION == R.DEFAULT_DECISION
    assert cli.RUN_NOISES == R.RUN_NOISES


def test_cli_names_the_decision_rule_in_text_and_json(tmp_path, capsys):
    from delphi.cli.main import main
    from test_recipes import _pair_csvs
    paths = _pair_csvs(tmp_path)
    args = ["compare-recipes", *paths, "--target-flops", "1e21", "--n-boot", "20",
            "--interval", "none", "--decision", "confident"]
    assert main([*args, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["decision"] == "confident" and d["run_noise"] == "paired"
    dec = d["comparisons"][0]["decision"]
    assert dec["rule"] == "confident" and dec["winner"] == "iso-B" and dec["loss"] < 0
    assert dec["anchor"]["kind"] == "best runs" and dec["anchor"]["flops"] == 1e19
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "decision   confident" in out and "iso-B wins" in out


def _same_side(d) -> int:
    return 1 if d["lower"] > 0 else -1 if d["upper"] < 0 else 0


@pytest.mark.parametrize("case", ["power", "iso"])
def test_robust_overturns_the_observed_difference_only_when_both_floor_models_agree(case):
    # The same recipes under each recipe's own floor E and under one shared E: robust takes
    # the anchored value only where both anchored intervals exclude zero on one side. "power":
    # one noisy run per budget, wide intervals (the observed difference stands); "iso": an
    # isoFLOP pair with B better everywhere, tight intervals (the anchored value is taken).
    if case == "power":
        ladders = _pair(seed=2, own=0.004)
        kw = dict(law="power", fit_max_flops=1e18 * 1.0001)
    else:
        from test_recipes import _isoflop_pair
        ladders = _isoflop_pair()
        kw = dict(fit_max_flops=3e18 * 1.0001)
    kw.update(target_flops=[1e20, TARGET], n_boot=30, seed=0, forecasts=False)
    robust = compare_recipes(ladders, **kw)
    assert robust.decision == "robust" == R.DEFAULT_DECISION
    own = compare_recipes(ladders, decision="anchored", **kw)
    shared = compare_recipes(ladders, decision="anchored", shared_floor=True, **kw)
    assert any("one floor E shared by every recipe" in n for n in robust.notes)
    for r, o, s in zip(robust.comparisons, own.comparisons, shared.comparisons):
        d, do, ds = r.decided, o.decided, s.decided
        assert (d["lower"], d["upper"]) == (do["lower"], do["upper"])
        both = _same_side(do) != 0 and _same_side(do) == _same_side(ds)
        expect = do["loss"] if both else do["anchor"]["observed"]
        assert d["loss"] == pytest.approx(expect, rel=0, abs=1e-15)
        assert f"[{ds['lower']:+.4f}, {ds['upper']:+.4f}]" in d["check"]
        taken = d["loss"] != do["anchor"]["observed"]
        assert taken == (case == "iso") == d["taken"]
    text = robust.report()
    assert "other floor model's anchored interval" in text
    assert ("the anchored value is taken" in text) == (case == "iso")
    assert ("the observed difference stands" in text) == (case == "power")


def test_robust_without_a_second_floor_model_is_confident():
    # E fixed: no other floor model applies, so robust is the confident rule, said so.
    ladders = _pair(seed=2)
    kw = dict(target_flops=[TARGET], law="power", n_boot=30, seed=0, forecasts=False,
              fit_max_flops=1e18 * 1.0001, floor=1.9)
    robust = compare_recipes(ladders, **kw)
    conf = compare_recipes(ladders, decision="confident", **kw)
    assert robust.comparisons[0].decided["loss"] == conf.comparisons[0].decided["loss"]
    assert any("no second floor model applies" in n for n in robust.notes)


def test_robust_keeps_the_observed_difference_when_the_second_model_cannot_be_fitted():
    ladders = _pair(seed=2)
    pp = R._paired(ladders, ["A", "B"], "power", fixed={}, bounds=None, delta=1e-3,
                   fit_max_flops=None, shared_floor=False, pairing="auto", n_boot=20, seed=0,
                   n_jobs=None)
    spec = R._Spec(TARGET)
    r = R._compare_pair(pp, 0, 1, spec, 0.9, 0)
    anchor = R._anchor(R._runs_upto(ladders, None), 0, 1, True, "power")
    out = R._decide(pp, 0, 1, spec, 0.9, 0, r, anchor, "the shared-floor fit failed: test")
    assert out["robust"]["loss"] == out["anchor"]["observed"]
    assert out["robust"]["check"] == "the shared-floor fit failed: test"
    assert out["robust"]["lower"] == out["anchored"]["lower"]
    none = R._decide(pp, 0, 1, spec, 0.9, 0, r, anchor, None)
    assert none["robust"]["loss"] == none["confident"]["loss"]
