"""Issue 21, item 3: law selection that works on small ladders. With too few leave-future-out
cuts to rank the candidates on, ``compare`` and ``auto`` rank them by the reference class;
an "ensemble" of one candidate is not called one; the cut counts agree."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.laws import CHINCHILLA
from delphi.reference import ReferenceClass
from delphi.selection import compare, reference_scores
from test_reference import TRUTH, synthetic_class


def grid(rungs: int = 4, ratios: tuple[float, float] = (10.0, 80.0)) -> delphi.Ladder:
    """``rungs`` sizes 2x apart at ``ratios`` tokens per parameter (by default 10 and 80: D/N
    spans 8x, so the candidates are power, chinchilla and overtrain), losses from TRUTH with
    0.3% noise."""
    n = np.repeat(2e7 * 2.0 ** np.arange(rungs), 2)
    d = n * np.tile(list(ratios), rungs)
    rng = np.random.default_rng(0)
    loss = CHINCHILLA.predict(TRUTH, {"params": n, "tokens": d}) * np.exp(
        rng.normal(0, 0.003, n.size))
    return delphi.Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(n.size)], "params": n,
                                       "tokens": d, "loss": loss}), name="grid")


def reference(power: float, chinchilla: float, overtrain: float = 0.03) -> ReferenceClass:
    """Four public ladders whose errors of each law have the given spread per decade of r."""
    frames = [synthetic_class({f"p{i}": (law, 5, s) for i in range(4)}, seed=k).rows
              for k, (law, s) in enumerate((("power", power), ("chinchilla", chinchilla),
                                            ("overtrain", overtrain)))]
    return ReferenceClass(rows=pd.concat(frames, ignore_index=True))


def test_too_few_cuts_rank_by_the_reference_class():
    # 5 and 200 tokens per parameter: the compute frontier mixes D/N over 40x
    lad = grid(ratios=(5.0, 200.0))
    for chin, over, want in ((0.002, 0.03, "chinchilla"), (0.03, 0.002, "overtrain")):
        ref = reference(power=0.0001, chinchilla=chin, overtrain=over)
        c = compare(lad, reference=ref)
        assert c.rule == "reference" and c.best.candidate.law == want
        scores, info = reference_scores(lad, ["power", "chinchilla", "overtrain"], ref)
        assert c.best.reference_error == pytest.approx(min(v[0] for v in scores.values()))
        assert info["ladders"] == ["p0", "p1", "p2", "p3"] and info["n_rungs"] == 8   # 8 budgets
        # power's reference errors come from compute-optimal ladders (frontier D/N within
        # FRONTIER_SPAN = 10x): this one's frontier spans 40x, so power is not ranked by them
        # (however small they are), and the reason the winner is given says so
        assert "power" not in scores and "power" in info["not_ranked"]
        assert any("candidate power not ranked by the reference class" in n for n in c.notes)
        assert "power, backtested here" in c.best_reason and "40x" in c.best_reason
        text = c.report()
        assert "ranked by the reference class" in text and f"best       {want} (lowest " \
            "reference-class error)" in text
        d = json.loads(json.dumps(c.to_dict()))
        assert d["rule"] == "reference" and d["best"] == want
        assert d["reference"]["ladders"] == info["ladders"]


def test_a_law_of_c_is_ranked_where_the_reference_class_was_built_to_speak_for():
    # The rule that admits a ladder's power errors to the reference class (its frontier's
    # D/N within FRONTIER_SPAN) is the rule compare ranks power by: on the 8x grid, power
    # (the one candidate it can backtest) is ranked with the others, not dropped.
    from delphi.reference import FRONTIER_SPAN, frontier_span, outside_class
    lad = grid()
    assert frontier_span(lad) == pytest.approx(8.0) and 8.0 <= FRONTIER_SPAN
    assert outside_class(lad, "power") is None and outside_class(lad, "chinchilla") is None
    assert "40x" in outside_class(grid(ratios=(5.0, 200.0)), "power")
    ref = reference(power=0.0001, chinchilla=0.002, overtrain=0.03)
    scores, info = reference_scores(lad, ["power", "chinchilla", "overtrain"], ref)
    assert set(scores) == {"power", "chinchilla", "overtrain"} and not info["not_ranked"]
    c = compare(lad, reference=ref)
    assert c.rule == "reference" and c.best.candidate.law == "power" and c.best.scored
    assert not any("not ranked by the reference class" in n for n in c.notes)


def test_predict_says_when_a_law_of_cs_reference_class_does_not_speak_for_the_ladder():
    # compare does not rank power by the reference class on a 40x frontier; predict --law
    # power keeps that interval (dropping it would only narrow it) and says so
    ref = reference(power=0.002, chinchilla=0.03)
    f = delphi.predict(grid(ratios=(5.0, 200.0)), {"flops": 1e21}, "power", reference=ref,
                       interval="reference", n_boot=20, off_trend=False)
    assert f.interval.method == "reference"
    assert any(n.startswith("reference class: a law of C is fitted to the compute frontier")
               and "may understate" in n for n in f.notes)
    g = delphi.predict(grid(), {"flops": 1e21}, "power", reference=ref, interval="reference",
                       n_boot=20, off_trend=False)
    assert not any("compute frontier" in n for n in g.notes)


def test_a_law_of_c_is_ranked_on_a_compute_optimal_ladder():
    # one D/N (20 tokens per parameter): power is the only candidate and is ranked
    from test_reference import optimal_ladder
    lad = optimal_ladder(3, rungs=6)
    c = compare(lad, reference=reference(power=0.002, chinchilla=0.03))
    assert [s.candidate.law for s in c.ranked] == ["power"] and c.rule == "reference"


def test_auto_on_a_small_ladder_says_it_chose_by_the_reference_class():
    lad = grid()
    ref = reference(power=0.03, chinchilla=0.002, overtrain=0.03)
    target = {"params": 1e9, "tokens": 2e10}
    f = delphi.predict(lad, target, "auto", reference=ref, interval="delta", off_trend=False)
    assert f.fit.law.name == "chinchilla"
    assert f.selection["chosen_by"] == "reference"
    assert any(n.startswith("law chosen by the reference class: chinchilla") for n in f.notes)
    assert not any(n.startswith("law chosen by leave-future-out") for n in f.notes)


def test_an_ensemble_of_one_is_not_called_an_ensemble():
    # A target given by C alone: only power can read it, so only power is weighted.
    lad = grid()
    ref = reference(power=0.002, chinchilla=0.03)
    f = delphi.predict(lad, {"flops": 1e21}, ensemble=True, reference=ref, interval="delta",
                       off_trend=False)
    assert f.selection["members"] == 1 and f.selection["chosen"] == "power"
    assert any(n.startswith("no ensemble: only power could be weighted") for n in f.notes)
    assert not any(n.startswith("ensemble of") for n in f.notes)
    assert f.interval is None or f.interval.method != "ensemble"
    plain = delphi.predict(lad, {"flops": 1e21}, "power", interval="delta", off_trend=False)
    assert f.loss == plain.loss


def test_the_header_and_every_reason_state_one_count_of_cuts(data_dir):
    # marin-delphi-dense: 7 rungs; chinchilla cannot be cut, overtrain once, power twice.
    from bundled import load
    c = compare(load("marin-delphi-dense"))
    header = c.report().splitlines()[0]
    n = int(re.search(r"at (\d+) cut\(s\)", header).group(1))
    assert n == len(c.cuts)
    for s in c.scores:
        if s.error and "ranked on the" in s.error:
            assert f"ranked on the {n} cut(s) above" in s.error, s.error
    assert c.rule == "reference"           # 2 cuts: too few to rank on
    assert any("shown, not ranked on: 2 cut(s)" in x for x in c.notes)
    # the members ranked by the reference class without a backtest show their weight (0.00
    # when it is below MIN_WEIGHT)
    w, text = c.weights(), c.report()
    unbacktested = [s for s in c.ranked if not s.scored]
    assert unbacktested
    for s in unbacktested:
        assert (f"{s.candidate.label:<26} not backtested, weight "
                f"{w.get(s.candidate.label, 0.0):.2f} from the reference class") in text
    # The manifest's 7 compute-optimal points (frontier D/N 3.9..8.9): power, the one
    # candidate backtested here, is ranked by the reference class it contributes to (as
    # predict's interval uses it), not dropped for laws never backtested on this ladder.
    assert [s.candidate.law for s in c.ranked][0] == "power" and c.best.scored
    assert not any("not ranked by the reference class" in x for x in c.notes)
    assert "best       power (lowest reference-class error)" in text
    # and predict --law auto, given N and D, forecasts with it (the same comparison)
    from delphi.forecasting.forecast import predict_selected
    f = predict_selected(load("marin-delphi-dense"), {"params": 5e9, "tokens": 3.3e10},
                         comparison=c, interval=None, off_trend=False)
    assert f.fit.law.name == "power" and f.selection["chosen_by"] == "reference"
    assert any(n.startswith("candidate chinchilla not backtested on this ladder (ranked by "
                            "the reference class)") for n in f.notes)
    assert "because this ladder's 2 leave-future-out cut(s) are fewer than 3" in c.best_reason


def test_a_target_below_the_ladder_takes_the_downward_distance_not_the_floor():
    # h111's F2: a target 1e6x below the smallest fitted run got the in-sample floor (+-0.2%).
    # The interval now takes the downward factor as an upward ratio: as wide as a target that
    # far above the ladder's top would be, with a note saying it is an assumption; inside the
    # ladder's span the floor at r = 1 is kept.
    ref = reference(power=0.01, chinchilla=0.03)
    lad = grid()
    c = 6 * lad.table["params"] * lad.table["tokens"]
    lo_c, hi_c = float(c.min()), float(c.max())
    kw = dict(reference=ref, interval="reference", n_boot=20, off_trend=False)

    def rel_width(flops):
        f = delphi.predict(lad, {"flops": flops}, "power", **kw)
        return (f.interval.upper - f.interval.lower) / f.loss, f.notes

    with pytest.warns(delphi.FitWarning, match="extrapolated downwards"):
        below, notes = rel_width(lo_c / 1e3)
    above, _ = rel_width(hi_c * 1e3)
    inside, inside_notes = rel_width((lo_c * hi_c) ** 0.5)
    assert below == pytest.approx(above, rel=0.25) and below > 3 * inside
    assert any("below the smallest fitted run's compute" in n and "an assumption" in n
               for n in notes)
    assert not any("below the smallest fitted run's compute" in n for n in inside_notes)
