"""A new user's probe of the command line: a misspelt ``--columns`` name gets a did-you-mean,
and a bad target value is one kind of error on the command line (a usage error naming the
flag, exit code 2) and another through the API (a TargetError naming the API's argument)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import delphi
from delphi.cli import main
from delphi.errors import LadderError, TargetError


def _runs(tmp_path):
    path = tmp_path / "runs.csv"
    pd.DataFrame({"run": list("abcde"), "N": [1e8, 2e8, 4e8, 8e8, 1.6e9],
                  "tokens": [2e9, 4e9, 8e9, 1.6e10, 3.2e10],
                  "loss": [3.5, 3.3, 3.1, 2.95, 2.8]}).to_csv(path, index=False)
    return path


# ------------------------------------------------------------------ --columns did-you-mean
@pytest.mark.parametrize("mapping, hint", [
    ("parms=N", "parms (did you mean 'params'?)"),
    ("Tokns=tokens,parms=N", "Tokns (did you mean 'tokens'?), parms (did you mean 'params'?)"),
    ("N=N", "N (did you mean 'params'?)"),         # the field's symbol for params
])
def test_a_misspelt_columns_name_gets_a_did_you_mean(tmp_path, capsys, mapping, hint):
    code = main(["predict", str(_runs(tmp_path)), "--columns", mapping, "--target-flops", "1e22"])
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert f"unknown canonical column(s) {hint}; known: run, params" in err


def test_the_did_you_mean_is_the_readers_so_the_api_has_it_too(tmp_path):
    frame = pd.read_csv(_runs(tmp_path))
    with pytest.raises(LadderError, match=r"parms \(did you mean 'params'\?\); known:"):
        delphi.load_ladder(frame, columns={"parms": "N"})
    # nothing close: no guess
    with pytest.raises(LadderError, match=r"column\(s\) xyz; known:"):
        delphi.load_ladder(frame, columns={"xyz": "N"})


# ------------------------------------------------------------------ bad target values
@pytest.mark.parametrize("argv, message", [
    (["--target-params", "-1"], "argument --target-params: must be a positive finite number, "
                                "got '-1'"),
    (["--target-params", "abc"], "argument --target-params: not a number: 'abc'"),
    (["--target-tokens", "0"], "argument --target-tokens: must be a positive finite number, "
                               "got '0'"),
    (["--target-flops", "nan"], "argument --target-flops: must be a positive finite number, "
                                "got 'nan'"),
    (["--target-flops", "inf"], "argument --target-flops: must be a positive finite number, "
                                "got 'inf'"),
    (["--target-flops", "1e308"], "argument --target-flops: 1e+308 is outside 1..1e+40: not a "
                                  "plausible FLOP count"),
    (["--target-flops", "1e22", "--target-active-params", "-5"],
     "argument --target-active-params: must be a positive finite number, got '-5'"),
])
def test_a_bad_target_value_is_a_usage_error_naming_the_flag(capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        main(["predict", "epoch-chinchilla", *argv])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err
    with pytest.raises(SystemExit) as stop:         # the same with --json: a UsageError
        main(["predict", "epoch-chinchilla", *argv, "--json"])
    out, _ = capsys.readouterr()
    error = json.loads(out)["error"]
    assert stop.value.code == 2 and error["type"] == "UsageError" and message in error["message"]


@pytest.mark.parametrize("argv, flag", [
    (["isoflop", "x.csv", "--target-flops", "-1e22"], "--target-flops"),     # was any number
    (["optimal", "x.csv", "--target-flops", "0"], "--target-flops"),
    (["accuracy", "--task", "hellaswag", "--target-params", "-7e9", "--target-tokens", "2e12"],
     "--target-params"),
    (["compare-recipes", "a.csv", "b.csv", "--target-flops", "nan"], "--target-flops"),
    (["hparams", "x.csv", "--target-tokens", "-1"], "--target-tokens"),
    (["suggest", "x.csv", "--target-params", "0", "--target-tokens", "1e12"], "--target-params"),
    (["register", "x.csv", "--registry", "r.jsonl", "--id", "a", "--target-flops", "-1"],
     "--target-flops"),
])
def test_every_command_refuses_a_bad_target_the_same_way(capsys, argv, flag):
    # refused while parsing: the files named are never opened
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    assert f"argument {flag}: must be a positive finite number" in capsys.readouterr().err


def test_the_api_names_its_own_argument_not_the_flag(tmp_path):
    ladder = delphi.load_ladder(pd.read_csv(_runs(tmp_path)), columns={"params": "N"})
    with pytest.raises(TargetError) as e:
        delphi.predict(ladder, {"params": -1, "tokens": 1e10}, "chinchilla")
    assert str(e.value) == "target params must be a positive finite number, got -1"
    with pytest.raises(TargetError) as e:
        delphi.predict_accuracy(ladder, "hellaswag", target_params=-1, target_tokens=1e10)
    assert str(e.value) == "target_params must be a positive finite number, got -1"
    with pytest.raises(TargetError) as e:
        delphi.predict_accuracy(ladder, "hellaswag", target_params=1e9, target_tokens=1e40)
    assert str(e.value).startswith("target_tokens 1e+40 is outside 1..1e+30")
    other = pd.read_csv(_runs(tmp_path)).assign(loss=lambda f: f["loss"] + 0.01)
    other = delphi.load_ladder(other, columns={"params": "N"})
    with pytest.raises(TargetError) as e:
        delphi.compare_recipes([ladder, other], names=["a", "b"], target_flops=0.0,
                               law="power")
    assert str(e.value) == "target_flops must be positive and finite, got 0.0"
