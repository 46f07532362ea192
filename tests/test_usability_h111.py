"""A new user's probe of the command line's flags (findings F6-F8 of h111): every bad flag
value is a usage error naming its flag (exit code 2, ``UsageError`` under ``--json``), as
docs/usage.md promises, not a library error (exit code 1) a script would take for bad data."""

from __future__ import annotations

import json
import re

import pytest

from delphi.cli import main
from delphi.presentation.cli.main import build_parser

# The files named do not exist: each value must be refused while parsing, before any is read
# (without the parse-time checks these ended in "ladder not found", exit code 1).
PREDICT = ["predict", "missing.csv", "--target-flops", "1e22"]
SCORE = ["score", "--registry", "missing.jsonl", "--id", "h5"]


@pytest.mark.parametrize("argv, message", [
    (PREDICT + ["--huber-delta", "0"], "argument --huber-delta: must be a positive finite"),
    (PREDICT + ["--huber-delta", "-1"], "argument --huber-delta: must be a positive finite"),
    (PREDICT + ["--huber-delta", "nan"], "argument --huber-delta: must be a positive finite"),
    (PREDICT + ["--floor", "2:1"], "argument --floor: a floor range LOW:HIGH needs 0 <= LOW < "
                                   "HIGH, both finite; got '2:1'"),
    (PREDICT + ["--floor", "-1:2"], "argument --floor: a floor range LOW:HIGH needs"),
    (PREDICT + ["--floor", "-1"], "argument --floor: the irreducible loss E is a finite number "
                                  "in [0, 100], got '-1'"),
    (PREDICT + ["--floor", "inf"], "argument --floor: the irreducible loss E"),
    (PREDICT + ["--fit-max-flops", "-1"], "argument --fit-max-flops: must be a positive finite"),
    (PREDICT + ["--scale", "flops=0"], "argument --scale: the factor for flops must be a "
                                       "positive finite number"),
    (PREDICT + ["--scale", "flopz=2"], "argument --scale: unknown column 'flopz' (did you mean "
                                       "'flops'?)"),
    (PREDICT + ["--unit", "furlongs"], "argument --unit: unknown unit 'furlongs'; accepted: "
                                       "nats/token, bits/byte, bits/token"),
    (PREDICT + ["--format", "xml"], "argument --format: unknown format 'xml'; choose csv, "
                                    "jsonl, parquet"),
    (PREDICT + ["--fix", "alpha=nan"], "argument --fix: a fixed value must be finite"),
    (PREDICT + ["--bound", "alpha=2:1"], "argument --bound: a bound needs LOWER < UPPER"),
    (["suggest", "missing.csv", "--target-flops", "1e22", "--budget", "-5"],
     "argument --budget: must be a positive finite number, got '-5'"),
    (["plan", "--target-flops", "1e22", "--score", "missing.csv", "--noise", "-1"],
     "argument --noise: must be a positive finite number"),      # was accepted (rc 0)
    (["plan", "--target-flops", "1e22", "--span", "-1"], "argument --span: a ratio of largest to smallest is at least 1"),
    (["isoflop", "missing.csv", "--tolerance", "0"], "argument --tolerance: must be a positive"),
    (["optimal", "missing.csv", "--target-flops", "1e22", "--floor", "-1"],
     "argument --floor: the irreducible loss E"),
    (["compare-recipes", "a.csv", "b.csv", "--target-flops", "1e22", "--floor", "-1"],
     "argument --floor: the irreducible loss E"),
    (SCORE + ["--actual", "nan"], "argument --actual: 'nan' is neither a loss"),
    (SCORE + ["--actual", "inf"], "argument --actual: 'inf' is neither a loss"),
    (SCORE + ["--actual", "-1"], "argument --actual: '-1' is neither a loss"),
    (SCORE + ["--actual", "0"], "argument --actual: '0' is neither a loss"),
    (SCORE + ["--actual", "1e5"], "argument --actual: '1e5' is neither a loss (a finite number "
                                  "in [0.0001, 100]) nor an accuracy fraction in (0, 1]"),
    (SCORE + ["--loss-a", "2.9", "--loss-b", "-2"], "argument --loss-b: '-2' is not a plausible "
                                                    "loss"),
    (SCORE + ["--actual", "2.5", "--unit", "furlongs"], "argument --unit: unknown unit "
                                                       "'furlongs'; accepted: nats/token"),
    (["register", "--registry", "missing.jsonl", "--id", "x", "--target-unit", "%"],
     "argument --target-unit: unknown unit '%'"),
    (["complete", "missing.csv", "--run", "r", "--upto-fraction", "1.5"],
     "argument --upto-fraction: a share of training done is in (0, 1]"),   # was exit 1
    (["plot", "completion", "missing.csv", "--run", "r", "--upto-fraction", "0"],
     "argument --upto-fraction: a share of training done is in (0, 1]"),
    (["register", "--registry", "missing.jsonl", "--id", "x", "--external-interval", "2.5:2.7"],
     "argument --external-interval: expected LOWER:UPPER:LEVEL[:KIND]"),
    (["register", "--registry", "missing.jsonl", "--id", "x", "--external-loss", "nan"],
     "argument --external-loss: 'nan' is neither a loss"),
    # --created-at is read while parsing (h120's F11: exit 1 RegistryError naming created_at)
    (["register", "--registry", "missing.jsonl", "--id", "x", "--created-at", "yesterday"],
     "argument --created-at: not an ISO 8601 timestamp"),
    (["score", "--registry", "missing.jsonl", "--id", "x", "--actual", "2.5", "--created-at",
      "2026-01-01T00:00:00"], "argument --created-at: '2026-01-01T00:00:00' has no time zone"),
    # plan's counts, share and ratios (h120's F13: exit 1 LadderErrors naming no flag)
    (["plan", "--target-flops", "1e22", "--budgets", "-5"], "argument --budgets: must be at least 1"),
    (["plan", "--target-flops", "1e22", "--sizes-per-budget", "0"],
     "argument --sizes-per-budget: must be at least 1"),
    (["plan", "--target-flops", "1e22", "--fraction", "2"], "argument --fraction: a share is in (0, 1)"),
    (["plan", "--target-flops", "1e22", "--span", "0.5"],
     "argument --span: a ratio of largest to smallest is at least 1"),
])
def test_a_bad_flag_value_is_a_usage_error_naming_the_flag(capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err, err
    with pytest.raises(SystemExit) as stop:         # the same with --json: a UsageError
        main([*argv, "--json"])
    out, _ = capsys.readouterr()
    error = json.loads(out)["error"]
    assert stop.value.code == 2 and error["type"] == "UsageError"
    assert message in error["message"]


@pytest.fixture(scope="module")
def parser():
    return build_parser()[0]


@pytest.mark.parametrize("argv, dest, value", [
    (PREDICT + ["--floor", "0"], "floor", 0.0),                  # a law without a floor
    (PREDICT + ["--floor", "0:1.8"], "floor", (0.0, 1.8)),
    (PREDICT + ["--unit", "bpb"], "unit", "bits/byte"),          # aliases still work
    (PREDICT + ["--format", "toml"], "format", "toml"),          # the reader's own message
    (PREDICT + ["--bound", "alpha=:1"], "bound", [("alpha", (None, 1.0))]),
    (SCORE + ["--actual", "0.612"], "actual", 0.612),           # an accuracy fraction
    (SCORE + ["--actual", "2.05"], "actual", 2.05),             # a loss
    (SCORE + ["--actual", "0.6", "--unit", "Accuracy"], "unit", "accuracy"),
])
def test_good_values_still_parse(parser, argv, dest, value):
    assert getattr(parser.parse_args(argv), dest) == value


@pytest.mark.parametrize("argv, message", [
    (["fit", "--floor", "1.4:1.8"], "a floor range (--floor LOW:HIGH) is for `delphi predict`"),
    (["fit", "--fix", "E=2", "--floor", "1.5"], "E fixed more than once (--fix/--floor)"),
    (["fit", "--bound", "alpha=0:1", "--bound", "alpha=0:2"], "bounded more than once"),
    (["predict", "--target-flops", "1e22", "--laws", "power"],
     "--laws, --floors and --deltas name the candidates of --law auto or --ensemble"),
])
def test_option_combinations_are_usage_errors_too(tmp_path, capsys, argv, message):
    # found after parsing, but still command-line usage: exit code 2, not a LawError (1)
    path = tmp_path / "runs.csv"
    path.write_text("run,flops,loss\n" + "".join(f"r{i},{c},{l}\n" for i, (c, l) in enumerate(
        [(1e18, 4.47), (3e18, 4.12), (1e19, 3.85), (3e19, 3.62), (1e20, 3.43)])))
    code = main([argv[0], str(path), *argv[1:], "--law", "power", "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and json.loads(out)["error"]["type"] == "UsageError"
    assert message in err


# ------------------------------------------------------------------ F8: level labels
@pytest.mark.parametrize("level, text", [
    (0.9, "90%"), (0.95, "95%"), (0.5, "50%"), (0.975, "97.5%"),    # was "98%" (:.0%)
    (0.999999, "99.9999%"), (0.999, "99.9%"), (0.6827, "68.27%"),
    (1 - 1e-12, "99.9999999999%"), (1e-7, "1e-05%"),
])
def test_a_level_label_is_never_rounded_to_100_percent(level, text):
    from delphi.core.text import level_percent

    assert level_percent(level) == text


def test_predict_labels_a_high_level_with_its_digits_and_says_the_reference_caps_it(
        tmp_path, capsys):
    path = tmp_path / "runs.csv"
    path.write_text("run,flops,loss\n" + "".join(f"r{i},{c},{l}\n" for i, (c, l) in enumerate(
        [(1e18, 4.4684), (3e18, 4.1246), (1e19, 3.8033), (3e19, 3.5405), (1e20, 3.2899)])))
    assert main(["predict", str(path), "--target-flops", "1e22", "--law", "power",
                 "--level", "0.999999"]) == 0
    out = capsys.readouterr().out
    assert "99.9999% interval for one new run" in out and "100%" not in out
    assert "99.9999% interval for the expected loss" in out
    note = re.search(r"the quantile of (\d+) reference errors is about their largest: \1 "
                     r"errors show nothing rarer than 1 in \1, so above level ([\d.]+) the "
                     r"reference spread stops growing with the level; the intervals, the "
                     r"expected-loss one most \(no run noise widens it\), are likely too "
                     r"narrow at this level", out)
    assert note and float(note.group(2)) == pytest.approx(1 - 1 / int(note.group(1)), abs=1e-3)


@pytest.mark.parametrize("argv, message", [
    (["register", "--external-loss", "2.5", "--target-flops", "1e21"],
     "--external-loss needs --external-source"),
    (["register", "--external-interval", "2.4:2.6:0.9"],
     "give LADDER to forecast from, or --external-loss"),
])
def test_register_flags_that_do_not_go_together_are_usage_errors(tmp_path, capsys, argv,
                                                                 message):
    reg = tmp_path / "r.jsonl"
    code = main([*argv, "--id", "x", "--registry", str(reg), "--json"])
    out, err = capsys.readouterr()
    assert code == 2 and json.loads(out)["error"]["type"] == "UsageError" and message in err
    assert not reg.exists()


def test_isoflop_noise_bootstrap_without_noise_is_a_usage_error(capsys):
    # h120's F14: exit 1 FitError "... got None"
    code = main(["isoflop", "missing.csv", "--bootstrap", "noise", "--json"])
    out, _ = capsys.readouterr()
    error = json.loads(out)["error"]
    assert code == 2 and error["type"] == "UsageError"
    assert "--bootstrap noise needs --noise SD" in error["message"]
