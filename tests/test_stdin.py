"""``-`` reads a ladder from standard input (issue 12, CLI): ``cat runs.csv | delphi predict -``.

The table on stdin goes through the same reader and checks as a file; the ladder is named
``stdin`` with source ``<stdin>``, so its forecast and data fingerprint are those of the same
table in a file. A terminal or an empty stdin is an error, as is a ``--format`` that a file's
suffix contradicts.
"""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from delphi.cli import main
from delphi.errors import LadderError
from delphi.readers import load_ladder

# An exact power law in compute, L(C) = E + A * C^-alpha, over 8 budgets (1e18..1e21 FLOPs),
# with D = 20 N (so C = 6 N D = 120 N^2). The fit recovers it, so the forecast at the target
# is the formula's value (computed here, not taken from delphi).
E, A, ALPHA = 1.7, 500.0, 0.15
TARGET = 1e22
EXPECTED_LOSS = E + A * TARGET ** -ALPHA          # 2.0506...


def frame() -> pd.DataFrame:
    flops = np.logspace(18, 21, 8)
    params = np.sqrt(flops / 120)
    return pd.DataFrame({"run": [f"r{i}" for i in range(8)], "flops": flops, "params": params,
                         "tokens": 20 * params, "loss": E + A * flops ** -ALPHA})


def table_bytes(fmt: str, df: pd.DataFrame | None = None) -> bytes:
    df = frame() if df is None else df
    if fmt == "csv":
        return df.to_csv(index=False).encode()
    if fmt == "jsonl":
        return df.to_json(orient="records", lines=True).encode()
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


class _Stdin(io.TextIOWrapper):
    """A text stdin over bytes, as ``sys.stdin`` is over a pipe; ``tty`` makes it a terminal."""

    def __init__(self, data: bytes, tty: bool = False) -> None:
        super().__init__(io.BytesIO(data), encoding="utf-8")
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def run_cli(monkeypatch, capsys, stdin_bytes: bytes | None, *argv, tty: bool = False):
    """``delphi ARGV`` with ``stdin_bytes`` on standard input; (exit code, stdout, stderr)."""
    if stdin_bytes is not None or tty:
        monkeypatch.setattr(sys, "stdin", _Stdin(stdin_bytes or b"", tty=tty))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


EXT = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet"}


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_predict_from_stdin_equals_the_same_table_in_a_file(fmt, tmp_path, monkeypatch, capsys):
    data = table_bytes(fmt)
    path = tmp_path / f"runs{EXT[fmt]}"
    path.write_bytes(data)
    args = ["--target-flops", str(TARGET), "--json"]
    code, out, err = run_cli(monkeypatch, capsys, data, "predict", "-", "--format", fmt, *args)
    assert code == 0, err
    piped = json.loads(out)
    code, out, err = run_cli(monkeypatch, capsys, None, "predict", str(path), *args)
    assert code == 0, err
    from_file = json.loads(out)
    assert piped["prediction"]["loss"] == from_file["prediction"]["loss"]
    assert piped["ladder"]["sha256"] == from_file["ladder"]["sha256"]
    assert piped["prediction"]["loss"] == pytest.approx(EXPECTED_LOSS, rel=1e-3)
    # Named for the pipe, never for a file: the same forecast whatever fed it.
    assert (piped["ladder"]["name"], piped["ladder"]["source"]) == ("stdin", "<stdin>")
    assert from_file["ladder"]["source"] == str(path)


def test_csv_is_the_default_format_and_the_text_report_names_stdin(monkeypatch, capsys):
    code, out, err = run_cli(monkeypatch, capsys, table_bytes("csv"), "predict", "-",
                             "--target-flops", str(TARGET))
    assert code == 0, err
    assert out.splitlines()[0].startswith("ladder     stdin (<stdin>)")
    shown = float(next(line for line in out.splitlines()
                       if line.startswith("prediction")).split()[1])
    assert shown == pytest.approx(EXPECTED_LOSS, abs=6e-4)   # printed to 4 decimals


def test_gzip_on_stdin_is_read_as_is(monkeypatch, capsys):
    args = ["predict", "-", "--target-flops", str(TARGET), "--json"]
    code, out, _ = run_cli(monkeypatch, capsys, table_bytes("csv"), *args)
    plain = json.loads(out)
    code, out, err = run_cli(monkeypatch, capsys, gzip.compress(table_bytes("csv")), *args)
    assert code == 0, err
    assert json.loads(out)["prediction"]["loss"] == plain["prediction"]["loss"]


# The bundled Marin dense ladder (7 compute-optimal points with N and D) for the commands that
# split compute between N and D; the synthetic ladder (D = 20 N throughout) cannot.
DENSE = Path(__file__).resolve().parents[1] / "ladders" / "marin-delphi-dense.csv"


@pytest.mark.parametrize("argv, dense, code_wanted, fragment", [
    (["fit", "-"], False, 0, "ladder     stdin (<stdin>)"),
    (["backtest", "-", "--leave-one-budget-out"], False, 0, "leave one budget out (8 budgets)"),
    (["compare", "-"], False, 0, "ladder stdin"),
    (["plan", "--target-flops", "1e22", "--from", "-"], True, 0, "fitted to stdin"),
    # Refused as far outside the 7 runs' design, by a message naming the ladder read.
    (["optimal", "-", "--target-flops", "1e22"], True, 1, "law chinchilla fitted to stdin"),
])
def test_every_ladder_command_takes_stdin(argv, dense, code_wanted, fragment, monkeypatch,
                                          capsys):
    data = DENSE.read_bytes() if dense else table_bytes("csv")
    code, out, err = run_cli(monkeypatch, capsys, data, *argv)
    assert code == code_wanted, err
    assert fragment in (out if code == 0 else err)


def test_compare_recipes_takes_one_ladder_from_stdin(tmp_path, monkeypatch, capsys):
    # Before: its --help offered "- for standard input" and the command refused it.
    other = frame().assign(loss=lambda d: d["loss"] * 1.01)
    path = tmp_path / "b.csv"
    other.to_csv(path, index=False)
    code, out, err = run_cli(monkeypatch, capsys, table_bytes("csv"), "compare-recipes", "-",
                             str(path), "--target-flops", "1e22", "--law", "power",
                             "--n-boot", "20")
    assert code == 0, err
    assert out.startswith("recipes    stdin, b (reference stdin)")
    code, out, err = run_cli(monkeypatch, capsys, table_bytes("csv"), "compare-recipes", "-",
                             "-", "--target-flops", "1e22")
    assert code == 2 and "standard input ('-') holds one ladder" in err


def test_optimal_without_a_target_asks_for_one_not_for_a_manifest(monkeypatch, capsys):
    # A ladder on stdin has no manifest, so no [predict] target to fall back on.
    code, out, err = run_cli(monkeypatch, capsys, table_bytes("csv"), "optimal", "-")
    assert code == 2      # a missing target flag is usage (h113)
    assert "needs --target-flops" in err and "'stdin'" in err


def test_register_records_stdin_as_the_source(tmp_path, monkeypatch, capsys):
    registry = tmp_path / "reg.jsonl"
    code, out, err = run_cli(monkeypatch, capsys, table_bytes("csv"), "register", "-",
                             "--registry", str(registry), "--id", "piped",
                             "--target-flops", str(TARGET))
    assert code == 0, err
    entry = json.loads(registry.read_text().splitlines()[0])
    text = json.dumps(entry)
    assert '"source": "<stdin>"' in text and str(tmp_path) not in text.replace(str(registry), "")


def test_a_byte_order_mark_and_windows_line_ends_on_stdin_are_read(monkeypatch, capsys):
    args = ["predict", "-", "--target-flops", str(TARGET), "--json"]
    code, out, _ = run_cli(monkeypatch, capsys, table_bytes("csv"), *args)
    plain = json.loads(out)
    excel = b"\xef\xbb\xbf" + table_bytes("csv").replace(b"\n", b"\r\n")
    code, out, err = run_cli(monkeypatch, capsys, excel, *args)
    assert code == 0, err
    assert json.loads(out)["ladder"]["sha256"] == plain["ladder"]["sha256"]


@pytest.mark.parametrize("as_json", [False, True])
def test_empty_stdin_is_an_error(as_json, monkeypatch, capsys):
    extra = ["--json"] if as_json else []
    code, out, err = run_cli(monkeypatch, capsys, b"", "predict", "-", "--target-flops",
                             "1e22", *extra)
    assert code == 1
    assert "no runs on standard input (it is empty): pipe a table, e.g." in err
    if as_json:
        assert json.loads(out)["error"]["type"] == "LadderError"
    else:
        assert out == ""


def test_blank_lines_on_stdin_are_empty(monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, b"\n  \n", "fit", "-")
    assert code == 1 and "it is empty" in err


def test_a_terminal_on_stdin_is_an_error_without_reading_it(monkeypatch, capsys):
    class Terminal(_Stdin):
        def read(self, *a):              # reading a terminal would wait for typing
            raise AssertionError("stdin was read")

    monkeypatch.setattr(sys, "stdin", Terminal(b"", tty=True))
    code = main(["predict", "-", "--target-flops", "1e22"])
    out, err = capsys.readouterr()
    assert code == 1 and out == ""
    assert "no runs on standard input (it is a terminal, nothing is piped)" in err
    assert "cat runs.csv | delphi predict -" in err


def test_a_closed_stdin_is_an_error(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", None)
    code = main(["fit", "-"])
    assert code == 1 and "no runs on standard input (it is closed)" in capsys.readouterr().err


def test_format_contradicting_a_files_suffix_is_an_error(tmp_path, monkeypatch, capsys):
    path = tmp_path / "runs.csv"
    path.write_bytes(table_bytes("csv"))
    code, out, err = run_cli(monkeypatch, capsys, None, "fit", str(path), "--format", "jsonl")
    assert code == 1
    assert f"--format jsonl contradicts {path}, whose suffix .csv says csv" in err
    # An agreeing --format is accepted (a check, not an override).
    code, _, err = run_cli(monkeypatch, capsys, None, "fit", str(path), "--format", "csv")
    assert code == 0, err


def test_format_with_a_bundled_manifest_is_an_error(monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, None, "fit", "marin-delphi-dense",
                           "--format", "csv")
    assert code == 1
    assert "--format csv is for a data file or standard input" in err
    assert "'marin-delphi-dense' is a manifest" in err


@pytest.mark.parametrize("fmt, data, fragment", [
    ("toml", b"name = 'x'\n", "a manifest cannot come from standard input (--format toml)"),
    ("parquet", b"run,flops,loss\na,1e18,3\n", "<stdin> is not a Parquet file"),
    ("csv", b"PAR1\x00\x00", "cannot read <stdin> as csv: it is a Parquet file; give "
                             "--format parquet"),
    ("jsonl", b"BZh91AY", "it is compressed (bzip2); decompress it"),
])
def test_wrong_format_on_stdin_is_named(fmt, data, fragment, monkeypatch, capsys):
    code, _, err = run_cli(monkeypatch, capsys, data, "fit", "-", "--format", fmt)
    assert code == 1
    assert fragment in err


def test_an_unknown_format_is_a_usage_error(monkeypatch, capsys):
    with pytest.raises(SystemExit) as stop:
        run_cli(monkeypatch, capsys, b"<runs/>", "fit", "-", "--format", "xml")
    assert stop.value.code == 2
    assert ("argument --format: unknown format 'xml'; choose csv, jsonl, parquet"
            in capsys.readouterr().err)


def test_stdin_goes_through_the_file_checks(monkeypatch, capsys):
    # Row 2 (the third data row, counted from 0) has a loss that is not a number; prose is
    # refused without being quoted, as for a file.
    df = frame().astype({"loss": object})
    df.loc[2, "loss"] = "oops"
    code, _, err = run_cli(monkeypatch, capsys, table_bytes("csv", df), "fit", "-")
    assert code == 1
    assert "run 'r2' (row 2): column 'loss' is not a number: 'oops'" in err
    code, _, err = run_cli(monkeypatch, capsys, b"just some prose here\n", "fit", "-")
    assert code == 1
    assert "<stdin> is not a CSV table" in err and "prose" not in err
    code, _, err = run_cli(monkeypatch, capsys, b'{"run": "a"}\n[1, 2]\n', "fit", "-",
                           "--format", "jsonl")
    assert code == 1 and "<stdin>, line 2: expected a JSON object per line, got an array" in err


def test_run_ids_stay_text_on_stdin(monkeypatch, capsys):
    df = frame()
    df["run"] = ["001", "1", "1.0", "NA", "r4", "r5", "r6", "r7"]
    monkeypatch.setattr(sys, "stdin", _Stdin(table_bytes("csv", df)))
    ladder = load_ladder("-")
    assert sorted(ladder.table["run"].unique()) == sorted(["001", "1", "1.0", "NA", "r4", "r5",
                                                           "r6", "r7"])


def test_api_reads_stdin_and_streams(monkeypatch):
    monkeypatch.setattr(sys, "stdin", _Stdin(table_bytes("jsonl")))
    piped = load_ladder("-", format="jsonl")
    assert (piped.name, piped.source) == ("stdin", "<stdin>")
    assert len(piped.table) == 8
    # Parquet keeps every float bit (JSON Lines written by pandas keeps 10 digits), so a
    # Parquet stream has the fingerprint of the DataFrame itself.
    streamed = load_ladder(io.BytesIO(table_bytes("parquet")), format="parquet")
    assert (streamed.name, streamed.source) == ("stdin", "<stdin>")
    assert streamed.fingerprint() == load_ladder(frame()).fingerprint()
    with pytest.raises(LadderError, match=r"format='csv' is for standard input"):
        load_ladder(frame(), format="csv")
    with pytest.raises(LadderError, match=r"format='toml' \(CLI --format toml\)"):
        load_ladder(io.BytesIO(b"x"), format="toml")


def test_a_real_pipe_into_the_command_line():
    # The console script's path: bytes through an OS pipe, not a patched sys.stdin.
    proc = subprocess.run([sys.executable, "-m", "delphi.cli", "predict", "-", "--target-flops",
                           str(TARGET), "--json"], input=table_bytes("csv"),
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    result = json.loads(proc.stdout)
    assert result["prediction"]["loss"] == pytest.approx(EXPECTED_LOSS, rel=1e-3)
    assert result["ladder"]["source"] == "<stdin>"
    empty = subprocess.run([sys.executable, "-m", "delphi.cli", "fit", "-"], input=b"",
                           capture_output=True, timeout=120)
    assert empty.returncode == 1
    assert b"no runs on standard input (it is empty)" in empty.stderr
