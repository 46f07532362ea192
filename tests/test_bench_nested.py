"""Issue 21, item 5: the nested leave-one-size-out selections of benchmarks/bench_lr_forms.py
(the LR mis-tuning form) and benchmarks/bench_accuracy.py (step 2's variant), on hand-made
errors whose answer is known (the benchmarks themselves fit the (Mis)Fitting sweeps and the
OLMo ladder: minutes)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_accuracy as ba  # noqa: E402
import bench_lr_forms as bl  # noqa: E402


def test_nested_loso_chooses_on_the_other_sizes_only():
    # "a" is best on sizes 10 and 20 and terrible on 30; "b" is uniform.
    errors = {"a": {10: np.array([0.01, 0.01]), 20: np.array([0.01]), 30: np.array([0.10])},
              "b": {10: np.array([0.02, 0.02]), 20: np.array([0.02]), 30: np.array([0.02])}}
    out = bl.nested_loso(errors)
    chosen = {f["size"]: f["chosen"] for f in out["folds"]}
    # leaving 10 out: a's inner mean (0.01 + 0.10) / 2 > b's 0.02 -> b; same leaving 20 out;
    # leaving 30 out: a (0.01) beats b (0.02) and is scored on 30 (0.10)
    assert chosen == {10: "b", 20: "b", 30: "a"}
    assert out["folds"][0]["inner"] == pytest.approx(0.02)
    assert out["folds"][2]["inner"] == pytest.approx(0.01)
    assert out["errors"].tolist() == pytest.approx([0.02, 0.02, 0.02, 0.10])
    assert out["mean"] == pytest.approx(0.04) and out["max"] == pytest.approx(0.10)
    # in sample: pooled over every size, a = 0.13 / 4 > b = 0.02
    assert out["in_sample"] == "b" and out["in_sample_mean"] == pytest.approx(0.02)
    # ties go to the first form of the order
    tie = {"x": {1: np.array([0.01]), 2: np.array([0.01])},
           "y": {1: np.array([0.01]), 2: np.array([0.01])}}
    assert {f["chosen"] for f in bl.nested_loso(tie, ["y", "x"])["folds"]} == {"y"}


def test_lr_records_restrict_and_round_trip_through_json():
    store = {"chinchilla-lr": {"kept": ["r1", "r3"], "split200": [0.02, 0.03],
                               "loso_all": {10: np.array([0.01, 0.5]), 20: np.array([0.03])},
                               "loso_runs": {10: ["r1", "r2"], 20: ["r3"]}},
             "other": {"kept": ["r1", "r2", "r3"], "split200": [0.01, 0.01],
                       "loso_all": {10: np.array([0.02, 0.02]), 20: np.array([0.02])},
                       "loso_runs": {10: ["r1", "r2"], 20: ["r3"]}}}
    back = bl._from_json(json.loads(json.dumps(bl._to_json(store))))
    assert back["chinchilla-lr"]["loso_all"][10].tolist() == [0.01, 0.5]
    assert back["other"]["loso_runs"][20] == ["r3"]
    own = bl.restrict({"chinchilla-lr": back["chinchilla-lr"]}, {"r1", "r3"})
    assert own["chinchilla-lr"][10].tolist() == [0.01]           # r2 is not kept
    lines = bl.nested_report(back)
    text = "\n".join(lines)
    # two run sets: each form's own kept runs, and the runs both keep (r1, r3)
    assert text.count("| **out of sample: nested LOSO**") == 2
    assert "every form on the runs all compared forms keep (2 runs)" in text
    assert "| today's default (chosen on split 200 among earlier forms) | `chinchilla-lr` | 2.00%" \
        in text


def _preds():
    # Two tasks, runs of sizes A < B < C < D; candidates "d" (default) and "v".
    runs = ["A-1", "B-1", "B-2", "C-1", "C-2", "D-1"]
    actual = np.full(6, 0.5)

    def p(d_err, v_err):
        return {"runs": runs, "actual": actual,
                "pred": {"d": actual - np.array(d_err) / 100,
                         "v": actual - np.array(v_err) / 100}}

    return {
        # fit on A: on B, v is better (1 vs 3 points); on C, v is worse (5 vs 1)
        (("A",), "t1"): p([0, 3, 3, 1, 1, 0], [0, 1, 1, 5, 5, 0]),
        (("A",), "t2"): p([0, 3, 3, 1, 1, 0], [0, 1, 1, 5, 5, 0]),
        # fit on A-B: on C, d is better; D scored
        (("A", "B"), "t1"): p([0, 0, 0, 1, 1, 1.5], [0, 0, 0, 2, 2, 0.5]),
        (("A", "B"), "t2"): p([0, 0, 0, 1, 1, 2.5], [0, 0, 0, 2, 2, 0.5]),
    }


def test_nested_choice_fits_below_chooses_on_the_next_and_scores_the_one_after():
    folds = ba.nested_folds(("A", "B", "C", "D"))
    assert folds == [(("A",), "B", "C"), (("A", "B"), "C", "D")]
    out = ba.nested_choice(_preds(), ["d", "v"], folds)
    f1, f2 = out["folds"]
    assert f1["chosen"] == {"t1": "v", "t2": "v"}
    assert f1["choice_mae"] == pytest.approx({"d": 3.0, "v": 1.0})
    assert f2["chosen"] == {"t1": "d", "t2": "d"}
    # scored: v on C (5 points, both tasks, 2 runs each) and d on D (1.5 and 2.5)
    assert [(r["task"], r["size"], r["candidate"], r["error"]) for r in out["rows"]] == [
        ("t1", "C", "v", pytest.approx(5)), ("t1", "C", "v", pytest.approx(5)),
        ("t2", "C", "v", pytest.approx(5)), ("t2", "C", "v", pytest.approx(5)),
        ("t1", "D", "d", pytest.approx(1.5)), ("t2", "D", "d", pytest.approx(2.5))]
    s = out["scores"]
    assert s["mae"] == {"t1": pytest.approx(23 / 6), "t2": pytest.approx(25 / 6)}
    assert s["within"] == 0 and s["n"] == 6
    # the fixed default on the same folds: 1 on C (both tasks), 1.5 / 2.5 on D
    rows = ba.fixed_rows(_preds(), "d", ("A",), ("C",)) + \
        ba.fixed_rows(_preds(), "d", ("A", "B"), ("D",))
    sd = ba.task_scores(rows)
    assert sd["mae"] == {"t1": pytest.approx(3.5 / 3), "t2": pytest.approx(4.5 / 3)}
    assert sd["within"] == 2                      # 1.17 and 1.5 points: both within 2
    # per task, and a fit set missing from the predictions drops its fold
    pt = ba.nested_choice(_preds(), ["d", "v"], folds, per_task=True)
    assert pt["folds"][0]["chosen"] == {"t1": "v", "t2": "v"}
    only = ba.nested_choice({k: v for k, v in _preds().items() if k[0] == ("A",)},
                            ["d", "v"], folds)
    assert len(only["folds"]) == 1


def test_within_target_is_the_tables_rule():
    assert ba.within_target(2.0) and not ba.within_target(2.0001)
    assert ba.choose({"x": np.array([1.0, -3.0]), "y": np.array([2.0, 2.0])}, ["y", "x"]) == "y"
    assert ba.span(("190M",)) == "190M" and ba.span(("190M", "370M", "760M")) == "190M-760M"
    assert ba.size_of("1B-0.5xC") == "1B"


def test_variant_predictions_default_is_the_librarys_two_step():
    """The default variant, and C at chance, refitted by the benchmark's own step-2 code, are
    the library's two-step point predictions (what compare_accuracy and predict_accuracy
    fit: delphi.accuracy's step fits with the same settings)."""
    import delphi
    from delphi import accuracy as acc
    from task_ladders import TASK, simulate

    ladder = delphi.load_ladder(simulate(seed=3, ckpts=8, sizes=(1e8, 2e8, 4e8, 8e8),
                                         mults=(0.5, 1, 2)))
    final, _ = ladder.final_points()
    runs = sorted(final["run"].astype(str))
    fit = [r for r in runs if not r.startswith("800M")]
    held = [r for r in runs if r.startswith("800M")]
    spec = {ba.DEFAULT_VARIANT: ba.STEP2_VARIANTS[ba.DEFAULT_VARIANT],
            "C = chance": ba.STEP2_VARIANTS["C = chance"]}
    out = ba.variant_predictions(ladder, TASK, fit, held, variants=spec, designs=())
    data = acc._data(ladder, TASK, fit, None, smooth=acc.SMOOTH,
                     skip_fraction=acc.SKIP_FRACTION)
    k = acc._k_flops(ladder)
    s1 = acc._fit_step1("chinchilla", data, "task_loss", k)
    fin = final.set_index("run").loc[held]
    x = {"params": fin["params"].to_numpy(float), "tokens": fin["tokens"].to_numpy(float)}
    loss = s1.law.predict(s1.params, acc._step1_inputs(s1.law, x, k))
    for cand, lower in ((ba.DEFAULT_VARIANT, "fit"), ("C = chance", "chance")):
        s2 = acc._fit_step2(TASK, data, "task_loss", False, 1.0, lower)
        want = s2.law.predict(s2.params, {"task_loss": loss})
        assert out["pred"][cand] == pytest.approx(want, abs=1e-6)
    table = acc.task_table(ladder, TASK, smooth=acc.SMOOTH)
    last = table.groupby("run").tail(1).set_index("run").loc[held, "accuracy"]
    assert out["actual"] == pytest.approx(last.to_numpy())
    assert out["runs"] == held


def test_paired_difference_of_the_nested_choice_against_a_fixed_form():
    folds = [{"size": 1, "errors": np.array([0.01, 0.03])},
             {"size": 2, "errors": np.array([0.05])}]
    base = {1: np.array([0.02, 0.04]), 2: np.array([0.04])}
    p = bl.paired(folds, base, draws=200)
    assert (p["wins"], p["n"]) == (1, 2)
    assert p["diff"] == pytest.approx((0.09 - 0.10) / 3)
    assert p["lower"] <= p["diff"] <= p["upper"]
    assert p == bl.paired(folds, base, draws=200)                 # seeded
    with pytest.raises(ValueError):
        bl.paired(folds, {1: np.array([0.02]), 2: np.array([0.04])})
    assert "not computed" in bl.paired_line(folds, {1: np.array([0.02]), 2: base[2]}, "d")
