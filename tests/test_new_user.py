"""Issue 23, "what a new user still hits": each rough edge found by trying delphi as a newcomer,
reproduced as it was reported."""

from __future__ import annotations

import json

import pytest

import delphi
from delphi.cli import main
from test_cli import good_frame
from test_cli import write as ladder_csv


def run_cli(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        main(list(argv))
    out, err = capsys.readouterr()
    return exc.value.code, out, err


def test_a_target_option_given_to_fit_gets_fits_usage_and_a_hint(capsys):
    # Before: the top-level usage ("usage: delphi [-h] ...{predict,fit,...}") with no hint.
    code, out, err = run_cli(capsys, "fit", "marin-moe-535b", "--target-flops", "1e22")
    assert code == 2 and out == ""
    assert err.startswith("usage: delphi fit ")
    assert "delphi fit: error: unrecognized arguments: --target-flops 1e22" in err
    assert "`delphi predict`" in err and "take targets" in err
    # a nested command names itself too
    code, _, err = run_cli(capsys, "registry", "verify", "--registry", "x.jsonl", "--bogus")
    assert code == 2 and "delphi registry verify: error: unrecognized arguments: --bogus" in err


def test_predict_without_a_target_is_a_usage_error(tmp_path, capsys):
    # Before: exit 1, as if the ladder or fit had failed. A ladder without a manifest target
    # and no --target-* option is bad usage: exit 2, like argparse's, and JSON says so.
    path = ladder_csv(tmp_path, good_frame())
    assert main(["predict", str(path)]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and "no target: give --target-flops" in err
    assert main(["predict", str(path), "--json"]) == 2
    out, _ = capsys.readouterr()
    assert json.loads(out)["error"]["type"] == "UsageError"
    # a manifest target still needs no option
    assert main(["predict", "marin-moe-535b", "--interval", "none"]) == 0
    capsys.readouterr()


def test_dir_of_the_package_lists_only_public_names():
    names = dir(delphi)
    for helper in ("Any", "TYPE_CHECKING", "importlib", "annotations", "_LAZY"):
        assert helper not in names
    assert {"predict", "fit", "Ladder", "DelphiError"} <= set(names)
    assert names == sorted(delphi.__all__)


def test_one_rule_for_interval_methods_that_cannot_be_made(capsys):
    # Before: --interval delta (or bootstrap) that could not be made exited 0 with "no interval"
    # while --interval calibrated was an error. Now every named method is an error saying why.
    for method in ("delta", "bootstrap", "calibrated"):
        assert main(["predict", "marin-moe-535b", "--interval", method]) == 1
        _, err = capsys.readouterr()
        assert err.count("\n") == 1 and f"no {method} interval" in err, err
    # auto falls back (to the reference class here) and says the interval is conditional on
    # the fixed floor; with no interval at all the note says the forecast is, not "interval"
    hero = (delphi.load_ladder("marin-moe-535b"), {"flops": 2.61e24}, "power")
    f = delphi.predict(*hero, fixed={"E": 1.5})
    assert f.interval.method == "reference"
    assert any("fixed (not fitted): the interval is conditional" in n for n in f.notes)
    import pandas as pd
    from delphi.reference import COLUMNS, ReferenceClass
    none = ReferenceClass(rows=pd.DataFrame(columns=list(COLUMNS)))
    f = delphi.predict(*hero, fixed={"E": 1.5}, reference=none)
    assert f.interval is None
    assert any("fixed (not fitted): the forecast is conditional" in n for n in f.notes)
    assert not any("the interval is conditional" in n for n in f.notes)


def test_a_dataframe_error_suggests_an_option_the_caller_can_pass():
    # Before: fit(df) said "drop_invalid=True (CLI --drop-invalid) drops invalid rows", and
    # fit(df, "chinchilla", drop_invalid=True) was a TypeError. Reading options are
    # load_ladder's; the message now says to read the DataFrame with it, and that works.
    import numpy as np
    import pandas as pd
    c = np.logspace(18, 20, 6)
    df = pd.DataFrame({"run": [f"r{i}" for i in range(6)], "flops": c,
                       "loss": 1.8 + 150 * c ** -0.12})
    df.loc[2, "loss"] = np.nan
    for call in (lambda: delphi.fit(df, "power"),
                 lambda: delphi.predict(df, {"flops": 1e22}, "power", interval=None)):
        with pytest.raises(delphi.LadderError) as info:
            call()
        msg = str(info.value)
        assert "run 'r2' (row 2): column 'loss'" in msg
        assert "delphi.load_ladder(df, drop_invalid=True) (in place of the DataFrame)" in msg
        assert "(CLI --drop-invalid)" not in msg
    with pytest.warns(delphi.LadderWarning, match="dropped 1 row"):
        lad = delphi.load_ladder(df, drop_invalid=True)
    assert delphi.fit(lad, "power").n_points == 5
    # a DataFrame missing the loss column points to load_ladder's metric=
    bad = df.drop(columns="loss").assign(val_loss=1.0 + 0 * c)
    with pytest.raises(delphi.LadderError, match=r"pick the loss among val_loss with "
                                                 r"delphi\.load_ladder\(df, metric=NAME\)"):
        delphi.fit(bad, "power")


@pytest.mark.shared_data
def test_bundled_descriptions_state_the_params_range_the_fit_sees(data_dir):
    # Before: `delphi ladders` said misfitting2025-final has "12M..400M params" (its models'
    # names, without embeddings) while the params column fitted is 57M..522M.
    import re
    import warnings
    sizes = {"M": 1e6, "B": 1e9}
    checked = 0
    for name, desc in delphi.list_ladders():
        m = re.search(r"(\d+(?:\.\d+)?)([MB])\.\.(\d+(?:\.\d+)?)([MB]) params", desc)
        if m:
            assert "embedding" in desc, (name, desc)     # counted or not: said
        if not m:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            finals, _ = delphi.load_ladder(name).final_points()
        lo = float(m[1]) * sizes[m[2]]
        hi = float(m[3]) * sizes[m[4]]
        # stated to 2 significant digits: within 6% of the data's range
        assert finals["params"].min() == pytest.approx(lo, rel=0.06), (name, desc)
        assert finals["params"].max() == pytest.approx(hi, rel=0.06), (name, desc)
        checked += 1
    assert checked >= 3


def test_columns_maps_other_names_without_a_manifest(tmp_path, capsys):
    # Before: a CSV with N / D under other names needed a hand-written manifest.
    import numpy as np
    import pandas as pd
    c = np.logspace(18, 20, 6)
    n = (c / 120) ** 0.5
    df = pd.DataFrame({"run": [f"r{i}" for i in range(6)], "n_params": n, "D": 20 * n,
                       "loss": 1.8 + 150 * c ** -0.12})
    path = tmp_path / "np.csv"
    df.to_csv(path, index=False)
    # the error suggests the mapping, in the spelling of the caller
    assert main(["fit", str(path)]) == 1
    _, err = capsys.readouterr()
    assert "columns found: run, n_params, D, loss; map them with --columns " \
           "params=n_params,tokens=D" in err
    assert main(["fit", str(path), "--columns", "params=n_params,tokens=D", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fit"]["n_runs"] == 6
    lad = delphi.load_ladder(df, columns={"params": "n_params", "tokens": "D"})
    assert {"params", "tokens", "flops"} <= set(lad.table.columns)
    with pytest.raises(delphi.LadderError, match=r"map them with delphi\.load_ladder\(df, "
                                                 r"columns=\{'params':'n_params'"):
        delphi.fit(df, "power")
    # bad mappings name what is wrong
    with pytest.raises(delphi.LadderError, match="unknown canonical column.*parms"):
        delphi.load_ladder(df, columns={"parms": "n_params"})
    with pytest.raises(delphi.LadderError, match="column 'nope' \\(for params\\) not found"):
        delphi.load_ladder(df, columns={"params": "nope"})
    with pytest.raises(delphi.LadderError, match="is a manifest: it maps its columns"):
        delphi.load_ladder("marin-moe-535b", columns={"params": "N"})
    with pytest.raises(delphi.LadderError, match="columns must map"):
        delphi.load_ladder(df, columns=["params"])
    code, _, err = run_cli(capsys, "fit", str(path), "--columns", "params")
    assert code == 2 and "expected NAME=COLUMN" in err


def test_parallel_workers_warnings_reach_the_caller_and_its_filters():
    # Before: with -j 2, `complete --all-runs` printed each worker's FitWarning to stderr
    # (worker processes do not have the CLI's filter that ignores them). Now the workers'
    # warnings are re-issued in the caller, under its filters.
    import functools
    import warnings

    from delphi.errors import DelphiWarning
    from delphi.parallel import map_jobs
    job = functools.partial(warnings.warn, "from a worker")
    with pytest.warns(DelphiWarning, match="from a worker") as got:
        assert map_jobs(job, [DelphiWarning] * 4, n_jobs=2, show_progress=False) == [None] * 4
    assert len([w for w in got if "from a worker" in str(w.message)]) == 4
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("ignore", DelphiWarning)
        map_jobs(job, [DelphiWarning] * 4, n_jobs=2, show_progress=False)
    assert not seen


def test_complete_all_runs_prints_a_table_and_a_summary(capsys):
    from test_cli_jobs import curve_ladder
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as tmp:
        manifest = curve_ladder(Path(tmp), runs=("a",), short=("z",))
        assert main(["complete", manifest, "--all-runs", "-j", "2"]) == 0
    out, err = capsys.readouterr()
    lines = out.strip().splitlines()
    assert err == "" and len(lines) == 4
    assert lines[2].startswith("z") and "not completed:" in lines[2]
    assert lines[3].startswith("1 of 2 run(s) completed") and "1 not completed" in lines[3]


def test_predict_takes_several_targets_as_predict_accuracy_does():
    # Before: "target params must be a positive finite number, got [...]".
    import numpy as np
    import pandas as pd
    c = np.logspace(18, 20, 6)
    lad = delphi.load_ladder(pd.DataFrame({"run": [f"r{i}" for i in range(6)], "flops": c,
                                           "loss": 1.8 + 150 * c ** -0.12}))
    many = delphi.predict(lad, {"flops": [1e21, 1e22]}, "power", interval="delta")
    assert isinstance(many, list) and len(many) == 2
    for f, c_t in zip(many, (1e21, 1e22)):
        one = delphi.predict(lad, {"flops": c_t}, "power", interval="delta")
        assert f.loss == one.loss and (f.lower, f.upper) == (one.lower, one.upper)
    as_list = delphi.predict(lad, [{"flops": 1e21}, 1e22], "power", interval=None)
    assert [f.loss for f in as_list] == [f.loss for f in many]
    with pytest.raises(delphi.TargetError, match="sequences of one length; got flops: 2"):
        delphi.predict(lad, {"flops": [1e21, 1e22], "params": [1e9]}, "power")
    with pytest.raises(delphi.TargetError, match="an empty list of targets"):
        delphi.predict(lad, [], "power")


def test_a_fresh_users_findings(tmp_path, capsys):
    """What a new user hit (issue 23's closing check): each reproduced as reported."""
    import numpy as np
    import pandas as pd
    # a duplicate-rows error lists 10 rows and the count, not 200,000 row numbers (losses
    # differ: exact copies would be merged, with a warning)
    path = tmp_path / "dup.csv"
    pd.DataFrame({"run": ["a"] * 5000, "flops": 1e18,
                  "loss": 3.0 + 1e-6 * np.arange(5000)}).to_csv(path, index=False)
    assert main(["predict", str(path), "--target-flops", "1e22"]) == 1
    err = capsys.readouterr().err
    assert len(err) < 600 and "(rows 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (5000 rows in all))" in err
    # a negative target is a value error, not "expected one argument"; a bad value of a
    # flag is a usage error naming it (exit code 2)
    with pytest.raises(SystemExit) as stop:
        main(["predict", "marin-moe-535b", "--target-flops", "-1e22"])
    assert stop.value.code == 2
    assert ("argument --target-flops: must be a positive finite number, got '-1e22'"
            in capsys.readouterr().err)
    # backtest without a design is a usage error (exit 2)
    assert main(["backtest", "marin-delphi-dense"]) == 2
    assert "choose one backtest design" in capsys.readouterr().err
    # a ladder whose active parameters exceed its total is refused, as a target is
    n = np.array([1e8, 2e8, 4e8, 8e8])
    df = pd.DataFrame({"run": list("abcd"), "params": n, "active_params": 2 * n,
                       "tokens": 20 * n, "loss": [3.0, 2.8, 2.6, 2.5]})
    with pytest.raises(delphi.LadderError, match=r"run 'a' \(row 0\): column 'active_params' is "
                                                 r"2e\+08, more than its params 1e\+08"):
        delphi.load_ladder(df)


def test_auto_with_one_candidate_does_not_say_it_was_chosen_by_backtest():
    # Before: "law chosen by leave-future-out backtest: power" where power was the only law
    # that could read a target given by C (the others were skipped).
    from bundled import load
    lad = load("marin-delphi-dense")         # with its known load warnings
    f = delphi.predict(lad, {"flops": 1e23}, "auto", interval=None)
    assert f.fit.law.name == "power"
    assert any(n.startswith("law power: the only candidate that can be evaluated at this "
                            "target") for n in f.notes)
    assert not any("chosen by leave-future-out backtest" in n for n in f.notes)
    assert "law: the only candidate" in f.report()


def test_json_lines_on_stdin_without_format_names_the_format():
    # Before: "columns found: {"run":"dense-3e18", flops:3e+18, ...; pick the loss among
    # loss:3.586} with --metric NAME".
    import io
    data = b'{"run":"a","flops":1e18,"loss":3.2}\n{"run":"b","flops":1e19,"loss":3.0}\n'
    with pytest.raises(delphi.LadderError, match=r"looks like JSON Lines .* give "
                                                 r"format='jsonl' \(CLI --format jsonl\)"):
        delphi.load_ladder(io.BytesIO(data))
    assert len(delphi.load_ladder(io.BytesIO(data), format="jsonl").runs) == 2


def test_an_existing_directory_is_named_as_one_not_as_an_unknown_ladder(tmp_path, monkeypatch):
    # Before: `delphi predict tb` (an existing folder) said "unknown ladder 'tb'".
    (tmp_path / "tb").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(delphi.LadderError, match=r"^tb is a directory \(not a bundled ladder\).*"
                                                 r"format=tensorboard"):
        delphi.load_ladder("tb")


def test_a_repeated_target_and_a_missing_output_folder_are_usage_errors(capsys):
    # Before: the last --target-flops won silently; a figure into a missing folder failed
    # only after the fit and its interval were computed.
    code, _, err = run_cli(capsys, "predict", "marin-moe-535b", "--target-flops", "1e22",
                           "--target-flops", "1e23")
    assert code == 2 and "--target-flops given twice (1e+22 and 1e+23)" in err
    code, _, err = run_cli(capsys, "plot", "forecast", "marin-moe-535b", "-o",
                           "/nonexistent-folder/x.png")
    assert code == 2 and "its folder '/nonexistent-folder' does not exist" in err


def test_a_total_n_target_on_a_compute_only_ladder_gets_a_note_about_moe(capsys):
    # Before: `delphi predict marin-moe-535b --target-params 5.35e11 --target-tokens 1e13`
    # (the 535B-A23B MoE's *total* N) converted C = 6ND silently, 23x too much compute.
    assert main(["predict", "marin-moe-535b", "--target-params", "5.35e11", "--target-tokens",
                 "1e13", "--interval", "none", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    found = [f for f in d["findings"] if f["code"] == "target-convention"
             and "mixture of experts" in f["message"]]
    assert len(found) == 1 and found[0]["subject"] == "target"
    assert "--target-active-params" in found[0]["message"]
    assert found[0]["message"] in d["notes"]
    # ... and not when the target's C is given, or its active parameters
    assert main(["predict", "marin-moe-535b", "--target-flops", "2.61e24", "--interval",
                 "none", "--json"]) == 0
    assert not [f for f in json.loads(capsys.readouterr().out)["findings"]
                if "mixture of experts" in f["message"]]


def test_a_ladder_whose_runs_are_in_two_units_is_named():
    # Before: a ladder whose four larger runs were in bits/token (1/ln 2 = 1.44x the nats of
    # the smaller ones) was fitted with no word of units.
    import math
    import warnings

    import numpy as np
    import pandas as pd
    c = 1e18 * 10 ** (0.5 * np.arange(8))
    y = 1.8 + 2.0 * (c / 1e18) ** -0.3
    mixed = np.where(np.arange(8) >= 4, y / math.log(2), y)
    with pytest.warns(delphi.LadderWarning, match="different units") as rec:
        lad = delphi.Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(8)], "flops": c,
                                          "loss": mixed}), name="mixed")
    msg = next(str(w.message) for w in rec if "different units" in str(w.message))
    assert "'r3'" in msg and "'r4'" in msg and "1.32x" in msg
    assert lad.warnings and "bits/token" in lad.warnings[-1]
    with warnings.catch_warnings():
        warnings.simplefilter("error", delphi.LadderWarning)     # the same law in one unit
        delphi.Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(8)], "flops": c,
                                    "loss": y}), name="clean")
    # every bundled ladder loads without it (no false alarm on real ladders)
    for name, _ in delphi.list_ladders():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert not [w for w in delphi.load_ladder(name).warnings if "different units" in w]


def test_a_loss_the_registry_would_refuse_is_named_when_the_ladder_is_read(tmp_path):
    # Before: a ladder accepted losses of 1e-30..1e30 while the registry refused any outside
    # 1e-4..100, so a ladder of perplexities fitted and forecast, then failed to register.
    import numpy as np
    import pandas as pd
    from delphi.inputs.units import LOSS_RANGE
    from delphi.registry import LOSS_RANGE as REGISTRY_RANGE
    assert LOSS_RANGE == REGISTRY_RANGE == (1e-4, 100.0)       # one range, in one place
    c = 1e18 * 10 ** (0.5 * np.arange(6))
    ppl = np.exp(1.8 + 2.0 * (c / 1e18) ** -0.3) * 20           # perplexities, 130..2,000
    with pytest.warns(delphi.LadderWarning, match="perplexity") as rec:
        delphi.Ladder(pd.DataFrame({"run": [f"r{i}" for i in range(6)], "flops": c,
                                    "loss": ppl}), name="ppl")
    msg = next(str(w.message) for w in rec if "plausible" in str(w.message))
    assert "6 rows of 6 runs ('r0', 'r1', 'r2' ...)" in msg and "registry refuses" in msg


def test_report_into_a_folder_it_cannot_make_fails_before_the_work(tmp_path, monkeypatch,
                                                                    capsys):
    # Before: `delphi report LADDER --html FILE/out` fitted, backtested and drew the page,
    # then failed to write it.
    import delphi.presentation.report as report_pkg

    def no_work(*a, **k):
        raise AssertionError("the page was made before the folder was checked")
    monkeypatch.setattr(report_pkg, "ladder_page", no_work)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert main(["report", "marin-moe-535b", "--html", str(blocker / "out")]) == 1
    err = capsys.readouterr().err
    assert "that is a file" in err and "FOLDER/index.html" in err
    assert main(["report", "marin-moe-535b", "--html", str(blocker)]) == 1
    assert "exists and is not a folder" in capsys.readouterr().err


def test_compare_recipes_on_a_ladder_too_small_to_resample_falls_back_and_says_so(capsys):
    # Before: "200 of 200 paired bootstrap draws could not be refitted for every recipe"
    # and no comparison at all, although `delphi predict marin-moe-535b` gives an interval
    # (the reference class). Now: the comparison, its interval from the recipes' own
    # forecast intervals (unpaired), the recipe that starves the bootstrap named.
    assert main(["compare-recipes", "marin-moe-535b", "marin-delphi-dense", "--target-flops",
                 "1e22", "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    assert "recipe 'marin-moe-535b' has 3 fitted points for the 3 free parameters" in out
    assert "no bootstrap" in out and "own forecast intervals (reference)" in out
    assert "crossover" in out and "nan" not in out.lower()
    assert main(["compare-recipes", "marin-moe-535b", "marin-delphi-dense", "--target-flops",
                 "1e22", "--n-boot", "20", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (c,) = doc["comparisons"]
    assert doc["n_draws"] == 0 and c["difference"]["lower"] < c["difference"]["loss"] \
        < c["difference"]["upper"]
    assert doc["curves"]["recipes"][0]["lower"][0] is None     # no band without draws


def test_two_ladder_files_with_one_name_point_to_names(tmp_path, capsys):
    # Before (a fresh user): "'runs' appears twice (give names=...)", a keyword the command
    # line does not have.
    for sub in ("a", "b"):
        (tmp_path / sub).mkdir()
        ladder_csv(tmp_path / sub, good_frame())
    a, b = str(tmp_path / "a" / "runs.csv"), str(tmp_path / "b" / "runs.csv")
    assert main(["compare-recipes", a, b, "--target-flops", "1e22"]) == 1
    assert "appears twice (give --names A,B)" in capsys.readouterr().err
    assert main(["compare-recipes", a, b, "--target-flops", "1e22", "--names", "x"]) == 1
    assert "1 names for 2 ladders: give one per ladder" in capsys.readouterr().err


def test_an_unknown_registry_id_lists_the_known_ones(tmp_path, capsys):
    reg = delphi.Registry(tmp_path / "r.jsonl")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reg.register(delphi.predict(delphi.load_ladder("marin-moe-535b"), {"flops": 2.61e24},
                                    interval="none"), id="hero-a")
    with pytest.raises(delphi.RegistryError, match=r"no entry 'hero' .*did you mean hero-a\? "
                                                    r"\(known: hero-a\)"):
        reg.get("hero")


def test_an_empty_list_of_targets_says_no_target():
    with pytest.raises(delphi.TargetError, match="no target: flops is an empty list"):
        delphi.predict("marin-moe-535b", {"flops": []})


def test_plan_takes_the_target_by_n_and_d(capsys):
    # Before (a fresh user): `plan --target-params N --target-tokens D` stopped at "required:
    # --target-flops", and a C disagreeing with 6ND is an error, so C was computed by hand.
    assert main(["plan", "--target-params", "7e10", "--target-tokens", "1.4e12", "--budgets",
                 "3", "--sizes-per-budget", "3"]) == 0
    assert "a target of 5.88e+23 FLOPs" in capsys.readouterr().out
    assert main(["plan", "--budgets", "3"]) == 2           # a usage error, before any work
    assert "--target-params N with --target-tokens D" in capsys.readouterr().err
