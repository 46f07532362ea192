"""Issue 22, item 2: the outlier screens are robust to the points they screen.

A run far below the trend (bits per byte in a nats ladder) used to be the yardstick of the
dominance screen: 18 good runs were excluded as "diverged or mis-tuned ... above that of run
'bpb-run'" before bpb-run itself was excluded as "far below the trend" (29 runs -> 11, the
forecast off by 1.1%). A duplicated W&B ``Name`` did the same. Now an exclusion never rests
on a run that is itself excluded, one run cannot make others look diverged, and a screen that
would exclude more than a small share of the ladder stops and says so.

``data/one_low_outlier.csv`` and ``data/dup_name.csv`` are the reproducers of the issue
(``examples/my_runs.csv`` plus one run at 0.65x the loss of its rung; the same as a W&B
export whose extra row repeats a run's ``Name``).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.errors import FitWarning, LadderWarning
from delphi.fitting import fit

from bundled import expect_warnings

HERE = Path(__file__).resolve().parent
GOOD = HERE.parent / "examples" / "my_runs.csv"
ONE_LOW = HERE / "data" / "one_low_outlier.csv"
DUP_NAME = HERE / "data" / "dup_name.csv"


def screened(f):
    """{run: reason} of the exclusions made by the outlier screens."""
    return {e.run: e.reason for e in f.exclusions
            if e.reason.startswith(("diverged", "far below"))}


@pytest.fixture(scope="module")
def good_fit():
    return fit(delphi.load_ladder(GOOD), "chinchilla", identify=False)


def test_one_low_outlier_is_excluded_alone(good_fit):
    f = fit(delphi.load_ladder(ONE_LOW), "chinchilla", identify=False)
    out = screened(f)
    assert list(out) == ["bpb-run"], out
    assert out["bpb-run"].startswith("far below the trend: loss 2 is 35% below")
    assert f.n_points == 29 == good_fit.n_points
    # The forecast is the clean ladder's: the same 29 runs are fitted.
    target = {"params": [1e10], "tokens": [2e11]}
    assert f.predict(target)[0] == pytest.approx(good_fit.predict(target)[0], rel=1e-9)


def test_a_duplicated_wandb_name_is_excluded_alone_and_both_rows_named(good_fit):
    with pytest.warns(LadderWarning, match=r"'C6e\+18-N1\.12e\+08' \(rows 3, 29\)"):
        ladder = delphi.load_ladder(DUP_NAME)
    f = fit(ladder, "chinchilla", identify=False)
    out = screened(f)
    assert list(out) == ["C6e+18-N1.12e+08 #2"], out
    assert "far below the trend" in out["C6e+18-N1.12e+08 #2"]
    assert f.n_points == 29
    target = {"params": [1e10], "tokens": [2e11]}
    assert f.predict(target)[0] == pytest.approx(good_fit.predict(target)[0], rel=1e-6)


def test_an_exact_copy_of_a_wandb_row_is_dropped_and_reported(tmp_path):
    frame = pd.read_csv(DUP_NAME)
    frame = pd.concat([frame.iloc[:-1], frame.iloc[[3]]], ignore_index=True)
    path = tmp_path / "copy.csv"
    frame.to_csv(path, index=False)
    ladder = delphi.load_ladder(path)       # nothing to rename: the copy is not a second run
    [copy] = ladder.exclusions
    assert copy.run == "C6e+18-N1.12e+08"
    assert copy.reason == "row 29 repeats row 3 exactly; the copy dropped"
    assert len(ladder.runs) == 29


def test_two_low_runs_do_not_take_good_runs_with_them(good_fit):
    # Two runs in another unit at the two smallest sizes of one budget: each is the other's
    # second witness, so the dominance screen finds many runs "above" them; the trend screen
    # then finds both far below, and the dominance screen is run again without them.
    frame = pd.read_csv(GOOD)
    low = frame.iloc[[3, 4]].assign(run=["bpb-a", "bpb-b"], loss=lambda t: t["loss"] * 0.65)
    f = fit(delphi.Ladder(pd.concat([frame, low], ignore_index=True)), "chinchilla",
            identify=False)
    out = screened(f)
    assert sorted(out) == ["bpb-a", "bpb-b"], out
    assert all(r.startswith("far below the trend") for r in out.values())
    assert f.n_points == 29


def test_a_screen_that_would_exclude_too_many_stops_and_says_so():
    # The 8 largest of 29 runs logged 40% high (another metric): more than a fifth of the
    # ladder. Neither screen excludes them; each says what it would have excluded.
    frame = pd.read_csv(GOOD)
    big = frame.nlargest(8, "flops").index
    frame.loc[big, "loss"] *= 1.4
    # the ladder names the step at once (issue 23: mixed units or metrics)
    with pytest.warns(delphi.LadderWarning, match=r"rises 1\.\d+x from run .*different units"):
        ladder = delphi.Ladder(frame)
    with expect_warnings(FitWarning, r"^the outlier screens stop: \d+ runs? .*diverged or "
                                     r"mis-tuned", may=(r"^the outlier screens stop",)) as rec:
        f = fit(ladder, "chinchilla", identify=False)
    assert screened(f) == {}
    assert f.n_points == 29
    [first, *_] = [str(w.message) for w in rec]
    assert "at most 5 of the 29 runs" in first
    assert all(w in f.warnings for w in map(str, (m.message for m in rec)))
    assert re.search(r"\(C1e\+21-N[^)]*\)|\(C[0-9e+]+-N", first)


def test_a_genuinely_diverged_run_is_still_excluded(good_fit):
    frame = pd.read_csv(GOOD)
    frame.loc[20, "loss"] *= 1.3
    f = fit(delphi.Ladder(frame), "chinchilla", identify=False)
    out = screened(f)
    assert list(out) == [frame["run"][20]], out
    assert out[frame["run"][20]].startswith("diverged")


def test_a_low_outlier_on_an_isoflop_budget_does_not_take_its_budget_with_it():
    # A law of C fits the lowest run of each budget: a run far below its budget would be that
    # run, and when the trend screen excludes it the budget's next-best run stands in.
    frame = pd.read_csv(GOOD)
    clean = fit(delphi.Ladder(frame), "power", identify=False)
    low = frame.iloc[[4]].assign(run="bpb-run", loss=lambda t: t["loss"] * 0.65)
    f = fit(delphi.Ladder(pd.concat([frame, low], ignore_index=True)), "power",
            identify=False)
    assert list(screened(f)) == ["bpb-run"]
    assert f.labels == clean.labels
    assert np.allclose(f.y, clean.y)
