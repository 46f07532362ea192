"""Loss units (issue 9, section 3): named, validated, carried into forecasts and the registry,
and never compared across units."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi import LadderError, RegistryError
from delphi.cli import main
from delphi.registry import Registry
from delphi.units import UNITS, normalize_unit, unit_from_metric

ROWS = """run,params,tokens,{metric}
r1,1.0e8,2.0e9,3.40
r2,2.0e8,4.0e9,3.20
r3,4.0e8,8.0e9,3.03
r4,8.0e8,1.6e10,2.89
r5,1.6e9,3.2e10,2.78
"""

# The same ladder in bits per byte (1.15..1.4: a small model's; above 2 is warned about).
BPB_ROWS = ROWS.replace("3.40", "1.40").replace("3.20", "1.32").replace("3.03", "1.25").replace(
    "2.89", "1.19").replace("2.78", "1.15")


def _csv(tmp_path, metric="loss", name="runs.csv", rows=ROWS):
    path = tmp_path / name
    path.write_text(rows.format(metric=metric))
    return path


def test_unit_names_are_validated_with_the_accepted_list(tmp_path):
    assert UNITS == ("nats/token", "bits/byte", "bits/token")
    assert normalize_unit(" Bits/Byte ") == "bits/byte"
    assert normalize_unit("bpb") == "bits/byte" and normalize_unit("bits per token") == "bits/token"
    for bad in ("nat", "bits/char", "perplexity"):
        with pytest.raises(LadderError, match="accepted: nats/token, bits/byte, bits/token"):
            delphi.load_ladder(_csv(tmp_path), unit=bad)
    frame = pd.read_csv(_csv(tmp_path))
    with pytest.raises(LadderError, match="unknown unit 'loss'"):
        delphi.Ladder(frame, unit="loss")
    assert delphi.load_ladder(_csv(tmp_path)).unit == "nats/token"         # the default
    assert delphi.load_ladder(_csv(tmp_path), unit="bits/token").unit == "bits/token"


@pytest.mark.parametrize("metric", ["val_bpb", "eval/paloma/c4_en/bpb", "bits_per_byte",
                                    "BITS-PER-BYTE", "eval bits per byte"])
def test_a_metric_named_bits_per_byte_defaults_to_bits_per_byte_with_a_note(tmp_path, metric):
    assert unit_from_metric(metric) == "bits/byte"
    path = _csv(tmp_path, metric, rows=BPB_ROWS)
    with pytest.warns(delphi.LadderWarning, match="named as bits per byte"):
        ladder = delphi.load_ladder(path, metric=metric)
    assert ladder.unit == "bits/byte"
    assert any("unit is taken as bits/byte" in w for w in ladder.warnings)
    # An explicit unit wins, with a note that the name says otherwise (review item 20).
    with pytest.warns(delphi.LadderWarning, match="the given unit is used"):
        ladder = delphi.load_ladder(path, metric=metric, unit="nats/token")
    assert ladder.unit == "nats/token"
    assert ladder.warnings == [f"metric {metric!r} is named as bits per byte (bits/byte), but "
                               f"the unit given is nats/token: the given unit is used; check it"]
    # A unit that agrees with the name needs no note.
    assert not delphi.load_ladder(path, metric=metric, unit="bpb").warnings


@pytest.mark.parametrize("metric", ["loss", "c4_loss", "bpe_loss", "subpbyte"])
def test_other_metric_names_keep_nats_per_token(tmp_path, metric):
    assert unit_from_metric(metric) is None
    ladder = delphi.load_ladder(_csv(tmp_path, metric), metric=None if metric == "loss" else metric)
    assert ladder.unit == "nats/token" and not ladder.warnings


def test_a_manifests_unit_cannot_be_contradicted(data_dir):
    assert delphi.load_ladder("epoch-chinchilla", unit="nats/token").unit == "nats/token"
    with pytest.raises(LadderError, match="contradicts manifest 'epoch-chinchilla'"):
        delphi.load_ladder("epoch-chinchilla", unit="bits/byte")


def test_the_unit_travels_into_forecasts_and_the_registry(tmp_path):
    with pytest.warns(delphi.LadderWarning, match="bits per byte"):
        ladder = delphi.load_ladder(_csv(tmp_path, "val_bpb", rows=BPB_ROWS), metric="val_bpb")
    f = delphi.predict(ladder, {"flops": 1e22}, "power", fixed={"E": 0.5}, interval=None)
    assert f.unit == "bits/byte" and f.to_dict()["prediction"]["unit"] == "bits/byte"
    assert "bits/byte" in f.report()
    reg = Registry(tmp_path / "reg.jsonl")
    entry = reg.register(f, id="bpb-1e22")
    assert entry.target.unit == "bits/byte" and entry.target.metric == "val_bpb"
    assert entry.target.facts == {}       # C was given: nothing converted, nothing to add


def test_scoring_an_outcome_in_another_unit_is_an_error(tmp_path):
    ladder = delphi.load_ladder(_csv(tmp_path))
    f = delphi.predict(ladder, {"flops": 1e22}, "power", fixed={"E": 1.5}, interval=None)
    reg = Registry(tmp_path / "reg.jsonl")
    reg.register(f, id="p")
    before = reg.path.read_bytes()
    with pytest.raises(RegistryError, match="outcome is in bits/byte but prediction 'p' is in "
                                            "nats/token"):
        reg.score("p", 0.9, unit="bpb")
    with pytest.raises(RegistryError, match="ln 2"):          # exact factor, still refused
        reg.score("p", 3.5, unit="bits/token")
    with pytest.raises(RegistryError, match="accepted: nats/token, bits/byte, bits/token"):
        reg.score("p", 2.5, unit="nat")
    assert reg.path.read_bytes() == before                    # nothing written
    s = reg.score("p", 2.5, unit="nats/token")
    assert s.unit == "nats/token" and s.error == pytest.approx(2.5 - f.loss)
    # An external forecast's unit is validated when it is registered.
    with pytest.raises(RegistryError, match="unknown target unit 'nat'"):
        reg.register_external(id="x", target={"flops": 1e23, "unit": "nat"}, loss=2.0,
                              source="paper")


def test_cli_unit_option_and_score_refusal(tmp_path, capsys):
    path = str(_csv(tmp_path))
    assert main(["fit", path, "--law", "power", "--floor", "1.5", "--unit", "bits/byte",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ladder"]["unit"] == "bits/byte"
    with pytest.raises(SystemExit) as stop:      # a usage error, naming the flag
        main(["fit", path, "--law", "power", "--floor", "1.5", "--unit", "nat"])
    err = capsys.readouterr().err.strip()
    assert stop.value.code == 2 and "bits/token" in err
    assert err.endswith("error: argument --unit: unknown unit 'nat'; accepted: nats/token, "
                        "bits/byte, bits/token (also bpb for bits/byte)")
    bpb = str(_csv(tmp_path, "val_bpb", "bpb.csv"))
    assert main(["predict", bpb, "--metric", "val_bpb", "--law", "power", "--floor", "0.5",
                 "--target-flops", "1e22", "--interval", "none"]) == 0
    out = capsys.readouterr().out
    assert "[bits/byte]" in out and "named as bits per byte" in out
    reg = str(tmp_path / "reg.jsonl")
    assert main(["register", path, "--law", "power", "--floor", "1.5", "--target-flops", "1e22",
                 "--interval", "none", "--registry", reg, "--id", "p", "-q"]) == 0
    capsys.readouterr()
    assert main(["score", "--registry", reg, "--id", "p", "--actual", "0.9",
                 "--unit", "bits/byte"]) == 1
    assert "outcome is in bits/byte" in capsys.readouterr().err
    assert main(["score", "--registry", reg, "--id", "p", "--actual", "2.5", "--unit",
                 "nats/token", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unit"] == "nats/token"


def test_analysis_commands_take_and_show_the_unit(tmp_path, capsys):
    # isoflop and optimal read the same --unit as predict and say which unit their losses are in.
    rng = np.random.default_rng(0)
    rows = []
    for c in (1e18, 4e18, 1.6e19):
        for n in np.geomspace(2e7, 2e9, 7):
            d = c / (6 * n)
            loss = 1.7 + 400 / n ** 0.34 + 400 / d ** 0.28
            rows.append({"run": f"c{c:.0e}-n{n:.2e}", "params": n, "tokens": d, "flops": c,
                         "loss": loss * (1 + 1e-3 * rng.standard_normal())})
    path = tmp_path / "iso.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    assert main(["isoflop", str(path), "--unit", "bpb", "--n-boot", "50", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unit"] == "bits/byte"
    assert main(["isoflop", str(path), "--unit", "bits/token", "--n-boot", "50"]) == 0
    assert "losses in bits/token" in capsys.readouterr().out
    assert main(["optimal", str(path), "--unit", "bpb", "--target-flops", "1e20", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ladder"]["unit"] == "bits/byte"
    with pytest.raises(SystemExit) as stop:
        main(["isoflop", str(path), "--unit", "furlongs"])
    assert stop.value.code == 2
    assert "argument --unit: unknown unit 'furlongs'" in capsys.readouterr().err


def test_cli_bpb_metric_with_an_explicit_nats_unit_gets_a_note(tmp_path, capsys):
    path = _csv(tmp_path, "eval/paloma/bpb")
    code = main(["fit", str(path), "--metric", "eval/paloma/bpb", "--unit", "nats/token",
                 "--law", "power", "--floor", "1.0"])
    out = capsys.readouterr().out
    assert code == 0 and "[nats/token]" in out
    assert ("metric 'eval/paloma/bpb' is named as bits per byte (bits/byte), but the unit "
            "given is nats/token: the given unit is used" in out)


def test_a_unit_column_that_contradicts_the_ladders_unit_is_an_error(tmp_path, capsys):
    # Before: a "unit" column saying one run was in bits/token was read as nats/token with no
    # word (delphi never converts units, so the run was fitted in the wrong one).
    mixed = ROWS.format(metric="loss,unit").replace("\n", ",nats\n").replace(
        "loss,unit,nats", "loss,unit").replace("r3,4.0e8,8.0e9,3.03,nats", "r3,4.0e8,8.0e9,2.19,bits")
    path = tmp_path / "mixed.csv"
    path.write_text(mixed)
    with pytest.raises(LadderError) as err:
        delphi.load_ladder(str(path))
    msg = str(err.value)
    assert "column 'unit'" in msg and "'r3' (row 2)" in msg and "bits/token" in msg
    assert "nats/token" in msg and "unit='bits/token' (CLI --unit bits/token)" not in msg
    # one other unit on every row: the ladder is not read in the default unit
    same = mixed.replace(",nats\n", ",bpb\n").replace(",bits\n", ",bpb\n")
    path.write_text(same)
    with pytest.raises(LadderError, match=r"bits/byte on every row.*unit='bits/byte' \(CLI "
                                          r"--unit bits/byte\)"):
        delphi.load_ladder(str(path))
    with pytest.warns(delphi.LadderWarning, match="above 2 bits/byte .* wrong unit"):
        assert delphi.load_ladder(str(path), unit="bpb").unit == "bits/byte"
    assert main(["fit", str(path)]) == 1
    assert "--unit bits/byte" in capsys.readouterr().err
    assert main(["fit", str(path), "--unit", "bpb", "--law", "power", "--floor", "1.5"]) == 0
    # a column named unit whose values are not loss units is left alone
    path.write_text(ROWS.format(metric="loss,unit").replace("\n", ",gpu\n").replace(
        "loss,unit,gpu", "loss,unit"))
    assert delphi.load_ladder(str(path)).unit == "nats/token"


def test_a_ladder_in_pflops_beside_a_target_in_flops_gets_a_hint():
    # Before: a ladder whose compute was in PFLOPs (1e3..3e5) predicted a 1e22-FLOPs target
    # with "3.33e+16x ... more than four orders of magnitude" and no word of units.
    c = np.array([1e18, 3e18, 1e19, 3e19, 1e20, 3e20])
    frame = pd.DataFrame({"run": [f"r{i}" for i in range(6)], "flops": c / 1e15,
                          "loss": 1.8 + 300 * c ** -0.12})
    with pytest.warns(delphi.FitWarning, match=r"orders of magnitude of extrapolation; the "
                      r"largest fitted run has only 3e\+05 FLOPs.*PFLOPs"):
        delphi.predict(delphi.load_ladder(frame), {"flops": 1e22}, interval="none")
    # the same ladder in FLOPs, 3.3e4x out: far, but no word of units
    with pytest.warns(delphi.FitWarning, match="orders of magnitude") as rec:
        delphi.predict(delphi.load_ladder(frame.assign(flops=c)), {"flops": 1e25},
                       interval="none")
    assert not [w for w in rec if "PFLOPs" in str(w.message)]


def test_a_bits_per_byte_ladder_above_8_is_refused_and_above_2_warned(tmp_path, capsys):
    # F24: hero-like losses x 8 (22..27) read as bits/byte predicted "20.77 bits/byte" without
    # a word; a uniform guess over bytes costs 8 bits/byte.
    x8 = ROWS.replace("3.40", "27.2").replace("3.20", "25.6").replace("3.03", "24.2").replace(
        "2.89", "23.1").replace("2.78", "22.2")
    path = _csv(tmp_path, rows=x8)
    with pytest.raises(LadderError, match=r"all 5 runs end above 8 bits/byte \(22.2..27.2\), "
                                          r"worse than a uniform guess over bytes"):
        delphi.load_ladder(path, unit="bits/byte")
    assert main(["predict", str(path), "--target-flops", "1e22", "--unit", "bits/byte"]) == 1
    assert "not bits per byte" in capsys.readouterr().err
    # nats/token losses read as bits/byte: a note, not a refusal
    with pytest.warns(delphi.LadderWarning, match=r"above 2 bits/byte \(2.78..3.4\).*wrong unit"
                                                  r".*unit='nats/token'"):
        delphi.load_ladder(_csv(tmp_path), unit="bits/byte")
    # one run above 2 (or 8) among plausible ones is the outlier screens' business
    one_high = BPB_ROWS.replace("1.40", "9.5")
    assert not delphi.load_ladder(_csv(tmp_path, rows=one_high), unit="bpb").warnings
    assert not delphi.load_ladder(_csv(tmp_path, rows=BPB_ROWS), unit="bpb").warnings


def test_a_nats_ladder_below_one_nat_is_not_warned_about(tmp_path):
    # Real ladders end below 1 nat/token (Llama 3's isoFLOP points: 0.74..0.93), where bits per
    # byte also lie: a low nats/token ladder says nothing about its unit, so no note.
    low = BPB_ROWS.replace("1.40", "0.98").replace("1.32", "0.93").replace("1.25", "0.88") \
        .replace("1.19", "0.84").replace("1.15", "0.81")
    assert not delphi.load_ladder(_csv(tmp_path, rows=low)).warnings
    assert not delphi.load_ladder(_csv(tmp_path, rows=low), unit="bits/byte").warnings
