"""Every example in the README runs as written (issue 12: "a test extracts the README's code
blocks and runs them").

Blocks are run in README order: the ``python`` blocks in one namespace (as a reader pasting them
into one notebook would), each ``bash`` block line by line, stopping at the first that fails (as
``set -euo pipefail`` does), in a scratch folder that holds the repo's ``ladders/`` and
``examples/`` (``HOME`` points there too, for ``~/.delphi``; ``MPLBACKEND=Agg``); the ``toml``
manifest example is validated by delphi's manifest schema. A block the test cannot run says so
in an HTML comment right above it, ``<!-- readme-test: skip: REASON -->``; only the blocks
listed in ``ALLOWED_SKIPS`` may do that.

A line of a bash block that is one plain ``delphi`` command (words of letters, digits and
``_./:=,+@%-``, quoted strings without ``$``, backquotes or backslashes, ``~`` only at the start
of a word, a trailing ``# comment``) runs in this process: its words as bash would split and
tilde-expand them go to ``delphi.cli.main``, the function the ``delphi`` console script calls
(``sys.exit(main())``), with the same cwd, ``HOME`` and ``MPLBACKEND``, and its exit code (a
``SystemExit`` from argparse included) must be 0, as ``set -e`` requires; an exception that
would be a traceback fails the test. That saves starting Python and importing delphi's
dependencies for each command (about 0.8 s of CPU each; issue 20). Every other line (pipes,
redirections, ``$(...)``, other programs) runs through ``bash -c`` with ``set -euo pipefail``,
the same environment and the ``delphi`` console script on ``PATH``, one line at a time. A block
with a line that could carry shell state to the next (``cd``, assignments, ``;``, ``&``,
continuations, here-documents) or any program but ``delphi``, ``cat``, ``head`` and ``python``
runs as one bash script instead, as before. The console script itself (exit codes, pipes,
a terminal) is tested as a process in test_cli.py, test_cli_errors.py and test_cli_pty.py.
"""

from __future__ import annotations

import os
import re
import string
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
#: The README and the docs it links to, in reading order (the docs were the README's later
#: sections, issue 23): their python blocks share one namespace in this order.
DOCS = [README] + [ROOT / "docs" / f"{name}.md" for name in (
    "usage", "fitting", "laws", "intervals", "recipes", "design", "registry", "tracking",
    "data",
    "architecture", "benchmarks")]

_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[ \t]*\n(?P<body>.*?)^(?P=indent)```",
                    re.M | re.S)
_SKIP = re.compile(r"<!--\s*readme-test:\s*skip:\s*(?P<reason>[^>]*?)\s*-->\s*$")

#: Blocks the test may not run, by a phrase of their skip reason: the install-and-test commands
#: (CI runs them: .ci/run) and the benchmarks (minutes, not a test).
ALLOWED_SKIPS = ("installs delphi and runs the test suite", "benchmarks take minutes")


def blocks() -> list[dict]:
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in _FENCE.finditer(text):
            before = text[:m.start()].rstrip("\n").splitlines()
            skip = _SKIP.search(before[-1]) if before else None
            out.append({"lang": m.group("lang"), "body": textwrap.dedent(m.group("body")),
                        "line": text[:m.start()].count("\n") + 1,
                        "file": str(doc.relative_to(ROOT)),
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


_PLAIN = frozenset(string.ascii_letters + string.digits + "_./:=,+@%-")


def plain_delphi_argv(line: str, home: str) -> list[str] | None:
    """The arguments of ``line`` if it is one plain ``delphi`` command (see the module
    docstring), as bash would split and tilde-expand them; else ``None`` (bash runs it).
    ``[]`` for a blank or comment-only line."""
    words: list[str] = []
    word: str | None = None              # the word being read; None between words
    quote = ""                           # the quote character a quoted string opened
    i = 0
    while i < len(line):
        ch = line[i]
        i += 1
        if quote:
            if ch == quote:
                quote = ""
            elif quote == '"' and ch in "$`\\!":
                return None              # expansions inside double quotes: bash's business
            else:
                word += ch
        elif ch in " \t":
            if word is not None:
                words.append(word)
                word = None
        elif ch == "#" and word is None:
            break                        # a comment runs to the end of the line
        elif ch in "'\"":
            quote, word = ch, word or ""
        elif ch == "~" and word is None and (i == len(line) or line[i] in "/ \t"):
            word = home                  # ~ or ~/... at the start of a word: $HOME
        elif ch in _PLAIN:
            word = (word or "") + ch
        else:
            return None                  # | > < $ ; & * ? ( ) { } [ ] ~user \\ ...
    if quote:
        return None
    if word is not None:
        words.append(word)
    if not words:
        return []
    return words[1:] if words[0] == "delphi" else None


#: A line bash runs on its own must not leave state for the next one.
_STATELESS = re.compile(r"^(?:delphi|cat|head|python)\s")
_STATEFUL = re.compile(r"[;&]|\\\s*$|<<|\(\s*\)")


def _run_in_process(argv: list[str], capsys) -> tuple[int, str, str]:
    """``delphi ARGV`` through the console script's function: exit code, stdout, stderr."""
    from delphi.cli import main

    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:            # argparse: --help, usage errors
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def test_plain_delphi_argv_is_bash_word_splitting():
    home = "/h"
    assert plain_delphi_argv("delphi predict x --target-flops 1e23   # a comment", home) == \
        ["predict", "x", "--target-flops", "1e23"]
    assert plain_delphi_argv('delphi score --source "wandb run" --key ~/.d/k', home) == \
        ["score", "--source", "wandb run", "--key", "/h/.d/k"]
    assert plain_delphi_argv("delphi a 'b # c'#d", home) is None      # '#' inside a word
    assert plain_delphi_argv("   # only a comment", home) == []
    for line in ("cat x | delphi predict -", "delphi x > out", "delphi x --id $ID",
                 'delphi x "$(delphi y)"', "delphi x; delphi y", "delphi x && delphi y",
                 "delphi x *.csv", "delphi x ~user/k", "delphi x --k=~/k", "python -m x",
                 "delphi x \\", 'delphi x "a\\b"', "delphi x 'open"):
        assert plain_delphi_argv(line, home) is None, line


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b["lang"] == "bash" and not b["skip"]],
                         ids=lambda b: f"{b['file']}:{b['line']}")
def test_bash_block_runs(block, tmp_path, data_dir, monkeypatch, capsys):
    scratch = _scratch(tmp_path)
    env = _env(tmp_path)
    lines = block["body"].splitlines()
    plan = [(n, line, plain_delphi_argv(line, str(tmp_path))) for n, line in enumerate(lines)]
    if any(argv is None and not (_STATELESS.match(line) and not _STATEFUL.search(line))
           for _, line, argv in plan):
        plan = [(0, block["body"], None)]          # one bash script, as a reader runs it
    import matplotlib

    matplotlib.use("Agg")
    monkeypatch.chdir(scratch)
    monkeypatch.setenv("HOME", env["HOME"])
    monkeypatch.setenv("MPLBACKEND", env["MPLBACKEND"])
    for n, line, argv in plan:
        if argv == []:
            continue
        if argv is not None:
            code, out, err = _run_in_process(argv, capsys)
        else:
            proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + line], cwd=scratch,
                                  env=env, capture_output=True, text=True, timeout=600)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        assert code == 0, (f"{block['file']} block at line {block['line']} failed at its line {n + 1} "
                           f"(exit {code}): {line}\n{out[-3000:]}\n{err[-3000:]}")


@pytest.mark.slow
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
                exec(compile(b["body"], f"{b['file']}:{b['line']}", "exec"), namespace)
            except Exception as exc:  # name the block, keep the traceback
                raise AssertionError(f"{b['file']} python block at line {b['line']} failed: "
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


def test_headline_coverage_agrees_with_the_latest_benchmark():
    # F14: the README said 93.9%, docs/intervals.md 93.8% and "every ladder at least 75% (the
    # lowest ... 78%)". Both must quote benchmarks/RESULTS.md's latest leave-one-ladder-out
    # rerun ("Rerun at the final code"): its coverage, prediction count and lowest ladder.
    root = Path(__file__).parents[1]
    results = (root / "benchmarks" / "RESULTS.md").read_text()
    rerun = results[results.rindex("**Rerun at the final code**"):]
    got = re.search(r"the default covers\s+\*\*([\d.]+)%\*\* of ([\d,]+) predictions, lowest "
                    r"[\w-]+ \*\*(\d+)%\*\*", rerun)
    assert got, "the rerun's headline sentence changed: update this test"
    cover, n, lowest = got.groups()
    readme = " ".join((root / "README.md").read_text().split())
    assert f"covered {cover}% of {n} predictions on 13 ladders, none below {lowest}%" in readme
    intervals = " ".join((root / "docs" / "intervals.md").read_text().split())
    said = re.search(r"covers ([\d.]+)% of ([\d,]+) predictions, every ladder at least (\d+)% "
                     r"\(the lowest is \(Mis\)Fitting", intervals)
    assert said and said.groups() == (cover, n, lowest)
