"""benchmarks/bench_design.py (issue 25): the leave-one-ladder-out choice of suggest's pick
criterion on toy tables (no fits, no data): the rule fixed before the study's run."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_design as B  # noqa: E402

CRIT = ("width", "spread")


def _row(ratio_mean, covered=3, n=3):
    return {"ratio_main": ratio_mean, "ratio_mean": ratio_mean, "err": 0.01, "err_usual": 0.02,
            "covered": covered, "n": n, "n_added": 1, "max_flops": 1.0,
            "meets": ratio_mean <= 0.75}


def _table(rows):
    return {lad: {c: _row(*v) if isinstance(v, tuple) else _row(v) for c, v in r.items()}
            for lad, r in rows.items()}


def test_choice_is_made_on_the_other_selection_ladders_only():
    # spread is better pooled only because of S1; left out, S1 gets width. The study ladder
    # T, where spread is far better, never takes part in a choice.
    t = _table({"S1": {"width": 0.9, "spread": 0.1}, "S2": {"width": 0.6, "spread": 0.7},
                "S3": {"width": 0.6, "spread": 0.65}, "T": {"width": 0.9, "spread": 0.2}})
    sel = ["S1", "S2", "S3"]
    assert B.choose(t, CRIT, sel) == "spread"
    out = B.lolo(t, CRIT, sel)
    assert out == {"S1": "width", "S2": "spread", "S3": "spread", "T": "spread"}
    t["T"]["spread"]["ratio_mean"] = 5.0          # T's own figures do not move its choice
    assert B.lolo(t, CRIT, sel)["T"] == "spread"


def test_coverage_floor_and_ties_keep_the_default():
    # spread narrower but under-covering (4/6 < 85%): not eligible
    t = _table({"A": {"width": 0.8, "spread": (0.5, 2, 3)},
                "B": {"width": 0.8, "spread": (0.5, 2, 3)}})
    assert B.choose(t, CRIT, ["A", "B"]) == "width"
    tie = _table({"A": {"width": 0.7, "spread": 0.7}})
    assert B.choose(tie, CRIT, ["A"]) == "width"
    assert B.choose(tie, ("spread", "width"), ["A"]) == "width"
    assert B.choose(tie, CRIT, []) == "width"        # nothing to choose on


def test_the_section_states_the_target():
    t = _table({"S1": {"width": 0.7, "spread": 0.6}, "T1": {"width": 0.7, "spread": 0.6},
                "T2": {"width": 0.8, "spread": 0.6}})
    results = [{"ladder": n, "designs": {"usual": {"n_added": 2}}} for n in t]
    lines = B.choice_section(results, t, CRIT, {"S1"}, "cmd", 1.0, ("0.1", "0.2"))
    text = "\n".join(lines)
    assert lines[0] == B.CHOICE_SECTION
    # out of sample T1 and T2 get spread (chosen on S1): main ratio 0.6 on both, but the
    # pooled coverage 100% is outside 85-95%
    assert "met on 2 of 2 study ladders, coverage 6/6 (100.0%), outside 85-95% -- **not met**." \
        in text
