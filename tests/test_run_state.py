"""Run state (issue 9, section 1): one rule for a run's state, contradictions as errors,
the not-annealed flag, every invalid row at once, and drop_invalid."""

from __future__ import annotations

import json
import math
import re

import pandas as pd
import pytest

import delphi
from delphi.cli import main
from delphi.errors import LadderWarning
from delphi.ladder import Ladder

# The input: `main` is at fraction 1 but marked final = false. Before, final = false
# was silently ignored when fraction = 1 and `main` entered the fit as a finished run.
CONTRADICTION = """run,step,tokens,lr,peak_lr,loss,fraction,final,flops
a,42149,2.64e12,0.000264,0.002140,2.277,1.0,true,3.168e22
b,105149,6.55e12,0.000264,0.002140,2.224,1.0,true,7.86e22
main,127500,8.02e12,0.002140,0.002140,2.256,1.0,false,9.624e22
"""
# The same ladder without the contradiction: `main` says it is final, but its last
# checkpoint is still at its peak LR while a and b decayed to 0.12 x peak.
AT_PEAK = CONTRADICTION.replace("1.0,false,9.624e22", "1.0,true,9.624e22")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_final_false_at_fraction_one_is_an_error_naming_the_row(tmp_path, capsys):
    path = write(tmp_path, "contradiction.csv", CONTRADICTION)
    with pytest.raises(delphi.LadderError,
                       match=r"run 'main' \(row 2\): marked final = false with fraction = 1"):
        delphi.load_ladder(path)
    code = main(["predict", str(path), "--target-flops", "1e23"])
    err = capsys.readouterr().err
    assert code == 1 and "run 'main' (row 2)" in err and "--drop-invalid" in err
    assert "Traceback" not in err


def test_final_false_without_fraction_still_excludes_the_run(tmp_path):
    # No contradiction without a fraction: final = false means unfinished, named as such.
    path = write(tmp_path, "unfinished.csv",
                 CONTRADICTION.replace(",fraction", "").replace(",1.0,", ","))
    finals, excluded = delphi.load_ladder(path).final_points()
    assert sorted(finals["run"]) == ["a", "b"]
    assert [e.run for e in excluded] == ["main"] and "final = false" in excluded[0].reason


# ---------------------------------------------------------------- status / state column
def _status_table(states):
    n = len(states)
    return pd.DataFrame({"run": [f"r{i}" for i in range(n)],
                         "flops": [1e18 * 3 ** i for i in range(n)],
                         "loss": [3.5 - 0.15 * i for i in range(n)], "status": states})


@pytest.mark.parametrize("state", ["crashed", "failed", "killed", "running", "preempted",
                                   "FAILED", "RUNNING", "DEP_FAILED", "Crashed "])
def test_a_run_that_did_not_finish_is_excluded_and_named_whatever_its_loss(state):
    # W&B and Marin states: a finite loss from a crashed/running run is not a final loss.
    states = ["finished", "SUCCESS", state, "finished", ""]
    # r4's empty status among runs that have one is counted as finished, and said so.
    stateless = (r"1 run\(s\) have no status .* while the other runs have one: 'r4'; "
                 r"they are counted as finished")
    with pytest.warns(LadderWarning, match=stateless):
        ladder = Ladder(_status_table(states))
    pts, excluded = ladder.final_points()
    assert sorted(pts["run"]) == ["r0", "r1", "r3", "r4"]       # empty status: no evidence
    assert [e.run for e in excluded] == ["r2"]
    assert f"status {state.strip()!r}" in excluded[0].reason
    assert "unfinished" in excluded[0].reason
    with pytest.warns(LadderWarning, match=stateless):
        ladder = Ladder(_status_table(states))
    pts, excluded = ladder.final_points(include_unfinished=True)
    assert len(pts) == 5 and excluded == []


def test_wandb_state_column_is_the_run_state(tmp_path):
    # A W&B runs-table export names the column "State".
    text = ("Name,parameter_count,throughput/total_tokens,eval/paloma/macro_loss,State\n"
            "r1,1e8,2e9,3.4,finished\nr2,2e8,4e9,3.2,crashed\nr3,4e8,8e9,3.03,finished\n")
    path = write(tmp_path, "wandb.csv", text)
    ladder = delphi.readers.read_wandb(path).to_ladder(name="w")
    assert "status" in ladder.table.columns
    pts, excluded = ladder.final_points()
    assert sorted(pts["run"]) == ["r1", "r3"]
    # The reason names the column as the export spells it (review item 13).
    assert excluded[0].run == "r2" and "State 'crashed'" in excluded[0].reason
    states = ladder.run_states().set_index("run")["state"].to_dict()
    assert states == {"r1": "finished", "r2": "unfinished", "r3": "finished"}


def test_manifest_runs_can_set_a_status(tmp_path):
    write(tmp_path, "runs.csv", "run,flops,loss\nd1,1e18,3.5\nd2,3e18,3.3\nd3,1e19,3.2\n"
                                "d4,3e19,3.0\n")
    manifest = write(tmp_path, "l.toml", 'name = "l"\ndescription = "x"\ncitation = "x"\n'
                     'metric = "loss"\nunit = "nats/token"\n[source]\nreader = "csv"\n'
                     'path = "runs.csv"\n[[runs]]\nmatch = "d4"\nstatus = "crashed"\n')
    # The manifest gives d4 a status and not the others: they are counted as finished.
    with pytest.warns(LadderWarning, match=r"3 run\(s\) have no status .*: 'd1', 'd2', 'd3'; "
                                           r"they are counted as finished"):
        pts, excluded = delphi.load_ladder(manifest).final_points()
    assert sorted(pts["run"]) == ["d1", "d2", "d3"]
    assert excluded[0].run == "d4" and "crashed" in excluded[0].reason


def test_an_unknown_status_is_invalid():
    with pytest.raises(delphi.LadderError,
                       match=r"run 'r1' \(row 1\): column 'status' has an unknown run state "
                             r"'half-done'"):
        Ladder(_status_table(["finished", "half-done", "finished"]))


# ---------------------------------------------------------------- contradictions
CKPT = dict(run=["x", "x", "y", "y"], step=[500.0, 1000, 500, 1000],
            flops=[1e18, 2e18, 3e18, 6e18], loss=[3.4, 3.3, 3.2, 3.1])


@pytest.mark.parametrize("extra, message", [
    (dict(final=[None, True, None, True], status=["crashed"] * 2 + ["finished"] * 2),
     r"run 'x' \(row 1\): marked final = true, but its status is 'crashed'"),
    (dict(status=["finished"] * 4, fraction=[0.25, 0.5, 0.5, 1.0]),
     r"run 'x' \(row 1\): status 'finished' but fraction = 0.5"),
    (dict(final=[None, False, None, None], status=["finished"] * 4),
     r"run 'x' \(row 1\): marked final = false, but its status is 'finished'"),
    (dict(status=["running"] * 2 + ["finished"] * 2, fraction=[0.5, 1.0, 0.5, 1.0]),
     r"run 'x' \(row 1\): status 'running' \(not a finished run\) but fraction = 1"),
    (dict(final=[None, True, None, True], fraction=[0.4, 0.8, 0.5, 1.0]),
     r"run 'x' \(row 1\): marked final = true at fraction = 0.8"),
    (dict(final=[None, False, None, True], total_steps=[1000.0] * 4),
     r"run 'x' \(row 1\): marked final = false at step 1000 of 1000 planned"),
    (dict(status=["finished"] * 4, total_steps=[2000.0, 2000, 1000, 1000]),
     r"run 'x' \(row 1\): status 'finished' but step 1000 of 2000 planned"),
])
def test_contradictory_run_state_is_an_error_naming_the_row(extra, message):
    with pytest.raises(delphi.LadderError, match=message):
        Ladder(pd.DataFrame({**CKPT, **extra}))


def test_last_step_against_the_planned_length():
    # Without a fraction, the last step against total_steps decides: 800 of 1000 is
    # unfinished; 999 (a 0-based counter) and 1000 reached the planned end.
    t = pd.DataFrame(dict(run=["u", "u", "z", "z", "o", "o"], step=[400.0, 800, 500, 999,
                                                                   500, 1000],
                          total_steps=[1000.0] * 6, flops=[1e18, 2e18, 3e18, 6e18, 1e19, 2e19],
                          loss=[3.4, 3.3, 3.2, 3.1, 3.0, 2.9]))
    ladder = Ladder(t)
    pts, excluded = ladder.final_points()
    assert sorted(pts["run"]) == ["o", "z"]
    assert [(e.run, e.reason) for e in excluded] == [
        ("u", "unfinished (step 800 of 1000 planned (total_steps)); final-loss laws need "
              "finished runs")]
    # Checkpoint laws read every run's checkpoints (final_points with unfinished runs).
    pts, excluded = ladder.final_points(include_unfinished=True)
    assert sorted(pts["run"]) == ["o", "u", "z"] and excluded == []


# ---------------------------------------------------------------- not annealed
def _power_at(e, c1, l1, c2, l2, c):
    """L(c) of the power law E + A C^-alpha through (c1, l1) and (c2, l2) with E = e."""
    alpha = math.log((l1 - e) / (l2 - e)) / math.log(c2 / c1)
    return e + (l2 - e) * (c / c2) ** (-alpha)


def test_a_last_checkpoint_at_peak_lr_is_not_a_final_loss(tmp_path, capsys):
    path = write(tmp_path, "at_peak.csv", AT_PEAK)
    ladder = delphi.load_ladder(path)
    pts, excluded = ladder.final_points()
    assert sorted(pts["run"]) == ["a", "b"]
    assert excluded[0].run == "main" and excluded[0].reason.startswith("not annealed")
    assert "1.00 x its peak_lr" in excluded[0].reason and "run 'a' ends at" in excluded[0].reason
    forecast = delphi.predict(ladder, {"flops": 1e23}, "power", fixed={"E": 1.5},
                              interval=None)
    expected = _power_at(1.5, 3.168e22, 2.277, 7.86e22, 2.224, 1e23)
    assert forecast.loss == pytest.approx(expected, rel=1e-6)
    # Fitted anyway when asked to include unfinished runs.
    pts, excluded = ladder.final_points(include_unfinished=True)
    assert sorted(pts["run"]) == ["a", "b", "main"] and excluded == []
    code = main(["predict", str(path), "--target-flops", "1e23", "--floor", "1.5",
                 "--interval", "none", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [e["run"] for e in out["fit"]["excluded"]] == ["main"]
    assert out["prediction"]["loss"] == pytest.approx(expected, rel=1e-6)


def test_no_flag_on_a_constant_schedule():
    # Every run ends at its peak: nothing decays, so nothing is left un-annealed.
    t = pd.DataFrame(dict(run=["a", "b", "c"], flops=[1e18, 1e19, 1e20], loss=[3.3, 3.0, 2.8],
                          lr=[1e-3] * 3, peak_lr=[1e-3] * 3))
    assert len(Ladder(t).final_points()[0]) == 3
    # A stated decaying schedule is evidence enough, even when every run ends at its peak.
    with pytest.raises(delphi.LadderError, match="no finished runs to fit.*not annealed"):
        Ladder(t, schedule="cosine:warmup=10,final=0.1").final_points()
    assert len(Ladder(t, schedule="constant").final_points()[0]) == 3


def test_decay_seen_within_a_run_flags_another_run_ending_at_peak():
    # Run a decays to 0.1 x peak after its peak; run b's last checkpoint is still at peak.
    t = pd.DataFrame(dict(run=["a", "a", "a", "b", "b"], step=[10.0, 50, 100, 10, 50],
                          flops=[1e17, 5e17, 1e18, 1e18, 5e18], loss=[3.6, 3.4, 3.2, 3.3, 3.1],
                          lr=[1e-3, 1e-3, 1e-4, 1e-3, 1e-3], peak_lr=[1e-3] * 5))
    pts, excluded = Ladder(t).final_points()
    assert list(pts["run"]) == ["a"] and excluded[0].run == "b"
    assert "not annealed" in excluded[0].reason


# ---------------------------------------------------------------- every invalid row at once
def _many_bad(n_bad: int) -> pd.DataFrame:
    n = 30
    loss = [3.0 - 0.01 * i for i in range(n)]
    for i in range(n_bad):
        loss[i] = float("nan") if i % 2 else -1.0
    return pd.DataFrame({"run": [f"r{i:02d}" for i in range(n)],
                         "flops": [1e18 * 1.2 ** i for i in range(n)], "loss": loss})


def test_every_invalid_row_is_reported_at_once_first_20_and_the_count():
    t = _many_bad(24)
    # And a duplicate: a second row of run r28 at the same flops.
    t.loc[29, "run"] = "r28"
    t.loc[29, "flops"] = t.loc[28, "flops"]
    with pytest.raises(delphi.LadderError) as info:
        Ladder(t, name="many")
    text = str(info.value)
    # 24 bad losses + the 2 rows of the duplicate = 26 invalid rows, 25 problems, in
    # 24 + 1 = 25 runs (r00..r23 and r28), one of them (r28's duplicate) invalid as a whole.
    assert text.startswith("ladder 'many' has 26 invalid row(s) in 25 run(s) (1 run(s) "
                           "invalid as a whole), 25 problem(s); the first 20 listed (rows "
                           "count the records from 0")
    listed = [line for line in text.splitlines() if line.startswith("  run ")]
    assert len(listed) == 20
    assert listed[0] == "  run 'r00' (row 0): column 'loss' must be > 0, got -1"
    assert listed[1] == "  run 'r01' (row 1): column 'loss' is empty or NaN, got nan"
    assert "... and 5 more problem(s)" in text and "--drop-invalid" in text


# How a dropped row is tagged through the API: both spellings (delphi.errors.option).
BY = "drop_invalid=True (CLI --drop-invalid)"


def test_drop_invalid_drops_and_lists_each_row_and_fits_the_rest(tmp_path):
    t = _many_bad(3)
    dropped3 = re.escape(f"{BY} dropped 3 row(s) (3 invalid row(s))")
    with pytest.warns(LadderWarning, match=dropped3):
        ladder = Ladder(t, name="some", drop_invalid=True)
    assert ladder.runs == [f"r{i:02d}" for i in range(3, 30)]
    dropped = [(e.run, e.reason) for e in ladder.exclusions]
    assert dropped == [
        ("r00", f"invalid row 0 dropped by {BY}: column 'loss' must be > 0, got -1"),
        ("r01", f"invalid row 1 dropped by {BY}: column 'loss' is empty or NaN, got nan"),
        ("r02", f"invalid row 2 dropped by {BY}: column 'loss' must be > 0, got -1"),
    ]
    assert any(f"{BY} dropped 3 row(s)" in w for w in ladder.warnings)
    # The right value: the same fit on the 27 valid rows alone.
    clean = Ladder(t.iloc[3:].reset_index(drop=True), name="clean")
    fit = delphi.fit(ladder, "power", fixed={"E": 2.0})
    ref = delphi.fit(clean, "power", fixed={"E": 2.0})
    assert fit.params == pytest.approx(ref.params, rel=1e-9)
    assert [e.run for e in fit.exclusions][:3] == ["r00", "r01", "r02"]
    # Through the readers too.
    path = write(tmp_path, "some.csv", t.to_csv(index=False))
    with pytest.warns(LadderWarning, match=dropped3):
        loaded = delphi.load_ladder(path, drop_invalid=True)
    assert [e.run for e in loaded.exclusions] == ["r00", "r01", "r02"]


def test_a_run_whose_last_row_is_dropped_has_no_final_loss():
    t = pd.DataFrame(dict(run=["a", "a", "b", "b", "c"], step=[1.0, 2, 1, 2, 2],
                          flops=[1e17, 2e17, 1e18, 2e18, 1e19],
                          loss=[3.5, float("nan"), 3.2, 3.1, 2.9]))
    with pytest.warns(LadderWarning, match=re.escape(f"{BY} dropped 1 row(s) (1 invalid row(s))")):
        ladder = Ladder(t, drop_invalid=True)
    assert ladder.cut_runs == {"a": 1}
    pts, excluded = ladder.final_points()
    assert sorted(pts["run"]) == ["b", "c"]
    assert excluded[0].run == "a" and "its last row (row 1) was dropped" in excluded[0].reason


def test_contradictory_run_dropped_as_a_whole(tmp_path, capsys):
    path = write(tmp_path, "contradiction.csv", CONTRADICTION)
    with pytest.warns(LadderWarning, match=re.escape(f"{BY} dropped 1 row(s) (1 invalid run(s), "
                                                     "all their rows)")):
        ladder = delphi.load_ladder(path, drop_invalid=True)
    assert ladder.runs == ["a", "b"]
    assert ladder.exclusions[0].run == "main"
    assert ladder.exclusions[0].reason.startswith(f"invalid run dropped by {BY}: marked "
                                                  "final = false with fraction = 1")
    code = main(["fit", str(path), "--law", "power", "--floor", "1.5", "--drop-invalid",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["fit"]["excluded"][0]["run"] == "main"
    # The command line names the flag only (issue 10), in JSON and in text.
    assert out["fit"]["excluded"][0]["reason"].startswith("invalid run dropped by --drop-invalid:")
    code = main(["fit", str(path), "--law", "power", "--floor", "1.5", "--drop-invalid"])
    text = capsys.readouterr().out
    assert code == 0 and "excluded   main: invalid run dropped by --drop-invalid: marked" in text
    assert "drop_invalid" not in text


def test_drop_invalid_is_accepted_by_every_ladder_command():
    from delphi.cli.main import build_parser
    parser = build_parser()[0]
    for argv in (["predict", "x.csv"], ["fit", "x.csv"], ["backtest", "x.csv"],
                 ["complete", "x.csv", "--run", "a"], ["hparams", "x.csv"],
                 ["isoflop", "x.csv"], ["optimal", "x.csv"],
                 ["register", "x.csv", "--registry", "r.jsonl", "--id", "p1"]):
        try:
            args = parser.parse_args(argv + ["--drop-invalid"])
        except SystemExit:
            pytest.fail(f"{argv[0]} does not take --drop-invalid")
        assert args.drop_invalid is True


# Issue 9, section 3: a rung in bits per byte inside a nats ladder (0.91 where the trend says
# about 2.7). Before, it was fitted: E went to 0 and the 90% interval was [0.38, 16.9].
MIXED_UNITS = """run,flops,loss
moe-v16-1e18,1e18,3.522
moe-v16-3e18,3e18,3.339
moe-v16-1e19,1e19,3.154
moe-v16-3e19,3e19,3.000
moe-v16-1e20,1e20,2.848
moe-v16-3e20,3e20,0.91
"""


def test_a_rung_far_below_the_trend_is_excluded_and_named(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_text(MIXED_UNITS)
    forecast = delphi.predict(delphi.load_ladder(path), {"flops": 1e22}, "power")
    below = [e for e in forecast.fit.exclusions if e.run == "moe-v16-3e20"]
    assert below and "far below the trend" in below[0].reason and "bits per byte" in below[0].reason
    # The right value: the same forecast from the five consistent rungs alone.
    clean = tmp_path / "clean.csv"
    clean.write_text("".join(MIXED_UNITS.splitlines(keepends=True)[:-1]))
    reference = delphi.predict(delphi.load_ladder(clean), {"flops": 1e22}, "power")
    assert forecast.loss == pytest.approx(reference.loss, rel=1e-9)
    assert forecast.fit.params["E"] > 1.0  # not driven to 0 by the stray rung


# ------------------------------------------------ review of issue 9: items 12, 13, 17, 19, 20
FINALS = """run,flops,loss,final,fraction
a,1e18,3.5,yes,
b,3e18,3.3,1,
c,1e19,3.1,TRUE,
d,3e19,2.95,t,
e,1e20,2.85,no,
f,3e20,2.75,maybe,
g,1e21,2.66,,1.2
h,3e21,2.58,,-0.1
i,1e22,2.5,True,0.99
"""


def test_the_invalid_rows_error_counts_the_runs_they_belong_to(tmp_path, capsys):
    # f (final 'maybe'), g (fraction 1.2), h (fraction -0.1), i (final at 0.99): 4 rows of 4
    # different runs; i's contradiction is a problem of its whole run.
    path = write(tmp_path, "finals.csv", FINALS)
    with pytest.raises(delphi.LadderError) as info:
        delphi.load_ladder(path)
    assert str(info.value).startswith("ladder 'finals' has 4 invalid row(s) in 4 run(s) (1 run(s) "
                                      "invalid as a whole), 4 problem(s); all listed")
    code = main(["predict", str(path), "--target-flops", "1e23"])
    assert code == 1 and "4 invalid row(s) in 4 run(s)" in capsys.readouterr().err


def test_error_row_numbers_are_data_rows_from_zero_and_say_so(tmp_path):
    # The message's "row 5" is the 6th data row: line 5 + 2 of the file (after the header).
    path = write(tmp_path, "finals.csv", FINALS)
    with pytest.raises(delphi.LadderError) as info:
        delphi.load_ladder(path)
    text = str(info.value)
    assert "rows count the records from 0: row 0 is the first data row (line 2 of a CSV" in text
    assert "run 'f' (row 5): column 'final' must be true/false, got 'maybe'" in text
    assert path.read_text().splitlines()[5 + 1].startswith("f,")


def test_an_unknown_state_names_the_column_as_the_file_spells_it(tmp_path, capsys):
    path = write(tmp_path, "state.csv", "run,flops,loss,State\na,1e18,3.5,finished\n"
                                        "b,3e18,3.3,weird\nc,1e19,3.1,finished\n")
    with pytest.raises(delphi.LadderError) as info:
        delphi.load_ladder(path)
    text = str(info.value)
    assert text.startswith("run 'b' (row 1): column 'State' has an unknown run state 'weird'")
    assert "delphi.runstate" not in text and "'status'" not in text
    code = main(["predict", str(path), "--target-flops", "1e21"])
    err = capsys.readouterr().err
    assert code == 1 and "column 'State'" in err and "delphi.runstate" not in err


def test_runs_without_a_state_among_runs_with_one_are_named(tmp_path, capsys):
    # i has an empty State while the others have one: counted as finished, and said so.
    text = ("run,flops,loss,State\na,1e18,3.5,finished\nb,3e18,3.3,finished\n"
            "c,1e19,3.1,crashed\nd,3e19,2.95,finished\ni,1e20,2.85,\n")
    path = write(tmp_path, "state.csv", text)
    with pytest.warns(delphi.LadderWarning, match="1 run.s. have no State"):
        ladder = delphi.load_ladder(path)
    assert ladder.warnings == [
        "ladder 'state': 1 run(s) have no State (empty or unknown at their last row) while the "
        "other runs have one: 'i'; they are counted as finished for lack of a state (give "
        "their State if they did not finish)"]
    points, _ = ladder.final_points()
    assert sorted(points["run"]) == ["a", "b", "d", "i"]
    code = main(["predict", str(path), "--target-flops", "1e21", "--floor", "1.5"])
    out = capsys.readouterr().out
    assert code == 0 and "have no State" in out and "'i'" in out
    # Every run with a state, or none with one: nothing to say.
    assert Ladder(_status_table(["finished"] * 4)).warnings == []
    assert Ladder(_status_table([None] * 4)).warnings == []


def test_ladder_warnings_point_at_the_callers_line(tmp_path):
    import warnings as w
    # A flops column 3x 6·N·D warns; the warning's location must be this file, not delphi's.
    t = pd.DataFrame({"run": ["a", "b"], "params": [1e8, 2e8], "tokens": [2e9, 4e9],
                      "flops": [3.6e18, 1.44e19], "loss": [3.4, 3.2]})
    path = tmp_path / "k3.csv"
    t.to_csv(path, index=False)
    for build in (lambda: Ladder(t), lambda: delphi.load_ladder(path)):
        with w.catch_warnings(record=True) as rec:
            w.simplefilter("always")
            build()
        ours = [r for r in rec if issubclass(r.category, delphi.LadderWarning)]
        assert ours and all(r.filename == __file__ for r in ours)


def test_repr_after_drop_invalid_says_what_was_dropped():
    t = _status_table(["finished"] * 4)
    t.loc[1, "loss"] = -1.0                          # one bad row
    with pytest.warns(delphi.LadderWarning, match=re.escape(f"{BY} dropped 1 row(s)")):
        ladder = Ladder(t, name="x", drop_invalid=True)
    assert repr(ladder) == ("Ladder('x', runs=3, rows=3, metric='loss', unit='nats/token', "
                            "dropped_invalid=1 row(s))")
    assert str(ladder) == repr(ladder)
    assert "dropped" not in repr(Ladder(_status_table(["finished"] * 4), name="x"))


def test_step_zero_rows_with_no_tokens_are_initial_evaluations_left_out():
    # A training log's first line is an eval at step 0, tokens 0: not an invalid count.
    frame = pd.DataFrame({"run": ["a"] * 3 + ["b"] * 3, "step": [0, 500, 1000] * 2,
                          "tokens": [0, 5e8, 1e9, 0, 1e9, 2e9], "params": [1e8] * 3 + [2e8] * 3,
                          "loss": [10.8, 3.6, 3.4, 10.8, 3.4, 3.2]})
    step0 = r"2 step-0 row\(s\) .*rows 0, 3\) left out"
    with pytest.warns(delphi.LadderWarning, match=step0):
        ladder = delphi.Ladder(frame)
    assert len(ladder.table) == 4 and (ladder.table["step"] > 0).all()
    points, _ = ladder.final_points()
    assert dict(zip(points["run"], points["loss"])) == {"a": 3.4, "b": 3.2}
    # A zero count elsewhere is still invalid, naming its row.
    bad = frame.assign(tokens=[0, 0, 1e9, 0, 1e9, 2e9])
    # (Rows 0 and 3 are still step-0 evaluations, left out and said so before the refusal.)
    with pytest.warns(delphi.LadderWarning, match=step0), \
            pytest.raises(delphi.LadderError, match=r"row 1\b.*tokens"):
        delphi.Ladder(bad)
