"""Every ``--json`` document says which delphi made it: a top-level ``"delphi_version"`` equal
to ``delphi.__version__``, in results and error documents alike (``output.print_json``)."""

from __future__ import annotations

import json

import pytest

import delphi
from delphi.cli import main
from test_cli_jobs import curve_ladder
from test_isoflop import BUDGETS, SYMMETRIC, isoflop_grid


@pytest.fixture(scope="module")
def files(tmp_path_factory, data_dir):
    """A registry holding one forecast (id ``x``) and the small inputs of the cheap
    invocations below: an isoFLOP grid and a ladder of loss curves."""
    root = tmp_path_factory.mktemp("json_version")
    reg = root / "r.jsonl"
    assert main(["register", "marin-moe-535b", "--registry", str(reg), "--id", "x",
                 "--interval", "none", "-q"]) == 0
    iso = root / "iso.csv"
    isoflop_grid(BUDGETS, noise=0.002, **SYMMETRIC).to_csv(iso, index=False)
    return {"reg": str(reg), "iso": str(iso), "curves": curve_ladder(root, runs=("a",)),
            "root": root}


#: One cheap invocation of every command that takes --json ({reg}, {iso}, {curves}: the
#: fixture's files; {tmp}: the test's own folder). ``score`` is the one that writes to the
#: registry; the others read it.
COMMANDS = {
    "ladders": ["ladders"],
    "predict": ["predict", "marin-moe-535b", "--interval", "none"],
    "fit": ["fit", "marin-delphi-dense", "--law", "power"],
    "complete": ["complete", "{curves}", "--run", "a"],
    "backtest": ["backtest", "marin-delphi-dense", "--law", "power", "--interval", "none",
                 "--fit-max-flops", "1e20"],
    "isoflop": ["isoflop", "{iso}", "--bootstrap", "none"],
    "optimal": ["optimal", "epoch-chinchilla", "--target-flops", "1e24"],
    "plan": ["plan", "--target-flops", "1e22", "--budgets", "3"],
    "compare": ["compare", "marin-delphi-dense", "--laws", "power"],
    "hparams": ["hparams", "misfitting2025-final", "--law", "deepseek"],
    "suggest": ["suggest", "marin-moe-535b"],
    "register": ["register", "marin-delphi-dense", "--law", "power", "--target-flops", "1e22",
                 "--interval", "none", "--registry", "{tmp}/new.jsonl", "--id", "y"],
    "score": ["score", "--registry", "{tmp}/r.jsonl", "--id", "x", "--actual", "2.05"],
    "registry list": ["registry", "list", "--registry", "{reg}"],
    "registry show": ["registry", "show", "--registry", "{reg}", "--id", "x"],
    "registry head": ["registry", "head", "{reg}"],
    "registry verify": ["registry", "verify", "{reg}"],
    "registry repair": ["registry", "repair", "{tmp}/r.jsonl"],
    "registry report": ["registry", "report", "--registry", "{reg}"],
    "registry keygen": ["registry", "keygen", "{tmp}/key.pem"],
    "report": ["report", "--registry", "{reg}", "--html", "{tmp}/site"],
    "plot": ["plot", "fit", "marin-delphi-dense", "--law", "power", "-o", "{tmp}/fit.png"],
    "accuracy": ["accuracy", "--task", "hellaswag", "--target-params", "7e9",
                 "--target-tokens", "2e12", "--n-boot", "20", "--no-calibration"],
    "compare-recipes": ["compare-recipes", "marin-moe-535b", "marin-delphi-dense",
                        "--target-flops", "1e22", "--law", "power", "--n-boot", "20"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_json_document_has_the_delphi_version(command, files, tmp_path, capsys):
    if "{tmp}/r.jsonl" in COMMANDS[command]:      # a command that writes: its own copy
        (tmp_path / "r.jsonl").write_bytes(open(files["reg"], "rb").read())
    argv = [a.format(tmp=tmp_path, **files) for a in COMMANDS[command]]
    code = main([*argv, "--json", "-q"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert isinstance(doc, dict) and doc["delphi_version"] == delphi.__version__, command


def test_the_commands_above_are_every_command_with_json():
    # A new command with --json must be added above (and print through print_json).
    import argparse

    from delphi.presentation.cli.main import _parser

    def walk(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from walk(sub, prefix + [name])
        if prefix and any("--json" in a.option_strings for a in parser._actions):
            yield " ".join(prefix)      # (the top level's --json is the command's, given first)

    assert set(walk(_parser()[0], [])) - {"track"} == set(COMMANDS)   # track: test_tracking


@pytest.mark.parametrize("argv, kind, code", [
    (["predict", "no-such-ladder", "--target-flops", "1e22"], "LadderError", 1),
    (["compare", "marin-delphi-dense", "--laws", "no-such-law"], "LawError", 1),
    (["predict", "--no-such-flag"], "UsageError", 2),
])
def test_json_error_documents_have_the_delphi_version(argv, kind, code, data_dir, capsys):
    try:
        got = main([*argv, "--json"])
    except SystemExit as stop:       # argparse's usage errors
        got = stop.code
    out, _ = capsys.readouterr()
    doc = json.loads(out)
    assert got == code and doc["error"]["type"] == kind
    assert list(doc) == ["error", "delphi_version"] and doc["delphi_version"] == delphi.__version__


def test_json_text_adds_the_version_to_objects_only():
    from delphi.presentation.cli.output import json_text

    # A document that records its own version (a registry entry, as `register --json`
    # prints it) keeps it: the entry's version is the one that wrote it.
    assert json.loads(json_text({"delphi_version": "0.0.1", "id": "x"})) == {
        "delphi_version": "0.0.1", "id": "x"}
    assert json.loads(json_text([{"id": "x"}])) == [{"id": "x"}]      # nothing inside lists
    line = json_text({"step": 1, "loss": 2.0}, one_line=True)
    assert "\n" not in line and json.loads(line)["delphi_version"] == delphi.__version__
    with pytest.raises(ValueError):
        json_text({"loss": float("nan")})       # NaN is not JSON
