"""W&B runs tables read without a manifest, and TensorBoard event directories (issue 12, CLI).

The runs table is synthetic with the column names of Marin's W&B exports
(``../shared/ladders/marin_isoflop_2026/isoflop-*.csv``: ``Name``, ``parameter_count``,
``throughput/total_tokens``, ``eval/paloma/macro_loss``, ``throughput/total_gflops``,
``optimizer.learning_rate``...) preceded by the columns W&B's UI export writes (``Name``,
``State``, ``Notes``, ``User``, ``Tags``, ``Created``, ``Runtime``, ``Sweep``). Losses follow a
known power law in C, so the forecast is checked against the law itself.

TensorBoard event files are written with TensorBoard's own event writer and protos (no
TensorFlow), as PyTorch's and TF2's writers lay them out.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import delphi
from delphi.cli import main
from delphi.errors import LadderError, LadderWarning
from delphi.readers import load_ladder
from delphi.readers.wandb import is_runs_table

from bundled import KNOWN_LOAD_WARNINGS, expect_warnings, load

# ---------------------------------------------------------------- a W&B runs table
E, A, ALPHA = 1.8, 300.0, 0.1          # the law the synthetic losses follow: E + A C^-alpha
SIZES = [2e7, 5e7, 1e8, 2e8, 5e8, 1e9, 2e9]


def law(c):
    return E + A * np.asarray(c, dtype=float) ** -ALPHA


def runs_table(states=None, extra=None) -> pd.DataFrame:
    """One row per run as W&B's "Export CSV" writes it; D = 20 N, C = 6 N D (in GFLOPs)."""
    n = np.array(SIZES)
    d = 20 * n
    c = 6 * n * d
    states = states or ["finished"] * len(n)
    frame = pd.DataFrame({
        "Name": [f"isoflop-d{int(x / 1e6)}m-dclm" for x in n], "State": states,
        "Notes": "-", "User": "someone", "Tags": "isoflop,dclm",
        "Created": "2025-06-01T10:00:00.000Z", "Runtime": 3600, "Sweep": "",
        "parameter_count": n, "throughput/total_tokens": d,
        "eval/paloma/macro_loss": law(c), "throughput/total_gflops": c / 1e9,
        "optimizer.learning_rate": 3e-3, "trainer.train_batch_size": 64})
    for k, v in (extra or {}).items():
        frame[k] = v
    return frame


def write_csv(tmp_path, frame, name="runs.csv") -> Path:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("header, expected", [
    (["Name", "State", "parameter_count", "eval/paloma/macro_loss"], True),
    (["Name", "State", "Created", "Runtime", "n_layers", "acc"], True),     # W&B's own columns
    (["name", "state", "flops", "loss"], True),                             # any case
    (["run", "Name", "State", "flops", "loss"], False),                     # a tidy table
    (["Name", "throughput/total_gflops", "eval/loss"], True),    # no State: loss and C
    (["Name", "parameter_count", "eval/loss"], False),            # no State, no D or C
    (["Name", "State", "colour"], False),                                   # nothing to fit
])
def test_runs_table_header_detection(header, expected):
    assert is_runs_table(header) is expected


def test_columns_mapping_a_name_column_to_run_reads_a_tidy_table(tmp_path):
    # A tidy table whose run names sit in a `name` column looks like a trimmed W&B export;
    # `--columns run=name,...` used to be refused ("columns= is for tidy tables").
    frame = pd.DataFrame({"name": ["a", "b", "c", "d"], "n_params": [1e8, 2e8, 4e8, 8e8],
                          "D": [2e9, 4e9, 8e9, 1.6e10], "C": [1.2e18, 4.8e18, 1.92e19, 7.68e19],
                          "val_loss": [3.4, 3.1, 2.9, 2.75]})
    path = write_csv(tmp_path, frame)
    mapping = {"run": "name", "params": "n_params", "tokens": "D", "flops": "C",
               "loss": "val_loss"}
    ladder = load_ladder(path, columns=mapping)
    table = ladder.table.sort_values("run")
    assert list(table["run"]) == ["a", "b", "c", "d"]
    assert list(table["loss"]) == [3.4, 3.1, 2.9, 2.75]
    assert list(table["params"]) == [1e8, 2e8, 4e8, 8e8]
    # Without a run mapping it is still a runs table, and the error says how to read it tidy.
    with pytest.raises(LadderError, match=r"map its run names too, e\.g\. run=Name"):
        load_ladder(path, columns={"params": "n_params"})


def test_runs_table_is_read_by_load_ladder_without_a_manifest(tmp_path):
    path = write_csv(tmp_path, runs_table())
    ladder = load_ladder(path)
    names = [f"isoflop-d{int(x / 1e6)}m-dclm" for x in SIZES]
    assert sorted(ladder.runs) == sorted(names)
    t = ladder.table.set_index("run").loc[names]
    assert np.allclose(t["params"], SIZES)
    assert np.allclose(t["tokens"], [20 * x for x in SIZES])
    # throughput/total_gflops is GFLOPs: x 1e9 gives 6 N D
    assert np.allclose(t["flops"], [6 * x * 20 * x for x in SIZES], rtol=1e-12)
    assert ladder.metric == "eval/paloma/macro_loss"
    assert ladder.exclusions == []
    # A tidy CSV still reads as before.
    tidy = write_csv(tmp_path, pd.DataFrame({"run": ["a", "b"], "flops": [1e18, 1e19],
                                             "loss": [3.0, 2.8]}), "tidy.csv")
    assert load_ladder(tidy).runs == ["a", "b"]


@pytest.mark.shared_data
def test_marin_export_without_state_reads_as_its_bundled_manifest(data_dir):
    # Marin's export has no State column (every run finished): read directly, it is the
    # same ladder as the bundled manifest that maps its columns by hand, with the same
    # warnings about its FLOP counts.
    with expect_warnings(LadderWarning,
                         *map(re.escape, KNOWN_LOAD_WARNINGS["marin-isoflop-dclm"])):
        raw = load_ladder(data_dir / "marin_isoflop_2026" / "isoflop-dclm.csv")
    bundled = load("marin-isoflop-dclm")
    cols = ["run", "params", "tokens", "flops", "loss"]
    a = raw.table[cols].sort_values("run").reset_index(drop=True)
    b = bundled.table[cols].sort_values("run").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    assert raw.exclusions == []


def test_states_stopped_runs_are_excluded_with_their_state_and_running_is_unfinished(tmp_path):
    states = ["finished", "crashed", "finished", "running", "failed", "finished", "killed"]
    frame = runs_table(states)
    frame.loc[4, "eval/paloma/macro_loss"] = np.nan      # a failed run often has no eval
    path = write_csv(tmp_path, frame)
    ladder = load_ladder(path)
    names = frame["Name"].tolist()
    excluded = {e.run: e.reason for e in ladder.exclusions}
    assert set(excluded) == {names[1], names[4], names[6]}
    for pos, state in ((1, "crashed"), (4, "failed"), (6, "killed")):
        assert f"State {state!r}" in excluded[names[pos]]
        assert f"row {pos}" in excluded[names[pos]]
    pts, dropped = ladder.final_points()
    assert sorted(pts["run"]) == sorted([names[0], names[2], names[5]])
    assert [e.run for e in dropped] == [names[3]]
    assert "unfinished" in dropped[0].reason and "State 'running'" in dropped[0].reason


def test_a_table_whose_runs_all_crashed_says_so_not_no_rows(tmp_path):
    frame = runs_table(["crashed"] * len(SIZES))
    with pytest.raises(LadderError) as err:
        load_ladder(write_csv(tmp_path, frame))
    text = str(err.value)
    assert f"all {len(SIZES)} run(s) were excluded while reading" in text
    assert frame["Name"].iloc[0] in text and "State 'crashed'" in text


def test_a_finished_run_without_the_metric_is_excluded_with_its_state(tmp_path):
    frame = runs_table()
    frame.loc[2, "eval/paloma/macro_loss"] = np.nan
    ladder = load_ladder(write_csv(tmp_path, frame))
    [excl] = ladder.exclusions
    assert excl.run == frame["Name"][2]
    assert excl.reason == "no eval/paloma/macro_loss value (State 'finished', row 2)"


def test_metric_picks_the_loss_column(tmp_path):
    c4 = [3.1, 3.0, 2.9, 2.8, 2.7, 2.6, 2.5]
    frame = runs_table(extra={"eval/paloma/c4_en/loss": c4, "train/loss": 9.0})
    path = write_csv(tmp_path, frame)
    default = load_ladder(path).table.set_index("run")["loss"]     # eval/paloma/macro_loss
    assert np.allclose([default[n] for n in frame["Name"]], law(6 * 20 * np.array(SIZES) ** 2))
    chosen = load_ladder(path, metric="eval/paloma/C4_EN/loss")       # headers ignore case
    assert chosen.metric == "eval/paloma/c4_en/loss"
    by_run = chosen.table.set_index("run")["loss"]
    assert [by_run[n] for n in frame["Name"]] == c4


def test_duplicate_names_become_separate_runs_with_a_note(tmp_path):
    frame = runs_table()
    frame.loc[3, "Name"] = frame.loc[1, "Name"]
    with pytest.warns(delphi.errors.LadderWarning, match="appear more than once"):
        ladder = load_ladder(write_csv(tmp_path, frame))
    assert f"{frame['Name'][1]} #2" in ladder.runs
    assert len(ladder.runs) == len(SIZES)


def test_no_n_d_or_c_names_what_was_looked_for_and_what_the_file_has(tmp_path):
    frame = runs_table().drop(columns=["parameter_count", "throughput/total_tokens",
                                       "throughput/total_gflops"])
    frame["model_size_m"] = 1.0
    with pytest.raises(LadderError) as info:
        load_ladder(write_csv(tmp_path, frame))
    msg = str(info.value)
    for fragment in ("W&B runs table", "parameter_count", "throughput/total_tokens",
                     "throughput/total_gflops", "model_size_m", "--metric", "manifest",
                     'reader = "wandb"'):
        assert fragment in msg, fragment


def test_no_known_loss_column_lists_the_loss_like_ones_and_suggests_metric(tmp_path):
    frame = runs_table().rename(columns={"eval/paloma/macro_loss": "eval/c4/bpb"})
    frame["eval/c4/bpb"] /= 5           # 0.9..1.6: bits per byte (above 2 is warned about)
    with pytest.raises(LadderError, match=r"loss-like columns: eval/c4/bpb.*--metric"):
        load_ladder(write_csv(tmp_path, frame))
    # Named with --metric it is read, in bits per byte (its name says so).
    with pytest.warns(LadderWarning, match=r"metric 'eval/c4/bpb' is named as bits per byte: "
                                           r"its unit is taken as bits/byte"):
        ladder = load_ladder(tmp_path / "runs.csv", metric="eval/c4/bpb")
    assert ladder.unit == "bits/byte"


def test_cli_predict_runs_table_json(tmp_path, capsys):
    states = ["finished"] * 5 + ["crashed", "running"]
    path = write_csv(tmp_path, runs_table(states))
    target = 1e22
    code = main(["predict", str(path), "--law", "power", "--target-flops", f"{target:g}",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    # The five finished runs lie on the law exactly: the fit recovers it.
    assert out["prediction"]["loss"] == pytest.approx(float(law(target)), rel=2e-3)
    reasons = {e["run"]: e["reason"] for e in out["fit"]["excluded"]}
    names = runs_table()["Name"]
    assert "State 'crashed'" in reasons[names[5]]
    assert "State 'running'" in reasons[names[6]]
    assert out["fit"]["n_runs"] == 5


def test_cli_error_for_a_runs_table_without_n_d_c(tmp_path, capsys):
    frame = runs_table().drop(columns=["parameter_count", "throughput/total_tokens",
                                       "throughput/total_gflops"])
    code = main(["predict", str(write_csv(tmp_path, frame)), "--target-flops", "1e22",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["error"]["type"] == "LadderError"
    assert "parameter_count" in out["error"]["message"]


# ---------------------------------------------------------------- TensorBoard event directories
def _need_tbparse():
    try:
        import tbparse  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("tbparse is in the test extra: CI must run the TensorBoard tests")
        pytest.skip("tbparse not installed (pip install -e '.[test]')")


def write_events(folder: Path, scalars: dict[str, list[tuple[int, float]]],
                 hparams: dict | None = None, tensors: bool = False) -> None:
    """Write one event file: ``{tag: [(step, value)]}`` as ``simple_value`` scalars (PyTorch,
    tensorboardX) or, with ``tensors``, as scalar tensors (TF2); hparams as the HParams
    plugin's session start info."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.hparams import metadata, plugin_data_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboard.util import tensor_util

    writer = EventFileWriter(str(folder))
    t0 = time.time()
    for tag, points in scalars.items():
        for i, (step, value) in enumerate(points):
            if tensors:
                meta = summary_pb2.SummaryMetadata(
                    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
                val = summary_pb2.Summary.Value(tag=tag, metadata=meta,
                                                tensor=tensor_util.make_tensor_proto(value))
            else:
                val = summary_pb2.Summary.Value(tag=tag, simple_value=value)
            writer.add_event(event_pb2.Event(wall_time=t0 + i, step=step,
                                             summary=summary_pb2.Summary(value=[val])))
    if hparams:
        ssi = plugin_data_pb2.SessionStartInfo(start_time_secs=t0)
        for k, v in hparams.items():
            if isinstance(v, str):
                ssi.hparams[k].string_value = v
            else:
                ssi.hparams[k].number_value = v
        md = metadata.create_summary_metadata(plugin_data_pb2.HParamsPluginData(
            session_start_info=ssi))
        val = summary_pb2.Summary.Value(tag=metadata.SESSION_START_INFO_TAG, metadata=md,
                                        tensor=metadata.NULL_TENSOR)
        writer.add_event(event_pb2.Event(wall_time=t0, step=0,
                                         summary=summary_pb2.Summary(value=[val])))
    writer.close()


STEPS = [200, 400, 600, 800, 1000]
BATCH = 2 ** 20                    # tokens per step


def curve(n, steps=STEPS):
    """Synthetic eval loss: L = 1.8 + 400 N^-0.3 + 300 D^-0.3 at D = step x BATCH."""
    return [(s, 1.8 + 400 * n ** -0.3 + 300 * (s * BATCH) ** -0.3) for s in steps]


def test_tensorboard_runs_give_one_curve_per_run(tmp_path):
    _need_tbparse()
    sizes = {"d256": 2e7, "d512": 8e7, "d1024": 3e8}
    for name, n in sizes.items():
        write_events(tmp_path / "logs" / name,
                     {"eval/loss": curve(n), "train/loss": [(s, 9.0) for s in STEPS],
                      "train/tokens": [(s, float(s * BATCH)) for s in range(100, 1001, 100)]},
                     hparams={"num_params": n, "lr": 1e-3, "optimizer": "adamw"})
    # Neither the logs nor the hparams say whether a run finished: said, and counted finished.
    no_state = r"TensorBoard logs carry no run state; every run counts as finished"
    with pytest.warns(LadderWarning, match=no_state):
        ladder = load_ladder(tmp_path / "logs", format="tensorboard", metric="eval/loss")
    assert sorted(ladder.runs) == sorted(sizes)
    assert ladder.metric == "eval/loss" and ladder.name == "logs"
    for name, n in sizes.items():
        t = ladder.table[ladder.table["run"] == name].sort_values("step")
        assert t["step"].tolist() == STEPS                     # one row per logged loss
        assert np.allclose(t["loss"], [v for _, v in curve(n)])
        assert np.allclose(t["tokens"], [s * BATCH for s in STEPS])
        assert (t["params"] == n).all() and (t["peak_lr"] == 1e-3).all()
    # The default loss tag is eval/loss, not train/loss; a directory is detected without format.
    with pytest.warns(LadderWarning, match=no_state):
        auto = load_ladder(tmp_path / "logs")
    assert auto.metric == "eval/loss" and len(auto.table) == 3 * len(STEPS)


def test_tensorboard_tf2_tensor_scalars_and_a_side_table(tmp_path):
    _need_tbparse()
    logs = tmp_path / "logs"
    write_events(logs / "small", {"val_loss": curve(2e7)}, tensors=True)
    write_events(logs / "big", {"val_loss": curve(2e8, STEPS[:3])}, tensors=True)
    # Run totals: D at a step = tokens x step / total_steps; "big" stopped at 600 of 1000.
    pd.DataFrame({"run": ["small", "big"], "params": [2e7, 2e8],
                  "tokens": [1000 * BATCH, 1000 * BATCH],
                  "total_steps": [1000, 1000]}).to_csv(logs / "runs.csv", index=False)
    with pytest.warns(LadderWarning, match=r"2 run\(s\) log no tokens per step \('big', "
                                           r"'small'\): D at each step is their total x step"):
        ladder = load_ladder(logs, format="tensorboard")
    assert ladder.metric == "val_loss"
    big = ladder.table[ladder.table["run"] == "big"].sort_values("step")
    assert np.allclose(big["tokens"], [s * BATCH for s in STEPS[:3]])
    pts, dropped = ladder.final_points()
    assert pts["run"].tolist() == ["small"]
    assert [e.run for e in dropped] == ["big"] and "unfinished" in dropped[0].reason


def test_tensorboard_run_totals_without_steps_are_an_error(tmp_path):
    _need_tbparse()
    write_events(tmp_path / "logs" / "r", {"eval/loss": curve(2e7)},
                 hparams={"params": 2e7, "tokens": 1e9})
    with pytest.raises(LadderError, match=r"run 'r': tokens = 1e\+09 \(hparam 'tokens'\) is "
                                          r"the run's total.*total_steps"):
        load_ladder(tmp_path / "logs", format="tensorboard")


def test_tensorboard_without_n_and_d_names_runs_and_what_it_looked_for(tmp_path):
    _need_tbparse()
    write_events(tmp_path / "logs" / "r1", {"eval/loss": curve(2e7), "grad_norm": [(1, 1.0)]})
    with pytest.raises(LadderError) as info:
        load_ladder(tmp_path / "logs", format="tensorboard")
    msg = str(info.value)
    for fragment in ("'r1' (no params, tokens)", "num_params", "train/tokens", "grad_norm",
                     "runs.csv"):
        assert fragment in msg, fragment


def test_tensorboard_metric_errors_list_loss_like_tags(tmp_path):
    _need_tbparse()
    write_events(tmp_path / "logs" / "r1", {"eval/c4_loss": curve(2e7)})
    with pytest.raises(LadderError, match=r"no loss tag we know.*loss-like tags: eval/c4_loss"
                                          r".*--metric"):
        load_ladder(tmp_path / "logs", format="tensorboard")
    with pytest.raises(LadderError, match=r"no run logs the tag 'eval/pile'"):
        load_ladder(tmp_path / "logs", format="tensorboard", metric="eval/pile")


def test_tensorboard_not_a_directory_or_no_events(tmp_path):
    _need_tbparse()
    (tmp_path / "empty").mkdir()
    with pytest.raises(LadderError, match="no events.out.tfevents"):
        load_ladder(tmp_path / "empty", format="tensorboard")
    f = tmp_path / "x.csv"
    f.write_text("run,flops,loss\na,1e18,3\n")
    with pytest.raises(LadderError, match="not a directory"):
        load_ladder(f, format="tensorboard")


def test_tensorboard_corrupt_event_files_are_named(tmp_path):
    _need_tbparse()
    (tmp_path / "logs" / "r1").mkdir(parents=True)
    rng = np.random.default_rng(0)
    (tmp_path / "logs" / "r1" / "events.out.tfevents.1.host").write_bytes(rng.bytes(300))
    with pytest.raises(LadderError, match=r"the 1 event file\(s\) under it hold no scalars"):
        load_ladder(tmp_path / "logs", format="tensorboard")


def test_a_directory_without_event_files_is_still_refused_as_a_directory(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "runs.csv").write_text("run,flops,loss\na,1e18,3\n")
    with pytest.raises(LadderError, match="is a directory; give a manifest"):
        load_ladder(tmp_path / "data")


def test_tensorboard_without_tbparse_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "tbparse", None)       # import tbparse -> ImportError
    (tmp_path / "logs").mkdir()
    with pytest.raises(LadderError, match=r'pip install "delphi-scaling\[tensorboard\]"'):
        load_ladder(tmp_path / "logs", format="tensorboard")


# The CLI asks delphi.readers.is_data_source() (delphi/cli/options.py load_with_defaults and
# analyses.py _manifest_target), so a TensorBoard directory is not looked up as a manifest.
def test_cli_predict_tensorboard_json(tmp_path, capsys):
    _need_tbparse()
    # Final losses on a power law in C (D = 20 N); curves end at step 1000.
    for n in (1e7, 3e7, 1e8, 3e8, 1e9):
        c = 6 * n * 20 * n
        write_events(tmp_path / "logs" / f"n{n:.0e}",
                     {"eval/loss": [(500, float(law(c)) + 0.2), (1000, float(law(c)))]},
                     hparams={"params": n, "tokens": 20 * n, "total_steps": 1000})
    code = main(["predict", str(tmp_path / "logs"), "--format", "tensorboard", "--metric",
                 "eval/loss", "--law", "power", "--target-flops", "1e22", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert out["prediction"]["loss"] == pytest.approx(float(law(1e22)), rel=2e-3)
    assert out["fit"]["n_runs"] == 5
