"""benchmarks/bench_accuracy.py (issue 13, item 6; issue 20): the table's figures, on a small
simulated ladder (the benchmark itself runs on the OLMo ladder: minutes), and the calibration
study's bookkeeping (the study itself fits 16 simulated ladders: minutes)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_accuracy as ba  # noqa: E402

import delphi  # noqa: E402
from task_ladders import TASK, noisy_truth, simulate  # noqa: E402


def _ladder(ckpts=15):
    # a simulated ladder loads without warnings (they are errors in the suite)
    return delphi.load_ladder(simulate(seed=3, ckpts=ckpts, sizes=(1e8, 2e8, 4e8, 8e8),
                                       mults=(0.5, 1, 2)))


def test_split_task_rows_summary_pool_and_table(tmp_path):
    ladder = _ladder()
    fit, held = ba.split(ladder, fit_max_params=5e8)
    assert held == ["800M-0.5x", "800M-1x", "800M-2x"] and len(fit) == 9
    # 4 draws and 10 calibration draws per cut: the rows' bookkeeping is checked, not their
    # statistics
    res = ba.bench_task(ladder, TASK, fit, held, n_boot=4, calibration_draws=10)
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


def test_calibration_ladder_reads_the_forecast_against_the_new_runs_truth(monkeypatch):
    """One ladder of the calibration study: the forecast it asks for (the study's settings)
    and what it reads off it, checked against a stand-in forecast (the fits are the study's
    cost; the stretch itself is tested in tests/test_accuracy.py)."""
    calls = []

    def fake(ladder, task, **kwargs):
        calls.append((ladder, task, kwargs))
        return SimpleNamespace(lower=0.70, upper=0.90, bootstrap_lower=0.75,
                               bootstrap_upper=0.85, n_checked=0,
                               calibration={"scale": 2.0, "scale_raw": 2.0})

    monkeypatch.setattr(delphi, "predict_accuracy", fake)
    row = ba.calibration_ladder(5, draws=20)
    (ladder, task, kw), = calls
    assert task == TASK and len(ladder.runs) == 15
    assert len(ladder.table) == 15 * ba.STUDY_CKPTS
    assert kw == {"target_params": 1.6e9, "target_tokens": 6.4e10, "n_boot": 10, "seed": 5,
                  "smooth": 1, "check_every": 0, "calibration_draws": 20}
    truth = noisy_truth(5, 1.6e9, 6.4e10)
    assert row["truth"] == truth and 0.75 < truth < 0.85       # inside both intervals
    assert row["inside"] and row["boot_inside"]
    assert row["width_ratio"] == pytest.approx(2.0) and row["scale"] == 2.0
    monkeypatch.setattr(delphi, "predict_accuracy", lambda *a, **k: SimpleNamespace(
        lower=truth + 0.01, upper=0.95, bootstrap_lower=truth + 0.02, bootstrap_upper=0.9,
        n_checked=0, calibration=None))
    row = ba.calibration_ladder(5, draws=20)
    assert not row["inside"] and not row["boot_inside"] and row["scale"] is None


def _row(inside, boot_inside, ratio, scale):
    return {"inside": inside, "boot_inside": boot_inside, "width_ratio": ratio,
            "scale": scale}


def test_study_summary_rows_and_lines():
    """The study's figures from its rows, and the targets they are held to (coverage >= 0.75
    and at least the bootstrap's, mean width ratio < 1.5)."""
    rows = [_row(True, True, 1.0, 1.0), _row(True, False, 2.0, 2.0),
            _row(False, False, 1.3, 1.3), _row(True, True, 1.0, None)]
    s = ba.summarize_study(rows)
    assert (s["n"], s["n_inside"], s["n_boot_inside"]) == (4, 3, 2)
    assert s["coverage"] == 0.75 and s["boot_coverage"] == 0.5
    assert s["mean_width_ratio"] == pytest.approx(1.325)
    assert (s["n_calibrated"], s["n_stretch_1"], s["max_scale"]) == (3, 1, 2.0)
    assert s["coverage_met"] and s["widens_met"] and s["width_met"]
    worse = ba.summarize_study([rows[2], _row(False, True, 1.6, 1.6), _row(True, True, 1.7, 1.7)])
    assert not worse["coverage_met"] and not worse["widens_met"] and not worse["width_met"]
    out = {"draws": 20, "rows": rows, "summary": s, "seconds": 1.0}
    lines = ba.study_lines(out)
    assert "3 of 4 (bootstrap alone: 2 of 4)" in lines[1] and lines[1].endswith("met")
    assert "1.32x" in lines[2] or "1.33x" in lines[2]
    assert "stretch 1 on 1 of them, at most 2.00" in lines[3]
    cov, width = ba.study_rows(out)
    assert (cov["value"], cov["baseline_value"], cov["met"]) == (0.75, 0.5, True)
    assert (width["value"], width["met"]) == (s["mean_width_ratio"], True)
    assert "stretch 1 on 1 of 3, max 2.00" in width["note"]
    assert not ba.study_rows({**out, "summary": worse})[0]["met"]
