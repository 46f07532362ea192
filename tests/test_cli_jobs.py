"""``-j/--jobs`` and ``--quiet`` in the CLI, and ``n_jobs`` in delphi.analyses.hparams (issue 8, items 2
and 7): results do not depend on the number of jobs; notes go to stderr unless quiet."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.cli import main
from delphi.analyses.hparams import fit_hparams, optimal_points
from delphi.laws.curves import ANNEALING
from delphi.schedules import Schedule, features


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- ladders
def curve_ladder(tmp_path, runs=("a", "b"), short=()):
    """Runs on one cosine schedule whose losses follow a known annealing law (stopped at 70%);
    runs in ``short`` have only two checkpoints (too few to complete)."""
    sched = Schedule.parse("cosine:warmup=100,final=0.1", peak_lr=2e-3, total_steps=10000)
    steps = np.arange(200, 7001, 200)
    f = features(sched, steps)
    rows = []
    for i, run in enumerate(list(runs) + list(short)):
        true = {"L0": 2.3 + 0.1 * i, "A": 0.6, "C": 0.25, "alpha": 0.5}
        loss = ANNEALING.predict(true, {"S1": f["S1"], "S2": f["S2"]})
        loss = loss * (1 + 0.001 * np.random.default_rng(i).standard_normal(len(loss)))
        keep = slice(None) if run not in short else slice(0, 2)
        rows.append(pd.DataFrame({"run": run, "step": steps[keep], "loss": loss[keep],
                                  "flops": 1e17 * (i + 1) * steps[keep], "peak_lr": 2e-3,
                                  "total_steps": 10000, "fraction": steps[keep] / 10000}))
    pd.concat(rows).to_csv(tmp_path / "curves.csv", index=False)
    (tmp_path / "curves.toml").write_text(
        'name = "curves"\ndescription = "synthetic curves"\n'
        'schedule = "cosine:warmup=100,final=0.1"\n'
        '[source]\nreader = "csv"\npath = "curves.csv"\n')
    return str(tmp_path / "curves.toml")


def sweep_ladder(tmp_path):
    """LR x batch grids (5 peak LRs x 3 batch sizes) at 6 (N, D), with Step-Law optima."""
    rows = []
    for n in (5e7, 1e8, 2e8):
        for d in (2e9, 8e9):
            opt = 1.79 * n ** -0.713 * d ** 0.307
            bopt = 0.58 * d ** 0.571
            for b in (-1, 0, 1):
                batch = bopt * 2.0 ** (b + 0.2)
                for k in (-2, -1, 0, 1, 2):
                    lr = opt * 2.0 ** (k + 0.3)
                    loss = (2.0 + 40 * n ** -0.3 + 0.02 * np.log(lr / opt) ** 2
                            + 0.01 * np.log(batch / bopt) ** 2)
                    rows.append({"run": f"n{n:g}-d{d:g}-lr{k}-b{b}", "params": n, "tokens": d,
                                 "peak_lr": lr, "batch_size": batch, "loss": loss})
    path = tmp_path / "sweeps.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return str(path)


# --------------------------------------------------------------------------- hparams
def test_hparams_n_jobs_gives_identical_results(tmp_path):
    ladder = delphi.load_ladder(sweep_ladder(tmp_path))
    serial = fit_hparams(ladder, "steplaw", n_jobs=1)
    parallel = fit_hparams(ladder, "steplaw", n_jobs=2)
    assert json.dumps(serial.to_dict(), sort_keys=True) == \
        json.dumps(parallel.to_dict(), sort_keys=True)
    assert serial.lr_fit.params == parallel.lr_fit.params
    assert serial.batch_fit is not None   # two law fits ran as two jobs
    assert serial.batch_fit.params == parallel.batch_fit.params
    pd.testing.assert_frame_equal(optimal_points(ladder, n_jobs=1).table,
                                  optimal_points(ladder, n_jobs=2).table)
    with pytest.raises(delphi.FitError, match="n_jobs"):
        fit_hparams(ladder, "steplaw", n_jobs=0)


def test_cli_hparams_jobs(tmp_path, capsys):
    path = sweep_ladder(tmp_path)
    outs = []
    for jobs in ("1", "2"):
        code, out, _ = run_cli(capsys, "hparams", path, "--law", "steplaw", "--target-params",
                               "1e9", "--target-tokens", "2e10", "-j", jobs, "--json")
        assert code == 0
        outs.append(json.loads(out))
    assert outs[0] == outs[1]


# --------------------------------------------------------------------------- predict, backtest
@pytest.mark.shared_data
def test_cli_predict_and_backtest_jobs(data_dir, capsys):
    args = ["predict", "epoch-chinchilla", "--law", "chinchilla", "--target-params", "7e10",
            "--target-tokens", "1.4e12", "--interval", "bootstrap", "--n-boot", "40", "--json"]
    results = []
    for jobs in ("1", "2"):
        code, out, _ = run_cli(capsys, *args, "--jobs", jobs)
        assert code == 0
        results.append(json.loads(out)["prediction"])
    assert results[0] == results[1]
    # Marin's DCLM isoFLOP ladder: 7 folds (one per budget, 85 held-out runs) shared by the
    # workers, in a fifth of the time epoch-chinchilla's folds take.
    args = ["backtest", "marin-isoflop-dclm", "--law", "chinchilla", "--leave-one-budget-out",
            "--interval", "none", "--json"]
    results = []
    for jobs in ("1", "-1"):
        code, out, _ = run_cli(capsys, *args, "-j", jobs)
        assert code == 0
        results.append(json.loads(out))
    assert len(results[0]["fits"]) == 7 and len(results[0]["rows"]) == 85
    assert results[0] == results[1]


# --------------------------------------------------------------------------- complete
def test_complete_several_runs(tmp_path, capsys):
    manifest = curve_ladder(tmp_path)
    code, out, _ = run_cli(capsys, "complete", manifest, "--run", "a", "--json")
    single = json.loads(out)
    assert code == 0 and isinstance(single, dict)
    results = []
    for jobs in ("1", "2"):
        code, out, _ = run_cli(capsys, "complete", manifest, "--run", "a", "--run", "b",
                               "-j", jobs, "--json")
        assert code == 0
        results.append(json.loads(out)["runs"])
    both = results[0]
    assert results[1] == both                      # bit-identical whatever -j
    assert [c["run"] for c in both] == ["a", "b"]
    assert both[0]["prediction"]["loss"] == pytest.approx(single["prediction"]["loss"],
                                                          rel=1e-9)
    # several runs in text: a table, one row per run as it is done, then a summary (issue 23;
    # before, every run's full report and notes, printed only at the end)
    code, out, err = run_cli(capsys, "complete", manifest, "--all-runs")
    lines = out.strip().splitlines()
    assert code == 0 and err == ""
    assert lines[0].split() == ["run", "used", "prediction", "90%", "interval", "final",
                                "error"]
    assert [ln.split()[0] for ln in lines[1:3]] == ["a", "b"]
    pred_a = float(lines[1].split()[2])
    assert pred_a == pytest.approx(both[0]["prediction"]["loss"], abs=6e-5)
    # the interval column: the JSON's, or "-" when the ladder cannot measure one
    iv = both[0]["prediction"]
    cell = lines[1].split()[3]
    assert (cell == "-") == (iv["lower"] is None)
    assert lines[-1].startswith("2 of 2 run(s) completed")
    code, out, _ = run_cli(capsys, "complete", manifest, "--all-runs", "--verbose")
    assert code == 0 and out.count("prediction") >= 2     # the full reports


def test_all_runs_skips_failures_with_a_note_and_quiet_hides_it(tmp_path, capsys):
    manifest = curve_ladder(tmp_path, runs=("a",), short=("z",))
    code, out, err = run_cli(capsys, "complete", manifest, "--all-runs", "--json")
    assert code == 0
    doc = json.loads(out)
    records = doc["runs"]
    assert (doc["n_runs"], doc["n_completed"], doc["law"]) == (2, 1, "annealing")
    # Every run is in the JSON: the completed one, and the skipped one with its reason.
    assert [c["run"] for c in records] == ["a", "z"]
    assert "prediction" in records[0] and "error" not in records[0] and records[1]["error"]
    assert "delphi: note: run 'z' not completed" in err
    code, out, err = run_cli(capsys, "-q", "complete", manifest, "--all-runs", "--json")
    assert code == 0 and err == "" and [c["run"] for c in json.loads(out)["runs"]] == ["a", "z"]
    # a named run that cannot be completed is an error, as for one run
    code, _, err = run_cli(capsys, "complete", manifest, "--run", "a", "--run", "z")
    assert code == 1 and err.startswith("delphi: error:")


def test_optimal_runs_its_bootstrap_with_jobs_not_serially(monkeypatch, capsys):
    # `delphi optimal` bootstraps by default (F17): -j reaches the bootstrap, and the command
    # is no longer one that "has no parallel step".
    from delphi.analyses import optimal as optimal_module
    from delphi.cli.main import build_parser

    parser, _ = build_parser()
    assert not getattr(parser.parse_args(["optimal", "x", "-j", "2"]), "serial_command", False)
    seen = {}
    real = optimal_module.bootstrap

    def spy(fit, **kw):
        seen.update(kw)
        return real(fit, **{**kw, "n_jobs": 1})

    monkeypatch.setattr(optimal_module, "bootstrap", spy)
    code, out, err = run_cli(capsys, "optimal", "epoch-chinchilla", "--target-flops", "1e23",
                             "--n-boot", "20", "-j", "2", "--json")
    assert code == 0 and seen["n_jobs"] == 2 and "no parallel step" not in err
    assert json.loads(out)["n_draws"] == 20


@pytest.mark.parametrize("cores, jobs, note", [
    (2, "-5", "delphi: note: -j -5 asks for all cores but 4; this machine has 2, so it runs "
              "serially"),
    (8, "-5", None),        # all but 4 of 8: four workers, as asked
    (2, "-2", None),        # all but one of 2: one, as asked
])
def test_a_negative_jobs_count_that_leaves_no_core_says_so(tmp_path, capsys, monkeypatch,
                                                           cores, jobs, note):
    # joblib's -N (all cores but N-1) is accepted; when the machine has no core to spare,
    # delphi runs serially (at least one worker) and says so instead of nothing (h111's F7)
    path = tmp_path / "runs.csv"
    path.write_text("run,flops,loss\n" + "".join(f"r{i},{c},{l}\n" for i, (c, l) in enumerate(
        [(1e18, 4.47), (3e18, 4.12), (1e19, 3.85), (3e19, 3.62), (1e20, 3.43)])))
    monkeypatch.setattr("os.cpu_count", lambda: cores)
    code, _, err = run_cli(capsys, "predict", str(path), "--law", "power", "--floor", "1.5",
                           "--target-flops", "1e22", "--interval", "none", "-j", jobs)
    assert code == 0
    assert (note in err.splitlines()) if note else "delphi: note: -j" not in err
