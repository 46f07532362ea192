"""Every example in the README runs as written (issue 12: "a test extracts the README's code
blocks and runs them").

Blocks are run in README order: the ``python`` blocks in one namespace (as a reader pasting them
into one notebook would), each ``bash`` block as one script with ``set -e`` in a scratch folder
that holds the repo's ``ladders/`` and ``examples/`` (``HOME`` points there too, for ``~/.delphi``);
the ``toml`` manifest example is validated by delphi's manifest schema. A block the test cannot
run says so in an HTML comment right above it, ``<!-- readme-test: skip: REASON -->``; only the
blocks listed in ``ALLOWED_SKIPS`` may do that.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import warnings

import pytest
from bundled import KNOWN_LOAD_WARNINGS, expected_load_warnings

from delphi.errors import DelphiWarning

ROOT = Path(__file__).parents[1]
README = ROOT / "README.md"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```",
                    re.M | re.S)
_SKIP = re.compile(r"<!--\s*readme-test:\s*skip:\s*(?P<reason>[^>]*?)\s*-->\s*$")

#: Blocks the test may not run, by a phrase of their skip reason: the install-and-test commands
#: (CI runs them: .ci/run) and the benchmarks (minutes, not a test).
ALLOWED_SKIPS = ("installs delphi and runs the test suite", "benchmarks take minutes")


def blocks() -> list[dict]:
    text = README.read_text()
    out = []
    for m in _FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").splitlines()
        skip = _SKIP.search(before[-1]) if before else None
        out.append({"lang": m.group("lang"), "body": textwrap.dedent(m.group("body")),
                    "line": text[:m.start()].count("\n") + 1,
                    "skip": skip.group("reason") if skip else None})
    return out


BLOCKS = blocks()


def _scratch(tmp_path: Path) -> Path:
    for name in ("ladders", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def _env(tmp_path: Path) -> dict:
    env = dict(os.environ, HOME=str(tmp_path), MPLBACKEND="Agg")
    # the `delphi` of this interpreter first (a venv's bin/), as after `pip install`
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_every_block_is_run_or_skipped_for_an_allowed_reason():
    assert BLOCKS, "no code blocks found in the README"
    for b in BLOCKS:
        assert b["lang"] in {"bash", "python", "toml", ""}, (b["line"], b["lang"])
        if b["skip"] is not None:
            assert any(phrase in b["skip"] for phrase in ALLOWED_SKIPS), (b["line"], b["skip"])
        elif b["lang"] == "":
            # a plain block is a diagram or output, not an example; it must not hold commands
            assert not re.search(r"^\s*(delphi|python|pip) ", b["body"], re.M), b["line"]


@pytest.mark.parametrize("block", [b for b in BLOCKS if b["lang"] == "bash" and not b["skip"]],
                         ids=lambda b: f"line{b['line']}")
def test_bash_block_runs(block, tmp_path, data_dir):
    scratch = _scratch(tmp_path)
    script = "set -euo pipefail\n" + block["body"]
    proc = subprocess.run(["bash", "-c", script], cwd=scratch, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"README block at line {block['line']} failed:\n"
                                  f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def test_python_blocks_run_in_order(tmp_path, data_dir, monkeypatch):
    code = [b for b in BLOCKS if b["lang"] == "python" and not b["skip"]]
    assert code
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(_scratch(tmp_path))
    namespace: dict = {"__name__": "__readme__"}
    # A reader sees delphi's warnings; the ones expected here are the bundled ladders' own
    # load warnings (tests/bundled.py), each on the ladder it names. Any other one fails.
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", DelphiWarning)
        for b in code:
            try:
                exec(compile(b["body"], f"README.md:{b['line']}", "exec"), namespace)
            except Exception as exc:  # name the block, keep the traceback
                raise AssertionError(f"README python block at line {b['line']} failed: "
                                     f"{type(exc).__name__}: {exc}") from exc
    by_ladder: dict[str, list[str]] = {}
    for w in seen:
        if issubclass(w.category, DelphiWarning):
            m = re.match(r"ladder '([^']+)': ", str(w.message))
            assert m and m.group(1) in KNOWN_LOAD_WARNINGS, f"unexpected warning: {w.message}"
            by_ladder.setdefault(m.group(1), []).append(str(w.message))
    for name, messages in by_ladder.items():
        expected_load_warnings(name, sorted(set(messages)))


def test_toml_manifest_example_is_a_valid_manifest():
    from delphi.readers.manifest import parse_manifest

    tomls = [b for b in BLOCKS if b["lang"] == "toml"]
    assert tomls
    for b in tomls:
        manifest = parse_manifest(tomllib.loads(b["body"]))
        assert manifest.name and manifest.description
