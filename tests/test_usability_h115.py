"""A new user's probe of predict's checks (F3): a law the ladder cannot be fitted with is told
before a target input it would need (asking for the input first sends the user on a detour),
and target flags that do not give what the law reads are a usage error (exit code 2, as no
target at all is), while a manifest's target stays a delphi error (exit code 1)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import delphi
from delphi.cli import main
from delphi.errors import LadderError, TargetError, TargetInputError

COMPUTE = pd.DataFrame({"run": [f"r{i}" for i in range(5)],
                        "flops": [1e18, 3e18, 1e19, 3e19, 1e20],
                        "loss": [4.47, 4.12, 3.83, 3.60, 3.40]})


def _csv(tmp_path, frame=COMPUTE, name="hero5"):
    path = tmp_path / f"{name}.csv"
    frame.to_csv(path, index=False)
    return path


def test_a_law_the_ladder_cannot_feed_is_told_before_the_target_it_would_need(tmp_path,
                                                                                 capsys):
    code = main(["predict", str(_csv(tmp_path)), "--target-flops", "1e22",
                 "--law", "chinchilla"])
    err = capsys.readouterr().err
    assert code == 1
    assert "law 'chinchilla' reads params, tokens but ladder 'hero5' has no params, tokens " \
           "column; columns found: run, flops, loss" in err
    assert "--target-params" not in err          # no detour through the target's N and D
    # the API checks in the same order, for a named law and for a named candidate
    ladder = delphi.Ladder(COMPUTE, name="hero5")
    with pytest.raises(LadderError, match="has no params, tokens column"):
        delphi.predict(ladder, {"flops": 1e22}, "chinchilla")
    with pytest.raises(LadderError, match="has no params, tokens column"):
        delphi.predict(ladder, {"flops": 1e22}, "auto", candidates=["chinchilla", "power"])


def test_target_flags_that_miss_the_laws_input_are_a_usage_error(tmp_path, capsys):
    path = str(_csv(tmp_path))
    code = main(["predict", path, "--target-params", "1e9", "--law", "power"])
    err = capsys.readouterr().err
    assert code == 2 and "law 'power' needs the target's flops; give --target-flops" in err
    code = main(["predict", path, "--target-params", "1e9", "--law", "power", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 2 and doc["error"]["type"] == "UsageError"
    # the API's error is a TargetError still
    with pytest.raises(TargetInputError, match="needs the target's flops") as e:
        delphi.predict(delphi.load_ladder(COMPUTE), {"params": 1e9}, "power")
    assert isinstance(e.value, TargetError)


def test_a_manifest_target_missing_the_laws_input_stays_a_delphi_error(tmp_path, capsys):
    n = [1e8, 2e8, 4e8, 8e8, 1.6e9]
    _csv(tmp_path, pd.DataFrame({"run": list("abcde"), "params": n,
                                 "tokens": [20 * x for x in n],
                                 "loss": [3.5, 3.3, 3.1, 2.95, 2.8]}), name="lad")
    (tmp_path / "lad.toml").write_text(
        'name = "lad"\ndescription = "probe"\n[source]\npath = "lad.csv"\nreader = "csv"\n'
        '[predict]\nlaw = "chinchilla"\ntarget_flops = 1e22\n')
    code = main(["predict", str(tmp_path / "lad.toml"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["error"]["type"] == "TargetInputError"
    assert "law 'chinchilla' needs the target's params" in doc["error"]["message"]


@pytest.mark.parametrize("command", [["register", "--registry", "REG", "--id", "q"],
                                     ["suggest"]])
def test_every_command_makes_target_flags_missing_the_laws_input_usage(tmp_path, capsys,
                                                                        command):
    # h120's F18: predict said exit 2, register and suggest still exit 1 (TargetInputError);
    # nothing is written to the registry.
    path = str(_csv(tmp_path))
    reg = tmp_path / "r.jsonl"
    argv = [str(reg) if a == "REG" else a for a in command]
    code = main([*argv, path, "--target-params", "1e9", "--law", "power", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 2 and doc["error"]["type"] == "UsageError"
    assert "needs the target's flops" in doc["error"]["message"] and not reg.exists()
