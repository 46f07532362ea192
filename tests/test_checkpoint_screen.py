"""The checkpoint law's dominance screen (F21): a run far above one with no more N, D and no
lower h at their final checkpoints is excluded, as the final-loss path excludes it."""

import warnings
from pathlib import Path

import pandas as pd
import pytest

import delphi
from delphi.fitting.api import _screen_checkpoint_runs

EXAMPLE = Path(__file__).parents[1] / "examples" / "curve_ladder.csv"


def test_a_run_logged_in_bits_is_excluded_from_the_checkpoint_fit():
    # F21: the largest run of the example ladder logged in bits (x 1/ln 2) was fitted without
    # a word by chinchilla-ckpt, while the final-loss path excluded it.
    frame = pd.read_csv(EXAMPLE)
    frame.loc[frame["run"] == "n400m-s1500", "loss"] *= 1.4427
    f = delphi.fit(frame, "chinchilla-ckpt", identify=False)
    why = {e.run: e.reason for e in f.exclusions}
    assert "n400m-s1500" in why and "38% above that of run 'n200m-s1500'" in why["n400m-s1500"]
    assert "n400m-s1500" not in {label.split("@")[0] for label in f.labels}
    assert f.n_points == 16 * 7


def finals(rows):
    """Checkpoint points (two per run: the screen reads the last by step)."""
    out = []
    for run, n, d, h, loss in rows:
        out.append(dict(run=run, params=n, tokens=d / 2, h=1.0, step=1, loss=loss * 1.2))
        out.append(dict(run=run, params=n, tokens=d, h=h, step=2, loss=loss))
    return pd.DataFrame(out)


def test_the_screen_compares_only_with_runs_no_less_annealed():
    # A run ending at h = 1 (no decay) may sit well above a smaller run decayed to h = 0.1:
    # that is the annealing term, not a diverged run.
    base = [("a", 1e8, 1e9, 0.1, 3.0), ("b", 2e8, 2e9, 0.1, 2.8), ("c", 4e8, 4e9, 0.1, 2.6)]
    kept, out, refused = _screen_checkpoint_runs(finals(base + [("d", 8e8, 8e9, 1.0, 3.4)]),
                                                 0.10)
    assert out == [] and refused == [] and len(kept) == 8
    kept, out, refused = _screen_checkpoint_runs(finals(base + [("d", 8e8, 8e9, 0.1, 3.4)]),
                                                 0.10)
    assert [e.run for e in out] == ["d"] and "run 'a'" not in out[0].reason
    assert "run 'c' (and more than 10.5% above 2 other runs)" in out[0].reason
    assert set(kept["run"]) == {"a", "b", "c"}
    # One run far below the others (in bits per byte, say) is not enough to flag those above
    # it: a run is flagged only when far above two such runs.
    low_b = [("a", 1e8, 1e9, 0.1, 3.0), ("b", 2e8, 2e9, 0.1, 1.0), ("c", 4e8, 4e9, 0.1, 2.6)]
    assert _screen_checkpoint_runs(finals(low_b), 0.10)[1] == []
    # A mid-run checkpoint above a smaller run's final one is not a final checkpoint: no flag.
    rows = finals(base)
    rows.loc[(rows["run"] == "c") & (rows["step"] == 1), "loss"] = 3.5
    assert _screen_checkpoint_runs(rows, 0.10)[1] == []


def test_the_checkpoint_screen_stops_beyond_its_cap():
    # Four of six runs in another unit: a unit problem, not diverged runs; nothing excluded.
    rows = [("a", 1e8, 1e9, 0.1, 3.0), ("b", 2e8, 2e9, 0.1, 2.8)] + [
        (f"r{i}", 4e8 * 2 ** i, 4e9 * 2 ** i, 0.1, 4.0) for i in range(4)]
    kept, out, refused = _screen_checkpoint_runs(finals(rows), 0.10)
    assert out == [] and refused == ["r0", "r1", "r2", "r3"] and len(kept) == 12


def test_fit_says_when_the_checkpoint_screen_stops():
    # Three of the example's eight runs in bits: more than the cap (2), so none is excluded
    # and the warning names them.
    frame = pd.read_csv(EXAMPLE)
    high = ["n400m-s1500", "n400m-s600", "n200m-s1500"]
    frame.loc[frame["run"].isin(high), "loss"] *= 1.4427
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = delphi.fit(frame, "chinchilla-ckpt", identify=False)
    stop = [str(w.message) for w in caught if "outlier screens stop" in str(w.message)]
    assert len(stop) == 1 and "3 runs" in stop[0] and "no lower h" in stop[0]
    assert all(r in stop[0] for r in high) and [e.run for e in f.exclusions] == ["*"]
