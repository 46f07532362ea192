"""Every notebook in notebooks/ runs top to bottom (executed with nbclient, offline), is
committed with its outputs, and those outputs are current.

Each notebook is executed once per test session (the session-scoped ``executed`` fixture;
pytest-xdist runs a file's tests on one worker, ``--dist loadfile``);
the tests then check (a) every code cell of the committed file has outputs, (b) the
committed text outputs (``text/plain`` results and stdout/stderr streams) match the fresh
execution's once the things that legitimately vary are normalised: temporary paths, the
kernel's cell file names, memory addresses, registry hashes and timestamps, and the last
printed digit of a number (bit-level float differences between machines). Images are not
compared. A notebook whose outputs are stale fails (b); re-save it with outputs (execute with
nbclient and write it back) after checking that its prose still matches.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).parents[1] / "notebooks").glob("*.ipynb"))
# These read the published ladders in ../shared/ladders (the others only bundled files).
NEEDS_DATA = {"chinchilla_replication.ipynb", "lr_aware.ipynb",
              "backtest_compare_register.ipynb", "task_accuracy.ipynb", "track_a_run.ipynb"}


def test_there_are_notebooks():
    # Issue 12: quickstart, plots, and one per workflow (at least six in all).
    names = {p.name for p in NOTEBOOKS}
    assert {"quickstart.ipynb", "plots.ipynb", "marin_moe_forecast.ipynb",
            "chinchilla_replication.ipynb", "lr_aware.ipynb",
            "backtest_compare_register.ipynb", "design.ipynb"} <= names


# Session scope: a worker that interleaved modules would tear a module-scoped cache down
# between a notebook's tests and execute it again.
@pytest.fixture(scope="session")
def executed(request, tmp_path_factory):
    """``executed(path)`` -> (fresh notebook, seconds); each notebook runs once per session."""
    cache: dict[Path, tuple[nbformat.NotebookNode, float]] = {}

    def run(path: Path):
        if path not in cache:
            if path.name in NEEDS_DATA:
                request.getfixturevalue("data_dir")      # skip (or fail in CI) without data
            nb = nbformat.read(path, as_version=4)
            cwd = tmp_path_factory.mktemp(path.stem)
            start = time.perf_counter()
            NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(cwd)}}).execute()
            cache[path] = (nb, time.perf_counter() - start)
            print(f"\n{path.name}: executed in {cache[path][1]:.1f} s")
        return cache[path]

    return run


def _code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, executed):
    nb, _ = executed(path)
    errors = [f"cell {i}: {o.get('ename')}: {o.get('evalue')}"
              for i, c in enumerate(nb.cells) if c.cell_type == "code"
              for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_with_outputs(path):
    nb = nbformat.read(path, as_version=4)
    missing = [i for i, c in enumerate(nb.cells)
               if c.cell_type == "code" and (not c.get("outputs") or c.execution_count is None)]
    assert not missing, (f"{path.name}: code cells {missing} have no saved outputs; execute the "
                         f"notebook and save it with its outputs")


# ----------------------------------------------------------------- comparing text outputs
_TMP_ROOTS = sorted({re.escape(tempfile.gettempdir()), "/tmp", "/var/folders"}, key=len,
                    reverse=True)
_NORMALISE = [
    (re.compile(r"(?:%s)/ipykernel_\d+/\d+\.py" % "|".join(_TMP_ROOTS)), "<cell>"),
    (re.compile(r"(?:%s)/[^\s:'\"]+" % "|".join(_TMP_ROOTS)), "<tmp>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x<addr>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
     "<time>"),
    (re.compile(r"datetime\.datetime\([^)]*\)"), "<time>"),
    (re.compile(r"\b(?:in|took|after) \d+(?:\.\d+)? ?(?:s|ms|seconds)\b"), "<duration>"),
    # The optimiser's own convergence figures differ between BLAS builds (CPU kernels) while
    # the optimum printed beside them agrees: the size of a gradient already below tolerance
    # and how many distinct starts the search kept.
    (re.compile(r"scaled gradient \d+(?:\.\d+)?(?:e[-+]?\d+)?"), "scaled gradient <g>"),
    (re.compile(r"\((\d+)/\1 starts agree\)"), "(<k>/<k> starts agree)"),
]
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def normalise(text: str) -> str:
    """Replace what legitimately varies between executions; collapse runs of blanks."""
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return "\n".join(" ".join(line.split()) for line in text.strip().splitlines())


def _last_digit(token: str) -> float:
    """One unit in the last printed digit of a number token (``3.1005`` -> 1e-4)."""
    mantissa, _, exponent = token.lower().lstrip("+-").partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (-decimals + (int(exponent) if exponent else 0))


def same_text(a: str, b: str) -> bool:
    """Equal after :func:`normalise`; a number printed with decimals or an exponent may
    differ by one unit in its last printed digit (a rounding flip from bit-level float
    differences; for full-precision reprs, by 1e-6 relative), integers (counts, ids) not
    at all."""
    a, b = normalise(a), normalise(b)
    if _NUMBER.split(a) != _NUMBER.split(b):
        return False
    for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b)):
        if x == y:
            continue
        rounded = any(ch in x + y for ch in ".eE")       # counts and ids stay exact
        allowed = max(1.0001 * max(_last_digit(x), _last_digit(y)),
                      1e-6 * max(abs(float(x)), abs(float(y))))   # full-precision reprs
        if not rounded or abs(float(x) - float(y)) > allowed:
            return False
    return True


def text_outputs(cell) -> dict[str, str]:
    """A code cell's comparable outputs: its stdout and stderr (chunks joined, as streams
    may be split differently from run to run) and its ``text/plain`` results."""
    out = {"stdout": "", "stderr": "", "results": []}
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out[o["name"]] += o["text"]
        elif o.get("output_type") in ("execute_result", "display_data"):
            out["results"].append(o.get("data", {}).get("text/plain", ""))
        elif o.get("output_type") == "error":
            out["results"].append(f"{o.get('ename')}: {o.get('evalue')}")
    out["results"] = "\n<next result>\n".join(out["results"])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_outputs_are_current(path, executed):
    committed = nbformat.read(path, as_version=4)
    fresh, _ = executed(path)
    old, new = _code_cells(committed), _code_cells(fresh)
    assert len(old) == len(new)
    stale = []
    for i, (c_old, c_new) in enumerate(zip(old, new)):
        a, b = text_outputs(c_old), text_outputs(c_new)
        for key in a:
            if not same_text(a[key], b[key]):
                stale.append(f"code cell {i} ({key}):\n--- committed\n{normalise(a[key])[:800]}"
                             f"\n--- fresh\n{normalise(b[key])[:800]}")
    assert not stale, f"{path.name}: committed outputs are stale; re-save it\n" + "\n".join(stale)


# --------------------------------------------------------- the comparison itself can fail
def test_same_text_tolerates_only_what_varies():
    # Temp paths, registry hashes, timestamps and kernel cell names are normalised away.
    h1, h2 = "a" * 64, "0123456789abcdef" * 4
    assert same_text(f"/tmp/tmpab12/p.jsonl: OK, head {h1}", f"/tmp/tmpzz9_/p.jsonl: OK, head {h2}")
    assert same_text("/tmp/ipykernel_123/456.py:3: FitWarning: x",
                     "/tmp/ipykernel_9/77.py:3: FitWarning: x")
    assert same_text("created 2026-12-01T08:07:21+00:00", "created 2026-11-30T23:59:59Z")
    # One unit in the last printed digit is a rounding flip; two units are a real change.
    assert same_text("prediction 3.1005 nats", "prediction 3.1004 nats")
    assert same_text("C = 2.61e+24", "C = 2.62e+24")
    assert not same_text("prediction 3.1005 nats", "prediction 3.1003 nats")
    assert same_text("2.0413687322783893", "2.0413687322783900")
    assert not same_text("2.0413687322783893", "2.0413787322783893")
    # The optimiser's gradient size and count of agreeing starts vary by BLAS build; a start
    # that disagrees does not.
    assert same_text("stationary (scaled gradient 3.4e-08, tolerance 1e-05) (7/7 starts agree)",
                     "stationary (scaled gradient 7.1e-09, tolerance 1e-05) (6/6 starts agree)")
    assert not same_text("(7/7 starts agree)", "(6/7 starts agree)")
    assert not same_text("tolerance 1e-05", "tolerance 3e-05")
    assert not same_text("rel. error +0.91%", "rel. error +0.93%")
    # Words and counts are compared exactly.
    assert not same_text("3 runs: inside", "3 runs: outside")
    assert not same_text("400 draws", "200 draws")
    assert not same_text("3 runs", "4 runs")
    assert not same_text("warning one", "warning one\nwarning two")
