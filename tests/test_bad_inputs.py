"""Inputs that ended in an internal error or a multi-line message (issue 22, items 5 and 7):
each is one line on stderr, exit code 1, naming the file (and line or column) and what is
wrong. The files are the reliability review's reproducers (tests/data)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from delphi.cli import main
from delphi.errors import RegistryError
from delphi.registry import Registry

DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize("name,kind,says", [
    # TOML manifests (they read good.csv beside them)
    ("nonutf8.toml", "ManifestError",
     "nonutf8.toml, line 2: not UTF-8 text (byte 0xe9 at byte 19 of the line)"),
    ("deep_nest.toml", "ManifestError", "deep_nest.toml: arrays or tables nested too deeply"),
    ("nul_path.toml", "ManifestError",
     "nul_path.toml: source.path: 'good\\x00.csv' contains a NUL character"),
    # data files
    ("pq_dupcol.parquet", "LadderError",
     "pq_dupcol.parquet: columns 5 and 6 of the Parquet schema are both named 'loss'"),
    ("surrogate.jsonl", "LadderError",
     "surrogate.jsonl, line 4: column 'run' holds an unpaired surrogate escape (\\ud800)"),
])
def test_a_bad_file_is_one_line_naming_it(name, kind, says, capsys):
    code = main(["predict", str(DATA / name), "--target-flops", "1e22", "--json"])
    out, err = capsys.readouterr()
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("delphi: error: ") and says in err, err
    assert "Traceback" not in err
    error = json.loads(out)["error"]
    assert error["type"] == kind and says in error["message"]


def test_parquet_with_a_duplicate_column_on_stdin(monkeypatch, capsys):
    import io
    import sys

    data = (DATA / "pq_dupcol.parquet").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["predict", "-", "--format", "parquet", "--target-flops", "1e22"]) == 1
    err = capsys.readouterr().err
    assert err == ("delphi: error: <stdin>: columns 5 and 6 of the Parquet schema are both "
                   "named 'loss'; rename or drop one\n")


def test_a_paired_surrogate_escape_is_text(tmp_path):
    # "\ud83d\ude00" is one character (an emoji): only a lone half is refused.
    import delphi

    lines = (DATA / "surrogate.jsonl").read_text().replace("\\ud800x", "\\ud83d\\ude00x")
    path = tmp_path / "paired.jsonl"
    path.write_text(lines)
    assert "\U0001f600x" in delphi.load_ladder(path).runs


def test_an_moe_target_with_more_active_than_total_parameters_is_refused(capsys):
    code = main(["predict", "marin-moe-535b", "--target-params", "1e9",
                 "--target-active-params", "1e10", "--target-tokens", "1e12", "--interval",
                 "none"])
    err = capsys.readouterr().err
    assert code == 1
    assert err == ("delphi: error: the target's --target-active-params 1e+10 exceeds its "
                   "--target-params 1e+09, the total: a mixture of experts activates part of "
                   "its parameters per token (swapped?)\n")


def test_an_external_prediction_without_a_unit_is_scored_in_nats(tmp_path, capsys):
    # Registered without a unit, it is read as nats/token (Score's convention): an outcome in
    # another unit is refused, as for a prediction that states its unit; nothing is written.
    reg = Registry(tmp_path / "r.jsonl")
    reg.register_external(id="ext", target={"flops": 1e22}, loss=2.5, source="paper",
                          curve=[(0.5, 2.9), (1.0, 2.5)])
    before = reg.path.read_bytes()
    with pytest.raises(RegistryError, match="prediction 'ext' was registered without a unit, "
                                            "so it is read as nats/token"):
        reg.score("ext", 0.9, unit="bits/byte")
    assert main(["score", "--registry", str(reg.path), "--id", "ext", "--actual", "0.9",
                 "--unit", "bits/byte"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "register the prediction again with its unit " \
                                    "(--target-unit)" in err
    assert reg.path.read_bytes() == before
    assert reg.score("ext", 2.7, fraction=0.5, unit="nats/token").error == pytest.approx(-0.2)
    assert reg.score("ext", 2.6).actual == 2.6               # no unit: the prediction's
    # A prediction that states its unit is checked against it, as before.
    reg.register_external(id="bpb", target={"flops": 1e22, "unit": "bits/byte"}, loss=0.9,
                          source="paper")
    assert reg.score("bpb", 0.95, unit="bits/byte").unit == "bits/byte"
