"""Accuracy predictions in the registry: register (API and ``delphi accuracy --registry``),
score (error in points, interval check, z and PIT), verify the chain, reports mixing loss and
accuracy entries (text, JSON, HTML), and old registries still verifying."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest

import delphi
from delphi.accuracy import predict_accuracy
from delphi.cli.main import main
from delphi.errors import RegistryError
from delphi.registry import Registry
from delphi.report import registry_page
from task_ladders import TASK, simulate

ROOT = Path(__file__).resolve().parents[1]
TASKS_TOML = '[tasks.sim]\nbpb = "bpb/sim"\naccuracy = "acc/sim"\nchance = 0.25\n'


@pytest.fixture(scope="module")
def forecast():
    ladder = delphi.load_ladder(simulate())     # a simulated ladder loads without warnings
    # calibrate=False: these tests are about the registry, not the interval's calibration
    return predict_accuracy(ladder, TASK, target_params=8e8, target_tokens=1.6e10, n_boot=8,
                            seed=1, calibrate=False)


def _loss_forecast(reg: Registry, id="loss-1", loss=2.5):
    return reg.register_external(id=id, target={"name": "big run", "flops": 1e23,
                                                "unit": "nats/token"}, loss=loss,
                                 interval=(2.4, 2.6, 0.9), source="a paper")


def test_register_records_unit_points_and_both_steps(tmp_path, forecast):
    reg = Registry(tmp_path / "r.jsonl")
    e = reg.register_accuracy(forecast, id="acc-1", author="me")
    assert e.target.unit == "accuracy" and e.target.name == "sim"
    assert e.target.params == 8e8 and e.target.tokens == 1.6e10
    assert e.target.facts["chance"] == 0.25 and e.target.facts["task"] == "sim"
    assert e.target.facts["task_loss"] == pytest.approx(forecast.task_loss)
    assert e.forecast.loss == forecast.accuracy
    iv = e.forecast.interval
    assert (iv.lower, iv.upper, iv.level) == (forecast.lower, forecast.upper, 0.9)
    assert (iv.mean_lower, iv.mean_upper) == (forecast.mean_lower, forecast.mean_upper)
    assert iv.kind == "new-run" and iv.n_draws == 8
    # both steps' parameters, prefixed
    for k, v in forecast.step1.params.items():
        assert e.law.params[f"step1.{k}"] == pytest.approx(v)
    for k, v in forecast.step2.params.items():
        assert e.law.params[f"step2.{k}"] == pytest.approx(v)
    assert e.fit.fixed == {"step2.U": 1.0}   # C is fitted within [chance, 1]
    assert e.fit.n_runs == 12 and e.fit.seed == 1 and e.fit.n_boot == 8
    # the data fingerprint: SHA-256 of both steps' points, recomputed here from the fits
    body = [{"x": {k: [format(float(v), ".17g") for v in np.ravel(a)]
                   for k, a in sorted(f.x.items())},
             "y": [format(float(v), ".17g") for v in np.ravel(f.y)],
             "labels": list(map(str, f.labels))} for f in (forecast.step1, forecast.step2)]
    want = hashlib.sha256(json.dumps(body, sort_keys=True,
                                     separators=(",", ":")).encode()).hexdigest()
    assert e.ladder.sha256 == want
    assert reg.verify().ok
    # register() given an AccuracyForecast does the same
    e2 = reg.register(forecast, id="acc-2")
    assert e2.target.unit == "accuracy" and e2.forecast.loss == forecast.accuracy
    assert reg.verify().ok and reg.verify().n_entries == 2


def test_score_in_points_with_interval_z_and_pit(tmp_path, forecast):
    reg = Registry(tmp_path / "r.jsonl")
    reg.register_accuracy(forecast, id="acc")
    actual = round(forecast.upper + 0.01, 4)        # just above the interval
    s = reg.score("acc", actual, source="eval")
    assert s.error_points == pytest.approx(100 * (actual - forecast.accuracy))
    assert s.rel_error is None and s.is_accuracy
    assert s.inside is False
    q = NormalDist().inv_cdf(0.95)
    sigma = (forecast.upper - forecast.lower) / (2 * q)
    z = (actual - (forecast.lower + forecast.upper) / 2) / sigma
    assert s.z == pytest.approx(z) and s.pit == pytest.approx(NormalDist().cdf(z))
    text = s.report()
    assert f"{100 * actual:.2f} points" in text and "OUTSIDE" in text
    assert f"{s.error_points:+.2f} points" in text
    assert s.to_dict()["error_points"] == pytest.approx(s.error_points)
    assert reg.verify().ok


def test_score_refuses_non_fractions_and_other_units(tmp_path, forecast):
    reg = Registry(tmp_path / "r.jsonl")
    reg.register_accuracy(forecast, id="acc")
    before = reg.path.read_bytes()
    with pytest.raises(RegistryError, match="not an accuracy fraction"):
        reg.score("acc", 61.2)                    # points, not a fraction
    with pytest.raises(RegistryError, match="accuracy"):
        reg.score("acc", 0.6, unit="nats/token")  # a loss unit against an accuracy
    assert reg.path.read_bytes() == before        # nothing written
    assert reg.score("acc", 0.6, unit="accuracy").error_points == pytest.approx(
        100 * (0.6 - forecast.accuracy))
    with pytest.raises(RegistryError, match="one AccuracyForecast"):
        reg.register_accuracy([forecast], id="x")


def test_tampered_accuracy_entry_breaks_the_chain(tmp_path, forecast):
    reg = Registry(tmp_path / "r.jsonl")
    _loss_forecast(reg)
    reg.register_accuracy(forecast, id="acc")
    reg.score("acc", 0.6)
    lines = reg.path.read_text().splitlines()
    doc = json.loads(lines[1])
    doc["forecast"]["loss"] = round(doc["forecast"]["loss"] + 0.001, 6)
    lines[1] = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    reg.path.write_text("\n".join(lines) + "\n")
    report = reg.verify()
    assert not report.ok and report.line == 2 and report.id == "acc"


def test_report_with_mixed_loss_and_accuracy(tmp_path, forecast):
    reg = Registry(tmp_path / "r.jsonl")
    _loss_forecast(reg, "loss-1", 2.5)
    reg.register_accuracy(forecast, id="acc")
    reg.score("loss-1", 2.55)
    reg.score("acc", 0.6)
    board = reg.report()
    assert board.mean_abs_rel_error == pytest.approx(abs(2.55 - 2.5) / 2.5)   # losses only
    assert board.n_accuracy == 1
    assert board.mean_abs_error_points == pytest.approx(100 * abs(0.6 - forecast.accuracy))
    inside_acc = forecast.lower <= 0.6 <= forecast.upper
    assert board.n_with_interval == 2 and board.n_inside == 1 + inside_acc
    md = board.to_markdown()
    assert f"{100 * 0.6:.2f} pts" in md and "+2.00%" in md
    assert "Final accuracy (1): mean |error|" in md
    page = registry_page(reg, generated_at="2026-01-01T00:00:00Z")
    assert "60.00 pts" in page.html and f"{100 * forecast.accuracy:.2f} pts" in page.html
    assert "accuracy: mean |error|" in page.html and "+2.00%" in page.html
    assert page.summary["mean_abs_error_points"] == pytest.approx(board.mean_abs_error_points)


def test_old_registry_still_verifies_and_reads_identically(tmp_path):
    src = ROOT / "ladders" / "marin-registry.jsonl"
    path = tmp_path / "old.jsonl"
    shutil.copy(src, path)
    reg = Registry(path)
    assert reg.verify().ok
    raw = path.read_bytes().splitlines()
    assert [e.line.encode() for e in reg.entries()] == raw     # every line re-serialises as is
    board = reg.report()
    assert board.n_accuracy == 0 and board.mean_abs_error_points is None
    for s in board.scores:
        assert s.error_points is None and s.rel_error == pytest.approx(
            (s.actual - s.predicted) / s.predicted)


def test_cli_register_score_report_show(tmp_path, capsys):
    data = tmp_path / "sim.csv"
    simulate().to_csv(data, index=False)
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(TASKS_TOML)
    path = str(tmp_path / "r.jsonl")
    base = ["accuracy", str(data), "--tasks", str(tasks), "--task", "sim", "--target-params",
            "8e8", "--target-tokens", "1.6e10", "--n-boot", "20", "--no-calibration"]
    assert main(base + ["--registry", path, "--id", "sim-8e8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["registered"]["id"] == "sim-8e8"
    pred = doc["prediction"]["accuracy"]
    assert Registry(path).get("sim-8e8").forecast.loss == pytest.approx(pred)
    assert main(["score", "--registry", path, "--id", "sim-8e8", "--actual", "0.612",
                 "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["error_points"] == pytest.approx(100 * (0.612 - pred)) and s["rel_error"] is None
    assert main(["registry", "report", "--registry", path, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["verified"] and rep["n_accuracy"] == 1
    assert rep["mean_abs_error_points"] == pytest.approx(abs(100 * (0.612 - pred)))
    assert main(["registry", "show", "--registry", path, "--id", "sim-8e8"]) == 0
    out = capsys.readouterr().out
    # a summary, not the entry's JSON (h90): the unit in the target line, the forecast in points
    assert "[accuracy]" in out and f"forecast   {100 * pred:.2f} points" in out
    assert "61.20 points" in out
    assert main(["registry", "list", "--registry", path]) == 0
    assert f"{100 * pred:.2f} pts" in capsys.readouterr().out
    assert main(base + ["--registry", path]) == 2          # --id missing: a usage error
    assert "--registry and --id go together" in capsys.readouterr().err


def test_score_errors_of_an_accuracy_entry_speak_of_accuracy(tmp_path, forecast):
    # Each message names an accuracy (a fraction, no loss unit); the loss entry beside it
    # keeps the loss wording. No refused call writes anything.
    reg = Registry(tmp_path / "r.jsonl")
    reg.register_accuracy(forecast, id="acc")
    _loss_forecast(reg, "loss-1", 2.5)
    before = reg.path.read_bytes()
    for bad in (0, 0.0, -0.1, 1.5, 61.2):
        with pytest.raises(RegistryError, match=r"actual: .* is not an accuracy fraction in "
                                                r"\(0, 1\]") as info:
            reg.score("acc", bad)
        assert "for a loss" not in str(info.value) and "'acc'" in str(info.value)
    with pytest.raises(RegistryError, match="loss units do not apply to accuracy") as info:
        reg.score("acc", 0.6, unit="nats/token")
    assert "bytes per token" not in str(info.value)
    with pytest.raises(RegistryError, match=r"score the final accuracy \(fraction 1\)"):
        reg.score("acc", 0.55, fraction=0.5)
    # the loss entry: loss wording, and an accuracy unit is refused against it
    with pytest.raises(RegistryError, match="outside the range a registry accepts for a loss"):
        reg.score("loss-1", 0)
    with pytest.raises(RegistryError, match=r"score the final loss \(fraction 1\)"):
        reg.score("loss-1", 2.6, fraction=0.5)
    with pytest.raises(RegistryError, match="'loss-1' is a loss in nats/token: an accuracy "
                                            "cannot be scored against a loss"):
        reg.score("loss-1", 0.6, unit="accuracy")
    assert reg.path.read_bytes() == before
    reg.score("acc", 0.6)
    reg.score("loss-1", 2.55)
    after = reg.path.read_bytes()
    with pytest.raises(RegistryError, match="a final accuracy is recorded once"):
        reg.score("acc", 0.61)
    with pytest.raises(RegistryError, match="a final loss is recorded once"):
        reg.score("loss-1", 2.56)
    assert reg.path.read_bytes() == after and reg.verify().ok


def test_cli_score_of_an_accuracy_entry_refuses_zero_and_loss_units(tmp_path, forecast, capsys):
    path = tmp_path / "r.jsonl"
    Registry(path).register_accuracy(forecast, id="acc")
    before = path.read_bytes()
    # 0 and -0.1 are neither a loss nor an accuracy: a usage error, refused while parsing
    for actual in ("0", "-0.1"):
        with pytest.raises(SystemExit) as stop:
            main(["score", "--registry", str(path), "--id", "acc", f"--actual={actual}"])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and "nor an accuracy fraction in (0, 1]" in err
    # 1.5 is a loss, not an accuracy: the registry refuses it for an accuracy entry
    assert main(["score", "--registry", str(path), "--id", "acc", "--actual=1.5"]) == 1
    err = capsys.readouterr().err
    assert "not an accuracy fraction in (0, 1]" in err and "for a loss" not in err
    assert main(["score", "--registry", str(path), "--id", "acc", "--actual", "0.6",
                 "--unit", "nats/token"]) == 1
    err = capsys.readouterr().err
    assert "loss units do not apply to accuracy entries" in err and "bytes per token" not in err
    assert path.read_bytes() == before


def test_report_header_is_the_same_before_and_after_the_first_score(tmp_path, forecast):
    reg = Registry(tmp_path / "r.jsonl")
    reg.register_accuracy(forecast, id="acc")
    board = reg.report()
    assert board.n_accuracy_predictions == 1 and not board.final
    head = board.to_markdown().splitlines()[0]
    assert "error (rel. or pts)" in head and "rel. error |" not in head
    reg.score("acc", 0.6)
    assert reg.report().to_markdown().splitlines()[0] == head
    # a registry of losses only keeps its "rel. error" column, scored or not
    loss = Registry(tmp_path / "loss.jsonl")
    _loss_forecast(loss)
    assert "| rel. error |" in loss.report().to_markdown().splitlines()[0]
    loss.score("loss-1", 2.55)
    assert "| rel. error |" in loss.report().to_markdown().splitlines()[0]


def test_html_registry_page_shows_accuracy_outcomes_in_points(tmp_path, forecast):
    reg = Registry(tmp_path / "r.jsonl")
    reg.register_accuracy(forecast, id="acc")
    reg.score("acc", 0.6)
    html = registry_page(reg, generated_at="2026-01-01T00:00:00Z").html
    assert "interval (final accuracy)" in html and "interval (final loss)" not in html
    assert "outcome of acc: 60.00 pts at fraction 1" in html and "0.6000" not in html
    # mixed: a unit-neutral header; the loss outcome stays a loss
    _loss_forecast(reg, "loss-1", 2.5)
    reg.score("loss-1", 2.55)
    html = registry_page(reg, generated_at="2026-01-01T00:00:00Z").html
    assert "interval (final)" in html and "interval (final loss)" not in html
    assert "outcome of acc: 60.00 pts at fraction 1" in html
    assert "outcome of loss-1: 2.5500 at fraction 1" in html
    # losses only: unchanged
    loss = Registry(tmp_path / "loss.jsonl")
    _loss_forecast(loss)
    loss.score("loss-1", 2.55)
    html = registry_page(loss, generated_at="2026-01-01T00:00:00Z").html
    assert "interval (final loss)" in html and "outcome of loss-1: 2.5500 at fraction 1" in html
