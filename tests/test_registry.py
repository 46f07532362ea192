"""The preregistration registry: schema, hash chain, locking, crash safety, scoring, CLI.

Reliability tests use multiprocessing with the 'fork' context (cheap: the parent has already
imported delphi) and a seeded RNG, so they are fast and deterministic in what they check.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import time
import types
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import delphi
from delphi import RegistryError
from delphi.cli import main as registry_main
from delphi.registry import (GENESIS, PAUSE_ENV, PAUSE_SIGNAL_ENV, Entry, Registry)
from delphi.registry.history import HERO_ID, build_marin_registry

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "ladders" / "marin-registry.jsonl"
FORK = mp.get_context("fork")


@pytest.fixture(scope="module")
def forecast():
    """Marin's hero forecast from the bundled ladder (no shared data needed)."""
    return delphi.predict(delphi.load_ladder("marin-moe-535b"), {"flops": 2.61e24, "name": "hero"},
                          "power", fixed={"E": 1.5})


def external(reg: Registry, id: str, loss: float = 2.5, **kw):
    """A minimal external forecast: the cheapest complete append."""
    kw.setdefault("target", {"flops": 1e21})
    kw.setdefault("source", "test")
    return reg.register_external(id=id, loss=loss, **kw)


def small_registry(path: Path) -> Registry:
    reg = Registry(path)
    external(reg, "a-1e21", 2.6, target={"flops": 1e21, "name": "a"})
    reg.score("a-1e21", 2.61, source="run a")
    external(reg, "b-1e22", 2.4, interval=(2.3, 2.5, 0.9, "new-run"))
    return reg


def run_cli(capsys, *argv):
    code = registry_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


# --------------------------------------------------------------------------- schema and chain
def test_register_records_the_forecast(tmp_path, forecast):
    reg = Registry(tmp_path / "r.jsonl")
    entry = reg.register(forecast, id="hero", author="me", notes="n",
                         target_facts={"active_params": 2.3e10, "layers": 48},
                         settings={"fit_max_flops": None, "include_unfinished": False})
    d = forecast.to_dict()
    assert entry.kind == "prediction" and entry.prev_hash == GENESIS
    assert entry.forecast.loss == forecast.loss and not entry.forecast.external
    assert entry.law.name == "power" and entry.law.params == d["params"]
    assert entry.fit.fixed == {"E": 1.5} and entry.fit.n_runs == d["fit"]["n_runs"]
    assert [x.run for x in entry.fit.excluded] == [x["run"] for x in d["fit"]["excluded"]]
    assert entry.ladder.sha256 == forecast.ladder_sha256
    assert entry.target.flops == 2.61e24 and entry.target.active_params == 2.3e10
    assert entry.target.facts == {"layers": 48} and entry.target.metric == forecast.metric
    if forecast.interval is None:
        assert entry.forecast.interval is None
    else:  # the new-run interval, with how it was made
        iv = entry.forecast.interval
        assert (iv.lower, iv.upper, iv.level) == (forecast.interval.lower,
                                                  forecast.interval.upper, forecast.interval.level)
        assert iv.method == forecast.interval.method and iv.kind == forecast.interval.kind
    assert entry.delphi_version == delphi.__version__
    assert entry.created_at.tzinfo is not None and entry.created_at.utcoffset().total_seconds() == 0
    assert reg.get("hero") == entry and reg.entries() == [entry]


def test_hash_is_sha256_of_canonical_json_without_hash(tmp_path):
    reg = small_registry(tmp_path / "r.jsonl")
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    prev = GENESIS
    for line in lines:
        raw = json.loads(line)
        body = {k: v for k, v in raw.items() if k != "hash"}
        canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
        assert raw["hash"] == hashlib.sha256(canon.encode()).hexdigest()
        assert raw["prev_hash"] == prev
        assert line == json.dumps(raw, sort_keys=True, separators=(",", ":"))
        prev = raw["hash"]
    assert reg.verify().ok and reg.verify().head == prev


def test_unknown_fields_are_rejected(tmp_path):
    path = tmp_path / "r.jsonl"
    small_registry(path)
    line = path.read_text().splitlines()[0]
    raw = json.loads(line)
    raw["forecast"]["confidence"] = "high"
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        Entry.model_validate_json(json.dumps(raw))
    # Even with a recomputed hash, the schema rejects it and verify names the line.
    raw["hash"] = hashlib.sha256(json.dumps({k: v for k, v in raw.items() if k != "hash"},
                                            sort_keys=True, separators=(",", ":")).encode()
                                 ).hexdigest()
    lines = path.read_text().splitlines()
    lines[0] = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    report = Registry(path).verify()
    assert not report.ok and report.line == 1 and report.id == "a-1e21"
    assert "forecast.confidence: unknown field" in report.problem


def test_explicit_timestamps(tmp_path):
    reg = Registry(tmp_path / "r.jsonl")
    e = external(reg, "x", created_at="2026-04-10T12:00:00+02:00")
    assert e.created_at == datetime(2026, 4, 10, 10, tzinfo=timezone.utc)
    assert '"created_at":"2026-04-10T10:00:00Z"' in e.line
    with pytest.raises(RegistryError, match="time zone"):
        external(reg, "y", created_at=datetime(2026, 4, 10))


def test_forecast_interval_is_recorded_when_provided(tmp_path, forecast):
    reg = Registry(tmp_path / "r.jsonl")
    band = types.SimpleNamespace(lower=2.0, upper=2.08, mean_lower=2.03, mean_upper=2.05,
                                 level=0.8, kind="new-run", method="bootstrap", noise=0.01,
                                 noise_source="residuals", n_draws=200, n_failed=3)
    e = reg.register(dataclasses.replace(forecast, interval=band), id="iv",
                     settings={"n_boot": 200, "boot_unit": "run", "seed": 0})
    iv = e.forecast.interval
    assert (iv.lower, iv.upper, iv.level, iv.kind, iv.method) == (2.0, 2.08, 0.8, "new-run",
                                                                  "bootstrap")
    assert (iv.mean_lower, iv.mean_upper, iv.n_draws, iv.n_failed) == (2.03, 2.05, 200, 3)
    assert (e.fit.n_boot, e.fit.boot_unit, e.fit.seed) == (200, "run", 0)
    e = reg.register(dataclasses.replace(forecast, interval=None), id="none")
    assert e.forecast.interval is None


# --------------------------------------------------------------------------- scoring
def test_score_with_interval_z_and_pit(tmp_path):
    reg = Registry(tmp_path / "r.jsonl")
    external(reg, "p", 2.05, interval=(2.0, 2.1, 0.9, "new-run"))
    s = reg.score("p", 2.09, source="wandb")
    assert s.outcome_id == "p/outcome-1" and s.predicted == 2.05
    assert s.rel_error == pytest.approx((2.09 - 2.05) / 2.05)
    assert s.abs_error == pytest.approx(0.04) and s.inside is True
    sigma = 0.05 / stats.norm.ppf(0.95)
    assert s.z == pytest.approx(0.04 / sigma)
    assert s.pit == pytest.approx(stats.norm.cdf(0.04 / sigma))
    external(reg, "q", 2.05, interval=(2.0, 2.1, 0.9, "new-run"))
    outside = reg.score("q", 2.2)
    assert outside.inside is False and outside.outcome_id == "q/outcome-1" and outside.z > 1.645
    # A final loss is recorded once: a second final outcome is refused, the file unchanged.
    before = (tmp_path / "r.jsonl").read_bytes()
    with pytest.raises(RegistryError, match="already has a final outcome"):
        reg.score("p", 2.0)
    assert (tmp_path / "r.jsonl").read_bytes() == before
    text = s.report()
    assert "inside;" in text and f"z = {s.z:+.2f}" in text and f"{s.rel_error:+.3%}" in text


def test_score_without_interval_says_so(tmp_path):
    reg = Registry(tmp_path / "r.jsonl")
    external(reg, "p", 2.5)
    s = reg.score("p", 2.4)
    assert s.inside is None and s.z is None and s.pit is None
    assert "no interval" in s.report()
    assert s.rel_error == pytest.approx(-0.1 / 2.5)


def test_partial_outcomes_are_scored_on_the_curve(tmp_path):
    reg = Registry(tmp_path / "r.jsonl")
    fractions = np.arange(1, 20) * 0.05
    curve = [(float(f), float(2.0 + 0.5 * (1 - f) ** 2)) for f in fractions]
    external(reg, "p", 2.0, curve=curve, interval=(1.95, 2.05, 0.8))
    s = reg.score("p", 2.1, fraction=0.56)
    expected = np.interp(0.56, fractions, [c[1] for c in curve])
    assert s.predicted == pytest.approx(expected) and s.fraction == 0.56
    assert s.z is None and "final loss" in s.no_interval_reason
    # Between the last curve point (0.95) and the end, the point forecast closes the curve.
    s = reg.score("p", 2.0, fraction=0.975)
    assert s.predicted == pytest.approx((curve[-1][1] + 2.0) / 2)
    assert reg.score("p", 2.01).predicted == 2.0
    with pytest.raises(RegistryError, match="before the start"):
        reg.score("p", 2.3, fraction=0.01)


def test_report_scoreboard(tmp_path):
    reg = Registry(tmp_path / "r.jsonl")
    external(reg, "a", 2.0, interval=(1.9, 2.1, 0.9))
    external(reg, "b", 3.0, interval=(2.9, 3.1, 0.9), curve=[(0.5, 3.4), (1.0, 3.0)])
    external(reg, "c", 2.5)
    external(reg, "proj", 1.5, kind="projection")
    external(reg, "open", 2.2)
    reg.score("a", 2.05)
    reg.score("b", 3.5, fraction=0.5)   # a partial outcome, then the final one
    reg.score("b", 3.2)
    reg.score("c", 2.4)
    board = reg.report()
    rel = [abs(2.05 - 2.0) / 2.0, abs(3.2 - 3.0) / 3.0, abs(2.4 - 2.5) / 2.5]
    assert [s.prediction_id for s in board.final] == ["a", "b", "c"]
    assert board.mean_abs_rel_error == pytest.approx(np.mean(rel))
    assert board.max_abs_rel_error == pytest.approx(max(rel))
    assert (board.n_with_interval, board.n_inside) == (2, 1) and board.coverage == 0.5
    assert board.unscored == ("open",) and board.n_projections == 1 and len(board.scores) == 4
    md = board.to_markdown()
    assert sum(x.startswith("| ") for x in md.splitlines()) == 1 + 4  # header + 4 outcomes
    assert "3 of 4 predictions scored" in md and "open" in md
    js = json.loads(json.dumps(board.to_dict()))
    assert js["coverage"] == 0.5 and len(js["final"]) == 3


# --------------------------------------------------------------------------- bad input
def bad_calls(forecast):
    nan_forecast = dataclasses.replace(forecast, loss=float("nan"))
    return {
        "score: actual is a string": lambda r: r.score("a-1e21", "2.5"),
        "score: fraction is a string": lambda r: r.score("a-1e21", 2.5, fraction="0.5"),
        "score: NaN actual": lambda r: r.score("a-1e21", float("nan")),
        "score: negative actual": lambda r: r.score("a-1e21", -1.0),
        "score: fraction 0": lambda r: r.score("a-1e21", 2.5, fraction=0.0),
        "score: fraction above 1": lambda r: r.score("a-1e21", 2.5, fraction=1.5),
        "score: partial without curve": lambda r: r.score("a-1e21", 2.5, fraction=0.5),
        "score: unknown id": lambda r: r.score("nope", 2.5),
        "score: an outcome id": lambda r: r.score("a-1e21/outcome-1", 2.5),
        "score: id not a string": lambda r: r.score(7, 2.5),
        "score: a projection": lambda r: r.score("proj", 2.5),
        "register: duplicate id": lambda r: r.register(forecast, id="a-1e21"),
        "register: NaN forecast": lambda r: r.register(nan_forecast, id="nan"),
        "register: bad kind": lambda r: r.register(forecast, id="k", kind="guess"),
        "register: outcome kind": lambda r: r.register(forecast, id="k", kind="outcome"),
        "register: id with spaces": lambda r: r.register(forecast, id="my run"),
        "register: id not a string": lambda r: r.register(forecast, id=12),
        "register: not a forecast": lambda r: r.register({"loss": 2.0}, id="k"),
        "register: curve of strings": lambda r: r.register(forecast, id="k",
                                                           curve=[("0.5", "2.1")]),
        "register: curve not increasing": lambda r: r.register(
            forecast, id="k", curve=[(0.5, 2.2), (0.4, 2.3)]),
        "register: interval excludes loss": lambda r: r.register(forecast, id="k",
                                                                 interval=(3.0, 3.1, 0.9)),
        "register: unknown setting": lambda r: r.register(forecast, id="k",
                                                          settings={"lr": 1.0}),
        "external: NaN loss": lambda r: external(r, "k", float("nan")),
        "external: infinite loss": lambda r: external(r, "k", float("inf")),
        "external: loss as string": lambda r: external(r, "k", "2.5"),
        "external: flops as string": lambda r: external(r, "k", target={"flops": "1e21"}),
        "external: empty target": lambda r: external(r, "k", target={"name": "x"}),
        "external: no source": lambda r: external(r, "k", source=None),
        "external: duplicate id": lambda r: external(r, "b-1e22"),
        "external: interval level 90": lambda r: external(r, "k", interval=(2.0, 3.0, 90)),
    }


def test_malformed_input_raises_and_leaves_the_file_unchanged(tmp_path, forecast):
    path = tmp_path / "r.jsonl"
    reg = small_registry(path)
    external(reg, "proj", 2.0, kind="projection")
    before = path.read_bytes()
    for name, call in bad_calls(forecast).items():
        with pytest.raises(RegistryError) as info:
            call(reg)
        assert str(info.value), name
        assert "Traceback" not in str(info.value)
        assert path.read_bytes() == before, name
    assert reg.verify().ok


def test_error_messages_name_the_problem(tmp_path, forecast):
    reg = small_registry(tmp_path / "r.jsonl")
    with pytest.raises(RegistryError, match=r"already in .*\(line 1\)"):
        external(reg, "a-1e21")
    with pytest.raises(RegistryError, match="no prediction 'nope'"):
        reg.score("nope", 2.0)
    with pytest.raises(RegistryError, match=r"invalid forecast: loss: .*finite"):
        reg.register(dataclasses.replace(forecast, loss=float("nan")), id="z")
    with pytest.raises(RegistryError, match=r"actual: .*(float|number)"):
        reg.score("a-1e21", "2.5")


# --------------------------------------------------------------------------- tampering
def _ids_and_spans(data: bytes):
    out, start = [], 0
    for line in data.split(b"\n")[:-1]:
        out.append((json.loads(line)["id"], start, start + len(line) + 1))  # newline included
        start += len(line) + 1
    return out


def test_any_edited_byte_is_named_by_line_and_id(tmp_path):
    path = tmp_path / "r.jsonl"
    small_registry(path)
    data = path.read_bytes()
    spans = _ids_and_spans(data)
    rng = np.random.default_rng(5)
    alphabet = b'0123456789abcdefABCDEF{}[]",:.-+eE \\\nxyz'
    for pos in range(len(data)):
        sub = data[pos]
        while sub == data[pos]:
            sub = alphabet[rng.integers(len(alphabet))]
        path.write_bytes(data[:pos] + bytes([sub]) + data[pos + 1:])
        report = Registry(path).verify()
        line = next(i for i, (_, a, b) in enumerate(spans, 1) if a <= pos < b)
        id_, a, _ = spans[line - 1]
        assert not report.ok, pos
        assert report.line == line, (pos, report)
        id_span = data.index(b'"id":"', a) - a
        if not id_span <= pos - a < id_span + 6 + len(id_) + 1:
            assert report.id == id_, (pos, report)


def test_deleted_swapped_and_inserted_entries_are_named(tmp_path):
    path = tmp_path / "r.jsonl"
    reg = small_registry(path)
    external(reg, "d")
    lines = path.read_bytes().split(b"\n")[:-1]
    ids = [json.loads(x)["id"] for x in lines]
    head = reg.verify().head

    def check(new_lines, line, id_, fragment, expect_head=None):
        path.write_bytes(b"".join(x + b"\n" for x in new_lines))
        report = Registry(path).verify(expect_head=expect_head)
        assert not report.ok and report.line == line and report.id == id_, report
        assert fragment in report.problem, report
        assert f"line {line} (id {id_})" in str(report)

    check(lines[1:], 1, ids[1], "start of the chain")                       # first deleted
    check(lines[:1] + lines[2:], 2, ids[2], "deleted")                       # middle deleted
    check([lines[0], lines[2], lines[1], lines[3]], 2, ids[2], "reordered")  # swapped
    check(lines[:2] + [lines[1]] + lines[2:], 3, ids[1], "")                 # duplicated
    check(lines[:3], 3, ids[2], "removed from the end", expect_head=head)    # last deleted
    path.write_bytes(b"".join(x + b"\n" for x in lines))
    assert Registry(path).verify(expect_head=head).ok


def test_repair_refuses_a_tampered_registry(tmp_path):
    path = tmp_path / "r.jsonl"
    small_registry(path)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"loss":2.6', b'"loss":2.5'))
    tampered = path.read_bytes()
    with pytest.raises(RegistryError, match="cannot repair.*line 1"):
        Registry(path).repair()
    assert path.read_bytes() == tampered


# --------------------------------------------------------------------------- torn lines
def test_torn_last_line_blocks_appends_until_repaired(tmp_path):
    path = tmp_path / "r.jsonl"
    reg = small_registry(path)
    good = path.read_bytes()
    path.write_bytes(good + b'{"author":null,"created_at":"2026')
    report = reg.verify()
    assert report.torn and report.line == 4 and not report.ok
    torn = path.read_bytes()
    with pytest.raises(RegistryError, match="line 4 is torn.*repair"):
        external(reg, "next")
    with pytest.raises(RegistryError, match="torn"):
        reg.score("a-1e21", 2.6)
    assert path.read_bytes() == torn
    backup = reg.repair()
    assert backup.read_bytes() == torn and path.read_bytes() == good
    assert reg.repair() is None and reg.verify().ok
    external(reg, "next")
    assert reg.verify().ok and reg.verify().n_entries == 4


def test_appends_refuse_an_unreadable_line(tmp_path):
    path = tmp_path / "r.jsonl"
    small_registry(path)
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1][:40]  # a line cut short in the middle of the file
    path.write_bytes(b"\n".join(lines))
    broken = path.read_bytes()
    reg = Registry(path)
    with pytest.raises(RegistryError, match="line 2 is unreadable"):
        external(reg, "next")
    assert path.read_bytes() == broken
    report = reg.verify()
    assert report.line == 2 and not report.torn  # the id was cut off with the line


def test_repair_completes_a_whole_entry_missing_its_newline(tmp_path):
    path = tmp_path / "r.jsonl"
    reg = small_registry(path)
    full = path.read_bytes()
    path.write_bytes(full[:-1])
    report = reg.verify()
    assert report.torn and report.tail_complete and report.id == "b-1e22"
    reg.repair()
    assert path.read_bytes() == full and reg.verify().ok


def _killable_writer(path: str, fraction: float, signal_file: str, id: str) -> None:
    os.environ[PAUSE_ENV] = repr(float(fraction))
    os.environ[PAUSE_SIGNAL_ENV] = signal_file
    # A large entry, so the pause point lands anywhere in a long line.
    external(Registry(path), id, notes="x" * 20_000)


def test_writer_killed_mid_append_never_loses_a_complete_entry(tmp_path):
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    external(reg, "seed")
    rng = np.random.default_rng(2024)
    fractions = [0.0, 1.0] + list(rng.uniform(0, 1, 48))
    outcomes = {"clean": 0, "repaired": 0}
    for k, fraction in enumerate(fractions):
        before = path.read_bytes()
        before_ids = [e.id for e in reg.entries()]
        signal_file = tmp_path / f"paused-{k}"
        proc = FORK.Process(target=_killable_writer,
                            args=(str(path), fraction, str(signal_file), f"killed-{k}"))
        proc.start()
        deadline = time.monotonic() + 30
        while not signal_file.exists():
            assert proc.is_alive() and time.monotonic() < deadline, "writer did not pause"
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
        proc.join()
        assert proc.exitcode == -signal.SIGKILL
        after = path.read_bytes()
        assert after.startswith(before)  # nothing written before the kill was touched
        report = reg.verify()
        assert report.ok or report.torn, report
        if not report.ok:
            with pytest.raises(RegistryError, match="torn"):
                external(reg, f"refused-{k}")
            assert path.read_bytes() == after
            assert reg.repair().read_bytes() == after
            outcomes["repaired"] += 1
        else:
            outcomes["clean"] += 1
        assert reg.verify().ok
        ids = [e.id for e in reg.entries()]
        assert ids[:len(before_ids)] == before_ids
        assert ids[len(before_ids):] in ([], [f"killed-{k}"])
        external(reg, f"after-{k}")  # the registry stays writable
    assert outcomes["repaired"] >= 40 and outcomes["clean"] >= 1
    assert reg.verify().ok


# --------------------------------------------------------------------------- concurrency
def _append_many(path: str, worker: int, n: int) -> None:
    reg = Registry(path)
    for i in range(n):
        external(reg, f"w{worker}-{i}", 2.0 + i * 1e-3)


def test_concurrent_appends_from_eight_processes(tmp_path):
    path = tmp_path / "r.jsonl"
    procs = [FORK.Process(target=_append_many, args=(str(path), w, 100)) for w in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * 8
    report = Registry(path).verify()
    assert report.ok and report.n_entries == 800, report
    ids = [e.id for e in Registry(path).entries()]
    assert sorted(ids) == sorted(f"w{w}-{i}" for w in range(8) for i in range(100))
    for w in range(8):  # each writer's entries keep their order
        mine = [i for i in ids if i.startswith(f"w{w}-")]
        assert mine == [f"w{w}-{i}" for i in range(100)]


# --------------------------------------------------------------------------- CLI
def test_cli_register_matches_predict_with_manifest_defaults(tmp_path, capsys):
    from delphi.cli import main as delphi_main

    assert delphi_main(["predict", "marin-moe-535b", "--json"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    reg_path = tmp_path / "r.jsonl"
    code, out, err = run_cli(capsys, "register", "marin-moe-535b", "--id", "hero", "--registry",
                             reg_path, "--author", "me", "--curve", "0.5:2.2,0.9:2.06",
                             "--target-active-params", "2.3e10", "--json")
    assert code == 0, err
    entry = json.loads(out)
    assert entry["forecast"]["loss"] == predicted["prediction"]["loss"]
    assert entry["ladder"]["sha256"] == predicted["ladder"]["sha256"]
    assert entry["fit"]["fixed"] == {"E": 1.5} and entry["target"]["active_params"] == 2.3e10
    assert entry["forecast"]["interval"] == (
        None if predicted["prediction"]["lower"] is None else entry["forecast"]["interval"])
    if entry["forecast"]["interval"] is not None:
        assert entry["forecast"]["interval"]["lower"] == predicted["prediction"]["lower"]
        assert entry["forecast"]["interval"]["method"] == predicted["prediction"]["method"]
    assert entry["forecast"]["curve"] == [[0.5, 2.2], [0.9, 2.06]]
    code, out, err = run_cli(capsys, "score", "--registry", reg_path, "--id", "hero",
                             "--actual", "2.1", "--fraction", "0.7", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert s["predicted"] == pytest.approx(np.interp(0.7, [0.5, 0.9], [2.2, 2.06]))
    assert s["rel_error"] == pytest.approx((2.1 - s["predicted"]) / s["predicted"])
    code, out, _ = run_cli(capsys, "score", "--registry", reg_path, "--id", "hero",
                           "--actual", "2.05")
    assert code == 0 and "relative" in out and "outcome hero/outcome-2" in out
    iv = Registry(reg_path).get("hero").forecast.interval
    if iv is None:
        assert "no interval" in out
    else:
        assert ("inside" if iv.lower <= 2.05 <= iv.upper else "OUTSIDE") in out
    code, out, err = run_cli(capsys, "register", "marin-moe-535b", "--id", "no-iv", "--registry",
                             reg_path, "--interval", "none", "--json")
    assert code == 0 and json.loads(out)["forecast"]["interval"] is None, err


def test_cli_external_forecast_and_errors(tmp_path, capsys):
    reg_path = tmp_path / "r.jsonl"
    code, out, err = run_cli(capsys, "register", "--external-loss", "2.598", "--external-source",
                             "issue 4447", "--target-flops", "1e21", "--id", "x", "--registry",
                             reg_path, "--external-interval", "2.55:2.65:0.9:new-run")
    assert code == 0 and "external" in out, err
    e = Registry(reg_path).get("x")
    assert e.forecast.external and e.forecast.interval.kind == "new-run"
    before = reg_path.read_bytes()
    with pytest.raises(SystemExit) as stop:     # a bad value is a usage error (exit 2)
        run_cli(capsys, "register", "--external-loss", "nan", "--external-source", "s",
                "--target-flops", "1e21", "--id", "y", "--registry", reg_path)
    assert stop.value.code == 2 and "argument --external-loss" in capsys.readouterr().err
    # flags that do not go together: usage errors (exit 2); an id taken or unknown: exit 1
    for expect, argv in ((2, ["register", "--external-loss", "2.5", "--target-flops", "1e21",
                              "--id", "y", "--registry", reg_path]),
                         (2, ["register", "marin-moe-535b", "--external-loss", "2.5",
                              "--external-source", "s", "--id", "y", "--registry", reg_path]),
                         (2, ["register", "--id", "y", "--registry", reg_path]),
                         (1, ["register", "--external-loss", "2.5", "--external-source", "s",
                              "--target-flops", "1e21", "--id", "x", "--registry", reg_path]),
                         (1, ["score", "--registry", reg_path, "--id", "zzz", "--actual", "2.5"])):
        code, out, err = run_cli(capsys, *argv)
        assert code == expect and err.startswith("delphi: error: ")
        assert len(err.splitlines()) == 1
        assert "Traceback" not in err
        assert reg_path.read_bytes() == before


def test_cli_registry_actions(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    small_registry(path)
    code, out, _ = run_cli(capsys, "registry", "list", path)
    assert code == 0 and len(out.splitlines()) == 3 and "a-1e21/outcome-1" in out
    code, out, _ = run_cli(capsys, "registry", "show", "a-1e21", path, "--json")
    d = json.loads(out)
    assert code == 0 and d["entry"]["id"] == "a-1e21" and len(d["outcomes"]) == 1
    assert d["scores"][0]["actual"] == 2.61
    code, out, _ = run_cli(capsys, "registry", "report", path)
    assert code == 0 and "| a-1e21 (external)" in out
    code, out, _ = run_cli(capsys, "registry", "report", path, "--json")
    assert json.loads(out)["final"][0]["prediction_id"] == "a-1e21"
    code, out, _ = run_cli(capsys, "registry", "verify", path)
    assert code == 0 and "OK, 3 entries" in out
    path.write_bytes(path.read_bytes().replace(b'"actual":2.61', b'"actual":2.51'))
    code, out, _ = run_cli(capsys, "registry", "verify", path, "--json")
    d = json.loads(out)
    assert code == 1 and d["line"] == 2 and d["id"] == "a-1e21/outcome-1" and not d["repairable"]
    code, _, err = run_cli(capsys, "registry", "repair", path)
    assert code == 1 and "cannot repair" in err
    code, _, err = run_cli(capsys, "registry", "list", path)
    assert code == 1 and "does not verify" in err
    code, _, err = run_cli(capsys, "registry", "verify", tmp_path / "missing.jsonl")
    assert code == 1 and "no registry" in err


def test_cli_repair(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    small_registry(path)
    good = path.read_bytes()
    path.write_bytes(good + b'{"aut')
    code, out, _ = run_cli(capsys, "registry", "verify", path)
    assert code == 1 and "line 4" in out and "repair" in out
    code, out, _ = run_cli(capsys, "registry", "repair", path)
    assert code == 0 and "backup" in out and path.read_bytes() == good
    code, out, _ = run_cli(capsys, "registry", "repair", path)
    assert code == 0 and "nothing to repair" in out


def test_add_registry_commands_returns_handlers():
    import argparse

    from delphi.cli.registry import add_commands as add_registry_commands

    parser = argparse.ArgumentParser(prog="delphi")
    handlers = add_registry_commands(parser.add_subparsers(dest="command", required=True))
    assert set(handlers) == {"register", "score", "registry"}
    args = parser.parse_args(["registry", "show", "--registry", "reg.jsonl", "--id", "an-id"])
    assert (args.command, args.registry_command, args.id, args.registry) == (
        "registry", "show", "an-id", "reg.jsonl")
    # The deprecated positional form fills the same options (even under a plain parser).
    args = parser.parse_args(["registry", "show", "an-id", "reg.jsonl"])
    assert (args.id, args.registry, args.legacy_form) == ("an-id", "reg.jsonl", "ID PATH")
    args = parser.parse_args(["register", "lad", "--id", "i", "--registry", "p", "--floor", "1.5",
                              "--target-flops", "1e23"])
    assert args.ladder == "lad" and args.floor == 1.5 and args.target_flops == 1e23


def test_delphi_cli_runs_the_registry_commands(tmp_path, capsys):
    from delphi.cli import main as delphi_main

    path = tmp_path / "r.jsonl"
    small_registry(path)
    assert delphi_main(["registry", "verify", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_entries"] == 3
    assert delphi_main(["score", "--registry", str(path), "--id", "nope", "--actual", "2"]) == 1
    assert capsys.readouterr().err.startswith("delphi: error: no prediction 'nope'")


# --------------------------------------------------------------------------- bundled history
def test_bundled_marin_registry_verifies_and_rebuilds(tmp_path):
    bundled = Registry(BUNDLED)
    report = bundled.verify()
    assert report.ok, report
    rebuilt = build_marin_registry(tmp_path / "marin.jsonl")
    assert rebuilt.verify().ok
    old, new = bundled.entries(), rebuilt.entries()
    assert [(e.id, e.kind, e.created_at) for e in old] == [(e.id, e.kind, e.created_at)
                                                            for e in new]
    for a, b in zip(old, new):
        if a.kind == "outcome":
            assert a.outcome == b.outcome
        elif a.forecast.external:
            assert a.forecast == b.forecast and a.target == b.target
        else:  # a delphi fit: same data, same forecast up to optimiser noise
            assert a.ladder == b.ladder and a.target == b.target
            assert b.forecast.loss == pytest.approx(a.forecast.loss, rel=1e-6)
    hero = bundled.get(HERO_ID)
    assert hero.forecast.loss == pytest.approx(2.041, abs=0.005)
    assert hero.target.flops == 2.61e24 and hero.fit.fixed == {"E": 1.5}
    board = bundled.report()
    assert [s.prediction_id for s in board.final] == ["marin-moe-1e21", "marin-moe-1e23"]
    assert [s.predicted for s in board.final] == [2.598, 2.252]
    assert all(s.external for s in board.final) and board.unscored == (HERO_ID,)
    assert board.final[1].rel_error == pytest.approx((board.final[1].actual - 2.252) / 2.252)


def test_bundled_registry_refuses_to_be_overwritten(tmp_path):
    shutil.copy(BUNDLED, tmp_path / "m.jsonl")
    with pytest.raises(RegistryError, match="append-only"):
        build_marin_registry(tmp_path / "m.jsonl")


# --------------------------------------------------------------------------- hardening (issue 10)
def _hashed_line(raw: dict) -> bytes:
    """A line as a writer that skips every check would write it: the hash computed here."""
    raw = {k: v for k, v in raw.items() if k != "hash"}
    body = json.dumps(raw, sort_keys=True, separators=(",", ":"))
    raw["hash"] = hashlib.sha256(body.encode()).hexdigest()
    return json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()


def _enospc_after(n_bytes: int):
    """A stand-in for core._write_all: writes ``n_bytes`` of the payload, then fails as a full
    disk does."""
    import errno

    def write_all(fd, view):
        os.write(fd, bytes(view[:n_bytes]))
        raise OSError(errno.ENOSPC, "No space left on device")
    return write_all


@pytest.mark.parametrize("fail", ["partial write", "nothing written", "fsync"])
def test_failed_append_leaves_the_file_byte_identical(tmp_path, monkeypatch, fail):
    import errno

    import delphi.registry.core as core

    path = tmp_path / "r.jsonl"
    reg = small_registry(path)
    before = path.read_bytes()
    if fail == "fsync":
        real_fsync, calls = os.fsync, []

        def fsync(fd):  # the line is written, then the disk reports an I/O error on sync
            calls.append(fd)
            if len(calls) == 1:
                raise OSError(errno.EIO, "Input/output error")
            return real_fsync(fd)
        monkeypatch.setattr(os, "fsync", fsync)
    else:
        monkeypatch.setattr(core, "_write_all", _enospc_after(40 if fail == "partial write" else 0))
    with pytest.raises(RegistryError) as info:
        external(reg, "next", notes="x" * 500)
    message = str(info.value)
    assert "\n" not in message and "nothing was written" in message and str(path) in message
    assert ("No space left" in message) != (fail == "fsync")
    assert path.read_bytes() == before
    monkeypatch.undo()
    assert reg.verify().ok and reg.verify().n_entries == 3
    external(reg, "next")  # the registry is usable once the disk has room
    assert reg.verify().n_entries == 4


def test_failed_first_append_leaves_no_file(tmp_path, monkeypatch):
    import delphi.registry.core as core

    monkeypatch.setattr(core, "_write_all", _enospc_after(10))
    path = tmp_path / "new.jsonl"
    with pytest.raises(RegistryError, match="No space left"):
        external(Registry(path), "a")
    assert not path.exists()


_FSIZE_CHILD = """
import resource, signal, sys
from delphi.cli import main
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG from write() instead of dying
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
sys.exit(main(sys.argv[2:]))
"""


def _run_with_fsize_limit(limit: int, *argv) -> "subprocess.CompletedProcess":
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", _FSIZE_CHILD, str(limit), *map(str, argv)],
                          capture_output=True, text=True, timeout=300)


def test_file_size_limit_append_via_cli_leaves_the_file_byte_identical(tmp_path):
    path = tmp_path / "r.jsonl"
    small_registry(path)
    before = path.read_bytes()
    # Room for 100 more bytes: the kernel writes them, then refuses the rest (EFBIG).
    proc = _run_with_fsize_limit(len(before) + 100, "register", "--registry", path, "--id",
                                 "big", "--external-loss", "2.5", "--external-source", "t",
                                 "--target-flops", "1e21")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "File too large" in proc.stderr and "nothing was written" in proc.stderr
    assert path.read_bytes() == before


def test_repair_on_a_full_disk_fails_in_one_line_and_leaves_no_backup(tmp_path, monkeypatch):
    import delphi.registry.core as core

    path = tmp_path / "r.jsonl"
    small_registry(path)
    path.write_bytes(path.read_bytes() + b'{"author":null,"crea')
    torn = path.read_bytes()
    monkeypatch.setattr(core, "_write_all", _enospc_after(50))
    with pytest.raises(RegistryError) as info:
        Registry(path).repair()
    assert "\n" not in str(info.value) and "no backup was left" in str(info.value)
    assert path.read_bytes() == torn
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl", "r.jsonl.lock"]
    # And through the CLI under a real file-size limit (the backup is as large as the file).
    monkeypatch.undo()
    proc = _run_with_fsize_limit(len(torn) - 10, "registry", "repair", "--registry", path)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("delphi: error: cannot repair") and "File too large" in \
        proc.stderr
    assert path.read_bytes() == torn and not list(tmp_path.glob("*.bak*"))
    assert Registry(path).repair() is not None and Registry(path).verify().ok


def _simulate_read_only(monkeypatch, folder: Path):
    """Make every open-for-writing under ``folder`` fail as on a read-only file system (works
    for root too, whom chmod does not stop)."""
    import errno

    real_open = os.open
    writing = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

    def fake_open(path, flags, *args, **kwargs):
        if flags & writing and str(Path(os.fsdecode(path)).resolve()).startswith(
                str(folder.resolve())):
            raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(path))
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", fake_open)


def test_read_only_file_system_is_a_one_line_error_at_once(tmp_path, monkeypatch):
    import errno

    path = tmp_path / "r.jsonl"
    reg = small_registry(path)
    path.write_bytes(path.read_bytes() + b'{"x')  # a torn line, so that repair must write
    before = path.read_bytes()
    (tmp_path / "r.jsonl.lock").unlink()  # the lock file must be created: it cannot be
    _simulate_read_only(monkeypatch, tmp_path)

    def no_waiting(seconds):  # filelock's retry loop sleeps: a wait fails the test at once
        raise AssertionError(f"waited {seconds} s for a lock that cannot be created")
    monkeypatch.setattr(time, "sleep", no_waiting)
    reg = Registry(path, lock_timeout=3600)
    for call in (lambda: external(reg, "x"), lambda: reg.score("b-1e22", 2.4), reg.repair):
        with pytest.raises(RegistryError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message and "another writer" not in message
        assert "cannot create its lock file" in message and "Read-only file system" in message
    assert path.read_bytes() == before and not (tmp_path / "r.jsonl.lock").exists()
    monkeypatch.undo()
    # With the lock file already there, the append itself cannot open the registry: one line.
    before = before[:-3]
    path.write_bytes(before)
    (tmp_path / "r.jsonl.lock").touch()
    real_open = os.open

    def read_only_registry(p, flags, *args, **kwargs):
        if os.fsdecode(p) == str(path) and flags & os.O_APPEND:
            raise OSError(errno.EROFS, "Read-only file system", os.fsdecode(p))
        return real_open(p, flags, *args, **kwargs)
    monkeypatch.setattr(os, "open", read_only_registry)
    with pytest.raises(RegistryError, match=r"cannot open .* for appending \(Read-only"):
        external(reg, "x")
    assert path.read_bytes() == before


def test_read_only_directory_for_real_via_cli():
    """A directory without write permission, as a user chmod applies to (root is not one:
    then the CLI runs as 'nobody' through setpriv)."""
    import subprocess
    import sys
    import tempfile

    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root (chmod does not stop root) and no setpriv to drop to "
                        "'nobody'; the simulated read-only test covers this")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    folder = Path(tempfile.mkdtemp(prefix="delphi-ro-", dir="/tmp"))
    try:
        path = folder / "r.jsonl"
        small_registry(path)
        (folder / "r.jsonl.lock").unlink()
        path.chmod(0o644)
        folder.chmod(0o555)
        before = path.read_bytes()
        argv = [*prefix, sys.executable, "-m", "delphi.cli", "register", "--registry",
                str(path), "--id", "x", "--external-loss", "2.5", "--external-source", "t",
                "--target-flops", "1e21"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                              cwd="/", env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        assert proc.returncode == 1, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert "cannot create its lock file" in proc.stderr and "another writer" not in \
            proc.stderr
        assert path.read_bytes() == before and not (folder / "r.jsonl.lock").exists()
    finally:
        folder.chmod(0o755)
        shutil.rmtree(folder)


BAD_LOSSES = [float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 1e-320, 5e-5, 100.5, 1e308,
              True, "2.5", None]


@pytest.mark.parametrize("value", BAD_LOSSES, ids=repr)
def test_bad_losses_are_refused_before_anything_is_written(tmp_path, forecast, value):
    path = tmp_path / "r.jsonl"
    reg = small_registry(path)
    before = path.read_bytes()
    calls = {
        "external loss": lambda: external(reg, "x", value),
        "delphi forecast loss": lambda: reg.register(dataclasses.replace(forecast, loss=value),
                                                     id="x"),
        "outcome": lambda: reg.score("b-1e22", value),
        "curve point": lambda: external(reg, "x", 2.5, curve=[(0.5, value), (1.0, 2.5)]),
    }
    for name, call in calls.items():
        with pytest.raises(RegistryError) as info:
            call()
        assert "\n" not in str(info.value), name
        assert path.read_bytes() == before, name


def test_loss_range_edges_are_accepted(tmp_path):
    reg = Registry(tmp_path / "r.jsonl")
    external(reg, "low", 1e-4)
    external(reg, "high", 100.0, interval=(0.0, 100.0, 0.9))
    # far off their predictions: recorded only with force (a final outcome is recorded once)
    assert reg.score("low", 100.0, force=True).rel_error == pytest.approx((100.0 - 1e-4) / 1e-4)
    assert reg.score("high", 1e-4, force=True).error == pytest.approx(1e-4 - 100.0)
    with pytest.raises(RegistryError, match=r"interval\.upper: 101 is outside"):
        external(reg, "x", 2.5, interval=(2.0, 101.0, 0.9))


def _reject_non_finite(text: str):
    def refuse(name):
        raise AssertionError(f"non-finite number {name} in JSON output")
    return json.loads(text, parse_constant=refuse)


def test_json_output_never_holds_a_non_finite_number(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    external(reg, "p", 2.5, interval=(2.4, 2.6, 0.9))
    with pytest.raises(SystemExit) as stop:     # not a loss: a usage error, refused parsing
        run_cli(capsys, "score", "--registry", path, "--id", "p", "--actual", "1e308", "--json")
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and "Infinity" not in out and "NaN" not in out
    assert json.loads(out)["error"]["type"] == "UsageError" and "neither a loss" in err
    assert reg.verify().n_entries == 1  # refused before the append
    code, out, _ = run_cli(capsys, "score", "--registry", path, "--id", "p", "--actual", "99",
                           "--force", "--json")
    sigma = 0.1 / stats.norm.ppf(0.95)
    assert code == 0 and _reject_non_finite(out)["z"] == pytest.approx((99 - 2.5) / sigma)
    # A prediction written by a writer that skips the range checks (hash computed here) whose
    # score overflows: verify names it, and the report is a one-line error naming it, never an
    # infinity.
    raw = json.loads(path.read_bytes().split(b"\n")[0])
    last_time = json.loads(path.read_bytes().split(b"\n")[-2])["created_at"]
    tiny = {**raw, "id": "tiny", "prev_hash": reg.verify().head, "created_at": last_time,
            "forecast": {**raw["forecast"], "loss": 1e-320, "interval": None}}
    path.write_bytes(path.read_bytes() + _hashed_line(tiny) + b"\n")
    tiny_head = json.loads(_hashed_line(tiny))["hash"]
    outcome = {**{k: None for k in ("author", "target", "forecast", "law", "fit", "ladder",
                                    "notes")},
               "id": "tiny/outcome-1", "kind": "outcome", "format": raw["format"],
               "created_at": last_time, "delphi_version": raw["delphi_version"],
               "outcome": {"of": "tiny", "actual": 2.5, "fraction": 1.0, "source": None},
               "prev_hash": tiny_head}
    path.write_bytes(path.read_bytes() + _hashed_line(outcome) + b"\n")
    report = Registry(path).verify()
    assert not report.ok and report.line == 3 and report.id == "tiny", report
    assert "outside the range a registry accepts" in report.problem
    code, out, err = run_cli(capsys, "registry", "report", path, "--json")
    assert code == 1 and "Infinity" not in out and "'tiny'" in (out + err)
    assert "not a finite number" in (out + err)


def test_future_timestamps_are_refused(tmp_path, capsys):
    from datetime import timedelta

    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    now = datetime.now(timezone.utc)
    external(reg, "soon", created_at=now + timedelta(minutes=1))  # clock skew: accepted
    for when in (now + timedelta(minutes=10), "9999-12-31T00:00:00Z"):
        with pytest.raises(RegistryError, match="in the future"):
            external(reg, "later", created_at=when)
        with pytest.raises(RegistryError, match="in the future"):
            reg.score("soon", 2.5, created_at=when)
    assert reg.verify().n_entries == 1
    code, _, err = run_cli(capsys, "register", "--registry", path, "--id", "y",
                           "--external-loss", "2.5", "--external-source", "t",
                           "--target-flops", "1e21", "--created-at", "9999-12-31T00:00:00Z")
    assert code == 1 and "in the future" in err and "5 minutes" in err
    # A registry whose last entry is dated in the future (by a writer that skips this check,
    # hash computed here): verify names it, and new entries are refused, not stamped after it.
    raw = json.loads(path.read_bytes().split(b"\n")[0])
    far = {**raw, "id": "far", "prev_hash": raw["hash"], "created_at": "9999-12-31T00:00:00Z"}
    path.write_bytes(path.read_bytes() + _hashed_line(far) + b"\n")
    report = Registry(path).verify()
    assert not report.ok and report.line == 2 and "in the future" in report.problem
    with pytest.raises(RegistryError, match=r"line 2 \(id far\) is dated 9999-12-31.*in the "
                                            r"future.*nothing was written"):
        external(Registry(path), "next")


def test_an_entry_after_one_dated_ahead_is_refused_not_stamped_with_its_time(tmp_path, capsys):
    """F34 (h119): after an entry dated 4 minutes ahead (allowed: clock skew), the next entry
    stamped now was silently written with that future time. It is refused, naming both times
    and the wait, and nothing is written; an explicit created_at at that time is accepted (the
    writer's claim); a last entry at most CLOCK_WAIT_SECONDS ahead is waited for, so the stamp
    is still the real time of writing."""
    from datetime import timedelta
    import time

    from delphi.registry import core

    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    ahead = (datetime.now(timezone.utc) + timedelta(minutes=4)).replace(microsecond=0)
    external(reg, "a", created_at=ahead)
    shown = ahead.isoformat().replace("+00:00", "Z")
    with pytest.raises(RegistryError, match=r"last entry \(line 1, id a\) is dated .* s ahead "
                                            r"of this machine's clock.*nothing was written"):
        external(reg, "c")
    with pytest.raises(RegistryError, match=f"Retry after {shown}"):
        reg.score("a", 2.5)
    assert [e.id for e in reg.entries()] == ["a"]                    # nothing written
    code, _, err = run_cli(capsys, "score", "--registry", path, "--id", "a", "--actual", "2.5")
    assert code == 1 and f"give --created-at {shown} (or later)" in err
    c = external(reg, "c", created_at=shown)                          # claimed explicitly
    assert c.created_at == ahead
    # A second ahead (two machines' clocks): waited for, then stamped with the real time.
    path2 = tmp_path / "s.jsonl"
    reg2 = Registry(path2)
    soon = (datetime.now(timezone.utc) + timedelta(seconds=1.5)).replace(microsecond=0)
    external(reg2, "a", created_at=soon)
    start = time.monotonic()
    b = external(reg2, "b")
    assert soon <= b.created_at <= datetime.now(timezone.utc)       # not ahead of the clock
    assert time.monotonic() - start <= core.CLOCK_WAIT_SECONDS + 1.0
    assert reg2.verify().ok


def test_a_duplicated_line_is_called_a_duplicate(tmp_path):
    path = tmp_path / "r.jsonl"
    small_registry(path)
    lines = path.read_bytes().split(b"\n")[:-1]
    for copy, where in ((lines[:2] + [lines[1]] + lines[2:], 3),   # next to itself
                        (lines + [lines[0]], 4)):                    # at the end
        path.write_bytes(b"".join(x + b"\n" for x in copy))
        report = Registry(path).verify()
        assert not report.ok and report.line == where
        original = copy.index(copy[where - 1]) + 1
        assert report.problem.startswith(f"duplicates line {original}")
        assert "reordered" not in report.problem
        with pytest.raises(RegistryError, match=f"line {where} .*duplicates line {original}"):
            external(Registry(path), "next")


def test_a_forecasts_warnings_are_recorded_with_its_notes(tmp_path):
    # A target 2,048x below the ladder's tokens per parameter is a forecast warning (issue 9);
    # the registry must keep it with the prediction, not only the notes.
    table = pd.DataFrame({"run": [f"r{i}" for i in range(5)],
                          "params": [1e8, 2e8, 4e8, 8e8, 1.6e9],
                          "tokens": [2e9, 4e9, 8e9, 1.6e10, 3.2e10],
                          "loss": [3.40, 3.20, 3.03, 2.89, 2.78]})
    table["flops"] = 6 * table["params"] * table["tokens"]
    with pytest.warns(delphi.FitWarning, match="outside the ladder's design"):
        f = delphi.predict(delphi.Ladder(table), {"params": 6.4e9, "tokens": 1.28e11 / 2048},
                           "power", fixed={"E": 1.5}, interval=None)
    assert f.warnings
    entry = Registry(tmp_path / "r.jsonl").register(f, id="w")
    assert [n for n in entry.forecast.notes if not n.startswith("warning: ")] == list(f.notes)
    assert [n[len("warning: "):] for n in entry.forecast.notes
            if n.startswith("warning: ")] == list(f.warnings)


# --------------------------------------------------------------------------- review 10 fixes
def test_created_at_without_a_time_zone_names_the_text_not_python(tmp_path, capsys):
    reg = Registry(tmp_path / "r.jsonl")
    with pytest.raises(RegistryError) as info:
        external(reg, "y", created_at="9999-12-31T00:00:00")
    assert str(info.value) == "created_at 9999-12-31T00:00:00 has no time zone; add Z or +00:00"
    with pytest.raises(RegistryError, match=r"created_at 2026-04-10T00:00:00 has no time zone"):
        external(reg, "y", created_at=datetime(2026, 4, 10))
    # the command line reads it while parsing: a usage error naming the flag (h120's F11)
    with pytest.raises(SystemExit) as stop:
        run_cli(capsys, "register", "--registry", tmp_path / "r.jsonl", "--id", "y",
                "--external-loss", "2.5", "--external-source", "s",
                "--target-flops", "1e21", "--created-at", "9999-12-31T00:00:00")
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "datetime" not in err
    assert err.strip().endswith("argument --created-at: '9999-12-31T00:00:00' has no time "
                                "zone; add Z or +00:00")


def test_counts_are_singular_for_one(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    external(reg, "one")
    code, out, _ = run_cli(capsys, "registry", "verify", path)
    assert code == 0 and f"{path}: OK, 1 entry, chain intact" in out
    external(reg, "two")
    assert ", 2 entries, chain intact" in str(reg.verify())
    path.write_bytes(path.read_bytes() + b'{"x')   # torn after 2 entries
    assert "[2 entries verified before it]" in str(reg.verify())
    one = tmp_path / "one.jsonl"
    one.write_bytes(path.read_bytes().split(b"\n")[0] + b'\n{"x')
    assert "[1 entry verified before it]" in str(Registry(one).verify())
    # The scoreboard: 1 prediction, 1 projection.
    board = tmp_path / "b.jsonl"
    external(Registry(board), "p")
    external(Registry(board), "q", kind="projection")
    markdown = Registry(board).report().to_markdown()
    assert "**0 of 1 prediction scored** (1 projection, never scored)." in markdown


def _two_entries(tmp_path) -> tuple[Path, bytes, str]:
    path = tmp_path / "r.jsonl"
    reg = Registry(path)
    external(reg, "a")
    external(reg, "b")
    data = path.read_bytes()
    # The head is the hash of the last line, computed here from its JSON, not by delphi.
    last = json.loads(data.split(b"\n")[-2])
    body = {k: v for k, v in last.items() if k != "hash"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    assert hashlib.sha256(canonical.encode()).hexdigest() == last["hash"]
    return path, data, last["hash"]


def test_expect_head_accepts_either_case_and_rejects_what_is_not_a_hash(tmp_path, capsys):
    path, _, head = _two_entries(tmp_path)
    reg = Registry(path)
    assert reg.verify(expect_head=head.upper()).ok
    assert reg.verify(expect_head=f" {head}\n").ok       # pasted with whitespace
    code, out, _ = run_cli(capsys, "registry", "verify", path, "--expect-head", head.upper())
    assert code == 0 and "OK, 2 entries" in out
    for bad in (head[:8], "abc", "", head + "0", "g" * 64):
        with pytest.raises(RegistryError, match="is not a head hash: give all 64 hexadecimal"):
            reg.verify(expect_head=bad)
        with pytest.raises(SystemExit) as info:
            registry_main(["registry", "verify", str(path), "--expect-head", bad])
        _, err = capsys.readouterr()
        assert info.value.code == 2 and "64 hexadecimal digits" in err
        assert "removed from the end" not in err
    # A well-formed head that is not in the file is still the tampering message.
    with pytest.raises(AssertionError):
        assert reg.verify(expect_head="f" * 64).ok
    assert "removed from the end" in reg.verify(expect_head="f" * 64).problem


def test_trailing_blank_lines_are_reported_and_repaired(tmp_path, capsys):
    path, good, head = _two_entries(tmp_path)
    path.write_bytes(good + b"\n \n")               # `echo >>` twice, one with a space
    report = Registry(path).verify()
    assert not report.ok and report.repairable and not report.torn
    assert report.line == 3 and report.n_entries == 2
    assert "the file ends with 2 blank lines" in report.problem
    # Reading commands still list the entries (and exit 1 because the file does not verify).
    code, out, err = run_cli(capsys, "registry", "list", path)
    assert code == 1 and len(out.splitlines()) == 2 and "2 blank lines" in err
    code, out, _ = run_cli(capsys, "registry", "repair", path)
    assert code == 0 and "stripped 2 trailing blank lines" in out
    assert path.read_bytes() == good
    assert Path(str(path) + ".bak").read_bytes() == good + b"\n \n"
    assert Registry(path).verify(expect_head=head).ok
    external(Registry(path), "c")                   # appends work again


def test_crlf_line_endings_are_named_and_converted_back(tmp_path, capsys):
    path, good, head = _two_entries(tmp_path)
    crlf = good.replace(b"\n", b"\r\n")             # what git autocrlf does on checkout
    path.write_bytes(crlf)
    code, out, _ = run_cli(capsys, "registry", "verify", path)
    assert code == 1 and "CRLF line endings (e.g. from git autocrlf)" in out
    assert "not in canonical form" not in out and "registry repair" in out
    assert Registry(path).verify().fix is not None
    code, out, _ = run_cli(capsys, "registry", "repair", path, "--json")
    d = json.loads(out)
    assert code == 0 and d["repaired"] and d["after"]["ok"] and d["after"]["head"] == head
    assert path.read_bytes() == good and Path(d["backup"]).read_bytes() == crlf
    # CRLF plus real damage: the damage is reported, with the line endings mentioned, and
    # repair refuses (it cannot fix tampering).
    lines = good.split(b"\n")
    tampered = lines[0].replace(b'"loss":2.5', b'"loss":2.4') + b"\n" + b"\n".join(lines[1:])
    path.write_bytes(tampered.replace(b"\n", b"\r\n"))
    report = Registry(path).verify()
    assert report.line == 1 and "altered" in report.problem and "CRLF" in report.problem
    assert not report.repairable
    with pytest.raises(RegistryError, match="cannot repair"):
        Registry(path).repair()


@pytest.mark.parametrize("content, fragment", [
    (b"j\xd6\xab\x92\xec\xdd\xed\x06C|M\n", "line 1 is not valid JSON"),
    (b"[1, 2]\n", "line 1 is not a JSON object"),
    (b'{"id": "a"}\n\n', "line 1 is not a valid entry"),
])
def test_list_and_report_on_a_corrupt_file_use_verify_words(tmp_path, capsys, content,
                                                             fragment):
    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    for action in ("list", "report", "show"):
        argv = ["registry", action] + (["x"] if action == "show" else []) + [path]
        code, out, err = run_cli(capsys, *argv)
        assert code == 1 and out == ""
        assert fragment in err and "registry verify" in err
        assert "Invalid JSON" not in err and "(got b" not in err and "\\x" not in err


def test_a_byte_order_mark_is_named(tmp_path, capsys):
    path, good, _ = _two_entries(tmp_path)
    path.write_bytes(b"\xef\xbb\xbf" + good)
    code, _, err = run_cli(capsys, "registry", "list", path)
    assert code == 1 and "byte-order mark" in err and "(got b" not in err
    assert "byte-order mark" in Registry(path).verify().problem
    Registry(path).repair()
    assert path.read_bytes() == good


def test_a_held_lock_prints_a_note_while_waiting(tmp_path, capsys, monkeypatch):
    import threading

    from filelock import FileLock

    import delphi.registry.core as core

    path = tmp_path / "r.jsonl"
    external(Registry(path), "a")
    monkeypatch.setattr(core, "LOCK_NOTE_AFTER", 0.1)
    other = FileLock(str(path) + ".lock", thread_local=False)  # released by a timer thread
    # API: the note goes to on_wait; the wait then times out.
    notes: list[str] = []
    other.acquire()
    try:
        with pytest.raises(RegistryError, match="could not lock"):
            external(Registry(path, lock_timeout=0.3, on_wait=notes.append), "b")
    finally:
        other.release()
    assert len(notes) == 1 and notes[0].startswith("waiting for the registry lock held by "
                                                   "another writer")
    # CLI: the note on stderr, then the append goes through once the other writer is done.
    for quiet in (False, True):
        other.acquire()
        timer = threading.Timer(0.5, other.release)
        timer.start()
        try:
            code, out, err = run_cli(capsys, *(["-q"] if quiet else []), "register",
                                     "--registry", path, "--id", f"c{int(quiet)}",
                                     "--external-loss", "2.5", "--external-source", "s",
                                     "--target-flops", "1e21")
        finally:
            timer.join()
        assert code == 0 and "registered" in out
        assert ("waiting for the registry lock held by another writer" in err) is not quiet
    # No note when nobody holds the lock.
    code, _, err = run_cli(capsys, "score", "--registry", path, "--id", "a", "--actual", "2.5")
    assert code == 0 and "waiting" not in err


def test_registry_show_prints_a_summary_not_the_whole_entry(capsys):
    # a new user's: `registry show` without --json printed the entry's whole JSON (a curve
    # prediction's: ~4,000 lines, 188 kB) before its scores
    code, out, _ = run_cli(capsys, "registry", "show", "--registry", BUNDLED,
                           "--id", "marin-535b-a23b")
    assert code == 0
    head = out.split("\n\n")[0].splitlines()
    assert [ln.split()[0] for ln in head] == ["entry", "target", "ladder", "law", "forecast",
                                              "hash", "full"]
    assert head[4].startswith("forecast   2.0414 nats/token, no interval, 1.89e+03x")
    assert "law        power: L(C) = E + A * C^(-alpha); A=83.04, E=1.5" in head[3]
    assert not out.lstrip().startswith("{")
    code, out, _ = run_cli(capsys, "registry", "show", "--registry", BUNDLED,
                           "--id", "marin-moe-1e21/outcome-1")
    assert code == 0 and "outcome    actual 2.599 at fraction 1 of marin-moe-1e21" in out
    code, out, _ = run_cli(capsys, "registry", "show", "--registry", BUNDLED,
                           "--id", "marin-moe-1e21", "--json")
    assert code == 0 and json.loads(out)["entry"]["id"] == "marin-moe-1e21"


def test_a_registry_named_dash_or_empty_is_refused(tmp_path, monkeypatch, capsys):
    # a pipe user's: `delphi register --registry - ...` appended to a file named '-'
    monkeypatch.chdir(tmp_path)
    for bad in ("-", ""):
        with pytest.raises(RegistryError, match=r"a registry is a file \(appended to, then read "
                                                r"back\): '-?' cannot be one"):
            Registry(bad)
    code, _, err = run_cli(capsys, "registry", "list", "--registry", "-")
    assert code == 1 and "standard input and output are not files" in err
    assert not (tmp_path / "-").exists()


def test_a_score_far_off_its_prediction_asks_about_the_unit():
    # a new user's: an actual in bits/byte scored against a nats/token forecast was reported
    # as a -63% miss with no word on the likely cause
    from delphi.registry.scoring import Score

    def score(actual):
        return Score(prediction_id="p", outcome_id="p/outcome-1", fraction=1.0, actual=actual,
                     predicted=2.8, error=actual - 2.8, rel_error=actual / 2.8 - 1,
                     abs_error=abs(actual - 2.8), interval=None, inside=None, z=None, pit=None,
                     no_interval_reason="none", external=False, target_name=None,
                     unit="nats/token", source=None)
    far = score(1.05).report()
    assert ("check      the actual is 0.375x the prediction: another unit or metric? The "
            "prediction is in nats/token") in far
    assert "check" not in score(2.9).report()
