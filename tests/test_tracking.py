"""Issue 26: predict --curve, registering a curve band, and tracking a run against it.

One small synthetic ladder (checkpoint curves from the chinchilla-ckpt law with 0.1% noise)
and one registered curve forecast are built once per module; each test tracks a simulated
target run on its own copy of that registry.
"""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.registry.tracking import read_run_log, track
from delphi.forecasting.target_curve import predict_curve
from delphi.inputs.schedules import Schedule
from delphi.laws import CHINCHILLA_CKPT
from delphi.presentation.cli.main import main

TRUE = {"E": 1.8, "A": 400.0, "B": 2000.0, "F": 0.25, "alpha": 0.34, "beta": 0.37, "gamma": 1.5}
SPEC = "cosine:warmup=20,final=0.1"
BATCH = 2.0 ** 20
TARGET_N, TARGET_STEPS = 1.6e9, 4000


def _curve_rows(run: str, n: float, steps: int, every: int, rng) -> pd.DataFrame:
    sched = Schedule.parse(SPEC, peak_lr=1e-3, total_steps=steps)
    s = np.arange(every, steps + 1, every)
    h = sched.lr_at(s) / 1e-3
    loss = CHINCHILLA_CKPT.predict(TRUE, {"params": np.full(s.size, n), "tokens": s * BATCH,
                                          "h": h})
    loss = loss * np.exp(rng.normal(0, 0.001, s.size))
    return pd.DataFrame({"run": run, "params": n, "tokens": s * BATCH, "step": s,
                         "lr": h * 1e-3, "peak_lr": 1e-3, "total_steps": steps, "loss": loss})


@pytest.fixture(scope="module")
def ladder_csv(tmp_path_factory):
    rng = np.random.default_rng(26)
    parts = [_curve_rows(f"n{int(n / 1e6)}m-s{steps}", n, steps, steps // 20, rng)
             for n in (5e7, 1e8, 2e8, 4e8) for steps in (600, 1500)]
    path = tmp_path_factory.mktemp("ladder") / "ladder.csv"
    pd.concat(parts, ignore_index=True).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def registered(ladder_csv, tmp_path_factory):
    """A registry holding one curve prediction of the target (delta-method band)."""
    cf = predict_curve(delphi.load_ladder(ladder_csv), {"params": TARGET_N, "steps": TARGET_STEPS,
                                         "batch_size": BATCH, "schedule": SPEC},
                       interval="delta", off_trend=False, identify=False, points=40,
                       completion_runs=4)
    path = tmp_path_factory.mktemp("reg") / "preds.jsonl"
    delphi.Registry(path).register(cf, id="hero")
    return path, cf


@pytest.fixture
def registry(registered, tmp_path):
    path = tmp_path / "preds.jsonl"
    shutil.copy(registered[0], path)
    return path


def _run_log(cf, drift_from: float | None = None, rate: float = 0.08, seed: int = 1):
    """A simulated target run logged every 200 steps: on the registered curve with noise of a
    quarter of the band's half-width, or drifting up by ``rate`` x (fraction - drift_from)
    in log loss after ``drift_from``."""
    f = np.array([p.fraction for p in cf.points])
    mid = np.array([p.loss for p in cf.points])
    half = np.log(cf.points[-1].upper / cf.points[-1].loss)
    steps = np.arange(200, TARGET_STEPS + 1, 200)
    frac = steps / TARGET_STEPS
    base = np.interp(frac, f, mid)
    noise = np.random.default_rng(seed).normal(0, half / 4, steps.size)
    drift = 0 if drift_from is None else rate * np.clip(frac - drift_from, 0, None)
    return pd.DataFrame({"step": steps, "loss": base * np.exp(noise + drift)})


def test_curve_forecast_ends_at_the_final_forecast(registered):
    path, cf = registered
    pts = cf.points
    assert pts[-1].fraction == 1.0 and pts[-1].loss == cf.loss
    assert pts[-1].lower <= cf.lower and pts[-1].upper >= cf.upper
    losses = np.array([p.loss for p in pts])
    assert np.all(np.diff(losses) < 0)                      # a cosine run's loss falls
    assert all(p.lower < p.loss < p.upper for p in pts)
    # the curve follows the generating law (0.1% noise on the ladder; 4x the largest N)
    truth = CHINCHILLA_CKPT.predict(TRUE, {"params": np.full(len(pts), TARGET_N),
                                           "tokens": np.array([p.tokens for p in pts]),
                                           "h": Schedule.parse(SPEC, peak_lr=1.0,
                                                               total_steps=TARGET_STEPS)
                                           .lr_at([p.step for p in pts])})
    assert np.max(np.abs(losses / truth - 1)) < 0.01
    d = cf.to_dict()["prediction"]
    assert set(d["curve"][0]) == {"fraction", "step", "tokens", "loss", "lower", "upper"}
    assert d["completion_error"] and d["completion_error"][0]["rms_log_error"] > \
        d["completion_error"][-1]["rms_log_error"]
    entry = delphi.Registry(path).get("hero")
    assert len(entry.forecast.band.lower) == len(pts) == len(entry.forecast.curve)
    assert entry.forecast.band.completion_error


def test_on_track_run_never_alarms(registry, registered):
    res = track(registry, "hero", _run_log(registered[1]))
    assert not res.alarm and res.alarm_step is None
    assert res.n_recorded == len(res.checkpoints) == 16   # from 25% of the run on
    inside = np.mean([c.inside for c in res.checkpoints])
    assert inside > 0.9
    # revised forecast: within its interval of the truth-following run's end, and narrower
    last = res.checkpoints[-1].revised
    assert last.lower <= res.checkpoints[-1].loss <= last.upper
    assert last.upper - last.lower < registered[1].upper - registered[1].lower
    assert delphi.Registry(registry).verify().ok


def test_drifting_run_alarms_at_the_third_checkpoint_out_of_band(registry, registered):
    cf = registered[1]
    log = _run_log(cf, drift_from=0.4)
    res = track(registry, "hero", log, patience=3)
    # expected: the first step where 3 consecutive scored checkpoints are above the band,
    # from the registered band interpolated at each checkpoint
    entry = delphi.Registry(registry).get("hero")
    f = [x for x, _ in entry.forecast.curve]
    frac = log["step"].to_numpy() / TARGET_STEPS
    scored = frac >= f[0]
    upper = np.interp(frac, f, entry.forecast.band.upper)
    lower = np.interp(frac, f, entry.forecast.band.lower)
    out = ((log["loss"] > upper) | (log["loss"] < lower)).to_numpy()[scored]
    run = np.convolve(out.astype(int), np.ones(3, int), mode="valid")
    expected = int(log["step"].to_numpy()[scored][np.flatnonzero(run == 3)[0] + 2])
    assert res.alarm and res.alarm_step == expected
    assert frac[log["step"] == expected][0] > 0.4
    before = [c for c in res.checkpoints if c.step < expected]
    assert not any(c.alarm for c in before)
    assert all(c.alarm for c in res.checkpoints if c.step >= expected)


def test_tracking_twice_adds_no_duplicates(registry, registered):
    log = _run_log(registered[1])
    first = track(registry, "hero", log.iloc[:8])
    second = track(registry, "hero", log)
    third = track(registry, "hero", log)
    reg = delphi.Registry(registry)
    fractions = [e.outcome.fraction for e in reg.outcomes("hero")]
    assert len(fractions) == len(set(fractions)) == len(third.checkpoints)
    assert second.n_recorded == len(second.checkpoints) - len(first.checkpoints)
    assert third.n_recorded == 0
    assert [c.to_dict()["revised"] for c in third.checkpoints] == \
        [c.to_dict()["revised"] for c in second.checkpoints]
    assert reg.verify().ok


def test_killed_follow_loses_no_recorded_outcome(registry, registered, tmp_path):
    log = _run_log(registered[1])
    csv = tmp_path / "run.csv"
    log.iloc[:6].to_csv(csv, index=False)
    grown = iter([9, 14, len(log)])
    seen = []

    def sleep(_):            # the run writes more checkpoints while the tracker waits
        log.iloc[:next(grown)].to_csv(csv, index=False)

    def killed(cp):
        seen.append(cp)
        if len(seen) == 12:
            raise KeyboardInterrupt   # killed between two checkpoints

    with pytest.raises(KeyboardInterrupt):
        track(registry, "hero", csv, follow=True, interval=1, sleep=sleep,
              on_checkpoint=killed)
    reg = delphi.Registry(registry)
    assert len(reg.outcomes("hero")) == 12 and reg.verify().ok
    # every checkpoint reported before the kill is in the registry, with its loss
    recorded = {round(e.outcome.fraction, 12): e.outcome.actual for e in reg.outcomes("hero")}
    assert all(recorded[round(c.fraction, 12)] == c.loss for c in seen)
    log.to_csv(csv, index=False)            # the run went on; tracking again catches up
    rest = track(registry, "hero", csv)
    assert rest.n_recorded == len(rest.checkpoints) - 12 == 4
    assert len(reg.outcomes("hero")) == len(rest.checkpoints)


def test_cli_track_json_and_alarm_exit(registry, registered, tmp_path, capsys):
    csv = tmp_path / "run.csv"
    _run_log(registered[1], drift_from=0.4).to_csv(csv, index=False)
    code = main(["track", "--registry", str(registry), "--id", "hero", str(csv), "--json",
                 "--patience", "2"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 3 and doc["alarm"] is True and doc["id"] == "hero"
    assert doc["delphi_version"] == delphi.__version__
    keys = {"step", "fraction", "loss", "z", "pit", "inside", "revised"}
    assert keys <= set(doc["checkpoints"][0])
    assert set(doc["checkpoints"][0]["revised"]) >= {"loss", "lower", "upper"}
    # --follow: JSON Lines, one record per checkpoint, all recorded before: none new
    code = main(["track", "--registry", str(registry), "--id", "hero", str(csv), "--json",
                 "--follow", "--interval", "1", "--patience", "2"])
    lines = capsys.readouterr().out.strip().splitlines()
    records = [json.loads(x) for x in lines]
    *records, summary = records         # the last record closes the stream
    assert code == 3 and records and not any(r["recorded"] for r in records)
    assert records[-1]["alarm"] and records[-1]["step"] == doc["alarm_step"]
    assert summary["summary"]["alarm"] and summary["summary"]["alarm_step"] == doc["alarm_step"]
    assert summary["summary"]["n_recorded"] == 0 and "notes" in summary["summary"]
    # each line is read alone: every record says which delphi wrote it
    assert all(r["delphi_version"] == delphi.__version__ for r in [*records, summary])


def test_cli_follow_json_interrupted_ends_the_stream_with_one_line(registry, registered,
                                                                   tmp_path, capsys,
                                                                   monkeypatch):
    # Killed while it waits for the next read: the error used to be an indented document
    # spread over 6 lines of the JSON Lines stream, which a line-by-line reader cannot parse.
    import delphi.registry.tracking as tracking

    csv = tmp_path / "run.csv"
    _run_log(registered[1]).iloc[:8].to_csv(csv, index=False)

    def stopped(_):
        raise KeyboardInterrupt

    real = tracking.track
    monkeypatch.setattr(tracking, "track", lambda *a, **k: real(*a, **k, sleep=stopped))
    code = main(["track", "--registry", str(registry), "--id", "hero", str(csv), "--json",
                 "--follow", "--interval", "1"])
    lines = capsys.readouterr().out.strip().splitlines()
    *records, last = [json.loads(x) for x in lines]
    assert code == 130 and len(records) == 4 and all(r["recorded"] for r in records)
    assert last["error"]["type"] == "Interrupted" and last["delphi_version"] == delphi.__version__
    assert "records above were written" in last["error"]["message"]
    assert len(delphi.Registry(registry).outcomes("hero")) == 4
    # without --follow the JSON error is still the usual indented document
    main(["track", "--registry", str(registry), "--id", "hero", str(tmp_path / "no.csv"),
          "--json"])
    out = capsys.readouterr().out
    assert out.startswith("{\n") and json.loads(out)["error"]["type"]


def test_run_log_errors_name_the_column(tmp_path):
    csv = tmp_path / "run.csv"
    pd.DataFrame({"step": [1, 2], "val": [3.0, 2.9]}).to_csv(csv, index=False)
    with pytest.raises(delphi.LadderError, match="no loss column"):
        read_run_log(csv)
    table, _ = read_run_log(csv, loss_column="val")
    assert table["loss"].tolist() == [3.0, 2.9]


def test_run_log_step_that_is_not_a_number_is_named_not_called_empty(tmp_path):
    # The step 'abc' used to be reported as "without a loss or step (empty or NaN)".
    csv = tmp_path / "run.csv"
    csv.write_text("step,loss\n100,3.1\nabc,3.0\n300,2.9\n,2.8\n")
    table, notes = read_run_log(csv)
    assert table["step"].tolist() == [100.0, 300.0]
    assert any("1 log row with a step that is not a number left out (e.g. 'abc' at row 1; rows "
               "count the records from 0" in n for n in notes)
    assert any("1 log row(s) without a loss or step (empty or NaN)" in n for n in notes)


def test_cli_track_empty_stdin_says_to_pipe_the_run_log(registry, capsys, monkeypatch):
    # It used to say "no runs ... e.g. `cat runs.csv | delphi predict - --target-flops 1e22`".
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main(["track", "--registry", str(registry), "--id", "hero", "-"])
    err = capsys.readouterr().err
    assert code == 1 and "no run log on standard input (it is empty)" in err
    assert "delphi track --registry" in err and "delphi predict" not in err


def test_tracking_needs_a_curve_band(tmp_path, registered):
    reg = delphi.Registry(tmp_path / "r.jsonl")
    reg.register(registered[1].forecast, id="no-curve")
    with pytest.raises(delphi.RegistryError, match="no forecast curve with a band"):
        track(reg, "no-curve", pd.DataFrame({"step": [1], "loss": [3.0]}))


def test_cli_predict_curve_json(ladder_csv, capsys):
    code = main(["predict", str(ladder_csv), "--target-params", str(TARGET_N),
                 "--target-steps", str(TARGET_STEPS), "--target-batch", str(BATCH),
                 "--target-schedule", SPEC, "--curve", "--curve-points", "12",
                 "--interval", "delta", "--level", "0.8", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["law"] == "chinchilla-ckpt"
    curve = doc["prediction"]["curve"]
    assert len(curve) == 12 and curve[-1]["fraction"] == 1.0
    assert curve[-1]["loss"] == doc["prediction"]["loss"]
    # the band at the end holds the final interval (widened by the size band where the law's
    # error one size up calls for it, test_track_size_band.py)
    assert curve[-1]["lower"] <= doc["prediction"]["lower"] and doc["prediction"]["level"] == 0.8
    assert curve[-1]["upper"] >= doc["prediction"]["upper"]
    assert all(c["lower"] < c["loss"] < c["upper"] for c in curve)
    assert [c["step"] for c in curve] == sorted(c["step"] for c in curve)
    # a final-loss law has no curve: a clear error, exit 1
    code = main(["predict", str(ladder_csv), "--target-params", str(TARGET_N),
                 "--target-steps", str(TARGET_STEPS), "--target-batch", str(BATCH),
                 "--curve", "--law", "chinchilla"])
    assert code == 1 and "checkpoint law" in capsys.readouterr().err


def test_registry_page_draws_band_and_revised_forecast(registry, registered):
    from delphi.registry.tracking import revised_history
    from delphi.presentation.report import registry_page

    res = track(registry, "hero", _run_log(registered[1]).iloc[:12])
    reg = delphi.Registry(registry)
    history = revised_history(reg.get("hero"), [(e.outcome.fraction, e.outcome.actual)
                                                for e in reg.outcomes("hero")])
    # recomputed from the registry alone: what track printed
    assert [r.to_dict() for _, r in history] == [c.revised.to_dict() for c in res.checkpoints]
    page = registry_page(registry).html
    assert 'id="forecast-band' in page or "forecast-band" in page
    assert "revised-forecast" in page


def test_an_implausible_loss_anywhere_in_the_log_records_nothing(registry, registered):
    # Before (a fresh user): a log whose third checkpoint read 500 recorded the first two,
    # printed nothing and failed naming neither the step nor the file.
    log = _run_log(registered[1])
    log.loc[len(log) // 2, "loss"] = 500.0
    path = registry.parent / "bad-run.csv"
    log.to_csv(path, index=False)
    before = registry.read_bytes()
    with pytest.raises(delphi.LadderError, match=r"bad-run\.csv'?: loss 500 at step \d+ is not a "
                                          r"plausible loss .*nothing was recorded"):
        track(registry, "hero", path)
    assert registry.read_bytes() == before
    # repeated and non-positive steps are said, not dropped silently
    twice = pd.concat([log.iloc[:3], log.iloc[2:3].assign(loss=log["loss"].iloc[2] * 1.001),
                       pd.DataFrame({"step": [0], "loss": [5.0]})]).drop(index=len(log) // 2,
                                                                           errors="ignore")
    _, notes = read_run_log(twice)
    assert any("1 repeated step" in n for n in notes) and any("step 0 or below" in n
                                                              for n in notes)


def test_a_changed_loss_and_steps_past_the_end_are_said(registry, registered):
    # Before (a fresh user): a log whose loss at a recorded step changed was shown with the old
    # loss and no word; checkpoints past the planned end vanished silently.
    log = _run_log(registered[1]).iloc[:8]
    track(registry, "hero", log)
    again = log.assign(loss=log["loss"] * 1.05)
    again = pd.concat([again, pd.DataFrame({"step": [TARGET_STEPS + 200], "loss": [2.0]})])
    res = track(registry, "hero", again)
    assert res.n_recorded == 0
    assert any("differs from the outcome recorded before" in n for n in res.notes)
    assert any("past the planned end" in n for n in res.notes)


def test_cli_track_reads_the_log_from_standard_input(registry, registered, monkeypatch,
                                                     capsys):
    # Before (a fresh user): `... | delphi track ... -` said "run log '-': no such file".
    import io
    text = _run_log(registered[1]).iloc[:6].to_csv(index=False)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["track", "--registry", str(registry), "--id", "hero", "-", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["checkpoints"] and all(c["recorded"] for c in doc["checkpoints"])
    assert main(["track", "--registry", str(registry), "--id", "hero", "-", "--follow"]) == 2
    assert "standard input ('-') is read once" in capsys.readouterr().err


def test_a_revision_from_the_ladder_alone_says_why(registry, registered):
    # Before (a new user): the first checkpoints' revision stayed the ladder's (weight 1.00)
    # with no word on why, even for a run far outside the band.
    log = _run_log(registered[1]).iloc[:6]          # 25%..35% of the run: too few to complete
    res = track(registry, "hero", log)
    last = res.checkpoints[-1].revised
    assert last.run_only is None and last.ladder_weight == 1.0
    said = [n for n in res.to_dict()["notes"] if "the ladder's alone" in n]
    assert said and "not fitted yet" in said[0] and said[0] in res.report()
    full = track(registry, "hero", _run_log(registered[1]))    # the whole run: no such note
    assert full.checkpoints[-1].revised.run_only is not None
    assert not [n for n in full.to_dict()["notes"] if "the ladder's alone" in n]


def test_tracking_into_a_registry_that_does_not_exist_says_so(tmp_path):
    with pytest.raises(delphi.RegistryError, match="no registry at .*missing.jsonl"):
        track(tmp_path / "missing.jsonl", "hero", pd.DataFrame({"step": [1], "loss": [3.0]}))


def test_tracking_repr_is_short(registry, registered):
    res = track(registry, "hero", _run_log(registered[1]).iloc[:3])
    assert len(repr(res)) < 300 and repr(res).startswith("Tracking(id='hero', checkpoints=")


def test_run_log_rows_that_are_not_numbers_and_steps_out_of_order_are_said():
    from delphi.registry.tracking import read_run_log
    log = pd.DataFrame({"step": [300, 100, 200, 400], "loss": ["3.1", "3.5", "abc", ""]})
    out, notes = read_run_log(log)
    assert list(out["step"]) == [100, 300]
    assert any("1 log row with a loss that is not a number left out (e.g. 'abc' at step 200, "
               "row 2;" in n for n in notes)
    assert any("1 log row(s) without a loss or step (empty or NaN)" in n for n in notes)
    assert any("not in order" in n for n in notes)


def test_run_log_rows_are_counted_as_the_ladder_readers_count_them(tmp_path):
    # Before: the run log's notes counted rows from 1 ("row 3" for the third data row), the
    # ladder readers from 0 ("row 2"), and a log of several runs counted within --run's rows.
    from delphi.registry.tracking import read_run_log
    csv = tmp_path / "runs.csv"
    csv.write_text("run,step,loss\nother,100,3.2\nme,100,3.1\nother,200,3.0\nme,200,x\n"
                   "me,300,2.9\n")
    _, notes = read_run_log(csv, run="me")
    assert any("'x' at step 200, row 3; rows count the records from 0" in n for n in notes)


def test_a_log_in_another_unit_is_asked_about(registry, registered):
    # Before (a new user): a bits/byte log tracked against a nats/token curve (losses 2.4x
    # below it) raised the alarm with no word on the likely cause.
    log = _run_log(registered[1]).iloc[4:10]
    res = track(registry, "hero", log.assign(loss=log["loss"] / 2.5), force=True)
    assert res.alarm
    said = [n for n in res.notes if "another unit or metric" in n]
    assert said and re.search(r"0\.[34]\d*x the registered curve", said[0])
    assert "nats/token" in said[0]
    assert said[0] in res.report()
    # a run on its curve (or drifting by a few percent) gets no such note
    fine = track(registry, "hero", _run_log(registered[1], drift_from=0.4))
    assert not [n for n in fine.notes if "another unit" in n]


def test_an_anchored_revision_is_not_called_the_ladders_alone():
    # Before (a new user): with a recorded carry-over the revision moves with the run's
    # deviation (2.81 -> 1.15), yet the note said "it does not move the revision".
    from delphi.registry.tracking import Revised, TrackedCheckpoint, Tracking

    def tracking(anchored):
        r = Revised(loss=1.15, lower=1.1, upper=1.2, run_only=None, run_sd=None,
                    ladder_weight=1.0, anchored=anchored)
        cp = TrackedCheckpoint(step=10, fraction=0.5, loss=1.2, predicted=2.9, lower=2.7,
                               upper=3.1, z=-14.0, pit=0.0, inside=False, revised=r,
                               outcome_id="hero/outcome-1", recorded=True, streak=1,
                               alarm=False)
        return Tracking(id="hero", checkpoints=(cp,), alarm=False, alarm_step=None,
                        patience=3, n_recorded=1)
    moved = tracking(1.15).to_dict()["notes"]
    assert any("moved by the run's deviation" in n for n in moved)
    assert not any("does not move the revision" in n for n in moved)
    assert any("does not move the revision" in n for n in tracking(None).to_dict()["notes"])


def test_a_loss_column_chosen_by_name_is_said():
    # a new user's (a W&B export with train/loss and eval/loss, no "loss"): eval/loss was
    # tracked with no word on which column was read; tokens became steps silently too
    log = pd.DataFrame({"_step": [100, 200], "train/loss": [3.1, 3.0],
                        "eval/loss": [3.05, 2.95]})
    got, notes = read_run_log(log)
    assert got["loss"].tolist() == [3.05, 2.95]
    said = [n for n in notes if n.startswith("loss column 'eval/loss'")]
    assert said and "other loss-like columns: train/loss" in said[0]
    _, notes = read_run_log(log.rename(columns={"eval/loss": "loss"}))
    assert not any(n.startswith("loss column") for n in notes)
    _, notes = read_run_log(log, loss_column="train/loss")
    assert not any(n.startswith("loss column") for n in notes)
    got, notes = read_run_log(pd.DataFrame({"tokens": [2e6, 4e6], "loss": [3.0, 2.9]}),
                              batch_size=1e6)
    assert got["step"].tolist() == [2, 4]
    assert any("steps from column 'tokens' / the registered batch of 1e+06" in n for n in notes)


def test_following_keeps_the_first_reads_notes(registry, registered):
    # --follow dropped every note of reading the log, so which loss column was picked
    # (eval/loss in a W&B export) was never said there
    log = _run_log(registered[1]).iloc[:4].rename(columns={"loss": "eval/loss"})
    res = track(registry, "hero", log, follow=True, timeout=0, sleep=lambda s: None)
    assert sum(n.startswith("loss column 'eval/loss'") for n in res.notes) == 1


def test_fractional_steps_are_said_when_rounded():
    # a new user's: step 5000.5 was tracked as step 5000 with no word
    got, notes = read_run_log(pd.DataFrame({"step": [5000.5, 6000, 7000.25],
                                            "loss": [3.0, 2.9, 2.8]}))
    assert got["step"].tolist() == [5000, 6000, 7000]
    assert any(n.startswith("2 log rows with a step that is not a whole number (e.g. 5000.5)")
               for n in notes)
    _, notes = read_run_log(pd.DataFrame({"step": [5000, 6000], "loss": [3.0, 2.9]}))
    assert not any("whole number" in n for n in notes)


def test_a_log_in_another_unit_is_refused_before_anything_is_recorded(registry, registered,
                                                                      capsys):
    # Before (a new user): a log in bits (1.44x the nats curve) was recorded checkpoint by
    # checkpoint into the append-only registry, then diagnosed in a note.
    log = _run_log(registered[1])
    before = registry.read_bytes()
    for factor, likely in ((1 / np.log(2), "an actual in bits against a prediction in nats"),
                           (0.4, "bits/byte against a prediction in nats/token")):
        with pytest.raises(delphi.RegistryError, match="Nothing was recorded") as e:
            track(registry, "hero", log.assign(loss=log["loss"] * factor))
        assert f"{factor:.3g}x the curve in the median" in str(e.value)
        assert likely in str(e.value) and "force=True (CLI --force)" in str(e.value)
        assert registry.read_bytes() == before
    bits = registry.parent / "bits.csv"
    log.assign(loss=log["loss"] / np.log(2)).to_csv(bits, index=False)
    assert main(["track", "--registry", str(registry), "--id", "hero", str(bits)]) == 1
    err = capsys.readouterr().err
    assert "track with --force" in err and "force=True" not in err
    assert registry.read_bytes() == before
    # forced: recorded as given, the alarm and the note as before
    assert main(["track", "--registry", str(registry), "--id", "hero", str(bits),
                 "--force"]) == 3
    assert "1.44x the registered curve" in capsys.readouterr().out
    assert len(delphi.Registry(registry).outcomes("hero")) == 16
    # the guard is on the log's first checkpoints only: a run on its curve that later
    # climbs 1.5x above it is recorded and raises the alarm (that is what tracking is for)
    registry = registry.parent / "late.jsonl"
    shutil.copy(registered[0], registry)
    assert track(registry, "hero", log.iloc[:6]).n_recorded == 2     # steps 1000, 1200
    late = log.assign(loss=np.where(log.index >= 6, log["loss"] * 1.5, log["loss"]))
    res = track(registry, "hero", late.iloc[:-1])       # (a final 1.5x off is refused)
    assert res.alarm and res.n_recorded == 13 and res.checkpoints[2].step == 1400
    # one spike among the first three checkpoints is not a unit: median of the three
    fresh = registry.parent / "fresh.jsonl"
    shutil.copy(registered[0], fresh)
    spiky = log.assign(loss=np.where(log.index == 4, log["loss"] * 1.5, log["loss"]))
    assert track(fresh, "hero", spiky).n_recorded == 16


def test_the_likely_unit_follows_the_predictions_unit():
    # Before: 0.69x a prediction in nats was called "an actual in nats against a prediction
    # in bits", next to "the prediction is in nats/token"
    from delphi.registry.scoring import unit_mismatch
    assert "nats against a prediction in bits" in unit_mismatch(np.log(2), 1.0, "bits/token")
    assert "bits" not in unit_mismatch(np.log(2), 1.0, "nats/token")
    assert "bits against a prediction in nats" in unit_mismatch(1 / np.log(2), 1.0, None)


def test_a_final_loss_far_off_is_refused_before_the_earlier_checkpoints_are_recorded(
        registry, registered):
    # Before (a new user): the step-2000 outcome was appended, then the final one refused:
    # exit 1, nothing printed, one outcome in the registry that no output had shown.
    log = _run_log(registered[1])
    log.loc[log.index[-1], "loss"] *= 1.4
    before = registry.read_bytes()
    with pytest.raises(delphi.RegistryError, match=r"final outcome of 'hero' not recorded: the "
                       r"log's loss [\d.]+ at step 4000 .*1\.4x the prediction.*Nothing was "
                       r"recorded \(nor the log's 15 earlier checkpoints\)\.$"):
        track(registry, "hero", log)
    assert registry.read_bytes() == before
    assert track(registry, "hero", log, force=True).n_recorded == 16
    # steps in another unit (10x): the error names how far past the plan the log runs
    fresh = registry.parent / "fresh.jsonl"
    shutil.copy(registered[0], fresh)
    steps = np.arange(200, 3001, 200)    # the run's first 75% (the generating law), logged 10x
    law = _curve_rows("hero", TARGET_N, TARGET_STEPS, 200, np.random.default_rng(3))
    tenfold = pd.DataFrame({"step": steps * 10,               # 2000..30000
                            "loss": law.set_index("step").loc[steps, "loss"].to_numpy()})
    with pytest.raises(delphi.RegistryError, match=r"Nothing was recorded\. The log's steps "
                       r"run to 30000, 7\.5x the planned 4000 of the registered target"):
        track(fresh, "hero", tenfold)


def test_an_error_while_recording_says_what_was_recorded_before_it(registry, registered):
    reg = delphi.Registry(registry)
    real, calls = reg.score, []

    def score(*a, **k):              # the registry fails on the third append
        calls.append(1)
        if len(calls) == 3:
            raise delphi.RegistryError("disk full")
        return real(*a, **k)

    reg.score = score
    with pytest.raises(delphi.RegistryError, match=r"^disk full \(2 outcomes of 'hero' "
                       r"recorded by this call before the error \(steps 1000\.\.1200\) stay in "
                       r"the registry; tracking again continues after them\)$"):
        track(reg, "hero", _run_log(registered[1]))
    assert len(delphi.Registry(registry).outcomes("hero")) == 2
