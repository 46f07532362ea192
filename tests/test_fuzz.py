"""Property test (issue 10): every reader, manifests and ``predict`` end in a result or a
:class:`~delphi.errors.DelphiError`, never another exception, and emit no warning but delphi's
own (:class:`~delphi.errors.DelphiWarning` subclasses; a numpy ``RuntimeWarning`` fails).

Small tables are generated from a clean ladder (power-law losses, so that many examples load
and fit) and then corrupted with the values the fuzzing pass of issue 10 found nasty: NaN,
+-inf, 0, negatives, 1e-300, 1e300, booleans, empty strings, ``NA``/``null``/``None``/``N/A``
ids, duplicated rows, a single row. Each test writes one format (CSV, JSONL, Parquet, a W&B
export, Marin ``tracker_metrics.jsonl``, OLMo run CSVs, a TOML manifest) with a few
format-specific defects (BOM, non-UTF-8 bytes, a JSON line that is not an object, ...).

Reproducible: ``derandomize=True`` (the examples come from a fixed seed) and
``database=None`` (no example database carried between runs), so CI replays the same examples.
About 300 examples in all.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import tempfile
import warnings
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import delphi  # noqa: E402
from delphi.cli import main  # noqa: E402
from delphi.errors import DelphiError, DelphiWarning  # noqa: E402
from delphi.readers import read_marin, read_olmo, read_wandb  # noqa: E402


def fuzz_settings(n: int):
    return settings(max_examples=n, derandomize=True, database=None, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ------------------------------------------------------------------------------ tables
NASTY_NUMBERS = [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1e-300, 1e300, 5e-324, -1e300]
NASTY_TEXT = ["", "NA", "null", "None", "N/A", "nan", "abc", " ", "1e999", "-", "0x10"]
NASTY_IDS = ["NA", "null", "None", "N/A", "", " ", "nan", True, False, 0, 1.5, "a"]
NASTY = st.sampled_from(NASTY_NUMBERS + NASTY_TEXT + [True, False, None, 10 ** 30, -7])


@st.composite
def tables(draw):
    """``(columns, rows)``: a tidy ladder table (run, flops and/or params+tokens, loss, maybe
    step/final/fraction and a junk column), then a few cells, rows or columns corrupted."""
    # sampled_from, not integers(): Hypothesis leans to small integers, and a ladder of one
    # row is interesting but should not be most of the examples.
    n = draw(st.sampled_from([5, 3, 7, 2, 6, 1, 4]))
    design = draw(st.sampled_from(["flops", "nd", "both"]))
    columns = ["run"] + {"flops": ["flops"], "nd": ["params", "tokens"],
                         "both": ["params", "tokens", "flops"]}[design] + ["loss"]
    extra = draw(st.lists(st.sampled_from(["step", "final", "fraction", "notes"]), unique=True,
                          max_size=2))
    columns += extra
    rows = []
    for i in range(n):
        params = 1e7 * 2.0 ** i * draw(st.floats(0.9, 1.1))
        tokens = 20 * params * draw(st.floats(0.5, 2.0))
        flops = 6 * params * tokens
        loss = 1.7 + 400 * flops ** -0.12 * draw(st.floats(0.98, 1.02))
        value = {"run": f"r{i}", "params": params, "tokens": tokens, "flops": flops,
                 "loss": loss, "step": 1000 * (i + 1), "final": True, "fraction": 1.0,
                 "notes": "ok"}
        rows.append([value[c] for c in columns])
    # Corruptions: cells, run ids, a duplicated row, a missing column.
    for _ in range(draw(st.integers(0, 3))):
        r, c = draw(st.integers(0, n - 1)), draw(st.integers(0, len(columns) - 1))
        rows[r][c] = draw(st.sampled_from(NASTY_IDS)) if columns[c] == "run" else draw(NASTY)
    if draw(st.booleans()) and rows:
        rows.append(list(rows[draw(st.integers(0, len(rows) - 1))]))
    if draw(st.sampled_from([False] * 9 + [True])):
        drop = draw(st.sampled_from(range(len(columns) - 1, -1, -1)))
        columns = columns[:drop] + columns[drop + 1:]
        rows = [row[:drop] + row[drop + 1:] for row in rows]
    return columns, rows


def cell_text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)          # 'nan', 'inf', '1e-300'
    return str(value)


def write_csv(path: Path, columns, rows, *, bom: bool = False) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(columns)
    w.writerows([[cell_text(v) for v in row] for row in rows])
    path.write_text(("\ufeff" if bom else "") + buf.getvalue(), encoding="utf-8")
    return path


def json_line(obj) -> str:
    return json.dumps(obj, allow_nan=True)   # NaN / Infinity, as some loggers write them


# ------------------------------------------------------------------------------ the property
def check(action):
    """Run ``action()``; it must return or raise a DelphiError, and warn only DelphiWarnings.

    Returns the result (None after a DelphiError)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = action()
        except DelphiError as exc:
            assert str(exc).strip(), f"{type(exc).__name__} with an empty message"
            result = None
    foreign = [f"{w.category.__name__}: {w.message}" for w in caught
               if not issubclass(w.category, DelphiWarning)]
    assert not foreign, foreign
    return result


def load_and_predict(load):
    """Load with ``load()``; on a ladder, predict a target 10x beyond its largest run."""
    ladder = check(load)
    if ladder is None:
        return
    assert isinstance(ladder, delphi.Ladder)
    flops = ladder.table["flops"].max() if "flops" in ladder.table else None
    target = ({"flops": 10 * float(flops)} if flops is not None and math.isfinite(flops)
              else {"flops": 1e22})
    forecast = check(lambda: delphi.predict(ladder, target, interval=None))
    if forecast is not None:
        assert math.isfinite(forecast.loss), forecast.loss   # never a silent NaN
        json.dumps(forecast.to_dict(), allow_nan=False)      # JSON-safe (no inf/NaN)


# ------------------------------------------------------------------------------ readers
@fuzz_settings(70)
@given(tables(), st.booleans(), st.booleans())
def test_csv_then_predict(table, bom, drop_invalid):
    with tempfile.TemporaryDirectory() as d:
        path = write_csv(Path(d) / "ladder.csv", *table, bom=bom)
        load_and_predict(lambda: delphi.load_ladder(path, drop_invalid=drop_invalid))


JSONL_DEFECTS = ["none", "bom", "null line", "array line", "scalar line", "json array file",
                 "truncated", "not utf-8", "bool loss"]


@fuzz_settings(50)
@given(tables(), st.sampled_from(JSONL_DEFECTS))
def test_jsonl(table, defect):
    columns, rows = table
    records = [dict(zip(columns, row)) for row in rows]
    if defect == "bool loss" and records:
        records[0]["loss"] = True
    lines = [json_line(r) for r in records]
    if defect in ("null line", "array line", "scalar line") and lines:
        lines[0] = {"null line": "null", "array line": "[1, 2, 3]", "scalar line": "3.5"}[defect]
    text = json_line(records) if defect == "json array file" else "\n".join(lines) + "\n"
    if defect == "bom":
        text = "\ufeff" + text
    data = text.encode()
    if defect == "truncated":
        data = data[:max(1, len(data) // 2)]
    elif defect == "not utf-8":
        data = data[:5] + b"\xff\xfe" + data[5:]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "ladder.jsonl"
        path.write_bytes(data)
        load_and_predict(lambda: delphi.load_ladder(path))


@fuzz_settings(30)
@given(tables())
def test_parquet(table):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    columns, rows = table
    data = {}
    for j, name in enumerate(columns):
        values = [row[j] for row in rows]
        if all(isinstance(v, bool) for v in values):
            data[name] = values
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            data[name] = [float(v) for v in values]
        else:   # mixed: a text column, as a spreadsheet export would have it
            data[name] = [cell_text(v) for v in values]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "ladder.parquet"
        pd.DataFrame(data, columns=columns).to_parquet(path)
        load_and_predict(lambda: delphi.load_ladder(path))


# Levanter/W&B names of the canonical columns (delphi.readers.wandb.LEVANTER_COLUMNS).
WANDB = {"run": "Name", "params": "parameter_count", "tokens": "throughput/total_tokens",
         "flops": "throughput/total_gflops", "loss": "eval/paloma/macro_loss", "step": "_step"}


def gflops(columns, rows):
    """The rows with flops in GFLOPs (W&B and OLMo exports count GFLOPs)."""
    if "flops" not in columns:
        return rows
    j = columns.index("flops")
    return [row[:j] + [row[j] / 1e9 if isinstance(row[j], float) else row[j]] + row[j + 1:]
            for row in rows]


@fuzz_settings(30)
@given(tables())
def test_wandb_export(table):
    columns, rows = table
    with tempfile.TemporaryDirectory() as d:
        path = write_csv(Path(d) / "export.csv", [WANDB.get(c, c) for c in columns],
                         gflops(columns, rows))
        load_and_predict(lambda: read_wandb(path).to_ladder())


MARIN_DEFECTS = ["none", "config not an object", "summary not an object", "not utf-8",
                 "null line", "nested config"]


@fuzz_settings(30)
@given(tables(), st.sampled_from(MARIN_DEFECTS))
def test_marin_tracker(table, defect):
    columns, rows = table[0], gflops(*table)
    lines = []
    for row in rows:
        values = dict(zip(columns, row))
        config = {"run_id": values.pop("run", None)} if "run" in values else {}
        if defect == "nested config":
            config = {"trainer": {"id": config.get("run_id"), "seed": 0}}
        summary = {WANDB.get(k, k): v for k, v in values.items()}
        lines.append({"config": config, "summary": summary})
    if lines and defect == "config not an object":
        lines[0]["config"] = ["not", "an", "object"]
    if lines and defect == "summary not an object":
        lines[0]["summary"] = 3.0
    text = "\n".join("null" if defect == "null line" and i == 0 else json_line(x)
                     for i, x in enumerate(lines)) + "\n"
    data = text.encode()
    if defect == "not utf-8":
        data = b"\xff" + data
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "run" / "tracker_metrics.jsonl"
        path.parent.mkdir()
        path.write_bytes(data)
        load_and_predict(lambda: read_marin(path).to_ladder())


OLMO = {"step": "_step", "tokens": "throughput/total_tokens",
        "flops": "throughput/total_training_Gflops",
        "loss": "eval/c4_en-validation/CrossEntropyLoss"}


@fuzz_settings(25)
@given(tables(), st.integers(1, 3))
def test_olmo_runs(table, n_files):
    # One CSV per run (the run id is the file name): the rows are dealt over n_files files.
    columns, rows = table[0], gflops(*table)
    keep = [j for j, c in enumerate(columns) if c != "run"]
    header = [OLMO.get(columns[j], columns[j]) for j in keep]
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d) / "ladder-runs"
        folder.mkdir()
        for k in range(n_files):
            write_csv(folder / f"{150 * (k + 1)}M-{k + 1}xC.csv", header,
                      [[row[j] for j in keep] for row in rows[k::n_files]])
        load_and_predict(lambda: read_olmo(folder).to_ladder())


# ------------------------------------------------------------------------------ manifests
TOML_VALUES = st.sampled_from(["1e300", "0", "-1", "nan", "inf", "1e-300", "true", '""', "2"])
SOURCE_PATHS = ["ladder.csv", "./ladder.csv", "sub/../ladder.csv", "*.csv", "missing.csv",
                "../outside.csv", "/etc/hostname", "/**/*.csv", "ladder.csv/", ""]
RUN_IDS = ["{run}", "r{row}", "{row:99999999}", "{nope}", "{run!r}", "{0}", "{}",
           "{run.__class__}", "{loss:.3g}-{row}", "{", "x" * 300]


@fuzz_settings(45)
@given(tables(), st.sampled_from(SOURCE_PATHS), st.sampled_from([None] + RUN_IDS),
       st.lists(st.sampled_from(["columns", "scale", "runs", "predict", "curate", "filters",
                                 "unknown key"]), unique=True, max_size=3), TOML_VALUES)
def test_manifest(table, source_path, run_id, sections, value):
    columns, rows = table
    lines = ['name = "fuzz"', 'description = "generated"', "", "[source]", 'reader = "csv"',
             f"path = {json.dumps(source_path)}"]
    if run_id is not None:
        lines.append(f"run_id = {json.dumps(run_id)}")
    if "columns" in sections:
        lines += ["[columns]", 'loss = "loss"', 'flops = "no_such_column"'
                  if value == "2" else 'flops = "flops"']
    if "scale" in sections:
        lines += ["[scale]", f"flops = {value}"]
    if "runs" in sections:
        lines += ["[[runs]]", 'match = "r[0-9]+"', f"params = {value}"]
    if "predict" in sections:
        lines += ["[predict]", f"target_flops = {value}"]
    if "curate" in sections:
        lines += ["[curate]", f"drop_highest_loss = {value}", 'reason = "fuzz"']
    if "filters" in sections:
        lines += ["[[filters]]", 'column = "loss"', f"max = {value}"]
    if "unknown key" in sections:
        lines += ["surprise = 1"]
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d) / "m"
        folder.mkdir()
        write_csv(folder / "ladder.csv", columns, rows)
        write_csv(Path(d) / "outside.csv", columns, rows)
        manifest = folder / "fuzz.toml"
        manifest.write_text("\n".join(lines) + "\n")
        load_and_predict(lambda: delphi.load_ladder(manifest))


# ------------------------------------------------------------------------------ the CLI
@fuzz_settings(25)
@given(tables(), st.sampled_from(["predict", "fit"]), st.booleans())
def test_cli_exit_codes_and_json(table, command, as_json):
    """Through ``delphi``: exit 0 or 1, never an exception; with --json stdout is one JSON
    document (the result or ``{"error": {...}}``); without it an error is one stderr line."""
    with tempfile.TemporaryDirectory() as d:
        path = write_csv(Path(d) / "ladder.csv", *table)
        argv = [command, str(path), "--law", "power"]
        argv += ["--target-flops", "1e22", "--interval", "none"] if command == "predict" else []
        argv += ["--json"] if as_json else []
        out, err = io.StringIO(), io.StringIO()
        with warnings.catch_warnings(record=True) as caught, \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            code = main(argv)
        assert code in (0, 1), (code, err.getvalue())
        assert "Traceback" not in err.getvalue()
        assert not [w for w in caught if not issubclass(w.category, DelphiWarning)]
        if as_json:
            doc = json.loads(out.getvalue())
            assert ("error" in doc) == (code == 1)
            if code == 1:
                assert set(doc["error"]) == {"type", "message"}
        elif code == 1:
            assert err.getvalue().startswith("delphi: error: ")
            assert out.getvalue() == ""
