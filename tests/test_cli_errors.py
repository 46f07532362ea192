"""The command line's error contract (issue 10): a reader that goes away (``delphi ... | head``)
ends the command quietly; with ``--json`` an error is ``{"error": {"type", "message"}}`` on
stdout; messages name flags, never Python keywords."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.cli import main
from delphi.errors import for_cli, option
from test_cli import good_frame
from test_cli import write as ladder_csv


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err




# --------------------------------------------------------------------- closed pipe
def run_with_closed_stdout(*argv):
    """Run ``delphi ARGV`` as a console script whose stdout is a pipe with no reader (as after
    ``| head`` has exited); returns (exit code, stderr)."""
    r, w = os.pipe()
    os.close(r)    # the reader is gone before delphi writes anything
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # buffered, as usual
    try:
        proc = subprocess.run([sys.executable, "-m", "delphi.cli", *argv], stdout=w,
                              stderr=subprocess.PIPE, env=env, timeout=300)
    finally:
        os.close(w)
    return proc.returncode, proc.stderr.decode()


@pytest.mark.parametrize("argv", [
    ["ladders"],                                  # small output: written only at exit
    ["ladders", "--json"],
    ["--help"],
    ["predict", "--help"],
    ["--version"],
    ["predict", "marin-delphi-dense", "--target-flops", "1e23", "--json", "--interval", "none"],
    ["predict", "epoch-chinchilla", "--target-flops", "1e24", "--json", "--interval", "none"],
])
def test_a_closed_pipe_ends_quietly(argv, request):
    if "epoch-chinchilla" in argv:
        request.getfixturevalue("data_dir")      # skip (or fail in CI) without the data
    code, err = run_with_closed_stdout(*argv)
    assert code == 0, err
    assert err == ""  # no BrokenPipeError, no "Exception ignored"


def test_a_closed_pipe_still_reports_errors_on_stderr():
    code, err = run_with_closed_stdout("predict", "no-such-ladder", "--json")
    assert code == 1
    assert err.startswith("delphi: error: unknown ladder 'no-such-ladder'")
    assert "Traceback" not in err and "BrokenPipe" not in err


def _run_with_stdout(stdout, *argv, close_stdout=False):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run([sys.executable, "-m", "delphi.cli", *argv], stdout=stdout,
                          stderr=subprocess.PIPE, env=env, timeout=300,
                          preexec_fn=(lambda: os.close(1)) if close_stdout else None)
    return proc.returncode, proc.stderr.decode()


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv", [["ladders"], ["ladders", "--json"]])
def test_a_full_stdout_is_a_one_line_error(argv):
    with open("/dev/full", "w") as full:
        code, err = _run_with_stdout(full, *argv)
    assert code == 1
    assert err == "delphi: error: cannot write the output: No space left on device\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_an_error_with_a_full_stdout_is_still_told_on_stderr():
    # The JSON error object cannot be written; the one-line error on stderr still is.
    with open("/dev/full", "w") as full:
        code, err = _run_with_stdout(full, "predict", "no-such-ladder", "--json")
    assert code == 1 and "Traceback" not in err and "Exception ignored" not in err
    assert err.startswith("delphi: error: unknown ladder 'no-such-ladder'")


@pytest.mark.skipif(os.name != "posix", reason="closes file descriptor 1")
def test_a_closed_stdout_is_a_one_line_error():
    code, err = _run_with_stdout(None, "ladders", close_stdout=True)
    assert code == 1
    assert err == "delphi: error: cannot write the output: stdout is closed\n"


def test_head_of_a_large_json_output(tmp_path, data_dir):
    # The real pipeline: `delphi predict ... --json | head -c 10`.
    script = (f"{sys.executable} -m delphi.cli predict epoch-chinchilla --target-flops 1e24 "
              f"--json --interval none | head -c 10; exit ${{PIPESTATUS[0]}}")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.stdout == '{\n  "law": '[:10]
    assert proc.returncode == 0 and proc.stderr == ""


# --------------------------------------------------------------------- --json errors
def assert_json_error(code, out, err, kind, *fragments, exit_code=1):
    assert code == exit_code
    doc = json.loads(out)             # stdout is exactly one JSON document
    assert list(doc) == ["error", "delphi_version"] and set(doc["error"]) == {"type", "message"}
    assert doc["delphi_version"] == delphi.__version__
    assert doc["error"]["type"] == kind
    for fragment in fragments:
        assert fragment in doc["error"]["message"], (fragment, doc["error"]["message"])
    assert "Traceback" not in err
    return doc["error"]["message"]


def test_json_error_on_a_bad_value(tmp_path, capsys):
    f = good_frame()
    f.loc[3, "loss"] = -1.0
    code, out, err = run_cli(capsys, "predict", ladder_csv(tmp_path, f), "--target-flops",
                             "1e22", "--json")
    message = assert_json_error(code, out, err, "LadderError", "run 'r3'", "row 3",
                                "column 'loss'")
    # The same line is on stderr for a person watching the terminal.
    assert err.strip() == f"delphi: error: {message}"


def test_without_json_an_error_is_one_stderr_line_and_stdout_is_empty(tmp_path, capsys):
    code, out, err = run_cli(capsys, "fit", str(tmp_path / "absent.csv"))
    assert code == 1 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("delphi: error: ")


# One failing invocation per subcommand that has --json: (argv, error type).
def _every_command(tmp_path):
    absent = str(tmp_path / "absent.csv")
    reg = str(tmp_path / "absent.jsonl")
    return [
        (["predict", absent, "--target-flops", "1e22"], "LadderError"),
        (["fit", absent], "LadderError"),
        (["complete", absent, "--run", "a"], "LadderError"),
        (["hparams", absent], "LadderError"),
        (["backtest", absent, "--leave-one-budget-out"], "LadderError"),
        (["isoflop", absent], "LadderError"),
        (["optimal", absent, "--target-flops", "1e22"], "LadderError"),
        (["plan", "--target-flops", "1e22", "--from", absent], "LadderError"),
        (["register", absent, "--registry", reg, "--id", "x", "--target-flops", "1e22"],
         "LadderError"),
        (["score", "--registry", reg, "--id", "x", "--actual", "2.0"], "RegistryError"),
        (["registry", "list", "--registry", reg], "RegistryError"),
        (["registry", "show", "--registry", reg, "--id", "x"], "RegistryError"),
        (["registry", "report", "--registry", reg], "RegistryError"),
    ]


def test_every_command_with_json_reports_errors_as_json(tmp_path, capsys):
    for argv, kind in _every_command(tmp_path):
        code, out, err = run_cli(capsys, *argv, "--json")
        assert_json_error(code, out, err, kind)
        assert err.startswith("delphi: error: "), argv


def test_complete_json_is_one_document_when_no_run_completes(tmp_path, capsys):
    # `complete --all-runs` lists per-run failures, then fails when none completed: with
    # --json stdout must still be one document (the error), not the list followed by it.
    f = good_frame()
    code, out, err = run_cli(capsys, "complete", ladder_csv(tmp_path, f), "--all-runs", "--json")
    assert_json_error(code, out, err, "DelphiError", "none of the 6 runs could be completed")


@pytest.mark.parametrize("argv, fragment", [
    (["predict", "--json"], "delphi predict: the following arguments are required: ladder"),
    (["predict", "x.csv", "--json", "--level", "2"], "argument --level: a level is in (0, 1)"),
    (["predict", "x.csv", "--json", "--level", "90"],
     "argument --level: level is a fraction in (0, 1): did you mean 0.90? (got '90')"),
    (["predict", "x.csv", "--js", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
    (["--json"], "the following arguments are required"),
])
def test_usage_errors_with_json_are_json_with_exit_code_2(capsys, argv, fragment):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    out, err = capsys.readouterr()
    assert_json_error(stop.value.code, out, err, "UsageError", fragment, exit_code=2)
    assert "usage: delphi" in err      # argparse's usage text stays on stderr


def test_an_abbreviated_json_flag_is_json(capsys):
    # argparse accepts --jso for --json: the error is JSON too (here a LadderError, exit 1).
    code, out, err = run_cli(capsys, "fit", "x.csv", "--jso")
    assert_json_error(code, out, err, "LadderError", "x.csv")


def test_usage_error_without_json_leaves_stdout_empty(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["predict"])
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == "" and "usage: delphi predict" in err


def test_json_error_through_the_console_script(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "delphi.cli", "fit", str(tmp_path / "no.csv"),
                           "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"]["type"] == "LadderError"
    proc = subprocess.run([sys.executable, "-m", "delphi.cli", "fit", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert json.loads(proc.stdout) == {"error": {
        "type": "UsageError", "message": "delphi fit: the following arguments are required: "
                                         "ladder"}, "delphi_version": delphi.__version__}


# --------------------------------------------------------------------- flags, not keywords
def test_option_helper_both_spellings_and_cli_spelling():
    text = f"pass {option('drop_invalid=True', '--drop-invalid')} to drop them"
    assert text == "pass drop_invalid=True (CLI --drop-invalid) to drop them"
    assert for_cli(text) == "pass --drop-invalid to drop them"
    key = option("to_dict()['extra']", "the --json output, key extra")
    assert for_cli(f"(see {key})") == "(see the --json output, key extra)"
    assert for_cli("no option here (CLI is a word)") == "no option here (CLI is a word)"
    with pytest.raises(ValueError):
        option("two words", "--x")


PYTHON_SPELLINGS = ("=True", "=False", "to_dict()", "['extra']", "(CLI ", "API ", "drop_invalid",
                    "allow_degenerate", "include_edge", "allow_unidentified", "keep_warmup")


def assert_flags_only(text, tmp_path):
    text = text.replace(str(tmp_path), "TMP")  # the folder is named after the test
    for spelling in PYTHON_SPELLINGS:
        assert spelling not in text, (spelling, text)


def test_invalid_rows_hint_names_the_flag(tmp_path, capsys):
    f = good_frame()
    f.loc[2, "flops"] = np.nan
    for extra in ([], ["--json"]):
        code, out, err = run_cli(capsys, "fit", ladder_csv(tmp_path, f), *extra)
        assert code == 1 and "--drop-invalid drops invalid rows" in err
        assert_flags_only(err + out, tmp_path)


def test_degenerate_fit_names_the_flag(tmp_path, capsys):
    # Identical losses: the law collapses to a constant and predict refuses.
    c = np.logspace(18, 20, 6)
    f = pd.DataFrame({"run": [f"r{i}" for i in range(6)], "flops": c, "loss": 3.0})
    code, out, err = run_cli(capsys, "predict", ladder_csv(tmp_path, f), "--target-flops",
                             "1e22", "--law", "power", "--json")
    message = assert_json_error(code, out, err, "DegenerateFitError", "--allow-degenerate")
    assert_flags_only(message + err, tmp_path)


def test_drop_invalid_exclusions_name_the_flag(tmp_path, capsys):
    f = good_frame()
    f.loc[1, "loss"] = -2.0
    code, out, err = run_cli(capsys, "fit", ladder_csv(tmp_path, f), "--law", "power",
                             "--drop-invalid")
    assert code == 0
    assert "r1: invalid row 1 dropped by --drop-invalid: column 'loss' must be > 0" in out
    assert_flags_only(out + err, tmp_path)


def sweeps(tmp_path, n_interior):
    """LR sweeps of 3 runs for 6 (N, D) groups, loss = 3 + 0.1 ln(lr / best)^2: the first
    ``n_interior`` groups bracket their best LR, the others sample only above it (edge)."""
    rows = []
    groups = [(1e8, 2e9), (2e8, 4e9), (4e8, 8e9), (1e8, 8e9), (4e8, 2e9), (2e8, 2e9)]
    for k, (n, d) in enumerate(groups):
        best = 1e-2 * n ** -0.1 * d ** -0.05
        grid = best * np.array([0.5, 1, 2] if k < n_interior else [2, 4, 8])
        for lr in grid:
            rows.append({"run": f"g{k}-lr{lr:.3g}", "params": n, "tokens": d, "peak_lr": lr,
                         "batch_size": 2 ** 20, "loss": 3 + 0.1 * np.log(lr / best) ** 2})
    return ladder_csv(tmp_path, pd.DataFrame(rows))


def test_hparams_report_names_flags(tmp_path, capsys):
    code, out, err = run_cli(capsys, "hparams", sweeps(tmp_path, 5))
    assert code == 0
    assert "see the --json output, key extra)" in out
    assert "edge       groups excluded (no --include-edge)" in out
    assert_flags_only(out + err, tmp_path)


def test_hparams_error_names_the_flag(tmp_path, capsys):
    code, out, err = run_cli(capsys, "hparams", sweeps(tmp_path, 0), "--json")
    message = assert_json_error(code, out, err, "FitError",
                                "--include-edge uses the best sampled values")
    assert_flags_only(message + err, tmp_path)


@pytest.mark.parametrize("flag", ["--floor", "--fix", "--bound", "--huber-delta", "--metric"])
def test_a_lone_double_dash_value_is_a_usage_error(tmp_path, capsys, flag):
    # argparse hands `--floor=--` an empty list without calling the type check.
    path = ladder_csv(tmp_path, good_frame())
    with pytest.raises(SystemExit) as exc:
        main(["predict", path, "--target-flops", "1e22", f"{flag}=--"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: expected a value, got '--'" in err and "Traceback" not in err


@pytest.mark.parametrize("as_json", [False, True])
def test_ctrl_c_is_one_line_and_exit_130(as_json, monkeypatch, capsys):
    # A long bootstrap interrupted by Ctrl-C: no traceback, the shell's code for SIGINT, and
    # under --json the one JSON document a script waits for.
    import delphi.forecast

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(delphi.forecast, "predict", interrupted)
    code = main(["predict", "marin-moe-535b", *(["--json"] if as_json else [])])
    out, err = capsys.readouterr()
    assert code == 130
    assert err == "delphi: error: interrupted\n"
    if as_json:
        assert json.loads(out)["error"]["type"] == "Interrupted"
    else:
        assert out == ""


@pytest.mark.parametrize("value", ["abc", "-5", "1.5"])
def test_a_malformed_source_date_epoch_is_one_error(value, monkeypatch, capsys):
    # numpy's f2py (imported by scipy) calls int() on it: without this check any command that
    # imports scipy ended in a ValueError traceback.
    monkeypatch.setenv("SOURCE_DATE_EPOCH", value)
    code = main(["predict", "marin-moe-535b", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    message = json.loads(out)["error"]["message"]
    assert "SOURCE_DATE_EPOCH must be whole, non-negative seconds" in message
    assert repr(value) in err


def test_a_usage_error_of_a_command_with_many_options_is_two_lines(capsys):
    # `delphi plot` has dozens of options: argparse's 20-line usage block buried the error.
    with pytest.raises(SystemExit) as exc:
        main(["plot", "forecast", "marin-moe-535b", "-o", "x.jpg"])
    err = capsys.readouterr().err.splitlines()
    assert exc.value.code == 2
    assert err == ["usage: delphi plot [options] KIND LADDER [LADDER ...] (every option: "
                   "delphi plot --help)",
                   "delphi plot: error: argument -o/--output: cannot tell the format of 'x.jpg' "
                   "from its suffix '.jpg': use .png, .svg, .pdf"]


def test_columns_naming_one_column_twice_is_a_usage_error(tmp_path, capsys):
    # Before: --columns loss=loss,loss=flops kept the last mapping without a word.
    path = ladder_csv(tmp_path, good_frame())
    with pytest.raises(SystemExit) as exc:
        main(["fit", path, "--columns", "loss=loss,loss=flops"])
    assert exc.value.code == 2
    assert "argument --columns: 'loss' is named twice" in capsys.readouterr().err


def test_a_bad_draw_count_is_named_in_both_spellings():
    # Before: the library's error named only the flag ("draws (--n-boot)") to a Python user.
    import delphi
    from delphi.errors import FitError
    ladder = delphi.load_ladder(good_frame())
    with pytest.raises(FitError, match=r"n_boot \(CLI --n-boot\) must be 20 to 1,000,000 "
                                       r"bootstrap draws, got 5") as exc:
        delphi.predict(ladder, {"flops": 1e22}, interval="bootstrap", n_boot=5)
    assert for_cli(str(exc.value)).startswith("--n-boot must be 20")


@pytest.mark.parametrize("argv, message", [
    # Before: argparse's "invalid float value: '2,45'" without a hint
    (["--actual", "2,45"], "argument --actual: not a number: '2,45' (a decimal comma? write 2.45)"),
    (["--actual", "two"], "argument --actual: not a number: 'two'"),
    # Before: the outcome schema's "fraction: Input should be greater than 0 (got 0.0)"
    (["--actual", "2.05", "--fraction", "0"],
     "argument --fraction: a share of training done is in (0, 1], e.g. 0.56"),
    (["--actual", "2.05", "--fraction", "1.5"], "argument --fraction: a share of training done"),
])
def test_score_names_a_decimal_comma_and_a_share_out_of_range(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["score", "--registry", str(tmp_path / "r.jsonl"), "--id", "x", *argv])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_level_given_as_a_percent_is_a_usage_error_with_the_fraction(capsys):
    # the library's message (delphi.core.quantiles.percent_hint), exit 2 as any bad flag value
    with pytest.raises(SystemExit) as exc:
        main(["predict", "x.csv", "--level", "90"])
    out, err = capsys.readouterr()
    assert exc.value.code == 2 and out == ""
    assert err.splitlines()[-1] == ("delphi predict: error: argument --level: level is a "
                                    "fraction in (0, 1): did you mean 0.90? (got '90')")
