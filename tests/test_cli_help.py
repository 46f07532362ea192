"""The CLI's help and consistency (issue 12, "CLI"): help on every option, defaults shown,
examples in every command's help that parse (and a few that run), one argument order for the
registry actions (the old positional form kept for a release, with a note), one default
interval level, ``-j`` passed through, ``--debug`` tracebacks, and the reader wiring."""

from __future__ import annotations

import argparse
import json
import shlex

import pytest

import delphi
from delphi.cli import main
from delphi.cli.main import build_parser
from delphi.cli.options import DEFAULT_LEVEL, HelpFormatter, Parser, examples, shows_default
from delphi.errors import DelphiError
from delphi.readers.paths import REPO_ROOT


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def commands(parser=None, name=("delphi",)):
    """(name tuple, parser) of every parser under ``parser``, the leaves and the groups."""
    parser = parser or build_parser()[0]
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child_name, child in action.choices.items():
                yield from commands(child, name + (child_name,))


def is_group(parser) -> bool:
    return any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def options(parser):
    for a in parser._actions:
        if not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction,
                              argparse._VersionAction)):
            yield a


def example_lines(parser) -> list[str]:
    """The epilog's command lines (those starting with ``delphi``; other lines explain)."""
    return [line.strip() for line in (parser.epilog or "").splitlines()
            if line.strip().startswith("delphi ")]


SUBCOMMANDS = [(n, p) for n, p in commands() if len(n) > 1]


# --------------------------------------------------------------------------- help texts
@pytest.mark.parametrize("name, parser", SUBCOMMANDS, ids=[" ".join(n) for n, _ in SUBCOMMANDS])
def test_every_option_has_help_and_shows_its_default(name, parser):
    for action in options(parser):
        label = "/".join(action.option_strings) or action.dest
        if action.help is argparse.SUPPRESS:
            # Only the registry actions' deprecated positional form is hidden.
            assert action.dest == "legacy_args", f"{' '.join(name)} {label} is hidden"
            continue
        assert action.help and action.help.strip(), f"{' '.join(name)} {label} has no help"
        text = parser._get_formatter()._expand_help(action)
        if shows_default(action):
            value = action.default
            spelled = {str(value)} | ({f"{value:g}"} if isinstance(value, (int, float)) else set())
            assert "default" in text.lower() and any(s in text for s in spelled), \
                f"{' '.join(name)} {label}: default {value!r} not shown in {text!r}"
            said = max(1, action.help.lower().count("default"))
            assert text.lower().count("default") == said, f"{label}: default twice: {text!r}"


@pytest.mark.parametrize("name, parser", SUBCOMMANDS, ids=[" ".join(n) for n, _ in SUBCOMMANDS])
def test_every_command_has_examples_that_parse_as_that_command(name, parser):
    lines = example_lines(parser)
    assert len(lines) >= 2, f"{parser.prog}: fewer than 2 examples in its help"
    top, _ = build_parser()
    for line in lines:
        argv = shlex.split(line, comments=True)
        assert argv[0] == "delphi", line
        args = top.parse_args(argv[1:])
        assert args.command == name[1], line
        if len(name) > 2:                       # registry ACTION
            assert args.registry_command == name[2], line
        if hasattr(args, "legacy_form"):
            assert args.legacy_form is None, f"an example uses the deprecated form: {line}"


def test_formatter_adds_a_default_once_and_keeps_example_lines():
    p = Parser(prog="x", epilog=examples("x --a 3", "x --b 4 --c"))
    p.add_argument("--a", type=int, default=7, help="an option")
    p.add_argument("--b", type=int, default=8, help="an option (default 8)")
    p.add_argument("--c", action="store_true", help="a flag")
    p.add_argument("--d", action="append", default=[], help="repeatable")
    p.add_argument("--e", help="no default")
    text = " ".join(p.format_help().split())          # wrapping does not matter here
    assert "an option (default: 7)" in text
    assert "an option (default 8)" in text and "(default: 8)" not in text
    assert "a flag (default" not in text and "repeatable (default" not in text
    assert "no default (default" not in text
    # Line breaks of the epilog survive (RawDescriptionHelpFormatter semantics).
    assert "examples:\n  x --a 3\n  x --b 4 --c\n" in p.format_help()


def test_a_description_without_line_breaks_is_still_wrapped():
    long = "word " * 40
    f = HelpFormatter("x", width=60)
    filled = f._fill_text(long.strip(), 60, "")
    assert max(len(line) for line in filled.splitlines()) <= 60


def test_predict_help_page(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["predict", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    flat = " ".join(out.split())
    assert "examples:\n  delphi predict marin-delphi-dense --target-flops 1e23\n" in out
    assert "or - for standard input" in flat                        # LADDER
    assert "W&B runs table" in flat and "TensorBoard log directory" in flat
    assert "tensorboard reads LADDER as a TensorBoard log directory" in flat   # --format
    assert "(default: run)" in flat and "interval level, in (0, 1) (default 0.9)" in flat


# --------------------------------------------------------------------------- examples run
FAST_EXAMPLES = [
    "delphi ladders --json",
    "delphi fit epoch-chinchilla --law chinchilla --json",
    "delphi backtest marin-delphi-dense --law power --fit-max-flops 1e20",
    "delphi isoflop olmo-ladder --approach 1 --json",
    "delphi optimal epoch-chinchilla --target-flops 5.76e23",
    "delphi plan --target-flops 1e23",
    "delphi hparams misfitting2025-final --law deepseek --target-flops 1e21 --json",
]


def all_examples() -> set[str]:
    return {line for _, p in SUBCOMMANDS for line in example_lines(p)}


@pytest.mark.parametrize("line", FAST_EXAMPLES)
def test_fast_examples_run(line, data_dir, capsys):
    assert line in all_examples()             # still an example of its command
    code, out, err = run_cli(capsys, *shlex.split(line)[1:])
    assert code == 0, err
    if "--json" in line:
        json.loads(out)


def test_registry_examples_run_in_order(tmp_path, data_dir, capsys, monkeypatch):
    """The registry examples, as a user would type them: read-only ones on the bundled
    registry from a checkout, then register -> score -> repair -> keygen in a fresh folder."""
    shown = all_examples()
    monkeypatch.chdir(REPO_ROOT)
    read_only = sorted(line for line in shown
                       if line.startswith("delphi registry ") and "ladders/marin-registry" in line)
    assert len(read_only) >= 8
    for line in read_only:
        code, out, err = run_cli(capsys, *shlex.split(line)[1:])
        assert code == 0 and out.strip(), (line, err)
    monkeypatch.chdir(tmp_path)
    steps = ["delphi register marin-moe-535b --registry preds.jsonl --id hero-535b --author me",
             "delphi register --registry preds.jsonl --id paper-7b --external-loss 2.1 "
             "--external-source https://example.org/paper --target-flops 1e23",
             "delphi score --registry preds.jsonl --id hero-535b --actual 2.05",
             "delphi registry repair --registry preds.jsonl",
             "delphi registry keygen me.key --name me",
             "delphi registry keygen keys/ci.key --json"]
    for line in steps:
        assert line in shown, line
        code, out, err = run_cli(capsys, *shlex.split(line)[1:])
        assert code == 0, (line, err)
    entries = [json.loads(x) for x in (tmp_path / "preds.jsonl").read_text().splitlines()]
    assert [e["id"] for e in entries] == ["hero-535b", "paper-7b", "hero-535b/outcome-1"]
    assert (tmp_path / "keys" / "ci.key.pub").is_file()


# --------------------------------------------------------------------------- registry order
def small_registry(path):
    from delphi.registry import Registry

    reg = Registry(path)
    reg.register_external(target={"flops": 1e21, "name": "a"}, loss=2.6, source="issue 1",
                          id="a-1e21")
    reg.score("a-1e21", 2.61)
    return path


@pytest.mark.parametrize("action, extra", [("list", []), ("report", []), ("verify", []),
                                           ("head", []), ("show", ["a-1e21"])])
def test_registry_actions_take_registry_and_id_options_and_the_old_form_with_a_note(
        tmp_path, capsys, action, extra):
    path = small_registry(tmp_path / "r.jsonl")
    new = ["registry", action, "--registry", path] + (["--id", *extra] if extra else [])
    code, out_new, err_new = run_cli(capsys, *new, "--json")
    assert code == 0 and "deprecated" not in err_new
    old = ["registry", action, *extra, path]
    code, out_old, err_old = run_cli(capsys, *old, "--json")
    assert code == 0 and json.loads(out_old) == json.loads(out_new)
    id_part = f" --id {extra[0]}" if extra else ""
    assert (f"deprecated and will be removed in the next release; use `delphi registry "
            f"{action} --registry {path}{id_part}`") in err_old
    code, _, err = run_cli(capsys, *old, "-q")          # notes off with --quiet
    assert code == 0 and "deprecated" not in err


def test_registry_location_usage_errors(tmp_path, capsys):
    path = small_registry(tmp_path / "r.jsonl")
    for argv, message in [
            (["registry", "list"], "required: --registry"),
            (["registry", "show", "--registry", path], "required: --id"),
            (["registry", "show", "--id", "a-1e21"], "required: --registry"),
            (["registry", "list", path, "--registry", path], "once"),
            (["registry", "show", "a-1e21", path, "--id", "a-1e21"], "once"),
            (["registry", "verify", path, path], "deprecated positional form")]:
        with pytest.raises(SystemExit) as exit_:
            main([str(a) for a in argv])
        assert exit_.value.code == 2, argv
        assert message in capsys.readouterr().err, argv


def test_registry_show_json_usage_error_is_json(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["registry", "show", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["error"]["type"] == "UsageError" and "--registry" in out["error"]["message"]


# --------------------------------------------------------------------------- level
def test_one_default_interval_level_everywhere():
    from delphi.uncertainty import DEFAULT_LEVEL as LIBRARY

    assert DEFAULT_LEVEL == LIBRARY == 0.9
    levels = {" ".join(n): a.default for n, p in SUBCOMMANDS for a in options(p)
              if "--level" in a.option_strings}
    assert set(levels) >= {"delphi predict", "delphi register", "delphi backtest",
                           "delphi isoflop", "delphi optimal", "delphi compare"}
    assert set(levels.values()) == {0.9}, levels


def test_isoflop_library_default_level_is_0_9(capsys):
    import inspect

    import numpy as np
    import pandas as pd
    from delphi.analyses.isoflop import isoflop_analysis, isoflop_table

    for fn in (isoflop_analysis, isoflop_table):
        assert inspect.signature(fn).parameters["level"].default == 0.9
    # Three budgets of a known parabola in ln N; the default interval is the 90% one: the
    # same as level=0.9 and inside the 95% one.
    rows = []
    for c in (1e18, 1e19, 1e20):
        n_opt = 0.1 * (c / 6) ** 0.5
        for k, n in enumerate(n_opt * np.exp(np.linspace(-1.5, 1.5, 7))):
            loss = 2.0 + 0.05 * np.log(n / n_opt) ** 2 + 0.002 * np.sin(3 * k + c / 1e18)
            rows.append({"run": f"c{c:g}-{k}", "params": n, "tokens": c / (6 * n), "flops": c,
                         "loss": loss})
    table = pd.DataFrame(rows)
    default = isoflop_table(table, n_boot=200)
    at90 = isoflop_table(table, n_boot=200, level=0.9)
    at95 = isoflop_table(table, n_boot=200, level=0.95)
    for b, b90, b95 in zip(default.budgets, at90.budgets, at95.budgets):
        assert b.level == 0.9 and b.params_interval == b90.params_interval
        assert b95.params_interval[0] <= b.params_interval[0] <= b.params_interval[1] \
            <= b95.params_interval[1]
    assert "90% interval" in default.report()


# --------------------------------------------------------------------------- --debug, -j
@pytest.mark.parametrize("argv", [["predict", "absent.csv", "--target-flops", "1e22"],
                                  ["isoflop", "absent.csv"],
                                  ["registry", "list", "--registry", "absent.jsonl"]],
                         ids=["forecast", "analyses", "registry"])
def test_debug_shows_a_traceback_for_every_command_module(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *argv)
    assert code == 1 and "Traceback" not in err and err.startswith("delphi: error:")
    code, _, err = run_cli(capsys, *argv, "--debug")
    assert code == 1 and "Traceback (most recent call last)" in err
    code, _, err = run_cli(capsys, "--debug", *argv)          # before the subcommand too
    assert code == 1 and "Traceback (most recent call last)" in err


def test_json_before_the_subcommand_is_the_commands_json(tmp_path, capsys, monkeypatch):
    # F23: `delphi --json predict ...` was "delphi predict: unrecognized arguments: --json",
    # though -q, --debug and -j go either side of the command.
    monkeypatch.chdir(tmp_path)
    code, after, _ = run_cli(capsys, "ladders", "--json")
    assert code == 0
    code, before, _ = run_cli(capsys, "--json", "ladders")
    assert code == 0 and before == after and json.loads(before)["n_ladders"] > 0
    code, out, err = run_cli(capsys, "--json", "predict", "absent.csv", "--target-flops", "1e22")
    assert code == 1 and "unrecognized" not in err
    assert json.loads(out)["error"]["type"] == "LadderError"     # the command ran, as JSON
    # every command that prints is a JSON printer: the leaves all take --json
    leaves = [(n, p) for n, p in commands() if not any(
        isinstance(a, argparse._SubParsersAction) for a in p._actions)]
    assert leaves and all(any("--json" in a.option_strings for a in p._actions)
                          for _, p in leaves)


class Called(DelphiError):
    """Raised by a stand-in library function once it has recorded its arguments."""


@pytest.mark.parametrize("module, function, argv", [
    ("delphi.forecast", "predict", ["predict", "marin-delphi-dense", "--target-flops", "1e22"]),
    ("delphi.forecast", "predict", ["register", "marin-delphi-dense", "--registry", "r.jsonl",
                                    "--id", "x", "--target-flops", "1e22"]),
    ("delphi.analyses.backtest", "backtest", ["backtest", "marin-delphi-dense", "--leave-one-budget-out"]),
    ("delphi.analyses.backtest", "prefix_fits", ["backtest", "marin-delphi-dense", "--prefixes"]),
    ("delphi.curves", "complete_many", ["complete", "misfitting2025", "--all-runs"]),
    ("delphi.analyses.hparams", "fit_hparams", ["hparams", "misfitting2025-final"]),
    ("delphi.analyses.accuracy", "predict_accuracy", ["accuracy", "olmo-ladder", "--task", "all",
                                                      "--target-params", "6.9e9",
                                                      "--target-tokens", "4e12"]),
])
def test_parallel_commands_pass_jobs_through(module, function, argv, data_dir, tmp_path,
                                             capsys, monkeypatch):
    import importlib

    seen = {}

    def stand_in(*args, **kwargs):
        seen.update(kwargs)
        raise Called("stand-in called")

    monkeypatch.setattr(importlib.import_module(module), function, stand_in)
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, *argv, "-j", "3")
    assert code == 1 and "stand-in called" in err
    assert seen["n_jobs"] == 3


def test_serial_commands_say_that_jobs_has_no_effect(capsys, data_dir):
    code, out, err = run_cli(capsys, "ladders", "-j", "2")
    assert code == 0 and "`delphi ladders` has no parallel step" in err
    code, out, err = run_cli(capsys, "-j", "1", "ladders")
    assert code == 0 and "parallel" not in err


# --------------------------------------------------------------------------- readers wiring
def test_a_data_file_has_no_manifest_defaults_but_a_manifest_does(tmp_path, capsys, data_dir):
    """``optimal`` takes its target from a manifest, never from a data file (which has none):
    the data source test is :func:`delphi.readers.is_data_source`."""
    frame = delphi.load_ladder("epoch-chinchilla").table[["run", "params", "tokens", "loss"]]
    frame.to_csv(tmp_path / "runs.csv", index=False)
    code, _, err = run_cli(capsys, "optimal", tmp_path / "runs.csv")
    assert code == 2 and "needs --target-flops" in err


PLOT_EXAMPLES = sorted(line for name, p in SUBCOMMANDS if name == ("delphi", "plot")
                       for line in example_lines(p) if " accuracy " not in line)


@pytest.mark.parametrize("line", PLOT_EXAMPLES)
def test_plot_examples_run_and_write_their_file(line, tmp_path, data_dir, capsys, monkeypatch):
    # A figure example a user copies must draw (the accuracy figure has its own tests).
    monkeypatch.chdir(tmp_path)
    argv = shlex.split(line, comments=True)[1:]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    written = tmp_path / argv[argv.index("-o") + 1]
    assert written.stat().st_size > 1000
