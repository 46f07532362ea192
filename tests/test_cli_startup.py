"""Quick start-up (issue 8, item 4): what ``import delphi`` and ``delphi --help`` load.

Each check runs in a fresh interpreter and reads ``sys.modules``; no timings are asserted
(``benchmarks/bench_import.py`` measures them).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY_ON_IMPORT = ("matplotlib", "scipy.signal", "scipy.stats", "scipy.interpolate", "pyarrow")
FITTING_STACK = ("pandas", "scipy", "pyarrow", "matplotlib", "pydantic", "delphi.fitting",
                 "delphi.forecast", "delphi.registry")


def loaded_after(code: str) -> dict:
    """Run ``code`` in a fresh interpreter; return {"modules": [...], **whatever it adds}."""
    script = ("import sys, json\nextra = {}\n" + code
              + "\nprint(json.dumps({'modules': sorted(sys.modules), **extra}))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def cli(argv: list[str]) -> str:
    return ("from delphi.cli import main\n"
            "try:\n"
            f"    extra['rc'] = main({argv!r})\n"
            "except SystemExit as exc:\n"
            "    extra['rc'] = exc.code\n")


def test_import_delphi_does_not_load_heavy_modules():
    mods = set(loaded_after("import delphi")["modules"])
    assert not mods & set(HEAVY_ON_IMPORT), sorted(mods & set(HEAVY_ON_IMPORT))


@pytest.mark.parametrize("argv,rc", [
    (["--help"], 0),
    (["predict"], 2),                                       # no ladder
    (["predict", "some-ladder", "--level", "2"], 2),        # bad --level
    (["complete", "some-ladder"], 2),                       # neither --run nor --all-runs
    (["predict", "some-ladder", "-j", "0"], 2),             # bad --jobs
    (["registry", "--help"], 0),
    (["--version"], 0),
])
def test_help_and_usage_errors_do_not_import_the_fitting_stack(argv, rc):
    res = loaded_after(cli(argv))
    assert res["rc"] == rc
    mods = set(res["modules"])
    heavy = {m for m in mods if m.split(".")[0] in FITTING_STACK or m in FITTING_STACK}
    assert not heavy, sorted(heavy)


def test_lazy_exports_resolve():
    import delphi

    for name in delphi.__all__:
        assert getattr(delphi, name) is not None, name
    ns: dict = {}
    exec("from delphi import *", ns)
    assert set(delphi.__all__) <= set(ns)
    from delphi.analyses.backtest import Backtest  # the analysis's module no longer shadows it
    assert callable(delphi.backtest) and delphi.Backtest is Backtest
    assert delphi.rules.adamh_rule is not None          # submodules on first access
    with pytest.raises(AttributeError):
        delphi.no_such_thing  # noqa: B018


def test_subcommand_help_names_the_laws_and_defaults(capsys):
    from delphi.cli import main
    from delphi.fitting import DEFAULT_DELTA
    from delphi.laws import CURVE_LAWS, LAWS

    with pytest.raises(SystemExit) as exc:
        main(["predict", "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "{LAWS}" not in out and "{DELTA}" not in out
    # argparse wraps at hyphens: compare with the law names' words
    for name in list(LAWS) + list(CURVE_LAWS):
        assert name.split("-")[0] in out
    assert f"(default {DEFAULT_DELTA:g})" in out
    assert "-j N, --jobs N" in out and "-q, --quiet" in out


def test_quiet_before_or_after_the_subcommand():
    from delphi.cli.main import build_parser

    p = build_parser()[0]
    assert p.parse_args(["ladders"]).quiet is False
    assert p.parse_args(["-q", "ladders"]).quiet is True
    assert p.parse_args(["ladders", "--quiet"]).quiet is True
    assert p.parse_args(["-q", "registry", "list", "x"]).quiet is True
    assert p.parse_args(["registry", "list", "x", "-q"]).quiet is True
    assert p.parse_args(["predict", "x", "-j", "-1"]).jobs == -1
    assert p.parse_args(["predict", "x"]).jobs is None


def test_layers_fitting_reads_law_inputs_not_curves():
    """The layout of issue 12: turning a ladder into a law's inputs (h, S1/S2, run fraction)
    lives in delphi.law_inputs, below both fitting and curves; fitting never imports curves
    (curves builds on fitting), and law_inputs imports neither."""
    import ast
    from pathlib import Path

    import delphi

    root = Path(delphi.__file__).parent

    def imported(path):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module.lstrip("."))
        return names

    for path in (root / "fitting").glob("*.py"):
        assert not any("curves" in m for m in imported(path)), path.name
    below = imported(root / "inputs" / "law_inputs.py")
    assert not any(m.split(".")[0] in {"forecasting", "fitting"} for m in below), below
    for name in ("presentation/cli", "analyses", "inputs", "forecasting", "core"):  # packages
        assert (root / name / "__init__.py").exists()


def test_a_serial_predict_does_not_import_joblib(data_dir):
    """joblib (~40 ms of imports) is loaded only when jobs run in parallel (issue 27): a serial
    predict whose bootstrap and calibration go through map_jobs leaves it unimported."""
    res = loaded_after(cli(["predict", "gadre2024", "--target-flops", "1e22", "--json"]))
    assert res["rc"] == 0
    assert "delphi.core.parallel" in res["modules"]   # the jobs did go through map_jobs
    assert "joblib" not in res["modules"]


def test_n_jobs_without_joblib_imported_resolves_as_joblib_does():
    """The shortcut taken while joblib is unimported gives joblib's own answer (its default
    backend, nothing configured) for every n_jobs."""
    code = ("from delphi.core import parallel\n"
            "cases = [None, 1, 2, 3, 64, -1, -2, -5]\n"
            "extra['lazy'] = [parallel._resolve_n_jobs(n) for n in cases]\n"
            "extra['lazy_imported'] = 'joblib' in sys.modules\n"
            "import joblib\n"
            "extra['joblib'] = [parallel._resolve_n_jobs(n) for n in cases]\n")
    res = loaded_after(code)
    assert res["lazy_imported"] is False
    assert res["lazy"] == res["joblib"]


#: What reading or scoring a registry never needs: the analyses, the fitting engine, the
#: forecasting layer and the numeric stack under them (only `registry report` averages errors
#: with numpy, and registering a comparison imports the recipes analysis).
NOT_FOR_THE_REGISTRY = ("delphi.analyses", "delphi.fitting", "delphi.forecasting", "numpy",
                        "scipy", "pandas", "pyarrow", "matplotlib")


@pytest.mark.parametrize("action", ["list", "score"])
def test_registry_list_and_score_do_not_import_the_analysis_stack(action, tmp_path):
    import shutil
    from pathlib import Path

    reg = tmp_path / "registry.jsonl"
    shutil.copy(Path(__file__).parents[1] / "ladders" / "marin-registry.jsonl", reg)
    argv = (["registry", "list", "--registry", str(reg)] if action == "list" else
            ["score", "--registry", str(reg), "--id", "marin-535b-a23b", "--actual", "2.05"])
    res = loaded_after(cli(argv))
    assert res["rc"] == 0
    mods = set(res["modules"])
    assert "delphi.registry.core" in mods                    # the registry was read
    heavy = {m for m in mods if any(m == h or m.startswith(h + ".") for h in NOT_FOR_THE_REGISTRY)}
    assert not heavy, sorted(heavy)


def test_register_comparison_refuses_a_non_comparison_without_importing_recipes(tmp_path):
    code = ("from delphi.registry import Registry\n"
            "from delphi.errors import RegistryError\n"
            f"reg = Registry({str(tmp_path / 'r.jsonl')!r})\n"
            "try:\n"
            "    reg.register_comparison({'loss': 2.0}, id='x')\n"
            "except RegistryError as exc:\n"
            "    extra['error'] = str(exc)\n")
    res = loaded_after(code)
    assert "needs a delphi RecipeComparison" in res["error"] and "got dict" in res["error"]
    assert "delphi.analyses.recipes" not in res["modules"]
