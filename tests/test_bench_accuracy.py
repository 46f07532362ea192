"""benchmarks/bench_accuracy.py (issue 13, item 6): the table's figures, on a small simulated
ladder (the benchmark itself runs on the OLMo ladder: minutes)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_accuracy as ba  # noqa: E402

import delphi  # noqa: E402
from task_ladders import TASK, simulate  # noqa: E402



def _ladder(ckpts=15):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return delphi.load_ladder(simulate(seed=3, ckpts=ckpts, sizes=(1e8, 2e8, 4e8, 8e8),
                                           mults=(0.5, 1, 2)))


def test_split_task_rows_summary_pool_and_table(tmp_path):
    ladder = _ladder()
    fit, held = ba.split(ladder, fit_max_params=5e8)
    assert held == ["800M-0.5x", "800M-1x", "800M-2x"] and len(fit) == 9
    res = ba.bench_task(ladder, TASK, fit, held, n_boot=4)
    rows = res["rows"]
    assert [r["run"] for r in rows] == held
    finals = ladder.table.groupby("run").tail(1).set_index("run")["acc/sim"]
    for r in rows:
        assert r["actual"] == pytest.approx(finals[r["run"]])      # the final checkpoint
        # the two-step point prediction is the same whether made by predict or compare
        assert r["two-step"] == pytest.approx(r["two-step (compare)"], abs=1e-6)
        assert r["lower"] <= r["two-step"] <= r["upper"]
    s = ba.summarize(res)
    for d in ba.DESIGNS:
        assert s["mae"][d] == pytest.approx(100 * np.mean([abs(r["actual"] - r[d])
                                                           for r in rows]))
    n_in = sum(r["lower"] <= r["actual"] <= r["upper"] for r in rows)
    assert (s["n_inside"], s["n"]) == (n_in, 3)
    assert s["within"] == (s["mae"]["two-step"] <= 2.0)
    assert s["bias"]["800M"] == pytest.approx(100 * np.mean([r["actual"] - r["two-step"]
                                                             for r in rows]))
    # two tasks pooled (the second a copy with one interval made to miss)
    other = {**res, "task": "copy", "rows": [dict(r) for r in rows]}
    other["rows"][0]["upper"] = other["rows"][0]["actual"] - 0.01
    p = ba.pool([res, other])
    assert p["n"] == 6 and p["n_inside"] == 2 * n_in - (rows[0]["lower"] <= rows[0]["actual"]
                                                       <= rows[0]["upper"])
    assert p["coverage_target_met"] == (0.85 <= p["n_inside"] / 6 <= 0.95)
    lines = ba.table([res, other])
    assert lines[2].startswith(f"| sim | {s['mae']['two-step']:.2f} |")
    assert any(line.startswith("| **overall**") for line in lines)
    assert "Targets (issue 13)" in lines[-1]
    # RESULTS.md: the section goes below the marker, and replaces itself on a rerun
    path = tmp_path / "RESULTS.md"
    from run_all import KEEP
    path.write_text(f"# top\n\n{KEEP}\n\n## Issue 11: kept\n\ntext\n")
    ba.write_results([ba.SECTION, "", "first"], path)
    ba.write_results([ba.SECTION, "", "second"], path)
    text = path.read_text()
    assert text.count(ba.SECTION) == 1 and "second" in text and "first" not in text
    assert text.index(KEEP) < text.index("## Issue 11") < text.index(ba.SECTION)
