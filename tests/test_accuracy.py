"""delphi.accuracy and ``delphi accuracy``: tasks, the chained forecast, its interval's
calibration on simulated ladders, the baselines, the CLI, and the OLMo ladder."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.accuracy import (AccuracyForecast, Task, checkpoint_noise, compare_accuracy,
                             load_tasks, predict_accuracy, task_table)
from delphi.cli.main import main
from delphi.errors import LadderError, ManifestError
from delphi.laws import CHINCHILLA, sigmoid_law

# ------------------------------------------------------------------ a simulated ladder
TRUE1 = {"E": 0.55, "A": 400.0, "B": 150.0, "alpha": 0.45, "beta": 0.3}   # task loss, bpb
TRUE2 = {"U": 1.0, "C": 0.25, "k": 8.0, "L0": 0.8}                        # accuracy
RUN_SD, CKPT_SD = 0.01, 0.006   # run noise (log task loss), checkpoint noise (accuracy)
SIM_TASK = Task("sim", ("bpb/sim",), ("acc/sim",), 0.25)


def _task_loss(n, d):
    return CHINCHILLA.predict(TRUE1, {"params": np.atleast_1d(n), "tokens": np.atleast_1d(d)})


def simulate(seed: int, sizes=(1e8, 2e8, 4e8), mults=(0.5, 1, 2, 5, 10), ckpts=40):
    """One ladder: each run's task loss follows the Chinchilla law at every checkpoint times
    exp(run offset); accuracy = the sigmoid of the task loss + checkpoint noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        for m in mults:
            d = 20 * n * m
            run = f"{n / 1e6:.0f}M-{m}xC"
            off = rng.normal(0, RUN_SD)
            tok = d * np.linspace(0.05, 1.0, ckpts)
            bpb = _task_loss(np.full(ckpts, n), tok) * math.exp(off)
            acc = sigmoid_law(0.25).predict(TRUE2, {"task_loss": bpb}) + rng.normal(
                0, CKPT_SD, ckpts)
            for i in range(ckpts):
                rows.append({"run": run, "step": i + 1, "params": n, "tokens": tok[i],
                             "loss": 2.0 + 1.5 * bpb[i], "bpb/sim": bpb[i],
                             "acc/sim": acc[i]})
    return pd.DataFrame(rows)


def target_truth(seed: int, n: float, d: float) -> float:
    """A new run's final accuracy at (n, d): its own run offset and checkpoint noise."""
    rng = np.random.default_rng(10_000 + seed)
    bpb = _task_loss(n, d) * math.exp(rng.normal(0, RUN_SD))
    return float(sigmoid_law(0.25).predict(TRUE2, {"task_loss": bpb})[0]
                 + rng.normal(0, CKPT_SD))


def sim_ladder(seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return delphi.load_ladder(simulate(seed))


# ------------------------------------------------------------------ tasks
def test_bundled_tasks_are_the_papers_eight():
    tasks = load_tasks()
    assert list(tasks) == ["mmlu", "hellaswag", "arc_challenge", "arc_easy", "piqa", "csqa",
                           "socialiqa", "openbookqa"]
    chance = {"mmlu": 0.25, "hellaswag": 0.25, "arc_challenge": 0.25, "arc_easy": 0.25,
              "piqa": 0.5, "csqa": 0.2, "socialiqa": 1 / 3, "openbookqa": 0.25}
    for name, task in tasks.items():
        assert task.chance == pytest.approx(chance[name])
        assert all(c.startswith("eval/downstream_bpb/") and c.endswith("_rc_5shot_bpb")
                   for c in task.bpb)
        assert all(c.endswith("_rc_5shot_len_norm") for c in task.accuracy)
    assert len(tasks["mmlu"].bpb) == 4 and tasks["mmlu"].split == "test"
    assert {tasks[t].split for t in ("hellaswag", "piqa", "csqa", "socialiqa")} == {"val"}
    assert {tasks[t].split for t in ("arc_challenge", "arc_easy", "openbookqa")} == {"test"}


def test_user_manifest_and_its_errors(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('[tasks.sim]\nbpb = "bpb/sim"\naccuracy = "acc/sim"\nchance = 0.25\n')
    assert load_tasks(path)["sim"] == Task("sim", ("bpb/sim",), ("acc/sim",), 0.25)
    path.write_text('[tasks.sim]\nbpb = ["a", "b"]\naccuracy = "acc/sim"\nchance = 0.25\n')
    with pytest.raises(ManifestError, match="task 'sim'.*2 bpb column"):
        load_tasks(path)
    path.write_text('[tasks.sim]\nbpb = "a"\naccuracy = "b"\nchance = 2\n')
    with pytest.raises(ManifestError, match="chance must be a fraction"):
        load_tasks(path)
    with pytest.raises(ManifestError, match="not found.*olmo-ladder-tasks"):
        load_tasks("nope")


def test_checkpoint_noise_is_the_pooled_detrended_sd():
    # Two runs of 10 checkpoints: last 10% -> 4 checkpoints each (the minimum).
    a = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.40, 0.42, 0.41, 0.47]
    b = [0.3] * 6 + [0.30, 0.30, 0.33, 0.30]
    frame = pd.DataFrame({"run": ["a"] * 10 + ["b"] * 10, "accuracy": a + b})
    rss = 0.0
    for v in (a[-4:], b[-4:]):
        i = np.arange(4.0)
        slope, icpt = np.polyfit(i, v, 1)
        rss += sum((np.array(v) - (icpt + slope * i)) ** 2)
    sd, runs = checkpoint_noise(frame)
    assert runs == 2 and sd == pytest.approx(math.sqrt(rss / 4), rel=1e-12)


def test_task_table_averages_columns_and_smooths_the_loss():
    frame = simulate(0)
    frame["bpb/two"] = frame["bpb/sim"] + 0.2
    frame["acc/two"] = frame["acc/sim"] - 0.1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ladder = delphi.load_ladder(frame)
    task = Task("two", ("bpb/sim", "bpb/two"), ("acc/sim", "acc/two"), 0.25)
    t = task_table(ladder, task, smooth=3)
    run = frame[frame["run"] == "100M-1xC"]
    raw = (run["bpb/sim"] + 0.1).to_numpy()
    got = t[t["run"] == "100M-1xC"]
    np.testing.assert_allclose(got["task_loss_raw"], raw)
    np.testing.assert_allclose(got["accuracy"], run["acc/sim"] - 0.05)
    np.testing.assert_allclose(got["task_loss"].iloc[5], raw[3:6].mean())
    with pytest.raises(LadderError, match="task 'x': column 'nope' is not in ladder"):
        task_table(ladder, Task("x", ("nope",), ("acc/sim",), 0.25))
    # Weights 3:1 (normalised): bpb + 0.2 x 1/4, accuracy - 0.1 x 1/4.
    weighted = Task("two", task.bpb, task.accuracy, 0.25, weights=(3.0, 1.0))
    w = task_table(ladder, weighted, smooth=1)
    w = w[w["run"] == "100M-1xC"]
    np.testing.assert_allclose(w["task_loss_raw"], (run["bpb/sim"] + 0.05).to_numpy())
    np.testing.assert_allclose(w["accuracy"], (run["acc/sim"] - 0.025).to_numpy())


def test_manifest_weights(tmp_path):
    path = tmp_path / "t.toml"
    head = '[tasks.m]\nbpb = ["a", "b"]\naccuracy = ["c", "d"]\nchance = 0.25\n'
    path.write_text(head + "weights = [0.215, 0.335]\n")
    assert load_tasks(path)["m"].weights == (0.215, 0.335)
    assert load_tasks(path)["m"].to_dict()["weights"] == [0.215, 0.335]
    for bad in ("[1.0]", "[1.0, -1.0]", "[1.0, true]", '"x"'):
        path.write_text(head + f"weights = {bad}\n")
        with pytest.raises(ManifestError, match="task 'm': weights must be 2 positive"):
            load_tasks(path)
    assert load_tasks()["mmlu"].weights is None      # the bundled manifest: unweighted


# ------------------------------------------------------------------ the forecast
def test_predict_recovers_the_simulated_truth_and_is_seeded():
    ladder = sim_ladder(0)
    n, d = 1.6e9, 3.2e10
    kw = dict(target_params=n, target_tokens=d, n_boot=20, seed=3, smooth=1)
    f = predict_accuracy(ladder, SIM_TASK, **kw)
    assert isinstance(f, AccuracyForecast)
    expected = float(sigmoid_law(0.25).predict(TRUE2, {"task_loss": _task_loss(n, d)})[0])
    assert f.task_loss == pytest.approx(float(_task_loss(n, d)[0]), rel=0.03)
    assert f.accuracy == pytest.approx(expected, abs=0.03)
    assert f.lower < f.accuracy < f.upper and f.mean_lower <= f.accuracy <= f.mean_upper
    # The step-2 points: every checkpoint after the first 10% of each run (no LR logged).
    assert f.step2.n_points == 15 * (40 - 4)
    assert f.noise_sd == pytest.approx(CKPT_SD, rel=0.3)
    again = predict_accuracy(ladder, SIM_TASK, **kw)
    assert json.dumps(again.to_dict()) == json.dumps(f.to_dict())
    other = predict_accuracy(ladder, SIM_TASK, **{**kw, "seed": 4})
    assert (other.lower, other.upper) != (f.lower, f.upper)
    d_ = f.to_dict()
    assert set(d_["prediction"]) >= {"accuracy", "lower", "upper", "task_loss"}
    assert d_["step1"]["law"] == "chinchilla" and d_["step2"]["law"] == "task-sigmoid"
    assert list(f.to_frame().columns[:4]) == ["task", "design", "params", "tokens"]
    assert "points" in f.report()


def test_noise_warning_rule():
    frame = simulate(1)
    rng = np.random.default_rng(0)
    frame["acc/sim"] += rng.normal(0, 0.02, len(frame))   # sd ~ 2.1 points > 1.22
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ladder = delphi.load_ladder(frame)
    f = predict_accuracy(ladder, SIM_TASK, target_params=8e8, target_tokens=1.6e10,
                         n_boot=10, smooth=1)
    assert any("2-point prediction of this task is impossible" in w for w in f.warnings)
    quiet = predict_accuracy(sim_ladder(1), SIM_TASK, target_params=8e8,
                             target_tokens=1.6e10, n_boot=10, smooth=1)
    assert not any("impossible" in w for w in quiet.warnings)


def test_chained_interval_is_calibrated_on_simulated_ladders():
    """16 simulated ladders (known step-1 and step-2 laws, run noise and checkpoint noise;
    15 runs of 8 checkpoints each); each predicts a new 1.6B run at 2x Chinchilla (4x the
    largest fitted N) with 10 bootstrap draws (guard off: it is tested above) and the
    extrapolation calibration. The truth is that run's own final accuracy (its run offset
    and checkpoint noise). Binomial tolerance: at a true 90% the sd of the coverage of 16 is
    7.5 points; 0.75 (<= 11 of 16, 2 sd low) fails an interval that truly covers 70% about
    half the time. The calibration must widen (coverage at least the bootstrap's) but not
    simply inflate: the law is right here, so the studentized errors inside the ladder are
    about standard and the mean width stays under 1.5x the bootstrap's (measured with 20
    draws per calibration cut: 1.22x, the stretch 1 on 9 of the 16 ladders, at most 1.97;
    with the default 40 draws: 1.19x)."""
    inside, boot_inside, widths = [], [], []
    n, d = 1.6e9, 6.4e10
    for seed in range(16):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ladder = delphi.load_ladder(simulate(seed, ckpts=8))
        f = predict_accuracy(ladder, SIM_TASK, target_params=n, target_tokens=d, n_boot=10,
                             seed=seed, smooth=1, check_every=0, calibration_draws=20)
        truth = target_truth(seed, n, d)
        inside.append(f.lower <= truth <= f.upper)
        boot_inside.append(f.bootstrap_lower <= truth <= f.bootstrap_upper)
        widths.append((f.upper - f.lower) / (f.bootstrap_upper - f.bootstrap_lower))
        assert f.calibration is not None and f.n_checked == 0
    assert 0.75 <= np.mean(inside), (np.mean(inside), np.mean(boot_inside))
    assert np.mean(inside) >= np.mean(boot_inside)
    assert np.mean(widths) < 1.5, np.mean(widths)


def test_extrapolation_calibration_errors_match_refits_on_the_runs_below_each_cut():
    """The leave-future-out predictions inside the fitted runs: each cut's predictions equal
    compare_accuracy's two-step design fitted on the runs at or below the cut (an
    independent path through the public API); the ratio is max(N / N_max, ND / (ND)_max)
    of those runs; each z is Phi^-1 of the actual's place among the cut's own bootstrap
    draws, which predict_accuracy on those runs reproduces; the stretch is max(1, median
    |z| / 0.6745) and widens the bootstrap's interval about its median."""
    from scipy.stats import norm

    from delphi.accuracy import CAL_DRAWS, _data, _lfo_errors

    ladder = sim_ladder(4)
    data = _data(ladder, SIM_TASK, None, None, smooth=1, skip_fraction=0.1)
    errors, notes = _lfo_errors(ladder, SIM_TASK, data, seed=3)
    fin = data.final.assign(nd=data.final["params"] * data.final["tokens"])
    levels = np.sort(fin["nd"].unique())
    # Cuts: every compute level below the largest with >= 7 runs at or below it (5 free
    # step-1 parameters + 2) and two model sizes among them; a cut whose step-1 fit has too
    # few residual degrees of freedom for the run noise is skipped with a note.
    want = [c for c in levels[:-1] if (fin["nd"] <= c).sum() >= 7
            and fin.loc[fin["nd"] <= c, "params"].nunique() >= 2]
    got = sorted(errors["cut"].unique())
    assert set(got) <= set(want) and len(got) >= 3
    assert len(notes) == len(want) - len(got)
    assert all("skipped" in n and "degree" in n for n in notes)
    i = 2
    cut = got[i]
    inside = fin[fin["nd"] <= cut]
    held = sorted(fin.loc[fin["nd"] > cut, "run"])
    c = compare_accuracy(ladder, SIM_TASK, holdout=held, runs=list(inside["run"]) + held,
                         smooth=1)
    ref = c.heldout[c.heldout["design"] == "two-step"].set_index("run")
    mine = errors[errors["cut"] == cut].set_index("run").loc[held]
    np.testing.assert_allclose(mine["predicted"], ref.loc[held, "predicted"], rtol=1e-6)
    np.testing.assert_allclose(mine["error"], ref.loc[held, "predicted"] - ref.loc[held, "actual"],
                               rtol=1e-6, atol=1e-9)
    want_r = np.maximum(mine["params"] / inside["params"].max(),
                        mine["params"] * mine["tokens"] / inside["nd"].max())
    np.testing.assert_allclose(mine["ratio"], want_r)
    np.testing.assert_allclose(mine["z"], norm.ppf(mine["pit"]))
    # The cut's bootstrap, through the public API: the same resamples (seed), no guard, no
    # calibration. The actual is inside its 90% interval exactly when its PIT is in
    # [0.05, 0.95] (PITs within one draw of those edges are not compared).
    cut_index = want.index(cut)
    cut_seed = int(np.random.SeedSequence([3, 13, cut_index]).generate_state(1)[0])
    hf = fin.set_index("run").loc[held]
    own = predict_accuracy(ladder, SIM_TASK, target_params=list(hf["params"]),
                           target_tokens=list(hf["tokens"]), runs=list(inside["run"]),
                           n_boot=CAL_DRAWS, seed=cut_seed, smooth=1, check_every=0,
                           calibrate=False)
    step = 1.0 / (CAL_DRAWS * 20)
    compared = 0
    for run, f in zip(held, own):
        u = mine.loc[run, "pit"]
        if min(abs(u - 0.05), abs(u - 0.95)) > 2 * step:
            compared += 1
            assert (f.bootstrap_lower <= hf.loc[run, "accuracy"] <= f.bootstrap_upper) == \
                (0.05 <= u <= 0.95), (run, u)
    assert compared >= 1

    n, d = 1.6e9, 3.2e10
    f = predict_accuracy(ladder, SIM_TASK, target_params=n, target_tokens=d, n_boot=10,
                         smooth=1)
    cal = f.calibration
    errors0, _ = _lfo_errors(ladder, SIM_TASK, data, seed=0)
    raw = float(np.median(np.abs(errors0["z"])) / norm.ppf(0.75))
    assert cal["scale_raw"] == pytest.approx(raw) and cal["scale"] == max(1.0, raw)
    assert cal["n_errors"] == len(errors0) and cal["n_folds"] == errors0["cut"].nunique()
    # The interval contains the bootstrap's; without calibration it is the bootstrap's.
    assert f.lower <= f.bootstrap_lower and f.upper >= f.bootstrap_upper
    off = predict_accuracy(ladder, SIM_TASK, target_params=n, target_tokens=d, n_boot=10,
                           smooth=1, calibrate=False)
    assert off.calibration is None and (off.lower, off.upper) == (f.bootstrap_lower,
                                                                  f.bootstrap_upper)
    if cal["scale"] > 1:
        assert f.upper - f.lower > f.bootstrap_upper - f.bootstrap_lower
    doc = f.to_dict()
    assert doc["calibration"]["n_folds"] == errors0["cut"].nunique()
    assert doc["bootstrap"]["guard"] == {"checked": f.n_checked, "worse": f.n_worse}
    # Guard: every 25th draw from a seeded offset in [0, min(25, n)) is also fitted by the
    # global search, in each step: 10 draws -> one per step.
    assert f.n_failed == 0 and f.n_checked == 2 and f.n_worse == 0


def test_several_targets_share_one_bootstrap_and_equal_single_calls():
    """Sequences of targets give one forecast per target, each equal to its own call (the
    same resamples and noise draws); a scalar pairs with every element; unequal lengths and
    empty sequences are errors."""
    from delphi.errors import TargetError

    ladder = sim_ladder(4)
    ns, d = [8e8, 1.6e9], 3.2e10
    both = predict_accuracy(ladder, SIM_TASK, target_params=ns, target_tokens=d, n_boot=10,
                            smooth=1, calibrate=False)
    assert [f.target for f in both] == [{"params": n, "tokens": d} for n in ns]
    for n, f in zip(ns, both):
        one = predict_accuracy(ladder, SIM_TASK, target_params=n, target_tokens=d, n_boot=10,
                               smooth=1, calibrate=False)
        assert (f.accuracy, f.lower, f.upper, f.task_loss) == \
            (one.accuracy, one.lower, one.upper, one.task_loss)
    with pytest.raises(TargetError, match="2 values and target_tokens 3"):
        predict_accuracy(ladder, SIM_TASK, target_params=ns, target_tokens=[1e10] * 3)
    with pytest.raises(TargetError, match="no target"):
        predict_accuracy(ladder, SIM_TASK, target_params=[], target_tokens=d)


def test_calibration_falls_back_with_a_note_when_too_few_cuts():
    # 2 sizes x 4 durations = 8 runs; compute levels (N D = 20 N^2 m) 1e17, 2e17, 4e17 (two
    # runs), 8e17, 1e18, 1.6e18, 3.2e18: only 1.6e18 has >= 7 runs at or below it and a
    # run above it, and its 7 runs leave the 5-parameter step-1 fit 2 residual degrees of
    # freedom, too few for the run noise its bootstrap needs: skipped, no cut < 3.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ladder = delphi.load_ladder(simulate(5, sizes=(1e8, 2e8), mults=(0.5, 1, 2, 5)))
    f = predict_accuracy(ladder, SIM_TASK, target_params=8e8, target_tokens=1.6e10,
                         n_boot=30, smooth=1, seed=2)
    assert f.calibration is None
    note = [n for n in f.notes if n.startswith("no extrapolation calibration: 0 "
                                               "leave-future-out cut(s)")]
    assert len(note) == 1 and "skipped" in note[0] and "degree(s) of freedom" in note[0]
    assert (f.lower, f.upper) == (f.bootstrap_lower, f.bootstrap_upper)


def test_task_all_and_compare(tmp_path):
    frame = simulate(2)
    frame["bpb/b"] = frame["bpb/sim"] * 1.3
    frame["acc/b"] = frame["acc/sim"]
    path = tmp_path / "tasks.toml"
    path.write_text('[tasks.sim]\nbpb = "bpb/sim"\naccuracy = "acc/sim"\nchance = 0.25\n'
                    '[tasks.b]\nbpb = "bpb/b"\naccuracy = "acc/b"\nchance = 0.25\n')
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ladder = delphi.load_ladder(frame)
    out = predict_accuracy(ladder, "all", target_params=8e8, target_tokens=1.6e10, n_boot=5,
                           tasks_manifest=path, smooth=1, calibrate=False, check_every=0)
    assert [f.task.name for f in out] == ["sim", "b"]
    with pytest.raises(LadderError, match="unknown task 'x'; known tasks: sim, b"):
        predict_accuracy(ladder, "x", target_params=8e8, target_tokens=1.6e10,
                         tasks_manifest=path)
    c = compare_accuracy(ladder, "sim", target_params=8e8, target_tokens=1.6e10,
                         tasks_manifest=path, smooth=1)
    assert c.heldout_runs == sorted(r for r in ladder.runs if r.startswith("400M"))
    assert set(c.predictions) == {"two-step", "c4-loss", "one-step"}
    frame_ = c.to_frame()
    assert list(frame_["design"]) == ["two-step", "c4-loss", "one-step"]
    # MAE recomputed from the held-out rows.
    rows = c.heldout[c.heldout["design"] == "two-step"]
    assert c.mae_points["two-step"] == pytest.approx(
        100 * np.mean(np.abs(rows["predicted"] - rows["actual"])))
    # Here the C4 loss is an exact affine map of the task loss: both designs agree.
    assert c.predictions["c4-loss"] == pytest.approx(c.predictions["two-step"], abs=0.02)


# ------------------------------------------------------------------ CLI
@pytest.fixture
def sim_files(tmp_path):
    data = tmp_path / "sim.csv"
    simulate(0).to_csv(data, index=False)
    tasks = tmp_path / "tasks.toml"
    tasks.write_text('[tasks.sim]\nbpb = "bpb/sim"\naccuracy = "acc/sim"\nchance = 0.25\n'
                     '[tasks.gone]\nbpb = "bpb/missing"\naccuracy = "acc/sim"\nchance = 0.25\n')
    return str(data), str(tasks)


def test_cli_text_json_and_errors(sim_files, capsys):
    data, tasks = sim_files
    base = ["accuracy", data, "--tasks", tasks, "--target-params", "1.6e9",
            "--target-tokens", "3.2e10", "--n-boot", "20"]
    assert main(base + ["--task", "sim"]) == 0
    out = capsys.readouterr().out
    assert "task sim" in out and "accuracy" in out and "points" in out
    assert main(base + ["--task", "sim", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for key in ("accuracy", "lower", "upper", "task_loss"):
        assert isinstance(doc["prediction"][key], float)
    assert doc["step1"]["law"] == "chinchilla" and doc["step2"]["law"] == "task-sigmoid"
    cal = doc["calibration"]
    assert cal["n_folds"] >= 3 and cal["scale"] >= 1
    assert doc["prediction"]["lower"] <= doc["bootstrap"]["lower"]
    assert main(base + ["--task", "sim", "--json", "--no-calibration"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["calibration"] is None
    assert off["prediction"]["lower"] == off["bootstrap"]["lower"]
    assert any(n.startswith("interval: bootstrap") for n in off["notes"])
    # --lower: step 2's floor C fitted within [chance, 1] (default), pinned, or an error.
    assert doc["step2"]["fit"]["fixed"] == {"U": 1.0}
    assert 0.25 <= doc["step2"]["params"]["C"] <= 1
    assert doc["step2"]["fit"]["n_runs"] == len(doc["step2"]["fit"]["runs"]) < \
        doc["step2"]["fit"]["n_points"]
    assert main(base + ["--task", "sim", "--json", "--no-calibration", "--lower", "chance"]) == 0
    pinned = json.loads(capsys.readouterr().out)
    assert pinned["step2"]["fit"]["fixed"] == {"U": 1.0, "C": 0.25}
    with pytest.raises(SystemExit) as exc:
        main(base + ["--task", "sim", "--lower", "1.5"])
    assert exc.value.code == 2
    assert "expected 'fit', 'chance' or a fraction in [0, 1), got '1.5'" in \
        capsys.readouterr().err
    assert main(base + ["--task", "nope"]) == 1
    err = capsys.readouterr().err
    assert "unknown task 'nope'" in err and "sim, gone" in err
    assert main(base + ["--task", "gone", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"]["type"] == "LadderError"
    assert "task 'gone'" in doc["error"]["message"] and "bpb/missing" in doc["error"]["message"]


def test_cli_task_all_rows(sim_files, capsys, tmp_path):
    data, _ = sim_files
    tasks = tmp_path / "two.toml"
    tasks.write_text('[tasks.sim]\nbpb = "bpb/sim"\naccuracy = "acc/sim"\nchance = 0.25\n'
                     '[tasks.again]\nbpb = "bpb/sim"\naccuracy = "acc/sim"\nchance = 0.2\n')
    base = ["accuracy", data, "--tasks", str(tasks), "--task", "all", "--target-params",
            "1.6e9", "--target-tokens", "3.2e10", "--n-boot", "20", "--no-calibration"]
    assert main(base) == 0
    lines = capsys.readouterr().out.splitlines()
    assert sum(1 for line in lines if line.startswith(("sim ", "again "))) == 2
    assert main(base + ["--json"]) == 0
    docs = json.loads(capsys.readouterr().out)
    assert [d["task"]["name"] for d in docs] == ["sim", "again"]


# ------------------------------------------------------------------ the OLMo ladder
def test_olmo_hellaswag_1b_from_190m_760m(data_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # the ladder's FLOP-convention note
        ladder = delphi.load_ladder("olmo-ladder")
    small = [r for r in ladder.runs if r.split("-")[0] in ("190M", "370M", "760M")]
    task = load_tasks()["hellaswag"]
    fin = task_table(ladder, task).groupby("run").tail(1).set_index("run")
    n, d = fin.loc["1B-5xC", "params"], fin.loc["1B-5xC", "tokens"]
    f = predict_accuracy(ladder, "hellaswag", target_params=n, target_tokens=d, runs=small,
                         n_boot=20)
    actual = fin.loc["1B-5xC", "accuracy"]
    # Measured: 1.6 points low (2.8 with C pinned at chance; the paper reports 1-4 point
    # errors on HellaSwag-like tasks at 1B); "within a few points" = 4.
    assert abs(f.accuracy - actual) < 0.04, (f.accuracy, actual)
    assert f.step1.n_points == 15 and set(f.step2.labels) == set(small)


def test_cli_flags_say_what_a_warning_means_for_the_accuracy():
    from types import SimpleNamespace

    from delphi.cli.accuracy import _flags

    loose = SimpleNamespace(warnings=["step 1: poorly determined: the approximate standard "
                                      "error of A exceeds its value"],
                            mean_lower=0.60, mean_upper=0.66)
    assert _flags(loose) == "step-1 A loose: +-3.0 pts"
    noisy = SimpleNamespace(warnings=["task x: ... a 2-point prediction of this task is "
                                      "impossible", "other"], mean_lower=0.5, mean_upper=0.5)
    assert _flags(noisy) == "noisy (>2-pt), !"
    assert _flags(SimpleNamespace(warnings=[], mean_lower=0.5, mean_upper=0.5)) == ""


# ------------------------------------------------------------------ refusals and warnings
def test_asymptotes_the_runs_contradict_are_refused():
    """A fixed floor above the weakest run's final accuracy, a fixed ceiling below the best
    run's, or a chance level above every run is an error naming the run (the forecast would
    otherwise sit on the bound with a spuriously narrow interval); a floor fixed below
    chance is a warning."""
    from delphi.errors import FitError

    ladder = sim_ladder(4)
    kw = dict(target_params=1.6e9, target_tokens=3.2e10, n_boot=4, smooth=1, calibrate=False)
    fin = task_table(ladder, SIM_TASK).groupby("run").tail(1)
    weakest = fin.loc[fin["accuracy"].idxmin()]
    best = fin.loc[fin["accuracy"].idxmax()]
    with pytest.raises(FitError, match=f"fixed floor C = 0.9 is above run {weakest['run']}'s"):
        predict_accuracy(ladder, SIM_TASK, lower=0.9, **kw)
    with pytest.raises(FitError, match=f"fixed ceiling U = 0.3 is below run {best['run']}'s"):
        predict_accuracy(ladder, SIM_TASK, upper=0.3, **kw)
    high = Task("high", ("bpb/sim",), ("acc/sim",), 0.95)
    with pytest.raises(FitError, match="chance level 0.95 is at or above every fitted run"):
        predict_accuracy(ladder, high, **kw)
    with pytest.raises(FitError, match="fixed floor C = 0.9"):
        compare_accuracy(ladder, SIM_TASK, lower=0.9, smooth=1)
    f = predict_accuracy(ladder, SIM_TASK, lower=0.1, **kw)
    assert any("fixed below the task's chance level 0.25" in w for w in f.warnings)


def test_step1_law_must_be_a_law_of_n_and_d():
    from delphi.accuracy import step1_laws
    from delphi.errors import FitError

    ladder = sim_ladder(4)
    assert {"power", "chinchilla"} <= set(step1_laws())
    assert not {"annealing", "chinchilla-lr", "chinchilla-ckpt"} & set(step1_laws())
    for law in ("annealing", "chinchilla-ckpt", "task-onestep"):
        with pytest.raises(FitError, match=f"step1_law '{law}' cannot be step 1"):
            predict_accuracy(ladder, SIM_TASK, target_params=1e9, target_tokens=2e10,
                             step1_law=law)
    f = predict_accuracy(ladder, SIM_TASK, target_params=1.6e9, target_tokens=3.2e10,
                         step1_law="power", n_boot=4, smooth=1, calibrate=False)
    assert f.step1.law.name == "power" and 0.25 < f.accuracy < 1


def test_targets_and_runs_in_python_forms():
    """A 0-d array is a scalar, a bool is not a number, a run given as a string is one run,
    a target far outside the fitted N or D/N is warned about, and an extrapolated step 2 is
    noted."""
    from delphi.errors import TargetError

    ladder = sim_ladder(4)
    kw = dict(n_boot=4, smooth=1, calibrate=False)
    f = predict_accuracy(ladder, SIM_TASK, target_params=np.array(1.6e9),
                         target_tokens=np.float64(3.2e10), **kw)
    assert isinstance(f, AccuracyForecast) and f.target == {"params": 1.6e9, "tokens": 3.2e10}
    with pytest.raises(TargetError, match="target params must be a positive number, got True"):
        predict_accuracy(ladder, SIM_TASK, target_params=True, target_tokens=3.2e10)
    from delphi.errors import FitError

    with pytest.raises(FitError, match="^1 point cannot fit 5 free parameters"):  # one run
        predict_accuracy(ladder, SIM_TASK, target_params=1e9, target_tokens=2e10,
                         runs=ladder.runs[0])
    long = predict_accuracy(ladder, SIM_TASK, target_params=1e8, target_tokens=1e13, **kw)
    assert any(w.startswith("target D/N = 1e+05 is 500x the largest") and
               "the laws are extrapolated far" in w for w in long.warnings), long.warnings
    far = predict_accuracy(ladder, SIM_TASK, target_params=1e10, target_tokens=1e13, **kw)
    assert any(w.startswith("target N = 1e+10 is 25x the largest") for w in far.warnings)
    assert any(n.startswith("step 2 is extrapolated: the predicted task loss") and
               "below the lowest fitted checkpoint's" in n for n in far.notes), far.notes
    small = predict_accuracy(ladder, SIM_TASK, target_params=1e6, target_tokens=2e7, **kw)
    assert any(w.startswith("target N = 1e+06 is 100x below the smallest") for w in
               small.warnings), small.warnings


def test_empty_task_cells_are_reported_and_compare_holds_out_beyond_the_fit_filter():
    frame = simulate(4)
    frame.loc[frame.index[::7], "acc/sim"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ladder = delphi.load_ladder(frame)
    f = predict_accuracy(ladder, SIM_TASK, target_params=1.6e9, target_tokens=3.2e10,
                         n_boot=4, smooth=1, calibrate=False)
    blank = int(frame["acc/sim"].isna().sum())
    assert any(n == f"task sim: {blank} checkpoint(s) of the fitted runs have no value in a "
                    f"column of the task (empty cells) and are left out" for n in f.notes)
    big = sorted(r for r in ladder.runs if r.startswith("400M"))
    c = compare_accuracy(ladder, SIM_TASK, holdout=big, fit_max_params=2e8, smooth=1)
    assert c.heldout_runs == big and not set(c.fit_runs) & set(big)
    assert "target" in c.report() and " nan" not in c.report()


def test_fitted_sha256_is_the_registrys_fingerprint(tmp_path):
    from delphi.registry import Registry

    f = predict_accuracy(sim_ladder(4), SIM_TASK, target_params=1.6e9, target_tokens=3.2e10,
                         n_boot=4, smooth=1, calibrate=False)
    doc = f.to_dict()
    entry = Registry(tmp_path / "r.jsonl").register_accuracy(f, id="x")
    assert doc["fitted_sha256"] == entry.ladder.sha256 and doc["delphi_version"]


def test_cli_checks_the_registry_before_fitting(sim_files, capsys, tmp_path):
    """An existing id or a missing folder is refused before any fit (nothing printed on
    stdout, nothing written); -j says the command runs serially; --n-boot below 20 is a
    usage error; a small ladder's step-1 error names the step and a way out."""
    data, tasks = sim_files
    base = ["accuracy", data, "--tasks", tasks, "--task", "sim", "--target-params", "1.6e9",
            "--target-tokens", "3.2e10", "--n-boot", "20", "--no-calibration"]
    reg = tmp_path / "r.jsonl"
    assert main(base + ["--registry", str(reg), "--id", "a"]) == 0
    capsys.readouterr()
    before = reg.read_bytes()
    assert main(base + ["--registry", str(reg), "--id", "a"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "id(s) a already in" in err and "nothing was predicted" in err
    assert reg.read_bytes() == before
    assert main(base + ["--registry", str(tmp_path / "no" / "r.jsonl"), "--id", "b"]) == 1
    assert "does not exist (nothing was predicted or written)" in capsys.readouterr().err
    assert main(base + ["-j", "2"]) == 0
    assert "runs serially" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(base[:-2] + ["--n-boot", "5"])
    assert exc.value.code == 2
    capsys.readouterr()
    tiny = tmp_path / "tiny.csv"
    frame = simulate(1)
    frame[frame["run"].isin(sorted(frame["run"].unique())[:7])].to_csv(tiny, index=False)
    assert main(["accuracy", str(tiny), "--tasks", tasks, "--task", "sim", "--target-params",
                 "1.6e9", "--target-tokens", "3.2e10", "--n-boot", "20"]) == 1
    err = capsys.readouterr().err
    assert "task sim, step 1 (chinchilla on the final task loss of 7 runs)" in err
    assert "--step1-law power" in err


def test_step1_huber_delta_reaches_the_fit(sim_files, capsys):
    """The step-1 Huber delta (the value a step-1 warning may suggest) is the fit's, in the
    API, `delphi accuracy --huber-delta` and `plot accuracy --huber-delta`; bad values are
    errors."""
    from delphi.errors import FitError

    ladder = sim_ladder(4)
    kw = dict(target_params=1.6e9, target_tokens=3.2e10, n_boot=4, smooth=1, calibrate=False)
    f = predict_accuracy(ladder, SIM_TASK, step1_delta=0.05, **kw)
    assert f.step1.delta == 0.05
    assert predict_accuracy(ladder, SIM_TASK, **kw).step1.delta == 1e-3
    with pytest.raises(FitError, match="step1_delta must be a positive number"):
        predict_accuracy(ladder, SIM_TASK, step1_delta=-1.0, **kw)
    data, tasks = sim_files
    assert main(["accuracy", data, "--tasks", tasks, "--task", "sim", "--target-params",
                 "1.6e9", "--target-tokens", "3.2e10", "--n-boot", "20", "--no-calibration",
                 "--huber-delta", "0.05", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["step1"]["fit"]["huber_delta"] == 0.05

