"""Vectorised ladder validation, final points and dominance checks (issue 8, large ladders).

The vectorised code must give the same exclusions and errors as the row-by-row code did;
the small tables here are crafted to hit each check, several bad rows at once. No timings.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.errors import LadderError, LadderWarning
from delphi.fitting.api import (BUDGET_TOLERANCE, HPARAM_COLUMNS, compute_frontier, _dominated,
                                _budgets, _frontier_of, _hparam_keys, _one_size_notes)
from delphi.inputs.ladder import Exclusion
from delphi.ladder import Ladder
from delphi.laws import get_law

BASE = dict(run=["b", "a", "a", "c", "c", "d"], step=[2.0, 1, 2, 5, 1, 3],
            params=[1e6, 2e6, 2e6, 3e6, 3e6, 4e6], tokens=[1e8, 1e8, 2e8, 3e8, 1e8, 4e8],
            loss=[3.0, 3.1, 2.9, 2.8, 3.5, 2.7])


def table(**changes) -> pd.DataFrame:
    data = dict(BASE)
    data.update(changes)
    return pd.DataFrame(data)


# ---------------------------------------------------------------- errors: first bad row
@pytest.mark.parametrize("changes, message", [
    (dict(params=[1e6, -2e6, 2e6, 3e6, 0, 4e6]),
     r"run 'a' \(row 1\): column 'params' must be > 0, got -2e\+06"),
    (dict(loss=[3.0, np.nan, 2.9, np.inf, 3.5, 2.7]),
     r"run 'a' \(row 1\): column 'loss' is empty or NaN, got nan"),
    (dict(loss=["3.0", "x", 2.9, "y", 3.5, 2.7]),
     r"run 'a' \(row 1\): column 'loss' is not a number: 'x'"),
    (dict(step=[2.0, -1, 2, 5, -3, 3]), r"run 'a' \(row 1\): column 'step' must be >= 0, got -1"),
    (dict(lr=[1e-3, np.inf, 2e-3, -1, 1e-3, np.nan]),
     r"run 'a' \(row 1\): column 'lr' is infinite, got inf"),
    (dict(fraction=[1.0, 0.5, 1.8, 0, 0.3, 0.9]),
     r"run 'a' \(row 2\): column 'fraction' must be in \(0, 1\], got 1.8"),
    (dict(final=[True, 2, True, "maybe", False, "no"]),
     r"run 'a' \(row 1\): column 'final' must be true/false, got 2"),
    (dict(step=[2.0, 1, 1, 5, 5, 3]), r"run 'a': duplicate rows for step = 1 \(rows 1, 2\)"),
    (dict(params=[1e6, 2e6, 2.5e6, 3e6, 3.1e6, 4e6]),
     r"run 'a': column 'params' must be constant within a run, found 2e\+06, 2.5e\+06 "
     r"\(rows 1..2\)"),
    (dict(run=["", "a", "a", "c", "c", "d"]), r"run '': String should have at least 1 character"),
    (dict(run=["b", None, "a", "c", "c", None]), r"row 1: column 'run' is empty"),
])
def test_vectorised_validation_reports_the_first_bad_row_as_before(changes, message):
    with pytest.raises(LadderError, match=message):
        Ladder(table(**changes), name="t")


def test_duplicates_without_a_step_column_use_tokens():
    t = pd.DataFrame(dict(run=["b", "a", "a"], params=[1.0, 2, 2], tokens=[5.0, 2, 2],
                          loss=[1, 2, 3.0]))
    with pytest.raises(LadderError, match=r"run 'a': duplicate rows for tokens = 2 \(rows 1, 2\)"):
        Ladder(t)


def test_per_run_constants_may_be_missing_on_some_rows():
    ladder = Ladder(table(peak_lr=[1e-3, np.nan, 2e-3, 1e-3, 1e-3, np.nan]))
    assert ladder.table.loc[ladder.table["run"] == "a", "peak_lr"].tolist()[1] == 2e-3


def test_rows_ordered_by_compute_then_run_then_step_and_the_input_is_untouched():
    t = table()
    before = t.copy()
    ladder = Ladder(t)
    # Run compute (largest 6·N·D): b 6e14, a 2.4e15, c 5.4e15, d 9.6e15.
    assert ladder.table["run"].tolist() == ["b", "a", "a", "c", "c", "d"]
    assert ladder.table["step"].tolist() == [2, 1, 2, 1, 5, 3]
    assert ladder.table["row"].tolist() == [0, 1, 2, 4, 3, 5]
    ladder.table.loc[0, "loss"] = 99.0
    pd.testing.assert_frame_equal(t, before)


def test_table_keeps_runs_contiguous_ordered_by_run_compute_then_run_id():
    # "big" has a checkpoint (1e18) below "small"'s only row (2e18) but its final compute
    # (8e18) is larger: its rows stay together after "small". "y" and "x" tie at 4e18:
    # by run id. Steps ascend within each run whatever the file order.
    t = pd.DataFrame({"run": ["big", "y", "big", "small", "x", "big"],
                      "step": [1, 1, 3, 1, 1, 2],
                      "flops": [1e18, 4e18, 8e18, 2e18, 4e18, 5e18],
                      "loss": [3.0, 2.8, 2.5, 2.9, 2.8, 2.6]})
    # big's steps in file order (1, 3, 2) go back once: read as a resumed run, and said so.
    with pytest.warns(LadderWarning, match=r"run 'big' was resumed: its step goes back 1 "
                                           r"time\(s\) in file order \(step 3 \(row 2\) -> 2 "
                                           r"\(row 5\)"):
        table = Ladder(t).table
    assert table["run"].tolist() == ["small", "x", "y", "big", "big", "big"]
    assert table["step"].tolist() == [1, 1, 1, 1, 2, 3]
    assert table["flops"].tolist() == [2e18, 4e18, 4e18, 1e18, 5e18, 8e18]
    assert table.index.tolist() == list(range(6))


def test_final_column_accepts_the_usual_spellings():
    ladder = Ladder(table(final=[" Yes", "t", "F", "no", "0", 1.0]))
    # Source rows 0, 1, 2, 4, 3, 5 in table order (by compute, see above).
    assert ladder.table["final"].tolist() == [True, True, False, False, False, True]
    assert str(ladder.table["final"].dtype) == "boolean"


# ---------------------------------------------------------------- final points
def test_final_points_exclusions_unfinished_marked_and_diverged():
    t = table(fraction=[1.0, np.nan, np.nan, np.nan, np.nan, 0.9],
              final=[True, np.nan, np.nan, False, False, np.nan],
              loss=[3.0, 2.0, 2.9, 2.8, 3.5, 2.7])
    pts, excluded = Ladder(t).final_points()
    assert [(e.run, e.reason) for e in excluded] == [
        ("a", "diverged: last loss 2.9 is 45.0% above the run's best 2"),
        ("c", "unfinished (its last row is marked final = false); final-loss laws need "
              "finished runs"),
        ("d", "unfinished (fraction = 0.9); final-loss laws need finished runs"),
    ]
    assert pts["run"].tolist() == ["b"]
    pts, excluded = Ladder(t).final_points(include_unfinished=True)
    assert pts["run"].tolist() == ["b", "c", "d"] and [e.run for e in excluded] == ["a"]


def test_final_points_takes_the_marked_row_and_rejects_two():
    t = table(final=[True, True, False, np.nan, np.nan, np.nan],
              loss=[3.0, 3.0, 2.95, 2.8, 3.5, 2.7])
    pts, _ = Ladder(t).final_points()
    assert pts.set_index("run").loc["a", "step"] == 1.0
    with pytest.raises(LadderError, match=r"run 'a': 2 rows are marked final \(rows 1, 2\)"):
        Ladder(table(final=[True, True, True, np.nan, np.nan, np.nan])).final_points()


def test_no_finished_run_lists_the_reasons():
    with pytest.raises(LadderError, match=r"no finished runs to fit \(a: unfinished \(fraction "
                                          r"= 0.5\)"):
        Ladder(table(fraction=[0.5] * 6)).final_points()


def test_select_reports_runs_above_the_compute_cut_in_run_order():
    ladder = Ladder(table())
    small = ladder.select(max_flops=1e15)
    assert [e.run for e in small.exclusions] == ["a", "c", "d"]
    assert small.exclusions[0].reason == "compute 2.4e+15 FLOPs above --fit-max-flops 1e+15"
    assert small.runs == ["b"]


def test_fingerprint_ignores_row_order_and_hashes_in_blocks(monkeypatch):
    ladder = Ladder(table())
    shuffled = Ladder(table().iloc[::-1])
    assert ladder.fingerprint() == shuffled.fingerprint()
    whole = ladder.fingerprint()
    monkeypatch.setattr("delphi.ladder._FINGERPRINT_ROWS", 2)
    assert ladder.fingerprint() == whole


# ---------------------------------------------------------------- dominance, frontier
def _dominated_reference(pts, law, threshold):
    """The O(n^2) loop the vectorised version replaced."""
    cols = [c for c in law.inputs if c in ("flops", "params", "tokens")]
    if not cols or len(cols) != len(law.inputs):
        return {}
    x = pts[cols].to_numpy(float)
    y = np.log(pts["loss"].to_numpy(float))
    runs = pts["run"].tolist()      # read once: a pandas lookup per pair cost seconds
    out = {}
    for i in range(len(pts)):
        smaller = np.all(x <= x[i] * (1 + 1e-9), axis=1)
        smaller[i] = False
        if smaller.any():
            j = np.flatnonzero(smaller)[np.argmin(y[smaller])]
            if y[i] - y[j] > threshold:
                out[i] = (f"diverged or mis-tuned: loss {np.exp(y[i]):.4g} is "
                          f"{np.exp(y[i] - y[j]) - 1:.0%} above that of run "
                          f"{runs[j]!r}, which had no more {' or '.join(cols)}; "
                          f"not fitted")
    if len(pts) - len(out) < 2:
        return {}
    return out


@pytest.mark.parametrize("seed", range(12))
def test_dominated_agrees_with_the_quadratic_reference(seed):
    rng = np.random.default_rng(seed)
    for trial in range(8):
        n = int(rng.integers(1, 80))
        if trial % 2:    # ties, and values within the 1e-9 tolerance of each other
            x = rng.integers(1, 6, size=(n, 3)).astype(float)
            x *= 1 + rng.choice([0.0, 5e-10, 2e-9], size=(n, 3))
            loss = rng.choice([2.0, 2.5, 3.0], n)
        else:
            x = np.exp(rng.normal(size=(n, 3)))
            loss = np.exp(rng.normal(1, 0.2, n))
        pts = pd.DataFrame({"run": [f"r{i}" for i in range(n)], "flops": x[:, 0],
                            "params": x[:, 1], "tokens": x[:, 2], "loss": loss})
        for law in ("power", "chinchilla", "overtrain", "chinchilla-lr"):
            for threshold in (0.1, 0.0, 0.3, -0.05):
                assert _dominated(pts, get_law(law), threshold) == \
                    _dominated_reference(pts, get_law(law), threshold), (seed, trial, law)


def test_compute_frontier_keeps_the_lowest_loss_of_each_budget():
    pts = pd.DataFrame({"run": list("abcdef"), "flops": [1e18, 1.04e18, 1.06e18, 3e18, 3.1e18, 9e18],
                        "loss": [3.0, 2.9, 3.1, 2.8, 2.7, 2.5]})
    best, excluded, notes = compute_frontier(pts)
    assert best["run"].tolist() == ["b", "c", "e", "f"]
    assert [(e.run, e.reason) for e in excluded] == [
        ("a", "isoFLOP point: not the lowest loss of its compute budget (~1e+18 FLOPs)"),
        ("d", "isoFLOP point: not the lowest loss of its compute budget (~3e+18 FLOPs)")]
    assert "4 budgets" in notes[0]
    # No params: nothing says the excluded runs are of another size, and the note says so.
    assert "another size" not in notes[0] and "no seed column" in notes[0]


# Issue F12: 5 budgets x 2 seeds, L = 1.7 + 400 C^-0.12 with 0.5% noise, no params column.
_SEEDS = pd.DataFrame({
    "run": [f"r{i}-s{s}" for i in range(5) for s in (0, 1)],
    "flops": np.repeat([1e18, 3e18, 1e19, 3e19, 1e20], 2),
    "loss": [4.4750, 4.4857, 4.1323, 4.0987, 3.8165, 3.8077, 3.5305, 3.5502, 3.2984, 3.2973],
    "seed": [0, 1] * 5})


def test_seeds_without_params_are_repeats_not_an_isoflop_sweep():
    # Keeping the lower seed of each budget biased the law low and left no repeats for the
    # run noise; the seed column says they are seeds of one run.
    best, excluded, notes = compute_frontier(_SEEDS)
    assert len(best) == 10 and excluded == []
    assert notes == ["5 compute budget(s) hold runs without a model size (N) that differ only "
                     "in seed: taken as repeated seeds, not an isoFLOP sweep; all their runs "
                     "are fitted"]
    f = delphi.fit(delphi.Ladder(_SEEDS), "power")
    assert f.n_points == 10 and not f.exclusions
    from delphi.forecasting.uncertainty import run_noise
    assert run_noise(f)[1] == "repeated runs (5 dof)"


@pytest.mark.parametrize("seed, n_out, why", [
    ([0, 0] * 5, 5, "a seed repeats"),
    ([0, 1] * 4 + [0, np.nan], 1, "missing"),         # the last budget only
    (None, 5, "a hyperparameter differs")])
def test_seeds_that_do_not_tell_runs_apart_keep_the_frontier_and_say_why(seed, n_out, why):
    pts = _SEEDS.assign(seed=seed) if seed is not None else \
        _SEEDS.assign(peak_lr=[1e-3, 2e-3] * 5)
    best, excluded, notes = compute_frontier(pts)
    assert len(excluded) == n_out and len(best) == 10 - n_out
    assert all(e.reason.startswith("isoFLOP point") for e in excluded)
    assert why in notes[-1] and "another size" not in notes[-1]


# ---------------------------------------------------------------- a moderately large ladder
def test_a_ladder_of_20000_single_row_runs_loads_and_fits(tmp_path):
    rng = np.random.default_rng(0)
    n = 20_000
    params = np.exp(rng.uniform(np.log(1e7), np.log(1e10), n))
    tokens = params * np.exp(rng.uniform(np.log(2), np.log(200), n))
    loss = (1.69 + 406.4 / params ** 0.34 + 410.7 / tokens ** 0.28) * np.exp(rng.normal(0, 0.01, n))
    loss[:3] *= 1.5                                  # three diverged runs
    frame = pd.DataFrame({"run": [f"r{i:05d}" for i in range(n)], "params": params,
                          "tokens": tokens, "loss": loss})
    path = tmp_path / "big.parquet"
    frame.sample(frac=1.0, random_state=0).to_parquet(path, index=False)   # unsorted rows
    ladder = delphi.load_ladder(path)
    assert len(ladder) == n and ladder.runs[:2] == ["r00000", "r00001"]
    # Ordered by compute: one row per run, so the flops column itself ascends.
    assert ladder.table["flops"].is_monotonic_increasing
    pts, excluded = ladder.final_points()
    assert len(pts) == n and excluded == []
    dominated = _dominated(pts, get_law("chinchilla"), 0.10)
    assert {pts["run"].iloc[i] for i in dominated} == {"r00000", "r00001", "r00002"}


def test_fast_fingerprint_text_is_pandas_csv_byte_for_byte():
    # The fingerprint hashes CSV text; the fast writer must give pandas' exact bytes (or
    # decline, for values pandas would quote), or stored fingerprints would stop matching.
    from delphi.ladder import _fast_csv
    rng = np.random.default_rng(0)
    n = 500
    table = pd.DataFrame({
        "run": [f"r{i % 7}-x.y" for i in range(n)],
        "step": rng.integers(0, 10**6, n),
        "params": 10 ** rng.uniform(6, 11, n),
        "loss": np.where(rng.random(n) < 0.1, np.nan, rng.random(n) * 5),
        "tiny": rng.normal(size=n) * 1e-300,
        "special": rng.choice([0.0, -0.0, np.inf, -np.inf, 1e22, 0.1], n),
        "final": rng.random(n) < 0.5,
    })
    expected = table.to_csv(index=False, float_format="%.17g", lineterminator="\n")
    assert _fast_csv(table, header=True) == expected
    assert _fast_csv(table.iloc[:0], header=True) == table.iloc[:0].to_csv(
        index=False, float_format="%.17g", lineterminator="\n")
    quoted = table.assign(run=["a,b"] + table["run"].tolist()[1:])
    assert _fast_csv(quoted, header=False) is None  # pandas quotes it: leave it to pandas


# ---------------------------------------------------------------- compute frontier
def _hparam_configs_reference(rows):
    """(hyperparameter columns that vary, one hashable config per row), from the rows of one
    budget selected from the frame (the keys are compute_frontier's own)."""
    cols, keys = _hparam_keys(rows)
    varying = [c for c in cols if len(set(keys[c])) > 1]
    return varying, [tuple(keys[c][i] for c in varying) for i in range(len(rows))]


def _compute_frontier_reference(pts):
    """compute_frontier as it was before issue 27: each one-size budget selected from the
    frame, row by row (its budgets, notes and last step are compute_frontier's own helpers)."""
    order, ids, seeds = _budgets(pts)
    notes: list[str] = []
    if seeds is not None:
        sweep_out: list[Exclusion] = []
        n_seed = n_sweep = n_by_seed = 0
        next_id = 1
        swept: set[str] = set()
        for b in np.flatnonzero(seeds) + 1:
            rows = order[order["_budget"] == b]
            varying, configs = _hparam_configs_reference(rows)
            keep = np.ones(len(rows), bool)
            if varying:
                # A sweep at one size: the best configuration's runs (its seeds) stand for the
                # size; the mis-tuned ones would pull the law up.
                best_cfg = configs[int(np.argmin(rows["loss"].to_numpy(float)))]
                keep = np.array([k == best_cfg for k in configs])
                n_sweep += 1
                swept.update(varying)
                won = ", ".join(f"{c}={v:g}" if isinstance(v, float) else f"{c}={v}"
                                for c, v in zip(varying, best_cfg))
                sweep_out += [Exclusion(r, f"hyperparameter sweep: not the best "
                                           f"{'/'.join(varying)} of its model size and compute "
                                           f"budget (~{c:.3g} FLOPs; {won} has the lowest loss)")
                              for r, c in zip(rows["run"][~keep], rows["flops"][~keep])]
            if keep.sum() > 1:
                n_seed += int(seeds[b - 1] == 1)
                n_by_seed += int(seeds[b - 1] == 2)
            # Each kept run its own (negative) group, so the frontier step keeps them all.
            idx = rows.index[keep]
            order.loc[idx, "_budget"] = -np.arange(next_id, next_id + len(idx))
            next_id += len(idx)
            order = order.drop(index=rows.index[~keep])
        notes += _one_size_notes(order, n_seed, n_sweep, swept, len(sweep_out), n_by_seed)
    else:
        sweep_out = []
    return _frontier_of(pts, order, sweep_out, notes)


def _frontier_frames(seed: int) -> list[pd.DataFrame]:
    """Random final points: isoFLOP budgets, one-size budgets of seeds and of LR/batch
    sweeps (NaN and text hyperparameters too), budgets that chain within 5%."""
    rng = np.random.default_rng(seed)
    out = []
    for trial in range(40):
        rows = []
        for b in range(rng.integers(1, 9)):
            c = 1e18 * 3.0 ** b * rng.uniform(1, 1.04)
            kind = rng.choice(["iso", "seeds", "sweep", "single"])
            k = 1 if kind == "single" else int(rng.integers(2, 6))
            n = (np.full(k, 1e8 * 2.0 ** b) * rng.uniform(1, 1.04, k) if kind != "iso"
                 else 1e8 * 2.0 ** (b + np.arange(k)))
            lr = (rng.choice([1e-3, 2e-3, 4e-3], k) if kind == "sweep" else np.full(k, 1e-3))
            for i in range(k):
                rows.append(dict(run=f"b{b}-{i}", flops=c * rng.uniform(1, 1.01), params=n[i],
                                 loss=float(rng.choice([3.0, 3.1]) if trial % 5 == 0
                                            else rng.uniform(2.5, 3.5)), peak_lr=lr[i],
                                 batch_size=float(rng.choice([256, 512])) if trial % 3 == 0
                                 else 256.0,
                                 schedule=str(rng.choice(["cos", "wsd"])) if trial % 4 == 1
                                 else "cos"))
        frame = pd.DataFrame(rows).sample(frac=1.0, random_state=trial).reset_index(drop=True)
        if trial % 7 == 3:
            frame.loc[frame.index[:2], "peak_lr"] = np.nan
        if trial % 6 == 2:
            frame = frame.drop(columns=["peak_lr"]).assign(lr=frame["peak_lr"])
        if trial % 8 == 5:
            frame = frame.drop(columns="params")
        if trial % 5 == 1:      # seeds without N: distinct in most budgets, repeated in some
            frame = frame.drop(columns="params", errors="ignore").assign(
                seed=np.where(rng.random(len(frame)) < 0.8, np.arange(len(frame)), 0))
        out.append(frame)
    return out


def _same_frontier(pts):
    new, new_out, new_notes = compute_frontier(pts)
    ref, ref_out, ref_notes = _compute_frontier_reference(pts)
    pd.testing.assert_frame_equal(new, ref, check_exact=True)
    assert [(e.run, e.reason) for e in new_out] == [(e.run, e.reason) for e in ref_out]
    assert new_notes == ref_notes


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compute_frontier_on_arrays_is_the_row_by_row_frontier(seed):
    """Issue 27: one-size budgets (seeds kept, sweeps cut to their best configuration) read
    from arrays give the row-by-row code's frame, exclusions and notes exactly."""
    frames = _frontier_frames(seed)
    swept = 0
    for pts in frames:
        _same_frontier(pts)
        swept += any("hyperparameter sweep" in n for n in compute_frontier(pts)[2])
    assert swept >= 5    # the sweep branch was exercised


def test_compute_frontier_on_arrays_matches_on_the_bundled_ladders(data_dir):
    from bundled import load

    for name in ("misfitting2025-final", "marin-isoflop-dclm", "porian2024-rw", "gadre2024",
                 "epoch-chinchilla", "marin-delphi-dense"):
        pts, _ = load(name).final_points()
        _same_frontier(pts)


# ---------------------------------------------------------------- final points on lists
def test_final_points_names_each_left_out_run_with_its_reason():
    """final_points reads the run ids once as a list (issue 27): each branch that names a
    run (last row dropped as invalid, diverged, unfinished) still names the right one, and
    select's compute cut names the runs above it, in sorted run order."""
    frame = pd.DataFrame({
        "run": ["z", "z", "m", "m", "a", "a", "q", "q"],
        "step": [1.0, 2, 1, 2, 1, 2, 1, 2],
        "params": [1e6, 1e6, 2e6, 2e6, 3e6, 3e6, 4e6, 4e6],
        "tokens": [1e8, 2e8, 1e8, 2e8, 1e8, 2e8, 1e8, 2e8],
        "loss": [3.0, 2.9, 3.0, 3.5, 3.0, 2.8, 3.0, -1.0],   # m diverges; q's last row invalid
        "fraction": [0.5, 1.0, 0.5, 1.0, 0.5, 0.6, np.nan, 1.0],  # a stops at 60%
    })
    with pytest.warns(LadderWarning, match="dropped 1 row"):
        ladder = Ladder(frame, drop_invalid=True)
    assert ladder.cut_runs == {"q": 7}
    pts, excluded = ladder.final_points()
    assert pts["run"].tolist() == ["z"]
    reasons = {e.run: e.reason for e in excluded}
    assert [e.run for e in excluded] == ["a", "m", "q"]
    assert reasons["q"].startswith("unfinished: its last row (row 7) was dropped as invalid")
    assert reasons["m"].startswith("diverged: last loss 3.5 is")
    assert "unfinished" in reasons["a"]
    small = ladder.select(max_flops=1.3e15)
    assert small.runs == ["z"] and [e.run for e in small.exclusions[-3:]] == ["a", "m", "q"]
    assert [e.reason for e in small.exclusions[-3:]] == [
        f"compute {c} FLOPs above --fit-max-flops 1.3e+15" for c in ("3.6e+15", "2.4e+15", "2.4e+15")]
    with pytest.raises(LadderError, match=r"unknown run\(s\) \['nope'\]"):
        ladder.select(runs=["z", "nope"])


def _fingerprint_reference(ladder, t):
    """Ladder.fingerprint as pandas writes it: sort_values, then to_csv block by block."""
    import hashlib

    import delphi.inputs.ladder as lm
    cols = [c for c in lm.CANONICAL_COLUMNS if c in t.columns]
    order = [c for c in ("run", "step", "tokens", "flops") if c in cols]
    canon = t[cols].sort_values(order, kind="mergesort")
    digest = hashlib.sha256(f"unit={ladder.unit}\n".encode())
    for start in range(0, max(len(canon), 1), lm._FINGERPRINT_ROWS):
        block = canon.iloc[start:start + lm._FINGERPRINT_ROWS]
        digest.update(block.to_csv(index=False, header=start == 0, float_format="%.17g",
                                   lineterminator="\n").encode())
    return digest.hexdigest()


@pytest.mark.parametrize("rows", [None, 7])
def test_fingerprint_without_pandas_sort_is_the_pandas_hash(monkeypatch, rows):
    # The fast path (np.lexsort, columns written once) must hash pandas' exact text: ties in
    # every sort key (stable order), NaN keys (last), -0.0, nullable final, empty tables;
    # and leave to pandas what it would quote or a nullable integer column.
    import delphi.inputs.ladder as lm
    if rows is not None:
        monkeypatch.setattr(lm, "_FINGERPRINT_ROWS", rows)
    ladder = Ladder(table())
    rng = np.random.default_rng(1)
    n = 60
    t = pd.DataFrame({
        "run": rng.choice(["b", "a", "a-2", "é", "c.d", "A"], n),
        "params": rng.choice([1e6, 2e6, -0.0, 0.0], n),
        "tokens": rng.choice([1e8, 2e8, np.nan], n),
        "flops": rng.choice([1e15, 3e15], n),
        "loss": rng.random(n) * 4,
        "step": rng.choice([1.0, 2.0, np.nan, 2.0], n),
        "peak_lr": rng.choice([1e-3, np.nan], n),
        "batch_size": rng.integers(1, 4, n),
        "status": rng.choice(["finished", "crashed"], n),
        "final": pd.array(rng.choice([True, False, None], n), dtype="boolean"),
        "extra": rng.random(n),
    })
    fast_path = []
    real = lm._fast_fingerprint
    monkeypatch.setattr(lm, "_fast_fingerprint",
                        lambda *a: fast_path.append(real(*a)) or fast_path[-1])
    cases = [t, t.iloc[::-1], t.drop(columns=["step"]), t.iloc[:0], t.iloc[:1],
             t.assign(run=["x,y"] + t["run"].tolist()[1:]),            # quoted: pandas
             t.assign(step=pd.array([1] * (n - 1) + [None], dtype="Int64"))]   # pandas
    for case in cases:
        assert ladder.fingerprint(case) == _fingerprint_reference(ladder, case)
    assert [s is not None for s in fast_path] == [True] * 5 + [False, False]
    assert ladder.fingerprint() == _fingerprint_reference(ladder, ladder.table)
